"""HW-Flow-Fusion's Fig. 4 (normalised weight and pixel volumes of ResNet18, per layer) and all of
Table 7 (CTC ratios of every pair the paper fuses, single layers and temporal/spatial fusions).

Table 7's pairs are matched to the zoo by layer name (the paper's "VGG16-E" is VGG19); our CTC is
Caffeine's burst-aware form (:func:`tileplan.plan.ctc_ratio`: 2 operations per MAC over the bytes the
DRAM bus moves in whole bursts). The paper does not state its unit, so absolute values are compared
for the record; the per-pair pattern (does the fused pair's CTC exceed both single layers'?) is what
both must agree on.
"""

from __future__ import annotations

from typing import Any

from tileplan.arch.spec import Arch
from tileplan.dims import Operand
from tileplan.experiments.common import ExperimentResult, Reference
from tileplan.fusion.group import FusedGroup, chain_error
from tileplan.fusion.hwff import search_partitioned
from tileplan.fusion.partition import FusionKind, array_sides
from tileplan.plan import LayerCost, NetworkPlan, ctc_ratio
from tileplan.report import plots
from tileplan.search.objective import Objective
from tileplan.workload.network import Network

#: Table 7's pairs: (the paper's label, first zoo layer, second zoo layer), in the paper's order.
TABLE7_PAIRS: dict[str, list[tuple[str, str, str]]] = {
    "resnet18": [("CONV1_POOL1", "conv1", "pool1"),
                 ("CONV2_1_1_CONV2_1_2", "res2a_conv1", "res2a_conv2"),
                 ("CONV2_2_1_CONV2_2_2", "res2b_conv1", "res2b_conv2"),
                 ("CONV3_1_1_CONV3_1_2", "res3a_conv1", "res3a_conv2"),
                 ("CONV3_2_1_CONV3_2_2", "res3b_conv1", "res3b_conv2"),
                 ("CONV4_1_1_CONV4_1_2", "res4a_conv1", "res4a_conv2")],
    "vgg16": [("CONV1_CONV2", "conv1_1", "conv1_2"), ("POOL1_CONV3", "pool1", "conv2_1"),
              ("CONV4_POOL2", "conv2_2", "pool2"), ("CONV5_CONV6", "conv3_1", "conv3_2"),
              ("POOL3_CONV9", "pool3", "conv4_1"), ("POOL4_CONV13", "pool4", "conv5_1")],
}
_COLS = ("single_a", "single_b", "temporal", "spatial")
#: Table 6: the spatial PE sub-array [PEx, PEy] the paper's scheduler found per layer (zoo names).
TABLE6: dict[str, tuple[int, int]] = {
    "conv1": (16, 16), "pool1": (16, 16), **{f"res{b}_conv{i}": (32, 8) for b in ("2a", "2b", "3a", "3b", "4a")
                                             for i in (1, 2)},
    "conv1_1": (8, 8), "conv1_2": (8, 8), "vgg.pool1": (32, 8), "conv2_1": (32, 8), "conv2_2": (32, 8),
    "pool2": (32, 8), "conv3_1": (32, 8), "conv3_2": (32, 8), "pool3": (16, 8), "conv4_1": (32, 8),
    "pool4": (16, 16), "conv5_1": (16, 16)}


def volumes(net: Network) -> list[dict[str, Any]]:
    """Fig. 4's data: per weighted layer, the pixel volume (input + output activations) and the weight
    volume in elements, each normalised to the largest of either over the network."""
    rows = [(x.name, x.elements(Operand.INPUT) + x.elements(Operand.OUTPUT), x.elements(Operand.WEIGHT))
            for x in net.layers if x.has_weights]
    top = max(max(p, w) for _n, p, w in rows)
    return [{"layer": n, "pixel_elems": p, "weight_elems": w, "pixel_norm": p / top, "weight_norm": w / top,
             "dominant": "pixels" if p > w else "weights"} for n, p, w in rows]


def crossover(rows: list[dict[str, Any]]) -> int:
    """Index of the first layer whose weight volume exceeds its pixel volume (``len(rows)`` if none)."""
    return next((i for i, r in enumerate(rows) if r["weight_elems"] > r["pixel_elems"]), len(rows))


def fig4(res: ExperimentResult, net: Network) -> None:
    """Fig. 4 from the zoo's ResNet-18 (shape arithmetic only; the same in --quick). The paper gives no
    numbers, only the shape: pixels dominate the first half, weights the second."""
    rows = volumes(net)
    res.table("fig4_resnet18_volumes", rows)
    i = crossover(rows)
    pixel_first = sum(r["dominant"] == "pixels" for r in rows[:i])
    res.note(f"Fig. 4: pixel volume (input + output activations) dominates the first {pixel_first} weighted layers "
             f"of ResNet-18; weights dominate from {rows[i]['layer'] if i < len(rows) else 'nowhere'} on "
             f"(layer {i + 1} of {len(rows)}), as the paper says: pixels the first half, weights the second.")
    res.figure("fig4_resnet18_volumes", lambda: plots.grouped_bars(
        [r["layer"] for r in rows], {"pixels": [r["pixel_norm"] for r in rows],
                                     "weights": [r["weight_norm"] for r in rows]},
        title="Fig. 4: ResNet-18 normalised pixel and weight volumes per layer", ylabel="fraction of largest (1)",
        log=True))


def table7(res: ExperimentResult, ref: Reference, name: str, net: Network, arch: Arch, base: NetworkPlan) -> None:
    """Every Table 7 pair of ``name`` present in ``net`` (the --quick network is trimmed)."""
    burst = arch.dram.burst_bytes
    singles = {lp.name: lp.cost for lp in base.layers}
    index = {x.name: i for i, x in enumerate(net.layers)}
    rows: list[dict[str, Any]] = []
    for label, a, b in TABLE7_PAIRS[name]:
        if a not in index or b not in index:
            continue
        chain = list(net.layers[index[a]:index[b] + 1])
        if len(chain) != 2 or chain_error(chain, net) is not None:
            res.note(f"Table 7 {name} {label}: {a}+{b} is not a fusable chain in the zoo network; not compared.")
            continue
        group = FusedGroup(tuple(chain))
        row: dict[str, Any] = {"network": name, "pair": label, "layers": f"{a}+{b}"}
        for col, layer in (("single_a", a), ("single_b", b)):
            one = singles[layer]
            row[col] = ctc_ratio(one.macs, one.bursts, burst)
        for col, kind in (("temporal", FusionKind.TEMPORAL), ("spatial", FusionKind.SPATIAL)):
            r = search_partitioned(group, arch, Objective.ENERGY, kind)
            if r is None:
                row[col] = float("nan")
                continue
            if kind is FusionKind.SPATIAL and r.partition:
                ours6 = [tuple(sh["sides"]) for sh in r.partition["shares"]]
                paper6 = [TABLE6["vgg.pool1" if (name, x) == ("vgg16", "pool1") else x] for x in (a, b)]
                row["table6_ours"] = " ".join(f"[{x}, {y}]" for x, y in ours6)
                row["table6_paper"] = " ".join(f"[{x}, {y}]" for x, y in paper6)
                row["table6_same_pe_counts"] = [x * y for x, y in ours6] == [x * y for x, y in paper6]
            fc = LayerCost.from_batch(r.cost, 0, arch.dram_bytes_per_cycle)
            row[col] = ctc_ratio(fc.macs, fc.bursts, burst)
        paper = {c: ref.value(f"table7.{name}.{label}.{c}") for c in _COLS}
        row["paper_fused_above_both"] = paper["temporal"] > max(paper["single_a"], paper["single_b"])
        row["fits"] = row["temporal"] == row["temporal"]  # NaN: no fusion of the pair fits on chip
        row["ours_fused_above_both"] = row["fits"] and row["temporal"] > max(row["single_a"], row["single_b"])
        row["pair_weights_B"] = sum(x.tensor_bytes(Operand.WEIGHT) for x in chain)
        for c in _COLS:
            row[f"paper_{c}"] = paper[c]
        rows.append(row)
    scale = sorted(r[c] / r[f"paper_{c}"] for r in rows for c in ("temporal", "spatial") if r["fits"])
    mid = scale[len(scale) // 2] if scale else float("nan")
    buffer = arch.memory_of(Operand.WEIGHT).size_bytes
    for row in rows:
        for c in _COLS:
            if not row["fits"] and c in ("temporal", "spatial"):
                res.compare(ref, f"table7.{name}.{row['pair']}.{c}", row[c], quick_same=True, explanation=(
                    f"no {c} fusion of {row['layers']} fits {arch.name}: HW-Flow-Fusion keeps both layers' whole "
                    f"weights on chip (T_if = N_if, T_of = N_of), {row['pair_weights_B']:,} B here, and the buffer "
                    f"holding weights is {buffer:,} B"))
                continue
            why = (f"CTC units differ: ours is 2 x MACs per burst-byte ({burst} B bursts, 8-bit data); the paper's "
                   f"unit is not stated; ours/paper over this table's fused pairs spans "
                   f"{scale[0]:.0f}x-{scale[-1]:.0f}x (median {mid:.0f}x; this number "
                   f"{row[c] / row[f'paper_{c}']:.0f}x). "
                   f"Pattern (temporal above both single layers): paper "
                   f"{'yes' if row['paper_fused_above_both'] else 'no'}, ours "
                   f"{'yes' if row['ours_fused_above_both'] else 'no'} (ours {row['temporal']:.2f} vs singles "
                   f"{row['single_a']:.2f}/{row['single_b']:.2f})" if row["fits"] else
                   f"CTC units differ: ours is 2 x MACs per burst-byte ({burst} B bursts, 8-bit data); the paper's "
                   f"unit is not stated (no fusion of this pair fits {arch.name}; see its temporal row)")
            res.compare(ref, f"table7.{name}.{row['pair']}.{c}", row[c], explanation=why, quick_same=True)
    if not rows:
        return
    res.table(f"table7_{name}_ctc", rows)
    fit = [r for r in rows if r["fits"]]
    agree = sum(r["paper_fused_above_both"] == r["ours_fused_above_both"] for r in fit)
    res.note(f"Table 7 {name}: the per-pair pattern (fused CTC above both single layers') agrees with the "
             f"paper on {agree} of the {len(fit)} pairs that fuse on {arch.name}: "
             + "; ".join(f"{r['pair']} paper {'yes' if r['paper_fused_above_both'] else 'no'} / ours "
                         + (("yes" if r["ours_fused_above_both"] else "no") if r["fits"] else
                            f"no fusion fits ({r['pair_weights_B']:,} B of weights)") for r in rows) + ".")
    sx, sy = array_sides(arch)
    same6 = [r for r in rows if r.get("table6_same_pe_counts")]
    res.note(f"Table 6 {name} (spatial sub-arrays per layer, ours vs the paper): "
             + "; ".join(f"{r['layers']}: {r.get('table6_ours', '-')} vs {r.get('table6_paper', '-')}" for r in rows)
             + f". Same PE count per layer on {len(same6)} of the {len(fit)} pairs that fuse ({arch.name}'s array is "
             f"{sx}x{sy} = {sx * sy} PEs).")
    res.figure(f"table7_{name}_ctc", lambda: plots.grouped_bars(
        [r["layers"] for r in rows], {c: [r[c] for r in rows] for c in _COLS},
        title=f"Table 7: {name} CTC per pair (single layers, temporal, spatial; hwff1)",
        ylabel="CTC (ops per burst byte)", log=True))
