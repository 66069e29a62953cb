"""ONNX import of transformer graphs (written with onnx.helper as PyTorch's exporters write them):
every pattern folds or becomes the layer kind it computes, with the closed-form MACs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_transformers import Graph, bert_layer, layernorm, linear

from tileplan import api
from tileplan.dims import Operand
from tileplan.errors import UnsupportedOperatorError, WorkloadError
from tileplan.workload._onnx_common import OnnxShapeError
from tileplan.workload.layer import OpKind, Precision
from tileplan.workload.onnx_import import load_onnx

SEQ, D, HEADS, FF, VOCAB = 8, 16, 2, 32, 50
KINDS = [OpKind.EMBEDDING, OpKind.LAYERNORM, OpKind.MATMUL, OpKind.MATMUL, OpKind.MATMUL, OpKind.MATMUL,
         OpKind.SOFTMAX, OpKind.MATMUL, OpKind.MATMUL, OpKind.ADD, OpKind.LAYERNORM, OpKind.MATMUL, OpKind.GELU,
         OpKind.MATMUL, OpKind.ADD, OpKind.LAYERNORM]


def _matmul_macs(net) -> int:
    return sum(x.macs for x in net.layers if x.op is OpKind.MATMUL)


@pytest.mark.parametrize(("kwargs"), [
    {}, {"decomposed": True}, {"mask": "where"}, {"mask": "none", "erf": False, "opset": 20}, {"opset": 18},
    {"decomposed": True, "opset": 18, "mask": "where"},
])
def test_bert_layer_imports_without_skipping(tmp_path: Path, kwargs: dict[str, object]) -> None:
    """Head split (Shape/Gather/Unsqueeze/Concat + Reshape + Transpose), K^T, the mask, the Erf GELU
    and the decomposed LayerNorm all fold: the layers are exactly what a BERT layer computes."""
    net = load_onnx(bert_layer(tmp_path / "bert.onnx", **kwargs))  # type: ignore[arg-type]
    masked = kwargs.get("mask", "sub") != "none"
    assert [x.op for x in net.layers] == KINDS[:6] + [OpKind.ADD] * masked + KINDS[6:]
    s, d = SEQ, D
    if masked:  # the padding mask is one row of SEQ keys, read once and added to every score row
        mask = net["encoder.layer.0.attention.self.mask"]
        assert (mask.b_activation, mask.elements(Operand.WEIGHT), mask.elements(Operand.OUTPUT)) == \
            (True, s, HEADS * s * s)
        assert mask.inputs == ("encoder.layer.0.attention.self.qk",)
    assert _matmul_macs(net) == s * (4 * d * d + 2 * s * d + 2 * d * FF)
    qk = net["encoder.layer.0.attention.self.qk"]
    shape = (qk.b_activation, qk.groups, qk.h, qk.c_in // qk.groups, qk.k_out // qk.groups)
    assert shape == (True, HEADS, s, d // 2, s)
    assert qk.inputs == ("encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.key")
    pv = net["encoder.layer.0.attention.self.pv"]
    assert net["encoder.layer.0.attention.self.softmax"].inputs == \
        ("encoder.layer.0.attention.self.mask" if masked else "encoder.layer.0.attention.self.qk",)
    assert pv.inputs == ("encoder.layer.0.attention.self.softmax", "encoder.layer.0.attention.self.value")
    # weights: word table, 3 LayerNorm scales, 6 projection matrices (biases are not modelled)
    assert net.params == VOCAB * d + 3 * d + 4 * d * d + 2 * d * FF
    assert net["embeddings.word_embeddings"].elements(Operand.INPUT) == s * d  # the looked-up rows only


def test_head_split_is_a_view_but_a_transpose_into_an_add_moves_data(tmp_path: Path) -> None:
    g = Graph()
    x = linear(g, "x", D, D, "proj")
    t = g.one("Transpose", [x], name="swap", perm=[0, 2, 1])  # [1, D, SEQ]: not read by a matmul
    y = g.one("Add", [t, g.one("Transpose", [x], perm=[0, 2, 1])], name="sum")
    path = g.save(tmp_path / "t.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])], [y])
    net = load_onnx(path)
    assert [x.op for x in net.layers] == [OpKind.MATMUL, OpKind.DATA_MOVE, OpKind.DATA_MOVE, OpKind.ADD]


def test_rmsnorm_and_silu_decompositions(tmp_path: Path) -> None:
    """Llama's RMSNorm (x * 1/sqrt(mean(x^2) + eps) * w) and SwiGLU (silu(gate) * up)."""
    g = Graph()
    var = g.one("ReduceMean", [g.one("Pow", ["x", g.scalar(2.0)])], axes=[-1])
    inv = g.one("Reciprocal", [g.one("Sqrt", [g.one("Add", [var, g.scalar(1e-6)])])])
    h = g.one("Mul", [g.one("Mul", ["x", inv], name="norm"), g.weight("norm.weight", [D])])
    gate = g.one("MatMul", [h, g.weight("gate.weight", [D, FF])], name="gate")
    up = g.one("MatMul", [h, g.weight("up.weight", [D, FF])], name="up")
    act = g.one("Mul", [gate, g.one("Sigmoid", [gate])], name="silu")
    y = g.one("MatMul", [g.one("Mul", [act, up], name="gated"), g.weight("down.weight", [FF, D])], name="down")
    path = g.save(tmp_path / "r.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])], [y])
    net = load_onnx(path)
    assert [(x.name, x.op) for x in net.layers] == [
        ("norm", OpKind.RMSNORM), ("gate", OpKind.MATMUL), ("up", OpKind.MATMUL), ("silu", OpKind.SILU),
        ("gated", OpKind.MUL), ("down", OpKind.MATMUL)]
    assert net["gated"].inputs == ("silu", "up") and net["gated"].input_count == 2
    assert net.macs == SEQ * (3 * D * FF) + 3 * SEQ * D + SEQ * FF + SEQ * FF


def test_split_slice_and_expand_of_activations_are_views(tmp_path: Path) -> None:
    """GPT-2's fused c_attn split into Q, K, V (Split), a Slice of the last token, an Expand of a mask."""
    g = Graph()
    qkv = linear(g, "x", D, 3 * D, "c_attn")
    q, k, v = g.node("Split", [qkv, g.ints([D, D, D])], n_out=3, axis=2)
    heads = [g.one("Transpose", [g.one("Reshape", [t, g.ints([1, SEQ, HEADS, D // HEADS])])], perm=p)
             for t, p in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3]))]
    scores = g.one("MatMul", [heads[0], heads[1]], name="qk")
    causal = g.one("Expand", [g.one("Cast", ["mask"], to=TensorProto.BOOL), g.ints([1, HEADS, SEQ, SEQ])])
    scores = g.one("Where", [causal, scores, g.scalar(-1e4)])
    ctx = g.one("MatMul", [g.one("Softmax", [scores], name="softmax", axis=-1), heads[2]], name="pv")
    last = g.one("Slice", [ctx, g.ints([SEQ - 1]), g.ints([SEQ]), g.ints([2])])
    out = g.one("MatMul", [g.one("Reshape", [last, g.ints([1, 1, D])]), g.weight("head", [D, 7])], name="head")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D]),
              helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 1, SEQ, SEQ])]
    net = load_onnx(g.save(tmp_path / "s.onnx", inputs, [out]))
    assert [x.name for x in net.layers] == ["c_attn", "qk", "softmax", "pv", "head"]
    assert net["qk"].inputs == ("c_attn", "c_attn") and net["pv"].inputs == ("softmax", "c_attn")
    assert net["head"].macs == D * 7


def test_precision_follows_onnx_element_types_unless_overridden(tmp_path: Path) -> None:
    path = bert_layer(tmp_path / "bf16.onnx", elem=TensorProto.BFLOAT16)
    net = load_onnx(path)
    assert {x.precision for x in net.layers} == {Precision.uniform(2)}
    assert {x.precision for x in load_onnx(bert_layer(tmp_path / "fp32.onnx"))} == {None}  # the arch decides
    plan = api.plan(path, "eyeriss", jobs=1)  # eyeriss is an 8-bit machine
    assert plan.meta["precision_source"] == "onnx element types"
    qk = next(p for p in plan.layers if p.name == "encoder.layer.0.attention.self.qk")
    assert qk.compulsory_bytes == 2 * (SEQ * D + SEQ * D + HEADS * SEQ * SEQ)  # 2 bytes per element
    forced = api.plan(path, "eyeriss", jobs=1, precision_bytes=1)
    assert forced.meta["precision_source"] == "--precision"
    assert next(p for p in forced.layers if p.name == qk.name).compulsory_bytes == qk.compulsory_bytes // 2


def test_dynamic_sequence_needs_seq(tmp_path: Path) -> None:
    path = bert_layer(tmp_path / "dyn.onnx", seq="sequence")
    with pytest.raises(OnnxShapeError, match=r"'input_ids' has a dynamic sequence length.*--seq"):
        load_onnx(path)
    net = load_onnx(path, seq=12)
    assert _matmul_macs(net) == 12 * (4 * D * D + 2 * 12 * D + 2 * D * FF)
    assert api.load_network(str(path), seq=12).layers == net.layers


def test_mask_that_cannot_fold_names_the_node(tmp_path: Path) -> None:
    g = Graph()
    a = linear(g, "x", D, D, "a")
    b = linear(g, "x", D, D, "b")
    y = g.one("Where", [g.one("IsNaN", [a]), a, b], name="pick")
    path = g.save(tmp_path / "w.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])], [y])
    with pytest.raises(UnsupportedOperatorError, match="node 'pick'.*mask"):
        load_onnx(path)


def test_unknown_custom_op_is_listed(tmp_path: Path) -> None:
    g = Graph()
    x = layernorm(g, "x", D, "ln", decomposed=False)
    g.nodes.append(helper.make_node("FusedAttention", [x], ["y"], name="attn", domain="com.microsoft"))
    path = g.save(tmp_path / "c.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])], ["y"])
    with pytest.raises(UnsupportedOperatorError, match=r"com\.microsoft\.FusedAttention \(node 'attn'\)"):
        load_onnx(path)


def test_weights_are_never_read(tmp_path: Path) -> None:
    """External weight data that is absent: the import uses shapes only."""
    path = bert_layer(tmp_path / "ext.onnx")
    model = onnx.load(str(path))
    big = numpy_helper.from_array(np.zeros((VOCAB, D), np.float32), "embeddings.word_embeddings.weight")
    onnx.external_data_helper.set_external_data(big, "missing.bin")
    big.ClearField("raw_data")
    big.data_location = TensorProto.EXTERNAL
    for i, t in enumerate(model.graph.initializer):
        if t.name == big.name:
            model.graph.initializer[i].CopyFrom(big)
    onnx.save(model, str(tmp_path / "ext2.onnx"))
    assert load_onnx(tmp_path / "ext2.onnx").params == load_onnx(path).params


def test_bad_matmul_broadcast_is_one_clear_error(tmp_path: Path) -> None:
    g = Graph()
    q = g.one("Reshape", [linear(g, "x", D, D, "q"), g.ints([1, HEADS, SEQ, D // HEADS])])
    k = g.one("Reshape", [linear(g, "x", D, D // HEADS, "k"), g.ints([1, SEQ, D // HEADS, 1])])
    k = g.one("Transpose", [k], perm=[0, 3, 2, 1])
    y = g.one("MatMul", [q, k], name="qk")
    path = g.save(tmp_path / "b.onnx", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])], [y])
    with pytest.raises(WorkloadError, match="node 'qk' broadcasts B"):
        load_onnx(path)


@pytest.mark.parametrize("pattern", ["constant_of_shape", "cast_expand", "shape_concat", "constant_scale"])
def test_each_shape_or_mask_pattern_folds(tmp_path: Path, pattern: str) -> None:
    """One folded pattern at a time on a projection: no layer besides the two matmuls."""
    g = Graph()
    x = linear(g, "x", D, D, "p")
    if pattern == "constant_of_shape":  # a zero mask of the scores' shape, added
        zeros = g.one("ConstantOfShape", [g.one("Shape", [x])],
                      value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))
        x = g.one("Add", [x, zeros])
    elif pattern == "cast_expand":  # an integer mask input cast and expanded, then added
        m = g.one("Expand", [g.one("Cast", ["mask"], to=TensorProto.FLOAT), g.ints([1, SEQ, D])])
        x = g.one("Add", [x, m])
    elif pattern == "shape_concat":  # x.view(x.size(0), x.size(1), -1) through shape arithmetic
        shape = g.one("Shape", [x])
        dims = [g.one("Unsqueeze", [g.one("Gather", [shape, g.scalar_int(i)], axis=0), g.ints([0])]) for i in (0, 1)]
        x = g.one("Reshape", [x, g.one("Concat", [*dims, g.ints([-1])], axis=0)])
    else:  # x / sqrt(d) by a Constant node
        g.nodes.append(helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.FLOAT, [],
                                                                                       [4.0])))
        x = g.one("Div", [x, "c"])
    y = g.one("MatMul", [x, g.weight("w2", [D, D])], name="q2")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D]),
              helper.make_tensor_value_info("mask", TensorProto.INT64, [1, SEQ, 1])]
    net = load_onnx(g.save(tmp_path / "f.onnx", inputs, [y]))
    assert [(layer.name, layer.op) for layer in net.layers] == [("p", OpKind.MATMUL), ("q2", OpKind.MATMUL)]
    assert net["q2"].inputs == ("p",)


@pytest.mark.parametrize("arch", ["eyeriss", "edge", "nmp"])
def test_imported_bert_layer_plans_end_to_end(tmp_path: Path, arch: str) -> None:
    """The imported encoder layer plans on every machine: each layer moves at least its compulsory
    bytes, and the matmuls carry the closed-form MACs into the plan."""
    net = load_onnx(bert_layer(tmp_path / "bert.onnx"))
    plan = api.plan(net, arch, jobs=1)
    assert [p.name for p in plan.layers] == [x.name for x in net.layers]
    for p in plan.layers:
        assert p.cost.latency_cycles > 0 and p.cost.dram_bytes >= p.compulsory_bytes > 0, p.name
    assert sum(x.macs for x in net.layers if x.op is OpKind.MATMUL) == SEQ * (4 * D * D + 2 * SEQ * D + 2 * D * FF)
