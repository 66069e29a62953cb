"""Errors of execution programs: malformed IR text, and programs that fail while they run."""

from __future__ import annotations

from tileplan.errors import TileplanError


class ProgramError(TileplanError):
    """An execution program is malformed or misbehaves; ``line`` is its 1-based IR line (0: unknown)
    and ``source`` the file it came from (empty: not from a file).

    >>> str(ProgramError("unknown instruction 'JUMP'", line=12, source="conv1.ir"))
    "conv1.ir: line 12: unknown instruction 'JUMP'"
    """

    def __init__(self, message: str, *, line: int = 0, source: str = "") -> None:
        self.line = line
        self.source = source
        self.detail = message
        where = (f"{source}: " if source else "") + (f"line {line}: " if line else "")
        super().__init__(where + message)


class OnChipOverflowError(ProgramError):
    """A LOAD (or INIT) would write past the end of an on-chip memory (``memory`` names it)."""

    def __init__(self, message: str, *, line: int, memory: str) -> None:
        self.memory = memory
        super().__init__(message, line=line)
