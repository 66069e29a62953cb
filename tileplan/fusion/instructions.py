"""The instruction set of fused programs: :class:`Instr` (one load, compute, store, drop, keep or step
over the group's tensors), :class:`FusedProgram` (a fused mapping's instructions on an accelerator) and
:class:`FusedProgramError` (what the executors raise when a program reads data that is not on chip or
overflows an on-chip memory). ``fusion.program`` writes these programs, ``fusion.executor`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tileplan.arch.spec import Arch
from tileplan.errors import TileplanError
from tileplan.fusion.group import FusedGroup, FusedMapping
from tileplan.workload.layer import Layer

Range = tuple[int, int]


class FusedProgramError(TileplanError):
    """A fused program reads data that is not on chip, or overflows an on-chip memory."""

    def __init__(self, message: str, memory: str | None = None) -> None:
        super().__init__(message)
        self.memory = memory


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction: ``op`` is LOAD_INPUT, LOAD_SIDE (``c``: the side's channels in the layer's
    input stack), LOAD_WEIGHT, COMPUTE, STORE, DROP (a consumed chunk of a layer's input map: input
    channels ``c`` of the groups computing outputs ``k``), FREE_WEIGHT (a layer's on-chip weights,
    after a chunk pass), KEEP (a box of a layer's input map a later step reads: at the next STEP
    everything else of the maps is dropped)
    or STEP; ``layer`` the layer index; ``n``/``k``/``c``/
    ``rows``/``cols`` the element ranges it covers (k: output channels of all groups, c: input
    channels of one group)."""

    op: str
    layer: int = 0
    n: Range = (0, 0)
    k: Range = (0, 0)
    c: Range = (0, 0)
    rows: Range = (0, 0)
    cols: Range = (0, 0)

    def __str__(self) -> str:
        if self.op == "STEP":
            return "STEP"
        def r(x: Range) -> str:
            return f"{x[0]}:{x[1]}"
        return f"{self.op} L{self.layer} n{r(self.n)} k{r(self.k)} c{r(self.c)} h{r(self.rows)} w{r(self.cols)}"


@dataclass(frozen=True)
class FusedProgram:
    """The instructions of one fused mapping of a group on an accelerator."""

    group: FusedGroup
    arch: Arch
    mapping: FusedMapping
    layers: tuple[Layer, ...]
    instructions: tuple[Instr, ...]

    def text(self) -> str:
        head = [f"# fused group {self.group.name} on {self.arch.name}: {self.mapping}"]
        return "\n".join(head + [str(i) for i in self.instructions]) + "\n"
