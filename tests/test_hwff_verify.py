"""The fused pairs the `hwff` strategy chooses for VGG16 on hwff1 (conv1_1+conv1_2, pool1+conv2_1,
conv2_2+pool2) execute as fused programs whose counted DRAM bytes, bursts and MACs equal the model
and whose output is bit-exact, at reduced sizes (16x16 inputs, channels / 8, a buffer for the weights
and half the largest map, so that tiles stay smaller than the maps); the partition does not change the
DRAM traffic."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_fusion_program import shrink

from tileplan import api
from tileplan.dims import Operand
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.group import FusedGroup
from tileplan.fusion.hwff import search_hwff
from tileplan.fusion.verify import verify_fused
from tileplan.search.objective import Objective

PAIRS = [["conv1_1", "conv1_2"], ["pool1", "conv2_1"], ["conv2_2", "pool2"]]


@pytest.mark.parametrize("names", PAIRS, ids=["+".join(p) for p in PAIRS])
@pytest.mark.parametrize("objective", ["energy", "latency"])
def test_hwff_groups_execute_and_match_the_model(names, objective):
    chain = ["conv1_1", "conv1_2", "pool1", "conv2_1", "conv2_2", "pool2"]
    layers = shrink("vgg16", chain, 16, 8)
    group = FusedGroup(tuple(x for x in layers if x.name in names))
    hwff1 = api.load_arch("hwff1")
    # Room for the resident weights and half the largest map: the tiles must be smaller than the maps.
    size = sum(x.elements(Operand.WEIGHT) for x in group.layers) + \
        max(x.elements(Operand.INPUT) for x in group.layers) // 2
    arch = replace(hwff1, memories=tuple(replace(m, size_bytes=size) for m in hwff1.memories))
    result = search_hwff(group, arch, Objective(objective))
    assert result is not None and result.partition is not None
    m = result.mapping
    assert m.overlap.value == "reuse" and all(m.resident)
    assert (m.tile_p, m.tile_q) != (group.last.p, group.last.q)  # really tiled
    # The program runs on the same buffer the search fitted (an overflow would be an error), and its
    # peak occupancy stays within the model's footprint (Eq. 8 reuse buffers included).
    v = verify_fused(group, arch, m, seed=3)
    assert max(v.peak_bytes.values()) <= float(evaluate_fused(group, arch, m).cost.footprint_bytes.max())
    assert v.ok, v
    assert v.counted_read_bytes == v.predicted_read_bytes and v.counted_write_bytes == v.predicted_write_bytes
    # The search's cost (on the partition's shares) moves the DRAM bytes the whole-array model predicts.
    whole = evaluate_fused(group, arch, m).cost
    assert float(whole.dram_bytes[0]) == float(result.cost.dram_bytes[0])


def test_verify_a_group_as_hwff_partitions_it_from_the_cli() -> None:
    """`verify --group ... --strategy hwff` runs the mapping the hwff planner keeps (a partition of the
    PE array); strategies that do not search fused groups get one error line."""
    from typer.testing import CliRunner

    from tileplan.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["verify", "lenet5", "--arch", "hwff1", "--group", "conv1+pool1", "--strategy", "hwff",
                             "-o", "energy"])
    assert ok.exit_code == 0, ok.output
    assert "bit-exact" in ok.output and "counted traffic and MACs equal the model" in ok.output
    bad = runner.invoke(app, ["verify", "lenet5", "--arch", "hwff1", "--group", "conv1+pool1", "--strategy", "tso"])
    assert bad.exit_code != 0 and "exhaustive or hwff" in bad.output and "Traceback" not in bad.output
