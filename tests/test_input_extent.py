"""Input rows a slice of output rows reads: ``cost.problem.input_extent`` (a closed form for one-row
windows, numpy otherwise) and ``cost.bounds.touched_input_elements`` (numpy) equal a plain walk of
every (output row, kernel row) pair into a Python set, on random geometries with padding, stride and
dilation (windows that fall wholly in the padding included)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tileplan.arch import load as load_arch
from tileplan.cost.bounds import touched_input_elements
from tileplan.cost.problem import Problem, input_extent
from tileplan.dims import Dim
from tileplan.errors import WorkloadError
from tileplan.workload.layer import Layer


def _rows_read(size: int, pad: int, stride: int, dil: int, kernel: int, offset: int, length: int) -> int:
    """Input rows output rows ``offset .. offset + length - 1`` read: a plain set of every index."""
    return len({(p * stride + k * dil - pad) for p in range(offset, offset + length) for k in range(kernel)
                if 0 <= p * stride + k * dil - pad < size})


geometry = st.tuples(st.integers(1, 40), st.integers(1, 5), st.integers(0, 4), st.integers(1, 4),
                     st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(geometry, st.data())
def test_input_extent_equals_a_plain_walk(geo: tuple[int, int, int, int, int], data: st.DataObject) -> None:
    h, r, pad, stride, dil = geo
    try:
        layer = Layer.conv("c", c_in=2, h=h, w=3, k_out=2, r=r, s=1, stride=(stride, 1), pad=(pad, pad, 0, 0),
                           dilation=(dil, 1))
    except WorkloadError:
        return  # no output row fits: nothing to count
    problem = Problem(layer, load_arch("eyeriss"))
    rows = layer.dims[Dim.P]
    offset = data.draw(st.integers(0, rows - 1))
    length = data.draw(st.integers(1, rows - offset))
    assert input_extent(problem, 0, offset, length) == _rows_read(h, pad, stride, dil, r, offset, length)


@settings(max_examples=60, deadline=None)
@given(geometry, geometry)
def test_touched_input_elements_equals_a_plain_walk(rows: tuple[int, int, int, int, int],
                                                     cols: tuple[int, int, int, int, int]) -> None:
    (h, r, ph, sh, dh), (w, s, pw, sw, dw) = rows, cols
    try:
        layer = Layer.conv("c", c_in=3, h=h, w=w, k_out=2, r=r, s=s, stride=(sh, sw), pad=(ph, ph, pw, pw),
                           dilation=(dh, dw))
    except WorkloadError:
        return
    read_rows = _rows_read(h, ph, sh, dh, r, 0, layer.dims[Dim.P])
    read_cols = _rows_read(w, pw, sw, dw, s, 0, layer.dims[Dim.Q])
    assert touched_input_elements(layer) == 3 * read_rows * read_cols
