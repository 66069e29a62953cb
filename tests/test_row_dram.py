"""The per-tile-vector DRAM bound of the exhaustive search (``search.row_dram``) and the pruning it drives
under the DRAM and energy objectives.

References: a plain walk of the loop nest that counts each operand's box loads (the reload factors),
the model's DRAM bytes of every tile vector under every loop order (the bound never exceeds them),
and the search with the bound switched off (the same mapping, key and split, on hypothesis-generated
layers and machines, on register-file machines with a bypassed operand, and on ResNet-18's layers).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import product

import numpy as np
import pytest
from helpers import small_problem as helpers_small_problem
from hypothesis import strategies as st
from sweeps import sweep
from test_rf_level import CASES as RF_CASES

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate, reload_factors_orders
from tileplan.cost.problem import Problem, SplitTable
from tileplan.dims import NDIMS, OPERANDS, RELEVANT, Dim
from tileplan.errors import InfeasibleError
from tileplan.search.hoist import NONE, WEIGHT_C, Hoist, reuse_orders
from tileplan.search.objective import Objective
from tileplan.search.row_dram import row_dram_bytes
from tileplan.search.space import class_orders, spatial_options, split_options
from tileplan.search.split_bounds_table import SplitBounds
from tileplan.workload.layer import Precision

EXHAUSTIVE = importlib.import_module("tileplan.search.exhaustive")
#: The costing of a chunk of tile vectors, which reads the bound and the first wave's size (patched here).
CHUNK = importlib.import_module("tileplan.search.chunk_search")


def walked_reloads(order: tuple[int, ...], trips: tuple[int, ...], hoist: np.ndarray) -> list[int]:
    """Each operand's box loads over the whole loop nest (a load whenever the box -- the indices of the
    loops that index the operand and are not hoisted for it -- differs from the previous iteration's),
    divided by its distinct boxes: the reload factor, counted by walking every iteration."""
    out = []
    for op in OPERANDS:
        mine = [p for p, d in enumerate(order) if Dim(d) in RELEVANT[op] and not hoist[op, d]]
        loads, last, boxes = 0, None, set()
        for index in product(*[range(trips[d]) for d in order]):
            box = tuple(index[p] for p in mine)
            boxes.add(box)
            if box != last:
                loads += 1
                last = box
        out.append(loads // len(boxes))
    return out


@sweep(20, 100, st.lists(st.integers(1, 3), min_size=NDIMS, max_size=NDIMS), st.permutations(list(range(NDIMS))),
       st.sampled_from([NONE, WEIGHT_C]))
def test_reload_factors_equal_the_walked_loads(trips: list[int], order: list[int], hoist: Hoist) -> None:
    """The model's ``reload_factors_orders`` and the bound's hoist-aware masks give the reload factors a walk of the
    nest counts (every order, not only the searched ones; a hoisted dimension does not index its operand)."""
    walked = walked_reloads(tuple(order), tuple(trips), hoist.array())
    t = np.array([trips])
    if hoist == NONE:
        assert reload_factors_orders(np.array([order]), t)[0, 0].tolist() == walked
    # the bound with one order and one operand's bytes at a time is that operand's factor x its bytes
    ones = np.ones((1, NDIMS), dtype=np.int64)  # tiles of 1 on slices of ``trips``: those trip counts
    for op in OPERANDS:
        g = np.zeros(4)
        g[op] = 1.0
        value = row_dram_bytes(np.array([order]), ones, np.array(trips), g, hoist.array())[0]
        expected = walked[op] if op != 2 else 1.0
        assert value == pytest.approx(expected, rel=1e-8)
    g = np.array([0.0, 0.0, 0.0, 1.0])  # partial sums: 2 (rho - 1) round trips
    assert row_dram_bytes(np.array([order]), ones, np.array(trips), g, hoist.array())[0] == \
        pytest.approx(2 * (walked[2] - 1), rel=1e-8, abs=1e-12)


def small_problem():
    """Small layers on small machines (``helpers.small_problem``), drawing ``multicast``."""
    precisions = st.sampled_from([Precision.uniform(1), Precision(1, 2, 1, 4)])
    return helpers_small_problem(precisions=precisions, flag="multicast")


@sweep(5, 25, small_problem(), st.sampled_from([NONE, WEIGHT_C]))
def test_row_dram_bytes_below_every_mapping(problem: Problem, hoist: Hoist) -> None:
    """On every split, the bound of every tile vector (fitting or not) is at most the model's DRAM bytes
    of that tile vector under each searched loop order, and equals it for some tile vector (not vacuous)."""
    splits = split_options(problem)
    table = SplitTable.of(problem, splits)
    bounds = SplitBounds.of(problem, table, Objective.DRAM)
    orders = class_orders() if hoist == NONE else reuse_orders(hoist)
    for i, (cl, co) in enumerate(splits):
        grid = problem.core_grid(cl, co)
        tiles = np.array(list(product(*[range(1, n + 1) for n in grid.max_length])), dtype=np.int64)
        n = len(tiles) * len(orders)
        batch = MappingBatch(np.repeat(tiles, len(orders), axis=0), np.tile(orders, (len(tiles), 1)),
                             np.broadcast_to(hoist.array(), (n, 3, NDIMS)).copy(), np.ones((n, NDIMS), dtype=np.int64),
                             np.tile(MappingBatch.default_layout_codes(), (n, 1)), cl, co)
        bound = row_dram_bytes(orders, tiles, table.min_length[i], bounds.group_bytes[i],
                               None if hoist == NONE else hoist.array())
        energy = SplitBounds.of(problem, table, Objective.ENERGY).row_dram_bounds(i, bound)
        for u in spatial_options(problem, grid.max_length):
            batch.unroll = np.broadcast_to(u, (n, NDIMS)).copy()
            costs = evaluate(problem, batch)
            model = costs.dram_bytes.reshape(len(tiles), len(orders))
            assert np.all(bound[:, None] <= model)
            assert np.any(bound >= model.min(axis=1) * (1 - 1e-6))
            assert np.all(energy[:, None] <= costs.energy_pj.reshape(len(tiles), len(orders)))


@contextmanager
def no_row_bound() -> Iterator[None]:
    """The exhaustive search with every tile vector's DRAM bound 0: nothing pruned by it."""
    real = CHUNK.row_dram_bytes
    CHUNK.row_dram_bytes = lambda orders, tiles, *rest: np.zeros(len(tiles))
    try:
        yield
    finally:
        CHUNK.row_dram_bytes = real


@sweep(10, 40, small_problem(), st.sampled_from([Objective.DRAM, Objective.ENERGY]), st.sampled_from([3, 50, 1 << 16]))
def test_dram_row_pruning_changes_no_choice(problem: Problem, objective: Objective, chunk: int) -> None:
    """Under the DRAM and energy objectives, costing tile vectors least bound first and never those whose bound
    exceeds a value found picks the very mapping, key and split the search without the bound picks,
    whatever the chunk size, and costs no more values."""
    first = CHUNK.FIRST_WAVE_MIN
    CHUNK.FIRST_WAVE_MIN = 1  # small chunks too: a first wave, then the rest pruned
    try:
        try:
            pruned = EXHAUSTIVE.search_splits(problem, objective, chunk=chunk)
        except InfeasibleError:
            return
        with no_row_bound():
            whole = EXHAUSTIVE.search_splits(problem, objective, chunk=chunk)
    finally:
        CHUNK.FIRST_WAVE_MIN = first
    assert (pruned.best is None) == (whole.best is None)
    if whole.best is not None and pruned.best is not None:
        assert pruned.best[0] == whole.best[0] and pruned.key == whole.key and pruned.rank == whole.rank
    assert pruned.evaluated <= whole.evaluated


test_dram_row_pruning_changes_no_choice_full = test_dram_row_pruning_changes_no_choice.full


def _same_with_and_without_bound(problem: Problem, objective: Objective) -> int:
    """The exhaustive search (register-file level included) with and without the bound: the same
    mapping and cost; returns how many values the bound saved."""
    found = EXHAUSTIVE.exhaustive(problem, objective)
    with no_row_bound():
        plain = EXHAUSTIVE.exhaustive(problem, objective)
    assert found.mapping == plain.mapping
    for name in ("dram_bytes", "latency_cycles", "energy_pj", "bursts"):
        assert np.array_equal(getattr(found.cost, name), getattr(plain.cost, name))
    assert found.evaluated <= plain.evaluated
    return plain.evaluated - found.evaluated


@pytest.mark.parametrize("objective", [Objective.DRAM, Objective.ENERGY])
@pytest.mark.parametrize("case", range(len(RF_CASES)))
def test_register_file_search_unchanged_by_the_bound(case: int, objective: Objective) -> None:
    """With an operand in the register files (the bypass searches prune against the plain value)."""
    layer, arch = RF_CASES[case]
    _same_with_and_without_bound(Problem(layer, arch), objective)


def test_resnet18_plans_unchanged_by_the_bound() -> None:
    """ResNet-18 planned for DRAM traffic on ``edge`` (its register files hold more than its buffer:
    the register-file level is searched too) and on ``eyeriss``, and for energy on ``eyeriss``: every
    layer's plan is the one the search without the bound makes, and the bound saves values on most
    layers."""
    from tileplan.api import plan

    for arch, objective in (("edge", "dram"), ("eyeriss", "dram"), ("eyeriss", "energy")):
        found = plan("resnet18", arch, objective=objective, jobs=1)
        with no_row_bound():
            plain = plan("resnet18", arch, objective=objective, jobs=1)
        searched = [(a, b) for a, b in zip(found.layers, plain.layers, strict=True) if b.evaluated]
        assert len(searched) >= 8
        for a, b in zip(found.layers, plain.layers, strict=True):
            assert a.mapping == b.mapping and a.cost == b.cost
        assert sum(a.evaluated < b.evaluated for a, b in searched) > len(searched) // 2


def test_no_tile_vectors_no_bounds() -> None:
    none = np.zeros((0, NDIMS), dtype=np.int64)
    assert row_dram_bytes(class_orders(), none, np.full(NDIMS, 3), np.ones(4)).shape == (0,)
