"""Built-in networks, built from their published layer shapes. ``get(name, batch=1)`` returns one."""

from __future__ import annotations

from collections.abc import Callable

from tileplan.errors import WorkloadError
from tileplan.workload.network import Network
from tileplan.workload.zoo.classic import alexnet, lenet5, vgg16
from tileplan.workload.zoo.resnet import resnet50

#: name -> builder taking the batch size.
BUILDERS: dict[str, Callable[[int], Network]] = {
    "lenet5": lenet5,
    "alexnet": alexnet,
    "vgg16": vgg16,
    "resnet50": resnet50,
}


def names() -> list[str]:
    """Names of the built-in networks, in a stable order."""
    return list(BUILDERS)


def get(name: str, batch: int = 1) -> Network:
    """The built-in network ``name`` at batch size ``batch``."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    for known, builder in BUILDERS.items():
        if known.replace("_", "") == key:
            if batch < 1:
                raise WorkloadError(f"batch size must be positive, got {batch}")
            return builder(batch)
    raise WorkloadError(f"unknown network {name!r}; built-in networks are: {', '.join(BUILDERS)} "
                        f"(or give a path to an .onnx file)")
