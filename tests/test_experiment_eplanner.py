"""`tileplan experiment eplanner --quick`: the thesis's chapter-8 experiments, reduced."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from helpers import quick_run_fixture

from tileplan.experiments.common import ExperimentResult, Reference

# The tests read the tables and PNG files: the figures are written as PNG only (conftest).
pytestmark = pytest.mark.png_figures


quick_run = quick_run_fixture("eplanner")


def test_quick_run_writes_every_table_figure_and_explains_every_gap(
        quick_run: tuple[Path, str, ExperimentResult]) -> None:
    tmp_path, output, _ = quick_run
    assert "0 unexplained" in output
    summary = (tmp_path / "summary.md").read_text()
    assert "UNEXPLAINED" not in summary and "table8_4.alexnet.A" in summary
    for name in ("table8_4_fig8_2", "never_worse", "table8_5_space", "table8_5_gap_to_exhaustive", "fig8_4_caching"):
        assert (tmp_path / f"{name}.csv").exists(), name
    for name in ("fig8_1_speedup", "fig8_2_traffic", "fig8_3_eplanner", "fig8_3_smartshuttle-rules", "fig8_4_caching"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0, name
    # e-PlaNNer is never slower than a baseline (Table 8.4's measure) ...
    rows = list(csv.DictReader((tmp_path / "never_worse.csv").open()))
    assert {r["baseline"] for r in rows} == {"zhang", "ma", "smartshuttle-rules"}
    assert {r["measure"] for r in rows} == {"latency", "metric", "traffic"}
    assert {r["planner"] for r in rows} == {"eplanner", "eplanner-strict"}
    assert all(r["layers_where_planner_is_worse"] == "0" for r in rows if r["measure"] == "latency")
    # ... never worse on the metric it optimises (Eq. 6.13) ...
    assert all(r["layers_where_planner_is_worse"] == "0" for r in rows
               if r["measure"] == "metric" and r["planner"] == "eplanner")
    # ... and the exhaustive optimum is never worse than either pruned planner.
    gaps = list(csv.DictReader((tmp_path / "table8_5_gap_to_exhaustive.csv").open()))
    assert gaps and all(float(r[f"ratio_{p}"]) >= 1 - 1e-9 for r in gaps for p in ("eplanner", "eplanner-strict"))
    space = list(csv.DictReader((tmp_path / "table8_5_space.csv").open()))
    assert 0 < float(space[0]["pruned"]) <= float(space[0]["evaluated"])


def test_reference_cites_every_thesis_number() -> None:
    ref = Reference.load("eplanner")
    assert ref.value("table8_4.avg.avg") == 6.12 and ref.value("fig8_2.reduction.avg") == 21.14
    assert all(v.source and v.note for v in ref.values.values())
    assert len([k for k in ref.values if k.startswith("table8_4.")]) == 30


def test_fig5_2_and_6_5_conv4_2_tilings() -> None:
    from tileplan.experiments import eplanner_extra

    steps, points, problem = eplanner_extra.conv4_2_steps(quick=True)
    counts = [s["tilings"] for s in steps]
    # the thesis's un-pruned count ("about 2 x 10^9"): every tile size of KW, KH, OW, OH, IC, OC
    assert counts[0] == 3 * 3 * 28 * 28 * 512 * 512
    # the planner's candidates: every size of the 3 x 3 x 28 x 28 loops; IC and OC at multiples of the
    # 16-lane PE mapping (16, 32, ..., 512) plus 1 -> 33 sizes each
    assert counts[1] == 3 * 3 * 28 * 28 * 33 * 33
    assert counts[1] > counts[2] > counts[3] > counts[4] == 1  # every pruning step shrinks the space
    assert steps[3]["fitting"] <= steps[2]["fitting"] <= counts[2]
    # every point lies under the roofline: performance <= min(peak, bandwidth x intensity)
    arch = problem.arch
    peak = arch.peak_macs_per_cycle(arch.precision_bytes) * arch.clock_hz / 1e9
    bw = arch.dram.bandwidth_bytes_per_s / 1e9
    for arr in points.values():
        assert len(arr) and (arr[:, 1] <= np.minimum(peak, bw * arr[:, 0]) * (1 + 1e-9)).all()
    # intensity is MACs over DRAM bytes: conv4_2 has 512 x 28 x 28 x 512 x 9 MACs and moves at least its
    # compulsory fp32 traffic (input + weights + output)
    compulsory = 4 * (512 * 28 * 28 * 2 + 512 * 512 * 9)
    assert points["all tilings (sample)"][:, 0].max() <= 512 * 28 * 28 * 512 * 9 / compulsory * (1 + 1e-9)


def test_table8_1_networks_against_the_thesis(quick_run: tuple[Path, str, ExperimentResult]) -> None:
    res = quick_run[2]  # (eplanner_extra.table8_1 on all five networks: shape arithmetic, whole in --quick too)
    rows = {r["network"]: r for r in res.tables["table8_1_networks"]}
    # VGG16 by hand: 13 convs + 3 FCs; 138,344,128 weights (no biases) -> 527.741 MiB at fp32, the thesis's
    # 527.741 "MB"; 15,470,264,320 MACs / 2^30 = 14.408, the thesis's "Gflops"
    assert (rows["vgg16"]["conv"], rows["vgg16"]["fc"], rows["vgg16"]["weights"]) == (13, 3, 138_344_128)
    assert round(rows["vgg16"]["size_mb"], 3) == 527.741 and round(rows["vgg16"]["gops"], 3) == 14.408
    # ResNet-50 without its 4 downsample convs (256x64 + 512x256 + 1024x512 + 2048x1024 weights) is the
    # thesis's 86.72 MB to 0.01 %
    down = 256 * 64 + 512 * 256 + 1024 * 512 + 2048 * 1024
    assert abs((rows["resnet50"]["weights"] - down) * 4 / 2**20 / 86.723 - 1) < 1e-3
    assert [rows[n]["layers"] for n in ("alexnet", "squeezenet", "yolov2")] == [8, 26, 23]
    assert not res.unexplained()
    assert (quick_run[0] / "table8_1_networks.png").stat().st_size > 0  # drawn and saved (conftest lints it)
