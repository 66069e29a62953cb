"""Shape propagation for the tensors ``onnx.shape_inference`` leaves unknown.

Real exports compute their sizes at run time (``Shape`` -> ``Gather`` -> ``Unsqueeze`` -> ``Concat`` ->
``Reshape``; position ids by ``Slice`` of a constant table up to the sequence length; masks by
``Range``, ``Expand`` and comparisons). ONNX's inference gives up on the first of these it cannot
follow and every tensor after it stays symbolic. ``fill_shapes`` walks the graph once in topological
order and computes each missing output shape from its inputs' shapes and the values of the small
integer tensors that feed it (evaluated by ``ShapeFolder``); what it cannot compute stays unknown and
the converter names the node. No weight data is read: initializers give their dims only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import onnx

from tileplan.workload._onnx_common import Constants, attr_int, ints
from tileplan.workload._onnx_fold import ShapeFolder

Shape = tuple[int, ...]

#: Ops whose output broadcasts their inputs (NumPy rules).
BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Mod", "And", "Or", "Xor", "Equal",
    "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Where", "PRelu", "BitShift"})
#: Ops whose first output has the first input's shape.
SAME = frozenset({
    "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu", "Selu", "Celu", "Softplus",
    "Softsign", "Mish", "Gelu", "Erf", "Exp", "Log", "Abs", "Neg", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round",
    "Sign", "Cast", "CastLike", "Identity", "Dropout", "Softmax", "LogSoftmax", "LayerNormalization",
    "RMSNormalization", "SimplifiedLayerNormalization", "BatchNormalization", "InstanceNormalization",
    "GroupNormalization", "Not", "IsNaN", "IsInf", "CumSum", "Trilu", "Sin", "Cos", "QuantizeLinear",
    "DequantizeLinear", "ScatterND", "ScatterElements", "LRN", "Shrink", "ThresholdedRelu"})
REDUCE = frozenset({"ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL2",
                    "ReduceSumSquare", "ArgMax", "ArgMin"})


def fill_shapes(nodes: list[onnx.NodeProto], shapes: dict[str, Shape], consts: Constants,
                producers: dict[str, onnx.NodeProto]) -> str:
    """Add to ``shapes`` (in place) every tensor ONNX left unknown that can be computed; ``nodes``
    must be in topological order. Returns where propagation first failed on inconsistent sizes
    (e.g. an Expand to a sequence longer than a position table), or ""."""

    def shape_of(tensor: str) -> Shape | None:
        known = shapes.get(tensor)
        return known if known is not None else consts.shape(tensor)

    folder = ShapeFolder(consts, producers, shape_of)
    first_failure = ""
    for node in nodes:
        if all(not out or out in shapes for out in node.output):
            continue
        try:
            found = _outputs(node, shape_of, folder)
        except (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError) as err:
            found = []
            if not first_failure and isinstance(err, ValueError) and "broadcast" in str(err):
                sizes = [shape_of(t) for t in node.input if t]
                if node.op_type == "Expand":
                    target = folder.value(node.input[1])
                    sizes[1] = None if target is None else tuple(int(d) for d in np.ravel(target))
                first_failure = f"{node.op_type} node {node.name!r} cannot broadcast {' to '.join(map(str, sizes))}"
        for out, shape in zip(node.output, found, strict=False):
            if out and out not in shapes and shape is not None and all(d >= 0 for d in shape):
                shapes[out] = tuple(int(d) for d in shape)
    return first_failure


def _outputs(node: onnx.NodeProto, shape_of: Callable[[str], Shape | None], folder: ShapeFolder
             ) -> Sequence[Shape | None]:
    op = node.op_type
    ins = [shape_of(t) if t else None for t in node.input]
    if op == "Constant":
        value = folder.value(node.output[0])
        return [None if value is None else value.shape]
    if op in ("Shape", "Size"):
        value = folder.value(node.output[0])
        return [None if value is None else value.shape]
    if op == "ConstantOfShape":
        dims = folder.value(node.input[0])
        return [None if dims is None else tuple(int(d) for d in np.ravel(dims))]
    if op == "Range":
        value = folder.value(node.output[0])
        return [None if value is None else value.shape]
    if any(s is None for t, s in zip(node.input, ins, strict=True) if t) or not node.input:
        return []
    shapes = [s for s in ins if s is not None]
    if op in BROADCAST:
        return [tuple(np.broadcast_shapes(*shapes))]
    if op in SAME:
        same: list[Shape | None] = [shapes[0]]
        if op == "LayerNormalization":  # mean and inverse std: the normalised axes reduced to 1
            axis = attr_int(node, "axis", -1) % len(shapes[0])
            same += [shapes[0][:axis] + (1,) * (len(shapes[0]) - axis)] * 2
        return same + [shapes[0]] * (len(node.output) - len(same))
    if op == "MatMul":
        return [_matmul(shapes[0], shapes[1])]
    if op == "Gemm":
        a, b = shapes[0], shapes[1]
        m = a[1] if attr_int(node, "transA", 0) else a[0]
        n = b[0] if attr_int(node, "transB", 0) else b[1]
        return [(m, n)]
    if op in REDUCE:
        return [_reduced(node, shapes[0], folder)]
    if op == "Gather":
        data, index = shapes[0], shapes[1]
        axis = attr_int(node, "axis", 0) % len(data)
        return [data[:axis] + index + data[axis + 1:]]
    if op == "GatherElements":
        return [shapes[1]]
    if op == "GatherND":
        data, index = shapes[0], shapes[1]
        batch = attr_int(node, "batch_dims", 0)
        return [index[:-1] + data[batch + index[-1]:]]
    if op == "Expand":
        target = folder.value(node.input[1])
        return [] if target is None else [tuple(np.broadcast_shapes(shapes[0], tuple(int(d) for d in target)))]
    if op == "Tile":
        reps = folder.value(node.input[1])
        return [] if reps is None else [tuple(d * int(r) for d, r in zip(shapes[0], np.ravel(reps), strict=True))]
    if op == "Slice":
        return [_sliced(node, shapes[0], folder)]
    if op == "Split":
        return _split(node, shapes[0], folder)
    if op == "Pad":
        pads = folder.value(node.input[1]) if len(node.input) > 1 else np.array(ints(node, "pads", []))
        if pads is None or len(node.input) > 3 and node.input[3]:
            return []
        rank = len(shapes[0])
        flat = [int(p) for p in np.ravel(pads)]
        return [tuple(d + flat[i] + flat[rank + i] for i, d in enumerate(shapes[0]))]
    out = folder.output_shape(node)  # Reshape, Flatten, (Un)squeeze, Transpose, Concat, Resize, ...
    return [out]


def _matmul(a: Shape, b: Shape) -> Shape:
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError("inner sizes differ")
    lead = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    out = lead + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _reduced(node: onnx.NodeProto, shape: Shape, folder: ShapeFolder) -> Shape:
    rank = len(shape)
    if node.op_type in ("ArgMax", "ArgMin"):
        axes = [attr_int(node, "axis", 0)]
    else:
        axes = ints(node, "axes", [])
        if not axes and len(node.input) > 1 and node.input[1]:
            value = folder.value(node.input[1])
            if value is None:
                raise ValueError("unknown axes")
            axes = [int(a) for a in np.ravel(value)]
    if not axes:
        if attr_int(node, "noop_with_empty_axes", 0):
            return shape
        axes = list(range(rank))
    drop = {a % rank for a in axes}
    if attr_int(node, "keepdims", 1):
        return tuple(1 if i in drop else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def _sliced(node: onnx.NodeProto, shape: Shape, folder: ShapeFolder) -> Shape:
    if len(node.input) == 1:  # opset < 10: attributes
        starts, ends = ints(node, "starts", []), ints(node, "ends", [])
        axes = ints(node, "axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        values = [folder.value(t) if t else None for t in node.input[1:5]]
        if values[0] is None or values[1] is None or any(
                t and v is None for t, v in zip(node.input[3:5], values[2:], strict=False)):
            raise ValueError("unknown slice bounds")
        starts, ends = [int(v) for v in np.ravel(values[0])], [int(v) for v in np.ravel(values[1])]
        axes = [int(v) for v in np.ravel(values[2])] if len(values) > 2 and values[2] is not None \
            else list(range(len(starts)))
        steps = [int(v) for v in np.ravel(values[3])] if len(values) > 3 and values[3] is not None \
            else [1] * len(starts)
    dims = list(shape)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a %= len(shape)
        dims[a] = len(range(*slice(s, e, st).indices(shape[a])))
    return tuple(dims)


def _split(node: onnx.NodeProto, shape: Shape, folder: ShapeFolder) -> list[Shape]:
    axis = attr_int(node, "axis", 0) % len(shape)
    sizes = ints(node, "split", [])
    if not sizes and len(node.input) > 1 and node.input[1]:
        value = folder.value(node.input[1])
        if value is None:
            raise ValueError("unknown split sizes")
        sizes = [int(v) for v in np.ravel(value)]
    if not sizes:
        count = len(node.output)
        part = math.ceil(shape[axis] / count)
        sizes = [min(part, shape[axis] - i * part) for i in range(count)]
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]
