"""Sweeps: the grid, rows equal to plain plans, resume after SIGINT / SIGKILL with the same final CSV as an
uninterrupted run, and the local and Ray backends giving identical files."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tileplan import api
from tileplan.errors import ConfigError, TileplanError
from tileplan.sweep import Sweep, parse_axes, read_done, run_sweep, split_values

TILEPLAN = Path(sys.executable).parent / "tileplan"
ARGS = ["lenet5", "--arch", "eyeriss", "--set", "dram.bandwidth_bytes_per_s=1e9,2e9,4e9",
        "--set", "memories.L2.size_bytes=1KiB,4KiB,64KiB", "--strategies", "exhaustive"]


def grid(**kw: object) -> Sweep:
    axes = parse_axes(["dram.bandwidth_bytes_per_s=1e9,2e9,4e9", "memories.L2.size_bytes=1KiB,4KiB,64KiB"])
    return Sweep(api.load_arch("eyeriss"), ("lenet5",), ("exhaustive",), ("latency",), tuple(axes), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The uninterrupted sweep's file."""
    path = tmp_path_factory.mktemp("ref") / "ref.csv"
    run_sweep(grid(), path, jobs=1)
    return path.read_bytes()


def test_grid_order_and_values() -> None:
    assert split_values("1e9, 2e9,[K,C],{a: 1, b: 2}") == ["1e9", "2e9", "[K,C]", "{a: 1, b: 2}"]
    g = grid()
    points = g.points()
    assert len(points) == 9 and [p.index for p in points] == list(range(9))
    assert points[1].settings == (("dram.bandwidth_bytes_per_s", "1e9"), ("memories.L2.size_bytes", "4KiB"))
    assert points[3].settings[0] == ("dram.bandwidth_bytes_per_s", "2e9")  # the last field varies fastest
    with pytest.raises(ConfigError, match="given twice"):
        parse_axes(["dram.burst_bytes=32", "dram.burst_bytes=64"])


def test_rows_are_the_plans(reference: bytes) -> None:
    rows = list(csv.DictReader(io.StringIO(reference.decode())))
    assert len(rows) == 9 and [int(r["point"]) for r in rows] == list(range(9))
    for r in (rows[0], rows[8]):
        arch = api.load_arch("eyeriss", [f"dram.bandwidth_bytes_per_s={r['dram.bandwidth_bytes_per_s']}",
                                          f"memories.L2.size_bytes={r['memories.L2.size_bytes']}"])
        plan = api.plan("lenet5", arch, jobs=1)
        assert float(r["latency_cycles"]) == plan.latency_cycles and float(r["dram_bytes"]) == plan.dram_bytes
        assert float(r["energy_pj"]) == plan.energy_pj and float(r["edp"]) == plan.energy_pj * plan.latency_cycles
    small, big = float(rows[0]["dram_bytes"]), float(rows[2]["dram_bytes"])
    assert small > big  # 1 KiB of buffer moves more than 64 KiB


def test_bad_grid_fails_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    bad = Sweep(api.load_arch("eyeriss"), ("lenet5",), ("exhaustive",), ("latency",),
                tuple(parse_axes(["memories.L2.size_bytes=4KiB,-1"])))
    with pytest.raises(ConfigError, match="memories.L2.size_bytes=-1"):
        run_sweep(bad, out)
    assert not out.exists()
    result = CliRunner().invoke(_app(), ["sweep", "lenet5", "--arch", "eyeriss", "--strategies", "tso9",
                                         "-o", str(out)])
    assert result.exit_code == 2 and result.output.startswith("error: unknown strategy 'tso9'")
    assert not out.exists()


def test_another_sweeps_file_is_refused(tmp_path: Path, reference: bytes) -> None:
    out = tmp_path / "r.csv"
    out.write_bytes(reference)
    other = Sweep(api.load_arch("eyeriss"), ("lenet5",), ("exhaustive",), ("latency",),
                  tuple(parse_axes(["dram.bandwidth_bytes_per_s=1e9"])))
    with pytest.raises(TileplanError, match="holds another sweep"):
        run_sweep(other, out)
    assert out.read_bytes() == reference


def test_a_row_cut_short_is_redone(tmp_path: Path, reference: bytes) -> None:
    lines = reference.decode().splitlines(keepends=True)
    out = tmp_path / "r.csv"
    out.write_text("".join([lines[0], lines[5], lines[2], lines[7][:15]]))  # any order; last row half written
    assert sorted(read_done(out, grid())) == [1, 4]
    assert out.read_text().endswith(lines[2])
    run_sweep(grid(), out, jobs=1)
    assert out.read_bytes() == reference


def _app():  # type: ignore[no-untyped-def]
    from tileplan.cli import app

    return app


def _rows(path: Path) -> int:
    return max(0, path.read_text().count("\n") - 1) if path.exists() else 0


@pytest.mark.skipif(not TILEPLAN.exists(), reason="needs the tileplan console script")
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGKILL, marks=pytest.mark.slow)])
def test_interrupted_sweep_resumes_to_the_same_file(tmp_path: Path, reference: bytes, sig: int) -> None:
    out = tmp_path / "r.csv"
    proc = subprocess.Popen([str(TILEPLAN), "sweep", *ARGS, "-j", "2", "-o", str(out), "--no-plot"],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _rows(out) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        os.killpg(proc.pid, sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "run the same command again to resume" in stderr
    else:
        assert proc.returncode == -signal.SIGKILL
    kept = len(read_done(out, grid()))
    assert 2 <= kept < 9, "the sweep finished before it could be interrupted"
    result = CliRunner().invoke(_app(), ["sweep", *ARGS, "-j", "2", "-o", str(out), "--no-plot"])
    assert result.exit_code == 0, result.output
    assert f"9 points ({9 - kept} planned, {kept} already in the file)" in result.output
    assert out.read_bytes() == reference


def test_cli_writes_the_plot(tmp_path: Path, reference: bytes) -> None:
    out = tmp_path / "bw.csv"
    result = CliRunner().invoke(_app(), ["sweep", *ARGS, "-j", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == reference
    assert (tmp_path / "bw.png").read_bytes().startswith(b"\x89PNG") and (tmp_path / "bw.svg").exists()
    again = CliRunner().invoke(_app(), ["sweep", *ARGS, "-j", "1", "-o", str(out), "--no-plot"])
    assert "9 points (0 planned, 9 already in the file)" in again.output  # nothing is planned twice


def _small() -> Sweep:
    return Sweep(api.load_arch("eyeriss"), ("lenet5",), ("exhaustive", "random"), ("latency",),
                 tuple(parse_axes(["dram.bandwidth_bytes_per_s=1e9,4e9"])), budget=200)


def test_one_and_two_local_workers_agree(tmp_path: Path) -> None:
    """The default run's twin of the Ray check below: the same sweep over two worker processes and in
    this process gives the same file (rows in point order, seeded random search)."""
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    run_sweep(_small(), one, backend="local", jobs=1)
    run_sweep(_small(), two, backend="local", jobs=2)
    assert two.read_bytes() == one.read_bytes()
    assert _rows(one) == 4


@pytest.mark.slow  # starting a local Ray instance alone takes over 10 s (about 13 of the test's 14.5 s)
def test_local_and_ray_backends_agree(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'tileplan[ray]')")
    local, ray_csv = tmp_path / "local.csv", tmp_path / "ray.csv"
    run_sweep(_small(), local, backend="local", jobs=2)
    run_sweep(_small(), ray_csv, backend="ray", jobs=2)
    assert ray_csv.read_bytes() == local.read_bytes()
    assert _rows(local) == 4
