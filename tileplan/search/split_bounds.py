"""Lower bounds on the cost of every mapping of one core split, before any of its tiles is enumerated,
read from that split's slices.

The exhaustive search (``search.split_search``) skips a split whose bound is not below the best cost
found so far. Every bound here is safe: it never exceeds the model's cost of any mapping of the
split (``tests/test_search_bounds.py``, ``tests/test_search_speed.py``). ``split_lower_bound``,
``split_run_bound`` and ``split_tight_bound`` read one split's slices, with the per-split parts they
add up (``min_compute_cycles``, ``longest_runs``, ``input_line_cycles``); ``search.split_bounds_table``
computes the same bounds for every split of a layer at once from its ``SplitTable`` (the form the
search runs).
"""

from __future__ import annotations

import math

import numpy as np

from tileplan.cost.model import storage_order, tensor_sizes
from tileplan.cost.problem import Problem, SplitSlices, input_extent
from tileplan.dims import DIMS, OPERANDS, Dim, Operand
from tileplan.search.bounds import min_dram_bytes
from tileplan.search.objective import Objective


def split_lower_bound(problem: Problem, split: SplitSlices, objective: Objective) -> float:
    """A value no mapping of this core split can beat: ideal compute on the busiest core, and each
    multicast group fetching exactly the data its slice needs, once."""
    arch = problem.arch
    prec = problem.precision
    pes = 1
    for axis_lanes in problem.lanes:
        pes *= axis_lanes
    pes *= arch.pe_array.macs_per_pe_per_cycle
    compute = math.ceil(split.largest_core_points() * problem.op_factor / pes)
    has = problem.has_operand
    # Integers below 2**53: exactly the float sum over groups.
    dram = float(sum(split.group_elements(problem, op) * prec.of(op) for op in OPERANDS if has[op]))
    dram_cycles = dram / arch.dram_bytes_per_cycle
    latency = max(compute, dram_cycles) if arch.overlap else compute + dram_cycles
    energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
        dram * arch.dram.energy_pj_per_byte
    return float(objective.combine(latency, energy, dram))


#: Relative margin taken off the tightened bound's floating-point parts, so rounding can never lift
#: it above a value the model computes with its own (differently ordered) float operations.
_ROUNDING_MARGIN = 1e-9


def split_tight_bound(problem: Problem, split: SplitSlices, objective: Objective, orders: np.ndarray) -> float:
    """:func:`split_lower_bound` tightened three ways; each is a lower bound for every mapping of the split.

    * DRAM bytes: ``search.bounds.min_dram_bytes`` (reload factors of the smallest core).
    * Bursts: every run of contiguous bytes of operand X is at most :func:`longest_runs`'s ``R_X``
      bytes long, and ``ceil(r / B) >= r / min(B, R_X)`` for every run ``r <= R_X`` (if ``R_X <= B``
      the run costs one burst and ``r / R_X <= 1``; otherwise ``ceil(r / B) >= r / B``). So X's
      bursts are at least its bytes / ``min(B, R_X)``, in every multicast group (a group's bursts
      are those of its busiest member, at least those of the member moving the most bytes), and
      the DRAM cycles are at least ``sum_X bytes_X * (1 / bandwidth + latency / min(B, R_X))``:
      ``min_dram_bytes`` of the per-operand weighted compulsory bytes (it is linear in them).
    * Input rows read in short pieces: :func:`input_line_cycles` replaces the input's weighted bytes
      when it is larger.
    * Compute: :func:`min_compute_cycles` (the flattened PE axes' rounding on the largest core).
    """
    return _split_bound(problem, split, objective, orders)


def split_run_bound(problem: Problem, split: SplitSlices, objective: Objective) -> float:
    """:func:`split_tight_bound` with every reload factor 1 (each operand moves its compulsory
    bytes once): weaker, but it needs no trip-count frontier, so it is cheap enough to try first."""
    return _split_bound(problem, split, objective, None)


def _split_bound(problem: Problem, split: SplitSlices, objective: Objective, orders: np.ndarray | None) -> float:
    arch = problem.arch
    prec = problem.precision
    compute = min_compute_cycles(problem, split)
    group_bytes = np.zeros(4)
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        elems = split.group_elements(problem, op)
        group_bytes[op] = elems * prec.of(op)
        if op is Operand.OUTPUT:
            group_bytes[3] = elems * prec.psum

    def least(weighted: np.ndarray) -> float:
        """Least of ``sum_X rho_X * weighted[X]`` (outputs: ``weighted[2] + 2 (rho - 1) weighted[3]``)."""
        if orders is None:
            return float(weighted[0] + weighted[1] + weighted[2])
        return min_dram_bytes(problem, split.min_length, orders, weighted)

    dram = least(group_bytes)
    burst = arch.dram.burst_bytes
    lat = arch.burst_latency_cycles
    bw = arch.dram_bytes_per_cycle
    if lat > 0:
        runs = longest_runs(problem, split)
        per_byte = np.array([1 / bw + lat / min(burst, runs[0] * prec.input),
                             1 / bw + lat / min(burst, runs[1] * prec.weight),
                             1 / bw + lat / min(burst, runs[2] * prec.output),
                             1 / bw + lat / min(burst, runs[2] * prec.psum)])
        weighted = group_bytes * per_byte
        lines = input_line_cycles(problem, split)
        if lines is not None:
            weighted[0] = max(weighted[0], lines)
        dram_cycles = least(weighted) * (1 - _ROUNDING_MARGIN)
    else:
        dram_cycles = dram / bw
    latency = max(compute, dram_cycles) if arch.overlap else compute + dram_cycles
    energy = problem.macs * (arch.energy.mac_pj + 3 * arch.register_file.energy_pj_per_access) + \
        dram * arch.dram.energy_pj_per_byte
    return float(objective.combine(latency, energy, dram))


def _input_line_axis(problem: Problem) -> int | None:
    """The halo axis (0: rows, 1: columns) of the input's innermost stored dimension in the default
    layout, or None when the layer reads no input or that dimension is not a halo axis."""
    from tileplan.mapping import DEFAULT_LAYOUTS

    if not problem.has_operand[Operand.INPUT]:
        return None
    innermost = storage_order(Operand.INPUT, DEFAULT_LAYOUTS[Operand.INPUT])[-1]
    return innermost - 3 if innermost >= 3 else None


def input_line_cycles(problem: Problem, split: SplitSlices) -> float | None:
    """DRAM cycles (bytes / bandwidth + bursts x latency) of one sweep of the input's tiles, at least,
    summed over its multicast groups, when no core's window along the innermost input dimension
    (a halo axis in the default layout) spans the whole tensor; None otherwise.

    Then no tile spans it either, so every run lies within one line of that axis and
    ``cost.kernel.operand_pass`` gives a core's sweep as ``copies * (product over the other storage
    dimensions of their extents summed over tile positions) * line``, with ``line = sum_ext * b /
    bandwidth + every * latency`` the cost of the line's tiles (``cost.tables.halo_table``, at
    ``b`` bytes per element). The other sums are the slice lengths for channels and batch and, for
    the other halo axis, at least the rows the slice uses (every used row lies in some tile's
    window); ``line`` is at least its least value over every tile size of the axis's output and
    kernel loops. The rest of the product is ``SplitSlices.group_elements`` without the axis's
    factor (the used columns summed over its slices): that factor is replaced by the summed least
    line costs. Strided windows fetch the columns they skip, so this can exceed the compulsory
    bytes' weight by far (a stride-2 1x1 layer reads about twice its used columns, or pays a burst
    per column).
    """
    axis = _input_line_axis(problem)
    if axis is None:
        return None
    d_out, d_k = (Dim.P, Dim.R) if axis == 0 else (Dim.Q, Dim.S)
    size = problem.in_h if axis == 0 else problem.in_w
    kernel = int(problem.dims[d_k])
    slices = split.slices[d_out]
    if max(_window_span(problem, axis, off, ln, kernel) for off, ln in slices) >= size:
        return None
    used = sum(input_extent(problem, axis, off, ln) for off, ln in slices)
    if used == 0:
        return None
    total = 0.0
    for off, ln in slices:
        total += _line_cost(problem, axis, off, ln)
    return split.group_elements(problem, Operand.INPUT) // used * total


def min_compute_cycles(problem: Problem, split: SplitSlices) -> int:
    """Compute cycles no mapping of the split can beat: those of its largest core (every core runs
    at least its own, and the chip waits for the slowest), with the unrolled axes ideal and each
    flattened axis rounded up on the whole slice.

    ``cost.kernel.compute_cycles`` of a core of slice lengths ``L`` is
    ``ceil(op * prod_d c_d * prod_a acc_a / macs)``: ``c_d = L_d`` for a dimension that is not
    unrolled and ``sum ceil(t / u_d) >= L_d / u_d`` for one unrolled ``u_d`` times (the unroll
    factors of a candidate multiply to at most the unrolled axes' lanes, each dimension on one
    axis); ``acc_a``, the steps of flattened axis ``a``, is a sum over tile positions of
    ``ceil(points / lanes_a)``, at least ``ceil(sum of points / lanes_a) = ceil(F_a / lanes_a)``
    (``F_a``: the slice's points along the axis's dimensions). Integer arithmetic throughout.
    """
    length = split.max_length
    flat: set[int] = set()
    steps = 1
    for dims, lanes in problem.flattened_axes:
        points = 1
        for d in dims:
            points *= int(length[d])
            flat.add(int(d))
        steps *= -(-points // lanes)
    others = 1
    for d in DIMS:
        if int(d) not in flat:
            others *= int(length[d])
    unrolled = problem.arch.pe_array.macs_per_pe_per_cycle
    from tileplan.arch.spec import AxisMode

    for axis, lanes in zip(problem.arch.pe_array.axes, problem.lanes, strict=True):
        if axis.mode is not AxisMode.FLATTENED:
            unrolled *= lanes
    return -(-(problem.op_factor * others * steps) // unrolled)


def longest_runs(problem: Problem, split: SplitSlices) -> tuple[int, int, int]:
    """Elements of the longest contiguous DRAM run any tile of the split can move, per operand
    (input, weight, output; default layouts).

    ``cost.kernel.operand_pass``: a run lies along one storage dimension ``j`` and spans
    ``ext_j`` steps of it times the whole sizes of the dimensions inside ``j``, and it only does
    when every tile along those inner dimensions spans the whole tensor dimension. A tile's extent
    is at most its core's slice: the slice length for a plain dimension, the clipped window of the
    slice for input rows/columns (strides skip nothing inside a window). So, from the innermost
    dimension outwards, the run grows by whole sizes while some core's extent is the whole size,
    and ends with the first dimension whose longest extent is shorter.
    """
    from tileplan.cost.kernel_tables import STORAGE_LOOP
    from tileplan.mapping import DEFAULT_LAYOUTS

    out = []
    for op in OPERANDS:
        sizes = tensor_sizes(problem, op)
        run = 1
        for e in reversed(storage_order(op, DEFAULT_LAYOUTS[op])):
            if op is Operand.INPUT and e >= 3:
                axis = e - 3
                d_out, d_k = (Dim.P, Dim.R) if axis == 0 else (Dim.Q, Dim.S)
                extent = max(_window_span(problem, axis, off, ln, int(problem.dims[d_k]))
                             for off, ln in split.slices[d_out])
            else:
                extent = max(ln for _, ln in split.slices[STORAGE_LOOP[op][e]])
            extent = min(extent, sizes[e])
            run *= extent
            if extent < sizes[e]:
                break
        out.append(max(run, 1))  # 0: no core reads the operand (no bytes to weigh)
    return out[0], out[1], out[2]



def _line_cost(problem: Problem, axis: int, offset: int, length: int) -> float:
    """Least DRAM cycles of one line of input tiles of the output slice ``offset .. offset + length - 1``
    along ``axis`` (:func:`input_line_cycles`'s ``line``), cached per problem.

    A tile's input extent depends on where the slice starts only through clipping at the tensor's
    edges (``cost.tables.halo_table``): slices of one length whose whole window lies inside the
    tensor share one entry."""
    from tileplan.cost.tables import halo_table

    arch = problem.arch
    b = problem.precision.input
    size = problem.in_h if axis == 0 else problem.in_w
    kernel = int(problem.dims[Dim.R if axis == 0 else Dim.S])
    start = problem.input_window_start(axis, offset)
    span = (length - 1) * problem.stride[axis] + (kernel - 1) * problem.dilation[axis] + 1
    inside = start >= 0 and start + span <= size
    cache: dict[tuple[int, ...], float] = problem.__dict__.setdefault("_input_line_cycles", {})
    key = (axis, length) if inside else (axis, offset, length)
    if key not in cache:
        table = halo_table(length, start, size, problem.stride[axis], problem.dilation[axis], kernel)
        every, _ = table.bursts(b, arch.dram.burst_bytes)
        line = table.sum_ext[:, :, 0, 0] * b / arch.dram_bytes_per_cycle + every[:, :, 0, 0] * arch.burst_latency_cycles
        cache[key] = float(line.min())
    return cache[key]


def _window_span(problem: Problem, axis: int, offset: int, length: int, kernel: int) -> int:
    """Input rows (axis 0) or columns (axis 1) between the first and the last that output indices
    ``offset .. offset + length - 1`` read, clipped to the tensor (``cost.tables.halo_table``'s
    extent of a tile covering the whole slice)."""
    start = problem.input_window_start(axis, offset)
    span = (length - 1) * problem.stride[axis] + (kernel - 1) * problem.dilation[axis] + 1
    size = problem.in_h if axis == 0 else problem.in_w
    return max(0, min(start + span, size) - max(start, 0))


def _compulsory_elems(problem: Problem, offset: tuple[int, ...], length: tuple[int, ...], op: Operand) -> int:
    """Elements of ``op`` a core slice must fetch at least once (cached per problem: splits share slices)."""
    cache: dict[tuple[object, ...], int] = problem.__dict__.setdefault("_compulsory_elems", {})
    key = (op, length, offset[Dim.P], offset[Dim.Q]) if op is Operand.INPUT else (op, length)
    if key not in cache:
        cache[key] = _count_compulsory(problem, offset, length, op)
    return cache[key]


def _count_compulsory(problem: Problem, offset: tuple[int, ...], length: tuple[int, ...], op: Operand) -> int:
    L = dict(zip(DIMS, length, strict=True))
    if op is Operand.WEIGHT:
        return L[Dim.G] * L[Dim.K] * L[Dim.C] * L[Dim.R] * L[Dim.S]
    if op is Operand.OUTPUT:
        return L[Dim.N] * L[Dim.G] * L[Dim.K] * L[Dim.P] * L[Dim.Q]
    # R and S are never split: a core reads the input window of its P and Q slices.
    extents = [input_extent(problem, 0, offset[Dim.P], L[Dim.P]), input_extent(problem, 1, offset[Dim.Q], L[Dim.Q])]
    return L[Dim.N] * L[Dim.G] * L[Dim.C] * extents[0] * extents[1] * problem.layer.input_count
