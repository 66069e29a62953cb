"""Exhaustive search of a fused group's mapping space, vectorised over (tile_p, tile_q).

The space: every tile_n, tile_p, tile_q of the last layer's output; tile_k = K or a power of two
below it; every overlap mode; every subset of layers with resident weights; no chunked map or one
chunked map with a power-of-two chunk; both processing directions; every maximal unroll per layer.
Safe reductions (each keeps an optimum): ``alwani`` is never evaluated by default because it costs
exactly what ``reuse`` costs with a buffer at least as large (Eq. 9 >= 0); the direction and each
layer's unroll are chosen per candidate (the direction changes only the reuse buffer, the unroll
only that layer's compute cycles, and every objective grows with both).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch
from tileplan.fusion.assemble import Choice, assemble, footprint, weight_footprint
from tileplan.fusion.bounds import SLACK, candidate_bound, config_bound
from tileplan.fusion.cost import GroupModel, Selection
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
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


def chunk_options(group: FusedGroup) -> list[tuple[int, ...]]:
    """No chunked map, or one chunked map with a power-of-two chunk below its channels."""
    full = tuple(layer.k_out for layer in group.layers[:-1])
    out = [full]
    for m in range(len(full)):
        if group.chunkable(m):
            for c in _powers_below(full[m]):
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
    start = time.perf_counter()
    obj = Objective(objective)
    gm = gm or GroupModel(group, arch)
    nl = len(group)
    has_w = [layer.has_weights for layer in gm.layers]
    if residencies is None:
        residencies = [tuple(r) for r in product((True, False), repeat=nl)
                       if all(has or keep for has, keep in zip(has_w, r, strict=True))]
    best_key: tuple[float, ...] | None = None
    best: tuple[FusedMapping, CostBatch, int, int] | None = None
    evaluated = screened = configs = skipped = 0
    everything = Selection(gm)
    unroll_space = float(np.prod([len(gm.unroll_options(m)) for m in range(nl)]))
    double = 2 if arch.double_buffering else 1
    capacity = gm.problems[0].capacity_bytes.astype(np.float64)
    for tile_n in range(1, gm.layers[-1].n + 1):
        for overlap in overlaps:
            for chunk in chunk_options(group) if chunks is None else chunks:
                for tile_k, outer in product([k for k in tile_k_options(group, chunk)
                                              if tile_ks is None or k in tile_ks], outers):
                    if outer and (nl != 2 or chunk[0] >= gm.layers[0].k_out or tile_k < gm.layers[-1].k_out):
                        continue
                    room: np.ndarray | None = None  # on-chip bytes left for the weights, per candidate and memory
                    for resident in residencies:
                        if outer and any(r and has for r, has in zip(resident, has_w, strict=True)):
                            continue
                        choice = Choice(tile_n, tile_k, overlap, resident, chunk, outer)
                        configs += 1
                        screened += gm.n
                        index: np.ndarray | None = None
                        if prune:
                            if room is None:  # the footprint without weights does not depend on ``resident``
                                held, dbl, _, _ = footprint(gm, everything, choice, weights=False)
                                room = capacity[None, :] - (held + double * dbl)
                            index = np.flatnonzero(np.all(room >= double * weight_footprint(gm, choice), axis=1))
                            if not len(index):
                                continue
                            if best_key is not None:
                                if config_bound(gm, obj, choice) > best_key[0] * (1 + SLACK):
                                    skipped += 1
                                    continue
                                bounds = candidate_bound(gm, Selection(gm, index), obj, choice)
                                index = index[~bounds.beaten(obj, best_key)]
                                if not len(index):
                                    continue
                        fc, picks = assemble(gm, tile_n=tile_n, tile_k=tile_k, overlap=overlap, resident=resident,
                                             chunk=chunk, chunk_outer=outer, index=index)
                        evaluated += len(fc.executed_macs)
                        i = _best(obj, fc.cost)
                        if i < 0:
                            continue
                        key = tuple(float(k[i]) for k in [obj.key(fc.cost), *obj.tie_keys(fc.cost)])
                        if best_key is None or key < best_key:
                            ip, iq = divmod(i if index is None else int(index[i]), gm.shape[1])
                            unroll = tuple(tuple(int(x) for x in gm.unroll_options(m)[picks[m][i]])
                                           for m in range(nl))
                            mapping = FusedMapping(tile_n, int(gm.rows.tiles[ip]), int(gm.cols.tiles[iq]), tile_k,
                                                   overlap, Direction.COLS if fc.direction[i] else Direction.ROWS,
                                                   resident, chunk, unroll, outer)
                            best_key = key
                            best = (mapping, fc.cost.take(i), int(fc.executed_macs[i]), int(fc.reuse_bytes[i]))
    if best is None:
        return None
    mapping, cost, executed, reuse = best
    space = float(configs) * gm.n * 2 * unroll_space
    return GroupResult(group, mapping, cost, executed, reuse, evaluated, space, time.perf_counter() - start,
                       screened, configs, skipped)
