"""Transformer blocks a fused group may be: attention and the MLP (recognised from layer shapes and
edges; no imports from the rest of ``fusion``, so ``group`` can ask).

Both are two matmuls with a *middle* tensor between them that never leaves the chip, computed over
tiles of rows (query rows, tokens):

* **attention** ``qk -> softmax -> pv``: ``S = Q . K^T`` (an activation B), a row-wise softmax over
  each row of ``W = kv`` scores, ``O = P . V`` (an activation B). Per K/V group g (batch x kv heads on
  G; grouped-query heads folded into the rows, so one K_g / V_g serves every query head of its
  group without a copy). The first matmul *produces* the middle's ``W`` columns, the last *reduces*
  over them.
* **mlp** ``up -> gelu|silu -> down`` or Llama's SwiGLU ``gate, up -> silu(gate) -> mul -> down``:
  one or two weight matmuls reading the block's input produce the ``W = ff`` middle columns,
  element-wise layers combine them, the down projection reduces over them.

:class:`TransformerShape` gives the sizes the block model and program use: ``groups`` G, ``batch`` N,
``rows`` M per (n, g), ``k1`` the first matmuls' reduction (d_head, d), ``width`` W and ``n2`` the
last matmul's outputs per group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from tileplan.dims import Dim, Operand
from tileplan.workload.layer import Layer, OpKind

if TYPE_CHECKING:
    from tileplan.workload.network import Network

#: Element-wise kinds allowed between an MLP's projections.
MLP_ELEMENTWISE = frozenset({OpKind.GELU, OpKind.SILU, OpKind.MUL})
#: Layer counts of the recognised blocks (attention: 3, or 4 with a mask add; MLP: 3, or 5 with a gate).
TRANSFORMER_LENGTHS = (3, 4, 5)


class TransformerKind(StrEnum):
    ATTENTION = "attention"
    MLP = "mlp"


@dataclass(frozen=True)
class TransformerShape:
    """Sizes of a block (see the module docstring); ``firsts`` the layer indices of the matmuls
    producing the middle columns, ``last`` the reducing matmul's index (always the last layer)."""

    kind: TransformerKind
    groups: int
    batch: int
    rows: int
    k1: int
    width: int
    n2: int
    firsts: tuple[int, ...]
    mask: int | None = None  # attention: the index of an add of a broadcast row (a mask) before the softmax

    @property
    def matmuls(self) -> tuple[int, ...]:
        """Indices of every matmul of the block (the B operands: K, V or weights)."""
        return (*self.firsts, -1)


def _is_matmul(layer: Layer, activation_b: bool) -> bool:
    return layer.op is OpKind.MATMUL and layer.b_activation == activation_b and layer.q == 1 and layer.w == 1


def transformer_shape(layers: Sequence[Layer], network: Network | None = None) -> TransformerShape | None:
    """The block ``layers`` form (``None``: neither an attention nor an MLP block). With ``network``
    the edges are checked too: every layer reads what the block says, and no tensor inside the block
    is read by a layer outside it (it never reaches DRAM)."""
    shape = _attention(layers) or _mlp(layers)
    if shape is None or network is None:
        return shape
    names = [x.name for x in layers]
    inside = set(names[:-1])
    for layer in layers[:-1]:
        readers = {c.name for c in network.consumers(layer.name)}
        if not readers or not readers <= set(names):
            return None
    for m, layer in enumerate(layers):
        if m in shape.firsts:
            if shape.kind is TransformerKind.MLP and (len(layer.inputs) != 1 or layer.inputs[0] in inside):
                return None
            if shape.kind is TransformerKind.ATTENTION and any(i in inside for i in layer.inputs):
                return None
        elif shape.kind is TransformerKind.ATTENTION and layer.op is OpKind.MATMUL:
            if not layer.inputs or layer.inputs[0] != names[m - 1] or any(i in inside for i in layer.inputs[1:]):
                return None
        elif any(i not in inside for i in layer.inputs) or len(layer.inputs) != layer.input_count:
            return None
    if shape.kind is TransformerKind.MLP and len({layers[m].inputs for m in shape.firsts}) != 1:
        return None
    if shape.kind is TransformerKind.MLP and not _mlp_dataflow(layers, shape):
        return None
    return shape


def _scores_like(x: Layer, g: int, width: int, rows: int, n: int, rowwise: bool = True) -> bool:
    """Whether ``x`` holds the g x rows x width scores: the zoo's layout (g x width channels, rows),
    or an ONNX import's (width channels, g x rows: the heads folded into the rows); ``rowwise``: its
    rows (``row_channels``) are the width keys."""
    zoo = x.k_out == g * width and x.h == rows and (not rowwise or x.row_channels in (width, 0 if g == 1 else -1))
    onnx = x.k_out == width and x.h == g * rows and (not rowwise or x.row_channels in (width, 0))
    return (zoo or onnx) and x.n == n and x.w == 1 and x.input_count == 1


def _attention(layers: Sequence[Layer]) -> TransformerShape | None:
    if len(layers) not in (3, 4):
        return None
    qk, sm, pv = layers[0], layers[-2], layers[-1]
    mask = layers[1] if len(layers) == 4 else None
    if not (_is_matmul(qk, True) and sm.op is OpKind.SOFTMAX and _is_matmul(pv, True)):
        return None
    g, width = qk.groups, qk.dims[Dim.K]
    if not _scores_like(sm, g, width, qk.p, qk.n) or pv.groups != g or pv.dims[Dim.C] != width or pv.h != qk.p \
            or pv.n != qk.n:
        return None
    if mask is not None and not (mask.op is OpKind.ADD and mask.b_activation and mask.k_out == sm.k_out
                                 and mask.h == sm.h and _scores_like(mask, g, width, qk.p, qk.n, rowwise=False)
                                 and mask.elements(Operand.WEIGHT) in (width, mask.k_out)):
        return None
    return TransformerShape(TransformerKind.ATTENTION, g, qk.n, qk.p, qk.dims[Dim.C], width, pv.dims[Dim.K], (0,),
                      None if mask is None else 1)


def _mlp(layers: Sequence[Layer]) -> TransformerShape | None:
    if len(layers) not in TRANSFORMER_LENGTHS:
        return None
    last = layers[-1]
    firsts = tuple(m for m, x in enumerate(layers[:-1]) if x.op is OpKind.MATMUL)
    if not _is_matmul(last, False) or last.groups != 1 or len(firsts) != (len(layers) - 1) // 2 or firsts[0] != 0:
        return None
    width = last.c_in
    up = layers[0]
    for m, x in enumerate(layers[:-1]):
        if m in firsts:
            if not _is_matmul(x, False) or x.groups != 1 or x.k_out != width or x.c_in != up.c_in:
                return None
        elif x.op not in MLP_ELEMENTWISE or x.k_out != width or x.c_in != width or x.b_activation:
            return None
        if (x.n, x.p) != (last.n, last.h):
            return None
    kinds = sorted(layers[m].op.value for m in range(len(layers) - 1) if m not in firsts)
    if kinds not in (["gelu"], ["silu"], ["mul", "silu"]) or (kinds == ["mul", "silu"]) != (len(firsts) == 2):
        return None
    return TransformerShape(TransformerKind.MLP, 1, last.n, last.h, up.c_in, width, last.k_out, firsts)


def _mlp_dataflow(layers: Sequence[Layer], shape: TransformerShape) -> bool:
    """With the network's edges: the activation reads a first matmul, a mul the activation and the
    other first matmul, the last matmul the final element-wise layer (so the programs' order is
    the computation's)."""
    names = [x.name for x in layers]
    rest = [m for m in range(len(layers) - 1) if m not in shape.firsts]
    act = next(m for m in rest if layers[m].op is not OpKind.MUL)
    if len(layers[act].inputs) != 1 or names.index(layers[act].inputs[0]) not in shape.firsts:
        return False
    if len(rest) == 2:
        mul = next(m for m in rest if layers[m].op is OpKind.MUL)
        other = [names[m] for m in shape.firsts if names[m] != layers[act].inputs[0]]
        if sorted(layers[mul].inputs) != sorted([names[act], *other]) or mul < act:
            return False
    return layers[-1].inputs == (names[rest[-1]],)


def transformer_spans(network: Network) -> list[tuple[int, int]]:
    """(start, end) of every attention or MLP block of consecutive layers in ``network``."""
    layers = network.layers
    out = []
    for start in range(len(layers)):
        for length in TRANSFORMER_LENGTHS:
            end = start + length
            if end <= len(layers) and transformer_shape(layers[start:end], network) is not None:
                out.append((start, end))
    return out


class TransformerMappingLike(Protocol):
    """The fields of a ``FusedMapping`` a block mapping uses (see ``fusion.transformer_cost``)."""

    @property
    def tile_n(self) -> int: ...

    @property
    def tile_p(self) -> int: ...

    @property
    def tile_q(self) -> int: ...

    @property
    def tile_k(self) -> int: ...

    @property
    def resident(self) -> tuple[bool, ...]: ...

    @property
    def chunk(self) -> tuple[int, ...]: ...

    @property
    def unroll(self) -> tuple[tuple[int, ...], ...]: ...

    @property
    def online(self) -> bool: ...


def canonical_layers(layers: Sequence[Layer], shape: TransformerShape) -> tuple[Layer, ...]:
    """``layers`` with an attention middle in an ONNX import's layout (width channels, heads folded
    into the rows) re-shaped to the zoo's (groups x width channels, rows): the same elements and
    operations, on the rows the block tiles (what the block's compute and executor use)."""
    g, width = shape.groups, shape.width
    return tuple(replace(x, c_in=g * width, k_out=g * width, groups=g * width, h=shape.rows,
                         row_channels=width if x.op is OpKind.SOFTMAX else x.row_channels)
                 if shape.kind is TransformerKind.ATTENTION and 0 < m < len(layers) - 1 and x.k_out == width and g > 1
                 else x for m, x in enumerate(layers))


def matmul_layers(shape: TransformerShape, count: int) -> list[int]:
    """Indices of a ``count``-layer block's matmuls (the B operands: K, V or weights)."""
    return [*shape.firsts, count - 1]


def transformer_mapping_error(layers: Sequence[Layer], shape: TransformerShape, mapping: TransformerMappingLike
                              ) -> str | None:
    """Why ``mapping`` is not a block mapping of ``layers`` (``None`` if it is): ``tile_p`` rows,
    one middle chunk repeated for every middle map, resident flags on matmuls only."""
    n = len(layers)
    name = "+".join(x.name for x in layers)
    if len(mapping.resident) != n or len(mapping.unroll) != n or len(mapping.chunk) != n - 1:
        return f"fused mapping of {name} needs {n} resident flags, {n} unrolls and {n - 1} chunks"
    if (mapping.tile_n, mapping.tile_q, mapping.tile_k) != (1, 1, layers[-1].k_out):
        return f"a {shape.kind.value} block mapping has tile_n = tile_q = 1 and tile_k = {layers[-1].k_out} ({name})"
    if mapping.tile_p > shape.rows:
        return f"tile_p={mapping.tile_p} exceeds the block's {shape.rows} rows ({name})"
    if len(set(mapping.chunk)) != 1 or not 1 <= mapping.chunk[0] <= shape.width:
        return f"a block's chunks are one middle chunk in 1..{shape.width} ({name})"
    mats = set(matmul_layers(shape, n))
    if any(r and m not in mats for m, r in enumerate(mapping.resident)):
        return f"only the matmuls of {name} have a B operand to keep resident"
    if mapping.online and (shape.kind is not TransformerKind.ATTENTION or mapping.chunk[0] >= shape.width):
        return f"an online softmax needs an attention block whose keys come in chunks ({name})"
    return None


def describe_transformer(layers: Sequence[Layer], shape: TransformerShape, mapping: TransformerMappingLike) -> str:
    """E.g. ``attention: 64 rows, K resident, V streamed, chunks of 128``."""
    mats = matmul_layers(shape, len(layers))
    names = ("K", "V") if shape.kind is TransformerKind.ATTENTION else tuple(layers[m].name.rsplit(".", 1)[-1]
                                                                      for m in mats)
    res = [f"{name} {'resident' if mapping.resident[m] else 'streamed'}" for name, m in zip(names, mats, strict=True)]
    chunk = f", chunks of {mapping.chunk[0]}" if mapping.chunk[0] < shape.width else ""
    online = ", online softmax" if mapping.online else ""
    return f"{shape.kind.value}: {mapping.tile_p} rows, {', '.join(res)}{chunk}{online}"
