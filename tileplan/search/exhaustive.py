"""Exhaustive search: the true minimum of the model over the whole mapping space of ``space``."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.kernel_tables import KernelTables
from tileplan.cost.model import best_unroll as model_best_unroll
from tileplan.cost.model import (
    compute_cycles,
    evaluate,
    evaluate_orders,
    grid_tables,
    split_tables,
)
from tileplan.cost.problem import CoreGrid, Problem, SplitTable
from tileplan.dims import DIMS, NDIMS, OPERANDS, Dim, Operand
from tileplan.mapping import Mapping
from tileplan.search.hoist import HOISTS, NONE, Hoist, reuse_orders
from tileplan.search.memo import capacity_free_key, memo
from tileplan.search.objective import Objective, best_index
from tileplan.search.result import SearchResult
from tileplan.search.rf_level import (
    bypass_options,
    bypass_problem,
    fits_without_bypass,
    fitting_unroll,
    real_footprints,
)
from tileplan.search.row_dram import prepare as row_dram_prepare
from tileplan.search.row_dram import row_dram_bytes
from tileplan.search.shared import SharedBest
from tileplan.search.space import (
    TileGroup,
    class_orders,
    feasible_product,
    layer_group_cache,
    spatial_options,
    split_options,
    tile_groups,
)
from tileplan.search.split_bounds import SplitBounds, row_compute_bound

Progress = Callable[[int, int], None]


def _feasible_tiles(problem: Problem, groups: list[TileGroup]) -> np.ndarray:
    """``space.feasible_product``, read-only (it is memoised and shared)."""
    tiles = feasible_product(problem, groups)
    tiles.flags.writeable = False
    return tiles


def best_unroll(problem: Problem, grid: CoreGrid, tiles: np.ndarray, options: np.ndarray, *,
                tables: KernelTables | None = None) -> np.ndarray:
    """(n, 8) fastest unroll option for each tile vector (compute of the slowest core shape of
    ``grid``; ``tables``: the split's kernel tables when the caller has them)."""
    if len(options) == 1:
        return np.broadcast_to(options[0], (len(tiles), NDIMS)).copy()
    if tables is None:
        tables = grid_tables(problem, grid)
    return options[model_best_unroll(tables, tiles, options)]


def _spatial_of(problem: Problem, unroll: np.ndarray) -> tuple[tuple[tuple[Dim, int], ...], ...]:
    """Place unroll factors back on PE-array axes that allow them (flattened axes stay empty):
    a small backtracking search, since several axes may accept the same dimension."""
    from tileplan.arch.spec import AxisMode

    axes = problem.arch.pe_array.axes
    wanted = [(Dim(d), int(unroll[d])) for d in DIMS if unroll[d] > 1]
    slots: list[list[tuple[Dim, int]]] = [[] for _ in axes]

    def place(i: int) -> bool:
        if i == len(wanted):
            return True
        d, f = wanted[i]
        for a, (axis, lanes) in enumerate(zip(axes, problem.lanes, strict=True)):
            if axis.mode is AxisMode.FLATTENED or d not in axis.dim_ids or len(slots[a]) >= axis.max_dims:
                continue
            if int(np.prod([g for _, g in slots[a]] + [f])) > lanes:
                continue
            slots[a].append((d, f))
            if place(i + 1):
                return True
            slots[a].pop()
        return False

    if not place(0):
        raise AssertionError(f"unroll {unroll.tolist()} fits no axis assignment")  # options come from one
    return tuple(tuple(slot) for slot in slots)


def to_mapping(problem: Problem, tiles: np.ndarray, order: np.ndarray, unroll: np.ndarray,
               split: tuple[tuple[int, ...], tuple[int, ...]], hoist: np.ndarray | None = None) -> Mapping:
    """A ``Mapping`` from one row of batch arrays."""
    h: tuple[frozenset[Dim], frozenset[Dim], frozenset[Dim]] = (frozenset(), frozenset(), frozenset())
    if hoist is not None:
        sets = [frozenset(Dim(d) for d in DIMS if hoist[op, d]) for op in OPERANDS]
        h = (sets[0], sets[1], sets[2])
    return Mapping(tiles=tuple(int(t) for t in tiles), order=tuple(Dim(int(d)) for d in order), hoist=h,
                   cluster_split=split[0], core_split=split[1], spatial=_spatial_of(problem, unroll))


@dataclass
class SplitSearch:
    """What a search over some of a layer's core splits found: its best mapping (None when every
    split it owned was pruned or nothing fits), that mapping's sort key and the visit rank of its
    split, and the work done."""

    best: tuple[Mapping, CostBatch] | None
    key: tuple[float, ...]
    rank: int
    evaluated: int
    space: float
    searched: int
    splits: int
    seconds: float


def exhaustive(problem: Problem, objective: Objective, *, chunk: int = 1 << 16,
               progress: Progress | None = None, orders: np.ndarray | None = None,
               hoists: tuple[Hoist, ...] | None = None) -> SearchResult:
    """Minimise ``objective`` over every core split, tile size, loop order, spatial unrolling and
    hoist configuration (``search.hoist.HOISTS``: the plain tile vector, and weights spanning all
    input channels of their filters as TSO's weight stationary keeps them).

    Splits are visited in order of a lower bound and skipped once the bound cannot beat the best
    found (the bounds of every split at once: :class:`SplitBounds`); within a split, the reductions
    of ``search.space`` apply, and the tile vectors whose own bound (:meth:`SplitBounds.row_bounds`)
    exceeds a value found are not costed. Deterministic: a bound beyond the first three only skips
    what cannot even tie, so the choice is the one of costing everything. ``orders``
    ((m, 8) loop orders, outermost first) restricts the loop orders (a paper's fixed dataflows);
    by default every reuse class (``space.class_orders``, ``hoist.reuse_orders`` when hoisted).
    ``hoists``: the hoist configurations searched (default: all of ``HOISTS``, or none but the
    plain one when ``orders`` fixes the dataflows).

    Where the machine's PEs have register files, the default search (no ``orders``) also holds one
    operand's tiles in them instead of the on-chip buffer (``search.rf_level``; :func:`with_register_files`).
    """
    base = merge_split_searches(problem, [search_splits(problem, objective, chunk=chunk, progress=progress,
                                                        orders=orders, hoists=hoists)])
    if orders is not None:
        return base
    return with_register_files(problem, objective, base, chunk=chunk, hoists=hoists)


def inherit_tables() -> None:
    """Compute here the layer-independent tables every exhaustive search reads (each hoist's reuse-class
    loop orders: about 30 ms of CPU; the masks of the per-tile-vector DRAM bound, ``row_dram.prepare``),
    so that worker processes forked after it inherit them instead of each computing them again."""
    for hoist in HOISTS:
        if hoist == NONE:
            row_dram_prepare(class_orders())
        else:
            row_dram_prepare(reuse_orders(hoist), hoist.array())


class _Floor:
    """A fixed value to prune with, in the place of a ``SharedBest`` (nothing is offered back)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def get(self) -> float:
        return self.value

    def offer(self, value: float) -> None:
        pass


def with_register_files(problem: Problem, objective: Objective, base: SearchResult, *, chunk: int = 1 << 16,
                        hoists: tuple[Hoist, ...] | None = None) -> SearchResult:
    """``base`` (the exhaustive result with every operand in its on-chip memory), or better: for each
    operand that may bypass its buffer (``rf_level.bypass_options``), the exhaustive search of the
    mappings holding that operand's tiles in the PEs' register files. Such a mapping replaces
    ``base`` only when its objective value is strictly less, so each of these searches prunes every
    split and chunk that cannot beat ``base`` (often all of them: then it costs only the bounds)."""
    options = bypass_options(problem)
    if not options:
        return base
    key0 = float(objective.key(base.cost)[0])
    best: tuple[float, SplitSearch, Problem, frozenset[Operand]] | None = None
    evaluated, space, seconds = base.evaluated, base.space_size, base.seconds
    for op in options:
        ops = frozenset({op})
        variant = bypass_problem(problem, ops)
        floor = np.nextafter(key0 if best is None else best[0], -np.inf)
        part = search_splits(variant, objective, chunk=chunk, shared=_Floor(float(floor)), hoists=hoists,
                             bypass=ops, plain=problem)
        evaluated += part.evaluated
        space += part.space
        seconds += part.seconds
        if part.best is not None and part.key[0] < (key0 if best is None else best[0]):
            best = (part.key[0], part, variant, ops)
    if best is None:
        return dataclasses.replace(base, evaluated=evaluated, space_size=space, seconds=seconds)
    _, part, variant, ops = best
    assert part.best is not None
    mapping, cost = part.best
    return dataclasses.replace(base, mapping=dataclasses.replace(mapping, bypass=ops),
                               cost=real_footprints(problem, variant, cost), evaluated=evaluated,
                               space_size=space, seconds=seconds)


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
    first, then the others. A mapping left out has every value above one found, so the least value
    of the chunk, and every mapping and order reaching it, are exactly those of evaluating them all.
    """
    if lows is None:
        keys = evaluate_orders(problem, batch, orders, objective.value)
        return keys, int(keys.size)
    keys = np.full((len(batch), len(orders)), np.inf)
    ranked = np.argsort(lows, kind="stable")
    split_at = max(FIRST_WAVE_MIN, int(len(batch) * FIRST_WAVE))
    count = 0
    for wave in (ranked[:split_at], ranked[split_at:]):
        wave = np.sort(wave[lows[wave] <= limit])
        if not len(wave):
            continue
        values = evaluate_orders(problem, batch.take(wave), orders, objective.value)
        keys[wave] = values
        count += int(values.size)
        limit = min(limit, float(values.min()))
    return keys, count


def _batch(t: np.ndarray, orders: np.ndarray, hoist: Hoist, split: tuple[tuple[int, ...], tuple[int, ...]],
           unroll: np.ndarray | None = None) -> MappingBatch:
    """The tile vectors ``t`` as a batch in the first of ``orders`` with ``hoist``, the default
    layouts and ``unroll`` (default: none yet, all ones)."""
    n = len(t)
    return MappingBatch(t, np.broadcast_to(orders[0], (n, NDIMS)).copy(),
                        np.broadcast_to(hoist.array(), (n, 3, NDIMS)).copy(),
                        np.ones((n, NDIMS), dtype=np.int64) if unroll is None else unroll,
                        np.broadcast_to(np.array(MappingBatch.default_layout_codes()), (n, 3)).copy(),
                        split[0], split[1])


def _wave_keys(problem: Problem, objective: Objective, orders: np.ndarray, batch: MappingBatch, lows: np.ndarray,
               limit: float, unrolled: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
               ) -> tuple[np.ndarray, int]:
    """:func:`_order_keys` for bounds ``lows`` that need no unrolling: the unrolling of a wave's tile
    vectors is chosen (``unrolled(rows)``: unroll factors, and whether they fit) only when the wave is
    costed, and written into ``batch.unroll`` (left as it is elsewhere). Returns the keys (``inf`` where
    not costed or not fitting) and how many values were computed."""
    n = len(batch)
    keys = np.full((n, len(orders)), np.inf)
    unroll = batch.unroll
    ranked = np.argsort(lows, kind="stable")
    split_at = max(FIRST_WAVE_MIN, int(n * FIRST_WAVE))
    count = 0
    for wave in (ranked[:split_at], ranked[split_at:]):
        wave = np.sort(wave[lows[wave] <= limit])
        if not len(wave):
            continue
        u, fits = unrolled(wave)
        unroll[wave] = u
        wave = wave[fits]
        if not len(wave):
            continue
        sub = batch.take(wave)
        sub.unroll = unroll[wave]
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
        tied = np.unique(rows)
        latency = np.full(keys.shape, np.inf)
        latency[tied] = evaluate_orders(problem, batch.take(tied), orders, Objective.LATENCY.value)
        lat = latency[rows, cols]
        keep = lat <= lat.min()
        rows, cols = rows[keep], cols[keep]
    return rows[:TIE_CAP], cols[:TIE_CAP]


def merge_split_searches(problem: Problem, parts: list[SplitSearch]) -> SearchResult:
    """The exhaustive result of a layer from the searches of all its splits (cut into parts that
    may have run in different processes): the least key, then the earliest split."""
    found = [p for p in parts if p.best is not None]
    if not found:
        from tileplan.errors import InfeasibleError
        from tileplan.search.feasibility import raise_infeasible

        raise_infeasible(problem)
        unit = problem.layer.row_unit
        why = (f" (a {problem.layer.op.value} tile holds whole rows of {unit} channels, so that one pass computes "
               f"it; give the buffers room for one row)" if unit > 2 else "")
        raise InfeasibleError(f"no mapping of layer {problem.layer.name!r} fits {problem.arch.name}{why}")
    top = min(found, key=lambda p: (p.key, p.rank))
    assert top.best is not None
    return SearchResult("exhaustive", top.best[0], top.best[1], sum(p.evaluated for p in parts),
                        sum(p.space for p in parts), sum(p.seconds for p in parts), parts[0].splits,
                        sum(p.searched for p in parts))


def search_splits(problem: Problem, objective: Objective, *, chunk: int = 1 << 16,
                  progress: Progress | None = None, part: tuple[int, int] = (0, 1),
                  shared: SharedBest | _Floor | None = None, orders: np.ndarray | None = None,
                  hoists: tuple[Hoist, ...] | None = None, bypass: frozenset[Operand] = frozenset(),
                  plain: Problem | None = None) -> SplitSearch:
    """Search the splits of visit rank ``r`` with ``r % part[1] == part[0]`` (all of them by
    default). ``shared``: the best value other parts found so far; a split or a chunk is skipped
    for it only when it cannot even tie (so the merged result does not depend on timing).
    ``orders``: the loop orders searched (default: every reuse class); ``hoists``: as :func:`exhaustive`.

    Within a split the plain space comes first, then each hoist configuration; a hoisted mapping
    replaces the best only when its key is strictly less. The split bounds that assume one tile
    vector for every operand (``SplitBounds.tight``, ``tight_runs``: trip counts whose tiles fit)
    do not hold for hoisted boxes, so a hoisted configuration is pruned by the others only.

    ``bypass``: the operands ``problem`` holds in the PEs' register files (``rf_level.bypass_problem``);
    each tile vector then takes the fastest unroll whose pieces fit them, and is dropped when none does;
    with the DRAM objective and ``plain`` (the problem without bypass), so is a tile vector that surely
    fits ``plain`` (the same DRAM bytes as there: only a strictly lower value is sought)."""
    t0 = time.perf_counter()
    # What reads only the layer and the PE array (core splits and their slices, unroll options, tile
    # candidates: ``space.tile_groups`` reads no memory) is the plain problem's, shared with its search.
    shape_of = plain if plain is not None else problem
    splits = split_options(shape_of)
    if hoists is None:
        hoists = HOISTS if orders is None else (NONE,)
    configs = [(h, (class_orders() if orders is None else np.asarray(orders, dtype=np.int64)) if h == NONE
                else (reuse_orders(h) if orders is None else np.asarray(orders, dtype=np.int64))) for h in hoists]
    table = _split_table(shape_of, splits)
    split_bounds = SplitBounds.of(problem, table, objective)
    # Latency bounds too (built when first needed), so that a split whose objective bound ties the best
    # found is still skipped when it cannot tie its latency (ties are broken by latency first).
    latency_of: list[SplitBounds] = [split_bounds] if objective is Objective.LATENCY else []

    def latency_bounds() -> SplitBounds:
        if not latency_of:
            latency_of.append(SplitBounds.of(problem, table, Objective.LATENCY))
        return latency_of[0]

    bounds = split_bounds.lower
    visit = np.lexsort((np.arange(len(splits)), bounds))
    sizes: dict[tuple[int, ...], tuple[np.ndarray, float]] = {}  # per longest slices: unroll options, space
    state = _Best()
    searched = 0
    space = 0.0
    n_orders = math.factorial(NDIMS)
    group_cache = layer_group_cache(shape_of)

    def skip(bound: float, s: int, kind: str, *, may_tie: bool, orders: np.ndarray | None = None) -> bool:
        """Whether split ``s`` with objective bound ``bound`` (of ``kind``; its latency bound of the same
        kind, under ``orders`` for the tight kinds) is skipped: when its bound exceeds a value found, or
        equals the best's and its latency bound is at least the best's latency (``may_tie``: exceeds it:
        the bounds added after the first three prune only when no mapping can even tie, so exactly the
        same mapping is chosen). For the latency objective both bounds are one: skipped when at least
        (``may_tie``: above) the best."""
        best_key = state.key
        if shared is not None and bound > shared.get():
            return True
        if best_key is None or bound < best_key[0]:
            return False
        if bound > best_key[0]:
            return True
        b = latency_bounds()
        if kind in ("tight", "tight_runs"):
            assert orders is not None
            lat = b.tight(s, orders) if kind == "tight" else b.tight_runs(s, orders)
        else:
            lat = float(getattr(b, kind)[s])
        return lat > best_key[1] or (not may_tie and lat >= best_key[1])

    for rank, s in enumerate(visit):
        if rank % part[1] != part[0]:
            continue
        max_length = tuple(int(x) for x in table.max_length[s])
        if max_length not in sizes:
            opts = spatial_options(shape_of, max_length)
            sizes[max_length] = (opts, float(np.prod([float(x) for x in max_length])) * n_orders * len(opts))
        uopts, size = sizes[max_length]
        live = [(h, o) for h, o in configs if h == NONE or h.applies(problem, max_length)]
        space += size * len(live)
        if progress:
            progress(rank, len(splits))
        if skip(bounds[s], s, "lower", may_tie=False):
            continue
        searching = state.key is not None or shared is not None
        if searching and (skip(split_bounds.run[s], s, "run", may_tie=False)
                          or skip(split_bounds.runs[s], s, "runs", may_tie=True)):
            continue
        live = [(h, o) for h, o in live if h != NONE or not searching or not (
            skip(split_bounds.tight(s, o), s, "tight", may_tie=False, orders=o)
            or skip(split_bounds.tight_runs(s, o), s, "tight_runs", may_tie=True, orders=o))]
        if not live:
            continue
        searched += 1
        grid = problem.core_grid(*splits[s])
        tables = split_tables(problem, *splits[s])
        for hoist, h_orders in live:
            groups = tile_groups(shape_of, grid, uopts, group_cache, hoist.pairs)
            tiles = memo(("feasible_product", problem.layer.signature(), capacity_free_key(problem.arch),
                          tuple(int(c) for c in problem.capacity_bytes), splits[s], hoist.name),
                         partial(_feasible_tiles, problem, groups))
            for start in range(0, len(tiles), chunk):
                _search_chunk(problem, objective, tiles[start:start + chunk], grid, tables, uopts, h_orders, hoist,
                              splits[s], split_bounds, s, rank, state, shared, bypass, plain)
    if progress:
        progress(len(splits), len(splits))
    return SplitSearch(state.best, state.key or (), state.rank, state.evaluated, space, searched, len(splits),
                       time.perf_counter() - t0)


def _split_table(problem: Problem, splits: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> SplitTable:
    """``SplitTable.of(problem, splits)``, kept on ``problem`` for its register-file searches."""
    held: tuple[list[tuple[tuple[int, ...], tuple[int, ...]]], SplitTable] | None = problem.__dict__.get("_split_table")
    if held is None or held[0] != splits:
        held = problem.__dict__["_split_table"] = (splits, SplitTable.of(problem, splits))
    return held[1]


@dataclass
class _Best:
    """What a split search has found so far: the best mapping, its sort key and split visit rank,
    and the values computed."""

    best: tuple[Mapping, CostBatch] | None = None
    key: tuple[float, ...] | None = None
    rank: int = -1
    evaluated: int = 0


def _search_chunk(problem: Problem, objective: Objective, t: np.ndarray, grid: CoreGrid, tables: KernelTables,
                  uopts: np.ndarray, orders: np.ndarray, hoist: Hoist,
                  split: tuple[tuple[int, ...], tuple[int, ...]], split_bounds: SplitBounds, s: int, rank: int,
                  state: _Best, shared: SharedBest | _Floor | None, bypass: frozenset[Operand] = frozenset(),
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
        batch = _batch(t, orders, hoist, split)
        keys, count = _wave_keys(problem, objective, orders, batch, lows, limit, unrolled)
    else:
        unroll, fits = unrolled(np.arange(len(t)))
        if not fits.all():
            t, unroll = t[fits], unroll[fits]
            if not len(t):
                return
        batch = _batch(t, orders, hoist, split, unroll)
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
