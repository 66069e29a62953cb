"""The mapping space of one layer and the provably safe reductions the exhaustive search uses.

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
  it is dropped (per-dimension Pareto fronts; input rows/columns are treated jointly with P,R and
  Q,S). Combinations that overflow an on-chip memory are never built.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, product

import numpy as np

from tileplan.arch.spec import AxisMode
from tileplan.cost.model import storage_order, tensor_sizes
from tileplan.cost.problem import CoreGrid, CoreSlice, Problem
from tileplan.cost.tables import halo_table, plain_bursts
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.mapping import DEFAULT_LAYOUTS
from tileplan.search import tile_product
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


@dataclass
class TileGroup:
    """Candidate tile sizes for a group of dimensions that interact (P with R, Q with S)."""

    dims: tuple[Dim, ...]
    tiles: np.ndarray  # (m, len(dims))
    footprint: np.ndarray  # (m, shapes, 3): factor of each operand's on-chip box (elements)
    doms: np.ndarray  # (m, width >= 1): per candidate, ascending, -1 padded: candidates at least as good
    # in every cost quantity (only footprint larger), reduced to those with a minimal footprint

    @property
    def dominators(self) -> list[np.ndarray]:
        """``doms`` as one array per candidate."""
        return [row[row >= 0] for row in self.doms]


def _pareto(features: np.ndarray, classes: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """Indices (ascending) of rows not dominated (all features <=, one <) by another row of the
    same class; exact duplicates keep the first row. It takes the compiled loop of
    ``search.tile_product`` when it is ready (same rows; ``compiled`` forces the choice)."""
    keep = np.zeros(len(features), dtype=bool)
    one_class = len(classes) == 0 or bool(np.all(classes == classes[:1]))
    # (return_index: numpy's plain unique imports numpy.ma, see ``tileplan.arrays``)
    for cls in classes[:1] if one_class else np.unique(classes, axis=0, return_index=True)[0]:
        idx = np.arange(len(classes)) if one_class else np.nonzero(np.all(classes == cls, axis=1))[0]
        f = features if one_class else features[idx]  # (one class: every row, no copy)
        order = np.lexsort(f.T[::-1])
        walk = tile_product.compiled_front() if (tile_product.front_wanted() if compiled is None
                                                 else compiled) else None
        if walk is not None:
            keep[idx[order[walk(np.ascontiguousarray(f[order], dtype=np.int64))]]] = True
            continue
        front: list[int] = []
        for j in order:
            row = f[j]
            if front and np.any(np.all(f[front] <= row, axis=1)):
                continue
            front.append(int(j))
        keep[idx[front]] = True
    return np.nonzero(keep)[0]


def _compute_features(problem: Problem, dims: tuple[Dim, ...], ext: dict[Dim, list[tuple[np.ndarray, np.ndarray]]],
                      unroll_values: dict[Dim, list[int]]) -> list[np.ndarray]:
    """Compute-cycle features of a group: for unrolled dims, sum_i ceil(t_i/u) per unroll value; for
    dims on a flattened axis, g(Y) = sum over the group's positions of ceil(prod t * Y / lanes) for
    Y = 1..lanes (enough: g(Y + lanes) - g(Y) is the same for every candidate)."""
    out: list[np.ndarray] = []
    flat_dims = set()
    for fdims, lanes in problem.flattened_axes:
        mine = [d for d in dims if d in fdims]
        flat_dims |= set(mine)
        if not mine:
            continue
        ys = np.arange(1, lanes + 1, dtype=np.int64)[:, None]  # every Y at once: one row each
        total: np.ndarray | int = 0
        for pick in product(*[ext[d] for d in mine]):
            count: np.ndarray | int = 1
            prod_t: np.ndarray | int = 1
            for size, cnt in pick:
                count = count * cnt
                prod_t = prod_t * size
            total = total + count * (-(-(prod_t * ys) // lanes))
        out.extend(np.asarray(total))
    for d in dims:
        if d in flat_dims:
            continue
        for u in unroll_values.get(d, []):
            if u > 1:
                out.append(sum(cnt * (-(-size // u)) for size, cnt in ext[d]))
    return out


def layer_group_cache(problem: Problem) -> dict[tuple[object, ...], TileGroup]:
    """The ``tile_groups`` cache shared by every search of this layer on this accelerator at any
    on-chip capacity (tile candidates, their features and dominators never read the capacity)."""
    return memo(("tile_groups", problem.layer.signature(), capacity_free_key(problem.arch)), dict)


def tile_groups(problem: Problem, grid: CoreGrid, unroll_options: np.ndarray,
                cache: dict[tuple[object, ...], TileGroup] | None = None,
                hoisted: frozenset[tuple[Operand, Dim]] = frozenset()) -> list[TileGroup]:
    """Pareto-pruned tile candidates of every dimension group for this core split; ``hoisted``:
    (operand, dimension) pairs whose box spans the slice (``search.hoist``), so the tile changes
    neither that operand's footprint nor its cost quantities along the dimension.

    ``cache`` (one per layer search) shares a group between splits whose cores agree on everything
    the group reads: its dims' longest lengths, every core shape's lengths along them (and, for the
    P/R and Q/S groups, the offset that places the input window), and the unroll values of its dims."""
    max_len = grid.max_length
    unroll_values = {d: sorted(set(int(u) for u in unroll_options[:, d])) for d in DIMS}
    groups = []
    blocks: dict[tuple[object, ...], _ShapeBlock] = {}
    if cache is not None:  # per-shape features, shared by splits whose groups differ in other shapes
        blocks = memo(("tile_shape_blocks", problem.layer.signature(), capacity_free_key(problem.arch)), dict)
    for dims in ((Dim.N,), (Dim.G,), (Dim.K,), (Dim.C,), (Dim.P, Dim.R), (Dim.Q, Dim.S)):
        lengths = tuple(int(max_len[d]) for d in dims)
        unrolls = tuple(tuple(unroll_values[d]) for d in dims)
        places = tuple((*(int(c.length[d]) for d in dims), int(c.offset[dims[0]]) if len(dims) > 1 else 0)
                       for c in grid.shapes)
        mine = frozenset(x for x in hoisted if x[1] in dims)
        key = (dims, lengths, places, unrolls, mine)
        if cache is not None and key in cache:
            groups.append(cache[key])
            continue
        if len(dims) == 1:
            tiles = np.arange(1, lengths[0] + 1, dtype=np.int64)[:, None]
            if dims[0] is Dim.G and problem.layer.row_unit > 1:  # whole rows of a row-wise layer per tile
                tiles = tiles[tiles[:, 0] % problem.layer.row_unit == 0]
        else:
            tiles = np.stack([np.repeat(np.arange(1, lengths[0] + 1, dtype=np.int64), lengths[1]),
                              np.tile(np.arange(1, lengths[1] + 1, dtype=np.int64), lengths[0])], axis=1)
        m = len(tiles)
        parts = []
        for s, core in enumerate(grid.shapes):
            block_key = (dims, lengths, places[s], unrolls, mine)
            block = blocks.get(block_key)
            if block is None:
                block = _shape_block(problem, dims, tiles, core, unroll_values, mine)
                if cache is not None:
                    blocks[block_key] = block
            parts.append(block)
        feats = [b.features for b in parts if len(b.features)]
        cost_feats = np.concatenate(feats + [b.classes for b in parts] if feats else
                                    [tiles[:, :1].T] + [b.classes for b in parts], axis=0).T
        foot = np.stack([b.footprint for b in parts], axis=1)
        fp_flat = foot.reshape(m, -1)
        keep = _pareto(np.concatenate([cost_feats, fp_flat], axis=1), np.zeros((m, 1), dtype=np.int64))
        groups.append(TileGroup(dims, tiles[keep], foot[keep],
                                _dominator_table(np.ascontiguousarray(cost_feats[keep]), fp_flat[keep])))
        if cache is not None:
            cache[key] = groups[-1]
    return groups


@dataclass
class _ShapeBlock:
    """One core shape's part of a tile group's candidates (tile sizes 1 .. the longest slice)."""

    features: np.ndarray  # (f, m) cost quantities of every candidate on this shape
    classes: np.ndarray  # (len(dims), m) trip counts of the group's dims
    footprint: np.ndarray  # (m, 3) factor of each operand's on-chip box (elements)


def _shape_block(problem: Problem, dims: tuple[Dim, ...], tiles: np.ndarray, core: CoreSlice,
                 unroll_values: dict[Dim, list[int]],
                 hoisted: frozenset[tuple[Operand, Dim]] = frozenset()) -> _ShapeBlock:
    """The cost quantities, trip counts and footprint factors of the candidates ``tiles`` ((m, len(dims)))
    of a dimension group on the core shape ``core`` (``hoisted``: as :func:`tile_groups`)."""
    prec = problem.precision
    burst = problem.arch.dram.burst_bytes
    m = len(tiles)
    feats: list[np.ndarray] = []
    classes: list[np.ndarray] = []
    foot = np.ones((m, 3), dtype=np.int64)
    no = np.zeros(m, dtype=bool)
    ext: dict[Dim, list[tuple[np.ndarray, np.ndarray]]] = {}
    for j, d in enumerate(dims):
        length = core.length[d]
        t = np.minimum(tiles[:, j], length)
        n = -(-length // t)
        classes.append(n)
        ext[d] = [(t, n - 1), (length - (n - 1) * t, np.ones_like(n))]
        for op in OPERANDS:
            if d in RELEVANT[op] and problem.has_operand[op] and not _is_halo(op, d):
                if (op, d) in hoisted:  # the box spans the slice whatever the tile: nothing to compare
                    foot[:, op] *= length
                    continue
                foot[:, op] *= t
                e = _storage_index(op, d)
                size = tensor_sizes(problem, op)[e]
                for b in _precisions(op, prec):
                    every, partial = plain_bursts(length, size, tiles[:, j], no, _step_bytes(problem, op)[e] * b, burst)
                    feats.extend([every, partial])
                feats.append((no | (n == 1)) & (length == size))
    if problem.has_operand[Operand.INPUT] and dims in ((Dim.P, Dim.R), (Dim.Q, Dim.S)):
        axis = 0 if dims[0] is Dim.P else 1
        e = 3 + axis
        size = tensor_sizes(problem, Operand.INPUT)[e]
        table = halo_table(core.length[dims[0]], problem.input_window_start(axis, core.offset[dims[0]]),
                           size, problem.stride[axis], problem.dilation[axis], int(problem.dims[dims[1]]))
        idx = (np.minimum(tiles[:, 0], core.length[dims[0]]) - 1,
               np.minimum(tiles[:, 1], int(problem.dims[dims[1]])) - 1, no.astype(np.int64), no.astype(np.int64))
        foot[:, Operand.INPUT] *= table.max_ext[idx]
        feats.extend([table.sum_ext[idx], table.nfull[idx]])
        every, partial = table.bursts(_step_bytes(problem, Operand.INPUT)[e] * prec.input, burst)
        feats.extend([every[idx], partial[idx]])
    feats.extend(np.broadcast_to(f, (m,)) for f in _compute_features(problem, dims, ext, unroll_values))
    features = np.stack([np.asarray(f, dtype=np.int64) for f in feats]) if feats else np.zeros((0, m), dtype=np.int64)
    return _ShapeBlock(features, np.stack(classes).astype(np.int64), foot)


def _dominators(cost: np.ndarray, fp: np.ndarray, *, compiled: bool | None = None) -> list[np.ndarray]:
    """For each candidate, the candidates with every cost quantity <= its own (and not identical,
    or identical with a lower index), reduced to those whose footprint is minimal among them."""
    return [row[row >= 0] for row in _dominator_table(cost, fp, compiled=compiled)]


def _dominator_table(cost: np.ndarray, fp: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """:func:`_dominators` as an (m, width >= 1) table, -1 padded. It takes the compiled loop of
    ``search.tile_product`` when it is ready (same rows; ``compiled`` forces the choice)."""
    loop = tile_product.compiled_dominators() if (tile_product.dominators_wanted() if compiled is None
                                                   else compiled) else None
    if loop is not None:
        return np.asarray(loop(np.ascontiguousarray(cost, dtype=np.int64), np.ascontiguousarray(fp, dtype=np.int64)))
    lists = _dominator_lists(cost, fp)
    table = np.full((len(lists), max([1, *(len(d) for d in lists)])), -1, dtype=np.int64)
    for a, dom in enumerate(lists):
        table[a, :len(dom)] = dom
    return table


def _dominator_lists(cost: np.ndarray, fp: np.ndarray) -> list[np.ndarray]:
    """:func:`_dominators` over whole arrays (for groups too small to call the compiled loop for)."""
    m = len(cost)
    le = np.all(cost[None, :, :] <= cost[:, None, :], axis=2)  # le[a, b]: b at least as good as a
    same = np.all(cost[None, :, :] == cost[:, None, :], axis=2)
    idx = np.arange(m)
    allowed = le & (~same | (idx[None, :] < idx[:, None]))
    # beats[i, j]: i's footprint <= j's everywhere and < somewhere, so j is not minimal wherever i is
    # a candidate too. Per candidate a, j survives iff no allowed i beats it: a 0/1 matrix product
    # (exact: counts below 2**24), in blocks of rows, instead of a pairwise test per candidate set.
    beats = np.all(fp[:, None, :] <= fp[None, :, :], axis=2) & np.any(fp[:, None, :] < fp[None, :, :], axis=2)
    weights = beats.astype(np.float32)
    out: list[np.ndarray] = []
    for lo in range(0, m, 256):
        rows = allowed[lo:lo + 256]
        keep = rows & ~((rows.astype(np.float32) @ weights) > 0)
        out.extend(np.nonzero(row)[0] for row in keep)
    return out


def _is_halo(op: Operand, d: Dim) -> bool:
    return op is Operand.INPUT and d in (Dim.P, Dim.Q, Dim.R, Dim.S)


_STORAGE_INDEX = {
    Operand.INPUT: {Dim.N: 0, Dim.G: 1, Dim.C: 2},
    Operand.WEIGHT: {Dim.G: 0, Dim.K: 1, Dim.C: 2, Dim.R: 3, Dim.S: 4},
    Operand.OUTPUT: {Dim.N: 0, Dim.G: 1, Dim.K: 2, Dim.P: 3, Dim.Q: 4},
}


def _storage_index(op: Operand, d: Dim) -> int:
    return _STORAGE_INDEX[op][d]


def _precisions(op: Operand, prec: object) -> list[int]:
    from tileplan.workload.layer import Precision

    assert isinstance(prec, Precision)
    if op is Operand.OUTPUT:
        return sorted({prec.output, prec.psum})
    return [prec.of(op)]


def _step_bytes(problem: Problem, op: Operand) -> list[int]:
    """Elements of one step along each canonical storage dimension in the default layout (kept on
    ``problem``: read for every dimension of every tile group)."""
    held: dict[Operand, list[int]] = problem.__dict__.setdefault("_step_bytes", {})
    if op not in held:
        held[op] = _steps(problem, op)
    return held[op]


def _steps(problem: Problem, op: Operand) -> list[int]:
    order = storage_order(op, DEFAULT_LAYOUTS[op])
    sizes = tensor_sizes(problem, op)
    step = [0] * 5
    inner = 1
    for e in reversed(order):
        step[e] = inner
        inner *= sizes[e]
    return step


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
