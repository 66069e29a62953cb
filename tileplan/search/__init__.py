"""Search strategies: each takes a compiled ``Problem`` and an ``Objective`` and returns a
``SearchResult``; they share one cost model (``tileplan.cost.model``) and one objective key."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tileplan.cost.problem import Problem
from tileplan.errors import TileplanError
from tileplan.search.baselines import ma, smartshuttle_rules, zhang
from tileplan.search.eplanner import eplanner, eplanner_strict
from tileplan.search.exhaustive import exhaustive
from tileplan.search.marvel import marvel, marvel_joint, marvel_random, nvdla, rs, shidiannao
from tileplan.search.objective import DramModel, Objective, best_index, recost, volume_problem
from tileplan.search.random_search import random_search
from tileplan.search.result import SearchResult
from tileplan.search.tso import tso
from tileplan.search.ye import ir, pr, smartshuttle, wr

Strategy = Callable[..., SearchResult]


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
    "tso": tso,
    "tso-noburst": tso_noburst,
    "eplanner": eplanner,
    "eplanner-strict": eplanner_strict,
    "zhang": zhang,
    "ma": ma,
    "smartshuttle-rules": smartshuttle_rules,
    "ir": ir,
    "wr": wr,
    "pr": pr,
    "smartshuttle": smartshuttle,
}

#: Strategies over multi-level mappings (an on-chip level below the DRAM tiles, ``cost.levels``).
#: Their costs include the register-file level, so they are compared among themselves, not with
#: the two-level strategies above.
LEVEL_STRATEGIES: dict[str, Strategy] = {
    "marvel": marvel,
    "marvel-joint": marvel_joint,
    "marvel-random": marvel_random,
    "rs": rs,
    "nvdla": nvdla,
    "shidiannao": shidiannao,
}


def run(name: str, problem: Problem, objective: Objective, *, dram_model: DramModel | str = DramModel.BURST,
        **options: Any) -> SearchResult:
    """Run strategy ``name`` (options it does not take are ignored). With ``dram_model="volume"`` the
    strategy chooses on the volume model and the result is re-costed with the full model."""
    known = STRATEGIES | LEVEL_STRATEGIES
    if name not in known:
        raise TileplanError(f"unknown strategy {name!r}; choose one of {', '.join(known)}")
    fn = known[name]
    kwargs = {k: v for k, v in options.items() if k in _accepted(fn)}
    if DramModel.parse(str(dram_model)) is DramModel.BURST:
        return fn(problem, objective, **kwargs)
    chosen = fn(volume_problem(problem), objective, **kwargs)
    return dataclasses.replace(chosen, cost=recost(problem, chosen.mapping))


def _accepted(fn: Strategy) -> tuple[str, ...]:
    """The argument names strategy function ``fn`` takes."""
    return fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount]


def takes(name: str, option: str) -> bool:
    """Whether strategy ``name`` reads ``option`` (``"budget"``, ``"seed"``): what :func:`run` passes it.

    >>> takes("random", "budget"), takes("exhaustive", "budget"), takes("marvel-random", "seed")
    (True, False, True)
    """
    fn = (STRATEGIES | LEVEL_STRATEGIES).get(name)
    return fn is not None and option in _accepted(fn)


__all__ = ["LEVEL_STRATEGIES", "STRATEGIES", "DramModel", "Objective", "SearchResult", "best_index", "exhaustive",
           "random_search", "run", "takes", "tso", "tso_noburst"]
