"""Verify a layer through its generated C99 program: compile it with ``cc``, run it on random operands,
and set what the binary computed and counted beside the direct reference and the cost model.

The binary is a witness independent of the Python executor: it moves its own tiles, computes with its
own loops (``cgen_template``, ``cgen_ew``) and counts its own DRAM bytes, TSO bursts and aligned blocks.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.mapping import Mapping
from tileplan.program.cgen import emit_c, operand_format
from tileplan.program.errors import ProgramError
from tileplan.program.generate import generate_program
from tileplan.program.ir import Program
from tileplan.program.reference import reference_output
from tileplan.program.verify import VerifyResult, compare, random_operands
from tileplan.workload.layer import Layer

#: Compiler flags of the verified binaries (warnings are errors: the generated C must be clean), and
#: the libraries linked after the source (the float element-wise kinds call libm).
CFLAGS = ("-std=c99", "-O1", "-Wall", "-Wextra", "-Werror")
LIBS = ("-lm",)

_BYTES = re.compile(r"dram read bytes: input (\d+) weight (\d+) output (\d+); written bytes (\d+)")
_BURSTS = re.compile(r"dram bursts: input (\d+) weight (\d+) output (\d+); "
                     r"aligned blocks: input (\d+) weight (\d+) output (\d+)")


@dataclass(frozen=True)
class CRun:
    """What a C program computed and counted: ``output`` (N, G*K, P, Q) (int64, or float64 for a float
    kind), DRAM bytes read per operand (input, weight, partial sums) and written, TSO bursts and
    burst-aligned blocks per operand."""

    output: np.ndarray
    read_bytes: tuple[int, int, int]
    write_bytes: int
    bursts: tuple[int, int, int]
    aligned_bursts: tuple[int, int, int]
    instructions: int


def parse_report(stdout: str) -> tuple[tuple[int, int, int], int, tuple[int, int, int], tuple[int, int, int]]:
    """Bytes read per operand, bytes written, bursts and aligned blocks per operand, from the two lines a
    generated program prints at its end."""
    b, u = _BYTES.search(stdout), _BURSTS.search(stdout)
    if b is None or u is None:
        raise ProgramError(f"the C program printed no DRAM counts: {stdout[-300:]!r}")
    r, s = [int(v) for v in b.groups()], [int(v) for v in u.groups()]
    return (r[0], r[1], r[2]), r[3], (s[0], s[1], s[2]), (s[3], s[4], s[5])


def compiler() -> str:
    """The C compiler on PATH (``cc``), or one clear error."""
    cc = shutil.which("cc")
    if cc is None:
        raise TileplanError("the C backend needs a C compiler: `cc` is not on PATH (install gcc or clang, or "
                            "verify with the Python executor: --backend numpy)")
    return cc


def compile_c(source: str, folder: Path, cc: str | None = None) -> Path:
    """Write ``source`` into ``folder`` and compile it with :data:`CFLAGS`; the executable's path."""
    src, exe = folder / "program.c", folder / "program"
    src.write_text(source, encoding="utf-8")
    done = subprocess.run([cc or compiler(), *CFLAGS, "-o", str(exe), str(src), *LIBS], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise ProgramError(f"cc failed on the generated C: {done.stderr.strip()[:400]}")
    return exe


def run_c(exe: Path, program: Program, inputs: Sequence[np.ndarray], weight: np.ndarray | None, folder: Path,
          *, timeout_s: float = 600.0) -> CRun:
    """Run the compiled ``program`` on ``inputs`` (and ``weight``) written as its operand files."""
    fmt_in, fmt_out = operand_format(program)
    args = []
    for i, x in enumerate(list(inputs) + ([weight] if weight is not None else [])):
        path = folder / f"operand{i}.bin"
        np.asarray(x).astype(fmt_in).tofile(path)
        args.append(str(path))
    out_path = folder / "output.bin"
    try:
        done = subprocess.run([str(exe), *args, str(out_path)], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ProgramError(f"the C program of layer {program.name} ran longer than {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise ProgramError(f"the C program of layer {program.name} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[:300]}")
    n, g, k, p, q = program.output.shape
    output = np.fromfile(out_path, dtype=fmt_out).reshape(n, g * k, p, q)
    read, written, bursts, blocks = parse_report(done.stdout)
    return CRun(output, read, written, bursts, blocks, program.instruction_count)


def verify_layer_c(layer: Layer, arch: Arch, mapping: Mapping, *, seed: int = 0) -> VerifyResult:
    """As :func:`~tileplan.program.verify_layer`, with the generated C program in place of the Python
    executor: its output against the direct reference and its printed bytes and bursts against the model.

    Raises ``ProgramError`` when the program cannot be emitted, compiled or run (a tile that overflows
    an on-chip memory stops the binary with exit status 2)."""
    cc = compiler()
    layer = Problem(layer, arch).layer
    program = generate_program(layer, arch, mapping)
    inputs, weight = random_operands(layer, np.random.default_rng(seed))
    with tempfile.TemporaryDirectory(prefix="tileplan-verify-c-") as tmp:
        folder = Path(tmp)
        run = run_c(compile_c(emit_c(program), folder, cc), program, inputs, weight, folder)
    expected = None if not layer.moves_data else reference_output(layer, inputs, weight)
    return compare(layer, arch, mapping, program, run, expected)

__all__ = ["CFLAGS", "CRun", "compile_c", "compiler", "parse_report", "run_c", "verify_layer_c"]
