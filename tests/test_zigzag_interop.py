"""ZigZag workload / hardware YAML: tileplan -> ZigZag loads in zigzag-dse's own parser with the same
layer dimensions and memory sizes, and ZigZag's shipped hardware examples read in tileplan. Needs the
optional ``zigzag-dse`` (``pip install .[interop]``); skipped with that reason when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tileplan import api
from tileplan.dims import Dim
from tileplan.errors import ConfigError
from tileplan.interop.zigzag import hardware_yaml, load_hardware, load_workload, workload_yaml
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network


def _examples() -> Path:
    zigzag = pytest.importorskip("zigzag", reason="zigzag-dse is not installed (pip install .[interop])")
    return Path(zigzag.__file__).parent / "inputs"


NET = Network("zz", (Layer.conv("c1", c_in=3, h=32, w=30, k_out=16, r=3, stride=2, pad=1),
                     Layer.conv("dw", c_in=16, h=16, w=15, k_out=16, r=3, groups=16, pad=(1, 1, 0, 2)),
                     Layer.conv("pw", c_in=16, h=16, w=16, k_out=24, r=1, dilation=1),
                     Layer.conv("dil", n=2, c_in=8, h=20, w=20, k_out=8, r=3, dilation=2, pad=0)))


def test_round_trip_in_tileplan(tmp_path: Path) -> None:
    """Without ZigZag installed: what tileplan writes, tileplan reads back the same (layers and arch)."""
    (tmp_path / "w.yaml").write_text(workload_yaml(NET))
    for a, b in zip(load_workload(tmp_path / "w.yaml").layers, NET.layers, strict=True):
        assert (a.dims, a.stride, a.dilation, a.pad, a.h, a.w) == (b.dims, b.stride, b.dilation, b.pad, b.h, b.w)
    arch = api.load_arch("eyeriss")
    (tmp_path / "hw.yaml").write_text(hardware_yaml(arch))
    back = api.load_arch(str(tmp_path / "hw.yaml"))
    assert [(m.operands, m.size_bytes) for m in back.memories] == [(m.operands, m.size_bytes) for m in arch.memories]
    assert api.load_network(str(tmp_path / "w.yaml")).layers[1].groups == 16


def test_workload_round_trip_through_zigzag(tmp_path: Path) -> None:
    examples = _examples()
    from zigzag.parser.workload_factory import WorkloadFactory
    from zigzag.parser.workload_validator import WorkloadValidator
    from zigzag.stages.parser.workload_parser import WorkloadParserStage

    path = tmp_path / "w.yaml"
    path.write_text(workload_yaml(NET))
    validator = WorkloadValidator(yaml.safe_load(path.read_text()))
    data = validator.normalized_data
    assert validator.validate()
    mapping = WorkloadParserStage.parse_mapping_data(str(examples / "mapping" / "default.yaml"))
    workload = WorkloadFactory(data, mapping).create()
    names = {"B": Dim.N, "G": Dim.G, "K": Dim.K, "C": Dim.C, "OY": Dim.P, "OX": Dim.Q, "FY": Dim.R, "FX": Dim.S}
    for node, layer in zip(sorted(workload.node_list, key=lambda n: n.id), NET.layers, strict=True):
        sizes = {str(d): v for d, v in node.layer_dim_sizes.items()}
        assert {k: sizes.get(k, 1) for k in names} == {k: layer.dims[d] for k, d in names.items()}
    again = load_workload(path)
    for a, b in zip(again.layers, NET.layers, strict=True):
        assert (a.dims, a.stride, a.dilation, a.pad, a.h, a.w) == (b.dims, b.stride, b.dilation, b.pad, b.h, b.w)
    assert api.load_network(str(path)).layers[0].dims == NET.layers[0].dims


def test_hardware_round_trip_through_zigzag(tmp_path: Path) -> None:
    _examples()
    from zigzag.parser.accelerator_factory import AcceleratorFactory
    from zigzag.parser.accelerator_validator import AcceleratorValidator

    arch = api.load_arch("eyeriss")
    path = tmp_path / "hw.yaml"
    path.write_text(hardware_yaml(arch))
    validator = AcceleratorValidator(yaml.safe_load(path.read_text()))
    assert validator.validate()
    acc = AcceleratorFactory(validator.normalized_data).create()
    sizes = {str(op): bits for op, bits in acc.mem_size_dict.items()}  # bits, innermost first
    assert sizes == {"I1": [8 * 128, 8 * 110592, 10**10], "I2": [8 * 256, 8 * 110592, 10**10],
                     "O": [8 * 128, 8 * 110592, 10**10]}
    assert {str(d): n for d, n in acc.operational_array.dimension_sizes.items()} == {"D1": 12, "D2": 14}
    back = api.load_arch(str(path))
    assert [(m.operands, m.size_bytes) for m in back.memories] == [(m.operands, m.size_bytes) for m in arch.memories]
    assert back.register_file.weights_bytes == 256 and [a.size for a in back.pe_array.axes] == [12, 14]


def test_zigzag_examples() -> None:
    examples = _examples()
    arch = load_hardware(examples / "hardware" / "eyeriss_like.yaml")
    assert [(m.name, m.operands, m.size_bytes) for m in arch.memories] == [
        ("sram_1M", ("input", "output"), 1048576), ("sram_64KB", ("weight",), 65536)]
    assert (arch.register_file.inputs_bytes, arch.register_file.weights_bytes, arch.register_file.psums_bytes) == \
        (64, 64, 16)
    assert [a.size for a in arch.pe_array.axes] == [14, 12]
    with pytest.raises(ConfigError, match="duplicate key 'ports'"):  # a real bug in ZigZag's own example
        load_hardware(examples / "hardware" / "tpu_like.yaml")


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``plan ... --emit-zigzag`` run once for the module's tests of the emitted files."""
    return _plan(tmp_path_factory.mktemp("zigzag_emit"))


def _plan(tmp_path: Path) -> Path:
    from tileplan.cli import run

    out = tmp_path / "zz"
    problem = Path(api.__file__).parent / "experiments" / "reference" / "timeloop" / "eyeriss_like" / "problem.yaml"
    assert run(["plan", str(problem), "--arch", "eyeriss", "--strategy", "marvel-joint", "--jobs", "1",
                "--emit-zigzag", str(out)]) == 0
    return out


def test_emitted_mapping_covers_the_layer(emitted: Path) -> None:
    """Spatial x temporal factors of every dimension multiply to the layer's size (tileplan only)."""
    out = emitted
    entry = yaml.safe_load((out / "mapping.yaml").read_text())[1]
    layer = load_workload(out / "workload.yaml").layers[0]
    total = dict.fromkeys(("B", "K", "C", "OY", "OX", "FY", "FX"), 1)
    for loops in entry["spatial_mapping"].values():
        for item in loops:
            d, f = item.split(", ")
            total[d] *= int(f)
    for d, f in entry["temporal_ordering"]:
        total[d] *= f
    names = {"B": Dim.N, "K": Dim.K, "C": Dim.C, "OY": Dim.P, "OX": Dim.Q, "FY": Dim.R, "FX": Dim.S}
    assert total == {k: layer.dims[d] for k, d in names.items()}
    assert sum(1 for _ in entry["spatial_mapping"]) <= 2


def test_emitted_files_load_in_zigzag(emitted: Path) -> None:
    _examples()
    from zigzag.parser.accelerator_factory import AcceleratorFactory
    from zigzag.parser.accelerator_validator import AcceleratorValidator
    from zigzag.parser.mapping_validator import MappingValidator
    from zigzag.parser.workload_factory import WorkloadFactory
    from zigzag.parser.workload_validator import WorkloadValidator

    out = emitted
    mv = MappingValidator(yaml.safe_load((out / "mapping.yaml").read_text()))
    assert mv.validate()
    wv = WorkloadValidator(yaml.safe_load((out / "workload.yaml").read_text()))
    assert wv.validate()
    node = WorkloadFactory(wv.normalized_data, mv.normalized_data).create().node_list[0]
    sizes = {str(d): int(v) for d, v in node.layer_dim_sizes.items()}
    spatial = {str(d): int(node.spatial_mapping.get_total_unrolling_of_layer_dim(d)) for d in node.layer_dim_sizes}
    temporal = {d: n // spatial[d] for d, n in sizes.items() if n // spatial[d] > 1}
    ordering = node.temporal_ordering  # ZigZag's own completeness check: temporal factors = sizes / spatial
    assert ordering.is_complete({d: f for d, f in zip(node.layer_dim_sizes, (
        sizes[str(d)] // spatial[str(d)] for d in node.layer_dim_sizes), strict=True) if f > 1})
    assert sizes["K"] == 32 and len(temporal) >= 1
    av = AcceleratorValidator(yaml.safe_load((out / "hardware.yaml").read_text()))
    assert av.validate()
    AcceleratorFactory(av.normalized_data).create()
