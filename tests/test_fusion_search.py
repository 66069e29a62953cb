"""Fused-group search against brute force over the whole fused mapping space of tiny groups."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from helpers import toy_arch

from tileplan.fusion.assemble import evaluate_fused
from tileplan.fusion.cost import GroupModel
from tileplan.fusion.group import Direction, FusedGroup, FusedMapping, Overlap
from tileplan.fusion.search import chunk_options, search_group, tile_k_options
from tileplan.search.objective import Objective
from tileplan.workload.layer import Layer, Precision

B1 = Precision.uniform(1)


def _tiny() -> FusedGroup:
    a = Layer.conv("a", c_in=2, h=5, w=5, k_out=4, r=3, pad=1, precision=B1)
    b = Layer.conv("b", c_in=4, h=5, w=5, k_out=3, r=3, stride=2, pad=1, precision=B1)
    return FusedGroup((a, b))


@pytest.mark.parametrize("capacity", [330, 1 << 16])
def test_search_finds_the_brute_force_optimum(capacity):
    group = _tiny()
    arch = toy_arch(unified=capacity, axes=[{"name": "x", "size": 4, "dims": ["K"], "max_dims": 1}], overlap=True)
    gm = GroupModel(group, arch)
    unrolls = [[tuple(int(v) for v in u) for u in gm.unroll_options(m)] for m in range(2)]
    last = group.last
    best = {obj: np.inf for obj in Objective}
    for tp, tq, overlap, direction, resident, chunk in product(
            range(1, last.p + 1), range(1, last.q + 1), list(Overlap), list(Direction),
            product((True, False), repeat=2), chunk_options(group)):
        for tk, ua, ub in product(tile_k_options(group, chunk), *unrolls):
            m = FusedMapping(1, tp, tq, tk, overlap, direction, resident, chunk, (ua, ub))
            cost = evaluate_fused(group, arch, m).cost
            for obj in Objective:
                best[obj] = min(best[obj], float(obj.key(cost)[0]))
    for obj in Objective:
        found = search_group(group, arch, obj, gm=gm)
        if not np.isfinite(best[obj]):
            assert found is None
            continue
        assert found is not None
        assert float(obj.key(found.cost)[0]) == pytest.approx(best[obj], rel=1e-12)
        again = evaluate_fused(group, arch, found.mapping).cost  # the reported mapping has the reported cost
        assert float(obj.key(again)[0]) == pytest.approx(best[obj], rel=1e-12)
