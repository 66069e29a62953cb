"""The register-file level of the exhaustive search (``search.rf_level``): an operand's DRAM tiles
held in the PEs' register files instead of the on-chip buffer (per-operand bypass).

References: the plain loop-nest walks of ``tests/nest_walk.py`` (a PE's largest piece of every
operand, with the unrolling as a one-step on-chip level) and ``tests/reference.py`` (DRAM bytes),
and a brute force over every tile vector, loop order, unrolling, hoist and bypass of a small space.
"""

from __future__ import annotations

from itertools import permutations, product

import numpy as np
import pytest
from nest_walk import walk_nest
from reference import walk

from tileplan.arch import from_dict
from tileplan.arch.spec import Arch
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, Dim, Operand
from tileplan.errors import MappingError
from tileplan.mapping import Level, Mapping
from tileplan.search import exhaustive
from tileplan.search.exhaustive import merge_split_searches, search_splits
from tileplan.search.objective import Objective
from tileplan.search.rf_level import bypass_options, bypass_problem, pe_fits, pe_piece_bytes, recost
from tileplan.workload.layer import Layer, Precision


def rf_arch(gbuf: int, rf: tuple[int, int, int], *, lanes: int = 4, dims: tuple[str, ...] = ("K", "C"),
            double_buffering: bool = False, clusters: int = 1, cores: int = 1) -> Arch:
    """One core, one buffer shared by all operands, a PE array of ``lanes`` PEs unrolling one of ``dims``,
    register files of ``rf`` bytes (input, weight, partial sums) per PE."""
    return from_dict({
        "name": "rf-toy", "clock_hz": 1e9, "precision_bytes": 1, "double_buffering": double_buffering,
        "dram": {"bandwidth_bytes_per_s": 8e9, "burst_bytes": 4, "burst_latency_ns": 0, "energy_pj_per_byte": 100},
        "memories": [{"name": "gbuf", "operands": ["input", "weight", "output"], "size_bytes": gbuf,
                      "energy_pj_per_byte": 2.0}],
        "pe_array": {"axes": [{"name": "x", "size": lanes, "dims": list(dims), "mode": "unrolled", "max_dims": 1}]},
        "register_file": {"inputs_bytes": rf[0], "weights_bytes": rf[1], "psums_bytes": rf[2],
                          "energy_pj_per_access": 0.5},
        "cores": {"clusters": clusters, "cores_per_cluster": cores},
        "energy": {"mac_pj": 1.0},
    })


def _mapping(tiles: tuple[int, ...], unroll: tuple[int, ...], order: str = "NGKCPQRS", **kw: object) -> Mapping:
    spatial = (tuple((Dim(d), unroll[d]) for d in DIMS if unroll[d] > 1),)
    return Mapping(tiles=tiles, order=tuple(Dim.parse(c) for c in order), spatial=spatial, **kw)  # type: ignore[arg-type]


LAYERS = [
    Layer.conv("pad", c_in=3, h=7, w=6, k_out=5, r=3, s=3, pad=1, precision=Precision.uniform(1)),
    Layer.conv("stride", c_in=4, h=9, w=9, k_out=3, r=3, s=2, pad=0, stride=2, precision=Precision(1, 2, 1, 4)),
    Layer.conv("flat", c_in=6, h=5, w=5, k_out=4, r=1, s=1, pad=0, precision=Precision.uniform(2)),
]


@pytest.mark.parametrize("li", range(len(LAYERS)))
def test_pe_piece_is_the_walked_largest_piece(li: int) -> None:
    """A PE's piece of each operand (``pe_piece_bytes``) against the plain walk of the same mapping
    written as a one-step on-chip level (fan-out = unroll): equal for weights and outputs, and for
    inputs of unpadded layers; at least the walked piece for padded inputs (padding is never held)."""
    layer = LAYERS[li]
    problem = Problem(layer, rf_arch(1 << 20, (64, 64, 64), dims=("K", "C", "P", "Q")))
    prec = problem.precision
    rng = np.random.default_rng(li)
    for _ in range(6):
        tiles = tuple(int(rng.integers(1, n + 1)) for n in layer.dim_tuple)
        unroll = [1] * NDIMS
        d = Dim(int(rng.choice([Dim.K, Dim.C, Dim.P, Dim.Q])))
        unroll[d] = int(rng.integers(1, 4))
        t = [min(tiles[i], layer.dim_tuple[i]) for i in DIMS]
        level = Level(tiles=tuple(-(-t[i] // unroll[i]) for i in DIMS), fanout=tuple(unroll))
        walked = walk_nest(layer, Mapping(tiles=tiles, order=DIMS, levels=(level,)))
        grid = problem.core_grid((1,) * NDIMS, (1,) * NDIMS)
        for op in OPERANDS:
            got = int(pe_piece_bytes(problem, grid, op, np.array([tiles]), np.array([unroll]))[0])
            want = walked.footprint[op] * (prec.psum if op is Operand.OUTPUT else prec.of(op))
            if op is Operand.INPUT and layer.pad != (0, 0, 0, 0):
                assert got >= want
            else:
                assert got == want, (op, tiles, unroll)


def test_bypassed_mapping_moves_the_walked_dram_bytes_and_frees_the_buffer() -> None:
    """A mapping whose weight tile does not fit the buffer beside the others runs when the weights
    bypass it: the same DRAM bytes as the loop-nest walk, the buffer holding inputs and outputs
    only; a PE piece larger than its register file does not run."""
    layer = Layer.conv("c", c_in=8, h=6, w=6, k_out=8, r=3, s=3, pad=0, precision=Precision.uniform(1))
    arch = rf_arch(260, (0, 144, 0), lanes=4, dims=("K",))
    problem = Problem(layer, arch)
    tiles = (1, 1, 8, 8, 2, 4, 3, 3)  # 576 weight bytes: 144 per PE over 4 PEs (K 4 -> 2 filters each)
    plain = _mapping(tiles, (1, 1, 4, 1, 1, 1, 1, 1), "NGKCPQRS")
    assert not evaluate(problem, MappingBatch.from_mappings([plain])).feasible[0]
    bypassed = _mapping(tiles, (1, 1, 4, 1, 1, 1, 1, 1), "NGKCPQRS", bypass=frozenset({Operand.WEIGHT}))
    cost = recost(problem, bypassed)
    assert cost.feasible[0]
    counted = walk(layer, plain, burst=arch.dram.burst_bytes)
    assert list(cost.dram_read_bytes[0]) == counted.read_bytes
    assert float(cost.dram_write_bytes[0]) == counted.write_bytes
    # the buffer holds a 8x4x6 input tile and an 8x2x4 output tile, no weights
    assert int(cost.footprint_bytes[0, 0]) == 8 * 4 * 6 + 8 * 2 * 4
    two_pes = _mapping(tiles, (1, 1, 2, 1, 1, 1, 1, 1), bypass=frozenset({Operand.WEIGHT}))
    assert not recost(problem, two_pes).feasible[0]  # 288 weight bytes per PE > 144
    with pytest.raises(MappingError, match="input"):
        recost(problem, _mapping(tiles, (1,) * 8, bypass=frozenset({Operand.INPUT})))  # no input register bytes


def test_mapping_bypass_json_round_trip() -> None:
    m = _mapping((1, 1, 4, 2, 3, 3, 1, 1), (1, 1, 2, 1, 1, 1, 1, 1), bypass=frozenset({Operand.WEIGHT}))
    assert Mapping.from_json(m.to_json()) == m
    assert "register files hold the weight tiles" in str(m)
    with pytest.raises(MappingError, match="bypass"):
        Mapping.from_dict({"bypass": "weight"})


def brute_force(problem: Problem, objective: Objective) -> tuple[float, float]:
    """The least objective value over every tile vector, loop order, unrolling (one dimension per
    axis), weight hoist and bypass (none, or one operand of ``bypass_options``), plain loops;
    and the least without bypass."""
    dims = [int(x) for x in problem.dims]
    axis = problem.arch.pe_array.axes[0]
    unrolls = [tuple([1] * NDIMS)]
    for d in axis.dim_ids:
        for f in range(2, problem.lanes[0] + 1):
            u = [1] * NDIMS
            u[d] = f
            unrolls.append(tuple(u))
    active = [d for d in DIMS if dims[d] > 1]
    fixed = [d for d in DIMS if dims[d] == 1]
    orders = [tuple(fixed) + p for p in permutations(active)]
    rows = [(t, [int(d) for d in o], u, h) for t in product(*[range(1, n + 1) for n in dims]) for o in orders
            for u in unrolls for h in (False, True)]
    n = len(rows)
    hoist = np.zeros((n, 3, NDIMS), dtype=bool)
    hoist[:, 1, Dim.C] = [r[3] for r in rows]
    batch = MappingBatch(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), hoist,
                         np.array([r[2] for r in rows]), np.tile(MappingBatch.default_layout_codes(), (n, 1)),
                         (1,) * NDIMS, (1,) * NDIMS)
    least = {}
    for ops in [frozenset()] + [frozenset({op}) for op in bypass_options(problem)]:
        variant = bypass_problem(problem, ops) if ops else problem
        costs = evaluate(variant, batch)
        ok = costs.feasible & pe_fits(variant, variant.core_grid((1,) * NDIMS, (1,) * NDIMS), ops, batch.tiles,
                                      batch.unroll, batch.hoist)
        key = np.where(ok, objective.key(costs), np.inf)
        least[ops] = float(key.min())
    return min(least.values()), least[frozenset()]


CASES = [  # (layer, arch): the weights' register files hold more than the buffer can spare
    (Layer.conv("w", c_in=4, h=4, w=3, k_out=4, r=1, s=1, pad=0, precision=Precision.uniform(1)),
     rf_arch(16, (2, 4, 2), lanes=4, dims=("K", "C"))),
    (Layer.conv("o", c_in=3, h=3, w=4, k_out=4, r=1, s=1, pad=0, precision=Precision.uniform(1)),
     rf_arch(20, (1, 2, 6), lanes=2, dims=("K", "P"))),
]


@pytest.mark.parametrize("objective", [Objective.DRAM, Objective.LATENCY, Objective.ENERGY])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_exhaustive_with_register_files_equals_brute_force(case: int, objective: Objective) -> None:
    """The default exhaustive search (register-file level included) reaches the brute-force least over
    the union of the plain space and every bypass, and is never worse than the plain search."""
    layer, arch = CASES[case]
    problem = Problem(layer, arch)
    least, plain_least = brute_force(problem, objective)
    plain = merge_split_searches(problem, [search_splits(problem, objective)])
    assert float(objective.key(plain.cost)[0]) == pytest.approx(plain_least, rel=1e-12)
    result = exhaustive(problem, objective)
    found = float(objective.key(result.cost)[0])
    assert found == pytest.approx(least, rel=1e-12)
    assert found <= float(objective.key(plain.cost)[0])
    assert result.cost.feasible[0]
    assert float(objective.key(recost(problem, result.mapping) if result.mapping.bypass
                               else evaluate(problem, MappingBatch.from_mappings([result.mapping])))[0]) == found


def test_register_files_lower_dram_traffic_where_the_buffer_is_short() -> None:
    """Case 0: the bypass strictly lowers DRAM bytes (so the brute-force equality above is not vacuous)."""
    layer, arch = CASES[0]
    problem = Problem(layer, arch)
    least, plain_least = brute_force(problem, Objective.DRAM)
    assert least < plain_least
    result = exhaustive(problem, Objective.DRAM)
    assert result.mapping.bypass


def test_bypassed_mapping_runs_as_a_program_and_through_eval() -> None:
    """The program of a bypassed mapping (weights in a register-file memory) runs bit-exact and moves
    exactly the DRAM bytes and bursts the model predicts; ``api.evaluate`` costs it and names a piece
    that does not fit."""
    from tileplan.api import evaluate as api_evaluate
    from tileplan.program.verify import verify_layer

    layer = Layer.conv("c", c_in=8, h=6, w=6, k_out=8, r=3, s=3, pad=0, precision=Precision.uniform(1))
    arch = rf_arch(260, (0, 144, 0), lanes=4, dims=("K",))
    tiles = (1, 1, 8, 8, 2, 4, 3, 3)
    mapping = _mapping(tiles, (1, 1, 4, 1, 1, 1, 1, 1), "NGKCPQRS", bypass=frozenset({Operand.WEIGHT}))
    result = verify_layer(layer, arch, mapping)
    assert result.feasible and result.bit_exact
    assert result.counted_read_bytes == result.predicted_read_bytes
    assert result.counted_write_bytes == result.predicted_write_bytes
    assert result.counted_bursts == result.predicted_bursts
    cost = api_evaluate(layer, arch, mapping)
    assert cost.dram_bytes == sum(result.counted_read_bytes) + result.counted_write_bytes
    with pytest.raises(MappingError, match="piece of the bypassed weight tile needs 288 B"):
        api_evaluate(layer, arch, _mapping(tiles, (1, 1, 2, 1, 1, 1, 1, 1), bypass=frozenset({Operand.WEIGHT})))


def test_plan_in_parallel_parts_includes_the_register_file_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layer searched as parallel parts (many core splits, two jobs) gets the register-file level
    too: the same plan as searched whole."""
    from tileplan import api
    from tileplan.workload.network import Network

    layer = Layer.conv("w", c_in=4, h=4, w=3, k_out=4, r=1, s=1, pad=0, precision=Precision.uniform(1))
    arch = rf_arch(8, (2, 4, 2), lanes=4, dims=("K", "C"), clusters=2, cores=2)
    net = Network("one", (layer,), input_shape=(1, 4, 4, 3))
    items: list[int] = []
    real = api.run_parallel

    def spy(fn, args, *, jobs):  # type: ignore[no-untyped-def]
        items.append(len(args))
        return real(fn, args, jobs=jobs)

    monkeypatch.setattr(api, "run_parallel", spy)
    one = api.plan(net, arch, objective="dram", jobs=1)
    two = api.plan(net, arch, objective="dram", jobs=2)
    assert items == [1, 2]  # with two jobs the layer ran as two parts
    assert one.layers[0].mapping is not None and one.layers[0].mapping.bypass
    assert two.layers[0].mapping == one.layers[0].mapping
    assert two.layers[0].cost.dram_bytes == one.layers[0].cost.dram_bytes


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_bypass_variant_shares_only_tables_that_read_no_memory(case: int) -> None:
    """The kernel tables of a bypass variant, built on the tables it shares with its problem
    (``rf_level.SHARED_TABLES``), equal those of the same machine built from nothing."""
    from tileplan.cost.model import split_tables

    layer, arch = CASES[case]
    problem = Problem(layer, arch)
    split = ((1,) * NDIMS, (1,) * NDIMS)
    split_tables(problem, *split)  # fills the shared tables
    assert bypass_options(problem)
    for op in bypass_options(problem):
        variant = bypass_problem(problem, frozenset({op}))
        shared = split_tables(variant, *split)
        alone = split_tables(Problem(layer, variant.arch), *split)
        for name, value in shared._asdict().items():
            assert np.array_equal(np.asarray(value), np.asarray(getattr(alone, name))), name
