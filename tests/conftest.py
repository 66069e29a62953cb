import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

if "PYTEST_XDIST_WORKER" in os.environ:
    # pytest-xdist gives its workers COLUMNS=80 (the controller's terminal); captured command output is
    # as wide as piped output of a plain run (``cli.app``: COLUMNS, else 200), so tables keep one row per layer.
    os.environ["COLUMNS"] = "200"
