"""Fused attention and MLP blocks as C99 (``fusion.transformer_cgen``, ``fusion.cverify``): the compiled
program's printed DRAM bytes, bursts and MACs equal the fused model's and the numpy executor's, and
its output equals softmax(Q K^T) V / down(act(X up^T)) written here in numpy on the same operands
(``block_operands`` re-makes the C's deterministic operands), for a reduced BERT-base attention block
with whole-row and online softmax, BERT-base's GELU MLP, Llama's GQA attention, a SwiGLU MLP and an
imported BERT layer's masked attention; the CLI emits and verifies them; bad cases give one line."""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_fusion_transformer import SWIGLU, small_block
from typer.testing import CliRunner

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.fusion.cgen import parse_counts
from tileplan.fusion.cverify import run_group_c
from tileplan.fusion.group import FusedGroup, FusedMapping
from tileplan.fusion.transformer_cgen import block_operands, c_values
from tileplan.fusion.transformer_cost import _mapping
from tileplan.fusion.transformer_program import generate_transformer, verify_transformer
from tileplan.program.errors import ProgramError
from tileplan.workload import zoo
from tileplan.workload.layer import Precision
from tileplan.workload.network import Network

CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler: `cc` is not on PATH")
ATTN = ["layer.0.attn.qk", "layer.0.attn.softmax", "layer.0.attn.pv"]
MLP = ["layer.0.mlp.up", "layer.0.mlp.gelu", "layer.0.mlp.down"]
UNROLL = ((1,) * 8,) * 5


def _net(name: str, arch: Arch, seq: int) -> Network:
    return zoo.get(name, seq=seq).with_precision(Precision.uniform(arch.precision_bytes, arch.psum_bytes))


def _numpy_block(group: FusedGroup, x: np.ndarray, ws: list[np.ndarray | None]) -> np.ndarray:
    """The block on whole tensors, written here: per K/V head g, softmax(Q_g K_g^T [+ mask]) V_g (the
    query heads of g folded into its rows); or down(act(X gate^T) [* X up^T])."""
    s = group.transformer
    assert s is not None
    mats = [None if w is None else w[:, :, 0, 0] for w in ws]
    out = np.zeros((s.batch, s.groups * s.n2, s.rows, 1))
    for n in range(s.batch):
        for g in range(s.groups):
            a = x[n, g * s.k1:(g + 1) * s.k1, :, 0].T
            if s.kind.value == "attention":
                h = a @ mats[0][g * s.width:(g + 1) * s.width].T
                if s.mask is not None:
                    h = h + mats[s.mask][:, 0][np.arange(g * s.width, (g + 1) * s.width) % len(mats[s.mask])]
                h = np.exp(h - h.max(axis=1, keepdims=True))
                h = h / h.sum(axis=1, keepdims=True)
            else:
                first = a @ mats[0].T
                if len(s.firsts) == 2:  # SwiGLU: silu(gate) * up
                    h = first / (1 + np.exp(-first)) * (a @ mats[1].T)
                else:
                    h = 0.5 * first * (1 + np.vectorize(math.erf)(first / math.sqrt(2)))
            out[n, g * s.n2:(g + 1) * s.n2, :, 0] = (h @ mats[-1][g * s.n2:(g + 1) * s.n2].T).T
    return out


def _check_in_c(group: FusedGroup, arch: Arch, mapping: FusedMapping, folder: Path) -> dict[str, int]:
    v = verify_transformer(group, arch, mapping)  # the model against the numpy executor
    assert v.ok, v
    prog = generate_transformer(group, arch, mapping)
    folder.mkdir(parents=True)
    counts, output, self_check = run_group_c(prog, folder)
    assert self_check  # the C's own layer-by-layer reference agrees
    assert (counts["input"], counts["weight"], counts["output"]) == (*v.predicted_read_bytes[:2],
                                                                   v.predicted_write_bytes)
    assert (counts["input"], counts["weight"], counts["output"]) == (*v.counted_read_bytes[:2], v.counted_write_bytes)
    assert (counts["input_bursts"], counts["weight_bursts"], counts["output_bursts"]) == v.predicted_bursts \
        == v.counted_bursts
    assert counts["macs"] == v.predicted_macs == v.counted_macs
    x, ws = block_operands(prog)
    want = _numpy_block(group, x, ws)
    assert np.abs(want).max() > 0.1  # not a degenerate all-zero check
    np.testing.assert_allclose(output, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    return counts


def test_attention_and_mlp_blocks_in_c(tmp_path: Path) -> None:
    arch = api.load_arch("eyeriss")
    bert = _net("bert-base", arch, 8)
    attn = FusedGroup.of(bert, ATTN)
    # Whole-row softmax, K streamed per 3-row tile, V resident: K read ceil(8 / 3) = 3 times per head.
    got = _check_in_c(attn, arch, _mapping(attn, 3, 8, (False, False, True), UNROLL[:3]), tmp_path / "rowwise")
    assert got["weight"] == 12 * 8 * 64 * (3 + 1)
    # Online softmax over chunks of 3 keys, K and V streamed per 5-row tile.
    got = _check_in_c(attn, arch, _mapping(attn, 5, 3, (False, False, False), UNROLL[:3], True), tmp_path / "online")
    assert got["weight"] == 12 * 8 * 64 * 2 * 2 and got["input"] == got["output"] == 12 * 8 * 64
    big = api.load_arch("eyeriss", ["memories.L2.size_bytes=1MiB"])
    mlp = FusedGroup.of(_net("bert-base", big, 8), MLP)  # the 3,072 hidden columns in chunks of 384, never in DRAM
    got = _check_in_c(mlp, big, _mapping(mlp, 8, 384, (False, False, False), UNROLL[:3]), tmp_path / "mlp")
    assert got["weight"] == 2 * 768 * 3072 and got["output"] == 8 * 768
    llama = _net("llama3-8b-block", arch, 8)  # GQA: 32 query heads on 8 K/V heads, 4 x 8 rows each
    gqa = FusedGroup.of(llama, ATTN)
    assert gqa.transformer is not None and (gqa.transformer.groups, gqa.transformer.rows) == (8, 32)
    _check_in_c(gqa, arch, _mapping(gqa, 7, 3, (True, False, False), UNROLL[:3], True), tmp_path / "gqa")
    swiglu = FusedGroup.of(small_block(seq=5, d=8, heads=2, kv_heads=2, ff=12, swiglu=True),
                           SWIGLU)
    _check_in_c(swiglu, arch, _mapping(swiglu, 2, 5, (False, True, False, False, True), UNROLL), tmp_path / "swiglu")


def test_masked_attention_of_an_onnx_bert_layer_in_c(tmp_path: Path) -> None:
    from onnx_transformers import bert_layer

    from tileplan.fusion.transformer import transformer_spans

    arch = api.load_arch("eyeriss")
    net = api.load_network(str(bert_layer(tmp_path / "bert.onnx", seq=6, d=16, heads=2))).with_precision(
        Precision.uniform(arch.precision_bytes, arch.psum_bytes))
    s, e = transformer_spans(net)[0]
    group = FusedGroup.of(net, [x.name for x in net.layers[s:e]])
    assert group.transformer is not None and group.transformer.mask == 1
    got = _check_in_c(group, arch, _mapping(group, 4, 6, (False, False, False, True), UNROLL[:4]), tmp_path / "c")
    assert got["weight"] == 6 + 2 * 6 * 8 * (2 + 1)  # the mask row once, K per 4-row tile, V once


def test_c_values_are_the_c_programs_operands(tmp_path: Path) -> None:
    """``c_values`` against the C's ``value`` itself (compiled here): the operands the numpy side
    rebuilds are those the program used."""
    from tileplan.fusion.cgen_prelude import PRELUDE

    source = PRELUDE.replace("$burst", "64") + """
int main(void)
{
    long s[2] = {1, 205};
    for (int k = 0; k < 2; k++)
        for (long i = 0; i < 40; i++)
            printf("%lld\\n", (long long)value(s[k], i));
    if (0) {
        long d[4] = {1, 1, 1, 1};
        dram_box(0, 0, d, d, d, 1);
        missing(0, "");
        report(NULL, alloc(1, 1), 0, 1);
    }
    return 0;
}
"""
    (tmp_path / "v.c").write_text(source)
    done = subprocess.run([str(CC), "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(tmp_path / "v"),
                           str(tmp_path / "v.c")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = [int(v) for v in subprocess.run([str(tmp_path / "v")], capture_output=True, text=True).stdout.split()]
    assert printed == [*c_values(1, 40), *c_values(205, 40)]
    assert set(printed) == set(range(-3, 4))


def test_cli_emits_and_verifies_blocks_as_c(tmp_path: Path) -> None:
    from tileplan.cli import app

    runner = CliRunner()
    names = "+".join(ATTN)
    target = tmp_path / "attn.c"
    result = runner.invoke(app, ["emit", "bert-base", "--seq", "8", "--arch", "eyeriss", "--group", names,
                                 "--target", "c", "--output", str(target)])
    assert result.exit_code == 0, result.output
    exe = tmp_path / "attn"
    built = subprocess.run([str(CC), "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(target),
                            "-lm"], capture_output=True, text=True)  # -O2: gcc checks array bounds too
    assert built.returncode == 0, built.stderr[:4000]
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "within a relative 1e-9" in done.stdout, done.stdout + done.stderr
    group, res = api.plan_group("bert-base", "eyeriss", ATTN, seq=8)
    got = parse_counts(done.stdout)
    assert (got["input"], got["weight"], got["output"]) == (*(int(v) for v in res.cost.dram_read_bytes[0, :2]),
                                                             int(res.cost.dram_write_bytes[0]))
    assert got["input_bursts"] + got["weight_bursts"] + got["output_bursts"] == int(res.cost.dram_bursts[0].sum())
    for model, group_names, extra in (("llama3-8b-block", names, ["--seq", "8"]), ("lenet5", "conv1+pool1", [])):
        ok = runner.invoke(app, ["verify", model, *extra, "--arch", "eyeriss", "--group", group_names,
                                 "--backend", "c"])
        assert ok.exit_code == 0, ok.output
        assert "(C program)" in ok.output and "counted traffic and MACs equal the model" in ok.output
    for args, message in (
            (["resnet18", "-o", "dram", "--group", "res2a_conv1+res2a_conv2+res2a_add"], "has branches"),
            (["lenet5", "--group", "conv1+pool1", "--seed", "2"], "drop --seed")):
        bad = runner.invoke(app, ["verify", *args, "--arch", "eyeriss", "--backend", "c"])
        assert bad.exit_code != 0 and message in bad.output and "Traceback" not in bad.output, bad.output
        assert len(bad.output.strip().splitlines()) == 1, bad.output


def test_c_block_stops_when_data_is_not_on_chip(tmp_path: Path) -> None:
    arch = api.load_arch("eyeriss")
    group = FusedGroup.of(small_block(seq=5, d=8, heads=2, kv_heads=2, ff=12, swiglu=False), [
        "attn.qk", "attn.softmax", "attn.pv"])
    prog = generate_transformer(group, arch, _mapping(group, 2, 2, (False, False, False), UNROLL[:3], True))
    assert any(i.op == "NORMALIZE" for i in prog.instructions)
    dropped = next(i for i in prog.instructions if i.op == "LOAD_WEIGHT" and i.layer == 2)  # one chunk of V
    broken = replace(prog, instructions=tuple(i for i in prog.instructions if i != dropped))
    with pytest.raises(ProgramError, match=r"exit 3\): instruction \d+ reads an element of B"):
        run_group_c(broken, tmp_path)


def test_verify_group_c_without_a_compiler_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from tileplan.cli import app

    monkeypatch.setenv("PATH", "")
    result = CliRunner().invoke(app, ["verify", "bert-base", "--seq", "8", "--arch", "eyeriss", "--group",
                                      "+".join(ATTN), "--backend", "c"])
    assert result.exit_code != 0 and "`cc` is not on PATH" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_chain_groups_verify_through_c() -> None:
    """``verify_group_c`` on chains: a residual add reading its skip from DRAM and a concat (their
    DRAM side inputs re-made in numpy as the C makes them): counts equal the model, output bit-exact
    against the layers run one by one in numpy."""
    from test_fusion_merge import shrink_group
    from test_fusion_model import fused

    from tileplan.fusion.cverify import verify_group_c
    from tileplan.fusion.group import Overlap

    arch = api.load_arch("eyeriss")
    for network, names in (("resnet50", ["res2b_conv3", "res2b_add"]),
                           ("densenet121", ["block1_layer6_conv2", "block1_concat"])):
        group = shrink_group(network, names, 7, 16)
        assert any(group.sides)
        v = verify_group_c(group, arch, fused(list(group.layers), 3, 2, overlap=Overlap.REUSE))
        assert v.ok and v.bit_exact and v.traffic_match and v.counted_macs == v.predicted_macs, v
