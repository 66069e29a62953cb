"""MARVEL's on-chip subspace (§3.2) under a fixed level-3 (DRAM) mapping, the candidates
``search.marvel_onchip`` searches: level-2 step orders, level-2 tiles (a step = ``tiles * fanout``:
the parallelism), level-1 tiles (what one PE holds in its L1, double-buffered); their unpruned size,
uniform samples of them, and a lower bound of their compute cycles (:func:`compute_floor`).

Pruning options (:class:`OnChipOptions`, each can be switched off): ``divisors`` (no
prologue/epilogue: level-1 tiles divide level-2 tiles, which divide level-3 tiles), ``unroll_rs``
(one step covers R and S, MARVEL's 5-D nest), ``symmetry`` (on square tiles, skip orders that mirror
a kept one by swapping P,R with Q,S), ``max_parallel`` (dimensions with a fan-out above one),
``min_utilization`` (a step uses at least this fraction of the PEs), ``parallel`` (only these
dimensions may fan out: the fixed-dataflow baselines). A batch of one needs no N loop (its tile is
1). ``bound``: the safe lower-bound pruning of the search (``search.marvel_onchip``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import permutations

import numpy as np

from tileplan.cost.leveldims import nest_stats
from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, Dim


@dataclass(frozen=True)
class OnChipOptions:
    """The pruning switches of the on-chip search (see the module docstring)."""

    divisors: bool = True
    unroll_rs: bool = True
    symmetry: bool = True
    max_parallel: int = 3
    min_utilization: float = 0.1
    parallel: tuple[Dim, ...] | None = None
    bound: bool = True  # the safe lower-bound pruning (see ``marvel_onchip.onchip``)


@lru_cache(maxsize=4096)
def _dim_options(length: int, unrolled: bool, fan: bool, divisors: bool, pes: int) -> np.ndarray:
    """(m, 2) (level-1 tile, fan-out) pairs of one dimension whose level-3 tile is ``length``
    (cached: read-only)."""
    out = []
    for t1 in range(1, length + 1):
        if divisors and length % t1:
            continue
        most = -(-length // t1)
        for f in range(1, min(most, pes) + 1 if fan else 2):
            step = t1 * f
            if divisors and length % step:
                continue
            if unrolled and step < length:
                continue
            out.append((t1, f))
    pairs = np.array(out, dtype=np.int64).reshape(-1, 2)
    pairs.setflags(write=False)
    return pairs


def _fit(problem: Problem, cand: np.ndarray, max_parallel: int) -> np.ndarray:
    """Which (n, 2, 8) level-1 tiles and fan-outs fit L1 (double-buffered when the arch is) and the
    PE array, with at most ``max_parallel`` dimensions fanning out (dimensions not yet chosen hold 1)."""
    arch = problem.arch
    rf = arch.register_file
    factor = 2 if arch.double_buffering else 1
    prec = problem.precision
    stride, dil = problem.stride, problem.dilation
    t, f = cand[:, 0], cand[:, 1]
    rows = ((t[:, Dim.P] - 1) * stride[0] + (t[:, Dim.R] - 1) * dil[0] + 1)
    cols = ((t[:, Dim.Q] - 1) * stride[1] + (t[:, Dim.S] - 1) * dil[1] + 1)
    need_in = t[:, Dim.N] * t[:, Dim.G] * t[:, Dim.C] * rows * cols * prec.input * problem.layer.input_count
    need_w = t[:, Dim.G] * t[:, Dim.K] * t[:, Dim.C] * t[:, Dim.R] * t[:, Dim.S] * prec.weight
    need_o = t[:, Dim.N] * t[:, Dim.G] * t[:, Dim.K] * t[:, Dim.P] * t[:, Dim.Q] * prec.psum
    has = problem.has_operand
    keep = ((need_in * factor <= rf.inputs_bytes) | (not has[0])) & (
        (need_w * factor <= rf.weights_bytes) | (not has[1])) & (need_o * factor <= rf.psums_bytes)
    return np.asarray(keep & (np.prod(f, axis=1) <= arch.total_pes(prec.input))
                      & (np.sum(f > 1, axis=1) <= max_parallel))


def sample_level(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions, rng: np.random.Generator,
                 count: int, *, tries: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random on-chip levels under ``tiles0`` without enumerating them: up to ``count``
    (level-1 tile, fan-out) candidates of ``level_options`` (each dimension's pair drawn uniformly,
    rejected unless the whole fits: uniform over the fitting ones) and up to 8 random step orders
    (random permutations of the dimensions that can take several steps)."""
    pes = problem.arch.total_pes(problem.precision.input)
    t0 = np.minimum(np.array(tiles0), problem.dims)
    pairs = [_dim_options(int(t0[d]), opts.unroll_rs and d in (Dim.R, Dim.S),
                          opts.parallel is None or d in opts.parallel, opts.divisors, pes) for d in DIMS]
    found = np.zeros((0, 2, NDIMS), dtype=np.int64)
    for _ in range(tries):
        cand = np.stack([p[rng.integers(len(p), size=4 * count)] for p in pairs], axis=2)
        cand = cand[_fit(problem, cand, opts.max_parallel)]
        cand = cand[np.prod(cand[:, 1], axis=1) >= opts.min_utilization * pes]
        found = np.concatenate([found, cand])[:count]
        if len(found) == count:
            break
    free = [int(d) for d in DIMS if t0[d] > 1 and not (opts.unroll_rs and d in (Dim.R, Dim.S))]
    fixed = [int(d) for d in DIMS if int(d) not in free]
    orders = np.array([fixed + [int(x) for x in rng.permutation(free)] for _ in range(8)], dtype=np.int64)
    return found, orders.reshape(-1, NDIMS)


@lru_cache(maxsize=4096)
def _dim_steps(length: int, t0: int, unrolled: bool, fan: bool, divisors: bool, pes: int) -> np.ndarray:
    """Compute steps along one dimension (``cost.leveldims`` ``step_max``) of each pair of
    ``_dim_options(t0, ...)`` in a dimension of ``length`` (cached: read-only)."""
    pairs = _dim_options(t0, unrolled, fan, divisors, pes)
    steps = np.array([nest_stats(length, t0, int(t1), int(f)).step_max for t1, f in pairs], dtype=np.float64)
    steps.setflags(write=False)
    return steps


def level_options(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions, *,
                  max_steps: float | None = None) -> np.ndarray:
    """(m, 2, 8) level-1 tiles and fan-outs that fit L1 (double-buffered) and the PE array;
    ``max_steps``: only those whose compute steps (the product over dimensions of the model's
    ``step_max``, order-independent) are at most this many, pruned while the product is built.
    All of :func:`iter_level_options` at once (the chunks concatenated, in the same order)."""
    parts = list(iter_level_options(problem, tiles0, opts, max_steps=max_steps, chunk=1 << 62))
    return np.concatenate(parts) if parts else np.ones((0, 2, NDIMS), dtype=np.int64)


def iter_level_options(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions, *,
                       max_steps: float | Callable[[], float | None] | None = None,
                       chunk: int = 1 << 16) -> Iterator[np.ndarray]:
    """The rows of :func:`level_options` in order, as chunks of at most ``chunk`` rows (nonempty),
    never holding more than about ``chunk`` partial candidates per dimension: the product over
    dimensions is built depth first, a slice of the partial candidates at a time, each extended by
    the next dimension's (level-1 tile, fan-out) pairs and filtered at once (the L1 and PE-array fit
    and the step bound only grow as dimensions are added, so filtering a prefix is safe).
    Memory: about ``NDIMS * chunk`` partial rows (128 B each) whatever the space's size.
    ``max_steps`` (see :func:`level_options`) may be a function, read again for every slice (a cap
    that tightens while the caller searches the chunks)."""
    pes = problem.arch.total_pes(problem.precision.input)
    t0 = np.minimum(np.array(tiles0), problem.dims)
    flags = [(opts.unroll_rs and d in (Dim.R, Dim.S), opts.parallel is None or d in opts.parallel) for d in DIMS]
    pairs = [_dim_options(int(t0[d]), *flags[d], opts.divisors, pes) for d in DIMS]
    dim_steps = [_dim_steps(int(problem.dims[d]), int(t0[d]), *flags[d], opts.divisors, pes) for d in DIMS]
    # the fewest steps the dimensions after each one can take: alone, and with the PEs left (a fan-out
    # f leaves at least length / f steps along a dimension)
    later = np.ones(NDIMS + 1)
    rest = np.ones(NDIMS + 1)
    for d in reversed(DIMS):
        later[d] = later[d + 1] * (dim_steps[d].min() if len(dim_steps[d]) else np.inf)
        rest[d] = rest[d + 1] * float(problem.dims[d])
    least = opts.min_utilization * pes

    def extend(cand: np.ndarray, steps: np.ndarray, d: int) -> Iterator[np.ndarray]:
        if d == NDIMS:
            yield cand[np.prod(cand[:, 1], axis=1) >= least]
            return
        m = len(pairs[d])
        rows = max(1, chunk // max(m, 1))
        for lo in range(0, len(cand), rows):
            part = np.repeat(cand[lo:lo + rows], m, axis=0)
            part[:, :, d] = np.tile(pairs[d], (len(part) // m if m else 0, 1))
            part_steps = np.repeat(steps[lo:lo + rows], m) * np.tile(dim_steps[d], len(steps[lo:lo + rows]))
            keep = _fit(problem, part, opts.max_parallel)
            most = max_steps() if callable(max_steps) else max_steps
            if most is not None:
                fanned = np.prod(part[:, 1], axis=1).astype(np.float64)
                keep &= part_steps * np.maximum(later[d + 1], rest[d + 1] * fanned / pes) <= most
            if keep.any():
                yield from extend(part[keep], part_steps[keep], d + 1)

    out: list[np.ndarray] = []
    held = 0
    for found in extend(np.ones((1, 2, NDIMS), dtype=np.int64), np.ones(1), 0):
        if len(found) == 0:
            continue
        out.append(found)
        held += len(found)
        if held >= chunk:
            whole = np.concatenate(out)
            for lo in range(0, len(whole) - chunk + 1, chunk):
                yield whole[lo:lo + chunk]
            tail = whole[len(whole) - len(whole) % chunk:]
            out, held = ([tail], len(tail)) if len(tail) else ([], 0)
    if held:
        yield np.concatenate(out)


def level_orders(problem: Problem, tiles0: tuple[int, ...], opts: OnChipOptions) -> np.ndarray:
    """(k, 8) step orders: permutations of the dimensions that can take more than one step (N of a
    batch of one and unrolled R, S never do), the others outermost; mirrors dropped on square tiles."""
    t0 = np.minimum(np.array(tiles0), problem.dims)
    free = tuple(int(d) for d in DIMS if t0[d] > 1 and not (opts.unroll_rs and d in (Dim.R, Dim.S)))
    square = bool(t0[Dim.P] == t0[Dim.Q] and t0[Dim.R] == t0[Dim.S] and problem.stride[0] == problem.stride[1]
                  and problem.dilation[0] == problem.dilation[1])
    return _orders(free, opts.symmetry and square)


@lru_cache(maxsize=1024)
def _orders(free: tuple[int, ...], mirror: bool) -> np.ndarray:
    """Step orders with the ``free`` dimensions permuted innermost; ``mirror``: P after Q dropped."""
    fixed = [int(d) for d in DIMS if int(d) not in free]
    out = []
    for perm in permutations(free):
        if mirror and Dim.P in free and Dim.Q in free and perm.index(Dim.P) > perm.index(Dim.Q):
            continue
        out.append(fixed + list(perm))
    orders = np.array(out, dtype=np.int64).reshape(-1, NDIMS)
    orders.setflags(write=False)
    return orders


def unpruned_space(problem: Problem, tiles0: tuple[int, ...]) -> float:
    """Level-1 tiles x level-2 tiles x level-2 orders with no pruning (tiles: any size up to the
    level-3 tile)."""
    t0 = np.minimum(np.array(tiles0), problem.dims)
    return float(np.prod([float(t) * float(t) for t in t0])) * math.factorial(NDIMS)


def compute_floor(problem: Problem, tiles0: np.ndarray, opts: OnChipOptions, *, rows: int = 2048) -> np.ndarray:
    """(k,) a lower bound of the compute cycles of every on-chip level ``opts`` allows under each
    level-3 tiling of ``tiles0`` (k, 8), L1 fit and utilisation bound ignored (dropping constraints
    only lowers the minimum).

    Along a dimension of length ``L`` cut into level-3 tiles of ``t0``, a fan-out ``f`` makes every
    level-3 tile of extent ``e`` take at least ``ceil(e / f)`` compute steps whatever the level-1
    tile (each step's longest child covers at least its share), so the steps are at least
    ``g(f) = (L // t0) ceil(t0 / f) + ceil((L % t0) / f)``; the model's compute time is the product
    over dimensions. The product is minimised over fan-outs (``f <= t0``; ``f`` divides ``t0`` when
    ``opts.divisors``; only ``opts.parallel`` dimensions; at most ``max_parallel`` dimensions above
    one; product at most the PEs) by a dynamic programme over dimensions, state (dimensions that fan
    out, product of the fan-outs)."""
    arch = problem.arch
    pes = arch.total_pes(problem.precision.input)
    most = min(opts.max_parallel, NDIMS)
    out = np.zeros(len(tiles0))
    for lo in range(0, len(tiles0), rows):
        t0_all = np.minimum(np.asarray(tiles0[lo:lo + rows], dtype=np.int64), problem.dims)
        n = len(t0_all)
        value = np.full((n, most + 1, pes + 1), np.inf)
        value[:, 0, 1] = 1.0
        for d in DIMS:
            length = int(problem.dims[d])
            t0 = t0_all[:, d]
            full, rem = length // t0, length % t0
            nxt = value * float(length)
            if opts.parallel is None or d in opts.parallel:
                for f in range(2, min(pes, int(t0.max())) + 1):
                    allowed = (t0 % f == 0) if opts.divisors else (t0 >= f)
                    if not allowed.any():
                        continue
                    g = np.where(allowed, full * -(-t0 // f) + -(-rem // f), np.inf).astype(np.float64)
                    top = pes // f
                    view = nxt[:, 1:, f:f * top + 1:f]
                    np.minimum(view, value[:, :most, 1:top + 1] * g[:, None, None], out=view)
            value = nxt
        out[lo:lo + n] = value.reshape(n, -1).min(axis=1)
    return np.ceil(out * float(problem.op_factor) / arch.pe_array.macs_per_pe_per_cycle)
