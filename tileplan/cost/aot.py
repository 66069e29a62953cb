"""The compiled loops as extension modules built at install: loaded without numba.

Loading numba's cached machine code costs about 0.4 CPU-s per process whatever is done around it
(``import numba`` alone about 0.25 s, its runtime's set-up about 0.1 s). So ``make venv``
(``python -m tileplan.warmup``) also compiles each loop module's loops, with numba's ahead-of-time
compiler (``numba.pycc``), into one small extension module: a shared library holding the same
LLVM-compiled loops behind a CPython wrapper, with numba's runtime linked in, that a planning process
loads in a few milliseconds with ``import numba`` never run.

An extension belongs to the module that holds its loops, like numba's cache: it lives in that
module's ``__pycache__``, named ``<name>-<key>`` where ``key`` hashes every source that decides its
machine code (:attr:`Extension.sources`: the loops' module, the modules compiled into them, the module
setting the compile options), this module's :data:`FORMAT`, the numpy and numba versions and the CPU.
A changed source gives another key, so a stale extension is never found, let alone run (a background
compile builds the new one, as it fills numba's cache). A sidecar file (``.json``) holds the full key,
the library's sha256 (checked before it is loaded: a truncated or garbled library is removed, never
loaded) and the argument types each loop was compiled for: numba's ahead-of-time wrappers check only
element sizes, so each call's arguments are checked here against them, and a call that does not match
runs on numba's path instead (it compiles that signature) -- never wrong machine code.

Differences from numba's path: the loops run on one thread (``prange`` compiles as ``range``; the
search still runs layers in parallel processes, ``--jobs``), and the code is compiled for the CPU of
the install, whose name is part of the key. The numbers are bit-identical (the same loops, no fast
math; ``tests/test_kernel_load.py``).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Bumped when how an extension is built (:func:`build`) or its sidecar changes: part of every key.
FORMAT = 1


@dataclass(frozen=True)
class Extension:
    """One extension module: the loops ``loops`` of module ``home`` (whose ``__pycache__`` holds it),
    compiled with the sources of the modules ``sources`` (``home`` itself included); ``nrt``: whether
    the loops allocate (they then need numba's runtime, which is linked into the extension)."""

    name: str
    home: str
    loops: tuple[str, ...]
    sources: tuple[str, ...]
    nrt: bool

    def folder(self) -> Path:
        return Path(_file(self.home)).parent / "__pycache__"


def _file(module: str) -> str:
    mod = sys.modules.get(module)
    if mod is not None and getattr(mod, "__file__", None):
        return str(mod.__file__)
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(f"no source for {module}")
    return spec.origin


def cpu_fingerprint() -> str:
    """This machine's CPU model and instruction-set flags (Linux's ``/proc/cpuinfo``; elsewhere the
    machine type): an extension compiled for one CPU is not loaded on another."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return os.uname().machine if hasattr(os, "uname") else sys.platform
    wanted = ("model name", "flags", "vendor_id", "cpu family", "model\t", "Features", "CPU part")
    first: dict[str, str] = {}
    for line in text.splitlines():
        for name in wanted:
            if line.startswith(name) and name not in first:
                first[name] = line
    return "\n".join(first[name] for name in wanted if name in first)


def key(ext: Extension, cpu: str) -> str:
    """The hash of everything that decides ``ext``'s machine code (module docstring)."""
    h = hashlib.sha256(f"{FORMAT}\n{ext.name}\n{ext.loops}\n{ext.nrt}\n{cpu}\n{np.__version__}\n".encode())
    for module in ext.sources:
        h.update(Path(_file(module)).read_bytes())
    numba_spec = importlib.util.find_spec("numba")  # its version, without importing it
    if numba_spec is not None and numba_spec.origin is not None:
        version = Path(numba_spec.origin).parent / "_version.py"
        h.update(version.read_bytes() if version.exists() else b"?")
    return h.hexdigest()


# ----------------------------------------------------------------------------- argument checks
# A loop's argument types as recorded at build time, from numba's types: ["a", dtype, ndim, contiguous]
# for an array, ["i"] / ["f"] / ["b"] for an integer / float / boolean scalar, ["t", class name,
# [fields...]] for a named tuple (the kernel's tables).

Spec = list[Any]


def spec_of(numba_type: Any) -> Spec:
    """The check of one argument compiled as ``numba_type`` (raises ValueError for a type it cannot check)."""
    from numba.core import types

    if isinstance(numba_type, types.Array):
        return ["a", np.dtype(str(numba_type.dtype)).str, numba_type.ndim, numba_type.layout == "C"]
    if isinstance(numba_type, types.Boolean):
        return ["b"]
    if numba_type == types.int64:
        return ["i"]
    if numba_type == types.float64:
        return ["f"]
    if isinstance(numba_type, types.BaseNamedTuple):  # type: ignore[attr-defined]
        return ["t", numba_type.instance_class.__name__, [spec_of(t) for t in numba_type.types]]
    raise ValueError(f"no check for argument type {numba_type}")


def matches(spec: Spec, value: Any) -> bool:
    """Whether ``value`` is of the type ``spec`` records (so the compiled wrapper reads it as compiled)."""
    kind = spec[0]
    if kind == "a":
        return (type(value) is np.ndarray and value.dtype.str == spec[1] and value.ndim == spec[2]
                and (not spec[3] or value.flags.c_contiguous))
    if kind == "i":
        return type(value) is int or type(value) is np.int64
    if kind == "f":
        return type(value) is float or type(value) is np.float64
    if kind == "b":
        return type(value) is bool or type(value) is np.bool_
    if kind == "t":
        return (type(value).__name__ == spec[1] and isinstance(value, tuple) and len(value) == len(spec[2])
                and all(matches(s, v) for s, v in zip(spec[2], value, strict=True)))
    return False


class Loop:
    """A loop of an extension: called with the arguments it was compiled for, it runs the extension's
    machine code; otherwise ``fallback()`` (numba's dispatcher, compiling that signature)."""

    def __init__(self, name: str, compiled: Callable[..., Any], specs: Sequence[Spec],
                 fallback: Callable[[], Callable[..., Any] | None]) -> None:
        self.name = name
        self.compiled = compiled
        self.specs = list(specs)
        self.fallback = fallback
        self.calls = 0  # calls run by the extension (tests)
        self.fallen_back = 0  # calls passed on to numba's path
        # Named tuples (the kernel's tables) already checked, by identity (held, so an id is not reused):
        # a tuple and its arrays' types cannot change, and one table is passed to many calls.
        self.checked: dict[int, Any] = {}

    def _matches(self, spec: Spec, value: Any) -> bool:
        if spec[0] != "t":
            return matches(spec, value)
        if self.checked.get(id(value)) is value:
            return True
        if not matches(spec, value):
            return False
        if len(self.checked) >= 32:
            self.checked.clear()
        self.checked[id(value)] = value
        return True

    def __call__(self, *args: Any) -> Any:
        if len(args) == len(self.specs) and all(self._matches(s, a) for s, a in zip(self.specs, args, strict=True)):
            self.calls += 1
            return self.compiled(*args)
        self.fallen_back += 1
        other = self.fallback()
        if other is None:  # pragma: no cover - numba missing and a caller passing new types
            raise RuntimeError(f"the compiled {self.name} was called with argument types it was not built for")
        return other(*args)


# ----------------------------------------------------------------------------- loading
_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
_loaded: dict[str, dict[str, Loop] | None] = {}
#: Extension files removed in this process as corrupt: (file, what was wrong).
HEALED: list[tuple[str, str]] = []


def paths(ext: Extension, k: str) -> tuple[Path, Path]:
    """The library and its sidecar for key ``k``."""
    stem = f"{ext.name}-{k[:24]}"
    return ext.folder() / f"{stem}{_SUFFIX}", ext.folder() / f"{stem}.json"


def load(ext: Extension, fallbacks: dict[str, Callable[[], Callable[..., Any] | None]]) -> dict[str, Loop] | None:
    """``ext``'s loops by name, from its extension built for the current sources and this CPU (once per
    process); None when there is none (not built, stale, or corrupt: then its files are removed and
    the reason kept in :data:`HEALED`). ``fallbacks[name]()`` gives the loop's numba dispatcher, for a
    call with other argument types."""
    if ext.name in _loaded:
        return _loaded[ext.name]
    loops: dict[str, Loop] | None = None
    so = side = None
    try:
        so, side = paths(ext, key(ext, cpu_fingerprint()))
        if side.exists():
            loops = _open(ext, so, side, fallbacks)
    except Exception as err:  # noqa: BLE001 - a truncated, garbled or foreign file: removed, never run
        discard([p for p in (so, side) if p is not None], err)
        loops = None
    _loaded[ext.name] = loops
    return loops


def _open(ext: Extension, so: Path, side: Path,
          fallbacks: dict[str, Callable[[], Callable[..., Any] | None]]) -> dict[str, Loop]:
    meta = json.loads(side.read_text())
    if meta.get("format") != FORMAT or meta.get("key") != key(ext, cpu_fingerprint()):
        raise ValueError("its sidecar names other sources")
    if hashlib.sha256(so.read_bytes()).hexdigest() != meta["sha256"]:
        raise ValueError("the library is not the one built (sha256 differs)")
    loader = importlib.machinery.ExtensionFileLoader(ext.name, str(so))
    spec = importlib.util.spec_from_file_location(ext.name, so, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return {name: Loop(name, getattr(module, name), meta["specs"][name], fallbacks[name]) for name in ext.loops}


def discard(files: Sequence[Path], err: Exception | None) -> None:
    """Remove an extension's files (``err``: why, kept in :data:`HEALED`; None: stale, not reported)."""
    for path in files:
        try:
            path.unlink()
        except OSError:
            pass
    if err is not None:
        HEALED.append((str(files[0]) if files else "?", f"{type(err).__name__}: {err}"[:120]))


def failed(ext: Extension) -> bool:
    """Whether building ``ext`` for the current sources failed before (:func:`mark_failed`; e.g. no C
    compiler): a background compile does not try again, ``python -m tileplan.warmup`` does."""
    try:
        return paths(ext, key(ext, cpu_fingerprint()))[1].with_suffix(".failed").exists()
    except OSError:
        return False


def mark_failed(ext: Extension, problem: str) -> None:
    """Note that building ``ext`` for the current sources failed (``problem``: one line)."""
    try:
        marker = paths(ext, key(ext, cpu_fingerprint()))[1].with_suffix(".failed")
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(problem + "\n")
    except OSError:
        pass


def forget() -> None:
    """Forget the extensions loaded in this process (a rebuilt one is read again; tests)."""
    _loaded.clear()


# ----------------------------------------------------------------------------- building (at install)
def build(ext: Extension, dispatchers: dict[str, Any], *, error_model: str) -> Path:
    """Compile ``ext``'s loops with numba's ahead-of-time compiler into its extension, for the one
    signature each of ``dispatchers`` (numba's, by loop name) was compiled for, and remove older
    builds of it; returns the library's path. ``error_model``: numba's, as the loops' jit options."""
    import tempfile

    import llvmlite.binding as ll
    import numba.pycc.compiler as pycc_compiler
    from numba.pycc import CC

    k = key(ext, cpu_fingerprint())
    so, side = paths(ext, k)
    specs: dict[str, list[Spec]] = {}
    cc = CC(ext.name)
    cc.use_nrt = ext.nrt
    cc.target_cpu = ll.get_host_cpu_name()
    for name in ext.loops:
        signatures = dispatchers[name].nopython_signatures
        if len(signatures) != 1:
            raise ValueError(f"{name} is compiled for {len(signatures)} signatures, not one")
        specs[name] = [spec_of(t) for t in signatures[0].args]
        cc.export(name, signatures[0])(dispatchers[name].py_func)
    so.parent.mkdir(parents=True, exist_ok=True)
    plain = pycc_compiler.Flags

    class Flags(plain):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.error_model = error_model

    with tempfile.TemporaryDirectory(dir=so.parent, prefix=f"{ext.name}-build-") as tmp:
        cc.output_dir = tmp
        pycc_compiler.Flags = Flags  # type: ignore[misc]
        try:
            cc.compile()
        finally:
            pycc_compiler.Flags = plain  # type: ignore[misc]
        built = Path(tmp) / cc.output_file
        digest = hashlib.sha256(built.read_bytes()).hexdigest()
        os.replace(built, so)
        (Path(tmp) / "side.json").write_text(json.dumps({"format": FORMAT, "key": k, "sha256": digest, "specs": specs}))
        os.replace(Path(tmp) / "side.json", side)  # last: a library without its sidecar is never loaded
    for old in so.parent.glob(f"{ext.name}-*"):
        if old not in (so, side) and old.is_file():
            old.unlink(missing_ok=True)
    _loaded.pop(ext.name, None)
    return so
