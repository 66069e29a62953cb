"""Bad input gets one clear line and a non-zero exit, never a traceback; outputs are whole or absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tileplan import api
from tileplan.arch import load, load_eplanner_json, load_yaml
from tileplan.errors import ConfigError, MappingError, WorkloadError
from tileplan.mapping import Mapping
from tileplan.workload.layer import Layer

runner = CliRunner()

GOOD = """
name: tiny
clock_hz: 1.0e9
dram: {bandwidth_bytes_per_s: 1.0e9, burst_bytes: 64}
memories:
  - {name: buf, operands: [input, weight, output], size_bytes: 4096}
"""


def cli(*args: str):
    from tileplan.cli import app

    return runner.invoke(app, list(args))


def one_line_error(result) -> str:
    assert result.exit_code != 0
    text = result.output.strip()
    assert "Traceback" not in text
    assert text.startswith("error:"), text
    return text


def test_yaml_missing_and_negative_fields_are_all_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("clock_hz: 1.0e9\n", "").replace("size_bytes: 4096", "size_bytes: -5"))
    with pytest.raises(ConfigError) as err:
        load_yaml(bad)
    message = str(err.value)
    assert "clock_hz: required field is missing" in message
    assert "memories.0.size_bytes" in message and "must be between 1 and 2**40 bytes" in message
    result = cli("plan", "lenet5", "--arch", str(bad))
    text = one_line_error(result)
    assert "clock_hz" in text and "size_bytes" in text


def test_yaml_duplicate_and_unknown_keys(tmp_path: Path) -> None:
    dup = tmp_path / "dup.yaml"
    dup.write_text(GOOD + "memories: []\n")
    with pytest.raises(ConfigError, match="duplicate key 'memories' at line"):
        load_yaml(dup)
    extra = tmp_path / "extra.yaml"
    extra.write_text(GOOD.replace("burst_bytes: 64", "burst_bytes: 64, bursty: 3"))
    with pytest.raises(ConfigError, match=r"dram\.bursty: unknown field"):
        load_yaml(extra)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [oops\n")
    with pytest.raises(ConfigError, match="malformed YAML at line"):
        load_yaml(broken)


def test_a_parsed_text_is_reused_but_never_shared(tmp_path: Path) -> None:
    """arch.load keeps recent texts parsed (a preset is loaded hundreds of times in a long run): each
    caller gets its own copy, a changed file is read afresh, and a bad text fails on every load."""
    from tileplan.arch.load import parse_yaml

    first = parse_yaml(GOOD)
    first["memories"][0]["size_bytes"] = 1  # a caller changing its copy (load_family does)
    assert parse_yaml(GOOD) == yaml.safe_load(GOOD) != first
    arch = tmp_path / "a.yaml"
    arch.write_text(GOOD)
    assert load_yaml(arch).memories[0].size_bytes == 4096
    arch.write_text(GOOD.replace("size_bytes: 4096", "size_bytes: 8192"))
    assert load_yaml(arch).memories[0].size_bytes == 8192
    assert load("ye-64").memories[0].size_bytes == 64 * 1024 and load("ye").memories[0].size_bytes != 64 * 1024
    arch.write_text(GOOD + "memories: []\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="duplicate key 'memories' at line"):
            load_yaml(arch)


def test_operand_without_memory(tmp_path: Path) -> None:
    f = tmp_path / "nooutput.yaml"
    f.write_text(GOOD.replace("[input, weight, output]", "[input, weight]"))
    with pytest.raises(ConfigError, match="no memory holds \\['output'\\]"):
        load_yaml(f)


def test_unknown_preset_and_network() -> None:
    text = one_line_error(cli("plan", "lenet5", "--arch", "tpu9000"))
    assert "unknown accelerator 'tpu9000'" in text and "nmp" in text
    text = one_line_error(cli("plan", "resnet51", "--arch", "nmp"))
    assert "unknown network 'resnet51'" in text and "resnet50" in text


def test_layer_that_cannot_fit_at_tile_size_one(tmp_path: Path) -> None:
    f = tmp_path / "micro.yaml"
    f.write_text(GOOD.replace("size_bytes: 4096", "size_bytes: 2"))
    text = one_line_error(cli("plan", "lenet5", "--arch", str(f)))
    assert "even with every tile size at 1" in text and "'buf'" in text


def test_negative_layer_size() -> None:
    with pytest.raises(WorkloadError, match="layer 'x': c_in must be a positive integer, got -3"):
        Layer.conv("x", c_in=-3, h=4, w=4, k_out=2, r=1)


def test_eval_names_the_broken_constraint(tmp_path: Path) -> None:
    layer = api.load_network("lenet5")["conv2"]
    too_big = Mapping.from_dict({"tiles": {"K": 32}}, dims=layer.dims)
    with pytest.raises(MappingError, match="tile K=32 is larger than the layer's K=16"):
        api.evaluate(layer, "nmp", too_big)
    conv1_2 = api.load_network("vgg16")["conv1_2"]  # the whole layer at once cannot fit 8 KB scratchpads
    with pytest.raises(MappingError, match="'MB0' holds 8192 B .* need"):
        api.evaluate(conv1_2, "nmp", Mapping.from_dict({}, dims=conv1_2.dims))
    path = tmp_path / "m.json"
    path.write_text(too_big.to_json())
    text = one_line_error(cli("eval", "lenet5", "--arch", "nmp", "--layer", "conv2", "--mapping", str(path)))
    assert "tile K=32" in text
    path.write_text("{not json")
    assert "not valid JSON" in one_line_error(cli("eval", "lenet5", "--arch", "nmp", "--layer", "conv2",
                                                  "--mapping", str(path)))


def test_eval_of_a_planned_mapping_reproduces_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = cli("plan", "lenet5", "--arch", "eyeriss", "--json", str(out), "--csv", str(tmp_path / "p.csv"))
    assert result.exit_code == 0, result.output
    plan = json.loads(out.read_text())
    conv2 = next(lp for lp in plan["layers"] if lp["name"] == "conv2")
    res = cli("eval", "lenet5", "--arch", "eyeriss", "--layer", "conv2", "--mapping", str(out), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["latency_cycles"] == conv2["cost"]["latency_cycles"]
    assert (tmp_path / "p.csv").read_text().count("\n") == len(plan["layers"]) + 1


def test_no_half_written_output_when_folder_is_missing(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "plan.json"
    text = one_line_error(cli("plan", "lenet5", "--arch", "nmp", "--json", str(target)))
    assert "does not exist" in text and not target.exists()


def test_eplanner_json_config(tmp_path: Path) -> None:
    cfg = tmp_path / "hw.json"
    cfg.write_text(json.dumps({"bandwidth": 1.6, "frequency": 1.2, "mem_size": [368, 288, 144],
                               "pe_len": [32, 32], "pe_mapping": [["IC"], ["OC"]]}))
    a = load_eplanner_json(cfg)
    assert a.memory_of(api.Operand.INPUT).size_bytes == 368 * 1024
    assert [ax.dims for ax in a.pe_array.axes] == [("C",), ("K",)]
    assert a.peak_macs_per_cycle(4) == 1024 and a.overlap
    cfg.write_text(json.dumps({"bandwidth": 1.6}))
    with pytest.raises(ConfigError, match="missing frequency, mem_size, pe_len, pe_mapping"):
        load_eplanner_json(cfg)


def test_presets_load_and_show() -> None:
    result = cli("arch", "list")
    assert result.exit_code == 0
    for name in ("nmp", "eyeriss", "edge", "hwff1", "hwff6", "eplanner-a", "eplanner-d"):
        assert name in result.output
        load(name)
    shown = cli("arch", "show", "nmp")
    assert "256 MACs/cycle" in shown.output and "128 B bursts" in shown.output


def test_onnx_file_plans_like_a_zoo_name(tmp_path: Path) -> None:
    model = tmp_path / "squeezenet.onnx"
    assert cli("zoo", "export", "squeezenet1_1", str(model)).exit_code == 0
    out = tmp_path / "plan.json"
    result = cli("plan", str(model), "--arch", "eyeriss", "--strategy", "random", "--budget", "200",
                 "--json", str(out))
    assert result.exit_code == 0, result.output
    from_file = json.loads(out.read_text())
    zoo_plan = api.plan("squeezenet1_1", "eyeriss", strategy="random", budget=200, jobs=1)
    assert [lp["name"] for lp in from_file["layers"]] == [lp.name for lp in zoo_plan.layers]
    assert sum(lp["cost"]["dram_input_bytes"] for lp in from_file["layers"]) == pytest.approx(
        sum(lp.cost.dram_input_bytes for lp in zoo_plan.layers))
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(model.read_bytes()[:200])
    assert "onnx" in one_line_error(cli("plan", str(truncated), "--arch", "nmp")).lower()


def test_zoo_show_lists_every_layer() -> None:
    result = cli("zoo", "show", "resnet50")
    assert result.exit_code == 0
    assert "res5c_conv3" in result.output and "fc" in result.output


def test_shipped_examples_work() -> None:
    root = Path(__file__).parent.parent / "examples"
    a = load_yaml(root / "mychip.yaml")
    assert a.cores.total == 4 and a.peak_macs_per_cycle(1) == 4 * 16 * 16
    result = cli("eval", "resnet50", "--arch", "eyeriss", "--layer", "res2a_conv2", "--mapping",
                 str(root / "res2a_conv2_eyeriss.json"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["latency_cycles"] == 737280.0
