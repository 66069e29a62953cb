"""The CUDA backend (e-PlaNNer ch. 7.2): generated ``.cu`` programs compute the reference output and
move the bytes the executor counted -- run on the CPU through the emulation path (compiled as C99
and as C++), compiled with ``nvcc`` when one is installed and run when a GPU is present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import check_program_binary, toy_arch
from typer.testing import CliRunner

from tileplan.arch import load
from tileplan.dims import DIMS, Dim
from tileplan.mapping import Mapping
from tileplan.program import generate_program
from tileplan.program.cudagen import emit_cuda, thread_block
from tileplan.workload.layer import Layer, Precision

CC, CXX, NVCC = shutil.which("cc"), shutil.which("c++"), shutil.which("nvcc")
EMULATE = ["-DTILEPLAN_CUDA_EMULATE", "-Wall", "-Wextra", "-Werror", "-O1"]
COMPILERS = [pytest.param([CC, "-std=c99", "-x", "c"], id="c99",
                          marks=pytest.mark.skipif(CC is None, reason="no C compiler: `cc` is not on PATH")),
             pytest.param([CXX, "-std=c++11", "-x", "c++"], id="c++",
                          marks=pytest.mark.skipif(CXX is None, reason="no C++ compiler: `c++` is not on PATH"))]

CONV = Layer.conv("conv", c_in=12, h=7, w=6, k_out=10, r=3, stride=1)  # pad 1
CONV_MAP = Mapping(tiles=(1, 1, 4, 5, 3, 6, 3, 3), order=(Dim.N, Dim.G, Dim.K, Dim.P, Dim.C, Dim.Q, Dim.R, Dim.S),
                   spatial=(((Dim.C, 4),), ((Dim.K, 2),)))  # C tiled: partial sums leave and come back


def _build(source: str, compiler: list[str | None], tmp: Path) -> Path:
    (tmp / "plan.cu").write_text(source)
    exe = tmp / "plan"
    cmd = [str(c) for c in compiler] + EMULATE + ["-o", str(exe), str(tmp / "plan.cu")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:4000]
    return exe


CASES = ["conv", "maxpool", "avgpool", "add", "multicore"]


# every case with one compiler by default, C99 and C++ alternating over the cases; the other pairs slow
@pytest.mark.parametrize(("case", "compiler"), [
    pytest.param(case, comp.values[0], id=f"{case}-{comp.id}",
                 marks=[*comp.marks, *([] if i % 2 == j else [pytest.mark.slow])])
    for i, case in enumerate(CASES) for j, comp in enumerate(COMPILERS)])
def test_emulated_cuda_is_bit_exact(case: str, compiler: list[str | None], tmp_path: Path) -> None:
    arch = toy_arch(burst=16, sizes=(4096, 4096, 4096), precision=2)
    mapping = CONV_MAP
    layer = CONV
    if case == "maxpool":
        layer = Layer.pool("mp", kind="max", channels=3, h=9, w=8, r=3, stride=2, pad=1)
        mapping = Mapping(tiles=(1, 2, 1, 1, 2, 4, 3, 3), order=tuple(DIMS))
    elif case == "avgpool":
        layer = Layer.pool("ap", kind="avg", channels=3, h=8, w=7, r=3, stride=2, pad=1)
        mapping = Mapping(tiles=(1, 2, 1, 1, 2, 4, 3, 3), order=tuple(DIMS))
    elif case == "add":
        layer = Layer.add("add", channels=4, h=5, w=6, input_count=3)
        mapping = Mapping(tiles=(1, 3, 1, 1, 2, 6, 1, 1), order=tuple(DIMS))
    elif case == "multicore":
        arch = load("nmp")
        layer = Layer.conv("dw", c_in=16, h=9, w=9, k_out=16, r=3, stride=2, groups=16)
        mapping = Mapping(tiles=(1, 2, 1, 1, 3, 5, 3, 3), order=tuple(DIMS), cluster_split=(1, 2, 1, 1, 2, 1, 1, 1),
                          core_split=(1, 2, 1, 1, 1, 2, 1, 1))
    layer = layer.with_precision(Precision.uniform(arch.precision_bytes))
    program = generate_program(layer, arch, mapping)
    source = emit_cuda(program, threads=thread_block(mapping))
    check_program_binary(_build(source, compiler, tmp_path), layer, program, tmp_path)


def test_cuda_source_maps_the_plan() -> None:
    """LOAD/STORE are cudaMemcpy, the on-chip memories device buffers of the arch's sizes, and the
    CONV kernel's thread block the mapping's C x K unrolling."""
    layer = CONV.with_precision(Precision.uniform(2))
    program = generate_program(layer, toy_arch(sizes=(4096, 4096, 4096), precision=2), CONV_MAP)
    source = emit_cuda(program, threads=thread_block(CONV_MAP))
    assert thread_block(CONV_MAP) == (4, 2)
    assert "enum { BX = 4, BY = 2" in source and "__global__ void conv_kernel" in source
    assert "cudaMalloc((void **)&mem_m0[core], 4096 * sizeof(int64_t))" in source
    assert source.count("cudaMemcpyHostToDevice), line);") >= 1 and "LAUNCH(conv_kernel" in source
    loads = sum(1 for line in source.splitlines() if line.strip().startswith("load(mem_"))
    assert loads == sum(1 for s in program.streams for i in s.instructions if type(i).__name__ == "Load")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (pip install nvidia-cuda-nvcc-cu12 provides it)")
def test_nvcc_compiles_and_runs_when_a_gpu_is_present(tmp_path: Path) -> None:
    layer = CONV.with_precision(Precision.uniform(2))
    arch = toy_arch(burst=16, sizes=(4096, 4096, 4096), precision=2)
    program = generate_program(layer, arch, CONV_MAP)
    (tmp_path / "plan.cu").write_text(emit_cuda(program, threads=thread_block(CONV_MAP)))
    exe = tmp_path / "plan"
    done = subprocess.run([str(NVCC), "-O2", "-o", str(exe), str(tmp_path / "plan.cu")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:4000]
    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi"], capture_output=True).returncode != 0:
        pytest.skip("compiled with nvcc; no GPU to run it on")
    check_program_binary(exe, layer, program, tmp_path)


@pytest.mark.skipif(CC is None, reason="no C compiler: `cc` is not on PATH")
def test_cli_emits_a_cuda_program(tmp_path: Path) -> None:
    from tileplan.cli import app

    out = tmp_path / "conv1.cu"
    result = CliRunner().invoke(app, ["emit", "lenet5", "--arch", "eplanner-a", "--layer", "conv1", "--target",
                                      "cuda", "--strategy", "eplanner", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "__global__ void conv_kernel" in out.read_text()
    bad = CliRunner().invoke(app, ["emit", "lenet5", "--target", "opencl", "--output", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "unknown target 'opencl'" in bad.output
