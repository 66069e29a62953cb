"""Three witnesses on a fused group: the fused model's prediction, the fused program's counted DRAM
traffic and executed MACs, and the layers computed one by one on whole tensors (bit-exact output)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.dims import Dim
from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.block_program import block_reference, fused_program, run_fused_program
from tileplan.fusion.group import FusedGroup, FusedMapping
from tileplan.fusion.program import FusedProgram
from tileplan.program.reference import reference_output
from tileplan.workload.layer import OpKind


@dataclass(frozen=True)
class FusedVerify:
    """Predicted (model) and counted (executed program) DRAM bytes and bursts per operand (input,
    weight, output), MACs, the output check, the program's size, its peak on-chip bytes per memory and
    the model's footprint per memory (the peak may be lower: Eq. 8 sizes a reuse buffer for the widest
    window, border windows are narrower)."""

    group: str
    mapping: str
    bit_exact: bool
    predicted_read_bytes: tuple[int, int, int]
    predicted_write_bytes: int
    predicted_bursts: tuple[int, int, int]
    predicted_macs: int
    counted_read_bytes: tuple[int, int, int]
    counted_write_bytes: int
    counted_bursts: tuple[int, int, int]
    counted_macs: int
    instructions: int
    peak_bytes: dict[str, int]
    footprint_bytes: dict[str, int]

    @property
    def traffic_match(self) -> bool:
        return (self.predicted_read_bytes == self.counted_read_bytes
                and self.predicted_write_bytes == self.counted_write_bytes
                and self.predicted_bursts == self.counted_bursts)

    @property
    def within_footprint(self) -> bool:
        """Whether the program never held more in any memory than the model's footprint says."""
        return all(self.peak_bytes[name] <= self.footprint_bytes[name] for name in self.peak_bytes)

    @property
    def ok(self) -> bool:
        return (self.bit_exact and self.traffic_match and self.predicted_macs == self.counted_macs
                and self.within_footprint)


def reference_inputs(group: FusedGroup, m: int, chain: np.ndarray, sides: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs ``reference_output`` takes for layer ``m`` of ``group``: the previous layer's output
    ``chain`` and the layer's DRAM inputs ``sides`` (an add's tensors, or one concatenated tensor)."""
    layer = group.layers[m]
    if layer.op is OpKind.ADD:
        return [chain, *sides]
    if layer.op is not OpKind.CONCAT:
        return [chain]
    stack = np.zeros((layer.n, layer.c_in, layer.h, layer.w), dtype=np.int64)
    at = group.chain_offset(m)
    stack[:, at:at + chain.shape[1]] = chain
    for spec, data in zip(group.sides[m], sides, strict=True):
        stack[:, spec.offset:spec.offset + spec.channels] = data
    return [stack]


def chain_reference(prog: FusedProgram, x: np.ndarray, weights: list[np.ndarray | None],
                    sides: list[list[np.ndarray]]) -> np.ndarray:
    """The group's layers computed one by one on whole tensors (a block group: every on-chip tensor by
    its source): the output its fused program must reproduce."""
    group = prog.group
    if group.is_block:
        return block_reference(group, x, weights, sides)
    y = x
    for m, (layer, w) in enumerate(zip(prog.layers, weights, strict=True)):
        y = reference_output(layer, reference_inputs(group, m, y, sides[m]), w)
    return y


def verify_fused(group: FusedGroup, arch: Arch, mapping: FusedMapping, *, seed: int = 0) -> FusedVerify:
    """Generate and run the program of ``mapping`` on random integers and compare (see the module)."""
    rng = np.random.default_rng(seed)
    cost = evaluate_fused(group, arch, mapping)
    prog = fused_program(group, arch, mapping)
    layers = prog.layers
    first = layers[0]
    x = rng.integers(-3, 4, size=(first.n, group.input_channels(), first.h, first.w))
    weights = [rng.integers(-2, 3, size=(x_.k_out, x_.dims[Dim.C], x_.r, x_.s)) if x_.has_weights else None
               for x_ in layers]
    sides = [[rng.integers(-3, 4, size=(x_.n, s.channels, x_.h, x_.w)) for s in specs]
             for x_, specs in zip(layers, group.sides, strict=True)]
    res = run_fused_program(prog, x, weights, sides)
    c = cost.cost
    return FusedVerify(
        group.name, str(mapping), bool(np.array_equal(res.output, chain_reference(prog, x, weights, sides))),
        tuple(int(v) for v in c.dram_read_bytes[0]), int(c.dram_write_bytes[0]),  # type: ignore[arg-type]
        tuple(int(v) for v in c.dram_bursts[0]), int(cost.executed_macs[0]),  # type: ignore[arg-type]
        tuple(res.read_bytes), res.write_bytes, tuple(res.bursts), res.macs,  # type: ignore[arg-type]
        len(prog.instructions), dict(res.peak_bytes),
        {mem.name: int(b) for mem, b in zip(arch.memories, c.footprint_bytes[0], strict=True)})
