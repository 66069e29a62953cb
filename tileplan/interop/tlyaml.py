"""Reading Timeloop YAML safely: a ``SafeLoader`` that knows Timeloop v0.4's node tags and nothing else.

Timeloop's architecture files tag their nodes ``!Component``, ``!Container``, ``!Parallel`` (and
``!Hierarchical``, ``!Nothing``). A plain ``yaml.safe_load`` refuses them; ``yaml.load`` with the
full loader would run any ``!!python/...`` tag. This loader registers just those five tags (each
becomes a dict with a ``_tag`` key), refuses every other tag and every duplicate key, and turns every
problem into one :class:`~tileplan.errors.ConfigError` line naming the file.

>>> read_timeloop_yaml_text("a: !Component {name: x}", "t.yaml")
{'a': {'name': 'x', '_tag': 'Component'}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tileplan.errors import ConfigError

TAGS = ("Component", "Container", "Parallel", "Hierarchical", "Nothing")


class TimeloopLoader(yaml.SafeLoader):
    """SafeLoader + Timeloop's node tags; duplicate keys and unknown tags are errors."""


def _mapping(loader: TimeloopLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise ConfigError(f"a mapping key at line {key_node.start_mark.line + 1} is not a scalar")
        if key in out:
            raise ConfigError(f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


def _tagged(tag: str):  # type: ignore[no-untyped-def]
    def construct(loader: TimeloopLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.MappingNode):
            body = _mapping(loader, node)
        elif isinstance(node, yaml.SequenceNode):
            body = {"nodes": loader.construct_sequence(node, deep=True)}
        else:
            value = loader.construct_scalar(node)  # type: ignore[arg-type]
            body = {} if value in ("", None) else {"name": value}
        body["_tag"] = tag
        return body

    return construct


def _unknown(loader: TimeloopLoader, suffix: str, node: yaml.Node) -> Any:
    raise ConfigError(f"YAML tag {node.tag!r} at line {node.start_mark.line + 1} is not a Timeloop tag "
                      f"(allowed: {', '.join('!' + t for t in TAGS)}); tileplan never runs tagged code")


TimeloopLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
for _tag in TAGS:
    TimeloopLoader.add_constructor(f"!{_tag}", _tagged(_tag))
TimeloopLoader.add_multi_constructor("", _unknown)
TimeloopLoader.add_multi_constructor("!", _unknown)
TimeloopLoader.add_multi_constructor("tag:yaml.org,2002:python/", _unknown)


def read_timeloop_yaml_text(text: str, source: str) -> Any:
    """Parse Timeloop YAML ``text``; ``source`` names it in the error line."""
    try:
        return yaml.load(text, Loader=TimeloopLoader)  # noqa: S506 - SafeLoader subclass, five inert tags
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: malformed YAML{where}: {getattr(err, 'problem', None) or err}") from None


def read_timeloop_yaml(path: str | Path) -> Any:
    """Parse the Timeloop YAML file ``path`` (one clear ``ConfigError`` for any problem)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the file ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (Timeloop files are UTF-8 YAML)") from None
    return read_timeloop_yaml_text(text, str(path))


def timeloop_keys(path: str | Path) -> frozenset[str]:
    """Which Timeloop sections the file ``path`` has, by content: the subset of ``problem``,
    ``architecture`` and ``mapping`` that are top-level keys (empty for anything else: not a
    ``.yaml``/``.yml`` file, unreadable, no such key). Never raises: a caller that gets an empty set
    goes on to its other formats."""
    path = Path(path)
    if path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        return frozenset()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    starts = {line.split(":", 1)[0] for line in text.splitlines() if line[:1].isalpha() and ":" in line}
    return frozenset(starts & {"problem", "architecture", "mapping"})
