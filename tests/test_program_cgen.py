"""The C backend: generated programs compile warning-free as C99 and compute the reference output,
moving the bytes the executor counted."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import check_program_binary, toy_arch

from tileplan.arch import load
from tileplan.arch.spec import Arch
from tileplan.dims import DIMS, Dim
from tileplan.mapping import Mapping
from tileplan.program import ProgramError, emit_c, generate_program
from tileplan.program.verify import random_operands
from tileplan.workload.layer import Layer, Precision

CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler: `cc` is not on PATH")
FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1"]


def _compile(source: str, tmp: Path) -> Path:
    (tmp / "plan.c").write_text(source)
    exe = tmp / "plan"
    done = subprocess.run([str(CC), *FLAGS, "-o", str(exe), str(tmp / "plan.c")], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[:4000]
    return exe


def _run_c(layer: Layer, arch: Arch, mapping: Mapping, tmp: Path, seed: int = 0) -> None:
    """Compile and run the C program; compare its output and printed byte counts."""
    layer = layer.with_precision(Precision.uniform(arch.precision_bytes))
    program = generate_program(layer, arch, mapping)
    check_program_binary(_compile(emit_c(program), tmp), layer, program, tmp, seed)


def test_vgg16_conv3_1_at_14x14(tmp_path: Path) -> None:
    layer = Layer.conv("vgg16.conv3_1", c_in=128, h=14, w=14, k_out=256, r=3)  # pad 1
    arch = toy_arch(burst=64, sizes=(32768, 32768, 32768), precision=2)
    order = (Dim.N, Dim.G, Dim.K, Dim.C, Dim.P, Dim.Q, Dim.R, Dim.S)
    mapping = Mapping(tiles=(1, 1, 32, 32, 7, 14, 3, 3), order=order, layouts=("NHWC", "KRSC", "NPQK"))
    _run_c(layer, arch, mapping, tmp_path)


@pytest.mark.parametrize("case", ["depthwise-nmp", "maxpool", "avgpool", "add3", "grouped-dilated"])
def test_other_ops_and_multicore(case: str, tmp_path: Path) -> None:
    nmp = load("nmp")
    small = toy_arch(burst=16, double_buffering=True)
    order = tuple(DIMS)
    if case == "depthwise-nmp":
        layer = Layer.conv("dw", c_in=16, h=9, w=9, k_out=16, r=3, stride=2, groups=16)
        mapping = Mapping(tiles=(1, 2, 1, 1, 3, 5, 3, 3), order=order, cluster_split=(1, 2, 1, 1, 2, 1, 1, 1),
                          core_split=(1, 2, 1, 1, 1, 2, 1, 1))
        _run_c(layer, nmp, mapping, tmp_path)
        return
    if case == "maxpool":
        layer = Layer.pool("mp", kind="max", channels=3, h=9, w=8, r=3, stride=2, pad=1)
    elif case == "avgpool":
        layer = Layer.pool("ap", kind="avg", channels=3, h=8, w=7, r=3, stride=2, pad=1)  # floor of negatives
    elif case == "add3":
        layer = Layer.add("add", channels=4, h=5, w=6, input_count=3)
    else:
        # 4 x 4 outputs: G, K, Q (4 = 3 + 1) and R tiles with remainders; a larger map only lengthens the
        # straight-line program (9 x 9: 2,100 instructions, 6 s of cc -O1)
        layer = Layer.conv("gd", c_in=6, h=5, w=6, k_out=9, r=3, groups=3, dilation=2, pad=(2, 1, 0, 2))
    mapping = Mapping(tiles=(1, 2, 2, 1, 2, 3, 2, 1),
                      order=(Dim.R, Dim.P, Dim.K, Dim.C, Dim.S, Dim.N, Dim.G, Dim.Q),
                      hoist=(frozenset({Dim.Q}), frozenset(), frozenset({Dim.P})),
                      layouts=("CWHN", "SRCK", "QKNP"))
    _run_c(layer, small, mapping, tmp_path)


def test_c_program_stops_at_an_overflowing_load(tmp_path: Path) -> None:
    layer = Layer.conv("big", c_in=16, h=20, w=20, k_out=8, r=3, pad=1)
    mapping = Mapping(tiles=(1, 1, 8, 16, 20, 20, 3, 3), order=tuple(DIMS))
    program = generate_program(layer, load("nmp"), mapping)
    exe = _compile(emit_c(program), tmp_path)
    inputs, weight = random_operands(layer, np.random.default_rng(0))
    inputs[0].astype("<i4").tofile(tmp_path / "in.bin")
    assert weight is not None
    weight.astype("<i4").tofile(tmp_path / "w.bin")
    args = [str(tmp_path / name) for name in ("in.bin", "w.bin", "o.bin")]
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert re.match(r"line \d+: tile needs bytes 0:12800 but MB0 holds 8192 bytes", done.stderr), done.stderr


def test_concat_has_no_c_program() -> None:
    program = generate_program(Layer.concat("cat", channels=4, h=2, w=2), toy_arch(),
                               Mapping(tiles=(1,) * 8, order=tuple(DIMS)))
    with pytest.raises(ProgramError, match="moves no data"):
        emit_c(program)
