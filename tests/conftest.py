import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _figures_are_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every figure a test writes (experiments, plan plots, sweeps) is checked for a title that fits,
    a y label on every numeric axis and no axis that mixes two units (plots.figure_problems)."""
    if "tileplan.report.plots" not in sys.modules:
        try:
            import tileplan.report.plots  # noqa: F401
        except ImportError:
            return
    plots = sys.modules["tileplan.report.plots"]
    real = plots.save

    def checked(fig, folder, name):  # type: ignore[no-untyped-def]
        problems = plots.figure_problems(fig)
        assert not problems, f"figure {name}: " + "; ".join(problems)
        return real(fig, folder, name)

    monkeypatch.setattr(plots, "save", checked)


def pytest_configure(config):  # type: ignore[no-untyped-def]
    config.addinivalue_line("markers", "slow: a bigger run of a property test; runs with -m slow or TILEPLAN_SLOW=1")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    import os

    if os.environ.get("TILEPLAN_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or TILEPLAN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
