"""Kafka partitions and log directories: appends, rolls, retention, lookups against brute-force oracles."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka.batch import iter_batches
from segstore_kafka.checkpoints import read_offsets
from segstore_kafka.partition import KafkaConfig, Partition

import segstore
from segstore.cli import main
from segstore.errors import ConfigError, InvalidTopicError, MessageTooLargeError, OffsetOutOfRangeError
from segstore.records import Message
from segstore.testing.conformance import StoreTests


class TestKafkaConformance(StoreTests):
    format = "kafka"
    config: ClassVar[dict[str, object]] = {"segment.bytes": 4096, "index.interval.bytes": 512,
                                           "segment.index.bytes": 120}


class Clock:
    """A settable broker clock."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _partition(tmp_path: Path, clock: Clock | None = None, **config: object) -> Partition:
    return Partition(str(tmp_path / "t-0"), KafkaConfig.from_mapping(config), writable=True,
                     clock=clock or Clock())


def _records(rng: random.Random, n: int, ts: int) -> list[tuple]:
    return [(f"k{rng.randrange(99)}".encode(), rng.randbytes(rng.randrange(200)), ts + rng.randrange(-50, 50),
             [("h", b"v")] if rng.random() < 0.3 else []) for _ in range(n)]


def _all_batches(part: Partition) -> list:
    return [b for seg in part.segments for b in iter_batches(seg.view(), path=seg.path)]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), batches=st.integers(1, 60),
       interval=st.sampled_from([0, 100, 700]), segment_bytes=st.sampled_from([1500, 3000, 1 << 20]),
       compression=st.sampled_from(["none", "gzip", "lz4"]))
def test_lookups_match_a_linear_scan(tmp_path_factory: pytest.TempPathFactory, seed: int, batches: int,
                                     interval: int, segment_bytes: int, compression: str) -> None:
    rng = random.Random(seed)
    part = _partition(tmp_path_factory.mktemp("p"), **{"index.interval.bytes": interval,
                                                       "segment.bytes": segment_bytes,
                                                       "segment.index.bytes": 8 * 6})
    ts = 1_700_000_000_000
    for _ in range(batches):
        ts += rng.randrange(0, 100)
        part.append_records(_records(rng, rng.randrange(1, 6), ts), compression=compression)
    flat = [(b, r) for b in _all_batches(part) for r in b.records()]
    assert [r.offset for _, r in flat] == list(range(part.next_offset))
    for target in [rng.randrange(-2, part.next_offset + 2) for _ in range(25)]:
        found = part.translate_offset(target)
        want = next((b for b, r in flat if b.last_offset >= max(target, 0)), None)
        if want is None:
            assert found is None
        else:
            seg, pos = found
            assert (pos.offset, pos.position, pos.size) == (want.last_offset, want.position, want.size)
            assert seg.base <= want.base_offset
    stamps = sorted({r.timestamp for _, r in flat})
    for target in [rng.choice(stamps) + d for d in (-1, 0, 1) for _ in range(5)] + [0, stamps[-1] + 1]:
        found = part.offset_for_time(target)
        want = next(((r.timestamp, r.offset) for _, r in flat if r.timestamp >= target), None)
        assert (None if found is None else (found.timestamp, found.offset)) == want
    for seg in part.segments:
        assert len(seg.offset_index) <= seg.offset_index.capacity
    part.close()


def test_index_entries_follow_kafkas_interval_rule(tmp_path: Path) -> None:
    """Oracle: after each append, an entry (last offset, start) when > interval bytes came before it."""
    rng = random.Random(7)
    part = _partition(tmp_path, **{"index.interval.bytes": 300})
    expected, since, max_ts, max_off, times = [], 0, -1, 0, []
    for i in range(80):
        done = part.append_records(_records(rng, rng.randrange(1, 4), 1_700_000_000_000 + 10 * i))
        batch = next(iter_batches(part.log.active.view(), path="x", start=done.position))
        if batch.max_timestamp > max_ts:
            max_ts, max_off = batch.max_timestamp, batch.last_offset
        if since > 300:
            expected.append((done.last_offset, done.position))
            if not times or max_ts > times[-1][0]:
                times.append((max_ts, max_off))
            since = 0
        since += done.size
    seg = part.log.active
    assert [tuple(p) for p in seg.offset_index.pairs()] == expected
    assert [tuple(p) for p in seg.time_index.pairs()] == times
    part.close()


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    part = _partition(tmp_path, **{"segment.bytes": 1000})
    rng = random.Random(3)
    bases = []
    size = 0
    for i in range(40):
        done = part.append_records(_records(rng, 2, 1_700_000_000_000 + i))
        if size and size > 1000 - done.size:
            size = 0
        if size == 0:
            bases.append(done.base_offset)
        size += done.size
    assert [s.base for s in part.segments] == bases
    assert all(s.size <= 1000 for s in part.segments)
    # rolled segments have trimmed indexes and the max timestamp forced into the time index
    for seg in part.segments[:-1]:
        assert seg.offset_index.file.size == 8 * len(seg.offset_index)
        assert seg.time_index.last_entry.timestamp == max(b.max_timestamp for b in seg.batches())
    part.close()


def test_roll_on_segment_ms_and_full_index(tmp_path: Path) -> None:
    part = _partition(tmp_path, **{"segment.ms": 1000})
    for ts in (0, 500, 1000, 1001, 1500, 2002):
        part.append_records([(b"k", b"v", 1_700_000_000_000 + ts, [])])
    assert [s.base for s in part.segments] == [0, 3, 5]
    part.close()
    full = _partition(tmp_path / "full", **{"segment.index.bytes": 24, "index.interval.bytes": 0})
    for i in range(10):
        full.append_records([(b"k", b"v" * 10, 1_700_000_000_000 + i, [])])
    # time index of 2 slots is full after 1 entry (one kept for the roll): 2 batches a segment
    assert [s.base for s in full.segments] == [0, 2, 4, 6, 8]
    full.close()


def test_retention_bytes_and_ms_move_the_log_start(tmp_path: Path) -> None:
    clock = Clock(1_700_000_100_000)
    part = _partition(tmp_path, clock, **{"segment.bytes": 600, "retention.bytes": 1500})
    for i in range(30):
        part.append_records([(b"k", b"x" * 60, 1_700_000_000_000 + 1000 * i, [])], leader_epoch=i // 10)
        part.apply_retention()
        assert sum(s.size for s in part.segments) - part.segments[0].size < 1500
    assert part.log_start_offset == part.segments[0].base > 0
    assert part.epochs.entries[0].start_offset == part.log_start_offset
    part.close()
    clock.now = 1_700_000_000_000 + 1000 * 25
    aged = Partition(str(tmp_path / "t-0"), KafkaConfig.from_mapping({"retention.ms": 5000}), writable=True,
                     clock=clock)
    removed = aged.apply_retention()
    assert removed and all(s.max_timestamp_so_far().timestamp >= clock.now - 5000
                           for s in aged.segments[:-1])
    aged.close()


@pytest.mark.parametrize(("topic", "policy", "kept"), [
    ("t", "compact", [0, 1, 2, 3, 4, 5]),
    ("__consumer_offsets", "delete", [0, 1, 2, 3, 4, 5]),    # always compacted (topicconfig)
    ("t", "compact,delete", [5]),
    ("t", "delete", [5]),
])
def test_retention_at_append_runs_only_where_the_cleanup_policy_deletes(
        tmp_path: Path, topic: str, policy: str, kept: list[int]) -> None:
    """Kafka 3.8.0 ``UnifiedLog.deleteOldSegments`` (core/src/main/scala/kafka/log/UnifiedLog.scala) runs
    the ``retention.bytes`` and ``retention.ms`` passes only ``if (config.delete)``: a compacted topic loses
    segments to neither.  The retention each append runs (``Partition.apply_retention``) ran both whatever
    the policy: records of a month ago appended to a compacted topic with ``retention.ms`` a day (or
    ``__consumer_offsets``, with the broker's stock ``log.retention.hours=168``) lost every closed
    segment at the next append."""
    month_ago = Clock().now - 30 * 86_400_000           # (and years before the store's clock)
    config = {"segment.bytes": 300, "cleanup.policy": policy, "retention.ms": 86_400_000,
              "retention.bytes": 500}
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a", **config) as store:
        for i in range(6):
            store.append_batch([{"topic": topic, "partition": 0, "key": b"k%d" % i, "value": b"v" * 100,
                                 "timestamp": month_ago + i}])
        assert [seg.base for seg in store.partition_of(topic, 0).segments] == kept


def test_retention_at_append_measures_a_segment_without_times_by_its_files_mtime(tmp_path: Path) -> None:
    """``LogSegment.largestTimestamp`` (Kafka 3.8.0, storage/.../log/LogSegment.java) is the largest
    record time, else (none: every record's -1) the ``.log`` file's mtime, which ``retention.ms`` is
    measured from (``deleteRetentionMsBreachedSegments``); ``apply_retention`` took -1 as the time, so a
    closed segment of records without times went at the next append, fresh as it was."""
    part = _partition(tmp_path, **{"segment.bytes": 200, "retention.ms": 86_400_000})
    for _ in range(3):
        part.append_records([(b"k", b"v" * 100, -1, [])], check_times=False)
    mtime = int(Path(part.segments[0].path).stat().st_mtime * 1000)
    assert len(part.segments) == 3 and part.apply_retention(now_ms=mtime + 1000) == []
    assert part.apply_retention(now_ms=mtime + 86_400_000 + 1000) == [0, 1]
    part.close()


def test_log_append_time_uses_the_broker_clock(tmp_path: Path) -> None:
    clock = Clock(1_800_000_000_000)
    with segstore.open(tmp_path / "t-0", format="kafka", mode="a",
                       **{"message.timestamp.type": "LogAppendTime"}) as store:
        store.partition.clock = clock
        store.append_batch([Message("t", b"a", timestamp=5), Message("t", b"b", timestamp=9)])
    with segstore.open(tmp_path / "t-0") as store:
        got = [store.to_json(r) for r in store.scan()]
    assert [(g["timestamp"], g["timestamp_type"]) for g in got] == [(1_800_000_000_000, "LogAppendTime")] * 2


def test_transactions_fill_the_txn_index(tmp_path: Path) -> None:
    part = _partition(tmp_path)
    part.append_records([(b"a", b"1", 1, [])], producer_id=7, producer_epoch=0, base_sequence=0,
                        transactional=True)
    part.append_records([(b"b", b"2", 2, [])], producer_id=8, producer_epoch=0, base_sequence=0,
                        transactional=True)
    part.append_control("ABORT", producer_id=7, producer_epoch=0, coordinator_epoch=3, timestamp=3)
    part.append_control("COMMIT", producer_id=8, producer_epoch=0, coordinator_epoch=3, timestamp=4)
    assert [tuple(t) for t in part.log.active.txn_index.all()] == [(7, 0, 2, 1)]
    part.close()


def test_reopen_continues_and_bad_input_is_refused(tmp_path: Path) -> None:
    part = _partition(tmp_path)
    part.append_records([(b"k", b"v", 1, [])])
    with pytest.raises(OffsetOutOfRangeError):
        from segstore_kafka.batch import encode_batch

        part.append_encoded(encode_batch([(b"k", b"v", 1)], base_offset=5))
    part.close()
    again = _partition(tmp_path)
    assert again.append_records([(b"k", b"v", 2, [])]).base_offset == 1
    again.close()
    small = _partition(tmp_path / "small", **{"segment.bytes": 100})
    with pytest.raises(MessageTooLargeError):
        small.append_records([(b"k", b"v" * 200, 3, [])])
    small.close()
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        KafkaConfig.from_mapping({"segment.bytes": "lots"})
    with pytest.raises(ConfigError, match="expected a Kafka topic config name"):
        KafkaConfig.from_mapping({"mappedFileSizeCommitLog": 1})
    assert KafkaConfig.from_mapping({"segment_bytes": "2048"}).segment_bytes == 2048
    with pytest.raises(InvalidTopicError):
        Partition(str(tmp_path / "no_partition_number"), KafkaConfig(), writable=True)


def test_log_dir_writes_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    config = {"segment.bytes": 500, "retention.bytes": 600}
    with segstore.open(path, format="kafka", mode="a", **config) as store:
        store.append_batch([Message("a", b"x" * 100, partition=p, timestamp=1) for p in (0, 1)] * 3)
        for _ in range(6):
            store.append_batch([Message("b", b"y" * 100, timestamp=2)])
    recovery_points = read_offsets(str(path / "recovery-point-offset-checkpoint"))
    assert recovery_points == {("a", 0): 3, ("a", 1): 3, ("b", 0): 6}
    # LogManager.checkpointLogStartOffsetsInDir (3.8) writes a log start only inside the first segment:
    # retention deleted b's first segments whole, so its log starts at the first one left
    assert read_offsets(str(path / "log-start-offset-checkpoint")) == {}
    with segstore.open(path) as store:
        assert store.topics() == ["a", "b"] and store.partitions("a") == [0, 1]
        low = store.offset_range("b", 0)[0]
        assert 0 < low == int(sorted((path / "b-0").glob("*.log"))[0].stem)
        assert store.offset_range("b", 0)[1] == 6
        assert [r.offset for r in store.read("b", 0, 0)] == list(range(low, 6))
    with segstore.open(path, format="kafka", mode="a") as store:
        store.delete_records(low + 1, topic="b", partition=0)         # a start inside the first segment
    assert read_offsets(str(path / "log-start-offset-checkpoint")) == {("b", 0): low + 1}


def test_cli_dump_query_info(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v0", key=b"k", timestamp=100, headers=[("h", b"1")]),
                            Message("t", b"v1", timestamp=200)])
        store.append_batch([Message("t", b"v2", timestamp=300)])
    out = io.StringIO()
    assert main(["dump", str(path), "--index"], out=out) == 0
    text = out.getvalue()
    assert "baseOffset: 0 lastOffset: 1 count: 2" in text and "compresscodec: none" in text
    assert "| offset: 0 CreateTime: 100 keySize: 1 valueSize: 2 sequence: -1 headerKeys: [h]" in text
    out = io.StringIO()
    assert main(["query", str(path), "--timestamp", "150"], out=out) == 0
    assert "| offset: 1 CreateTime: 200" in out.getvalue()
    out = io.StringIO()
    assert main(["query", str(path), "--offset", "2", "--json"], out=out) == 0
    assert '"offset": 2' in out.getvalue()
    assert main(["query", str(path), "--offset", "9"], out=io.StringIO()) == 1
    out = io.StringIO()
    assert main(["info", str(path), "--json"], out=out) == 0
    assert '"end_offset": 3' in out.getvalue()


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(0, 400), min_size=1, max_size=40), segment_bytes=st.integers(480, 2000),
       retention_bytes=st.integers(-1, 3000))
def test_roll_and_retention_match_a_model(tmp_path_factory: pytest.TempPathFactory, sizes: list[int],
                                          segment_bytes: int, retention_bytes: int) -> None:
    """Model: roll when size > segment.bytes - batch size; drop the oldest while the rest exceed retention."""
    part = _partition(tmp_path_factory.mktemp("r"), **{"segment.bytes": segment_bytes,
                                                       "retention.bytes": retention_bytes})
    model: list[list[int]] = []          # per segment: [base, bytes]
    start = 0
    for i, n in enumerate(sizes):
        done = part.append_records([(None, b"v" * n, 1_700_000_000_000 + i, [])])
        if not model or (model[-1][1] > segment_bytes - done.size):
            model.append([done.base_offset, 0])
        model[-1][1] += done.size
        part.apply_retention()
        if retention_bytes >= 0:
            excess = sum(size for _, size in model) - retention_bytes
            while len(model) > 1 and excess - model[0][1] >= 0:
                excess -= model.pop(0)[1]
        start = model[0][0]
        assert [[s.base, s.size] for s in part.segments] == model
    assert part.log_start_offset == start
    assert [r.offset for b in part.batches(start) for r in b.records()] == list(range(start, len(sizes)))
    part.close()


@pytest.mark.parametrize("topic", ["../../x", "ok/../x", "", ".", "..", "a" * 250, "sp ace", "ü"])
def test_hostile_topic_names_are_refused_and_create_nothing(tmp_path, topic):
    root = tmp_path / "logs"
    with segstore.open(str(root), format="kafka", mode="a") as store:
        with pytest.raises(InvalidTopicError):
            store.append({"topic": topic, "partition": 0, "value": b"v"})
    outside = {p.name for p in tmp_path.iterdir()}
    assert outside == {"logs"}
    assert not [p for p in root.iterdir() if p.is_dir()]


@pytest.mark.parametrize("path", ["dicts", "arrow", "message"])
def test_a_new_topic_colliding_with_an_existing_one_is_refused(tmp_path, path):
    """Kafka 3.8 ``ReplicationControlManager.validateNewTopicNames`` refuses a new topic whose name equals
    an existing one's once '.' and '_' are unified (``Topic.unifyCollisionChars``): ``ok_topic`` beside
    ``ok.topic``.  An offline write created it.  A new partition of a topic already there is not checked
    (``createPartitions``), and topics created in one call are checked against the existing only, as one
    CreateTopics request is."""
    import pyarrow as pa

    from segstore.columns import KAFKA_SCHEMA

    def append(store, topic, partition=0):
        if path == "dicts":
            store.append_batch([{"topic": topic, "partition": partition, "value": b"v"}])
        elif path == "message":
            store.append_batch([Message(topic=topic, partition=partition, value=b"v")])
        else:
            store.append_arrow(pa.table({"topic": [topic], "partition": [partition], "value": [b"v"]},
                                        schema=pa.schema([KAFKA_SCHEMA.field(n) for n in
                                                          ("topic", "partition", "value")])))

    root = tmp_path / "logs"
    with segstore.open(str(root), format="kafka", mode="a") as store:
        store.append_batch([{"topic": "a.b", "partition": 0, "value": b"v"},
                            {"topic": "a_b", "partition": 0, "value": b"v"}])   # one request: both
        append(store, "ok.topic")
        for topic in ("ok_topic", "ok_topic", "a_b_c"):
            if topic == "a_b_c":
                append(store, "a.b.c")
            with pytest.raises(InvalidTopicError) as info:
                append(store, topic)
        assert "expected a topic that does not collide with existing topic 'a.b.c', found 'a_b_c'" in str(
            info.value)
        append(store, "ok.topic", 1)        # a new partition of an existing topic
        append(store, "a_b", 1)
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        "a.b-0", "a.b.c-0", "a_b-0", "a_b-1", "ok.topic-0", "ok.topic-1"]


def test_batch_over_max_message_bytes_is_refused_and_writes_nothing(tmp_path):
    root = str(tmp_path / "t-0")
    with segstore.open(root, format="kafka", mode="a", **{"max.message.bytes": 2048}) as store:
        store.append({"topic": "t", "partition": 0, "value": b"small"})
        with pytest.raises(MessageTooLargeError) as info:
            store.append({"topic": "t", "partition": 0, "value": b"x" * 4096})
        assert "max.message.bytes=2048" in str(info.value)
    with segstore.open(root, format="kafka") as store:
        assert [r.value for r in store.read("t", 0)] == [b"small"]
