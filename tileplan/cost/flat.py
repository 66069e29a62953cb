"""The flat tables' format and the elementwise operations of the cost kernel.

The kernel (``cost.kernel``, stage two) and the finish (``cost.finish``, stage three) are plain
elementwise Python over "values" that are either numpy arrays (one entry per candidate: the
vectorised path) or scalars (one candidate: the compiled path, where ``cost.compiled`` hands the very
same functions to numba). This module holds what both stages and the table builder
(``cost.kernel_tables``, stage one) share: the field offsets of every flat table (tables and scratch
are flat -- one index, fixed strides written here -- which the compiler turns into plain address
arithmetic) and the small operations every stage uses. A few of them (:func:`select`, :func:`pick`,
:func:`at`, :func:`maximum`, :func:`cdiv_unroll`) have a cheaper scalar twin in ``cost.compiled`` that
returns the same value.

numba's cache is keyed by ``cost/kernel.py`` (where the compiled loops are written); this module is
compiled into them, so ``cost.jit`` drops the cache when this file is newer (``kernel.INLINED_FROM``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Fields of the per-shape integer table ``pi[s * N_FIELDS + f]``.
F_SWEEP = 0  # 0..2: bytes of one sweep of each operand's tiles (output at output precision)
F_BURSTS = 3  # 3..5: bursts of one sweep
F_PSUM = 6  # bytes of one sweep of output tiles at partial-sum precision
F_PSUM_BURSTS = 7
F_STEP = 8  # 8..10: sum over compute steps of each operand's loop-tile elements (input: every addend)
F_FOOT = 11  # 11..13: on-chip bytes of each operand's tile box
N_FIELDS = 14
N_OUT = 16  # values returned by ``finish``: see its docstring

# The per-shape record ``KernelTables.srec[s * SREC + S_* + d]``.
S_LEN = 0  # slice length of dimension d
S_TOFF = 8  # where dimension d's entries start in ``KernelTables.trips`` (tile t: entries 2 (toff + t), + 1)
SREC = 16

# The record of a storage position ``KernelTables.prec[(((s * 3 + op) * 24 + code) * 5 + pos) * NREC + R_*]``:
# core shape s, operand op, its layout code, position pos in that layout (outermost first).
R_DIM = 0  # the loop dimension indexing it
R_AXIS = 1  # input rows (0) or columns (1), read from the halo table; -1 for the other (plain) positions
R_OFF = 2  # where its entries start: in ``ptab`` (plain: tile t at R_OFF + (t - 1) * stride) or ``halo``
R_LEN = 3  # the slice length (plain positions)
NREC = 4


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def cdiv_by(a: Any, b: int, shift: int) -> Any:
    """``cdiv(a, b)`` for a divisor fixed by the tables: a shift when ``b == 1 << shift`` (``shift``
    is -1 otherwise), which is exact for non-negative ``a`` and much cheaper than a division."""
    if shift >= 0:
        return (a + (b - 1)) >> shift
    return cdiv(a, b)


def cdiv_unroll(a: Any, u: Any) -> Any:
    """Steps of ``a`` elements over ``u`` PE lanes, ``ceil(a / u)``; ``u <= 1`` means not unrolled
    (``a`` steps). The compiled twin skips the division when ``u <= 1``, the common case."""
    return cdiv(a, np.maximum(u, 1))


def log2_exact(b: int) -> int:
    """``k`` where ``b == 1 << k``, else -1 (the ``shift`` of :func:`cdiv_by`)."""
    return b.bit_length() - 1 if b > 0 and b & (b - 1) == 0 else -1


def select(c: Any, a: Any, b: Any) -> Any:
    """``a`` where ``c`` (0/1) else ``b``, for integers (exact)."""
    return b + c * (a - b)


def maximum(a: Any, b: Any) -> Any:
    """The larger of two costs (never NaN)."""
    return np.maximum(a, b)


def at(table: Any, x: Any) -> Any:
    """``table[x]``: a flat table (or scratch) at a computed, never negative, offset (the compiled
    twin skips the wrap-around of negative indices)."""
    return table[x]


def pick(table: Any, base: Any, d: Any) -> Any:
    """``table[base + d]`` where ``d`` is a dimension chosen per candidate (vectorised: ``table`` is
    ``(rows, n)``, ``d`` a scalar or an ``(n,)`` array)."""
    if np.ndim(d) == 0:
        return table[base + d]
    return np.take_along_axis(table[base:base + 9], d[None, :], axis=0)[0]


def hoist_bits(word: Any) -> Any:
    """Bitmask of an operand's hoisted dimensions (bit ``d``: dimension ``d``) from its 8 flags as
    0/1 bytes of one little-endian uint64 word: multiplying by ``sum_k 2**(56 - 7k)`` moves byte
    ``k``'s bit to bit ``56 + k`` without carries (every other product lands on a distinct bit
    outside 56..63), so the top byte is the mask."""
    return np.int64((word * np.uint64(0x0102040810204080)) >> np.uint64(56))


# Fields of one entry of the input halo table ``KernelTables.halo`` (``cost.tables.halo_table`` of an
# output tile and a kernel tile under two hoist flags; see ``kernel_tables``). An axis of a shape under
# one input layout is a block of (output tile, kernel tile, hoist flags) entries from its R_OFF.
H_SUM = 0  # sum of the input extents over tile positions
H_MAX = 1  # largest extent
H_FULL = 2  # positions whose extent spans the whole input dimension
H_EVERY = 3  # bursts over all positions (for the slot's input layout)
H_PARTIAL = 4  # bursts over the positions that do not span the whole dimension
H_SUM00 = 5  # H_SUM without hoisting (the same for every hoist flag)
N_HALO = 6

# Fields of one entry of the plain-position table ``KernelTables.ptab``: a storage dimension indexed by
# one loop dimension, for one tile size (``cost.tables.plain_stats`` and ``plain_bursts``; see ``kernel_tables``).
P_MAX = 0  # largest extent: the slice when one tile spans it, else the tile
P_FULL = 1  # 1 when every box spans the whole tensor dimension
P_EVERY = 2  # bursts over all positions
P_PARTIAL = 3  # bursts over the positions that do not span the whole dimension
P_EVERY2 = 4  # P_EVERY at partial-sum precision (output entries only)
P_PARTIAL2 = 5
N_PLAIN = 4  # fields of an input or weight entry
N_PLAIN2 = 6  # fields of an output entry

# The trip table ``dd[s * DD_SHAPE + D_* + d]`` of core shape s: rows of DD_COLS columns (the 8
# dimensions, then D_NEUTRAL).
DD_COLS = 9
D_TILE = 0  # tile size clipped to the slice
D_TRIPS = DD_COLS  # tiles along the slice: ceil(length / tile)
D_REM = 2 * DD_COLS  # size of the last (remainder) tile
DD_SHAPE = 3 * DD_COLS
D_NEUTRAL = 8  # a dimension of length 1 (fills unused slots of a flattened PE-array axis)


def hoist_words(hoist: np.ndarray) -> np.ndarray:
    """(n, 3) uint64: the 8 hoist flags of each operand ((n, 3, 8)) as 0/1 bytes in one little-endian
    word (a view, no copy, of a contiguous boolean array); :func:`hoist_bits` turns one into a mask."""
    flags = np.asarray(hoist)
    if flags.dtype != np.bool_:
        flags = flags != 0
    return np.ascontiguousarray(flags).view(np.uint64)[..., 0]


def hoist_masks(hoist: np.ndarray) -> np.ndarray:
    """(n, 3) int64 bitmasks of hoisted dimensions (bit ``d``: dimension ``d``) from (n, 3, 8) flags."""
    return np.asarray(hoist_bits(hoist_words(hoist)), dtype=np.int64)
