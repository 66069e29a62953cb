"""Model vs program: the executor's count of every DRAM byte and burst a generated program moves
equals the cost model's prediction, and the program's output is bit-exact — for random small layers
and mappings (single core, multicore with and without multicast, double buffering, unified memory)
and for real layer shapes, reduced in spatial size, on the nmp and eyeriss presets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from fixtures.program_cases import layers, mappings
from helpers import toy_arch
from hypothesis import strategies as st
from sweeps import sweep

from tileplan.arch import load
from tileplan.arch.spec import Arch
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.mapping import Mapping
from tileplan.program import OnChipOverflowError, VerifyResult, execute, generate_program, verify_layer
from tileplan.program.ir import Load, Sync
from tileplan.program.verify import compare, random_operands
from tileplan.workload.layer import Layer, Precision

NMP = load("nmp")
EYERISS = load("eyeriss")


def _check(layer: Layer, arch: Arch, mapping: Mapping, seed: int = 0) -> VerifyResult:
    """Run the three witnesses; also check the aligned-burst bound on the counted traffic."""
    layer = Problem(layer, arch).layer
    program = generate_program(layer, arch, mapping)
    inputs, weight = random_operands(layer, np.random.default_rng(seed))
    result = execute(program, inputs, weight)
    from tileplan.program import reference_output

    verdict = compare(layer, arch, mapping, program, result, reference_output(layer, inputs, weight))
    assert verdict.ok, verdict.mismatches()
    burst = arch.dram.burst_bytes
    for op in OPERANDS:  # ceil(bytes / burst) <= aligned <= bursts + runs (executor docstring)
        assert result.aligned_bursts[op] * burst >= result.bytes_by_operand[op]
        assert result.aligned_bursts[op] <= result.bursts[op] + result.runs[op]
    return verdict


@sweep(20, 300, st.data(), st.sampled_from([4, 8, 16, 64, 0]), st.booleans(), st.booleans(), suppress=True)
def test_single_core_counts_equal_model(data: st.DataObject, burst: int, double: bool, unified: bool) -> None:
    """Toy accelerators of every burst size, double-buffered or not, unified or per-operand
    memories, and (``burst == 0``) the eyeriss preset."""
    layer = data.draw(layers(precision=burst != 0 or data.draw(st.booleans())))
    arch = EYERISS if burst == 0 else toy_arch(burst=burst, double_buffering=double,
                                               unified=(1 << 20) if unified else None)
    _check(layer, arch, data.draw(mappings(layer)))


@sweep(17, 250, st.data(), suppress=True)
def test_nmp_multicore_counts_equal_model(data: st.DataObject) -> None:
    layer = data.draw(layers(precision=False))
    mapping = data.draw(mappings(layer, clusters=4, cores=8))
    _check(layer, NMP, mapping)


@sweep(10, 150, st.data(), st.booleans(), st.booleans(), st.sampled_from([8, 32]), suppress=True)
def test_multicore_with_and_without_multicast(data: st.DataObject, multicast: bool, double: bool,
                                              burst: int) -> None:
    arch = toy_arch(burst=burst, clusters=2, cores=3, multicast=multicast, double_buffering=double)
    layer = data.draw(layers())
    mapping = data.draw(mappings(layer, clusters=2, cores=3))
    _check(layer, arch, mapping)


test_single_core_counts_equal_model_full = test_single_core_counts_equal_model.full
test_nmp_multicore_counts_equal_model_full = test_nmp_multicore_counts_equal_model.full
test_multicore_with_and_without_multicast_full = test_multicore_with_and_without_multicast.full


def test_multicast_shares_input_loads_across_the_cores_of_a_cluster() -> None:
    layer = Layer.conv("c", c_in=8, h=8, w=8, k_out=16, r=3, pad=1)  # nmp: 2-byte data
    order = (Dim.N, Dim.G, Dim.K, Dim.P, Dim.C, Dim.Q, Dim.R, Dim.S)
    mapping = Mapping(tiles=(1, 1, 2, 8, 4, 8, 3, 3), order=order,
                      core_split=(1, 1, 8, 1, 1, 1, 1, 1))  # 8 cores of one cluster, 2 channels each
    shared = _check(layer, NMP, mapping)
    alone = _check(layer, replace(NMP, cores=replace(NMP.cores, multicast=False)),
                   mapping)
    # one input group of all 8 cores loads two tiles, rows 0-4 and 3-7 (halo), 8 channels x 8 columns
    # x 2 bytes each: 1280 B; without multicast every core loads them
    assert shared.counted_read_bytes[Operand.INPUT] == 1280
    assert alone.counted_read_bytes[Operand.INPUT] == 8 * 1280
    weight = Operand.WEIGHT
    assert shared.counted_read_bytes[weight] == alone.counted_read_bytes[weight] == 16 * 8 * 9 * 2
    program = generate_program(layer, NMP, mapping)
    casts = [ins for s in program.streams for ins in s.instructions if isinstance(ins, Load) and ins.cores]
    assert len(casts) == 2 and all(ins.cores == tuple(range(8)) for ins in casts)
    assert all(sum(isinstance(i, Sync) for i in s.instructions) == 1 for s in program.streams)


def pick_mapping(layer: Layer, arch: Arch, cluster_split: tuple[int, ...], core_split: tuple[int, ...],
                 seed: int = 0, candidates: int = 300) -> Mapping:
    """The feasible random mapping (fixed seed) with the fewest predicted DRAM bytes."""
    rng = np.random.default_rng(seed)
    problem = Problem(layer, arch)
    longest = problem.core_grid(cluster_split, core_split).max_length
    cands = []
    for _ in range(candidates):
        tiles = tuple(int(rng.integers(1, longest[d] + 1)) for d in DIMS)
        order = tuple(Dim(int(x)) for x in rng.permutation(len(DIMS)))
        hoist = tuple(frozenset(d for d in sorted(RELEVANT[op]) if rng.random() < 0.2) for op in OPERANDS)
        cands.append(Mapping(tiles=tiles, order=order, hoist=hoist, cluster_split=cluster_split,  # type: ignore[arg-type]
                             core_split=core_split))
    cost = evaluate(problem, MappingBatch.from_mappings(cands))
    ok = np.flatnonzero(cost.feasible)
    assert ok.size, f"no feasible mapping among {candidates} for {layer.name}"
    return cands[int(ok[np.argmin(cost.dram_bytes[ok])])]


def _split(**parts: int) -> tuple[int, ...]:
    out = [1] * len(DIMS)
    for name, f in parts.items():
        out[Dim.parse(name)] = f
    return tuple(out)


ONE = _split()
REAL = [  # (layer reduced in spatial size, arch, cluster split, core split)
    (Layer.conv("vgg16.conv3_1", c_in=128, h=14, w=14, k_out=256, r=3), NMP,
     _split(K=2, P=2), _split(K=4, Q=2)),
    (Layer.conv("alexnet.conv1", c_in=3, h=31, w=31, k_out=64, r=11, stride=4, pad=2), NMP,
     _split(K=2, P=2), _split(K=2, P=2, Q=2)),
    (Layer.conv("resnet50.res2a_conv2", c_in=64, h=8, w=8, k_out=64, r=3), EYERISS, ONE, ONE),
    (Layer.conv("resnet50.res3a_down", c_in=256, h=8, w=8, k_out=512, r=1, stride=2), EYERISS, ONE, ONE),
    (Layer.conv("mobilenet.conv_dw2", c_in=32, h=12, w=12, k_out=32, r=3, stride=2, groups=32), NMP,
     _split(G=4), _split(G=2, P=2)),
    (Layer.conv("resnext50.conv2", c_in=128, h=7, w=7, k_out=128, r=3, groups=32), NMP,
     _split(G=2), _split(G=8)),
    (Layer.conv("deeplab.aspp_d2", c_in=32, h=12, w=12, k_out=32, r=3, dilation=2), EYERISS, ONE, ONE),
    (Layer.pool("resnet50.pool1", kind="max", channels=64, h=16, w=16, r=3, stride=2, pad=1), EYERISS,
     ONE, ONE),
    (Layer.pool("densenet.trans1_pool", kind="avg", channels=32, h=8, w=8, r=2), NMP,
     _split(P=2), _split(G=4)),
    (Layer.pool("resnet50.avgpool", kind="global", channels=512, h=7, w=7, r=7), NMP,
     _split(G=4), _split(G=8)),
    (Layer.fc("vgg16.fc8", c_in=512, k_out=100), NMP, _split(K=4), _split(K=2)),
    (Layer.add("resnet50.res2a_add", channels=64, h=8, w=8), EYERISS, ONE, ONE),
]


#: Executed in full only by `make test-all` (about 30 s each); the default run keeps the other NMP
#: multicore cases (mobilenet, resnext, the pools, fc8: G, K and P split over clusters and cores).
SLOW_REAL = {"vgg16.conv3_1", "alexnet.conv1"}


@pytest.mark.parametrize(("layer", "arch", "clusters", "cores"),
                         [pytest.param(*c, id=c[0].name, marks=[pytest.mark.slow] if c[0].name in SLOW_REAL else [])
                          for c in REAL])
def test_real_layer_shapes_on_presets(layer: Layer, arch: Arch, clusters: tuple[int, ...],
                                      cores: tuple[int, ...]) -> None:
    mapping = pick_mapping(layer, arch, clusters, cores)
    verdict = _check(layer, arch, mapping)
    assert verdict.feasible and verdict.predicted_bytes[Operand.OUTPUT] > 0
    if layer.input_count > 1:
        return  # the model's footprint holds one summand (test_model_gap_add_footprint_counts_one_summand)
    # a feasible mapping fits: no memory is used beyond the model's footprint
    problem = Problem(layer, arch)
    cost = evaluate(problem, MappingBatch.from_mappings([mapping]))
    program = generate_program(layer, arch, mapping)
    inputs, weight = random_operands(problem.layer, np.random.default_rng(1))
    peak = execute(program, inputs, weight).onchip_peak_bytes
    factor = 2 if arch.double_buffering else 1
    for i, mem in enumerate(program.memories):
        assert peak[mem.name] <= factor * cost.footprint_bytes[0, i] <= arch.memories[i].size_bytes


def test_concat_moves_nothing() -> None:
    layer = Layer.concat("cat", channels=8, h=4, w=4)
    result = verify_layer(layer, NMP, Mapping(tiles=(1,) * 8, order=tuple(DIMS), core_split=_split(K=2)))
    assert result.ok and result.instructions == 0
    assert result.predicted_bytes == result.counted_bytes == (0, 0, 0)


def test_verify_layer_reports_predicted_and_counted_numbers() -> None:
    layer = Layer.conv("c", c_in=3, h=6, w=5, k_out=4, r=3, pad=1, precision=Precision(1, 1, 1, 4))
    order = (Dim.K, Dim.C, Dim.P, Dim.N, Dim.G, Dim.Q, Dim.R, Dim.S)
    mapping = Mapping(tiles=(1, 1, 2, 1, 3, 5, 3, 3), order=order)
    result = verify_layer(layer, toy_arch(burst=8), mapping, seed=3)
    assert result.ok and result.mismatches() == []
    # input: rows 0-3 and 2-5 of 5 columns per channel, reloaded for each of the 2 K tiles;
    # weights once; each output tile is visited by the 3 C tiles: 2 partial sums (4 B) out and back
    assert result.counted_read_bytes == result.predicted_read_bytes == (2 * 3 * (4 + 4) * 5, 4 * 3 * 9,
                                                                        2 * 4 * 120)
    assert result.counted_write_bytes == result.predicted_write_bytes == 120 * 1 + 2 * 4 * 120
    assert result.bit_exact and result.feasible
    assert result.to_dict()["counted_bytes"] == [240, 108, 120 + 2 * 2 * 4 * 120]


def test_core_whose_window_starts_past_the_input_moves_nothing() -> None:
    """Regression: a core whose input window starts one past the input used to collide with the
    'not clipped' key of an unclipped core and was priced like one."""
    # Q = 2 with stride 2 and 2 columns of right padding; core 1's only column reads input column 2 of 1
    layer = Layer.conv("pw", c_in=1, h=1, w=1, k_out=1, r=1, stride=2, pad=(0, 0, 0, 2))
    mapping = Mapping(tiles=(1,) * 8, order=tuple(DIMS), core_split=_split(Q=2))
    result = verify_layer(layer, NMP, mapping)
    assert result.counted_read_bytes[Operand.INPUT] == 2  # core 0 reads one 2-byte element, core 1 none
    assert result.predicted_read_bytes[Operand.INPUT] == 2, result.mismatches()


def test_add_footprint_holds_every_summand() -> None:
    """Regression: an add needs all ``input_count`` input tiles on chip at once."""
    layer = Layer.add("add", channels=1, h=4, w=4, input_count=2, precision=Precision.uniform(1))
    arch = toy_arch(sizes=(16, 16, 16))  # one 16-byte input tile fits, two do not
    too_big = Mapping(tiles=(1,) * 4 + (4, 4, 1, 1), order=tuple(DIMS))
    assert not evaluate(Problem(layer, arch), MappingBatch.from_mappings([too_big])).feasible[0]
    with pytest.raises(OnChipOverflowError):
        verify_layer(layer, arch, too_big)
    fits = Mapping(tiles=(1,) * 4 + (2, 4, 1, 1), order=tuple(DIMS))
    assert evaluate(Problem(layer, arch), MappingBatch.from_mappings([fits])).feasible[0]
    assert verify_layer(layer, arch, fits).ok
