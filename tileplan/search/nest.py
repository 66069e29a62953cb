"""e-PlaNNer's tiled loop nest (thesis Fig. 5.1) as a restriction of the one model's ``Mapping``.

The thesis tiles six loops, ``kw kh ow oh ic oc`` (in the order of its Alg. 1 and 3). Its three
levels map onto a mapping as follows: the *off-chip* nest is the mapping's tile sizes and loop order
(what the cost model prices); the *on-chip* and *parallelization* nests are the spatial unrolling of
the PE-mapped loops (``pe_mapping`` of the JSON configuration is the arch's PE-array axes), whose
``ceil(t / pe_len)`` steps per tile are the model's compute cycles (Eq. 6.8-6.9). The thesis's OC
loop is the output-channel dimension K, or the group dimension G of a layer without channels per
group (pooling, depthwise); the batch (and G beside K) are not tiled: tile 1, outermost.

A :class:`Nest` turns ``(n, 6)`` thesis tilings into the model's arrays and costs them; it never
computes a cost itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from tileplan.cost.batch import CostBatch, MappingBatch
from tileplan.cost.fit import fits
from tileplan.cost.model import evaluate, finish, sweep
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, Dim
from tileplan.mapping import Mapping
from tileplan.search.exhaustive import best_unroll, to_mapping
from tileplan.search.space import spatial_options

#: The thesis's loops in the order of Alg. 1 and Alg. 3 (Alg. 3: the front is the innermost loop).
LOOPS: tuple[str, ...] = ("kw", "kh", "ow", "oh", "ic", "oc")
KW, KH, OW, OH, IC, OC = range(6)
NO_SPLIT: tuple[tuple[int, ...], tuple[int, ...]] = ((1,) * NDIMS, (1,) * NDIMS)


@dataclass(frozen=True)
class Nest:
    """The thesis's loop nest of one layer: which model dimension each loop is, its extent, and the
    PE-array length of the loops the accelerator maps onto its PEs (``pe_len``, Fig. 6.1)."""

    problem: Problem
    dims: tuple[Dim, ...]  # model dimension of each of LOOPS
    extent: np.ndarray  # (6,) loop bounds
    pe_len: dict[int, int]  # loop index -> PE-array length along it
    outer: tuple[Dim, ...]  # model dimensions outside the nest (tile 1, outermost)

    @classmethod
    def of(cls, problem: Problem) -> Nest:
        d = problem.dims
        oc = Dim.G if d[Dim.K] == 1 and d[Dim.G] > 1 else Dim.K
        dims = (Dim.S, Dim.R, Dim.Q, Dim.P, Dim.C, oc)
        extent = np.array([int(d[x]) for x in dims], dtype=np.int64)
        pe_len: dict[int, int] = {}
        for axis, lanes in zip(problem.arch.pe_array.axes, problem.lanes, strict=True):
            # Alg. 1 lines 4-8: the first loop of each mapping entry that the layer actually has.
            for dim in axis.dim_ids:
                if dim in dims and dims.index(dim) not in pe_len and extent[dims.index(dim)] > 1:
                    pe_len[dims.index(dim)] = lanes
                    break
        outer = tuple(x for x in DIMS if x not in dims)
        return cls(problem, dims, extent, pe_len, outer)

    # ----------------------------------------------------------------- candidate tile values
    def values(self, loop: int, low: int = 1) -> np.ndarray:
        """Tile sizes of ``loop`` at or above ``low``: multiples of ``pe_len`` (and the full extent)
        for PE-mapped loops, as Eq. 6.9 asks; every size for the others. Lists longer than 64 keep
        the smallest size of every trip count."""
        ext = int(self.extent[loop])
        low = min(max(low, 1), ext)
        step = self.pe_len.get(loop, 1)
        vals = np.array(sorted(set(range(step, ext + 1, step)) | {ext, low}), dtype=np.int64)
        vals = vals[vals >= low]
        if len(vals) > 64:
            # The smallest size of each trip count: same reloads and (sizes in PE multiples) the same
            # compute steps in the least memory -- a prune beyond the thesis for long loops (FC layers).
            trips = -(-ext // vals)
            vals = vals[np.unique(trips, return_index=True)[1]]
        return np.sort(vals)

    def grid(self, low: np.ndarray, free: tuple[int, ...] = (OC, IC, OH)) -> np.ndarray:
        """(n, 6) tilings: every combination of :meth:`values` above ``low`` for the ``free`` loops,
        the other loops at ``low``."""
        axes = [self.values(i, int(low[i])) if i in free else np.array([low[i]]) for i in range(6)]
        mesh = np.meshgrid(*axes, indexing="ij")
        return np.stack([m.ravel() for m in mesh], axis=1).astype(np.int64)

    def grid_size(self, low: np.ndarray, free: tuple[int, ...] = (OC, IC, OH)) -> int:
        return int(np.prod([len(self.values(i, int(low[i]))) for i in free]))

    # ----------------------------------------------------------------- to the model
    def trips(self, t6: np.ndarray) -> np.ndarray:
        """(n, 6) iteration counts ``ceil(extent / tile)`` of the off-chip loops."""
        return -(-self.extent[None, :] // np.minimum(t6, self.extent[None, :]))

    def tiles(self, t6: np.ndarray) -> np.ndarray:
        """(n, 8) model tile sizes (dimensions outside the nest at 1)."""
        out = np.ones((len(t6), NDIMS), dtype=np.int64)
        for i, d in enumerate(self.dims):
            out[:, d] = t6[:, i]
        return out

    def order_alg3(self, t6: np.ndarray, innermost: int | None = None) -> np.ndarray:
        """(n, 8) loop orders, outermost first, by Alg. 3: ``[kw, kh, ow, oh, ic, oc]`` (front =
        innermost) stably sorted by descending iteration count; ``innermost`` forces one loop to the
        innermost place first (a baseline's fixed dataflow). Dimensions outside the nest go outside."""
        key = -self.trips(t6)
        if innermost is not None:
            key[:, innermost] = np.iinfo(np.int64).min
        inner_first = np.argsort(key, axis=1, kind="stable")
        dims = np.array([int(d) for d in self.dims], dtype=np.int64)
        nest_order = dims[inner_first[:, ::-1]]
        outer = np.broadcast_to(np.array([int(d) for d in self.outer], dtype=np.int64), (len(t6), len(self.outer)))
        return np.concatenate([outer, nest_order], axis=1)

    def batch(self, t6: np.ndarray, orders: np.ndarray) -> MappingBatch:
        """The mappings of tilings ``t6`` with loop ``orders``, each with its fastest PE unrolling."""
        problem = self.problem
        cached = problem.__dict__.get("_nest_unroll")
        if cached is None:
            grid = problem.core_grid(*NO_SPLIT)
            cached = problem.__dict__["_nest_unroll"] = (grid, spatial_options(problem, grid.max_length))
        grid, options = cached
        tiles = self.tiles(t6)
        unroll = best_unroll(problem, grid, tiles, options)
        n = len(tiles)
        return MappingBatch(tiles, np.asarray(orders, dtype=np.int64), np.zeros((n, 3, NDIMS), dtype=bool), unroll,
                            np.broadcast_to(np.array(MappingBatch.default_layout_codes()), (n, 3)).copy(),
                            NO_SPLIT[0], NO_SPLIT[1])

    def costs(self, batch: MappingBatch, *orders: np.ndarray) -> list[CostBatch]:
        """Costs of ``batch`` under its own order, or under each of ``orders`` (one sweep)."""
        sw = sweep(self.problem, batch)
        return [finish(sw, o) for o in (orders or (batch.order,))]

    def evaluate(self, batch: MappingBatch) -> CostBatch:
        """Costs of ``batch`` (each row under its own loop order)."""
        return evaluate(self.problem, batch)

    def mapping(self, batch: MappingBatch, i: int) -> Mapping:
        return to_mapping(self.problem, batch.tiles[i], batch.order[i], batch.unroll[i], NO_SPLIT)

    def fits(self, t6: np.ndarray) -> np.ndarray:
        """Whether each tiling's tiles fit every on-chip memory (the model's footprint rule on one
        core, without a sweep: tests/test_eplanner.py checks it equals the sweep's feasibility)."""
        return fits(self.problem, self.tiles(t6))

    def relaxed_start(self, t6: np.ndarray) -> np.ndarray:
        """``t6`` if it fits, else the first of a few smaller fallbacks that fits (beyond the thesis,
        whose memories always hold a full-width row): narrower OW, then 1-wide kernels, then 1s."""
        base = t6.copy()
        if self.fits(base[None])[0]:
            return base
        tries = []
        for w in self.values(OW)[::-1]:
            t = base.copy()
            t[OW] = w
            tries.append(t)
        for kh, kw in product((int(base[KH]), 1), (int(base[KW]), 1)):
            t = base.copy()
            t[OW], t[KH], t[KW] = 1, kh, kw
            tries.append(t)
        ones = np.ones(6, dtype=np.int64)
        tries.append(ones)
        arr = np.stack(tries)
        ok = self.fits(arr)
        return arr[int(np.argmax(ok))] if ok.any() else ones
