"""The ``tileplan`` console script. Ctrl-C handling is installed first, before the command line's
(heavy) imports, so an early Ctrl-C is as clean as one during a search: "interrupted", exit 130."""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    """First Ctrl-C: stop the work (``KeyboardInterrupt``); later ones are ignored so they cannot
    break the clean-up (cancelling queued work, ending worker processes, removing temp files)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> None:
    """Console entry point: run the command line and exit with its code."""
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        from tileplan.cli import run

        code = run()
    except KeyboardInterrupt:  # before or after a command's own guard
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
