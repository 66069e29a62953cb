"""Compile every compiled loop of tileplan once (numba caches them on disk, next to their source).

This is the one module that knows every loop -- the cost kernel's (``cost.compiled``) and the search's
(``search.tile_product``) -- so it sits at the top of the library's layers, above all it compiles:
``make venv`` runs ``python -m tileplan.warmup``; the command line starts
``python -m tileplan.warmup --background LOCK`` (``cost.jit.compile_in_background``) when a fresh
install lacks them; ``tileplan bench`` compiles here before it times.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tileplan.arch import load as load_arch
from tileplan.cost import compiled, jit, kernel
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate_orders, tables_for
from tileplan.cost.problem import Problem
from tileplan.search import tile_product
from tileplan.search.space import _dominators, _pareto, class_orders, feasible_product, spatial_options, tile_groups
from tileplan.workload import zoo
from tileplan.workload.layer import Precision


def all_loops() -> list[Callable[..., Any]]:
    """The Python functions of every compiled loop (the cost kernel's and the search's)."""
    return [kernel.model_loop, kernel.unroll_loop, tile_product.walk, tile_product.front, tile_product.dominators]


def cached() -> bool:
    """Whether numba's on-disk cache holds every compiled loop (compiled from its current source)."""
    return all(jit.on_disk(f) for f in all_loops())


def warm_up() -> None:
    """Compile (or load from numba's cache) every loop, by running each on a tiny problem."""
    a = load_arch("nmp")
    problem = Problem(zoo.get("lenet5")["conv2"].with_precision(Precision.uniform(a.precision_bytes)), a)
    ones = (1,) * 8
    batch = MappingBatch(np.ones((2, 8), dtype=np.int64), np.tile(np.arange(8), (2, 1)),
                         np.zeros((2, 3, 8), dtype=bool), np.ones((2, 8), dtype=np.int64),
                         np.tile(MappingBatch.default_layout_codes(), (2, 1)), ones, ones)
    K = tables_for(problem, batch)
    compiled.evaluate(K, batch.tiles, batch.hoist, batch.unroll, batch.order, batch.layouts, 1, 1)
    evaluate_orders(problem, batch, class_orders(), "latency", compiled_path=True)
    grid = problem.core_grid(ones, ones)  # and the exhaustive search's walk of the feasible tile product
    feasible_product(problem, tile_groups(problem, grid, spatial_options(problem, grid.max_length)), compiled=True)
    _pareto(np.array([[1, 2], [2, 1], [2, 2]]), np.zeros((3, 1), dtype=np.int64), compiled=True)
    _dominators(np.array([[1, 2], [2, 1], [2, 2]]), np.array([[1], [2], [1]]), compiled=True)
    compiled.unroll_choice(K, batch.tiles, np.ones((2, 8), dtype=np.int64))


def compile_in_background() -> bool:
    """When numba's cache lacks a compiled loop (a fresh install that skipped ``make venv``), compile
    them all in a low-priority background process while this one runs their numpy twins; True when
    such a compile is running. The command line calls it before a command that plans."""
    if jit.mode() != "auto" or cached():
        return False  # decided without importing numba (finding its cache folder would)
    return jit.compile_in_background(all_loops(), jit.cache_folder(kernel.model_loop))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--background"]:
        jit.background_main(Path(sys.argv[2]), warm_up)
    else:
        warm_up()
