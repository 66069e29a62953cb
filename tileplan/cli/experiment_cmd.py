"""`tileplan experiment NAME`: a paper's experiments as CSV tables, PNG/SVG plots and summary.md."""

from __future__ import annotations

from pathlib import Path

import typer

from tileplan.cli.app import JOBS_HELP, _compile_note, _guard, app, err, out
from tileplan.errors import TileplanError


@app.command()
def experiment(
    name: str = typer.Argument(..., help="Experiment (paper) name, or `list` to see them."),
    output: Path | None = typer.Option(None, "--output", "-o",
                                       help="Folder for the CSVs, plots and summary.md (default: results/NAME)."),
    quick: bool = typer.Option(False, "--quick", help="A reduced run (what the tests run)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help=JOBS_HELP),
    paper_formulas: bool = typer.Option(False, "--paper-formulas",
                                        help="Also the paper's printed formulas where they differ from the model "
                                             "(ye: Eq. 1-9 beside the faithful counts)."),
) -> None:
    """Run a paper's experiments: our numbers next to the paper's, every difference over 10 % explained."""
    from tileplan import experiments
    from tileplan.experiments.common import write_result
    from tileplan.report.files import check_output_folder

    def work() -> None:
        if name == "list":
            for key, title in experiments.describe().items():
                out.print(f"[bold]{key:10s}[/] {title}", highlight=False)
            return
        if name not in experiments.names():
            raise TileplanError(f"unknown experiment {name!r}; choose one of: "
                                f"{', '.join(experiments.names()) or 'none yet'}")
        folder = output if output is not None else Path("results") / name
        check_output_folder(folder)
        _compile_note()
        with err.status(f"experiment {name}", spinner="dots") as status:
            result = experiments.run(name, quick=quick, jobs=jobs, paper_formulas=paper_formulas,
                                     log=lambda msg: status.update(f"experiment {name}: {msg}"))
        paths = write_result(result, folder)
        unexplained = result.unexplained()
        out.print(f"wrote {len(paths)} files to {folder} ({len(result.comparisons)} paper numbers compared, "
                  f"{sum(c.differs for c in result.comparisons)} differ by over 10 %, "
                  f"{len(unexplained)} unexplained)", highlight=False)

    _guard(work)
