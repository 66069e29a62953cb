"""Whether tilings fit the on-chip memories, by the model's footprint rule, without a sweep.

The rule is the one ``cost.kernel.footprint`` applies on one core: per operand the largest box it
must hold (input rows and columns from the model's halo table), at on-chip precision, summed per
memory, doubled when the arch double-buffers. Planners that only need the yes/no answer for many
tilings (MARVEL's off-chip subspace, e-PlaNNer's nest) use this; tests check it equals the sweep's
feasibility.
"""

from __future__ import annotations

import numpy as np

from tileplan.cost.problem import Problem
from tileplan.cost.tables import halo_table
from tileplan.dims import DIMS, OPERANDS, RELEVANT, Dim, Operand


def fits(problem: Problem, tiles: np.ndarray) -> np.ndarray:
    """Whether each tiling fits the on-chip memories (double-buffered when the arch is), by the
    model's footprint rule: per operand the largest box (input rows/columns from the model's halo
    table) at on-chip precision, summed per memory."""
    dims = problem.dims
    t = np.minimum(tiles, dims)
    prec = problem.precision
    need = np.zeros((len(tiles), len(problem.arch.memories)), dtype=np.int64)
    for op in OPERANDS:
        if not problem.has_operand[op]:
            continue
        box = np.ones(len(tiles), dtype=np.int64)
        for d in DIMS:
            if d in RELEVANT[op] and not (op is Operand.INPUT and d in (Dim.P, Dim.Q, Dim.R, Dim.S)):
                box *= t[:, d]
        if op is Operand.INPUT:
            for axis, (dp, dk) in enumerate(((Dim.P, Dim.R), (Dim.Q, Dim.S))):
                table = halo_table(int(dims[dp]), problem.input_window_start(axis, 0),
                                   problem.in_h if axis == 0 else problem.in_w, problem.stride[axis],
                                   problem.dilation[axis], int(dims[dk]))
                box *= table.max_ext[t[:, dp] - 1, t[:, dk] - 1, 0, 0]
        size = prec.psum if op is Operand.OUTPUT else prec.of(op)
        copies = problem.layer.input_count if op is Operand.INPUT else 1
        need[:, problem.memory_of_operand[op]] += box * size * copies
    factor = 2 if problem.arch.double_buffering else 1
    return np.all(need * factor <= problem.capacity_bytes[None, :], axis=1)


__all__ = ["fits"]
