"""Struct-of-arrays containers: many candidate mappings in, their costs out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tileplan.dims import DIMS, NDIMS, OPERANDS
from tileplan.mapping import DEFAULT_LAYOUTS, Mapping, layout_options

#: Index of every operand's default layout among its ``layout_options`` (computed once).
_DEFAULT_CODES: tuple[int, int, int] = tuple(  # type: ignore[assignment]
    layout_options(op).index(DEFAULT_LAYOUTS[op]) for op in OPERANDS)


@dataclass
class MappingBatch:
    """``n`` candidate mappings of one layer sharing one core split.

    ``tiles``/``unroll`` are (n, 8) in DIMS order; ``order`` (n, 8) holds the dimension at each loop
    position, outermost first; ``hoist`` (n, 3, 8) is per operand and dimension; ``layouts`` (n, 3)
    indexes ``mapping.layout_options(operand)``.
    """

    tiles: np.ndarray
    order: np.ndarray
    hoist: np.ndarray
    unroll: np.ndarray
    layouts: np.ndarray
    cluster_split: tuple[int, ...]
    core_split: tuple[int, ...]

    def __len__(self) -> int:
        return int(self.tiles.shape[0])

    @classmethod
    def from_mappings(cls, mappings: Sequence[Mapping]) -> MappingBatch:
        """Pack mappings that share one core split."""
        if not mappings:
            raise ValueError("empty batch")
        splits = {(m.cluster_split, m.core_split) for m in mappings}
        if len(splits) != 1:
            raise ValueError("a MappingBatch holds mappings of one core split; group them first")
        n = len(mappings)
        hoist = np.zeros((n, 3, NDIMS), dtype=bool)
        layouts = np.zeros((n, 3), dtype=np.int64)
        for i, m in enumerate(mappings):
            for op in OPERANDS:
                for d in m.hoist[op]:
                    hoist[i, op, d] = True
                layouts[i, op] = layout_options(op).index(m.layouts[op])
        return cls(
            tiles=np.array([m.tiles for m in mappings], dtype=np.int64),
            order=np.array([[int(d) for d in m.order] for m in mappings], dtype=np.int64),
            hoist=hoist,
            unroll=np.array([m.unroll() for m in mappings], dtype=np.int64),
            layouts=layouts,
            cluster_split=mappings[0].cluster_split,
            core_split=mappings[0].core_split,
        )

    @staticmethod
    def default_layout_codes() -> tuple[int, int, int]:
        return _DEFAULT_CODES

    def take(self, index: np.ndarray) -> MappingBatch:
        return MappingBatch(self.tiles[index], self.order[index], self.hoist[index], self.unroll[index],
                            self.layouts[index], self.cluster_split, self.core_split)


@dataclass
class CostBatch:
    """Costs of ``n`` candidates (arrays of shape (n,) unless noted). Infeasible ones are ``inf``.

    Bytes are DRAM bytes; cycles are accelerator clock cycles; energy is pJ.
    """

    feasible: np.ndarray
    footprint_bytes: np.ndarray  # (n, memories): peak per-core requirement of each on-chip memory
    dram_read_bytes: np.ndarray  # (n, 3): input, weight, output (partial sums read back)
    dram_write_bytes: np.ndarray  # (n,): output (final values and partial sums)
    dram_bursts: np.ndarray  # (n, 3): input, weight, output (reads + writes)
    dram_cycles: np.ndarray
    compute_cycles: np.ndarray
    noc_cycles: np.ndarray
    latency_cycles: np.ndarray
    energy_breakdown_pj: np.ndarray  # (n, 5): MAC, register file, on-chip buffers, NoC, DRAM
    macs: int
    peak_macs_per_cycle: int

    ENERGY_PARTS = ("mac", "rf", "buffer", "noc", "dram")

    def __len__(self) -> int:
        return int(self.feasible.shape[0])

    @property
    def dram_bytes_by_operand(self) -> np.ndarray:
        """(n, 3): input, weight and output (reads + writes) DRAM bytes."""
        out = self.dram_read_bytes.astype(np.float64).copy()
        out[:, 2] += self.dram_write_bytes
        return out

    @property
    def dram_bytes(self) -> np.ndarray:
        return self.dram_bytes_by_operand.sum(axis=1)

    @property
    def bursts(self) -> np.ndarray:
        return self.dram_bursts.sum(axis=1)

    @property
    def energy_pj(self) -> np.ndarray:
        return self.energy_breakdown_pj.sum(axis=1)

    @property
    def edp(self) -> np.ndarray:
        return self.energy_pj * self.latency_cycles

    @property
    def utilization(self) -> np.ndarray:
        """MACs / (compute cycles x all MAC lanes of the chip) (e-PlaNNer Eq. 6.7)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.compute_cycles > 0,
                            self.macs / (self.compute_cycles * self.peak_macs_per_cycle), 0.0)

    @property
    def compute_bound(self) -> np.ndarray:
        """True where on-chip work (compute or NoC) takes at least as long as DRAM transfers."""
        return np.maximum(self.compute_cycles, self.noc_cycles) >= self.dram_cycles

    def take(self, index: np.ndarray | int) -> CostBatch:
        idx = np.atleast_1d(np.asarray(index))
        return CostBatch(self.feasible[idx], self.footprint_bytes[idx], self.dram_read_bytes[idx],
                         self.dram_write_bytes[idx], self.dram_bursts[idx], self.dram_cycles[idx],
                         self.compute_cycles[idx], self.noc_cycles[idx], self.latency_cycles[idx],
                         self.energy_breakdown_pj[idx], self.macs, self.peak_macs_per_cycle)

    def row(self, i: int = 0) -> dict[str, float]:
        """One candidate's numbers as plain floats (for reports)."""
        b = self.dram_bytes_by_operand[i]
        return {
            "dram_input_bytes": float(b[0]), "dram_weight_bytes": float(b[1]), "dram_output_bytes": float(b[2]),
            "dram_bytes": float(b.sum()), "bursts": float(self.bursts[i]),
            "dram_cycles": float(self.dram_cycles[i]), "compute_cycles": float(self.compute_cycles[i]),
            "noc_cycles": float(self.noc_cycles[i]), "latency_cycles": float(self.latency_cycles[i]),
            "energy_pj": float(self.energy_pj[i]), "utilization": float(self.utilization[i]),
        }


DIM_NAMES = tuple(d.name for d in DIMS)
