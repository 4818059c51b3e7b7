"""segstore.columns.pooled_together: the arrays it carves are aligned, the sizes asked, and never
overlap (a chunk's columns written by the C loops must not write over each other), however they
fall into blocks."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from segstore import columns
from segstore.columns import ALIGN, pooled_together

DTYPES = [np.uint8, np.int32, np.int64, np.dtype([("a", "=i8"), ("b", "=i1"), ("pad", "V7")])]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(DTYPES)), min_size=1, max_size=17),
       st.sampled_from([columns.BLOCK, 4096, 64]))
def test_aligned_sized_and_apart(shapes, block):
    saved, columns.BLOCK = columns.BLOCK, block     # small blocks: arrays spread over several, or alone
    try:
        arrays = pooled_together(shapes)
    finally:
        columns.BLOCK = saved
    spans = []
    for (length, dtype), array in zip(shapes, arrays, strict=True):
        assert array.dtype == np.dtype(dtype) and array.shape == (length,)
        start = array.__array_interface__["data"][0]
        assert start % ALIGN == 0
        spans.append((start, start + array.nbytes))
        array.view(np.uint8)[:] = len(spans)       # each array filled with its own number
    for number, array in enumerate(arrays, 1):
        assert (array.view(np.uint8) == number).all()
    # no block bigger than BLOCK (jemalloc purges those at once) but for one array alone in it; a block
    # below columns.POOL_MIN comes from numpy with up to ALIGN bytes more to align it
    by_block: dict[int, list[int]] = {}
    for array in arrays:
        by_block.setdefault(id(array.base), []).append(array.nbytes)
    for array in arrays:
        held = [n for n in by_block[id(array.base)] if n]
        assert array.base.size <= block + ALIGN * (array.base.size < columns.POOL_MIN) or len(held) == 1
    spans.sort()
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
