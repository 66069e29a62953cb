"""Ye et al.'s fused two-layer strategies (§3, Fig. 4) as named restrictions of the general fusion
search (``fusion.search.search_group``), and their hybrid with single-layer reuse (§4, Eq. 9-10).

A pair is two consecutive layers (or two convolutions with a pool between, AlexNet's pairs:
``conv_pool_conv``); when the second is a grouped convolution fed by an ungrouped
first layer, its groups are Ye et al.'s sublayers (cardinality C, ResNeXt's Network-in-Neuron);
otherwise C = 1. Every strategy tiles the second layer's output by ``a x b x h`` (tile_q, tile_p,
tile_n), recomputes the halo of each tile (``a1 b1`` rows/cols of the first layer's input, with all
C1 channels), holds the second layer's partial sums for all its filters (tile_k = D2), and differs in
where the channel-chunk loop of the intermediate map sits and which weights stay on chip:

==========  ==================================================================================
``ir2l``    weights of both layers streamed every tile step, the intermediate map one channel at
            a time (c = d = e = 1, Fig. 4a): input read once per step (Eq. 1-2)
``wr2lv1``  all weights resident (read once), the intermediate map one channel at a time (Fig. 4b,
            c = C): input once per step (Eq. 3-4); with C > 1 also c < C whole sublayers at a
            time, their weights read once and kept over every tile step, the input read C / c
            times (the chunk loop outermost with whole-group chunks)
``wr2lv2``  the chunk loop (d filters of layer 1, within one sublayer) outermost, its weights read
            once and kept over every tile step, the partial sums of the sublayer's whole output map
            on chip, the input read once per chunk (Fig. 4c, Eq. 5-6)
``pr2l``    weights streamed every step in chunks of d filters, psums of one tile (Fig. 4d, Eq. 7-8)
==========  ==================================================================================

With C > 1 (a grouped second layer) a chunk of the intermediate map feeds only the sublayers it
belongs to (``FusedGroup.chunk_error``: a divisor of a sublayer's channels, or whole sublayers):
the second layer holds and stores the partial sums of those sublayers only (``abh D2,x`` of Eq. 2
and 8, ``B W1 W2 D2,x`` of Eq. 6). The model is the general fused model's (faithful counts: exact
remainder tiles, padding never fetched); the printed Eq. 1-8 are ``fusion.ye_formulas`` and are
tests. Where the general model cannot follow the pseudo-code literally it takes the nearest point
and says so:

* pr2l's tile loop sits outside the sublayer loop here, so the input is read once per step rather
  than C times (Eq. 7; fewer DRAM bytes, the same buffer);
* the pseudo-code's pr2l computes its d chunk one channel at a time; the model holds the d
  channels of the chunk (a2 b2 h d instead of a2 b2 h of Eq. 8).

``superslash`` (SuperSlash, Ahmad et al., as Ye et al. describe it): pr in the first fused layer
(the intermediate tile complete, all channels, before the second layer reads it: no chunking) and
ir in the second (its filters stream over the on-chip intermediate tile); no grouped layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from tileplan.arch.spec import Arch
from tileplan.fusion.group import FusedGroup, FusedMapping, Overlap
from tileplan.fusion.search import GroupResult, chunk_options, search_group_sizes
from tileplan.search.objective import Objective

#: Ye et al.'s fused two-layer strategies, in the paper's order.
FUSED: tuple[str, ...] = ("ir2l", "wr2lv1", "wr2lv2", "pr2l")


def cardinality(group: FusedGroup) -> int:
    """Ye et al.'s C: the second layer's groups when it reads an ungrouped first layer, else 1."""
    first, second = group.layers
    return second.groups if second.groups > 1 and first.groups == 1 and second.has_weights else 1


@dataclass(frozen=True)
class Restriction:
    """Arguments of ``search_group`` that make a strategy (``None``: not applicable to the pair);
    ``also``: a second such space the strategy covers too (the best of both is the strategy's)."""

    residencies: list[tuple[bool, ...]]
    chunks: list[tuple[int, ...]]
    outers: tuple[bool, ...]
    also: Restriction | None = None


def conv_pool_conv(group: FusedGroup) -> bool:
    """Whether ``group`` is a convolution, a pool and a convolution (AlexNet's pairs across a pool,
    ``Pool_1`` / ``Pool_2`` of the halo in Eq. 1), the first convolution reading all its channels."""
    if len(group) != 3:
        return False
    first, pool, second = group.layers
    return first.has_weights and second.has_weights and pool.op.is_pool and first.groups == 1


def restriction(name: str, group: FusedGroup) -> Restriction | None:
    """The fused space of strategy ``name`` for the pair ``group``.

    A convolution-pool-convolution group is a pair across the pool: the pool's output cannot be
    produced in channel chunks in the model (its consumer is reached through a per-channel layer),
    so only the unchunked points exist: ir2l (weights streamed every step) and wr2lv1 (all weights
    on chip), each with the whole intermediate tile on chip."""
    if conv_pool_conv(group):
        full3 = tuple(x.k_out for x in group.layers[:-1])
        if name == "ir2l":
            return Restriction([tuple(not x.has_weights for x in group.layers)], [full3], (False,))
        if name == "wr2lv1":
            return Restriction([(True, True, True)], [full3], (False,))
        return None
    if len(group) != 2:
        return None
    first, second = group.layers
    if not (first.has_weights and second.has_weights) or first.groups > 1:
        return None  # two convolutions, the first reading all C1 channels (a pool between: three layers)
    full: tuple[int, ...] = (first.k_out,)
    chunkable = group.chunkable(0)
    one: list[tuple[int, ...]] = [(1,)] if chunkable else [full]
    streamed: list[tuple[bool, ...]] = [(not first.has_weights, not second.has_weights)]
    resident: list[tuple[bool, ...]] = [(True, True)]
    any_chunk: list[tuple[int, ...]] = [c for c in chunk_options(group) if c != full] if chunkable else [full]
    # Parts of one sublayer (all chunks when C = 1) and c < C whole sublayers (grouped second layer).
    part = [c for c in any_chunk if c != full and not group.whole_groups(0, c[0])]
    whole = [c for c in any_chunk if c != full and group.whole_groups(0, c[0])]
    if name == "ir2l":
        return Restriction(streamed, one, (False,))
    if name == "wr2lv1":  # all weights on chip (c = C), or c < C sublayers' weights kept over the tiles
        return Restriction(resident, one, (False,), Restriction(streamed, whole, (True,)) if whole else None)
    if name == "wr2lv2":
        return Restriction(streamed, part, (True,)) if chunkable and part else None
    if name == "pr2l":
        return Restriction(streamed, any_chunk, (False,))
    if name == "superslash":
        if first.groups > 1 or second.groups > 1:
            return None
        return Restriction([(True, True), (True, False), (False, True), (False, False)], [full], (False,))
    raise ValueError(f"unknown fused strategy {name!r}")


def search_pair(group: FusedGroup, arch: Arch, name: str, objective: Objective | str = Objective.DRAM
                ) -> GroupResult | None:
    """Best mapping of the pair under strategy ``name`` (``None``: not applicable or nothing fits)."""
    return search_pair_sizes(group, [arch], name, objective)[0]


def search_pair_sizes(group: FusedGroup, archs: Sequence[Arch], name: str,
                      objective: Objective | str = Objective.DRAM) -> list[GroupResult | None]:
    """``search_pair`` at each of ``archs`` (differing only in capacity), in one pass
    (``search_group_sizes``)."""
    r = restriction(name, group)
    if r is None:
        return [None] * len(archs)
    obj = Objective(objective)
    best: list[GroupResult | None] = [None] * len(archs)
    while r is not None:
        found = search_group_sizes(group, archs, obj, overlaps=(Overlap.RECOMPUTE,), residencies=r.residencies,
                                   chunks=r.chunks, outers=r.outers, tile_ks=[group.last.k_out])
        best = [b if f is None or (b is not None and _key(obj, b) <= _key(obj, f)) else f
                for b, f in zip(best, found, strict=True)]
        r = r.also
    return best


def _key(obj: Objective, res: GroupResult) -> tuple[float, float]:
    return float(obj.key(res.cost)[0]), float(res.cost.latency_cycles[0])


def search_f2l(group: FusedGroup, arch: Arch, objective: Objective | str = Objective.DRAM,
               strategies: tuple[str, ...] = FUSED) -> tuple[str, GroupResult] | None:
    """Eq. 9: the best of Ye et al.'s fused strategies for the pair (name and result)."""
    return search_f2l_sizes(group, [arch], objective, strategies)[0]


def search_f2l_sizes(group: FusedGroup, archs: Sequence[Arch], objective: Objective | str = Objective.DRAM,
                     strategies: tuple[str, ...] = FUSED) -> list[tuple[str, GroupResult] | None]:
    """``search_f2l`` at each of ``archs`` (differing only in capacity), each strategy searched once
    for all of them."""
    obj = Objective(objective)
    per_name = {name: search_pair_sizes(group, archs, name, obj) for name in strategies}
    out: list[tuple[str, GroupResult] | None] = []
    for a in range(len(archs)):
        found = [(name, res) for name in strategies if (res := per_name[name][a]) is not None]
        out.append(min(found, key=lambda item: _key(obj, item[1])) if found else None)
    return out


def _search_only(group: FusedGroup, arch: Arch, objective: Objective, *, strategies: tuple[str, ...]
                 ) -> GroupResult | None:
    best = search_f2l(group, arch, objective, strategies)
    return None if best is None else best[1]


def _search_only_sizes(group: FusedGroup, archs: Sequence[Arch], objective: Objective, *,
                       strategies: tuple[str, ...]) -> list[GroupResult | None]:
    return [None if best is None else best[1] for best in search_f2l_sizes(group, archs, objective, strategies)]


def group_searcher(strategies: tuple[str, ...]) -> Callable[[FusedGroup, Arch, Objective], GroupResult | None]:
    """A ``search_group`` replacement for the network planner that searches only ``strategies``
    (picklable, so the planner may run it in worker processes)."""
    return partial(_search_only, strategies=strategies)


def group_sizes_searcher(strategies: tuple[str, ...]
                         ) -> Callable[[FusedGroup, Sequence[Arch], Objective], list[GroupResult | None]]:
    """``group_searcher`` at several capacities in one pass (``planner.candidate_groups_sizes``)."""
    return partial(_search_only_sizes, strategies=strategies)


@dataclass(frozen=True)
class FusedFamily:
    """What ``--strategy NAME --fuse`` plans for a paper's fused family: every layer alone with the
    single-layer ``single`` strategy, candidate groups of up to ``max_group`` layers searched only
    over ``fused``, and the network planner's cut between them (Eq. 10 along the network)."""

    single: str
    fused: tuple[str, ...]
    max_group: int = 2


#: ``ye``: Ye et al.'s hybrid (SmartShuttle per layer or a fused pair by ir2l / wr2lv1 / wr2lv2 /
#: pr2l); ``superslash``: the SuperSlash baseline (pr then ir in a fused pair, no grouped layers).
FUSED_FAMILIES: dict[str, FusedFamily] = {
    "ye": FusedFamily("smartshuttle", FUSED),
    "superslash": FusedFamily("smartshuttle", ("superslash",)),
}


def classify(group: FusedGroup, mapping: FusedMapping) -> str:
    """The Ye et al. strategy a fused pair's mapping is a point of (``"other"`` outside them)."""
    if conv_pool_conv(group) and mapping.overlap is Overlap.RECOMPUTE and not mapping.chunk_outer and \
            mapping.chunk == tuple(x.k_out for x in group.layers[:-1]) and mapping.tile_k == group.last.k_out:
        weighted = [r for r, x in zip(mapping.resident, group.layers, strict=True) if x.has_weights]
        return "wr2lv1" if all(weighted) else "ir2l" if not any(weighted) else "other"
    if len(group) != 2 or mapping.overlap is not Overlap.RECOMPUTE or mapping.tile_k < group.last.k_out:
        return "other"
    weighted = [x.has_weights for x in group.layers]
    resident = all(r or not w for r, w in zip(mapping.resident, weighted, strict=True))
    streamed = all(not r or not w for r, w in zip(mapping.resident, weighted, strict=True))
    chunked = mapping.chunk[0] < group.layers[0].k_out
    if mapping.chunk_outer:
        return "wr2lv1" if group.whole_groups(0, mapping.chunk[0]) else "wr2lv2"
    if not chunked and not group.chunkable(0):
        return "wr2lv1" if resident else "ir2l" if streamed else "other"
    if not chunked:
        return "superslash" if cardinality(group) == 1 else "other"
    if resident:
        return "wr2lv1" if mapping.chunk[0] == 1 else "other"
    if streamed:
        return "ir2l" if mapping.chunk[0] == 1 else "pr2l"
    return "other"


__all__ = ["FUSED", "FUSED_FAMILIES", "FusedFamily", "Restriction", "cardinality", "classify", "conv_pool_conv",
           "group_searcher",
           "group_sizes_searcher", "restriction", "search_f2l", "search_f2l_sizes", "search_pair", "search_pair_sizes"]
