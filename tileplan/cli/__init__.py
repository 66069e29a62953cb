"""The ``tileplan`` command. It parses arguments, calls ``tileplan.api``, renders and writes files;
errors become one line on stderr and a non-zero exit. One module per command group."""

from __future__ import annotations

import os
from collections.abc import Sequence

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


def run(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv`` without the program name; default ``sys.argv[1:]``) and return
    its exit code. Usage errors and unexpected failures are one line on stderr, never a traceback
    (set ``TILEPLAN_DEBUG=1`` to see the traceback of an unexpected failure)."""
    Stopped.last_signum = 0  # a stop signal of an earlier run in this process says nothing about this one
    try:
        code = app(args=list(argv) if argv is not None else None, prog_name="tileplan", standalone_mode=False)
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
