"""MARVEL (Chatarasi et al.): the decoupled off-chip / on-chip search, its joint exhaustive
counterpart, and the fixed-dataflow baselines of its Fig. 8 — all over the one multi-level model.

* ``marvel``: the off-chip subspace first (``marvel_offchip``: level-3 tiles and layouts by the DB
  block count, order by slopes), then the on-chip subspace under it (``marvel_onchip``).
* ``marvel-joint``: every level-3 tiling (feasible, under the same tile-size rule) x every DRAM
  reuse class of loop order (plus MARVEL's slope order), each with its best on-chip level, in the
  layouts MARVEL chose (layouts change only the block count). It contains MARVEL's choice, so it is
  never worse; the difference is what decoupling loses. Exhaustive: for small layers.
* ``rs``, ``nvdla``, ``shidiannao``: MARVEL's off-chip choice with the on-chip fan-out restricted to
  P,R (row-stationary-like, MARVEL's QR), K,C (NVDLA-like) or P,Q (ShiDianNao-like); the rest of the
  on-chip level searched, as the paper does for its baselines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.errors import InfeasibleError, TileplanError
from tileplan.mapping import Mapping
from tileplan.search.marvel_offchip import OffChip, candidate_tiles, fits, offchip
from tileplan.search.marvel_onchip import OnChip, OnChipOptions, onchip
from tileplan.search.objective import Objective
from tileplan.search.result import SearchResult
from tileplan.search.space import class_orders


def _single_core(problem: Problem, name: str) -> None:
    if problem.arch.cores.total != 1:
        raise TileplanError(f"strategy {name!r} maps one core's memory hierarchy; {problem.arch.name} has "
                            f"{problem.arch.cores.total} cores")


def _options(divisors: bool, unroll_rs: bool, symmetry: bool, max_parallel: int, min_utilization: float,
             parallel: tuple[Dim, ...] | None = None, bound: bool = True) -> OnChipOptions:
    if max_parallel < 1:
        raise TileplanError(f"max_parallel must be at least 1 (dimensions that fan out), got {max_parallel}")
    if not 0.0 <= min_utilization <= 1.0:
        raise TileplanError(f"min_utilization must be between 0 and 1 (a fraction of the PEs), got {min_utilization}")
    return OnChipOptions(divisors=divisors, unroll_rs=unroll_rs, symmetry=symmetry, max_parallel=max_parallel,
                         min_utilization=min_utilization, parallel=parallel, bound=bound)


def _relaxed(problem: Problem, base: Mapping, objective: Objective, opts: OnChipOptions,
             base_orders: list[tuple[Dim, ...]] | None = None) -> OnChip | None:
    """The on-chip search; if its pruning leaves nothing, again without the utilisation bound."""
    found = onchip(problem, base, objective, opts, base_orders=base_orders, bound=opts.bound)
    if found is None and opts.min_utilization > 0:
        found = onchip(problem, base, objective, replace(opts, min_utilization=0.0), base_orders=base_orders,
                       bound=opts.bound)
    return found


def _onchip_or_relaxed(problem: Problem, base: Mapping, objective: Objective, opts: OnChipOptions) -> OnChip:
    found = _relaxed(problem, base, objective, opts)
    if found is None:
        raise InfeasibleError(f"no on-chip mapping of layer {problem.layer.name!r} fits a PE's register file "
                              f"on {problem.arch.name} under its level-3 tile {base.tiles}")
    return found


def marvel(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = True,
           symmetry: bool = True, max_parallel: int = 3, min_utilization: float = 0.1,
           every_layout: bool = False, bound: bool = True, offchip_divisors: bool = True) -> SearchResult:
    """MARVEL's decoupled search (see the module docstring); every pruning option can be switched off:
    ``divisors`` (on-chip tiles divide their parent's, no prologue/epilogue), ``offchip_divisors``
    (the same for the level-3 tiles), ``unroll_rs``, ``symmetry``, ``max_parallel``,
    ``min_utilization``, ``every_layout`` (all 24 permutations per tensor instead of one per
    innermost dimension) and ``bound`` (the safe lower-bound pruning of the on-chip search)."""
    return _decoupled("marvel", problem, objective, _options(divisors, unroll_rs, symmetry, max_parallel,
                                                             min_utilization, bound=bound),
                      every_layout=every_layout, divisors=offchip_divisors)


def marvel_parts(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = True,
                 symmetry: bool = True, max_parallel: int = 3, min_utilization: float = 0.1,
                 every_layout: bool = False, bound: bool = True, offchip_divisors: bool = True,
                 parallel: tuple[Dim, ...] | None = None) -> tuple[OffChip, OnChip]:
    """The two stages of MARVEL's decoupled search, for reports (space sizes, DB blocks, slopes);
    ``parallel``: only these dimensions fan out (the baselines)."""
    _single_core(problem, "marvel")
    opts = _options(divisors, unroll_rs, symmetry, max_parallel, min_utilization, parallel, bound)
    off = offchip(problem, divisors=offchip_divisors, every_layout=every_layout)
    return off, _onchip_or_relaxed(problem, off.mapping, objective, opts)


def _decoupled(name: str, problem: Problem, objective: Objective, opts: OnChipOptions, *, every_layout: bool,
               divisors: bool) -> SearchResult:
    _single_core(problem, name)
    t0 = time.perf_counter()
    off = offchip(problem, divisors=divisors, every_layout=every_layout)
    on = _onchip_or_relaxed(problem, off.mapping, objective, opts)
    return SearchResult(name, on.mapping, on.cost, evaluated=off.candidates + on.evaluated,
                        space_size=off.space * on.space, seconds=time.perf_counter() - t0)


def _baseline(name: str, parallel: tuple[Dim, ...]) -> Callable[..., SearchResult]:
    def strategy(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = False,
                 symmetry: bool = True, min_utilization: float = 0.1, bound: bool = True,
                 offchip_divisors: bool = True) -> SearchResult:
        opts = _options(divisors, unroll_rs, symmetry, len(parallel), min_utilization, parallel, bound)
        return _decoupled(name, problem, objective, opts, every_layout=False, divisors=offchip_divisors)

    strategy.__doc__ = (f"MARVEL's off-chip choice, on-chip fan-out over {', '.join(d.name for d in parallel)} "
                        f"only (the {name} dataflow of MARVEL's Fig. 8).")
    strategy.__name__ = name
    return strategy


rs = _baseline("rs", (Dim.P, Dim.R))
nvdla = _baseline("nvdla", (Dim.K, Dim.C))
shidiannao = _baseline("shidiannao", (Dim.P, Dim.Q))


def marvel_joint(problem: Problem, objective: Objective, *, divisors: bool = True, unroll_rs: bool = True,
                 symmetry: bool = True, max_parallel: int = 3, min_utilization: float = 0.1, bound: bool = True,
                 offchip_divisors: bool = True) -> SearchResult:
    """The joint space exhaustively (see the module docstring)."""
    _single_core(problem, "marvel-joint")
    t0 = time.perf_counter()
    opts = _options(divisors, unroll_rs, symmetry, max_parallel, min_utilization, bound=bound)
    off = offchip(problem, divisors=offchip_divisors)
    tiles = candidate_tiles(problem, offchip_divisors)
    layouts = off.mapping.layouts
    orders = [tuple(Dim(int(d)) for d in o) for o in class_orders()]
    if off.mapping.order not in orders:
        orders.append(off.mapping.order)
    best: tuple[tuple[float, ...], OnChip] | None = None
    evaluated = 0
    space = 0.0
    for tile in tiles[fits(problem, tiles)]:
        base = Mapping(tiles=tuple(int(x) for x in tile), order=off.mapping.order, layouts=layouts)
        found = _relaxed(problem, base, objective, opts, orders)
        if found is None:
            continue
        evaluated += found.evaluated
        space += found.space
        key = tuple(float(k[0]) for k in [objective.key(found.cost), *objective.tie_keys(found.cost)])
        if best is None or key < best[0]:
            best = (key, found)
    if best is None:
        raise InfeasibleError(f"no multi-level mapping of layer {problem.layer.name!r} fits {problem.arch.name}")
    return SearchResult("marvel-joint", best[1].mapping, best[1].cost, evaluated, space, time.perf_counter() - t0)


def marvel_random(problem: Problem, objective: Objective, *, seconds: float = 1.0, seed: int = 0,
                  per_draw: int = 256) -> SearchResult:
    """Random sampling of the joint space for a time budget (MARVEL's Fig. 10 baseline): a random
    feasible level-3 tiling and DRAM reuse-class order, then ``per_draw`` random on-chip levels
    under it (no pruning but the L1 and PE-array fit), until ``seconds`` have passed."""
    _single_core(problem, "marvel-random")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    tiles = candidate_tiles(problem, False)
    tiles = tiles[fits(problem, tiles)]
    if len(tiles) == 0:
        raise InfeasibleError(f"no level-3 tile of layer {problem.layer.name!r} fits {problem.arch.name}")
    orders = class_orders()
    free = _options(False, False, False, 8, 0.0, bound=False)
    best: tuple[tuple[float, ...], OnChip] | None = None
    evaluated = 0
    while best is None or time.perf_counter() - t0 < seconds:
        tile = tiles[rng.integers(len(tiles))]
        base = Mapping(tiles=tuple(int(x) for x in tile), order=tuple(Dim(int(d)) for d in orders[rng.integers(16)]))
        found = onchip(problem, base, objective, free, sample=(rng, per_draw), bound=False)
        if found is None:
            if time.perf_counter() - t0 > 10 * seconds:
                raise InfeasibleError(f"random sampling found no on-chip level of layer {problem.layer.name!r} "
                                      f"that fits {problem.arch.name}")
            continue
        evaluated += found.evaluated
        key = tuple(float(k[0]) for k in [objective.key(found.cost), *objective.tie_keys(found.cost)])
        if best is None or key < best[0]:
            best = (key, found)
    return SearchResult("marvel-random", best[1].mapping, best[1].cost, evaluated, float(len(tiles)) * 16,
                        time.perf_counter() - t0)
