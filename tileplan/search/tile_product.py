"""Compiled loops of the exhaustive search's tile reductions: the Pareto front of a tile group
(``tile_groups._pareto``), each candidate's dominators (``tile_groups._dominators``) and the feasible product
of tile groups (``feasible_tiles.feasible_product``).

The front: rows sorted lexicographically, a row is kept when no row kept before it is at most it
in every feature (so exact duplicates keep the first); one pass with an early exit per comparison.

The dominators: per candidate, the candidates at least as good in every cost quantity (identical
ones only when earlier), reduced to those whose footprint no other of them beats; pairwise loops
with early exits, instead of (m, m, features) boolean arrays.

The product, as one depth-first walk.

The set is defined by two exact conditions on a complete combination (one candidate per group):
its boxes fit every memory on every core shape, and no group's candidate has a dominator that
would still fit in its place. Every memory's need on a core shape is a sum over operands of
bytes per element times a product of the groups' footprint factors, so once every group but one
is chosen, both conditions are tests of one candidate of the remaining group against a few
coefficient vectors (its own fit, and one per dominator of a chosen candidate; its own
dominators fit when they are among the candidates that fit). The walk therefore chooses every
group but the last one depth first, dropping a partial combination when it overflows even with
the smallest candidates still to come, or when one of its candidates has a dominator that fits
even with the largest still to come (both imply the exact conditions fail for every completion),
and tests the last group's candidates whole. Groups of one candidate are folded into the product
up front. When the last group's footprints never shrink along its candidates (a single dimension:
tile sizes ascending), the candidates that fit form a prefix and so do those that a chosen
candidate's dominator kills: one bisection per coefficient vector bounds the survivors. So the
last group is the largest such group when there is one, and the result is sorted back to the
lexicographic order of the picks afterwards (``feasible_tiles._compiled_rows``): the same set in the same
order as the vectorised, breadth-first form. They run compiled when ``cost.jit`` says so (by default
once numba's on-disk cache holds them), like ``cost.compiled``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from tileplan.cost import aot, jit


def _fits_coef(amat: np.ndarray, foot: np.ndarray, row: int, cap: np.ndarray, ops: np.ndarray) -> bool:
    """Whether ``sum_op amat[m, s, op] * foot[row, s, op] <= cap[m]`` on every memory ``m`` and shape ``s``
    (``amat``: bytes per element times the footprint factors of the groups already chosen; ``ops[m]``
    the operands held in memory ``m``, -1 padded)."""
    for m in range(amat.shape[0]):
        if ops[m, 0] < 0:
            continue
        for s in range(amat.shape[1]):
            need = 0
            for k in range(3):
                op = ops[m, k]
                if op < 0:
                    break
                need += amat[m, s, op] * foot[row, s, op]
            if need > cap[m]:
                return False
    return True


def _box_fits(coef: np.ndarray, box: np.ndarray, cap: np.ndarray, ops: np.ndarray) -> bool:
    """Whether ``box`` ((shapes, 3) elements) fits every memory on every shape (``coef``: (memories, 3)
    bytes per element of each operand held in each memory; ``ops`` as in :func:`_fits_coef`)."""
    for m in range(coef.shape[0]):
        if ops[m, 0] < 0:
            continue
        for s in range(box.shape[0]):
            need = 0
            for k in range(3):
                op = ops[m, k]
                if op < 0:
                    break
                need += coef[m, op] * box[s, op]
            if need > cap[m]:
                return False
    return True


def _first_misfit(amat: np.ndarray, foot: np.ndarray, first: int, end: int, cap: np.ndarray, ops: np.ndarray) -> int:
    """The first row in ``first .. end - 1`` of ``foot`` that does not fit under ``amat`` (``end`` if all
    do), by bisection: the rows' footprints never shrink, so the rows that fit are a prefix. The first
    row is tried first (often nothing fits)."""
    if first >= end or not _fits_coef(amat, foot, first, cap, ops):
        return first
    a = first + 1
    b = end
    while a < b:
        mid = (a + b) // 2
        if _fits_coef(amat, foot, mid, cap, ops):
            a = mid + 1
        else:
            b = mid
    return a


def _swap_coef(amat: np.ndarray, coef: np.ndarray, part: np.ndarray, foot: np.ndarray, row: int, alt: int) -> None:
    """``amat`` for ``part`` with candidate ``row``'s footprint replaced by candidate ``alt``'s (``part``
    holds ``row``'s footprint as a factor; a zero factor stays zero, as ``part // max(foot, 1)``)."""
    for m in range(amat.shape[0]):
        for s in range(amat.shape[1]):
            for op in range(3):
                amat[m, s, op] = coef[m, op] * (part[s, op] // max(foot[row, s, op], 1) * foot[alt, s, op])


def _zero_swap_fits(coef: np.ndarray, part: np.ndarray, foot: np.ndarray, row: int, alt: int, cap: np.ndarray,
                    ops: np.ndarray, tmp: np.ndarray) -> bool:
    """Whether candidate ``alt`` fits in place of ``row`` in the box ``part * foot[row]``, computed as
    ``box // max(foot[row], 1) * foot[alt]`` (a zero factor of ``row`` keeps its component zero)."""
    for s in range(part.shape[0]):
        for op in range(3):
            tmp[s, op] = part[s, op] * foot[row, s, op] // max(foot[row, s, op], 1) * foot[alt, s, op]
    return _box_fits(coef, tmp, cap, ops)


def _emit(out: np.ndarray, count: int, cur: np.ndarray, real: np.ndarray, n: int, last: int,
          pick: int) -> np.ndarray:
    """``out`` with row ``count`` set to the chosen picks (``pick`` for the last group, 0 for groups of
    one candidate), grown when full."""
    if count == out.shape[0]:
        bigger = np.empty((2 * out.shape[0], out.shape[1]), dtype=np.int64)
        bigger[:count] = out[:count]
        out = bigger
    for g in range(out.shape[1]):
        out[count, g] = 0
    for i in range(n - 1):
        out[count, real[i]] = cur[i]
    out[count, last] = pick
    return out


def walk(foot: np.ndarray, starts: np.ndarray, doms: np.ndarray, weights: np.ndarray, mem_of: np.ndarray,
         has: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """(n, groups) picks of the feasible product, in the walk's own order (sort them lexicographically).

    ``foot`` ((rows, shapes, 3) elements) stacks every group's candidate footprints, group g's at
    rows ``starts[g] .. starts[g + 1] - 1``; ``doms`` ((rows, width)) their dominators (indices within
    the group, -1 padded); ``weights`` (3,) bytes per element of each operand (doubled when double
    buffered), ``mem_of`` (3,) the memory holding it, ``has`` (3,) whether it moves data, ``cap``
    (memories,) the memories' sizes in bytes."""
    n_all = starts.shape[0] - 1
    shapes = foot.shape[1]
    n_mem = cap.shape[0]
    coef = np.zeros((n_mem, 3), dtype=np.int64)  # bytes per element of each operand in each memory
    ops = np.full((n_mem, 3), -1, dtype=np.int64)  # the operands each memory holds
    for op in range(3):
        if has[op]:
            coef[mem_of[op], op] = weights[op]
            k = 0
            while ops[mem_of[op], k] >= 0:
                k += 1
            ops[mem_of[op], k] = op
    amat = np.empty((n_mem, shapes, 3), dtype=np.int64)
    out = np.empty((1024, n_all), dtype=np.int64)
    # Groups of one candidate: always chosen, their footprints folded into the root product.
    real = np.empty(n_all, dtype=np.int64)
    n = 0
    root = np.ones((shapes, 3), dtype=np.int64)
    for g in range(n_all):
        if starts[g + 1] - starts[g] > 1:
            real[n] = g
            n += 1
        else:
            for s in range(shapes):
                for op in range(3):
                    root[s, op] *= foot[starts[g], s, op]
    if n == 0:  # one combination: it only has to fit (a single candidate has no dominator)
        count = 0
        if _box_fits(coef, root, cap, ops):
            for g in range(n_all):
                out[0, g] = 0
            count = 1
        return out[:count].copy()
    # The last group: the largest one whose footprints never shrink along its candidates, if any.
    mono = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        g = real[i]
        ordered = True
        for c in range(starts[g] + 1, starts[g + 1]):
            for s in range(shapes):
                for op in range(3):
                    if foot[c, s, op] < foot[c - 1, s, op]:
                        ordered = False
        mono[i] = ordered
    best = 0
    for i in range(1, n):
        size = starts[real[i] + 1] - starts[real[i]]
        top = starts[real[best] + 1] - starts[real[best]]
        if (mono[i] and not mono[best]) or (mono[i] == mono[best] and size > top):
            best = i
    last = real[best]
    last_mono = mono[best]
    for i in range(best, n - 1):
        real[i] = real[i + 1]
    real[n - 1] = last
    # lo[i] / hi[i]: products of the smallest / largest footprints of the groups chosen after level i - 1.
    lo = np.ones((n + 1, shapes, 3), dtype=np.int64)
    hi = np.ones((n + 1, shapes, 3), dtype=np.int64)
    for i in range(n - 1, -1, -1):
        g = real[i]
        for s in range(shapes):
            for op in range(3):
                small = foot[starts[g], s, op]
                large = small
                for c in range(starts[g], starts[g + 1]):
                    small = min(small, foot[c, s, op])
                    large = max(large, foot[c, s, op])
                lo[i, s, op] = lo[i + 1, s, op] * small
                hi[i, s, op] = hi[i + 1, s, op] * large
    part = np.ones((n + 1, shapes, 3), dtype=np.int64)
    for s in range(shapes):
        for op in range(3):
            part[0, s, op] = root[s, op]
    cur = np.full(n, -1, dtype=np.int64)
    first = starts[last]
    size_last = starts[last + 1] - first
    # Candidates of the last group with a zero footprint factor: their own swaps are tested as written
    # (a zero factor of the pick zeroes the swapped box), not through ``fits`` of the dominator.
    zero = np.zeros(size_last, dtype=np.bool_)
    for c in range(size_last):
        for s in range(shapes):
            for op in range(3):
                if foot[first + c, s, op] == 0:
                    zero[c] = True
    fits = np.zeros(size_last, dtype=np.bool_)
    kill = np.zeros(size_last, dtype=np.bool_)
    tmp = np.empty((shapes, 3), dtype=np.int64)
    count = 0
    level = 0
    while level >= 0:
        if level == n - 1:
            # Every group but the last is chosen (``part[level]``): test the last group's candidates.
            P = part[level]
            for m in range(n_mem):
                for s in range(shapes):
                    for op in range(3):
                        amat[m, s, op] = coef[m, op] * P[s, op]
            if last_mono:
                end = _first_misfit(amat, foot, first, first + size_last, cap, ops) - first
                begin = 0  # candidates before ``begin`` leave room for a chosen candidate's dominator
                for i in range(n - 1):
                    row = starts[real[i]] + cur[i]
                    for k in range(doms.shape[1]):
                        alt = doms[row, k]
                        if alt < 0 or begin >= end:
                            break
                        _swap_coef(amat, coef, P, foot, row, starts[real[i]] + alt)
                        begin = _first_misfit(amat, foot, first + begin, first + end, cap, ops) - first
                for c in range(begin, end):
                    dominated = False
                    for k in range(doms.shape[1]):
                        alt = doms[first + c, k]
                        if alt < 0:
                            break
                        if zero[c]:
                            dominated = _zero_swap_fits(coef, P, foot, first + c, first + alt, cap, ops, tmp)
                        else:
                            dominated = alt < end
                        if dominated:
                            break
                    if not dominated:
                        out = _emit(out, count, cur, real, n, last, c)
                        count += 1
                level -= 1
                continue
            for c in range(size_last):
                fits[c] = _fits_coef(amat, foot, first + c, cap, ops)
                kill[c] = not fits[c]
            for c in range(size_last):
                if not fits[c]:
                    continue
                for k in range(doms.shape[1]):
                    alt = doms[first + c, k]
                    if alt < 0:
                        break
                    if zero[c]:
                        hit = _zero_swap_fits(coef, P, foot, first + c, first + alt, cap, ops, tmp)
                    else:
                        hit = fits[alt]
                    if hit:
                        kill[c] = True
                        break
            for i in range(n - 1):
                row = starts[real[i]] + cur[i]
                for k in range(doms.shape[1]):
                    alt = doms[row, k]
                    if alt < 0:
                        break
                    _swap_coef(amat, coef, P, foot, row, starts[real[i]] + alt)
                    for c in range(size_last):
                        if not kill[c] and _fits_coef(amat, foot, first + c, cap, ops):
                            kill[c] = True
            for c in range(size_last):
                if not kill[c]:
                    out = _emit(out, count, cur, real, n, last, c)
                    count += 1
            level -= 1
            continue
        cur[level] += 1
        g = real[level]
        if cur[level] >= starts[g + 1] - starts[g]:
            cur[level] = -1
            level -= 1
            continue
        row = starts[g] + cur[level]
        for s in range(shapes):
            for op in range(3):
                part[level + 1, s, op] = part[level, s, op] * foot[row, s, op]
                tmp[s, op] = part[level + 1, s, op] * lo[level + 1, s, op]
        if not _box_fits(coef, tmp, cap, ops):
            continue  # overflows even with the smallest candidates still to come
        # A chosen candidate's dominator that fits even with the largest candidates still to come.
        dominated = False
        for i in range(level + 1):
            ri = starts[real[i]] + cur[i]
            for k in range(doms.shape[1]):
                alt = doms[ri, k]
                if alt < 0:
                    break
                for s in range(shapes):
                    for op in range(3):
                        tmp[s, op] = part[level + 1, s, op] // max(foot[ri, s, op], 1) * hi[level + 1, s, op] * \
                            foot[starts[real[i]] + alt, s, op]
                if _box_fits(coef, tmp, cap, ops):
                    dominated = True
                    break
            if dominated:
                break
        if not dominated:
            level += 1
    return out[:count].copy()


def dominators(cost: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """(m, width) each candidate's dominators, ascending, -1 padded (width >= 1): the candidates with
    every cost quantity (``cost``, (m, features)) at most its own, and not identical or identical
    with a lower index, reduced to those whose footprint (``fp``, (m, f)) no other of them beats
    (at most it everywhere, below it somewhere)."""
    m, n_cost = cost.shape
    n_fp = fp.shape[1]
    cand = np.empty(m, dtype=np.int64)
    out = np.full((m, 4), -1, dtype=np.int64)
    width = 1
    for a in range(m):
        n = 0
        for b in range(m):
            if b == a:
                continue
            below = True
            same = True
            for f in range(n_cost):
                if cost[b, f] > cost[a, f]:
                    below = False
                    break
                if cost[b, f] != cost[a, f]:
                    same = False
            if below and (not same or b < a):
                cand[n] = b
                n += 1
        k = 0
        for jj in range(n):
            j = cand[jj]
            beaten = False
            for ii in range(n):
                i = cand[ii]
                if i == j:
                    continue
                at_most = True
                less = False
                for f in range(n_fp):
                    if fp[i, f] > fp[j, f]:
                        at_most = False
                        break
                    if fp[i, f] < fp[j, f]:
                        less = True
                if at_most and less:
                    beaten = True
                    break
            if not beaten:
                if k == out.shape[1]:
                    bigger = np.full((m, 2 * out.shape[1]), -1, dtype=np.int64)
                    bigger[:, :out.shape[1]] = out
                    out = bigger
                out[a, k] = j
                k += 1
        width = max(width, k)
    return out[:, :width].copy()


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


#: The search's loops built at install as an extension module (``cost.aot``); they allocate their
#: results, so numba's runtime is linked in.
EXTENSION = aot.Extension("search_aot", __name__, ("walk", "front", "dominators"), (__name__,), nrt=True)
#: numba's error model of the loops (its default; the extension is compiled with it too).
ERROR_MODEL = "python"


def built() -> dict[str, aot.Loop] | None:
    """The search's loops from its extension (``cost.jit.extension``), or None."""
    return jit.extension(EXTENSION, {"walk": numba_walk, "front": numba_front, "dominators": numba_dominators})


def compiled_front() -> Callable[[np.ndarray], np.ndarray] | None:
    """:func:`front` compiled: the extension's, else numba's (None under ``TILEPLAN_KERNEL=numpy``)."""
    ext = built()
    return ext["front"] if ext is not None else numba_front()


def compiled_walk() -> Callable[..., np.ndarray] | None:
    """:func:`walk` compiled: the extension's, else numba's (None under ``TILEPLAN_KERNEL=numpy``)."""
    ext = built()
    return ext["walk"] if ext is not None else numba_walk()


def compiled_dominators() -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """:func:`dominators` compiled: the extension's, else numba's (None under ``TILEPLAN_KERNEL=numpy``)."""
    ext = built()
    return ext["dominators"] if ext is not None else numba_dominators()


@cache
def numba_front() -> Callable[[np.ndarray], np.ndarray] | None:
    """:func:`front` compiled by numba (None when numba is missing or ``TILEPLAN_KERNEL=numpy``)."""
    if jit.mode() == "numpy":
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
        return None
    return numba.njit(cache=True)(front)  # type: ignore[no-any-return]


@cache
def numba_walk() -> Callable[..., np.ndarray] | None:
    """:func:`walk` compiled by numba (None when numba is missing or ``TILEPLAN_KERNEL=numpy``)."""
    if jit.mode() == "numpy":
        return None
    try:
        import numba
        from numba.extending import overload
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
        return None
    for fn in (_fits_coef, _box_fits, _first_misfit, _swap_coef, _zero_swap_fits, _emit):  # compiled where called
        overload(fn, strict=False)(_same(fn))
    return numba.njit(cache=True)(walk)  # type: ignore[no-any-return]


@cache
def numba_dominators() -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """:func:`dominators` compiled by numba (None when numba is missing or ``TILEPLAN_KERNEL=numpy``)."""
    if jit.mode() == "numpy":
        return None
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
        return None
    return numba.njit(cache=True)(dominators)  # type: ignore[no-any-return]


def _same(fn: Callable[..., object]) -> Callable[..., Callable[..., object]]:
    def typer(*args: object) -> Callable[..., object]:
        return fn

    return typer


def wanted() -> bool:
    """Whether the feasible product takes the compiled walk now (``cost.jit.ready``)."""
    return jit.ready(walk, numba_walk, built)


def front_wanted() -> bool:
    """Whether Pareto fronts take the compiled loop now."""
    return jit.ready(front, numba_front, built)


def dominators_wanted() -> bool:
    """Whether dominator lists take the compiled loop now."""
    return jit.ready(dominators, numba_dominators, built)


def load_cached() -> None:
    """Load this module's extension, or else its compiled loops that numba's on-disk cache holds (never
    compiling; nothing under ``TILEPLAN_KERNEL=numpy``), e.g. before forking worker processes."""
    if built() is not None:
        return
    for fn, loader in ((walk, numba_walk), (front, numba_front), (dominators, numba_dominators)):
        if jit.on_disk(fn) and (dispatcher := loader()) is not None:
            jit.load(dispatcher, fn)
