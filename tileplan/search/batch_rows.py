"""Between the search's batch arrays and mappings: the tile vectors of a split as a ``MappingBatch``,
each tile vector's fastest unrolling, and a ``Mapping`` from one row of batch arrays (which several
strategies build their results with)."""

from __future__ import annotations

import numpy as np

from tileplan.cost.batch import MappingBatch
from tileplan.cost.kernel_tables import KernelTables
from tileplan.cost.model import best_unroll as model_best_unroll
from tileplan.cost.model import grid_tables
from tileplan.cost.problem import CoreGrid, Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, Dim
from tileplan.mapping import Mapping
from tileplan.search.hoist import Hoist


def best_unroll(problem: Problem, grid: CoreGrid, tiles: np.ndarray, options: np.ndarray, *,
                tables: KernelTables | None = None) -> np.ndarray:
    """(n, 8) fastest unroll option for each tile vector (compute of the slowest core shape of
    ``grid``; ``tables``: the split's kernel tables when the caller has them)."""
    if len(options) == 1:
        return np.broadcast_to(options[0], (len(tiles), NDIMS)).copy()
    if tables is None:
        tables = grid_tables(problem, grid)
    return options[model_best_unroll(tables, tiles, options)]


def _spatial_of(problem: Problem, unroll: np.ndarray) -> tuple[tuple[tuple[Dim, int], ...], ...]:
    """Place unroll factors back on PE-array axes that allow them (flattened axes stay empty):
    a small backtracking search, since several axes may accept the same dimension."""
    from tileplan.arch.spec import AxisMode

    axes = problem.arch.pe_array.axes
    wanted = [(Dim(d), int(unroll[d])) for d in DIMS if unroll[d] > 1]
    slots: list[list[tuple[Dim, int]]] = [[] for _ in axes]

    def place(i: int) -> bool:
        if i == len(wanted):
            return True
        d, f = wanted[i]
        for a, (axis, lanes) in enumerate(zip(axes, problem.lanes, strict=True)):
            if axis.mode is AxisMode.FLATTENED or d not in axis.dim_ids or len(slots[a]) >= axis.max_dims:
                continue
            if int(np.prod([g for _, g in slots[a]] + [f])) > lanes:
                continue
            slots[a].append((d, f))
            if place(i + 1):
                return True
            slots[a].pop()
        return False

    if not place(0):
        raise AssertionError(f"unroll {unroll.tolist()} fits no axis assignment")  # options come from one
    return tuple(tuple(slot) for slot in slots)


def to_mapping(problem: Problem, tiles: np.ndarray, order: np.ndarray, unroll: np.ndarray,
               split: tuple[tuple[int, ...], tuple[int, ...]], hoist: np.ndarray | None = None) -> Mapping:
    """A ``Mapping`` from one row of batch arrays."""
    h: tuple[frozenset[Dim], frozenset[Dim], frozenset[Dim]] = (frozenset(), frozenset(), frozenset())
    if hoist is not None:
        sets = [frozenset(Dim(d) for d in DIMS if hoist[op, d]) for op in OPERANDS]
        h = (sets[0], sets[1], sets[2])
    return Mapping(tiles=tuple(int(t) for t in tiles), order=tuple(Dim(int(d)) for d in order), hoist=h,
                   cluster_split=split[0], core_split=split[1], spatial=_spatial_of(problem, unroll))


def tile_batch(t: np.ndarray, orders: np.ndarray, hoist: Hoist, split: tuple[tuple[int, ...], tuple[int, ...]],
               unroll: np.ndarray | None = None, *, views: bool = False) -> MappingBatch:
    """The tile vectors ``t`` as a batch in the first of ``orders`` with ``hoist``, the default
    layouts and ``unroll`` (default: none yet, all ones). ``views``: the order, hoist and layout
    arrays are read-only broadcast views (no copy of n rows), for a batch only ever read through
    ``take`` (which copies the rows taken)."""
    n = len(t)

    def rows(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        view = np.broadcast_to(a, shape)
        return view if views else view.copy()

    return MappingBatch(t, rows(orders[0], (n, NDIMS)), rows(hoist.array(), (n, 3, NDIMS)),
                        np.ones((n, NDIMS), dtype=np.int64) if unroll is None else unroll,
                        rows(np.array(MappingBatch.default_layout_codes()), (n, 3)), split[0], split[1])
