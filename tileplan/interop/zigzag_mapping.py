"""tileplan mappings -> ZigZag mapping YAML, and a plan written as ZigZag inputs.

A ZigZag mapping names, per layer, its ``spatial_mapping`` (per array dimension ``D1``, ``D2``, ...:
``"K, 16"`` entries), a ``temporal_ordering`` (``[dim, factor]`` loops, innermost first) and the
``memory_operand_links``. ZigZag places the temporal loops in its memories itself, so the file
carries tileplan's loop order and factors, not its level boundaries: the PE tile's loops innermost,
then the on-chip step loops, then the DRAM tile loops, each in tileplan's order. ZigZag needs whole
factors, so a tile that does not divide its dimension is refused. Reading a ZigZag mapping into
tileplan is not done: without the placement in memories it does not fix tileplan's tiles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tileplan.arch.spec import Arch
from tileplan.dims import DIMS, Dim
from tileplan.errors import MappingError
from tileplan.files import make_output_folder, write_text_atomic
from tileplan.interop.meshfit import fit
from tileplan.interop.zigzag import ZZ_TO_DIM, hardware_yaml, workload_list
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network

DIM_TO_ZZ = {v: k for k, v in ZZ_TO_DIM.items()}
LINKS = {"O": "O", "W": "I2", "I": "I1"}


def _whole(whole: int, part: int, what: str) -> int:
    if whole % part:
        raise MappingError(f"{what}: {part} does not divide {whole}; a ZigZag mapping needs whole factors")
    return whole // part


def _spread(fan: dict[Dim, int], lanes: list[int]) -> dict[str, list[str]]:
    placed = fit({d.name: f for d, f in fan.items()}, lanes)
    if placed is None:
        raise MappingError(f"the fan-out {' '.join(f'{d.name}{f}' for d, f in fan.items())} does not fit the PE "
                           f"array ({' x '.join(map(str, lanes))})")
    return {f"D{i + 1}": [f"{DIM_TO_ZZ[d]}, {g}" for d, g in axis.items()] for i, axis in enumerate(placed) if axis}


def mapping_entry(mapping: Mapping, layer: Layer, arch: Arch) -> dict[str, Any]:
    """One ZigZag mapping entry (named after the layer) of a tileplan mapping."""
    if mapping.cores_used > 1 or len(mapping.levels) > 1:
        raise MappingError("a ZigZag mapping describes one core with at most one on-chip level")
    size = layer.dims
    tiles0 = {d: min(mapping.tiles[d], size[d]) for d in DIMS}
    loops: list[list[Any]] = []  # innermost first
    if mapping.levels:
        level = mapping.levels[0]
        fan = {d: level.fanout[d] for d in DIMS if level.fanout[d] > 1}
        spatial = _spread(fan, [a.lanes(arch.precision_bytes) for a in arch.pe_array.axes])
        loops += [[DIM_TO_ZZ[d.name], level.tiles[d]] for d in reversed(DIMS) if level.tiles[d] > 1]
        steps = {d: _whole(tiles0[d], level.tiles[d] * level.fanout[d], f"on-chip step of {d.name}") for d in DIMS}
        loops += [[DIM_TO_ZZ[d.name], steps[d]] for d in reversed(level.order) if steps[d] > 1]
    else:
        spatial = {f"D{i + 1}": [f"{DIM_TO_ZZ[d.name]}, {f}" for d, f in axis] for i, axis in enumerate(mapping.spatial)
                   if axis}
        unroll = mapping.unroll()
        loops += [[DIM_TO_ZZ[d.name], _whole(tiles0[d], unroll[d], f"unrolling of {d.name}")]
                  for d in reversed(DIMS) if tiles0[d] // unroll[d] > 1]
    loops += [[DIM_TO_ZZ[d.name], _whole(size[d], tiles0[d], f"DRAM tile of {d.name}")]
              for d in reversed(mapping.order) if size[d] // tiles0[d] > 1]
    return {"name": layer.name, "spatial_mapping": spatial, "temporal_ordering": loops,
            "memory_operand_links": dict(LINKS)}


def mapping_list(planned: list[tuple[Layer, Mapping]], arch: Arch) -> list[dict[str, Any]]:
    """ZigZag mapping entries of every (layer, mapping) plus the ``default`` entry ZigZag requires
    (the first layer's spatial mapping)."""
    entries = [mapping_entry(m, la, arch) for la, m in planned]
    default = {"name": "default", "spatial_mapping": dict(entries[0]["spatial_mapping"]) if entries else None,
               "memory_operand_links": dict(LINKS)}
    return [default, *entries]


def write_files(planned: list[tuple[Layer, Mapping]], arch: Arch, folder: str | Path) -> list[Path]:
    """``workload.yaml``, ``hardware.yaml`` and ``mapping.yaml`` (ZigZag inputs) of the planned layers,
    all built before any is written."""
    network = Network("plan", tuple(la for la, _ in planned))
    texts = {"workload.yaml": yaml.safe_dump(workload_list(network), sort_keys=False),
             "hardware.yaml": hardware_yaml(arch),
             "mapping.yaml": yaml.safe_dump(mapping_list(planned, arch), sort_keys=False)}
    out = make_output_folder(folder)
    for name, text in texts.items():
        write_text_atomic(out / name, text)
    return [out / name for name in texts]
