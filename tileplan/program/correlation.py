"""Model versus measurement (e-PlaNNer Fig. 6.3): per-layer modelled and measured times and their
Pearson correlation coefficient. The thesis reports 0.64 against a Jetson TX2; what matters for a
planner is that the model ranks plans as the hardware does, not its absolute accuracy.

>>> round(pearson([1.0, 2.0, 3.0, 4.0], [2.0, 4.1, 5.9, 8.0]), 4)
0.9995
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tileplan.errors import TileplanError
from tileplan.plan import NetworkPlan


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation coefficient of paired samples (``nan`` when either is constant)."""
    if len(x) != len(y) or len(x) < 2:
        raise TileplanError(f"correlation needs at least two paired values, got {len(x)} and {len(y)}")
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan


@dataclass(frozen=True)
class Correlation:
    """Paired per-layer times (seconds) and their Pearson coefficient."""

    layers: tuple[str, ...]
    modelled_s: tuple[float, ...]
    measured_s: tuple[float, ...]
    pearson: float
    unmatched: tuple[str, ...]  # measured layers the plan does not have

    def rows(self) -> list[dict[str, object]]:
        return [{"layer": n, "modelled_s": m, "measured_s": t}
                for n, m, t in zip(self.layers, self.modelled_s, self.measured_s, strict=True)]


def read_measured(path: str | Path) -> dict[str, float]:
    """``layer,seconds`` rows (a header naming those two columns; other columns are ignored)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TileplanError(f"cannot read measurements {path}: {err}") from None
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or not {"layer", "seconds"} <= set(reader.fieldnames):
        raise TileplanError(f"{path}: the CSV needs a header with columns 'layer' and 'seconds'")
    out: dict[str, float] = {}
    for i, row in enumerate(reader, start=2):
        try:
            value = float(row["seconds"])
        except (TypeError, ValueError):
            raise TileplanError(f"{path} line {i}: seconds {row['seconds']!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise TileplanError(f"{path} line {i}: seconds must be a finite non-negative number")
        out[row["layer"]] = value
    return out


def measured_csv(measured: dict[str, float]) -> str:
    """The CSV :func:`read_measured` reads."""
    return "layer,seconds\n" + "".join(f"{k},{v:.9g}\n" for k, v in measured.items())


def correlate(plan: NetworkPlan, measured: dict[str, float]) -> Correlation:
    """Pair every measured layer with the plan's modelled latency (cycles / clock) and correlate."""
    by_name = {lp.name: lp for lp in plan.layers}
    names = [n for n in measured if n in by_name]
    unmatched = tuple(n for n in measured if n not in by_name)
    if len(names) < 2:
        raise TileplanError(f"only {len(names)} measured layer(s) are in plan {plan.network!r} on {plan.arch}; "
                            f"the CSV's 'layer' column must name the plan's layers")
    modelled = tuple(by_name[n].cost.latency_cycles / plan.clock_hz for n in names)
    times = tuple(measured[n] for n in names)
    return Correlation(tuple(names), modelled, times, pearson(modelled, times), unmatched)
