"""Bytes per element of a layer's operands (re-exported by ``workload.layer``)."""

from __future__ import annotations

from dataclasses import dataclass

from tileplan.dims import Operand
from tileplan.errors import WorkloadError

__all__ = ["Precision"]


@dataclass(frozen=True, slots=True)
class Precision:
    """Bytes per element of each operand; ``psum`` is the accumulator width (defaults to output)."""

    input: int = 1
    weight: int = 1
    output: int = 1
    psum: int = 0

    def __post_init__(self) -> None:
        for name in ("input", "weight", "output"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise WorkloadError(f"precision.{name} must be a positive number of bytes, got {value!r}")
        if self.psum == 0:
            object.__setattr__(self, "psum", self.output)
        elif self.psum < 1:
            raise WorkloadError(f"precision.psum must be a positive number of bytes, got {self.psum!r}")

    @classmethod
    def uniform(cls, nbytes: int, psum: int = 0) -> Precision:
        """Every operand ``nbytes`` wide, and the accumulator ``psum`` bytes (0: ``nbytes`` too).

        >>> Precision.uniform(1, 4)
        Precision(input=1, weight=1, output=1, psum=4)
        """
        return cls(nbytes, nbytes, nbytes, psum or nbytes)

    def of(self, operand: Operand) -> int:
        """Bytes per element of ``operand``."""
        return (self.input, self.weight, self.output)[operand]
