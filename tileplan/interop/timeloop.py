"""The Timeloop entry points the API uses: a mapping file read against its architecture file, and a
set of planned layers written as Timeloop problem + mapping files."""

from __future__ import annotations

from pathlib import Path

from tileplan.arch.spec import Arch
from tileplan.errors import MappingError
from tileplan.files import make_output_folder, write_text_atomic
from tileplan.interop.timeloop_arch import load_timeloop_arch, to_arch
from tileplan.interop.timeloop_export import mapping_yaml, to_timeloop
from tileplan.interop.timeloop_mapping import load_mapping, to_tileplan
from tileplan.interop.timeloop_problem import problem_yaml
from tileplan.interop.tlyaml import timeloop_keys
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer


def read_mapping(layer: Layer, arch: str | Path, mapping: str | Path, *, dram_only: bool = False
                 ) -> tuple[Arch, Mapping]:
    """The tileplan accelerator and mapping of the Timeloop mapping file ``mapping`` for ``layer`` on
    the Timeloop architecture file ``arch`` (the mapping's keep/bypass directives shape the
    accelerator's memories). ``dram_only``: the DRAM level alone, for mappings whose per-PE part
    tileplan cannot represent (see :mod:`tileplan.interop.timeloop_mapping`)."""
    if "architecture" not in timeloop_keys(arch):
        raise MappingError(f"a Timeloop mapping ({mapping}) is read against the Timeloop architecture it was made "
                           f"for: pass --arch ARCH.yaml (a file with a top-level 'architecture:')")
    tl = load_timeloop_arch(arch)
    tm = load_mapping(mapping, layer, tl)
    m, _ = to_tileplan(tm, layer, tl, str(mapping), dram_only=dram_only)
    return to_arch(tl, keep=tm.datatype), m


def write_files(planned: list[tuple[Layer, Mapping]], arch: str | Path, folder: str | Path) -> list[Path]:
    """``LAYER.problem.yaml`` and ``LAYER.map.yaml`` of every (layer, mapping) for the Timeloop
    architecture file ``arch``, written into ``folder``; all are built before any is written, so an
    unwritable mapping leaves nothing behind."""
    tl = load_timeloop_arch(arch)
    texts = []
    for layer, mapping in planned:
        texts.append((f"{layer.name}.problem.yaml", problem_yaml(layer)))
        texts.append((f"{layer.name}.map.yaml", mapping_yaml(to_timeloop(mapping, layer, tl))))
    out = make_output_folder(folder)
    paths = []
    for name, text in texts:
        write_text_atomic(out / name, text)
        paths.append(out / name)
    return paths
