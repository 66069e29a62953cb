"""A plain walk of a three-level loop nest as written: every DRAM tile, inside it every step with
its real (remainder) extents, inside it every child's piece. An operand's tile (what one step
covers of the dimensions indexing it) is loaded when its indices change: then every active child
receives its piece (a child that becomes active later while the tile is unchanged receives it
then). No reload rule is assumed (in particular not "a loop with more than one trip in any tile is
multi-trip in every tile"): loads are *observed*.

Counts (elements, summed over children): ``fills`` every piece a child loads; ``reads`` what the
parent memory reads for them -- the distinct pieces loaded at one iteration (a multicast is read
once); outputs: each visit of an output piece is written back once after spatial reduction
(``writes``: distinct pieces per visit), a revisit reads the partial sums back (``reads`` and
``fills`` of the output).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from tileplan.dims import DIMS, RELEVANT, Dim, Operand
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer


@dataclass
class OnChipCounts:
    """What :func:`walk_nest` counts (elements, summed over children)."""

    fills: list[int] = field(default_factory=lambda: [0, 0, 0])
    reads: list[int] = field(default_factory=lambda: [0, 0, 0])
    writes: int = 0
    footprint: list[int] = field(default_factory=lambda: [0, 0, 0])  # elements of one child, largest
    compute_cycles: int = 0


def _elements(layer: Layer, op: Operand, rng: dict[Dim, tuple[int, int]]) -> int:
    size = {d: rng[d][1] - rng[d][0] for d in DIMS}
    if op is Operand.WEIGHT:
        return size[Dim.G] * size[Dim.K] * size[Dim.C] * size[Dim.R] * size[Dim.S]
    if op is Operand.OUTPUT:
        return size[Dim.N] * size[Dim.G] * size[Dim.K] * size[Dim.P] * size[Dim.Q]
    total = size[Dim.N] * size[Dim.G] * size[Dim.C] * layer.input_count
    for dp, dk, axis, extent, pad in ((Dim.P, Dim.R, 0, layer.h, layer.pad[0]), (Dim.Q, Dim.S, 1, layer.w,
                                                                                layer.pad[2])):
        lo = rng[dp][0] * layer.stride[axis] + rng[dk][0] * layer.dilation[axis] - pad
        hi = (rng[dp][1] - 1) * layer.stride[axis] + (rng[dk][1] - 1) * layer.dilation[axis] - pad + 1
        total *= max(0, min(hi, extent) - max(lo, 0))
    return total


def _nest(loops: list[tuple[Dim, int]], full: dict[Dim, int], t0: dict[Dim, int], step: dict[Dim, int]):
    """Every iteration of the nest as {(dim, level): start}, innermost loop fastest; a step loop runs
    over its DRAM tile's real extent (a remainder tile has fewer steps)."""
    def rec(i: int, starts: dict[tuple[Dim, int], int]):
        if i == len(loops):
            yield dict(starts)
            return
        d, lvl = loops[i]
        if lvl == 0:
            lo, hi, size = 0, full[d], t0[d]
        else:
            lo = starts[(d, 0)]
            hi, size = min(lo + t0[d], full[d]), step[d]
        for s in range(lo, hi, size):
            starts[(d, lvl)] = s
            yield from rec(i + 1, starts)
    yield from rec(0, {})


def walk_nest(layer: Layer, mapping: Mapping) -> OnChipCounts:
    """Walk a one-core mapping with one on-chip level (see the module docstring)."""
    (level,) = mapping.levels
    full = layer.dims
    t0 = {d: min(mapping.tiles[d], full[d]) for d in DIMS}
    t1 = {d: min(level.tiles[d], t0[d]) for d in DIMS}
    step = {d: t1[d] * level.fanout[d] for d in DIMS}
    loops = [(d, 0) for d in mapping.order] + [(d, 1) for d in level.order]
    children = list(product(*[range(level.fanout[d]) for d in DIMS]))
    ops = [op for op in Operand if op is not Operand.WEIGHT or layer.has_weights]
    held: dict[Operand, dict[tuple[int, ...], tuple]] = {op: {} for op in ops}
    seen: set[tuple] = set()
    tiles: dict[Operand, tuple] = {}
    counts = OnChipCounts()
    for starts in _nest(loops, full, t0, step):
        ranges = {}
        for k in children:
            rng = {}
            for d in DIMS:
                tile_end = min(starts[(d, 0)] + t0[d], full[d])
                step_end = min(starts[(d, 1)] + step[d], tile_end)
                lo = starts[(d, 1)] + k[d] * t1[d]
                rng[d] = (lo, max(lo, min(lo + t1[d], step_end)))
            if all(r[1] > r[0] for r in rng.values()):
                ranges[k] = rng
        counts.compute_cycles += max(_size(r) for r in ranges.values())
        for op in ops:
            tile = tuple(_step_range(starts, d, t0, step, full) for d in DIMS if d in RELEVANT[op])
            if tiles.get(op) != tile:  # the step's tile of ``op`` changed: the children's pieces are stale
                tiles[op] = tile
                held[op].clear()
            loaded: dict[tuple, int] = {}
            for k, rng in ranges.items():
                key = tuple(rng[d] for d in DIMS if d in RELEVANT[op])
                if held[op].get(k) == key:
                    continue
                held[op][k] = key
                elems = _elements(layer, op, rng)
                counts.footprint[op] = max(counts.footprint[op], elems)
                loaded[key] = elems
                if op is not Operand.OUTPUT:
                    counts.fills[op] += elems
            for key, elems in loaded.items():
                if op is not Operand.OUTPUT:
                    counts.reads[op] += elems
                    continue
                counts.writes += elems
                if key in seen:
                    counts.reads[op] += elems
                seen.add(key)
    counts.fills[Operand.OUTPUT] = counts.reads[Operand.OUTPUT]
    return counts


def _step_range(starts: dict[tuple[Dim, int], int], d: Dim, t0: dict[Dim, int], step: dict[Dim, int],
                full: dict[Dim, int]) -> tuple[int, int]:
    """The elements of dimension ``d`` the current step covers (its real extent)."""
    end = min(starts[(d, 0)] + t0[d], full[d])
    return starts[(d, 1)], min(starts[(d, 1)] + step[d], end)


def _size(rng: dict[Dim, tuple[int, int]]) -> int:
    out = 1
    for lo, hi in rng.values():
        out *= hi - lo
    return out
