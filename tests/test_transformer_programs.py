"""Programs of the transformer element-wise and row-wise kinds (softmax, layernorm, rmsnorm, gelu, silu,
mul, rope, add / mul with a broadcast row): under the mapping the model plans, the executor counts
exactly the model's DRAM bytes and bursts, and its output equals plain numpy written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import toy_arch

from tileplan.api import plan_layer
from tileplan.dims import Operand
from tileplan.program import verify_layer
from tileplan.program.errors import ProgramError
from tileplan.program.executor import execute
from tileplan.program.generate import generate_program
from tileplan.program.irtext import emit_ir, parse_ir
from tileplan.program.runner import run_program
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.transformer import elementwise

#: Two shapes per kind: (channels, rows, batch, extra arguments).
SHAPES = [(8, 6, 1), (12, 5, 2)]
KINDS: dict[str, dict[str, object]] = {
    "softmax": {"row_channels": 4},  # 8 / 12 channels = 2 / 3 heads of 4 keys
    "layernorm": {}, "rmsnorm": {}, "gelu": {}, "silu": {},
    "mul": {"input_count": 2},  # SwiGLU's product
    "mul_broadcast": {"broadcast": True},
    "add_broadcast": {"broadcast": True, "input_count": 1},  # a mask row added to scores
    "rope": {"row_channels": 4},  # heads of 4 channels, pairs (0,1), (2,3)
}


def _layer(kind: str, shape: tuple[int, int, int]) -> Layer:
    channels, rows, batch = shape
    return elementwise(kind, kind.split("_")[0], channels=channels, rows=rows, batch=batch,
                       **KINDS[kind]).with_precision(Precision.uniform(2))  # type: ignore[arg-type]


def _numpy_reference(kind: str, layer: Layer, xs: list[np.ndarray], w: np.ndarray | None) -> np.ndarray:
    """Each kind over [batch, tokens, features] arrays, as a framework writes it."""
    tok = [np.moveaxis(x[..., 0], 1, 2) for x in xs]  # (N, C, H, 1) -> (batch, tokens, features)
    x = tok[0]
    vec = None if w is None else w.reshape(-1)
    if kind == "softmax":
        heads = x.reshape(*x.shape[:2], -1, 4)
        y = np.exp(heads) / np.exp(heads).sum(axis=-1, keepdims=True)
        y = y.reshape(x.shape)
    elif kind == "layernorm":
        y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * vec
    elif kind == "rmsnorm":
        y = x / np.sqrt(np.mean(x**2, -1, keepdims=True) + 1e-5) * vec
    elif kind == "gelu":
        y = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)
    elif kind == "silu":
        y = x / (1 + np.exp(-x))
    elif kind == "mul":
        y = tok[0] * tok[1]
    elif kind == "mul_broadcast":
        y = x * vec
    elif kind == "add_broadcast":
        y = x + vec
    else:  # rope as Meta's Llama code: consecutive pairs as complex numbers times exp(i * pos * freq)
        heads = x.reshape(*x.shape[:2], -1, 2, 2)
        z = heads[..., 0] + 1j * heads[..., 1]
        freq = 10000.0 ** (-np.arange(0, 4, 2) / 4)
        z = z * np.exp(1j * np.arange(x.shape[1])[:, None, None] * freq)
        y = np.stack([z.real, z.imag], axis=-1).reshape(x.shape)
    return np.moveaxis(y, 2, 1)[..., None]


def _operands(kind: str, layer: Layer, rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray | None]:
    shape = (layer.n, layer.c_in, layer.h, layer.w)
    if kind in ("mul", "mul_broadcast", "add_broadcast"):  # integer kinds stay exact
        xs = [rng.integers(-50, 50, size=shape) for _ in range(layer.input_count)]
        return xs, rng.integers(-50, 50, size=(layer.c_in, 1, 1, 1)) if layer.b_activation else None
    w = rng.standard_normal((layer.c_in, 1, 1, 1)) if kind.endswith("norm") else None
    return [3 * rng.standard_normal(shape)], w


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("shape", SHAPES, ids=["8x6", "12x5x2"])
@pytest.mark.parametrize("size", [96, 4096])
def test_program_counts_the_model_bytes_and_computes_the_kind(kind: str, shape: tuple[int, int, int],
                                                              size: int) -> None:
    layer = _layer(kind, shape)
    arch = toy_arch(unified=size, burst=8, cores=2)
    plan = plan_layer(layer, arch)
    assert plan.mapping is not None
    verdict = verify_layer(layer, arch, plan.mapping, seed=5)
    assert verdict.bytes_match and verdict.bursts_match, verdict.mismatches()
    assert verdict.ok, verdict.mismatches()
    # every input element was read, every output element written, at least once
    assert verdict.counted_read_bytes[Operand.INPUT] >= layer.elements(Operand.INPUT) * 2
    assert verdict.counted_write_bytes >= layer.elements(Operand.OUTPUT) * 2
    if layer.has_weight_operand:
        assert verdict.counted_read_bytes[Operand.WEIGHT] >= layer.c_in * 2  # gamma / the row really moved
    program = generate_program(layer, arch, plan.mapping)
    parsed = parse_ir(emit_ir(program))
    assert parsed.streams == program.streams  # the EW lines read back, and `tileplan run` rebuilds the layer
    assert run_program(parsed, seed=2).bit_exact
    xs, w = _operands(kind, layer, np.random.default_rng(11))
    got = execute(program, xs, w).output
    want = _numpy_reference(kind, layer, xs, w)
    if kind in ("mul", "mul_broadcast", "add_broadcast"):
        assert got.dtype == np.int64 and np.array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_split_softmax_row_is_named() -> None:
    """A softmax whose G tile holds part of a row cannot run in one pass: the generator says so."""
    from dataclasses import replace

    layer = _layer("softmax", SHAPES[0])
    arch = toy_arch(unified=4096, burst=8)
    mapping = plan_layer(layer, arch).mapping
    assert mapping is not None
    tiles = list(mapping.tiles)
    tiles[1] = 2  # G tiles of 2 channels: half a 4-key row
    with pytest.raises(ProgramError, match="split softmax rows of 4 channels"):
        generate_program(layer, arch, replace(mapping, tiles=tuple(tiles)))


@pytest.mark.parametrize(("model", "extra", "kinds"), [
    ("bert-base", ["--seq", "2"], {"softmax", "layernorm", "gelu"}),
    # 15 s: the executor runs Llama's 4,096 x 14,336 projections; the default run checks the block's
    # other layers directly (test_llama_decode_block_has_a_program_for_every_layer below)
    pytest.param("llama3-8b-block-decode", ["--kv", "4"], {"softmax", "rmsnorm", "silu", "mul", "rope"},
                 marks=pytest.mark.slow),
])
def test_verify_command_skips_no_layer(model: str, extra: list[str], kinds: set[str]) -> None:
    """`tileplan verify` runs every distinct layer with a mapping (the embeddings, planned as copy streams,
    are named); every one is OK, the row-wise and activation kinds included."""
    from typer.testing import CliRunner

    from tileplan import api
    from tileplan.cli import app

    result = CliRunner().invoke(app, ["verify", model, "--arch", "eyeriss", *extra], terminal_width=250)
    assert result.exit_code == 0, result.output
    assert "no program yet" not in result.output and "FAIL" not in result.output
    net = api.load_network(model, seq=int(extra[1]) if extra[0] == "--seq" else None,
                           kv=int(extra[1]) if extra[0] == "--kv" else None)
    plan = api.plan(net, api.load_arch("eyeriss"))
    distinct = [lp for lp in plan.layers if lp.mapping is not None and lp.cached_from is None]
    assert f"{len(distinct)} of {len(distinct)} distinct layers verified" in result.output
    assert kinds <= {net[lp.name].op.value for lp in distinct}
    assert result.output.count(" OK ") == len(distinct)


def test_llama_decode_block_has_a_program_for_every_layer() -> None:
    """The Llama-3 decode block as `tileplan verify` plans it: every distinct layer has a mapping and a
    program, and every one but the large projections (matmuls of millions of MACs, the kind the BERT
    run above verifies) is OK: RMSNorm, rope, the attention products, softmax, SiLU, the SwiGLU product
    and the residual adds."""
    from tileplan import api
    from tileplan.program.generate import has_program

    net = api.load_network("llama3-8b-block-decode", kv=4)
    arch = api.load_arch("eyeriss")
    plan = api.plan(net, arch)
    distinct = [lp for lp in plan.layers if lp.cached_from is None and net[lp.name].moves_data]
    assert all(lp.mapping is not None and has_program(net[lp.name]) for lp in distinct)
    small = [lp for lp in distinct if net[lp.name].macs < 10**6]
    assert {net[lp.name].op.value for lp in distinct if lp not in small} == {"matmul"}
    assert {"softmax", "rmsnorm", "silu", "mul", "rope", "add", "matmul"} <= {net[lp.name].op.value for lp in small}
    prec = Precision.uniform(arch.precision_bytes, arch.psum_bytes)
    for lp in small:
        assert lp.mapping is not None
        verdict = verify_layer(net[lp.name].with_precision(prec), arch, lp.mapping)
        assert verdict.ok, (lp.name, verdict.mismatches())


def test_a_row_that_does_not_fit_is_named() -> None:
    """A layernorm row (8 channels x 2 B in and out, plus its 16-byte scale) does not fit 40 bytes, a
    point-wise gelu of the same shape does: the error says the tile holds whole rows."""
    from tileplan.errors import InfeasibleError

    arch = toy_arch(unified=40, burst=8)
    assert plan_layer(_layer("gelu", SHAPES[0]), arch).mapping is not None
    with pytest.raises(InfeasibleError, match="holds whole rows of 8 channels"):
        plan_layer(_layer("layernorm", SHAPES[0]), arch)
