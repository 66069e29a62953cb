"""Random damage to the shipped accelerator descriptions: an Arch or one ConfigError line per problem,
each naming the damaged place, never another exception (``arch.fields`` checks every field by hand)."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tileplan.arch import from_dict, load_eplanner_json, load_yaml
from tileplan.arch.load import _MAX_ERRORS, parse_yaml
from tileplan.arch.spec import Arch
from tileplan.errors import ConfigError
from tileplan.presets import preset_names, preset_path

PRESETS = {name: parse_yaml(preset_path(name).read_text(encoding="utf-8")) for name in preset_names()}

#: Values of every kind YAML can produce, and a few it cannot (huge ints, nan, non-text keys).
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 64, 2**40 + 1, 10**400, 1e300, -1.5, 1000.5]),
    st.text(max_size=6), st.sampled_from(["1e6", "1.0e9", "64", " 8 ", "inf", "nan", "abc", "", "yes", "input",
                                          "weight", "K", "C", "flattened", "unrolled", "1_024", "0x40"]))
GARBAGE = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers(0, 9), st.sampled_from(["name", "size", "dims"])),
                    inner, max_size=3)), max_leaves=8)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed description (mapping keys and list positions), the top included."""
    out = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*here, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*here, i))
    return out


def _damage(data: dict[str, Any], path: tuple[Any, ...], how: str, value: Any) -> tuple[Any, ...]:
    """Damage ``data`` at ``path`` in place; returns the place an error must name (or lie under)."""
    if not path:
        data[str(value)[:8] or "x"] = value  # an unknown top-level field
        return ()
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "delete" and isinstance(parent, dict):
        del parent[last]
        return path
    if how == "extra":
        target = parent[last]
        if isinstance(target, dict):
            target["zz_" + str(value)[:5]] = value
            return path
        if isinstance(target, list):
            target.append(value)
            return path
    parent[last] = value
    return path


def _related(line_path: str, place: tuple[Any, ...]) -> bool:
    """An error at ``line_path`` concerns the damage at ``place``: one lies on the other's path (a
    record's consistency check names the record; an added entry names itself)."""
    if line_path == "(top level)":
        return True
    got = line_path.split(".")
    want = [str(p) for p in place]
    n = min(len(got), len(want))
    return got[:n] == want[:n]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PRESETS)), st.data(), st.sampled_from(["replace", "delete", "extra"]), GARBAGE)
def test_damaged_description_is_an_arch_or_one_line_per_problem(preset: str, data: st.DataObject, how: str,
                                                                 value: Any) -> None:
    desc = copy.deepcopy(PRESETS[preset])
    path = data.draw(st.sampled_from(_paths(desc)))
    place = _damage(desc, path, how, value)
    try:
        arch = from_dict(desc, "src")
    except ConfigError as err:
        lines = str(err).split("\n")
        assert 1 <= len(lines) <= _MAX_ERRORS + 1
        if len(lines) == _MAX_ERRORS + 1:
            assert re.fullmatch(r"src: and [0-9]+ more problems", lines.pop()), lines
        for line in lines:
            match = re.fullmatch(r"src: (.+?): (.+)", line)
            assert match, line
            assert _related(match.group(1), place), (line, place)
        return
    assert isinstance(arch, Arch)
    assert from_dict(arch.to_dict(), "again") == arch  # the dump reads back as the same machine


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_dump_reads_back_equal(preset: str) -> None:
    arch = from_dict(PRESETS[preset], preset)
    assert from_dict(arch.to_dict(), preset) == arch
    assert hash(from_dict(arch.to_dict(), preset).dram) == hash(arch.dram)


WRONG_TYPES = [
    (("clock_hz",), "fast", "clock_hz: Input should be a valid number, unable to parse string as a number"),
    (("clock_hz",), [1e9], "clock_hz: Input should be a valid number"),
    (("clock_hz",), 10**400, "clock_hz: must be between 1e3 and 1e11 Hz (1 kHz to 100 GHz), got a number over 1e308"),
    (("clock_hz",), math.nan, "clock_hz: must be between 1e3 and 1e11 Hz (1 kHz to 100 GHz), got nan"),
    (("dram", "burst_bytes"), 10**400, "dram.burst_bytes: must be between 1 and 2**20 bytes (1 MiB), got a number "
                                       "over 1e308"),
    (("dram", "burst_bytes"), "64.5", "dram.burst_bytes: Input should be a valid integer, got a number with a "
                                      "fractional part"),
    (("dram", "burst_bytes"), math.inf, "dram.burst_bytes: Input should be a finite number"),
    (("dram",), [1, 2], "dram: Input should be a valid dictionary or instance of Dram"),
    (("memories",), {"name": "m"}, "memories: Input should be a valid tuple"),
    (("memories", 0, "operands"), "input", "memories.0.operands: Input should be a valid tuple"),
    (("memories", 0, "operands", 0), 7, "memories.0.operands.0: Input should be a valid string"),
    (("overlap",), 2, "overlap: Input should be a valid boolean, unable to interpret input"),
    (("name",), 5, "name: Input should be a valid string"),
    (("pe_array", "axes", 0, "mode"), "diagonal", "pe_array.axes.0.mode: Input should be 'unrolled' or 'flattened'"),
    (("pe_array", "axes", 0, "size"), True, "pe_array.axes.0.size: must be a number, got true"),
    ((3,), 1, "3: Keys should be strings"),
]


@pytest.mark.parametrize(("path", "value", "message"), WRONG_TYPES)
def test_wrong_type_is_one_line(path: tuple[Any, ...], value: Any, message: str) -> None:
    desc = copy.deepcopy(PRESETS["eyeriss"])
    _damage(desc, path, "replace", value)
    with pytest.raises(ConfigError) as err:
        from_dict(desc, "src")
    assert str(err.value) == f"src: {message}"


def test_size_by_precision_keys_and_values() -> None:
    desc = copy.deepcopy(PRESETS["nmp"])
    desc["pe_array"]["axes"][0]["size_by_precision"] = {"2": "8", 9: 16, 1: 0, "x": 4}
    with pytest.raises(ConfigError) as err:
        from_dict(desc, "src")
    assert str(err.value).split("\n") == [
        "src: pe_array.axes.0.size_by_precision.9.[key]: must be between 1 and 8 bytes per element, got 9",
        "src: pe_array.axes.0.size_by_precision.1: must be between 1 and 65536 PEs per axis, got 0",
        "src: pe_array.axes.0.size_by_precision.x.[key]: Input should be a valid integer, unable to parse string "
        "as an integer"]
    desc["pe_array"]["axes"][0]["size_by_precision"] = {"2": "8", 1.0: "1.6e1"}
    assert from_dict(desc, "src").pe_array.axes[0].size_by_precision == {2: 8, 1: 16}



def test_size_by_precision_must_cover_the_machines_data_width() -> None:
    """An empty table, or one without the machine's own precision_bytes, is refused at load (before, the
    first a plan or `arch show` reached failed as an internal error)."""
    desc = copy.deepcopy(PRESETS["nmp"])
    desc["pe_array"]["axes"][0]["size_by_precision"] = {}
    with pytest.raises(ConfigError, match=r"^src: pe_array\.axes\.0: size_by_precision is empty; give the axis "
                                          r"length for at least one data width"):
        from_dict(desc, "src")
    desc["pe_array"]["axes"][0]["size_by_precision"] = {2: 8}
    desc["precision_bytes"] = 1
    uncovered = (r"^src: \(top level\): axis 'mac_lanes' has no size for the machine's 1-byte data "
                 r"\(precision_bytes\); its size_by_precision covers \[2\]: add 1$")
    with pytest.raises(ConfigError, match=uncovered):
        from_dict(desc, "src")
    desc["precision_bytes"] = 2
    assert from_dict(desc, "src").pe_array.axes[0].lanes(2) == 8

def test_errors_in_field_order_then_unknown_then_capped() -> None:
    desc = copy.deepcopy(PRESETS["nmp"])
    del desc["clock_hz"]
    desc["zz"] = 1
    desc["dram"]["q"] = 2
    del desc["memories"][1]["name"]
    with pytest.raises(ConfigError) as err:
        from_dict(desc, "src")
    assert [line.split(": ")[1] for line in str(err.value).split("\n")] == [
        "clock_hz", "dram.q", "memories.1.name", "zz"]
    desc = copy.deepcopy(PRESETS["eyeriss"])
    for i in range(12):
        desc[f"extra{i}"] = i
    lines = str(pytest.raises(ConfigError, from_dict, desc, "src").value).split("\n")
    assert len(lines) == _MAX_ERRORS + 1 and lines[-1] == "src: and 4 more problems"


def test_numpy_numbers_are_numbers() -> None:
    """An importer may fill a description from arrays: numpy's integers and floats read as numbers."""
    import numpy as np

    desc = copy.deepcopy(PRESETS["eyeriss"])
    desc["memories"][0]["size_bytes"] = np.int64(4096)
    desc["clock_hz"] = np.int32(200_000_000)
    desc["dram"]["burst_bytes"] = np.float32(32.0)
    arch = from_dict(desc, "src")
    assert (arch.memories[0].size_bytes, arch.clock_hz, arch.dram.burst_bytes) == (4096, 2e8, 32)
    assert (type(arch.memories[0].size_bytes), type(arch.clock_hz), type(arch.dram.burst_bytes)) == (int, float, int)
    desc["dram"]["burst_bytes"] = np.float64(0.5)
    with pytest.raises(ConfigError, match="dram.burst_bytes: Input should be a valid integer, got a number with a "
                                          "fractional part"):
        from_dict(desc, "src")


def test_a_number_too_long_for_python_is_one_line(tmp_path: Path) -> None:
    """YAML and JSON integers of over 4300 digits (Python's limit) and impossible dates: one line."""
    text = preset_path("eyeriss").read_text(encoding="utf-8")
    path = tmp_path / "big.yaml"
    path.write_text(re.sub(r"size_bytes: [0-9]+", "size_bytes: " + "9" * 5000, text, count=1), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"big\.yaml: a number has more than 4300 digits$"):
        load_yaml(path)
    path.write_text(text.replace("name: eyeriss", "name: 2024-13-45"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"big\.yaml: unreadable value: month must be in 1\.\.12$"):
        load_yaml(path)
    path = tmp_path / "hw.json"
    path.write_text('{"bandwidth": ' + "9" * 5000 + "}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"hw\.json: a number has more than 4300 digits$"):
        load_eplanner_json(path)


def test_an_accelerator_with_size_by_precision_is_a_cache_key() -> None:
    """nmp's flattened axis has a size per data width (a dict): equal descriptions hash alike, another
    table hashes differently, and the register-file search, which keys its variants on the accelerator,
    plans on such a machine (before: "internal error TypeError: unhashable type: 'dict'")."""
    from tileplan import api

    desc = copy.deepcopy(PRESETS["nmp"])
    a, b = from_dict(desc, "a"), from_dict(copy.deepcopy(desc), "b")
    assert hash(a) == hash(b) and a == b
    desc["pe_array"]["axes"][0]["size_by_precision"] = {1: 16, 2: 4}
    other = from_dict(desc, "c")
    assert other != a and hash(other) != hash(a)
    desc["memories"] = [{"name": "MB", "operands": ["input", "weight", "output"], "size_bytes": 8192}]
    desc["register_file"] = {"weights_bytes": 1024}
    plan = api.plan("lenet5", from_dict(desc, "rf"), objective="dram", jobs=1)
    assert plan.dram_bytes > 0
