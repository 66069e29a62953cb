"""Exact integer compute on resident tiles (numpy int64), as the executor's CONV/POOL/ADD run them.

Tiles are canonical-order arrays (``kernels`` never sees DRAM layouts) with the box they hold.
Coordinates are global: a region lists ``(start, stop)`` of N G K C P Q R S; input row of output row
``p`` and kernel row ``r`` is ``p*stride + r*dilation - pad_top`` (columns alike); rows outside the
input tensor are padding and are never read (they contribute 0 to sums and nothing to a max).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.dims import Dim
from tileplan.program.errors import ProgramError
from tileplan.program.ir import Box

#: Identity of max pooling (the smallest int64): an output element no window element reached.
MAX_IDENTITY = np.iinfo(np.int64).min


@dataclass(frozen=True, slots=True)
class Geometry:
    """Layer constants the kernels need: stride, dilation, top/left padding, input height/width."""

    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad_top: int
    pad_left: int
    in_h: int
    in_w: int

    @classmethod
    def of(cls, stride: tuple[int, int], dilation: tuple[int, int], pads: tuple[int, int, int, int],
           in_h: int, in_w: int) -> Geometry:
        """From a layer's stride, dilation, (top, bottom, left, right) pads and input size."""
        return cls(stride, dilation, pads[0], pads[2], in_h, in_w)


@dataclass(frozen=True, slots=True)
class ResidentTile:
    """An on-chip tile: a view of its memory (canonical order) and the box it holds."""

    name: str
    data: np.ndarray
    box: Box



def window(out: tuple[int, int], ker: tuple[int, int], stride: int, dilation: int, pad: int, size: int
           ) -> tuple[int, int, int, int]:
    """Input rows (or columns) read by output range ``out`` and kernel range ``ker``: the window
    ``[lo, hi)`` before clipping and the clipped ``[a, b)`` (``0 <= a <= b <= size``)."""
    lo = out[0] * stride + ker[0] * dilation - pad
    hi = (out[1] - 1) * stride + (ker[1] - 1) * dilation - pad + 1
    a = min(max(lo, 0), size)
    return lo, hi, a, max(min(hi, size), a)


def region_pads(geo: Geometry, region: Box) -> tuple[int, int, int, int]:
    """Padded rows above/below and columns left/right of the input window ``region`` reads
    (e-PlaNNer's per-tile pads)."""
    out = []
    for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
        size = geo.in_h if axis == 0 else geo.in_w
        pad = geo.pad_top if axis == 0 else geo.pad_left
        lo, hi, _, _ = window(region[dp], region[dk], geo.stride[axis], geo.dilation[axis], pad, size)
        out += [max(0, min(hi, 0) - lo), max(0, hi - max(lo, size))]
    return (out[0], out[1], out[2], out[3])


def _sub(tile: ResidentTile, ranges: list[tuple[int, int] | None], line: int) -> np.ndarray:
    """The part of ``tile`` covering ``ranges`` (``None``: the whole axis)."""
    index = []
    for axis, (rng, (lo, hi)) in enumerate(zip(ranges, tile.box, strict=True)):
        if rng is None:
            index.append(slice(None))
            continue
        if rng[0] < lo or rng[1] > hi:
            raise ProgramError(f"{tile.name} holds {lo}:{hi} along storage dim {axis}, but the region needs "
                               f"{rng[0]}:{rng[1]}", line=line)
        index.append(slice(rng[0] - lo, rng[1] - lo))
    return tile.data[tuple(index)]


def _taps(region: Box, axis: int, k: int, geo: Geometry, held: tuple[int, int], name: str,
          line: int) -> tuple[np.ndarray, np.ndarray]:
    """For kernel offset ``k`` along ``axis`` (0 rows, 1 columns): positions (relative to the
    region) of the outputs that read real input, and the input indices (relative to the tile)."""
    out_dim = Dim.P if axis == 0 else Dim.Q
    size = geo.in_h if axis == 0 else geo.in_w
    pad = geo.pad_top if axis == 0 else geo.pad_left
    out = np.arange(*region[out_dim])
    src = out * geo.stride[axis] + k * geo.dilation[axis] - pad
    valid = (src >= 0) & (src < size)
    src = src[valid]
    if src.size and (src[0] < held[0] or src[-1] >= held[1]):
        raise ProgramError(f"{name} holds input {'rows' if axis == 0 else 'columns'} {held[0]}:{held[1]}, "
                           f"but the region reads {int(src[0])}:{int(src[-1]) + 1}", line=line)
    return np.flatnonzero(valid), src - held[0]


def accumulate(kind: str, out: ResidentTile, inputs: list[ResidentTile], weight: ResidentTile | None,
               region: Box, geo: Geometry, line: int) -> None:
    """``out[region] (+)= window op of inputs (and weight)`` for ``kind`` in ``conv``, ``max``, ``sum``.

    ``sum`` adds every input tile's windows (average pooling before its DIV, and the element-wise
    add, whose windows are single elements). Raises :class:`ProgramError` naming ``line`` when a tile
    does not hold what the region needs.
    """
    n, g, k, c = region[Dim.N], region[Dim.G], region[Dim.K], region[Dim.C]
    o = _sub(out, [n, g, k, region[Dim.P], region[Dim.Q]], line)
    w = None if weight is None else _sub(weight, [g, k, c, region[Dim.R], region[Dim.S]], line)
    for r in range(*region[Dim.R]):
        for s in range(*region[Dim.S]):
            for tile in inputs:
                x = _sub(tile, [n, g, c, None, None], line)
                pv, rows = _taps(region, 0, r, geo, tile.box[3], tile.name, line)
                qv, cols = _taps(region, 1, s, geo, tile.box[4], tile.name, line)
                if not (pv.size and qv.size):
                    continue
                window = x[:, :, :, rows[:, None], cols[None, :]]
                target = (slice(None), slice(None), slice(None), pv[:, None], qv[None, :])
                if kind == "conv":
                    assert w is not None
                    wk = w[:, :, :, r - region[Dim.R][0], s - region[Dim.S][0]]
                    o[target] += np.einsum("ngcpq,gkc->ngkpq", window, wk)
                elif kind == "max":
                    o[target] = np.maximum(o[target], window)
                else:
                    o[target] += window
