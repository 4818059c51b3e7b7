"""A conversion keeps every stream of the source, empty ones and their start offsets included.

Kafka keeps an empty partition as its directory with one empty segment named by its base offset,
the log start (Kafka 3.8.0 ``core/src/main/scala/kafka/log/LogLoader.scala`` ``load``: a directory
without segments gets one at the ``log-start-offset-checkpoint`` offset; the log start is the larger
of that checkpoint and the first segment's base).  RocketMQ keeps a queue as its consume-queue
directory and its topic's queue count in ``config/topics.json`` (RocketMQ 4.9.7
``DefaultMessageStore.loadConsumeQueue`` loads every ``consumequeue/TOPIC/QUEUEID`` directory, files
or none); it has no file that holds an empty queue's start offset (see docs/conversion.md), so the
start of an empty Kafka partition travels in the conversion journal and comes back from it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from segstore_rocketmq.conversion import RocketMQConversion

import segstore
from segstore.convert import convert
from segstore.errors import ConversionError
from segstore.records import Message

ROCKETMQ_CONFIG = {"maxHashSlotNum": 64, "maxIndexNum": 256, "mappedFileSizeCommitLog": 1 << 20}


def _ranges(path: Path) -> dict[tuple[str, int], tuple[int, int]]:
    with segstore.open(path) as store:
        return {(t, p): store.offset_range(t, p) for t in store.topics() for p in store.partitions(t)}


def _kafka_source(path: Path) -> Path:
    """``a``: 0 with records from log start 38 (DeleteRecords), 1 with records, 2 empty from 7;
    ``empty.v1``: 0 empty from 0, 1 empty from 12 (a name RocketMQ escapes)."""
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"v%d" % i, partition=0, timestamp=1000 + i) for i in range(50)])
        store.append_batch([Message("a", b"w%d" % i, partition=1, timestamp=1000 + i) for i in range(5)])
        store.partition_of("a", 2, create=True).start_at(7)
        store.partition_of("empty.v1", 0, create=True)
        store.partition_of("empty.v1", 1, create=True).start_at(12)
        store.delete_records(38, topic="a", partition=0)
    return path


def test_kafka_to_rocketmq_and_back_keeps_every_partition_and_its_log_start(tmp_path: Path) -> None:
    source = _kafka_source(tmp_path / "k")
    before = _ranges(source)
    assert before == {("a", 0): (38, 50), ("a", 1): (0, 5), ("a", 2): (7, 7),
                      ("empty.v1", 0): (0, 0), ("empty.v1", 1): (12, 12)}
    convert(str(source), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    # every queue is there, empty ones as their consume-queue directory, and in topics.json
    queues = _ranges(tmp_path / "r")
    assert sorted(queues) == [("a", 0), ("a", 1), ("a", 2), ("empty%2Ev1", 0), ("empty%2Ev1", 1)]
    assert queues[("a", 2)] == queues[("empty%2Ev1", 1)] == (0, 0)
    topics = json.loads((tmp_path / "r" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert {name: (t["readQueueNums"], t["writeQueueNums"]) for name, t in topics.items()} == {
        "a": (3, 3), "empty%2Ev1": (2, 2)}
    with segstore.open(tmp_path / "r") as store:
        assert store.verify() == []
    convert(str(tmp_path / "r"), str(tmp_path / "k2"), to="kafka", verify=True)
    assert _ranges(tmp_path / "k2") == before
    # as the broker keeps an empty partition: one empty segment named by the log start
    assert sorted(p.name for p in (tmp_path / "k2" / "empty.v1-1").glob("*.log")) == [f"{12:020d}.log"]
    assert sorted(p.name for p in (tmp_path / "k2" / "a-0").glob("*.log"))[0] == f"{38:020d}.log"
    with segstore.open(tmp_path / "k2") as store:
        assert store.verify() == []


def test_rocketmq_empty_queues_become_empty_partitions(tmp_path: Path) -> None:
    """Queues 1 and 3 of ``q`` hold nothing (their directories only): four partitions all the same."""
    path = tmp_path / "r"
    with segstore.open(path, format="rocketmq", mode="a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "q", "queue_id": qid, "body": b"x"} for qid in (0, 2, 2)])
    for qid in (1, 3):
        (path / "consumequeue" / "q" / str(qid)).mkdir()
    assert _ranges(path) == {("q", 0): (0, 1), ("q", 1): (0, 0), ("q", 2): (0, 2), ("q", 3): (0, 0)}
    convert(str(path), str(tmp_path / "k"), to="kafka", verify=True)
    assert _ranges(tmp_path / "k") == {("q", 0): (0, 1), ("q", 1): (0, 0), ("q", 2): (0, 2), ("q", 3): (0, 0)}
    convert(str(tmp_path / "k"), str(tmp_path / "r2"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    assert _ranges(tmp_path / "r2") == _ranges(path)


def test_verify_catches_a_dropped_empty_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _kafka_source(tmp_path / "k")
    original = RocketMQConversion.open_streams

    def dropping(self, dest, extents, options):
        return original(self, dest, [e for e in extents if (e.topic, e.partition) != ("empty.v1", 1)],
                        options)

    monkeypatch.setattr(RocketMQConversion, "open_streams", dropping)
    with pytest.raises(ConversionError, match=r"empty\.v1-1: expected an empty queue empty%2Ev1/1, found"):
        convert(str(source), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
