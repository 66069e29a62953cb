"""The feasible tile product: the tile vectors combining one candidate of every tile group
(``search.tile_groups``) that fit every on-chip memory on every core shape and admit no better swap,
built by the compiled depth-first walk of ``search.tile_product`` or by its vectorised breadth-first
twin here (same set, same order).
"""

from __future__ import annotations

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS, OPERANDS
from tileplan.search import tile_product
from tileplan.search.tile_groups import TileGroup


def feasible_product(problem: Problem, groups: list[TileGroup], chunk: int = 1 << 21, *,
                     compiled: bool | None = None) -> np.ndarray:
    """(n, 8) tile vectors of the combinations of group candidates that fit every on-chip memory on
    every core shape and in which no group's candidate could be swapped for one that is at least as
    good in every cost quantity and still fit (such a swap never makes any objective worse), in
    lexicographic order of the candidates' indices, the groups taken largest first.

    Built group by group: partial combinations that overflow a memory even with the smallest
    remaining candidates are dropped, and so are those whose newest candidate has a better swap
    that fits even with the largest remaining candidates. It takes the compiled walk of
    ``search.tile_product`` when it is ready (same set, same order; ``compiled`` forces the choice)."""
    # Largest groups first (the order of the result); the vectorised form builds them in this order:
    # when the small ones come last, dominated partial combinations are dropped before they multiply.
    groups = sorted(groups, key=lambda g: -len(g.tiles))
    prec = problem.precision
    elem_bytes = np.array([prec.input * problem.layer.input_count, prec.weight, prec.psum], dtype=np.int64)
    mem_of = np.array(problem.memory_of_operand)
    factor = 2 if problem.arch.double_buffering else 1
    cap = problem.capacity_bytes
    weights = elem_bytes * factor
    if compiled is None:
        compiled = tile_product.wanted()
    if compiled and tile_product.compiled_walk() is not None:
        rows = _compiled_rows(problem, groups, weights, mem_of, cap)
    else:
        shapes = groups[0].footprint.shape[1]
        mins = [g.footprint.min(axis=0) for g in groups]
        maxs = [g.footprint.max(axis=0) for g in groups]
        lo = [np.ones((shapes, 3), dtype=np.int64) for _ in range(len(groups) + 1)]
        hi = [np.ones((shapes, 3), dtype=np.int64) for _ in range(len(groups) + 1)]
        for i in range(len(groups) - 1, -1, -1):
            lo[i] = lo[i + 1] * mins[i]
            hi[i] = hi[i + 1] * maxs[i]
        rows = _vectorised_rows(problem, groups, lo, hi, weights, mem_of, cap, chunk)
    tiles = np.ones((len(rows), NDIMS), dtype=np.int64)
    for i, g in enumerate(groups):
        for j, d in enumerate(g.dims):
            tiles[:, d] = g.tiles[rows[:, i], j]
    return tiles


def _compiled_rows(problem: Problem, groups: list[TileGroup], weights: np.ndarray, mem_of: np.ndarray,
                   cap: np.ndarray) -> np.ndarray:
    """(n, groups) picks of the feasible product by ``search.tile_product``'s compiled walk, sorted
    lexicographically."""
    walk = tile_product.compiled_walk()
    assert walk is not None
    starts = np.concatenate([[0], np.cumsum([len(g.tiles) for g in groups])]).astype(np.int64)
    foot = np.ascontiguousarray(np.concatenate([g.footprint for g in groups]), dtype=np.int64)
    width = max(g.doms.shape[1] for g in groups)
    doms = np.full((len(foot), width), -1, dtype=np.int64)
    for g, start in zip(groups, starts, strict=False):
        doms[start:start + len(g.doms), :g.doms.shape[1]] = g.doms
    has = np.array(problem.has_operand, dtype=np.bool_)
    rows = np.asarray(walk(foot, starts, doms, weights.astype(np.int64), mem_of.astype(np.int64), has,
                           cap.astype(np.int64)))
    if len(rows) > 1:
        rows = rows[_lex_order(rows, [len(g.tiles) for g in groups])]
    return rows


def _lex_order(rows: np.ndarray, sizes: list[int]) -> np.ndarray:
    """The permutation sorting ``rows`` ((n, k) picks, column j below ``sizes[j]``) lexicographically,
    first column first (``np.lexsort`` of the reversed columns): one stable argsort of the picks packed
    into one integer in mixed radix ``sizes`` when that fits in 62 bits, else ``np.lexsort``."""
    if float(np.prod([float(s) for s in sizes])) >= 2.0 ** 62:  # pragma: no cover - groups too large to pack
        return np.lexsort(rows.T[::-1])
    radix = np.cumprod([1, *sizes[:0:-1]])[::-1].astype(np.int64)  # column j weighs the sizes after it
    return np.argsort(rows @ radix, kind="stable")


def _vectorised_rows(problem: Problem, groups: list[TileGroup], lo: list[np.ndarray], hi: list[np.ndarray],
                     weights: np.ndarray, mem_of: np.ndarray, cap: np.ndarray, chunk: int) -> np.ndarray:
    """(n, groups) picks of the feasible product, built breadth-first over whole arrays."""
    shapes = groups[0].footprint.shape[1]
    rows = np.zeros((1, 0), dtype=np.int64)
    partial = np.ones((1, shapes, 3), dtype=np.int64)
    for i, g in enumerate(groups):
        m = len(g.tiles)
        new_rows = []
        new_partial = []
        step = max(1, chunk // max(m, 1))
        for start in range(0, len(rows), step):
            r = rows[start:start + step]
            cand = (partial[start:start + step, None] * g.footprint[None]).reshape(-1, shapes, 3)
            pick = np.tile(np.arange(m), len(r))
            ok = _fits(problem, cand * lo[i + 1][None], weights, mem_of, cap)
            cand, pick, parent = cand[ok], pick[ok], np.repeat(np.arange(start, start + len(r)), m)[ok]
            better = _swap_fits(problem, g, pick, cand, hi[i + 1], weights, mem_of, cap)
            keep = ~better
            if np.any(keep):
                new_rows.append(np.concatenate([rows[parent[keep]], pick[keep, None]], axis=1))
                new_partial.append(cand[keep])
        if not new_rows:
            return np.zeros((0, len(groups)), dtype=np.int64)
        rows = np.concatenate(new_rows)
        partial = np.concatenate(new_partial)
    # Exact check of every group now that the combinations are complete.
    keep = np.ones(len(rows), dtype=bool)
    ones = np.ones((shapes, 3), dtype=np.int64)
    for i, g in enumerate(groups[:-1]):
        keep &= ~_swap_fits(problem, g, rows[:, i], partial, ones, weights, mem_of, cap)
    return rows[keep]


def _fits(problem: Problem, boxes: np.ndarray, weights: np.ndarray, mem_of: np.ndarray,
          cap: np.ndarray) -> np.ndarray:
    """Whether boxes (n, shapes, 3 operands; elements) fit every memory on every shape."""
    ok = np.ones(len(boxes), dtype=bool)
    for m in range(len(cap)):
        ops = [op for op in OPERANDS if problem.has_operand[op] and mem_of[op] == m]
        if not ops:
            continue
        need = boxes[:, :, ops[0]] * weights[ops[0]]  # bytes per shape (int64: far from overflow)
        for op in ops[1:]:
            need = need + boxes[:, :, op] * weights[op]
        ok &= need.max(axis=1) <= cap[m] if need.shape[1] > 1 else need[:, 0] <= cap[m]
    return ok


def _swap_fits(problem: Problem, g: TileGroup, pick: np.ndarray, boxes: np.ndarray, scale: np.ndarray,
               weights: np.ndarray, mem_of: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """For combinations whose group-g candidate is ``pick`` and whose boxes are ``boxes`` (times
    ``scale`` for groups not chosen yet), whether some dominator of ``pick`` would still fit."""
    out = np.zeros(len(pick), dtype=bool)
    table = g.doms
    if len(pick) == 0:
        return out
    width = table.shape[1]
    base = np.maximum(g.footprint[pick], 1)
    rest = boxes // base * scale[None]
    for k in range(width):
        alt = table[pick, k]
        has = alt >= 0
        if not np.any(has):
            continue
        idx = np.nonzero(has)[0]
        swapped = rest[idx] * g.footprint[alt[idx]]
        out[idx] |= _fits(problem, swapped, weights, mem_of, cap)
    return out
