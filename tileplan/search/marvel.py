"""MARVEL (Chatarasi et al.): the decoupled off-chip / on-chip search, its joint exhaustive
counterpart, and the fixed-dataflow baselines of its Fig. 8 — all over the one multi-level model.

* ``marvel``: the off-chip subspace first (``marvel_offchip``: level-3 tiles and layouts by the DB
  block count, order by slopes), then the on-chip subspace under it (``marvel_onchip``).
* ``marvel-joint``: every level-3 tiling (feasible, under the same tile-size rule) x every DRAM
  reuse class of loop order (plus MARVEL's slope order), each with its best on-chip level, in the
  layouts MARVEL chose (layouts change only the block count). It contains MARVEL's choice, so it is
  never worse; the difference is what decoupling loses. Exact branch and bound (``bound``, on by
  default): MARVEL's tiling first, then the tilings by a lower bound of their keys (the DRAM counts
  at their least over the orders, the on-chip counts at their compulsory floor, compute at its
  least over the fan-outs), stopping at the first whose bound cannot beat the best found; within
  the tilings searched, on-chip candidates slower than the best latency are never built and the
  rest are pruned by their own bounds. ``bound=False`` searches every tiling with no bound (the
  reference the tests compare against).
* ``rs``, ``nvdla``, ``shidiannao``: the on-chip fan-out restricted to P,R (row-stationary-like,
  MARVEL's QR), K,C (NVDLA-like) or P,Q (ShiDianNao-like); the rest of the on-chip level searched, as
  the paper does for its baselines. Their level-3 tile is MARVEL's off-chip choice among the tiles
  whose partitioned dimensions span the most PEs (``marvel_offchip.usable_pes``): under MARVEL's own
  tile (4-8 output rows) a P,R fan-out reached at most 24 PEs, so the baselines took the same cycles
  on 168 and 1,024 PEs (docs/containment.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tileplan.cost.batch import CostBatch
from tileplan.cost.levels import combine, onchip_floor
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS, Dim
from tileplan.errors import InfeasibleError, TileplanError
from tileplan.mapping import Mapping
from tileplan.search.marvel_offchip import OffChip, candidate_tiles, fits, offchip
from tileplan.search.marvel_onchip import (
    Found,
    OnChip,
    Subspaces,
    dram_batch,
    dram_floor,
    lex_less,
    objective_keys,
    onchip,
    search_levels,
    step_cap,
)
from tileplan.search.marvel_onchip_space import OnChipOptions, compute_floor, level_options, level_orders
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult
from tileplan.search.space import class_orders


def _single_core(problem: Problem, name: str) -> None:
    if problem.arch.cores.total != 1:
        raise TileplanError(f"strategy {name!r} maps one core's memory hierarchy; {problem.arch.name} has "
                            f"{problem.arch.cores.total} cores")


def _options(divisors: bool, unroll_rs: bool, symmetry: bool, max_parallel: int, min_utilization: float,
             parallel: tuple[Dim, ...] | None = None, bound: bool = True) -> OnChipOptions:
    if max_parallel < 1:
        raise TileplanError(f"max_parallel must be at least 1 (dimensions that fan out), got {max_parallel}")
    if not 0.0 <= min_utilization <= 1.0:
        raise TileplanError(f"min_utilization must be between 0 and 1 (a fraction of the PEs), got {min_utilization}")
    return OnChipOptions(divisors=divisors, unroll_rs=unroll_rs, symmetry=symmetry, max_parallel=max_parallel,
                         min_utilization=min_utilization, parallel=parallel, bound=bound)


def _relaxed(problem: Problem, base: Mapping, objective: Objective, opts: OnChipOptions,
             base_orders: list[tuple[Dim, ...]] | None = None, seconds: float | None = None) -> OnChip | None:
    """The on-chip search; if its pruning leaves nothing, again without the utilisation bound."""
    found = onchip(problem, base, objective, opts, base_orders=base_orders, bound=opts.bound, seconds=seconds)
    if found is None and opts.min_utilization > 0:
        found = onchip(problem, base, objective, replace(opts, min_utilization=0.0), base_orders=base_orders,
                       bound=opts.bound, seconds=seconds)
    return found


def _onchip_or_relaxed(problem: Problem, base: Mapping, objective: Objective, opts: OnChipOptions,
                       seconds: float | None = None) -> OnChip:
    found = _relaxed(problem, base, objective, opts, seconds=seconds)
    if found is None:
        raise InfeasibleError(f"no on-chip mapping of layer {problem.layer.name!r} fits a PE's register file "
                              f"on {problem.arch.name} under its level-3 tile {base.tiles}")
    return found


def marvel(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = True,
           symmetry: bool = True, max_parallel: int = 3, min_utilization: float = 0.1,
           every_layout: bool = False, bound: bool = True, offchip_divisors: bool = True) -> SearchResult:
    """MARVEL's decoupled search (see the module docstring); every pruning option can be switched off:
    ``divisors`` (on-chip tiles divide their parent's, no prologue/epilogue), ``offchip_divisors``
    (the same for the level-3 tiles), ``unroll_rs``, ``symmetry``, ``max_parallel``,
    ``min_utilization``, ``every_layout`` (all 24 permutations per tensor instead of one per
    innermost dimension) and ``bound`` (the safe lower-bound pruning of the on-chip search)."""
    return _decoupled("marvel", problem, objective, _options(divisors, unroll_rs, symmetry, max_parallel,
                                                             min_utilization, bound=bound),
                      every_layout=every_layout, divisors=offchip_divisors)


def marvel_parts(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = True,
                 symmetry: bool = True, max_parallel: int = 3, min_utilization: float = 0.1,
                 every_layout: bool = False, bound: bool = True, offchip_divisors: bool = True,
                 parallel: tuple[Dim, ...] | None = None, seconds: float | None = None) -> tuple[OffChip, OnChip]:
    """The two stages of MARVEL's decoupled search, for reports (space sizes, DB blocks, slopes);
    ``parallel``: only these dimensions fan out (the baselines); ``seconds``: a CPU-time budget of
    the on-chip search (``OnChip.complete`` says whether it ran to the end)."""
    _single_core(problem, "marvel")
    opts = _options(divisors, unroll_rs, symmetry, max_parallel, min_utilization, parallel, bound)
    off = offchip(problem, divisors=offchip_divisors, every_layout=every_layout, parallel=parallel)
    return off, _onchip_or_relaxed(problem, off.mapping, objective, opts, seconds)


def _decoupled(name: str, problem: Problem, objective: Objective, opts: OnChipOptions, *, every_layout: bool,
               divisors: bool) -> SearchResult:
    _single_core(problem, name)
    t0 = time.perf_counter()
    off = offchip(problem, divisors=divisors, every_layout=every_layout, parallel=opts.parallel)
    on = _onchip_or_relaxed(problem, off.mapping, objective, opts)
    return SearchResult(name, on.mapping, on.cost, evaluated=off.candidates + on.evaluated,
                        space_size=off.space * on.space, seconds=time.perf_counter() - t0)


def _baseline(name: str, parallel: tuple[Dim, ...]) -> Callable[..., SearchResult]:
    def strategy(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = False,
                 symmetry: bool = True, min_utilization: float = 0.1, bound: bool = True,
                 offchip_divisors: bool = True) -> SearchResult:
        opts = _options(divisors, unroll_rs, symmetry, len(parallel), min_utilization, parallel, bound)
        return _decoupled(name, problem, objective, opts, every_layout=False, divisors=offchip_divisors)

    strategy.__doc__ = (f"MARVEL's off-chip choice, on-chip fan-out over {', '.join(d.name for d in parallel)} "
                        f"only (the {name} dataflow of MARVEL's Fig. 8).")
    strategy.__name__ = name
    return strategy


rs = _baseline("rs", (Dim.P, Dim.R))
nvdla = _baseline("nvdla", (Dim.K, Dim.C))
shidiannao = _baseline("shidiannao", (Dim.P, Dim.Q))


def marvel_joint(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = True,
                 symmetry: bool = True, max_parallel: int = 3, min_utilization: float = 0.1, bound: bool = True,
                 offchip_divisors: bool = True) -> SearchResult:
    """The joint space exhaustively (see the module docstring). ``bound`` (safe, on by default):
    branch and bound over the level-3 tilings (:func:`_joint_bound`); off, every tiling's on-chip
    space is searched in turn with no bound at all (the reference the pruned search must equal).
    ``evaluated``: the candidates the model costed."""
    _single_core(problem, "marvel-joint")
    t0 = time.perf_counter()
    opts = _options(divisors, unroll_rs, symmetry, max_parallel, min_utilization, bound=bound)
    off = offchip(problem, divisors=offchip_divisors)
    tiles = candidate_tiles(problem, offchip_divisors)
    tiles = tiles[fits(problem, tiles)]
    orders = class_orders()
    slope = np.array([int(d) for d in off.mapping.order], dtype=np.int64)
    if not np.any(np.all(orders == slope, axis=1)):
        orders = np.concatenate([orders, slope[None, :]])
    template = Mapping(tiles=off.mapping.tiles, order=off.mapping.order, layouts=off.mapping.layouts)
    space = float(np.sum(np.prod(np.minimum(tiles, problem.dims).astype(np.float64) ** 2, axis=1))
                  * math.factorial(NDIMS))
    if bound:
        found = _joint_bound(problem, objective, opts, tiles, orders, template)
    else:
        found = _joint_every(problem, objective, opts, tiles, orders, template)
    if found.best is None:
        raise InfeasibleError(f"no multi-level mapping of layer {problem.layer.name!r} fits {problem.arch.name}")
    return SearchResult("marvel-joint", found.best[1], found.best[2], found.costed, space, time.perf_counter() - t0)


def _subspaces(problem: Problem, tiles: np.ndarray, opts: OnChipOptions, max_steps: float | None = None
               ) -> Subspaces:
    """The on-chip candidates of each tiling; a tiling with none under the utilisation bound gets
    those without it (as :func:`_relaxed`). ``max_steps``: only candidates with at most this many
    compute steps (``level_options``); the relaxation still follows the unfiltered candidates."""
    free = replace(opts, min_utilization=0.0)
    options, orders = [], []
    for tile in tiles:
        t = tuple(int(x) for x in tile)
        found = level_options(problem, t, opts, max_steps=max_steps)
        if len(found) == 0 and opts.min_utilization > 0:
            relaxed = level_options(problem, t, free, max_steps=max_steps)
            if len(relaxed) and (max_steps is None or len(level_options(problem, t, opts)) == 0):
                found = relaxed
        options.append(found)
        orders.append(level_orders(problem, t, opts) if len(found) else np.zeros((0, NDIMS), dtype=np.int64))
    return Subspaces.of(tiles, options, orders)


def _joint_every(problem: Problem, objective: Objective, opts: OnChipOptions, tiles: np.ndarray,
                 orders: np.ndarray, template: Mapping) -> Found:
    """Every tiling's whole on-chip space, one tiling at a time, no bound (the reference)."""
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    evaluated = costed = 0
    for tile in tiles:
        found = search_levels(problem, objective, _subspaces(problem, tile[None, :], opts), orders, template,
                              bound=False)
        evaluated += found.evaluated
        costed += found.costed
        if found.best is not None and (best is None or found.best[0] < best[0]):
            best = found.best
    return Found(best, evaluated, costed)


def _joint_bound(problem: Problem, objective: Objective, opts: OnChipOptions, tiles: np.ndarray,
                 orders: np.ndarray, template: Mapping, *, group: int = 64) -> Found:
    """Branch and bound over the level-3 tilings, exact. Each tiling gets a lower bound of its best
    keys over every DRAM order and on-chip level (``tiling_floor``); MARVEL's own tiling is searched
    first (a strong incumbent), then the others in the order of their bounds, in growing groups
    searched together (``search_levels`` with the incumbent: within a group, candidates are pruned
    by their own bounds). The search stops at the first tiling whose bound is not below the best
    found: no tiling after it can beat it. The result's keys are those of :func:`_joint_every`."""
    k, o = len(tiles), len(orders)
    if k == 0:
        return Found(None, 0, 0)
    drams = evaluate(problem, dram_batch(template, tiles, orders))
    low_keys = _floor_keys(problem, objective, opts, tiles, drams, o)
    rank = np.lexsort([np.arange(k)] + low_keys[::-1])
    rank = rank[np.isfinite(low_keys[0][rank])]
    own = np.flatnonzero(np.all(tiles == np.array(template.tiles), axis=1))
    queue = np.concatenate([own, rank[~np.isin(rank, own)]])
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    evaluated = costed = 0
    start, size = 0, len(own) or 1
    while start < len(queue):
        pick = queue[start:start + size]
        start, size = start + size, min(2 * size, group)
        if best is not None:
            ahead = lex_less([kk[pick] for kk in low_keys], best[0])
            if not ahead[0] and start > len(own):
                break  # in bound order: no later tiling can beat the best either
            pick = pick[ahead]
            if len(pick) == 0:
                continue
        rows = (pick[:, None] * o + np.arange(o)[None, :]).ravel()
        incumbent = None if best is None else best[0]
        sub = _subspaces(problem, tiles[pick], opts, step_cap(problem, objective, incumbent))
        found = search_levels(problem, objective, sub, orders, template, drams=drams.take(rows), incumbent=incumbent)
        evaluated += found.evaluated
        costed += found.costed
        if found.best is not None:
            best = found.best
    return Found(best, evaluated, costed)


def _floor_keys(problem: Problem, objective: Objective, opts: OnChipOptions, tiles: np.ndarray, drams: CostBatch,
                o: int) -> list[np.ndarray]:
    """Per tiling, lower bounds of the objective and tie keys over every DRAM order of ``drams``
    (k * o rows, tiling-major) and every on-chip level: the DRAM level's counts at their minimum
    over the orders, the on-chip counts at their floor (``cost.levels.onchip_floor`` with
    ``compute_floor``). Every key is monotone in these counts, so the keys of the combination bound
    the keys of every candidate; ``inf`` where no order fits."""
    floor = dram_floor(drams, len(tiles), o)
    one = dram_batch(Mapping(tiles=tuple(int(x) for x in tiles[0]), order=tuple(Dim(int(d)) for d in range(NDIMS))),
                     tiles, np.arange(NDIMS)[None, :])
    low = combine(problem, floor, one, onchip_floor(problem, compute_floor(problem, tiles, opts)))
    return [np.where(floor.feasible, kk, np.inf) for kk in objective_keys(objective, low)]


def marvel_random(problem: Problem, objective: Objective, *, seconds: float = 1.0, seed: int = 0,
                  budget: int | None = None, per_draw: int = 256) -> SearchResult:
    """Random sampling of the joint space (MARVEL's Fig. 10 baseline, Timeloop's random search):
    each draw is a uniformly random feasible level-3 tiling (any tile sizes) and DRAM reuse-class
    order, then ``per_draw`` uniformly random on-chip levels under it (no pruning but the L1 and
    PE-array fit); draws go on until ``seconds`` of CPU time have passed or ``budget`` candidates
    have been costed, whichever comes first (at least one draw that fits). ``seed`` fixes the
    sequence; ``seconds`` in the result is CPU time."""
    _single_core(problem, "marvel-random")
    if seconds <= 0 or (budget is not None and budget < 1):
        raise TileplanError(f"marvel-random needs a positive time budget and sample budget, got {seconds} s and "
                            f"{budget} samples")
    t0 = time.process_time()
    rng = np.random.default_rng(seed)
    orders = class_orders()
    free = _options(False, False, False, 8, 0.0, bound=False)
    best: tuple[tuple[float, ...], OnChip] | None = None
    evaluated = 0
    tiles = np.zeros((0, NDIMS), dtype=np.int64)
    while best is None or (time.process_time() - t0 < seconds and (budget is None or evaluated < budget)):
        if len(tiles) == 0:
            tiles = _random_tilings(problem, rng)
            if len(tiles) == 0:
                if time.process_time() - t0 > 10 * seconds:
                    raise InfeasibleError(f"random sampling found no level-3 tile of layer {problem.layer.name!r} "
                                          f"that fits {problem.arch.name}")
                continue
        tile, tiles = tiles[0], tiles[1:]
        # a draw costs its level samples under up to 8 step orders
        draws = per_draw if budget is None else max(1, min(per_draw, -(-(budget - evaluated) // 8)))
        base = Mapping(tiles=tuple(int(x) for x in tile), order=tuple(Dim(int(d)) for d in orders[rng.integers(16)]))
        found = onchip(problem, base, objective, free, sample=(rng, draws), bound=False)
        if found is None:
            if time.process_time() - t0 > 10 * seconds:
                raise InfeasibleError(f"random sampling found no on-chip level of layer {problem.layer.name!r} "
                                      f"that fits {problem.arch.name}")
            continue
        evaluated += found.costed
        key = tuple(float(k[0]) for k in [objective.key(found.cost), *objective.tie_keys(found.cost)])
        if best is None or key < best[0]:
            best = (key, found)
    space = float(np.prod(problem.dims.astype(np.float64))) * len(orders)
    return SearchResult("marvel-random", best[1].mapping, best[1].cost, evaluated, space, time.process_time() - t0)


def _random_tilings(problem: Problem, rng: np.random.Generator, count: int = 4096) -> np.ndarray:
    """Uniformly random level-3 tilings (each tile size uniform in 1..the dimension) that fit the
    on-chip memories: drawn, then rejected unless they fit (uniform over the fitting ones)."""
    tiles = np.stack([rng.integers(1, int(n) + 1, size=count) for n in problem.dims], axis=1)
    return tiles[fits(problem, tiles)]
