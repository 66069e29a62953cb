"""MARVEL's on-chip subspace (§3.2, Alg. 1) under a fixed level-3 (DRAM) mapping: level-2 step
orders, level-2 tiles (a step = ``tiles * fanout``: the parallelism), level-1 tiles (what one PE
holds in its L1, double-buffered), costed by the multi-level model (``cost.levels``).

Pruning options (each can be switched off): ``divisors`` (no prologue/epilogue: level-1 tiles
divide level-2 tiles, which divide level-3 tiles), ``unroll_rs`` (one step covers R and S, MARVEL's
5-D nest), ``symmetry`` (on square tiles, skip orders that mirror a kept one by swapping P,R with
Q,S), ``max_parallel`` (dimensions with a fan-out above one), ``min_utilization`` (a step uses at
least this fraction of the PEs), ``parallel`` (only these dimensions may fan out: the fixed-dataflow
baselines). A batch of one needs no N loop (its tile is 1). Beyond the paper, ``bound`` prunes
safely: candidates whose lower bound over every loop order is worse than the best found are never
costed (the result is unchanged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import permutations

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.levels import combine, onchip_bound, onchip_finish, onchip_sweep
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, Dim
from tileplan.mapping import Level, Mapping
from tileplan.search.objective import Objective, best_index


@dataclass(frozen=True)
class OnChipOptions:
    """The pruning switches of the on-chip search (see the module docstring)."""

    divisors: bool = True
    unroll_rs: bool = True
    symmetry: bool = True
    max_parallel: int = 3
    min_utilization: float = 0.1
    parallel: tuple[Dim, ...] | None = None
    bound: bool = True  # the safe lower-bound pruning (see :func:`onchip`)


def _dim_options(length: int, unrolled: bool, fan: bool, divisors: bool, pes: int) -> np.ndarray:
    """(m, 2) (level-1 tile, fan-out) pairs of one dimension whose level-3 tile is ``length``."""
    out = []
    for t1 in range(1, length + 1):
        if divisors and length % t1:
            continue
        most = -(-length // t1)
        for f in range(1, min(most, pes) + 1 if fan else 2):
            step = t1 * f
            if divisors and length % step:
                continue
            if unrolled and step < length:
                continue
            out.append((t1, f))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def level_options(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions) -> np.ndarray:
    """(m, 2, 8) level-1 tiles and fan-outs that fit L1 (double-buffered) and the PE array."""
    arch = problem.arch
    pes = arch.total_pes(problem.precision.input)
    rf = arch.register_file
    factor = 2 if arch.double_buffering else 1
    prec = problem.precision
    stride, dil = problem.stride, problem.dilation
    t0 = np.minimum(np.array(tiles0), problem.dims)
    cand = np.ones((1, 2, NDIMS), dtype=np.int64)
    for d in DIMS:
        fan = opts.parallel is None or d in opts.parallel
        unrolled = opts.unroll_rs and d in (Dim.R, Dim.S)
        pairs = _dim_options(int(t0[d]), unrolled, fan, opts.divisors, pes)
        cand = np.repeat(cand, len(pairs), axis=0)
        cand[:, :, d] = np.tile(pairs, (len(cand) // len(pairs), 1))
        t, f = cand[:, 0], cand[:, 1]
        rows = ((t[:, Dim.P] - 1) * stride[0] + (t[:, Dim.R] - 1) * dil[0] + 1)
        cols = ((t[:, Dim.Q] - 1) * stride[1] + (t[:, Dim.S] - 1) * dil[1] + 1)
        need_in = t[:, Dim.N] * t[:, Dim.G] * t[:, Dim.C] * rows * cols * prec.input * problem.layer.input_count
        need_w = t[:, Dim.G] * t[:, Dim.K] * t[:, Dim.C] * t[:, Dim.R] * t[:, Dim.S] * prec.weight
        need_o = t[:, Dim.N] * t[:, Dim.G] * t[:, Dim.K] * t[:, Dim.P] * t[:, Dim.Q] * prec.psum
        has = problem.has_operand
        keep = ((need_in * factor <= rf.inputs_bytes) | (not has[0])) & (
            (need_w * factor <= rf.weights_bytes) | (not has[1])) & (need_o * factor <= rf.psums_bytes)
        keep &= (np.prod(f, axis=1) <= pes) & (np.sum(f > 1, axis=1) <= opts.max_parallel)
        cand = cand[keep]
    children = np.prod(cand[:, 1], axis=1)
    return cand[children >= opts.min_utilization * pes]


def level_orders(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions) -> np.ndarray:
    """(k, 8) step orders: permutations of the dimensions that can take more than one step (N of a
    batch of one and unrolled R, S never do), the others outermost; mirrors dropped on square tiles."""
    t0 = np.minimum(np.array(tiles0), problem.dims)
    free = [d for d in DIMS if t0[d] > 1 and not (opts.unroll_rs and d in (Dim.R, Dim.S))]
    fixed = [d for d in DIMS if d not in free]
    square = (t0[Dim.P] == t0[Dim.Q] and t0[Dim.R] == t0[Dim.S] and problem.stride[0] == problem.stride[1]
              and problem.dilation[0] == problem.dilation[1])
    out = []
    for perm in permutations(free):
        if opts.symmetry and square and Dim.P in free and Dim.Q in free and perm.index(Dim.P) > perm.index(Dim.Q):
            continue
        out.append([int(d) for d in fixed + list(perm)])
    return np.array(out, dtype=np.int64)


@dataclass(frozen=True)
class OnChip:
    """The best on-chip mapping under one level-3 mapping."""

    mapping: Mapping
    cost: CostBatch
    evaluated: int  # (level tiles, order) candidates left after the pruning options
    space: float  # level-1 tiles x fan-outs x orders before pruning
    costed: int = 0  # ... of which the bound did not rule out (those the model costed)


def unpruned_space(problem: Problem, tiles0: tuple[int, ...]) -> float:
    """Level-1 tiles x level-2 tiles x level-2 orders with no pruning (tiles: any size up to the
    level-3 tile)."""
    t0 = np.minimum(np.array(tiles0), problem.dims)
    return float(np.prod([float(t) * float(t) for t in t0])) * math.factorial(NDIMS)


def _lex_greater(keys: list[np.ndarray], best: tuple[float, ...]) -> np.ndarray:
    """Where the key tuples (one array per key) are lexicographically greater than ``best``."""
    greater = np.zeros(len(keys[0]), dtype=bool)
    equal = np.ones(len(keys[0]), dtype=bool)
    for k, b in zip(keys, best, strict=True):
        greater |= equal & (k > b)
        equal &= k == b
    return greater


def _keys(objective: Objective, cost: CostBatch) -> list[np.ndarray]:
    return [objective.key(cost), *objective.tie_keys(cost)]


def onchip(problem: Problem, base: Mapping, objective: Objective, opts: OnChipOptions = OnChipOptions(), *,
           chunk: int = 1 << 15, sample: tuple[np.random.Generator, int] | None = None,
           base_orders: list[tuple[Dim, ...]] | None = None, bound: bool = True) -> OnChip | None:
    """Best on-chip level under ``base`` (its DRAM level); ``None`` when nothing fits. ``sample``
    (generator, count): cost only ``count`` random (level tiles, order) draws instead of all.
    ``base_orders``: also choose the DRAM loop order among these (the on-chip stage one is shared).

    ``bound`` (safe, on by default): candidates are costed in the order of a lower bound of their
    objective and tie keys over every loop order (``cost.levels.onchip_bound``), and those whose
    bound is already worse than the best found are never costed; the result is the one the full
    evaluation finds. ``chunk``: (candidate, order) pairs costed per vectorised step."""
    options = level_options(problem, base.tiles, opts)
    orders = level_orders(problem, base.tiles, opts)
    if len(options) == 0:
        return None
    if sample is not None:
        rng, count = sample
        options = options[rng.integers(len(options), size=count)]
        orders = orders[rng.integers(len(orders), size=min(8, len(orders)))]
    bases = [base] if base_orders is None else [
        Mapping(tiles=base.tiles, order=o, hoist=base.hoist, layouts=base.layouts) for o in base_orders]
    drams = evaluate(problem, MappingBatch.from_mappings(bases))
    one = MappingBatch.from_mappings([base])
    sw_all = onchip_sweep(problem, one.take(np.zeros(len(options), dtype=np.int64)), options[:, 0], options[:, 1])
    m = len(orders)
    base_order = np.array([[int(d) for d in bb.order] for bb in bases], dtype=np.int64)
    # a pair is (level tiles and fan-outs, DRAM order); each pair is costed with every step order
    live = np.flatnonzero(sw_all.feasible)
    pair_opt = np.repeat(live, len(bases))
    pair_base = np.tile(np.arange(len(bases)), len(live))
    if bound and len(pair_opt):
        low = combine(problem, drams.take(pair_base), one, onchip_bound(sw_all.take(pair_opt)))
        low_keys = _keys(objective, low)
        rank = np.lexsort([np.arange(len(pair_opt))] + low_keys[::-1])
        pair_opt, pair_base, low_keys = pair_opt[rank], pair_base[rank], [k[rank] for k in low_keys]
    per_chunk = max(1, min(chunk, 256) // m)  # small first: a good incumbent prunes the rest early
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    costed = 0
    start = 0
    while start < len(pair_opt):
        stop = start + per_chunk
        idx = pair_opt[start:stop]
        bidx = pair_base[start:stop]
        lows = [k[start:stop] for k in low_keys] if bound else []
        start, per_chunk = stop, min(2 * per_chunk, max(1, chunk // m))
        if bound and best is not None:
            keep = ~_lex_greater(lows, best[0])
            if not keep[0]:
                break  # sorted by the bound: every later pair is worse too
            idx, bidx = idx[keep], bidx[keep]
        rows = np.repeat(idx, m)
        brows = np.repeat(bidx, m)
        order1 = np.tile(orders, (len(idx), 1))
        cost = combine(problem, drams.take(brows), one, onchip_finish(sw_all.take(rows), base_order[brows], order1))
        costed += len(rows)
        i = best_index(objective, cost)
        key = tuple(float(k[i]) for k in _keys(objective, cost))
        if np.isfinite(key[0]) and (best is None or key < best[0]):
            opt = options[rows[i]]
            level = Level(tiles=tuple(int(x) for x in opt[0]), fanout=tuple(int(x) for x in opt[1]),
                          order=tuple(Dim(int(d)) for d in order1[i]))
            mapping = Mapping(tiles=base.tiles, order=bases[brows[i]].order, hoist=base.hoist,
                              layouts=base.layouts, levels=(level,))
            best = (key, mapping, cost.take(i))
    if best is None:
        return None
    total = len(options) * len(orders) * len(bases)
    return OnChip(best[1], best[2], total, unpruned_space(problem, base.tiles), costed)
