"""The split bounds of every core split of a layer at once: :class:`SplitBounds`, arrays over the
splits of a ``SplitTable`` with the same numbers as the one-split bounds of ``search.split_bounds``,
bit for bit, and the tables they are built from (``*_table``); ``row_compute_bound`` bounds the
compute cycles of given tile vectors (``SplitBounds.row_bounds`` turns it into an objective).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.cost.model import storage_order, tensor_sizes
from tileplan.cost.problem import Problem, SplitTable
from tileplan.dims import DIMS, OPERANDS, Dim, Operand
from tileplan.search.bounds import min_dram_bytes
from tileplan.search.objective import Objective
from tileplan.search.split_bounds import _ROUNDING_MARGIN, _input_line_axis, _line_cost


@dataclass
class SplitBounds:
    """The split bounds of every core split of a layer at once, as arrays over the splits of a
    ``SplitTable`` (same numbers as ``search.split_bounds``'s :func:`split_lower_bound`,
    :func:`split_run_bound` and :func:`split_tight_bound`, bit for bit: the same float operations in
    the same order)."""

    problem: Problem
    table: SplitTable
    objective: Objective
    lower: np.ndarray  # (splits,) split_lower_bound
    run: np.ndarray  # (splits,) split_run_bound
    compute: np.ndarray  # (splits,) min_compute_cycles
    group_bytes: np.ndarray  # (splits, 4) compulsory bytes of input, weight, output, psums over multicast groups
    weighted: np.ndarray | None  # (splits, 4) those bytes weighted by DRAM cycles per byte (None: no burst latency)
    runs: np.ndarray  # (splits,) ``run`` with the bursts of :func:`burst_rates_table` (``run`` without burst latency)
    weighted_runs: np.ndarray | None  # (splits, 4) the bytes weighted by :func:`burst_rates_table`'s rates
    dram: np.ndarray  # (splits,) DRAM bytes no mapping of the split moves less than (compulsory, once)
    dram_cycles: np.ndarray  # (splits,) DRAM cycles no mapping of the split takes less than

    @classmethod
    def of(cls, problem: Problem, table: SplitTable, objective: Objective) -> SplitBounds:
        arch = problem.arch
        prec = problem.precision
        has = problem.has_operand
        elems = [table.group_elements(problem, op) if has[op] else np.zeros(len(table), dtype=np.int64)
                 for op in OPERANDS]
        # split_lower_bound
        pes = 1
        for axis_lanes in problem.lanes:
            pes *= axis_lanes
        pes *= arch.pe_array.macs_per_pe_per_cycle
        ideal = np.ceil(table.largest_core_points() * problem.op_factor / pes)
        total = np.zeros(len(table), dtype=np.int64)
        for op in OPERANDS:
            if has[op]:
                total = total + elems[op] * prec.of(op)
        lower = _combine(problem, objective, ideal, total.astype(np.float64), total.astype(np.float64) /
                         arch.dram_bytes_per_cycle)
        # split_run_bound
        compute = min_compute_cycles_table(problem, table)
        group_bytes = np.zeros((len(table), 4))
        for op in OPERANDS:
            if has[op]:
                group_bytes[:, op] = elems[op] * prec.of(op)
                if op is Operand.OUTPUT:
                    group_bytes[:, 3] = elems[op] * prec.psum
        dram = group_bytes[:, 0] + group_bytes[:, 1] + group_bytes[:, 2]
        lat = arch.burst_latency_cycles
        bw = arch.dram_bytes_per_cycle
        weighted: np.ndarray | None = None
        if lat > 0:
            runs = longest_runs_table(problem, table)
            burst = arch.dram.burst_bytes
            per_byte = np.stack([1 / bw + lat / np.minimum(burst, runs[:, 0] * prec.input),
                                 1 / bw + lat / np.minimum(burst, runs[:, 1] * prec.weight),
                                 1 / bw + lat / np.minimum(burst, runs[:, 2] * prec.output),
                                 1 / bw + lat / np.minimum(burst, runs[:, 2] * prec.psum)], axis=1)
            weighted = group_bytes * per_byte
            lines = input_line_cycles_table(problem, table)
            if lines is not None:
                weighted[:, 0] = np.where(np.isnan(lines), weighted[:, 0], np.maximum(weighted[:, 0], lines))
            dram_cycles = (weighted[:, 0] + weighted[:, 1] + weighted[:, 2]) * (1 - _ROUNDING_MARGIN)
        else:
            dram_cycles = dram / bw
        run = _combine(problem, objective, compute.astype(np.float64), dram, dram_cycles)
        runs_bound = run
        weighted_runs: np.ndarray | None = None
        cycles = dram_cycles
        if weighted is not None:
            weighted_runs = group_bytes * (1 / bw + lat * burst_rates_table(problem, table))
            weighted_runs[:, 0] = np.maximum(weighted_runs[:, 0], weighted[:, 0])  # the input lines, if larger
            cycles = (weighted_runs[:, 0] + weighted_runs[:, 1] + weighted_runs[:, 2]) * (1 - _ROUNDING_MARGIN)
            runs_bound = _combine(problem, objective, compute.astype(np.float64), dram, cycles)
        return cls(problem, table, objective, lower, run, compute, group_bytes, weighted, runs_bound, weighted_runs,
                   dram, np.maximum(dram_cycles, cycles))

    def row_bounds(self, i: int, compute: np.ndarray) -> np.ndarray | None:
        """(n,) values no mapping of split ``i`` with tile vectors of compute cycles ``compute`` (the
        slowest core's, ``cost.model.compute_cycles`` at the chosen unrolling) can beat: its latency is
        at least those cycles with the split's least DRAM cycles (added, or the larger when transfers
        overlap compute), its energy and DRAM bytes at least the split's. None when the objective does
        not read latency (energy, DRAM bytes: nothing to tell the tile vectors apart)."""
        if not self.reads_latency:
            return None
        problem = self.problem
        arch = problem.arch
        latency = np.maximum(compute, self.dram_cycles[i]) if arch.overlap else compute + self.dram_cycles[i]
        energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
            self.dram[i] * arch.dram.energy_pj_per_byte
        return np.asarray(self.objective.combine(latency, energy, self.dram[i]), dtype=np.float64) * \
            (1 - _ROUNDING_MARGIN)

    def row_dram_bounds(self, i: int, dram: np.ndarray) -> np.ndarray:
        """(n,) values no mapping of split ``i`` whose tile vectors move at least ``dram`` DRAM bytes
        (``search.row_dram``) can beat, for the DRAM and energy objectives: those bytes, or the split's
        energy bound with them (MACs, register-file accesses and DRAM energy), less a rounding margin."""
        if self.objective is Objective.DRAM:
            return dram
        assert self.objective is Objective.ENERGY
        arch = self.problem.arch
        energy = self.problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
            dram * arch.dram.energy_pj_per_byte
        out: np.ndarray = energy * (1 - _ROUNDING_MARGIN)
        return out

    @property
    def reads_latency(self) -> bool:
        """Whether the objective reads latency (else :meth:`row_bounds` tells no tile vectors apart)."""
        return self.objective not in (Objective.ENERGY, Objective.DRAM)

    def tight(self, i: int, orders: np.ndarray) -> float:
        """``split_bounds.split_tight_bound`` of split ``i``."""
        return self._tight(i, orders, self.weighted)

    def tight_runs(self, i: int, orders: np.ndarray) -> float:
        """``split_bounds.split_tight_bound`` of split ``i`` with the bursts of :func:`burst_rates_table`
        (at least :meth:`tight`, up to rounding): the reload factors of ``search.bounds.min_dram_bytes``
        applied to ``weighted_runs``."""
        return self._tight(i, orders, self.weighted_runs)

    def _tight(self, i: int, orders: np.ndarray, weighted: np.ndarray | None) -> float:
        problem = self.problem
        arch = problem.arch
        lmin = tuple(int(x) for x in self.table.min_length[i])
        dram = min_dram_bytes(problem, lmin, orders, self.group_bytes[i])
        if weighted is not None:
            dram_cycles = min_dram_bytes(problem, lmin, orders, weighted[i]) * (1 - _ROUNDING_MARGIN)
        else:
            dram_cycles = dram / arch.dram_bytes_per_cycle
        compute = int(self.compute[i])
        latency = max(compute, dram_cycles) if arch.overlap else compute + dram_cycles
        energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
            dram * arch.dram.energy_pj_per_byte
        return float(self.objective.combine(latency, energy, dram))


def _combine(problem: Problem, objective: Objective, compute: np.ndarray, dram: np.ndarray,
             dram_cycles: np.ndarray) -> np.ndarray:
    """The objective of (compute cycles, DRAM bytes, DRAM cycles) arrays, as the scalar bounds combine them."""
    arch = problem.arch
    latency = np.maximum(compute, dram_cycles) if arch.overlap else compute + dram_cycles
    energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
        dram * arch.dram.energy_pj_per_byte
    return np.asarray(objective.combine(latency, energy, dram), dtype=np.float64)


def row_compute_bound(problem: Problem, length: np.ndarray | tuple[int, ...], tiles: np.ndarray,
                      unroll: np.ndarray) -> np.ndarray:
    """(n,) compute cycles that no split whose longest slices are ``length`` can beat with the tile
    vectors ``tiles`` and unrolling ``unroll`` ((n, 8) each): ``cost.kernel.compute_cycles`` of its
    largest core (the slowest: a cycle count never shrinks as a slice grows), with each flattened
    axis's steps, a sum over tile positions of ``ceil(points / lanes)``, taken at least the number of
    positions and at least ``ceil(points of the slice / lanes)``. The other factors are the kernel's,
    multiplied in its order, so rounding keeps the bound below it."""
    L = np.asarray(length, dtype=np.int64)
    t = np.minimum(tiles, L)
    n = -(-L // t)
    flat: set[int] = set()
    for dims, _ in problem.flattened_axes:
        flat |= {int(d) for d in dims}
    total = np.full(len(t), 1.0 * problem.op_factor)
    for d in DIMS:
        if int(d) in flat:
            continue
        u = unroll[:, d]
        spatial = (n[:, d] - 1) * -(-t[:, d] // u) + -(-(L[d] - (n[:, d] - 1) * t[:, d]) // u)
        total = total * np.where(u > 1, spatial, L[d])
    for dims, lanes in problem.flattened_axes:
        positions = np.ones(len(t), dtype=np.int64)
        points = 1
        for d in dims:
            positions = positions * n[:, d]
            points *= int(L[d])
        total = total * np.maximum(positions, -(-points // lanes))
    out: np.ndarray = np.ceil(total / problem.arch.pe_array.macs_per_pe_per_cycle)
    return out


def min_compute_cycles_table(problem: Problem, table: SplitTable) -> np.ndarray:
    """(splits,) ``split_bounds.min_compute_cycles`` of every split of ``table`` (int64)."""
    from tileplan.arch.spec import AxisMode

    length = table.max_length
    flat: set[int] = set()
    steps = np.ones(len(table), dtype=np.int64)
    for dims, lanes in problem.flattened_axes:
        points = np.ones(len(table), dtype=np.int64)
        for d in dims:
            points = points * length[:, d]
            flat.add(int(d))
        steps = steps * -(-points // lanes)
    others = np.ones(len(table), dtype=np.int64)
    for d in DIMS:
        if int(d) not in flat:
            others = others * length[:, d]
    unrolled = problem.arch.pe_array.macs_per_pe_per_cycle
    for axis, lanes in zip(problem.arch.pe_array.axes, problem.lanes, strict=True):
        if axis.mode is not AxisMode.FLATTENED:
            unrolled *= lanes
    out: np.ndarray = -(-(problem.op_factor * others * steps) // unrolled)
    return out


def longest_runs_table(problem: Problem, table: SplitTable) -> np.ndarray:
    """(splits, 3) ``split_bounds.longest_runs`` of every split of ``table`` (int64)."""
    from tileplan.cost.kernel_tables import STORAGE_LOOP
    from tileplan.mapping import DEFAULT_LAYOUTS

    out = np.ones((len(table), 3), dtype=np.int64)
    for op in OPERANDS:
        sizes = tensor_sizes(problem, op)
        run = np.ones(len(table), dtype=np.int64)
        alive = np.ones(len(table), dtype=bool)
        for e in reversed(storage_order(op, DEFAULT_LAYOUTS[op])):
            if op is Operand.INPUT and e >= 3:
                axis = e - 3
                extent = table.per_pair(Dim.P if axis == 0 else Dim.Q, table.input_span(problem, axis))
            else:
                d = STORAGE_LOOP[op][e]
                extent = table.max_length[:, d]
            extent = np.minimum(extent, sizes[e])
            run = np.where(alive, run * extent, run)
            alive &= extent >= sizes[e]
        out[:, op] = np.maximum(run, 1)
    return out


def burst_rates_table(problem: Problem, table: SplitTable) -> np.ndarray:
    """(splits, 4) bursts per byte that no sweep of the split's tiles can beat, per operand (input,
    weight, output at its precision, output at the partial sums' precision; default layouts).

    ``cost.kernel.operand_pass`` cuts a sweep's bytes into runs, each costing ``ceil(r / B)`` bursts
    for ``r`` bytes: a run lies along one storage dimension ``j``, spans ``e`` steps of it times the
    whole sizes ``W_j`` of the dimensions inside ``j`` (so only when some core's extent along each
    of those is the whole size), and ``e`` is an extent that is not the whole size of ``j`` (any
    extent along the outermost dimension); an extent is at most the longest along ``j`` over the
    cores (``split_bounds.longest_runs``'s extents). So every run has ``ceil(r / B) / r >= rate``, the least of
    ``ceil(e * W_j * b / B) / (e * W_j * b)`` over those ``j`` and ``e``, and every sweep costs at
    least ``rate`` bursts per byte. This is never below ``1 / min(B, R_X)`` (``split_bounds.split_tight_bound``),
    and above it when the runs cannot fill bursts: rows of 28 two-byte elements, whole or in
    pieces, fill bursts of 128 B at best 112 B per 128 (two rows).
    """
    from tileplan.cost.kernel_tables import STORAGE_LOOP
    from tileplan.mapping import DEFAULT_LAYOUTS

    prec = problem.precision
    burst = problem.arch.dram.burst_bytes
    out = np.zeros((len(table), 4))
    cache: dict[tuple[int, int], np.ndarray] = problem.__dict__.setdefault("_burst_rates", {})
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        sizes = tensor_sizes(problem, op)
        extents = []
        for e in reversed(storage_order(op, DEFAULT_LAYOUTS[op])):  # innermost first
            if op is Operand.INPUT and e >= 3:
                axis = e - 3
                extent = table.per_pair(Dim.P if axis == 0 else Dim.Q, table.input_span(problem, axis))
            else:
                extent = table.max_length[:, STORAGE_LOOP[op][e]]
            extents.append((sizes[e], np.minimum(extent, sizes[e])))
        precisions = [(op, prec.of(op))] if op is not Operand.OUTPUT else [(2, prec.output), (3, prec.psum)]
        for col, b in precisions:
            rate = np.full(len(table), np.inf)
            alive = np.ones(len(table), dtype=bool)
            inner = 1
            for k, (size, extent) in enumerate(extents):
                key = (inner * b, size)
                if key not in cache:  # least ceil(x c / B) / (x c) over x = 1 .. m, for m = 0 .. size
                    x = np.arange(1, size + 1, dtype=np.int64) * (inner * b)
                    cache[key] = np.concatenate([[np.inf], np.minimum.accumulate(-(-x // burst) / x)])
                top = extent if k == len(extents) - 1 else np.minimum(extent, size - 1)
                rate = np.where(alive, np.minimum(rate, cache[key][top]), rate)
                alive &= extent >= size
                inner *= size
            out[:, col] = np.where(np.isfinite(rate), rate, 0.0)  # no run at all: the operand moves nothing
    return out


def input_line_cycles_table(problem: Problem, table: SplitTable) -> np.ndarray | None:
    """(splits,) ``split_bounds.input_line_cycles`` of every split of ``table``, NaN where it is None (None:
    None for every split)."""
    axis = _input_line_axis(problem)
    if axis is None:
        return None
    d_out = Dim.P if axis == 0 else Dim.Q
    size = problem.in_h if axis == 0 else problem.in_w
    spans = table.input_span(problem, axis)
    used = table.input_used(problem, axis)
    totals = [_line_total(problem, axis, s) if span < size and u > 0 else float("nan")
              for s, span, u in zip(table.parts[d_out], spans, used, strict=True)]
    total = table.per_pair(d_out, totals).astype(np.float64)
    ok = ~np.isnan(total)
    used_arr = np.maximum(table.per_pair(d_out, used), 1)
    return np.where(ok, table.group_elements(problem, Operand.INPUT) // used_arr * np.where(ok, total, 0.0), np.nan)


def _line_total(problem: Problem, axis: int, slices: tuple[tuple[int, int], ...]) -> float:
    """Sum over ``slices`` (offset, length) of an output axis of the least DRAM cycles of one line of
    input tiles (``split_bounds.input_line_cycles``'s ``line``), in slice order."""
    total = 0.0
    for off, ln in slices:
        total += _line_cost(problem, axis, off, ln)
    return total
