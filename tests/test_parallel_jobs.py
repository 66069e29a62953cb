"""TILEPLAN_JOBS: how many search processes a plan uses when --jobs is not given."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tileplan import api, parallel
from tileplan.parallel import default_jobs


def test_the_variable_sets_the_default_and_every_idle_cpu_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable: the CPUs left idle (rounded), at least one; busy CPUs are the smaller of the
    1-minute load average and the processes runnable now besides this one."""
    monkeypatch.delenv("TILEPLAN_JOBS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(parallel, "runnable_now", lambda: None)  # no /proc/loadavg: the average alone
    for load, jobs in [(0.0, 4), (0.4, 4), (0.6, 3), (1.2, 3), (2.5, 2), (3.6, 1), (9.0, 1)]:
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        assert default_jobs() == jobs, load
    # a program that just ended still weighs on the average; nothing runs now: every CPU
    for load, now, jobs in [(1.3, 0, 4), (1.3, 1, 3), (3.0, 2, 2), (0.2, 5, 4), (9.0, 9, 1)]:
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        monkeypatch.setattr(parallel, "runnable_now", lambda now=now: now)
        assert default_jobs() == jobs, (load, now)
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


def test_runnable_now_reads_the_kernels_count_without_the_reader(tmp_path: Path) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("1.30 0.90 0.70 3/412 12345\n")
    assert parallel.runnable_now(str(loadavg)) == 2
    loadavg.write_text("0.01 0.02 0.03 1/100 7\n")
    assert parallel.runnable_now(str(loadavg)) == 0
    loadavg.write_text("garbage\n")
    assert parallel.runnable_now(str(loadavg)) is None
    assert parallel.runnable_now(str(tmp_path / "missing")) is None
    if Path("/proc/loadavg").exists():
        assert parallel.runnable_now() is not None
