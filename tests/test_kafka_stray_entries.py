"""``verify``'s check of a Kafka offset index against the batches found: the numpy check
(:func:`segstore_kafka.partition.stray_entries`) names the same entries, with the same values, as the
per-entry reference, whatever the index holds (entries out of order, past the walk, between
batches, a log cleaner's run of batches per entry)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka import partition
from segstore_kafka.partition import stray_entries, stray_entries_reference


@st.composite
def cases(draw):
    sizes = draw(st.lists(st.integers(1, 50), max_size=30))
    starts = np.cumsum([0, *sizes[:-1]]).astype(np.int64) if sizes else np.zeros(0, np.int64)
    lasts = np.array(draw(st.lists(st.integers(0, 12), min_size=len(starts), max_size=len(starts))),
                     np.int64)
    end = int(sum(sizes))
    walked = draw(st.integers(0, end))
    points = st.one_of(st.sampled_from(starts.tolist()) if len(starts) else st.just(0),
                       st.integers(0, end + 10))
    n = draw(st.integers(0, 25))
    positions = np.array(draw(st.lists(points, min_size=n, max_size=n)), np.int64)
    relative = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), np.int64)
    base = draw(st.sampled_from([0, 5, 1 << 40, (1 << 63) - 10]))
    return base, relative, positions, starts, lasts, walked, draw(st.booleans()) or walked == end


@settings(max_examples=300, deadline=None)
@given(cases(), st.booleans())
def test_stray_entries_as_the_reference(case, few_pairs):
    base, relative, positions, starts, lasts, walked, whole = case
    expected = stray_entries_reference(base, relative, positions, starts, lasts, walked, whole)
    saved = partition.MAX_PAIRS
    partition.MAX_PAIRS = 3 if few_pairs else saved     # the per-entry way past the limit
    try:
        assert stray_entries(base, relative, positions, starts, lasts, walked, whole) == expected
    finally:
        partition.MAX_PAIRS = saved


def test_a_good_index_has_no_stray_entries():
    starts = np.arange(0, 1000, 100, dtype=np.int64)
    lasts = np.arange(9, 100, 10, dtype=np.int64)
    # one entry per batch, then one per run of two batches (the log cleaner's appends)
    assert stray_entries(0, lasts, starts, starts, lasts, 1000, True) == []
    assert stray_entries(0, lasts[1::2], starts[::2], starts, lasts, 1000, True) == []
    assert stray_entries(0, np.array([9]), np.array([50]), starts, lasts, 1000, True) == [(0, 9, 50, None)]
    # between two batches, the next one's offset: still no batch there
    assert stray_entries(0, np.array([19]), np.array([50]), starts, lasts, 1000, True) == [(0, 19, 50, None)]
    assert stray_entries(0, np.array([18]), np.array([100]), starts, lasts, 1000, True) == [(0, 18, 100, 19)]
