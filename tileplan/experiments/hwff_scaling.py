"""HW-Flow-Fusion's fusion sequences (§4.4) and its scaling study (§5.3, Figs. 16-19).

:func:`greedy_groups` is the paper's sequence generation: from a start layer a group grows while a
fusion of the kind fits, up to a maximum length, and the next start is the first layer that could not
join. The scaling study runs it with groups of at most four layers (the paper's limit) on the 1536 kB
configs: temporal fusion on HW5 / HW6 (Figs. 16-17: the register file grows 50 %) and spatial fusion
on HW3 / HW4 (Figs. 18-19: the PE array grows from 32 x 32 to 48 x 32), and compares the summed
energy and latency of the fused sequences. Spatial groups of four layers get one sub-array each
(``fusion.partition``, exact for four); the explanations are generated from the groups found.
"""

from __future__ import annotations

import math
from typing import Any

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.experiments.common import ExperimentResult, Reference
from tileplan.fusion.group import FusedGroup, chain_error
from tileplan.fusion.hwff import search_partitioned
from tileplan.fusion.partition import MAX_SPATIAL, FusionKind, array_sides
from tileplan.fusion.search import GroupResult
from tileplan.report import plots
from tileplan.search.objective import Objective
from tileplan.workload.network import Network

#: (preset, fusion kind, longest group) of Figs. 16-19, in the paper's order.
CONFIGS: tuple[tuple[str, FusionKind, int], ...] = (
    ("hwff5", FusionKind.TEMPORAL, 4), ("hwff6", FusionKind.TEMPORAL, 4),
    ("hwff3", FusionKind.SPATIAL, MAX_SPATIAL), ("hwff4", FusionKind.SPATIAL, MAX_SPATIAL))
#: The paper's figure per (network, kind).
FIGURE = {("resnet18", FusionKind.TEMPORAL): 16, ("vgg16", FusionKind.TEMPORAL): 17,
          ("resnet18", FusionKind.SPATIAL): 18, ("vgg16", FusionKind.SPATIAL): 19}


def greedy_groups(net: Network, arch: Arch, kind: FusionKind, max_group: int, objective: Objective
                  ) -> list[tuple[int, int, GroupResult]]:
    """HW-Flow-Fusion's §4.4 sequence: from a start layer grow the group while a fusion of ``kind``
    fits, up to ``max_group`` layers; the next start is the first layer that could not join."""
    layers = net.layers
    out = []
    start = 0
    cache: dict[tuple[object, ...], GroupResult | None] = {}
    while start < len(layers) - 1:
        best: tuple[int, GroupResult] | None = None
        end = start + 2
        while end <= min(len(layers), start + max_group):
            chain = list(layers[start:end])
            if chain_error(chain, net) is not None:
                break
            key = tuple(x.signature() for x in chain)
            if key not in cache:
                cache[key] = search_partitioned(FusedGroup(tuple(chain)), arch, objective, kind)
            found = cache[key]
            if found is None:
                break
            best = (end, found)
            end += 1
        if best is None:
            start += 1
            continue
        out.append((start, best[0], best[1]))
        start = best[0]
    return out


def _group_rows(name: str, net: Network, arch_name: str, kind: FusionKind) -> list[dict[str, Any]]:
    arch = api.load_arch(arch_name)
    sx, sy = array_sides(arch)
    rows = []
    for s, e, g in greedy_groups(net, arch, kind, 4 if kind is FusionKind.TEMPORAL else MAX_SPATIAL,
                                 Objective.ENERGY):
        c = g.cost
        compute = float(c.compute_cycles[0])
        rows.append({"network": name, "arch": arch_name, "kind": kind.value,
                     "group": "+".join(x.name for x in net.layers[s:e]), "layers": e - s,
                     "partition": g.partition["describe"] if g.partition else "-",
                     "energy_uJ": float(c.energy_pj[0]) / 1e6,
                     "mac_energy_uJ": float(c.energy_breakdown_pj[0, 0]) / 1e6, "cycles": float(c.latency_cycles[0]),
                     "compute_cycles": compute, "macs": int(c.macs), "pes": sx * sy,
                     "pe_utilisation": c.macs / (compute * sx * sy) if compute else float("nan")})
    return rows


def scaling(res: ExperimentResult, ref: Reference, name: str, net: Network) -> None:
    """Figs. 16-19 for ``name`` (``vgg16`` is the paper's VGG16-E, our VGG19): every fused sequence
    on each config, the totals, and the paper's ratios with generated explanations."""
    groups: dict[str, list[dict[str, Any]]] = {a: _group_rows(name, net, a, kind) for a, kind, _ in CONFIGS}
    totals = {a: (sum(r["energy_uJ"] for r in rows), sum(r["cycles"] for r in rows)) for a, rows in groups.items()}
    res.table(f"fig16_19_{name}_groups", [r for rows in groups.values() for r in rows])
    res.table(f"fig16_19_{name}_scaling", [
        {"network": name, "arch": a, "kind": kind.value, "groups": len(groups[a]),
         "layers_fused": sum(r["layers"] for r in groups[a]), "longest_group": max((r["layers"] for r in groups[a]),
                                                                                   default=0),
         "energy_uJ": totals[a][0], "cycles": totals[a][1]} for a, kind, _ in CONFIGS])
    _temporal(res, ref, name, groups, totals)
    same = [r["group"] for r in groups["hwff3"]] == [r["group"] for r in groups["hwff4"]]
    res.compare(ref, f"fig18_19.{name}.energy_hw4_over_hw3", 100 * totals["hwff4"][0] / totals["hwff3"][0],
                explanation=(f"{'the same' if same else 'different'} sequences on both configs; a fused group's "
                             "energy does not depend on its partition in our model (DRAM, buffer and MAC energy are "
                             "the whole chip's, and HW3 and HW4 share Table 4's prices)"))
    key = f"fig18_19.{name}.latency_reduction_hw4_pct"
    ours = 100 * (1 - totals["hwff4"][1] / totals["hwff3"][1])
    res.compare(ref, key, ours, explanation=_latency_why(name, groups, ref.value(key)))
    label = "VGG16-E (VGG19)" if name == "vgg16" else "ResNet-18"
    longest = {a: max((r["layers"] for r in groups[a]), default=0) for a in groups}
    res.note(f"Figs. 18-19 {label}: spatial fusion forms {len(groups['hwff3'])} sequences on hwff3 (longest "
             f"{longest['hwff3']} layers) and {len(groups['hwff4'])} on hwff4: "
             + "; ".join(f"{r['group']} ({r['layers']} layers, {r['partition'].removeprefix('spatial ')} on hwff3)"
                         for r in groups["hwff3"]) + "."
             + ("" if longest["hwff3"] >= 3 else _why_short(net)))
    for kind in (FusionKind.TEMPORAL, FusionKind.SPATIAL):
        pair = [a for a, k, _ in CONFIGS if k is kind]
        res.figure(f"fig{FIGURE[name, kind]}_{name}_{kind.value}", _figure(FIGURE[name, kind], label, kind, pair,
                                                                          groups))


def _temporal(res: ExperimentResult, ref: Reference, name: str, groups: dict[str, list[dict[str, Any]]],
              totals: dict[str, tuple[float, float]]) -> None:
    """Figs. 16-17's ratios, explained from the run: the MAC price is the only one HW5 and HW6 differ
    in (Table 4), and the register file only gates which layers may share it."""
    same = [r["group"] for r in groups["hwff5"]] == [r["group"] for r in groups["hwff6"]]
    seqs = f"{'the same' if same else 'different'} {len(groups['hwff5'])} sequences on HW5 and HW6"
    mac = {a: api.load_arch(a).energy.mac_pj for a in ("hwff5", "hwff6")}
    share = sum(r["mac_energy_uJ"] for r in groups["hwff5"]) / totals["hwff5"][0] if totals["hwff5"][0] else 0.0
    res.compare(ref, f"fig16_17.{name}.energy_hw6_over_hw5", 100 * totals["hwff6"][0] / totals["hwff5"][0],
                explanation=(f"{seqs}; MACs are {share:.0%} of HW5's fused energy and cost {mac['hwff6']} pJ on HW6 "
                             f"against {mac['hwff5']} pJ (Table 4), the only price that differs: "
                             f"{100 * (1 + share * (mac['hwff6'] / mac['hwff5'] - 1)):.1f} % from that alone"))
    res.compare(ref, f"fig16_17.{name}.latency_hw6_over_hw5", 100 * totals["hwff6"][1] / totals["hwff5"][1],
                explanation=(f"{seqs}; the register file only decides whether each layer's 1/N share holds a "
                             "row-stationary step (the fused model has no register-file level), so a larger one "
                             "changes latency only through which sequences fit"))


def _latency_why(name: str, groups: dict[str, list[dict[str, Any]]], paper: float) -> str:
    """Why our HW3 -> HW4 latency reduction differs: the PE ratio bounds a compute-bound speed-up,
    and the PE utilisation of the sub-arrays on each config shows where ours comes from."""
    pes = {a: groups[a][0]["pes"] if groups[a] else 0 for a in ("hwff3", "hwff4")}
    util = {a: sum(r["macs"] for r in groups[a]) / sum(r["compute_cycles"] * r["pes"] for r in groups[a])
            if groups[a] else float("nan") for a in ("hwff3", "hwff4")}
    bound = 100 * (1 - pes["hwff3"] / pes["hwff4"]) if pes["hwff4"] else float("nan")
    lengths = sorted({r["layers"] for r in groups["hwff3"]})
    by4 = {r["group"]: r for r in groups["hwff4"]}
    first = next((r for r in groups["hwff3"] if r["group"] in by4), None)
    example = "" if first is None else (
        f" (e.g. {first['group']}: {first['partition'].removeprefix('spatial ')} on hwff3, "
        f"{by4[first['group']]['partition'].removeprefix('spatial ')} on hwff4, "
        f"{first['cycles'] / by4[first['group']]['cycles']:.2f}x faster)")
    return (f"{len(groups['hwff3'])} spatial sequences of {'/'.join(map(str, lengths))} layers; HW4 has "
            f"{pes['hwff4']:,} PEs against HW3's {pes['hwff3']:,}, so at equal PE utilisation the latency of "
            f"compute-bound groups falls by {bound:.0f} %; our sub-arrays use {util['hwff3']:.0%} of the PEs on "
            f"hwff3 and {util['hwff4']:.0%} on hwff4{example}. The paper's {paper:.0f} % is a "
            f"{100 / (100 - paper):.1f}x speed-up "
            f"from {pes['hwff4'] / max(pes['hwff3'], 1):.1f}x the PEs, which needs HW3's utilisation "
            f"{100 / (100 - paper) / (pes['hwff4'] / max(pes['hwff3'], 1)):.1f}x below HW4's (its text says "
            "'between HW config. 5 and 6' for this result; Figs. 18-19 use configs 3 and 4)")


def _why_short(net: Network) -> str:
    """Why no spatial group of three or more layers forms in ``net`` (a residual network)."""
    shared = [x.name for x in net.layers if len(net.consumers(x.name)) > 1]
    return (f" No sequence longer than two layers forms: {len(shared)} of its {len(net.layers)} layers' outputs are "
            f"read by two layers (the block input by conv1 and by the skip add, e.g. {', '.join(shared[:2])}), and "
            "a fused intermediate map must have no reader outside its group.")


def _figure(n: int, label: str, kind: FusionKind, pair: list[str], groups: dict[str, list[dict[str, Any]]]) -> Any:
    cats: list[str] = []
    for a in pair:
        cats += [r["group"] for r in groups[a] if r["group"] not in cats]

    def values(a: str, col: str, scale: float) -> list[float]:
        by = {r["group"]: r[col] / scale for r in groups[a]}
        return [by.get(c, math.nan) for c in cats]

    return lambda: plots.bar_panels(
        cats, [("energy (uJ)", {a: values(a, "energy_uJ", 1.0) for a in pair}),
               ("latency (Mcycles)", {a: values(a, "cycles", 1e6) for a in pair})],
        title=f"Fig. {n}: {label}, {kind.value} fusion per sequence, {pair[0]} vs {pair[1]}")
