"""The vectorised model equals a step-by-step walk of the loop nest, for any mapping."""

from __future__ import annotations

import numpy as np
from helpers import toy_arch
from hypothesis import strategies as st
from reference import walk
from sweeps import sweep

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, OPERANDS, RELEVANT, Dim
from tileplan.mapping import Mapping, layout_options
from tileplan.workload.layer import Layer, Precision


@st.composite
def layer_and_mapping(draw):
    groups = draw(st.sampled_from([1, 1, 2]))
    c_in = groups * draw(st.integers(1, 4))
    k_out = groups * draw(st.integers(1, 4))
    r = draw(st.integers(1, 3))
    s = draw(st.integers(1, 3))
    stride = draw(st.integers(1, 2))
    dil = draw(st.integers(1, 2))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h = draw(st.integers(max(1, (r - 1) * dil + 1 - pad[0] - pad[1]), 9))
    w = draw(st.integers(max(1, (s - 1) * dil + 1 - pad[2] - pad[3]), 9))
    n = draw(st.integers(1, 2))
    prec = Precision(draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2])), 1,
                     draw(st.sampled_from([1, 4])))
    layer = Layer.conv("l", n=n, c_in=c_in, h=h, w=w, k_out=k_out, r=r, s=s, stride=stride, pad=pad,
                       dilation=dil, groups=groups, precision=prec)
    tiles = tuple(draw(st.integers(1, layer.dims[d])) for d in DIMS)
    order = tuple(draw(st.permutations(list(DIMS))))
    hoist = tuple(frozenset(d for d in sorted(RELEVANT[op]) if draw(st.booleans()) and draw(st.booleans()))
                  for op in OPERANDS)
    layouts = tuple(draw(st.sampled_from(layout_options(op))) for op in OPERANDS)
    mapping = Mapping(tiles=tiles, order=order, hoist=hoist, layouts=layouts)  # type: ignore[arg-type]
    return layer, mapping


@sweep(40, 150, layer_and_mapping(), st.sampled_from([4, 8, 16, 64]))
def test_model_equals_loop_walk(case, burst):
    layer, mapping = case
    arch = toy_arch(burst=burst)
    cost = evaluate(Problem(layer, arch), MappingBatch.from_mappings([mapping]))
    ref = walk(layer, mapping, burst=burst)
    np.testing.assert_array_equal(cost.dram_read_bytes[0], ref.read_bytes)
    assert cost.dram_write_bytes[0] == ref.write_bytes
    np.testing.assert_array_equal(cost.dram_bursts[0], ref.bursts)
    assert cost.compute_cycles[0] == ref.compute_cycles


test_model_equals_loop_walk_full = test_model_equals_loop_walk.full


def test_flattened_and_unrolled_compute_match_walk():
    layer = Layer.conv("l", c_in=5, h=7, w=6, k_out=7, r=3, s=2, stride=1, pad=1,
                       precision=Precision.uniform(2))
    arch = toy_arch(axes=[{"name": "v", "size": 8, "dims": ["P", "Q", "R", "S"], "mode": "flattened"},
                          {"name": "k", "size": 3, "dims": ["K"]}])
    m = Mapping(tiles=(1, 1, 4, 2, 3, 4, 2, 2), order=tuple(DIMS), spatial=((), ((Dim.K, 3),)))
    cost = evaluate(Problem(layer, arch), MappingBatch.from_mappings([m]))
    ref = walk(layer, m, burst=16, flat_axes=(((Dim.P, Dim.Q, Dim.R, Dim.S), 8),))
    assert cost.compute_cycles[0] == ref.compute_cycles
