"""`tileplan sweep`: a grid of machines, models, strategies and objectives into one CSV."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from tileplan.cli.app import (
    ARCH_HELP,
    BUDGET_HELP,
    DEFAULT_BUDGET,
    SEED_HELP,
    _guard,
    _progress,
    app,
    check_names,
    err,
    out,
)


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
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Points planned at once (default: "
                                    "$TILEPLAN_JOBS, else every idle CPU)."),
    batch: int = typer.Option(1, "--batch", "-b", min=1, help="Batch size."),
    budget: int | None = typer.Option(None, "--budget", help=BUDGET_HELP),
    seed: int | None = typer.Option(None, "--seed", help=SEED_HELP),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw the objective over the grid next to the CSV."),
) -> None:
    """Plan every point of the grid (machine overrides x models x strategies x objectives), one CSV row
    per point written as it finishes; run the same command again to resume an interrupted sweep."""
    check_names(tuple(s.strip() for s in strategies.split(",") if s.strip()),
                sampling=(("--budget", budget), ("--seed", seed)))
    from tileplan import api
    from tileplan.cli.guards import check_outputs
    from tileplan.errors import TileplanError
    from tileplan.report import plots
    from tileplan.sweep import (
        Sweep,
        check_ray_address,
        check_sweep_file,
        parse_axes,
        read_done,
        run_sweep,
        sweep_figure,
    )

    def names(text: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))

    draws = DEFAULT_BUDGET if budget is None else budget  # candidates of a sampling strategy
    draw_seed = 0 if seed is None else seed

    def work() -> None:
        for flag, text in (("MODELS", models), ("--strategies", strategies), ("--objectives", objectives)):
            if not names(text):
                raise TileplanError(f"{flag} {text!r} names nothing: the sweep would have 0 points; give one or "
                                    f"more, comma-separated")
        for s in names(strategies):
            api.check_options(strategy=s, budget=draws, seed=draw_seed, batch=batch)
        for o in names(objectives):
            api.check_options(objective=o)
        check_outputs([("--output", output)], arch=arch,
                      others=[("the model file", m) for m in names(models)])
        check_sweep_file(output)
        if backend == "ray":
            check_ray_address(address)
        grid = Sweep(api.load_arch(arch), names(models), names(strategies), names(objectives),
                     tuple(parse_axes(sets or ())), budget=draws, seed=draw_seed, batch=batch)
        grid.validate()
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
