"""A plainly written reference: walk the tile loop nest of one core step by step, keep each
operand's resident box, and count every DRAM byte and burst from actual element addresses.

Nothing here is vectorised or clever; it is the witness the analytical model is checked against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

from tileplan.dims import DIMS, RELEVANT, Dim, Operand
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer

LETTERS = {Operand.INPUT: {"N": ("N",), "C": ("G", "C"), "H": ("H",), "W": ("W",)},
           Operand.WEIGHT: {"K": ("G", "K"), "C": ("C",), "R": ("R",), "S": ("S",)},
           Operand.OUTPUT: {"N": ("N",), "K": ("G", "K"), "P": ("P",), "Q": ("Q",)}}


@dataclass
class Counts:
    read_bytes: list[int] = field(default_factory=lambda: [0, 0, 0])
    write_bytes: int = 0
    bursts: list[int] = field(default_factory=lambda: [0, 0, 0])
    compute_cycles: int = 0
    steps: int = 0


def tensor_shape(layer: Layer, op: Operand) -> dict[str, int]:
    d = layer.dims
    if op is Operand.INPUT:
        return {"N": d[Dim.N], "G": d[Dim.G], "C": d[Dim.C], "H": layer.h, "W": layer.w}
    if op is Operand.WEIGHT:
        return {"G": d[Dim.G], "K": d[Dim.K], "C": d[Dim.C], "R": d[Dim.R], "S": d[Dim.S]}
    return {"N": d[Dim.N], "G": d[Dim.G], "K": d[Dim.K], "P": d[Dim.P], "Q": d[Dim.Q]}


def storage_names(op: Operand, layout: str) -> list[str]:
    out: list[str] = []
    for letter in layout:
        out.extend(LETTERS[op][letter])
    return out


def box_bursts(layer: Layer, op: Operand, box: dict[str, tuple[int, int]], layout: str, elem_bytes: int,
               burst: int) -> tuple[int, int]:
    """(elements, bursts) of a box: enumerate its element addresses, merge contiguous runs, and
    charge ceil(run_bytes / burst) per run."""
    shape = tensor_shape(layer, op)
    names = storage_names(op, layout)
    strides = {}
    acc = 1
    for name in reversed(names):
        strides[name] = acc
        acc *= shape[name]
    ranges = [range(box[name][0], box[name][1]) for name in names]
    addrs = sorted(sum(i * strides[nm] for i, nm in zip(idx, names, strict=True)) for idx in product(*ranges))
    if not addrs:
        return 0, 0
    bursts = 0
    run = 1
    for a, b in zip(addrs, addrs[1:], strict=False):
        if b == a + 1:
            run += 1
        else:
            bursts += math.ceil(run * elem_bytes / burst)
            run = 1
    bursts += math.ceil(run * elem_bytes / burst)
    return len(addrs), bursts


def walk(layer: Layer, mapping: Mapping, *, burst: int, offset: tuple[int, ...] | None = None,
         length: tuple[int, ...] | None = None, flat_axes: tuple[tuple[tuple[Dim, ...], int], ...] = ()
         ) -> Counts:
    """Walk one core's slice (default: the whole layer) and count its DRAM traffic.

    Input and weight tiles are loaded when a (non-hoisted) tile index that indexes them changes;
    output boxes are written back when left and read back when revisited.
    """
    prec = layer.resolved_precision()
    full = layer.dims
    offset = offset or tuple(0 for _ in DIMS)
    length = length or tuple(full[d] for d in DIMS)
    tiles = {d: min(mapping.tiles[d], length[d]) for d in DIMS}
    trips = {d: -(-length[d] // tiles[d]) for d in DIMS}
    unroll = mapping.unroll()
    flat = {d for dims, _ in flat_axes for d in dims}
    counts = Counts()
    resident: dict[Operand, tuple | None] = {op: None for op in Operand}
    visits: dict[tuple, int] = {}
    evictions: list[tuple] = []
    has_w = layer.has_weight_operand  # a weight, or a matmul's activation B

    def loop_range(op: Operand, d: Dim, i: int) -> tuple[int, int]:
        if d in mapping.hoist[op]:
            return offset[d], offset[d] + length[d]
        start = offset[d] + i * tiles[d]
        return start, min(start + tiles[d], offset[d] + length[d])

    def box_of(op: Operand, idx: dict[Dim, int]) -> dict[str, tuple[int, int]]:
        rng = {d: loop_range(op, d, idx[d]) for d in DIMS}
        if op is Operand.INPUT:
            box = {"N": rng[Dim.N], "G": rng[Dim.G], "C": rng[Dim.C]}
            for name, dp, dk, axis, size, pad in (("H", Dim.P, Dim.R, 0, layer.h, layer.pad[0]),
                                                  ("W", Dim.Q, Dim.S, 1, layer.w, layer.pad[2])):
                p0, p1 = rng[dp]
                k0, k1 = rng[dk]
                lo = p0 * layer.stride[axis] + k0 * layer.dilation[axis] - pad
                hi = (p1 - 1) * layer.stride[axis] + (k1 - 1) * layer.dilation[axis] - pad + 1
                lo, hi = max(lo, 0), min(hi, size)
                box[name] = (lo, max(hi, lo))
            return box
        if op is Operand.WEIGHT:
            return {"G": rng[Dim.G], "K": rng[Dim.K], "C": rng[Dim.C], "R": rng[Dim.R], "S": rng[Dim.S]}
        return {"N": rng[Dim.N], "G": rng[Dim.G], "K": rng[Dim.K], "P": rng[Dim.P], "Q": rng[Dim.Q]}

    def key(box: dict[str, tuple[int, int]]) -> tuple:
        return tuple(sorted(box.items()))

    def store(box_key: tuple) -> None:
        evictions.append(box_key)

    order = mapping.order
    for idx_tuple in product(*[range(trips[d]) for d in order]):
        idx = dict(zip(order, idx_tuple, strict=True))
        counts.steps += 1
        for op in (Operand.INPUT, Operand.WEIGHT):
            if op is Operand.WEIGHT and not has_w:
                continue
            box = box_of(op, idx)
            # A program reloads when a tile index it depends on changes (two index pairs that
            # happen to give the same halo box are still two loads).
            k = tuple(idx[d] for d in DIMS if d in RELEVANT[op] and d not in mapping.hoist[op])
            if k != resident[op]:
                resident[op] = k
                elems, nb = box_bursts(layer, op, box, mapping.layouts[op], prec.of(op), burst)
                counts.read_bytes[op] += elems * prec.of(op) * layer.input_count ** (op is Operand.INPUT)
                counts.bursts[op] += nb * layer.input_count ** (op is Operand.INPUT)
        box = box_of(Operand.OUTPUT, idx)
        k = key(box)
        if k != resident[Operand.OUTPUT]:
            if resident[Operand.OUTPUT] is not None:
                store(resident[Operand.OUTPUT])
            if visits.get(k, 0) > 0:
                elems, nb = box_bursts(layer, Operand.OUTPUT, box, mapping.layouts[2], prec.psum, burst)
                counts.read_bytes[Operand.OUTPUT] += elems * prec.psum
                counts.bursts[Operand.OUTPUT] += nb
            visits[k] = visits.get(k, 0) + 1
            resident[Operand.OUTPUT] = k
        # compute cycles of this tile
        t = {d: min(tiles[d], length[d] - idx[d] * tiles[d]) for d in DIMS}
        cyc = 1
        for d in DIMS:
            if d in flat:
                continue
            cyc *= math.ceil(t[d] / unroll[d]) if unroll[d] > 1 else t[d]
        for dims, lanes in flat_axes:
            prod = 1
            for d in dims:
                prod *= t[d]
            cyc *= math.ceil(prod / lanes)
        counts.compute_cycles += cyc
    store(resident[Operand.OUTPUT])
    remaining = dict(visits)
    for k in evictions:
        remaining[k] -= 1
        box = dict(k)
        final = remaining[k] == 0
        b = prec.output if final else prec.psum
        elems, nb = box_bursts(layer, Operand.OUTPUT, box, mapping.layouts[2], b, burst)
        counts.write_bytes += elems * b
        counts.bursts[Operand.OUTPUT] += nb
    return counts
