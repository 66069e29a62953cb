"""C backend: a program as a self-contained C99 source (e-PlaNNer ch. 7.2 emits CUDA the same way).

The runtime (``cgen_template``) copies boxes between DRAM tensors and fixed-size on-chip arrays and
runs the CONV/POOL loops, with the helpers of the ``EW`` kinds the program uses (``cgen_ew``: integer
kinds exact, float kinds as doubles in the cells); this module fills in the tensors, tiles and
memories, and turns every instruction into one call, commented with its IR line. Streams are laid out segment by segment
(a ``SYNC`` ends a segment), cores in order, exactly as the Python executor runs them.
"""

from __future__ import annotations

from tileplan.dims import Dim
from tileplan.program.cgen_ew import Cells, ew_call, ew_runtime, uses_floats
from tileplan.program.cgen_template import REPORT, RUNTIME
from tileplan.program.elementwise import ROW_KINDS, split_row_error
from tileplan.program.errors import ProgramError
from tileplan.program.ir import Add, Conv, Div, Ew, Init, Instruction, Load, Loc, Pool, Program, Store, Sync
from tileplan.program.irtext import instruction_text, stream_first_lines
from tileplan.workload.layer import OpKind


def _c_list(values: tuple[int, ...] | list[int]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


class _Emitter:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.tile_id = {t.name: i for i, t in enumerate(program.tiles)}
        self.tensor_id = {t.name: i for i, t in enumerate(program.tensors)}
        self.where: list[dict[tuple[str, object], Loc]] = [{} for _ in program.streams]
        self.first = stream_first_lines(program)

    def family_key(self, tile_name: str) -> tuple[str, object]:
        tile = self.p.tile(tile_name)
        return ("OUTPUT" if tile.tensor == "PSUM" else tile.tensor, tile.box)

    def mem(self, core: int, loc: Loc) -> str:
        return f"mem_{loc.memory}[{core}]"

    def cells(self, core: int, tile_name: str, line: int) -> str:
        key = self.family_key(tile_name)
        if key not in self.where[core]:
            raise ProgramError(f"{tile_name} is not on chip in core {core}", line=line)
        loc = self.where[core][key]
        return f"{self.mem(core, loc)} + {loc.offset}"

    def region(self, region: tuple[tuple[int, int], ...]) -> str:
        return "(const long[16])" + _c_list([v for rng in region for v in rng])

    def call(self, core: int, ins: Instruction, line: int) -> list[str]:
        p, tid = self.p, self.tile_id
        if isinstance(ins, Load):
            size = p.memory(ins.dst.memory).size_bytes
            out = []
            for i, dest in enumerate(ins.cores or (core,)):
                out.append(f"load({self.mem(dest, ins.dst)}, {size}, \"{ins.dst.memory}\", {ins.dst.offset}, "
                           f"{tid[ins.src]}, {int(i == 0)}, {line});")
                self.where[dest][self.family_key(ins.src)] = ins.dst
            return out
        if isinstance(ins, Init):
            size = p.memory(ins.dst.memory).size_bytes
            self.where[core][self.family_key(ins.tile)] = ins.dst
            value = "INT64_MIN" if p.op is OpKind.MAXPOOL else "0"
            return [f"init_tile({self.mem(core, ins.dst)}, {size}, \"{ins.dst.memory}\", {ins.dst.offset}, "
                    f"{tid[ins.tile]}, {value}, {line});"]
        if isinstance(ins, Store):
            return [f"store({self.mem(core, ins.src)} + {ins.src.offset}, {tid[ins.dst]});"]
        if isinstance(ins, Conv):
            return [f"conv({self.cells(core, ins.out, line)}, {tid[ins.out]}, "
                    f"{self.cells(core, ins.inp, line)}, {tid[ins.inp]}, "
                    f"{self.cells(core, ins.wt, line)}, {tid[ins.wt]}, {self.region(ins.region)});"]
        if isinstance(ins, Pool | Add):
            op = "OP_MAX" if isinstance(ins, Pool) and ins.kind == "max" else "OP_SUM"
            names = ins.inputs if isinstance(ins, Add) else (ins.inp,)
            return [f"pool({op}, {self.cells(core, ins.out, line)}, {tid[ins.out]}, "
                    f"{self.cells(core, name, line)}, {tid[name]}, {self.region(ins.region)});"
                    for name in names]
        if isinstance(ins, Ew):
            return self.ew(core, ins, line)
        if isinstance(ins, Div):
            return [f"divide({self.cells(core, ins.tile, line)}, {tid[ins.tile]}, {ins.divisor});"]
        return []

    def ew(self, core: int, ins: Ew, line: int) -> list[str]:
        """The call(s) of one ``EW`` instruction, after checking its region holds whole rows."""
        tid = self.tile_id
        reason = split_row_error(ins.kind, ins.row, ins.region[Dim.G])
        if ins.kind in ROW_KINDS and (ins.row < 1 or (ins.kind == "rope" and ins.row % 2)):
            even = " even" if ins.kind == "rope" else ""
            reason = f"a {ins.kind} row of {ins.row} channels (give a positive{even} width)"
        if reason:
            raise ProgramError(reason, line=line)
        wt = None if ins.wt is None else (self.cells(core, ins.wt, line), tid[ins.wt])
        return self.ew_calls(ins.kind, ins.row, (self.cells(core, ins.out, line), tid[ins.out]),
                             [(self.cells(core, name, line), tid[name]) for name in ins.inputs], wt,
                             self.region(ins.region))

    def ew_calls(self, kind: str, row: int, out: Cells, inputs: list[Cells], wt: Cells | None,
                 region: str) -> list[str]:
        return [ew_call(kind, row, out, inputs, wt, region)]

    def body(self) -> list[str]:
        segments = []
        for stream in self.p.streams:
            seg: list[list[tuple[int, Instruction]]] = [[]]
            for i, ins in enumerate(stream.instructions):
                if isinstance(ins, Sync):
                    seg.append([])
                else:
                    seg[-1].append((i, ins))
            segments.append(seg)
        if len({len(s) for s in segments}) > 1:
            raise ProgramError("cores disagree on the number of SYNCs; every core must reach each one")
        lines: list[str] = []
        for k in range(len(segments[0])):
            if len(segments[0]) > 1:
                lines.append(f"    /* ---- segment {k}{': after SYNC ' + str(k) if k else ''} ---- */")
            for core in range(len(self.p.streams)):
                if segments[core][k] and len(self.p.streams) > 1:
                    lines.append(f"    /* core {core} */")
                for i, ins in segments[core][k]:
                    line = ins.line or self.first[core] + i
                    lines.append(f"    /* line {line}: {instruction_text(ins)} */")
                    lines += ["    " + c for c in self.call(core, ins, line)]
        return lines


def emit_c(program: Program) -> str:
    """A C99 program running ``program``: ``./prog input.bin [input1.bin ...] [weight.bin] output.bin``.

    Inputs are raw little-endian int32 in logical order ((N, C, H, W), weight (K, C, R, S)); the
    output is written as little-endian int64 in (N, K, P, Q) order; the DRAM bytes moved are printed.
    A program of a float ``EW`` kind (softmax, norms, gelu, silu, rope; :func:`operand_format`) reads
    and writes little-endian float64 instead and links with ``-lm``. It compiles cleanly with
    ``cc -std=c99 -Wall -Wextra -Werror``.
    """
    fields = substitutions(program, _Emitter(program))
    fields["ew_ops"] = ew_runtime(ew_kinds(program))
    fields["memories"] = "\n".join(f"static int64_t mem_{m.name}[NCORES][{m.size_bytes}]; /* holds "
                                   f"{', '.join(o.label for o in m.operands)} */" for m in program.memories)
    return RUNTIME.substitute(fields)


def substitutions(program: Program, em: _Emitter) -> dict[str, object]:
    """The template fields a runtime (C or CUDA) is filled with: tensors, tiles, inputs, the body."""
    p = program
    if p.instruction_count == 0:
        raise ProgramError(f"layer {p.name} ({p.op.value}) moves no data: there is no C program to emit")
    dram = []
    rows = []
    for t in p.tensors:
        dram.append(f"static int64_t dram_{t.name}[{t.elements}];")
        # operand numbers are int(Operand): input 0, weight 1, output 2
        rows.append(f"    {{\"{t.name}\", dram_{t.name}, {_c_list(t.shape)}, {_c_list(t.strides)}, "
                    f"{t.elem_bytes}, {t.onchip_bytes}, {int(t.operand)}, {t.base}}},")
    tiles = [f"    {{{em.tensor_id[t.tensor]}, {_c_list([lo for lo, _ in t.box])}, "
             f"{_c_list([hi for _, hi in t.box])}}}, /* {t.name} */" for t in p.tiles]
    inputs = list(p.inputs) + ([p.weight] if p.weight is not None else [])
    names = [f"{t.name.lower()}.bin" for t in inputs] + ["output.bin"]
    reads = [f"    transfer_file(argv[{i + 1}], &tensors[{em.tensor_id[t.name]}], 0);"
             for i, t in enumerate(inputs)]
    body = em.body()
    # every helper and memory is referenced, so programs that use only some compile warning-free
    body.append("    (void)conv; (void)pool; (void)divide; (void)init_tile; (void)load; (void)store;")
    body.append("    " + " ".join(f"(void)mem_{m.name};" for m in p.memories))
    geo = p.inputs[0].shape
    return dict(
        name=p.name, op=p.op.value, usage=f"prog {' '.join(names)}", ncores=len(p.streams),
        ntensors=len(p.tensors), ntiles=len(p.tiles), burst=p.burst_bytes, report=REPORT,
        sh=p.stride[0], sw=p.stride[1], dh=p.dilation[0], dw=p.dilation[1],
        pt=p.pads[0], pl=p.pads[2], in_h=geo[3], in_w=geo[4], dram_arrays="\n".join(dram),
        tensor_rows="\n".join(rows), tile_rows="\n".join(tiles), memories="",
        nargs=len(names) + 1, args=" ".join(names), read_inputs="\n".join(reads), body="\n".join(body),
        out_arg=len(names), out_tensor=em.tensor_id["OUTPUT"], **_formats(program))


def _formats(program: Program) -> dict[str, object]:
    """Header lines and switches of the operand files: int32 in / int64 out, or float64 for a float kind
    (doubles as bit patterns in the cells, math.h, -lm)."""
    floats = uses_floats(ew_kinds(program))
    kind = "float64 (IEEE double)" if floats else "int32"
    lines = [f" *   inputs:  raw little-endian {kind}, logical order (N, C, H, W); weight (K, C, R, S)",
             f" *   output:  raw little-endian {'float64' if floats else 'int64'}, logical order (N, K, P, Q)"]
    if floats:
        lines += [" *   Every DRAM and on-chip cell holds an IEEE double as its bit pattern (memcpy in and",
                  " *   out of the int64 cells, one cell per byte as for integers); arithmetic is double."]
    return dict(float_cells=int(floats), libs=" -lm" if floats else "", formats="\n".join(lines),
                includes="#include <math.h>\n" if floats else "")


def ew_kinds(program: Program) -> set[str]:
    """The kinds of the program's ``EW`` instructions (empty for conv, pool and add programs)."""
    return {ins.kind for s in program.streams for ins in s.instructions if isinstance(ins, Ew)}


def operand_format(program: Program) -> tuple[str, str]:
    """numpy dtypes of the C program's operand files and of its output file: ``('<i4', '<i8')``, or
    ``('<f8', '<f8')`` for a float ``EW`` kind."""
    return ("<f8", "<f8") if uses_floats(ew_kinds(program)) else ("<i4", "<i8")
