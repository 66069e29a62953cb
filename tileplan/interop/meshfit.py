"""Spreading per-dimension fan-outs over the axes of a PE array (a mesh), for the writers.

tileplan's multi-level model counts a fan-out's PEs (their product must not exceed the array);
Timeloop and ZigZag place each factor on an axis. :func:`fit` finds such a placement by a small
depth-first search over the divisors (a few dimensions, at most four axes), or says there is none.

>>> fit({"Q": 56, "C": 3}, [12, 14])
[{'Q': 4, 'C': 3}, {'Q': 14}]
>>> fit({"K": 7}, [4, 4]) is None
True
"""

from __future__ import annotations


def _divisors(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def fit(fanout: dict[str, int], lanes: list[int]) -> list[dict[str, int]] | None:
    """Per axis, the factor of each dimension it unrolls (factors of a dimension multiply to its
    fan-out, factors on an axis to at most its lanes); ``None`` when no placement exists."""
    items = sorted(((d, f) for d, f in fanout.items() if f > 1), key=lambda kv: -kv[1])
    used = [1] * len(lanes)  # product of the factors on each axis so far
    placed: list[dict[str, int]] = [{} for _ in lanes]

    def place(i: int, axis: int, left: int) -> bool:
        if i == len(items):
            return True
        d, _ = items[i]
        if left == 1:
            return place(i + 1, 0, items[i + 1][1]) if i + 1 < len(items) else True
        if axis == len(lanes):
            return False
        for g in _divisors(left):
            if used[axis] * g > lanes[axis]:
                continue
            used[axis] *= g
            if g > 1:
                placed[axis][d] = g
            if place(i, axis + 1, left // g):
                return True
            used[axis] //= g
            if g > 1:
                del placed[axis][d]
        return False

    if not items:
        return placed
    return placed if place(0, 0, items[0][1]) else None
