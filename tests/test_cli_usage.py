"""Everyday use: every option has help text."""

from __future__ import annotations

import typer.main

from tileplan.cli import app


def _commands(command: object, path: list[str]):
    subs = getattr(command, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _commands(sub, path + [name])
    else:
        yield " ".join(path), command


def test_every_option_has_help() -> None:
    missing = [f"{path} {p.name}" for path, cmd in _commands(typer.main.get_command(app), ["tileplan"])
               for p in cmd.params if not getattr(p, "help", None)]
    assert missing == []
