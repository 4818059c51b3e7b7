"""Rows grouped by an integer key, groups in first-seen order, each group's rows ascending.

What a columnar append does before it writes: a Kafka table's rows per (topic, partition), a
RocketMQ batch's per (topic, queue).  :func:`groups` counts keys of a narrow span (the usual
table's partitions or queues), finds a few groups of wider keys one by one and sorts only past
:data:`FEW_GROUPS` of those.  Pure numpy; thread-safe.
"""

from __future__ import annotations

import numpy as np

#: The most groups :func:`groups` finds one by one (more: by sorting).
FEW_GROUPS = 32
#: The widest span of keys :func:`counted_groups` counts in (a table of that many counts).
COUNTED_SPAN = 1 << 16


def groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``keys`` (int64) in first-seen order, the rows grouped by them in that order
    (each group's rows ascending) and where each group starts in them (and the end).
    ``O(n)`` passes for keys within :data:`COUNTED_SPAN` of each other (a table's partitions or
    queues), else ``O(n * groups)`` up to :data:`FEW_GROUPS` groups, else ``O(n log n)``."""
    found = counted_groups(keys)
    if found is None:
        found = few_groups(keys)
    return found if found is not None else sorted_groups(keys)


def pair_groups(high: np.ndarray, low: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`groups` of the rows' pairs ``(high, low)`` of two integer columns (a topic's code and a
    partition or queue): the distinct pairs' highs and lows in first-seen order, the rows, the bounds.
    A pair is keyed ``high * width + low`` with ``width`` the lows' span, so the partitions or queues
    of a few topics stay within :data:`COUNTED_SPAN` and are counted."""
    high, low = high.astype(np.int64), low.astype(np.int64)
    base = int(low.min()) if len(low) else 0
    width = int(low.max()) - base + 1 if len(low) else 1
    uniques, rows, bounds = groups(high * width + (low - base))
    highs, lows = np.divmod(uniques, width)
    return highs, lows + base, rows, bounds


def counted_groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`sorted_groups` for keys that span less than :data:`COUNTED_SPAN`: each key's rows
    counted, the rows ordered by a radix sort of their group numbers (one or two bytes), the
    groups put in first-seen order by their first rows.  None for a wider span."""
    if not len(keys):
        return None
    low = int(keys.min())
    span = int(keys.max()) - low + 1
    if span > COUNTED_SPAN:
        return None
    if span == 1:       # one key (a write to one queue: pair_groups 223 -> 42 us a write of 8192 rows)
        return np.array([low], np.int64), np.arange(len(keys)), np.array([0, len(keys)], np.int64)
    shifted = keys - low
    counts = np.bincount(shifted, minlength=span)
    present = np.flatnonzero(counts)
    number = np.zeros(span, np.uint8 if len(present) <= 256 else np.uint16)
    number[present] = np.arange(len(present))
    group_of = number[shifted]
    rows = np.argsort(group_of, kind="stable")      # a radix sort for one- and two-byte keys
    sizes = counts[present]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    # groups so far in key order; a group's first row is where its key was first seen
    order = np.argsort(rows[bounds[:-1]], kind="stable")
    if (order != np.arange(len(order))).any():
        rank = np.empty(len(order), group_of.dtype)
        rank[order] = np.arange(len(order))
        rows = np.argsort(rank[group_of], kind="stable")
        present, sizes = present[order], sizes[order]
        bounds = np.concatenate(([0], np.cumsum(sizes)))
    return present.astype(np.int64) + low, rows, bounds


def few_groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`sorted_groups` for keys of a few distinct values: each group found by its first row
    among those left, its rows marked, then the rows ordered by a radix sort of their group numbers
    (one byte each).  None where there are more than :data:`FEW_GROUPS` groups."""
    if not len(keys):
        return sorted_groups(keys)
    left = np.ones(len(keys), bool)
    group_of = np.zeros(len(keys), np.uint8)
    uniques: list[int] = []
    while len(uniques) < FEW_GROUPS:
        first = int(np.argmax(left))
        if not left[first]:
            break
        mine = keys == keys[first]
        group_of[mine] = len(uniques)
        left &= ~mine
        uniques.append(int(keys[first]))
    else:
        if left.any():
            return None
    rows = np.argsort(group_of, kind="stable")       # a radix sort for one-byte keys
    bounds = np.concatenate(([0], np.cumsum(np.bincount(group_of, minlength=len(uniques)))))
    return np.array(uniques, np.int64), rows, bounds


def sorted_groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`groups` by sorting: the reference of :func:`few_groups`, and the path past
    :data:`FEW_GROUPS` groups."""
    uniques, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")         # groups in first-seen order
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    group_of = rank[inverse.reshape(-1)]
    rows = np.argsort(group_of, kind="stable")
    bounds = np.searchsorted(group_of[rows], np.arange(len(order) + 1))
    return uniques[order], rows, bounds
