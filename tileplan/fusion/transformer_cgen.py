"""C backend for fused attention and MLP blocks: a block's program as one self-contained C99 source.

As for chains (``fusion.cgen``), the instruction list is embedded as a table (one row of 10 integers
per instruction: op, layer, then the n, k, c and row ranges) run by a small interpreter
(``transformer_cgen_template.BLOCK_C``) that mirrors ``fusion.transformer_program``'s executor in
IEEE doubles: the same presence checks on A, each B and the on-chip middle, the same burst counting
from box addresses, the row-wise or online softmax. The program makes its own deterministic operands
(:func:`c_values` makes the same in numpy), runs the block, recomputes the layers one by one as the
reference and prints the DRAM bytes and bursts per operand and the MACs.
"""

from __future__ import annotations

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.dims import Dim, Operand
from tileplan.fusion.program import FusedProgram
from tileplan.fusion.transformer_cgen_template import BLOCK_C
from tileplan.workload.layer import OpKind

#: ``op`` numbers of the generated C.
_KINDS = {OpKind.MATMUL: 0, OpKind.SOFTMAX: 1, OpKind.GELU: 2, OpKind.SILU: 3, OpKind.ADD: 4, OpKind.MUL: 5}
_OPS = ["LOAD_INPUT", "LOAD_WEIGHT", "COMPUTE", "STORE", "NORMALIZE", "FREE_WEIGHT", "STEP"]
#: The generated C's operands are its integers in [-3, 3] divided by this.
_SCALE = 4.0


def c_values(seed: int, count: int) -> np.ndarray:
    """The generated programs' deterministic integers in [-3, 3] (``cgen_prelude``'s ``value``) for
    element indices ``0 .. count - 1`` of the tensor with ``seed``, as int64."""
    with np.errstate(over="ignore"):
        z = (np.arange(count, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15) \
            + np.uint64(seed) * np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(31)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(29)
    return (z % np.uint64(7)).astype(np.int64) - 3


def _b_matrix(prog: FusedProgram, m: int) -> tuple[int, int]:
    """(rows, columns) of layer ``m``'s B in DRAM: a matmul's (G*K, C), the mask row's (elements, 1),
    (0, 0) for a layer without one."""
    layer, shape = prog.layers[m], prog.group.transformer
    assert shape is not None
    if layer.op is OpKind.MATMUL:
        return layer.k_out, layer.dims[Dim.C]
    if m == shape.mask:
        return prog.group.layers[m].elements(Operand.WEIGHT), 1
    return 0, 0


def block_operands(prog: FusedProgram) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """The operands the generated C of block ``prog`` makes: A (N, C, H, 1) and per layer its B
    ((rows, columns, 1, 1), or ``None``), float64, in the layout ``execute_transformer`` takes."""
    first = prog.layers[0]
    x = c_values(1, first.n * first.c_in * first.h).reshape(first.n, first.c_in, first.h, 1) / _SCALE
    weights: list[np.ndarray | None] = []
    for m in range(len(prog.layers)):
        rows, cols = _b_matrix(prog, m)
        weights.append(c_values(100 + m, rows * cols).reshape(rows, cols, 1, 1) / _SCALE if rows else None)
    return x, weights


def emit_transformer_c(prog: FusedProgram) -> str:
    """The C99 source running the attention or MLP block program ``prog`` (see the module); compiles
    with ``cc -std=c99 -Wall -Wextra`` and links with ``-lm``."""
    group, layers, shape = prog.group, prog.layers, prog.group.transformer
    assert shape is not None, group.name
    names = [x.name for x in layers]
    rows = []
    for m, layer in enumerate(layers):
        prec = Problem(layer, prog.arch).precision
        srcs = [names.index(i) if i in names else -1 for i in layer.inputs[:2]] + [-1, -1]
        if layer.op is OpKind.MATMUL:
            srcs[1] = -1  # the B operand comes from DRAM
        wk, wc = _b_matrix(prog, m)
        values = [_KINDS[layer.op], layer.n, layer.k_out, layer.p,
                  layer.dims[Dim.C] if layer.op is OpKind.MATMUL else 0, srcs[0], srcs[1], layer.ops_per_point,
                  wk, wc, prec.input, prec.weight, prec.output]
        rows.append("    {" + ", ".join(str(v) for v in values) + "}, /* " + layer.name + " */")
    table = []
    for ins in prog.instructions:
        values = [_OPS.index(ins.op), ins.layer, *ins.n, *ins.k, *ins.c, *ins.rows]
        table.append("    {" + ",".join(str(v) for v in values) + "},")
    first = layers[0]
    return BLOCK_C.substitute(
        kind=shape.kind.value, name=group.name, arch=prog.arch.name, mapping=str(prog.mapping),
        count=len(prog.instructions), nlayers=len(layers), burst=prog.arch.dram.burst_bytes,
        online=int(prog.mapping.online), groups=shape.groups, rows=shape.rows, k1=shape.k1, width=shape.width,
        n2=shape.n2, xn=first.n, xc=first.c_in, xh=first.h, layers="\n".join(rows), instructions="\n".join(table))
