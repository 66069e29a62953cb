"""The vocabulary: the eight loop dimensions of a layer and the three operands.

A layer is the loop nest ``O[n][g,k][p][q] += W[g,k][c][r][s] * I[n][g,c][p*stride+r*dil][q*stride+s*dil]``.
Arrays over dimensions are always indexed in ``DIMS`` order (N, G, K, C, P, Q, R, S).
"""

from __future__ import annotations

from enum import Enum, IntEnum


class Dim(IntEnum):
    """Loop dimensions; the integer value is the column in every per-dimension array."""

    N = 0  # batch
    G = 1  # groups
    K = 2  # output channels per group
    C = 3  # input channels per group
    P = 4  # output rows
    Q = 5  # output columns
    R = 6  # filter rows
    S = 7  # filter columns

    @classmethod
    def parse(cls, name: str) -> Dim:
        """Dimension from its letter (case-insensitive), e.g. ``Dim.parse("k") is Dim.K``."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown dimension {name!r}; expected one of {', '.join(d.name for d in cls)}") from None


DIMS: tuple[Dim, ...] = tuple(Dim)
NDIMS = len(DIMS)


class Operand(IntEnum):
    """The three tensors of a layer; the value is the operand's column in per-operand arrays."""

    INPUT = 0
    WEIGHT = 1
    OUTPUT = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, name: str) -> Operand:
        key = name.strip().lower()
        aliases = {"input": cls.INPUT, "in": cls.INPUT, "ifmap": cls.INPUT, "i": cls.INPUT,
                   "weight": cls.WEIGHT, "weights": cls.WEIGHT, "w": cls.WEIGHT, "filter": cls.WEIGHT,
                   "output": cls.OUTPUT, "out": cls.OUTPUT, "ofmap": cls.OUTPUT, "o": cls.OUTPUT}
        if key not in aliases:
            raise ValueError(f"unknown operand {name!r}; expected input, weight or output")
        return aliases[key]


OPERANDS: tuple[Operand, ...] = tuple(Operand)

#: Loop dimensions that index each operand (input rows/cols are indexed by P,R and Q,S jointly).
RELEVANT: dict[Operand, frozenset[Dim]] = {
    Operand.INPUT: frozenset({Dim.N, Dim.G, Dim.C, Dim.P, Dim.Q, Dim.R, Dim.S}),
    Operand.WEIGHT: frozenset({Dim.G, Dim.K, Dim.C, Dim.R, Dim.S}),
    Operand.OUTPUT: frozenset({Dim.N, Dim.G, Dim.K, Dim.P, Dim.Q}),
}

#: Dimensions over which partial sums accumulate.
REDUCTION: frozenset[Dim] = frozenset({Dim.C, Dim.R, Dim.S})


class StorageDim(Enum):
    """Dimensions of a tensor as stored in DRAM. Input H/W are indexed by (P,R) and (Q,S)."""

    N = "N"
    G = "G"
    K = "K"
    C = "C"
    H = "H"
    W = "W"
    P = "P"
    Q = "Q"
    R = "R"
    S = "S"


#: Storage dimensions of each tensor in default (row-major NCHW / GKCRS) order, outermost first,
#: and the loop dimensions that index each of them.
STORAGE: dict[Operand, tuple[tuple[str, tuple[Dim, ...]], ...]] = {
    Operand.INPUT: (("N", (Dim.N,)), ("G", (Dim.G,)), ("C", (Dim.C,)), ("H", (Dim.P, Dim.R)),
                    ("W", (Dim.Q, Dim.S))),
    Operand.WEIGHT: (("G", (Dim.G,)), ("K", (Dim.K,)), ("C", (Dim.C,)), ("R", (Dim.R,)), ("S", (Dim.S,))),
    Operand.OUTPUT: (("N", (Dim.N,)), ("G", (Dim.G,)), ("K", (Dim.K,)), ("P", (Dim.P,)), ("Q", (Dim.Q,))),
}
