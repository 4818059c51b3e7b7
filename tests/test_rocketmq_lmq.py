"""Multi-dispatch (LMQ) consume queues, as RocketMQ 4.9.7 writes them with ``enableMultiDispatch`` and
``enableLmq`` (MessageStoreConfig): ``ConsumeQueue.putMessagePositionInfoWrapper`` calls
``multiDispatchLmqQueue``, which puts an entry for the message into each queue its ``INNER_MULTI_DISPATCH``
names (queue id 0 for a ``%LMQ%`` name, ``MixAll.isLmq``), at the offset ``INNER_MULTI_QUEUE_OFFSET``
names at the same position.  Those queues point at messages of another topic by design, and the broker's
``getMessage`` serves them as stored."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
from conftest import cli_run
from segstore_rocketmq import multidispatch
from segstore_rocketmq.config import BrokerConfig
from segstore_rocketmq.javacompat import string_hash

import segstore
from segstore.errors import CorruptDataError, UnsupportedOperationError

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


def test_target_offsets_are_what_long_parselong_reads():
    """4.9.7 ``ConsumeQueue.multiDispatchLmqQueue``: ``Long.parseLong(queueOffsets[i])``, which reads any
    BMP decimal digit and leading zeros of any number, and throws on a digit past the BMP (two surrogates
    to Java), ending the dispatch there.  The ASCII-only reading dispatched none of the first two."""
    props = {"INNER_MULTI_DISPATCH": "%LMQ%a,plain"}
    assert multidispatch.targets({**props, "INNER_MULTI_QUEUE_OFFSET": "\u0664,\uff17"}, 3, True) == [
        ("%LMQ%a", 0, 4), ("plain", 3, 7)]
    assert multidispatch.targets({**props, "INNER_MULTI_QUEUE_OFFSET": "0" * 25 + "4,+7"}, 3, True) == [
        ("%LMQ%a", 0, 4), ("plain", 3, 7)]
    assert multidispatch.targets({**props, "INNER_MULTI_QUEUE_OFFSET": "4,\U0001d7d5"}, 3, True) == [
        ("%LMQ%a", 0, 4)]


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
    assert "found (%LMQ%a, 0, 1," in problems[0].message


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


def _crash(path: str) -> None:
    """What a crash leaves for the broker's recoverAbnormally: the abort file, a checkpoint of zeros (the walk
    starts at the first commitlog file)."""
    open(os.path.join(path, "abort"), "wb").close()
    with open(os.path.join(path, "checkpoint"), "r+b") as f:
        f.write(bytes(24))


def _queue_files(path: str) -> dict[str, bytes]:
    root = os.path.join(path, "consumequeue")
    found = {}
    for topic in sorted(os.listdir(root)):
        for qid in os.listdir(os.path.join(root, topic)):
            with open(os.path.join(root, topic, qid, "0" * 20), "rb") as f:
                found[f"{topic}/{qid}"] = f.read(200)
    return found


def test_recovery_redispatches_a_lost_lmq_entry_with_enable_multi_dispatch(lmq_store, tmp_path):
    """DefaultMessageStore.recoverAbnormally dispatches every message walked again; with enableMultiDispatch
    ConsumeQueue.multiDispatchLmqQueue restores the entries a crash lost (RmqLoad, the real 4.9.7 store, ends
    such a crash with %LMQ%a at maxOffset 3 and every entry as before; a store recovered without it kept 2
    forever)."""
    path, _ = lmq_store
    before = _queue_files(path)
    with open(os.path.join(path, "consumequeue", "%LMQ%a", "0", "0" * 20), "r+b") as f:
        f.seek(40)
        f.write(bytes(20))
    _crash(path)
    code, out, err = cli_run("recover", path, "--config", "enableMultiDispatch=true",
                             "--config", "enableLmq=true")
    assert code == 0, err
    assert "consumequeue %LMQ%a/0: re-dispatched 1 multi-dispatch entries from queue offset 2" in out
    assert _queue_files(path) == before
    with segstore.open(path, format="rocketmq", **SIZES) as store:
        assert store.offset_range("%LMQ%a", 0) == (0, 3) and store.verify() == []


def test_recovery_builds_lmq_queues_only_with_enable_multi_dispatch(lmq_store):
    """The broker dispatches multi-dispatch entries only when enableMultiDispatch is set
    (DefaultMessageStore.checkMultiDispatchQueue): without it a rebuild makes no LMQ queue; with it, every
    queue and entry the broker's rebuild makes (compared with RmqLoad's on the same commitlog)."""
    path, _ = lmq_store
    before = _queue_files(path)
    shutil.rmtree(os.path.join(path, "consumequeue"))
    _crash(path)
    with segstore.open(path, format="rocketmq", mode="a", **SIZES):
        pass
    assert sorted(_queue_files(path)) == ["Other/0", "Parent/1"]
    shutil.rmtree(os.path.join(path, "consumequeue"))
    _crash(path)
    with segstore.open(path, format="rocketmq", mode="a", enableMultiDispatch=True, enableLmq=True, **SIZES):
        pass
    assert _queue_files(path) == before


def test_recovery_leaves_an_lmq_entry_past_the_queues_end_unwritten(lmq_store):
    """ConsumeQueue.putMessagePositionInfo writes an entry past the queue's end into the next slot ("logic
    queue order maybe wrong"): segstore reports it instead of writing it where it does not belong."""
    path, _ = lmq_store
    with segstore.open(path, format="rocketmq", mode="a", **SIZES) as store:    # stored as given
        store.append({"topic": "Parent", "queue_id": 1, "body": b"late", "properties": {
            "INNER_MULTI_DISPATCH": "%LMQ%a", "INNER_MULTI_QUEUE_OFFSET": "5"}})
    _crash(path)
    with segstore.open(path, format="rocketmq", mode="a", enableMultiDispatch=True, enableLmq=True,
                       **SIZES) as store:
        lines = store.recovery_lines
        assert store.offset_range("%LMQ%a", 0) == (0, 3)
    assert [line for line in lines if "%LMQ%" in line] == [
        "consumequeue %LMQ%a/0: multi-dispatch entry 5 of the message at commitlog offset 1447 is past the "
        "queue's end 3; not written"]


def test_append_with_enable_multi_dispatch_refuses_a_multi_dispatch_message(tmp_path):
    """With enableMultiDispatch the broker assigns INNER_MULTI_QUEUE_OFFSET on put (4.9.7
    MultiDispatch.wrapMultiDispatch) and dispatches the LMQ entries: not done by segstore, so refused
    rather than stored as given; without the config the broker stores the properties as given, and so
    does segstore."""
    path = str(tmp_path / "s")
    item = {"topic": "Parent", "body": b"x", "properties": {"INNER_MULTI_DISPATCH": "%LMQ%a",
                                                              "INNER_MULTI_QUEUE_OFFSET": "0"}}
    with segstore.open(path, format="rocketmq", mode="a", enableMultiDispatch=True, **SIZES) as store:
        with pytest.raises(UnsupportedOperationError, match="INNER_MULTI_DISPATCH"):
            store.append(item)
    with segstore.open(path, format="rocketmq", mode="a", **SIZES) as store:
        store.append(item)
        assert sorted(store.topics()) == ["Parent"]
