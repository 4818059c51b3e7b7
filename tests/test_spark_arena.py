"""A worker child's arena (``segstore.spark.arena``): shared memory handed out in blocks that go back
only when nothing uses them, so a batch the JVM still reads in place is never written over."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pytest

from segstore import columns
from segstore.spark.arena import SIZE_STEP, Arena


@pytest.fixture
def arena(tmp_path):
    made = Arena(str(tmp_path / "arena"), 8 * SIZE_STEP)
    made.unlink()
    return made


def test_blocks_are_whole_steps_inside_the_arena_and_none_when_it_is_full(arena):
    first = arena.take(1)
    second = arena.take(SIZE_STEP + 1)
    places = [arena.offset_of(pa.py_buffer(b).address, len(b)) for b in (first, second)]
    assert places == [0, SIZE_STEP] and len(first) == SIZE_STEP and len(second) == 2 * SIZE_STEP
    rest = arena.take(5 * SIZE_STEP)                    # what is left, whole
    assert rest is not None and arena.take(1) is None


def test_a_block_goes_back_only_when_every_view_of_it_is_gone(arena):
    block = arena.take(4 * SIZE_STEP)
    values = np.frombuffer(block, np.int64, 1000)
    values[:] = 7
    column = pa.Array.from_buffers(pa.int64(), 10, [None, pa.py_buffer(values[:10])])
    del block, values
    gc.collect()
    assert arena.free_bytes() == 4 * SIZE_STEP          # the column still holds its block
    assert column.to_pylist() == [7] * 10
    del column
    gc.collect()
    assert arena.free_bytes() == 8 * SIZE_STEP


def test_blocks_given_back_in_any_order_merge_again(arena):
    blocks = [arena.take(SIZE_STEP) for _ in range(8)]
    assert arena.take(1) is None
    for k in (5, 1, 3, 2, 7, 0, 6, 4):
        blocks[k] = None
        gc.collect()
    assert arena.free_bytes() == 8 * SIZE_STEP
    assert arena.take(8 * SIZE_STEP) is not None        # one free block again


def test_pooled_takes_big_blocks_from_the_arena_and_small_ones_elsewhere(arena):
    columns.set_arena(arena)
    try:
        big = columns.pooled(arena.min_block // 8, np.int64)
        small = columns.pooled(16, np.int64)
        together = columns.pooled_together([(arena.min_block, np.uint8), (10, np.int32)])
    finally:
        columns.set_arena(None)
    assert arena.offset_of(big.ctypes.data, big.nbytes) is not None
    assert arena.offset_of(small.ctypes.data, small.nbytes) is None
    assert all(arena.offset_of(a.ctypes.data, a.nbytes) is not None for a in together)
    big[:] = 1
    assert int(big.sum()) == len(big)
    after = columns.pooled(arena.min_block // 8, np.int64)       # the arena off: the pool again
    assert arena.offset_of(after.ctypes.data, after.nbytes) is None


def test_a_full_arena_leaves_pooled_to_the_pool(arena):
    held = arena.take(8 * SIZE_STEP)
    columns.set_arena(arena)
    try:
        made = columns.pooled(arena.min_block, np.uint8)
    finally:
        columns.set_arena(None)
    assert held is not None and arena.offset_of(made.ctypes.data, made.nbytes) is None
