"""e-PlaNNer thesis Fig. 5.2 (every tiling of VGG16's 9th conv on a roofline), Fig. 6.5 (the space
after each pruning step) and Table 8.1 (the five networks: layers, size, operations).

Fig. 5.2 / 6.5 use VGG16's conv4_2 (512 x 28 x 28 in and out, 512 3x3 filters, fp32) on setup A's
fixed on-chip memories. The tilings are the planner's own candidate tile sizes of the six off-chip
loops (``Nest.values``: every size of KW, KH, OH, OW; multiples of the 16-lane PE mapping for IC and
OC), each with Alg. 3's loop order, costed by the one model: performance = MACs / modelled cycles,
operational intensity = MACs / DRAM bytes. The scatter shows a deterministic sample of the fitting
tilings (every one in --quick would take minutes with the numpy twin of the kernel).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tileplan import api
from tileplan.cost.problem import Problem
from tileplan.dims import Operand
from tileplan.experiments.common import ExperimentResult, Reference
from tileplan.report import plots
from tileplan.search.eplanner import alg1_initial, alg2_eliminate, fitting
from tileplan.search.nest import LOOPS, Nest
from tileplan.workload.precision import Precision

SETUP = "eplanner-a"
LAYER = ("vgg16", "conv4_2")
#: Fitting tilings drawn for the scatter (a deterministic stride over the fitting ones).
SAMPLE = {True: 1500, False: 20000}
#: Tilings per block when counting every fitting one (full run).
CHUNK = 1 << 20
GIB = 2**30
MIB = 2**20


def conv4_2_steps(quick: bool) -> tuple[list[dict[str, Any]], dict[str, np.ndarray], Any]:
    """Counts after each pruning step and, per step, (n, 2) [intensity MAC/B, performance GMAC/s]."""

    layer = next(x for x in api.load_network(LAYER[0]).layers if x.name == LAYER[1])
    arch = api.load_arch(SETUP)
    problem = Problem(layer.with_precision(Precision.uniform(arch.precision_bytes, arch.psum_bytes)), arch)
    nest = Nest.of(problem)
    values = [nest.values(i) for i in range(6)]
    shape = tuple(len(v) for v in values)
    total = int(np.prod(shape))
    stride = max(1, total // (SAMPLE[quick] * 7))  # about 1 in 7 tilings fits setup A
    sample = fitting(nest, _tilings(values, shape, np.arange(0, total, stride)))
    init = alg1_initial(nest)
    alg1 = fitting(nest, nest.grid(init))
    bound, eliminated = alg2_eliminate(nest, alg1_initial(nest, relax=False))
    alg2 = fitting(nest, nest.grid(bound))
    points = {name: _perf(nest, t) for name, t in (("all tilings (sample)", sample), ("after Alg. 1", alg1),
                                                  ("after Alg. 2", alg2))}
    best_row = int(np.argmax(points["after Alg. 2"][:, 1] / np.maximum(points["after Alg. 2"][:, 2], 1e-30)))
    points["Alg. 4's choice"] = points["after Alg. 2"][best_row:best_row + 1]
    steps = [{"step": "un-pruned (every tile size, thesis count)", "tilings": int(np.prod(nest.extent)), "fitting": ""},
             {"step": "candidate sizes (PE multiples for IC, OC)", "tilings": total,
              "fitting": "" if quick else sum(len(fitting(nest, _tilings(values, shape, np.arange(a, min(a + CHUNK,
                                                                                                          total)))))
                                              for a in range(0, total, CHUNK))},
             {"step": "after Alg. 1 (KW, KH, OW full; grid above)", "tilings": nest.grid_size(init),
              "fitting": len(alg1)},
             {"step": "after Alg. 2 (lower bound, eliminated " + ",".join(LOOPS[i] for i in eliminated) + ")",
              "tilings": nest.grid_size(bound), "fitting": len(alg2)},
             {"step": "Alg. 4 (best under Eq. 6.13)", "tilings": 1, "fitting": 1}]
    return steps, points, problem


def _tilings(values: list[np.ndarray], shape: tuple[int, ...], index: np.ndarray) -> np.ndarray:
    """(n, 6) tilings at flat ``index`` of the grid of every loop's candidate ``values`` (not built whole:
    VGG16 conv4_2 has 7.7 M)."""
    coords = np.unravel_index(index, shape)
    return np.stack([values[i][coords[i]] for i in range(6)], axis=1).astype(np.int64)


def _perf(nest: Nest, t6: np.ndarray) -> np.ndarray:
    """(n, 3): MACs per DRAM byte, GMAC/s, and DRAM bytes of each tiling under Alg. 3's order."""
    if not len(t6):
        return np.zeros((0, 3))
    costs = nest.evaluate(nest.batch(t6, nest.order_alg3(t6)))
    clock = nest.problem.arch.clock_hz
    macs = np.full(len(t6), float(costs.macs))
    dram = np.maximum(costs.dram_bytes.astype(float), 1.0)
    return np.stack([macs / dram, macs / costs.latency_cycles * clock / 1e9, dram], axis=1)


def fig5_2_6_5(res: ExperimentResult) -> None:
    steps, points, problem = conv4_2_steps(res.quick)
    res.table("fig6_5_pruning_steps", steps)
    arch = problem.arch
    peak = arch.peak_macs_per_cycle(arch.precision_bytes) * arch.clock_hz / 1e9
    bw = arch.dram.bandwidth_bytes_per_s / 1e9
    allp = points["all tilings (sample)"]
    res.table("fig5_2_conv4_2_tilings", [{"intensity_mac_per_B": float(i), "performance_gmacs": float(p),
                                          "dram_MB": float(b) / 1e6} for i, p, b in allp])
    bound = np.minimum(peak, bw * allp[:, 0])
    res.note(f"Fig. 5.2 ({LAYER[0]} {LAYER[1]}, {SETUP}: roof {peak:.0f} GMAC/s, {bw:.0f} GB/s): {len(allp)} sampled "
             f"fitting tilings span {allp[:, 0].min():.1f}-{allp[:, 0].max():.1f} MAC/B and "
             f"{allp[:, 1].min():.1f}-{allp[:, 1].max():.1f} GMAC/s; {int((allp[:, 1] >= 0.99 * bound).sum())} of them "
             f"reach 99 % of the roofline at their intensity. Fig. 6.5: "
             + " -> ".join(f"{s['tilings']:,}" + (f" ({s['fitting']:,} fit)" if s["fitting"] != "" else "")
                           for s in steps) + " tilings.")
    roofs = [plots.Roof(f"{SETUP} ({peak:.0f} GMAC/s, {bw:.0f} GB/s)", peak, bw)]
    res.figure("fig5_2_conv4_2_roofline", lambda: plots.roofline(
        [plots.RoofPoint("", float(i), float(p), "tilings") for i, p, _b in allp], roofs,
        title=f"Fig. 5.2: every tiling of VGG16 conv4_2 on {SETUP} (sample of {len(allp)})"))
    res.figure("fig6_5_pruned_space", lambda: plots.roofline(
        [plots.RoofPoint("", float(i), float(p), name) for name, arr in points.items() for i, p, _b in arr], roofs,
        title=f"Fig. 6.5: conv4_2's space after each pruning step ({SETUP})"))


#: Table 8.1's columns per network: size (MB), operations (G), weighted layers, conv layers, fc layers.
_COLS = ("size_mb", "gops", "layers")


def table8_1(res: ExperimentResult, ref: Reference, networks: dict[str, str]) -> None:
    rows: list[dict[str, Any]] = []
    for key, zoo in networks.items():
        net = api.load_network(zoo)
        weighted = [x for x in net.layers if x.has_weights]
        fc = sum(x.op.value == "fc" for x in weighted)
        macs = sum(x.macs for x in weighted)
        weights = sum(x.elements(Operand.WEIGHT) for x in weighted)
        rows.append({"network": key, "zoo": zoo, "layers": len(weighted), "conv": len(weighted) - fc, "fc": fc,
                     "macs": macs, "weights": weights, "size_mb": weights * 4 / MIB, "gops": macs / GIB,
                     **{f"paper_{c}": ref.value(f"table8_1.{key}.{c}") for c in _COLS}})
    vgg = next((r for r in rows if r["network"] == "vgg16"), None)
    for r in rows:
        key, zoo = r["network"], r["zoo"]
        for c in _COLS:
            ratio = r[f"paper_{c}"] / r[c]
            why = _why(r, c, ratio, vgg)
            if c != "layers" and key != "vgg16":
                why += f"; the zoo's {zoo} has {r['conv']} conv + {r['fc']} fc layers"
            downs = [x for x in api.load_network(zoo).layers if x.has_weights and "down" in x.name]
            if downs and c == "layers":
                why += f", incl. {len(downs)} 1x1 downsample convs the thesis's 49 + 1 leave out"
            if downs and c == "size_mb":
                dw = sum(x.elements(Operand.WEIGHT) for x in downs)
                why += (f"; without its {len(downs)} downsample convs ({dw:,} weights) ours is "
                        f"{(r['weights'] - dw) * 4 / MIB:.2f} MiB")
            res.compare(ref, f"table8_1.{key}.{c}", r[c], explanation=why, quick_same=True)
    res.table("table8_1_networks", rows)
    res.figure("table8_1_networks", lambda: plots.bar_panels(
        [r["network"] for r in rows],
        [("weights (MiB, fp32)", {"thesis": [r["paper_size_mb"] for r in rows], "ours": [r["size_mb"] for r in rows]}),
         ("MACs / 2^30 (G)", {"thesis": [r["paper_gops"] for r in rows], "ours": [r["gops"] for r in rows]})],
        title="Table 8.1: the five networks, thesis vs zoo"))


def _why(r: dict[str, Any], c: str, ratio: float, vgg: dict[str, Any] | None) -> str:
    """The generated part of a Table 8.1 explanation that every network shares."""
    if c == "layers":
        return f"ours counts {r['conv']} conv + {r['fc']} fc weighted layers"
    if vgg is None:
        return ""
    if c == "size_mb":
        return (f"ours: {r['weights']:,} fp32 weights = {r['size_mb']:.2f} MiB (the thesis's MB are MiB: VGG16 "
                f"matches to {100 * abs(vgg['size_mb'] / vgg['paper_size_mb'] - 1):.2f} %)")
    return (f"ours: {r['macs']:,} MACs / 2^30 = {r['gops']:.3f}; the thesis's 'Gflops' equal MACs / 2^30 for VGG16 "
            f"({vgg['gops']:.3f} vs {vgg['paper_gops']}) but are {ratio:.2f}x ours for {r['network']}, so its "
            "count differs per network (input size or ops per MAC)")


def run(res: ExperimentResult, ref: Reference, networks: dict[str, str]) -> None:
    """Figs. 5.2, 6.5 and Table 8.1 (called from :func:`tileplan.experiments.eplanner.run`)."""
    fig5_2_6_5(res)
    table8_1(res, ref, networks)

