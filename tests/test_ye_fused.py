"""Ye et al. §3: the fused two-layer strategies are points of the general fused model. Their printed
DRAM equations (Eq. 1, 3, 5, 7) equal the model on pairs whose padding is in DRAM and whose tiles
divide evenly; the buffer equations (Eq. 2, 4, 6, 8) differ from the faithful count exactly by the
documented terms; Fig. 6a / 6b's must-show orderings."""

from __future__ import annotations

import numpy as np
import pytest

from tileplan import api
from tileplan.cost.problem import Problem
from tileplan.experiments.ye import fig6_rows, fig6a_weight_reuse_note
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.verify import verify_fused
from tileplan.fusion.ye import FUSED, cardinality, restriction, search_f2l, search_pair
from tileplan.fusion.ye_formulas import PairShape, best_printed, best_printed_f2l, buffer, dram, windows
from tileplan.search import run
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer, Precision

B2 = Precision.uniform(2)
ONES = ((1,) * 8, (1,) * 8)


def _valid_pair(groups: int = 1) -> FusedGroup:
    """1x1 then 3x3, both 'valid' (padding already in DRAM), 8x8 output, batch 2."""
    l1 = Layer.conv("l1", n=2, c_in=24, h=10, w=10, k_out=16, r=1, pad=0, precision=B2)
    l2 = Layer.conv("l2", n=2, c_in=16, h=10, w=10, k_out=8 if groups == 1 else 16, r=3, pad=0, groups=groups,
                    inputs=("l1",), precision=B2)
    return FusedGroup((l1, l2))


def _mapping(group: FusedGroup, name: str, a: int, b: int, h: int, d: int) -> FusedMapping:
    r = restriction(name, group)
    assert r is not None
    chunk = r.chunks[0] if len(r.chunks) == 1 else (d,)
    return FusedMapping(h, b, a, group.last.k_out, Overlap.RECOMPUTE, Direction.ROWS, r.residencies[0], chunk, ONES,
                        r.outers[0])


TILINGS = [(4, 4, 1, 4), (8, 2, 2, 8), (2, 8, 1, 2), (8, 8, 2, 1)]


@pytest.mark.parametrize("name", FUSED)
@pytest.mark.parametrize("tiling", TILINGS)
def test_dram_equations_1_3_5_7(name: str, tiling: tuple[int, int, int, int]) -> None:
    group = _valid_pair()
    a, b, h, d = tiling
    cost = evaluate_fused(group, api.load_arch("ye-1024"), _mapping(group, name, a, b, h, d)).cost
    shape = PairShape.of(group)
    want = dram(name, shape, np.array([a]), np.array([b]), np.array([h]), np.array([1]), np.array([d]))[0]
    assert float(cost.dram_bytes[0]) == 2 * want


@pytest.mark.parametrize("name", FUSED)
def test_buffer_equations_2_4_6_8_and_the_faithful_differences(name: str) -> None:
    group = _valid_pair()
    a, b, h, d = 4, 2, 2, 4
    cost = evaluate_fused(group, api.load_arch("ye-1024"), _mapping(group, name, a, b, h, d)).cost
    s = PairShape.of(group)
    one = np.array([1])
    printed = buffer(name, s, np.array([a]), np.array([b]), np.array([h]), one, np.array([d]))[0]
    (a2,), _ = windows(s, np.array([a]))
    (b2,), _ = windows(s, np.array([b]))
    # The faithful count of Fig. 4 minus the printed equation (see fusion.ye_formulas).
    extra = {
        "ir2l": s.d2 * s.s2 ** 2 + s.c1 * s.s1 ** 2 - max(s.c1 * s.s1 ** 2, s.s2 ** 2),
        "wr2lv1": a * b * h * s.d2,
        "wr2lv2": a2 * b2 * h * (d - 1),
        "pr2l": a2 * b2 * h * (d - 1),
    }[name]
    assert int(cost.footprint_bytes[0].sum()) == 2 * (printed + extra)


def test_grouped_second_layer_is_ye_cardinality() -> None:
    """C = 4 sublayers (a grouped 3x3 second layer, 4 channels per group): every strategy's DRAM
    accesses are its printed equation (pr2l: the input once per step, not C times), with wr2lv1's
    c < C sublayers (whole-group chunks, the chunk loop outermost) giving Eq. 3 with c and wr2lv2's
    chunks within one sublayer Eq. 5; the buffers are Eq. 2, 4, 6, 8 plus the faithful terms of the
    ungrouped test, with one sublayer's partial sums (abh D2,x, B W1 W2 D2,x), not all C of them."""
    group = _valid_pair(groups=4)
    assert cardinality(group) == 4
    s = PairShape.of(group)
    assert (s.card, s.d1, s.d2) == (4, 4, 4)
    arch = api.load_arch("ye-1024")
    one, a, b, h = np.array([1]), 4, 4, 1
    (a2,), _ = windows(s, np.array([a]))
    (b2,), _ = windows(s, np.array([b]))
    cases = [  # name, chunk, resident, chunk loop outermost, c, d, faithful extra buffer elements
        ("ir2l", 1, (False, False), False, 1, 1,
         s.d2 * s.s2 ** 2 + s.c1 * s.s1 ** 2 - max(s.c1 * s.s1 ** 2, s.s2 ** 2)),
        ("wr2lv1", 1, (True, True), False, 4, 1, a * b * h * s.d2),  # c = C: Eq. 4 has no psums, the model one tile's
        ("wr2lv1", 8, (False, False), True, 2, 1, a2 * b2 * h * (2 * s.d1 - 1) + a * b * h * 2 * s.d2),
        ("wr2lv2", 2, (False, False), True, 1, 2, a2 * b2 * h * (2 - 1)),
        ("wr2lv2", 1, (False, False), True, 1, 1, 0),
    ]
    for name, chunk, resident, outer, c, d, extra in cases:
        mapping = FusedMapping(h, b, a, group.last.k_out, Overlap.RECOMPUTE, Direction.ROWS, resident, (chunk,), ONES,
                               outer)
        cost = evaluate_fused(group, arch, mapping).cost
        args = (np.array([a]), np.array([b]), np.array([h]), np.array([c]), np.array([d]))
        assert float(cost.dram_bytes[0]) == 2 * dram(name, s, *args)[0], (name, chunk)
        assert int(cost.footprint_bytes[0].sum()) == 2 * (buffer(name, s, *args)[0] + extra), (name, chunk)
    pr = evaluate_fused(group, arch, _mapping(group, "pr2l", 4, 4, 1, 2)).cost
    full = dram("pr2l", s, np.array([4]), np.array([4]), one, one, np.array([2]))[0]
    ifmap = 2 * 10 * 10 * 24  # whole-map ifmap of 4x4 tiles with a 6x6 halo'd window: 4 tiles x 36 px x 2
    assert float(pr.dram_bytes[0]) == 2 * (full - (s.card - 1) * (ifmap * 36 * 4 / 100))
    assert int(pr.footprint_bytes[0].sum()) == 2 * (buffer("pr2l", s, np.array([4]), np.array([4]), one, one,
                                                           np.array([2]))[0] + a2 * b2 * h * (2 - 1))
    wr2lv2 = restriction("wr2lv2", group)
    assert wr2lv2 is not None and wr2lv2.chunks == [(1,), (2,)]  # within one sublayer of 4 channels
    wr2lv1 = restriction("wr2lv1", group)
    assert wr2lv1 is not None and wr2lv1.also is not None and wr2lv1.also.chunks == [(4,), (8,)]  # c = 1, 2
    assert restriction("superslash", group) is None


def test_wr2lv2_program_counts_what_the_model_predicts() -> None:
    l1 = Layer.conv("l1", n=2, c_in=12, h=9, w=9, k_out=16, r=1, precision=B2)
    l2 = Layer.conv("l2", n=2, c_in=16, h=9, w=9, k_out=8, r=3, inputs=("l1",), precision=B2)
    group = FusedGroup((l1, l2))
    for outer in (False, True):
        mapping = FusedMapping(1, 4, 3, 8, Overlap.RECOMPUTE, Direction.ROWS, (False, False), (4,), ONES, outer)
        v = verify_fused(group, api.load_arch("ye-64"), mapping)
        assert v.ok, v
    # The input once per chunk (4 chunks, halo'd windows of 13 x 13 rows x cols), the weights once.
    assert v.counted_read_bytes == (4 * 2 * 12 * 13 * 13 * 2, (12 * 16 + 16 * 8 * 9) * 2, 0)


def _fig6(c1: int, hw: int, words: bool = True) -> tuple[FusedGroup, list[Layer]]:
    p = Precision.uniform(1 if words else 2)
    l1 = Layer.conv("l1", n=3, c_in=c1, h=hw, w=hw, k_out=128, r=1, precision=p)
    l2 = Layer.conv("l2", n=3, c_in=128, h=hw, w=hw, k_out=32, r=3, inputs=("l1",), precision=p)
    return FusedGroup((l1, l2)), [l1, l2]


def _words(kb: int) -> object:
    """Fig. 6's buffers read as KB = K data words (1-byte elements; see the README)."""
    return api.load_arch(f"ye-{kb}", ["precision_bytes=1"])


def _single(layers: list[Layer], arch: object) -> float:
    return sum(float(run("smartshuttle", Problem(x, arch), Objective.DRAM).cost.dram_bytes[0])  # type: ignore[arg-type]
               for x in layers)


def test_fig6a_ordering() -> None:
    group, layers = _fig6(336, 28)
    per_size = {}
    for kb in (32, 48, 128, 256):
        arch = _words(kb)
        fused = {n: r for n in FUSED if (r := search_pair(group, arch, n)) is not None}  # type: ignore[arg-type]
        per_size[kb] = ({n: float(r.cost.dram_bytes[0]) for n, r in fused.items()}, _single(layers, arch))
    for kb in (32, 48):  # ir2l is the best fused strategy below 64 KB; single-layer beats every fused one
        fused, single = per_size[kb]
        assert min(fused, key=fused.__getitem__) == "ir2l"
        assert single < min(fused.values())
    for kb in (128, 256):  # weight reuse wins above 96 KB, and fusion beats single-layer reuse
        fused, single = per_size[kb]
        assert min(fused, key=fused.__getitem__) == "wr2lv1"
        assert fused["wr2lv1"] <= fused["wr2lv2"]  # on this (Fig. 6a) pair; not on Fig. 6b's, see below
        assert min(fused.values()) < single
    assert per_size[128][0]["wr2lv1"] == 1183296  # 80 K weights + 3 x 28 x 28 x 32 ofmap + halo'd ifmap


def test_wr2lv2_beats_wr2lv1_on_the_fig6b_pair_only() -> None:
    """wr2lv1 <= wr2lv2 holds on the Fig. 6a pair (C1 = 336, 28x28) at every size where both fit,
    but not on the Fig. 6b pair (C1 = 988, 7x7): there the 988 x 128 first-layer weights crowd wr2lv1
    out, and wr2lv2 (weights streamed per chunk) moves less at 175 K words in the model (458,504 vs
    674,876 words) and is the only one that fits at 160 K; from 192 K words wr2lv1 wins again. The
    printed Eq. 3 / Eq. 5 agree on the crossing: wr2lv2 is lower at 160-192 K words."""
    a_group, _ = _fig6(336, 28)
    for kb in (96, 128, 192, 256, 384, 512):
        v1, v2 = search_pair(a_group, _words(kb), "wr2lv1"), search_pair(a_group, _words(kb), "wr2lv2")
        assert v1 is not None and v2 is not None
        assert float(v1.cost.dram_bytes[0]) <= float(v2.cost.dram_bytes[0])
    b_group, _ = _fig6(988, 7)
    model = {kb: (search_pair(b_group, _words(kb), "wr2lv1"), search_pair(b_group, _words(kb), "wr2lv2"))
             for kb in (160, 175, 192, 256)}
    assert model[160][0] is None and model[160][1] is not None
    assert float(model[175][1].cost.dram_bytes[0]) == 458504 < float(model[175][0].cost.dram_bytes[0]) == 674876  # type: ignore[union-attr]
    for kb in (192, 256):
        v1, v2 = model[kb]
        assert v1 is not None and v2 is not None and float(v1.cost.dram_bytes[0]) < float(v2.cost.dram_bytes[0])
    shape = PairShape.of(b_group)
    for kb in (175, 192):
        p1, p2 = best_printed("wr2lv1", shape, kb * 1024), best_printed("wr2lv2", shape, kb * 1024)
        assert p1 is not None and p2 is not None and p2.dram_elements < p1.dram_elements


def test_fig6b_single_layer_always_wins_with_the_printed_formulas() -> None:
    group, layers = _fig6(988, 7)
    shape = PairShape.of(group)
    for kb in (32, 128, 512):
        single = _single(layers, _words(kb))
        printed = best_printed_f2l(shape, kb * 1024)
        assert printed is None or single < printed.dram_elements
    # The faithful model never fetches the zero padding: with the whole 7x7 map on chip fusion reads
    # 7x7x988 ifmap values per image where Eq. 1 reads 9x9x988, and beats single-layer from 256 KB.
    best = search_f2l(group, _words(512))
    assert best is not None
    assert float(best[1].cost.dram_bytes[0]) == 3 * 49 * 988 + 988 * 128 + 128 * 32 * 9 + 3 * 49 * 32
    assert _single(layers, _words(512)) == 3 * 49 * 988 + 988 * 128 + 2 * 3 * 49 * 128 + 128 * 32 * 9 + 3 * 49 * 32
    assert best_printed("ir2l", shape, 512 * 1024).dram_elements == 3 * 81 * 988 + 988 * 128 + 128 * 32 * 9 + \
        3 * 49 * 32  # type: ignore[union-attr]


def test_fig6a_printed_equations_rank_wr2lv1_first_at_every_width() -> None:
    """No reading of the printed Eq. 3-6 puts wr2lv2 first above 96 KB: at one byte per element
    wr2lv1's Eq. 3 minimum is below wr2lv2's Eq. 5 at 96 / 128 / 256 KB, and at two bytes neither
    fits at 96 or 128 KB (wr2lv2's psums alone are 147 KB) while Eq. 3 < Eq. 5 again at 256 KB."""
    group, _ = _fig6(336, 28)
    shape = PairShape.of(group)
    words = {kb: (best_printed("wr2lv1", shape, kb * 1024), best_printed("wr2lv2", shape, kb * 1024))
             for kb in (96, 128, 256)}
    assert {kb: (round(a.dram_elements), round(b.dram_elements)) for kb, (a, b) in words.items()
            if a is not None and b is not None} == {96: (1679232, 12371901), 128: (1293128, 3352933),
                                                      256: (1103104, 1162733)}
    for kb in (96, 128):
        assert best_printed("wr2lv1", shape, kb * 512) is None and best_printed("wr2lv2", shape, kb * 512) is None
    a, b = best_printed("wr2lv1", shape, 256 * 512), best_printed("wr2lv2", shape, 256 * 512)
    assert a is not None and b is not None and a.dram_elements < b.dram_elements
    note = fig6a_weight_reuse_note(fig6_rows(336, 28, (128,)), (128,))
    assert "1,293,128 vs Eq. 5 (wr2lv2) 3,352,933" in note and "d <= 7" in note
