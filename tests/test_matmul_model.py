"""Matmul and element-wise layers in the one model: the plain loop-nest walk agrees with the model
(a matmul's activation B is loaded like any operand), and the exhaustive optimum equals a brute
force over every split, tile vector, loop order and unrolling on small random matmuls."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import toy_arch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import walk
from test_search import brute_force

from tileplan.cost.batch import MappingBatch
from tileplan.cost.bounds import compulsory_bytes
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.mapping import Mapping, layout_options
from tileplan.search import exhaustive
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.transformer import elementwise, matmul


@st.composite
def small_matmul(draw, max_side: int = 4) -> Layer:
    act = draw(st.booleans())
    layer = matmul("mm", m=draw(st.integers(1, max_side)), k=draw(st.integers(1, max_side)),
                   n=draw(st.integers(1, max_side)), groups=draw(st.integers(1, 2)),
                   batch=1 if act else draw(st.integers(1, 2)), b_activation=act)
    prec = Precision(draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2])), 1, draw(st.sampled_from([1, 4])))
    return layer.with_precision(prec)


@st.composite
def layer_and_mapping(draw):
    if draw(st.booleans()):
        layer = draw(small_matmul(6))
    else:
        kind = draw(st.sampled_from(["softmax", "layernorm", "rmsnorm", "gelu", "silu", "mul", "rope"]))
        kind = draw(st.sampled_from([kind, "add"]))
        two = kind in ("mul", "add")
        layer = elementwise("e", kind, channels=draw(st.integers(1, 6)), rows=draw(st.integers(1, 6)),
                            batch=draw(st.integers(1, 2)), input_count=draw(st.integers(1, 2)) if two else 1,
                            broadcast=two and draw(st.booleans()))
        layer = layer.with_precision(Precision(draw(st.sampled_from([1, 2])), 2, 1, 4))
    tiles = tuple(draw(st.integers(1, layer.dims[d])) for d in DIMS)
    order = tuple(draw(st.permutations(list(DIMS))))
    hoist = tuple(frozenset(d for d in sorted(RELEVANT[op]) if draw(st.booleans()) and draw(st.booleans()))
                  for op in OPERANDS)
    layouts = tuple(draw(st.sampled_from(layout_options(op))) for op in OPERANDS)
    return layer, Mapping(tiles=tiles, order=order, hoist=hoist, layouts=layouts)  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None)
@given(layer_and_mapping(), st.sampled_from([4, 8, 64]))
def test_model_equals_loop_walk(case, burst: int) -> None:
    layer, mapping = case
    cost = evaluate(Problem(layer, toy_arch(burst=burst)), MappingBatch.from_mappings([mapping]))
    ref = walk(layer, mapping, burst=burst)
    np.testing.assert_array_equal(cost.dram_read_bytes[0], ref.read_bytes)
    assert cost.dram_write_bytes[0] == ref.write_bytes
    np.testing.assert_array_equal(cost.dram_bursts[0], ref.bursts)
    # the walk counts loop-nest points; a softmax does 3 operations per point, a matmul 1
    assert cost.compute_cycles[0] == ref.compute_cycles * layer.ops_per_point


def test_activation_b_is_read_like_an_activation() -> None:
    """Q.K^T of 2 heads, 4 tokens, d_head 3: with everything on chip, B (K) is read once, in full,
    though it is no parameter; the same shape with a weight B costs the same bytes."""
    act = matmul("qk", m=4, k=3, n=4, groups=2, b_activation=True).with_precision(Precision.uniform(2))
    arch = toy_arch()
    whole = Mapping(tiles=tuple(act.dim_tuple), order=tuple(DIMS))
    cost = evaluate(Problem(act, arch), MappingBatch.from_mappings([whole]))
    assert cost.dram_read_bytes[0].tolist() == [2 * 4 * 3 * 2, 2 * 3 * 4 * 2, 0]
    assert cost.dram_write_bytes[0] == 2 * 4 * 4 * 2
    assert act.params == 0 and act.has_weight_operand and not act.has_weights
    weight = matmul("qk", m=4, k=3, n=4, groups=2).with_precision(Precision.uniform(2))
    assert weight.params == 2 * 3 * 4 and weight.signature() != act.signature()


def test_gqa_shares_k_tiles_across_query_heads() -> None:
    """4 query heads on 1 K/V head: the query heads are rows (P), K is indexed by G, K, C only, so
    with P innermost one K tile serves every query head: K is read exactly once."""
    gqa = matmul("qk", m=4 * 5, k=3, n=6, groups=1, b_activation=True).with_precision(Precision.uniform(1))
    tiles = [1] * 8
    tiles[Dim.K], tiles[Dim.C], tiles[Dim.P] = 6, 3, 5  # one query head's rows per tile
    order = (Dim.N, Dim.G, Dim.K, Dim.C, Dim.Q, Dim.R, Dim.S, Dim.P)
    cost = evaluate(Problem(gqa, toy_arch()), MappingBatch.from_mappings([Mapping(tiles=tuple(tiles), order=order)]))
    assert cost.dram_read_bytes[0][Operand.WEIGHT] == 6 * 3  # K once, not once per query head


@settings(max_examples=8, deadline=None)
@given(small_matmul(3), st.sampled_from(list(Objective)), st.sampled_from([24, 60]))
def test_exhaustive_never_worse_than_brute_force(layer: Layer, objective: Objective, size: int) -> None:
    problem = Problem(layer, toy_arch(unified=size, burst=4, cores=2,
                                      axes=[{"name": "x", "size": 2, "dims": ["K", "P"]}]))
    best = brute_force(problem)[objective]
    if not np.isfinite(best):
        return
    found = exhaustive(problem, objective)
    assert float(objective.key(found.cost)[0]) <= best * (1 + 1e-12)
    assert float(found.cost.dram_bytes[0]) >= compulsory_bytes(problem.layer)


@pytest.mark.parametrize("kind", ["softmax", "layernorm", "gelu"])
def test_elementwise_whole_tensor_moves_once(kind: str) -> None:
    """An element-wise layer that fits reads its tensor once and writes it once (a norm also reads
    its per-channel scale once); compute is ops_per_point per element."""
    layer = elementwise("e", kind, channels=8, rows=5).with_precision(Precision.uniform(2))
    cost = evaluate(Problem(layer, toy_arch()), MappingBatch.from_mappings(
        [Mapping(tiles=tuple(layer.dim_tuple), order=tuple(DIMS))]))
    scale = 8 * 2 if kind == "layernorm" else 0
    assert cost.dram_read_bytes[0].tolist() == [8 * 5 * 2, scale, 0]
    assert cost.dram_write_bytes[0] == 8 * 5 * 2
    assert cost.compute_cycles[0] == 8 * 5 * {"softmax": 3, "layernorm": 4, "gelu": 1}[kind]


def test_heads_and_rows_split_across_nmp_cores() -> None:
    """On nmp (4 clusters x 8 cores) the existing split search spreads an attention matmul's heads
    (G) and token rows (P) over the cores: every core works, and the split is over G / P / K only."""
    from tileplan.api import load_arch, plan_layer

    qk = matmul("qk", m=64, k=16, n=64, groups=8, b_activation=True)
    plan = plan_layer(qk, load_arch("nmp"))
    assert plan.mapping is not None
    m = plan.mapping
    used = int(np.prod(m.cluster_split)) * int(np.prod(m.core_split))
    assert used == 32
    split = {Dim(d).name for d in range(8) if m.cluster_split[d] * m.core_split[d] > 1}
    assert split <= {"G", "P", "K"} and split & {"G", "P"}


def test_mask_add_reads_the_scores_and_one_mask_row() -> None:
    """An attention mask (one row of n keys) added to 2 heads x 4 queries x n = 6 scores: the scores
    are read and written once, the mask row once, and there are 2 x 4 x 6 additions."""
    layer = elementwise("mask", "add", channels=6, rows=2 * 4, broadcast=True).with_precision(Precision.uniform(2))
    cost = evaluate(Problem(layer, toy_arch()), MappingBatch.from_mappings(
        [Mapping(tiles=tuple(layer.dim_tuple), order=tuple(DIMS))]))
    assert cost.dram_read_bytes[0].tolist() == [2 * 4 * 6 * 2, 6 * 2, 0]
    assert cost.dram_write_bytes[0] == 2 * 4 * 6 * 2
    assert layer.macs == 2 * 4 * 6 and layer.params == 0
