"""HW-Flow-Fusion resource partitions: every enumerated partition is legal (independent check),
row-stationary pruning, Table 6's partitions are enumerated, the register-file split, and the
partitioned fusion search (spatial never faster than temporal, DRAM traffic partition-independent)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from tileplan import api
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.group import FusedGroup
from tileplan.fusion.hwff import search_hwff, search_partitioned
from tileplan.fusion.partition import (
    FusionKind,
    check_partition,
    maximal_spatial_partitions,
    place,
    rf_split,
    spatial_partitions,
    temporal_partition,
)
from tileplan.workload.layer import Precision

B1 = Precision.uniform(1)
VGG = api.load_network("vgg16").with_precision(B1)
RESNET = api.load_network("resnet18").with_precision(B1)

# Table 6 (spatial PE array [PEx, PEy] per layer of each fused pair, HW config 1), our layer names.
TABLE6_VGG = [(("conv1_1", "conv1_2"), ((8, 8), (8, 8))), (("pool1", "conv2_1"), ((32, 8), (32, 8))),
              (("conv2_2", "pool2"), ((32, 8), (32, 8))), (("conv3_1", "conv3_2"), ((32, 8), (32, 8))),
              (("pool3", "conv4_1"), ((16, 8), (32, 8))), (("pool4", "conv5_1"), ((16, 16), (16, 16)))]
TABLE6_RESNET = [(("conv1", "pool1"), ((16, 16), (16, 16))), (("res3a_conv1", "res3a_conv2"), ((32, 8), (32, 8)))]


def _layers(net, names):
    return tuple(net[n] for n in names)


@pytest.mark.parametrize("arch_name", ["hwff1", "hwff3", "hwff4"])
def test_every_enumerated_partition_is_legal(arch_name):
    arch = api.load_arch(arch_name)
    for net, names in ((VGG, ("conv1_1", "conv1_2")), (RESNET, ("conv1", "pool1")),
                       (VGG, ("conv2_2", "pool2", "conv3_1"))):
        layers = _layers(net, names)
        found = (spatial_partitions(arch, layers) if len(layers) == 2 and arch_name == "hwff1" else []) + \
            maximal_spatial_partitions(arch, layers) + [temporal_partition(arch, layers)]
        assert len(found) >= 3
        for part in found:
            assert check_partition(arch, layers, part) is None, (part.describe(), check_partition(arch, layers, part))


def test_check_partition_rejects_illegal_ones():
    arch = api.load_arch("hwff1")
    layers = _layers(RESNET, ("conv1", "pool1"))
    good = next(p for p in spatial_partitions(arch, layers) if p.shares[0].sides == (16, 16))
    shares = list(good.shares)
    narrow = type(good)(good.kind, (type(shares[0])((4, 16), (0, 0), shares[0].rf_bytes), shares[1]))
    assert "filter" in check_partition(arch, layers, narrow)  # 7-wide filter on a 4-wide sub-array
    clash = type(good)(good.kind, (shares[0], type(shares[1])(shares[1].sides, (8, 0), shares[1].rf_bytes)))
    assert "overlap" in check_partition(arch, layers, clash)
    odd = type(good)(good.kind, (type(shares[0])((12, 16), (0, 0), shares[0].rf_bytes), shares[1]))
    assert "divide" in check_partition(arch, layers, odd)


def test_row_stationary_pruning_and_counts():
    arch = api.load_arch("hwff1")  # 32 x 16, x unrolls S and C
    conv7 = _layers(RESNET, ("conv1", "pool1"))
    parts = spatial_partitions(arch, conv7)
    assert {p.shares[0].sides[0] for p in parts} == {8, 16, 32}  # ResNet conv1's 7-wide filter rows
    assert {p.shares[1].sides[0] for p in parts} == {4, 8, 16, 32}  # the 3x3 pool
    vgg = _layers(VGG, ("conv1_1", "conv1_2"))
    # x in {4, 8, 16, 32} (>= 3), y in {1, 2, 4, 8, 16}: 400 pairs, 63 with a 32-wide and a 16-high
    # sub-array that neither fit side by side nor stacked.
    assert len(spatial_partitions(arch, vgg)) == 337
    assert sorted(p.describe() for p in maximal_spatial_partitions(arch, vgg)) == [
        "spatial [16, 16] [16, 16]", "spatial [32, 8] [32, 8]"]


def test_place_is_exact_for_small_sets():
    assert place(((16, 16), (16, 16)), (32, 16)) is not None
    assert place(((32, 8), (16, 8), (16, 8)), (32, 16)) is not None
    assert place(((32, 8), (32, 16)), (32, 16)) is None
    assert place(((16, 8), (16, 8), (16, 8), (16, 8)), (32, 16)) is not None
    assert place(((16, 16), (16, 8), (16, 8), (8, 8)), (32, 16)) is None  # area 576 > 512


@pytest.mark.parametrize(("net", "rows"), [(VGG, TABLE6_VGG), (RESNET, TABLE6_RESNET)])
def test_table6_partitions_are_enumerated(net, rows):
    arch = api.load_arch("hwff1")
    for names, sides in rows:
        layers = _layers(net, names)
        enumerated = {tuple(s.sides for s in p.shares) for p in spatial_partitions(arch, layers)}
        assert sides in enumerated, names


def test_register_file_split():
    arch = api.load_arch("hwff1")  # 384 / 24 / 36 B
    part = temporal_partition(arch, _layers(VGG, ("conv1_1", "conv1_2")))
    assert [s.rf_bytes for s in part.shares] == [(192, 12, 18)] * 2
    # Table 6 reports [192, 12, 16]: 36 B of 32-bit partial sums hold 9, 4 each for two layers.
    wide = dataclasses.replace(VGG["conv1_1"], precision=Precision(input=1, weight=1, output=1, psum=4))
    assert rf_split(arch, wide, 2) == (192, 12, 16)
    four = temporal_partition(arch, _layers(VGG, ("conv2_2", "pool2", "conv3_1", "conv3_2")))
    assert four.shares[0].rf_bytes == (96, 6, 9)
    tiny = replace(arch, register_file=replace(arch.register_file, inputs_bytes=4))
    assert temporal_partition(tiny, _layers(VGG, ("conv1_1", "conv1_2"))) is None  # 2 B < a 3-pixel row


def test_partitioned_search_spatial_vs_temporal():
    arch = api.load_arch("hwff1")
    group = FusedGroup.of(VGG, ["pool1", "conv2_1"])
    gm = GroupModel(group, arch)
    temporal = search_partitioned(group, arch, "latency", FusionKind.TEMPORAL, gm=gm)
    spatial = search_partitioned(group, arch, "latency", FusionKind.SPATIAL, gm=gm)
    assert temporal.partition["kind"] == "temporal" and spatial.partition["kind"] == "spatial"
    t, s = float(temporal.cost.latency_cycles[0]), float(spatial.cost.latency_cycles[0])
    assert t == 1_906_688 and s == 3_713_024  # half the PEs per layer: ~2x the compute
    assert float(spatial.cost.dram_bytes[0]) == float(temporal.cost.dram_bytes[0])
    best = search_hwff(group, arch, "latency")
    assert best.partition["kind"] == "temporal" and float(best.cost.latency_cycles[0]) == t
    # Every spatial partition (not only the maximal ones) is at least as slow as the best maximal one.
    every = spatial_partitions(arch, group.layers)
    some = search_partitioned(group, arch, "latency", FusionKind.SPATIAL, partition_list=every[::40], gm=gm)
    assert float(some.cost.latency_cycles[0]) >= s
