"""Bad transformer inputs for the bad-input corpus (``test_bad_inputs``): zoo shape overrides and
ONNX exports that cannot be planned, each expecting one error line naming the culprit and the fix."""

from __future__ import annotations

import tempfile
from pathlib import Path

from onnx import TensorProto, helper
from onnx_transformers import Graph, bert_layer, layernorm, linear

D, SEQ = 16, 8


def _x(shape: list[int | str] | None = None, name: str = "x", elem: int = TensorProto.FLOAT) -> list:
    return [helper.make_tensor_value_info(name, elem, shape or [1, SEQ, D])]


def _bytes(g: Graph, outputs: list[str], inputs: list | None = None, opset: int = 17) -> bytes:
    return g.model(inputs or _x(), outputs, opset).SerializeToString()


def _bert(**kwargs: object) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        return bert_layer(Path(tmp) / "b.onnx", **kwargs).read_bytes()  # type: ignore[arg-type]


def custom_op() -> bytes:
    g = Graph()
    x = layernorm(g, "x", D, "ln", decomposed=False)
    g.nodes.append(helper.make_node("FusedAttention", [x], ["y"], name="attn", domain="com.microsoft"))
    return _bytes(g, ["y"])


def unfoldable_mask() -> bytes:
    g = Graph()
    a, b = linear(g, "x", D, D, "a"), linear(g, "x", D, D, "b")
    return _bytes(g, [g.one("Where", [g.one("IsNaN", [a]), a, b], name="pick")])


def broadcast_b() -> bytes:
    g = Graph()
    q = g.one("Reshape", [linear(g, "x", D, D, "q"), g.ints([1, 2, SEQ, D // 2])])
    k = g.one("Reshape", [linear(g, "x", D, D // 2, "k"), g.ints([1, 1, D // 2, SEQ])])
    return _bytes(g, [g.one("MatMul", [q, k], name="qk")])


def stray_statistic() -> bytes:
    g = Graph()
    mean = g.one("ReduceMean", ["x"], axes=[-1])
    return _bytes(g, [g.one("Mul", [linear(g, "x", D, D, "p"), g.one("Exp", [mean], name="expmean")])])


def table_3d() -> bytes:
    g = Graph()
    y = g.one("Gather", [g.weight("emb", [10, 4, D]), "ids"], name="lookup")
    return _bytes(g, [y], _x([1, SEQ], "ids", TensorProto.INT64))


def gemm_of_activations() -> bytes:
    g = Graph()
    a = linear(g, "x", D, D, "a")
    y = g.one("Gemm", [g.one("Reshape", [a, g.ints([SEQ, D])]), g.one("Reshape", [a, g.ints([SEQ, D])])],
              name="gg", transB=1)
    return _bytes(g, [y])


def shape_from_activation() -> bytes:
    g = Graph()
    a = linear(g, "x", D, D, "a")
    return _bytes(g, [g.one("Reshape", [a, "dims"], name="r")], _x() + _x([3], "dims", TensorProto.INT64))


def dynamic_features() -> bytes:
    g = Graph()
    return _bytes(g, [linear(g, "x", D, D, "a")], _x([1, SEQ, "features"]))


def dynamic_embeds() -> bytes:
    g = Graph()
    return _bytes(g, [linear(g, "x", D, D, "a")], _x([1, "sequence", D]))


def gathernd_of_activation() -> bytes:
    g = Graph()
    a = linear(g, "x", D, D, "a")
    return _bytes(g, [g.one("GatherND", [a, g.ints([[0, 1]])], name="pick_rows")])


def external_shape_constant() -> bytes:
    """A Reshape whose target shape was saved to an external data file (size_threshold=0)."""
    g = Graph()
    a = linear(g, "x", D, D, "a")
    y = g.one("Reshape", [a, g.ints([1, SEQ, 2, D // 2], "target")], name="split_heads")
    model = g.model(_x(), [y])
    for t in model.graph.initializer:
        if t.name == "target":
            t.ClearField("raw_data")
            t.ClearField("int64_data")
            t.data_location = TensorProto.EXTERNAL
            t.external_data.add(key="location", value="m.onnx.data")
    return model.SerializeToString()


def real_export(name: str) -> bytes:
    """A committed real export (``tests/data/onnx_exports``; weights stripped)."""
    return (Path(__file__).parent / "data" / "onnx_exports" / name).read_bytes()


def cases(case: type) -> list:
    """The transformer cases as ``case(id, argv, expect, files)``."""
    return [
        case("zoo-seq-zero", ["plan", "bert-base", "--seq", "0"], "--seq must be a positive"),
        case("zoo-seq-too-long", ["plan", "bert-base", "--seq", "513"], "512 learned positions"),
        case("zoo-gpt2-seq-too-long", ["plan", "gpt2", "--seq", "2000"], "1024 learned positions"),
        case("zoo-llama-seq-too-long", ["plan", "llama3-8b-block", "--seq", "9000"], "8192 learned positions"),
        case("zoo-kv-without-cache", ["plan", "bert-base", "--kv", "10"], "no KV cache"),
        case("zoo-seq-on-a-cnn", ["plan", "resnet18", "--seq", "10"], "--seq / --kv are for"),
        case("zoo-seq-on-decode", ["plan", "gpt2-decode", "--seq", "4"], "use --kv"),
        case("zoo-seq-on-vit", ["plan", "vit-b16", "--seq", "100"], "224x224"),
        case("zoo-kv-zero", ["plan", "llama3-8b-block-decode", "--kv", "0"], "--kv must be a positive"),
        case("zoo-kv-huge", ["plan", "gpt2-decode", "--kv", "70000"], "larger than the 65,536"),
        case("compare-seq-too-long", ["compare", "bert-base", "--seq", "600"], "512 learned positions"),
        case("onnx-dynamic-seq", ["plan", "m.onnx"], "dynamic sequence length (axis 1, sequence); give the "
             "tokens to plan with --seq", {"m.onnx": _bert(seq="sequence")}),
        case("onnx-dynamic-embeds", ["plan", "m.onnx"], "'x' has a dynamic sequence length",
             {"m.onnx": dynamic_embeds()}),
        case("onnx-dynamic-features", ["plan", "m.onnx"], "'x' axis 2 (features)", {"m.onnx": dynamic_features()}),
        case("onnx-seq-on-static-model", ["plan", "m.onnx", "--seq", "16"], "no input has a dynamic sequence",
             {"m.onnx": _bert()}),
        case("onnx-kv-option", ["plan", "m.onnx", "--kv", "8"], "--kv is for the zoo's decode networks",
             {"m.onnx": _bert()}),
        case("onnx-custom-domain-op", ["plan", "m.onnx"], "com.microsoft.FusedAttention (node 'attn')",
             {"m.onnx": custom_op()}),
        case("onnx-unfoldable-mask", ["plan", "m.onnx"], "node 'pick' combines activations",
             {"m.onnx": unfoldable_mask()}),
        case("onnx-matmul-broadcast-b", ["plan", "m.onnx"], "node 'qk' broadcasts B", {"m.onnx": broadcast_b()}),
        case("onnx-stray-row-statistic", ["plan", "m.onnx"], "node 'expmean' uses a per-row statistic",
             {"m.onnx": stray_statistic()}),
        case("onnx-gather-3d-table", ["plan", "m.onnx"], "node 'lookup' looks up", {"m.onnx": table_3d()}),
        case("onnx-gemm-of-activations", ["plan", "m.onnx"], "Gemm (of two activations) (node 'gg')",
             {"m.onnx": gemm_of_activations()}),
        case("onnx-shape-does-not-propagate", ["plan", "m.onnx"], "Reshape node 'r'",
             {"m.onnx": shape_from_activation()}),
        case("onnx-gathernd-of-activation", ["plan", "m.onnx"], "GatherND node 'pick_rows' computes on an "
             "activation", {"m.onnx": gathernd_of_activation()}),
        case("onnx-real-bert-seq-too-long", ["plan", "m.onnx", "--seq", "200"], "Expand node "
             "'/model/embeddings/Expand_1' cannot broadcast (1, 128) to (1, 200); if --seq was given, it may "
             "exceed the model's positions", {"m.onnx": real_export("bert-ts.onnx")}),
        case("onnx-external-shape-constant", ["plan", "m.onnx"], "takes its shape from 'target', which is "
             "stored in an external data file", {"m.onnx": external_shape_constant()}),
        case("onnx-real-dynamo-export-without-seq", ["plan", "m.onnx"], "'input_ids' has a dynamic sequence "
             "length (axis 1, sequence); give the tokens to plan with --seq", {"m.onnx": real_export(
                 "bert-dynamo.onnx")}),
        case("onnx-real-ts-export-seq-too-long", ["plan", "m.onnx", "--seq", "200"], "looks up row 199 of the "
             "128-row table 'model.transformer.wpe.weight'; the sequence is longer than the model's 128 positions",
             {"m.onnx": real_export("gpt2-ts.onnx")}),
    ]
