"""MARVEL's fixed-dataflow baselines use a bigger PE array when they have one (issue 24): on a
compute-bound layer whose partitioned dimensions span more than 168 PEs, each baseline's latency on
Eyeriss with 4x the PEs (24 x 28, same memories and bandwidths: Edge's, so compute bounds the layers)
is below its latency on 12 x 14."""

from __future__ import annotations

import pytest

from tileplan import api
from tileplan.cost.problem import Problem
from tileplan.experiments.marvel import TABLE3
from tileplan.search import Objective, run

#: Edge's bandwidths on Eyeriss's memories, so the layers are compute-bound; then 4x the PEs.
FAST = ["dram.bandwidth_bytes_per_s=25.6e9", "noc.bandwidth_bytes_per_s=25.6e9"]
BIG = [*FAST, "pe_array.axes.rows.size=24", "pe_array.axes.cols.size=28"]
#: baseline -> a MARVEL Table 3 layer whose partitioned dimensions exceed 168 (P x R = 224 x 1 on L6,
#: P x Q = 28 x 28 and K x C = 128 x 256 on L12). Under MARVEL's own level-3 tiles (P tile 1 on L6,
#: 4 on L12) rs used 1 PE on L6 and shidiannao 112 on L12, on 168 PEs as on 672 (or 1,024).
CASES = {"rs": "L6", "shidiannao": "L12", "nvdla": "L12"}


@pytest.mark.parametrize("baseline", sorted(CASES))
def test_baseline_cycles_fall_as_pes_grow(baseline: str) -> None:
    layer = next(r for r in TABLE3 if r.label == CASES[baseline]).layer()
    small = Problem(layer, api.load_arch("eyeriss", FAST))
    big = Problem(layer, api.load_arch("eyeriss", BIG))
    assert big.arch.total_pes(1) == 4 * small.arch.total_pes(1) == 672
    slow = run(baseline, small, Objective.LATENCY)
    fast = run(baseline, big, Objective.LATENCY)
    assert float(slow.cost.compute_cycles[0]) >= float(slow.cost.dram_cycles[0])  # compute-bound on 168 PEs
    assert float(fast.cost.latency_cycles[0]) < float(slow.cost.latency_cycles[0])
    # the fan-out really grew past the small array
    fan_small = slow.mapping.levels[0].fanout
    fan_big = fast.mapping.levels[0].fanout
    assert _prod(fan_big) > _prod(fan_small)


def _prod(values: tuple[int, ...]) -> int:
    out = 1
    for v in values:
        out *= v
    return out
