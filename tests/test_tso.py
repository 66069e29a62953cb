"""TSO (Sousa et al.) as a restriction of the general space: its partitions, its candidate tiles
(Alg. 3), its search against brute force and against the general exhaustive optimum, and its closed
forms (Eq. 3-5, 7-8) against the model on its own space."""

from __future__ import annotations

from dataclasses import replace
from itertools import product
from math import ceil

import numpy as np
import pytest
from helpers import toy_arch

from tileplan import arch as arch_mod
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import Dim, Operand
from tileplan.search import exhaustive, run
from tileplan.search.objective import Objective
from tileplan.search.tso import Partition, Schedule, candidates, describe, slicings, tso
from tileplan.search.tso_bound import lower_bound
from tileplan.workload.layer import Layer, Precision

D = Dim
NMP = arch_mod.load("nmp")
B1 = Precision.uniform(1)

# Small layers on small multicore machines (2 clusters x 2 cores, a few hundred bytes per memory).
CASES = [
    (Layer.conv("c3", c_in=4, h=6, w=6, k_out=6, r=3, pad=1, precision=B1),
     dict(sizes=(96, 64, 48), burst=8, clusters=4, cores=2)),
    (Layer.conv("c1s2", c_in=6, h=7, w=5, k_out=5, r=1, stride=2, pad=0, precision=Precision(1, 1, 1, 2)),
     dict(sizes=(40, 24, 40), burst=4, clusters=2, cores=2,
          axes=[{"name": "v", "size": 4, "dims": ["P", "Q", "R", "S"], "mode": "flattened"}])),
    (Layer.conv("dw", c_in=6, h=5, w=5, k_out=6, r=3, pad=1, groups=6, precision=B1),
     dict(sizes=(60, 16, 40), burst=8, clusters=2, cores=2)),
    (Layer.fc("fc", c_in=12, k_out=7, precision=B1),
     dict(sizes=(16, 40, 8), burst=4, clusters=2, cores=3)),
]


def problem_of(case: int) -> Problem:
    layer, cfg = CASES[case]
    return Problem(layer, toy_arch(**cfg))


def test_nmp_partitions_follow_alg2() -> None:
    layer = Layer.conv("l", c_in=8, h=10, w=10, k_out=64, r=3, pad=1, precision=Precision.uniform(2))
    got = {(s.partition, s.cluster_split, s.core_split) for s in slicings(Problem(layer, NMP))}
    ones = [1] * 8

    def vec(**f: int) -> tuple[int, ...]:
        v = list(ones)
        for k, x in f.items():
            v[D[k]] = x
        return tuple(v)

    assert got == {(Partition.KS, vec(K=4), vec(K=8)), (Partition.KS_OFM, vec(K=2, P=2), vec(K=8)),
                   (Partition.OFM, vec(P=4), vec(K=8))}
    # Eight clusters: KS&OFM takes every factorisation with both factors > 1.
    eight = replace(NMP, cores=replace(NMP.cores, clusters=8))
    grids = {s.cluster_split for s in slicings(Problem(layer, eight)) if s.partition is Partition.KS_OFM}
    assert grids == {vec(K=2, P=4), vec(K=4, P=2)}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_candidates_are_alg3(case: int) -> None:
    """The candidate batch is exactly Alg. 3's loops: every T_R, T_C, T_N whose tiles fit (Eq. 2), with
    T_M the most filters that fit (IS: all of the core's), and every candidate fits per the model."""
    problem = problem_of(case)
    layer = problem.layer
    cap = [m.size_bytes for m in problem.arch.memories]
    prec = problem.precision
    dw = layer.dims[D.K] == 1 and layer.dims[D.G] > 1
    f = D.G if dw else D.K
    for sl in slicings(problem):
        longest = problem.core_grid(sl.cluster_split, sl.core_split).max_length
        for sched in Schedule:
            expect = set()
            for t_r, t_c, t_n in product(range(1, longest[D.P] + 1), range(1, longest[D.Q] + 1),
                                         range(1, longest[D.C] + 1)):
                t_h = min((t_r - 1) * layer.stride[0] + layer.r, layer.h)
                t_l = min((t_c - 1) * layer.stride[1] + layer.s, layer.w)
                w_n = longest[D.C] if sched is Schedule.WS else t_n
                options = [longest[f]] if sched is Schedule.IS else range(longest[f], 0, -1)
                t_m = next((m for m in options
                            if t_n * t_h * t_l * (m if dw else 1) * prec.input <= cap[0]
                            and m * w_n * layer.r * layer.s * prec.weight <= cap[1]
                            and m * t_r * t_c * prec.psum <= cap[2]), None)
                if t_m is not None:
                    expect.add((t_m, t_n, t_r, t_c))
            batch = candidates(problem, sl, sched)
            got = {(int(t[f]), int(t[D.C]), int(t[D.P]), int(t[D.Q])) for t in batch.tiles}
            assert got == expect, (sl, sched)
            if len(batch):
                assert evaluate(problem, batch).feasible.all()


def brute_force(problem: Problem, objective: Objective, **fix: str) -> float:
    """Cost every candidate of TSO's (possibly fixed) space with the model; the minimum."""
    best = np.inf
    parts = [Partition(fix["fix_partition"])] if "fix_partition" in fix else list(Partition)
    scheds = [Schedule(fix["fix_schedule"])] if "fix_schedule" in fix else list(Schedule)
    for sl in slicings(problem, tuple(parts)):
        for sched in scheds:
            batch = candidates(problem, sl, sched)
            if len(batch):
                best = min(best, float(objective.key(evaluate(problem, batch)).min()))
    return best


@pytest.mark.parametrize("objective", list(Objective))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_tso_equals_brute_force_over_its_space(case: int, objective: Objective) -> None:
    problem = problem_of(case)
    result = tso(problem, objective, chunk=7)  # tiny chunks: the bound-ordered stop really prunes
    found = float(objective.key(result.cost)[0])
    assert found == pytest.approx(brute_force(problem, objective), rel=1e-12)
    again = evaluate(problem, MappingBatch.from_mappings([result.mapping]))
    assert float(objective.key(again)[0]) == pytest.approx(found, rel=1e-12)


@pytest.mark.parametrize("fix", [{"fix_partition": "OFM"}, {"fix_partition": "KS&OFM"}, {"fix_schedule": "WS"},
                                 {"fix_schedule": "IS"}])
def test_fixed_baselines_are_brute_force_over_their_subspace(fix: dict[str, str]) -> None:
    problem = problem_of(0)
    result = tso(problem, Objective.LATENCY, chunk=5, **fix)
    assert float(result.cost.latency_cycles[0]) == pytest.approx(brute_force(problem, Objective.LATENCY, **fix))
    part, sched = describe(problem, result.mapping)
    assert fix.get("fix_partition", part) == part and fix.get("fix_schedule", sched) == sched


@pytest.mark.parametrize("case", range(len(CASES)))
def test_bound_never_exceeds_the_model(case: int) -> None:
    problem = problem_of(case)
    for sl in slicings(problem):
        for sched in Schedule:
            batch = candidates(problem, sl, sched)
            if not len(batch):
                continue
            costs = evaluate(problem, batch)
            for obj in Objective:
                assert np.all(lower_bound(problem, obj, batch) <= obj.key(costs) * (1 + 1e-12))


@pytest.mark.parametrize("case", [0, 1, 3])
def test_general_exhaustive_never_worse_than_tso(case: int) -> None:
    problem = problem_of(case)
    for obj in (Objective.LATENCY, Objective.DRAM):
        general = float(obj.key(exhaustive(problem, obj).cost)[0])
        assert general <= float(obj.key(tso(problem, obj).cost)[0]) * (1 + 1e-12)


# ----------------------------------------------------------------- closed forms on the tso space
EVEN = Layer.conv("even", c_in=16, h=18, w=18, k_out=64, r=3, pad=0, precision=Precision.uniform(2))


@pytest.mark.parametrize("sched", list(Schedule))
@pytest.mark.parametrize("part", list(Partition))
def test_eq3_to_5_equal_the_model_on_tso_candidates(part: Partition, sched: Schedule) -> None:
    """alpha_in, alpha_w, alpha_out (Eq. 3-5) times the tile sizes (Eq. 2) are the model's DRAM bytes for
    every candidate whose tiles divide the slices evenly. Per cluster, IN tiles are multicast to the
    cluster's 8 cores; each core loads its own W tiles and stores its own OUT tiles."""
    problem = Problem(EVEN, NMP)
    (sl,) = slicings(problem, (part,))
    n_tle = int(np.prod(sl.cluster_split))
    n_tlt = sl.core_split[D.K]
    M, N, R, C, K = 64, 16, 16, 16, 3
    tle_r, tle_w = R // sl.cluster_split[D.P], M // sl.cluster_split[D.K]
    tlt_w = tle_w // n_tlt
    batch = candidates(problem, sl, sched)
    t = batch.tiles
    even = ((tle_r % t[:, D.P] == 0) & (C % t[:, D.Q] == 0) & (N % t[:, D.C] == 0) & (tlt_w % t[:, D.K] == 0))
    assert even.sum() > 10
    batch = batch.take(np.nonzero(even)[0])
    t = batch.tiles
    t_m, t_n, t_r, t_c = t[:, D.K], t[:, D.C], t[:, D.P], t[:, D.Q]
    t_h, t_l = t_r - 1 + K, t_c - 1 + K  # Eq. 1
    IN = t_n * t_h * t_l * 2
    W = t_m * (N if sched is Schedule.WS else t_n) * K * K * 2
    OUT = t_m * t_r * t_c * 2
    trips = (tle_r // t_r) * (C // t_c) * (N // t_n)
    k_tiles = tlt_w // t_m  # W tiles per core (Eq. 4-5's TLE_W / T_M, per core)
    # Where Eq. 3-4 reload a tile whose contents do not change (N not tiled: the IN tile over the
    # filter tiles; the core's whole W set over IN tiles), the model keeps it on chip.
    if sched is Schedule.IS:  # Eq. 3
        a_in = n_tle * trips
        a_w = n_tle * n_tlt * np.where(t_n < N, trips, 1)
        a_out = n_tle * n_tlt * (tle_r // t_r) * (C // t_c)
    elif sched is Schedule.OS:  # Eq. 4
        a_in = n_tle * trips * np.where(t_n < N, k_tiles, 1)
        a_w = n_tle * n_tlt * np.where((t_n < N) | (k_tiles > 1), trips * k_tiles, 1)
        a_out = n_tle * n_tlt * (tle_r // t_r) * (C // t_c) * k_tiles
    else:  # Eq. 5
        a_in = n_tle * trips * k_tiles
        a_w = n_tle * n_tlt * k_tiles
        a_out = n_tle * n_tlt * (tle_r // t_r) * (C // t_c) * k_tiles
    cost = evaluate(problem, batch)
    assert np.array_equal(cost.dram_read_bytes[:, Operand.INPUT], a_in * IN)
    assert np.array_equal(cost.dram_read_bytes[:, Operand.WEIGHT], a_w * W)
    assert np.array_equal(cost.dram_write_bytes, a_out * OUT)
    # T_MAC (Eq. 7-8): per tile T_N x T_M x ceil(T_R T_C K K / 8 MACs), every core the same here.
    tile_mac = t_n * t_m * np.ceil(t_r * t_c * K * K / 8)
    assert np.array_equal(cost.compute_cycles, (tlt_w // t_m) * (N // t_n) * (tle_r // t_r) * (C // t_c) * tile_mac)


def test_unbalanced_split_is_costed_by_the_slowest_core() -> None:
    """36 filters over 8 cores (OFM): cores 0-3 get 5 filters, 4-7 get 4; the time is a 5-filter core's."""
    layer = Layer.conv("odd", c_in=8, h=10, w=10, k_out=36, r=3, pad=0, precision=Precision.uniform(2))
    problem = Problem(layer, NMP)
    (sl,) = slicings(problem, (Partition.OFM,))
    grid = problem.core_grid(sl.cluster_split, sl.core_split)
    assert sorted(c.length[D.K] for c in grid.cores if c.cluster == 0) == [4, 4, 4, 4, 5, 5, 5, 5]
    assert [c.length[D.K] for c in grid.cores[:8]] == [5, 5, 5, 5, 4, 4, 4, 4]  # remainder to the first
    batch = candidates(problem, sl, Schedule.OS)
    t = batch.tiles
    pick = np.nonzero((t[:, D.K] == 5) & (t[:, D.C] == 8) & (t[:, D.P] == 2) & (t[:, D.Q] == 8))[0]
    cost = evaluate(problem, batch.take(pick))
    # Eq. 7-8 for one core with 5 filters and 2 rows (8 rows / 4 clusters): one tile, 8 channels.
    assert float(cost.compute_cycles[0]) == 5 * 8 * ceil(2 * 8 * 9 / 8)
    result = run("tso", problem, Objective.LATENCY, fix_partition="OFM")
    assert result.mapping.core_split[D.K] == 8


def test_inceptionv3_conv5_burst_picks_whole_rows_noburst_narrower() -> None:
    """InceptionV3's 5th conv (80 x 73 x 73, 192 x 80 x 3 x 3, 16-bit, MB0 8 KB): TSO-burst's input tile
    spans whole 73-wide rows, TSO-noburst's is narrower, and the burst model prefers the first."""
    layer = Layer.conv("Conv2d_4a_3x3", c_in=80, h=73, w=73, k_out=192, r=3, pad=0, precision=Precision.uniform(2))
    problem = Problem(layer, NMP)
    burst = run("tso", problem, Objective.LATENCY)
    noburst = run("tso-noburst", problem, Objective.LATENCY)
    assert burst.mapping.tiles[D.Q] == 71  # T_L = 73: whole input rows
    assert noburst.mapping.tiles[D.Q] < 71
    assert noburst.strategy == "tso-noburst"
    # Both are costed with bursts; the burst-aware choice is faster and needs fewer bursts.
    assert float(burst.cost.latency_cycles[0]) < float(noburst.cost.latency_cycles[0])
    assert float(burst.cost.bursts[0]) < float(noburst.cost.bursts[0])
    # The noburst choice is the best of TSO's space under the volume model (bytes / bandwidth only).
    from tileplan.search.objective import volume_problem

    vol = volume_problem(problem)
    assert float(recost_latency(vol, noburst.mapping)) <= float(recost_latency(vol, burst.mapping))


def recost_latency(problem: Problem, mapping) -> float:  # type: ignore[no-untyped-def]
    return float(evaluate(problem, MappingBatch.from_mappings([mapping])).latency_cycles[0])


def test_dram_model_switch_works_for_any_strategy() -> None:
    """``dram_model="volume"`` chooses on bytes / bandwidth, then reports the burst-model cost."""
    problem = problem_of(1)
    vol = run("exhaustive", problem, Objective.LATENCY, dram_model="volume")
    again = evaluate(problem, MappingBatch.from_mappings([vol.mapping]))
    assert float(vol.cost.latency_cycles[0]) == float(again.latency_cycles[0])
    best = run("exhaustive", problem, Objective.LATENCY)
    assert float(best.cost.latency_cycles[0]) <= float(vol.cost.latency_cycles[0])
    with pytest.raises(Exception, match="unknown DRAM model"):
        run("tso", problem, Objective.LATENCY, dram_model="bursty")


def test_tso_plans_execute_bit_exact_with_model_counts() -> None:
    """Programs generated from LeNet-5's tso plan (every partition and schedule it picked) compute the
    reference output and move exactly the bytes and bursts the model predicts."""
    from tileplan import api
    from tileplan.program.verify import verify_layer

    net = api.load_network("lenet5")
    plan = api.plan(net, NMP, strategy="tso", jobs=1)
    for lp in plan.layers:
        assert lp.mapping is not None
        v = verify_layer(net[lp.name], NMP, lp.mapping)
        assert v.bit_exact and v.bytes_match and v.bursts_match, lp.name


def _first_of_each_kind_and_network(layers: list[tuple[str, Layer]]) -> list[tuple[str, Layer]]:
    """The first layer of each op kind and of each network, and the first strided and non-square ones."""
    out: dict[object, tuple[str, Layer]] = {}
    for label, layer in layers:
        for key in (layer.op, label.split("/")[0], ("strided", layer.stride != (1, 1)), ("square", layer.r == layer.s)):
            out.setdefault(key, (label, layer))
    return list(dict.fromkeys(out.values()))


@pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow, id="all")])
def test_tso_plans_of_all_six_networks_execute_bit_exact(every: bool) -> None:
    """The `tso` plans of every distinct conv/FC layer of the experiment's six networks (shrunk so the
    executor runs in milliseconds: kernel, stride, padding, dilation and groups kept, channels <= 48, maps
    <= 9 x 9): the generated programs compute the reference output and move the bytes and bursts the
    model predicts. Full-size layers: `tileplan verify MODEL --arch nmp --strategy tso`. The default run
    checks the first layer of each kind and of each network (a strided and a non-square one among them),
    the ``slow`` run every one."""
    from helpers import shrink

    from tileplan import api
    from tileplan.experiments.tso import NETWORKS
    from tileplan.program.verify import verify_layer
    from tileplan.workload.layer import OpKind

    macs = (OpKind.CONV, OpKind.GROUPED_CONV, OpKind.DEPTHWISE, OpKind.POINTWISE, OpKind.FC)
    layers: dict[tuple[object, ...], tuple[str, Layer]] = {}
    for paper_name, zoo_name in NETWORKS.items():
        for layer in api.load_network(zoo_name).with_precision(Precision.uniform(2)):
            if layer.op in macs:
                small = shrink(layer)
                layers.setdefault(small.signature(), (f"{paper_name}/{layer.name}", small))
    assert {label.split("/")[0] for label, _ in layers.values()} == set(NETWORKS)
    assert len(layers) >= 30
    checked = list(layers.values()) if every else _first_of_each_kind_and_network(list(layers.values()))
    failures = []
    for label, layer in checked:
        result = run("tso", Problem(layer, NMP), Objective.LATENCY)
        v = verify_layer(layer, NMP, result.mapping)
        if not (v.bit_exact and v.bytes_match and v.bursts_match):
            failures.append(f"{label}: {v.mismatches()}")
    assert not failures, "\n".join(failures)
