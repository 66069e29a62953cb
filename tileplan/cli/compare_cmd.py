"""`tileplan compare`: several strategies on one network and machine."""

from __future__ import annotations

from pathlib import Path

import typer

from tileplan.cli.app import (
    ARCH_HELP,
    BUDGET_HELP,
    DEFAULT_BUDGET,
    JOBS_HELP,
    KV_HELP,
    MAX_GROUP_HELP,
    MODEL_HELP,
    NO_PRUNE_HELP,
    OBJECTIVE_HELP,
    PSUM_HELP,
    SEED_HELP,
    SEQ_HELP,
    SET_HELP,
    _guard,
    _progress,
    app,
    check_names,
    machine_sets,
    out,
)


@app.command()
def compare(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    psum_bytes: int | None = typer.Option(None, "--psum-bytes", min=1, max=8, help=PSUM_HELP),
    strategies: str = typer.Option("exhaustive,random", "--strategies", "-s",
                                   help="Comma-separated strategies (see `tileplan plan --help`)."),
    objective: str = typer.Option("latency", "--objective", "-o", help=OBJECTIVE_HELP),
    batch: int = typer.Option(1, "--batch", "-b", min=1, max=1024, help="Batch size (1 to 1024)."),
    seq: int | None = typer.Option(None, "--seq", help=SEQ_HELP),
    kv: int | None = typer.Option(None, "--kv", help=KV_HELP),
    budget: int | None = typer.Option(None, "--budget", min=1, max=2**21, help=BUDGET_HELP),
    seed: int | None = typer.Option(None, "--seed", min=0, help=SEED_HELP),
    all_layers: bool = typer.Option(False, "--all", help="Also list layers that move no data."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help=JOBS_HELP),
    json_path: Path | None = typer.Option(None, "--json", help="Write the comparison as JSON."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write one CSV row per layer and strategy."),
    no_prune: list[str] | None = typer.Option(None, "--no-prune", help=NO_PRUNE_HELP),
    max_parallel: int | None = typer.Option(None, "--max-parallel",
                                            help="marvel*: most dimensions that fan out over the PEs (default 3)."),
    min_utilization: float | None = typer.Option(None, "--min-utilization",
                                                 help="marvel*: least fraction of the PEs a step uses (default 0.1)."),
    fuse: bool = typer.Option(False, "--fuse", help="Compare fused plans (`plan --fuse`); rows are then blocks of "
                              "layers that every strategy covers with whole groups."),
    max_group: int | None = typer.Option(None, "--max-group", min=2,
                                         help=MAX_GROUP_HELP + " Default 4."),
) -> None:
    """Plan MODEL with each strategy and print, per layer and in total, latency, DRAM bytes, bursts,
    energy and each strategy's objective relative to the best."""
    check_names(tuple(s.strip() for s in strategies.split(",") if s.strip()), objective,
                sampling=(("--budget", budget), ("--seed", seed)))
    from tileplan import api
    from tileplan.cli.guards import check_flags, check_outputs
    from tileplan.errors import TileplanError
    from tileplan.report.files import write_text_atomic
    from tileplan.report.tables import comparison_table

    draws = DEFAULT_BUDGET if budget is None else budget  # candidates of a sampling strategy
    draw_seed = 0 if seed is None else seed

    def work() -> None:
        api.check_options(objective=objective, budget=draws, seed=draw_seed, batch=batch)
        names = [s.strip() for s in strategies.split(",") if s.strip()]
        if not names:
            raise TileplanError(f"--strategies {strategies!r} names no strategy; give one or more, comma-separated")
        check_flags(names, fuse=fuse, max_group=max_group,
                    marvel_flags=[("--no-prune", no_prune), ("--max-parallel", max_parallel),
                                  ("--min-utilization", min_utilization)],)
        check_outputs([("--json", json_path), ("--csv", csv_path)], model=model, arch=arch)
        options = api.strategy_options(pruning=no_prune or (), max_parallel=max_parallel,
                                       min_utilization=min_utilization)
        machine = api.load_arch(arch, machine_sets(sets, psum_bytes))
        network = api.load_network(model, batch=batch, seq=seq, kv=kv)
        with _progress() as bar:
            task = bar.add_task("planning", total=None, label="")

            def tick(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, label=label)

            result = api.compare(network, machine, names, objective=objective, batch=batch, budget=draws,
                                 seed=draw_seed, jobs=jobs, fuse=fuse, max_group=max_group or 4, options=options,
                                 progress=tick)
        out.print(comparison_table(result, show_all=all_layers))
        for fp in result.fused:
            out.print(f"{fp.base.strategy}: fused groups " + (", ".join(g.name for g in fp.groups) or "none"),
                      highlight=False)
        tot = {r.strategy: r for r in result.totals()}
        out.print(f"best in total: {result.best()}; " + ", ".join(
            f"{s} {tot[s].ratio:.3f}x" for s in result.strategies), highlight=False)
        if json_path:
            write_text_atomic(json_path, result.to_json())
        if csv_path:
            write_text_atomic(csv_path, result.to_csv())

    _guard(work)
