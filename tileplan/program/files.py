"""Programs on disk: read IR files (errors name the file and line) and write IR or C atomically."""

from __future__ import annotations

from pathlib import Path

from tileplan.program.cgen import emit_c
from tileplan.program.errors import ProgramError
from tileplan.program.ir import Program
from tileplan.program.irtext import emit_ir, parse_ir
from tileplan.report.files import write_text_atomic


def read_ir(path: str | Path) -> Program:
    """Parse the IR file at ``path``; a :class:`ProgramError` names the file and the line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ProgramError(f"cannot read the program: {err}", source=str(path)) from None
    try:
        return parse_ir(text)
    except ProgramError as err:
        raise ProgramError(err.detail, line=err.line, source=str(path)) from None


def write_ir(program: Program, path: str | Path) -> None:
    """Write ``program`` as IR text to ``path`` (whole or not at all, with the user's umask)."""
    write_text_atomic(path, emit_ir(program))


def write_c(program: Program, path: str | Path) -> None:
    """Write ``program`` as a C99 source to ``path`` (whole or not at all, with the user's umask)."""
    write_text_atomic(path, emit_c(program))
