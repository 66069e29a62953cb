"""Accelerator description: frozen dataclasses, checked field by field when loaded (``arch.load``).

Units are in the field names: bytes, bytes/s, Hz, ns, pJ. Derived per-cycle quantities are
properties (``dram_bytes_per_cycle``, ``burst_latency_cycles``) so the cost model works in cycles.
Each field's check (type, sane range) sits in its metadata (``arch.fields``); ``from_dict`` checks a
parsed file, ``dataclasses.replace`` makes variants without checking (a list becomes a tuple).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tileplan.arch.fields import Record, boolean, choice, mapping, nested, optional, real, rule, sequence, text, whole
from tileplan.dims import Dim, Operand
from tileplan.errors import printable

# Sane ranges: generous for any real machine, tight enough that a typo (a missing "e9", an extra
# zero) is caught here instead of printing 300-digit numbers, a false "no mapping fits" or running
# out of memory in the search.
_bytes_per_s = real(1e3, 1e15, "1e3 and 1e15 bytes/s (1 kB/s to 1 PB/s)")
HZ = rule(real(1e3, 1e11, "1e3 and 1e11 Hz (1 kHz to 100 GHz)"))
BYTES_PER_S = rule(_bytes_per_s)
PICOJOULES = rule(real(0, 1e6, "0 and 1e6 pJ"))
NANOSECONDS = rule(real(0, 1e6, "0 and 1e6 ns (1 ms)"))
MEMORY_BYTES = rule(whole(1, 2**40, "1 and 2**40 bytes (1 TiB)"))
BURST_BYTES = rule(whole(1, 2**20, "1 and 2**20 bytes (1 MiB)"))
REGISTER_BYTES = rule(whole(0, 2**30, "0 and 2**30 bytes (1 GiB)"))
_lanes = whole(1, 65536, "1 and 65536 PEs per axis")
_precision = whole(1, 8, "1 and 8 bytes per element")
CORE_COUNT = rule(whole(1, 1024, "1 and 1024"))
SMALL = rule(whole(1, 1024, "1 and 1024"))
PRECISION = rule(_precision)
PSUM_BYTES = rule(whole(0, 8, "0 (the data width) and 8 bytes per element"))
#: A name or description read from a file: control characters escaped (see ``errors.printable``).
NAME = rule(text(printable))
FLAG = rule(boolean)
MAX_CORES = 1024
MAX_PES_PER_CORE = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Dram(Record):
    """Off-chip memory. Time to move a transfer = bytes / bandwidth + bursts * burst latency."""

    bandwidth_bytes_per_s: float = field(metadata=BYTES_PER_S)
    burst_bytes: int = field(default=64, metadata=BURST_BYTES)
    burst_latency_ns: float = field(default=0.0, metadata=NANOSECONDS)
    energy_pj_per_byte: float = field(default=0.0, metadata=PICOJOULES)


def _operands(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("a memory must hold at least one operand (input, weight, output)")
    return tuple(Operand.parse(v).label for v in value)


@dataclass(frozen=True, kw_only=True)
class Memory(Record):
    """An on-chip buffer holding the tiles of ``operands`` (one operand: dedicated; several: shared)."""

    name: str = field(metadata=NAME)
    operands: tuple[str, ...] = field(metadata=rule(sequence(text(), _operands)))
    size_bytes: int = field(metadata=MEMORY_BYTES)
    energy_pj_per_byte: float = field(default=0.0, metadata=PICOJOULES)
    bandwidth_bytes_per_cycle: float | None = field(
        default=None, metadata=rule(optional(real(1e-3, 1e9, "1e-3 and 1e9 bytes/cycle"))))

    @property
    def operand_ids(self) -> tuple[Operand, ...]:
        return tuple(Operand.parse(v) for v in self.operands)


def _split_dims(value: tuple[str, ...]) -> tuple[str, ...]:
    dims = tuple(Dim.parse(v).name for v in value)
    bad = [d for d in dims if Dim[d] in (Dim.C, Dim.R, Dim.S)]
    if bad:
        raise ValueError(f"cores cannot split reduction dimensions {bad}: partial sums would need a "
                         f"cross-core reduction tileplan does not model")
    return dims


@dataclass(frozen=True, kw_only=True)
class Cores(Record):
    """Cores grouped in clusters; a multicast load fills every core of one cluster at once."""

    clusters: int = field(default=1, metadata=CORE_COUNT)
    cores_per_cluster: int = field(default=1, metadata=CORE_COUNT)
    multicast: bool = field(default=True, metadata=FLAG)
    split_dims: tuple[str, ...] = field(default=("N", "G", "K", "P", "Q"),
                                        metadata=rule(sequence(text(), _split_dims)))

    def _validate(self) -> None:
        if self.clusters * self.cores_per_cluster > MAX_CORES:
            raise ValueError(f"{self.clusters} clusters x {self.cores_per_cluster} cores is "
                             f"{self.clusters * self.cores_per_cluster} cores; at most {MAX_CORES} are supported")

    @property
    def total(self) -> int:
        return self.clusters * self.cores_per_cluster


class AxisMode(StrEnum):
    UNROLLED = "unrolled"  # each chosen dim gets an unroll factor; steps = prod ceil(t_d / u_d)
    FLATTENED = "flattened"  # the dims form one vector; steps = ceil(prod t_d / size)


def _axis_dims(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("an axis must list the dimensions it may unroll")
    return tuple(Dim.parse(v).name for v in value)


@dataclass(frozen=True, kw_only=True)
class Axis(Record):
    """One spatial axis of a core's PE array.

    ``size`` may depend on the input precision (``size_by_precision``: bytes -> lanes), as in a
    128-bit datapath doing 16 8-bit or 8 16-bit MACs per cycle.
    """

    name: str = field(metadata=NAME)
    size: int | None = field(default=None, metadata=rule(optional(_lanes)))
    size_by_precision: dict[int, int] | None = field(default=None,
                                                     metadata=rule(optional(mapping(_precision, _lanes))))
    dims: tuple[str, ...] = field(metadata=rule(sequence(text(), _axis_dims)))
    mode: AxisMode = field(default=AxisMode.UNROLLED, metadata=rule(choice(AxisMode)))
    max_dims: int = field(default=1, metadata=rule(whole(1, 8, "1 and 8 dimensions")))

    def _validate(self) -> None:
        if (self.size is None) == (self.size_by_precision is None):
            raise ValueError("give exactly one of size or size_by_precision")
        if self.size_by_precision is not None and not self.size_by_precision:
            raise ValueError("size_by_precision is empty; give the axis length for at least one data width "
                             "(bytes: lanes, e.g. {1: 16, 2: 8})")

    def __hash__(self) -> int:
        """As the generated hash, with ``size_by_precision`` (a dict) hashed by its items: an accelerator
        is a cache key (the register-file variants of a search, the fusion partitions)."""
        table = None if self.size_by_precision is None else tuple(sorted(self.size_by_precision.items()))
        return hash((self.name, self.size, table, self.dims, self.mode, self.max_dims))

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


@dataclass(frozen=True, kw_only=True)
class PEArray(Record):
    """The PEs of one core: axes (rows, columns, vector lanes) that unroll loop dimensions."""

    axes: tuple[Axis, ...] = field(default=(), metadata=rule(sequence(nested(Axis))))
    macs_per_pe_per_cycle: int = field(default=1, metadata=SMALL)

    def _validate(self) -> None:
        pes = 1
        for axis in self.axes:
            pes *= axis.size if axis.size is not None else max((axis.size_by_precision or {1: 1}).values())
        if pes > MAX_PES_PER_CORE:
            raise ValueError(f"the axes make {pes} PEs per core; at most {MAX_PES_PER_CORE} are supported")


@dataclass(frozen=True, kw_only=True)
class RegisterFile(Record):
    """Per-PE register file split by operand (bytes)."""

    weights_bytes: int = field(default=0, metadata=REGISTER_BYTES)
    inputs_bytes: int = field(default=0, metadata=REGISTER_BYTES)
    psums_bytes: int = field(default=0, metadata=REGISTER_BYTES)
    energy_pj_per_access: float = field(default=0.0, metadata=PICOJOULES)


@dataclass(frozen=True, kw_only=True)
class Noc(Record):
    """The network between the on-chip buffer(s) and the PE array."""

    bandwidth_bytes_per_s: float | None = field(default=None, metadata=rule(optional(_bytes_per_s)))
    energy_pj_per_byte: float = field(default=0.0, metadata=PICOJOULES)


@dataclass(frozen=True, kw_only=True)
class Energy(Record):
    """Energy per multiply-accumulate (pJ); memory energies live with their memories."""

    mac_pj: float = field(default=0.0, metadata=PICOJOULES)


@dataclass(frozen=True, kw_only=True)
class Arch(Record):
    """A whole accelerator: clock, DRAM, on-chip memories, cores, PE array, register file, NoC."""

    name: str = field(metadata=NAME)
    description: str = field(default="", metadata=NAME)
    clock_hz: float = field(metadata=HZ)
    precision_bytes: int = field(default=1, metadata=PRECISION)
    #: Bytes per partial sum (the accumulator width: what a spilled partial sum moves to and from
    #: DRAM and holds on chip); 0: as wide as the data (``precision_bytes``).
    psum_bytes: int = field(default=0, metadata=PSUM_BYTES)
    overlap: bool = field(default=False, metadata=FLAG)
    double_buffering: bool = field(default=False, metadata=FLAG)
    dram: Dram = field(metadata=rule(nested(Dram)))
    memories: tuple[Memory, ...] = field(metadata=rule(sequence(nested(Memory))))
    cores: Cores = field(default=Cores(), metadata=rule(nested(Cores)))
    pe_array: PEArray = field(default=PEArray(), metadata=rule(nested(PEArray)))
    register_file: RegisterFile = field(default=RegisterFile(), metadata=rule(nested(RegisterFile)))
    noc: Noc = field(default=Noc(), metadata=rule(nested(Noc)))
    energy: Energy = field(default=Energy(), metadata=rule(nested(Energy)))

    def _validate(self) -> None:
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
        for axis in self.pe_array.axes:
            if axis.size_by_precision is not None and self.precision_bytes not in axis.size_by_precision:
                raise ValueError(f"axis {axis.name!r} has no size for the machine's {self.precision_bytes}-byte "
                                 f"data (precision_bytes); its size_by_precision covers "
                                 f"{sorted(axis.size_by_precision)}: add {self.precision_bytes}")

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
