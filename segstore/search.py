"""The one binary search every index layout looks up through.

Kafka's ``AbstractIndex`` names its two searches by the exact bound they return
(``largestLowerBoundSlotFor``, ``smallestUpperBoundSlotFor``); so do we.  The key
column is a numpy array (usually a field of a structured array viewing an mmap:
a strided, zero-copy column), searched with ``np.searchsorted`` in C.  Keys must
be non-decreasing in ``[lo, hi)``.

Like Kafka, the search looks first at the "warm" tail of the column (the last
8 KiB of entries): most lookups are for recent data, and those pages stay in the
page cache, so a cold index is not paged in for a tail read.
"""

from __future__ import annotations

import enum

import numpy as np

WARM_BYTES = 8192


class Bound(enum.Enum):
    """Which side of the target a search returns."""

    LARGEST_LOWER = "largest_lower"     # largest i with keys[i] <= target
    SMALLEST_UPPER = "smallest_upper"   # smallest i with keys[i] >= target


def search(keys: np.ndarray, target: int | float, bound: Bound, lo: int = 0, hi: int | None = None) -> int:
    """Binary search ``keys[lo:hi]`` (non-decreasing) for ``target``.

    :returns: for ``LARGEST_LOWER`` the largest ``i`` in ``[lo, hi)`` with
        ``keys[i] <= target``, or ``lo - 1`` if none; for ``SMALLEST_UPPER`` the
        smallest ``i`` with ``keys[i] >= target``, or ``hi`` if none.
    Runtime complexity: ``O(log(n))``.  Thread-safe (reads only).
    """
    n = len(keys)
    hi = n if hi is None or hi > n else hi
    if lo >= hi:
        return lo - 1 if bound is Bound.LARGEST_LOWER else hi
    largest = bound is Bound.LARGEST_LOWER
    start = lo
    warm = max(1, WARM_BYTES // (keys.dtype.itemsize or 8))
    if hi - lo > warm:
        first_warm = hi - warm
        # The target is in the warm tail when the tail's first key is below it.
        pivot = keys[first_warm]
        if (pivot <= target) if largest else (pivot < target):
            start = first_warm
    # The array method, not np.searchsorted (which adds a dispatch layer), and no
    # slice when the whole array is searched: both count on small, hot lookups.
    column = keys if start == 0 and hi == n else keys[start:hi]
    if largest:
        return start + int(column.searchsorted(target, "right")) - 1
    return start + int(column.searchsorted(target, "left"))
