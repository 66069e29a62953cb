"""The mapping space of one layer (core splits, loop-order classes, spatial unrollings) and the
provably safe reductions the exhaustive search uses.

Space: every core split (factors per splittable dimension whose product fits the clusters and the
cores of a cluster), every integer tile size of every dimension, every loop order, every spatial
unrolling the PE array allows. Reductions, each of which keeps at least one optimal mapping:

* Loop orders: the cost depends on the order only through which operand is stationary over which
  innermost loops (the model's reload rule). The 16 :func:`class_orders` realise every such class.
* Spatial unrolling: only compute cycles depend on it, and ``ceil(t/u)`` never grows with ``u``, so
  only *maximal* unroll tuples are kept; per candidate the fastest one is taken.
* Tile sizes: every cost is a sum of products of non-negative per-dimension quantities (trips,
  extents, burst sums, compute sums; see ``cost.tables``), and the objective grows with each. A
  tile size whose quantities are all >= another's (for every core shape) can never do better, so
  it is dropped (per-dimension Pareto fronts, ``search.tile_groups``; input rows/columns are treated
  jointly with P,R and Q,S). Combinations that overflow an on-chip memory are never built
  (``search.feasible_tiles``).
"""

from __future__ import annotations

from itertools import combinations, product

import numpy as np

from tileplan.arch.spec import AxisMode
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim
from tileplan.search.memo import capacity_free_key, memo

_IRRELEVANT = {op: [d for d in DIMS if d not in RELEVANT[op]] for op in OPERANDS}


def class_orders() -> np.ndarray:
    """(16, 8) loop orders, one per reuse class: nothing stationary (G innermost), or operand Z
    stationary over a non-empty set S of the loops that do not index it (S innermost)."""
    orders = [[Dim.N, Dim.K, Dim.C, Dim.P, Dim.Q, Dim.R, Dim.S, Dim.G]]
    for z in OPERANDS:
        irr = _IRRELEVANT[z]
        rel = [d for d in DIMS if d in RELEVANT[z]]
        for size in range(1, len(irr) + 1):
            for stat in combinations(irr, size):
                outer = [d for d in irr if d not in stat]
                orders.append(outer + rel + list(stat))
    return np.array([[int(d) for d in o] for o in orders], dtype=np.int64)


def split_options(problem: Problem) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every (cluster_split, core_split) the accelerator allows for this layer."""
    cores = problem.arch.cores
    dims = problem.dims
    allowed = [Dim[d] for d in cores.split_dims if dims[Dim[d]] > 1]

    def factorings(limit: int, bound: dict[Dim, int]) -> list[tuple[int, ...]]:
        out: list[tuple[int, ...]] = []

        def rec(i: int, left: int, acc: list[int]) -> None:
            if i == len(allowed):
                vec = [1] * NDIMS
                for d, f in zip(allowed, acc, strict=True):
                    vec[d] = f
                out.append(tuple(vec))
                return
            d = allowed[i]
            for f in range(1, min(left, bound[d]) + 1):
                rec(i + 1, left // f, acc + [f])

        rec(0, limit, [])
        return out

    result = []
    for cl in factorings(cores.clusters, {d: int(dims[d]) for d in allowed}):
        inner = {d: -(-int(dims[d]) // cl[d]) for d in allowed}
        for co in factorings(cores.cores_per_cluster, inner):
            result.append((cl, co))
    unit = problem.layer.row_unit  # a row-wise layer's slices of G hold whole rows
    if unit > 1:
        result = [(cl, co) for cl, co in result if int(dims[Dim.G]) % (unit * cl[Dim.G] * co[Dim.G]) == 0]
    return result


def spatial_options(problem: Problem, max_len: tuple[int, ...]) -> np.ndarray:
    """(options, 8) unroll factors: every combination of maximal unroll tuples of the unrolled axes
    (a dimension on at most one axis). Memoised per PE array, lanes and lengths (``search.memo``);
    the array is read-only.

    The options read a length only through ``min(lanes, length)`` and ``length > 1``, for the
    dimensions of unrolled axes: lengths are clipped to the most lanes (at least 2) before they key
    the memo (others to 1), so splits with different long slices share one entry."""
    top = max([2, *(lanes for axis, lanes in zip(problem.arch.pe_array.axes, problem.lanes, strict=True)
                    if axis.mode is not AxisMode.FLATTENED)])
    unrolled = {d for axis in problem.arch.pe_array.axes if axis.mode is not AxisMode.FLATTENED for d in axis.dim_ids}
    clipped = tuple(min(int(x), top) if d in unrolled else 1 for d, x in zip(DIMS, max_len, strict=True))
    key = ("spatial_options", capacity_free_key(problem.arch), tuple(problem.lanes), clipped)
    return memo(key, lambda: _spatial_options(problem, clipped))


def _spatial_options(problem: Problem, max_len: tuple[int, ...]) -> np.ndarray:
    per_axis: list[list[dict[Dim, int]]] = []
    for axis, lanes in zip(problem.arch.pe_array.axes, problem.lanes, strict=True):
        if axis.mode is AxisMode.FLATTENED:
            continue
        dims = [d for d in axis.dim_ids if max_len[d] > 1]
        opts: list[dict[Dim, int]] = [{}]
        for k in range(1, min(axis.max_dims, len(dims)) + 1):
            for chosen in combinations(dims, k):
                opts.extend(_maximal_tuples(chosen, lanes, max_len))
        per_axis.append(opts)
    vectors = []
    for combo in product(*per_axis):
        used: set[Dim] = set()
        ok = True
        vec = [1] * NDIMS
        for assignment in combo:
            if used & assignment.keys():
                ok = False
                break
            used |= assignment.keys()
            for d, f in assignment.items():
                vec[d] = f
        if ok:
            vectors.append(tuple(vec))
    unique = sorted(set(vectors), key=lambda v: (-int(np.prod(v)), v))
    # Drop options dominated component-wise by another option.
    arr = np.array(unique, dtype=np.int64)
    keep = [i for i in range(len(arr)) if not np.any(np.all(arr >= arr[i], axis=1) & np.any(arr > arr[i], axis=1))]
    out = arr[keep]
    out.flags.writeable = False
    return out


def _maximal_tuples(dims: tuple[Dim, ...], lanes: int, max_len: tuple[int, ...]) -> list[dict[Dim, int]]:
    caps = [min(lanes, max_len[d]) for d in dims]
    found: list[tuple[int, ...]] = []

    def rec(i: int, left: int, acc: list[int]) -> None:
        if i == len(dims):
            found.append(tuple(acc))
            return
        for f in range(2, min(caps[i], left) + 1):
            rec(i + 1, left // f, acc + [f])

    rec(0, lanes, [])
    maximal = []
    for t in found:
        prod_t = int(np.prod(t))
        if all(t[i] + 1 > caps[i] or prod_t // t[i] * (t[i] + 1) > lanes for i in range(len(t))):
            maximal.append(dict(zip(dims, t, strict=True)))
    return maximal
