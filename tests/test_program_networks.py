"""Every distinct layer of ResNet-50, MobileNetV2 and InceptionV3, on nmp and eyeriss: the generated
program's output is bit-exact and the DRAM bytes and bursts it moves equal the model's prediction.

Layers keep their kind, kernel, stride, padding, dilation and groups; channels are capped at 48 and
maps at 9 x 9 so the executor runs in seconds (`tileplan verify` checks full-size layers)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tileplan import api
from tileplan.arch import load
from tileplan.cost.problem import Problem
from tileplan.program import verify_layer
from tileplan.search import Objective, random_search
from tileplan.workload.layer import Layer, OpKind


def shrink(layer: Layer) -> Layer:
    rows = max(layer.dilation[0] * (layer.r - 1) + 1 - layer.pad[0] - layer.pad[1], 1)
    cols = max(layer.dilation[1] * (layer.s - 1) + 1 - layer.pad[2] - layer.pad[3], 1)
    h = min(layer.h, max(rows + 2 * layer.stride[0], 9)) if layer.op is not OpKind.GLOBALPOOL else min(layer.h, 5)
    w = min(layer.w, max(cols + 2 * layer.stride[1], 9)) if layer.op is not OpKind.GLOBALPOOL else min(layer.w, 5)
    r, s = (h, w) if layer.op is OpKind.GLOBALPOOL else (layer.r, layer.s)
    if layer.op.channelwise:
        ch = min(layer.c_in, 48)
        return replace(layer, c_in=ch, k_out=ch, groups=ch, h=h, w=w, r=r, s=s, inputs=())
    g = layer.groups
    c_in = g * min(layer.c_in // g, max(48 // g, 1))
    k_out = g * min(layer.k_out // g, max(48 // g, 1))
    if layer.op is OpKind.FC:
        return replace(layer, c_in=min(layer.c_in, 64), k_out=min(layer.k_out, 48), inputs=())
    return replace(layer, c_in=c_in, k_out=k_out, h=h, w=w, r=r, s=s, inputs=())


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


@pytest.mark.parametrize("arch_name", ["nmp", "eyeriss"])
def test_programs_of_every_distinct_layer(arch_name: str) -> None:
    arch = load(arch_name)
    failures = []
    for label, layer in LAYERS:
        problem = Problem(layer, arch)
        mapping = random_search(problem, Objective.LATENCY, budget=128, seed=len(label)).mapping
        result = verify_layer(problem.layer, arch, mapping)
        if not result.ok:
            failures.append(f"{label}: {result.mismatches()}")
    assert not failures, "\n".join(failures)
    assert len(LAYERS) >= 35  # distinct geometries after shrinking (kind, kernel, stride, pad, groups)
