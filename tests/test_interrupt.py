"""Ctrl-C during a search stops at once: workers end, "interrupted", exit 130, nothing written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tileplan.parallel import run_parallel

TILEPLAN = Path(sys.executable).parent / "tileplan"


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far."""
    stat = (Path("/proc") / str(pid) / "stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt(tmp_path: Path, signals: int, jobs: int) -> tuple[subprocess.CompletedProcess[str], float, list[int]]:
    cmd = [str(TILEPLAN), "plan", "vgg16", "--arch", "nmp", "--json", "out.json", "--jobs", str(jobs)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        # The search has started once the worker processes exist, or (one job) once the planner has
        # used more CPU than starting up and building the network take (about 1.2 s; a whole
        # lenet5 plan takes 1.1-1.6 CPU-s, VGG-16's ~14 on one job: at 2.5 s it is well into the search).
        while time.monotonic() < deadline and (len(_group(proc.pid)) < 1 + jobs if jobs > 1
                                               else _cpu_seconds(proc.pid) < 2.5):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, "the plan finished before it could be interrupted"
        start = time.monotonic()
        for _ in range(signals):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=10)
        elapsed = time.monotonic() - start
        time.sleep(0.2)
        left = _group(proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), elapsed, left


@pytest.mark.skipif(not TILEPLAN.exists() or not Path("/proc/self/stat").exists(), reason="needs the console "
                    "script and /proc")
@pytest.mark.parametrize(("signals", "jobs"), [(1, 2), pytest.param(2, 2, marks=pytest.mark.slow), (1, 1)])
def test_ctrl_c_stops_the_search_at_once(tmp_path: Path, signals: int, jobs: int) -> None:
    result, elapsed, left = _interrupt(tmp_path, signals, jobs)
    assert result.returncode == 130, result
    assert result.stderr.strip() == "interrupted" and "Traceback" not in result.stderr
    assert elapsed < 3.0
    assert list(tmp_path.iterdir()) == []  # no out.json, no temp file
    assert left == []  # every worker process ended


@pytest.mark.skipif(not TILEPLAN.exists(), reason="needs the console script")
def test_ctrl_c_while_starting_up(tmp_path: Path) -> None:
    proc = subprocess.Popen([str(TILEPLAN), "plan", "vgg16", "--json", "out.json"], cwd=tmp_path,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.6)  # still importing
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # a library swallowed it while loading: Ctrl-C again, as a user would
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130 and stderr.strip() == "interrupted", stderr
    assert list(tmp_path.iterdir()) == []


def _boom(x: int) -> int:
    if x == 3:
        raise ValueError("item 3 is bad")
    time.sleep(0.01 if x < 3 else 30)
    return x


def test_a_failing_item_ends_the_pool_at_once() -> None:
    start = time.monotonic()
    with pytest.raises(ValueError, match="item 3 is bad"):
        list(run_parallel(_boom, list(range(8)), jobs=2))
    assert time.monotonic() - start < 10  # the workers sleeping 30 s were terminated


def _killed(x: int) -> int:
    if x == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's out-of-memory killer does
    time.sleep(0.01 if x < 1 else 30)
    return x


def test_a_worker_killed_by_the_system_is_one_clear_error() -> None:
    """A worker the system kills (out of memory) ends the pool with an error naming the likely cause."""
    from tileplan.errors import TileplanError

    start = time.monotonic()
    with pytest.raises(TileplanError, match="ran out of memory"):
        list(run_parallel(_killed, list(range(6)), jobs=2))
    assert time.monotonic() - start < 10


def test_run_parallel_keeps_indices() -> None:
    assert sorted(run_parallel(abs, [-4, 5, -6, 7], jobs=2)) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert list(run_parallel(abs, [-1], jobs=4)) == [(0, 1)]
