"""Random mapping batches for the golden-costs test: (layer, accelerator, split) cases and a seeded
batch of mappings for each (random tiles, loop orders, hoisting, unrolling and DRAM layouts).

``python tests/golden_batches.py`` rewrites ``fixtures/model_golden.npz`` with the costs the model
gives now; the test asserts that the model still gives exactly these numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tileplan import api
from tileplan.cost.batch import MappingBatch
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS, OPERANDS, RELEVANT
from tileplan.search.space import spatial_options, split_options

GOLDEN = Path(__file__).parent / "fixtures" / "model_golden.npz"
CASES = [
    ("resnet50", "conv1", "nmp"), ("resnet50", "res3a_conv2", "nmp"), ("resnet50", "res4a_add", "nmp"),
    ("resnet50", "pool1", "nmp"), ("resnet50", "res5a_down", "nmp"), ("mobilenetv2", "block1_dw", "nmp"),
    ("resnet50", "conv1", "eyeriss"), ("resnet50", "res3a_conv2", "eyeriss"), ("lenet5", "fc1", "eyeriss"),
    ("mobilenetv2", "block2_add", "eyeriss"), ("inceptionv3", "Mixed_5b_5x5_2", "eplanner-a"),
    ("lenet5", "conv2", "hwff1"), ("resnet50", "res2a_conv2", "edge"), ("mobilenetv2", "block1_dw", "eplanner-c"),
]
FIELDS = ("feasible", "footprint_bytes", "dram_read_bytes", "dram_write_bytes", "dram_bursts", "dram_cycles",
          "compute_cycles", "noc_cycles", "latency_cycles", "energy_breakdown_pj")


def problem_of(net: str, layer: str, arch: str) -> Problem:
    a = api.load_arch(arch)
    return Problem(api.load_network(net)[layer].with_precision(api._precision(a, None)), a)


def batches(n: int = 150, seed: int = 7) -> list[tuple[Problem, MappingBatch]]:
    """Per case, two batches: the unsplit layer and a random core split."""
    rng = np.random.default_rng(seed)
    out = []
    relevant = np.array([[d in RELEVANT[op] for d in range(NDIMS)] for op in OPERANDS])
    for net, layer, arch in CASES:
        problem = problem_of(net, layer, arch)
        splits = split_options(problem)
        for s in sorted({0, int(rng.integers(0, len(splits)))}):
            cl, co = splits[s]
            grid = problem.core_grid(cl, co)
            max_len = np.array(grid.max_length, dtype=np.int64)
            uopts = spatial_options(problem, grid.max_length)
            tiles = np.floor(np.exp(rng.random((n, NDIMS)) * np.log(max_len + 1))).astype(np.int64)
            tiles = np.clip(tiles, 1, max_len)
            order = np.argsort(rng.random((n, NDIMS)), axis=1)
            hoist = (rng.random((n, 3, NDIMS)) < 0.25) & relevant[None]
            unroll = uopts[rng.integers(0, len(uopts), size=n)]
            layouts = rng.integers(0, 24, size=(n, 3))
            out.append((problem, MappingBatch(tiles, order, hoist, unroll, layouts, cl, co)))
    return out


def costs_arrays(evaluate) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """Every field of every case's costs, keyed ``<case>_<field>``."""
    out: dict[str, np.ndarray] = {}
    for i, (problem, batch) in enumerate(batches()):
        costs = evaluate(problem, batch)
        for f in FIELDS:
            out[f"{i}_{f}"] = np.asarray(getattr(costs, f))
    return out


if __name__ == "__main__":
    from tileplan.cost.model import evaluate

    np.savez_compressed(GOLDEN, **costs_arrays(evaluate))
