"""tileplan multi-level mappings -> Timeloop v0.4 mapping files (the inverse of ``timeloop_mapping``).

The DRAM and global-buffer factors and permutations come from the tileplan mapping alone; how the
PE tile's loops sit on the per-PE levels, how the fan-out is spread over the spatial levels and
meshX/meshY, and the datatype directives come from a :class:`Placement` when one is given and
agrees with the mapping (an imported mapping then comes back identical), else from a canonical
choice: every PE-tile loop on the innermost per-PE memory (so every per-PE memory holds its whole
tile, which is what tileplan costs), the fan-out spread greedily over meshX then meshY of each
spatial level, and each level keeping what the architecture lets it keep.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from tileplan.dims import DIMS, Dim
from tileplan.errors import MappingError
from tileplan.interop.meshfit import fit
from tileplan.interop.timeloop_arch import SPACES, TimeloopArch
from tileplan.interop.timeloop_mapping import Loops, Placement
from tileplan.interop.timeloop_problem import DIM_TO_TL
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer

_TL_ORDER = "GCMRSNPQ"  # the order Timeloop's mapper prints factors in


def _dims(layer: Layer) -> str:
    return _TL_ORDER if layer.groups > 1 else _TL_ORDER[1:]


def _perm(order: tuple[Dim, ...], dims: str) -> str:
    return "".join(DIM_TO_TL[d.name] for d in reversed(order) if DIM_TO_TL[d.name] in dims)


def _exact(whole: int, part: int, what: str) -> int:
    if whole % part:
        raise MappingError(f"{what}: {part} does not divide {whole}; a Timeloop v0.4 mapping needs exact factors")
    return whole // part


def _spread(fanout: dict[str, int], tl: TimeloopArch) -> dict[str, Loops]:
    """Fan-out factors over the spatial levels' meshX and meshY (:func:`~tileplan.interop.meshfit.fit`)."""
    slots = [(lv.name, axis, cap) for lv in tl.spatial_levels()
             for axis, cap in (("X", lv.fanout_x), ("Y", lv.fanout_y))]
    placed = fit(fanout, [cap for _, _, cap in slots])
    if placed is None:
        raise MappingError(f"the fan-out {' '.join(f'{d}{f}' for d, f in fanout.items() if f > 1)} does not fit "
                           f"the PE meshes ({' x '.join(str(c) for _, _, c in slots)})")
    out: dict[str, Loops] = {}
    for lv in tl.spatial_levels():
        xs = next(p for (n, a, _), p in zip(slots, placed, strict=True) if n == lv.name and a == "X")
        ys = next(p for (n, a, _), p in zip(slots, placed, strict=True) if n == lv.name and a == "Y")
        factors = {d: xs.get(d, 1) * ys.get(d, 1) for d in fanout}
        perm = "".join(xs) + "".join(ys)
        perm += "".join(d for d in fanout if d not in perm)
        out[lv.name] = Loops(factors, perm, len(xs))
    return out


def to_timeloop(mapping: Mapping, layer: Layer, tl: TimeloopArch, placement: Placement | None = None
                ) -> list[dict[str, Any]]:
    """The Timeloop mapping directives of a one-level tileplan mapping (see the module docstring)."""
    if len(mapping.levels) != 1 or mapping.spatial or mapping.cores_used > 1:
        raise MappingError("a Timeloop mapping is written from a multi-level mapping (one on-chip level, no "
                           "core split): plan with --strategy marvel or marvel-joint")
    level = mapping.levels[0]
    dims = _dims(layer)
    size = {DIM_TO_TL[d.name]: layer.dims[d] for d in DIMS}
    tiles0 = {DIM_TO_TL[d.name]: min(mapping.tiles[d], layer.dims[d]) for d in DIMS}
    tiles = {DIM_TO_TL[d.name]: level.tiles[d] for d in DIMS}
    fan = {DIM_TO_TL[d.name]: level.fanout[d] for d in DIMS}
    dram_f = {d: _exact(size[d], tiles0[d], f"DRAM tile of {d}") for d in dims}
    glb_f = {d: _exact(tiles0[d], tiles[d] * fan[d], f"global-buffer step of {d}") for d in dims}
    pe = [lv.name for lv in tl.pe_levels()]
    pe_loops = placement.pe_loops if placement else {}
    if any(math.prod(pe_loops[n].factors.get(d, 1) for n in pe_loops) != tiles[d] for d in dims) or not pe_loops:
        pe_loops = {n: Loops({d: 1 for d in dims}, dims) for n in pe}
        pe_loops[pe[-1]] = Loops({d: tiles[d] for d in dims}, dims)
    sp = placement.spatial_loops if placement else {}
    if any(math.prod(sp[n].factors.get(d, 1) for n in sp) != fan[d] for d in dims) or not sp:
        sp = _spread({d: fan[d] for d in dims}, tl)
    datatype = dict(placement.datatype) if placement else {}
    for lv in tl.levels:
        if lv.name not in datatype:
            keep = tuple(s for s in ("Weights", "Inputs", "Outputs") if lv.keeps(s))
            datatype[lv.name] = (keep, tuple(s for s in ("Weights", "Inputs", "Outputs") if s not in keep))
    loops: dict[tuple[str, str], Loops] = {(tl.dram().name, "temporal"): Loops(dram_f, _perm(mapping.order, dims)),
                                          (tl.glb().name, "temporal"): Loops(glb_f, _perm(level.order, dims))}
    for n, lp in pe_loops.items():
        loops[(n, "temporal")] = lp
    for n, lp in sp.items():
        loops[(n, "spatial")] = lp
        loops.setdefault((n, "temporal"), Loops({d: 1 for d in dims}, dims))
    if placement and set(placement.order) >= set(loops) | {(n, "datatype") for n in datatype}:
        order = placement.order
    else:
        inner = list(reversed(tl.names))
        order = [(n, "datatype") for n in inner] + [(n, k) for n in inner for k in ("spatial", "temporal")
                                                    if (n, k) in loops]
    out: list[dict[str, Any]] = []
    for target, kind in order:
        if kind == "datatype":
            keep, bypass = datatype[target]
            out.append({"target": target, "type": "datatype", "keep": list(keep), "bypass": list(bypass)})
            continue
        lp = loops[(target, kind)]
        item: dict[str, Any] = {"target": target, "type": kind,
                                "factors": " ".join(f"{d}{lp.factors.get(d, 1)}" for d in dims),
                                "permutation": "".join(c for c in lp.permutation if c in dims)}
        if kind == "spatial":
            item["split"] = lp.split if lp.split is not None else len(dims)
        out.append(item)
    return out


def mapping_yaml(directives: list[dict[str, Any]]) -> str:
    """Directives as a Timeloop mapping file."""
    return yaml.safe_dump({"mapping": directives}, sort_keys=False, default_flow_style=False)


def loops_of(directives: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[str, str]]:
    """(target, type) -> (factors, permutation) of the loop directives, for comparing two mappings."""
    return {(d["target"], d["type"]): (d["factors"], d["permutation"]) for d in directives if d["type"] != "datatype"}


__all__ = ["SPACES", "loops_of", "mapping_yaml", "to_timeloop"]
