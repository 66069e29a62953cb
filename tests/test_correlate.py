"""`tileplan correlate`: Pearson correlation of modelled and measured per-layer times (thesis Fig. 6.3)."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tileplan import api
from tileplan.errors import TileplanError
from tileplan.program.correlation import measured_csv, pearson
from tileplan.program.ctime import time_layers
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network


def _with_coefficient(x: np.ndarray, r: float) -> np.ndarray:
    """Values whose Pearson correlation with ``x`` is exactly ``r`` (0 < r < 1): the centred ``x`` plus a
    vector orthogonal to it and to the constants, of length |x_c| tan(arccos r), shifted positive."""
    xc = x - x.mean()
    z = np.cos(np.arange(len(x)) * 2.0)
    basis = np.stack([np.ones(len(x)) / math.sqrt(len(x)), xc / np.linalg.norm(xc)])
    z -= basis.T @ (basis @ z)
    z *= np.linalg.norm(xc) * math.sqrt(1 / r**2 - 1) / np.linalg.norm(z)
    y = xc + z
    return y - y.min() + x.mean()


def test_pearson_closed_forms() -> None:
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert pearson(x, [2 * v + 1 for v in x]) == pytest.approx(1.0)
    assert pearson(x, [-v for v in x]) == pytest.approx(-1.0)
    # x_c = (-2,-1,0,1,2) and z = (2,-1,-2,-1,2) are orthogonal: r = 10 / sqrt(10 * 24) = sqrt(5/12)
    assert pearson(x, [a + b for a, b in zip(x, [2, -1, -2, -1, 2], strict=True)]) == pytest.approx(math.sqrt(5 / 12))
    assert math.isnan(pearson(x, [3.0] * 5))
    with pytest.raises(TileplanError, match="at least two"):
        pearson([1.0], [1.0])


def test_cli_recovers_a_known_coefficient(tmp_path: Path) -> None:
    """Synthetic measurements built to correlate 0.64 (the thesis's figure) with the plan's modelled
    times: the command reports 0.640 and writes the plot and the paired CSV."""
    from tileplan.cli import app

    plan = api.plan("vgg16", "eplanner-a", strategy="eplanner", objective="perf-per-byte", jobs=1)
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(plan.to_json())
    names = [lp.name for lp in plan.layers if lp.op == "conv"]
    modelled = np.array([next(lp for lp in plan.layers if lp.name == n).cost.latency_cycles for n in names])
    measured = _with_coefficient(modelled / plan.clock_hz, 0.64)
    csv = tmp_path / "measured.csv"
    csv.write_text(measured_csv(dict(zip(names, measured.tolist(), strict=True))) + "not_a_layer,1.0\n")
    result = CliRunner().invoke(app, ["correlate", str(plan_path), str(csv), "--plot", str(tmp_path / "r.png"),
                                      "--csv", str(tmp_path / "pairs.csv")])
    assert result.exit_code == 0, result.output
    assert "Pearson correlation: 0.640 over 13 layers" in result.output
    assert "not_a_layer" in result.output
    assert (tmp_path / "r.png").stat().st_size > 0 and (tmp_path / "r.svg").exists()
    assert (tmp_path / "pairs.csv").read_text().splitlines()[0] == "layer,modelled_s,measured_s"
    bad = tmp_path / "bad.csv"
    bad.write_text("name,time\nconv1_1,1\n")
    out = CliRunner().invoke(app, ["correlate", str(plan_path), str(bad)])
    assert out.exit_code != 0 and "columns 'layer' and 'seconds'" in out.output
    with pytest.raises(TileplanError, match="only 0 measured"):
        api.correlate(plan, {"x": 1.0, "y": 2.0})


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: `cc` is not on PATH")
def test_generated_c_is_timed_per_layer() -> None:
    """A real measured source: two layers 27x apart in MACs take measurably different times."""
    net = Network("two", (Layer.conv("small", c_in=4, h=8, w=8, k_out=4, r=3),
                          Layer.conv("large", c_in=12, h=24, w=24, k_out=12, r=3)), (1, 4, 8, 8))
    arch = api.load_arch("cpu-c99")
    plan = api.plan(net, arch, strategy="eplanner", objective="perf-per-byte", jobs=1)
    times = time_layers(net, arch, plan, repeats=2)
    assert set(times) == {"small", "large"} and times["large"] > times["small"] > 0


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: `cc` is not on PATH")
def test_generated_c_of_element_wise_layers_is_timed() -> None:
    """Float element-wise programs link libm and read float64 operands: a softmax and a silu are timed."""
    from tileplan.workload.transformer import elementwise

    softmax = elementwise("softmax", "softmax", channels=64, rows=32, row_channels=16)
    silu = replace(elementwise("silu", "silu", channels=64, rows=32), inputs=("softmax",))
    net = Network("ew", (softmax, silu), (1, 64, 32, 1))
    arch = api.load_arch("cpu-c99")
    plan = api.plan(net, arch, jobs=1)
    times = time_layers(net, arch, plan, repeats=1)
    assert set(times) == {"softmax", "silu"} and min(times.values()) > 0
