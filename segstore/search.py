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
import functools
from collections.abc import Callable

import numpy as np

WARM_BYTES = 8192
#: Below this many entries a non-native column slice is converted and searched in C.
NARROW_TO = 64


class Bound(enum.Enum):
    """Which side of the target a search returns."""

    LARGEST_LOWER = "largest_lower"     # largest i with keys[i] <= target
    SMALLEST_UPPER = "smallest_upper"   # smallest i with keys[i] >= target


_LARGEST_LOWER = Bound.LARGEST_LOWER


@functools.lru_cache(maxsize=64)
def _int_range(dtype: np.dtype) -> tuple[int, int]:
    """An integer dtype's smallest and largest value (``np.iinfo`` costs more than a short search)."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def search(keys: np.ndarray, target: int | float, bound: Bound, lo: int = 0, hi: int | None = None) -> int:
    """Binary search ``keys[lo:hi]`` (non-decreasing) for ``target``.

    :returns: for ``LARGEST_LOWER`` the largest ``i`` in ``[lo, hi)`` with
        ``keys[i] <= target``, or ``lo - 1`` if none; for ``SMALLEST_UPPER`` the
        smallest ``i`` with ``keys[i] >= target``, or ``hi`` if none.

    Runtime complexity: ``O(log(n))`` for any column: a big-endian or strided
    column (a field of an mmap'd index) is narrowed by probing single entries
    until at most :data:`NARROW_TO` remain, because ``np.searchsorted`` would
    first convert the whole column to native order, ``O(n)``.
    Thread-safe (reads only).
    """
    n = len(keys)
    hi = n if hi is None else min(hi, n)
    if lo >= hi:
        return lo - 1 if bound is Bound.LARGEST_LOWER else hi
    right = bound is _LARGEST_LOWER   # LARGEST_LOWER is bisect_right - 1; SMALLEST_UPPER bisect_left
    dtype = keys.dtype
    if dtype.kind in "iu" and isinstance(target, int):
        # A Python int target makes searchsorted cast the whole column to int64 first:
        # give it the column's own scalar type (out-of-range targets answer directly).
        smallest, largest = _int_range(dtype)
        if target > largest:
            return hi - 1 if right else hi
        if target < smallest:
            return lo - 1 if right else lo
        target = dtype.type(target)
    warm = max(1, WARM_BYTES // (dtype.itemsize or 8))
    if hi - lo > warm:
        first_warm = hi - warm
        # The target is in the warm tail when the tail's first key is below it.
        pivot = keys.item(first_warm)
        if (pivot <= target) if right else (pivot < target):
            lo = first_warm
    if not (dtype.isnative and keys.flags.c_contiguous):
        # Narrow with O(log n) single-entry probes; each compares one converted scalar.
        while hi - lo > NARROW_TO:
            mid = (lo + hi) // 2
            if (keys[mid] <= target) if right else (keys[mid] < target):
                lo = mid + 1
            else:
                hi = mid
    # The ndarray method: np.searchsorted's dispatch wrapper costs more than the search.
    column = keys if lo == 0 and hi == n else keys[lo:hi]
    found = lo + int(column.searchsorted(target, side="right" if right else "left"))
    return found - 1 if right else found



def first_true(probe: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest ``i`` in ``[lo, hi)`` with ``probe(i)`` true, or ``hi`` if none.

    :func:`search`'s ``SMALLEST_UPPER`` over keys that are not in memory (each
    probe reads the log: a consume-queue entry and its message, say); ``probe``
    must be monotone (false then true).  Runtime complexity: ``O(log(hi - lo))``
    probes.  Thread-safe if ``probe`` is.
    """
    while lo < hi:
        mid = (lo + hi) // 2
        if probe(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
