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
from tileplan.fusion.group import FusedGroup, Overlap
from tileplan.fusion.planner import plan_fusion_sizes
from tileplan.fusion.search import search_group_sizes
from tileplan.fusion.ye import search_f2l_sizes
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


def _mb(x: float) -> str:
    return f"{x / 1e6:.2f} MB"


def forced_losses(p: Any) -> str:
    """What forcing fusion costs against single-layer reuse at point ``p``: fused-only minus
    SmartShuttle is exactly the sum over the fused-only cut's groups of (fused - their layers single)."""
    cands = {name: (fused, single) for name, _, fused, single in p.candidates}
    groups = [(name, *cands[name]) for name in p.forced]
    worse = sorted((g for g in groups if g[1] > g[2]), key=lambda g: g[2] - g[1])
    gain = sum(s - f for _, f, s in groups if f <= s)
    text = (f"at {p.kb} K words forced fusion fuses {len(groups)} groups: {len(worse)} move more fused than single "
            f"(+{_mb(sum(f - s for _, f, s in worse))}")
    if worse:
        name, f, s = worse[0]
        text += f"; worst {name}: fused {_mb(f)} vs single {_mb(s)}"
    return text + f"), the others save {_mb(gain)}"


def scope_text(p: Any, vs: str) -> str:
    """What of SmartShuttle's DRAM at ``p`` no Ye pair can touch (its bytes in layers that are not
    convolutions, by kind) and the hybrid's reduction against ``vs`` over the convolutions alone."""
    by_op = dict(p.by_op)
    convs = ("conv", "pointwise", "grouped_conv", "depthwise")
    weighted = sum(v for k, v in by_op.items() if k in convs)
    other = {k: v for k, v in by_op.items() if k not in convs and v}
    if not other or not weighted:
        return ""
    return (f"SmartShuttle's {_mb(sum(by_op.values()))} include "
            + ", ".join(f"{_mb(v)} of {k} layers" for k, v in sorted(other.items(), key=lambda kv: -kv[1]))
            + f" that no Ye pair fuses; over the convolutions alone ({_mb(weighted)}) the hybrid saves "
              f"{100 * (p.dram[vs] - p.dram['hybrid']) / weighted:.1f} %")


def candidates_text(p: Any) -> str:
    """Ye et al.'s fused groups at point ``p`` with their strategy and DRAM fused vs single."""
    hybrid = {g.name for _, g, _ in p.pairs}
    return "; ".join(f"{name} {strategy} {_mb(fused)} fused vs {_mb(single)} single"
                     f"{' (in the hybrid)' if name in hybrid else ''}"
                     for name, strategy, fused, single in p.candidates) or "none fits"


def _kept_single(p: Any) -> str:
    """The fused-only cut's groups the hybrid leaves single at ``p`` and what that saves."""
    hybrid = {g.name for _, g, _ in p.pairs}
    cands = {name: (fused, single) for name, _, fused, single in p.candidates}
    kept = sorted(((name, *cands[name]) for name in p.forced if name not in hybrid), key=lambda g: g[2] - g[1])
    if not kept:
        return f"at {p.kb} K words the hybrid fuses every group fused-only fuses"
    name, f, s = kept[0]
    return (f"at {p.kb} K words the hybrid keeps {len(kept)} of fused-only's {len(p.forced)} groups single "
            f"(saving {_mb(sum(f_ - s_ for _, f_, s_ in kept))}; largest {name}: fused {_mb(f)} vs single {_mb(s)})")


def _crossing(mine: Sequence[Any], lose_kb: float) -> str:
    """Where fused-only / SmartShuttle crosses 1 between the grid's last losing and first winning size
    (linear interpolation), or empty."""
    lo = [p for p in mine if p.kb == lose_kb]
    hi = [p for p in mine if p.kb > lose_kb]
    if not lo or not hi:
        return ""
    r_lo = lo[0].dram["fused_only"] / lo[0].dram["smartshuttle"]
    r_hi = hi[0].dram["fused_only"] / hi[0].dram["smartshuttle"]
    at = lo[0].kb + (hi[0].kb - lo[0].kb) * (r_lo - 1) / (r_lo - r_hi) if r_lo != r_hi else float(lo[0].kb)
    return f"the ratio crosses 1 at about {at:.0f} K words (linear between {lo[0].kb} and {hi[0].kb}); "


def crossovers(res: ExperimentResult, ref: Reference, points: Sequence[Any]) -> None:
    for label in ("densenet121", "resnext50"):
        mine = sorted((p for p in points if p.network == label), key=lambda p: p.kb)
        if not mine:
            continue
        ratios = ", ".join(f"{p.kb} K: {p.dram['fused_only'] / p.dram['smartshuttle']:.2f}" for p in mine)
        ours = fused_loses_up_to(points, label)
        key = f"{label}.fused_beats_smartshuttle_above_kb"
        at = [p for p in mine if p.kb in (ours, ref.value(key))]
        res.compare(ref, key, ours, explanation=f"fused-only / SmartShuttle DRAM per buffer size: {ratios}; "
                    + _crossing(mine, ours) + "; ".join(forced_losses(p) for p in at))
        gaps = ", ".join(f"{p.kb} K: {100 * (1 - p.dram['hybrid'] / p.dram['fused_only']):.1f} %" for p in mine)
        if f"{label}.hybrid_equals_fused_above_kb" in ref.values:
            ours = hybrid_equals_fused_above(points, label)
            at = [p for p in mine if p.kb == ours]
            res.compare(ref, f"{label}.hybrid_equals_fused_above_kb", ours,
                        explanation=f"hybrid below fused-only per buffer size: {gaps}; "
                        + "; ".join(_kept_single(p) for p in at))
        res.table(f"{label}_crossover", [{"buffer_kb": p.kb, **{k: p.dram[k] for k in ("smartshuttle", "fused_only",
                                                                                      "hybrid")}} for p in mine])


#: Fig. 11's reductions of Ye et al.'s method against PermCNN [22] and Huang et al. [23] (Sec. 5.3 text).
FIG11_PAPER = {"[22] PermCNN": 31.1, "[23] Huang et al.": 23.1}


def fig11(res: ExperimentResult, network_point: Callable[..., Any]) -> Any:
    """Fig. 11's point for our strategies (full run only: a whole AlexNet plan at one more size), with
    the DRAM the paper's two baselines would move if Ye et al.'s method moved what our hybrid moves
    (the paper gives only its reductions against them). Returns the point."""

    p = network_point(*FIG11, FIG11_KB)
    hybrid = p.dram["hybrid"]
    rows = [{"strategy": k, "dram_words": v, "vs_smartshuttle_pct": 100 * (1 - v / p.dram["smartshuttle"]),
             "source": "ours"} for k, v in p.dram.items()]
    rows += [{"strategy": name, "dram_words": hybrid / (1 - pct / 100), "vs_smartshuttle_pct":
              100 * (1 - hybrid / (1 - pct / 100) / p.dram["smartshuttle"]),
              "source": f"implied: our hybrid is {pct} % below it (paper)"} for name, pct in FIG11_PAPER.items()]
    res.table("fig11_alexnet_b1_288kb", rows)
    implied = "; ".join(f"{name} would move {hybrid / (1 - pct / 100):,.0f} words "
                        f"({hybrid / (1 - pct / 100) / p.dram['smartshuttle']:.2f}x SmartShuttle)"
                        for name, pct in FIG11_PAPER.items())
    res.note(f"Fig. 11 (AlexNet, two towers, batch 1, {FIG11_KB} K words): hybrid {hybrid:,.0f} words, "
             f"SmartShuttle {p.dram['smartshuttle']:,.0f}, SuperSlash {p.dram['superslash']:,.0f}, fused-only "
             f"{p.dram['fused_only']:,.0f}, general --fuse {p.dram.get('general', float('nan')):,.0f} (hybrid "
             f"{100 * (1 - hybrid / p.dram['smartshuttle']):.1f} % below SmartShuttle; {_pairs_of(p)}). The paper "
             f"gives only its reductions against [22] and [23] (31.1 %, 23.1 %): at our hybrid's count {implied}. "
             f"Ye's groups here: {candidates_text(p)}.")
    return p


def _pairs_of(p: Any) -> str:
    return ", ".join(f"{g.name} by {name}" for name, g, _ in p.pairs) or "no group fused"


def ye_triples(res: ExperimentResult, points: Sequence[Any]) -> None:
    """Ye et al.'s AlexNet pairs across a pool (conv1-pool1-conv2, conv2-pool2-conv3: ``Pool_i`` of
    Eq. 1) next to its adjacent pairs, per AlexNet point: strategy, DRAM fused and single, whether the
    hybrid takes it."""
    rows = []
    for p in sorted((p for p in points if p.network.startswith("alexnet")), key=lambda p: (p.network, p.kb)):
        hybrid = {g.name for _, g, _ in p.pairs}
        rows += [{"network": p.network, "buffer_kb": p.kb, "group": name, "across_pool": "pool" in name,
                  "strategy": strategy, "fused_dram": fused, "single_dram": single, "in_hybrid": name in hybrid}
                 for name, strategy, fused, single in p.candidates]
    if not rows:
        return
    res.table("alexnet_ye_groups", rows)
    across = [r for r in rows if r["across_pool"]]
    taken = [r for r in across if r["in_hybrid"]]
    first = min(taken, key=lambda r: (r["network"], r["buffer_kb"])) if taken else None
    res.note(f"Ye's conv-pool-conv pairs on AlexNet (alexnet_ye_groups.csv): {len(across)} fit across the "
             f"{len({(r['network'], r['buffer_kb']) for r in rows})} AlexNet points, the hybrid takes {len(taken)}"
             + (f", first {first['group']} ({first['network']}, {first['buffer_kb']} K words, {first['strategy']}: "
                f"{_mb(first['fused_dram'])} fused vs {_mb(first['single_dram'])} single)" if first else "")
             + "; across a pool only the unchunked ir2l and wr2lv1 exist in the model (a pool's output is not "
               "produced in channel chunks), so the whole intermediate tile of all channels is on chip.")


def grouped_chunks(res: ExperimentResult, sizes: Sequence[int] = (64, 256, 576)) -> None:
    """What chunking a grouped consumer's input changes on ResNeXt-50 (batch 3): per distinct 1x1 ->
    grouped 3x3 pair, Ye et al.'s best fused DRAM with chunks that respect the groups (ir2l one
    channel at a time, pr2l, wr2lv2 within a sublayer, wr2lv1 with c < C sublayers) and without (the
    whole intermediate tile on chip: ir2l / pr2l unchunked or wr2lv1 all weights resident)."""
    net = conv_part(api.load_network("resnext50", batch=3)).with_precision(Precision.uniform(1))
    archs = [words_arch(kb) for kb in sizes]
    count: dict[tuple[object, ...], int] = {}
    groups: dict[tuple[object, ...], FusedGroup] = {}
    for a, b in zip(net.layers, net.layers[1:], strict=False):
        if b.inputs == (a.name,) and b.groups > 1 and b.has_weights and a.groups == 1 and a.has_weights:
            g = FusedGroup.of(net, [a.name, b.name])
            count[g.signature()] = count.get(g.signature(), 0) + 1
            groups.setdefault(g.signature(), g)
    rows: list[dict[str, Any]] = []
    for sig, g in groups.items():
        new = search_f2l_sizes(g, archs, DRAM)
        old = search_group_sizes(g, archs, DRAM, overlaps=(Overlap.RECOMPUTE,),
                                 residencies=[(False, False), (True, True)], chunks=[(g.layers[0].k_out,)],
                                 outers=(False,), tile_ks=[g.last.k_out])
        for kb, n, o in zip(sizes, new, old, strict=True):
            rows.append({"pair": g.name, "pairs_alike": count[sig], "buffer_kb": kb,
                         "unchunked_dram": float(o.cost.dram_bytes[0]) if o else float("nan"),
                         "unchunked_strategy": ("wr2lv1" if all(o.mapping.resident) else "ir2l / pr2l") if o
                         else "none fits",
                         "chunked_dram": float(n[1].cost.dram_bytes[0]) if n else float("nan"),
                         "chunked_strategy": n[0] if n else "none fits",
                         "mapping": n[1].mapping.describe(g) if n else ""})
    res.table("resnext50_grouped_chunks", rows)
    parts = []
    for kb in sizes:
        mine = [r for r in rows if r["buffer_kb"] == kb]
        fit_old = sum(r["pairs_alike"] for r in mine if r["unchunked_dram"] == r["unchunked_dram"])
        fit_new = sum(r["pairs_alike"] for r in mine if r["chunked_dram"] == r["chunked_dram"])
        both = [r for r in mine if r["unchunked_dram"] == r["unchunked_dram"]
                and r["chunked_dram"] == r["chunked_dram"]]
        old_mb = sum(r["pairs_alike"] * r["unchunked_dram"] for r in both)
        new_mb = sum(r["pairs_alike"] * r["chunked_dram"] for r in both)
        parts.append(f"{kb} K words: {fit_new} of {sum(count.values())} pairs fit fused (unchunked {fit_old})"
                     + (f", those fitting both ways {_mb(new_mb)} vs {_mb(old_mb)} unchunked "
                        f"({100 * (1 - new_mb / old_mb):.1f} % less)" if old_mb else ""))
    res.note("Chunking a grouped consumer's input (ResNeXt-50's 1x1 -> grouped 3x3 pairs, C = 32; "
             "resnext50_grouped_chunks.csv): " + "; ".join(parts) + ".")


def conv_pool_conv(res: ExperimentResult, kb: int) -> None:
    """The groups the general --fuse planner forms on AlexNet (batch 1) at ``kb`` K words: which of them
    fuse a pool between two convolutions (Ye et al.'s pairs never include a pool)."""

    net = conv_part(api.load_network(FIG11[1], batch=1)).with_precision(Precision.uniform(1))
    arch = words_arch(kb)
    base = api.plan(net, arch, strategy="exhaustive", objective=Objective.DRAM, batch=1, jobs=1)
    plan = plan_fusion_sizes(net, [arch], [base], DRAM, max_group=4, count_joins=True)[0]  # as published
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
             "(Ye et al.'s own pairs across a pool are in alexnet_ye_groups.csv).")


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
    extra = [] if quick else [fig11(res, network_point)]
    ye_triples(res, [*points, *extra])
    if not quick:
        grouped_chunks(res)
    not_reproduced(res)
