"""``bench``'s peak memory is the process tree's: children that each hold a known number of bytes at
the same time add up (``getrusage``'s per-process maxima, the old figure, see only the largest one).

The measuring process is a fresh interpreter, so its own resident set is small and known."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileplan.bench_memory import TreePeak, rss_bytes

MIB = 2**20
HOLD = 96 * MIB  # each child writes every page of a block this large and holds it

MEASURE = f"""
import json, os, subprocess, sys, time
from tileplan.bench_memory import TreePeak, rss_bytes, rusage_peak_bytes, tree_pids
CHILD = ("block = bytearray({HOLD})\\n"
         "for i in range(0, len(block), 4096):\\n"
         "    block[i] = 1\\n"
         "print('ready', flush=True)\\n"
         "import sys; sys.stdin.read()\\n")
own = rss_bytes(os.getpid())
with TreePeak(interval_s=0.005, rescan_s=0.02) as peak:
    kids = [subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    for kid in kids:
        assert kid.stdout.readline() == "ready\\n"
    listed = all(kid.pid in tree_pids(os.getpid()) for kid in kids)
    time.sleep(0.1)
    for kid in kids:
        kid.stdin.close()
        kid.wait()
print(json.dumps({{"own": own, "tree": peak.bytes, "sampled": peak.sampled_bytes, "listed": listed,
                  "per_process": rusage_peak_bytes()}}))
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux's /proc")


def test_peak_adds_up_children_alive_together() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, env=env, timeout=120,
                          check=True)
    got = json.loads(done.stdout)
    assert got["listed"]  # both children found as descendants
    # Both blocks were resident at once, beside the measuring process: the tree's peak holds all three.
    assert got["sampled"] >= got["own"] + 2 * HOLD
    assert got["tree"] == max(got["sampled"], got["per_process"])
    # getrusage's maxima (the figure bench printed before): one child's block plus a little, far less.
    assert got["per_process"] < got["own"] + 2 * HOLD <= got["tree"]


def test_peak_of_this_process_alone_is_at_least_its_resident_set() -> None:
    with TreePeak() as peak:
        block = bytearray(HOLD)
        block[::4096] = b"\x01" * len(range(0, HOLD, 4096))
        now = rss_bytes(os.getpid())
    assert now >= HOLD
    assert peak.sampled_bytes >= now
