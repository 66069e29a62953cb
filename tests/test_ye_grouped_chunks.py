"""Chunking a grouped consumer's input (Ye et al.'s sublayers: ResNeXt's 1x1 conv feeding its grouped
3x3 conv, C > 1): a chunk of the producer's channels feeds only the consumer groups it belongs to.

References: a plain predicate over the chunk ranges (no chunk straddles a group), the executor's
counts of the fused program (real addresses of every transfer) and the layers run one by one
(bit-exact output), a plain walk of the loops over tile steps, chunks and groups written here (DRAM
words), and costs stored from the code before grouped chunks existed (ungrouped groups unchanged)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from test_fusion_edges import _check_space, _exact
from test_fusion_program import shrink

from tileplan import api
from tileplan.dims import Dim
from tileplan.errors import MappingError
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.search import map_chunks, search_group
from tileplan.fusion.verify import verify_fused
from tileplan.fusion.ye import FUSED, classify, search_pair
from tileplan.workload.layer import Layer, Precision

B1 = Precision.uniform(1)
ONES = (1,) * 8
GOLDEN = Path(__file__).parent / "fixtures" / "fused_ungrouped_golden.json"


def resnext(names: list[str], hw: int, groups: int, batch: int = 2) -> FusedGroup:
    """ResNeXt-50's layers ``names`` on an ``hw`` x ``hw`` input, batch ``batch``: the zoo's kernels,
    strides, padding and channels per group (4 in res2, 8 in res3), ``groups`` groups instead of 32,
    the 1x1 convs' other channels divided by 16."""
    net = api.load_network("resnext50")
    zoo = [net[n] for n in names]
    out: list[Layer] = []
    c, h = max(1, zoo[0].c_in // 16), hw
    for i, x in enumerate(zoo):
        nxt = zoo[i + 1] if i + 1 < len(zoo) else None
        if x.groups > 1:
            k = groups * x.dims[Dim.K]
        elif nxt is not None and nxt.groups > 1:
            k = groups * nxt.dims[Dim.C]
        else:
            k = max(1, x.k_out // 16)
        y = Layer.conv(x.name, n=batch, c_in=c, h=h, w=h, k_out=k, r=x.r, stride=x.stride, pad=x.pad,
                       groups=groups if x.groups > 1 else 1, inputs=(out[-1].name,) if out else (), precision=B1)
        out.append(y)
        c, h = y.k_out, y.p
    return FusedGroup(tuple(out))


def _plain_ok(channels: int, per_group: int, chunk: int) -> bool:
    """Every chunk range lies in one group or is made of whole groups, and no chunk is a remainder."""
    ranges = [(a, min(a + chunk, channels)) for a in range(0, channels, chunk)]
    return channels % chunk == 0 and all(
        len({c // per_group for c in range(a, b)}) == 1 or (a % per_group == 0 and b % per_group == 0)
        for a, b in ranges)


def test_chunks_never_straddle_a_group() -> None:
    for groups, per_group in ((4, 8), (3, 6), (6, 4)):
        l1 = Layer.conv("l1", c_in=5, h=6, w=6, k_out=groups * per_group, r=1, precision=B1)
        l2 = Layer.conv("l2", c_in=groups * per_group, h=6, w=6, k_out=2 * groups, r=3, groups=groups,
                        inputs=("l1",), precision=B1)
        group = FusedGroup((l1, l2))
        channels = l1.k_out
        for chunk in range(1, channels):
            assert (group.chunk_error(0, chunk) is None) == _plain_ok(channels, per_group, chunk), (groups, chunk)
        # the search's chunks: powers of two and whole groups, all valid
        assert all(_plain_ok(channels, per_group, c) for c in map_chunks(group, 0))
    assert map_chunks(group, 0) == [1, 2, 4, 8, 12]  # 6 groups of 4: powers 1..16 minus 16, + 4, 8, 12
    mapping = FusedMapping(1, 2, 2, l2.k_out, Overlap.RECOMPUTE, Direction.ROWS, (True, True), (3,), (ONES, ONES))
    with pytest.raises(MappingError, match="straddles the groups of 'l2'"):
        evaluate_fused(group, api.load_arch("ye-64"), mapping)
    # a depthwise consumer (one channel per group) is not chunked
    dw = Layer.conv("dw", c_in=8, h=6, w=6, k_out=8, r=3, groups=8, inputs=("l1",), precision=B1)
    assert map_chunks(FusedGroup((Layer.conv("l1", c_in=5, h=6, w=6, k_out=8, r=1, precision=B1), dw)), 0) == []


PAIRS = [(["res2a_conv1", "res2a_conv2"], 9), (["res3a_conv1", "res3a_conv2"], 9),
         (["res2a_conv1", "res2a_conv2", "res2a_conv3"], 7)]


# res2a's pair (2 s) under slow: the strided pair and the three-layer group cover its chunks by default
@pytest.mark.parametrize(("names", "hw"), [pytest.param(*PAIRS[0], id="res2a", marks=pytest.mark.slow),
                                           pytest.param(*PAIRS[1], id="res3a-stride2"),
                                           pytest.param(*PAIRS[2], id="res2a-three")])
def test_resnext_programs_count_what_the_model_predicts(names: list[str], hw: int) -> None:
    """Every chunk the search may use (within a group and whole groups), inside the tile steps and
    outermost, recompute and reuse, streamed and resident weights, remainder tiles: the program is
    bit-exact, its counted DRAM bytes, bursts and MACs equal the model, within the model's footprint."""
    group = resnext(names, hw, groups=4)
    last = group.last
    arch = replace(api.load_arch("eyeriss"), double_buffering=False)
    big = replace(arch, memories=[replace(m, size_bytes=1 << 24) for m in arch.memories])
    nl = len(group)
    full = tuple(x.k_out for x in group.layers[:-1])
    chunks = map_chunks(group, 0)
    assert 1 in chunks and group.layers[1].dims[Dim.C] in chunks and 2 * group.layers[1].dims[Dim.C] in chunks
    checked = 0
    for i, chunk in enumerate(chunks):
        for outer, overlap in ((False, Overlap.RECOMPUTE), (False, Overlap.REUSE), (True, Overlap.RECOMPUTE)):
            if outer and nl != 2:
                continue
            resident = (False,) * nl if outer else ((False,) * nl, (True,) * nl, (True, False, True)[:nl])[i % 3]
            tp, tq = (last.p, last.q) if i % 2 else (min(3, last.p), min(2, last.q))
            mapping = FusedMapping(1 + i % 2, tp, tq, last.k_out, overlap, Direction.COLS if i % 2 else Direction.ROWS,
                                   resident, (chunk,) + full[1:], (ONES,) * nl, outer)
            _exact(verify_fused(group, big, mapping, seed=i))
            checked += 1
    assert checked >= 2 * len(chunks)
    # random points of the search's own space, plus its optima for latency and DRAM on eyeriss
    assert _check_space([group], 5, 11) >= 5


def test_ye_strategies_on_a_resnext_pair_are_programs() -> None:
    """Each of Ye et al.'s strategies has a point on a grouped pair (wr2lv2 and ir2l included, which
    need chunks of one sublayer), classified back as itself, whose program verifies."""
    group = resnext(["res3a_conv1", "res3a_conv2"], 9, groups=4)
    arch = api.load_arch("ye-32", ["precision_bytes=1"])
    for name in FUSED:
        found = search_pair(group, arch, name)
        assert found is not None, name
        assert classify(group, found.mapping) == name, (name, found.mapping)
        _exact(verify_fused(group, arch, found.mapping))


def _window(lo: int, hi: int, layer: Layer, axis: int) -> tuple[int, int]:
    """Input rows (axis 0) or columns (1) that output rows/columns [lo, hi) of ``layer`` read, clipped."""
    stride, pad, kernel = layer.stride[axis], layer.pad[2 * axis], (layer.r, layer.s)[axis]
    size = (layer.h, layer.w)[axis]
    return max(lo * stride - pad, 0), min((hi - 1) * stride - pad + kernel, size)


def _walk_words(group: FusedGroup, mapping: FusedMapping) -> tuple[int, int, int]:
    """DRAM words (input, weight, output) of a pair's recompute mapping, by walking its loops: per
    tile step the first layer's input window; streamed weights per step (once with the chunk loop
    outermost): per chunk the producer's filters and, per consumer group the chunk feeds, its filters'
    channels of the chunk; resident weights once; the input once per chunk with the chunk loop outermost."""
    l1, l2 = group.layers
    d = mapping.chunk[0]
    per_group, k_per = l2.c_in // l2.groups, l2.k_out // l2.groups
    steps = []
    for n0 in range(0, l2.n, mapping.tile_n):
        for p0 in range(0, l2.p, mapping.tile_p):
            for q0 in range(0, l2.q, mapping.tile_q):
                n1, p1 = min(n0 + mapping.tile_n, l2.n), min(p0 + mapping.tile_p, l2.p)
                q1 = min(q0 + mapping.tile_q, l2.q)
                rows = _window(*_window(p0, p1, l2, 0), l1, 0)
                cols = _window(*_window(q0, q1, l2, 1), l1, 1)
                steps.append((n1 - n0) * l1.c_in * (rows[1] - rows[0]) * (cols[1] - cols[0]))
    chunk_weights = 0
    for k0 in range(0, l1.k_out, d):
        k1 = min(k0 + d, l1.k_out)
        chunk_weights += (k1 - k0) * l1.c_in * l1.r * l1.s
        for g in range(l2.groups):
            lo, hi = max(k0, g * per_group), min(k1, (g + 1) * per_group)
            for _ in range(k_per):
                chunk_weights += max(0, hi - lo) * l2.r * l2.s
    passes = -(-l1.k_out // d) if mapping.chunk_outer else 1
    if all(mapping.resident):
        weights = l1.k_out * l1.c_in * l1.r * l1.s + l2.k_out * per_group * l2.r * l2.s
    else:
        weights = chunk_weights * (1 if mapping.chunk_outer else len(steps))
    return passes * sum(steps), weights, l2.n * l2.k_out * l2.p * l2.q


@pytest.mark.parametrize("chunk", [2, 8, 16])  # within a group of 8, one group, two groups
@pytest.mark.parametrize("outer", [False, True])
def test_dram_words_equal_a_plain_walk_over_chunks_and_groups(chunk: int, outer: bool) -> None:
    group = resnext(["res3a_conv1", "res3a_conv2"], 11, groups=4, batch=3)  # 3x3 stride 2 pad 1: 6x6 output
    last = group.last
    arch = api.load_arch("ye-1024", ["precision_bytes=1"])
    for tile_n, tp, tq, resident in ((2, 4, 5, (False, False)), (1, 6, 6, (False, False)), (3, 1, 4, (True, True))):
        if outer and any(resident):
            continue
        mapping = FusedMapping(tile_n, tp, tq, last.k_out, Overlap.RECOMPUTE, Direction.ROWS, resident, (chunk,),
                               (ONES, ONES), outer)
        cost = evaluate_fused(group, arch, mapping).cost
        words_in, words_w, words_out = _walk_words(group, mapping)
        assert cost.dram_read_bytes[0].tolist() == [words_in, words_w, 0], (tile_n, tp, tq, resident)
        assert float(cost.dram_write_bytes[0]) == words_out


def test_ungrouped_fused_costs_are_unchanged() -> None:
    """Costs of 64 random fused mappings of ungrouped groups on eyeriss (every overlap, chunk placement,
    tile_k, residency), stored from the code before grouped chunks existed: equal to the last bit."""
    arch = api.load_arch("eyeriss")
    checked = 0
    for entry in json.loads(GOLDEN.read_text()):
        if entry["kind"] != "eval":
            continue
        net, names, hw, div = entry["spec"]
        group = FusedGroup(tuple(shrink(net, names, hw, div)))
        cost = evaluate_fused(group, arch, FusedMapping.from_dict(entry["mapping"])).cost
        want = entry["cost"]
        assert cost.dram_read_bytes[0].tolist() == want["read"] and float(cost.dram_write_bytes[0]) == want["write"]
        assert cost.dram_bursts[0].tolist() == want["bursts"] and cost.footprint_bytes[0].tolist() == want["footprint"]
        assert float(cost.latency_cycles[0]) == want["latency"] and float(cost.compute_cycles[0]) == want["compute"]
        checked += 1
    assert checked == 64


@pytest.mark.slow
def test_ungrouped_fused_searches_are_unchanged() -> None:
    """The general search's and Ye et al.'s strategies' optima on the same ungrouped groups, stored
    from the code before grouped chunks existed: the same mappings and costs."""
    for entry in json.loads(GOLDEN.read_text()):
        if entry["kind"] == "eval":
            continue
        net, names, hw, div = entry["spec"]
        group = FusedGroup(tuple(shrink(net, names, hw, div)))
        kind = entry["kind"]
        if kind.startswith("search_"):
            found = search_group(group, api.load_arch("eyeriss"), kind.removeprefix("search_"))
        else:
            _, name, arch_name = kind.split("_", 2)
            found = search_pair(group, api.load_arch(arch_name), name)
        assert (found.mapping.to_dict() if found else None) == entry["mapping"], kind
        if found is not None:
            assert found.cost.dram_read_bytes[0].tolist() == entry["cost"]["read"], kind
            assert float(found.cost.latency_cycles[0]) == entry["cost"]["latency"], kind


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: `cc` is not on PATH")
@pytest.mark.parametrize(("chunk", "outer"), [(2, False), (8, True)])
def test_grouped_chunks_in_c(chunk: int, outer: bool, tmp_path: Path) -> None:
    """The C backend runs a grouped chunked program (reuse buffers: a consumed chunk is dropped only
    in its own group): bit-exact, printing the model's bytes, bursts and MACs."""
    from test_fusion_cgen import _check

    group = resnext(["res3a_conv1", "res3a_conv2"], 9, groups=4)
    last = group.last
    overlap = Overlap.RECOMPUTE if outer else Overlap.REUSE
    mapping = FusedMapping(1, 2, 3, last.k_out, overlap, Direction.ROWS, (False, False), (chunk,), (ONES, ONES), outer)
    _check(group, mapping, tmp_path)
