"""MARVEL's on-chip search streamed in bounded chunks: the chunks are the whole enumeration, the
chunked search finds what one search over every option finds, and the variant without the
no-prologue/epilogue (divisor) pruning is never worse than MARVEL."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from tileplan.arch import load
from tileplan.cost.problem import Problem
from tileplan.mapping import Mapping
from tileplan.search import run
from tileplan.search.marvel_offchip import offchip
from tileplan.search.marvel_onchip import onchip
from tileplan.search.marvel_onchip_space import OnChipOptions, iter_level_options, level_options
from tileplan.search.objective import Objective
from tileplan.workload.zoo.marvel import TABLE3

EYERISS = load("eyeriss")


@cache
def _base(label: str, sizes: tuple[int, ...] | None = None, arch: str = "eyeriss") -> tuple[Problem, Mapping]:
    """A Table 3 layer (``sizes``: K C R S P Q instead of the paper's) and MARVEL's level-3 mapping."""
    row = next(r for r in TABLE3 if r.label == label)
    if sizes is not None:
        row = replace(row, sizes=sizes)
    problem = Problem(row.layer(), load(arch))
    return problem, offchip(problem).mapping


def _keys(objective: Objective, cost: object) -> list[float]:
    return [float(k[0]) for k in [objective.key(cost), *objective.tie_keys(cost)]]  # type: ignore[arg-type]


@pytest.mark.parametrize(("divisors", "count"), [(True, 302), (False, 69248)])
def test_streamed_options_are_the_whole_enumeration_in_order(divisors: bool, count: int) -> None:
    """L4 (3x3 depthwise) under MARVEL's level-3 tile: the chunks, concatenated, are exactly the
    options enumerated at once, none longer than the chunk; without divisors there are 229x more."""
    problem, base = _base("L4")
    opts = OnChipOptions(divisors=divisors)
    whole = level_options(problem, base.tiles, opts)
    chunks = list(iter_level_options(problem, base.tiles, opts, chunk=1000))
    assert len(whole) == count
    assert all(0 < len(c) <= 1000 for c in chunks) and len(chunks) == -(-count // 1000)
    assert np.array_equal(np.concatenate(chunks), whole)
    # the step cap prunes while the product is built, to the same rows in the same order
    capped = level_options(problem, base.tiles, opts, max_steps=2025.0)
    assert 0 < len(capped) < count
    assert np.array_equal(np.concatenate(list(iter_level_options(problem, base.tiles, opts, max_steps=2025.0,
                                                                 chunk=64))), capped)


def test_divisor_options_are_a_subset_of_the_unpruned_ones() -> None:
    problem, base = _base("L4")
    free = {o.tobytes() for o in level_options(problem, base.tiles, OnChipOptions(divisors=False))}
    assert all(o.tobytes() in free for o in level_options(problem, base.tiles, OnChipOptions()))


CHUNK_CASES = [
    ("L9", (4, 6, 3, 3, 3, 4), Objective.LATENCY),  # regular 3x3
    ("L12", (8, 10, 1, 1, 2, 4), Objective.ENERGY),  # pointwise
    ("L4", (1, 12, 3, 3, 5, 5), Objective.EDP),  # depthwise
    ("L7", (20, 36, 1, 1, 1, 1), Objective.LATENCY),  # FC
]


# every layer with divisor pruning; without it (1 to 2 s each) the FC in the default run, all under slow
@pytest.mark.parametrize(("divisors", "label", "sizes", "objective"), [
    pytest.param(d, *case, id=f"{d}-{case[0]}", marks=() if d or case[0] == "L7" else pytest.mark.slow)
    for d in (True, False) for case in CHUNK_CASES])
def test_chunked_search_finds_the_unchunked_optimum(label: str, sizes: tuple[int, ...], objective: Objective,
                                                    divisors: bool) -> None:
    """Small chunks (each searched with the best so far as the incumbent; without divisors, MARVEL's
    optimum first and the compute-step cap) find the keys of one search over every option with no
    bound at all, costing fewer candidates."""
    problem, base = _base(label, sizes)
    opts = OnChipOptions(divisors=divisors)
    chunked = onchip(problem, base, objective, opts, option_chunk=50)
    whole = onchip(problem, base, objective, opts, option_chunk=1 << 40, bound=False)
    assert chunked is not None and whole is not None and chunked.complete
    assert _keys(objective, chunked.cost) == pytest.approx(_keys(objective, whole.cost), rel=1e-12)
    assert chunked.costed < whole.costed == whole.evaluated
    bounded = onchip(problem, base, objective, opts, option_chunk=1 << 40)
    assert bounded is not None and _keys(objective, bounded.cost) == pytest.approx(_keys(objective, whole.cost),
                                                                                   rel=1e-12)


def test_without_divisor_pruning_edge_l4_is_faster_and_a_budget_stops_at_marvels_optimum() -> None:
    """On edge's 1024 PEs the 64-channel L4 fans out unevenly: 562.5 cycles without the pruning
    against MARVEL's 625.5. With no time at all the search keeps MARVEL's own optimum, marked
    incomplete."""
    problem = Problem(next(r for r in TABLE3 if r.label == "L4").layer(), load("edge"))
    pruned = run("marvel", problem, Objective.LATENCY)
    free = run("marvel", problem, Objective.LATENCY, divisors=False)
    assert float(pruned.cost.latency_cycles[0]) == 625.5
    assert float(free.cost.latency_cycles[0]) == 562.5
    base = offchip(problem).mapping
    cut = onchip(problem, base, Objective.LATENCY, OnChipOptions(divisors=False), seconds=0.0)
    assert cut is not None and not cut.complete
    assert float(cut.cost.latency_cycles[0]) == 625.5
