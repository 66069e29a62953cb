"""Per-dimension sums over a nested tiling: DRAM tiles, temporal steps inside them, and the children
(PEs) of each step. The multi-level model (``cost.levels``) multiplies these per-dimension sums
into per-operand traffic, the way ``cost.tables`` does for the DRAM level alone.

Along one dimension of a core slice of ``length`` elements: DRAM tiles of ``t0`` elements (the last
one shorter), each cut into steps of ``t1 * fanout`` elements, each step cut into up to ``fanout``
children of ``t1`` elements (the last one shorter; a short step leaves children idle). A *leaf* is
one child's range in one step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True, slots=True)
class NestStats:
    """Scalars of one nested tiling of one dimension (counts are positions, extents elements)."""

    tiles: int  # DRAM tiles (iterations of the level-0 loop)
    steps: int  # (DRAM tile, step) pairs: iterations of the level-0 and level-1 loops
    leaves: int  # active children summed over (tile, step) pairs
    recv_tile: int  # sum over DRAM tiles of the children active in some step of the tile
    recv_any: int  # children active in some step of some tile
    step_max: int  # sum over (tile, step) pairs of the longest child extent (compute steps)
    box: int  # longest child extent (the child memory's footprint along the dimension)
    step_trips: int  # most steps in one DRAM tile (trip count of the level-1 loop)


#: Which DRAM tiles of a dimension a sum covers: every one, the whole (``t0``-long) ones, or the
#: last, shorter one (the multi-level model splits its counts by these when a remainder tile has a
#: single step but whole tiles have several).
ALL_TILES, WHOLE_TILES, REMAINDER_TILE = 0, 1, 2


def leaves(length: int, t0: int, t1: int, fanout: int, part: int = ALL_TILES) -> list[tuple[int, int]]:
    """(offset, extent) of every leaf, in loop order (tile, step, child), of the DRAM tiles ``part``."""
    out = []
    step = t1 * fanout
    for a in range(0, length, t0):
        e0 = min(t0, length - a)
        if (part == WHOLE_TILES and e0 < t0) or (part == REMAINDER_TILE and e0 == t0):
            continue
        for b in range(0, e0, step):
            ec = min(step, e0 - b)
            for k in range(0, ec, t1):
                out.append((a + b + k, min(t1, ec - k)))
    return out


@lru_cache(maxsize=65536)
def nest_stats(length: int, t0: int, t1: int, fanout: int) -> NestStats:
    """:class:`NestStats` of one dimension (``t0`` clipped to ``length``, ``t1`` to ``t0``)."""
    t0 = min(t0, length)
    t1 = min(t1, t0)
    step = t1 * fanout
    tiles = steps = n_leaves = recv_tile = step_max = 0
    for a in range(0, length, t0):
        e0 = min(t0, length - a)
        tiles += 1
        recv_tile += min(fanout, -(-e0 // t1))
        for b in range(0, e0, step):
            ec = min(step, e0 - b)
            steps += 1
            n_leaves += -(-ec // t1)
            step_max += min(t1, ec)
    return NestStats(tiles, steps, n_leaves, recv_tile, min(fanout, -(-t0 // t1)), step_max, t1,
                     -(-t0 // step))


STAT_FIELDS = NestStats.__slots__


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, index of each row's distinct row) of a non-negative int (n, k) array: the rows
    are packed into one int64 each (mixed radix) so the sort is one-dimensional (``np.unique`` with
    ``axis=0`` sorts structured rows, far slower)."""
    n, k = keys.shape
    if n == 0:
        return keys.reshape(0, k), np.zeros(0, dtype=np.int64)
    radix = keys.max(axis=0).astype(np.int64) + 1
    if float(np.prod(radix.astype(np.float64))) >= 2.0 ** 62:
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        return uniq, inverse.reshape(-1)
    code = np.zeros(n, dtype=np.int64)
    for j in range(k):
        code = code * radix[j] + keys[:, j]
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    return keys[first], inverse.reshape(-1)


def gather_stats(length: int, t0: np.ndarray, t1: np.ndarray, fanout: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`nest_stats` of a batch (arrays of shape (n,)), computed once per distinct triple."""
    keys = np.stack([np.minimum(t0, length), np.minimum(np.minimum(t1, t0), length), fanout], axis=1)
    uniq, inverse = unique_rows(keys)
    table = np.array([[getattr(nest_stats(length, int(a), int(b), int(c)), f) for f in STAT_FIELDS]
                      for a, b, c in uniq], dtype=np.int64).reshape(len(uniq), len(STAT_FIELDS))
    rows = table[inverse]
    return {f: rows[:, i] for i, f in enumerate(STAT_FIELDS)}


@lru_cache(maxsize=65536)
def halo_leaf_sums(out: tuple[int, ...], ker: tuple[int, ...], start: int, size: int,
                   stride: int, dilation: int) -> tuple[int, int]:
    """(sum, max) over every pair of an output leaf and a kernel leaf of the input rows (or columns)
    they read, clipped to the input (padding is never held). ``out``/``ker`` are (length, t0, t1,
    fanout[, part]) of the output and kernel dimensions; ``start`` is the input index of output 0.
    A ``part`` that selects no tile gives (0, 0)."""
    o_leaves = np.array(leaves(*out), dtype=np.int64).reshape(-1, 2)
    k_leaves = np.array(leaves(*ker), dtype=np.int64).reshape(-1, 2)
    if len(o_leaves) == 0 or len(k_leaves) == 0:
        return 0, 0
    first = start + o_leaves[:, None, 0] * stride + k_leaves[None, :, 0] * dilation
    span = (o_leaves[:, None, 1] - 1) * stride + (k_leaves[None, :, 1] - 1) * dilation + 1
    ext = np.maximum(0, np.minimum(first + span, size) - np.maximum(first, 0))
    return int(ext.sum()), int(ext.max())


def gather_halo(out_len: int, ker_len: int, start: int, size: int, stride: int, dilation: int,
                o: tuple[np.ndarray, ...], k: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`halo_leaf_sums` of a batch; ``o``/``k`` are (t0, t1, fanout[, part]) arrays."""
    o0 = np.minimum(o[0], out_len)
    k0 = np.minimum(k[0], ker_len)
    zero = np.zeros_like(o0)
    keys = np.stack([o0, np.minimum(o[1], o0), o[2], o[3] if len(o) > 3 else zero,
                     k0, np.minimum(k[1], k0), k[2], k[3] if len(k) > 3 else zero], axis=1)
    uniq, inverse = unique_rows(keys)
    table = np.array([halo_leaf_sums((out_len, int(a), int(b), int(c), int(pa)), (ker_len, int(d), int(e), int(f),
                                                                                 int(pk)),
                                     start, size, stride, dilation) for a, b, c, pa, d, e, f, pk in uniq],
                     dtype=np.int64).reshape(len(uniq), 2)
    rows = table[inverse]
    return rows[:, 0], rows[:, 1]
