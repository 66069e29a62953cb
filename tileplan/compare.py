"""Strategy comparison: the same network on the same accelerator planned by several strategies.

Built by :func:`tileplan.api.compare`; the CLI renders it (``tileplan compare``). Units: cycles, bytes,
bursts, pJ. ``ratio`` is a strategy's value of the objective over the best strategy's on that row
(1.0 = the best; the network row compares network totals, where EDP is total energy x total latency,
see ``Objective.combine``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from typing import Any

from tileplan.plan import NetworkPlan
from tileplan.search.objective import Objective

#: Metrics every row reports, in table order.
METRICS = ("latency_cycles", "dram_bytes", "bursts", "energy_pj")
TOTAL = "total"


@dataclass(frozen=True)
class CompareRow:
    """One strategy on one layer (or on the whole network when ``layer == "total"``)."""

    layer: str
    strategy: str
    latency_cycles: float
    dram_bytes: float
    bursts: float
    energy_pj: float
    ratio: float

    @property
    def is_total(self) -> bool:
        return self.layer == TOTAL


@dataclass(frozen=True)
class Comparison:
    """Every strategy's plan, and rows per layer (in network order) then the totals."""

    network: str
    arch: str
    objective: str
    strategies: tuple[str, ...]
    plans: tuple[NetworkPlan, ...]
    rows: tuple[CompareRow, ...]

    @classmethod
    def from_plans(cls, plans: tuple[NetworkPlan, ...]) -> Comparison:
        """Rows from plans of one network on one accelerator (one plan per strategy, same layers)."""
        first = plans[0]
        obj = Objective(first.objective)
        rows: list[CompareRow] = []
        for i, lp0 in enumerate(first.layers):
            metrics = [(p.strategy, p.layers[i].cost.latency_cycles, p.layers[i].cost.dram_bytes,
                        p.layers[i].cost.bursts, p.layers[i].cost.energy_pj) for p in plans]
            rows.extend(_ranked(lp0.name, metrics, obj))
        totals = [(p.strategy, p.latency_cycles, p.dram_bytes, p.total("bursts"), p.energy_pj) for p in plans]
        rows.extend(_ranked(TOTAL, totals, obj))
        return cls(first.network, first.arch, obj.value, tuple(p.strategy for p in plans), plans, tuple(rows))

    def totals(self) -> list[CompareRow]:
        return [r for r in self.rows if r.is_total]

    def best(self) -> str:
        """The strategy with the best network total (first listed among ties)."""
        return min(self.totals(), key=lambda r: r.ratio).strategy

    def to_dict(self) -> dict[str, Any]:
        return {"network": self.network, "arch": self.arch, "objective": self.objective,
                "strategies": list(self.strategies), "best": self.best(),
                "rows": [asdict(r) for r in self.rows]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["layer", "strategy", *METRICS, "ratio"])
        writer.writeheader()
        writer.writerows(asdict(r) for r in self.rows)
        return buf.getvalue()


def _ratio(value: float, best: float) -> float:
    if best > 0:
        return value / best
    return 1.0 if value == best else float("inf")


def _ranked(layer: str, metrics: list[tuple[str, float, float, float, float]], obj: Objective) -> list[CompareRow]:
    values = [float(obj.combine(lat, energy, dram)) for _, lat, dram, _, energy in metrics]
    best = min(values)
    return [CompareRow(layer, s, lat, dram, bursts, energy, _ratio(v, best))
            for (s, lat, dram, bursts, energy), v in zip(metrics, values, strict=True)]
