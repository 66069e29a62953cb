"""Costs and search of fused attention and MLP blocks (``fusion.transformer``), in the one model's terms.

The fused nest (FLAT / FlashAttention-like, with a *row-wise* softmax: a row tile holds whole rows
of scores; no online rescaling)::

    for g in G:                                  # K/V group (attention) or the one group (MLP)
        load every resident B of g               # K_g, V_g, or the MLP weights: once
        for n in N: for each tile of T rows:
            load A[n, g, rows]                   # Q rows / token rows, all k1 columns
            attention: for each chunk of c keys: [load K_g chunk]  S[:, chunk] = A . K_chunk^T
                       softmax of the T whole rows of S, on chip
                       for each chunk of c keys: [load V_g chunk]  O += P[:, chunk] . V_chunk
            mlp:       for each chunk of c of the ff columns: [load the up (and gate) chunks]
                       H = act(A . W_up chunk) (x A . W_gate chunk); [load W_down chunk]; O += H . W_down chunk
            store O[n, g, rows]

With ``online`` (attention, the FlashAttention form) each chunk of c keys is scored, normalised
against each row's running max and exp-sum and multiplied by its V chunk at once; the output tile is
rescaled per chunk and divided by the sums at the end, so only T x c scores are on chip.

The middle tensor (scores / probabilities, the MLP's hidden activations) never touches DRAM. A
``FusedMapping`` of a block: ``tile_p`` = T rows, ``chunk`` = c for every middle map, ``resident``
per layer (a matmul's B kept for the whole group or streamed in chunks every row tile), ``unroll``
per layer, ``online``; ``tile_n = tile_q = 1``, ``tile_k`` = the last layer's channels, recompute, rows.

DRAM: A and O once (bursts from the boxes in the (N, C, H, W) row-major tensors, as the fused
executor counts them); a resident B once per group, a streamed one once per row tile of each (n, g).
On chip: the A tile, the O tile (partial sums), each B (whole or its chunk) double-buffered when
the arch is; the middle held once: T x W scores (attention: whole rows) or T x c per first matmul
(MLP). Compute: each layer's cycles from the single-layer unroll model (``GroupModel.compute_cycles``)
for the (G, K) tile and input-channel chunk it computes at a time. Energy and latency: as every
fused group (``assemble._finish``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from tileplan.arch.spec import Arch
from tileplan.dims import Dim, Operand
from tileplan.errors import MappingError
from tileplan.fusion.assemble import _finish, fits
from tileplan.fusion.cost import FusedCost, GroupModel, parts
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.transformer import (
    TransformerKind,
    TransformerShape,
    canonical_layers,
    matmul_layers,
    transformer_mapping_error,
)
from tileplan.search.memo import capacity_free_key, memo
from tileplan.search.objective import Objective, best_index

_IN, _W, _OUT = Operand.INPUT, Operand.WEIGHT, Operand.OUTPUT
#: Row tiles searched: powers of two, the whole rows and every ceil(M / k) for k up to this.
ROW_SPLITS = 32


def _shape(group: FusedGroup) -> TransformerShape:
    shape = group.transformer
    if shape is None:
        raise MappingError(f"{group.name} is not an attention or MLP block")
    return shape


def row_tiles(rows: int) -> np.ndarray:
    """Candidate row tiles T of a block with ``rows`` rows per (n, g) (see ``ROW_SPLITS``)."""
    tiles = {rows} | {1 << i for i in range(rows.bit_length()) if 1 << i < rows}
    tiles |= {-(-rows // k) for k in range(1, ROW_SPLITS + 1)}
    return np.array(sorted(tiles), dtype=np.int64)


def chunk_choices(shape: TransformerShape) -> list[int]:
    """Middle chunks c: the whole width, then powers of two below it (largest first)."""
    out, p = [shape.width], 1
    while p < shape.width:
        out.insert(1, p)
        p *= 2
    return out


def _cb(nbytes: np.ndarray | float, burst: int) -> np.ndarray:
    return -(-np.asarray(nbytes, dtype=np.float64) // burst)


class TransformerModel:
    """A block compiled against an accelerator for candidate row tiles ``tiles`` (default
    ``row_tiles``); its compute comes from a ``GroupModel`` of the same layers."""

    def __init__(self, group: FusedGroup, arch: Arch, tiles: np.ndarray | None = None) -> None:
        self.shape = _shape(group)
        self.tiles = row_tiles(self.shape.rows) if tiles is None else np.asarray(tiles, dtype=np.int64)
        # An ONNX import's attention middle (heads folded into the rows) is computed in the zoo's layout.
        self.canon = FusedGroup(canonical_layers(group.layers, self.shape))
        self.gm = GroupModel(self.canon, arch, self.tiles, np.array([1]))
        self.group, self.arch = group, arch
        self.probs, self.layers = self.gm.problems, self.gm.layers

    def at_capacity(self, group: FusedGroup, arch: Arch) -> TransformerModel:
        """This model on ``arch`` differing only in memory sizes (nothing here reads them)."""
        other = object.__new__(TransformerModel)
        other.__dict__.update(self.__dict__)
        other.canon = FusedGroup(canonical_layers(group.layers, self.shape))
        other.gm = self.gm.at_capacity(other.canon, arch)
        other.group, other.arch, other.probs, other.layers = group, arch, other.gm.problems, other.gm.layers
        return other

    # ------------------------------------------------------------------ sizes
    def ntiles(self) -> np.ndarray:
        """(n,) row tiles per (n, g) slab."""
        return -(-self.shape.rows // self.tiles)

    def rows_held(self) -> np.ndarray:
        """(n,) rows of the largest row tile (the tile, or all rows when it is larger)."""
        return np.minimum(self.tiles, self.shape.rows)

    def _row_runs(self, channels: int, elem: int) -> np.ndarray:
        """(n,) bursts of one (n, g) slab of ``channels`` x M rows read or written tile by tile."""
        s, burst = self.shape, self.arch.dram.burst_bytes
        full, rem = s.rows // self.tiles, s.rows % self.tiles
        per = channels * (full * _cb(self.tiles * elem, burst) + (rem > 0) * _cb(rem * elem, burst))
        return np.where(self.tiles >= s.rows, _cb(channels * s.rows * elem, burst), per)

    def b_bytes(self, m: int) -> tuple[int, int]:
        """(elements of one group's B of layer ``m``, bytes per element)."""
        s = self.shape
        return (s.k1 if m in s.firsts else s.n2) * s.width, self.probs[m].precision.weight

    def b_pieces(self, m: int, c: int) -> float:
        """Bursts of one group's B of layer ``m`` loaded in chunks of ``c`` middle columns: a producing
        matmul's chunk is contiguous (c x k1), the reducing matmul's is n2 runs of c (whole: one run)."""
        s, burst = self.shape, self.arch.dram.burst_bytes
        _, b = self.b_bytes(m)
        if m in s.firsts or c >= s.width:
            return float(sum(cnt * _cb(e * (s.k1 if m in s.firsts else s.n2) * b, burst)
                             for e, cnt in parts(s.width, c)))
        return float(sum(cnt * s.n2 * _cb(e * b, burst) for e, cnt in parts(s.width, c)))

    def matmul_layers(self) -> list[int]:
        """Indices of the block's matmuls (their B: K, V or weights)."""
        return [*self.shape.firsts, len(self.layers) - 1]

    # ------------------------------------------------------------------ costs
    def costs(self, c: int, resident: tuple[bool, ...], unroll: tuple[tuple[int, ...], ...] | None = None,
              online: bool = False) -> tuple[FusedCost, list[np.ndarray]]:
        """Costs of every row tile for middle chunk ``c`` and residency flags ``resident`` (per layer),
        and per layer the index of the unroll option used (-1 when ``unroll`` is given). ``online``
        (attention): the online softmax holds one chunk of scores and each row's running max and sum,
        and rescales the output tile once per chunk and once at the end (T x n2 operations each)."""
        s, arch = self.shape, self.arch
        n = len(self.tiles)
        p0, plast = self.probs[0].precision, self.probs[-1].precision
        b_mid = plast.input
        slabs = s.batch * s.groups
        loads = slabs * self.ntiles()  # row tiles of all (n, g)
        ce = min(c, s.width)
        read, bursts = np.zeros((n, 3)), np.zeros((n, 3))
        read[:, _IN] = slabs * s.rows * s.k1 * p0.input
        bursts[:, _IN] = slabs * self._row_runs(s.k1, p0.input)
        write = np.full(n, float(slabs * s.rows * s.n2 * plast.output))
        bursts[:, _OUT] = slabs * self._row_runs(s.n2, plast.output)
        mems = len(arch.memories)
        held, dbl = np.zeros((n, mems)), np.zeros((n, mems))
        mem_in, mem_out = self.probs[0].memory_of_operand[_IN], self.probs[-1].memory_of_operand[_OUT]
        dbl[:, mem_in] += self.rows_held() * s.k1 * p0.input
        dbl[:, mem_out] += self.rows_held() * s.n2 * plast.psum
        middle = s.width if s.kind is TransformerKind.ATTENTION and not online else len(s.firsts) * ce
        held[:, mem_in] += self.rows_held() * middle * b_mid
        if online:  # each row's running max and exp-sum
            held[:, mem_in] += 2 * self.rows_held() * plast.psum
        acc, noc = np.zeros((n, 3)), np.zeros(n)
        for m in self.matmul_layers():
            elems, b = self.b_bytes(m)
            mem_w = self.probs[m].memory_of_operand[_W]
            if resident[m]:
                read[:, _W] += s.groups * elems * b
                bursts[:, _W] += s.groups * self.b_pieces(m, s.width)
                dbl[:, mem_w] += elems * b
            else:
                read[:, _W] += loads * elems * b
                bursts[:, _W] += loads * self.b_pieces(m, c)
                dbl[:, mem_w] += elems // s.width * ce * b
            acc[:, _W] += loads * elems * b  # the PE array reads every B once per row tile
            noc += loads * elems * b
        if s.mask is not None:  # the mask row: loaded once, kept (double-buffered like every B)
            row, b = self.group.layers[s.mask].elements(_W), self.probs[s.mask].precision.weight
            read[:, _W] += row * b
            bursts[:, _W] += _cb(row * b, arch.dram.burst_bytes)
            dbl[:, self.probs[s.mask].memory_of_operand[_W]] += row * b
            acc[:, _W] += slabs * s.rows * s.width * b
            noc += slabs * s.rows * s.width * b
        passes = -(-s.width // ce)
        cycles = np.zeros(n)
        picks: list[np.ndarray] = []
        for m, layer in enumerate(self.layers):
            prob = self.probs[m]
            if m in s.firsts:
                c_chunk, gk = layer.dims[Dim.C], (1, ce)
                ins = slabs * s.rows * s.k1 * passes * p0.input  # A re-read for every chunk
            elif m == len(self.layers) - 1:
                c_chunk, gk = ce, (1, s.n2)
                ins = slabs * s.rows * s.width * b_mid
            else:  # softmax over whole rows of one group; MLP element-wise layers chunk by chunk
                c_chunk, gk = 1, (s.width if s.kind is TransformerKind.ATTENTION and not online else ce, 1)
                ins = layer.elements(_IN) * b_mid
            cyc, pick = self.gm.compute_cycles(m, Overlap.RECOMPUTE, 1, c_chunk, gk,
                                               None if unroll is None else unroll[m])
            cycles += cyc
            picks.append(pick)
            last = m == len(self.layers) - 1
            outs = layer.elements(_OUT) * prob.precision.psum * (passes if last else 1)
            acc[:, _IN] += ins
            acc[:, _OUT if last else _IN] += 2 * outs
            noc += ins + outs
        executed = np.full(n, float(self.group.macs))
        if online:  # rescaling the output tile per chunk and the final division, on the whole array
            extra = float(slabs * s.rows * s.n2 * (passes + 1))
            cycles += np.ceil(extra / arch.peak_macs_per_cycle(p0.input))
            executed += extra
            acc[:, _OUT] += 2 * extra * plast.psum
            noc += extra * plast.psum
        feasible = fits(self.gm, held, dbl)
        cost = _finish(self.gm, read, write, bursts, held + dbl, feasible, cycles, executed, acc, noc)
        return FusedCost(cost, executed, np.zeros(n), np.zeros(n, dtype=np.int64)), picks


def transformer_model(group: FusedGroup, arch: Arch) -> TransformerModel:
    """A ``TransformerModel`` shared by every block of the same shapes on the same accelerator at any
    on-chip capacity (``search.memo``)."""
    key = ("transformer_model", group.signature(), capacity_free_key(arch))
    return memo(key, lambda: TransformerModel(group, arch)).at_capacity(group, arch)


def residency_choices(group: FusedGroup) -> list[tuple[bool, ...]]:
    """Every resident / streamed choice of the block's matmuls (other layers: False)."""
    mats = transformer_matmuls(group)
    out = []
    for flags in product((True, False), repeat=len(mats)):
        res = [False] * len(group)
        for m, f in zip(mats, flags, strict=True):
            res[m] = f
        out.append(tuple(res))
    return out


def transformer_matmuls(group: FusedGroup) -> list[int]:
    return matmul_layers(_shape(group), len(group))


@dataclass(frozen=True)
class TransformerResult:
    """The best block mapping on one accelerator, its costs (a batch of one) and the search's size:
    row tiles x choices costed, the choices (chunk x residency) and the seconds."""

    mapping: FusedMapping
    cost: FusedCost
    evaluated: int
    configs: int
    seconds: float


def search_transformer_sizes(group: FusedGroup, archs: Sequence[Arch], objective: Objective | str,
                       onlines: tuple[bool, ...] = (False, True)) -> list[TransformerResult | None]:
    """The best block mapping on each of ``archs`` (``None`` where nothing fits): every row tile,
    middle chunk and residency. The chunk changes nothing when every B is resident (only the whole
    width is tried then). Choices are visited in a fixed order and a later one wins only when strictly
    better (objective, then the per-layer search's tie keys). ``onlines``: whether an attention block
    may use the row-wise softmax (False) and / or the online one (True)."""
    obj = Objective(objective)
    shape = _shape(group)
    out: list[TransformerResult | None] = []
    for arch in archs:
        start = time.perf_counter()
        bm = transformer_model(group, arch)
        best: tuple[tuple[float, ...], FusedMapping, FusedCost] | None = None
        configs = 0
        attention = shape.kind is TransformerKind.ATTENTION
        for resident, online in product(residency_choices(group), onlines if attention else (False,)):
            streams = any(not resident[m] for m in bm.matmul_layers())
            for c in chunk_choices(shape) if streams or online or not attention else [shape.width]:
                if online and c >= shape.width:
                    continue
                configs += 1
                fc, picks = bm.costs(c, resident, online=online)
                key = obj.key(fc.cost)
                low = float(key.min())
                if not np.isfinite(low) or (best is not None and low > best[0][0]):
                    continue
                ties = np.flatnonzero(key == low)
                i = int(ties[best_index(obj, fc.cost.take(ties))]) if len(ties) > 1 else int(ties[0])
                one = fc.cost.take(np.array([i]))
                k = tuple(float(v[0]) for v in [obj.key(one), *obj.tie_keys(one)])
                if best is None or k < best[0]:
                    unroll = tuple(tuple(int(x) for x in bm.gm.unroll_options(m)[picks[m][i]])
                                   for m in range(len(group)))
                    mapping = _mapping(group, int(bm.tiles[i]), c, resident, unroll, online)
                    best = (k, mapping, FusedCost(one, fc.executed_macs[[i]], fc.reuse_bytes[[i]], fc.direction[[i]]))
        seconds = time.perf_counter() - start
        if best is None:
            out.append(None)
            continue
        out.append(TransformerResult(best[1], best[2], configs * len(bm.tiles), configs, seconds))
    return out


def _mapping(group: FusedGroup, tile: int, c: int, resident: tuple[bool, ...],
             unroll: tuple[tuple[int, ...], ...], online: bool = False) -> FusedMapping:
    last = group.last
    return FusedMapping(1, tile, 1, last.k_out, Overlap.RECOMPUTE, Direction.ROWS, resident,
                        (c,) * (len(group) - 1), unroll, online=online)


def check_transformer_mapping(group: FusedGroup, mapping: FusedMapping) -> None:
    """Raise ``MappingError`` unless ``mapping`` is a block mapping of ``group`` (module docstring)."""
    why = transformer_mapping_error(group.layers, _shape(group), mapping)
    if why:
        raise MappingError(why)


def evaluate_transformer(group: FusedGroup, arch: Arch, mapping: FusedMapping) -> FusedCost:
    """Costs of one block mapping (a batch of one)."""
    check_transformer_mapping(group, mapping)
    bm = TransformerModel(group, arch, np.array([mapping.tile_p]))
    return bm.costs(mapping.chunk[0], mapping.resident, mapping.unroll, mapping.online)[0]
