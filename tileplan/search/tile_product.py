"""Compiled loops of the exhaustive search's tile reductions: the Pareto front of a tile group
(``space._pareto``) and the feasible product of tile groups (``space.feasible_product``).

The front: rows sorted lexicographically, a row is kept when no row kept before it is at most it
in every feature (so exact duplicates keep the first); one pass with an early exit per comparison.

The product, as one depth-first walk.

The set is defined by two exact conditions on a complete combination (one candidate per group):
its boxes fit every memory on every core shape, and no group's candidate has a dominator that
would still fit in its place. The walk visits partial combinations in lexicographic order of the
picks (the order of the vectorised, breadth-first form) and drops a partial combination when it
overflows even with the smallest candidates still to come, or when one of its candidates has a
dominator that fits even with the largest still to come; both imply the exact conditions fail for
every completion, so the result is the same set in the same order. numba compiles the walk lazily
(only for big products) and caches it on disk, like ``cost.compiled``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

#: Products (number of combinations of the groups' candidates) at least this big take the compiled
#: walk; once it is loaded in this process or sits in numba's on-disk cache, every product does.
MIN_PRODUCT = 50_000
#: Pareto fronts of at least this many candidates take the compiled loop (the same rule).
MIN_FRONT = 2_000


def _fits(box: np.ndarray, weights: np.ndarray, mem_of: np.ndarray, has: np.ndarray, cap: np.ndarray) -> bool:
    """Whether ``box`` ((shapes, 3) elements) fits every memory on every shape."""
    for m in range(cap.shape[0]):
        for s in range(box.shape[0]):
            need = 0
            for op in range(3):
                if has[op] and mem_of[op] == m:
                    need += box[s, op] * weights[op]
            if need > cap[m]:
                return False
    return True


def _swap_fits(box: np.ndarray, foot: np.ndarray, start: int, pick: int, doms: np.ndarray, scale: np.ndarray,
               weights: np.ndarray, mem_of: np.ndarray, has: np.ndarray, cap: np.ndarray, tmp: np.ndarray) -> bool:
    """Whether a dominator of candidate ``pick`` (of the group starting at row ``start`` of
    ``foot``) fits in its place in ``box``, the groups not chosen yet taking ``scale``."""
    row = start + pick
    for k in range(doms.shape[1]):
        alt = doms[row, k]
        if alt < 0:
            break
        for s in range(box.shape[0]):
            for op in range(3):
                base = max(foot[row, s, op], 1)
                tmp[s, op] = box[s, op] // base * scale[s, op] * foot[start + alt, s, op]
        if _fits(tmp, weights, mem_of, has, cap):
            return True
    return False


def walk(foot: np.ndarray, starts: np.ndarray, doms: np.ndarray, lo: np.ndarray, hi: np.ndarray,
         weights: np.ndarray, mem_of: np.ndarray, has: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """(n, groups) picks of the feasible product, in lexicographic order.

    ``foot`` ((rows, shapes, 3)) stacks every group's candidate footprints, group g's at rows
    ``starts[g] .. starts[g + 1] - 1``; ``doms`` ((rows, width)) its dominators (indices within the
    group, -1 padded); ``lo[g]`` / ``hi[g]`` ((shapes, 3)) the products of the smallest / largest
    footprints of groups g and later."""
    n_groups = starts.shape[0] - 1
    shapes = foot.shape[1]
    part = np.ones((n_groups + 1, shapes, 3), dtype=np.int64)
    cur = np.full(n_groups, -1, dtype=np.int64)
    tmp = np.empty((shapes, 3), dtype=np.int64)
    probe = np.empty((shapes, 3), dtype=np.int64)
    out = np.empty((1024, n_groups), dtype=np.int64)
    bound = np.empty((shapes, 3), dtype=np.int64)
    others = np.empty((shapes, 3), dtype=np.int64)
    most = np.empty((shapes, 3), dtype=np.int64)
    mins = np.empty((n_groups, shapes, 3), dtype=np.int64)
    for g in range(n_groups):
        for s in range(shapes):
            for op in range(3):
                low = foot[starts[g], s, op]
                for c in range(starts[g], starts[g + 1]):
                    low = min(low, foot[c, s, op])
                mins[g, s, op] = low
    count = 0
    level = 0
    while level >= 0:
        cur[level] += 1
        size = starts[level + 1] - starts[level]
        if cur[level] >= size:
            cur[level] = -1
            level -= 1
            continue
        row = starts[level] + cur[level]
        for s in range(shapes):
            for op in range(3):
                part[level + 1, s, op] = part[level, s, op] * foot[row, s, op]
                probe[s, op] = part[level + 1, s, op] * lo[level + 1, s, op]
        if not _fits(probe, weights, mem_of, has, cap):
            continue
        # Every chosen group's swap, the groups still to come at their largest (at a complete
        # combination, ``hi`` is 1: the exact check).
        dominated = False
        for g in range(level + 1):  # the oldest group first: its swap fails most often
            if _swap_fits(part[level + 1], foot, starts[g], cur[g], doms, hi[level + 1], weights, mem_of, has,
                          cap, tmp):
                dominated = True
                break
        if dominated:
            continue
        if level < n_groups - 1:
            # Tighter than ``hi``: a completion that fits takes, from each group still to come, a
            # candidate that fits with the smallest of the others; their largest footprints bound it.
            empty = False
            for s in range(shapes):
                for op in range(3):
                    bound[s, op] = 1
            for g in range(level + 1, n_groups):
                for s in range(shapes):
                    for op in range(3):
                        rest = part[level + 1, s, op]
                        for h in range(level + 1, n_groups):
                            if h != g:
                                rest = rest * mins[h, s, op]
                        others[s, op] = rest
                        most[s, op] = 0
                any_fit = False
                for c in range(starts[g], starts[g + 1]):
                    for s in range(shapes):
                        for op in range(3):
                            probe[s, op] = others[s, op] * foot[c, s, op]
                    if _fits(probe, weights, mem_of, has, cap):
                        any_fit = True
                        for s in range(shapes):
                            for op in range(3):
                                most[s, op] = max(most[s, op], foot[c, s, op])
                if not any_fit:
                    empty = True
                    break
                for s in range(shapes):
                    for op in range(3):
                        bound[s, op] = bound[s, op] * most[s, op]
            if empty:
                continue
            for g in range(level + 1):
                if _swap_fits(part[level + 1], foot, starts[g], cur[g], doms, bound, weights, mem_of, has, cap, tmp):
                    dominated = True
                    break
            if dominated:
                continue
            level += 1
            continue
        if count == out.shape[0]:
            bigger = np.empty((2 * out.shape[0], n_groups), dtype=np.int64)
            bigger[:count] = out[:count]
            out = bigger
        out[count] = cur
        count += 1
    return out[:count].copy()


def front(features: np.ndarray) -> np.ndarray:
    """(m,) whether each row of ``features`` ((m, f), sorted lexicographically) is on the front: no
    row kept before it is at most it in every feature."""
    m, width = features.shape
    kept = np.empty(m, dtype=np.int64)
    n_kept = 0
    out = np.zeros(m, dtype=np.bool_)
    for i in range(m):
        dominated = False
        for a in range(n_kept):
            j = kept[a]
            below = True
            for c in range(width):
                if features[j, c] > features[i, c]:
                    below = False
                    break
            if below:
                dominated = True
                break
        if not dominated:
            kept[n_kept] = i
            n_kept += 1
            out[i] = True
    return out


@cache
def compiled_front() -> Callable[[np.ndarray], np.ndarray] | None:
    """:func:`front` compiled by numba (None when numba is missing or ``TILEPLAN_KERNEL=numpy``)."""
    from tileplan.cost import compiled

    if compiled.mode() == "numpy":
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
        return None
    return numba.njit(cache=True)(front)  # type: ignore[no-any-return]


@cache
def compiled_walk() -> Callable[..., np.ndarray] | None:
    """:func:`walk` compiled by numba (None when numba is missing or ``TILEPLAN_KERNEL=numpy``)."""
    from tileplan.cost import compiled

    if compiled.mode() == "numpy":
        return None
    try:
        import numba
        from numba.extending import overload
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
        return None
    for fn in (_fits, _swap_fits):  # compiled where ``walk`` calls them
        overload(fn, strict=False)(_same(fn))
    return numba.njit(cache=True)(walk)  # type: ignore[no-any-return]


def _same(fn: Callable[..., object]) -> Callable[..., Callable[..., object]]:
    def typer(*args: object) -> Callable[..., object]:
        return fn

    return typer


@cache
def _cached(name: str) -> bool:
    """Whether numba's on-disk cache seems to hold the compiled loop ``name``."""
    return any((Path(__file__).parent / "__pycache__").glob(f"tile_product.{name}-*.nbi"))


def wanted(combinations: float) -> bool:
    """Whether a product of ``combinations`` should take the compiled walk (``TILEPLAN_KERNEL``:
    ``numpy`` never, ``numba`` always, by default for big products or once it is compiled)."""
    return _wanted(combinations >= MIN_PRODUCT, "walk", compiled_walk)


def front_wanted(rows: int) -> bool:
    """Whether a Pareto front of ``rows`` candidates should take the compiled loop (as :func:`wanted`)."""
    return _wanted(rows >= MIN_FRONT, "front", compiled_front)


def _wanted(big: bool, name: str, loader: Any) -> bool:
    """``loader``: the ``functools.cache``-wrapped function returning the compiled loop."""
    from tileplan.cost import compiled

    mode = compiled.mode()
    if mode == "numpy":
        return False
    if mode == "auto" and not big and not (loader.cache_info().currsize or _cached(name)):
        return False
    return loader() is not None
