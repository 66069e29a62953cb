"""Lower bounds of a fused group's objective, for the provably safe pruning of ``search_group``.

Every bound is built from the same pieces ``assemble`` adds up (``traffic``, ``compute``,
``executed_macs``), leaving out only non-negative terms, so it never exceeds the true value:

* latency: the compute cycles and the DRAM cycles, each at most the latency (the NoC term is left out);
* energy: MACs and register-file accesses of the executed MACs, the DRAM energy and the on-chip
  buffer fills of the DRAM traffic (the PE array's own buffer accesses and the NoC are left out);
* DRAM bytes: exact; EDP and latency x DRAM bytes: products of the bounds (all non-negative).

``candidate_bound`` bounds each candidate of a selection; ``config_bound`` bounds a whole discrete
choice by one number without any per-candidate work (sums of per-term minima over the candidates).
A candidate or choice whose bound exceeds the best value found so far (by more than ``SLACK``,
far above floating-point rounding) cannot be the optimum nor tie with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tileplan.dims import Operand
from tileplan.fusion.assemble import Choice, compute, compute_args, executed_macs, traffic, weight_terms
from tileplan.fusion.cost import GroupModel, Selection
from tileplan.fusion.group import Overlap
from tileplan.search.objective import Objective

#: Relative margin above the best value before a bound prunes (rounding of the model's float sums).
SLACK = 1e-9


def _combine(obj: Objective, latency: np.ndarray | float, energy: np.ndarray | float,
             dram: np.ndarray | float) -> np.ndarray | float:
    return obj.combine(latency, energy, dram)


@dataclass(frozen=True)
class Bounds:
    """Per-candidate bounds: of the objective (``primary``), of the latency in cycles (never above
    the model's value, bit for bit: the same sums with terms left out) and the exact DRAM bytes."""

    primary: np.ndarray
    latency: np.ndarray
    dram_bytes: np.ndarray

    def take(self, rows: np.ndarray) -> Bounds:
        """The bounds of the candidates at positions ``rows``."""
        return Bounds(self.primary[rows], self.latency[rows], self.dram_bytes[rows])

    def beaten(self, obj: Objective, best: tuple[float, ...]) -> np.ndarray:
        """(n,) True where a candidate provably cannot beat nor tie ``best``, the winner's key tuple
        (``obj.key`` then ``obj.tie_keys``: latency, DRAM bytes, energy, bursts): its objective
        bound exceeds the best (by more than ``SLACK``), or its latency (objective DRAM) or DRAM
        bytes (objective latency) cannot be lower than the best's while the other key is higher."""
        out = self.primary > best[0] * (1 + SLACK)
        lat, dram = best[1], best[2]
        if obj is Objective.LATENCY:
            out |= (self.latency >= lat) & (self.dram_bytes > dram)
        elif obj is Objective.DRAM:
            out |= (self.dram_bytes >= dram) & (self.latency > lat)
        return out


def candidate_bound(gm: GroupModel, sel: Selection, obj: Objective, choice: Choice,
                    against: list[tuple[np.ndarray, tuple[float, ...]]] | None = None) -> Bounds:
    """Bounds of ``obj`` for the candidates ``sel`` (feasible or not).

    ``against`` (objective DRAM only): the ``Bounds.beaten`` tests the caller will make, as
    (positions in ``sel``, best key) pairs; the latency bound (compute cycles, the costly part) is
    then computed only where one of those tests reads it -- the near-ties of the DRAM bytes -- and
    is NaN elsewhere, which changes none of those tests' answers."""
    arch = gm.arch
    read, write, bursts = traffic(gm, sel, choice)
    total = read[:, 0] + read[:, 1] + read[:, 2] + write
    dram_cycles = total / arch.dram_bytes_per_cycle + (bursts[:, 0] + bursts[:, 1] + bursts[:, 2]) * \
        arch.burst_latency_cycles
    if against is not None and obj is Objective.DRAM:
        wanted = np.zeros(sel.n, dtype=bool)
        for pos, best in against:
            d = total[pos]
            wanted[pos[(d <= best[0] * (1 + SLACK)) & (d >= best[2])]] = True
        latency = np.full(sel.n, np.nan)
        where = np.flatnonzero(wanted)
        if len(where):
            part = Selection(gm, where if sel.index is None else sel.index[where])
            cycles, _ = compute(gm, part, choice)
            latency[where] = np.maximum(cycles, dram_cycles[where]) if arch.overlap else cycles + dram_cycles[where]
        return Bounds(total.astype(np.float64), latency, total)
    cycles, _ = compute(gm, sel, choice)
    latency = np.maximum(cycles, dram_cycles) if arch.overlap else cycles + dram_cycles
    energy = np.zeros(sel.n)
    if obj in (Objective.ENERGY, Objective.EDP):
        executed = sel.take(executed_macs(gm, choice.overlap))
        mem = gm.problems[0].memory_of_operand
        fills = read[:, Operand.INPUT] * arch.memories[mem[Operand.INPUT]].energy_pj_per_byte
        fills += read[:, Operand.WEIGHT] * arch.memories[mem[Operand.WEIGHT]].energy_pj_per_byte
        fills += (read[:, Operand.OUTPUT] + write) * arch.memories[mem[Operand.OUTPUT]].energy_pj_per_byte
        energy = executed * arch.energy.mac_pj + 3 * executed * arch.register_file.energy_pj_per_access + fills + \
            total * arch.dram.energy_pj_per_byte
    return Bounds(np.asarray(_combine(obj, latency, energy, total), dtype=np.float64), latency, total)


def _min_cycles(gm: GroupModel, m: int, overlap: Overlap, tile_n: int, c_chunk: int, gk_tile: tuple[int, int]
                ) -> Callable[[], float]:
    return lambda: gm.min_compute_cycles(m, overlap, tile_n, c_chunk, gk_tile)


def _volume(gm: GroupModel, kind: str, m: int) -> Callable[[], np.ndarray]:
    return lambda: gm.volume(kind, m)


def config_bound(gm: GroupModel, obj: Objective, choice: Choice) -> float:
    """One lower bound of ``obj`` over every candidate of a discrete choice, from per-term minima
    over the candidates (memoised in ``gm``; the min of a sum is at least the sum of the mins)."""
    arch = gm.arch
    layers, probs = gm.layers, gm.problems
    last = layers[-1]
    tile_n, tile_k, overlap, resident, chunk = (choice.tile_n, choice.tile_k, choice.overlap, choice.resident,
                                                choice.chunk)

    def low(key: tuple[object, ...], full: Callable[[], np.ndarray]) -> float:
        return gm.memo(("min", *key), lambda: float(np.min(full())))

    reuse = overlap is not Overlap.RECOMPUTE
    kind, kind0 = "fetch" if reuse else "in", gm.input_kind(reuse)
    total = choice.passes(gm) * last.n * gm.group.input_channels() * \
        low(("volume", kind0), lambda: gm.volume(kind0, 0)) * probs[0].precision.input
    for m, sides in enumerate(gm.group.sides):  # a merging layer's DRAM inputs (``side_traffic``)
        if any(not s.on_chip for s in sides):
            total += last.n * sum(s.channels for s in sides if not s.on_chip) * probs[m].precision.input * \
                low(("volume", kind, m), _volume(gm, kind, m))
    total += float(last.elements(Operand.OUTPUT) * probs[-1].precision.output)
    # Streamed weights are loaded every step, or once with the chunk loop outermost (as ``traffic``).
    steps = 1.0 if choice.chunk_outer else low(("steps", tile_n), lambda: -(-last.n // tile_n) * gm.step_grid())
    for m in range(len(layers)):
        wb, _, _ = weight_terms(gm, m, resident[m], chunk, tile_k, np.array([steps]))
        total += float(wb[0])
    dram_cycles = total / arch.dram_bytes_per_cycle
    latency = 0.0
    if obj is not Objective.ENERGY and obj is not Objective.DRAM:
        cycles = 0.0
        for m in range(len(layers)):
            c_chunk, gk_tile = compute_args(gm, m, chunk, tile_k, resident)
            cycles += gm.memo(("min_compute", m, overlap is Overlap.RECOMPUTE, tile_n, c_chunk, gk_tile),
                              _min_cycles(gm, m, overlap, tile_n, c_chunk, gk_tile))
        latency = max(cycles, dram_cycles) if arch.overlap else cycles + dram_cycles
    energy = 0.0
    if obj in (Objective.ENERGY, Objective.EDP):
        executed = low(("executed", reuse), lambda: executed_macs(gm, overlap))
        energy = executed * arch.energy.mac_pj + 3 * executed * arch.register_file.energy_pj_per_access + \
            total * arch.dram.energy_pj_per_byte
    return float(_combine(obj, latency, energy, total))
