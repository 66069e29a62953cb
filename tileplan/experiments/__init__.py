"""Paper experiments: one module per paper (``tso``, ``eplanner``, ``marvel``, ``hwff``, ``ye``), found by
name. Each module defines ``NAME``, ``TITLE``, ``PAPER`` and ``run(*, quick, jobs, log)`` returning an
:class:`~tileplan.experiments.common.ExperimentResult`; ``common`` holds the pattern they share."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from tileplan.errors import TileplanError
from tileplan.experiments.common import ExperimentResult, Log

_NOT_EXPERIMENTS = {"common"}


def _modules() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name in _NOT_EXPERIMENTS or info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "run") and hasattr(module, "NAME"):
            found[module.NAME] = module
    return found


def names() -> list[str]:
    """Names of the experiments shipped in the package, sorted."""
    return sorted(_modules())


def describe() -> dict[str, str]:
    """Experiment name -> title."""
    return {name: str(getattr(m, "TITLE", name)) for name, m in sorted(_modules().items())}


def run(name: str, *, quick: bool = False, jobs: int | None = None, log: Log | None = None,
        paper_formulas: bool = False) -> ExperimentResult:
    """Run experiment ``name`` (``quick``: the reduced version the tests run; ``paper_formulas``:
    also the paper's printed formulas where they differ from the model, for experiments that have
    such formulas)."""
    modules = _modules()
    if name not in modules:
        known = ", ".join(sorted(modules)) or "none yet"
        raise TileplanError(f"unknown experiment {name!r}; choose one of: {known}")
    fn = modules[name].run
    extra = {}
    if paper_formulas:
        if "paper_formulas" not in fn.__code__.co_varnames[:fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount]:
            raise TileplanError(f"experiment {name!r} has no printed formulas that differ from the model "
                                f"(--paper-formulas is for: ye)")
        extra["paper_formulas"] = True
    result: ExperimentResult = fn(quick=quick, jobs=jobs, log=log or (lambda _msg: None), **extra)
    return result


__all__ = ["ExperimentResult", "describe", "names", "run"]
