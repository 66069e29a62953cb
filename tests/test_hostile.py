"""The hostile-input corpus (issue 28): outputs aimed at inputs, flags that would be ignored, values
that would be coerced, inputs that would blow up memory, invalid ONNX graphs, control characters.

Each case runs the real command line in-process (``tileplan.cli.run``) in a fresh folder holding the
files it needs, and must give its exit code, exactly ONE line on stderr naming the culprit, no
traceback, leave every input file byte-identical and create nothing (no partial output, no temp
file). Cases that need a real process (signals, devices, memory limits) are in
``test_hostile_process.py``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tileplan.cli import run

TINY = """name: tiny
clock_hz: 1.0e9
dram: {bandwidth_bytes_per_s: 1.0e9, burst_bytes: 64}
memories:
  - {name: buf, operands: [input, weight, output], size_bytes: 65536}
pe_array:
  axes:
    - {name: rows, size: 4, dims: [C], mode: unrolled}
"""
EPLANNER = {"bandwidth": 1.6, "frequency": 1.2, "mem_size": [368, 288, 144], "pe_len": [32, 32],
            "pe_mapping": [["IC"], ["OC"]]}
MAPPING = {"tiles": {"K": 4}, "spatial": [{"C": 4}]}
SWEEP_HEADER = ("point,model,strategy,objective,latency_cycles,latency_s,dram_bytes,bursts,energy_pj,edp,"
                "searched_layers\n")


def onnx_model(nodes: list[object], inits: list[object], shape: tuple[int, ...] = (1, 3, 32, 32)) -> bytes:
    """An ONNX model (opset 17) over input ``x`` of ``shape`` with output ``y``, not checked (the point
    is to hand tileplan what a careless exporter or an attacker would)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def weight(name: str = "w", shape: tuple[int, ...] = (8, 3, 3, 3)) -> object:
    import numpy as np
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def const(name: str, values: list[float], dtype: str) -> object:
    import numpy as np
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs: object) -> object:
    from onnx import helper

    return helper.make_node(op, inputs, outputs, name=name, **attrs)


def conv_model() -> bytes:
    return onnx_model([node("Conv", ["x", "w"], ["y"], "conv", kernel_shape=[3, 3])], [weight()])


def pad_model(amount: int) -> bytes:
    pads = const("pads", [0, 0, amount, amount, 0, 0, amount, amount], "int64")
    return onnx_model([node("Pad", ["x", "pads"], ["p"], "pad"), node("Conv", ["p", "w"], ["y"], "conv")],
                      [weight(), pads])


def resize_model(scale: float) -> bytes:
    scales = const("scales", [1, 1, scale, scale], "float32")
    return onnx_model([node("Conv", ["x", "w"], ["c"], "conv"), node("Resize", ["c", "", "scales"], ["y"], "resize")],
                      [weight(), scales])


def arch(old: str, new: str) -> dict[str, str | bytes]:
    assert old in TINY
    return {"bad.yaml": TINY.replace(old, new, 1)}


def eplanner(**changes: object) -> dict[str, str | bytes]:
    return {"hw.json": json.dumps({**EPLANNER, **changes})}


def mapping(**changes: object) -> dict[str, str | bytes]:
    return {"tiny.yaml": TINY, "m.json": json.dumps({**MAPPING, **changes})}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@dataclass
class Case:
    id: str
    argv: list[str]
    expect: str  # a piece of the error line (case-insensitive) naming the culprit
    files: dict[str, str | bytes] = field(default_factory=dict)
    code: int = 2
    links: dict[str, str] = field(default_factory=dict)  # new name -> existing file (hard link)
    symlinks: dict[str, str] = field(default_factory=dict)  # new name -> target


EVAL = ["eval", "lenet5", "--arch", "tiny.yaml", "--layer", "conv2", "--mapping", "m.json"]
M = {"m.onnx": conv_model()}
MY = {"my.yaml": TINY}

CASES = [
    # ------------------------------------------------------------- 28.1 outputs never clobber inputs
    Case("plan-json-is-the-model", ["plan", "m.onnx", "--json", "m.onnx"], "--json m.onnx is the model file", M),
    Case("plan-csv-is-the-model", ["plan", "m.onnx", "--csv", "m.onnx"], "--csv m.onnx is the model file", M),
    Case("plan-csv-is-the-arch", ["plan", "lenet5", "--arch", "my.yaml", "--csv", "my.yaml"],
         "--csv my.yaml is the accelerator file", MY),
    Case("plan-json-is-the-arch", ["plan", "lenet5", "--arch", "my.yaml", "--json", "my.yaml"],
         "is the accelerator file", MY),
    Case("plan-json-is-eplanner-arch", ["plan", "lenet5", "--arch", "hw.json", "--json", "hw.json"],
         "is the accelerator file", eplanner()),
    Case("plan-json-equals-csv", ["plan", "lenet5", "--json", "x", "--csv", "x"], "--json x and --csv x are the same"),
    Case("plan-json-equals-existing-csv", ["plan", "lenet5", "--json", "x", "--csv", "x"], "same file",
         {"x": "keep me\n"}),
    Case("plan-json-equals-csv-spelled-twice", ["plan", "lenet5", "--json", "sub/../x", "--csv", "x"], "same file",
         {"sub/keep": ""}),
    Case("plan-json-hard-link-to-model", ["plan", "m.onnx", "--json", "hard.json"], "is the model file", M,
         links={"hard.json": "m.onnx"}),
    Case("plan-csv-symlink-to-arch", ["plan", "lenet5", "--arch", "my.yaml", "--csv", "link.csv"],
         "is the accelerator file", MY, symlinks={"link.csv": "my.yaml"}),
    Case("report-output-is-the-model", ["report", "m.onnx", "-o", "m.onnx"], "--output m.onnx is the model file", M),
    Case("report-output-is-the-arch", ["report", "lenet5", "--arch", "my.yaml", "-o", "my.yaml"],
         "is the accelerator file", MY),
    Case("sweep-output-is-the-model", ["sweep", "m.onnx", "-o", "m.onnx"], "--output m.onnx is the model file", M),
    Case("sweep-output-is-the-arch", ["sweep", "lenet5", "--arch", "my.yaml", "-o", "my.yaml"],
         "is the accelerator file", MY),
    Case("compare-json-equals-csv", ["compare", "lenet5", "--json", "c", "--csv", "c"], "same file"),
    Case("compare-csv-is-the-model", ["compare", "m.onnx", "--csv", "m.onnx"], "is the model file", M),
    Case("emit-output-is-the-model", ["emit", "m.onnx", "--layer", "conv", "--output", "m.onnx"],
         "is the model file", M),
    Case("emit-output-is-the-arch", ["emit", "lenet5", "--arch", "my.yaml", "--layer", "conv1", "--output", "my.yaml"],
         "is the accelerator file", MY),
    Case("correlate-csv-is-the-measurements", ["correlate", "p.json", "t.csv", "--csv", "t.csv"],
         "is the measurements file", {"p.json": "{}", "t.csv": "layer,seconds\n"}),
    Case("correlate-csv-is-the-plan", ["correlate", "p.json", "t.csv", "--csv", "p.json"], "is the plan file",
         {"p.json": "{}", "t.csv": "layer,seconds\n"}),
    # ------------------------------------------------------------- 28.1 sweep: validate before the CSV exists
    Case("sweep-notes-not-truncated", ["sweep", "lenet5", "-o", "notes.txt"], "not a tileplan sweep CSV",
         {"notes.txt": "my notes, no newline at the end"}),
    Case("sweep-other-sweep-not-truncated", ["sweep", "lenet5", "-o", "s.csv"], "holds another sweep",
         {"s.csv": SWEEP_HEADER.replace("searched_layers", "other") + "0,lenet5,exhaustive,lat"}),
    Case("sweep-output-folder", ["sweep", "lenet5", "-o", "sub"], "sub", {"sub/keep": ""}),
    Case("sweep-budget-zero", ["sweep", "lenet5", "-o", "s.csv", "--budget", "0"], "--budget"),
    Case("sweep-seed-negative", ["sweep", "lenet5", "-o", "s.csv", "--seed", "-3"], "--seed"),
    Case("sweep-batch-huge", ["sweep", "lenet5", "-o", "s.csv", "--batch", "100000"], "--batch"),
    Case("sweep-no-models", ["sweep", ",", "-o", "s.csv"], "0 points"),
    Case("sweep-no-strategies", ["sweep", "lenet5", "-o", "s.csv", "--strategies", ","], "0 points"),
    Case("sweep-unknown-objective", ["sweep", "lenet5", "-o", "s.csv", "--objectives", "speed"], "objective 'speed'"),
    Case("sweep-unknown-strategy", ["sweep", "lenet5", "-o", "s.csv", "--strategies", "magic"], "strategy 'magic'"),
    Case("sweep-unknown-model", ["sweep", "lenet6", "-o", "s.csv"], "lenet6"),
    Case("sweep-ray-address-dead", ["sweep", "lenet5", "-o", "s.csv", "--backend", "ray", "--address",
                                    "127.0.0.1:1"], "no Ray cluster answers"),
    Case("sweep-ray-address-malformed", ["sweep", "lenet5", "-o", "s.csv", "--backend", "ray", "--address", "nowhere"],
         "HOST:PORT"),
    # ------------------------------------------------------------- 28.5 flags that would be ignored
    Case("plan-fix-partition-not-tso", ["plan", "lenet5", "--fix-partition", "KS"], "--fix-partition applies"),
    Case("plan-fix-schedule-not-tso", ["plan", "lenet5", "--strategy", "random", "--fix-schedule", "IS"],
         "--fix-schedule applies"),
    Case("plan-max-group-without-fuse", ["plan", "lenet5", "--max-group", "3"], "add --fuse"),
    Case("plan-max-parallel-not-marvel", ["plan", "lenet5", "--max-parallel", "2"], "--max-parallel applies"),
    Case("plan-min-utilization-not-marvel", ["plan", "lenet5", "--min-utilization", "0.5"], "--min-utilization"),
    Case("plan-no-prune-not-marvel", ["plan", "lenet5", "--no-prune", "symmetry"], "--no-prune applies"),
    Case("compare-max-parallel-not-marvel", ["compare", "lenet5", "--max-parallel", "2"], "--max-parallel applies"),
    Case("compare-no-strategies", ["compare", "lenet5", "--strategies", ","], "names no strategy"),
    Case("compare-max-group-without-fuse", ["compare", "lenet5", "--max-group", "3"], "add --fuse"),
    Case("report-max-group-without-fuse", ["report", "lenet5", "-o", "r.html", "--max-group", "3"], "add --fuse"),
    Case("report-budget-zero", ["report", "lenet5", "-o", "r.html", "--budget", "0"], "--budget"),
    Case("bench-repeat-zero", ["bench", "--networks", "lenet5", "--repeat", "0"], "--repeat must be at least 1"),
    Case("bench-repeat-negative", ["bench", "--networks", "lenet5", "--repeat", "-1"], "--repeat"),
    Case("bench-no-networks", ["bench", "--networks", ","], "--networks"),
    # ------------------------------------------------------------- 28.5 values that would be coerced
    Case("arch-precision-true", ["plan", "lenet5", "--arch", "bad.yaml"], "precision_bytes: must be a number, got true",
         {"bad.yaml": TINY + "precision_bytes: true\n"}),
    Case("arch-set-precision-true", ["plan", "lenet5", "--set", "precision_bytes=true"], "got true"),
    Case("arch-clock-true", ["plan", "lenet5", "--arch", "bad.yaml"], "clock_hz: must be a number",
         arch("clock_hz: 1.0e9", "clock_hz: true")),
    Case("arch-burst-false", ["plan", "lenet5", "--arch", "bad.yaml"], "burst_bytes", arch("burst_bytes: 64",
                                                                                           "burst_bytes: false")),
    Case("arch-energy-true", ["plan", "lenet5", "--set", "dram.energy_pj_per_byte=yes"], "energy_pj_per_byte"),
    Case("eplanner-pe-len-fraction", ["plan", "lenet5", "--arch", "hw.json"], "16.7", eplanner(pe_len=[16.7, 16])),
    Case("eplanner-pe-len-bool", ["plan", "lenet5", "--arch", "hw.json"], "pe_len", eplanner(pe_len=[True, 16])),
    Case("eplanner-bandwidth-true", ["plan", "lenet5", "--arch", "hw.json"], "bandwidth must be a number",
         eplanner(bandwidth=True)),
    Case("eplanner-mem-size-true", ["plan", "lenet5", "--arch", "hw.json"], "mem_size",
         eplanner(mem_size=[True, 1, 1])),
    Case("mapping-tiles-a-list", EVAL, "mapping field 'tiles' must be like", mapping(tiles=[4, 4])),
    Case("mapping-spatial-an-object", EVAL, "mapping field 'spatial'", mapping(spatial={"C": 4})),
    Case("mapping-split-a-list", EVAL, "mapping field 'split'", mapping(split={"clusters": [2]})),
    Case("mapping-levels-of-numbers", EVAL, "mapping field 'levels'", mapping(levels=[1, 2])),
    Case("mapping-order-a-number", EVAL, "mapping field 'order'", mapping(order=7)),
    # ------------------------------------------------------------- 28.4 bounded before costed
    Case("arch-dev-zero", ["plan", "lenet5", "--arch", "/dev/zero"], "/dev/zero: larger than 64 MiB"),
    Case("mapping-dev-zero", EVAL[:-1] + ["/dev/zero"], "/dev/zero: larger than 64 MiB", {"tiny.yaml": TINY}),
    Case("correlate-plan-dev-zero", ["correlate", "/dev/zero", "t.csv"], "/dev/zero: larger than 64 MiB",
         {"t.csv": "layer,seconds\n"}),
    Case("arch-nested-deep", ["plan", "lenet5", "--arch", "bad.yaml"], "nested too deeply",
         {"bad.yaml": "name: " + nested(20000) + "\n"}),
    Case("arch-complex-key", ["plan", "lenet5", "--arch", "bad.yaml"], "keys must be plain names",
         {"bad.yaml": TINY + "? [a, b]\n: 1\n"}),
    Case("arch-alias-bomb", ["plan", "lenet5", "--arch", "bad.yaml"], "memories",
         {"bad.yaml": TINY.split("memories:")[0] + "x0: &a0 [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
             f"x{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)) + "memories: *a8\n"}),
    Case("eplanner-nested-deep", ["plan", "lenet5", "--arch", "hw.json"], "nested too deeply",
         {"hw.json": nested(100000)}),
    Case("mapping-nested-deep", EVAL, "nested too deeply", {"tiny.yaml": TINY, "m.json": nested(100000)}),
    Case("onnx-pad-1e6", ["plan", "m.onnx"], "padding of 1,000,000", {"m.onnx": pad_model(10**6)}),
    Case("onnx-resize-1e6", ["plan", "m.onnx"], "larger than the 65,536", {"m.onnx": resize_model(1e6)}),
    Case("onnx-resize-1e12", ["plan", "m.onnx"], "larger than the 65,536", {"m.onnx": resize_model(1e12)}),
    # ------------------------------------------------------------- 28.5 invalid ONNX named, not papered over
    Case("onnx-two-writers", ["plan", "m.onnx"], "node 'conv_b' (Conv) writes tensor 'y', which node 'conv_a'",
         {"m.onnx": onnx_model([node("Conv", ["x", "w"], ["y"], "conv_a"), node("Conv", ["x", "w"], ["y"], "conv_b")],
                               [weight()])}),
    Case("onnx-writes-an-initializer", ["plan", "m.onnx"], "which an initializer already defines",
         {"m.onnx": onnx_model([node("Conv", ["x", "w"], ["c"], "conv"), node("Relu", ["c"], ["w"], "r"),
                                node("Relu", ["c"], ["y"], "r2")], [weight()])}),
    Case("onnx-writes-the-input", ["plan", "m.onnx"], "which a graph input already defines",
         {"m.onnx": onnx_model([node("Conv", ["x", "w"], ["y"], "conv"), node("Relu", ["y"], ["x"], "r")],
                               [weight()])}),
    Case("onnx-reads-its-own-output", ["plan", "m.onnx"], "node 'selfadd' (Add) reads its own output 'a'",
         {"m.onnx": onnx_model([node("Conv", ["x", "w"], ["c"], "conv"), node("Add", ["c", "a"], ["a"], "selfadd"),
                                node("Relu", ["c"], ["y"], "r")], [weight()])}),
    Case("onnx-auto-pad-bogus", ["plan", "m.onnx"], "auto_pad='BOGUS'",
         {"m.onnx": onnx_model([node("Conv", ["x", "w"], ["y"], "conv", auto_pad="BOGUS", kernel_shape=[3, 3])],
                               [weight()])}),
    Case("onnx-auto-pad-lowercase", ["plan", "m.onnx"], "auto_pad='same_upper'",
         {"m.onnx": onnx_model([node("Conv", ["x", "w"], ["y"], "conv", auto_pad="same_upper", kernel_shape=[3, 3])],
                               [weight()])}),
    # ------------------------------------------------------------- 28.5 user terms
    Case("correlate-fused-plan", ["correlate", "p.json", "t.csv"], "is a fused plan",
         {"p.json": json.dumps({"base": {}, "groups": [], "max_group": 4}), "t.csv": "layer,seconds\n"}),
    Case("correlate-plan-a-list", ["correlate", "p.json", "t.csv"], "expected a JSON object",
         {"p.json": "[1, 2]", "t.csv": "layer,seconds\n"}),
    Case("correlate-plan-lacks-layers", ["correlate", "p.json", "t.csv"], "p.json: not a tileplan plan file",
         {"p.json": "{}", "t.csv": "layer,seconds\n"}),
    # ------------------------------------------------------------- 28.6 control characters in error lines
    Case("arch-path-with-escapes", ["plan", "lenet5", "--arch", "evil\x1b]0;pwned\x07.yaml"], "evil\\x1b]0;pwned\\x07"),
    Case("network-name-with-escapes", ["plan", "net\x1b[2J\x1b[31m"], "net\\x1b[2J\\x1b[31m"),
    Case("arch-bidi-override-name", ["plan", "lenet5", "--arch", "\u202eevil.yaml"], "\\u202eevil.yaml"),
]


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: file bytes, or what a link points to, or a folder marker."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        out[key] = f"-> {os.readlink(p)}" if p.is_symlink() else ("<dir>" if p.is_dir() else p.read_bytes())
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_one_clear_line_and_touches_nothing(case: Case, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for new, old in case.links.items():
        os.link(tmp_path / old, tmp_path / new)
    for new, old in case.symlinks.items():
        os.symlink(old, tmp_path / new)
    before = _snapshot(tmp_path)
    code = run(case.argv)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == case.code, (code, captured.err)
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and "Traceback" not in captured.err
    assert "internal error" not in lines[0], lines[0]
    assert case.expect.lower() in lines[0].lower(), lines[0]
    assert not any(ord(ch) < 32 or 0x7f <= ord(ch) < 0xa0 or 0x202a <= ord(ch) <= 0x202e for ch in captured.err
                   if ch != "\n"), repr(captured.err)
    assert _snapshot(tmp_path) == before  # every input byte-identical, nothing created


def test_the_hostile_corpus_is_large() -> None:
    assert len(CASES) >= 60
