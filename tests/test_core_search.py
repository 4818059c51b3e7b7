"""The one binary search, against a bisect oracle."""

import bisect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segstore.search import WARM_BYTES, Bound, search

sorted_lists = st.lists(st.integers(-(2**40), 2**40), max_size=3000).map(sorted)


@settings(max_examples=300)
@given(sorted_lists, st.integers(-(2**40) - 2, 2**40 + 2), st.sampled_from(["<i8", ">i8", ">i4"]))
def test_search_matches_bisect(keys, target, dtype):
    if dtype == ">i4":
        keys = [max(min(k, 2**31 - 1), -(2**31)) for k in keys]
        target = max(min(target, 2**31 - 1), -(2**31))
    arr = np.array(keys, dtype=dtype)
    assert search(arr, target, Bound.LARGEST_LOWER) == bisect.bisect_right(keys, target) - 1
    assert search(arr, target, Bound.SMALLEST_UPPER) == bisect.bisect_left(keys, target)


@settings(max_examples=200)
@given(sorted_lists, st.integers(-(2**40), 2**40), st.data())
def test_search_within_bounds(keys, target, data):
    lo = data.draw(st.integers(0, len(keys)))
    hi = data.draw(st.integers(lo, len(keys)))
    arr = np.array(keys, dtype=np.int64)
    assert search(arr, target, Bound.LARGEST_LOWER, lo, hi) == bisect.bisect_right(keys, target, lo, hi) - 1
    assert search(arr, target, Bound.SMALLEST_UPPER, lo, hi) == bisect.bisect_left(keys, target, lo, hi)


def test_warm_tail_boundaries():
    # Enough entries that the warm tail is a strict suffix; probe around its first key.
    n = WARM_BYTES // 8 * 3
    keys = np.arange(0, 2 * n, 2, dtype=np.int64)
    first_warm = n - WARM_BYTES // 8
    for target in range(2 * first_warm - 3, 2 * first_warm + 4):
        assert search(keys, target, Bound.LARGEST_LOWER) == bisect.bisect_right(keys.tolist(), target) - 1
        assert search(keys, target, Bound.SMALLEST_UPPER) == bisect.bisect_left(keys.tolist(), target)


def test_duplicates_and_structured_column():
    dt = np.dtype([("ts", ">i8"), ("off", ">i4")])
    entries = np.array([(1, 0), (3, 1), (3, 2), (3, 3), (9, 4)], dtype=dt)
    assert search(entries["ts"], 3, Bound.LARGEST_LOWER) == 3
    assert search(entries["ts"], 3, Bound.SMALLEST_UPPER) == 1
    assert search(entries["ts"], 0, Bound.LARGEST_LOWER) == -1
    assert search(entries["ts"], 10, Bound.SMALLEST_UPPER) == 5


@pytest.mark.parametrize("bound", list(Bound))
def test_empty(bound):
    expected = -1 if bound is Bound.LARGEST_LOWER else 0
    assert search(np.zeros(0, dtype=np.int64), 5, bound) == expected


@settings(max_examples=200)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=500).map(sorted), st.integers(-(2**40), 2**40),
       st.sampled_from(["<i4", ">i4", "<u4"]))
def test_targets_outside_the_column_type(keys, target, dtype):
    if dtype == "<u4":
        keys = sorted(k + 2**31 for k in keys)
    arr = np.array(keys, dtype=dtype)
    assert search(arr, target, Bound.LARGEST_LOWER) == bisect.bisect_right(keys, target) - 1
    assert search(arr, target, Bound.SMALLEST_UPPER) == bisect.bisect_left(keys, target)
