"""The compiled cost kernel (numba: no reference counting, trip tables, shifts, conditional moves)
gives bit for bit the costs of the vectorised numpy evaluation of the same model, on random batches
of a few thousand complete mappings (tiles, loop order, hoisting, unrolling, DRAM layouts, core
split) over several accelerators and layer shapes."""

from __future__ import annotations

import numpy as np
import pytest
from golden_batches import FIELDS, problem_of

from tileplan.cost import compiled
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate, evaluate_orders
from tileplan.dims import NDIMS, OPERANDS, RELEVANT
from tileplan.search.space import class_orders, spatial_options, split_options

# (network, layer, accelerator, index into split_options: 0 the unsplit layer, -1 the middle one)
CASES = [
    ("resnet50", "res3a_conv2", "nmp", -1),  # 3x3 conv, 4 clusters x 8 cores, several core shapes
    ("resnet50", "conv1", "nmp", 0),  # 7x7 stride 2
    ("resnet50", "res5a_down", "nmp", -1),  # 1x1 stride 2
    ("mobilenetv2", "block1_dw", "nmp", -1),  # depthwise
    ("lenet5", "fc1", "nmp", 4),  # fully connected
    ("resnet50", "res3a_conv2", "eyeriss", 0),
    ("resnet50", "conv1", "eyeriss", 0),
    ("mobilenetv2", "block2_add", "eyeriss", 0),  # elementwise add (two inputs)
    ("lenet5", "conv2", "hwff1", 0),
]


def _batch(problem, split: int, n: int, rng: np.random.Generator) -> MappingBatch:
    splits = split_options(problem)
    cl, co = splits[len(splits) // 2 if split < 0 else split]
    grid = problem.core_grid(cl, co)
    max_len = np.array(grid.max_length, dtype=np.int64)
    relevant = np.array([[d in RELEVANT[op] for d in range(NDIMS)] for op in OPERANDS])
    tiles = np.clip(np.floor(np.exp(rng.random((n, NDIMS)) * np.log(max_len + 1))).astype(np.int64), 1, max_len)
    tiles[: n // 4] = rng.integers(1, max_len + 1, size=(n // 4, NDIMS))  # uniform sizes too (the bench's)
    uopts = spatial_options(problem, grid.max_length)
    return MappingBatch(tiles, np.argsort(rng.random((n, NDIMS)), axis=1),
                        (rng.random((n, 3, NDIMS)) < 0.25) & relevant[None], uopts[rng.integers(0, len(uopts), size=n)],
                        rng.integers(0, 24, size=(8, 3))[rng.integers(0, 8, size=n)], cl, co)


@pytest.mark.parametrize(("net", "layer", "arch", "split"), CASES)
def test_compiled_kernel_equals_numpy_bit_for_bit(net: str, layer: str, arch: str, split: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if compiled.loop() is None:
        pytest.skip("numba not installed")
    problem = problem_of(net, layer, arch)
    batch = _batch(problem, split, 600, np.random.default_rng(11))
    if split != 0:
        assert len(problem.core_grid(batch.cluster_split, batch.core_split).shapes) > 1
    monkeypatch.setenv("TILEPLAN_KERNEL", "numpy")
    reference = evaluate(problem, batch)
    monkeypatch.setenv("TILEPLAN_KERNEL", "numba")
    costs = evaluate(problem, batch)
    assert reference.feasible.any()
    for f in FIELDS:
        np.testing.assert_array_equal(np.asarray(getattr(costs, f)), np.asarray(getattr(reference, f)),
                                      err_msg=f"{net}/{layer} on {arch}: {f}")
    # The search's path: every reuse-class loop order per mapping, one objective.
    orders = class_orders()
    sub = batch.take(np.arange(150))
    for objective in ("latency", "energy", "dram"):
        np.testing.assert_array_equal(evaluate_orders(problem, sub, orders, objective, compiled_path=True),
                                      evaluate_orders(problem, sub, orders, objective, compiled_path=False),
                                      err_msg=f"{net}/{layer} on {arch}: {objective} over loop orders")
