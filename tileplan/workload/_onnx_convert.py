"""Turns a topologically sorted, shape-inferred ONNX graph into tileplan layers (see ``onnx_import``).

Every activation tensor is tracked as a ``_Value``: the layer whose output holds its bytes, that
layer's (N, C, H, W) output, the tensor's own ONNX shape (views such as Flatten or Reshape change it
without moving data) and any Pad waiting to be folded into the next convolution or pool.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx

from tileplan.errors import UnsupportedOperatorError
from tileplan.workload._onnx_common import (
    ELEMENTWISE,
    GLOBAL_POOL,
    LINEAR,
    MOVE,
    POOL,
    REDUCE_POOL,
    UNARY_FOLD,
    VIEW,
    Constants,
    Namer,
    OnnxShapeError,
    attr,
    attr_int,
    canon,
    ints,
    op_label,
)
from tileplan.workload._onnx_fold import ShapeFolder
from tileplan.workload._onnx_value import _NO_PAD, NCHW, _Value
from tileplan.workload._onnx_window import WindowOps
from tileplan.workload._onnx_xformer import INT_TYPES, TransformerOps, token_view
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.transformer import matmul

#: Layer kinds whose outputs are transformer token tensors.
TOKEN_KINDS = frozenset({OpKind.MATMUL, OpKind.EMBEDDING, OpKind.SOFTMAX, OpKind.LAYERNORM, OpKind.RMSNORM,
                         OpKind.GELU, OpKind.SILU, OpKind.MUL, OpKind.ROPE})

class Converter(TransformerOps, WindowOps):
    """One pass over the nodes; ``layers`` is filled in topological order."""

    def __init__(self, path: Path, shapes: dict[str, tuple[int, ...]], consts: Constants,
                 static: set[str], used: set[str], producers: dict[str, onnx.NodeProto],
                 skip_unsupported: bool, nodes: list[onnx.NodeProto] | None = None) -> None:
        self.path = path
        self.used = used  # tensors some node or the graph output reads
        self.folder = ShapeFolder(consts, producers, self._known_shape)
        self.shapes = shapes
        self.consts = consts
        self.static = static
        self.skip = skip_unsupported
        self.layers: list[Layer] = []
        self.values: dict[str, _Value] = {}
        self.namer = Namer()
        self._adapted: dict[str, _Value] = {}
        self.skipped: list[str] = []
        self._last_reads: list[str] = []
        self._last_node = onnx.NodeProto()
        self.types: dict[str, int] = {}  # ONNX element type of every tensor whose type is known
        self.shapes_stopped = ""  # where shape propagation first failed (``_onnx_shapes.fill_shapes``)
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in nodes or []:
            for t in node.input:
                if t:
                    self.readers.setdefault(t, []).append(node)

    # ----------------------------------------------------------------- driver
    def add_input(self, name: str, shape: tuple[int, ...], elem_type: int = onnx.TensorProto.FLOAT) -> None:
        """A graph input; integer and boolean ones (token ids, attention masks) are masks."""
        self.values[name] = _Value(None, canon(shape), shape, mask=elem_type in INT_TYPES)

    def convert(self, node: onnx.NodeProto, index: int, supported: bool = True) -> None:
        """Fold ``node`` into its producer or append its layer(s); ``supported=False`` passes it
        through (identity or data movement) when skipping unsupported operators."""
        acts = [t for t in node.input if t and t not in self.static and t in self.values]
        self._last_reads = acts
        self._last_node = node
        if not acts and node.op_type == "Gather" and node.output[0] not in self.static:
            # rows of a weight table by computed ids (position embeddings): an embedding layer
            self._embedding(node, node.name or f"gather{index}")
            return
        if not acts:
            return
        op = op_label(node)
        # The raw name; it is sanitised and made unique only when a layer takes it.
        name = node.name or f"{node.op_type.lower()}{index}"
        if not supported:
            self._pass_through(node, name, acts[0])
        elif self.transformer_node(node, name, acts):
            return
        elif op in UNARY_FOLD or (op in ("Sum", "Mean") and len(acts) == 1):
            self._set(node.output[0], self.values[acts[0]])
        elif op in VIEW:
            v = self._no_pad(acts[0])
            self._set(node.output[0], replace(v, shape=self._shape(node.output[0], node)))
        elif op in ELEMENTWISE:
            self._elementwise(node, name, acts)
        elif op == "Conv":
            self._conv(node, name, acts[0])
        elif op in POOL:
            self._pool(node, name, acts[0])
        elif op in GLOBAL_POOL or op in REDUCE_POOL:
            self._global_pool(node, name, acts[0])
        elif op in LINEAR:
            self._linear(node, name, acts[0])
        elif op == "Concat":
            self._concat(node, name, acts)
        elif op == "Pad":
            self._pad(node, name, acts[0])
        elif op in MOVE:
            self._move(node.output[0], name, [acts[0]], self._shape(node.output[0], node))
        else:
            self._pass_through(node, name, acts[0])

    def _set(self, tensor: str, value: _Value) -> None:
        if tensor:
            self.values[tensor] = value

    def _known_shape(self, tensor: str) -> tuple[int, ...] | None:
        if tensor in self.values:
            return self.values[tensor].full_shape
        return self.shapes.get(tensor) or self.consts.shape(tensor)

    def _shape(self, tensor: str, node: onnx.NodeProto, default: tuple[int, ...] | None = None
               ) -> tuple[int, ...]:
        """``tensor``'s shape: inferred by ONNX, else computed by the folder, else ``default``."""
        shape = self.shapes.get(tensor)
        if shape is None and node.output and tensor == node.output[0]:
            shape = self.folder.output_shape(node)
        shape = default if shape is None else shape
        external = [t for t in node.input if t and self.consts.is_external(t) and (self.consts.shape(t) or (0,))
                    and math.prod(self.consts.shape(t) or (0,)) <= 64]
        if shape is None and external:
            raise OnnxShapeError(
                f"{self.path}: {op_label(node)} node {node.name!r} takes its shape from {external[0]!r}, which is "
                f"stored in an external data file (tileplan never reads weight files); save the model with "
                f"small tensors inline (onnx.save(..., save_as_external_data=True, size_threshold=1024))")
        if shape is None and self.shapes_stopped:
            raise OnnxShapeError(
                f"{self.path}: cannot infer the shape of tensor {tensor!r} produced by {op_label(node)} node "
                f"{node.name!r}: {self.shapes_stopped}; if --seq was given, it may exceed the model's positions")
        if shape is None:
            raise OnnxShapeError(
                f"{self.path}: cannot infer the shape of tensor {tensor!r} produced by {op_label(node)} node "
                f"{node.name!r}; give the model static input shapes and shape-computing constants (e.g. run "
                f"onnxsim or re-export with fixed sizes)")
        if any(d < 1 for d in shape):
            raise OnnxShapeError(f"{self.path}: tensor {tensor!r} of {op_label(node)} node {node.name!r} has "
                                 f"an empty shape {shape}; tileplan plans non-empty tensors only")
        return shape

    def _push(self, layer: Layer, tensor: str, shape: tuple[int, ...] | None = None, tokens: bool = False) -> _Value:
        layer = self._typed(layer, tensor)
        self.layers.append(layer)
        stored = (layer.n, layer.k_out, layer.p, layer.q)
        tokens = tokens or layer.op in TOKEN_KINDS or any(self.values[t].tokens for t in self._last_reads)
        value = _Value(layer.name, stored, shape if shape is not None else stored, tokens=tokens)
        self._set(tensor, value)
        return value

    # ----------------------------------------------------------------- operand adaptation
    def _no_pad(self, tensor: str) -> _Value:
        """The value with any pending pad materialised as a data move (for non-window consumers)."""
        v = self.values[tensor]
        if v.pad == _NO_PAD:
            return v
        key = f"{v.src}\0{v.pad_name}\0{v.pad}"  # one materialisation however many folds follow
        if key not in self._adapted:
            src, (n, c, h, w) = self._as_map(tensor, replace(v, pad=_NO_PAD))
            t, b, left, right = v.pad
            name = self.namer.take(v.pad_name, f"{tensor}_pad")
            self.layers.append(Layer.data_move(name, n=n, c_in=c, h=h, w=w, k_out=c, out_h=h + t + b,
                                               out_w=w + left + right, inputs=src))
            self._adapted[key] = _Value(name, (n, c, h + t + b, w + left + right), v.full_shape)
        return self._adapted[key]

    def _as_map(self, tensor: str, v: _Value, view: NCHW | None = None) -> tuple[tuple[str, ...], NCHW]:
        """(producer names, N x C x H x W) for a consumer reading ``v`` as ``view`` (default: its
        canonical shape); a view the producer does not write is materialised as a data move."""
        want = canon(v.shape) if view is None else view
        if v.src is None or want == v.stored:
            return ((v.src,) if v.src else ()), want
        if want[0] != v.stored[0]:
            raise OnnxShapeError(f"{self.path}: tensor {tensor!r} is reshaped across the batch dimension "
                                 f"({v.stored} -> {want}); tileplan keeps the batch dimension outermost")
        key = f"{tensor}\0{want}"
        if key not in self._adapted:
            n, c, h, w = v.stored
            name = self.namer.take(f"{tensor}_view", "view")
            self.layers.append(Layer.data_move(name, n=n, c_in=c, h=h, w=w, k_out=want[1], out_h=want[2],
                                               out_w=want[3], inputs=(v.src,)))
            self._adapted[key] = _Value(name, want, v.shape)
        adapted = self._adapted[key].src
        return ((adapted,) if adapted else ()), want

    def _as_layer_output(self, tensor: str) -> _Value:
        """The value, copied by a data move if it is a network input (concats need producers)."""
        v = self._no_pad(tensor)
        if v.src is not None:
            return v
        key = tensor + "\0copy"
        if key not in self._adapted:
            n, c, h, w = canon(v.shape)
            name = self.namer.take(f"{tensor}_copy", "copy")
            self.layers.append(Layer.data_move(name, n=n, c_in=c, h=h, w=w, k_out=c, out_h=h, out_w=w))
            self._adapted[key] = _Value(name, (n, c, h, w), v.shape)
        return self._adapted[key]

    # ----------------------------------------------------------------- converters
    def _elementwise(self, node: onnx.NodeProto, name: str, acts: list[str]) -> None:
        shapes = [self.values[t].full_shape for t in acts]
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            raise OnnxShapeError(
                f"{self.path}: {op_label(node)} node {node.name!r} combines activations of shapes "
                f"{' and '.join(map(str, shapes))}, which do not broadcast; if --seq was given, it may exceed "
                f"the rows of the model's position table") from None
        out = self._shape(node.output[0], node, self.values[acts[0]].full_shape)
        full = [t for t in acts if self.values[t].full_shape == out]
        if len(full) == 1:
            # One full-size activation; constants and broadcast side inputs (per-channel gates) fold.
            self._set(node.output[0], self.values[full[0]])
        elif not full:
            self._move(node.output[0], name, [acts[0]], out)
        else:
            view = token_view(out) if any(self.values[t].tokens for t in full) else canon(out)
            stored = {self._no_pad(t).stored for t in full}
            if len(stored) == 1 and any(self.values[t].tokens for t in full) and \
                    math.prod(next(iter(stored))) == math.prod(out):
                view = next(iter(stored))  # token tensors written alike: add them as they are
            srcs: list[str] = []
            for t in full:
                srcs += self._as_map(t, self._no_pad(t), view)[0]
            n, c, h, w = view
            name = self.namer.take(name, "add")
            self._push(Layer.add(name, n=n, channels=c, h=h, w=w, inputs=tuple(srcs), input_count=len(full)),
                       node.output[0], out)

    def _weight_shape(self, node: onnx.NodeProto, tensor: str, rank: int) -> tuple[int, ...]:
        shape = self.consts.shape(tensor) or self.shapes.get(tensor)
        if shape is None or len(shape) != rank:
            raise OnnxShapeError(f"{self.path}: the weight {tensor!r} of {op_label(node)} node {node.name!r} "
                                 f"has no known {rank}-D shape (got {shape}); the file may be truncated")
        return shape

    def _global_pool(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        v = self._no_pad(tensor)
        if node.op_type in REDUCE_POOL:
            axes = ints(node, "axes", [])
            if not axes and len(node.input) > 1:
                value = self.folder.value(node.input[1])
                axes = [] if value is None else [int(a) for a in np.ravel(value)]
            if sorted(a % len(v.shape) for a in axes) != [2, 3] or len(v.shape) != 4:
                raise UnsupportedOperatorError(f"{self.path}: {node.op_type} node {node.name!r} reduces axes "
                                               f"{axes} of a {len(v.shape)}-D tensor; only a reduction over "
                                               f"H and W (a global pool) is supported")
        src, (n, c, h, w) = self._as_map(tensor, v)
        layer = Layer.pool(self.namer.take(name, "pool"), kind="global", n=n, channels=c, h=h, w=w, r=h,
                           inputs=src)
        self._push(layer, node.output[0], self._shape(node.output[0], node, (n, c, 1, 1)))

    def _linear(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        v = self._no_pad(tensor)
        wshape = self._weight_shape(node, node.input[1], 2)
        trans_b = node.op_type == "Gemm" and bool(attr(node, "transB", 0))
        k_out, features = (wshape[0], wshape[1]) if trans_b else (wshape[1], wshape[0])
        if self.token_linear(node, name, v, features, k_out):
            return
        if len(v.shape) == 2 or node.op_type == "Gemm":
            n = v.shape[0]
            if math.prod(v.shape[1:]) != features:
                raise OnnxShapeError(f"{self.path}: {node.op_type} node {node.name!r}: input {v.shape} does "
                                     f"not have the {features} features its weight {wshape} expects")
            # Network accepts an FC reading any producer of the same batch and element count.
            src = self._as_map(tensor, v, (n, features, 1, 1))[0] if v.stored[0] != n else \
                ((v.src,) if v.src else ())
            layer = Layer.fc(self.namer.take(name, "fc"), n=n, c_in=features, k_out=k_out, inputs=src)
            self._push(layer, node.output[0], (n, k_out))
            return
        # A MatMul over the last axis of an N x ... x F tensor: a matmul with a weight B, m = middle axes.
        n, rows = v.shape[0], math.prod(v.shape[1:-1])
        if v.tokens and v.src and math.prod(v.stored) % (n * features * rows) == 0:
            src = (v.src,)  # a matmul reads a token tensor through views and slices
        else:
            src, _ = self._as_map(tensor, v, (n, features, rows, 1))
        layer = matmul(self.namer.take(name, "matmul"), batch=n, m=rows, k=features, n=k_out, inputs=src)
        value = self._push(layer, node.output[0])
        self.values[node.output[0]] = replace(value, shape=self._shape(node.output[0], node))

    def _concat(self, node: onnx.NodeProto, name: str, acts: list[str]) -> None:
        out = self._shape(node.output[0], node)
        axis = attr_int(node, "axis", 1) % len(out)
        operands = [t for t in node.input if t and t in self.values and t not in self.static]
        if axis != 1 or len(out) > 4 or len(operands) != len([t for t in node.input if t]):
            # Not a channel concat of activations only: gather the activations as a data move.
            self._move(node.output[0], name, acts, out)
            return
        graph_fed = any(self.values[t].src is None for t in operands)
        srcs: list[str] = []
        for t in operands:
            v = self._as_layer_output(t) if graph_fed else self._no_pad(t)
            srcs += self._as_map(t, v)[0]
        n, c, h, w = canon(out)
        layer = Layer.concat(self.namer.take(name, "concat"), n=n, channels=c, h=h, w=w, inputs=tuple(srcs))
        self._push(layer, node.output[0], out)

    def _pad(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        v = self.values[tensor]
        pads = ints(node, "pads", [])
        if not pads and len(node.input) > 1:
            value = self.folder.value(node.input[1])
            pads = [] if value is None else [int(p) for p in np.ravel(value)]
        rank = len(v.shape)
        axes = list(range(rank))
        if len(node.input) > 3 and node.input[3]:
            value = self.folder.value(node.input[3])
            axes = [] if value is None else [int(a) % rank for a in np.ravel(value)]
        full = [0] * (2 * rank)
        if len(pads) == 2 * len(axes) and axes:
            for i, axis in enumerate(axes):
                full[axis], full[rank + axis] = pads[i], pads[len(axes) + i]
            spatial_only = rank in (3, 4) and not any(full[a] or full[rank + a] for a in (0, 1))
            if spatial_only and min(full) >= 0:
                h_pad = (full[2], full[rank + 2])
                w_pad = (full[3], full[rank + 3]) if rank == 4 else (0, 0)
                pending = (v.pad[0] + h_pad[0], v.pad[1] + h_pad[1], v.pad[2] + w_pad[0], v.pad[3] + w_pad[1])
                self._set(node.output[0], replace(v, pad=pending, pad_name=name))
                return
        self._move(node.output[0], name, [tensor], self._shape(node.output[0], node))

    def _move(self, tensor: str, name: str, acts: list[str], out: tuple[int, ...]) -> None:
        """A DATA_MOVE layer reading ``acts`` (as their producers wrote them) and writing ``out``."""
        values = [self._no_pad(t) for t in acts]
        if any(v.src is None for v in values) and len(values) > 1:
            values = [self._as_layer_output(t) for t in acts]
        # A rank-3 result of token tensors, or a [N, C, L] map transposed to channels-last [N, L, C]
        # (ViT's patch embedding), is a token tensor: batch x tokens x features.
        node = self._last_node
        tokens = len(out) == 3 and (any(v.tokens for v in values) or (
            node.op_type == "Transpose" and ints(node, "perm", []) == [0, 2, 1]))
        n, k, p, q = token_view(out) if tokens else canon(out)
        if any(v.stored[0] != n for v in values):
            raise OnnxShapeError(f"{self.path}: node {name!r} moves data across the batch dimension "
                                 f"({[v.stored for v in values]} -> {out}); tileplan keeps the batch "
                                 f"outermost")
        elems = sum(math.prod(v.stored[1:]) for v in values)
        c, h, w = (elems // (p * q), p, q) if elems % (p * q) == 0 else (elems, 1, 1)
        if len(values) == 1:
            _, c, h, w = values[0].stored
        srcs = tuple(v.src for v in values if v.src)
        self._push(Layer.data_move(self.namer.take(name, "move"), n=n, c_in=c, h=h, w=w, k_out=k, out_h=p,
                                   out_w=q, inputs=srcs), tensor, out, tokens=tokens)

    def _pass_through(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        """An unsupported node: identity on its first activation when the shapes allow (or are
        unknown), else a data move from it."""
        if not self.skip:
            raise UnsupportedOperatorError(f"{self.path}: {op_label(node)} node {node.name!r} computes on an "
                                           f"activation in a way tileplan cannot plan; replace it, or pass "
                                           f"--skip-unsupported to import it as identity / data movement")
        self.skipped.append(f"{op_label(node)} ({name})")
        first = self.values[tensor]
        for i, out in enumerate(node.output):
            shape = self.shapes.get(out)
            if shape is None or shape == first.full_shape:
                self._set(out, first)
            elif out in self.used:
                self._move(out, name if i == 0 else f"{name}_out{i}", [tensor], self._shape(out, node))

    def warn_skipped(self) -> None:
        if self.skipped:
            warnings.warn(f"{self.path}: passed through {len(self.skipped)} unsupported node(s) as identity "
                          f"or data movement: {', '.join(self.skipped)}", stacklevel=3)
