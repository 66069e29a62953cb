"""Programs of fused attention and MLP blocks: the nest of ``fusion.transformer_cost`` spelled out as
``fusion.instructions`` instructions, and an executor that runs them in float64 with the middle tensor
(scores and probabilities, the MLP's hidden activations) held only on chip.

Instructions (``Instr``; ``k`` output channels of all groups, ``c`` input channels of one group):
``LOAD_INPUT`` a box of A, ``LOAD_WEIGHT`` a box of a matmul's B (K, V or a weight; ``k`` x ``c``
of its (G*K, C) matrix), ``COMPUTE`` one layer over ``rows`` x ``k`` (a matmul reduces over ``c``;
softmax normalises the whole rows of one group; an element-wise layer works on its chunk),
``FREE_WEIGHT`` a matmul's B leaves the chip, ``STORE`` a box of the output, ``STEP`` the end of a
row tile (A and the middle leave the chip). A layer consumes its inputs of the middle in place:
once computed, what it read is dropped.

The executor computes each instruction from on-chip data only (a missing element is an error),
counts each DRAM transfer's bytes and bursts from the box's addresses in the (N, C, H, W) row-major
tensor (``fusion.executor._box_cost``) and checks every on-chip memory's occupancy against its size.
:func:`verify_transformer` compares it with the model and with the block computed on whole tensors
(plain numpy: ``softmax(Q K^T) V`` per group, ``act(X W_up^T) [* X W_gate^T] W_down^T``).
"""

from __future__ import annotations

import math

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.dims import Dim, Operand
from tileplan.fusion.block_program import fused_program
from tileplan.fusion.executor import FusedResult, count_dram, record_occupancy
from tileplan.fusion.group import FusedGroup, FusedMapping
from tileplan.fusion.instructions import FusedProgram, FusedProgramError, Instr
from tileplan.fusion.program import _parts
from tileplan.fusion.transformer import TransformerKind, TransformerShape, canonical_layers
from tileplan.fusion.transformer_cost import check_transformer_mapping, evaluate_transformer
from tileplan.fusion.verify import FusedVerify, verify_fused
from tileplan.workload.layer import OpKind

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _shape(group: FusedGroup) -> TransformerShape:
    shape = group.transformer
    assert shape is not None, group.name
    return shape


def generate_transformer(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedProgram:
    """The instructions of a block mapping (the nest of ``fusion.transformer_cost``)."""
    check_transformer_mapping(group, mapping)
    s = _shape(group)
    layers = tuple(Problem(x, arch).layer for x in canonical_layers(group.layers, s))
    last = len(layers) - 1
    mats = [*s.firsts, last]
    c = mapping.chunk[0]
    res = mapping.resident
    out: list[Instr] = []

    def b_box(m: int, g: int, j: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
        if m == last:
            return (g * s.n2, (g + 1) * s.n2), j
        return (g * s.width + j[0], g * s.width + j[1]), (0, s.k1)

    def matmul(m: int, g: int, n: tuple[int, int], rows: tuple[int, int], j: tuple[int, int]) -> None:
        k, cc = b_box(m, g, j)
        if not res[m]:
            out.append(Instr("LOAD_WEIGHT", m, k=k, c=cc))
        out.append(Instr("COMPUTE", m, n=n, k=k, c=cc, rows=rows, cols=(0, 1)))
        if not res[m]:
            out.append(Instr("FREE_WEIGHT", m))

    if s.mask is not None:  # the mask row, kept for the whole block
        out.append(Instr("LOAD_WEIGHT", s.mask, k=(0, group.layers[s.mask].elements(Operand.WEIGHT)), c=(0, 1)))
    for g in range(s.groups):
        whole = (0, s.width)
        out.extend(Instr("LOAD_WEIGHT", m, k=b_box(m, g, whole)[0], c=b_box(m, g, whole)[1])
                   for m in mats if res[m])
        for n in _parts(0, s.batch, 1):
            for rows in _parts(0, s.rows, mapping.tile_p):
                out.append(Instr("LOAD_INPUT", 0, n=n, c=(g * s.k1, (g + 1) * s.k1), rows=rows, cols=(0, 1)))
                if s.kind is TransformerKind.ATTENTION and mapping.online:  # score, normalise, reduce each chunk
                    for j in _parts(0, s.width, c):
                        matmul(0, g, n, rows, j)
                        for m in range(1, last):
                            out.append(Instr("COMPUTE", m, n=n, k=(g * s.width + j[0], g * s.width + j[1]), rows=rows,
                                             cols=(0, 1)))
                        matmul(last, g, n, rows, j)
                    out.append(Instr("NORMALIZE", last - 1, n=n, k=(g * s.n2, (g + 1) * s.n2), rows=rows, cols=(0, 1)))
                elif s.kind is TransformerKind.ATTENTION:
                    for j in _parts(0, s.width, c):
                        matmul(0, g, n, rows, j)
                    for m in range(1, last):  # the mask add, then the softmax: whole rows of group g
                        out.append(Instr("COMPUTE", m, n=n, k=(g * s.width, (g + 1) * s.width), rows=rows,
                                         cols=(0, 1)))
                    for j in _parts(0, s.width, c):
                        matmul(last, g, n, rows, j)
                else:
                    for j in _parts(0, s.width, c):
                        for m in range(last):
                            if m in s.firsts:
                                matmul(m, g, n, rows, j)
                            else:
                                out.append(Instr("COMPUTE", m, n=n, k=j, rows=rows, cols=(0, 1)))
                        matmul(last, g, n, rows, j)
                out.append(Instr("STORE", last, n=n, k=(g * s.n2, (g + 1) * s.n2), rows=rows, cols=(0, 1)))
                out.append(Instr("STEP"))
        out.extend(Instr("FREE_WEIGHT", m) for m in mats if res[m])
    if s.mask is not None:
        out.append(Instr("FREE_WEIGHT", s.mask))
    return FusedProgram(group, arch, mapping, layers, tuple(out))


class _Machine:
    """DRAM tensors, on-chip data with presence masks, byte counters and occupancy of a block program."""

    def __init__(self, prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None]) -> None:
        self.p, self.s = prog, _shape(prog.group)
        self.layers = prog.layers
        self.probs = [Problem(x_, prog.arch) for x_ in self.layers]
        self.x = np.asarray(x, dtype=np.float64)
        self.w = [None if w is None else np.asarray(w, dtype=np.float64)[:, :, 0, 0] for w in weights]
        self.a_have = np.zeros(self.x.shape[:3], dtype=bool)
        self.mid = [np.zeros((x_.n, x_.k_out, x_.p)) for x_ in self.layers[:-1]]
        self.mid_have = [np.zeros(a.shape, dtype=bool) for a in self.mid]
        self.w_have = [None if w is None else np.zeros(w.shape, dtype=bool) for w in self.w]
        last = self.layers[-1]
        self.acc = np.zeros((last.n, last.k_out, last.p))
        self.acc_have = np.zeros(self.acc.shape, dtype=bool)
        self.result = FusedResult(np.full((last.n, last.k_out, last.p, 1), np.nan))
        self.result.peak_bytes = {mem.name: 0 for mem in prog.arch.memories}
        shape = (last.n, self.s.groups, self.s.rows)  # online softmax: each row's running max and exp-sum
        self.run_max, self.run_sum = np.full(shape, -np.inf), np.zeros(shape)
        self.stat_have = np.zeros(shape, dtype=bool)

    def occupancy(self) -> None:
        names = [mem.name for mem in self.p.arch.memories]
        used = dict.fromkeys(names, 0)
        first, lastp = self.probs[0], self.probs[-1]
        used[names[first.memory_of_operand[Operand.INPUT]]] += int(self.a_have.sum()) * first.precision.input
        used[names[first.memory_of_operand[Operand.INPUT]]] += sum(int(h.sum()) for h in self.mid_have) * \
            lastp.precision.input
        for m, have in enumerate(self.w_have):
            if have is not None:
                used[names[self.probs[m].memory_of_operand[Operand.WEIGHT]]] += int(have.sum()) * \
                    self.probs[m].precision.weight
        used[names[lastp.memory_of_operand[Operand.OUTPUT]]] += int(self.acc_have.sum()) * lastp.precision.psum
        used[names[first.memory_of_operand[Operand.INPUT]]] += 2 * int(self.stat_have.sum()) * lastp.precision.psum
        record_occupancy(self.result, self.p.arch, used)

    def dram(self, op: int, shape: tuple[int, ...], box: tuple[tuple[int, int], ...], elem: int, write: bool) -> None:
        count_dram(self.result, op, shape, box, elem, self.p.arch.dram.burst_bytes, write)

    def run(self, ins: Instr) -> None:
        m, n, rows = ins.layer, slice(*ins.n), slice(*ins.rows)
        if ins.op == "LOAD_INPUT":
            self.a_have[n, slice(*ins.c), rows] = True
            self.dram(0, self.x.shape, (ins.n, ins.c, ins.rows, (0, 1)), self.probs[0].precision.input, False)
        elif ins.op == "LOAD_WEIGHT":
            w, have = self.w[m], self.w_have[m]
            assert w is not None and have is not None
            have[slice(*ins.k), slice(*ins.c)] = True
            self.dram(1, (*w.shape, 1, 1), (ins.k, ins.c, (0, 1), (0, 1)), self.probs[m].precision.weight, False)
        elif ins.op == "FREE_WEIGHT":
            have = self.w_have[m]
            assert have is not None
            have[:] = False
        elif ins.op == "COMPUTE":
            self.compute(ins)
        elif ins.op == "STORE":
            k = slice(*ins.k)
            if not self.acc_have[n, k, rows].all():
                raise FusedProgramError(f"STORE of an output box that was not computed: {ins}")
            self.result.output[n, k, rows, 0] = self.acc[n, k, rows]
            self.acc_have[n, k, rows] = False
            self.acc[n, k, rows] = 0.0
            self.dram(2, self.result.output.shape, (ins.n, ins.k, ins.rows, (0, 1)),
                      self.probs[-1].precision.output, True)
        elif ins.op == "NORMALIZE":  # the online softmax's final division by each row's exp-sum
            g = ins.k[0] // self.s.n2
            if not self.stat_have[n, g, rows].all():
                raise FusedProgramError(f"{ins} divides by exp-sums that are not on chip")
            self.acc[n, slice(*ins.k), rows] /= self.run_sum[n, g, rows][:, None, :]
            self.result.macs += self.acc[n, slice(*ins.k), rows].size
            self.stat_have[n, g, rows] = False
            self.run_max[n, g, rows], self.run_sum[n, g, rows] = -np.inf, 0.0
        elif ins.op == "STEP":
            self.a_have[:] = False
            for mid_have in self.mid_have:
                mid_have[:] = False
        if ins.op in ("LOAD_INPUT", "LOAD_WEIGHT", "COMPUTE"):
            self.occupancy()

    def _read(self, have: np.ndarray, data: np.ndarray, index: tuple[slice | np.ndarray, ...], ins: Instr
              ) -> np.ndarray:
        if not have[index].all():
            raise FusedProgramError(f"{ins} reads data of {self.layers[ins.layer].name!r} that is not on chip")
        return data[index]

    def compute(self, ins: Instr) -> None:
        m, s = ins.layer, self.s
        layer = self.layers[m]
        n, rows, k = slice(*ins.n), slice(*ins.rows), slice(*ins.k)
        names = [x.name for x in self.layers]
        if layer.op is OpKind.MATMUL:
            w, w_have = self.w[m], self.w_have[m]
            assert w is not None and w_have is not None
            b = self._read(w_have, w, (k, slice(*ins.c)), ins)
            last = m == len(self.layers) - 1
            g = ins.k[0] // (s.n2 if last else s.width)
            if last:  # reduce the middle's columns c of group g into the accumulators
                cols = slice(g * s.width + ins.c[0], g * s.width + ins.c[1])
                a = self._read(self.mid_have[m - 1], self.mid[m - 1], (n, cols, rows), ins)
                self.mid_have[m - 1][n, cols, rows] = False
                self.acc[n, k, rows] += np.einsum("ncr,kc->nkr", a, b)
                self.acc_have[n, k, rows] = True
            else:
                a = self._read(self.a_have, self.x[:, :, :, 0], (n, slice(g * s.k1, (g + 1) * s.k1), rows), ins)
                self.mid[m][n, k, rows] = np.einsum("ncr,kc->nkr", a, b)
                self.mid_have[m][n, k, rows] = True
            self.result.macs += a.shape[0] * a.shape[2] * b.shape[0] * b.shape[1]
            return
        srcs = [names.index(i) for i in layer.inputs]
        xs = [self._read(self.mid_have[i], self.mid[i], (n, k, rows), ins) for i in srcs]
        if layer.op is OpKind.SOFTMAX and self.p.mapping.online:  # one chunk against the running statistics
            g = ins.k[0] // s.width
            old = self.run_max[n, g, rows]
            new = np.maximum(old, xs[0].max(axis=1))
            y = np.exp(xs[0] - new[:, None, :])
            scale = np.exp(old - new)
            self.run_sum[n, g, rows] = self.run_sum[n, g, rows] * scale + y.sum(axis=1)
            self.run_max[n, g, rows] = new
            self.stat_have[n, g, rows] = True
            out_k = slice(g * s.n2, (g + 1) * s.n2)
            self.acc[n, out_k, rows] *= scale[:, None, :]  # the output so far, at the new max
            self.result.macs += self.acc[n, out_k, rows].size
        elif layer.op is OpKind.SOFTMAX:  # the whole rows of one group
            e = np.exp(xs[0] - xs[0].max(axis=1, keepdims=True))
            y = e / e.sum(axis=1, keepdims=True)
        elif layer.op is OpKind.GELU:
            y = 0.5 * xs[0] * (1.0 + _erf(xs[0] / math.sqrt(2.0)))
        elif layer.op is OpKind.SILU:
            y = xs[0] / (1.0 + np.exp(-xs[0]))
        elif layer.op is OpKind.ADD:  # the mask row over the scores: one value per key (or per channel)
            w, w_have = self.w[m], self.w_have[m]
            assert w is not None and w_have is not None
            chans = np.arange(*ins.k) % len(w)
            y = xs[0] + self._read(w_have, w, (chans, slice(0, 1)), ins)[None, :, :]
        else:
            y = xs[0] * xs[1]
        for i in srcs:  # consumed in place
            self.mid_have[i][n, k, rows] = False
        self.mid[m][n, k, rows] = y
        self.mid_have[m][n, k, rows] = True
        self.result.macs += y.size * layer.ops_per_point


def execute_transformer(prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None]) -> FusedResult:
    """Run a block program on A ``x`` (N, C, H, 1) and per layer its B ((G*K, C, 1, 1) or ``None``)."""
    machine = _Machine(prog, x, weights)
    for ins in prog.instructions:
        machine.run(ins)
    return machine.result


def transformer_reference(shape: TransformerShape, layers: list[OpKind], x: np.ndarray,
                          weights: list[np.ndarray | None],
                    mask: np.ndarray | None = None) -> np.ndarray:
    """The block on whole tensors, in plain numpy (N, G*n2, M, 1): per group
    ``softmax(Q K^T [+ mask]) V``; or ``down(act(X up^T) [* X gate^T])`` with the ops in ``layers``
    order. ``mask``: one value per key, or per (group, key)."""
    s = shape
    out = np.zeros((s.batch, s.groups * s.n2, s.rows, 1))
    mats = [None if w is None else w[:, :, 0, 0] for w in weights]
    for n in range(s.batch):
        for g in range(s.groups):
            a = x[n, g * s.k1:(g + 1) * s.k1, :, 0].T  # rows x k1
            down = mats[-1]
            assert down is not None
            v = down[g * s.n2:(g + 1) * s.n2]  # n2 x width
            if s.kind is TransformerKind.ATTENTION:
                k = mats[0]
                assert k is not None
                scores = a @ k[g * s.width:(g + 1) * s.width].T
                if mask is not None:
                    scores = scores + (mask if len(mask) == s.width else mask[g * s.width:(g + 1) * s.width])[None, :]
                p = np.exp(scores - scores.max(axis=1, keepdims=True))
                h = p / p.sum(axis=1, keepdims=True)
            else:
                ups = [a @ w.T for w in mats[:-1] if w is not None]
                act = layers[next(i for i, op in enumerate(layers) if op in (OpKind.GELU, OpKind.SILU))]
                first = ups[0]
                if act is OpKind.GELU:
                    h = 0.5 * first * (1.0 + _erf(first / math.sqrt(2.0)))
                else:
                    h = first * (1.0 / (1.0 + np.exp(-first)))
                if len(ups) > 1:
                    h = h * ups[1]
            out[n, g * s.n2:(g + 1) * s.n2, :, 0] = (h @ v.T).T
    return out


def block_reference(prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None]) -> np.ndarray:
    """:func:`transformer_reference` on the operands of :func:`execute_transformer` (per layer its B or
    mask row, in the block's layer order)."""
    s = _shape(prog.group)
    ups = [weights[m] for m in s.firsts]
    if s.kind is TransformerKind.MLP and len(ups) == 2:  # the activation's input first (the gate)
        names = [x_.name for x_ in prog.layers]
        act = next(x_ for x_ in prog.layers if x_.op in (OpKind.GELU, OpKind.SILU))
        gate = names.index(act.inputs[0])
        other = next(m for m in s.firsts if m != gate)
        ups = [weights[gate], weights[other]]
    mask = None if s.mask is None else weights[s.mask]
    return transformer_reference(s, [x_.op for x_ in prog.layers], x, [*ups, weights[-1]],
                                 None if mask is None else mask[:, 0, 0, 0])


def verify_transformer(group: FusedGroup, arch: Arch, mapping: FusedMapping, *, seed: int = 0) -> FusedVerify:
    """Model, executed program and whole-tensor numpy on random normal data (output within a relative
    1e-9; bytes, bursts and MACs exactly)."""
    s = _shape(group)
    rng = np.random.default_rng(seed)
    cost = evaluate_transformer(group, arch, mapping)
    prog = generate_transformer(group, arch, mapping)
    first = prog.layers[0]
    x = rng.standard_normal((first.n, first.c_in, first.h, 1))
    weights: list[np.ndarray | None] = [
        rng.standard_normal((x_.k_out, x_.dims[Dim.C], 1, 1)) if x_.op is OpKind.MATMUL else None for x_ in prog.layers]
    if s.mask is not None:
        weights[s.mask] = rng.standard_normal((group.layers[s.mask].elements(Operand.WEIGHT), 1, 1, 1))
    res = execute_transformer(prog, x, weights)
    c = cost.cost
    close = bool(np.allclose(res.output, block_reference(prog, x, weights), rtol=1e-9, atol=1e-12))
    return FusedVerify(
        group.name, str(mapping), close,
        tuple(int(v) for v in c.dram_read_bytes[0]), int(c.dram_write_bytes[0]),  # type: ignore[arg-type]
        tuple(int(v) for v in c.dram_bursts[0]), int(cost.executed_macs[0]),  # type: ignore[arg-type]
        tuple(res.read_bytes), res.write_bytes, tuple(res.bursts), res.macs,  # type: ignore[arg-type]
        len(prog.instructions), dict(res.peak_bytes),
        {mem.name: int(b) for mem, b in zip(arch.memories, c.footprint_bytes[0], strict=True)})


def generate_group(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedProgram:
    """The program of any fused group: an attention or MLP block's (:func:`generate_transformer`), else
    a chain's or a branching block group's (``fusion.block_program.fused_program``)."""
    if group.transformer is not None:
        return generate_transformer(group, arch, mapping)
    return fused_program(group, arch, mapping)


def verify_group(group: FusedGroup, arch: Arch, mapping: FusedMapping, *, seed: int = 0) -> FusedVerify:
    """Verify any fused group: a block (:func:`verify_transformer`) or a chain (``fusion.verify.verify_fused``)."""
    if group.transformer is not None:
        return verify_transformer(group, arch, mapping, seed=seed)
    return verify_fused(group, arch, mapping, seed=seed)
