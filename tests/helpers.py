"""Small builders shared by tests: synthetic accelerators and mappings."""

from __future__ import annotations

from tileplan.arch import from_dict
from tileplan.arch.spec import Arch


def toy_arch(*, burst: int = 16, sizes: tuple[int, int, int] = (1 << 20, 1 << 20, 1 << 20),
             unified: int | None = None, axes: list[dict] | None = None, clusters: int = 1, cores: int = 1,
             overlap: bool = False, double_buffering: bool = False, precision: int = 1,
             multicast: bool = True) -> Arch:
    """A single-core accelerator with generous memories unless told otherwise."""
    if unified is not None:
        memories = [{"name": "glb", "operands": ["input", "weight", "output"], "size_bytes": unified}]
    else:
        memories = [{"name": f"m{i}", "operands": [op], "size_bytes": s}
                    for i, (op, s) in enumerate(zip(("input", "weight", "output"), sizes, strict=True))]
    return from_dict({
        "name": "toy", "clock_hz": 1e9, "precision_bytes": precision, "overlap": overlap,
        "double_buffering": double_buffering,
        "dram": {"bandwidth_bytes_per_s": 8e9, "burst_bytes": burst, "burst_latency_ns": 10,
                 "energy_pj_per_byte": 100},
        "memories": memories,
        "cores": {"clusters": clusters, "cores_per_cluster": cores, "multicast": multicast},
        "pe_array": {"axes": axes or []},
        "energy": {"mac_pj": 1.0},
    })
