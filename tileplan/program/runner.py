"""Run an IR file on its own: rebuild the layer from the program's ``[info]``, draw random integer
operands, execute, and check the output against the direct reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.dims import Dim
from tileplan.program.executor import ExecResult, check_size, execute
from tileplan.program.ir import Ew, Pool, Program
from tileplan.program.reference import reference_output
from tileplan.program.verify import outputs_match, random_operands
from tileplan.workload.layer import Layer, OpKind, Precision


def layer_of(program: Program) -> Layer:
    """The layer a program computes, from its tensors (canonical storage shapes) and parameters."""
    inputs = [t for t in program.tensors if t.name.startswith("INPUT")]
    n, g, c, h, w = inputs[0].shape
    out = program.tensor("OUTPUT")
    _, _, k, _, _ = out.shape
    weight = next((t for t in program.tensors if t.name == "WEIGHT"), None)
    r, s = (weight.shape[3], weight.shape[4]) if weight is not None else (1, 1)
    psum = out.onchip_bytes
    prec = Precision(inputs[0].elem_bytes, weight.elem_bytes if weight else inputs[0].elem_bytes,
                     out.elem_bytes, psum)
    if program.op.is_pool:
        r, s = _pool_window(program)
    rows = [ins.row for st in program.streams for ins in st.instructions if isinstance(ins, Ew)]
    row = rows[0] if rows and program.op in (OpKind.SOFTMAX, OpKind.ROPE) else 0
    broadcast = weight is not None and program.op in (OpKind.ADD, OpKind.MUL)  # the WEIGHT is a broadcast row
    return Layer(name=program.name, op=program.op, n=n, c_in=g * c, h=h, w=w, k_out=g * k, r=r, s=s, groups=g,
                 stride=program.stride, pad=program.pads, dilation=program.dilation, input_count=len(inputs),
                 precision=prec, b_activation=broadcast, row_channels=row)


def _pool_window(program: Program) -> tuple[int, int]:
    """A pool has no weight tensor: its window is the R x S extent its POOL regions cover."""
    r = s = 1
    for stream in program.streams:
        for ins in stream.instructions:
            if isinstance(ins, Pool):
                r = max(r, ins.region[Dim.R][1])
                s = max(s, ins.region[Dim.S][1])
    return r, s


@dataclass(frozen=True)
class RunResult:
    """An execution with the layer it computed and whether its output matched the reference."""

    layer: Layer
    result: ExecResult
    bit_exact: bool


def run_program(program: Program, *, seed: int = 0) -> RunResult:
    """Execute ``program`` on random integers (``seed``) and compare with the direct reference."""
    check_size(program)
    layer = layer_of(program)
    inputs, weight = random_operands(layer, np.random.default_rng(seed))
    result = execute(program, inputs, weight)
    exact = outputs_match(layer, result.output, reference_output(layer, inputs, weight))
    return RunResult(layer, result, exact)
