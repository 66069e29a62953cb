"""Run a program on integer tensors and count every DRAM byte and burst it moves.

DRAM holds each tensor as int64 elements in its layout at its base byte address. Every core has its
own copy of each on-chip memory: an int64 array of ``size_bytes`` *cells*, one per byte; an element
``b`` bytes wide occupies ``b`` cells (its value in the first), so capacity is exact in bytes while
the arithmetic stays exact. Streams run segment by segment (a ``SYNC`` ends a segment), cores in
order within a segment; a multicast is issued by the group's first core, so every member has its
tile before it computes.

Counting, per transfer (a LOAD or STORE of one tile): the bytes; the contiguous *runs* of its element
addresses, each costing ``ceil(run_bytes / burst)`` bursts (TSO's burst model, what the cost model
predicts); and the *aligned bursts*, the distinct burst-aligned blocks its bytes touch (MARVEL's view).
Per transfer ``ceil(bytes / burst) <= aligned <= bursts + runs``: each run of ``L`` bytes touches at
most ``ceil(L / burst) + 1`` blocks, and no block holds more than ``burst`` bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tileplan.dims import Operand
from tileplan.program.elementwise import FLOAT_KINDS, apply_ew
from tileplan.program.errors import OnChipOverflowError, ProgramError
from tileplan.program.ir import (
    Add,
    Conv,
    Div,
    Ew,
    Init,
    Instruction,
    Load,
    Loc,
    Pool,
    Program,
    Store,
    Sync,
    Tensor,
)
from tileplan.program.irtext import stream_first_lines
from tileplan.program.kernels import MAX_IDENTITY, Geometry, ResidentTile, accumulate, region_pads
from tileplan.workload.layer import OpKind

#: Value of DRAM output elements no STORE wrote (never equal to a real result of small inputs).
UNWRITTEN = -(2**62)


@dataclass
class Traffic:
    """DRAM traffic per operand (input, weight, output); output reads are partial sums read back."""

    read_bytes: list[int] = field(default_factory=lambda: [0, 0, 0])
    write_bytes: int = 0
    bursts: list[int] = field(default_factory=lambda: [0, 0, 0])
    aligned_bursts: list[int] = field(default_factory=lambda: [0, 0, 0])
    runs: list[int] = field(default_factory=lambda: [0, 0, 0])
    transfers: list[int] = field(default_factory=lambda: [0, 0, 0])


@dataclass(frozen=True)
class ExecResult:
    """What a program computed and moved. ``output`` is (N, G*K, P, Q) int64; bytes are DRAM bytes;
    ``*_bursts``, ``runs`` and ``transfers`` are per operand (input, weight, output reads + writes);
    ``onchip_peak_bytes`` is, per memory, the highest byte any core used."""

    output: np.ndarray
    read_bytes: tuple[int, int, int]
    write_bytes: int
    bursts: tuple[int, int, int]
    aligned_bursts: tuple[int, int, int]
    runs: tuple[int, int, int]
    transfers: tuple[int, int, int]
    instructions: int
    onchip_peak_bytes: dict[str, int]

    @property
    def bytes_by_operand(self) -> tuple[int, int, int]:
        """DRAM bytes of input, weight and output (partial-sum reads plus all writes)."""
        return (self.read_bytes[0], self.read_bytes[1], self.read_bytes[2] + self.write_bytes)


def layout_index(tensor: Tensor) -> np.ndarray:
    """Element index in DRAM of every element, as an array of the tensor's canonical shape."""
    return _box_index(tensor, tuple((0, s) for s in tensor.shape))


def _box_index(tensor: Tensor, box: tuple[tuple[int, int], ...]) -> np.ndarray:
    index = np.zeros([hi - lo for lo, hi in box], dtype=np.int64)
    for axis, ((lo, hi), stride) in enumerate(zip(box, tensor.strides, strict=True)):
        shape = [1] * 5
        shape[axis] = hi - lo
        index = index + (np.arange(lo, hi, dtype=np.int64) * stride).reshape(shape)
    return index


@dataclass(frozen=True)
class _Transfer:
    """A tile's element indices (canonical order) and what moving it costs."""

    index: np.ndarray
    nbytes: int
    runs: int
    bursts: int
    aligned: int


def _transfer(tensor: Tensor, box: tuple[tuple[int, int], ...], burst: int) -> _Transfer:
    index = _box_index(tensor, box)
    addrs = np.sort(index.ravel())
    b = tensor.elem_bytes
    if addrs.size == 0:
        return _Transfer(index.ravel(), 0, 0, 0, 0)
    breaks = np.flatnonzero(np.diff(addrs) != 1) + 1
    starts = addrs[np.concatenate([[0], breaks])]
    lengths = np.diff(np.concatenate([[0], breaks, [addrs.size]]))
    bursts = int(np.sum(-(-(lengths * b) // burst)))
    first = (tensor.base + starts * b) // burst
    last = (tensor.base + (starts + lengths) * b - 1) // burst
    aligned = int(np.sum(last - first + 1) - np.count_nonzero(first[1:] == last[:-1]))
    return _Transfer(index.ravel(), int(addrs.size) * b, int(starts.size), bursts, aligned)


class _Machine:
    def __init__(self, program: Program, inputs: Sequence[np.ndarray], weight: np.ndarray | None) -> None:
        self.p = program
        kinds = {ins.kind for s in program.streams for ins in s.instructions if isinstance(ins, Ew)}
        self.dtype = np.float64 if kinds & FLOAT_KINDS else np.int64
        self.traffic = Traffic()
        self.dram: dict[str, np.ndarray] = {}
        tensors = list(program.inputs) + ([program.weight] if program.weight is not None else [])
        data = list(inputs) + ([weight] if weight is not None and program.weight is not None else [])
        if len(inputs) != len(program.inputs) or (program.weight is not None and weight is None):
            raise ProgramError(f"the program reads {len(program.inputs)} input tensor(s)"
                               f"{' and a weight tensor' if program.weight is not None else ''}; got "
                               f"{len(inputs)} input(s){' and no weight' if weight is None else ''}")
        for tensor, array in zip(tensors, data, strict=True):
            if array.size != tensor.elements:
                raise ProgramError(f"{tensor.name} has {tensor.elements} elements, got an array of shape "
                                   f"{array.shape}")
            flat = np.empty(tensor.elements, dtype=self.dtype)
            flat[layout_index(tensor).ravel()] = np.asarray(array, dtype=self.dtype).ravel()
            self.dram[tensor.name] = flat
        for tensor in (program.output, program.psum):
            self.dram[tensor.name] = np.full(tensor.elements, UNWRITTEN, dtype=self.dtype)
        cores = len(program.streams)
        self.mem = [{m.name: np.zeros(m.size_bytes, dtype=self.dtype) for m in program.memories}
                    for _ in range(cores)]
        self.where: list[dict[tuple[str, object], tuple[str, int]]] = [{} for _ in range(cores)]
        self.occupant: list[dict[tuple[str, int], tuple[int, tuple[str, object]]]] = [
            {} for _ in range(cores)]
        self.peak = {m.name: 0 for m in program.memories}
        self.transfers: dict[str, _Transfer] = {}
        self.first_lines: list[int] | None = None
        self.geo = Geometry.of(program.stride, program.dilation, program.pads, program.inputs[0].shape[3],
                               program.inputs[0].shape[4])

    # ------------------------------------------------------------------------------------- helpers
    def line(self, core: int, i: int, ins: Instruction) -> int:
        if ins.line:
            return ins.line
        if self.first_lines is None:
            self.first_lines = stream_first_lines(self.p)
        return self.first_lines[core] + i

    def cost(self, tile_name: str) -> _Transfer:
        if tile_name not in self.transfers:
            tile = self.p.tile(tile_name)
            self.transfers[tile_name] = _transfer(self.p.tensor(tile.tensor), tile.box, self.p.burst_bytes)
        return self.transfers[tile_name]

    def count(self, op: Operand, t: _Transfer, write: bool) -> None:
        tr = self.traffic
        if write:
            tr.write_bytes += t.nbytes
        else:
            tr.read_bytes[op] += t.nbytes
        tr.bursts[op] += t.bursts
        tr.aligned_bursts[op] += t.aligned
        tr.runs[op] += t.runs
        tr.transfers[op] += 1

    @staticmethod
    def family(tensor: str) -> str:
        return "OUTPUT" if tensor == "PSUM" else tensor

    def place(self, core: int, loc: Loc, tile_name: str, line: int) -> np.ndarray:
        """Claim the cells of ``tile_name`` at ``loc`` of ``core`` and return their view."""
        tile = self.p.tile(tile_name)
        tensor = self.p.tensor(tile.tensor)
        mem = self.p.memory(loc.memory)
        if tensor.operand not in mem.operands:
            raise ProgramError(f"{mem.name} does not hold {tensor.operand.label} tiles such as {tile_name}",
                               line=line)
        end = loc.offset + tile.elements * tensor.onchip_bytes
        if end > mem.size_bytes:
            raise OnChipOverflowError(
                f"{tile_name} ({tile.elements} elements x {tensor.onchip_bytes} B) at {loc} of core {core} "
                f"needs bytes {loc.offset}:{end} but {mem.name} holds {mem.size_bytes} bytes",
                line=line, memory=mem.name)
        key = (self.family(tile.tensor), tile.box)
        occ = self.occupant[core]
        for (name, start), (stop, other) in list(occ.items()):
            if name == mem.name and start < end and loc.offset < stop:
                del occ[(name, start)]
                if self.where[core].get(other) == (name, start):
                    del self.where[core][other]
        occ[(mem.name, loc.offset)] = (end, key)
        self.where[core][key] = (mem.name, loc.offset)
        self.peak[mem.name] = max(self.peak[mem.name], end)
        return self.mem[core][mem.name][loc.offset:end:tensor.onchip_bytes]

    def resident(self, core: int, tile_name: str, line: int) -> ResidentTile:
        tile = self.p.tile(tile_name)
        tensor = self.p.tensor(tile.tensor)
        key = (self.family(tile.tensor), tile.box)
        if key not in self.where[core]:
            raise ProgramError(f"{tile_name} is not on chip in core {core} (never loaded, or overwritten)",
                               line=line)
        name, start = self.where[core][key]
        cells = self.mem[core][name][start:start + tile.elements * tensor.onchip_bytes:tensor.onchip_bytes]
        return ResidentTile(tile_name, cells.reshape([hi - lo for lo, hi in tile.box]), tile.box)

    # ------------------------------------------------------------------------------------- instructions
    def run(self, core: int, i: int, ins: Instruction) -> None:
        line = self.line(core, i, ins)
        if isinstance(ins, Load):
            tile = self.p.tile(ins.src)
            t = self.cost(ins.src)
            values = self.dram[tile.tensor][t.index]
            for dest in ins.cores or (core,):
                if not 0 <= dest < len(self.mem):
                    raise ProgramError(f"no core {dest}", line=line)
                self.place(dest, ins.dst, ins.src, line)[:] = values
            self.count(self.p.tensor(tile.tensor).operand, t, write=False)
        elif isinstance(ins, Init):
            identity = MAX_IDENTITY if self.p.op is OpKind.MAXPOOL else 0
            self.place(core, ins.dst, ins.tile, line)[:] = identity
        elif isinstance(ins, Store):
            tile = self.p.tile(ins.dst)
            key = (self.family(tile.tensor), tile.box)
            held = self.occupant[core].get((ins.src.memory, ins.src.offset))
            if held is None or held[1] != key:
                raise ProgramError(f"{ins.src} of core {core} does not hold the output tile {ins.dst}",
                                   line=line)
            t = self.cost(ins.dst)
            self.dram[tile.tensor][t.index] = self.resident(core, ins.dst, line).data.ravel()
            self.count(Operand.OUTPUT, t, write=True)
        elif isinstance(ins, Ew):
            wt = None if ins.wt is None else self.resident(core, ins.wt, line)
            apply_ew(ins.kind, ins.row, self.resident(core, ins.out, line),
                     [self.resident(core, name, line) for name in ins.inputs], wt, ins.region, line)
        elif isinstance(ins, Conv | Pool | Add):
            self.compute(core, ins, line)
        elif isinstance(ins, Div):
            data = self.resident(core, ins.tile, line).data
            data //= ins.divisor

    def compute(self, core: int, ins: Conv | Pool | Add, line: int) -> None:
        if not isinstance(ins, Add):
            pads = region_pads(self.geo, ins.region)
            if ins.stride != self.p.stride or ins.pads != pads:
                raise ProgramError(f"stride {ins.stride} and pads {ins.pads} disagree with the layer: the "
                                   f"region reads with stride {self.p.stride} and pads {pads}", line=line)
        out = self.resident(core, ins.out, line)
        if isinstance(ins, Conv):
            accumulate("conv", out, [self.resident(core, ins.inp, line)], self.resident(core, ins.wt, line),
                       ins.region, self.geo, line)
        elif isinstance(ins, Pool):
            accumulate("max" if ins.kind == "max" else "sum", out, [self.resident(core, ins.inp, line)], None,
                       ins.region, self.geo, line)
        else:
            accumulate("sum", out, [self.resident(core, name, line) for name in ins.inputs], None, ins.region,
                       self.geo, line)

    def execute(self) -> None:
        segments = []
        for stream in self.p.streams:
            cuts = [i for i, ins in enumerate(stream.instructions) if isinstance(ins, Sync)]
            bounds = [0] + [c + 1 for c in cuts] + [len(stream.instructions)]
            segments.append(list(zip(bounds[:-1], bounds[1:], strict=True)))
        if len({len(s) for s in segments}) > 1:
            counts = ", ".join(f"core {c}: {len(s) - 1}" for c, s in enumerate(segments))
            raise ProgramError(f"cores disagree on the number of SYNCs ({counts}); every core must reach "
                               f"each one")
        for seg in range(len(segments[0]) if segments else 0):
            for core, stream in enumerate(self.p.streams):
                lo, hi = segments[core][seg]
                for i in range(lo, hi):
                    self.run(core, i, stream.instructions[i])

    def result(self) -> ExecResult:
        out_t = self.p.output
        out = self.dram[out_t.name][layout_index(out_t)]
        n, g, k, p, q = out_t.shape
        tr = self.traffic
        return ExecResult(out.reshape(n, g * k, p, q), tuple(tr.read_bytes), tr.write_bytes,  # type: ignore[arg-type]
                          tuple(tr.bursts), tuple(tr.aligned_bursts), tuple(tr.runs),  # type: ignore[arg-type]
                          tuple(tr.transfers), self.p.instruction_count, dict(self.peak))  # type: ignore[arg-type]


#: Most int64 cells the executor holds at once (tensors in DRAM plus every core's memories): 2 GiB.
MAX_CELLS = 2**28


def check_size(program: Program) -> None:
    """Raise :class:`ProgramError` naming the largest tensor when executing ``program`` would need more
    than :data:`MAX_CELLS` int64 cells (the executor is for checking programs, not for big data)."""
    cores = len(program.streams) or 1
    cells = {t.name: t.elements for t in program.tensors}
    cells.update({f"memory {m.name} of {cores} core(s)": m.size_bytes * cores for m in program.memories})
    total = sum(cells.values())
    if total > MAX_CELLS:
        name = max(cells, key=lambda k: cells[k])
        raise ProgramError(f"the program is too big to execute: {total:,} elements in all ({name} alone has "
                           f"{cells[name]:,}); the executor holds at most {MAX_CELLS:,}")


def execute(program: Program, inputs: np.ndarray | Sequence[np.ndarray], weight: np.ndarray | None = None
            ) -> ExecResult:
    """Run ``program`` on ``inputs`` (one (N, G*C, H, W) integer array, or one per input tensor of an
    add) and ``weight`` ((G*K, C, R, S); ``None`` for layers without weights).

    Raises :class:`OnChipOverflowError` naming the line and memory when a tile does not fit, and
    :class:`ProgramError` naming the line when an instruction uses a tile that is not on chip or
    does not hold what its region needs.
    """
    check_size(program)
    arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
    machine = _Machine(program, arrays, weight)
    machine.execute()
    return machine.result()


__all__ = ["ExecResult", "Traffic", "execute", "layout_index"]
