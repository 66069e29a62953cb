"""The exhaustive search's shortcuts compute exactly what the slow forms compute (same numbers, so
the same visit order, pruning and plans)."""

from __future__ import annotations

import numpy as np
from helpers import toy_arch
from hypothesis import given, settings
from hypothesis import strategies as st

from tileplan.cost.model import reload_factors, reload_factors_orders
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS
from tileplan.search.exhaustive import _compulsory_elems
from tileplan.search.space import class_orders, split_options
from tileplan.workload.layer import Layer, Precision


@st.composite
def split_problem(draw):
    r = draw(st.integers(1, 5))
    layer = Layer.conv("s", n=draw(st.integers(1, 3)), c_in=draw(st.integers(1, 8)), h=draw(st.integers(r, 13)),
                       w=draw(st.integers(r, 13)), k_out=draw(st.integers(1, 9)), r=r, pad=draw(st.integers(0, 2)),
                       stride=draw(st.integers(1, 3)), precision=Precision.uniform(1))
    arch = toy_arch(clusters=draw(st.integers(1, 4)), cores=draw(st.integers(1, 5)), multicast=draw(st.booleans()))
    return Problem(layer, arch)


@settings(max_examples=40, deadline=None)
@given(split_problem())
def test_split_slices_equal_the_core_grid(problem: Problem) -> None:
    """Per-dimension split slices give the core grid's longest, shortest and largest cores and, per
    operand, the compulsory elements summed over the multicast groups, on every split."""
    for cl, co in split_options(problem):
        grid = problem.core_grid(cl, co)
        split = problem.split_slices(cl, co)
        assert split.max_length == grid.max_length
        assert split.min_length == tuple(min(c.length[d] for c in grid.cores) for d in DIMS)
        assert split.largest_core_points() == max(int(np.prod(c.length)) for c in grid.shapes)
        for op in OPERANDS:
            expect = sum(_compulsory_elems(problem, grid.cores[m[0]].offset, grid.cores[m[0]].length, op)
                         for m in grid.groups[op])
            assert split.group_elements(problem, op) == expect


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(1, 6), min_size=NDIMS, max_size=NDIMS), min_size=1, max_size=40))
def test_reload_factors_of_every_order_at_once(trips: list[list[int]]) -> None:
    """One vectorised pass over every reuse class equals ``reload_factors`` order by order."""
    t = np.array(trips, dtype=np.int64)
    orders = class_orders()
    rng = np.random.default_rng(len(trips))
    orders = np.concatenate([orders, np.array([rng.permutation(NDIMS) for _ in range(8)])])
    both = reload_factors_orders(orders, t)
    hoist = np.zeros((len(t), 3, NDIMS), dtype=bool)
    for j, order in enumerate(orders):
        assert np.array_equal(both[:, j], reload_factors(np.broadcast_to(order, t.shape), t, hoist))


@st.composite
def product_case(draw):
    r = draw(st.integers(1, 3))
    layer = Layer.conv("p", n=draw(st.integers(1, 2)), c_in=draw(st.integers(1, 12)), h=draw(st.integers(r, 12)),
                       w=draw(st.integers(r, 12)), k_out=draw(st.integers(1, 12)), r=r, pad=draw(st.integers(0, 1)),
                       stride=draw(st.integers(1, 2)), precision=Precision.uniform(draw(st.sampled_from([1, 2]))))
    unified = draw(st.booleans())
    size = draw(st.integers(16, 600))
    arch = toy_arch(unified=size if unified else None, sizes=(size, size // 2 + 8, size // 3 + 8), burst=8,
                    clusters=draw(st.integers(1, 2)), cores=draw(st.integers(1, 3)),
                    double_buffering=draw(st.booleans()),
                    axes=[{"name": "x", "size": 4, "dims": ["P", "Q", "R", "S"], "mode": "flattened"}]
                    if draw(st.booleans()) else None)
    return Problem(layer, arch)


@settings(max_examples=30, deadline=None)
@given(product_case())
def test_compiled_product_equals_the_vectorised_one(problem: Problem) -> None:
    """The compiled depth-first walk of the feasible product returns the breadth-first form's tile
    vectors, in the same order, on every split of random layers (memories shared or not, several
    core shapes, double buffering)."""
    from tileplan.search import space, tile_product

    if tile_product.compiled_walk() is None:
        return
    for cl, co in split_options(problem)[:6]:
        grid = problem.core_grid(cl, co)
        groups = space.tile_groups(problem, grid, space.spatial_options(problem, grid.max_length))
        slow = space.feasible_product(problem, groups, compiled=False)
        fast = space.feasible_product(problem, groups, compiled=True)
        assert slow.shape == fast.shape and np.array_equal(slow, fast)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31))
def test_compiled_front_equals_the_vectorised_one(rows: int, width: int, top: int, seed: int) -> None:
    """The compiled Pareto front keeps exactly the rows the vectorised loop keeps (ties, duplicates
    and classes included)."""
    from tileplan.search.space import _pareto

    rng = np.random.default_rng(seed)
    features = rng.integers(0, top + 1, size=(rows, width))
    classes = rng.integers(0, 2, size=(rows, 1))
    slow = _pareto(features, classes, compiled=False)
    fast = _pareto(features, classes, compiled=True)
    assert np.array_equal(slow, fast)
    assert 1 <= len(slow) <= rows
