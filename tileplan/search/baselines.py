"""The baselines of e-PlaNNer's evaluation (thesis Sec. 8.1, Table 8.3) as restrictions of its nest.

All three get what the thesis gives them: a fully tiled W dimension (and full KH, KW), PE-mapped
loops tiled in multiples of the PE-array length (Alg. 1's starting point, without Alg. 2's
elimination), and the one cost model.

* ``zhang`` (Zhang et al., output stationary): IC innermost in the off-chip nest so partial sums
  never leave the chip; the best remaining tile factors under the objective ("best factors for
  remainders").
* ``ma`` (Ma et al., minimise output reloads): KW, KH and IC tiled fully first, as far as the memory
  allows (the largest IC tile that fits); the best remaining factors and dataflow (Alg. 3's order).
* ``smartshuttle-rules`` (Li et al.'s SmartShuttle as the thesis applies it, empirical rules): output
  stationary when OW x OH > IC x KW x KH, else weight stationary; tile sizes maximised in priority
  order OC > OH > IC (output stationary) or OC, IC > OH (weight stationary) under the memory limits.
  (``smartshuttle`` is Ye et al.'s brute-force variant, another strategy.)
"""

from __future__ import annotations

import time

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.search.eplanner import CHUNK, alg1_initial, no_fit, search_grid, unpruned_count
from tileplan.search.nest import IC, KH, KW, OC, OH, OW, Nest
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult


def _space(problem: Problem) -> tuple[Nest, np.ndarray]:
    nest = Nest.of(problem)
    return nest, nest.grid(alg1_initial(nest))


def _fitting(nest: Nest, tilings: np.ndarray) -> np.ndarray:
    ok = np.concatenate([nest.fits(tilings[s:s + CHUNK]) for s in range(0, len(tilings), CHUNK)])
    return tilings[ok]


def _result(name: str, problem: Problem, nest: Nest, objective: Objective, tilings: np.ndarray,
            t0: float, innermost: int | None = None) -> SearchResult:
    found = search_grid(nest, objective, tilings, innermost=innermost)
    if found is None:
        raise no_fit(problem, name)
    batch, cost, evaluated, _ = found
    return SearchResult(name, nest.mapping(batch, 0), cost, evaluated, float(unpruned_count(nest)),
                        time.perf_counter() - t0)


def zhang(problem: Problem, objective: Objective) -> SearchResult:
    """Zhang et al.: output stationary (IC innermost), best remaining tile factors."""
    t0 = time.perf_counter()
    nest, tilings = _space(problem)
    return _result("zhang", problem, nest, objective, tilings, t0, innermost=IC)


def ma(problem: Problem, objective: Objective) -> SearchResult:
    """Ma et al.: IC (with KW, KH) tiled as fully as fits first, then the best remaining factors."""
    t0 = time.perf_counter()
    nest, tilings = _space(problem)
    fit = _fitting(nest, tilings)
    if len(fit) == 0:
        raise no_fit(problem, "ma")
    widest = fit[fit[:, IC] == fit[:, IC].max()]
    return _result("ma", problem, nest, objective, widest, t0)


def output_stationary_rule(nest: Nest) -> bool:
    """SmartShuttle's rule: output stationary when OW x OH > IC x KW x KH (else weight stationary)."""
    e = nest.extent
    return bool(e[OW] * e[OH] > e[IC] * e[KW] * e[KH])


def smartshuttle_rules(problem: Problem, objective: Objective) -> SearchResult:
    """SmartShuttle's empirical rules (the objective is not consulted: the rules fix the plan)."""
    t0 = time.perf_counter()
    nest, tilings = _space(problem)
    fit = _fitting(nest, tilings)
    if len(fit) == 0:
        raise no_fit(problem, "smartshuttle-rules")
    if output_stationary_rule(nest):
        keys, innermost = [fit[:, OC], fit[:, OH], fit[:, IC]], IC
    else:
        keys, innermost = [fit[:, OC] * fit[:, IC], fit[:, OC], fit[:, OH]], OH
    pick = int(np.lexsort([-k for k in keys[::-1]])[0])
    return _result("smartshuttle-rules", problem, nest, objective, fit[pick:pick + 1], t0, innermost=innermost)


__all__ = ["ma", "output_stationary_rule", "smartshuttle_rules", "zhang"]
