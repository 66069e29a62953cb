"""Element-wise and row-wise layers in programs: the ``EW`` instruction's kernel on resident tiles.

These layers (softmax, layernorm, rmsnorm, gelu, silu, mul, rope, and an add or mul with a broadcast
row) run on the channelwise nest of ``ADD`` (G = channels, K = C = 1, P = token rows): the generator
walks the same loops, loads and stores as for an add, and each compute step is one ``EW`` over the
region's tiles. A point needs only its own element, except:

* softmax normalises each row of ``row`` consecutive channels (a softmax layer's channels are
  ``groups x keys``; ``row`` = keys), layernorm / rmsnorm the whole channel vector of a token row;
* rope rotates channel pairs (2i, 2i+1) of each ``row``-channel head by the angle
  ``position x 10000^(-2i/row)`` (the interleaved form of the RoPE paper and Meta's Llama code; the
  position is the token row p; the cos/sin tables are computed, as the model does not charge them).

So a row-wise region must hold whole rows (rope: whole pairs); :func:`split_row_error` names the
mapping that splits one (the model charges such a split row one read, which no one-pass program can
do; see docs/transformers.md). The float kinds compute in float64; mul and add stay integer.
"""

from __future__ import annotations

import math

import numpy as np

from tileplan.dims import Dim
from tileplan.program.errors import ProgramError
from tileplan.program.ir import Box
from tileplan.program.kernels import ResidentTile, _sub
from tileplan.workload.layer import Layer, OpKind

#: Kinds whose program computes in float64 (the others stay exact int64).
FLOAT_KINDS = frozenset({"softmax", "layernorm", "rmsnorm", "gelu", "silu", "rope"})
#: Kinds whose result at a channel depends on other channels of its row.
ROW_KINDS = frozenset({"softmax", "layernorm", "rmsnorm", "rope"})
#: The norms' epsilon (added to the variance / mean square) and rope's frequency base.
NORM_EPS = 1e-5
ROPE_BASE = 10000.0

_erf = np.vectorize(math.erf, otypes=[np.float64])


def ew_kind(layer: Layer) -> str | None:
    """The ``EW`` kind computing ``layer``, or ``None`` when another instruction does (a plain add)."""
    if layer.op.is_elementwise:
        return layer.op.value
    if layer.op is OpKind.ADD and layer.b_activation:
        return "add"
    return None


def ew_row(layer: Layer) -> int:
    """Channels one row spans: a softmax row or rope head (``row_channels``), a norm's whole vector;
    1 for point-wise kinds."""
    kind = ew_kind(layer)
    if kind in ("layernorm", "rmsnorm"):
        return layer.groups
    if kind in ("softmax", "rope"):
        return layer.row_channels or layer.groups
    return 1


def split_row_error(kind: str, row: int, g: tuple[int, int]) -> str | None:
    """Why channels ``g[0]:g[1]`` of a region cannot be computed alone (``None``: they can)."""
    unit = 2 if kind == "rope" else row
    if kind not in ROW_KINDS or (g[0] % unit == 0 and g[1] % unit == 0):
        return None
    what = "rotary channel pairs" if kind == "rope" else f"{kind} rows of {row} channels"
    return (f"the region's channels {g[0]}:{g[1]} split {what}; a {kind} program needs tiles and core slices "
            f"of G that are multiples of {unit} (the model charges a split row one read, which no one-pass "
            f"program achieves)")


def _rope(x: np.ndarray, row: int, g: tuple[int, int], p: tuple[int, int]) -> np.ndarray:
    chan = np.arange(*g)
    pair = (chan % row) // 2
    angle = np.arange(*p, dtype=np.float64)[None, :] * ROPE_BASE ** (-2.0 * pair / row)[:, None]  # (g, p)
    cos, sin = np.cos(angle)[None, :, None, :, None], np.sin(angle)[None, :, None, :, None]
    even, odd = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = even * cos[:, 0::2] - odd * sin[:, 0::2]
    out[:, 1::2] = even * sin[:, 1::2] + odd * cos[:, 1::2]
    return out


def _rowwise(kind: str, x: np.ndarray, row: int, scale: np.ndarray | None) -> np.ndarray:
    n, g, _, p, q = x.shape
    rows = x.reshape(n, g // row, row, p, q)
    if kind == "softmax":
        e = np.exp(rows - rows.max(axis=2, keepdims=True))
        y = e / e.sum(axis=2, keepdims=True)
    elif kind == "layernorm":
        centred = rows - rows.mean(axis=2, keepdims=True)
        y = centred / np.sqrt((centred * centred).mean(axis=2, keepdims=True) + NORM_EPS)
    else:
        y = rows / np.sqrt((rows * rows).mean(axis=2, keepdims=True) + NORM_EPS)
    y = y.reshape(x.shape)
    return y if scale is None else y * scale


def apply_ew(kind: str, row: int, out: ResidentTile, inputs: list[ResidentTile], weight: ResidentTile | None,
             region: Box, line: int) -> None:
    """``out[region] = kind(inputs[region], weight[region's channels])``; raises :class:`ProgramError`
    naming ``line`` when a tile does not hold the region or the region splits a row."""
    n, g, p, q = region[Dim.N], region[Dim.G], region[Dim.P], region[Dim.Q]
    reason = split_row_error(kind, row, g)
    if reason:
        raise ProgramError(reason, line=line)
    one = (0, 1)
    xs = [_sub(t, [n, g, one, p, q], line) for t in inputs]
    w = None if weight is None else _sub(weight, [g, one, one, one, one], line).reshape(1, -1, 1, 1, 1)
    o = _sub(out, [n, g, one, p, q], line)
    if kind in FLOAT_KINDS:
        x = xs[0].astype(np.float64)
        if kind == "gelu":
            y = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
        elif kind == "silu":
            y = x / (1.0 + np.exp(-x))
        elif kind == "rope":
            y = _rope(x, row, g, p)
        else:
            y = _rowwise(kind, x, row, w)
        o[...] = y
        return
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = acc * x if kind == "mul" else acc + x
    if w is not None:
        acc = acc * w if kind == "mul" else acc + w
    o[...] = acc


__all__ = ["FLOAT_KINDS", "ROW_KINDS", "apply_ew", "ew_kind", "ew_row", "split_row_error"]
