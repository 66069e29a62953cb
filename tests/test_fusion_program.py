"""Fused programs: bit-exact against the layers run one by one, counted DRAM bytes/bursts and MACs
equal to the fused model, for every overlap mode, on groups drawn from the zoo at reduced sizes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tileplan import api
from tileplan.fusion.group import Direction, FusedGroup, Overlap
from tileplan.fusion.program import FusedProgramError, generate_fused
from tileplan.fusion.verify import verify_fused
from tileplan.workload.layer import Layer, OpKind, Precision

B1 = Precision.uniform(1)


def shrink(network: str, names: list[str], hw: int, div: int) -> list[Layer]:
    """The zoo layers ``names`` with the input ``hw`` x ``hw`` and channels divided by ``div``."""
    net = api.load_network(network)
    layers = [net[n] for n in names]
    c = layers[0].c_in if layers[0].c_in <= 3 else max(1, layers[0].c_in // div)
    h = w = hw
    out = []
    for x in layers:
        k = c if x.op in (OpKind.DEPTHWISE, OpKind.MAXPOOL, OpKind.AVGPOOL) else max(1, x.k_out // div)
        groups = c if x.op is OpKind.DEPTHWISE or x.op.is_pool else 1
        y = replace(x, c_in=c, k_out=k, h=h, w=w, groups=groups, inputs=(), precision=B1)
        out.append(y)
        c, h, w = y.k_out, y.p, y.q
    return out


GROUPS = [
    ("vgg16", ["conv1_1", "conv1_2", "pool1"], 12, 8),
    ("resnet50", ["conv1", "pool1"], 21, 8),
    ("resnet50", ["res2a_conv1", "res2a_conv2", "res2a_conv3"], 9, 16),
    ("mobilenetv2", ["block1_expand", "block1_dw", "block1_project"], 11, 8),
    ("inceptionv3", ["Mixed_6b_7x7dbl_1", "Mixed_6b_7x7dbl_2", "Mixed_6b_7x7dbl_3"], 9, 16),
]


def _mapping(layers, tp, tq, **kw):
    from test_fusion_model import fused

    return fused(layers, min(tp, layers[-1].p), min(tq, layers[-1].q), **kw)


@pytest.mark.parametrize(("network", "names", "hw", "div"), GROUPS, ids=[g[1][0] for g in GROUPS])
@pytest.mark.parametrize("variant", ["recompute", "reuse", "reuse-cols", "alwani", "streamed", "tile_k"])
def test_fused_programs_are_exact_and_count_what_the_model_predicts(network, names, hw, div, variant):
    layers = shrink(network, names, hw, div)
    group = FusedGroup(tuple(layers))
    kw: dict = {}
    if variant == "reuse":
        kw = {"overlap": Overlap.REUSE}
    elif variant == "reuse-cols":
        kw = {"overlap": Overlap.REUSE, "direction": Direction.COLS}
    elif variant == "alwani":
        kw = {"overlap": Overlap.ALWANI}
    elif variant == "streamed":
        kw = {"resident": (False,) * len(layers)}
    elif variant == "tile_k" and layers[-1].groups == 1:
        kw = {"tk": max(1, layers[-1].k_out // 3)}
    v = verify_fused(group, api.load_arch("eyeriss"), _mapping(layers, 3, 2, **kw), seed=len(names))
    assert v.bit_exact
    assert v.counted_read_bytes == v.predicted_read_bytes
    assert v.counted_write_bytes == v.predicted_write_bytes
    assert v.counted_bursts == v.predicted_bursts
    assert v.counted_macs == v.predicted_macs
    assert v.within_footprint, (v.peak_bytes, v.footprint_bytes)


def test_channel_chunked_program():
    layers = shrink("mobilenetv2", ["block0_project", "block1_expand"], 7, 2)
    group = FusedGroup(tuple(layers))
    for resident in ((True, True), (False, False)):
        v = verify_fused(group, api.load_arch("eyeriss"), _mapping(layers, 2, 3, chunk=(3,), resident=resident))
        assert v.ok, v


def test_on_chip_overflow_names_the_memory():
    from helpers import toy_arch

    from tileplan.fusion.program import execute_fused

    layers = shrink("vgg16", ["conv1_1", "conv1_2"], 10, 8)
    arch = toy_arch(sizes=(1 << 20, 1 << 20, 8))
    prog = generate_fused(FusedGroup(tuple(layers)), arch, _mapping(layers, 4, 4))
    import numpy as np

    with pytest.raises(FusedProgramError, match="m2 overflows") as err:
        execute_fused(prog, np.zeros((1, 3, 10, 10), dtype=int), [np.zeros((8, 3, 3, 3), dtype=int),
                                                                   np.zeros((8, 8, 3, 3), dtype=int)])
    assert err.value.memory == "m2"


def test_verify_and_emit_a_fused_group_from_the_cli(tmp_path):
    from typer.testing import CliRunner

    from tileplan.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["verify", "lenet5", "--arch", "eyeriss", "--group", "conv2+pool2"])
    assert result.exit_code == 0, result.output
    assert "bit-exact" in result.output and "equal the model" in result.output
    target = tmp_path / "g.txt"
    result = runner.invoke(app, ["emit", "lenet5", "--arch", "eyeriss", "--group", "conv1+pool1", "--output",
                                 str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert text.startswith("# fused group conv1+pool1") and "COMPUTE L1" in text and "STORE L1" in text
    bad = runner.invoke(app, ["verify", "resnet50", "--arch", "eyeriss", "--group", "pool1+res2a_conv1"])
    assert bad.exit_code != 0 and "also read by" in bad.output and "Traceback" not in bad.output
