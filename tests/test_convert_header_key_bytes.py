"""Kafka record header keys that are not UTF-8, through ``segstore convert`` both ways and ``--verify``,
and ``scan_arrow`` -> ``append_arrow``.

Kafka 3.8 keeps a header key as the bytes the producer sent: ``DefaultRecord.readHeaders`` reads a
varint length and that many bytes into ``new RecordHeader(ByteBuffer key, ...)``, and only
``RecordHeader.key()`` makes text of them (``Utils.utf8``, ``new String(bytes, UTF_8)``: a U+FFFD for
each malformed sequence), so two keys of other bytes can read as one text.  The partition here holds
two records whose header keys ``h FF k`` and ``h FE k`` both read as ``h\\ufffdk``, beside a UTF-8 key
and one whose bytes ARE ``h EF BF BD k`` (U+FFFD as UTF-8, a key like any other).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest
from conftest import cli_run
from segstore_kafka import batch as codec

from segstore.convert.interchange import Entry
from segstore.javatext import java_text

#: header key placeholders (same length) and the bytes put in their place, per record
KEYS = [(b"ZZQ", b"h\xffk"), (b"YYQ", b"h\xfek")]
TEXT_KEY = "h\ufffdk"


def _partition(tmp_path: Path) -> Path:
    """A log dir whose partition ``t-0`` holds one batch of three records: header keys ``h FF k``,
    ``h FE k`` and ``h EF BF BD k`` (U+FFFD written as UTF-8), each beside a key ``ok``."""
    records = [(None, b"v0", 1_700_000_000_000, [("ZZQ", b"a"), ("ok", b"x")]),
               (None, b"v1", 1_700_000_000_001, [("YYQ", b"b"), ("ok", None)]),
               (None, b"v2", 1_700_000_000_002, [(TEXT_KEY, b"c")])]
    data = bytearray(codec.encode_batch(records, base_offset=0))
    for placeholder, raw in KEYS:
        at = data.index(placeholder)
        data[at:at + len(raw)] = raw
    struct.pack_into(">i", data, 12, 0)     # partitionLeaderEpoch (a leader's first epoch; not in the CRC)
    struct.pack_into(">I", data, codec.CRC_OFFSET, crc32c.crc32c(bytes(data[codec.ATTRIBUTES_OFFSET:])))
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    return tmp_path / "logs"


def _log(logs: Path) -> bytes:
    return (logs / "t-0" / "00000000000000000000.log").read_bytes()


def _headers_properties(store: Path) -> list[list]:
    code, out, err = cli_run("dump", store, "--json")
    assert code == 0, err
    return [json.loads(json.loads(line)["properties"]["kafka.headers"]) for line in out.splitlines()]


@pytest.mark.parametrize("columnar", [True, False])
def test_kafka_to_rocketmq_to_kafka_keeps_header_keys_that_are_not_utf8(tmp_path, monkeypatch, columnar):
    """The RocketMQ copy's ``kafka.headers`` item of such a key is ``[name, value base64, name bytes
    base64]``, the name Java's text of the bytes (what a Kafka consumer's ``RecordHeader.key()`` gives),
    so Kafka -> RocketMQ -> Kafka gives the log byte for byte.  Before, the item held the text only (the
    bytes were lost: ``--verify`` said "every record matches") and the way back wrote ``h EF BF BD k``
    for both keys."""
    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "COLUMNAR", columnar)
    logs = _partition(tmp_path)
    rmq, back = tmp_path / "rmq", tmp_path / "back"
    code, out, err = cli_run("convert", logs, rmq, "--to", "rocketmq", "--verify")
    assert code == 0 and "3 messages" in out and "verified" in out, (out, err)
    assert _headers_properties(rmq) == [[[TEXT_KEY, "YQ==", "aP9r"], ["ok", "eA=="]],
                                        [[TEXT_KEY, "Yg==", "aP5r"], ["ok", None]],
                                        [[TEXT_KEY, "Yw=="]]]
    code, out, err = cli_run("convert", rmq, back, "--to", "kafka", "--verify")
    assert code == 0 and "3 messages" in out and "verified" in out, (out, err)
    assert _log(back) == _log(logs)


@pytest.mark.parametrize(("item", "found"), [
    ('["h\\ufffdk","YQ==","aGs="]', "found the UTF-8 of 'hk'"),      # UTF-8 bytes of another text
    ('["h\\ufffdk","YQ==","aO+/vWs="]', "found the UTF-8 of 'h\ufffdk'"),  # UTF-8 bytes of the name
    ('["hk","YQ==","aP9r"]', "read as 'hk', found java_text(b'h\\xffk')"),  # bytes of another name
    ('["h\\ufffdk","YQ==","a%"]', "Only base64 data"),                # not base64
    ('["h\\ufffdk","YQ==",7]', "7]"),                     # not a string
])
def test_a_headers_item_whose_name_bytes_contradict_it_is_refused(tmp_path, item, found):
    """A third item that is not the base64 of bytes that are not UTF-8 and that Java reads as the item's
    name (an edited property) is refused naming the message and the property (exit 1), as any
    ``kafka.headers`` of another shape is, rather than writing bytes the name does not say."""
    logs = _partition(tmp_path)
    rmq, back, edited = tmp_path / "rmq", tmp_path / "back", tmp_path / "edited.jsonl"
    assert cli_run("convert", logs, rmq, "--to", "rocketmq")[0] == 0
    code, out, err = cli_run("dump", rmq, "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    lines[0]["properties"]["kafka.headers"] = f"[{item}]"
    edited.write_text("".join(json.dumps(line) + "\n" for line in lines))
    copy = tmp_path / "copy"
    assert cli_run("write", copy, "--input", edited)[0] == 0
    code, out, err = cli_run("convert", copy, back, "--to", "kafka")
    assert code == 1, (out, err)
    assert "kafka.headers" in err and "queue offset 0" in err and found in err, err


def test_verify_compares_header_keys_by_their_bytes(tmp_path, monkeypatch):
    """``convert --verify`` compares the records written with the source's, a header key by its bytes:
    a destination holding ``h FF k`` where the source says ``h FE k`` is a problem (exit 1), though Java
    reads both as ``h\\ufffdk``.  Before, entries compared keys as text and such a copy "verified".
    Shown with a Kafka writer that writes the keys' text (``EF BF BD``) instead of their bytes."""
    from segstore_kafka import conversion

    logs = _partition(tmp_path)
    rmq, back = tmp_path / "rmq", tmp_path / "back"
    assert cli_run("convert", logs, rmq, "--to", "rocketmq")[0] == 0
    encode = codec.encode_batch
    monkeypatch.setattr(conversion.codec, "encode_batch",
                        lambda *args, **kwargs: encode(*args, **{**kwargs, "stored_keys": False}))
    code, out, err = cli_run("convert", rmq, back, "--to", "kafka", "--verify")
    assert code == 1 and "verified" not in out, (out, err)
    assert "java_text(b'h\\xffk')" in out + err, (out, err)


def test_entries_with_header_keys_of_other_bytes_are_not_equal():
    """Two entries whose header keys read alike but hold other stored bytes differ; a key's text and a
    JavaText of the same bytes decoded alike are equal (what every verifier compares)."""
    def entry(key: str) -> Entry:
        return Entry(topic="t", partition=0, offset=0, timestamp=1, key=None, value=b"v",
                     headers=[(key, b"a"), ("ok", None)])

    assert entry(java_text(b"h\xffk")) != entry(java_text(b"h\xfek"))
    assert entry(java_text(b"h\xffk")) != entry(TEXT_KEY)
    assert entry(java_text(b"h\xffk")) == entry(java_text(b"h\xffk"))
    assert entry(java_text(TEXT_KEY.encode())) == entry(TEXT_KEY)


def test_verify_compares_restored_properties_by_their_bytes(tmp_path, monkeypatch):
    """Kafka -> RocketMQ of a RocketMQ store's copy restores each message byte for byte, and ``--verify``
    compares a restored message's properties by their stored bytes: a value stored as ``ED A0 80`` (a
    surrogate's three bytes, which RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` reads as one
    U+FFFD) written back as ``EF BF BD`` (the same text, the same length, so every message still lands
    where it was) is a problem (exit 1).  Before, the properties were compared as text and such a copy
    "verified".  Shown with a RocketMQ writer that writes the properties' text instead of their bytes."""
    from segstore_rocketmq import conversion

    import segstore

    config = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 600}
    args = [arg for name, value in config.items() for arg in ("--config", f"{name}={value}")]
    store, kafka, back = tmp_path / "store", tmp_path / "kafka", tmp_path / "back"
    with segstore.open(store, format="rocketmq", mode="a", **config) as rmq:
        for i in range(3):
            rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"b%d" % i, "properties": {"p": "vSSS"}}])
    (log,) = (store / "commitlog").iterdir()
    log.write_bytes(log.read_bytes().replace(b"vSSS", b"v\xed\xa0\x80"))
    assert cli_run("convert", store, kafka, "--to", "kafka")[0] == 0
    append = conversion._append_stored

    def as_text(dest, messages):    # the properties' Java text (EF BF BD), not their stored bytes
        for msg in messages:
            msg.properties = dict(msg.properties)
        append(dest, messages)

    monkeypatch.setattr(conversion, "_append_stored", as_text)
    code, out, err = cli_run("convert", kafka, back, "--to", "rocketmq", "--verify", *args)
    assert code == 1 and "verified" not in out, (out, err)
    assert "b'p\\x01v\\xed\\xa0\\x80'" in out + err and "\\xef\\xbf\\xbd" not in out + err, (out, err)


@pytest.mark.parametrize("accelerated", [True, False])
def test_scan_arrow_then_append_arrow_keeps_header_keys_that_are_not_utf8(tmp_path, monkeypatch, accelerated):
    """``scan_arrow`` gives a record's stored header keys where one is not UTF-8 as ``headerKeysBytes``
    (``headers`` holds Java's text of them, ``RecordHeader.key()``), null elsewhere, and ``append_arrow``
    writes those bytes back: the copy's log is the source's byte for byte (docs/kafka.md promises it for a
    log from offset 0 without gaps).  Before, the columns held the text only and the copy wrote
    ``h EF BF BD k`` for both keys."""
    from segstore_kafka import arrowencode
    from segstore_kafka import columnar as kafka_columnar

    import segstore

    if not accelerated:
        monkeypatch.setattr(kafka_columnar, "_speedups", None)
        monkeypatch.setattr(arrowencode, "_speedups", None)
    logs, copy = _partition(tmp_path), tmp_path / "copy"
    with segstore.open(logs, format="kafka") as src:
        batches = list(src.scan_arrow())
        assert [k for b in src.scan_arrow(["headerKeysBytes"]) for k in b.column(0).to_pylist()] == [
            [b"h\xffk", None], [b"h\xfek", None], None]
    with segstore.open(copy, format="kafka", mode="a") as dst:
        for batch in batches:
            dst.append_arrow(batch)
    assert _log(copy) == _log(logs)


@pytest.mark.parametrize(("raws", "found"), [
    ([b"h\xffk"], "of 2 items, one a header, found 1 in row 0"),
    ([b"x\xffk", None], "read as header key 'h\ufffdk', found java_text(b'x\\xffk') in row 0"),
    ([b"hk", None], "not UTF-8 and read as header key 'h\ufffdk', found 'hk' in row 0"),
])
def test_append_arrow_refuses_header_key_bytes_that_are_not_its_keys(tmp_path, raws, found):
    """A row whose ``headerKeysBytes`` do not match its headers (another count, bytes that are UTF-8 or
    that Java reads as another key: an edited row) is refused naming the row; nothing is written."""
    import segstore
    from segstore.errors import InvalidMessageError

    logs, copy = _partition(tmp_path), tmp_path / "copy"
    with segstore.open(logs, format="kafka") as src:
        (batch,) = src.scan_arrow()
    column = batch.column("headerKeysBytes").to_pylist()
    column[0] = raws
    edited = batch.set_column(batch.schema.get_field_index("headerKeysBytes"), "headerKeysBytes",
                              pa.array(column, pa.list_(pa.binary())))
    with segstore.open(copy, format="kafka", mode="a") as dst:
        with pytest.raises(InvalidMessageError) as caught:
            dst.append_arrow(edited)
        assert found in caught.value.message
        assert list(dst.scan()) == []
