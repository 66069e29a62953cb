"""Machine overrides (``--set PATH=VALUE``) and strategy comparison (``tileplan compare``)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileplan import api
from tileplan.arch import load
from tileplan.arch.overrides import apply_overrides, parse_value
from tileplan.errors import ConfigError, TileplanError
from tileplan.mapping import Mapping

runner = CliRunner()


def cli(*args: str):
    from tileplan.cli import app

    return runner.invoke(app, list(args))


@pytest.mark.parametrize(("text", "value"), [
    ("16KiB", 16384), ("2MiB", 2 << 20), ("8e9", 8e9), ("1.5GB", 1_500_000_000), ("2.5k", 2500),
    ("0.5KiB", 512), ("0x40", 64), ("12", 12),
    ("true", True), ("off", False), ("none", None), ("[K, C]", ["K", "C"]), ("MB0", "MB0"), ("64 KB", 64_000),
])
def test_parse_value(text: str, value: object) -> None:
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_overrides_pick_list_entries_by_name_operand_and_position() -> None:
    nmp = load("nmp")
    changed = apply_overrides(nmp, ["memories.weight.size_bytes=16KiB", "memories.MB2.size_bytes=1KiB",
                                    "memories.0.energy_pj_per_byte=2.5", "dram.bandwidth_bytes_per_s=8e9"])
    assert [m.size_bytes for m in changed.memories] == [8192, 16384, 1024]
    assert changed.memories[0].energy_pj_per_byte == 2.5
    assert changed.dram.bandwidth_bytes_per_s == 8e9
    assert nmp.memories[1].size_bytes == 8192  # the preset itself is untouched
    eyeriss = apply_overrides(load("eyeriss"), ["pe_array.axes.rows.size=8", "overlap=true"])
    assert eyeriss.total_pes(2) == 8 * 14 and eyeriss.overlap is True


def test_bandwidth_override_changes_dram_time_by_the_closed_form() -> None:
    """Transfer time is bytes / bandwidth + bursts x burst latency: doubling the bandwidth halves only
    the first term."""
    layer = api.load_network("lenet5")["conv2"]
    m = Mapping.from_dict({"order": "NGKCPQRS", "tiles": {"K": 4, "C": 6, "P": 5, "Q": 5}}, dims=layer.dims)
    base = load("nmp")
    fast = api.load_arch("nmp", [f"dram.bandwidth_bytes_per_s={2 * base.dram.bandwidth_bytes_per_s}"])
    c1, c2 = api.evaluate(layer, base, m), api.evaluate(layer, fast, m)
    assert c1.dram_bytes == c2.dram_bytes and c1.bursts == c2.bursts
    lat = c1.bursts * base.burst_latency_cycles
    assert c2.dram_cycles - lat == pytest.approx((c1.dram_cycles - lat) / 2, rel=1e-12)
    assert c2.dram_cycles == pytest.approx(c1.dram_bytes / fast.dram_bytes_per_cycle + lat, rel=1e-12)


@pytest.mark.parametrize(("item", "message"), [
    ("memories.inptu.size_bytes=1KiB", "memories has no entry 'inptu'"),
    ("memories.input.size_byts=1KiB", "memories.input has no field 'size_byts'"),
    ("dram.bandwidth_bytes_per_s=fast", "dram.bandwidth_bytes_per_s: Input should be a valid number"),
    ("memories.1.size_bytes=-3", "memories.1.size_bytes: must be between 1 and 2"),
    ("memories.7.size_bytes=3", "memories has 3 entries; there is no entry 7"),
    ("dram.bandwidth_bytes_per_s.x=3", "dram.bandwidth_bytes_per_s is a value"),
    ("clock", "expected PATH=VALUE"),
    ("dram..burst_bytes=3", "empty field name"),
])
def test_bad_overrides_are_one_clear_error(item: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        api.load_arch("nmp", [item])


@pytest.mark.parametrize("command", [
    ["plan", "lenet5"], ["compare", "lenet5"], ["eval", "lenet5", "--layer", "conv1", "--mapping", "m.json"],
    ["emit", "lenet5", "--output", "out"], ["verify", "lenet5"], ["arch", "show", "nmp"],
])
def test_every_arch_command_takes_set(command: list[str], tmp_path: Path) -> None:
    command = [str(tmp_path / c) if c == "out" else c for c in command]
    result = cli(*command, "--set", "memories.input.size_byts=1KiB")
    text = result.output.strip()
    assert result.exit_code == 2 and text.startswith("error:") and "Traceback" not in text
    assert "size_byts" in text and len(text.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_plan_and_arch_show_use_the_override() -> None:
    result = cli("arch", "show", "nmp", "--set", "dram.bandwidth_bytes_per_s=1e9", "--yaml")
    assert result.exit_code == 0 and "bandwidth_bytes_per_s: 1000000000.0" in result.output
    small = api.plan("lenet5", api.load_arch("eyeriss", ["memories.L2.size_bytes=2KiB"]), jobs=1)
    big = api.plan("lenet5", "eyeriss", jobs=1)
    assert small.dram_bytes > big.dram_bytes  # a smaller buffer forces more reloads


def test_compare_ranks_strategies_against_the_exhaustive_optimum() -> None:
    cmp = api.compare("lenet5", "eyeriss", ["exhaustive", "random"], budget=300, jobs=1)
    plain = {s: api.plan("lenet5", "eyeriss", strategy=s, budget=300, jobs=1) for s in ("exhaustive", "random")}
    n = len(plain["exhaustive"].layers)
    assert len(cmp.rows) == 2 * (n + 1)
    for row in cmp.rows:
        if row.strategy == "exhaustive":  # the general optimum is never worse, layer by layer
            assert row.ratio == 1.0
        else:
            assert row.ratio >= 1.0
    for tot in cmp.totals():
        p = plain[tot.strategy]
        assert tot.latency_cycles == p.latency_cycles and tot.dram_bytes == p.dram_bytes
        assert tot.energy_pj == p.energy_pj and tot.bursts == p.total("bursts")
    rand = cmp.totals()[1]
    assert rand.ratio == pytest.approx(plain["random"].latency_cycles / plain["exhaustive"].latency_cycles)
    assert cmp.best() == "exhaustive"


def test_compare_edp_totals_multiply_network_totals() -> None:
    cmp = api.compare("lenet5", "eyeriss", ["random", "exhaustive"], objective="edp", budget=100, jobs=1)
    r, e = cmp.totals()
    assert r.ratio == pytest.approx((r.latency_cycles * r.energy_pj) / (e.latency_cycles * e.energy_pj))


def test_compare_cli_writes_json_and_csv(tmp_path: Path) -> None:
    j, c = tmp_path / "cmp.json", tmp_path / "cmp.csv"
    result = cli("compare", "lenet5", "--arch", "eyeriss", "--strategies", "exhaustive,random", "--budget", "200",
                 "-j", "1", "--json", str(j), "--csv", str(c))
    assert result.exit_code == 0, result.output
    assert "best in total: exhaustive" in result.output
    data = json.loads(j.read_text())
    assert data["strategies"] == ["exhaustive", "random"] and len(data["rows"]) == 16
    rows = list(csv.DictReader(io.StringIO(c.read_text())))
    assert [r["layer"] for r in rows[-2:]] == ["total", "total"]
    assert float(rows[-1]["ratio"]) == pytest.approx(data["rows"][-1]["ratio"])


def test_compare_bad_input() -> None:
    with pytest.raises(TileplanError, match="unknown strategy 'tso9'"):
        api.compare("lenet5", "eyeriss", ["exhaustive", "tso9"])
    result = cli("compare", "lenet5", "--arch", "eyeriss", "--strategies", "exhaustive,tso9")
    assert result.exit_code == 2 and result.output.startswith("error: unknown strategy 'tso9'")


def test_compare_takes_every_registered_strategy() -> None:
    """Every strategy the project has runs under compare; none beats the general exhaustive optimum."""
    from tileplan.search import STRATEGIES

    small = api.load_arch("eyeriss", ["memories.L2.size_bytes=4KiB"])
    cmp = api.compare("lenet5", small, list(STRATEGIES), budget=300, jobs=1)
    assert cmp.strategies == tuple(STRATEGIES)
    for row in cmp.rows:
        assert row.ratio >= 1.0
        if row.strategy == "exhaustive":
            assert row.ratio == 1.0
    assert max(r.ratio for r in cmp.totals()) > 1.0  # the buffer is small enough to tell them apart


def test_compare_fused_plans_rows_are_common_blocks() -> None:
    """``compare --fuse``: each strategy's fused plan; rows are blocks every plan covers with whole segments,
    so per strategy they add up to the plan's totals, and fused groups never straddle a block."""
    cmp = api.compare("lenet5", "eyeriss", ["exhaustive", "random"], budget=300, jobs=1, fuse=True, max_group=3)
    fused = {p.base.strategy: p for p in cmp.fused}
    assert set(fused) == {"exhaustive", "random"} and any(p.groups for p in cmp.fused)
    k = len(cmp.strategies)
    blocks = [cmp.rows[i].layer for i in range(0, len(cmp.rows) - k, k)]
    for s, p in fused.items():
        rows = [r for r in cmp.rows if r.strategy == s and not r.is_total]
        assert sum(r.latency_cycles for r in rows) == pytest.approx(p.latency_cycles)
        assert sum(r.dram_bytes for r in rows) == pytest.approx(p.dram_bytes)
        total = next(r for r in cmp.totals() if r.strategy == s)
        assert total.dram_bytes == p.dram_bytes and total.energy_pj == pytest.approx(p.energy_pj)
        for g in p.groups:  # a group lies inside one block
            assert any(g.layers[0] in b.split("+") or b.startswith(g.layers[0] + "..") for b in blocks)
    result = cli("compare", "lenet5", "--arch", "eyeriss", "--strategies", "exhaustive,random", "--budget", "300",
                 "-j", "1", "--fuse", "--max-group", "3")
    assert result.exit_code == 0, result.output
    assert "exhaustive: fused groups" in result.output and "best in total:" in result.output
