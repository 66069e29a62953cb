"""Strategy `hwff` in the network planner: on Table 5's workloads (the whole VGG16 and ResNet18 on
hwff1, 8-bit, at most two fused layers) every kept group beats its layers' single-layer plans and the
plan is never worse than the exhaustive single-layer plan; the burst-aware CTC column and JSON field."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tileplan import api
from tileplan.cli import app
from tileplan.fusion.hwff import search_hwff
from tileplan.fusion.plan import FusionPlan, ctc_ratio
from tileplan.fusion.planner import plan_fusion
from tileplan.report.fusion_tables import fusion_table
from tileplan.search.objective import Objective
from tileplan.workload.layer import Precision

B1 = Precision.uniform(1)


OBJECTIVES = ("latency", "energy")


@pytest.fixture(scope="module")
def plans():
    arch = api.load_arch("hwff1")
    out = {}
    for name in ("vgg16", "resnet18"):
        net = api.load_network(name).with_precision(B1)
        base = {obj: api.plan(net, arch, objective=obj, jobs=1) for obj in OBJECTIVES}
        out[name] = (net, base, {obj: plan_fusion(net, arch, base[obj], obj, max_group=2, jobs=1, searcher=search_hwff)
                                 for obj in OBJECTIVES})
    return out


@pytest.mark.parametrize("name", ["vgg16", "resnet18"])
def test_kept_groups_improve_and_never_worse(plans, name):
    net, base, fused = plans[name]
    for obj, plan in fused.items():
        o = Objective(obj)
        assert plan.groups, (name, obj)
        for g in plan.groups:
            assert len(g.layers) == 2 and g.partition["kind"] in ("temporal", "spatial")
            # A kept group beats its layers alone on the objective, or ties it and wins the per-layer
            # search's tie-break (latency, DRAM bytes, energy): conv1_1+conv1_2 of VGG16 on latency.
            def key(c, o=o):
                return (float(o.combine(c.latency_cycles, c.energy_pj, c.dram_bytes)), c.latency_cycles,
                        c.dram_bytes, c.energy_pj)
            assert key(g.cost) < key(g.unfused)
            assert g.mapping.overlap.value == "reuse" and all(g.mapping.resident)
        total = float(o.combine(plan.latency_cycles, plan.energy_pj, plan.dram_bytes))
        single = base[obj]
        assert total <= float(o.combine(single.latency_cycles, single.energy_pj, single.dram_bytes))
        assert plan.dram_bytes < single.dram_bytes  # fusion keeps intermediate maps on chip
    assert fused["latency"].groups[0].partition["kind"] == "temporal"  # the whole array is faster


def test_ctc_column_and_json(plans):
    net, base, fused = plans["vgg16"]
    plan = fused["latency"]
    ctc = dict(plan.ctc())
    assert list(ctc) == [name for name, _ in plan.segments()]
    for name, cost in plan.segments():
        assert ctc[name] == pytest.approx(2 * cost.macs / (cost.bursts * 8))
    g = plan.groups[0]
    singles = [ctc_ratio(lp.cost.macs, lp.cost.bursts, 8) for lp in base["latency"].layers if lp.name in g.layers]
    assert ctc[g.name] > max(singles)  # the intermediate map no longer crosses the DRAM bus
    table = fusion_table(plan, net)
    assert table.columns[-1].header == "CTC" and table.columns[-1].footer
    data = json.loads(plan.to_json())
    assert [row["segment"] for row in data["ctc"]] == list(ctc)
    back = FusionPlan.from_json(plan.to_json())
    assert back.groups[0].partition == g.partition and dict(back.ctc()) == ctc


def test_hwff_needs_fuse():
    result = CliRunner().invoke(app, ["plan", "vgg16", "--arch", "hwff1", "--strategy", "hwff"])
    assert result.exit_code != 0 and "add --fuse" in result.output and "Traceback" not in result.output
    with pytest.raises(Exception, match="add --fuse"):
        api.plan("vgg16", "hwff1", strategy="hwff")
