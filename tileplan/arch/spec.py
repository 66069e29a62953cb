"""Accelerator description: a validated, frozen pydantic model (loaded from YAML by ``arch.load``).

Units are in the field names: bytes, bytes/s, Hz, ns, pJ. Derived per-cycle quantities are
properties (``dram_bytes_per_cycle``, ``burst_latency_cycles``) so the cost model works in cycles.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, field_validator, model_validator

from tileplan.dims import Dim, Operand


def _num(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and float(value).is_integer() and abs(value) < 1e9 else f"{value:g}"


def _integral(value: object) -> object:
    """YAML reads ``1e6`` as a string and ``1.0e6`` as a float: let both be integers when they are."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _within(lo: float, hi: float, text: str) -> AfterValidator:
    """A validator keeping a number finite and inside the sane range [lo, hi] (``text`` states it)."""

    def check(value: float) -> float:
        if not math.isfinite(value) or not lo <= value <= hi:
            raise ValueError(f"must be between {text}, got {_num(value)}")
        return value

    return AfterValidator(check)


# Sane ranges: generous for any real machine, tight enough that a typo (a missing "e9", an extra
# zero) is caught here instead of printing 300-digit numbers, a false "no mapping fits" or running
# out of memory in the search.
Hz = Annotated[float, _within(1e3, 1e11, "1e3 and 1e11 Hz (1 kHz to 100 GHz)")]
BytesPerS = Annotated[float, _within(1e3, 1e15, "1e3 and 1e15 bytes/s (1 kB/s to 1 PB/s)")]
Picojoules = Annotated[float, _within(0, 1e6, "0 and 1e6 pJ")]
Nanoseconds = Annotated[float, _within(0, 1e6, "0 and 1e6 ns (1 ms)")]
MemoryBytes = Annotated[int, BeforeValidator(_integral), _within(1, 2**40, "1 and 2**40 bytes (1 TiB)")]
BurstBytes = Annotated[int, BeforeValidator(_integral), _within(1, 2**20, "1 and 2**20 bytes (1 MiB)")]
RegisterBytes = Annotated[int, BeforeValidator(_integral), _within(0, 2**30, "0 and 2**30 bytes (1 GiB)")]
Lanes = Annotated[int, BeforeValidator(_integral), _within(1, 65536, "1 and 65536 PEs per axis")]
CoreCount = Annotated[int, BeforeValidator(_integral), _within(1, 1024, "1 and 1024")]
Small = Annotated[int, BeforeValidator(_integral), _within(1, 1024, "1 and 1024")]
Precision = Annotated[int, BeforeValidator(_integral), _within(1, 8, "1 and 8 bytes per element")]
PsumBytes = Annotated[int, BeforeValidator(_integral), _within(0, 8, "0 (the data width) and 8 bytes per element")]
MAX_CORES = 1024
MAX_PES_PER_CORE = 1 << 20


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dram(_Frozen):
    """Off-chip memory. Time to move a transfer = bytes / bandwidth + bursts * burst latency."""

    bandwidth_bytes_per_s: BytesPerS
    burst_bytes: BurstBytes = 64
    burst_latency_ns: Nanoseconds = 0.0
    energy_pj_per_byte: Picojoules = 0.0


class Memory(_Frozen):
    """An on-chip buffer holding the tiles of ``operands`` (one operand: dedicated; several: shared)."""

    name: str
    operands: tuple[str, ...]
    size_bytes: MemoryBytes
    energy_pj_per_byte: Picojoules = 0.0
    bandwidth_bytes_per_cycle: Annotated[float, _within(1e-3, 1e9, "1e-3 and 1e9 bytes/cycle")] | None = None

    @field_validator("operands")
    @classmethod
    def _known_operands(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("a memory must hold at least one operand (input, weight, output)")
        return tuple(Operand.parse(v).label for v in value)

    @property
    def operand_ids(self) -> tuple[Operand, ...]:
        return tuple(Operand.parse(v) for v in self.operands)


class Cores(_Frozen):
    """Cores grouped in clusters; a multicast load fills every core of one cluster at once."""

    clusters: CoreCount = 1
    cores_per_cluster: CoreCount = 1
    multicast: bool = True
    split_dims: tuple[str, ...] = ("N", "G", "K", "P", "Q")

    @field_validator("split_dims")
    @classmethod
    def _dims(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        dims = tuple(Dim.parse(v).name for v in value)
        bad = [d for d in dims if Dim[d] in (Dim.C, Dim.R, Dim.S)]
        if bad:
            raise ValueError(f"cores cannot split reduction dimensions {bad}: partial sums would need a "
                             f"cross-core reduction tileplan does not model")
        return dims

    @model_validator(mode="after")
    def _not_too_many(self) -> Cores:
        if self.clusters * self.cores_per_cluster > MAX_CORES:
            raise ValueError(f"{self.clusters} clusters x {self.cores_per_cluster} cores is "
                             f"{self.clusters * self.cores_per_cluster} cores; at most {MAX_CORES} are supported")
        return self

    @property
    def total(self) -> int:
        return self.clusters * self.cores_per_cluster


class AxisMode(StrEnum):
    UNROLLED = "unrolled"  # each chosen dim gets an unroll factor; steps = prod ceil(t_d / u_d)
    FLATTENED = "flattened"  # the dims form one vector; steps = ceil(prod t_d / size)


class Axis(_Frozen):
    """One spatial axis of a core's PE array.

    ``size`` may depend on the input precision (``size_by_precision``: bytes -> lanes), as in a
    128-bit datapath doing 16 8-bit or 8 16-bit MACs per cycle.
    """

    name: str
    size: Lanes | None = None
    size_by_precision: dict[Precision, Lanes] | None = None
    dims: tuple[str, ...]
    mode: AxisMode = AxisMode.UNROLLED
    max_dims: Annotated[int, BeforeValidator(_integral), _within(1, 8, "1 and 8 dimensions")] = 1

    @field_validator("dims")
    @classmethod
    def _dims(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("an axis must list the dimensions it may unroll")
        return tuple(Dim.parse(v).name for v in value)

    @model_validator(mode="after")
    def _one_size(self) -> Axis:
        if (self.size is None) == (self.size_by_precision is None):
            raise ValueError("give exactly one of size or size_by_precision")
        return self

    def lanes(self, precision_bytes: int) -> int:
        """Axis length for data ``precision_bytes`` wide."""
        if self.size is not None:
            return self.size
        assert self.size_by_precision is not None
        if precision_bytes not in self.size_by_precision:
            raise ValueError(f"axis {self.name!r} has no size for {precision_bytes}-byte data "
                             f"(size_by_precision covers {sorted(self.size_by_precision)})")
        return self.size_by_precision[precision_bytes]

    @property
    def dim_ids(self) -> tuple[Dim, ...]:
        return tuple(Dim[d] for d in self.dims)


class PEArray(_Frozen):
    """The PEs of one core: axes (rows, columns, vector lanes) that unroll loop dimensions."""

    axes: tuple[Axis, ...] = ()
    macs_per_pe_per_cycle: Small = 1

    @model_validator(mode="after")
    def _not_too_many(self) -> PEArray:
        pes = 1
        for axis in self.axes:
            pes *= axis.size if axis.size is not None else max((axis.size_by_precision or {1: 1}).values())
        if pes > MAX_PES_PER_CORE:
            raise ValueError(f"the axes make {pes} PEs per core; at most {MAX_PES_PER_CORE} are supported")
        return self


class RegisterFile(_Frozen):
    """Per-PE register file split by operand (bytes)."""

    weights_bytes: RegisterBytes = 0
    inputs_bytes: RegisterBytes = 0
    psums_bytes: RegisterBytes = 0
    energy_pj_per_access: Picojoules = 0.0


class Noc(_Frozen):
    """The network between the on-chip buffer(s) and the PE array."""

    bandwidth_bytes_per_s: BytesPerS | None = None
    energy_pj_per_byte: Picojoules = 0.0


class Energy(_Frozen):
    """Energy per multiply-accumulate (pJ); memory energies live with their memories."""

    mac_pj: Picojoules = 0.0


class Arch(_Frozen):
    """A whole accelerator: clock, DRAM, on-chip memories, cores, PE array, register file, NoC."""

    name: str
    description: str = ""
    clock_hz: Hz
    precision_bytes: Precision = 1
    #: Bytes per partial sum (the accumulator width: what a spilled partial sum moves to and from
    #: DRAM and holds on chip); 0: as wide as the data (``precision_bytes``).
    psum_bytes: PsumBytes = 0
    overlap: bool = False
    double_buffering: bool = False
    dram: Dram
    memories: tuple[Memory, ...]
    cores: Cores = Cores()
    pe_array: PEArray = PEArray()
    register_file: RegisterFile = RegisterFile()
    noc: Noc = Noc()
    energy: Energy = Energy()

    @model_validator(mode="after")
    def _consistent(self) -> Arch:
        held: dict[str, str] = {}
        for mem in self.memories:
            for op in mem.operands:
                if op in held:
                    raise ValueError(f"operand {op!r} is held by both {held[op]!r} and {mem.name!r}")
                held[op] = mem.name
        missing = [op.label for op in Operand if op.label not in held]
        if missing:
            raise ValueError(f"no memory holds {missing}; add it to a memory's operands")
        seen: dict[str, str] = {}
        for axis in self.pe_array.axes:
            if axis.mode is AxisMode.FLATTENED:
                for d in axis.dims:
                    if d in seen:
                        raise ValueError(f"dimension {d} is on flattened axes {seen[d]!r} and {axis.name!r}")
                    seen[d] = axis.name
        return self

    # ----------------------------------------------------------------- derived, in cycles
    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram.bandwidth_bytes_per_s / self.clock_hz

    @property
    def burst_latency_cycles(self) -> float:
        return self.dram.burst_latency_ns * 1e-9 * self.clock_hz

    @property
    def noc_bytes_per_cycle(self) -> float | None:
        bw = self.noc.bandwidth_bytes_per_s
        return None if bw is None else bw / self.clock_hz

    def memory_of(self, operand: Operand) -> Memory:
        for mem in self.memories:
            if operand in mem.operand_ids:
                return mem
        raise KeyError(operand)  # unreachable: validated

    def total_pes(self, precision_bytes: int) -> int:
        """PEs (lanes) of one core at the given data width."""
        total = 1
        for axis in self.pe_array.axes:
            total *= axis.lanes(precision_bytes)
        return total

    def peak_macs_per_cycle(self, precision_bytes: int) -> int:
        """MACs per cycle of the whole chip at the given data width."""
        return self.total_pes(precision_bytes) * self.pe_array.macs_per_pe_per_cycle * self.cores.total
