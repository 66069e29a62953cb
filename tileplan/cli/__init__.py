"""The ``tileplan`` command. It parses arguments, calls ``tileplan.api``, renders and writes files;
errors become one line on stderr and a non-zero exit. One module per command group."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from tileplan.cli import (  # noqa: F401  (importing a command module registers its commands)
    bench_cmd,
    compare_cmd,
    correlate_cmd,
    experiment_cmd,
    info_cmd,
    plan_cmd,
    program_cmd,
    report_cmd,
    sweep_cmd,
)
from tileplan.cli.app import app, err, interrupt_reported, one_line, out
from tileplan.errors import Stopped, stop_exit_code

__all__ = ["app", "run"]


def _one_line(message: str) -> None:
    one_line(" ".join(message.split()))


def _command_app(args: list[str]) -> tuple[typer.Typer, str, list[str]]:
    """The app to run ``args`` with, its program name and its arguments: for a top-level command
    (``plan ...``) an app of that command alone, named ``tileplan plan``, so that typer builds that
    command's options only, not every command's (0.02-0.03 CPU-s); it parses, helps and fails exactly
    as the whole app's command does (its usage line, errors and ``--help`` name ``tileplan plan``).
    Anything else (a group such as ``arch``, an option, an unknown name) runs the whole app."""
    if args and not args[0].startswith("-"):
        for info in app.registered_commands:
            if info.callback is not None and (info.name or info.callback.__name__.lower().replace("_", "-")) == args[0]:
                one = typer.Typer(add_completion=False, rich_markup_mode=None)
                one.registered_commands = [info]
                return one, f"tileplan {args[0]}", args[1:]
    return app, "tileplan", args


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv`` without the program name; default ``sys.argv[1:]``) and return
    its exit code. Usage errors and unexpected failures are one line on stderr, never a traceback
    (set ``TILEPLAN_DEBUG=1`` to see the traceback of an unexpected failure)."""
    Stopped.last_signum = 0  # a stop signal of an earlier run in this process says nothing about this one
    args = list(argv) if argv is not None else sys.argv[1:]
    target, prog, rest = _command_app(args)
    try:
        code = target(args=rest, prog_name=prog, standalone_mode=False)
    except Exception as exc:
        usage = getattr(exc, "format_message", None)
        if usage is not None and hasattr(exc, "exit_code"):  # click's usage errors (bad option or value)
            if type(exc).__name__ == "NoArgsIsHelpError":
                out.print(usage(), highlight=False, markup=False)
                return 0
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            _one_line(f"{usage()}{hint}")
            return int(exc.exit_code)
        if os.environ.get("TILEPLAN_DEBUG"):
            raise
        _one_line(f"internal error {type(exc).__name__}: {exc} (please report it; TILEPLAN_DEBUG=1 shows the "
                  f"traceback)")
        return 1
    if code == 130 and not interrupt_reported():  # Ctrl-C outside a command's guard (typer's 130)
        err.print("interrupted", highlight=False)
        code = stop_exit_code()  # 143 / 129 when it was SIGTERM / SIGHUP
    return code if isinstance(code, int) else 0
