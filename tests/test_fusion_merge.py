"""Element-wise adds and concats inside fused groups: the chain input on chip, the other inputs read
from DRAM tile by tile. Programs are bit-exact, count what the model predicts and stay within its
footprint; the compulsory side traffic is the closed form; the planner fuses adds and never hides a
tensor another layer reads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_fusion_model import fused

from tileplan import api
from tileplan.errors import WorkloadError
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.block import group_of
from tileplan.fusion.group import Direction, FusedGroup, Overlap, Side, chain_error, stack_channels
from tileplan.fusion.planner import candidate_groups, plan_fusion
from tileplan.fusion.search import search_group
from tileplan.fusion.verify import verify_fused
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer, OpKind, Precision
from tileplan.workload.network import Network

B1 = Precision.uniform(1)


def shrink_group(network: str, names: list[str], hw: int, div: int) -> FusedGroup:
    """The zoo group ``names`` with the input ``hw`` x ``hw`` and channels (DRAM inputs' too) divided
    by ``div``, keeping each concat's input order."""
    g = FusedGroup.of(api.load_network(network), names)
    c = g.layers[0].c_in if g.layers[0].c_in <= 3 else max(1, g.layers[0].c_in // div)
    h = w = hw
    layers, sides = [], []
    for m, x in enumerate(g.layers):
        specs: list[Side] = []
        if x.op is OpKind.CONCAT:
            at = 0
            for _, side in sorted([(s.offset, s) for s in g.sides[m]] + [(g.chain_offset(m), None)],
                                       key=lambda t: t[0]):
                ch = c if side is None else max(1, side.channels // div)
                if side is not None:
                    specs.append(Side(side.name, at, ch))
                at += ch
            y = replace(x, c_in=at, k_out=at, h=h, w=w, inputs=(), precision=B1)
        elif x.op is OpKind.ADD:
            specs = [Side(s.name, (i + 1) * c, c) for i, s in enumerate(g.sides[m])]
            y = replace(x, c_in=c, k_out=c, groups=c, h=h, w=w, inputs=(), precision=B1)
        else:
            k = c if x.op in (OpKind.DEPTHWISE, OpKind.MAXPOOL, OpKind.AVGPOOL) else max(1, x.k_out // div)
            groups = c if x.op is OpKind.DEPTHWISE or x.op.is_pool else 1
            y = replace(x, c_in=c, k_out=k, h=h, w=w, groups=groups, inputs=(), precision=B1)
        layers.append(y)
        sides.append(tuple(specs))
        c, h, w = y.k_out, y.p, y.q
    return FusedGroup(tuple(layers), tuple(sides))


MERGE_GROUPS = [
    ("resnet50", ["res2b_conv2", "res2b_conv3", "res2b_add"], 9, 16),
    ("resnet50", ["res2a_down", "res2a_add"], 10, 16),
    ("mobilenetv2", ["block2_dw", "block2_project", "block2_add"], 9, 4),
    ("densenet121", ["block1_layer6_conv2", "block1_concat", "transition1_conv"], 9, 8),
    ("inceptionv3", ["Mixed_5b_pool", "Mixed_5b_pool_proj", "Mixed_5b_concat"], 9, 8),
]


@pytest.mark.parametrize(("network", "names", "hw", "div"), MERGE_GROUPS, ids=["+".join(g[1]) for g in MERGE_GROUPS])
@pytest.mark.parametrize("variant", ["recompute", "reuse", "reuse-cols", "streamed", "tile_k"])
def test_merge_groups_are_exact_count_the_model_and_fit(network, names, hw, div, variant):
    group = shrink_group(network, names, hw, div)
    layers = list(group.layers)
    kw: dict = {}
    if variant == "reuse":
        kw = {"overlap": Overlap.REUSE}
    elif variant == "reuse-cols":
        kw = {"overlap": Overlap.REUSE, "direction": Direction.COLS}
    elif variant == "streamed":
        kw = {"resident": (False,) * len(layers)}
    elif variant == "tile_k" and layers[-1].groups == 1:
        kw = {"tk": max(1, layers[-1].k_out // 3)}
    v = verify_fused(group, api.load_arch("eyeriss"),
                     fused(layers, min(3, layers[-1].p), min(2, layers[-1].q), **kw), seed=len(names))
    assert v.bit_exact and v.traffic_match and v.within_footprint and v.ok, v
    assert v.counted_macs == v.predicted_macs


def test_side_inputs_cost_their_compulsory_bytes_and_bursts():
    """1x1 conv + add, one tile per image row band (tile Q = Q, recompute): every input element is
    read once, so the input bytes are the conv's input plus the skip tensor; each row band of a
    tensor is one contiguous run per channel (``ceil(rows * W * b / burst)`` bursts)."""
    group = shrink_group("resnet50", ["res2b_conv3", "res2b_add"], 8, 16)
    conv, add = group.layers
    arch = api.load_arch("eyeriss")
    burst = arch.dram.burst_bytes
    for tp in (1, 3, 8):
        cost = evaluate_fused(group, arch, fused(list(group.layers), tp, add.q)).cost
        assert int(cost.dram_read_bytes[0, 0]) == conv.c_in * 8 * 8 + add.c_in * 8 * 8
        bands = [min(tp, 8 - r) for r in range(0, 8, tp)]
        per_band = sum(-(-(rows * 8) // burst) for rows in bands)
        whole = -(-(conv.c_in * 64) // burst) + -(-(add.c_in * 64) // burst)  # one band: whole tensors
        expect = whole if tp == 8 else (conv.c_in + add.c_in) * per_band
        assert int(cost.dram_bursts[0, 0]) == expect
    assert group.sides == ((), (Side("res2a_add", add.c_in, add.c_in),))
    assert stack_channels(add) == 2 * add.c_in


def test_concat_sides_follow_the_network():
    net = api.load_network("densenet121")
    g = FusedGroup.of(net, ["block1_layer6_conv2", "block1_concat", "transition1_conv"])
    assert [s.channels for s in g.sides[1]] == [64, 32, 32, 32, 32, 32] and g.chain_offset(1) == 224
    inc = FusedGroup.of(api.load_network("inceptionv3"), ["Mixed_5b_pool_proj", "Mixed_5b_concat"])
    assert [(s.offset, s.channels) for s in inc.sides[1]] == [(0, 64), (64, 64), (128, 96)]
    assert inc.chain_offset(1) == 224


def test_merge_chain_errors():
    net = api.load_network("resnet50")
    with pytest.raises(WorkloadError, match="joins a group only after"):
        FusedGroup.of(net, ["res2a_add", "res2b_conv1"])
    with pytest.raises(WorkloadError, match="also read by"):  # res2a_add feeds res2b_conv1 and res2b_add
        FusedGroup.of(net, ["res2a_down", "res2a_add", "res2b_conv1"])
    # res2a_conv3's output is read by the add only, but the add is not next in the order (down is).
    assert chain_error([net["res2a_conv3"], net["res2a_down"]], net, merges=True) is not None
    assert chain_error([net["res2a_down"], net["res2a_add"]], net) is not None  # merges off by default
    assert chain_error([net["res2a_down"], net["res2a_add"]], net, merges=True) is None
    with pytest.raises(WorkloadError, match="do not leave exactly"):
        g = FusedGroup.of(net, ["res2b_conv3", "res2b_add"])
        FusedGroup(g.layers, ((), (Side("x", 0, 100),)))


def _residual_network() -> Network:
    """conv a -> conv b -> 1x1 conv c -> add(c, a) -> conv d: a residual block at toy size."""
    a = Layer.conv("a", c_in=3, h=12, w=12, k_out=8, r=3, precision=B1)
    b = Layer.conv("b", c_in=8, h=12, w=12, k_out=8, r=3, inputs=("a",), precision=B1)
    c = Layer.conv("c", c_in=8, h=12, w=12, k_out=8, r=1, inputs=("b",), precision=B1)
    add = Layer.add("add", channels=8, h=12, w=12, inputs=("c", "a"), precision=B1)
    d = Layer.conv("d", c_in=8, h=12, w=12, k_out=4, r=3, inputs=("add",), precision=B1)
    return Network("residual", (a, b, c, add, d), (1, 3, 12, 12))


@pytest.mark.parametrize("objective", [Objective.DRAM, Objective.LATENCY])
def test_planner_fuses_adds_and_never_hides_a_tensor(objective):
    net = _residual_network()
    arch = api.load_arch("eyeriss")
    base = api.plan(net, arch, objective=objective, jobs=1)
    plan = plan_fusion(net, arch, base, objective, max_group=3)
    ours = objective.combine(plan.latency_cycles, plan.energy_pj, plan.dram_bytes)
    assert ours <= objective.combine(base.latency_cycles, base.energy_pj, base.dram_bytes) * (1 + 1e-12)
    order = [x.name for x in net.layers]
    found = candidate_groups(net, arch, objective, max_group=3)
    assert (2, 4) in found and (1, 4) in found  # c+add and b+c+add
    # a's output is read by b and by the add: hidden only by a group holding both (a+b+c+add, a block
    # three layers with a compute window long)
    assert all(s >= 1 or e >= 4 for s, e in found) and (0, 4) in found
    for s, e in found:
        group = group_of(net, order[s:e])  # a chain, or a block group (here: one starting at the add)
        for layer in group.layers[:-1]:
            assert {x.name for x in net.consumers(layer.name)} <= set(order[s:e])
        for sides in group.sides:  # DRAM inputs were written to DRAM before the group
            assert all(order.index(side.name) < s for side in sides if not side.on_chip)
    if objective is Objective.DRAM:
        assert any("add" in g.layers for g in plan.groups)
        assert plan.dram_bytes < base.dram_bytes
    # A paper's restricted search keeps to windowed chains.
    paper = candidate_groups(net, arch, objective, max_group=3, merges=False)
    assert all("add" not in order[s:e] for s, e in paper)


def test_merge_group_search_is_pruned_exactly():
    group = shrink_group("resnet50", ["res2b_conv2", "res2b_conv3", "res2b_add"], 14, 8)
    arch = api.load_arch("eyeriss")
    for obj in (Objective.DRAM, Objective.LATENCY, Objective.ENERGY):
        a = search_group(group, arch, obj)
        b = search_group(group, arch, obj, prune=False)
        assert a is not None and b is not None
        assert a.mapping == b.mapping
        assert np.array_equal(a.cost.dram_read_bytes, b.cost.dram_read_bytes)
        assert a.cost.latency_cycles[0] == b.cost.latency_cycles[0]
