"""A network plan with fusion groups: the best unfused plan of every layer plus the groups chosen to
replace runs of its layers. JSON round trip. Units: bytes, cycles, pJ."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tileplan.errors import TileplanError
from tileplan.fusion.group import FusedMapping
from tileplan.plan import LayerCost, NetworkPlan, ctc_ratio


@dataclass(frozen=True)
class GroupPlan:
    """One fused group: its layers, mapping, costs, and the cost of the same layers unfused.

    ``executed_macs`` counts recomputation; ``reuse_bytes`` is the reuse-buffer space; ``space_size``
    the fused mappings the search stood for; ``cached_from`` the identical group whose search was reused;
    ``partition`` the PE-array / register-file partition (``fusion.partition``) of a restricted search.
    """

    layers: tuple[str, ...]
    mapping: FusedMapping
    cost: LayerCost
    unfused: LayerCost
    executed_macs: int
    reuse_bytes: int
    evaluated: int
    space_size: float
    search_seconds: float
    cached_from: str | None = None
    partition: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return "+".join(self.layers)

    @property
    def saving(self) -> float:
        """Fraction of the unfused DRAM bytes the group saves."""
        base = self.unfused.dram_bytes
        return 1.0 - self.cost.dram_bytes / base if base else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("mapping", "cost", "unfused")}
        out["layers"] = list(self.layers)
        out["mapping"] = self.mapping.to_dict()
        for key in ("cost", "unfused"):
            out[key] = asdict(getattr(self, key))
            out[key]["footprint_bytes"] = list(getattr(self, key).footprint_bytes)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupPlan:
        def cost(key: str) -> LayerCost:
            c = dict(data[key])
            c["footprint_bytes"] = tuple(c["footprint_bytes"])
            return LayerCost(**c)

        rest = {k: v for k, v in data.items() if k not in ("mapping", "cost", "unfused", "layers")}
        return cls(layers=tuple(data["layers"]), mapping=FusedMapping.from_dict(data["mapping"]), cost=cost("cost"),
                   unfused=cost("unfused"), **rest)


def sum_costs(costs: list[LayerCost]) -> LayerCost:
    """Layer costs of consecutive segments added up (footprints: the largest per memory)."""
    if not costs:
        return LayerCost.zero()
    out: dict[str, Any] = {}
    for f in fields(LayerCost):
        values = [getattr(c, f.name) for c in costs]
        if f.name == "footprint_bytes":
            width = max(len(v) for v in values)
            out[f.name] = tuple(max((v[i] for v in values if len(v) > i), default=0) for i in range(width))
        elif f.name == "compute_bound":
            out[f.name] = all(values)
        elif f.name in ("utilization", "attainable_macs_per_cycle", "arithmetic_intensity"):
            weights = [c.latency_cycles for c in costs]
            total = sum(weights)
            out[f.name] = sum(v * w for v, w in zip(values, weights, strict=True)) / total if total else 0.0
        else:
            out[f.name] = sum(values)
    return LayerCost(**out)


@dataclass(frozen=True)
class FusionPlan:
    """The unfused plan ``base`` and the fused ``groups`` that replace some of its layers."""

    base: NetworkPlan
    groups: tuple[GroupPlan, ...]
    max_group: int
    meta: dict[str, Any] = field(default_factory=dict)

    def group_of(self, layer: str) -> GroupPlan | None:
        for g in self.groups:
            if layer in g.layers:
                return g
        return None

    def segments(self) -> list[tuple[str, LayerCost]]:
        """(name, cost) of every single layer and group, in network order."""
        out: list[tuple[str, LayerCost]] = []
        seen: set[str] = set()
        for lp in self.base.layers:
            g = self.group_of(lp.name)
            if g is None:
                out.append((lp.name, lp.cost))
            elif g.name not in seen:
                seen.add(g.name)
                out.append((g.name, g.cost))
        return out

    def total(self, attribute: str) -> float:
        return float(sum(getattr(cost, attribute) for _, cost in self.segments()))

    @property
    def latency_cycles(self) -> float:
        return self.total("latency_cycles")

    @property
    def energy_pj(self) -> float:
        return self.total("energy_pj")

    @property
    def dram_bytes(self) -> float:
        return self.total("dram_bytes")

    def ctc(self) -> list[tuple[str, float]]:
        """(segment, CTC ratio) in network order (empty when the plan does not know the DRAM burst)."""
        burst = self.meta.get("dram_burst_bytes")
        if not burst:
            return []
        return [(name, ctc_ratio(cost.macs, cost.bursts, int(burst))) for name, cost in self.segments()]

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.to_dict(), "groups": [g.to_dict() for g in self.groups],
                "max_group": self.max_group, "meta": self.meta,
                "ctc": [{"segment": name, "ctc": value} for name, value in self.ctc()]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionPlan:
        try:
            return cls(NetworkPlan.from_dict(data["base"]), tuple(GroupPlan.from_dict(g) for g in data["groups"]),
                       int(data["max_group"]), dict(data.get("meta", {})))
        except (KeyError, TypeError) as err:
            raise TileplanError(f"not a tileplan fused plan file ({err})") from None

    @classmethod
    def from_json(cls, text: str) -> FusionPlan:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as err:
            raise TileplanError(f"plan file is not valid JSON (line {err.lineno}: {err.msg})") from None
