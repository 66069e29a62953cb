"""Fused attention and MLP blocks (``fusion.transformer``, ``transformer_cost``, ``transformer_program``): recognised in
the zoo's transformers, their programs' counted DRAM bytes, bursts and MACs equal the model, their
outputs equal numpy written here, their DRAM bytes equal closed forms written here (the score matrix
and the hidden activations move nothing), and the planner chooses them like any other group."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import product

import numpy as np
import pytest
from hypothesis import strategies as st
from sweeps import sweep

from tileplan import api
from tileplan.errors import MappingError, WorkloadError
from tileplan.fusion.group import FusedGroup
from tileplan.fusion.search import search_group
from tileplan.fusion.transformer import TransformerKind, transformer_spans
from tileplan.fusion.transformer_cost import (
    _mapping,
    chunk_choices,
    evaluate_transformer,
    residency_choices,
    search_transformer_sizes,
)
from tileplan.fusion.transformer_program import execute_transformer, generate_transformer, verify_transformer
from tileplan.workload import zoo
from tileplan.workload.layer import Precision
from tileplan.workload.network import Network
from tileplan.workload.zoo.transformers import Tokens, _ffn

B1 = Precision.uniform(1, 4)


def small_block(*, seq: int, d: int, heads: int, kv_heads: int, ff: int, swiglu: bool, batch: int = 1) -> Network:
    """One decoder block at a reduced size, built as the zoo builds Llama / BERT layers."""
    t = Tokens([], batch, seq, d)
    a = t.attention("attn", "", heads=heads, kv_heads=kv_heads, kv=seq, cached=False)
    if swiglu:
        gate = t.linear("mlp.gate", a, d, ff)
        up = t.linear("mlp.up", a, d, ff)
        act = t.eltwise("mlp.silu", "silu", (gate,), channels=ff)
        prod = t.eltwise("mlp.mul", "mul", (act, up), channels=ff, count=2)
        t.linear("mlp.down", prod, ff, d)
    else:
        _ffn(t, "mlp", a, ff, "gelu")
    return Network("small", tuple(t.layers), (batch, 1, seq, 1)).with_precision(B1)


ATTN = ["attn.qk", "attn.softmax", "attn.pv"]
GELU = ["mlp.up", "mlp.gelu", "mlp.down"]
SWIGLU = ["mlp.gate", "mlp.up", "mlp.silu", "mlp.mul", "mlp.down"]


def test_zoo_blocks_are_recognised():
    bert = zoo.get("bert-base", seq=8)
    spans = transformer_spans(bert)
    assert len(spans) == 24
    assert [bert.layers[s].name for s, _ in spans[:2]] == ["layer.0.attn.qk", "layer.0.mlp.up"]
    llama = zoo.get("llama3-8b-block", seq=8)
    assert [(llama.layers[s].name, e - s) for s, e in transformer_spans(llama)] == [("layer.0.attn.qk", 3),
                                                                            ("layer.0.mlp.gate", 5)]
    decode = zoo.get("gpt2-decode", kv=4)  # K/V from the cache: still one attention block per layer
    assert len(transformer_spans(decode)) == 24
    group = FusedGroup.of(llama, ["layer.0.attn.qk", "layer.0.attn.softmax", "layer.0.attn.pv"])
    assert group.transformer is not None and group.transformer.kind is TransformerKind.ATTENTION
    shape = group.transformer
    assert (shape.groups, shape.rows, shape.width) == (8, 4 * 8, 8)  # GQA rows folded
    with pytest.raises(WorkloadError, match="matmul layer, which cannot be fused"):
        FusedGroup.of(llama, ["layer.0.attn.qk", "layer.0.attn.softmax"])
    with pytest.raises(WorkloadError, match="cannot fuse"):  # the gate alone is not a block
        FusedGroup.of(llama, ["layer.0.mlp.gate", "layer.0.mlp.silu"])


def _attention_bytes(net: Network, tile: int, resident: tuple[bool, ...]) -> tuple[int, int, int]:
    """Closed form: Q and O once; K and V once each when resident, else once per query-row tile of
    each K/V head (1-byte elements); the scores: nothing."""
    qk, pv = net["attn.qk"], net["attn.pv"]
    kv_heads, rows, dh, kv = qk.groups, qk.p, qk.c_in // qk.groups, qk.k_out // qk.groups
    tiles = math.ceil(rows / tile)
    k_bytes = kv_heads * kv * dh * (1 if resident[0] else tiles)
    v_bytes = kv_heads * kv * dh * (1 if resident[2] else tiles)
    return kv_heads * rows * dh, k_bytes + v_bytes, pv.k_out * pv.p


@pytest.mark.parametrize("heads,kv_heads", [(2, 2), (4, 2)])
def test_attention_programs_equal_model_closed_form_and_numpy(heads, kv_heads):
    net = small_block(seq=6, d=8 * heads, heads=heads, kv_heads=kv_heads, ff=16, swiglu=False)
    group = FusedGroup.of(net, ATTN)
    arch = api.load_arch("eyeriss")
    rows = group.transformer.rows
    for resident, online in product(residency_choices(group), (False, True)):
        for c in (4, 1) if online else (6, 4, 1):
            for tile in (1, 5, rows):
                mapping = _mapping(group, tile, c, resident, ((1,) * 8,) * 3, online)
                v = verify_transformer(group, arch, mapping, seed=tile + c)
                assert v.ok, (mapping, v)
                q_b, kv_b, o_b = _attention_bytes(net, tile, resident)
                assert v.counted_read_bytes == (q_b, kv_b, 0) and v.counted_write_bytes == o_b
    # The executor's output against softmax(Q K^T) V written here, per K/V head and folded query head.
    mapping = _mapping(group, 5, 4, (False, False, True), ((1,) * 8,) * 3)
    prog = generate_transformer(group, arch, mapping)
    rng = np.random.default_rng(1)
    s = group.transformer
    q = rng.standard_normal((1, s.groups * s.k1, s.rows, 1))
    k = rng.standard_normal((s.groups * s.width, s.k1, 1, 1))
    v = rng.standard_normal((s.groups * s.n2, s.width, 1, 1))
    out = execute_transformer(prog, q, [k, None, v]).output
    for g in range(s.groups):
        scores = q[0, g * s.k1:(g + 1) * s.k1, :, 0].T @ k[g * s.width:(g + 1) * s.width, :, 0, 0].T
        probs = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
        want = probs @ v[g * s.n2:(g + 1) * s.n2, :, 0, 0].T
        np.testing.assert_allclose(out[0, g * s.n2:(g + 1) * s.n2, :, 0], want.T, rtol=1e-9)


@pytest.mark.parametrize("swiglu,batch", [(False, 2), (True, 1)])
def test_mlp_programs_equal_model_closed_form_and_numpy(swiglu, batch):
    net = small_block(seq=5, d=8, heads=2, kv_heads=2, ff=12, swiglu=swiglu, batch=batch)
    group = FusedGroup.of(net, SWIGLU if swiglu else GELU)
    arch = api.load_arch("eyeriss")
    weights = 8 * 12 * (3 if swiglu else 2)
    for resident in residency_choices(group):
        for c in (12, 8, 3):
            for tile in (2, 5):
                mapping = _mapping(group, tile, c, resident, ((1,) * 8,) * len(group))
                v = verify_transformer(group, arch, mapping, seed=c)
                assert v.ok, (mapping, v)
                streamed = sum(8 * 12 for m in [*group.transformer.firsts, len(group) - 1] if not resident[m])
                w_bytes = weights - streamed + streamed * batch * math.ceil(5 / tile)
                assert v.counted_read_bytes == (batch * 5 * 8, w_bytes, 0) and v.counted_write_bytes == batch * 5 * 8
    # Output against numpy written here: down(silu(x gate^T) * (x up^T)) or down(gelu(x up^T)).
    mapping = _mapping(group, 2, 8, (False,) * len(group), ((1,) * 8,) * len(group))
    rng = np.random.default_rng(2)
    x = rng.standard_normal((batch, 8, 5, 1))
    ws = [rng.standard_normal((x_.k_out, x_.c_in, 1, 1)) if x_.op.value == "matmul" else None for x_ in group.layers]
    out = execute_transformer(generate_transformer(group, arch, mapping), x, ws).output
    for n in range(batch):
        h = x[n, :, :, 0].T @ ws[0][:, :, 0, 0].T
        if swiglu:
            h = h / (1 + np.exp(-h)) * (x[n, :, :, 0].T @ ws[1][:, :, 0, 0].T)
        else:
            h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
        np.testing.assert_allclose(out[n, :, :, 0], (h @ ws[-1][:, :, 0, 0].T).T, rtol=1e-9)


def test_searched_block_mappings_verify_on_small_and_large_buffers():
    net = small_block(seq=8, d=16, heads=4, kv_heads=2, ff=24, swiglu=True)
    for size in ("1KiB", "64KiB"):
        arch = api.load_arch("eyeriss", [f"memories.L2.size_bytes={size}"])
        for names in (ATTN, SWIGLU):
            group = FusedGroup.of(net, names)
            res = search_group(group, arch, "latency")
            assert res is not None
            v = verify_transformer(group, arch, res.mapping)
            assert v.ok and v.within_footprint
            assert max(v.footprint_bytes.values()) <= 1024 or size == "64KiB"
    tiny = api.load_arch("eyeriss", ["memories.L2.size_bytes=32"])
    assert search_group(FusedGroup.of(net, ATTN), tiny, "latency") is None  # nothing fits: no group


def test_block_mapping_errors_name_the_field():
    net = small_block(seq=4, d=8, heads=2, kv_heads=2, ff=8, swiglu=False)
    group = FusedGroup.of(net, ATTN)
    arch = api.load_arch("eyeriss")
    with pytest.raises(MappingError, match="one middle chunk in 1..4"):
        evaluate_transformer(group, arch, _mapping(group, 2, 5, (True, False, True), ((1,) * 8,) * 3))
    with pytest.raises(MappingError, match="only the matmuls"):
        evaluate_transformer(group, arch, _mapping(group, 2, 4, (True, True, True), ((1,) * 8,) * 3))
    with pytest.raises(MappingError, match="exceeds the block's 4 rows"):
        evaluate_transformer(group, arch, _mapping(group, 9, 4, (True, False, True), ((1,) * 8,) * 3))
    assert chunk_choices(group.transformer) == [4, 2, 1]


def test_planner_chooses_blocks_and_never_does_worse():
    net = small_block(seq=16, d=32, heads=4, kv_heads=2, ff=64, swiglu=True)
    arch = api.load_arch("eyeriss")
    plan = api.plan_fused(net, arch, objective="dram", jobs=1)
    names = {g.name for g in plan.groups}
    assert "+".join(ATTN) in names
    attention = next(g for g in plan.groups if g.name == "+".join(ATTN))
    # The fused attention moves Q, K, V and O once; the unfused layers also write and read the scores.
    assert attention.cost.dram_bytes == sum(_attention_bytes(net, attention.mapping.tile_p, attention.mapping.resident))
    assert attention.cost.dram_bytes < attention.unfused.dram_bytes
    assert plan.dram_bytes < sum(lp.cost.dram_bytes for lp in plan.base.layers)
    cnn = api.plan_fused("lenet5", arch, objective="dram", jobs=1)  # no block: groups as before
    assert [g.name for g in cnn.groups] == ["conv1+pool1+conv2+pool2"]


def _sub_network(net: Network, names: list[str]) -> Network:
    """The layers ``names`` of ``net`` as a network of their own (inputs from outside dropped)."""
    keep = set(names)
    return Network(net.name, tuple(replace(net[n], inputs=tuple(i for i in net[n].inputs if i in keep))
                                   for n in names), net.input_shape)


def test_must_show_attention_at_512_kb():
    """bert-base seq 512 and llama3-8b-block prefill 2,048 on eyeriss with a 512 KB buffer (DRAM
    objective): the fused attention moves Q, K, V and O (K/V once, or once per row tile when
    streamed) and no score byte; the unfused layers write and read the 4 x heads x s x kv score
    bytes at least (docs/transformers.md quotes these figures)."""
    arch = api.load_arch("eyeriss", ["memories.L2.size_bytes=512KiB"])
    names = ["layer.0.attn.qk", "layer.0.attn.softmax", "layer.0.attn.pv"]
    prec = Precision.uniform(arch.precision_bytes, arch.psum_bytes)  # what `plan` uses on eyeriss
    bert = zoo.get("bert-base", seq=512).with_precision(prec)
    res = search_group(FusedGroup.of(bert, names), arch, "dram")
    assert res is not None and (res.mapping.tile_p, res.mapping.resident) == (512, (True, False, True))
    assert float(res.cost.dram_bytes[0]) == 4 * 12 * 512 * 64  # Q, K, V, O once: 1.57 MB
    base = api.plan(_sub_network(bert, names), arch, objective="dram", jobs=1)
    costs = {lp.name: lp.cost for lp in base.layers}
    scores = (costs[names[0]].dram_output_bytes + costs[names[0]].dram_psum_read_bytes
              + costs[names[1]].dram_input_bytes + costs[names[1]].dram_output_bytes + costs[names[2]].dram_input_bytes)
    assert scores == 4 * 12 * 512 * 512  # 12.58 MB: written, read, written, read once each
    assert sum(c.dram_bytes for c in costs.values()) == 14_155_776  # 14.16 MB unfused
    llama = zoo.get("llama3-8b-block", seq=2048).with_precision(prec)
    res = search_group(FusedGroup.of(llama, names), arch, "dram")
    assert res is not None
    m = res.mapping
    kv_bytes = 8 * 2048 * 128 * sum(1 if m.resident[i] else math.ceil(4 * 2048 / m.tile_p) for i in (0, 2))
    assert float(res.cost.dram_bytes[0]) == 2 * 32 * 2048 * 128 + kv_bytes
    # The online softmax: 911-row tiles (9 per KV head) holding 32 keys' scores at a time: 54.5 MB.
    assert (m.tile_p, m.resident, m.chunk[0], m.online) == (911, (False, False, False), 32, True)
    assert float(res.cost.dram_bytes[0]) < 4 * 32 * 2048 * 2048 / 9  # < a ninth of the unfused score bytes
    rowwise = search_transformer_sizes(FusedGroup.of(llama, names), [arch], "dram", onlines=(False,))[0]
    assert rowwise is not None and (rowwise.mapping.tile_p, rowwise.mapping.online) == (128, False)  # 285.2 MB
    assert float(rowwise.cost.cost.dram_bytes[0]) == 2 * 32 * 2048 * 128 + 8 * 2048 * 128 * 2 * 64


@sweep(4, 12, st.data())
def test_random_blocks_and_mappings_verify(data):
    """Random small attention / MLP blocks, random row tile, chunk and residency, on a random buffer:
    when the model says the mapping fits, the program fits, moves and computes what the model says."""
    heads = data.draw(st.sampled_from([1, 2, 4]))
    kv_heads = data.draw(st.sampled_from([h for h in (1, 2, 4) if heads % h == 0]))
    seq = data.draw(st.integers(1, 7))
    swiglu = data.draw(st.booleans())
    net = small_block(seq=seq, d=4 * heads, heads=heads, kv_heads=kv_heads, ff=data.draw(st.integers(1, 9)),
                      swiglu=swiglu, batch=data.draw(st.integers(1, 2)) if heads == kv_heads == 1 else 1)
    group = FusedGroup.of(net, data.draw(st.sampled_from([ATTN, SWIGLU if swiglu else GELU])))
    s = group.transformer
    c = data.draw(st.integers(1, s.width))
    online = s.kind is TransformerKind.ATTENTION and c < s.width and data.draw(st.booleans())
    resident = data.draw(st.sampled_from(residency_choices(group)))
    mapping = _mapping(group, data.draw(st.integers(1, s.rows)), c, resident, ((1,) * 8,) * len(group), online)
    arch = api.load_arch("eyeriss", [f"memories.L2.size_bytes={data.draw(st.sampled_from([256, 2048, 65536]))}"])
    if not bool(evaluate_transformer(group, arch, mapping).cost.feasible[0]):
        return
    v = verify_transformer(group, arch, mapping, seed=data.draw(st.integers(0, 9)))
    assert v.ok, (mapping, v)


test_random_blocks_and_mappings_verify_full = test_random_blocks_and_mappings_verify.full  # 12 examples, under ``slow``


def test_onnx_bert_layer_fuses_masked_attention_and_mlp(tmp_path):
    """An imported BERT layer (TorchScript form): the attention has a mask add between Q.K^T and the
    softmax and keeps the heads folded into the softmax's rows; it is one block all the same (the mask
    row loaded once), verified for every residency, and the planner fuses it and the MLP."""
    from onnx_transformers import bert_layer

    arch = api.load_arch("eyeriss")
    net = api.load_network(str(bert_layer(tmp_path / "bert.onnx", seq=6, d=16, heads=2))).with_precision(
        Precision.uniform(arch.precision_bytes, arch.psum_bytes))
    spans = [[x.name.rsplit(".", 1)[-1] for x in net.layers[s:e]] for s, e in transformer_spans(net)]
    assert spans == [["qk", "mask", "softmax", "pv"], ["dense", "gelu", "dense"]]
    s, e = transformer_spans(net)[0]
    group = FusedGroup.of(net, [x.name for x in net.layers[s:e]])
    assert group.transformer is not None and group.transformer.mask == 1 and group.transformer.groups == 2
    for resident in residency_choices(group):
        for c, tile in ((6, 6), (4, 1), (1, 4)):
            v = verify_transformer(group, arch, _mapping(group, tile, c, resident, ((1,) * 8,) * 4), seed=c)
            assert v.ok, v
            # Q, K, V, O as in the closed form, plus the 6-key mask row once.
            assert v.counted_read_bytes[1] == 6 + 2 * 6 * 8 * sum(1 if resident[i] else math.ceil(6 / tile)
                                                                  for i in (0, 3))
    plan = api.plan_fused(net, arch, objective="dram", jobs=1)
    assert [len(g.layers) for g in plan.groups] == [4, 3]


def test_online_softmax_holds_a_chunk_of_scores_not_whole_rows():
    """The online softmax: the same DRAM bytes as the row-wise one for the same tile, chunk and
    residency, the middle on chip shrinks from T x kv scores to T x c plus two running statistics per
    row, and T x n2 more operations per chunk and at the end; it is refused outside attention."""
    net = small_block(seq=8, d=16, heads=2, kv_heads=2, ff=8, swiglu=False)
    group = FusedGroup.of(net, ATTN)
    arch = api.load_arch("eyeriss")
    rowwise = evaluate_transformer(group, arch, _mapping(group, 4, 2, (False, False, False), ((1,) * 8,) * 3)).cost
    online = evaluate_transformer(group, arch, _mapping(group, 4, 2, (False, False, False), ((1,) * 8,) * 3, True))
    assert float(online.cost.dram_bytes[0]) == float(rowwise.dram_bytes[0])
    # scores: 4 rows x 8 keys -> 4 x 2, plus max and sum (4-byte partial sums) per row
    assert int(rowwise.footprint_bytes[0, 0]) - int(online.cost.footprint_bytes[0, 0]) == 4 * 8 - 4 * 2 - 2 * 4 * 4
    assert int(online.executed_macs[0]) == group.macs + 2 * 8 * 8 * (8 // 2 + 1)
    with pytest.raises(MappingError, match="online softmax needs an attention block"):
        evaluate_transformer(FusedGroup.of(net, GELU), arch, _mapping(FusedGroup.of(net, GELU), 4, 2, (False,) * 3,
                                                                ((1,) * 8,) * 3, True))


def test_plan_fuse_cli_renders_transformer_groups():
    """`plan --fuse` on the Llama decode block: the table names the fused attention and SwiGLU
    groups by their block mappings (the SwiGLU MLP reads its input twice, which is no residual block)."""
    from typer.testing import CliRunner

    from tileplan.cli import app

    result = CliRunner().invoke(app, ["plan", "llama3-8b-block-decode", "--kv", "4", "--arch", "eyeriss", "--fuse",
                                      "--objective", "dram", "--jobs", "1"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "attention: 4 rows" in result.output and "mlp: 1 rows" in result.output


@pytest.mark.parametrize("stem", ["bert", "gpt2", "vit", "llama-block"])
def test_real_pytorch_exports_fuse_every_attention_and_mlp(stem):
    """The committed PyTorch exports (``tests/data/onnx_exports``, both exporters): each of the two
    layers' attention and MLP (Llama's SwiGLU too) is one transformer block, and the best mapping of
    each verifies (program = model, output = numpy)."""
    from pathlib import Path

    arch = api.load_arch("eyeriss")
    prec = Precision.uniform(arch.precision_bytes, arch.psum_bytes)
    for exporter in ("ts", "dynamo"):
        path = Path(__file__).parent / "data" / "onnx_exports" / f"{stem}-{exporter}.onnx"
        net = api.load_network(str(path), seq=None if stem == "vit" else 8).with_precision(prec)
        spans = transformer_spans(net)
        kinds = [FusedGroup.of(net, [x.name for x in net.layers[s:e]]).transformer.kind for s, e in spans]
        assert kinds == [TransformerKind.ATTENTION, TransformerKind.MLP] * 2
        assert [e - s for s, e in spans][1] == (5 if stem == "llama-block" else 3)
        for s, e in spans[:2]:
            group = FusedGroup.of(net, [x.name for x in net.layers[s:e]])
            res = search_group(group, arch, "dram")
            assert res is not None and verify_transformer(group, arch, res.mapping).ok
