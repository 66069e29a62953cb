"""Fused groups and fused mappings (value objects).

A fused group is a chain of consecutive layers whose intermediate maps never leave the chip: one
shared outer loop nest walks tiles of the *last* layer's output (N, P, Q and, innermost, K); each
tile propagates backwards through every layer (``fusion.propagate``); inside a tile step every
layer computes its part with all of its channels, one layer after the other on the whole PE array.

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
  fusion: the consumer accumulates partial sums over chunks); equal to the map's channels when the
  map is not chunked;
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
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.network import Network

#: Layer kinds a fused group may contain (they have a kernel window along rows and columns).
FUSIBLE = frozenset({OpKind.CONV, OpKind.GROUPED_CONV, OpKind.DEPTHWISE, OpKind.POINTWISE, OpKind.MAXPOOL,
                     OpKind.AVGPOOL, OpKind.GLOBALPOOL})


class Overlap(StrEnum):
    """How intermediate pixels shared by neighbouring tile steps are handled."""

    RECOMPUTE = "recompute"
    REUSE = "reuse"
    ALWANI = "alwani"


class Direction(StrEnum):
    """Processing direction of the tile steps: ``rows`` = Q innermost (horizontal), ``cols`` = P."""

    ROWS = "rows"
    COLS = "cols"


def chain_error(layers: Sequence[Layer], network: Network | None = None) -> str | None:
    """Why ``layers`` cannot form a fused group (``None`` if they can).

    Each layer after the first must read exactly the previous layer's output, every layer must be
    a windowed kind (``FUSIBLE``), and no intermediate map may be read by a layer outside the group
    (it would have to be written to DRAM anyway).
    """
    if len(layers) < 1:
        return "a group needs at least one layer"
    for layer in layers:
        if layer.op not in FUSIBLE:
            return f"layer {layer.name!r} is a {layer.op.value} layer, which cannot be fused"
    for prev, layer in zip(layers, layers[1:], strict=False):
        if network is not None and layer.inputs != (prev.name,):
            return f"layer {layer.name!r} does not read only {prev.name!r}"
        if (prev.n, prev.k_out, prev.p, prev.q) != (layer.n, layer.c_in, layer.h, layer.w):
            return f"layer {layer.name!r} does not consume {prev.name!r}'s output shape"
        if network is not None:
            readers = [c.name for c in network.consumers(prev.name)]
            if readers != [layer.name]:
                return f"the output of {prev.name!r} is also read by {[r for r in readers if r != layer.name]}"
    return None


@dataclass(frozen=True)
class FusedGroup:
    """A chain of layers fused so that the maps between them stay on chip."""

    layers: tuple[Layer, ...]

    def __post_init__(self) -> None:
        why = chain_error(self.layers)
        if why:
            raise WorkloadError(f"cannot fuse {self.name}: {why}")

    @classmethod
    def of(cls, network: Network, names: Sequence[str]) -> FusedGroup:
        """The group of ``names`` (consecutive in ``network``), checked against the network's edges."""
        layers = tuple(network[n] for n in names)
        why = chain_error(layers, network)
        if why:
            raise WorkloadError(f"network {network.name!r}: cannot fuse {'+'.join(names)}: {why}")
        return cls(layers)

    @property
    def name(self) -> str:
        return "+".join(layer.name for layer in self.layers)

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
        its consumer must reduce over all of its input channels (an ungrouped layer with weights)."""
        producer, consumer = self.layers[m], self.layers[m + 1]
        return consumer.has_weights and consumer.groups == 1 and consumer.c_in > 1 and producer.groups == 1


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
    consumes_chunk = m > 0 and chunk[m - 1] < layer.c_in
    if layer.has_weights and not resident[m] and not consumes_chunk:
        return layer.dims[Dim.K] if layer.groups > 1 else 1
    return kt


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "overlap", Overlap(self.overlap))
        object.__setattr__(self, "direction", Direction(self.direction))
        if min(self.tile_n, self.tile_p, self.tile_q, self.tile_k) < 1:
            raise MappingError("fused tiles must be positive")
        if any(len(u) != NDIMS or min(u) < 1 for u in self.unroll):
            raise MappingError(f"each layer's unroll needs {NDIMS} positive factors")

    def check(self, group: FusedGroup) -> None:
        """Raise ``MappingError`` if this mapping does not fit ``group``'s shapes."""
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
            if c < channels and not group.chunkable(m):
                raise MappingError(f"map {group.layers[m].name!r} cannot be chunked: its consumer does not "
                                   f"reduce over all input channels")
            if c < channels and m + 1 < len(self.chunk) and self.chunk[m + 1] < group.layers[m + 1].k_out:
                raise MappingError("two adjacent maps cannot both be chunked")
        if self.chunk and self.chunk[-1] < group.layers[-2].k_out and self.tile_k < last.k_out:
            raise MappingError("the last layer cannot chunk its output channels while its input is chunked")
        if self.tile_k < last.k_out and last.groups > 1:
            raise MappingError("tile_k below K needs an ungrouped last layer")
        if self.chunk_outer and (n != 2 or self.chunk[0] >= group.layers[0].k_out or self.tile_k < last.k_out):
            raise MappingError("chunk_outer needs a two-layer group whose intermediate map is chunked and a full "
                               "tile_k")

    def out_step(self, group: FusedGroup, m: int) -> int:
        """Output channels layer ``m`` computes at a time (see :func:`out_step`)."""
        return out_step(group, m, self.chunk, self.tile_k, self.resident)

    def to_dict(self) -> dict[str, Any]:
        return {"tile_n": self.tile_n, "tile_p": self.tile_p, "tile_q": self.tile_q, "tile_k": self.tile_k,
                "overlap": self.overlap.value, "direction": self.direction.value, "resident": list(self.resident),
                "chunk": list(self.chunk), "unroll": [list(u) for u in self.unroll], "chunk_outer": self.chunk_outer}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusedMapping:
        try:
            return cls(int(data["tile_n"]), int(data["tile_p"]), int(data["tile_q"]), int(data["tile_k"]),
                       Overlap(data["overlap"]), Direction(data["direction"]),
                       tuple(bool(x) for x in data["resident"]), tuple(int(x) for x in data["chunk"]),
                       tuple(tuple(int(v) for v in u) for u in data["unroll"]), bool(data.get("chunk_outer", False)))
        except (KeyError, TypeError, ValueError) as err:
            raise MappingError(f"malformed fused mapping: {err}") from None

    def describe(self, group: FusedGroup) -> str:
        """Like ``str`` but naming only the maps that are really chunked and omitting a full tile_k."""
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
                + (", chunk-outer" if self.chunk_outer else ""))
