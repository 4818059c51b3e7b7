"""The RocketMQ plugin against stores written by Apache RocketMQ 4.9.7's own store code.

- reading: ``dump --json`` of each fixture equals the broker's ``dump.jsonl``
  (``clmsg`` lines for every commitlog message, ``message`` lines field for field);
- writing: replaying each ``spec.json`` gives commitlog and consume-queue files
  byte-identical to the broker's, and every put lands where ``put.jsonl`` says.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from conftest import FIXTURES, ROCKETMQ_FIXTURES
from segstore_rocketmq.plugin import RocketMQFormat
from segstore_rocketmq.store import JSON_KEYS, RocketMQStore

ROOT = FIXTURES / "rocketmq"

# dump.jsonl ``message`` field -> dump --json key
MESSAGE_FIELDS = {
    "topic": "topic", "queueId": "queue_id", "queueOffset": "queue_offset",
    "physicalOffset": "physical_offset",
    "storeSize": "size", "bodyCRC": "body_crc", "flag": "flag", "sysFlag": "sys_flag",
    "bornTimestamp": "born_timestamp", "bornHost": "born_host", "storeTimestamp": "store_timestamp",
    "storeHost": "store_host", "reconsumeTimes": "reconsume_times",
    "preparedTransactionOffset": "prepared_transaction_offset", "bodyBase64": "body",
    "properties": "properties", "tags": "tags", "tagsCode": "tags_code", "msgId": "msg_id",
}
CLMSG_FIELDS = {
    "physicalOffset": "physical_offset", "size": "size", "topic": "topic", "queueId": "queue_id",
    "queueOffset": "queue_offset", "tagsCode": "tags_code", "sysFlag": "sys_flag",
    "storeTimestamp": "store_timestamp", "preparedTransactionOffset": "prepared_transaction_offset",
}


def lines(name: str, kind: str) -> list[dict]:
    out = []
    with open(ROOT / name / "dump.jsonl", encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            if obj["type"] == kind:
                out.append(obj)
    return out


def dumped(name: str) -> list[dict]:
    with RocketMQStore(str(ROOT / name / "store"), "r") as store:
        text = b"".join(bytes(block) for block in store.dump_json()).decode("utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module", params=ROCKETMQ_FIXTURES)
def fixture_dump(request) -> tuple[str, list[dict]]:
    return request.param, dumped(request.param)


def test_dump_json_keys_are_exactly_the_documented_ones(fixture_dump):
    _, objs = fixture_dump
    assert objs
    for obj in objs:
        assert tuple(obj) == JSON_KEYS


def test_dump_json_equals_every_commitlog_message(fixture_dump):
    name, objs = fixture_dump
    expected = lines(name, "clmsg")
    assert len(objs) == len(expected)
    for obj, exp in zip(objs, expected, strict=True):
        for src, dst in CLMSG_FIELDS.items():
            assert obj[dst] == exp[src], (exp["physicalOffset"], src)
        assert " ".join(obj["keys"]) == (exp["keys"] or "")
        assert obj["properties"].get("UNIQ_KEY") == exp.get("uniqKey")


def test_dump_json_equals_the_brokers_decode_field_for_field(fixture_dump):
    name, objs = fixture_dump
    by_offset = {obj["physical_offset"]: obj for obj in objs}
    expected = lines(name, "message")
    assert expected
    for exp in expected:
        obj = by_offset[exp["physicalOffset"]]
        for src, dst in MESSAGE_FIELDS.items():
            assert obj[dst] == exp[src], (exp["physicalOffset"], src)
        assert obj["keys"] == (exp["keys"].split(" ") if exp["keys"] else [])
        assert exp["size"] == obj["size"]


def test_read_through_consume_queues_matches_the_brokers_queue_view():
    for name in ROCKETMQ_FIXTURES:
        expected = lines(name, "message")
        queues = {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"]) for q in lines(name, "queue")}
        with RocketMQStore(str(ROOT / name / "store"), "r") as store:
            ranges = {(t, q): store.offset_range(t, q) for t in store.topics() for q in store.partitions(t)}
            assert ranges == queues
            got = []
            for topic, qid in sorted(queues):
                got.extend(store.read(topic, qid))
            want = sorted(expected, key=lambda m: (m["topic"], m["queueId"], m["queueOffset"]))
            assert [(m.topic, m.queue_id, m.queue_offset, m.physical_offset) for m in got] == [
                (m["topic"], m["queueId"], m["queueOffset"], m["physicalOffset"]) for m in want]
            by_offset = {m["physicalOffset"]: m for m in expected}
            for m in got:
                exp = by_offset[m.physical_offset]
                assert base64.b64encode(m.body).decode() == exp["bodyBase64"]
                assert store.commitlog.file_for(m.physical_offset).file.read(
                    m.physical_offset % store.commitlog.file_size, m.size).hex().upper() == exp["rawHex"]


def test_tag_filter_compares_hash_then_tag():
    store_dir = ROOT / "basic" / "store"
    expected = [m for m in lines("basic", "message") if m["topic"] == "TopicA" and m["queueId"] == 1]
    with RocketMQStore(str(store_dir), "r") as store:
        for tag in {m["tags"] for m in expected if m["tags"]}:
            got = [m.queue_offset for m in store.read("TopicA", 1, tag=tag)]
            assert got == [m["queueOffset"] for m in expected if m["tags"] == tag]
            assert [m.queue_offset for m in store.read("TopicA", 1, 3, count=2, tag=tag)] == [
                m["queueOffset"] for m in expected if m["tags"] == tag and m["queueOffset"] >= 3][:2]
        assert list(store.read("TopicA", 1, tag="no-such-tag")) == []


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_spec_replay_is_byte_identical(name, tmp_path: Path):
    spec = json.loads((ROOT / name / "spec.json").read_text(encoding="utf-8"))
    out = tmp_path / "store"
    RocketMQFormat().write_spec(str(out), spec, {})
    fixture = ROOT / name / "store"
    wanted = sorted(str(p.relative_to(fixture)) for sub in ("commitlog", "consumequeue")
                    for p in (fixture / sub).rglob("*") if p.is_file())
    written = sorted(str(p.relative_to(out)) for sub in ("commitlog", "consumequeue")
                     for p in (out / sub).rglob("*") if p.is_file())
    assert written == wanted
    for rel in wanted:
        assert (out / rel).read_bytes() == (fixture / rel).read_bytes(), rel


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_spec_replay_puts_where_the_broker_put(name, tmp_path: Path):
    spec = json.loads((ROOT / name / "spec.json").read_text(encoding="utf-8"))
    puts = [json.loads(line) for line in (ROOT / name / "put.jsonl").read_text().splitlines()]
    from segstore_rocketmq.spec import append_item

    with RocketMQStore(str(tmp_path / "s"), "a", spec["config"]) as store:
        results = store.append_batch([append_item(m) for m in spec["messages"]])
    assert len(results) == len(puts)
    for res, put in zip(results, puts, strict=True):
        assert (res.topic, res.partition, res.offset, res.position, res.size) == (
            put["topic"], put["queueId"], put["queueOffset"], put["physicalOffset"], put["size"])
        assert res.extra == {"msg_id": put["msgId"], "store_timestamp": put["storeTimestamp"]}


def test_reopen_restores_queue_offsets_and_appends_after(tmp_path: Path):
    spec = json.loads((ROOT / "basic" / "spec.json").read_text(encoding="utf-8"))
    out = str(tmp_path / "store")
    RocketMQFormat().write_spec(out, spec, {})
    with RocketMQStore(out, "a", spec["config"]) as store:
        before = {(t, q): store.offset_range(t, q) for t in store.topics() for q in store.partitions(t)}
        end = store.commitlog.end
        res = store.append({"topic": "TopicA", "queue_id": 2, "body": b"after", "store_timestamp": 1})
    assert res.offset == before[("TopicA", 2)][1]
    assert res.position == end
    with RocketMQStore(out, "r") as store:
        assert store.offset_range("TopicA", 2) == (0, before[("TopicA", 2)][1] + 1)
        assert [m.body for m in store.read("TopicA", 2, res.offset)] == [b"after"]
    assert sorted(os.listdir(os.path.join(out, "commitlog")))[-1] == f"{end - end % 262144:020d}"
