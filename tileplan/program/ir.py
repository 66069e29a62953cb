"""The execution-plan IR: e-PlaNNer's three sections (thesis ch. 7, Fig. 7.1) as dataclasses.

* ``[info]``: the layer (op, stride, pads, dilation, groups), the DRAM burst size, the core count and
  the DRAM tensors (:class:`Tensor`: storage dims, layout, bytes per element, base byte address).
* ``[var]``: the on-chip memories of every core (:class:`Memory`, sizes in bytes as the accelerator
  configures them) and the DRAM tiles (:class:`Tile`: element offset in the tensor's layout and the
  ``start:stop`` element range of each storage dimension).
* ``[text]``: one instruction stream per core (:class:`Stream`).

Tensors carry five *storage dimensions* in a fixed canonical order, whatever their DRAM layout:
input ``(n, g, c, h, w)``, weight ``(g, k, c, r, s)``, output and partial sums ``(n, g, k, p, q)``;
a layout letter ``C``/``K`` stands for the group dimension followed by the channel dimension.
On chip, a tile is stored densely in canonical order, one element every ``on-chip bytes`` bytes.

Instructions (``Loc`` is ``MEMORY[byte offset]`` of the executing core):

=====================================================  ============================================
``LOAD loc TILE [-> (cores)]``                         DRAM tile -> on chip (multicast to ``cores``)
``STORE TILE loc``                                     on chip -> DRAM (``PSUM_i``: partial sums)
``INIT loc TILE``                                      start an output tile at the op's identity
``CONV OUT IN WT (sh,sw) (t,b,l,r) [region]``          accumulate a convolution over ``region``
``POOL OUT IN max|avg (sh,sw) (t,b,l,r) [region]``     max or sum over windows (avg: sum, then DIV)
``ADD OUT IN IN1 ... [region]``                        element-wise sum of equally-shaped tiles
``EW OUT kind/row IN... [WT] [region]``                an element-wise or row-wise op (``elementwise``)
``DIV TILE d``                                         floor-divide a resident output tile by ``d``
``SYNC``                                               barrier of every core (before multicasts)
=====================================================  ============================================

``region`` lists ``start:stop`` of the eight loop dimensions N G K C P Q R S in global coordinates;
``(t,b,l,r)`` are the padded rows/columns of the input window the region reads (e-PlaNNer's pads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tileplan.cost.model import storage_order
from tileplan.dims import Operand
from tileplan.workload.layer import OpKind

Range = tuple[int, int]
Box = tuple[Range, ...]

#: Canonical storage dimensions of each operand's tensor (lower case, as the IR comments show them).
STORAGE_NAMES: dict[Operand, tuple[str, ...]] = {
    Operand.INPUT: ("n", "g", "c", "h", "w"),
    Operand.WEIGHT: ("g", "k", "c", "r", "s"),
    Operand.OUTPUT: ("n", "g", "k", "p", "q"),
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INPUT_NAME = re.compile(r"INPUT[0-9]*\Z")


def is_identifier(name: str) -> bool:
    """Whether ``name`` can name a memory, tensor or tile in the IR."""
    return bool(_NAME.match(name))


def tensor_operand(name: str) -> Operand | None:
    """Operand of the DRAM tensor called ``name`` (``INPUT``, ``INPUT1``.., ``WEIGHT``, ``OUTPUT``,
    ``PSUM``), or ``None`` for any other name."""
    if _INPUT_NAME.match(name):
        return Operand.INPUT
    return {"WEIGHT": Operand.WEIGHT, "OUTPUT": Operand.OUTPUT, "PSUM": Operand.OUTPUT}.get(name)


def box_elements(box: Box) -> int:
    """Elements in a box of ``(start, stop)`` ranges."""
    total = 1
    for lo, hi in box:
        total *= hi - lo
    return total


@dataclass(frozen=True, slots=True)
class Tensor:
    """A DRAM tensor: canonical storage-dim ``shape``, ``layout`` letters (outermost first), bytes per
    element in DRAM, and its ``base`` byte address (burst-aligned). ``onchip_bytes`` is the width of
    one element on chip (partial-sum width for ``OUTPUT``/``PSUM``)."""

    name: str
    shape: tuple[int, ...]
    layout: str
    elem_bytes: int
    onchip_bytes: int
    base: int
    line: int = field(default=0, compare=False)

    @property
    def operand(self) -> Operand:
        op = tensor_operand(self.name)
        assert op is not None, self.name
        return op

    @property
    def elements(self) -> int:
        return box_elements(tuple((0, s) for s in self.shape))

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies in DRAM."""
        return self.elements * self.elem_bytes

    @property
    def strides(self) -> tuple[int, ...]:
        """Element stride of every canonical storage dimension in the DRAM layout."""
        strides = [0] * 5
        acc = 1
        for e in reversed(storage_order(self.operand, self.layout)):
            strides[e] = acc
            acc *= self.shape[e]
        return tuple(strides)

    def offset(self, box: Box) -> int:
        """Element offset of ``box``'s first element in the layout (as e-PlaNNer's tile offsets)."""
        return sum(lo * st for (lo, _), st in zip(box, self.strides, strict=True))


@dataclass(frozen=True, slots=True)
class Memory:
    """An on-chip memory of every core: ``size_bytes`` as configured, and the operands it holds."""

    name: str
    size_bytes: int
    operands: tuple[Operand, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Tile:
    """A box of a DRAM tensor; the tensor is the name up to the last ``_`` (``INPUT1_4``: ``INPUT1``).

    ``offset`` is the element offset of the box in the tensor's layout; ``box`` the canonical
    ``(start, stop)`` element ranges."""

    name: str
    offset: int
    box: Box
    line: int = field(default=0, compare=False)

    @property
    def tensor(self) -> str:
        return self.name.rsplit("_", 1)[0]

    @property
    def elements(self) -> int:
        return box_elements(self.box)


@dataclass(frozen=True, slots=True)
class Loc:
    """A byte offset inside an on-chip memory of the executing core."""

    memory: str
    offset: int

    def __str__(self) -> str:
        return f"{self.memory}[{self.offset}]"


@dataclass(frozen=True, slots=True)
class Load:
    """``LOAD dst src``: DRAM tile ``src`` into ``dst``; ``cores`` non-empty: multicast to those cores."""

    dst: Loc
    src: str
    cores: tuple[int, ...] = ()
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Store:
    """``STORE dst src``: the output tile at ``src`` to DRAM tile ``dst`` (``PSUM_*``: partial sums)."""

    dst: str
    src: Loc
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Init:
    """``INIT dst tile``: output tile ``tile`` starts at ``dst`` holding the op's identity (0, or the
    smallest integer for max pooling)."""

    dst: Loc
    tile: str
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Conv:
    """``CONV out in wt stride pads region``: ``out += conv(in, wt)`` over the loop ``region``."""

    out: str
    inp: str
    wt: str
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]
    region: Box
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Pool:
    """``POOL out in kind stride pads region``: max (``kind='max'``) or sum (``'avg'``) over windows."""

    out: str
    inp: str
    kind: str
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]
    region: Box
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Add:
    """``ADD out in... region``: ``out += sum(inputs)`` element-wise over ``region``."""

    out: str
    inputs: tuple[str, ...]
    region: Box
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Ew:
    """``EW out kind/row in... [wt] region``: ``out = kind(inputs[, wt])`` over ``region`` (softmax,
    layernorm, rmsnorm, gelu, silu, mul, rope, add with a broadcast row). ``row`` is the channels of one
    softmax row / rope head (0: all channels); ``wt`` a norm's scale or the broadcast row."""

    out: str
    kind: str
    row: int
    inputs: tuple[str, ...]
    wt: str | None
    region: Box
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Div:
    """``DIV tile divisor``: floor-divide the resident output tile (average pooling's last step)."""

    tile: str
    divisor: int
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Sync:
    """``SYNC``: every core reaches it before any core goes on (multicasts follow a SYNC)."""

    line: int = field(default=0, compare=False)


Instruction = Load | Store | Init | Conv | Pool | Add | Ew | Div | Sync
Compute = Conv | Pool | Add | Ew


@dataclass(frozen=True, slots=True)
class Stream:
    """The instruction stream of one core (``core`` numbers cores 0.. in the program)."""

    core: int
    cluster: int
    instructions: tuple[Instruction, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Program:
    """A whole execution plan of one layer (see the module docstring)."""

    name: str
    op: OpKind
    stride: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilation: tuple[int, int]
    groups: int
    burst_bytes: int
    tensors: tuple[Tensor, ...]
    memories: tuple[Memory, ...]
    tiles: tuple[Tile, ...]
    streams: tuple[Stream, ...]
    _tensor: dict[str, Tensor] = field(init=False, repr=False, compare=False)
    _tile: dict[str, Tile] = field(init=False, repr=False, compare=False)
    _memory: dict[str, Memory] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tensor", {t.name: t for t in self.tensors})
        object.__setattr__(self, "_tile", {t.name: t for t in self.tiles})
        object.__setattr__(self, "_memory", {m.name: m for m in self.memories})

    def tensor(self, name: str) -> Tensor:
        return self._tensor[name]

    def tile(self, name: str) -> Tile:
        return self._tile[name]

    def memory(self, name: str) -> Memory:
        return self._memory[name]

    def has_tile(self, name: str) -> bool:
        return name in self._tile

    def has_memory(self, name: str) -> bool:
        return name in self._memory

    def has_tensor(self, name: str) -> bool:
        return name in self._tensor

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        """The input tensors (several for an element-wise add)."""
        return tuple(t for t in self.tensors if t.operand is Operand.INPUT)

    @property
    def weight(self) -> Tensor | None:
        return self._tensor.get("WEIGHT")

    @property
    def output(self) -> Tensor:
        return self._tensor["OUTPUT"]

    @property
    def psum(self) -> Tensor:
        return self._tensor["PSUM"]

    @property
    def instruction_count(self) -> int:
        return sum(len(s.instructions) for s in self.streams)
