"""The ``tileplan`` command. It parses arguments, calls ``tileplan.api``, renders and writes files;
errors become one line on stderr and a non-zero exit. One module per command group."""

from __future__ import annotations

import sys

from tileplan.cli import (  # noqa: F401  (importing a command module registers its commands)
    bench_cmd,
    compare_cmd,
    experiment_cmd,
    info_cmd,
    plan_cmd,
    program_cmd,
)
from tileplan.cli.app import app, err
from tileplan.errors import TileplanError

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point."""
    try:
        app()
    except TileplanError as exc:  # pragma: no cover - commands guard themselves
        err.print(f"error: {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
