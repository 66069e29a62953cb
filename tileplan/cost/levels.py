"""The multi-level model: the two-level model for the DRAM level, extended by an on-chip level below it.

A mapping with ``levels`` (see ``mapping.Level``) runs, per core, the DRAM tile loops (``order``,
``tiles``), then inside each DRAM tile the level's temporal step loops (``level.order``), each step
spreading ``level.fanout`` children (PEs) over ``level.tiles``-sized pieces; each child holds its
piece of every operand in its own memory (L1: the arch's register file) and computes it.

The extension is a pipeline around the two-level one: the DRAM level's costs come from
``cost.model.evaluate`` unchanged (tables -> kernel -> finish); the on-chip level's counts from
``cost.onchip`` (the same reload rule on the flattened nest, with multicast and spatial reduction);
:func:`combine` then prices the counts and replaces the DRAM level's on-chip time and energy. With no
levels a mapping is the two-level special case and :func:`evaluate_mappings` returns exactly what
``cost.model.evaluate`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.model import evaluate
from tileplan.cost.onchip import (
    LevelCosts,
    OnChipSweep,
    onchip_bound,
    onchip_finish,
    onchip_floor,
    onchip_sweep,
    touched_input_elements,
)
from tileplan.cost.problem import Problem
from tileplan.dims import OPERANDS, Operand
from tileplan.errors import MappingError
from tileplan.mapping import Mapping


@dataclass
class LevelBatch:
    """One on-chip level of ``n`` candidates: (n, 8) child tiles, fan-outs and step orders."""

    tiles: np.ndarray
    fanout: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return int(self.tiles.shape[0])

    @classmethod
    def from_mappings(cls, mappings: Sequence[Mapping]) -> LevelBatch:
        """Pack the (single) on-chip level of every mapping."""
        if any(len(m.levels) != 1 for m in mappings):
            raise MappingError("the multi-level model takes mappings with exactly one on-chip level "
                               "(the arch's register file / L1 below its on-chip memories)")
        return cls(np.array([m.levels[0].tiles for m in mappings], dtype=np.int64),
                   np.array([m.levels[0].fanout for m in mappings], dtype=np.int64),
                   np.array([[int(d) for d in m.levels[0].order] for m in mappings], dtype=np.int64))


def onchip_costs(problem: Problem, batch: MappingBatch, lv: LevelBatch) -> LevelCosts:
    """On-chip counts of a batch sharing one core split (see the module docstring)."""
    return onchip_finish(onchip_sweep(problem, batch, lv.tiles, lv.fanout), batch.order, lv.order)


def combine(problem: Problem, dram: CostBatch, dram_batch: MappingBatch, oc: LevelCosts) -> CostBatch:
    """The DRAM level's costs with the on-chip levels' time and energy (energy: counts x unit prices,
    in this one place)."""
    arch = problem.arch
    prec = problem.precision
    feasible = dram.feasible & oc.feasible
    inf = np.where(feasible, 0.0, np.inf)
    dram_cycles = np.where(dram.feasible, dram.dram_cycles, 0.0)
    onchip = np.maximum(oc.compute_cycles, oc.noc_cycles)
    latency = np.maximum(onchip, dram_cycles) if arch.overlap else onchip + dram_cycles
    e_mem = [m.energy_pj_per_byte for m in arch.memories]
    buffer = np.zeros(len(feasible))
    dram_bytes = np.nan_to_num(dram.dram_bytes_by_operand, posinf=0.0)
    for op in OPERANDS:
        on_bytes = oc.parent_reads[:, op] * (prec.psum if op is Operand.OUTPUT else prec.of(op))
        if op is Operand.OUTPUT:
            on_bytes = on_bytes + oc.parent_writes * prec.psum
        buffer += (dram_bytes[:, op] + on_bytes) * e_mem[problem.memory_of_operand[op]]
    macs = int(np.prod(problem.dims)) * problem.op_factor  # the cores partition the layer
    energy = np.zeros((len(feasible), 5))
    energy[:, 0] = macs * arch.energy.mac_pj
    energy[:, 1] = (3 * macs + oc.child_fills.sum(axis=1)) * arch.register_file.energy_pj_per_access
    energy[:, 2] = buffer
    energy[:, 3] = oc.noc_bytes * arch.noc.energy_pj_per_byte
    energy[:, 4] = dram_bytes.sum(axis=1) * arch.dram.energy_pj_per_byte
    return replace(dram, feasible=feasible, dram_cycles=dram_cycles + inf, compute_cycles=oc.compute_cycles + inf,
                   noc_cycles=oc.noc_cycles + inf, latency_cycles=latency + inf,
                   energy_breakdown_pj=energy + inf[:, None])


def evaluate_levels(problem: Problem, batch: MappingBatch, lv: LevelBatch) -> tuple[CostBatch, LevelCosts]:
    """Costs of multi-level candidates: the DRAM level by ``cost.model``, the rest by this module."""
    oc = onchip_costs(problem, batch, lv)
    return combine(problem, evaluate(problem, batch), batch, oc), oc


def evaluate_mappings(problem: Problem, mappings: Sequence[Mapping]) -> CostBatch:
    """Costs of mappings sharing one core split and one depth (all two-level, or all with a level)."""
    batch = MappingBatch.from_mappings(mappings)
    if not mappings[0].levels:
        if any(m.levels for m in mappings):
            raise MappingError("a batch mixes two-level and multi-level mappings; group them first")
        return evaluate(problem, batch)
    return evaluate_levels(problem, batch, LevelBatch.from_mappings(mappings))[0]


def level_errors(problem: Problem, mapping: Mapping) -> list[str]:
    """Why ``mapping``'s on-chip level cannot run on ``problem``'s arch (empty: it can)."""
    if not mapping.levels:
        return []
    if len(mapping.levels) > 1:
        return [f"{problem.arch.name} has one memory level below its on-chip memories (the register file); "
                f"the mapping has {len(mapping.levels)} levels"]
    if mapping.spatial:
        return ["a mapping with levels spreads work by its levels' fan-outs; leave spatial empty"]
    out = []
    _, oc = evaluate_levels(problem, MappingBatch.from_mappings([mapping]), LevelBatch.from_mappings([mapping]))
    pes = problem.arch.total_pes(problem.precision.input)
    if oc.children[0] > pes:
        out.append(f"level fan-out asks for {int(oc.children[0])} PEs but {problem.arch.name} has {pes}")
    rf = problem.arch.register_file
    factor = 2 if problem.arch.double_buffering else 1
    for op, cap in zip(OPERANDS, (rf.inputs_bytes, rf.weights_bytes, rf.psums_bytes), strict=True):
        need = int(oc.child_footprint[0, op]) * factor
        if need > cap:
            out.append(f"a PE's {op.label} tile needs {need} B{' double-buffered' if factor == 2 else ''} "
                       f"but its register file holds {cap} B")
    return out


__all__ = ["LevelBatch", "LevelCosts", "OnChipSweep", "combine", "evaluate_levels", "evaluate_mappings",
           "level_errors", "onchip_bound", "onchip_costs", "onchip_finish", "onchip_floor", "onchip_sweep",
           "touched_input_elements"]
