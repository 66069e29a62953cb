"""HW-Flow-Fusion resource partitions (§4.3): how a fused group shares one PE array.

* *Spatial fusion* (§4.3.1): the array is cut into one sub-array per fused layer. Every side of a
  sub-array divides the array's side along that axis, the sub-arrays fit in the array without
  overlapping, and each is legal for row-stationary: along every axis that unrolls a filter
  dimension (R or S) the side is at least the layer's filter extent there (Table 2: P_kx = N_kx, so
  the PE set needs the whole filter row; the paper's "height >= filter height"). Each layer keeps
  the whole register file.
* *Temporal fusion* (§4.3.2): every layer uses the whole array, time-shared, and the register file
  of each PE is split 1/N among the N fused layers (each of the weight, input and psum sections,
  rounded down to whole elements).

A partition only restricts the per-layer mapping: layer ``m`` is mapped on :meth:`Partition.arch`
(the arch with its share of the array / register file) by the one fusion model
(``GroupModel.on_shares``); DRAM traffic, buffer capacity and energy prices are the whole chip's.
In both cases a share is legal only if the register file share holds a row-stationary primitive
(one filter row, its input window, one partial sum), checked with the multi-level model's level-1
fit rule (``search.marvel_onchip_space.level_options``).

Sub-array placement uses guillotine cuts, which is exact for up to four rectangles (the smallest
non-guillotine packing, the pinwheel, needs five); spatial groups have at most ``MAX_SPATIAL`` layers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from itertools import permutations, product
from typing import Any

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS, Dim
from tileplan.errors import TileplanError
from tileplan.search.marvel_onchip_space import OnChipOptions, level_options
from tileplan.workload.layer import Layer

#: Most layers a spatial partition places: guillotine placement is exact up to four rectangles, and
#: HW-Flow-Fusion's spatial scaling study (§5.3, Figs. 18-19) fuses at most four layers.
MAX_SPATIAL = 4

Sides = tuple[int, int]
Origin = tuple[int, int]


class FusionKind(StrEnum):
    """How a fused group shares the PE array."""

    SPATIAL = "spatial"
    TEMPORAL = "temporal"


@dataclass(frozen=True)
class Share:
    """One layer's resources: sub-array sides per PE-array axis, its origin in the array, and its
    register-file bytes (weights, inputs, psums)."""

    sides: Sides
    origin: Origin
    rf_bytes: tuple[int, int, int]


@dataclass(frozen=True)
class Partition:
    """A resource partition of a fused group (one share per layer, in group order)."""

    kind: FusionKind
    shares: tuple[Share, ...]

    def arch(self, arch: Arch, m: int) -> Arch:
        """``arch`` restricted to layer ``m``'s share (PE-array sides and register file)."""
        return share_arch(arch, self.shares[m].sides, self.shares[m].rf_bytes)

    def archs(self, arch: Arch) -> list[Arch]:
        return [self.arch(arch, m) for m in range(len(self.shares))]

    def describe(self) -> str:
        if self.kind is FusionKind.TEMPORAL:
            w, i, o = self.shares[0].rf_bytes
            return f"temporal, RF [{w}, {i}, {o}] B each"
        return "spatial " + " ".join(f"[{s.sides[0]}, {s.sides[1]}]" for s in self.shares)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "describe": self.describe(),
                "shares": [{"sides": list(s.sides), "origin": list(s.origin), "rf_bytes": list(s.rf_bytes)}
                           for s in self.shares]}


def array_sides(arch: Arch) -> Sides:
    """(x, y) PE-array sides at the arch's precision; partitions need a two-axis array."""
    axes = arch.pe_array.axes
    if len(axes) != 2:
        raise TileplanError(f"resource partitions need a two-axis PE array; {arch.name} has {len(axes)} axes")
    x, y = (axis.lanes(arch.precision_bytes) for axis in axes)
    return x, y


def share_arch(arch: Arch, sides: Sides, rf_bytes: tuple[int, int, int]) -> Arch:
    """``arch`` with its PE-array axes resized to ``sides`` and its register file set to ``rf_bytes``."""
    axes = tuple(replace(axis, size=side, size_by_precision=None)
                 for axis, side in zip(arch.pe_array.axes, sides, strict=True))
    weights, inputs, psums = rf_bytes
    rf = replace(arch.register_file, weights_bytes=weights, inputs_bytes=inputs, psums_bytes=psums)
    return replace(arch, pe_array=replace(arch.pe_array, axes=axes), register_file=rf)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def rf_split(arch: Arch, layer: Layer, parts: int) -> tuple[int, int, int]:
    """Each register-file section divided among ``parts`` layers, rounded down to whole elements of
    ``layer``'s precision (weights, inputs, psums)."""
    rf = arch.register_file
    prec = layer.precision
    if prec is None:
        raise TileplanError(f"layer {layer.name!r} has no precision; set the network's precision first")
    return tuple(size // parts // b * b for size, b in ((rf.weights_bytes, prec.weight),  # type: ignore[return-value]
                                                        (rf.inputs_bytes, prec.input),
                                                        (rf.psums_bytes, prec.psum)))


def rs_sides_ok(arch: Arch, layer: Layer, sides: Sides) -> bool:
    """Row-stationary legality of a sub-array: every axis unrolling a filter dimension is at least
    the filter's extent along it (a PE set holds whole filter rows)."""
    extent = {Dim.R: layer.r, Dim.S: layer.s}
    for axis, side in zip(arch.pe_array.axes, sides, strict=True):
        if any(side < extent[d] for d in axis.dim_ids if d in extent):
            return False
    return True


@lru_cache(maxsize=4096)
def rf_fits(arch: Arch, layer: Layer, rf_bytes: tuple[int, int, int], sides: Sides | None = None) -> bool:
    """Whether a register file of ``rf_bytes`` holds one row-stationary step of ``layer`` (a filter
    row, its input window, one psum; filter rows spread over the PEs of ``sides``, default the whole
    array), by the multi-level model's level-1 fit rule."""
    share = share_arch(arch, array_sides(arch) if sides is None else sides, rf_bytes)
    tiles = [1] * NDIMS
    tiles[Dim.R], tiles[Dim.S] = layer.r, layer.s
    opts = OnChipOptions(divisors=False, unroll_rs=True, symmetry=False, max_parallel=2, min_utilization=0.0,
                         parallel=(Dim.P, Dim.R))
    return len(level_options(Problem(layer, share), tuple(tiles), opts)) > 0


@lru_cache(maxsize=4096)
def place(shapes: tuple[Sides, ...], box: Sides) -> tuple[Origin, ...] | None:
    """Origins (relative to the box) placing ``shapes`` in ``box`` without overlap by guillotine cuts,
    or ``None`` (exact for up to four shapes)."""
    if not shapes:
        return ()
    bx, by = box
    if len(shapes) == 1:
        return ((0, 0),) if shapes[0][0] <= bx and shapes[0][1] <= by else None
    if sum(w * h for w, h in shapes) > bx * by or any(w > bx or h > by for w, h in shapes):
        return None
    n = len(shapes)
    for mask in range(1, (1 << n) - 1):
        if not mask & 1:  # the first shape always goes into the first part (halves the splits)
            continue
        first = tuple(s for i, s in enumerate(shapes) if mask >> i & 1)
        rest = tuple(s for i, s in enumerate(shapes) if not mask >> i & 1)
        for axis in (0, 1):
            cut = max(s[axis] for s in first)
            if axis == 0:
                boxes = ((cut, by), (bx - cut, by))
            else:
                boxes = ((bx, cut), (bx, by - cut))
            if min(boxes[1]) <= 0:
                continue
            a, b = place(first, boxes[0]), place(rest, boxes[1])
            if a is None or b is None:
                continue
            shift = (cut, 0) if axis == 0 else (0, cut)
            origins: list[Origin] = [(0, 0)] * n
            ia, ib = iter(a), iter(b)
            for i in range(n):
                if mask >> i & 1:
                    origins[i] = next(ia)
                else:
                    ox, oy = next(ib)
                    origins[i] = (ox + shift[0], oy + shift[1])
            return tuple(origins)
    return None


def _legal_sides(arch: Arch, layer: Layer) -> list[Sides]:
    x, y = array_sides(arch)
    return [(w, h) for w, h in product(divisors(x), divisors(y)) if rs_sides_ok(arch, layer, (w, h))]


def _spatial_setting(arch: Arch, layers: tuple[Layer, ...]) -> tuple[Sides, tuple[int, int, int]] | None:
    """(array sides, the full register file) for a spatial partition of ``layers``, or None when some
    layer cannot run a row-stationary step even with the whole register file."""
    if len(layers) > MAX_SPATIAL:
        raise TileplanError(f"spatial fusion places at most {MAX_SPATIAL} layers, not {len(layers)}")
    rf = arch.register_file
    full = (rf.weights_bytes, rf.inputs_bytes, rf.psums_bytes)
    if not all(rf_fits(arch, layer, full) for layer in layers):
        return None
    return array_sides(arch), full


def _spatial(arch: Arch, layers: tuple[Layer, ...], choices: list[list[Sides]]) -> list[Partition]:
    setting = _spatial_setting(arch, layers)
    if setting is None:
        return []
    box, full = setting
    out = []
    for combo in product(*choices):
        origins = place(tuple(combo), box)
        if origins is not None:
            out.append(Partition(FusionKind.SPATIAL, tuple(Share(s, o, full) for s, o in zip(combo, origins,
                                                                                            strict=True))))
    return out


def spatial_partitions(arch: Arch, layers: tuple[Layer, ...]) -> list[Partition]:
    """Every legal spatial partition of ``arch``'s PE array among ``layers`` (one sub-array each, in
    layer order). Exhaustive over the divisor sides: meant for groups of two or three layers."""
    return _spatial(arch, layers, [_legal_sides(arch, layer) for layer in layers])


def _maximal(cands: set[tuple[Sides, ...]]) -> frozenset[tuple[Sides, ...]]:
    """The sorted shape multisets of ``cands`` that no other one dominates: B dominates A when some
    matching of A's shapes to B's has every A shape at most its B shape on both sides (A != B).
    Vectorised over all pairs and the k! matchings (k <= 4: at most 24)."""
    if len(cands) <= 1:
        return frozenset(cands)
    arr = np.array(sorted(cands), dtype=np.int64)  # (n, k, 2)
    n, k = arr.shape[:2]
    dominated = np.zeros(n, dtype=bool)
    for perm in permutations(range(k)):
        other = arr[:, list(perm), :].reshape(n, -1)
        flat = arr.reshape(n, -1)
        for start in range(0, n, 256):
            le = np.all(flat[start:start + 256, None, :] <= other[None, :, :], axis=2)  # (chunk, n)
            le[np.arange(le.shape[0]), np.arange(start, start + le.shape[0])] = False
            dominated[start:start + 256] |= le.any(axis=1)
    return frozenset(tuple(map(tuple, arr[i])) for i in np.flatnonzero(~dominated))  # type: ignore[misc]


@lru_cache(maxsize=4096)
def _tilings(array: Sides, box: Sides, k: int) -> frozenset[tuple[Sides, ...]]:
    """The maximal (:func:`_maximal`) sorted shape multisets of guillotine cuts of ``box`` into ``k``
    parts, each part replaced by the largest sub-array (sides dividing ``array``) it holds. Pruning
    each sub-box to its maximal multisets keeps every maximal multiset of the box: replacing a
    dominated part by its dominator dominates the whole."""
    bx, by = box
    if k == 1:
        w = max((d for d in divisors(array[0]) if d <= bx), default=0)
        h = max((d for d in divisors(array[1]) if d <= by), default=0)
        return frozenset({((w, h),)}) if w and h else frozenset()
    out: set[tuple[Sides, ...]] = set()
    for axis in (0, 1):
        length = box[axis]
        cuts = {c for d in divisors(array[axis]) for c in (d, length - d) if 0 < c < length}
        for c in cuts:
            first, second = ((c, by), (bx - c, by)) if axis == 0 else ((bx, c), (bx, by - c))
            for k1 in range(1, k):
                for a in _tilings(array, first, k1):
                    for b in _tilings(array, second, k - k1):
                        out.add(tuple(sorted(a + b)))
    return _maximal(out)


def _pareto(points: np.ndarray, chunk: int = 512) -> np.ndarray:
    """(n,) mask of the rows of ``points`` that no other row dominates (>= everywhere, > somewhere)."""
    keep = np.ones(len(points), dtype=bool)
    for start in range(0, len(points), chunk):
        p = points[start:start + chunk]
        ge = np.all(points[None, :, :] >= p[:, None, :], axis=2)
        gt = np.any(points[None, :, :] > p[:, None, :], axis=2)
        keep[start:start + chunk] = ~np.any(ge & gt, axis=1)
    return keep


def maximal_spatial_partitions(arch: Arch, layers: tuple[Layer, ...]) -> list[Partition]:
    """The Pareto-maximal legal spatial partitions: none has another legal partition whose every
    sub-array is at least as large on both sides. A layer's compute cycles never grow with its
    sub-array (every unroll of a smaller array fits a larger one), row-stationary legality only gets
    easier, and nothing else depends on the partition, so a search over these keeps an optimum of the
    search over all of :func:`spatial_partitions`. Built from the maximal guillotine tilings (exact up
    to ``MAX_SPATIAL`` = 4 layers): a legal ordering of a dominated multiset is dominated by the same
    ordering of its dominator, which is legal too, so only maximal multisets are ordered."""
    setting = _spatial_setting(arch, layers)
    if setting is None:
        return []
    box, full = setting
    ordered: set[tuple[Sides, ...]] = set()
    for multiset in _tilings(box, box, len(layers)):
        for perm in set(permutations(multiset)):
            if all(rs_sides_ok(arch, layer, s) for layer, s in zip(layers, perm, strict=True)):
                ordered.add(perm)
    if not ordered:
        return []
    cands = sorted(ordered)
    keep = [cands[i] for i in np.flatnonzero(_pareto(np.array(cands, dtype=np.int64).reshape(len(cands), -1)))]
    out = []
    for shapes in keep:
        origins = place(shapes, box)
        if origins is not None:
            out.append(Partition(FusionKind.SPATIAL, tuple(Share(s, o, full) for s, o in zip(shapes, origins,
                                                                                            strict=True))))
    return out


def temporal_partition(arch: Arch, layers: tuple[Layer, ...]) -> Partition | None:
    """The one temporal partition (whole array, register file split 1/N), or ``None`` when a layer's
    share cannot hold a row-stationary step."""
    n = len(layers)
    shares = tuple(Share(array_sides(arch), (0, 0), rf_split(arch, layer, n)) for layer in layers)
    if not all(rf_fits(arch, layer, s.rf_bytes) for layer, s in zip(layers, shares, strict=True)):
        return None
    return Partition(FusionKind.TEMPORAL, shares)


def partitions(arch: Arch, layers: tuple[Layer, ...], kind: FusionKind, *, maximal: bool = True
               ) -> list[Partition]:
    """The partitions of ``kind`` a search visits (spatial: the maximal ones unless ``maximal`` is off)."""
    if kind is FusionKind.TEMPORAL:
        t = temporal_partition(arch, layers)
        return [] if t is None else [t]
    return maximal_spatial_partitions(arch, layers) if maximal else spatial_partitions(arch, layers)


def check_partition(arch: Arch, layers: tuple[Layer, ...], part: Partition) -> str | None:
    """Why ``part`` is not a legal partition of ``arch`` among ``layers`` (``None`` if it is); an
    independent check of what the enumeration produces (used by the tests)."""
    x, y = array_sides(arch)
    if len(part.shares) != len(layers):
        return f"{len(part.shares)} shares for {len(layers)} layers"
    rf = arch.register_file
    for layer, s in zip(layers, part.shares, strict=True):
        w, h = s.sides
        if x % w or y % h:
            return f"sub-array {s.sides} does not divide the {x}x{y} array"
        if not rs_sides_ok(arch, layer, s.sides):
            return f"sub-array {s.sides} is narrower than {layer.name}'s filter"
        ox, oy = s.origin
        if ox < 0 or oy < 0 or ox + w > x or oy + h > y:
            return f"sub-array {s.sides} at {s.origin} leaves the array"
        if not rf_fits(arch, layer, s.rf_bytes, s.sides):
            return f"register file share {s.rf_bytes} cannot hold a row-stationary step of {layer.name}"
    if part.kind is FusionKind.TEMPORAL:
        n = len(layers)
        if any(s.sides != (x, y) for s in part.shares):
            return "temporal fusion uses the whole array"
        for s in part.shares:
            if any(b * n > full for b, full in zip(s.rf_bytes, (rf.weights_bytes, rf.inputs_bytes, rf.psums_bytes),
                                                     strict=True)):
                return f"register file share {s.rf_bytes} exceeds 1/{n} of the register file"
        return None
    for i, a in enumerate(part.shares):
        for b in part.shares[i + 1:]:
            if (a.origin[0] < b.origin[0] + b.sides[0] and b.origin[0] < a.origin[0] + a.sides[0]
                    and a.origin[1] < b.origin[1] + b.sides[1] and b.origin[1] < a.origin[1] + a.sides[1]):
                return f"sub-arrays at {a.origin} and {b.origin} overlap"
    return None
