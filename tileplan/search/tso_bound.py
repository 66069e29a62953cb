"""A lower bound on the model's objective for TSO candidates, so TSO's exhaustive search can visit its
space in bound order and stop early (the result is the same as evaluating every candidate).

Every term is below the model's: compute is the ideal (every MAC lane busy) on the largest core;
DRAM bytes are the model's reload factors (``cost.model.reload_factors``) times what one sweep of each
multicast group's tiles moves (exact: plain dimensions sum to the slice length, input rows and
columns sum the clipped windows of every tile); every contiguous run of r bytes costs at least
r / burst bursts. Multicast groups take one member where the model takes the most demanding one.
"""

from __future__ import annotations

import numpy as np

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import reload_factors
from tileplan.cost.problem import CoreSlice, Problem
from tileplan.dims import DIMS, OPERANDS, Dim, Operand
from tileplan.search.objective import Objective


def window_sum(problem: Problem, core: CoreSlice, axis: int, tiles: np.ndarray) -> np.ndarray:
    """Sum over a core's output-row (axis 0) or column (axis 1) tiles of the input rows/columns each
    tile's window covers inside the tensor (padding is not fetched), for every tile size in ``tiles``."""
    d_out, d_k = (Dim.P, Dim.R) if axis == 0 else (Dim.Q, Dim.S)
    size = problem.in_h if axis == 0 else problem.in_w
    stride, dil = problem.stride[axis], problem.dilation[axis]
    kernel = int(problem.dims[d_k])
    length = core.length[d_out]
    start = problem.input_window_start(axis, core.offset[d_out])
    t = np.minimum(np.arange(1, int(tiles.max()) + 1), length)[:, None]  # every tile size up to the largest
    i = np.arange(length)[None, :]
    ti = np.minimum(t, length - i * t)  # tile i's output rows (<= 0 past the last tile)
    first = start + i * t * stride
    ext = np.minimum(first + (ti - 1) * stride + (kernel - 1) * dil + 1, size) - np.maximum(first, 0)
    table = np.where(ti > 0, np.maximum(ext, 0), 0).sum(axis=1)
    return table[tiles - 1]


def _sweep_elems(problem: Problem, core: CoreSlice, op: Operand, tiles: np.ndarray) -> np.ndarray | int:
    """Elements one sweep of ``op``'s tiles moves for this core (kernel tiles are whole in TSO)."""
    L = dict(zip(DIMS, core.length, strict=True))
    if op is Operand.WEIGHT:
        return L[Dim.G] * L[Dim.K] * L[Dim.C] * L[Dim.R] * L[Dim.S]
    if op is Operand.OUTPUT:
        return L[Dim.N] * L[Dim.G] * L[Dim.K] * L[Dim.P] * L[Dim.Q]
    rows = window_sum(problem, core, 0, tiles[:, Dim.P])
    cols = window_sum(problem, core, 1, tiles[:, Dim.Q])
    return L[Dim.N] * L[Dim.G] * L[Dim.C] * rows * cols * problem.layer.input_count


def _reload(batch: MappingBatch, length: np.ndarray) -> np.ndarray:
    """``reload_factors`` of a core of ``length``, computed once per distinct trip vector (a TSO batch
    shares one loop order and hoisting)."""
    trips = -(-length // np.minimum(batch.tiles, length))
    flat = np.ravel_multi_index(trips.T - 1, tuple(int(x) for x in length))
    _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    rho = reload_factors(batch.order[first], trips[first], batch.hoist[first])
    return rho[inverse.ravel()]


def lower_bound(problem: Problem, objective: Objective, batch: MappingBatch) -> np.ndarray:
    """(n,) values no candidate of ``batch`` can beat under ``objective`` (``batch`` has whole R, S tiles)."""
    arch = problem.arch
    prec = problem.precision
    grid = problem.core_grid(batch.cluster_split, batch.core_split)
    n = len(batch)
    # Per operand: groups with equal core lengths share reload factors; sum their sweeps first.
    rho_cache: dict[tuple[int, ...], np.ndarray] = {}
    dram = np.zeros(n)
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        per_length: dict[tuple[int, ...], np.ndarray | int] = {}
        for members in grid.groups[op]:
            core = grid.cores[members[0]]
            elems = _sweep_elems(problem, core, op, batch.tiles)
            per_length[core.length] = per_length.get(core.length, 0) + elems
        for length_key, elems in per_length.items():
            if length_key not in rho_cache:
                rho_cache[length_key] = _reload(batch, np.array(length_key, dtype=np.int64))
            rho = rho_cache[length_key][:, op]
            if op is Operand.OUTPUT:
                dram += elems * prec.output + 2 * (rho - 1) * elems * prec.psum
            else:
                dram += rho * elems * prec.of(op)
    pes = int(np.prod(problem.lanes)) * arch.pe_array.macs_per_pe_per_cycle
    compute = max(int(np.prod(c.length)) * problem.op_factor for c in grid.shapes) / pes
    dram_cycles = dram / arch.dram_bytes_per_cycle + dram / arch.dram.burst_bytes * arch.burst_latency_cycles
    latency = np.maximum(compute, dram_cycles) if arch.overlap else compute + dram_cycles
    energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
        dram * arch.dram.energy_pj_per_byte
    return np.asarray(objective.combine(latency, energy, dram), dtype=np.float64) * np.ones(n)
