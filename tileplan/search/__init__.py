"""Search strategies: each takes a compiled ``Problem`` and an ``Objective`` and returns a
``SearchResult``; they share one cost model (``tileplan.cost.model``) and one objective key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.search.baselines import ma, smartshuttle_rules, zhang
from tileplan.search.eplanner import eplanner
from tileplan.search.exhaustive import exhaustive
from tileplan.search.marvel import marvel, marvel_joint, nvdla, rs, shidiannao
from tileplan.search.objective import Objective, best_index
from tileplan.search.random_search import random_search
from tileplan.search.result import SearchResult

Strategy = Callable[..., SearchResult]

STRATEGIES: dict[str, Strategy] = {
    "exhaustive": exhaustive,
    "random": random_search,
    "eplanner": eplanner,
    "zhang": zhang,
    "ma": ma,
    "smartshuttle-rules": smartshuttle_rules,
    "marvel": marvel,
    "marvel-joint": marvel_joint,
    "rs": rs,
    "nvdla": nvdla,
    "shidiannao": shidiannao,
}


def run(name: str, problem: Problem, objective: Objective, **options: Any) -> SearchResult:
    """Run strategy ``name`` (options it does not take are ignored)."""
    if name not in STRATEGIES:
        raise TileplanError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    fn = STRATEGIES[name]
    accepted = fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount]
    return fn(problem, objective, **{k: v for k, v in options.items() if k in accepted})


__all__ = ["STRATEGIES", "Objective", "SearchResult", "best_index", "exhaustive", "random_search", "run"]
