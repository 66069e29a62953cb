"""HW-Flow-Fusion (Valpreda et al.) as a restriction of the one fusion search.

A group is searched in HW-Flow-Fusion's space: every weight resident (T_if = N_if, T_of = N_of),
reuse buffers (zero recomputation, Eq. 7-12), no channel chunks, the last layer's output channels in
one piece, and one resource partition (``fusion.partition``) restricting each layer's compute:
temporal (whole array, register file 1/N) or spatial (a sub-array per layer; the maximal ones are
searched, which keeps an optimum). :func:`search_hwff` keeps the better of the two kinds for the
network planner (``plan --strategy hwff --fuse``); the DP of ``fusion.planner`` then keeps a group
only where it beats the single-layer plans of its layers.

The computation-to-communication ratio (Caffeine's burst-aware form) is ``fusion.plan.ctc_ratio``.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.fusion.assemble import assemble
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.group import Direction, FusedGroup, Overlap
from tileplan.fusion.partition import MAX_SPATIAL, FusionKind, Partition, partitions
from tileplan.fusion.plan import ctc_ratio
from tileplan.fusion.search import GroupResult, search_group
from tileplan.search.objective import Objective

#: The fusion kinds a ``hwff`` group search tries.
KINDS: tuple[FusionKind, ...] = (FusionKind.TEMPORAL, FusionKind.SPATIAL)

__all__ = ["KINDS", "Storage", "ctc_ratio", "min_storage", "search_hwff", "search_partitioned"]


def _key(obj: Objective, result: GroupResult) -> tuple[float, ...]:
    return tuple(float(k[0]) for k in [obj.key(result.cost), *obj.tie_keys(result.cost)])


def search_partitioned(group: FusedGroup, arch: Arch, objective: Objective | str, kind: FusionKind, *,
                       partition_list: list[Partition] | None = None, gm: GroupModel | None = None
                       ) -> GroupResult | None:
    """Best HW-Flow-Fusion mapping of ``group`` under partitions of ``kind`` (``partition_list``
    overrides the enumeration), with the partition in ``GroupResult.partition``; ``None`` when no
    partition is legal or nothing fits on chip."""
    start = time.perf_counter()
    obj = Objective(objective)
    if kind is FusionKind.SPATIAL and len(group) > MAX_SPATIAL:
        return None
    parts = partitions(arch, group.layers, kind) if partition_list is None else partition_list
    base = gm or GroupModel(group, arch)
    n = len(group)
    best: tuple[tuple[float, ...], GroupResult, Partition] | None = None
    evaluated = 0
    space = 0.0
    for part in parts:
        res = search_group(group, arch, obj, overlaps=(Overlap.REUSE,), residencies=[(True,) * n],
                           chunks=[tuple(x.k_out for x in group.layers[:-1])], tile_ks=[group.last.k_out],
                           gm=base.on_shares(part.archs(arch)))
        if res is None:
            continue
        evaluated += res.evaluated
        space += res.space_size
        key = _key(obj, res)
        if best is None or key < best[0]:
            best = (key, res, part)
    if best is None:
        return None
    return dataclasses.replace(best[1], evaluated=evaluated, space_size=space, partition=best[2].to_dict(),
                               seconds=time.perf_counter() - start)


def search_hwff(group: FusedGroup, arch: Arch, objective: Objective) -> GroupResult | None:
    """The better of temporal and spatial fusion for ``group`` (the ``hwff`` planner's group search)."""
    obj = Objective(objective)
    gm = GroupModel(group, arch)
    found = [r for r in (search_partitioned(group, arch, obj, kind, gm=gm) for kind in KINDS) if r is not None]
    if not found:
        return None
    best = min(found, key=lambda r: _key(obj, r))
    return dataclasses.replace(best, evaluated=sum(r.evaluated for r in found),
                               space_size=sum(r.space_size for r in found),
                               seconds=sum(r.seconds for r in found))


@dataclasses.dataclass(frozen=True)
class Storage:
    """Smallest on-chip footprint (bytes) fusing a group with zero recomputation in HW-Flow-Fusion's
    space (all weights resident, whole-map channels), at the tile reaching it, with its reuse buffer
    (bytes), the Alwani et al. buffer (Eq. 8 + 9) of the same tile and direction, and the group's
    DRAM bytes."""

    footprint_bytes: int
    reuse_bytes: int
    alwani_bytes: int
    tile: tuple[int, int]
    dram_bytes: int


def min_storage(group: FusedGroup, arch: Arch, tile: tuple[int, int] | None = None) -> Storage:
    """The least on-chip storage to fuse ``group`` on ``arch`` (capacity ignored: what the group needs),
    over every tile of the last layer's output or at ``tile`` (rows, columns; clipped to the map)."""
    last = group.last
    gm = GroupModel(group, arch) if tile is None else GroupModel(
        group, arch, np.array([min(tile[0], last.p)]), np.array([min(tile[1], last.q)]))
    n = len(group)
    common = {"tile_n": 1, "tile_k": group.last.k_out, "resident": (True,) * n,
              "chunk": tuple(x.k_out for x in group.layers[:-1])}
    ours, _ = assemble(gm, overlap=Overlap.REUSE, **common)  # type: ignore[arg-type]
    need = ours.cost.footprint_bytes.sum(axis=1)
    i = int(need.argmin())
    ip, iq = divmod(i, gm.shape[1])
    tiles = (int(gm.rows.tiles[ip]), int(gm.cols.tiles[iq]))
    one = GroupModel(group, arch, gm.rows.tiles[ip:ip + 1], gm.cols.tiles[iq:iq + 1])
    direction = Direction.COLS if ours.direction[i] else Direction.ROWS
    alwani, _ = assemble(one, overlap=Overlap.ALWANI, direction=direction, **common)  # type: ignore[arg-type]
    return Storage(int(need[i]), int(ours.reuse_bytes[i]), int(alwani.reuse_bytes[0]), tiles,
                   int(ours.cost.dram_bytes[i]))
