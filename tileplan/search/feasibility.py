"""A clear error when not even the smallest tiles fit."""

from __future__ import annotations

import numpy as np

from tileplan.cost.batch import MappingBatch
from tileplan.cost.model import sweep
from tileplan.cost.problem import Problem
from tileplan.dims import NDIMS
from tileplan.errors import InfeasibleError


def raise_infeasible(problem: Problem) -> None:
    """Raise an ``InfeasibleError`` naming the memory that cannot hold even 1-element tiles (return
    quietly when they fit)."""
    ones = np.ones((1, NDIMS), dtype=np.int64)
    batch = MappingBatch(ones, np.arange(NDIMS)[None, :], np.zeros((1, 3, NDIMS), dtype=bool), ones,
                         np.array([MappingBatch.default_layout_codes()]), (1,) * NDIMS, (1,) * NDIMS)
    sw = sweep(problem, batch)
    factor = 2 if problem.arch.double_buffering else 1
    parts = []
    for m, (need, mem) in enumerate(zip(sw.footprint[0], problem.arch.memories, strict=True)):
        if need * factor > mem.size_bytes:
            parts.append(f"memory {mem.name!r} ({mem.size_bytes} B) cannot hold {need * factor} B "
                         f"({'double-buffered ' if factor == 2 else ''}1-element tiles of "
                         f"{', '.join(mem.operands)})")
        del m
    if not parts:
        return
    detail = "; ".join(parts)
    raise InfeasibleError(f"layer {problem.layer.name!r} cannot run on {problem.arch.name} even with every "
                          f"tile size at 1: {detail}. Enlarge the memory or use a narrower precision.")
