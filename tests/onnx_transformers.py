"""Small transformer graphs written with ``onnx.helper`` the way PyTorch's TorchScript exporter writes
them (no torch needed): embeddings by Gather, MatMul + Add projections, heads split by Reshape and
Transpose with Shape/Gather/Unsqueeze/Concat shape arithmetic, Q.K^T / sqrt(d) + mask, Softmax,
P.V, LayerNorm (or its decomposition), GELU (or its Erf form), residual adds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """Accumulates nodes and initializers; ``t(...)`` names fresh tensors."""

    def __init__(self, elem: int = TensorProto.FLOAT, opset: int = 17) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.elem = elem
        self.opset = opset  # ReduceMean takes its axes as an input from opset 18 (the dynamo exporter's)
        self.count = 0

    def t(self, base: str = "t") -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op: str, inputs: list[str], name: str = "", n_out: int = 1, **attrs: object) -> list[str]:
        outs = [self.t(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name or outs[0], **attrs))
        return outs

    def one(self, op: str, inputs: list[str], name: str = "", **attrs: object) -> str:
        return self.node(op, inputs, name, **attrs)[0]

    def weight(self, name: str, shape: list[int]) -> str:
        dtype = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}.get(self.elem, np.float32)
        tensor = numpy_helper.from_array(np.zeros(shape, dtype), name)
        if self.elem == TensorProto.BFLOAT16:
            tensor = helper.make_tensor(name, TensorProto.BFLOAT16, shape, [0] * int(np.prod(shape)))
        self.inits.append(tensor)
        return name

    def ints(self, values: list[int], name: str = "") -> str:
        name = name or self.t("const")
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def reduce_mean(self, x: str) -> str:
        """Mean over the last axis, in this opset's form."""
        if self.opset >= 18:
            return self.one("ReduceMean", [x, self.ints([-1])])
        return self.one("ReduceMean", [x], axes=[-1])

    def scalar_int(self, value: int) -> str:
        name = self.t("idx")
        self.inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
        return name

    def scalar(self, value: float) -> str:
        name = self.t("scalar")
        self.inits.append(helper.make_tensor(name, self.elem, [], [value]) if self.elem != TensorProto.FLOAT
                          else numpy_helper.from_array(np.array(value, np.float32), name))
        return name

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[str], opset: int = 17) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(o, self.elem, None) for o in outputs]
        graph = helper.make_graph(self.nodes, "g", inputs, outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        return model

    def save(self, path: Path, inputs: list[onnx.ValueInfoProto], outputs: list[str], opset: int = 17) -> Path:
        onnx.save(self.model(inputs, outputs, opset), str(path))
        return path


def layernorm(g: Graph, x: str, d: int, name: str, decomposed: bool) -> str:
    gamma, beta = g.weight(f"{name}.weight", [d]), g.weight(f"{name}.bias", [d])
    if not decomposed:
        return g.one("LayerNormalization", [x, gamma, beta], name=name, axis=-1, epsilon=1e-5)
    mean = g.reduce_mean(x)
    centered = g.one("Sub", [x, mean])
    sq = g.one("Pow", [centered, g.scalar(2.0)])
    var = g.reduce_mean(sq)
    std = g.one("Sqrt", [g.one("Add", [var, g.scalar(1e-5)])])
    normed = g.one("Div", [centered, std], name=name)
    return g.one("Add", [g.one("Mul", [normed, gamma]), beta])


def gelu(g: Graph, x: str, name: str, erf: bool) -> str:
    if not erf:
        return g.one("Gelu", [x], name=name)
    inner = g.one("Erf", [g.one("Div", [x, g.scalar(1.4142135)])])
    return g.one("Mul", [g.one("Mul", [x, g.one("Add", [inner, g.scalar(1.0)])], name=name), g.scalar(0.5)])


def linear(g: Graph, x: str, k: int, n: int, name: str) -> str:
    y = g.one("MatMul", [x, g.weight(f"{name}.weight", [k, n])], name=name)
    return g.one("Add", [y, g.weight(f"{name}.bias", [n])])


def split_heads(g: Graph, x: str, heads: int, dh: int, perm: list[int]) -> str:
    """x.view(x.size(0), x.size(1), heads, dh).permute(perm), with the exporter's shape arithmetic."""
    shape = g.one("Shape", [x])
    b = g.one("Unsqueeze", [g.one("Gather", [shape, g.scalar_int(0)], axis=0), g.ints([0])])
    s = g.one("Unsqueeze", [g.one("Gather", [shape, g.scalar_int(1)], axis=0), g.ints([0])])
    target = g.one("Concat", [b, s, g.ints([heads]), g.ints([dh])], axis=0)
    return g.one("Transpose", [g.one("Reshape", [x, target])], perm=perm)


def bert_layer(path: Path, *, seq: int | str = 8, d: int = 16, heads: int = 2, ff: int = 32, vocab: int = 50,
               decomposed: bool = False, erf: bool = True, mask: str = "sub", elem: int = TensorProto.FLOAT,
               opset: int = 17) -> Path:
    """Embeddings (word Gather + LayerNorm) and one BERT encoder layer, written as the TorchScript
    exporter does; ``mask``: ``sub`` ((1 - mask) * -10000 added), ``where`` (Where/And/IsNaN form) or
    ``none``."""
    g = Graph(elem, opset)
    dh = d // heads
    ids = "input_ids"
    x = g.one("Gather", [g.weight("embeddings.word_embeddings.weight", [vocab, d]), ids],
              name="embeddings.word_embeddings")
    x = layernorm(g, x, d, "embeddings.LayerNorm", decomposed)
    p = "encoder.layer.0.attention.self"
    q = split_heads(g, linear(g, x, d, d, f"{p}.query"), heads, dh, [0, 2, 1, 3])
    k = split_heads(g, linear(g, x, d, d, f"{p}.key"), heads, dh, [0, 2, 3, 1])
    v = split_heads(g, linear(g, x, d, d, f"{p}.value"), heads, dh, [0, 2, 1, 3])
    scores = g.one("MatMul", [q, k], name=f"{p}.qk")
    scores = g.one("Div", [scores, g.scalar(float(np.sqrt(dh)))])
    if mask == "sub":
        m = g.one("Cast", [g.one("Unsqueeze", [g.one("Unsqueeze", ["attention_mask", g.ints([1])]), g.ints([2])])],
                  to=g.elem)
        m = g.one("Mul", [g.one("Sub", [g.scalar(1.0), m]), g.scalar(-10000.0)])
        scores = g.one("Add", [scores, m], name=f"{p}.mask")
    elif mask == "where":
        keep = g.one("Cast", [g.one("Unsqueeze", ["attention_mask", g.ints([1, 2])])], to=TensorProto.BOOL)
        both = g.one("And", [keep, g.one("Not", [g.one("IsNaN", [g.one("Cast", [keep], to=g.elem)])])])
        scores = g.one("Where", [both, scores, g.scalar(-1e4)], name=f"{p}.mask")
    probs = g.one("Softmax", [scores], name=f"{p}.softmax", axis=-1)
    ctx = g.one("MatMul", [probs, v], name=f"{p}.pv")
    ctx = g.one("Transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = g.one("Reshape", [ctx, g.ints([0, 0, d])])
    a = "encoder.layer.0.attention.output"
    h = linear(g, ctx, d, d, f"{a}.dense")
    x = layernorm(g, g.one("Add", [h, x], name=f"{a}.add"), d, f"{a}.LayerNorm", decomposed)
    up = gelu(g, linear(g, x, d, ff, "encoder.layer.0.intermediate.dense"), "encoder.layer.0.intermediate.gelu", erf)
    o = "encoder.layer.0.output"
    h = linear(g, up, ff, d, f"{o}.dense")
    x = layernorm(g, g.one("Add", [h, x], name=f"{o}.add"), d, f"{o}.LayerNorm", decomposed)
    inputs = [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, seq])]
    if mask != "none":
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, seq]))
    return g.save(path, inputs, [x], opset)
