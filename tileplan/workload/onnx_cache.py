"""A cache of imported ONNX networks, so that planning the same ``.onnx`` file again starts at once.

Importing a model costs a command 0.08-0.12 CPU-s before its search: ``import onnx`` (its package
imports every subpackage, ml_dtypes and protobuf's text and JSON formats: 0.05-0.09 s), ONNX shape
inference (0.02 s) and the conversion. The result is a small ``Network`` (ResNet-50: 9 KB pickled,
1 ms to read), so the command line (``api.load_network``) keeps it, and a later command with the
same file reads it instead, without importing onnx.

The key is the sha256 of everything the import depends on: the file's bytes and its path (the
network is named after the file), the import options, the importer's own sources (every module of
``tileplan/workload`` and the ``dims`` and ``errors`` modules it builds on), the installed onnx (the
size and modification time of its files, read without importing it), numpy's and Python's versions.
Any change gives another key, and a fresh import. Only a successful import is kept: an error, and
the warning of ``skip_unsupported`` (such imports are never kept), come again on every run.

Files: ``$TILEPLAN_CACHE_DIR/onnx`` (default ``$XDG_CACHE_HOME/tileplan``, else ``~/.cache/tileplan``),
``TILEPLAN_CACHE_DIR=off`` switches the cache off. Each file holds the sha256 of its content, checked
before it is read: a damaged file is removed and the model imported again. Files are written
atomically, the newest :data:`KEEP` are kept, and where nothing can be written the import simply runs
every time. Unpickling accepts only tileplan's workload classes (:class:`_Unpickler`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import pickle
import sys
from pathlib import Path

from tileplan.errors import TileplanError
from tileplan.files import write_bytes_atomic
from tileplan.workload.network import Network

__all__ = ["cache_folder", "load_onnx_cached"]

#: Environment variable naming the cache folder (``off``: no cache).
CACHE_VARIABLE = "TILEPLAN_CACHE_DIR"
#: Cached networks kept (the oldest beyond this are removed when one is written).
KEEP = 64
_MAGIC = b"tileplan-onnx-network 1\n"
_HERE = Path(__file__).resolve().parent


def cache_folder() -> Path | None:
    """Where imported networks are kept, or None when the cache is switched off."""
    value = os.environ.get(CACHE_VARIABLE)
    if value is not None:
        return None if value.strip().lower() in ("off", "0", "") else Path(value) / "onnx"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tileplan" / "onnx"


def load_onnx_cached(path: str | os.PathLike[str], *, batch: int | None = None, skip_unsupported: bool = False,
                     seq: int | None = None) -> Network:
    """``onnx_import.load_onnx(path, ...)``, from the cache when this file was imported the same way
    before (see the module's docstring); the same network, the same errors."""
    folder = cache_folder()
    key = None if folder is None or skip_unsupported else _key(path, batch, seq)
    if key is not None and folder is not None:
        found = _read(folder / f"{key}.pickle")
        if found is not None:
            return found
    from tileplan.workload.onnx_import import load_onnx  # (imports onnx)

    network = load_onnx(path, batch=batch, skip_unsupported=skip_unsupported, seq=seq)
    if key is not None and folder is not None:
        _write(folder, f"{key}.pickle", network)
    return network


def _key(path: str | os.PathLike[str], batch: int | None, seq: int | None) -> str | None:
    """The cache key of importing ``path`` so, or None when the file cannot be read (the import then
    reports it)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    h = hashlib.sha256(_MAGIC)
    for part in (hashlib.sha256(data).hexdigest(), os.fspath(path), os.path.abspath(path), repr((batch, seq)),
                 _environment()):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


_ENVIRONMENT: list[str] = []


def _environment() -> str:
    """The digest of what an import's result depends on besides the file (computed once per process)."""
    if not _ENVIRONMENT:
        import numpy as np

        h = hashlib.sha256(f"{sys.version}|{np.__version__}|{pickle.HIGHEST_PROTOCOL}".encode())
        sources = sorted(_HERE.glob("*.py")) + [_HERE.parent / "dims.py", _HERE.parent / "errors.py"]
        for source in sources:
            h.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
        spec = importlib.util.find_spec("onnx")  # (finds the package without importing it)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if entry.is_file() and entry.name.endswith((".py", ".so", ".pyd")):
                    st = entry.stat()
                    h.update(f"{entry.name}|{st.st_size}|{st.st_mtime_ns}\0".encode())
        _ENVIRONMENT.append(h.hexdigest())
    return _ENVIRONMENT[0]


class _Unpickler(pickle.Unpickler):
    """Reads only tileplan's workload classes (a network, its layers, their enums and precisions)."""

    def find_class(self, module: str, name: str) -> type:
        if module == "tileplan.dims" or module.startswith("tileplan.workload."):
            return super().find_class(module, name)  # type: ignore[no-any-return]
        raise pickle.UnpicklingError(f"unexpected class {module}.{name}")


def _read(file: Path) -> Network | None:
    """The network kept in ``file``; None when there is none, or it is damaged (then it is removed)."""
    try:
        blob = file.read_bytes()
    except OSError:
        return None
    head, digest, payload = blob[:len(_MAGIC)], blob[len(_MAGIC):len(_MAGIC) + 64], blob[len(_MAGIC) + 65:]
    try:
        if head != _MAGIC or digest.decode("ascii") != hashlib.sha256(payload).hexdigest():
            raise ValueError("checksum")
        network = _Unpickler(io.BytesIO(payload)).load()
        if not isinstance(network, Network):
            raise ValueError("not a network")
        return network
    except Exception:  # noqa: BLE001 - a damaged file: whatever unpickling raised
        file.unlink(missing_ok=True)
        return None


def _write(folder: Path, name: str, network: Network) -> None:
    """Keep ``network`` as ``folder/name`` (``files.write_bytes_atomic``: whole or not at all; silently
    nothing when it cannot be written) and remove the oldest files beyond :data:`KEEP`."""
    payload = pickle.dumps(network, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(payload).hexdigest().encode("ascii")
        write_bytes_atomic(folder / name, _MAGIC + digest + b"\n" + payload)
        kept = sorted(folder.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
    except (OSError, TileplanError):
        pass
