"""The multi-level model: equal to a plain walk of the loop nest as written (``nest_walk``: every DRAM
tile, its real steps, every child; loads observed when a tile's indices change) on three levels with
spatial fan-out and remainder tiles; the two-level mapping is its special case, unchanged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from helpers import toy_arch
from hypothesis import strategies as st
from nest_walk import walk_nest
from sweeps import sweep
from test_model_vs_reference import layer_and_mapping

from tileplan.cost.batch import MappingBatch
from tileplan.cost.levels import LevelBatch, evaluate_levels, evaluate_mappings, onchip_costs
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, Dim
from tileplan.mapping import Level, Mapping
from tileplan.workload.layer import Layer, Precision

RF = {"weights_bytes": 1 << 16, "inputs_bytes": 1 << 16, "psums_bytes": 1 << 16, "energy_pj_per_access": 0.5}


def _arch(**kw):
    arch = toy_arch(**kw)
    return replace(arch, register_file=replace(arch.register_file, **RF))


@st.composite
def three_level(draw):
    layer, mapping = draw(layer_and_mapping())
    tiles = tuple(draw(st.integers(1, mapping.tiles[d])) for d in DIMS)
    fanout = tuple(draw(st.sampled_from([1, 1, 2, 3])) for _ in DIMS)
    order = tuple(draw(st.permutations(list(DIMS))))
    level = Level(tiles=tiles, fanout=fanout, order=order)
    return layer, Mapping(tiles=mapping.tiles, order=mapping.order, hoist=mapping.hoist, layouts=mapping.layouts,
                          levels=(level,))


@sweep(10, 200, three_level())
def test_levels_equal_loop_walk(case):
    """Random 3-level mappings; about one in eight has a dimension whose whole DRAM tiles take
    several steps and whose remainder tile one (issue 24 item 6b: the model counted the remainder
    tile as multi-trip too, over-counting on-chip reads)."""
    layer, mapping = case
    problem = Problem(layer, _arch())
    batch = MappingBatch.from_mappings([mapping])
    oc = onchip_costs(problem, batch, LevelBatch.from_mappings([mapping]))
    ref = walk_nest(layer, mapping)
    prec = problem.precision
    np.testing.assert_array_equal(oc.child_fills[0], ref.fills)
    np.testing.assert_array_equal(oc.parent_reads[0], ref.reads)
    assert oc.parent_writes[0] == ref.writes
    assert oc.compute_cycles[0] == ref.compute_cycles
    np.testing.assert_array_equal(oc.child_footprint[0],
                                  [ref.footprint[0] * prec.input, ref.footprint[1] * prec.weight,
                                   ref.footprint[2] * prec.psum])


test_levels_equal_loop_walk_full = test_levels_equal_loop_walk.full  # 200 examples, under ``slow``


def test_a_remainder_tile_with_one_step_reloads_only_when_its_indices_change():
    """K = 3 in DRAM tiles of 2 (a whole tile and a remainder of 1), one-element steps ordered P
    (2 steps) outside K. Whole tile: the weight step tile changes at every (P, K) step, 2 x 2 = 4
    loads; remainder tile: a single K step, so its weight stays while P steps: 1 load. 5 weights
    read (the rule "more than one trip in any tile" gave 2 x 1 for the remainder: 6)."""
    layer = Layer.conv("l", n=1, c_in=1, h=2, w=1, k_out=3, r=1, s=1, precision=Precision.uniform(1))
    order0 = (Dim.K, Dim.N, Dim.G, Dim.C, Dim.P, Dim.Q, Dim.R, Dim.S)
    order1 = (Dim.P, Dim.K, Dim.N, Dim.G, Dim.C, Dim.Q, Dim.R, Dim.S)
    mapping = Mapping(tiles=(1, 1, 2, 1, 2, 1, 1, 1), order=order0,
                      levels=(Level(tiles=(1,) * 8, fanout=(1,) * 8, order=order1),))
    oc = onchip_costs(Problem(layer, _arch()), MappingBatch.from_mappings([mapping]),
                      LevelBatch.from_mappings([mapping]))
    ref = walk_nest(layer, mapping)
    assert ref.reads[1] == ref.fills[1] == 5
    assert oc.parent_reads[0, 1] == oc.child_fills[0, 1] == 5
    np.testing.assert_array_equal(oc.parent_reads[0], ref.reads)
    assert oc.parent_writes[0] == ref.writes == 6


@sweep(20, 60, layer_and_mapping(), st.data())
def test_two_level_is_the_special_case(case, data):
    """A spatial unrolling is a level of one-element children; the DRAM level is shared unchanged."""
    layer, mapping = case
    unroll = tuple(data.draw(st.integers(1, 3)) for _ in DIMS)
    axes = [{"name": d.name, "size": unroll[d], "dims": [d.name]} for d in DIMS]
    arch = _arch(axes=axes)
    problem = Problem(layer, arch)
    spatial = tuple(((d, unroll[d]),) for d in DIMS)
    two = Mapping(tiles=mapping.tiles, order=mapping.order, hoist=mapping.hoist, layouts=mapping.layouts,
                  spatial=spatial)
    three = Mapping(tiles=mapping.tiles, order=mapping.order, hoist=mapping.hoist, layouts=mapping.layouts,
                    levels=(Level(tiles=(1,) * 8, fanout=unroll, order=tuple(DIMS)),))
    base = evaluate(problem, MappingBatch.from_mappings([two]))
    assert _same(evaluate_mappings(problem, [two]), base)
    multi = evaluate_mappings(problem, [three])
    for name in ("dram_read_bytes", "dram_write_bytes", "dram_bursts", "dram_cycles", "footprint_bytes"):
        np.testing.assert_array_equal(getattr(multi, name), getattr(base, name))
    np.testing.assert_array_equal(multi.compute_cycles, base.compute_cycles)


test_two_level_is_the_special_case_full = test_two_level_is_the_special_case.full  # 60 examples, under ``slow``


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)


def test_fanout_beyond_the_array_or_l1_is_infeasible():
    from tileplan.workload.layer import Layer
    layer = Layer.conv("l", c_in=4, h=6, w=6, k_out=8, r=3, s=3, pad=1)
    arch = _arch(axes=[{"name": "pe", "size": 4, "dims": ["K"]}])
    ok = Mapping(tiles=(1, 1, 8, 4, 6, 6, 3, 3), order=tuple(DIMS),
                 levels=(Level(tiles=(1, 1, 2, 4, 1, 6, 3, 3), fanout=(1, 1, 4, 1, 1, 1, 1, 1)),))
    wide = Mapping(tiles=ok.tiles, order=ok.order,
                   levels=(Level(tiles=(1, 1, 1, 4, 1, 6, 3, 3), fanout=(1, 1, 8, 1, 1, 1, 1, 1)),))
    problem = Problem(layer, arch)
    cost, oc = evaluate_levels(problem, MappingBatch.from_mappings([ok, wide]),
                               LevelBatch.from_mappings([ok, wide]))
    assert cost.feasible.tolist() == [True, False]
    assert np.isinf(cost.latency_cycles[1])
    # four PEs over K: every MAC step runs one (P row) x 6 x 3 x 3 x 4 piece, 6 rows x 2 K steps
    assert oc.compute_cycles[0] == 6 * 2 * (6 * 3 * 3 * 4)
    # weights: each PE's 2 filters are loaded once (K steps outside P? order N G K C P Q R S: yes)
    assert oc.parent_reads[0, 1] == 8 * 4 * 9
    small = replace(arch, register_file=replace(arch.register_file, inputs_bytes=8))
    assert not evaluate_levels(Problem(layer, small), MappingBatch.from_mappings([ok]),
                               LevelBatch.from_mappings([ok]))[0].feasible[0]


def test_levels_json_round_trip_and_old_files():
    m = Mapping(tiles=(1, 1, 8, 4, 6, 6, 3, 3), order=tuple(DIMS),
                levels=(Level(tiles=(1, 1, 2, 4, 1, 6, 3, 3), fanout=(1, 1, 4, 1, 1, 1, 1, 1),
                              order=(Dim.K, Dim.P, Dim.N, Dim.G, Dim.C, Dim.Q, Dim.R, Dim.S)),))
    assert Mapping.from_json(m.to_json()) == m
    old = Mapping(tiles=m.tiles, order=m.order)
    assert "levels" not in old.to_dict()
    assert Mapping.from_json(old.to_json()) == old
    text = str(m)
    assert "for k1 in range(k0 tile) step 8:" in text and "K4 children" in text


@sweep(8, 25, st.data())
def test_executor_counts_the_model_dram_bytes_of_multi_level_mappings(data):
    """The program moves DRAM data by the DRAM level alone; the model's multi-level path predicts it."""
    from fixtures.program_cases import layers, mappings

    from tileplan.arch import load
    from tileplan.program import verify_layer

    arch = load("eyeriss")
    layer = data.draw(layers(precision=False))
    base = data.draw(mappings(layer))
    lv = Level(tiles=tuple(data.draw(st.integers(1, 2)) for _ in DIMS),
               fanout=tuple(data.draw(st.sampled_from([1, 2])) for _ in DIMS),
               order=tuple(data.draw(st.permutations(list(DIMS)))))
    m = Mapping(tiles=base.tiles, order=base.order, hoist=base.hoist, layouts=base.layouts, levels=(lv,))
    verdict = verify_layer(layer, arch, m)
    assert verdict.ok, verdict.mismatches()
    assert verdict.predicted_read_bytes == verify_layer(layer, arch, base).predicted_read_bytes


test_executor_counts_the_model_dram_bytes_of_multi_level_mappings_full = (  # 25 examples, under ``slow``
    test_executor_counts_the_model_dram_bytes_of_multi_level_mappings.full)


def test_api_explains_an_infeasible_level():
    import pytest

    from tileplan import api
    from tileplan.errors import MappingError
    from tileplan.workload.layer import Layer

    layer = Layer.conv("l", c_in=4, h=6, w=6, k_out=8, r=3, s=3, pad=1)
    m = Mapping(tiles=(1, 1, 8, 4, 6, 6, 3, 3), order=tuple(DIMS),
                levels=(Level(tiles=(1, 1, 8, 4, 6, 6, 3, 3), fanout=(1, 1, 1, 1, 1, 1, 1, 1)),))
    with pytest.raises(MappingError, match="register file holds 128 B"):
        api.evaluate(layer, "eyeriss", m)
    ok = Mapping(tiles=m.tiles, order=m.order,
                 levels=(Level(tiles=(1, 1, 1, 2, 1, 6, 3, 1), fanout=(1, 1, 8, 1, 6, 1, 1, 3)),))
    cost = api.evaluate(layer, "eyeriss", ok)
    assert cost.latency_cycles > 0
