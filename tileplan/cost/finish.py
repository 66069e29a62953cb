"""Stage three of the cost model: a loop order applied to the kernel's per-shape integers, and the
chip totals assembled into a ``CostBatch``.

:func:`finish` takes stage two's per-core-shape integers (``cost.kernel``: bytes and bursts of one
sweep of each operand's tiles, compute-step sums, compute cycles) and a loop order, and returns the
chip totals: DRAM bytes and bursts from the reload factors of the order (:func:`reload`), DRAM,
compute and NoC cycles, latency (overlapped or not), and energy per component. It is elementwise like
the kernel (numpy arrays or, compiled inside ``kernel.model_loop``, scalars). :func:`objective_value`
is what a search minimises; :func:`cost_batch` is the one place a ``CostBatch`` is assembled from
these values, for both the vectorised and the compiled path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileplan.cost.batch import CostBatch
from tileplan.cost.flat import (
    D_TRIPS,
    DD_SHAPE,
    F_BURSTS,
    F_PSUM,
    F_PSUM_BURSTS,
    F_STEP,
    F_SWEEP,
    N_FIELDS,
    maximum,
    pick,
    select,
)


def masks(K: Any, hm0: Any, hm1: Any, hm2: Any) -> tuple[Any, Any, Any]:
    """Bitmasks of the dimensions that index each operand and are not hoisted (for :func:`reload`)."""
    return K.relmask[0] & ~hm0, K.relmask[1] & ~hm1, K.relmask[2] & ~hm2


def reload(o: Any, dd: Any, b: Any, m0: Any, m1: Any, m2: Any) -> tuple[Any, Any, Any]:
    """How many times each operand's tiles are swept on one core shape (output: visits of each
    output box), for the three operands at once.

    ``o[p]`` is the dimension at loop position ``p`` (outermost first), the shape's trip counts are
    ``dd[b + d]`` (read with :func:`pick`), ``m0..m2`` bitmasks of the dimensions that index each
    operand and are not hoisted. With q the innermost position over such a dimension that has more
    than one trip, the factor is the product of the trips of the other loops at or outside q (1 when
    there is no such q)."""
    run0 = 1
    run1 = 1
    run2 = 1
    out0 = 1
    out1 = 1
    out2 = 1
    for p in range(8):
        d = o[p]
        n = pick(dd, b, d)
        big = n > 1
        i0 = (m0 >> d) & 1
        i1 = (m1 >> d) & 1
        i2 = (m2 >> d) & 1
        run0 = run0 * select(i0, 1, n)
        run1 = run1 * select(i1, 1, n)
        run2 = run2 * select(i2, 1, n)
        out0 = select(i0 & big, run0, out0)
        out1 = select(i1 & big, run1, out1)
        out2 = select(i2 & big, run2, out2)
    return out0, out1, out2


def finish(K: Any, o: Any, dd: Any, m0: Any, m1: Any, m2: Any, pi: Any, pf: Any, pr: Any,
           energy: bool = True) -> tuple[Any, ...]:
    """Stage two under loop order ``o``: (DRAM read bytes of input, weight, output; DRAM write bytes;
    bursts of input, weight, output; DRAM cycles, compute cycles, NoC cycles, latency cycles; energy
    pJ of MACs, register files, on-chip buffers, NoC, DRAM). ``dd`` is stage two's trip table,
    ``m0..m2`` the bitmasks of the dimensions that index each operand and are not hoisted (see
    :func:`reload`); ``pr`` is scratch for the reload factors of each shape (``pr[s * 3 + op]``).
    Without ``energy`` the energies are not computed (0). Feasibility is not applied here (see
    ``feasible``)."""
    count = K.copies
    n_shapes = K.kcount.shape[0]
    for s in range(n_shapes):
        f0, f1, f2 = reload(o, dd, s * DD_SHAPE + D_TRIPS, m0, m1, m2)
        pr[s * 3] = f0
        pr[s * 3 + 1] = f1
        pr[s * 3 + 2] = f2
    r0 = 0.0
    r1 = 0.0
    r2 = 0.0
    wr = 0.0
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    # DRAM: each multicast group moves what its most demanding member needs.
    for g in range(K.gcount[0]):
        gr = 0.0
        gb = 0.0
        for s in range(n_shapes):
            if K.gmem[0, g, s]:
                p = s * N_FIELDS
                gr = maximum(gr, 1.0 * (count * pr[s * 3] * pi[p + F_SWEEP]))
                gb = maximum(gb, 1.0 * (count * pr[s * 3] * pi[p + F_BURSTS]))
        r0 = r0 + gr
        b0 = b0 + gb
    for g in range(K.gcount[1]):
        gr = 0.0
        gb = 0.0
        for s in range(n_shapes):
            if K.gmem[1, g, s]:
                p = s * N_FIELDS
                gr = maximum(gr, 1.0 * (pr[s * 3 + 1] * pi[p + F_SWEEP + 1]))
                gb = maximum(gb, 1.0 * (pr[s * 3 + 1] * pi[p + F_BURSTS + 1]))
        r1 = r1 + gr
        b1 = b1 + gb
    for g in range(K.gcount[2]):
        gr = 0.0
        gw = 0.0
        gb = 0.0
        for s in range(n_shapes):
            if K.gmem[2, g, s]:
                p = s * N_FIELDS
                extra = pr[s * 3 + 2] - 1
                gr = maximum(gr, 1.0 * (extra * pi[p + F_PSUM]))
                gw = maximum(gw, 1.0 * (pi[p + F_SWEEP + 2] + extra * pi[p + F_PSUM]))
                gb = maximum(gb, 1.0 * (pi[p + F_BURSTS + 2] + 2 * extra * pi[p + F_PSUM_BURSTS]))
        r2 = r2 + gr
        wr = wr + gw
        b2 = b2 + gb
    total_bytes = r0 + r1 + r2 + wr
    dram_cycles = total_bytes / K.dram_bw + (b0 + b1 + b2) * K.burst_lat
    # Compute: the slowest core. On-chip traffic and energy: every core.
    compute = 0.0
    noc_cycles = 0.0
    noc_bytes = 0.0
    buf_energy = 0.0
    for s in range(n_shapes):
        k = K.kcount[s]
        p = s * N_FIELDS
        compute = maximum(compute, pf[s])
        step0 = pi[p + F_STEP]
        step1 = pi[p + F_STEP + 1]
        step2 = pi[p + F_STEP + 2]
        core_noc = step0 * K.prec_in + step1 * K.prec_w + step2 * K.psum
        if K.noc_bw > 0:
            noc_cycles = maximum(noc_cycles, core_noc / K.noc_bw)
        if energy:
            extra = pr[s * 3 + 2] - 1
            read0 = 1.0 * (count * pr[s * 3] * pi[p + F_SWEEP])
            read1 = 1.0 * (pr[s * 3 + 1] * pi[p + F_SWEEP + 1])
            read2 = 1.0 * (extra * pi[p + F_PSUM])
            write = 1.0 * (pi[p + F_SWEEP + 2] + extra * pi[p + F_PSUM])
            buf_energy = buf_energy + k * (read0 + step0 * K.prec_in) * K.e_mem[0]
            buf_energy = buf_energy + k * (read1 + step1 * K.prec_w) * K.e_mem[1]
            buf_energy = buf_energy + k * (read2 + write + 2 * step2 * K.psum) * K.e_mem[2]
            noc_bytes = noc_bytes + k * core_noc
    onchip = maximum(compute, noc_cycles)
    latency = maximum(onchip, dram_cycles) if K.overlap else onchip + dram_cycles
    return (r0, r1, r2, wr, b0, b1, b2, dram_cycles, compute, noc_cycles, latency,
            K.macs * K.e_mac, 3 * K.macs * K.e_rf, buf_energy, noc_bytes * K.e_noc, total_bytes * K.e_dram)


def objective_value(code: int, v: Any) -> Any:
    """The value a search minimises from ``finish``'s values: 0 latency cycles, 1 energy pJ, 2 energy
    x latency, 3 DRAM bytes, 4 latency x DRAM bytes (sums in the order ``CostBatch`` uses)."""
    if code == 0:
        return v[10]
    if code >= 3:
        dram = (v[0] + v[1]) + (v[2] + v[3])
        return dram if code == 3 else v[10] * dram
    energy = v[11] + v[12] + v[13] + v[14] + v[15]
    if code == 1:
        return energy
    if code == 2:
        return energy * v[10]
    return energy


def cost_batch(feasible: np.ndarray, footprint: np.ndarray, reads: np.ndarray, writes: np.ndarray,
               bursts: np.ndarray, cycles: np.ndarray, energy: np.ndarray, macs: int,
               peak_macs_per_cycle: int) -> CostBatch:
    """The ``CostBatch`` of ``n`` candidates from :func:`finish`'s values: DRAM read bytes ``reads``
    (n, 3), write bytes ``writes`` (n,), bursts (n, 3), cycles (4, n: DRAM, compute, NoC, latency) and
    energy pJ (n, 5), with ``inf`` cycles and energy where a candidate does not fit."""
    return CostBatch(feasible=feasible, footprint_bytes=footprint, dram_read_bytes=reads, dram_write_bytes=writes,
                     dram_bursts=bursts, dram_cycles=cycles[0], compute_cycles=cycles[1], noc_cycles=cycles[2],
                     latency_cycles=cycles[3], energy_breakdown_pj=energy, macs=macs,
                     peak_macs_per_cycle=peak_macs_per_cycle)
