"""Ye et al.'s single-layer reuse strategies (§2.2) as named loop orders of the one model.

Ye et al. tile a layer by ``a`` x ``b`` (ofmap columns x rows, our Q x P), ``h`` (batch, N), ``g``
(ifmap channels, C) and ``d`` (filters, K). Without reuse, an ifmap tile is read ``ceil(D/d)``
times, a weight tile ``ceil(W1 W2 B / abh)`` times and every ofmap costs ``2 (ceil(C1/g) - 1)``
partial-sum transfers plus its final write. Each reuse strategy makes one operand stationary:

* ``ir`` (ifmap reuse): the filter loop innermost, ``G N P Q C R S K`` (outermost first): every
  ifmap element is read once; weights ``ceil(BW1W2/abh)`` times; psums ``2 ceil(C1/g) - 1`` writes
  and reads per ofmap element;
* ``wr`` (weight reuse): the ofmap loops innermost, ``G K C R S N P Q``: weights once, ifmaps
  ``ceil(D/d)`` times, psums as ``ir``;
* ``pr`` (psum reuse): the channel loop innermost, ``G N P Q K C R S``: each ofmap written once,
  ifmaps ``ceil(D/d)`` times, weights ``ceil(BW1W2/abh)`` times.

The strategies ``ir`` / ``wr`` / ``pr`` are the exhaustive search (every tile size, the model's safe
reductions) restricted to that one loop order; ``smartshuttle`` (Ye et al.'s SmartShuttle
baseline, brute force) to the three of them, per layer. The cost is always the one model's (halo
and remainder tiles exact); the closed forms are tests (``tests/test_ye_single.py``). R and S tiles
are free like every other tile: a filter split across tiles is the same dataflow with the filter
loops beside the channel loop (never fewer DRAM bytes; it only lets a huge filter fit).

Not to be confused with ``smartshuttle-rules`` (``search.baselines``): e-PlaNNer's rendering of
SmartShuttle's empirical rules (a fixed stationarity from the layer shape, tiles maximised in a
priority order); ``smartshuttle`` here searches every tile of every strategy, as Ye et al.'s
baseline does.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.errors import TileplanError
from tileplan.mapping import Mapping
from tileplan.search.exhaustive import exhaustive
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult

G, N, K, C, P, Q, R, S = Dim.G, Dim.N, Dim.K, Dim.C, Dim.P, Dim.Q, Dim.R, Dim.S

#: Ye et al.'s single-layer dataflows as loop orders, outermost first.
ORDERS: dict[str, tuple[Dim, ...]] = {
    "ir": (G, N, P, Q, C, R, S, K),
    "wr": (G, K, C, R, S, N, P, Q),
    "pr": (G, N, P, Q, K, C, R, S),
}


def order_array(names: tuple[str, ...]) -> np.ndarray:
    """(len(names), 8) loop orders of the named dataflows.

    >>> order_array(("ir",)).tolist()
    [[1, 0, 4, 5, 3, 6, 7, 2]]
    """
    unknown = [n for n in names if n not in ORDERS]
    if unknown:
        raise TileplanError(f"unknown Ye et al. dataflow {unknown[0]!r}; choose from {', '.join(ORDERS)}")
    return np.array([[int(d) for d in ORDERS[n]] for n in names], dtype=np.int64)


def dataflow_of(mapping: Mapping) -> str:
    """Which of ir / wr / pr ``mapping``'s loop order is (``"other"`` for any other order)."""
    for name, order in ORDERS.items():
        if tuple(mapping.order) == order:
            return name
    return "other"


def _restricted(problem: Problem, objective: Objective, name: str, dataflows: tuple[str, ...]) -> SearchResult:
    result = exhaustive(problem, objective, orders=order_array(dataflows))
    return dataclasses.replace(result, strategy=name)


def ir(problem: Problem, objective: Objective) -> SearchResult:
    """Ye et al.'s ifmap reuse: the best tiles for the ``ir`` loop order."""
    return _restricted(problem, objective, "ir", ("ir",))


def wr(problem: Problem, objective: Objective) -> SearchResult:
    """Ye et al.'s weight reuse: the best tiles for the ``wr`` loop order."""
    return _restricted(problem, objective, "wr", ("wr",))


def pr(problem: Problem, objective: Objective) -> SearchResult:
    """Ye et al.'s psum reuse: the best tiles for the ``pr`` loop order."""
    return _restricted(problem, objective, "pr", ("pr",))


def smartshuttle(problem: Problem, objective: Objective) -> SearchResult:
    """SmartShuttle as Ye et al.'s baseline: brute force over ir / wr / pr and every tile size."""
    return _restricted(problem, objective, "smartshuttle", tuple(ORDERS))


__all__ = ["ORDERS", "dataflow_of", "ir", "order_array", "pr", "smartshuttle", "wr"]
