"""Fused groups and fused mappings (value objects).

A fused group is a chain of consecutive layers whose intermediate maps never leave the chip: one
shared outer loop nest walks tiles of the *last* layer's output (N, P, Q and, innermost, K); each
tile propagates backwards through every layer (``fusion.propagate``); inside a tile step every
layer computes its part with all of its channels, one layer after the other on the whole PE array.

An element-wise add or a concat (``MERGING``) may join a group after the layer producing one of its
inputs (the *chain* input, on chip); its other inputs (:class:`Side`) are outputs of layers outside
the group, read from DRAM tile by tile like the first layer's input. A merging layer's input is
the *stack* of its input tensors along channels (``stack_channels``: a concat's channels in input
order, an add's ``input_count`` tensors one after the other, the chain first).

A *block group* (``sources`` given; ``fusion.block``) generalises the chain to branches and joins:
each layer's windowed input is the group's input or any earlier group layer's output, and a merging
layer's other inputs may be held on chip too (``Side.source``: a residual block's skip tensor).

A :class:`FusedMapping` says, for a group:

* ``tile_n`` / ``tile_p`` / ``tile_q``: the last layer's output tile of one step;
* ``tile_k``: output channels of the last layer per inner chunk (the shared K loop sits inside the
  P/Q loops, so the intermediate tile is computed once per step and reused by every chunk);
* ``overlap``: what happens to intermediate pixels that neighbouring steps share —
  ``recompute`` (computed again; extra MACs), ``reuse`` (HW-Flow-Fusion Eq. 7-8 reuse buffers with
  the multi-tiling of Eq. 10-12: only new pixels are computed, inputs fetched once) or ``alwani``
  (the same schedule with Alwani et al.'s larger buffer, Eq. 8 + 9);
* ``direction``: ``rows`` walks Q innermost (horizontal processing, reuse buffer_x), ``cols`` P;
* ``resident``: per layer, whether its weights stay on chip for the whole group (loaded once,
  HW-Flow-Fusion's T_if = N_if, T_of = N_of) or are streamed again every step;
* ``chunk``: per intermediate map, the channels produced at a time (Ye et al.'s channel-chunked
  fusion: the consumer accumulates partial sums over chunks; a grouped consumer only in the groups
  the chunk feeds, which it holds and stores by themselves: ``FusedGroup.chunk_error``); equal to the
  map's channels when the map is not chunked;
* ``unroll``: per layer, the spatial unroll factor of every dimension (DIMS order);
* ``chunk_outer``: the chunk loop of a two-layer group's chunked map sits *outside* the N/P/Q tile
  loops (Ye et al.'s wr2lv2, Fig. 4c): each chunk's weights are loaded once and kept while every
  tile step runs, the first layer's input is read once per chunk, and the last layer's partial sums
  of the whole output map stay on chip until the last chunk. Default ``False``: chunks inside a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tileplan.dims import NDIMS, Dim
from tileplan.errors import MappingError, WorkloadError
from tileplan.fusion.transformer import (
    TransformerShape,
    describe_transformer,
    transformer_mapping_error,
    transformer_shape,
)
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.network import Network

#: Layer kinds a fused group may contain anywhere (they have a kernel window along rows and columns).
FUSIBLE = frozenset({OpKind.CONV, OpKind.GROUPED_CONV, OpKind.DEPTHWISE, OpKind.POINTWISE, OpKind.MAXPOOL,
                     OpKind.AVGPOOL, OpKind.GLOBALPOOL})
#: Layer kinds that merge the previous group layer's output with inputs read from DRAM (never first).
MERGING = frozenset({OpKind.ADD, OpKind.CONCAT})


@dataclass(frozen=True)
class Side:
    """An input of a merging group layer read from DRAM: the output of layer ``name`` (outside the
    group), at channels ``[offset, offset + channels)`` of the layer's input stack."""

    name: str
    offset: int
    channels: int
    #: Where a block group (``fusion.block``) holds this input on chip: -1 = the group's input, ``j`` = the
    #: output of group layer ``j``; ``None`` (every chain group's sides) = read from DRAM.
    source: int | None = None

    @property
    def on_chip(self) -> bool:
        return self.source is not None


def stack_channels(layer: Layer) -> int:
    """Channels of a layer's input stack (all its input tensors along channels)."""
    return layer.c_in * layer.input_count


def _sides_of(prev: Layer, layer: Layer, network: Network | None) -> tuple[Side, ...]:
    """The DRAM inputs of merging ``layer`` whose chain input is ``prev``'s output (see ``Side``)."""
    others = list(layer.inputs)
    if prev.name in others:
        others.remove(prev.name)
    if layer.op is OpKind.ADD:
        names = others if len(others) == layer.input_count - 1 else \
            [f"{layer.name}.in{i}" for i in range(1, layer.input_count)]
        return tuple(Side(name, (i + 1) * layer.c_in, layer.c_in) for i, name in enumerate(names))
    rest = layer.c_in - prev.k_out
    if network is None or not layer.inputs:
        if len(others) > 1:
            raise WorkloadError(f"cannot fuse {layer.name!r} alone: a concat of {len(layer.inputs)} inputs needs "
                                f"the network to place them (FusedGroup.of)")
        return (Side(others[0] if others else f"{layer.name}.in1", prev.k_out, rest),) if rest else ()
    sides = []
    offset = 0
    for name in layer.inputs:
        channels = prev.k_out if name == prev.name else (network[name].k_out if name in network.by_name else 0)
        if channels < 1:
            raise WorkloadError(f"cannot fuse {layer.name!r}: its input {name!r} is not a layer of the network")
        if name != prev.name:
            sides.append(Side(name, offset, channels))
        offset += channels
    if offset != layer.c_in:
        raise WorkloadError(f"concat {layer.name!r}: its inputs have {offset} channels, not {layer.c_in}")
    return tuple(sides)


class Overlap(StrEnum):
    """How intermediate pixels shared by neighbouring tile steps are handled."""

    RECOMPUTE = "recompute"
    REUSE = "reuse"
    ALWANI = "alwani"


class Direction(StrEnum):
    """Processing direction of the tile steps: ``rows`` = Q innermost (horizontal), ``cols`` = P."""

    ROWS = "rows"
    COLS = "cols"


def chain_error(layers: Sequence[Layer], network: Network | None = None, *, merges: bool = False) -> str | None:
    """Why ``layers`` cannot form a fused group (``None`` if they can).

    Each layer after the first must read the previous layer's output -- only that (a windowed kind,
    ``FUSIBLE``) or, with ``merges``, that among inputs read from DRAM (an add or a concat,
    ``MERGING``, never first) -- and no intermediate map may be read by a layer outside the group (it
    would have to be written to DRAM anyway): a group never hides a tensor another layer reads.
    """
    if len(layers) < 1:
        return "a group needs at least one layer"
    if transformer_shape(layers, network) is not None:  # an attention or MLP block (``fusion.transformer``)
        return None
    for m, layer in enumerate(layers):
        if layer.op in MERGING and merges:
            if m == 0:
                return (f"layer {layer.name!r} is a {layer.op.value} layer, which joins a group only after the "
                        f"layer producing one of its inputs")
        elif layer.op not in FUSIBLE:
            return f"layer {layer.name!r} is a {layer.op.value} layer, which cannot be fused"
    for prev, layer in zip(layers, layers[1:], strict=False):
        merging = layer.op in MERGING
        if network is not None:
            if merging and list(layer.inputs).count(prev.name) != 1:
                return f"layer {layer.name!r} does not read {prev.name!r} once"
            if not merging and layer.inputs != (prev.name,):
                return f"layer {layer.name!r} does not read only {prev.name!r}"
        chans = prev.k_out <= layer.c_in if layer.op is OpKind.CONCAT else prev.k_out == layer.c_in
        if (prev.n, prev.p, prev.q) != (layer.n, layer.h, layer.w) or not chans:
            return f"layer {layer.name!r} does not consume {prev.name!r}'s output shape"
        if network is not None:
            readers = [c.name for c in network.consumers(prev.name)]
            if readers != [layer.name]:
                return f"the output of {prev.name!r} is also read by {[r for r in readers if r != layer.name]}"
    return None


@dataclass(frozen=True)
class FusedGroup:
    """A chain of layers fused so that the maps between them stay on chip; ``sides`` per layer the
    inputs it reads from DRAM besides the chain (merging layers only; derived when not given)."""

    layers: tuple[Layer, ...]
    sides: tuple[tuple[Side, ...], ...] = ()
    #: Block groups only (``fusion.block``): per layer, the source of its windowed (chain) input: -1 the
    #: group's input, ``j`` group layer ``j``'s output. Empty: a chain (layer ``m`` reads layer ``m - 1``).
    sources: tuple[int, ...] = ()

    @property
    def is_block(self) -> bool:
        """Whether some layer reads an on-chip tensor other than its predecessor's output (a branch)."""
        return bool(self.sources)

    def __post_init__(self) -> None:
        if self.sources:
            why = _block_error(self)
            if why:
                raise WorkloadError(f"cannot fuse {self.name}: {why}")
            return
        why = chain_error(self.layers, merges=True)
        if why:
            raise WorkloadError(f"cannot fuse {self.name}: {why}")
        if self.transformer is not None:  # no DRAM side inputs: K, V and weights are the B operands
            object.__setattr__(self, "sides", ((),) * len(self.layers))
            return
        if not self.sides:
            object.__setattr__(self, "sides", _all_sides(self.layers, None))
        if len(self.sides) != len(self.layers):
            raise WorkloadError(f"cannot fuse {self.name}: {len(self.sides)} side lists for {len(self.layers)} layers")
        for m, (layer, sides) in enumerate(zip(self.layers, self.sides, strict=True)):
            chain = self.layers[m - 1].k_out if m else stack_channels(layer)
            free = _uncovered(sides, stack_channels(layer))
            if (sides and layer.op not in MERGING) or free is None or [b - a for a, b in free] != [chain]:
                raise WorkloadError(f"cannot fuse {self.name}: the DRAM inputs of {layer.name!r} do not leave exactly "
                                    f"its chain input's {chain} channels")

    @classmethod
    def of(cls, network: Network, names: Sequence[str]) -> FusedGroup:
        """The group of ``names`` (consecutive in ``network``), checked against the network's edges."""
        layers = tuple(network[n] for n in names)
        why = chain_error(layers, network, merges=True)
        if why:
            raise WorkloadError(f"network {network.name!r}: cannot fuse {'+'.join(names)}: {why}")
        return cls(layers, _all_sides(layers, network))

    def chain_offset(self, m: int) -> int:
        """First channel of layer ``m``'s input stack that the previous group layer produces (0 for a
        layer without DRAM inputs)."""
        free = _uncovered(self.sides[m], stack_channels(self.layers[m]))
        return free[0][0] if free else 0

    def signature(self) -> tuple[object, ...]:
        """Everything the group's planning depends on: layer signatures and the DRAM inputs' places."""
        sig = tuple((x.signature(), tuple((s.offset, s.channels) for s in sides))
                    for x, sides in zip(self.layers, self.sides, strict=True))
        if self.sources:  # a block group: where each input lives on chip too
            return (*sig, self.sources, tuple(tuple(s.source for s in sides) for sides in self.sides))
        return sig

    @property
    def name(self) -> str:
        return "+".join(layer.name for layer in self.layers)

    @property
    def transformer(self) -> TransformerShape | None:
        """The attention or MLP block this group is (``fusion.transformer``), else ``None``."""
        return transformer_shape(self.layers)

    def input_channels(self) -> int:
        """Channels of the group's (windowed) input tensor: the first layer's input (of an add first, one of
        its summed tensors; of a concat first, its chain input's channels)."""
        first = self.layers[0]
        if first.op is OpKind.CONCAT:
            free = _uncovered(self.sides[0], first.c_in)
            return sum(b - a for a, b in free or [(0, first.c_in)])
        return first.c_in

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def last(self) -> Layer:
        return self.layers[-1]

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    def chunkable(self, m: int) -> bool:
        """Whether intermediate map ``m`` (output of layer ``m``) may be produced in channel chunks:
        an ungrouped producer, and a consumer with weights that reduces over more than one input
        channel per group (an ungrouped layer, or a grouped one such as ResNeXt's 3x3 whose groups
        are Ye et al.'s sublayers; not a depthwise layer). A grouped consumer's chunks respect its
        groups (:meth:`chunk_error`)."""
        producer, consumer = self.layers[m], self.layers[m + 1]
        return (producer.op not in MERGING and consumer.has_weights and consumer.dims[Dim.C] > 1
                and producer.groups == 1)

    def chunk_error(self, m: int, chunk: int) -> str | None:
        """Why map ``m`` cannot be produced in chunks of ``chunk`` channels (``None``: it can). A chunk
        of a grouped consumer's input feeds only the groups it belongs to: it is a divisor of the
        channels per group (a part of one group) or a multiple of them that divides the map (whole
        groups), so that no chunk straddles a group boundary."""
        channels = self.layers[m].k_out
        if chunk >= channels:
            return None
        if not self.chunkable(m):
            return (f"map {self.layers[m].name!r} cannot be chunked: its consumer does not reduce over more than "
                    f"one input channel per group")
        consumer = self.layers[m + 1]
        per_group = consumer.dims[Dim.C]
        if chunk < per_group:
            straddles = per_group % chunk != 0
        else:
            straddles = chunk % per_group != 0 or consumer.groups % (chunk // per_group) != 0
        if consumer.groups > 1 and straddles:
            return (f"a chunk of {chunk} channels of map {self.layers[m].name!r} straddles the groups of "
                    f"{consumer.name!r} ({consumer.groups} groups of {per_group} channels): use a divisor of "
                    f"{per_group} or a multiple of it that divides {channels}")
        return None

    def consumer_part(self, m: int, k: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
        """For a chunk ``k`` (a channel range of map ``m`` that respects the consumer's groups): the
        consumer's output channels it contributes to (all groups flattened) and its input channels
        within the group (a part of one group, or all of each group for whole groups)."""
        consumer = self.layers[m + 1]
        if consumer.groups == 1:
            return (0, consumer.k_out), k
        per_group, k_per = consumer.dims[Dim.C], consumer.dims[Dim.K]
        g0 = k[0] // per_group
        if k[1] - k[0] >= per_group:
            return (g0 * k_per, k[1] // per_group * k_per), (0, per_group)
        return (g0 * k_per, (g0 + 1) * k_per), (k[0] - g0 * per_group, k[1] - g0 * per_group)

    def whole_groups(self, m: int, chunk: int) -> bool:
        """Whether chunks of ``chunk`` channels of map ``m`` are whole groups of a grouped consumer (its
        outputs complete within the chunk: Ye et al.'s c sublayers)."""
        consumer = self.layers[m + 1]
        return consumer.groups > 1 and chunk < self.layers[m].k_out and chunk >= consumer.dims[Dim.C]


def _uncovered(sides: Sequence[Side], total: int) -> list[tuple[int, int]] | None:
    """Channel ranges of a ``total``-channel stack no side covers (``None``: sides overlap or spill)."""
    out, at = [], 0
    for side in sorted(sides, key=lambda x: x.offset):
        if side.channels < 1 or side.offset < at or side.offset + side.channels > total:
            return None
        if side.offset > at:
            out.append((at, side.offset))
        at = side.offset + side.channels
    if at < total:
        out.append((at, total))
    return out


def _block_error(group: FusedGroup) -> str | None:
    """Why ``group`` (with ``sources``) is not a legal block group (``None`` if it is): each layer reads
    tensors produced before it (the group input: -1) with its own shape, every map but the last is read
    inside the group, and each layer's other inputs leave exactly its windowed input's channels."""
    layers, n = group.layers, len(group.layers)
    if len(group.sources) != n or len(group.sides) != n:
        return f"{len(group.sources)} sources and {len(group.sides)} side lists for {n} layers"
    first = layers[0]
    shapes = {-1: (first.n, group.input_channels(), first.h, first.w)}
    shapes.update({j: (x.n, x.k_out, x.p, x.q) for j, x in enumerate(layers)})
    read: set[int] = set()
    for m, (layer, src, sides) in enumerate(zip(layers, group.sources, group.sides, strict=True)):
        on_chip = [(src, None), *((s.source, s) for s in sides if s.source is not None)]
        if layer.op not in FUSIBLE and layer.op not in MERGING:
            return f"layer {layer.name!r} is a {layer.op.value} layer, which cannot be fused"
        if sides and layer.op not in MERGING:
            return f"layer {layer.name!r} is not an add or a concat but has several inputs"
        if any(not -1 <= j < m for j, _ in on_chip):
            return f"layer {layer.name!r} reads a tensor produced after it"
        if any((shapes[j][0], shapes[j][2], shapes[j][3]) != (layer.n, layer.h, layer.w)
               or (s is not None and shapes[j][1] != s.channels) for j, s in on_chip):
            return f"layer {layer.name!r} does not consume its inputs' shapes"
        read.update(j for j, _ in on_chip)
        free = _uncovered(sides, stack_channels(layer))
        if free is None or [b - a for a, b in free] != [shapes[src][1]]:
            return f"the inputs of {layer.name!r} do not leave exactly its windowed input's channels"
    unread = [x.name for j, x in enumerate(layers[:-1]) if j not in read]
    return f"the output of {unread[0]!r} is read by no later group layer" if unread else None


def _all_sides(layers: Sequence[Layer], network: Network | None) -> tuple[tuple[Side, ...], ...]:
    return tuple(_sides_of(layers[m - 1], layer, network) if m and layer.op in MERGING else ()
                 for m, layer in enumerate(layers))


def out_step(group: FusedGroup, m: int, chunk: tuple[int, ...], tile_k: int, resident: tuple[bool, ...]) -> int:
    """Output channels (all groups flattened) layer ``m`` computes at a time: a chunk of a chunked map,
    the last layer's ``tile_k``, one filter (ungrouped) or one group's filters when its weights are
    streamed (so one piece is on chip at a time), else all of them."""
    layer = group.layers[m]
    kt = layer.k_out
    last = m == len(group) - 1
    if not last and chunk[m] < kt:
        return chunk[m]
    if last and tile_k < kt:
        return tile_k
    consumes_chunk = m > 0 and chunk[m - 1] < group.layers[m - 1].k_out
    if consumes_chunk and layer.groups > 1:  # the groups the chunk feeds (one, or the chunk's whole groups)
        return layer.dims[Dim.K] * max(1, chunk[m - 1] // layer.dims[Dim.C])
    if layer.has_weights and not resident[m] and not consumes_chunk:
        return layer.dims[Dim.K] if layer.groups > 1 else 1
    return kt


def store_step(group: FusedGroup, chunk: tuple[int, ...], tile_k: int, resident: tuple[bool, ...]) -> int:
    """Output channels of the last layer stored at a time (and whose partial sums are held): ``tile_k``,
    or, when the last layer is a grouped layer consuming a chunked map, the groups a chunk feeds (their
    outputs are stored once the chunk that completes them is consumed)."""
    m = len(group) - 1
    if m > 0 and group.last.groups > 1 and chunk[m - 1] < group.layers[m - 1].k_out:
        return out_step(group, m, chunk, tile_k, resident)
    return min(tile_k, group.last.k_out)


@dataclass(frozen=True)
class FusedMapping:
    """One point of a group's fused mapping space (see the module docstring)."""

    tile_n: int
    tile_p: int
    tile_q: int
    tile_k: int
    overlap: Overlap
    direction: Direction
    resident: tuple[bool, ...]
    chunk: tuple[int, ...]
    unroll: tuple[tuple[int, ...], ...]
    chunk_outer: bool = False
    online: bool = False  # attention blocks only: the online (FlashAttention) softmax (``fusion.transformer_cost``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overlap", Overlap(self.overlap))
        object.__setattr__(self, "direction", Direction(self.direction))
        if min(self.tile_n, self.tile_p, self.tile_q, self.tile_k) < 1:
            raise MappingError("fused tiles must be positive")
        if any(len(u) != NDIMS or min(u) < 1 for u in self.unroll):
            raise MappingError(f"each layer's unroll needs {NDIMS} positive factors")

    def check(self, group: FusedGroup) -> None:
        """Raise ``MappingError`` if this mapping does not fit ``group``'s shapes."""
        if group.transformer is not None:  # an attention or MLP block's mapping (``fusion.transformer_cost``)
            why = transformer_mapping_error(group.layers, group.transformer, self)
            if why:
                raise MappingError(why)
            return
        if self.online:
            raise MappingError(f"an online softmax needs an attention block, not {group.name}")
        n = len(group)
        last = group.last
        if len(self.resident) != n or len(self.unroll) != n or len(self.chunk) != n - 1:
            raise MappingError(f"fused mapping of {group.name} needs {n} resident flags, {n} unrolls and "
                               f"{n - 1} chunks")
        for name, value, limit in (("tile_n", self.tile_n, last.n), ("tile_p", self.tile_p, last.p),
                                   ("tile_q", self.tile_q, last.q), ("tile_k", self.tile_k, last.k_out)):
            if value > limit:
                raise MappingError(f"{name}={value} exceeds the last layer's {limit} ({group.name})")
        for m, c in enumerate(self.chunk):
            channels = group.layers[m].k_out
            if not 1 <= c <= channels:
                raise MappingError(f"chunk of map {m} must be in 1..{channels}")
            why = group.chunk_error(m, c)
            if why:
                raise MappingError(why)
            if c < channels and m + 1 < len(self.chunk) and self.chunk[m + 1] < group.layers[m + 1].k_out:
                raise MappingError("two adjacent maps cannot both be chunked")
        if self.chunk and self.chunk[-1] < group.layers[-2].k_out and self.tile_k < last.k_out:
            raise MappingError("the last layer cannot chunk its output channels while its input is chunked")
        if self.tile_k < last.k_out and last.groups > 1:
            raise MappingError("tile_k below K needs an ungrouped last layer")
        if group.is_block and (self.overlap is not Overlap.RECOMPUTE or self.chunk_outer
                               or any(c < x.k_out for c, x in zip(self.chunk, group.layers, strict=False))):
            raise MappingError(f"block group {group.name}: overlaps are recomputed and maps kept whole (overlap "
                               f"recompute, no chunks)")
        if self.chunk_outer and (n != 2 or self.chunk[0] >= group.layers[0].k_out or self.tile_k < last.k_out):
            raise MappingError("chunk_outer needs a two-layer group whose intermediate map is chunked and a full "
                               "tile_k")

    def out_step(self, group: FusedGroup, m: int) -> int:
        """Output channels layer ``m`` computes at a time (see :func:`out_step`)."""
        return out_step(group, m, self.chunk, self.tile_k, self.resident)

    def to_dict(self) -> dict[str, Any]:
        return {"tile_n": self.tile_n, "tile_p": self.tile_p, "tile_q": self.tile_q, "tile_k": self.tile_k,
                "overlap": self.overlap.value, "direction": self.direction.value, "resident": list(self.resident),
                "chunk": list(self.chunk), "unroll": [list(u) for u in self.unroll], "chunk_outer": self.chunk_outer,
                **({"online": True} if self.online else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusedMapping:
        try:
            return cls(int(data["tile_n"]), int(data["tile_p"]), int(data["tile_q"]), int(data["tile_k"]),
                       Overlap(data["overlap"]), Direction(data["direction"]),
                       tuple(bool(x) for x in data["resident"]), tuple(int(x) for x in data["chunk"]),
                       tuple(tuple(int(v) for v in u) for u in data["unroll"]), bool(data.get("chunk_outer", False)),
                       bool(data.get("online", False)))
        except (KeyError, TypeError, ValueError) as err:
            raise MappingError(f"malformed fused mapping: {err}") from None

    def describe(self, group: FusedGroup) -> str:
        """Like ``str`` but naming only the maps that are really chunked and omitting a full tile_k."""
        if group.transformer is not None:
            return describe_transformer(group.layers, group.transformer, self)
        res = "".join("R" if r else "S" for r, x in zip(self.resident, group.layers, strict=True))
        chunks = [f"{group.layers[m].name}/{c}" for m, c in enumerate(self.chunk) if c < group.layers[m].k_out]
        tk = f" K{self.tile_k}" if self.tile_k < group.last.k_out else ""
        return (f"tile P{self.tile_p} Q{self.tile_q}{tk}" + (f" N{self.tile_n}" if group.last.n > 1 else "")
                + f", {self.overlap.value}" + (f" {self.direction.value}" if self.overlap is not Overlap.RECOMPUTE
                                               else "")
                + f", weights {res}" + (f", chunks {' '.join(chunks)}" if chunks else "")
                + (" (chunk loop outermost)" if self.chunk_outer else ""))

    def __str__(self) -> str:
        res = "".join("R" if r else "S" for r in self.resident)
        chunks = ",".join(str(c) for c in self.chunk)
        return (f"tile N{self.tile_n} P{self.tile_p} Q{self.tile_q} K{self.tile_k}, {self.overlap.value}, "
                f"{self.direction.value}, weights {res}" + (f", chunks {chunks}" if chunks else "")
                + (", chunk-outer" if self.chunk_outer else "") + (", online softmax" if self.online else ""))
