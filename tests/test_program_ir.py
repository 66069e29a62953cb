"""The IR text: round trips, a hand-written program with hand-computed counts, and errors that name
their line (parse errors, on-chip overflow, stale tiles)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fixtures.program_cases import layers, mappings
from helpers import toy_arch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tileplan.arch import load
from tileplan.dims import DIMS
from tileplan.errors import TileplanError
from tileplan.mapping import Mapping
from tileplan.program import (
    OnChipOverflowError,
    ProgramError,
    emit_ir,
    execute,
    generate_program,
    parse_ir,
    read_ir,
    write_ir,
)
from tileplan.program.ir import Conv, Instruction, Load, Program
from tileplan.workload.layer import Layer, Precision

HAND = """\
// A 1x1 convolution y = 2x of a 2x3 map, one input row per tile (e-PlaNNer Fig. 7.1 style).
[info]
LAYER hand
OP pointwise
STRIDE (1, 1)
PADS (0,0,0,0)
DILATION (1,1)
GROUPS 1
BURST 4
CORES 1
INPUT(1,1,1,2,3) layout=NCHW bytes=1 onchip=1 base=0
WEIGHT(1,1,1,1,1) layout=KCRS bytes=1 onchip=1 base=8
OUTPUT(1,1,1,2,3) layout=NKPQ bytes=1 onchip=1 base=12
PSUM(1,1,1,2,3) layout=NKPQ bytes=1 onchip=1 base=20

[var]
IN_MEM_0(3) input    // exactly one row
WT_MEM_0(1) weight
OT_MEM_0(3) output
INPUT_0[0] (0:1,0:1,0:1,0:1,0:3)
INPUT_1[3] (0:1,0:1,0:1,1:2,0:3)
WEIGHT_0[0] (0:1,0:1,0:1,0:1,0:1)
OUTPUT_0[0] (0:1,0:1,0:1,0:1,0:3)
OUTPUT_1[3] (0:1,0:1,0:1,1:2,0:3)

[text]
LOAD WT_MEM_0[0] WEIGHT_0
LOAD IN_MEM_0[0] INPUT_0
INIT OT_MEM_0[0] OUTPUT_0
CONV OUTPUT_0 INPUT_0 WEIGHT_0 (1,1) (0,0,0,0) [0:1,0:1,0:1,0:1,0:1,0:3,0:1,0:1]
STORE OUTPUT_0 OT_MEM_0[0]
LOAD IN_MEM_0[0] INPUT_1
INIT OT_MEM_0[0] OUTPUT_1
CONV OUTPUT_1 INPUT_1 WEIGHT_0 (1,1) (0,0,0,0) [0:1,0:1,0:1,0:1,1:2,0:3,0:1,0:1]
STORE OUTPUT_1 OT_MEM_0[0]
"""


def _line_of(text: str, prefix: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if line.startswith(prefix))


def test_hand_written_program_runs_with_hand_counted_traffic() -> None:
    program = parse_ir(HAND)
    x = np.array([[[[1, 2, 3], [4, 5, 6]]]])
    result = execute(program, x, np.array([[[[2]]]]))
    np.testing.assert_array_equal(result.output, 2 * x)
    assert result.read_bytes == (6, 1, 0) and result.write_bytes == 6
    # each 3-byte row is one run of one 4-byte burst; the weight byte one burst
    assert result.bursts == (2, 1, 2) and result.runs == (2, 1, 2)
    # distinct aligned blocks: input rows cover bytes 0-2 (block 0) and 3-5 (blocks 0, 1);
    # output rows bytes 12-14 (block 3) and 15-17 (blocks 3, 4)
    assert result.aligned_bursts == (3, 1, 3)
    assert result.onchip_peak_bytes == {"IN_MEM_0": 3, "WT_MEM_0": 1, "OT_MEM_0": 3}


def test_emitted_text_is_canonical_and_stable() -> None:
    program = parse_ir(HAND)
    text = emit_ir(program)
    assert parse_ir(text) == program
    assert emit_ir(parse_ir(text)) == text
    assert "LOAD IN_MEM_0[0] INPUT_1" in text and "STRIDE (1,1)" in text


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_emit_parse_emit_is_identity(data: st.DataObject) -> None:
    arch = toy_arch(burst=16, clusters=2, cores=2, double_buffering=data.draw(st.booleans()))
    layer = data.draw(layers())
    program = generate_program(layer, arch, data.draw(mappings(layer, clusters=2, cores=2)))
    text = emit_ir(program)
    parsed = parse_ir(text)
    assert parsed == program
    assert emit_ir(parsed) == text


def _small_program_text() -> str:
    layer = Layer.conv("c", c_in=2, h=4, w=4, k_out=2, r=3, pad=1, precision=Precision.uniform(1))
    arch = toy_arch(burst=8, clusters=2, cores=1)
    mapping = Mapping(tiles=(1, 1, 1, 1, 2, 4, 3, 3), order=tuple(DIMS),
                      cluster_split=(1, 1, 2, 1, 1, 1, 1, 1))
    return emit_ir(generate_program(layer, arch, mapping))


CORRUPTIONS = [
    ("LOAD m0[0] INPUT_0", "JUMP 12", "unknown instruction 'JUMP'"),
    ("LOAD m0[0] INPUT_0", "LOAD m0[0] INPUT_99", "unknown tile INPUT_99"),
    ("LOAD m0[0] INPUT_0", "LOAD mX[0] INPUT_0", "unknown memory mX"),
    ("LOAD m0[0] INPUT_0", "LOAD m0[0] INPUT_0 -> (1)", "multicast to core 1, which is not in cluster 0"),
    ("CONV ", "CONV OUTPUT_0 INPUT_0 WEIGHT_0 (1,x) (1,0,1,0) [0:1]", "stride must be an integer"),
    ("INPUT_1[", "INPUT_1[7] (0:1,0:1,0:1,0:4,0:4)", "starts at element 0 of INPUT"),
    ("INPUT_1[", "INPUT_1[0] (0:1,0:1,0:1,0:4,0:9)", "reaches 9 beyond the 4 of INPUT"),
    ("STRIDE", "STRIDE (1,1,1)", "STRIDE needs 2 values"),
    ("CORES", "BURST 8", "BURST is given twice (first at line 9)"),
    ("CORES", "CORES 3", "CORES says 3"),
    ("[var]", "[vars]", "unknown section [vars]"),
    ("m1(", "m1(-5) weight", "memory size must be an integer >= 1"),
    ("STORE ", "STORE INPUT_0 m2[0]", "INPUT_0 is a tile of INPUT; expected a tile of OUTPUT or PSUM"),
]


@pytest.mark.parametrize(("prefix", "replacement", "message"), CORRUPTIONS)
def test_corrupted_ir_names_the_line(prefix: str, replacement: str, message: str) -> None:
    lines = _small_program_text().splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.startswith(prefix))
    lines[number - 1] = replacement
    with pytest.raises(ProgramError) as err:
        parse_ir("\n".join(lines))
    assert err.value.line == number, str(err.value)
    assert str(err.value).startswith(f"line {number}: ") and message in str(err.value)
    assert isinstance(err.value, TileplanError)


def test_ir_files_round_trip_and_corrupted_files_name_file_and_line(tmp_path: Path) -> None:
    program = parse_ir(_small_program_text())
    path = tmp_path / "conv.ir"
    write_ir(program, path)
    assert read_ir(path) == program and list(tmp_path.iterdir()) == [path]
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.startswith("CONV "))
    lines[number - 1] = lines[number - 1].replace("CONV", "KONV")
    path.write_text("\n".join(lines))
    with pytest.raises(ProgramError) as err:
        read_ir(path)
    assert str(err.value).startswith(f"{path}: line {number}: unknown instruction 'KONV'")
    with pytest.raises(ProgramError, match="cannot read the program"):
        read_ir(tmp_path / "missing.ir")


def test_missing_text_section_is_a_parse_error() -> None:
    text = _small_program_text()
    with pytest.raises(ProgramError, match=r"ends without a \[text\] section"):
        parse_ir(text[:text.index("[text")])


def test_tile_that_does_not_fit_is_rejected_with_line_and_memory() -> None:
    nmp = load("nmp")  # 8 KB per scratchpad, 2-byte data
    layer = Layer.conv("big", c_in=16, h=20, w=20, k_out=8, r=3, pad=1)
    mapping = Mapping(tiles=(1, 1, 8, 16, 20, 20, 3, 3), order=tuple(DIMS))  # input tile 16x20x20x2 B
    program = generate_program(layer, nmp, mapping)
    text = emit_ir(program)
    x = np.ones((1, 16, 20, 20), dtype=np.int64)
    w = np.ones((8, 16, 3, 3), dtype=np.int64)
    for prog in (program, parse_ir(text)):  # generated (canonical lines) and parsed (source lines)
        with pytest.raises(OnChipOverflowError) as err:
            execute(prog, x, w)
        line = text.splitlines()[err.value.line - 1]
        assert line.startswith("LOAD MB0[0] INPUT_"), line
        assert err.value.memory == "MB0" and "MB0 holds 8192 bytes" in str(err.value)
        assert "needs bytes 0:12800" in str(err.value)


def test_stale_or_misused_tiles_are_caught_at_their_line() -> None:
    program = parse_ir(_small_program_text())
    stream = program.streams[0]
    loads = [i for i, ins in enumerate(stream.instructions) if isinstance(ins, Load) and ins.src == "INPUT_1"]
    dropped = stream.instructions[:loads[0]] + stream.instructions[loads[0] + 1:]
    broken = parse_ir(emit_ir(_with_stream(program, 0, dropped)))
    x, w = np.ones((1, 2, 4, 4), dtype=np.int64), np.ones((2, 2, 3, 3), dtype=np.int64)
    with pytest.raises(ProgramError, match="INPUT_1 is not on chip in core 0") as err:
        execute(broken, x, w)
    assert emit_ir(broken).splitlines()[err.value.line - 1].startswith("CONV OUTPUT_")
    # a region reaching beyond the resident input rows
    conv_at = next(i for i, ins in enumerate(stream.instructions) if isinstance(ins, Conv))
    conv = stream.instructions[conv_at]
    assert isinstance(conv, Conv)
    region = conv.region[:4] + ((0, 4),) + conv.region[5:]  # all output rows
    for pads, message in (((1, 0, 1, 1), r"pads \(1, 0, 1, 1\) disagree with the layer"),
                          ((1, 1, 1, 1), "OUTPUT_0 holds 0:2 along storage dim 3, but the region needs 0:4")):
        wide = Conv(conv.out, conv.inp, conv.wt, conv.stride, pads, region)
        changed = stream.instructions[:conv_at] + (wide,) + stream.instructions[conv_at + 1:]
        with pytest.raises(ProgramError, match=message) as err:
            execute(_with_stream(program, 0, changed), x, w)
        assert err.value.line == program.streams[0].instructions[conv_at].line


def _with_stream(program: Program, core: int, instructions: tuple[Instruction, ...]) -> Program:
    streams = list(program.streams)
    streams[core] = replace(streams[core], instructions=tuple(instructions))
    return replace(program, streams=tuple(streams))


def test_unsupported_requests_are_rejected() -> None:
    arch = toy_arch(clusters=2, cores=2)
    layer = Layer.conv("c", c_in=4, h=4, w=4, k_out=4, r=3, precision=Precision.uniform(1))
    with pytest.raises(TileplanError, match="splits reduction dimension"):
        generate_program(layer, arch, Mapping(tiles=(1,) * 8, order=tuple(DIMS),
                                              core_split=(1, 1, 1, 2, 1, 1, 1, 1)))
    with pytest.raises(TileplanError, match="needs 4 parts but toy has 2"):
        generate_program(layer, arch, Mapping(tiles=(1,) * 8, order=tuple(DIMS),
                                              cluster_split=(1, 1, 2, 1, 2, 1, 1, 1)))
    move = Layer.data_move("reorg", c_in=4, h=4, w=4, k_out=16, out_h=2, out_w=2)
    with pytest.raises(ProgramError, match="no program for data_move"):
        generate_program(move, arch, Mapping(tiles=(1,) * 8, order=tuple(DIMS)))
