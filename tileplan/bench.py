"""``tileplan bench``: how fast planning is (timing lives here, never in tests)."""

from __future__ import annotations

import math
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.table import Table

from tileplan import api
from tileplan.bench_memory import TreePeak
from tileplan.errors import TileplanError
from tileplan.parallel import default_jobs
from tileplan.search import memo


@dataclass
class BenchRow:
    """One (network, accelerator) measurement. Times are seconds on this machine: ``cold_s`` is the
    first plan in this process (it loads or compiles the cost kernel), ``seconds`` the fastest of
    the warm repeats (wall clock), ``cpu_s`` the CPU time of that plan (this process and its
    workers): compare both when the machine is shared. ``typed_s`` is what the user sees: the same
    ``tileplan plan`` typed at the prompt, a new process each time (start-up, imports, loading the
    compiled loops, planning, printing), the fastest of ``fresh`` runs; ``typed_cpu_s`` its CPU time."""

    network: str
    arch: str
    layers: int
    searched: int
    seconds: float
    evaluated: int
    space_size: float
    peak_mib: float  # largest resident memory of the planner and its worker processes together
    cache_saved_s: float
    cold_s: float = 0.0
    cpu_s: float = 0.0
    jobs: int = 1
    typed_s: float = math.nan
    typed_cpu_s: float = math.nan

    @property
    def rate(self) -> float:
        return self.evaluated / self.seconds if self.seconds else 0.0


def _cpu() -> float:
    """CPU seconds of this process and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_bench(networks: list[str], archs: list[str], *, strategy: str = "exhaustive", objective: str = "latency",
              jobs: int | None = None, repeat: int = 1, fresh: int = 3, log: Callable[[str], None] | None = None
              ) -> list[BenchRow]:
    """Plan each network on each accelerator once cold, then ``repeat`` times warm, and measure it; then
    ``fresh`` times as a new ``tileplan plan`` process (the user-visible time; 0: not measured)."""
    rows = []
    workers = jobs or default_jobs()
    for arch in archs:
        for net in networks:
            runs = []
            with TreePeak() as tree:  # this process and its search workers together
                for _ in range(1 + max(0, repeat)):
                    memo.clear()  # warm: the kernels are loaded, but nothing of an earlier plan is reused
                    t0, c0 = time.perf_counter(), _cpu()
                    result = api.plan(net.strip(), arch.strip(), strategy=strategy, objective=objective,
                                      jobs=workers)
                    runs.append((time.perf_counter() - t0, _cpu() - c0))
            cold = runs[0][0]
            seconds, cpu = min(runs[1:] or runs)
            peak = tree.bytes
            by_name = {lp.name: lp for lp in result.layers}
            saved = sum(by_name[lp.cached_from].search_seconds for lp in result.layers if lp.cached_from)
            row = BenchRow(result.network, result.arch, len(result.layers), result.searched_layers, seconds,
                           sum(lp.evaluated for lp in result.layers),
                           sum(lp.space_size for lp in result.layers if not lp.cached_from), peak / 2**20, saved,
                           cold, cpu, workers)
            if fresh > 0:
                row.typed_s, row.typed_cpu_s = fresh_process(
                    ["plan", net.strip(), "--arch", arch.strip(), "-s", strategy, "-o", objective, "-j", str(workers)],
                    runs=fresh)
            rows.append(row)
            if log:
                log(f"{row.network} on {row.arch}: cold {cold:.2f} s, warm {seconds:.2f} s wall / {cpu:.2f} s CPU, "
                    f"typed {row.typed_s:.2f} s, {row.evaluated:,} candidates")
    return rows


def bench_table(rows: list[BenchRow]) -> Table:
    t = Table(title="tileplan bench")
    for c in ("network", "arch", "layers", "searched", "typed s", "cold s", "warm s", "CPU s", "candidates", "cand/s",
              "space", "peak MiB"):
        t.add_column(c, justify="left" if c in ("network", "arch") else "right")
    for r in rows:
        t.add_row(r.network, r.arch, str(r.layers), str(r.searched), f"{r.typed_s:.2f}", f"{r.cold_s:.2f}",
                  f"{r.seconds:.2f}", f"{r.cpu_s:.2f}", f"{r.evaluated:,}", f"{r.rate:,.0f}", f"{r.space_size:.2e}",
                  f"{r.peak_mib:.0f}")
    return t


@dataclass
class FusedBenchRow:
    """One (network, accelerator) measurement of ``plan --fuse`` (the unfused plan included).
    ``seconds`` / ``cpu_s`` / ``cold_s`` as in :class:`BenchRow`; ``search_s`` the fused group
    searches alone (summed over groups, in whichever process ran them); ``space_size`` the fused
    mappings the searched groups stand for, ``screened`` the (tile pair, discrete choice) candidates
    they looked at, ``evaluated`` those fully costed after the safe pruning."""

    network: str
    arch: str
    candidates: int
    searched: int
    chosen: int
    seconds: float
    cpu_s: float
    cold_s: float
    search_s: float
    space_size: float
    screened: int
    evaluated: int
    max_group: int
    jobs: int


def run_fused_bench(networks: list[str], archs: list[str], *, objective: str = "latency", jobs: int | None = None,
                    repeat: int = 1, max_group: int = 4, log: Callable[[str], None] | None = None
                    ) -> list[FusedBenchRow]:
    """Plan each network with fusion (``api.plan_fused``) once cold, then ``repeat`` times warm."""
    rows = []
    workers = jobs or default_jobs()
    for arch in archs:
        for net in networks:
            runs = []
            for _ in range(1 + max(0, repeat)):
                memo.clear()
                t0, c0 = time.perf_counter(), _cpu()
                plan = api.plan_fused(net.strip(), arch.strip(), objective=objective, jobs=workers,
                                      max_group=max_group)
                runs.append((time.perf_counter() - t0, _cpu() - c0))
            seconds, cpu = min(runs[1:] or runs)
            meta = plan.meta
            row = FusedBenchRow(plan.base.network, plan.base.arch, int(meta["candidates"]), int(meta["searched"]),
                                len(plan.groups), seconds, cpu, runs[0][0], float(meta.get("search_seconds", 0.0)),
                                float(meta.get("space_size", 0.0)), int(meta.get("screened", 0)),
                                int(meta.get("evaluated", 0)), max_group, workers)
            rows.append(row)
            if log:
                log(f"{row.network} on {row.arch} --fuse: cold {row.cold_s:.2f} s, warm {seconds:.2f} s wall / "
                    f"{cpu:.2f} s CPU, fused searches {row.search_s:.2f} s")
    return rows


def fused_bench_table(rows: list[FusedBenchRow]) -> Table:
    t = Table(title="tileplan bench --fuse (plan --fuse, unfused plan included)")
    for c in ("network", "arch", "groups", "searched", "chosen", "cold s", "warm s", "CPU s", "group search s",
              "space", "screened", "costed"):
        t.add_column(c, justify="left" if c in ("network", "arch") else "right")
    for r in rows:
        t.add_row(r.network, r.arch, str(r.candidates), str(r.searched), str(r.chosen), f"{r.cold_s:.2f}",
                  f"{r.seconds:.2f}", f"{r.cpu_s:.2f}", f"{r.search_s:.2f}", f"{r.space_size:.2e}",
                  f"{r.screened:,}", f"{r.evaluated:,}")
    return t


def fresh_process(args: list[str], runs: int = 3) -> tuple[float, float]:
    """``tileplan ARGS`` as the user types it, in a new process each time: the fastest of ``runs`` wall
    times and the least CPU time (seconds; the process and its workers). A failing command raises."""
    walls, cpus = [], []
    for _ in range(max(1, runs)):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tileplan.entry", *args], capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode:
            raise TileplanError(f"tileplan {' '.join(args)} failed: {done.stderr.strip()[-300:]}")
    return min(walls), min(cpus)


def cold_start(network: str = "lenet5", arch: str = "nmp", runs: int = 3) -> float:
    """Wall seconds of ``tileplan plan NETWORK --arch ARCH`` in a new process (imports and loading the
    kernel, or compiling it unless numba's cache has it), the fastest of ``runs``."""
    return fresh_process(["plan", network, "--arch", arch], runs)[0]


@dataclass
class ModelRate:
    """Raw throughput of the model: random complete mappings of one layer (tiles, loop order,
    unrolling) evaluated in one ``cost.model.evaluate`` call, full costs (every ``CostBatch`` field)."""

    layer: str
    arch: str
    candidates: int
    seconds: float  # wall
    threads: int = 1
    path: str = "numpy"  # or "numba", "extension" (cost.aot)
    cpu_seconds: float = 0.0  # CPU time of the process during the call (all threads, user + system)

    @property
    def rate(self) -> float:
        return self.candidates / self.seconds if self.seconds else 0.0


def compile_loops(log: Callable[[str], None] = lambda msg: None) -> float | None:
    """Compile the kernel's and the search's loops here when numba's cache lacks one (a fresh install),
    so that the timings measure the compiled path; the seconds it took, or None when nothing was
    compiled (already cached, or ``TILEPLAN_KERNEL=numpy``)."""
    from tileplan import warmup
    from tileplan.cost import jit

    if jit.mode() == "numpy" or warmup.cached():
        return None
    log("compiling the cost kernel and the search's loops first (once per install, about 2 minutes)")
    t0 = time.perf_counter()
    warmup.warm_up()
    seconds = time.perf_counter() - t0
    log(f"compiled in {seconds:.1f} s")
    return seconds


def model_rate(arch: str = "eyeriss", network: str = "resnet50", layer: str = "res3a_conv2",
               candidates: int = 1 << 20, seed: int = 0, threads: int | None = None) -> ModelRate:
    """Time ``cost.model.evaluate`` on ``candidates`` random mappings (tiles, orders, unrolls) of one
    layer, compiled on ``threads`` threads (default: all) when numba is there (a small warm-up
    batch first, so compilation or loading the kernel is not timed; the fastest of three timed calls:
    on shared cores a single call varies by up to 2x)."""
    import numpy as np

    from tileplan.cost import compiled
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
    path = ("extension" if compiled.built() is not None else "numba") if compiled.wanted() else "numpy"
    evaluate(problem, batch.take(np.arange(min(candidates, 1000))))
    before = compiled.threads()
    if threads is not None:
        compiled.set_threads(threads)
    try:
        used = compiled.threads() if path != "numpy" else 1
        seconds = cpu = math.inf
        for _ in range(3):  # the fastest call: the first also pays for fresh output pages
            c0 = _cpu()
            t0 = time.perf_counter()
            evaluate(problem, batch)
            seconds = min(seconds, time.perf_counter() - t0)
            cpu = min(cpu, _cpu() - c0)
    finally:
        compiled.set_threads(before)
    return ModelRate(f"{network}/{layer}", a.name, candidates, seconds, used, path, cpu)
