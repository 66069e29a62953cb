"""Static checks of a program: every name resolves, every tile lies inside its tensor with the offset
its layout gives, every instruction names tiles of the right tensors. Errors name the IR line."""

from __future__ import annotations

from tileplan.dims import Operand
from tileplan.mapping import LAYOUT_LETTERS
from tileplan.program.errors import ProgramError
from tileplan.program.ir import (
    Add,
    Conv,
    Div,
    Init,
    Load,
    Loc,
    Memory,
    Pool,
    Program,
    Store,
    Tile,
    is_identifier,
    tensor_operand,
)


def _check_tensors(p: Program) -> None:
    seen: set[str] = set()
    for t in p.tensors:
        op = tensor_operand(t.name)
        if op is None:
            raise ProgramError(f"unknown tensor {t.name!r}; tensors are INPUT, INPUT1.., WEIGHT, OUTPUT, "
                               f"PSUM", line=t.line)
        if t.name in seen:
            raise ProgramError(f"tensor {t.name} is declared twice", line=t.line)
        seen.add(t.name)
        if sorted(t.layout) != sorted(LAYOUT_LETTERS[op]):
            raise ProgramError(f"layout of {t.name} must be a permutation of {LAYOUT_LETTERS[op]}, got "
                               f"{t.layout!r}", line=t.line)
        if t.base % p.burst_bytes:
            raise ProgramError(f"base address {t.base} of {t.name} is not a multiple of the "
                               f"{p.burst_bytes}-byte burst", line=t.line)
        groups = t.shape[0 if op is Operand.WEIGHT else 1]
        if groups != p.groups:
            raise ProgramError(f"{t.name} has {groups} groups but GROUPS is {p.groups}", line=t.line)
    needed = ["INPUT", "OUTPUT", "PSUM"] + (["WEIGHT"] if p.op.multiplies else [])
    missing = [n for n in needed if n not in seen]
    if missing:
        raise ProgramError(f"[info] lacks tensor(s) {', '.join(missing)} for a {p.op.value} layer", line=1)
    if "WEIGHT" in seen and not p.op.multiplies:
        raise ProgramError(f"a {p.op.value} layer has no WEIGHT tensor", line=p.tensor("WEIGHT").line)
    if (p.output.shape, p.output.layout, p.output.onchip_bytes) != (p.psum.shape, p.psum.layout,
                                                                     p.psum.onchip_bytes):
        raise ProgramError("PSUM must have the shape, layout and on-chip width of OUTPUT (they share "
                           "on-chip tiles)", line=p.psum.line)


def _check_vars(p: Program) -> None:
    names: dict[str, int] = {}
    items: list[Memory | Tile] = [*p.memories, *p.tiles]
    for item in items:
        if not is_identifier(item.name):
            raise ProgramError(f"{item.name!r} is not a valid name", line=item.line)
        if item.name in names or p.has_tensor(item.name):
            raise ProgramError(f"{item.name} is declared twice", line=item.line)
        names[item.name] = item.line
    for tile in p.tiles:
        if not p.has_tensor(tile.tensor) or not tile.name[len(tile.tensor) + 1:].isdigit():
            raise ProgramError(f"tile {tile.name} does not name a tensor: tiles are TENSOR_number",
                               line=tile.line)
        tensor = p.tensor(tile.tensor)
        for (_, hi), size in zip(tile.box, tensor.shape, strict=True):
            if hi > size:
                raise ProgramError(f"tile {tile.name} reaches {hi} beyond the {size} of {tensor.name}",
                                   line=tile.line)
        if tile.elements and tile.offset != tensor.offset(tile.box):
            raise ProgramError(f"tile {tile.name} starts at element {tensor.offset(tile.box)} of "
                               f"{tensor.name} in layout {tensor.layout}, not {tile.offset}", line=tile.line)


def _tile(p: Program, name: str, line: int, *allowed: str) -> None:
    if not p.has_tile(name):
        raise ProgramError(f"unknown tile {name}; declare it in [var]", line=line)
    tensor = p.tile(name).tensor
    if not any(tensor == a or (a == "INPUT*" and tensor_operand(tensor) is Operand.INPUT) for a in allowed):
        raise ProgramError(f"{name} is a tile of {tensor}; expected a tile of {' or '.join(allowed)}",
                           line=line)


def _loc(p: Program, loc: Loc, line: int) -> None:
    if not p.has_memory(loc.memory):
        raise ProgramError(f"unknown memory {loc.memory}; declare it in [var]", line=line)


def validate(p: Program) -> None:
    """Raise :class:`ProgramError` (naming the line) at the first inconsistency of ``p``."""
    if not p.name or "//" in p.name or "\n" in p.name:
        raise ProgramError(f"layer name {p.name!r} must be non-empty without '//' or line breaks", line=1)
    _check_tensors(p)
    _check_vars(p)
    clusters = {s.core: s.cluster for s in p.streams}
    for stream in p.streams:
        for ins in stream.instructions:
            line = ins.line
            if isinstance(ins, Load):
                _loc(p, ins.dst, line)
                _tile(p, ins.src, line, "INPUT*", "WEIGHT", "PSUM")
                for core in ins.cores:
                    if clusters.get(core) != stream.cluster:
                        raise ProgramError(f"multicast to core {core}, which is not in cluster "
                                           f"{stream.cluster}", line=line)
            elif isinstance(ins, Store):
                _loc(p, ins.src, line)
                _tile(p, ins.dst, line, "OUTPUT", "PSUM")
            elif isinstance(ins, Init):
                _loc(p, ins.dst, line)
                _tile(p, ins.tile, line, "OUTPUT")
            elif isinstance(ins, Conv | Pool | Add):
                want = {Conv: p.op.multiplies, Pool: p.op.is_pool, Add: p.op.value == "add"}[type(ins)]
                if not want:
                    raise ProgramError(f"{type(ins).__name__.upper()} does not compute a {p.op.value} layer",
                                       line=line)
                _tile(p, ins.out, line, "OUTPUT")
                for name in (ins.inputs if isinstance(ins, Add) else (ins.inp,)):
                    _tile(p, name, line, "INPUT*")
                if isinstance(ins, Conv):
                    _tile(p, ins.wt, line, "WEIGHT")
            elif isinstance(ins, Div):
                _tile(p, ins.tile, line, "OUTPUT")
