"""Searching many buffer sizes at once returns exactly what searching each size alone returns.

``search_group_sizes`` (one pass over the discrete choices for every capacity, shared footprints,
bounds and costs) against the plain unpruned ``search_group`` with a fresh model, per size; the Ye
strategies' and the network planner's many-size entry points against their one-size ones; and the
single-layer searches with the capacity-independent memo (``search.memo``) warm against a cold one.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import toy_arch
from test_fusion_program import GROUPS, shrink

from tileplan import api
from tileplan.cost.problem import Problem
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.group import FusedGroup
from tileplan.fusion.planner import candidate_groups, candidate_groups_sizes, plan_fusion, plan_fusion_sizes
from tileplan.fusion.search import search_group, search_group_sizes
from tileplan.fusion.ye import FUSED, search_f2l, search_f2l_sizes
from tileplan.search import memo
from tileplan.search import run as run_strategy
from tileplan.search.objective import Objective
from tileplan.workload.builder import NetBuilder
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.network import Network

FIELDS = ("feasible", "footprint_bytes", "dram_read_bytes", "dram_write_bytes", "dram_bursts", "dram_cycles",
          "compute_cycles", "noc_cycles", "latency_cycles", "energy_breakdown_pj")
AXES = [{"name": "x", "size": 4, "dims": ["K", "C"], "max_dims": 1}]


def _same(a, b, where: str) -> None:
    assert (a is None) == (b is None), where
    if a is None or b is None:
        return
    assert a.mapping == b.mapping, where
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a.cost, f), getattr(b.cost, f), err_msg=f"{where} {f}")
    assert (a.executed_macs, a.reuse_bytes) == (b.executed_macs, b.reuse_bytes), where


# ResNet-50's 1-3-1 bottleneck (2.7 s) under slow; VGG16's conv-conv-pool and ResNet-50's conv1+pool1 by default
@pytest.mark.parametrize(("network", "names", "hw", "div"), [
    pytest.param(*g, id=i, marks=pytest.mark.slow if i == "resnet50_1" else ())
    for g, i in zip(GROUPS[:3], ["vgg16", "resnet50_0", "resnet50_1"], strict=True)])
def test_many_sizes_in_one_pass_equal_each_size_alone_unpruned(network, names, hw, div):
    group = FusedGroup(tuple(shrink(network, names, hw, div)))
    rng = np.random.default_rng(len(names) * hw)
    # From "nothing fits" to "everything fits", unsorted, with a repeat.
    caps = [int(x) for x in rng.integers(200, 40_000, 3)] + [50, 1 << 22, 3_000, 3_000]
    archs = [toy_arch(unified=c, axes=AXES) for c in caps]
    for obj in (Objective.DRAM, Objective.LATENCY) if len(names) > 2 else (Objective.DRAM, Objective.ENERGY):
        many = search_group_sizes(group, archs, obj)
        assert many[caps.index(50)] is None
        assert many[caps.index(1 << 22)] is not None
        for arch, got in zip(archs, many, strict=True):
            alone = search_group(group, arch, obj, gm=GroupModel(group, arch), prune=False)
            _same(got, alone, f"{network} {arch.memories[0].size_bytes} B {obj}")


def test_memories_growing_differently_are_searched_one_by_one_with_the_same_results():
    group = FusedGroup(tuple(shrink(*GROUPS[0][:2], 8, 8)))
    archs = [toy_arch(sizes=s) for s in ((4_000, 1 << 20, 1 << 20), (1 << 20, 500, 1 << 20), (1 << 20,) * 3)]
    for got, arch in zip(search_group_sizes(group, archs, Objective.DRAM), archs, strict=True):
        _same(got, search_group(group, arch, Objective.DRAM, gm=GroupModel(group, arch), prune=False), "sizes")
    with pytest.raises(ValueError, match="more than their memories"):
        search_group_sizes(group, [archs[0], api.load_arch("eyeriss")], Objective.DRAM)


def _words(kb: int):
    return api.load_arch(f"ye-{kb}", ["precision_bytes=1"])


@pytest.mark.parametrize("groups", [1, 4])
def test_ye_strategies_at_many_sizes_equal_each_size_alone(groups):
    p = Precision.uniform(1)
    l1 = Layer.conv("l1", n=2, c_in=24, h=10, w=10, k_out=16, r=1, pad=0, precision=p)
    l2 = Layer.conv("l2", n=2, c_in=16, h=10, w=10, k_out=16, r=3, pad=0, groups=groups, inputs=("l1",), precision=p)
    group = FusedGroup((l1, l2))
    archs = [_words(kb) for kb in (1, 2, 4, 8, 32)]
    many = search_f2l_sizes(group, archs, Objective.DRAM, FUSED)
    assert sum(m is not None for m in many) >= 3
    for arch, got in zip(archs, many, strict=True):
        memo.clear()
        alone = search_f2l(group, arch, Objective.DRAM, FUSED)
        assert (got is None) == (alone is None)
        if got is not None and alone is not None:
            assert got[0] == alone[0]
            _same(got[1], alone[1], f"{arch.name}")


def _chain() -> Network:
    b = NetBuilder("chain", n=2, channels=16, h=12, w=12)
    x = b.conv(b.input, "c0", 16, 3)
    x = b.conv(x, "c1", 32, 1)
    x = b.pool(x, "p1", 2)
    x = b.conv(x, "c2", 16, 3)
    return b.build()


def test_network_planner_at_many_sizes_equals_each_size_alone():
    net = _chain().with_precision(Precision.uniform(1))
    archs = [_words(kb) for kb in (1, 2, 8)]
    bases = [api.plan(net, a, strategy="exhaustive", objective="dram", jobs=1) for a in archs]
    many = candidate_groups_sizes(net, archs, Objective.DRAM, max_group=3)
    plans = plan_fusion_sizes(net, archs, bases, Objective.DRAM, max_group=3)
    assert any(p.groups for p in plans)
    for arch, base, found, plan in zip(archs, bases, many, plans, strict=True):
        memo.clear()
        alone = candidate_groups(net, arch, Objective.DRAM, max_group=3)
        assert found.keys() == alone.keys()
        for seg, (res, cached) in found.items():
            assert cached == alone[seg][1]
            _same(res, alone[seg][0], f"{arch.name} {seg}")
        one = plan_fusion(net, arch, base, Objective.DRAM, max_group=3)
        assert [(g.layers, g.mapping) for g in plan.groups] == [(g.layers, g.mapping) for g in one.groups]
        assert plan.dram_bytes == one.dram_bytes


def _layer(rng: np.random.Generator, i: int) -> Layer:
    r = int(rng.choice([1, 3, 5]))
    groups = int(rng.choice([1, 1, 2]))
    c = int(rng.choice([4, 8, 12])) * groups
    return Layer.conv(f"l{i}", n=int(rng.integers(1, 3)), c_in=c, h=int(rng.integers(5, 14)),
                      w=int(rng.integers(5, 14)), k_out=int(rng.choice([4, 8, 16])) * groups, r=r,
                      stride=int(rng.choice([1, 1, 2])), groups=groups, precision=Precision.uniform(1))


@pytest.mark.parametrize("case", range(4))
def test_single_layer_searches_with_the_memo_warm_equal_a_cold_search(case):
    rng = np.random.default_rng(7 + case)
    layer = _layer(rng, case)
    sizes = sorted(int(x) for x in rng.choice([1, 2, 4, 8, 16, 64], 3, replace=False))
    memo.clear()
    warm = {}
    for kb in sizes:
        for strategy in ("smartshuttle", "exhaustive"):
            warm[(kb, strategy)] = run_strategy(strategy, Problem(layer, _words(kb)), Objective.DRAM)
    for (kb, strategy), got in warm.items():
        memo.clear()
        cold = run_strategy(strategy, Problem(layer, _words(kb)), Objective.DRAM)
        assert got.mapping == cold.mapping, (layer.shape_str(), kb, strategy)
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(got.cost, f), getattr(cold.cost, f))


def test_memo_keys_ignore_capacity_and_name_only():
    a, b = _words(4), _words(64)
    assert memo.capacity_free_key(a) == memo.capacity_free_key(b)
    assert memo.capacity_free_key(a) != memo.capacity_free_key(api.load_arch("ye-4"))  # 16-bit data
    assert memo.capacity_free_key(a) != memo.capacity_free_key(api.load_arch("eyeriss"))
