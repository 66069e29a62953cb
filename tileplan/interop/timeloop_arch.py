"""Timeloop v0.4 architecture files -> tileplan accelerators, for the subset tileplan models.

A v0.4 ``architecture: nodes:`` list is walked in order: ``!Component`` nodes are storage levels (or
the compute unit, the last component, whose class names a MAC), ``!Container`` nodes with
``spatial: {meshX, meshY}`` multiply the instances of everything after them and put Timeloop's
dummy level ``inter_<name>_spatial`` (where spatial mapping factors go) in the hierarchy, and
``!Parallel`` / ``!Hierarchical`` groups are read in listed order (Timeloop nests a parallel group's
members in that order). The result, :class:`TimeloopArch`, is the storage hierarchy outermost first.

tileplan models DRAM, one shared on-chip buffer level (instances 1), the PE array (the product of
the meshes) and memories inside each PE. :func:`to_arch` turns that into an
:class:`~tileplan.arch.spec.Arch`: the global buffer holds the data spaces it keeps; a data space
it bypasses is held, between DRAM and the MACs, by the outermost per-PE memory that keeps it, whose
size in tileplan is that memory times the PEs (Eyeriss's weights go DRAM -> weights_spad); each
operand's register file is the outermost per-PE memory keeping it. Word widths give the precision,
``depth x width`` the sizes, ``read_bandwidth`` the bandwidths (words/cycle); a DRAM without a
bandwidth is unlimited, as in Timeloop. Levels tileplan cannot model (a second shared buffer, a
per-column buffer) are refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tileplan.arch.load import from_dict as arch_from_dict
from tileplan.arch.spec import Arch
from tileplan.errors import ConfigError
from tileplan.interop.tlyaml import read_timeloop_yaml

SPACES = ("Inputs", "Weights", "Outputs")  # tileplan's operand order
OPERAND_OF = {"Inputs": "input", "Weights": "weight", "Outputs": "output"}
UNLIMITED_BYTES_PER_S = 1e15  # the most an Arch accepts: no DRAM throttling, as in Timeloop


@dataclass(frozen=True)
class TLLevel:
    """One level of a Timeloop hierarchy (storage or a dummy spatial level), outermost first."""

    name: str
    cls: str
    instances: int
    fanout_x: int = 1  # children per instance along meshX (spatial levels)
    fanout_y: int = 1
    depth: int | None = None
    width_bits: int = 8
    datawidth_bits: int = 8
    read_bandwidth: float | None = None  # words per cycle
    keep: tuple[str, ...] | None = None  # from the arch's dataspace constraint (None: unconstrained)
    bypass: tuple[str, ...] = ()

    @property
    def spatial(self) -> bool:
        return self.cls == "dummy_storage"

    @property
    def fanout(self) -> int:
        return self.fanout_x * self.fanout_y

    @property
    def size_bytes(self) -> int | None:
        return None if self.depth is None else self.depth * self.width_bits // 8

    def keeps(self, space: str, override: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None) -> bool:
        """Whether this level holds ``space`` (a mapping's datatype directive overrides the arch)."""
        if self.spatial:
            return False
        if override and self.name in override:
            keep, bypass = override[self.name]
            if space in keep:
                return True
            if space in bypass:
                return False
        if space in self.bypass:
            return False
        return self.keep is None or space in self.keep


@dataclass(frozen=True)
class TimeloopArch:
    """A Timeloop storage hierarchy (outermost first), the PEs and the compute unit."""

    name: str
    levels: tuple[TLLevel, ...]
    pes: int
    mesh_x: int
    mesh_y: int
    clock_hz: float
    mac_class: str

    def level(self, name: str) -> TLLevel:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [lv.name for lv in self.levels]

    def dram(self) -> TLLevel:
        return self.levels[0]

    def glb(self) -> TLLevel:
        shared = [lv for lv in self.levels[1:] if not lv.spatial and lv.instances == 1]
        return shared[0]

    def pe_levels(self) -> list[TLLevel]:
        return [lv for lv in self.levels if not lv.spatial and lv.instances == self.pes and self.pes > 1]

    def spatial_levels(self) -> list[TLLevel]:
        return [lv for lv in self.levels if lv.spatial]


def _int(attrs: dict[str, Any], key: str, where: str, default: int | None = None) -> int | None:
    value = attrs.get(key, default)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: attribute {key} must be a positive integer, got {value!r}")
    return value


def _spaces(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or any(v not in SPACES for v in value):
        raise ConfigError(f"{where}: a keep/bypass list names data spaces of {', '.join(SPACES)}, got {value!r}")
    return tuple(value)


def _walk(nodes: Any, source: str, state: dict[str, Any], out: list[TLLevel]) -> None:
    if not isinstance(nodes, list):
        raise ConfigError(f"{source}: architecture nodes must be a list of !Component / !Container nodes")
    for node in nodes:
        if not isinstance(node, dict) or "_tag" not in node:
            raise ConfigError(f"{source}: every architecture node needs a !Component, !Container or !Parallel "
                              f"tag, got {node!r:.60}")
        tag = node["_tag"]
        if tag in ("Parallel", "Hierarchical"):
            _walk(node.get("nodes", []), source, state, out)
            continue
        if tag == "Nothing":
            continue
        name = node.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{source}: a !{tag} node has no name")
        where = f"{source}: {name}"
        attrs = node.get("attributes") or {}
        if not isinstance(attrs, dict):
            raise ConfigError(f"{where}: attributes must be a mapping")
        if "global_cycle_seconds" in attrs:
            seconds = attrs["global_cycle_seconds"]
            try:
                seconds = float(seconds)
            except (TypeError, ValueError):
                seconds = -1.0
            if not 1e-11 <= seconds <= 1e-3:
                raise ConfigError(f"{where}: global_cycle_seconds must be a cycle time between 1e-11 and 1e-3 s, "
                                  f"got {attrs['global_cycle_seconds']!r}")
            state["clock"] = 1.0 / seconds
        if tag == "Container":
            spatial = node.get("spatial") or {}
            if not isinstance(spatial, dict) or set(spatial) - {"meshX", "meshY"}:
                raise ConfigError(f"{where}: spatial must be {{meshX: n, meshY: m}}")
            fx = _int(spatial, "meshX", where, 1) or 1
            fy = _int(spatial, "meshY", where, 1) or 1
            if fx * fy > 1:
                out.append(TLLevel(f"inter_{name}_spatial", "dummy_storage", state["instances"], fx, fy))
                state["instances"] *= fx * fy
                state["mesh_x"] *= fx
                state["mesh_y"] *= fy
            continue
        cls = str(node.get("class", ""))
        if "mac" in cls.lower() or cls.lower() == "compute":
            if state["mac"] is not None:
                raise ConfigError(f"{where}: a second compute unit ({state['mac']} came first); tileplan models one")
            state["mac"] = cls
            continue
        if state["mac"] is not None:
            raise ConfigError(f"{where}: a storage level below the compute unit {state['mac']!r}")
        cons = node.get("constraints") or {}
        ds = cons.get("dataspace") if isinstance(cons, dict) else None
        keep = bypass = None
        if isinstance(ds, dict):
            keep = _spaces(ds["keep"], where) if "keep" in ds else None
            bypass = _spaces(ds["bypass"], where) if "bypass" in ds else ()
        datawidth = _int(attrs, "datawidth", where, _int(attrs, "word-bits", where, 8))
        bw = attrs.get("read_bandwidth")
        out.append(TLLevel(name, cls, state["instances"], depth=_int(attrs, "depth", where),
                           width_bits=_int(attrs, "width", where, datawidth) or 8, datawidth_bits=datawidth or 8,
                           read_bandwidth=float(bw) if isinstance(bw, int | float) else None, keep=keep,
                           bypass=bypass or ()))


def parse_arch(doc: Any, source: str) -> TimeloopArch:
    """The storage hierarchy of a parsed Timeloop v0.4 architecture document."""
    arch = doc.get("architecture") if isinstance(doc, dict) else None
    if not isinstance(arch, dict):
        raise ConfigError(f"{source}: not a Timeloop architecture (expected a top-level 'architecture:' mapping)")
    if "nodes" not in arch:
        raise ConfigError(f"{source}: architecture has no 'nodes:' list (tileplan reads Timeloop v0.4 "
                          f"architectures; v0.3 'subtree:' files are not read)")
    state: dict[str, Any] = {"instances": 1, "mesh_x": 1, "mesh_y": 1, "clock": 1e9, "mac": None}
    levels: list[TLLevel] = []
    _walk(arch["nodes"], source, state, levels)
    if state["mac"] is None:
        raise ConfigError(f"{source}: no compute unit (a !Component whose class names a MAC, e.g. intmac)")
    storage = [lv for lv in levels if not lv.spatial]
    if not storage or storage[0].cls.upper() != "DRAM" or storage[0].instances != 1:
        raise ConfigError(f"{source}: the outermost storage level must be one DRAM (class: DRAM)")
    names = [lv.name for lv in levels]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{source}: level names {dup} appear twice")
    pes = state["instances"]
    shared = [lv.name for lv in storage[1:] if lv.instances == 1]
    if len(shared) != 1:
        raise ConfigError(f"{source}: tileplan models exactly one shared on-chip buffer between DRAM and the "
                          f"PEs; this architecture has {len(shared)} ({', '.join(shared) or 'none'})")
    middle = [lv.name for lv in storage if 1 < lv.instances < pes]
    if middle:
        raise ConfigError(f"{source}: levels {middle} are shared by a group of PEs; tileplan models a buffer "
                          f"shared by all PEs and memories private to each PE")
    return TimeloopArch(Path(source).parent.name or Path(source).stem, tuple(levels), pes, state["mesh_x"],
                        state["mesh_y"], state["clock"], state["mac"])


def load_timeloop_arch(path: str | Path) -> TimeloopArch:
    """Read a Timeloop v0.4 architecture file."""
    return parse_arch(read_timeloop_yaml(path), str(path))


def to_arch(tl: TimeloopArch, *, glb_bypass: frozenset[str] = frozenset(),
            keep: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None) -> Arch:
    """tileplan's view of ``tl`` (see the module docstring). ``keep`` (level -> (keep, bypass)) is a
    mapping's datatype directives, which override the arch's constraints; ``glb_bypass`` adds data
    spaces the global buffer does not hold."""
    glb = tl.glb()
    pe_levels = tl.pe_levels()
    in_glb = [s for s in SPACES if glb.keeps(s, keep) and s not in glb_bypass]
    memories: list[dict[str, Any]] = []
    if in_glb:
        memories.append({"name": glb.name, "operands": [OPERAND_OF[s] for s in in_glb],
                         "size_bytes": glb.size_bytes or 2**40} | _bandwidth(glb))
    rf: dict[str, int] = {}
    for space in SPACES:
        holder = next((lv for lv in pe_levels if lv.keeps(space, keep)), None)
        rf[space] = (holder.size_bytes or 0) if holder is not None else 0
        if space in in_glb:
            continue
        if holder is None or holder.size_bytes is None:
            raise ConfigError(f"{tl.name}: no memory holds {space} between DRAM and the MACs (the global buffer "
                              f"{glb.name} bypasses it and no per-PE memory with a depth keeps it)")
        name = f"{holder.name}x{tl.pes}"
        mem = next((m for m in memories if m["name"] == name), None)
        if mem is None:
            memories.append({"name": name, "operands": [OPERAND_OF[space]], "size_bytes": holder.size_bytes * tl.pes})
        else:
            mem["operands"].append(OPERAND_OF[space])
    dram = tl.dram()
    word = max(1, dram.datawidth_bits // 8)
    bw = dram.read_bandwidth * word * tl.clock_hz if dram.read_bandwidth else UNLIMITED_BYTES_PER_S
    data = {
        "name": tl.name, "description": f"imported from Timeloop: {', '.join(tl.names)}",
        "clock_hz": tl.clock_hz, "precision_bytes": word, "overlap": True, "double_buffering": False,
        "dram": {"bandwidth_bytes_per_s": min(bw, UNLIMITED_BYTES_PER_S), "burst_bytes": max(1, dram.width_bits // 8)},
        "memories": memories,
        "pe_array": {"axes": [{"name": "meshX", "size": tl.mesh_x, "dims": ["N", "G", "K", "C", "P", "Q", "R", "S"],
                               "mode": "unrolled", "max_dims": 2},
                              {"name": "meshY", "size": tl.mesh_y, "dims": ["N", "G", "K", "C", "P", "Q", "R", "S"],
                               "mode": "unrolled", "max_dims": 2}]},
        "register_file": {"inputs_bytes": rf["Inputs"], "weights_bytes": rf["Weights"], "psums_bytes": rf["Outputs"]},
    }
    return arch_from_dict(data, tl.name)


def _bandwidth(level: TLLevel) -> dict[str, float]:
    if level.read_bandwidth is None:
        return {}
    return {"bandwidth_bytes_per_cycle": level.read_bandwidth * level.datawidth_bits / 8}
