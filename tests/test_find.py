"""``Store.find(topic, key, ...)`` and ``Store.offset_for_time(...)``: one call, the same meaning, on both
formats (the public API).  Expected answers come from a plain scan of the same store."""

from __future__ import annotations

import io

import pytest
from conftest import FIXTURES, copy_writable

import segstore
from segstore import cli
from segstore.errors import NotFoundError

ROCKETMQ = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA = FIXTURES / "kafka" / "uncompressed" / "topic-0"


def _kafka_with_key_index(tmp_path):
    part = copy_writable(KAFKA, tmp_path / "topic-0")
    assert cli.main(["index", "build", str(part), "--index", "key"], io.StringIO()) == 0
    return part


def test_find_on_rocketmq_returns_every_message_carrying_the_key():
    with segstore.open(ROCKETMQ) as store:
        scanned = [
            (m.queue_id, m.queue_offset) for m in store.scan() if m.topic == "TopicA" and "shared-0" in m.keys
        ]
        found = store.find("TopicA", "shared-0")
        assert sorted((m.queue_id, m.queue_offset) for m in found) == sorted(scanned) and len(scanned) > 1
        assert [(m.queue_id, m.queue_offset) for m in found] == sorted(scanned)  # partition, then offset
        one = store.find("TopicA", "shared-0", partition=scanned[0][0])
        assert {m.queue_id for m in one} == {scanned[0][0]}
        newest = store.find("TopicA", "shared-0", max_hits=1)
        assert len(newest) == len({q for q, _ in scanned})
        assert store.find("TopicA", "no-such-key") == []


def test_find_on_kafka_returns_records_with_that_key(tmp_path):
    part = _kafka_with_key_index(tmp_path)
    with segstore.open(part) as store:
        scanned = [r.offset for r in store.scan() if r.key == b"key-14"]
        found = store.find("topic", "key-14")
        assert [r.offset for r in found] == scanned and len(scanned) > 1
        assert all(r.key == b"key-14" for r in found)
        assert [r.offset for r in store.find("topic", b"key-14", max_hits=1)] == scanned[-1:]
        window = [
            r.offset
            for r in store.scan()
            if r.key == b"key-14" and found[0].timestamp <= r.timestamp <= found[0].timestamp
        ]
        assert [
            r.offset for r in store.find("topic", "key-14", begin=found[0].timestamp, end=found[0].timestamp)
        ] == window


def test_find_on_kafka_without_a_key_index_scans_the_key_column_to_the_same_answer(tmp_path):
    part = _kafka_with_key_index(tmp_path)
    calls = [("key-14", {}), (b"key-14", {"max_hits": 1}), ("key-3", {"partition": 0}), ("nope", {})]
    with segstore.open(part) as indexed, segstore.open(KAFKA) as scanned:
        assert "key" in indexed.indexes and scanned.indexes is None
        for key, options in calls:
            want = [(r.partition, r.offset) for r in indexed.find("topic", key, **options)]
            assert [(r.partition, r.offset) for r in scanned.find("topic", key, **options)] == want
        hits = scanned.find("topic", "key-14")
        first = hits[0].timestamp
        assert [r.offset for r in scanned.find("topic", "key-14", begin=first, end=first)] == [
            r.offset for r in hits if r.timestamp == first]
        assert scanned.find("topic", "key-14", partition=7) == scanned.find("other", "key-14") == []


@pytest.mark.parametrize("path,topic", [(ROCKETMQ, "TopicA"), (KAFKA, "topic")], ids=["rocketmq", "kafka"])
def test_offset_for_time_is_the_first_offset_at_or_after_the_time(path, topic):
    with segstore.open(path) as store:
        partition = store.partitions(topic)[0]
        start, _ = store.offset_range(topic, partition)
        records = list(store.read(topic, partition, start))
        # the time each format indexes: Kafka the record timestamp, RocketMQ the store timestamp
        times = [getattr(r, "store_timestamp", None) or r.timestamp for r in records]
        offsets = [
            getattr(r, "queue_offset", None) if store.format == "rocketmq" else r.offset for r in records
        ]
        for i in (0, len(records) // 2, len(records) - 1):
            # ListOffsets / getOffsetInQueueByTime: the first offset, in offset order, whose time is >= target
            target = times[i]
            assert store.offset_for_time(topic, partition, target) == next(
                o for o, t in zip(offsets, times, strict=True) if t >= target
            )
        assert store.offset_for_time(topic, partition, max(times) + 1) is None
        assert store.offset_for_time(topic, partition, min(times) - 1) == start


@pytest.mark.parametrize("path,topic", [(ROCKETMQ, "TopicA"), (KAFKA, "topic")], ids=["rocketmq", "kafka"])
def test_offset_for_time_of_a_partition_the_store_lacks_is_not_found(path, topic):
    with segstore.open(path) as store, pytest.raises(NotFoundError):
        store.offset_for_time(topic, 99, 0)
