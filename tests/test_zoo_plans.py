"""`tileplan plan` works on every zoo network on nmp and eyeriss (random strategy with a small budget
keeps it quick -- 30 samples map the same layers as 300, in half the time; the exhaustive search is
exercised on real layers in test_search and by `tileplan bench`)."""

from __future__ import annotations

import pytest

from tileplan import api
from tileplan.workload import zoo


@pytest.mark.parametrize("arch", ["nmp", "eyeriss"])
@pytest.mark.parametrize("name", zoo.names())
def test_plan_every_zoo_network(name: str, arch: str) -> None:
    plan = api.plan(name, arch, strategy="random", budget=30, jobs=1)
    net = api.load_network(name)
    assert len(plan.layers) == len(net)
    for lp in plan.layers:
        if lp.mapping is not None:
            assert lp.cost.dram_bytes >= lp.compulsory_bytes > 0
            assert lp.cost.latency_cycles > 0
    assert plan.searched_layers <= len(net)
    assert plan.to_json()


def test_plan_metadata_records_the_networks_batch() -> None:
    """A network loaded with batch 2 and planned without repeating it records batch 2 (the CLI's path)."""
    from tileplan import api

    net = api.load_network("lenet5", batch=2)
    plan = api.plan(net, "eyeriss", jobs=1)
    assert net.batch == 2 and plan.meta["batch"] == 2
    one = api.plan("lenet5", "eyeriss", jobs=1)
    assert sum(lp.cost.macs for lp in plan.layers) == 2 * sum(lp.cost.macs for lp in one.layers)


def test_plan_reports_the_burst_aware_ctc_ratio_per_layer() -> None:
    """CTC (HW-Flow-Fusion Table 7, Caffeine's form): 2 x MACs over the bytes of the bursts moved;
    in the table, in `--json`, and the JSON still loads."""
    from tileplan.plan import NetworkPlan

    plan = api.plan("lenet5", "hwff1", jobs=1)
    burst = api.load_arch("hwff1").dram.burst_bytes
    ctc = dict(plan.ctc())
    conv1 = next(lp for lp in plan.layers if lp.name == "conv1")
    assert ctc["conv1"] == pytest.approx(2 * conv1.cost.macs / (conv1.cost.bursts * burst))
    data = plan.to_dict()
    assert {row["layer"]: row["ctc"] for row in data["ctc"]} == ctc
    assert NetworkPlan.from_dict(data) == plan
