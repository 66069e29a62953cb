"""Checking parsed YAML against frozen dataclasses, without a schema library.

A dataclass field carries its check in ``metadata`` (``field(metadata=rule(check))``). :func:`build`
walks a parsed mapping through the fields of a :class:`Record` dataclass and collects every problem
at once, each with its path (``memories.0.size_bytes``); a record's own consistency check
(``_validate``, raising ``ValueError``) runs only when its fields are all valid. A check converts
one value (``"1e6"`` -> 1000000) or records an :class:`Issue` and returns :data:`BAD`.

The messages of type errors keep the wording users and tests already know ("Input should be a
valid number"); a wrong type is one line, never a traceback. Building records this way costs no
import (a schema library cost ~0.24 s of every command's start-up: docs/architecture-startup.md).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

#: A path into the parsed data: field names, list positions, mapping keys.
Loc = tuple[Any, ...]


class Issue(NamedTuple):
    """One problem: where, which kind (``missing``, ``unknown`` or ``value``) and what."""

    loc: Loc
    kind: str
    message: str


#: A check's answer for a value that failed (its issue is recorded).
BAD: Any = object()

Check = Callable[[Any, Loc, list[Issue]], Any]
R = TypeVar("R", bound="Record")

MISSING = "Field required"
UNKNOWN = "Extra inputs are not permitted"


def rule(check: Check) -> Mapping[str, Check]:
    """Field metadata naming the field's check: ``field(default=0, metadata=rule(check))``."""
    return MappingProxyType({"check": check})


def number_text(value: float) -> str:
    """``value`` as a message shows it: ``65536``, ``1e+29``, ``nan``."""
    if isinstance(value, int) and abs(value) >= 1e308:
        return "a number over 1e308"
    return str(int(value)) if math.isfinite(value) and float(value).is_integer() and abs(value) < 1e9 else f"{value:g}"


def scalar(convert: Callable[[Any], Any]) -> Check:
    """A check from ``convert(value) -> value``, which raises ``ValueError(message)`` on bad input."""

    def check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        try:
            return convert(value)
        except ValueError as err:
            issues.append(Issue(loc, "value", str(err)))
            return BAD

    return check


def _not_bool(value: Any) -> None:
    """``true`` is not the number 1: a yes/no where a number belongs is an error, not a coercion."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {str(value).lower()}")


def _in_range(value: float, lo: float, hi: float, text: str) -> None:
    if not (lo <= value <= hi) or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"must be between {text}, got {number_text(value)}")


def _from_text(value: str, what: str) -> float:
    """A number YAML left as text (``"1e6"``), as a float; ``what`` ("a number", "an integer") names
    what the field wants in the error."""
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"Input should be a valid {what.split()[-1]}, unable to parse string as {what}") from None


def real(lo: float | None = None, hi: float | None = None, text: str = "") -> Check:
    """A number (an int, a float or a number in a string, never a bool) as a float, inside the sane
    range [lo, hi] that ``text`` states (no range: any float, even inf and nan)."""

    def convert(value: Any) -> float:
        _not_bool(value)
        if isinstance(value, str):
            value = _from_text(value, "a number")
        elif not isinstance(value, numbers.Real):  # (numpy's numbers too)
            raise ValueError("Input should be a valid number")
        if lo is not None and hi is not None:
            _in_range(value, lo, hi, text)
        try:
            return float(value)
        except OverflowError:
            raise ValueError("must be a number below 1e308, got a number over 1e308") from None

    return scalar(convert)


def whole(lo: int, hi: int, text: str) -> Check:
    """An integer inside [lo, hi]. YAML reads ``1e6`` as a string and ``1.0e6`` as a float: both are
    integers when they are whole."""

    def convert(value: Any) -> int:
        _not_bool(value)
        if isinstance(value, str):
            value = _from_text(value, "an integer")
        if isinstance(value, numbers.Integral):  # (numpy's integers too)
            value = int(value)
        elif isinstance(value, numbers.Real):
            value = float(value)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError("Input should be a finite number")
            if not value.is_integer():
                raise ValueError("Input should be a valid integer, got a number with a fractional part")
            value = int(value)
        elif not isinstance(value, int):
            raise ValueError("Input should be a valid integer")
        _in_range(value, lo, hi, text)
        return int(value)

    return scalar(convert)


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str | int):
        key = value.lower() if isinstance(value, str) else str(value)
        if key in _TRUE or key in _FALSE:
            return key in _TRUE
        raise ValueError("Input should be a valid boolean, unable to interpret input")
    if isinstance(value, float) and value in (0.0, 1.0):
        return value == 1.0
    raise ValueError("Input should be a valid boolean")


#: yes/no: true/false, 1/0, "yes"/"no", "on"/"off", "t"/"f"...
boolean: Check = scalar(_boolean)


def text(clean: Callable[[str], str] | None = None) -> Check:
    """A string (``clean``, e.g. escaping control characters, applied to it)."""

    def convert(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError("Input should be a valid string")
        return clean(value) if clean else value

    return scalar(convert)


def choice(enum: type[Enum]) -> Check:
    """One of ``enum``'s values: ``Input should be 'unrolled' or 'flattened'``."""
    members = {m.value: m for m in enum}
    names = [repr(v) for v in members]
    message = "Input should be " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0])

    def convert(value: Any) -> Enum:
        if isinstance(value, enum):
            return value
        if isinstance(value, str) and value in members:
            return members[value]
        raise ValueError(message)

    return scalar(convert)


def optional(check: Check) -> Check:
    """``check``, or ``None``."""
    return lambda value, loc, issues: None if value is None else check(value, loc, issues)


def sequence(item: Check, after: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None) -> Check:
    """A list (or tuple, set) of ``item`` as a tuple; ``after`` (raising ``ValueError``) then checks
    the whole when every item is valid."""

    def check(value: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(value, list | tuple | set | frozenset):
            issues.append(Issue(loc, "value", "Input should be a valid tuple"))
            return BAD
        before = len(issues)
        items = tuple(item(v, (*loc, i), issues) for i, v in enumerate(value))
        if len(issues) > before:
            return BAD
        if after is not None:
            try:
                items = after(items)
            except ValueError as err:
                issues.append(Issue(loc, "value", str(err)))
                return BAD
        return items

    return check


def mapping(key: Check, value: Check) -> Check:
    """A mapping, its keys checked by ``key`` and its values by ``value`` (as a new dict)."""

    def check(data: Any, loc: Loc, issues: list[Issue]) -> Any:
        if not isinstance(data, dict):
            issues.append(Issue(loc, "value", "Input should be a valid dictionary"))
            return BAD
        before = len(issues)
        out = {key(k, (*loc, k, "[key]"), issues): value(v, (*loc, k), issues) for k, v in data.items()}
        return BAD if len(issues) > before else out

    return check


def nested(cls: type[Record]) -> Check:
    """A record given as a mapping of its fields (or as itself)."""
    return lambda value, loc, issues: build(cls, value, loc, issues)


class Record:
    """Base of the checked dataclasses: a JSON-ready dump, list fields kept as tuples."""

    def __post_init__(self) -> None:
        # ``dataclasses.replace`` does not check (like a copy, it may make a blanked variant no file
        # could describe), but a list given where a tuple belongs is stored as a tuple (hashable).
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))

    def _validate(self) -> None:
        """Consistency of the fields together (raise ``ValueError``); runs when each field is valid."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain YAML/JSON data: records as mappings, tuples as lists, enums as their
        values, mapping keys as strings. ``build`` of the result gives back an equal record."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Enum):
        return value.value
    return value


_schemas: dict[type, tuple[tuple[str, Check, bool], ...]] = {}


def _schema(cls: type[Record]) -> tuple[tuple[str, Check, bool], ...]:
    """(name, check, required) of each field of ``cls``, in declaration order."""
    held = _schemas.get(cls)
    if held is None:
        held = _schemas[cls] = tuple(
            (f.name, f.metadata["check"],
             f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    return held


def build(cls: type[R], data: Any, loc: Loc, issues: list[Issue]) -> R:
    """``cls`` from a parsed mapping, or :data:`BAD` with every problem added to ``issues``: field
    problems in declaration order, then unknown fields and non-text keys in the mapping's order,
    then (when no field had a problem) the record's ``_validate``."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        issues.append(Issue(loc, "value", f"Input should be a valid dictionary or instance of {cls.__name__}"))
        return BAD
    before = len(issues)
    values = {}
    known = _schema(cls)
    for name, check, required in known:
        if name in data:
            values[name] = check(data[name], (*loc, name), issues)
        elif required:
            issues.append(Issue((*loc, name), "missing", MISSING))
    names = {name for name, _, _ in known}
    for key in data:
        if not isinstance(key, str):
            issues.append(Issue((*loc, key), "value", "Keys should be strings"))
        elif key not in names:
            issues.append(Issue((*loc, key), "unknown", UNKNOWN))
    if len(issues) > before:
        return BAD
    record = cls(**values)
    try:
        record._validate()
    except ValueError as err:
        issues.append(Issue(loc, "value", str(err)))
        return BAD
    return record


def path_text(loc: Loc) -> str:
    """``memories.0.size_bytes`` (``(top level)`` for the record itself)."""
    return ".".join(str(p) for p in loc) or "(top level)"
