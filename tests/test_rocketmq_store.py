"""The RocketMQ store through its API: appends, broker semantics, bad input, config files."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from conftest import FIXTURES, cli_run, copy_writable
from segstore_rocketmq.commitlog import END_FILE_MIN_BLANK_LENGTH
from segstore_rocketmq.config import BrokerConfig, validate_topic
from segstore_rocketmq.javacompat import string_hash
from segstore_rocketmq.message import BLANK_MAGIC, HEADERS, PREFIX, SYSFLAG_TRANSACTION_PREPARED
from segstore_rocketmq.plugin import RocketMQFormat
from segstore_rocketmq.store import RocketMQStore
from segstore_rocketmq.topicconfig import loads_fastjson

import segstore
from segstore.cli import main
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    NotFoundError,
    ReadOnlyError,
    TruncatedDataError,
)
from segstore.records import Message
from segstore.testing.conformance import StoreTests

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 64,
         "maxIndexNum": 256}
BASIC = FIXTURES / "rocketmq" / "basic" / "store"


class TestRocketMQConformance(StoreTests):
    format = "rocketmq"
    config: ClassVar[dict[str, int]] = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 400,
                                        "maxHashSlotNum": 1024, "maxIndexNum": 4096}


def store_at(tmp_path: Path, **config) -> RocketMQStore:
    return RocketMQStore(str(tmp_path / "s"), "a", {**SMALL, **config}, clock=lambda: 1_000)


def commitlog_bytes(path: Path) -> dict[str, bytes]:
    d = path / "commitlog"
    return {name: (d / name).read_bytes() for name in sorted(os.listdir(d))}


# -- appends -------------------------------------------------------------------------

def test_dict_and_message_appends_map_to_rocketmq_fields(tmp_path):
    with store_at(tmp_path) as store:
        r1 = store.append({"topic": "T", "queue_id": 1, "body": "hi", "tags": "TagA", "keys": ["k1", "k2"],
                           "properties": {"p": "v"}, "flag": 7, "born_timestamp": 5, "born_host": "[::1]:9",
                           "reconsume_times": 2})
        r2 = store.append(Message(topic="T", partition=1, value=b"v", key=b"kk", headers=[("h", b"x")],
                                  timestamp=9))
        assert (r1.offset, r2.offset, r2.position) == (0, 1, r1.size)
        assert r1.extra["store_timestamp"] == 1_000
        assert r1.extra["msg_id"] == "7F00000100002A9F0000000000000000"
        m1, m2 = store.read("T", 1)
    assert (m1.body, m1.tags, m1.keys, m1.flag, m1.born_timestamp, str(m1.born_host), m1.reconsume_times) == (
        b"hi", "TagA", ["k1", "k2"], 7, 5, "[0:0:0:0:0:0:0:1]:9", 2)
    assert m1.properties["p"] == "v" and m1.sys_flag == 0x10
    assert (m2.body, m2.keys, m2.properties["h"], m2.born_timestamp, m2.store_timestamp) == (
        b"v", ["kk"], "x", 9, 1_000)


def test_store_timestamp_defaults_to_the_wall_clock(tmp_path):
    import time

    before = time.time_ns() // 1_000_000
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        res = store.append({"topic": "T", "body": b"x"})
    assert before <= res.extra["store_timestamp"] <= time.time_ns() // 1_000_000


def test_roll_writes_a_blank_and_opens_the_next_file(tmp_path):
    with store_at(tmp_path) as store:
        results = store.append_batch([{"topic": "T", "body": bytes(900)} for _ in range(10)])
        positions = [r.position for r in results]
    # 4096-byte files: a message needs its size + 8 bytes left in the file.
    size = results[0].size
    per_file = (4096 - END_FILE_MIN_BLANK_LENGTH) // size
    assert positions[per_file] == 4096 and positions[per_file - 1] == (per_file - 1) * size
    first = (tmp_path / "s" / "commitlog" / f"{0:020d}").read_bytes()
    assert PREFIX.unpack_from(first, per_file * size) == (4096 - per_file * size, BLANK_MAGIC)
    names = sorted(os.listdir(tmp_path / "s" / "commitlog"))
    assert names == [f"{i * 4096:020d}" for i in range(len(names))]
    assert (positions[-1] + size) > (len(names) - 1) * 4096   # no preallocated file left after close


def test_delay_and_transactions_follow_the_broker(tmp_path):
    with store_at(tmp_path) as store:
        d, p, c, rb = store.append_batch([
            {"topic": "T", "queue_id": 3, "body": b"d", "tags": "X", "delay_level": 2},
            {"topic": "T", "body": b"p", "sys_flag": SYSFLAG_TRANSACTION_PREPARED, "delay_level": 2},
            {"topic": "T", "body": b"c", "sys_flag": 0x8, "prepared_transaction_offset": 1},
            {"topic": "T", "body": b"r", "sys_flag": 0xC},
        ])
        assert (d.topic, d.partition, d.offset) == ("SCHEDULE_TOPIC_XXXX", 1, 0)
        assert (p.topic, p.offset, c.offset, rb.offset) == ("T", 0, 0, 0)
        delayed = next(store.read("SCHEDULE_TOPIC_XXXX", 1))
        assert delayed.properties["REAL_TOPIC"] == "T" and delayed.properties["REAL_QID"] == "3"
        assert delayed.properties["DELAY"] == "2"
        entries = store.queues[("SCHEDULE_TOPIC_XXXX", 1)].entries(0)
        assert entries["tags_code"].tolist() == [1_000 + 5_000]
        assert store.offset_range("T", 0) == (0, 1)     # only the commit got an entry
        assert [m.body for m in store.scan()] == [b"d", b"p", b"c", b"r"]
        assert store.to_json(next(m for m in store.scan() if m.body == b"d"))["tags_code"] == 6_000


def test_the_topic_a_delay_message_was_sent_to_is_configured(tmp_path):
    """4.9.7 AbstractSendMessageProcessor.msgCheck creates the topic a send names before
    CommitLog.asyncPutMessage moves a delay message to SCHEDULE_TOPIC_XXXX: topics.json names that topic
    and queue, so the message ScheduleMessageService delivers later lands in a topic the broker routes."""
    with store_at(tmp_path) as store:
        store.append_batch([
            {"topic": "Later", "queue_id": 3, "body": b"d", "delay_level": 2},
            {"topic": "SCHEDULE_TOPIC_XXXX", "queue_id": 0, "body": b"x",
             "properties": {"REAL_TOPIC": "bad/name", "REAL_QID": "0"}},
        ])
    table = loads_fastjson((tmp_path / "s" / "config" / "topics.json").read_text(), "x")["topicConfigTable"]
    assert {name: (entry["readQueueNums"], entry["writeQueueNums"]) for name, entry in table.items()} == {
        "Later": (4, 4), "SCHEDULE_TOPIC_XXXX": (2, 2)}
    with RocketMQStore(str(tmp_path / "s"), "r", SMALL) as store:
        assert store.topics() == ["SCHEDULE_TOPIC_XXXX"]        # no queue of Later's holds an entry yet
        assert store.verify() == []


def test_tags_code_is_the_java_hash(tmp_path):
    with store_at(tmp_path) as store:
        store.append_batch([{"topic": "T", "body": b"1", "tags": "Tág-ü"}, {"topic": "T", "body": b"2"}])
        assert store.queues[("T", 0)].entries(0)["tags_code"].tolist() == [string_hash("Tág-ü"), 0]
        assert [m.body for m in store.read("T", 0, tag="Tág-ü")] == [b"1"]


def test_consumer_offsets_and_topics_json(tmp_path):
    with store_at(tmp_path) as store:
        store.append_batch([{"topic": "T", "queue_id": q, "body": b"x"} for q in (0, 1, 1)])
        store.commit_offset("g1", "T", 1, 2)
        store.commit_offset("g1", "T", 1, 1)
        store.commit_offset("g2", "T", 0, 1)
    cfg = tmp_path / "s" / "config"
    text = (cfg / "consumerOffset.json").read_text()
    # ConcurrentHashMap(512) iteration (ConsumerOffsetManager, 4.9.7): spread("T@g2") & 1023 = 48 comes
    # before spread("T@g1") & 1023 = 49
    assert text == '{\n\t"offsetTable":{\n\t\t"T@g2":{0:1\n\t\t},\n\t\t"T@g1":{1:1\n\t\t}\n\t}\n}'
    previous = loads_fastjson((cfg / "consumerOffset.json.bak").read_text(), "x")["offsetTable"]
    assert previous == {"T@g1": {1: 1}}           # the content before the last commit
    topics = loads_fastjson((cfg / "topics.json").read_text(), "x")
    assert topics["topicConfigTable"]["T"]["writeQueueNums"] == 2
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        assert store.committed_offset("g1", "T", 1) == 1
        assert store.committed_offset("g3", "T", 1) is None


# -- bad input -----------------------------------------------------------------------

@pytest.mark.parametrize("topic", ["../x", "", "a/b", "x" * 128, "tópico", None])
def test_hostile_topics_are_refused_and_nothing_is_written(tmp_path, topic):
    with store_at(tmp_path) as store:
        store.append({"topic": "T", "body": b"before"})
        end = store.commitlog.end
        with pytest.raises(InvalidTopicError):
            store.append_batch([{"topic": "T", "body": b"ok"}, {"topic": topic, "body": b"x"}])
        assert store.commitlog.end == end
        store.append({"topic": "T", "body": b"after"})
        assert [m.body for m in store.read("T", 0)] == [b"before", b"after"]
    assert not (tmp_path / "x").exists()
    assert sorted(os.listdir(tmp_path / "s" / "consumequeue")) == ["T"]


def test_topic_rules():
    assert validate_topic("%RETRY%g|x_-9") == "%RETRY%g|x_-9"
    assert validate_topic("x" * 127)


def test_oversized_message_names_size_and_limit(tmp_path):
    """RocketMQ 4.9.7 ``CommitLog.MessageExtEncoder.encode`` refuses a body above ``maxMessageSize``
    (``maxMessageBodySize``) and keeps 64 KiB for the rest of the message: a body of 1000 bytes under
    ``maxMessageSize=1024`` is stored whole (1100 bytes), one of 1025 is refused."""
    with store_at(tmp_path, maxMessageSize=1024) as store:
        store.append({"topic": "T", "body": b"a"})
        assert store.append({"topic": "T", "body": bytes(1000)}).size > 1024
        assert store.append({"topic": "T", "body": bytes(1024), "properties": {"p": "v" * 1000}}).size > 2048
        with pytest.raises(MessageTooLargeError, match=r"body of at most 1024 bytes.*found 1025") as info:
            store.append({"topic": "T", "body": bytes(1025)})
        assert info.value.path.endswith("commitlog") and info.value.pos == store.commitlog.end
        # and a message a commitlog file cannot hold with 8 bytes to spare (doAppend), whatever its body
        with pytest.raises(MessageTooLargeError, match=r"message of at most 4088 bytes.*found 4089"):
            # 91 header bytes + body + topic + "p\x01" + value
            store.append({"topic": "T", "body": bytes(1), "properties": {"p": "v" * 3994}})
        store.append({"topic": "T", "body": b"b"})
        assert [m.body for m in store.read("T", 0)] == [b"a", bytes(1000), bytes(1024), b"b"]
    assert cli_run("verify", tmp_path / "s")[0] == 0


def test_default_max_message_size_is_4_mib_of_body(tmp_path):
    """A Java producer sends a body of up to 4 MiB (``DefaultMQProducer.maxMessageSize``), which the
    4.9.7 store keeps with its headers: 4194304 + 103 bytes here."""
    assert BrokerConfig().maxMessageSize == 4 * 1024 * 1024
    assert BrokerConfig().max_stored_size == 4 * 1024 * 1024 + 64 * 1024
    with RocketMQStore(str(tmp_path / "s"), "a", {"mappedFileSizeCommitLog": 16 * 1024 * 1024}) as store:
        with pytest.raises(MessageTooLargeError):
            store.append({"topic": "T", "body": bytes(4 * 1024 * 1024 + 1)})
        body = bytes(4 * 1024 * 1024)
        assert store.append({"topic": "T", "body": body, "keys": ["bigkey"]}).size == 4194407
        assert [len(m.body) for m in store.read("T", 0)] == [4 * 1024 * 1024]


def test_bad_fields_are_refused(tmp_path):
    with store_at(tmp_path) as store:
        with pytest.raises(InvalidMessageError):
            store.append({"topic": "T", "body": b"x", "properties": {"a": "\x02"}})
        with pytest.raises(InvalidMessageError):
            store.append({"topic": "T", "bogus": 1})
        with pytest.raises(InvalidMessageError):
            store.append({"topic": "T", "born_host": "not-a-host"})
        assert store.commitlog.end == 0


def test_config_values_from_strings_and_unknown_names():
    cfg = BrokerConfig.from_mapping({"mappedFileSizeCommitLog": "4096", "flushDiskType": "SYNC_FLUSH",
                                     "messageIndexEnable": "false", "mappedFileSizeConsumeQueue": "30"})
    assert (cfg.mappedFileSizeCommitLog, cfg.flushDiskType) == (4096, "SYNC_FLUSH")
    assert cfg.messageIndexEnable is False
    assert cfg.consume_queue_file_size == 40
    assert cfg.delay_levels_ms[:4] == (1000, 5000, 10000, 30000) and cfg.delay_levels_ms[-1] == 7_200_000
    for bad in ({"noSuchName": 1}, {"maxMessageSize": "-1"}, {"flushDiskType": "SOMETIMES"},
                {"storeHost": "x"}, {"messageDelayLevel": "1x"}):
        with pytest.raises(ConfigError):
            BrokerConfig.from_mapping(bad)


@pytest.mark.parametrize("name", ["mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxMessageSize",
                                  "maxHashSlotNum", "maxIndexNum", "flushIntervalCommitLog",
                                  "transactionCheckMax"])
@pytest.mark.parametrize("value", ["2147483648", "99999999999999999999999", "1_000", "0x10"])
def test_an_int_config_past_a_java_int_is_refused(tmp_path, name, value):
    """4.9.7 ``MessageStoreConfig``/``BrokerConfig`` keep these as ``int`` fields, set by
    ``MixAll.properties2Object`` through ``Integer.parseInt`` (a value it throws on is ignored, the
    default kept).  Before: taken by Python's ``int``, and a new store's file of 1e23 bytes ended
    ``segstore write`` in an ``OverflowError`` traceback; 2147483648 made a file no broker maps."""
    with pytest.raises(ConfigError, match=f"expected a valid value for {name}, found '{value}'"):
        BrokerConfig.from_mapping({name: value})
    lines = tmp_path / "m.jsonl"
    lines.write_text('{"topic": "T", "body": "x"}\n')
    code, out, err = cli_run("write", tmp_path / "s", "--input", lines, "--config", f"{name}={value}")
    assert (code, out) == (2, "")
    assert "Traceback" not in err and f"expected a valid value for {name}" in err
    assert not (tmp_path / "s").exists()
    if name in ("maxHashSlotNum", "maxIndexNum"):   # a Java int, but not an IndexFile size that is one
        with pytest.raises(ConfigError, match=r"IndexFile size \(40 \+ 4 \* slots \+ 20 \* entries\)"):
            BrokerConfig.from_mapping({name: "2147483647"})
    else:
        assert BrokerConfig.from_mapping({name: "2147483647"}).as_dict()[name] == 2147483647


@pytest.mark.parametrize("value", [4096.5, True])
def test_an_int_config_of_another_type_is_refused_not_cut(value):
    """The broker reads these from text (``Integer.parseInt``); before, Python's ``int`` cut a library
    caller's ``4096.5`` to 4096 and took ``True`` for 1 without a word."""
    for name in ("mappedFileSizeCommitLog", "transactionTimeOut", "fileReservedTime"):
        with pytest.raises(ConfigError, match=f"expected a valid value for {name}"):
            BrokerConfig.from_mapping({name: value})


def test_transaction_timeout_is_a_java_long():
    """4.9.7 ``BrokerConfig.transactionTimeOut`` is a ``long`` (``Long.parseLong``)."""
    assert BrokerConfig.from_mapping({"transactionTimeOut": str(2**63 - 1)}).transactionTimeOut == 2**63 - 1
    for bad in (str(2**63), "-1", "1e3"):
        with pytest.raises(ConfigError, match="expected a valid value for transactionTimeOut"):
            BrokerConfig.from_mapping({"transactionTimeOut": bad})


def test_truncated_commitlog_names_file_and_position(tmp_path):
    store = copy_writable(BASIC, tmp_path / "s")
    last = sorted((store / "commitlog").iterdir())[-1]
    with open(last, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(TruncatedDataError) as info:
        RocketMQStore(str(store), "r")
    assert (info.value.path, info.value.pos) == (str(last), 1000)


def test_flipped_byte_is_a_crc_error_at_the_message(tmp_path):
    store = copy_writable(BASIC, tmp_path / "s")
    with RocketMQStore(str(store), "r") as s:
        victim = next(m for m in s.scan()
                      if len(m.body) > 10 and m.physical_offset > 300_000 and not m.sys_flag & 0x30)
    seg_base = victim.physical_offset - victim.physical_offset % 262144
    path = store / "commitlog" / f"{seg_base:020d}"
    data = bytearray(path.read_bytes())
    data[victim.physical_offset - seg_base + HEADERS[0].size + 5] ^= 0x01     # a body byte
    path.write_bytes(bytes(data))
    with RocketMQStore(str(store), "r") as s:
        with pytest.raises(CorruptDataError) as info:
            list(s.scan())
        assert (info.value.path, info.value.pos) == (str(path), victim.physical_offset - seg_base)
        with pytest.raises(CorruptDataError):
            list(s.read(victim.topic, victim.queue_id, victim.queue_offset, 1))
        assert s.verify()


def test_a_kafka_file_in_commitlog_is_a_data_error_naming_it(tmp_path):
    # still a RocketMQ store (exit 1, a data problem; issue 15), with a file its loader refuses
    store = copy_writable(BASIC, tmp_path / "s")
    kafka_log = next((FIXTURES / "kafka").glob("*/topic-0/*.log"))
    shutil.copyfile(kafka_log, store / "commitlog" / kafka_log.name)
    with pytest.raises(CorruptDataError) as info:
        RocketMQStore(str(store), "r")
    assert info.value.path == str(store / "commitlog" / kafka_log.name)
    assert RocketMQFormat().detect(str(store))
    assert RocketMQFormat().detect(str(BASIC))
    assert not RocketMQFormat().detect(str(kafka_log.parent))


def test_random_bytes_in_commitlog_are_corrupt_data(tmp_path):
    store = tmp_path / "s"
    (store / "commitlog").mkdir(parents=True)
    rng = random.Random(42)
    (store / "commitlog" / f"{0:020d}").write_bytes(rng.randbytes(4096))
    path = str(store / "commitlog" / f"{0:020d}")
    with RocketMQStore(str(store), "r") as s:     # the reads meet the damage (the open used to raise)
        with pytest.raises(CorruptDataError) as info:
            list(s.scan())
        assert info.value.path == path and info.value.pos is not None
        assert [(p.path, p.pos) for p in s.verify()] == [(path, 0)]


def test_append_after_an_error_keeps_what_was_written(tmp_path):
    with store_at(tmp_path) as store:
        store.append_batch([{"topic": "T", "body": bytes([i]) * 300} for i in range(20)])
    before = commitlog_bytes(tmp_path / "s")
    with store_at(tmp_path, maxMessageSize=512) as store:
        for bad in ({"topic": "../T", "body": b"x"}, {"topic": "T", "body": bytes(600)},
                    {"topic": "T", "properties": {"\x02": "x"}}):
            with pytest.raises((InvalidTopicError, MessageTooLargeError, InvalidMessageError)):
                store.append(bad)
        store.append({"topic": "T", "body": b"next"})
    after = commitlog_bytes(tmp_path / "s")
    for name, data in before.items():
        end = len(data.rstrip(b"\0"))
        assert after[name][:end] == data[:end]
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        assert [m.body for m in store.read("T", 0)][-2:] == [bytes([19]) * 300, b"next"]


def test_read_only_open_writes_nothing(tmp_path):
    store = copy_writable(BASIC, tmp_path / "s")
    stamp = {p: p.stat().st_mtime_ns for p in store.rglob("*")}
    with RocketMQStore(str(store), "r") as s, pytest.raises(ReadOnlyError):
        s.append({"topic": "T", "body": b"x"})
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*")} == stamp


@pytest.mark.parametrize("mode", ["w", "x", "rw", ""])
def test_an_unknown_mode_is_a_config_error_and_creates_nothing(tmp_path, mode):
    """``segstore.open`` (and a store class opened directly) takes "r" and "a" only: another mode is
    refused with the hierarchy's ConfigError (a ValueError too) before a file is looked at or made."""
    target = tmp_path / "new"
    expected = re.escape(f"expected mode 'r' (read) or 'a' (append), found {mode!r}")
    with pytest.raises(ConfigError, match=expected):
        segstore.open(target, mode=mode)
    with pytest.raises(ValueError):
        RocketMQStore(str(target), mode)
    assert not target.exists()


def test_segment_infos_cover_the_queue(tmp_path):
    with RocketMQStore(str(BASIC), "r") as store:
        infos = store.segment_infos("TopicA", 0)
        start, end = store.offset_range("TopicA", 0)
        sizes = [m.size for m in store.read("TopicA", 0)]
    assert infos[0]["start_offset"] == start and infos[-1]["end_offset"] == end
    assert all(a["end_offset"] == b["start_offset"] for a, b in itertools.pairwise(infos))
    assert sum(i["bytes"] for i in infos) == sum(sizes)
    assert all(os.path.exists(i["path"]) for i in infos)


def test_open_through_the_registry_and_json_dump_lines(tmp_path):
    with segstore.open(str(BASIC)) as store:
        assert store.format == "rocketmq"
        first = next(store.scan())
        obj = store.to_json(first)
    assert json.loads(json.dumps(obj)) == obj
    assert obj["keys"] == ["key-0", "shared-0", "ключ-0"] and obj["tags"] == "TagA"


def test_batch_consume_queue_entries_are_one_array_per_queue(tmp_path):
    with store_at(tmp_path, mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=2000) as store:
        results = store.append_batch([{"topic": "T", "queue_id": i % 3, "body": b"x" * 10}
                                      for i in range(300)])
        for q in range(3):
            entries = store.queues[("T", q)].entries(0)
            assert entries["offset"].tolist() == [r.position for r in results if r.partition == q]
            assert np.all(entries["size"] == results[0].size)


def test_write_jsonl_accepts_rocketmq_and_common_names(tmp_path):
    lines = [{"topic": "T", "queue_id": 1, "body": "text", "tags": "A", "keys": ["k"]},
             {"topic": "T", "partition": 1, "value": "v", "key": "kk", "headers": [["h", "x"]]}]
    assert RocketMQFormat().write_jsonl(str(tmp_path / "s"), lines, SMALL) == 2
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        a, b = store.read("T", 1)
    assert (a.body, a.tags, a.keys) == (b"text", "A", ["k"])
    assert (b.body, b.keys, b.properties["h"]) == (b"v", ["kk"], "x")


def test_read_spans_chunks_and_files_with_and_without_tag(tmp_path):
    with store_at(tmp_path, mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 700) as store:
        store.append_batch([{"topic": "T", "body": str(i), "tags": "odd" if i % 2 else "even"}
                            for i in range(2500)])
        assert [int(m.body) for m in store.read("T", 0, 1000, 1500)] == list(range(1000, 2500))
        assert [m.queue_offset for m in store.read("T", 0, 999, 600, tag="odd")] == list(range(999, 2199, 2))
        assert len(store.segment_infos("T", 0)) == 4


def test_delay_levels_are_clamped_and_configurable(tmp_path):
    """RocketMQ 4.9.7 ``CommitLog.asyncPutMessage`` clamps a level above ``getMaxDelayLevel()``
    (``setDelayTimeLevel(max)``); neither it nor the client's ``Validators.checkMessage`` refuses one."""
    with store_at(tmp_path, messageDelayLevel="2s 1m") as store:
        high, one = store.append_batch([{"topic": "T", "body": b"h", "delay_level": 9},
                                        {"topic": "T", "body": b"o", "delay_level": 1}])
        assert (high.topic, high.partition, one.partition) == ("SCHEDULE_TOPIC_XXXX", 1, 0)
        assert next(store.read("SCHEDULE_TOPIC_XXXX", 1)).properties["DELAY"] == "2"
        assert store.queues[("SCHEDULE_TOPIC_XXXX", 1)].entries(0)["tags_code"].tolist() == [1_000 + 60_000]
        assert store.queues[("SCHEDULE_TOPIC_XXXX", 0)].entries(0)["tags_code"].tolist() == [1_000 + 2_000]


def test_a_delay_level_the_broker_does_not_schedule_is_stored_as_the_producer_set_it(tmp_path):
    """RocketMQ 4.9.7 ``Message.setDelayTimeLevel(-1)`` puts ``DELAY=-1``; ``CommitLog.asyncPutMessage``
    moves only a level > 0 to ``SCHEDULE_TOPIC_XXXX``, so the message stays in its topic with that
    property and its TAGS hash as tags code (a ``write --input`` line once lost the level)."""
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"topic": "T", "queue_id": 2, "body": "m", "tags": "X", "delay_level": -1}\n')
    code, _, err = cli_run("write", tmp_path / "s", "--input", lines)
    assert code == 0, err
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        msg = next(store.read("T", 2))
        assert msg.properties == {"TAGS": "X", "DELAY": "-1"}
        assert store.queues[("T", 2)].entries(0)["tags_code"].tolist() == [string_hash("X")]
        assert ("SCHEDULE_TOPIC_XXXX", 1) not in store.queues
        assert store.verify() == []
    assert b"DELAY\x01-1\x02" in (tmp_path / "s" / "commitlog" / f"{0:020d}").read_bytes()


def test_a_delay_property_keeps_its_text_or_is_refused_where_java_cannot_parse_it(tmp_path):
    """4.9.7 ``CommitLog.asyncPutMessage`` reads ``DELAY`` with ``Integer.parseInt``
    (``Message.getDelayTimeLevel``) and rewrites it only when it clamps the level; a text that
    ``parseInt`` refuses fails the put (``NumberFormatException``)."""
    with store_at(tmp_path) as store:
        kept = store.append({"topic": "T", "body": b"k", "properties": {"DELAY": "+03"}})
        assert (kept.topic, kept.partition) == ("SCHEDULE_TOPIC_XXXX", 2)
        assert next(store.read("SCHEDULE_TOPIC_XXXX", 2)).properties["DELAY"] == "+03"
        assert store.queues[("SCHEDULE_TOPIC_XXXX", 2)].entries(0)["tags_code"].tolist() == [1_000 + 10_000]
        for text in (" 3", "1.5", "x", str(2**31), "\U0001d7d1"):
            with pytest.raises(InvalidMessageError, match=r"Integer\.parseInt"):
                store.append({"topic": "T", "body": b"r", "properties": {"DELAY": text}})
        assert ("T", 0) not in store.queues
        # leading zeros of any number and any BMP decimal digit
        for text in ("0" * 30 + "3", "\u0663"):
            kept = store.append({"topic": "T", "body": b"z", "properties": {"DELAY": text}})
            assert (kept.topic, kept.partition) == ("SCHEDULE_TOPIC_XXXX", 2)


def test_a_delay_property_of_thousands_of_leading_zeros_is_the_level_java_reads(tmp_path):
    """4.9.7 ``Message.getDelayTimeLevel``: ``Integer.parseInt`` reads leading zeros of any number;
    Python's ``int`` refused a text past 4300 digits, and the put was refused ("Exceeds the limit")."""
    with segstore.open(str(tmp_path / "s"), format="rocketmq", mode="a",
                       mappedFileSizeCommitLog=65536) as store:
        kept = store.append({"topic": "T", "body": b"z", "properties": {"DELAY": "0" * 5000 + "3"}})
        assert (kept.topic, kept.partition) == ("SCHEDULE_TOPIC_XXXX", 2)


def test_consumer_offset_keys_that_are_no_topic_at_group_are_skipped_and_reported(tmp_path):
    """RocketMQ 4.9.7 ``ConsumerOffsetManager`` keys offsets ``topic@group`` (``commitOffset``,
    ``queryOffset``) and its scans (``whichTopicByConsumer``, ``removeOffset``) skip a key whose
    ``split("@")`` is not two parts: such offsets belong to no group (they were read as group "")."""
    with store_at(tmp_path) as store:
        store.append({"topic": "T", "body": b"m"})
    offsets = tmp_path / "s" / "config" / "consumerOffset.json"
    offsets.write_text('{"offsetTable":{"T@g":{0:1},"orphan":{0:5},"T@":{0:3},"T@b@c":{0:2},"@g2":{0:4}}}')
    with RocketMQStore(str(tmp_path / "s"), "a") as store:
        assert [(r.group, r.topic, r.partition, r.committed_offset) for r in store.consumer_groups().rows] \
            == [("g", "T", 0, 1)]
        with pytest.raises(NotFoundError):
            store.delete_offsets("b@c")     # removeOffset: "T@b@c" splits in three, no group's
        problems = [p.message for p in store.verify()]
    assert [re.search("found (.*): no consumer group", m).group(1) for m in problems] == \
        ["'orphan'", "'T@'", "'T@b@c'", "'@g2'"]
    assert all("expected offsetTable keys as topic@group" in m for m in problems)
    assert "orphan" in offsets.read_text()      # the broker keeps them; so does segstore


@pytest.mark.parametrize("extra", [{}, {"properties": {"p": "v"}}], ids=["fast path", "general path"])
def test_empty_tags_and_keys_are_stored_as_the_broker_stores_them(tmp_path, extra):
    """No TAGS/KEYS property for an empty text, tags code 0: 4.9.7's ``Message`` constructor sets
    neither when empty, and a producer's ``setTags("")``/``setKeys([""])`` pair is dropped by the
    broker's ``SendMessageProcessor.sendMessage`` (``MessageDecoder.string2messageProperties`` keeps
    no empty value) before ``CommitLog`` stores the re-serialised map.  ``keys=[""]`` was written as
    an empty ``KEYS`` pair no broker writes."""
    with store_at(tmp_path) as store:
        store.append_batch([{"topic": "T", "body": b"e", "tags": "", "keys": [""], **extra},
                            {"topic": "T", "body": b"e", **extra}])
        empty, plain = list(store.read("T", 0))
        assert empty.properties == plain.properties == extra.get("properties", {})
        assert empty.size == plain.size
        assert store.queues[("T", 0)].entries(0)["tags_code"].tolist() == [0, 0]
    raw = (tmp_path / "s" / "commitlog" / f"{0:020d}").read_bytes()
    assert b"KEYS" not in raw and b"TAGS" not in raw


def test_reopen_after_rolls_keeps_appending_at_the_end(tmp_path):
    with store_at(tmp_path) as store:
        first = store.append_batch([{"topic": "T", "body": bytes(1000)} for _ in range(9)])
    with store_at(tmp_path) as store:
        again = store.append_batch([{"topic": "T", "body": bytes(1000)} for _ in range(9)])
    end = first[-1].position + first[-1].size
    fits = end % 4096 + again[0].size + END_FILE_MIN_BLANK_LENGTH <= 4096
    assert again[0].offset == 9 and again[0].position == (end if fits else end - end % 4096 + 4096)
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        assert [m.queue_offset for m in store.scan()] == list(range(18))
        assert store.verify() == []


def test_a_message_leaving_exactly_8_bytes_fits_and_the_blank_is_8_bytes(tmp_path):
    overhead = HEADERS[0].size + len(b"\x01T") + 2      # header, topic field, empty properties length
    with store_at(tmp_path, maxMessageSize=8192) as store:
        exact, nxt = store.append_batch([{"topic": "T", "body": bytes(4096 - 8 - overhead)},
                                         {"topic": "T", "body": b"x"}])
    assert (exact.position, exact.size, nxt.position) == (0, 4088, 4096)
    first = (tmp_path / "s" / "commitlog" / f"{0:020d}").read_bytes()
    assert PREFIX.unpack_from(first, 4088) == (8, BLANK_MAGIC)
    with RocketMQStore(str(tmp_path / "s"), "r") as store:
        assert [m.physical_offset for m in store.scan()] == [0, 4096]


def test_append_stored_rewrites_a_broker_store_byte_for_byte(tmp_path):
    """Messages read from the broker's store and appended as stored give back its commitlog and queues."""
    spec = json.loads((BASIC.parent / "spec.json").read_text())
    config = {k: v for k, v in spec["config"].items() if k != "storeHost"}
    with segstore.open(str(BASIC), format="rocketmq") as source:
        messages = list(source.scan())
    with segstore.open(str(tmp_path / "copy"), format="rocketmq", mode="a", **config) as copy:
        results = copy.append_stored(messages)
    assert [(r.position, r.offset) for r in results] == [(m.physical_offset, m.queue_offset)
                                                         for m in messages]
    for sub in ("commitlog", "consumequeue"):
        for path in sorted((BASIC / sub).rglob("*")):
            if path.is_file():
                assert (tmp_path / "copy" / path.relative_to(BASIC)).read_bytes() == path.read_bytes(), path


def test_query_with_a_hostile_topic_names_no_topic_held(capsys):
    """As ``dump --topic ../../x``: a selector naming what the store does not hold (exit 1), not a usage
    error."""
    code = main(["query", str(BASIC), "--topic", "../../x", "--key", "k"])
    assert code == 1
    assert "../../x" in capsys.readouterr().err
