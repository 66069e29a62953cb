"""The search over a layer's core splits: splits visited in order of a lower bound and skipped once
it cannot beat (or tie) the best found, each searched split's feasible tile vectors costed chunk by
chunk (``search.chunk_search``) under each hoist configuration, and the results of searches that
each owned some of the splits (possibly in other processes) merged into one."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from tileplan.cost.batch import CostBatch
from tileplan.cost.model import split_tables
from tileplan.cost.problem import Problem, SplitTable
from tileplan.dims import NDIMS, Operand
from tileplan.mapping import Mapping
from tileplan.search.chunk_search import BestSoFar, search_chunk
from tileplan.search.feasible_tiles import feasible_product
from tileplan.search.hoist import HOISTS, NONE, Hoist, reuse_orders
from tileplan.search.memo import capacity_free_key, memo
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult
from tileplan.search.shared import Floor, SharedBest
from tileplan.search.space import class_orders, spatial_options, split_options
from tileplan.search.split_bounds_table import SplitBounds
from tileplan.search.tile_groups import TileGroup, layer_group_cache, tile_groups

Progress = Callable[[int, int], None]


def _feasible_tiles(problem: Problem, groups: list[TileGroup]) -> np.ndarray:
    """``feasible_tiles.feasible_product``, read-only (it is memoised and shared)."""
    tiles = feasible_product(problem, groups)
    tiles.flags.writeable = False
    return tiles


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
                  shared: SharedBest | Floor | None = None, orders: np.ndarray | None = None,
                  hoists: tuple[Hoist, ...] | None = None, bypass: frozenset[Operand] = frozenset(),
                  plain: Problem | None = None) -> SplitSearch:
    """Search the splits of visit rank ``r`` with ``r % part[1] == part[0]`` (all of them by
    default). ``shared``: the best value other parts found so far; a split or a chunk is skipped
    for it only when it cannot even tie (so the merged result does not depend on timing).
    ``orders``: the loop orders searched (default: every reuse class); ``hoists``: as ``exhaustive.exhaustive``.

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
    # candidates: ``tile_groups.tile_groups`` reads no memory) is the plain problem's, shared with its search.
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
    state = BestSoFar()
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
                search_chunk(problem, objective, tiles[start:start + chunk], grid, tables, uopts, h_orders, hoist,
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

