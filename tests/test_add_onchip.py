"""An n-ary add's on-chip traffic: each compute step the PE array reads the step's tile of *every*
addend from the input buffer (issue 24 item 6a: the model counted one addend). Reference: a plain
walk of the DRAM tile loop nest summing, per tile, the bytes the PE array reads and writes; DRAM
bytes from the loop-nest walk of ``reference.walk``. Both kernel paths (numba and its numpy twin)."""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import walk

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.cost import compiled
from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, Dim, Operand
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer


def step_bytes(layer: Layer, mapping: Mapping) -> tuple[int, int]:
    """(input bytes of every addend, output bytes at partial-sum precision) the PE array moves over
    every DRAM tile of the nest: each tile's input box (rows and columns clipped to the map) of each
    addend, and its output box."""
    prec = layer.resolved_precision()
    full = layer.dims
    ranges = {d: [(a, min(a + mapping.tiles[d], full[d])) for a in range(0, full[d], mapping.tiles[d])]
              for d in DIMS}
    in_bytes = out_bytes = 0
    for box in product(*(ranges[d] for d in DIMS)):
        ext = {d: hi - lo for d, (lo, hi) in zip(DIMS, box, strict=True)}
        span = []
        for dp, dk, axis, size, pad in ((Dim.P, Dim.R, 0, layer.h, layer.pad[0]), (Dim.Q, Dim.S, 1, layer.w,
                                                                                    layer.pad[2])):
            lo = box[dp][0] * layer.stride[axis] + box[dk][0] * layer.dilation[axis] - pad
            hi = (box[dp][1] - 1) * layer.stride[axis] + (box[dk][1] - 1) * layer.dilation[axis] - pad + 1
            span.append(max(0, min(hi, size) - max(lo, 0)))
        in_bytes += layer.input_count * ext[Dim.N] * ext[Dim.G] * ext[Dim.C] * span[0] * span[1] * prec.input
        out_bytes += ext[Dim.N] * ext[Dim.G] * ext[Dim.K] * ext[Dim.P] * ext[Dim.Q] * prec.psum
    return in_bytes, out_bytes


def _add(arch: Arch, n: int, channels: int, h: int, w: int, count: int) -> Layer:
    layer = Layer.add("a", n=n, channels=channels, h=h, w=w, input_count=count)
    return layer.with_precision(Problem(layer, arch).precision)


def _costs(problem: Problem, mapping: Mapping, kernel: str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    if kernel == "numba" and compiled.loop() is None:
        pytest.skip("numba not installed")
    monkeypatch.setenv("TILEPLAN_KERNEL", kernel)
    return evaluate(problem, MappingBatch.from_mappings([mapping]))


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@pytest.mark.parametrize(("count", "noc_cycles"), [(2, 16.0), (3, 64 / 3)])
def test_add_noc_cycles_count_every_addend(kernel: str, count: int, noc_cycles: float,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """eyeriss, a 4x4x4 add in one tile: (count x 64 input + 64 output bytes) / 12 B per cycle."""
    arch = api.load_arch("eyeriss")
    layer = _add(arch, 1, 4, 4, 4, count)
    problem = Problem(layer, arch)
    mapping = Mapping(tiles=tuple(int(problem.dims[d]) for d in DIMS), order=tuple(DIMS))
    assert step_bytes(layer, mapping) == (count * 64, 64)
    assert _costs(problem, mapping, kernel, monkeypatch).noc_cycles[0] == pytest.approx(noc_cycles, rel=1e-12)


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.integers(1, 6), st.integers(1, 7), st.integers(1, 7), st.data())
def test_add_noc_and_buffer_traffic_equal_the_tile_walk(kernel: str, count: int, channels: int, h: int, w: int,
                                                        data: st.DataObject) -> None:
    arch = api.load_arch("eyeriss")
    layer = _add(arch, data.draw(st.integers(1, 2)), channels, h, w, count)
    problem = Problem(layer, arch)
    tiles = tuple(data.draw(st.integers(1, int(problem.dims[d]))) for d in DIMS)
    mapping = Mapping(tiles=tiles, order=tuple(data.draw(st.permutations(list(DIMS)))))
    in_bytes, out_bytes = step_bytes(layer, mapping)
    ref = walk(layer, mapping, burst=arch.dram.burst_bytes)
    mem = [m.energy_pj_per_byte for m in arch.memories]
    e_in, e_out = mem[problem.memory_of_operand[Operand.INPUT]], mem[problem.memory_of_operand[Operand.OUTPUT]]
    buffer = ((ref.read_bytes[0] + in_bytes) * e_in
              + (ref.read_bytes[2] + ref.write_bytes + 2 * out_bytes) * e_out)
    with pytest.MonkeyPatch.context() as mp:
        costs = _costs(problem, mapping, kernel, mp)
    assert costs.noc_cycles[0] == pytest.approx((in_bytes + out_bytes) / arch.noc_bytes_per_cycle, rel=1e-12)
    energy = costs.energy_breakdown_pj[0]
    assert energy[3] == pytest.approx((in_bytes + out_bytes) * arch.noc.energy_pj_per_byte, rel=1e-12)
    assert energy[2] == pytest.approx(buffer, rel=1e-12)
