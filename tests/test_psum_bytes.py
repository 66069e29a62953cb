"""``--psum-bytes``: the partial-sum width of the planning commands. A mapping whose output tiles are
left and revisited across the reduction moves ``psum_bytes`` per spilled partial sum, as the plain
loop-nest walk counts it; the option is the machine field ``psum_bytes``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference import walk
from typer.testing import CliRunner

from tileplan import api
from tileplan.cli import app
from tileplan.dims import Dim
from tileplan.mapping import Mapping
from tileplan.workload.layer import Precision

# lenet5's conv2 (6 -> 16 channels, 10x10 out, 5x5 kernel) with the input channels outermost and two
# output-channel tiles inside: each output tile is written back and read again 2 times out of 3.
SPILL = Mapping(tiles=(1, 1, 8, 2, 10, 10, 5, 5), order=(Dim.C, Dim.N, Dim.G, Dim.K, Dim.P, Dim.Q, Dim.R, Dim.S))


def _eval(tmp_path: Path, *extra: str) -> dict[str, float]:
    path = tmp_path / "m.json"
    path.write_text(SPILL.to_json())
    result = CliRunner().invoke(app, ["eval", "lenet5", "--arch", "eyeriss", "--layer", "conv2", "--mapping",
                                      str(path), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("psum", [1, 2, 4])
def test_eval_psum_bytes_moves_that_many_bytes_per_partial_sum(tmp_path: Path, psum: int) -> None:
    layer = api.load_network("lenet5")["conv2"]
    ref = walk(layer.with_precision(Precision(1, 1, 1, psum)), SPILL, burst=api.load_arch("eyeriss").dram.burst_bytes)
    cost = _eval(tmp_path, "--psum-bytes", str(psum))
    # 16x10x10 outputs read back twice each, psum bytes apiece; written 3 times (twice as partial sums).
    assert ref.read_bytes[2] == 2 * 1600 * psum
    assert cost["dram_psum_read_bytes"] == ref.read_bytes[2]
    assert cost["dram_input_bytes"] + cost["dram_weight_bytes"] + cost["dram_output_bytes"] == \
        sum(ref.read_bytes) + ref.write_bytes
    assert cost == _eval(tmp_path, "--set", f"psum_bytes={psum}")  # the option is the machine field
    if psum == 1:
        assert cost == _eval(tmp_path)  # eyeriss's data width, 1 byte, by default


def test_plan_records_the_psum_width_and_rejects_a_bad_one(tmp_path: Path) -> None:
    runner = CliRunner()
    target = tmp_path / "plan.json"
    result = runner.invoke(app, ["plan", "lenet5", "--arch", "eyeriss", "-j", "1", "--psum-bytes", "4",
                                 "--json", str(target)])
    assert result.exit_code == 0, result.output
    meta = json.loads(target.read_text())["meta"]
    assert (meta["precision_bytes"], meta["psum_bytes"]) == (1, 4)
    bad = runner.invoke(app, ["plan", "lenet5", "--arch", "eyeriss", "--psum-bytes", "9"])
    assert bad.exit_code == 2 and "--psum-bytes" in bad.output and "Traceback" not in bad.output
    bad = runner.invoke(app, ["plan", "lenet5", "--arch", "eyeriss", "--set", "psum_bytes=9"])
    assert bad.exit_code != 0 and "psum_bytes" in bad.output and "Traceback" not in bad.output
