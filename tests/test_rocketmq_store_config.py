"""The RocketMQ 4.9.7 ``MessageStoreConfig`` names a broker.conf holds: taken and honoured where they change
what the store writes or recovers, taken and named as ignored where they only tune a running broker."""

from __future__ import annotations

import time

import pytest
from segstore_rocketmq.config import BrokerConfig
from segstore_rocketmq.flush import FlushPolicy

import segstore


def _wait(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_flush_thorough_intervals_are_taken_and_used():
    """4.9.7 ``CommitLog.FlushRealTimeService.run`` reads ``flushCommitLogThoroughInterval`` and
    ``DefaultMessageStore.FlushConsumeQueueService.doFlush`` ``flushConsumeQueueThoroughInterval``: once
    that long has passed, the flush takes every dirty byte (least pages 0).  Before: a ConfigError."""
    cfg = BrokerConfig.from_mapping({"flushCommitLogThoroughInterval": "2000",
                                     "flushConsumeQueueThoroughInterval": "3000"})
    policy = FlushPolicy.from_config(cfg)
    assert (policy.thorough_commitlog, policy.thorough_consume_queue) == (2000, 3000)
    defaults = FlushPolicy.from_config(BrokerConfig())
    assert (defaults.thorough_commitlog, defaults.thorough_consume_queue) == (10_000, 60_000)


def test_a_short_thorough_interval_flushes_a_message_below_the_least_pages(tmp_path):
    """One small message is less than ``flushCommitLogLeastPages`` (4 pages) and
    ``flushConsumeQueueLeastPages`` (2 pages): only the thorough flush takes it, after the configured
    interval (``FlushRealTimeService.run``: ``flushPhysicQueueLeastPages = 0``)."""
    config = {"flushIntervalCommitLog": "5", "flushIntervalConsumeQueue": "5",
              "flushCommitLogThoroughInterval": "0", "flushConsumeQueueThoroughInterval": "0"}
    with segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a", **config) as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x"})
        flusher = store._flusher
        end = store.commitlog.end
        assert _wait(lambda: flusher.durable_offset == end)
    with segstore.open(str(tmp_path / "d"), format="rocketmq", mode="a", flushIntervalCommitLog="5",
                       flushIntervalConsumeQueue="5") as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x"})
        time.sleep(0.3)      # the default thorough intervals (10 s, 60 s) have not passed
        assert store._flusher.durable_offset == 0


@pytest.mark.parametrize("name", ["flushCommitLogThoroughInterval", "flushConsumeQueueThoroughInterval"])
def test_a_thorough_interval_is_a_java_int(name):
    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match=f"expected a valid value for {name}, found '2147483648'"):
        BrokerConfig.from_mapping({name: "2147483648"})
