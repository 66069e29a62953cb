"""`tileplan experiment marvel --quick`: MARVEL's §4, reduced to two layers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import quick_run_fixture

from tileplan.experiments.common import ExperimentResult, Reference

# The tests read the tables and PNG files: the figures are written as PNG only (conftest).
pytestmark = pytest.mark.png_figures


quick_run = quick_run_fixture("marvel")


def test_quick_run_writes_every_table_figure_and_explains_every_gap(
        quick_run: tuple[Path, str, ExperimentResult]) -> None:
    tmp_path, output, _ = quick_run
    assert "0 unexplained" in output
    summary = (tmp_path / "summary.md").read_text()
    assert "UNEXPLAINED" not in summary and "fig8.throughput_geomean" in summary
    for name in ("table3_offchip", "fig6_layouts_per_layer", "fig7_uniform_layouts", "table4_space", "fig8_onchip",
                 "fig10_decoupling_gap", "search_time"):
        assert (tmp_path / f"{name}.csv").exists(), name
    for name in ("table3_db_blocks", "fig6_layouts_per_layer", "fig7_uniform_layouts", "table4_space",
                 "fig8_throughput_eyeriss", "fig8_energy_edge", "fig10_decoupling_gap"):
        assert (tmp_path / f"{name}.png").stat().st_size > 0, name
    table3 = {r["layer"]: r for r in csv.DictReader((tmp_path / "table3_offchip.csv").open())}
    assert set(table3) == {"L4", "L10"}
    # L4 (depthwise) keeps its whole 5x5 output and 3x3 window; ours is never above the paper's tile
    assert "P5 Q5 R3 S3" in table3["L4"]["our_tiles"]
    assert float(table3["L4"]["our_db_blocks"]) <= float(table3["L4"]["paper_db_blocks_our_model"])
    # the paper's L10 tile (1024 channels, two addends and the sum) does not fit our double-buffered L2
    assert table3["L10"]["paper_tile_fits_l2"] == "False"
    assert int(table3["L10"]["paper_tile_needs_bytes"]) > 108 * 1024
    # 36 layouts per layer, each normalised to the layer's best (>= 1, the best exactly 1)
    fig6 = list(csv.DictReader((tmp_path / "fig6_layouts_per_layer.csv").open()))
    assert len(fig6) == 72 and min(float(r["normalised"]) for r in fig6) == 1.0
    gap = {(r["layer"], r["platform"]): r for r in csv.DictReader((tmp_path / "fig10_decoupling_gap.csv").open())}
    assert set(gap) == {(lab, p) for lab in ("L4", "L10") for p in ("eyeriss", "edge")}
    assert all(float(r["joint_cycles"]) <= float(r["marvel_cycles"]) for r in gap.values())
    # on edge the joint search finds an L4 level-3 tile that keeps more PEs busy than the DB-optimal one
    assert float(gap["L4", "edge"]["joint_cycles"]) == 373.5 and float(gap["L4", "edge"]["marvel_cycles"]) == 625.5
    assert all(float(r["random_at_joint_time_cycles"]) > 0 for r in gap.values())
    # Fig. 8's MARVEL without the no-prologue/epilogue pruning: never worse; on edge L4 562.5 cycles, not 625.5
    fig8 = {(r["layer"], r["platform"]): r for r in csv.DictReader((tmp_path / "fig8_onchip.csv").open())}
    for r in fig8.values():
        assert float(r["nodiv_macs_per_cycle"]) >= float(r["marvel_macs_per_cycle"])
        assert float(r["nodiv_energy_uj"]) <= float(r["marvel_energy_uj"]) * (1 + 1e-12)
        assert r["nodiv_latency_complete"] == "True"
    assert float(fig8["L4", "edge"]["nodiv_macs_per_cycle"]) / float(fig8["L4", "edge"]["marvel_macs_per_cycle"]) \
        == pytest.approx(625.5 / 562.5, rel=1e-5)  # CSV: 6 digits
    means = {r["variant"]: r for r in csv.DictReader((tmp_path / "fig8_geomeans.csv").open())}
    assert set(means) == {"marvel", "marvel w/o prologue/epilogue pruning", "rs", "nvdla", "shidiannao", "roofline"}
    assert float(means["marvel"]["throughput_over_marvel"]) == 1.0
    assert "fig8.nodiv_throughput_gain" in summary and "NOT exhaustive" in summary
    nets = list(csv.DictReader((tmp_path / "fig9_networks.csv").open()))
    assert {(r["network"], r["platform"]) for r in nets} == {("lenet5", "eyeriss"), ("lenet5", "edge")}
    for r in nets:  # MARVEL's on-chip search contains every baseline's dataflow on the same off-chip choice
        assert all(float(r["marvel_macs_per_cycle"]) >= float(r[f"{b}_macs_per_cycle"])
                   for b in ("rs", "nvdla", "shidiannao"))
    times = list(csv.DictReader((tmp_path / "search_time.csv").open()))
    assert len(times) == 4 and all(float(r["joint_cpu_s"]) > 0 for r in times)
    space = list(csv.DictReader((tmp_path / "table4_space.csv").open()))
    for r in space:
        assert float(r["onchip_costed_after_bound"]) <= float(r["onchip_pruned"]) < float(r["onchip_decoupled"])
        assert float(r["offchip_pruned"]) < float(r["offchip_decoupled"]) < float(r["original"])


def test_reference_cites_every_paper_number() -> None:
    ref = Reference.load("marvel")
    assert ref.value("fig8.throughput_geomean") == 5.23 and ref.value("fig8.energy_geomean") == 1.12
    assert ref.value("table4.original.avg") == 9.4e18 and ref.value("table4.total_pruned.avg") == 2.1e8
    assert all(v.source for v in ref.values.values())


def test_table2_intensities_from_a_plain_formula(quick_run: tuple[Path, str, ExperimentResult]) -> None:
    res = quick_run[2]  # (marvel_extra.table2: shape arithmetic, so the quick run computes it whole)
    rows = {(r["network"], r["type"]): r for r in res.tables["table2_intensity"]}
    # MobileNetV2's depthwise layers, by hand: 3x3 window, one filter per channel, 1 byte per value.
    # Stride 1, c x h x h: MACs 9 c h^2 over c h^2 + 9 c inputs + weights; egress always 9.
    # Widest: 960 x 7 x 7 (last block); narrowest: stride 2, 576 x 14 x 14 -> 576 x 7 x 7.
    dw = rows["mobilenetv2", "DSCONV"]
    assert dw["layers"] == 17 and dw["egress_min"] == dw["egress_max"] == 9.0
    assert dw["ingress_min"] == pytest.approx(9 * 576 * 49 / (576 * 14 * 14 + 9 * 576))
    assert dw["ingress_max"] == pytest.approx(9 * 32 * 112 * 112 / (32 * 112 * 112 + 9 * 32))  # first block
    assert dw["paper_ingress_max"] == 8.8
    # pointwise egress is C_in: 16 (the first project) .. 960 (the last); the paper's range exactly
    pw = rows["mobilenetv2", "PWCONV"]
    assert (pw["egress_min"], pw["egress_max"]) == (16.0, 960.0) == (pw["paper_egress_min"], pw["paper_egress_max"])
    # ResNet-50's residual adds read both summands: MACs = outputs, ingress = 2 outputs -> 0.5, total 1/4
    add = rows["resnet50", "RAdd"]
    assert (add["ingress_max"], add["total_max"]) == (0.5, 0.25)
    assert rows["mobilenetv2", "SPWCONV"]["layers"] == 0  # the zoo's MobileNetV2 strides in depthwise layers
    assert not res.unexplained()
    sconv = next(c for c in res.comparisons if c.key == "table2.resnet50.SCONV.egress_max")
    assert sconv.ours == 512 * 9 and "v1.5" in sconv.explanation
    assert (quick_run[0] / "table2_intensity.png").stat().st_size > 0  # drawn and saved (conftest lints it)


def test_uniform_dataflow_quick(quick_run: tuple[Path, str, ExperimentResult]) -> None:
    from tileplan.experiments import marvel_extra

    res = quick_run[2]  # (the quick run's uniform dataflow: marvel_extra.uniform_dataflow on L4 and L10)
    rows = {r["layer"]: r for r in res.tables["uniform_dataflow_eyeriss"]}
    assert set(rows) == {"L4", "L10"}
    for r in rows.values():  # the free MARVEL search contains every restricted one
        best = min(r[f"{f}_cycles"] for f in marvel_extra.QUICK_DATAFLOWS)
        assert r["CP_cycles"] == best
    # L10 (a residual add, 2048 x 7 x 7): 100,352 additions on 168 PEs take at least 100352 / 168 cycles
    assert rows["L10"]["CP_cycles"] >= 100352 / 168
    assert "CP-partitioned" in res.notes[-1]  # the quick run's last note
    assert (quick_run[0] / "uniform_dataflow_eyeriss.png").stat().st_size > 0


def test_dataflow_letters_are_marvels() -> None:
    """MARVEL's P is the output width and its Q the output height (our Q and P): the uniform-dataflow
    pairs are named in its letters, so its CP fans out over input channels and output columns."""
    from tileplan.dims import Dim
    from tileplan.experiments import marvel_extra
    from tileplan.workload.layer import Layer

    layer = Layer.conv("x", c_in=4, h=10, w=20, k_out=8, r=3, s=3, pad=0)  # output 8 rows x 18 columns
    assert [layer.dims[d] for d in marvel_extra.fanout_dims("P")] == [18]
    assert [layer.dims[d] for d in marvel_extra.fanout_dims("Q")] == [8]
    assert marvel_extra.fanout_dims("QR") == (Dim.P, Dim.R)  # row-stationary: output rows x filter rows
    assert marvel_extra.fanout_dims("CP") == (Dim.C, Dim.G, Dim.Q)
    # L8's level-3 tile is 54 columns x 6 rows (Table 3: P 54, Q 6): CP spreads over the 54 columns and
    # is faster on eyeriss than CQ, spread over 6 rows; the run before the letters were translated had
    # them the other way round and so named the best uniform dataflow "CQ".
    cp, cq = marvel_extra._latency_task(("L8", "CP")), marvel_extra._latency_task(("L8", "CQ"))
    assert (cp, cq) == (746496.0, 1119744.0)
