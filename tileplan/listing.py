"""`tileplan arch list` and `tileplan zoo list`, answered without building the command-line app.

typer (about 0.1 s of imports; 0.29 and later also pydantic, 0.15 s more) and the app importing
every command module are not needed by commands that take no arguments: the console script
(``tileplan.entry``) answers them here directly (:func:`quick`), and the app's own commands print the
same lines (``cli.info_cmd``). tests/test_cli_startup.py checks that both ways print the same text
and that the quick way imports neither typer nor the accelerator schema.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence


def arch_lines() -> list[str]:
    """One line (rich markup) per shipped accelerator preset: its name and description, read without
    validating the preset (``tileplan.presets``)."""
    from tileplan.presets import preset_description, preset_names

    return [f"[bold]{name:12s}[/] {preset_description(name)}" for name in preset_names()]


def zoo_lines() -> list[str]:
    """One line (rich markup) per built-in network: layers, GMACs and millions of weights (each
    network is built: 0.04 s for all of them)."""
    from tileplan.workload import zoo

    lines = []
    for name in zoo.names() + zoo.transformer_names():
        net = zoo.get(name)
        lines.append(f"[bold]{name:22s}[/] {len(net):4d} layers  {net.macs / 1e9:7.3f} GMACs  "
                     f"{net.params / 1e6:7.2f} M weights")
    return lines


#: The commands :func:`quick` answers: arguments -> their lines.
QUICK: dict[tuple[str, ...], Callable[[], list[str]]] = {("arch", "list"): arch_lines, ("zoo", "list"): zoo_lines}


def quick(argv: Sequence[str]) -> int | None:
    """Answer ``tileplan ARGV`` when it is one of :data:`QUICK` (exit code 0); None otherwise (the
    command line proper runs it). Output goes through a rich console as the app's does (same width
    rule: the terminal's, else ``COLUMNS``, else 200 columns)."""
    lines = QUICK.get(tuple(argv))
    if lines is None:
        return None
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "200")), emoji=False)
    for line in lines():
        console.print(line, highlight=False)
    return 0
