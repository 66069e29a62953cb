"""Compile every compiled loop of tileplan once: with numba (it caches them on disk, next to their
source), then into one extension module per loop module (``cost.aot``: loaded without numba).

This is the one module that knows every loop -- the cost kernel's (``cost.compiled``) and the search's
(``search.tile_product``) -- so it sits at the top of the library's layers, above all it compiles:
``make venv`` runs ``python -m tileplan.warmup``; the command line starts
``python -m tileplan.warmup --background LOCK`` (``cost.jit.compile_in_background``) when a fresh
install lacks them; ``tileplan bench`` compiles here before it times.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tileplan.arch import load as load_arch
from tileplan.cost import aot, compiled, jit, kernel
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate_orders, tables_for
from tileplan.cost.problem import Problem
from tileplan.search import tile_product
from tileplan.search.feasible_tiles import feasible_product
from tileplan.search.space import class_orders, spatial_options
from tileplan.search.tile_groups import _dominators, _pareto, tile_groups
from tileplan.workload.layer import Precision


def extensions() -> list[tuple[aot.Extension, dict[str, Callable[[], Any]], str]]:
    """Every loop module's extension (``cost.aot``), with its loops' numba dispatchers (by name) and
    numba error model."""
    return [(compiled.EXTENSION, {"model_loop": compiled.loop, "unroll_loop": compiled.unroll_loop},
             compiled.ERROR_MODEL),
            (tile_product.EXTENSION, {"walk": tile_product.numba_walk, "front": tile_product.numba_front,
                                      "dominators": tile_product.numba_dominators}, tile_product.ERROR_MODEL)]


def built() -> bool:
    """Whether every loop module's extension is built for the current sources and this CPU (loading it;
    a corrupt one is removed here, see ``cost.aot.load``)."""
    return all(aot.load(ext, loaders) is not None for ext, loaders, _ in extensions())


def build_extensions() -> list[str]:
    """Build every loop module's extension that is missing, from numba's compiled loops (run
    :func:`warm_up` first); returns one line per extension that could not be built (e.g. no C compiler:
    its loops then load from numba's cache, about 0.4 s more per command), noted so that a background
    compile does not try again."""
    problems = []
    for ext, loaders, error_model in extensions():
        if aot.load(ext, loaders) is not None:
            continue
        try:
            aot.build(ext, {name: loader() for name, loader in loaders.items()}, error_model=error_model)
            if aot.load(ext, loaders) is None:
                raise RuntimeError("the built extension does not load")
        except Exception as err:  # noqa: BLE001 - numba's compiler, the C compiler or the linker
            problem = f"{ext.name}: {type(err).__name__}: {(str(err).strip().splitlines() or [''])[-1]}"[:300]
            aot.mark_failed(ext, problem)
            problems.append(problem)
    return problems


def all_loops() -> list[Callable[..., Any]]:
    """The Python functions of every compiled loop (the cost kernel's and the search's)."""
    return [kernel.model_loop, kernel.unroll_loop, tile_product.walk, tile_product.front, tile_product.dominators]


def cached() -> bool:
    """Whether numba's on-disk cache holds every compiled loop (compiled from its current source)."""
    return all(jit.on_disk(f) for f in all_loops())


def warm_up() -> None:
    """Compile (or load from numba's cache) every loop with numba, by running each on a tiny problem."""
    before = os.environ.get("TILEPLAN_KERNEL")
    os.environ["TILEPLAN_KERNEL"] = "numba"  # numba's loops, not the extensions
    try:
        _run_each_loop()
    finally:
        if before is None:
            os.environ.pop("TILEPLAN_KERNEL", None)
        else:
            os.environ["TILEPLAN_KERNEL"] = before


def _tiny_batch() -> tuple[Problem, MappingBatch]:
    """LeNet-5's conv2 on ``nmp`` and two mappings of it: what :func:`warm_up` runs every loop on."""
    from tileplan.workload import zoo  # (here: a command checks for the loops without loading the zoo)

    a = load_arch("nmp")
    problem = Problem(zoo.get("lenet5")["conv2"].with_precision(Precision.uniform(a.precision_bytes)), a)
    ones = (1,) * 8
    batch = MappingBatch(np.ones((2, 8), dtype=np.int64), np.tile(np.arange(8), (2, 1)),
                         np.zeros((2, 3, 8), dtype=bool), np.ones((2, 8), dtype=np.int64),
                         np.tile(MappingBatch.default_layout_codes(), (2, 1)), ones, ones)
    return problem, batch


def _run_each_loop() -> None:
    problem, batch = _tiny_batch()
    ones = (1,) * 8
    K = tables_for(problem, batch)
    compiled.evaluate(K, batch.tiles, batch.hoist, batch.unroll, batch.order, batch.layouts, 1, 1)
    evaluate_orders(problem, batch, class_orders(), "latency", compiled_path=True)
    grid = problem.core_grid(ones, ones)  # and the exhaustive search's walk of the feasible tile product
    feasible_product(problem, tile_groups(problem, grid, spatial_options(problem, grid.max_length)), compiled=True)
    _pareto(np.array([[1, 2], [2, 1], [2, 2]]), np.zeros((3, 1), dtype=np.int64), compiled=True)
    _dominators(np.array([[1, 2], [2, 1], [2, 2]]), np.array([[1], [2], [1]]), compiled=True)
    compiled.unroll_choice(K, batch.tiles, np.ones((2, 8), dtype=np.int64))


def compile_in_background() -> bool:
    """When an extension is missing (``cost.aot``: a fresh install that skipped ``make venv``, or a
    changed source) and was not found impossible to build, or numba's cache lacks a compiled loop,
    compile them all in a low-priority background process while this one runs numba's cached loops or
    the numpy twins; True when such a compile is running. The command line calls it before a command
    that plans."""
    if jit.mode() != "auto" or built():
        return False  # decided without importing numba
    holds = cached()  # (reading numba's cache removes corrupt files of it)
    build = not all(aot.failed(ext) or aot.load(ext, loaders) is not None for ext, loaders, _ in extensions())
    if not build and holds:
        return False
    return jit.compile_in_background(all_loops(), jit.cache_folder(kernel.model_loop), build=build)


def main(argv: list[str]) -> int:
    """``python -m tileplan.warmup [--background LOCK]``: compile (or load) every loop, after removing
    corrupt cache files (one note each); a failure is one line on stderr and exit code 1."""
    for index, problem in jit.heal(all_loops()):
        print(f"note: removed a corrupt numba cache file ({Path(index).name}: {problem}); compiling it again",
              file=sys.stderr)
    background = argv[:1] == ["--background"]
    problems: list[str] = []

    def compile_all() -> None:
        warm_up()
        problems.extend(build_extensions() if not background else _build_unless_failed())

    try:
        if background:
            jit.background_main(Path(argv[1]), compile_all)
        else:
            compile_all()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the one line a user sees instead of numba's traceback
        if os.environ.get("TILEPLAN_DEBUG"):
            raise
        print(f"error: compiling the cost kernel failed ({type(err).__name__}: {str(err)[:300]}); remove "
              f"{jit.cache_folder(kernel.model_loop)}/*.nb* and run again, or set TILEPLAN_KERNEL=numpy",
              file=sys.stderr)
        return 1
    for problem in problems:
        print(f"note: the compiled loops' extension was not built ({problem}); they load from numba's cache "
              f"instead (about 0.4 s more per command)", file=sys.stderr)
    return 0


def _build_unless_failed() -> list[str]:
    """:func:`build_extensions`, unless building one failed before for the current sources."""
    if any(aot.failed(ext) for ext, _, _ in extensions()):
        return []
    return build_extensions()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
