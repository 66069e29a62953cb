"""Every distinct layer of ResNet-50, MobileNetV2 and InceptionV3, on nmp and eyeriss: the generated
program's output is bit-exact and the DRAM bytes and bursts it moves equal the model's prediction.

Layers keep their kind, kernel, stride, padding, dilation and groups; channels are capped at 48 and
maps at 9 x 9 so the executor runs in seconds (`tileplan verify` checks full-size layers). The default run
checks one layer of each kind (the first of each kind, a strided one and a non-square kernel included);
the ``slow`` run every distinct layer."""

from __future__ import annotations

import pytest
from helpers import shrink

from tileplan import api
from tileplan.arch import load
from tileplan.cost.problem import Problem
from tileplan.program import verify_layer
from tileplan.search import Objective, random_search
from tileplan.workload.layer import Layer, OpKind


def distinct_layers() -> list[tuple[str, Layer]]:
    out: dict[tuple[object, ...], tuple[str, Layer]] = {}
    for net in ("resnet50", "mobilenetv2", "inceptionv3"):
        for layer in api.load_network(net):
            if layer.op in (OpKind.CONCAT, OpKind.DATA_MOVE):
                continue
            small = shrink(layer)
            out.setdefault(small.signature(), (f"{net}/{layer.name}", small))
    return list(out.values())


LAYERS = distinct_layers()


def one_per_kind() -> list[tuple[str, Layer]]:
    """The first layer of each kind, plus the first with a non-square kernel (InceptionV3's 1 x 7 / 7 x 1)
    and the first strided depthwise and point-wise ones."""
    out: dict[tuple[object, ...], tuple[str, Layer]] = {}
    for label, layer in LAYERS:
        strided = layer.stride != (1, 1) and layer.op in (OpKind.DEPTHWISE, OpKind.POINTWISE)
        out.setdefault((layer.op,), (label, layer))
        if layer.r != layer.s:
            out.setdefault(("non-square",), (label, layer))
        if strided:
            out.setdefault((layer.op, "strided"), (label, layer))
    return list(out.values())


@pytest.mark.parametrize("subset", ["kinds", pytest.param("all", marks=pytest.mark.slow)])
@pytest.mark.parametrize("arch_name", ["nmp", "eyeriss"])
def test_programs_of_every_distinct_layer(arch_name: str, subset: str) -> None:
    arch = load(arch_name)
    layers = LAYERS if subset == "all" else one_per_kind()
    assert {x.op for _, x in layers} == {x.op for _, x in LAYERS}  # every kind in either run
    failures = []
    for label, layer in layers:
        problem = Problem(layer, arch)
        mapping = random_search(problem, Objective.LATENCY, budget=128, seed=len(label)).mapping
        result = verify_layer(problem.layer, arch, mapping)
        if not result.ok:
            failures.append(f"{label}: {result.mismatches()}")
    assert not failures, "\n".join(failures)
    assert len(LAYERS) >= 35  # distinct geometries after shrinking (kind, kernel, stride, pad, groups)
