"""Loading the compiled loops from numba's cache skips numba's typing and lowering registries
(``cost.jit.load``): a fresh process that plans on the cached loops gets exactly the numbers of the
numpy twins, and never imports the registry modules that numba loads only to compile (a few of
them stand for the ~60 it loads; ``numba.np.arrayobj`` and what it imports are loaded anyway when a
loop that allocates is read, its environment names that module)."""

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
from tileplan.cost import compiled
from tileplan.search import tile_product
plan = api.plan("lenet5", "eyeriss", jobs=1)
loaded = {name: len(f().overloads) for name, f in (("model_loop", compiled.loop), ("unroll_loop", compiled.unroll_loop),
          ("walk", tile_product.compiled_walk), ("front", tile_product.compiled_front),
          ("dominators", tile_product.compiled_dominators))}
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
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    twin = api.plan("lenet5", "eyeriss", jobs=1)
    compiled_plan = json.loads(data["plan"])
    numpy_plan = json.loads(twin.to_json())
    for key in ("search_seconds", "seconds"):  # timings differ; everything else is the same plan
        for d in (compiled_plan, numpy_plan):
            d.pop(key, None)
            for lp in d.get("layers", []):
                lp.pop(key, None)
    assert compiled_plan == numpy_plan
