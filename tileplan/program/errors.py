"""Errors of execution programs: malformed IR text, and programs that fail while they run."""

from __future__ import annotations

from tileplan.errors import TileplanError


class ProgramError(TileplanError):
    """An execution program is malformed or misbehaves; ``line`` is its 1-based IR line (0: unknown).

    >>> str(ProgramError("unknown instruction 'JUMP'", line=12))
    "line 12: unknown instruction 'JUMP'"
    """

    def __init__(self, message: str, *, line: int = 0) -> None:
        self.line = line
        self.detail = message
        super().__init__(f"line {line}: {message}" if line else message)


class OnChipOverflowError(ProgramError):
    """A LOAD (or INIT) would write past the end of an on-chip memory."""

    def __init__(self, message: str, *, line: int, memory: str) -> None:
        self.memory = memory
        super().__init__(message, line=line)
