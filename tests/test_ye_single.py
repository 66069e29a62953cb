"""Ye et al. §2.2: the ye-<KB> preset family, the single-layer reuse strategies ir / wr / pr as loop
orders of the one model (their DRAM counts equal the paper's closed forms) and the brute-force
``smartshuttle`` baseline."""

from __future__ import annotations

from math import ceil

import pytest

from tileplan import api
from tileplan.arch.load import load
from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.errors import ConfigError
from tileplan.mapping import Mapping
from tileplan.search import run
from tileplan.search.objective import Objective
from tileplan.search.ye import ORDERS, dataflow_of
from tileplan.workload.layer import Layer, Precision

B2 = Precision.uniform(2)


def test_family_presets() -> None:
    for kb in (32, 64, 128, 1024):
        arch = load(f"ye-{kb}")
        assert arch.name == f"ye-{kb}"
        assert len(arch.memories) == 1 and arch.memories[0].size_bytes == kb * 1024
        assert set(arch.memories[0].operands) == {"input", "weight", "output"}
        assert arch.precision_bytes == 2
    assert load("ye").memories[0].size_bytes == 128 * 1024
    with pytest.raises(ConfigError, match="ye-<KB>"):
        load("ye-big")
    with pytest.raises(ConfigError, match="1 to 1048576 KiB"):
        load("ye-0")
    # --set overrides the family member's buffer like any preset's.
    assert api.load_arch("ye-64", ["memories.0.size_bytes=96KiB"]).memories[0].size_bytes == 96 * 1024


def _ye_closed_form(layer: Layer, strategy: str, a: int, b: int, g: int, h: int, d: int) -> dict[str, int]:
    """Ye et al. §2.2 in elements for a 'valid' layer tiled evenly: an ifmap tile is
    ((a-1)P + S) x ((b-1)P + S) x g x h, read once (ir) or ceil(D/d) times; a weight tile is read once
    (wr) or ceil(W1 W2 B / abh) times; an ofmap costs 2 (ceil(C1/g) - 1) psum transfers (psums leave
    the chip unless pr) and its final write."""
    gr, cg, kg = layer.groups, layer.dims[Dim.C], layer.dims[Dim.K]
    w1, w2, bb, s, st = layer.q, layer.p, layer.n, layer.r, layer.stride[0]
    tiles_out = ceil(w1 / a) * ceil(w2 / b) * ceil(bb / h)
    ifmap_once = gr * ceil(cg / g) * tiles_out * ((a - 1) * st + s) * ((b - 1) * st + s) * g * h
    weights = gr * kg * cg * s * s
    ofmap = bb * gr * kg * w1 * w2
    c_trips = ceil(cg / g)
    return {
        "input": ifmap_once * (1 if strategy == "ir" else ceil(kg / d)),
        "weight": weights * (1 if strategy == "wr" else tiles_out),
        "output_write": ofmap * (1 if strategy == "pr" else c_trips),
        "output_read": 0 if strategy == "pr" else ofmap * (c_trips - 1),
    }


LAYERS = [
    # DenseNet-121 block 2 layer 8's 1x1 (Fig. 6a, 'valid'), AlexNet conv2 with its padding in DRAM,
    # a ResNeXt-50 grouped 3x3 (C = 32 sublayers of 4 channels), a strided 3x3.
    (Layer.conv("dense_b2l8_1x1", n=3, c_in=336, h=28, w=28, k_out=128, r=1, pad=0, precision=B2),
     (7, 14, 48, 3, 32)),
    (Layer.conv("alexnet_conv2", c_in=48, h=31, w=31, k_out=128, r=5, pad=0, precision=B2), (9, 3, 16, 1, 64)),
    (Layer.conv("resnext_3x3", c_in=128, h=16, w=16, k_out=128, r=3, pad=0, groups=32, precision=B2),
     (7, 2, 2, 1, 2)),
    (Layer.conv("strided", n=2, c_in=24, h=17, w=17, k_out=40, r=3, stride=2, pad=0, precision=B2), (4, 8, 8, 2, 10)),
]


@pytest.mark.parametrize("strategy", list(ORDERS))
@pytest.mark.parametrize(("layer", "tiling"), LAYERS, ids=[x[0].name for x in LAYERS])
def test_single_layer_closed_forms(layer: Layer, tiling: tuple[int, int, int, int, int], strategy: str) -> None:
    a, b, g, h, d = tiling
    tiles = {Dim.N: h, Dim.G: 1, Dim.K: d, Dim.C: g, Dim.P: b, Dim.Q: a, Dim.R: layer.r, Dim.S: layer.s}
    mapping = Mapping(tiles=tuple(tiles[x] for x in Dim), order=ORDERS[strategy])
    cost = api.evaluate(layer, "ye-1024", mapping)
    want = _ye_closed_form(layer, strategy, a, b, g, h, d)
    assert cost.dram_input_bytes == 2 * want["input"]
    assert cost.dram_weight_bytes == 2 * want["weight"]
    assert cost.dram_psum_read_bytes == 2 * want["output_read"]
    assert cost.dram_output_bytes == 2 * (want["output_write"] + want["output_read"])
    assert dataflow_of(mapping) == strategy


def test_smartshuttle_is_the_best_of_ir_wr_pr() -> None:
    layer = Layer.conv("b2l8_3x3", n=3, c_in=128, h=28, w=28, k_out=32, r=3, precision=B2)
    problem = Problem(layer, load("ye-64"))
    each = {s: run(s, problem, Objective.DRAM) for s in ORDERS}
    brute = run("smartshuttle", problem, Objective.DRAM)
    best = min(float(r.cost.dram_bytes[0]) for r in each.values())
    assert float(brute.cost.dram_bytes[0]) == best
    assert dataflow_of(brute.mapping) in ORDERS
    assert brute.strategy == "smartshuttle"
    for name, res in each.items():
        assert dataflow_of(res.mapping) == name
    # The general exhaustive search is never worse than the restricted one.
    assert float(run("exhaustive", problem, Objective.DRAM).cost.dram_bytes[0]) <= best
    # Here the 3x3 layer's weights (73.7 KB) do not fit next to any tile in 64 KB, so wr cannot win.
    assert float(each["wr"].cost.dram_bytes[0]) > best
