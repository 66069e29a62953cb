"""The layer computed directly on whole tensors: an independent witness for program outputs.

No tiles, no clipping: the input is padded explicitly and every kernel tap is one strided slice.
Integer arithmetic is exact (int64). Max pooling ignores padding; average pooling counts padding as
zeros and divides the window sum by ``R*S`` rounding down; an add sums its equally-shaped inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tileplan.dims import Dim
from tileplan.errors import WorkloadError
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
