"""ONNX import of the patterns PyTorch 2.13's exporters write for real transformers (found in the
exports of ``tests/data/onnx_exports``), one test per pattern on graphs built with ``onnx.helper``, the
MAC totals of whole blocks against the architectures' closed forms, and the committed real exports
(both exporters) planned on every machine."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from onnx_export_graphs import _positions, gpt2_block, llama_block, repeat_kv, rmsnorm, rope
from onnx_transformers import Graph, linear

from tileplan import api
from tileplan.workload.layer import OpKind
from tileplan.workload.onnx_import import load_onnx

SEQ, D = 8, 16
EXPORTS = Path(__file__).parent / "data" / "onnx_exports"


def _ids(seq: int | str = SEQ) -> list[onnx.ValueInfoProto]:
    return [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])]


def _kinds(net) -> list[OpKind]:
    return [layer.op for layer in net.layers]


def _matmul_macs(net) -> int:
    return sum(x.macs for x in net.layers if x.op in (OpKind.MATMUL, OpKind.CONV))


# ----------------------------------------------------------------- one pattern each
def test_shapes_onnx_inference_cannot_follow_are_propagated(tmp_path: Path) -> None:
    """Position ids sliced from a constant table up to the run-time sequence length: ONNX's own
    inference leaves everything after the Slice symbolic; the import computes [1, 8, 16]."""
    g = Graph()
    pos = g.one("Gather", [g.weight("wpe", [32, D]), _positions(g, "input_ids", 32)], name="wpe")
    x = g.one("Add", [g.one("Gather", [g.weight("wte", [50, D]), "input_ids"], name="wte"), pos])
    y = g.one("MatMul", [x, g.weight("w", [D, D])], name="proj")
    model = g.model(_ids(), [y])
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    dims = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
            for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    assert y not in dims or 0 in dims[y]  # the premise: ONNX cannot give the projection's shape
    onnx.save(model, str(tmp_path / "p.onnx"))
    net = load_onnx(tmp_path / "p.onnx")
    assert _kinds(net) == [OpKind.EMBEDDING, OpKind.EMBEDDING, OpKind.ADD, OpKind.MATMUL]
    assert (net["proj"].p, net["proj"].c_in, net["proj"].k_out) == (SEQ, D, D)
    assert net["wpe"].p == SEQ  # the position rows looked up, not the table


def test_conv1d_reshape_gemm_reshape_is_one_matmul(tmp_path: Path) -> None:
    """GPT-2's Conv1D flattens [1, s, d] to [s, d] for a Gemm and views it back: one matmul over the
    token rows (no data move, the batch stays outermost)."""
    g = Graph()
    x = linear(g, "x", D, D, "p")
    flat = g.one("Reshape", [x, g.ints([-1, D])])
    y = g.one("Gemm", [flat, g.weight("w", [D, 3 * D]), g.weight("b", [3 * D])], name="c_attn")
    y = g.one("Reshape", [y, g.ints([1, SEQ, 3 * D])])
    z = g.one("MatMul", [y, g.weight("w2", [3 * D, D])], name="after")
    net = load_onnx(g.save(tmp_path / "c.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [z]))
    assert _kinds(net) == [OpKind.MATMUL] * 3
    c = net["c_attn"]
    assert (c.n, c.p, c.c_in, c.k_out, c.macs) == (1, SEQ, D, 3 * D, SEQ * D * 3 * D)
    assert net["after"].inputs == ("c_attn",)


def test_scaled_head_transposes_stay_views(tmp_path: Path) -> None:
    """SDPA scales Q and K^T by d^-1/4 each between the head Transpose and the MatMul, and a Shape
    node reads the Transpose: still views, no data move."""
    g, heads, dh = Graph(), 2, D // 2
    q = g.one("Transpose", [g.one("Reshape", [linear(g, "x", D, D, "q"), g.ints([1, SEQ, heads, dh])])],
              perm=[0, 2, 1, 3])
    k = g.one("Transpose", [g.one("Reshape", [linear(g, "x", D, D, "k"), g.ints([1, SEQ, heads, dh])])],
              perm=[0, 2, 3, 1])
    g.one("Shape", [q])
    scores = g.one("MatMul", [g.one("Mul", [q, g.scalar(dh ** -0.25)]), g.one("Mul", [k, g.scalar(dh ** -0.25)])],
                   name="qk")
    net = load_onnx(g.save(tmp_path / "s.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [scores]))
    assert _kinds(net) == [OpKind.MATMUL] * 3
    assert net["qk"].inputs == ("q", "k") and net["qk"].macs == heads * SEQ * dh * SEQ


def test_dynamo_k_transpose_through_batch_heads_reshape_is_a_view(tmp_path: Path) -> None:
    """The dynamo exporter transposes K as [1, h, s, d] -> [h, s, d] (batch and heads merged),
    Transpose, and back to [1, h, d, s]: a view on the way to the MatMul, not a move across the batch."""
    g, heads, dh = Graph(), 2, D // 2
    q, k = (g.one("Transpose", [g.one("Reshape", [linear(g, "x", D, D, n), g.ints([1, SEQ, heads, dh])])],
                  perm=[0, 2, 1, 3]) for n in ("q", "k"))
    kt = g.one("Transpose", [g.one("Reshape", [k, g.ints([heads, SEQ, dh])])], perm=[0, 2, 1])
    kt = g.one("Reshape", [kt, g.ints([1, heads, dh, SEQ])])
    scores = g.one("MatMul", [q, kt], name="qk")
    net = load_onnx(g.save(tmp_path / "k.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [scores]))
    assert _kinds(net) == [OpKind.MATMUL] * 3
    assert net["qk"].inputs == ("q", "k") and net["qk"].macs == heads * SEQ * dh * SEQ


def test_rotary_embedding_is_one_rope_layer(tmp_path: Path) -> None:
    """x cos + rotate_half(x) sin on head-split Q: one rope layer on the projection's output
    (3 operations per element), the head transposes views."""
    g, heads, dh = Graph(), 2, D // 2
    q = g.one("Transpose", [g.one("Reshape", [linear(g, "x", D, D, "q"), g.ints([1, SEQ, heads, dh])])],
              perm=[0, 2, 1, 3])
    y = rope(g, q, SEQ, dh, "q_rope")
    scores = g.one("MatMul", [y, g.one("Transpose", [y], perm=[0, 1, 3, 2])], name="qk")
    net = load_onnx(g.save(tmp_path / "r.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [scores]))
    assert _kinds(net) == [OpKind.MATMUL, OpKind.ROPE, OpKind.MATMUL]
    r = net.layers[1]
    assert r.inputs == ("q",) and r.macs == 3 * SEQ * D and r.row_channels == dh


def test_repeat_kv_is_grouped_query_attention_without_the_copy(tmp_path: Path) -> None:
    """K and V expanded from 2 KV heads to 4 query heads (Unsqueeze, Expand, Reshape): the matmuls
    run on G = 2 groups with the 2 query heads of a group folded into P, reading K / V as written."""
    g, heads, kv, dh = Graph(), 4, 2, 4
    q = g.one("Transpose", [g.one("Reshape", [linear(g, "x", D, D, "q"), g.ints([1, SEQ, heads, dh])])],
              perm=[0, 2, 1, 3])
    k, v = (g.one("Transpose", [g.one("Reshape", [linear(g, "x", D, kv * dh, n), g.ints([1, SEQ, kv, dh])])],
                  perm=[0, 2, 1, 3]) for n in ("k", "v"))
    k = g.one("Transpose", [repeat_kv(g, k, kv, heads // kv, SEQ, dh, "krep")], perm=[0, 1, 3, 2])
    probs = g.one("Softmax", [g.one("MatMul", [q, k], name="qk")], axis=-1, name="sm")
    y = g.one("MatMul", [probs, repeat_kv(g, v, kv, heads // kv, SEQ, dh, "vrep")], name="pv")
    net = load_onnx(g.save(tmp_path / "g.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [y]))
    qk, pv = net["qk"], net["pv"]
    assert (qk.groups, qk.p, qk.macs) == (kv, heads // kv * SEQ, heads * SEQ * dh * SEQ)
    assert (pv.groups, pv.p, pv.macs) == (kv, heads // kv * SEQ, heads * SEQ * SEQ * dh)
    assert qk.inputs == ("q", "k") and pv.inputs == ("sm", "v")


def test_rmsnorm_with_reciprocal_sqrt_and_tanh_gelu(tmp_path: Path) -> None:
    """Llama's RMSNorm as 1 / sqrt(mean(x^2) + eps) and GPT-2's tanh GELU
    (0.5 x (1 + tanh(c (x + 0.044715 x^3)))): one rmsnorm and one gelu layer."""
    g = Graph()
    h = rmsnorm(g, linear(g, "x", D, D, "p"), D, "norm")
    up = linear(g, h, D, 4 * D, "up")
    cube = g.one("Mul", [g.one("Pow", [up, g.scalar(3.0)]), g.scalar(0.044715)])
    inner = g.one("Mul", [g.one("Add", [up, cube]), g.scalar(0.79788)])
    act = g.one("Mul", [g.one("Mul", [up, g.scalar(0.5)]), g.one("Add", [g.one("Tanh", [inner]), g.scalar(1.0)])],
                name="gelu")
    net = load_onnx(g.save(tmp_path / "n.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [act]))
    assert _kinds(net) == [OpKind.MATMUL, OpKind.RMSNORM, OpKind.MATMUL, OpKind.GELU]
    assert net["gelu"].inputs == ("up",) and net.layers[1].inputs == ("p",)


def test_class_token_row_and_channels_last_patches(tmp_path: Path) -> None:
    """ViT: the patch convolution's [1, d, n] map transposed to tokens [1, n, d] is a token data move;
    the class token concatenated in front is a copy; the head reads row 0 (x[:, 0]) of the last norm
    through a view: a matmul of one row, reading the norm's output."""
    g, d, n = Graph(), D, 4
    conv = g.one("Conv", ["pixels", g.weight("patch", [d, 3, 2, 2])], strides=[2, 2], name="patch")
    tokens = g.one("Transpose", [g.one("Reshape", [conv, g.ints([1, d, n])])], perm=[0, 2, 1], name="to_tokens")
    cls = g.one("Expand", [g.weight("cls", [1, 1, d]), g.ints([1, 1, d])])
    x = g.one("Concat", [cls, tokens], axis=1, name="with_cls")
    x = g.one("LayerNormalization", [x, g.weight("g", [d]), g.weight("b", [d])], axis=-1, name="ln")
    row = g.one("Gather", [x, g.scalar_int(0)], axis=1)
    y = g.one("Gemm", [row, g.weight("head", [10, d])], transB=1, name="head")
    net = load_onnx(g.save(tmp_path / "v.onnx", [helper.make_tensor_value_info("pixels", TensorProto.FLOAT,
                                                                               [1, 3, 4, 4])], [y]))
    assert _kinds(net) == [OpKind.CONV, OpKind.DATA_MOVE, OpKind.DATA_MOVE, OpKind.LAYERNORM, OpKind.MATMUL]
    move, ln, head = net["to_tokens"], net["ln"], net["head"]
    assert (move.k_out, move.p) == (d, n) and (ln.k_out, ln.p) == (d, n + 1)
    assert head.inputs == ("ln",) and (head.p, head.c_in, head.k_out) == (1, d, 10)


def test_mask_gathers_fold(tmp_path: Path) -> None:
    """The dynamo exporter's padding mask: GatherND / GatherElements on the integer mask and Range
    indices, And-ed and selected into the scores: masks (no layer of their own)."""
    g = Graph()
    x = linear(g, "x", SEQ, SEQ, "scores")
    idx = g.one("Unsqueeze", [g.one("Range", [g.scalar_int(0), g.scalar_int(SEQ), g.scalar_int(1)]), g.ints([0, 2])])
    picked = g.one("GatherND", ["attention_mask", g.one("Concat", [g.one("Mul", [idx, g.scalar_int(0)]), idx],
                                                         axis=-1)])
    again = g.one("GatherElements", ["attention_mask", g.ints([[0] * SEQ])], axis=1)
    keep = g.one("And", [g.one("Cast", [picked], to=TensorProto.BOOL), g.one("Cast", [again], to=TensorProto.BOOL)])
    y = g.one("Where", [keep, x, g.scalar(-1e4)])
    y = g.one("MatMul", [y, g.weight("w", [SEQ, D])], name="after")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, SEQ]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, SEQ])]
    net = load_onnx(g.save(tmp_path / "m.onnx", inputs, [y]))
    # the mask is one row over the keys: a broadcast add reading the scores and the row once
    assert _kinds(net) == [OpKind.MATMUL, OpKind.ADD, OpKind.MATMUL]
    assert net.layers[1].inputs == ("scores",) and net["after"].inputs == (net.layers[1].name,)


def test_layer_names_from_module_paths(tmp_path: Path) -> None:
    """TorchScript node paths and the dynamo exporter's name_scopes both read as module paths."""
    g = Graph()
    y = g.one("MatMul", ["x", g.weight("w", [D, D])], name="/model/encoder/layer.0/attention/self/query/MatMul")
    z = g.one("MatMul", [y, g.weight("w2", [D, D])], name="node_MatMul_7")
    g.nodes[-1].metadata_props.add(key="pkg.torch.onnx.name_scopes",
                                   value="['', 'model', 'model.layers.1', 'model.layers.1.mlp', "
                                         "'model.layers.1.mlp.down_proj', 'linear']")
    s = g.one("Softmax", [z], axis=-1, name="/model/layers.1/self_attn/Softmax")
    net = load_onnx(g.save(tmp_path / "n.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
                           [s]))
    assert [x.name for x in net.layers] == ["layer.0.attn.query", "layer.1.mlp.down_proj", "layer.1.attn.softmax"]
    assert net.layers[2].inputs == ("layer.1.mlp.down_proj",)


def test_external_weights_are_never_opened(tmp_path: Path) -> None:
    """A model saved with its weights in an external file imports the same after that file is
    deleted: the importer reads shapes only (small shape constants stay in the model, as every
    exporter writes them)."""
    path = llama_block(tmp_path / "l.onnx")
    model = onnx.load(str(path))
    onnx.save(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.onnx.data")  # onnx's default: tensors over 1 KB go to the file
    assert (tmp_path / "ext.onnx.data").stat().st_size > 10_000
    (tmp_path / "ext.onnx.data").unlink()
    a, b = load_onnx(path), load_onnx(tmp_path / "ext.onnx")
    assert [(x.name, x.op, x.macs) for x in a.layers] == [(x.name, x.op, x.macs) for x in b.layers]


# ----------------------------------------------------------------- whole blocks: closed forms
def test_gpt2_block_macs_equal_the_closed_form(tmp_path: Path) -> None:
    """L s (4 d^2 + 2 s d + 2 d f) + s d V with L = 1; the embeddings are two lookups summed."""
    s, d, f, v = 8, 16, 64, 50
    net = load_onnx(gpt2_block(tmp_path / "g.onnx", seq=s, d=d, ff=f, vocab=v))
    assert _matmul_macs(net) == s * (4 * d * d + 2 * s * d + 2 * d * f) + s * d * v
    assert [x.op for x in net.layers].count(OpKind.EMBEDDING) == 2
    assert not any(x.op is OpKind.DATA_MOVE for x in net.layers)


@pytest.mark.parametrize("opset", [17, 18])
def test_llama_block_macs_equal_the_closed_form(tmp_path: Path, opset: int) -> None:
    """s (2 d^2 + 2 d kv dh + 3 d f) + 2 h s^2 dh for a GQA block; two rope, two rmsnorm, one silu."""
    s, d, h, kv, f = 8, 32, 4, 2, 48
    dh = d // h
    net = load_onnx(llama_block(tmp_path / "l.onnx", seq=s, d=d, heads=h, kv=kv, ff=f, opset=opset))
    assert _matmul_macs(net) == s * (2 * d * d + 2 * d * kv * dh + 3 * d * f) + 2 * h * s * s * dh
    kinds = _kinds(net)
    assert (kinds.count(OpKind.ROPE), kinds.count(OpKind.RMSNORM), kinds.count(OpKind.SILU)) == (2, 2, 1)
    assert OpKind.DATA_MOVE not in kinds


# ----------------------------------------------------------------- the committed real exports
TINY = {"d": 64, "layers": 2, "heads": 4, "kv": 2, "ff": 256, "vocab": 100, "seq": 16}


def _closed_form(model: str) -> int:
    d, n_layers, f, v, s = TINY["d"], TINY["layers"], TINY["ff"], TINY["vocab"], TINY["seq"]
    if model == "bert":
        return n_layers * s * (4 * d * d + 2 * s * d + 2 * d * f)
    if model == "gpt2":
        return n_layers * s * (4 * d * d + 2 * s * d + 2 * d * f) + s * d * v
    if model == "vit":  # 32 x 32 image, 8 x 8 patches: 16 patches + the class token; 10 classes
        patches, tokens = 16, 17
        return patches * d * 3 * 64 + n_layers * tokens * (4 * d * d + 2 * tokens * d + 2 * d * f) + d * 10
    dh = d // TINY["heads"]
    return n_layers * (s * (2 * d * d + 2 * d * TINY["kv"] * dh + 3 * d * f) + 2 * TINY["heads"] * s * s * dh)


EXPORT_FILES = sorted(EXPORTS.glob("*.onnx"))


@pytest.mark.parametrize("path", EXPORT_FILES, ids=[p.stem for p in EXPORT_FILES])
def test_real_export_imports_with_the_closed_form_macs(path: Path) -> None:
    model = path.stem.rsplit("-", 1)[0]
    net = load_onnx(path, seq=None if model == "vit" else TINY["seq"])
    assert _matmul_macs(net) == _closed_form(model.split("-")[0])
    assert all(len(x.name) <= 40 for x in net.layers), [x.name for x in net.layers if len(x.name) > 40]
    assert path.stat().st_size < 300_000


@pytest.mark.parametrize("arch", ["eyeriss", "edge", pytest.param("nmp", marks=pytest.mark.slow)])
def test_real_exports_plan_on_every_machine(arch: str) -> None:
    """Each export of both exporters plans end to end: every layer moves at least its compulsory
    bytes and the two exporters' plans of a model agree on the layers' MACs. (nmp, the 32-core machine,
    is ``slow``: 7 s, three times eyeriss and edge together.)"""
    macs: dict[str, list[int]] = {}
    for path in EXPORT_FILES:
        model = path.stem.rsplit("-", 1)[0]
        net = load_onnx(path, seq=None if model == "vit" else TINY["seq"])
        plan = api.plan(net, arch, jobs=1)
        assert [p.name for p in plan.layers] == [x.name for x in net.layers]
        for p in plan.layers:
            assert p.cost.latency_cycles > 0 and p.cost.dram_bytes >= p.compulsory_bytes > 0, (path.name, p.name)
        totals = sorted(x.macs for x in net.layers)
        assert macs.setdefault(model, totals) == totals, path.name
    assert sorted(macs) == ["bert", "gpt2", "llama-block", "vit"]
