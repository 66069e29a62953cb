"""The CLI reference (``docs/cli.md``) generated from the commands' own help: every command's usage
line, description and options exactly as ``tileplan COMMAND --help`` states them.

Run ``python -m tileplan.cli.docgen > docs/cli.md`` (``make docs``) after changing a command; a test
fails while the file is stale."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import typer

HEADER = """# CLI reference

Generated from the commands' own `--help` by `python -m tileplan.cli.docgen > docs/cli.md`
(`make docs`); do not edit by hand: `tests/test_docs.py` fails when this file is stale.
Examples of each command are in the topic pages ([docs/README.md](README.md)).
"""


def _paragraphs(text: str) -> str:
    """A docstring's paragraphs with their lines joined (markdown re-wraps them anyway)."""
    parts = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(p for p in parts if p)


def _cell(text: str) -> str:
    """Text for one markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _is_group(cmd: Any) -> bool:
    return hasattr(cmd, "list_commands")  # typer vendors its own click: duck-typed, not isinstance


def _commands(cmd: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    """``cmd`` and every visible sub-command under it (click command and context objects), depth
    first, in the order ``--help`` lists them."""
    yield cmd, ctx
    if _is_group(cmd):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, sub.context_class(sub, info_name=name, parent=ctx))


def _section(cmd: Any, ctx: Any) -> str:
    path = ctx.command_path
    lines = [f"## {path}", ""]
    if cmd.help:
        lines += [_paragraphs(cmd.help), ""]
    lines += ["```", cmd.get_usage(ctx).strip(), "```", ""]
    if _is_group(cmd):
        subs = [(n, cmd.get_command(ctx, n)) for n in cmd.list_commands(ctx)]
        lines += ["| command | what it does |", "|---|---|"]
        for name, sub in subs:
            if sub is not None and not sub.hidden:
                anchor = f"{path} {name}".replace(" ", "-")
                lines.append(f"| [`{name}`](#{anchor}) | {_cell(sub.get_short_help_str(limit=200))} |")
        return "\n".join(lines) + "\n"
    rows = []
    for param in cmd.get_params(ctx):
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:  # an argument: click shows it in the usage line only
            record = (param.human_readable_name, "")
        names, text = record
        rows.append(f"| `{_cell(names)}` | {_cell(text)} |")
    if rows:
        lines += ["| argument / option | meaning |", "|---|---|", *rows]
    return "\n".join(lines) + "\n"


def render() -> str:
    """The whole reference as markdown."""
    from tileplan.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="tileplan", terminal_width=100, max_content_width=100)
    return HEADER + "".join("\n" + _section(cmd, sub_ctx) for cmd, sub_ctx in _commands(root, ctx))


if __name__ == "__main__":
    sys.stdout.write(render())
