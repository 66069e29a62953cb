"""Convolutions and pools of the ONNX importer (mixed into ``_onnx_convert.Converter``): the window
arithmetic (strides, dilations, ``pads`` / ``auto_pad``, a folded Pad, ceil mode as end padding)."""

from __future__ import annotations

from pathlib import Path

import onnx

from tileplan.errors import UnsupportedOperatorError
from tileplan.workload._onnx_common import Namer, OnnxShapeError, attr_int, ceil_extra, ints, op_label, spatial_pads
from tileplan.workload._onnx_value import NCHW, _Value
from tileplan.workload.layer import Layer, OpKind


class WindowOps:
    """Conv and pool converters; rely on the ``Converter`` attributes and helpers."""

    path: Path
    values: dict[str, _Value]
    shapes: dict[str, tuple[int, ...]]
    namer: Namer

    def _window(self, node: onnx.NodeProto, tensor: str, kernel: list[int]
                ) -> tuple[tuple[str, ...], NCHW, tuple[int, int], tuple[int, int], NCHW]:
        """Producers, input, kernel, stride, dilation and (top, bottom, left, right) pads of a conv
        or pool, with any folded Pad added and ceil-mode rounding turned into end padding."""
        v = self.values[tensor]
        rank = len(v.shape) - 2
        if rank not in (1, 2) or len(kernel) != rank:
            raise UnsupportedOperatorError(f"{self.path}: {op_label(node)} node {node.name!r} works on "
                                           f"{rank}-D maps; tileplan plans 1-D and 2-D windows only")
        src, (n, c, h, w) = self._as_map(tensor, v)  # type: ignore[attr-defined]
        strides = ints(node, "strides", [1] * rank)
        dil = ints(node, "dilations", [1] * rank)
        begin, end = spatial_pads(node, v.shape[2:], kernel, strides, dil)
        if rank == 1:
            kernel, strides, dil, begin, end = kernel + [1], strides + [1], dil + [1], begin + [0], end + [0]
        pads = [begin[0] + v.pad[0], end[0] + v.pad[1], begin[1] + v.pad[2], end[1] + v.pad[3]]
        want = self.shapes.get(node.output[0])
        for axis, size in enumerate((h, w)):
            if want is None or len(want) < 3 + axis:
                continue
            extra = ceil_extra(size, pads[2 * axis], pads[2 * axis + 1], (kernel[axis] - 1) * dil[axis] + 1,
                               strides[axis], want[2 + axis])
            if extra < 0:
                raise OnnxShapeError(f"{self.path}: {op_label(node)} node {node.name!r}: inferred output "
                                     f"{want} is smaller than its window arithmetic gives; check its pads")
            pads[2 * axis + 1] += extra
        t, b, left, right = pads
        return src, (n, c, h, w), (strides[0], strides[1]), (dil[0], dil[1]), (t, b, left, right)

    def _conv(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        rank = len(self.values[tensor].shape)
        wshape = self._weight_shape(node, node.input[1], rank)  # type: ignore[attr-defined]
        groups = attr_int(node, "group", 1)
        src, (n, c, h, w), stride, dil, pads = self._window(node, tensor, list(wshape[2:]))
        if wshape[1] * groups != c:
            raise OnnxShapeError(f"{self.path}: Conv node {node.name!r}: weight {wshape} with group={groups} "
                                 f"does not match the {c} input channels")
        r, s = (wshape[2], wshape[3]) if rank == 4 else (wshape[2], 1)
        layer = Layer.conv(self.namer.take(name, "conv"), n=n, c_in=c, h=h, w=w, k_out=wshape[0], r=r, s=s,
                           stride=stride, pad=pads, dilation=dil, groups=groups, inputs=src)
        self._push(layer, node.output[0], self._out_shape(node, layer, rank))  # type: ignore[attr-defined]

    def _out_shape(self, node: onnx.NodeProto, layer: Layer, rank: int) -> tuple[int, ...]:
        own = (layer.n, layer.k_out, layer.p, layer.q)[:rank]
        return self.shapes.get(node.output[0], own)

    def _pool(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        rank = len(self.values[tensor].shape)
        kernel = ints(node, "kernel_shape", [])
        src, (n, c, h, w), stride, dil, pads = self._window(node, tensor, kernel)
        kernel = kernel + [1] if len(kernel) == 1 else kernel
        op = OpKind.MAXPOOL if node.op_type == "MaxPool" else OpKind.AVGPOOL
        layer = Layer(name=self.namer.take(name, "pool"), op=op, n=n, c_in=c, h=h, w=w, k_out=c, r=kernel[0],
                      s=kernel[1], groups=c, stride=stride, pad=pads, dilation=dil, inputs=src)
        self._push(layer, node.output[0], self._out_shape(node, layer, rank))  # type: ignore[attr-defined]
