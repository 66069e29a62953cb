"""The one analytical cost model, vectorised over candidate mappings.

The rule (DESIGN.md): walking the tile loops, an operand's tile is (re)loaded whenever the box it
must hold changes, i.e. once per iteration of every loop at or outside the innermost loop that
indexes it (loops of trip count 1 and hoisted dimensions do not count). Loops inside that one
that do not index it give reuse. An output box revisited across a reduction loop is written back
as partial sums and read again. Everything is summed exactly over tile positions (remainder
tiles, input halos, padding that is never fetched); see ``tables``.

Evaluation has two stages so a search can share work: :func:`sweep` computes everything that does
not depend on the loop order (per core shape: trips, one sweep of each operand's tiles, footprints,
compute cycles); :func:`finish` applies a loop order and returns a :class:`CostBatch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.problem import CoreGrid, CoreSlice, Problem
from tileplan.cost.tables import DimStats, halo_stats, halo_table, plain_bursts, plain_stats
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.mapping import LAYOUT_LETTERS, layout_options

# Canonical storage dimensions of each tensor (outermost first in the default layout) and, per
# layout letter, which of them it stands for (a channel letter includes the group dimension).
_STORAGE_LOOP: dict[Operand, tuple[Dim, ...]] = {
    Operand.INPUT: (Dim.N, Dim.G, Dim.C, Dim.P, Dim.Q),  # H is indexed by (P, R), W by (Q, S)
    Operand.WEIGHT: (Dim.G, Dim.K, Dim.C, Dim.R, Dim.S),
    Operand.OUTPUT: (Dim.N, Dim.G, Dim.K, Dim.P, Dim.Q),
}
_LETTER_STORAGE: dict[Operand, dict[str, tuple[int, ...]]] = {
    Operand.INPUT: {"N": (0,), "C": (1, 2), "H": (3,), "W": (4,)},
    Operand.WEIGHT: {"K": (0, 1), "C": (2,), "R": (3,), "S": (4,)},
    Operand.OUTPUT: {"N": (0,), "K": (1, 2), "P": (3,), "Q": (4,)},
}
_RELEVANT_MASK = np.array([[d in RELEVANT[op] for d in DIMS] for op in OPERANDS], dtype=bool)


def storage_order(operand: Operand, layout: str) -> tuple[int, ...]:
    """Canonical storage-dimension indices of ``operand`` in ``layout`` order, outermost first."""
    out: list[int] = []
    for letter in layout:
        out.extend(_LETTER_STORAGE[operand][letter])
    return tuple(out)


def tensor_sizes(problem: Problem, operand: Operand) -> tuple[int, ...]:
    """Sizes of the canonical storage dimensions of ``operand``'s DRAM tensor."""
    d = problem.dims
    if operand is Operand.INPUT:
        return (int(d[Dim.N]), int(d[Dim.G]), int(d[Dim.C]), problem.in_h, problem.in_w)
    if operand is Operand.WEIGHT:
        return (int(d[Dim.G]), int(d[Dim.K]), int(d[Dim.C]), int(d[Dim.R]), int(d[Dim.S]))
    return (int(d[Dim.N]), int(d[Dim.G]), int(d[Dim.K]), int(d[Dim.P]), int(d[Dim.Q]))


@dataclass
class ShapeSweep:
    """Order-independent quantities of one core shape for ``n`` candidates (arrays of shape (n,))."""

    trips: np.ndarray  # (n, 8)
    sweep_bytes: np.ndarray  # (n, 3): one sweep of each operand's tiles (output at output precision)
    sweep_bursts: np.ndarray  # (n, 3)
    psum_bytes: np.ndarray  # one sweep of output tiles at partial-sum precision
    psum_bursts: np.ndarray
    step_elems: np.ndarray  # (n, 3): sum over compute steps of each operand's loop-tile elements
    footprint: np.ndarray  # (n, memories) bytes this core needs in each memory
    compute_cycles: np.ndarray
    macs: int


@dataclass
class Sweep:
    """Stage one of the model for a batch sharing one core split."""

    problem: Problem
    grid: CoreGrid
    shapes: list[ShapeSweep]
    hoist: np.ndarray  # (n, 3, 8)
    feasible: np.ndarray  # (n,)
    footprint: np.ndarray  # (n, memories): max over shapes


def _stats(problem: Problem, core: CoreSlice, operand: Operand, tiles: np.ndarray,
           hoist: np.ndarray) -> tuple[list[DimStats], list[tuple[np.ndarray, ...] | None], list[DimStats]]:
    """Per canonical storage dimension: stats with the operand's hoisting, the halo gather index
    (for burst sums), and stats without hoisting (what one compute step touches)."""
    sizes = tensor_sizes(problem, operand)
    stats: list[DimStats] = []
    step: list[DimStats] = []
    halo_idx: list[tuple[np.ndarray, ...] | None] = []
    no = np.zeros(tiles.shape[0], dtype=bool)
    for e, d in enumerate(_STORAGE_LOOP[operand]):
        if operand is Operand.INPUT and d in (Dim.P, Dim.Q):
            axis = 0 if d is Dim.P else 1
            dk = Dim.R if axis == 0 else Dim.S
            table = halo_table(core.length[d], problem.input_window_start(axis, core.offset[d]), sizes[e],
                               problem.stride[axis], problem.dilation[axis], int(problem.dims[dk]))
            s, idx = halo_stats(table, tiles[:, d], tiles[:, dk], hoist[:, d], hoist[:, dk])
            s0, _ = halo_stats(table, tiles[:, d], tiles[:, dk], no, no)
            stats.append(s)
            step.append(s0)
            halo_idx.append(idx)
        else:
            stats.append(plain_stats(core.length[d], sizes[e], tiles[:, d], hoist[:, d]))
            step.append(plain_stats(core.length[d], sizes[e], tiles[:, d], no))
            halo_idx.append(None)
    return stats, halo_idx, step


def _bursts(problem: Problem, core: CoreSlice, operand: Operand, stats: list[DimStats],
            halo_idx: list[tuple[np.ndarray, ...] | None], tiles: np.ndarray, hoist: np.ndarray,
            layout_codes: np.ndarray, elem_bytes: int) -> np.ndarray:
    """Bursts of one sweep of ``operand``'s tiles.

    In each box, a run of contiguous bytes extends from the innermost dimension (in layout order)
    outwards while the box spans whole tensor dimensions; each run costs ``ceil(run_bytes / burst)``.
    Summed over the cartesian grid of positions this is ``sum_j (prod_{i<j} sum_ext_i) * B_j *
    (prod_{i>j} nfull_i)``, where ``B_j`` sums the bursts of the positions of dimension j that are
    not whole (all positions for the outermost dimension).
    """
    n = tiles.shape[0]
    burst = problem.arch.dram.burst_bytes
    sizes = tensor_sizes(problem, operand)
    sum_ext = np.stack([s.sum_ext for s in stats], axis=1)
    nfull = np.stack([s.nfull for s in stats], axis=1)
    out = np.zeros(n, dtype=np.int64)
    options = layout_options(operand)
    for code in np.unique(layout_codes):
        sel = layout_codes == code
        order = storage_order(operand, options[int(code)])
        m = int(sel.sum())
        run_bursts = np.zeros((m, 5), dtype=np.int64)
        inner = elem_bytes  # bytes of one step along the dimension carrying the run
        for pos in range(4, -1, -1):
            e = order[pos]
            d = _STORAGE_LOOP[operand][e]
            idx = halo_idx[e]
            if idx is not None:
                axis = 0 if d is Dim.P else 1
                dk = Dim.R if axis == 0 else Dim.S
                table = halo_table(core.length[d], problem.input_window_start(axis, core.offset[d]), sizes[e],
                                   problem.stride[axis], problem.dilation[axis], int(problem.dims[dk]))
                every, partial = table.bursts(inner, burst)
                sub = tuple(i[sel] for i in idx)
                run_bursts[:, pos] = (every if pos == 0 else partial)[sub]
            else:
                every, partial = plain_bursts(core.length[d], sizes[e], tiles[sel, d], hoist[sel, d], inner, burst)
                run_bursts[:, pos] = every if pos == 0 else partial
            inner *= sizes[e]
        ext = sum_ext[sel][:, order]
        full = nfull[sel][:, order]
        ones = np.ones((m, 1), dtype=np.int64)
        outer = np.cumprod(np.concatenate([ones, ext[:, :-1]], axis=1), axis=1)
        inner_full = np.cumprod(np.concatenate([ones, full[:, :0:-1]], axis=1), axis=1)[:, ::-1]
        out[sel] = np.sum(outer * run_bursts * inner_full, axis=1)
    return out


def _compute_cycles(problem: Problem, core: CoreSlice, tiles: np.ndarray, unroll: np.ndarray) -> np.ndarray:
    """Cycles to run every tile of this core: per tile, unrolled dims take ceil(t/u) steps, each
    flattened axis ceil(prod t / lanes) steps, other dims t steps (TSO Eq. 7-8, e-PlaNNer Eq. 6.9)."""
    n = tiles.shape[0]
    length = np.array(core.length, dtype=np.int64)
    t = np.minimum(tiles, length)
    trips = -(-length // t)
    rem = length - (trips - 1) * t
    flat_dims = {d for dims, _ in problem.flattened_axes for d in dims}
    total = np.full(n, float(problem.op_factor))
    for d in DIMS:
        if d in flat_dims:
            continue
        u = unroll[:, d]
        spatial = (trips[:, d] - 1) * (-(-t[:, d] // u)) + (-(-rem[:, d] // u))
        total *= np.where(u > 1, spatial, length[d])
    for dims, lanes in problem.flattened_axes:
        acc = np.zeros(n)
        for pick in product((0, 1), repeat=len(dims)):
            count = np.ones(n, dtype=np.int64)
            prod = np.ones(n, dtype=np.int64)
            for d, remainder in zip(dims, pick, strict=True):
                count = count * (1 if remainder else (trips[:, d] - 1))
                prod = prod * (rem[:, d] if remainder else t[:, d])
            acc += count * (-(-prod // lanes))
        total *= acc
    return np.ceil(total / problem.arch.pe_array.macs_per_pe_per_cycle)


def sweep(problem: Problem, batch: MappingBatch) -> Sweep:
    """Stage one: order-independent costs of every core shape (see module docstring)."""
    grid = problem.core_grid(batch.cluster_split, batch.core_split)
    tiles, hoist = batch.tiles, batch.hoist
    n = tiles.shape[0]
    prec = problem.precision
    has = problem.has_operand
    n_mem = len(problem.arch.memories)
    shapes: list[ShapeSweep] = []
    footprint = np.zeros((n, n_mem), dtype=np.int64)
    for core in grid.shapes:
        length = np.array(core.length, dtype=np.int64)
        t = np.minimum(tiles, length)
        trips = -(-length // t)
        sweep_bytes = np.zeros((n, 3), dtype=np.int64)
        sweep_bursts = np.zeros((n, 3), dtype=np.int64)
        step_elems = np.zeros((n, 3), dtype=np.int64)
        fp = np.zeros((n, n_mem), dtype=np.int64)
        psum_bytes = np.zeros(n, dtype=np.int64)
        psum_bursts = np.zeros(n, dtype=np.int64)
        for op in OPERANDS:
            if not has[op]:
                continue
            stats, halo_idx, step = _stats(problem, core, op, t, hoist[:, op])
            elems = np.prod(np.stack([s.sum_ext for s in stats], axis=1), axis=1)
            box = np.prod(np.stack([s.max_ext for s in stats], axis=1), axis=1)
            step_box = np.prod(np.stack([s.sum_ext for s in step], axis=1), axis=1)
            irrelevant = np.prod(np.where(_RELEVANT_MASK[op], 1, trips), axis=1)
            step_elems[:, op] = irrelevant * step_box
            b = prec.of(op)
            sweep_bytes[:, op] = elems * b
            sweep_bursts[:, op] = _bursts(problem, core, op, stats, halo_idx, t, hoist[:, op],
                                          batch.layouts[:, op], b)
            onchip_b = prec.psum if op is Operand.OUTPUT else b
            copies = problem.layer.input_count if op is Operand.INPUT else 1  # an add holds every addend
            fp[:, problem.memory_of_operand[op]] += box * onchip_b * copies
            if op is Operand.OUTPUT:
                psum_bytes = elems * prec.psum
                psum_bursts = sweep_bursts[:, op] if prec.psum == b else _bursts(
                    problem, core, op, stats, halo_idx, t, hoist[:, op], batch.layouts[:, op], prec.psum)
        compute = _compute_cycles(problem, core, tiles, batch.unroll) if problem.op_factor else np.zeros(n)
        macs = int(np.prod(length)) * problem.op_factor
        shapes.append(ShapeSweep(trips, sweep_bytes, sweep_bursts, psum_bytes, psum_bursts, step_elems, fp,
                                 compute, macs))
        footprint = np.maximum(footprint, fp)
    factor = 2 if problem.arch.double_buffering else 1
    feasible = np.all(footprint * factor <= problem.capacity_bytes[None, :], axis=1)
    return Sweep(problem, grid, shapes, hoist, feasible, footprint)


def reload_factors(order: np.ndarray, trips: np.ndarray, hoist: np.ndarray) -> np.ndarray:
    """(n, 3): how many times each operand's tiles are swept (output: visits of each output box).

    For operand X: q = innermost loop position over a non-hoisted dimension that indexes X and has
    more than one trip; the factor is the product of the trips of the other loops at or outside q.
    """
    n = order.shape[0]
    pos_trips = np.take_along_axis(trips, order, axis=1)
    out = np.ones((n, 3), dtype=np.int64)
    for op in OPERANDS:
        nr = _RELEVANT_MASK[op][None, :] & ~hoist[:, op, :]
        nr_pos = np.take_along_axis(nr, order, axis=1)
        live = nr_pos & (pos_trips > 1)
        has = live.any(axis=1)
        q = NDIMS - 1 - np.argmax(live[:, ::-1], axis=1)
        factors = np.cumprod(np.where(nr_pos, 1, pos_trips), axis=1)
        out[:, op] = np.where(has, factors[np.arange(n), q], 1)
    return out


def finish(sw: Sweep, order: np.ndarray) -> CostBatch:
    """Stage two: apply loop ``order`` ((n, 8) or (8,)) and combine cores into chip totals."""
    problem, grid = sw.problem, sw.grid
    arch = problem.arch
    n = sw.feasible.shape[0]
    order = np.broadcast_to(order, (n, NDIMS))
    prec = problem.precision
    count = problem.layer.input_count
    per_shape = []
    for sh in sw.shapes:
        rho = reload_factors(order, sh.trips, sw.hoist)
        visits = rho[:, 2]
        read = np.zeros((n, 3), dtype=np.float64)
        bursts = np.zeros((n, 3), dtype=np.float64)
        read[:, 0] = count * rho[:, 0] * sh.sweep_bytes[:, 0]
        read[:, 1] = rho[:, 1] * sh.sweep_bytes[:, 1]
        read[:, 2] = (visits - 1) * sh.psum_bytes
        write = sh.sweep_bytes[:, 2] + (visits - 1) * sh.psum_bytes
        bursts[:, 0] = count * rho[:, 0] * sh.sweep_bursts[:, 0]
        bursts[:, 1] = rho[:, 1] * sh.sweep_bursts[:, 1]
        bursts[:, 2] = sh.sweep_bursts[:, 2] + 2 * (visits - 1) * sh.psum_bursts
        per_shape.append((read, write.astype(np.float64), bursts))
    # DRAM: each multicast group moves what its most demanding member needs.
    dram_read = np.zeros((n, 3))
    dram_write = np.zeros(n)
    dram_bursts = np.zeros((n, 3))
    for op in OPERANDS:
        for members in grid.groups[op]:
            shape_ids = sorted({int(grid.shape_of[i]) for i in members})
            dram_read[:, op] += np.max([per_shape[s][0][:, op] for s in shape_ids], axis=0)
            dram_bursts[:, op] += np.max([per_shape[s][2][:, op] for s in shape_ids], axis=0)
            if op is Operand.OUTPUT:
                dram_write += np.max([per_shape[s][1] for s in shape_ids], axis=0)
    total_bytes = dram_read.sum(axis=1) + dram_write
    dram_cycles = total_bytes / arch.dram_bytes_per_cycle + dram_bursts.sum(axis=1) * arch.burst_latency_cycles
    # Compute: the slowest core. On-chip traffic and energy: every core.
    core_counts = np.bincount(grid.shape_of, minlength=len(sw.shapes))
    compute = np.max([sh.compute_cycles for sh in sw.shapes], axis=0)
    noc_bytes = np.zeros(n)
    buffer_bytes = np.zeros(n)
    buffer_energy = np.zeros(n)
    macs = 0
    e_mem = [m.energy_pj_per_byte for m in arch.memories]
    noc_cycles_max = np.zeros(n)
    for sh, (read, write, _), k in zip(sw.shapes, per_shape, core_counts, strict=True):
        if k == 0:
            continue
        per_op = np.zeros((n, 3))
        per_op[:, 0] = read[:, 0] + sh.step_elems[:, 0] * prec.input  # fills + array reads
        per_op[:, 1] = read[:, 1] + sh.step_elems[:, 1] * prec.weight
        per_op[:, 2] = read[:, 2] + write + 2 * sh.step_elems[:, 2] * prec.psum
        for op in OPERANDS:
            buffer_energy += k * per_op[:, op] * e_mem[problem.memory_of_operand[op]]
        buffer_bytes += k * per_op.sum(axis=1)
        core_noc = (sh.step_elems[:, 0] * prec.input + sh.step_elems[:, 1] * prec.weight
                    + sh.step_elems[:, 2] * prec.psum)
        noc_bytes += k * core_noc
        if arch.noc_bytes_per_cycle is not None:
            noc_cycles_max = np.maximum(noc_cycles_max, core_noc / arch.noc_bytes_per_cycle)
        macs += int(k) * sh.macs
    onchip = np.maximum(compute, noc_cycles_max)
    latency = np.maximum(onchip, dram_cycles) if arch.overlap else onchip + dram_cycles
    energy = np.zeros((n, 5))
    energy[:, 0] = macs * arch.energy.mac_pj
    energy[:, 1] = 3 * macs * arch.register_file.energy_pj_per_access
    energy[:, 2] = buffer_energy
    energy[:, 3] = noc_bytes * arch.noc.energy_pj_per_byte
    energy[:, 4] = total_bytes * arch.dram.energy_pj_per_byte
    feasible = sw.feasible
    inf = np.where(feasible, 0.0, np.inf)
    return CostBatch(
        feasible=feasible,
        footprint_bytes=sw.footprint,
        dram_read_bytes=dram_read,
        dram_write_bytes=dram_write,
        dram_bursts=dram_bursts,
        dram_cycles=dram_cycles + inf,
        compute_cycles=compute + inf,
        noc_cycles=noc_cycles_max + inf,
        latency_cycles=latency + inf,
        energy_breakdown_pj=energy + inf[:, None],
        macs=problem.macs,
        peak_macs_per_cycle=arch.peak_macs_per_cycle(prec.input),
    )


def evaluate(problem: Problem, batch: MappingBatch) -> CostBatch:
    """Full costs of every mapping in ``batch`` (one model: stage one then stage two)."""
    return finish(sweep(problem, batch), batch.order)


__all__ = ["LAYOUT_LETTERS", "Sweep", "evaluate", "finish", "reload_factors", "storage_order", "sweep"]
