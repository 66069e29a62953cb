import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):  # type: ignore[no-untyped-def]
    config.addinivalue_line("markers", "slow: a bigger run of a property test; runs with -m slow or TILEPLAN_SLOW=1")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    import os

    import pytest

    if os.environ.get("TILEPLAN_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or TILEPLAN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
