"""Store-level reads of RocketMQ messages whose properties are not UTF-8, as the broker reads them.

RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` (recovery and dispatch) and
``MessageDecoder.decodeMessage`` (what a consumer is served) read the properties with ``new
String(bytes, MessageDecoder.CHARSET_UTF8)``: each malformed sequence becomes one U+FFFD, never an
error, and ``MessageDecoder.string2messageProperties`` splits that text.  The consume-queue tags
code is ``MessageExtBrokerInner.tagsString2tagsCode``, the Java string's ``hashCode()``; an IndexFile
entry hashes ``IndexService.buildKey`` (``topic + "#" + key``) with ``IndexFile.indexKeyHashMethod``
(``abs(hashCode())``).  segstore's C walk stops at such a message (its UTF-8 check), so ``dump STORE``,
``dump --json``, ``query``, ``verify``, ``recover`` and the library's reads stopped there, as at
damage (exit 1); each builds that message's row as Java reads it now and goes on after it.

The store: messages whose TAGS, a KEYS token or a property name hold bytes that are not UTF-8 (the
same length as the text they replace, so every length still checks out; no CRC covers properties),
some of them one after another, over several commitlog files; its consume queues and IndexFiles
rebuilt by ``recover``.  The expected text is ``segstore.javatext.java_utf8`` of the stored bytes; the
expected hashes are computed here, over UTF-16 units, as ``String.hashCode`` does.
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import cli_run
from segstore_rocketmq import columnar
from segstore_rocketmq.message import decode_properties
from segstore_rocketmq.store import JSON_KEYS

import segstore
from segstore.javatext import java_utf8

CONFIG = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 600, "maxHashSlotNum": 16,
          "maxIndexNum": 64}
#: text written, then the bytes (as long) put in its place in the commitlog files
PATCHES = [(b"tAAx", b"t\xff\xedx"),      # FF: one U+FFFD; ED before "x": one more
           (b"kAAk1", b"k\xe2\x82k1"),    # E2 82 cut short: one U+FFFD (a maximal subpart)
           (b"pAAp", b"p\xc3(p"),        # C3 before "(": one U+FFFD
           (b"sBBBs", b"s\xed\xa0\x80s")]  # a surrogate's three bytes: one U+FFFD (not "\ud800")
MESSAGES = 150
#: the config on the command line (a store does not record it)
ARGS = [arg for name, value in CONFIG.items() for arg in ("--config", f"{name}={value}")]
CQ_ENTRY = struct.Struct(">qiq")
INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INDEX_ENTRY = 40, 4, struct.Struct(">iqii")


def tags_of(i: int) -> str:
    return "tAAx" if i % 7 == 3 else "sBBBs" if i % 13 == 6 else "plain"


def java_hash(text: str) -> int:
    """``String.hashCode()``: over the UTF-16 code units, as a signed 32-bit int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The store, its queues and index rebuilt by ``recover`` (kept pristine: tests copy it)."""
    store = tmp_path_factory.mktemp("java_text") / "store"
    with segstore.open(store, format="rocketmq", mode="a", **CONFIG) as rmq:
        for i in range(MESSAGES):
            props = {"pAAp": "v"} if i % 11 == 5 else {}
            rmq.append_batch([{"topic": "TU"[i % 3 == 0], "queue_id": i % 2, "body": b"body%d" % i,
                               "keys": [f"kAAk{i}", f"z{i}"], "tags": tags_of(i),
                               "properties": props}])
    files = sorted((store / "commitlog").iterdir())
    assert len(files) >= 3
    for path in files:
        data = path.read_bytes()
        for text, raw in PATCHES:
            data = data.replace(text, raw)
        path.write_bytes(data)
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    code, out, err = cli_run("recover", store, *ARGS)
    assert code == 0, (out, err)
    return store


@pytest.fixture
def store(built, tmp_path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "store"))


def expected_messages() -> list[dict]:
    """Each message as Java reads it: topic, queue, tags, keys and properties (in stored order)."""
    out = []
    for i in range(MESSAGES):
        def java(text: str) -> str:
            raw = text.encode()
            for t, r in PATCHES:
                raw = raw.replace(t, r)
            return java_utf8(raw)
        keys = [java(f"kAAk{i}"), f"z{i}"]
        tags = java(tags_of(i))
        props = {java("pAAp"): "v"} if i % 11 == 5 else {}
        out.append({"topic": "TU"[i % 3 == 0], "queue_id": i % 2, "tags": tags, "keys": keys,
                    "properties": {**props, "KEYS": " ".join(keys), "TAGS": tags}})
    return out


def test_the_store_holds_what_the_test_means():
    expected = expected_messages()
    assert expected[3]["tags"] == "t\ufffd\ufffdx" and expected[1]["keys"][0] == "k\ufffdk1"
    assert expected[5]["properties"]["p\ufffd(p"] == "v" and expected[6]["tags"] == "s\ufffds"
    assert sum("\ufffd" in json.dumps(m, ensure_ascii=False) for m in expected) > 30


def test_scan_and_scan_arrow_read_the_properties_as_java_does(store, monkeypatch):
    """Every message is read (the C walk stopped at the first such message: CorruptDataError), its
    properties as Java's text; ``scan_arrow`` on one thread and on several (ranges cut inside files),
    through a queue and through queue ranges, gives what the message-by-message reference gives."""
    monkeypatch.setattr(columnar, "SPLIT_BYTES", 1500)
    expected = expected_messages()
    with segstore.open(store) as rmq:
        msgs = list(rmq.scan())
        assert [{"topic": m.topic, "queue_id": m.queue_id, "tags": m.tags, "keys": m.keys,
                 "properties": m.properties} for m in msgs] == expected
        tables = [pa.Table.from_batches(list(rmq.scan_arrow(threads=threads))) for threads in (1, 3)]
        assert tables[0].equals(tables[1])
        table = tables[0]
        assert table.column("tags").to_pylist() == [m["tags"] for m in expected]
        assert table.column("keys").to_pylist() == [m["keys"] for m in expected]
        properties = [dict(p) for p in table.column("properties").to_pylist()]
        assert properties == [m["properties"] for m in expected]
        assert table.column("size").to_pylist() == [m.size for m in msgs]
        assert table.column("position").to_pylist() == [m.physical_offset for m in msgs]
        queue = pa.Table.from_batches(list(rmq.scan_arrow(topic="T", partition=1)))
        assert queue.column("tags").to_pylist() == [m["tags"] for m in expected
                                                    if (m["topic"], m["queue_id"]) == ("T", 1)]
        ranges = pa.Table.from_batches(list(rmq.scan_arrow(queues=[("T", 1, 0, 100), ("U", 0, 0, 100)])))
        assert ranges.column("keys").to_pylist() == [m["keys"] for m in expected
                                                     if (m["topic"], m["queue_id"]) in (("T", 1), ("U", 0))]
        assert [m.tags for m in rmq.read("T", 1)] == queue.column("tags").to_pylist()
        monkeypatch.setattr(columnar, "_speedups", None)   # the pure-Python walk and column builders
        assert pa.Table.from_batches(list(rmq.scan_arrow(threads=1))).equals(table)


def test_dump_prints_every_message_as_the_reference_does(store, monkeypatch):
    """``dump STORE`` and ``dump STORE --json`` (the C writers, one thread and several) print what the
    message-by-message reference prints (``Store.dump``, ``to_json``); they stopped at the first such
    message (exit 1, ``found properties that are not UTF-8``) and printed none after it."""
    monkeypatch.setattr(columnar, "SPLIT_BYTES", 1500)
    with segstore.open(store) as rmq:
        text = "".join(line.text + "\n" for line in rmq.dump())
        lines = [json.loads(line) for line in b"".join(
            bytes(block) for block in rmq.dump_json(threads=1)).decode().splitlines()]
        reference = [json.loads(json.dumps(rmq.to_json(m))) for m in rmq.scan()]
    assert lines == reference and len(lines) == MESSAGES
    assert [{k: m[k] for k in ("tags", "keys", "properties")} for m in lines] == [
        {k: m[k] for k in ("tags", "keys", "properties")} for m in expected_messages()]
    for threads in ("1", "3"):
        code, out, err = cli_run("dump", store, "--threads", threads)
        assert code == 0 and out == text, err
        code, out, err = cli_run("dump", store, "--json", "--threads", threads)
        assert code == 0 and [json.loads(line) for line in out.splitlines()] == reference, err
    assert "tags=t\ufffd\ufffdx" in text and "keys=k\ufffdk1,z1" in text


def test_recover_puts_java_string_hashes_in_the_consume_queue_and_index(built):
    """``recover`` rebuilt the consume queues and IndexFiles (deleted): each entry's tags code is
    ``tagsString2tagsCode`` of TAGS as Java reads it, each index entry ``abs(hashCode())`` of
    ``topic#key`` over those strings; then ``verify`` (one thread and several) finds nothing wrong.
    recover stopped at such a message (exit 1), leaving the queues without it and those after it."""
    with segstore.open(built) as rmq:
        msgs = list(rmq.scan())
    expected = expected_messages()
    codes = {}
    for path in (built / "consumequeue").glob("*/*/*"):
        data = path.read_bytes()
        for at in range(0, len(data), CQ_ENTRY.size):
            phy, size, code = CQ_ENTRY.unpack_from(data, at)
            if size:
                codes[phy] = code
    assert codes == {m.physical_offset: java_hash(e["tags"]) for m, e in zip(msgs, expected, strict=True)}
    assert codes[msgs[3].physical_offset] == java_hash("t\ufffd\ufffdx") != java_hash("t\ufffdx")
    assert codes[msgs[6].physical_offset] == java_hash("s\ufffds") != java_hash("s\ud800s")
    entries = []
    for path in (built / "index").iterdir():
        data = path.read_bytes()
        first = INDEX_HEADER_SIZE + CONFIG["maxHashSlotNum"] * INDEX_SLOT_SIZE
        assert len(data) == first + CONFIG["maxIndexNum"] * INDEX_ENTRY.size
        count = struct.unpack_from(">i", data, 36)[0]    # indexCount (entry 0 is never used)
        for k in range(1, count):
            key_hash, phy, _, _ = INDEX_ENTRY.unpack_from(data, first + k * INDEX_ENTRY.size)
            entries.append((key_hash, phy))
    want = []
    for m, e in zip(msgs, expected, strict=True):
        uniq = [m.properties["UNIQ_KEY"]] if "UNIQ_KEY" in m.properties else []
        want.extend((abs(java_hash(f"{e['topic']}#{key}")), m.physical_offset) for key in [*uniq, *e["keys"]])
    assert sorted(entries) == sorted(want)
    for threads in ("1", "3"):
        code, out, err = cli_run("verify", built, "--threads", threads, *ARGS)
        assert code == 0, (out, err)


def test_query_finds_such_a_message_by_key_offset_and_time(store):
    """``query --key`` finds a message by its KEYS token as Java reads it (the IndexFile holds that
    string's hash; the commitlog read of the candidate refused it); ``--offset`` reads through it;
    ``--timestamp`` looks up times across it."""
    code, out, err = cli_run("query", store, "--topic", "T", "--key", "k\ufffdk1", "--json", *ARGS)
    assert code == 0, err
    hits = [json.loads(line) for line in out.splitlines()]
    assert [h["keys"][1] for h in hits] == ["z1"] and hits[0]["properties"]["KEYS"] == "k\ufffdk1 z1"
    code, out, err = cli_run("query", store, "--topic", "T", "--queue", "1", "--offset", "0",
                             "--count", "100", "--json")
    assert code == 0, err
    got = [json.loads(line)["tags"] for line in out.splitlines()]
    assert got == [m["tags"] for m in expected_messages() if (m["topic"], m["queue_id"]) == ("T", 1)]
    with segstore.open(store) as rmq:
        last = [m for m in rmq.scan() if (m.topic, m.queue_id) == ("T", 1)][-1]
    code, out, err = cli_run("query", store, "--topic", "T", "--queue", "1", "--timestamp",
                             last.store_timestamp)
    assert code == 0 and out.strip(), err


def _files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted((store / "commitlog").iterdir())}


@pytest.mark.parametrize("columnar_write", [True, False])
def test_dump_json_then_write_input_copies_the_store_byte_for_byte(store, tmp_path, monkeypatch,
                                                                   columnar_write):
    """``dump STORE --json | write --input`` into an empty store of the same geometry gives the same
    commitlog bytes: a message whose properties are not UTF-8 gets ``properties_base64``, their stored
    bytes (its ``properties`` are Java's text, RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize``'s
    ``new String(bytes, UTF_8)``, whose U+FFFD would be stored as EF BF BD), and ``write --input``
    writes them back as those bytes.  Before, the dump had no such field (only ``dump FILE --json``
    had it) and the copy held ``t\\xef\\xbf\\xbd\\xef\\xbf\\xbdx`` where the source held ``t\\xff\\xedx``.
    A message whose properties are UTF-8 has no such key (the C writer's lines, one thread and several,
    are the reference's)."""
    from segstore_rocketmq import jsonl

    monkeypatch.setattr(jsonl, "COLUMNAR", columnar_write)
    code, out, err = cli_run("dump", store, "--json", "--threads", "3")
    assert code == 0, err
    assert cli_run("dump", store, "--json", "--threads", "1")[1] == out
    lines = [json.loads(line) for line in out.splitlines()]
    odd = [line for line in lines if "properties_base64" in line]
    assert len(odd) == sum("\ufffd" in json.dumps(m, ensure_ascii=False) for m in expected_messages())
    for line in lines:
        if "properties_base64" in line:
            raw = base64.b64decode(line["properties_base64"])
            assert list(decode_properties(raw, java_text=True).items()) == list(line["properties"].items())
            assert b"\xef\xbf\xbd" not in raw and any(bad in raw for _, bad in PATCHES)
        else:
            assert list(line) == list(JSON_KEYS)
    source = tmp_path / "dump.jsonl"
    source.write_text(out, encoding="utf-8")
    copy = tmp_path / "copy"
    code, _, err = cli_run("write", copy, "--format", "rocketmq", "--input", source, *ARGS)
    assert code == 0, err
    assert _files(copy) == _files(store)
    code, again, err = cli_run("dump", copy, "--json")
    assert code == 0 and again == out, err


@pytest.mark.parametrize(("change", "found"), [
    (lambda raw: base64.b64encode(raw.replace(b"\xff", b"\xfe")).decode(), None),     # still Java's text
    (lambda raw: base64.b64encode(raw.replace(b"\xff\xed", b"AB")).decode(), "read as its properties"),
    (lambda raw: base64.b64encode(java_utf8(raw).encode()).decode(), "not UTF-8"),     # Java's text
    (lambda raw: "not base64!", "as base64"),
])
def test_write_input_refuses_a_properties_base64_that_is_not_its_properties(store, tmp_path, change, found):
    """``properties_base64`` must read as the line's ``properties`` as the broker reads them (as Kafka's
    ``keyBase64`` must read as its key): bytes that read as other properties, or UTF-8 bytes, are refused
    (exit 1), nothing written; other bytes that Java reads as the same text are written as given."""
    code, out, _ = cli_run("dump", store, "--json", "--topic", "T")
    line = next(json.loads(t) for t in out.splitlines() if "t\ufffd\ufffdx" in t)
    line["properties_base64"] = change(base64.b64decode(line["properties_base64"]))
    source = tmp_path / "line.jsonl"
    source.write_text(json.dumps(line) + "\n", encoding="utf-8")
    copy = tmp_path / "copy"
    code, _, err = cli_run("write", copy, "--format", "rocketmq", "--input", source, *ARGS)
    if found is None:
        assert code == 0, err
        with segstore.open(copy) as rmq:
            [msg] = list(rmq.scan())
        assert msg.tags == "t\ufffd\ufffdx"
        assert b"t\xfe\xedx" in _files(copy)["commitlog/00000000000000000000"]
    else:
        assert code == 1 and found in err and "properties_base64" in err, err
        assert not (copy / "commitlog").exists() or not any(_files(copy).values())


def _kafka_files(kafka: Path) -> dict[str, bytes]:
    return {str(p.relative_to(kafka)): p.read_bytes() for p in sorted(kafka.rglob("*.log"))}


@pytest.mark.parametrize("run", ["columns", "small batches", "entries"])
def test_a_kafka_copy_keeps_property_names_that_are_not_utf8_and_both_round_trips_are_byte_exact(
        store, tmp_path, monkeypatch, run):
    """convert --to kafka writes a property name that is not UTF-8 into its header key as stored,
    ``rmq.p.`` + the name's bytes (a Kafka header key on disk is a varint length and bytes, Kafka 3.8
    ``DefaultRecord.readHeaders``; RocketMQ 4.9.7 ``CommitLog.MessageExtBatchEncoder`` stores a batch's
    properties as the client sent them), so RocketMQ -> Kafka -> RocketMQ gives the commitlog byte for
    byte, and Kafka -> RocketMQ -> Kafka the Kafka logs.  Before, the key held Java's text of the name
    (``rmq.p.p\ufffd(p``, EF BF BD) and the way back stopped with a ConversionError (exit 1): the
    message came back with other bytes, so the next one went elsewhere.  The columnar run hands the run
    to the entry path at such a key (its columns hold keys as text), which skips what the columns
    wrote (small batches: some were, and count as written, not as present)."""
    from segstore_rocketmq import conversion

    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "COLUMNAR", run != "entries")
    if run == "small batches":
        monkeypatch.setattr(conversion, "SOURCE_BATCH_ROWS", 4)
        monkeypatch.setattr(pipeline, "MIN_READ_ROWS", 4)
        monkeypatch.setattr(pipeline, "MERGE_READ_ROWS", 4)
    kafka, back, again = tmp_path / "kafka", tmp_path / "back", tmp_path / "again"
    code, out, err = cli_run("convert", store, kafka, "--to", "kafka")
    assert code == 0 and f"{MESSAGES} messages" in out and "already" not in out, (out, err)
    logs = b"".join(_kafka_files(kafka).values())
    assert b"rmq.p.p\xc3(p" in logs and "rmq.p.p\ufffd(p".encode() not in logs
    code, out, err = cli_run("dump", kafka, "--json")
    assert code == 0, err
    odd = [h for line in out.splitlines() for h in json.loads(line)["headers"] if "keyBase64" in h]
    assert odd and {h["key"] for h in odd} == {"rmq.p.p\ufffd(p"}
    assert {base64.b64decode(h["keyBase64"]) for h in odd} == {b"rmq.p.p\xc3(p"}
    code, out, err = cli_run("convert", kafka, back, "--to", "rocketmq", "--verify", *ARGS)
    assert code == 0 and f"{MESSAGES} messages" in out and "already" not in out, (out, err)
    assert _files(back) == _files(store)
    code, _, err = cli_run("convert", back, again, "--to", "kafka", "--verify")
    assert code == 0, err
    assert _kafka_files(again) == _kafka_files(kafka)


@pytest.mark.parametrize("accelerated", [True, False])
def test_scan_arrow_then_append_arrow_copies_the_store_byte_for_byte(store, tmp_path, monkeypatch,
                                                                     accelerated):
    """``scan_arrow`` gives a message's stored properties bytes where they are not UTF-8 as
    ``propertiesBytes`` (its ``properties`` and ``headers`` are Java's text of them, RocketMQ 4.9.7
    ``CommitLog.checkMessageAndReturnSize``'s ``new String(bytes, UTF_8)``), null elsewhere, and
    ``append_arrow`` writes those bytes back: the copy's commitlog is the source's byte for byte and
    scans equal.  Before, the columns held the text only and the copy stored ``EF BF BD`` for each
    U+FFFD: other message sizes, so every later message at another physical offset."""
    if not accelerated:
        monkeypatch.setattr(columnar, "_speedups", None)
    copy = tmp_path / "copy"
    with segstore.open(store, format="rocketmq", **CONFIG) as src:
        batches = list(src.scan_arrow())
        source = pa.Table.from_batches(batches)
    stored = [raw for raw in source.column("propertiesBytes").to_pylist() if raw is not None]
    assert len(stored) == sum("\ufffd" in json.dumps(m, ensure_ascii=False) for m in expected_messages())
    assert all(b"\xef\xbf\xbd" not in raw for raw in stored)
    with segstore.open(copy, format="rocketmq", mode="a", **CONFIG) as dst:
        for batch in batches:
            dst.append_arrow(batch)
    assert _files(copy) == _files(store)
    with segstore.open(copy, format="rocketmq", **CONFIG) as again:
        assert pa.Table.from_batches(list(again.scan_arrow())).equals(source)


@pytest.mark.parametrize(("change", "found"), [
    (lambda raw: raw.replace(b"t\xff", b"u\xff"), "read as its properties"),   # another text
    (lambda raw: java_utf8(raw).encode(), "not UTF-8"),                         # its text's UTF-8
])
def test_append_arrow_refuses_properties_bytes_that_are_not_its_properties(store, tmp_path, change, found):
    """A row whose ``propertiesBytes`` do not read as its ``properties`` as the broker reads them, or are
    UTF-8 (an edited row that contradicts itself) is refused naming the row, and nothing is written.
    (Other bytes that Java reads as the same text are taken: they are that row's properties too.)"""
    with segstore.open(store, format="rocketmq", **CONFIG) as src:
        batch = next(b for b in src.scan_arrow() if b.column("propertiesBytes").null_count < b.num_rows
                     and b"\xff" in b.column("propertiesBytes")[0].as_py())
    raws = [None if raw is None else change(raw) for raw in batch.column("propertiesBytes").to_pylist()]
    edited = batch.set_column(batch.schema.get_field_index("propertiesBytes"), "propertiesBytes",
                              pa.array(raws, pa.binary()))
    copy = tmp_path / "copy"
    with segstore.open(copy, format="rocketmq", mode="a", **CONFIG) as dst:
        with pytest.raises(segstore.errors.InvalidMessageError, match=f"{found}.*in row 0"):
            dst.append_arrow(edited)
        assert list(dst.scan()) == []
