"""Stage one of the cost model: the tables the kernel reads, a layer on an accelerator under one core
split as flat arrays (their format: ``cost.flat``), built once per (problem, split, layouts) and cached
on the problem (:func:`tables_for`, :func:`split_tables`, :func:`grid_tables`).

``cost.kernel`` takes one :class:`KernelTables` (a named tuple of integers, floats and arrays, so
numba can type it) instead of Python objects. Everything that does not depend on the candidate is
computed here once per (layer, accelerator, core split): the trip count and remainder tile of every
tile size of every dimension, each DRAM layout's plan (storage dimensions innermost first, bytes of
one step along each, whether a slice spans the tensor dimension, the bursts of a whole slice), and
the input rows/columns from the exact per-slice halo tables of ``cost.tables``, padded to a common
size, stacked per core shape and flattened.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import NamedTuple

import numpy as np

from tileplan.cost.batch import MappingBatch
from tileplan.cost.flat import (
    D_NEUTRAL,
    H_EVERY,
    H_FULL,
    H_MAX,
    H_PARTIAL,
    H_SUM,
    H_SUM00,
    N_HALO,
    N_PLAIN,
    N_PLAIN2,
    NREC,
    R_AXIS,
    R_DIM,
    R_LEN,
    R_OFF,
    S_LEN,
    S_TOFF,
    SREC,
    cdiv,
    log2_exact,
)
from tileplan.cost.problem import CoreGrid, Problem
from tileplan.cost.tables import halo_table
from tileplan.dims import DIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.mapping import LAYOUT_LETTERS, layout_options

# Canonical storage dimensions of each tensor (outermost first in the default layout) and, per
# layout letter, which of them it stands for (a channel letter includes the group dimension).
STORAGE_LOOP: dict[Operand, tuple[Dim, ...]] = {
    Operand.INPUT: (Dim.N, Dim.G, Dim.C, Dim.P, Dim.Q),  # H is indexed by (P, R), W by (Q, S)
    Operand.WEIGHT: (Dim.G, Dim.K, Dim.C, Dim.R, Dim.S),
    Operand.OUTPUT: (Dim.N, Dim.G, Dim.K, Dim.P, Dim.Q),
}
_LETTER_STORAGE: dict[Operand, dict[str, tuple[int, ...]]] = {
    Operand.INPUT: {"N": (0,), "C": (1, 2), "H": (3,), "W": (4,)},
    Operand.WEIGHT: {"K": (0, 1), "C": (2,), "R": (3,), "S": (4,)},
    Operand.OUTPUT: {"N": (0,), "K": (1, 2), "P": (3,), "Q": (4,)},
}


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


_LORDER = np.array([[storage_order(op, lay) for lay in layout_options(op)] for op in OPERANDS], dtype=np.int64)
_SDIM = np.array([[int(d) for d in STORAGE_LOOP[op]] for op in OPERANDS], dtype=np.int64)
_REL = np.array([[int(d in RELEVANT[op]) for d in DIMS] for op in OPERANDS], dtype=np.int64)
# Per (operand, layout code, position): the loop dimension indexing the storage dimension there, and
# the input halo axis (0 rows, 1 columns) or -1.
_LAYOUT_DIM = np.take_along_axis(_SDIM[:, None, :], _LORDER, axis=2)
_LAYOUT_AXIS = np.where((np.arange(3)[:, None, None] == 0) & (_LORDER >= 3), _LORDER - 3, -1)
assert all(len(LAYOUT_LETTERS[op]) == 4 for op in OPERANDS)
# (layout code, position) of every input storage position read from the halo table
_HALO_CODE, _HALO_POS = np.nonzero(_LAYOUT_AXIS[0] >= 0)


class KernelTables(NamedTuple):
    """Everything ``cost.kernel`` needs about (layer, accelerator, core split). Bytes, cycles, pJ."""

    kcount: np.ndarray  # (shapes,) cores running each shape
    srec: np.ndarray  # flat (shapes, kernel.SREC): per-shape record (fields kernel.S_*)
    trips: np.ndarray  # flat: trip count and remainder tile of every tile size of every (shape, dimension)
    prec: np.ndarray  # flat (shapes, 3, 24, 5, kernel.NREC): storage position records (fields kernel.R_*)
    ptab: np.ndarray  # flat plain-position table (fields kernel.P_*; kernel.N_PLAIN per entry, kernel.N_PLAIN2 output)
    halo: np.ndarray  # flat (shapes, 2, slots, out, hk_max, 2, 2, kernel.N_HALO) input halo table (fields kernel.H_*)
    hk_max: int  # kernel-tile extent of the halo table
    rel: np.ndarray  # (3, 8) 1 where a dimension indexes an operand
    relmask: np.ndarray  # (3,) the same as bitmasks (bit d: dimension d)
    has: np.ndarray  # (3,) 1 where the operand moves data
    ebytes: np.ndarray  # (3,) bytes per element in DRAM (output at output precision)
    onchip: np.ndarray  # (3,) bytes per element on chip (output at partial-sum precision)
    psum: int
    prec_in: int
    prec_w: int
    copies: int  # input tensors read (an n-ary add holds every addend)
    flat: np.ndarray  # (8,) 1 where a dimension runs on a flattened PE-array axis
    fax_dims: np.ndarray  # (axes, 4) dimensions of each flattened axis (unused slots: kernel.D_NEUTRAL)
    fax_lanes: np.ndarray  # (axes,)
    fax_shift: np.ndarray  # (axes,) log2(lanes) when a power of two, else -1
    op_factor: int
    macs_pe: int
    mem_of: np.ndarray  # (3,) memory index of each operand
    cap: np.ndarray  # (memories,) capacity
    dbl: int  # 2 when double-buffered
    gmem: np.ndarray  # (3, groups, shapes) 1 where a shape is in an operand's multicast group
    gcount: np.ndarray  # (3,) multicast groups of each operand
    macs: int
    e_mem: np.ndarray  # (3,) pJ/byte of the memory holding each operand
    e_mac: float
    e_rf: float
    e_noc: float
    e_dram: float
    noc_bw: float  # bytes/cycle (0: unlimited)
    dram_bw: float
    burst_lat: float
    overlap: int


def _halo_table(problem: Problem, grid: CoreGrid, input_codes: list[int]) -> np.ndarray:
    """The ``halo`` table of :class:`KernelTables`: every field of one (shape, axis, layout slot,
    output tile, kernel tile, hoist flags) entry side by side, so the kernel reads one cache line."""
    shapes = grid.shapes
    sizes = tensor_sizes(problem, Operand.INPUT)
    kernels = (int(problem.dims[Dim.R]), int(problem.dims[Dim.S]))
    out_max = max(max(c.length[Dim.P], c.length[Dim.Q]) for c in shapes)
    k_max = max(kernels)
    n_slots = max(1, len(input_codes))
    halo = np.zeros((len(shapes), 2, n_slots, out_max, k_max, 2, 2, N_HALO), dtype=np.int64)
    options = layout_options(Operand.INPUT)
    burst = problem.arch.dram.burst_bytes
    for s, core in enumerate(shapes):
        for a, dp in enumerate((Dim.P, Dim.Q)):
            out_len = core.length[dp]
            table = halo_table(out_len, problem.input_window_start(a, core.offset[dp]), sizes[3 + a],
                               problem.stride[a], problem.dilation[a], kernels[a])
            o, k = table.sum_ext.shape[:2]
            box = halo[s, a, :, :o, :k]
            box[..., H_SUM] = table.sum_ext
            box[..., H_MAX] = table.max_ext
            box[..., H_FULL] = table.nfull
            box[..., H_SUM00] = table.sum_ext[:, :, :1, :1]
            for slot, code in enumerate(input_codes):
                order = storage_order(Operand.INPUT, options[code])
                inner = problem.precision.input
                for e in order[order.index(3 + a) + 1:]:
                    inner *= sizes[e]
                every, partial = table.bursts(inner, burst)
                box[slot, ..., H_EVERY] = every
                box[slot, ..., H_PARTIAL] = partial
    return halo


def _positions(problem: Problem, length: np.ndarray, codes: tuple[tuple[int, ...], ...],
               hbase: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``prec`` (unflattened) and ``ptab`` of :class:`KernelTables` for the layout codes ``codes[op]``
    of each operand; ``hbase[s, axis, code]`` is where an input halo axis's block starts in ``halo``.

    A plain storage position (a tensor dimension indexed by one loop dimension: ``cost.tables``'s
    ``plain_stats`` and ``plain_bursts``) depends on the slice length L, on whether L is the whole
    tensor dimension and on the bytes of one step along it: for every tile size t = 1..L its entry
    holds the largest extent, whether boxes span the whole dimension, and the bursts over all
    positions and over those that are not whole (the output also at partial-sum precision).
    Positions that agree on those share one block of entries."""
    prec = problem.precision
    burst = int(problem.arch.dram.burst_bytes)
    records = np.zeros((len(length), 3, 24, 5, NREC), dtype=np.int64)
    records[..., R_DIM] = _LAYOUT_DIM
    records[..., R_AXIS] = _LAYOUT_AXIS
    records[..., R_LEN] = length[:, _LAYOUT_DIM]
    records[:, 0, _HALO_CODE, _HALO_POS, R_OFF] = hbase[:, _LAYOUT_AXIS[0, _HALO_CODE, _HALO_POS], _HALO_CODE]
    blocks: dict[tuple[int, ...], int] = {}
    parts: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    offset = 1
    ebytes = (prec.input, prec.weight, prec.output)
    entries: dict[tuple[int, ...], np.ndarray] = problem.__dict__.setdefault("_plain_entries", {})
    for op in OPERANDS:
        sizes = tensor_sizes(problem, op)
        for code in codes[op]:
            inner = int(ebytes[op])
            inner2 = int(prec.psum) if op is Operand.OUTPUT else inner
            for pos, e in reversed(list(enumerate(_LORDER[op, code]))):
                if _LAYOUT_AXIS[op, code, pos] < 0:
                    column = length[:, _SDIM[op, e]]
                    for n in dict.fromkeys(column.tolist()):  # shapes of one slice length share a block
                        key = (int(op), n, int(n == sizes[e]), inner, inner2)
                        if key not in blocks:
                            blocks[key] = offset
                            if key not in entries:  # the same for every split of the problem
                                entries[key] = _plain_entries(n, sizes[e], inner,
                                                              inner2 if op is Operand.OUTPUT else None, burst)
                            parts.append(entries[key])
                            offset += len(parts[-1])
                        records[column == n, op, code, pos, R_OFF] = blocks[key]
                inner *= sizes[e]
                inner2 *= sizes[e]
    return records, np.concatenate(parts).astype(np.int64, copy=False)


def _plain_entries(n: int, size: int, inner: int, inner2: int | None, burst: int) -> np.ndarray:
    """The entries (fields ``kernel.P_*``) of a plain storage position of a slice ``n`` long, of a
    tensor dimension ``size`` long, ``inner`` bytes per step (``inner2`` at partial-sum precision,
    output only), for tile sizes 1..n, flat."""
    t = np.arange(1, n + 1, dtype=np.int64)
    trips = cdiv(n, t)
    rem = n - (trips - 1) * t
    single = trips == 1
    whole = single & (n == size)
    fields = [np.where(single, n, t), whole.astype(np.int64)]
    for step in ((inner,) if inner2 is None else (inner, inner2)):
        every = np.where(single, cdiv(n * step, burst), (trips - 1) * cdiv(t * step, burst) + cdiv(rem * step, burst))
        fields += [every, np.where(whole, 0, every)]
    assert len(fields) == (N_PLAIN if inner2 is None else N_PLAIN2)
    return np.stack(fields, axis=1).ravel()


def _trip_pairs(n: int) -> np.ndarray:
    """For tile sizes ``t = 1..n`` of a slice ``n`` long: the trip count ``ceil(n / t)`` and the
    remainder tile, side by side (flat, 2n entries)."""
    t = np.arange(1, n + 1, dtype=np.int64)
    trips = cdiv(n, t)
    return np.stack([trips, n - (trips - 1) * t], axis=1).ravel()


def _trips(length: np.ndarray, cache: dict[int, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``toff`` and ``trips`` of :class:`KernelTables`: for every shape, dimension and tile size
    ``t = 1..length`` the trip count ``ceil(length / t)`` and the remainder tile, side by side
    (``cache``: the pairs of each slice length, kept between calls)."""
    if cache is None:
        cache = {}
    flat = length.ravel().tolist()
    ends = np.cumsum(length.ravel())
    toff = (ends - length.ravel() - 1).reshape(length.shape).astype(np.int64)
    parts = []
    for n in flat:
        pairs = cache.get(n)
        if pairs is None:
            pairs = cache[n] = _trip_pairs(n)
        parts.append(pairs)
    return toff, np.concatenate(parts).astype(np.int64, copy=False)


def kernel_tables(problem: Problem, grid: CoreGrid, codes: tuple[tuple[int, ...], ...]) -> KernelTables:
    """Tables for ``grid``; ``codes[op]`` are the layout codes of operand ``op`` the batch uses."""
    input_codes = list(codes[0])
    arch = problem.arch
    prec = problem.precision
    flat = np.zeros(8, dtype=np.int64)
    axes = problem.flattened_axes
    fax_dims = np.full((len(axes), 4), D_NEUTRAL, dtype=np.int64)
    for a, (dims, _) in enumerate(axes):
        for j, d in enumerate(dims):
            flat[d] = 1
            fax_dims[a, j] = int(d)
    n_shapes = len(grid.shapes)
    n_groups = max(len(g) for g in grid.groups)
    gmem = np.zeros((3, n_groups, n_shapes), dtype=np.int64)
    for op in OPERANDS:
        groups = grid.groups[op]
        members = np.fromiter(chain.from_iterable(groups), dtype=np.int64)
        gmem[op, np.repeat(np.arange(len(groups)), [len(m) for m in groups]), grid.shape_of[members]] = 1
    kcount = np.bincount(grid.shape_of, minlength=n_shapes).astype(np.int64)
    macs = sum(int(k) * math.prod(c.length) * problem.op_factor for k, c in zip(kcount, grid.shapes, strict=True))
    e_mem = [arch.memories[m].energy_pj_per_byte for m in problem.memory_of_operand]
    length = np.array([c.length for c in grid.shapes], dtype=np.int64)
    # The halo table reads only the shapes' rows and columns: splits that cut P and Q alike share it.
    halos: dict[tuple[object, ...], np.ndarray] = problem.__dict__.setdefault("_halo_tables", {})
    hkey = (tuple(input_codes), tuple((c.offset[Dim.P], c.length[Dim.P], c.offset[Dim.Q], c.length[Dim.Q])
                                      for c in grid.shapes))
    halo = halos.get(hkey)
    if halo is None:
        if len(halos) > 64:
            halos.clear()
        halo = halos[hkey] = _halo_table(problem, grid, input_codes)
    slots, out_max, k_max = halo.shape[2:5]
    hslot = np.zeros((24, 2), dtype=np.int64)
    for slot, code in enumerate(input_codes):
        hslot[code] = slot
    # The shape records, trip counts and storage positions read only the shapes' lengths (and the
    # layouts): splits whose shapes agree on them share these tables.
    per_lengths: dict[tuple[object, ...], tuple[np.ndarray, ...]] = problem.__dict__.setdefault("_length_tables", {})
    lkey = (length.shape, length.tobytes(), codes)
    hit = per_lengths.get(lkey)
    if hit is None:
        block = out_max * k_max * 4 * N_HALO
        hbase = ((np.arange(n_shapes)[:, None, None] * 2 + np.arange(2)[None, :, None]) * slots
                 + hslot.T[None]) * block
        # ``kernel.compute_cycles`` sums a flattened axis's steps as integers: exact as floats below 2**53.
        assert all(np.prod([float(x) for x in row[list(dims)]]) < 2**53 for row in length for dims, _ in axes)
        # R and S are never split: a tile of them is at most the kernel, which indexes the halo table directly.
        assert (length[:, Dim.R] == problem.dims[Dim.R]).all() and (length[:, Dim.S] == problem.dims[Dim.S]).all()
        toff, trips = _trips(length, problem.__dict__.setdefault("_trip_pairs", {}))
        srec = np.zeros((n_shapes, SREC), dtype=np.int64)
        srec[:, S_LEN:S_LEN + 8] = length
        srec[:, S_TOFF:S_TOFF + 8] = toff
        records, ptab = _positions(problem, length, codes, hbase)
        if len(per_lengths) > 64:
            per_lengths.clear()
        hit = per_lengths[lkey] = (srec.ravel(), trips, records.ravel(), ptab)
    srec_flat, trips, records_flat, ptab = hit
    return KernelTables(
        kcount=kcount, srec=srec_flat, trips=trips, prec=records_flat, ptab=ptab, halo=halo.ravel(),
        hk_max=int(k_max), rel=_REL, relmask=(_REL << np.arange(8)).sum(axis=1).astype(np.int64),
        has=np.array(problem.has_operand, dtype=np.int64),
        ebytes=np.array([prec.input, prec.weight, prec.output], dtype=np.int64),
        onchip=np.array([prec.input, prec.weight, prec.psum], dtype=np.int64),
        psum=int(prec.psum), prec_in=int(prec.input), prec_w=int(prec.weight), copies=int(problem.layer.input_count),
        flat=flat, fax_dims=fax_dims,
        fax_lanes=np.array([lanes for _, lanes in axes], dtype=np.int64),
        fax_shift=np.array([log2_exact(int(lanes)) for _, lanes in axes], dtype=np.int64),
        op_factor=int(problem.op_factor), macs_pe=int(arch.pe_array.macs_per_pe_per_cycle),
        mem_of=np.array(problem.memory_of_operand, dtype=np.int64), cap=problem.capacity_bytes.astype(np.int64),
        dbl=2 if arch.double_buffering else 1, gmem=gmem,
        gcount=np.array([len(g) for g in grid.groups], dtype=np.int64), macs=int(macs),
        e_mem=np.array(e_mem, dtype=np.float64), e_mac=float(arch.energy.mac_pj),
        e_rf=float(arch.register_file.energy_pj_per_access), e_noc=float(arch.noc.energy_pj_per_byte),
        e_dram=float(arch.dram.energy_pj_per_byte),
        noc_bw=float(arch.noc_bytes_per_cycle) if arch.noc_bytes_per_cycle is not None else 0.0,
        dram_bw=float(arch.dram_bytes_per_cycle), burst_lat=float(arch.burst_latency_cycles),
        overlap=int(bool(arch.overlap)),
    )


_DEFAULT_CODES = tuple((int(c),) for c in MappingBatch.default_layout_codes())


def tables_for(problem: Problem, batch: MappingBatch) -> KernelTables:
    """The kernel's tables for ``batch``'s core split and layouts (cached on the problem)."""
    if not len(batch):
        return split_tables(problem, batch.cluster_split, batch.core_split)
    codes = tuple(tuple(int(c) for c in np.flatnonzero(np.bincount(batch.layouts[:, op]))) for op in OPERANDS)
    return split_tables(problem, batch.cluster_split, batch.core_split, codes)


def split_tables(problem: Problem, cluster_split: tuple[int, ...], core_split: tuple[int, ...],
                 codes: tuple[tuple[int, ...], ...] | None = None) -> KernelTables:
    """Kernel tables of one core split for the layout codes ``codes[op]`` of each operand (default:
    the default layouts)."""
    if codes is None:
        codes = _DEFAULT_CODES
    cache: dict[tuple[object, ...], KernelTables] = problem.__dict__.setdefault("_kernel_tables", {})
    key = (tuple(cluster_split), tuple(core_split), codes)
    if key not in cache:
        if len(cache) > 64:
            cache.clear()
        cache[key] = kernel_tables(problem, problem.core_grid(cluster_split, core_split), codes)
    return cache[key]


def grid_tables(problem: Problem, grid: CoreGrid) -> KernelTables:
    """Kernel tables of a core grid the caller already built (default layouts; cached)."""
    cache: dict[int, tuple[CoreGrid, KernelTables]] = problem.__dict__.setdefault("_grid_tables", {})
    hit = cache.get(id(grid))
    if hit is None or hit[0] is not grid:
        if len(cache) > 64:
            cache.clear()
        hit = cache[id(grid)] = (grid, kernel_tables(problem, grid, _DEFAULT_CODES))
    return hit[1]
