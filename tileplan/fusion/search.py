"""Exhaustive search of a fused group's mapping space, vectorised over (tile_p, tile_q).

The space: every tile_n, tile_p, tile_q of the last layer's output; tile_k = K or a power of two
below it; every overlap mode; every subset of layers with resident weights; no chunked map or one
chunked map with a power-of-two chunk (or, feeding a grouped layer, whole groups; ``map_chunks``);
both processing directions; every maximal unroll per layer.
Safe reductions (each keeps an optimum): ``alwani`` is never evaluated by default because it costs
exactly what ``reuse`` costs with a buffer at least as large (Eq. 9 >= 0); the direction and each
layer's unroll are chosen per candidate (the direction changes only the reuse buffer, the unroll
only that layer's compute cycles, and every objective grows with both).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch
from tileplan.dims import Dim
from tileplan.fusion.assemble import Choice, assemble, footprint, weight_footprint
from tileplan.fusion.bounds import SLACK, candidate_bound, config_bound
from tileplan.fusion.cost import FusedCost, GroupModel, Selection, shared_model
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.transformer_cost import search_transformer_sizes
from tileplan.search.memo import capacity_free_key
from tileplan.search.objective import Objective, best_index


@dataclass(frozen=True)
class GroupResult:
    """The best fused mapping of a group and its costs (a batch of one).

    ``space_size`` is the number of fused mappings the search stands for (every tile pair, discrete
    choice, direction and unroll); ``screened`` the (tile pair, discrete choice) candidates it looked
    at, ``evaluated`` those it fully costed after the safe pruning (``search_group``); ``configs``
    the discrete choices and ``configs_skipped`` those dismissed by their scalar bound alone.
    """

    group: FusedGroup
    mapping: FusedMapping
    cost: CostBatch
    executed_macs: int
    reuse_bytes: int
    evaluated: int
    space_size: float
    seconds: float
    screened: int = 0
    configs: int = 0
    configs_skipped: int = 0
    partition: dict[str, Any] | None = None  # the resource partition (``fusion.partition``) if restricted


def _powers_below(n: int) -> list[int]:
    out, p = [], 1
    while p < n:
        out.append(p)
        p *= 2
    return out


def map_chunks(group: FusedGroup, m: int) -> list[int]:
    """The chunks map ``m`` may be produced in (none if it is not chunkable): the powers of two
    below its channels and, for a grouped consumer, whole groups (channels per group times each
    divisor of the groups below them); a grouped consumer's chunks never straddle its groups."""
    if not group.chunkable(m):
        return []
    channels, consumer = group.layers[m].k_out, group.layers[m + 1]
    out = _powers_below(channels)
    if consumer.groups > 1:
        per_group = consumer.dims[Dim.C]
        out += [per_group * j for j in range(1, consumer.groups) if consumer.groups % j == 0]
    return sorted(c for c in set(out) if group.chunk_error(m, c) is None)


def chunk_options(group: FusedGroup) -> list[tuple[int, ...]]:
    """No chunked map, or one chunked map with one of its ``map_chunks``."""
    full = tuple(layer.k_out for layer in group.layers[:-1])
    out = [full]
    for m in range(len(full)):
        for c in map_chunks(group, m):
            out.append(full[:m] + (c,) + full[m + 1:])
    return out


def tile_k_options(group: FusedGroup, chunk: tuple[int, ...]) -> list[int]:
    last = group.last
    if last.groups > 1 or (chunk and chunk[-1] < group.layers[-2].k_out):
        return [last.k_out]
    return [last.k_out] + _powers_below(last.k_out)[::-1]


def _best(obj: Objective, costs: CostBatch) -> int:
    """``best_index`` restricted to the candidates reaching the minimum objective (-1: none fits)."""
    key = obj.key(costs)
    low = float(key.min())
    if not np.isfinite(low):
        return -1
    ties = np.flatnonzero(key == low)
    return int(ties[best_index(obj, costs.take(ties))]) if len(ties) > 1 else int(ties[0])


def search_group(group: FusedGroup, arch: Arch, objective: Objective | str = Objective.LATENCY, *,
                 overlaps: tuple[Overlap, ...] = (Overlap.RECOMPUTE, Overlap.REUSE),
                 residencies: list[tuple[bool, ...]] | None = None,
                 chunks: list[tuple[int, ...]] | None = None,
                 tile_ks: list[int] | None = None,
                 gm: GroupModel | None = None, outers: tuple[bool, ...] = (False, True),
                 prune: bool = True) -> GroupResult | None:
    """Best fused mapping of ``group`` (``None`` when no candidate fits on chip).

    ``overlaps``, ``residencies`` (per-layer resident flags), ``chunks`` (per-map chunk tuples) and
    ``tile_ks`` restrict the space, so a paper's strategy is this search on a subset (HW-Flow-Fusion:
    every weight resident; Ye et al.: chunked pairs); ``gm`` may restrict the tile sizes; ``outers``
    whether the chunk loop sits inside the tile steps (``False``) and/or outside (``True``, two-layer
    groups with a chunked map only, with streamed weights: residency changes nothing there but
    the footprint).

    ``prune`` (default) drops, provably without changing the result, the candidates that do not fit
    on chip (from the footprint alone, computed once for every residency), then every discrete
    choice whose scalar bound (``bounds.config_bound``) exceeds the best value so far, then the
    candidates whose bounds (``bounds.Bounds.beaten``) show they can neither beat nor tie the best
    key; only the rest is fully costed. Choices are still visited in the same order and a
    later one replaces the best only when strictly better, so the mapping found is the unpruned one.
    """
    return search_group_sizes(group, [arch], objective, overlaps=overlaps, residencies=residencies, chunks=chunks,
                              tile_ks=tile_ks, gm=gm, outers=outers, prune=prune)[0]


@dataclass
class _Track:
    """One capacity's search state in ``search_group_sizes``: what ``search_group`` keeps."""

    capacity: np.ndarray
    best_key: tuple[float, ...] | None = None
    best: tuple[FusedMapping, CostBatch, int, int] | None = None
    evaluated: int = 0
    skipped: int = 0


def search_group_sizes(group: FusedGroup, archs: Sequence[Arch], objective: Objective | str = Objective.LATENCY,
                       *, overlaps: tuple[Overlap, ...] = (Overlap.RECOMPUTE, Overlap.REUSE),
                       residencies: list[tuple[bool, ...]] | None = None,
                       chunks: list[tuple[int, ...]] | None = None,
                       tile_ks: list[int] | None = None,
                       gm: GroupModel | None = None, outers: tuple[bool, ...] = (False, True),
                       prune: bool = True) -> list[GroupResult | None]:
    """``search_group`` for each of ``archs``, accelerators that differ only in their memories'
    sizes (and names), in one pass: the discrete choices are visited once, and each candidate's
    footprint, bounds and costs are computed once for all sizes (none of them reads the capacity);
    per size, which candidates fit, the pruning and the best-so-far follow ``search_group`` exactly,
    so every result is the one ``search_group(group, archs[i], ...)`` returns (``tests``).

    Sizes whose capacities are not all below one of them (several memories growing differently),
    and ``prune=False``, are searched one by one. ``gm`` (restricted tile sizes, resource shares)
    is the model of ``archs[0]`` and only allowed with one accelerator."""
    if group.transformer is not None:  # an attention or MLP block: its own nest (``fusion.transformer_cost``)
        return [None if r is None else GroupResult(group, r.mapping, r.cost.cost, int(r.cost.executed_macs[0]), 0,
                                                   r.evaluated, float(r.evaluated), r.seconds, r.evaluated, r.configs)
                for r in search_transformer_sizes(group, archs, objective)]
    start = time.perf_counter()
    obj = Objective(objective)
    if not archs:
        return []
    key0 = capacity_free_key(archs[0])
    if any(capacity_free_key(a) != key0 for a in archs[1:]):
        raise ValueError("search_group_sizes: the accelerators differ in more than their memories' sizes")
    caps = [np.array([m.size_bytes for m in a.memories], dtype=np.float64) for a in archs]
    top = max(range(len(archs)), key=lambda i: (float(caps[i].sum()), -i))
    if gm is not None and len(archs) > 1:
        raise ValueError("search_group_sizes: a given model (gm) is for one accelerator")
    if len(archs) > 1 and (not prune or any(np.any(c > caps[top]) for c in caps)):
        return [search_group_sizes(group, [a], obj, overlaps=overlaps, residencies=residencies, chunks=chunks,
                                   tile_ks=tile_ks, outers=outers, prune=prune)[0] for a in archs]
    gm = gm or shared_model(group, archs[top])
    nl = len(group)
    if group.is_block:  # block groups: recompute, whole maps (``fusion.block``)
        overlaps, chunks, outers = (Overlap.RECOMPUTE,), [chunk_options(group)[0]], (False,)
    has_w = [layer.has_weights for layer in gm.layers]
    if residencies is None:
        residencies = [tuple(r) for r in product((True, False), repeat=nl)
                       if all(has or keep for has, keep in zip(has_w, r, strict=True))]
    tracks = [_Track(c) for c in caps]
    screened = configs = 0
    everything = Selection(gm)
    unroll_space = float(np.prod([len(gm.unroll_options(m)) for m in range(nl)]))
    double = 2 if archs[0].double_buffering else 1
    for tile_n in range(1, gm.layers[-1].n + 1):
        for overlap in overlaps:
            for chunk in chunk_options(group) if chunks is None else chunks:
                for tile_k, outer in product([k for k in tile_k_options(group, chunk)
                                              if tile_ks is None or k in tile_ks], outers):
                    if outer and (nl != 2 or chunk[0] >= gm.layers[0].k_out or tile_k < gm.layers[-1].k_out):
                        continue
                    need: np.ndarray | None = None  # on-chip bytes without the weights, per candidate and memory
                    for resident in residencies:
                        if outer and any(r and has for r, has in zip(resident, has_w, strict=True)):
                            continue
                        choice = Choice(tile_n, tile_k, overlap, resident, chunk, outer)
                        configs += 1
                        screened += gm.n
                        if not prune:
                            _visit(gm, obj, choice, tracks[0], None)
                            continue
                        if need is None:  # the footprint without weights does not depend on ``resident``
                            held, dbl, _, _ = footprint(gm, everything, choice, weights=False)
                            need = held + double * dbl
                        wfp = double * weight_footprint(gm, choice)
                        # Integral byte counts in float64: ``cap - need >= wfp`` is exact.
                        fit_top = np.all(caps[top][None, :] - need >= wfp, axis=1)
                        if not fit_top.any():
                            continue  # nothing fits the largest capacity, so none
                        bound: float | None = None
                        todo: list[tuple[_Track, np.ndarray]] = []
                        for t in tracks:
                            fit = fit_top if t.capacity is caps[top] else \
                                np.all(t.capacity[None, :] - need >= wfp, axis=1)
                            index = np.flatnonzero(fit)
                            if not len(index):
                                continue
                            if t.best_key is not None:
                                if bound is None:
                                    bound = config_bound(gm, obj, choice)
                                if bound > t.best_key[0] * (1 + SLACK):
                                    t.skipped += 1
                                    continue
                            todo.append((t, index))
                        bounded = [(t, index) for t, index in todo if t.best_key is not None]
                        if bounded:
                            union = _union(gm.n, [index for _, index in bounded])
                            bounds = candidate_bound(gm, Selection(gm, union), obj, choice,
                                                     [(np.searchsorted(union, index), t.best_key)
                                                      for t, index in bounded if t.best_key is not None])
                            for j, (t, index) in enumerate(todo):
                                if t.best_key is not None:
                                    beaten = bounds.take(np.searchsorted(union, index)).beaten(obj, t.best_key)
                                    todo[j] = (t, index[~beaten])
                        todo = [(t, index) for t, index in todo if len(index)]
                        if todo:
                            _visit_many(gm, obj, choice, todo)
    seconds = (time.perf_counter() - start) / len(archs)
    space = float(configs) * gm.n * 2 * unroll_space
    out: list[GroupResult | None] = []
    for t in tracks:
        if t.best is None:
            out.append(None)
            continue
        mapping, cost, executed, reuse = t.best
        out.append(GroupResult(group, mapping, cost, executed, reuse, t.evaluated, space, seconds, screened, configs,
                               t.skipped))
    return out


def _union(n: int, indices: list[np.ndarray]) -> np.ndarray:
    """The ascending union of index arrays into ``range(n)``."""
    if len(indices) == 1:
        return indices[0]
    mask = np.zeros(n, dtype=bool)
    for index in indices:
        mask[index] = True
    return np.flatnonzero(mask)


def _visit(gm: GroupModel, obj: Objective, choice: Choice, t: _Track, index: np.ndarray | None) -> None:
    """Cost the candidates ``index`` (all: None) of one discrete choice and keep the best if it is
    strictly better than ``t``'s (``search_group``'s rule)."""
    fc, picks = assemble(gm, tile_n=choice.tile_n, tile_k=choice.tile_k, overlap=choice.overlap,
                         resident=choice.resident, chunk=choice.chunk, chunk_outer=choice.chunk_outer, index=index)
    _offer(gm, obj, choice, t, fc, obj.key(fc.cost), picks, index, np.arange(len(fc.executed_macs)))


def _visit_many(gm: GroupModel, obj: Objective, choice: Choice, todo: list[tuple[_Track, np.ndarray]]) -> None:
    """``_visit`` for several capacities at once: one assembly of the union of their candidates
    (values on a subset are exactly the full ones taken at it: ``Selection``)."""
    union = _union(gm.n, [index for _, index in todo])
    fc, picks = assemble(gm, tile_n=choice.tile_n, tile_k=choice.tile_k, overlap=choice.overlap,
                         resident=choice.resident, chunk=choice.chunk, chunk_outer=choice.chunk_outer, index=union)
    keys = obj.key(fc.cost)
    for t, index in todo:
        _offer(gm, obj, choice, t, fc, keys, picks, index, np.searchsorted(union, index))


def _offer(gm: GroupModel, obj: Objective, choice: Choice, t: _Track, fc: FusedCost, keys: np.ndarray,
           picks: list[np.ndarray], index: np.ndarray | None, rows: np.ndarray) -> None:
    """Keep the best of the assembled rows ``rows`` (candidates ``index``; ``keys`` the objective of
    every assembled row) if strictly better than ``t``'s best: ``_best`` then the key comparison,
    skipped when the rows' least objective already exceeds the best's."""
    t.evaluated += len(rows)
    low = float(keys[rows].min())
    if not np.isfinite(low) or (t.best_key is not None and low > t.best_key[0]):
        return
    cost = fc.cost if len(rows) == len(fc.executed_macs) else fc.cost.take(rows)
    i = _best(obj, cost)
    key = tuple(float(k[i]) for k in [obj.key(cost), *obj.tie_keys(cost)])
    if t.best_key is None or key < t.best_key:
        r = int(rows[i])
        ip, iq = divmod(r if index is None else int(index[i]), gm.shape[1])
        unroll = tuple(tuple(int(x) for x in gm.unroll_options(m)[picks[m][r]]) for m in range(len(gm.layers)))
        mapping = FusedMapping(choice.tile_n, int(gm.rows.tiles[ip]), int(gm.cols.tiles[iq]), choice.tile_k,
                               choice.overlap, Direction.COLS if fc.direction[r] else Direction.ROWS,
                               choice.resident, choice.chunk, unroll, choice.chunk_outer)
        t.best_key = key
        t.best = (mapping, cost.take(i), int(fc.executed_macs[r]), int(fc.reuse_bytes[r]))
