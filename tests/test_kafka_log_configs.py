"""Kafka 3.8.0 topic configs segstore once refused (``--config``, ``segstore.open(**config)``) or skipped
(the metadata log's ``ConfigRecord``): taken, bounded as ``LogConfig``'s ``ConfigDef`` bounds them, and
honoured where they change what an append writes or refuses, or what a roll does.

Sources (apache/kafka 3.8.0):
- storage/.../log/LogConfig.java ``CONFIG`` (names, types, ``atLeast`` bounds), ``maxSegmentMs`` (a
  compacted topic rolls by ``min(max.compaction.lag.ms, segment.ms)``), ``randomSegmentJitter``,
  ``getMessageTimestampBeforeMaxMs``/``AfterMaxMs`` (the deprecated ``message.timestamp.difference.max.ms``
  stands in for an unset one) and ``validateValues`` (min.compaction.lag.ms > max.compaction.lag.ms is
  InvalidConfigurationException);
- storage/.../log/LogValidator.java ``validateTimestamp``/``recordHasInvalidTimestamp``: a CreateTime
  topic refuses a batch with a record older than ``now - before.max`` or newer than ``now + after.max``
  (InvalidTimestampException); a record without a timestamp (-1) and a LogAppendTime topic are not checked;
- storage/.../log/LogSegment.java ``shouldRoll``: roll when the wait passes ``maxSegmentMs - rollJitterMs``.
"""

from __future__ import annotations

import time

import pytest
from kafka_messages import config, partition, topic
from segstore_kafka.partition import KafkaConfig
from test_kafka_metadata import write_metadata_log

import segstore
from segstore.cli import main
from segstore.errors import ConfigError, InvalidMessageError
from segstore.records import Message

T0 = 1_700_000_000_000
ORDERS_ID = "AAAAAAAAAAAAAAAAAAAAEQ"
LONG_MAX = 2**63 - 1


def _segments(store, topic: str = "t") -> int:
    return len(list((store.path / f"{topic}-0").glob("*.log")))


def _append_at(path, times, **config) -> int:
    """Append one record (keyed: a compacted topic refuses one without a key) at each of ``times``; how
    many segments result."""
    with segstore.open(path, format="kafka", mode="a", **config) as store:
        for t in times:
            store.append_batch([Message("t", b"v", key=b"k", timestamp=t)])
    return len(list((path / "t-0").glob("*.log")))


@pytest.mark.parametrize("name,bad", [
    ("segment.jitter.ms", "-1"), ("max.compaction.lag.ms", "0"),
    ("message.timestamp.before.max.ms", "-1"), ("message.timestamp.after.max.ms", "-1"),
    ("message.timestamp.difference.max.ms", "-1"),
])
def test_the_roll_and_timestamp_configs_are_taken_and_bounded_as_log_config(name, bad):
    """LogConfig.CONFIG: LONG, ``atLeast(0)`` (``max.compaction.lag.ms`` ``atLeast(1)``).  Before:
    ``expected a Kafka topic config name`` for any value."""
    assert getattr(KafkaConfig.from_mapping({name: "5"}), name.replace(".", "_")) == 5
    with pytest.raises(ConfigError, match=f"expected {name} from "):
        KafkaConfig.from_mapping({name: bad})


def test_the_defaults_are_log_configs():
    c = KafkaConfig()
    assert (c.segment_jitter_ms, c.max_compaction_lag_ms, c.message_timestamp_before_max_ms,
            c.message_timestamp_after_max_ms, c.message_timestamp_difference_max_ms) == (0,) + (LONG_MAX,) * 4


def test_min_compaction_lag_over_max_is_refused_as_validate_values_refuses_it():
    """LogConfig.validateValues: "conflict topic config setting min.compaction.lag.ms (..) > max..."."""
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms .*max\.compaction\.lag\.ms"):
        KafkaConfig.from_mapping({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    KafkaConfig.from_mapping({"min.compaction.lag.ms": 5, "max.compaction.lag.ms": 5})


def test_max_compaction_lag_rolls_a_compacted_topic_as_max_segment_ms(tmp_path):
    """LogConfig.maxSegmentMs / UnifiedLog.maybeRoll: a compacted topic rolls by min(max.compaction.lag.ms,
    segment.ms) so its records become cleanable in time; a delete-only topic keeps segment.ms."""
    times = [T0, T0 + 50, T0 + 200, T0 + 250, T0 + 400]
    compact = {"cleanup.policy": "compact", "max.compaction.lag.ms": 100}
    assert _append_at(tmp_path / "c", times, **compact) == 3
    assert _append_at(tmp_path / "d", times, **{"max.compaction.lag.ms": 100}) == 1
    assert _append_at(tmp_path / "s", times, **{"cleanup.policy": "compact", "segment.ms": 100,
                                                "max.compaction.lag.ms": 10**9}) == 3


def test_segment_jitter_rolls_at_the_unjittered_bound(tmp_path):
    """LogConfig.randomSegmentJitter draws in [0, min(jitter, segment.ms)); segstore draws 0, a draw the
    broker can make, so a run is repeatable: the segments are those of segment.ms alone."""
    times = [T0, T0 + 50, T0 + 101, T0 + 150, T0 + 202]
    plain = _append_at(tmp_path / "a", times, **{"segment.ms": 100})
    assert plain == 3
    assert _append_at(tmp_path / "b", times, **{"segment.ms": 100, "segment.jitter.ms": 90}) == plain


def _now() -> int:
    return int(time.time() * 1000)


def _store(path, **config):
    return segstore.open(path, format="kafka", mode="a", **config)


def test_a_createtime_topic_refuses_a_record_too_old_or_too_new_as_log_validator_does(tmp_path):
    """LogValidator.validateTimestamp: now - ts > before.max or ts - now > after.max is
    InvalidTimestampException; the whole batch is refused.  Before: the configs were refused by name."""
    hour = 3_600_000
    with _store(tmp_path / "l", **{"message.timestamp.before.max.ms": hour,
                                   "message.timestamp.after.max.ms": hour}) as store:
        now = _now()
        store.append_batch([Message("t", b"ok", timestamp=now - hour + 60_000),
                            Message("t", b"ok", timestamp=now + hour - 60_000)])
        with pytest.raises(InvalidMessageError, match=r"Timestamp \d+ of message with offset 3 is out of"):
            store.append_batch([Message("t", b"new", timestamp=now),
                                Message("t", b"old", timestamp=now - 2 * hour)])
        with pytest.raises(InvalidMessageError, match="out of range"):
            store.append_batch([Message("t", b"future", timestamp=now + 2 * hour)])
        store.append_batch([Message("t", b"none", timestamp=-1)])          # NO_TIMESTAMP is not checked
        assert [m.value for m in store.scan()] == [b"ok", b"ok", b"none"]


def test_the_deprecated_difference_stands_in_for_an_unset_bound(tmp_path):
    """LogConfig.getMessageTimestampBeforeMaxMs/AfterMaxMs (3.8): difference.max.ms where before/after is
    Long.MAX_VALUE."""
    c = KafkaConfig.from_mapping({"message.timestamp.difference.max.ms": 7,
                                  "message.timestamp.after.max.ms": 3})
    assert (c.timestamp_before_max_ms, c.timestamp_after_max_ms) == (7, 3)
    with _store(tmp_path / "l", **{"message.timestamp.difference.max.ms": 3_600_000}) as store:
        with pytest.raises(InvalidMessageError, match="out of range"):
            store.append_batch([Message("t", b"old", timestamp=_now() - 7_200_000)])


def test_a_log_append_time_topic_takes_any_producer_time(tmp_path):
    with _store(tmp_path / "l", **{"message.timestamp.type": "LogAppendTime",
                                   "message.timestamp.before.max.ms": 0}) as store:
        store.append_batch([Message("t", b"old", timestamp=1)])
        assert [m.timestamp for m in store.scan()] != [1]


def test_the_metadata_logs_timestamp_bound_refuses_appends_to_that_topic(tmp_path, capsys):
    """The topic's ConfigRecord message.timestamp.before.max.ms was skipped (not a known name): appends
    took records the broker refuses."""
    logs = tmp_path / "logs"
    with _store(logs) as store:
        store.append_batch([Message("orders", b"v", timestamp=T0)])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "message.timestamp.before.max.ms", "1000")])
    with _store(logs) as store:
        with pytest.raises(InvalidMessageError, match="out of range"):
            store.append_batch([Message("orders", b"old", key=b"k", timestamp=T0)])
        store.append_batch([Message("orders", b"new", timestamp=_now())])


def _one(path) -> None:
    with _store(path) as store:
        store.append_batch([Message("t", b"v")])


@pytest.mark.parametrize("setting", [
    "preallocate=true", "unclean.leader.election.enable=false", "min.insync.replicas=2",
    "follower.replication.throttled.replicas=*", "leader.replication.throttled.replicas=0:1,1:2",
    "local.retention.ms=-2", "local.retention.bytes=-2", "remote.storage.enable=false",
    "message.downconversion.enable=true", "file.delete.delay.ms=60000", "flush.messages=1",
    "flush.ms=1000", "min.cleanable.dirty.ratio=0.5", "message.format.version=3.0-IV1",
])
def test_a_broker_only_config_from_describe_output_is_taken(tmp_path, capsys, setting):
    """LogConfig.CONFIG names whose effect is the broker's own (replication, flushing, tiered storage,
    deletion delay, preallocation, the cleaner's choice of log): taken and ignored (docs/kafka.md says
    why).  Before: exit 2, "expected a Kafka topic config name"."""
    _one(tmp_path)
    code = main(["retention", str(tmp_path), "--config", setting, "--dry-run"])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("setting,why", [
    ("preallocate=yes", "true or false"), ("min.insync.replicas=0", "min.insync.replicas from 1"),
    ("min.cleanable.dirty.ratio=1.5", "min.cleanable.dirty.ratio from 0"),
    ("flush.messages=0", "flush.messages"), ("local.retention.ms=-3", "local.retention.ms"),
    ("follower.replication.throttled.replicas=0-1", "throttled"),
    ("message.downconversion.enable=1", "true or false"), ("message.format.version=latest", "Kafka version"),
    ("file.delete.delay.ms=x", "file.delete.delay.ms"),
])
def test_a_broker_only_config_is_refused_where_config_def_refuses_it(tmp_path, capsys, setting, why):
    _one(tmp_path)
    code = main(["retention", str(tmp_path), "--config", setting, "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and why in err and "expected a Kafka topic config name" not in err


def test_the_metadata_logs_dynamic_broker_defaults_of_these_configs_apply(tmp_path):
    """ServerTopicConfigSynonyms (3.8): message.timestamp.before.max.ms <- its log.-prefixed broker name,
    max.compaction.lag.ms <- log.cleaner.max.compaction.lag.ms, segment.jitter.ms <- log.roll.jitter.ms
    or log.roll.jitter.hours.  Before: the cluster default was skipped, and old records were appended."""
    logs = tmp_path / "logs"
    with _store(logs) as store:
        store.append_batch([Message("orders", b"v", timestamp=T0)])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "cleanup.policy", "compact"),
                              config("", "log.message.timestamp.before.max.ms", "1000", resource_type=4),
                              config("", "log.cleaner.max.compaction.lag.ms", "100", resource_type=4),
                              config("", "log.roll.jitter.hours", "1", resource_type=4)])
    with _store(logs) as store:
        got = store.topic_configs.config_for("orders")
        assert (got.message_timestamp_before_max_ms, got.max_compaction_lag_ms, got.segment_jitter_ms) == (
            1000, 100, 3_600_000)
        with pytest.raises(InvalidMessageError, match="out of range"):
            store.append_batch([Message("orders", b"old", key=b"k", timestamp=T0)])


# -- compression levels (KIP-390) ----------------------------------------------------------------------

def _first_batch_body(path) -> bytes:
    data = next((path / "t-0").glob("*.log")).read_bytes()
    length = int.from_bytes(data[8:12], "big")
    return data[61:12 + length]


def _records_region(body: bytes, name: str) -> bytes:
    from segstore_kafka.compression import codec_id, decompress
    return bytes(decompress(codec_id(name), body))


def _write(path, how: str, **config) -> bytes:
    rows = [{"topic": "t", "partition": 0, "key": f"k{i % 7}", "value": "value " * (i % 13),
             "timestamp": 1000 + i} for i in range(400)]
    with _store(path, **config) as store:
        if how == "messages":
            store.append_batch([Message("t", r["value"].encode(), key=r["key"].encode(),
                                        timestamp=r["timestamp"], partition=0) for r in rows])
        elif how == "dicts":
            store.append_batch(rows)
        else:
            import pyarrow as pa
            store.append_arrow(pa.Table.from_pylist(rows))
    return _first_batch_body(path)


@pytest.mark.parametrize("how", ["messages", "dicts", "arrow"])
def test_gzip_level_is_the_level_the_broker_compresses_at(tmp_path, how):
    """3.8.0 LogConfig.getCompression: Compression.gzip().level(compression.gzip.level); GzipCompression
    wraps a GZIPOutputStream whose Deflater has that level.  Before: the name was refused, and from the
    metadata log skipped (the batches written at level 6 whatever the topic said)."""
    import zlib
    body = _write(tmp_path / "a", how, **{"compression.type": "gzip", "compression.gzip.level": 1})
    region = _records_region(body, "gzip")
    deflater = zlib.compressobj(1, zlib.DEFLATED, -15)
    assert body[10:-8] == deflater.compress(region) + deflater.flush()
    default = _write(tmp_path / "b", how, **{"compression.type": "gzip"})
    assert default != body and _records_region(default, "gzip") == region
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert default[10:-8] == deflater.compress(region) + deflater.flush()


def test_lz4_and_zstd_levels_are_the_levels_the_broker_compresses_at(tmp_path):
    """Lz4BlockOutputStream: level 9 (the default) by fastCompressor, another by highCompressor(level), each
    64 KiB block alone; ZstdCompression: zstd-jni's stream at compression.zstd.level."""
    import lz4.block
    import zstandard
    body = _write(tmp_path / "l", "messages", **{"compression.type": "lz4", "compression.lz4.level": 12})
    region = _records_region(body, "lz4")
    assert len(region) < 64 * 1024
    packed = lz4.block.compress(region, mode="high_compression", compression=12, store_size=False)
    assert body[7:] == len(packed).to_bytes(4, "little") + packed + bytes(4)
    assert body != _write(tmp_path / "l9", "messages", **{"compression.type": "lz4"})
    body = _write(tmp_path / "z", "messages", **{"compression.type": "zstd", "compression.zstd.level": 19})
    region = _records_region(body, "zstd")
    stream = zstandard.ZstdCompressor(level=19, write_content_size=False, write_checksum=False).compressobj()
    assert body == (stream.compress(region) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
                    + stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))


def test_a_level_of_another_codec_changes_nothing(tmp_path):
    assert (_write(tmp_path / "a", "messages", **{"compression.type": "gzip", "compression.zstd.level": 19})
            == _write(tmp_path / "b", "messages", **{"compression.type": "gzip"}))


@pytest.mark.parametrize("setting", ["compression.gzip.level=0", "compression.gzip.level=10",
                                     "compression.gzip.level=-2", "compression.lz4.level=0",
                                     "compression.lz4.level=18", "compression.zstd.level=23",
                                     "compression.zstd.level=-131073"])
def test_a_level_is_refused_where_the_level_validator_refuses_it(setting):
    name, value = setting.split("=")
    with pytest.raises(ConfigError, match=f"expected {name} of "):
        KafkaConfig.from_mapping({name: value})


@pytest.mark.parametrize("setting", ["compression.gzip.level=-1", "compression.gzip.level=9",
                                     "compression.lz4.level=1", "compression.lz4.level=17",
                                     "compression.zstd.level=22", "compression.zstd.level=-131072"])
def test_a_level_the_validator_takes_is_taken(setting):
    name, value = setting.split("=")
    assert getattr(KafkaConfig.from_mapping({name: value}), name.replace(".", "_")) == int(value)


def test_the_metadata_logs_gzip_level_is_applied(tmp_path):
    logs = tmp_path / "logs"
    write_metadata_log(logs, [topic("t", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("t", "compression.type", "gzip"),
                              config("t", "compression.gzip.level", "1")])
    with _store(logs) as store:
        assert store.topic_configs.config_for("t").compression_gzip_level == 1


@pytest.mark.parametrize("as_dicts", [False, True])
def test_append_batch_refuses_an_out_of_range_timestamp_before_it_writes_any_partition(tmp_path, as_dicts):
    """append_batch is all or none (a batch too large is refused before anything is written): a record
    LogValidator.validateTimestamp refuses leaves the other partitions' records unwritten too."""
    hour = 3_600_000
    with _store(tmp_path / "l", **{"message.timestamp.before.max.ms": hour}) as store:
        now = _now()
        items = [Message("a", b"fine", timestamp=now), Message("b", b"old", timestamp=now - 2 * hour)]
        if as_dicts:
            items = [{"topic": m.topic, "value": m.value, "timestamp": m.timestamp} for m in items]
        with pytest.raises(InvalidMessageError, match="out of range"):
            store.append_batch(items)
        assert list(store.scan()) == []


def test_append_arrow_refuses_an_out_of_range_timestamp_before_it_writes_anything(tmp_path):
    """append_arrow checks every row before it writes (its docstring); LogValidator.validateTimestamp's
    refusal is one of those checks."""
    import pyarrow as pa
    hour = 3_600_000
    with _store(tmp_path / "l", **{"message.timestamp.after.max.ms": hour}) as store:
        now = _now()
        table = pa.Table.from_pylist([{"topic": "a", "value": b"fine", "timestamp": now},
                                      {"topic": "b", "value": b"late", "timestamp": now + 2 * hour}])
        with pytest.raises(InvalidMessageError, match="out of range"):
            store.append_arrow(table)
        assert list(store.scan()) == []
        assert store.append_arrow(table.slice(0, 1)) == 1


def test_a_transactions_append_batch_refuses_an_out_of_range_time_before_it_writes_any_partition(tmp_path):
    """The transactional append_batch checks every partition before anything is written; a record time
    LogValidator.validateTimestamp refuses is checked there too."""
    hour = 3_600_000
    with _store(tmp_path / "l", **{"message.timestamp.before.max.ms": hour}) as store:
        now = _now()
        txn = store.transaction(5, 0)
        with pytest.raises(InvalidMessageError, match="out of range"):
            txn.append_batch([Message("a", b"fine", timestamp=now),
                              Message("b", b"old", timestamp=now - 2 * hour)])
        assert list(store.scan()) == []


def test_a_tiered_topic_is_named_not_silently_taken_as_a_local_one(tmp_path, capsys):
    """LogConfig.remoteStorageEnable / UnifiedLog.deleteOldSegments (3.8): a tiered topic's broker deletes
    local segments by local.retention.ms/bytes once they are in remote storage, and its log start offset is
    the remote one; the log directory holds the local log only, and segstore cannot see what was copied.
    Before: remote.storage.enable from the metadata log was skipped without a word."""
    logs = tmp_path / "logs"
    with _store(logs) as store:
        store.append_batch([Message("orders", b"v", timestamp=T0)])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "remote.storage.enable", "true"),
                              config("orders", "local.retention.ms", "1000")])
    code = main(["retention", str(logs), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 0
    assert "orders: remote.storage.enable=true in the metadata log" in err and "local.retention" in err


def test_the_metadata_logs_dynamic_broker_compression_levels_apply(tmp_path):
    """ServerTopicConfigSynonyms (3.8, KIP-390): compression.gzip.level, .lz4.level and .zstd.level are
    their own broker-level synonyms."""
    logs = tmp_path / "logs"
    write_metadata_log(logs, [topic("t", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("", "compression.gzip.level", "2", resource_type=4),
                              config("", "compression.zstd.level", "7", resource_type=4)])
    with _store(logs) as store:
        got = store.topic_configs.config_for("t")
        levels = (got.compression_gzip_level, got.compression_lz4_level, got.compression_zstd_level)
        assert levels == (2, 9, 7)


def test_a_conversion_replays_history_without_the_append_time_bounds(tmp_path):
    """A conversion writes records a broker took at their own times (as a follower or a restore does:
    UnifiedLog.appendAsFollower, no LogValidator); message.timestamp.before.max.ms measured from the
    batch's newest record refused the older records of the same batch, and stopped the conversion."""
    from segstore.convert import convert
    src = tmp_path / "rmq"
    with segstore.open(src, format="rocketmq", mode="a") as writer:
        for n in range(6):
            writer.append({"topic": "T", "queue_id": 0, "body": b"m%d" % n,
                           "born_timestamp": T0 + n * 3_600_000})
    convert(src, tmp_path / "kafka", to="kafka", config={"message.timestamp.before.max.ms": 1000})
    with segstore.open(tmp_path / "kafka") as kafka:
        assert len(list(kafka.scan())) == 6


def test_a_producers_own_codec_keeps_its_default_level(tmp_path):
    """3.8.0 LogValidator.validateMessagesAndAssignOffsetsCompressed: inPlaceAssignment when the batch's
    codec is the topic's (levels are not compared), so a producer's gzip batch keeps the producer's level;
    the topic's compression.gzip.level applies only where the broker recompresses.  Before this, an
    append_records(compression="gzip") on a gzip level-1 topic was written at level 1."""
    import zlib
    with _store(tmp_path / "l", **{"compression.type": "gzip", "compression.gzip.level": 1}) as store:
        part = store.partition_of("t", 0, create=True)
        part.append_records([(b"k", b"value " * 50, T0)] * 20, compression="gzip")
    body = _first_batch_body(tmp_path / "l")
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert body[10:-8] == deflater.compress(_records_region(body, "gzip")) + deflater.flush()


@pytest.mark.parametrize("size", [4, 8, 11])
def test_a_segment_index_size_below_one_time_index_entry_is_refused_saying_why(size):
    """Kafka 3.8.0 ``LogConfig`` takes ``segment.index.bytes`` from 4 (``atLeast(4)``), but the
    ``AbstractIndex`` constructor throws ``IllegalArgumentException("Invalid max index size")`` when it
    creates an index smaller than one entry: a ``.timeindex`` (12-byte entries) below 12 bytes, so a broker
    with such a size cannot create a segment.  segstore refused it without saying why LogConfig's bound
    was not the one applied; 12 (one time index slot) is taken."""
    with pytest.raises(ConfigError, match=f"at least 12 .*Invalid max index size.*found {size}"):
        KafkaConfig.from_mapping({"segment.index.bytes": size})
    assert KafkaConfig.from_mapping({"segment.index.bytes": 12}).segment_index_bytes == 12


def test_an_appends_time_check_over_a_batch_is_the_one_record_check_at_javas_long_edges():
    """``check_records`` (one decode of a batch for ``LogValidator.validateRecord``'s key and time checks,
    the times compared with numpy) refuses exactly what ``time_out_of_range`` (3.8
    ``recordHasInvalidTimestamp``, one record at a time in Java's wrapping long arithmetic) refuses, at
    the first such record: before, a compacted topic with a bound decoded each batch twice and took
    the time check per record in Python (most of an append's time)."""
    import random

    from segstore_kafka.batch import encode_batch, read_batch_header
    from segstore_kafka.partition import check_records, time_out_of_range

    lo, hi = -2**63, 2**63 - 1
    edges = [lo, lo + 1, -2, -1, 0, 1, hi - 1, hi]
    rng = random.Random(5)
    outcomes = set()
    for _ in range(300):
        now = rng.choice([*edges, T0, rng.randrange(lo, hi)])
        config = KafkaConfig.from_mapping({
            "cleanup.policy": rng.choice(["delete", "compact"]),
            "message.timestamp.before.max.ms": rng.choice([0, 1, 1000, hi - 1, hi]),
            "message.timestamp.after.max.ms": rng.choice([0, 1, 1000, hi])})
        # a batch's times lie within a long of its base time (their deltas are varlongs)
        center = rng.choice([*edges, now, now - 1000, now + 1000, rng.randrange(lo, hi)])
        stamps = [max(lo, min(hi, center + rng.choice([0, -1, 1, -1000, 1000, rng.randrange(-2**61, 2**61)])))
                  for _ in range(4)]
        batch = read_batch_header(encode_batch([(b"k", b"v", s) for s in stamps], base_offset=0), 0)
        first = next((i for i, s in enumerate(stamps) if s != -1 and time_out_of_range(config, s, now)), None)
        outcomes.add(first)
        if first is None:
            check_records(batch, config, now, "p")
            continue
        with pytest.raises(InvalidMessageError, match=f"Timestamp {stamps[first]} of message with offset "
                                                      f"{first} is out of range"):
            check_records(batch, config, now, "p")
    assert outcomes == {None, 0, 1, 2, 3}


@pytest.mark.parametrize("how", ["append_batch", "append_arrow", "transaction", "append_records"])
def test_a_batch_with_a_bad_time_and_a_missing_key_reports_the_time_as_log_validator_does(tmp_path, how):
    """3.8 ``LogValidator.processRecordErrors`` gathers every record's error of a batch first, then throws
    InvalidTimestampException where any is a time error, the missing key (InvalidRecordException) only
    otherwise; ``validateRecord`` checks a record's time only where ``validateKey`` found its key.  So a
    keyless record before a keyed one out of range is a time error, and a keyless record out of range
    beside keyed ones in range a key error.  Before: segstore named the first keyless record whatever
    the times (``check_records``, ``_check_plan_times``, the transaction's check)."""
    pa = pytest.importorskip("pyarrow")
    old = 1     # far before now - message.timestamp.before.max.ms

    def call(store, rows):
        if how == "append_batch":
            store.append_batch([{"topic": "c", "partition": 0, "key": k, "value": b"v", "timestamp": t}
                                for k, t in rows])
        elif how == "append_arrow":
            store.append_arrow(pa.table({"topic": ["c"] * len(rows), "key": [k for k, _ in rows],
                                         "value": [b"v"] * len(rows),
                                         "timestamp": pa.array([t for _, t in rows], pa.int64())}))
        elif how == "transaction":
            store.transaction(7).append_batch([{"topic": "c", "partition": 0, "key": k, "value": b"v",
                                                "timestamp": t} for k, t in rows])
        else:
            store.partition_of("c", 0).append_records([(k, b"v", t) for k, t in rows])

    with _store(tmp_path / "l", **{"cleanup.policy": "compact",
                                   "message.timestamp.before.max.ms": 3_600_000}) as store:
        store.append({"topic": "c", "partition": 0, "key": b"k", "value": b"v"})
        now = next(iter(store.read("c", 0))).timestamp
        with pytest.raises(InvalidMessageError, match=f"Timestamp {old} of (message with offset|a record)"):
            call(store, [(None, now), (b"k", old)])
        with pytest.raises(InvalidMessageError, match="Compacted topic cannot accept message without key"):
            call(store, [(None, old), (b"k", now)])
        assert store.offset_range("c", 0) == (0, 1)


def test_append_arrows_batches_each_report_their_own_first_error_as_log_validator_does(tmp_path):
    """``append_arrow`` rows of two batches (``baseOffset`` changes): LogValidator validates batch by batch,
    so the first batch's error is the one reported, a missing key there before a bad time in the
    next; within a batch the time error wins (``processRecordErrors``)."""
    pa = pytest.importorskip("pyarrow")
    with _store(tmp_path / "l", **{"cleanup.policy": "compact",
                                   "message.timestamp.before.max.ms": 3_600_000}) as store:
        now = int(time.time() * 1000)
        for rows, said in [([(None, now, 0), (b"k", 1, 1)], "Compacted topic cannot accept"),
                           ([(b"k", 1, 0), (None, now, 1)], "Timestamp 1 of a record"),
                           ([(None, now, 0), (b"k", 1, 0)], "Timestamp 1 of a record")]:
            table = pa.table({"topic": ["c"] * 2, "key": [k for k, _, _ in rows], "value": [b"v"] * 2,
                              "timestamp": pa.array([t for _, t, _ in rows], pa.int64()),
                              "baseOffset": pa.array([b for _, _, b in rows], pa.int64())})
            with pytest.raises(InvalidMessageError, match=said):
                store.append_arrow(table)
        assert "c" not in store.topics()      # nothing written, no partition created
