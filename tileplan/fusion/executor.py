"""The executor of fused programs (``fusion.program``): runs a program on integers with the
intermediate maps held only on chip. It computes every region from on-chip data only (a missing
input pixel is an error), counts each DRAM transfer's bytes and bursts from the real addresses of
the box in the tensor's row-major layout (contiguous runs, ``ceil(run_bytes / burst)`` each), and
checks every on-chip memory's occupancy against its size (overflow is an error naming the memory).
Its output must equal the layers run one by one. The block and transformer executors
(``fusion.block_program``, ``fusion.transformer_program``) reuse its machine and its counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.fusion.assemble import side_tensor
from tileplan.fusion.group import MERGING, stack_channels
from tileplan.fusion.instructions import FusedProgram, FusedProgramError, Instr, Range
from tileplan.workload.layer import OpKind


@dataclass
class FusedResult:
    """What a fused program computed and moved: the last layer's output (N, K, P, Q), DRAM bytes and
    bursts per operand (input, weight, output), MACs executed and the peak bytes of each memory."""

    output: np.ndarray
    read_bytes: list[int] = field(default_factory=lambda: [0, 0, 0])
    write_bytes: int = 0
    bursts: list[int] = field(default_factory=lambda: [0, 0, 0])
    macs: int = 0
    peak_bytes: dict[str, int] = field(default_factory=dict)


def _box_cost(shape: tuple[int, ...], box: tuple[Range, ...], elem_bytes: int, burst: int) -> tuple[int, int]:
    """(bytes, bursts) of a box of a row-major tensor: bursts per contiguous run of addresses."""
    index = np.zeros([hi - lo for lo, hi in box], dtype=np.int64)
    stride = 1
    for axis in range(len(shape) - 1, -1, -1):
        lo, hi = box[axis]
        view = [1] * len(shape)
        view[axis] = hi - lo
        index = index + (np.arange(lo, hi, dtype=np.int64) * stride).reshape(view)
        stride *= shape[axis]
    addrs = np.sort(index.ravel())
    if addrs.size == 0:
        return 0, 0
    breaks = np.flatnonzero(np.diff(addrs) != 1) + 1
    lengths = np.diff(np.concatenate([[0], breaks, [addrs.size]]))
    return int(addrs.size) * elem_bytes, int(np.sum(-(-(lengths * elem_bytes) // burst)))


def count_dram(result: FusedResult, op: int, shape: tuple[int, ...], box: tuple[Range, ...], elem_bytes: int,
               burst_bytes: int, write: bool) -> None:
    """Add one DRAM transfer of ``box`` (of a row-major ``shape`` tensor) to ``result``'s counted bytes
    and bursts of operand ``op`` (writes: the written bytes)."""
    nbytes, bursts = _box_cost(shape, box, elem_bytes, burst_bytes)
    if write:
        result.write_bytes += nbytes
    else:
        result.read_bytes[op] += nbytes
    result.bursts[op] += bursts


def record_occupancy(result: FusedResult, arch: Arch, used: dict[str, int]) -> None:
    """Track each on-chip memory's peak bytes in ``result``; raise :class:`FusedProgramError` naming the
    memory when ``used`` exceeds its size."""
    for spec in arch.memories:
        result.peak_bytes[spec.name] = max(result.peak_bytes[spec.name], used[spec.name])
        if used[spec.name] > spec.size_bytes:
            raise FusedProgramError(f"on-chip memory {spec.name} overflows: {used[spec.name]} bytes needed, "
                                    f"{spec.size_bytes} available", memory=spec.name)


_MIN = np.iinfo(np.int64).min


class _Machine:
    """Runs a fused program: DRAM tensors, the on-chip maps, weights and output tiles with masks of
    what is present, and byte counters per memory."""

    def __init__(self, prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None],
                 sides: list[list[np.ndarray]] | None = None) -> None:
        self.p = prog
        self.layers = prog.layers
        self.x = np.asarray(x, dtype=np.int64)
        self.w = [None if w is None else np.asarray(w, dtype=np.int64) for w in weights]
        self.sides = {(m, s.offset): np.asarray(a, dtype=np.int64)
                      for m, (specs, arrays) in enumerate(zip(prog.group.sides, sides or [[]] * len(self.layers),
                                                              strict=True))
                      for s, a in zip(specs, arrays, strict=True)}
        self.maps = [np.zeros((x_.n, stack_channels(x_), x_.h, x_.w), dtype=np.int64) for x_ in self.layers]
        self.have = [np.zeros(a.shape, dtype=bool) for a in self.maps]
        self.w_have = [None if w is None else np.zeros(w.shape, dtype=bool) for w in self.w]
        last = self.layers[-1]
        self.out = np.zeros((last.n, last.k_out, last.p, last.q), dtype=np.int64)
        self.acc = np.zeros_like(self.out)
        self.acc_have = np.zeros(self.out.shape, dtype=bool)
        self.keep = [np.zeros(a.shape, dtype=bool) for a in self.maps]
        self.result = FusedResult(np.full(self.out.shape, _MIN, dtype=np.int64))
        self.probs = [Problem(layer, prog.arch) for layer in self.layers]
        self.mem_names = [mem.name for mem in prog.arch.memories]
        self.result.peak_bytes = {name: 0 for name in self.mem_names}

    def occupancy(self) -> None:
        used = dict.fromkeys(self.mem_names, 0)
        mem = self.probs[0].memory_of_operand
        for m, prob in enumerate(self.probs):
            used[self.mem_names[mem[0]]] += int(self.have[m].sum()) * prob.precision.input
            w_have = self.w_have[m]
            if w_have is not None:
                used[self.mem_names[prob.memory_of_operand[1]]] += int(w_have.sum()) * prob.precision.weight
        used[self.mem_names[mem[2]]] += int(self.acc_have.sum()) * self.probs[-1].precision.psum
        record_occupancy(self.result, self.p.arch, used)

    def dram(self, op: int, shape: tuple[int, ...], box: tuple[Range, ...], elem_bytes: int, write: bool) -> None:
        count_dram(self.result, op, shape, box, elem_bytes, self.p.arch.dram.burst_bytes, write)

    def run(self, ins: Instr) -> None:
        n0, n1 = ins.n
        m = ins.layer
        if ins.op == "LOAD_INPUT":
            first = self.layers[0]
            box = (ins.n, ins.c, ins.rows, ins.cols)
            sl = tuple(slice(a, b) for a, b in box)
            self.maps[0][sl] = self.x[sl]
            self.have[0][sl] = True
            self.dram(0, (first.n, first.c_in, first.h, first.w), box, self.probs[0].precision.input, False)
        elif ins.op == "LOAD_SIDE":
            layer = self.layers[m]
            side = next(s for s in self.p.group.sides[m] if s.offset == ins.c[0])
            shape, at = side_tensor(layer, side)
            sl = (slice(n0, n1), slice(*ins.c), slice(*ins.rows), slice(*ins.cols))
            self.maps[m][sl] = self.sides[(m, side.offset)][n0:n1, :, slice(*ins.rows), slice(*ins.cols)]
            self.have[m][sl] = True
            self.dram(0, shape, (ins.n, (at, at + side.channels), ins.rows, ins.cols), self.probs[m].precision.input,
                      False)
        elif ins.op == "LOAD_WEIGHT":
            w, w_have = self.w[m], self.w_have[m]
            assert w is not None and w_have is not None
            if not self.p.mapping.resident[m] and not self.p.mapping.chunk_outer:
                w_have[:] = False  # a streamed piece replaces the last one (unused when its step had no region)
            box = (ins.k, ins.c, (0, w.shape[2]), (0, w.shape[3]))
            w_have[tuple(slice(a, b) for a, b in box)] = True
            self.dram(1, w.shape, box, self.probs[m].precision.weight, False)
        elif ins.op == "COMPUTE":
            self.compute(ins)
        elif ins.op == "STORE":
            last = self.layers[-1]
            sl = (slice(n0, n1), slice(*ins.k), slice(*ins.rows), slice(*ins.cols))
            if not self.acc_have[sl].all():
                raise FusedProgramError(f"STORE of an output box that was not computed: {ins}")
            self.result.output[sl] = self.acc[sl]
            self.acc_have[sl] = False
            self.dram(2, (last.n, last.k_out, last.p, last.q), (ins.n, ins.k, ins.rows, ins.cols),
                      self.probs[-1].precision.output, True)
        elif ins.op == "DROP":  # channels ins.c of the groups whose outputs ins.k are
            layer = self.layers[m]
            k_per = layer.dims[Dim.K]
            chans = np.concatenate([np.arange(g * layer.dims[Dim.C] + ins.c[0], g * layer.dims[Dim.C] + ins.c[1])
                                    for g in range(ins.k[0] // k_per, -(-ins.k[1] // k_per))])
            self.have[m][n0:n1, chans] &= self.keep[m][n0:n1, chans]  # what a later step reads stays
        elif ins.op == "FREE_WEIGHT":  # a chunk's weights, kept over the tile steps (chunk_outer)
            w_have = self.w_have[m]
            assert w_have is not None
            w_have[:] = False
        elif ins.op == "KEEP":
            self.keep[m][n0:n1, :, slice(*ins.rows), slice(*ins.cols)] = True
        elif ins.op == "STEP":
            for m_, keep in enumerate(self.keep):
                self.have[m_] &= keep
                keep[:] = False
        if ins.op in ("LOAD_INPUT", "LOAD_SIDE", "LOAD_WEIGHT", "COMPUTE"):  # only these add on-chip data
            self.occupancy()

    def merge(self, ins: Instr) -> np.ndarray:
        """Output channels ``ins.k`` of an add (the sum of its stacked inputs) or a concat (the channels
        of its input stack) over ``ins.rows`` x ``ins.cols``, from on-chip data only."""
        m = ins.layer
        layer = self.layers[m]
        copies = layer.input_count if layer.op is OpKind.ADD else 1
        box = (slice(*ins.n), slice(None), slice(*ins.rows), slice(*ins.cols))
        k0, k1 = ins.k
        chans = np.concatenate([np.arange(i * layer.c_in + k0, i * layer.c_in + k1) for i in range(copies)])
        if not self.have[m][box][:, chans].all():
            raise FusedProgramError(f"{ins} reads input pixels of layer {layer.name!r} that are not on chip")
        stack = self.maps[m][box][:, chans]
        res = stack.reshape(stack.shape[0], copies, k1 - k0, *stack.shape[2:]).sum(axis=1)
        self.result.macs += res.size * (copies - 1)
        return res

    def compute(self, ins: Instr) -> None:
        m = ins.layer
        layer = self.layers[m]
        if layer.op in MERGING:
            self.store_result(ins, self.merge(ins))
            return
        d = layer.dims
        g_all, k_per, c_per = layer.groups, d[Dim.K], d[Dim.C]
        g0, g1 = (ins.k[0] // k_per, -(-ins.k[1] // k_per)) if g_all > 1 else (0, 1)
        k0, k1 = (0, k_per) if g_all > 1 else ins.k
        c0, c1 = ins.c
        (a, b), (e, f) = ins.rows, ins.cols
        sh, sw = layer.stride
        dh, dw = layer.dilation
        lo_r, hi_r = a * sh - layer.pad[0], (b - 1) * sh - layer.pad[0] + (layer.r - 1) * dh + 1
        lo_c, hi_c = e * sw - layer.pad[2], (f - 1) * sw - layer.pad[2] + (layer.s - 1) * dw + 1
        n0, n1 = ins.n
        chans = np.concatenate([np.arange(g * c_per + c0, g * c_per + c1) for g in range(g0, g1)])
        rr = (max(lo_r, 0), min(hi_r, layer.h))
        cc = (max(lo_c, 0), min(hi_c, layer.w))
        need = self.have[m][n0:n1][:, chans][:, :, rr[0]:rr[1], cc[0]:cc[1]]
        if not need.all():
            raise FusedProgramError(f"{ins} reads input pixels of layer {layer.name!r} that are not on chip")
        is_max = layer.op is OpKind.MAXPOOL
        win = np.full((n1 - n0, len(chans), hi_r - lo_r, hi_c - lo_c), _MIN if is_max else 0, dtype=np.int64)
        win[:, :, rr[0] - lo_r:rr[1] - lo_r, cc[0] - lo_c:cc[1] - lo_c] = \
            self.maps[m][n0:n1][:, chans][:, :, rr[0]:rr[1], cc[0]:cc[1]]
        win = win.reshape(n1 - n0, g1 - g0, c1 - c0, hi_r - lo_r, hi_c - lo_c)
        p, q = b - a, f - e
        res = np.full((n1 - n0, g1 - g0, k1 - k0, p, q), _MIN if is_max else 0, dtype=np.int64)
        w = self.w[m]
        if w is not None:
            w_have = self.w_have[m]
            assert w_have is not None
            kk = np.concatenate([np.arange(g * k_per + k0, g * k_per + k1) for g in range(g0, g1)])
            if not w_have[kk][:, c0:c1].all():
                raise FusedProgramError(f"{ins} needs weights of layer {layer.name!r} that are not on chip")
            wt = w[kk][:, c0:c1].reshape(g1 - g0, k1 - k0, c1 - c0, layer.r, layer.s)
        for r in range(layer.r):
            for s in range(layer.s):
                taps = win[:, :, :, r * dh:r * dh + (p - 1) * sh + 1:sh, s * dw:s * dw + (q - 1) * sw + 1:sw]
                if w is not None:
                    res += np.einsum("ngcpq,gkc->ngkpq", taps, wt[:, :, :, r, s])
                elif is_max:
                    res = np.maximum(res, taps)
                else:
                    res += taps
        if layer.op in (OpKind.AVGPOOL, OpKind.GLOBALPOOL):
            res //= layer.r * layer.s
        self.result.macs += res.size * (c1 - c0 if w is not None else 1) * layer.r * layer.s
        self.store_result(ins, res.reshape(n1 - n0, (g1 - g0) * (k1 - k0), p, q))
        if w is not None and not self.p.mapping.resident[m] and not self.p.mapping.chunk_outer:
            w_have = self.w_have[m]
            assert w_have is not None
            w_have[:] = False  # a streamed piece is dropped once used


    def store_result(self, ins: Instr, res: np.ndarray) -> None:
        """Put a computed region of layer ``ins.layer`` where its consumer reads it: the next layer's
        input stack at the chain's channels, or the last layer's output accumulators (partial sums
        over input-channel chunks are added)."""
        m = ins.layer
        if m == len(self.layers) - 1:
            target, have, at = self.acc, self.acc_have, 0
        else:
            target, have, at = self.maps[m + 1], self.have[m + 1], self.p.group.chain_offset(m + 1)
        sl = (slice(*ins.n), slice(at + ins.k[0], at + ins.k[1]), slice(*ins.rows), slice(*ins.cols))
        target[sl] = res if ins.c[0] == 0 else target[sl] + res
        have[sl] = True


def execute_fused(prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None],
                  sides: list[list[np.ndarray]] | None = None) -> FusedResult:
    """Run ``prog`` on input ``x`` (N, C, H, W), per-layer weights ((G*K, C, R, S) or ``None``) and per
    layer the tensors of its DRAM inputs (``group.sides`` order, (N, channels, H, W) each)."""
    machine = _Machine(prog, x, weights, sides)
    for ins in prog.instructions:
        machine.run(ins)
    return machine.result
