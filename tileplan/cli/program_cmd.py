"""`tileplan emit`, `verify` and `run`: execution programs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from tileplan.cli.app import (
    ARCH_HELP,
    KV_HELP,
    MODEL_HELP,
    OBJECTIVE_HELP,
    SEQ_HELP,
    SET_HELP,
    STRATEGY_HELP,
    _guard,
    _progress,
    app,
    check_names,
    out,
)
from tileplan.errors import TileplanError


def _plan_for(model: str, arch: str, sets: list[str] | None, strategy: str, objective: str,
              layer: str | None, seq: int | None = None, kv: int | None = None) -> tuple[Any, Any, Any]:
    """Plan MODEL (or only LAYER of it; a transformer at SEQ tokens / KV cached ones) on ARCH changed by
    SETS and return (network, arch, plan)."""
    from tileplan import api

    network = api.load_network(model, seq=seq, kv=kv)
    a = api.load_arch(arch, sets or ())
    if layer is not None:
        from dataclasses import replace

        from tileplan.workload.network import Network

        network = Network(network.name, (replace(network[layer], inputs=()),), network.input_shape)
    with _progress() as bar:
        task = bar.add_task("planning", total=None, label="")
        result = api.plan(network, a, strategy=strategy, objective=objective,
                          progress=lambda d, t, lab: bar.update(task, completed=d, total=t, label=lab))
    return network, a, result


@app.command()
def emit(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    layer: str | None = typer.Option(None, "--layer", "-l", help="Only this layer (then --output is a file)."),
    target: str = typer.Option("ir", "--target", "-t", help="ir (e-PlaNNer text) | c (C99) | cuda (.cu)"),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help=STRATEGY_HELP),
    objective: str = typer.Option("latency", "--objective", "-o", help=OBJECTIVE_HELP),
    output: Path = typer.Option(..., "--output", help="File (with --layer) or folder for every layer."),
    group: str | None = typer.Option(None, "--group", "-g", help="A fused group, e.g. conv1_1+conv1_2: write "
                                     "its fused program (text, or C99 with --target c) to the --output file."),
    seq: int | None = typer.Option(None, "--seq", help=SEQ_HELP),
    kv: int | None = typer.Option(None, "--kv", help=KV_HELP),
) -> None:
    """Write the execution program of the planned mapping of one layer or of every layer (or of the
    best fused mapping of a group of layers)."""
    check_names((strategy,), objective)
    from tileplan import api
    from tileplan.program import generate_program
    from tileplan.program.files import TARGETS, write_program
    from tileplan.report.files import check_distinct, check_output_file, check_output_folder, make_output_folder

    def work() -> None:
        api.check_options(strategy=strategy, objective=objective)
        check_distinct([("--output", output)], [("the model file", model), ("the accelerator file", arch)])
        if group is not None:
            from tileplan.fusion.transformer_program import generate_group
            from tileplan.report.files import write_text_atomic

            if target not in ("ir", "c"):
                raise TileplanError(f"fused groups are emitted as text (--target ir) or C99 (--target c), not "
                                    f"{target!r}")
            check_output_file(output)
            a = api.load_arch(arch, sets or ())
            fused, res = api.plan_group(model, a, group.split("+"), objective=objective, seq=seq, kv=kv)
            fprog = generate_group(fused, a, res.mapping)
            if target == "c":
                from tileplan.fusion.cgen import emit_fused_c

                write_text_atomic(output, emit_fused_c(fprog))
            else:
                write_text_atomic(output, fprog.text())
            out.print(f"wrote the fused program of {fused.name} ({len(fprog.instructions):,} instructions, "
                      f"{res.mapping.describe(fused)}) to {output}")
            return
        if target not in TARGETS:
            raise TileplanError(f"unknown target {target!r}; choose {', '.join(TARGETS)}")
        if layer is not None:  # checked before the search; an existing file is replaced
            check_output_file(output)
        elif output.exists() and not output.is_dir():
            raise TileplanError(f"cannot write the programs of every layer into {output}: it is a file, not a "
                                f"folder (give a folder, or --layer NAME to write one program to a file)")
        else:
            check_output_folder(output)
        network, a, result = _plan_for(model, arch, sets, strategy, objective, layer, seq, kv)
        if layer is None:
            make_output_folder(output)
        written = 0
        for lp in result.layers:
            if lp.mapping is None:
                continue
            program = generate_program(network[lp.name].with_precision(_prec(a)), a, lp.mapping)
            path = output if layer is not None else output / f"{lp.name}.{TARGETS[target]}"
            write_program(program, path, target, mapping=lp.mapping)
            written += 1
        out.print(f"wrote {written} program(s) to {output}")

    _guard(work)


def _prec(a: Any) -> Any:
    from tileplan.workload.layer import Precision

    return Precision.uniform(a.precision_bytes, a.psum_bytes)


@app.command()
def verify(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    layer: str | None = typer.Option(None, "--layer", "-l", help="Only this layer."),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help=STRATEGY_HELP),
    objective: str = typer.Option("latency", "--objective", "-o", help=OBJECTIVE_HELP),
    seed: int = typer.Option(0, min=0, help="Seed of the random operands (integers; floats for softmax, norms, "
                             "activation functions and rope)."),
    seq: int | None = typer.Option(None, "--seq", help=SEQ_HELP),
    kv: int | None = typer.Option(None, "--kv", help=KV_HELP),
    group: str | None = typer.Option(None, "--group", "-g", help="Verify the best fused mapping of this group "
                                     "of consecutive layers instead, e.g. conv1_1+conv1_2 (searched "
                                     "exhaustively, or as --strategy hwff partitions the PE array)."),
    backend: str = typer.Option("numpy", "--backend", "-b", help="numpy (the Python executor runs each program) | "
                                "c (each program compiled as C99 with cc -lm and run; it counts its own bytes "
                                "and bursts; with --group the fused program's C, on its own deterministic "
                                "operands)."),
) -> None:
    """Plan, emit, execute and check every distinct layer: bit-exact output, and the DRAM bytes and
    bursts the program moved equal to what the model predicted (with --group: one fused group)."""
    check_names((strategy,), objective)
    from rich.markup import escape
    from rich.table import Table

    from tileplan.program import verify_layer

    def work() -> None:
        if backend not in ("numpy", "c"):
            raise TileplanError(f"unknown --backend {backend!r}; choose numpy or c")
        if group is not None:
            if backend == "c" and seed:
                raise TileplanError("a fused group's C program makes its own deterministic operands: drop --seed "
                                    "with --backend c")
            _verify_group(model, arch, sets, group, strategy, objective, seed, seq, kv, backend)
            return
        check = verify_layer
        if backend == "c":
            from tileplan.program.cverify import compiler, verify_layer_c

            compiler()  # no compiler: one line before planning
            check = verify_layer_c
        network, a, result = _plan_for(model, arch, sets, strategy, objective, layer, seq, kv)
        from tileplan.program.errors import ProgramError
        from tileplan.program.generate import has_program

        distinct = [lp for lp in result.layers if lp.cached_from is None and network[lp.name].moves_data]
        streams = sorted({network[lp.name].op.value for lp in distinct if lp.mapping is None})
        todo = [lp for lp in distinct if lp.mapping is not None]
        skipped = sorted({network[lp.name].op.value for lp in todo if not has_program(network[lp.name])})
        todo = [lp for lp in todo if has_program(network[lp.name])]
        table = Table(title=escape(f"verify {network.name} on {a.name}") + (" (C programs)" if backend == "c" else ""))
        for c in ("layer", "bytes predicted", "bytes counted", "bursts predicted", "bursts counted",
                  "instructions", "result"):
            table.add_column(c, justify="left" if c in ("layer", "result") else "right")
        failed = 0
        with _progress() as bar:
            task = bar.add_task("verifying", total=len(todo), label="")
            for i, lp in enumerate(todo):
                bar.update(task, completed=i, label=lp.name)
                assert lp.mapping is not None
                try:
                    r = check(network[lp.name].with_precision(_prec(a)), a, lp.mapping, seed=seed)
                except ProgramError as err:
                    failed += 1
                    table.add_row(lp.name, "", "", "", "", "", f"[red]FAIL[/] {err}")
                    continue
                failed += not r.ok
                table.add_row(lp.name, f"{sum(r.predicted_bytes):,}", f"{sum(r.counted_bytes):,}",
                              f"{sum(r.predicted_bursts):,}", f"{sum(r.counted_bursts):,}", f"{r.instructions:,}",
                              "[green]OK[/]" if r.ok else "[red]FAIL[/] " + "; ".join(r.mismatches()))
        out.print(table)
        out.print(f"{len(todo) - failed} of {len(todo)} distinct layers verified"
                  + (f", {failed} FAILED" if failed else "")
                  + (f" ({', '.join(skipped)} layers have no program yet)" if skipped else "")
                  + (f"; {', '.join(streams)} layers are planned as copy streams without a mapping (not verified)"
                     if streams else ""))
        if failed:
            raise typer.Exit(code=1)

    _guard(work)


def _verify_group(model: str, arch: str, sets: list[str] | None, names: str, strategy: str, objective: str,
                  seed: int, seq: int | None = None, kv: int | None = None, backend: str = "numpy") -> None:
    from rich.markup import escape
    from rich.table import Table

    from tileplan import api
    from tileplan.fusion.transformer_program import verify_group

    if backend == "c":
        from tileplan.program.cverify import compiler

        compiler()  # no compiler: one line before planning
    a = api.load_arch(arch, sets or ())
    with _progress() as bar:
        bar.add_task("searching the fused group", total=None, label=names)
        fused, res = api.plan_group(model, a, names.split("+"), objective=objective, strategy=strategy, seq=seq,
                                    kv=kv)
    with _progress() as bar:
        bar.add_task("executing the fused program" + (" as C" if backend == "c" else ""), total=None, label=names)
        if backend == "c":
            from tileplan.fusion.cverify import verify_group_c

            if fused.is_block:
                raise TileplanError(f"fused group {fused.name} has branches (a block group): its program has no C; "
                                    f"verify it with --backend numpy")
            v = verify_group_c(fused, a, res.mapping)
        else:
            v = verify_group(fused, a, res.mapping, seed=seed)
    table = Table(title=escape(f"verify fused {fused.name} on {a.name}" + (" (C program)" if backend == "c" else "")
                               + f": {res.mapping.describe(fused)}"))
    for c in ("", "input B", "weight B", "output B", "bursts", "MACs"):
        table.add_column(c, justify="left" if not c else "right")
    for label, rd, wr, bu, macs in (("predicted", v.predicted_read_bytes, v.predicted_write_bytes,
                                     v.predicted_bursts, v.predicted_macs),
                                    ("counted", v.counted_read_bytes, v.counted_write_bytes, v.counted_bursts,
                                     v.counted_macs)):
        table.add_row(label, f"{rd[0]:,}", f"{rd[1]:,}", f"{rd[2] + wr:,}", f"{sum(bu):,}", f"{macs:,}")
    out.print(table)
    peaks = ", ".join(f"{name} {b:,} B (model {v.footprint_bytes[name]:,} B)" for name, b in v.peak_bytes.items())
    peaks = f"on-chip peak {peaks}" if peaks else "on-chip occupancy is checked by --backend numpy"
    out.print(f"{v.instructions:,} instructions; {peaks}; output "
              + (("within 1e-9 of the block computed in numpy" if fused.transformer is not None else
                  "bit-exact against the layers run one by one") if v.bit_exact else "[red]DIFFERS[/]")
              + ("; counted traffic and MACs equal the model" if v.ok else "; [red]FAIL[/]")
              + ("" if v.within_footprint else " (the program held more on chip than the model's footprint)"))
    if not v.ok:
        raise typer.Exit(code=1)


@app.command()
def run(program: Path = typer.Argument(..., help="An execution program (.ir) written by `tileplan emit`."),
        seed: int = typer.Option(0, min=0, help="Seed of the random integer operands.")) -> None:
    """Execute an IR file on random integers; print the DRAM traffic it moved and check its output."""
    from tileplan.program import read_ir
    from tileplan.program.errors import ProgramError
    from tileplan.program.runner import run_program

    def work() -> None:
        try:
            r = run_program(read_ir(program), seed=seed)
        except ProgramError as exc:
            if exc.source:
                raise
            raise ProgramError(exc.detail, line=exc.line, source=str(program)) from None
        res = r.result
        out.print(f"layer {r.layer.name} ({r.layer.op.value} {r.layer.shape_str()}), {res.instructions:,} "
                  f"instructions")
        for name, b, bu, al in zip(("input", "weight", "output"), res.bytes_by_operand, res.bursts,
                                   res.aligned_bursts, strict=True):
            out.print(f"  {name:7s} {b:>12,} B  {bu:>9,} bursts  {al:>9,} aligned blocks")
        out.print("output matches the direct reference" if r.bit_exact else "[red]output DIFFERS from the reference[/]")
        if not r.bit_exact:
            raise typer.Exit(code=1)

    _guard(work)
