"""Built-in networks, built from their published layer shapes. ``get(name, batch=1)`` returns one.

Every network is a DAG of layers: convolutions and FC layers carry weights; pools, residual adds,
concats and data moves (YOLOv2's reorg) are layers too. Batch norm and activations are folded into
the producing layer (they add no DRAM traffic). ``summary_rows`` gives the per-layer table that
``tileplan zoo show NAME`` renders.
"""

from __future__ import annotations

from collections.abc import Callable

from tileplan.dims import Operand
from tileplan.errors import WorkloadError
from tileplan.workload.layer import Layer, OpKind, Precision
from tileplan.workload.network import Network
from tileplan.workload.zoo.classic import alexnet, alexnet_grouped, lenet5, vgg16, vgg19
from tileplan.workload.zoo.densenet import densenet121
from tileplan.workload.zoo.inception import googlenet, inceptionv3
from tileplan.workload.zoo.marvel import marvel15
from tileplan.workload.zoo.mobile import mobilenetv2
from tileplan.workload.zoo.resnet import resnet18, resnet50, resnext50
from tileplan.workload.zoo.squeezenet import squeezenet1_0, squeezenet1_1
from tileplan.workload.zoo.yolo import tinyyolov2, yolov2

#: name -> builder taking the batch size.
BUILDERS: dict[str, Callable[[int], Network]] = {
    "lenet5": lenet5,
    "alexnet": alexnet,
    "alexnet_grouped": alexnet_grouped,
    "vgg16": vgg16,
    "vgg19": vgg19,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "resnext50": resnext50,
    "mobilenetv2": mobilenetv2,
    "squeezenet1_0": squeezenet1_0,
    "squeezenet1_1": squeezenet1_1,
    "googlenet": googlenet,
    "inceptionv3": inceptionv3,
    "densenet121": densenet121,
    "yolov2": yolov2,
    "tinyyolov2": tinyyolov2,
}


#: Workload sets: independent layers that papers evaluate, usable wherever a network name is.
SETS: dict[str, Callable[[int], Network]] = {"marvel15": marvel15}


def names() -> list[str]:
    """Names of the built-in networks, in a stable order."""
    return list(BUILDERS)


def get(name: str, batch: int = 1) -> Network:
    """The built-in network ``name`` at batch size ``batch``."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    for known, builder in (BUILDERS | SETS).items():
        if known.replace("_", "") == key:
            if batch < 1:
                raise WorkloadError(f"batch size must be positive, got {batch}")
            return builder(batch)
    raise WorkloadError(f"unknown network {name!r}; built-in networks are: {', '.join(BUILDERS)}; "
                        f"workload sets: {', '.join(SETS)} (or give a path to an .onnx file)")


def _kernel_cells(layer: Layer) -> tuple[str, str, str, int]:
    if layer.op in (OpKind.FC, OpKind.ADD, OpKind.CONCAT, OpKind.DATA_MOVE):
        return "-", "-", "-", 1
    return (f"{layer.r}x{layer.s}", f"{layer.stride[0]}x{layer.stride[1]}",
            ",".join(str(p) for p in layer.pad), layer.groups)


def summary_rows(network: Network) -> list[dict[str, str | int]]:
    """One row per layer for a table: ``name``, ``op``, ``input`` and ``output`` shapes (NxCxHxW),
    ``kernel`` (RxS), ``stride``, ``pad`` (top,bottom,left,right), ``groups``, ``macs``,
    ``weight_bytes``, ``input_bytes``, ``output_bytes`` and ``activation_bytes`` (input + output).

    Byte counts use the layer's precision, or 1 byte per element when it has none yet. Kernel cells
    are ``-`` for layers without a window (FC, add, concat, data move); ``input`` of an add counts
    one operand, its ``input_bytes`` all of them.

    >>> row = summary_rows(get("lenet5"))[0]
    >>> row["input"], row["output"], row["kernel"], row["macs"], row["weight_bytes"]
    ('1x1x32x32', '1x6x28x28', '5x5', 117600, 150)
    """
    rows: list[dict[str, str | int]] = []
    for layer in network.layers:
        precision = layer.precision or Precision()
        kernel, stride, pad, groups = _kernel_cells(layer)
        in_bytes = layer.elements(Operand.INPUT) * precision.input
        out_bytes = layer.elements(Operand.OUTPUT) * precision.output
        rows.append({
            "name": layer.name,
            "op": layer.op.value,
            "input": f"{layer.n}x{layer.c_in}x{layer.h}x{layer.w}",
            "output": f"{layer.n}x{layer.k_out}x{layer.p}x{layer.q}",
            "kernel": kernel,
            "stride": stride,
            "pad": pad,
            "groups": groups,
            "macs": layer.macs,
            "weight_bytes": layer.elements(Operand.WEIGHT) * precision.weight,
            "input_bytes": in_bytes,
            "output_bytes": out_bytes,
            "activation_bytes": in_bytes + out_bytes,
        })
    return rows
