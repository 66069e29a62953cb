"""MARVEL's on-chip search (§3.2, Alg. 1) under a fixed level-3 (DRAM) mapping: the best
candidate of the on-chip subspace (``search.marvel_onchip_space``: level-2 step orders, level-2
tiles, level-1 tiles, and the pruning options), costed by the multi-level model (``cost.levels``).

Beyond the paper, ``bound`` prunes safely: candidates whose lower bound over every loop order is
worse than the best found are never costed (the result is unchanged). :func:`search_levels`
searches the on-chip levels of many level-3 tilings at once (the joint search); :func:`onchip` one
tiling's, streaming its options.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.levels import combine, onchip_bound, onchip_finish, onchip_sweep
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS, Dim
from tileplan.mapping import Level, Mapping
from tileplan.search.marvel_onchip_space import (
    OnChipOptions,
    iter_level_options,
    level_orders,
    sample_level,
    unpruned_space,
)
from tileplan.search.objective import Objective, best_index


@dataclass(frozen=True)
class OnChip:
    """The best on-chip mapping under one level-3 mapping."""

    mapping: Mapping
    cost: CostBatch
    evaluated: int  # (level tiles, order) candidates left after the pruning options
    space: float  # level-1 tiles x fan-outs x orders before pruning
    costed: int = 0  # ... of which the bound did not rule out (those the model costed)
    complete: bool = True  # False: a time budget stopped the search early (the best found so far)



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
    (generator, count): cost only ``count`` uniformly random levels
    (``marvel_onchip_space.sample_level``) instead of all.
    ``base_orders``: also choose the DRAM loop order among these (the on-chip stage one is shared).
    ``bound``: the safe lower-bound pruning of :func:`search_levels`; ``chunk``: candidates costed
    per vectorised step.

    The options are streamed (``marvel_onchip_space.iter_level_options``), ``option_chunk`` at a
    time, each chunk searched with the best keys so far as the incumbent, so memory stays bounded
    however large the space (the result's keys are those of one search over every option). Without the divisor
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
