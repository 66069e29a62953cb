"""Programs on disk: read IR files (errors name the file and line) and write IR, C or CUDA atomically."""

from __future__ import annotations

from pathlib import Path

from tileplan.mapping import Mapping
from tileplan.program.cgen import emit_c
from tileplan.program.cudagen import emit_cuda, thread_block
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


#: Program targets of ``tileplan emit`` and the file suffix of each.
TARGETS: dict[str, str] = {"ir": "ir", "c": "c", "cuda": "cu"}


def write_program(program: Program, path: str | Path, target: str, *, mapping: Mapping | None = None) -> None:
    """Write ``program`` for ``target`` (see :data:`TARGETS`); a CUDA program's thread block is the
    ``mapping``'s unrolling of C x K (16 x 16 without one)."""
    if target not in TARGETS:
        raise ProgramError(f"unknown target {target!r}; choose {', '.join(TARGETS)}")
    if target == "ir":
        write_ir(program, path)
    elif target == "c":
        write_c(program, path)
    else:
        threads = thread_block(mapping) if mapping is not None else (16, 16)
        write_text_atomic(path, emit_cuda(program, threads=threads))
