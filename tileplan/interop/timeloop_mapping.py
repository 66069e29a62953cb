"""Timeloop v0.4 mappings <-> tileplan multi-level mappings.

A Timeloop mapping is a list of directives, each naming a ``target`` level of the architecture and a
``type``: ``temporal`` / ``spatial`` (``factors: "C1 M8 ..."``, ``permutation: "MCRSNPQ"``, innermost
first; a spatial one also ``split``: how many of its dimensions go to meshX) or ``datatype``
(``keep`` / ``bypass`` lists). tileplan's multi-level mapping (``mapping.Level``) has DRAM tile loops,
one on-chip level of step loops, a spatial fan-out and a per-PE tile. The import maps

* DRAM's temporal loops -> the DRAM tile loops (``order`` outermost first, ``tiles`` = the product of
  every factor below DRAM);
* the global buffer's temporal loops -> the level's step loops (``level.order``);
* the spatial factors of every dummy ``inter_*_spatial`` level -> ``level.fanout``;
* the temporal factors of the per-PE levels -> ``level.tiles`` (a PE's tile).

tileplan holds a PE's whole tile of every operand in the PE; Timeloop may refill a per-PE memory
inside a step (a loop above it, inside the PE, indexing what it keeps) or stream a data space from
the global buffer to the MAC (no per-PE memory keeps it). Those mappings are refused, naming the
level and the loop (:func:`to_tileplan` with ``dram_only=True`` still gives their DRAM level, whose
traffic does not depend on what happens inside the PE). :class:`Placement` keeps what tileplan's
mapping does not carry (how the PE tile's loops are spread over the per-PE levels, the fan-out over
the spatial levels and meshX/meshY, the datatype directives), so an imported mapping is written
back identically; without one, :func:`to_timeloop` writes a canonical placement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tileplan.dims import DIMS, Dim
from tileplan.errors import MappingError
from tileplan.interop.timeloop_arch import SPACES, TimeloopArch
from tileplan.interop.timeloop_problem import DIM_TO_TL, TL_TO_DIM
from tileplan.interop.tlyaml import read_timeloop_yaml
from tileplan.mapping import Level, Mapping
from tileplan.workload.layer import Layer

INDEXES = {"Weights": {"C", "M", "R", "S", "G"}, "Inputs": {"N", "C", "P", "Q", "R", "S", "G"},
           "Outputs": {"N", "M", "P", "Q", "G"}}
Factors = dict[str, int]


@dataclass(frozen=True)
class Loops:
    """One temporal or spatial directive: factors per Timeloop dimension, permutation innermost first."""

    factors: Factors
    permutation: str
    split: int | None = None


@dataclass
class TLMapping:
    """A parsed Timeloop mapping: per level, its temporal and spatial loops and datatype directive."""

    temporal: dict[str, Loops] = field(default_factory=dict)
    spatial: dict[str, Loops] = field(default_factory=dict)
    datatype: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)  # (target, type) as listed


@dataclass(frozen=True)
class Placement:
    """What tileplan's mapping does not carry; see the module docstring."""

    pe_loops: dict[str, Loops]
    spatial_loops: dict[str, Loops]
    datatype: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    order: list[tuple[str, str]]


def _factors(text: Any, dims: list[str], where: str) -> Factors:
    items = text.split() if isinstance(text, str) else text
    if not isinstance(items, list):
        raise MappingError(f"{where}: factors must be a string like 'C1 M8 R3' or a list, got {text!r}")
    out: Factors = {}
    for item in items:
        s = str(item).replace("=", "")
        name, num = s[:1], s[1:]
        if name not in dims:
            raise MappingError(f"{where}: factor {item!r} names a dimension the problem does not have "
                               f"(dimensions: {' '.join(dims)})")
        if not num.isdigit() or int(num) < 1:
            raise MappingError(f"{where}: factor {item!r} must be a dimension and a positive integer, like M8")
        if name in out:
            raise MappingError(f"{where}: dimension {name} has two factors")
        out[name] = int(num)
    return {d: out.get(d, 1) for d in dims}


def _permutation(text: Any, dims: list[str], factors: Factors, where: str) -> str:
    if isinstance(text, list) and not all(isinstance(c, str) for c in text):
        raise MappingError(f"{where}: permutation must be a string like 'MQPCRSN' or a list of dimension letters")
    perm = "".join(text) if isinstance(text, list) else str(text if text is not None else "")
    bad = [c for c in perm if c not in dims]
    if bad or len(set(perm)) != len(perm):
        raise MappingError(f"{where}: permutation {perm!r} must list problem dimensions ({' '.join(dims)}) "
                           f"at most once each")
    missing = [d for d in dims if d not in perm]
    looped = [d for d in missing if factors[d] > 1]
    if looped:
        raise MappingError(f"{where}: permutation {perm!r} leaves out {' '.join(looped)}, which loop more than once")
    return perm + "".join(missing)  # factor-1 loops: their place does not matter; outermost


def parse_mapping(doc: Any, source: str, layer: Layer, tl: TimeloopArch) -> TLMapping:
    """Parse a Timeloop mapping document against the problem's dimensions and the arch's levels."""
    directives = doc.get("mapping") if isinstance(doc, dict) else None
    if not isinstance(directives, list):
        raise MappingError(f"{source}: not a Timeloop mapping (expected a top-level 'mapping:' list)")
    dims = [DIM_TO_TL[d.name] for d in DIMS if d.name != "G" or layer.groups > 1]
    out = TLMapping()
    for i, item in enumerate(directives):
        where = f"{source}: mapping[{i}]"
        if not isinstance(item, dict) or "target" not in item or "type" not in item:
            raise MappingError(f"{where}: every directive needs a target (a level name) and a type")
        target, kind = str(item["target"]), str(item["type"])
        where = f"{where} ({target} {kind})"
        if target not in tl.names:
            raise MappingError(f"{where}: unknown level {target!r}; the architecture's levels are "
                               f"{', '.join(tl.names)}")
        if (target, kind) in out.order:
            raise MappingError(f"{where}: a second {kind} directive for {target}")
        if kind == "datatype":
            unknown = sorted(set(item) - {"target", "type", "keep", "bypass"})
            keep = tuple(item.get("keep") or ())
            bypass = tuple(item.get("bypass") or ())
            bad = [s for s in keep + bypass if s not in SPACES]
            if unknown or bad:
                raise MappingError(f"{where}: keep/bypass must list {', '.join(SPACES)}; unknown {unknown + bad}")
            if set(keep) & set(bypass):
                raise MappingError(f"{where}: {sorted(set(keep) & set(bypass))} both kept and bypassed")
            out.datatype[target] = (keep, bypass)
        elif kind in ("temporal", "spatial"):
            unknown = sorted(set(item) - {"target", "type", "factors", "permutation", "split"})
            if unknown:
                raise MappingError(f"{where}: unknown keys {unknown}")
            if "factors" not in item:
                raise MappingError(f"{where}: factors are missing")
            factors = _factors(item["factors"], dims, where)
            perm = _permutation(item.get("permutation"), dims, factors, where)
            split = item.get("split")
            if kind == "spatial" and split is not None and (not isinstance(split, int) or split < 0):
                raise MappingError(f"{where}: split must be a non-negative integer, got {split!r}")
            (out.temporal if kind == "temporal" else out.spatial)[target] = Loops(factors, perm, split)
        else:
            raise MappingError(f"{where}: type must be temporal, spatial or datatype, got {kind!r}")
        out.order.append((target, kind))
    return out


def load_mapping(path: str | Path, layer: Layer, tl: TimeloopArch) -> TLMapping:
    """Read and parse a Timeloop mapping file."""
    return parse_mapping(read_timeloop_yaml(path), str(path), layer, tl)


def _product(loops: list[Loops], dim: str) -> int:
    return math.prod(lp.factors[dim] for lp in loops)


def _order(perm: str) -> tuple[Dim, ...]:
    """tileplan's outermost-first order of a Timeloop innermost-first permutation (G outermost if absent)."""
    dims = [Dim[TL_TO_DIM[c]] for c in reversed(perm)]
    return tuple([Dim.G] if Dim.G not in dims else []) + tuple(dims)


def _spatial_split(lp: Loops) -> tuple[int, int]:
    """(meshX, meshY) use of a spatial directive: the first ``split`` dimensions of its permutation go to X."""
    split = len(lp.permutation) if lp.split is None else lp.split
    x = math.prod(lp.factors[c] for c in lp.permutation[:split])
    return x, math.prod(lp.factors[c] for c in lp.permutation[split:])


def check_mapping(tm: TLMapping, layer: Layer, tl: TimeloopArch, source: str) -> None:
    """Factors multiply to the problem, spatial factors fit the meshes, only dummies fan out."""
    for d in (DIM_TO_TL[x.name] for x in DIMS if x.name != "G" or layer.groups > 1):
        total = _product(list(tm.temporal.values()) + list(tm.spatial.values()), d)
        size = layer.dims[Dim[TL_TO_DIM[d]]]
        if total != size:
            raise MappingError(f"{source}: the factors of {d} multiply to {total} but the problem's {d} is {size}")
    for name, lp in tm.spatial.items():
        lv = tl.level(name)
        x, y = _spatial_split(lp)
        if x > lv.fanout_x or y > lv.fanout_y:
            raise MappingError(f"{source}: spatial factors at {name} use {x} x {y} (meshX x meshY) but it fans out "
                               f"to {lv.fanout_x} x {lv.fanout_y}")
    for name, lp in tm.temporal.items():
        if tl.level(name).spatial and any(f > 1 for f in lp.factors.values()):
            raise MappingError(f"{source}: temporal loops at {name}, a spatial (dummy) level; tileplan has no "
                               f"storage there to loop over")


def _pe_problems(tm: TLMapping, tl: TimeloopArch) -> list[str]:
    """Why the per-PE part of ``tm`` is not tileplan's (a PE holds its whole tile); empty if it is."""
    pe = tl.pe_levels()
    out = []
    for space in SPACES:
        holders = [i for i, lv in enumerate(pe) if lv.keeps(space, tm.datatype)]
        if not holders:
            out.append(f"no per-PE memory keeps {space}: Timeloop streams them from {tl.glb().name} to every MAC, "
                       f"tileplan holds a PE's whole tile in the PE")
            continue
        top = holders[0]
        for lv in pe[:top]:
            lp = tm.temporal.get(lv.name)
            loops = [f"{d}{f}" for d, f in (lp.factors.items() if lp else ()) if f > 1 and d in INDEXES[space]]
            if loops:
                out.append(f"loop {' '.join(loops)} at {lv.name} sits inside the PE above {pe[top].name}, the "
                           f"outermost per-PE memory keeping {space}, so Timeloop refills it within a step; "
                           f"tileplan holds a PE's whole tile")
    return out


def to_tileplan(tm: TLMapping, layer: Layer, tl: TimeloopArch, source: str, *, dram_only: bool = False
                ) -> tuple[Mapping, Placement]:
    """tileplan's mapping of ``tm`` and the :class:`Placement` that writes it back. ``dram_only``:
    the DRAM level alone (a two-level mapping with the same DRAM tiles and order), for mappings whose
    per-PE part tileplan cannot represent. Raises ``MappingError`` with the reason otherwise."""
    check_mapping(tm, layer, tl, source)
    dram, glb = tl.dram(), tl.glb()
    if not all(dram.keeps(s, tm.datatype) for s in SPACES):
        raise MappingError(f"{source}: DRAM bypasses a data space; tileplan reads every operand from DRAM")
    for name, lp in tm.spatial.items():
        if not tl.level(name).spatial and any(f > 1 for f in lp.factors.values()):
            raise MappingError(f"{source}: spatial factors at {name}, which has no fan-out below it")
    problems = [] if dram_only else _pe_problems(tm, tl)
    if problems:
        raise MappingError(f"{source}: tileplan cannot represent this mapping: {problems[0]}")
    empty = Loops({DIM_TO_TL[d.name]: 1 for d in DIMS}, "NGMCPQRS")
    dims = [DIM_TO_TL[d.name] for d in DIMS]
    pe = [lv.name for lv in tl.pe_levels()]
    spatial = [lv.name for lv in tl.spatial_levels()]

    def prod(names: list[str], kind: dict[str, Loops], d: str) -> int:
        return math.prod(kind[n].factors.get(d, 1) for n in names if n in kind)

    below_dram = [n for n in tl.names if n != dram.name]
    tiles0 = tuple(prod(below_dram, tm.temporal, DIM_TO_TL[d.name]) * prod(below_dram, tm.spatial, DIM_TO_TL[d.name])
                   for d in DIMS)
    order0 = _order(tm.temporal.get(dram.name, empty).permutation)
    order0 = tuple(d for d in order0 if d.name in TL_TO_DIM.values())
    order0 = tuple(dict.fromkeys(order0 + DIMS))
    placement = Placement({n: tm.temporal[n] for n in pe if n in tm.temporal},
                          {n: tm.spatial[n] for n in spatial if n in tm.spatial}, dict(tm.datatype), list(tm.order))
    if dram_only:  # the fan-out as the PE array's unrolling: meshX and meshY
        xs: dict[Dim, int] = {}
        ys: dict[Dim, int] = {}
        for lp in placement.spatial_loops.values():
            split = len(lp.permutation) if lp.split is None else lp.split
            for i, c in enumerate(lp.permutation):
                if lp.factors[c] > 1:
                    side = xs if i < split else ys
                    side[Dim[TL_TO_DIM[c]]] = side.get(Dim[TL_TO_DIM[c]], 1) * lp.factors[c]
        return Mapping(tiles=tiles0, order=order0, spatial=(tuple(xs.items()), tuple(ys.items()))), placement
    tiles = tuple(prod(pe, tm.temporal, DIM_TO_TL[d.name]) for d in DIMS)
    fanout = tuple(prod(spatial, tm.spatial, DIM_TO_TL[d.name]) for d in DIMS)
    order1 = tuple(dict.fromkeys(_order(tm.temporal.get(glb.name, empty).permutation) + DIMS))
    del dims
    return Mapping(tiles=tiles0, order=order0, levels=(Level(tiles=tiles, fanout=fanout, order=order1),)), placement


def glb_bypass(tm: TLMapping, tl: TimeloopArch) -> frozenset[str]:
    """Data spaces the mapping's datatype directive makes the global buffer bypass."""
    glb = tl.glb()
    return frozenset(s for s in SPACES if not glb.keeps(s, tm.datatype))
