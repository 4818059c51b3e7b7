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
    """Append one record at each of ``times``; how many segments result."""
    with segstore.open(path, format="kafka", mode="a", **config) as store:
        for t in times:
            store.append_batch([Message("t", b"v", timestamp=t)])
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
            store.append_batch([Message("orders", b"old", timestamp=T0)])
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
    ("message.downconversion.enable=1", "true or false"), ("file.delete.delay.ms=x", "file.delete.delay.ms"),
])
def test_a_broker_only_config_is_refused_where_config_def_refuses_it(tmp_path, capsys, setting, why):
    _one(tmp_path)
    code = main(["retention", str(tmp_path), "--config", setting, "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and why in err and "expected a Kafka topic config name" not in err


def test_the_metadata_logs_dynamic_broker_defaults_of_these_configs_apply(tmp_path):
    """ServerTopicConfigSynonyms (3.8): message.timestamp.before.max.ms <- log.message.timestamp.before
    .max.ms,
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
            store.append_batch([Message("orders", b"old", timestamp=T0)])
