"""TILEPLAN_JOBS: how many search processes a plan uses when --jobs is not given."""

from __future__ import annotations

import os
from typing import Any

import pytest
from typer.testing import CliRunner

from tileplan import api
from tileplan.parallel import default_jobs


def test_the_variable_sets_the_default_and_every_idle_cpu_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable: the CPUs the 1-minute load average leaves idle (rounded), at least one."""
    monkeypatch.delenv("TILEPLAN_JOBS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    for load, jobs in [(0.0, 4), (0.4, 4), (0.6, 3), (1.2, 3), (2.5, 2), (3.6, 1), (9.0, 1)]:
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        assert default_jobs() == jobs, load
    monkeypatch.setenv("TILEPLAN_JOBS", " 3 ")
    assert default_jobs() == 3  # the variable wins whatever the load


def test_a_plan_uses_it_and_an_explicit_jobs_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = api.run_parallel

    def spy(fn: Any, items: Any, *, jobs: int) -> Any:
        seen.append(jobs)
        return real(fn, items, jobs=1)  # the plan itself in this process: only the count is under test

    monkeypatch.setattr(api, "run_parallel", spy)
    monkeypatch.setenv("TILEPLAN_JOBS", "2")
    by_env = api.plan("lenet5", "eyeriss")
    explicit = api.plan("lenet5", "eyeriss", jobs=1)
    assert seen == [2, 1]
    assert [(p.mapping, p.cost) for p in by_env.layers] == [(p.mapping, p.cost) for p in explicit.layers]


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_value_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from tileplan.cli import app

    monkeypatch.setenv("TILEPLAN_JOBS", value)
    result = CliRunner().invoke(app, ["plan", "lenet5", "--arch", "eyeriss"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0] == (f"error: TILEPLAN_JOBS={value!r} is not a number of processes; set it to a positive integer "
                        f"(e.g. TILEPLAN_JOBS=2) or unset it to use every CPU")
