"""The Kafka conversion writer's grouping of a batch by (topic, partition) (``_Batch.grouped``): the
order of numpy's stable sort of the int64 key ``topic code << 32 | partition``, whichever key it sorts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka.conversion import _Batch


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 300), st.sampled_from([0, 1, 2, 7, 255, 4096, 2**31 - 1])),
                     min_size=1, max_size=300))
def test_grouped_is_the_stable_order_by_topic_and_partition(rows):
    topics = pa.array([f"t{t}" for t, _ in rows])
    partitions = pa.array([p for _, p in rows], pa.int32())
    batch = pa.RecordBatch.from_arrays([topics, partitions], ["topic", "partition"])
    codes = pc.dictionary_encode(topics).indices.to_numpy().astype(np.int64)
    key = (codes << 32) | partitions.to_numpy().astype(np.int64)
    order = np.argsort(key, kind="stable")
    # (grouped's __init__ reads more columns: only the order and the groups are checked here)
    seen = {}

    def init(self, batch, order, edges, keys):
        seen.update(order=order, edges=edges, keys=keys)

    original = _Batch.__init__
    _Batch.__init__ = init
    try:
        _Batch.grouped(batch)
    finally:
        _Batch.__init__ = original
    assert seen["order"].tolist() == order.tolist()
    edges = [0, *(np.flatnonzero(np.diff(key[order])) + 1).tolist(), len(rows)]
    assert seen["edges"].tolist() == edges
    assert seen["keys"] == [(f"t{rows[i][0]}", rows[i][1]) for i in order[edges[:-1]].tolist()]
