"""Design-space sweeps: the cartesian grid of machine overrides x models x strategies x objectives.

Every point plans a whole network (:func:`tileplan.api.plan`, one process per point) and becomes one CSV
row. Rows are appended (and flushed to disk) as points finish, so a sweep that is interrupted — Ctrl-C
or a kill — resumes where it stopped when run again with the same arguments: points already in the file
are not planned again, a row cut short by a kill is dropped and redone. When every point is done the
file is rewritten in grid order, so an interrupted and resumed sweep ends with the same bytes as an
uninterrupted one. Backends: a local process pool, or Ray (an existing cluster, or a local one started
on demand) for sweeps that outgrow one machine.

Units in the columns: cycles, seconds, bytes, pJ.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from tileplan.arch.overrides import apply_overrides, parse_override, parse_value
from tileplan.arch.spec import Arch
from tileplan.errors import ConfigError, TileplanError
from tileplan.files import csv_cell
from tileplan.parallel import default_jobs
from tileplan.report.files import write_text_atomic

#: Result columns of every row, after the point's parameters.
METRICS = ("latency_cycles", "latency_s", "dram_bytes", "bursts", "energy_pj", "edp", "searched_layers")
BACKENDS = ("local", "ray")

#: progress(done, total, label) as points finish (``done`` counts points already in the file).
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Axis:
    """One swept machine field: its override path and the values (as written on the command line)."""

    path: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class SweepPoint:
    """One point of the grid: ``index`` is its position in grid order (models outermost, then
    strategies, objectives and the axes in the order given, the last one fastest)."""

    index: int
    model: str
    strategy: str
    objective: str
    settings: tuple[tuple[str, str], ...]  # (path, value text), one per axis

    def key(self) -> tuple[str, ...]:
        """The point's parameters as they appear in the CSV."""
        return tuple(str(csv_cell(v)) for v in (str(self.index), self.model, self.strategy, self.objective,
                                                 *(v for _, v in self.settings)))


def split_values(text: str) -> list[str]:
    """``"1e9,2e9"`` -> ``["1e9", "2e9"]``; commas inside brackets do not split (``[K,C],[P,Q]``)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [v for v in out if v]


def parse_axes(items: Sequence[str]) -> list[Axis]:
    """``["dram.bandwidth_bytes_per_s=1e9,2e9", ...]`` -> axes (a path given twice is an error)."""
    axes: list[Axis] = []
    for item in items:
        o = parse_override(item)
        values = split_values(o.text)
        if not values:
            raise ConfigError(f"--set {item!r}: no values to sweep")
        if any(a.path == o.path for a in axes):
            raise ConfigError(f"--set {o.path} is given twice; list every value in one --set PATH=V1,V2,...")
        if len(set(values)) != len(values):
            raise ConfigError(f"--set {item!r}: a value is listed twice")
        axes.append(Axis(o.path, tuple(values)))
    return axes


@dataclass(frozen=True)
class Sweep:
    """A sweep's grid on one base machine, and how each point is planned."""

    arch: Arch
    models: tuple[str, ...]
    strategies: tuple[str, ...]
    objectives: tuple[str, ...]
    axes: tuple[Axis, ...]
    budget: int = 20_000
    seed: int = 0
    batch: int = 1

    def points(self) -> list[SweepPoint]:
        combos = itertools.product(self.models, self.strategies, self.objectives, *(a.values for a in self.axes))
        return [SweepPoint(i, c[0], c[1], c[2], tuple(zip((a.path for a in self.axes), c[3:], strict=True)))
                for i, c in enumerate(combos)]

    @property
    def columns(self) -> list[str]:
        return ["point", "model", "strategy", "objective", *(a.path for a in self.axes), *METRICS]

    def validate(self) -> None:
        """Fail before anything runs: every point's machine must validate and every name must exist."""
        from tileplan import api
        from tileplan.search import STRATEGIES
        from tileplan.workload import zoo

        if not (self.models and self.strategies and self.objectives):
            raise TileplanError("the sweep has 0 points: give at least one model, strategy and objective")
        for s in self.strategies:
            if s not in STRATEGIES:
                raise TileplanError(f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)}")
            api.check_options(strategy=s, budget=self.budget, seed=self.seed, batch=self.batch)
        for o in self.objectives:
            if o not in api.OBJECTIVES:
                raise TileplanError(f"unknown objective {o!r}; choose {', '.join(api.OBJECTIVES)}")
        for m in self.models:
            if not Path(m).is_file():
                zoo.get(m)
        for values in itertools.product(*(a.values for a in self.axes)):
            apply_overrides(self.arch, [f"{a.path}={v}" for a, v in zip(self.axes, values, strict=True)])


def run_point(job: tuple[Sweep, SweepPoint]) -> list[str]:
    """Plan one point and return its CSV row (text, so every backend writes the same bytes)."""
    from tileplan import api

    sweep, point = job
    arch = apply_overrides(sweep.arch, [f"{p}={v}" for p, v in point.settings])
    plan = api.plan(point.model, arch, strategy=point.strategy, objective=point.objective, batch=sweep.batch,
                    budget=sweep.budget, seed=sweep.seed, jobs=1)
    energy = plan.energy_pj
    values = (plan.latency_cycles, plan.latency_s, plan.dram_bytes, plan.total("bursts"), energy,
              energy * plan.latency_cycles, plan.searched_layers)
    return [*point.key(), *(repr(float(v)) if isinstance(v, float) else str(v) for v in values)]


# ----------------------------------------------------------------------------- the results file
def _line(row: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue()


def read_done(path: Path, sweep: Sweep) -> dict[int, list[str]]:
    """Rows already in ``path`` by point index, after dropping a last line cut short by a kill.
    Raise if the file holds another sweep (other columns, or a row whose parameters differ)."""
    if not path.exists() or path.stat().st_size == 0:
        return {}
    check_sweep_file(path)
    data = path.read_bytes()
    try:
        header = next(csv.reader(io.StringIO(data[: data.find(b"\n") + 1].decode())), [])
    except UnicodeDecodeError:
        header = []
    if header != sweep.columns:  # checked before the file is touched (it may be someone's notes)
        raise TileplanError(f"{path} holds another sweep (columns {', '.join(header)}); give another file or "
                            f"remove it")
    if not data.endswith(b"\n"):  # a row half written when the sweep was killed
        data = data[: data.rfind(b"\n") + 1]
        with open(path, "r+b") as fh:
            fh.truncate(len(data))
    rows = list(csv.reader(io.StringIO(data.decode())))
    points = sweep.points()
    done: dict[int, list[str]] = {}
    nkey = len(sweep.columns) - len(METRICS)
    for row in rows[1:]:
        try:
            point = points[int(row[0])]
        except (ValueError, IndexError):
            raise TileplanError(f"{path} holds another sweep (row {row[:nkey]} is not on this grid)") from None
        if list(point.key()) != row[:nkey] or len(row) != len(sweep.columns):
            raise TileplanError(f"{path} holds another sweep (row {row[:nkey]} is not on this grid)")
        done[point.index] = row
    return done


def check_sweep_file(path: str | Path) -> None:
    """Refuse, before anything is written, a results file that exists but is no sweep CSV (someone's
    notes must not be appended to or truncated) or is not a regular file (a sweep reads its rows
    back to resume)."""
    target = Path(path)
    if not target.exists():
        return
    if not target.is_file():
        raise TileplanError(f"--output {target} is not a regular file: a sweep appends its rows to a file and "
                            f"reads them back to resume; give a .csv file name")
    with open(target, "rb") as fh:
        head = fh.read(len("point,model,strategy,objective,"))
    if head and head != b"point,model,strategy,objective,":
        raise TileplanError(f"--output {target} exists and is not a tileplan sweep CSV (it does not start with "
                            f"point,model,strategy,objective); give another file name, it was not changed")


def check_ray_address(address: str | None, *, timeout_s: float = 5.0) -> None:
    """Fail within ``timeout_s`` when a Ray address (``host:port``) does not answer (Ray itself retries
    for ever)."""
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise TileplanError(f"--address {address!r}: expected HOST:PORT of a Ray cluster's head (e.g. 10.0.0.5:6379)")
    import socket

    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise TileplanError(f"--address {address}: no Ray cluster answers there ({err.strerror or err}); start one "
                            f"with `ray start --head` or leave out --address for a local one") from None


def _local(jobs: list[tuple[Sweep, SweepPoint]], workers: int) -> Iterator[tuple[int, list[str]]]:
    from tileplan.parallel import run_parallel

    yield from run_parallel(run_point, jobs, jobs=workers)


def _ray(jobs: list[tuple[Sweep, SweepPoint]], workers: int, address: str | None) -> Iterator[tuple[int, list[str]]]:
    try:
        import ray
    except ImportError:
        raise TileplanError("the ray backend needs Ray: pip install 'tileplan[ray]'") from None
    started = not ray.is_initialized()
    if started:
        try:
            if address:
                check_ray_address(address)
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        except Exception as err:  # noqa: BLE001 - Ray raises bare Exception on a start-up timeout
            raise TileplanError(f"cannot start or reach Ray at {address or 'a local cluster'}: "
                                f"{' '.join(str(err).split())[:300]}") from None
    remote = ray.remote(num_cpus=1, max_retries=1)(run_point)
    refs = {remote.remote(job): i for i, job in enumerate(jobs)}
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                yield refs[ref], ray.get(ref)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def run_sweep(sweep: Sweep, path: str | Path, *, backend: str = "local", jobs: int | None = None,
              address: str | None = None, progress: Progress | None = None) -> list[list[str]]:
    """Run every point of ``sweep`` not yet in the CSV at ``path``, appending each row as it finishes;
    when all are done, rewrite the file in grid order and return its rows (without the header)."""
    if backend not in BACKENDS:
        raise TileplanError(f"unknown backend {backend!r}; choose {' or '.join(BACKENDS)}")
    target = Path(path)
    sweep.validate()
    points = sweep.points()
    done = read_done(target, sweep)
    todo = [p for p in points if p.index not in done]
    workers = jobs or default_jobs()
    if progress:
        progress(len(done), len(points), "resumed" if done else "")
    if todo:
        fresh = not target.exists() or target.stat().st_size == 0
        with open(target, "a", newline="") as fh:
            if fresh:
                fh.write(_line(sweep.columns))
                fh.flush()
            items = [(sweep, p) for p in todo]
            results = _local(items, workers) if backend == "local" else _ray(items, workers, address)
            for i, row in results:
                fh.write(_line(row))
                fh.flush()
                os.fsync(fh.fileno())
                done[todo[i].index] = row
                if progress:
                    progress(len(done), len(points), f"{todo[i].model} {_label(todo[i])}")
    rows = [done[p.index] for p in points]
    write_text_atomic(target, "".join(_line(r) for r in [sweep.columns, *rows]))
    return rows


def _label(point: SweepPoint) -> str:
    return " ".join(f"{p.rsplit('.', 1)[-1]}={v}" for p, v in point.settings)


def sweep_figure(sweep: Sweep, rows: Sequence[Sequence[str]]) -> Figure:
    """The objective over the grid: x = the first swept field, one line per combination of the other
    parameters (models, strategies, objectives, other fields)."""
    from tileplan.report import plots
    from tileplan.search.objective import Objective

    col = {c: i for i, c in enumerate(sweep.columns)}
    first = sweep.axes[0] if sweep.axes else None
    ticks = list(first.values) if first else ["-"]
    try:
        xs = [float(parse_value(v)) for v in ticks]
    except (TypeError, ValueError):
        xs = [float(i) for i in range(len(ticks))]
    varied = [name for name, values in (("model", sweep.models), ("strategy", sweep.strategies),
                                        ("objective", sweep.objectives)) if len(values) > 1]
    series: dict[str, list[float]] = {}
    for row in rows:
        obj = Objective(row[col["objective"]])
        y = float(obj.combine(float(row[col["latency_cycles"]]), float(row[col["energy_pj"]]),
                              float(row[col["dram_bytes"]])))
        parts = [row[col[name]] for name in varied]
        parts += [f"{a.path.rsplit('.', 1)[-1]}={row[col[a.path]]}" for a in sweep.axes[1:]]
        line = series.setdefault(", ".join(parts) or obj.value, [math.nan] * len(ticks))
        line[ticks.index(row[col[first.path]]) if first else 0] = y
    finite = [v for vs in series.values() for v in vs if v == v and v > 0]
    spread = max(finite) / min(finite) if finite else 1.0
    units = {"latency": "cycles", "energy": "pJ", "edp": "pJ x cycles", "dram": "bytes",
             "perf-per-byte": "cycles x bytes"}
    ylabel = " / ".join(f"{o} ({units.get(o, '')})" for o in sweep.objectives)
    positive = all(x > 0 for x in xs)
    return plots.lines(xs, series, title=f"sweep on {sweep.arch.name}: {', '.join(sweep.models)}",
                       xlabel=first.path if first else "", ylabel=ylabel,
                       logx=positive and len(xs) > 2 and max(xs) / min(xs) > 20, logy=spread > 50, xticks=ticks)
