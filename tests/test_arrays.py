"""``tileplan.arrays.distinct`` is ``np.unique`` (without importing numpy.ma)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from tileplan.arrays import distinct


@given(arrays(np.int64, array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
              elements=st.integers(-5, 5)))
def test_distinct_is_numpys_unique(values: np.ndarray) -> None:
    got = distinct(values)
    assert got.dtype == values.dtype and got.tolist() == np.unique(values).tolist()


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=30))
def test_distinct_floats(values: list[float]) -> None:
    assert distinct(np.array(values, dtype=np.float64)).tolist() == sorted(set(values))
