"""Ye et al.'s Fig. 6: the two DenseNet-121 layer pairs per fused strategy, single-layer reuse and the
printed Eq. 9 minimum against the buffer size, and why Fig. 6a's weight-reuse labels read as swapped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tileplan.cost.problem import Problem
from tileplan.experiments.ye_setup import DRAM, words_arch
from tileplan.fusion.group import FusedGroup
from tileplan.fusion.ye import FUSED, search_pair_sizes
from tileplan.fusion.ye_formulas import PairShape, best_printed, best_printed_f2l
from tileplan.search import run as run_strategy
from tileplan.search.ye import ORDERS
from tileplan.workload.layer import Layer, Precision


def fig6_pair(c1: int, hw: int) -> tuple[FusedGroup, list[Layer]]:
    """Fig. 6's DenseNet-121 pairs: a 1x1 conv C1 -> 128 then a 3x3 conv 128 -> 32 on hw x hw, batch 3."""
    p = Precision.uniform(1)
    l1 = Layer.conv("l1", n=3, c_in=c1, h=hw, w=hw, k_out=128, r=1, precision=p)
    l2 = Layer.conv("l2", n=3, c_in=128, h=hw, w=hw, k_out=32, r=3, inputs=("l1",), precision=p)
    return FusedGroup((l1, l2)), [l1, l2]


def fig6_rows(c1: int, hw: int, sizes: Sequence[int], *, paper_formulas: bool = False) -> list[dict[str, Any]]:
    """Per buffer size: DRAM elements of each fused strategy, of single-layer ir / wr / pr (both
    layers the same dataflow), SmartShuttle (best per layer), and the printed Eq. 9 minimum."""
    group, layers = fig6_pair(c1, hw)
    archs = [words_arch(kb) for kb in sizes]
    fused = {name: search_pair_sizes(group, archs, name) for name in FUSED}  # every size in one pass
    rows = []
    for i, (kb, arch) in enumerate(zip(sizes, archs, strict=True)):
        row: dict[str, Any] = {"buffer_kb": kb}
        for name in FUSED:
            res = fused[name][i]
            row[name] = float(res.cost.dram_bytes[0]) if res is not None else float("nan")
        per_layer = {name: [float(run_strategy(name, Problem(x, arch), DRAM).cost.dram_bytes[0]) for x in layers]
                     for name in ORDERS}
        for name in ORDERS:
            row[name] = sum(per_layer[name])
        # SmartShuttle: the best of ir / wr / pr per layer (what its brute force finds, tests).
        row["smartshuttle"] = sum(min(per_layer[n][i] for n in ORDERS) for i in range(len(layers)))
        printed = best_printed_f2l(PairShape.of(group), kb * 1024)
        row["f2l_printed_eq9"] = printed.dram_elements if printed is not None else float("nan")
        if paper_formulas:
            for name in FUSED:
                best = best_printed(name, PairShape.of(group), kb * 1024)
                row[f"{name}_printed"] = best.dram_elements if best is not None else float("nan")
        rows.append(row)
    return rows


def fig6a_weight_reuse_note(rows: list[dict[str, Any]], sizes: Sequence[int] = (96, 128, 256)) -> str:
    """Why Fig. 6a's "wr2lv2 best above 96 KB" is wr2lv1 here: the printed Eq. 3 / Eq. 5 minima and
    the model's at ``sizes`` (those of ``rows``), one and two bytes per element."""
    group, _ = fig6_pair(336, 28)
    shape = PairShape.of(group)
    by_kb = {r["buffer_kb"]: r for r in rows}

    def printed(name: str, kb: int, width: int) -> str:
        best = best_printed(name, shape, kb * 1024 / width)
        return "does not fit" if best is None else f"{best.dram_elements:,.0f}"

    parts = []
    for kb in [k for k in sizes if k in by_kb]:
        r = by_kb[kb]
        parts.append(f"{kb} KB: Eq. 3 (wr2lv1) {printed('wr2lv1', kb, 1)} vs Eq. 5 (wr2lv2) {printed('wr2lv2', kb, 1)} "
                     f"words printed, {r['wr2lv1']:,.0f} vs {r['wr2lv2']:,.0f} in the model; at 2 B/element "
                     f"{printed('wr2lv1', kb, 2)} vs {printed('wr2lv2', kb, 2)}")
    weights = shape.c1 * shape.d1 * shape.s1 ** 2 + shape.d1 * shape.d2 * shape.s2 ** 2
    psums = shape.batch * shape.w1 * shape.w2 * shape.d2
    per_d = shape.c1 * shape.s1 ** 2 + shape.d2 * shape.s2 ** 2
    return ("**fig6a** the paper has wr2lv2 as the best fused strategy above 96 KB; here it is wr2lv1, and no "
            "reading of the printed equations gives the paper's order: with C = c = 1, Eq. 5 is Eq. 3 with its "
            f"ifmap term multiplied by D1/d >= 1 (d <= D1 = {shape.d1}), so wr2lv2 never beats wr2lv1 where both fit, "
            f"and Eq. 6 is below Eq. 4 only when B W1 W2 D2 + d (C1 S1^2 + D2 S2^2) = {psums:,} + {per_d} d < "
            f"{weights:,} (all weights), i.e. d <= {(weights - psums - 1) // per_d}, where the ifmaps are re-read "
            f">= {-(-shape.d1 // ((weights - psums - 1) // per_d))} times. At two bytes per element neither weight "
            f"reuse fits below {psums * 2 / 1024:.0f} KB (wr2lv2's psums alone), so no word width helps either. "
            + "; ".join(parts) + ". We read Fig. 6a's wr2lv1 / wr2lv2 labels as swapped.")


def best_fused(row: dict[str, Any]) -> str:
    """The fused strategy with the fewest DRAM accesses in a Fig. 6 row (nan: does not fit)."""
    fits = {n: row[n] for n in FUSED if row[n] == row[n]}
    return min(fits, key=fits.__getitem__) if fits else "none"


__all__ = ["best_fused", "fig6_pair", "fig6_rows", "fig6a_weight_reuse_note"]
