"""Fused programs: the schedule of a fused mapping spelled out instruction by instruction, and an
executor that runs it on integers with the intermediate maps held only on chip.

A :class:`FusedProgram` is a list of instructions over the group's tensors (``LOAD_INPUT`` a box of
the first layer's input, ``LOAD_WEIGHT`` a box of one layer's weights, ``COMPUTE`` a region of one
layer's output, ``STORE`` a box of the last layer's output, ``STEP`` the end of a tile step, where
on-chip data no later step needs is dropped). The generator walks the shared loop nest exactly as
the model prices it (``fusion.assemble``); the executor is the second witness: it computes every
region from on-chip data only (a missing input pixel is an error), counts each DRAM transfer's bytes
and bursts from the real addresses of the box in the tensor's row-major layout (contiguous runs,
``ceil(run_bytes / burst)`` each), and checks every on-chip memory's occupancy against its size
(overflow is an error naming the memory). Its output must equal the layers run one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.dims import Operand
from tileplan.errors import TileplanError
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.group import FusedGroup, FusedMapping, Overlap
from tileplan.workload.layer import Layer, OpKind

Range = tuple[int, int]


class FusedProgramError(TileplanError):
    """A fused program reads data that is not on chip, or overflows an on-chip memory."""

    def __init__(self, message: str, memory: str | None = None) -> None:
        super().__init__(message)
        self.memory = memory


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction: ``op`` is LOAD_INPUT, LOAD_WEIGHT, COMPUTE, STORE or STEP; ``layer`` the layer
    index; ``n``/``k``/``c``/``rows``/``cols`` the element ranges it covers (k: output channels,
    c: input channels of the layer)."""

    op: str
    layer: int = 0
    n: Range = (0, 0)
    k: Range = (0, 0)
    c: Range = (0, 0)
    rows: Range = (0, 0)
    cols: Range = (0, 0)

    def __str__(self) -> str:
        if self.op == "STEP":
            return "STEP"
        def r(x: Range) -> str:
            return f"{x[0]}:{x[1]}"
        return f"{self.op} L{self.layer} n{r(self.n)} k{r(self.k)} c{r(self.c)} h{r(self.rows)} w{r(self.cols)}"


@dataclass(frozen=True)
class FusedProgram:
    """The instructions of one fused mapping of a group on an accelerator."""

    group: FusedGroup
    arch: Arch
    mapping: FusedMapping
    layers: tuple[Layer, ...]
    instructions: tuple[Instr, ...]

    def text(self) -> str:
        head = [f"# fused group {self.group.name} on {self.arch.name}: {self.mapping}"]
        return "\n".join(head + [str(i) for i in self.instructions]) + "\n"


def _parts(lo: int, hi: int, size: int) -> list[Range]:
    return [(a, min(a + size, hi)) for a in range(lo, hi, size)]


def generate_fused(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedProgram:
    """The program of ``mapping``: for every (n, p, q) tile step, the first layer's input window (or
    its new part), streamed weights, every layer's region (window or new part) in channel chunks,
    the last layer's output in K chunks."""
    mapping.check(group)
    gm = GroupModel(group, arch, np.array([mapping.tile_p]), np.array([mapping.tile_q]))
    layers = tuple(gm.layers)
    nl = len(layers)
    last = layers[-1]
    reuse = mapping.overlap is not Overlap.RECOMPUTE
    rows, cols = gm.rows, gm.cols
    out: list[Instr] = []
    for m, layer in enumerate(layers):
        if layer.has_weights and mapping.resident[m]:
            out.append(Instr("LOAD_WEIGHT", m, k=(0, layer.k_out), c=(0, layer.dims[_C])))
    for n in _parts(0, last.n, mapping.tile_n):
        for i in range(int(rows.npos[0])):
            for j in range(int(cols.npos[0])):
                top_r = (int(rows.new_in_lo(0)[0, i]) if reuse else int(rows.in_lo[0][0, i]), int(rows.in_hi[0][0, i]))
                top_c = (int(cols.new_in_lo(0)[0, j]) if reuse else int(cols.in_lo[0][0, j]), int(cols.in_hi[0][0, j]))
                if top_r[1] > top_r[0] and top_c[1] > top_c[0]:
                    out.append(Instr("LOAD_INPUT", 0, n=n, c=(0, layers[0].c_in), rows=top_r, cols=top_c))
                for m, layer in enumerate(layers):
                    lo_r = rows.new_lo[m] if reuse else rows.out_lo[m]
                    lo_c = cols.new_lo[m] if reuse else cols.out_lo[m]
                    reg_r = (int(lo_r[0, i]), int(rows.out_hi[m][0, i]))
                    reg_c = (int(lo_c[0, j]), int(cols.out_hi[m][0, j]))
                    out.extend(_layer_steps(layers, mapping, m, n, reg_r, reg_c))
                out.append(Instr("STEP"))
    return FusedProgram(group, arch, mapping, layers, tuple(out))


_C = next(d for d in __import__("tileplan.dims", fromlist=["Dim"]).Dim if d.name == "C")


def _layer_steps(layers: tuple[Layer, ...], mapping: FusedMapping, m: int, n: Range, reg_r: Range,
                 reg_c: Range) -> list[Instr]:
    """Weight loads, computes and stores of layer ``m`` for one step's region."""
    layer = layers[m]
    nl = len(layers)
    last = m == nl - 1
    resident = mapping.resident[m] or not layer.has_weights
    empty = reg_r[1] <= reg_r[0] or reg_c[1] <= reg_c[0]
    c_all = layer.dims[_C]
    kt = layer.k_out
    out: list[Instr] = []
    if m > 0 and mapping.chunk[m - 1] < layer.c_in:  # consumer of a chunked map
        for c in _parts(0, c_all, mapping.chunk[m - 1]):
            if not resident:
                out.append(Instr("LOAD_WEIGHT", m, k=(0, kt), c=c))
            if not empty:
                out.append(Instr("COMPUTE", m, n=n, k=(0, kt), c=c, rows=reg_r, cols=reg_c))
        if last and not empty:
            out.append(Instr("STORE", m, n=n, k=(0, kt), rows=reg_r, cols=reg_c))
        return out
    if not last and mapping.chunk[m] < kt:
        size = mapping.chunk[m]
    elif last and mapping.tile_k < kt:
        size = mapping.tile_k
    else:
        size = 1 if not resident else kt
    for k in _parts(0, kt, size):
        if not resident:
            out.append(Instr("LOAD_WEIGHT", m, k=k, c=(0, c_all)))
        if not empty and (resident or True):
            pass
    # Streamed one filter at a time: load every piece, computing once all pieces of a chunk are in.
    pieces = _parts(0, kt, size)
    out = []
    compute_size = size if (not last and mapping.chunk[m] < kt) or (last and mapping.tile_k < kt) else kt
    for k in _parts(0, kt, compute_size):
        if not resident:
            out.extend(Instr("LOAD_WEIGHT", m, k=p, c=(0, c_all)) for p in pieces if k[0] <= p[0] < k[1])
        if not empty:
            out.append(Instr("COMPUTE", m, n=n, k=k, c=(0, c_all), rows=reg_r, cols=reg_c))
            if last:
                out.append(Instr("STORE", m, n=n, k=k, rows=reg_r, cols=reg_c))
    return out


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
