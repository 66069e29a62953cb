"""Costing one chunk of a core split's tile vectors under every loop order: the vectors of least
bound first (in two waves, so that a value found prunes the rest), the tie among those reaching the
chunk's least value broken in full, and the best found so far (``BestSoFar``) updated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tileplan.arrays import distinct
from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.kernel_tables import KernelTables
from tileplan.cost.model import compute_cycles, evaluate, evaluate_orders
from tileplan.cost.problem import CoreGrid, Problem
from tileplan.dims import NDIMS, Operand
from tileplan.mapping import Mapping
from tileplan.search.batch_rows import best_unroll, tile_batch, to_mapping
from tileplan.search.hoist import NONE, Hoist
from tileplan.search.objective import Objective, best_index
from tileplan.search.rf_level import fits_without_bypass, fitting_unroll
from tileplan.search.row_dram import row_dram_bytes
from tileplan.search.shared import Floor, SharedBest
from tileplan.search.split_bounds_table import SplitBounds, row_compute_bound

#: The tile vectors of a chunk with the least bounds, evaluated first for a value to prune the rest
#: with: this fraction of the chunk, at least ``FIRST_WAVE_MIN`` of them.
FIRST_WAVE = 1 / 8
FIRST_WAVE_MIN = 256


def _order_keys(problem: Problem, objective: Objective, orders: np.ndarray, batch: MappingBatch,
                lows: np.ndarray | None, limit: float) -> tuple[np.ndarray, int]:
    """(n, orders) objective of every mapping of ``batch`` under every loop order (``evaluate_orders``)
    where it may matter, ``inf`` elsewhere; and how many values were computed.

    With per-mapping bounds ``lows``, a mapping is evaluated only while its bound is at most ``limit``
    (a value found) and the least value found in the chunk so far: the mappings of the least bounds
    first, then the others (:func:`_wave_keys`). A mapping left out has every value above one found,
    so the least value of the chunk, and every mapping and order reaching it, are exactly those of
    evaluating them all.
    """
    if lows is None:
        keys = evaluate_orders(problem, batch, orders, objective.value)
        return keys, int(keys.size)
    return _wave_keys(problem, objective, orders, batch, lows, limit)


def _wave_keys(problem: Problem, objective: Objective, orders: np.ndarray, batch: MappingBatch, lows: np.ndarray,
               limit: float, unrolled: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
               ) -> tuple[np.ndarray, int]:
    """The keys of ``batch`` costed in two waves, least bound ``lows`` first, each wave's rows whose bound
    exceeds ``limit`` or a value already found left out (``inf``). With ``unrolled`` (bounds that need
    no unrolling), the unrolling of a wave's tile vectors is chosen (``unrolled(rows)``: unroll factors,
    and whether they fit) only when the wave is costed, and written into ``batch.unroll`` (left as it
    is elsewhere; rows that do not fit stay ``inf``). Returns the keys and how many values were computed."""
    n = len(batch)
    keys = np.full((n, len(orders)), np.inf)
    ranked = np.argsort(lows, kind="stable")
    split_at = max(FIRST_WAVE_MIN, int(n * FIRST_WAVE))
    count = 0
    for wave in (ranked[:split_at], ranked[split_at:]):
        wave = np.sort(wave[lows[wave] <= limit])
        if not len(wave):
            continue
        if unrolled is not None:
            u, fits = unrolled(wave)
            batch.unroll[wave] = u
            wave = wave[fits]
            if not len(wave):
                continue
        sub = batch.take(wave)
        if unrolled is not None:
            sub.unroll = batch.unroll[wave]
        values = evaluate_orders(problem, sub, orders, objective.value)
        keys[wave] = values
        count += int(values.size)
        limit = min(limit, float(values.min()))
    return keys, count


#: At most this many of a chunk's mappings reaching its least value are fully costed to break the tie.
TIE_CAP = 4096


def _least(problem: Problem, objective: Objective, orders: np.ndarray, batch: MappingBatch, keys: np.ndarray,
           low: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, order columns) of the mappings of ``batch`` whose ``keys`` reach the chunk's least value
    ``low``, to be costed in full and tie-broken (``best_index``): at most :data:`TIE_CAP`, in row-major
    order. When more tie (DRAM bytes or energy often do: many mappings move only the compulsory
    traffic), those of the least latency among them, the first tie-break, are kept first."""
    rows, cols = np.nonzero(keys <= low)
    if len(rows) > TIE_CAP and objective is not Objective.LATENCY:
        tied = distinct(rows)
        latency = np.full(keys.shape, np.inf)
        latency[tied] = evaluate_orders(problem, batch.take(tied), orders, Objective.LATENCY.value)
        lat = latency[rows, cols]
        keep = lat <= lat.min()
        rows, cols = rows[keep], cols[keep]
    return rows[:TIE_CAP], cols[:TIE_CAP]


@dataclass
class BestSoFar:
    """What a split search has found so far: the best mapping, its sort key and split visit rank,
    and the values computed."""

    best: tuple[Mapping, CostBatch] | None = None
    key: tuple[float, ...] | None = None
    rank: int = -1
    evaluated: int = 0


def search_chunk(problem: Problem, objective: Objective, t: np.ndarray, grid: CoreGrid, tables: KernelTables,
                 uopts: np.ndarray, orders: np.ndarray, hoist: Hoist,
                 split: tuple[tuple[int, ...], tuple[int, ...]], split_bounds: SplitBounds, s: int, rank: int,
                 state: BestSoFar, shared: SharedBest | Floor | None, bypass: frozenset[Operand] = frozenset(),
                 plain: Problem | None = None) -> None:
    """Cost one chunk of tile vectors ``t`` of split ``s`` under every loop order of ``orders`` with
    ``hoist``; update ``state`` when a mapping beats the best found."""
    flags = np.broadcast_to(hoist.array(), (len(t), 3, NDIMS))
    if bypass and plain is not None and objective is Objective.DRAM:  # dropped before their unroll is chosen
        keep = ~fits_without_bypass(plain, grid, bypass, t, flags)
        t, flags = t[keep], flags[keep]
        if not len(t):
            return

    def unrolled(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The unrolling of the tile vectors ``t[rows]`` and whether it fits (row by row: the same for any subset)."""
        u = best_unroll(problem, grid, t[rows], uopts, tables=tables)
        if not bypass:
            return u, np.ones(len(rows), dtype=bool)
        return fitting_unroll(problem, grid, bypass, t[rows], uopts, u,
                              lambda tiles, u: compute_cycles(tables, tiles, u), flags[rows])

    limit = min(state.key[0] if state.key is not None else np.inf, shared.get() if shared is not None else np.inf)
    lows: np.ndarray | None
    if objective in (Objective.DRAM, Objective.ENERGY):
        # Each tile vector's own DRAM bound (and the energy bound it gives): those that cannot reach a
        # value found are never costed (nor their unrolling chosen); the others keep their rows, so the
        # choice is unchanged.
        lows = split_bounds.row_dram_bounds(s, row_dram_bytes(orders, t, split_bounds.table.min_length[s],
                                                              split_bounds.group_bytes[s],
                                                              None if hoist == NONE else hoist.array()))
        batch = tile_batch(t, orders, hoist, split, views=True)  # read through take() only
        keys, count = _wave_keys(problem, objective, orders, batch, lows, limit, unrolled)
    else:
        unroll, fits = unrolled(np.arange(len(t)))
        if not fits.all():
            t, unroll = t[fits], unroll[fits]
            if not len(t):
                return
        batch = tile_batch(t, orders, hoist, split, unroll)
        lows = split_bounds.row_bounds(s, row_compute_bound(problem, split_bounds.table.max_length[s], t, unroll)) \
            if split_bounds.reads_latency else None
        keys, count = _order_keys(problem, objective, orders, batch, lows, limit)
    state.evaluated += count
    low = float(keys.min())
    if not np.isfinite(low) or (state.key is not None and low > state.key[0]) or (
            shared is not None and low > shared.get()):
        return
    rows, cols = _least(problem, objective, orders, batch, keys, low)
    sub = batch.take(rows)
    sub.order = orders[cols]
    costs = evaluate(problem, sub)
    i = best_index(objective, costs)
    cand_key = tuple(float(k[i]) for k in [objective.key(costs), *objective.tie_keys(costs)])
    if state.key is None or cand_key < state.key:
        state.key = cand_key
        state.rank = rank
        state.best = (to_mapping(problem, sub.tiles[i], sub.order[i], sub.unroll[i], split, sub.hoist[i]),
                      costs.take(i))
        if shared is not None:
            shared.offer(cand_key[0])
