"""segstore.columns.pooled_together: the arrays of one allocation are aligned, the sizes asked, and
never overlap (a chunk's columns written by the C loops must not write over each other)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from segstore.columns import ALIGN, pooled_together

DTYPES = [np.uint8, np.int32, np.int64, np.dtype([("a", "=i8"), ("b", "=i1"), ("pad", "V7")])]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(DTYPES)), min_size=1, max_size=17))
def test_aligned_sized_and_apart(shapes):
    arrays = pooled_together(shapes)
    spans = []
    for (length, dtype), array in zip(shapes, arrays, strict=True):
        assert array.dtype == np.dtype(dtype) and array.shape == (length,)
        start = array.__array_interface__["data"][0]
        assert start % ALIGN == 0
        spans.append((start, start + array.nbytes))
        array.view(np.uint8)[:] = len(spans)       # each array filled with its own number
    for number, array in enumerate(arrays, 1):
        assert (array.view(np.uint8) == number).all()
    spans.sort()
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
