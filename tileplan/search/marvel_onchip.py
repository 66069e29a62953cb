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
costed (the result is unchanged). :func:`search_levels` searches the on-chip levels of many level-3
tilings at once (the joint search); :func:`compute_floor` bounds a tiling's compute time over every
on-chip level.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import permutations

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.leveldims import nest_stats
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


@lru_cache(maxsize=4096)
def _dim_options(length: int, unrolled: bool, fan: bool, divisors: bool, pes: int) -> np.ndarray:
    """(m, 2) (level-1 tile, fan-out) pairs of one dimension whose level-3 tile is ``length``
    (cached: read-only)."""
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
    pairs = np.array(out, dtype=np.int64).reshape(-1, 2)
    pairs.setflags(write=False)
    return pairs


def _fit(problem: Problem, cand: np.ndarray, max_parallel: int) -> np.ndarray:
    """Which (n, 2, 8) level-1 tiles and fan-outs fit L1 (double-buffered when the arch is) and the
    PE array, with at most ``max_parallel`` dimensions fanning out (dimensions not yet chosen hold 1)."""
    arch = problem.arch
    rf = arch.register_file
    factor = 2 if arch.double_buffering else 1
    prec = problem.precision
    stride, dil = problem.stride, problem.dilation
    t, f = cand[:, 0], cand[:, 1]
    rows = ((t[:, Dim.P] - 1) * stride[0] + (t[:, Dim.R] - 1) * dil[0] + 1)
    cols = ((t[:, Dim.Q] - 1) * stride[1] + (t[:, Dim.S] - 1) * dil[1] + 1)
    need_in = t[:, Dim.N] * t[:, Dim.G] * t[:, Dim.C] * rows * cols * prec.input * problem.layer.input_count
    need_w = t[:, Dim.G] * t[:, Dim.K] * t[:, Dim.C] * t[:, Dim.R] * t[:, Dim.S] * prec.weight
    need_o = t[:, Dim.N] * t[:, Dim.G] * t[:, Dim.K] * t[:, Dim.P] * t[:, Dim.Q] * prec.psum
    has = problem.has_operand
    keep = ((need_in * factor <= rf.inputs_bytes) | (not has[0])) & (
        (need_w * factor <= rf.weights_bytes) | (not has[1])) & (need_o * factor <= rf.psums_bytes)
    return np.asarray(keep & (np.prod(f, axis=1) <= arch.total_pes(prec.input))
                      & (np.sum(f > 1, axis=1) <= max_parallel))


def sample_level(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions, rng: np.random.Generator,
                 count: int, *, tries: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random on-chip levels under ``tiles0`` without enumerating them: up to ``count``
    (level-1 tile, fan-out) candidates of ``level_options`` (each dimension's pair drawn uniformly,
    rejected unless the whole fits: uniform over the fitting ones) and up to 8 random step orders
    (random permutations of the dimensions that can take several steps)."""
    pes = problem.arch.total_pes(problem.precision.input)
    t0 = np.minimum(np.array(tiles0), problem.dims)
    pairs = [_dim_options(int(t0[d]), opts.unroll_rs and d in (Dim.R, Dim.S),
                          opts.parallel is None or d in opts.parallel, opts.divisors, pes) for d in DIMS]
    found = np.zeros((0, 2, NDIMS), dtype=np.int64)
    for _ in range(tries):
        cand = np.stack([p[rng.integers(len(p), size=4 * count)] for p in pairs], axis=2)
        cand = cand[_fit(problem, cand, opts.max_parallel)]
        cand = cand[np.prod(cand[:, 1], axis=1) >= opts.min_utilization * pes]
        found = np.concatenate([found, cand])[:count]
        if len(found) == count:
            break
    free = [int(d) for d in DIMS if t0[d] > 1 and not (opts.unroll_rs and d in (Dim.R, Dim.S))]
    fixed = [int(d) for d in DIMS if int(d) not in free]
    orders = np.array([fixed + [int(x) for x in rng.permutation(free)] for _ in range(8)], dtype=np.int64)
    return found, orders.reshape(-1, NDIMS)


@lru_cache(maxsize=4096)
def _dim_steps(length: int, t0: int, unrolled: bool, fan: bool, divisors: bool, pes: int) -> np.ndarray:
    """Compute steps along one dimension (``cost.leveldims`` ``step_max``) of each pair of
    ``_dim_options(t0, ...)`` in a dimension of ``length`` (cached: read-only)."""
    pairs = _dim_options(t0, unrolled, fan, divisors, pes)
    steps = np.array([nest_stats(length, t0, int(t1), int(f)).step_max for t1, f in pairs], dtype=np.float64)
    steps.setflags(write=False)
    return steps


def level_options(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions, *,
                  max_steps: float | None = None) -> np.ndarray:
    """(m, 2, 8) level-1 tiles and fan-outs that fit L1 (double-buffered) and the PE array;
    ``max_steps``: only those whose compute steps (the product over dimensions of the model's
    ``step_max``, order-independent) are at most this many, pruned while the product is built.
    All of :func:`iter_level_options` at once (the chunks concatenated, in the same order)."""
    parts = list(iter_level_options(problem, tiles0, opts, max_steps=max_steps, chunk=1 << 62))
    return np.concatenate(parts) if parts else np.ones((0, 2, NDIMS), dtype=np.int64)


def iter_level_options(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions, *,
                       max_steps: float | Callable[[], float | None] | None = None,
                       chunk: int = 1 << 16) -> Iterator[np.ndarray]:
    """The rows of :func:`level_options` in order, as chunks of at most ``chunk`` rows (nonempty),
    never holding more than about ``chunk`` partial candidates per dimension: the product over
    dimensions is built depth first, a slice of the partial candidates at a time, each extended by
    the next dimension's (level-1 tile, fan-out) pairs and filtered at once (the L1 and PE-array fit
    and the step bound only grow as dimensions are added, so filtering a prefix is safe).
    Memory: about ``NDIMS * chunk`` partial rows (128 B each) whatever the space's size.
    ``max_steps`` (see :func:`level_options`) may be a function, read again for every slice (a cap
    that tightens while the caller searches the chunks)."""
    pes = problem.arch.total_pes(problem.precision.input)
    t0 = np.minimum(np.array(tiles0), problem.dims)
    flags = [(opts.unroll_rs and d in (Dim.R, Dim.S), opts.parallel is None or d in opts.parallel) for d in DIMS]
    pairs = [_dim_options(int(t0[d]), *flags[d], opts.divisors, pes) for d in DIMS]
    dim_steps = [_dim_steps(int(problem.dims[d]), int(t0[d]), *flags[d], opts.divisors, pes) for d in DIMS]
    # the fewest steps the dimensions after each one can take: alone, and with the PEs left (a fan-out
    # f leaves at least length / f steps along a dimension)
    later = np.ones(NDIMS + 1)
    rest = np.ones(NDIMS + 1)
    for d in reversed(DIMS):
        later[d] = later[d + 1] * (dim_steps[d].min() if len(dim_steps[d]) else np.inf)
        rest[d] = rest[d + 1] * float(problem.dims[d])
    least = opts.min_utilization * pes

    def extend(cand: np.ndarray, steps: np.ndarray, d: int) -> Iterator[np.ndarray]:
        if d == NDIMS:
            yield cand[np.prod(cand[:, 1], axis=1) >= least]
            return
        m = len(pairs[d])
        rows = max(1, chunk // max(m, 1))
        for lo in range(0, len(cand), rows):
            part = np.repeat(cand[lo:lo + rows], m, axis=0)
            part[:, :, d] = np.tile(pairs[d], (len(part) // m if m else 0, 1))
            part_steps = np.repeat(steps[lo:lo + rows], m) * np.tile(dim_steps[d], len(steps[lo:lo + rows]))
            keep = _fit(problem, part, opts.max_parallel)
            most = max_steps() if callable(max_steps) else max_steps
            if most is not None:
                fanned = np.prod(part[:, 1], axis=1).astype(np.float64)
                keep &= part_steps * np.maximum(later[d + 1], rest[d + 1] * fanned / pes) <= most
            if keep.any():
                yield from extend(part[keep], part_steps[keep], d + 1)

    out: list[np.ndarray] = []
    held = 0
    for found in extend(np.ones((1, 2, NDIMS), dtype=np.int64), np.ones(1), 0):
        if len(found) == 0:
            continue
        out.append(found)
        held += len(found)
        if held >= chunk:
            whole = np.concatenate(out)
            for lo in range(0, len(whole) - chunk + 1, chunk):
                yield whole[lo:lo + chunk]
            tail = whole[len(whole) - len(whole) % chunk:]
            out, held = ([tail], len(tail)) if len(tail) else ([], 0)
    if held:
        yield np.concatenate(out)


def level_orders(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions) -> np.ndarray:
    """(k, 8) step orders: permutations of the dimensions that can take more than one step (N of a
    batch of one and unrolled R, S never do), the others outermost; mirrors dropped on square tiles."""
    t0 = np.minimum(np.array(tiles0), problem.dims)
    free = tuple(int(d) for d in DIMS if t0[d] > 1 and not (opts.unroll_rs and d in (Dim.R, Dim.S)))
    square = bool(t0[Dim.P] == t0[Dim.Q] and t0[Dim.R] == t0[Dim.S] and problem.stride[0] == problem.stride[1]
                  and problem.dilation[0] == problem.dilation[1])
    return _orders(free, opts.symmetry and square)


@lru_cache(maxsize=1024)
def _orders(free: tuple[int, ...], mirror: bool) -> np.ndarray:
    """Step orders with the ``free`` dimensions permuted innermost; ``mirror``: P after Q dropped."""
    fixed = [int(d) for d in DIMS if int(d) not in free]
    out = []
    for perm in permutations(free):
        if mirror and Dim.P in free and Dim.Q in free and perm.index(Dim.P) > perm.index(Dim.Q):
            continue
        out.append(fixed + list(perm))
    orders = np.array(out, dtype=np.int64).reshape(-1, NDIMS)
    orders.setflags(write=False)
    return orders


@dataclass(frozen=True)
class OnChip:
    """The best on-chip mapping under one level-3 mapping."""

    mapping: Mapping
    cost: CostBatch
    evaluated: int  # (level tiles, order) candidates left after the pruning options
    space: float  # level-1 tiles x fan-outs x orders before pruning
    costed: int = 0  # ... of which the bound did not rule out (those the model costed)
    complete: bool = True  # False: a time budget stopped the search early (the best found so far)


def unpruned_space(problem: Problem, tiles0: tuple[int, ...]) -> float:
    """Level-1 tiles x level-2 tiles x level-2 orders with no pruning (tiles: any size up to the
    level-3 tile)."""
    t0 = np.minimum(np.array(tiles0), problem.dims)
    return float(np.prod([float(t) * float(t) for t in t0])) * math.factorial(NDIMS)


def objective_keys(objective: Objective, cost: CostBatch) -> list[np.ndarray]:
    return [objective.key(cost), *objective.tie_keys(cost)]


def lex_less(keys: list[np.ndarray], best: tuple[float, ...]) -> np.ndarray:
    """Where the key tuples (one array per key, most significant first) are lexicographically below
    ``best``. A candidate whose lower bounds are not below the best found cannot improve on it."""
    less = np.zeros(len(keys[0]), dtype=bool)
    equal = np.ones(len(keys[0]), dtype=bool)
    for k, b in zip(keys, best, strict=True):
        less |= equal & (k < b)
        equal &= k == b
    return less


@dataclass(frozen=True)
class Subspaces:
    """The on-chip candidates under ``k`` level-3 tilings: ``options`` (n, 2, 8) level tiles and
    fan-outs, ``owner`` (n,) the tiling of each, and each tiling's step orders, rows
    ``order_start[t]:order_start[t] + order_count[t]`` of ``orders``."""

    tiles0: np.ndarray
    options: np.ndarray
    owner: np.ndarray
    orders: np.ndarray
    order_start: np.ndarray
    order_count: np.ndarray

    @classmethod
    def of(cls, tiles0: np.ndarray, options: list[np.ndarray], orders: list[np.ndarray]) -> Subspaces:
        count = np.array([len(o) for o in orders], dtype=np.int64)
        return cls(np.asarray(tiles0, dtype=np.int64).reshape(-1, NDIMS),
                   np.concatenate(options).reshape(-1, 2, NDIMS),
                   np.repeat(np.arange(len(options)), [len(o) for o in options]),
                   np.concatenate(orders).reshape(-1, NDIMS), np.cumsum(count) - count, count)

    def candidates(self, dram_orders: int) -> int:
        """(option, DRAM order, step order) candidates."""
        return int(np.sum(self.order_count[self.owner])) * dram_orders


def dram_batch(template: Mapping, tiles0: np.ndarray, dram_orders: np.ndarray) -> MappingBatch:
    """Every level-3 tiling of ``tiles0`` (k, 8) under every DRAM order of ``dram_orders`` (o, 8),
    tiling-major (row ``t * o + j``), with ``template``'s hoisting and layouts."""
    k, o = len(tiles0), len(dram_orders)
    one = MappingBatch.from_mappings([Mapping(tiles=template.tiles, order=template.order, hoist=template.hoist,
                                              layouts=template.layouts)])
    batch = one.take(np.zeros(k * o, dtype=np.int64))
    batch.tiles = np.repeat(np.asarray(tiles0, dtype=np.int64), o, axis=0)
    batch.order = np.tile(np.asarray(dram_orders, dtype=np.int64), (k, 1))
    return batch


def dram_floor(drams: CostBatch, k: int, o: int) -> CostBatch:
    """Per tiling, the DRAM level's counts (bytes, bursts, cycles) at their least over the ``o``
    orders of ``drams`` (k * o rows, tiling-major), each count separately (a lower bound of every
    order's); feasible where some order fits."""
    feasible = drams.feasible.reshape(k, o)

    def least(values: np.ndarray) -> np.ndarray:
        shaped = values.reshape(k, o, *values.shape[1:]).astype(np.float64)
        mask = feasible.reshape(k, o, *([1] * (values.ndim - 1)))
        return np.asarray(np.min(np.where(mask, shaped, np.inf), axis=1))

    return replace(drams.take(np.arange(k) * o), feasible=np.asarray(feasible.any(axis=1)),
                   dram_read_bytes=least(drams.dram_read_bytes), dram_write_bytes=least(drams.dram_write_bytes),
                   dram_bursts=least(drams.dram_bursts), dram_cycles=least(drams.dram_cycles))


@dataclass(frozen=True)
class Found:
    """What :func:`search_levels` found: the best (keys, mapping, cost) or ``None`` (nothing fits,
    or nothing beats the incumbent), the candidates it stood for and how many the model costed."""

    best: tuple[tuple[float, ...], Mapping, CostBatch] | None
    evaluated: int
    costed: int


def search_levels(problem: Problem, objective: Objective, sub: Subspaces, dram_orders: np.ndarray,
                  template: Mapping, *, drams: CostBatch | None = None, bound: bool = True,
                  incumbent: tuple[float, ...] | None = None, chunk: int = 1 << 15) -> Found:
    """The best (level-3 tiling, DRAM order, on-chip level, step order) of ``sub`` x ``dram_orders``.

    Every (option, DRAM order) pair is costed with every step order of its tiling in one vectorised
    batch per chunk. ``bound`` (safe): pairs are visited in the order of a lower bound of their
    objective and tie keys over every step order (``cost.levels.onchip_bound``; over every DRAM
    order too unless there is just one, whose reloads then count), and those whose bound is not
    below the best found (or ``incumbent``, the keys to beat) are never costed: the result is the
    one the full evaluation finds. ``drams``: the DRAM level's costs of ``dram_batch(template,
    sub.tiles0, dram_orders)``, if the caller has them."""
    k, o = len(sub.tiles0), len(dram_orders)
    evaluated = sub.candidates(o)
    batch = dram_batch(template, sub.tiles0, dram_orders)
    if drams is None:
        drams = evaluate(problem, batch)
    one = batch.take(np.arange(k) * o)
    sw_all = onchip_sweep(problem, one.take(sub.owner), sub.options[:, 0], sub.options[:, 1])
    # a pair is (level tiles and fan-outs, DRAM order); each pair is costed with every step order
    live = np.flatnonzero(sw_all.feasible)
    if bound and incumbent is not None and len(live):
        # first per option, with its tiling's DRAM level at its least over the orders
        # (under a single DRAM order, that order's reloads count too)
        floor = combine(problem, dram_floor(drams, k, o).take(sub.owner[live]), one,
                        onchip_bound(sw_all.take(live), batch.order[0] if o == 1 else None))
        live = live[lex_less(objective_keys(objective, floor), incumbent)]
    pair_opt = np.repeat(live, o)
    pair_dram = sub.owner[pair_opt] * o + np.tile(np.arange(o), len(live))
    keep = drams.feasible[pair_dram]
    pair_opt, pair_dram = pair_opt[keep], pair_dram[keep]
    low_keys: list[np.ndarray] = []
    if bound and len(pair_opt):
        # under a single DRAM order its reloads count too (tighter); with several, the bound over
        # every order is per option (cheaper than per pair, the joint search's many pairs)
        oc_low = (onchip_bound(sw_all.take(pair_opt), batch.order[0]) if o == 1
                  else onchip_bound(sw_all).take(pair_opt))
        low = combine(problem, drams.take(pair_dram), one, oc_low)
        low_keys = objective_keys(objective, low)
        rank = np.lexsort([np.arange(len(pair_opt))] + low_keys[::-1])
        if incumbent is not None:
            rank = rank[lex_less([kk[rank] for kk in low_keys], incumbent)]
        pair_opt, pair_dram, low_keys = pair_opt[rank], pair_dram[rank], [kk[rank] for kk in low_keys]
    steps = sub.order_count[sub.owner[pair_opt]]
    ends = np.cumsum(steps)
    best_key = incumbent
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    costed = 0
    start, budget = 0, min(chunk, 256)  # small first: a good incumbent prunes the rest early
    while start < len(pair_opt):
        done = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, done + budget, side="right")))
        idx = np.arange(start, min(stop, len(pair_opt)))
        start, budget = stop, min(2 * budget, chunk)
        if bound and best_key is not None:
            ahead = lex_less([kk[idx] for kk in low_keys], best_key)
            if not ahead[0]:
                break  # sorted by the bound: no later pair can beat the best either
            idx = idx[ahead]
        count = steps[idx]
        rows = np.repeat(idx, count)
        first = np.repeat(np.cumsum(count) - count, count)
        order_row = np.arange(len(rows)) - first + np.repeat(sub.order_start[sub.owner[pair_opt[idx]]], count)
        opt_rows, dram_rows = pair_opt[rows], pair_dram[rows]
        order1 = sub.orders[order_row]
        cost = combine(problem, drams.take(dram_rows), one,
                       onchip_finish(sw_all.take(opt_rows), batch.order[dram_rows], order1))
        costed += len(rows)
        i = best_index(objective, cost)
        key = tuple(float(kk[i]) for kk in objective_keys(objective, cost))
        if np.isfinite(key[0]) and (best_key is None or key < best_key):
            opt = sub.options[opt_rows[i]]
            level = Level(tiles=tuple(int(x) for x in opt[0]), fanout=tuple(int(x) for x in opt[1]),
                          order=tuple(Dim(int(d)) for d in order1[i]))
            mapping = Mapping(tiles=tuple(int(x) for x in batch.tiles[dram_rows[i]]),
                              order=tuple(Dim(int(d)) for d in batch.order[dram_rows[i]]), hoist=template.hoist,
                              layouts=template.layouts, levels=(level,))
            best_key = key
            best = (key, mapping, cost.take(i))
    return Found(best, evaluated, costed)


def step_cap(problem: Problem, objective: Objective, best: tuple[float, ...] | None) -> float | None:
    """The most compute steps a candidate can take and still not be worse than ``best`` (latency is
    at least the compute time, ``ceil(steps * op_factor / macs_per_pe)``); ``None`` when the
    objective does not bound it."""
    if best is None or objective is not Objective.LATENCY or not np.isfinite(best[0]):
        return None
    per_pe = problem.arch.pe_array.macs_per_pe_per_cycle
    return math.floor(best[0]) * per_pe / float(problem.op_factor) * (1 + 1e-12)


def onchip(problem: Problem, base: Mapping, objective: Objective, opts: OnChipOptions = OnChipOptions(), *,
           chunk: int = 1 << 15, sample: tuple[np.random.Generator, int] | None = None,
           base_orders: list[tuple[Dim, ...]] | None = None, bound: bool = True,
           option_chunk: int = 1 << 16, seconds: float | None = None) -> OnChip | None:
    """Best on-chip level under ``base`` (its DRAM level); ``None`` when nothing fits. ``sample``
    (generator, count): cost only ``count`` uniformly random levels (``sample_level``) instead of all.
    ``base_orders``: also choose the DRAM loop order among these (the on-chip stage one is shared).
    ``bound``: the safe lower-bound pruning of :func:`search_levels`; ``chunk``: candidates costed
    per vectorised step.

    The options are streamed (:func:`iter_level_options`), ``option_chunk`` at a time, each chunk
    searched with the best keys so far as the incumbent, so memory stays bounded however large the
    space (the result's keys are those of one search over every option). Without the divisor
    pruning (``opts.divisors`` off, a superset of the divisor space) and with ``bound``, the divisor
    space is searched first: its optimum is the first incumbent, and for the latency objective only
    options with at most :func:`step_cap` compute steps are built (the cap tightens as better ones
    are found); ``evaluated`` then counts the candidates built. ``seconds``: stop streaming after
    this much CPU time (the result is then the best found so far, ``complete`` false)."""
    drams = np.array([[int(d) for d in o] for o in (base_orders or [base.order])], dtype=np.int64)
    tiles = np.array([base.tiles])
    space = unpruned_space(problem, base.tiles)
    if sample is not None:
        options, orders = sample_level(problem, base.tiles, opts, *sample)
        if len(options) == 0:
            return None
        found = search_levels(problem, objective, Subspaces.of(tiles, [options], [orders]), drams, base,
                              bound=bound, chunk=chunk)
        if found.best is None:
            return None
        return OnChip(found.best[1], found.best[2], found.evaluated, space, found.costed)
    start = time.process_time()
    orders = level_orders(problem, base.tiles, opts)
    best: tuple[tuple[float, ...], Mapping, CostBatch] | None = None
    evaluated = costed = 0
    if bound and not opts.divisors:
        seed = onchip(problem, base, objective, replace(opts, divisors=True), chunk=chunk, base_orders=base_orders,
                      option_chunk=option_chunk)
        if seed is not None:
            best = (tuple(float(k[0]) for k in objective_keys(objective, seed.cost)), seed.mapping, seed.cost)
            evaluated, costed = seed.evaluated, seed.costed

    def cap() -> float | None:
        return step_cap(problem, objective, None if best is None else best[0]) if bound and not opts.divisors else None

    complete = True
    for options in iter_level_options(problem, base.tiles, opts, max_steps=cap, chunk=option_chunk):
        if seconds is not None and time.process_time() - start > seconds:
            complete = False
            break
        found = search_levels(problem, objective, Subspaces.of(tiles, [options], [orders]), drams, base,
                              bound=bound, chunk=chunk, incumbent=None if best is None else best[0])
        evaluated += found.evaluated
        costed += found.costed
        if found.best is not None:
            best = found.best
    if best is None:
        return None
    return OnChip(best[1], best[2], evaluated, space, costed, complete)


def compute_floor(problem: Problem, tiles0: np.ndarray, opts: OnChipOptions, *, rows: int = 2048) -> np.ndarray:
    """(k,) a lower bound of the compute cycles of every on-chip level ``opts`` allows under each
    level-3 tiling of ``tiles0`` (k, 8), L1 fit and utilisation bound ignored (dropping constraints
    only lowers the minimum).

    Along a dimension of length ``L`` cut into level-3 tiles of ``t0``, a fan-out ``f`` makes every
    level-3 tile of extent ``e`` take at least ``ceil(e / f)`` compute steps whatever the level-1
    tile (each step's longest child covers at least its share), so the steps are at least
    ``g(f) = (L // t0) ceil(t0 / f) + ceil((L % t0) / f)``; the model's compute time is the product
    over dimensions. The product is minimised over fan-outs (``f <= t0``; ``f`` divides ``t0`` when
    ``opts.divisors``; only ``opts.parallel`` dimensions; at most ``max_parallel`` dimensions above
    one; product at most the PEs) by a dynamic programme over dimensions, state (dimensions that fan
    out, product of the fan-outs)."""
    arch = problem.arch
    pes = arch.total_pes(problem.precision.input)
    most = min(opts.max_parallel, NDIMS)
    out = np.zeros(len(tiles0))
    for lo in range(0, len(tiles0), rows):
        t0_all = np.minimum(np.asarray(tiles0[lo:lo + rows], dtype=np.int64), problem.dims)
        n = len(t0_all)
        value = np.full((n, most + 1, pes + 1), np.inf)
        value[:, 0, 1] = 1.0
        for d in DIMS:
            length = int(problem.dims[d])
            t0 = t0_all[:, d]
            full, rem = length // t0, length % t0
            nxt = value * float(length)
            if opts.parallel is None or d in opts.parallel:
                for f in range(2, min(pes, int(t0.max())) + 1):
                    allowed = (t0 % f == 0) if opts.divisors else (t0 >= f)
                    if not allowed.any():
                        continue
                    g = np.where(allowed, full * -(-t0 // f) + -(-rem // f), np.inf).astype(np.float64)
                    top = pes // f
                    view = nxt[:, 1:, f:f * top + 1:f]
                    np.minimum(view, value[:, :most, 1:top + 1] * g[:, None, None], out=view)
            value = nxt
        out[lo:lo + n] = value.reshape(n, -1).min(axis=1)
    return np.ceil(out * float(problem.op_factor) / arch.pe_array.macs_per_pe_per_cycle)
