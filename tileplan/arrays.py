"""Array helpers shared by the layers above.

numpy 2's ``np.unique`` in its plain form (no ``return_index``, ``return_inverse`` nor
``return_counts``) imports ``numpy.ma`` at its first call in a process, about 20 ms of start-up that
every planning command (and every worker process) paid for nothing; :func:`distinct` gives the same
values without it.
"""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values`` (any shape, flattened; integers, or floats without NaN),
    ascending: ``np.unique(values)``.

    >>> distinct(np.array([[3, 1], [3, 2]])).tolist()
    [1, 2, 3]
    """
    flat = np.sort(np.asarray(values).ravel())
    if flat.size == 0:
        return flat
    keep = np.empty(flat.size, dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


__all__ = ["distinct"]
