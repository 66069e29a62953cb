"""The split bounds of the exhaustive search never exceed the best cost of their split, on nmp-like
machines (several clusters and cores, separate scratchpads, a flattened PE axis, per-burst DRAM
latency, strides), and the search with them still finds the brute-force optimum."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from helpers import toy_arch
from hypothesis import given, settings
from hypothesis import strategies as st

from tileplan.arch import load
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS
from tileplan.search import exhaustive
from tileplan.search.exhaustive import (
    input_line_cycles,
    longest_runs,
    min_compute_cycles,
    split_lower_bound,
    split_run_bound,
    split_tight_bound,
)
from tileplan.search.objective import Objective
from tileplan.search.space import class_orders, split_options
from tileplan.workload.layer import Layer, Precision

FLAT = [{"name": "v", "size": 4, "dims": ["P", "Q", "R", "S"], "mode": "flattened"}]


@st.composite
def nmp_like(draw):
    r = draw(st.integers(1, 3))
    prec = draw(st.sampled_from([Precision.uniform(1), Precision.uniform(2), Precision(1, 1, 1, 2)]))
    layer = Layer.conv("b", c_in=draw(st.integers(1, 2)), h=draw(st.integers(r, 5)), w=draw(st.integers(r, 5)),
                       k_out=draw(st.integers(1, 2)), r=r, pad=draw(st.integers(0, 1)),
                       stride=draw(st.integers(1, 2)), precision=prec)
    lanes = draw(st.integers(2, 5))
    arch = toy_arch(sizes=(draw(st.integers(8, 80)), draw(st.integers(4, 40)), draw(st.integers(8, 80))),
                    burst=draw(st.sampled_from([2, 4, 8, 16])), clusters=2, cores=2,
                    multicast=draw(st.booleans()), overlap=draw(st.booleans()),
                    axes=[{**FLAT[0], "size": lanes}])
    return Problem(layer, arch)


def split_best(problem: Problem, cl: tuple[int, ...], co: tuple[int, ...],
               orders: np.ndarray) -> dict[Objective, float]:
    """Best value of every objective over every tile vector and reuse-class loop order of one split."""
    grid = problem.core_grid(cl, co)
    tiles = np.array(list(product(*[range(1, n + 1) for n in grid.max_length])), dtype=np.int64)
    n = len(tiles) * len(orders)
    batch = MappingBatch(np.repeat(tiles, len(orders), axis=0), np.tile(orders, (len(tiles), 1)),
                         np.zeros((n, 3, NDIMS), dtype=bool), np.ones((n, NDIMS), dtype=np.int64),
                         np.tile(MappingBatch.default_layout_codes(), (n, 1)), cl, co)
    costs = evaluate(problem, batch)
    return {obj: float(obj.key(costs).min()) for obj in Objective}


@settings(max_examples=10, deadline=None)
@given(nmp_like())
def test_split_bounds_below_the_split_optimum_on_nmp_like_machines(problem: Problem) -> None:
    """lower <= run <= tight <= the split's optimum, for every split and objective (a flattened axis:
    the unrolling does not matter, so plain loop orders over every tile vector are the whole space)."""
    orders = class_orders()
    for cl, co in split_options(problem):
        best = split_best(problem, cl, co, orders)
        split = problem.split_slices(cl, co)
        for obj, value in best.items():
            if not np.isfinite(value):
                continue
            run = split_run_bound(problem, split, obj)
            tight = split_tight_bound(problem, split, obj, orders)
            assert split_lower_bound(problem, split, obj) <= run * (1 + 1e-12)
            assert run <= tight * (1 + 1e-12)
            assert tight <= value * (1 + 1e-12)


NMP_CASES = [
    (Layer.conv("down", c_in=3, h=6, w=6, k_out=2, r=1, stride=2, pad=0, precision=Precision.uniform(2)),
     dict(sizes=(24, 12, 16), burst=16, clusters=2, cores=2, axes=[{**FLAT[0], "size": 3}])),
    (Layer.conv("halo", c_in=2, h=5, w=4, k_out=2, r=3, pad=1, precision=Precision(1, 1, 1, 2)),
     dict(sizes=(20, 18, 24), burst=4, clusters=2, cores=2, multicast=False, axes=FLAT)),
]


@pytest.mark.parametrize("case", range(len(NMP_CASES)))
def test_exhaustive_equals_brute_force_on_nmp_like_machines(case: int) -> None:
    """The search (bounds pruning whole splits) finds the least value over every split, tile vector
    and reuse-class order (``test_search`` proves the orders and unrolling reductions by brute force;
    a flattened axis takes no unrolling)."""
    layer, cfg = NMP_CASES[case]
    problem = Problem(layer, toy_arch(**cfg))
    orders = class_orders()
    best = [split_best(problem, cl, co, orders) for cl, co in split_options(problem)]
    for objective in (Objective.LATENCY, Objective.ENERGY, Objective.EDP):
        found = float(objective.key(exhaustive(problem, objective).cost)[0])
        assert found == pytest.approx(min(b[objective] for b in best), rel=1e-12)


def test_longest_runs_and_flattened_compute_on_resnet50_down() -> None:
    """res4a_down (1x1, stride 2, 512 -> 1024 channels, 28x28 -> 14x14) on nmp, K over 4 clusters and
    P over 4 cores: an input run is one row window (Q whole: 27 columns of 28, stride 2); a weight
    run spans whole C rows (S and R are 1) of the core's 256 filters; an output run ends with the
    P slice: 4 rows of 14."""
    layer = Layer.conv("res4a_down", c_in=512, h=28, w=28, k_out=1024, r=1, stride=2, pad=0)
    problem = Problem(layer, load("nmp"))
    split = problem.split_slices((1, 1, 4, 1, 1, 1, 1, 1), (1, 1, 1, 1, 4, 1, 1, 1))
    assert longest_runs(problem, split) == (27, 512 * 256, 56)
    # Largest core: K 256, C 512, P 4, Q 14: 56 points per (k, c) on 8 lanes = 7 steps, exactly.
    assert min_compute_cycles(problem, split) == 256 * 512 * 7
    # P over 8 cores: 2 rows x 14 = 28 points on 8 lanes take 4 steps (32 lanes), not 3.5.
    split = problem.split_slices((1, 1, 4, 1, 1, 1, 1, 1), (1, 1, 1, 1, 7, 1, 1, 1))
    assert min_compute_cycles(problem, split) == 256 * 512 * 4
    assert longest_runs(problem, split)[0] == 27


def test_input_lines_of_a_stride_2_layer() -> None:
    """res4a_down on nmp, K over 4 clusters and P over 4 cores: Q is whole but a stride-2 window of
    14 output columns spans 27 of the 28 input columns, so every run lies in one row. The cheapest
    row is one tile of 14 columns: 54 bytes in one burst, 54 / 17 + 14 cycles, for 14 used columns;
    the 401,408 used input elements (4 cluster copies of 512 x 14 x 14) make 28,672 such rows."""
    layer = Layer.conv("res4a_down", c_in=512, h=28, w=28, k_out=1024, r=1, stride=2, pad=0)
    problem = Problem(layer, load("nmp"))
    split = problem.split_slices((1, 1, 4, 1, 1, 1, 1, 1), (1, 1, 1, 1, 4, 1, 1, 1))
    assert split.group_elements(problem, 0) == 401_408
    assert input_line_cycles(problem, split) == pytest.approx(28_672 * (54 / 17 + 14), rel=1e-12)
    # Q over 2 cores: 7 columns span 13; one burst of 26 bytes per row piece.
    split = problem.split_slices((1, 1, 4, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 2, 1, 1))
    assert input_line_cycles(problem, split) == pytest.approx(401_408 // 14 * 2 * (26 / 17 + 14), rel=1e-12)
    # A 3x3 stride-1 layer whose unsplit windows cover whole rows: runs may go on into the next row.
    wide = Problem(Layer.conv("c", c_in=8, h=14, w=14, k_out=8, r=3, pad=1), load("nmp"))
    assert input_line_cycles(wide, wide.split_slices((1,) * 8, (1,) * 8)) is None
