"""TSO (Sousa et al., Alg. 1-3): tensor slicing for multicore NPUs as a restriction of the general space.

For a multiply-accumulate layer, every candidate is a :class:`~tileplan.mapping.Mapping` with

* a cluster partition (Alg. 2): ``KS`` splits the filters over the clusters, ``KS&OFM`` splits the
  filters and the output rows in a grid (every factorisation of the cluster count with both
  factors > 1), ``OFM`` splits the output rows;
* the filters of a cluster distributed over its cores (the input tile is then multicast to them);
  balanced parts give the remainder to the first clusters/cores (``mapping.balanced_parts``);
* a core schedule (Alg. 3, Figs. 4-6): ``IS`` keeps every filter of the core on chip and walks rows,
  columns, then channels (Eq. 3); ``OS`` walks rows, columns, filter tiles, channels (Eq. 4); ``WS``
  walks filter tiles, rows, columns, channels with each W tile holding all channels of its filters
  (weights hoisted over C, Eq. 5);
* tiles: T_R (output rows), T_C (output columns), T_N (input channels) over every value whose input
  tile fits its memory (Eq. 1-2), and T_M the largest filter count whose W and OUT tiles fit.

The depthwise case uses the groups as the filters (C = K = 1 per group). Every candidate is costed
by the one model (``cost.model.evaluate``): α_in, α_w, α_out (Eq. 3-5), T_MAC (Eq. 7-8) and the
DRAM time (Alg. 4, Eq. 9) are that model's reload factors, compute cycles and burst time.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import CoreGrid, Problem
from tileplan.dims import NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.errors import InfeasibleError, TileplanError
from tileplan.mapping import Mapping
from tileplan.search.exhaustive import to_mapping
from tileplan.search.objective import Objective, best_index
from tileplan.search.result import SearchResult
from tileplan.search.tso_bound import lower_bound
from tileplan.workload.layer import OpKind


class Partition(StrEnum):
    """How a layer is sliced over the clusters (TSO Alg. 2)."""

    KS = "KS"
    KS_OFM = "KS&OFM"
    OFM = "OFM"


class Schedule(StrEnum):
    """How a core walks its tiles (TSO Sec. IV-D)."""

    IS = "IS"
    OS = "OS"
    WS = "WS"


#: Layers TSO slices as the paper does (nmp_conv2d / nmp_percept). Pools and adds go through the same
#: space with their channels as the "filters" (the paper runs them with NMP's own kernels).
TSO_OPS = frozenset({OpKind.CONV, OpKind.GROUPED_CONV, OpKind.DEPTHWISE, OpKind.POINTWISE, OpKind.FC})


@dataclass(frozen=True)
class Slicing:
    """One cluster partition with its core split."""

    partition: Partition
    cluster_split: tuple[int, ...]
    core_split: tuple[int, ...]


def filter_dim(problem: Problem) -> Dim:
    """The dimension TSO calls filters (M): K, or G for a depthwise layer (one filter per group)."""
    dims = problem.dims
    return Dim.G if dims[Dim.K] == 1 and dims[Dim.G] > 1 else Dim.K


def parse_partition(text: str) -> Partition:
    """``KS``, ``KS&OFM`` (also ``KS_OFM``, ``KSOFM``) or ``OFM``, any case."""
    key = text.strip().upper().replace("_", "&")
    key = "KS&OFM" if key == "KSOFM" else key
    try:
        return Partition(key)
    except ValueError:
        raise TileplanError(f"unknown TSO partition {text!r}; choose KS, KS&OFM or OFM") from None


def parse_schedule(text: str) -> Schedule:
    try:
        return Schedule(text.strip().upper())
    except ValueError:
        raise TileplanError(f"unknown TSO schedule {text!r}; choose IS, OS or WS") from None


def slicings(problem: Problem, partitions: tuple[Partition, ...] = tuple(Partition)) -> list[Slicing]:
    """Every cluster partition of Alg. 2 (for any cluster count) with the filters split over the cores
    of a cluster. Factors are capped at the dimension's size; a partition identical to an earlier one
    after capping is dropped."""
    cores = problem.arch.cores
    f = filter_dim(problem)
    allowed = {Dim[d] for d in cores.split_dims}
    dims = problem.dims
    n = cores.clusters

    def cap(d: Dim, factor: int) -> int:
        return max(1, min(factor, int(dims[d]))) if d in allowed else 1

    grids: list[tuple[Partition, dict[Dim, int]]] = []
    for part in partitions:
        if part is Partition.KS:
            grids.append((part, {f: n}))
        elif part is Partition.OFM:
            grids.append((part, {Dim.P: n}))
        else:
            grids.extend((part, {f: a, Dim.P: n // a}) for a in range(2, n) if n % a == 0)
    out: list[Slicing] = []
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    for part, factors in grids:
        cl = [1] * NDIMS
        for d, k in factors.items():
            cl[d] = cap(d, k)
        co = [1] * NDIMS
        co[f] = cap(f, min(cores.cores_per_cluster, -(-int(dims[f]) // cl[f])))
        key = (tuple(cl), tuple(co))
        if key not in seen:
            seen.add(key)
            out.append(Slicing(part, key[0], key[1]))
    return out


def _order(schedule: Schedule, f: Dim) -> list[Dim]:
    """Loop order of a schedule, outermost first (the other of K/G and N stay outermost)."""
    other = Dim.G if f is Dim.K else Dim.K
    inner = {Schedule.IS: [Dim.P, Dim.Q, Dim.C, f], Schedule.OS: [Dim.P, Dim.Q, f, Dim.C],
             Schedule.WS: [f, Dim.P, Dim.Q, Dim.C]}[schedule]
    return [Dim.N, other, *inner, Dim.R, Dim.S]


def candidates(problem: Problem, sl: Slicing, schedule: Schedule, grid: CoreGrid | None = None) -> MappingBatch:
    """Every (T_R, T_C, T_N) of Alg. 3 whose input tile fits, with T_M maximal (empty if none fit)."""
    layer = problem.layer
    grid = grid or problem.core_grid(sl.cluster_split, sl.core_split)
    longest = grid.max_length
    f = filter_dim(problem)
    prec = problem.precision
    factor = 2 if problem.arch.double_buffering else 1
    cap = problem.capacity_bytes.astype(np.float64) / factor
    mem = problem.memory_of_operand
    r, s = int(problem.dims[Dim.R]), int(problem.dims[Dim.S])
    # (T_R, T_C) pairs and the input rows x columns each needs (TSO Eq. 1, clipped to the input).
    t_r, t_c = (a.ravel() for a in np.meshgrid(np.arange(1, longest[Dim.P] + 1),
                                               np.arange(1, longest[Dim.Q] + 1), indexing="ij"))
    t_h = np.minimum((t_r - 1) * layer.stride[0] + (r - 1) * layer.dilation[0] + 1, problem.in_h)
    t_l = np.minimum((t_c - 1) * layer.stride[1] + (s - 1) * layer.dilation[1] + 1, problem.in_w)
    # Per memory: bytes that do not grow with T_M, and bytes per filter, as functions of T_N.
    in_px = t_h * t_l * prec.input * layer.input_count
    n_c = longest[Dim.C]
    hoist_c = schedule is Schedule.WS
    # Largest T_N whose input tile fits (the input grows with T_M only for depthwise: checked below).
    in_room = cap[mem[Operand.INPUT]]
    max_tn = np.minimum(n_c, np.floor(in_room / in_px)).astype(np.int64)
    keep = max_tn >= 1
    t_r, t_c, t_h, t_l, in_px, max_tn = (a[keep] for a in (t_r, t_c, t_h, t_l, in_px, max_tn))
    counts = max_tn
    idx = np.repeat(np.arange(len(t_r)), counts)
    starts = np.cumsum(counts) - counts
    t_n = np.arange(len(idx)) - np.repeat(starts, counts) + 1
    t_r, t_c, in_px = t_r[idx], t_c[idx], in_px[idx]
    fixed = np.zeros((len(idx), len(cap)))
    per_filter = np.zeros((len(idx), len(cap)))
    boxes = {Operand.INPUT: t_n * in_px,
             Operand.WEIGHT: (n_c if hoist_c else t_n) * r * s * prec.weight,
             Operand.OUTPUT: t_r * t_c * prec.psum}
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        target = per_filter if f in RELEVANT[op] else fixed
        target[:, mem[op]] += boxes[op]
    room = cap[None, :] - fixed
    with np.errstate(divide="ignore"):
        limit = np.where(per_filter > 0, np.floor(room / np.where(per_filter > 0, per_filter, 1)), np.inf)
    fits = np.logical_and.reduce([col >= 0 for col in room.T])  # few memories: column-wise is fastest
    t_m_max = int(longest[f])
    t_m = np.minimum(np.minimum.reduce(list(limit.T)), t_m_max)
    if schedule is Schedule.IS:  # every filter of the core at once (Fig. 4)
        ok = fits & (t_m >= t_m_max)
        t_m = np.full(len(t_m), t_m_max)
    else:
        ok = fits & (t_m >= 1)
    n = int(ok.sum())
    tiles = np.ones((n, NDIMS), dtype=np.int64)
    tiles[:, f] = t_m[ok]
    tiles[:, Dim.C] = t_n[ok]
    tiles[:, Dim.P] = t_r[ok]
    tiles[:, Dim.Q] = t_c[ok]
    tiles[:, Dim.R] = r
    tiles[:, Dim.S] = s
    hoist = np.zeros((n, 3, NDIMS), dtype=bool)
    if hoist_c:
        hoist[:, Operand.WEIGHT, Dim.C] = True
    # Rows shared by every candidate stay read-only broadcast views (``take`` copies what it picks).
    order = np.broadcast_to(np.array([int(d) for d in _order(schedule, f)], dtype=np.int64), (n, NDIMS))
    layouts = np.broadcast_to(np.array(MappingBatch.default_layout_codes(), dtype=np.int64), (n, 3))
    unroll = np.broadcast_to(np.ones(NDIMS, dtype=np.int64), (n, NDIMS))
    return MappingBatch(tiles, order, hoist, unroll, layouts, sl.cluster_split, sl.core_split)


def space_size(problem: Problem, sl: Slicing, grid: CoreGrid | None = None) -> int:
    """Points of Alg. 3's loops (T_R x T_C x T_N) for one slicing, before the memory checks."""
    longest = (grid or problem.core_grid(sl.cluster_split, sl.core_split)).max_length
    return int(longest[Dim.P]) * int(longest[Dim.Q]) * int(longest[Dim.C])


def tso(problem: Problem, objective: Objective, *, fix_partition: str | None = None,
        fix_schedule: str | None = None, chunk: int = 1024) -> SearchResult:
    """Best mapping of TSO's space (Alg. 1-3) under ``objective``; ``fix_partition`` /
    ``fix_schedule`` restrict it to one cluster partition or core schedule (the fixed baselines of
    Table I and Figs. 12-13); a layer none of whose fixed tilings fits gets TSO's unrestricted choice.

    Every candidate gets a lower bound (``tso_bound``); candidates are costed by the model in chunks,
    lowest bound first, until no remaining bound can beat the best found. The choice is the one
    costing every candidate would make (same objective value).
    """
    t0 = time.perf_counter()
    parts = (parse_partition(fix_partition),) if fix_partition else tuple(Partition)
    scheds = (parse_schedule(fix_schedule),) if fix_schedule else tuple(Schedule)
    slices = slicings(problem, parts)
    varying = np.zeros(NDIMS, dtype=bool)  # the tiles Alg. 3 chooses: T_M, T_N, T_R, T_C
    varying[[filter_dim(problem), Dim.C, Dim.P, Dim.Q]] = True
    pools: list[tuple[Slicing, MappingBatch, np.ndarray, np.ndarray]] = []
    space = 0.0
    for sl in slices:
        grid = problem.core_grid(sl.cluster_split, sl.core_split)
        space += space_size(problem, sl, grid) * len(scheds)
        for sched in scheds:
            batch = candidates(problem, sl, sched, grid)
            if len(batch):
                bound = lower_bound(problem, objective, batch, grid, varying)
                rank = np.argsort(bound, kind="stable")
                pools.append((sl, batch, rank, bound[rank]))
    best_key: tuple[float, ...] | None = None
    best = None
    evaluated = 0
    heap = [(float(b[0]), i, 0) for i, (_, _, _, b) in enumerate(pools)]
    heapq.heapify(heap)
    while heap:
        low, i, start = heapq.heappop(heap)
        if best_key is not None and low > best_key[0]:
            break
        sl, batch, rank, bound = pools[i]
        stop = min(start + chunk, len(batch))
        sub = batch.take(rank[start:stop])
        costs = evaluate(problem, sub)
        evaluated += len(sub)
        j = best_index(objective, costs)
        key = tuple(float(k[j]) for k in [objective.key(costs), *objective.tie_keys(costs)])
        if np.isfinite(key[0]) and (best_key is None or key < best_key):
            best_key = key
            best = (sl, sub.take(np.array([j])), costs.take(j))
        if stop < len(batch):
            heapq.heappush(heap, (float(bound[stop]), i, stop))
    if best is None and (fix_partition or fix_schedule):
        # A fixed baseline with no tiling that fits this layer (e.g. IS when the core's filters
        # cannot all be on chip) runs the layer as TSO would.
        return tso(problem, objective, chunk=chunk)
    if best is None:
        raise InfeasibleError(f"no TSO tiling of layer {problem.layer.name!r} fits {problem.arch.name}; "
                              f"use --strategy exhaustive")
    sl, row, cost = best
    mapping = to_mapping(problem, row.tiles[0], row.order[0], row.unroll[0], (sl.cluster_split, sl.core_split),
                         row.hoist[0])
    return SearchResult("tso", mapping, cost, evaluated, space, time.perf_counter() - t0, len(slices), len(slices))


def describe(problem: Problem, m: Mapping) -> tuple[Partition, Schedule]:
    """The partition and schedule a ``tso`` mapping stands for (for reports)."""
    f = filter_dim(problem)
    part = Partition.OFM if m.cluster_split[f] == 1 else (
        Partition.KS if m.cluster_split[Dim.P] == 1 else Partition.KS_OFM)
    if m.hoist[Operand.WEIGHT]:
        return part, Schedule.WS
    pos = {d: i for i, d in enumerate(m.order)}
    return part, (Schedule.IS if pos[Dim.C] < pos[f] else Schedule.OS)


__all__ = ["Partition", "Schedule", "Slicing", "candidates", "describe", "slicings", "tso"]
