"""A Kafka store's own records written into RocketMQ in columns (``arrowwrite.native_fields``,
``assign``, ``encode``): the properties the C pass makes equal ``conversion.from_entry``'s in the
store's HashMap order, and the writer's files equal the entry-by-entry writer's byte for byte,
errors included, on generated records with hostile keys, header names and sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import arrowwrite
from segstore_rocketmq.conversion import RocketMQWriter, entries_to_batch
from test_convert_columnar import PLACED, VERSIONS, both_ways_back, rocketmq_tree

import segstore
from segstore.convert.interchange import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, Entry, Options, Peer
from segstore.convert.mapping import _side
from segstore.errors import SegstoreError
from segstore.records import CREATE_TIME, LOG_APPEND_TIME

pytestmark = pytest.mark.skipif(not arrowwrite.available(),
                                reason="the columnar write needs the C accelerator")

CONFIG = {"maxHashSlotNum": 64, "maxIndexNum": 256, "mappedFileSizeCommitLog": 4096, "maxMessageSize": 3000,
          "mappedFileSizeConsumeQueue": 200}   # 10 entries a file: rolls too, and little disk
PEER = Peer("kafka", _side("kafka").topics)

#: Keys: plain ones (KEYS), an empty one (kafka.empty_key=1), and ones KEYS cannot carry (base64 in
#: kafka.key): a separator or whitespace, not UTF-8, a surrogate, a property separator.
keys = st.one_of(st.none(), st.sampled_from([b"", b"a b", b"t\tx", b"\xff\xfe", b"\xed\xa0\x80", b"x\x01y",
                                             b"\x0bv", "caf\u00e9".encode(), b"k" * 40]),
                 st.binary(max_size=12), st.text(max_size=8).map(lambda t: t.encode("utf-8")))
#: Header names json.dumps escapes (quotes, backslashes, control characters) or keeps (non-ASCII).
header_names = st.one_of(st.text(max_size=6), st.sampled_from(['"', "\\", "\x00\x1f\x7f", "\b\f\n\r\t",
                                                               "\u2028\u00e9\U0001f600", ""]))
headers = st.lists(st.tuples(header_names, st.one_of(st.none(), st.binary(max_size=10))), max_size=3)
topics = st.sampled_from(["orders.v1", "t", "a-b_c", "UPPER_case", "dots.and-dash"])


@st.composite
def entries(draw: st.DrawFn, max_size: int = 40) -> list[Entry]:
    out = []
    offsets: dict[tuple[str, int], int] = {}
    for _ in range(draw(st.integers(1, max_size))):
        topic, partition = draw(topics), draw(st.integers(0, 3))
        offset = offsets[(topic, partition)] = offsets.get((topic, partition), -1) + draw(st.integers(1, 3))
        txn = draw(st.booleans())
        producer = draw(st.sampled_from([(NO_PRODUCER_ID, NO_PRODUCER_EPOCH), (77, 1), (-1, 3),
                                         (1 << 62, -2)]))
        if txn and producer == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
            producer = (77, 1)
        out.append(Entry(
            topic=topic, partition=partition, offset=offset,
            timestamp=draw(st.integers(-(1 << 40), 1 << 42)), key=draw(keys),
            value=draw(st.one_of(st.none(), st.binary(max_size=60))), headers=draw(headers),
            timestamp_type=draw(st.sampled_from([CREATE_TIME, LOG_APPEND_TIME])), transactional=txn,
            control=draw(st.integers(0, 7)) == 0, producer_id=producer[0], producer_epoch=producer[1]))
    return out


def _store(path: Path, version: str, **config):
    return segstore.open(path, "rocketmq", "a", rocketmqVersion=version, **{**CONFIG, **config})


def _write(path: Path, version: str, batch, columns: bool, rows: int, before: int = 0,
           **config) -> str | None:
    """``batch`` written into a new store at ``path`` (after ``before`` plain messages) by the arrow
    writer (``columns``) or the entry writer, ``rows`` a write; the typed error's class, or None."""
    with _store(path, version, **config) as store:
        store.append_batch([{"topic": "t", "queue_id": i % 2, "body": b"b" * i, "keys": [f"k{i}"],
                             "born_timestamp": i, "store_timestamp": i} for i in range(before)])
        options = Options(peer=PEER, batch_records=rows)
        try:
            # present=0: the messages there are not this conversion's (a resume would skip as many)
            if columns:
                writer = arrowwrite.RocketMQArrowWriter(store, options)
                writer.present = 0
                writer.add_batch(batch)
            else:
                writer = RocketMQWriter(store, options, present=0)
                for entry, size in arrowwrite.batch_entries(batch):
                    writer.add(entry, size)
            writer.flush_all()
        except SegstoreError as err:
            return type(err).__name__
    return None


@given(entries(), st.sampled_from(VERSIONS))
@settings(max_examples=60, deadline=None)
def test_native_properties_equal_from_entry_in_the_stores_order(tmp_path_factory: pytest.TempPathFactory,
                                                                records: list[Entry], version: str) -> None:
    """The C pass (``_speedups.native_properties``) gives each row the bytes the entry path stores:
    ``from_entry``'s properties in Java HashMap order with the version's trailing 0x02."""
    batch = entries_to_batch(records, [1] * len(records))
    with _store(tmp_path_factory.mktemp("props") / "s", version) as store:
        fields = arrowwrite.native_fields(batch, PEER, store)
        assert fields is not None
        assert fields.properties.to_pylist() == arrowwrite.native_properties_reference(batch, PEER, store)
        assert fields.body.to_pylist() == [r.value or b"" for r in records]


@given(entries(), st.sampled_from(VERSIONS), st.sampled_from([1000, 7, 1]), st.sampled_from([0, 5, 30]))
@settings(max_examples=40, deadline=None)
def test_native_records_are_written_as_the_entry_path(tmp_path_factory: pytest.TempPathFactory,
                                                      records: list[Entry], version: str, rows: int,
                                                      before: int) -> None:
    """Commitlog (BLANKs at 4 KiB file ends), consume queues (continuing a store's queues), index
    and topic configs as the entry-by-entry writer writes them; control records as rolled-back
    messages without a queue entry."""
    root = tmp_path_factory.mktemp("native")
    batch = entries_to_batch(records, [1] * len(records))
    placed: list[int] = []
    real = arrowwrite.encode

    def counted(store, msgs, start):
        out = real(store, msgs, start)
        placed.append(0 if out is None else len(msgs.queue_id))
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrowwrite, "encode", counted)
        assert _write(root / "c", version, batch, True, rows, before) is None
    assert _write(root / "e", version, batch, False, rows, before) is None
    assert rocketmq_tree(root / "c") == rocketmq_tree(root / "e")
    assert sum(placed) == len(records)          # every row went through the columns


def _write_halves(path: Path, version: str, batch, rows: int, before: int, indexed: bool,
                  prepare: bool) -> object:
    """``batch`` written as :func:`_write` writes it in columns, in two halves: the first as it is
    (validating its topics), the second through ``prepare`` first (``prepare``), as a conversion's
    reading thread prepares it (``segstore.convert.pipeline._convert_columns``), or as it is; what
    ``prepare`` gave."""
    config = {} if indexed else {"messageIndexEnable": False}
    with _store(path, version, **config) as store:
        store.append_batch([{"topic": "t", "queue_id": i % 2, "body": b"b" * i, "keys": [f"k{i}"],
                             "born_timestamp": i, "store_timestamp": i} for i in range(before)])
        writer = arrowwrite.RocketMQArrowWriter(store, Options(peer=PEER, batch_records=rows))
        writer.present = 0
        half = batch.num_rows // 2
        writer.add_batch(batch.slice(0, half))
        made = writer.prepare([batch.slice(half)], None) if prepare else None
        writer.add_batch(batch.slice(half), made)
        writer.flush_all()
    return made


@given(entries(), st.sampled_from(VERSIONS), st.sampled_from([1000, 7, 1]), st.sampled_from([0, 5, 30]),
       st.booleans())
@settings(max_examples=40, deadline=None)
def test_native_records_prepared_on_the_reading_thread_are_written_as_the_entry_path(
        tmp_path_factory: pytest.TempPathFactory, records: list[Entry], version: str, rows: int, before: int,
        indexed: bool) -> None:
    """A batch whose topics the writer has validated is parsed and laid out by ``prepare`` (on a
    conversion's reading thread: ``lay_out``, offsets 0), the writer only placing it (``placed``:
    the offsets written in, BLANKs at 4 KiB file ends, queues continued): the files are the ones
    the writer makes of the batch itself (``native_fields``, ``assign``, ``encode``: the entry
    path's, above) byte for byte, with and without an index.  (Against the writer given the same
    halves: the checkpoint's times follow the writes, a write whose last message's time is not
    positive keeping the one before, as 4.9.7 ``CommitLog.FlushRealTimeService`` keeps it.)"""
    root = tmp_path_factory.mktemp("prepared")
    batch = entries_to_batch(records, [1] * len(records))
    made = _write_halves(root / "p", version, batch, rows, before, indexed, True)
    _write_halves(root / "w", version, batch, rows, before, indexed, False)
    assert rocketmq_tree(root / "p") == rocketmq_tree(root / "w")
    half = len(records) // 2
    if {r.topic for r in records[half:]} <= {r.topic for r in records[:half]}:
        assert isinstance(made, arrowwrite.PreparedNative)  # the writer's work was done by prepare


@pytest.mark.parametrize("extra", [-2, -1, 0, 1])
@pytest.mark.parametrize("version", VERSIONS)
def test_properties_at_the_length_limit_go_as_the_entry_path(tmp_path: Path, extra: int,
                                                              version: str) -> None:
    """Properties around 32767 bytes: written, or refused with the same error, as the entry path."""
    def props_length(value: bytes) -> int:
        entry = Entry(topic="t", partition=0, offset=0, timestamp=1, key=None, value=b"v",
                      headers=[("h", value)])
        return len(arrowwrite.native_properties_reference(entries_to_batch([entry], [1]), PEER, store)[0])

    with _store(tmp_path / "probe", version) as store:
        base = props_length(b"")
    # base64 of 3k bytes is 4k bytes: a value of the length that brings the properties to 32767 + extra
    need = 32767 + extra - base
    value = b"x" * (need // 4 * 3)
    entry = Entry(topic="t", partition=0, offset=0, timestamp=1, key=None, value=b"v",
                  headers=[("h" + "h" * (need % 4), value)])
    batch = entries_to_batch([entry, entry], [1, 1])
    config = {"maxMessageSize": 40000, "mappedFileSizeCommitLog": 1 << 20}
    columns = _write(tmp_path / "c", version, batch, True, 10, **config)
    entries_error = _write(tmp_path / "e", version, batch, False, 10, **config)
    assert columns == entries_error
    assert rocketmq_tree(tmp_path / "c") == rocketmq_tree(tmp_path / "e")


def test_a_record_too_large_is_refused_as_by_the_entry_path(tmp_path: Path) -> None:
    records = [Entry(topic="t", partition=0, offset=i, timestamp=i, key=b"k", value=b"v" * size)
               for i, size in enumerate([10, 20, 5000, 30])]
    batch = entries_to_batch(records, [1] * len(records))
    assert _write(tmp_path / "c", "4.9.7", batch, True, 2) == "MessageTooLargeError"
    assert _write(tmp_path / "e", "4.9.7", batch, False, 2) == "MessageTooLargeError"
    assert rocketmq_tree(tmp_path / "c") == rocketmq_tree(tmp_path / "e")


def test_an_ipv6_store_host_goes_the_entry_path(tmp_path: Path) -> None:
    records = [Entry(topic="t", partition=0, offset=i, timestamp=i, key=b"k%d" % i, value=b"v",
                     headers=[("a", b"1")]) for i in range(5)]
    batch = entries_to_batch(records, [1] * len(records))
    with _store(tmp_path / "v6", "4.9.7", storeHost="[::1]:10911") as store:
        assert arrowwrite.native_fields(batch, PEER, store) is None
    for columns in (True, False):
        assert _write(tmp_path / str(columns), "4.9.7", batch, columns, 3, storeHost="[::1]:10911") is None
    assert rocketmq_tree(tmp_path / "True") == rocketmq_tree(tmp_path / "False")


def test_headers_are_json_with_base64_values(tmp_path: Path) -> None:
    """The one property a reader parses: ``kafka.headers`` as JSON of [name, base64 value or null]."""
    records = [Entry(topic="t", partition=0, offset=3, timestamp=1, key=b"a b", value=None,
                     headers=[('q"\\\n\x01', b"\x00\xff"), ("\u00e9", None)])]
    with _store(tmp_path / "s", "4.9.7") as store:
        fields = arrowwrite.native_fields(entries_to_batch(records, [1]), PEER, store)
    assert fields is not None
    encoded = fields.properties.to_pylist()[0].rstrip(b"\x02")
    pairs = dict(item.split(b"\x01", 1) for item in encoded.split(b"\x02"))
    assert json.loads(pairs[b"kafka.headers"]) == [['q"\\\n\x01', "AP8="], ["\u00e9", None]]
    assert pairs[b"kafka.key"] == b"YSBi"          # "a b": a space, which KEYS cannot carry
    assert pairs[b"kafka.null_value"] == b"1" and pairs[b"kafka.offset"] == b"3"


def test_an_empty_key_is_a_flag(tmp_path: Path) -> None:
    """An empty key as ``kafka.empty_key=1`` in the C pass as in ``from_entry``: as ``kafka.key`` it would be
    an empty value, which RocketMQ 4.9.7 MessageDecoder.string2messageProperties drops (a null key)."""
    records = [Entry(topic="t", partition=0, offset=3, timestamp=1, key=b"", value=b"v"),
               Entry(topic="t", partition=0, offset=4, timestamp=1, key=None, value=b"w")]
    batch = entries_to_batch(records, [1, 1])
    with _store(tmp_path / "s", "4.9.7") as store:
        fields = arrowwrite.native_fields(batch, PEER, store)
        assert fields is not None
        assert fields.properties.to_pylist() == arrowwrite.native_properties_reference(batch, PEER, store)
    first, second = (dict(item.split(b"\x01", 1) for item in p.rstrip(b"\x02").split(b"\x02"))
                     for p in fields.properties.to_pylist())
    assert first[b"kafka.empty_key"] == b"1" and b"kafka.key" not in first and b"KEYS" not in first
    assert b"kafka.empty_key" not in second and b"kafka.key" not in second


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("length", [127, 128, 249])
def test_long_topics_go_as_the_entry_path(tmp_path: Path, version: str, length: int) -> None:
    """A Kafka topic of up to 249 characters: written as v1 where it fits a one-byte topic
    length, else left to the entry path (v2 on 5.x brokers, refused before): the same files or
    the same error."""
    records = [Entry(topic="t" * length, partition=1, offset=i, timestamp=i, key=b"k", value=b"v")
               for i in range(3)]
    batch = entries_to_batch(records, [1] * len(records))
    results = [_write(tmp_path / str(columns), version, batch, columns, 2, maxMessageSize=8000,
                      mappedFileSizeCommitLog=1 << 16) for columns in (True, False)]
    assert results[0] == results[1]
    assert rocketmq_tree(tmp_path / "True") == rocketmq_tree(tmp_path / "False")


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_every_kafka_fixture_goes_into_rocketmq_in_columns(tmp_path: Path, name: str) -> None:
    """The broker-written Kafka 3.8 fixtures (every codec, transactions and their markers,
    LogAppendTime) into RocketMQ: the columnar path writes every record, byte for byte as the
    entry path."""
    source = FIXTURES / "kafka" / name
    source = next((p for p in (source / "logdir", source / "store") if p.is_dir()), source)
    PLACED.clear()
    columns, entries = both_ways_back(source, tmp_path, config=CONFIG)
    assert columns == entries and any(k.startswith("commitlog") for k in columns)
    assert sum(PLACED) > 0
