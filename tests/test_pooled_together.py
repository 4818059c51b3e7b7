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


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(DTYPES)), min_size=1, max_size=17))
def test_a_layout_worked_out_once_carves_fresh_memory_each_time(shapes):
    """The second call of the same shapes (its layout cached) gives arrays laid out as the first's, in
    memory of their own: a chunk's columns never share memory with the chunk before."""
    first, second = pooled_together(shapes), pooled_together(list(shapes))

    def layout(arrays):     # each array's block (by first appearance) and place after its block's first
        starts = [a.__array_interface__["data"][0] for a in arrays]
        blocks = list(dict.fromkeys(id(a.base) for a in arrays))
        lowest = {block: min(s for a, s in zip(arrays, starts, strict=True) if id(a.base) == block)
                  for block in blocks}
        return [(blocks.index(id(a.base)), s - lowest[id(a.base)], a.dtype, a.shape)
                for a, s in zip(arrays, starts, strict=True)]

    assert layout(first) == layout(second)
    for a in first:
        a.view(np.uint8)[:] = 1
    for a in second:
        a.view(np.uint8)[:] = 2
    assert all((a.view(np.uint8) == 1).all() for a in first)
