"""The on-chip level of the multi-level model (``cost.levels``): its counts, vectorised.

A mapping with ``levels`` (see ``mapping.Level``) runs, per core, the DRAM tile loops (``order``,
``tiles``), then inside each DRAM tile the level's temporal step loops (``level.order``), each step
spreading ``level.fanout`` children (PEs) over ``level.tiles``-sized pieces; each child holds its
piece of every operand in its own memory (L1: the arch's register file) and computes it.

The reload rule is the one of the DRAM level, applied to the flattened loop nest (DRAM loops, then
step loops): a child's tile of operand X is loaded once per iteration of every loop at or outside
the innermost loop that indexes X and has more than one trip (``q``); loops inside ``q`` that do not
index X give reuse. At each load, every child active somewhere inside ``q`` receives its piece;
children that differ only along dimensions not indexing X receive the same piece, which the parent
memory reads once and the NoC multicasts. Outputs are written back once per visit and reduced across
children that differ only along dimensions not indexing the output (spatial reduction); a revisit
reads the partial sums back. Every count is an exact sum over positions, remainders included,
computed as a product of per-dimension sums (``cost.leveldims``).

Stage two (:func:`onchip_sweep`: per core shape, the per-dimension sums, footprints, compute cycles)
and stage three (:func:`onchip_finish`: the DRAM and step orders give every count) mirror the DRAM
level's ``cost.kernel`` and ``cost.finish``; ``cost.levels.combine`` prices the counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tileplan.arrays import distinct
from tileplan.cost.batch import MappingBatch
from tileplan.cost.leveldims import ALL_TILES, REMAINDER_TILE, WHOLE_TILES, gather_halo, gather_stats
from tileplan.cost.problem import CoreSlice, Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand

_RELEVANT = np.array([[d in RELEVANT[op] for d in DIMS] for op in OPERANDS], dtype=bool)
_PLAIN: dict[Operand, tuple[Dim, ...]] = {  # storage dimensions indexed by one loop dimension
    Operand.INPUT: (Dim.N, Dim.G, Dim.C),
    Operand.WEIGHT: (Dim.G, Dim.K, Dim.C, Dim.R, Dim.S),
    Operand.OUTPUT: (Dim.N, Dim.G, Dim.K, Dim.P, Dim.Q),
}


@dataclass
class LevelCosts:
    """On-chip traffic of ``n`` candidates, in elements summed over all cores (arrays (n,) or (n, 3)).

    ``child_fills``: elements written into children's memories (each receiver counted);
    ``parent_reads``: elements the on-chip memory reads for them (a multicast read once; output:
    partial sums read back); ``parent_writes``: output elements written back after spatial reduction;
    ``child_footprint``: bytes one child holds of each operand; ``noc_bytes``: parent reads and writes
    in bytes (partial-sum precision for outputs).
    """

    child_fills: np.ndarray
    parent_reads: np.ndarray
    parent_writes: np.ndarray
    child_footprint: np.ndarray
    noc_bytes: np.ndarray
    noc_cycles: np.ndarray  # the slowest core's NoC time
    compute_cycles: np.ndarray  # the slowest core
    children: np.ndarray  # fan-out product (PEs a step asks for)
    feasible: np.ndarray

    def take(self, index: np.ndarray) -> LevelCosts:
        """The candidates at ``index`` (repeats allowed)."""
        return LevelCosts(self.child_fills[index], self.parent_reads[index], self.parent_writes[index],
                          self.child_footprint[index], self.noc_bytes[index], self.noc_cycles[index],
                          self.compute_cycles[index], self.children[index], self.feasible[index])


def _irrelevant_factors(stats: list[dict[str, np.ndarray]], state: np.ndarray, op: Operand
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Products over the dimensions not indexing ``op`` of (receivers, distinct pieces) per load."""
    n = state.shape[0]
    recv = np.ones(n, dtype=np.int64)
    distinct = np.ones(n, dtype=np.int64)
    for d in DIMS:
        if d in RELEVANT[op]:
            continue
        s = state[:, d]
        st = stats[d]
        recv *= np.choose(s, [st["recv_any"], st["recv_tile"], st["leaves"]])
        distinct *= np.choose(s, [np.ones(n, dtype=np.int64), st["tiles"], st["steps"]])
    return recv, distinct


def _positions(order: np.ndarray, offset: int) -> np.ndarray:
    """Loop position of each dimension (``offset`` + index in ``order``), (8,) or (n, 8) like ``order``."""
    return np.argsort(order, axis=-1) + offset


def _states(order0: np.ndarray, order1: np.ndarray | None, trips0: np.ndarray, trips1: np.ndarray, op: Operand
            ) -> np.ndarray:
    """(n, 8): how many of each dimension's two loops (DRAM, step) are at or outside ``q``. The
    orders are (8,) (shared by every candidate) or (n, 8). ``order1`` ``None``: the least over
    every step order, the DRAM loops' part alone (every step loop sits inside every DRAM loop, so
    ``q`` is a step loop, with every DRAM loop outside it, as soon as a step loop indexing ``op``
    has more than one trip, whatever the step order; the step loops' part can be 0)."""
    pos0 = _positions(order0, 0)
    rel = _RELEVANT[op][None, :]
    live0 = rel & (trips0 > 1)
    live1 = rel & (trips1 > 1)
    q0 = np.max(np.where(live0, pos0, -1), axis=1)
    if order1 is None:
        q = np.where(np.any(live1, axis=1), NDIMS, q0)
        return (pos0 <= q[:, None]).astype(np.int64)
    pos1 = _positions(order1, NDIMS)
    q = np.maximum(q0, np.max(np.where(live1, pos1, -1), axis=1))
    return (pos0 <= q[:, None]).astype(np.int64) + (pos1 <= q[:, None]).astype(np.int64)


@dataclass
class _CoreSweep:
    """Order-independent quantities of one core shape (arrays over candidates)."""

    stats: list[dict[str, np.ndarray]]
    trips0: np.ndarray
    trips1: np.ndarray
    elems: list[np.ndarray]  # per operand: elements of one sweep of its pieces (input: every addend)
    footprint: np.ndarray  # (n, 3) bytes one child holds
    compute: np.ndarray
    part_elems: Callable[[Operand, np.ndarray], np.ndarray]  # ``elems`` over a subset of DRAM tiles
    rem_trips1: np.ndarray  # (n, 8) step trips in a dimension's remainder DRAM tile
    split: np.ndarray  # (n, 8) whole DRAM tiles have several steps, the remainder tile one

    def take(self, index: np.ndarray) -> _CoreSweep:
        def part_elems(op: Operand, parts: np.ndarray) -> np.ndarray:
            full = np.zeros((len(self.compute), NDIMS), dtype=np.int64)
            full[index] = parts
            return self.part_elems(op, full)[index]
        return _CoreSweep([{k: v[index] for k, v in st.items()} for st in self.stats], self.trips0[index],
                          self.trips1[index], [e[index] for e in self.elems], self.footprint[index],
                          self.compute[index], part_elems, self.rem_trips1[index], self.split[index])


def _core_sweep(problem: Problem, core: CoreSlice, tiles0: np.ndarray, tiles: np.ndarray, fanout: np.ndarray
                ) -> _CoreSweep:
    n = len(tiles0)
    length = np.array(core.length, dtype=np.int64)
    t0 = np.minimum(tiles0, length)
    stats = [gather_stats(int(length[d]), t0[:, d], tiles[:, d], fanout[:, d]) for d in DIMS]
    box = np.stack([s["box"] for s in stats], axis=1)
    prec = problem.precision
    footprint = np.zeros((n, 3), dtype=np.int64)
    elems_of = []

    def part_elems(op: Operand, parts: np.ndarray) -> np.ndarray:
        """Elements of one sweep of ``op``'s pieces over the DRAM tiles ``parts`` ((n, 8) of
        ``leveldims`` ALL_TILES / WHOLE_TILES / REMAINDER_TILE per dimension), every addend."""
        span = np.where(parts == WHOLE_TILES, length // t0 * t0, np.where(parts == REMAINDER_TILE, length % t0, length))
        elems = np.prod(span[:, list(_PLAIN[op])], axis=1)
        if op is Operand.INPUT:
            for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
                total, _ = gather_halo(
                    int(length[dp]), int(length[dk]), problem.input_window_start(axis, core.offset[dp]),
                    problem.in_h if axis == 0 else problem.in_w, problem.stride[axis], problem.dilation[axis],
                    (t0[:, dp], tiles[:, dp], fanout[:, dp], parts[:, dp]),
                    (t0[:, dk], tiles[:, dk], fanout[:, dk], parts[:, dk]))
                elems = elems * total
        return (problem.layer.input_count if op is Operand.INPUT else 1) * elems

    for op in OPERANDS:
        piece = np.prod(box[:, list(_PLAIN[op])], axis=1)
        copies = problem.layer.input_count if op is Operand.INPUT else 1
        if op is Operand.INPUT:
            for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
                _, widest = gather_halo(
                    int(length[dp]), int(length[dk]), problem.input_window_start(axis, core.offset[dp]),
                    problem.in_h if axis == 0 else problem.in_w, problem.stride[axis], problem.dilation[axis],
                    (t0[:, dp], tiles[:, dp], fanout[:, dp]), (t0[:, dk], tiles[:, dk], fanout[:, dk]))
                piece = piece * widest
        elems_of.append(part_elems(op, np.zeros((n, NDIMS), dtype=np.int64)))
        if problem.has_operand[op]:
            footprint[:, op] = copies * piece * (prec.psum if op is Operand.OUTPUT else prec.of(op))
    steps = np.prod(np.stack([s["step_max"] for s in stats], axis=1), axis=1)
    compute = np.ceil(steps * float(problem.op_factor) / problem.arch.pe_array.macs_per_pe_per_cycle)
    trips1 = np.stack([s["step_trips"] for s in stats], axis=1)
    step = np.minimum(tiles, t0) * fanout
    rem_trips1 = -(-(length % t0) // step)
    split = (length % t0 > 0) & (trips1 > 1) & (rem_trips1 == 1)
    return _CoreSweep(stats, np.stack([s["tiles"] for s in stats], axis=1), trips1, elems_of, footprint, compute,
                      part_elems, rem_trips1, split)


def _core_order(problem: Problem, cs: _CoreSweep, order0: np.ndarray | None, order1: np.ndarray | None
                ) -> dict[str, np.ndarray]:
    """Per-core on-chip counts of one core shape under the loop orders ((8,) or (n, 8) each). With
    no orders (``None``), the least every order can give: each operand loaded once (every state 0;
    the counts only grow with the states), a lower bound over all DRAM and step orders; with
    ``order0`` but no ``order1``, the least over every step order under that DRAM order."""
    n = len(cs.compute)
    prec = problem.precision
    fills = np.zeros((n, 3), dtype=np.int64)
    reads = np.zeros((n, 3), dtype=np.int64)
    writes = np.zeros(n, dtype=np.int64)
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        if order0 is None:
            state = np.zeros((n, NDIMS), dtype=np.int64)
            recv, distinct = _irrelevant_factors(cs.stats, state, op)
            recv_sum, distinct_sum = cs.elems[op] * recv, cs.elems[op] * distinct
        else:
            recv_sum, distinct_sum = _classes(cs, order0, order1, op)
        elems = cs.elems[op]
        if op is Operand.OUTPUT:
            writes = distinct_sum
            reads[:, op] = writes - elems
            fills[:, op] = reads[:, op]
        else:
            fills[:, op] = recv_sum
            reads[:, op] = distinct_sum
    noc = reads[:, 0] * prec.input + reads[:, 1] * prec.weight + (reads[:, 2] + writes) * prec.psum
    return {"fills": fills, "reads": reads, "writes": writes, "noc": noc}


def _classes(cs: _CoreSweep, order0: np.ndarray, order1: np.ndarray | None, op: Operand
             ) -> tuple[np.ndarray, np.ndarray]:
    """(sum of elements x receivers, sum of elements x distinct pieces) of ``op`` over its loads.

    The reload rule holds per DRAM tile: a step loop is multi-trip in a tile only if that tile has
    several steps. Where a dimension indexing ``op`` has several steps in its whole DRAM tiles but
    one in its remainder tile (``split``), the DRAM tiles fall into classes (per such dimension:
    whole tiles or the remainder tile); each class gets its own states, and its elements are summed
    over its tiles alone. (The classes stay fixed inside one iteration of the innermost multi-trip
    DRAM loop indexing ``op``: the loops inside it that index ``op`` have one trip.)"""
    n = len(cs.compute)
    rel = [d for d in DIMS if d in RELEVANT[op] and cs.split[:, d].any()]
    recv_sum = np.zeros(n, dtype=np.int64)
    distinct_sum = np.zeros(n, dtype=np.int64)
    for bits in range(1 << len(rel)):
        rem = [d for i, d in enumerate(rel) if bits >> i & 1]
        mask = np.all(cs.split[:, rem], axis=1) if rem else np.ones(n, dtype=bool)
        if not mask.any():
            continue
        parts = np.zeros((n, NDIMS), dtype=np.int64)
        trips1 = cs.trips1.copy()
        for d in rel:
            parts[:, d] = np.where(cs.split[:, d], REMAINDER_TILE if d in rem else WHOLE_TILES, ALL_TILES)
            if d in rem:
                trips1[:, d] = cs.rem_trips1[:, d]
        elems = np.where(mask, cs.part_elems(op, parts) if rel else cs.elems[op], 0)
        recv, distinct = _irrelevant_factors(cs.stats, _states(order0, order1, cs.trips0, trips1, op), op)
        recv_sum += elems * recv
        distinct_sum += elems * distinct
    return recv_sum, distinct_sum


@dataclass
class OnChipSweep:
    """Stage one of the on-chip model for a batch sharing one core split: everything but the orders."""

    problem: Problem
    counts: np.ndarray  # cores of each shape
    cores: list[_CoreSweep]
    children: np.ndarray
    feasible: np.ndarray
    footprint: np.ndarray
    compute: np.ndarray

    def __len__(self) -> int:
        return len(self.feasible)

    def take(self, index: np.ndarray) -> OnChipSweep:
        """The candidates at ``index`` (repeats allowed)."""
        return OnChipSweep(self.problem, self.counts, [c.take(index) for c in self.cores], self.children[index],
                           self.feasible[index], self.footprint[index], self.compute[index])


def onchip_sweep(problem: Problem, batch: MappingBatch, tiles: np.ndarray, fanout: np.ndarray) -> OnChipSweep:
    """Stage one: per core shape, the per-dimension sums, footprints and compute cycles."""
    arch = problem.arch
    grid = problem.core_grid(batch.cluster_split, batch.core_split)
    counts = np.bincount(grid.shape_of, minlength=len(grid.shapes))
    cores = [_core_sweep(problem, core, batch.tiles, tiles, fanout) for core in grid.shapes]
    footprint = np.max([c.footprint for c in cores], axis=0)
    rf = arch.register_file
    capacity = np.array([rf.inputs_bytes, rf.weights_bytes, rf.psums_bytes], dtype=np.int64)
    factor = 2 if arch.double_buffering else 1
    children = np.prod(fanout, axis=1)
    feasible = np.all(footprint * factor <= capacity[None, :], axis=1) & (
        children <= arch.total_pes(problem.precision.input))
    return OnChipSweep(problem, counts, cores, children, feasible, footprint,
                       np.max([c.compute for c in cores], axis=0))


def onchip_finish(sw: OnChipSweep, order0: np.ndarray | None, order1: np.ndarray | None) -> LevelCosts:
    """Stage two: the DRAM and step loop orders ((n, 8) or (8,)) give every count. With ``None``
    orders: a lower bound of every count over all orders (see :func:`onchip_bound`)."""
    per = [_core_order(sw.problem, c, order0, order1) for c in sw.cores]
    total = {key: np.sum([int(k) * p[key] for p, k in zip(per, sw.counts, strict=True)], axis=0)
             for key in ("fills", "reads", "writes", "noc")}
    noc_core = np.max([p["noc"] for p in per], axis=0).astype(np.float64)
    bw = sw.problem.arch.noc_bytes_per_cycle
    noc_cycles = noc_core / bw if bw is not None else np.zeros(len(sw.feasible))
    return LevelCosts(total["fills"], total["reads"], total["writes"], sw.footprint, total["noc"], noc_cycles,
                      sw.compute, sw.children, sw.feasible)


def onchip_bound(sw: OnChipSweep, order0: np.ndarray | None = None) -> LevelCosts:
    """A lower bound of every on-chip count (and so of NoC time and energy) over all DRAM and step
    loop orders: each operand's pieces loaded once; with ``order0`` ((8,) or (n, 8)), over all step
    orders under that DRAM order (its reloads counted: tighter). Compute cycles and footprints are
    exact (they do not depend on the orders). Used to prune candidates safely before costing their
    orders."""
    return onchip_finish(sw, order0, None)


def touched_input_elements(problem: Problem) -> int:
    """Input elements (every addend) some output reads: each is sent to a PE at least once by any
    on-chip mapping (padding is never held; a stride above the window skips rows)."""
    count = problem.layer.input_count * int(problem.dims[Dim.N] * problem.dims[Dim.G] * problem.dims[Dim.C])
    for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
        size = problem.in_h if axis == 0 else problem.in_w
        first = problem.input_window_start(axis, 0)
        rows = (first + np.arange(int(problem.dims[dp]))[:, None] * problem.stride[axis]
                + np.arange(int(problem.dims[dk]))[None, :] * problem.dilation[axis])
        count *= len(distinct(rows[(rows >= 0) & (rows < size)]))
    return count


def onchip_floor(problem: Problem, compute_cycles: np.ndarray) -> LevelCosts:
    """A lower bound of every on-chip count over every on-chip level (any tiles, fan-outs and orders)
    of a single-core mapping: each touched input, each weight sent to a PE once, each output written
    once, nothing read back; ``compute_cycles`` (n,) is the caller's lower bound of compute time."""
    n = len(compute_cycles)
    prec = problem.precision
    dims = problem.dims
    elems = np.array([touched_input_elements(problem),
                      int(dims[Dim.G] * dims[Dim.K] * dims[Dim.C] * dims[Dim.R] * dims[Dim.S]), 0], dtype=np.int64)
    elems *= np.array(problem.has_operand, dtype=np.int64)
    out = int(dims[Dim.N] * dims[Dim.G] * dims[Dim.K] * dims[Dim.P] * dims[Dim.Q])
    reads = np.broadcast_to(elems, (n, 3)).copy()
    writes = np.full(n, out, dtype=np.int64)
    noc = reads[:, 0] * prec.input + reads[:, 1] * prec.weight + writes * prec.psum
    bw = problem.arch.noc_bytes_per_cycle
    noc_cycles = noc / bw if bw is not None else np.zeros(n)
    return LevelCosts(reads.copy(), reads, writes, np.zeros((n, 3), dtype=np.int64), noc, noc_cycles,
                      np.asarray(compute_cycles, dtype=np.float64), np.ones(n, dtype=np.int64), np.ones(n, dtype=bool))
