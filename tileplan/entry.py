"""The ``tileplan`` console script. Ctrl-C handling is installed first, before the command line's
(heavy) imports, so an early Ctrl-C is as clean as one during a search: "interrupted", exit 130."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import NoReturn

_FIRST: list[float] = []  # when the Ctrl-C being handled arrived (monotonic seconds)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C: stop the work (``KeyboardInterrupt``); SIGTERM and SIGHUP the same way (``Stopped``,
    exit 143 and 129). Another stop within 2 s is ignored, so it cannot break the clean-up
    (cancelling queued work, ending worker processes, removing temp files); a later one interrupts
    again (in case a library swallowed the first)."""
    now = time.monotonic()
    if _FIRST and now - _FIRST[0] < 2.0:
        return
    _FIRST[:] = [now]
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    from tileplan.errors import Stopped

    raise Stopped(signum)


def main() -> None:
    """Console entry point: run the command line and exit with its code.

    BLAS runs single-threaded unless the environment says otherwise: planning parallelises over
    processes (``--jobs``), and BLAS threads competing with them (or with other work on a shared
    machine) made the fused model's small matrix products 30-50x slower. Results do not change
    (those products sum integer counts)."""
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_sigint)
    try:
        from tileplan.listing import quick

        code = quick(sys.argv[1:])  # `arch list` and `zoo list` need no argument parsing
        if code is None:
            from tileplan.cli import run

            code = run()
    except KeyboardInterrupt as exc:  # before or after a command's own guard
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        print("interrupted", file=sys.stderr)
        code = 128 + int(getattr(exc, "signum", signal.SIGINT))
    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP):
        # Stopped by a signal, clean-up done: leave without the interpreter's exit handlers.
        # concurrent.futures' joins the pool's manager thread, which can raise "Bad file descriptor"
        # on the pipe of a pool whose workers were just terminated (seen under load after SIGTERM).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    leave(code)


def leave(code: int) -> NoReturn:
    """End the process with ``code`` once the command is done. When nothing else runs in it (no thread
    but this one), the exit handlers run (``atexit``: logging, multiprocessing's finalizers, temporary
    folders, a coverage tool's) and the process ends without the interpreter's teardown, which frees
    every object and module one by one (about 50 000 objects and 500 modules after a plan: 0.15-0.2
    CPU-s, docs/architecture-startup.md); the system frees the process at once. Output is flushed
    first; a flush that fails (a closed pipe) and a process with other threads exit the usual way, so
    the interpreter reports and waits as it always does."""
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except (OSError, ValueError, AttributeError):
        sys.exit(code)
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except (OSError, ValueError, AttributeError):
        pass
    os._exit(code)


if __name__ == "__main__":
    main()
