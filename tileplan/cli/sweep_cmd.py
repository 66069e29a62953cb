"""`tileplan sweep`: a grid of machines, models, strategies and objectives into one CSV."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from tileplan.cli.app import ARCH_HELP, _guard, _progress, app, err, out


@app.command()
def sweep(
    models: str = typer.Argument(..., help="Comma-separated zoo networks or .onnx files."),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help="A machine field and its values, PATH=V1,V2,... "
                                          "(repeatable; the grid is every combination)."),
    strategies: str = typer.Option("exhaustive", "--strategies", "-s", help="Comma-separated strategies."),
    objectives: str = typer.Option("latency", "--objectives", help="Comma-separated objectives."),
    output: Path = typer.Option(..., "--output", "-o", help="Results CSV (appended to and resumed from)."),
    backend: str = typer.Option("local", "--backend", help="local (process pool) | ray"),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address (ray backend; default: "
                                       "start a local Ray)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Points planned at once (default: every "
                                    "CPU)."),
    batch: int = typer.Option(1, "--batch", "-b", min=1, help="Batch size."),
    budget: int = typer.Option(20_000, help="Candidates for sampling strategies."),
    seed: int = typer.Option(0, help="Seed for sampling strategies."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw the objective over the grid next to the CSV."),
) -> None:
    """Plan every point of the grid (machine overrides x models x strategies x objectives), one CSV row
    per point written as it finishes; run the same command again to resume an interrupted sweep."""
    from tileplan import api
    from tileplan.report import plots
    from tileplan.report.files import check_output_file
    from tileplan.sweep import Sweep, parse_axes, read_done, run_sweep, sweep_figure

    def names(text: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))

    def work() -> None:
        check_output_file(output)
        grid = Sweep(api.load_arch(arch), names(models), names(strategies), names(objectives),
                     tuple(parse_axes(sets or ())), budget=budget, seed=seed, batch=batch)
        total = len(grid.points())
        start = time.monotonic()
        state = {"resumed": 0}
        with _progress() as bar:
            task = bar.add_task("sweep", total=total, label="")

            def tick(done: int, n: int, label: str) -> None:
                if label == "resumed":
                    state["resumed"] = done
                bar.update(task, completed=done, total=n, label=label)

            try:
                rows = run_sweep(grid, output, backend=backend, jobs=jobs, address=address, progress=tick)
            except KeyboardInterrupt:
                err.print(f"{len(read_done(output, grid))} of {total} points are in {output}; run the same "
                          f"command again to resume", highlight=False, soft_wrap=True)
                raise
        seconds = time.monotonic() - start
        out.print(f"{total} points ({total - state['resumed']} planned, {state['resumed']} already in the file) "
                  f"in {seconds:.1f} s on the {backend} backend -> {output}", highlight=False)
        if plot and rows:
            stem = output.name[: -len(output.suffix)] if output.suffix else output.name
            paths = plots.save(sweep_figure(grid, rows), output.parent, stem)
            out.print(f"plot: {', '.join(str(p) for p in paths)}", highlight=False)

    _guard(work)
