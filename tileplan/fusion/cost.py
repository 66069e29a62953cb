"""Costs of fused groups, in the one model's terms (``CostBatch``), vectorised over every pair of
tile sizes (tile_p, tile_q) of the last layer's output.

The reload rule of the single-layer model applied to the fused loop nest: the first layer's input
tile (with its halo, or only its new part with reuse buffers) is loaded once per tile step; a
resident layer's weights once per group, a streamed layer's once per step (in pieces); the last
layer's output tile is written once; intermediate maps never touch DRAM. Every per-position sum
(pixels computed, bytes, bursts, compute steps) is a sum over the cartesian grid of row and column
positions, so it is ``H_rows @ F @ H_cols.T`` with ``H`` the extent histograms of
``fusion.propagate`` and ``F`` the per-extent quantity. A group of one layer with resident weights is
exactly the single-layer model of the mapping with the same tiles (tests).

On-chip capacity: per layer the input window (Eq. 1), all resident weights or a streamed piece, the
last layer's output tile (Eq. 5), plus the reuse buffers of Eq. 8 (``reuse``) or 8 + 9 (``alwani``).
The first layer's input, the weights and the last output are double-buffered when the arch is.
Intermediate maps and reuse buffers live in the memory that holds inputs.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Any, TypeVar, cast

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch
from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.fusion.block import max_extent, propagate_block, x_extents
from tileplan.fusion.group import FusedGroup, Overlap
from tileplan.fusion.propagate import AxisGeom, AxisTiles, histogram, propagate
from tileplan.search.memo import capacity_free_key, memo
from tileplan.search.space import spatial_options

T = TypeVar("T")

#: Cache keys (first element) whose values depend on a layer's share of the PE array and register
#: file (``GroupModel.on_shares``); their second element is the layer index.
_SHARE_KEYS = frozenset({"unroll", "compute", "scal", "min_compute"})


def parts(length: int, tile: int) -> list[tuple[int, int]]:
    """(extent, count) of the tiles of ``length`` cut by ``tile`` (a full size and a remainder)."""
    t = min(tile, length)
    out = [(t, length // t)]
    if length % t:
        out.append((length % t, 1))
    return out


def _ceil(a: np.ndarray | int, b: int) -> np.ndarray:
    return -(-np.asarray(a, dtype=np.int64) // b)


def box_bursts(sizes: tuple[int, int, int, int], n_e: int, c_e: int, elem_bytes: int, burst: int) -> np.ndarray:
    """(H+1, W+1) bursts of a (n_e, c_e, r, c) box of a row-major (N, C, H, W) tensor, for every row
    extent r and column extent c: a contiguous run grows outwards while the box spans whole
    dimensions, and each run costs ``ceil(run_bytes / burst)``."""
    _, chans, height, width = sizes
    r = np.arange(height + 1, dtype=np.int64)[:, None]
    c = np.arange(width + 1, dtype=np.int64)[None, :]
    partial_cols = n_e * c_e * r * _ceil(c * elem_bytes, burst)
    rows_run = n_e * c_e * _ceil(r * width * elem_bytes, burst)
    chan_run = n_e * _ceil(c_e * height * width * elem_bytes, burst)
    whole = _ceil(n_e * chans * height * width * elem_bytes, burst)
    full_c = np.broadcast_to(c == width, (height + 1, width + 1))
    full_r = np.broadcast_to(r == height, (height + 1, width + 1))
    return np.where(~full_c, partial_cols, np.where(~full_r, rows_run, np.where(c_e < chans, chan_run, whole)))


@dataclass
class FusedCost:
    """Costs of fused mappings: the ``CostBatch`` (``macs`` = useful MACs of the group) plus the MACs
    actually executed (recomputation included) and the reuse-buffer bytes, arrays of shape (n,)."""

    cost: CostBatch
    executed_macs: np.ndarray
    reuse_bytes: np.ndarray
    direction: np.ndarray  # 0 = rows, 1 = cols (the one with the smaller reuse buffer when not given)


class Selection:
    """The candidates one assembly covers: all of ``gm``'s (``index`` None) or the ascending subset
    ``index`` of them (row-major over tile_p x tile_q), so that pruned candidates cost nothing. Values
    on a subset are exactly the full ones taken at ``index``."""

    def __init__(self, gm: GroupModel, index: np.ndarray | None = None) -> None:
        self.gm = gm
        self.index = None if index is None else np.asarray(index, dtype=np.int64)
        if self.index is None:
            self.n = gm.n
            self.ip = self.iq = np.zeros(0, dtype=np.int64)
        else:
            self.n = len(self.index)
            self.ip, self.iq = np.divmod(self.index, gm.shape[1])

    def take(self, full: np.ndarray) -> np.ndarray:
        """A per-candidate (n, ...) array of the whole model restricted to this selection."""
        return full if self.index is None else full[self.index]

    def pair(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per-tile_p ``a`` times per-tile_q ``b`` on this selection (``GroupModel.pair``)."""
        return self.gm.pair(a, b) if self.index is None else a[self.ip] * b[self.iq]

    def steps(self, tile_n: int) -> np.ndarray:
        """Tile steps of the shared N/P/Q loops (``GroupModel.steps``)."""
        return -(-self.gm.layers[-1].n // tile_n) * self.take(self.gm.step_grid())


class GroupModel:
    """A fused group compiled against an accelerator for candidate tile sizes ``tiles_p`` x ``tiles_q``
    of the last layer's output (default: every size). Candidates are the pairs, row-major."""

    def __init__(self, group: FusedGroup, arch: Arch, tiles_p: np.ndarray | None = None,
                 tiles_q: np.ndarray | None = None) -> None:
        self.group = group
        self.arch = arch
        self.problems = [Problem(layer, arch) for layer in group.layers]
        self.layers = [p.layer for p in self.problems]
        last = self.layers[-1]
        tp = np.arange(1, last.p + 1) if tiles_p is None else np.asarray(tiles_p, dtype=np.int64)
        tq = np.arange(1, last.q + 1) if tiles_q is None else np.asarray(tiles_q, dtype=np.int64)
        self.row_geoms = [AxisGeom(x.h, x.p, x.stride[0], x.dilation[0], x.r, x.pad[0]) for x in self.layers]
        self.col_geoms = [AxisGeom(x.w, x.q, x.stride[1], x.dilation[1], x.s, x.pad[2]) for x in self.layers]
        if group.is_block:  # branches and joins: windows are hulls over each tensor's readers
            self.rows: AxisTiles = propagate_block(group, self.row_geoms, tp)
            self.cols: AxisTiles = propagate_block(group, self.col_geoms, tq)
        else:
            self.rows = propagate(self.row_geoms, tp)
            self.cols = propagate(self.col_geoms, tq)
        self.shape = (len(tp), len(tq))
        self.n = len(tp) * len(tq)
        self._cache: dict[tuple[object, ...], np.ndarray] = {}
        self._memo: dict[tuple[object, ...], Any] = {}
        #: Per layer, its share of the PE array and register file as text (``None``: ``arch``'s own).
        self._shares: list[str | None] = [None] * len(self.layers)

    def _key(self, key: tuple[object, ...]) -> tuple[object, ...]:
        """``key``, extended by layer ``key[1]``'s PE array and register file when its value depends
        on them (``_SHARE_KEYS``): models of one group on different resource partitions then share
        one cache, and a layer's compute on a given sub-array is computed once for all partitions."""
        if key[0] not in _SHARE_KEYS:
            return key
        return (*key, self._shares[cast(int, key[1])])

    def memo(self, key: tuple[object, ...], make: Callable[[], T]) -> T:
        """``make()`` (a scalar or small value) computed once per ``key`` for this model."""
        key = self._key(key)
        if key not in self._memo:
            self._memo[key] = make()
        return cast(T, self._memo[key])

    def on_shares(self, archs: Sequence[Arch]) -> GroupModel:
        """This model with layer ``m`` computed on ``archs[m]``: its share of the PE array and register
        file (a resource partition, ``fusion.partition``). Only the compute (unroll options and cycles)
        changes; tile propagation, histograms, DRAM traffic, capacity and energy stay those of
        ``self.arch``, so the shares must differ from it only in ``pe_array`` and ``register_file``.
        The caches are shared with ``self`` (compute entries are keyed by the share: ``_key``)."""
        if len(archs) != len(self.layers):
            raise ValueError(f"{len(archs)} shares for a group of {len(self.layers)} layers")
        other = copy.copy(self)
        other.problems = [Problem(layer, a) for layer, a in zip(self.layers, archs, strict=True)]
        other._shares = [repr(a.pe_array) + repr(a.register_file) for a in archs]
        return other

    def at_capacity(self, group: FusedGroup, arch: Arch) -> GroupModel:
        """This model for ``group`` (the same signature: layer shapes and DRAM side inputs) on
        ``arch``, which may differ from ``self.arch`` only in its memories' sizes (and name):
        everything memoised is shared, since
        nothing this model computes reads the capacity (only ``assemble.fits`` and the search's
        feasibility test do, on the returned model's ``problems``)."""
        other = copy.copy(self)
        other.group = group
        other.arch = arch
        other.problems = [Problem(layer, arch) for layer in group.layers]
        other.layers = [p.layer for p in other.problems]
        return other

    def cached(self, key: tuple[object, ...], make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()`` computed once per ``key`` for this model's candidates."""
        key = self._key(key)
        if key not in self._cache:
            self._cache[key] = np.asarray(make(), dtype=np.float64)
        return self._cache[key]

    # ----------------------------------------------------------------- per-axis histograms
    def hist(self, axis: int, kind: str, m: int) -> np.ndarray:
        key = ("hist", axis, kind, m)
        if key not in self._cache:
            ax: AxisTiles = self.rows if axis == 0 else self.cols
            layer = self.layers[m]
            out_size = layer.p if axis == 0 else layer.q
            in_size = layer.h if axis == 0 else layer.w
            if kind == "out":
                ext, size = ax.out_hi[m] - ax.out_lo[m], out_size
            elif kind == "new":
                ext, size = ax.out_hi[m] - ax.new_lo[m], out_size
            elif kind == "in":
                ext, size = ax.in_hi[m] - ax.in_lo[m], in_size
            elif kind == "x":  # the group's input tensor (a block group: the hull of its readers' windows)
                ext, size = x_extents(ax), in_size
            elif kind == "newin":
                ext, size = ax.newin_hi[m] - ax.newin_lo[m], in_size
            else:  # "fetch": the new part of the input window (what DRAM delivers with reuse buffers)
                ext, size = ax.in_hi[m] - ax.new_in_lo(m), in_size
            self._cache[key] = histogram(ext, ax.valid, size).astype(np.float64)
        return self._cache[key]

    def sum2(self, hr: np.ndarray, hq: np.ndarray, fr: np.ndarray, fq: np.ndarray) -> np.ndarray:
        """(n,) grid sums of a separable quantity ``fr[row extent] * fq[col extent]``."""
        return np.outer(hr @ fr, hq @ fq).reshape(-1)

    def grid(self, hr: np.ndarray, hq: np.ndarray, matrix: np.ndarray) -> np.ndarray:
        """(n,) grid sums of ``matrix[row extent, col extent]``."""
        return (hr @ matrix.astype(np.float64) @ hq.T).reshape(-1)

    @cached_property
    def max_in(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per layer: largest input window rows (per tile_p) and columns (per tile_q)."""
        out = []
        for m in range(len(self.layers)):
            rows = np.max(np.where(self.rows.valid, self.rows.in_hi[m] - self.rows.in_lo[m], 0), axis=1)
            cols = np.max(np.where(self.cols.valid, self.cols.in_hi[m] - self.cols.in_lo[m], 0), axis=1)
            out.append((rows, cols))
        return out

    def input_kind(self, reuse: bool) -> str:
        """The ``hist`` kind of what DRAM delivers of the group's input per step: its window (``in``;
        of a block group the hull of its readers', ``x``) or, with reuse buffers, the window's new part."""
        return "x" if self.group.is_block else "fetch" if reuse else "in"

    def input_area(self) -> np.ndarray:
        """(n,) rows x columns of the group input's largest window (a chain: ``window_area(0)``)."""
        if not self.group.is_block:
            return self.window_area(0)
        return self.cached(("x_area",), lambda: self.pair(max_extent(self.rows, x_extents(self.rows)),
                                                          max_extent(self.cols, x_extents(self.cols))))

    def out_window_area(self, m: int) -> np.ndarray:
        """(n,) rows x columns of layer ``m``'s largest output window (a block group's on-chip tensor)."""
        return self.cached(("out_window", m), lambda: self.pair(
            max_extent(self.rows, self.rows.out_hi[m] - self.rows.out_lo[m]),
            max_extent(self.cols, self.cols.out_hi[m] - self.cols.out_lo[m])))

    @cached_property
    def max_out(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.minimum(self.rows.tiles, self.layers[-1].p), np.minimum(self.cols.tiles, self.layers[-1].q))

    def steps(self, tile_n: int) -> np.ndarray:
        """(n,) tile steps of the shared N/P/Q loops."""
        npos_n = -(-self.layers[-1].n // tile_n)
        return npos_n * np.outer(self.rows.npos, self.cols.npos).reshape(-1)

    # ----------------------------------------------------------------- cached per-candidate bases
    # Everything below is a full (n,) array computed once per model and shared by every choice of
    # the discrete parameters; ``assemble`` scales them by scalars on the candidates it covers.
    def step_grid(self) -> np.ndarray:
        """(n,) tile steps of the shared P/Q loops (times the N steps: :meth:`steps`)."""
        return self.cached(("step_grid",), lambda: np.outer(self.rows.npos, self.cols.npos).reshape(-1))

    def window_area(self, m: int) -> np.ndarray:
        """(n,) rows x columns of layer ``m``'s largest input window (Eq. 4)."""
        return self.cached(("window", m), lambda: self.pair(*self.max_in[m]))

    def out_area(self) -> np.ndarray:
        """(n,) rows x columns of the last layer's output tile."""
        return self.cached(("out_area",), lambda: self.pair(*self.max_out))

    def volume(self, kind: str, m: int) -> np.ndarray:
        """(n,) sum over all tile steps of the row extent x column extent of layer ``m``'s ``kind``
        intervals (``hist`` kinds): pixels per channel and image, summed over the steps."""
        def make() -> np.ndarray:
            hr, hq = self.hist(0, kind, m), self.hist(1, kind, m)
            return self.sum2(hr, hq, self.ext(hr), self.ext(hq))
        return self.cached(("volume", kind, m), make)

    def rows_geom(self, m: int) -> AxisGeom:
        return self.row_geoms[m]

    def cols_geom(self, m: int) -> AxisGeom:
        return self.col_geoms[m]

    @staticmethod
    def ext(hist: np.ndarray) -> np.ndarray:
        """Extent values 0..size matching a histogram's columns."""
        return np.arange(hist.shape[1], dtype=np.float64)

    def pair(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(n,) candidate values of a per-tile_p quantity times a per-tile_q one."""
        return np.outer(a, b).reshape(-1)

    # ----------------------------------------------------------------- compute
    def unroll_options(self, m: int) -> np.ndarray:
        key = self._key(("unroll", m))
        if key not in self._cache:
            self._cache[key] = spatial_options(self.problems[m], self.layers[m].dim_tuple)
        return self._cache[key]

    def compute_cycles(self, m: int, overlap: Overlap, tile_n: int, c_chunk: int, gk_tile: tuple[int, int],
                       unroll: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(n,) compute cycles of layer ``m`` over all steps and the (n,) index of the unroll option
        used (the fastest per candidate when ``unroll`` is None; -1 when it was given)."""
        key = self._key(("compute", m, overlap is Overlap.RECOMPUTE, tile_n, c_chunk, gk_tile, unroll))
        if key not in self._memo:
            options = self.unroll_options(m) if unroll is None else np.array([unroll], dtype=np.int64)
            kind = "out" if overlap is Overlap.RECOMPUTE else "new"
            best = np.full(self.n, np.inf)
            choice = np.zeros(self.n, dtype=np.int64)
            for k, u in enumerate(options):
                cyc = self._cycles_one(m, kind, tile_n, c_chunk, gk_tile, u)
                better = cyc < best
                best = np.where(better, cyc, best)
                choice = np.where(better, k, choice)
            self._memo[key] = (best, choice if unroll is None else np.full(self.n, -1, dtype=np.int64))
        value: tuple[np.ndarray, np.ndarray] = self._memo[key]
        return value

    def min_compute_cycles(self, m: int, overlap: Overlap, tile_n: int, c_chunk: int, gk_tile: tuple[int, int]
                           ) -> float:
        """The smallest of ``compute_cycles(...)[0]`` over all candidates, exactly, without building
        that array when no flattened axis mixes P or Q with other dims: per unroll the cycles are
        ``ceil(s * grid * op / macs)`` with a scalar ``s`` and a P/Q ``grid`` shared by many keys,
        non-decreasing in the grid value, so their minimum is taken at the grid's minimum."""
        key = self._key(("compute", m, overlap is Overlap.RECOMPUTE, tile_n, c_chunk, gk_tile, None))
        kind = "out" if overlap is Overlap.RECOMPUTE else "new"
        prob = self.problems[m]
        if key in self._memo or any(Dim.P in dims or Dim.Q in dims for dims, _ in prob.flattened_axes):
            return float(np.min(self.compute_cycles(m, overlap, tile_n, c_chunk, gk_tile)[0]))
        best = np.inf
        for u in self.unroll_options(m):
            scal = self._scal(m, tile_n, c_chunk, gk_tile, u)
            low = float(np.min(self._pq_grid(m, kind, int(u[Dim.P]), int(u[Dim.Q]))))
            best = min(best, float(np.ceil(scal * low * prob.op_factor / self.arch.pe_array.macs_per_pe_per_cycle)))
        return best

    def _pq_grid(self, m: int, kind: str, up: int, uq: int) -> np.ndarray:
        """(n,) P/Q spatial steps of layer ``m`` (unroll ``up`` x ``uq``) summed over the tile positions."""
        def make() -> np.ndarray:
            hr, hq = self.hist(0, kind, m), self.hist(1, kind, m)
            e_p = np.arange(hr.shape[1], dtype=np.int64)
            e_q = np.arange(hq.shape[1], dtype=np.int64)
            return self.sum2(hr, hq, _ceil(e_p, up).astype(np.float64), _ceil(e_q, uq).astype(np.float64))
        return self.cached(("pq_grid", m, kind, up, uq), make)

    def _parts(self, m: int, tile_n: int, c_chunk: int, gk_tile: tuple[int, int]
               ) -> list[tuple[dict[Dim, int], float]]:
        """(extents, count) of every part of layer ``m``'s N/G/K/C tiles."""
        d = self.layers[m].dims
        out = []
        for (en, cn), (eg, cg), (ek, ck), (ec, cc) in product(
                parts(d[Dim.N], tile_n), parts(d[Dim.G], gk_tile[0]), parts(d[Dim.K], gk_tile[1]),
                parts(d[Dim.C], c_chunk)):
            out.append(({Dim.N: en, Dim.G: eg, Dim.K: ek, Dim.C: ec, Dim.R: d[Dim.R], Dim.S: d[Dim.S]},
                        float(cn * cg * ck * cc)))
        return out

    def _part_steps(self, m: int, ext: dict[Dim, int], count: float, u: np.ndarray) -> float:
        """Spatial steps of one part over every dim but P and Q (unrolled and flattened axes) times
        its count."""
        flat = self.problems[m].flattened_axes
        flat_dims = {x for dims, _ in flat for x in dims}
        scal = count
        for dim, e in ext.items():
            if dim not in flat_dims:
                scal *= -(-e // int(u[dim]))
        for dims, lanes in flat:
            if Dim.P not in dims and Dim.Q not in dims:
                scal *= -(-math.prod(ext[a] for a in dims) // lanes)
        return scal

    def _scal(self, m: int, tile_n: int, c_chunk: int, gk_tile: tuple[int, int], u: np.ndarray) -> float:
        """Sum over the parts of :meth:`_part_steps` (integer-valued)."""
        return self.memo(("scal", m, tile_n, c_chunk, gk_tile, u.tobytes()), lambda: float(sum(
            self._part_steps(m, ext, count, u) for ext, count in self._parts(m, tile_n, c_chunk, gk_tile))))

    def _cycles_one(self, m: int, kind: str, tile_n: int, c_chunk: int, gk_tile: tuple[int, int],
                    u: np.ndarray) -> np.ndarray:
        """(n,) compute cycles of layer ``m`` with unroll ``u``: per part of the N/G/K/C tiles, the
        spatial steps of its extents times the P/Q steps summed over the tile positions. Unless a
        flattened axis mixes P or Q with other dims, the P/Q sum (``_pq_grid``, shared by every key
        with the same P and Q factors) is common to all parts and is multiplied once by their sum
        (integer-valued floats: the same value as adding the parts one by one)."""
        prob = self.problems[m]
        flat = prob.flattened_axes
        flat_dims = {x for dims, _ in flat for x in dims}
        pq_flat = [(dims, lanes) for dims, lanes in flat if Dim.P in dims or Dim.Q in dims]
        if not pq_flat:
            total = self._scal(m, tile_n, c_chunk, gk_tile, u) * self._pq_grid(m, kind, int(u[Dim.P]), int(u[Dim.Q]))
        else:
            hr, hq = self.hist(0, kind, m), self.hist(1, kind, m)
            e_p = np.arange(hr.shape[1], dtype=np.int64)
            e_q = np.arange(hq.shape[1], dtype=np.int64)
            total = np.zeros(self.n)
            for ext, count in self._parts(m, tile_n, c_chunk, gk_tile):
                f_p = _ceil(e_p, int(u[Dim.P])) if Dim.P not in flat_dims else np.ones_like(e_p)
                f_q = _ceil(e_q, int(u[Dim.Q])) if Dim.Q not in flat_dims else np.ones_like(e_q)
                matrix = np.outer(f_p, f_q)
                for dims, lanes in pq_flat:
                    x = int(np.prod([ext[a] for a in dims if a not in (Dim.P, Dim.Q)]))
                    ep = e_p if Dim.P in dims else np.ones_like(e_p)
                    eq = e_q if Dim.Q in dims else np.ones_like(e_q)
                    matrix = matrix * _ceil(np.outer(ep, eq) * x, lanes)
                total += self._part_steps(m, ext, count, u) * self.grid(hr, hq, matrix)
        return np.ceil(total * prob.op_factor / self.arch.pe_array.macs_per_pe_per_cycle)


def shared_model(group: FusedGroup, arch: Arch) -> GroupModel:
    """A ``GroupModel`` of ``group`` on ``arch`` over every tile size, sharing what it memoises with
    every earlier one of the same layer shapes on the same accelerator at any on-chip capacity
    (``search.memo``; ``GroupModel.at_capacity``). Its costs are those of a fresh model."""
    key = ("group_model", group.signature(), capacity_free_key(arch))
    return memo(key, lambda: GroupModel(group, arch)).at_capacity(group, arch)
