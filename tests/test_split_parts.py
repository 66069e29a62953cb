"""A layer's exhaustive search cut into parts (run in any order, sharing the best value found)
gives the same optimum as the whole search and as brute force; plan --jobs uses it for big layers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import toy_arch
from test_search import CASES, brute_force_case

from tileplan import api
from tileplan.cost.problem import Problem
from tileplan.search import exhaustive
from tileplan.search.exhaustive import merge_split_searches, search_splits
from tileplan.search.objective import Objective
from tileplan.search.shared import SharedBest, shared_values
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.network import Network


@pytest.mark.parametrize("objective", [Objective.LATENCY, Objective.ENERGY, Objective.DRAM])
@pytest.mark.parametrize("case", [0, 2])
@pytest.mark.parametrize("parts", [2, 3])
def test_parts_merge_to_the_brute_force_optimum(case: int, parts: int, objective: Objective) -> None:
    layer, cfg = CASES[case]
    problem = Problem(layer, toy_arch(**cfg))
    whole = exhaustive(problem, objective)
    with shared_values(1) as path:
        shared = SharedBest(path, 0)
        found = [search_splits(problem, objective, part=(k, parts), shared=shared) for k in reversed(range(parts))]
        assert shared.get() == pytest.approx(brute_force_case(case)[objective], rel=1e-12)
    merged = merge_split_searches(problem, found)
    assert float(objective.key(merged.cost)[0]) == pytest.approx(brute_force_case(case)[objective], rel=1e-12)
    assert float(objective.key(merged.cost)[0]) == float(objective.key(whole.cost)[0])
    assert sum(p.splits == whole.splits_total for p in found) == parts


def test_parts_on_a_multicore_layer_equal_the_whole_search() -> None:
    layer = Layer.conv("m", c_in=6, h=6, w=5, k_out=8, r=3, s=3, pad=1, precision=Precision.uniform(1))
    problem = Problem(layer, toy_arch(unified=160, burst=8, clusters=2, cores=4))
    whole = exhaustive(problem, Objective.LATENCY)
    with shared_values(1) as path:
        found = [search_splits(problem, Objective.LATENCY, part=(k, 2), shared=SharedBest(path, 0)) for k in (1, 0)]
    merged = merge_split_searches(problem, found)
    np.testing.assert_array_equal(merged.cost.latency_cycles, whole.cost.latency_cycles)
    assert whole.splits_total >= 8 and sum(p.searched for p in found) >= 1


def test_plan_with_jobs_splits_one_big_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = dataclasses.replace(api.load_network("lenet5")["conv2"], inputs=())
    net = Network("one", (layer,), input_shape=(1, layer.c_in, layer.h, layer.w))
    items: list[int] = []
    real = api.run_parallel

    def spy(fn, args, *, jobs):  # type: ignore[no-untyped-def]
        items.append(len(args))
        return real(fn, args, jobs=jobs)

    monkeypatch.setattr(api, "run_parallel", spy)
    one = api.plan(net, "nmp", jobs=1)
    two = api.plan(net, "nmp", jobs=2)
    assert items == [1, 2]  # with two jobs the single layer ran as two parts
    assert two.layers[0].cost.latency_cycles == one.layers[0].cost.latency_cycles
