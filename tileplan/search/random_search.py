"""Random sampling (Timeloop's random mapper as a baseline): uniform tile sizes, loop orders,
spatial unrollings and core splits, a fixed candidate budget, seeded and deterministic."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS
from tileplan.mapping import Mapping
from tileplan.search.exhaustive import to_mapping
from tileplan.search.feasibility import raise_infeasible
from tileplan.search.objective import Objective, best_index
from tileplan.search.result import SearchResult
from tileplan.search.space import spatial_options, split_options


def random_search(problem: Problem, objective: Objective, *, budget: int = 20_000, seed: int = 0,
                  progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Best of ``budget`` uniformly drawn mappings (infeasible draws count against the budget)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    splits = split_options(problem)
    choice = rng.integers(0, len(splits), size=budget)
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    space = 0.0
    for done, s in enumerate(np.unique(choice)):
        count = int(np.sum(choice == s))
        grid = problem.core_grid(*splits[s])
        max_len = np.array(grid.max_length, dtype=np.int64)
        uopts = spatial_options(problem, grid.max_length)
        space += float(np.prod(max_len.astype(float)))
        tiles = rng.integers(1, max_len + 1, size=(count, NDIMS))
        order = np.argsort(rng.random((count, NDIMS)), axis=1)
        unroll = uopts[rng.integers(0, len(uopts), size=count)]
        layouts = np.broadcast_to(np.array(MappingBatch.default_layout_codes()), (count, 3)).copy()
        batch = MappingBatch(tiles, order, np.zeros((count, 3, NDIMS), dtype=bool), unroll, layouts,
                             splits[s][0], splits[s][1])
        costs = evaluate(problem, batch)
        i = best_index(objective, costs)
        key = tuple(float(k[i]) for k in [objective.key(costs), *objective.tie_keys(costs)])
        if np.isfinite(key[0]) and (best is None or key < best[0]):
            best = (key, to_mapping(problem, tiles[i], order[i], unroll[i], splits[s]), costs.take(i))
        if progress:
            progress(done + 1, len(np.unique(choice)))
    if best is None:
        raise_infeasible(problem)
    assert best is not None
    return SearchResult("random", best[1], best[2], budget, space * 40320, time.perf_counter() - t0,
                        len(splits), len(np.unique(choice)))
