"""`tileplan plan` works on every zoo network on nmp and eyeriss (random strategy keeps it quick;
the exhaustive search is exercised on real layers in test_search and by `tileplan bench`)."""

from __future__ import annotations

import pytest

from tileplan import api
from tileplan.workload import zoo


@pytest.mark.parametrize("arch", ["nmp", "eyeriss"])
@pytest.mark.parametrize("name", zoo.names())
def test_plan_every_zoo_network(name: str, arch: str) -> None:
    plan = api.plan(name, arch, strategy="random", budget=300, jobs=1)
    net = api.load_network(name)
    assert len(plan.layers) == len(net)
    for lp in plan.layers:
        if lp.mapping is not None:
            assert lp.cost.dram_bytes >= lp.compulsory_bytes > 0
            assert lp.cost.latency_cycles > 0
    assert plan.searched_layers <= len(net)
    assert plan.to_json()
