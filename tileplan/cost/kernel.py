"""Stage two of the cost model: what every candidate costs before a loop order is applied, and the
loops over candidates that run stage two and three compiled.

Every function here is plain elementwise Python over "values" that are either numpy arrays (one
entry per candidate: the vectorised path, used for small batches and needing no compiler) or
scalars (one candidate: the compiled path, where ``cost.compiled`` hands the very same functions to
numba and loops over candidates in parallel). So the two paths cannot drift apart; a test checks
that they give bit-identical costs.

Rules that keep one source valid for both: loops run over dimensions, operands, shapes and
positions (never over candidates); a choice that differs per candidate is arithmetic
(``flat.select``), never ``if``; a table read at a per-candidate dimension goes through
``flat.pick``; integers stay integers until the model converts them (every byte, burst and cycle
count is exact), and floating-point sums happen in one fixed order. The tables' format and the
elementwise operations are in ``cost.flat``.

Per candidate the inputs are ``t`` (8 tile sizes), ``hm`` (per operand, a bitmask of its hoisted
dimensions: bit ``d`` set when dimension ``d`` is hoisted), ``u`` (8 unroll factors) and the DRAM
layout code of each operand; tables of the layer, the accelerator and the core split come in ``K``
(a :class:`~tileplan.cost.kernel_tables.KernelTables`, stage one): everything that does not depend on
the candidate is looked up there (trip counts of every tile size of every dimension, each layout's
storage dimensions and bytes per step, input halos), so what is left per candidate is a few dozen
integer operations per operand. :func:`sweep_shapes` fills, per core shape ``s``, the
order-independent integers ``pi[s * N_FIELDS + F_*]``, the compute cycles ``pf[s]`` and the trip table
``dd[s * DD_SHAPE + D_* + d]`` (:func:`trip_table`: each dimension's clipped tile, trip count and
remainder tile); stage three (``cost.finish``) applies a loop order and returns the chip totals.
:func:`model_loop` runs both per candidate, compiled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileplan.cost.finish import finish, masks, objective_value, reload
from tileplan.cost.flat import (
    D_NEUTRAL,
    D_REM,
    D_TILE,
    D_TRIPS,
    DD_COLS,
    DD_SHAPE,
    F_BURSTS,
    F_FOOT,
    F_PSUM,
    F_PSUM_BURSTS,
    F_STEP,
    F_SWEEP,
    H_EVERY,
    H_FULL,
    H_MAX,
    H_PARTIAL,
    H_SUM,
    H_SUM00,
    N_FIELDS,
    N_HALO,
    N_OUT,
    N_PLAIN,
    N_PLAIN2,
    NREC,
    P_EVERY,
    P_EVERY2,
    P_FULL,
    P_MAX,
    P_PARTIAL,
    P_PARTIAL2,
    R_AXIS,
    R_DIM,
    R_LEN,
    R_OFF,
    S_LEN,
    S_TOFF,
    SREC,
    at,
    cdiv,
    cdiv_by,
    cdiv_unroll,
    hoist_bits,
    log2_exact,
    maximum,
    pick,
    select,
)

#: Modules whose functions are compiled into this module's loops (inlined): numba's cache is keyed by
#: this file alone, so ``cost.jit`` drops it when one of them is newer.
INLINED_FROM = ("tileplan.cost.flat", "tileplan.cost.finish")

prange = range  # ``cost.compiled`` rebinds this to ``numba.prange`` before compiling the loops below

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
      (``inf`` where it does not fit); stage two runs once per candidate.

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


__all__ = [
    "DD_COLS", "DD_SHAPE", "D_NEUTRAL", "D_REM", "D_TILE", "D_TRIPS", "F_BURSTS", "F_FOOT", "F_PSUM",
    "F_PSUM_BURSTS", "F_STEP", "F_SWEEP", "H_EVERY", "H_FULL", "H_MAX", "H_PARTIAL", "H_SUM", "H_SUM00",
    "INLINED_FROM", "NREC", "N_FIELDS", "N_HALO", "N_OUT", "N_PLAIN", "N_PLAIN2", "P_EVERY", "P_EVERY2", "P_FULL",
    "P_MAX", "P_PARTIAL", "P_PARTIAL2", "R_AXIS", "R_DIM", "R_LEN", "R_OFF", "SREC", "S_LEN", "S_TOFF", "at",
    "cdiv", "cdiv_by", "cdiv_unroll", "compute_cycles", "feasible", "finish", "footprint", "hoist_bits",
    "log2_exact", "masks", "maximum", "model_loop", "objective_value", "operand", "operand_pass", "pick", "prange",
    "reload", "scratch_sizes", "select", "sweep_shapes", "trip_table", "unroll_loop"
]
