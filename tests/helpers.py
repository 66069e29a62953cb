"""Small builders shared by tests: synthetic accelerators and mappings."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tileplan.arch import from_dict
from tileplan.arch.spec import Arch
from tileplan.cost.problem import Problem
from tileplan.program import execute, reference_output
from tileplan.program.ir import Program
from tileplan.program.verify import random_operands
from tileplan.workload.layer import Layer, OpKind, Precision


def toy_arch(*, burst: int = 16, sizes: tuple[int, int, int] = (1 << 20, 1 << 20, 1 << 20),
             unified: int | None = None, axes: list[dict] | None = None, clusters: int = 1, cores: int = 1,
             overlap: bool = False, double_buffering: bool = False, precision: int = 1,
             multicast: bool = True) -> Arch:
    """A single-core accelerator with generous memories unless told otherwise."""
    if unified is not None:
        memories = [{"name": "glb", "operands": ["input", "weight", "output"], "size_bytes": unified}]
    else:
        memories = [{"name": f"m{i}", "operands": [op], "size_bytes": s}
                    for i, (op, s) in enumerate(zip(("input", "weight", "output"), sizes, strict=True))]
    return from_dict({
        "name": "toy", "clock_hz": 1e9, "precision_bytes": precision, "overlap": overlap,
        "double_buffering": double_buffering,
        "dram": {"bandwidth_bytes_per_s": 8e9, "burst_bytes": burst, "burst_latency_ns": 10,
                 "energy_pj_per_byte": 100},
        "memories": memories,
        "cores": {"clusters": clusters, "cores_per_cluster": cores, "multicast": multicast},
        "pe_array": {"axes": axes or []},
        "energy": {"mac_pj": 1.0},
    })


def check_program_binary(exe: Path, layer: Layer, program: Program, tmp: Path, seed: int = 0) -> None:
    """Run a compiled program (C or emulated CUDA) on random operands: its output equals the direct
    reference (float kinds: within a relative 1e-9) and the bytes, bursts and aligned blocks it prints
    equal the executor's."""
    from tileplan.program.cgen import operand_format
    from tileplan.program.cverify import parse_report
    from tileplan.program.verify import outputs_match

    inputs, weight = random_operands(layer, np.random.default_rng(seed), -100, 100)
    args = []
    fmt_in, fmt_out = operand_format(program)
    for i, x in enumerate(inputs + ([weight] if weight is not None else [])):
        path = tmp / f"operand{i}.bin"
        x.astype(fmt_in).tofile(path)
        args.append(str(path))
    out_path = tmp / "output.bin"
    done = subprocess.run([str(exe), *args, str(out_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = reference_output(layer, inputs, weight)
    got = np.fromfile(out_path, dtype=fmt_out).reshape(expected.shape)
    assert outputs_match(layer, got, expected), np.max(np.abs(got - expected))
    counted = execute(program, inputs, weight)
    read, written, bursts, blocks = parse_report(done.stdout)
    assert (read, written) == (counted.read_bytes, counted.write_bytes), done.stdout
    assert (bursts, blocks) == (counted.bursts, counted.aligned_bursts), done.stdout


def shrink(layer: Layer) -> Layer:
    """``layer`` at a size the executor runs in milliseconds: kind, kernel, stride, padding, dilation and
    groups kept; channels capped at 48 (FC inputs at 64) and maps at 9 x 9."""
    rows = max(layer.dilation[0] * (layer.r - 1) + 1 - layer.pad[0] - layer.pad[1], 1)
    cols = max(layer.dilation[1] * (layer.s - 1) + 1 - layer.pad[2] - layer.pad[3], 1)
    h = min(layer.h, max(rows + 2 * layer.stride[0], 9)) if layer.op is not OpKind.GLOBALPOOL else min(layer.h, 5)
    w = min(layer.w, max(cols + 2 * layer.stride[1], 9)) if layer.op is not OpKind.GLOBALPOOL else min(layer.w, 5)
    r, s = (h, w) if layer.op is OpKind.GLOBALPOOL else (layer.r, layer.s)
    if layer.op.channelwise:
        ch = min(layer.c_in, 48)
        return replace(layer, c_in=ch, k_out=ch, groups=ch, h=h, w=w, r=r, s=s, inputs=())
    g = layer.groups
    c_in = g * min(layer.c_in // g, max(48 // g, 1))
    k_out = g * min(layer.k_out // g, max(48 // g, 1))
    if layer.op is OpKind.FC:
        return replace(layer, c_in=min(layer.c_in, 64), k_out=min(layer.k_out, 48), inputs=())
    return replace(layer, c_in=c_in, k_out=k_out, h=h, w=w, r=r, s=s, inputs=())


def quick_experiment(name: str, out: Path) -> tuple[Path, str, Any]:
    """``tileplan experiment NAME --quick --jobs 1 -o OUT`` in this process: its folder, its printed output
    and the ``ExperimentResult`` it wrote (captured as written, so tests assert on this run's tables)."""
    import pytest
    from typer.testing import CliRunner

    from tileplan.cli import app
    from tileplan.experiments import common

    written: list[Any] = []
    real = common.write_result

    def keep(result: Any, out_dir: Path) -> Any:
        written.append(result)
        return real(result, out_dir)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common, "write_result", keep)
        result = CliRunner().invoke(app, ["experiment", name, "--quick", "--jobs", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(written) == 1
    return out, result.output, written[0]


def quick_run_fixture(name: str) -> Any:
    """A module-scoped fixture: ``tileplan experiment NAME --quick`` run once for the module (its folder,
    its output and the result it wrote; the module's tests assert on this run's tables)."""
    import pytest

    @pytest.fixture(scope="module")
    def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Any]:
        return quick_experiment(name, tmp_path_factory.mktemp(f"{name}_quick"))

    return quick_run


@st.composite
def small_problem(draw: st.DrawFn, *, precisions: st.SearchStrategy[Precision], flag: str) -> Problem:
    """Small layers (1-4 channels, up to 6x6, 1x1 to 3x3 kernels, stride 1-2) on toy machines with
    three small buffers (16-200 B), one flattened PE axis or two unrolled ones, 1-2 clusters x 1-2
    cores, a drawn burst size and the boolean ``toy_arch`` option ``flag`` drawn too."""
    r = draw(st.integers(1, 3))
    layer = Layer.conv("r", c_in=draw(st.integers(1, 4)), h=draw(st.integers(r, 6)), w=draw(st.integers(r, 6)),
                       k_out=draw(st.integers(1, 4)), r=r, pad=draw(st.integers(0, 1)),
                       stride=draw(st.integers(1, 2)), precision=draw(precisions))
    if draw(st.booleans()):
        axes = [{"name": "v", "size": draw(st.integers(2, 5)), "dims": ["P", "Q", "R", "S"], "mode": "flattened"}]
    else:
        axes = [{"name": "x", "size": draw(st.integers(2, 4)), "dims": ["K", "P", "C"], "max_dims": 1},
                {"name": "y", "size": draw(st.integers(2, 3)), "dims": ["Q", "S", "K"], "max_dims": 2}]
    arch = toy_arch(sizes=(draw(st.integers(16, 200)), draw(st.integers(8, 100)), draw(st.integers(16, 200))),
                    burst=draw(st.sampled_from([4, 8, 16])), clusters=draw(st.integers(1, 2)),
                    cores=draw(st.integers(1, 2)), axes=axes, **{flag: draw(st.booleans())})
    return Problem(layer, arch)
