"""Plans: the chosen mapping of every layer with its costs; JSON round trip.

Units: bytes, cycles (accelerator clock), pJ. Seconds appear only in ``*_s`` properties.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from typing import Any

from tileplan.cost.batch import CostBatch
from tileplan.errors import TileplanError
from tileplan.mapping import Mapping


@dataclass(frozen=True)
class LayerCost:
    """Costs of one layer's mapping (whole chip)."""

    dram_input_bytes: float
    dram_weight_bytes: float
    dram_output_bytes: float
    dram_psum_read_bytes: float
    bursts: float
    dram_cycles: float
    compute_cycles: float
    noc_cycles: float
    latency_cycles: float
    energy_pj: float
    energy_mac_pj: float
    energy_rf_pj: float
    energy_buffer_pj: float
    energy_noc_pj: float
    energy_dram_pj: float
    utilization: float
    compute_bound: bool
    macs: int
    footprint_bytes: tuple[int, ...]
    attainable_macs_per_cycle: float
    arithmetic_intensity: float

    @property
    def dram_bytes(self) -> float:
        return self.dram_input_bytes + self.dram_weight_bytes + self.dram_output_bytes

    @property
    def bound(self) -> str:
        """What limits the layer: the largest of compute, NoC and DRAM time (``compute`` on a tie)."""
        times = {"compute": self.compute_cycles, "NoC": self.noc_cycles, "DRAM": self.dram_cycles}
        return max(times, key=lambda k: times[k])

    @classmethod
    def zero(cls) -> LayerCost:
        """A layer that moves nothing (a concat written in place by its producers)."""
        return cls(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, True, 0, (), 0.0, 0.0)

    @classmethod
    def from_batch(cls, costs: CostBatch, i: int, dram_bytes_per_cycle: float) -> LayerCost:
        """Row ``i`` of a cost batch; attainable performance is e-PlaNNer's roofline (Eq. 6.10-6.12)."""
        by_op = costs.dram_bytes_by_operand[i]
        e = costs.energy_breakdown_pj[i]
        total = float(by_op.sum())
        util = float(costs.utilization[i])
        ai = costs.macs / total if total else float("inf")
        attainable = min(costs.peak_macs_per_cycle * util, ai * dram_bytes_per_cycle)
        return cls(
            dram_input_bytes=float(by_op[0]), dram_weight_bytes=float(by_op[1]), dram_output_bytes=float(by_op[2]),
            dram_psum_read_bytes=float(costs.dram_read_bytes[i, 2]), bursts=float(costs.bursts[i]),
            dram_cycles=float(costs.dram_cycles[i]), compute_cycles=float(costs.compute_cycles[i]),
            noc_cycles=float(costs.noc_cycles[i]), latency_cycles=float(costs.latency_cycles[i]),
            energy_pj=float(e.sum()), energy_mac_pj=float(e[0]), energy_rf_pj=float(e[1]),
            energy_buffer_pj=float(e[2]), energy_noc_pj=float(e[3]), energy_dram_pj=float(e[4]),
            utilization=util, compute_bound=bool(costs.compute_bound[i]), macs=int(costs.macs),
            footprint_bytes=tuple(int(x) for x in costs.footprint_bytes[i]),
            attainable_macs_per_cycle=float(attainable), arithmetic_intensity=float(ai),
        )


@dataclass(frozen=True)
class LayerPlan:
    """One layer's decision: its mapping (``None`` for layers that move nothing), costs, bounds and
    how it was found. ``cached_from`` names the identical layer whose search was reused."""

    name: str
    op: str
    shape: str
    mapping: Mapping | None
    cost: LayerCost
    compulsory_bytes: int
    io_bound_bytes: int
    strategy: str
    evaluated: int
    space_size: float
    search_seconds: float
    cached_from: str | None = None

    @property
    def gap_compulsory(self) -> float:
        """DRAM bytes over the compulsory traffic (1.0 = ideal)."""
        return self.cost.dram_bytes / self.compulsory_bytes if self.compulsory_bytes else 1.0

    @property
    def gap_io_bound(self) -> float:
        return self.cost.dram_bytes / self.io_bound_bytes if self.io_bound_bytes else 1.0


def ctc_ratio(macs: float, bursts: float, burst_bytes: int) -> float:
    """Computation-to-communication ratio, Caffeine's refined (burst-aware) form: operations (2 per
    MAC) per byte the DRAM bus really moves, every access charged whole bursts (short, scattered
    transfers use the bandwidth worse than long ones). 0 when nothing moves.

    >>> ctc_ratio(1000, 10, 8)
    25.0
    """
    moved = bursts * burst_bytes
    return 2.0 * macs / moved if moved else 0.0


@dataclass(frozen=True)
class NetworkPlan:
    """Every layer's plan on one accelerator, for one objective."""

    network: str
    arch: str
    objective: str
    strategy: str
    clock_hz: float
    layers: tuple[LayerPlan, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    def total(self, attribute: str) -> float:
        """Sum of a ``LayerCost`` attribute over layers."""
        return float(sum(getattr(lp.cost, attribute) for lp in self.layers))

    @property
    def latency_cycles(self) -> float:
        return self.total("latency_cycles")

    @property
    def latency_s(self) -> float:
        return self.latency_cycles / self.clock_hz

    @property
    def dram_bytes(self) -> float:
        return self.total("dram_bytes")

    @property
    def energy_pj(self) -> float:
        return self.total("energy_pj")

    def ctc(self) -> list[tuple[str, float]]:
        """(layer, CTC ratio) in network order (empty when the plan does not know the DRAM burst)."""
        burst = self.meta.get("dram_burst_bytes")
        if not burst:
            return []
        return [(lp.name, ctc_ratio(lp.cost.macs, lp.cost.bursts, int(burst))) for lp in self.layers]

    @property
    def searched_layers(self) -> int:
        """Layers whose search ran (the others reused an identical layer's plan or move nothing)."""
        return sum(1 for lp in self.layers if lp.cached_from is None and lp.mapping is not None)

    # ----------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        # Field by field: ``asdict(self)`` would convert (deep-copy) every layer only to drop them.
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "layers"}
        out["layers"] = []
        for lp in self.layers:
            d = {f.name: getattr(lp, f.name) for f in fields(lp) if f.name not in ("mapping", "cost")}
            d["mapping"] = lp.mapping.to_dict() if lp.mapping else None
            d["cost"] = {f.name: getattr(lp.cost, f.name) for f in fields(lp.cost)}  # flat: numbers and a tuple
            d["cost"]["footprint_bytes"] = list(lp.cost.footprint_bytes)
            out["layers"].append(d)
        out["ctc"] = [{"layer": name, "ctc": value} for name, value in self.ctc()]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetworkPlan:
        try:
            layers = []
            for d in data["layers"]:
                cost = dict(d["cost"])
                cost["footprint_bytes"] = tuple(cost["footprint_bytes"])
                rest = {k: v for k, v in d.items() if k not in ("mapping", "cost")}
                layers.append(LayerPlan(mapping=Mapping.from_dict(d["mapping"]) if d["mapping"] else None,
                                        cost=LayerCost(**cost), **rest))
            top = {k: v for k, v in data.items() if k not in ("layers", "ctc")}  # ctc is derived
            return cls(layers=tuple(layers), **top)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise TileplanError(f"not a tileplan plan file, as `tileplan plan --json` writes (problem: "
                                f"{type(err).__name__} {err})") from None

    @classmethod
    def from_json(cls, text: str) -> NetworkPlan:
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as err:
            raise TileplanError(f"plan file is not valid JSON (line {err.lineno}: {err.msg})") from None
