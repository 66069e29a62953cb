"""Hoisting in the exhaustive space: an operand whose on-chip box spans a whole per-core slice.

A mapping's ``hoist`` (``mapping.Mapping``) lets one operand's tile span the whole slice of a
dimension that indexes it while the loop over that dimension still walks the other operands' tiles.
TSO's weight stationary (Sousa et al., Fig. 6, Eq. 5) is the paper case: each weight tile holds
*all* input channels of its filters while the input tile holds ``T_N`` of them. No single tile
vector expresses that (the C tile is shared by input and weight), so without hoisting the
exhaustive search cannot reach those mappings -- and under the burst model they pay: a weight box of
whole filters is one contiguous run in the KCRS layout (SqueezeNet 1.0's fire6_squeeze on ``nmp``:
768 weight bursts instead of 2,496 for the same bytes; see docs/containment.md).

:data:`HOISTS` are the hoist configurations the exhaustive search adds to the plain space (one
tile vector, nothing hoisted). For each, :func:`reuse_orders` gives loop orders that realise every
reuse class under the configuration's relevance (a hoisted dimension no longer triggers the
operand's reloads), so the search stays exact over every loop order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.dims import DIMS, NDIMS, OPERANDS, RELEVANT, Dim, Operand


@dataclass(frozen=True)
class Hoist:
    """One hoist configuration: per operand, the dimensions its box spans whole."""

    name: str
    dims: tuple[frozenset[Dim], frozenset[Dim], frozenset[Dim]]

    @property
    def pairs(self) -> frozenset[tuple[Operand, Dim]]:
        """(operand, dimension) pairs hoisted (the key of tile-group caches)."""
        return frozenset((op, d) for op in OPERANDS for d in self.dims[op])

    def array(self) -> np.ndarray:
        """(3, 8) bool flags, as ``MappingBatch.hoist`` rows."""
        out = np.zeros((3, NDIMS), dtype=bool)
        for op in OPERANDS:
            for d in self.dims[op]:
                out[op, d] = True
        return out

    def applies(self, problem: Problem, max_length: tuple[int, ...] | np.ndarray) -> bool:
        """Whether hoisting changes anything on a split with these longest slices: the operand is
        read and some hoisted dimension is longer than 1 (else the hoisted box is the plain one)."""
        return any(problem.has_operand[op] and int(max_length[d]) > 1 for op in OPERANDS for d in self.dims[op])


NONE = Hoist("none", (frozenset(), frozenset(), frozenset()))
#: Weights spanning every input channel of their filters (TSO's weight stationary).
WEIGHT_C = Hoist("weight-C", (frozenset(), frozenset({Dim.C}), frozenset()))
#: The configurations the exhaustive search covers, the plain space first.
HOISTS: tuple[Hoist, ...] = (NONE, WEIGHT_C)


def _permutations(n: int) -> np.ndarray:
    """(n!, n) every permutation of 0..n-1 in lexicographic order (as ``itertools.permutations``)."""
    if n == 1:
        return np.zeros((1, 1), dtype=np.int64)
    rest = _permutations(n - 1)
    return np.concatenate([np.concatenate([np.full((len(rest), 1), f, dtype=np.int64), rest + (rest >= f)], axis=1)
                           for f in range(n)])


#: :func:`_classes` of the hoists the exhaustive search covers, by their relevance masks, each order
#: written as its eight dimension indices, outermost first: computing them walks all 8! orders (about
#: 30 ms of CPU at every planning command's start). ``tests/test_hoist_orders.py`` checks them against
#: :func:`_classes`.
KNOWN_CLASSES: dict[tuple[int, int, int], str] = {
    (251, 198, 55): "01234567 01234657 01234675 01234756 01235674 01236745 01245367 01245673 01246537 "
                    "01246573 01246735 01246753 01247536 01247563 01256734 01256743 01267345 01267453 "
                    "01345672 01456723 02345671 12345670 12346705 12356704 12367045 12456703 12456730 "
                    "12467035 12467053 12567034 12567043 12670345 12670453",  # WEIGHT_C
}


@cache
def _reuse_orders(masks: tuple[int, int, int]) -> np.ndarray:
    known = KNOWN_CLASSES.get(masks)
    out = np.array([[int(c) for c in o] for o in known.split()], dtype=np.int64) if known else _classes(masks)
    out.flags.writeable = False
    return out


def _classes(masks: tuple[int, int, int]) -> np.ndarray:
    """One loop order per distinct (S_input, S_weight, S_output) over all 8! orders (``masks``: the
    dimensions indexing each operand, as bits), the lexicographically first of each class, in
    lexicographic order."""
    perms = _permutations(NDIMS)  # lexicographic: deterministic representatives
    keys = np.zeros(len(perms), dtype=np.int64)  # the three operands' sets, 8 bits each
    for op in OPERANDS:
        irrelevant = np.array([not (masks[op] >> d) & 1 for d in range(NDIMS)])
        alive = np.ones(len(perms), dtype=bool)
        suffix = np.zeros(len(perms), dtype=np.int64)
        for pos in range(NDIMS - 1, -1, -1):  # innermost first: the longest run of irrelevant loops
            d = perms[:, pos]
            alive &= irrelevant[d]
            suffix |= np.where(alive, np.left_shift(1, d), 0)
        keys |= suffix << (8 * op)
    _, first = np.unique(keys, return_index=True)
    return perms[np.sort(first)]


def reuse_orders(hoist: Hoist) -> np.ndarray:
    """(m, 8) loop orders (outermost first), one per reuse class under ``hoist``.

    The model reloads operand X once per iteration of the loops outside its innermost loop that
    indexes it, is not hoisted and has more than one trip (``cost.finish.reload``); so an order acts
    on X only through S_X, the innermost run of loops that do not index X (or are hoisted for it),
    and more in S_X never costs more. One order per distinct (S_input, S_weight, S_output) of the
    8! orders covers every order for every tile vector: for tiles whose loops of one trip are T,
    order o acts like o' = (T first, then o without T); o''s representative r has the same sets,
    and removing T from r keeps every set at least as large. Without hoisting these are the 16
    classes of ``space.class_orders``."""
    masks = tuple(sum(1 << d for d in DIMS if d in RELEVANT[op] and d not in hoist.dims[op]) for op in OPERANDS)
    return _reuse_orders((masks[0], masks[1], masks[2]))


__all__ = ["HOISTS", "NONE", "WEIGHT_C", "Hoist", "reuse_orders"]
