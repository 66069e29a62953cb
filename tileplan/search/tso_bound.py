"""A lower bound on the model's objective for TSO candidates, so TSO's exhaustive search can visit its
space in bound order and stop early (the result is the same as evaluating every candidate).

Every term is below the model's: compute is the ideal (every MAC lane busy) on the largest core;
DRAM bytes are the model's reload factors (``cost.model.reload_factors``) times what one sweep of each
multicast group's tiles moves (exact: plain dimensions sum to the slice length, input rows and
columns sum the clipped windows of every tile); bursts are at least bytes / burst, and at least the
bursts of the runs along each tensor's innermost dimension (input and output rows cut by column
tiles, weight channels cut by channel tiles), which is what separates wide from narrow tiles.
Multicast groups take one member where the model takes the most demanding one.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import reload_factors
from tileplan.cost.problem import CoreGrid, CoreSlice, Problem
from tileplan.cost.tables import tile_positions
from tileplan.dims import DIMS, OPERANDS, Dim, Operand
from tileplan.search.objective import Objective


@lru_cache(maxsize=1024)
def _table(length: int, start: int, size: int, stride: int, dil: int, kernel: int, step_bytes: int,
           burst: int) -> tuple[np.ndarray, np.ndarray]:
    """For every tile size 1..length of a ``length``-long slice: the sum of the tiles' extents inside
    ``[0, size)`` and the bursts of the tiles whose extent is not the whole tensor dimension (each a run
    of ``extent * step_bytes`` bytes; a whole extent continues into the next dimension instead).
    Input rows/columns of output tiles take the window (``kernel``, ``stride``, ``dil``, ``start``);
    plain tiles take start 0, stride 1, kernel 1. Every (tile size, position) is computed at once."""
    t_idx, first_out, ti = tile_positions(length)
    first = start + first_out * stride
    ext = np.maximum(np.minimum(first + (ti - 1) * stride + (kernel - 1) * dil + 1, size) - np.maximum(first, 0), 0)
    partial = np.where((ext > 0) & (ext != size), -(-(ext * step_bytes) // burst), 0)
    return (np.bincount(t_idx, weights=ext, minlength=length).astype(np.int64),
            np.bincount(t_idx, weights=partial, minlength=length).astype(np.int64))


def _sweep_table(problem: Problem, core: CoreSlice, op: Operand) -> tuple[np.ndarray, np.ndarray]:
    """(elements, runs) per tile-size cell (see :func:`_sweep_cells`): what one sweep of ``op``'s tiles
    moves for this core, and a lower bound on its bursts from the runs along the innermost tensor
    dimension (default layouts, whole kernel tiles, input and output not hoisted)."""
    L = dict(zip(DIMS, core.length, strict=True))
    burst = problem.arch.dram.burst_bytes
    b = problem.precision.of(op)
    if op is Operand.WEIGHT:  # K C R S: with R, S whole, runs of t_C x R x S along C
        runs = _table(L[Dim.C], 0, int(problem.dims[Dim.C]), 1, 1, 1, L[Dim.R] * L[Dim.S] * b, burst)[1]
        elems = L[Dim.G] * L[Dim.K] * L[Dim.C] * L[Dim.R] * L[Dim.S]
        return np.full(len(runs), elems), L[Dim.G] * L[Dim.K] * runs
    if op is Operand.OUTPUT:  # N K P Q: runs of t_Q along Q
        runs = _table(L[Dim.Q], 0, int(problem.dims[Dim.Q]), 1, 1, 1, b, burst)[1]
        rows = L[Dim.N] * L[Dim.G] * L[Dim.K] * L[Dim.P]
        return np.full(len(runs), rows * L[Dim.Q]), rows * runs
    sums = []
    for axis, (d_out, d_k) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
        sums.append(_table(L[d_out], problem.input_window_start(axis, core.offset[d_out]),
                           problem.in_h if axis == 0 else problem.in_w, problem.stride[axis],
                           problem.dilation[axis], int(problem.dims[d_k]), b, burst))
    planes = L[Dim.N] * L[Dim.G] * L[Dim.C] * problem.layer.input_count
    return (planes * np.outer(sums[0][0], sums[1][0]).ravel(), planes * np.outer(sums[0][0], sums[1][1]).ravel())


def _sweep_cells(length: tuple[int, ...], op: Operand, tiles: np.ndarray, hoist: np.ndarray) -> np.ndarray:
    """(n,) cell of each candidate in :func:`_sweep_table` for a core of ``length``: the C tile for
    weights (whole when hoisted), the Q tile for outputs, the (P, Q) tile pair for inputs."""
    L = dict(zip(DIMS, length, strict=True))
    if op is Operand.WEIGHT:
        return np.where(hoist[:, Dim.C], L[Dim.C], np.minimum(tiles[:, Dim.C], L[Dim.C])) - 1
    if op is Operand.OUTPUT:
        return np.minimum(tiles[:, Dim.Q], L[Dim.Q]) - 1
    return (np.minimum(tiles[:, Dim.P], L[Dim.P]) - 1) * L[Dim.Q] + np.minimum(tiles[:, Dim.Q], L[Dim.Q]) - 1


def _reload(batch: MappingBatch, length: np.ndarray, varying: np.ndarray) -> np.ndarray:
    """``reload_factors`` of a core of ``length`` for every candidate of a TSO batch, which shares one
    loop order and hoisting (``tso.candidates`` builds it so) and whose tiles vary only along the
    dimensions flagged in ``varying``.

    Trip counts take few values per dimension (at most about 2 sqrt(L) for a slice L long), so the
    factors are computed once on the small grid of those values and gathered: O(n) work, no sort."""
    n = len(batch)
    codes = np.zeros(n, dtype=np.int64)
    values: list[np.ndarray] = []
    for d in range(len(length)):
        size = int(length[d])
        if not varying[d]:
            values.append(np.array([-(-size // min(int(batch.tiles[0, d]), size))]))
            continue
        top = max(int(batch.tiles[:, d].max()), size)
        trips = -(-size // np.minimum(np.arange(1, top + 1), size))  # trip count of each tile size
        distinct, rank = np.unique(trips, return_inverse=True)
        values.append(distinct)
        codes = codes * len(distinct) + rank.ravel()[batch.tiles[:, d] - 1]
    present = np.zeros(int(np.prod([len(v) for v in values])), dtype=bool)
    present[codes] = True  # only the trip vectors that occur
    cells = np.unravel_index(np.flatnonzero(present), tuple(len(v) for v in values))
    grid = np.stack([v[c] for v, c in zip(values, cells, strict=True)], axis=1)
    hoist = np.broadcast_to(batch.hoist[0], (len(grid), *batch.hoist.shape[1:]))
    return reload_factors(batch.order[0], grid, hoist)[(np.cumsum(present) - 1)[codes]]


def lower_bound(problem: Problem, objective: Objective, batch: MappingBatch,
                grid: CoreGrid | None = None, varying: np.ndarray | None = None) -> np.ndarray:
    """(n,) values no candidate of ``batch`` can beat under ``objective`` (``batch`` has whole R, S tiles).
    ``varying`` (8,) flags the dimensions whose tiles may differ between candidates (default: found)."""
    arch = problem.arch
    prec = problem.precision
    grid = grid or problem.core_grid(batch.cluster_split, batch.core_split)
    n = len(batch)
    # Per operand: groups with equal core lengths share reload factors; sum their sweeps first.
    rho_cache: dict[tuple[int, ...], np.ndarray] = {}
    if varying is None:
        varying = batch.tiles.min(axis=0) != batch.tiles.max(axis=0) if n else np.zeros(len(DIMS), dtype=bool)
    dram = np.zeros(n)
    bursts = np.zeros(n)
    burst = arch.dram.burst_bytes
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        # Weight and output sweeps depend on a core's lengths only; input sweeps on its rows too.
        kinds: dict[tuple[object, ...], tuple[CoreSlice, int]] = {}
        for members in grid.groups[op]:
            core = grid.cores[members[0]]
            key = (core.length, core.offset) if op is Operand.INPUT else (core.length,)
            kinds[key] = (core, kinds[key][1] + 1 if key in kinds else 1)
        # Cores of one length share the cells: add their tables, then gather once.
        per_length: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        for core, count in kinds.values():
            elems, runs = _sweep_table(problem, core, op)
            elems, runs = elems * count, runs * count
            if core.length in per_length:
                e0, r0 = per_length[core.length]
                elems, runs = e0 + elems, r0 + runs
            per_length[core.length] = (elems, runs)
        for length_key, (elem_table, run_table) in per_length.items():
            cells = _sweep_cells(length_key, op, batch.tiles, batch.hoist[:, op])
            elems, runs = elem_table[cells], run_table[cells]
            if length_key not in rho_cache:
                rho_cache[length_key] = _reload(batch, np.array(length_key, dtype=np.int64), varying)
            rho = rho_cache[length_key][:, op]
            if op is Operand.OUTPUT:
                psum = 2 * (rho - 1) * elems * prec.psum
                dram += elems * prec.output + psum
                bursts += np.maximum(elems * prec.output / burst, runs) + psum / burst
            else:
                dram += rho * elems * prec.of(op)
                bursts += rho * np.maximum(elems * prec.of(op) / burst, runs)
    pes = int(np.prod(problem.lanes)) * arch.pe_array.macs_per_pe_per_cycle
    compute = max(int(np.prod(c.length)) * problem.op_factor for c in grid.shapes) / pes
    dram_cycles = dram / arch.dram_bytes_per_cycle + bursts * arch.burst_latency_cycles
    latency = np.maximum(compute, dram_cycles) if arch.overlap else compute + dram_cycles
    energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
        dram * arch.dram.energy_pj_per_byte
    return np.asarray(objective.combine(latency, energy, dram), dtype=np.float64) * np.ones(n)


def slicing_bound(problem: Problem, objective: Objective, grid: CoreGrid) -> float:
    """A value below :func:`lower_bound` of every TSO candidate of the core split ``grid``: ideal
    compute on the largest core, every multicast group moving its compulsory bytes once (a sweep's
    tiles cover at least those, reload factors are at least 1) in full bursts. Lowered by a relative
    1e-12 so that rounding never puts it above a candidate's bound."""
    from tileplan.search.split_bounds import _compulsory_elems

    arch = problem.arch
    prec = problem.precision
    dram = 0.0
    for op in OPERANDS:
        if problem.has_operand[op]:
            for members in grid.groups[op]:
                core = grid.cores[members[0]]
                dram += _compulsory_elems(problem, core.offset, core.length, op) * prec.of(op)
    pes = int(np.prod(problem.lanes)) * arch.pe_array.macs_per_pe_per_cycle
    compute = max(int(np.prod(c.length)) * problem.op_factor for c in grid.shapes) / pes
    dram_cycles = dram / arch.dram_bytes_per_cycle + dram / arch.dram.burst_bytes * arch.burst_latency_cycles
    latency = max(compute, dram_cycles) if arch.overlap else compute + dram_cycles
    energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
        dram * arch.dram.energy_pj_per_byte
    value = float(np.asarray(objective.combine(np.array([latency]), np.array([energy]), np.array([dram])))[0])
    return value - abs(value) * 1e-12
