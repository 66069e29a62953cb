"""Transformer patterns of the ONNX importer (mixed into ``_onnx_convert.Converter``).

What PyTorch's exporters write for a transformer, and what it becomes:

- ``MatMul`` of two activations (Q.K^T, P.V) -> a ``MATMUL`` layer whose B is an activation: the leading
  (batch x heads) axes are its groups; the Reshape / Transpose that split heads or transpose K are
  views of the producers' output (the matmul reads its operands through them).
- ``Softmax`` -> ``SOFTMAX``; ``LayerNormalization`` or its decomposition (ReduceMean, Sub, Pow,
  ReduceMean, Add, Sqrt, Div) -> ``LAYERNORM``; ``x * rsqrt(mean(x^2))`` -> ``RMSNORM``; ``Gelu`` or the
  Erf / Tanh form (``x * (1 + erf(x / sqrt 2)) / 2``) -> ``GELU``; ``x * sigmoid(x)`` -> ``SILU``.
- ``Gather`` of rows of a weight table by token ids -> ``EMBEDDING`` (the looked-up rows only).
- Integer or boolean graph inputs (token ids, attention masks) and everything computed from them
  alone (Unsqueeze, Cast, Sub, Mul, Where, And, IsNaN, Expand, ...) are *masks*: no layer; a mask
  added to (or selected into) an activation is a broadcast side input, folded like a bias.
- ``Split`` / ``Slice`` / ``Expand`` of an activation -> views (consumers read their part).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import onnx

from tileplan.errors import UnsupportedOperatorError
from tileplan.workload._onnx_common import OnnxShapeError, attr_int, ints, op_label
from tileplan.workload._onnx_value import _Value
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.transformer import elementwise, embedding, matmul

#: Ops on activations that become element-wise / row-wise layers.
ROW_OPS = {"Softmax": "softmax", "LayerNormalization": "layernorm", "Gelu": "gelu",
           "RMSNormalization": "rmsnorm", "SimplifiedLayerNormalization": "rmsnorm"}
#: Unary ops whose result, multiplied by their own input, is an activation function.
GATING = {"Erf": "gelu", "Tanh": "gelu", "Sigmoid": "silu"}
#: Ops that only select part of, or broadcast, an activation (views).
SLICING = frozenset({"Split", "Slice", "Expand"})
#: Ops a head-split Transpose may pass through on its way to a MatMul and stay a view.
VIEW_PATH = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Cast", "Identity", "Slice", "Split", "Expand",
                       "Neg", "Concat"})
#: Ops that compute masks (never activations) or select between an activation and a constant.
BOOL_OPS = frozenset({"And", "Or", "Not", "Xor", "IsNaN", "IsInf", "Equal", "Less", "LessOrEqual", "Greater",
                      "GreaterOrEqual"})
MASK_OPS = BOOL_OPS | {"Where", "Range", "CumSum", "Trilu"}
#: Bytes per element of the deliberate deployment types. fp32 is every exporter's default and says
#: nothing about the accelerator's datapath, so an fp32 tensor takes the accelerator's precision.
TYPE_BYTES: dict[int, int] = {onnx.TensorProto.FLOAT16: 2, onnx.TensorProto.BFLOAT16: 2, onnx.TensorProto.INT8: 1,
              onnx.TensorProto.UINT8: 1, onnx.TensorProto.FLOAT8E4M3FN: 1, onnx.TensorProto.FLOAT8E5M2: 1}
INT_TYPES: frozenset[int] = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16,
                       onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.BOOL})


def token_view(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """A ``[batch, ..., features]`` tensor as a layer tensor: n = batch, c = features, h = the rest."""
    if len(shape) < 2:
        return (1, max(1, math.prod(shape)), 1, 1)
    return (shape[0], shape[-1], math.prod(shape[1:-1]), 1)


class TransformerOps:
    """Converters of the transformer patterns; relies on the ``Converter`` attributes and helpers."""

    values: dict[str, _Value]
    layers: list[Layer]
    types: dict[str, int]

    # ----------------------------------------------------------------- dispatch
    def transformer_node(self, node: onnx.NodeProto, name: str, acts: list[str]) -> bool:
        """Handle ``node`` if it is a transformer pattern; False to let the CNN rules take it."""
        op = op_label(node)
        real = [t for t in acts if not self.values[t].mask]
        if not real:
            if op == "Gather" and node.input[0] in self.consts and node.input[0] not in self.values:  # type: ignore[attr-defined]
                self._embedding(node, name)
            else:  # computed from token ids / masks alone: a mask
                for out in node.output:
                    self._set(out, self._mask_value(out, node))  # type: ignore[attr-defined]
            return True
        if op in BOOL_OPS:  # a comparison of activations (e.g. IsNaN of the scores) is a mask
            for out in node.output:
                self._set(out, self._mask_value(out, node))  # type: ignore[attr-defined]
            return True
        if op == "Gather" and node.input[0] in real:  # a row of an activation (a class token): a view
            v = self._no_pad(node.input[0])  # type: ignore[attr-defined]
            self._set(node.output[0], replace(v, shape=self._shape(node.output[0], node)))  # type: ignore[attr-defined]
            return True
        if op in MASK_OPS or (op in ("Add", "Sub", "Mul", "Div") and len(real) < len(acts)):
            # a mask selected or added into an activation: a broadcast side input
            self._fold_into(node, real, name, [t for t in node.input if t in acts and t not in real])
            return True
        if op == "MatMul" and len(real) == 2:
            self._matmul2(node, name, real[0], real[1])
            return True
        if op in ROW_OPS:
            self._row_layer(node, name, real[0], ROW_OPS[op])
            return True
        if op == "ReduceMean" and self._last_axis_only(node, real[0]):
            v = self.values[real[0]]
            self._set(node.output[0], replace(v, shape=self._shape(node.output[0], node),  # type: ignore[attr-defined]
                                              stat_of=v.centered_of or v.key, centered_of=""))
            return True
        if op in ("Add", "Sub") and len(real) == 2 and self._same_source(real):
            return self._pointwise_of_one(node, name, real)
        if op == "Concat" and len(real) == len(acts) > 1 and self._same_source(real) and \
                attr_int(node, "axis", 0) % len(self.values[real[0]].shape) == len(self.values[real[0]].shape) - 1:
            # rotate_half(x) = cat(-x2, x1): a permutation within each row of the producer's output
            v = self.values[real[0]]
            self._set(node.output[0], replace(v, shape=self._shape(node.output[0], node), fn="rotated"))  # type: ignore[attr-defined]
            return True
        if op in ("Sub", "Div", "Mul") and len(real) == 2:
            return self._norm_step(node, name, real)
        if op in GATING and len(real) == 1:
            v = self.values[real[0]]
            if not v.stat_of:
                self._set(node.output[0], replace(v, fn=GATING[op]))  # type: ignore[attr-defined]
                return True
        if op in SLICING or op == "Transpose" and self._feeds_matmul(node.output[0]):
            v = self._no_pad(real[0])  # type: ignore[attr-defined]
            for out in node.output:
                if out:
                    self._set(out, replace(v, shape=self._shape(out, node)))  # type: ignore[attr-defined]
            return True
        if any(self.values[t].stat_of for t in real) and op not in ("Sqrt", "Reciprocal", "Add", "Pow", "Cast") and \
                not (op in ("Div", "Mul") and len(real) == 1):  # 1 / sqrt(mean + eps), a scaled statistic
            raise UnsupportedOperatorError(
                f"{self.path}: {op} node {node.name!r} uses a per-row statistic (a ReduceMean over the last "  # type: ignore[attr-defined]
                f"axis) outside a LayerNorm / RMSNorm pattern; export with LayerNormalization (opset >= 17)")
        return False

    def _typed(self, layer: Layer, tensor: str) -> Layer:
        """``layer`` with the per-operand precision its ONNX element types give (fp16 / bf16 / int8 /
        fp8; unchanged when its output is fp32 or untyped: the accelerator's precision then applies)."""
        out = TYPE_BYTES.get(self.types.get(tensor, 0))  # type: ignore[attr-defined]
        if out is None:
            return layer
        reads = [self.types.get(t, 0) for t in self._last_reads]  # type: ignore[attr-defined]
        data = next((TYPE_BYTES[t] for t in reads if t in TYPE_BYTES), out)
        consts = [t for t in self._last_node.input if t in self.consts.initializer_names]  # type: ignore[attr-defined]
        weight = next((TYPE_BYTES[self.types[w]] for w in consts if self.types.get(w) in TYPE_BYTES), data)
        if layer.b_activation:
            weight = TYPE_BYTES.get(reads[1], data) if len(reads) > 1 else data
        return replace(layer, precision=Precision(data, weight, out, out))

    # ----------------------------------------------------------------- masks and folding
    def _mask_value(self, tensor: str, node: onnx.NodeProto) -> _Value:
        shape = self.shapes.get(tensor) or ()  # type: ignore[attr-defined]
        return _Value(None, (1, 1, 1, 1), tuple(shape), mask=True)

    def _fold_into(self, node: onnx.NodeProto, real: list[str], name: str = "", masks: list[str] | None = None
                   ) -> None:
        """A mask combined with one full-size activation. A mask that is one row over the last axis
        (``[.., 1, n]``: BERT's padding mask) added, multiplied or selected into a token tensor is an
        element-wise layer reading that row (``broadcast``); other masks fold into the activation."""
        out = self._shape(node.output[0], node, self.values[real[0]].full_shape)  # type: ignore[attr-defined]
        full = [t for t in real if self.values[t].full_shape == out]
        if len(full) != 1:
            raise UnsupportedOperatorError(
                f"{self.path}: {op_label(node)} node {node.name!r} combines activations of shapes "  # type: ignore[attr-defined]
                f"{[self.values[t].full_shape for t in real]} through a mask; tileplan folds a mask only into "
                f"one full-size activation (an attention mask added to or selected into the scores)")
        rows = [self.values[m].shape for m in masks or []]
        row = len(rows) == 1 and bool(rows[0]) and rows[0][-1] == out[-1] > 1 and math.prod(rows[0][:-1]) == 1
        if row and self.values[full[0]].tokens and node.op_type in ("Add", "Mul", "Where"):
            n, c, h, _ = token_view(out)
            kind = "mul" if node.op_type == "Mul" else "add"  # a select costs as an add of the row
            layer = elementwise(self.namer.take(name, kind), kind, channels=c, rows=h, batch=n,  # type: ignore[attr-defined]
                                inputs=self._srcs(full), broadcast=True)
            self._push(layer, node.output[0], out)  # type: ignore[attr-defined]
            return
        self._set(node.output[0], self.values[full[0]])  # type: ignore[attr-defined]

    def _last_axis_only(self, node: onnx.NodeProto, tensor: str) -> bool:
        axes = ints(node, "axes", [])
        if not axes and len(node.input) > 1:
            value = self.folder.value(node.input[1])  # type: ignore[attr-defined]
            axes = [] if value is None else [int(a) for a in np.ravel(value)]
        rank = len(self.values[tensor].shape)
        return [a % rank for a in axes] == [rank - 1]

    def _feeds_matmul(self, tensor: str) -> bool:
        """Whether every reader of ``tensor`` is a MatMul, possibly through views, transposes and
        scalings by a constant (SDPA scales Q and K^T by d^-1/4 each); Shape readers do not count."""
        memo: dict[str, bool] = self.__dict__.setdefault("_matmul_fed", {})
        if tensor not in memo:
            memo[tensor] = False
            readers = [r for r in self.readers.get(tensor, []) if r.op_type not in ("Shape", "Size")]  # type: ignore[attr-defined]
            memo[tensor] = bool(readers) and all(self._matmul_path(r) for r in readers)
        return memo[tensor]

    def _matmul_path(self, reader: onnx.NodeProto) -> bool:
        if reader.op_type in ("MatMul", "Gemm"):
            return True
        # views, the rotary embedding's pointwise steps (x cos + rotate_half(x) sin) and the
        # repeat_kv Expand keep a head-split tensor a view of its producer up to the matmul
        through = reader.op_type in VIEW_PATH or reader.op_type in ("Mul", "Div", "Add", "Sub")
        return through and all(self._feeds_matmul(out) for out in reader.output if out)

    # ----------------------------------------------------------------- layers
    def _embedding(self, node: onnx.NodeProto, name: str) -> None:
        table = self.consts.shape(node.input[0])  # type: ignore[attr-defined]
        out = self._shape(node.output[0], node)  # type: ignore[attr-defined]
        if table is None or len(table) != 2 or attr_int(node, "axis", 0) != 0:
            raise UnsupportedOperatorError(f"{self.path}: Gather node {node.name!r} looks up a {table} table "  # type: ignore[attr-defined]
                                           f"along axis {attr_int(node, 'axis', 0)}; tileplan imports row "
                                           f"lookups of a 2-D weight table (embeddings) only")
        ids = self.folder.value(node.input[1])  # type: ignore[attr-defined]
        if ids is not None and ids.size and int(np.max(ids)) >= table[0]:
            raise OnnxShapeError(
                f"{self.path}: Gather node {node.name!r} looks up row {int(np.max(ids))} of the {table[0]}-row table "  # type: ignore[attr-defined]
                f"{node.input[0]!r}; the sequence is longer than the model's {table[0]} positions: give --seq "
                f"{table[0]} or less")
        n, dim, rows, _ = token_view(out)
        layer = embedding(self.namer.take(name, "embedding"), rows=rows, dim=dim, table_rows=table[0],  # type: ignore[attr-defined]
                          batch=n)
        self._push(layer, node.output[0], out)  # type: ignore[attr-defined]

    def token_linear(self, node: onnx.NodeProto, name: str, v: _Value, features: int, k_out: int) -> bool:
        """A Gemm / 2-D MatMul on a token tensor seen as 2-D, as a matmul over token rows: GPT-2's
        Conv1D ([batch x tokens, features]: Reshape to 2-D, Gemm, Reshape back; the batch stays
        outermost, no data moves) or one selected row (ViT's class token x[:, 0], read through the
        view as a matmul reads any token slice). False for an ordinary FC."""
        if len(v.shape) != 2 or v.src is None:
            return False
        if v.shape[0] > v.stored[0] and v.shape[0] % v.stored[0] == 0 and math.prod(v.stored) == math.prod(v.shape):
            batch, rows = v.stored[0], v.shape[0] // v.stored[0]
        elif v.tokens and v.stored[0] == v.shape[0] and math.prod(v.stored) > math.prod(v.shape) and \
                math.prod(v.stored) % math.prod(v.shape) == 0:
            batch, rows = v.shape[0], 1
        else:
            return False
        layer = matmul(self.namer.take(name, "matmul"), batch=batch, m=rows, k=features, n=k_out,  # type: ignore[attr-defined]
                       inputs=(v.src,))
        value = self._push(layer, node.output[0])  # type: ignore[attr-defined]
        self.values[node.output[0]] = replace(value, shape=(v.shape[0], k_out))
        return True

    def _srcs(self, tensors: list[str]) -> tuple[str, ...]:
        """Producers of operands read through views; a network input is copied first when a later
        operand has a producer (operands are matched to producers by position)."""
        values = [self._no_pad(t) for t in tensors]  # type: ignore[attr-defined]
        if values[0].src is None and any(v.src for v in values[1:]):
            values[0] = self._as_layer_output(tensors[0])  # type: ignore[attr-defined]
        return tuple(v.src for v in values if v.src)

    def _matmul2(self, node: onnx.NodeProto, name: str, a: str, b: str) -> None:
        out = self._shape(node.output[0], node)  # type: ignore[attr-defined]
        sa, sb = self.values[a].shape, self.values[b].shape
        if len(sa) < 2 or len(sb) < 2:
            raise UnsupportedOperatorError(f"{self.path}: MatMul node {node.name!r} of two activations with "  # type: ignore[attr-defined]
                                           f"shapes {sa} x {sb}; tileplan plans matrix (not vector) products")
        groups = math.prod(out[:-2])
        vb = self.values[b]
        repeat = math.prod(sb) // math.prod(vb.stored) if vb.src and math.prod(sb) % math.prod(vb.stored) == 0 else 1
        if repeat > 1 and math.prod(sb[:-2]) == groups and groups % repeat == 0:
            # B read through repeat_kv (Expand + Reshape of K/V to every query head): grouped-query
            # attention without the copy -- G = the KV heads, each group's query heads folded into P
            layer = matmul(self.namer.take(name, "matmul"), m=repeat * sa[-2], k=sa[-1], n=sb[-1],  # type: ignore[attr-defined]
                           groups=groups // repeat, b_activation=True, inputs=self._srcs([a, b]))
            value = self._push(layer, node.output[0], out)  # type: ignore[attr-defined]
            self.values[node.output[0]] = replace(value, shape=out)
            return
        if math.prod(sb[:-2]) != groups:
            raise UnsupportedOperatorError(
                f"{self.path}: MatMul node {node.name!r} broadcasts B {sb} over A {sa}; a matmul of two "  # type: ignore[attr-defined]
                f"activations needs one B per (batch x head) -- for grouped-query attention export K/V "
                f"with a KV-head axis (no repeat_kv Expand)")
        layer = matmul(self.namer.take(name, "matmul"), m=sa[-2], k=sa[-1], n=sb[-1], groups=groups,  # type: ignore[attr-defined]
                       b_activation=True, inputs=self._srcs([a, b]))
        value = self._push(layer, node.output[0], out)  # type: ignore[attr-defined]
        self.values[node.output[0]] = replace(value, shape=out)

    def _row_layer(self, node: onnx.NodeProto, name: str, tensor: str, kind: str) -> None:
        v = self._no_pad(tensor)  # type: ignore[attr-defined]
        out = self._shape(node.output[0], node, v.shape)  # type: ignore[attr-defined]
        # (the normalised axis does not change what it moves: one read and one write of the tensor)
        self._emit(name, kind, [tensor], out, node.output[0])

    def _emit(self, name: str, kind: str, tensors: list[str], out: tuple[int, ...], tensor: str) -> None:
        n, c, h, _ = token_view(out)
        layer = elementwise(self.namer.take(name, kind), kind, channels=c, rows=h, batch=n,  # type: ignore[attr-defined]
                            inputs=self._srcs(tensors), input_count=len(tensors))
        self._push(layer, tensor, out)  # type: ignore[attr-defined]

    def _same_source(self, tensors: list[str]) -> bool:
        """Whether the values are pointwise functions of one producer's output (not statistics)."""
        vals = [self.values[t] for t in tensors]
        return len({v.src for v in vals}) == 1 and vals[0].src is not None and \
            not any(v.stat_of or v.centered_of for v in vals)

    def _pointwise_of_one(self, node: onnx.NodeProto, name: str, real: list[str]) -> bool:
        """``f(x) + g(x)`` of one producer's output x: GELU's ``x + 0.044715 x^3`` stays a function
        of x (no layer); rotary embedding's ``x cos + rotate_half(x) sin`` is a ``rope`` layer."""
        va, vb = self.values[real[0]], self.values[real[1]]
        out = self._shape(node.output[0], node, va.shape)  # type: ignore[attr-defined]
        if math.prod(out) != math.prod(va.shape) or math.prod(out) != math.prod(vb.shape):
            return False
        if "rotated" in (va.fn, vb.fn):
            n, c, h, _ = va.stored
            layer = elementwise(self.namer.take(name, "rope"), "rope", channels=c, rows=h, batch=n,  # type: ignore[attr-defined]
                                inputs=self._srcs([real[0]]), row_channels=out[-1])
            value = self._push(layer, node.output[0], out)  # type: ignore[attr-defined]
            self.values[node.output[0]] = replace(value, stored=va.stored)
            return True
        self._set(node.output[0], replace(va, shape=out, fn=va.fn or vb.fn))  # type: ignore[attr-defined]
        return True

    def _norm_step(self, node: onnx.NodeProto, name: str, real: list[str]) -> bool:
        """One step of a decomposed norm or gated activation; False when the two operands are two
        unrelated activations (an ordinary element-wise layer)."""
        va, vb = self.values[real[0]], self.values[real[1]]
        op = node.op_type
        stat = va if va.stat_of else vb if vb.stat_of else None
        other = vb if stat is va else va
        if stat is not None:
            out = self._shape(node.output[0], node, other.shape)  # type: ignore[attr-defined]
            if op == "Sub" and other.key == stat.stat_of:  # x - mean(x)
                self._set(node.output[0], replace(other, centered_of=other.key, shape=out))  # type: ignore[attr-defined]
                return True
            if op in ("Div", "Mul") and stat.stat_of in (other.key, other.centered_of):
                kind = "layernorm" if other.centered_of else "rmsnorm"
                source = real[1] if stat is va else real[0]
                self._emit(name, kind, [source], out, node.output[0])
                return True
            return False
        if op == "Mul" and va.src == vb.src and va.shape == vb.shape and (va.fn or vb.fn):
            out = self._shape(node.output[0], node, va.shape)  # type: ignore[attr-defined]
            self._emit(name, va.fn or vb.fn, [real[0]], out, node.output[0])
            return True
        if op == "Mul" and va.shape == vb.shape and not (va.fn or vb.fn):
            out = self._shape(node.output[0], node, va.shape)  # type: ignore[attr-defined]
            if any(self.values[t].tokens for t in real):
                self._emit(name, "mul", real, out, node.output[0])
                return True
        return False


def check_matmul_shapes(path: object, node: onnx.NodeProto, sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    """Raise ``OnnxShapeError`` when a MatMul's inner dimensions disagree."""
    if sa[-1] != sb[-2]:
        raise OnnxShapeError(f"{path}: MatMul node {node.name!r} multiplies {sa} by {sb}: inner sizes differ")
