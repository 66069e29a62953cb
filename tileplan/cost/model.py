"""The one analytical cost model, evaluated over batches of candidate mappings: the pipeline's driver.

The rule (DESIGN.md): walking the tile loops, an operand's tile is (re)loaded whenever the box it
must hold changes, i.e. once per iteration of every loop at or outside the innermost loop that
indexes it (loops of trip count 1 and hoisted dimensions do not count). Loops inside that one
that do not index it give reuse. An output box revisited across a reduction loop is written back
as partial sums and read again. Everything is summed exactly over tile positions (remainder
tiles, input halos, padding that is never fetched); see ``tables``.

A batch's cost is one pipeline, each stage in one module:

1. tables (``cost.kernel_tables``): the flat tables of the layer on the accelerator under the batch's
   core split and layouts, built once and cached on the problem;
2. kernel (``cost.kernel``): per candidate, what does not depend on the loop order (per core shape:
   one sweep of each operand's tiles, footprints and fit, compute cycles) -- :func:`sweep`;
3. finish (``cost.finish``): the loop order applied (reload factors), chip totals, latency and
   energy, assembled into a ``CostBatch`` -- :func:`finish`.

:func:`evaluate` runs the three; big batches run stages two and three compiled, per candidate in one
loop (``cost.compiled``), with identical numbers. A search shares work between the stages:
:func:`evaluate_orders` runs stage two once per mapping and stage three under many loop orders. The
multi-level model (``cost.levels``) calls :func:`evaluate` for its DRAM level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.cost import compiled, kernel
from tileplan.cost import finish as stage3
from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.flat import hoist_masks
from tileplan.cost.kernel_tables import (
    KernelTables,
    grid_tables,
    split_tables,
    storage_order,
    tables_for,
    tensor_sizes,
)
from tileplan.cost.problem import CoreGrid, Problem
from tileplan.dims import NDIMS, OPERANDS, RELEVANT
from tileplan.mapping import LAYOUT_LETTERS

_RELEVANT_MASK = np.array([[d in RELEVANT[op] for d in range(NDIMS)] for op in OPERANDS], dtype=bool)
_OBJECTIVE_CODES = {"latency": 0, "energy": 1, "edp": 2, "dram": 3, "perf-per-byte": 4}


@dataclass
class Sweep:
    """Stage two of the model for a batch sharing one core split (arrays over candidates last)."""

    problem: Problem
    grid: CoreGrid
    tables: KernelTables
    tiles: np.ndarray  # (8, n)
    hoist: np.ndarray  # (3, n) bitmask of each operand's hoisted dimensions
    pi: np.ndarray  # (shapes, kernel.N_FIELDS, n) order-independent integers per core shape
    pf: np.ndarray  # (shapes, n) compute cycles per core shape
    dd: np.ndarray  # (shapes * kernel.DD_SHAPE, n) trip table (rows kernel.D_*) per core shape
    feasible: np.ndarray  # (n,)
    footprint: np.ndarray  # (n, memories): max over shapes

    @property
    def trips(self) -> np.ndarray:
        """(shapes, 8, n) trip count of every dimension per core shape."""
        return self.dd.reshape(-1, kernel.DD_SHAPE, self.dd.shape[-1])[:, kernel.D_TRIPS:kernel.D_TRIPS + NDIMS]


def sweep(problem: Problem, batch: MappingBatch) -> Sweep:
    """Stages one and two: the tables, then the order-independent costs of every core shape
    (vectorised over the batch)."""
    K = tables_for(problem, batch)
    n = len(batch)
    n_shapes = len(K.kcount)
    T = np.ascontiguousarray(batch.tiles.T, dtype=np.int64)
    H = np.ascontiguousarray(hoist_masks(batch.hoist).T)
    U = np.ascontiguousarray(batch.unroll.T, dtype=np.int64)
    pi = np.zeros((n_shapes * kernel.N_FIELDS, n), dtype=np.int64)
    pf = np.zeros((n_shapes, n))
    dd = np.zeros((n_shapes * kernel.DD_SHAPE, n), dtype=np.int64)
    codes, inverse = np.unique(batch.layouts, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if len(codes) == 1:
        kernel.sweep_shapes(K, T, H[0], H[1], H[2], U, int(codes[0, 0]), int(codes[0, 1]), int(codes[0, 2]), pi, pf,
                            dd)
    else:  # the layout decides which dimensions carry bursts: one vectorised pass per layout triple
        for g, c in enumerate(codes):
            sel = np.nonzero(inverse == g)[0]
            sub_i = np.zeros((len(pi), len(sel)), dtype=np.int64)
            sub_f = np.zeros((n_shapes, len(sel)))
            sub_d = np.zeros((len(dd), len(sel)), dtype=np.int64)
            Hs = H[:, sel]
            kernel.sweep_shapes(K, T[:, sel], Hs[0], Hs[1], Hs[2], U[:, sel], int(c[0]), int(c[1]), int(c[2]), sub_i,
                                sub_f, sub_d)
            pi[:, sel] = sub_i
            pf[:, sel] = sub_f
            dd[:, sel] = sub_d
    fp = np.stack([np.broadcast_to(kernel.footprint(K, pi, m), (n,)) for m in range(len(K.cap))], axis=1)
    feasible = np.broadcast_to(kernel.feasible(K, pi), (n,)).astype(bool)
    grid = problem.core_grid(batch.cluster_split, batch.core_split)
    return Sweep(problem, grid, K, T, H, pi.reshape(n_shapes, kernel.N_FIELDS, n), pf, dd, feasible,
                 fp.astype(np.int64))


def _finish_values(sw: Sweep, order: np.ndarray) -> tuple[np.ndarray | float, ...]:
    n = sw.tiles.shape[1]
    order = np.asarray(order, dtype=np.int64)
    if order.ndim == 2 and len(order) and np.all(order == order[0]):
        order = order[0]
    pr = np.zeros((len(sw.tables.kcount) * 3, n), dtype=np.int64)
    o = order if order.ndim == 1 else np.ascontiguousarray(np.broadcast_to(order, (n, NDIMS)).T)
    m0, m1, m2 = stage3.masks(sw.tables, sw.hoist[0], sw.hoist[1], sw.hoist[2])
    return stage3.finish(sw.tables, o, sw.dd, m0, m1, m2, sw.pi.reshape(-1, n), sw.pf, pr)


def finish(sw: Sweep, order: np.ndarray) -> CostBatch:
    """Stage three: apply loop ``order`` ((n, 8) or (8,)) and combine cores into chip totals."""
    n = sw.tiles.shape[1]
    values = np.empty((kernel.N_OUT, n))
    for f, v in enumerate(_finish_values(sw, order)):
        values[f] = v
    inf = np.where(sw.feasible, 0.0, np.inf)
    problem = sw.problem
    return stage3.cost_batch(sw.feasible, sw.footprint, np.ascontiguousarray(values[0:3].T), values[3].copy(),
                             np.ascontiguousarray(values[4:7].T), values[7:11] + inf,
                             np.ascontiguousarray(values[11:16].T) + inf[:, None], problem.macs,
                             problem.arch.peak_macs_per_cycle(problem.precision.input))


def evaluate(problem: Problem, batch: MappingBatch) -> CostBatch:
    """Full costs of every mapping in ``batch``: tables, kernel, finish."""
    if compiled.wanted():
        return compiled.evaluate(tables_for(problem, batch), batch.tiles, batch.hoist, batch.unroll, batch.order,
                                 batch.layouts, problem.macs, problem.arch.peak_macs_per_cycle(problem.precision.input))
    return finish(sweep(problem, batch), batch.order)


def evaluate_orders(problem: Problem, batch: MappingBatch, orders: np.ndarray, objective: str, *,
                    compiled_path: bool | None = None) -> np.ndarray:
    """(n, len(orders)): objective of every mapping of ``batch`` under every loop order of ``orders``
    (``batch.order`` is ignored); stage two runs once per mapping. ``inf`` where it does not fit."""
    code = _OBJECTIVE_CODES[str(objective)]
    n = len(batch)
    if compiled_path if compiled_path is not None else compiled.wanted():
        K = tables_for(problem, batch)
        return compiled.orders(K, batch.tiles, batch.hoist, batch.unroll, batch.layouts, orders, code)
    sw = sweep(problem, batch)
    k = len(orders)
    # Every order at once: candidate i under order j is column i * k + j.
    rep = Sweep(problem, sw.grid, sw.tables, np.repeat(sw.tiles, k, axis=1), np.repeat(sw.hoist, k, axis=1),
                np.repeat(sw.pi, k, axis=2), np.repeat(sw.pf, k, axis=1), np.repeat(sw.dd, k, axis=1),
                np.repeat(sw.feasible, k), sw.footprint)
    keys = np.asarray(stage3.objective_value(code, _finish_values(rep, np.tile(orders, (n, 1)))), dtype=np.float64)
    keys = np.broadcast_to(keys, (n * k,)).reshape(n, k).copy()
    keys[~sw.feasible] = np.inf
    return keys


def compute_cycles(K: KernelTables, tiles: np.ndarray, unroll: np.ndarray) -> np.ndarray:
    """(n,) compute cycles of the slowest core shape of a split (``cost.kernel.compute_cycles``)."""
    T = np.ascontiguousarray(np.asarray(tiles, dtype=np.int64).T)
    return _slowest_cycles(K, _trip_tables(K, T), T.shape[1], unroll)


def _trip_tables(K: KernelTables, T: np.ndarray) -> np.ndarray:
    dd = np.zeros((len(K.kcount) * kernel.DD_SHAPE, T.shape[1]), dtype=np.int64)
    for s in range(len(K.kcount)):
        kernel.trip_table(K, s, T, dd)
    return dd


def _slowest_cycles(K: KernelTables, dd: np.ndarray, n: int, unroll: np.ndarray) -> np.ndarray:
    U = np.ascontiguousarray(np.broadcast_to(np.asarray(unroll, dtype=np.int64), (n, NDIMS)).T)
    out = np.zeros(n)
    for s in range(len(K.kcount)):
        out = np.maximum(out, kernel.compute_cycles(K, s, U, dd))
    return out


def best_unroll(K: KernelTables, tiles: np.ndarray, options: np.ndarray) -> np.ndarray:
    """(n,) index of the first of the unroll ``options`` ((k, 8)) with the fewest compute cycles of
    the slowest core shape, for each tile vector of ``tiles`` ((n, 8); compiled when ``cost.jit`` says so)."""
    n = len(tiles)
    if compiled.unroll_wanted():
        return compiled.unroll_choice(K, tiles, options)
    T = np.ascontiguousarray(np.asarray(tiles, dtype=np.int64).T)
    dd = _trip_tables(K, T)
    best = np.full(n, np.inf)
    choice = np.zeros(n, dtype=np.int64)
    for k, u in enumerate(options):
        cyc = _slowest_cycles(K, dd, n, u)
        better = cyc < best
        best = np.where(better, cyc, best)
        choice = np.where(better, k, choice)
    return choice


def reload_factors(order: np.ndarray, trips: np.ndarray, hoist: np.ndarray) -> np.ndarray:
    """(n, 3): how many times each operand's tiles are swept (output: visits of each output box)
    under ``order`` ((8,) or (n, 8)), given the trip counts ((n, 8)) directly and the hoist flags
    ((n, 3, 8)): ``cost.finish.reload``."""
    n = trips.shape[0]
    out = np.ones((n, 3), dtype=np.int64)
    if n == 0:
        return out
    order = np.broadcast_to(np.asarray(order, dtype=np.int64), (n, NDIMS))
    o = order[0] if (order == order[0]).all() else np.ascontiguousarray(order.T)  # one loop order: the common case
    relmask = (kernel_rel() << np.arange(NDIMS)).sum(axis=1)
    hm = hoist_masks(np.broadcast_to(np.asarray(hoist), (n, 3, NDIMS)))
    factors = stage3.reload(o, np.ascontiguousarray(np.asarray(trips, dtype=np.int64).T), 0, relmask[0] & ~hm[:, 0],
                            relmask[1] & ~hm[:, 1], relmask[2] & ~hm[:, 2])
    for op in OPERANDS:
        out[:, op] = factors[op]
    return out


def reload_factors_orders(orders: np.ndarray, trips: np.ndarray) -> np.ndarray:
    """(n, k, 3): :func:`reload_factors` of every trip-count vector of ``trips`` ((n, 8)) under every
    loop order of ``orders`` ((k, 8), outermost first), nothing hoisted, in one vectorised pass.

    The rule of ``cost.finish.reload``: with q the innermost position whose dimension indexes the operand
    and has more than one trip, the factor is the product of the trips of the loops at or outside q
    that do not index it (1 when there is no such q)."""
    orders = np.asarray(orders, dtype=np.int64)
    trips = np.asarray(trips, dtype=np.int64)
    t = trips[:, orders]  # (n, k, 8): trips at each loop position
    out = np.ones((len(trips), len(orders), 3), dtype=np.int64)
    positions = np.arange(NDIMS)
    for op in OPERANDS:
        rel = _RELEVANT_MASK[op][orders]  # (k, 8)
        run = np.cumprod(np.where(rel[None], 1, t), axis=2)
        q = np.where(rel[None] & (t > 1), positions, -1).max(axis=2)
        hit = np.take_along_axis(run, np.maximum(q, 0)[..., None], axis=2)[..., 0]
        out[:, :, op] = np.where(q >= 0, hit, 1)
    return out


def kernel_rel() -> np.ndarray:
    """(3, 8): 1 where a dimension indexes an operand."""
    return _RELEVANT_MASK.astype(np.int64)


__all__ = ["LAYOUT_LETTERS", "Sweep", "best_unroll", "compute_cycles", "evaluate", "evaluate_orders", "finish",
           "grid_tables", "reload_factors", "reload_factors_orders", "split_tables", "storage_order", "sweep",
           "tables_for", "tensor_sizes"]
