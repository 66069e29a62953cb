"""A corpus of bad inputs a new user tries: each gets a non-zero exit, exactly one line on stderr
naming the culprit, no traceback, no warning spam and no file written.

Every case runs the real command line in-process (``tileplan.cli.run``) in a fresh folder; the
files a case needs are written there first, and afterwards the folder must hold nothing else.
"""

from __future__ import annotations

import json
import warnings
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


def arch(old: str, new: str) -> dict[str, str]:
    """A ``bad.yaml`` that is TINY with one edit."""
    assert old in TINY
    return {"bad.yaml": TINY.replace(old, new, 1)}


def eplanner(**changes: object) -> dict[str, str]:
    return {"hw.json": json.dumps({**EPLANNER, **changes})}


MAPPING_OK = {"tiles": {"K": 4}, "spatial": [{"C": 4}]}


def mapping(**changes: object) -> dict[str, str]:
    return {"m.json": json.dumps({**MAPPING_OK, **changes})}


def ir_with(old: str, new: str) -> dict[str, str]:
    text = (Path(__file__).parent / "fixtures" / "lenet5_conv1_nmp.ir").read_text()
    assert old in text, old
    return {"bad.ir": text.replace(old, new, 1)}


def onnx_conv(shape: tuple[int, int, int, int], *, name: str = "x", node_name: str = "conv") -> bytes:
    """A one-convolution ONNX model (3x3, 8 filters) reading an input of ``shape``."""
    import onnx
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, (8, shape[1], 3, 3), [0.0] * (8 * shape[1] * 9))
    node = helper.make_node("Conv", [name, "w"], ["y"], name=node_name, kernel_shape=[3, 3])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph)).SerializeToString()


_TL = Path(__file__).parent.parent / "tileplan" / "experiments" / "reference" / "timeloop" / "eyeriss_like"
TL_FILES = {"p.yaml": (_TL / "problem.yaml").read_text(), "a.yaml": (_TL / "arch.yaml").read_text(),
            "m.yaml": (_TL / "map.yaml").read_text()}
TL_EVAL = ["eval", "p.yaml", "--arch", "a.yaml", "--mapping", "m.yaml"]


def tl(name: str, old: str, new: str) -> dict[str, str]:
    """The eyeriss_like Timeloop files with one edit in file ``name``."""
    assert old in TL_FILES[name], old
    return TL_FILES | {name: TL_FILES[name].replace(old, new, 1)}

ZZ_LAYER = """- id: 0
  operator_type: Conv
  equation: O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]
  dimension_relations: [ix=2*ox+1*fx, iy=2*oy+1*fy]
  loop_dims: [B, K, C, OY, OX, FY, FX]
  loop_sizes: [1, 8, 3, 16, 16, 3, 3]
  operand_precision: {W: 8, I: 8, O: 16, O_final: 8}
"""
ZZ_HW = """name: zz
memories:
  sram:
    size: 1048576
    latency: 1
    operands: [I1, I2, O]
    ports: []
    served_dimensions: [D1, D2]
  dram:
    size: 10000000000
    latency: 1
    operands: [I1, I2, O]
    ports: []
    served_dimensions: [D1, D2]
operational_array: {unit_energy: 0.5, dimensions: [D1, D2], sizes: [8, 8]}
"""


@dataclass
class Case:
    id: str
    argv: list[str]
    expect: str  # a piece of the error line (case-insensitive) naming the culprit
    files: dict[str, str | bytes] = field(default_factory=dict)
    code: int = 2


PLAN = ["plan", "lenet5", "--arch"]
EVAL = ["eval", "lenet5", "--arch", "bad.yaml", "--layer", "conv2", "--mapping", "m.json"]
EVAL_TINY = ["eval", "lenet5", "--arch", "tiny.yaml", "--layer", "conv2", "--mapping", "m.json"]

CASES = [
    # ------------------------------------------------------------- accelerator files
    Case("arch-binary-garbage", PLAN + ["bad.yaml"], "bad.yaml", {"bad.yaml": bytes(range(256)) * 4}),
    Case("arch-missing-file", PLAN + ["nothere.yaml"], "nothere.yaml"),
    Case("arch-unknown-preset", PLAN + ["tpu9000"], "unknown accelerator 'tpu9000'"),
    Case("arch-folder", PLAN + ["."], "accelerator"),
    Case("arch-malformed-yaml", PLAN + ["bad.yaml"], "malformed YAML", {"bad.yaml": "name: [oops\n"}),
    Case("arch-not-a-mapping", PLAN + ["bad.yaml"], "expected a mapping", {"bad.yaml": "- 1\n- 2\n"}),
    Case("arch-empty-file", PLAN + ["bad.yaml"], "expected a mapping", {"bad.yaml": ""}),
    Case("arch-duplicate-key", PLAN + ["bad.yaml"], "duplicate key 'memories'",
         {"bad.yaml": TINY + "memories: []\n"}),
    Case("arch-unknown-field", PLAN + ["bad.yaml"], "dram.bursty: unknown field",
         arch("burst_bytes: 64", "burst_bytes: 64, bursty: 3")),
    Case("arch-missing-clock", PLAN + ["bad.yaml"], "clock_hz: required field is missing",
         arch("clock_hz: 1.0e9\n", "")),
    Case("arch-negative-size", PLAN + ["bad.yaml"], "memories.0.size_bytes",
         arch("size_bytes: 65536", "size_bytes: -5")),
    Case("arch-size-1e29", PLAN + ["bad.yaml"], "memories.0.size_bytes: must be between 1 and 2**40 bytes",
         arch("size_bytes: 65536", "size_bytes: 1e29")),
    Case("arch-size-1.0e29", PLAN + ["bad.yaml"], "between 1 and 2**40 bytes",
         arch("size_bytes: 65536", "size_bytes: 1.0e+29")),
    Case("arch-burst-1.0e20", PLAN + ["bad.yaml"], "dram.burst_bytes: must be between 1 and 2**20",
         arch("burst_bytes: 64", "burst_bytes: 1.0e+20")),
    Case("arch-size-float", PLAN + ["bad.yaml"], "memories.0.size_bytes",
         arch("size_bytes: 65536", "size_bytes: 1000.5")),
    Case("arch-burst-1e20", PLAN + ["bad.yaml"], "dram.burst_bytes: must be between 1 and 2**20 bytes",
         arch("burst_bytes: 64", "burst_bytes: 1e20")),
    Case("arch-clock-inf", PLAN + ["bad.yaml"], "clock_hz", arch("clock_hz: 1.0e9", "clock_hz: .inf")),
    Case("arch-clock-nan", PLAN + ["bad.yaml"], "clock_hz", arch("clock_hz: 1.0e9", "clock_hz: .nan")),
    Case("arch-clock-1e300", PLAN + ["bad.yaml"], "clock_hz: must be between 1e3 and 1e11 Hz",
         arch("clock_hz: 1.0e9", "clock_hz: 1e300")),
    Case("arch-clock-zero", PLAN + ["bad.yaml"], "clock_hz", arch("clock_hz: 1.0e9", "clock_hz: 0")),
    Case("arch-clock-text", PLAN + ["bad.yaml"], "clock_hz", arch("clock_hz: 1.0e9", "clock_hz: fast")),
    Case("arch-bandwidth-tiny", PLAN + ["bad.yaml"], "dram.bandwidth_bytes_per_s",
         arch("bandwidth_bytes_per_s: 1.0e9", "bandwidth_bytes_per_s: 1e-300")),
    Case("arch-bandwidth-inf", PLAN + ["bad.yaml"], "dram.bandwidth_bytes_per_s",
         arch("bandwidth_bytes_per_s: 1.0e9", "bandwidth_bytes_per_s: .inf")),
    Case("arch-burst-latency-huge", PLAN + ["bad.yaml"], "dram.burst_latency_ns",
         arch("burst_bytes: 64", "burst_bytes: 64, burst_latency_ns: 1e300")),
    Case("arch-energy-inf", PLAN + ["bad.yaml"], "dram.energy_pj_per_byte",
         arch("burst_bytes: 64", "burst_bytes: 64, energy_pj_per_byte: .inf")),
    Case("arch-pes-1e9", PLAN + ["bad.yaml"], "pe_array.axes.0.size", arch("size: 4,", "size: 1000000000,")),
    Case("arch-cores-huge", PLAN + ["bad.yaml"], "cores",
         {"bad.yaml": TINY + "cores: {clusters: 100000, cores_per_cluster: 100000}\n"}),
    Case("arch-axis-unknown-dim", PLAN + ["bad.yaml"], "pe_array.axes.0.dims", arch("dims: [C]", "dims: [X]")),
    Case("arch-operand-unknown", PLAN + ["bad.yaml"], "memories.0.operands",
         arch("[input, weight, output]", "[input, weight, outptu]")),
    Case("arch-operand-twice", PLAN + ["bad.yaml"], "operand 'input' is held by both",
         {"bad.yaml": TINY.replace("memories:\n", "memories:\n  - {name: b2, operands: [input], size_bytes: 9}\n")}),
    Case("arch-split-reduction", PLAN + ["bad.yaml"], "reduction",
         {"bad.yaml": TINY + "cores: {clusters: 2, split_dims: [C]}\n"}),
    Case("arch-precision-huge", PLAN + ["bad.yaml"], "precision_bytes", {"bad.yaml": TINY + "precision_bytes: 1e6\n"}),
    Case("arch-nothing-fits", PLAN + ["bad.yaml"], "even with every tile size at 1",
         arch("size_bytes: 65536", "size_bytes: 2")),
    Case("eplanner-bandwidth-text", PLAN + ["hw.json"], "bandwidth", eplanner(bandwidth="fast")),
    Case("eplanner-frequency-null", PLAN + ["hw.json"], "frequency", eplanner(frequency=None)),
    Case("eplanner-missing-fields", PLAN + ["hw.json"], "missing frequency", {"hw.json": '{"bandwidth": 1}'}),
    Case("eplanner-not-object", PLAN + ["hw.json"], "hw.json", {"hw.json": "[1, 2]"}),
    Case("eplanner-malformed", PLAN + ["hw.json"], "malformed JSON", {"hw.json": "{"}),
    Case("eplanner-mem-size-short", PLAN + ["hw.json"], "mem_size", eplanner(mem_size=[1, 2])),
    Case("eplanner-binary", PLAN + ["hw.json"], "hw.json", {"hw.json": b"\xff\xfe\x00garbage"}),
    # ------------------------------------------------------------- networks and models
    Case("net-unknown", ["plan", "resnet51"], "unknown network 'resnet51'"),
    Case("net-markup-name", ["plan", "net[/x]"], "net[/x]"),
    Case("net-markup-bold", ["plan", "[bold]x"], "[bold]x"),
    Case("onnx-missing", ["plan", "nothere.onnx"], "nothere.onnx"),
    Case("onnx-garbage", ["plan", "bad.onnx"], "bad.onnx", {"bad.onnx": b"\x08\x07garbage" * 10}),
    Case("onnx-empty", ["plan", "bad.onnx"], "bad.onnx", {"bad.onnx": b""}),
    Case("onnx-text", ["plan", "bad.onnx"], "bad.onnx", {"bad.onnx": "hello world\n"}),
    Case("onnx-zero-size-input", ["plan", "m.onnx"], "has size 0 on axis 2", {"m.onnx": onnx_conv((1, 3, 0, 8))}),
    Case("onnx-huge-input", ["plan", "m.onnx"], "larger than the 65,536", {"m.onnx": onnx_conv((1, 3, 100000, 8))}),
    # ------------------------------------------------------------- options
    Case("plan-objective", ["plan", "lenet5", "--objective", "x"], "objective 'x'"),
    Case("plan-strategy", ["plan", "lenet5", "--strategy", "x"], "strategy 'x'"),
    Case("plan-budget-negative", ["plan", "lenet5", "--strategy", "random", "--budget", "-5"], "--budget"),
    Case("plan-budget-zero", ["plan", "lenet5", "--strategy", "random", "--budget", "0"], "--budget"),
    Case("plan-budget-text", ["plan", "lenet5", "--budget", "many"], "--budget"),
    Case("plan-seed-negative", ["plan", "lenet5", "--strategy", "random", "--seed", "-1"], "--seed"),
    Case("plan-batch-huge", ["plan", "lenet5", "--batch", "1000000000"], "--batch"),
    Case("plan-batch-zero", ["plan", "lenet5", "--batch", "0"], "--batch"),
    Case("plan-jobs-zero", ["plan", "lenet5", "--jobs", "0"], "--jobs"),
    Case("plan-unknown-option", ["plan", "lenet5", "--fast"], "--fast"),
    Case("plan-no-model", ["plan"], "model"),
    Case("unknown-command", ["plam", "lenet5"], "plam"),
    Case("emit-objective", ["emit", "lenet5", "--objective", "x", "--output", "out"], "objective 'x'"),
    Case("emit-strategy", ["emit", "lenet5", "--strategy", "x", "--output", "out"], "strategy 'x'"),
    Case("emit-target", ["emit", "lenet5", "--target", "x", "--output", "out"], "target 'x'"),
    Case("emit-unknown-layer", ["emit", "lenet5", "--layer", "conv9", "--output", "c.ir"], "conv9"),
    Case("verify-objective", ["verify", "lenet5", "--objective", "x"], "objective 'x'"),
    Case("verify-strategy", ["verify", "lenet5", "--strategy", "x"], "strategy 'x'"),
    Case("bench-objective", ["bench", "--networks", "lenet5", "--objective", "x"], "objective 'x'"),
    Case("bench-strategy", ["bench", "--networks", "lenet5", "--strategy", "x"], "strategy 'x'"),
    Case("bench-network", ["bench", "--networks", "lenet6"], "lenet6"),
    Case("bench-arch", ["bench", "--networks", "lenet5", "--archs", "tpu"], "tpu"),
    Case("bench-fuse-max-group", ["bench", "--networks", "lenet5", "--fuse", "--max-group", "1"], "max-group"),
    Case("zoo-show-batch-huge", ["zoo", "show", "lenet5", "--batch", "1000000000"], "--batch"),
    Case("experiment-unknown", ["experiment", "nosuch"], "unknown experiment 'nosuch'"),
    # ------------------------------------------------------------- output paths (checked before the search)
    Case("json-missing-folder", ["plan", "vgg16", "--json", "no/plan.json"], "folder no does not exist"),
    Case("json-into-a-file", ["plan", "vgg16", "--json", "f.txt/plan.json"], "f.txt is a file",
         {"f.txt": "x"}),
    Case("json-is-a-folder", ["plan", "vgg16", "--json", "sub"], "sub: it is a folder", {"sub/keep": ""}),
    Case("json-unwritable", ["plan", "vgg16", "--json", "/proc/plan.json"], "/proc/plan.json"),
    Case("csv-missing-folder", ["plan", "vgg16", "--csv", "no/plan.csv"], "folder no does not exist"),
    Case("csv-unwritable", ["plan", "vgg16", "--csv", "/proc/plan.csv"], "/proc/plan.csv"),
    Case("emit-output-missing-folder", ["emit", "vgg16", "--layer", "conv1_1", "--output", "no/c.ir"],
         "folder no does not exist"),
    Case("emit-output-is-a-file", ["emit", "vgg16", "--output", "f.txt"], "f.txt", {"f.txt": "x"}),
    Case("emit-output-unwritable", ["emit", "vgg16", "--output", "/proc/progs"], "/proc/progs"),
    Case("zoo-export-missing-folder", ["zoo", "export", "lenet5", "no/l.onnx"], "folder no does not exist"),
    Case("zoo-export-into-a-file", ["zoo", "export", "lenet5", "f.txt/l.onnx"], "f.txt is a file", {"f.txt": "x"}),
    Case("zoo-export-unwritable", ["zoo", "export", "lenet5", "/proc/l.onnx"], "/proc/l.onnx"),
    Case("bench-json-missing-folder", ["bench", "--networks", "vgg16", "--json", "no/b.json"],
         "folder no does not exist"),
    # ------------------------------------------------------------- mappings (eval)
    Case("mapping-missing-file", EVAL_TINY[:-1] + ["nothere.json"], "nothere.json", {"tiny.yaml": TINY}),
    Case("mapping-not-json", EVAL_TINY, "not valid JSON", {"tiny.yaml": TINY, "m.json": "{oops"}),
    Case("mapping-binary", EVAL_TINY, "m.json", {"tiny.yaml": TINY, "m.json": b"\xff\xfe\x00\x01"}),
    Case("mapping-a-list", EVAL_TINY, "object", {"tiny.yaml": TINY, "m.json": "[1, 2]"}),
    Case("mapping-unknown-field", EVAL_TINY, "unknown fields", {"tiny.yaml": TINY, **mapping(tilez={})}),
    Case("mapping-tile-float", EVAL_TINY, "3.7", {"tiny.yaml": TINY, **mapping(tiles={"K": 3.7})}),
    Case("mapping-tile-text", EVAL_TINY, "tile", {"tiny.yaml": TINY, **mapping(tiles={"K": "four"})}),
    Case("mapping-tile-zero", EVAL_TINY, "tile", {"tiny.yaml": TINY, **mapping(tiles={"K": 0})}),
    Case("mapping-tile-too-big", EVAL_TINY, "tile K=32 is larger", {"tiny.yaml": TINY, **mapping(tiles={"K": 32})}),
    Case("mapping-unroll-negative", EVAL_TINY, "unroll", {"tiny.yaml": TINY, **mapping(spatial=[{"C": -2}])}),
    Case("mapping-unroll-zero", EVAL_TINY, "unroll", {"tiny.yaml": TINY, **mapping(spatial=[{"C": 0}])}),
    Case("mapping-unroll-float", EVAL_TINY, "unroll", {"tiny.yaml": TINY, **mapping(spatial=[{"C": 1.5}])}),
    Case("mapping-unroll-too-many", EVAL_TINY, "has 4 PEs", {"tiny.yaml": TINY, **mapping(spatial=[{"C": 6}])}),
    Case("mapping-split-zero", EVAL_TINY, "split", {"tiny.yaml": TINY, **mapping(split={"clusters": {"K": 0}})}),
    Case("mapping-order-bad", EVAL_TINY, "order", {"tiny.yaml": TINY, **mapping(order="KKK")}),
    Case("mapping-dim-unknown", EVAL_TINY, "X", {"tiny.yaml": TINY, **mapping(tiles={"X": 2})}),
    Case("mapping-layout-bad", EVAL_TINY, "layout", {"tiny.yaml": TINY, **mapping(layouts={"input": "NCHX"})}),
    Case("plan-json-layers-lack-fields", EVAL_TINY, "m.json",
         {"tiny.yaml": TINY, "m.json": json.dumps({"layers": [{"mapping": {}}, {"x": 1}]})}),
    Case("plan-json-layers-not-list", EVAL_TINY, "m.json",
         {"tiny.yaml": TINY, "m.json": json.dumps({"layers": 5})}),
    Case("plan-json-no-such-layer", EVAL_TINY, "no mapping for layer 'conv2'",
         {"tiny.yaml": TINY, "m.json": json.dumps({"layers": [{"name": "conv1", "mapping": {}}]})}),
    Case("eval-unknown-layer", EVAL_TINY[:5] + ["conv9", "--mapping", "m.json"], "conv9",
         {"tiny.yaml": TINY, **mapping()}),
    # ------------------------------------------------------------- programs (run)
    Case("ir-missing", ["run", "nothere.ir"], "nothere.ir"),
    Case("ir-binary", ["run", "bad.ir"], "bad.ir", {"bad.ir": bytes(range(256))}),
    Case("ir-no-text-section", ["run", "bad.ir"], "[text]", {"bad.ir": "[info]\nLAYER x\n[var]\n"}),
    Case("ir-huge-dims", ["run", "bad.ir"], "bad.ir: the program is too big to execute",
         ir_with("INPUT(1,1,1,32,32)", "INPUT(100000000,1,1,32,32)")),
    Case("ir-inconsistent-dims", ["run", "bad.ir"], "INPUT",
         ir_with("INPUT(1,1,1,32,32)", "INPUT(1,1,1,32000000,32000000)")),
    Case("ir-negative-dims", ["run", "bad.ir"], "INPUT", ir_with("INPUT(1,1,1,32,32)", "INPUT(1,1,1,-32,32)")),
    Case("ir-unknown-instruction", ["run", "bad.ir"], "FROB",
         ir_with("INIT MB2[0] OUTPUT_17", "FROB MB2[0] OUTPUT_17")),
    Case("tl-problem-missing-dim", TL_EVAL, "problem.instance.M is missing", tl("p.yaml", "        M: 32\n", "")),
    Case("tl-problem-unknown-key", TL_EVAL, "unknown keys ['X']",
         tl("p.yaml", "        M: 32\n", "        M: 32\n        X: 4\n")),
    Case("tl-problem-negative", TL_EVAL, "problem.instance.C must be an integer", tl("p.yaml", "C: 3", "C: -3")),
    Case("tl-problem-bad-projection", TL_EVAL, "unknown projection",
         tl("p.yaml", "                  -   - P\n                      - Wstride", "                  -   - P")),
    Case("tl-problem-size-mismatch", TL_EVAL, "does not give P=112", tl("p.yaml", "W: 224", "W: 300")),
    Case("tl-problem-extra-space", TL_EVAL, "not Weights, Inputs, Outputs",
         tl("p.yaml", "name: Weights", "name: Filters")),
    Case("tl-problem-python-tag", TL_EVAL, "not a Timeloop tag",
         tl("p.yaml", "C: 3", "C: !!python/object/apply:os.system ['touch pwned']")),
    Case("tl-problem-duplicate-key", TL_EVAL, "duplicate key 'C'", tl("p.yaml", "C: 3", "C: 3\n        C: 4")),
    Case("tl-arch-unknown-tag", TL_EVAL, "'!Evil'", tl("a.yaml", "!Container # Top-level system", "!Evil")),
    Case("tl-arch-no-mac", TL_EVAL, "no compute unit", tl("a.yaml", "class: intmac", "class: adder")),
    Case("tl-arch-no-dram", TL_EVAL, "outermost storage level must be one DRAM",
         tl("a.yaml", "class: DRAM", "class: SRAM")),
    Case("tl-arch-v03", TL_EVAL, "v0.4", tl("a.yaml", "  nodes: # Top-level is hierarchical", "  subtree:")),
    Case("tl-arch-bad-depth", TL_EVAL, "attribute depth must be a positive integer",
         tl("a.yaml", "depth: 16384", "depth: -1")),
    Case("tl-arch-bad-keep", TL_EVAL, "keep/bypass list", tl("a.yaml", "keep: [Inputs, Outputs]", "keep: [Psums]")),
    Case("tl-arch-two-buffers", TL_EVAL, "exactly one shared on-chip buffer",
         tl("a.yaml", "  - !Container # Each column", "  - !Component\n    name: l2\n    class: SRAM\n"
            "    attributes: {depth: 64, width: 64}\n\n  - !Container # Each column")),
    Case("tl-map-unknown-level", TL_EVAL, "unknown level 'L9'", tl("m.yaml", "target: DRAM\n    type: temporal",
                                                                  "target: L9\n    type: temporal")),
    Case("tl-map-bad-product", TL_EVAL, "factors of M multiply to 64",
         tl("m.yaml", "C1 M4 R1 S1 N1 P8 Q2", "C1 M8 R1 S1 N1 P8 Q2")),
    Case("tl-map-unknown-dim", TL_EVAL, "factor 'Z2' names a dimension",
         tl("m.yaml", "C1 M4 R1 S1 N1 P8 Q2", "C1 M4 R1 S1 N1 P8 Q2 Z2")),
    Case("tl-map-bad-factor", TL_EVAL, "must be a dimension and a positive integer",
         tl("m.yaml", "C1 M4 R1", "C1 Mx R1")),
    Case("tl-map-bad-permutation", TL_EVAL, "permutation 'MQPCRSNM'",
         tl("m.yaml", "permutation: MQPCRSN", "permutation: MQPCRSNM")),
    Case("tl-map-bad-type", TL_EVAL, "type must be temporal, spatial or datatype",
         tl("m.yaml", "target: DRAM\n    type: temporal", "target: DRAM\n    type: sometimes")),
    Case("tl-map-spatial-too-wide", TL_EVAL, "use 28 x 1 (meshX x meshY)",
         {**TL_FILES, "m.yaml": TL_FILES["m.yaml"].replace(
             "factors: C1 M1 R1 S1 N1 P1 Q14\n    permutation: QCMRSNP\n    split: 1",
             "factors: C1 M1 R1 S1 N1 P2 Q14\n    permutation: QPCMRSN\n    split: 2").replace(
             "C1 M1 R1 S1 N1 P14 Q4", "C1 M1 R1 S1 N1 P7 Q4")}),
    Case("tl-map-missing-factors", TL_EVAL, "factors are missing",
         tl("m.yaml", "    factors: C1 M4 R1 S1 N1 P8 Q2\n", "")),
    Case("tl-map-keep-and-bypass", TL_EVAL, "both kept and bypassed",
         tl("m.yaml", "    bypass:\n      []", "    bypass:\n      - Weights")),
    Case("tl-map-unrepresentable", TL_EVAL, "refills it within a step",
         tl("m.yaml", "factors: C1 M1 R3 S1 N1 P1 Q1\n    permutation: RCMSNPQ",
         "factors: C1 M1 R1 S1 N1 P1 Q1\n    permutation: RCMSNPQ")
         | {"m.yaml": tl("m.yaml", "factors: C1 M1 R3 S1 N1 P1 Q1\n    permutation: RCMSNPQ",
                         "factors: C1 M1 R1 S1 N1 P1 Q1\n    permutation: RCMSNPQ")["m.yaml"].replace(
             "factors: C1 M1 R1 S1 N1 P1 Q1\n    permutation: CMRSNPQ\n  - target: inter_PE_spatial",
             "factors: C1 M1 R3 S1 N1 P1 Q1\n    permutation: RCMSNPQ\n  - target: inter_PE_spatial", 1)}),
    Case("tl-map-without-tl-arch", ["eval", "p.yaml", "--arch", "eyeriss", "--mapping", "m.yaml"],
         "pass --arch ARCH.yaml", TL_FILES),
    Case("tl-emit-without-tl-arch", ["plan", "p.yaml", "--arch", "eyeriss", "--emit-timeloop", "out"],
         "--emit-timeloop writes a Timeloop mapping", TL_FILES),
    Case("tl-emit-two-level-plan", ["plan", "p.yaml", "--arch", "a.yaml", "--emit-timeloop", "out"],
         "plan with --strategy marvel", TL_FILES),
    Case("tl-arch-bad-cycle", TL_EVAL, "global_cycle_seconds must be a cycle time",
         tl("a.yaml", 'technology: "65nm"', "global_cycle_seconds: soon")),
    Case("tl-map-permutation-numbers", TL_EVAL, "permutation must be a string",
         tl("m.yaml", "permutation: MQPCRSN", "permutation: [1, 2]")),
    Case("zz-unknown-operator", ["plan", "w.yaml", "--arch", "eyeriss"], "tileplan imports Conv, Conv_downsample",
         {"w.yaml": ZZ_LAYER.replace("operator_type: Conv", "operator_type: Softmax")}),
    Case("zz-bad-relation", ["plan", "w.yaml", "--arch", "eyeriss"], "dimension relation 'ix=2*oy+1*fx'",
         {"w.yaml": ZZ_LAYER.replace("ix=2*ox+1*fx", "ix=2*oy+1*fx")}),
    Case("zz-missing-sizes", ["plan", "w.yaml", "--arch", "eyeriss"], "missing loop_sizes",
         {"w.yaml": ZZ_LAYER.replace("  loop_sizes: [1, 8, 3, 16, 16, 3, 3]\n", "")}),
    Case("zz-bad-dimension", ["plan", "w.yaml", "--arch", "eyeriss"], "loop dimension 'OZ'",
         {"w.yaml": ZZ_LAYER.replace("OX, FY", "OZ, FY")}),
    Case("zz-hardware-no-dram", ["plan", "lenet5", "--arch", "hw.yaml"], "must hold I1, I2 and O",
         {"hw.yaml": ZZ_HW.replace("operands: [I1, I2, O]", "operands: [I1, O]")}),
    Case("zz-hardware-duplicate-ports", ["plan", "lenet5", "--arch", "hw.yaml"], "duplicate key 'ports'",
         {"hw.yaml": ZZ_HW.replace("    ports: []", "    ports: []\n    ports: []")}),
    Case("tl-folder-without-problems", ["plan", "d", "--arch", "eyeriss"], "holds no Timeloop problem files",
         {"d/x.txt": "nothing"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_one_clear_line(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = run(case.argv)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == case.code, (code, captured.err)
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and "Traceback" not in captured.err
    assert "internal error" not in lines[0], lines[0]
    assert case.expect.lower() in lines[0].lower(), lines[0]
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


def test_the_corpus_is_large() -> None:
    assert len(CASES) >= 60
