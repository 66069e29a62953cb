"""Run a function over items in worker processes, and stop at once when interrupted.

Workers ignore SIGINT: a Ctrl-C sent to the whole process group reaches only the parent, which then
cancels every queued item, terminates the workers and re-raises ``KeyboardInterrupt`` (the CLI
prints "interrupted" and exits with 130). The same clean-up runs when an item fails or the
consumer stops iterating, so no worker outlives the call. A second Ctrl-C during the clean-up is
ignored, so it cannot leave the process half torn down.

>>> sorted(run_parallel(abs, [-3, 2, -1], jobs=1))
[(0, 3), (1, 2), (2, 1)]
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from functools import cache
from typing import TypeVar

from tileplan.errors import TileplanError

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["default_jobs", "run_parallel"]

#: Environment variable that sets how many processes a search uses when ``--jobs`` is not given.
JOBS_VARIABLE = "TILEPLAN_JOBS"


def default_jobs() -> int:
    """Processes a search uses when the caller gives none: ``TILEPLAN_JOBS`` when set (a shared machine,
    a CI runner, a test suite that already runs one worker per core), otherwise every CPU left idle (at
    least one): a worker forked onto a busy CPU only adds its start-up (0.15-0.35 CPU s for two,
    ``docs/peers.md``) and takes turns with the others. Busy CPUs are the smaller of the last
    minute's load average and the processes runnable now besides this one (:func:`runnable_now`): the
    average lags by a minute, so right after another program ends it still counts that program's CPU.

    >>> import os; os.environ["TILEPLAN_JOBS"] = "3"; default_jobs()
    3
    >>> del os.environ["TILEPLAN_JOBS"]
    """
    value = os.environ.get(JOBS_VARIABLE, "").strip()
    if not value:
        cpus = max(1, os.cpu_count() or 1)
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - no load average on this platform
            return cpus
        now = runnable_now()
        busy = load if now is None else min(load, float(now))
        return max(1, min(cpus, int(cpus - busy + 0.5)))
    if not value.isdigit() or int(value) < 1:
        raise TileplanError(f"{JOBS_VARIABLE}={value!r} is not a number of processes; set it to a positive "
                            f"integer (e.g. {JOBS_VARIABLE}=2) or unset it to use every CPU")
    return int(value)


def runnable_now(loadavg: str = "/proc/loadavg") -> int | None:
    """Processes (threads) runnable at this moment other than this one, from the kernel's count in
    ``/proc/loadavg`` (its fourth field, ``running/total``, counts the reader itself); ``None`` where
    there is no such file (not Linux) or it cannot be read."""
    try:
        with open(loadavg, encoding="ascii") as file:
            running = file.read().split()[3].split("/")[0]
        return max(0, int(running) - 1)
    except (OSError, IndexError, ValueError):
        return None


def _worker_init(parent: int) -> None:
    """Worker initializer: Ctrl-C is the parent's business; SIGTERM and SIGHUP end the worker at once
    (not the parent's clean stop it inherited); and the worker dies with its parent, even when the
    parent is killed outright (SIGKILL), so none lives on holding the parent's stdout open."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """End this (child) process when process ``parent`` ends: Linux's parent-death signal, else a
    watchdog thread that polls the parent id twice a second."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    if not armed:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="tileplan-parent-watch").start()


_PR_SET_PDEATHSIG = 1


@cache
def _preload() -> None:
    """Load, once, before forking, what every worker would otherwise load on its own: the compiled loops
    (the extensions, or what numba's on-disk cache holds: about 0.6 s of CPU per worker and per pool
    from numba's cache). (``numpy.ma``, which numpy 2's plain ``np.unique`` imports at its first call,
    is not loaded at all: the search calls ``tileplan.arrays.distinct`` instead.)"""
    from tileplan.cost import compiled
    from tileplan.search import tile_product

    compiled.load_cached()
    tile_product.load_cached()


def run_parallel(fn: Callable[[T], R], items: Sequence[T], *, jobs: int) -> Iterator[tuple[int, R]]:
    """Yield ``(index, fn(items[index]))`` as items finish, over ``jobs`` processes (in this process
    when ``jobs`` is 1 or there is at most one item). ``fn`` and the items must be picklable."""
    if jobs <= 1 or len(items) <= 1:
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    _preload()
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(items)), initializer=_worker_init,
                               initargs=(os.getpid(),))
    futures: dict[Future[R], int] = {}
    try:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    except BrokenProcessPool:
        _stop(pool, futures)
        raise TileplanError("a worker process was killed by the system (most likely it ran out of memory); "
                            "run with fewer --jobs, or keep the search's pruning on") from None
    except BaseException:
        _stop(pool, futures)
        raise
    pool.shutdown(wait=True)


def _stop(pool: ProcessPoolExecutor, futures: dict[Future[R], int]) -> None:
    """Cancel what is queued and end the workers now (they may be in the middle of a long search)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        for fut in futures:
            fut.cancel()
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for proc in processes:
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1)
        from tileplan.search.shared import remove_orphans

        remove_orphans()  # value files of the workers just ended (they ran no clean-up)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
