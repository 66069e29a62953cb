"""ONNX import/export: hand-made graphs for every supported op, error cases and zoo round trips."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tileplan.errors import UnsupportedOperatorError, WorkloadError
from tileplan.workload import zoo
from tileplan.workload.builder import NetBuilder
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.network import Network
from tileplan.workload.onnx_export import export_onnx, to_onnx
from tileplan.workload.onnx_import import OnnxFileError, OnnxShapeError, load_onnx
from tileplan.workload.transformer import elementwise

LATEST = onnx.defs.onnx_opset_version()


# --------------------------------------------------------------------- graph-building helpers
def _vi(name: str, shape: Sequence[int | str], dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _zeros(name: str, shape: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _ints(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _floats(name: str, values: list[float]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def _save(tmp_path: Path, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[str],
          inits: list[onnx.TensorProto] | None = None, opset: int = LATEST, name: str = "m.onnx") -> Path:
    """Save a model; outputs carry no shape (the importer must infer every shape itself)."""
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                   for o in outputs], initializer=inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _rows(net: Network) -> list[tuple[object, ...]]:
    return [(layer.name, layer.signature(), layer.inputs) for layer in net]


def _single_conv(tmp_path: Path, x: list[int], w: list[int], **attrs: Any) -> Layer:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)
    net = load_onnx(_save(tmp_path, [node], [_vi("x", x)], ["y"], [_zeros("w", w)]))
    assert len(net) == 1
    return net.layers[0]


# --------------------------------------------------------------------- every op, at many opsets
def _kitchen_sink(tmp_path: Path, opset: int) -> Path:
    """Pad -> conv -> BN -> Clip -> depthwise -> grouped + pointwise -> residual add -> upsample ->
    concat -> max/avg pool -> global pool -> squeeze -> Gemm -> Softmax, in ``opset``'s op forms."""
    n: list[onnx.NodeProto] = []
    inits = [_zeros("w1", [8, 4, 3, 3]), _zeros("w2", [8, 1, 3, 3]), _zeros("w3", [16, 4, 1, 1]),
             _zeros("w3b", [16, 8, 1, 1]), _zeros("wfc", [10, 24]), _zeros("bfc", [10])]
    inits += [_floats(f"bn_{k}", [0.0] * 8) for k in ("s", "b", "m", "v")]
    if opset < 11:
        n.append(helper.make_node("Pad", ["x"], ["xp"], name="pad", pads=[0, 0, 1, 1, 0, 0, 1, 1]))
        n.append(helper.make_node("Clip", ["b1"], ["r1"], min=0.0, max=6.0))
    else:
        inits += [_ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
                  numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
        n.append(helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad"))
        n.append(helper.make_node("Clip", ["b1", "lo", "hi"], ["r1"]))
    n.insert(1, helper.make_node("Conv", ["xp", "w1"], ["c1"], name="conv1", kernel_shape=[3, 3]))
    n.insert(2, helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["b1"]))
    n.append(helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", group=8, strides=[2, 2],
                              pads=[1, 1, 1, 1]))
    n.append(helper.make_node("Relu", ["c2"], ["r2"]))
    n.append(helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3", group=2))
    n.append(helper.make_node("LeakyRelu", ["c3"], ["l3"], alpha=0.1))
    n.append(helper.make_node("Conv", ["r2", "w3b"], ["c3b"], name="conv3b"))
    act = "HardSwish" if opset >= 14 else "HardSigmoid"
    n.append(helper.make_node(act, ["c3b"], ["h3b"]))
    n.append(helper.make_node("Add", ["l3", "h3b"], ["a"], name="add"))
    if opset < 9:
        n.append(helper.make_node("Upsample", ["a"], ["u"], name="up", scales=[1.0, 1.0, 2.0, 2.0]))
    elif opset < 10:
        inits.append(_floats("sc", [1.0, 1.0, 2.0, 2.0]))
        n.append(helper.make_node("Upsample", ["a", "sc"], ["u"], name="up"))
    else:
        inits.append(_floats("sc", [1.0, 1.0, 2.0, 2.0]))
        ins = ["a", "sc"] if opset == 10 else ["a", "", "sc"]
        n.append(helper.make_node("Resize", ins, ["u"], name="up"))
    n.append(helper.make_node("Sigmoid", ["u"], ["su"]))
    n.append(helper.make_node("Concat", ["su", "r1"], ["cat"], name="cat", axis=1))
    n.append(helper.make_node("LRN", ["cat"], ["lrn"], size=3))
    n.append(helper.make_node("MaxPool", ["lrn"], ["mp"], name="maxpool", kernel_shape=[2, 2],
                              strides=[2, 2]))
    n.append(helper.make_node("AveragePool", ["mp"], ["ap"], name="avgpool", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]))
    n.append(helper.make_node("Dropout", ["ap"], ["dp"]))
    n.append(helper.make_node("GlobalAveragePool", ["dp"], ["gap"], name="gap"))
    if opset < 13:
        n.append(helper.make_node("Squeeze", ["gap"], ["sq"], axes=[2, 3]))
    else:
        inits.append(_ints("ax", [2, 3]))
        n.append(helper.make_node("Squeeze", ["gap", "ax"], ["sq"]))
    n.append(helper.make_node("Identity", ["sq"], ["id"]))
    n.append(helper.make_node("Gemm", ["id", "wfc", "bfc"], ["fc"], name="fc", transB=1))
    n.append(helper.make_node("Softmax", ["fc"], ["y"], name="softmax", axis=1))
    return _save(tmp_path, n, [_vi("x", [1, 4, 16, 16])], ["y"], inits, opset=opset)


def _kitchen_sink_expected() -> Network:
    b = NetBuilder("m", n=1, channels=4, h=16, w=16)
    c1 = b.conv(b.input, "conv1", 8, 3, pad=1)            # the Pad is folded into conv1
    c2 = b.conv(c1, "conv2", 8, 3, stride=2, pad=1, groups=8)
    c3 = b.conv(c2, "conv3", 16, 1, groups=2)
    c3b = b.conv(c2, "conv3b", 16, 1)
    up = b.data_move(b.add([c3, c3b], "add"), "up", 16, 16, 16)
    x = b.pool(b.concat([up, c1], "cat"), "maxpool", 2)
    x = b.global_pool(b.pool(x, "avgpool", 3, stride=1, pad=1, kind="avg"), "gap")
    b.fc(x, "fc", 10)
    b.layers.append(elementwise("softmax", "softmax", channels=10, rows=1, inputs=("fc",)))  # never free
    return b.build()


@pytest.mark.parametrize("opset", sorted({7, 9, 10, 11, 13, 14, 17, LATEST}))
def test_every_supported_op_at_many_opsets(tmp_path: Path, opset: int) -> None:
    net = load_onnx(_kitchen_sink(tmp_path, opset))
    expected = _kitchen_sink_expected()
    assert _rows(net) == _rows(expected)
    assert [layer.op for layer in net] == [
        OpKind.CONV, OpKind.DEPTHWISE, OpKind.GROUPED_CONV, OpKind.POINTWISE, OpKind.ADD, OpKind.DATA_MOVE,
        OpKind.CONCAT, OpKind.MAXPOOL, OpKind.AVGPOOL, OpKind.GLOBALPOOL, OpKind.FC, OpKind.SOFTMAX]
    assert net.input_shape == (1, 4, 16, 16) and net.name == "m"


# --------------------------------------------------------------------- convolution attributes
def test_asymmetric_pads_strides_dilation(tmp_path: Path) -> None:
    # ONNX pads are (top, left, bottom, right); tileplan's are (top, bottom, left, right).
    layer = _single_conv(tmp_path, [1, 3, 20, 21], [5, 3, 3, 3], pads=[1, 2, 3, 4], strides=[2, 1],
                         dilations=[2, 1])
    assert layer.pad == (1, 3, 2, 4) and layer.stride == (2, 1) and layer.dilation == (2, 1)
    assert (layer.p, layer.q) == ((20 + 4 - 5) // 2 + 1, 21 + 6 - 3 + 1)


@pytest.mark.parametrize(("auto_pad", "pad"), [("SAME_UPPER", (0, 1, 0, 1)), ("SAME_LOWER", (1, 0, 1, 0)),
                                               ("VALID", (0, 0, 0, 0))])
def test_auto_pad(tmp_path: Path, auto_pad: str, pad: tuple[int, int, int, int]) -> None:
    layer = _single_conv(tmp_path, [1, 2, 8, 8], [4, 2, 3, 3], auto_pad=auto_pad, strides=[2, 2])
    assert layer.pad == pad
    assert layer.p == (4 if auto_pad != "VALID" else 3)


def test_grouped_and_depthwise(tmp_path: Path) -> None:
    grouped = _single_conv(tmp_path, [1, 8, 6, 6], [16, 2, 3, 3], group=4, pads=[1, 1, 1, 1])
    assert (grouped.op, grouped.groups, grouped.k_out, grouped.c_in) == (OpKind.GROUPED_CONV, 4, 16, 8)
    dw = _single_conv(tmp_path, [1, 8, 6, 6], [8, 1, 3, 3], group=8)
    assert (dw.op, dw.groups, dw.p) == (OpKind.DEPTHWISE, 8, 4)


def test_conv1d_and_pool_ceil_mode(tmp_path: Path) -> None:
    conv = _single_conv(tmp_path, [1, 4, 50], [6, 4, 5], strides=[2], pads=[2, 2])
    assert (conv.h, conv.w, conv.r, conv.s, conv.p, conv.q, conv.pad) == (50, 1, 5, 1, 25, 1, (2, 2, 0, 0))
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[3, 3], strides=[2, 2],
                              ceil_mode=1)]
    pool = load_onnx(_save(tmp_path, nodes, [_vi("x", [1, 3, 54, 54])], ["y"])).layers[0]
    assert (pool.op, pool.p, pool.pad) == (OpKind.MAXPOOL, 27, (0, 1, 0, 1))  # floor mode would give 26


# --------------------------------------------------------------------- graph structure
def test_residual_add_concat_sum_and_constant_operands(tmp_path: Path) -> None:
    inits = [_zeros("wa", [4, 4, 3, 3]), _zeros("wb", [4, 4, 1, 1]), _floats("k", [2.0])]
    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a"], name="a", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wb"], ["b"], name="b"),
        helper.make_node("Mul", ["b", "k"], ["bm"]),           # constant operand: folded
        helper.make_node("Sub", ["bm", "k"], ["bs"]),
        helper.make_node("Div", ["bs", "k"], ["bd"]),
        helper.make_node("Add", ["a", "bd"], ["res"], name="res"),
        helper.make_node("Add", ["res", "k"], ["res2"]),       # constant operand: folded
        helper.make_node("Sum", ["a", "bd", "res2"], ["s3"], name="sum3"),
        helper.make_node("Concat", ["a", "s3", "x"], ["cat"], name="cat", axis=1),
    ]
    net = load_onnx(_save(tmp_path, nodes, [_vi("x", [1, 4, 8, 8])], ["cat"], inits))
    assert [layer.name for layer in net] == ["a", "b", "res", "sum3", "x_copy", "cat"]
    assert (net["res"].op, net["res"].inputs, net["res"].input_count) == (OpKind.ADD, ("a", "b"), 2)
    assert (net["sum3"].inputs, net["sum3"].input_count) == (("a", "b", "res"), 3)
    # The network input becomes a copy so the concat's producers sum to its 12 channels.
    assert net["x_copy"].op is OpKind.DATA_MOVE and net["cat"].c_in == 12
    assert net["cat"].inputs == ("a", "sum3", "x_copy")


def test_bn_and_activations_fold_into_the_conv(tmp_path: Path) -> None:
    inits = [_zeros("w", [4, 3, 3, 3]), _zeros("w2", [2, 4, 1, 1])] + [_floats(k, [1.0] * 4) for k in "sbmv"]
    inits.append(_floats("slope", [0.1] * 4))
    chain = ["Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Identity", "Dropout"]  # (Softmax: a layer)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["t0"]),
             helper.make_node("PRelu", ["t0", "slope"], ["t1"])]
    for i, op in enumerate(chain, start=1):
        nodes.append(helper.make_node(op, [f"t{i}"], [f"t{i + 1}"]))
    nodes.append(helper.make_node("Conv", [f"t{len(chain) + 1}", "w2"], ["y"], name="conv2"))
    net = load_onnx(_save(tmp_path, nodes, [_vi("x", [1, 3, 10, 10])], ["y"], inits))
    assert [layer.name for layer in net] == ["conv", "conv2"] and net["conv2"].inputs == ("conv",)


def test_pad_folding_and_materialising(tmp_path: Path) -> None:
    inits = [_zeros("w", [4, 4, 3, 3]), _ints("pads", [0, 0, 2, 1, 0, 0, 0, 3])]
    nodes = [helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad"),
             helper.make_node("Relu", ["xp"], ["xr"]),
             helper.make_node("Conv", ["xr", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w"], ["c0"], name="conv0"),
             helper.make_node("Pad", ["c0", "pads"], ["c0p"], name="pad2"),
             helper.make_node("Add", ["c0p", "c0p"], ["y"], name="add")]
    net = load_onnx(_save(tmp_path, nodes, [_vi("x", [1, 4, 8, 8])], ["y", "c"], inits))
    # Folded: begin (H 2, W 1) and end (H 0, W 3) pads add to the conv's own 1s.
    assert net["conv"].pad == (3, 1, 2, 4) and (net["conv"].h, net["conv"].w) == (8, 8)
    # An add cannot absorb padding: the pad becomes a data move 4x6x6 -> 4x8x10.
    pad2 = net["pad2"]
    assert (pad2.op, pad2.c_in, pad2.h, pad2.w, pad2.p, pad2.q) == (OpKind.DATA_MOVE, 4, 6, 6, 8, 10)
    assert net["add"].inputs == ("pad2", "pad2") and (net["add"].h, net["add"].w) == (8, 10)


def test_constant_and_constant_of_shape_weights(tmp_path: Path) -> None:
    w = helper.make_node("Constant", [], ["w"], value=_zeros("wv", [6, 3, 5, 5]))
    shape = helper.make_node("Constant", [], ["shape"], value=_ints("sv", [10, 6 * 4 * 4]))
    wfc = helper.make_node("ConstantOfShape", ["shape"], ["wfc"],
                           value=helper.make_tensor("value", TensorProto.FLOAT, [1], [0.0]))
    nodes = [w, shape, wfc, helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("MatMul", ["f", "wt"], ["m"], name="mm"),
             helper.make_node("Gemm", ["m", "wfc"], ["y"], name="fc2", transB=1)]
    net = load_onnx(_save(tmp_path, nodes, [_vi("x", [1, 3, 8, 8])], ["y"], [_zeros("wt", [96, 96])]))
    assert [(layer.op, layer.c_in, layer.k_out) for layer in net] == [
        (OpKind.CONV, 3, 6), (OpKind.FC, 96, 96), (OpKind.FC, 96, 10)]


def test_missing_external_weight_file_is_not_an_error(tmp_path: Path) -> None:
    net = zoo.get("lenet5")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")], "g", [_vi("x", [1, 1, 32, 32])],
        [_vi("y", [1, 6, 28, 28])], initializer=[_zeros("w", [6, 1, 5, 5])]))
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
              size_threshold=0)
    (tmp_path / "ext.data").unlink()
    imported = load_onnx(path)
    assert imported.layers[0].signature() == net["conv1"].signature()


@pytest.mark.parametrize("opset", [13, LATEST])
def test_global_pools_reduce_mean_views_and_channel_shuffle(tmp_path: Path, opset: int) -> None:
    inits = [_ints("s5", [1, 2, 4, 6, 6]), _ints("s4", [1, 8, 6, 6]), _zeros("w", [8, 8, 1, 1]),
             _ints("hw", [2, 3]), _zeros("wfc", [8, 5])]
    axes: dict[str, Any] = {"axes": [2, 3]} if opset < 18 else {}
    nodes = [helper.make_node("Reshape", ["x", "s5"], ["r5"]),
             helper.make_node("Transpose", ["r5"], ["t5"], name="shuffle", perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t5", "s4"], ["sh"]),
             helper.make_node("Conv", ["sh", "w"], ["c"], name="conv"),
             helper.make_node("GlobalMaxPool", ["c"], ["g1"], name="gmax"),
             helper.make_node("ReduceMean", ["c"] + ([] if axes else ["hw"]), ["g2"], name="rmean",
                              keepdims=0, **axes),
             helper.make_node("Unsqueeze", ["g2", "hw"], ["u"]),
             helper.make_node("Flatten", ["u"], ["f"]),
             helper.make_node("MatMul", ["f", "wfc"], ["y"], name="fc")]
    net = load_onnx(_save(tmp_path, nodes, [_vi("x", [1, 8, 6, 6])], ["g1", "y"], inits, opset=opset))
    shuffle = net["shuffle"]
    assert (shuffle.op, shuffle.c_in, shuffle.k_out, shuffle.p) == (OpKind.DATA_MOVE, 8, 8, 6)
    assert shuffle.inputs == ()
    assert net["conv"].inputs == ("shuffle",) and net["conv"].c_in == 8
    assert net["gmax"].op is OpKind.GLOBALPOOL and net["rmean"].op is OpKind.GLOBALPOOL
    assert net["rmean"].inputs == ("conv",) and net["rmean"].h == 6
    assert (net["fc"].op, net["fc"].inputs, net["fc"].c_in, net["fc"].k_out) == (OpKind.FC, ("rmean",), 8, 5)


def test_unsorted_nodes_names_and_symbolic_batch(tmp_path: Path) -> None:
    inits = [_zeros("w", [4, 3, 1, 1])]
    nodes = [helper.make_node("Relu", ["c2"], ["y"]),
             helper.make_node("Conv", ["c1", "w2"], ["c2"], name="stage/conv 2"),
             helper.make_node("Conv", ["x", "w"], ["c1"], name=""),
             helper.make_node("MaxPool", ["y"], ["p"], name="stage/conv 2", kernel_shape=[2, 2],
                              strides=[2, 2])]
    path = _save(tmp_path, nodes, [_vi("x", ["batch", 3, 8, 8])], ["p"], inits + [_zeros("w2", [4, 4, 1, 1])])
    net = load_onnx(path)
    assert [layer.name for layer in net] == ["conv2", "stage_conv_2", "stage_conv_2_2"]
    assert net.layers[1].inputs == ("conv2",) and {layer.n for layer in net} == {1}
    four = load_onnx(path, batch=4)
    assert {layer.n for layer in four} == {4} and four.input_shape == (4, 3, 8, 8)
    assert four.macs == 4 * net.macs


def test_dynamic_batch_flatten_through_shape_arithmetic(tmp_path: Path) -> None:
    # PyTorch 1.x ``x.view(x.size(0), -1)`` at opset 9, IR 3 (weights also listed as graph inputs):
    # ONNX's data propagation leaves the Reshape unknown; the importer computes it.
    weights = [("w", [8, 3, 3, 3]), ("b", [8]), ("wf", [10, 8 * 8 * 8])]
    inputs = [_vi("x", ["N", 3, 16, 16])] + [_vi(name, shape) for name, shape in weights]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Shape", ["p"], ["sh"]),
             helper.make_node("Gather", ["sh", "zero"], ["n0"], axis=0),
             helper.make_node("Unsqueeze", ["n0"], ["n1"], axes=[0]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["p", "target"], ["f"]),
             helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)]
    inits = [_zeros(name, shape) for name, shape in weights]
    inits += [numpy_helper.from_array(np.array(0, np.int64), "zero"), _ints("minus1", [-1])]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.save(model, tmp_path / "old.onnx")
    net = load_onnx(tmp_path / "old.onnx", batch=2)
    assert [(layer.name, layer.op, layer.n, layer.c_in, layer.k_out) for layer in net] == [
        ("conv", OpKind.CONV, 2, 3, 8), ("pool", OpKind.MAXPOOL, 2, 8, 8), ("fc", OpKind.FC, 2, 512, 10)]


# --------------------------------------------------------------------- errors
def test_unsupported_ops_are_all_listed(tmp_path: Path) -> None:
    inits = [_zeros("w", [4, 3, 3, 3])]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Einsum", ["c"], ["e"], name="weird1", equation="nchw->nchw"),
             helper.make_node("MyOp", ["e"], ["m"], name="custom", domain="com.example"),
             helper.make_node("Einsum", ["m"], ["e2"], name="weird2", equation="nchw->nchw"),
             helper.make_node("Gemm", ["e2", "e2"], ["mm"], name="selfmul"),  # (a MatMul of two: a layer)
             helper.make_node("Relu", ["mm"], ["y"])]
    path = _save(tmp_path, nodes, [_vi("x", [1, 3, 8, 8])], ["y"], inits)
    with pytest.raises(UnsupportedOperatorError) as info:
        load_onnx(path)
    message = str(info.value)
    for piece in ("Einsum (nodes 'weird1', 'weird2')", "com.example.MyOp (node 'custom')",
                  "Gemm (of two activations) (node 'selfmul')", str(path), "skip_unsupported=True"):
        assert piece in message
    with pytest.warns(UserWarning, match="passed through 4 unsupported node"):
        net = load_onnx(path, skip_unsupported=True)
    assert [layer.name for layer in net] == ["conv"]


def test_skipped_op_that_changes_shape_becomes_a_data_move(tmp_path: Path) -> None:
    inits = [_ints("k", [3]), _zeros("w", [4, 6, 1, 1])]
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=1),
             helper.make_node("Tile", ["v", "rep"], ["t"], name="tile"),
             helper.make_node("Conv", ["t", "w"], ["y"], name="conv")]
    inits.append(_ints("rep", [1, 2, 1, 1]))
    path = _save(tmp_path, nodes, [_vi("x", [1, 8, 5, 5])], ["y"], inits)
    with pytest.raises(UnsupportedOperatorError, match="TopK.*Tile"):
        load_onnx(path)
    with pytest.warns(UserWarning, match="TopK"):
        net = load_onnx(path, skip_unsupported=True)
    assert [(layer.name, layer.op, layer.c_in, layer.k_out) for layer in net] == [
        ("topk", OpKind.DATA_MOVE, 8, 3), ("tile", OpKind.DATA_MOVE, 3, 6), ("conv", OpKind.POINTWISE, 6, 4)]


def test_truncated_corrupt_and_missing_files(tmp_path: Path) -> None:
    good = tmp_path / "good.onnx"
    export_onnx(zoo.get("resnet18"), good)
    data = good.read_bytes()
    for cut in (len(data) // 2, len(data) - 7, 25):
        bad = tmp_path / f"cut{cut}.onnx"
        bad.write_bytes(data[:cut])
        with pytest.raises(OnnxFileError, match=r"cut\d+\.onnx.*(truncated|corrupt)"):
            load_onnx(bad)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(OnnxFileError, match="empty.onnx: contains no graph nodes"):
        load_onnx(empty)
    with pytest.raises(OnnxFileError, match="no such ONNX file"):
        load_onnx(tmp_path / "absent.onnx")
    assert issubclass(OnnxFileError, WorkloadError) and issubclass(OnnxShapeError, WorkloadError)


def test_shapes_that_cannot_be_inferred(tmp_path: Path) -> None:
    nodes = [helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], name="conv")]
    path = _save(tmp_path, nodes, [_vi("x", [1, 4, 8, 8]), _vi("target", [4], TensorProto.INT64)], ["y"],
                 [_zeros("w", [2, 4, 1, 1])])
    with pytest.raises(OnnxShapeError, match=r"m\.onnx: cannot infer the shape of tensor 'r'"):
        load_onnx(path)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    path = _save(tmp_path, nodes, [_vi("x", [1, 4, "H", "W"])], ["y"], [_zeros("w", [2, 4, 1, 1])],
                 name="s.onnx")
    with pytest.raises(OnnxShapeError, match=r"input size unknown for 'x' axis 2 \(H\), 'x' axis 3 \(W\)"):
        load_onnx(path)


# --------------------------------------------------------------------- export and round trips
@pytest.mark.parametrize("name", zoo.names())
def test_zoo_round_trip(tmp_path: Path, name: str) -> None:
    net = zoo.get(name)
    path = tmp_path / f"{name}.onnx"
    export_onnx(net, path)
    onnx.checker.check_model(str(path), full_check=True)
    assert path.stat().st_size < 100_000   # zero weights are generated, not stored
    back = load_onnx(path)
    assert back.name == name and back.input_shape == net.input_shape
    assert [(layer.name, layer.signature(), layer.inputs) for layer in back] == _rows(net)


@pytest.mark.parametrize("name", ["googlenet", "yolov2"])
def test_round_trip_at_another_batch(tmp_path: Path, name: str) -> None:
    path = tmp_path / "net.onnx"
    export_onnx(zoo.get(name), path)
    assert load_onnx(path, batch=3).layers == zoo.get(name, 3).layers


def test_export_every_data_move_shape(tmp_path: Path) -> None:
    b = NetBuilder("moves", n=1, channels=4, h=8, w=8)
    x = b.conv(b.input, "conv", 16, 3)
    up = b.data_move(x, "upsample", 16, 16, 24)          # integer nearest resize
    same = b.data_move(up, "shuffle", 16, 16, 24)        # same shape
    d2s = b.data_move(same, "d2s", 4, 32, 48)            # depth to space
    s2d = b.space_to_depth(d2s, "s2d", 4)                # space to depth
    b.data_move(s2d, "odd", 5, 7, 3)                     # anything else
    b.fc(b.global_pool(x, "gap"), "fc", 3)
    net = b.build()
    ops = {node.name: node.op_type for node in to_onnx(net).graph.node}
    assert [ops[k] for k in ("upsample", "shuffle", "d2s", "s2d", "odd")] == [
        "Resize", "Transpose", "DepthToSpace", "SpaceToDepth", "Resize"]
    export_onnx(net, tmp_path / "moves.onnx")
    assert _rows(load_onnx(tmp_path / "moves.onnx")) == _rows(net)


def test_export_writes_atomically_and_rejects_unexportable(tmp_path: Path) -> None:
    target = tmp_path / "out.onnx"
    export_onnx(zoo.get("lenet5"), target)
    assert [p.name for p in tmp_path.iterdir()] == ["out.onnx"]
    gather = Layer.data_move("gather", c_in=8, h=4, w=4, k_out=8, out_h=4, out_w=4, inputs=("a", "b"))
    a = Layer.conv("a", c_in=3, h=4, w=4, k_out=4, r=1)
    b = Layer.conv("b", c_in=3, h=4, w=4, k_out=4, r=1)
    with pytest.raises(WorkloadError, match="'gather': a data move gathering 2 tensors"):
        to_onnx(Network("g", (a, b, gather), (1, 3, 4, 4)))
