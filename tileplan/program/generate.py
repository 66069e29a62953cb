"""Generate the execution program of a layer under a mapping: exactly the schedule the cost model
prices (``cost.model``), spelled out load by load.

Every core walks the same tile loops (``mapping.order``) over its own slice (``Problem.core_grid``).
The cores run in lockstep over the largest trip count of every loop; a core simply skips the
iterations beyond its own slice. Input and weight tiles are loaded per *multicast group* (the cores
of one cluster whose slices agree on every dimension indexing the operand): the group's first core
issues the load, to every member, whenever the tile index of a non-hoisted dimension indexing the
operand changes on an iteration some member runs. Output tiles are per core: a tile is started
(``INIT``) on its first visit, read back (``LOAD PSUM_i``) on later ones, and written back when left
(``STORE PSUM_i``; the last visit ``STORE OUTPUT_i``). A ``SYNC`` precedes every iteration with a
multicast. With double buffering, consecutive tiles of an operand alternate between two slots.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.errors import MappingError
from tileplan.mapping import Mapping
from tileplan.program.elementwise import ROW_KINDS, ew_kind, ew_row, split_row_error
from tileplan.program.errors import ProgramError
from tileplan.program.ir import (
    Add,
    Box,
    Conv,
    Div,
    Ew,
    Init,
    Instruction,
    Load,
    Loc,
    Memory,
    Pool,
    Program,
    Range,
    Store,
    Stream,
    Sync,
    Tensor,
    Tile,
    box_elements,
    is_identifier,
    tensor_operand,
)
from tileplan.program.kernels import Geometry, region_pads, window
from tileplan.search.rf_level import bypass_problem
from tileplan.workload.layer import Layer, OpKind

#: Ops a program can compute (a DATA_MOVE's element mapping is not part of the layer description).
_SUPPORTED = frozenset({OpKind.CONV, OpKind.GROUPED_CONV, OpKind.DEPTHWISE, OpKind.POINTWISE, OpKind.FC,
                        OpKind.MAXPOOL, OpKind.AVGPOOL, OpKind.GLOBALPOOL, OpKind.ADD, OpKind.CONCAT,
                        OpKind.MATMUL, OpKind.SOFTMAX, OpKind.LAYERNORM, OpKind.RMSNORM, OpKind.GELU,
                        OpKind.SILU, OpKind.MUL, OpKind.ROPE})


@dataclass(frozen=True)
class _Core:
    """One core's slice: offsets, lengths, per-core tile sizes and trip counts (DIMS order)."""

    cluster: int
    off: tuple[int, ...]
    length: tuple[int, ...]
    tile: tuple[int, ...]
    trips: tuple[int, ...]

    def loop_range(self, d: Dim, i: int) -> Range:
        lo = self.off[d] + i * self.tile[d]
        return (lo, min(lo + self.tile[d], self.off[d] + self.length[d]))

    def active(self, idx: list[int]) -> bool:
        return all(i < t for i, t in zip(idx, self.trips, strict=True))


def storage_box(problem: Problem, op: Operand, rng: list[Range]) -> Box:
    """Canonical storage box of ``op`` covering the loop ranges ``rng`` (input: clipped halo)."""
    layer = problem.layer
    if op is Operand.INPUT:
        rows = window(rng[Dim.P], rng[Dim.R], layer.stride[0], layer.dilation[0], layer.pad[0], layer.h)
        cols = window(rng[Dim.Q], rng[Dim.S], layer.stride[1], layer.dilation[1], layer.pad[2], layer.w)
        return (rng[Dim.N], rng[Dim.G], rng[Dim.C], rows[2:], cols[2:])
    if op is Operand.WEIGHT:
        return (rng[Dim.G], rng[Dim.K], rng[Dim.C], rng[Dim.R], rng[Dim.S])
    return (rng[Dim.N], rng[Dim.G], rng[Dim.K], rng[Dim.P], rng[Dim.Q])


def geometry(problem: Problem) -> Geometry:
    """The kernel geometry of ``problem``'s layer."""
    lay = problem.layer
    return Geometry.of(lay.stride, lay.dilation, lay.pad, lay.h, lay.w)


def _check_split(problem: Problem, mapping: Mapping) -> None:
    cores = problem.arch.cores
    for name, split, limit in (("cluster_split", mapping.cluster_split, cores.clusters),
                               ("core_split", mapping.core_split, cores.cores_per_cluster)):
        total = 1
        for f in split:
            total *= f
        if total > limit:
            raise MappingError(f"mapping {name} needs {total} parts but {problem.arch.name} has {limit}")
        bad = [Dim(d).name for d, f in enumerate(split) if f > 1 and Dim(d) in (Dim.C, Dim.R, Dim.S)]
        if bad:
            raise MappingError(f"mapping {name} splits reduction dimension(s) {bad}: cores would write "
                               f"the same outputs; split N, G, K, P or Q instead")


def _memory_names(arch: Arch) -> list[str]:
    out: list[str] = []
    for mem in arch.memories:
        name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in mem.name) or "MEM"
        if not is_identifier(name) or tensor_operand(name.rsplit("_", 1)[0]) is not None:
            name = "M_" + name
        while name in out:
            name += "_"
        out.append(name)
    return out


class _Builder:
    """Walks the lockstep loop nest once, recording per-core instruction events."""

    def __init__(self, problem: Problem, mapping: Mapping) -> None:
        self.problem, self.mapping = problem, mapping
        self.layer = problem.layer
        self.grid = problem.core_grid(mapping.cluster_split, mapping.core_split)
        self.cores = [_Core(c.cluster, c.offset, c.length,
                            tuple(min(mapping.tiles[d], c.length[d]) for d in DIMS),
                            tuple(-(-c.length[d] // min(mapping.tiles[d], c.length[d])) for d in DIMS))
                      for c in self.grid.cores]
        self.count = self.layer.input_count
        self.ops = [op for op in OPERANDS if problem.has_operand[op]]
        self.slots = 2 if problem.arch.double_buffering else 1
        self.events: list[list[tuple]] = [[] for _ in self.cores]
        self.max_elems = {op: 0 for op in OPERANDS}

    def box(self, op: Operand, core: _Core, idx: list[int]) -> Box:
        rng = [(core.off[d], core.off[d] + core.length[d]) if d in self.mapping.hoist[op]
               else core.loop_range(d, idx[d]) for d in DIMS]
        box = storage_box(self.problem, op, rng)
        self.max_elems[op] = max(self.max_elems[op], box_elements(box))
        return box

    def walk(self) -> None:
        cores, mapping = self.cores, self.mapping
        trips = [max(c.trips[d] for c in cores) for d in DIMS]
        keyed = {op: [d for d in DIMS if d in RELEVANT[op] and d not in mapping.hoist[op]] for op in OPERANDS}
        resident: dict[tuple[Operand, int], tuple[int, ...]] = {}
        loads: dict[tuple[Operand, int], int] = {}
        current: list[dict[Operand, Box]] = [{} for _ in cores]
        out_box: list[Box | None] = [None] * len(cores)
        out_loads = [0] * len(cores)
        visited: list[set[Box]] = [set() for _ in cores]
        idx = [0] * len(DIMS)
        for pos in product(*[range(trips[d]) for d in mapping.order]):
            for d, i in zip(mapping.order, pos, strict=True):
                idx[d] = i
            active = [c.active(idx) for c in cores]
            issued = []
            for op in self.ops:
                if op is Operand.OUTPUT:
                    continue
                for g, members in enumerate(self.grid.groups[op]):
                    if not any(active[m] for m in members):
                        continue
                    key = tuple(idx[d] for d in keyed[op])
                    if resident.get((op, g)) != key:
                        resident[(op, g)] = key
                        n = loads.get((op, g), 0)
                        loads[(op, g)] = n + 1
                        box = self.box(op, cores[members[0]], idx)
                        issued.append((members, op, box, n % self.slots))
                        for m in members:
                            current[m][op] = box
            if any(len(members) > 1 for members, *_ in issued) and any(self.events):
                for ev in self.events:
                    ev.append(("sync",))
            for members, op, box, slot in issued:
                self.events[members[0]].append(("load", op, box, slot, members if len(members) > 1 else ()))
            for c, core in enumerate(cores):
                if not active[c]:
                    continue
                box = self.box(Operand.OUTPUT, core, idx)
                if box != out_box[c]:
                    if out_box[c] is not None:
                        self.events[c].append(("store", out_box[c], (out_loads[c] - 1) % self.slots))
                    slot = out_loads[c] % self.slots
                    self.events[c].append(("psum" if box in visited[c] else "init", box, slot))
                    visited[c].add(box)
                    out_loads[c] += 1
                    out_box[c] = box
                region = tuple(core.loop_range(d, idx[d]) for d in DIMS)
                self.events[c].append(("compute", region, current[c].get(Operand.INPUT),
                                       current[c].get(Operand.WEIGHT), box))
        for c, last in enumerate(out_box):
            if last is not None:
                self.events[c].append(("store", last, (out_loads[c] - 1) % self.slots))


class _Assembler:
    """Turns events into instructions: tile names, on-chip offsets, final stores."""

    def __init__(self, b: _Builder, arch: Arch) -> None:
        self.b = b
        self.p = b.problem
        prec = self.p.precision
        self.onchip = {Operand.INPUT: prec.input, Operand.WEIGHT: prec.weight, Operand.OUTPUT: prec.psum}
        names = _memory_names(arch)
        self.memories = tuple(Memory(name, m.size_bytes, m.operand_ids)
                              for name, m in zip(names, arch.memories, strict=True))
        # Slot offsets: per memory, its operands in order, each with (double-buffer) slots of the
        # largest box; an add's input slot holds one box per summand.
        self.slot: dict[tuple[Operand, int, int], Loc] = {}
        for mem, name in zip(arch.memories, names, strict=True):
            cursor = 0
            for op in sorted(mem.operand_ids):
                size = b.max_elems[op] * self.onchip[op]
                for s in range(b.slots):
                    for k in range(b.count if op is Operand.INPUT else 1):
                        self.slot[(op, s, k)] = Loc(name, cursor)
                        cursor += size
        self.tiles: dict[str, dict[Box, str]] = {}
        self.tensors = self._tensors()

    def _tensors(self) -> dict[str, Tensor]:
        layer, prec, burst = self.p.layer, self.p.precision, self.p.arch.dram.burst_bytes
        d = layer.dims
        specs = [(f"INPUT{k or ''}", (layer.n, layer.groups, d[Dim.C], layer.h, layer.w), 0, prec.input,
                  prec.input) for k in range(self.b.count)]
        if layer.has_weight_operand:  # a matmul's B, a norm's scale, a broadcast row: the WEIGHT tensor
            specs.append(("WEIGHT", (layer.groups, d[Dim.K], d[Dim.C], layer.r, layer.s), 1, prec.weight,
                          prec.weight))
        out_shape = (layer.n, layer.groups, d[Dim.K], layer.p, layer.q)
        specs += [("OUTPUT", out_shape, 2, prec.output, prec.psum),
                  ("PSUM", out_shape, 2, prec.psum, prec.psum)]
        out, base = {}, 0
        for name, shape, op, nbytes, onchip in specs:
            t = Tensor(name, shape, self.b.mapping.layouts[op], nbytes, onchip, base)
            out[name] = t
            base += -(-t.nbytes // burst) * burst
        return out

    def tile(self, tensor: str, box: Box) -> str:
        """Name of ``tensor``'s tile ``box`` (declared on first use). ``PSUM_i`` and ``INPUTk_i`` share
        the index of ``OUTPUT_i`` and ``INPUT_i`` with the same box."""
        per = self.tiles.setdefault(tensor, {})
        if box not in per:
            family = "OUTPUT" if tensor == "PSUM" else "INPUT" if tensor.startswith("INPUT") else tensor
            index = len(per) if family == tensor else int(self.tile(family, box).rsplit("_", 1)[1])
            per[box] = f"{tensor}_{index}"
        return per[box]

    def stream(self, events: list[tuple]) -> tuple[Instruction, ...]:
        layer = self.p.layer
        remaining: dict[Box, int] = {}
        for ev in events:
            if ev[0] == "store":
                remaining[ev[1]] = remaining.get(ev[1], 0) + 1
        out: list[Instruction] = []
        for ev in events:
            kind = ev[0]
            if kind == "sync":
                out.append(Sync())
            elif kind == "load":
                _, op, box, slot, members = ev
                for k in range(self.b.count if op is Operand.INPUT else 1):
                    tensor = f"INPUT{k or ''}" if op is Operand.INPUT else "WEIGHT"
                    out.append(Load(self.slot[(op, slot, k)], self.tile(tensor, box), tuple(members)))
            elif kind in ("init", "psum"):
                _, box, slot = ev
                name = self.tile("OUTPUT", box)
                loc = self.slot[(Operand.OUTPUT, slot, 0)]
                out.append(Init(loc, name) if kind == "init" else Load(loc, self.tile("PSUM", box)))
            elif kind == "store":
                _, box, slot = ev
                remaining[box] -= 1
                loc = self.slot[(Operand.OUTPUT, slot, 0)]
                if remaining[box]:
                    out.append(Store(self.tile("PSUM", box), loc))
                else:
                    name = self.tile("OUTPUT", box)
                    if layer.op in (OpKind.AVGPOOL, OpKind.GLOBALPOOL):
                        out.append(Div(name, layer.r * layer.s))
                    out.append(Store(name, loc))
            else:
                out.append(self.compute(ev[1], ev[2], ev[3], ev[4]))
        return tuple(out)

    def compute(self, region: Box, in_box: Box, wt_box: Box | None, out_box: Box) -> Instruction:
        layer = self.p.layer
        o = self.tile("OUTPUT", out_box)
        kind = ew_kind(layer)
        if kind is not None:
            row = ew_row(layer)
            reason = split_row_error(kind, row, region[Dim.G])
            if reason:
                raise ProgramError(f"layer {layer.name!r}: {reason}")
            wt = self.tile("WEIGHT", wt_box) if wt_box is not None else None
            ins = tuple(self.tile(f"INPUT{k or ''}", in_box) for k in range(self.b.count))
            return Ew(o, kind, row if kind in ROW_KINDS else 0, ins, wt, region)
        if layer.op is OpKind.ADD:
            return Add(o, tuple(self.tile(f"INPUT{k or ''}", in_box) for k in range(self.b.count)), region)
        i = self.tile("INPUT", in_box)
        pads = region_pads(geometry(self.p), region)
        if layer.op.is_pool:
            kind = "max" if layer.op is OpKind.MAXPOOL else "avg"
            return Pool(o, i, kind, layer.stride, pads, region)
        assert wt_box is not None
        return Conv(o, i, self.tile("WEIGHT", wt_box), layer.stride, pads, region)

    def declared_tiles(self) -> tuple[Tile, ...]:
        out = []
        for tensor, per in self.tiles.items():
            t = self.tensors[tensor]
            for box, name in per.items():
                out.append(Tile(name, t.offset(box), box))
        rank = {name: i for i, name in enumerate(self.tensors)}
        return tuple(sorted(out, key=lambda t: (rank[t.tensor], int(t.name.rsplit("_", 1)[1]))))


def has_program(layer: Layer) -> bool:
    """Whether programs cover ``layer``'s kind (every kind but data moves and embeddings, which are
    planned as streams without a mapping)."""
    return layer.op in _SUPPORTED


def generate_program(layer: Layer, arch: Arch, mapping: Mapping) -> Program:
    """The execution program of ``layer`` on ``arch`` under ``mapping`` (see the module docstring).

    A concat moves no data (its producers write in place): its program has no instructions.
    The program is generated even when its tiles do not fit the on-chip memories; running it then
    fails at the first overflowing LOAD (see ``executor.execute``).
    """
    if layer.op not in _SUPPORTED:
        raise ProgramError(f"layer {layer.name!r}: no program for {layer.op.value} layers; programs cover "
                           f"{', '.join(sorted(op.value for op in _SUPPORTED))}")
    problem = Problem(layer, arch)
    if mapping.bypass:  # its bypassed tiles live in the PEs' register files (one memory here)
        problem = bypass_problem(problem, mapping.bypass)
        arch = problem.arch
    _check_split(problem, mapping)
    builder = _Builder(problem, mapping)
    if problem.layer.moves_data:
        builder.walk()
    asm = _Assembler(builder, arch)
    streams = tuple(Stream(c, core.cluster, asm.stream(ev))
                    for c, (core, ev) in enumerate(zip(builder.cores, builder.events, strict=True)))
    lay = problem.layer
    name = " ".join(lay.name.replace("//", "/").split()) or "layer"
    return Program(name=name, op=lay.op, stride=lay.stride, pads=lay.pad, dilation=lay.dilation,
                   groups=lay.groups, burst_bytes=arch.dram.burst_bytes, tensors=tuple(asm.tensors.values()),
                   memories=asm.memories, tiles=asm.declared_tiles(), streams=streams)
