"""`tileplan report`: a self-contained HTML page of one plan."""

from __future__ import annotations

from pathlib import Path

import typer

from tileplan import api
from tileplan.cli.app import ARCH_HELP, MODEL_HELP, SET_HELP, _guard, _progress, app, out
from tileplan.errors import TileplanError


@app.command()
def report(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="The HTML file to write."),
    objective: str = typer.Option("latency", "--objective", help="latency | energy | edp | dram | perf-per-byte"),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help="Search strategy (as for `tileplan plan`)."),
    batch: int = typer.Option(1, "--batch", "-b", min=1, help="Batch size."),
    budget: int = typer.Option(20_000, help="Candidates for sampling strategies."),
    seed: int = typer.Option(0, help="Seed for sampling strategies."),
    skip_unsupported: bool = typer.Option(False, "--skip-unsupported",
                                          help="Pass unsupported ONNX operators through with a warning."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Search processes (default: every CPU)."),
) -> None:
    """Plan MODEL and write one self-contained HTML page: summary, machine, a sortable per-layer table,
    the figures, fusion groups, the gap to the lower bounds and warnings (no network access needed)."""
    from tileplan.report.files import check_output_file, write_text_atomic
    from tileplan.report.html import build_report

    def work() -> None:
        if objective not in api.OBJECTIVES:
            raise TileplanError(f"unknown objective {objective!r}; choose {', '.join(api.OBJECTIVES)}")
        check_output_file(output)
        machine = api.load_arch(arch, sets or ())
        network = api.load_network(model, batch=batch, skip_unsupported=skip_unsupported)
        with _progress() as bar:
            task = bar.add_task("planning", total=None, label="")
            result = api.plan(network, machine, strategy=strategy, objective=objective, batch=batch, budget=budget,
                              seed=seed, jobs=jobs,
                              progress=lambda d, t, lab: bar.update(task, completed=d, total=t, label=lab))
        write_text_atomic(output, build_report(result, machine, network, overrides=sets or ()))
        out.print(f"wrote {output} ({len(result.layers)} layers, latency {result.latency_s * 1e3:.3f} ms, "
                  f"DRAM {result.dram_bytes / 1e6:.3f} MB)", highlight=False)

    _guard(work)
