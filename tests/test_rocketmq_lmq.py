"""Multi-dispatch (LMQ) consume queues, as RocketMQ 4.9.7 writes them with ``enableMultiDispatch`` and
``enableLmq`` (MessageStoreConfig): ``ConsumeQueue.putMessagePositionInfoWrapper`` calls
``multiDispatchLmqQueue``, which puts an entry for the message into each queue its ``INNER_MULTI_DISPATCH``
names (queue id 0 for a ``%LMQ%`` name, ``MixAll.isLmq``), at the offset ``INNER_MULTI_QUEUE_OFFSET``
names at the same position.  Those queues point at messages of another topic by design, and the broker's
``getMessage`` serves them as stored."""

from __future__ import annotations

import json
import os
import struct

import pytest
from conftest import cli_run
from segstore_rocketmq import multidispatch
from segstore_rocketmq.config import BrokerConfig
from segstore_rocketmq.javacompat import string_hash

import segstore
from segstore.errors import CorruptDataError

SIZES = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 200}
#: message i of Parent/1 -> the LMQ queues it is dispatched to, with its offset in each
DISPATCH = {0: {"%LMQ%a": 0}, 1: {"%LMQ%a": 1, "%LMQ%b": 0}, 3: {"%LMQ%b": 1}, 4: {"%LMQ%a": 2}}


def _props(i: int) -> dict[str, str]:
    targets = DISPATCH.get(i)
    if not targets:
        return {}
    return {"INNER_MULTI_DISPATCH": ",".join(targets),
            "INNER_MULTI_QUEUE_OFFSET": ",".join(map(str, targets.values()))}


def _write_lmq_queues(path: str) -> dict[str, list[int]]:
    """The LMQ queues' files as ``multiDispatchLmqQueue`` writes them: each entry the message's commitlog
    offset, size and tags code (the parent entry's).  Returns each queue's physical offsets."""
    with segstore.open(path, format="rocketmq", **SIZES) as store:
        parent = list(store.read("Parent", 1))
    entries: dict[str, list[tuple[int, int, int]]] = {}
    for i, msg in enumerate(parent):
        for name, offset in DISPATCH.get(i, {}).items():
            assert len(entries.setdefault(name, [])) == offset
            entries[name].append((msg.physical_offset, msg.size, string_hash(msg.tags)))
    for name, rows in entries.items():
        directory = os.path.join(path, "consumequeue", name, "0")
        os.makedirs(directory)
        data = b"".join(struct.pack(">qiq", *row) for row in rows)
        with open(os.path.join(directory, "0" * 20), "wb") as f:
            f.write(data.ljust(SIZES["mappedFileSizeConsumeQueue"], b"\0"))
    return {name: [row[0] for row in rows] for name, rows in entries.items()}


@pytest.fixture
def lmq_store(tmp_path):
    path = str(tmp_path / "s")
    with segstore.open(path, format="rocketmq", mode="a", **SIZES) as store:
        for i in range(6):
            store.append({"topic": "Other", "queue_id": 0, "body": b"o%d" % i})
            store.append({"topic": "Parent", "queue_id": 1, "body": b"m%d" % i, "tags": "t",
                          "properties": _props(i)})
    return path, _write_lmq_queues(path)


def test_config_names_are_the_brokers_and_off_by_default():
    """MessageStoreConfig (4.9.7): ``enableLmq = false``, ``enableMultiDispatch = false``."""
    assert not BrokerConfig().enableLmq and not BrokerConfig().enableMultiDispatch
    config = BrokerConfig.from_mapping({"enableLmq": "true", "enableMultiDispatch": "true"})
    assert config.enableLmq and config.enableMultiDispatch


def test_targets_follow_the_brokers_rules():
    """ConsumeQueue.multiDispatchLmqQueue: names and offsets split on ',' (Java's split drops trailing empty
    strings), queue id 0 for an LMQ name only with enableLmq, nothing when the counts differ."""
    props = {"INNER_MULTI_DISPATCH": "%LMQ%a,plain,", "INNER_MULTI_QUEUE_OFFSET": "4,7"}
    assert multidispatch.targets(props, 3, True) == [("%LMQ%a", 0, 4), ("plain", 3, 7)]
    assert multidispatch.targets(props, 3, False) == [("%LMQ%a", 3, 4), ("plain", 3, 7)]
    assert multidispatch.targets({**props, "INNER_MULTI_QUEUE_OFFSET": "4"}, 3, True) == []
    assert multidispatch.targets({"INNER_MULTI_DISPATCH": " "}, 3, True) == []


def test_verify_accepts_lmq_entries_and_still_reports_a_wrong_one(lmq_store):
    path, phys = lmq_store
    with segstore.open(path, format="rocketmq", **SIZES) as store:
        assert store.verify() == []
    # entry 1 of %LMQ%a pointed at the message of %LMQ%b offset 1 (Parent message 3): not its message
    with open(os.path.join(path, "consumequeue", "%LMQ%a", "0", "0" * 20), "r+b") as f:
        f.seek(20)
        f.write(struct.pack(">q", phys["%LMQ%b"][1]))
    with segstore.open(path, format="rocketmq", **SIZES) as store:
        problems = store.verify()
    assert [(p.path.endswith(os.path.join("%LMQ%a", "0", "0" * 20)), p.pos) for p in problems] == [(True, 20)]
    assert "expected (%LMQ%a, 0, 1," in problems[0].message


def test_reads_serve_an_lmq_queue_as_getmessage_does(lmq_store):
    """DefaultMessageStore.getMessage(%LMQ%a, 0, ...) serves the stored messages as they are (topic
    Parent, queue 1); the LMQ offset is the one INNER_MULTI_QUEUE_OFFSET names."""
    path, phys = lmq_store
    with segstore.open(path, format="rocketmq", **SIZES) as store:
        got = list(store.read("%LMQ%a", 0))
        assert [m.physical_offset for m in got] == phys["%LMQ%a"]
        assert [m.body for m in got] == [b"m0", b"m1", b"m4"]
        assert {(m.topic, m.queue_id) for m in got} == {("Parent", 1)}
        assert [m.body for m in store.read("%LMQ%b", 0, 1)] == [b"m3"]
        table = store.scan_arrow(["value", "physicalOffset"], topic="%LMQ%a", partition=0)
        assert [b.column("value").to_pylist() for b in table] == [[b"m0", b"m1", b"m4"]]
    code, out, err = cli_run("query", path, "--topic", "%LMQ%a", "--queue", "0", "--offset", "1",
                             "--count", "5")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()] == ["Parent/1@1", "Parent/1@4"]


def test_reads_still_refuse_an_entry_that_is_not_its_message(lmq_store):
    path, phys = lmq_store
    with open(os.path.join(path, "consumequeue", "%LMQ%b", "0", "0" * 20), "r+b") as f:
        f.write(struct.pack(">q", phys["%LMQ%a"][2]))     # Parent message 4: named for %LMQ%a only
    with segstore.open(path, format="rocketmq", **SIZES) as store:
        with pytest.raises(CorruptDataError, match="expected a %LMQ%b/0 message"):
            list(store.read("%LMQ%b", 0))
        with pytest.raises(CorruptDataError, match="expected a %LMQ%b/0 message"):
            list(store.scan_arrow(["value"], topic="%LMQ%b", partition=0))


@pytest.mark.parametrize("as_json", [False, True])
def test_dump_of_an_lmq_topic_lists_its_messages(lmq_store, as_json):
    """dump --topic walks the commitlog by topic; an LMQ topic has no message of its own there, so its
    queue is read instead: the messages it points at, in commitlog order."""
    path, phys = lmq_store
    code, out, err = cli_run("dump", path, "--topic", "%LMQ%a", *(["--json"] if as_json else []))
    assert code == 0, err
    if as_json:
        assert [json.loads(line)["physical_offset"] for line in out.splitlines()] == phys["%LMQ%a"]
    else:
        assert [int(line.split()[0]) for line in out.splitlines()] == phys["%LMQ%a"]
    code, out, err = cli_run("dump", path, "--topic", "Parent")
    assert code == 0 and len(out.splitlines()) == 6
