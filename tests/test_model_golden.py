"""The cost model gives exactly the numbers it gave before it was restructured (a stored random
batch of mappings over several layers, accelerators and core splits), on both execution paths.

The default run checks every stored batch on the compiled paths (numba, numpy when numba is missing; the
built extension when there is one) and every fourth batch on the numpy path (both splits, several machines
and kinds); the ``slow`` run every batch on the numpy path too."""

from __future__ import annotations

import numpy as np
import pytest
from golden_batches import FIELDS, GOLDEN, batches

from tileplan.cost import compiled
from tileplan.cost.model import evaluate


@pytest.mark.parametrize(("kernel_mode", "every"), [
    ("numpy", 4), ("numba", 1), ("extension", 1), pytest.param("numpy", 1, marks=pytest.mark.slow, id="numpy-all")])
def test_costs_equal_stored_golden_costs(kernel_mode, every, monkeypatch):
    if kernel_mode == "numba" and compiled.loop() is None:
        kernel_mode, every = "numpy", 1  # the default run checks every golden cost on one path
    monkeypatch.setenv("TILEPLAN_KERNEL", "auto" if kernel_mode == "extension" else kernel_mode)
    if kernel_mode == "extension" and compiled.built() is None:
        pytest.skip("the kernel's extension is not built (python -m tileplan.warmup builds it)")
    golden = np.load(GOLDEN)
    cases = batches()
    checked = 0
    for i, (problem, batch) in enumerate(cases):
        if i % every:
            continue
        costs = evaluate(problem, batch)
        for f in FIELDS:
            np.testing.assert_array_equal(np.asarray(getattr(costs, f)), golden[f"{i}_{f}"],
                                          err_msg=f"case {i} ({problem.layer.name} on {problem.arch.name}): {f}")
        checked += 1
    assert checked == -(-len(cases) // every) and len(golden.files) == len(cases) * len(FIELDS)
