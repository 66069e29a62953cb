"""Random sampling (Timeloop's random mapper as a baseline): uniform tile sizes, loop orders,
spatial unrollings and core splits, a fixed candidate budget, seeded and deterministic."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from tileplan.arrays import distinct
from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS
from tileplan.errors import InfeasibleError
from tileplan.mapping import Mapping
from tileplan.search.exhaustive import to_mapping
from tileplan.search.feasibility import raise_infeasible
from tileplan.search.objective import Objective, best_index
from tileplan.search.result import SearchResult
from tileplan.search.space import spatial_options, split_options


def random_search(problem: Problem, objective: Objective, *, budget: int = 20_000, seed: int = 0,
                  progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Best of ``budget`` randomly drawn mappings: a core split (from ``budget // 64`` random ones),
    log-uniform tile sizes, a uniformly random loop order and unrolling (infeasible draws count
    against the budget)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    splits = split_options(problem)
    # Two stages: a few random core splits (each costs a slicing of the layer), then mappings within.
    pool = rng.choice(len(splits), size=min(len(splits), max(1, budget // 64)), replace=False)
    choice = pool[rng.integers(0, len(pool), size=budget)]
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    space = 0.0
    for done, s in enumerate(distinct(choice)):
        count = int(np.sum(choice == s))
        grid = problem.core_grid(*splits[s])
        max_len = np.array(grid.max_length, dtype=np.int64)
        uopts = spatial_options(problem, grid.max_length)
        space += float(np.prod(max_len.astype(float)))
        # Log-uniform tile sizes: as likely to be 1-2 as 32-64, so small memories see feasible draws.
        tiles = np.floor(np.exp(rng.random((count, NDIMS)) * np.log(max_len + 1))).astype(np.int64)
        tiles = np.clip(tiles, 1, max_len)
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
            progress(done + 1, len(distinct(choice)))
    if best is None:
        raise_infeasible(problem)  # raises when not even 1-element tiles fit
        raise InfeasibleError(f"random search drew no mapping of layer {problem.layer.name!r} that fits "
                              f"{problem.arch.name} among {budget} samples; raise --budget or use "
                              f"--strategy exhaustive")
    assert best is not None
    return SearchResult("random", best[1], best[2], budget, space * 40320, time.perf_counter() - t0,
                        len(splits), len(distinct(choice)))
