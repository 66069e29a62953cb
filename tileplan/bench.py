"""``tileplan bench``: how fast planning is (timing lives here, never in tests)."""

from __future__ import annotations

import multiprocessing
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from rich.table import Table

from tileplan import api
from tileplan.errors import TileplanError

T = TypeVar("T")


@dataclass
class BenchRow:
    """One (network, accelerator) measurement. Times are wall-clock seconds on this machine."""

    network: str
    arch: str
    layers: int
    searched: int
    seconds: float
    evaluated: int
    space_size: float
    peak_mib: float  # largest resident set of this row's planner or one of its worker processes
    cache_saved_s: float

    @property
    def rate(self) -> float:
        return self.evaluated / self.seconds if self.seconds else 0.0


def _measure(net: str, arch: str, strategy: str, objective: str) -> BenchRow:
    """Plan once and measure it; run in a fresh process, so its peak memory is this row's alone."""
    t0 = time.perf_counter()
    result = api.plan(net, arch, strategy=strategy, objective=objective)
    seconds = time.perf_counter() - t0
    # Largest resident set of this process or of any of its search workers (KiB on Linux).
    peak = 1024 * max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    by_name = {lp.name: lp for lp in result.layers}
    saved = sum(by_name[lp.cached_from].search_seconds for lp in result.layers if lp.cached_from)
    return BenchRow(result.network, result.arch, len(result.layers), result.searched_layers, seconds,
                    sum(lp.evaluated for lp in result.layers),
                    sum(lp.space_size for lp in result.layers if not lp.cached_from), peak / 2**20, saved)


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        conn.send((True, fn(*args)))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which re-raises it
        conn.send((False, exc))
    finally:
        conn.close()


def in_fresh_process(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a forked process (its resource usage starts from the fork, not from the largest
    of the runs before it); its errors and Ctrl-C come back as exceptions."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args))
    proc.start()
    send.close()
    try:
        ok, value = receive.recv()
    except EOFError:
        raise TileplanError(f"a measurement process ended without a result (exit code {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()
    if not ok:
        raise value
    result: T = value
    return result


def run_bench(networks: list[str], archs: list[str], *, strategy: str = "exhaustive", objective: str = "latency",
              log: Callable[[str], None] | None = None) -> list[BenchRow]:
    """Plan each network on each accelerator once and measure it (each in a fresh process: peak
    memory is per row, not a running maximum)."""
    rows = []
    for arch in archs:
        for net in networks:
            row = in_fresh_process(_measure, net.strip(), arch.strip(), strategy, objective)
            rows.append(row)
            if log:
                log(f"{row.network} on {row.arch}: {row.seconds:.2f} s, {row.evaluated:,} candidates")
    return rows


def bench_table(rows: list[BenchRow]) -> Table:
    t = Table(title="tileplan bench")
    for c in ("network", "arch", "layers", "searched", "wall s", "candidates", "cand/s", "space",
              "peak MiB", "cache saved s"):
        t.add_column(c, justify="left" if c in ("network", "arch") else "right")
    for r in rows:
        t.add_row(r.network, r.arch, str(r.layers), str(r.searched), f"{r.seconds:.2f}", f"{r.evaluated:,}",
                  f"{r.rate:,.0f}", f"{r.space_size:.2e}", f"{r.peak_mib:.0f}", f"{r.cache_saved_s:.2f}")
    return t


@dataclass
class ModelRate:
    """Raw throughput of the vectorised model: random mappings of one layer evaluated in one call."""

    layer: str
    arch: str
    candidates: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.candidates / self.seconds if self.seconds else 0.0


def model_rate(arch: str = "eyeriss", network: str = "resnet50", layer: str = "res3a_conv2",
               candidates: int = 1 << 20, seed: int = 0) -> ModelRate:
    """Time ``cost.model.evaluate`` on ``candidates`` random mappings (tiles, orders, unrolls) of one layer."""
    import numpy as np

    from tileplan.cost.batch import MappingBatch
    from tileplan.cost.model import evaluate
    from tileplan.cost.problem import Problem
    from tileplan.dims import NDIMS
    from tileplan.search.space import spatial_options

    a = api.load_arch(arch)
    target = api.load_network(network)[layer].with_precision(api._precision(a, None))
    problem = Problem(target, a)
    rng = np.random.default_rng(seed)
    ones = (1,) * NDIMS
    max_len = problem.dims
    uopts = spatial_options(problem, tuple(int(x) for x in max_len))
    batch = MappingBatch(rng.integers(1, max_len + 1, size=(candidates, NDIMS)),
                         np.argsort(rng.random((candidates, NDIMS)), axis=1),
                         np.zeros((candidates, 3, NDIMS), dtype=bool),
                         uopts[rng.integers(0, len(uopts), size=candidates)],
                         np.tile(MappingBatch.default_layout_codes(), (candidates, 1)), ones, ones)
    t0 = time.perf_counter()
    evaluate(problem, batch)
    return ModelRate(f"{network}/{layer}", a.name, candidates, time.perf_counter() - t0)
