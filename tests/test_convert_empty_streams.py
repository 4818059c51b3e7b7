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


def test_a_kafka_topic_named_rmq_nonqueued_keeps_its_empty_partitions(tmp_path: Path) -> None:
    """``rmq.nonqueued`` is a legal Kafka topic name; the RocketMQ side took every stream of that name for
    the partition of the prepared messages it writes (which go to no queue), so the empty partitions of
    a Kafka topic of that name got no queue and came back missing, and ``--verify`` passed."""
    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        store.append_batch([Message("rmq.nonqueued", b"v", partition=0, timestamp=1000)])
        store.partition_of("rmq.nonqueued", 1, create=True)
        store.partition_of("rmq.nonqueued", 2, create=True).start_at(5)
    before = _ranges(src)
    convert(str(src), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    assert sorted(_ranges(tmp_path / "r")) == [("rmq%2Enonqueued", 0), ("rmq%2Enonqueued", 1),
                                               ("rmq%2Enonqueued", 2)]
    convert(str(tmp_path / "r"), str(tmp_path / "k2"), to="kafka", verify=True)
    assert _ranges(tmp_path / "k2") == before == {("rmq.nonqueued", 0): (0, 1), ("rmq.nonqueued", 1): (0, 0),
                                                  ("rmq.nonqueued", 2): (5, 5)}


def test_verify_catches_a_dropped_empty_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _kafka_source(tmp_path / "k")
    original = RocketMQConversion.open_streams

    def dropping(self, dest, extents, options):
        return original(self, dest, [e for e in extents if (e.topic, e.partition) != ("empty.v1", 1)],
                        options)

    monkeypatch.setattr(RocketMQConversion, "open_streams", dropping)
    with pytest.raises(ConversionError, match=r"empty\.v1-1: expected an empty queue empty%2Ev1/1, found"):
        convert(str(source), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)


def test_a_kafka_log_end_past_its_last_record_comes_back(tmp_path: Path) -> None:
    """A partition whose log end offset lies past its last record (the cleaner removed the records at the
    end of the log, or they were aborted and compacted away, and the active segment is an empty one named
    by the log end) comes back ending there: Kafka 3.8.0 ``LogLoader.load`` takes the log end offset from
    the last segment (``LogSegment.readNextOffset``: its base offset when it is empty), and a consumer
    that committed that offset would otherwise be past the end (``OffsetOutOfRangeException``)."""
    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, partition=0, timestamp=1000 + i) for i in range(5)])
        store.append_batch([Message("t", b"w", partition=1, timestamp=1000)])
    (src / "t-0" / f"{10:020d}.log").write_bytes(b"")
    before = _ranges(src)
    assert before == {("t", 0): (0, 10), ("t", 1): (0, 1)}
    convert(str(src), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    convert(str(tmp_path / "r"), str(tmp_path / "back"), to="kafka", verify=True)
    assert _ranges(tmp_path / "back") == before
    logs = sorted(p.name for p in (tmp_path / "back" / "t-0").glob("*.log"))
    assert logs == [f"{0:020d}.log", f"{10:020d}.log"]
    with segstore.open(tmp_path / "back") as store:
        assert store.verify() == []
        assert [(r.partition, r.offset) for r in store.scan()] == [(0, i) for i in range(5)] + [(1, 0)]


def test_verify_catches_a_kafka_log_end_left_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from segstore_kafka.conversion import KafkaConversion

    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, partition=0, timestamp=1000 + i) for i in range(5)])
    (src / "t-0" / f"{10:020d}.log").write_bytes(b"")
    convert(str(src), str(tmp_path / "r"), to="rocketmq", config=ROCKETMQ_CONFIG)
    monkeypatch.setattr(KafkaConversion, "close_streams", lambda self, dest, extents, options: None)
    with pytest.raises(ConversionError, match=r"t-0: expected offsets from 0 to at least 10, found 0 to 5"):
        convert(str(tmp_path / "r"), str(tmp_path / "back"), to="kafka", verify=True)


def test_a_copy_without_its_journal_ending_in_transaction_markers_verifies(tmp_path: Path) -> None:
    """The markers at the end of a partition are rolled-back messages no consume queue holds: the queue
    ends at the last data record, the partition converted back past it (Kafka 3.8.0 control batches hold
    offsets), and --verify takes that."""
    from segstore_kafka import batch as codec

    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        part = store.partition_of("t", 0, create=True)
        producer = {"producer_id": 7, "producer_epoch": 0}
        part.append_encoded(codec.encode_batch([(b"k", b"v", 1000)], base_offset=0, is_transactional=True,
                                               **producer), now_ms=1000)
        part.append_encoded(codec.encode_control_batch("COMMIT", base_offset=1, coordinator_epoch=1,
                                                       timestamp=1001, **producer), now_ms=1001)
    convert(str(src), str(tmp_path / "r"), to="rocketmq", config=ROCKETMQ_CONFIG)
    (tmp_path / "r" / "segstore-convert.json").unlink()
    convert(str(tmp_path / "r"), str(tmp_path / "back"), to="kafka", verify=True)
    assert _ranges(tmp_path / "back") == _ranges(src) == {("t", 0): (0, 2)}


def _marker_only_source(path: Path) -> Path:
    """``t-0``: log start 5 and only an ABORT marker at 5 (its transaction's records removed by retention
    or compaction, as Kafka 3.8.0 ``LogCleaner`` keeps a marker until ``delete.retention.ms``); ``t-1``:
    one record."""
    from segstore_kafka import batch as codec

    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"w", partition=1, timestamp=1000)])
        part = store.partition_of("t", 0, create=True)
        part.start_at(5)
        part.append_encoded(codec.encode_control_batch("ABORT", base_offset=5, coordinator_epoch=1,
                                                       timestamp=1001, producer_id=7, producer_epoch=0),
                            now_ms=1001)
    return path


def test_a_partition_of_transaction_markers_only_keeps_its_queue_and_its_log_start(tmp_path: Path) -> None:
    """A partition holding only markers (rolled-back messages no consume queue holds) had no queue in the
    RocketMQ copy (missing from topics.json, where the broker routes only the topics it holds:
    4.9.7 ``TopicConfigManager``), and came back to Kafka starting at 0 instead of its log start 5. It
    is an empty queue now, and the way back starts it where the journal recorded it (the queue never held
    a message: its min offset is 0), so that the marker lands at 5 and the log ends at 6 as in the source
    (3.8.0 ``LogLoader.load``)."""
    src = _marker_only_source(tmp_path / "k")
    before = _ranges(src)
    assert before == {("t", 0): (5, 6), ("t", 1): (0, 1)}
    convert(str(src), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    assert _ranges(tmp_path / "r") == {("t", 0): (0, 0), ("t", 1): (0, 1)}
    topics = json.loads((tmp_path / "r" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert (topics["t"]["readQueueNums"], topics["t"]["writeQueueNums"]) == (2, 2)
    convert(str(tmp_path / "r"), str(tmp_path / "back"), to="kafka", verify=True)
    assert _ranges(tmp_path / "back") == before
    with segstore.open(tmp_path / "back") as store:
        assert store.verify() == []
        assert [(r.partition, r.offset) for r in store.scan()] == [(0, 5), (1, 0)]   # the marker at 5
    # without the journal the start has nowhere to come from (as for an empty partition), but the run
    # still verifies: the marker comes back at its offset
    (tmp_path / "r" / "segstore-convert.json").unlink()
    convert(str(tmp_path / "r"), str(tmp_path / "back2"), to="kafka", verify=True)
    assert _ranges(tmp_path / "back2") == {("t", 0): (0, 6), ("t", 1): (0, 1)}


def test_verify_catches_a_marker_only_partition_without_its_queue(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    src = _marker_only_source(tmp_path / "k")
    monkeypatch.setattr(RocketMQConversion, "close_streams", lambda self, dest, extents, options: None)
    with pytest.raises(ConversionError, match=r"t-0: expected a queue t/0, found none"):
        convert(str(src), str(tmp_path / "r"), to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)


def test_a_rocketmq_copy_that_lost_its_tail_does_not_come_back_past_its_records(tmp_path: Path) -> None:
    """The journal's recorded log end (a Kafka log end past its last record, cleaned away) is taken only
    while the RocketMQ copy still holds every message the conversion wrote: the copy's commitlog ends
    where it ended then, or later.  A copy whose last message was torn and recovered away (4.9.7
    ``CommitLog.recoverAbnormally`` cuts the commitlog at the last whole message and
    ``truncateDirtyLogicFiles`` drops the consume-queue entries past it) came back as a partition ending
    at 10 holding offsets 0-3 only, and --verify passed: Kafka 3.8.0 ``LogLoader`` reads such a log end
    as records cleaned away, so a consumer never learns that offset 4 is missing."""
    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"w", partition=0, timestamp=1000)])
        store.append_batch([Message("t", b"v%d" % i, partition=1, timestamp=1000 + i) for i in range(5)])
    (src / "t-1" / f"{10:020d}.log").write_bytes(b"")         # t-1 ends at 10, its last record at 4
    assert _ranges(src) == {("t", 0): (0, 1), ("t", 1): (0, 10)}
    copy = tmp_path / "r"
    convert(str(src), str(copy), to="rocketmq", config=ROCKETMQ_CONFIG)
    convert(str(copy), str(tmp_path / "whole"), to="kafka", verify=True)
    assert _ranges(tmp_path / "whole") == _ranges(src)      # the copy whole: the recorded ends
    with segstore.open(copy) as store:
        last = max(store.scan(), key=lambda m: m.physical_offset)
    assert (last.topic, last.queue_id, last.queue_offset) == ("t", 1, 4)
    with open(next((copy / "commitlog").iterdir()), "r+b") as log:     # torn: the last message unwritten
        log.seek(last.physical_offset)
        log.write(bytes(last.size))
    with segstore.open(copy, format="rocketmq", mode="a", **ROCKETMQ_CONFIG) as store:
        store.recover()
    assert _ranges(copy) == {("t", 0): (0, 1), ("t", 1): (0, 4)}
    convert(str(copy), str(tmp_path / "back"), to="kafka", verify=True)
    assert _ranges(tmp_path / "back") == {("t", 0): (0, 1), ("t", 1): (0, 4)}


def test_a_rocketmq_copy_appended_to_by_a_producer_after_an_offset_gap_is_refused(tmp_path: Path) -> None:
    """Pins a limit (docs/conversion.md, Limits): a message a RocketMQ producer appended to a queue
    converted from a Kafka partition has no ``kafka.offset``; the way back gives it its queue offset,
    which the partition's records already use when their offsets had gaps (here DeleteRecords moved the
    log start to 1: Kafka offsets 1, 2 are queue offsets 0, 1, and the new message's queue offset is 2),
    so the run stops at it (nothing is left behind)."""
    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, partition=0, timestamp=1000) for i in range(3)])
        store.delete_records(1, topic="t", partition=0)
    copy = tmp_path / "r"
    convert(str(src), str(copy), to="rocketmq", config=ROCKETMQ_CONFIG)
    with segstore.open(copy, format="rocketmq", mode="a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "t", "queue_id": 0, "body": b"native"}])
    with pytest.raises(ConversionError, match=r"t-0: expected the source's offsets of t-0 to increase, "
                                              r"found offset 2 after 2"):
        convert(str(copy), str(tmp_path / "back"), to="kafka")
    assert not (tmp_path / "back").exists() and not (tmp_path / ".back.converting").exists()
