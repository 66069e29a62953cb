"""Every distinct layer of ResNet-50, MobileNetV2 and InceptionV3, on nmp and eyeriss: the generated
program's output is bit-exact and the DRAM bytes and bursts it moves equal the model's prediction.

Layers keep their kind, kernel, stride, padding, dilation and groups; channels are capped at 48 and
maps at 9 x 9 so the executor runs in seconds (`tileplan verify` checks full-size layers)."""

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
