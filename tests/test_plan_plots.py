"""Figures of a plan (``plan --plots``): the data they draw is the plan's, and they are written whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileplan import api
from tileplan.report import plots
from tileplan.report.plan_plots import FIGURES, plan_figures, roofline_data, time_series, traffic_series

runner = CliRunner()


@pytest.fixture(scope="module")
def lenet_plan():
    arch = api.load_arch("eyeriss")
    network = api.load_network("lenet5")
    return api.plan(network, arch, jobs=1), arch, network


def test_every_layer_lies_under_the_roof(lenet_plan) -> None:
    """Attained performance = MACs / latency can exceed neither the peak nor bandwidth x intensity."""
    plan, arch, _ = lenet_plan
    points, roof = roofline_data(plan, arch)
    assert roof.peak == pytest.approx(arch.peak_macs_per_cycle(arch.precision_bytes) * arch.clock_hz / 1e9)
    assert roof.bandwidth == arch.dram.bandwidth_bytes_per_s / 1e9
    assert len(points) == sum(1 for lp in plan.layers if lp.cost.macs > 0)
    for p in points:
        assert p.performance <= min(roof.peak, roof.bandwidth * p.intensity) * (1 + 1e-9), p
    conv1 = next(p for p in points if p.label == "conv1")
    lp = next(lp for lp in plan.layers if lp.name == "conv1")
    assert conv1.intensity == lp.cost.macs / lp.cost.dram_bytes
    assert conv1.series == f"{lp.cost.bound}-bound"


def test_stacks_add_up_to_the_plan(lenet_plan) -> None:
    plan, _, _ = lenet_plan
    names, traffic = traffic_series(plan)
    _, time = time_series(plan)
    by_name = {lp.name: lp for lp in plan.layers}
    for i, name in enumerate(names):
        c = by_name[name].cost
        assert sum(s[i] for s in traffic.values()) * 1024 == pytest.approx(c.dram_bytes, rel=1e-12)
        assert time["load"][i] + time["store"][i] == pytest.approx(c.dram_cycles, rel=1e-12)
        assert time["on-chip"][i] == max(c.compute_cycles, c.noc_cycles)
        assert min(traffic["output written"][i], traffic["partial sums read"][i]) >= 0


def test_graph_lanes_put_branches_on_their_own_rows() -> None:
    names = list("abcdefghi")
    inputs = {"b": ["a"], "c": ["b"], "d": ["a"], "e": ["c", "d"], "f": ["e"], "g": ["f"], "h": ["f"],
              "i": ["g", "h"]}
    lanes = plots.graph_lanes(names, inputs)
    assert lanes == {"a": 0, "b": 0, "c": 0, "d": 1, "e": 0, "f": 0, "g": 0, "h": 1, "i": 0}
    net = api.load_network("resnet18")
    lanes = plots.graph_lanes([x.name for x in net.layers], {x.name: x.inputs for x in net.layers})
    assert max(lanes.values()) == 1
    assert sorted(n for n, lane in lanes.items() if lane == 1) == sorted(
        x.name for x in net.layers if x.name.endswith("_down"))


def test_figures_are_deterministic_and_render(lenet_plan) -> None:
    plan, arch, network = lenet_plan
    first = plan_figures(plan, arch, network, groups=[("conv1", "pool1")])
    assert tuple(first) == FIGURES
    again = plan_figures(plan, arch, network, groups=[("conv1", "pool1")])
    for name in FIGURES:
        svg = plots.svg_text(first[name])
        assert svg.startswith("<?xml") and "<svg" in svg
        assert svg == plots.svg_text(again[name])
    assert plots.figure_bytes(first["graph"], "png").startswith(b"\x89PNG")


def test_plan_plots_cli(tmp_path: Path) -> None:
    from tileplan.cli import app

    folder = tmp_path / "figs" / "lenet"
    result = runner.invoke(app, ["plan", "lenet5", "--arch", "eyeriss", "-j", "1", "--plots", str(folder)])
    assert result.exit_code == 0, result.output
    assert "wrote 4 figures (PNG and SVG)" in result.output
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.{e}" for n in FIGURES for e in ("png", "svg"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(app, ["plan", "lenet5", "--arch", "eyeriss", "--plots", str(blocker)])
    assert result.exit_code == 2 and "it is a file, not a folder" in result.output
    assert blocker.read_text() == "x"
