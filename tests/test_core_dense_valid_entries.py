"""``valid_entries`` (how many leading consume-queue slots are entries, checked in doubling steps)
equals a check of every slot, wherever the first non-entry lies."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from segstore.indexes import dense
from segstore.indexes.dense import CQ_DTYPE, valid_entries


def every_slot(slots: np.ndarray) -> int:
    """The reference: the first slot that is not an entry over all slots at once."""
    bad = np.flatnonzero((slots["offset"] < 0) | (slots["size"] <= 0))
    return int(bad[0]) if len(bad) else len(slots)


@given(st.integers(0, 5 * dense.FIRST_CHECK), st.data())
@settings(max_examples=200, deadline=None)
def test_valid_entries_equal_a_check_of_every_slot(n: int, data: st.DataObject) -> None:
    slots = np.zeros(n, CQ_DTYPE)
    slots["offset"] = np.arange(n) * 100
    slots["size"] = 100
    first = data.draw(st.integers(0, n), label="first non-entry")
    if first < n:
        field, value = data.draw(st.sampled_from([("offset", -1), ("size", 0), ("size", -5)]))
        slots[field][first] = value
        for later in data.draw(st.lists(st.integers(first, n - 1), max_size=5)):   # more damage after it
            slots["size"][later] = 0
    assert valid_entries(slots) == every_slot(slots) == first
