"""One exception hierarchy. Messages name the file, field or layer and say what would fix it."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class TileplanError(Exception):
    """Base of every error tileplan raises on purpose; the CLI prints it as one line."""


class ConfigError(TileplanError):
    """An accelerator description (YAML/JSON) is malformed or inconsistent."""


class WorkloadError(TileplanError):
    """A layer or network is malformed (negative size, shape mismatch, unknown name...)."""


class UnsupportedOperatorError(WorkloadError):
    """A model file uses operators tileplan cannot plan."""


class MappingError(TileplanError):
    """A mapping is invalid for its layer/architecture (tile too large, does not fit a memory...)."""


class InfeasibleError(TileplanError):
    """No mapping of a layer fits the accelerator, even with every tile size at 1."""


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP) handled exactly like Ctrl-C: the work stops, workers end,
    temporary files go; the command exits with 128 + ``signum`` (143, 129)."""

    #: The signal of the last stop raised in this process (0: none), for callers that only see the
    #: exit code 130 a library substituted for the exception.
    last_signum: int = 0

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum
        Stopped.last_signum = signum


def stop_exit_code(exc: BaseException | None = None) -> int:
    """Exit code of a stop: 128 + the signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
    signum = getattr(exc, "signum", None) or Stopped.last_signum or 2
    return 128 + int(signum)


def printable(text: str) -> str:
    r"""``text`` (a name read from an input file) with control characters escaped (``\x1b``...):
    printed to a terminal, a name cannot move the cursor, recolour or retitle the window, nor
    reorder the line (bidirectional overrides).

    >>> printable("conv\x1b]0;pwned\x07")
    'conv\\x1b]0;pwned\\x07'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)
