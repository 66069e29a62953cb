"""A best-so-far objective value shared by the worker processes that search one layer together.

Each value lives in a small file mapped into memory (in ``/dev/shm`` where it exists): any process
that knows the path and slot reads it and offers lower values. Writes are not atomic with the
read before them, so a value can briefly go up again; it is always the objective of some mapping
found, which is all pruning needs (a part of the space is skipped only when it cannot even tie).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np


@dataclass
class SharedBest:
    """Slot ``slot`` of the shared value file at ``path`` (``inf`` until a mapping is found)."""

    path: str
    slot: int
    _values: np.ndarray | None = field(default=None, repr=False, compare=False)

    def _map(self) -> np.ndarray:
        if self._values is None:
            self._values = np.memmap(self.path, dtype=np.float64, mode="r+")
        return self._values

    def get(self) -> float:
        return float(self._map()[self.slot])

    def offer(self, value: float) -> None:
        """Record ``value`` if it is lower than the shared one."""
        values = self._map()
        if value < values[self.slot]:
            values[self.slot] = value

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path, "slot": self.slot, "_values": None}


@contextmanager
def shared_values(count: int) -> Iterator[str]:
    """A file of ``count`` values, all ``inf``, removed on exit; yields its path (no file and an
    empty path when ``count`` is 0: nothing to share)."""
    if count <= 0:
        yield ""
        return
    folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    _remove_orphans(folder or tempfile.gettempdir())
    fd, path = tempfile.mkstemp(prefix=f"tileplan-best-{os.getpid()}-", suffix=".f64", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(np.full(max(count, 1), np.inf).tobytes())
        yield path
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def remove_orphans() -> None:
    """Remove the value files of processes that no longer run (see :func:`_remove_orphans`)."""
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    _remove_orphans(folder)


def _remove_orphans(folder: str) -> None:
    """Remove value files left by a process killed outright (SIGKILL: no clean-up ran); the process
    id in a file's name tells whether its owner still runs."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith("tileplan-best-") and n.endswith(".f64")]
    except OSError:
        return
    for name in names:
        pid = name.split("-")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
        except PermissionError:
            pass


class Floor:
    """A fixed value to prune with, in the place of a :class:`SharedBest` (nothing is offered back)."""

    def __init__(self, value: float) -> None:
        self.value = value

    def get(self) -> float:
        return self.value

    def offer(self, value: float) -> None:
        pass
