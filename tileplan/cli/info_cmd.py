"""`tileplan arch ...` and `tileplan zoo ...`: presets and built-in networks."""

from __future__ import annotations

from pathlib import Path

import typer

from tileplan.cli.app import ARCH_HELP, MODEL_HELP, SET_HELP, _guard, arch_app, out, zoo_app


@arch_app.command("list")
def arch_list() -> None:
    """List the shipped accelerator presets."""
    from tileplan.listing import arch_lines

    for line in arch_lines():
        out.print(line, highlight=False)


@arch_app.command("show")
def arch_show(name: str = typer.Argument(..., help=ARCH_HELP),
              sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
              yaml_out: bool = typer.Option(False, "--yaml", help="Print the YAML description.")) -> None:
    """Show one accelerator (with --set: as changed by the overrides)."""
    from tileplan import api
    from tileplan.presets import preset_names, preset_path
    from tileplan.report.tables import arch_table

    def work() -> None:
        a = api.load_arch(name, sets or ())
        if yaml_out and sets:
            import yaml

            out.print(yaml.safe_dump(a.to_dict(), sort_keys=False), highlight=False, markup=False)
        elif yaml_out:
            source = preset_path(name) if name in preset_names() else Path(name)
            out.print(source.read_text(), highlight=False, markup=False)
        else:
            out.print(arch_table(a))

    _guard(work)


@zoo_app.command("list")
def zoo_list() -> None:
    """List the built-in networks."""
    from tileplan.listing import zoo_lines

    for line in zoo_lines():
        out.print(line, highlight=False)


@zoo_app.command("show")
def zoo_show(name: str = typer.Argument(..., help=MODEL_HELP),
             batch: int = typer.Option(1, "--batch", "-b", min=1, max=1024, help="Batch size (1 to 1024).")) -> None:
    """Show a network layer by layer (shapes, kernel, MACs, bytes at 1 byte per element)."""
    from tileplan import api
    from tileplan.report.tables import network_table
    from tileplan.workload import zoo

    def work() -> None:
        net = api.load_network(name, batch=batch)
        out.print(network_table(net, zoo.summary_rows(net)))

    _guard(work)


@zoo_app.command("export")
def zoo_export(name: str = typer.Argument(..., help="Zoo network name."),
               path: Path = typer.Argument(..., help="Output .onnx file."),
               batch: int = typer.Option(1, "--batch", "-b", min=1, max=1024, help="Batch size (1 to 1024).")) -> None:
    """Write a zoo network as an ONNX graph (zero weights; onnx.checker passes)."""
    from tileplan import api
    from tileplan.report.files import check_output_file
    from tileplan.workload.onnx_export import export_onnx

    def work() -> None:
        check_output_file(path)
        export_onnx(api.load_network(name, batch=batch), path)
        out.print(f"wrote {path}")

    _guard(work)
