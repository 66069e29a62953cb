"""HW-Flow-Fusion's closed forms (Eq. 1-6, 8, 9) against the general fused model on real layer pairs
and triples of VGG16, ResNet-18 and ResNet-50 (16-bit, as the paper's Sec. 5.1 uses them).

The printed forms assume every tile step reads a whole window (Eq. 4: ``T_i = (T_o - 1) S + N_k``):

* buffers (Eq. 1 per layer, summed by Eq. 5) and reuse buffers (Eq. 8, Alwani's Eq. 9) size the
  largest window, so they hold exactly on the real, zero-padded layers;
* volumes (Eq. 2-3 for one layer with T_if = N_if, T_of = N_of; Eq. 6 for a group) count whole
  windows at every step, so they hold exactly on the same layers made 'valid' (padding stored in
  DRAM for the first layer, none inside the group: the maps shrink by N_k - 1 per layer); on the real
  layers the model fetches exactly Eq. 6's volume minus the padding it never fetches, which a plain
  walk over the tile steps below counts independently.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

import numpy as np
import pytest

from tileplan import api
from tileplan.dims import Operand
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.workload.layer import Layer, Precision

B = 2  # bytes per value (16-bit)
ONES = (1,) * 8

#: (network, layers, bottom tiles (T_oy, T_ox)) -- every tile leaves an interior step at every layer.
REAL = [
    ("vgg16", ["conv1_1", "conv1_2"], [(7, 8), (14, 4)]),
    ("vgg16", ["conv1_1", "conv1_2", "pool1"], [(4, 7), (8, 2)]),
    ("vgg16", ["conv2_1", "conv2_2", "pool2"], [(7, 7), (4, 14)]),
    ("resnet18", ["conv1", "pool1"], [(7, 8), (4, 4)]),
    ("resnet18", ["res2a_conv1", "res2a_conv2"], [(8, 7), (14, 14)]),
    ("resnet50", ["res2a_conv1", "res2a_conv2", "res2a_conv3"], [(7, 7), (4, 8)]),
    ("resnet50", ["res3a_conv1", "res3a_conv2", "res3a_conv3"], [(7, 4), (14, 7)]),
]
IDS = ["+".join(names) + f"@{net}" for net, names, _ in REAL]


def real_layers(network: str, names: list[str]) -> list[Layer]:
    net = api.load_network(network).with_precision(Precision.uniform(B))
    return [net[n] for n in names]


def valid_layers(layers: list[Layer]) -> list[Layer]:
    """The same chain with its padding stored in DRAM (first layer) or dropped (inside the group)."""
    first = layers[0]
    out = [replace(first, h=first.h + first.pad[0] + first.pad[1], w=first.w + first.pad[2] + first.pad[3],
                   pad=(0, 0, 0, 0), inputs=())]
    for x in layers[1:]:
        prev = out[-1]
        out.append(replace(x, h=prev.p, w=prev.q, pad=(0, 0, 0, 0), inputs=()))
    return out


def mapping(layers: list[Layer], toy: int, tox: int, *, overlap: Overlap = Overlap.RECOMPUTE,
            resident: bool = True) -> FusedMapping:
    n = len(layers)
    return FusedMapping(1, toy, tox, layers[-1].k_out, overlap, Direction.ROWS, (resident,) * n,
                        tuple(x.k_out for x in layers[:-1]), (ONES,) * n)


def eq4_tiles(layers: list[Layer], toy: int, tox: int) -> list[tuple[int, int]]:
    """(T_iy, T_ix) of every layer, top first: Eq. 4 from the bottom tile up."""
    out = []
    for x in reversed(layers):
        toy, tox = (toy - 1) * x.stride[0] + x.r, (tox - 1) * x.stride[1] + x.s
        out.append((toy, tox))
    return out[::-1]


def eq1(x: Layer, tiy: int, tix: int) -> tuple[int, int]:
    """Input and weight buffers of Eq. 1 with T_if = N_if, T_of = N_of, T_b = 1 (weights: zero for pools)."""
    weights = x.r * x.s * (x.c_in // x.groups) * x.k_out * B if x.has_weights else 0
    return tix * tiy * x.c_in * B, weights


def eq5(layers: list[Layer], toy: int, tox: int) -> int:
    """Fusion buffer, Eq. 5: every layer's input and weight buffers and the bottom output buffer."""
    total = sum(sum(eq1(x, *t)) for x, t in zip(layers, eq4_tiles(layers, toy, tox), strict=True))
    return total + tox * toy * layers[-1].k_out * B


def eq6(layers: list[Layer], toy: int, tox: int) -> int:
    """Total volume, Eq. 6: top input buffer x fetches, every weight once, bottom output buffer x writes."""
    last = layers[-1]
    fetches = ceil(last.p / toy) * ceil(last.q / tox)  # Eq. 2, Input_fetch with T_if = N_if, T_of = N_of, B = 1
    writes = last.p / toy * last.q / tox  # Eq. 2, Output_write
    tiy, tix = eq4_tiles(layers, toy, tox)[0]
    weights = sum(eq1(x, 1, 1)[1] for x in layers)
    return int(eq1(layers[0], tiy, tix)[0] * fetches + weights + tox * toy * last.k_out * B * writes)


def walked_top_input(layers: list[Layer], toy: int, tox: int) -> int:
    """Input values the top layer reads over all tile steps, windows clipped at the map borders (the
    padding is never fetched): a plain walk, tile by tile, with no reuse between steps."""
    last = layers[-1]
    total = 0
    for p0 in range(0, last.p, toy):
        for q0 in range(0, last.q, tox):
            rows, cols = (p0, min(p0 + toy, last.p)), (q0, min(q0 + tox, last.q))
            for x in reversed(layers):
                rows = (max(rows[0] * x.stride[0] - x.pad[0], 0),
                        min((rows[1] - 1) * x.stride[0] - x.pad[0] + x.r, x.h))
                cols = (max(cols[0] * x.stride[1] - x.pad[2], 0),
                        min((cols[1] - 1) * x.stride[1] - x.pad[2] + x.s, x.w))
            total += (rows[1] - rows[0]) * (cols[1] - cols[0])
    return total * layers[0].c_in * B


@pytest.mark.parametrize(("network", "names", "tiles"), REAL, ids=IDS)
def test_eq1_4_5_fusion_buffer_on_real_layers(network, names, tiles):
    """The fused footprint (one buffer on HW config 1, no double buffering) is Eq. 5 of Eq. 1's buffers
    with Eq. 4's tiles, on the real zero-padded layers."""
    layers = real_layers(network, names)
    group, arch = FusedGroup(tuple(layers)), api.load_arch("hwff1")
    for toy, tox in tiles:
        got = evaluate_fused(group, arch, mapping(layers, toy, tox))
        assert int(got.cost.footprint_bytes[0, 0]) == eq5(layers, toy, tox), (toy, tox)


@pytest.mark.parametrize(("network", "names", "tiles"), REAL, ids=IDS)
def test_eq6_volume_on_real_layers(network, names, tiles):
    """Eq. 6 exactly on the valid chain (tiles dividing its bottom map); on the real chain, Eq. 6 minus
    the padding the model never fetches (a plain walk) -- the weights once and the output once."""
    arch = api.load_arch("hwff1")
    layers = real_layers(network, names)
    valid = valid_layers(layers)
    for toy, tox in tiles:
        last = valid[-1]
        vt = (max(t for t in range(1, toy + 1) if last.p % t == 0),
              max(t for t in range(1, tox + 1) if last.q % t == 0))
        got = evaluate_fused(FusedGroup(tuple(valid)), arch, mapping(valid, *vt))
        assert float(got.cost.dram_bytes[0]) == eq6(valid, *vt), vt
        real = evaluate_fused(FusedGroup(tuple(layers)), arch, mapping(layers, toy, tox)).cost
        weights = sum(eq1(x, 1, 1)[1] for x in layers)
        assert float(real.dram_read_bytes[0, Operand.INPUT]) == walked_top_input(layers, toy, tox)
        assert float(real.dram_read_bytes[0, Operand.WEIGHT]) == weights
        assert float(real.dram_write_bytes[0]) == layers[-1].tensor_bytes(Operand.OUTPUT)
        tiy, tix = eq4_tiles(layers, toy, tox)[0]
        whole_windows = tiy * tix * layers[0].c_in * B * ceil(layers[-1].p / toy) * ceil(layers[-1].q / tox)
        assert walked_top_input(layers, toy, tox) < whole_windows  # Eq. 6's input term counts the padding


@pytest.mark.parametrize(("network", "names", "tiles"), REAL, ids=IDS)
def test_eq2_3_single_layer_with_whole_channels(network, names, tiles):
    """Eq. 1-3 for each layer alone with T_if = N_if and T_of = N_of (the fused schedule's per-layer
    constraint): weights streamed every tile step (Weight_fetch = ceil(N_oy/T_oy) ceil(N_ox/T_ox)),
    the input window every step, the output once -- on the valid layers, tiles dividing the map."""
    arch = api.load_arch("hwff1")
    for x in valid_layers(real_layers(network, names)):
        for toy, tox in tiles:
            toy = max(t for t in range(1, toy + 1) if x.p % t == 0)
            tox = max(t for t in range(1, tox + 1) if x.q % t == 0)
            (tiy, tix), = eq4_tiles([x], toy, tox)
            in_buf, w_buf = eq1(x, tiy, tix)
            out_buf = tox * toy * x.k_out * B
            fetches = ceil(x.p / toy) * ceil(x.q / tox)
            total = in_buf * fetches + w_buf * fetches + out_buf * (x.p / toy) * (x.q / tox)  # Eq. 3
            got = evaluate_fused(FusedGroup((x,)), arch, mapping([x], toy, tox, resident=False)).cost
            assert float(got.dram_bytes[0]) == total, (x.name, toy, tox)
            resident = evaluate_fused(FusedGroup((x,)), arch, mapping([x], toy, tox)).cost
            assert int(resident.footprint_bytes[0, 0]) == in_buf + w_buf + out_buf  # Eq. 1


@pytest.mark.parametrize(("network", "names", "tiles"), REAL, ids=IDS)
def test_eq8_9_reuse_buffers_on_real_layers(network, names, tiles):
    """Reuse buffers, horizontal processing: Eq. 8's ``(N_ix - T_ix)(N_ky - S_y) N_if`` per layer, and
    Alwani et al.'s Eq. 9 overhead ``(T_iy - (N_ky - S_y))(N_kx - S_x) N_if`` on top; the same DRAM
    volume either way; with reuse every top input value is fetched once."""
    layers = real_layers(network, names)
    group, arch = FusedGroup(tuple(layers)), api.load_arch("hwff1")
    for toy, tox in tiles:
        ours = evaluate_fused(group, arch, mapping(layers, toy, tox, overlap=Overlap.REUSE))
        alwani = evaluate_fused(group, arch, mapping(layers, toy, tox, overlap=Overlap.ALWANI))
        eq8 = eq9 = 0
        for x, (tiy, tix) in zip(layers, eq4_tiles(layers, toy, tox), strict=True):
            oy, ox = max(x.r - x.stride[0], 0), max(x.s - x.stride[1], 0)
            eq8 += (x.w - tix) * oy * x.c_in * B
            eq9 += (tiy - oy) * ox * x.c_in * B
        assert int(ours.reuse_bytes[0]) == eq8
        assert int(alwani.reuse_bytes[0]) == eq8 + eq9
        assert int(alwani.cost.footprint_bytes[0, 0]) - int(ours.cost.footprint_bytes[0, 0]) == eq9
        assert int(ours.cost.footprint_bytes[0, 0]) == eq5(layers, toy, tox) + eq8
        np.testing.assert_array_equal(ours.cost.dram_bytes, alwani.cost.dram_bytes)
        assert float(ours.cost.dram_read_bytes[0, Operand.INPUT]) == layers[0].tensor_bytes(Operand.INPUT)
