"""Export a ``Network`` as an ONNX graph (shapes only: weights are zeros made by ``ConstantOfShape``,
so even VGG's 100M-element FC weights cost a few bytes in the file).

Batch norm and activations are not written (tileplan folds them on import anyway). A data move
becomes the ONNX op that matches its shapes: SpaceToDepth / DepthToSpace for a block re-arrangement,
a nearest-neighbour Resize for an integer upsample, an identity Transpose when the shape is kept
(e.g. a channel shuffle) and a Resize to the output size otherwise; ``load_onnx`` reads each of
them back as the same data move.
"""

from __future__ import annotations

import os
from typing import Any

import onnx
from onnx import TensorProto, helper

from tileplan.errors import WorkloadError
from tileplan.files import write_bytes_atomic
from tileplan.workload.layer import Layer, OpKind
from tileplan.workload.network import Network

__all__ = ["OPSET", "export_onnx", "to_onnx"]

#: The ONNX opset written (and the matching IR version, for older runtimes).
OPSET = 17
IR_VERSION = 8
INPUT = "input"


def export_onnx(network: Network, path: str | os.PathLike[str]) -> None:
    """Write ``network`` to ``path`` as a checked ONNX model (written to a temp file, then renamed)."""
    model = to_onnx(network)
    write_bytes_atomic(os.fspath(path), model.SerializeToString())


def to_onnx(network: Network) -> onnx.ModelProto:
    """``network`` as an ONNX model that passes ``onnx.checker.check_model(full_check=True)``."""
    model = _Exporter(network).build()
    onnx.checker.check_model(model, full_check=True)
    return model


class _Exporter:
    def __init__(self, network: Network) -> None:
        self.net = network
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rank: dict[str, int] = {INPUT: 4}  # tensor -> rank (4 for maps, 2 for FC outputs)
        self._cache: dict[tuple[str, str], str] = {}

    def build(self) -> onnx.ModelProto:
        for layer in self.net.layers:
            self._layer(layer)
        consumed = {src for layer in self.net.layers for src in layer.inputs}
        outputs = [self._info(layer.name, self._out_dims(layer)) for layer in self.net.layers
                   if layer.name not in consumed]
        graph = helper.make_graph(self.nodes, self.net.name, [self._info(INPUT, self.net.input_shape)],
                                  outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="tileplan")
        model.ir_version = IR_VERSION
        return model

    # ----------------------------------------------------------------- helpers
    def _info(self, name: str, dims: tuple[int, ...]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))

    def _out_dims(self, layer: Layer) -> tuple[int, ...]:
        if self.rank[layer.name] == 2:
            return (layer.n, layer.k_out)
        return (layer.n, layer.k_out, layer.p, layer.q)

    def _const(self, name: str, values: list[int] | list[float], dtype: int = TensorProto.INT64) -> str:
        self.inits.append(helper.make_tensor(name, dtype, [len(values)], values))
        return name

    def _zeros(self, layer: Layer, dims: list[int]) -> str:
        """A zero weight tensor of ``dims`` built at run time (keeps the file small)."""
        out = f"{layer.name}_weight"
        self.nodes.append(helper.make_node(
            "ConstantOfShape", [self._const(f"{layer.name}_weight_shape", dims)], [out], name=out,
            value=helper.make_tensor("value", TensorProto.FLOAT, [1], [0.0])))
        return out

    def _operands(self, layer: Layer) -> list[str]:
        srcs = list(layer.inputs)
        missing = layer.input_count - len(srcs) if layer.op is OpKind.ADD else (0 if srcs else 1)
        if missing:
            self._check_network_input(layer)
            srcs += [INPUT] * missing
        return srcs

    def _check_network_input(self, layer: Layer) -> None:
        n, c, h, w = self.net.input_shape
        fits = (layer.n, layer.c_in, layer.h, layer.w) == (n, c, h, w) or (
            layer.op is OpKind.FC and layer.n == n and layer.c_in == c * h * w)
        if not fits:
            raise WorkloadError(f"network {self.net.name!r}, layer {layer.name!r}: reads the network input "
                                f"{n}x{c}x{h}x{w} as {layer.n}x{layer.c_in}x{layer.h}x{layer.w}; cannot "
                                f"export it")

    def _as_map(self, tensor: str, layer: Layer) -> str:
        """``tensor`` as an N x C x H x W map (FC outputs are reshaped to N x K x 1 x 1)."""
        if self.rank[tensor] == 4:
            return tensor
        key = (tensor, "map")
        if key not in self._cache:
            out = f"{tensor}_as_map"
            shape = self._const(f"{out}_shape", [layer.n, -1, 1, 1])
            self.nodes.append(helper.make_node("Reshape", [tensor, shape], [out], name=out))
            self.rank[out] = 4
            self._cache[key] = out
        return self._cache[key]

    def _flat(self, tensor: str) -> str:
        if self.rank[tensor] == 2:
            return tensor
        key = (tensor, "flat")
        if key not in self._cache:
            out = f"{tensor}_flat"
            self.nodes.append(helper.make_node("Flatten", [tensor], [out], name=out, axis=1))
            self.rank[out] = 2
            self._cache[key] = out
        return self._cache[key]

    def _emit(self, op: str, layer: Layer, inputs: list[str], rank: int = 4, **attrs: Any) -> None:
        self.nodes.append(helper.make_node(op, inputs, [layer.name], name=layer.name, **attrs))
        self.rank[layer.name] = rank

    # ----------------------------------------------------------------- layers
    def _window_attrs(self, layer: Layer) -> dict[str, Any]:
        t, b, left, right = layer.pad
        return {"kernel_shape": [layer.r, layer.s], "strides": list(layer.stride),
                "pads": [t, left, b, right]}

    def _layer(self, layer: Layer) -> None:
        srcs = self._operands(layer)
        op = layer.op
        if op.has_weights and op is not OpKind.FC:
            weight = self._zeros(layer, [layer.k_out, layer.c_in // layer.groups, layer.r, layer.s])
            self._emit("Conv", layer, [self._as_map(srcs[0], layer), weight], group=layer.groups,
                       dilations=list(layer.dilation), **self._window_attrs(layer))
        elif op is OpKind.FC:
            weight = self._zeros(layer, [layer.k_out, layer.c_in])
            self._emit("Gemm", layer, [self._flat(srcs[0]), weight], rank=2, transB=1)
        elif op is OpKind.MAXPOOL:
            extra: dict[str, Any] = {"dilations": list(layer.dilation)} if layer.dilation != (1, 1) else {}
            self._emit("MaxPool", layer, [self._as_map(srcs[0], layer)], **self._window_attrs(layer), **extra)
        elif op is OpKind.AVGPOOL:
            if layer.dilation != (1, 1):
                raise WorkloadError(f"layer {layer.name!r}: a dilated average pool needs ONNX opset 19; "
                                    f"tileplan exports opset {OPSET}")
            self._emit("AveragePool", layer, [self._as_map(srcs[0], layer)], **self._window_attrs(layer))
        elif op is OpKind.GLOBALPOOL:
            self._emit("GlobalAveragePool", layer, [self._as_map(srcs[0], layer)])
        elif op is OpKind.ADD:
            maps = [self._as_map(s, layer) for s in srcs]
            self._emit("Add" if len(maps) == 2 else "Sum", layer, maps)
        elif op is OpKind.CONCAT:
            self._emit("Concat", layer, [self._as_map(s, layer) for s in srcs], axis=1)
        else:
            self._data_move(layer, srcs)

    def _data_move(self, layer: Layer, srcs: list[str]) -> None:
        if len(srcs) != 1:
            raise WorkloadError(f"layer {layer.name!r}: a data move gathering {len(srcs)} tensors (imported "
                                f"from a non-channel Concat) has no ONNX export; export the original model")
        x = self._as_map(srcs[0], layer)
        c, h, w, k, p, q = layer.c_in, layer.h, layer.w, layer.k_out, layer.p, layer.q
        block = h // p if p and h % p == 0 else 0
        if block > 1 and (h, w, k) == (p * block, q * block, c * block * block):
            self._emit("SpaceToDepth", layer, [x], blocksize=block)
            return
        block = p // h if p % h == 0 else 0
        if block > 1 and (p, q, c) == (h * block, w * block, k * block * block):
            self._emit("DepthToSpace", layer, [x], blocksize=block)
            return
        if k == c and (p, q) == (h, w):
            self._emit("Transpose", layer, [x], perm=[0, 1, 2, 3])
        elif k == c and p % h == 0 and q % w == 0:
            scales = self._const(f"{layer.name}_scales", [1.0, 1.0, float(p // h), float(q // w)],
                                 TensorProto.FLOAT)
            self._emit("Resize", layer, [x, "", scales], mode="nearest")
        else:
            sizes = self._const(f"{layer.name}_sizes", [layer.n, k, p, q])
            self._emit("Resize", layer, [x, "", "", sizes], mode="nearest")
