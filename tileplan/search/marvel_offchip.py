"""MARVEL's off-chip subspace (§3.1): level-3 (DRAM) tile sizes x data layouts, costed by the
distinct-block (DB) model, then the level-3 inter-tile order from the cost's slopes.

The DB cost of a tiling is the number of DRAM blocks (bursts of ``arch.dram.burst_bytes``) that the
tiles touch when every tile loads all of its data: per operand, the model's bursts of one sweep of
its tiles (``cost.model.sweep``, exact for the chosen layout) times the trips of the loops that do
not index it. It is the model's block count, not a separate formula. Candidates must fit the
on-chip memories (double-buffered when the arch is). Layouts: per tensor the choice of innermost
dimension (the order of the others does not change the block count's leading term; 36 choices for
batch 1), or every permutation on request.

The order: MARVEL evaluates the partial derivatives of the DB cost at the optimum and puts the loop
with the most negative slope innermost. Here the slope along a dimension is the finite difference
to the next larger (else the next smaller) candidate tile size. Beyond the paper, the order is also
checked against the best order found exhaustively (the 16 reuse classes of ``search.space``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.cost import kernel
from tileplan.cost.batch import MappingBatch
from tileplan.cost.fit import fits
from tileplan.cost.model import finish, sweep
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.errors import InfeasibleError
from tileplan.mapping import DEFAULT_LAYOUTS, LAYOUT_LETTERS, Mapping, layout_options
from tileplan.search.feasibility import raise_infeasible
from tileplan.search.space import class_orders

_RELEVANT = np.array([[d in RELEVANT[op] for d in DIMS] for op in OPERANDS], dtype=bool)


def tile_values(length: int, divisors: bool) -> np.ndarray:
    """Candidate tile sizes of a ``length``-long dimension: its divisors (no prologue/epilogue) or all."""
    values = range(1, length + 1)
    return np.array([v for v in values if not divisors or length % v == 0], dtype=np.int64)


def innermost_layouts(problem: Problem) -> list[list[str]]:
    """Per tensor one layout per possible innermost dimension (dimensions of size 1 skipped), the
    others in default order: 4 x 3 x 3 = 36 for a batch-1 convolution."""
    sizes = {Operand.INPUT: {"N": problem.dims[Dim.N], "C": problem.dims[Dim.C] * problem.dims[Dim.G],
                             "H": problem.in_h, "W": problem.in_w},
             Operand.WEIGHT: {"K": problem.dims[Dim.K] * problem.dims[Dim.G], "C": problem.dims[Dim.C],
                              "R": problem.dims[Dim.R], "S": problem.dims[Dim.S]},
             Operand.OUTPUT: {"N": problem.dims[Dim.N], "K": problem.dims[Dim.K] * problem.dims[Dim.G],
                              "P": problem.dims[Dim.P], "Q": problem.dims[Dim.Q]}}
    per_op = []
    for op in OPERANDS:
        default = DEFAULT_LAYOUTS[op]
        inner = [x for x in LAYOUT_LETTERS[op] if sizes[op][x] > 1] or [default[-1]]
        per_op.append([default.replace(x, "") + x for x in inner])
    return per_op


def all_layouts() -> list[list[str]]:
    """Every permutation of every tensor (24 each)."""
    return [layout_options(op) for op in OPERANDS]


def _batch(tiles: np.ndarray, codes: np.ndarray) -> MappingBatch:
    n = len(tiles)
    return MappingBatch(tiles, np.broadcast_to(np.arange(NDIMS), (n, NDIMS)).copy(),
                        np.zeros((n, 3, NDIMS), dtype=bool), np.ones((n, NDIMS), dtype=np.int64), codes,
                        (1,) * NDIMS, (1,) * NDIMS)


def db_blocks(problem: Problem, tiles: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(DB blocks, fits the on-chip memories) of each row (tiles (n, 8), layout codes (n, 3))."""
    sw = sweep(problem, _batch(tiles, codes))
    trips = -(-problem.dims[None, :] // np.minimum(tiles, problem.dims))
    total = np.zeros(len(tiles))
    for op in OPERANDS:  # one core (MARVEL's accelerators are single-core): one shape
        others = np.prod(np.where(_RELEVANT[op], 1, trips), axis=1)
        total += sw.pi[0, kernel.F_BURSTS + op] * others
    return total, sw.feasible


def layout_blocks(problem: Problem, tiles: np.ndarray, layouts: list[list[str]]) -> list[np.ndarray]:
    """Per tensor, (n, len(layouts[op])) DB blocks it contributes to each tiling in each of its layouts.

    The block count is a sum over operands of (bursts of one sweep of the operand's tiles, which
    depends on its own layout and the tiles of the dimensions indexing it) x (trips of the other
    loops), so each operand is costed on its distinct relevant tiles alone.
    """
    n = len(tiles)
    trips = -(-problem.dims[None, :] // np.minimum(tiles, problem.dims))
    out = []
    for op in OPERANDS:
        options = layouts[op]
        if not problem.has_operand[op]:
            out.append(np.zeros((n, len(options))))
            continue
        sub = np.where(_RELEVANT[op], tiles, 1)
        uniq, inverse = np.unique(sub, axis=0, return_inverse=True)
        codes = np.zeros((len(uniq) * len(options), 3), dtype=np.int64)
        codes[:, op] = np.tile([layout_options(op).index(x) for x in options], len(uniq))
        sw = sweep(problem, _batch(np.repeat(uniq, len(options), axis=0), codes))
        bursts = sw.pi[0, kernel.F_BURSTS + op].reshape(len(uniq), len(options))
        others = np.prod(np.where(_RELEVANT[op], 1, trips), axis=1)
        out.append(bursts[inverse.reshape(-1)] * others[:, None].astype(np.float64))
    return out


def best_layouts(problem: Problem, tiles: np.ndarray, layouts: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """(fewest DB blocks, (n, 3) index into ``layouts[op]`` per tensor) of each tiling, over every
    combination of the per-tensor layout choices ``layouts`` (the choice is separable by tensor)."""
    per_op = layout_blocks(problem, tiles, layouts)
    choice = np.stack([np.argmin(c, axis=1) for c in per_op], axis=1)
    total = np.sum([c[np.arange(len(tiles)), choice[:, op]] for op, c in enumerate(per_op)], axis=0)
    return total, choice


@dataclass(frozen=True)
class OffChip:
    """The off-chip choice of one layer and what it took."""

    mapping: Mapping  # level-3 tiles, slope order and layouts (no levels yet)
    blocks: float  # DB blocks of the chosen tiles and layouts
    slopes: tuple[float, ...]  # DB-cost slope per dimension (0 where the dimension has one size)
    best_order: tuple[Dim, ...]  # the exhaustively best order (fewest DRAM bursts) for these tiles
    order_bursts: float  # DRAM bursts of the slope order
    best_order_bursts: float  # ... and of the best order
    candidates: int  # tilings x layouts costed
    space: float  # tilings x layouts x orders the choice stands for


def candidate_tiles(problem: Problem, divisors: bool) -> np.ndarray:
    values = [tile_values(int(problem.dims[d]), divisors) for d in DIMS]
    grids = np.meshgrid(*values, indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


def offchip(problem: Problem, *, divisors: bool = True, every_layout: bool = False,
            parallel: tuple[Dim, ...] | None = None) -> OffChip:
    """Minimise DB blocks over level-3 tiles x layouts, then order the loops by slopes.

    ``parallel`` (a fixed-dataflow baseline that fans out over these dimensions only): first the
    tiles whose ``parallel`` dimensions span the most PEs (:func:`usable_pes`), then the fewest DB
    blocks among them. With MARVEL's own tile (a few output rows) a P,R-partitioned array could
    occupy some 20 PEs whatever its size; a dataflow's accelerator stages what its array consumes."""
    tiles = candidate_tiles(problem, divisors)
    space_tiles = len(tiles)
    tiles = tiles[fits(problem, tiles)]
    if len(tiles) == 0:
        raise_infeasible(problem)
        raise InfeasibleError(f"no level-3 tile of layer {problem.layer.name!r} fits {problem.arch.name}")
    if parallel is not None:
        usable = usable_pes(problem, tiles, parallel)
        tiles = tiles[usable == usable.max()]
    layouts = all_layouts() if every_layout else innermost_layouts(problem)
    blocks, choice = best_layouts(problem, tiles, layouts)
    b = int(np.argmin(blocks))
    tile = tiles[b]
    chosen = (layouts[0][choice[b, 0]], layouts[1][choice[b, 1]], layouts[2][choice[b, 2]])
    code = np.array([layout_options(op).index(chosen[op]) for op in OPERANDS], dtype=np.int64)
    slopes = _slopes(problem, tile, code, divisors)
    order = slope_order(problem, slopes)
    orders = class_orders()
    batch = _batch(np.repeat(tile[None, :], len(orders), axis=0), np.repeat(code[None, :], len(orders), axis=0))
    bursts = finish(sweep(problem, batch), orders).bursts
    slope_bursts = finish(sweep(problem, _batch(tile[None, :], code[None, :])), np.array(order)).bursts[0]
    k = int(np.argmin(bursts))
    mapping = Mapping(tiles=tuple(int(x) for x in tile), order=order, layouts=chosen)
    n_layouts = int(np.prod([len(x) for x in layouts]))
    n_orders = float(np.prod(np.arange(1, NDIMS + 1)))
    return OffChip(mapping, float(blocks[b]), slopes, tuple(Dim(int(d)) for d in orders[k]), float(slope_bursts),
                   float(bursts[k]), len(tiles) * n_layouts, space_tiles * n_layouts * n_orders)


def usable_pes(problem: Problem, tiles: np.ndarray, parallel: tuple[Dim, ...]) -> np.ndarray:
    """(n,) PEs a fan-out over the ``parallel`` dimensions alone can occupy under each level-3 tiling:
    the product of their tiles, at most the PE array."""
    pes = problem.arch.total_pes(problem.precision.input)
    span = np.prod(np.minimum(tiles, problem.dims)[:, [int(d) for d in parallel]], axis=1)
    return np.minimum(span, pes)


def _slopes(problem: Problem, tile: np.ndarray, code: np.ndarray, divisors: bool) -> tuple[float, ...]:
    """Finite-difference slope of the DB cost along each dimension at ``tile`` (a step may pass the
    buffer size: the slope is of the cost function, as MARVEL's derivative)."""
    rows, steps = [tile.copy()], [0]
    for d in DIMS:
        values = tile_values(int(problem.dims[d]), divisors)
        up = values[values > tile[d]]
        down = values[values < tile[d]]
        nxt = int(up[0]) if len(up) else (int(down[-1]) if len(down) else int(tile[d]))
        row = tile.copy()
        row[d] = nxt
        rows.append(row)
        steps.append(nxt - int(tile[d]))
    raw, _ = db_blocks(problem, np.array(rows), np.repeat(code[None, :], len(rows), axis=0))
    return tuple(0.0 if steps[i + 1] == 0 else float(raw[i + 1] - raw[0]) / steps[i + 1] for i in range(NDIMS))


def slope_order(problem: Problem, slopes: tuple[float, ...]) -> tuple[Dim, ...]:
    """Loops by slope: the most negative innermost; dimensions of one tile position outermost."""
    ranked = sorted(DIMS, key=lambda d: (-slopes[d], d))
    return tuple(ranked)
