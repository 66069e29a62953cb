"""What ``--max-group`` counts (fusion/block.py ``group_length``): the layers of a group with a compute
window (convolutions, pools), not the adds and concats joining them -- so the default limit of 4 holds
a whole residual basic block with the stem before it (issue 27: Stream fuses whole blocks)."""

from __future__ import annotations

from pathlib import Path

from tileplan import api
from tileplan.fusion.block import group_length
from tileplan.fusion.planner import candidate_groups, plan_fusion
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.network import Network

B1 = Precision(1, 1, 1, 1)
EXAMPLES = Path(__file__).parent.parent / "examples"


def _residual() -> Network:
    """a -> b -> c -> add(c, a) -> d: one residual join (a's output is read by b and by the add)."""
    layers = (Layer.conv("a", c_in=3, h=12, w=12, k_out=8, r=3, precision=B1),
              Layer.conv("b", c_in=8, h=12, w=12, k_out=8, r=3, inputs=("a",), precision=B1),
              Layer.conv("c", c_in=8, h=12, w=12, k_out=8, r=1, inputs=("b",), precision=B1),
              Layer.add("add", channels=8, h=12, w=12, inputs=("c", "a"), precision=B1),
              Layer.conv("d", c_in=8, h=12, w=12, k_out=4, r=3, inputs=("add",), precision=B1))
    return Network("residual", layers, (1, 3, 12, 12))


def test_max_group_counts_layers_with_a_compute_window():
    net = _residual()
    assert [group_length(net.layers[s:e]) for s, e in [(1, 4), (2, 5), (3, 5), (0, 5)]] == [2, 2, 1, 4]
    assert group_length(net.layers, count_joins=True) == 5
    arch = api.load_arch("eyeriss")
    # Legal segments (a's output, read by b and the add, is hidden only by a group holding both):
    # b+c, b+c+add, b+c+add+d, c+add, c+add+d, add+d, a+b+c+add, a+b+c+add+d. Two counted layers
    # at most: b+c+add and c+add+d (two convolutions and the add) are in, a+b+c+add (three) is not.
    found = candidate_groups(net, arch, Objective.DRAM, max_group=2)
    assert set(found) == {(1, 3), (1, 4), (2, 4), (2, 5), (3, 5)}
    # Counting the add too (the rule before issue 27): only segments of two layers.
    joins = candidate_groups(net, arch, Objective.DRAM, max_group=2, count_joins=True)
    assert set(joins) == {(1, 3), (2, 4), (3, 5)}
    # The same group set gives the same groups, searched the same way: identical results.
    for seg in joins:
        assert joins[seg][0].cost.dram_bytes[0] == found[seg][0].cost.dram_bytes[0]
        assert joins[seg][0].mapping == found[seg][0].mapping
    three = candidate_groups(net, arch, Objective.DRAM, max_group=3)
    assert (0, 4) in three and (0, 5) not in three  # the whole residual block; with d it is 4 long


def _mini_resnet18() -> Network:
    """ResNet-18 reduced: stem 3x3 conv and 3x3/2 max pool, an identity basic block (two 3x3 convolutions
    and the add), a downsampling one (3x3/2, 3x3, 1x1/2 shortcut, add); 8 then 16 channels."""
    layers = (Layer.conv("stem", c_in=3, h=16, w=16, k_out=8, r=3, pad=1, precision=B1),
              Layer.pool("pool", channels=8, h=16, w=16, r=3, stride=2, pad=1, inputs=("stem",), precision=B1),
              Layer.conv("b1c1", c_in=8, h=8, w=8, k_out=8, r=3, pad=1, inputs=("pool",), precision=B1),
              Layer.conv("b1c2", c_in=8, h=8, w=8, k_out=8, r=3, pad=1, inputs=("b1c1",), precision=B1),
              Layer.add("b1add", channels=8, h=8, w=8, inputs=("b1c2", "pool"), precision=B1),
              Layer.conv("b2c1", c_in=8, h=8, w=8, k_out=16, r=3, stride=2, pad=1, inputs=("b1add",), precision=B1),
              Layer.conv("b2c2", c_in=16, h=4, w=4, k_out=16, r=3, pad=1, inputs=("b2c1",), precision=B1),
              Layer.conv("b2down", c_in=8, h=8, w=8, k_out=16, r=1, stride=2, inputs=("b1add",), precision=B1),
              Layer.add("b2add", channels=16, h=4, w=4, inputs=("b2c2", "b2down"), precision=B1))
    return Network("mini_resnet18", layers, (1, 3, 16, 16))


def test_default_plan_fuses_the_stem_with_a_whole_basic_block():
    """Seven counted layers need one cut; the only one leaving two groups of at most 4 is after the first
    block's add (a cut inside a block would hide the skip tensor). On a 2 MiB machine each group then
    reads its input, its weights once and writes its output: the first block's output twice in all."""
    net = _mini_resnet18()
    arch = api.load_arch(str(EXAMPLES / "tpu_like_stream.yaml"))
    plan = api.plan_fused(net, arch, objective="dram", jobs=1)  # the default limit
    assert [g.layers for g in plan.groups] == [("stem", "pool", "b1c1", "b1c2", "b1add"),
                                               ("b2c1", "b2c2", "b2down", "b2add")]
    weights = 3 * 8 * 9 + 2 * 8 * 8 * 9 + 8 * 16 * 9 + 16 * 16 * 9 + 8 * 16
    assert plan.dram_bytes == 3 * 16 * 16 + weights + 2 * 8 * 8 * 8 + 16 * 4 * 4
    # Counting the adds, as before, a group of 4 holds no stem with a block: two cuts at least.
    old = plan_fusion(net, arch, plan.base, Objective.DRAM, max_group=4, count_joins=True)
    assert all(len(g.layers) <= 4 for g in old.groups) and old.dram_bytes > plan.dram_bytes
