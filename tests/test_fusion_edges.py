"""Fused programs at the edges an independent walk found (issue 24 item 6c-e) and the property that
closes them: every mapping the fused search can return has a program, and the program's counted
DRAM bytes and bursts equal the model's.

References: closed forms from the tensors' geometry (a box of a row-major tensor costs
``ceil(bytes / burst)`` per contiguous run), the executor's counts of the program (every transfer's
real addresses) and the layers run one by one on whole tensors (bit-exact output)."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from test_fusion_merge import shrink_group
from test_fusion_model import fused
from test_fusion_program import shrink

from tileplan import api
from tileplan.dims import Operand
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.search import chunk_options, search_group, tile_k_options
from tileplan.fusion.verify import FusedVerify, verify_fused

ONES = (1,) * 8


def _exact(v: FusedVerify) -> None:
    assert v.bit_exact, v
    assert (v.counted_read_bytes, v.counted_write_bytes) == (v.predicted_read_bytes, v.predicted_write_bytes), v
    assert v.counted_bursts == v.predicted_bursts, v
    assert v.counted_macs == v.predicted_macs, v
    assert v.within_footprint, (v.peak_bytes, v.footprint_bytes)


@pytest.mark.parametrize("resident_last", [True, False])
def test_streamed_last_layer_stores_its_whole_tile_k_box(resident_last: bool) -> None:
    """(c) One step covers the whole 4 x 6 x 6 output (144 contiguous bytes, 64-byte bursts): it
    leaves in ceil(144 / 64) = 3 bursts whether the last layer's weights are resident or streamed
    filter by filter (the program stored a streamed layer filter by filter: 4 runs of 36 bytes, 4 bursts)."""
    layers = shrink("vgg16", ["conv1_1", "conv1_2"], 6, 16)
    last = layers[-1]
    arch = api.load_arch("eyeriss")
    out_bytes = last.k_out * last.p * last.q
    assert (out_bytes, arch.dram.burst_bytes) == (144, 64)
    v = verify_fused(FusedGroup(tuple(layers)), arch, fused(layers, last.p, last.q, resident=(True, resident_last)))
    _exact(v)
    assert v.counted_write_bytes == out_bytes
    assert v.counted_bursts[2] == math.ceil(out_bytes / arch.dram.burst_bytes) == 3


@pytest.mark.parametrize("resident", [(True, True), (True, False), (False, True), (False, False)])
def test_chunk_outer_loads_every_weight_once(resident: tuple[bool, bool]) -> None:
    """(e) With the chunk loop outermost every weight is loaded once: a resident layer's whole tensor
    once before the chunk loop (one contiguous block), a streamed one chunk by chunk (each piece
    once). The program reloaded resident weights per chunk (1,024 B counted for 512 B)."""
    layers = shrink("mobilenetv2", ["block0_project", "block1_expand"], 7, 2)
    arch = api.load_arch("eyeriss")
    mapping = replace(fused(layers, 2, 3, chunk=(3,), resident=resident), chunk_outer=True)
    v = verify_fused(FusedGroup(tuple(layers)), arch, mapping)
    _exact(v)
    sizes = [x.elements(Operand.WEIGHT) for x in layers]
    assert v.counted_read_bytes[1] == sum(sizes) == 16 * 8 + 8 * 48
    burst = arch.dram.burst_bytes
    resident_bursts = sum(math.ceil(b / burst) for b, r in zip(sizes, resident, strict=True) if r)
    assert resident_bursts == sum(v for v, r in zip((2, 6), resident, strict=True) if r)
    if all(resident):
        assert v.counted_bursts[1] == resident_bursts == 8


@pytest.mark.parametrize("outer", [False, True])
@pytest.mark.parametrize("direction", [Direction.ROWS, Direction.COLS])
def test_reuse_with_a_chunked_map_has_a_program(outer: bool, direction: Direction) -> None:
    """(d) Reuse buffers with a channel-chunked map (chunks inside or outside the tile steps): the
    program exists, runs bit-exact and counts what the model prices; with reuse the first layer's
    input (3 x 3 convolutions, padding 1: every pixel is read) is fetched exactly once per chunk pass."""
    layers = shrink("resnet50", ["res2a_conv1", "res2a_conv2"], 9, 16)
    first = layers[0]
    arch = api.load_arch("eyeriss")
    mapping = fused(layers, 3, 4, chunk=(2,), resident=(False, False), overlap=Overlap.REUSE, direction=direction)
    mapping = replace(mapping, chunk_outer=outer)
    v = verify_fused(FusedGroup(tuple(layers)), arch, mapping)
    _exact(v)
    passes = math.ceil(first.k_out / 2) if outer else 1
    assert v.counted_read_bytes[0] == passes * first.n * first.c_in * first.h * first.w


def test_a_streamed_piece_loaded_in_an_empty_step_is_not_held_twice() -> None:
    """resnet18 res2a_conv1+res2a_conv2 shrunk to 4 x 7 x 7 (3 x 3, padding 1), tiles 1 x 2 down the
    columns with reuse buffers, conv1 streamed a filter (36 B) at a time, conv2 resident (144 B). In
    the last row step of a column strip conv1 has nothing new to compute, but its 4 filters are still
    loaded (and priced): the program kept all 144 B on chip until its next compute (peak 424 B over
    the model's 398 B). A streamed piece replaces the last one. The peak, by hand, is conv1's 4th
    filter load in strip 2's second step: conv1's input 4 ch x 20 px = 80 B (the 2-column overlap
    strip, rows 1-6, and the window's rows 0-3 x cols 4-5), conv2's input 72 B (its 2-column strip,
    7 rows, and rows 0-1 x cols 3-4) + 6 B (row 2 x cols 3-4 of the 3 channels done), 36 + 144 B of
    weights: 338 B. The model (Eq. 5 + 8): conv1's 5 x 6 window 120 B, conv2's 3 x 4 window 48 B,
    cols reuse buffers (7 - 5) * 2 * 4 + (7 - 3) * 2 * 4 = 48 B, one psum tile 2 B, weights 180 B."""
    layers = shrink("resnet18", ["res2a_conv1", "res2a_conv2"], 7, 16)
    assert [(x.c_in, x.h, x.w, x.k_out, x.r, x.s) for x in layers] == [(4, 7, 7, 4, 3, 3)] * 2
    arch = replace(api.load_arch("eyeriss"), double_buffering=False)
    big = replace(arch, memories=[replace(m, size_bytes=1 << 24) for m in arch.memories])
    mapping = FusedMapping(1, 1, 2, 1, Overlap.REUSE, Direction.COLS, (False, True), (4,), (ONES, ONES), False)
    v = verify_fused(FusedGroup(tuple(layers)), big, mapping)
    _exact(v)
    assert v.peak_bytes == {"L2": 80 + 72 + 6 + 36 + 144}
    assert v.footprint_bytes == {"L2": 4 * 30 + 4 * 12 + (2 * 2 * 4 + 4 * 2 * 4) + 2 + (36 + 144)}


def test_the_searched_reuse_chunked_pair_verifies_from_the_cli() -> None:
    """The case that was refused: ``tileplan verify resnet18 --arch edge --group res2a_conv1+res2a_conv2``."""
    from typer.testing import CliRunner

    from tileplan.cli import app

    result = CliRunner().invoke(app, ["verify", "resnet18", "--arch", "edge", "--group", "res2a_conv1+res2a_conv2"])
    assert result.exit_code == 0, result.output
    assert "bit-exact" in result.output and "equal the model" in result.output


# ------------------------------------------------------------------ property: search space -> program
GROUPS = [
    ("vgg16", ["conv1_1", "conv1_2"], 8, 16),
    ("vgg16", ["conv1_1", "conv1_2", "pool1"], 8, 16),
    ("resnet50", ["res2a_conv1", "res2a_conv2", "res2a_conv3"], 7, 16),
    ("mobilenetv2", ["block1_expand", "block1_dw", "block1_project"], 7, 8),
    ("resnet18", ["res2a_conv1", "res2a_conv2"], 7, 16),
    ("resnet50", ["conv1", "pool1"], 13, 8),
]
MERGE_GROUPS = [("resnet18", ["res2a_conv2", "res2a_add"], 6, 16)]


def _space(group: FusedGroup) -> list[tuple[int, Overlap, tuple[int, ...], int, bool, tuple[bool, ...]]]:
    """Every discrete choice ``search_group`` visits (its loops and skips, written out again)."""
    nl = len(group)
    has_w = [x.has_weights for x in group.layers]
    residencies = [r for r in product((True, False), repeat=nl) if all(h or k for h, k in zip(has_w, r, strict=True))]
    out = []
    for tile_n, overlap in product(range(1, group.last.n + 1), (Overlap.RECOMPUTE, Overlap.REUSE)):
        for chunk in chunk_options(group):
            for tile_k, outer in product(tile_k_options(group, chunk), (False, True)):
                if outer and (nl != 2 or chunk[0] >= group.layers[0].k_out or tile_k < group.last.k_out):
                    continue
                out.extend((tile_n, overlap, chunk, tile_k, outer, r) for r in residencies
                           if not (outer and any(x and h for x, h in zip(r, has_w, strict=True))))
    return out


def _random_mappings(group: FusedGroup, rng: np.random.Generator, count: int) -> list[FusedMapping]:
    space = _space(group)
    last = group.last
    out = []
    for idx in rng.choice(len(space), size=min(count, len(space)), replace=False):
        tile_n, overlap, chunk, tile_k, outer, resident = space[int(idx)]
        out.append(FusedMapping(tile_n, int(rng.integers(1, last.p + 1)), int(rng.integers(1, last.q + 1)), tile_k,
                                overlap, Direction.COLS if rng.random() < 0.5 else Direction.ROWS, resident, chunk,
                                (ONES,) * len(group), outer))
    return out


def _check_space(groups: list[FusedGroup], per_group: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    arch = replace(api.load_arch("eyeriss"), double_buffering=False)
    big = replace(arch, memories=[replace(m, size_bytes=1 << 24) for m in arch.memories])
    checked = 0
    for group in groups:
        for mapping in _random_mappings(group, rng, per_group):
            _exact(verify_fused(group, big, mapping, seed=checked))
            checked += 1
        for objective in ("latency", "dram"):
            found = search_group(group, arch, objective)
            if found is not None:
                _exact(verify_fused(group, arch, found.mapping, seed=checked))
                checked += 1
    return checked


def _groups(specs: list[tuple[str, list[str], int, int]], merge: bool = False) -> list[FusedGroup]:
    if merge:
        return [shrink_group(*s) for s in specs]
    return [FusedGroup(tuple(shrink(*s))) for s in specs]


def test_every_mapping_the_fused_search_can_return_counts_what_the_model_predicts() -> None:
    """Random points of the search's own space (every overlap, chunk placement, tile_k, residency,
    direction) on small zoo groups, plus each group's searched optimum: each has a program whose
    counted bytes and bursts equal the model, bit-exact and within the model's footprint."""
    assert _check_space(_groups(GROUPS[:4]) + _groups(MERGE_GROUPS, merge=True), 6, 24) >= 30


@pytest.mark.slow
def test_every_mapping_the_fused_search_can_return_counts_what_the_model_predicts_more() -> None:
    assert _check_space(_groups(GROUPS) + _groups(MERGE_GROUPS, merge=True), 40, 7) >= 200


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: `cc` is not on PATH")
@pytest.mark.parametrize("outer", [False, True])
def test_reuse_with_a_chunked_map_in_c(outer: bool, tmp_path: Path) -> None:
    """The C backend runs the same program (its DROP spares the pixels a KEEP marked): bit-exact,
    and it prints the model's bytes, bursts and MACs."""
    from test_fusion_cgen import _check

    layers = shrink("resnet50", ["res2a_conv1", "res2a_conv2"], 9, 16)
    mapping = fused(layers, 3, 4, chunk=(2,), resident=(False, False), overlap=Overlap.REUSE)
    _check(FusedGroup(tuple(layers)), replace(mapping, chunk_outer=outer), tmp_path)
