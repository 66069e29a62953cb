"""The exhaustive search's shortcuts compute exactly what the slow forms compute (same numbers, so
the same visit order, pruning and plans)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import toy_arch
from hypothesis import strategies as st
from sweeps import sweep

from tileplan.cost.model import reload_factors, reload_factors_orders
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS
from tileplan.search.space import class_orders, split_options
from tileplan.search.split_bounds import _compulsory_elems
from tileplan.workload.layer import Layer, Precision


@st.composite
def split_problem(draw):
    r = draw(st.integers(1, 5))
    layer = Layer.conv("s", n=draw(st.integers(1, 3)), c_in=draw(st.integers(1, 8)), h=draw(st.integers(r, 13)),
                       w=draw(st.integers(r, 13)), k_out=draw(st.integers(1, 9)), r=r, pad=draw(st.integers(0, 2)),
                       stride=draw(st.integers(1, 3)), precision=Precision.uniform(1))
    arch = toy_arch(clusters=draw(st.integers(1, 4)), cores=draw(st.integers(1, 5)), multicast=draw(st.booleans()))
    return Problem(layer, arch)


@sweep(12, 40, split_problem())
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


test_split_slices_equal_the_core_grid_full = test_split_slices_equal_the_core_grid.full  # 40 examples, under ``slow``


@sweep(10, 30, st.lists(st.lists(st.integers(1, 6), min_size=NDIMS, max_size=NDIMS), min_size=1, max_size=40))
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


test_reload_factors_of_every_order_at_once_full = test_reload_factors_of_every_order_at_once.full


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


@sweep(10, 30, product_case())
def test_compiled_product_equals_the_vectorised_one(problem: Problem) -> None:
    """The compiled depth-first walk of the feasible product returns the breadth-first form's tile
    vectors, in the same order, on every split of random layers (memories shared or not, several
    core shapes, double buffering)."""
    from tileplan.search import tile_product
    from tileplan.search.feasible_tiles import feasible_product
    from tileplan.search.space import spatial_options
    from tileplan.search.tile_groups import tile_groups

    if tile_product.compiled_walk() is None:
        return
    for cl, co in split_options(problem)[:6]:
        grid = problem.core_grid(cl, co)
        groups = tile_groups(problem, grid, spatial_options(problem, grid.max_length))
        slow = feasible_product(problem, groups, compiled=False)
        fast = feasible_product(problem, groups, compiled=True)
        assert slow.shape == fast.shape and np.array_equal(slow, fast)


test_compiled_product_equals_the_vectorised_one_full = test_compiled_product_equals_the_vectorised_one.full


@sweep(15, 40, st.lists(st.integers(1, 9), min_size=1, max_size=6), st.integers(1, 400), st.integers(0, 2**31))
def test_packed_lex_order_equals_lexsort(sizes: list[int], rows: int, seed: int) -> None:
    """The feasible product's picks sorted by one packed key come in exactly ``np.lexsort``'s order
    (first column first; duplicate picks keep their order)."""
    from tileplan.search.feasible_tiles import _lex_order

    rng = np.random.default_rng(seed)
    picks = np.stack([rng.integers(0, n, size=rows) for n in sizes], axis=1)
    assert np.array_equal(_lex_order(picks, sizes), np.lexsort(picks.T[::-1]))


test_packed_lex_order_equals_lexsort_full = test_packed_lex_order_equals_lexsort.full


@sweep(15, 40, st.integers(1, 300), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31))
def test_compiled_front_equals_the_vectorised_one(rows: int, width: int, top: int, seed: int) -> None:
    """The compiled Pareto front keeps exactly the rows the vectorised loop keeps (ties, duplicates
    and classes included)."""
    from tileplan.search.tile_groups import _pareto

    rng = np.random.default_rng(seed)
    features = rng.integers(0, top + 1, size=(rows, width))
    classes = rng.integers(0, 2, size=(rows, 1))
    slow = _pareto(features, classes, compiled=False)
    fast = _pareto(features, classes, compiled=True)
    assert np.array_equal(slow, fast)
    assert 1 <= len(slow) <= rows


test_compiled_front_equals_the_vectorised_one_full = test_compiled_front_equals_the_vectorised_one.full


def _fits_brute(box: np.ndarray, weights: np.ndarray, mem_of: np.ndarray, has: np.ndarray, cap: np.ndarray) -> bool:
    for m in range(len(cap)):
        for s in range(box.shape[0]):
            if sum(int(box[s, op]) * int(weights[op]) for op in range(3) if has[op] and mem_of[op] == m) > cap[m]:
                return False
    return True


@st.composite
def random_groups(draw):
    """Tile groups with random footprints (zeros included; some groups ordered, so the walk's
    bisection runs), random dominators, one to three core shapes and one to three memories."""
    from tileplan.search.tile_groups import TileGroup

    shapes = draw(st.integers(1, 3))
    groups = []
    for g in range(draw(st.integers(1, 5))):
        m = draw(st.integers(1, 7))
        foot = np.array(draw(st.lists(st.integers(0, 6), min_size=m * shapes * 3, max_size=m * shapes * 3)),
                        dtype=np.int64).reshape(m, shapes, 3)
        if draw(st.booleans()):
            foot = np.sort(foot, axis=0)  # footprints that never shrink along the candidates
        doms = np.full((m, 3), -1, dtype=np.int64)
        for a in range(m):
            picks = sorted(set(draw(st.lists(st.integers(0, m - 1), max_size=3))) - {a})
            doms[a, :len(picks)] = picks
        groups.append(TileGroup((DIMS[g],), np.arange(1, m + 1)[:, None], foot, doms))
    memories = draw(st.integers(1, 3))
    mem_of = np.array([draw(st.integers(0, memories - 1)) for _ in range(3)], dtype=np.int64)
    has = np.array([draw(st.booleans()) for _ in range(3)], dtype=bool)
    weights = np.array([draw(st.integers(1, 3)) for _ in range(3)], dtype=np.int64)
    cap = np.array([draw(st.integers(0, 400)) for _ in range(memories)], dtype=np.int64)
    return groups, weights, mem_of, has, cap


@sweep(20, 300, random_groups())
def test_compiled_walk_equals_the_definition_on_random_groups(case) -> None:
    """The compiled walk keeps exactly the combinations that fit and in which no candidate has a
    dominator that would fit in its place, in lexicographic order; the vectorised breadth-first form
    agrees."""
    from itertools import product as combos
    from types import SimpleNamespace

    from tileplan.search import feasible_tiles, tile_product

    groups, weights, mem_of, has, cap = case
    want = []
    for picks in combos(*[range(len(g.tiles)) for g in groups]):
        box = np.ones_like(groups[0].footprint[0])
        for g, c in zip(groups, picks, strict=True):
            box = box * g.footprint[c]
        if not _fits_brute(box, weights, mem_of, has, cap):
            continue
        if any(_fits_brute(box // np.maximum(g.footprint[c], 1) * g.footprint[alt], weights, mem_of, has, cap)
               for g, c in zip(groups, picks, strict=True) for alt in g.doms[c] if alt >= 0):
            continue
        want.append(picks)
    problem = SimpleNamespace(has_operand=tuple(bool(x) for x in has))
    shapes = groups[0].footprint.shape[1]
    lo = [np.ones((shapes, 3), dtype=np.int64) for _ in range(len(groups) + 1)]
    hi = [np.ones((shapes, 3), dtype=np.int64) for _ in range(len(groups) + 1)]
    for i in range(len(groups) - 1, -1, -1):
        lo[i] = lo[i + 1] * groups[i].footprint.min(axis=0)
        hi[i] = hi[i + 1] * groups[i].footprint.max(axis=0)
    slow = feasible_tiles._vectorised_rows(problem, groups, lo, hi, weights, mem_of, cap, 1 << 10)  # type: ignore[arg-type]
    assert [tuple(r) for r in slow.tolist()] == want
    if tile_product.compiled_walk() is None:
        return
    fast = feasible_tiles._compiled_rows(problem, groups, weights, mem_of, cap)  # type: ignore[arg-type]
    assert [tuple(r) for r in fast.tolist()] == want



test_compiled_walk_equals_the_definition_on_random_groups_full = \
    test_compiled_walk_equals_the_definition_on_random_groups.full


@sweep(15, 40, st.integers(1, 120), st.integers(1, 5), st.integers(1, 4), st.integers(0, 2**31))
def test_compiled_dominators_equal_the_vectorised_ones(rows: int, width: int, top: int, seed: int) -> None:
    """The compiled dominator loop returns the vectorised form's dominators (ties and duplicates included)."""
    from tileplan.search import tile_product
    from tileplan.search.tile_groups import _dominators

    if tile_product.compiled_dominators() is None:
        return
    rng = np.random.default_rng(seed)
    cost = rng.integers(0, top + 1, size=(rows, width))
    fp = rng.integers(0, top + 1, size=(rows, int(rng.integers(1, 4))))
    slow = _dominators(cost, fp, compiled=False)
    fast = _dominators(cost, fp, compiled=True)
    assert len(slow) == len(fast) == rows
    assert all(np.array_equal(a, b) for a, b in zip(slow, fast, strict=True))


test_compiled_dominators_equal_the_vectorised_ones_full = test_compiled_dominators_equal_the_vectorised_ones.full


@sweep(12, 40, split_problem())
def test_split_table_equals_the_split_slices(problem: Problem) -> None:
    """The split table's longest and shortest slices, largest cores and compulsory elements per
    operand equal each split's ``SplitSlices``."""
    from tileplan.cost.problem import SplitTable

    splits = split_options(problem)
    table = SplitTable.of(problem, splits)
    points = table.largest_core_points()
    elems = [table.group_elements(problem, op) for op in OPERANDS]
    for i, (cl, co) in enumerate(splits):
        split = problem.split_slices(cl, co)
        assert tuple(table.max_length[i]) == split.max_length
        assert tuple(table.min_length[i]) == split.min_length
        assert points[i] == split.largest_core_points()
        for op in OPERANDS:
            assert elems[op][i] == split.group_elements(problem, op)


test_split_table_equals_the_split_slices_full = test_split_table_equals_the_split_slices.full


def _same_bounds(problem: Problem, objectives: list) -> None:
    """Every split bound of the table form equals the scalar one bit for bit."""
    from tileplan.cost.problem import SplitTable
    from tileplan.search.split_bounds import (
        input_line_cycles,
        longest_runs,
        min_compute_cycles,
        split_lower_bound,
        split_run_bound,
        split_tight_bound,
    )
    from tileplan.search.split_bounds_table import (
        SplitBounds,
        input_line_cycles_table,
        longest_runs_table,
        min_compute_cycles_table,
    )

    splits = split_options(problem)
    table = SplitTable.of(problem, splits)
    orders = class_orders()
    runs, compute, lines = (longest_runs_table(problem, table), min_compute_cycles_table(problem, table),
                            input_line_cycles_table(problem, table))
    for i, (cl, co) in enumerate(splits):
        split = problem.split_slices(cl, co)
        assert tuple(runs[i]) == longest_runs(problem, split)
        assert compute[i] == min_compute_cycles(problem, split)
        line = input_line_cycles(problem, split)
        assert (line is None and (lines is None or np.isnan(lines[i]))) or (lines is not None and line == lines[i])
    for objective in objectives:
        bounds = SplitBounds.of(problem, table, objective)
        for i, (cl, co) in enumerate(splits):
            split = problem.split_slices(cl, co)
            assert bounds.lower[i] == split_lower_bound(problem, split, objective)
            assert bounds.run[i] == split_run_bound(problem, split, objective)
            assert bounds.tight(i, orders) == split_tight_bound(problem, split, objective, orders)


@sweep(4, 60, split_problem(), st.sampled_from([1, 2]), st.integers(0, 30))
def test_split_bounds_of_a_table_equal_the_scalar_ones(problem: Problem, prec: int, latency: int) -> None:
    """``SplitBounds`` (every split at once) gives the scalar bounds bit for bit: the same visit order
    and the same pruning, on random layers, machines and objectives, with and without burst latency."""
    from tileplan.search.objective import Objective

    arch = replace(problem.arch, dram=replace(problem.arch.dram, burst_latency_ns=float(latency)))
    layer = problem.layer.with_precision(Precision.uniform(prec))
    _same_bounds(Problem(layer, arch), list(Objective))


test_split_bounds_of_a_table_equal_the_scalar_ones_full = test_split_bounds_of_a_table_equal_the_scalar_ones.full


@pytest.mark.parametrize("names", [("res3a_conv2", "res3a_add"),
                                   pytest.param(("conv1", "res4a_down"), marks=pytest.mark.slow)])
def test_split_bounds_of_a_table_equal_the_scalar_ones_on_resnet50_and_nmp(names: tuple[str, ...]) -> None:
    """The same on real layers of ResNet-50 on nmp (hundreds of splits each: strides, halos, adds; the
    default run a 3 x 3 with halos and an add, the ``slow`` run the 7 x 7/2 stem and a 1 x 1/2 too)."""
    from tileplan import api
    from tileplan.search.objective import Objective

    arch = api.load_arch("nmp")
    net = api.load_network("resnet50").with_precision(api._precision(arch, None))
    for name in names:
        _same_bounds(Problem(net[name], arch), [Objective.LATENCY, Objective.ENERGY])


@sweep(20, 60,
       st.lists(st.tuples(st.sampled_from(["P", "Q", "K", "C", "R", "S", "N", "G"]), st.integers(1, 40)),
                min_size=8, max_size=8), st.integers(1, 3), st.integers(1, 17), st.integers(1, 17),
       st.sampled_from(["flattened", "unrolled"]))
def test_spatial_options_with_clipped_lengths_equal_the_full_ones(lengths, max_dims, rows, cols, mode) -> None:
    """The memo's clipped lengths give the options the full lengths give."""
    from tileplan.search import memo
    from tileplan.search.space import _spatial_options, spatial_options

    axes = [{"name": "r", "size": rows, "dims": ["P", "K", "C", "R"], "max_dims": max_dims},
            {"name": "c", "size": cols, "dims": ["Q", "K", "S", "N"], "mode": mode}]
    problem = Problem(Layer.conv("x", c_in=4, h=8, w=8, k_out=4, r=3), toy_arch(axes=axes))
    max_len = tuple(n for _, n in lengths)
    memo.clear()
    assert np.array_equal(spatial_options(problem, max_len), _spatial_options(problem, max_len))


test_spatial_options_with_clipped_lengths_equal_the_full_ones_full = (  # 60 examples, under ``slow``
    test_spatial_options_with_clipped_lengths_equal_the_full_ones.full)


@sweep(10, 30, split_problem())
def test_line_costs_shared_by_slices_inside_the_tensor_equal_their_own(problem: Problem) -> None:
    """Slices of one length whose input window lies inside the tensor share a cached line cost: it is
    each slice's own (computed from its halo table without the cache)."""
    from tileplan.cost.tables import halo_table
    from tileplan.search.split_bounds import _line_cost

    arch = problem.arch
    for axis, (d_out, d_k) in enumerate(((DIMS[4], DIMS[6]), (DIMS[5], DIMS[7]))):
        size = problem.in_h if axis == 0 else problem.in_w
        for length in range(1, int(problem.dims[d_out]) + 1):
            for offset in range(0, int(problem.dims[d_out]) - length + 1):
                table = halo_table(length, problem.input_window_start(axis, offset), size, problem.stride[axis],
                                   problem.dilation[axis], int(problem.dims[d_k]))
                every, _ = table.bursts(problem.precision.input, arch.dram.burst_bytes)
                line = table.sum_ext[:, :, 0, 0] * problem.precision.input / arch.dram_bytes_per_cycle + \
                    every[:, :, 0, 0] * arch.burst_latency_cycles
                assert _line_cost(problem, axis, offset, length) == float(line.min())


test_line_costs_shared_by_slices_inside_the_tensor_equal_their_own_full = (  # 30 examples, under ``slow``
    test_line_costs_shared_by_slices_inside_the_tensor_equal_their_own.full)


def _core_grid_reference(problem: Problem, cluster_split: tuple[int, ...], core_split: tuple[int, ...]):
    """The core grid as first written: cores, distinct shapes (first occurrence), multicast groups."""
    from itertools import product as combos

    from tileplan.cost.problem import CoreGrid, CoreSlice, _clip_key
    from tileplan.dims import RELEVANT, Dim
    from tileplan.mapping import balanced_parts

    per_dim_cluster = [balanced_parts(int(problem.dims[d]), cluster_split[d]) for d in DIMS]
    cores = []
    for cl_id, cl_choice in enumerate(combos(*[range(len(p)) for p in per_dim_cluster])):
        sub = []
        for d in DIMS:
            off, length = per_dim_cluster[d][cl_choice[d]]
            sub.append([(off + o, ln) for o, ln in balanced_parts(length, core_split[d])])
        for co_choice in combos(*[range(len(s)) for s in sub]):
            parts = [sub[d][co_choice[d]] for d in DIMS]
            cores.append(CoreSlice(cl_id, tuple(p[0] for p in parts), tuple(p[1] for p in parts)))
    keys: dict = {}
    shapes = []
    shape_of = np.empty(len(cores), dtype=np.int64)
    for i, core in enumerate(cores):
        key = (core.length, _clip_key(problem, 0, core), _clip_key(problem, 1, core))
        if key not in keys:
            keys[key] = len(shapes)
            shapes.append(core)
        shape_of[i] = keys[key]
    groups = []
    for op in OPERANDS:
        rel = [int(d) for d in DIMS if d in RELEVANT[op]]
        members: dict = {}
        for i, core in enumerate(cores):
            key = (core.cluster, *(core.offset[d] for d in rel), *(core.length[d] for d in rel)) \
                if problem.arch.cores.multicast else (i,)
            members.setdefault(key, []).append(i)
        groups.append(tuple(tuple(m) for m in members.values()))
    assert Dim.P in RELEVANT[0]
    return CoreGrid(tuple(cores), tuple(shapes), shape_of, tuple(groups))


@sweep(12, 40, split_problem())
def test_core_grid_equals_the_reference(problem: Problem) -> None:
    """The core grid lists the same cores, shapes (in the same order) and multicast groups as the
    plainly written form, on every split."""
    from tileplan.cost.problem import _core_grid

    for cl, co in split_options(problem):
        got, want = _core_grid(problem, cl, co), _core_grid_reference(problem, cl, co)
        assert got.cores == want.cores and got.shapes == want.shapes and got.groups == want.groups
        assert np.array_equal(got.shape_of, want.shape_of)


test_core_grid_equals_the_reference_full = test_core_grid_equals_the_reference.full  # 40 examples, under ``slow``
