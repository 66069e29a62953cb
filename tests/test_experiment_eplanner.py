"""`tileplan experiment eplanner --quick`: the thesis's chapter-8 experiments, reduced."""

from __future__ import annotations

import csv
from pathlib import Path

from typer.testing import CliRunner

from tileplan.experiments.common import Reference


def test_quick_run_writes_every_table_figure_and_explains_every_gap(tmp_path: Path) -> None:
    from tileplan.cli import app

    result = CliRunner().invoke(app, ["experiment", "eplanner", "--quick", "--jobs", "1", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "0 unexplained" in result.output
    summary = (tmp_path / "summary.md").read_text()
    assert "UNEXPLAINED" not in summary and "table8_4.alexnet.A" in summary
    for name in ("table8_4_fig8_2", "never_worse", "table8_5_space", "table8_5_gap_to_exhaustive", "fig8_4_caching"):
        assert (tmp_path / f"{name}.csv").exists(), name
    for name in ("fig8_1_speedup", "fig8_2_traffic", "fig8_3_eplanner", "fig8_3_smartshuttle-rules", "fig8_4_caching"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0, name
    # e-PlaNNer is never slower than a baseline (Table 8.4's measure) ...
    rows = list(csv.DictReader((tmp_path / "never_worse.csv").open()))
    assert {r["baseline"] for r in rows} == {"zhang", "ma", "smartshuttle-rules"}
    assert {r["measure"] for r in rows} == {"latency", "metric", "traffic"}
    assert {r["planner"] for r in rows} == {"eplanner", "eplanner-strict"}
    assert all(r["layers_where_planner_is_worse"] == "0" for r in rows if r["measure"] == "latency")
    # ... never worse on the metric it optimises (Eq. 6.13) ...
    assert all(r["layers_where_planner_is_worse"] == "0" for r in rows
               if r["measure"] == "metric" and r["planner"] == "eplanner")
    # ... and the exhaustive optimum is never worse than either pruned planner.
    gaps = list(csv.DictReader((tmp_path / "table8_5_gap_to_exhaustive.csv").open()))
    assert gaps and all(float(r[f"ratio_{p}"]) >= 1 - 1e-9 for r in gaps for p in ("eplanner", "eplanner-strict"))
    space = list(csv.DictReader((tmp_path / "table8_5_space.csv").open()))
    assert 0 < float(space[0]["pruned"]) <= float(space[0]["evaluated"])


def test_reference_cites_every_thesis_number() -> None:
    ref = Reference.load("eplanner")
    assert ref.value("table8_4.avg.avg") == 6.12 and ref.value("fig8_2.reduction.avg") == 21.14
    assert all(v.source and v.note for v in ref.values.values())
    assert len([k for k in ref.values if k.startswith("table8_4.")]) == 30
