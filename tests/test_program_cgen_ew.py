"""The C backend on the element-wise and row-wise kinds (softmax, layernorm, rmsnorm, gelu, silu, mul,
rope, add / mul with a broadcast row): the compiled program's output equals plain numpy written here
(float kinds within a relative 1e-9, integer kinds exact) and the DRAM bytes and bursts it prints equal
the model's, on two shapes, an 80-byte buffer (several tiles per core) and 2 cores; the CUDA backend's
programs likewise through its CPU emulation (as C99 and as C++); `verify --backend c`. Each compile
costs about half a second: the default run takes every kind once per backend, the shapes and the
compilers alternating over the kinds; the ``slow`` run every pair."""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import toy_arch

from tileplan.api import plan_layer
from tileplan.dims import Dim
from tileplan.program import ProgramError, emit_c, emit_cuda, execute, generate_program, verify_layer
from tileplan.program.cgen import operand_format
from tileplan.program.cverify import parse_report
from tileplan.program.irtext import emit_ir, parse_ir
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.transformer import elementwise

CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler: `cc` is not on PATH")
FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1"]

SHAPES = [(8, 6, 1), (12, 5, 2)]  # (channels, token rows, batch)
KINDS: dict[str, dict[str, object]] = {
    "softmax": {"row_channels": 4}, "layernorm": {}, "rmsnorm": {}, "gelu": {}, "silu": {},
    "mul": {"input_count": 2}, "mul_broadcast": {"broadcast": True},
    "add_broadcast": {"broadcast": True, "input_count": 1}, "rope": {"row_channels": 4},
}
INTEGER = {"mul", "mul_broadcast", "add_broadcast"}


def _compile(source: str, tmp: Path, libm: bool) -> Path:
    (tmp / "plan.c").write_text(source)
    exe = tmp / "plan"
    done = subprocess.run([str(CC), *FLAGS, "-o", str(exe), str(tmp / "plan.c"), *(["-lm"] if libm else [])],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:4000]
    return exe


def _layer(kind: str, shape: tuple[int, int, int]) -> Layer:
    channels, rows, batch = shape
    return elementwise(kind, kind.split("_")[0], channels=channels, rows=rows, batch=batch,
                       **KINDS[kind]).with_precision(Precision.uniform(2))  # type: ignore[arg-type]


def _two_core_mapping(layer: Layer) -> tuple[object, object]:
    """The planned mapping on an 80-byte buffer, its token rows P split over 2 cores when the planner
    used one (P tiles at most half of P, so each core walks its own tiles)."""
    arch = toy_arch(unified=80, burst=8, cores=2)
    mapping = plan_layer(layer, arch).mapping
    assert mapping is not None
    if math.prod(mapping.core_split) == 1:
        split, tiles = list(mapping.core_split), list(mapping.tiles)
        split[Dim.P] = 2
        tiles[Dim.P] = min(tiles[Dim.P], -(-layer.h // 2))
        mapping = replace(mapping, core_split=tuple(split), tiles=tuple(tiles))
    return arch, mapping


def _numpy(kind: str, xs: list[np.ndarray], w: np.ndarray | None) -> np.ndarray:
    """Each kind on (batch, channels, tokens, 1) arrays, one token vector at a time (channels last)."""
    t = [np.moveaxis(x[..., 0], 1, -1) for x in xs]  # (batch, tokens, channels)
    x, scale = t[0], None if w is None else w.ravel()
    if kind == "softmax":  # heads of 4 keys
        z = x.reshape(*x.shape[:-1], -1, 4)
        z = np.exp(z - z.max(-1, keepdims=True))
        y = (z / z.sum(-1, keepdims=True)).reshape(x.shape)
    elif kind in ("layernorm", "rmsnorm"):
        mu = x.mean(-1, keepdims=True) if kind == "layernorm" else 0.0
        y = (x - mu) / np.sqrt(np.mean((x - mu) ** 2, -1, keepdims=True) + 1e-5) * scale
    elif kind == "gelu":
        y = np.vectorize(lambda v: v * (1 + math.erf(v / math.sqrt(2))) / 2)(x)
    elif kind == "silu":
        y = x * (1 / (1 + np.exp(-x)))
    elif kind == "mul":
        y = t[0] * t[1]
    elif kind == "mul_broadcast":
        y = x * scale
    elif kind == "add_broadcast":
        y = x + scale
    else:  # rope: pairs (2i, 2i+1) of 4-channel heads turned by token * 10000^(-2i/4)
        pos = np.arange(x.shape[1])[None, :, None]
        theta = pos * 10000.0 ** (-(np.arange(x.shape[2]) % 4 // 2 * 2) / 4)
        even, odd = x[..., 0::2], x[..., 1::2]
        c, s = np.cos(theta[..., 0::2]), np.sin(theta[..., 0::2])
        y = np.empty_like(x)
        y[..., 0::2], y[..., 1::2] = even * c - odd * s, even * s + odd * c
    return np.moveaxis(y, -1, 1)[..., None]


def _operands(kind: str, layer: Layer, rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray | None]:
    shape = (layer.n, layer.c_in, layer.h, layer.w)
    if kind in INTEGER:
        xs = [rng.integers(-1000, 1000, size=shape) for _ in range(layer.input_count)]
        return xs, rng.integers(-1000, 1000, size=(layer.c_in, 1, 1, 1)) if layer.b_activation else None
    return [3 * rng.standard_normal(shape)], rng.standard_normal((layer.c_in, 1, 1, 1)) if "norm" in kind else None


def _check_binary(exe: Path, kind: str, layer: Layer, arch: object, mapping: object, tmp: Path) -> None:
    """Run a compiled program on fresh operands: its output equals numpy written here (float kinds within a
    relative 1e-9) and the bytes and bursts it prints equal the model's."""
    program = generate_program(layer, arch, mapping)  # type: ignore[arg-type]
    xs, w = _operands(kind, layer, np.random.default_rng(7))
    fmt_in, fmt_out = operand_format(program)
    assert (fmt_in, fmt_out) == (("<i4", "<i8") if kind in INTEGER else ("<f8", "<f8"))
    args = []
    for i, x in enumerate(xs + ([w] if w is not None else [])):
        x.astype(fmt_in).tofile(tmp / f"operand{i}.bin")
        args.append(str(tmp / f"operand{i}.bin"))
    done = subprocess.run([str(exe), *args, str(tmp / "out.bin")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    want = _numpy(kind, xs, w)
    got = np.fromfile(tmp / "out.bin", dtype=fmt_out).reshape(want.shape)
    if kind in INTEGER:
        assert np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert np.max(np.abs(got - execute(program, xs, w).output)) < 1e-12  # the executor, to rounding
    read, written, bursts, _ = parse_report(done.stdout)
    model = verify_layer(layer, arch, mapping, seed=1)  # type: ignore[arg-type]
    assert model.ok, model.mismatches()
    assert (read, written) == (model.predicted_read_bytes, model.predicted_write_bytes), done.stdout
    assert bursts == model.predicted_bursts, done.stdout
    every = layer.n * layer.c_in * layer.h * 2  # bytes of one tensor
    assert read[0] >= layer.input_count * every and written >= every  # all read, all written


def _alternate(options: list[object], ids: list[str]) -> list[object]:
    """(kind, option) for every kind and option: the default run takes one option per kind, the options
    alternating over the kinds (so each kind and each option runs); the other pairs are ``slow``."""
    return [pytest.param(kind, opt, id=f"{i}-{kind}", marks=() if k % len(options) == j else pytest.mark.slow)
            for k, kind in enumerate(KINDS) for j, (opt, i) in enumerate(zip(options, ids, strict=True))]


@pytest.mark.parametrize(("kind", "shape"), _alternate(SHAPES, ["8x6", "12x5x2"]))
def test_c_program_computes_the_kind_and_moves_the_model_bytes(kind: str, shape: tuple[int, int, int],
                                                               tmp_path: Path) -> None:
    layer = _layer(kind, shape)
    arch, mapping = _two_core_mapping(layer)
    program = generate_program(layer, arch, mapping)  # type: ignore[arg-type]
    assert len(program.streams) == 2
    assert all(sum(ins.__class__.__name__ == "Ew" for ins in s.instructions) >= 2 for s in program.streams)
    exe = _compile(emit_c(program), tmp_path, libm=kind not in INTEGER)  # integer kinds need no libm
    _check_binary(exe, kind, layer, arch, mapping, tmp_path)


@pytest.mark.parametrize(("kind", "compiler"),
                         _alternate([["-std=c99", "-x", "c"], ["-std=c++11", "-x", "c++"]], ["c99", "c++"]))
def test_emulated_cuda_program_computes_the_kind(kind: str, compiler: list[str], tmp_path: Path) -> None:
    """The CUDA backend's EW kernel (one thread per token and row / pair / channel), run on the CPU."""
    cxx = CC if compiler[-1] == "c" else shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler: `c++` is not on PATH")
    layer = _layer(kind, SHAPES[1])
    arch, mapping = _two_core_mapping(layer)
    source = emit_cuda(generate_program(layer, arch, mapping))  # type: ignore[arg-type]
    assert "__global__ void ew_kernel" in source and "LAUNCH(ew_kernel" in source
    (tmp_path / "plan.cu").write_text(source)
    exe = tmp_path / "plan"
    done = subprocess.run([cxx, *compiler, "-DTILEPLAN_CUDA_EMULATE", *FLAGS[1:], "-o", str(exe),
                           str(tmp_path / "plan.cu"), "-lm"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:4000]
    _check_binary(exe, kind, layer, arch, mapping, tmp_path)


def test_float_program_documents_its_cells_and_an_integer_one_needs_no_libm() -> None:
    layer = _layer("softmax", SHAPES[0])
    arch, mapping = _two_core_mapping(layer)
    source = emit_c(generate_program(layer, arch, mapping))  # type: ignore[arg-type]
    assert "raw little-endian float64 (IEEE double)" in source and "bit pattern" in source
    assert "#include <math.h>" in source and "-lm" in source
    assert "ew_softmax(4, " in source and "ew_gelu" not in source  # only the helpers the program calls
    mul = _layer("mul", SHAPES[0])
    arch, mapping = _two_core_mapping(mul)
    source = emit_c(generate_program(mul, arch, mapping))  # type: ignore[arg-type]
    assert "math.h" not in source and "raw little-endian int32" in source and "ew_combine(OP_MUL" in source


def test_a_hand_edited_split_row_is_refused_with_its_line() -> None:
    """An IR file whose softmax row (3 channels) does not divide the region's channels: the C emitter
    names the line, as the executor does."""
    layer = _layer("softmax", SHAPES[0])
    arch, mapping = _two_core_mapping(layer)
    text = emit_ir(generate_program(layer, arch, mapping))  # type: ignore[arg-type]
    edited = parse_ir(text.replace(" softmax/4 ", " softmax/3 "))
    line = next(i + 1 for i, s in enumerate(text.splitlines()) if " softmax/4 " in s)
    with pytest.raises(ProgramError, match=f"line {line}: .*split softmax rows of 3 channels"):
        emit_c(edited)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_compiles_an_element_wise_program(tmp_path: Path) -> None:
    """The device side (doubles through __longlong_as_double, the math library's device functions)
    compiles with nvcc; the tests run it through the emulation path above."""
    layer = _layer("layernorm", SHAPES[1])
    arch, mapping = _two_core_mapping(layer)
    (tmp_path / "plan.cu").write_text(emit_cuda(generate_program(layer, arch, mapping)))  # type: ignore[arg-type]
    done = subprocess.run([str(shutil.which("nvcc")), "-O2", "-o", str(tmp_path / "plan"), str(tmp_path / "plan.cu")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[:4000]


def test_verify_command_with_the_c_backend_checks_every_distinct_layer() -> None:
    """`tileplan verify bert-base --backend c`: every distinct layer's C program (layernorm, softmax,
    gelu, broadcast adds and the matmuls) prints the model's bytes and bursts and the reference output."""
    from typer.testing import CliRunner

    from tileplan import api
    from tileplan.cli import app

    result = CliRunner().invoke(app, ["verify", "bert-base", "--seq", "2", "--arch", "eyeriss", "--backend", "c"],
                                terminal_width=250)
    assert result.exit_code == 0, result.output
    net = api.load_network("bert-base", seq=2)
    plan = api.plan(net, api.load_arch("eyeriss"))
    distinct = [lp for lp in plan.layers if lp.mapping is not None and lp.cached_from is None]
    assert {"softmax", "layernorm", "gelu"} <= {net[lp.name].op.value for lp in distinct}
    assert "(C programs)" in result.output
    assert f"{len(distinct)} of {len(distinct)} distinct layers verified" in result.output
    assert result.output.count(" OK ") == len(distinct) and "FAIL" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["--backend", "cuda"], "unknown --backend 'cuda'; choose numpy or c"),
    (["--backend", "c", "--group", "layer.0.attn.qk+layer.0.attn.softmax+layer.0.attn.pv", "--seed", "1"],
     "makes its own deterministic operands: drop --seed with --backend c"),
])
def test_verify_backend_bad_input_is_one_line(args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from tileplan.cli import app

    result = CliRunner().invoke(app, ["verify", "bert-base", "--seq", "2", "--arch", "eyeriss", *args],
                                terminal_width=250)
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_verify_c_without_a_compiler_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from tileplan.cli import app

    monkeypatch.setenv("PATH", "")
    result = CliRunner().invoke(app, ["verify", "lenet5", "--arch", "eyeriss", "--backend", "c"],
                                terminal_width=250)
    assert result.exit_code != 0 and "`cc` is not on PATH" in result.output, result.output


def test_emit_writes_a_transformer_layer_as_c(tmp_path: Path) -> None:
    """`tileplan emit bert-base --layer layer.0.attn.softmax --target c` writes a program that compiles
    warning-free, documents its float64 files, and computes the softmax of its rows."""
    from typer.testing import CliRunner

    from tileplan.cli import app

    out = tmp_path / "softmax.c"
    result = CliRunner().invoke(app, ["emit", "bert-base", "--seq", "2", "--arch", "eyeriss", "--layer",
                                      "layer.0.attn.softmax", "--target", "c", "--output", str(out)])
    assert result.exit_code == 0, result.output
    source = out.read_text()
    assert "raw little-endian float64" in source and "ew_softmax(2, " in source  # rows of 2 keys at seq 2
    exe = _compile(source, tmp_path, libm=True)
    x = np.random.default_rng(3).standard_normal((1, 12 * 2, 2, 1))  # 12 heads x 2 keys, 2 query rows
    x.astype("<f8").tofile(tmp_path / "x.bin")
    done = subprocess.run([str(exe), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    y = np.fromfile(tmp_path / "y.bin", dtype="<f8").reshape(12, 2, 2)  # head, key, query row
    e = np.exp(x.reshape(12, 2, 2))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-9)
