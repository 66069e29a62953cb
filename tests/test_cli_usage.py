"""Everyday use: every option has help text, bench measures each row on its own, the README's
commands run as shown."""

from __future__ import annotations

import resource

import pytest
import typer.main

from tileplan.bench import in_fresh_process
from tileplan.cli import app
from tileplan.errors import TileplanError


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


def _peak_after_allocating(mib: int) -> int:
    block = bytearray(mib << 20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def test_each_measurement_starts_from_a_fresh_peak() -> None:
    big = in_fresh_process(_peak_after_allocating, 200)
    small = in_fresh_process(_peak_after_allocating, 1)
    assert big >= 200 and small < big - 150  # not a running maximum


def _fail() -> None:
    raise TileplanError("no such network")


def test_errors_of_a_measurement_come_back() -> None:
    with pytest.raises(TileplanError, match="no such network"):
        in_fresh_process(_fail)
