"""Shared pieces of the ONNX importer: operator tables, constant lookup, attributes, shapes, names."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from tileplan.errors import WorkloadError


class OnnxFileError(WorkloadError):
    """An ONNX file cannot be read: missing, truncated, corrupt or not a model."""


class OnnxShapeError(WorkloadError):
    """The tensor shapes of an ONNX graph cannot be inferred statically."""


#: Element-wise or normalising ops without weights: folded into their producer (no traffic).
UNARY_FOLD = frozenset({
    "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu", "Selu",
    "Celu", "Softplus", "Softsign", "Mish", "Gelu", "Erf", "Exp", "Log", "Abs", "Neg", "Sqrt",
    "Reciprocal", "Floor", "Ceil", "Round", "Sign", "ThresholdedRelu", "Shrink", "Cast", "LRN",
    "Softmax", "LogSoftmax", "BatchNormalization", "InstanceNormalization", "LayerNormalization",
    "GroupNormalization", "LpNormalization", "MeanVarianceNormalization", "Identity", "Dropout",
    "QuantizeLinear", "DequantizeLinear",
})
#: Ops that only change how a tensor is viewed (its bytes stay where they are).
VIEW = frozenset({"Flatten", "Reshape", "Squeeze", "Unsqueeze"})
#: Element-wise ops of several operands; with one activation operand they fold like UNARY_FOLD.
ELEMENTWISE = frozenset({"Add", "Sum", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean"})
#: Pure data re-arrangements, imported as DATA_MOVE layers.
MOVE = frozenset({"Transpose", "Upsample", "Resize", "SpaceToDepth", "DepthToSpace"})
POOL = frozenset({"MaxPool", "AveragePool"})
GLOBAL_POOL = frozenset({"GlobalAveragePool", "GlobalMaxPool"})
REDUCE_POOL = frozenset({"ReduceMean", "ReduceMax"})
LINEAR = frozenset({"Gemm", "MatMul"})
#: Ops whose outputs are shape metadata, never activations.
SHAPE_OPS = frozenset({"Shape", "Size"})
OTHER = frozenset({"Conv", "Concat", "Pad"})
#: Transformer ops (``_onnx_xformer``): layers, masks, views of activations.
TRANSFORMER = frozenset({"Gelu", "RMSNormalization", "SimplifiedLayerNormalization", "Gather", "Where", "And",
                         "Or", "Not", "Xor", "IsNaN", "IsInf", "Equal", "Less", "LessOrEqual", "Greater",
                         "GreaterOrEqual", "Range", "CumSum", "Trilu", "Split", "Slice", "Expand", "GatherND",
                         "GatherElements",
                         "ConstantOfShape"})
SUPPORTED = UNARY_FOLD | VIEW | ELEMENTWISE | MOVE | POOL | GLOBAL_POOL | REDUCE_POOL | LINEAR | OTHER | TRANSFORMER
#: Ops whose outputs after the first are side results (masks, indices, statistics), not activations.
SINGLE_ACTIVATION_OUTPUT = UNARY_FOLD | POOL


def op_label(node: onnx.NodeProto) -> str:
    """The op type, prefixed by its domain when that is not the standard one."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    """Attribute ``name`` of ``node`` as a Python value (strings decoded), or ``default``."""
    for a in node.attribute:
        if a.name == name:
            value = onnx.helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def attr_int(node: onnx.NodeProto, name: str, default: int) -> int:
    """An integer attribute (``default`` when absent)."""
    value = attr(node, name)
    return int(value) if isinstance(value, (int, float)) else default


def ints(node: onnx.NodeProto, name: str, default: Sequence[int]) -> list[int]:
    """An integer-list attribute (``default`` when absent)."""
    value = attr(node, name)
    return [int(v) for v in value] if isinstance(value, Iterable) and not isinstance(value, str) \
        else list(default)


def floats(node: onnx.NodeProto, name: str) -> list[float] | None:
    """A float-list attribute, or ``None`` when absent."""
    value = attr(node, name)
    return [float(v) for v in value] if isinstance(value, Iterable) and not isinstance(value, str) else None


class Constants:
    """Values and shapes of the graph's constant tensors: initializers (data may be absent, e.g.
    external files that were not loaded), ``Constant`` and ``ConstantOfShape`` outputs."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self._init = {t.name: t for t in graph.initializer}
        self._const: dict[str, onnx.TensorProto | np.ndarray] = {}
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                value = self._constant_value(node)
                if value is not None:
                    self._const[node.output[0]] = value
        self._of_shape = {node.output[0]: node.input[0] for node in graph.node
                          if node.op_type == "ConstantOfShape" and node.output and node.input}

    @staticmethod
    def _constant_value(node: onnx.NodeProto) -> onnx.TensorProto | np.ndarray | None:
        for a in node.attribute:
            if a.name == "value":
                return a.t
            if a.name in ("value_int", "value_float"):
                return np.array(onnx.helper.get_attribute_value(a))
            if a.name in ("value_ints", "value_floats"):
                return np.array(list(onnx.helper.get_attribute_value(a)))
        return None

    def __contains__(self, name: str) -> bool:
        return name in self._init or name in self._const or name in self._of_shape

    @property
    def initializer_names(self) -> set[str]:
        return set(self._init)

    def value(self, name: str) -> np.ndarray | None:
        """The constant's value, or ``None`` when unknown (not constant, or data not loaded)."""
        tensor = self._init.get(name) or self._const.get(name)
        if tensor is None:
            return None
        if isinstance(tensor, np.ndarray):
            return tensor
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        try:
            return numpy_helper.to_array(tensor)
        except Exception:  # noqa: BLE001 - malformed constant data: treated as unknown
            return None

    def is_external(self, name: str) -> bool:
        """Whether the initializer's data lives in an external file (which is never read)."""
        tensor = self._init.get(name)
        return tensor is not None and tensor.data_location == onnx.TensorProto.EXTERNAL

    def shape(self, name: str) -> tuple[int, ...] | None:
        """The constant's shape without needing its data (weights may live in absent files)."""
        tensor = self._init.get(name) or self._const.get(name)
        if isinstance(tensor, onnx.TensorProto):
            return tuple(int(d) for d in tensor.dims)
        if isinstance(tensor, np.ndarray):
            return tuple(int(d) for d in tensor.shape)
        if name in self._of_shape:
            dims = self.value(self._of_shape[name])
            return None if dims is None else tuple(int(d) for d in np.ravel(dims))
        return None


def canon(shape: Sequence[int]) -> tuple[int, int, int, int]:
    """A tensor shape as (N, C, H, W): rank 2 is (N, F, 1, 1), rank 3 (N, C, L, 1), and ranks above 4
    fold the middle dimensions into C (a channel shuffle's (N, g, C/g, H, W) is (N, C, H, W))."""
    dims = [int(d) for d in shape]
    if not dims:
        return (1, 1, 1, 1)
    if len(dims) == 1:
        return (1, dims[0], 1, 1)
    if len(dims) == 2:
        return (dims[0], dims[1], 1, 1)
    if len(dims) == 3:
        return (dims[0], dims[1], dims[2], 1)
    return (dims[0], math.prod(dims[1:-2]), dims[-2], dims[-1])


def spatial_pads(node: onnx.NodeProto, in_hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int]) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial axis from ``pads`` / ``auto_pad`` (SAME_UPPER puts the odd
    extra element at the end, SAME_LOWER at the beginning, VALID pads nothing)."""
    rank = len(in_hw)
    auto = str(attr(node, "auto_pad", "NOTSET") or "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, st, d in zip(in_hw, kernel, strides, dilations, strict=True):
            out = -(-size // st)
            total = max(0, (out - 1) * st + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin, end
    if auto == "VALID":
        return [0] * rank, [0] * rank
    pads = ints(node, "pads", [0] * (2 * rank))
    return pads[:rank], pads[rank:]


def ceil_extra(size: int, before: int, after: int, k_eff: int, stride: int, want: int) -> int:
    """Extra end padding so that a floor-mode window count over ``size`` gives ``want`` outputs
    (ONNX ``ceil_mode`` and exporters whose inferred output is one larger); negative if impossible."""
    have = (size + before + after - k_eff) // stride + 1
    if want == have:
        return 0
    if want < have:
        return -1
    return (want - 1) * stride + k_eff - (size + before + after)


class Namer:
    """Sanitised (``[A-Za-z0-9_.-]``), unique layer names."""

    _BAD = re.compile(r"[^A-Za-z0-9_.\-]+")

    def __init__(self) -> None:
        self._used: set[str] = set()

    def take(self, raw: str, fallback: str) -> str:
        base = self._BAD.sub("_", raw).strip("_.-") or self._BAD.sub("_", fallback).strip("_") or "layer"
        name, i = base, 2
        while name in self._used:
            name, i = f"{base}_{i}", i + 1
        self._used.add(name)
        return name
