"""Fallback shape arithmetic for the ONNX importer, for when ``onnx.shape_inference`` leaves a
tensor's shape unknown (old opsets, shape subgraphs its data propagation does not follow).

``ShapeFolder.value`` evaluates the small integer computations exporters put in front of
Reshape and friends (``x.view(x.size(0), -1)`` becomes Shape -> Gather -> Unsqueeze -> Concat);
``ShapeFolder.output_shape`` applies view and data-movement ops to known input shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx

from tileplan.workload._onnx_common import Constants, attr, attr_int, floats, ints

#: Largest constant the folder materialises (elements); bigger ones are weights, not shapes.
_MAX_ELEMENTS = 1 << 16


#: Element-wise integer / boolean ops the folder evaluates on shape values and small masks.
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal, "Less": np.less,
    "LessOrEqual": np.less_equal, "Greater": np.greater, "GreaterOrEqual": np.greater_equal, "And": np.logical_and,
    "Or": np.logical_or, "Max": np.maximum, "Min": np.minimum, "Mod": np.mod,
    "Div": lambda a, b: a // b if a.dtype.kind in "iu" and b.dtype.kind in "iu" else a / b}
UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative, "Not": np.logical_not, "Abs": np.abs, "Floor": np.floor, "Ceil": np.ceil,
    "Sqrt": np.sqrt}


class ShapeFolder:
    """Evaluates constant integer subgraphs given the shapes of activations."""

    def __init__(self, consts: Constants, producers: dict[str, onnx.NodeProto],
                 shape_of: Callable[[str], tuple[int, ...] | None]) -> None:
        self.consts = consts
        self.producers = producers
        self.shape_of = shape_of
        self._memo: dict[str, np.ndarray | None] = {}

    # ----------------------------------------------------------------- constant values
    def value(self, tensor: str) -> np.ndarray | None:
        """The value of a constant or shape-computed tensor, or ``None`` when not computable."""
        if tensor not in self._memo:
            self._memo[tensor] = None  # guards against cycles in malformed graphs
            value = self.consts.value(tensor)
            node = self.producers.get(tensor)
            if value is None and node is not None:
                try:
                    value = self._eval(node)
                except (ValueError, IndexError, TypeError, ZeroDivisionError):
                    value = None
            if value is not None and value.size > _MAX_ELEMENTS:
                value = None
            self._memo[tensor] = value
        return self._memo[tensor]

    def _eval(self, node: onnx.NodeProto) -> np.ndarray | None:
        op = node.op_type
        if op in ("Shape", "Size"):
            shape = self.shape_of(node.input[0])
            if shape is None:
                return None
            if op == "Size":
                return np.array(math.prod(shape), dtype=np.int64)
            start, end = attr_int(node, "start", 0), attr_int(node, "end", len(shape))
            return np.array(shape[start:end], dtype=np.int64)
        args = [self.value(t) if t else None for t in node.input]
        if op == "ConstantOfShape":
            if args[0] is None or math.prod(int(d) for d in args[0]) > _MAX_ELEMENTS:
                return None
            fill = attr(node, "value")
            base = onnx.numpy_helper.to_array(fill) if isinstance(fill, onnx.TensorProto) else np.zeros(1)
            return np.full(tuple(int(d) for d in args[0]), base.ravel()[0])
        required = [a for t, a in zip(node.input, args, strict=True) if t]
        if any(a is None for a in required) or not required:
            return None
        return self._eval_op(node, args)

    def _eval_op(self, node: onnx.NodeProto, args: list[np.ndarray | None]) -> np.ndarray | None:
        op = node.op_type
        x = args[0]
        if x is None:
            return None
        if op == "Identity":
            return x
        if op == "Cast":
            return x.astype(onnx.helper.tensor_dtype_to_np_dtype(attr_int(node, "to", onnx.TensorProto.FLOAT)))
        if op == "Gather":
            index = np.asarray(args[1], dtype=np.int64)
            return np.take(x, index, axis=attr_int(node, "axis", 0))
        if op == "Unsqueeze":
            axes = self._axes(node, args)
            rank = x.ndim + len(axes)
            for axis in sorted(a % rank for a in axes):
                x = np.expand_dims(x, axis)
            return x
        if op == "Squeeze":
            axes = self._axes(node, args)
            return np.squeeze(x, axis=tuple(a % x.ndim for a in axes)) if axes else np.squeeze(x)
        if op == "Concat":
            return np.concatenate([np.atleast_1d(a) for a in args if a is not None],
                                  axis=attr_int(node, "axis", 0))
        if op == "Slice":
            return self._slice(node, x, args)
        if op in BINARY and args[1] is not None:
            return BINARY[op](x, args[1])
        if op in UNARY:
            return UNARY[op](x)
        if op == "Reshape" and args[1] is not None:
            return x.reshape(_reshape(x.shape, [int(d) for d in np.ravel(args[1])], bool(attr(node, "allowzero", 0))))
        if op == "Expand" and args[1] is not None:
            return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(d) for d in np.ravel(args[1]))))
        if op == "Transpose":
            return np.transpose(x, ints(node, "perm", list(reversed(range(x.ndim)))))
        if op == "Tile" and args[1] is not None:
            return np.tile(x, [int(r) for r in np.ravel(args[1])])
        if op == "Where" and args[1] is not None and args[2] is not None:
            return np.where(x, args[1], args[2])
        if op == "ReduceProd":
            axes = self._axes(node, args)
            keep = bool(attr(node, "keepdims", 1))
            return np.prod(x, axis=tuple(axes) if axes else None, keepdims=keep)
        if op == "Range" and args[1] is not None and args[2] is not None:
            return np.arange(x.item(), args[1].item(), args[2].item())
        return None

    def _axes(self, node: onnx.NodeProto, args: list[np.ndarray | None]) -> list[int]:
        axes = ints(node, "axes", [])
        if not axes and len(args) > 1 and args[1] is not None:
            axes = [int(a) for a in np.ravel(args[1])]
        return axes

    def _slice(self, node: onnx.NodeProto, x: np.ndarray, args: list[np.ndarray | None]) -> np.ndarray:
        if len(args) == 1:  # opset < 10: attributes
            starts, ends = ints(node, "starts", []), ints(node, "ends", [])
            axes, steps = ints(node, "axes", list(range(len(starts)))), [1] * len(starts)
        else:
            starts, ends = [int(v) for v in np.ravel(args[1] if args[1] is not None else [])], \
                [int(v) for v in np.ravel(args[2] if args[2] is not None else [])]
            axes = [int(v) for v in np.ravel(args[3])] if len(args) > 3 and args[3] is not None \
                else list(range(len(starts)))
            steps = [int(v) for v in np.ravel(args[4])] if len(args) > 4 and args[4] is not None \
                else [1] * len(starts)
        index = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
            index[a] = slice(s, e, st)
        return x[tuple(index)]

    # ----------------------------------------------------------------- output shapes
    def output_shape(self, node: onnx.NodeProto) -> tuple[int, ...] | None:
        """The first output's shape from the inputs' shapes and constant operands, if computable."""
        try:
            return self._output_shape(node)
        except (ValueError, IndexError, TypeError, ZeroDivisionError):
            return None

    def _output_shape(self, node: onnx.NodeProto) -> tuple[int, ...] | None:
        op = node.op_type
        shape = self.shape_of(node.input[0]) if node.input else None
        if shape is None:
            return None
        if op == "Flatten":
            axis = attr_int(node, "axis", 1) % (len(shape) + 1)
            return (math.prod(shape[:axis]), math.prod(shape[axis:]))
        if op == "Reshape":
            target = self.value(node.input[1])
            return None if target is None else _reshape(shape, [int(d) for d in np.ravel(target)],
                                                        bool(attr(node, "allowzero", 0)))
        if op in ("Squeeze", "Unsqueeze"):
            axes = ints(node, "axes", [])
            if not axes and len(node.input) > 1:
                value = self.value(node.input[1])
                axes = [] if value is None else [int(a) for a in np.ravel(value)]
            if op == "Squeeze":
                drop = {a % len(shape) for a in axes} if axes else {i for i, d in enumerate(shape) if d == 1}
                return tuple(d for i, d in enumerate(shape) if i not in drop)
            dims = list(shape)
            for axis in sorted(a % (len(shape) + len(axes)) for a in axes):
                dims.insert(axis, 1)
            return tuple(dims)
        if op == "Transpose":
            perm = ints(node, "perm", list(reversed(range(len(shape)))))
            return tuple(shape[p] for p in perm)
        if op in ("SpaceToDepth", "DepthToSpace"):
            b = attr_int(node, "blocksize", 1)
            n, c, h, w = shape
            return (n, c * b * b, h // b, w // b) if op == "SpaceToDepth" else (n, c // (b * b), h * b, w * b)
        if op in ("Upsample", "Resize"):
            return self._resized(node, shape)
        if op == "Concat":
            shapes = [self.shape_of(t) for t in node.input if t]
            if any(s is None for s in shapes):
                return None
            axis = attr_int(node, "axis", 1) % len(shape)
            dims = list(shape)
            dims[axis] = sum(s[axis] for s in shapes if s is not None)
            return tuple(dims)
        return None

    def _resized(self, node: onnx.NodeProto, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        sizes = self.value(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        if sizes is not None and sizes.size:
            return tuple(int(d) for d in np.ravel(sizes))
        scales = floats(node, "scales")
        if scales is None:
            index = 1 if node.op_type == "Upsample" or len(node.input) == 2 else 2
            value = self.value(node.input[index]) if len(node.input) > index and node.input[index] else None
            if value is None or not value.size:
                return None
            scales = [float(s) for s in np.ravel(value)]
        return tuple(int(math.floor(d * s)) for d, s in zip(shape, scales, strict=True))


def _reshape(shape: tuple[int, ...], target: list[int], allowzero: bool) -> tuple[int, ...]:
    dims = [shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = math.prod(shape) // known
    if math.prod(dims) != math.prod(shape):
        raise ValueError(f"cannot reshape {shape} to {target}")
    return tuple(dims)
