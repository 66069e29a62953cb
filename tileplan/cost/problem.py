"""A layer compiled against an accelerator: the numbers the cost model needs, and the per-core
slices that a core split produces.

Cores split dimensions in balanced parts (``mapping.balanced_parts``); every core runs the same
tiling on its slice. Cores whose slices give identical costs share one *core shape*, which the
model evaluates once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import product
from operator import itemgetter

import numpy as np

from tileplan.arch.spec import Arch, AxisMode
from tileplan.arrays import distinct
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.errors import WorkloadError
from tileplan.mapping import balanced_parts
from tileplan.workload.layer import Layer, Precision


@dataclass(frozen=True, slots=True)
class CoreSlice:
    """One core's part of the layer: (offset, length) along every dimension, and its cluster."""

    cluster: int
    offset: tuple[int, ...]
    length: tuple[int, ...]


@dataclass(frozen=True)
class CoreGrid:
    """All cores of a split, their distinct shapes, and the multicast groups of every operand.

    ``shape_of[i]`` is the distinct shape core ``i`` runs; ``groups[X]`` lists, per multicast group
    of operand X, the member cores (cores of one cluster that load identical X tiles).
    """

    cores: tuple[CoreSlice, ...]
    shapes: tuple[CoreSlice, ...]
    shape_of: np.ndarray
    groups: tuple[tuple[tuple[int, ...], ...], ...]

    @cached_property
    def max_length(self) -> tuple[int, ...]:
        """Longest slice along every dimension (computed once per grid)."""
        return tuple(map(max, zip(*(c.length for c in self.cores), strict=True)))


@dataclass
class Problem:
    """Numeric description of (layer, arch). Sizes are elements; ``*_bytes`` are bytes per element."""

    layer: Layer
    arch: Arch
    dims: np.ndarray = field(init=False)
    precision: Precision = field(init=False)

    def __post_init__(self) -> None:
        self.precision = self.layer.precision or Precision.uniform(self.arch.precision_bytes, self.arch.psum_bytes)
        self.layer = self.layer.with_precision(self.precision)
        self.dims = np.array(self.layer.dim_tuple, dtype=np.int64)
        try:
            self.lanes = [axis.lanes(self.precision.input) for axis in self.arch.pe_array.axes]
        except ValueError as err:
            raise WorkloadError(f"layer {self.layer.name!r} on {self.arch.name}: {err}") from None

    # ----------------------------------------------------------------- layer constants
    @property
    def stride(self) -> tuple[int, int]:
        return self.layer.stride

    @property
    def dilation(self) -> tuple[int, int]:
        return self.layer.dilation

    @property
    def in_h(self) -> int:
        return self.layer.h

    @property
    def in_w(self) -> int:
        return self.layer.w

    @property
    def op_factor(self) -> int:
        """Operations per point of the loop nest (``Layer.ops_per_point``: an n-ary add does n-1
        additions, softmax 3 per element, concat none)."""
        return self.layer.ops_per_point

    @property
    def macs(self) -> int:
        return self.layer.macs

    def bytes_of(self, operand: Operand) -> int:
        return self.precision.of(operand)

    @cached_property
    def has_operand(self) -> tuple[bool, bool, bool]:
        """Which operands move data (pools and adds have no weight operand; a matmul's activation B
        and a norm's scale are one; a concat moves nothing)."""
        moves = self.layer.moves_data
        return (moves, moves and self.layer.has_weight_operand, moves)

    # ----------------------------------------------------------------- arch constants
    @cached_property
    def flattened_axes(self) -> list[tuple[tuple[Dim, ...], int]]:
        """(dims, lanes) of every flattened PE-array axis."""
        return [(axis.dim_ids, lanes) for axis, lanes in zip(self.arch.pe_array.axes, self.lanes, strict=True)
                if axis.mode is AxisMode.FLATTENED]

    @cached_property
    def memory_of_operand(self) -> list[int]:
        """Index into ``arch.memories`` of the memory holding each operand."""
        out = []
        for op in OPERANDS:
            out.append(next(i for i, m in enumerate(self.arch.memories) if op in m.operand_ids))
        return out

    @cached_property
    def capacity_bytes(self) -> np.ndarray:
        return np.array([m.size_bytes for m in self.arch.memories], dtype=np.int64)

    # ----------------------------------------------------------------- cores
    @cached_property
    def _grids(self) -> dict[tuple[tuple[int, ...], tuple[int, ...]], CoreGrid]:
        return {}

    def core_grid(self, cluster_split: tuple[int, ...], core_split: tuple[int, ...]) -> CoreGrid:
        """Slice the layer over clusters then cores (balanced parts; empty parts leave cores idle).
        Built once per split and problem."""
        key = (tuple(int(x) for x in cluster_split), tuple(int(x) for x in core_split))
        if key not in self._grids:
            self._grids[key] = _core_grid(self, *key)
        return self._grids[key]

    def split_slices(self, cluster_split: tuple[int, ...], core_split: tuple[int, ...]) -> SplitSlices:
        """Per-dimension slices of a core split, without the core grid (cached per split)."""
        cache: dict[tuple[tuple[int, ...], tuple[int, ...]], SplitSlices] = self.__dict__.setdefault("_slices", {})
        key = (tuple(int(x) for x in cluster_split), tuple(int(x) for x in core_split))
        if key not in cache:
            cache[key] = SplitSlices.of(self, *key)
        return cache[key]

    def input_window_start(self, axis: int, offset: int) -> int:
        """First input row (axis 0) or column (axis 1) read by output index ``offset`` (may be < 0)."""
        pad = self.layer.pad[0] if axis == 0 else self.layer.pad[2]
        return offset * self.stride[axis] - pad


@dataclass(frozen=True)
class SplitSlices:
    """A core split seen one dimension at a time (what the split bounds need, without a core grid).

    Cores are the cartesian product over dimensions of (cluster part, core part) slices, so the
    core grid's per-core quantities factor: ``slices[d]`` lists the (offset, length) of every
    (cluster part, core part) along ``d`` and ``clusters[d]`` the number of cluster parts. A
    multicast group of operand X is one cluster and one slice along each dimension indexing X
    (without multicast, one core); the sum over groups of a product of per-dimension factors is the
    product over dimensions of the sums.
    """

    slices: tuple[tuple[tuple[int, int], ...], ...]
    clusters: tuple[int, ...]
    multicast: bool

    @classmethod
    def of(cls, problem: Problem, cluster_split: tuple[int, ...], core_split: tuple[int, ...]) -> SplitSlices:
        dims = problem.dims
        slices = []
        clusters = []
        for d in DIMS:
            outer = balanced_parts(int(dims[d]), cluster_split[d])
            clusters.append(len(outer))
            slices.append(tuple((off + o, ln) for off, length in outer
                                for o, ln in balanced_parts(length, core_split[d])))
        return cls(tuple(slices), tuple(clusters), bool(problem.arch.cores.multicast))

    @property
    def max_length(self) -> tuple[int, ...]:
        """Longest slice along every dimension (``CoreGrid.max_length``)."""
        return tuple(max(ln for _, ln in s) for s in self.slices)

    @property
    def min_length(self) -> tuple[int, ...]:
        """Shortest slice along every dimension (the smallest core's lengths)."""
        return tuple(min(ln for _, ln in s) for s in self.slices)

    def largest_core_points(self) -> int:
        """Loop-nest points of the largest core (the product of the longest slices)."""
        out = 1
        for length in self.max_length:
            out *= length
        return out

    def group_elements(self, problem: Problem, op: Operand) -> int:
        """Compulsory elements of ``op`` summed over its multicast groups: each group fetches exactly
        the data its slice needs, once (rows/columns a stride skips or only padding covers are not
        fetched)."""
        total = problem.layer.input_count if op is Operand.INPUT else 1
        for d in DIMS:
            if d in RELEVANT[op]:
                if op is Operand.INPUT and d in (Dim.P, Dim.Q):
                    axis = 0 if d is Dim.P else 1
                    total *= sum(input_extent(problem, axis, off, ln) for off, ln in self.slices[d])
                elif op is Operand.INPUT and d in (Dim.R, Dim.S):
                    continue  # R and S enter through the input extents of P and Q (never split)
                else:
                    total *= sum(ln for _, ln in self.slices[d])
            else:  # the dimension does not index op: a copy per cluster part (per core without multicast)
                total *= self.clusters[d] if self.multicast else len(self.slices[d])
        return total


@dataclass(frozen=True)
class SplitTable:
    """:class:`SplitSlices` of many core splits at once, as arrays over the splits.

    Along a dimension ``d`` a split's slices depend only on its (cluster, core) factors along ``d``,
    and a layer's splits share few such pairs: ``parts[d]`` lists the slices (``SplitSlices.slices[d]``)
    of every distinct pair, ``clusters[d]`` its cluster parts, and ``index[:, d]`` the pair of each
    split. A quantity of one dimension's slices is computed once per pair (:meth:`per_pair`) and
    gathered; the per-split quantities are products and maxima of those.
    """

    index: np.ndarray  # (splits, 8) index into parts[d] of every split
    parts: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]
    clusters: tuple[tuple[int, ...], ...]
    multicast: bool
    max_length: np.ndarray  # (splits, 8) longest slice along every dimension
    min_length: np.ndarray  # (splits, 8) shortest slice along every dimension
    _per_pair: dict[tuple[str, int], list[int]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, problem: Problem, splits: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> SplitTable:
        dims = problem.dims
        factors = np.array([[*cl, *co] for cl, co in splits], dtype=np.int64).reshape(len(splits), 2, NDIMS)
        index = np.zeros((len(splits), NDIMS), dtype=np.int64)
        parts: list[tuple[tuple[tuple[int, int], ...], ...]] = []
        clusters: list[tuple[int, ...]] = []
        for d in DIMS:
            codes, inverse = np.unique(factors[:, 0, d] * (int(factors[:, 1, d].max()) + 1) + factors[:, 1, d],
                                       return_inverse=True)
            index[:, d] = inverse.reshape(-1)
            pairs = np.stack(np.divmod(codes, int(factors[:, 1, d].max()) + 1), axis=1)
            mine = []
            count = []
            for across, within in pairs.tolist():
                outer = balanced_parts(int(dims[d]), across)
                count.append(len(outer))
                mine.append(tuple((off + o, ln) for off, length in outer for o, ln in balanced_parts(length, within)))
            parts.append(tuple(mine))
            clusters.append(tuple(count))
        longest = np.stack([np.array([max(ln for _, ln in s) for s in parts[d]], dtype=np.int64)[index[:, d]]
                            for d in DIMS], axis=1)
        shortest = np.stack([np.array([min(ln for _, ln in s) for s in parts[d]], dtype=np.int64)[index[:, d]]
                             for d in DIMS], axis=1)
        return cls(index, tuple(parts), tuple(clusters), bool(problem.arch.cores.multicast), longest, shortest)

    def __len__(self) -> int:
        return len(self.index)

    def per_pair(self, d: Dim, values: list[int] | list[float]) -> np.ndarray:
        """(splits,) ``values[k]`` (one per pair of ``parts[d]``) gathered for every split."""
        return np.asarray(values)[self.index[:, d]]

    def input_used(self, problem: Problem, axis: int) -> list[int]:
        """Per pair of ``parts[P]`` (axis 0) or ``parts[Q]`` (axis 1): the input rows or columns its slices
        use, summed over the slices (``input_extent``)."""
        key = ("used", axis)
        if key not in self._per_pair:
            self._per_pair[key] = [sum(input_extent(problem, axis, off, ln) for off, ln in s)
                                   for s in self.parts[Dim.P if axis == 0 else Dim.Q]]
        return self._per_pair[key]

    def input_span(self, problem: Problem, axis: int) -> list[int]:
        """Per pair of ``parts[P]`` (axis 0) or ``parts[Q]`` (axis 1): the most input rows or columns
        between the first and the last one a slice's window reads, clipped to the tensor (the extent
        of a tile covering the whole slice)."""
        key = ("span", axis)
        if key not in self._per_pair:
            kernel = int(problem.dims[Dim.R if axis == 0 else Dim.S])
            size = problem.in_h if axis == 0 else problem.in_w
            stride, dil = problem.stride[axis], problem.dilation[axis]
            out = []
            for s in self.parts[Dim.P if axis == 0 else Dim.Q]:
                top = 0
                for off, ln in s:
                    start = problem.input_window_start(axis, off)
                    end = start + (ln - 1) * stride + (kernel - 1) * dil + 1
                    top = max(top, min(end, size) - max(start, 0))
                out.append(top)
            self._per_pair[key] = out
        return self._per_pair[key]

    def largest_core_points(self) -> np.ndarray:
        """(splits,) loop-nest points of each split's largest core (``SplitSlices.largest_core_points``)."""
        out = np.ones(len(self), dtype=np.int64)
        for d in DIMS:
            out *= self.max_length[:, d]
        return out

    def group_elements(self, problem: Problem, op: Operand) -> np.ndarray:
        """(splits,) ``SplitSlices.group_elements`` of every split (int64)."""
        out = np.full(len(self), problem.layer.input_count if op is Operand.INPUT else 1, dtype=np.int64)
        for d in DIMS:
            if d in RELEVANT[op]:
                if op is Operand.INPUT and d in (Dim.P, Dim.Q):
                    factor = self.input_used(problem, 0 if d is Dim.P else 1)
                elif op is Operand.INPUT and d in (Dim.R, Dim.S):
                    continue
                else:
                    factor = [sum(ln for _, ln in s) for s in self.parts[d]]
            else:
                factor = list(self.clusters[d]) if self.multicast else [len(s) for s in self.parts[d]]
            out *= self.per_pair(d, factor)
        return out


def input_extent(problem: Problem, axis: int, offset: int, length: int) -> int:
    """Input rows (axis 0) or columns (axis 1) that output indices ``offset .. offset + length - 1``
    read: strides may skip some and a window may fall entirely in the padding (cached per problem)."""
    cache: dict[tuple[int, int, int], int] = problem.__dict__.setdefault("_input_extent", {})
    key = (axis, offset, length)
    if key not in cache:
        d_out, d_k = (Dim.P, Dim.R) if axis == 0 else (Dim.Q, Dim.S)
        size = problem.in_h if axis == 0 else problem.in_w
        stride, dil = problem.stride[axis], problem.dilation[axis]
        start = problem.input_window_start(axis, offset)
        window = int(problem.dims[d_k])
        if window == 1:  # rows start + stride * i, i < length, that fall in [0, size): a closed form
            first = max(0, -(start // stride))
            last = min(length - 1, (size - 1 - start) // stride)
            cache[key] = max(0, last - first + 1)
            return cache[key]
        used = (start + stride * np.arange(length, dtype=np.int64)[:, None]
                + dil * np.arange(window, dtype=np.int64)[None, :]).ravel()
        used = used[(used >= 0) & (used < size)]
        cache[key] = int(distinct(used).size)
    return cache[key]


def _core_grid(problem: Problem, cluster_split: tuple[int, ...], core_split: tuple[int, ...]) -> CoreGrid:
    dims = problem.dims
    # Per dimension, per cluster part: the (offset, length) of its core parts.
    # (the same for every split with the same factors along d: built once per problem)
    parts_of: dict[tuple[int, int, int], list[list[tuple[int, int]]]] = problem.__dict__.setdefault("_dim_parts", {})
    sub = []
    for d in DIMS:
        pkey = (int(d), cluster_split[d], core_split[d])
        if pkey not in parts_of:
            parts_of[pkey] = [[(off + o, ln) for o, ln in balanced_parts(length, core_split[d])]
                              for off, length in balanced_parts(int(dims[d]), cluster_split[d])]
        sub.append(parts_of[pkey])
    cores: list[CoreSlice] = []
    for cl_id, cl_choice in enumerate(product(*[range(len(parts)) for parts in sub])):
        for parts in product(*[sub[d][cl_choice[d]] for d in DIMS]):
            offset, length = zip(*parts, strict=True)  # (offset, length) along every dimension
            cores.append(CoreSlice(cl_id, offset, length))
    # Distinct shapes: lengths everywhere, plus input clipping geometry along P and Q.
    keys: dict[tuple[object, ...], int] = {}
    # cores (and splits) share rows/columns: clip each once per problem
    clips: dict[tuple[int, ...], tuple[object, ...]] = problem.__dict__.setdefault("_clips", {})
    shapes: list[CoreSlice] = []
    shape_of = np.empty(len(cores), dtype=np.int64)
    p, q = int(Dim.P), int(Dim.Q)
    for i, core in enumerate(cores):
        where = (core.offset[p], core.length[p], core.offset[q], core.length[q])
        clip = clips.get(where)
        if clip is None:
            clip = clips[where] = (_clip_key(problem, 0, core), _clip_key(problem, 1, core))
        key: tuple[object, ...] = (core.length, *clip)
        k = keys.get(key)
        if k is None:
            k = keys[key] = len(shapes)
            shapes.append(core)
        shape_of[i] = k
    groups: list[tuple[tuple[int, ...], ...]] = []
    multicast = problem.arch.cores.multicast
    for op in OPERANDS:
        if not multicast:
            groups.append(tuple((i,) for i in range(len(cores))))
            continue
        rel = [int(d) for d in DIMS if d in RELEVANT[op]]
        pick = itemgetter(*rel) if len(rel) > 1 else (lambda t, d=rel[0]: (t[d],))
        members: dict[tuple[object, ...], list[int]] = {}
        for i, core in enumerate(cores):
            members.setdefault((core.cluster, pick(core.offset), pick(core.length)), []).append(i)
        groups.append(tuple(tuple(m) for m in members.values()))
    return CoreGrid(tuple(cores), tuple(shapes), shape_of, tuple(groups))


def _clip_key(problem: Problem, axis: int, core: CoreSlice) -> tuple[int, int | None]:
    """What decides the input clipping of a core's output slice along rows (0) or columns (1)."""
    d_out, d_k = (Dim.P, Dim.R) if axis == 0 else (Dim.Q, Dim.S)
    size = problem.in_h if axis == 0 else problem.in_w
    start = problem.input_window_start(axis, core.offset[d_out])
    end = start + (core.length[d_out] - 1) * problem.stride[axis] + (int(problem.dims[d_k]) - 1) * \
        problem.dilation[axis] + 1
    return (min(start, 0), size - start if end > size else None)


def dims_array(values: dict[Dim, int] | tuple[int, ...]) -> np.ndarray:
    if isinstance(values, dict):
        return np.array([values[d] for d in DIMS], dtype=np.int64)
    assert len(values) == NDIMS
    return np.array(values, dtype=np.int64)
