"""A conversion into RocketMQ writes ``config/topics.json`` a bounded number of times, whatever the
number of queues, and leaves it as a writer that wrote it at each new queue does.

The broker persists its topic table when a send creates a topic (RocketMQ 4.9.7
``broker/src/main/java/org/apache/rocketmq/broker/topic/TopicConfigManager.java``
``createTopicInSendMessageMethod``: ``this.persist()``), each time the whole file
(``ConfigManager.persist``: ``MixAll.string2File``).  A conversion into N queues that first appear in
N appends wrote the file N times, one queue more each: O(N^2) bytes and N syncs (2,000 topics of a
partition each: 2,000 writes, 343 MB, 150 s).  It now names every queue the run writes in one write
before the first record (``RocketMQStore.configure_queues_ahead``), so a writer killed later still
leaves every topic it created in the table (tests/test_rocketmq_crash.py), and writes the table
itself at close.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from segstore_rocketmq import topicconfig
from segstore_rocketmq.store import RocketMQStore

import segstore
from segstore.convert import convert
from segstore.records import Message


def _kafka_source(path: Path) -> Path:
    """30 topics of a partition, one of 12 partitions: each new partition in an append of its own."""
    with segstore.open(path, format="kafka", mode="a") as store:
        for t in range(30):
            store.append_batch([Message(f"t{t}", b"v%d" % i, partition=0, timestamp=1000 + i)
                                for i in range(2)])
        for p in range(12):
            store.append_batch([Message("wide", b"w", partition=p, timestamp=2000)])
    return path


def _rocketmq_source(path: Path) -> Path:
    """Queues first written out of order, interleaved over topics (their order is the commitlog's)."""
    with segstore.open(path, format="rocketmq", mode="a") as store:
        for q in (3, 1, 0, 2):
            store.append({"topic": "A", "queue_id": q, "body": b"x"})
            store.append({"topic": f"B{q}", "queue_id": 5 - q, "body": b"y"})
        store.append_batch([{"topic": "C", "queue_id": q, "body": b"z"} for q in (2, 7, 1)])
    return path


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    written: list[str] = []
    persist = topicconfig._persist

    def counting(path: str, text: str) -> None:
        if path.endswith("topics.json"):
            written.append(text)
        persist(path, text)

    monkeypatch.setattr(topicconfig, "_persist", counting)
    return written


def _table(path: Path) -> str:
    """topics.json without its timestamp (the clock's)."""
    return re.sub(r'"timestamp":\d+', '"timestamp":0', (path / "config" / "topics.json").read_text())


def test_a_conversion_into_many_queues_writes_topics_json_twice(tmp_path, monkeypatch):
    src = _kafka_source(tmp_path / "k")
    written = _count_writes(monkeypatch)
    convert(src, tmp_path / "r", to="rocketmq")
    # once before the first record (every queue the run writes), once at close (the table itself):
    # it was 42 writes, one per new queue
    assert len(written) == 2
    with segstore.open(tmp_path / "r") as store:
        assert store.topic_configs.read_queue_count("wide") == 12
        assert all(store.topic_configs.read_queue_count(f"t{t}") == 1 for t in range(30))


@pytest.mark.parametrize("source", [_kafka_source, _rocketmq_source])
def test_topics_json_is_what_a_write_at_each_new_queue_leaves(tmp_path, monkeypatch, source):
    src = source(tmp_path / "src")
    if (tmp_path / "src" / "commitlog").exists():
        convert(src, tmp_path / "k", to="kafka")
        src = tmp_path / "k"
    convert(src, tmp_path / "r", to="rocketmq")
    # the same conversion with no queue named ahead writes the file at each append adding a queue
    monkeypatch.setattr(RocketMQStore, "configure_queues_ahead", lambda self, keys: None)
    convert(src, tmp_path / "each", to="rocketmq")
    assert _table(tmp_path / "r") == _table(tmp_path / "each")
