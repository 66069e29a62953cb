"""The general model equals each paper's closed-form traffic for the dataflow it describes.

Closed forms count whole tiles, so the layers here are tiled evenly and the convolutions are 'valid'
(padding already materialised in DRAM, as the papers' formulas assume).
"""

from __future__ import annotations

from math import ceil

import pytest
from helpers import toy_arch

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import Dim, Operand
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer, Precision

D = Dim
B2 = Precision.uniform(2)


def cost(layer: Layer, mapping: Mapping):
    return evaluate(Problem(layer, toy_arch(burst=128, precision=2)), MappingBatch.from_mappings([mapping]))


def padded(name: str, c_in: int, hw: int, k_out: int, r: int, pad: int, stride: int = 1) -> Layer:
    """A layer whose zero padding is stored in DRAM (what the closed forms assume)."""
    return Layer.conv(name, c_in=c_in, h=hw + 2 * pad, w=hw + 2 * pad, k_out=k_out, r=r, pad=0, stride=stride,
                      precision=B2)


# Real layers: InceptionV3's 5th conv (TSO Sec. VI), a ResNet-50 bottleneck 1x1, VGG16 conv3_1, AlexNet conv2.
LAYERS = [
    Layer.conv("inception_conv4", c_in=80, h=73, w=73, k_out=192, r=3, pad=0, precision=B2),
    Layer.conv("resnet_res3a_conv3", c_in=128, h=28, w=28, k_out=512, r=1, pad=0, precision=B2),
    padded("vgg16_conv3_1", 128, 56, 256, 3, 1),
    padded("alexnet_conv2", 64, 27, 192, 5, 2),
]


def tso_tiles(layer: Layer) -> tuple[int, int, int, int]:
    """(T_M filters, T_N channels, T_R rows, T_C cols) that divide the layer evenly."""
    m, n, r, c = layer.dims[D.K], layer.dims[D.C], layer.dims[D.P], layer.dims[D.Q]
    t_m = next(t for t in (32, 24, 16, 8, 4, 2, 1) if m % t == 0)
    t_n = next(t for t in (16, 8, 5, 4, 2, 1) if n % t == 0)
    t_r = next(t for t in (8, 7, 4, 3, 2, 1) if r % t == 0)
    t_c = c
    return t_m, t_n, t_r, t_c


def tso_volumes(layer: Layer, t_m: int, t_n: int, t_r: int, t_c: int, all_filters: bool, all_channels: bool):
    k = layer.r
    t_h = (t_r - 1) * layer.stride[0] + k  # TSO Eq. 1
    t_l = (t_c - 1) * layer.stride[1] + k
    w_m = layer.dims[D.K] if all_filters else t_m
    w_n = layer.dims[D.C] if all_channels else t_n
    return t_n * t_h * t_l * 2, w_m * w_n * k * k * 2, (w_m if all_filters else t_m) * t_r * t_c * 2  # Eq. 2


@pytest.mark.parametrize("layer", LAYERS, ids=lambda lay: lay.name)
def test_tso_eq3_input_stationary(layer: Layer) -> None:
    t_m, t_n, t_r, t_c = tso_tiles(layer)
    M, N, R, C = layer.dims[D.K], layer.dims[D.C], layer.dims[D.P], layer.dims[D.Q]
    IN, W, OUT = tso_volumes(layer, t_m, t_n, t_r, t_c, all_filters=True, all_channels=False)
    a_in = ceil(R / t_r) * ceil(C / t_c) * ceil(N / t_n)  # Eq. 3, one core
    a_w = a_in
    a_out = ceil(R / t_r) * ceil(C / t_c)
    m = Mapping(tiles=(1, 1, M, t_n, t_r, t_c, layer.r, layer.s),
                order=(D.N, D.G, D.K, D.P, D.Q, D.C, D.R, D.S))
    c = cost(layer, m)
    assert c.dram_read_bytes[0, Operand.INPUT] == a_in * IN
    assert c.dram_read_bytes[0, Operand.WEIGHT] == a_w * W
    assert c.dram_write_bytes[0] == a_out * OUT and c.dram_read_bytes[0, Operand.OUTPUT] == 0


@pytest.mark.parametrize("layer", LAYERS, ids=lambda lay: lay.name)
def test_tso_eq4_output_stationary(layer: Layer) -> None:
    t_m, t_n, t_r, t_c = tso_tiles(layer)
    M, N, R, C = layer.dims[D.K], layer.dims[D.C], layer.dims[D.P], layer.dims[D.Q]
    IN, W, OUT = tso_volumes(layer, t_m, t_n, t_r, t_c, all_filters=False, all_channels=False)
    a_in = ceil(R / t_r) * ceil(C / t_c) * ceil(N / t_n) * ceil(M / t_m)  # Eq. 4
    a_out = ceil(R / t_r) * ceil(C / t_c) * ceil(M / t_m)
    m = Mapping(tiles=(1, 1, t_m, t_n, t_r, t_c, layer.r, layer.s),
                order=(D.N, D.G, D.P, D.Q, D.K, D.C, D.R, D.S))
    c = cost(layer, m)
    assert c.dram_read_bytes[0, Operand.INPUT] == a_in * IN
    assert c.dram_read_bytes[0, Operand.WEIGHT] == a_in * W
    assert c.dram_write_bytes[0] == a_out * OUT


@pytest.mark.parametrize("layer", LAYERS, ids=lambda lay: lay.name)
def test_tso_eq5_weight_stationary(layer: Layer) -> None:
    t_m, t_n, t_r, t_c = tso_tiles(layer)
    M, N, R, C = layer.dims[D.K], layer.dims[D.C], layer.dims[D.P], layer.dims[D.Q]
    IN, W, OUT = tso_volumes(layer, t_m, t_n, t_r, t_c, all_filters=False, all_channels=True)
    a_in = ceil(R / t_r) * ceil(C / t_c) * ceil(N / t_n) * ceil(M / t_m)  # Eq. 5
    a_w = ceil(M / t_m)
    a_out = ceil(R / t_r) * ceil(C / t_c) * ceil(M / t_m)
    # The W tile holds every channel of its T_M filters: the weights are hoisted over the C loop.
    m = Mapping(tiles=(1, 1, t_m, t_n, t_r, t_c, layer.r, layer.s),
                order=(D.N, D.G, D.K, D.P, D.Q, D.C, D.R, D.S),
                hoist=(frozenset(), frozenset({D.C}), frozenset()))
    c = cost(layer, m)
    assert c.dram_read_bytes[0, Operand.INPUT] == a_in * IN
    assert c.dram_read_bytes[0, Operand.WEIGHT] == a_w * W
    assert c.dram_write_bytes[0] == a_out * OUT
    assert c.footprint_bytes[0, Operand.WEIGHT] == W


@pytest.mark.parametrize("layer", LAYERS, ids=lambda lay: lay.name)
@pytest.mark.parametrize("tb", [1, 2])
def test_hwflowfusion_eq2_eq3_output_reuse(layer: Layer, tb: int) -> None:
    """HW-Flow-Fusion Eq. 1-3: loop order Nox, Noy, Nof, B, Nif (outermost first)."""
    layer = Layer.conv(layer.name, n=2, c_in=layer.c_in, h=layer.h, w=layer.w, k_out=layer.k_out, r=layer.r,
                       pad=0, stride=layer.stride, precision=B2)
    tof, tif, toy, tox = tso_tiles(layer)
    nof, nif, noy, nox, b = layer.dims[D.K], layer.dims[D.C], layer.dims[D.P], layer.dims[D.Q], layer.dims[D.N]
    tix, tiy = (tox - 1) * layer.stride[1] + layer.s, (toy - 1) * layer.stride[0] + layer.r
    in_buf = tix * tiy * tif * tb * 2  # Eq. 1
    out_buf = tox * toy * tof * tb * 2
    w_buf = layer.r * layer.s * tif * tof * 2
    in_fetch = nif / tif * ceil(nof / tof) * ceil(noy / toy) * ceil(nox / tox) * b / tb  # Eq. 2
    w_fetch = nof / tof * nif / tif * ceil(noy / toy) * ceil(nox / tox) * b / tb
    out_write = nof / tof * noy / toy * nox / tox * b / tb
    total = in_buf * in_fetch + w_buf * w_fetch + out_buf * out_write  # Eq. 3
    m = Mapping(tiles=(tb, 1, tof, tif, toy, tox, layer.r, layer.s),
                order=(D.Q, D.P, D.K, D.N, D.C, D.G, D.R, D.S))
    c = cost(layer, m)
    assert c.dram_bytes[0] == total
    assert c.dram_read_bytes[0, Operand.OUTPUT] == 0


EPLANNER_LAYERS = [
    Layer.conv("vgg16_conv4_2_1x1", c_in=512, h=28, w=28, k_out=512, r=1, pad=0, precision=B2),
    Layer.conv("resnet_res4a_conv1", c_in=512, h=14, w=14, k_out=256, r=1, pad=0, precision=B2),
    padded("vgg16_conv5_1", 512, 14, 512, 3, 1),
]


@pytest.mark.parametrize("layer", EPLANNER_LAYERS, ids=lambda lay: lay.name)
@pytest.mark.parametrize("oct_, ict, kht", [(64, 128, None), (128, 64, None), (256, 256, 1)])
def test_eplanner_reload_factors(layer: Layer, oct_: int, ict: int, kht: int | None) -> None:
    """e-PlaNNer Eq. 6.1-6.5. Each reload factor describes one operand that is not stationary, i.e.
    every loop that does not index it sits outside it: input reloaded OC/OCt (x KH/KHt x KW/KWt),
    weights OH/OHt x OW/OWt, partial sums 2 (IC/ICt x KH/KHt x KW/KWt - 1), outputs that plus one."""
    OC, IC, OH, OW, KH, KW = (layer.dims[d] for d in (D.K, D.C, D.P, D.Q, D.R, D.S))
    kht = kht or KH
    oht, owt = (OH // 2, OW // 2) if OH % 2 == 0 else (OH, OW)
    tiles = (1, 1, oct_, ict, oht, owt, kht, KW)
    vol = {op: layer.tensor_bytes(op) for op in Operand}
    # Eq. 6.2: OC (and KH, which the thesis treats as not indexing the input) outside the input loops.
    if kht == KH:  # with KH tiled, input tiles of neighbouring kernel rows overlap (the thesis ignores it)
        c = cost(layer, Mapping(tiles=(1, 1, oct_, ict, OH, OW, kht, KW),
                                order=(D.K, D.N, D.G, D.C, D.P, D.Q, D.R, D.S)))
        assert c.dram_read_bytes[0, Operand.INPUT] == ceil(KW / KW) * ceil(KH / kht) * ceil(OC / oct_) * vol[0]
    # Eq. 6.3: OH and OW loops outside the weight loops.
    c = cost(layer, Mapping(tiles=tiles, order=(D.P, D.Q, D.N, D.G, D.K, D.C, D.R, D.S)))
    assert c.dram_read_bytes[0, Operand.WEIGHT] == ceil(OW / owt) * ceil(OH / oht) * vol[Operand.WEIGHT]
    # Eq. 6.4/6.5: IC, KH, KW loops outside the output loops.
    c = cost(layer, Mapping(tiles=tiles, order=(D.C, D.R, D.S, D.N, D.G, D.K, D.P, D.Q)))
    reload_psum = 2 * (ceil(KW / KW) * ceil(KH / kht) * ceil(IC / ict) - 1)
    assert c.dram_read_bytes[0, Operand.OUTPUT] + c.dram_write_bytes[0] == (reload_psum + 1) * vol[Operand.OUTPUT]
    # Output stationary ((KW = KWt) and (KH = KHt) and (IC = ICt)): output reload 1.
    c = cost(layer, Mapping(tiles=(1, 1, oct_, IC, oht, owt, KH, KW), order=tuple(D)))
    assert c.dram_write_bytes[0] == vol[Operand.OUTPUT] and c.dram_read_bytes[0, Operand.OUTPUT] == 0
