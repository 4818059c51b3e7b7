"""A read's iterator read on after the store's ``close()`` raises ``StoreClosedError``, on both
formats and every read, wherever it was paused.

Before: a Kafka ``scan()``/``scan_arrow()``/``dump`` resumed after close reported false damage
(``00000000000000000007.log:0: a batch length of at least 14, found 0``: a closed ``.log`` has no
descriptor, and ``mmap`` takes descriptor -1 for an anonymous map of zeros), and ``read()``, or any
read paused at a partition's (queue's) end, stopped early without a word (a closed store's
partitions and segments are gone from its maps).  RocketMQ's ``scan_arrow(topic, partition)`` ended
early too.  The brokers refuse the store once it is shut down rather than read a closed file:
RocketMQ 4.9.7 ``DefaultMessageStore.getMessage`` ("message store has shutdown, so getMessage is
forbidden"), Kafka 3.8.0 ``LocalLog.checkIfMemoryMappedBufferClosed`` (a ``KafkaStorageException``
once the log's buffers are closed); segstore's reads say the store is closed, as its RocketMQ
``scan`` and ``read`` did.
"""

from __future__ import annotations

import pytest

import segstore
from segstore import files
from segstore.errors import StoreClosedError

READS = {
    "scan": lambda s, t: s.scan(),
    "read": lambda s, t: s.read(t, 0),
    "scan_arrow": lambda s, t: s.scan_arrow(batch_rows=1, threads=1),
    "scan_arrow_threads": lambda s, t: s.scan_arrow(batch_rows=1, threads=4),
    "scan_arrow_queue": lambda s, t: s.scan_arrow(topic=t, partition=1, batch_rows=1, threads=1),
    "dump": lambda s, t: s.dump(),
    "dump_json": lambda s, t: s.dump_json(),
    "dump_text": lambda s, t: s.dump_text(),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Both formats: two partitions (queues), several segments (commitlog files) each."""
    root = tmp_path_factory.mktemp("closed")
    with segstore.open(root / "k", format="kafka", mode="a", **{"segment.bytes": 500}) as s:
        for i in range(20):
            s.append({"topic": "t", "partition": i % 2, "value": b"v%d" % i})
    with segstore.open(root / "r", format="rocketmq", mode="a", mappedFileSizeCommitLog=4096,
                       mappedFileSizeConsumeQueue=200, maxHashSlotNum=16, maxIndexNum=64) as s:
        for i in range(60):
            s.append({"topic": "T", "queue_id": i % 2, "body": b"v" * 50})
    return {"kafka": (root / "k", "t"), "rocketmq": (root / "r", "T")}


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("how", list(READS))
def test_a_read_resumed_after_close_raises_store_closed_wherever_it_paused(stores, fmt, how):
    path, topic = stores[fmt]
    with segstore.open(path) as store:
        total = len(list(READS[how](store, topic)))
    assert total >= 2
    for taken in range(1, total):
        store = segstore.open(path)
        items = iter(READS[how](store, topic))
        for _ in range(taken):
            next(items)
        store.close()
        with pytest.raises(StoreClosedError):
            next(items)
            list(items)     # nothing may end the read quietly after the first item either


LOOKUPS = {
    "topics": lambda s, t: s.topics(),
    "partitions": lambda s, t: s.partitions(t),
    "offset_range": lambda s, t: s.offset_range(t, 0),
    "segment_infos": lambda s, t: s.segment_infos(t, 0),
    "offsets_between": lambda s, t: s.offsets_between(t, 0),
    "time_windows": lambda s, t: s.time_windows(None, None, 0, 2**62),
}


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("mode", ["r", "a"])
@pytest.mark.parametrize("how", list(LOOKUPS))
def test_a_lookup_on_a_closed_store_raises_store_closed(stores, fmt, mode, how):
    """Before, a closed Kafka store answered from what close() left of its maps: the topics and offsets
    it had held, but no segments (``segment_infos`` ``[]``) and no records in any time window
    (``time_windows`` ``{}``), wrong answers a planner took for an empty log.  RocketMQ refused."""
    path, topic = stores[fmt]
    store = segstore.open(path, mode=mode)
    assert LOOKUPS[how](store, topic)
    store.close()
    with pytest.raises(StoreClosedError, match="store is closed"):
        LOOKUPS[how](store, topic)


def test_a_closed_append_file_refuses_reads_instead_of_mapping_zeros(tmp_path):
    """``mmap.mmap(-1, n)`` is an anonymous map of n zeros: a closed file must not reach it."""
    path = tmp_path / "f.log"
    path.write_bytes(b"data")
    f = files.AppendFile(path)
    assert bytes(f.view()) == b"data"
    f.close()
    for read in (f.view, lambda: f.read(0, 4), lambda: f.window(0, 4)):
        with pytest.raises(StoreClosedError, match="file is closed"):
            read()


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("how", ["config_notes", "tail_error"])
def test_calls_whose_answer_may_be_empty_raise_store_closed_after_close(stores, fmt, how):
    """Before, a closed RocketMQ store answered ``config_notes()`` ``[]`` and ``tail_error`` None (the base
    class's defaults: no notes, no torn tail), where a closed Kafka store raised StoreClosedError."""
    path, topic = stores[fmt]
    store = segstore.open(path)
    calls = {"config_notes": lambda: store.config_notes(), "tail_error": lambda: store.tail_error(topic, 0)}
    call = calls[how]
    assert not call()
    store.close()
    with pytest.raises(StoreClosedError, match="store is closed"):
        call()
