import atexit
import gc
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# pytest-xdist already runs one worker per core: a plan that also started a pool of one search process per
# CPU (its default --jobs) would pay the pool's start-up (~0.3 CPU-s per process) for no speed. The tests of
# the pools and of what happens to them (test_interrupt, test_hostile_process, test_sweep, test_split_parts)
# give --jobs / jobs= explicitly; TILEPLAN_JOBS itself is tested in test_parallel_jobs.py.
os.environ.setdefault("TILEPLAN_JOBS", "1")
# Imported ONNX networks are cached per user (workload.onnx_cache): the tests keep theirs in a folder of
# their own (one per test process), removed when it ends.
if "TILEPLAN_CACHE_DIR" not in os.environ:
    os.environ["TILEPLAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="tileplan-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TILEPLAN_CACHE_DIR"], ignore_errors=True)

if "PYTEST_XDIST_WORKER" in os.environ:
    # pytest-xdist gives its workers COLUMNS=80 (the controller's terminal); captured command output is
    # as wide as piped output of a plain run (``cli.app``: COLUMNS, else 200), so tables keep one row per layer.
    os.environ["COLUMNS"] = "200"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Python's cycle collector, tuned for the run (in each worker, after collection): the objects
    collection made (modules, test functions, parameters) are frozen, so full collections stop walking
    them again and again, and a young-generation collection waits for 10,000 net allocations instead of
    700. Garbage in cycles is still collected, only less often: about half of the ~5 % of CPU the
    collector took (measured on six test files: 2.1 -> 1.05 CPU-s in GC, the same peak memory)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


#: Whether the running module is marked ``png_figures`` (set by ``_figure_formats`` for the module).
_PNG_ONLY = [False]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "png_figures: the module's tests assert on tables and PNG files, not on the figure format: "
        "plots.save writes its figures as PNG only there (each SVG costs another full render, ~0.35 CPU-s)")


@pytest.fixture(autouse=True, scope="module")
def _figure_formats(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module marked ``png_figures`` (``pytestmark``) gets its figures written as PNG only: set up before
    the module's own fixtures, so its shared runs (``quick_run``) are included. What ``save`` writes as
    SVG is tested where the format is the point (test_experiments_framework, test_plan_plots, test_docs'
    roofline picture, test_figure_lint, the experiments whose tests read the SVG files)."""
    _PNG_ONLY[0] = request.node.get_closest_marker("png_figures") is not None
    yield
    _PNG_ONLY[0] = False


@pytest.fixture(autouse=True, scope="session")
def _figures_are_readable() -> Iterator[None]:
    """Every figure a test writes (experiments, plan plots, sweeps) is checked for a title that fits,
    a y label on every numeric axis and no axis that mixes two units (plots.figure_problems). The check
    reads the figure as ``save`` has just laid it out (``drawn=True``: no third render besides PNG and SVG;
    test_figure_lint shows it finds what a fresh render finds)."""
    try:
        from tileplan.report import plots
    except ImportError:
        yield
        return
    real = plots.save

    def checked(fig, folder, name):  # type: ignore[no-untyped-def]
        if _PNG_ONLY[0]:  # save's PNG half (plots.save writes each format this way)
            written = [Path(folder) / f"{name}.png"]
            plots.write_bytes_atomic(written[0], plots.figure_bytes(fig, "png"))
        else:
            written = real(fig, folder, name)
        problems = plots.figure_problems(fig, drawn=True)
        assert not problems, f"figure {name}: " + "; ".join(problems)
        return written

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "save", checked)
        yield


@pytest.fixture(autouse=True, scope="session")
def _experiment_captions_name_paper_figures() -> Iterator[None]:
    """Every experiment result a test writes (the --quick CLI runs) has captions naming the paper figure
    or table each figure reproduces, or marked ours only (``ExperimentResult.caption_problems``).
    Both checks are installed once per session, so a module's shared run (``quick_run`` fixtures) is
    checked too."""
    try:
        from tileplan.experiments import common
    except ImportError:
        yield
        return
    real = common.write_result

    def checked(result, out_dir):  # type: ignore[no-untyped-def]
        problems = result.caption_problems()
        assert not problems, "; ".join(problems)
        return real(result, out_dir)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common, "write_result", checked)
        yield
