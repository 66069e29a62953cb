"""`tileplan experiment hwff`: Figs. 12-13 (least storage to fuse VGG16's first layers, our reuse
buffer against Alwani et al.'s), the reference data, and registration (the whole run is a bench)."""

from __future__ import annotations

from tileplan import experiments
from tileplan.experiments import hwff
from tileplan.experiments.common import ExperimentResult, Reference


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


def test_reference_has_every_number_the_experiment_compares() -> None:
    ref = Reference.load("hwff")
    for net in ("vgg16", "resnet18"):
        for metric in ("energy", "latency", "comm"):
            for ratio in ("temporal_over_single", "spatial_over_single", "spatial_over_temporal"):
                assert f"table5.{net}.{metric}.{ratio}" in ref.values
        for key in ("energy_hw6_over_hw5", "latency_hw6_over_hw5"):
            assert f"fig16_17.{net}.{key}" in ref.values
        assert f"fig18_19.{net}.latency_reduction_hw4_pct" in ref.values
        assert f"table7.{net}.first.temporal" in ref.values
    assert ref.value("table5.vgg16.latency.spatial_over_temporal") == 188
    assert "hwff" in experiments.names()
