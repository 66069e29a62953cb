"""The C backend of fused programs: the generated C99 compiles warning-free, runs the fused program
bit-exactly against its own layer-by-layer reference, and prints the DRAM bytes, bursts and MACs the
fused model predicts (recompute, reuse, streamed weights, channel chunks, adds and concats)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_fusion_merge import shrink_group
from test_fusion_model import fused
from test_fusion_program import shrink
from typer.testing import CliRunner

from tileplan import api
from tileplan.fusion.cgen import emit_fused_c, parse_counts
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.program import generate_fused
from tileplan.fusion.verify import verify_fused

CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler: `cc` is not on PATH")
FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2"]  # -O2: gcc checks array bounds too


def _build(source: str, tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "fused.c").write_text(source)
    exe = tmp / "fused"
    done = subprocess.run([str(CC), *FLAGS, "-o", str(exe), str(tmp / "fused.c")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:4000]
    return exe


def _run(exe: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)


def _check(group: FusedGroup, mapping: FusedMapping, tmp: Path, arch: str = "eyeriss") -> dict[str, int]:
    a = api.load_arch(arch)
    v = verify_fused(group, a, mapping)
    assert v.ok, v
    done = _run(_build(emit_fused_c(generate_fused(group, a, mapping)), tmp))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bit-exact" in done.stdout
    got = parse_counts(done.stdout)
    assert (got["input"], got["weight"], got["output"]) == (*v.predicted_read_bytes[:2], v.predicted_write_bytes)
    assert (got["input_bursts"], got["weight_bursts"], got["output_bursts"]) == v.predicted_bursts
    assert got["macs"] == v.predicted_macs
    return got


@pytest.mark.parametrize("variant", ["recompute", "reuse", "reuse-cols-streamed", "alwani"])
def test_vgg_conv_conv_pool_in_c(variant: str, tmp_path: Path) -> None:
    layers = shrink("vgg16", ["conv1_1", "conv1_2", "pool1"], 12, 8)
    group = FusedGroup(tuple(layers))
    kw: dict = {}
    if variant == "reuse":
        kw = {"overlap": Overlap.REUSE}
    elif variant == "reuse-cols-streamed":
        kw = {"overlap": Overlap.REUSE, "direction": Direction.COLS, "resident": (False, True, True)}
    elif variant == "alwani":
        kw = {"overlap": Overlap.ALWANI, "tn": 1}
    got = _check(group, fused(layers, 3, 2, **kw), tmp_path)
    if variant == "recompute":  # recomputation reads overlapping input windows again: more than once
        assert got["input"] > 3 * 12 * 12


ADD_CONCAT = [
    ("resnet50", ["res2b_conv2", "res2b_conv3", "res2b_add"], 9, 16),
    ("densenet121", ["block1_layer6_conv2", "block1_concat", "transition1_conv"], 9, 8),
    ("mobilenetv2", ["block2_dw", "block2_project", "block2_add"], 9, 4),
]


# every group with one overlap by default, recompute and reuse alternating over the groups; the rest slow
@pytest.mark.parametrize(("overlap", "network", "names", "hw", "div"), [
    pytest.param(ov, *g, id=f"{ov.value}-{g[0]}", marks=() if i % 2 == j else pytest.mark.slow)
    for i, g in enumerate(ADD_CONCAT) for j, ov in enumerate([Overlap.RECOMPUTE, Overlap.REUSE])])
def test_adds_and_concats_in_c(network: str, names: list[str], hw: int, div: int, overlap: Overlap,
                               tmp_path: Path) -> None:
    group = shrink_group(network, names, hw, div)
    _check(group, fused(list(group.layers), 3, 2, overlap=overlap), tmp_path)


def test_channel_chunks_and_chunk_outer_in_c(tmp_path: Path) -> None:
    layers = shrink("mobilenetv2", ["block0_project", "block1_expand"], 7, 2)
    group = FusedGroup(tuple(layers))
    _check(group, fused(layers, 2, 3, chunk=(3,), resident=(False, False)), tmp_path / "a")
    outer = replace(fused(layers, 2, 3, chunk=(4,), resident=(False, False)), chunk_outer=True)
    _check(group, outer, tmp_path / "b")


def test_c_program_stops_when_data_is_not_on_chip(tmp_path: Path) -> None:
    group = shrink_group("resnet50", ["res2b_conv3", "res2b_add"], 6, 16)
    prog = generate_fused(group, api.load_arch("eyeriss"), fused(list(group.layers), 3, 6))
    broken = replace(prog, instructions=tuple(i for i in prog.instructions if i.op != "LOAD_SIDE"))
    done = _run(_build(emit_fused_c(broken), tmp_path))
    assert done.returncode == 3 and "not on chip" in done.stderr


def test_emit_group_target_c_cli(tmp_path: Path) -> None:
    from tileplan.cli import app

    target = tmp_path / "lenet.c"
    runner = CliRunner()
    result = runner.invoke(app, ["emit", "lenet5", "--arch", "eyeriss", "--group", "conv1+pool1", "--target", "c",
                                 "--output", str(target)])
    assert result.exit_code == 0, result.output
    done = _run(_build(target.read_text(), tmp_path))
    assert done.returncode == 0 and "bit-exact" in done.stdout
    group, res = api.plan_group("lenet5", "eyeriss", ["conv1", "pool1"])
    got = parse_counts(done.stdout)
    assert got["input"] == int(res.cost.dram_read_bytes[0, 0])
    assert got["output"] == int(res.cost.dram_write_bytes[0])
    assert got["input_bursts"] + got["weight_bursts"] + got["output_bursts"] == int(res.cost.dram_bursts[0].sum())
    bad = runner.invoke(app, ["emit", "lenet5", "--group", "conv1+pool1", "--target", "cuda", "--output",
                              str(tmp_path / "x.cu")])
    assert bad.exit_code != 0 and "C99 (--target c)" in bad.output and "Traceback" not in bad.output
