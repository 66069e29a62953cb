"""Assemble a fused group's costs (DRAM bytes and bursts per operand, on-chip footprint, compute,
energy, latency) from a :class:`~tileplan.fusion.cost.GroupModel` for one choice of the discrete
parameters, vectorised over the model's (tile_p, tile_q) candidates.

Units: bytes, cycles, pJ. Energy is computed the way the single-layer model does it (access counts
times unit prices): MACs (recomputation included) and three register-file accesses per MAC, on-chip
buffer accesses (DRAM fills plus what the PE array reads and writes), NoC bytes, DRAM bytes.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch
from tileplan.dims import Dim, Operand
from tileplan.fusion.cost import FusedCost, GroupModel, _ceil, box_bursts, parts
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap, out_step

_IN, _W, _OUT = Operand.INPUT, Operand.WEIGHT, Operand.OUTPUT


def weight_terms(gm: GroupModel, m: int, resident: bool, chunk: tuple[int, ...], tile_k: int,
                 steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """DRAM bytes (n,), bursts (n,) and on-chip bytes of layer ``m``'s weights.

    Resident weights are loaded once; streamed ones every step in pieces: ``chunk`` filters for the
    producer of a chunked map, ``tile_k`` filters for a last layer with K chunks, the chunk's input
    channels of every filter for the consumer of a chunked map, else one filter at a time.
    """
    layer = gm.layers[m]
    b = gm.problems[m].precision.weight
    burst = gm.arch.dram.burst_bytes
    total = layer.elements(_W)
    if not layer.has_weights:
        zero = np.zeros(gm.n)
        return zero, zero, 0
    if resident:
        return np.full(gm.n, float(total * b)), np.full(gm.n, float(_ceil(total * b, burst))), total * b
    kt, c, rs = layer.k_out, layer.dims[Dim.C], layer.r * layer.s
    if m > 0 and chunk[m - 1] < layer.c_in:
        pieces = sum(cnt * kt * int(_ceil(ce * rs * b, burst)) for ce, cnt in parts(c, chunk[m - 1]))
        piece_bytes = kt * min(chunk[m - 1], c) * rs * b
    else:
        streamed = tuple(i != m for i in range(len(gm.layers)))  # this layer's weights streamed
        f = out_step(gm.group, m, chunk, tile_k, streamed)
        pieces = sum(cnt * int(_ceil(fe * c * rs * b, burst)) for fe, cnt in parts(kt, f))
        piece_bytes = min(f, kt) * c * rs * b
    return steps * float(total * b), steps * float(pieces), piece_bytes


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
    layer = gm.layers[m]
    oy, ox = gm.rows_geom(m).overlap, gm.cols_geom(m).overlap
    tiy, tix = gm.max_in[m]
    bands = (gm.rows.npos > 1).astype(np.int64)
    steps_q = (gm.cols.npos > 1).astype(np.int64)
    scale = min(tile_n, layer.n) * layer.c_in * gm.problems[m].precision.input
    rows = gm.pair(bands * oy, np.maximum(layer.w - tix, 0))
    cols = gm.pair(np.maximum(layer.h - tiy, 0), steps_q * ox)
    if overlap is Overlap.ALWANI:
        rows = rows + gm.pair(np.maximum(tiy - oy, 0), steps_q * ox)
        cols = cols + gm.pair(bands * oy, np.maximum(tix - ox, 0))
    return rows * float(scale), cols * float(scale)


def assemble(gm: GroupModel, *, tile_n: int, tile_k: int, overlap: Overlap, resident: tuple[bool, ...],
             chunk: tuple[int, ...], direction: Direction | None = None,
             unroll: tuple[tuple[int, ...], ...] | None = None,
             chunk_outer: bool = False) -> tuple[FusedCost, list[np.ndarray]]:
    """Costs of every (tile_p, tile_q) candidate of ``gm`` under the given discrete choices, and per
    layer the index of the unroll option used (into ``gm.unroll_options``; -1 when given).

    ``chunk_outer`` (two-layer groups with a chunked map): the same reload rule with the chunk loop
    outermost -- the first layer's input is read once per chunk, every weight piece once in all, and
    the last layer's whole output map is held on chip as partial sums."""
    layers, probs, arch = gm.layers, gm.problems, gm.arch
    nl, n = len(layers), gm.n
    first, last = layers[0], layers[-1]
    burst = arch.dram.burst_bytes
    reuse = overlap is not Overlap.RECOMPUTE
    steps = gm.steps(tile_n)
    nparts = parts(last.n, tile_n)
    tn = min(tile_n, last.n)
    kt_last = last.k_out
    k_trips = -(-kt_last // min(tile_k, kt_last))
    dbl = 2 if arch.double_buffering else 1
    mem = probs[0].memory_of_operand
    footprint = np.zeros((n, len(arch.memories)))  # on-chip bytes held once
    fp_dbl = np.zeros((n, len(arch.memories)))  # on-chip bytes double-buffered when the arch is
    read = np.zeros((n, 3))
    bursts = np.zeros((n, 3))
    # First layer's input: the halo'd window every step, or only its new part with reuse buffers.
    b_in = probs[0].precision.input
    hr, hq = gm.hist(0, "fetch" if reuse else "in", 0), gm.hist(1, "fetch" if reuse else "in", 0)
    passes = -(-first.k_out // chunk[0]) if chunk_outer else 1  # input reads: once per chunk pass
    read[:, _IN] = passes * last.n * first.c_in * gm.sum2(hr, hq, gm.ext(hr), gm.ext(hq)) * b_in
    bursts[:, _IN] = passes * gm.cached(("in_bursts", reuse, tile_n), lambda: np.sum([
        cn * gm.grid(hr, hq, box_bursts((first.n, first.c_in, first.h, first.w), en, first.c_in, b_in, burst))
        for en, cn in nparts], axis=0))
    rin, cin = gm.max_in[0]
    fp_dbl[:, mem[_IN]] += tn * first.c_in * b_in * gm.pair(rin, cin)
    # Last layer's output: every element written once, tile by tile (K chunks innermost).
    b_out = probs[-1].precision.output
    write = np.full(n, float(last.elements(_OUT) * b_out))
    hr, hq = gm.hist(0, "out", nl - 1), gm.hist(1, "out", nl - 1)
    bursts[:, _OUT] = gm.cached(("out_bursts", tile_n, tile_k), lambda: np.sum([
        cn * ck * gm.grid(hr, hq, box_bursts((last.n, kt_last, last.p, last.q), en, ek, b_out, burst))
        for (en, cn), (ek, ck) in product(nparts, parts(kt_last, tile_k))], axis=0))
    rout, cout = gm.max_out
    if chunk_outer:  # partial sums of the whole output map wait on chip for the last chunk
        fp_dbl[:, mem[_OUT]] += float(last.elements(_OUT) * probs[-1].precision.psum)
    else:
        fp_dbl[:, mem[_OUT]] += tn * min(tile_k, kt_last) * probs[-1].precision.psum * gm.pair(rout, cout)
    # Per layer: weights, intermediate windows, reuse buffers, compute and array traffic.
    compute = np.zeros(n)
    executed = np.zeros(n)
    reuse_rows, reuse_cols = np.zeros(n), np.zeros(n)
    choices: list[np.ndarray] = []
    acc = np.zeros((n, 3))  # bytes the PE array reads/writes per operand memory role
    noc = np.zeros(n)
    for m, (layer, prob) in enumerate(zip(layers, probs, strict=True)):
        wb, wbursts, wfp = weight_terms(gm, m, resident[m], chunk, tile_k,
                                        np.ones_like(steps) if chunk_outer else steps)
        read[:, _W] += wb
        bursts[:, _W] += wbursts
        fp_dbl[:, prob.memory_of_operand[_W]] += wfp
        chans_in = chunk[m - 1] if m > 0 else layer.c_in
        if m > 0:
            r, c = gm.max_in[m]
            footprint[:, mem[_IN]] += tn * chans_in * prob.precision.input * gm.pair(r, c)
        rr, rc = reuse_buffers(gm, m, overlap, tile_n)
        reuse_rows += rr
        reuse_cols += rc
        c_chunk = chans_in if (m > 0 and chans_in < layer.c_in) else layer.dims[Dim.C]
        step = out_step(gm.group, m, chunk, tile_k, resident)
        g_tile = 1 if step < layer.k_out else layer.groups
        k_tile = step if layer.groups == 1 else layer.dims[Dim.K]
        cyc, pick = gm.compute_cycles(m, overlap, tile_n, c_chunk, (g_tile, k_tile),
                                      None if unroll is None else unroll[m])
        compute += cyc
        choices.append(pick)
        kind = "new" if reuse else "out"
        outs = last.n * gm.sum2(gm.hist(0, kind, m), gm.hist(1, kind, m), gm.ext(gm.hist(0, kind, m)),
                                gm.ext(gm.hist(1, kind, m)))
        executed += outs * (layer.macs // (layer.n * layer.p * layer.q))
        kin = "newin" if reuse else "in"
        ins = last.n * layer.c_in * gm.sum2(gm.hist(0, kin, m), gm.hist(1, kin, m), gm.ext(gm.hist(0, kin, m)),
                                            gm.ext(gm.hist(1, kin, m)))
        in_step = ins * (k_trips if m == nl - 1 else 1)
        w_step = steps * float(layer.elements(_W))
        out_elems = outs * layer.k_out * (-(-layer.dims[Dim.C] // c_chunk))
        psum = prob.precision.psum
        acc[:, _IN] += in_step * prob.precision.input * (passes if m == 0 else 1)
        acc[:, _W] += w_step * prob.precision.weight
        acc[:, _OUT if m == nl - 1 else _IN] += 2 * out_elems * psum
        noc += in_step * prob.precision.input * (passes if m == 0 else 1) + w_step * prob.precision.weight + \
            out_elems * psum
    if direction is None:
        use_cols = reuse_cols < reuse_rows
    else:
        use_cols = np.full(n, direction is Direction.COLS)
    reuse_bytes = np.where(use_cols, reuse_cols, reuse_rows)
    footprint[:, mem[_IN]] += reuse_bytes
    need = footprint + dbl * fp_dbl
    feasible = np.ones(n, dtype=bool)
    for i, capacity in enumerate(probs[0].capacity_bytes):
        feasible &= need[:, i] <= capacity
    cost = _finish(gm, read, write, bursts, footprint + fp_dbl, feasible, compute, executed, acc, noc)
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
    noc_cycles = noc_bytes / bw if bw is not None else np.zeros(gm.n)
    onchip = np.maximum(compute, noc_cycles)
    latency = np.maximum(onchip, dram_cycles) if arch.overlap else onchip + dram_cycles
    fills = read.copy()
    fills[:, _OUT] += write
    e_mem = [mem.energy_pj_per_byte for mem in arch.memories]
    energy = np.zeros((gm.n, 5))
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
    mapping.check(group)
    gm = GroupModel(group, arch, np.array([mapping.tile_p]), np.array([mapping.tile_q]))
    cost, _ = assemble(gm, tile_n=mapping.tile_n, tile_k=mapping.tile_k, overlap=mapping.overlap,
                       resident=mapping.resident, chunk=mapping.chunk, direction=mapping.direction,
                       unroll=mapping.unroll, chunk_outer=mapping.chunk_outer)
    return cost
