"""Exhaustive search: the true minimum of the model over the whole mapping space of ``space``.

This module drives it: every core split with each operand in its on-chip memory, then the variants
that hold one operand in the PEs' register files (:func:`with_register_files`). The split-level loop
(visit order, split pruning, merging parts searched in several processes) is ``search.split_search``;
costing one chunk of a split's tile vectors is ``search.chunk_search``; ``search.batch_rows`` turns
batch rows into mappings."""

from __future__ import annotations

import dataclasses

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.dims import Operand
from tileplan.search.batch_rows import best_unroll, to_mapping
from tileplan.search.hoist import HOISTS, NONE, Hoist, reuse_orders
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult
from tileplan.search.rf_level import bypass_options, bypass_problem, real_footprints
from tileplan.search.row_dram import prepare as row_dram_prepare
from tileplan.search.shared import Floor
from tileplan.search.space import class_orders
from tileplan.search.split_search import Progress, SplitSearch, merge_split_searches, search_splits

#: ``best_unroll`` and ``to_mapping`` (``search.batch_rows``) and the split-level search
#: (``search.split_search``) are imported from here by the API and other strategies.
__all__ = ["Progress", "SplitSearch", "best_unroll", "exhaustive", "inherit_tables", "merge_split_searches",
           "search_splits", "to_mapping", "with_register_files"]


def exhaustive(problem: Problem, objective: Objective, *, chunk: int = 1 << 16,
               progress: Progress | None = None, orders: np.ndarray | None = None,
               hoists: tuple[Hoist, ...] | None = None) -> SearchResult:
    """Minimise ``objective`` over every core split, tile size, loop order, spatial unrolling and
    hoist configuration (``search.hoist.HOISTS``: the plain tile vector, and weights spanning all
    input channels of their filters as TSO's weight stationary keeps them).

    Splits are visited in order of a lower bound and skipped once the bound cannot beat the best
    found (the bounds of every split at once: :class:`SplitBounds`); within a split, the reductions
    of ``search.space`` apply, and the tile vectors whose own bound (:meth:`SplitBounds.row_bounds`)
    exceeds a value found are not costed. Deterministic: a bound beyond the first three only skips
    what cannot even tie, so the choice is the one of costing everything. ``orders``
    ((m, 8) loop orders, outermost first) restricts the loop orders (a paper's fixed dataflows);
    by default every reuse class (``space.class_orders``, ``hoist.reuse_orders`` when hoisted).
    ``hoists``: the hoist configurations searched (default: all of ``HOISTS``, or none but the
    plain one when ``orders`` fixes the dataflows).

    Where the machine's PEs have register files, the default search (no ``orders``) also holds one
    operand's tiles in them instead of the on-chip buffer (``search.rf_level``; :func:`with_register_files`).
    """
    base = merge_split_searches(problem, [search_splits(problem, objective, chunk=chunk, progress=progress,
                                                        orders=orders, hoists=hoists)])
    if orders is not None:
        return base
    return with_register_files(problem, objective, base, chunk=chunk, hoists=hoists)


def inherit_tables() -> None:
    """Compute here the layer-independent tables every exhaustive search reads (each hoist's reuse-class
    loop orders: about 30 ms of CPU; the masks of the per-tile-vector DRAM bound, ``row_dram.prepare``),
    so that worker processes forked after it inherit them instead of each computing them again."""
    for hoist in HOISTS:
        if hoist == NONE:
            row_dram_prepare(class_orders())
        else:
            row_dram_prepare(reuse_orders(hoist), hoist.array())


def with_register_files(problem: Problem, objective: Objective, base: SearchResult, *, chunk: int = 1 << 16,
                        hoists: tuple[Hoist, ...] | None = None) -> SearchResult:
    """``base`` (the exhaustive result with every operand in its on-chip memory), or better: for each
    operand that may bypass its buffer (``rf_level.bypass_options``), the exhaustive search of the
    mappings holding that operand's tiles in the PEs' register files. Such a mapping replaces
    ``base`` only when its objective value is strictly less, so each of these searches prunes every
    split and chunk that cannot beat ``base`` (often all of them: then it costs only the bounds)."""
    options = bypass_options(problem)
    if not options:
        return base
    key0 = float(objective.key(base.cost)[0])
    best: tuple[float, SplitSearch, Problem, frozenset[Operand]] | None = None
    evaluated, space, seconds = base.evaluated, base.space_size, base.seconds
    for op in options:
        ops = frozenset({op})
        variant = bypass_problem(problem, ops)
        floor = np.nextafter(key0 if best is None else best[0], -np.inf)
        part = search_splits(variant, objective, chunk=chunk, shared=Floor(float(floor)), hoists=hoists,
                             bypass=ops, plain=problem)
        evaluated += part.evaluated
        space += part.space
        seconds += part.seconds
        if part.best is not None and part.key[0] < (key0 if best is None else best[0]):
            best = (part.key[0], part, variant, ops)
    if best is None:
        return dataclasses.replace(base, evaluated=evaluated, space_size=space, seconds=seconds)
    _, part, variant, ops = best
    assert part.best is not None
    mapping, cost = part.best
    return dataclasses.replace(base, mapping=dataclasses.replace(mapping, bypass=ops),
                               cost=real_footprints(problem, variant, cost), evaluated=evaluated,
                               space_size=space, seconds=seconds)

