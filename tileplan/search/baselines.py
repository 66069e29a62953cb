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
from tileplan.search.eplanner import alg1_initial, fitting, no_fit, search_grid, unpruned_count
from tileplan.search.nest import IC, KH, KW, OC, OH, OW, Nest
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult


def _space(problem: Problem) -> tuple[Nest, np.ndarray]:
    nest = Nest.of(problem)
    return nest, nest.grid(alg1_initial(nest))


def _maximise(nest: Nest, base: np.ndarray, loops: tuple[int, ...]) -> np.ndarray | None:
    """``base`` with ``loops`` set to the fitting combination of their tile values (at or above
    ``base``) with the largest product, ties to the larger first loop; ``None`` if none fits. Memory
    grows with every tile, so the other loops stay at ``base`` (their smallest) while these grow."""
    values = [nest.values(loop, int(base[loop])) for loop in loops]
    mesh = np.meshgrid(*values, indexing="ij")
    cand = np.repeat(base[None], mesh[0].size, axis=0)
    for loop, m in zip(loops, mesh, strict=True):
        cand[:, loop] = m.ravel()
    fit = fitting(nest, cand)
    if len(fit) == 0:
        return None
    size = np.prod(fit[:, list(loops)], axis=1)
    pick = np.lexsort([-fit[:, loop] for loop in loops[::-1]] + [-size])[0]
    return fit[pick]


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
    widest = _maximise(nest, tilings.min(axis=0), (IC,))
    if widest is None:
        raise no_fit(problem, "ma")
    return _result("ma", problem, nest, objective, tilings[tilings[:, IC] == widest[IC]], t0)


def output_stationary_rule(nest: Nest) -> bool:
    """SmartShuttle's rule: output stationary when OW x OH > IC x KW x KH (else weight stationary)."""
    e = nest.extent
    return bool(e[OW] * e[OH] > e[IC] * e[KW] * e[KH])


def smartshuttle_rules(problem: Problem, objective: Objective) -> SearchResult:
    """SmartShuttle's empirical rules (the objective is not consulted: the rules fix the plan)."""
    t0 = time.perf_counter()
    nest, tilings = _space(problem)
    plan: np.ndarray | None = tilings.min(axis=0)
    steps = ((OC,), (OH,), (IC,)) if output_stationary_rule(nest) else ((OC, IC), (OH,))
    for loops in steps:
        assert plan is not None
        plan = _maximise(nest, plan, loops)
        if plan is None:
            raise no_fit(problem, "smartshuttle-rules")
    assert plan is not None
    innermost = IC if output_stationary_rule(nest) else OH
    return _result("smartshuttle-rules", problem, nest, objective, plan[None], t0, innermost=innermost)


__all__ = ["ma", "output_stationary_rule", "smartshuttle_rules", "zhang"]
