"""Backward tile propagation through a fused chain, along one spatial axis, for every candidate
tile size of the last layer's output at once (HW-Flow-Fusion Eq. 4, generalised).

Along rows (or columns), the last layer's output is cut into tiles of ``t``: position ``i`` covers
``[i*t, min((i+1)*t, P))``. An output interval ``[a, b)`` of a layer with stride ``s``, dilation
``d``, kernel ``k`` and leading padding ``pad`` reads input ``[a*s - pad, (b-1)*s - pad + (k-1)*d + 1)``,
clipped to the input map (padding is never computed nor fetched); that clipped interval is the
output interval of the producing layer. Eq. 4 is the interior case: ``T_i = (T_o - 1)*S + N_k``.

Two overlap views per layer and position:

* the *window*: everything the step needs (what ``recompute`` computes again);
* the *new* part ``[max(a_i, b_{i-1}), b_i)``: pixels no earlier step along this axis needed. With
  row-major steps, the new pixels of step (i, j) are exactly new_rows(i) x new_cols(j), so the
  multi-tiling tile sets of HW-Flow-Fusion Eq. 10-12 are these boxes and MACs are conserved (Eq. 13).

Everything is an (n_tiles, n_positions) array with a validity mask; :func:`histogram` turns the
extents into per-tile counts so that sums of any per-extent function are matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class AxisGeom:
    """One layer along one axis: input and output lengths, stride, dilation, kernel, leading pad."""

    in_size: int
    out_size: int
    stride: int
    dilation: int
    kernel: int
    pad: int

    @property
    def span(self) -> int:
        """Input elements one output element reads: ``(k - 1) * d + 1``."""
        return (self.kernel - 1) * self.dilation + 1

    @property
    def overlap(self) -> int:
        """Input elements two neighbouring outputs share (HW-Flow-Fusion Eq. 7: N_k - S)."""
        return max(0, self.span - self.stride)

    def back(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Clipped input interval of output intervals ``[lo, hi)`` (empty intervals stay empty)."""
        a = np.clip(lo * self.stride - self.pad, 0, self.in_size)
        b = np.clip((hi - 1) * self.stride - self.pad + self.span, 0, self.in_size)
        return a, np.where(hi <= lo, a, np.maximum(a, b))


@dataclass(frozen=True)
class AxisTiles:
    """Propagated intervals of every layer (index 0 = first layer of the group) for tile sizes
    ``tiles`` of the last layer's output. Arrays are (n_tiles, n_positions); ``valid`` marks real
    positions. ``out_*`` are output intervals (windows), ``new_*`` their new parts, ``in_*`` the input
    windows, ``newin_*`` the input intervals the new parts read."""

    tiles: np.ndarray
    valid: np.ndarray
    out_lo: tuple[np.ndarray, ...]
    out_hi: tuple[np.ndarray, ...]
    new_lo: tuple[np.ndarray, ...]
    in_lo: tuple[np.ndarray, ...]
    in_hi: tuple[np.ndarray, ...]
    newin_lo: tuple[np.ndarray, ...]
    newin_hi: tuple[np.ndarray, ...]

    @property
    def npos(self) -> np.ndarray:
        """Positions (tile steps) along this axis for every tile size."""
        return self.valid.sum(axis=1)

    def new_in_lo(self, m: int) -> np.ndarray:
        """Start of the *new* part of layer ``m``'s input window (top layer: what DRAM delivers)."""
        return _new_lo(self.in_lo[m], self.in_hi[m], self.valid)


def _new_lo(lo: np.ndarray, hi: np.ndarray, valid: np.ndarray) -> np.ndarray:
    prev_hi = np.concatenate([np.full((lo.shape[0], 1), np.iinfo(np.int64).min), hi[:, :-1]], axis=1)
    reach = np.maximum.accumulate(np.where(valid, prev_hi, np.iinfo(np.int64).min), axis=1)
    return np.minimum(np.maximum(lo, reach), hi)


def propagate(geoms: list[AxisGeom], tiles: np.ndarray) -> AxisTiles:
    """Propagate tiles of the last layer's output back through ``geoms`` (first layer first)."""
    length = geoms[-1].out_size
    t = np.asarray(tiles, dtype=np.int64)
    npos = -(-length // t)
    i = np.arange(int(npos.max()), dtype=np.int64)[None, :]
    valid = i < npos[:, None]
    lo = np.where(valid, i * t[:, None], length)
    hi = np.where(valid, np.minimum((i + 1) * t[:, None], length), length)
    out_lo: list[np.ndarray] = []
    out_hi: list[np.ndarray] = []
    new_lo: list[np.ndarray] = []
    in_lo: list[np.ndarray] = []
    in_hi: list[np.ndarray] = []
    nin_lo: list[np.ndarray] = []
    nin_hi: list[np.ndarray] = []
    for geom in reversed(geoms):
        nlo = _new_lo(lo, hi, valid)
        a, b = geom.back(lo, hi)
        na, nb = geom.back(nlo, hi)
        a = np.where(valid, a, geom.in_size)
        b = np.where(valid, b, geom.in_size)
        out_lo.append(lo)
        out_hi.append(hi)
        new_lo.append(nlo)
        in_lo.append(a)
        in_hi.append(b)
        nin_lo.append(np.where(valid, na, 0))
        nin_hi.append(np.where(valid, nb, 0))
        lo, hi = a, b
    return AxisTiles(t, valid, tuple(out_lo[::-1]), tuple(out_hi[::-1]), tuple(new_lo[::-1]), tuple(in_lo[::-1]),
                     tuple(in_hi[::-1]), tuple(nin_lo[::-1]), tuple(nin_hi[::-1]))


def histogram(extents: np.ndarray, valid: np.ndarray, size: int) -> np.ndarray:
    """(n_tiles, size + 1): how many valid positions have each extent 0..size.

    >>> histogram(np.array([[2, 2, 1], [3, 0, 0]]), np.array([[True, True, True], [True, False, False]]), 3)
    array([[0, 1, 2, 0],
           [0, 0, 0, 1]])
    """
    n = extents.shape[0]
    flat = (np.arange(n)[:, None] * (size + 1) + np.clip(extents, 0, size))[valid]
    return np.bincount(flat, minlength=n * (size + 1)).reshape(n, size + 1)


def geoms_of(layers: list[tuple[int, int, int, int, int, int]]) -> list[AxisGeom]:
    """``AxisGeom`` list from (in_size, out_size, stride, dilation, kernel, pad) tuples."""
    return [AxisGeom(*spec) for spec in layers]
