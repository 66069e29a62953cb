"""The compiled loops' extension modules (``cost.aot``): found only for the current sources, never
loaded when damaged, and run only with the argument types they were compiled for."""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from tileplan.cost import aot, compiled

pytest.importorskip("numba")


def _installed() -> tuple[aot.Extension, Path, Path]:
    """The kernel's extension as built at install (skips when it is not)."""
    ext = compiled.EXTENSION
    so, side = aot.paths(ext, aot.key(ext, aot.cpu_fingerprint()))
    real = Path(compiled.kernel.__file__).parent / "__pycache__"  # (the fixture below moves ``folder``)
    so, side = real / so.name, real / side.name
    if not (so.exists() and side.exists()):
        pytest.skip("the kernel's extension is not built (python -m tileplan.warmup builds it)")
    return ext, so, side


def _copy(tmp_path: Path, extra: str) -> tuple[aot.Extension, Path, Path]:
    """The installed kernel extension copied into ``tmp_path`` under an extension whose sources also
    include the module ``extra`` (written in ``tmp_path``), keyed for them: loading it there works
    exactly as at install, and damaging it leaves the real one alone."""
    ext, so, side = _installed()
    (tmp_path / "aot_extra.py").write_text(extra)
    sys.path.insert(0, str(tmp_path))
    try:
        sys.modules.pop("aot_extra", None)
        importlib.invalidate_caches()
        importlib.import_module("aot_extra")
    finally:
        sys.path.remove(str(tmp_path))
    copy = dataclasses.replace(ext, sources=(*ext.sources, "aot_extra"))
    key = aot.key(copy, aot.cpu_fingerprint())
    so2, side2 = aot.paths(copy, key)
    so2, side2 = tmp_path / so2.name, tmp_path / side2.name
    shutil.copyfile(so, so2)
    meta = json.loads(side.read_text())
    side2.write_text(json.dumps({**meta, "key": key}))
    return copy, so2, side2


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Extensions are looked for in ``tmp_path``; nothing loaded before counts."""
    monkeypatch.setattr(aot.Extension, "folder", lambda self: tmp_path)
    monkeypatch.setattr(aot, "_loaded", {})
    monkeypatch.setattr(aot, "HEALED", [])
    return tmp_path


FALLBACKS = {"model_loop": compiled.loop, "unroll_loop": compiled.unroll_loop}


def test_the_installed_extensions_match_the_sources() -> None:
    """``make venv`` built both extensions for the current sources (else every command pays ~0.4 s)."""
    from tileplan import warmup

    _installed()
    assert warmup.built()


def test_a_changed_source_makes_the_extension_stale(in_tmp: Path) -> None:
    ext, so, side = _copy(in_tmp, "FACTOR = 2\n")
    loops = aot.load(ext, FALLBACKS)
    assert loops is not None and set(loops) == {"model_loop", "unroll_loop"}
    (in_tmp / "aot_extra.py").write_text("FACTOR = 3\n")  # one of its sources changes
    aot.forget()
    assert aot.load(ext, FALLBACKS) is None  # another key: the old library is not even looked at
    assert so.exists() and side.exists() and aot.HEALED == []  # stale, not corrupt


@pytest.mark.parametrize("damage", ["truncate-library", "flip-a-byte", "garble-sidecar", "empty-sidecar"])
def test_a_damaged_extension_is_removed_and_never_loaded(in_tmp: Path, damage: str) -> None:
    ext, so, side = _copy(in_tmp, "FACTOR = 2\n")
    data = so.read_bytes()
    if damage == "truncate-library":
        so.write_bytes(data[: len(data) // 3])
    elif damage == "flip-a-byte":  # a garbled instruction would crash the process: the sha256 catches it
        so.write_bytes(data[:5000] + bytes([data[5000] ^ 0xFF]) + data[5001:])
    elif damage == "garble-sidecar":
        side.write_text(side.read_text()[:40])
    else:
        side.write_text("")
    assert aot.load(ext, FALLBACKS) is None
    assert not so.exists() and not side.exists()
    assert len(aot.HEALED) == 1 and aot.HEALED[0][0] == str(so)


def test_a_call_with_other_argument_types_runs_on_numbas_path() -> None:
    ran: list[str] = []

    def extension(*args: object) -> str:
        ran.append("extension")
        return "extension"

    def numba_loop(*args: object) -> str:
        ran.append("numba")
        return "numba"

    loop = aot.Loop("probe", extension, [["a", "<i8", 2, True], ["i"], ["f"], ["b"]], lambda: numba_loop)
    good = np.zeros((3, 2), dtype=np.int64)
    assert loop(good, 1, 1.5, True) == "extension"
    assert loop(good, np.int64(1), np.float64(1.5), np.bool_(False)) == "extension"
    for args in [(good.astype(np.int32), 1, 1.5, True),  # another element type
                 (good.T, 1, 1.5, True),  # not contiguous
                 (good[0], 1, 1.5, True),  # another rank
                 (good, np.int32(1), 1.5, True), (good, 1, 1, True), (good, 1, 1.5, 1),  # other scalars
                 (good, 1, 1.5)]:  # too few
        assert loop(*args) == "numba"
    assert ran == ["extension"] * 2 + ["numba"] * 7
    assert (loop.calls, loop.fallen_back) == (2, 7)


def test_a_checked_named_tuple_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A named tuple of tables passed again (the same object) is not checked again; another tuple of
    the same class with a field of another type still runs on numba's path."""
    from collections import namedtuple

    tables_type = namedtuple("tables_type", "a b")
    loop = aot.Loop("probe", lambda *args: "extension", [["t", "tables_type", [["a", "<i8", 1, True], ["i"]]]],
                    lambda: lambda *args: "numba")
    checks: list[object] = []
    real = aot.matches
    monkeypatch.setattr(aot, "matches", lambda spec, value: checks.append(value) or real(spec, value))
    good = tables_type(np.zeros(3, dtype=np.int64), 1)
    assert loop(good) == "extension"
    first = len(checks)  # the tuple and its fields
    assert checks[0] is good and first == 3
    assert [loop(good), loop(good)] == ["extension"] * 2
    assert len(checks) == first
    assert loop(tables_type(np.zeros(3, dtype=np.int32), 1)) == "numba"
    assert loop(tables_type(np.zeros(3, dtype=np.int64), 2)) == "extension"


def test_argument_checks_are_numbas_types_of_the_real_arguments() -> None:
    """The checks recorded at build time accept the arguments the kernel really passes (a named tuple
    of tables among them) and reject the same tables with one field of another type."""
    from numba import typeof

    from tileplan.cost.model import tables_for
    from tileplan.warmup import _tiny_batch

    problem, batch = _tiny_batch()
    K = tables_for(problem, batch)
    spec = aot.spec_of(typeof(K))
    assert spec[0] == "t" and spec[1] == "KernelTables"
    assert aot.matches(spec, K)
    assert not aot.matches(spec, K._replace(trips=K.trips.astype(np.int32)))
    assert not aot.matches(spec, K._replace(e_mac=1))
    assert aot.spec_of(typeof(np.zeros((2, 3)))) == ["a", "<f8", 2, True]
    with pytest.raises(ValueError, match="no check"):
        aot.spec_of(typeof("text"))
