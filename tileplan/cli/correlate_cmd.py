"""`tileplan correlate`: the model's per-layer times against measured ones (e-PlaNNer Fig. 6.3)."""

from __future__ import annotations

from pathlib import Path

import typer

from tileplan.cli.app import _guard, app, err, out


@app.command()
def correlate(
    plan: Path = typer.Argument(..., help="A plan written by `tileplan plan --json`."),
    measured: Path | None = typer.Argument(None, help="CSV with columns layer,seconds (measured per layer)."),
    time_c: bool = typer.Option(False, "--time-c", help="Measure instead: compile and time the plan's generated "
                                "C programs on this CPU (best with `--arch cpu-c99` plans)."),
    repeats: int = typer.Option(3, "--repeats", min=1, help="Runs per layer with --time-c (the fastest counts)."),
    plot: Path | None = typer.Option(None, "--plot", help="Write the scatter plot (PNG and SVG next to it)."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write the paired per-layer times."),
) -> None:
    """Pearson correlation between modelled and measured per-layer times (the thesis: 0.64 on a TX2)."""
    from rich.table import Table

    from tileplan import api
    from tileplan.experiments.common import table_csv
    from tileplan.report.files import check_output_file, write_text_atomic
    from tileplan.report.plots import save, scatter

    def work() -> None:
        for target in (plot, csv_path):
            if target is not None:
                check_output_file(target)
        with err.status("correlating", spinner="dots") as status:
            result = api.correlate(plan, measured, time_c=time_c, repeats=repeats,
                                   log=lambda msg: status.update(msg))
        table = Table(title=f"modelled vs measured ({len(result.layers)} layers)")
        for c in ("layer", "modelled s", "measured s"):
            table.add_column(c, justify="left" if c == "layer" else "right")
        for row in result.rows():
            table.add_row(str(row["layer"]), f"{row['modelled_s']:.4g}", f"{row['measured_s']:.4g}")
        out.print(table)
        if result.unmatched:
            out.print(f"not in the plan (ignored): {', '.join(result.unmatched)}")
        out.print(f"Pearson correlation: {result.pearson:.3f} over {len(result.layers)} layers")
        if csv_path is not None:
            write_text_atomic(csv_path, table_csv(result.rows()))
        if plot is not None:
            title = f"model vs measurement (r = {result.pearson:.2f})"
            fig = scatter(result.modelled_s, result.measured_s, title=title, xlabel="modelled time (s)",
                          ylabel="measured time (s)", labels=result.layers)
            save(fig, plot.parent, plot.stem)

    _guard(work)
