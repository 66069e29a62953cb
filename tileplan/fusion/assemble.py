"""Assemble a fused group's costs (DRAM bytes and bursts per operand, on-chip footprint, compute,
energy, latency) from a :class:`~tileplan.fusion.cost.GroupModel` for one choice of the discrete
parameters, vectorised over the model's (tile_p, tile_q) candidates.

Units: bytes, cycles, pJ. Energy is computed the way the single-layer model does it (access counts
times unit prices): MACs (recomputation included) and three register-file accesses per MAC, on-chip
buffer accesses (DRAM fills plus what the PE array reads and writes), NoC bytes, DRAM bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch
from tileplan.dims import Dim, Operand
from tileplan.errors import MappingError
from tileplan.fusion.cost import FusedCost, GroupModel, Selection, _ceil, box_bursts, parts
from tileplan.fusion.group import (
    Direction,
    FusedGroup,
    FusedMapping,
    Overlap,
    Side,
    out_step,
    stack_channels,
    store_step,
)
from tileplan.workload.layer import Layer, OpKind

_IN, _W, _OUT = Operand.INPUT, Operand.WEIGHT, Operand.OUTPUT


def weight_terms(gm: GroupModel, m: int, resident: bool, chunk: tuple[int, ...], tile_k: int,
                 steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """DRAM bytes (n,), bursts (n,) and on-chip bytes of layer ``m``'s weights (``steps``: the (n,)
    tile steps of the candidates covered).

    Resident weights are loaded once; streamed ones every step in pieces: ``chunk`` filters for the
    producer of a chunked map, ``tile_k`` filters for a last layer with K chunks, the chunk's input
    channels of every filter it feeds for the consumer of a chunked map (a grouped consumer: the
    filters of the chunk's group; whole groups: their filters, one contiguous block), else one filter
    at a time.
    """
    n = len(steps)
    if not gm.layers[m].has_weights:
        zero = np.zeros(n)
        return zero, zero, 0
    size, pieces, piece_bytes = gm.memo(("weights", m, resident, chunk, tile_k),
                                        lambda: _weight_scalars(gm, m, resident, chunk, tile_k))
    if resident:
        return np.full(n, size), np.full(n, pieces), piece_bytes
    return steps * size, steps * pieces, piece_bytes


def _weight_scalars(gm: GroupModel, m: int, resident: bool, chunk: tuple[int, ...], tile_k: int
                    ) -> tuple[float, float, int]:
    """Layer ``m``'s weights: bytes and bursts of one load (all of them, or every piece once when
    streamed) and the on-chip bytes (all of them, or one piece)."""
    layer = gm.layers[m]
    b = gm.problems[m].precision.weight
    burst = gm.arch.dram.burst_bytes
    total = layer.elements(_W)
    if resident:
        return float(total * b), float(_ceil(total * b, burst)), total * b
    kt, c, rs = layer.k_out, layer.dims[Dim.C], layer.r * layer.s
    if m > 0 and gm.group.whole_groups(m - 1, chunk[m - 1]):  # whole groups: one contiguous block per chunk
        block = chunk[m - 1] // c * layer.dims[Dim.K] * c * rs * b
        pieces = layer.groups // (chunk[m - 1] // c) * int(_ceil(block, burst))
        piece_bytes = block
    elif m > 0 and chunk[m - 1] < gm.layers[m - 1].k_out:  # the chunk's channels of every filter it feeds
        pieces = sum(cnt * kt * int(_ceil(ce * rs * b, burst)) for ce, cnt in parts(c, chunk[m - 1]))
        piece_bytes = layer.dims[Dim.K] * min(chunk[m - 1], c) * rs * b
    else:
        streamed = tuple(i != m for i in range(len(gm.layers)))  # this layer's weights streamed
        f = out_step(gm.group, m, chunk, tile_k, streamed)
        pieces = sum(cnt * int(_ceil(fe * c * rs * b, burst)) for fe, cnt in parts(kt, f))
        piece_bytes = min(f, kt) * c * rs * b
    return float(total * b), float(pieces), piece_bytes


def reuse_buffers(gm: GroupModel, m: int, overlap: Overlap, tile_n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n,) reuse-buffer bytes of layer ``m``'s input map for rows and for cols processing.

    HW-Flow-Fusion Eq. 8: horizontal (``rows``) processing keeps the O_y = N_ky - S_y overlapping rows
    of the rest of the map, ``(N_ix - T_ix) * O_y * N_if``; Alwani et al. (``alwani``) also keep the
    sequential overlap, Eq. 9 ``(T_iy - O_y) * O_x * N_if``. ``cols`` is the transpose. A buffer is
    needed only when there is a next band (or next tile) to reuse it.
    """
    if overlap is Overlap.RECOMPUTE:
        zero = np.zeros(gm.n)
        return zero, zero

    def make(axis: int) -> np.ndarray:
        layer = gm.layers[m]
        oy, ox = gm.rows_geom(m).overlap, gm.cols_geom(m).overlap
        tiy, tix = gm.max_in[m]
        bands = (gm.rows.npos > 1).astype(np.int64)
        steps_q = (gm.cols.npos > 1).astype(np.int64)
        scale = min(tile_n, layer.n) * layer.c_in * gm.problems[m].precision.input
        if axis == 0:
            rows = gm.pair(bands * oy, np.maximum(layer.w - tix, 0))
            if overlap is Overlap.ALWANI:
                rows = rows + gm.pair(np.maximum(tiy - oy, 0), steps_q * ox)
            return rows * float(scale)
        cols = gm.pair(np.maximum(layer.h - tiy, 0), steps_q * ox)
        if overlap is Overlap.ALWANI:
            cols = cols + gm.pair(bands * oy, np.maximum(tix - ox, 0))
        return cols * float(scale)

    key = ("reuse", m, overlap.value, min(tile_n, gm.layers[m].n))
    return gm.cached((*key, 0), lambda: make(0)), gm.cached((*key, 1), lambda: make(1))


@dataclass(frozen=True)
class Choice:
    """The discrete parameters of a fused mapping that one assembly fixes (the tile pair varies)."""

    tile_n: int
    tile_k: int
    overlap: Overlap
    resident: tuple[bool, ...]
    chunk: tuple[int, ...]
    chunk_outer: bool = False  # the chunk loop outside the tile steps (``FusedMapping.chunk_outer``)

    def passes(self, gm: GroupModel) -> int:
        """How often the first layer's input is read: once per chunk with the chunk loop outermost."""
        return -(-gm.layers[0].k_out // self.chunk[0]) if self.chunk_outer else 1


def compute_args(gm: GroupModel, m: int, chunk: tuple[int, ...], tile_k: int,
                 resident: tuple[bool, ...]) -> tuple[int, tuple[int, int]]:
    """Input channels layer ``m`` reduces per pass (a chunk of a chunked input map, else all) and the
    (G, K) tile it computes at a time (``out_step``): the arguments of ``GroupModel.compute_cycles``."""
    layer = gm.layers[m]
    chans_in = chunk[m - 1] if m > 0 else layer.c_in
    c_chunk = chans_in if (m > 0 and chans_in < gm.layers[m - 1].k_out) else layer.dims[Dim.C]
    step = out_step(gm.group, m, chunk, tile_k, resident)
    g_tile = step // layer.dims[Dim.K] if layer.groups > 1 else 1
    k_tile = step if layer.groups == 1 else layer.dims[Dim.K]
    return c_chunk, (g_tile, k_tile)


def side_tensor(layer: Layer, side: Side) -> tuple[tuple[int, int, int, int], int]:
    """The DRAM tensor (N, C, H, W) a merging layer's ``side`` input is read from and the side's first
    channel in it: a concat's producers write into their slice of the concat's tensor, an add's
    inputs are tensors of their own."""
    if layer.op is OpKind.CONCAT:
        return (layer.n, layer.c_in, layer.h, layer.w), side.offset
    return (layer.n, side.channels, layer.h, layer.w), 0


def side_traffic(gm: GroupModel, sel: Selection, tile_n: int, reuse: bool) -> tuple[np.ndarray, np.ndarray]:
    """(n,) DRAM read bytes and bursts of every merging layer's DRAM inputs (``Side``): per tile step
    the layer's input window of their channels (only its new part with reuse buffers), as the first
    layer's input is read."""
    kind = "fetch" if reuse else "in"
    nbytes, bursts = np.zeros(sel.n), np.zeros(sel.n)
    burst = gm.arch.dram.burst_bytes
    for m, all_sides in enumerate(gm.group.sides):
        sides = tuple(s for s in all_sides if not s.on_chip)  # a block group's on-chip inputs cost no DRAM
        if not sides:
            continue
        layer, b_in = gm.layers[m], gm.problems[m].precision.input
        nbytes += gm.layers[-1].n * sum(s.channels for s in sides) * sel.take(gm.volume(kind, m)) * b_in

        def make(m: int = m, layer: Layer = layer, sides: tuple[Side, ...] = sides, b_in: int = b_in) -> np.ndarray:
            hr, hq = gm.hist(0, kind, m), gm.hist(1, kind, m)
            return np.sum([cn * gm.grid(hr, hq, box_bursts(side_tensor(layer, s)[0], en, s.channels, b_in, burst))
                           for s in sides for en, cn in parts(layer.n, tile_n)], axis=0)
        bursts += sel.take(gm.cached(("side_bursts", m, reuse, tile_n), make))
    return nbytes, bursts


def traffic(gm: GroupModel, sel: Selection, c: Choice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DRAM read bytes (n, 3), write bytes (n,) and bursts (n, 3) per operand of the candidates ``sel``."""
    tile_n, tile_k, overlap, resident, chunk = c.tile_n, c.tile_k, c.overlap, c.resident, c.chunk
    layers, probs, arch = gm.layers, gm.problems, gm.arch
    first, last = layers[0], layers[-1]
    n = sel.n
    burst = arch.dram.burst_bytes
    reuse = overlap is not Overlap.RECOMPUTE
    nparts = parts(last.n, tile_n)
    kt_last = last.k_out
    read = np.zeros((n, 3))
    bursts = np.zeros((n, 3))
    # First layer's input: the halo'd window every step, or only its new part with reuse buffers (a
    # block group's input: the hull of its readers' windows, read once for all of them).
    b_in = probs[0].precision.input
    kind0, c_x = gm.input_kind(reuse), gm.group.input_channels()
    hr, hq = gm.hist(0, kind0, 0), gm.hist(1, kind0, 0)
    passes = c.passes(gm)  # input reads: once per chunk pass with the chunk loop outermost
    read[:, _IN] = passes * last.n * c_x * sel.take(gm.volume(kind0, 0)) * b_in
    bursts[:, _IN] = passes * sel.take(gm.cached(("in_bursts", reuse, tile_n), lambda: np.sum([
        cn * gm.grid(hr, hq, box_bursts((first.n, c_x, first.h, first.w), en, c_x, b_in, burst))
        for en, cn in nparts], axis=0)))
    # Merging layers' other inputs: their part of the layer's window, like the first layer's input.
    side_bytes, side_bursts = side_traffic(gm, sel, tile_n, reuse)
    read[:, _IN] += side_bytes
    bursts[:, _IN] += side_bursts
    # Last layer's output: every element written once, tile by tile (K chunks innermost; a grouped
    # last layer consuming a chunked map: the groups each chunk completes).
    b_out = probs[-1].precision.output
    write = np.full(n, float(last.elements(_OUT) * b_out))
    ho, hp = gm.hist(0, "out", len(layers) - 1), gm.hist(1, "out", len(layers) - 1)
    store_k = store_step(gm.group, chunk, tile_k, resident)
    bursts[:, _OUT] = sel.take(gm.cached(("out_bursts", tile_n, store_k), lambda: np.sum([
        cn * ck * gm.grid(ho, hp, box_bursts((last.n, kt_last, last.p, last.q), en, ek, b_out, burst))
        for (en, cn), (ek, ck) in product(nparts, parts(kt_last, store_k))], axis=0)))
    steps = sel.steps(tile_n)
    if c.chunk_outer:  # every weight piece is loaded once and kept while the tile steps run
        steps = np.ones_like(steps)
    for m in range(len(layers)):
        wb, wbursts, _ = weight_terms(gm, m, resident[m], chunk, tile_k, steps)
        read[:, _W] += wb
        bursts[:, _W] += wbursts
    return read, write, bursts


def weight_footprint(gm: GroupModel, c: Choice) -> np.ndarray:
    """(M,) on-chip bytes per memory of every layer's weights (all of them when resident, else the
    streamed piece), double-buffered when the arch is."""
    def make() -> np.ndarray:
        out = np.zeros(len(gm.arch.memories))
        for m, prob in enumerate(gm.problems):
            out[prob.memory_of_operand[_W]] += weight_terms(gm, m, c.resident[m], c.chunk, c.tile_k, np.zeros(0))[2]
        return out
    return gm.memo(("weight_footprint", c.resident, c.chunk, c.tile_k), make)


def footprint(gm: GroupModel, sel: Selection, c: Choice, direction: Direction | None = None, *,
              weights: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """On-chip bytes of the candidates ``sel`` per memory, held once (n, M) and double-buffered when
    the arch is (n, M); the reuse-buffer bytes (n,) and the direction used (n,) bool, True = cols
    (the one with the smaller reuse buffer when ``direction`` is None). ``weights=False`` leaves
    out :func:`weight_footprint` (the only part that depends on ``c.resident``).

    A chunked map holds one chunk of the consumer's window in recompute mode; with reuse buffers the
    channels not yet consumed in a step still hold their part of the window computed by earlier
    steps, so the window of every channel is counted (an upper bound, like the reuse buffers)."""
    tile_n, tile_k, overlap, chunk = c.tile_n, c.tile_k, c.overlap, c.chunk
    layers, probs, arch = gm.layers, gm.problems, gm.arch
    last = layers[-1]
    n = sel.n
    tn = min(tile_n, last.n)
    mem = probs[0].memory_of_operand
    held = np.zeros((n, len(arch.memories)))  # on-chip bytes held once
    dbl = np.zeros((n, len(arch.memories)))  # on-chip bytes double-buffered when the arch is
    dbl[:, mem[_IN]] += tn * gm.group.input_channels() * probs[0].precision.input * sel.take(gm.input_area())
    store_k = store_step(gm.group, chunk, tile_k, c.resident)
    if c.chunk_outer and not gm.group.whole_groups(0, chunk[0]):
        # partial sums of the whole output map (of the chunk's group) wait on chip for its last chunk
        dbl[:, mem[_OUT]] += float(last.n * last.p * last.q * store_k * probs[-1].precision.psum)
    else:
        dbl[:, mem[_OUT]] += tn * store_k * probs[-1].precision.psum * sel.take(gm.out_area())
    if weights:
        dbl += weight_footprint(gm, c)
    reuse_rows, reuse_cols = np.zeros(n), np.zeros(n)
    for m, prob in enumerate(probs):
        if m > 0 and not gm.group.is_block:  # a chunk of the window; with reuse buffers every channel's window
            chans = chunk[m - 1] if overlap is Overlap.RECOMPUTE else layers[m - 1].k_out
            held[:, mem[_IN]] += tn * chans * prob.precision.input * sel.take(gm.window_area(m))
        elif m < len(probs) - 1 and gm.group.is_block:  # every on-chip tensor once: its readers' hull window
            held[:, mem[_IN]] += tn * layers[m].k_out * prob.precision.output * sel.take(gm.out_window_area(m))
        if any(not s.on_chip for s in gm.group.sides[m]):  # DRAM inputs of a merging layer, like the first input
            chans = sum(s.channels for s in gm.group.sides[m] if not s.on_chip)
            dbl[:, mem[_IN]] += tn * chans * prob.precision.input * sel.take(gm.window_area(m))
        if overlap is not Overlap.RECOMPUTE:
            rr, rc = reuse_buffers(gm, m, overlap, tile_n)
            reuse_rows += sel.take(rr)
            reuse_cols += sel.take(rc)
    if direction is None:
        use_cols = reuse_cols < reuse_rows
    else:
        use_cols = np.full(n, direction is Direction.COLS)
    reuse_bytes = np.where(use_cols, reuse_cols, reuse_rows)
    held[:, mem[_IN]] += reuse_bytes
    return held, dbl, reuse_bytes, use_cols


def fits(gm: GroupModel, held: np.ndarray, dbl: np.ndarray) -> np.ndarray:
    """(n,) whether the footprint fits every on-chip memory (doubled parts twice on double-buffered archs)."""
    need = held + (2 if gm.arch.double_buffering else 1) * dbl
    feasible = np.ones(len(held), dtype=bool)
    for i, capacity in enumerate(gm.problems[0].capacity_bytes):
        feasible &= need[:, i] <= capacity
    return feasible


def compute(gm: GroupModel, sel: Selection, c: Choice, unroll: tuple[tuple[int, ...], ...] | None = None
            ) -> tuple[np.ndarray, list[np.ndarray]]:
    """(n,) compute cycles of the candidates ``sel`` (layers one after the other) and per layer the
    index of the unroll option used (into ``gm.unroll_options``; -1 when given)."""
    total = np.zeros(sel.n)
    choices: list[np.ndarray] = []
    for m in range(len(gm.layers)):
        c_chunk, gk_tile = compute_args(gm, m, c.chunk, c.tile_k, c.resident)
        cyc, pick = gm.compute_cycles(m, c.overlap, c.tile_n, c_chunk, gk_tile, None if unroll is None else unroll[m])
        total += sel.take(cyc)
        choices.append(sel.take(pick))
    return total, choices


def executed_macs(gm: GroupModel, overlap: Overlap) -> np.ndarray:
    """(n,) MACs executed by every candidate: useful ones plus recomputed overlaps (``recompute``)."""
    def make() -> np.ndarray:
        kind = "out" if overlap is Overlap.RECOMPUTE else "new"
        executed = np.zeros(gm.n)
        for m, layer in enumerate(gm.layers):
            executed += gm.layers[-1].n * gm.volume(kind, m) * (layer.macs // (layer.n * layer.p * layer.q))
        return executed
    return gm.cached(("executed", overlap is Overlap.RECOMPUTE), make)


def assemble(gm: GroupModel, *, tile_n: int, tile_k: int, overlap: Overlap, resident: tuple[bool, ...],
             chunk: tuple[int, ...], direction: Direction | None = None,
             unroll: tuple[tuple[int, ...], ...] | None = None, chunk_outer: bool = False,
             index: np.ndarray | None = None) -> tuple[FusedCost, list[np.ndarray]]:
    """Costs of every (tile_p, tile_q) candidate of ``gm`` (or of the ascending subset ``index``)
    under the given discrete choices, and per layer the index of the unroll option used (into
    ``gm.unroll_options``; -1 when given).

    ``chunk_outer`` (two-layer groups with a chunked map): the same reload rule with the chunk loop
    outermost -- the first layer's input is read once per chunk, every weight piece once in all, and
    the last layer's whole output map is held on chip as partial sums."""
    layers, probs = gm.layers, gm.problems
    nl = len(layers)
    last = layers[-1]
    sel = Selection(gm, index)
    n = sel.n
    reuse = overlap is not Overlap.RECOMPUTE
    choice = Choice(tile_n, tile_k, Overlap(overlap), tuple(resident), tuple(chunk), chunk_outer)
    passes = choice.passes(gm)
    read, write, bursts = traffic(gm, sel, choice)
    held, dbl, reuse_bytes, use_cols = footprint(gm, sel, choice, direction)
    feasible = fits(gm, held, dbl)
    cycles, choices = compute(gm, sel, choice, unroll)
    executed = sel.take(executed_macs(gm, overlap))
    # What the PE array reads and writes per operand memory role, and the NoC bytes.
    steps = sel.steps(tile_n)
    k_trips = -(-last.k_out // min(tile_k, last.k_out))
    acc = np.zeros((n, 3))
    noc = np.zeros(n)
    for m, (layer, prob) in enumerate(zip(layers, probs, strict=True)):
        c_chunk, _ = compute_args(gm, m, chunk, tile_k, resident)
        outs = last.n * sel.take(gm.volume("new" if reuse else "out", m))
        ins = last.n * stack_channels(layer) * sel.take(gm.volume("newin" if reuse else "in", m))
        in_step = ins * (k_trips if m == nl - 1 else 1)
        w_step = steps * float(layer.elements(_W))
        out_elems = outs * layer.k_out * (-(-layer.dims[Dim.C] // c_chunk))
        psum = prob.precision.psum
        acc[:, _IN] += in_step * prob.precision.input * (passes if m == 0 else 1)
        acc[:, _W] += w_step * prob.precision.weight
        acc[:, _OUT if m == nl - 1 else _IN] += 2 * out_elems * psum
        noc += in_step * prob.precision.input * (passes if m == 0 else 1) + w_step * prob.precision.weight + \
            out_elems * psum
    cost = _finish(gm, read, write, bursts, held + dbl, feasible, cycles, executed, acc, noc)
    return FusedCost(cost, executed, reuse_bytes, use_cols.astype(np.int64)), choices


def _finish(gm: GroupModel, read: np.ndarray, write: np.ndarray, bursts: np.ndarray, footprint: np.ndarray,
            feasible: np.ndarray, compute: np.ndarray, executed: np.ndarray, acc: np.ndarray,
            noc_bytes: np.ndarray) -> CostBatch:
    """Cycles and energy from traffic and access counts, as the single-layer model combines them."""
    arch, prob = gm.arch, gm.problems[0]
    total = read[:, 0] + read[:, 1] + read[:, 2] + write  # column adds: much faster than sum(axis=1)
    dram_cycles = total / arch.dram_bytes_per_cycle + (bursts[:, 0] + bursts[:, 1] + bursts[:, 2]) * \
        arch.burst_latency_cycles
    bw = arch.noc_bytes_per_cycle
    noc_cycles = noc_bytes / bw if bw is not None else np.zeros(len(compute))
    onchip = np.maximum(compute, noc_cycles)
    latency = np.maximum(onchip, dram_cycles) if arch.overlap else onchip + dram_cycles
    fills = read.copy()
    fills[:, _OUT] += write
    e_mem = [mem.energy_pj_per_byte for mem in arch.memories]
    energy = np.zeros((len(compute), 5))
    energy[:, 0] = executed * arch.energy.mac_pj
    energy[:, 1] = 3 * executed * arch.register_file.energy_pj_per_access
    for op in Operand:
        energy[:, 2] += (fills[:, op] + acc[:, op]) * e_mem[prob.memory_of_operand[op]]
    energy[:, 3] = noc_bytes * arch.noc.energy_pj_per_byte
    energy[:, 4] = total * arch.dram.energy_pj_per_byte
    inf = np.where(feasible, 0.0, np.inf)
    return CostBatch(feasible=feasible, footprint_bytes=footprint.astype(np.int64), dram_read_bytes=read,
                     dram_write_bytes=write, dram_bursts=bursts, dram_cycles=dram_cycles + inf,
                     compute_cycles=compute + inf, noc_cycles=noc_cycles + inf, latency_cycles=latency + inf,
                     energy_breakdown_pj=energy + inf[:, None], macs=gm.group.macs,
                     peak_macs_per_cycle=arch.peak_macs_per_cycle(prob.precision.input))


def evaluate_fused(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedCost:
    """Costs of one fused mapping of ``group`` on ``arch`` (a batch of one)."""
    if group.transformer is not None:
        raise MappingError(f"{group.name} is an attention or MLP block: fusion.transformer_cost.evaluate_transformer "
                           f"costs it")
    mapping.check(group)
    gm = GroupModel(group, arch, np.array([mapping.tile_p]), np.array([mapping.tile_q]))
    cost, _ = assemble(gm, tile_n=mapping.tile_n, tile_k=mapping.tile_k, overlap=mapping.overlap,
                       resident=mapping.resident, chunk=mapping.chunk, direction=mapping.direction,
                       unroll=mapping.unroll, chunk_outer=mapping.chunk_outer)
    return cost
