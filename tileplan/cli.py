"""The ``tileplan`` command. It parses arguments, calls ``tileplan.api``, renders and writes files;
errors become one line on stderr and a non-zero exit."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tileplan import api
from tileplan.errors import TileplanError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Plan, cost and verify CNN layers on memory-constrained accelerators.")
arch_app = typer.Typer(no_args_is_help=True, help="Accelerator presets.")
zoo_app = typer.Typer(no_args_is_help=True, help="Built-in networks.")
app.add_typer(arch_app, name="arch")
app.add_typer(zoo_app, name="zoo")

# Piped or captured output is not wrapped at 80 columns: tables stay one row per layer.
_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "200"))
out = Console(width=_WIDTH)
err = Console(stderr=True, width=_WIDTH)
F = TypeVar("F", bound=Callable[..., Any])

ARCH_HELP = "Preset name (see `tileplan arch list`), YAML file, or e-PlaNNer JSON file."
MODEL_HELP = "Zoo network name (see `tileplan zoo list`) or an .onnx file."


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def _guard(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except TileplanError as exc:
        _fail(str(exc).replace("\n", "; "))
    except KeyboardInterrupt:
        _fail("interrupted")
    return None


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[label]}"), console=err, transient=True,
                    disable=not err.is_terminal)


@app.command()
def plan(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    objective: str = typer.Option("latency", "--objective", "-o", help="latency | energy | edp | dram"),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help="exhaustive | random"),
    batch: int = typer.Option(1, "--batch", "-b", min=1, help="Batch size."),
    budget: int = typer.Option(20_000, help="Candidates for sampling strategies."),
    seed: int = typer.Option(0, help="Seed for sampling strategies."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Search every layer, even identical ones."),
    skip_unsupported: bool = typer.Option(False, "--skip-unsupported",
                                          help="Pass unsupported ONNX operators through with a warning."),
    all_layers: bool = typer.Option(False, "--all", help="Show layers that reuse an identical layer's plan."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Search processes (default: every CPU)."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the plan as JSON."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write one CSV row per layer."),
) -> None:
    """Find the best mapping of every layer of MODEL and print a per-layer table with totals."""
    from tileplan.report.files import write_text_atomic
    from tileplan.report.tables import plan_csv, plan_table

    def work() -> None:
        if objective not in ("latency", "energy", "edp", "dram"):
            raise TileplanError(f"unknown objective {objective!r}; choose latency, energy, edp or dram")
        for target in (json_path, csv_path):  # fail before a long search, not after it
            if target is not None and not target.resolve().parent.is_dir():
                raise TileplanError(f"cannot write {target}: folder {target.parent} does not exist")
        network = api.load_network(model, batch=batch, skip_unsupported=skip_unsupported)
        with _progress() as bar:
            task = bar.add_task("planning", total=None, label="")

            def tick(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, label=label)

            result = api.plan(network, arch, strategy=strategy, objective=objective, budget=budget, seed=seed,
                              cache=not no_cache, jobs=jobs, progress=tick)
        out.print(plan_table(result, network, show_cached=all_layers))
        cached = len(result.layers) - result.searched_layers
        out.print(f"latency {result.latency_cycles:,.0f} cycles = {result.latency_s * 1e3:.3f} ms, "
                  f"DRAM {result.dram_bytes / 1e6:.3f} MB, energy {result.energy_pj / 1e6:.3f} uJ; "
                  f"{result.searched_layers} of {len(result.layers)} layers searched "
                  f"({cached} reused an identical layer's plan or move no data; * marks reuse)")
        if json_path:
            write_text_atomic(json_path, result.to_json())
        if csv_path:
            write_text_atomic(csv_path, plan_csv(result))

    _guard(work)


@app.command("eval")
def eval_cmd(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    layer: str = typer.Option(..., "--layer", "-l", help="Layer name (see `tileplan zoo show MODEL`)."),
    mapping: Path = typer.Option(..., "--mapping", "-m", help="Mapping JSON (as written by `plan --json`)."),
    json_out: bool = typer.Option(False, "--json", help="Print the cost breakdown as JSON."),
) -> None:
    """Cost one given mapping of one layer (model mode), with a clear error if it is invalid."""
    from dataclasses import asdict

    from tileplan.mapping import Mapping

    def work() -> None:
        network = api.load_network(model)
        target = network[layer]
        try:
            text = mapping.read_text()
        except OSError as exc:
            raise TileplanError(f"cannot read mapping file {mapping}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TileplanError(f"mapping file {mapping} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
        if isinstance(data, dict) and "layers" in data:  # a whole plan: take this layer's mapping
            match = [lp for lp in data["layers"] if lp["name"] == layer and lp.get("mapping")]
            if not match:
                raise TileplanError(f"plan file {mapping} has no mapping for layer {layer!r}")
            m = Mapping.from_dict(match[0]["mapping"], dims=target.dims)
        else:
            m = Mapping.from_json(text, dims=target.dims)
        cost = api.evaluate(target, arch, m)
        if json_out:
            out.print_json(json.dumps(asdict(cost)))
            return
        out.print(str(m))
        for key, value in asdict(cost).items():
            out.print(f"{key:28s} {value:,.2f}" if isinstance(value, float) else f"{key:28s} {value}")

    _guard(work)


@arch_app.command("list")
def arch_list() -> None:
    """List the shipped accelerator presets."""
    from tileplan import arch as arch_mod

    for name in arch_mod.preset_names():
        a = arch_mod.load(name)
        out.print(f"[bold]{name:12s}[/] {a.description}", highlight=False)


@arch_app.command("show")
def arch_show(name: str = typer.Argument(..., help=ARCH_HELP),
              yaml_out: bool = typer.Option(False, "--yaml", help="Print the YAML description.")) -> None:
    """Show one accelerator."""
    from tileplan.arch.load import preset_names, preset_path
    from tileplan.report.tables import arch_table

    def work() -> None:
        a = api.load_arch(name)
        if yaml_out:
            source = preset_path(name) if name in preset_names() else Path(name)
            out.print(source.read_text(), highlight=False, markup=False)
        else:
            out.print(arch_table(a))

    _guard(work)


@zoo_app.command("list")
def zoo_list() -> None:
    """List the built-in networks."""
    from tileplan.workload import zoo

    for name in zoo.names():
        net = zoo.get(name)
        out.print(f"[bold]{name:14s}[/] {len(net):4d} layers  {net.macs / 1e9:7.3f} GMACs  "
                  f"{net.params / 1e6:7.2f} M weights", highlight=False)


@zoo_app.command("show")
def zoo_show(name: str = typer.Argument(..., help=MODEL_HELP),
             batch: int = typer.Option(1, "--batch", "-b", min=1)) -> None:
    """Show a network layer by layer (shapes, kernel, MACs, bytes at 1 byte per element)."""
    from tileplan.report.tables import network_table
    from tileplan.workload import zoo

    def work() -> None:
        net = api.load_network(name, batch=batch)
        out.print(network_table(net, zoo.summary_rows(net)))

    _guard(work)


@zoo_app.command("export")
def zoo_export(name: str = typer.Argument(..., help="Zoo network name."),
               path: Path = typer.Argument(..., help="Output .onnx file."),
               batch: int = typer.Option(1, "--batch", "-b", min=1)) -> None:
    """Write a zoo network as an ONNX graph (zero weights; onnx.checker passes)."""
    from tileplan.workload.onnx_export import export_onnx

    def work() -> None:
        export_onnx(api.load_network(name, batch=batch), path)
        out.print(f"wrote {path}")

    _guard(work)


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
    from tileplan.report.files import write_text_atomic

    def work() -> None:
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


def _plan_for(model: str, arch: str, strategy: str, objective: str, layer: str | None) -> tuple[Any, Any, Any]:
    """Plan MODEL (or only LAYER of it) and return (network, arch, plan)."""
    network = api.load_network(model)
    a = api.load_arch(arch)
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
    layer: str | None = typer.Option(None, "--layer", "-l", help="Only this layer (then -o is a file)."),
    target: str = typer.Option("ir", "--target", "-t", help="ir (e-PlaNNer text) | c (C99 program)"),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s"),
    objective: str = typer.Option("latency", "--objective", "-o"),
    output: Path = typer.Option(..., "--output", help="File (with --layer) or folder for every layer."),
) -> None:
    """Write the execution program of the planned mapping of one layer or of every layer."""
    from tileplan.program import generate_program, write_c, write_ir

    def work() -> None:
        if target not in ("ir", "c"):
            raise TileplanError(f"unknown target {target!r}; choose ir or c")
        network, a, result = _plan_for(model, arch, strategy, objective, layer)
        write = write_ir if target == "ir" else write_c
        if layer is None:
            output.mkdir(parents=True, exist_ok=True)
        written = 0
        for lp in result.layers:
            if lp.mapping is None:
                continue
            program = generate_program(network[lp.name].with_precision(_prec(a)), a, lp.mapping)
            path = output if layer is not None else output / f"{lp.name}.{'ir' if target == 'ir' else 'c'}"
            write(program, path)
            written += 1
        out.print(f"wrote {written} program(s) to {output}")

    _guard(work)


def _prec(a: Any) -> Any:
    from tileplan.workload.layer import Precision

    return Precision.uniform(a.precision_bytes)


@app.command()
def verify(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    layer: str | None = typer.Option(None, "--layer", "-l", help="Only this layer."),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s"),
    objective: str = typer.Option("latency", "--objective", "-o"),
    seed: int = typer.Option(0, help="Seed of the random integer operands."),
) -> None:
    """Plan, emit, execute and check every distinct layer: bit-exact output, and the DRAM bytes and
    bursts the program moved equal to what the model predicted."""
    from rich.table import Table

    from tileplan.program import verify_layer

    def work() -> None:
        network, a, result = _plan_for(model, arch, strategy, objective, layer)
        todo = [lp for lp in result.layers if lp.mapping is not None and lp.cached_from is None]
        table = Table(title=f"verify {network.name} on {a.name}")
        for c in ("layer", "bytes predicted", "bytes counted", "bursts predicted", "bursts counted",
                  "instructions", "result"):
            table.add_column(c, justify="left" if c in ("layer", "result") else "right")
        failed = 0
        with _progress() as bar:
            task = bar.add_task("verifying", total=len(todo), label="")
            for i, lp in enumerate(todo):
                bar.update(task, completed=i, label=lp.name)
                assert lp.mapping is not None
                r = verify_layer(network[lp.name].with_precision(_prec(a)), a, lp.mapping, seed=seed)
                failed += not r.ok
                table.add_row(lp.name, f"{sum(r.predicted_bytes):,}", f"{sum(r.counted_bytes):,}",
                              f"{sum(r.predicted_bursts):,}", f"{sum(r.counted_bursts):,}", f"{r.instructions:,}",
                              "[green]OK[/]" if r.ok else "[red]FAIL[/] " + "; ".join(r.mismatches()))
        out.print(table)
        out.print(f"{len(todo) - failed} of {len(todo)} distinct layers verified"
                  + (f", {failed} FAILED" if failed else ""))
        if failed:
            raise typer.Exit(code=1)

    _guard(work)


@app.command()
def run(program: Path = typer.Argument(..., help="An execution program (.ir) written by `tileplan emit`."),
        seed: int = typer.Option(0, help="Seed of the random integer operands.")) -> None:
    """Execute an IR file on random integers; print the DRAM traffic it moved and check its output."""
    from tileplan.program import read_ir
    from tileplan.program.runner import run_program

    def work() -> None:
        r = run_program(read_ir(program), seed=seed)
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


def main() -> None:
    """Console entry point."""
    try:
        app()
    except TileplanError as exc:  # pragma: no cover - commands guard themselves
        err.print(f"error: {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
