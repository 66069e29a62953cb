"""Search strategies: each takes a compiled ``Problem`` and an ``Objective`` and returns a
``SearchResult``; they share one cost model (``tileplan.cost.model``) and one objective key."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.search.exhaustive import exhaustive
from tileplan.search.objective import DramModel, Objective, best_index, recost, volume_problem
from tileplan.search.random_search import random_search
from tileplan.search.result import SearchResult

Strategy = Callable[..., SearchResult]


@dataclass(frozen=True)
class _Lazy:
    """Strategy ``name`` of module ``tileplan.search.<module>``, imported when it first runs: a command
    that plans with one strategy does not load the others (TSO's, e-PlaNNer's, the MARVEL family's)."""

    module: str
    name: str

    def resolve(self) -> Strategy:
        return cast(Strategy, getattr(importlib.import_module(f"tileplan.search.{self.module}"), self.name))

    def __call__(self, problem: Problem, objective: Objective, **options: Any) -> SearchResult:
        return self.resolve()(problem, objective, **options)


def tso_noburst(problem: Problem, objective: Objective, *, fix_partition: str | None = None,
                fix_schedule: str | None = None) -> SearchResult:
    """TSO-noburst (Alg. 4 lines 12-13): TSO's space chosen with the volume DRAM model, the chosen
    plan then costed with the burst model (what the hardware does)."""
    result = run("tso", problem, objective, dram_model=DramModel.VOLUME, fix_partition=fix_partition,
                 fix_schedule=fix_schedule)
    return dataclasses.replace(result, strategy="tso-noburst")


STRATEGIES: dict[str, Strategy] = {
    "exhaustive": exhaustive,
    "random": random_search,
    "tso": _Lazy("tso", "tso"),
    "tso-noburst": tso_noburst,
    "eplanner": _Lazy("eplanner", "eplanner"),
    "eplanner-strict": _Lazy("eplanner", "eplanner_strict"),
    "zhang": _Lazy("baselines", "zhang"),
    "ma": _Lazy("baselines", "ma"),
    "smartshuttle-rules": _Lazy("baselines", "smartshuttle_rules"),
    "ir": _Lazy("ye", "ir"),
    "wr": _Lazy("ye", "wr"),
    "pr": _Lazy("ye", "pr"),
    "smartshuttle": _Lazy("ye", "smartshuttle"),
}

#: Strategies over multi-level mappings (an on-chip level below the DRAM tiles, ``cost.levels``).
#: Their costs include the register-file level, so they are compared among themselves, not with
#: the two-level strategies above.
LEVEL_STRATEGIES: dict[str, Strategy] = {
    "marvel": _Lazy("marvel", "marvel"),
    "marvel-joint": _Lazy("marvel", "marvel_joint"),
    "marvel-random": _Lazy("marvel", "marvel_random"),
    "rs": _Lazy("marvel", "rs"),
    "nvdla": _Lazy("marvel", "nvdla"),
    "shidiannao": _Lazy("marvel", "shidiannao"),
}


def run(name: str, problem: Problem, objective: Objective, *, dram_model: DramModel | str = DramModel.BURST,
        **options: Any) -> SearchResult:
    """Run strategy ``name`` (options it does not take are ignored). With ``dram_model="volume"`` the
    strategy chooses on the volume model and the result is re-costed with the full model."""
    known = STRATEGIES | LEVEL_STRATEGIES
    if name not in known:
        raise TileplanError(f"unknown strategy {name!r}; choose one of {', '.join(known)}")
    fn = known[name]
    if isinstance(fn, _Lazy):
        fn = fn.resolve()
    kwargs = {k: v for k, v in options.items() if k in _accepted(fn)}
    if DramModel.parse(str(dram_model)) is DramModel.BURST:
        return fn(problem, objective, **kwargs)
    chosen = fn(volume_problem(problem), objective, **kwargs)
    return dataclasses.replace(chosen, cost=recost(problem, chosen.mapping))


def _accepted(fn: Strategy) -> tuple[str, ...]:
    """The argument names strategy function ``fn`` takes (a lazily imported one is imported)."""
    if isinstance(fn, _Lazy):
        fn = fn.resolve()
    return fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount]


def takes(name: str, option: str) -> bool:
    """Whether strategy ``name`` reads ``option`` (``"budget"``, ``"seed"``): what :func:`run` passes it.

    >>> takes("random", "budget"), takes("exhaustive", "budget"), takes("marvel-random", "seed")
    (True, False, True)
    """
    fn = (STRATEGIES | LEVEL_STRATEGIES).get(name)
    return fn is not None and option in _accepted(fn)


__all__ = ["LEVEL_STRATEGIES", "STRATEGIES", "DramModel", "Objective", "SearchResult", "best_index", "exhaustive",
           "random_search", "run", "takes", "tso_noburst"]
