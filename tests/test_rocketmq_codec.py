"""The RocketMQ message codec and the Java behaviour it depends on.

Golden vectors come from the compat fixtures (bytes written by RocketMQ 4.9.7's
own store); property tests cover what the fixtures cannot enumerate.
"""

from __future__ import annotations

import ipaddress
import json
import random

import pytest
from conftest import FIXTURES, ROCKETMQ_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import javacompat
from segstore_rocketmq.message import (
    BLANK_MAGIC,
    END,
    HEADERS,
    MESSAGE_MAGIC_V2,
    PREFIX,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    Blank,
    Host,
    RocketMQMessage,
    body_crc,
    decode,
    decode_properties,
    encode,
    encode_properties,
    store_timestamp_at,
)

from segstore.errors import CorruptDataError, InvalidMessageError, InvalidTopicError, TruncatedDataError


def fixture_messages() -> list[dict]:
    out = []
    for name in ROCKETMQ_FIXTURES:
        with open(FIXTURES / "rocketmq" / name / "dump.jsonl", encoding="utf-8") as f:
            out.extend(m for m in map(json.loads, f) if m["type"] == "message")
    return out


MESSAGES = fixture_messages()


def java_hash_reference(text: str) -> int:
    """String.hashCode straight from its definition (the oracle)."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


# -- golden: the broker's bytes ------------------------------------------------------

def test_every_fixture_message_decodes_and_reencodes_to_the_brokers_bytes():
    assert len(MESSAGES) > 400
    for exp in MESSAGES:
        raw = bytes.fromhex(exp["rawHex"])
        msg = decode(raw)
        assert isinstance(msg, RocketMQMessage)
        assert (msg.topic, msg.queue_id, msg.queue_offset, msg.physical_offset, msg.size, msg.body_crc) == (
            exp["topic"], exp["queueId"], exp["queueOffset"], exp["physicalOffset"], exp["storeSize"],
            exp["bodyCRC"])
        assert (str(msg.born_host), str(msg.store_host), msg.msg_id) == (
            exp["bornHost"], exp["storeHost"], exp["msgId"])
        assert msg.properties == exp["properties"]
        stored = [kv.split("\x01")[0] for kv in exp["propertiesRaw"].split("\x02") if kv]
        assert list(msg.properties) == stored
        assert encode(msg) == raw


def test_java_string_hash_matches_the_fixture_tags_codes():
    seen = 0
    for exp in MESSAGES:
        if exp["tags"] and exp["topic"] != "SCHEDULE_TOPIC_XXXX":
            assert javacompat.string_hash(exp["tags"]) == exp["tagsCode"]
            seen += 1
    assert seen > 100


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("TagA", 2598919), ("polygenelubricants", -2147483648),
    ("😀", 1772899),   # a surrogate pair: two UTF-16 code units
])
def test_java_string_hash_vectors(text, expected):
    assert javacompat.string_hash(text) == expected
    assert java_hash_reference(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_java_string_hash_equals_its_definition(text):
    assert javacompat.string_hash(text) == java_hash_reference(text)


def test_java_string_hash_long_strings_use_the_block_path():
    rng = random.Random(7)
    for n in (65, 4095, 4096, 4097, 10_000):
        text = "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(n))
        assert javacompat.string_hash(text) == java_hash_reference(text)


def test_hashmap_order_matches_every_stored_properties_string():
    for exp in MESSAGES:
        stored = [kv.split("\x01")[0] for kv in exp["propertiesRaw"].split("\x02") if kv]
        assert javacompat.hashmap_order(sorted(stored)) == stored


def test_hashmap_collisions_keep_insertion_order_and_resize_rebuckets():
    # "Aa" and "BB" have the same String.hashCode: same bucket, insertion order wins.
    assert javacompat.string_hash("Aa") == javacompat.string_hash("BB")
    assert javacompat.hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]
    assert javacompat.hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
    # 13 keys exceed 16 * 0.75: the table doubles to 32.
    assert javacompat.hashmap_table_size(12) == 16
    assert javacompat.hashmap_table_size(13) == 32
    assert javacompat.hashmap_table_size(0, 128) == 128
    keys = [f"k{i}" for i in range(13)]
    buckets = [javacompat.spread_hash(k) & 31 for k in javacompat.hashmap_order(keys)]
    assert buckets == sorted(buckets)


def test_java_host_prints_ipv6_uncompressed():
    assert javacompat.java_host(ipaddress.ip_address("2001:db8::11")) == "2001:db8:0:0:0:0:0:11"
    assert str(Host.parse("[::1]:10911")) == "[0:0:0:0:0:0:0:1]:10911"
    assert str(Host.parse("10.0.0.1:80")) == "10.0.0.1:80"
    with pytest.raises(InvalidMessageError):
        Host.parse("nohost")
    with pytest.raises(InvalidMessageError):
        Host.parse("1.2.3.4:70000")


# -- structure ------------------------------------------------------------------------

def test_blank_and_unwritten_space():
    assert decode(PREFIX.pack(4096, BLANK_MAGIC) + bytes(8)) == Blank(4096)
    assert decode(bytes(64)) is END
    assert decode(b"") is END


def test_errors_name_the_position():
    raw = bytes.fromhex(MESSAGES[0]["rawHex"])
    with pytest.raises(TruncatedDataError) as info:
        decode(raw[:-1], path="cl", base_pos=1000)
    assert (info.value.path, info.value.pos) == ("cl", 1000)
    with_body = next(m for m in MESSAGES if m["bodyBase64"] and m["sysFlag"] & 0x30 == 0)
    flipped = bytearray(bytes.fromhex(with_body["rawHex"]))
    flipped[HEADERS[0].size] ^= 0xFF      # the first body byte
    with pytest.raises(CorruptDataError, match="CRC"):
        decode(bytes(flipped), path="cl")
    with pytest.raises(CorruptDataError, match="magic"):
        decode(b"\x00\x00\x00\x40garbage!" + bytes(60), path="cl", base_pos=8)
    assert decode(bytes(flipped), check_crc=False).body != b""


def test_v2_magic_reads_a_two_byte_topic_length():
    msg = RocketMQMessage(topic="T" * 200, queue_id=1, body=b"x", magic=MESSAGE_MAGIC_V2)
    back = decode(encode(msg))
    assert (back.topic, back.magic, back.size) == ("T" * 200, MESSAGE_MAGIC_V2, msg.size)
    with pytest.raises(InvalidTopicError):
        encode(RocketMQMessage(topic="T" * 200, queue_id=1))


def test_properties_cannot_carry_the_separators():
    for bad in ({"a\x01": "v"}, {"a": "v\x02"}, {"\x02": "v"}, {"a\x01b": "\x01"}):
        with pytest.raises(InvalidMessageError, match="separators"):
            encode_properties(bad)
    # a value may hold 0x01: 4.9.7 string2messageProperties reads a value as everything after the
    # item's first 0x01, so it comes back whole
    for good in ({"a": "\x01"}, {"a": "x\x01y", "b": "\x01\x01"}):
        assert decode_properties(encode_properties(good)) == good
    with pytest.raises(InvalidMessageError, match="32767"):
        encode_properties({"big": "x" * 40_000})
    # written (a stored message may hold them), read as the broker reads them: RocketMQ 4.9.7
    # MessageDecoder.string2messageProperties drops a pair with an empty name or value
    assert decode_properties(encode_properties({"a": "", "": "b", "c": "d"})) == {"c": "d"}


# -- properties ---------------------------------------------------------------------------

TOPICS = st.text(alphabet="%|abcXYZ019_-", min_size=1, max_size=127)
TEXT = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
               max_size=40)
IPV4 = st.builds(lambda ip, port: Host(ip.packed, port), st.ip_addresses(v=4), st.integers(0, 65535))
IPV6 = st.builds(lambda ip, port: Host(ip.packed, port), st.ip_addresses(v=6), st.integers(0, 65535))
HOSTS = IPV4 | IPV6
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)


BODIES = st.binary(max_size=2048)


@st.composite
def messages(draw, body=BODIES):
    # names and values not empty: the broker's decoder drops such pairs (test_rocketmq_property_pairs.py)
    props = draw(st.dictionaries(TEXT.filter(bool), TEXT.filter(bool), max_size=6))
    tags = draw(st.none() | TEXT.filter(bool))
    if tags:
        props["TAGS"] = tags
    keys = draw(st.lists(TEXT.filter(lambda k: k and " " not in k), max_size=3))
    if keys:
        props["KEYS"] = " ".join(keys)
    return RocketMQMessage(
        topic=draw(TOPICS), queue_id=draw(I32), body=draw(body), properties=props, flag=draw(I32),
        queue_offset=draw(I64), physical_offset=draw(I64), sys_flag=draw(st.integers(0, 0xF)),
        born_timestamp=draw(I64), born_host=draw(HOSTS), store_timestamp=draw(I64), store_host=draw(HOSTS),
        reconsume_times=draw(I32), prepared_transaction_offset=draw(I64))


@settings(max_examples=150, deadline=None)
@given(messages())
def test_round_trip_and_size(msg):
    raw = encode(msg)
    assert msg.size == len(raw)
    assert msg.body_crc == body_crc(msg.body)
    assert bool(msg.sys_flag & SYSFLAG_BORNHOST_V6) == msg.born_host.is_v6
    assert bool(msg.sys_flag & SYSFLAG_STOREHOST_V6) == msg.store_host.is_v6
    back = decode(raw)
    assert back == msg
    assert len(back.msg_id) == (32 if len(msg.store_host.ip) == 4 else 56)
    # where 4.9.7 CommitLog.isMappedFileMatchedRecover reads it: after a 4- or 16-byte born host
    assert store_timestamp_at(b"pad" + raw, 3) == msg.store_timestamp


@settings(max_examples=5, deadline=None)
@given(messages(body=st.sampled_from([b"", bytes(4 * 1024 * 1024)])))
def test_empty_and_4_mib_bodies(msg):
    back = decode(encode(msg))
    assert back.body == msg.body and back.size == msg.size


@settings(max_examples=50, deadline=None)
@given(messages(), st.text(alphabet="\x01\x02", min_size=1, max_size=3), st.booleans())
def test_properties_with_separators_are_rejected(msg, bad, in_name):
    """0x02 anywhere, 0x01 in a name (a value keeps its 0x01: test_properties_cannot_carry_the_separators)."""
    if in_name:
        msg.properties["x" + bad] = "v"
    elif "\x02" in bad:
        msg.properties["x"] = "v" + bad
    else:
        return
    with pytest.raises(InvalidMessageError):
        encode(msg)


def java_hashmap_simulation(keys: list[str], capacity: int = 16) -> list[str]:
    """java.util.HashMap put/resize done step by step (the oracle): chains split on resize in order."""
    table: list[list[str]] = [[] for _ in range(javacompat.table_size_for(capacity))]
    size = 0
    for key in keys:
        bucket = table[javacompat.spread_hash(key) & (len(table) - 1)]
        if key in bucket:
            continue
        bucket.append(key)
        size += 1
        if size > int(len(table) * 0.75):
            bigger: list[list[str]] = [[] for _ in range(2 * len(table))]
            for chain in table:
                for k in chain:
                    bigger[javacompat.spread_hash(k) & (len(bigger) - 1)].append(k)
            table = bigger
    return [k for chain in table for k in chain]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=6) | st.sampled_from(["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa"]),
                max_size=60),
       st.sampled_from([1, 16, 64, 128]))
def test_hashmap_order_equals_a_step_by_step_hashmap(keys, capacity):
    assert javacompat.hashmap_order(keys, capacity) == java_hashmap_simulation(keys, capacity)
