"""When compiled loops run (``cost.jit``): only once numba's on-disk cache holds them compiled from
their current source (or they are loaded), never compiling in the middle of a default run; and the
command line's one background compile, kept to one process by its lock file."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest

from tileplan import warmup
from tileplan.cost import compiled, jit, kernel

pytest.importorskip("numba")

SOURCE = '''
import numba


@numba.njit(cache=True)
def twice(x):
    return {factor} * x
'''


def _module(folder: Path, factor: int):
    path = folder / "jit_probe.py"
    path.write_text(SOURCE.format(factor=factor))
    sys.path.insert(0, str(folder))
    try:
        sys.modules.pop("jit_probe", None)
        importlib.invalidate_caches()
        return importlib.import_module("jit_probe")
    finally:
        sys.path.remove(str(folder))


def test_cache_is_read_from_numba_and_a_changed_source_makes_it_stale(tmp_path: Path) -> None:
    probe = _module(tmp_path, 2)
    assert not jit._cache_holds(probe.twice.py_func)  # never compiled
    assert probe.twice(21) == 42  # compiles and writes numba's cache
    assert jit._cache_holds(probe.twice.py_func)
    # Another source (same name, same line): numba would recompile, so it is not "cached".
    probe = _module(tmp_path, 30)
    assert not jit._cache_holds(probe.twice.py_func)


def test_the_installed_loops_are_cached() -> None:
    """``make venv`` compiled every loop (``python -m tileplan.warmup``)."""
    assert all(jit._cache_holds(f) for f in warmup.all_loops())


def test_cache_is_reread_at_most_every_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[bool] = []
    answers = iter([False, True])

    def holds(fn: object) -> bool:
        reads.append(True)
        return next(answers)

    def probe() -> None:
        pass

    clock = [1000.0]
    monkeypatch.setattr(jit, "_cache_holds", holds)
    monkeypatch.setattr(jit.time, "monotonic", lambda: clock[0])
    assert not jit.on_disk(probe) and len(reads) == 1
    clock[0] += jit.RECHECK_S / 2
    assert not jit.on_disk(probe) and len(reads) == 1  # too soon: not read again
    clock[0] += jit.RECHECK_S
    assert jit.on_disk(probe) and len(reads) == 2  # a background compile finished
    clock[0] += 10 * jit.RECHECK_S
    assert jit.on_disk(probe) and len(reads) == 2  # found once: never read again


def test_auto_mode_never_compiles_what_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    @cache
    def loader() -> object:
        calls.append("compiled")
        return object()

    def probe() -> None:
        pass

    monkeypatch.setattr(jit, "on_disk", lambda fn: False)
    monkeypatch.setenv("TILEPLAN_KERNEL", "auto")
    assert not jit.ready(probe, loader) and calls == []
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    assert not jit.ready(probe, loader) and calls == []
    monkeypatch.setenv("TILEPLAN_KERNEL", "numba")
    assert jit.ready(probe, loader) and calls == ["compiled"]
    monkeypatch.setenv("TILEPLAN_KERNEL", "auto")
    assert jit.ready(probe, loader)  # loaded in this process now
    monkeypatch.setattr(jit, "on_disk", lambda fn: True)
    assert compiled.wanted() and compiled.unroll_wanted()  # the real loops: cached by make venv


class _FakeProcess:
    pid = 4242


def test_one_background_compile_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)  # a process id that no longer exists

    def popen(args: list[str], **kwargs: object) -> _FakeProcess:
        started.append(args)
        assert kwargs["start_new_session"] is True  # Ctrl-C on the command does not reach it
        return _FakeProcess()

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setenv("TILEPLAN_KERNEL", "auto")
    monkeypatch.setattr(jit, "on_disk", lambda fn: False)
    loops = [kernel.model_loop]
    lock = tmp_path / jit.LOCK_NAME
    assert jit.compile_in_background(loops, tmp_path)
    assert started == [[sys.executable, "-m", "tileplan.warmup", "--background", str(lock)]]
    assert lock.read_text() == "4242\n"
    lock.write_text(f"{os.getpid()}\n")  # a process that exists
    assert jit.compile_in_background(loops, tmp_path) and len(started) == 1  # running: not started again
    old = time.time() - jit.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    assert jit.compile_in_background(loops, tmp_path) and len(started) == 2  # a hung one's lock is replaced
    lock.write_text(gone.stdout)
    assert jit.compile_in_background(loops, tmp_path) and len(started) == 3  # a killed one's lock is replaced
    assert not jit.compile_in_background(loops, None)  # numba can cache nowhere
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    assert not jit.compile_in_background(loops, tmp_path) and len(started) == 3
    monkeypatch.setenv("TILEPLAN_KERNEL", "auto")
    monkeypatch.setattr(jit, "on_disk", lambda fn: True)
    assert not jit.compile_in_background(loops, tmp_path)  # everything cached: nothing to do


def test_background_process_removes_its_lock_even_when_it_fails(tmp_path: Path) -> None:
    lock = tmp_path / jit.LOCK_NAME
    lock.write_text("1\n")

    def fail() -> None:
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError):
        jit.background_main(lock, fail, nice=0)
    assert not lock.exists()


def test_inlined_from_names_every_module_compiled_into_the_loops() -> None:
    """numba's cache of ``kernel.model_loop`` is keyed by ``kernel.py`` alone; ``cost.jit`` drops it
    when a module in ``kernel.INLINED_FROM`` is newer, so that list must name every module whose
    functions the loops call."""
    import inspect

    called = {f.__module__ for f in vars(kernel).values() if inspect.isfunction(f)}
    assert called - {"tileplan.cost.kernel"} == set(kernel.INLINED_FROM)
