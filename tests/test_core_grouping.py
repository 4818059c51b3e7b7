"""segstore.grouping: rows grouped by key, first-seen order, as a dict of lists groups them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from segstore import grouping


def by_dict(keys: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for row, key in enumerate(keys):
        out.setdefault(key, []).append(row)
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=80), st.integers(1, 45))
def test_groups_are_the_rows_of_each_key_in_first_seen_order(draws, distinct):
    """Both ways (a pass a group up to FEW_GROUPS groups, a sort past them) give what a dict of
    lists gives; few_groups leaves more than FEW_GROUPS groups to the sort."""
    keys = [(d % distinct) * (1 << 32) + d % 7 for d in draws]
    want = by_dict(keys)
    array = np.array(keys, np.int64)
    few = grouping.few_groups(array)
    assert (few is None) == (len(want) > grouping.FEW_GROUPS)
    counted = grouping.counted_groups(array)
    assert (counted is None) == (not keys or max(keys) - min(keys) >= grouping.COUNTED_SPAN)
    small = grouping.counted_groups(array % 1000)        # the same rows in a narrow span
    assert small is not None or not keys
    for found in (grouping.groups(array), grouping.sorted_groups(array), few, counted):
        if found is None:
            continue
        uniques, rows, bounds = found
        assert uniques.tolist() == list(want)
        assert bounds.tolist()[0] == 0 and bounds.tolist()[-1] == len(keys)
        got = {key: rows[bounds[i]:bounds[i + 1]].tolist() for i, key in enumerate(uniques.tolist())}
        assert got == want
    if small is not None:
        uniques, rows, bounds = small
        narrow = by_dict([key % 1000 for key in keys])
        assert uniques.tolist() == list(narrow)
        got = {key: rows[bounds[i]:bounds[i + 1]].tolist() for i, key in enumerate(uniques.tolist())}
        assert got == narrow


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 70_000)), max_size=80))
def test_pairs_group_as_a_dict_of_lists_groups_them(pairs):
    """pair_groups (a topic's code and a partition or queue) gives the pairs in first-seen order with
    their rows, whatever the lows' span (negative lows too)."""
    want = by_dict(pairs)
    highs, lows, rows, bounds = grouping.pair_groups(np.array([h for h, _ in pairs], np.int64),
                                                     np.array([lo for _, lo in pairs], np.int32))
    found = list(zip(highs.tolist(), lows.tolist(), strict=True))
    assert found == list(want)
    assert {pair: rows[bounds[i]:bounds[i + 1]].tolist() for i, pair in enumerate(found)} == want
