"""Load accelerator descriptions: YAML files, built-in presets, and e-PlaNNer's JSON format.

YAML is read with duplicate keys rejected (a silently kept second ``memories:`` is a classic bug),
then checked field by field (``arch.fields``); every problem is reported at once with its path.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import yaml

from tileplan.arch.fields import Issue, build, path_text
from tileplan.arch.spec import Arch
from tileplan.errors import ConfigError, TileplanError, printable
from tileplan.files import read_text_input
from tileplan.presets import preset_names, preset_path


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate mapping keys."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise ConfigError(f"a key at line {key_node.start_mark.line + 1} is a {type(key).__name__}: keys must "
                              f"be plain names")
        if key in mapping:
            raise ConfigError(f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _format_errors(source: str, issues: list[Issue]) -> str:
    lines = []
    for issue in issues:
        msg = issue.message
        if issue.kind == "unknown":
            msg = "unknown field (check the spelling; see `tileplan arch show nmp` for an example)"
        elif issue.kind == "missing":
            msg = "required field is missing"
        lines.append(f"{source}: {printable(path_text(issue.loc))}: {msg}")
    if len(lines) > _MAX_ERRORS:  # a generated or hostile file: the first few say what is wrong
        lines[_MAX_ERRORS:] = [f"{source}: and {len(lines) - _MAX_ERRORS} more problems"]
    return "\n".join(lines)


_MAX_ERRORS = 8


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> Any:
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass


def parse_yaml(text: str) -> Any:
    """``text`` parsed with duplicate keys refused, as a fresh copy on every call (the caller may change
    it). Parsing a preset costs ~10 CPU-ms in pure-Python YAML and a long run (an experiment, a sweep,
    the test suite) loads the same few presets hundreds of times: the last 32 texts are kept parsed.
    A text that fails to parse is parsed (and fails) again each time."""
    return copy.deepcopy(_parsed(text))


def from_dict(data: Any, source: str = "<dict>") -> Arch:
    """Validate a parsed description; ``source`` names it in error messages."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of fields at the top level, got {type(data).__name__}")
    issues: list[Issue] = []
    arch = build(Arch, data, (), issues)
    if issues:
        raise ConfigError(_format_errors(source, issues))
    return arch


def load_yaml(path: str | Path) -> Arch:
    """Load an accelerator from a YAML file."""
    path = Path(path)
    try:
        text = read_text_input(path, "accelerator file")
    except TileplanError as err:
        raise ConfigError(str(err)) from None
    try:
        data = parse_yaml(text)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be an accelerator description") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: malformed YAML{where}: {getattr(err, 'problem', err)}") from None
    except ValueError as err:  # a value YAML's resolver matched but cannot build: a huge integer, 2024-13-45
        raise ConfigError(_unreadable(path, err)) from None
    return from_dict(data, str(path))


def _unreadable(path: Path, err: ValueError) -> str:
    if "integer string conversion" in str(err):  # Python reads integers of at most 4300 digits
        return f"{path}: a number has more than 4300 digits"
    return f"{path}: unreadable value: {err}"


_EPLANNER_DIMS = {"IC": "C", "OC": "K", "OH": "P", "OW": "Q", "KH": "R", "KW": "S", "B": "N"}


def load_eplanner_json(path: str | Path, *, precision_bytes: int = 4, name: str | None = None) -> Arch:
    """Load e-PlaNNer's hardware JSON (thesis Fig. 6.1): bandwidth GB/s, frequency GHz, mem_size KB
    (input, weight, output), pe_len (width, height), pe_mapping (column dims, row dims).

    e-PlaNNer overlaps transfers with compute (its roofline, Eq. 6.12) and does not double-buffer.
    """
    path = Path(path)
    try:
        data = json.loads(read_text_input(path, "e-PlaNNer hardware file"))
    except TileplanError as err:
        raise ConfigError(str(err)) from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: malformed JSON at line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be an e-PlaNNer hardware file") from None
    except ValueError as err:
        raise ConfigError(_unreadable(path, err)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object with bandwidth, frequency, mem_size, pe_len and "
                          f"pe_mapping, got {type(data).__name__}")
    required = ("bandwidth", "frequency", "mem_size", "pe_len", "pe_mapping")
    missing = [k for k in required if k not in data]
    if missing:
        raise ConfigError(f"{path}: e-PlaNNer config is missing {', '.join(missing)}")
    try:
        in_b, wt_b, out_b = (int(_number(v, "mem_size") * 1024) for v in data["mem_size"])
        width, height = (_whole(v) for v in data["pe_len"])
        cols, rows = data["pe_mapping"]
        col_dims = [_EPLANNER_DIMS.get(str(d).upper(), str(d)) for d in cols]
        row_dims = [_EPLANNER_DIMS.get(str(d).upper(), str(d)) for d in rows]
    except (TypeError, ValueError, OverflowError) as err:
        raise ConfigError(f"{path}: mem_size needs 3 numbers, pe_len 2 integers and pe_mapping two lists "
                          f"of dimensions ({err})") from None
    numbers = {}
    for key, unit in (("bandwidth", "GB/s"), ("frequency", "GHz")):
        try:
            numbers[key] = _number(data[key], key)
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: {key} must be a number in {unit}, got {data[key]!r}") from None
    arch = {
        "name": name or path.stem,
        "description": f"e-PlaNNer configuration {path.name}",
        "clock_hz": numbers["frequency"] * 1e9,
        "precision_bytes": precision_bytes,
        "overlap": True,
        "dram": {"bandwidth_bytes_per_s": numbers["bandwidth"] * 1e9},
        "memories": [
            {"name": "input_mem", "operands": ["input"], "size_bytes": in_b},
            {"name": "weight_mem", "operands": ["weight"], "size_bytes": wt_b},
            {"name": "output_mem", "operands": ["output"], "size_bytes": out_b},
        ],
        "pe_array": {"axes": [
            {"name": "cols", "size": width, "dims": col_dims, "max_dims": len(col_dims)},
            {"name": "rows", "size": height, "dims": row_dims, "max_dims": len(row_dims)},
        ]},
    }
    return from_dict(arch, str(path))


def _number(value: Any, key: str) -> float:
    """A number of an e-PlaNNer JSON file (a number in a string is accepted; true/false are not)."""
    if isinstance(value, bool):
        raise ValueError(f"{key} must hold numbers, got {str(value).lower()}")
    return float(value)


def _whole(value: Any) -> int:
    """An integer from an integer (or integral float) of a JSON file; 16.7 or true is an error."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        raise ValueError(f"pe_len must hold whole numbers, got {value!r}")
    return int(value)


#: Preset families ``NAME-<KB>``: preset ``NAME`` with its one (unified) on-chip buffer resized to
#: KB KiB, e.g. ``ye-64`` ... ``ye-1024`` (Ye et al.'s SRAM_c sweep).
FAMILIES: tuple[str, ...] = ("ye",)
_FAMILY = re.compile(r"^([a-z][a-z0-9]*)-([0-9]+)$")


def load_family(name: str) -> Arch | None:
    """``ye-256`` -> the ``ye`` preset with a 256 KiB unified buffer (``None``: not a family name)."""
    match = _FAMILY.match(name)
    if not match or match.group(1) not in FAMILIES:
        return None
    kib = int(match.group(2))
    if not 1 <= kib <= 1 << 20:
        raise ConfigError(f"accelerator {name!r}: the buffer size must be 1 to 1048576 KiB, got {kib}")
    data = parse_yaml(preset_path(match.group(1)).read_text(encoding="utf-8"))
    data["name"] = name
    data["memories"][0]["size_bytes"] = kib * 1024
    data["description"] = f"{data['description']} ({kib} KiB buffer)"
    return from_dict(data, name)


def load(spec: str | Path) -> Arch:
    """An accelerator from a preset name, a preset family member (``ye-128``), a YAML file or an
    e-PlaNNer JSON file."""
    text = str(spec)
    if text in preset_names():
        return load_yaml(preset_path(text))
    family = load_family(text)
    if family is not None:
        return family
    path = Path(text)
    if path.suffix.lower() == ".json":
        return load_eplanner_json(path)
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return load_yaml(path)
    raise ConfigError(f"unknown accelerator {text!r}: not a preset ({', '.join(preset_names())}), "
                      f"a family member ({', '.join(f + '-<KB>' for f in FAMILIES)}) nor an existing .yaml/.json file")
