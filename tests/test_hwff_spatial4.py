"""HW-Flow-Fusion's spatial groups of four layers (§5.3, Figs. 18-19 fuse at most four): the maximal
partitions equal the Pareto front of a brute-force enumeration of every legal partition, and a
four-layer spatial fusion the search returns executes as a fused program whose counted DRAM bytes,
bursts and MACs equal the model, bit-exact, with the group's compute the sum of its layers' compute
on their own sub-arrays."""

from __future__ import annotations

from dataclasses import replace
from itertools import product

import numpy as np
from test_fusion_program import shrink

from tileplan import api
from tileplan.dims import Operand
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.group import FusedGroup
from tileplan.fusion.hwff import search_partitioned
from tileplan.fusion.partition import (
    MAX_SPATIAL,
    FusionKind,
    array_sides,
    check_partition,
    maximal_spatial_partitions,
    place,
    rs_sides_ok,
    share_arch,
)
from tileplan.fusion.verify import verify_fused

CHAIN = ["conv1_1", "conv1_2", "pool1", "conv2_1"]


def _brute_force_front(arch, layers):
    """Every assignment of divisor sub-arrays to the layers that is row-stationary legal and packs
    into the array (``place`` is exact for four rectangles), reduced to its Pareto front."""
    x, y = array_sides(arch)
    sides = [(w, h) for w in range(1, x + 1) if x % w == 0 for h in range(1, y + 1) if y % h == 0]
    legal = []
    for combo in product(sides, repeat=len(layers)):
        if all(rs_sides_ok(arch, layer, s) for layer, s in zip(layers, combo, strict=True)) \
                and place(combo, (x, y)) is not None:
            legal.append(combo)
    pts = np.array(legal).reshape(len(legal), -1)
    front = set()
    for i, p in enumerate(pts):
        ge = np.all(pts >= p, axis=1) & np.any(pts > p, axis=1)
        if not ge.any():
            front.add(legal[i])
    return front


def test_four_layer_maximal_partitions_are_the_brute_force_front() -> None:
    assert MAX_SPATIAL == 4
    hwff1 = api.load_arch("hwff1")
    small = share_arch(hwff1, (8, 4), (hwff1.register_file.weights_bytes, hwff1.register_file.inputs_bytes,
                                       hwff1.register_file.psums_bytes))
    layers = tuple(shrink("vgg16", CHAIN, 16, 8))
    found = maximal_spatial_partitions(small, layers)
    assert {tuple(s.sides for s in p.shares) for p in found} == _brute_force_front(small, layers)
    assert found and all(check_partition(small, layers, p) is None for p in found)


def test_four_layer_spatial_fusion_executes_as_the_model_counts() -> None:
    layers = shrink("vgg16", CHAIN, 16, 8)
    group = FusedGroup(tuple(layers))
    hwff3 = api.load_arch("hwff3")  # 32 x 32 PEs, the paper's spatial scaling config
    # Room for the resident weights and the largest input map: the tiles stay smaller than the maps.
    size = sum(x.elements(Operand.WEIGHT) for x in layers) + max(x.elements(Operand.INPUT) for x in layers)
    arch = replace(hwff3, memories=tuple(replace(m, size_bytes=size) for m in hwff3.memories))
    result = search_partitioned(group, arch, "latency", FusionKind.SPATIAL)
    assert result is not None and len(result.partition["shares"]) == 4
    m = result.mapping
    assert m.overlap.value == "reuse" and all(m.resident)
    assert (m.tile_p, m.tile_q) != (group.last.p, group.last.q)  # really tiled
    v = verify_fused(group, arch, m, seed=5)
    assert v.ok, v
    assert v.counted_read_bytes == v.predicted_read_bytes and v.counted_write_bytes == v.predicted_write_bytes
    assert v.counted_bursts == v.predicted_bursts and v.counted_macs == sum(x.macs for x in layers)
    # The partition changes compute only: the DRAM bytes are the whole-array model's.
    assert float(evaluate_fused(group, arch, m).cost.dram_bytes[0]) == float(result.cost.dram_bytes[0])
    # Each layer computes on its own sub-array only: the group's compute is at least the sum of every
    # layer's MACs over its sub-array's PEs (and so above the whole array's MACs / PEs).
    shares = result.partition["shares"]
    floor = sum(x.macs / (s["sides"][0] * s["sides"][1]) for x, s in zip(layers, shares, strict=True))
    assert float(result.cost.compute_cycles[0]) >= floor > sum(x.macs for x in layers) / (32 * 32)
