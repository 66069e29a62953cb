"""`tileplan experiment hwff`: Figs. 12-13 (least storage to fuse VGG16's first layers, our reuse
buffer against Alwani et al.'s), the reference data, and registration (the whole run is a bench)."""

from __future__ import annotations

import pytest

from tileplan import experiments
from tileplan.experiments import hwff, hwff_extra
from tileplan.experiments.common import ExperimentResult, Reference
from tileplan.fusion.partition import FusionKind


def test_fig12_13_reuse_buffer_smaller_than_alwani() -> None:
    res = ExperimentResult(hwff.NAME, hwff.TITLE, hwff.PAPER, quick=True)
    hwff._fig12_13(res, Reference.load("hwff"), quick=True)
    rows = res.tables["fig12_fig13_storage"]
    assert [r["layers"] for r in rows] == [2, 3, 4]
    for r in rows:
        assert r["reuse_kB"] < r["alwani_kB"] and r["reuse_kB_at_14x14"] < r["alwani_kB_at_14x14"]
        assert 0 < r["dram_saving_pct"] < 100
    # Fusing CONV1-CONV2-POOL1 at 16 bit: 0.3 MB in, 74 kB of weights, 1.6 MB out instead of ~27.6 MB.
    assert 92 < rows[1]["dram_saving_pct"] < 94
    assert rows[0]["reuse_smaller_pct_at_14x14"] < rows[1]["reuse_smaller_pct_at_14x14"] < \
        rows[2]["reuse_smaller_pct_at_14x14"]  # the gap grows with the fused layers (the paper's remark)
    assert not res.unexplained()
    # The paper's ~60 % is over the first seven layers' volume (CONV1..CONV5), fusing the first three:
    # 46.37 MB -> 20.68 MB (tests/test_fusion_vgg_fig12.py walks the same volumes layer by layer).
    fig12 = next(c for c in res.comparisons if c.key == "fig12.saving_first3_pct")
    assert round(fig12.ours, 1) == 55.4 and "46.37 MB -> 20.68 MB" in fig12.explanation
    assert "92.8 %" in fig12.explanation  # the three layers' own volume, said as such
    assert {c.key for c in res.comparisons} == {"fig12.saving_first3_pct", "fig13.reuse_smaller_min_pct",
                                                 "fig13.reuse_smaller_max_pct"}
    assert res.caption_problems() == []


def test_reference_has_every_number_the_experiment_compares() -> None:
    ref = Reference.load("hwff")
    for net in ("vgg16", "resnet18"):
        for metric in ("energy", "latency", "comm"):
            for ratio in ("temporal_over_single", "spatial_over_single", "spatial_over_temporal"):
                assert f"table5.{net}.{metric}.{ratio}" in ref.values
        for key in ("energy_hw6_over_hw5", "latency_hw6_over_hw5"):
            assert f"fig16_17.{net}.{key}" in ref.values
        assert f"fig18_19.{net}.latency_reduction_hw4_pct" in ref.values
        assert f"table7.{net}.{hwff_extra.TABLE7_PAIRS[net][0][0]}.temporal" in ref.values
    assert ref.value("table5.vgg16.latency.spatial_over_temporal") == 188
    assert "hwff" in experiments.names()


def test_fig4_resnet18_pixels_then_weights() -> None:
    from tileplan import api
    rows = hwff_extra.volumes(api.load_network("resnet18"))
    # Plain shape arithmetic: res4a_conv1 (256 x 3 x 3 x 128 = 294,912 weights) is the first layer whose
    # weights exceed its input + output pixels (128 x 28 x 28 + 256 x 14 x 14 = 150,528).
    i = hwff_extra.crossover(rows)
    assert rows[i]["layer"] == "res4a_conv1"
    assert (rows[i]["weight_elems"], rows[i]["pixel_elems"]) == (256 * 3 * 3 * 128, 128 * 28 * 28 + 256 * 14 * 14)
    assert all(r["dominant"] == "pixels" for r in rows[:i])
    assert i == 10 and len(rows) == 21  # the first half of 21 weighted layers (incl. 3 downsample convs, FC)
    # Normalised to the largest volume of either kind: res5's 512 x 3 x 3 x 512 weights.
    assert rows[0]["pixel_norm"] == (3 * 224 * 224 + 64 * 112 * 112) / (512 * 3 * 3 * 512)
    res = ExperimentResult(hwff.NAME, hwff.TITLE, hwff.PAPER, quick=True)
    hwff_extra.fig4(res, api.load_network("resnet18"))
    from tileplan.report import plots
    assert plots.figure_problems(res.figures["fig4_resnet18_volumes"]()) == []
    assert res.caption_problems() == []
    assert "res4a_conv1" in res.notes[0]


def test_table7_all_pairs_quick() -> None:
    from tileplan import api
    res = ExperimentResult(hwff.NAME, hwff.TITLE, hwff.PAPER, quick=True)
    ref = Reference.load("hwff")
    net = hwff._trim(api.load_network("resnet18"), 4)
    arch = api.load_arch("hwff1")
    base = api.plan(net, arch, strategy="exhaustive", objective="energy", jobs=1)
    hwff_extra.table7(res, ref, "resnet18", net, arch, base)
    rows = res.tables["table7_resnet18_ctc"]
    assert [r["pair"] for r in rows] == ["CONV1_POOL1", "CONV2_1_1_CONV2_1_2"]
    for r in rows:  # every number of the pair is compared, each with its pattern in the explanation
        assert r["temporal"] > max(r["single_a"], r["single_b"]) and r["ours_fused_above_both"]
        assert r["paper_fused_above_both"]
    # Table 6: the paper's sub-arrays for these layers, matched by name ([16, 16] for CONV1/POOL1)
    assert rows[0]["table6_paper"] == "[16, 16] [16, 16]" and rows[1]["table6_paper"] == "[32, 8] [32, 8]"
    import re
    for r in rows:  # our two sub-arrays share hwff1's 32 x 16 array
        sides = [(int(x), int(y)) for x, y in re.findall(r"\[(\d+), (\d+)\]", r["table6_ours"])]
        assert len(sides) == 2 and sum(x * y for x, y in sides) <= 32 * 16
    keys = {c.key for c in res.comparisons}
    assert len(keys) == 8 and all("Pattern" in c.explanation for c in res.comparisons)
    # The single-layer CTC is 2 x MACs over burst bytes of the plan's own counts (closed form check).
    lp = next(x for x in base.layers if x.name == "conv1")
    assert rows[0]["single_a"] == 2 * lp.cost.macs / (lp.cost.bursts * arch.dram.burst_bytes)

    from tileplan.report import plots
    assert all(plots.figure_problems(draw()) == [] for draw in res.figures.values()) and res.figures
    assert res.caption_problems() == []


def test_figs18_19_spatial_groups_of_four_layers() -> None:
    """Figs. 16-19 on VGG19's first four layers: one sequence of all four on every config; spatial
    fusion gives each layer its own sub-array (a legal partition of four); the partition changes
    latency only, and the explanation's numbers are this run's."""
    from tileplan import api
    from tileplan.experiments import hwff_scaling
    from tileplan.fusion.partition import Partition, Share, check_partition, place

    net = hwff._trim(api.load_network("vgg19"), 4)
    res = ExperimentResult(hwff.NAME, hwff.TITLE, hwff.PAPER, quick=True)
    hwff_scaling.scaling(res, Reference.load("hwff"), "vgg16", net)
    groups = {r["arch"]: r for r in res.tables["fig16_19_vgg16_groups"]}
    assert set(groups) == {"hwff3", "hwff4", "hwff5", "hwff6"}
    for arch_name, r in groups.items():
        assert (r["group"], r["layers"]) == ("conv1_1+conv1_2+pool1+conv2_1", 4), arch_name
    for arch_name in ("hwff3", "hwff4"):
        r = groups[arch_name]
        sides = [tuple(int(v) for v in s.strip("[]").split(", ")) for s in
                 r["partition"].removeprefix("spatial ").split("] ")]
        arch = api.load_arch(arch_name)
        full = (arch.register_file.weights_bytes, arch.register_file.inputs_bytes, arch.register_file.psums_bytes)
        origins = place(tuple(sides), (arch.pe_array.axes[0].size, arch.pe_array.axes[1].size))
        part = Partition(FusionKind.SPATIAL, tuple(Share(s, o, full) for s, o in zip(sides, origins, strict=True)))
        assert check_partition(arch, tuple(net.layers), part) is None
        # MACs over compute cycles x PEs is the utilisation the explanation quotes
        assert r["pe_utilisation"] == r["macs"] / (r["compute_cycles"] * r["pes"]) <= 1
    assert groups["hwff3"]["pes"] == 32 * 32 and groups["hwff4"]["pes"] == 48 * 32
    assert groups["hwff4"]["energy_uJ"] == groups["hwff3"]["energy_uJ"]  # the partition changes compute only
    assert groups["hwff4"]["cycles"] < groups["hwff3"]["cycles"]
    lat = next(c for c in res.comparisons if c.key == "fig18_19.vgg16.latency_reduction_hw4_pct")
    assert lat.ours == 100 * (1 - groups["hwff4"]["cycles"] / groups["hwff3"]["cycles"])
    assert "1,536 PEs against HW3's 1,024" in lat.explanation and "falls by 33 %" in lat.explanation
    assert f"{groups['hwff3']['pe_utilisation']:.0%} of the PEs on hwff3" in lat.explanation
    # Figs. 16-17: HW6 differs from HW5 only in the MAC price (Table 4: 1.83 vs 1.79 pJ) and the RF size
    hw5, hw6 = groups["hwff5"], groups["hwff6"]
    assert hw6["cycles"] == hw5["cycles"] and hw6["energy_uJ"] - hw5["energy_uJ"] == pytest.approx(
        hw5["mac_energy_uJ"] * (1.83 / 1.79 - 1), rel=1e-9)
    e56 = next(c for c in res.comparisons if c.key == "fig16_17.vgg16.energy_hw6_over_hw5")
    assert f"{100 * (1 + hw5['mac_energy_uJ'] / hw5['energy_uJ'] * (1.83 / 1.79 - 1)):.1f} %" in e56.explanation
    assert f"{e56.ours:.1f}" in e56.explanation  # the MAC price alone is the whole difference
    assert set(res.figures) == {"fig17_vgg16_temporal", "fig19_vgg16_spatial"} and not res.caption_problems()
    assert not res.unexplained()


def test_resnet18_forms_pairs_only_because_of_the_skips() -> None:
    """The summary's reason ResNet-18's sequences are pairs: every block input is read by two layers,
    and a layer never joins a chain whose previous output another layer also reads."""
    from tileplan import api
    from tileplan.experiments.hwff_scaling import _why_short, greedy_groups
    from tileplan.fusion.group import chain_error
    from tileplan.search.objective import Objective

    net = hwff._trim(api.load_network("resnet18"), 5)  # conv1, pool1, res2a_conv1, res2a_conv2, res2a_add
    found = greedy_groups(net, api.load_arch("hwff3"), FusionKind.SPATIAL, 4, Objective.ENERGY)
    assert [(net.layers[s].name, e - s) for s, e, _ in found] == [("conv1", 2), ("res2a_conv1", 2)]
    assert "also read by" in chain_error(list(net.layers[0:3]), net)  # pool1 feeds res2a_conv1 and the add
    assert len(net.consumers("pool1")) == 2 and "pool1" in _why_short(net)
