"""Fused programs: the schedule of a fused mapping spelled out instruction by instruction.

A :class:`FusedProgram` is a list of instructions over the group's tensors (``LOAD_INPUT`` a box of
the first layer's input, ``LOAD_SIDE`` a box of a merging layer's input read from DRAM (an add's or
a concat's other inputs, ``group.Side``), ``LOAD_WEIGHT`` a box of one layer's weights, ``COMPUTE`` a
region of one layer's output, ``STORE`` a box of the last layer's output, ``STEP`` the end of a tile
step, where on-chip data no later step needs is dropped; ``fusion.instructions`` holds the
instruction set). The generator here walks the shared loop nest exactly as the model prices
it (``fusion.assemble``); the executor (``fusion.executor``) is the second witness: it runs the
program on integers with the intermediate maps held only on chip, counts every DRAM transfer and
checks every on-chip memory's occupancy. Its output must equal the layers run one by one.

The instruction types and the executor's names are re-exported here, where callers import them.
"""

from __future__ import annotations

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.dims import Dim
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.executor import FusedResult, _box_cost, _Machine, count_dram, execute_fused, record_occupancy
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.instructions import FusedProgram, FusedProgramError, Instr, Range
from tileplan.fusion.propagate import AxisTiles
from tileplan.workload.layer import Layer

__all__ = [  # the generator's names, and the instruction types and executor names callers import from here
    "FusedProgram", "FusedProgramError", "FusedResult", "Instr", "Range", "_Machine", "_box_cost", "count_dram",
    "execute_fused", "generate_fused", "record_occupancy",
]


def _parts(lo: int, hi: int, size: int) -> list[Range]:
    return [(a, min(a + size, hi)) for a in range(lo, hi, size)]


def generate_fused(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedProgram:
    """The program of ``mapping``: for every (n, p, q) tile step, the first layer's input window (or
    its new part), streamed weights, every layer's region (window or new part) in channel chunks,
    the last layer's output in K chunks. With reuse buffers, what a later step of the batch tile
    reads is marked (KEEP) before the step's work, so a consumed chunk's DROP spares it."""
    if group.transformer is not None:
        raise FusedProgramError(f"{group.name} is an attention or MLP block: "
                                f"fusion.transformer_program.generate_transformer writes its program")
    mapping.check(group)
    gm = GroupModel(group, arch, np.array([mapping.tile_p]), np.array([mapping.tile_q]))
    layers = tuple(gm.layers)
    last = layers[-1]
    rows, cols = gm.rows, gm.cols
    out: list[Instr] = []
    for m, layer in enumerate(layers):
        if layer.has_weights and mapping.resident[m]:
            out.append(Instr("LOAD_WEIGHT", m, k=(0, layer.k_out), c=(0, layer.dims[Dim.C])))
    steps = [(i, j) for i in range(int(rows.npos[0])) for j in range(int(cols.npos[0]))]
    if mapping.direction is Direction.COLS:
        steps = sorted(steps, key=lambda ij: (ij[1], ij[0]))
    if mapping.chunk_outer:
        out.extend(_chunk_outer(group, layers, mapping, rows, cols, steps))
        return FusedProgram(group, arch, mapping, layers, tuple(out))
    for n in _parts(0, last.n, mapping.tile_n):
        for t in range(len(steps)):
            regions = _step_head(group, layers, mapping, rows, cols, steps, t, n, out)
            out.extend(_step(layers, mapping, group, n, regions))
            out.append(Instr("STEP"))
    return FusedProgram(group, arch, mapping, layers, tuple(out))


def _step_head(group: FusedGroup, layers: tuple[Layer, ...], mapping: FusedMapping, rows: AxisTiles,
               cols: AxisTiles, steps: list[tuple[int, int]], t: int, n: Range, out: list[Instr]
               ) -> list[tuple[Range, Range]]:
    """Append step ``t``'s DRAM input loads (the first layer's window and merging layers' DRAM inputs:
    whole windows, or their new parts with reuse buffers) and, with reuse buffers, the KEEP marks of
    what later steps of the batch tile read; return every layer's output region of the step."""
    reuse = mapping.overlap is not Overlap.RECOMPUTE
    i, j = steps[t]
    for m in range(len(layers)):
        if m == 0 or group.sides[m]:
            lo_r, lo_c = (rows.new_in_lo(m), cols.new_in_lo(m)) if reuse else (rows.in_lo[m], cols.in_lo[m])
            box_r = (int(lo_r[0, i]), int(rows.in_hi[m][0, i]))
            box_c = (int(lo_c[0, j]), int(cols.in_hi[m][0, j]))
            if box_r[1] > box_r[0] and box_c[1] > box_c[0]:
                if m == 0:
                    out.append(Instr("LOAD_INPUT", 0, n=n, c=(0, layers[0].c_in), rows=box_r, cols=box_c))
                out.extend(Instr("LOAD_SIDE", m, n=n, c=(s.offset, s.offset + s.channels), rows=box_r,
                                 cols=box_c) for s in group.sides[m])
    if reuse:  # keep what a later step of this batch tile reads: the maps' windows ahead
        for m in range(len(layers)):
            for r_rng, c_rng in _ahead(rows, cols, m, steps[t + 1:]):
                out.append(Instr("KEEP", m, n=n, rows=r_rng, cols=c_rng))
    regions = []
    for m in range(len(layers)):
        lo_r = rows.new_lo[m] if reuse else rows.out_lo[m]
        lo_c = cols.new_lo[m] if reuse else cols.out_lo[m]
        regions.append(((int(lo_r[0, i]), int(rows.out_hi[m][0, i])), (int(lo_c[0, j]), int(cols.out_hi[m][0, j]))))
    return regions


def _chunk_outer(group: FusedGroup, layers: tuple[Layer, ...], mapping: FusedMapping, rows: AxisTiles,
                 cols: AxisTiles, steps: list[tuple[int, int]]) -> list[Instr]:
    """Ye et al.'s wr2lv2 order (Fig. 4c) for a two-layer group: per chunk of the intermediate map,
    its streamed weights of both layers once (a resident layer's weights are loaded once before the
    chunk loop and kept, as everywhere else), then every tile step (input window or its new part,
    the chunk, the consumer's accumulation into the whole-map partial sums); outputs stored during
    the last chunk."""
    first, second = layers
    out: list[Instr] = []
    chunks = _parts(0, first.k_out, mapping.chunk[0])
    streamed = [x.has_weights and not mapping.resident[m] for m, x in enumerate(layers)]
    for k in chunks:  # resident weights were loaded once before the chunk loop and stay
        k2, c2 = group.consumer_part(0, k)  # what of the consumer the chunk feeds (its groups)
        if streamed[0]:
            out.append(Instr("LOAD_WEIGHT", 0, k=k, c=(0, first.dims[Dim.C])))
        if streamed[1]:
            out.append(Instr("LOAD_WEIGHT", 1, k=k2, c=c2))
        for n in _parts(0, second.n, mapping.tile_n):
            for t in range(len(steps)):
                regs = _step_head(group, layers, mapping, rows, cols, steps, t, n, out)
                live = [r[1] > r[0] and c[1] > c[0] for r, c in regs]
                if live[0]:
                    out.append(Instr("COMPUTE", 0, n=n, k=k, c=(0, first.dims[Dim.C]), rows=regs[0][0],
                                     cols=regs[0][1]))
                if live[1]:
                    out.append(Instr("COMPUTE", 1, n=n, k=k2, c=c2, rows=regs[1][0], cols=regs[1][1]))
                out.append(Instr("DROP", 1, n=n, k=k2, c=c2))
                if c2[1] == second.dims[Dim.C] and live[1]:  # the chunk completes its groups' outputs
                    out.append(Instr("STORE", 1, n=n, k=k2, rows=regs[1][0], cols=regs[1][1]))
                out.append(Instr("STEP"))
        out.extend(Instr("FREE_WEIGHT", m) for m in range(2) if streamed[m])
    return out


def _ahead(rows: AxisTiles, cols: AxisTiles, m: int, later: list[tuple[int, int]]) -> list[tuple[Range, Range]]:
    """Boxes of layer ``m``'s input map that the ``later`` steps read (one box per later step row)."""
    boxes: dict[int, Range] = {}
    for i, j in later:
        lo, hi = int(cols.newin_lo[m][0, j]), int(cols.newin_hi[m][0, j])
        old = boxes.get(i)
        boxes[i] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return [((int(rows.newin_lo[m][0, i]), int(rows.newin_hi[m][0, i])), c) for i, c in boxes.items()]


def _step(layers: tuple[Layer, ...], mapping: FusedMapping, group: FusedGroup, n: Range,
          regions: list[tuple[Range, Range]]) -> list[Instr]:
    """Weight loads, computes and stores of every layer for one step (chunked maps interleaved:
    the producer's chunk, then the consumer's accumulation over it)."""
    out: list[Instr] = []
    for m, layer in enumerate(layers):
        if m > 0 and mapping.chunk[m - 1] < layers[m - 1].k_out:
            continue  # emitted with its producer
        reg_r, reg_c = regions[m]
        empty = reg_r[1] <= reg_r[0] or reg_c[1] <= reg_c[0]
        streamed = layer.has_weights and not mapping.resident[m]
        last = m == len(layers) - 1
        tile_k = min(mapping.tile_k, layer.k_out)
        for k in _parts(0, layer.k_out, mapping.out_step(group, m)):
            if streamed:
                out.append(Instr("LOAD_WEIGHT", m, k=k, c=(0, layer.dims[Dim.C])))
            if not empty:
                out.append(Instr("COMPUTE", m, n=n, k=k, c=(0, layer.dims[Dim.C]), rows=reg_r, cols=reg_c))
                # The output leaves in tile_k boxes (the model's K loop), however many filters a
                # streamed layer computes at a time: stored once the box's last filter is done.
                k_box = (k[1] - 1) // tile_k * tile_k
                if last and k[1] == min(k_box + tile_k, layer.k_out):
                    out.append(Instr("STORE", m, n=n, k=(k_box, k[1]), rows=reg_r, cols=reg_c))
            if not last and mapping.chunk[m] < layer.k_out:  # the consumer takes this chunk at once
                nxt = layers[m + 1]
                c_r, c_c = regions[m + 1]
                k2, c2 = group.consumer_part(m, k)  # all its filters, or those of the chunk's groups
                if nxt.has_weights and not mapping.resident[m + 1]:
                    out.append(Instr("LOAD_WEIGHT", m + 1, k=k2, c=c2))
                if c_r[1] > c_r[0] and c_c[1] > c_c[0]:
                    out.append(Instr("COMPUTE", m + 1, n=n, k=k2, c=c2, rows=c_r, cols=c_c))
                out.append(Instr("DROP", m + 1, n=n, k=k2, c=c2))
                if m + 1 == len(layers) - 1 and c2[1] == nxt.dims[Dim.C] and c_r[1] > c_r[0] and c_c[1] > c_c[0]:
                    out.append(Instr("STORE", m + 1, n=n, k=k2, rows=c_r, cols=c_c))
    return out
