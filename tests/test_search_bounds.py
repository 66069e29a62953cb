"""The split bounds of the exhaustive search never exceed the best cost of their split, on nmp-like
machines (several clusters and cores, separate scratchpads, a flattened PE axis, per-burst DRAM
latency, strides), and the search with them still finds the brute-force optimum."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from helpers import small_problem as helpers_small_problem
from helpers import toy_arch
from hypothesis import strategies as st
from sweeps import sweep

from tileplan.arch import load
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem, SplitTable
from tileplan.dims import NDIMS, Dim, Operand
from tileplan.search import exhaustive
from tileplan.search.hoist import WEIGHT_C, reuse_orders
from tileplan.search.objective import Objective
from tileplan.search.space import class_orders, split_options
from tileplan.search.split_bounds import (
    input_line_cycles,
    longest_runs,
    min_compute_cycles,
    split_lower_bound,
    split_run_bound,
    split_tight_bound,
)
from tileplan.search.split_bounds_table import SplitBounds, burst_rates_table, longest_runs_table
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
               orders: np.ndarray, *, weight_c: bool = False) -> dict[Objective, float]:
    """Best value of every objective over every tile vector and reuse-class loop order of one split
    (``weight_c``: with the weights' box spanning all input channels of the slice)."""
    grid = problem.core_grid(cl, co)
    tiles = np.array(list(product(*[range(1, n + 1) for n in grid.max_length])), dtype=np.int64)
    n = len(tiles) * len(orders)
    hoist = np.zeros((n, 3, NDIMS), dtype=bool)
    hoist[:, 1, Dim.C] = weight_c
    batch = MappingBatch(np.repeat(tiles, len(orders), axis=0), np.tile(orders, (len(tiles), 1)),
                         hoist, np.ones((n, NDIMS), dtype=np.int64),
                         np.tile(MappingBatch.default_layout_codes(), (n, 1)), cl, co)
    costs = evaluate(problem, batch)
    return {obj: float(obj.key(costs).min()) for obj in Objective}


@sweep(4, 10, nmp_like())
def test_split_bounds_below_the_split_optimum_on_nmp_like_machines(problem: Problem) -> None:
    """lower <= run <= tight <= the split's optimum, for every split and objective (a flattened axis:
    the unrolling does not matter, so plain loop orders over every tile vector are the whole space)."""
    orders = class_orders()
    splits = split_options(problem)
    table = SplitTable.of(problem, splits)
    for i, (cl, co) in enumerate(splits):
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
            bounds = SplitBounds.of(problem, table, obj)
            assert run <= bounds.runs[i] * (1 + 1e-12)
            assert bounds.runs[i] <= bounds.tight_runs(i, orders) * (1 + 1e-12)
            assert tight <= bounds.tight_runs(i, orders) * (1 + 1e-12)
            assert bounds.tight_runs(i, orders) <= value * (1 + 1e-12)
        # Mappings whose weights span all input channels are bounded by lower, run and runs only
        # (tight assumes one tile vector for every operand; the search does not use it for them).
        hoisted = split_best(problem, cl, co, reuse_orders(WEIGHT_C), weight_c=True)
        for obj, value in hoisted.items():
            if np.isfinite(value):
                bounds = SplitBounds.of(problem, table, obj)
                assert bounds.lower[i] <= value * (1 + 1e-12)
                assert bounds.run[i] <= value * (1 + 1e-12)
                assert bounds.runs[i] <= value * (1 + 1e-12)


test_split_bounds_below_the_split_optimum_on_nmp_like_machines_full = (  # 10 examples, under ``slow``
    test_split_bounds_below_the_split_optimum_on_nmp_like_machines.full)


@st.composite
def burst_case(draw):
    """Small layers whose rows rarely fill a burst: odd widths, 1-4 byte elements, bursts of 4-64 B,
    up to 4 clusters x 3 cores."""
    r = draw(st.integers(1, 3))
    prec = draw(st.sampled_from([Precision.uniform(1), Precision.uniform(2), Precision(1, 1, 1, 4),
                                 Precision.uniform(4)]))
    layer = Layer.conv("b", c_in=draw(st.integers(1, 3)), h=draw(st.integers(r, 7)), w=draw(st.integers(r, 7)),
                       k_out=draw(st.integers(1, 3)), r=r, pad=draw(st.integers(0, 1)),
                       stride=draw(st.integers(1, 2)), precision=prec)
    arch = toy_arch(sizes=(draw(st.integers(8, 200)), draw(st.integers(4, 100)), draw(st.integers(8, 200))),
                    burst=draw(st.sampled_from([4, 8, 16, 32, 64])), clusters=draw(st.integers(1, 4)),
                    cores=draw(st.integers(1, 3)), multicast=draw(st.booleans()),
                    axes=[{**FLAT[0], "size": draw(st.integers(2, 5))}])
    return Problem(layer, arch)


@sweep(5, 15, burst_case())
def test_burst_rates_below_every_sweep(problem: Problem) -> None:
    """No tiling of a split moves an operand in fewer bursts than ``burst_rates_table``'s rate times its
    bytes (every core shape, every tile vector: the kernel's bursts per operand and sweep), and the
    rate is never below the longest-run rate 1 / min(B, R)."""
    from tileplan.cost import kernel
    from tileplan.cost.model import sweep

    splits = split_options(problem)
    table = SplitTable.of(problem, splits)
    rates = burst_rates_table(problem, table)
    runs = longest_runs_table(problem, table)
    prec = problem.precision
    b = [prec.input, prec.weight, prec.output, prec.psum]
    burst = problem.arch.dram.burst_bytes
    elems = [table.group_elements(problem, Operand(op)) for op in (0, 1, 2, 2)]
    for i, (cl, co) in enumerate(splits):
        for col, op in enumerate((0, 1, 2, 2)):
            if problem.has_operand[op] and elems[col][i] > 0:  # (a window in the padding reads nothing)
                assert rates[i, col] * (1 + 1e-12) >= 1 / min(burst, runs[i, op] * b[col])
        grid = problem.core_grid(cl, co)
        tiles = np.array(list(product(*[range(1, n + 1) for n in grid.max_length])), dtype=np.int64)
        n = len(tiles)
        batch = MappingBatch(tiles, np.tile(np.arange(NDIMS), (n, 1)), np.zeros((n, 3, NDIMS), dtype=bool),
                             np.ones((n, NDIMS), dtype=np.int64), np.tile(MappingBatch.default_layout_codes(), (n, 1)),
                             cl, co)
        pi = sweep(problem, batch).pi  # (shapes, fields, tile vectors): bytes and bursts of one sweep
        fields = [(kernel.F_SWEEP, kernel.F_BURSTS), (kernel.F_SWEEP + 1, kernel.F_BURSTS + 1),
                  (kernel.F_SWEEP + 2, kernel.F_BURSTS + 2), (kernel.F_PSUM, kernel.F_PSUM_BURSTS)]
        for col, (moved, bursts) in enumerate(fields):
            assert np.all(pi[:, bursts] >= rates[i, col] * pi[:, moved] * (1 - 1e-12))


test_burst_rates_below_every_sweep_full = test_burst_rates_below_every_sweep.full  # 15 examples, under ``slow``


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
    # and with weights spanning all input channels (the hoisted part of the exhaustive space)
    best += [split_best(problem, cl, co, reuse_orders(WEIGHT_C), weight_c=True) for cl, co in split_options(problem)]
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


@sweep(4, 12, burst_case(), st.sampled_from([Objective.LATENCY, Objective.ENERGY, Objective.EDP, Objective.DRAM]))
def test_burst_rate_bounds_change_no_choice(problem: Problem, objective: Objective) -> None:
    """The burst-rate bounds only skip splits whose bound exceeds a value found, so the search picks
    the very mapping it picks without them (and searches no more splits)."""
    import importlib

    module = importlib.import_module("tileplan.search.exhaustive")
    bounds = importlib.import_module("tileplan.search.split_bounds_table")  # SplitBounds.of reads the rates there
    from tileplan.errors import InfeasibleError

    try:
        with_rates = module.search_splits(problem, objective)
    except InfeasibleError:
        return
    real = bounds.burst_rates_table
    bounds.burst_rates_table = lambda p, t: np.zeros((len(t), 4))  # the longest-run rates only
    try:
        without = module.search_splits(problem, objective)
    finally:
        bounds.burst_rates_table = real
    assert with_rates.best is not None and without.best is not None
    assert with_rates.best[0] == without.best[0] and with_rates.key == without.key
    assert with_rates.rank == without.rank and with_rates.searched <= without.searched


test_burst_rate_bounds_change_no_choice_full = test_burst_rate_bounds_change_no_choice.full


def row_case():
    """Small layers on small machines (``helpers.small_problem``), drawing ``overlap``."""
    precisions = st.sampled_from([Precision.uniform(1), Precision.uniform(2)])
    return helpers_small_problem(precisions=precisions, flag="overlap")


@sweep(5, 15, row_case())
def test_row_bounds_below_every_mapping(problem: Problem) -> None:
    """``row_compute_bound`` is at most the model's compute cycles of every tile vector and unrolling,
    and ``SplitBounds.row_bounds`` at most every objective of every loop order, on every split."""
    from tileplan.cost.model import compute_cycles, split_tables
    from tileplan.search.space import spatial_options
    from tileplan.search.split_bounds_table import row_compute_bound

    splits = split_options(problem)
    table = SplitTable.of(problem, splits)
    orders = class_orders()
    for i, (cl, co) in enumerate(splits):
        grid = problem.core_grid(cl, co)
        tiles = np.array(list(product(*[range(1, n + 1) for n in grid.max_length])), dtype=np.int64)
        for u in spatial_options(problem, grid.max_length):
            unroll = np.broadcast_to(u, tiles.shape)
            bound = row_compute_bound(problem, table.max_length[i], tiles, unroll)
            assert np.all(bound <= compute_cycles(split_tables(problem, cl, co), tiles, unroll))
            n = len(tiles) * len(orders)
            batch = MappingBatch(np.repeat(tiles, len(orders), axis=0), np.tile(orders, (len(tiles), 1)),
                                 np.zeros((n, 3, NDIMS), dtype=bool), np.repeat(unroll, len(orders), axis=0),
                                 np.tile(MappingBatch.default_layout_codes(), (n, 1)), cl, co)
            costs = evaluate(problem, batch)
            for obj in Objective:
                rows = SplitBounds.of(problem, table, obj).row_bounds(i, np.repeat(bound, len(orders)))
                if rows is not None:
                    value = obj.key(costs)
                    assert np.all(rows <= value * (1 + 1e-12))


test_row_bounds_below_every_mapping_full = test_row_bounds_below_every_mapping.full  # 15 examples, under ``slow``


@sweep(10, 30, row_case(), st.sampled_from(list(Objective)), st.sampled_from([3, 50, 1 << 16]))
def test_row_pruning_changes_no_choice(problem: Problem, objective: Objective, chunk: int) -> None:
    """Evaluating the tile vectors of least bounds first and skipping those whose bound exceeds a value
    found picks the very mapping (and tie) that evaluating every one picks, whatever the chunk size."""
    import importlib

    module = importlib.import_module("tileplan.search.exhaustive")
    chunks = importlib.import_module("tileplan.search.chunk_search")  # reads the first wave's size
    bounds = importlib.import_module("tileplan.search.split_bounds_table")
    from tileplan.errors import InfeasibleError

    first = chunks.FIRST_WAVE_MIN
    chunks.FIRST_WAVE_MIN = 1  # small chunks too: a first wave, then the rest pruned
    try:
        pruned = module.search_splits(problem, objective, chunk=chunk)
    except InfeasibleError:
        return
    finally:
        chunks.FIRST_WAVE_MIN = first
    real = bounds.SplitBounds.row_bounds
    bounds.SplitBounds.row_bounds = lambda self, i, compute: None
    try:
        whole = module.search_splits(problem, objective, chunk=chunk)
    finally:
        bounds.SplitBounds.row_bounds = real
    assert (pruned.best is None) == (whole.best is None)
    if whole.best is not None and pruned.best is not None:
        assert pruned.best[0] == whole.best[0] and pruned.key == whole.key and pruned.rank == whole.rank
    assert pruned.evaluated <= whole.evaluated


test_row_pruning_changes_no_choice_full = test_row_pruning_changes_no_choice.full  # 30 examples, under ``slow``
