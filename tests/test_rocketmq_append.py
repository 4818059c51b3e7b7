"""The RocketMQ append path: refused appends change nothing (issue 15), one encoder (issue 11 item 4).

- Every example of issue 15's "a refused append corrupts the store" and the other
  out-of-range, too-long and hostile values raise :class:`InvalidMessageError` before
  any queue offset, file or byte is taken, single and in a batch.
- The C batch encoder writes exactly what the reference encoder (:func:`message.encode`)
  writes for the same message, and places BLANKs by the one rule (:func:`commitlog.place`).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_rocketmq import fastappend
from segstore_rocketmq.commitlog import place
from segstore_rocketmq.message import (
    BLANK,
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    Blank,
    Host,
    RocketMQMessage,
    blank_record,
    decode,
    encode,
    encode_topic,
)
from segstore_rocketmq.store import RocketMQStore

from segstore.errors import InvalidMessageError, InvalidTopicError, MessageTooLargeError
from segstore.records import Message

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxMessageSize": 1024,
         "maxHashSlotNum": 8, "maxIndexNum": 32}


def snapshot(path: Path) -> dict[str, str]:
    """Every file under ``path`` with the digest of its bytes."""
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


#: Integer fields of the wrong kind, which int() converted (1.9 -> 1, "1" and True -> queue 1, True ->
#: sysFlag 0x1, compressed) where Kafka's producer refuses them: (fields, the field named).
WRONG_KINDS = [
    ({"timestamp": 1.9}, "timestamp"), ({"partition": "1"}, "partition"), ({"partition": True}, "partition"),
    ({"queue_id": True}, "queue_id"), ({"queue_id": 1.0}, "queue_id"), ({"flag": 1.5}, "flag"),
    ({"sys_flag": True}, "sys_flag"), ({"born_timestamp": 1.9}, "born_timestamp"),
    ({"store_timestamp": "5"}, "store_timestamp"), ({"delay_level": 1.0}, "delay_level"),
    ({"reconsume_times": False}, "reconsume_times"),
    ({"prepared_transaction_offset": 2.5}, "prepared_transaction_offset"),
]

#: Issue 15 ("A refused append corrupts the store") and more of its kind: (fields, error).
BAD = [
    ({"flag": 2**40}, InvalidMessageError),
    ({"born_timestamp": 2**70}, InvalidMessageError),
    ({"queue_id": 2**31}, InvalidMessageError),
    ({"queue_id": 2**31 - 1}, InvalidMessageError),      # its queue count overflows topics.json's int
    ({"queue_id": -1}, InvalidMessageError),
    ({"store_timestamp": -(2**63) - 1}, InvalidMessageError),
    ({"reconsume_times": 2**31}, InvalidMessageError),
    ({"prepared_transaction_offset": 2**63}, InvalidMessageError),
    ({"sys_flag": 2**32}, InvalidMessageError),
    ({"flag": "x"}, InvalidMessageError),
    ({"delay_level": "soon"}, InvalidMessageError),
    # 4.9.7 Message.setDelayTimeLevel(int) / getDelayTimeLevel's Integer.parseInt: a level past a Java
    # int was clamped to the last level (or stored as a DELAY the broker's put fails on)
    ({"delay_level": 2**31}, InvalidMessageError),
    ({"delay_level": -(2**31) - 1}, InvalidMessageError),
    ({"born_host": "1.2.3.4:99999"}, InvalidMessageError),
    ({"store_host": "nowhere"}, InvalidMessageError),
    ({"body": 5}, InvalidMessageError),
    ({"body": bytes(2000)}, MessageTooLargeError),                       # a body > maxMessageSize 1024
    ({"properties": {"p": "v" * 40000}}, InvalidMessageError),          # > a short's 32767 bytes
    ({"properties": {"p": "v" * 4000}}, MessageTooLargeError),           # > a commitlog file - 8
    ({"keys": ["k" * 4000]}, MessageTooLargeError),
    ({"tags": "a\x02b"}, InvalidMessageError),
    ({"properties": {"a\x01b": "v"}}, InvalidMessageError),
    ({"topic": "T" * 128}, InvalidTopicError),                            # > 127 characters
    ({"topic": "../x"}, InvalidTopicError),
    ({"topic": "a/b"}, InvalidTopicError),
    ({"topic": ".."}, InvalidTopicError),
    ({"topic": ""}, InvalidTopicError),
    ({"topic": "a\x00b"}, InvalidTopicError),
    ({"topic": "ünï"}, InvalidTopicError),
    ({"topic": 5}, InvalidTopicError),
    ({"topic": None}, InvalidTopicError),
    # RocketMQ 4.9.7 Message.putProperty/putUserProperty: properties are a HashMap, one value a name,
    # so a field and the property it becomes (or a header name given twice) would lose one of them
    ({"keys": ["k1"], "properties": {"KEYS": "k2"}}, InvalidMessageError),
    ({"tags": "y", "properties": {"TAGS": "z"}}, InvalidMessageError),
    ({"delay_level": 2, "properties": {"DELAY": "3"}}, InvalidMessageError),
    ({"headers": [["a", "1"], ["a", "2"]]}, InvalidMessageError),
    *[(fields, InvalidMessageError) for fields, _ in WRONG_KINDS],
]


@pytest.mark.parametrize("as_batch", [False, True], ids=["single", "batch"])
@pytest.mark.parametrize(("fields", "error"), BAD, ids=[repr(f)[:40] for f, _ in BAD])
def test_a_refused_append_changes_nothing(tmp_path, fields, error, as_batch):
    path = tmp_path / "s"
    with RocketMQStore(str(path), "a", SMALL, clock=lambda: 1_700_000_000_000) as store:
        store.append_batch([{"topic": "T", "queue_id": q, "body": b"before", "keys": "k"} for q in (0, 1)])
        store.flush()
        before = (store.commitlog.end, dict(store.next_offsets), snapshot(path))
        bad = {"topic": "T", "body": b"bad", **fields}
        with pytest.raises(error) as caught:
            if as_batch:
                store.append_batch([{"topic": "T", "body": b"good"}, {"topic": "T", "queue_id": 1}, bad])
            else:
                store.append(bad)
        assert isinstance(caught.value, InvalidMessageError)
        store.flush()
        assert (store.commitlog.end, dict(store.next_offsets), snapshot(path)) == before
        after = store.append_batch([{"topic": "T", "queue_id": q, "body": b"after"} for q in (0, 1)])
        assert [r.offset for r in after] == [1, 1]      # no gap where the refused ones were
        assert store.verify() == []
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert [m.body for m in store.read("T", 0)] == [b"before", b"after"]
        assert store.verify() == []


@pytest.mark.parametrize("fields, said", [
    ({"keys": ["k1"], "properties": {"KEYS": "k2"}}, "expected one of keys or the KEYS property, found both"),
    ({"tags": "y", "properties": {"TAGS": "z"}}, "expected one of tags or the TAGS property, found both"),
    ({"delay_level": 2, "properties": {"DELAY": "3"}},
     "expected one of delay_level or the DELAY property, found both"),
    ({"headers": [["a", "1"], ["a", "2"]]},
     "expected each property name once (RocketMQ properties are a map), found 'a' twice"),
])
def test_a_value_given_twice_is_refused_not_half_stored(tmp_path, fields, said):
    """RocketMQ 4.9.7 Message.putProperty/putUserProperty put into a HashMap: a second value of a
    name replaces the first.  An append giving both is refused, naming the fields; a field alone,
    or a property alone, is stored (Kafka's headers keep repeated names: only RocketMQ refuses)."""
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        with pytest.raises(InvalidMessageError, match=re.escape(said)):
            store.append({"topic": "T", "body": b"x", **fields})
        with pytest.raises(InvalidMessageError, match="found 'a' twice"):
            store.append(Message("T", b"x", headers=[("a", b"1"), ("a", b"2")]))
        assert store.commitlog.end == 0
        alone = [{"keys": ["k1"]}, {"properties": {"KEYS": "k2"}}, {"tags": "y"},
                 {"properties": {"TAGS": "z"}}, {"headers": [["a", "1"], ["b", "2"]]}]
        store.append_batch([{"topic": "T", "body": b"x", **one} for one in alone])
        got = [m.properties for m in store.read("T", 0)]
    assert got == [{"KEYS": "k1"}, {"KEYS": "k2"}, {"TAGS": "y"}, {"TAGS": "z"}, {"a": "1", "b": "2"}]


@pytest.mark.parametrize("fields, name", WRONG_KINDS, ids=[repr(f)[:40] for f, _ in WRONG_KINDS])
def test_an_integer_field_of_another_kind_is_refused_naming_it(tmp_path, fields, name):
    """The broker's fields are Java ints and longs (4.9.7 MessageExtBrokerInner): a float, a string or
    a bool is no such value.  The plain paths (C and Python) do not take the item, the general path
    refuses it naming the field; an integer of another type (numpy's) is one."""
    item = {"topic": "T", "body": b"x", **fields}
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        with pytest.raises(InvalidMessageError, match=f"expected {name} as an integer, found "):
            store.append(item)
        with pytest.raises(InvalidMessageError, match=f"expected {name} as an integer, found "):
            store.append_batch([item])
        assert store.commitlog.end == 0
        [got] = store.append_batch([{"topic": "T", "body": b"x", "flag": np.int32(3),
                                     "queue_id": np.int64(1)}])
        assert (store.message_at(got.position).flag, got.partition) == (3, 1)
    fields_of = {"T": encode_topic("T", MESSAGE_MAGIC)}
    plain = [fastappend.encode_plain_py] + ([] if fastappend._speedups is None else
                                            [fastappend._speedups.encode_plain])
    for encode_plain in plain:      # the general path's to refuse
        assert encode_plain([item], fields_of, {}, fastappend.KEYS_FIRST, 5, *IPV4, 0, 4096, 1024, False,
                            None) is None


def test_stored_messages_keep_their_magic_and_refuse_a_negative_queue(tmp_path):
    """append_stored writes a v2 message (2-byte topic length) as v2, and never makes queue -1."""
    v2 = RocketMQMessage("T2", 0, b"v2 body", {"a": "b"}, magic=MESSAGE_MAGIC_V2, store_timestamp=5)
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        [result] = store.append_stored([v2])
        with pytest.raises(InvalidMessageError):
            store.append_stored([RocketMQMessage("T2", -1, b"x")])
        assert not os.path.exists(tmp_path / "s" / "consumequeue" / "T2" / "-1")
        back = store.message_at(result.position)
        assert (back.magic, back.topic, back.body, back.properties) == (MESSAGE_MAGIC_V2, "T2", b"v2 body",
                                                                        {"a": "b"})
        assert store.verify() == []


@pytest.mark.parametrize("spelled", ["[::ffff:10.0.0.1]:2", "[0:0:0:0:0:ffff:a00:1]:2",
                                     "[::FFFF:0a00:0001]:2"])
def test_an_ipv4_mapped_host_is_written_as_the_broker_writes_it(tmp_path, spelled):
    """A broker's socket addresses are Inet4Address for IPv4 peers (Java's InetAddress turns a v4-mapped
    address into one): 4 bytes, no v6 sysFlag bit, a 32-character msgId.  Written as 16 bytes, RocketMQ
    4.9.7 MessageDecoder.decodeMessage (InetAddress.getByAddress) would read another host than
    segstore, and another msgId."""
    assert Host.parse(spelled) == Host(bytes([10, 0, 0, 1]), 2)
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        [result] = store.append_batch([{"topic": "T", "body": b"b", "born_host": spelled,
                                        "store_host": spelled.replace(":2", ":10911")}])
        msg = store.message_at(result.position)
    assert (str(msg.born_host), str(msg.store_host), msg.sys_flag) == ("10.0.0.1:2", "10.0.0.1:10911", 0)
    assert result.extra["msg_id"] == msg.msg_id == "0A00000100002A9F0000000000000000"
    assert Host.parse("[::1]:2").is_v6 and Host.parse("[::1:ffff:0:1]:2").is_v6     # other IPv6 stays IPv6


def test_encode_names_the_field_out_of_range():
    msg = RocketMQMessage("T", 0, b"x", flag=2**40)
    with pytest.raises(InvalidMessageError, match="FLAG"):
        encode(msg)
    assert (msg.size, msg.sys_flag) == (0, 0)       # left as it was
    with pytest.raises(InvalidMessageError, match="BORNHOST"):
        encode(RocketMQMessage("T", 0, b"x", born_host=Host(b"12345", 1)))
    with pytest.raises(InvalidMessageError, match="STOREHOST"):
        encode(RocketMQMessage("T", 0, b"x", store_host="1.2.3.4:5"))     # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="SYSFLAG"):
        encode(RocketMQMessage("T", 0, b"x", sys_flag="4"))               # type: ignore[arg-type]
    with pytest.raises(InvalidTopicError):
        encode(RocketMQMessage("\ud800", 0, b"x"))


# -- the C batch encoder against the reference encoder ---------------------------------

IPV4 = (bytes([10, 0, 0, 7]), 10911)
IPV6 = (bytes(range(16)), 65535)
TOPICS = ["T", "Topic-1", "a_b%c"]
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
               max_size=10)
item = st.fixed_dictionaries(
    {"topic": st.sampled_from(TOPICS)},
    optional={
        "queue_id": st.integers(0, 3),
        "body": st.binary(max_size=200),
        "tags": text,
        "keys": st.one_of(text, st.lists(text, max_size=3)),
        "born_timestamp": st.integers(-(2**63), 2**63 - 1),
        "store_timestamp": st.integers(0, 2**62),
        "flag": st.integers(-(2**31), 2**31 - 1),
    },
)


def reference(it: dict, host: Host, store_ts: int, trailing: bool) -> RocketMQMessage:
    """The message a plain item stands for, built field by field (properties in the broker's order)."""
    props = {}
    keys = it.get("keys")       # an empty text, [""] too, is no KEYS property (as _build)
    keys = " ".join(keys) if isinstance(keys, list) else keys
    has_keys = bool(keys)
    if fastappend.KEYS_FIRST and has_keys:
        props["KEYS"] = keys
    if it.get("tags"):
        props["TAGS"] = it["tags"]
    if not fastappend.KEYS_FIRST and has_keys:
        props["KEYS"] = keys
    stored = it.get("store_timestamp", store_ts)
    return RocketMQMessage(it["topic"], it.get("queue_id", 0), it.get("body", b""), props, it.get("flag", 0),
                           born_timestamp=it.get("born_timestamp", stored), born_host=host,
                           store_timestamp=stored, store_host=host, trailing_separator=trailing)


@pytest.mark.skipif(fastappend._speedups is None, reason="segstore_rocketmq._speedups not built")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(item, max_size=10), v6=st.booleans(), trailing=st.booleans(),
       file_size=st.sampled_from([300, 1000, 1 << 20]), start_in_file=st.integers(0, 292))  # 8 left at least
def test_c_writes_what_the_reference_encoder_writes(items, v6, trailing, file_size, start_in_file):
    """Both property styles (a trailing 0x02 or not), both host families, BLANKs at file ends."""
    ip, port = IPV6 if v6 else IPV4
    host = Host(ip, port)
    store_ts = 1_700_000_000_123
    start = 2 * file_size + start_in_file
    fields = {t: encode_topic(t, MESSAGE_MAGIC) for t in TOPICS}
    out = fastappend._speedups.encode_plain(items, fields, {}, fastappend.KEYS_FIRST, store_ts, ip, port,
                                            start, file_size, 4 << 20, False, None, trailing)
    if out is None:     # a message too large for the file: the general path's case
        room = file_size - END_FILE_MIN_BLANK_LENGTH
        assert any(len(encode(reference(it, host, store_ts, trailing))) > room for it in items)
        return
    data, blanks, results, _, _, _, end = out
    msgs = [reference(it, host, store_ts, trailing) for it in items]
    sizes = [len(encode(m)) for m in msgs]
    placement = place(start, sizes, file_size)
    assert blanks == placement.blanks and end == placement.end
    assert [r.position for r in results] == placement.offsets
    # lay the reference bytes out as the files would hold them: messages and BLANKs
    want = bytearray()
    pos = start
    blank_at = dict(placement.blanks)
    for msg, phys, result in zip(msgs, placement.offsets, results, strict=True):
        if pos in blank_at:
            want += blank_record(blank_at[pos])
            pos = phys
        msg.queue_offset, msg.physical_offset = result.offset, phys
        want += encode(msg)
        pos = phys + msg.size
    got = bytearray()
    done = 0
    pos = start
    for blank_pos, blank_size in blanks:   # data holds the messages only: the BLANKs go between files
        got += data[done:done + blank_pos - pos] + BLANK.pack(blank_size, BLANK_MAGIC)
        done += blank_pos - pos
        pos = blank_pos + blank_size
    got += data[done:]
    assert got == want
    for (blank_pos, blank_size) in blanks:
        assert (blank_pos + blank_size) % file_size == 0 and blank_size >= END_FILE_MIN_BLANK_LENGTH
        assert decode(blank_record(blank_size)) == Blank(blank_size)


def test_the_blank_rule_leaves_room_for_a_blank():
    assert place(4000, [88], 4096).blanks == []          # 4000 + 88 + 8 = 4096: just fits
    placement = place(4001, [88, 88, 8], 4096)
    assert placement.offsets == [4096, 4184, 4272] and placement.blanks == [(4001, 95)]
    assert place(0, [4088], 4096).blanks == [] and place(1, [4088], 4096).blanks == [(1, 4095)]
    assert place(10, [], 4096) == place(10, [], 4096) and place(10, [], 4096).end == 10
    assert np.array_equal(np.diff(place(0, [100] * 100, 1000).offsets[:9]), [100] * 8)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
@pytest.mark.parametrize("single", [False, True], ids=["batch", "single"])
def test_commitlog_appends_start_the_writeback_of_each_whole_chunk(monkeypatch, tmp_path, single):
    """Every append path writes through ``CommitLog.write_batch``, which starts the writeback of
    each whole ``files.WRITEBACK_BYTES`` of a commitlog file as the appends complete it, once,
    and of nothing else (its consume queues and IndexFile are not appended front to back)."""
    from segstore import files

    started = []
    monkeypatch.setattr(files, "WRITEBACK_BYTES", 4096)
    monkeypatch.setattr(files, "_sync_file_range",
                        lambda fd, at, n, flags: started.append((os.readlink(f"/proc/self/fd/{fd}"), at, n)))
    with RocketMQStore(str(tmp_path / "s"), "a", {"mappedFileSizeCommitLog": 64 << 10}) as store:
        messages = [{"topic": "T", "queue_id": i % 3, "body": bytes([i % 256]) * (50 + i % 700),
                     "keys": [f"k{i}"]} for i in range(300)]
        if single:
            for m in messages:
                store.append(m)
        else:
            for at in range(0, len(messages), 37):
                store.append_batch(messages[at:at + 37])
        by_path = {seg.path: seg for seg in store.commitlog.log.segments.values()}
        assert len(by_path) >= 2 and {path for path, _, _ in started} <= set(by_path)
        for path, seg in by_path.items():
            ranges = sorted((at, n) for p, at, n in started if p == path)
            covered = 0
            for at, n in ranges:
                assert at == covered and n > 0 and n % 4096 == 0
                covered += n
            assert covered == seg.wrote // 4096 * 4096


def test_the_highest_queue_id_keeps_topics_json_loadable_and_the_next_is_refused_on_every_path(tmp_path):
    """QUEUEID is an int, but a topic's queue count (id + 1) is a Java int in config/topics.json,
    which TopicConfigManager's fastjson load refuses past 2147483647 (segstore's reader too)."""
    import pyarrow as pa

    import segstore

    path = tmp_path / "s"
    with RocketMQStore(str(path), "a", SMALL) as store:
        store.append({"topic": "T", "queue_id": 2**31 - 2, "body": b"highest"})
        store.flush()
        before = snapshot(path)
        row = next(store.scan_arrow())
        table = pa.Table.from_batches([row.set_column(row.schema.get_field_index("partition"), "partition",
                                                      pa.array([2**31 - 1], pa.int32()))])
        for append in (lambda: store.append({"topic": "T", "queue_id": 2**31 - 1}),
                       lambda: store.append_batch([{"topic": "T", "queue_id": 2**31 - 1}]),
                       lambda: store.append_arrow(table),
                       lambda: store.create_queue("T", 2**31 - 1)):
            with pytest.raises(InvalidMessageError, match="queue id in \\[0, 2147483646\\]"):
                append()
        assert snapshot(path) == before
    with segstore.open(str(path), "rocketmq", "r", **SMALL) as reader:
        assert reader.topic_configs.topics["T"]["writeQueueNums"] == 2**31 - 1
        assert reader.verify() == []
        assert [m.body for m in reader.read("T", 2**31 - 2, 0)] == [b"highest"]


@pytest.mark.parametrize("fields", [{"properties": {"u": "x\x01y"}}, {"tags": "t\x01g"},
                                    {"keys": ["k\x01", "z"]}, {"properties": {"u": "\x01"}}])
def test_a_value_holding_0x01_is_stored_and_read_back_as_the_broker_does(tmp_path, fields):
    """RocketMQ 4.9.7 does not escape (MessageDecoder.messageProperties2String) and reads a value as
    everything after its item's first 0x01 (string2messageProperties; Message.putUserProperty and
    Validators.checkMessage refuse no separator), so the broker stores "u 0x01 x 0x01 y" and reads it
    back whole. segstore refused it, so a dump of such a store could not be written back (write --input)
    nor a Kafka copy of it converted back."""
    path = tmp_path / "s"
    msg = {"topic": "T", "body": b"b", **fields}
    with RocketMQStore(str(path), "a", SMALL, clock=lambda: 1_700_000_000_000) as store:
        store.append(msg)
        store.append_batch([msg])
        store.append_arrow(next(iter(store.scan_arrow())))
    with RocketMQStore(str(path), "r", SMALL) as store:
        got = list(store.scan())
        assert len(got) == 4 and store.verify() == []
        for m in got:
            assert m.properties.get("u") == fields.get("properties", {}).get("u")
            assert m.tags == fields.get("tags")
            assert m.keys == fields.get("keys", [])
        if "tags" in fields:
            assert [m.body for m in store.read("T", 0, tag=fields["tags"])] == [b"b"] * 4
        if "keys" in fields:
            assert len(store.find("T", "k\x01")) == 4


def test_a_delay_level_past_a_java_int_is_named_as_the_field_given(tmp_path):
    """4.9.7 Message.setDelayTimeLevel(int): the error names delay_level, not a DELAY property the
    caller never gave."""
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        for level in (2**31, -(2**31) - 1):
            with pytest.raises(InvalidMessageError, match=re.escape(
                    f"expected delay_level as a Java int (Message.setDelayTimeLevel), found {level}")):
                store.append({"topic": "T", "body": b"x", "delay_level": level})
        assert store.append({"topic": "T", "body": b"x", "delay_level": 2**31 - 1}).extra is not None
