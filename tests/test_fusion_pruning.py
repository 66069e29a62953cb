"""The fused search's pruning is provably safe: the pruned search returns exactly the unpruned one's
mapping and costs, the bounds never exceed the model's values, and assembling a subset of the
candidates gives exactly the full assembly's values there."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from helpers import toy_arch
from test_fusion_program import GROUPS, shrink

from tileplan import api
from tileplan.fusion.assemble import Choice, assemble
from tileplan.fusion.bounds import candidate_bound, config_bound
from tileplan.fusion.cost import GroupModel, Selection
from tileplan.fusion.group import FusedGroup, Overlap
from tileplan.fusion.search import chunk_options, search_group, tile_k_options
from tileplan.search.objective import Objective
from tileplan.search.tile_groups import _dominators

FIELDS = ("feasible", "footprint_bytes", "dram_read_bytes", "dram_write_bytes", "dram_bursts", "dram_cycles",
          "compute_cycles", "noc_cycles", "latency_cycles", "energy_breakdown_pj")


def _archs():
    return [api.load_arch("eyeriss"), api.load_arch("hwff1"),
            toy_arch(unified=6_000, axes=[{"name": "x", "size": 4, "dims": ["K", "C"], "max_dims": 1}],
                     double_buffering=True)]


IDS = ["vgg16", "resnet50_0", "resnet50_1", "mobilenetv2", "inceptionv3"]


# three groups by default (a chain ending in a pool, a 7 x 7/2 conv and its pool, a depthwise bottleneck);
# the 2.5 to 3 s ones (ResNet-50's 1-3-1 bottleneck, InceptionV3's 1 x 7 / 7 x 1 chain) under slow
@pytest.mark.parametrize(("network", "names", "hw", "div"), [
    pytest.param(*g, id=i, marks=pytest.mark.slow if i in ("resnet50_1", "inceptionv3") else ())
    for g, i in zip(GROUPS, IDS, strict=True)])
def test_pruned_search_returns_exactly_the_unpruned_result(network, names, hw, div):
    group = FusedGroup(tuple(shrink(network, names, hw, div)))
    eyeriss, hwff1, toy = _archs()
    for arch, obj in ((eyeriss, Objective.LATENCY), (hwff1, Objective.LATENCY), (toy, Objective.DRAM),
                      (eyeriss, Objective.ENERGY), (toy, Objective.EDP), (hwff1, Objective.PERF_PER_BYTE)):
        gm = GroupModel(group, arch)
        pruned = search_group(group, arch, obj, gm=gm)
        full = search_group(group, arch, obj, gm=gm, prune=False)
        assert (pruned is None) == (full is None)
        if full is None or pruned is None:
            continue
        assert pruned.mapping == full.mapping, (arch.name, obj)
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(pruned.cost, f), getattr(full.cost, f), err_msg=f)
        assert (pruned.executed_macs, pruned.reuse_bytes) == (full.executed_macs, full.reuse_bytes)
        assert pruned.configs == full.configs and pruned.screened == full.screened == full.evaluated
        assert 0 < pruned.evaluated <= pruned.screened <= pruned.space_size


def test_pruned_search_with_restrictions_equals_unpruned():
    group = FusedGroup(tuple(shrink("vgg16", ["conv1_1", "conv1_2", "pool1"], 12, 8)))
    arch = api.load_arch("hwff1")
    for kwargs in ({"residencies": [(True, True, True)], "overlaps": (Overlap.REUSE,)},
                   {"chunks": [(8, 8)], "tile_ks": [8]}, {"overlaps": (Overlap.RECOMPUTE,)}):
        for obj in (Objective.LATENCY, Objective.DRAM, Objective.ENERGY):
            a = search_group(group, arch, obj, **kwargs)
            b = search_group(group, arch, obj, prune=False, **kwargs)
            assert a is not None and b is not None
            assert a.mapping == b.mapping
            np.testing.assert_array_equal(a.cost.energy_breakdown_pj, b.cost.energy_breakdown_pj)


def test_bounds_never_exceed_the_model_and_subsets_are_exact():
    group = FusedGroup(tuple(shrink("resnet50", ["res2a_conv1", "res2a_conv2", "res2a_conv3"], 9, 16)))
    arch = api.load_arch("eyeriss")
    gm = GroupModel(group, arch)
    rng = np.random.default_rng(0)
    checked = 0
    for overlap, chunk in product((Overlap.RECOMPUTE, Overlap.REUSE), chunk_options(group)):
        for tile_k, resident in product(tile_k_options(group, chunk), product((True, False), repeat=3)):
            choice = Choice(1, tile_k, overlap, resident, chunk)
            full, picks = assemble(gm, tile_n=1, tile_k=tile_k, overlap=overlap, resident=resident, chunk=chunk)
            index = np.sort(rng.choice(gm.n, size=gm.n // 3, replace=False))
            sub, sub_picks = assemble(gm, tile_n=1, tile_k=tile_k, overlap=overlap, resident=resident, chunk=chunk,
                                      index=index)
            for f in FIELDS:
                np.testing.assert_array_equal(getattr(sub.cost, f), getattr(full.cost, f)[index], err_msg=f)
            for a, b in zip(sub_picks, picks, strict=True):
                np.testing.assert_array_equal(a, b[index])
            for obj in Objective:
                bounds = candidate_bound(gm, Selection(gm), obj, choice)
                key = np.where(full.cost.feasible, obj.key(full.cost), np.inf)
                assert np.all(bounds.primary <= key * (1 + 1e-12))
                assert np.all(bounds.latency <= full.cost.latency_cycles)  # bit for bit, no slack
                np.testing.assert_array_equal(bounds.dram_bytes, full.cost.dram_bytes)
                assert config_bound(gm, obj, choice) <= float(bounds.primary.min()) * (1 + 1e-12)
            checked += 1
    assert checked == 2 * sum(len(tile_k_options(group, c)) for c in chunk_options(group)) * 8


def _dominators_pairwise(cost: np.ndarray, fp: np.ndarray) -> list[np.ndarray]:
    """The definition, one candidate set at a time (the former implementation)."""
    m = len(cost)
    le = np.all(cost[None, :, :] <= cost[:, None, :], axis=2)
    same = np.all(cost[None, :, :] == cost[:, None, :], axis=2)
    idx = np.arange(m)
    allowed = le & (~same | (idx[None, :] < idx[:, None]))
    out = []
    for a in range(m):
        cand = np.nonzero(allowed[a])[0]
        if len(cand) > 1:
            f = fp[cand]
            geq = np.all(f[None, :, :] >= f[:, None, :], axis=2) & np.any(f[None, :, :] > f[:, None, :], axis=2)
            cand = cand[~np.any(geq, axis=0)]
        out.append(cand)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_dominators_equal_the_pairwise_definition(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 400))
    cost = rng.integers(0, 4, size=(m, 3))
    fp = rng.integers(0, 3, size=(m, 2))
    got, want = _dominators(cost, fp), _dominators_pairwise(cost, fp)
    assert len(got) == len(want) == m
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
