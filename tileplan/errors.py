"""One exception hierarchy. Messages name the file, field or layer and say what would fix it."""

from __future__ import annotations


class TileplanError(Exception):
    """Base of every error tileplan raises on purpose; the CLI prints it as one line."""


class ConfigError(TileplanError):
    """An accelerator description (YAML/JSON) is malformed or inconsistent."""


class WorkloadError(TileplanError):
    """A layer or network is malformed (negative size, shape mismatch, unknown name...)."""


class UnsupportedOperatorError(WorkloadError):
    """A model file uses operators tileplan cannot plan."""


class MappingError(TileplanError):
    """A mapping is invalid for its layer/architecture (tile too large, does not fit a memory...)."""


class InfeasibleError(TileplanError):
    """No mapping of a layer fits the accelerator, even with every tile size at 1."""
