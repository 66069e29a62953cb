"""Ye et al.'s printed closed forms for the fused two-layer strategies, Eq. 1-8, in elements.

These are the paper's formulas as printed, kept as data for two uses: tests (on pairs whose zero
padding is stored in DRAM and whose tiles divide the maps evenly, the general fused model gives
exactly Eq. 1, 3, 5 and 7) and ``--paper-formulas`` (reproduce the paper's curves). The general
model is the faithful count of the pseudo-code (Fig. 4); the printed formulas differ from it in:

* **zero padding**: ``a1 = P1 (P2 a Pool2 + S2 - P2) Pool1 + S1 - P1`` counts the padded border as
  fetched; the model never fetches padding. On DenseNet-121's last dense layer (Fig. 6b: 7x7, a
  3x3 second layer) a whole-map tile reads 9 x 9 x 988 ifmap values per image by Eq. 1, 7 x 7 x 988
  in the model (this is why fusion wins there above ~192 KB in the model but never in the paper);
* **remainder tiles**: ``B W1 W2 / abh`` is fractional in the formulas; the model counts real tiles;
* **buffers**: Eq. 2 keeps ``max(C1 S1^2, S2^2)`` weights while the pseudo-code holds one layer-1
  filter and the chunk's column of every layer-2 filter (``C1 S1^2 + D2 S2^2``); Eq. 4 omits the
  ``abh D2`` partial sums the pseudo-code accumulates; Eq. 6 and 8 hold one intermediate channel
  ``a2 b2 h`` where the model holds the chunk's ``d`` channels.

Everything is vectorised over candidate tilings ``(a, b, h, c, d)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileplan.fusion.group import FusedGroup
from tileplan.fusion.ye import FUSED, cardinality


@dataclass(frozen=True)
class PairShape:
    """Table 1's shape parameters of a fused pair (sublayers of equal size)."""

    w1: int  # ofmap width of the last layer
    w2: int  # ofmap height
    batch: int
    c1: int  # input channels of layer 1
    card: int  # C, sublayers
    d1: int  # filters of layer 1 per sublayer (D_{1,x})
    d2: int  # filters of layer 2 per sublayer (D_{2,x})
    s1: int
    s2: int
    p1: int  # strides
    p2: int

    @classmethod
    def of(cls, group: FusedGroup) -> PairShape:
        first, second = group.layers
        card = cardinality(group)
        return cls(second.q, second.p, second.n, first.c_in, card, first.k_out // card, second.k_out // card,
                   first.r, second.r, first.stride[0], second.stride[0])

    @property
    def weights(self) -> int:
        """C1 sum D1 S1^2 + sum D1 D2 S2^2."""
        return self.card * (self.c1 * self.d1 * self.s1 ** 2 + self.d1 * self.d2 * self.s2 ** 2)

    @property
    def ofmap(self) -> int:
        """sum D2 W1 W2 B."""
        return self.card * self.d2 * self.w1 * self.w2 * self.batch


def windows(shape: PairShape, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a2, a1): the printed halo'd tile widths of layer 2's and layer 1's inputs (Pool = 1)."""
    a2 = shape.p2 * a + shape.s2 - shape.p2
    a1 = shape.p1 * a2 + shape.s1 - shape.p1
    return a2, a1


def dram(name: str, shape: PairShape, a: np.ndarray, b: np.ndarray, h: np.ndarray, c: np.ndarray,
         d: np.ndarray) -> np.ndarray:
    """Eq. 1 (ir2l), 3 (wr2lv1), 5 (wr2lv2) or 7 (pr2l): DRAM accesses in elements."""
    s = shape
    _, a1 = windows(s, a)
    _, b1 = windows(s, b)
    f = np.float64
    tiles = s.batch * s.w1 * s.w2 / (a * b * h).astype(f)
    ifmap = s.batch * s.w1 * s.w2 * s.c1 / (a * b).astype(f) * a1 * b1
    if name == "ir2l":
        return tiles * s.weights + ifmap + s.ofmap
    if name == "wr2lv1":
        return s.weights + ifmap * s.card / c + s.ofmap
    if name == "wr2lv2":
        return s.weights + ifmap / d * s.card * s.d1 + s.ofmap
    if name == "pr2l":
        return tiles * s.weights + ifmap * s.card + s.ofmap
    raise ValueError(f"unknown fused strategy {name!r}")


def buffer(name: str, shape: PairShape, a: np.ndarray, b: np.ndarray, h: np.ndarray, c: np.ndarray,
           d: np.ndarray) -> np.ndarray:
    """Eq. 2, 4, 6 or 8: on-chip global buffer in elements."""
    s = shape
    a2, a1 = windows(s, a)
    b2, b1 = windows(s, b)
    common = a1 * b1 * s.c1 * h + a2 * b2 * h
    if name == "ir2l":
        return common + a * b * h * s.d2 + max(s.c1 * s.s1 ** 2, s.s2 ** 2)
    if name == "wr2lv1":
        return common + c * (s.c1 * s.d1 * s.s1 ** 2 + s.d1 * s.d2 * s.s2 ** 2)
    if name == "wr2lv2":
        return common + s.batch * s.w1 * s.w2 * s.d2 + (s.c1 * d * s.s1 ** 2 + d * s.d2 * s.s2 ** 2)
    if name == "pr2l":
        return common + a * b * h * s.d2 + (s.c1 * d * s.s1 ** 2 + d * s.d2 * s.s2 ** 2)
    raise ValueError(f"unknown fused strategy {name!r}")


@dataclass(frozen=True)
class PrintedBest:
    """The minimum of a printed DRAM formula under its printed buffer constraint."""

    strategy: str
    dram_elements: float
    buffer_elements: float
    tiles: dict[str, int]


def best_printed(name: str, shape: PairShape, capacity_elements: float) -> PrintedBest | None:
    """Eq. 9 for one strategy: the tiling ``<a, b, c, d, h>`` minimising its DRAM formula with its
    buffer formula within ``capacity_elements`` (``None``: nothing fits). c and d only range where
    the strategy uses them (ir2l: c = d = 1; wr2lv1: d = 1; wr2lv2 and pr2l: c = 1)."""
    cs = np.arange(1, shape.card + 1) if name == "wr2lv1" else np.array([1])
    ds = np.arange(1, shape.d1 + 1) if name in ("wr2lv2", "pr2l") else np.array([1])
    grids = np.meshgrid(np.arange(1, shape.w1 + 1), np.arange(1, shape.w2 + 1), np.arange(1, shape.batch + 1),
                        cs, ds, indexing="ij")
    a, b, h, c, d = (g.ravel().astype(np.int64) for g in grids)
    need = buffer(name, shape, a, b, h, c, d)
    cost = np.where(need <= capacity_elements, dram(name, shape, a, b, h, c, d), np.inf)
    i = int(np.argmin(cost))
    if not np.isfinite(cost[i]):
        return None
    return PrintedBest(name, float(cost[i]), float(need[i]),
                       {"a": int(a[i]), "b": int(b[i]), "h": int(h[i]), "c": int(c[i]), "d": int(d[i])})


def best_printed_f2l(shape: PairShape, capacity_elements: float) -> PrintedBest | None:
    """Eq. 9 with the printed formulas: the best of the four strategies."""
    found = [r for name in FUSED if (r := best_printed(name, shape, capacity_elements)) is not None]
    return min(found, key=lambda r: r.dram_elements) if found else None


__all__ = ["PairShape", "PrintedBest", "best_printed", "best_printed_f2l", "buffer", "dram", "windows"]
