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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import product

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.cost.batch import CostBatch
from tileplan.cost.problem import Problem
from tileplan.dims import Dim
from tileplan.fusion.group import FusedGroup, Overlap
from tileplan.fusion.propagate import AxisGeom, AxisTiles, histogram, propagate
from tileplan.search.space import spatial_options


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
        self.rows = propagate(self.row_geoms, tp)
        self.cols = propagate(self.col_geoms, tq)
        self.shape = (len(tp), len(tq))
        self.n = len(tp) * len(tq)
        self._cache: dict[tuple[object, ...], np.ndarray] = {}

    def on_shares(self, archs: Sequence[Arch]) -> GroupModel:
        """This model with layer ``m`` computed on ``archs[m]``: its share of the PE array and register
        file (a resource partition, ``fusion.partition``). Only the compute (unroll options and cycles)
        changes; tile propagation, histograms, DRAM traffic, capacity and energy stay those of
        ``self.arch``, so the shares must differ from it only in ``pe_array`` and ``register_file``."""
        if len(archs) != len(self.layers):
            raise ValueError(f"{len(archs)} shares for a group of {len(self.layers)} layers")
        other = copy.copy(self)
        other.problems = [Problem(layer, a) for layer, a in zip(self.layers, archs, strict=True)]
        other._cache = {k: v for k, v in self._cache.items() if k[0] not in ("unroll", "compute")}
        return other

    def cached(self, key: tuple[object, ...], make: Callable[[], np.ndarray]) -> np.ndarray:
        """``make()`` computed once per ``key`` for this model's candidates."""
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

    @cached_property
    def max_out(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.minimum(self.rows.tiles, self.layers[-1].p), np.minimum(self.cols.tiles, self.layers[-1].q))

    def steps(self, tile_n: int) -> np.ndarray:
        """(n,) tile steps of the shared N/P/Q loops."""
        npos_n = -(-self.layers[-1].n // tile_n)
        return npos_n * np.outer(self.rows.npos, self.cols.npos).reshape(-1)

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
        key = ("unroll", m)
        if key not in self._cache:
            self._cache[key] = spatial_options(self.problems[m], self.layers[m].dim_tuple)
        return self._cache[key]

    def compute_cycles(self, m: int, overlap: Overlap, tile_n: int, c_chunk: int, gk_tile: tuple[int, int],
                       unroll: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(n,) compute cycles of layer ``m`` over all steps and the (n,) index of the unroll option
        used (the fastest per candidate when ``unroll`` is None; -1 when it was given)."""
        key = ("compute", m, overlap is Overlap.RECOMPUTE, tile_n, c_chunk, gk_tile, unroll)
        if key not in self._cache:
            options = self.unroll_options(m) if unroll is None else np.array([unroll], dtype=np.int64)
            kind = "out" if overlap is Overlap.RECOMPUTE else "new"
            hr, hq = self.hist(0, kind, m), self.hist(1, kind, m)
            best = np.full(self.n, np.inf)
            choice = np.zeros(self.n, dtype=np.int64)
            for k, u in enumerate(options):
                cyc = self._cycles_one(m, hr, hq, tile_n, c_chunk, gk_tile, u)
                better = cyc < best
                best = np.where(better, cyc, best)
                choice = np.where(better, k, choice)
            self._cache[key] = np.stack([best, choice if unroll is None else np.full(self.n, -1)])
        value = self._cache[key]
        return value[0], value[1].astype(np.int64)

    def _cycles_one(self, m: int, hr: np.ndarray, hq: np.ndarray, tile_n: int, c_chunk: int, gk_tile: tuple[int, int],
                    u: np.ndarray) -> np.ndarray:
        prob, layer = self.problems[m], self.layers[m]
        d = layer.dims
        flat = prob.flattened_axes
        flat_dims = {x for dims, _ in flat for x in dims}
        e_p = np.arange(hr.shape[1], dtype=np.int64)
        e_q = np.arange(hq.shape[1], dtype=np.int64)
        total = np.zeros(self.n)
        for (en, cn), (eg, cg), (ek, ck), (ec, cc) in product(
                parts(d[Dim.N], tile_n), parts(d[Dim.G], gk_tile[0]), parts(d[Dim.K], gk_tile[1]),
                parts(d[Dim.C], c_chunk)):
            ext = {Dim.N: en, Dim.G: eg, Dim.K: ek, Dim.C: ec, Dim.R: d[Dim.R], Dim.S: d[Dim.S]}
            scal = float(cn * cg * ck * cc)
            for dim, e in ext.items():
                if dim not in flat_dims:
                    scal *= int(_ceil(e, int(u[dim])))
            f_p = _ceil(e_p, int(u[Dim.P])) if Dim.P not in flat_dims else np.ones_like(e_p)
            f_q = _ceil(e_q, int(u[Dim.Q])) if Dim.Q not in flat_dims else np.ones_like(e_q)
            pq_flat = [(dims, lanes) for dims, lanes in flat if Dim.P in dims or Dim.Q in dims]
            if not pq_flat:
                grid = self.sum2(hr, hq, f_p.astype(np.float64), f_q.astype(np.float64))
            else:
                matrix = np.outer(f_p, f_q)
                for dims, lanes in pq_flat:
                    x = int(np.prod([ext[a] for a in dims if a not in (Dim.P, Dim.Q)]))
                    ep = e_p if Dim.P in dims else np.ones_like(e_p)
                    eq = e_q if Dim.Q in dims else np.ones_like(e_q)
                    matrix = matrix * _ceil(np.outer(ep, eq) * x, lanes)
                grid = self.grid(hr, hq, matrix)
            for dims, lanes in flat:
                if Dim.P not in dims and Dim.Q not in dims:
                    scal *= int(_ceil(int(np.prod([ext[a] for a in dims])), lanes))
            total += scal * grid
        return np.ceil(total * prob.op_factor / self.arch.pe_array.macs_per_pe_per_cycle)
