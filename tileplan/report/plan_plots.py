"""The figures of one plan (``plan --plots``, the HTML report), drawn with :mod:`tileplan.report.plots`.

Units on the axes: GMAC/s, MAC per DRAM byte, KB (1024 bytes), cycles.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from tileplan.arch.spec import Arch
from tileplan.plan import LayerPlan, NetworkPlan
from tileplan.report import plots
from tileplan.workload.network import Network

#: Figure names, in the order the report shows them.
FIGURES = ("roofline", "traffic", "time", "graph")


def _moving(plan: NetworkPlan) -> list[LayerPlan]:
    """Layers that move data (a concat written in place has nothing to draw)."""
    return [lp for lp in plan.layers if lp.cost.dram_bytes > 0 or lp.cost.latency_cycles > 0]


def roofline_data(plan: NetworkPlan, arch: Arch) -> tuple[list[plots.RoofPoint], plots.Roof]:
    """Every layer's point (MACs per DRAM byte, GMAC/s attained) and the accelerator's roof
    (peak GMAC/s, DRAM GB/s). Layers without MACs or DRAM traffic have no point."""
    precision = int(plan.meta.get("precision_bytes", arch.precision_bytes))
    peak = arch.peak_macs_per_cycle(precision) * arch.clock_hz / 1e9
    roof = plots.Roof(f"{arch.name}: {peak:g} GMAC/s, {arch.dram.bandwidth_bytes_per_s / 1e9:g} GB/s", peak,
                      arch.dram.bandwidth_bytes_per_s / 1e9)
    points = [plots.RoofPoint(lp.name, lp.cost.macs / lp.cost.dram_bytes,
                              lp.cost.macs / lp.cost.latency_cycles * plan.clock_hz / 1e9,
                              f"{lp.cost.bound}-bound")
              for lp in _moving(plan) if lp.cost.macs > 0 and lp.cost.dram_bytes > 0 and lp.cost.latency_cycles > 0]
    return points, roof


def roofline_figure(plan: NetworkPlan, arch: Arch) -> Figure:
    """Every layer on the accelerator's roofline (TSO Fig. 11, e-PlaNNer Fig. 5.2), coloured by what
    bounds the layer."""
    points, roof = roofline_data(plan, arch)
    return plots.roofline(points, [roof], title=f"{plan.network} on {arch.name}: roofline of the chosen mappings",
                          annotate=len(points) <= 25)


def traffic_series(plan: NetworkPlan) -> tuple[list[str], dict[str, list[float]]]:
    """Layer names and per-layer DRAM KB by operand; partial sums read back are apart from the final
    output writes (the four parts add up to the layer's DRAM bytes)."""
    layers = _moving(plan)
    return [lp.name for lp in layers], {
        "input": [lp.cost.dram_input_bytes / 1024 for lp in layers],
        "weight": [lp.cost.dram_weight_bytes / 1024 for lp in layers],
        "output written": [(lp.cost.dram_output_bytes - lp.cost.dram_psum_read_bytes) / 1024 for lp in layers],
        "partial sums read": [lp.cost.dram_psum_read_bytes / 1024 for lp in layers],
    }


def traffic_figure(plan: NetworkPlan) -> Figure:
    """Per-layer DRAM traffic stacked by operand (e-PlaNNer Fig. 8.3)."""
    names, series = traffic_series(plan)
    return plots.stacked_bars(names, series, ylabel="DRAM traffic (KB)",
                              title=f"{plan.network} on {plan.arch}: DRAM traffic per layer by operand")


def time_series(plan: NetworkPlan) -> tuple[list[str], dict[str, list[float]]]:
    """Layer names and per-layer cycles: load, store (the DRAM time split in proportion to the bytes
    read and written, so load + store = DRAM cycles) and on-chip (the larger of compute and NoC)."""
    layers = _moving(plan)
    load, store, onchip = [], [], []
    for lp in layers:
        c = lp.cost
        written = c.dram_output_bytes - c.dram_psum_read_bytes
        share = written / c.dram_bytes if c.dram_bytes else 0.0
        load.append(c.dram_cycles * (1 - share))
        store.append(c.dram_cycles * share)
        onchip.append(max(c.compute_cycles, c.noc_cycles))
    return [lp.name for lp in layers], {"load": load, "store": store, "on-chip": onchip}


def time_figure(plan: NetworkPlan) -> Figure:
    """Per-layer time stacked load / store / on-chip (TSO Fig. 9). Where transfers overlap compute the
    latency is the larger part, not the sum."""
    names, series = time_series(plan)
    return plots.stacked_bars(names, series, ylabel="cycles", title=f"{plan.network} on {plan.arch}: time per layer")


def graph_figure(plan: NetworkPlan, network: Network, groups: Sequence[Sequence[str]] = ()) -> Figure:
    """The network graph, layers coloured by what bounds them, fusion groups boxed."""
    bound = {lp.name: lp.cost.bound for lp in plan.layers}
    palette = {"DRAM": "C3", "NoC": "C1", "compute": "C2", "none": "0.6"}
    colours = {lp.name: palette[bound[lp.name]] if lp.mapping is not None else palette["none"]
               for lp in plan.layers}
    return plots.network_graph([layer.name for layer in network.layers],
                               {layer.name: layer.inputs for layer in network.layers}, groups=groups,
                               colours=colours, title=f"{plan.network}: layer graph",
                               legend={"DRAM-bound": palette["DRAM"], "NoC-bound": palette["NoC"],
                                       "compute-bound": palette["compute"], "moves no data": palette["none"]})


def plan_figures(plan: NetworkPlan, arch: Arch, network: Network,
                 groups: Sequence[Sequence[str]] = ()) -> dict[str, Figure]:
    """Every figure of a plan, keyed by the names in :data:`FIGURES`."""
    return {"roofline": roofline_figure(plan, arch), "traffic": traffic_figure(plan), "time": time_figure(plan),
            "graph": graph_figure(plan, network, groups)}


def save_plan_figures(figures: dict[str, Figure], folder: str | Path) -> list[Path]:
    """Write each figure as ``NAME.png`` and ``NAME.svg`` into ``folder`` (which must exist)."""
    paths: list[Path] = []
    for name, fig in figures.items():
        paths.extend(plots.save(fig, folder, name))
    return paths
