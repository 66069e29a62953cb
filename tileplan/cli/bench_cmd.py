"""`tileplan bench`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from tileplan.cli.app import (
    JOBS_HELP,
    MAX_GROUP_HELP,
    OBJECTIVE_HELP,
    STRATEGY_HELP,
    _guard,
    app,
    check_names,
    err,
    out,
)
from tileplan.errors import TileplanError


@app.command()
def bench(
    networks: str = typer.Option("resnet50,vgg16,mobilenetv2,llama3-8b-block", help="Comma-separated zoo networks."),
    archs: str = typer.Option("nmp,eyeriss", "--archs", help="Comma-separated presets."),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help=STRATEGY_HELP),
    objective: str = typer.Option("latency", "--objective", "-o", help=OBJECTIVE_HELP),
    json_path: Path | None = typer.Option(None, "--json", help="Write the measurements as JSON."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help=JOBS_HELP),
    repeat: int = typer.Option(1, "--repeat", help="Warm runs after the cold one (the fastest is reported)."),
    fresh: int = typer.Option(3, "--fresh", min=0, help="Also time each plan as typed at the prompt: a new "
                              "`tileplan plan` process per run, the fastest of this many (0: skip)."),
    fuse: bool = typer.Option(False, "--fuse", help="Also time `plan --fuse` (fused groups; one more table)."),
    max_group: int = typer.Option(4, "--max-group", help=MAX_GROUP_HELP),
) -> None:
    """Time planning of networks on presets: as typed at the prompt (a new process per run) and in this
    process (cold and warm wall time, CPU time), candidates, space, peak memory; the raw model
    throughput on one and on all threads, and a new process's cold start."""
    check_names((strategy,), objective)
    from tileplan import api
    from tileplan.bench import (
        bench_table,
        cold_start,
        compile_loops,
        fused_bench_table,
        model_rate,
        run_bench,
        run_fused_bench,
    )
    from tileplan.report.files import check_output_file, write_text_atomic

    def work() -> None:
        api.check_options(strategy=strategy, objective=objective)
        if json_path is not None:
            check_output_file(json_path)
        if repeat < 1 or (jobs is not None and jobs < 1):
            raise TileplanError(f"--repeat must be at least 1 (the timed runs; the fastest is reported) and --jobs "
                                f"at least 1, got --repeat {repeat}" + (f" --jobs {jobs}" if jobs is not None else ""))
        if not [n for n in networks.split(",") if n.strip()] or not [a for a in archs.split(",") if a.strip()]:
            raise TileplanError("--networks and --archs must each name at least one, comma-separated")
        if fuse and max_group < 2:
            raise TileplanError(f"--max-group must be at least 2 (a group fuses two or more layers), got {max_group}")
        compile_s = compile_loops(log=lambda msg: err.print(msg, highlight=False))
        rows = run_bench(networks.split(","), archs.split(","), strategy=strategy, objective=objective, jobs=jobs,
                         repeat=repeat, fresh=fresh, log=lambda msg: err.print(msg, highlight=False))
        out.print(bench_table(rows))
        fused = []
        if fuse:
            fused = run_fused_bench(networks.split(","), archs.split(","), objective=objective, jobs=jobs,
                                    repeat=repeat, max_group=max_group, log=lambda msg: err.print(msg, highlight=False))
            out.print(fused_bench_table(fused))
        rates = [model_rate(a.strip(), threads=t) for a in archs.split(",") for t in (1, None)]
        for r in rates:
            out.print(f"model: {r.candidates:,} random mappings of {r.layer} on {r.arch} in {r.seconds:.2f} s "
                      f"= {r.rate:,.0f} candidates/s ({r.path}, {r.threads} thread{'s' if r.threads > 1 else ''}; "
                      f"{r.cpu_seconds:.2f} s CPU)")
        start = cold_start()
        out.print(f"cold start: tileplan plan lenet5 --arch nmp in a new process: {start:.2f} s (fastest of 3)")
        if json_path:
            data = {"plans": [r.__dict__ for r in rows], "model": [{**r.__dict__, "rate": r.rate} for r in rates],
                    "cold_start_s": start, "compile_s": compile_s, "fused": [r.__dict__ for r in fused]}
            write_text_atomic(json_path, json.dumps(data, indent=2))

    _guard(work)
