"""MARVEL over the one multi-level model: the off-chip DB search against the paper's Table 3, the
decoupled search against the joint exhaustive one, and the fixed-dataflow baselines."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from hypothesis import strategies as st
from sweeps import sweep
from test_levels import _arch

from tileplan.arch import load
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, Dim
from tileplan.errors import InfeasibleError
from tileplan.mapping import DEFAULT_LAYOUTS, layout_options
from tileplan.search import LEVEL_STRATEGIES, run
from tileplan.search.marvel_offchip import OffChip, db_blocks, fits, offchip
from tileplan.search.marvel_onchip import onchip
from tileplan.search.marvel_onchip_space import OnChipOptions
from tileplan.search.objective import Objective
from tileplan.workload import zoo
from tileplan.workload.layer import Layer
from tileplan.workload.zoo.marvel import TABLE3, MarvelLayer

EYERISS = load("eyeriss")
#: MARVEL's innermost layout letters (W, I, O) in ours: its P is our Q (the width), X the input width;
#: a channelwise layer's C is our groups, which the weight's K letter carries.
W_LETTER = {"C": "C", "K": "K", "R": "R", "S": "S"}
I_LETTER = {"X": "W", "Y": "H", "C": "C"}
O_LETTER = {"P": "Q", "Q": "P", "K": "K"}


@cache
def _offchip(label: str) -> tuple[Problem, OffChip]:
    row = next(r for r in TABLE3 if r.label == label)
    problem = Problem(row.layer(), EYERISS)
    return problem, offchip(problem)


def _paper_layouts(row: MarvelLayer) -> tuple[str, str, str]:
    w, i, o = row.innermost
    w_ours = "K" if row.channelwise and w == "C" else W_LETTER[w]
    inner = (I_LETTER[i], w_ours, O_LETTER[o])
    out = [default.replace(x, "") + x for x, default in zip(inner, DEFAULT_LAYOUTS, strict=True)]
    return out[0], out[1], out[2]


@pytest.mark.parametrize("row", TABLE3, ids=[r.label for r in TABLE3])
def test_db_optimum_at_most_the_papers_level3_choice(row: MarvelLayer) -> None:
    problem, off = _offchip(row.label)
    tiles = np.array([row.our_tiles()])
    lay = _paper_layouts(row)
    codes = np.array([[layout_options(op).index(lay[op]) for op in range(3)]])
    paper, _ = db_blocks(problem, tiles, codes)
    assert np.isfinite(off.blocks)
    if fits(problem, tiles)[0]:
        assert off.blocks <= paper[0]
    # the choice is the model's own count for the chosen tiles and layouts
    chosen = np.array([off.mapping.tiles])
    ccodes = np.array([[layout_options(op).index(off.mapping.layouts[op]) for op in range(3)]])
    assert db_blocks(problem, chosen, ccodes)[0][0] == off.blocks
    assert off.best_order_bursts <= off.order_bursts


@pytest.mark.parametrize("label", ["L2", "L3", "L4"])
def test_depthwise_keeps_whole_windows(label: str) -> None:
    """The paper's observation: depthwise layers keep full P, Q, R, S level-3 tiles."""
    problem, off = _offchip(label)
    for d in (Dim.P, Dim.Q, Dim.R, Dim.S):
        assert off.mapping.tiles[d] == problem.dims[d]


def test_slope_order_puts_the_most_negative_slope_innermost() -> None:
    _, off = _offchip("L8")
    inner = off.mapping.order[-1]
    assert off.slopes[inner] == min(off.slopes)


def _tiny() -> tuple[Problem, Problem]:
    layer = Layer.conv("tiny", c_in=2, h=5, w=5, k_out=4, r=3, s=3, pad=0)
    arch = _arch(axes=[{"name": "pe", "size": 8, "dims": ["K"]}], unified=2048, double_buffering=True)
    small_rf = replace(arch.register_file, weights_bytes=64, inputs_bytes=64, psums_bytes=64)
    return Problem(layer, arch), Problem(layer, replace(arch, register_file=small_rf))


@pytest.mark.parametrize(("objective", "which"), [(Objective.LATENCY, 0), (Objective.ENERGY, 1)])
def test_joint_never_worse_than_decoupled(objective: Objective, which: int) -> None:
    for problem in _tiny()[which:which + 1]:
        dec = run("marvel", problem, objective)
        joint = run("marvel-joint", problem, objective)
        assert objective.key(joint.cost)[0] <= objective.key(dec.cost)[0]


@pytest.mark.parametrize(("name", "dims"), [("rs", {Dim.P, Dim.R}), ("nvdla", {Dim.K, Dim.C}),
                                            ("shidiannao", {Dim.P, Dim.Q})])
def test_baselines_fan_out_over_their_dims_only(name: str, dims: set[Dim]) -> None:
    problem = Problem(TABLE3[3].layer(), EYERISS)  # L4, a 3x3 depthwise convolution
    res = run(name, problem, Objective.LATENCY)
    (level,) = res.mapping.levels
    assert {d for d in DIMS if level.fanout[d] > 1} <= dims
    assert res.cost.feasible[0]
    # the unrestricted on-chip search under the same level-3 mapping is never worse
    base = res.mapping.__class__(tiles=res.mapping.tiles, order=res.mapping.order, layouts=res.mapping.layouts)
    free = onchip(problem, base, Objective.LATENCY, OnChipOptions(unroll_rs=False, max_parallel=2, min_utilization=0))
    assert free is not None and free.cost.latency_cycles[0] <= res.cost.latency_cycles[0]


def test_marvel15_is_a_workload_and_marvel_runs_on_it() -> None:
    net = zoo.get("marvel15")
    assert len(net.layers) == 15
    assert {"marvel", "marvel-joint", "rs", "nvdla", "shidiannao"} <= set(LEVEL_STRATEGIES)
    res = run("marvel", Problem(net.layers[3], load("edge")), Objective.LATENCY)
    assert res.cost.feasible[0] and len(res.mapping.levels) == 1
    assert res.mapping.tiles[Dim.P] == 5  # the off-chip choice is platform-independent (same L2, blocks)


@pytest.mark.parametrize(("label", "objective"), [("L9", Objective.LATENCY), ("L4", Objective.ENERGY),
                                                  ("L15", Objective.EDP)])
def test_bound_pruning_is_safe(label: str, objective: Objective) -> None:
    """The lower-bound pruning of the on-chip search costs fewer candidates and finds the same optimum."""
    problem, off = _offchip(label)
    opts = OnChipOptions()
    pruned = onchip(problem, off.mapping, objective, opts)
    full = onchip(problem, off.mapping, objective, opts, bound=False)
    assert pruned is not None and full is not None
    assert pruned.costed < full.costed == full.evaluated
    for a, b in zip([objective.key(pruned.cost), *objective.tie_keys(pruned.cost)],
                    [objective.key(full.cost), *objective.tie_keys(full.cost)], strict=True):
        assert a[0] == pytest.approx(b[0], rel=1e-12)


def test_every_pruning_option_is_a_strategy_option_and_bad_ones_are_one_error_line() -> None:
    from typer.testing import CliRunner

    from tileplan import api
    from tileplan.cli import app
    from tileplan.errors import TileplanError

    opts = api.strategy_options(pruning=["divisors", "bound", "layouts", "utilization"], max_parallel=2)
    assert opts == {"divisors": False, "bound": False, "every_layout": True, "min_utilization": 0.0,
                    "max_parallel": 2}
    assert set(api.MARVEL_PRUNING) == {"divisors", "offchip-divisors", "unroll-rs", "symmetry", "layouts",
                                       "utilization", "bound"}
    with pytest.raises(TileplanError, match="unknown pruning option 'bogus'"):
        api.strategy_options(pruning=["bogus"])
    # every option reaches the strategy: no symmetry pruning keeps more on-chip orders, same optimum
    problem, off = _offchip("L4")
    full = run("marvel", problem, Objective.LATENCY, **api.strategy_options(pruning=["symmetry", "bound"]))
    pruned = run("marvel", problem, Objective.LATENCY)
    assert full.evaluated > pruned.evaluated and full.cost.latency_cycles[0] == pruned.cost.latency_cycles[0]
    result = CliRunner().invoke(app, ["plan", "marvel15", "-a", "eyeriss", "-s", "marvel", "--no-prune", "bogus"])
    assert result.exit_code != 0
    assert result.output.strip().splitlines()[-1].startswith("error: unknown pruning option 'bogus'")
    result = CliRunner().invoke(app, ["plan", "marvel15", "-a", "eyeriss", "-s", "marvel", "--min-utilization", "2"])
    assert result.exit_code != 0 and "error: --min-utilization must be between 0 and 1" in result.output


def _keys_of(objective: Objective, cost: object) -> list[float]:
    return [float(k[0]) for k in [objective.key(cost), *objective.tie_keys(cost)]]  # type: ignore[arg-type]


@st.composite
def _small_joint_case(draw: st.DrawFn) -> tuple[Problem, Objective]:
    r = draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    out = draw(st.integers(1, 3))
    depthwise = draw(st.booleans())
    c = draw(st.sampled_from([1, 2, 4]))
    h = (out - 1) * stride + r
    if depthwise:
        layer = Layer.conv("dw", c_in=c, h=h, w=h, k_out=c, r=r, s=r, stride=stride, pad=0, groups=c)
    else:
        layer = Layer.conv("cv", c_in=c, h=h, w=h, k_out=draw(st.sampled_from([1, 2, 4])), r=r, s=r,
                           stride=stride, pad=0)
    arch = _arch(axes=[{"name": "pe", "size": draw(st.sampled_from([4, 6, 8])), "dims": ["K"]}],
                 unified=draw(st.sampled_from([256, 1024, 4096])), double_buffering=draw(st.booleans()),
                 overlap=draw(st.booleans()))
    rf = draw(st.sampled_from([16, 64, 256]))
    arch = replace(arch, register_file=replace(arch.register_file, weights_bytes=rf, inputs_bytes=rf, psums_bytes=rf))
    return Problem(layer, arch), draw(st.sampled_from([Objective.LATENCY, Objective.ENERGY, Objective.EDP]))


@sweep(3, 8, _small_joint_case())
def test_joint_branch_and_bound_equals_the_unpruned_joint_search(case: tuple[Problem, Objective]) -> None:
    """The joint search's branch and bound (tiling floors, per-option floors, the compute-step cap)
    finds the optimum of the search with no bound at all, on random small layers and accelerators."""
    problem, objective = case
    try:
        full = run("marvel-joint", problem, objective, bound=False)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            run("marvel-joint", problem, objective)
        return
    pruned = run("marvel-joint", problem, objective)
    assert _keys_of(objective, pruned.cost) == pytest.approx(_keys_of(objective, full.cost), rel=1e-12)
    assert pruned.evaluated <= full.evaluated


test_joint_branch_and_bound_equals_the_unpruned_joint_search_full = (  # 8 examples, under ``slow``
    test_joint_branch_and_bound_equals_the_unpruned_joint_search.full)


def _reduced(label: str, sizes: tuple[int, int, int, int, int, int]) -> Problem:
    """A Table 3 layer with smaller sizes (K C R S P Q), same kind and stride, on eyeriss."""
    row = next(r for r in TABLE3 if r.label == label)
    return Problem(replace(row, sizes=sizes).layer(), EYERISS)


@pytest.mark.parametrize(("label", "sizes", "objective"), [
    ("L7", (40, 64, 1, 1, 1, 1), Objective.LATENCY),  # FC
    pytest.param("L9", (4, 4, 3, 3, 3, 3), Objective.LATENCY, marks=pytest.mark.slow),  # regular 3x3 (3.5 s)
    pytest.param("L12", (8, 8, 1, 1, 2, 4), Objective.ENERGY, marks=pytest.mark.slow),  # pointwise (3.7 s)
    ("L4", (1, 24, 3, 3, 5, 5), Objective.EDP),  # depthwise
])
def test_joint_branch_and_bound_on_reduced_marvel15_layers(label: str, sizes: tuple[int, int, int, int, int, int],
                                                           objective: Objective) -> None:
    problem = _reduced(label, sizes)
    full = run("marvel-joint", problem, objective, bound=False)
    pruned = run("marvel-joint", problem, objective)
    dec = run("marvel", problem, objective)
    assert _keys_of(objective, pruned.cost) == pytest.approx(_keys_of(objective, full.cost), rel=1e-12)
    assert pruned.evaluated < full.evaluated  # the bounds spared the model most candidates
    assert objective.key(pruned.cost)[0] <= objective.key(dec.cost)[0]
