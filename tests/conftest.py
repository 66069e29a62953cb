import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

if "PYTEST_XDIST_WORKER" in os.environ:
    # pytest-xdist gives its workers COLUMNS=80 (the controller's terminal); captured command output is
    # as wide as piped output of a plain run (``cli.app``: COLUMNS, else 200), so tables keep one row per layer.
    os.environ["COLUMNS"] = "200"


@pytest.fixture(autouse=True)
def _figures_are_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every figure a test writes (experiments, plan plots, sweeps) is checked for a title that fits,
    a y label on every numeric axis and no axis that mixes two units (plots.figure_problems). The check
    reads the figure as ``save`` has just laid it out (``drawn=True``: no third render besides PNG and SVG;
    test_figure_lint shows it finds what a fresh render finds)."""
    if "tileplan.report.plots" not in sys.modules:
        try:
            import tileplan.report.plots  # noqa: F401
        except ImportError:
            return
    plots = sys.modules["tileplan.report.plots"]
    real = plots.save

    def checked(fig, folder, name):  # type: ignore[no-untyped-def]
        written = real(fig, folder, name)
        problems = plots.figure_problems(fig, drawn=True)
        assert not problems, f"figure {name}: " + "; ".join(problems)
        return written

    monkeypatch.setattr(plots, "save", checked)


@pytest.fixture(autouse=True)
def _experiment_captions_name_paper_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every experiment result a test writes (the --quick CLI runs) has captions naming the paper figure
    or table each figure reproduces, or marked ours only (``ExperimentResult.caption_problems``)."""
    common = sys.modules.get("tileplan.experiments.common")
    if common is None:
        try:
            import tileplan.experiments.common as common
        except ImportError:
            return
    real = common.write_result

    def checked(result, out_dir):  # type: ignore[no-untyped-def]
        problems = result.caption_problems()
        assert not problems, "; ".join(problems)
        return real(result, out_dir)

    monkeypatch.setattr(common, "write_result", checked)
