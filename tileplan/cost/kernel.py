"""The cost model's arithmetic, written once for two executions.

Every function here is plain elementwise Python over "values" that are either numpy arrays (one
entry per candidate: the vectorised path, used for small batches and needing no compiler) or
scalars (one candidate: the compiled path, where ``cost.compiled`` hands the very same functions to
numba and loops over candidates in parallel). So the two paths cannot drift apart; a test checks
that they give bit-identical costs.

Rules that keep one source valid for both: loops run over dimensions, operands, shapes and
positions (never over candidates); a choice that differs per candidate is arithmetic
(:func:`select`), never ``if``; a table read at a per-candidate dimension goes through
:func:`pick`; integers stay integers until the model converts them (every byte, burst and cycle
count is exact), and floating-point sums happen in one fixed order. A few helpers (:func:`select`,
:func:`pick`, :func:`at`, :func:`maximum`, :func:`cdiv_unroll`) have a cheaper scalar twin in
``cost.compiled`` that returns the same value. Tables and scratch are flat (one index, fixed strides
written here), which the compiler turns into plain address arithmetic.

Per candidate the inputs are ``t`` (8 tile sizes), ``hm`` (per operand, a bitmask of its hoisted
dimensions: bit ``d`` set when dimension ``d`` is hoisted), ``u`` (8 unroll factors) and the DRAM
layout code of each operand; tables of the layer, the accelerator and the core split come in ``K``
(a :class:`~tileplan.cost.kernel_tables.KernelTables`): everything that does not depend on the
candidate is looked up there (trip counts of every tile size, each layout's storage dimensions and
bytes per step, input halos), so what is left per candidate is a few dozen integer operations per
operand. Stage one (:func:`sweep_shapes`) fills, per core shape ``s``, the order-independent
integers ``pi[s * N_FIELDS + F_*]``, the compute cycles ``pf[s]`` and the trip table
``dd[s * DD_SHAPE + D_* + d]`` (:func:`trip_table`: each dimension's clipped tile, trip count and
remainder tile); stage two (:func:`finish`) applies a loop order and returns the chip totals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

prange = range  # ``cost.compiled`` rebinds this to ``numba.prange`` before compiling the loops below

# Fields of the per-shape integer table ``pi[s * N_FIELDS + f]``.
F_SWEEP = 0  # 0..2: bytes of one sweep of each operand's tiles (output at output precision)
F_BURSTS = 3  # 3..5: bursts of one sweep
F_PSUM = 6  # bytes of one sweep of output tiles at partial-sum precision
F_PSUM_BURSTS = 7
F_STEP = 8  # 8..10: sum over compute steps of each operand's loop-tile elements (input: every addend)
F_FOOT = 11  # 11..13: on-chip bytes of each operand's tile box
N_FIELDS = 14
N_OUT = 16  # values returned by ``finish``: see its docstring

# The per-shape record ``KernelTables.srec[s * SREC + S_* + d]``.
S_LEN = 0  # slice length of dimension d
S_TOFF = 8  # where dimension d's entries start in ``KernelTables.trips`` (tile t: entries 2 (toff + t), + 1)
SREC = 16

# The record of a storage position ``KernelTables.prec[(((s * 3 + op) * 24 + code) * 5 + pos) * NREC + R_*]``:
# core shape s, operand op, its layout code, position pos in that layout (outermost first).
R_DIM = 0  # the loop dimension indexing it
R_AXIS = 1  # input rows (0) or columns (1), read from the halo table; -1 for the other (plain) positions
R_OFF = 2  # where its entries start: in ``ptab`` (plain: tile t at R_OFF + (t - 1) * stride) or ``halo``
R_LEN = 3  # the slice length (plain positions)
NREC = 4


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def cdiv_by(a: Any, b: int, shift: int) -> Any:
    """``cdiv(a, b)`` for a divisor fixed by the tables: a shift when ``b == 1 << shift`` (``shift``
    is -1 otherwise), which is exact for non-negative ``a`` and much cheaper than a division."""
    if shift >= 0:
        return (a + (b - 1)) >> shift
    return cdiv(a, b)


def cdiv_unroll(a: Any, u: Any) -> Any:
    """Steps of ``a`` elements over ``u`` PE lanes, ``ceil(a / u)``; ``u <= 1`` means not unrolled
    (``a`` steps). The compiled twin skips the division when ``u <= 1``, the common case."""
    return cdiv(a, np.maximum(u, 1))


def log2_exact(b: int) -> int:
    """``k`` where ``b == 1 << k``, else -1 (the ``shift`` of :func:`cdiv_by`)."""
    return b.bit_length() - 1 if b > 0 and b & (b - 1) == 0 else -1


def select(c: Any, a: Any, b: Any) -> Any:
    """``a`` where ``c`` (0/1) else ``b``, for integers (exact)."""
    return b + c * (a - b)


def maximum(a: Any, b: Any) -> Any:
    """The larger of two costs (never NaN)."""
    return np.maximum(a, b)


def at(table: Any, x: Any) -> Any:
    """``table[x]``: a flat table (or scratch) at a computed, never negative, offset (the compiled
    twin skips the wrap-around of negative indices)."""
    return table[x]


def pick(table: Any, base: Any, d: Any) -> Any:
    """``table[base + d]`` where ``d`` is a dimension chosen per candidate (vectorised: ``table`` is
    ``(rows, n)``, ``d`` a scalar or an ``(n,)`` array)."""
    if np.ndim(d) == 0:
        return table[base + d]
    return np.take_along_axis(table[base:base + 9], d[None, :], axis=0)[0]


def hoist_bits(word: Any) -> Any:
    """Bitmask of an operand's hoisted dimensions (bit ``d``: dimension ``d``) from its 8 flags as
    0/1 bytes of one little-endian uint64 word: multiplying by ``sum_k 2**(56 - 7k)`` moves byte
    ``k``'s bit to bit ``56 + k`` without carries (every other product lands on a distinct bit
    outside 56..63), so the top byte is the mask."""
    return np.int64((word * np.uint64(0x0102040810204080)) >> np.uint64(56))


# Fields of one entry of the input halo table ``KernelTables.halo`` (``cost.tables.halo_table`` of an
# output tile and a kernel tile under two hoist flags; see ``kernel_tables``). An axis of a shape under
# one input layout is a block of (output tile, kernel tile, hoist flags) entries from its R_OFF.
H_SUM = 0  # sum of the input extents over tile positions
H_MAX = 1  # largest extent
H_FULL = 2  # positions whose extent spans the whole input dimension
H_EVERY = 3  # bursts over all positions (for the slot's input layout)
H_PARTIAL = 4  # bursts over the positions that do not span the whole dimension
H_SUM00 = 5  # H_SUM without hoisting (the same for every hoist flag)
N_HALO = 6

# Fields of one entry of the plain-position table ``KernelTables.ptab``: a storage dimension indexed by
# one loop dimension, for one tile size (``cost.tables.plain_stats`` and ``plain_bursts``; see ``kernel_tables``).
P_MAX = 0  # largest extent: the slice when one tile spans it, else the tile
P_FULL = 1  # 1 when every box spans the whole tensor dimension
P_EVERY = 2  # bursts over all positions
P_PARTIAL = 3  # bursts over the positions that do not span the whole dimension
P_EVERY2 = 4  # P_EVERY at partial-sum precision (output entries only)
P_PARTIAL2 = 5
N_PLAIN = 4  # fields of an input or weight entry
N_PLAIN2 = 6  # fields of an output entry

# The trip table ``dd[s * DD_SHAPE + D_* + d]`` of core shape s: rows of DD_COLS columns (the 8
# dimensions, then D_NEUTRAL).
DD_COLS = 9
D_TILE = 0  # tile size clipped to the slice
D_TRIPS = DD_COLS  # tiles along the slice: ceil(length / tile)
D_REM = 2 * DD_COLS  # size of the last (remainder) tile
DD_SHAPE = 3 * DD_COLS
D_NEUTRAL = 8  # a dimension of length 1 (fills unused slots of a flattened PE-array axis)


def trip_table(K: Any, s: int, t: Any, dd: Any) -> None:
    """Fill core shape ``s``'s rows of ``dd`` (``D_*``) for every dimension: trip counts and remainder
    tiles come from ``K.trips`` (no division)."""
    b = s * DD_SHAPE
    dd[b + D_TILE + D_NEUTRAL] = 1
    dd[b + D_TRIPS + D_NEUTRAL] = 1
    dd[b + D_REM + D_NEUTRAL] = 1
    for d in range(8):
        tc = np.minimum(t[d], K.srec[s * SREC + S_LEN + d])
        x = 2 * (K.srec[s * SREC + S_TOFF + d] + tc)
        dd[b + D_TILE + d] = tc
        dd[b + D_TRIPS + d] = at(K.trips, x)
        dd[b + D_REM + d] = at(K.trips, x + 1)


def operand_pass(K: Any, s: int, op: int, code: int, hm: Any, dd: Any) -> tuple[Any, Any, Any, Any, Any]:
    """One operand on core shape ``s``: (elements of one sweep of its tiles, elements of its largest
    tile box, elements one compute step touches summed over positions, bursts of one sweep, the
    same at partial-sum precision (the output's partial sums; else equal to the former)).

    Storage dimensions are visited from the innermost (in layout ``code`` order) outwards, each
    described by its record in ``K.prec`` (``R_*``); what a position contributes for a tile size
    comes from the tables (``K.ptab``, fields ``P_*``; the input halo table ``K.halo``, fields
    ``H_*``). A run of contiguous bytes extends outwards while boxes span whole tensor dimensions;
    each run costs ``ceil(run / burst)``. Summed over the cartesian grid of positions, the bursts are
    ``sum_j (prod_{i<j} ext_i) * B_j * (prod_{i>j} full_i)`` (``B_j``: burst sum of dimension j over
    the positions that are not whole, all positions for the outermost one), accumulated here as
    ``acc = B_j * F + ext_j * acc`` with ``F`` the product of ``full`` of the dimensions inside.
    """
    elems = 1
    box = 1
    step = 1
    acc = 0
    full_in = 1
    acc2 = 0
    stride = N_PLAIN if op < 2 else N_PLAIN2
    b = s * DD_SHAPE
    rec = (((s * 3 + op) * 24 + code) * 5) * NREC
    for pos in range(4, -1, -1):
        r = rec + pos * NREC
        d = at(K.prec, r + R_DIM)
        a = at(K.prec, r + R_AXIS)
        if op == 0 and a >= 0:  # input rows (P with R) or columns (Q with S): the halo table
            dk = 6 + a  # R and S are never split: their tiles are at most the kernel
            x = (at(K.prec, r + R_OFF) + ((at(dd, b + D_TILE + d) - 1) * K.hk_max + at(dd, b + D_TILE + dk) - 1) * 4
                 * N_HALO + (((hm >> d) & 1) * 2 + ((hm >> dk) & 1)) * N_HALO)
            ext = at(K.halo, x + H_SUM)
            mx = at(K.halo, x + H_MAX)
            nf = at(K.halo, x + H_FULL)
            sext = at(K.halo, x + H_SUM00)
            every = at(K.halo, x + H_EVERY)
            partial = at(K.halo, x + H_PARTIAL)
            every2 = every
            partial2 = partial
        else:  # a hoisted dimension behaves as a tile spanning the slice
            length = at(K.prec, r + R_LEN)
            x = at(K.prec, r + R_OFF) + (select((hm >> d) & 1, length, at(dd, b + D_TILE + d)) - 1) * stride
            ext = length
            sext = length
            mx = at(K.ptab, x + P_MAX)
            nf = at(K.ptab, x + P_FULL)
            every = at(K.ptab, x + P_EVERY)
            partial = at(K.ptab, x + P_PARTIAL)
            if op == 2:
                every2 = at(K.ptab, x + P_EVERY2)
                partial2 = at(K.ptab, x + P_PARTIAL2)
            else:
                every2 = every
                partial2 = partial
        run = every if pos == 0 else partial
        acc = run * full_in + ext * acc
        if op == 2:
            run2 = every2 if pos == 0 else partial2
            acc2 = run2 * full_in + ext * acc2
        full_in = full_in * nf
        elems = elems * ext
        box = box * mx
        step = step * sext
    return elems, box, step, acc, acc2 if op == 2 else acc


def compute_cycles(K: Any, s: int, u: Any, dd: Any) -> Any:
    """Cycles to run every tile of core shape ``s``: per tile, unrolled dims take ceil(t/u) steps,
    each flattened PE-array axis ceil(prod t / lanes) steps, other dims t steps (TSO Eq. 7-8,
    e-PlaNNer Eq. 6.9); divided by the MACs per PE per cycle, rounded up. (A dimension that is not
    unrolled takes ``(n - 1) * t + rem``: its slice length.)"""
    b = s * DD_SHAPE
    total = 1.0 * K.op_factor
    for d in range(8):
        if K.flat[d]:
            continue
        ud = u[d]
        total = total * ((at(dd, b + D_TRIPS + d) - 1) * cdiv_unroll(at(dd, b + D_TILE + d), ud)
                         + cdiv_unroll(at(dd, b + D_REM + d), ud))
    for ax in range(K.fax_dims.shape[0]):
        # Sum over every combination of whole (n - 1 of them) and remainder tiles of the axis's four
        # dimension slots (an unused slot is the neutral column: its whole-tile term is 0, its remainder
        # factor 1). The sum is at most the product of the slots' slice lengths, which the tables keep
        # below 2**53: as an integer it is the float sum of the same terms in any order.
        lanes = K.fax_lanes[ax]
        lshift = K.fax_shift[ax]
        t0 = at(dd, b + D_TILE + K.fax_dims[ax, 0])
        t1 = at(dd, b + D_TILE + K.fax_dims[ax, 1])
        t2 = at(dd, b + D_TILE + K.fax_dims[ax, 2])
        t3 = at(dd, b + D_TILE + K.fax_dims[ax, 3])
        e0 = at(dd, b + D_REM + K.fax_dims[ax, 0])
        e1 = at(dd, b + D_REM + K.fax_dims[ax, 1])
        e2 = at(dd, b + D_REM + K.fax_dims[ax, 2])
        e3 = at(dd, b + D_REM + K.fax_dims[ax, 3])
        w0 = at(dd, b + D_TRIPS + K.fax_dims[ax, 0]) - 1
        w1 = at(dd, b + D_TRIPS + K.fax_dims[ax, 1]) - 1
        w2 = at(dd, b + D_TRIPS + K.fax_dims[ax, 2]) - 1
        w3 = at(dd, b + D_TRIPS + K.fax_dims[ax, 3]) - 1
        acc = 0
        for x in range(4):
            prod01 = select(x >> 1, e0, t0) * select(x & 1, e1, t1)
            count01 = select(x >> 1, 1, w0) * select(x & 1, 1, w1)
            for y in range(4):
                prod = prod01 * (select(y >> 1, e2, t2) * select(y & 1, e3, t3))
                count = count01 * (select(y >> 1, 1, w2) * select(y & 1, 1, w3))
                acc = acc + count * cdiv_by(prod, lanes, lshift)
        total = total * acc
    return np.ceil(total / K.macs_pe)


def operand(K: Any, s: int, op: int, code: int, hm: Any, pi: Any, dd: Any) -> None:
    """Fill operand ``op``'s fields of ``pi`` for core shape ``s`` (layout ``code``, hoist bitmask ``hm``)."""
    p = s * N_FIELDS
    if not K.has[op]:
        pi[p + F_SWEEP + op] = 0
        pi[p + F_BURSTS + op] = 0
        pi[p + F_STEP + op] = 0
        pi[p + F_FOOT + op] = 0
        if op == 2:
            pi[p + F_PSUM] = 0
            pi[p + F_PSUM_BURSTS] = 0
        return
    elems, box, step, bursts, bursts2 = operand_pass(K, s, op, code, hm, dd)
    irrelevant = 1
    for d in range(8):
        if not K.rel[op, d]:
            irrelevant = irrelevant * at(dd, s * DD_SHAPE + D_TRIPS + d)
    pi[p + F_SWEEP + op] = elems * K.ebytes[op]
    pi[p + F_BURSTS + op] = bursts
    pi[p + F_STEP + op] = irrelevant * step * (K.copies if op == 0 else 1)  # an add reads every addend
    pi[p + F_FOOT + op] = box * K.onchip[op] * (K.copies if op == 0 else 1)
    if op == 2:
        pi[p + F_PSUM] = elems * K.psum
        pi[p + F_PSUM_BURSTS] = bursts2


def sweep_shapes(K: Any, t: Any, hm0: Any, hm1: Any, hm2: Any, u: Any, c0: int, c1: int, c2: int, pi: Any, pf: Any,
                 dd: Any) -> None:
    """Stage one: fill ``pi``, ``pf[s]`` (compute cycles) and ``dd`` for every core shape ``s`` (see
    module docstring); ``hm0..hm2`` are the operands' hoist bitmasks, ``c0..c2`` their layout codes."""
    for s in range(K.kcount.shape[0]):
        trip_table(K, s, t, dd)
        operand(K, s, 0, c0, hm0, pi, dd)
        operand(K, s, 1, c1, hm1, pi, dd)
        operand(K, s, 2, c2, hm2, pi, dd)
        pf[s] = compute_cycles(K, s, u, dd)


def footprint(K: Any, pi: Any, m: int) -> Any:
    """Bytes core shapes need in memory ``m`` (the most demanding shape)."""
    out = 0
    for s in range(K.kcount.shape[0]):
        need = 0
        for op in range(3):
            if K.has[op] and K.mem_of[op] == m:
                need = need + pi[s * N_FIELDS + F_FOOT + op]
        out = np.maximum(out, need)
    return out


def feasible(K: Any, pi: Any) -> Any:
    """1 where the tiles of every core shape fit every on-chip memory (double-buffered if so)."""
    ok = 1
    for m in range(K.cap.shape[0]):
        ok = ok * (footprint(K, pi, m) * K.dbl <= K.cap[m])
    return ok


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
    pJ of MACs, register files, on-chip buffers, NoC, DRAM). ``dd`` is stage one's trip table,
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


# ----------------------------------------------------------------------------- compiled loops
# These loops over candidates run only compiled (``cost.compiled``); the vectorised path calls the
# functions above on whole arrays instead. Candidates are cut into ``chunks`` parallel blocks; block
# ``c`` uses the scratch tables ``S_*[c]`` (allocated by the caller: the loops allocate nothing, so
# they are compiled without numba's reference counting).


def scratch_sizes(n_shapes: int) -> tuple[int, ...]:
    """Sizes of one block's flat scratch tables (pi, pf, pr, dd; the ``S_*`` arguments of the loops
    below, each with a leading block axis); ``pf`` is float64, the others int64."""
    return n_shapes * N_FIELDS, n_shapes, n_shapes * 3, n_shapes * DD_SHAPE


def model_loop(K: Any, tiles: Any, hoist: Any, unroll: Any, layouts: Any, order: Any, orders: Any, objective: int,
               full: bool, keys: Any, rd: Any, wr: Any, bu: Any, cyc: Any, en: Any, fp: Any, feas: Any, S_pi: Any,
               S_pf: Any, S_pr: Any, S_dd: Any) -> None:
    """The model over candidates, in one of two uses (one loop, so it is compiled once):

    - ``full``: every candidate's costs under its loop order ``order[i]``, straight into the arrays of
      a ``CostBatch``: DRAM reads ``rd[i]`` (3), writes ``wr[i]``, bursts ``bu[i]`` (3), cycles
      ``cyc[k, i]`` (DRAM, compute, NoC, latency), energy ``en[i]`` (5), footprints ``fp[i]``, fit
      ``feas[i]`` (cycles and energy ``inf`` where it does not fit);
    - else: ``keys[i, k]``, the objective of candidate ``i`` under every loop order ``orders[k]``
      (``inf`` where it does not fit); stage one runs once per candidate.

    ``hoist[i, op]`` holds operand ``op``'s hoist flags (see :func:`hoist_bits`); the arrays a use
    does not write may be empty."""
    n = tiles.shape[0]
    chunks = S_pi.shape[0]
    for c in prange(chunks):
        pi = S_pi[c]
        pf = S_pf[c]
        pr = S_pr[c]
        dd = S_dd[c]
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            hm0 = hoist_bits(hoist[i, 0])
            hm1 = hoist_bits(hoist[i, 1])
            hm2 = hoist_bits(hoist[i, 2])
            sweep_shapes(K, tiles[i], hm0, hm1, hm2, unroll[i], layouts[i, 0], layouts[i, 1], layouts[i, 2], pi, pf, dd)
            ok = 1  # ``feasible``, from the footprints
            for m in range(K.cap.shape[0]):
                need = footprint(K, pi, m)
                if full:
                    fp[i, m] = need
                ok = ok * (need * K.dbl <= K.cap[m])
            m0, m1, m2 = masks(K, hm0, hm1, hm2)
            energy = full or objective == 1 or objective == 2
            if full:
                feas[i] = ok
                uses = 1
            else:
                uses = orders.shape[0] if ok else 0
                for k in range(orders.shape[0] - uses):
                    keys[i, k] = np.inf
            for k in range(uses):
                v = finish(K, order[i] if full else orders[k], dd, m0, m1, m2, pi, pf, pr, energy)
                if full:
                    inf = 0.0 if ok else np.inf
                    for f in range(3):
                        rd[i, f] = v[f]
                        bu[i, f] = v[4 + f]
                    wr[i] = v[3]
                    for f in range(4):
                        cyc[f, i] = v[7 + f] + inf
                    for f in range(5):
                        en[i, f] = v[11 + f] + inf
                else:
                    keys[i, k] = objective_value(objective, v)


def unroll_loop(K: Any, tiles: Any, options: Any, choice: Any, S_dd: Any) -> None:
    """``choice[i]``: the first of the unroll ``options`` (rows of 8 factors) with the fewest compute
    cycles of the slowest core shape (:func:`compute_cycles`) for tiles ``tiles[i]``."""
    n = tiles.shape[0]
    chunks = S_dd.shape[0]
    for c in prange(chunks):
        dd = S_dd[c]
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            for s in range(K.kcount.shape[0]):
                trip_table(K, s, tiles[i], dd)
            best = np.inf
            first = 0
            for k in range(options.shape[0]):
                cycles = 0.0
                for s in range(K.kcount.shape[0]):
                    cycles = maximum(cycles, compute_cycles(K, s, options[k], dd))
                if cycles < best:
                    best = cycles
                    first = k
            choice[i] = first
