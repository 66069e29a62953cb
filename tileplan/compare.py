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
from typing import TYPE_CHECKING, Any

from tileplan.files import csv_row
from tileplan.plan import LayerCost, NetworkPlan
from tileplan.search.objective import Objective

if TYPE_CHECKING:
    from tileplan.fusion.plan import FusionPlan

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
    fused: tuple[FusionPlan, ...] = ()

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

    @classmethod
    def from_fused_plans(cls, plans: tuple[FusionPlan, ...]) -> Comparison:
        """Rows from fused plans (``plan --fuse``) of one network, one per strategy.

        Strategies may cut the network into different groups, so a row is a *block*: the shortest run of
        consecutive layers that every strategy's plan covers with whole segments (single layers or fused
        groups). A block is one layer where no strategy fuses it; each strategy's cost on a block is the
        sum of its segments there, so the rows add up to the totals.
        """
        from tileplan.fusion.plan import sum_costs

        first = plans[0]
        obj = Objective(first.base.objective)
        names = [lp.name for lp in first.base.layers]
        index = {name: i for i, name in enumerate(names)}
        cuts = set(range(len(names)))  # cut after layer i: kept where every plan ends a segment there
        per_plan: list[list[tuple[int, LayerCost]]] = []  # (last layer index, cost) of each segment
        for p in plans:
            segments: list[tuple[int, LayerCost]] = []
            seen: set[str] = set()
            for i, lp in enumerate(p.base.layers):
                g = p.group_of(lp.name)
                if g is None:
                    segments.append((i, lp.cost))
                elif g.name not in seen:
                    seen.add(g.name)
                    segments.append((max(index[n] for n in g.layers), g.cost))
            per_plan.append(segments)
            cuts &= {end for end, _ in segments}
        bounds = sorted(cuts)
        rows: list[CompareRow] = []
        start = 0
        for end in bounds:
            block = names[start:end + 1]
            label = block[0] if len(block) == 1 else ("+".join(block) if len(block) == 2 else
                                                       f"{block[0]}..{block[-1]}")
            costs = [sum_costs([c for e, c in segs if start <= e <= end]) for segs in per_plan]
            rows.extend(_ranked(label, [(p.base.strategy, c.latency_cycles, c.dram_bytes, c.bursts, c.energy_pj)
                                        for p, c in zip(plans, costs, strict=True)], obj))
            start = end + 1
        totals = [(p.base.strategy, p.latency_cycles, p.dram_bytes, p.total("bursts"), p.energy_pj) for p in plans]
        rows.extend(_ranked(TOTAL, totals, obj))
        return cls(first.base.network, first.base.arch, obj.value, tuple(p.base.strategy for p in plans),
                   tuple(p.base for p in plans), tuple(rows), plans)

    def totals(self) -> list[CompareRow]:
        return [r for r in self.rows if r.is_total]

    def best(self) -> str:
        """The strategy with the best network total (first listed among ties)."""
        return min(self.totals(), key=lambda r: r.ratio).strategy

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"network": self.network, "arch": self.arch, "objective": self.objective,
                               "strategies": list(self.strategies), "best": self.best(),
                               "rows": [asdict(r) for r in self.rows]}
        if self.fused:
            out["fused_groups"] = {p.base.strategy: [g.name for g in p.groups] for p in self.fused}
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["layer", "strategy", *METRICS, "ratio"])
        writer.writeheader()
        writer.writerows(csv_row(asdict(r)) for r in self.rows)
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
