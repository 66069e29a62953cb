"""The reuse-class loop orders of every hoist (``search.hoist.reuse_orders``): the stored table is
what the computation gives, and a plain walk of all 8! loop orders finds the same classes."""

from __future__ import annotations

from itertools import permutations

import pytest

from tileplan.dims import DIMS, OPERANDS, RELEVANT
from tileplan.search.hoist import HOISTS, KNOWN_CLASSES, NONE, Hoist, _classes, reuse_orders


def _masks(hoist: Hoist) -> tuple[int, int, int]:
    m = [sum(1 << d for d in DIMS if d in RELEVANT[op] and d not in hoist.dims[op]) for op in OPERANDS]
    return m[0], m[1], m[2]


def _innermost_runs(order: tuple[int, ...], masks: tuple[int, int, int]) -> tuple[frozenset[int], ...]:
    """Per operand, the dimensions of the innermost run of loops that do not index it."""
    runs = []
    for mask in masks:
        run: set[int] = set()
        for d in reversed(order):
            if (mask >> d) & 1:
                break
            run.add(d)
        runs.append(frozenset(run))
    return tuple(runs)


@pytest.mark.parametrize("hoist", [h for h in HOISTS if h != NONE], ids=lambda h: h.name)
def test_stored_classes_are_the_computed_ones(hoist: Hoist) -> None:
    masks = _masks(hoist)
    assert masks in KNOWN_CLASSES  # so no command walks the 8! orders
    assert reuse_orders(hoist).tolist() == _classes(masks).tolist()


@pytest.mark.parametrize("hoist", HOISTS, ids=lambda h: h.name)
def test_classes_are_the_first_order_of_each_class_of_all_orders(hoist: Hoist) -> None:
    masks = _masks(hoist)
    first: dict[tuple[frozenset[int], ...], tuple[int, ...]] = {}
    for order in permutations(range(len(DIMS))):  # lexicographic
        first.setdefault(_innermost_runs(order, masks), order)
    expected = sorted(first.values())
    assert _classes(masks).tolist() == [list(o) for o in expected]
    if hoist != NONE:
        assert reuse_orders(hoist).tolist() == [list(o) for o in expected]
    else:
        assert len(expected) == 16  # the reuse classes of ``space.class_orders``
