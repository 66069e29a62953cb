"""Block groups (fusion/block.py): fused residual blocks with the skip tensor on chip, groups that
start or end at an add or a concat; counted (executed programs) = model, against a plain pixel walk,
and against Stream's published fused DRAM traffic on the dual-residual block."""

from __future__ import annotations

from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np
import pytest

from tileplan import api
from tileplan.arch.spec import Arch
from tileplan.errors import MappingError, WorkloadError
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.block import group_of, propagate_block
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap, Side
from tileplan.fusion.propagate import AxisGeom, propagate
from tileplan.fusion.search import search_group
from tileplan.fusion.verify import verify_fused
from tileplan.workload.layer import Layer, Precision
from tileplan.workload.network import Network

B1 = Precision(1, 1, 1, 1)
EXAMPLES = Path(__file__).parent.parent / "examples"


def basic_block(c: int = 8, k: int = 16, hw: int = 12, stride: int = 2) -> Network:
    """stem -> (a 3x3/stride, b 3x3) + (sc 1x1/stride) -> add: ResNet's downsampling basic block."""
    h2 = (hw + 2 - 3) // stride + 1
    layers = (Layer.conv("stem", c_in=3, h=hw, w=hw, k_out=c, r=3, precision=B1),
              Layer.conv("a", c_in=c, h=hw, w=hw, k_out=k, r=3, stride=stride, inputs=("stem",), precision=B1),
              Layer.conv("b", c_in=k, h=h2, w=h2, k_out=k, r=3, inputs=("a",), precision=B1),
              Layer.conv("sc", c_in=c, h=hw, w=hw, k_out=k, r=1, stride=stride, inputs=("stem",), precision=B1),
              Layer.add("add", channels=k, h=h2, w=h2, inputs=("b", "sc"), precision=B1),
              Layer.conv("next", c_in=k, h=h2, w=h2, k_out=k, r=3, inputs=("add",), precision=B1),
              Layer.add("add2", channels=k, h=h2, w=h2, inputs=("next", "add"), precision=B1))
    return Network("basic", layers, (1, 3, hw, hw))


def bottleneck(c: int = 16, mid: int = 4, hw: int = 10) -> Network:
    """stem -> c1 1x1 -> c2 3x3 -> c3 1x1 -> add(c3, stem): ResNet-50's identity bottleneck; then a
    downsampling one: d1 1x1 -> d2 3x3/2 -> d3 1x1, down 1x1/2 on the add, add2."""
    h2 = (hw - 1) // 2 + 1
    layers = (Layer.conv("stem", c_in=3, h=hw, w=hw, k_out=c, r=3, precision=B1),
              Layer.conv("c1", c_in=c, h=hw, w=hw, k_out=mid, r=1, inputs=("stem",), precision=B1),
              Layer.conv("c2", c_in=mid, h=hw, w=hw, k_out=mid, r=3, inputs=("c1",), precision=B1),
              Layer.conv("c3", c_in=mid, h=hw, w=hw, k_out=c, r=1, inputs=("c2",), precision=B1),
              Layer.add("add", channels=c, h=hw, w=hw, inputs=("c3", "stem"), precision=B1),
              Layer.conv("d1", c_in=c, h=hw, w=hw, k_out=mid, r=1, inputs=("add",), precision=B1),
              Layer.conv("d2", c_in=mid, h=hw, w=hw, k_out=mid, r=3, stride=2, inputs=("d1",), precision=B1),
              Layer.conv("d3", c_in=mid, h=h2, w=h2, k_out=2 * c, r=1, inputs=("d2",), precision=B1),
              Layer.conv("down", c_in=c, h=hw, w=hw, k_out=2 * c, r=1, stride=2, inputs=("add",), precision=B1),
              Layer.add("add2", channels=2 * c, h=h2, w=h2, inputs=("d3", "down"), precision=B1))
    return Network("bottleneck", layers, (1, 3, hw, hw))


def inception(c: int = 6, hw: int = 9) -> Network:
    """stem -> (1x1, 3x3 branches) -> concat: a group ending at a concat of two on-chip branches."""
    layers = (Layer.conv("stem", c_in=3, h=hw, w=hw, k_out=c, r=3, precision=B1),
              Layer.conv("b1", c_in=c, h=hw, w=hw, k_out=4, r=1, inputs=("stem",), precision=B1),
              Layer.conv("b3", c_in=c, h=hw, w=hw, k_out=5, r=3, inputs=("stem",), precision=B1),
              Layer.concat("cat", channels=9, h=hw, w=hw, inputs=("b1", "b3"), precision=B1),
              Layer.conv("after", c_in=9, h=hw, w=hw, k_out=4, r=3, inputs=("cat",), precision=B1))
    return Network("inception", layers, (1, 3, hw, hw))


def mappings(group: FusedGroup, arch: Arch) -> list[FusedMapping]:
    """Several fused mappings of ``group``: tile sizes with remainders, resident and streamed weights,
    K chunks of the last layer, both directions; unrolls from the searched best."""
    best = search_group(group, arch, "latency")
    assert best is not None
    last = group.last
    chunk = tuple(x.k_out for x in group.layers[:-1])
    out = []
    for (tp, tq), res, tk, d in product([(1, 1), (2, 3), (last.p, 2), (last.p, last.q)],
                                        [tuple(True for _ in group.layers), tuple(not x.has_weights or m % 2 == 1
                                                                               for m, x in enumerate(group.layers))],
                                        sorted({last.k_out, max(1, last.k_out // 4)}), Direction):
        if tk < last.k_out and last.groups > 1:
            continue
        out.append(FusedMapping(1, tp, tq, tk, Overlap.RECOMPUTE, d, res, chunk, best.mapping.unroll))
    return out


CASES = [(basic_block, ["a", "b", "sc", "add"]),  # downsampling basic block: 1x1 shortcut inside
         (basic_block, ["add", "next", "add2"]),  # starts at an add; the skip is the add's own output
         (basic_block, ["a", "b", "sc", "add", "next", "add2"]),  # two residual blocks in one group
         (bottleneck, ["c1", "c2", "c3", "add"]),  # identity bottleneck: the skip is the group input
         (bottleneck, ["d1", "d2", "d3", "down", "add2"]),  # downsampling bottleneck: 1x1/2 shortcut inside
         (inception, ["b1", "b3", "cat"]),  # ends at a concat of two on-chip branches
         (inception, ["cat", "after"])]  # starts at a concat: its first input on chip, the other from DRAM


@pytest.mark.parametrize("every", [3, pytest.param(1, marks=pytest.mark.slow, id="all")])
@pytest.mark.parametrize("make,names", CASES, ids=["+".join(n) for _, n in CASES])
def test_block_groups_counted_equal_model(make, names, every):
    """Every third of the mappings by default (each tile shape, residency, K chunk and direction still
    occurs across them), every one under ``slow``."""
    net = make()
    group = group_of(net, names)
    assert group.is_block
    arch = api.load_arch("eyeriss")
    with pytest.raises(MappingError, match="recompute"):
        replace(mappings(group, arch)[0], overlap=Overlap.REUSE).check(group)
    for mapping in mappings(group, arch)[::every]:
        v = verify_fused(group, arch, mapping)
        assert v.bit_exact, mapping
        assert v.traffic_match, (mapping, v)
        assert v.predicted_macs == v.counted_macs
        assert v.within_footprint, (mapping, v.peak_bytes, v.footprint_bytes)


def test_propagation_over_a_chain_is_the_chain_propagation():
    """A chain is the special case of the DAG propagation: the same intervals exactly."""
    net = bottleneck()
    chain = group_of(net, ["c1", "c2", "c3"])
    assert not chain.is_block
    geoms = [AxisGeom(x.h, x.p, x.stride[0], x.dilation[0], x.r, x.pad[0]) for x in chain.layers]
    tiles = np.arange(1, chain.last.p + 1)
    a = propagate(geoms, tiles)
    as_block = FusedGroup(chain.layers, ((), (), ()), (-1, 0, 1))
    b = propagate_block(as_block, geoms, tiles)
    for name in ("out_lo", "out_hi", "new_lo", "in_lo", "in_hi", "newin_lo", "newin_hi"):
        for x, y in zip(getattr(a, name), getattr(b, name), strict=True):
            assert np.array_equal(x, y), name
    assert np.array_equal(b.x_lo, a.in_lo[0]) and np.array_equal(b.x_hi, a.in_hi[0])
    # and the costs of the chain as a block group are the chain's
    arch = api.load_arch("eyeriss")
    for m in mappings(chain, arch)[:6]:
        x, y = evaluate_fused(chain, arch, m).cost, evaluate_fused(as_block, arch, m).cost
        for field in ("dram_read_bytes", "dram_write_bytes", "dram_bursts", "latency_cycles", "energy_breakdown_pj"):
            assert np.array_equal(getattr(x, field), getattr(y, field)), field


def test_skip_on_chip_saves_exactly_its_dram_reads():
    """The identity bottleneck as a chain reads the skip tensor from DRAM again (a side); as a block
    the skip is a sub-window of the input window already on chip: the input reads drop by exactly the
    side's reads, the rest is equal, and the footprint counts the input hull once."""
    net = bottleneck()
    block = group_of(net, ["c1", "c2", "c3", "add"])
    chain = FusedGroup(block.layers, ((), (), (), (Side("stem", 16, 16),)))
    assert block.is_block and not chain.is_block
    arch = api.load_arch("eyeriss")
    for m in mappings(block, arch)[:8]:
        b, c = evaluate_fused(block, arch, m).cost, evaluate_fused(chain, arch, m).cost
        side = c.dram_read_bytes[0, 0] - b.dram_read_bytes[0, 0]
        # the skip's windows: the add's output tiles, 16 channels, one byte each, summed over the steps
        tiles = sum(min(m.tile_p, 10 - i) * min(m.tile_q, 10 - j) for i in range(0, 10, m.tile_p)
                    for j in range(0, 10, m.tile_q))
        assert side == 16 * tiles == 1600
        assert np.array_equal(b.dram_read_bytes[:, 1:], c.dram_read_bytes[:, 1:])
        assert b.dram_write_bytes[0] == c.dram_write_bytes[0]
        assert b.footprint_bytes[0, 0] < c.footprint_bytes[0, 0]


def _walk_dram_words(net: Network, names: list[str], tile_p: int, tile_q: int) -> int:
    """DRAM words of a block group with resident weights (recompute), by a plain walk: per output tile
    of the last layer, the pixel sets every tensor must hold, found pixel by pixel backwards through
    the DAG; the group input's pixels are read once per step; weights once, the output once."""
    layers = [net[n] for n in names]
    inside = {x.name for x in layers}
    last = layers[-1]
    words = sum(x.k_out * x.c_in // x.groups * x.r * x.s for x in layers if x.has_weights)
    words += last.k_out * last.p * last.q
    x_name = layers[0].inputs[0]
    for p0 in range(0, last.p, tile_p):
        for q0 in range(0, last.q, tile_q):
            need = {x.name: set() for x in layers}
            need[last.name] = {(p, q) for p in range(p0, min(p0 + tile_p, last.p))
                               for q in range(q0, min(q0 + tile_q, last.q))}
            need[x_name] = set()
            for x in reversed(layers):
                for p, q in need[x.name]:
                    for r in range(x.r):
                        for s in range(x.s):
                            i, j = p * x.stride[0] - x.pad[0] + r, q * x.stride[1] - x.pad[2] + s
                            if 0 <= i < x.h and 0 <= j < x.w:
                                for src in x.inputs:
                                    if src in inside or src == x_name:
                                        need[src].add((i, j))
            words += len(need[x_name]) * net[x_name].k_out
    return words


def test_block_dram_words_equal_a_plain_walk():
    net = basic_block()
    names = ["a", "b", "sc", "add"]
    group = group_of(net, names)
    arch = api.load_arch("eyeriss")
    for m in mappings(group, arch):
        if all(m.resident) and m.tile_k == group.last.k_out:
            cost = evaluate_fused(group, arch, m).cost
            total = int(cost.dram_read_bytes[0].sum() + cost.dram_write_bytes[0])
            assert total == _walk_dram_words(net, names, m.tile_p, m.tile_q), m


def test_planner_fuses_whole_residual_blocks():
    net = basic_block()
    plan = api.plan_fused(net, "eyeriss", objective="dram", jobs=1, max_group=8)
    assert ("a", "b", "sc", "add", "next", "add2") in [g.layers for g in plan.groups] or \
        any(set(("a", "b", "sc", "add")) <= set(g.layers) for g in plan.groups)
    assert plan.dram_bytes < plan.base.dram_bytes


def dual_residual_onnx(path: Path) -> Path:
    """Stream's ``stream_resnet_dual_residual`` graph: 8 channels, 16x16, two residual blocks
    (conv-relu-conv-add twice), bf16, built with onnx.helper."""
    import onnx
    from onnx import TensorProto, helper

    def conv(name: str, x: str) -> onnx.NodeProto:
        return helper.make_node("Conv", [x, f"w_{name}"], [name], name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    weights = [helper.make_tensor(f"w_{n}", TensorProto.BFLOAT16, [8, 8, 3, 3], np.zeros(576, dtype=np.uint16).tolist(),
                                  raw=False) for n in ("Conv1", "Conv2", "Conv3", "Conv4")]
    nodes = [conv("Conv1", "input"), helper.make_node("Relu", ["Conv1"], ["r1"], name="Relu1"), conv("Conv2", "r1"),
             helper.make_node("Add", ["Conv2", "input"], ["Add1"], name="Add1"), conv("Conv3", "Add1"),
             helper.make_node("Relu", ["Conv3"], ["r2"], name="Relu2"), conv("Conv4", "r2"),
             helper.make_node("Add", ["Conv4", "Add1"], ["Add2"], name="Add2")]
    graph = helper.make_graph(nodes, "DualResidual",
                              [helper.make_tensor_value_info("input", TensorProto.BFLOAT16, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("Add2", TensorProto.BFLOAT16, [1, 8, 16, 16])],
                              initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return path


def test_dual_residual_fused_dram_at_most_streams(tmp_path: Path):
    """Stream 2.1.1 on one TPU-like core moves 60.5 KiB unfused and 12.5 KiB fused on this graph
    (peers kit, issue 27); tileplan on the same memory sizes: 60.5 KiB unfused and, with both residual
    blocks in one group, the input, the weights and the output once each: 4 + 4.5 + 4 KiB."""
    net = api.load_network(str(dual_residual_onnx(tmp_path / "dual.onnx")))
    assert [x.precision.input for x in net.layers] == [2] * 6  # bf16
    arch = api.load_arch(str(EXAMPLES / "tpu_like_stream.yaml"))
    plan = api.plan_fused(net, arch, objective="dram", jobs=1)  # the default --max-group: 4 convolutions
    assert plan.base.dram_bytes == 60.5 * 1024
    tensor, weights = 8 * 16 * 16 * 2, 4 * 8 * 8 * 9 * 2
    assert plan.dram_bytes == tensor + weights + tensor == 12.5 * 1024  # Stream: 12.5 KiB
    assert [g.layers for g in plan.groups] == [tuple(x.name for x in net.layers)]


def test_bad_block_groups_are_one_clear_error():
    net = basic_block()
    with pytest.raises(WorkloadError, match=r"the output of 'b' is also read by \['add'\]"):
        group_of(net, ["a", "b", "sc"])  # the add reading b is left out
    good = group_of(net, ["a", "b", "sc", "add"])
    with pytest.raises(WorkloadError, match="reads a tensor produced after it"):
        FusedGroup(good.layers, good.sides, (-1, 2, -1, 2))
    with pytest.raises(WorkloadError, match="does not consume its inputs' shapes"):
        FusedGroup(good.layers, good.sides, (-1, 0, 0, 2))  # sc (12x12 input) reading a's 6x6 output


@pytest.mark.slow
def test_resnet18_fused_dram_at_most_streams():
    """ResNet-18 (int8) on one TPU-like core, 2 MiB SRAM: Stream 2.1.1 moves 21.16 MB unfused and
    13.49 MB fused (peers kit, issue 27); tileplan 19.37 MB unfused and, at the default --max-group
    (4 layers with a compute window: the stem, its pool and the first basic block fit one group, every
    other basic block is a group), at most Stream's fused traffic; the weights (11.69 MB) once. With
    --max-group 8 each stage is one group (two blocks), less still."""
    net = api.load_network("resnet18")
    arch = api.load_arch(str(EXAMPLES / "tpu_like_stream.yaml"))
    plan = api.plan_fused(net, arch, objective="dram", jobs=1)
    assert plan.base.dram_bytes == pytest.approx(19.37e6, rel=1e-3)
    assert plan.dram_bytes <= 13.49e6
    weights = sum(x.k_out * x.c_in // x.groups * x.r * x.s for x in net.layers if x.has_weights)
    assert plan.dram_bytes >= weights
    assert ("conv1", "pool1", "res2a_conv1", "res2a_conv2", "res2a_add") in [g.layers for g in plan.groups]
    wide = api.plan_fused(net, arch, objective="dram", jobs=1, max_group=8)
    assert weights <= wide.dram_bytes < plan.dram_bytes
    assert max(sum(net[n].op.value == "add" for n in g.layers) for g in wide.groups) >= 2  # two blocks, one group


def test_emit_and_verify_a_block_group_from_the_cli(tmp_path: Path):
    from typer.testing import CliRunner

    from tileplan.cli import app

    runner = CliRunner()
    # the dual-residual graph's first block (ResNet's basic block at 8 channels, 16 x 16, bf16): identity
    # skip on chip; ResNet-18's res2a (64 channels, 56 x 56) takes 7 s to search three times over
    model = str(dual_residual_onnx(tmp_path / "dual.onnx"))
    names = "Conv1+Conv2+Add1"
    result = runner.invoke(app, ["verify", model, "--arch", "eyeriss", "-o", "dram", "--group", names])
    assert result.exit_code == 0, result.output
    assert "bit-exact" in result.output and "equal the model" in result.output
    target = tmp_path / "g.txt"
    result = runner.invoke(app, ["emit", model, "--arch", "eyeriss", "--group", names, "--output", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert text.count("LOAD_INPUT") >= 1 and "LOAD_SIDE" not in text  # the skip is never read from DRAM
    bad = runner.invoke(app, ["emit", model, "--arch", "eyeriss", "--group", names, "--target", "c",
                              "--output", str(tmp_path / "g.c")])
    assert bad.exit_code != 0 and "chains only" in bad.output and "Traceback" not in bad.output
    assert not (tmp_path / "g.c").exists()
