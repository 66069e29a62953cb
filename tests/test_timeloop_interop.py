"""Timeloop v0.4 interop: problem/arch/mapping readers against the golden files, the round trip, the
tag-safe loader, and the golden counts (DRAM traffic of Timeloop's own mapping) against stats.txt."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from tileplan import api
from tileplan.dims import Dim
from tileplan.errors import ConfigError, MappingError
from tileplan.experiments.timeloop import DESIGNS, golden_dir, rows_of, run_design, sliding_saving, window_layer
from tileplan.interop.timeloop_arch import load_timeloop_arch, to_arch
from tileplan.interop.timeloop_export import loops_of, to_timeloop
from tileplan.interop.timeloop_mapping import load_mapping, to_tileplan
from tileplan.interop.timeloop_problem import load_problem, problem_yaml
from tileplan.interop.tlyaml import read_timeloop_yaml, read_timeloop_yaml_text

GOLD = golden_dir()
EYE = GOLD / "eyeriss_like"


def _load(design: str):  # type: ignore[no-untyped-def]
    folder = GOLD / design
    tl = load_timeloop_arch(folder / "arch.yaml")
    layer = load_problem(folder / "problem.yaml")
    return tl, layer, load_mapping(folder / "map.yaml", layer, tl)


def test_problem_reads_the_golden_layer() -> None:
    layer = load_problem(EYE / "problem.yaml")
    assert (layer.c_in, layer.k_out, layer.h, layer.w, layer.r, layer.stride, layer.pad) == \
        (3, 32, 224, 224, 3, (2, 2), (1, 1, 1, 1))
    assert (layer.dims[Dim.P], layer.dims[Dim.Q]) == (112, 112)
    again = read_timeloop_yaml_text(problem_yaml(layer), "x")
    assert again["problem"]["instance"]["M"] == 32 and again["problem"]["instance"]["Wpad"] == 1


def test_problem_as_model_argument(tmp_path: Path) -> None:
    """A problem file, a comma list and a folder all load as networks of one layer per file."""
    net = api.load_network(str(EYE / "problem.yaml"))
    assert [la.name for la in net.layers] == ["problem"]
    both = api.load_network(f"{EYE / 'problem.yaml'},{GOLD / 'simple_output_stationary' / 'problem.yaml'}")
    assert len(both.layers) == 2 and both.layers[1].name == "problem_1"
    (tmp_path / "a.yaml").write_text("problem:\n  instance: {C: 4, M: 8, P: 5, Q: 5, R: 3, S: 3, N: 1}\n")
    (tmp_path / "b.yaml").write_text("problem:\n  instance: {C: 8, M: 2, P: 1, Q: 1, R: 1, S: 1, G: 2}\n")
    (tmp_path / "notes.txt").write_text("not a problem")
    net = api.load_network(str(tmp_path))
    assert [(la.name, la.h, la.c_in, la.groups) for la in net.layers] == [("a", 7, 4, 1), ("b", 1, 16, 2)]


def test_unknown_projection_is_one_error(tmp_path: Path) -> None:
    doc = yaml.safe_load((EYE / "problem.yaml").read_text())
    doc["problem"]["shape"]["data_spaces"][1]["projection"][2] = [["R"], ["P", "Wstride"], ["Q"]]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="unknown projection"):
        load_problem(tmp_path / "p.yaml")


def test_arch_import_subset() -> None:
    tl = load_timeloop_arch(EYE / "arch.yaml")
    assert tl.names == ["DRAM", "shared_glb", "inter_PE_column_spatial", "inter_PE_spatial", "ifmap_spad",
                        "weights_spad", "psum_spad"]
    assert (tl.pes, tl.mesh_x, tl.mesh_y) == (168, 14, 12)
    arch = to_arch(tl)
    # depth x width bits / 8: 16384 x 64 / 8; the bypassed weights live in the 168 weight spads (192 x 16 / 8)
    assert [(m.name, m.operands, m.size_bytes) for m in arch.memories] == [
        ("shared_glb", ("input", "output"), 131072), ("weights_spadx168", ("weight",), 168 * 384)]
    rf = arch.register_file
    assert (rf.inputs_bytes, rf.weights_bytes, rf.psums_bytes) == (12 * 2, 192 * 2, 16 * 2)
    assert api.load_arch(str(EYE / "arch.yaml")).memories == arch.memories


def test_python_tags_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "arch.yaml"
    bad.write_text("architecture:\n  nodes:\n  - !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ConfigError, match="not a Timeloop tag"):
        read_timeloop_yaml(bad)
    bad.write_text("architecture:\n  nodes:\n  - !Evil {name: x}\n")
    with pytest.raises(ConfigError, match="'!Evil'"):
        read_timeloop_yaml(bad)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_round_trip_identical() -> None:
    """Timeloop map -> tileplan -> Timeloop map gives the same directives: factors and permutations
    at every level (DRAM and global buffer from tileplan's mapping, the per-PE split from the placement)."""
    tl, layer, tm = _load("eyeriss_like")
    mapping, placement = to_tileplan(tm, layer, tl, "eyeriss")
    original = read_timeloop_yaml(EYE / "map.yaml")["mapping"]
    back = to_timeloop(mapping, layer, tl, placement)
    assert loops_of(back) == loops_of(original)
    assert back == original
    assert loops_of(back)[("DRAM", "temporal")] == ("C1 M4 R1 S1 N1 P8 Q2", "MQPCRSN")


def test_export_without_placement_reimports_to_the_same_mapping(tmp_path: Path) -> None:
    tl, layer, tm = _load("eyeriss_like")
    mapping, _ = to_tileplan(tm, layer, tl, "x")
    from tileplan.interop.timeloop_export import mapping_yaml

    (tmp_path / "m.yaml").write_text(mapping_yaml(to_timeloop(mapping, layer, tl)))
    again, _ = to_tileplan(load_mapping(tmp_path / "m.yaml", layer, tl), layer, tl, "m")
    assert again == mapping


def test_unrepresentable_levels_are_refused_with_the_reason() -> None:
    tl, layer, tm = _load("simple_weight_stationary")
    with pytest.raises(MappingError, match="pe_spad sits inside the PE above input_activation_reg"):
        to_tileplan(tm, layer, tl, "ws")


def _padding_free_extent_sum(out_len: int, tile: int, stride: int, kernel: int, pad: int, size: int) -> tuple[int, int]:
    """(sum of tile windows, sum of their parts inside the real input), by a plain walk over the tiles."""
    full = real = 0
    for start in range(0, out_len, tile):
        lo = start * stride - pad
        hi = (start + tile - 1) * stride - pad + kernel  # exclusive
        full += hi - lo
        real += min(hi, size) - max(lo, 0)
    return full, real


def test_eyeriss_padding_arithmetic() -> None:
    """157,296 = 16 tiles x 3 x 29 x 113 words with padding; 155,925 = 3 x 231 x 225 without."""
    rows_full, rows_real = _padding_free_extent_sum(112, 14, 2, 3, 1, 224)
    cols_full, cols_real = _padding_free_extent_sum(112, 56, 2, 3, 1, 224)
    assert (rows_full, rows_real, cols_full, cols_real) == (8 * 29, 231, 2 * 113, 225)
    assert 3 * rows_full * cols_full == 157296 and 3 * rows_real * cols_real == 155925


def test_sliding_window_arithmetic() -> None:
    """simple_weight_stationary: Timeloop fetches 17 + 13 x 16 = 225 columns of the 225-row window."""
    tl, layer, tm = _load("simple_weight_stationary")
    mapping, _ = to_tileplan(tm, layer, tl, "ws", dram_only=True)
    assert sliding_saving(window_layer(layer), mapping, tm, "DRAM") == 13 * 1 * 225 * 3
    assert 3 * 225 * (17 + 13 * 16) == 151875


@pytest.mark.parametrize("design", DESIGNS)
def test_dram_counts_match_stats(design: str) -> None:
    """Every DRAM read and update of every data space equals stats.txt, or differs by exactly the
    padding and sliding-window words, and the counts on Timeloop's window layer minus the sliding
    saving equal stats.txt exactly; compute cycles are equal."""
    d = run_design(GOLD / design, search=False)
    rows = rows_of(d)
    assert all(r["explained"] for r in rows), [r for r in rows if not r["explained"]]
    for space in ("Inputs", "Weights", "Outputs"):
        for qty in ("reads", "updates"):
            tl = d.stats.counts[("DRAM", space)][qty]
            win = d.window.counts[("DRAM", space)][qty]
            saving = d.sliding if (space, qty) == ("Inputs", "reads") else 0
            assert win - saving == tl
    assert d.ours.cycles == d.stats.cycles
    known = {"eyeriss_like": 155925, "simple_output_stationary": 155925, "simple_weight_stationary": 159264}
    assert d.ours.counts[("DRAM", "Inputs")]["reads"] == known[design]


def test_dram_energy_is_priced_in_whole_blocks() -> None:
    """Timeloop's DRAM energy on simple_weight_stationary is 4-word vector accesses at 512 pJ: the
    151,875 input words cost ceil(151875 / 4) = 37,969 accesses, one word more than the count."""
    d = run_design(GOLD / "simple_weight_stationary", search=False)
    assert d.stats.block_words["DRAM"] == 4
    assert d.stats.energy_pj[("DRAM", "Inputs")] == math.ceil(151875 / 4) * 512
    row = next(r for r in rows_of(d) if r["quantity"] == "energy_pj" and r["level"] == "DRAM")
    assert row["ours"] == (159264 + 864 + 401408) * 128 and row["explained"]


@pytest.mark.parametrize("design", DESIGNS)
def test_optimum_never_worse_than_the_mapper(design: str) -> None:
    """tileplan's own optimum (marvel-joint over the multi-level space; exhaustive where the mapper's
    mapping is compared at the DRAM level) is never slower than the mapper's mapping in tileplan's model."""
    d = run_design(GOLD / design, search=True)
    assert not math.isnan(d.optimum_latency)
    assert d.optimum_latency <= d.mapper_latency


def test_cli_eval_and_emit_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`eval PROBLEM --arch ARCH --mapping MAP` costs Timeloop's mapping; `plan --emit-timeloop` writes
    the chosen mapping, which `eval` reads back to exactly the plan's cost."""
    import json

    from tileplan.cli import run

    problem, arch = str(EYE / "problem.yaml"), str(EYE / "arch.yaml")
    assert run(["eval", problem, "--arch", arch, "--mapping", str(EYE / "map.yaml"), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert (cost["dram_input_bytes"], cost["dram_weight_bytes"], cost["compute_cycles"]) == (155925, 13824, 86016)
    out = tmp_path / "tl"
    plan_json = tmp_path / "plan.json"
    assert run(["plan", problem, "--arch", arch, "--strategy", "marvel-joint", "--emit-timeloop", str(out),
                "--json", str(plan_json), "--jobs", "1"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["problem.map.yaml", "problem.problem.yaml"]
    planned = json.loads(plan_json.read_text())["layers"][0]["cost"]
    assert run(["eval", str(out / "problem.problem.yaml"), "--arch", arch, "--mapping", str(out / "problem.map.yaml"),
                "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    for key in ("latency_cycles", "dram_input_bytes", "dram_weight_bytes", "dram_output_bytes", "compute_cycles"):
        assert again[key] == planned[key], key


def test_experiment_command_writes_its_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tileplan.cli import run

    assert run(["experiment", "timeloop", "--quick", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "dram_words.png", "dram_words.svg",
                                                          "optimum.csv", "summary.md"]
    summary = (tmp_path / "summary.md").read_text()
    assert "UNEXPLAINED" not in summary and " 0 unexplained" in summary
    assert "| eyeriss_like | DRAM | Inputs | reads | 157,296 | 155,925 |" in summary
