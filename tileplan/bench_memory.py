"""Peak memory of a process tree: this process and every live descendant (search workers, their
children), summed at each moment, for ``tileplan bench``'s "peak MiB".

``resource.getrusage`` gives only per-process maxima (``RUSAGE_SELF``, and the largest finished child
for ``RUSAGE_CHILDREN``), never what the processes held *together*; a pool of workers running beside
the planner holds their sum. :class:`TreePeak` samples the resident sets from ``/proc`` on a thread
(every ``interval_s``) and reports the largest sum seen, and never less than the per-process maxima
(a spike shorter than the interval is still counted that way). Without ``/proc`` (not Linux) it falls
back to those maxima alone. Resident sets count pages shared between processes (copy-on-write
after ``fork``) once per process, as ``ps`` and ``top`` do.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

PROC = Path("/proc")


def _page_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - every Linux has it
        return 4096


def _parents() -> dict[int, int]:
    """``{pid: parent pid}`` of every process visible in ``/proc``."""
    out: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            out[int(entry.name)] = int(fields[1])
    return out


def tree_pids(root: int) -> list[int]:
    """``root`` and every live descendant of it."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def rss_bytes(pid: int) -> int:
    """Resident set of process ``pid`` in bytes (0 when it has ended)."""
    try:
        return int((PROC / str(pid) / "statm").read_text().split()[1]) * _page_bytes()
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss_bytes(root: int | None = None) -> int:
    """Resident bytes of ``root`` (default: this process) and all its live descendants, now."""
    return sum(rss_bytes(pid) for pid in tree_pids(os.getpid() if root is None else root))


def rusage_peak_bytes() -> int:
    """The largest resident set of this process or of any finished child it waited for (bytes)."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return scale * max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


class TreePeak:
    """``with TreePeak() as peak: ...`` then ``peak.bytes``: the largest resident memory of this
    process and its descendants together while the block ran (sampled every ``interval_s``), and at
    least the per-process maxima of ``getrusage``."""

    def __init__(self, interval_s: float = 0.02, rescan_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.rescan_s = rescan_s
        self.sampled_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._root = os.getpid()
        self._proc = (PROC / str(self._root) / "statm").exists()
        self._pids: set[int] = set()
        self._listed = -math.inf

    def sample(self, *, rescan: bool = False) -> None:
        """Add up the tree's resident sets now. Listing the whole tree reads every process's ``stat``
        (milliseconds on a busy machine), so it is done every ``rescan_s``; in between, this
        process's own ``multiprocessing`` children (the search's worker pool) are added at once."""
        if not self._proc:
            return
        now = time.monotonic()
        if rescan or now - self._listed >= self.rescan_s:
            self._pids = set(tree_pids(self._root))
            self._listed = now
        try:
            self._pids.update(p.pid for p in multiprocessing.active_children() if p.pid is not None)
        except RuntimeError:  # the set of children changed while we looked: the next sample sees it
            pass
        self.sampled_bytes = max(self.sampled_bytes, sum(rss_bytes(pid) for pid in self._pids))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> TreePeak:
        self.sample(rescan=True)
        self._thread = threading.Thread(target=self._run, name="tileplan-tree-peak", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample(rescan=True)

    @property
    def bytes(self) -> int:
        return max(self.sampled_bytes, rusage_peak_bytes())

    @property
    def mib(self) -> float:
        return self.bytes / 2**20
