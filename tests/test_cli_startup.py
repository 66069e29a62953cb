"""The command line answers at once: building the app, ``--help``, ``arch list``, ``zoo list`` and an
argument error import none of the heavy modules (the model, numpy's kernels, numba, matplotlib,
onnx, ray); ``--help`` also not typer's rich help (rich's markdown and traceback renderers) nor
pydantic; and the console script answers ``arch list`` and ``zoo list`` without typer, pydantic or the
accelerator schema at all (``tileplan.listing``), printing what the app's commands print. Each case
runs in a fresh interpreter and reads its ``sys.modules``: a presence check, not a timing, so a loaded
machine cannot make it flake. The timings are in docs/architecture-startup.md.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tileplan import api
from tileplan.arch import load as load_arch
from tileplan.cli.app import (
    FUSION_STRATEGY_NAMES,
    LEVEL_STRATEGY_NAMES,
    OBJECTIVE_NAMES,
    SAMPLING_STRATEGY_NAMES,
    STRATEGY_NAMES,
)
from tileplan.fusion.ye import FUSED_FAMILIES
from tileplan.presets import preset_description, preset_names
from tileplan.search import LEVEL_STRATEGIES, STRATEGIES, takes
from tileplan.workload import zoo

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "matplotlib", "onnx", "ray", "tileplan.api", "tileplan.cost.kernel", "tileplan.cost.model",
         "tileplan.search", "tileplan.fusion")

_PROBE = """
import json, sys
from tileplan.cli import run
try:
    code = run(ARGS)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _fresh(args: list[str], probe: str = _PROBE) -> tuple[int, set[str], str]:
    """Run ``tileplan ARGS`` in a new interpreter (``probe``: through ``cli.run`` or the console script);
    its exit code, loaded modules and output (each distinct run once per session: ~0.5 CPU-s each)."""
    return _fresh_once(tuple(args), probe)


@functools.cache
def _fresh_once(args: tuple[str, ...], probe: str) -> tuple[int, set[str], str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # (e.g. another typer)
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-c", probe.replace("ARGS", repr(list(args)))], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    data = json.loads(last)
    code = done.returncode if data["code"] is None else int(data["code"] or 0)
    return code, set(data["modules"]), done.stdout[: -len(last) - 1] + done.stderr


#: What ``--help`` needs none of: typer's rich help renderers, pydantic (typer's argument coercion,
#: the accelerator schema) and the schema itself.
HELP_SPARES = ("rich.markdown", "markdown_it", "rich.traceback", "typer.rich_utils", "pydantic", "tileplan.arch")
#: What the console script's answer to ``arch list`` / ``zoo list`` needs none of.
LIST_SPARES = ("typer", "click", "pydantic", "yaml", "tileplan.arch", "tileplan.cli", "numpy")

# (the console script may end the process itself, after the exit handlers: the modules are printed by
# one, and the exit code is the process's)
_ENTRY_PROBE = """
import atexit, json, sys
sys.argv = ["tileplan", *ARGS]
atexit.register(lambda: print(json.dumps({"code": None, "modules": sorted(sys.modules)})))
from tileplan import entry
entry.main()
"""


def _fresh_entry(args: list[str]) -> tuple[int, set[str], str]:
    """Run the console script ``tileplan ARGS`` (``entry.main``) in a new interpreter."""
    return _fresh(args, _ENTRY_PROBE)


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["arch", "list"], ["zoo", "list"]])
def test_quick_commands_import_nothing_heavy(args: list[str]) -> None:
    code, modules, output = _fresh(args)
    assert code == 0, output
    assert output.strip()  # it did answer (help text, preset or network list)
    assert not [m for m in HEAVY if m in modules]
    if "--help" in args:  # (a subcommand's help parses the group's options first: typer 0.29's pydantic coercion)
        assert not [m for m in HELP_SPARES if m in modules
                    and (args == ["--help"] or m != "pydantic" or not TYPER_USES_PYDANTIC)]


#: typer 0.29 coerces every argument through pydantic (~0.2 s of imports per command): pyproject pins
#: typer below 0.29, and tileplan's own schemas are hand-checked dataclasses (``arch.fields``).
TYPER_USES_PYDANTIC = tuple(int(x) for x in typer.__version__.split(".")[:2]) >= (0, 29)

_API_PROBE = """
import json, sys
from tileplan import api
from tileplan.experiments.common import Reference
plan = api.plan("lenet5", api.load_arch("nmp", ["dram.burst_bytes=32"]))
Reference.load("ye")
print(json.dumps({"code": 0 if plan.layers else 1, "modules": sorted(sys.modules)}))
"""


def test_planning_imports_no_pydantic() -> None:
    """Loading a machine (with an override), planning and reading a paper's reference data import no
    schema library; through the command line neither, unless the installed typer is 0.29 or later."""
    code, modules, output = _fresh([], _API_PROBE)
    assert code == 0, output
    assert "tileplan.arch.spec" in modules and "tileplan.arch.overrides" in modules
    assert not [m for m in modules if m.partition(".")[0] == "pydantic"]
    if TYPER_USES_PYDANTIC:
        pytest.skip(f"the installed typer {typer.__version__} parses arguments through pydantic (pyproject: <0.29)")
    code, modules, output = _fresh(["plan", "lenet5", "--arch", "nmp", "--set", "dram.burst_bytes=32"])
    assert code == 0 and "lenet5" in output, output
    assert "tileplan.arch.spec" in modules and not [m for m in modules if m.partition(".")[0] == "pydantic"]


@pytest.mark.parametrize("args", [["arch", "list"], ["zoo", "list"]])
def test_console_script_lists_without_the_app(args: list[str]) -> None:
    """The console script answers the listings itself, with exactly the app's output."""
    code, modules, output = _fresh_entry(args)
    assert code == 0, output
    assert not [m for m in (*HEAVY, *LIST_SPARES) if m in modules]
    app_code, _, app_output = _fresh(args)
    assert app_code == 0 and output == app_output
    starts = [line.split()[0] for line in output.splitlines()]  # (a long description wraps at 120 columns)
    expected = preset_names() if args[0] == "arch" else zoo.names() + zoo.transformer_names()
    assert [s for s in starts if s in expected] == expected


def test_preset_descriptions_read_without_validating_are_the_presets_own() -> None:
    """``arch list`` reads each preset's description line without the schema; it is the validated one."""
    for name in preset_names():
        assert preset_description(name) == load_arch(name).description, name


@pytest.mark.parametrize(("args", "message"), [
    (["plan", "lenet5", "--budget", "0"], "Invalid value for '--budget'"),
    (["plan", "lenet5", "--no-such-option"], "No such option"),
    (["plan", "lenet5", "--strategy", "tso9"], "unknown strategy 'tso9'"),
    (["compare", "lenet5", "-s", "exhaustive,tso9"], "unknown strategy 'tso9'"),
    (["plan", "lenet5", "--objective", "speed"], "unknown objective 'speed'"),
    (["emit", "lenet5", "--output", "x", "-o", "speed"], "unknown objective 'speed'"),
    (["sweep", "lenet5", "-o", "s.csv", "--seed", "4"], "--seed applies to the sampling strategies"),
])
def test_argument_errors_show_before_any_heavy_import(args: list[str], message: str) -> None:
    code, modules, output = _fresh(args)
    assert code == 2 and message in output and output.startswith("error:"), output
    assert "numpy" not in modules and not [m for m in HEAVY if m in modules]


def test_help_names_are_the_registries() -> None:
    """The names the CLI checks and lists without importing the model are the registries' own."""
    assert STRATEGY_NAMES == tuple(STRATEGIES)
    assert LEVEL_STRATEGY_NAMES == tuple(LEVEL_STRATEGIES)
    assert FUSION_STRATEGY_NAMES == (*FUSED_FAMILIES, *api.FUSION_STRATEGIES)
    assert OBJECTIVE_NAMES == api.OBJECTIVES
    for option in ("budget", "seed"):  # --budget and --seed are refused for every other strategy
        assert SAMPLING_STRATEGY_NAMES == tuple(s for s in (*STRATEGIES, *LEVEL_STRATEGIES) if takes(s, option))


#: What a plain (unfused, exhaustive) ``plan`` needs none of: the fusion package, the comparison, and
#: the other strategies' modules (the search registry imports a strategy when it first runs), and rich's
#: progress bar when stderr is not a terminal.
PLAN_SPARES = ("tileplan.fusion", "tileplan.compare", "tileplan.search.tso", "tileplan.search.eplanner",
               "tileplan.search.marvel", "tileplan.search.baselines", "tileplan.search.ye", "matplotlib",
               "rich.progress",  # (no progress bar is drawn: stderr is not a terminal here)
               "numpy.ma")  # (numpy's plain np.unique imports it: the search uses tileplan.arrays.distinct)


def test_plain_plan_imports_only_its_strategy(tmp_path: Path) -> None:
    """``plan`` without --fuse plans, writes its JSON, and loads none of :data:`PLAN_SPARES`; with
    ``--strategy tso`` the registry loads TSO's module, and its plan differs (so the name reached it)."""
    out = tmp_path / "plan.json"
    code, modules, output = _fresh(["plan", "lenet5", "--arch", "eyeriss", "-j", "1", "--json", str(out)])
    assert code == 0, output
    assert json.loads(out.read_text())["strategy"] == "exhaustive"
    assert not [m for m in modules if any(m == s or m.startswith(s + ".") for s in PLAN_SPARES)]
    code, modules, output = _fresh(["plan", "lenet5", "--arch", "eyeriss", "-j", "1", "-s", "tso", "--json", str(out)])
    assert code == 0, output
    assert "tileplan.search.tso" in modules and json.loads(out.read_text())["strategy"] == "tso"


@pytest.mark.parametrize("args", [["plan", "--help"], ["plan"], ["plan", "lenet5", "--batch", "x"],
                                  ["plan", "lenet5", "--budget", "0"], ["plan", "lenet5", "--nope"],
                                  ["eval", "lenet5"], ["compare", "--help"], ["emit", "--help"]])
def test_a_command_alone_parses_as_in_the_whole_app(args: list[str], capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` builds only the named command (``cli._command_app``): its help, usage errors and exit
    codes are the whole app's, character for character."""
    import tileplan.cli as cli

    alone = cli._command_app(list(args))
    assert alone[1] == f"tileplan {args[0]}" and alone[0] is not cli.app
    code = cli.run(args)
    mine = capsys.readouterr()
    monkeypatch.setattr(cli, "_command_app", lambda a: (cli.app, "tileplan", a))
    assert (cli.run(args), capsys.readouterr()) == (code, mine)
    assert (mine.out + mine.err).strip()


_TEARDOWN_PROBE = """
import os, shutil, sys, tempfile, threading, time, weakref
class Noisy:
    def __del__(self, write=os.write):  # (bound now: the teardown may clear this module's names first)
        write(2, b"teardown ran\\n")
keep = Noisy()
class Holder:
    pass
holder = Holder()
weakref.finalize(holder, shutil.rmtree, FOLDER)  # an exit handler (atexit): must run either way
if THREAD:
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
sys.argv = ["tileplan", *ARGS]
from tileplan import entry
entry.main()
"""


@pytest.mark.parametrize("args", [["plan", "lenet5", "--arch", "eyeriss", "-j", "1"],
                                  ["plan", "lenet5", "--budget", "0"]])
def test_console_script_ends_without_the_interpreter_teardown(args: list[str], tmp_path: Path) -> None:
    """The console script ends the process after the exit handlers (``entry.leave``), without the
    interpreter's teardown (no leftover object's ``__del__`` runs: 0.15-0.2 CPU-s after a plan); with
    another thread running it exits the usual way. Output, exit code and exit handlers: the same."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # (e.g. another typer)
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "120"}
    runs = []
    for thread in (False, True):
        folder = tmp_path / f"made-{thread}"
        folder.mkdir()
        probe = (_TEARDOWN_PROBE.replace("FOLDER", repr(str(folder))).replace("THREAD", str(thread))
                 .replace("ARGS", repr(args)))
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=300)
        assert not folder.exists()  # the exit handlers ran
        assert ("teardown ran" in done.stderr) == thread, done.stderr
        runs.append((done.returncode, done.stdout, done.stderr.replace("teardown ran\n", "")))
    assert runs[0] == runs[1]
    assert runs[0][0] == (0 if "--arch" in args else 2) and (runs[0][1] + runs[0][2]).strip()
