"""The layer computed directly on whole tensors: an independent witness for program outputs.

No tiles, no clipping: the input is padded explicitly and every kernel tap is one strided slice.
Integer arithmetic is exact (int64). Max pooling ignores padding; average pooling counts padding as
zeros and divides the window sum by ``R*S`` rounding down; an add sums its equally-shaped inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tileplan.dims import Dim
from tileplan.errors import WorkloadError
from tileplan.program.elementwise import NORM_EPS, ROPE_BASE
from tileplan.workload.layer import Layer, OpKind

_MIN = np.iinfo(np.int64).min


def reference_output(layer: Layer, inputs: Sequence[np.ndarray], weight: np.ndarray | None = None
                     ) -> np.ndarray:
    """Output (N, G*K, P, Q) int64 of ``layer`` on ``inputs`` ((N, G*C, H, W) each) and ``weight``
    ((G*K, C, R, S)). A concat returns its (already concatenated) input.

    >>> layer = Layer.conv("c", c_in=1, h=3, w=3, k_out=1, r=2, pad=0)
    >>> reference_output(layer, [np.arange(9).reshape(1, 1, 3, 3)], np.ones((1, 1, 2, 2), dtype=int))[0, 0]
    array([[ 8, 12],
           [20, 24]])
    """
    d = layer.dims
    n, g, k, c, p, q = (d[x] for x in (Dim.N, Dim.G, Dim.K, Dim.C, Dim.P, Dim.Q))
    arrays = [np.asarray(a, dtype=np.int64) for a in inputs]
    if layer.op is OpKind.CONCAT:
        return arrays[0].reshape(n, layer.k_out, p, q).copy()
    if layer.op.is_elementwise or (layer.op is OpKind.ADD and layer.b_activation):
        return _elementwise(layer, [np.asarray(a) for a in inputs], weight)
    if layer.op is OpKind.ADD:
        return np.sum(arrays, axis=0).reshape(n, layer.k_out, p, q)
    if layer.op.multiplies and weight is None:
        raise WorkloadError(f"layer {layer.name!r} needs a weight tensor")
    sh, sw = layer.stride
    dh, dw = layer.dilation
    top, bottom, left, right = layer.pad
    is_max = layer.op is OpKind.MAXPOOL
    x = arrays[0].reshape(n, g, c, layer.h, layer.w)
    padded = np.full((n, g, c, layer.h + top + bottom, layer.w + left + right), _MIN if is_max else 0,
                     dtype=np.int64)
    padded[:, :, :, top:top + layer.h, left:left + layer.w] = x
    out = np.full((n, g, k, p, q), _MIN if is_max else 0, dtype=np.int64)
    w = None if weight is None else np.asarray(weight, dtype=np.int64).reshape(g, k, c, layer.r, layer.s)
    for r in range(layer.r):
        for s in range(layer.s):
            taps = padded[:, :, :, r * dh:r * dh + (p - 1) * sh + 1:sh, s * dw:s * dw + (q - 1) * sw + 1:sw]
            if w is not None:
                out += np.einsum("ngcpq,gkc->ngkpq", taps, w[:, :, :, r, s])
            elif is_max:
                out = np.maximum(out, taps)
            else:
                out += taps
    if layer.op in (OpKind.AVGPOOL, OpKind.GLOBALPOOL):
        out //= layer.r * layer.s
    return out.reshape(n, g * k, p, q)


def _elementwise(layer: Layer, inputs: list[np.ndarray], weight: np.ndarray | None) -> np.ndarray:
    """Whole-tensor element-wise and row-wise layers (float64 for the float kinds, int64 otherwise):
    softmax over each ``row_channels`` group of channels, the norms over all channels (eps 1e-5, times
    the per-channel scale), exact GELU, SiLU, interleaved rope of ``row_channels``-wide heads at
    position = token row, mul / add of the inputs and the broadcast row."""
    op, row = layer.op, layer.row_channels or layer.c_in
    n, c, h, w = inputs[0].shape
    scale = None if weight is None else np.asarray(weight).reshape(1, c, 1, 1)
    if op in (OpKind.ADD, OpKind.MUL):
        acc = inputs[0].astype(np.int64)
        for x in inputs[1:] + ([scale] if scale is not None else []):
            acc = acc * x if op is OpKind.MUL else acc + x
        return acc
    x = inputs[0].astype(np.float64)
    if op is OpKind.GELU:
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    if op is OpKind.SILU:
        return x * (1.0 / (1.0 + np.exp(-x)))
    if op is OpKind.ROPE:
        freq = ROPE_BASE ** (-(np.arange(c) % row // 2 * 2) / row)
        angle = freq[:, None] * np.arange(h)[None, :]
        partner = x.reshape(n, c // 2, 2, h, w)[:, :, ::-1].reshape(x.shape) * np.where(np.arange(c) % 2, 1, -1
                                                                                          ).reshape(1, c, 1, 1)
        return x * np.cos(angle)[None, :, :, None] + partner * np.sin(angle)[None, :, :, None]
    if op is OpKind.SOFTMAX:
        seg = x.reshape(n, c // row, row, h, w)
        e = np.exp(seg - seg.max(axis=2, keepdims=True))
        return (e / e.sum(axis=2, keepdims=True)).reshape(x.shape)
    mean = x.mean(axis=1, keepdims=True) if op is OpKind.LAYERNORM else 0.0
    y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + NORM_EPS)
    return y if scale is None else y * scale
