"""The command line answers at once: building the app, ``--help``, ``arch list``, ``zoo list`` and an
argument error import none of the heavy modules (the model, numpy's kernels, numba, matplotlib,
onnx, ray). Each case runs in a fresh interpreter and reads its ``sys.modules``: a presence check,
not a timing, so a loaded machine cannot make it flake. The timings are in docs/architecture-startup.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileplan import api
from tileplan.cli.app import FUSION_STRATEGY_NAMES, LEVEL_STRATEGY_NAMES, OBJECTIVE_NAMES, STRATEGY_NAMES
from tileplan.fusion.ye import FUSED_FAMILIES
from tileplan.search import LEVEL_STRATEGIES, STRATEGIES

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


def _fresh(args: list[str]) -> tuple[int, set[str], str]:
    """Run ``tileplan ARGS`` in a new interpreter; its exit code, loaded modules and output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-c", _PROBE.replace("ARGS", repr(args))], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    data = json.loads(last)
    return int(data["code"] or 0), set(data["modules"]), done.stdout[: -len(last) - 1] + done.stderr


@pytest.mark.parametrize("args", [["--help"], ["plan", "--help"], ["arch", "list"], ["zoo", "list"]])
def test_quick_commands_import_nothing_heavy(args: list[str]) -> None:
    code, modules, output = _fresh(args)
    assert code == 0, output
    assert output.strip()  # it did answer (help text, preset or network list)
    assert not [m for m in HEAVY if m in modules]


@pytest.mark.parametrize(("args", "message"), [
    (["plan", "lenet5", "--budget", "0"], "Invalid value for '--budget'"),
    (["plan", "lenet5", "--no-such-option"], "No such option"),
    (["plan", "lenet5", "--strategy", "tso9"], "unknown strategy 'tso9'"),
    (["compare", "lenet5", "-s", "exhaustive,tso9"], "unknown strategy 'tso9'"),
    (["plan", "lenet5", "--objective", "speed"], "unknown objective 'speed'"),
    (["emit", "lenet5", "--output", "x", "-o", "speed"], "unknown objective 'speed'"),
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
