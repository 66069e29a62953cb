"""The compiled loops built at install as extensions load without numba (``cost.aot``), and loading
them from numba's cache skips numba's typing and lowering registries (``cost.jit.load``): a fresh
process that plans on either gets exactly the numbers of the numpy twins; on the extensions it never
imports numba, on numba's cache it never imports the registry modules that numba loads only to
compile (a few of them stand for the ~60 it loads; ``numba.np.arrayobj`` and what it imports are
loaded anyway when a loop that allocates is read, its environment names that module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileplan import api, warmup

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from tileplan import api
from tileplan.cost import aot, compiled
from tileplan.search import tile_product
aot.load = lambda ext, fallbacks: None  # numba's cache, not the extensions built at install
plan = api.plan("lenet5", "eyeriss", jobs=1)
loaded = {name: len(f().overloads) for name, f in (("model_loop", compiled.loop), ("unroll_loop", compiled.unroll_loop),
          ("walk", tile_product.numba_walk), ("front", tile_product.numba_front),
          ("dominators", tile_product.numba_dominators))}
print(json.dumps({"plan": plan.to_json(), "loaded": loaded,
                  "registries": [m for m in ("numba.np.linalg", "numba.typed.typeddict", "numba.cpython.setobj",
                                             "numba.np.npdatetime", "numba.np.random.generator_core")
                                 if m in sys.modules]}))
"""


def test_cached_loops_load_without_numbas_registries_and_plan_as_the_numpy_twins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not warmup.cached():
        pytest.skip("numba's cache does not hold the loops yet (make venv compiles them)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEPLAN_KERNEL": "auto"}
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600, check=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["loaded"] == {"model_loop": 1, "unroll_loop": 1, "walk": 1, "front": 1, "dominators": 1}
    assert data["registries"] == []
    assert _without_timings(data["plan"]) == _numpy_plan(monkeypatch)


def _without_timings(plan_json: str) -> dict[str, object]:
    plan = json.loads(plan_json)
    for key in ("search_seconds", "seconds"):  # timings differ; everything else is the same plan
        plan.pop(key, None)
        for lp in plan.get("layers", []):
            lp.pop(key, None)
    return plan


def _numpy_plan(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    return _without_timings(api.plan("lenet5", "eyeriss", jobs=1).to_json())


_EXTENSION_PROBE = """
import json, sys
from tileplan import api
from tileplan.cost import compiled
from tileplan.search import tile_product
plan = api.plan("lenet5", "eyeriss", jobs=1)
calls = {name: (loop.calls, loop.fallen_back) for ext in (compiled.built(), tile_product.built())
         for name, loop in (ext or {}).items()}
print(json.dumps({"plan": plan.to_json(), "calls": calls, "numba": "numba" in sys.modules}))
"""


def test_a_fresh_process_plans_on_the_extensions_without_importing_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the extensions built at install (``cost.aot``), a planning process never imports numba,
    every loop runs from the extensions with the argument types they were built for, and the plan is
    exactly the numpy twins'."""
    if not warmup.built():
        pytest.skip("the extensions are not built (python -m tileplan.warmup builds them)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILEPLAN_KERNEL": "auto"}
    done = subprocess.run([sys.executable, "-c", _EXTENSION_PROBE], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600, check=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["numba"] is False
    assert set(data["calls"]) == {"model_loop", "unroll_loop", "walk", "front", "dominators"}
    assert all(ran > 0 and fallen_back == 0 for ran, fallen_back in data["calls"].values()), data["calls"]
    assert _without_timings(data["plan"]) == _numpy_plan(monkeypatch)
