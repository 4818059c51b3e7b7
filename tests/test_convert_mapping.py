"""The field mapping and topic-name escaping, record by record and on hypothesis-generated stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka import batch as kafka_codec
from segstore_rocketmq.message import Host, RocketMQMessage

import segstore
from segstore.convert import convert
from segstore.convert.mapping import (
    NONQUEUED_TOPIC,
    P_KEY,
    KafkaEntry,
    came_from_rocketmq,
    kafka_to_rocketmq,
    restore_kafka,
    restore_rocketmq,
    rocketmq_to_kafka,
)
from segstore.convert.pipeline import kafka_entry_of
from segstore.convert.topicnames import (
    kafka_from_rocketmq,
    rocketmq_from_kafka,
    unescape_kafka,
    unescape_rocketmq,
)
from segstore.errors import ConversionError, InvalidTopicError
from segstore.records import CREATE_TIME, LOG_APPEND_TIME, Message

STORE_HOST = Host.parse("10.0.0.1:10911")
ROCKETMQ_CONFIG = {"maxHashSlotNum": 64, "maxIndexNum": 256, "mappedFileSizeCommitLog": 4096}


def _kafka_copy(tmp_path: Path, messages: list[dict]) -> list:
    """The records of the Kafka copy (``tmp_path / "k"``) of a RocketMQ store (``tmp_path / "r"``) of
    ``messages``, in log order."""
    src = tmp_path / "r"
    with segstore.open(src, format="rocketmq", mode="a", **ROCKETMQ_CONFIG) as store:
        store.append_batch(messages)
    convert(str(src), str(tmp_path / "k"), to="kafka")
    with segstore.open(tmp_path / "k", "kafka") as store:
        return list(store.scan())


rocketmq_names = st.text(alphabet="%|abcXYZ019_-", min_size=1, max_size=40)
kafka_names = st.text(alphabet=".abcXYZ019_-", min_size=1, max_size=40).filter(lambda s: s not in (".", ".."))
# not empty: a RocketMQ property cannot carry an empty value (4.9.7 MessageDecoder.string2messageProperties
# drops it; the store's append refuses it)
property_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                               blacklist_characters="\x00\x01\x02"), min_size=1, max_size=12)
hosts = st.one_of(st.sampled_from(["192.168.0.1:40000", "127.0.0.1:10911", "[::1]:9876",
                                   "[2001:db8::7]:65535"]).map(Host.parse))
binaries = st.one_of(st.none(), st.binary(max_size=40))


# -- topic names ------------------------------------------------------------------------

@given(rocketmq_names)
@settings(max_examples=200, deadline=None)
def test_rocketmq_names_round_trip(name: str) -> None:
    kafka = kafka_from_rocketmq(name)
    assert "%" not in kafka and "|" not in kafka
    assert unescape_kafka(kafka) == name


@given(kafka_names)
@settings(max_examples=200, deadline=None)
def test_kafka_names_round_trip(name: str) -> None:
    rocketmq = rocketmq_from_kafka(name)
    assert "." not in rocketmq
    assert unescape_rocketmq(rocketmq) == name


@given(rocketmq_names, rocketmq_names)
@settings(max_examples=100, deadline=None)
def test_distinct_rocketmq_names_stay_distinct(a: str, b: str) -> None:
    assert (kafka_from_rocketmq(a) == kafka_from_rocketmq(b)) == (a == b)


def test_shared_names_are_unchanged_and_bad_names_refused() -> None:
    assert kafka_from_rocketmq("Topic_A-1") == rocketmq_from_kafka("Topic_A-1") == "Topic_A-1"
    assert kafka_from_rocketmq("%DLQ%g|x") == ".25DLQ.25g.7Cx"
    assert rocketmq_from_kafka("a.b") == "a%2Eb"
    for bad in ("a.b", "a.2", ".7c"):
        with pytest.raises(InvalidTopicError, match="escapes"):
            unescape_kafka(bad)
    with pytest.raises(InvalidTopicError, match="escapes"):
        unescape_rocketmq("a%b")
    # 150 characters: only a 5.1+ store takes it (as v2 messages); the destination store decides
    assert rocketmq_from_kafka("." * 50) == "%2E" * 50
    with pytest.raises(InvalidTopicError, match="at most 32767"):
        unescape_kafka(kafka_from_rocketmq("a" * 32768))
    with pytest.raises(InvalidTopicError, match="characters"):
        kafka_from_rocketmq("a/b")


# -- records ---------------------------------------------------------------------------

@st.composite
def rocketmq_messages(draw: st.DrawFn) -> RocketMQMessage:
    props = draw(st.dictionaries(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "p.0", "ü", "kafkaish"]),
                                 property_text, max_size=5))
    return RocketMQMessage(
        topic=draw(rocketmq_names), queue_id=draw(st.integers(0, 64)), body=draw(st.binary(max_size=50)),
        properties=props, flag=draw(st.integers(-2**31, 2**31 - 1)),
        queue_offset=draw(st.integers(0, 2**40)), physical_offset=draw(st.integers(0, 2**50)),
        sys_flag=draw(st.sampled_from([0, 0x4, 0x8, 0xC, 0x1, 0x2])),
        born_timestamp=draw(st.integers(0, 2**45)),
        born_host=draw(hosts), store_timestamp=draw(st.integers(0, 2**45)), store_host=draw(hosts),
        reconsume_times=draw(st.integers(0, 16)), prepared_transaction_offset=draw(st.integers(0, 2**40)))


@given(rocketmq_messages(), st.sampled_from(["born", "store"]))
@settings(max_examples=150, deadline=None)
def test_rocketmq_message_survives_kafka(msg: RocketMQMessage, timestamp: str) -> None:
    entry = rocketmq_to_kafka(msg, timestamp=timestamp)
    assert came_from_rocketmq(entry.headers)
    assert entry.value == msg.body
    assert entry.key == (msg.keys[0].encode() if msg.keys else None)
    assert entry.timestamp == (msg.born_timestamp if timestamp == "born" else msg.store_timestamp)
    if msg.sys_flag & 0xC in (0x4, 0xC):
        assert (entry.topic, entry.partition, entry.offset) == (NONQUEUED_TOPIC, 0, -1)
        entry.offset = 7
    else:
        assert (entry.partition, entry.offset) == (msg.queue_id, msg.queue_offset)
    back = restore_rocketmq(entry)
    assert back == msg
    assert list(back.properties.items()) == list(msg.properties.items())


@st.composite
def kafka_entries(draw: st.DrawFn) -> KafkaEntry:
    control = draw(st.booleans())
    transactional = control or draw(st.booleans())
    return KafkaEntry(
        topic=draw(kafka_names), partition=draw(st.integers(0, 99)), offset=draw(st.integers(0, 2**40)),
        timestamp=draw(st.integers(-1, 2**45)), key=draw(binaries), value=draw(binaries),
        headers=draw(st.lists(st.tuples(st.text(max_size=8), binaries), max_size=4)),
        timestamp_type=draw(st.sampled_from([CREATE_TIME, LOG_APPEND_TIME])), transactional=transactional,
        control=control, producer_id=draw(st.integers(0, 2**40)) if transactional else -1,
        producer_epoch=draw(st.integers(0, 2**15 - 1)) if transactional else -1)


@given(kafka_entries())
@settings(max_examples=150, deadline=None)
def test_kafka_record_survives_rocketmq(entry: KafkaEntry) -> None:
    msg = kafka_to_rocketmq(entry, store_host=STORE_HOST)
    assert msg.topic == rocketmq_from_kafka(entry.topic) and msg.queue_id == entry.partition
    assert msg.body == (entry.value or b"")
    assert (msg.sys_flag & 0xC == 0xC) == entry.control
    assert restore_kafka(msg) == entry
    assert rocketmq_to_kafka(msg) == entry


def test_keys_that_keys_cannot_carry_are_kept_in_base64() -> None:
    plain = kafka_to_rocketmq(KafkaEntry("t", 0, 0, 1, b"order-1", b"v"), store_host=STORE_HOST)
    assert plain.properties["KEYS"] == "order-1" and P_KEY not in plain.properties
    for key in (b"two words", b"\xff\xfe", b"a\x01b"):
        msg = kafka_to_rocketmq(KafkaEntry("t", 0, 0, 1, key, b"v"), store_host=STORE_HOST)
        assert "KEYS" not in msg.properties and restore_kafka(msg).key == key


def test_an_empty_key_travels_as_a_flag(tmp_path: Path) -> None:
    """An empty key (not a null one) is ``kafka.empty_key=1``, not ``kafka.key`` with an empty value: RocketMQ
    4.9.7 MessageDecoder.string2messageProperties drops a pair with an empty value, so a broker (and segstore,
    which reads as it does) would see a null key."""
    entry = KafkaEntry("t", 0, 0, 1, b"", b"v")
    msg = kafka_to_rocketmq(entry, store_host=STORE_HOST)
    assert msg.properties["kafka.empty_key"] == "1"
    assert P_KEY not in msg.properties and "KEYS" not in msg.properties
    assert restore_kafka(msg).key == b""
    src = tmp_path / "src"
    write_kafka(src, "t", 0, [{"records": [(b"", b"v", []), (None, b"w", []), (b"k", b"x", [])], "gap": 0,
                               "transactional": False, "log_append": False, "compression": "none"}])
    # (the columnar writer's C pass, or the entry path under SEGSTORE_PURE_PYTHON=1)
    convert(src, tmp_path / "r", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    with segstore.open(tmp_path / "r", "rocketmq") as store:
        stored = [m.properties for m in store.scan()]
    assert [p.get("kafka.empty_key") for p in stored] == ["1", None, None]
    assert all(P_KEY not in p for p in stored)
    convert(tmp_path / "r", tmp_path / "back", to="kafka", verify=True)
    with segstore.open(tmp_path / "back", "kafka") as back:
        assert [r.key for r in back.scan()] == [b"", None, b"k"]


def test_broken_reserved_fields_are_conversion_errors() -> None:
    entry = rocketmq_to_kafka(RocketMQMessage(topic="t", queue_id=0))
    entry.headers = [h for h in entry.headers if h[0] != "rmq.born_host"]
    with pytest.raises(ConversionError, match=r"rmq\.\* headers"):
        restore_rocketmq(entry)
    msg = RocketMQMessage(topic="t", queue_id=0, properties={"kafka.offset": "x"})
    with pytest.raises(ConversionError, match=r"kafka\.\* properties"):
        restore_kafka(msg)


# -- hypothesis-generated stores ---------------------------------------------------------

@st.composite
def rocketmq_items(draw: st.DrawFn) -> list[dict]:
    items = []
    for i in range(draw(st.integers(1, 40))):
        item = {"topic": draw(st.sampled_from(["A", "%RETRY%g", "b|c"])), "queue_id": draw(st.integers(0, 2)),
                "body": draw(st.binary(max_size=300)), "born_timestamp": 1_700_000_000_000 + i,
                "store_timestamp": 1_700_000_001_000 + i, "born_host": draw(hosts),
                "flag": draw(st.integers(0, 9)),
                "properties": draw(st.dictionaries(st.sampled_from(["a", "b", "UNIQ_KEY"]), property_text,
                                                   max_size=3)),
                "sys_flag": draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC])),
                "delay_level": draw(st.sampled_from([0, 0, 0, 3]))}
        keys = draw(st.lists(st.text(alphabet="abc-_", min_size=1, max_size=6), max_size=2))
        if keys:
            item["keys"] = keys
        tags = draw(st.one_of(st.none(), st.sampled_from(["TagA", "Täg"])))
        if tags:
            item["tags"] = tags
        items.append(item)
    return items


@given(rocketmq_items())
@settings(max_examples=8, deadline=None)
def test_generated_rocketmq_store_round_trips(tmp_path_factory: pytest.TempPathFactory,
                                              items: list[dict]) -> None:
    root = tmp_path_factory.mktemp("rmq")
    src = root / "src"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch(items)
    convert(src, root / "k", to="kafka", verify=True, compression="snappy")
    convert(root / "k", root / "back", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    with segstore.open(src, "rocketmq") as a, segstore.open(root / "back", "rocketmq") as b:
        assert [a.to_json(m) for m in a.scan()] == [b.to_json(m) for m in b.scan()]
        end = a.commitlog.end
    for source_file in sorted((src / "commitlog").iterdir()):
        base = int(source_file.name)
        if base < end:
            valid = min(end - base, ROCKETMQ_CONFIG["mappedFileSizeCommitLog"])
            ours = (root / "back" / "commitlog" / source_file.name).read_bytes()
            assert ours[:valid] == source_file.read_bytes()[:valid]


@st.composite
def kafka_batches(draw: st.DrawFn) -> list[dict]:
    batches = []
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 5)) == 0:
            batches.append({"control": draw(st.sampled_from(["COMMIT", "ABORT"])), "gap": 0})
            continue
        headers = st.lists(st.tuples(st.text(max_size=5), binaries), max_size=2)
        records = draw(st.lists(st.tuples(binaries, binaries, headers), min_size=1, max_size=6))
        batches.append({"records": records, "gap": draw(st.sampled_from([0, 0, 3])),
                        "transactional": draw(st.booleans()), "log_append": draw(st.booleans()),
                        "compression": draw(st.sampled_from(["none", "gzip", "lz4", "zstd"]))})
    return batches


def write_kafka(path: Path, topic: str, partition: int, batches: list[dict]) -> None:
    with segstore.open(path, "kafka", "a") as store:
        part = store.partition_of(topic, partition, create=True)
        ts = 1_700_000_000_000
        for spec in batches:
            ts += 10
            if "control" in spec:
                data = kafka_codec.encode_control_batch(spec["control"], base_offset=part.next_offset,
                                                        producer_id=77, producer_epoch=1, coordinator_epoch=5,
                                                        timestamp=ts)
            else:
                n = len(spec["records"])
                deltas = [i * (1 + spec["gap"]) for i in range(n)]
                log_append = spec["log_append"]
                data = kafka_codec.encode_batch(
                    [(k, v, ts + i, h) for i, (k, v, h) in enumerate(spec["records"])],
                    base_offset=part.next_offset, compression=spec["compression"],
                    producer_id=77 if spec["transactional"] else -1,
                    producer_epoch=1 if spec["transactional"] else -1, is_transactional=spec["transactional"],
                    timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                    log_append_time=ts + 100 if log_append else None, offset_deltas=deltas)
            part.append_encoded(data, now_ms=ts)


@given(kafka_batches(), kafka_batches())
@settings(max_examples=12, deadline=None)
def test_generated_kafka_log_dir_round_trips(tmp_path_factory: pytest.TempPathFactory, first: list[dict],
                                             second: list[dict]) -> None:
    root = tmp_path_factory.mktemp("kafka")
    src = root / "src"
    write_kafka(src, "orders.v1", 0, first)
    write_kafka(src, "t", 2, second)
    convert(src, root / "r", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    convert(root / "r", root / "back", to="kafka", verify=True)
    with segstore.open(src, "kafka") as a, segstore.open(root / "back", "kafka") as b:
        assert [kafka_entry_of(r) for r in a.scan()] == [kafka_entry_of(r) for r in b.scan()]
        assert b.verify() == []


def test_headers_too_large_for_rocketmq_properties_are_named() -> None:
    entry = KafkaEntry("big", 3, 42, 1, b"k", b"v", headers=[("h", bytes(30_000))])
    with pytest.raises(ConversionError, match="big-3 offset 42"):
        kafka_to_rocketmq(entry, store_host=STORE_HOST)


def test_an_older_copys_empty_property_is_written_back_and_read_as_the_broker(tmp_path: Path) -> None:
    """A Kafka copy made before segstore read properties as the broker does may hold an ``rmq.p.*`` header
    with an empty value: the way back writes the message's bytes as they were, and --verify compares what
    a reader sees (RocketMQ 4.9.7 MessageDecoder.string2messageProperties drops the empty pair)."""
    msg = RocketMQMessage(topic="T", queue_id=0, body=b"b", properties={"e": "", "x": "1"},
                          born_timestamp=5, store_timestamp=6, born_host=STORE_HOST, store_host=STORE_HOST)
    entry = rocketmq_to_kafka(msg)
    assert ("rmq.p.e", b"") in entry.headers
    with segstore.open(tmp_path / "k", "kafka", "a") as kafka:
        kafka.append(Message(entry.topic, entry.value, entry.key, entry.partition, headers=entry.headers,
                             timestamp=entry.timestamp))
    convert(tmp_path / "k", tmp_path / "back", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    with segstore.open(tmp_path / "back", "rocketmq") as store:
        assert [m.properties for m in store.scan()] == [{"x": "1"}]
    assert b"e\x01\x02x\x011" in (tmp_path / "back" / "commitlog" / "00000000000000000000").read_bytes()


def test_an_older_copys_empty_key_reads_as_a_null_key(tmp_path: Path) -> None:
    """A copy made before ``kafka.empty_key`` holds an empty key as ``kafka.key`` with an empty value, a pair
    RocketMQ 4.9.7 MessageDecoder.string2messageProperties drops: it reads back with a null key."""
    with segstore.open(tmp_path / "old", "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_stored([RocketMQMessage("t", 0, b"v", {"kafka.offset": "0", P_KEY: ""},
                                             store_timestamp=1, born_timestamp=1)])
    convert(tmp_path / "old", tmp_path / "back", to="kafka", verify=True)
    with segstore.open(tmp_path / "back", "kafka") as back:
        assert [(r.key, r.value) for r in back.scan()] == [(None, b"v")]


@pytest.mark.parametrize(("header", "said"), [
    (("rmq.p.a\x01b", b"v"), "separators 0x01/0x02"),
    (("rmq.p.UNIQ_KEY", b"k\x02"), "separators 0x01/0x02"),
    (("rmq.p.big", bytes(40_000)), "at most 32767 bytes"),
    (("rmq.p.UNIQ_KEY", b"\xff\x02"), "separators 0x01/0x02"),     # bytes that are not UTF-8 alike
    (("rmq.p.big", b"\xff" * 40_000), "at most 32767 bytes"),
])
def test_an_rmq_property_rocketmq_cannot_carry_names_its_record(header: tuple[str, bytes], said: str) -> None:
    """A Kafka copy of a RocketMQ message edited to hold a property the format cannot carry (4.9.7
    MessageDecoder.messageProperties2String does not escape 0x01/0x02; CommitLog.MessageExtEncoder.encode
    refuses properties past Short.MAX_VALUE): the way back said "expected property names and values
    without the separators" with no record named; the error names the partition and offset, as a native
    record's does."""
    msg = RocketMQMessage(topic="T", queue_id=1, body=b"b", properties={"x": "1"},
                          born_timestamp=5, store_timestamp=6, born_host=STORE_HOST, store_host=STORE_HOST)
    entry = rocketmq_to_kafka(msg)
    entry = KafkaEntry(entry.topic, entry.partition, 7, entry.timestamp, entry.key, entry.value,
                       headers=[*entry.headers, header])
    with pytest.raises(ConversionError, match=f"T-1 offset 7, found expected .*{said}"):
        kafka_to_rocketmq(entry, store_host=STORE_HOST)


def test_an_ipv6_store_host_sets_the_host_bits_the_broker_sets(tmp_path: Path) -> None:
    """A Kafka record converted into a store whose ``storeHost`` is IPv6 gets that host as born and store
    host, so its sysFlag has 0x10 and 0x20, as RocketMQ 4.9.7 CommitLog.asyncPutMessage sets them
    (``setBornHostV6Flag``/``setStoreHostAddressV6Flag`` for an ``Inet6Address``): the message mapped
    from the record said 0, and ``--verify`` then failed every record of a correct conversion."""
    host = Host.parse("[2001:db8::1]:10911")
    assert kafka_to_rocketmq(KafkaEntry("t", 0, 0, 1, b"k", b"v"), store_host=host).sys_flag == 0x30
    control = KafkaEntry("t", 0, 1, 1, b"k", b"v", transactional=True, control=True, producer_id=7,
                         producer_epoch=0)
    assert kafka_to_rocketmq(control, store_host=host).sys_flag == 0x3C
    src = tmp_path / "src"
    write_kafka(src, "t", 0, [{"records": [(b"k", b"v", []), (None, b"w", [])], "gap": 0,
                               "transactional": True, "log_append": False, "compression": "none"},
                              {"control": "COMMIT", "gap": 0}])
    convert(src, tmp_path / "r", to="rocketmq", verify=True,
            config={**ROCKETMQ_CONFIG, "storeHost": "[2001:db8::1]:10911"})
    with segstore.open(tmp_path / "r", "rocketmq") as store:
        assert [(m.sys_flag, str(m.born_host)) for m in store.scan()] == \
            [(0x30, "[2001:db8:0:0:0:0:0:1]:10911")] * 2 + [(0x3C, "[2001:db8:0:0:0:0:0:1]:10911")]
    convert(tmp_path / "r", tmp_path / "back", to="kafka", verify=True)
    with segstore.open(src, "kafka") as a, segstore.open(tmp_path / "back", "kafka") as b:
        assert [kafka_entry_of(r) for r in a.scan()] == [kafka_entry_of(r) for r in b.scan()]


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize(("name", "value"), [
    ("rmq.flag", b"99999999999"), ("rmq.sys_flag", b"-2147483649"), ("rmq.reconsume_times", b"4294967296"),
    ("rmq.prepared_transaction_offset", b"9223372036854775808"),
    ("rmq.born_timestamp", b"99999999999999999999"), ("rmq.store_timestamp", b"-9223372036854775809"),
    ("rmq.queue_offset", b"9223372036854775808"), ("rmq.flag", b"x"),
    ("rmq.magic", b"7"), ("rmq.magic", b"1"), ("rmq.trailing_separator", b"0"),
    ("rmq.trailing_separator", b"yes"),
])
def test_a_hand_edited_rmq_header_is_a_conversion_error_naming_record_and_header(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool, name: str, value: bytes) -> None:
    """A Kafka copy of a RocketMQ message whose ``rmq.*`` header was edited to a value the message
    cannot hold (RocketMQ 4.9.7 ``CommitLog.MessageExtEncoder.encode`` writes flag, sysFlag and
    reconsumeTimes as ``int``, the offsets and timestamps as ``long``; ``MessageDecoder`` knows the
    magic codes of v1 and v2 only, which ``to_entry`` writes as no header and ``2``; the trailing
    separator header is ``1`` or absent).  Before, an out-of-range integer stopped the run with an
    ``InvalidMessageError`` naming no record ("expected FLAG in [...]"), and another ``rmq.magic`` or
    ``rmq.trailing_separator`` was read as v1 / no separator, silently."""
    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    records = _kafka_copy(tmp_path, [{"topic": "q", "queue_id": 0, "body": b"x"},
                                     {"topic": "q", "queue_id": 0, "body": b"y", "flag": 3}])
    edited = tmp_path / "edited"
    with segstore.open(edited, format="kafka", mode="a") as store:
        for record in records:
            headers = [(n, v) for n, v in record.headers if n != name or record.offset == 0]
            if record.offset == 1:
                headers.insert(1, (name, value))
            store.append_batch([Message("q", record.value, partition=0, timestamp=record.timestamp,
                                        headers=headers)])
    said = rf"q-0 at offset 1, .*expected {name} .*found b'{value.decode()}'"
    with pytest.raises(ConversionError, match=said):
        convert(str(edited), str(tmp_path / "back"), to="rocketmq", config=ROCKETMQ_CONFIG)
    assert not (tmp_path / "back").exists() and not (tmp_path / ".back.converting").exists()


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize(("name", "value"), [
    ("kafka.offset", "99999999999999999999"), ("kafka.offset", "-5"), ("kafka.txn", "1,99999"),
    ("kafka.producer", "99999999999999999999,1"), ("kafka.producer", "1"), ("kafka.timestamp_type", "Foo"),
    ("kafka.control", "2"), ("kafka.null_value", "yes"), ("kafka.empty_key", "0"),
    ("kafka.headers", '{"a": "b"}'), ("kafka.headers", '[["h", "dg==", 3]]'),
])
def test_a_hand_edited_kafka_property_is_a_conversion_error_naming_record_and_property(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool, name: str, value: str) -> None:
    """A RocketMQ copy of a Kafka record whose ``kafka.*`` property was edited to a value the record
    cannot hold (Kafka 3.8.0 ``DefaultRecordBatch``: offsets and the producer id are ``long``s from 0 /
    -1, the producer epoch a ``short``; ``TimestampType`` is CreateTime or LogAppendTime; ``from_entry``
    writes the flags as ``1`` or not at all).  Before, the columnar path stopped with an untyped
    ``OverflowError`` / ``ArrowInvalid`` (a traceback), the entry path with an ``InvalidMessageError``
    naming no record, a negative offset with an ``OffsetOutOfRangeError`` naming the destination, and
    another flag value was read as absent, silently."""
    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    src = tmp_path / "k"
    with segstore.open(src, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, partition=0, timestamp=1000 + i) for i in range(2)])
    convert(str(src), str(tmp_path / "r"), to="rocketmq", config=ROCKETMQ_CONFIG)
    with segstore.open(tmp_path / "r", "rocketmq") as store:
        messages = list(store.scan())
    edited = tmp_path / "edited"
    with segstore.open(edited, format="rocketmq", mode="a", **ROCKETMQ_CONFIG) as store:
        for msg in messages:
            properties = dict(msg.properties)
            if msg.queue_offset == 1:
                properties[name] = value
            store.append_batch([{"topic": "t", "queue_id": 0, "body": msg.body, "properties": properties,
                                 "born_timestamp": msg.born_timestamp}])
    said = rf"t/0 queue offset 1 \(physical offset \d+\), .*{name}"
    with pytest.raises(ConversionError, match=said):
        convert(str(edited), str(tmp_path / "back"), to="kafka")
    assert not (tmp_path / "back").exists() and not (tmp_path / ".back.converting").exists()


@pytest.mark.parametrize("columnar", [True, False])
@pytest.mark.parametrize("value", [b"2147483647", b"-1", b"x"])
def test_a_hand_edited_rmq_queue_id_is_a_conversion_error_naming_record_and_header(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columnar: bool, value: bytes) -> None:
    """The ``rmq.queue_id`` of a prepared message (in ``rmq.nonqueued``) out of a queue id's range
    (segstore's ``MAX_QUEUE_ID``: the topic's queue count, id + 1, is a Java ``int`` in 4.9.7
    ``TopicConfig``) stopped the way back with an ``InvalidMessageError`` naming no record."""
    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    records = _kafka_copy(tmp_path, [{"topic": "q", "queue_id": 0, "body": b"x"},
                                     {"topic": "q", "queue_id": 1, "body": b"p", "sys_flag": 4}])
    edited = tmp_path / "edited"
    with segstore.open(edited, format="kafka", mode="a") as store:
        for record in records:
            headers = [(n, value if n == "rmq.queue_id" else v) for n, v in record.headers]
            store.append_batch([Message(record.topic, record.value, partition=record.partition,
                                        timestamp=record.timestamp, headers=headers)])
    said = rf"rmq\.nonqueued-0 at offset 0, .*expected rmq\.queue_id .*found b'{value.decode()}'"
    with pytest.raises(ConversionError, match=said):
        convert(str(edited), str(tmp_path / "back"), to="rocketmq", config=ROCKETMQ_CONFIG)


@pytest.mark.parametrize("repeated", [("rmq.flag", b"6"), ("rmq.p.x", b"2"),
                                      ("rmq.born_host", b"10.0.0.2:1")])
def test_a_repeated_rmq_header_is_a_conversion_error(repeated: tuple[str, bytes]) -> None:
    """``to_entry`` writes each ``rmq.*`` header once (each property once: a RocketMQ message's properties
    are a map, 4.9.7 ``MessageDecoder.string2messageProperties``); a Kafka copy edited to hold one twice
    came back with the last one, the other dropped silently (``--verify`` passed)."""
    msg = RocketMQMessage(topic="T", queue_id=1, body=b"b", properties={"x": "1"}, flag=5,
                          born_timestamp=5, store_timestamp=6, born_host=STORE_HOST, store_host=STORE_HOST)
    entry = rocketmq_to_kafka(msg)
    entry.headers = [*entry.headers, repeated]
    with pytest.raises(ConversionError, match=rf"T-1 at offset \d+, .*expected one {repeated[0]} header"):
        restore_rocketmq(entry)


@pytest.mark.parametrize("value", [b"a\xed\xa0\x80b", b"a\xffb", b"\xc3", b"ok\x01\xed\xa0"])
def test_an_rmq_property_value_not_utf8_comes_back_byte_for_byte(tmp_path: Path, value: bytes) -> None:
    """An ``rmq.p.*`` header value that is not UTF-8 (an older copy's ``ED A0 80``, written from a lone
    surrogate with Python's surrogatepass; any other bytes) is stored as those bytes, as RocketMQ 4.9.7
    ``CommitLog.MessageExtBatchEncoder`` stores a batch's properties as sent, read as the broker reads
    them (``CommitLog.checkMessageAndReturnSize``: ``new String(bytes, UTF_8)``, a U+FFFD for each
    malformed sequence), and the way back gives the stored bytes.  Before: the way back gave Java's
    text, ``EF BF BD`` (no Java String encodes to ``ED A0 80``: its encoder writes '?'), and --verify
    failed on it; ``FF`` was refused as a malformed header."""
    msg = RocketMQMessage(topic="T", queue_id=0, body=b"b", properties={"x": "1"},
                          born_timestamp=5, store_timestamp=6, born_host=STORE_HOST, store_host=STORE_HOST)
    entry = rocketmq_to_kafka(msg)
    headers = [*entry.headers, ("rmq.p.y", value), ("rmq.p.z", b"2")]
    with segstore.open(tmp_path / "k", "kafka", "a") as kafka:
        kafka.append(Message(entry.topic, entry.value, entry.key, entry.partition, headers=headers,
                             timestamp=entry.timestamp))
    convert(tmp_path / "k", tmp_path / "r", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    assert b"x\x011\x02y\x01" + value + b"\x02z\x012" in \
        (tmp_path / "r" / "commitlog" / "00000000000000000000").read_bytes()
    with segstore.open(tmp_path / "r", "rocketmq") as store:
        got = list(store.scan())
    assert got[0].properties["y"] == value.decode("utf-8", "segstore.java_replace")
    convert(tmp_path / "r", tmp_path / "back", to="kafka", verify=True)
    with segstore.open(tmp_path / "k", "kafka") as source, segstore.open(tmp_path / "back", "kafka") as back:
        assert [r.headers for r in back.scan()] == [r.headers for r in source.scan()]


def test_a_property_value_that_is_not_utf8_crosses_kafka_and_back_byte_for_byte(tmp_path: Path) -> None:
    """A RocketMQ store whose property values are not UTF-8 (here TAGS and a KEYS token, among plain
    messages) goes to Kafka with each value's stored bytes as its ``rmq.p.*`` header (a row the columnar
    source met as ``columnar.java_row`` is mapped message by message) and comes back byte for byte.
    Before: the headers held Java's text (``EF BF BD``), and so did the copy back."""
    with segstore.open(tmp_path / "r", "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        for i in range(40):
            store.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"b%d" % i,
                                 "tags": "tAAx" if i % 5 == 2 else "plain", "keys": [f"kAAk{i}", "z"]}])
    for path in (tmp_path / "r" / "commitlog").iterdir():
        path.write_bytes(path.read_bytes().replace(b"tAAx", b"t\xff\xedx").replace(b"kAAk", b"k\xed\xa0\x80"))
    convert(tmp_path / "r", tmp_path / "k", to="kafka", verify=True)
    with segstore.open(tmp_path / "k", "kafka") as kafka:
        tags = [dict(r.headers)["rmq.p.TAGS"] for r in kafka.scan()]
    assert tags.count(b"t\xff\xedx") == 8 and b"t\xef\xbf\xbd\xef\xbf\xbdx" not in tags
    convert(tmp_path / "k", tmp_path / "back", to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    files = sorted(p.name for p in (tmp_path / "r" / "commitlog").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "back" / "commitlog").iterdir())
    for name in files:
        assert (tmp_path / "back" / "commitlog" / name).read_bytes() == \
            (tmp_path / "r" / "commitlog" / name).read_bytes()
