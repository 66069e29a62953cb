"""Reading Timeloop's ``timeloop-mapper.stats.txt``: per level and data space, the scalar reads, fills
and updates summed over the utilised instances, and the MAC's computes and cycles.

>>> text = '''=== mac ===
...     STATS
...     Computes (total)        : 100
...     Cycles                  : 10
... === buf ===
...     STATS
...     Inputs:
...         Utilized instances (max)                 : 2
...         Scalar reads (per-instance)              : 7
...         Scalar fills (per-instance)              : 3
...         Scalar updates (per-instance)            : 0
... Networks
... '''
>>> s = parse_stats(text)
>>> s.computes, s.cycles, s.counts[("buf", "Inputs")]
(100, 10, {'reads': 14, 'fills': 6, 'updates': 0})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tileplan.errors import ConfigError

_FIELDS = {"Scalar reads (per-instance)": "reads", "Scalar fills (per-instance)": "fills",
           "Scalar updates (per-instance)": "updates"}


@dataclass
class TimeloopStats:
    """Totals over instances: ``counts[(level, data space)] = {reads, fills, updates}`` (words)."""

    computes: int = 0
    cycles: int = 0
    counts: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    mac_energy_pj: float = 0.0  # the compute unit's total
    energy_pj: dict[tuple[str, str], float] = field(default_factory=dict)  # total per level and data space
    access_pj: dict[tuple[str, str], float] = field(default_factory=dict)  # per scalar access
    block_words: dict[str, int] = field(default_factory=dict)  # words per vector access, per level


def parse_stats(text: str, source: str = "stats.txt") -> TimeloopStats:
    """Parse the per-level part of a stats file (up to its ``Networks`` section)."""
    out = TimeloopStats()
    level = space = None
    instances = 1
    per: dict[str, int] = {}

    def flush() -> None:
        if level and space and per:
            out.counts[(level, space)] = {k: v * instances for k, v in per.items()}

    for raw in text.splitlines():
        line = raw.strip()
        if raw.startswith("Networks"):
            break
        head = re.fullmatch(r"=== (\S+) ===", line)
        if head:
            flush()
            level, space, per = head.group(1), None, {}
            continue
        if line in ("Weights:", "Inputs:", "Outputs:"):
            flush()
            space, per, instances = line[:-1], {}, 1
            continue
        if ":" not in line:
            continue
        key, _, value = (p.strip() for p in line.partition(":"))
        if level == "mac" and key in ("Computes (total)", "Cycles"):
            setattr(out, "computes" if key.startswith("Computes") else "cycles", int(float(value)))
        elif level and not space and key == "Block size":
            out.block_words[level] = int(float(value))
        elif level == "mac" and key == "Energy (total)":
            out.mac_energy_pj = float(value.split()[0])
        elif space and level and key in ("Energy (total)", "Energy (per-scalar-access)"):
            (out.energy_pj if key == "Energy (total)" else out.access_pj)[(level, space)] = float(value.split()[0])
        elif space and key == "Utilized instances (max)":
            instances = int(float(value))
        elif space and key in _FIELDS:
            per[_FIELDS[key]] = int(float(value))
    flush()
    if not out.counts or not out.computes:
        raise ConfigError(f"{source}: no per-level statistics found (is this a timeloop-mapper.stats.txt?)")
    return out


def load_stats(path: str | Path) -> TimeloopStats:
    """Read a Timeloop stats file."""
    try:
        return parse_stats(Path(path).read_text(encoding="utf-8"), str(path))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror})") from None
