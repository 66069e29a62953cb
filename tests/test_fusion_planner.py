"""The network planner: the dynamic programme against brute force, never worse than unfused, branch
safety, JSON round trip, and `plan --fuse` from the command line."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st
from sweeps import sweep
from typer.testing import CliRunner

from tileplan import api
from tileplan.fusion.block import group_of
from tileplan.fusion.group import chain_error
from tileplan.fusion.plan import FusionPlan
from tileplan.fusion.planner import candidate_groups, choose_cut, plan_fusion
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.network import Network

B1 = Precision.uniform(1)


def _cuts(n: int, groups: set[tuple[int, int]]):
    """Every cut of 0..n into single layers and the given groups."""
    if n == 0:
        yield []
        return
    for s, e in [(n - 1, n)] + [g for g in groups if g[1] == n]:
        for rest in _cuts(s, groups):
            yield rest + [(s, e)]


@sweep(10, 30, st.integers(2, 7), st.data())
def test_cut_is_the_brute_force_optimum(n, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10_000)))
    singles = [rng.uniform(1, 10, 3) for _ in range(n)]
    groups = {}
    for s in range(n):
        for e in range(s + 2, min(n, s + 4) + 1):
            if data.draw(st.booleans()):
                groups[(s, e)] = rng.uniform(0.5, 10, 3) * (e - s)
    for obj in Objective:
        def value(segs, obj=obj):
            tot = np.sum([singles[s] if e == s + 1 else groups[(s, e)] for s, e in segs], axis=0)
            return float(obj.combine(*tot))
        best = min(value(c) for c in _cuts(n, set(groups)))
        got = value(choose_cut(obj, singles, groups))
        assert got <= value([(i, i + 1) for i in range(n)]) + 1e-9  # never worse than all single
        if obj in (Objective.LATENCY, Objective.ENERGY, Objective.DRAM):
            assert got == pytest.approx(best, rel=1e-12)  # exact for additive objectives


test_cut_is_the_brute_force_optimum_full = test_cut_is_the_brute_force_optimum.full  # 30 examples, under ``slow``


@sweep(12, 40, st.integers(2, 6), st.data())
def test_cut_breaks_ties_as_the_per_layer_search(n, data):
    """Small whole-number costs make ties common: among cuts of equal objective the DP returns the
    least (latency, DRAM bytes, energy, bursts), the order ``search.objective.best_index`` uses."""
    rng = np.random.default_rng(data.draw(st.integers(0, 10_000)))
    singles = [rng.integers(1, 4, 4).astype(float) for _ in range(n)]
    groups = {}
    for s in range(n):
        for e in range(s + 2, min(n, s + 3) + 1):
            if data.draw(st.booleans()):
                groups[(s, e)] = rng.integers(1, 4, 4).astype(float) * (e - s)
    for obj in Objective:
        def key(segs, obj=obj):
            lat, en, dr, bursts = np.sum([singles[s] if e == s + 1 else groups[(s, e)] for s, e in segs], axis=0)
            return (float(obj.combine(lat, en, dr)), lat, dr, en, bursts)
        got = key(choose_cut(obj, singles, groups))
        assert got <= key([(i, i + 1) for i in range(n)])  # never worse than all single, ties included
        if obj in (Objective.LATENCY, Objective.ENERGY, Objective.DRAM):
            assert got == min(key(c) for c in _cuts(n, set(groups)))


test_cut_breaks_ties_as_the_per_layer_search_full = test_cut_breaks_ties_as_the_per_layer_search.full


def test_cut_takes_the_group_that_ties_on_latency_with_less_dram():
    """Two layers alone or fused: the same latency, but the group moves less DRAM and uses less
    energy (as in Stream's 2-conv graph): every objective takes the group."""
    singles = [np.array([100.0, 7.0, 40.0, 5.0]), np.array([100.0, 7.0, 40.0, 5.0])]
    group = {(0, 2): np.array([200.0, 10.0, 60.0, 8.0])}
    for obj in Objective:
        assert choose_cut(obj, singles, group) == [(0, 2)], obj


def _chain_network(specs: list[tuple[int, int, int, int]], c: int, h: int) -> Network:
    layers = []
    prev: tuple[str, ...] = ()
    for i, (k, s, pad, kout) in enumerate(specs):
        if h + 2 * (pad if kout else 0) < k:
            break
        name = f"l{i}"
        if kout == 0:
            layer = Layer.pool(name, channels=c, h=h, w=h, r=k, stride=s, inputs=prev, precision=B1)
        else:
            layer = Layer.conv(name, c_in=c, h=h, w=h, k_out=kout, r=k, stride=s, pad=pad, inputs=prev,
                               precision=B1)
        layers.append(layer)
        prev, c, h = (name,), layer.k_out, layer.p
    return Network("chain", tuple(layers), (1, specs[0][3] or 1, 8, 8))


@sweep(3, 6,
       st.lists(st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(0, 1), st.sampled_from([0, 2, 4, 8])),
                min_size=2, max_size=4), st.sampled_from(list(Objective)))
def test_fused_plan_is_never_worse_on_random_chains(specs, objective):
    net = _chain_network(specs, 3, 12)
    arch = api.load_arch("eyeriss")
    base = api.plan(net, arch, objective=objective, jobs=1)
    fused = plan_fusion(net.with_precision(B1), arch, base, objective, max_group=3)
    ours = objective.combine(fused.latency_cycles, fused.energy_pj, fused.dram_bytes)
    theirs = objective.combine(base.latency_cycles, base.energy_pj, base.dram_bytes)
    assert ours <= theirs * (1 + 1e-12)


test_fused_plan_is_never_worse_on_random_chains_full = test_fused_plan_is_never_worse_on_random_chains.full


def test_zoo_networks_fused_never_worse_and_branch_safe():
    net = api.load_network("lenet5")
    plan = api.plan_fused(net, "eyeriss", objective="dram", jobs=1, max_group=3)
    assert plan.dram_bytes < plan.base.dram_bytes  # lenet's conv+pool pairs do fuse
    assert plan.groups[0].layers == ("conv1", "pool1")
    again = FusionPlan.from_json(plan.to_json())
    assert again.to_dict() == plan.to_dict()
    # ResNet-50: candidate groups never hide a map another branch reads (the residual adds); a chain's
    # add joins after its chain input's producer, its skip input read from DRAM; a block group may start
    # at an add (res2a_add's output is read only by res2b_conv1 in this truncated network).
    res = api.load_network("resnet50").with_precision(B1)
    head = Network(res.name, res.layers[:9], res.input_shape)  # conv1 .. past the first residual add
    found = candidate_groups(head, api.load_arch("eyeriss"), Objective.DRAM, max_group=2)
    assert found
    names = [x.name for x in head.layers]
    for s, e in found:
        inside = {x.name for x in head.layers[s:e]}
        for x in head.layers[s:e - 1]:
            assert {c.name for c in head.consumers(x.name)} <= inside
        if head.layers[s].op.value == "add":
            assert group_of(head, [x.name for x in head.layers[s:e]]).is_block
        else:
            assert chain_error(list(head.layers[s:e]), head, merges=True) is None
    assert (names.index("res2a_add"), names.index("res2a_add") + 2) in found
    assert names.index("res2a_add") - 1 == names.index("res2a_down")
    assert (names.index("res2a_down"), names.index("res2a_add") + 1) in found
    windowed = candidate_groups(head, api.load_arch("eyeriss"), Objective.DRAM, max_group=2, merges=False)
    assert all(x.op.value != "add" for s, e in windowed for x in head.layers[s:e])


def test_plan_fuse_cli(tmp_path: Path):
    from tileplan.cli import app

    runner = CliRunner()
    target = tmp_path / "fused.json"
    result = runner.invoke(app, ["plan", "lenet5", "--arch", "eyeriss", "--fuse", "--max-group", "3", "--jobs", "1",
                                 "--json", str(target)])
    assert result.exit_code == 0, result.output
    assert "conv1+pool1" in result.output and "DRAM saving" in result.output
    plan = FusionPlan.from_json(target.read_text())
    assert plan.max_group == 3 and plan.groups
    bad = runner.invoke(app, ["plan", "lenet5", "--fuse", "--max-group", "1"])
    assert bad.exit_code != 0 and "max_group" in bad.output and "Traceback" not in bad.output


def test_hwff_enumeration_restarts_after_the_first_layer_that_cannot_fuse():
    """§4.4: with ``every_start=False`` starts are the first layer and then each layer that could not
    join the previous group."""
    net = api.load_network("lenet5").with_precision(B1)
    arch = api.load_arch("eyeriss")
    every = candidate_groups(net, arch, Objective.DRAM, max_group=3)
    paper = candidate_groups(net, arch, Objective.DRAM, max_group=3, every_start=False)
    assert set(paper) <= set(every)
    starts = sorted({s for s, _ in paper})
    assert starts[0] == 0
    for a, b in product(starts, starts):
        if a < b:
            assert b >= max(e for s, e in paper if s == a) - 1


def test_fused_bench_rows_report_the_searched_space():
    from tileplan.bench import fused_bench_table, run_fused_bench

    rows = run_fused_bench(["lenet5"], ["eyeriss"], objective="dram", jobs=1, repeat=0, max_group=3)
    (row,) = rows
    assert row.network == "lenet5" and row.chosen >= 1 and row.searched <= row.candidates
    assert 0 < row.evaluated <= row.screened <= row.space_size
    plan = api.plan_fused("lenet5", "eyeriss", objective="dram", jobs=1, max_group=3)
    per_group = plan.meta["group_search"]
    assert len(per_group) == plan.meta["searched"] == row.searched
    assert sum(g["screened"] for g in per_group.values()) == row.screened
    assert fused_bench_table(rows).row_count == 1


TPU_LIKE = """
name: tpu_like_stream
clock_hz: 1.0e9
precision_bytes: 1
overlap: true
double_buffering: false
dram: {bandwidth_bytes_per_s: 8.0e9, burst_bytes: 8, burst_latency_ns: 0.0, energy_pj_per_byte: 125.0}
memories:
  - {name: sram, operands: [input, weight, output], size_bytes: 2097152, energy_pj_per_byte: 1.63}
pe_array:
  axes:
    - {name: D1, size: 32, dims: [K, G], mode: unrolled, max_dims: 1}
    - {name: D2, size: 32, dims: [C], mode: unrolled, max_dims: 1}
register_file: {weights_bytes: 128, inputs_bytes: 0, psums_bytes: 4, energy_pj_per_access: 0.021}
energy: {mac_pj: 0.04}
"""


def test_stream_two_conv_group_ties_on_latency_and_is_chosen(tmp_path: Path):
    """Stream's 2-conv graph (8 -> 16 -> 32 channels, 32x32, 3x3) on its TPU-like core: fused and
    unfused take the same time (DRAM-bound either way), so the cut must be decided by the tie-break;
    the group then reads only the input and both kernels and writes only the last map (closed form),
    where the single layers also write and re-read the 16x32x32 map between them."""
    (tmp_path / "tpu.yaml").write_text(TPU_LIKE)
    conv1 = Layer.conv("conv1", c_in=8, h=32, w=32, k_out=16, r=3, pad=1, precision=B1)
    conv2 = Layer.conv("conv2", c_in=16, h=32, w=32, k_out=32, r=3, pad=1, inputs=("conv1",), precision=B1)
    net = Network("stream_2conv", (conv1, conv2), (1, 8, 32, 32))
    first_input, weights, between, last_output = 8 * 32 * 32, 8 * 16 * 9 + 16 * 32 * 9, 16 * 32 * 32, 32 * 32 * 32
    for objective in ("latency", "dram"):
        plan = api.plan_fused(net, api.load_arch(tmp_path / "tpu.yaml"), objective=objective, jobs=1, max_group=2)
        assert plan.base.dram_bytes == first_input + weights + 2 * between + last_output  # 77.6 KiB
        assert [g.layers for g in plan.groups] == [("conv1", "conv2")], objective
        assert plan.dram_bytes == first_input + weights + last_output  # 45.6 KiB
        assert plan.latency_cycles == plan.base.latency_cycles and plan.energy_pj < plan.base.energy_pj
