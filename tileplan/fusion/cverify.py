"""Verify a fused group through its generated C99 program: compile it with ``cc``, run it, and set the
DRAM bytes, bursts and MACs it printed beside the fused model, and the output it wrote beside plain
numpy on the same deterministic operands (``transformer_cgen.c_values``).

The binary is a witness independent of the Python executors: its own interpreter, its own counters,
its own layer-by-layer reference (it exits 1 when the output differs from it). Chains compute on
integers (the output must be bit-exact), attention and MLP blocks in doubles (within a relative 1e-9;
the softmax, exp and erf of libm against numpy's). The C does not track on-chip occupancy: the Python
executor (``verify --group`` with the numpy backend) checks that.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.cgen import emit_fused_c, parse_counts
from tileplan.fusion.group import FusedGroup, FusedMapping
from tileplan.fusion.program import FusedProgram
from tileplan.fusion.transformer_cgen import block_operands, c_values
from tileplan.fusion.transformer_cost import evaluate_transformer
from tileplan.fusion.transformer_program import block_reference, generate_group
from tileplan.fusion.verify import FusedVerify, chain_reference
from tileplan.program.cverify import compile_c, compiler
from tileplan.program.errors import ProgramError


def chain_operands(prog: FusedProgram) -> tuple[np.ndarray, list[np.ndarray | None], list[list[np.ndarray]]]:
    """The integer operands the generated C of chain ``prog`` makes (``fusion.cgen_template``): the
    first layer's input, per layer its weights (or ``None``) and its DRAM side inputs."""
    layers, first = prog.layers, prog.layers[0]
    x = c_values(1, first.n * first.c_in * first.h * first.w).reshape(first.n, first.c_in, first.h, first.w)
    weights: list[np.ndarray | None] = []
    for m, layer in enumerate(layers):
        shape = (layer.k_out, layer.c_in // layer.groups, layer.r, layer.s)
        weights.append(c_values(100 + m, int(np.prod(shape))).reshape(shape) if layer.has_weights else None)
    sides: list[list[np.ndarray]] = []
    k = 0
    for m, specs in enumerate(prog.group.sides):
        sides.append([])
        for spec in specs:
            shape = (layers[m].n, spec.channels, layers[m].h, layers[m].w)
            sides[-1].append(c_values(200 + k, int(np.prod(shape))).reshape(shape))
            k += 1
    return x, weights, sides


def run_group_c(prog: FusedProgram, folder: Path, *, timeout_s: float = 600.0) -> tuple[dict[str, int], np.ndarray,
                                                                                          bool]:
    """Compile and run the C of ``prog`` in ``folder``: its printed counts (``parse_counts``), its
    output (float64 for a block, int64 for a chain; shaped like the executors'), and whether it
    matched its own reference. Raises ``ProgramError`` when it cannot compile or stops early."""
    exe = compile_c(emit_fused_c(prog), folder)
    target = folder / "output.bin"
    try:
        done = subprocess.run([str(exe), str(target)], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ProgramError(f"the C program of {prog.group.name} ran longer than {timeout_s:.0f} s") from None
    if done.returncode not in (0, 1):
        raise ProgramError(f"the C program of {prog.group.name} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[:300]}")
    last = prog.layers[-1]
    block = prog.group.transformer is not None
    output = np.fromfile(target, dtype=np.float64 if block else np.int64).reshape(
        last.n, last.k_out, last.p, 1 if block else last.q)
    return parse_counts(done.stdout), output, done.returncode == 0


def verify_group_c(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedVerify:
    """The fused model against the group's C program (its printed bytes, bursts and MACs) and the C
    program's output against plain numpy on the same operands (see the module). Block groups (branches)
    have no C: ``emit_fused_c`` refuses them in one line."""
    compiler()  # no compiler: one line before anything runs
    prog = generate_group(group, arch, mapping)
    block = group.transformer is not None
    cost = evaluate_transformer(group, arch, mapping) if block else evaluate_fused(group, arch, mapping)
    with tempfile.TemporaryDirectory(prefix="tileplan-verify-group-c-") as tmp:
        counts, output, self_check = run_group_c(prog, Path(tmp))
    if block:
        x, weights = block_operands(prog)
        ref = block_reference(prog, x, weights)
        match = bool(np.allclose(output, ref, rtol=1e-9, atol=1e-12 * max(1.0, float(np.abs(ref).max()))))
    else:
        x, ws, sides = chain_operands(prog)
        match = bool(np.array_equal(output, chain_reference(prog, x, ws, sides)))
    c = cost.cost
    return FusedVerify(
        group.name, str(mapping), match and self_check,
        tuple(int(v) for v in c.dram_read_bytes[0]), int(c.dram_write_bytes[0]),  # type: ignore[arg-type]
        tuple(int(v) for v in c.dram_bursts[0]), int(cost.executed_macs[0]),  # type: ignore[arg-type]
        (counts["input"], counts["weight"], 0), counts["output"],
        (counts["input_bursts"], counts["weight_bursts"], counts["output_bursts"]), counts["macs"],
        len(prog.instructions), {}, {mem.name: int(b) for mem, b in zip(arch.memories, c.footprint_bytes[0],
                                                                       strict=True)})
