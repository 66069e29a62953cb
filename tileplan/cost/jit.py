"""When the compiled loops run, and compiling them once in the background.

numba compiles the cost kernel and the search's loops in about 2 minutes, once per install (``make
venv`` does it; numba caches the result on disk, next to the source). Until then every loop has a
numpy twin with bit-identical results, fast enough for whole networks (ResNet-50 on ``nmp`` in about
10 s instead of 2), so by default nothing waits for the compiler:

- ``TILEPLAN_KERNEL=auto`` (the default): a loop runs compiled when its module's extension, built at
  install from its current source for this CPU, is there (``cost.aot``: loaded without numba), or
  when it is loaded in this process or numba's on-disk cache holds it; otherwise its numpy twin runs.
  The command line then compiles every loop in a separate, low-priority process
  (:func:`compile_in_background`); a run re-reads the cache every few seconds, so even a long run
  switches to the compiled loops when they are ready.
- ``TILEPLAN_KERNEL=numba``: always numba's compiled loops (compiling here, if need be; never the
  extension).
- ``TILEPLAN_KERNEL=numpy``: never compiled.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tileplan.cost import aot

#: Seconds between two reads of numba's cache for a loop it does not hold yet.
RECHECK_S = 5.0
#: A background compile that has not finished after this many seconds is presumed dead.
STALE_LOCK_S = 900.0
LOCK_NAME = "tileplan-compile.lock"

_held: dict[str, bool] = {}
_read_at: dict[str, float] = {}
_loaded: set[str] = set()  # loops loaded from numba's cache in this process
_found: dict[str, list[tuple[Any, ...]]] = {}  # signatures the last cache check read, until loaded


def mode() -> str:
    """'numpy', 'numba' or 'auto' (the default), from ``TILEPLAN_KERNEL``."""
    value = os.environ.get("TILEPLAN_KERNEL", "auto").strip().lower()
    return value if value in ("numpy", "numba") else "auto"


def on_disk(py_func: Callable[..., Any]) -> bool:
    """Whether numba's on-disk cache holds ``py_func`` compiled from its current source and bytecode
    for this CPU (then loading it takes well under a second). Until it does, the cache is read again
    at most every :data:`RECHECK_S` seconds."""
    key = f"{py_func.__module__}.{py_func.__qualname__}"
    if _held.get(key):
        return True
    now = time.monotonic()
    if now - _read_at.get(key, -math.inf) < RECHECK_S:
        return False
    _read_at[key] = now
    _held[key] = found = _cache_holds(py_func)
    return found


def _cache_holds(py_func: Callable[..., Any]) -> bool:
    source = Path(inspect.getfile(py_func))
    folder = source.parent / "__pycache__"
    if os.access(source.parent, os.W_OK) and not any(folder.glob(f"{source.stem}.{py_func.__name__}-*.nbi")):
        return False  # numba writes next to a writable source: nothing there, no need to import numba
    found = cached_signatures(py_func)
    _found[f"{py_func.__module__}.{py_func.__qualname__}"] = found  # :func:`load` reads it once, not again
    return bool(found)


def cached_signatures(py_func: Callable[..., Any]) -> list[tuple[Any, ...]]:
    """The argument types of every compiled ``py_func`` numba's on-disk cache holds for its current source
    and bytecode on this CPU (empty when numba is missing or its cache unreadable)."""
    try:
        from numba.core.caching import FunctionCache
        from numba.core.registry import cpu_target

        cache_file = FunctionCache(py_func)._cache_file
        magic = cpu_target.target_context.codegen().magic_tuple()
    except Exception:  # noqa: BLE001 - numba missing: not cached
        return []
    try:
        index = cache_file._load_index()  # empty when stale or of another numba
        if index and _inlined_newer(py_func, Path(cache_file._index_path)):
            _discard(Path(cache_file._index_path), None)
            return []
        code = hashlib.sha256(py_func.__code__.co_code).hexdigest()
        entries = [(k, name) for k, name in index.items() if k[1] == magic and k[2][0] == code]
        for _, name in entries:
            cache_file._load_data(name)  # unpickles the entry (no compiling): a truncated file fails here
    except Exception as err:  # noqa: BLE001 - a truncated, empty or garbled index or data file
        _discard(Path(cache_file._index_path), err)
        return []
    return [k[0] for k, _ in entries]


#: Corrupt cache files (numba's, and the extensions of ``cost.aot``) removed in this process: (index
#: file or library, what was wrong).
HEALED: list[tuple[str, str]] = aot.HEALED


def _inlined_newer(py_func: Callable[..., Any], index_path: Path) -> bool:
    """Whether a module compiled into ``py_func`` (its module's ``INLINED_FROM``) changed after numba
    cached it: numba's index is keyed by the function's own file alone, so it would load the old machine
    code."""
    module = sys.modules.get(py_func.__module__)
    try:
        cached_at = index_path.stat().st_mtime
        return any(Path(inspect.getfile(sys.modules[name])).stat().st_mtime > cached_at
                   for name in getattr(module, "INLINED_FROM", ()) if name in sys.modules)
    except (OSError, TypeError):
        return False


def _discard(index_path: Path, err: Exception | None) -> None:
    """Remove one function's numba cache (its index and data files): it is rebuilt by the next
    compile, instead of failing every run (numba itself raises on a truncated file). ``err`` None: the
    cache is stale, not corrupt (not reported in :data:`HEALED`)."""
    base = index_path.name[: -len(".nbi")]
    for path in [index_path, *index_path.parent.glob(f"{base}.*.nbc")]:
        try:
            path.unlink()
        except OSError:
            pass
    if err is not None:
        HEALED.append((str(index_path), f"{type(err).__name__}: {err}"[:120]))


def heal(loops: list[Callable[..., Any]]) -> list[tuple[str, str]]:
    """Check numba's cache of every loop (removing corrupt files, see :func:`cached_signatures`);
    return what was removed in this process."""
    for f in loops:
        _held.pop(f"{f.__module__}.{f.__qualname__}", None)
        _read_at.pop(f"{f.__module__}.{f.__qualname__}", None)
        on_disk(f)
    return list(HEALED)


def load(dispatcher: Any, py_func: Callable[..., Any]) -> None:
    """Load into numba's ``dispatcher`` (of ``py_func``) every compiled version its on-disk cache holds,
    without calling it and without compiling (once per process).

    Machine code read from the cache needs none of numba's typing and lowering registries, which
    numba nevertheless loads before its first cache read (``BaseContext.refresh``: importing some 60
    of its modules and registering thousands of templates, ~90 % of a cached loop's load time). Here
    the read skips that step: only numba's runtime (NRT) is initialised, and only for a loop compiled
    with it (one that allocates). A later compile of a new signature refreshes the registries as
    usual. docs/architecture-startup.md has the measurements."""
    key = f"{py_func.__module__}.{py_func.__qualname__}"
    found = _found.pop(key, None)
    signatures = [] if key in _loaded else found if found is not None else cached_signatures(py_func)
    if not signatures:
        return
    _loaded.add(key)  # (a cache file unreadable now is compiled at the first call, as numba does)
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import nrt

    context = dispatcher.targetctx
    uses_nrt = dispatcher.targetoptions.get("_nrt", True)
    with global_compiler_lock:
        context.refresh = (lambda: nrt.rtsys.initialize(context)) if uses_nrt else (lambda: None)
        try:
            for sig in signatures:
                if dispatcher.overloads.get(tuple(sig)) is not None:
                    continue
                # What numba's ``Dispatcher.compile`` does with a cache hit; a miss (an unreadable
                # file) is left to the first call, which compiles as numba always does.
                result = dispatcher._cache.load_overload(sig, context)
                if result is None:
                    continue
                dispatcher._cache_hits[sig] += 1
                context.insert_user_function(result.entry_point, result.fndesc, [result.library])
                dispatcher.add_overload(result)
        finally:
            del context.refresh


def extension(ext: aot.Extension, fallbacks: dict[str, Callable[[], Any]]) -> dict[str, aot.Loop] | None:
    """The loops of ``ext`` built at install (``cost.aot.load``) when the mode is ``auto`` and it is
    there for the current sources; else None."""
    return aot.load(ext, fallbacks) if mode() == "auto" else None


def ready(py_func: Callable[..., Any], loader: Any, built: Callable[[], Any] | None = None) -> bool:
    """Whether the compiled ``py_func`` should run now (see the module's docstring); ``loader`` is the
    ``functools.cache``-wrapped function that returns it compiled (None when numba is missing),
    ``built`` the function returning its extension's loops (:func:`extension`). A loop numba's cache
    holds is loaded here, before its first call (:func:`load`)."""
    m = mode()
    if m == "numpy":
        return False
    if built is not None and built() is not None:
        return True
    cached = on_disk(py_func)
    if m == "auto" and not (loader.cache_info().currsize or cached):
        return False
    dispatcher = loader()
    if dispatcher is None:
        return False
    if cached:
        load(dispatcher, py_func)
    return True


def cache_folder(py_func: Callable[..., Any]) -> Path | None:
    """The folder numba caches ``py_func`` in (None when numba is missing or can cache nowhere)."""
    try:
        from numba.core.caching import FunctionCache

        return Path(FunctionCache(py_func)._cache_path)
    except Exception:  # noqa: BLE001
        return None


def compile_in_background(loops: list[Callable[..., Any]], lock_dir: Path | None, *, build: bool = False) -> bool:
    """Start ``python -m tileplan.warmup --background LOCK`` (low priority, detached from the
    terminal, so Ctrl-C on this command does not stop it) when the mode is ``auto`` and numba's cache
    lacks one of ``loops`` (or ``build``: an extension is to be built). A lock file in ``lock_dir``
    keeps it to one such process at a time. True when a compile is running in the background (started
    now or earlier)."""
    if mode() != "auto" or lock_dir is None or not build and all(on_disk(f) for f in loops):
        return False
    lock = lock_dir / LOCK_NAME
    try:
        if lock.exists() and _running(lock):
            return True
        lock.unlink(missing_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return True  # another command started it a moment ago
    except OSError:
        return False
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tileplan.warmup", "--background", str(lock)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        os.close(fd)
        lock.unlink(missing_ok=True)
        return False
    os.write(fd, f"{proc.pid}\n".encode())
    os.close(fd)
    return True


def _running(lock: Path) -> bool:
    """Whether the compile that wrote ``lock`` still runs: its process exists and the lock is younger
    than :data:`STALE_LOCK_S` (a lock without a process id yet: it is being started)."""
    if time.time() - lock.stat().st_mtime >= STALE_LOCK_S:
        return False
    text = lock.read_text().strip()
    if not text.isdigit():
        return True
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def background_main(lock: Path, compile_all: Callable[[], None], *, nice: int = 10) -> None:
    """The background process: compile at a lower priority (``nice``), then remove the lock (also
    on failure)."""
    try:
        os.nice(nice)
        compile_all()
    finally:
        lock.unlink(missing_ok=True)
