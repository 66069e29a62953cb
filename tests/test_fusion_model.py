"""The fused-group model: groups of one equal the single-layer model; propagation, multi-tiling and
recomputation against plainly written loop walks; HW-Flow-Fusion's closed forms on real pairs."""

from __future__ import annotations

from math import ceil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tileplan import api
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.errors import MappingError, WorkloadError
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.propagate import AxisGeom, propagate
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer, Precision

ONES = (1,) * 8
B2 = Precision.uniform(2)


def fused(layers: list[Layer], tp: int, tq: int, *, tn: int = 1, tk: int | None = None,
          overlap: Overlap = Overlap.RECOMPUTE, resident: tuple[bool, ...] | None = None,
          chunk: tuple[int, ...] | None = None, direction: Direction = Direction.ROWS,
          unroll: tuple[tuple[int, ...], ...] | None = None) -> FusedMapping:
    n = len(layers)
    return FusedMapping(tn, tp, tq, tk or layers[-1].k_out, overlap, direction,
                        resident or (True,) * n, chunk or tuple(x.k_out for x in layers[:-1]), unroll or (ONES,) * n)


# ----------------------------------------------------------------- groups of one = single-layer model
D = Dim
SINGLE = [
    ("eyeriss", Layer.conv("c3s2", c_in=16, h=30, w=28, k_out=24, r=3, stride=2, pad=1), (((D.K, 12),), ((D.Q, 14),))),
    ("eyeriss", Layer.conv("dil", c_in=8, h=20, w=20, k_out=16, r=3, dilation=2, pad=2), (((D.K, 12),), ((D.P, 14),))),
    ("eyeriss", Layer.conv("dw", c_in=32, h=17, w=17, k_out=32, r=5, groups=32, pad=2), (((D.G, 12),), ((D.Q, 14),))),
    ("eyeriss", Layer.pool("mp", channels=16, h=15, w=15, r=3, stride=2), (((D.G, 12),), ((D.P, 7),))),
    ("nmp", Layer.conv("c5", c_in=6, h=19, w=21, k_out=10, r=5, stride=1, pad=1), ()),
    ("hwff1", Layer.conv("vgg", c_in=3, h=32, w=32, k_out=64, r=3, pad=1), (((D.S, 3), (D.C, 3)), ((D.K, 16),))),
]


@pytest.mark.parametrize(("arch_name", "layer", "spatial"), SINGLE, ids=[s[1].name for s in SINGLE])
@pytest.mark.parametrize(("tp", "tq", "tk_div", "resident"), [(4, 5, 1, True), (3, 100, 3, False), (100, 1, 1, False),
                                                             (2, 3, 2, True)])
def test_group_of_one_is_the_single_layer_model(arch_name, layer, spatial, tp, tq, tk_div, resident):
    arch = api.load_arch(arch_name)
    problem = Problem(layer, arch)
    lay = problem.layer
    d = lay.dims
    tp, tq = min(tp, d[Dim.P]), min(tq, d[Dim.Q])
    tk = d[Dim.K] if lay.groups > 1 else max(1, d[Dim.K] // tk_div)
    resident = resident or tk == d[Dim.K]  # streaming one filter at a time has no single-layer twin
    mapping = Mapping(tiles=(1, d[Dim.G], tk, d[Dim.C], tp, tq, d[Dim.R], d[Dim.S]),
                      order=(Dim.N, Dim.G, Dim.P, Dim.Q, Dim.K, Dim.C, Dim.R, Dim.S),
                      hoist=(frozenset(), frozenset({Dim.K}) if resident and tk < d[Dim.K] else frozenset(),
                             frozenset()),
                      spatial=spatial)
    got = evaluate_fused(FusedGroup((lay,)), arch, fused([lay], tp, tq, tk=tk * d[Dim.G], resident=(resident,),
                                                         unroll=(mapping.unroll(),))).cost
    ref = evaluate(problem, MappingBatch.from_mappings([mapping]))
    for field in ("dram_read_bytes", "dram_write_bytes", "dram_bursts", "footprint_bytes", "compute_cycles",
                  "noc_cycles", "latency_cycles", "energy_breakdown_pj", "feasible"):
        np.testing.assert_allclose(getattr(got, field), getattr(ref, field), rtol=1e-12, err_msg=field)


# ----------------------------------------------------------------- propagation and multi-tiling
def test_eq4_interior_propagation():
    """T_i = (T_o - 1) * S + N_k at every layer, away from the borders (HW-Flow-Fusion Eq. 4)."""
    geoms = [AxisGeom(101, 50, 2, 1, 3, 0), AxisGeom(50, 48, 1, 1, 3, 0), AxisGeom(48, 44, 1, 1, 5, 0)]
    ax = propagate(geoms, np.array([4]))
    t_o = 4
    for m in (2, 1, 0):
        g = geoms[m]
        t_i = (t_o - 1) * g.stride + g.kernel
        assert ax.in_hi[m][0, 1] - ax.in_lo[m][0, 1] == t_i
        t_o = t_i


def _eq10(n_o: int, t_o: int, t_i: int, k: int, s: int, pad: int, n_i_padded: int) -> tuple[list[int], list[int]]:
    reps = ceil(n_o / t_o) - 2
    x1 = t_i - pad
    x2 = t_i - (k - s)
    x3 = n_i_padded - 2 * pad - x1 - x2 * reps
    return [x1, x2, x3], [1, reps, 1]


def test_multitiling_tile_sets_of_figs_8_9():
    """Two 3x3 stride-1 layers (padding 1) on 8x8 maps, bottom tiles of 2x2: the new-pixel tiles of
    the intermediate map are X1 = T_ix - P_x, X2 = T_ix - (N_kx - S_x) and the remainder X3, repeated
    1, X_reps, 1 times (Eq. 10); the 2-D sets are their products with Eq. 12's repetitions and cover
    the map exactly once (Eq. 13)."""
    a = Layer.conv("top", c_in=4, h=8, w=8, k_out=4, r=3, pad=1, precision=B2)
    b = Layer.conv("bottom", c_in=4, h=8, w=8, k_out=4, r=3, pad=1, precision=B2)
    gm = GroupModel(FusedGroup((a, b)), api.load_arch("hwff1"), np.array([2]), np.array([2]))
    ax = gm.rows
    t_ix = (2 - 1) * 1 + 3  # Eq. 4: the intermediate tile
    sizes, reps = _eq10(8, 2, t_ix, 3, 1, 1, 8 + 2)
    assert sizes == [3, 2, 1] and reps == [1, 2, 1]
    new = (ax.out_hi[0] - ax.new_lo[0])[0][ax.valid[0]]
    assert sorted(new.tolist()) == sorted(sum(([x] * r for x, r in zip(sizes, reps, strict=True)), []))
    tiles = np.outer(new, new)  # row-major steps: new rows x new cols (Eq. 11)
    expected = {}
    for xi, rx in zip(sizes, reps, strict=True):
        for yi, ry in zip(sizes, reps, strict=True):
            expected[xi * yi] = expected.get(xi * yi, 0) + rx * ry  # Eq. 12
    got = dict(zip(*np.unique(tiles, return_counts=True), strict=True))
    assert {int(k): int(v) for k, v in got.items()} == expected
    assert int(tiles.sum()) == 8 * 8  # Eq. 13: every intermediate pixel computed once
    cost = evaluate_fused(FusedGroup((a, b)), gm.arch, fused([a, b], 2, 2, overlap=Overlap.REUSE))
    assert int(cost.executed_macs[0]) == a.macs + b.macs


def _walk(layers: list[Layer], tp: int, tq: int) -> tuple[int, int, int]:
    """Plain loop walk of a fused chain: MACs computed with recomputation, MACs with reuse (each
    needed pixel once), and the top input elements fetched with reuse buffers (distinct pixels)."""
    last = layers[-1]
    seen = [np.zeros((x.p, x.q), dtype=bool) for x in layers]
    top_seen = np.zeros((layers[0].h, layers[0].w), dtype=bool)
    recompute = 0
    for p0 in range(0, last.p, tp):
        for q0 in range(0, last.q, tq):
            rows, cols = (p0, min(p0 + tp, last.p)), (q0, min(q0 + tq, last.q))
            for m in range(len(layers) - 1, -1, -1):
                x = layers[m]
                per_pixel = x.macs // (x.p * x.q)
                recompute += (rows[1] - rows[0]) * (cols[1] - cols[0]) * per_pixel
                seen[m][rows[0]:rows[1], cols[0]:cols[1]] = True

                def back(iv: tuple[int, int], s: int, d: int, k: int, pad: int, size: int) -> tuple[int, int]:
                    lo = min(max(iv[0] * s - pad, 0), size)
                    hi = min(max((iv[1] - 1) * s - pad + (k - 1) * d + 1, 0), size)
                    return lo, max(lo, hi)

                rows = back(rows, x.stride[0], x.dilation[0], x.r, x.pad[0], x.h)
                cols = back(cols, x.stride[1], x.dilation[1], x.s, x.pad[2], x.w)
            top_seen[rows[0]:rows[1], cols[0]:cols[1]] = True
    reuse = sum(int(s.sum()) * (x.macs // (x.p * x.q)) for s, x in zip(seen, layers, strict=True))
    return recompute, reuse, int(top_seen.sum())


@st.composite
def chains(draw):
    c, h = draw(st.integers(1, 3)), draw(st.integers(6, 16))
    layers = []
    for i in range(draw(st.integers(1, 3))):
        k = draw(st.integers(1, 7))
        s = draw(st.integers(1, 2))
        pad = draw(st.integers(0, (k - 1) // 2 + 1)) if k > 1 else 0
        if h + 2 * pad < k:
            break
        kout = draw(st.integers(1, 3))
        layers.append(Layer.conv(f"l{i}", c_in=c, h=h, w=h, k_out=kout, r=k, stride=s, pad=pad, precision=B2))
        c, h = kout, layers[-1].p
    return layers


@settings(max_examples=25, deadline=None)
@given(chains(), st.integers(1, 9), st.integers(1, 9))
def test_recompute_and_reuse_macs_match_a_loop_walk(layers, tp, tq):
    if not layers:
        return
    last = layers[-1]
    tp, tq = min(tp, last.p), min(tq, last.q)
    group = FusedGroup(tuple(layers))
    arch = api.load_arch("hwff1")
    recompute, reuse, top = _walk(layers, tp, tq)
    rc = evaluate_fused(group, arch, fused(layers, tp, tq))
    ru = evaluate_fused(group, arch, fused(layers, tp, tq, overlap=Overlap.REUSE))
    assert int(rc.executed_macs[0]) == recompute
    assert int(ru.executed_macs[0]) == reuse <= group.macs  # MAC conservation (Eq. 13) on needed pixels
    spans = [(x.dilation[0] * (x.r - 1) + 1, x.dilation[1] * (x.s - 1) + 1) for x in layers]
    if all(sp[0] >= x.stride[0] and (x.p - 1) * x.stride[0] - x.pad[0] + sp[0] >= x.h
           and sp[1] >= x.stride[1] and (x.q - 1) * x.stride[1] - x.pad[2] + sp[1] >= x.w
           for x, sp in zip(layers[1:], spans[1:], strict=True)):
        assert reuse == group.macs  # every intermediate pixel is needed: computed exactly once
    assert int(ru.cost.dram_read_bytes[0, 0]) == top * layers[0].c_in * 2  # each input pixel fetched once
    assert rc.cost.dram_read_bytes[0, 0] >= ru.cost.dram_read_bytes[0, 0]


# ----------------------------------------------------------------- HW-Flow-Fusion closed forms
def _pair() -> tuple[Layer, Layer]:
    """Two 'valid' 3x3 convolutions (padding stored in DRAM, as the closed forms assume)."""
    a = Layer.conv("conv_a", c_in=8, h=18, w=18, k_out=16, r=3, pad=0, precision=B2)
    b = Layer.conv("conv_b", c_in=16, h=16, w=16, k_out=12, r=3, pad=0, precision=B2)
    return a, b


def test_hwff_eq1_5_6_fusion_buffer_and_volume():
    """Eq. 4 tiles, Eq. 1 per-layer buffers summed as Eq. 5, and the DRAM volume of Eq. 6 (weights
    once; top input buffer x fetches; bottom output buffer x writes)."""
    a, b = _pair()
    arch = api.load_arch("hwff1")
    t_ox = t_oy = 7
    got = evaluate_fused(FusedGroup((a, b)), arch, fused([a, b], t_oy, t_ox))
    t_i_b = (t_ox - 1) * 1 + 3  # Eq. 4
    t_i_a = (t_i_b - 1) * 1 + 3
    prec = 2
    inputs = t_i_a ** 2 * a.c_in * prec + t_i_b ** 2 * b.c_in * prec  # Eq. 1 input buffers
    weights = (a.r * a.s * a.c_in * a.k_out + b.r * b.s * b.c_in * b.k_out) * prec
    out_buf = t_ox * t_oy * b.k_out * prec
    assert int(got.cost.footprint_bytes[0, 0]) == inputs + weights + out_buf  # Eq. 5
    fetches = ceil(b.p / t_oy) * ceil(b.q / t_ox)  # Eq. 2 with T_if = N_if, T_of = N_of
    volume = t_i_a ** 2 * a.c_in * prec * fetches + weights + out_buf * fetches  # Eq. 6
    assert float(got.cost.dram_bytes[0]) == volume


def test_hwff_eq8_9_reuse_buffers():
    a, b = _pair()
    arch = api.load_arch("hwff1")
    t = 4
    rows = evaluate_fused(FusedGroup((a, b)), arch, fused([a, b], t, t, overlap=Overlap.REUSE))
    alwani = evaluate_fused(FusedGroup((a, b)), arch, fused([a, b], t, t, overlap=Overlap.ALWANI))
    expected8 = expected9 = 0
    t_o = t
    for x in (b, a):
        t_i = (t_o - 1) * x.stride[0] + x.r
        expected8 += (x.w - t_i) * (x.r - x.stride[0]) * x.c_in * 2  # Eq. 8, buffer_x
        expected9 += (t_i - (x.r - x.stride[0])) * (x.s - x.stride[1]) * x.c_in * 2  # Eq. 9, overhead_y
        t_o = t_i
    assert int(rows.reuse_bytes[0]) == expected8
    assert int(alwani.reuse_bytes[0]) == expected8 + expected9
    assert float(rows.cost.dram_bytes[0]) == float(alwani.cost.dram_bytes[0])
    assert int(rows.cost.footprint_bytes[0, 0]) + expected9 == int(alwani.cost.footprint_bytes[0, 0])


def test_channel_chunked_pair_holds_one_chunk_of_the_intermediate_map():
    a, b = _pair()
    arch = api.load_arch("hwff1")
    full = evaluate_fused(FusedGroup((a, b)), arch, fused([a, b], 7, 7, resident=(False, False)))
    chunked = evaluate_fused(FusedGroup((a, b)), arch, fused([a, b], 7, 7, resident=(False, False), chunk=(4,)))
    t_i_b = (7 - 1) + 3
    assert float(full.cost.dram_bytes[0]) == float(chunked.cost.dram_bytes[0])  # same traffic
    inter = t_i_b ** 2 * 2
    w_a, w_b = a.r * a.s * a.c_in * 2, b.r * b.s * b.c_in * 2  # one filter each when streamed unchunked
    w_a4, w_b4 = 4 * w_a, b.k_out * 4 * b.r * b.s * 2  # 4 filters of A, all filters' 4-channel slice of B
    delta = (16 - 4) * inter + (w_a - w_a4) + (w_b - w_b4)
    assert int(full.cost.footprint_bytes[0, 0]) - int(chunked.cost.footprint_bytes[0, 0]) == delta


def test_illegal_groups_and_mappings_are_rejected():
    net = api.load_network("resnet50")
    names = [x.name for x in net.layers]
    with pytest.raises(WorkloadError, match="also read by"):
        FusedGroup.of(net, names[:6])
    a, b = _pair()
    with pytest.raises(MappingError, match="exceeds"):
        fused([a, b], 99, 1).check(FusedGroup((a, b)))
    with pytest.raises(MappingError, match="both be chunked"):
        c = Layer.conv("conv_c", c_in=12, h=14, w=14, k_out=4, r=3, pad=0, precision=B2)
        fused([a, b, c], 2, 2, chunk=(4, 4)).check(FusedGroup((a, b, c)))
