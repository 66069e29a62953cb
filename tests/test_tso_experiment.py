"""`tileplan experiment tso --quick`: TSO's Table I / Figs. 8-13 pattern on LeNet-5, every paper number
beside ours and every gap over 10 % explained."""

from __future__ import annotations

from pathlib import Path

import pytest

from tileplan import experiments
from tileplan.experiments.common import ExperimentResult, write_result


@pytest.fixture(scope="module")
def result() -> ExperimentResult:
    return experiments.run("tso", quick=True, jobs=1)


def test_tso_burst_is_never_worse_than_noburst_or_any_fixed_strategy(result: ExperimentResult) -> None:
    (row,) = result.tables["table1"]
    for key in ("noburst", "KS", "KS&OFM", "OFM", "IS", "OS", "WS"):
        assert row["burst_us"] <= row[f"{key}_us"] * (1 + 1e-12), key
        assert row[f"paper_{key}_us"] > 0
    assert row["paper_burst_us"] == 199  # Table I, LeNet


def test_every_paper_number_has_ours_and_gaps_are_explained(result: ExperimentResult) -> None:
    keys = {c.key for c in result.comparisons}
    assert {"table1.lenet5.burst", "fig8.lenet5.speedup_pct", "fixed.lenet5.WS", "conv5.burst_tile_bursts",
            "roofline.peak_gmacs_16bit"} <= keys
    assert result.unexplained() == []
    assert result.caption_problems() == []
    by_key = {c.key: c for c in result.comparisons}
    assert by_key["conv5.burst_tile_bursts"].ours == 70
    assert by_key["conv5.noburst_tile_bursts"].ours == 176
    assert by_key["roofline.peak_gmacs_16bit"].ours == 256


def test_conv5_choices_and_general_optimum(result: ExperimentResult) -> None:
    burst, noburst = result.tables["conv5_inceptionv3"][:2]
    assert burst["in_tile"].endswith("x73") and not noburst["in_tile"].endswith("x73")
    assert burst["latency_cycles"] < noburst["latency_cycles"]
    gaps = result.tables["beyond_tso_vs_exhaustive"]
    assert gaps and all(g["tso_over_exhaustive"] >= 1 - 1e-12 for g in gaps)


def test_writes_tables_figures_and_summary(result: ExperimentResult, tmp_path: Path) -> None:
    written = {p.name for p in write_result(result, tmp_path)}
    assert {"table1.csv", "fig9_time_breakdown.csv", "fig11_roofline.png", "fig8_burst_speedup.svg",
            "fig12_fixed_partition.png", "fig13_fixed_schedule.png", "summary.md"} <= written
    text = (tmp_path / "summary.md").read_text()
    assert "| table1.lenet5.burst |" in text and "UNEXPLAINED" not in text
