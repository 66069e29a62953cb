"""Fused programs of block groups (``fusion.block``: branches and joins) and their executor.

The program walks the same shared loop nest as a chain's (``fusion.program``): per tile step the
group input's window -- the hull of what its readers need, loaded once (``LOAD_INPUT``) -- and the
merging layers' DRAM inputs (``LOAD_SIDE``), then every layer's output window in topological order
(streamed weights piece by piece, the last layer's output stored in ``tile_k`` boxes), then
``STEP``, which drops every map. The executor keeps each on-chip tensor once (the group input, every
intermediate map: a residual's skip tensor is one of them) and hands each reader its part; it counts
DRAM bytes and bursts from the real box addresses and checks every memory's occupancy (each tensor
counted once, as the model's footprint does).
"""

from __future__ import annotations

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.dims import Dim
from tileplan.fusion.block import BlockAxisTiles, consumers
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.executor import FusedResult, _Machine, execute_fused, record_occupancy
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping
from tileplan.fusion.instructions import FusedProgram, Instr
from tileplan.fusion.program import _parts, _step, generate_fused
from tileplan.program.reference import reference_output
from tileplan.workload.layer import OpKind


def generate_block(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedProgram:
    """The program of ``mapping`` for block group ``group`` (recompute mode, whole maps)."""
    mapping.check(group)  # block groups: recompute, whole maps
    gm = GroupModel(group, arch, np.array([mapping.tile_p]), np.array([mapping.tile_q]))
    layers = tuple(gm.layers)
    rows, cols = gm.rows, gm.cols
    assert isinstance(rows, BlockAxisTiles) and isinstance(cols, BlockAxisTiles)
    out = [Instr("LOAD_WEIGHT", m, k=(0, x.k_out), c=(0, x.dims[Dim.C]))
           for m, x in enumerate(layers) if x.has_weights and mapping.resident[m]]
    steps = [(i, j) for i in range(int(rows.npos[0])) for j in range(int(cols.npos[0]))]
    if mapping.direction is Direction.COLS:
        steps = sorted(steps, key=lambda ij: (ij[1], ij[0]))
    c_x = group.input_channels()
    for n in _parts(0, layers[-1].n, mapping.tile_n):
        for i, j in steps:
            box_r = (int(rows.x_lo[0, i]), int(rows.x_hi[0, i]))
            box_c = (int(cols.x_lo[0, j]), int(cols.x_hi[0, j]))
            if box_r[1] > box_r[0] and box_c[1] > box_c[0]:
                out.append(Instr("LOAD_INPUT", 0, n=n, c=(0, c_x), rows=box_r, cols=box_c))
            for m in range(len(layers)):
                r = (int(rows.in_lo[m][0, i]), int(rows.in_hi[m][0, i]))
                c = (int(cols.in_lo[m][0, j]), int(cols.in_hi[m][0, j]))
                if r[1] > r[0] and c[1] > c[0]:
                    out.extend(Instr("LOAD_SIDE", m, n=n, c=(s.offset, s.offset + s.channels), rows=r, cols=c)
                               for s in group.sides[m] if not s.on_chip)
            regions = [((int(rows.out_lo[m][0, i]), int(rows.out_hi[m][0, i])),
                        (int(cols.out_lo[m][0, j]), int(cols.out_hi[m][0, j]))) for m in range(len(layers))]
            out.extend(_step(layers, mapping, group, n, regions))
            out.append(Instr("STEP"))
    return FusedProgram(group, arch, mapping, layers, tuple(out))


class _BlockMachine(_Machine):
    """``_Machine`` with each on-chip tensor held once (``tensors``: -1 the group input, ``j`` layer
    ``j``'s output) and copied into its readers' input stacks, which are views for the arithmetic only:
    occupancy counts the tensors, the DRAM side inputs, the weights and the output accumulators."""

    def __init__(self, prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None],
                 sides: list[list[np.ndarray]] | None = None) -> None:
        group = prog.group
        super().__init__(prog, np.zeros((1, 1, 1, 1), dtype=np.int64), weights, sides)
        self.x = np.asarray(x, dtype=np.int64)
        self.readers = consumers(group)
        shapes = {-1: self.x.shape}
        shapes.update({j: (x_.n, x_.k_out, x_.p, x_.q) for j, x_ in enumerate(self.layers[:-1])})
        self.tensors = {s: np.zeros(shape, dtype=np.int64) for s, shape in shapes.items()}
        self.t_have = {s: np.zeros(shape, dtype=bool) for s, shape in shapes.items()}
        self.dram_side = [np.zeros(a.shape, dtype=bool) for a in self.maps]
        for m, specs in enumerate(group.sides):
            for s in specs:
                if not s.on_chip:
                    self.dram_side[m][:, s.offset:s.offset + s.channels] = True

    def _deliver(self, source: int, sl: tuple[slice, ...]) -> None:
        """Copy box ``sl`` of on-chip tensor ``source`` into every reader's input stack."""
        data = self.tensors[source][sl]
        for c in self.readers.get(source, []):
            group = self.p.group
            places = ([group.chain_offset(c)] if group.sources[c] == source else []) + \
                [s.offset for s in group.sides[c] if s.source == source]
            for at in places:
                target = (sl[0], slice(at + (sl[1].start or 0), at + (sl[1].stop or data.shape[1])), *sl[2:])
                self.maps[c][target] = data
                self.have[c][target] = True

    def occupancy(self) -> None:
        used = dict.fromkeys(self.mem_names, 0)
        mem = self.probs[0].memory_of_operand
        used[self.mem_names[mem[0]]] += int(self.t_have[-1].sum()) * self.probs[0].precision.input
        for j in range(len(self.layers) - 1):
            used[self.mem_names[mem[0]]] += int(self.t_have[j].sum()) * self.probs[j].precision.output
        for m, prob in enumerate(self.probs):
            used[self.mem_names[mem[0]]] += int((self.have[m] & self.dram_side[m]).sum()) * prob.precision.input
            w_have = self.w_have[m]
            if w_have is not None:
                used[self.mem_names[prob.memory_of_operand[1]]] += int(w_have.sum()) * prob.precision.weight
        used[self.mem_names[mem[2]]] += int(self.acc_have.sum()) * self.probs[-1].precision.psum
        record_occupancy(self.result, self.p.arch, used)

    def run(self, ins: Instr) -> None:
        if ins.op == "LOAD_INPUT":
            box = (ins.n, ins.c, ins.rows, ins.cols)
            sl = tuple(slice(a, b) for a, b in box)
            self.tensors[-1][sl] = self.x[sl]
            self.t_have[-1][sl] = True
            self._deliver(-1, sl)
            self.dram(0, self.x.shape, box, self.probs[0].precision.input, False)
            self.occupancy()
            return
        super().run(ins)
        if ins.op == "STEP":
            for have in self.t_have.values():
                have[:] = False

    def store_result(self, ins: Instr, res: np.ndarray) -> None:
        m = ins.layer
        if m == len(self.layers) - 1:
            super().store_result(ins, res)
            return
        sl = (slice(*ins.n), slice(*ins.k), slice(*ins.rows), slice(*ins.cols))
        self.tensors[m][sl] = res
        self.t_have[m][sl] = True
        self._deliver(m, sl)


def execute_block(prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None],
                  sides: list[list[np.ndarray]] | None = None) -> FusedResult:
    """Run block program ``prog`` on the group input ``x`` (N, C, H, W), per-layer weights and per
    layer one tensor per input in ``group.sides`` (N, channels, H, W; those held on chip are ignored)."""
    machine = _BlockMachine(prog, x, weights, sides)
    for ins in prog.instructions:
        machine.run(ins)
    return machine.result


def block_reference(group: FusedGroup, x: np.ndarray, weights: list[np.ndarray | None],
                    sides: list[list[np.ndarray]]) -> np.ndarray:
    """The last layer's output of ``group`` computed layer by layer on whole tensors (``sides`` as
    :func:`execute_block` takes them)."""
    tensors: dict[int, np.ndarray] = {-1: np.asarray(x, dtype=np.int64)}
    y = tensors[-1]
    for m, (layer, w) in enumerate(zip(group.layers, weights, strict=True)):
        parts = [(group.chain_offset(m), tensors[group.sources[m]])] + \
            [(s.offset, tensors[s.source] if s.source is not None else data)
             for s, data in zip(group.sides[m], sides[m], strict=True)]
        parts.sort(key=lambda p: p[0])
        if layer.op is OpKind.CONCAT:
            inputs = [np.concatenate([a for _, a in parts], axis=1)]
        else:
            inputs = [a for _, a in parts]
        y = reference_output(layer, inputs, w)
        tensors[m] = y
    return y


def fused_program(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedProgram:
    """The fused program of ``mapping``: ``generate_block`` for a block group, else the chain's
    ``fusion.program.generate_fused``."""
    return generate_block(group, arch, mapping) if group.is_block else generate_fused(group, arch, mapping)


def run_fused_program(prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None],
                    sides: list[list[np.ndarray]] | None = None) -> FusedResult:
    """Run a fused program of a block group (``execute_block``) or a chain (``execute_fused``)."""
    return (execute_block if prog.group.is_block else execute_fused)(prog, x, weights, sides)
