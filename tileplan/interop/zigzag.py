"""ZigZag (zigzag-dse 3.x) workload and hardware YAML <-> tileplan networks and accelerators.

**Workload**: a list of layers, each with an ``equation`` (``O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]``),
``loop_dims`` / ``loop_sizes``, ``dimension_relations`` (``ix=2*ox+1*fx``: stride 2, dilation 1),
``operand_precision`` (bits) and ``padding`` over ``pr_loop_dims`` (``[IY, IX]``). ZigZag's ``B K C G OY
OX FY FX`` are tileplan's ``N K C G P Q R S``. ``Conv``, ``Conv_downsample`` and ``Gemm`` layers are
read, each as an independent layer (ZigZag's ``operand_source`` links are not kept: tileplan plans
layer by layer); any other operator is one clear error.

**Hardware**: ``memories`` (innermost first; ``size`` in bits, ports with bandwidths in bits/cycle,
``served_dimensions``) and an ``operational_array`` (``dimensions``, ``sizes``, ``unit_energy``). With
ZigZag's default operand links (``I1`` input, ``I2`` weight, ``O`` output), tileplan takes: the
outermost memory as DRAM; for each operand, the outermost other memory serving every array
dimension as its on-chip memory; the memories serving no dimension (one per PE) as its register
file; the array's dimensions as PE-array axes. Memories in between (serving some dimensions) are
not modelled. A clock of 1 GHz is assumed (ZigZag counts cycles).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tileplan.arch.load import from_dict as arch_from_dict
from tileplan.arch.spec import Arch
from tileplan.dims import Dim
from tileplan.errors import ConfigError, WorkloadError
from tileplan.interop.tlyaml import read_timeloop_yaml
from tileplan.workload.layer import Layer, OpKind, Precision
from tileplan.workload.network import Network

ZZ_TO_DIM = {"B": "N", "K": "K", "C": "C", "G": "G", "OY": "P", "OX": "Q", "FY": "R", "FX": "S"}
OPERAND_LINK = {"input": "I1", "weight": "I2", "output": "O"}
_RELATION = re.compile(r"^\s*(\w+)\s*=\s*(?:(\d+)\s*\*\s*)?(\w+)\s*\+\s*(?:(\d+)\s*\*\s*)?(\w+)\s*$")
CLOCK_HZ = 1e9


def _layer(item: Any, where: str) -> Layer:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: a layer must be a mapping with id, operator_type, equation, loop_dims and "
                          f"loop_sizes")
    missing = [k for k in ("id", "operator_type", "equation", "loop_dims", "loop_sizes") if k not in item]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    op = str(item["operator_type"])
    if op not in ("Conv", "Conv_downsample", "Gemm"):
        raise ConfigError(f"{where}: operator {op!r}; tileplan imports Conv, Conv_downsample and Gemm layers")
    dims, sizes = item["loop_dims"], item["loop_sizes"]
    if not isinstance(dims, list) or not isinstance(sizes, list) or len(dims) != len(sizes):
        raise ConfigError(f"{where}: loop_dims and loop_sizes must be lists of the same length")
    size: dict[str, int] = {}
    for d, s in zip(dims, sizes, strict=True):
        if str(d) not in ZZ_TO_DIM:
            raise ConfigError(f"{where}: loop dimension {d!r} is not one of {', '.join(ZZ_TO_DIM)}")
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise ConfigError(f"{where}: loop size of {d} must be a positive integer, got {s!r}")
        size[str(d)] = s
    stride, dilation = [1, 1], [1, 1]
    for rel in item.get("dimension_relations") or []:
        m = _RELATION.match(str(rel))
        if not m or m.group(1).lower() not in ("iy", "ix"):
            raise ConfigError(f"{where}: dimension relation {rel!r} is not 'iy=S*oy+D*fy' or 'ix=S*ox+D*fx'")
        axis = 0 if m.group(1).lower() == "iy" else 1
        terms = {m.group(3).lower(): int(m.group(2) or 1), m.group(5).lower(): int(m.group(4) or 1)}
        out_dim, ker_dim = ("oy", "fy") if axis == 0 else ("ox", "fx")
        if set(terms) != {out_dim, ker_dim}:
            raise ConfigError(f"{where}: dimension relation {rel!r} must relate {m.group(1)} to {out_dim} and "
                              f"{ker_dim}")
        stride[axis], dilation[axis] = terms[out_dim], terms[ker_dim]
    pad = [0, 0, 0, 0]
    pr = [str(d).upper() for d in item.get("pr_loop_dims") or ["IY", "IX"]]
    if item.get("padding") is not None:
        for d, pair in zip(pr, item["padding"], strict=False):
            if not isinstance(pair, list) or len(pair) != 2 or d not in ("IY", "IX"):
                raise ConfigError(f"{where}: padding must be [[top, bottom], [left, right]] over pr_loop_dims IY, IX")
            pad[0 if d == "IY" else 2], pad[1 if d == "IY" else 3] = pair
    g = size.get("G", 1)
    p, q, r, s = (size.get(k, 1) for k in ("OY", "OX", "FY", "FX"))
    h = (p - 1) * stride[0] + (r - 1) * dilation[0] + 1 - pad[0] - pad[1]
    w = (q - 1) * stride[1] + (s - 1) * dilation[1] + 1 - pad[2] - pad[3]
    given = dict(zip(pr, item.get("pr_loop_sizes") or [], strict=False))  # the input's size, when given
    h, w = int(given.get("IY", h)), int(given.get("IX", w))
    prec = item.get("operand_precision") or {}
    try:
        bits = {k: int(prec.get(k, 8)) for k in ("I", "W", "O_final", "O")}
        precision = Precision(max(1, bits["I"] // 8), max(1, bits["W"] // 8), max(1, bits["O_final"] // 8),
                              max(1, bits["O"] // 8))
        name = str(item.get("name") or f"layer{item['id']}")
        return Layer.conv(name, n=size.get("B", 1), c_in=size.get("C", 1) * g, h=max(h, 1), w=max(w, 1),
                          k_out=size.get("K", 1) * g, r=r, s=s, stride=(stride[0], stride[1]),
                          pad=(pad[0], pad[1], pad[2], pad[3]), dilation=(dilation[0], dilation[1]), groups=g,
                          precision=precision)
    except (WorkloadError, TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}") from None


def load_workload(path: str | Path) -> Network:
    """A ZigZag workload YAML file as a network of independent layers."""
    data = read_timeloop_yaml(path)
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{path}: a ZigZag workload is a non-empty list of layers")
    layers = tuple(_layer(item, f"{path}: layer {i}") for i, item in enumerate(data))
    try:
        return Network(Path(path).stem, layers, input_shape=(layers[0].n, layers[0].c_in, layers[0].h, layers[0].w))
    except WorkloadError as err:
        raise ConfigError(f"{path}: {err}") from None


def is_workload(path: str | Path) -> bool:
    """Whether ``path`` looks like a ZigZag workload (a YAML list whose items have an ``equation``)."""
    p = Path(path)
    if p.suffix.lower() not in (".yaml", ".yml") or not p.is_file():
        return False
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return text.lstrip().startswith("-") and re.search(r"^\s*-?\s*equation\s*:", text, re.M) is not None


def workload_list(network: Network) -> list[dict[str, Any]]:
    """ZigZag workload layers of ``network``'s convolution and fully-connected layers."""
    out = []
    for i, la in enumerate(network.layers):
        if la.op not in (OpKind.CONV, OpKind.POINTWISE, OpKind.DEPTHWISE, OpKind.GROUPED_CONV, OpKind.FC):
            raise ConfigError(f"layer {la.name!r} is a {la.op.value} layer; a ZigZag workload is written from "
                              f"convolution and fully-connected layers")
        d = {k: int(la.dims[Dim[v]]) for k, v in ZZ_TO_DIM.items()}
        grouped = d["G"] > 1
        eq = ("O[b][g][k][oy][ox]+=W[g][k][c][fy][fx]*I[b][g][c][iy][ix]" if grouped
              else "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]")
        dims = [k for k in ("B", "G", "K", "C", "OY", "OX", "FY", "FX") if k != "G" or grouped]
        prec = la.precision or Precision()
        out.append({
            "id": i, "name": la.name, "operator_type": "Conv", "equation": eq,
            "dimension_relations": [f"ix={la.stride[1]}*ox+{la.dilation[1]}*fx",
                                    f"iy={la.stride[0]}*oy+{la.dilation[0]}*fy"],
            "loop_dims": dims, "loop_sizes": [d[k] for k in dims],
            "operand_precision": {"W": 8 * prec.weight, "I": 8 * prec.input, "O": 8 * prec.psum,
                                  "O_final": 8 * prec.output},
            "operand_source": {"I": i},
            "pr_loop_dims": ["IY", "IX"], "pr_loop_sizes": [la.h, la.w],
            "padding": [[la.pad[0], la.pad[1]], [la.pad[2], la.pad[3]]],
        })
    return out


def workload_yaml(network: Network) -> str:
    """:func:`workload_list` as YAML text."""
    return yaml.safe_dump(workload_list(network), sort_keys=False)


def _bandwidth_bits(mem: dict[str, Any]) -> int:
    ports = mem.get("ports") or []
    return max((int(p.get("bandwidth_max", 0)) for p in ports if isinstance(p, dict)), default=0)


def hardware_arch(data: Any, source: str) -> Arch:
    """tileplan's accelerator of a parsed ZigZag hardware document (see the module docstring)."""
    if not isinstance(data, dict) or not isinstance(data.get("memories"), dict) or "operational_array" not in data:
        raise ConfigError(f"{source}: a ZigZag hardware file has a name, memories and an operational_array")
    oa = data["operational_array"]
    dims, sizes = oa.get("dimensions"), oa.get("sizes")
    if not isinstance(dims, list) or not isinstance(sizes, list) or len(dims) != len(sizes) or not dims:
        raise ConfigError(f"{source}: operational_array needs dimensions and sizes of the same length")
    mems = list(data["memories"].items())
    for name, mem in mems:
        if not isinstance(mem, dict) or not isinstance(mem.get("size"), int) or \
                not isinstance(mem.get("operands"), list):
            raise ConfigError(f"{source}: memory {name!r} needs a size (bits) and operands")
        bad = [o for o in mem["operands"] if o not in ("I1", "I2", "O")]
        if bad:
            raise ConfigError(f"{source}: memory {name!r} has operands {bad}; ZigZag's are I1, I2, O")
    dram_name, dram = mems[-1]
    if sorted(dram["operands"]) != ["I1", "I2", "O"]:
        raise ConfigError(f"{source}: the outermost memory {dram_name!r} must hold I1, I2 and O (it is DRAM)")
    memories: dict[str, dict[str, Any]] = {}
    rf = {"input": 0, "weight": 0, "output": 0}
    energy = {}
    for op, link in OPERAND_LINK.items():
        holders = [(n, m) for n, m in mems[:-1] if link in m["operands"]]
        shared = [(n, m) for n, m in holders if sorted(m.get("served_dimensions") or []) == sorted(dims)]
        private = [(n, m) for n, m in holders if not m.get("served_dimensions")]
        if not shared:
            raise ConfigError(f"{source}: no on-chip memory serving every array dimension holds {link} ({op})")
        name, mem = shared[-1]
        entry = memories.setdefault(name, {"name": name, "operands": [], "size_bytes": max(1, mem["size"] // 8)})
        entry["operands"].append(op)
        bw = _bandwidth_bits(mem)
        if mem.get("r_cost") is not None and bw:
            energy[name] = float(mem["r_cost"]) / (bw / 8)
        if private:
            rf[op] = private[-1][1]["size"] // 8
    for name, e in energy.items():
        memories[name]["energy_pj_per_byte"] = e
    dram_bw = _bandwidth_bits(dram)
    arch = {
        "name": str(data.get("name", Path(source).stem)), "description": f"imported from ZigZag {source}",
        "clock_hz": CLOCK_HZ, "precision_bytes": 1,
        "dram": {"bandwidth_bytes_per_s": (dram_bw / 8 * CLOCK_HZ) if dram_bw else 1e15, "burst_bytes": 64,
                 "energy_pj_per_byte": float(dram.get("r_cost") or 0) / (dram_bw / 8) if dram_bw else 0.0},
        "memories": list(memories.values()),
        "pe_array": {"axes": [{"name": str(d), "size": int(z), "dims": ["N", "G", "K", "C", "P", "Q", "R", "S"],
                               "mode": "unrolled", "max_dims": 2} for d, z in zip(dims, sizes, strict=True)]},
        "register_file": {"inputs_bytes": rf["input"], "weights_bytes": rf["weight"], "psums_bytes": rf["output"]},
        "energy": {"mac_pj": float(oa.get("unit_energy") or 0.0)},
    }
    return arch_from_dict(arch, source)


def load_hardware(path: str | Path) -> Arch:
    """A ZigZag hardware YAML file as a tileplan accelerator."""
    return hardware_arch(read_timeloop_yaml(path), str(path))


def is_hardware(path: str | Path) -> bool:
    """Whether ``path`` looks like a ZigZag hardware file (top-level ``operational_array:``)."""
    p = Path(path)
    if p.suffix.lower() not in (".yaml", ".yml") or not p.is_file():
        return False
    try:
        return any(line.startswith("operational_array:") for line in p.read_text(errors="replace").splitlines())
    except OSError:
        return False


def _port(name: str, kind: str, bits: int, allocation: list[str]) -> dict[str, Any]:
    return {"name": name, "type": kind, "bandwidth_min": bits, "bandwidth_max": bits, "allocation": allocation}


def _alloc(links: list[str]) -> list[str]:
    return [f"{o}, {d}" for o in links for d in (("fh", "tl", "fl", "th") if o == "O" else ("fh", "tl"))]


def hardware_dict(arch: Arch) -> dict[str, Any]:
    """``arch`` as a ZigZag hardware document: a register file per operand (served by no dimension),
    its on-chip memories (serving every dimension) and DRAM, innermost first; sizes in bits."""
    if arch.cores.total != 1:
        raise ConfigError(f"{arch.name} has {arch.cores.total} cores; a ZigZag hardware file describes one core")
    dims = [f"D{i + 1}" for i in range(len(arch.pe_array.axes))]
    word = 8 * arch.precision_bytes
    memories: dict[str, Any] = {}
    rf = arch.register_file
    for op, size in (("input", rf.inputs_bytes), ("weight", rf.weights_bytes), ("output", rf.psums_bytes)):
        if size:
            link = OPERAND_LINK[op]
            cost = rf.energy_pj_per_access
            memories[f"rf_{op}"] = {"size": 8 * size, "r_cost": cost, "w_cost": cost, "area": 0, "latency": 1,
                                    "operands": [link],
                                    "ports": [_port("rw_port_1", "read_write", word, _alloc([link]))],
                                    "served_dimensions": []}
    for mem in arch.memories:
        links = [OPERAND_LINK[o] for o in mem.operands]
        bits = int(8 * (mem.bandwidth_bytes_per_cycle or 64))
        cost = mem.energy_pj_per_byte * bits / 8
        memories[mem.name] = {"size": 8 * mem.size_bytes, "r_cost": cost, "w_cost": cost, "area": 0, "latency": 1,
                              "operands": links, "ports": [_port("rw_port_1", "read_write", bits, _alloc(links))],
                              "served_dimensions": list(dims)}
    dram_bits = int(8 * min(arch.dram_bytes_per_cycle, 2**20))
    memories["dram"] = {"size": 10**10, "r_cost": arch.dram.energy_pj_per_byte * dram_bits / 8,
                        "w_cost": arch.dram.energy_pj_per_byte * dram_bits / 8, "area": 0, "latency": 1,
                        "operands": ["I1", "I2", "O"],
                        "ports": [_port("rw_port_1", "read_write", dram_bits, _alloc(["I1", "I2", "O"]))],
                        "served_dimensions": list(dims)}
    sizes = [axis.lanes(arch.precision_bytes) for axis in arch.pe_array.axes]
    return {"name": arch.name, "memories": memories,
            "operational_array": {"unit_energy": arch.energy.mac_pj, "unit_area": 1.0, "dimensions": dims,
                                  "sizes": sizes}}


def hardware_yaml(arch: Arch) -> str:
    """:func:`hardware_dict` as YAML text."""
    return yaml.safe_dump(hardware_dict(arch), sort_keys=False)
