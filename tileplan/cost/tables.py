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

    Arrays are indexed ``[t_out - 1, t_k - 1, hoist_out, hoist_k]``.
    """

    npos: np.ndarray
    sum_ext: np.ndarray
    max_ext: np.ndarray
    nfull: np.ndarray
    extents: tuple[tuple[tuple[tuple[np.ndarray, ...], ...], ...], ...]  # per (t_out, t_k, ho, hk): extents
    params: tuple[int, ...]

    def bursts(self, step_bytes: int, burst: int) -> tuple[np.ndarray, np.ndarray]:
        """Burst sums over all positions and over non-full positions (see ``plain_bursts``)."""
        return _halo_bursts(self, step_bytes, burst)


_BURST_CACHE: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}


def _halo_bursts(table: HaloTable, step_bytes: int, burst: int) -> tuple[np.ndarray, np.ndarray]:
    key = (*table.params, step_bytes, burst)
    if key not in _BURST_CACHE:
        size = table.params[2]
        every = np.zeros(table.sum_ext.shape, dtype=np.int64)
        partial = np.zeros(table.sum_ext.shape, dtype=np.int64)
        for a, rows in enumerate(table.extents):
            for b, per_ho in enumerate(rows):
                for ho, per_hk in enumerate(per_ho):
                    for hk, ext in enumerate(per_hk):
                        per = -(-(ext * step_bytes) // burst)
                        every[a, b, ho, hk] = int(per.sum())
                        partial[a, b, ho, hk] = int(per[ext != size].sum())
        _BURST_CACHE[key] = (every, partial)
    return _BURST_CACHE[key]


@lru_cache(maxsize=512)
def halo_table(out_len: int, start: int, size: int, stride: int, dilation: int, kernel: int) -> HaloTable:
    """Input extents along one spatial axis for an output slice of ``out_len`` starting at input
    index ``start`` (negative when padding is included), an input of ``size`` and a ``kernel``.

    Position (i, j) of the output tile loop and kernel tile loop reads input indices
    ``start + i*t_out*stride + j*t_k*dilation`` onwards for ``(t_i - 1)*stride + (t_j - 1)*dilation + 1``,
    clipped to ``[0, size)``.
    """
    shape = (out_len, kernel, 2, 2)
    npos = np.zeros(shape, dtype=np.int64)
    sum_ext = np.zeros(shape, dtype=np.int64)
    max_ext = np.zeros(shape, dtype=np.int64)
    nfull = np.zeros(shape, dtype=np.int64)
    extents: list[list[list[list[np.ndarray]]]] = []
    for t_out in range(1, out_len + 1):
        row_a: list[list[list[np.ndarray]]] = []
        for t_k in range(1, kernel + 1):
            row_b: list[list[np.ndarray]] = []
            for ho in (0, 1):
                row_c: list[np.ndarray] = []
                for hk in (0, 1):
                    to = out_len if ho else t_out
                    tk = kernel if hk else t_k
                    i = np.arange(-(-out_len // to))
                    j = np.arange(-(-kernel // tk))
                    ti = np.minimum(to, out_len - i * to)
                    tj = np.minimum(tk, kernel - j * tk)
                    first = start + i[:, None] * to * stride + j[None, :] * tk * dilation
                    length = (ti[:, None] - 1) * stride + (tj[None, :] - 1) * dilation + 1
                    ext = np.maximum(0, np.minimum(first + length, size) - np.maximum(first, 0)).ravel()
                    idx = (t_out - 1, t_k - 1, ho, hk)
                    npos[idx] = ext.size
                    sum_ext[idx] = int(ext.sum())
                    max_ext[idx] = int(ext.max())
                    nfull[idx] = int(np.count_nonzero(ext == size))
                    row_c.append(ext.astype(np.int64))
                row_b.append(row_c)
            row_a.append(row_b)
        extents.append(row_a)
    frozen = tuple(tuple(tuple(tuple(c) for c in b) for b in a) for a in extents)
    return HaloTable(npos, sum_ext, max_ext, nfull, frozen, (out_len, start, size, stride, dilation, kernel))


def halo_stats(table: HaloTable, t_out: np.ndarray, t_k: np.ndarray, h_out: np.ndarray,
               h_k: np.ndarray) -> tuple[DimStats, tuple[np.ndarray, ...]]:
    """Gather a table's statistics for a batch; also returns the index tuple for burst gathers."""
    out_len, kernel = table.sum_ext.shape[:2]
    idx = (np.minimum(t_out, out_len) - 1, np.minimum(t_k, kernel) - 1, h_out.astype(np.int64),
           h_k.astype(np.int64))
    return DimStats(table.npos[idx], table.sum_ext[idx], table.max_ext[idx], table.nfull[idx]), idx
