"""The network planner: cut a network into fused groups and single layers.

Candidate groups follow HW-Flow-Fusion §4.4: from a start layer, grow the group one layer at a
time (two layers first) while it stays a legal chain (``group.chain_error``: a group never hides a
map another branch reads from DRAM; an add's or a concat's other inputs are read from DRAM, which
is legal: their producers come earlier in the topological order and wrote them) and some fused
mapping fits on chip, up to ``max_group`` long (``block.group_length``: the layers with a compute
window -- convolutions, pools -- not the adds and concats joining them). ``every_start`` (default)
starts at every layer; without it, as the paper does, the next start is the first layer that could
not be fused.
Identical groups (same layer signatures and DRAM-input places) are searched once.

The cut is a dynamic programme over the topological order: ``best[i]`` is the best plan of the
first ``i`` layers, ending either with layer ``i - 1`` alone (its best unfused plan) or with a
candidate group ending there. Latency, energy and DRAM bytes add up over segments, so the DP is
exact for them; for the products (EDP, perf-per-byte) the DP minimises a linearisation around the
current plan, a few times, and keeps the best true value. All-single-layer is always a candidate,
so a fused plan is never worse than the unfused one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.fusion.block import block_segments, group_ends, group_of
from tileplan.fusion.group import FusedGroup, chain_error
from tileplan.fusion.plan import FusionPlan, GroupPlan, sum_costs
from tileplan.fusion.search import GroupResult, search_group_sizes
from tileplan.fusion.transformer import transformer_spans
from tileplan.parallel import run_parallel
from tileplan.plan import LayerCost, NetworkPlan
from tileplan.search.objective import Objective
from tileplan.workload.network import Network

Progress = Callable[[int, int, str], None]
#: How one candidate group is searched (default ``search_group``: the whole fused space); a paper's
#: fused strategies restrict it (``fusion.ye.group_searcher``).
GroupSearch = Callable[[FusedGroup, Arch, Objective], "GroupResult | None"]


def _vector(cost: LayerCost) -> np.ndarray:
    """(latency cycles, energy pJ, DRAM bytes, DRAM bursts) of one segment."""
    return np.array([cost.latency_cycles, cost.energy_pj, cost.dram_bytes, cost.bursts])


def _tie_vector(v: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A segment's sort key under linear ``weights``: the weighted value, then the per-layer search's
    tie-break (``Objective.tie_keys``: latency, DRAM bytes, energy, bursts). Every entry adds up over
    segments, so comparing sums lexicographically is exact for the DP. ``v``: (latency, energy, DRAM
    bytes[, bursts]) -- a 3-vector has no bursts (0)."""
    bursts = float(v[3]) if len(v) > 3 else 0.0
    return np.array([float(weights @ v[:3]), float(v[0]), float(v[2]), float(v[1]), bursts])


#: How one candidate group is searched at several accelerators differing only in capacity, one
#: result per accelerator (default ``search_group_sizes``; ``fusion.ye.group_sizes_searcher``).
SizesSearch = Callable[[FusedGroup, Sequence[Arch], Objective], "list[GroupResult | None]"]


def _search(args: tuple[FusedGroup, Sequence[Arch], Objective, GroupSearch | None, SizesSearch | None]
            ) -> list[GroupResult | None]:
    group, archs, objective, searcher, sizes_searcher = args
    if sizes_searcher is not None:
        return sizes_searcher(group, archs, objective)
    if searcher is not None:
        return [searcher(group, arch, objective) for arch in archs]
    return search_group_sizes(group, archs, objective)


def candidate_groups(network: Network, arch: Arch, objective: Objective, *, max_group: int = 4,
                     every_start: bool = True, jobs: int = 1, progress: Progress | None = None,
                     searcher: GroupSearch | None = None, merges: bool | None = None, count_joins: bool = False
                     ) -> dict[tuple[int, int], tuple[GroupResult, str | None]]:
    """Feasible groups as ``{(start, end): (result, cached_from)}`` (layers ``start..end-1``).

    Every legal chain of two or more layers, at most ``max_group`` long (``block.group_length``;
    ``count_joins``: adds and concats count too), is searched once per distinct signature (in
    ``jobs`` processes); the §4.4 growth rule is then applied to the results. ``merges``: whether
    adds and concats may join groups (their other inputs read from DRAM); by default only with the
    general search (``searcher`` None) -- the papers' restricted searches fuse windowed chains.
    """
    return candidate_groups_sizes(network, [arch], objective, max_group=max_group, every_start=every_start,
                                  jobs=jobs, progress=progress, searcher=searcher, merges=merges,
                                  count_joins=count_joins)[0]


def candidate_groups_sizes(network: Network, archs: Sequence[Arch], objective: Objective, *, max_group: int = 4,
                           every_start: bool = True, jobs: int = 1, progress: Progress | None = None,
                           searcher: GroupSearch | None = None, sizes_searcher: SizesSearch | None = None,
                           merges: bool | None = None, count_joins: bool = False
                           ) -> list[dict[tuple[int, int], tuple[GroupResult, str | None]]]:
    """``candidate_groups`` for each of ``archs`` (accelerators that differ only in on-chip capacity),
    every distinct chain searched once for all of them (``sizes_searcher``, default
    ``search_group_sizes``; a one-accelerator ``searcher`` is run per accelerator). ``merges`` by
    default only with the general search (neither searcher given)."""
    merge = (searcher is None and sizes_searcher is None) if merges is None else merges
    layers = network.layers
    n = len(layers)
    owner: dict[tuple[object, ...], str] = {}
    todo: list[tuple[object, ...]] = []
    groups: dict[tuple[object, ...], FusedGroup] = {}
    chains: dict[tuple[int, int], tuple[object, ...]] = {}

    def add(seg: tuple[int, int], group: FusedGroup) -> None:
        """Candidate ``group`` for segment ``seg``, searched once per distinct group (its signature)."""
        key = group.signature()
        chains[seg] = key
        if key not in owner:
            owner[key] = group.name
            groups[key] = group
            todo.append(key)

    for start in range(n - 1):
        for end in group_ends(layers, start, max_group, count_joins=count_joins):
            chain = list(layers[start:end])
            if chain_error(chain, network, merges=merge) is not None:
                break
            add((start, end), group_of(network, [x.name for x in chain]))
    blocks = block_segments(network, max_group, list(chains), count_joins=count_joins) if merge else {}
    for seg, group in blocks.items():  # branches and joins (``fusion.block``), beside the chains
        add(seg, group)
    # Attention and MLP blocks (``fusion.transformer``): one candidate each, whatever ``max_group``, with
    # the general search (the papers' restricted searches fuse windowed chains only).
    transformers = transformer_spans(network) if merge else []
    for start, end in transformers:
        add((start, end), FusedGroup.of(network, [x.name for x in layers[start:end]]))
    args = [(groups[key], list(archs), objective, searcher, sizes_searcher) for key in todo]
    results: dict[tuple[object, ...], list[GroupResult | None]] = {}
    for done, (i, res) in enumerate(run_parallel(_search, args, jobs=max(1, jobs)), start=1):
        results[todo[i]] = res
        if progress:
            progress(done, len(todo), owner[todo[i]])
    out = []
    for a in range(len(archs)):
        found: dict[tuple[int, int], tuple[GroupResult, str | None]] = {}
        start = 0
        while start < n - 1:
            end = start + 2
            while (start, end) in chains:
                result = results[chains[(start, end)]][a]
                if result is None:
                    break
                name = "+".join(x.name for x in layers[start:end])
                key_owner = owner[chains[(start, end)]]
                found[(start, end)] = (result, None if key_owner == name else key_owner)
                end += 1
            # HW-Flow-Fusion restarts from the first layer that could not join (``end - 1``).
            start = start + 1 if every_start else max(start + 1, end - 1)
        for seg in [*blocks, *transformers]:  # every block or transformer group that fits is a candidate
            result = results[chains[seg]][a]
            if result is not None:
                name = "+".join(x.name for x in layers[seg[0]:seg[1]])
                found[seg] = (result, None if owner[chains[seg]] == name else owner[chains[seg]])
        out.append(found)
    return out


def _dp(singles: list[np.ndarray], groups: dict[tuple[int, int], np.ndarray], weights: np.ndarray
        ) -> list[tuple[int, int]]:
    """Segments (start, end) of the cheapest cut under the linear ``weights``; ties broken as the
    per-layer search breaks them (``_tie_vector``), then by the earlier choice (single layers first,
    groups in the order given)."""
    n = len(singles)
    best: list[tuple[float, ...]] = [(0.0,) * 5] + [()] * n
    choice: list[tuple[int, int]] = [(0, 0)] * (n + 1)
    ending: dict[int, list[tuple[int, int]]] = {}
    for seg in groups:
        ending.setdefault(seg[1], []).append(seg)
    for i in range(1, n + 1):
        best[i] = tuple(np.add(best[i - 1], _tie_vector(singles[i - 1], weights)).tolist())
        choice[i] = (i - 1, i)
        for j, e in ending.get(i, []):
            value = tuple(np.add(best[j], _tie_vector(groups[(j, e)], weights)).tolist())
            if value < best[i]:
                best[i], choice[i] = value, (j, e)
    segs = []
    i = n
    while i > 0:
        segs.append(choice[i])
        i = choice[i][0]
    return segs[::-1]


def choose_cut(objective: Objective, singles: list[np.ndarray], groups: dict[tuple[int, int], np.ndarray]
               ) -> list[tuple[int, int]]:
    """The cut minimising ``objective`` over segments with (latency cycles, energy pJ, DRAM bytes[,
    bursts]) vectors; among cuts of equal value, the least latency, then DRAM bytes, energy, bursts
    (the per-layer search's order, ``search.objective.best_index``)."""
    all_single = [(i, i + 1) for i in range(len(singles))]

    def total(segs: list[tuple[int, int]]) -> np.ndarray:
        return np.sum([singles[s] if e == s + 1 else groups[(s, e)] for s, e in segs], axis=0)

    def key(segs: list[tuple[int, int]]) -> tuple[float, ...]:
        tot = total(segs)
        lat, en, dr = (float(x) for x in tot[:3])
        bursts = float(tot[3]) if len(tot) > 3 else 0.0
        return (float(objective.combine(lat, en, dr)), lat, dr, en, bursts)

    unit = {Objective.LATENCY: 0, Objective.ENERGY: 1, Objective.DRAM: 2}
    if objective in unit:
        weights = np.zeros(3)
        weights[unit[objective]] = 1.0
        return _dp(singles, groups, weights)
    best = all_single
    current = all_single
    for _ in range(4):  # a product A*B: minimise B0*A + A0*B around the current plan
        lat, en, dr = total(current)[:3]
        weights = np.array([en, lat, 0.0]) if objective is Objective.EDP else np.array([dr, 0.0, lat])
        current = _dp(singles, groups, weights)
        if key(current) < key(best):
            best = current
    return best


def plan_fusion(network: Network, arch: Arch, base: NetworkPlan, objective: Objective | str, *,
                max_group: int = 4, every_start: bool = True, jobs: int = 1,
                progress: Progress | None = None, searcher: GroupSearch | None = None,
                count_joins: bool = False) -> FusionPlan:
    """Fusion groups for ``network`` (already at the arch's precision) given its unfused ``base`` plan
    (``searcher``: how a candidate group is searched, default the whole fused space; ``max_group``
    and ``count_joins``: ``candidate_groups``)."""
    obj = Objective(objective)
    found = candidate_groups(network, arch, obj, max_group=max_group, every_start=every_start, jobs=jobs,
                             progress=progress, searcher=searcher, count_joins=count_joins)
    return _plan(network, arch, base, obj, found, max_group, every_start)


def plan_fusion_sizes(network: Network, archs: Sequence[Arch], bases: Sequence[NetworkPlan],
                      objective: Objective | str, *, max_group: int = 4, every_start: bool = True, jobs: int = 1,
                      progress: Progress | None = None, count_joins: bool = False) -> list[FusionPlan]:
    """``plan_fusion`` at each of ``archs`` (accelerators that differ only in on-chip capacity, with
    their unfused plans ``bases``), each candidate group searched once for all of them
    (``candidate_groups_sizes``): the plans are those ``plan_fusion`` makes one by one."""
    obj = Objective(objective)
    founds = candidate_groups_sizes(network, archs, obj, max_group=max_group, every_start=every_start, jobs=jobs,
                                    progress=progress, count_joins=count_joins)
    return [_plan(network, arch, base, obj, found, max_group, every_start)
            for arch, base, found in zip(archs, bases, founds, strict=True)]


def _plan(network: Network, arch: Arch, base: NetworkPlan, obj: Objective,
          found: dict[tuple[int, int], tuple[GroupResult, str | None]], max_group: int, every_start: bool
          ) -> FusionPlan:
    """The plan from the candidate groups ``found``: the cut and its groups, and the search's totals."""
    singles = [_vector(lp.cost) for lp in base.layers]
    costs = {seg: LayerCost.from_batch(res.cost, 0, arch.dram_bytes_per_cycle) for seg, (res, _) in found.items()}
    cut = choose_cut(obj, singles, {seg: _vector(c) for seg, c in costs.items()})
    groups = []
    for s, e in cut:
        if e - s < 2:
            continue
        res, cached = found[(s, e)]
        unfused = sum_costs([lp.cost for lp in base.layers[s:e]])
        groups.append(GroupPlan(tuple(x.name for x in network.layers[s:e]), res.mapping, costs[(s, e)], unfused,
                                res.executed_macs, res.reuse_bytes, 0 if cached else res.evaluated, res.space_size,
                                0.0 if cached else res.seconds, cached, res.partition))
    searched = [res for res, c in found.values() if c is None]
    meta = {"candidates": len(found), "searched": len(searched), "every_start": every_start,
            "dram_burst_bytes": arch.dram.burst_bytes,
            "space_size": sum(r.space_size for r in searched), "screened": sum(r.screened for r in searched),
            "evaluated": sum(r.evaluated for r in searched), "search_seconds": sum(r.seconds for r in searched),
            "group_search": {r.group.name: {"space_size": r.space_size, "screened": r.screened,
                                            "evaluated": r.evaluated, "configs": r.configs,
                                            "configs_skipped": r.configs_skipped, "seconds": r.seconds}
                             for r in searched}}
    return FusionPlan(base, tuple(groups), max_group, meta)
