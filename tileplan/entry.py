"""The ``tileplan`` console script. It installs the Ctrl-C handling before anything heavy is imported,
so an interrupt at any moment (even while numpy or the command modules load) ends with "interrupted"
and exit code 130, never a traceback."""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """First Ctrl-C: stop the work (``KeyboardInterrupt``); later ones are ignored so they cannot
    break the clean-up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> None:
    """Console entry point: ``tileplan ...``."""
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        from tileplan.cli import run
        code = run()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
