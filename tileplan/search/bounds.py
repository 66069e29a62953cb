"""A tighter lower bound for one core split: the search relaxed to trip counts.

For any mapping of a split, take the hypothetical core whose slice is the smallest along every
dimension. Its trip counts, and so every operand's reload factor, are no larger than on any real
core; its tiles need no more memory; and every operand moves at least its compulsory bytes per
sweep, in bursts of at most ``burst`` bytes. Minimising reload factor x compulsory bytes over the
16 loop-order classes and every trip count whose smallest tile fits therefore bounds the DRAM
traffic (bytes, and bytes / bandwidth + bursts x latency) of every mapping of the split.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from tileplan.arrays import distinct
from tileplan.cost.model import reload_factors_orders
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, Dim, Operand


@cache
def _n_values(length: int) -> np.ndarray:
    """Smallest tile for each achievable trip count of a ``length``-long slice (ascending; read-only,
    cached per length)."""
    tiles = distinct(-(-length // np.arange(1, length + 1, dtype=np.int64)))
    tiles.setflags(write=False)
    return tiles


def min_dram_bytes(problem: Problem, lmin: tuple[int, ...], orders: np.ndarray, group_bytes: np.ndarray) -> float:
    """Least of ``sum_X rho_X * group_bytes[X]`` over orders and tiles that fit the smallest core
    (``lmin``: the shortest slice of the split along every dimension).

    ``group_bytes[X]``: compulsory bytes of X summed over its multicast groups (output: the final
    write; partial sums add ``2 (V - 1)`` of ``group_bytes[3]``). The reload factors of the minimal
    fitting trip counts depend only on the smallest core, so they are cached per problem.
    """
    lmin = tuple(int(x) for x in lmin)
    cache: dict[tuple[int, ...], np.ndarray] = problem.__dict__.setdefault("_frontier_rho", {})
    if lmin not in cache:
        cache[lmin] = _frontier_rho(problem, lmin, orders)
    rho = cache[lmin]  # (m, orders, 3)
    if rho.size == 0:
        return float("inf")
    total = (rho[:, :, 0] * group_bytes[0] + rho[:, :, 1] * group_bytes[1] + group_bytes[2]
             + 2 * (rho[:, :, 2] - 1) * group_bytes[3])
    return float(total.min())


def _frontier_rho(problem: Problem, lmin: tuple[int, ...], orders: np.ndarray) -> np.ndarray:
    """(m, orders, 3) reload factors of every minimal fitting trip-count vector of a core of
    ``lmin``-long slices (fewer trips never raise a reload factor, so the others cannot be least)."""
    per_dim = [_n_values(lmin[d]) for d in DIMS]
    prec = problem.precision
    arch = problem.arch
    factor = 2 if arch.double_buffering else 1
    cap = problem.capacity_bytes
    mem_of = problem.memory_of_operand
    has = problem.has_operand
    pad_h = problem.layer.pad[0] + problem.layer.pad[1]
    pad_w = problem.layer.pad[2] + problem.layer.pad[3]
    lmin_arr = np.array(lmin, dtype=np.int64)

    def need(t: list[np.ndarray]) -> list[np.ndarray]:
        """Per memory, the bytes the tiles ``t[d]`` (one array per dimension, broadcast against each
        other) occupy (double-buffered where the arch is)."""
        rows = np.maximum(0, np.minimum(problem.in_h, (t[Dim.P] - 1) * problem.stride[0]
                                        + (t[Dim.R] - 1) * problem.dilation[0] + 1 - pad_h))
        cols = np.maximum(0, np.minimum(problem.in_w, (t[Dim.Q] - 1) * problem.stride[1]
                                        + (t[Dim.S] - 1) * problem.dilation[1] + 1 - pad_w))
        boxes = {
            Operand.INPUT: t[Dim.N] * t[Dim.G] * t[Dim.C] * rows * cols * prec.input * problem.layer.input_count,
            Operand.WEIGHT: t[Dim.G] * t[Dim.K] * t[Dim.C] * t[Dim.R] * t[Dim.S] * prec.weight,
            Operand.OUTPUT: t[Dim.N] * t[Dim.G] * t[Dim.K] * t[Dim.P] * t[Dim.Q] * prec.psum,
        }
        out: list[np.ndarray] = [np.zeros((), dtype=np.int64) for _ in cap]
        for op in OPERANDS:
            if has[op]:
                out[mem_of[op]] = out[mem_of[op]] + boxes[op] * factor
        return out

    # Every memory's need is linear in the C tile (input and weight boxes grow with it, the output box
    # does not), so for each choice of the other tiles the largest fitting C tile is direct: only it
    # can be minimal.
    chan = per_dim[Dim.C]
    others = [d for d in DIMS if d is not Dim.C]
    sizes = [len(per_dim[d]) for d in others]

    def best_c(first: int) -> np.ndarray:
        """Index into ``chan`` of the largest fitting C tile (-1: none fits) for every choice of the
        other tiles whose outermost is its ``first`` value, over their grid (shaped like it)."""
        shape = (1, *sizes[1:])
        # every other dimension's tiles along its own axis of the grid (broadcast, never materialised)
        t = [np.zeros((), dtype=np.int64)] * NDIMS
        for a, d in enumerate(others):
            values = per_dim[d][first:first + 1] if a == 0 else per_dim[d]
            t[d] = values.astype(np.int64).reshape([-1 if b == a else 1 for b in range(len(others))])
        base = need(t)
        t[Dim.C] = np.ones((), dtype=np.int64)
        grown = need(t)
        least = None
        for m in range(len(cap)):
            slope = grown[m] - base[m]
            room = cap[m] - base[m]
            with np.errstate(divide="ignore", invalid="ignore"):
                limit = np.where(slope > 0, room // np.where(slope > 0, slope, 1), np.where(room >= 0, chan[-1], -1))
            limit = np.broadcast_to(limit, shape)
            least = limit if least is None else np.minimum(least, limit)
        assert least is not None
        return np.searchsorted(chan, least.ravel(), side="right").reshape(shape) - 1

    # Fewer trips never raise a reload factor: only the fitting trip counts none of whose dimensions
    # could take the next larger tile and still fit can be minimal. By linearity again, the next
    # larger tile along d fits with this C tile exactly when the neighbour's largest C tile is at
    # least this one: a comparison of neighbours on the grid (chunks over the outermost dimension
    # bound memory; its neighbour is the next chunk).
    found: list[np.ndarray] = []
    following: np.ndarray | None = best_c(0)
    for first in range(sizes[0]):
        assert following is not None
        here = following
        following = best_c(first + 1) if first + 1 < sizes[0] else None
        keep = here >= 0
        if following is not None:
            keep &= ~(following >= here)
        for a in range(1, len(others)):
            if sizes[a] < 2:
                continue
            lower = [slice(None)] * len(others)
            upper = [slice(None)] * len(others)
            lower[a], upper[a] = slice(0, -1), slice(1, None)
            keep[tuple(lower)] &= ~(here[tuple(upper)] >= here[tuple(lower)])
        rows = np.flatnonzero(keep)
        if not len(rows):
            continue
        t = np.zeros((len(rows), NDIMS), dtype=np.int64)
        index = list(np.unravel_index(rows, here.shape))
        index[0] = index[0] + first
        for d, i in zip(others, index, strict=True):
            t[:, d] = per_dim[d][i]
        t[:, Dim.C] = chan[here.ravel()[rows]]
        found.append(reload_factors_orders(orders, -(-lmin_arr // t)))
    if not found:
        return np.zeros((0, len(orders), 3))
    return np.concatenate(found).astype(np.float64)
