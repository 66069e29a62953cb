"""Property sweeps in two sizes: a few examples in every run (``make test``) and the whole sweep under
the ``slow`` marker (``make test-all``), from one test body.

    @sweep(30, 150, cases(), st.sampled_from([1, 4]))
    def test_model_equals_loop_walk(case, burst): ...
    test_model_equals_loop_walk_full = test_model_equals_loop_walk.full

The first is the quick test (``quick`` examples); its ``full`` attribute the same body with ``full``
examples, marked ``slow`` (bind it to a module-level ``test_*_full`` name so pytest collects it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings


def sweep(quick: int, full: int, *strategies: Any, suppress: bool = False,
          **named: Any) -> Callable[[Callable[..., None]], Any]:
    """``@settings(max_examples=quick) @given(*strategies, **named)`` with a ``full``-example twin
    marked slow (no deadline: timing is the business of ``tileplan bench``, not of tests);
    ``suppress``: turn off hypothesis's health checks (slow data generation)."""
    checks = list(HealthCheck) if suppress else []

    def wrap(fn: Callable[..., None]) -> Any:
        quick_test = settings(max_examples=quick, deadline=None, suppress_health_check=checks)(
            given(*strategies, **named)(fn))
        full_test = settings(max_examples=full, deadline=None, suppress_health_check=checks)(
            given(*strategies, **named)(fn))
        quick_test.full = pytest.mark.slow(full_test)
        return quick_test

    return wrap
