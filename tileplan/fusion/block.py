"""Block groups: fused groups with branches and joins (a residual block: main path, shortcut, add).

A chain group (``fusion.group``) is the special case in which every layer reads its predecessor's
output. In a block group each layer's windowed input has a *source* (``FusedGroup.sources``): the
group's input tensor ``X`` (-1) or the output of an earlier group layer; a merging layer (add,
concat) may also read on-chip tensors as its other inputs (``Side.source``: the skip tensor of a
residual block is ``X`` itself, or the output of a shortcut convolution inside the group), besides
the DRAM inputs a chain's merging layers read. Every tensor but the last layer's output stays on
chip; a group may start at an add or a concat (its first input is ``X``, the others come from DRAM).

Tiles propagate backwards over the DAG (:func:`propagate_block`): a tensor's window in a step is the
hull of what its consumers' windows read (for a chain, exactly ``propagate``'s intervals), and ``X``
is read once per step over the hull of its readers (a residual's skip window lies inside the main
path's input window, so the skip costs no DRAM read). The footprint holds every on-chip tensor's
window once: the skip tensor and each intermediate map for the rows and columns in flight of a step
(``tensor_bytes``). Block groups are planned in ``recompute`` mode with whole maps (no chunking):
with tiles as large as the memory allows recompute costs nothing, and overlaps are only recomputed
MACs, never DRAM bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tileplan.errors import WorkloadError
from tileplan.fusion.group import FUSIBLE, MERGING, FusedGroup, Side, chain_error
from tileplan.fusion.propagate import AxisGeom, AxisTiles, _new_lo
from tileplan.fusion.transformer import transformer_shape
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.network import Network

#: The name standing for the network's input among a layer's operands (an add reading the network
#: input lists fewer producers than it sums).
NET_INPUT = ""


def operands(layer: Layer) -> tuple[str, ...]:
    """Producer names of every input tensor of ``layer`` in its input-stack order (``NET_INPUT`` for the
    network's input)."""
    names = tuple(layer.inputs) or (NET_INPUT,)
    if layer.op is OpKind.ADD and len(names) < layer.input_count:
        names = names + (NET_INPUT,) * (layer.input_count - len(names))
    return names


def reads_group_input(layers: Sequence[Layer]) -> bool:
    """Whether a layer after the first of a chain also reads the chain's input (the identity
    shortcut of a residual block): then the chain is a block, whose skip tensor stays on chip."""
    x = operands(layers[0])[0]
    return any(x in operands(layer) for layer in layers[1:])


def _offsets(layer: Layer, names: tuple[str, ...], channels: Sequence[int]) -> list[tuple[int, int]]:
    """(offset, channels) of every operand in the layer's input stack."""
    if layer.op is OpKind.ADD:
        return [(i * layer.c_in, layer.c_in) for i in range(len(names))]
    out, at = [], 0
    for c in channels:
        out.append((at, c))
        at += c
    return out


def block_of(network: Network, names: Sequence[str], readers: dict[str, list[str]] | None = None
             ) -> tuple[FusedGroup | None, str]:
    """The block group of layers ``names`` (in topological order) of ``network``, or ``None`` and why
    not. ``readers``: consumer names per producer (computed when not given)."""
    layers = tuple(network[n] for n in names)
    index = {x.name: i for i, x in enumerate(layers)}
    if readers is None:
        readers = {}
        for layer in network.layers:
            for src in layer.inputs:
                readers.setdefault(src, []).append(layer.name)
    for m, layer in enumerate(layers):
        if layer.op not in FUSIBLE and layer.op not in MERGING:
            return None, f"layer {layer.name!r} is a {layer.op.value} layer, which cannot be fused"
        if m < len(layers) - 1:
            outside = [r for r in readers.get(layer.name, []) if r not in index]
            if outside:
                return None, f"the output of {layer.name!r} is also read by {outside}"
            if not readers.get(layer.name):
                return None, f"the output of {layer.name!r} is read by no layer (it would be lost inside the group)"
    x_name = operands(layers[0])[0]
    x_channels = network[x_name].k_out if x_name in network.by_name else layers[0].c_in
    sources: list[int] = []
    sides: list[tuple[Side, ...]] = []
    for m, layer in enumerate(layers):
        names_m = operands(layer)
        chans = [layers[index[nm]].k_out if nm in index else x_channels if nm == x_name
                 else network[nm].k_out if nm in network.by_name else layer.c_in for nm in names_m]
        where = [index[nm] if nm in index and index[nm] < m else -1 if nm == x_name else None for nm in names_m]
        if m == 0:
            where[0] = -1
        on_chip = [i for i, s in enumerate(where) if s is not None]
        if not on_chip:
            return None, f"layer {layer.name!r} reads nothing the group holds on chip"
        if layer.op not in MERGING and len(names_m) != 1:
            return None, f"layer {layer.name!r} reads {len(names_m)} tensors"
        primary = next((i for i in on_chip if where[i] == m - 1), on_chip[0])
        chosen = where[primary]
        assert chosen is not None  # ``primary`` is on chip
        sources.append(chosen)
        places = _offsets(layer, names_m, chans)
        sides.append(tuple(Side(nm or f"{layer.name}.in{i}", off, ch, where[i])
                           for i, (nm, (off, ch)) in enumerate(zip(names_m, places, strict=True)) if i != primary))
    try:
        return FusedGroup(layers, tuple(sides), tuple(sources)), ""
    except WorkloadError as err:
        return None, str(err)


def group_of(network: Network, names: Sequence[str], readers: dict[str, list[str]] | None = None) -> FusedGroup:
    """The fused group of layers ``names`` of ``network``: a chain (``FusedGroup.of``) unless a layer
    reads the chain's input again (an identity shortcut) or the layers branch and join, then a block
    group (:func:`block_of`); ``WorkloadError`` naming the reason when neither."""
    layers = [network[n] for n in names]
    if transformer_shape(layers, network) is not None:  # an attention or MLP block (``fusion.transformer``)
        return FusedGroup.of(network, names)
    why = chain_error(layers, network, merges=True)
    if why is None and not reads_group_input(layers):
        return FusedGroup.of(network, names)
    group, block_why = block_of(network, names, readers)
    if group is None:
        raise WorkloadError(f"network {network.name!r}: cannot fuse {'+'.join(names)}: {block_why or why}")
    return group


def consumers(group: FusedGroup) -> dict[int, list[int]]:
    """Per on-chip tensor (-1: the group's input, ``j``: layer ``j``'s output) the group layers reading it."""
    out: dict[int, list[int]] = {}
    for m in range(len(group)):
        for s in {group.sources[m], *(side.source for side in group.sides[m] if side.source is not None)}:
            out.setdefault(s, []).append(m)
    return out


@dataclass(frozen=True)
class BlockAxisTiles(AxisTiles):
    """``AxisTiles`` of a block group plus the window of its input tensor (the hull of its readers')."""

    x_lo: np.ndarray
    x_hi: np.ndarray


def _hull(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per position the smallest interval holding every non-empty one of ``pairs``."""
    big = np.iinfo(np.int64).max
    los = [np.where(hi > lo, lo, big) for lo, hi in pairs]
    his = [np.where(hi > lo, hi, -big) for lo, hi in pairs]
    lo, hi = np.minimum.reduce(los), np.maximum.reduce(his)
    empty = hi <= lo
    return np.where(empty, pairs[0][0], lo), np.where(empty, pairs[0][0], hi)


def propagate_block(group: FusedGroup, geoms: list[AxisGeom], tiles: np.ndarray) -> BlockAxisTiles:
    """``propagate`` over a block group's DAG: tiles of the last layer's output; each other tensor's
    window is the hull of its consumers' input windows (a chain gives ``propagate``'s intervals)."""
    length = geoms[-1].out_size
    t = np.asarray(tiles, dtype=np.int64)
    npos = -(-length // t)
    i = np.arange(int(npos.max()), dtype=np.int64)[None, :]
    valid = i < npos[:, None]
    n = len(geoms)
    used = consumers(group)
    out_lo: list[np.ndarray] = [np.empty(0)] * n
    out_hi: list[np.ndarray] = [np.empty(0)] * n
    in_lo: list[np.ndarray] = [np.empty(0)] * n
    in_hi: list[np.ndarray] = [np.empty(0)] * n
    for m in range(n - 1, -1, -1):
        geom = geoms[m]
        if m == n - 1:
            lo = np.where(valid, i * t[:, None], length)
            hi = np.where(valid, np.minimum((i + 1) * t[:, None], length), length)
        else:
            lo, hi = _hull([(in_lo[c], in_hi[c]) for c in used[m]])
            lo, hi = np.where(valid, lo, geom.out_size), np.where(valid, hi, geom.out_size)
        a, b = geom.back(lo, hi)
        out_lo[m], out_hi[m] = lo, hi
        in_lo[m], in_hi[m] = np.where(valid, a, geom.in_size), np.where(valid, b, geom.in_size)
    x_lo, x_hi = _hull([(in_lo[c], in_hi[c]) for c in used[-1]])
    new_lo = [_new_lo(lo, hi, valid) for lo, hi in zip(out_lo, out_hi, strict=True)]
    nin = [g.back(nl, hi) for g, nl, hi in zip(geoms, new_lo, out_hi, strict=True)]
    return BlockAxisTiles(t, valid, tuple(out_lo), tuple(out_hi), tuple(new_lo), tuple(in_lo), tuple(in_hi),
                          tuple(np.where(valid, a, 0) for a, _ in nin), tuple(np.where(valid, b, 0) for _, b in nin),
                          np.where(valid, x_lo, geoms[0].in_size), np.where(valid, x_hi, geoms[0].in_size))


def x_extents(ax: AxisTiles) -> np.ndarray:
    """(n_tiles, n_positions) extents of the group input's window along one axis (a chain: layer 0's)."""
    if isinstance(ax, BlockAxisTiles):
        return ax.x_hi - ax.x_lo
    return ax.in_hi[0] - ax.in_lo[0]


def max_extent(ax: AxisTiles, ext: np.ndarray) -> np.ndarray:
    """Per tile size the largest extent over the valid positions."""
    return np.max(np.where(ax.valid, ext, 0), axis=1)


def group_length(layers: Sequence[Layer], *, count_joins: bool = False) -> int:
    """A group's length as ``max_group`` (``--max-group``) bounds it: its layers with a compute
    window (convolutions of every kind, pools; a transformer block is bounded by nothing), not the
    element-wise adds and concats (``MERGING``) joining their outputs, which ride along -- a residual
    basic block (two 3x3 convolutions and the add; a downsampling one also its 1x1 shortcut) is 2
    (3) long. ``count_joins``: count the joins too (every layer; the rule before issue 27, which the
    Ye et al. experiment keeps for its published numbers)."""
    return sum(1 for x in layers if count_joins or x.op not in MERGING)


def group_ends(layers: Sequence[Layer], start: int, max_group: int, *, count_joins: bool = False) -> range:
    """The ends (exclusive) of the segments of two or more layers of ``layers`` starting at ``start``
    whose :func:`group_length` is at most ``max_group`` (joins after the last counted layer included)."""
    end, count = start, 0
    while end < len(layers):
        count += 1 if count_joins or layers[end].op not in MERGING else 0
        if count > max_group:
            break
        end += 1
    return range(start + 2, end + 1)


def block_segments(network: Network, max_group: int, known: Sequence[tuple[int, int]] = (), *,
                   count_joins: bool = False) -> dict[tuple[int, int], FusedGroup]:
    """Block groups of two or more consecutive layers of ``network``'s topological order, at most
    ``max_group`` long (:func:`group_length`), as ``{(start, end): group}`` (layers ``start..end-1``),
    leaving out the segments in ``known`` (the legal chains: a chain whose add reads its input is
    already a block, :func:`group_of`)."""
    readers: dict[str, list[str]] = {}
    for layer in network.layers:
        for src in layer.inputs:
            readers.setdefault(src, []).append(layer.name)
    layers = network.layers
    skip = set(known)
    out: dict[tuple[int, int], FusedGroup] = {}
    for start in range(len(layers) - 1):
        if layers[start].op not in FUSIBLE and layers[start].op not in MERGING:
            continue
        for end in group_ends(layers, start, max_group, count_joins=count_joins):
            if layers[end - 1].op not in FUSIBLE and layers[end - 1].op not in MERGING:
                break
            if (start, end) in skip:
                continue
            group, _ = block_of(network, [x.name for x in layers[start:end]], readers)
            if group is not None:
                out[(start, end)] = group
    return out
