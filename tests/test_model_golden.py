"""The cost model gives exactly the numbers it gave before it was restructured (a stored random
batch of mappings over several layers, accelerators and core splits), on both execution paths."""

from __future__ import annotations

import numpy as np
import pytest
from golden_batches import FIELDS, GOLDEN, batches

from tileplan.cost import compiled
from tileplan.cost.model import evaluate


@pytest.mark.parametrize("kernel_mode", ["numpy", "numba", "extension"])
def test_costs_equal_stored_golden_costs(kernel_mode, monkeypatch):
    monkeypatch.setenv("TILEPLAN_KERNEL", "auto" if kernel_mode == "extension" else kernel_mode)
    if kernel_mode == "numba" and compiled.loop() is None:
        pytest.skip("numba not installed")
    if kernel_mode == "extension" and compiled.built() is None:
        pytest.skip("the kernel's extension is not built (python -m tileplan.warmup builds it)")
    golden = np.load(GOLDEN)
    for i, (problem, batch) in enumerate(batches()):
        costs = evaluate(problem, batch)
        for f in FIELDS:
            np.testing.assert_array_equal(np.asarray(getattr(costs, f)), golden[f"{i}_{f}"],
                                          err_msg=f"case {i} ({problem.layer.name} on {problem.arch.name}): {f}")
