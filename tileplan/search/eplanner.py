"""e-PlaNNer's planner (thesis Sec. 6.4): the search space pruned by Alg. 1-3, searched by Alg. 4.

1. Tiling-factor initialisation (Alg. 1): KW, KH and OW at their full extent, the PE-mapped loops at
   the PE-array length, every other loop at 1.
2. Loop elimination (Alg. 2): for each of the eight subsets of {OC, IC, OH} in turn, starting from
   the best tiling so far, tile the subset's loops fully; keep the result if it fits the on-chip
   memories and reloads less data. "Reloaded data" is Eq. 6.1 with each operand's reload factor as
   Eq. 6.2-6.5 give it for a non-stationary dataflow: every loop that does not index the operand
   outside it. The model prices each operand under such an order (no second formula set).
3. Loop interchange (Alg. 3): loops sorted by iteration count, the largest innermost.
4. Search (Alg. 4): every tiling at or above the lower bound of step 2 whose tiles fit, each with its
   step-3 order, costed by the model; the best under the objective wins. The thesis's metric is
   Eq. 6.13, estimated performance / off-chip bytes: ``Objective.PERF_PER_BYTE``.

``eplanner-strict`` is exactly that. In the one model, Alg. 2's choice (made on reloaded bytes alone)
often removes the smaller tiles that do better on Eq. 6.13: the strict planner loses to Zhang et al.'s
baseline on 87 of 312 layer x setup pairs of the thesis's networks, by up to 3.7x. ``eplanner``
therefore keeps Alg. 1-3 and widens step 4: it also searches every tiling above Alg. 1's start (the
eliminations become candidates, not constraints) under Alg. 3's order and under Alg. 3's order with
OC, IC or OH forced innermost (the output-, weight- and input-side stationary dataflows the thesis's
own baselines use). Its space contains the strict one and each baseline's, so it is never worse than
any of them under the objective, and it stays a small fraction of the exhaustive space.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.problem import Problem
from tileplan.dims import Dim, Operand
from tileplan.errors import InfeasibleError
from tileplan.search.feasibility import raise_infeasible
from tileplan.search.nest import IC, KH, KW, LOOPS, OC, OH, OW, Nest
from tileplan.search.objective import Objective, best_index
from tileplan.search.result import SearchResult

#: Alg. 2's eight subsets of {OC, IC, OH}, in the order they are tried.
SUBSETS: tuple[tuple[int, ...], ...] = ((), (OC,), (IC,), (OH,), (OC, IC), (OC, OH), (IC, OH), (OC, IC, OH))
CHUNK = 1 << 15
#: Alg. 4's orders per tiling beyond the thesis (``eplanner``): Alg. 3's with OC, IC or OH forced
#: innermost. Alg. 3's own order is one of them: it puts the loop with the most trips innermost and
#: keeps the rest sorted (when OC, IC and OH all have one trip, no order reloads anything).
WIDENED_ORDERS: tuple[int | None, ...] = (OC, IC, OH)

# Per operand, an order with every loop that does not index it outermost (Eq. 6.2-6.5's reloads).
_NON_STATIONARY: dict[Operand, tuple[Dim, ...]] = {
    Operand.INPUT: (Dim.K, Dim.N, Dim.G, Dim.C, Dim.P, Dim.Q, Dim.R, Dim.S),
    Operand.WEIGHT: (Dim.N, Dim.P, Dim.Q, Dim.G, Dim.K, Dim.C, Dim.R, Dim.S),
    Operand.OUTPUT: (Dim.C, Dim.R, Dim.S, Dim.N, Dim.G, Dim.K, Dim.P, Dim.Q),
}


@dataclass(frozen=True)
class Steps:
    """What Alg. 1-3 produce for one layer: tilings as ``{loop: tile}`` (thesis names), the loops
    step 2 eliminated, and the step-3 loop sequence (innermost first, as the thesis writes it)."""

    initial: dict[str, int]
    lower_bound: dict[str, int]
    eliminated: tuple[str, ...]
    sequence: tuple[str, ...]


def alg1_initial(nest: Nest, *, relax: bool = True) -> np.ndarray:
    """Alg. 1: (6,) initial tiling (with ``relax``, a smaller fallback when it does not fit)."""
    t = np.ones(6, dtype=np.int64)
    t[[KW, KH, OW]] = nest.extent[[KW, KH, OW]]
    for loop, length in nest.pe_len.items():
        t[loop] = min(length, int(nest.extent[loop]))
    return nest.relaxed_start(t) if relax else t


def reload_bytes(nest: Nest, t6: np.ndarray) -> np.ndarray:
    """Alg. 2's ReloadCount: Eq. 6.1 bytes with every operand reloaded as for a non-stationary
    dataflow (its Eq. 6.2-6.5 factor), priced by the model; ``inf`` where the tiles do not fit."""
    batch = nest.batch(t6, nest.order_alg3(t6))
    orders = [np.array([int(d) for d in _NON_STATIONARY[op]]) for op in Operand]
    costs = nest.costs(batch, *orders)
    total = sum(c.dram_bytes_by_operand[:, op] for op, c in zip(Operand, costs, strict=True))
    return np.where(costs[0].feasible, total, np.inf)


def alg2_eliminate(nest: Nest, initial: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """Alg. 2: the lower-bound tiling and the loops it tiles fully beyond ``initial``.

    Every tiling the algorithm can reach is ``initial`` with some subset of {OC, IC, OH} full, so
    the eight are costed in one model call and the pseudo-code (each subset applied to the best
    tiling so far) is replayed on their values."""
    loops = (OC, IC, OH)
    masks = [tuple(bool(m >> j & 1) for j in range(3)) for m in range(8)]
    tilings = np.repeat(initial[None], 8, axis=0)
    for m, full in enumerate(masks):
        for j, loop in enumerate(loops):
            if full[j]:
                tilings[m, loop] = nest.extent[loop]
    values = reload_bytes(nest, tilings)
    if not np.isfinite(values[0]):  # Alg. 1's tiling does not fit: start from a fitting fallback
        return alg2_eliminate(nest, nest.relaxed_start(initial))
    best_mask = 0
    low = float(values[0])
    for subset in SUBSETS:
        mask = best_mask | sum(1 << loops.index(loop) for loop in subset)
        if np.isfinite(values[mask]) and values[mask] < low:
            low, best_mask = float(values[mask]), mask
    best = tilings[best_mask]
    eliminated = tuple(i for i in loops if best[i] == nest.extent[i] and initial[i] < nest.extent[i])
    return best, eliminated


def steps(problem: Problem) -> Steps:
    """Alg. 1-3 on one layer."""
    nest = Nest.of(problem)
    init = alg1_initial(nest, relax=False)
    bound, eliminated = alg2_eliminate(nest, init)
    init = alg1_initial(nest)
    trips = nest.trips(bound[None])[0]
    seq = tuple(LOOPS[i] for i in np.argsort(-trips, kind="stable"))
    return Steps({LOOPS[i]: int(init[i]) for i in range(6)}, {LOOPS[i]: int(bound[i]) for i in range(6)},
                 tuple(LOOPS[i] for i in eliminated), seq)


@dataclass(frozen=True)
class SpaceCount:
    """Table 8.5 for one layer: the un-pruned space in the thesis's counting (every tile size of the
    six loops, Sec. 6.4: "about 2 x 10^9" for VGG16's 9th conv), the tilings Alg. 4 costs (the grid
    above the lower bound) and those of them whose tiles fit (the pruned space)."""

    unpruned: int
    evaluated: int
    pruned: int

    @property
    def rate(self) -> float:
        """Pruned / un-pruned (the thesis's percentages, as a fraction)."""
        return self.pruned / self.unpruned if self.unpruned else 0.0


Found = tuple[tuple[float, ...], MappingBatch, CostBatch]


def _best_of(nest: Nest, objective: Objective, tilings: np.ndarray, innermost: tuple[int | None, ...],
             best: Found | None) -> tuple[Found | None, int]:
    """The better of ``best`` and the best of ``tilings``, each under Alg. 3's order with each of
    ``innermost`` forced innermost (``None``: Alg. 3's order as it is), as (objective keys, one-row
    batch, costs); and how many of ``tilings`` fit. The orders share one sweep of the tiles."""
    fit = 0
    for start in range(0, len(tilings), CHUNK):
        t6 = tilings[start:start + CHUNK]
        n = len(t6)
        orders = np.concatenate([nest.order_alg3(t6, x) for x in innermost])
        costs = nest.evaluate(nest.batch(np.tile(t6, (len(innermost), 1)), orders))
        fit += int(costs.feasible[:n].sum())
        if not costs.feasible.any():
            continue
        i = best_index(objective, costs)
        one = costs.take(i)
        key = tuple(float(k[0]) for k in [objective.key(one), *objective.tie_keys(one)])
        if best is None or key < best[0]:
            best = (key, nest.batch(t6[i % n:i % n + 1], orders[i:i + 1]), one)
    return best, fit


def search_grid(nest: Nest, objective: Objective, tilings: np.ndarray, *, innermost: int | None = None
                ) -> tuple[MappingBatch, CostBatch, int, int] | None:
    """Best of ``tilings`` (each with its Alg. 3 order, or ``innermost`` forced innermost): its
    one-row batch and costs, the tilings evaluated and how many fit; ``None`` when none fits."""
    best, fit = _best_of(nest, objective, tilings, (innermost,), None)
    if best is None:
        return None
    return best[1], best[2], len(tilings), fit


def fitting(nest: Nest, tilings: np.ndarray) -> np.ndarray:
    """The tilings whose tiles fit (memory use does not depend on the loop order)."""
    ok = np.concatenate([nest.fits(tilings[s:s + CHUNK]) for s in range(0, len(tilings), CHUNK)])
    return tilings[ok]


def unpruned_count(nest: Nest) -> int:
    """Every tile size of every loop (the thesis's un-pruned count of one layer)."""
    return int(np.prod([int(e) for e in nest.extent]))


def no_fit(problem: Problem, what: str) -> InfeasibleError:
    """The error when no tiling of a restricted space fits (after naming an impossible memory)."""
    raise_infeasible(problem)
    return InfeasibleError(f"no {what} tiling of layer {problem.layer.name!r} fits the on-chip memories of "
                           f"{problem.arch.name}; use --strategy exhaustive")


def _search(problem: Problem, objective: Objective, nest: Nest, tilings: np.ndarray,
            innermost: tuple[int | None, ...], strict: bool, t0: float) -> tuple[SearchResult, int]:
    """The best of ``tilings`` under the ``innermost`` orders as a result, and how many fit."""
    best, fit = _best_of(nest, objective, tilings, innermost, None)
    if best is None:
        raise no_fit(problem, "e-PlaNNer")
    name = "eplanner-strict" if strict else "eplanner"
    return SearchResult(name, nest.mapping(best[1], 0), best[2], len(tilings) * len(innermost),
                        float(unpruned_count(nest)), time.perf_counter() - t0), fit


def eplanner_counted(problem: Problem, objective: Objective, *, strict: bool = False
                     ) -> tuple[SearchResult, SpaceCount]:
    """:func:`eplanner` (``strict``: :func:`eplanner_strict`) and the Table 8.5 numbers of the
    thesis's pruned space (see :class:`SpaceCount`; the same for both)."""
    t0 = time.perf_counter()
    nest = Nest.of(problem)
    bound, _ = alg2_eliminate(nest, alg1_initial(nest, relax=False))
    thesis = nest.grid(bound)
    if strict:
        result, fit = _search(problem, objective, nest, thesis, (None,), True, t0)
    else:
        result = eplanner(problem, objective)
        fit = len(fitting(nest, thesis))
    return result, SpaceCount(unpruned_count(nest), len(thesis), fit)


def eplanner(problem: Problem, objective: Objective) -> SearchResult:
    """e-PlaNNer (Alg. 1-4) with step 4 widened so that it is never worse than the thesis's pruned
    space or its baselines (see the module) under ``objective`` (the thesis: ``perf-per-byte``).
    The thesis's grid (above Alg. 2's bound) lies inside the widened one, as Alg. 2 only raises
    Alg. 1's tiles, so Alg. 2 need not run here."""
    t0 = time.perf_counter()
    nest = Nest.of(problem)
    widened = fitting(nest, nest.grid(alg1_initial(nest)))  # fit does not depend on the order
    return _search(problem, objective, nest, widened, WIDENED_ORDERS, False, t0)[0]


def eplanner_strict(problem: Problem, objective: Objective) -> SearchResult:
    """e-PlaNNer exactly as the thesis prunes (Alg. 1-4: only the tilings above Alg. 2's bound)."""
    return eplanner_counted(problem, objective, strict=True)[0]


def space_count(problem: Problem) -> SpaceCount:
    """Table 8.5's numbers for one layer (see :class:`SpaceCount`)."""
    return eplanner_counted(problem, Objective.PERF_PER_BYTE, strict=True)[1]


__all__ = ["SpaceCount", "Steps", "alg1_initial", "alg2_eliminate", "eplanner", "eplanner_counted", "eplanner_strict",
           "fitting", "reload_bytes",
           "search_grid", "space_count", "steps"]
