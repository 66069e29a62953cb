"""Ye et al. (Electronics 2022) in the one model: DRAM access against the unified buffer size for
DenseNet-121, ResNeXt-50 and AlexNet (Figs. 7, 9, 10, 11) under single-layer reuse (SmartShuttle,
brute force over ir / wr / pr), fused-two-layer-only, the hybrid (Eq. 10 along the network) and
SuperSlash, and -- beyond the paper -- the general ``--fuse`` planner (every loop order, groups of up
to four layers, reuse buffers); and the two DenseNet-121 layer pairs of Fig. 6 per strategy.

Buffers are read as K data words (one byte per element): the paper gives no word width, and its
Fig. 6a thresholds (ir2l best below 64 KB, weight reuse from 96 KB) fall where they do only at one
byte per element (the pair's weights are 80 K words). Networks are planned up to their classifier
(Ye et al. evaluate the convolutions); totals are the DRAM bytes of every layer and group of that
part (concats move nothing; pools and residual adds are included: the general planner may fuse
pools, so only the full total is a fair comparison, and the network planner minimises it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.experiments import ye_extra
from tileplan.experiments.common import OURS_ONLY, ExperimentResult, Log, Reference
from tileplan.experiments.ye_fig6 import best_fused, fig6_rows, fig6a_weight_reuse_note
from tileplan.experiments.ye_setup import DRAM, conv_part, words_arch
from tileplan.fusion.group import FusedGroup, FusedMapping, chain_error
from tileplan.fusion.plan import FusionPlan
from tileplan.fusion.planner import candidate_groups_sizes, choose_cut, plan_fusion_sizes
from tileplan.fusion.search import GroupResult
from tileplan.fusion.verify import verify_fused
from tileplan.fusion.ye import FUSED, FUSED_FAMILIES, classify, conv_pool_conv, group_sizes_searcher
from tileplan.parallel import default_jobs, run_parallel
from tileplan.plan import LayerCost, NetworkPlan
from tileplan.report import plots
from tileplan.workload.layer import Precision
from tileplan.workload.network import Network

NAME = "ye"
TITLE = "Ye et al. (Electronics 2022): single-layer and fused two-layer reuse on a unified buffer"
PAPER = "002_b98eebfd0b91f9f9.txt"

SIZES_KB = (32, 64, 96, 128, 192, 256, 320, 384, 480, 512, 576, 768, 1024)
QUICK_SIZES_KB = (256,)
FIG6_SIZES_KB = (32, 48, 64, 96, 128, 192, 256, 384, 512)
QUICK_FIG6_SIZES_KB = (128,)
#: (label, zoo network, batch) of Figs. 7, 9, 10 and 11.
#: AlexNet is the two-tower form the paper (and SuperSlash) evaluate: Caffe's grouped ``alexnet_grouped``;
#: torchvision's single-tower ``alexnet`` is planned beside it (``alexnet1t_b3``) to show what the groups change.
NETWORKS = (("densenet121", "densenet121", 3), ("resnext50", "resnext50", 3), ("alexnet_b3", "alexnet_grouped", 3),
            ("alexnet_b1", "alexnet_grouped", 1), ("alexnet1t_b3", "alexnet", 3))
QUICK_NETWORKS = (("alexnet_b1", "alexnet_grouped", 1),)
#: The paper figure each network's DRAM curve reproduces (the single-tower AlexNet is ours only).
FIGURE_OF = {"densenet121": "Fig. 7", "resnext50": "Fig. 9", "alexnet_b3": "Fig. 10",
             "alexnet_b1": "Fig. 10 at batch 1"}
#: Tasks per network in the full run (each plans its share of the sizes in one process).
PARTS = {"densenet121": 2, "resnext50": 2}
#: Fig. 6's DenseNet-121 pairs: (key, C1, map side).
FIG6 = (("fig6a", 336, 28), ("fig6b", 988, 7))
CURVES = ("smartshuttle", "fused_only", "hybrid", "superslash", "general")
_PENALTY = 1e15  # fused-only: a single layer that could be fused costs this much extra in the cut


def network_dram(plan: FusionPlan | NetworkPlan) -> float:
    """DRAM bytes of ``plan``: every single layer and fused group (concats move nothing; pools and
    adds move what they move under every strategy unless the general planner fuses them)."""
    return float(plan.dram_bytes)


def _vector(cost: LayerCost) -> np.ndarray:
    return np.array([cost.latency_cycles, cost.energy_pj, cost.dram_bytes])


def _cut_dram(base: NetworkPlan, found: dict[tuple[int, int], tuple[GroupResult, str | None]], arch: Arch,
              *, fused_only: bool) -> tuple[float, list[tuple[int, int]]]:
    """The DRAM-optimal cut (Eq. 10 along the network), or with ``fused_only`` the one fusing as many
    layers as possible (then the least DRAM): Ye et al.'s "inter-layer reuse with two fused layers"."""
    covered = {i for s, e in found for i in range(s, e)}
    singles = []
    for i, lp in enumerate(base.layers):
        v = _vector(lp.cost)
        if fused_only and i in covered:
            v[2] += _PENALTY
        singles.append(v)
    costs = {seg: LayerCost.from_batch(res.cost, 0, arch.dram_bytes_per_cycle) for seg, (res, _) in found.items()}
    cut = choose_cut(DRAM, singles, {seg: _vector(c) for seg, c in costs.items()})
    total = 0.0
    for s, e in cut:
        total += costs[(s, e)].dram_bytes if e - s > 1 else singles[s][2] - (_PENALTY if fused_only and s in covered
                                                                            else 0.0)
    return total, cut


def ye_candidates(net: Network, archs: Sequence[Arch], strategies: tuple[str, ...] = FUSED
                  ) -> list[dict[tuple[int, int], tuple[GroupResult, str | None]]]:
    """Per accelerator, the pairs Ye et al.'s ``strategies`` fuse (``planner.candidate_groups_sizes``)
    plus the convolution-pool-convolution triples (``fusion.ye.conv_pool_conv``: a pair across a
    pool, which the planner's growth rule never reaches since a convolution and a pool alone are no
    pair), each distinct group searched once for all sizes."""
    found = candidate_groups_sizes(net, archs, DRAM, max_group=2, sizes_searcher=group_sizes_searcher(strategies))
    layers = net.layers
    for s in range(len(layers) - 2):
        chain = layers[s:s + 3]
        if chain_error(chain, net) is not None:
            continue
        group = FusedGroup.of(net, [x.name for x in chain])
        if conv_pool_conv(group):
            for a, res in enumerate(group_sizes_searcher(strategies)(group, archs, DRAM)):
                if res is not None:
                    found[a][(s, s + 3)] = (res, None)
    return found


def fused_only_dram(network: Network, arch: Arch, plan: FusionPlan) -> float:
    """Fused-two-layer-only DRAM bytes of ``network`` (Ye et al.'s pairs wherever one fits, single
    layers elsewhere) on the single-layer plans of ``plan.base``."""
    net = network.with_precision(Precision.uniform(arch.precision_bytes, arch.psum_bytes))
    return _cut_dram(plan.base, ye_candidates(net, [arch])[0], arch, fused_only=True)[0]


@dataclass(frozen=True)
class Point:
    """One network at one buffer size: DRAM bytes per curve and the Ye strategies the hybrid chose."""

    network: str
    kb: int
    dram: dict[str, float]
    chosen: dict[str, int]
    seconds: float
    pairs: tuple[tuple[str, FusedGroup, FusedMapping], ...] = ()
    #: every group Ye et al.'s strategies fuse here: (name, strategy, fused DRAM bytes, its layers' single DRAM bytes)
    candidates: tuple[tuple[str, str, float, float], ...] = ()
    #: the groups of the fused-only cut (names)
    forced: tuple[str, ...] = ()
    #: SmartShuttle's DRAM bytes per layer kind (conv, pointwise, grouped_conv, add, maxpool, ...)
    by_op: tuple[tuple[str, float], ...] = ()


def network_point(label: str, zoo_name: str, batch: int, kb: int, *, general: bool = True) -> Point:
    """Every curve of Figs. 7 / 9 / 10 / 11 for one network (its convolutional part) and buffer size."""
    return network_points(label, zoo_name, batch, (kb,), general=general)[0]


def network_points(label: str, zoo_name: str, batch: int, sizes: Sequence[int], *, general: bool = True
                   ) -> list[Point]:
    """``network_point`` at each buffer size of ``sizes``, in one process: every fused candidate group
    is searched once for all sizes (``planner.candidate_groups_sizes``), and the single-layer
    searches share their capacity-independent parts (``search.memo``). ``Point.seconds`` is the
    time of the whole call split evenly over the sizes."""
    t0 = time.perf_counter()
    archs = [words_arch(kb) for kb in sizes]
    net = conv_part(api.load_network(zoo_name, batch=batch)).with_precision(Precision.uniform(1))
    # SmartShuttle and (for the general planner) every loop order at each size, one after the other:
    # the second search of a layer reuses the first's feasible tiles (``search.memo``).
    bases, gbases = [], []
    for arch in archs:
        bases.append(api.plan(net, arch, strategy="smartshuttle", objective=DRAM, batch=batch, jobs=1))
        if general:
            gbases.append(api.plan(net, arch, strategy="exhaustive", objective=DRAM, batch=batch, jobs=1))
    yes = ye_candidates(net, archs)
    fam = FUSED_FAMILIES["superslash"]
    sss = candidate_groups_sizes(net, archs, DRAM, max_group=fam.max_group,
                                 sizes_searcher=group_sizes_searcher(fam.fused))
    generals: list[float | None] = [None] * len(archs)
    if general:
        # groups of up to 4 layers, adds and concats counted (the rule the published figures were made
        # with; the planner's default counts only layers with a compute window, ``block.group_length``)
        generals = [network_dram(p) for p in plan_fusion_sizes(net, archs, gbases, DRAM, max_group=4,
                                                               count_joins=True)]
    points = []
    for kb, arch, base, ye, ss, gen in zip(sizes, archs, bases, yes, sss, generals, strict=True):
        hybrid, cut = _cut_dram(base, ye, arch, fused_only=False)
        fused, fcut = _cut_dram(base, ye, arch, fused_only=True)
        names = {(s, e): "+".join(x.name for x in net.layers[s:e]) for s, e in ye}
        candidates = tuple((names[(s, e)], classify(FusedGroup(tuple(net.layers[s:e])), res.mapping),
                            float(res.cost.dram_bytes[0]), float(sum(lp.cost.dram_bytes for lp in base.layers[s:e])))
                           for (s, e), (res, _) in ye.items())
        forced = tuple(names[seg] for seg in fcut if seg[1] - seg[0] > 1)
        by_op: dict[str, float] = {}
        for x, lp in zip(net.layers, base.layers, strict=True):
            by_op[x.op.value] = by_op.get(x.op.value, 0.0) + float(lp.cost.dram_bytes)
        superslash, _ = _cut_dram(base, ss, arch, fused_only=False)
        dram = {"smartshuttle": network_dram(base), "fused_only": fused, "hybrid": hybrid, "superslash": superslash}
        if gen is not None:
            dram["general"] = gen
        chosen: dict[str, int] = {}
        pairs = []
        for s, e in cut:
            if e - s > 1:
                group = FusedGroup(tuple(net.layers[s:e]))
                name = classify(group, ye[(s, e)][0].mapping)
                chosen[name] = chosen.get(name, 0) + 1
                pairs.append((name, group, ye[(s, e)][0].mapping))
        points.append(Point(label, kb, dram, chosen, 0.0, tuple(pairs), candidates, forced, tuple(by_op.items())))
    seconds = (time.perf_counter() - t0) / len(points)
    return [replace(p, seconds=seconds) for p in points]


def _parts(sizes: Sequence[int], parts: int) -> list[tuple[int, ...]]:
    """``sizes`` dealt round-robin into at most ``parts`` tuples (small and large sizes mixed).

    >>> _parts((32, 64, 96, 128, 192), 2)
    [(32, 96, 192), (64, 128)]
    """
    return [tuple(sizes[i::parts]) for i in range(min(parts, len(sizes)))]


def _task(task: tuple[Any, ...]) -> tuple[str, Any]:
    """One worker task: ``("fig6", key, c1, hw, sizes, paper_formulas)`` -> Fig. 6 rows, or
    ``("net", label, zoo_name, batch, sizes)`` -> the network's points at those sizes."""
    if task[0] == "fig6":
        _, _, c1, hw, sizes, paper_formulas = task
        return "fig6", fig6_rows(c1, hw, sizes, paper_formulas=paper_formulas)
    _, label, zoo_name, batch, sizes = task
    return "net", network_points(label, zoo_name, batch, sizes)


def verify_chosen(point: Point, arch: Arch) -> list[dict[str, Any]]:
    """Run the program of the smallest pair the hybrid chose per Ye strategy (``tileplan verify``'s
    three witnesses: model, counted DRAM bytes and bursts, bit-exact output)."""
    smallest: dict[str, tuple[FusedGroup, FusedMapping]] = {}
    for name, group, mapping in point.pairs:
        if name not in smallest or group.macs < smallest[name][0].macs:
            smallest[name] = (group, mapping)
    rows = []
    for name, (group, mapping) in sorted(smallest.items()):
        t0 = time.perf_counter()
        v = verify_fused(group, arch, mapping)
        rows.append({"network": point.network, "buffer_kb": point.kb, "strategy": name, "pair": group.name,
                     "mapping": str(mapping), "predicted_bytes": sum(v.predicted_read_bytes) + v.predicted_write_bytes,
                     "counted_bytes": sum(v.counted_read_bytes) + v.counted_write_bytes, "ok": v.ok,
                     "seconds": round(time.perf_counter() - t0, 2)})
    return rows


def _reduction(better: float, worse: float) -> float:
    return 100.0 * (1.0 - better / worse) if worse else 0.0


def run(*, quick: bool = False, jobs: int | None = None, log: Log = lambda _m: None,
        paper_formulas: bool = False) -> ExperimentResult:
    """The experiment (``quick``: AlexNet at batch 1 and 256 K words, Fig. 6 at 128 K words)."""
    t0 = time.perf_counter()
    ref = Reference.load(NAME)
    res = ExperimentResult(NAME, TITLE, PAPER, quick=quick,
                           quick_scope="AlexNet (two towers) at batch 1 and 256 K words, Fig. 6 at 128 K words")
    sizes = QUICK_SIZES_KB if quick else SIZES_KB
    fig6_sizes = QUICK_FIG6_SIZES_KB if quick else FIG6_SIZES_KB
    # One worker task per Fig. 6 pair and per network and part of the sizes (a worker plans its sizes
    # together, sharing the fused searches), heaviest first so that both cores stay busy to the end.
    networks = QUICK_NETWORKS if quick else NETWORKS
    tasks: list[tuple[Any, ...]] = [("net", label, zoo_name, batch, part) for label, zoo_name, batch in networks
                                    for part in _parts(sizes, PARTS.get(label, 1))]
    tasks[len(tasks) - 1:len(tasks) - 1] = [("fig6", key, c1, hw, fig6_sizes, paper_formulas) for key, c1, hw in FIG6]
    found: dict[int, list[Point]] = {}
    fig6: dict[str, list[dict[str, Any]]] = {}
    for i, (kind, out) in run_parallel(_task, tasks, jobs=jobs or default_jobs()):
        if kind == "fig6":
            fig6[tasks[i][1]] = out
            log(f"{tasks[i][1]}: DenseNet-121 pair C1={tasks[i][2]}, {tasks[i][3]}x{tasks[i][3]} done")
            continue
        found[i] = out
        for point in out:
            log(f"{point.network} at {point.kb} K words: {point.seconds:.1f} s")
    # ---- Fig. 6: the two DenseNet-121 pairs
    for key, _, _ in FIG6:
        rows = fig6[key]
        res.table(key, rows)
        series = {k: [r[k] for r in rows] for k in (*FUSED, "ir", "wr", "pr", "smartshuttle", "f2l_printed_eq9")}
        res.figure(key, partial(plots.lines, list(fig6_sizes), series,
                                title=f"Fig. {key[3:]}: DenseNet-121 pair, DRAM vs buffer", xlabel="buffer (K words)",
                                ylabel="DRAM accesses (words)", logy=True))
        fused_best = [best_fused(r) for r in rows]
        single_wins = [r["smartshuttle"] < min([r[n] for n in FUSED if r[n] == r[n]] or [float("inf")])
                       for r in rows]
        res.note(f"**{key}** best fused strategy per size: " + ", ".join(
            f"{kb} KB {b}{' (single-layer wins)' if w else ''}" for kb, b, w in zip(fig6_sizes, fused_best,
                                                                                   single_wins, strict=True)))
        if key == "fig6a":
            below = [kb for kb, b in zip(fig6_sizes, fused_best, strict=True) if b == "ir2l"]
            res.compare(ref, "fig6a.ir2l_best_below_kb", float(max(below)) if below else 0.0)
            res.note(fig6a_weight_reuse_note(rows))
        else:
            res.compare(ref, "fig6b.single_wins_up_to_kb",
                        float(max((kb for kb, w in zip(fig6_sizes, single_wins, strict=True) if w), default=0)))
            printed_wins = [r["smartshuttle"] < r["f2l_printed_eq9"] or r["f2l_printed_eq9"] != r["f2l_printed_eq9"]
                            for r in rows]
            res.note("**fig6b** with the printed Eq. 1-9 (zero padding fetched) single-layer reuse wins at "
                     + ", ".join(f"{kb} KB: {'yes' if w else 'no'}" for kb, w in zip(fig6_sizes, printed_wins,
                                                                                      strict=True)))
    # ---- Figs. 7, 9, 10, 11: whole networks
    by_key = {(p.network, p.kb): p for part_points in found.values() for p in part_points}
    points = [by_key[(label, kb)] for label, _, _ in (QUICK_NETWORKS if quick else NETWORKS) for kb in sizes]
    rows = [{"network": p.network, "buffer_kb": p.kb, **p.dram, "hybrid_pairs": " ".join(
        f"{k}:{v}" for k, v in sorted(p.chosen.items())), "seconds": round(p.seconds, 2)} for p in points]
    res.table("networks", rows)
    checked = [r for p in points if p.kb == 128 and p.network == "densenet121"
               for r in verify_chosen(p, words_arch(128))]
    if checked:
        res.table("verify_densenet121_128kb", checked)
        res.note("Verified programs of the pairs the hybrid chose for DenseNet-121 at 128 K words (the smallest "
                 "pair per strategy): " + "; ".join(f"{r['strategy']} {r['pair']}: counted {r['counted_bytes']} B = "
                                                    f"model {r['predicted_bytes']} B, ok={r['ok']}" for r in checked))
    for label in dict.fromkeys(p.network for p in points):
        mine = [p for p in points if p.network == label]
        base = [p.dram["smartshuttle"] for p in mine]
        series = {c: [p.dram[c] / b for p, b in zip(mine, base, strict=True)] for c in CURVES}
        res.figure(f"{label}_dram", partial(plots.lines, [p.kb for p in mine], series,
                                            title=f"{FIGURE_OF.get(label, OURS_ONLY)}: {label}, DRAM / SmartShuttle's",
                                            xlabel="buffer (K words)", ylabel="DRAM / SmartShuttle"))
    _compare_networks(res, ref, points)
    ye_extra.run(res, ref, points, quick, network_point)
    res.note(f"Run time {time.perf_counter() - t0:.1f} s ({'quick' if quick else 'full'}).")
    return res


def _window(points: list[Point], label: str, lo: int, hi: int) -> list[Point]:
    return [p for p in points if p.network == label and lo <= p.kb <= hi]


def _pairs(p: Point) -> str:
    fused = sum(p.chosen.values())
    if not fused:
        return "no pair fused"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(p.chosen.items()))
    return f"{fused} pair{'s' if fused != 1 else ''} fused ({kinds})"


def _window_why(points: list[Point], label: str, vs: str, lo: int, hi: int, best: Point) -> str:
    """Where in the paper's buffer window the largest reduction falls, what the hybrid fused there and
    at the window's ends, all from this run's points."""
    window = _window(points, label, lo, hi)
    ends = [window[0], window[-1]] if len(window) > 1 else window
    text = (f"largest at {best.kb} K words of the {lo}-{hi} K window: hybrid {best.dram['hybrid'] / 1e6:.2f} MB vs "
            f"{vs} {best.dram[vs] / 1e6:.2f} MB, {_pairs(best)}; "
            + "; ".join(f"at {p.kb} K words {_reduction(p.dram['hybrid'], p.dram[vs]):.1f} %, {_pairs(p)}"
                        for p in ends))
    if label == "resnext50":
        text += ("; ResNeXt's pairs are a 1x1 conv feeding the grouped 3x3 conv (C = 32 sublayers); "
                 + ye_extra.forced_losses(best)
                 + ("; " + ye_extra.scope_text(best, vs) if vs == "smartshuttle" else ""))
    if label == "alexnet_b3":
        one = _window(points, "alexnet1t_b3", lo, hi)
        if one:
            top = max(one, key=lambda p: _reduction(p.dram["hybrid"], p.dram[vs]))
            text += (f"; this is Caffe's two-tower AlexNet (conv2, conv4, conv5 in two groups), the form the paper "
                     f"evaluates: in our model conv4-conv5 (a grouped first layer) is no Ye pair and SuperSlash's "
                     f"space fuses no grouped layer and no pool (SuperSlash {best.dram['superslash'] / 1e6:.2f} MB, "
                     f"SmartShuttle {best.dram['smartshuttle'] / 1e6:.2f} MB); Ye's groups at {best.kb} K words: "
                     + ye_extra.candidates_text(best)
                     + f"; torchvision's single-tower AlexNet gives {_reduction(top.dram['hybrid'], top.dram[vs]):.1f} "
                       f"% at {top.kb} K words ({_pairs(top)})")
    return text


def _compare_networks(res: ExperimentResult, ref: Reference, points: list[Point]) -> None:
    """The paper's headline percentages next to ours (where the run has the network)."""
    for label, vs, key, lo, hi in (("densenet121", "smartshuttle", "densenet121.hybrid_vs_smartshuttle_max", 64, 576),
                                   ("densenet121", "fused_only", "densenet121.hybrid_vs_fused_max", 64, 512),
                                   ("resnext50", "smartshuttle", "resnext50.hybrid_vs_smartshuttle_max", 64, 576),
                                   ("resnext50", "fused_only", "resnext50.hybrid_vs_fused_max", 64, 576),
                                   ("alexnet_b3", "superslash", "alexnet.hybrid_vs_superslash_max_above_480", 481,
                                    1024)):
        window = _window(points, label, lo, hi)
        if window:
            best = max(window, key=lambda p: _reduction(p.dram["hybrid"], p.dram[vs]))
            res.compare(ref, key, _reduction(best.dram["hybrid"], best.dram[vs]),
                        _window_why(points, label, vs, lo, hi, best))
    at128 = _window(points, "densenet121", 128, 128)
    if at128:
        p = at128[0]
        res.compare(ref, "densenet121.hybrid_at_128kb", _reduction(p.dram["hybrid"], p.dram["smartshuttle"]))
        res.compare(ref, "densenet121.hybrid_at_128kb_vs_fused", _reduction(p.dram["hybrid"], p.dram["fused_only"]))
    at1m = _window(points, "densenet121", 1024, 1024)
    if at1m:
        res.compare(ref, "densenet121.hybrid_vs_fused_at_1mb", _reduction(at1m[0].dram["hybrid"],
                                                                          at1m[0].dram["fused_only"]))
    for p in points:
        order_ok = p.dram["hybrid"] <= min(p.dram["smartshuttle"], p.dram["fused_only"]) + 1e-6
        general_ok = "general" not in p.dram or p.dram["general"] <= p.dram["hybrid"] + 1e-6
        if not (order_ok and general_ok):
            res.note(f"**check failed** {p.network} {p.kb} KB: hybrid {p.dram['hybrid']:.0f}, general "
                     f"{p.dram.get('general', float('nan')):.0f}")
    for label in sorted({p.network for p in points}):
        mine = [p for p in points if p.network == label and 64 <= p.kb <= 576]
        if mine:
            best = max(mine, key=lambda p: _reduction(p.dram["general"], p.dram["hybrid"]) if "general" in p.dram
                       else 0.0)
            if "general" in best.dram:
                res.note(f"Beyond the paper, {label}: the general --fuse planner (every loop order, groups of up to "
                         f"four layers counting adds and concats, pools, adds and concats fused, reuse buffers) "
                         f"is up to "
                         f"{_reduction(best.dram['general'], best.dram['hybrid']):.1f} % below the hybrid "
                         f"({best.kb} K words) and {_reduction(best.dram['general'], best.dram['smartshuttle']):.1f} % "
                         f"below SmartShuttle there.")
    labels = sorted({p.network for p in points})
    res.note("Hybrid <= min(SmartShuttle, fused-only) and general --fuse <= hybrid at every point of "
             + ", ".join(labels) + " (checked; a failure would be listed above).")


__all__ = ["NAME", "PAPER", "TITLE", "fig6_rows", "fused_only_dram", "network_dram", "network_point", "run",
           "words_arch"]
