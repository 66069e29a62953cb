"""The shipped accelerator presets (``tileplan/arch/presets/*.yaml``) by name, read without validating
them: ``tileplan arch list`` answers without importing ``tileplan.arch`` (the schema and the YAML
loader). ``tileplan.arch.load`` validates a preset when it is used.

A preset's ``description`` is its one top-level line ``description: "..."`` (a JSON-compatible
double-quoted YAML string, or a plain one); tests/test_cli_startup.py checks that this light
reading equals the validated preset's description for every preset.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "arch" / "presets"
_DESCRIPTION = re.compile(r"^description:[ \t]*(.*?)[ \t]*$", re.MULTILINE)


def preset_names() -> list[str]:
    """Names of the shipped presets."""
    return sorted(p.name[:-5] for p in FOLDER.iterdir() if p.name.endswith(".yaml"))


def preset_path(name: str) -> Path:
    """The YAML file of preset ``name``."""
    return FOLDER / f"{name}.yaml"


def preset_description(name: str) -> str:
    """The ``description`` of preset ``name`` as written in its file ('' when it has none)."""
    match = _DESCRIPTION.search(preset_path(name).read_text(encoding="utf-8"))
    if match is None:
        return ""
    text = match.group(1)
    if text.startswith('"'):
        return str(json.loads(text))
    return text.strip("'")
