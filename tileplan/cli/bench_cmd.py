"""`tileplan bench`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from tileplan.cli.app import _guard, app, err, out


@app.command()
def bench(
    networks: str = typer.Option("resnet50,vgg16,mobilenetv2", help="Comma-separated zoo networks."),
    archs: str = typer.Option("nmp,eyeriss", "--archs", help="Comma-separated presets."),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s"),
    objective: str = typer.Option("latency", "--objective", "-o"),
    json_path: Path | None = typer.Option(None, "--json", help="Write the measurements as JSON."),
) -> None:
    """Time planning of networks on presets: wall time, candidates, candidates/s, peak memory."""
    from tileplan.bench import bench_table, model_rate, run_bench
    from tileplan.report.files import check_output_file, write_text_atomic

    def work() -> None:
        if json_path is not None:
            check_output_file(json_path)
        rows = run_bench(networks.split(","), archs.split(","), strategy=strategy, objective=objective,
                         log=lambda msg: err.print(msg, highlight=False))
        out.print(bench_table(rows))
        rates = [model_rate(a.strip()) for a in archs.split(",")]
        for r in rates:
            out.print(f"model: {r.candidates:,} random mappings of {r.layer} on {r.arch} in {r.seconds:.2f} s "
                      f"= {r.rate:,.0f} candidates/s")
        if json_path:
            data = {"plans": [r.__dict__ for r in rows], "model": [r.__dict__ for r in rates]}
            write_text_atomic(json_path, json.dumps(data, indent=2))

    _guard(work)
