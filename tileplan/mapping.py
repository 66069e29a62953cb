"""A mapping: how one layer runs on one accelerator. Immutable, printable as a loop nest, JSON-able.

* ``cluster_split`` / ``core_split``: how many parts each dimension is cut into across clusters and
  across the cores of a cluster (balanced: parts differ by at most one). Every core runs the same
  tiling on its own slice.
* ``tiles``: per-core off-chip tile size of every dimension (DIMS order); a slice smaller than a
  tile is one (smaller) tile.
* ``order``: the tile loops, outermost first (all eight dimensions).
* ``hoist``: per operand, relevant dimensions along which that operand's on-chip tile spans the
  whole (per-core) extent, so it is not reloaded by the loops over them (e.g. TSO's weight
  stationary keeps all input channels of its filters: ``hoist={WEIGHT: {C}}``).
* ``spatial``: per PE-array axis of the accelerator, the (dimension, unroll factor) pairs it unrolls.
* ``layouts``: DRAM dimension order of each tensor, outermost first (``NCHW``, ``KCRS``, ``NKPQ``).
* ``levels``: on-chip levels below the DRAM tiles (MARVEL's level-2/level-1, Timeloop's inner
  levels), outermost first; each is a :class:`Level`. Empty (the default) is the two-level mapping
  DRAM <-> on-chip memories with ``spatial`` unrolling, costed exactly as before levels existed.
* ``bypass``: operands whose DRAM tiles go straight into the PEs' register files, bypassing the
  on-chip memory that otherwise holds them (nn_dataflow's per-operand GBUF bypass): each PE holds
  its piece of the tile (``spatial`` splits it) for the whole tile's life. Empty: every operand
  is held in its on-chip memory (``search.rf_level`` costs and searches the others).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand
from tileplan.errors import MappingError

#: Logical DRAM dimensions of each tensor (C of the input and K of weight/output include groups).
LAYOUT_LETTERS: dict[Operand, str] = {Operand.INPUT: "NCHW", Operand.WEIGHT: "KCRS", Operand.OUTPUT: "NKPQ"}
DEFAULT_LAYOUTS: tuple[str, str, str] = ("NCHW", "KCRS", "NKPQ")
ONES: tuple[int, ...] = (1,) * NDIMS


def layout_options(operand: Operand) -> list[str]:
    """Every dimension permutation of ``operand``'s tensor (24 each)."""
    return ["".join(p) for p in permutations(LAYOUT_LETTERS[operand])]


def balanced_parts(size: int, parts: int) -> list[tuple[int, int]]:
    """(offset, length) of ``parts`` balanced slices of ``size`` (longer ones first; empty ones dropped).

    >>> balanced_parts(10, 4)
    [(0, 3), (3, 3), (6, 2), (8, 2)]
    """
    base, extra = divmod(size, parts)
    out, offset = [], 0
    for i in range(parts):
        length = base + (1 if i < extra else 0)
        if length:
            out.append((offset, length))
        offset += length
    return out


def _count(value: object, what: str) -> int:
    """A positive integer from JSON (``3.7``, ``"4"``, ``true``, ``0`` and ``-2`` are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MappingError(f"{what} must be a positive integer, got {value!r}")
    return value


#: The JSON shape of each mapping field, and an example of it for messages.
_SHAPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "tiles": (dict, '{"K": 4, "C": 8}'), "order": ((list, str), '"NKCPQRS" or ["N", "K", ...]'),
    "hoist": (dict, '{"weight": ["K"]}'), "split": (dict, '{"clusters": {"K": 2}}'),
    "spatial": (list, '[{"C": 4}, {"K": 4}]'), "layouts": (dict, '{"input": "NCHW"}'),
    "levels": (list, '[{"tiles": {...}, "fanout": {...}}]')}


def _check_shapes(data: dict[str, Any]) -> None:
    """Each field has the JSON type it needs (a list where an object belongs is named as such)."""
    for key, (kind, example) in _SHAPES.items():
        if key in data and not isinstance(data[key], kind):
            names: dict[type, str] = {list: "a list", dict: "an object", str: "a string"}
            got = names.get(type(data[key]), repr(data[key]))
            raise MappingError(f"mapping field {key!r} must be like {example}, got {got}")
    for key, inner in (("split", dict), ("spatial", dict), ("levels", dict)):
        values = data.get(key, {})
        items = values.values() if isinstance(values, dict) else values
        if not all(isinstance(v, inner) for v in items):
            raise MappingError(f"mapping field {key!r} must be like {_SHAPES[key][1]}: each entry an object")


@dataclass(frozen=True, slots=True)
class Level:
    """One level below its parent tile: per dimension, the tile a child memory holds (a PE's L1;
    clipped to the parent tile), the spatial ``fanout`` (children working at once; one temporal step
    covers ``tiles * fanout`` of the parent tile) and the ``order`` of those steps, outermost first.
    """

    tiles: tuple[int, ...]
    fanout: tuple[int, ...] = ONES
    order: tuple[Dim, ...] = DIMS

    def __post_init__(self) -> None:
        for name in ("tiles", "fanout"):
            values = getattr(self, name)
            if len(values) != NDIMS or any(not isinstance(v, int) or v < 1 for v in values):
                raise MappingError(f"level {name} must be {NDIMS} positive integers (N G K C P Q R S), "
                                   f"got {values}")
        if sorted(self.order) != list(DIMS):
            raise MappingError(f"level order must list each of N G K C P Q R S once, got "
                               f"{' '.join(Dim(d).name for d in self.order)}")
        object.__setattr__(self, "order", tuple(Dim(d) for d in self.order))

    @property
    def step(self) -> tuple[int, ...]:
        """Elements of every dimension one temporal step covers (``tiles * fanout``)."""
        return tuple(t * f for t, f in zip(self.tiles, self.fanout, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {"tiles": {d.name: self.tiles[d] for d in DIMS},
                "fanout": {d.name: self.fanout[d] for d in DIMS if self.fanout[d] > 1},
                "order": [d.name for d in self.order]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Level:
        extra = set(data) - {"tiles", "fanout", "order"}
        if extra:
            raise MappingError(f"level has unknown fields {sorted(extra)}; known: fanout, order, tiles")
        tiles_in = {Dim.parse(k): int(v) for k, v in data.get("tiles", {}).items()}
        fan_in = {Dim.parse(k): int(v) for k, v in data.get("fanout", {}).items()}
        order_in = data.get("order", [d.name for d in DIMS])
        return cls(tiles=tuple(tiles_in.get(d, 1) for d in DIMS), fanout=tuple(fan_in.get(d, 1) for d in DIMS),
                   order=tuple(Dim.parse(c) for c in (order_in if isinstance(order_in, list) else list(order_in))))


@dataclass(frozen=True, slots=True)
class Mapping:
    """One point of the mapping space (see the module docstring for the fields' meaning)."""

    tiles: tuple[int, ...]
    order: tuple[Dim, ...]
    hoist: tuple[frozenset[Dim], frozenset[Dim], frozenset[Dim]] = (frozenset(), frozenset(), frozenset())
    cluster_split: tuple[int, ...] = ONES
    core_split: tuple[int, ...] = ONES
    spatial: tuple[tuple[tuple[Dim, int], ...], ...] = ()
    layouts: tuple[str, str, str] = DEFAULT_LAYOUTS
    levels: tuple[Level, ...] = ()
    bypass: frozenset[Operand] = frozenset()
    _key: tuple[object, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.tiles) != NDIMS or any(not isinstance(t, int) or t < 1 for t in self.tiles):
            raise MappingError(f"tiles must be {NDIMS} positive integers (N G K C P Q R S), got {self.tiles}")
        if sorted(self.order) != list(DIMS):
            raise MappingError(f"order must list each of N G K C P Q R S once, got "
                               f"{' '.join(Dim(d).name for d in self.order)}")
        object.__setattr__(self, "order", tuple(Dim(d) for d in self.order))
        for name in ("cluster_split", "core_split"):
            split = getattr(self, name)
            if len(split) != NDIMS or any(isinstance(f, bool) or not isinstance(f, int) or f < 1 for f in split):
                raise MappingError(f"{name} must be {NDIMS} positive factors, got {split}")
        for axis in self.spatial:
            for d, f in axis:
                if isinstance(f, bool) or not isinstance(f, int) or f < 1:
                    raise MappingError(f"unroll factor of {Dim(d).name} must be a positive integer, got {f!r}")
        for op in OPERANDS:
            bad = self.hoist[op] - RELEVANT[op]
            if bad:
                raise MappingError(f"hoist of {op.label} names {sorted(d.name for d in bad)}, which do not "
                                   f"index the {op.label}")
        for op, layout in zip(OPERANDS, self.layouts, strict=True):
            if sorted(layout) != sorted(LAYOUT_LETTERS[op]):
                raise MappingError(f"layout of {op.label} must be a permutation of "
                                   f"{LAYOUT_LETTERS[op]}, got {layout!r}")
        object.__setattr__(self, "bypass", frozenset(Operand(op) for op in self.bypass))
        if self.bypass and self.levels:
            raise MappingError("a mapping with levels holds every operand at its levels; bypass is for "
                               "two-level mappings (leave one of them empty)")
        object.__setattr__(self, "_key", (self.tiles, self.order, self.hoist, self.cluster_split,
                                          self.core_split, self.spatial, self.layouts, self.levels,
                                          tuple(sorted(self.bypass))))

    # ----------------------------------------------------------------- convenience
    def tile(self, d: Dim) -> int:
        return self.tiles[d]

    def unroll(self) -> tuple[int, ...]:
        """Spatial unroll factor of every dimension (1 where not unrolled)."""
        u = [1] * NDIMS
        for axis in self.spatial:
            for d, f in axis:
                u[d] *= f
        return tuple(u)

    @property
    def cores_used(self) -> int:
        total = 1
        for a, b in zip(self.cluster_split, self.core_split, strict=True):
            total *= a * b
        return total

    # ----------------------------------------------------------------- text and JSON
    def __str__(self) -> str:
        lines = []
        splits = []
        for label, split in (("clusters", self.cluster_split), ("cores", self.core_split)):
            parts = [f"{Dim(d).name}/{f}" for d, f in enumerate(split) if f > 1]
            if parts:
                splits.append(f"{label} split {' '.join(parts)}")
        if splits:
            lines.append("# " + "; ".join(splits))
        indent = ""
        for d in self.order:
            lines.append(f"{indent}for {d.name.lower()}0 in range({d.name}) step {self.tiles[d]}:")
            indent += "  "
        for depth, level in enumerate(self.levels, start=1):
            for d in level.order:
                lines.append(f"{indent}for {d.name.lower()}{depth} in range({d.name.lower()}{depth - 1} tile) "
                             f"step {level.step[d]}:")
                indent += "  "
            fan = [f"{d.name}{level.fanout[d]}" for d in DIMS if level.fanout[d] > 1]
            lines.append(f"{indent}# level {depth} tile {' '.join(f'{d.name}{level.tiles[d]}' for d in DIMS)}"
                         f"{' on ' + ' x '.join(fan) + ' children' if fan else ''}")
        hoisted = [f"{op.label} spans {''.join(sorted(d.name for d in self.hoist[op]))}"
                   for op in OPERANDS if self.hoist[op]]
        if hoisted:
            lines.append(f"{indent}# hoisted: {', '.join(hoisted)}")
        spatial = " x ".join(",".join(f"{d.name}{f}" for d, f in axis) or "-" for axis in self.spatial)
        lines.append(f"{indent}compute tile{' on PE array ' + spatial if spatial else ''}")
        if self.bypass:
            held = ", ".join(op.label for op in OPERANDS if op in self.bypass)
            lines.append(f"# register files hold the {held} tiles (bypassing the on-chip buffer)")
        if self.layouts != DEFAULT_LAYOUTS:
            lines.append(f"# layouts: input {self.layouts[0]}, weight {self.layouts[1]}, "
                         f"output {self.layouts[2]}")
        return "\n".join(lines)

    def loop_order_str(self) -> str:
        """Loop order with tiled (trip > 1 possible) dims, e.g. ``K C P Q``."""
        return "".join(d.name for d in self.order)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tiles": {d.name: self.tiles[d] for d in DIMS},
            "order": [d.name for d in self.order],
            "hoist": {op.label: sorted(d.name for d in self.hoist[op]) for op in OPERANDS if self.hoist[op]},
            "split": {
                "clusters": {Dim(d).name: f for d, f in enumerate(self.cluster_split) if f > 1},
                "cores": {Dim(d).name: f for d, f in enumerate(self.core_split) if f > 1},
            },
            "spatial": [{d.name: f for d, f in axis} for axis in self.spatial],
            "layouts": {op.label: layout for op, layout in zip(OPERANDS, self.layouts, strict=True)},
        } | ({"levels": [level.to_dict() for level in self.levels]} if self.levels else {}) | (
            {"bypass": [op.label for op in OPERANDS if op in self.bypass]} if self.bypass else {})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, dims: dict[Dim, int] | None = None) -> Mapping:
        """Parse :meth:`to_dict` output. Missing tiles default to the full dimension (``dims``) or 1."""
        known = {"tiles", "order", "hoist", "split", "spatial", "layouts", "levels", "bypass"}
        extra = set(data) - known
        if extra:
            raise MappingError(f"mapping has unknown fields {sorted(extra)}; known: {sorted(known)}")
        _check_shapes(data)
        try:
            tiles_in = {Dim.parse(k): _count(v, f"tile {k}") for k, v in data.get("tiles", {}).items()}
            tiles = tuple(tiles_in.get(d, dims[d] if dims else 1) for d in DIMS)
            order_in = data.get("order", [d.name for d in DIMS])
            order_list = [Dim.parse(c) for c in (order_in if isinstance(order_in, list) else list(order_in))]
            hoist_in = data.get("hoist", {})
            hoist = [frozenset[Dim]()] * 3
            for op_name, ds in hoist_in.items():
                hoist[Operand.parse(op_name)] = frozenset(Dim.parse(x) for x in ds)
            split = data.get("split", {})
            cluster = [1] * NDIMS
            core = [1] * NDIMS
            for k, v in split.get("clusters", {}).items():
                cluster[Dim.parse(k)] = _count(v, f"cluster split of {k}")
            for k, v in split.get("cores", {}).items():
                core[Dim.parse(k)] = _count(v, f"core split of {k}")
            spatial = tuple(tuple((Dim.parse(k), _count(v, f"unroll factor of {k}")) for k, v in axis.items())
                            for axis in data.get("spatial", []))
            lay_in = data.get("layouts", {})
            layouts = list(DEFAULT_LAYOUTS)
            for op_name, lay in lay_in.items():
                layouts[Operand.parse(op_name)] = str(lay).upper()
            levels = tuple(Level.from_dict(lv) for lv in data.get("levels", []))
            bypass_in = data.get("bypass", [])
            if not isinstance(bypass_in, list):
                raise MappingError(f"bypass must be a list of operands (input, weight, output), got {bypass_in!r}")
            bypass = frozenset(Operand.parse(str(op)) for op in bypass_in)
        except (ValueError, TypeError, AttributeError) as err:
            raise MappingError(f"malformed mapping: {err}") from None
        return cls(tiles=tiles, order=tuple(order_list), hoist=(hoist[0], hoist[1], hoist[2]),
                   cluster_split=tuple(cluster), core_split=tuple(core), spatial=spatial,
                   layouts=(layouts[0], layouts[1], layouts[2]), levels=levels, bypass=bypass)

    @classmethod
    def from_json(cls, text: str, *, dims: dict[Dim, int] | None = None) -> Mapping:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise MappingError(f"mapping is not valid JSON (line {err.lineno}: {err.msg})") from None
        return cls.from_object(data, dims=dims)

    @classmethod
    def from_object(cls, data: object, *, dims: dict[Dim, int] | None = None) -> Mapping:
        """A mapping from parsed JSON, which must be an object with tiles/order/... fields."""
        if not isinstance(data, dict):
            raise MappingError("mapping JSON must be an object with tiles/order/... fields")
        return cls.from_dict(data, dims=dims)
