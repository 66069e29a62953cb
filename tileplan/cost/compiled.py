"""The compiled path of the cost kernel: ``cost.kernel``'s loops (stage two, and stage three from
``cost.finish``, per candidate) compiled by numba, looping over candidates in parallel (``prange``,
numba's own 'workqueue' threads: no TBB or OpenMP needed).

When the compiled loops run instead of their numpy twins (bit-identical results) is ``cost.jit``'s
rule: by default when their extension built at install is there (:data:`EXTENSION`, ``cost.aot``:
the same loops, loaded without numba, on one thread) or numba's on-disk cache holds them, which ``make
venv`` (``tileplan.warmup``) or the first command-line run (``tileplan.warmup.compile_in_background``)
sees to; ``TILEPLAN_KERNEL=numba`` compiles them here if need be, ``=numpy`` never runs them.
numba's cache is keyed by ``cost/kernel.py`` (where the compiled loops are written; ``cost.jit`` also
drops it when a module compiled into them, ``kernel.INLINED_FROM``, is newer): after changing how this
module compiles them, delete ``tileplan/cost/__pycache__/*.nb*``. The extension's key hashes this
module's source too, so it goes stale by itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from tileplan.cost import aot, jit, kernel
from tileplan.cost.batch import CostBatch
from tileplan.cost.finish import cost_batch
from tileplan.cost.flat import hoist_words
from tileplan.cost.jit import mode

#: numba's error model of the loops (:func:`_jit`; the extension is compiled with it too).
ERROR_MODEL = "numpy"
#: The kernel's loops built at install as an extension module (``cost.aot``): its machine code is
#: decided by the loops' module, the modules inlined into them and this one (the compile options and
#: the scalar twins registered with numba).
EXTENSION = aot.Extension("kernel_aot", "tileplan.cost.kernel", ("model_loop", "unroll_loop"),
                          ("tileplan.cost.kernel", *kernel.INLINED_FROM, __name__), nrt=False)


def built() -> dict[str, aot.Loop] | None:
    """The kernel's loops from its extension (``cost.jit.extension``), or None."""
    return jit.extension(EXTENSION, {"model_loop": loop, "unroll_loop": unroll_loop})


def wanted() -> bool:
    """Whether the model's loop (``kernel.model_loop``) runs compiled now (``cost.jit.ready``)."""
    return jit.ready(kernel.model_loop, loop, built)


def unroll_wanted() -> bool:
    """Whether the best-unroll loop (``kernel.unroll_loop``) runs compiled now."""
    return jit.ready(kernel.unroll_loop, unroll_loop, built)


def _runner(name: str, loader: Callable[[], Callable[..., None] | None]) -> tuple[Callable[..., None], int]:
    """The compiled loop ``name`` to call (the extension's, else numba's) and the threads it runs on."""
    ext = built()
    if ext is not None:
        return ext[name], 1
    compiled = loader()
    assert compiled is not None
    return compiled, threads()


@cache
def loop() -> Callable[..., None] | None:
    """The compiled ``kernel.model_loop``, or None when numba is not installed."""
    jit = _jit()
    return None if jit is None else jit(kernel.model_loop)


@cache
def unroll_loop() -> Callable[..., None] | None:
    """The compiled ``kernel.unroll_loop``, or None when numba is not installed."""
    jit = _jit()
    return None if jit is None else jit(kernel.unroll_loop)


@cache
def _jit() -> Callable[[Callable[..., None]], Callable[..., None]] | None:
    """numba's ``njit`` with the kernel's options, after registering the kernel's functions with
    numba (None when numba is not installed)."""
    try:
        import numba
        from numba.extending import overload
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
        return None
    import warnings

    from numba.core.errors import NumbaIRAssumptionWarning

    # Inlining makes numba's pedantic SSA check warn about variables it renamed; it is harmless.
    warnings.filterwarnings("ignore", category=NumbaIRAssumptionWarning)
    if os.environ.get("NUMBA_THREADING_LAYER") is None:
        numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
    twins: dict[Callable[..., Any], Callable[..., Any]] = {
        kernel.select: _select_branch, kernel.pick: _pick_scalar, kernel.at: _at_scalar,
        kernel.maximum: _maximum_scalar, kernel.cdiv_unroll: _cdiv_unroll_scalar}
    for fn in (kernel.select, kernel.at):
        # Called at hundreds of places: compiled once as small functions that LLVM inlines (inlining
        # them in numba's IR instead would compile each call site separately).
        overload(fn, strict=False)(_same(twins[fn]))
    inlined: tuple[Callable[..., Any], ...] = (
        kernel.cdiv, kernel.cdiv_by, kernel.cdiv_unroll, kernel.maximum, kernel.pick, kernel.hoist_bits,
        kernel.trip_table, kernel.operand_pass, kernel.compute_cycles, kernel.operand, kernel.sweep_shapes,
        kernel.footprint, kernel.feasible, kernel.reload, kernel.finish, kernel.objective_value, kernel.masks)
    for fn in inlined:
        # Inlined at the IR level: the tables tuple is passed once, not copied at every call.
        overload(fn, inline="always", strict=False)(_same(twins.get(fn, fn)))
    kernel.prange = numba.prange  # type: ignore[assignment]
    # The loops allocate nothing (scratch comes from the caller), so they need no reference counting,
    # which would otherwise cost atomic increments on every table of the inlined functions' arguments.
    # Divisors are never zero (tile sizes, bursts and lanes are positive): no zero-division checks.
    options: dict[str, Any] = {"parallel": True, "cache": True, "_nrt": False, "error_model": ERROR_MODEL}
    jit: Callable[[Callable[..., None]], Callable[..., None]] = numba.njit(**options)
    return jit


def _select_branch(c: Any, a: Any, b: Any) -> Any:
    """``kernel.select`` for one candidate (``c`` is 0/1): a conditional move, not a multiplication."""
    return a if c else b


def _pick_scalar(table: Any, base: Any, d: Any) -> Any:
    """``kernel.pick`` for one candidate: a plain read."""
    return table[np.uint64(base + d)]


def _at_scalar(table: Any, x: Any) -> Any:
    """``kernel.at`` for one candidate: the offset is never negative, so it is read as unsigned, which
    spares the wrap-around of negative indices."""
    return table[np.uint64(x)]


def _maximum_scalar(a: Any, b: Any) -> Any:
    """``kernel.maximum`` of two non-NaN floats: a compare and a conditional move."""
    return a if a >= b else b


def _cdiv_unroll_scalar(a: Any, u: Any) -> Any:
    """``kernel.cdiv_unroll`` for one candidate: no division when the dimension is not unrolled."""
    return a if u <= 1 else -(-a // u)


def _same(fn: Callable[..., Any]) -> Callable[..., Callable[..., Any]]:
    def typer(*args: Any) -> Callable[..., Any]:
        return fn

    return typer


def threads() -> int:
    """Threads the compiled loops use (one on the extension)."""
    if built() is not None or loop() is None:
        return 1
    import numba

    return int(numba.get_num_threads())


def set_threads(n: int) -> None:
    """Use at most ``n`` threads in the compiled loops (e.g. 1 inside each of several worker processes;
    the extension's run on one)."""
    if built() is not None or loop() is None:
        return
    import numba

    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]


def _scratch(K: Any, n: int, threads: int) -> list[np.ndarray]:
    """Flat scratch tables of the loops' parallel blocks (``kernel.scratch_sizes``), one block per
    ``n / (8 threads)`` candidates; 8 spare entries keep blocks run by different threads off each
    other's cache lines."""
    chunks = max(1, min(n, 8 * threads))
    return [np.zeros((chunks, size + 8), dtype=np.float64 if k == 1 else np.int64)
            for k, size in enumerate(kernel.scratch_sizes(len(K.kcount)))]


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view: the loops read inputs through one array type whether or not the caller's
    array is writeable (memoised tables are not), so numba compiles and caches one signature."""
    view = a.view()
    view.flags.writeable = False
    return view


def _ints(a: np.ndarray) -> np.ndarray:
    return _read_only(np.ascontiguousarray(a, dtype=np.int64))


def evaluate(K: Any, tiles: np.ndarray, hoist: np.ndarray, unroll: np.ndarray, order: np.ndarray,
             layouts: np.ndarray, macs: int, peak_macs_per_cycle: int) -> CostBatch:
    """Full costs of every candidate (``CostBatch``; the loop writes its arrays directly: stages two and
    three per candidate)."""
    compiled, threads = _runner("model_loop", loop)
    n = len(tiles)
    rd = np.empty((n, 3))
    wr = np.empty(n)
    bu = np.empty((n, 3))
    cyc = np.empty((4, n))
    en = np.empty((n, 5))
    fp = np.empty((n, len(K.cap)), dtype=np.int64)
    feas = np.empty(n, dtype=np.bool_)
    compiled(K, _ints(tiles), _read_only(hoist_words(hoist)), _ints(unroll), _ints(layouts), _ints(order), _NO_ORDERS,
             0, True, _NO_KEYS, rd, wr, bu, cyc, en, fp, feas.view(np.int8), *_scratch(K, n, threads))
    return cost_batch(feas, fp, rd, wr, bu, cyc, en, macs, peak_macs_per_cycle)


def orders(K: Any, tiles: np.ndarray, hoist: np.ndarray, unroll: np.ndarray, layouts: np.ndarray,
           order_table: np.ndarray, objective: int) -> np.ndarray:
    """(n, orders) objective of every candidate under every loop order (``inf`` where it does not fit)."""
    compiled, threads = _runner("model_loop", loop)
    n = len(tiles)
    keys = np.empty((n, len(order_table)))
    compiled(K, _ints(tiles), _read_only(hoist_words(hoist)), _ints(unroll), _ints(layouts), _NO_ORDERS,
             _ints(order_table), objective, False, keys, *_NO_COSTS(len(K.cap)), *_scratch(K, n, threads))
    return keys


def unroll_choice(K: Any, tiles: np.ndarray, options: np.ndarray) -> np.ndarray:
    """(n,) index of the first of the unroll ``options`` ((k, 8)) with the fewest compute cycles for
    each tile vector of ``tiles`` ((n, 8); ``kernel.unroll_loop``)."""
    compiled, threads = _runner("unroll_loop", unroll_loop)
    n = len(tiles)
    choice = np.empty(n, dtype=np.int64)
    compiled(K, _ints(tiles), _ints(options), choice, _scratch(K, n, threads)[3])
    return choice


# Placeholders for the arrays a use of ``kernel.model_loop`` does not write (same types: one compiled signature).
_NO_ORDERS = np.zeros((0, 8), dtype=np.int64)
_NO_ORDERS.flags.writeable = False
_NO_KEYS = np.zeros((0, 0))


def _NO_COSTS(memories: int) -> tuple[np.ndarray, ...]:
    return (np.zeros((0, 3)), np.zeros(0), np.zeros((0, 3)), np.zeros((4, 0)), np.zeros((0, 5)),
            np.zeros((0, memories), dtype=np.int64), np.zeros(0, dtype=np.int8))


def load_cached() -> None:
    """Load the kernel's extension, or else its compiled loops that numba's on-disk cache holds (never
    compiling; nothing under ``TILEPLAN_KERNEL=numpy``), e.g. before forking worker processes, which
    then inherit them."""
    if mode() == "numpy" or built() is not None:
        return
    for fn, loader in ((kernel.model_loop, loop), (kernel.unroll_loop, unroll_loop)):
        if jit.on_disk(fn) and loader() is not None:
            jit.load(loader(), fn)
