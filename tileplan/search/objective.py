"""What a search minimises. One ``key`` used by every strategy and every reduction."""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from tileplan.cost.batch import CostBatch


class Objective(StrEnum):
    """Quantity to minimise: latency (cycles), energy (pJ), energy-delay product, or DRAM bytes."""

    LATENCY = "latency"
    ENERGY = "energy"
    EDP = "edp"
    DRAM = "dram"

    def key(self, costs: CostBatch) -> np.ndarray:
        """Per-candidate value to minimise (``inf`` for infeasible candidates)."""
        if self is Objective.LATENCY:
            value = costs.latency_cycles
        elif self is Objective.ENERGY:
            value = costs.energy_pj
        elif self is Objective.EDP:
            value = costs.edp
        else:
            value = costs.dram_bytes
        return np.where(costs.feasible, value, np.inf)

    def tie_keys(self, costs: CostBatch) -> list[np.ndarray]:
        """Keys after the objective, most significant first, for a deterministic choice among ties."""
        return [costs.latency_cycles, costs.dram_bytes, costs.energy_pj, costs.bursts]


def best_index(objective: Objective, costs: CostBatch) -> int:
    """Index of the best candidate: lowest objective, then ties broken by latency, DRAM bytes,
    energy, bursts, and finally the lowest index (candidates come in a deterministic order)."""
    keys = [objective.key(costs), *objective.tie_keys(costs)]
    # np.lexsort sorts by the last key first.
    order = np.lexsort([np.arange(len(costs))] + keys[::-1])
    return int(order[0])
