"""`tileplan report`: a self-contained HTML page of one plan."""

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
def report(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    psum_bytes: int | None = typer.Option(None, "--psum-bytes", min=1, max=8, help=PSUM_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="The HTML file to write."),
    objective: str = typer.Option("latency", "--objective", help="latency | energy | edp | dram | perf-per-byte"),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help="Search strategy (as for `tileplan plan`)."),
    batch: int = typer.Option(1, "--batch", "-b", min=1, help="Batch size."),
    seq: int | None = typer.Option(None, "--seq", help=SEQ_HELP),
    kv: int | None = typer.Option(None, "--kv", help=KV_HELP),
    budget: int | None = typer.Option(None, "--budget", help=BUDGET_HELP),
    seed: int | None = typer.Option(None, "--seed", help=SEED_HELP),
    skip_unsupported: bool = typer.Option(False, "--skip-unsupported",
                                          help="Pass unsupported ONNX operators through with a warning."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help=JOBS_HELP),
    fuse: bool = typer.Option(False, "--fuse", help="Also fuse groups of layers (`plan --fuse`) and report the "
                              "groups with their DRAM saving."),
    max_group: int | None = typer.Option(None, "--max-group", min=2,
                                         help=MAX_GROUP_HELP + " Default 4."),
) -> None:
    """Plan MODEL and write one self-contained HTML page: summary, machine, a sortable per-layer table,
    the figures, fusion groups, the gap to the lower bounds and warnings (no network access needed)."""
    check_names((strategy,), objective, sampling=(("--budget", budget), ("--seed", seed)))
    from tileplan import api
    from tileplan.cli.guards import check_flags, check_outputs
    from tileplan.report.files import write_text_atomic
    from tileplan.report.html import build_report

    draws = DEFAULT_BUDGET if budget is None else budget  # candidates of a sampling strategy
    draw_seed = 0 if seed is None else seed

    def work() -> None:
        api.check_options(strategy=strategy, objective=objective, budget=draws, seed=draw_seed, batch=batch, fuse=fuse)
        check_flags([strategy], fuse=fuse, max_group=max_group)
        check_outputs([("--output", output)], model=model, arch=arch)
        machine = api.load_arch(arch, machine_sets(sets, psum_bytes))
        network = api.load_network(model, batch=batch, skip_unsupported=skip_unsupported, seq=seq, kv=kv)
        with _progress() as bar:
            task = bar.add_task("planning", total=None, label="")

            def tick(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, label=label)

            if fuse:
                fused = api.plan_fused(network, machine, strategy=strategy, objective=objective, batch=batch,
                                       budget=draws, seed=draw_seed, jobs=jobs, max_group=max_group or 4, progress=tick)
                result = fused.base
            else:
                fused = None
                result = api.plan(network, machine, strategy=strategy, objective=objective, batch=batch,
                                  budget=draws, seed=draw_seed, jobs=jobs, progress=tick)
        write_text_atomic(output, build_report(result, machine, network, overrides=machine_sets(sets, psum_bytes),
                                               fused_plan=fused))
        latency, dram = (fused.latency_cycles, fused.dram_bytes) if fused else (result.latency_cycles,
                                                                                 result.dram_bytes)
        groups = f", {len(fused.groups)} fused groups" if fused else ""
        out.print(f"wrote {output} ({len(result.layers)} layers{groups}, latency "
                  f"{latency / machine.clock_hz * 1e3:.3f} ms, DRAM {dram / 1e6:.3f} MB)", highlight=False)

    _guard(work)
