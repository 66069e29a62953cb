"""The cache of imported ONNX networks (``workload.onnx_cache``): a second ``plan`` of the same file reads
the network without importing onnx and prints exactly what the first printed; the key follows the
file's bytes and the import options; a damaged or foreign cache file is removed, never trusted; no
cache folder, or an unwritable one, changes nothing; errors and skipped-operator imports are never kept.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tileplan import api
from tileplan.workload import zoo
from tileplan.workload.onnx_cache import CACHE_VARIABLE, load_onnx_cached
from tileplan.workload.onnx_export import export_onnx
from tileplan.workload.onnx_import import OnnxFileError, load_onnx

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import atexit, json, sys
sys.argv = ["tileplan", *ARGS]
atexit.register(lambda: print(json.dumps({"modules": sorted(sys.modules)})))
from tileplan import entry
entry.main()
"""


def _plan(args: list[str], cache: Path) -> tuple[str, set[str]]:
    """``tileplan ARGS`` in a fresh interpreter (the console script) with its cache in ``cache``: the
    output before the probe's line, and the modules it loaded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", CACHE_VARIABLE: str(cache)}
    done = subprocess.run([sys.executable, "-c", _PROBE.replace("ARGS", repr(args))], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)
    last = done.stdout.strip().splitlines()[-1]
    data = json.loads(last)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout[: -len(last) - 1], set(data["modules"])


def _without_times(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if not k.endswith("seconds")}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def test_second_plan_reads_the_network_without_onnx(tmp_path: Path) -> None:
    model = tmp_path / "lenet.onnx"
    export_onnx(zoo.get("lenet5"), model)
    outputs = []
    for run in (1, 2):
        out = tmp_path / f"plan{run}.json"
        text, modules = _plan(["plan", str(model), "--arch", "eyeriss", "-j", "1", "--json", str(out)],
                              tmp_path / "cache")
        outputs.append((text, _without_times(json.loads(out.read_text()))))
        assert ("onnx" in modules) == (run == 1)  # the second run never imports onnx
        assert "tileplan.workload.zoo" not in modules  # (an ONNX model's plan needs no zoo network)
        assert "tileplan.workload.onnx_import" in modules or run == 2
    assert outputs[0] == outputs[1]
    assert "conv1" in outputs[0][0] and len(list((tmp_path / "cache" / "onnx").glob("*.pickle"))) == 1


def test_key_follows_the_file_and_the_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    kept = tmp_path / "cache" / "onnx"
    model = tmp_path / "m.onnx"
    export_onnx(zoo.get("lenet5"), model)
    first = load_onnx_cached(model)
    assert first == load_onnx(model) and len(list(kept.glob("*.pickle"))) == 1
    assert load_onnx_cached(model) == first  # read back: equal, nothing new written
    assert len(list(kept.glob("*.pickle"))) == 1
    twice = load_onnx_cached(model, batch=2)
    assert twice == load_onnx(model, batch=2) and twice.layers[0].n == 2 * first.layers[0].n
    export_onnx(zoo.get("alexnet"), model)  # same path, other bytes
    assert load_onnx_cached(model) == load_onnx(model) != first
    assert len(list(kept.glob("*.pickle"))) == 3
    other = tmp_path / "other.onnx"  # same bytes, another name: named after its file
    other.write_bytes(model.read_bytes())
    assert load_onnx_cached(other).name == "other" == load_onnx(other).name
    assert api.load_network(str(other)) == load_onnx(other)  # the command line's way in


def test_damaged_or_foreign_cache_files_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    model = tmp_path / "m.onnx"
    export_onnx(zoo.get("lenet5"), model)
    expected = load_onnx(model)
    load_onnx_cached(model)
    (file,) = (tmp_path / "cache" / "onnx").glob("*.pickle")
    good = file.read_bytes()
    flipped = bytearray(good)
    flipped[-10] ^= 0xFF
    file.write_bytes(bytes(flipped))  # checksum fails
    assert load_onnx_cached(model) == expected and file.read_bytes() == good  # imported again, rewritten
    import hashlib

    head = good[:good.index(b"\n") + 1]
    foreign = pickle.dumps(os.getcwd)  # a valid checksum over something that is not a network's classes
    file.write_bytes(head + hashlib.sha256(foreign).hexdigest().encode() + b"\n" + foreign)
    assert load_onnx_cached(model) == expected and file.read_bytes() == good
    file.write_bytes(b"")
    assert load_onnx_cached(model) == expected and file.read_bytes() == good


def test_no_cache_or_an_unwritable_one_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.onnx"
    export_onnx(zoo.get("lenet5"), model)
    expected = load_onnx(model)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for setting in ("off", str(blocker)):
        monkeypatch.setenv(CACHE_VARIABLE, setting)
        assert load_onnx_cached(model) == expected
    assert blocker.read_text() == "not a folder"
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    assert load_onnx_cached(model, skip_unsupported=True) == expected
    assert not (tmp_path / "cache").exists()  # imports that may warn are never kept


def test_errors_are_never_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not an onnx model")
    for _ in range(2):
        with pytest.raises(OnnxFileError, match="bad.onnx: (not a readable|contains no graph)"):
            load_onnx_cached(bad)
    with pytest.raises(OnnxFileError, match="no such ONNX file"):
        load_onnx_cached(tmp_path / "absent.onnx")
    assert not list((tmp_path / "cache").glob("onnx/*.pickle"))
