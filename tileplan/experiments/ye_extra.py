"""Ye et al.: the crossover points of Figs. 7 and 9 (the buffer above which fused-only beats SmartShuttle, and
above which the hybrid equals fused-only), Fig. 11's AlexNet at batch 1 and 288 K words, the
conv-pool-conv groups the general ``--fuse`` planner forms on AlexNet, and what of Figs. 8 and 11
cannot be reproduced (the previous works' dataflows are not in tileplan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tileplan import api
from tileplan.experiments.common import ExperimentResult, Reference
from tileplan.experiments.ye_setup import DRAM, conv_part, words_arch
from tileplan.fusion.planner import plan_fusion_sizes
from tileplan.search.objective import Objective
from tileplan.workload.layer import Precision

#: Fig. 11's buffer (K words) and network (the paper's two-tower AlexNet, batch 1).
FIG11_KB = 288
FIG11 = ("alexnet_b1", "alexnet_grouped", 1)


def fused_loses_up_to(points: Sequence[Any], label: str) -> float:
    """The largest buffer (K words) where fused-only does not move less than SmartShuttle (the paper's
    crossover: fused-only wins above it); 0 if it wins everywhere."""
    mine = [p for p in points if p.network == label]
    return float(max((p.kb for p in mine if p.dram["fused_only"] >= p.dram["smartshuttle"]), default=0))


def hybrid_equals_fused_above(points: Sequence[Any], label: str) -> float:
    """The largest buffer (K words) where the hybrid still moves less than fused-only (above it they
    are equal)."""
    mine = [p for p in points if p.network == label]
    below = [p.kb for p in mine if p.dram["hybrid"] < p.dram["fused_only"] * (1 - 1e-9)]
    return float(max(below, default=0))


def crossovers(res: ExperimentResult, ref: Reference, points: Sequence[Any]) -> None:
    for label in ("densenet121", "resnext50"):
        mine = sorted((p for p in points if p.network == label), key=lambda p: p.kb)
        if not mine:
            continue
        ratios = ", ".join(f"{p.kb} K: {p.dram['fused_only'] / p.dram['smartshuttle']:.2f}" for p in mine)
        res.compare(ref, f"{label}.fused_beats_smartshuttle_above_kb", fused_loses_up_to(points, label),
                    explanation=f"fused-only / SmartShuttle DRAM per buffer size: {ratios}")
        gaps = ", ".join(f"{p.kb} K: {100 * (1 - p.dram['hybrid'] / p.dram['fused_only']):.1f} %" for p in mine)
        if f"{label}.hybrid_equals_fused_above_kb" in ref.values:
            res.compare(ref, f"{label}.hybrid_equals_fused_above_kb", hybrid_equals_fused_above(points, label),
                        explanation=f"hybrid below fused-only per buffer size: {gaps}")
        res.table(f"{label}_crossover", [{"buffer_kb": p.kb, **{k: p.dram[k] for k in ("smartshuttle", "fused_only",
                                                                                      "hybrid")}} for p in mine])


def fig11(res: ExperimentResult, network_point: Callable[..., Any]) -> None:
    """Fig. 11's point for our strategies (full run only: a whole AlexNet plan at one more size)."""

    p = network_point(*FIG11, FIG11_KB)
    res.table("fig11_alexnet_b1_288kb", [{"strategy": k, "dram_words": v, "vs_smartshuttle_pct":
                                          100 * (1 - v / p.dram["smartshuttle"])} for k, v in p.dram.items()])
    res.note(f"Fig. 11 (AlexNet, two towers, batch 1, {FIG11_KB} K words): hybrid {p.dram['hybrid']:,.0f} words, "
             f"SmartShuttle {p.dram['smartshuttle']:,.0f}, SuperSlash {p.dram['superslash']:,.0f}, general --fuse "
             f"{p.dram.get('general', float('nan')):,.0f} (hybrid "
             f"{100 * (1 - p.dram['hybrid'] / p.dram['smartshuttle']):.1f} % below SmartShuttle).")


def conv_pool_conv(res: ExperimentResult, kb: int) -> None:
    """The groups the general --fuse planner forms on AlexNet (batch 1) at ``kb`` K words: which of them
    fuse a pool between two convolutions (Ye et al.'s pairs never include a pool)."""

    net = conv_part(api.load_network(FIG11[1], batch=1)).with_precision(Precision.uniform(1))
    arch = words_arch(kb)
    base = api.plan(net, arch, strategy="exhaustive", objective=Objective.DRAM, batch=1, jobs=1)
    plan = plan_fusion_sizes(net, [arch], [base], DRAM, max_group=4)[0]
    ops = {x.name: x.op.value for x in net.layers}
    conv = ("conv", "grouped_conv")
    rows: list[dict[str, Any]] = [
        {"group": g.name, "layers": " ".join(g.layers), "ops": " ".join(ops[n] for n in g.layers),
             "conv_pool_conv": any(ops[g.layers[i]] in conv and "pool" in ops[g.layers[i + 1]]
                                   and ops[g.layers[i + 2]] in conv for i in range(len(g.layers) - 2))}
            for g in plan.groups]
    res.table(f"alexnet_b1_general_groups_{kb}kb", rows)
    cpc = [str(r["layers"]) for r in rows if r["conv_pool_conv"]]
    pools = [str(r["layers"]) for r in rows if "pool" in str(r["ops"])]
    res.note(f"AlexNet (two towers, batch 1, {kb} K words), the general --fuse planner's groups: "
             + ("; ".join(str(r["layers"]) for r in rows) or "none")
             + f". {len(pools)} of {len(rows)} fuse a pool; conv-pool-conv groups: {', '.join(cpc) or 'none'} "
             "(Ye et al.'s pairs are two adjacent convolutions, the first ungrouped -- ``fusion.ye`` refuses any "
             "other pair -- so AlexNet's pools after conv1, conv2 and conv5 end every pair; the general planner "
             "can fuse them).")


def not_reproduced(res: ExperimentResult) -> None:
    res.cannot_reproduce("Fig. 8, [24] and [25]'s bars (DenseNet-121)", "Zheng et al.'s irregular-network scheduler "
                         "and [25]'s dataflow are not in tileplan, and the paper gives only the reductions "
                         "(46.7 %, 51.6 %), not their DRAM counts; our DenseNet-121 curves are in Fig. 7's table")
    res.cannot_reproduce("Fig. 11, [22] and [23]'s bars (AlexNet, batch 1, 288 KB)", "PermCNN [22] stores permuted-"
                         "diagonal compressed weights and Huang et al. [23] sparse compressed tiles; tileplan models "
                         "dense tensors, and the paper gives only the reductions (31.1 %, 23.1 %); our strategies at "
                         f"{FIG11_KB} K words are in fig11_alexnet_b1_288kb.csv (full run)")


def run(res: ExperimentResult, ref: Reference, points: Sequence[Any], quick: bool,
        network_point: Callable[..., Any]) -> None:
    """Everything above (called from :func:`tileplan.experiments.ye.run`, which passes its
    ``network_point``: this module sits beside ye.py and never imports it)."""
    crossovers(res, ref, points)
    conv_pool_conv(res, 256 if quick else FIG11_KB)
    if not quick:
        fig11(res, network_point)
    not_reproduced(res)
