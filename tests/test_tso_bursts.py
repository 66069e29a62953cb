"""TSO's burst model (Alg. 4): Fig. 1 and the InceptionV3 worked example of Sec. VI."""

from __future__ import annotations

from math import ceil

from tileplan import arch as arch_mod
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, Dim, Operand
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer, Precision

NMP = arch_mod.load("nmp")
B2 = Precision.uniform(2)


def input_bursts(layer: Layer, tiles: dict[Dim, int]) -> tuple[float, int]:
    full = {d: layer.dims[d] for d in DIMS}
    full.update(tiles)
    m = Mapping(tiles=tuple(full[d] for d in DIMS), order=tuple(DIMS))
    c = evaluate(Problem(layer, NMP), MappingBatch.from_mappings([m]))
    return float(c.dram_bursts[0, Operand.INPUT]), int(c.footprint_bytes[0, Operand.INPUT])


def test_fig1_slice_shapes() -> None:
    """A 128x128 16-bit channel (row-major) read with a 1x1 kernel in slices of 128 rows x 32 B,
    128 x 64 B and 64 x 128 B costs 1024, 512 and 256 bursts of 128 B."""
    layer = Layer.conv("fig1", c_in=1, h=128, w=128, k_out=1, r=1, pad=0, precision=B2)
    assert input_bursts(layer, {Dim.P: 128, Dim.Q: 16})[0] == 1024
    assert input_bursts(layer, {Dim.P: 128, Dim.Q: 32})[0] == 512
    assert input_bursts(layer, {Dim.P: 64, Dim.Q: 64})[0] == 256


def test_inceptionv3_conv4_tso_burst_tile() -> None:
    """InceptionV3's 5th conv: 80 x 73 x 73 input, 192 filters 80x3x3, 16-bit. TSO-burst's input tile
    14 x 4 x 73 (channels x rows x whole rows) is 14 runs of 584 B = 5 bursts each: 70 bursts, and
    fits the 8 KB MB0 (Eq. 2: 14*4*73*2 = 8176 B)."""
    layer = Layer.conv("conv4", c_in=80, h=73, w=73, k_out=192, r=3, pad=0, precision=B2)
    sub = Layer.conv("conv4_c14", c_in=14, h=73, w=73, k_out=192, r=3, pad=0, precision=B2)
    bursts, footprint = input_bursts(sub, {Dim.C: 14, Dim.P: 2, Dim.Q: 71})
    # 35 tiles of 2 output rows (4 input rows: 5 bursts per channel) and a last of 1 row (3 rows, 438 B).
    assert bursts == 35 * 70 + 14 * ceil(3 * 73 * 2 / 128)
    assert footprint == 14 * 4 * 73 * 2 <= 8192
    # On the full layer the same tiling fits as well, and the first tile is the 70-burst one.
    _, footprint_full = input_bursts(layer, {Dim.C: 14, Dim.P: 2, Dim.Q: 71})
    assert footprint_full == 8176


def test_inceptionv3_conv4_tso_noburst_tile() -> None:
    """TSO-noburst's tile 16 x 11 x 20: every row segment (40 B) is one burst: 16 * 11 = 176 bursts
    for a full tile, more than double the burst-aware tile's 70; it fits MB0 too (7040 B)."""
    layer = Layer.conv("conv4_c16", c_in=16, h=73, w=73, k_out=192, r=3, pad=0, precision=B2)
    bursts, footprint = input_bursts(layer, {Dim.C: 16, Dim.P: 9, Dim.Q: 18})
    # P: 7 tiles of 9 output rows (11 input rows) + 1 of 8 (10 rows); Q: 3 tiles of 18 (20 cols) + 1 of 17.
    rows = 7 * 11 + 10
    assert bursts == 16 * rows * 4
    assert footprint == 16 * 11 * 20 * 2 == 7040
    full_tile = 16 * 11 * ceil(20 * 2 / 128)
    assert full_tile == 176 and full_tile > 2 * 70


def test_burst_latency_enters_dram_time() -> None:
    """DRAM cycles = bytes / (17 GB/s at 1 GHz) + bursts x 14 ns (Alg. 4, TSO-burst)."""
    layer = Layer.conv("fig1", c_in=1, h=128, w=128, k_out=1, r=1, pad=0, precision=B2)
    m = Mapping(tiles=(1, 1, 1, 1, 64, 64, 1, 1), order=tuple(DIMS))
    c = evaluate(Problem(layer, NMP), MappingBatch.from_mappings([m]))
    expected = float(c.dram_bytes[0]) / 17.0 + float(c.bursts[0]) * 14.0
    assert abs(float(c.dram_cycles[0]) - expected) < 1e-6
