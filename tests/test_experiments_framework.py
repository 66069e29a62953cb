"""The paper-experiment pattern: reference data, paper-vs-ours comparisons, summary.md, files, plots."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileplan.errors import ConfigError
from tileplan.experiments.common import Comparison, ExperimentResult, Reference, summary_markdown, write_result
from tileplan.report import plots

REF = {"paper": "000.txt", "title": "Demo", "values": {
    "t1.a": {"value": 10.0, "unit": "ms", "source": "Table 1, row a"},
    "t1.b": {"value": 4.0, "unit": "ms", "source": "Table 1, row b", "note": "no software overhead in the model"},
    "t1.z": {"value": 0.0, "source": "Fig. 2"},
}}


def test_comparisons_ratio_and_explanations() -> None:
    ref = Reference.from_dict("demo", REF)
    res = ExperimentResult("demo", "Demo", "000.txt")
    a = res.compare(ref, "t1.a", 10.9)
    b = res.compare(ref, "t1.b", 3.0)
    c = res.compare(ref, "t1.a", 12.5)
    z = res.compare(ref, "t1.z", 0.0)
    assert (round(a.ratio, 3), a.differs) == (1.09, False)
    assert (b.ratio, b.differs, b.explanation) == (0.75, True, "no software overhead in the model")
    assert c.differs and not c.explanation
    assert not z.differs
    assert res.unexplained() == [c]
    text = summary_markdown(res)
    assert "| t1.b | Table 1, row b | ms | 4 | 3 | 0.75 | no software overhead in the model |" in text
    assert "**UNEXPLAINED**" in text
    assert "4 paper numbers compared; 2 differ by more than 10%, 1 of them unexplained." in text


def test_reference_data_is_strict() -> None:
    bad = {**REF, "values": {"x": {"value": 1.0, "source": "T1", "units": "ms"}}}
    with pytest.raises(ConfigError, match=r"values\.x\.units"):
        Reference.from_dict("demo", bad)
    with pytest.raises(ConfigError, match="no reference data for experiment 'nosuch'"):
        Reference.load("nosuch")
    with pytest.raises(ConfigError, match="has no value 't9'"):
        Reference.from_dict("demo", REF)["t9"]


def test_write_result_files(tmp_path: Path) -> None:
    res = ExperimentResult("demo", "Demo", "000.txt")
    res.table("t1", [{"network": "a", "ms": 1.5}, {"network": "b", "ms": 2.0, "extra": 3}])
    res.figure("f1", lambda: plots.grouped_bars(["a", "b"], {"ours": [1, 2], "paper": [1.1, 1.9]},
                                                 title="t", ylabel="ms", reference=1.0))
    res.note("A note.")
    paths = write_result(res, tmp_path / "out")
    names = sorted(p.name for p in paths)
    assert names == ["f1.png", "f1.svg", "summary.md", "t1.csv"]
    out = tmp_path / "out"
    assert (out / "t1.csv").read_text() == "network,ms,extra\na,1.5,\nb,2,3\n"
    assert (out / "f1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "A note." in (out / "summary.md").read_text()
    mode = stat.S_IMODE((out / "summary.md").stat().st_mode)
    assert mode & 0o044, "files get the user's umask, not 0600"
    # Deterministic output: the same data gives the same SVG.
    first = (out / "f1.svg").read_bytes()
    write_result(res, out)
    assert (out / "f1.svg").read_bytes() == first
    assert not list(out.glob(".*")), "no temp files left behind"


def test_every_plot_kind_renders() -> None:
    figs = [
        plots.roofline([plots.RoofPoint("c1", 2.0, 50.0), plots.RoofPoint("c2", 40.0, 180.0, "fc")],
                       [plots.Roof("nominal", 256.0, 17.0), plots.Roof("measured", 192.0, 12.0, dashed=True)],
                       title="roofline", annotate=True),
        plots.stacked_bars(["l1", "l2"], {"input": [1, 2], "weight": [3, 0]}, title="s", ylabel="B",
                           normalise=True),
        plots.lines([32, 64, 128], {"a": [3, 2, 1], "b": [4, float("nan"), 1]}, title="l", xlabel="KB",
                    ylabel="MB", logx=True, xticks=["32", "64", "128"]),
        plots.scatter([1, 2, 3], [2, 4, 7], title="c", xlabel="model", ylabel="measured", labels=["a", "b", "c"]),
    ]
    for fig in figs:
        assert plots.svg_text(fig).lstrip().startswith("<?xml")


def test_experiment_cli_errors(tmp_path: Path) -> None:
    from tileplan.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["experiment", "nosuch"])
    assert r.exit_code == 2 and r.output.startswith("error: unknown experiment 'nosuch'")
    assert "Traceback" not in r.output


def test_comparison_zero_paper_value() -> None:
    c = Comparison("k", "Fig. 1", "", 0.0, 1.0)
    assert c.differs


def test_summary_lists_what_is_not_reproduced_and_why() -> None:
    res = ExperimentResult("demo", "Demo", "000.txt")
    res.cannot_reproduce("Table II", "needs the board")
    text = summary_markdown(res)
    assert "## Not reproduced" in text and "- **Table II**: needs the board" in text


def test_quick_runs_never_reuse_a_note_written_for_the_full_run() -> None:
    ref = Reference.from_dict("demo", {"paper": "p", "title": "t", "values": {
        "a": {"value": 10.0, "source": "T1", "note": "full-run reason", "note_for": 8.0},
        "b": {"value": 10.0, "source": "T1", "note": "reason of the same number", "note_for": 8.0}}})
    quick = ExperimentResult("demo", "Demo", "000.txt", quick=True, quick_scope="LeNet-5 only")
    a = quick.compare(ref, "a", 3.0)
    assert "quick run (LeNet-5 only): not comparable" in a.explanation and "full-run" not in a.explanation
    b = quick.compare(ref, "b", 8.0, quick_same=True)
    assert b.explanation == "reason of the same number"
    full = ExperimentResult("demo", "Demo", "000.txt")
    stale = full.compare(ref, "a", 5.0)  # the note explains 8.0, this run gives 5.0
    assert stale.stale and not stale.explanation and full.unexplained() == [stale]
    assert "written explanation is for ours = 8" in summary_markdown(full)
    assert full.compare(ref, "a", 8.1).explanation == "full-run reason"  # within 2 %
