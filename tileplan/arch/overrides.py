"""Machine overrides: ``--set dram.bandwidth_bytes_per_s=8e9 --set memories.input.size_bytes=16KiB``.

An override is ``PATH=VALUE``. ``PATH`` walks the accelerator's fields with dots; an element of a list
(``memories``, ``pe_array.axes``) is picked by its ``name``, by its position (``memories.0``) or, for
memories, by an operand it holds (``memories.weight``). ``VALUE`` is a number (``8e9``, ``0x40``), a
size with a unit (``16KiB`` = 16384 bytes, ``2MiB``, ``1.5GB`` = 1.5e9), ``true``/``false``, ``none``,
a YAML list (``[K,C]``) or a string. The changed description is validated exactly like a YAML file, so
an unknown path or a bad value is one clear :class:`~tileplan.errors.ConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tileplan.arch.load import from_dict
from tileplan.arch.spec import Arch
from tileplan.errors import ConfigError

_UNITS = {"": 1, "k": 10**3, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Override:
    """One parsed ``PATH=VALUE``: the dotted path and the value as text (parsed by :func:`parse_value`)."""

    path: str
    text: str

    @property
    def value(self) -> Any:
        return parse_value(self.text)

    def __str__(self) -> str:
        return f"{self.path}={self.text}"


def parse_override(item: str) -> Override:
    """``"dram.burst_bytes=32"`` -> ``Override("dram.burst_bytes", "32")``."""
    path, eq, text = item.partition("=")
    path = path.strip()
    if not eq or not path or not text.strip():
        raise ConfigError(f"--set {item!r}: expected PATH=VALUE, e.g. dram.bandwidth_bytes_per_s=8e9")
    if any(not part for part in path.split(".")):
        raise ConfigError(f"--set {item!r}: empty field name in path {path!r}")
    return Override(path, text.strip())


def parse_value(text: str) -> Any:
    """A value of an override: int, float, size with unit, bool, None, YAML list/mapping, or string."""
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null", "~"):
        return None
    for conv in (int, float):
        try:
            return conv(text, 0) if conv is int else conv(text)  # type: ignore[call-arg]
        except ValueError:
            pass
    match = _SIZE.match(text)
    if match and match.group(2) in _UNITS:
        number = float(match.group(1)) * _UNITS[match.group(2)]
        return int(number) if number.is_integer() else number
    if text[:1] in "[{":
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"cannot read value {text!r}: {getattr(err, 'problem', err)}") from None
    return text


def _pick(items: list[Any], key: str, where: str) -> int:
    """Index of the list element ``key`` names: a position, a ``name``, or a held operand."""
    if key.isdigit():
        if int(key) < len(items):
            return int(key)
        raise ConfigError(f"{where} has {len(items)} entries; there is no entry {key}")
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == key:
            return i
    for i, item in enumerate(items):
        if isinstance(item, dict) and key in item.get("operands", ()):
            return i
    names = [str(item.get("name")) for item in items if isinstance(item, dict)]
    raise ConfigError(f"{where} has no entry {key!r} (entries: {', '.join(names)}; or use a position)")


def _set(data: dict[str, Any], override: Override) -> None:
    parts = override.path.split(".")
    node: Any = data
    walked: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(walked) or "the accelerator"
        if isinstance(node, list):
            idx = _pick(node, part, f"--set {override}: {where}")
            if last:
                node[idx] = override.value
            node = node[idx]
        elif isinstance(node, dict):
            if part not in node:
                known = ", ".join(sorted(node))
                raise ConfigError(f"--set {override}: {where} has no field {part!r} (fields: {known})")
            if last:
                node[part] = override.value
            node = node[part]
        else:
            raise ConfigError(f"--set {override}: {where} is a value, not a group of fields")
        walked.append(part)


def apply_overrides(arch: Arch, overrides: Sequence[str | Override]) -> Arch:
    """``arch`` with every override applied in order, validated like a YAML file.

    >>> from tileplan.arch import load
    >>> apply_overrides(load("nmp"), ["memories.input.size_bytes=16KiB"]).memories[0].size_bytes
    16384
    """
    if not overrides:
        return arch
    data = arch.to_dict()
    parsed = [o if isinstance(o, Override) else parse_override(o) for o in overrides]
    for o in parsed:
        _set(data, o)
    return from_dict(data, "--set " + " ".join(str(o) for o in parsed))
