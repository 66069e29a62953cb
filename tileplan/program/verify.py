"""Three witnesses on one layer: generate its program, run it on random integers, and compare the
output with the direct reference and the counted DRAM traffic with the cost model's prediction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.levels import evaluate_mappings
from tileplan.cost.problem import Problem
from tileplan.mapping import Mapping
from tileplan.program.elementwise import FLOAT_KINDS, ew_kind
from tileplan.program.executor import execute
from tileplan.program.generate import generate_program
from tileplan.program.ir import Program
from tileplan.program.reference import reference_output
from tileplan.workload.layer import Layer

_OPS = ("input", "weight", "output")


@dataclass(frozen=True)
class VerifyResult:
    """Predicted (cost model) and counted (executed program) DRAM traffic of one layer.

    Bytes are DRAM bytes; bursts are TSO bursts (``ceil(run / burst)`` per contiguous run), per
    operand (input, weight, output). Output reads are partial sums read back; output bursts count
    reads and writes. ``aligned_bursts`` (distinct burst-aligned blocks) is informative only.
    ``bit_exact`` compares the program's output with :func:`reference_output` (float kinds: within a
    relative 1e-9).
    """

    layer: str
    feasible: bool
    bit_exact: bool
    predicted_read_bytes: tuple[int, int, int]
    predicted_write_bytes: int
    predicted_bursts: tuple[int, int, int]
    counted_read_bytes: tuple[int, int, int]
    counted_write_bytes: int
    counted_bursts: tuple[int, int, int]
    aligned_bursts: tuple[int, int, int]
    instructions: int

    @property
    def predicted_bytes(self) -> tuple[int, int, int]:
        """Predicted DRAM bytes per operand (output: partial-sum reads plus writes)."""
        r = self.predicted_read_bytes
        return (r[0], r[1], r[2] + self.predicted_write_bytes)

    @property
    def counted_bytes(self) -> tuple[int, int, int]:
        """Counted DRAM bytes per operand (output: partial-sum reads plus writes)."""
        r = self.counted_read_bytes
        return (r[0], r[1], r[2] + self.counted_write_bytes)

    @property
    def bytes_match(self) -> bool:
        return (self.predicted_read_bytes == self.counted_read_bytes
                and self.predicted_write_bytes == self.counted_write_bytes)

    @property
    def bursts_match(self) -> bool:
        return self.predicted_bursts == self.counted_bursts

    @property
    def ok(self) -> bool:
        """The output is bit-exact and the model predicted every byte and burst the program moved."""
        return self.bit_exact and self.bytes_match and self.bursts_match

    def to_dict(self) -> dict[str, object]:
        """Plain numbers for reports and JSON (per-operand lists are input, weight, output)."""
        return {"layer": self.layer, "ok": self.ok, "feasible": self.feasible, "bit_exact": self.bit_exact,
                "predicted_bytes": list(self.predicted_bytes), "counted_bytes": list(self.counted_bytes),
                "predicted_bursts": list(self.predicted_bursts), "counted_bursts": list(self.counted_bursts),
                "aligned_bursts": list(self.aligned_bursts), "instructions": self.instructions,
                "mismatches": self.mismatches()}

    def mismatches(self) -> list[str]:
        """One line per disagreement, e.g. ``input bytes: predicted 512, counted 640``."""
        out = [] if self.bit_exact else ["output differs from the direct reference"]
        for name, pred, got in (("bytes", self.predicted_bytes, self.counted_bytes),
                                ("bursts", self.predicted_bursts, self.counted_bursts)):
            out += [f"{op} {name}: predicted {a}, counted {b}"
                    for op, a, b in zip(_OPS, pred, got, strict=True) if a != b]
        if self.predicted_write_bytes != self.counted_write_bytes:
            out.append(f"output write bytes: predicted {self.predicted_write_bytes}, counted "
                       f"{self.counted_write_bytes}")
        return out


def random_operands(layer: Layer, rng: np.random.Generator, low: int = -8, high: int = 8
                    ) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Random integer input tensor(s) (N, G*C, H, W) and weight (G*K, C, R, S) in ``[low, high)``."""
    shape = (layer.n, layer.c_in, layer.h, layer.w)
    wshape = (layer.k_out, layer.c_in // layer.groups, layer.r, layer.s)
    if is_float(layer):  # softmax, norms, activations, rope: standard normal floats
        return ([rng.standard_normal(shape) for _ in range(layer.input_count)],
                rng.standard_normal(wshape) if layer.has_weight_operand else None)
    inputs = [rng.integers(low, high, size=shape, dtype=np.int64) for _ in range(layer.input_count)]
    weight = None
    if layer.has_weight_operand:  # a weight, a matmul's activation B, a broadcast row
        weight = rng.integers(low, high, size=wshape, dtype=np.int64)
    return inputs, weight


def is_float(layer: Layer) -> bool:
    """Whether ``layer``'s program computes in float64 (its output is compared within 1e-9)."""
    kind = ew_kind(layer)
    return kind is not None and kind in FLOAT_KINDS


def outputs_match(layer: Layer, got: np.ndarray, want: np.ndarray) -> bool:
    """Equal outputs: bit-exact for integer layers, within a relative 1e-9 for the float kinds."""
    if is_float(layer):
        return bool(got.shape == want.shape and np.allclose(got, want, rtol=1e-9, atol=1e-12))
    return bool(np.array_equal(got, want))


class Counted(Protocol):
    """What a run of a program counted: the executor's :class:`ExecResult`, or a C binary's run."""

    @property
    def output(self) -> np.ndarray: ...
    @property
    def read_bytes(self) -> tuple[int, int, int]: ...
    @property
    def write_bytes(self) -> int: ...
    @property
    def bursts(self) -> tuple[int, int, int]: ...
    @property
    def aligned_bursts(self) -> tuple[int, int, int]: ...
    @property
    def instructions(self) -> int: ...


def compare(layer: Layer, arch: Arch, mapping: Mapping, program: Program, result: Counted,
            expected: np.ndarray | None) -> VerifyResult:
    """Set an execution's counts beside the model's prediction (``expected``: reference output,
    ``None`` when the layer computes nothing, as a concat)."""
    problem = Problem(layer, arch)
    cost = evaluate_mappings(problem, [mapping])

    def ints(values: np.ndarray) -> tuple[int, int, int]:
        return (int(round(values[0])), int(round(values[1])), int(round(values[2])))

    exact = expected is None or outputs_match(layer, result.output, expected)
    return VerifyResult(layer=problem.layer.name, feasible=bool(cost.feasible[0]), bit_exact=exact,
                        predicted_read_bytes=ints(cost.dram_read_bytes[0]),
                        predicted_write_bytes=int(round(cost.dram_write_bytes[0])),
                        predicted_bursts=ints(cost.dram_bursts[0]),
                        counted_read_bytes=result.read_bytes, counted_write_bytes=result.write_bytes,
                        counted_bursts=result.bursts, aligned_bursts=result.aligned_bursts,
                        instructions=result.instructions)


def verify_layer(layer: Layer, arch: Arch, mapping: Mapping, *, seed: int = 0) -> VerifyResult:
    """Generate ``layer``'s program under ``mapping``, run it on random integers (``seed``), and
    compare its output with the direct reference and its DRAM bytes/bursts with the cost model.

    Raises ``ProgramError`` (``OnChipOverflowError``) when a tile does not fit an on-chip memory.
    """
    layer = Problem(layer, arch).layer
    program = generate_program(layer, arch, mapping)
    inputs, weight = random_operands(layer, np.random.default_rng(seed))
    result = execute(program, inputs, weight)
    expected = None if not layer.moves_data else reference_output(layer, inputs, weight)
    return compare(layer, arch, mapping, program, result, expected)


__all__ = ["Counted", "VerifyResult", "compare", "outputs_match", "random_operands", "verify_layer"]
