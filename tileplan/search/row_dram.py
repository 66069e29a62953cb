"""A lower bound on the DRAM bytes of given tile vectors, before their unrolling is chosen.

``search.bounds.min_dram_bytes`` bounds a whole core split by the least, over loop orders and the
trip counts whose tiles fit, of ``sum_X rho_X * bytes_X``: the reload factor ``rho_X`` of each
operand (``cost.finish.reload``) times its compulsory bytes summed over multicast groups (outputs:
the final write plus ``2 (rho - 1)`` partial-sum round trips). The same inequality holds for each
tile vector on its own: its trip counts on the split's shortest slices are no larger than on any
core, fewer trips never raise a reload factor, and every operand moves at least its compulsory bytes
per sweep. So :func:`row_dram_bytes`, that least taken over the loop orders searched for one tile
vector, is at most the DRAM bytes the model gives that tile vector under any of those orders.

The exhaustive search uses it under the DRAM objective (``search.chunk_search``: tile vectors are
costed in waves, least bound first, and those whose bound exceeds a value found are never costed,
nor their unrolling chosen); it holds for the plain tile vector, not for hoisted boxes (a hoisted
operand is not reloaded by the loops it spans), nor for other layouts than the default.
"""

from __future__ import annotations

import numpy as np

from tileplan.dims import NDIMS, OPERANDS, RELEVANT

_REL = np.array([[d in RELEVANT[op] for d in range(NDIMS)] for op in OPERANDS], dtype=bool)

#: Relative margin taken off the bound, so float rounding never lifts it above the model's value.
ROUNDING_MARGIN = 1e-9


def _loop_masks(orders: np.ndarray, rel_mask: np.ndarray) -> np.ndarray:
    """(256, 8, k, 3) 0/1: for every pattern of dimensions with more than one trip (bit d: dimension
    d), which dimensions' trips multiply into each operand's reload factor under each order (the
    rule of ``cost.model.reload_factors_orders`` (with q the innermost position
    whose dimension indexes the operand and has more than one trip, the trips of the loops outside q
    that do not index it) with the relevance ``rel_mask`` (3, 8), applied to the pattern)."""
    patterns = (np.arange(256)[:, None] >> np.arange(NDIMS)[None, :]) & 1  # (256, 8): 1 where > 1 trip
    k = len(orders)
    out = np.zeros((256, NDIMS, k, 3), dtype=np.float64)
    position = np.argsort(orders, axis=1)  # (k, 8): where each dimension's loop is in each order
    for op in OPERANDS:
        rel = rel_mask[op][orders]  # (k, 8)
        many = patterns[:, orders] == 1  # (256, k, 8)
        q = np.where(rel[None] & many, np.arange(NDIMS), -1).max(axis=2)  # (256, k)
        counted = ~rel[None] & (np.arange(NDIMS)[None, None, :] < q[:, :, None])  # (256, k, 8 positions)
        # dimension d's entry is its position's: out[:, d, j, op] = counted[:, j, position[j, d]]
        out[..., op] = np.take_along_axis(counted, position[None], axis=2).transpose(0, 2, 1)
    return out


class _Masks:
    """:func:`_loop_masks` of one set of orders and relevance, per pattern with the orders that act
    alike on it merged (the least over orders is the least over their distinct reload factors)."""

    def __init__(self, orders: np.ndarray, rel_mask: np.ndarray) -> None:
        self.full = _loop_masks(orders, rel_mask)
        self.merged: dict[int, np.ndarray] = {}

    def of(self, pattern: int) -> np.ndarray:
        """(8, m * 3): the distinct columns of the pattern's masks, as (order, operand) pairs."""
        held = self.merged.get(pattern)
        if held is None:
            m = self.full[pattern]  # (8, k, 3)
            per_order = m.transpose(1, 0, 2).reshape(m.shape[1], -1)  # (k, 8 * 3) of 0/1
            _, first = np.unique(per_order.astype(np.int64) @ (1 << np.arange(per_order.shape[1])), return_index=True)
            per_order = per_order[np.sort(first)]
            # An order whose every operand multiplies a superset of another's trips is never the least.
            covers = np.all(per_order[:, None, :] <= per_order[None, :, :], axis=2)  # [j, i]: j's sets within i's
            np.fill_diagonal(covers, False)
            per_order = per_order[~covers.any(axis=0)]
            held = self.merged[pattern] = np.ascontiguousarray(
                per_order.reshape(-1, NDIMS, 3).transpose(1, 0, 2).reshape(NDIMS, -1))
        return held


_MASKS: dict[tuple[bytes, bytes], _Masks] = {}


def _masks(orders: np.ndarray, hoist: np.ndarray | None) -> _Masks:
    rel = _REL if hoist is None else _REL & ~np.asarray(hoist, dtype=bool)
    key = (orders.tobytes(), rel.tobytes())
    if key not in _MASKS:
        _MASKS[key] = _Masks(orders, rel)
    return _MASKS[key]


def prepare(orders: np.ndarray, hoist: np.ndarray | None = None) -> None:
    """Build the masks of ``orders`` (and ``hoist``) now (before worker processes are forked, so that
    they inherit them; each pattern's merged columns are still made where first used)."""
    _masks(np.asarray(orders, dtype=np.int64), hoist)


def row_dram_bytes(orders: np.ndarray, tiles: np.ndarray, shortest: np.ndarray, group_bytes: np.ndarray,
                   hoist: np.ndarray | None = None) -> np.ndarray:
    """(n,) DRAM bytes no mapping with the tile vectors ``tiles`` ((n, 8)) and one of the loop orders
    ``orders`` moves on a split whose shortest slices are ``shortest`` ((8,)) and whose operands'
    compulsory bytes over multicast groups are ``group_bytes`` (input, weight, output, partial sums:
    ``SplitBounds.group_bytes``), less a relative :data:`ROUNDING_MARGIN`. ``hoist`` ((3, 8) flags):
    the dimensions each operand's box spans whole; as in the model's reload rule, they do not index
    it (its box still covers its tensor in every sweep, so it still moves its compulsory bytes).

    The reload factors are products of trip counts: for each pattern of dimensions with more than
    one trip, which trips multiply in is fixed (:func:`_loop_masks`), so the rows of one pattern take
    them as ``exp(log trips @ mask)``, rounded to the integer they are (exact below 2**50)."""
    if not len(tiles):
        return np.zeros(0)
    masks = _masks(np.asarray(orders, dtype=np.int64), hoist)
    lmin = np.asarray(shortest, dtype=np.int64)
    trips = -(-lmin // np.minimum(np.asarray(tiles, dtype=np.int64), lmin))
    # Tile vectors of the same trip counts have the same bound: each distinct trip vector once.
    radix = np.cumprod(np.concatenate([[1], lmin[:-1] + 1]))
    if float(np.prod((lmin + 1).astype(np.float64))) < 2.0 ** 62:
        _, first, inverse = np.unique(trips @ radix, return_index=True, return_inverse=True)
    else:  # pragma: no cover - slices too long to pack into one integer
        _, first, inverse = np.unique(trips, axis=0, return_index=True, return_inverse=True)
    trips = trips[first]
    pattern = ((trips > 1) << np.arange(NDIMS)).sum(axis=1)
    g = np.asarray(group_bytes, dtype=np.float64)
    per_rho = np.array([g[0], g[1], 2 * g[3]])  # bytes per unit of each reload factor
    fixed = g[2] - 2 * g[3]  # outputs written once; partial sums go out and back (rho - 1) times
    # The distinct trip vectors sorted by pattern, so that each pattern's rows are one slice.
    order_of = np.argsort(pattern, kind="stable")
    pats = pattern[order_of]
    logs = np.log(trips[order_of].astype(np.float64))
    cuts = np.flatnonzero(np.diff(pats)) + 1
    by_pattern = np.empty(len(trips))
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(pats)], strict=True):
        rho = logs[a:b] @ masks.of(int(pats[a]))
        np.exp(rho, out=rho)
        np.rint(rho, out=rho)
        by_pattern[a:b] = (rho.reshape(b - a, -1, 3) @ per_rho).min(axis=1)
    out = np.empty(len(trips))
    out[order_of] = by_pattern + fixed
    out = out[inverse.reshape(-1)]
    result: np.ndarray = out * (1 - ROUNDING_MARGIN)
    return result


__all__ = ["ROUNDING_MARGIN", "prepare", "row_dram_bytes"]
