"""What a search minimises. One ``key`` used by every strategy and every reduction."""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.mapping import Mapping
from tileplan.search.rf_level import recost as rf_recost


class Objective(StrEnum):
    """Quantity to minimise: latency (cycles), energy (pJ), energy-delay product, DRAM bytes, or
    ``perf-per-byte``: e-PlaNNer's metric (thesis Eq. 6.13, estimated performance / off-chip bytes,
    maximised) as the equivalent key to minimise, latency (cycles) x DRAM bytes (performance is
    MACs / latency, the roofline minimum of Eq. 6.12)."""

    LATENCY = "latency"
    ENERGY = "energy"
    EDP = "edp"
    DRAM = "dram"
    PERF_PER_BYTE = "perf-per-byte"

    def key(self, costs: CostBatch) -> np.ndarray:
        """Per-candidate value to minimise (``inf`` for infeasible candidates)."""
        if self is Objective.LATENCY:
            value = costs.latency_cycles
        elif self is Objective.ENERGY:
            value = costs.energy_pj
        elif self is Objective.EDP:
            value = costs.edp
        elif self is Objective.DRAM:
            value = costs.dram_bytes
        else:
            value = costs.latency_cycles * costs.dram_bytes
        return np.where(costs.feasible, value, np.inf)

    def combine(self, latency_cycles: float | np.ndarray, energy_pj: float | np.ndarray,
                dram_bytes: float | np.ndarray) -> float | np.ndarray:
        """The objective's value from its three ingredients (used by bounds, which have no CostBatch).

        >>> Objective.PERF_PER_BYTE.combine(10.0, 0.0, 3.0)
        30.0
        """
        if self is Objective.LATENCY:
            return latency_cycles
        if self is Objective.ENERGY:
            return energy_pj
        if self is Objective.EDP:
            return energy_pj * latency_cycles
        if self is Objective.DRAM:
            return dram_bytes
        return latency_cycles * dram_bytes

    def tie_keys(self, costs: CostBatch) -> list[np.ndarray]:
        """Keys after the objective, most significant first, for a deterministic choice among ties."""
        return [costs.latency_cycles, costs.dram_bytes, costs.energy_pj, costs.bursts]


def best_index(objective: Objective, costs: CostBatch) -> int:
    """Index of the best candidate: lowest objective, then ties broken by latency, DRAM bytes,
    energy, bursts, and finally the lowest index (candidates come in a deterministic order)."""
    first = objective.key(costs)
    ties = np.flatnonzero(first == first.min()) if len(first) else first
    if len(ties) == 1:
        return int(ties[0])
    if len(ties) == 0:  # NaN keys: order everything as np.lexsort does (NaN last)
        ties = np.arange(len(costs))
    sub = costs.take(ties)
    keys = [first[ties], *objective.tie_keys(sub)]
    # np.lexsort sorts by the last key first; ``ties`` is ascending, so position breaks the last tie.
    order = np.lexsort([np.arange(len(ties))] + keys[::-1])
    return int(ties[order[0]])


class DramModel(StrEnum):
    """How DRAM time is estimated while *choosing* a mapping (TSO Alg. 4): ``burst`` adds the
    per-burst latency to bytes / bandwidth, ``volume`` counts bytes / bandwidth only. Chosen
    mappings are always reported with the arch's full (burst) model, as the hardware runs them."""

    BURST = "burst"
    VOLUME = "volume"

    @classmethod
    def parse(cls, text: str) -> DramModel:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise TileplanError(f"unknown DRAM model {text!r}; choose burst or volume") from None


def volume_problem(problem: Problem) -> Problem:
    """``problem`` on the same accelerator with the per-burst latency removed (TSO-noburst's view)."""
    arch = problem.arch
    volume = replace(arch, dram=replace(arch.dram, burst_latency_ns=0.0))
    return Problem(problem.layer, volume)


def recost(problem: Problem, mapping: Mapping) -> CostBatch:
    """The full cost of one chosen mapping on ``problem`` (length-1 batch; its bypassed operands in
    the register files, ``search.rf_level``)."""
    if mapping.bypass:
        return rf_recost(problem, mapping)
    return evaluate(problem, MappingBatch.from_mappings([mapping]))
