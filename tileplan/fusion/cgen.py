"""C backend for fused programs: a fused group's program as one self-contained C99 source.

The instruction list is embedded as a table (one row of 12 integers per instruction) run by a small
interpreter (``cgen_template.FUSED_C``) rather than unrolled into straight-line code: the source grows
by one short row per instruction whatever the group, compiles in a fraction of a second even for
tens of thousands of instructions, and its interpreter mirrors ``fusion.executor`` case by
case (the same presence checks, the same burst counting from box addresses). The program makes its
own deterministic operands, runs the fused program, recomputes the layers one by one as the
reference and prints the DRAM bytes and bursts per operand and the MACs, so its printed numbers can
be compared with the fused model.
"""

from __future__ import annotations

import re

from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.fusion.assemble import side_tensor
from tileplan.fusion.cgen_template import FUSED_C
from tileplan.fusion.group import stack_channels
from tileplan.fusion.program import FusedProgram
from tileplan.workload.layer import OpKind

#: ``op`` numbers of the generated C (``cgen_template``).
_KINDS = {OpKind.CONV: 0, OpKind.GROUPED_CONV: 0, OpKind.DEPTHWISE: 0, OpKind.POINTWISE: 0,
          OpKind.MAXPOOL: 1, OpKind.AVGPOOL: 2, OpKind.GLOBALPOOL: 2, OpKind.ADD: 3, OpKind.CONCAT: 4}
_OPS = ["LOAD_INPUT", "LOAD_SIDE", "LOAD_WEIGHT", "COMPUTE", "STORE", "DROP", "FREE_WEIGHT", "KEEP", "STEP"]


def emit_fused_c(prog: FusedProgram) -> str:
    """The C99 source running ``prog`` (see the module; an attention or MLP block's:
    ``fusion.transformer_cgen``); compiles with ``cc -std=c99 -Wall -Wextra`` (a block links with ``-lm``)."""
    group, layers = prog.group, prog.layers
    if group.transformer is not None:
        from tileplan.fusion.transformer_cgen import emit_transformer_c

        return emit_transformer_c(prog)
    if group.is_block:
        raise TileplanError(f"fused group {group.name} has branches (a block group): C is emitted for chains only; "
                            f"emit it with --target ir or run it with verify --group")
    rows = []
    for m, layer in enumerate(layers):
        prec = Problem(layer, prog.arch).precision
        values = [_KINDS[layer.op], layer.n, stack_channels(layer), layer.h, layer.w, layer.c_in, layer.k_out,
                  layer.p, layer.q, layer.r, layer.s, layer.groups, *layer.stride, *layer.dilation, layer.pad[0],
                  layer.pad[2], layer.input_count if layer.op is OpKind.ADD else 1, group.chain_offset(m),
                  int(prog.mapping.resident[m]), prec.input, prec.weight, prec.output]
        rows.append("    {" + ", ".join(str(v) for v in values) + "}, /* " + layer.name + " */")
    sides = []
    for m, specs in enumerate(group.sides):
        for side in specs:
            shape, first = side_tensor(layers[m], side)
            sides.append(f"    {{{m}, {side.offset}, {side.channels}, {shape[1]}, {first}}}, /* {side.name} */")
    table = []
    for ins in prog.instructions:
        values = [_OPS.index(ins.op), ins.layer, *ins.n, *ins.k, *ins.c, *ins.rows, *ins.cols]
        table.append("    {" + ",".join(str(v) for v in values) + "},")
    return FUSED_C.substitute(
        name=group.name, arch=prog.arch.name, mapping=str(prog.mapping), count=len(prog.instructions),
        nlayers=len(layers), nsides=len(sides), burst=prog.arch.dram.burst_bytes,
        chunk_outer=int(prog.mapping.chunk_outer), layers="\n".join(rows), sides="\n".join(sides),
        instructions="\n".join(table))


def parse_counts(stdout: str) -> dict[str, int]:
    """The numbers a generated program prints: ``input``/``weight``/``output`` bytes, their
    ``*_bursts`` and ``macs``."""
    out: dict[str, int] = {}
    for name, nbytes, nbursts in re.findall(r"^(input|weight|output) (\d+) B (\d+) bursts$", stdout, re.M):
        out[name], out[f"{name}_bursts"] = int(nbytes), int(nbursts)
    found = re.search(r"^macs (\d+)$", stdout, re.M)
    if found:
        out["macs"] = int(found.group(1))
    return out
