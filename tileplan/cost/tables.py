"""Per-dimension sums over tile positions, the building blocks of every traffic figure.

Each DRAM tensor dimension ("storage dimension") of an operand is indexed by one loop dimension,
except input rows (P with R) and columns (Q with S). For a tiling, the tiles of an operand visit a
grid of positions; because that grid is a cartesian product over storage dimensions, the sum over
all positions of any product of per-dimension quantities is the product of per-dimension sums.
This module computes, per storage dimension and for a batch of tile sizes: the number of
positions, the sum and the maximum of the extents, and the burst sum ``sum(ceil(extent * M / B))``
used when the dimension carries the contiguous run (``M`` = bytes of one step along it).
Input rows/columns are clipped to the tensor (padding is never fetched); remainder tiles are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True, slots=True)
class DimStats:
    """Per-candidate statistics of one storage dimension (arrays of shape (n,))."""

    npos: np.ndarray  # number of distinct positions of this dimension's tiles
    sum_ext: np.ndarray  # sum over positions of the extent (elements)
    max_ext: np.ndarray  # largest extent (elements): the on-chip footprint along this dimension
    nfull: np.ndarray  # positions whose extent is the whole tensor dimension (contiguous across it)


def plain_stats(length: int, tensor_size: int, tiles: np.ndarray, hoisted: np.ndarray) -> DimStats:
    """A storage dimension indexed by one loop dimension of a ``length``-long slice.

    ``tiles`` are tile sizes (clipped to ``length``); ``hoisted`` marks tiles spanning the slice.
    """
    t = np.minimum(tiles, length)
    n = -(-length // t)
    single = hoisted | (n == 1)
    npos = np.where(single, 1, n)
    max_ext = np.where(single, length, t)
    sum_ext = np.full_like(t, length)
    nfull = (single & (length == tensor_size)).astype(np.int64)
    return DimStats(npos, sum_ext, max_ext, nfull)


def plain_bursts(length: int, tensor_size: int, tiles: np.ndarray, hoisted: np.ndarray, step_bytes: int,
                 burst: int) -> tuple[np.ndarray, np.ndarray]:
    """Burst sums of a plain storage dimension: over all positions, and over the positions whose
    extent is not the whole tensor dimension, of ``ceil(extent * step_bytes / burst)``."""
    t = np.minimum(tiles, length)
    n = -(-length // t)
    single = hoisted | (n == 1)
    rem = length - (n - 1) * t
    per_full = -(-(t * step_bytes) // burst)
    per_rem = -(-(rem * step_bytes) // burst)
    multi = (n - 1) * per_full + per_rem
    whole = -(-(length * step_bytes) // burst)
    every = np.where(single, whole, multi)
    partial = np.where(single & (length == tensor_size), 0, every)
    return every, partial


@dataclass(frozen=True)
class HaloTable:
    """Input rows (or columns) for every (output tile, kernel tile, hoist flags) of one core slice.

    Arrays are indexed ``[t_out - 1, t_k - 1, hoist_out, hoist_k]``. ``ext`` holds the clipped extent of
    every (output tile position, kernel tile position) of every (t_out, t_k) with neither loop hoisted,
    and ``cell`` the flat ``(t_out - 1) * kernel + t_k - 1`` each belongs to; a hoisted loop's entry is
    its whole-length tile's (``t_out = out_len`` or ``t_k = kernel``).
    """

    npos: np.ndarray
    sum_ext: np.ndarray
    max_ext: np.ndarray
    nfull: np.ndarray
    ext: np.ndarray
    cell: np.ndarray
    params: tuple[int, ...]

    def bursts(self, step_bytes: int, burst: int) -> tuple[np.ndarray, np.ndarray]:
        """Burst sums over all positions and over non-full positions (see ``plain_bursts``)."""
        return _halo_bursts(self, step_bytes, burst)


_BURST_CACHE: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}


def _hoisted(base: np.ndarray) -> np.ndarray:
    """(out_len, kernel) -> (out_len, kernel, 2, 2): a hoisted loop takes its whole-length tile's value."""
    out = np.empty((*base.shape, 2, 2), dtype=base.dtype)
    out[:, :, 0, 0] = base
    out[:, :, 1, 0] = base[-1:, :]
    out[:, :, 0, 1] = base[:, -1:]
    out[:, :, 1, 1] = base[-1, -1]
    return out


def _halo_bursts(table: HaloTable, step_bytes: int, burst: int) -> tuple[np.ndarray, np.ndarray]:
    key = (*table.params, step_bytes, burst)
    if key not in _BURST_CACHE:
        out_len, _, size, _, _, kernel = table.params
        per = -(-(table.ext * step_bytes) // burst)
        cells = out_len * kernel
        every = np.bincount(table.cell, weights=per, minlength=cells).astype(np.int64).reshape(out_len, kernel)
        partial = np.bincount(table.cell, weights=np.where(table.ext != size, per, 0),
                              minlength=cells).astype(np.int64).reshape(out_len, kernel)
        _BURST_CACHE[key] = (_hoisted(every), _hoisted(partial))
    return _BURST_CACHE[key]


def tile_positions(length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every tile size t = 1..length and position i of a ``length``-long loop cut into t-long
    tiles: (t - 1, i * t, the tile's actual length), flattened over (t, i)."""
    t = np.arange(1, length + 1)
    count = -(-length // t)
    size = np.repeat(t, count)
    pos = np.arange(len(size)) - np.repeat(np.cumsum(count) - count, count)
    first = pos * size
    return size - 1, first, np.minimum(size, length - first)


@lru_cache(maxsize=512)
def halo_table(out_len: int, start: int, size: int, stride: int, dilation: int, kernel: int) -> HaloTable:
    """Input extents along one spatial axis for an output slice of ``out_len`` starting at input
    index ``start`` (negative when padding is included), an input of ``size`` and a ``kernel``.

    Position (i, j) of the output tile loop and kernel tile loop reads input indices
    ``start + i*t_out*stride + j*t_k*dilation`` onwards for ``(t_i - 1)*stride + (t_j - 1)*dilation + 1``,
    clipped to ``[0, size)``. Every (t_out, t_k, i, j) is computed at once.
    """
    to_idx, o_first, o_len = tile_positions(out_len)
    tk_idx, k_first, k_len = tile_positions(kernel)
    first = start + o_first[:, None] * stride + k_first[None, :] * dilation
    length = (o_len[:, None] - 1) * stride + (k_len[None, :] - 1) * dilation + 1
    ext = np.maximum(0, np.minimum(first + length, size) - np.maximum(first, 0)).ravel().astype(np.int64)
    cell = (to_idx[:, None] * kernel + tk_idx[None, :]).ravel()
    cells = out_len * kernel

    def per_cell(weights: np.ndarray | None) -> np.ndarray:
        return np.bincount(cell, weights=weights, minlength=cells).astype(np.int64).reshape(out_len, kernel)

    max_ext = np.zeros(cells, dtype=np.int64)
    np.maximum.at(max_ext, cell, ext)
    return HaloTable(_hoisted(per_cell(None)), _hoisted(per_cell(ext)), _hoisted(max_ext.reshape(out_len, kernel)),
                     _hoisted(per_cell((ext == size).astype(np.float64))), ext, cell,
                     (out_len, start, size, stride, dilation, kernel))


def halo_stats(table: HaloTable, t_out: np.ndarray, t_k: np.ndarray, h_out: np.ndarray,
               h_k: np.ndarray) -> tuple[DimStats, tuple[np.ndarray, ...]]:
    """Gather a table's statistics for a batch; also returns the index tuple for burst gathers."""
    out_len, kernel = table.sum_ext.shape[:2]
    idx = (np.minimum(t_out, out_len) - 1, np.minimum(t_k, kernel) - 1, h_out.astype(np.int64),
           h_k.astype(np.int64))
    return DimStats(table.npos[idx], table.sum_ext[idx], table.max_ext[idx], table.nfull[idx]), idx
