"""The PEs' register files as a storage level of the exhaustive search: per-operand bypass.

A machine whose PEs have register files (``arch.register_file``) can hold an operand's DRAM tiles
there instead of in the on-chip buffer: the tile goes from DRAM straight to the PEs, each keeping
its piece for the whole tile's life (nn_dataflow's per-operand GBUF bypass). The buffer then holds
only the other operands, so their tiles can grow, and DRAM traffic can fall. The DRAM level is
the one model's (``cost.model``), unchanged: the same tiles, loop order and reload rule; only where
the bypassed operand's tile lives changes:

- the on-chip memory that held operand X no longer holds it; X lives in a memory made of the
  register files (:func:`bypass_problem`: its capacity is every PE's share for X, a relaxation), and
- each PE's piece of X's tile must fit its own register file (:func:`pe_piece_bytes`, the exact
  rule): a PE's piece spans ``ceil(tile / unroll)`` of every dimension indexing X (the spatial
  unrolling spreads the tile over the PEs; a dimension X does not depend on replicates it); an
  input piece spans the window of its output rows and columns. ``cost.levels`` gives the same
  footprint for a one-step on-chip level (fan-out = unroll), which ``tests/test_rf_level.py`` checks.

Energy: the bypassed operand's fills are register-file writes (the register file's energy per
access, per byte of the operand) instead of buffer writes. A mapping records its bypass
(``Mapping.bypass``); :func:`recost` costs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache

import numpy as np

from tileplan.arch.load import from_dict
from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import CoreGrid, Problem
from tileplan.dims import NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.errors import MappingError
from tileplan.mapping import Mapping


def rf_bytes(arch: Arch) -> tuple[int, int, int]:
    """Register-file bytes per PE for input, weight and output (partial sums)."""
    rf = arch.register_file
    return rf.inputs_bytes, rf.weights_bytes, rf.psums_bytes


#: An operand bypasses its buffer only when the register files of all PEs together hold at least this
#: share of that buffer for it (the bound that keeps planning fast; see :func:`bypass_options`).
RF_SHARE_MIN = 1 / 2


def bypass_options(problem: Problem) -> list[Operand]:
    """Operands that may bypass the on-chip buffer on ``problem``: moved by the layer, sharing their
    buffer with another operand (alone in a memory, moving it frees no room for the others), and
    with register files that together hold at least :data:`RF_SHARE_MIN` of that buffer.

    The last condition bounds the search: each option is one more exhaustive search of the layer
    (about as long as the plain one), and a bypassed tile lives in the register files, so when they
    hold a small fraction of the buffer, that operand's tiles shrink by as much -- it, or the
    operands it is reused against, is reloaded far more than the room freed saves (on nn_dataflow's
    machine, 24 B of inputs and 40 B of partial sums per PE against a 128 KiB buffer, 5-8 % of it: no
    ResNet-50 layer gains; 448 B of weights per PE, 88 % of it: the 3x3 layers of stage 2 move 3.2 %
    less). Of the presets, ``edge`` qualifies (its register files hold more than its buffer);
    ``eyeriss`` (weights 39 %) and the HW-Flow-Fusion machines (at most 38 %) do not."""
    arch = problem.arch
    caps = rf_bytes(arch)
    pes = arch.total_pes(problem.precision.input)
    out = []
    for op in OPERANDS:
        memory = arch.memories[problem.memory_of_operand[op]]
        if problem.has_operand[op] and len(memory.operands) > 1 and caps[op] > 0 \
                and caps[op] * pes >= RF_SHARE_MIN * memory.size_bytes:
            out.append(op)
    return out


@cache
def _bypass_arch(arch: Arch, ops: frozenset[Operand], precision_bytes: int) -> Arch:
    memories = []
    for m in arch.memories:
        kept = [o for o in m.operands if Operand.parse(o) not in ops]
        if kept:
            memories.append(m.to_dict() | {"operands": kept})
    pes = arch.total_pes(precision_bytes)
    caps = rf_bytes(arch)
    rf = arch.register_file
    for op in sorted(ops):
        memories.append({"name": f"register files ({op.label})", "operands": [op.label],
                         "size_bytes": caps[op] * pes,
                         "energy_pj_per_byte": rf.energy_pj_per_access / precision_bytes})
    return from_dict(arch.to_dict() | {"memories": memories}, f"{arch.name} with register files")


#: Tables a ``Problem`` keeps that read only its layer, DRAM and core slices, never its memories (the
#: kernel tables' halo, trip-count, storage-position and plain-burst tables; the tile groups' storage
#: steps): a bypass variant shares them with its problem.
SHARED_TABLES = ("_halo_tables", "_length_tables", "_trip_pairs", "_plain_entries", "_step_bytes")


def bypass_problem(problem: Problem, ops: frozenset[Operand]) -> Problem:
    """``problem`` with ``ops`` held in the register files (see the module docstring); cached on it."""
    cache_of: dict[frozenset[Operand], Problem] = problem.__dict__.setdefault("_bypass_problems", {})
    if ops not in cache_of:
        variant = Problem(problem.layer, _bypass_arch(problem.arch, ops, problem.precision.input))
        for name in SHARED_TABLES:
            variant.__dict__[name] = problem.__dict__.setdefault(name, {})
        cache_of[ops] = variant
    return cache_of[ops]


def pe_piece_bytes(problem: Problem, grid: CoreGrid, op: Operand, tiles: np.ndarray, unroll: np.ndarray,
                   hoist: np.ndarray | None = None) -> np.ndarray:
    """(n,) bytes of the largest piece of ``op``'s DRAM tile one PE holds, for tiles and unroll
    factors (n, 8) on the cores of ``grid`` (the longest core slice; ``hoist`` (n, 3, 8): dimensions
    along which ``op``'s tile spans the whole slice)."""
    length = np.array(grid.max_length, dtype=np.int64)
    t = np.minimum(np.asarray(tiles, dtype=np.int64), length)
    if hoist is not None and np.asarray(hoist)[:, op, :].any():
        t = np.where(np.asarray(hoist)[:, op, :], length, t)
    piece = -(-t // np.asarray(unroll, dtype=np.int64))
    elems = np.ones(len(t), dtype=np.int64)
    prec = problem.precision
    if op is Operand.INPUT:
        for d in (Dim.N, Dim.G, Dim.C):
            elems *= piece[:, d]
        for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
            size = problem.in_h if axis == 0 else problem.in_w
            rows = (piece[:, dp] - 1) * problem.stride[axis] + (piece[:, dk] - 1) * problem.dilation[axis] + 1
            elems *= np.minimum(rows, size)
        return elems * problem.layer.input_count * prec.input
    for dim in RELEVANT[op]:
        elems *= piece[:, dim]
    return elems * (prec.psum if op is Operand.OUTPUT else prec.of(op))


def pe_fits(problem: Problem, grid: CoreGrid, ops: frozenset[Operand], tiles: np.ndarray, unroll: np.ndarray,
            hoist: np.ndarray | None = None) -> np.ndarray:
    """(n,) whether every PE's piece of each bypassed operand fits its register file (twice, when
    the machine double-buffers)."""
    caps = rf_bytes(problem.arch)
    factor = 2 if problem.arch.double_buffering else 1
    ok = np.ones(len(tiles), dtype=bool)
    for op in ops:
        ok &= pe_piece_bytes(problem, grid, op, tiles, unroll, hoist) * factor <= caps[op]
    return ok


def fits_without_bypass(problem: Problem, grid: CoreGrid, ops: frozenset[Operand], tiles: np.ndarray,
                        hoist: np.ndarray | None = None) -> np.ndarray:
    """(n,) tile vectors that surely fit ``problem``'s memories with nothing bypassed (an upper bound
    of every operand's tile footprint: the piece of :func:`pe_piece_bytes` on one PE), given that the
    memories the bypassed ``ops`` leave already hold their other operands. Such a tile vector moves
    the same DRAM bytes either way, so a bypass cannot lower the least DRAM traffic with it."""
    arch = problem.arch
    ones = np.ones_like(np.asarray(tiles, dtype=np.int64))
    factor = 2 if arch.double_buffering else 1
    ok = np.ones(len(tiles), dtype=bool)
    for m in {problem.memory_of_operand[op] for op in ops}:
        need = np.zeros(len(tiles), dtype=np.int64)
        for op in OPERANDS:
            if problem.memory_of_operand[op] == m and problem.has_operand[op]:
                need += pe_piece_bytes(problem, grid, op, tiles, ones, hoist)
        ok &= need * factor <= arch.memories[m].size_bytes
    return ok


def fitting_unroll(problem: Problem, grid: CoreGrid, ops: frozenset[Operand], tiles: np.ndarray,
                   options: np.ndarray, fastest: np.ndarray, cycles: Callable[[np.ndarray, np.ndarray], np.ndarray],
                   hoist: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each tile vector of ``tiles`` (n, 8): the fastest of the unroll ``options`` (k, 8) whose
    pieces fit, the first on a tie; and whether any fits. ``fastest`` (n, 8) is each row's fastest
    option regardless of fit (the plain search's choice: kept where it fits); ``cycles(tiles,
    unroll)`` gives compute cycles (n,) for the other rows. Rows where none fits keep ``fastest``."""
    unroll = np.array(fastest, dtype=np.int64, copy=True)
    fits = pe_fits(problem, grid, ops, tiles, unroll, hoist)
    rest = np.flatnonzero(~fits)
    if not len(rest) or len(options) == 1:
        return unroll, fits
    sub = tiles[rest]
    sub_hoist = None if hoist is None else hoist[rest]
    best = np.full(len(rest), np.inf)
    choice = np.full(len(rest), -1, dtype=np.int64)
    for k, u in enumerate(options):
        ok = pe_fits(problem, grid, ops, sub, np.broadcast_to(u, (len(rest), NDIMS)), sub_hoist)
        if not ok.any():
            continue
        at = np.flatnonzero(ok)
        cyc = np.full(len(rest), np.inf)
        cyc[at] = cycles(sub[at], u)
        better = cyc < best
        best = np.where(better, cyc, best)
        choice = np.where(better, k, choice)
    found = choice >= 0
    unroll[rest[found]] = options[choice[found]]
    fits[rest[found]] = True
    return unroll, fits


def recost(problem: Problem, mapping: Mapping) -> CostBatch:
    """The cost of ``mapping`` on ``problem`` with its operands in ``mapping.bypass`` held in the
    register files (length-1 batch; not feasible when a PE's piece does not fit). Footprints are
    those of ``problem``'s memories (a bypassed operand takes no room in its buffer)."""
    bad = [op.label for op in mapping.bypass if op not in bypass_options(problem)]
    if bad:
        raise MappingError(f"mapping bypasses the on-chip buffer for the {', '.join(bad)}, which "
                           f"{problem.arch.name} cannot hold in its register files (no register-file bytes "
                           f"for it, or it has a buffer of its own); drop it from 'bypass'")
    variant = bypass_problem(problem, mapping.bypass)
    batch = MappingBatch.from_mappings([mapping])
    cost = evaluate(variant, batch)
    grid = variant.core_grid(batch.cluster_split, batch.core_split)
    fits = pe_fits(variant, grid, mapping.bypass, batch.tiles, batch.unroll, batch.hoist)
    if not fits[0]:
        inf = np.array([np.inf])
        cost = replace(cost, feasible=np.zeros(1, dtype=bool), dram_cycles=inf, compute_cycles=inf.copy(),
                       noc_cycles=inf.copy(), latency_cycles=inf.copy(),
                       energy_breakdown_pj=cost.energy_breakdown_pj + np.inf)
    return real_footprints(problem, variant, cost)


def pe_problems(problem: Problem, mapping: Mapping) -> list[str]:
    """Why a PE's piece of a bypassed operand of ``mapping`` does not fit its register file (empty: it fits)."""
    if not mapping.bypass:
        return []
    batch = MappingBatch.from_mappings([mapping])
    grid = problem.core_grid(batch.cluster_split, batch.core_split)
    caps = rf_bytes(problem.arch)
    factor = 2 if problem.arch.double_buffering else 1
    out = []
    for op in sorted(mapping.bypass):
        need = int(pe_piece_bytes(problem, grid, op, batch.tiles, batch.unroll, batch.hoist)[0]) * factor
        if need > caps[op]:
            out.append(f"a PE's piece of the bypassed {op.label} tile needs {need} B"
                       f"{' double-buffered' if factor == 2 else ''} but its register file holds {caps[op]} B")
    return out


def real_footprints(problem: Problem, variant: Problem, cost: CostBatch) -> CostBatch:
    """``cost`` (on ``variant``) with footprints per memory of ``problem`` (bypassed operands drop out)."""
    names = [m.name for m in variant.arch.memories]
    fp = np.zeros((len(cost.feasible), len(problem.arch.memories)), dtype=np.int64)
    for i, m in enumerate(problem.arch.memories):
        if m.name in names:
            fp[:, i] = cost.footprint_bytes[:, names.index(m.name)]
    cost.footprint_bytes = fp
    return cost


__all__ = ["bypass_options", "bypass_problem", "fits_without_bypass", "fitting_unroll", "pe_fits", "pe_piece_bytes",
           "pe_problems", "real_footprints", "recost", "rf_bytes"]
