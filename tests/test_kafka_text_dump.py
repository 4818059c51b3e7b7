"""The Kafka text dump in C (issue 31): ``KafkaStore.dump_text`` writes the bytes of the pure-Python
reference, ``KafkaStore.dump`` (kafka-dump-log lines: ``batch_line`` per batch, ``record_line`` per
record from the log start on, ``endTxnMarker`` on a control batch's record).

Generated segments (every codec, null keys and values, headers, LogAppendTime, compacted offsets,
transactional and control batches, legacy v0/v1 entries) against the per-batch decode; the broker
fixtures and a log dir with rolled segments, an aborted transaction and a moved log start
through both isolation levels and ``--index``; the command line with and without the accelerator.
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, kafka_log_dir
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from segstore_kafka import batch as codec
from segstore_kafka import columnar, compression
from segstore_kafka.store import KafkaStore, _below, _json_chunk, _text_chunk, batch_line, record_line

from segstore import cli
from segstore.errors import SegstoreError

needs_c = pytest.mark.skipif(columnar._speedups is None, reason="segstore_kafka._speedups not built")

header_keys = st.one_of(st.text(max_size=6), st.sampled_from(["é", "\x00\"\\", "\U0001f600", "a, b", "]"]))
header = st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=4)))
records_strategy = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=30)),
              st.integers(0, 2**41), st.lists(header, max_size=3)),
    max_size=8)


def legacy_entry(magic: int, codec_id: int, count: int, first_offset: int) -> bytes:
    """A legacy v0/v1 message set as kafka-python writes it (a wrapper stamped with its last offset)."""
    builder = LegacyRecordBatchBuilder(magic, codec_id, 1 << 20)
    for i in range(count):
        builder.append(i if codec_id and magic == 1 else first_offset + i,
                       1_600_000_000_000 + i if magic else None, b"k%d" % i if i % 2 else None, b"v" * i)
    buf = bytearray(builder.build())
    if codec_id:
        struct.pack_into(">q", buf, 0, first_offset + count - 1)
    return bytes(buf)


@st.composite
def segment(draw) -> bytes:
    entries, offset = [], draw(st.sampled_from([0, 5, 2**40]))
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["v2", "v2", "v2", "control", "legacy"]))
        if kind == "legacy":
            count = draw(st.integers(1, 4))
            magic, codec_id = draw(st.sampled_from([0, 1])), draw(st.sampled_from([0, 1, 2]))
            entries.append(legacy_entry(magic, codec_id, count, offset))
            offset += count
        elif kind == "control":
            entries.append(codec.encode_control_batch(draw(st.sampled_from(["COMMIT", "ABORT"])),
                                                      base_offset=offset, producer_id=7, producer_epoch=1,
                                                      coordinator_epoch=3, timestamp=1_700_000_000_000))
            offset += 1
        else:
            records = draw(records_strategy)
            log_append = draw(st.booleans())
            deltas = [3 * i for i in range(len(records))] if draw(st.booleans()) else None
            entries.append(codec.encode_batch(
                records, base_offset=offset, compression=draw(st.sampled_from(compression.COMPRESSION_NAMES)),
                producer_id=draw(st.sampled_from([-1, 42])), producer_epoch=draw(st.sampled_from([-1, 2])),
                is_transactional=draw(st.booleans()),
                timestamp_type=codec.LOG_APPEND_TIME if log_append else codec.CREATE_TIME,
                log_append_time=1_650_000_000_000 if log_append else None, offset_deltas=deltas))
            offset += (deltas[-1] + 1) if deltas else max(len(records), 1)
    return b"".join(entries)


def reference(buf: bytes, start: int, stop: int | None = None) -> str:
    """KafkaStore.dump's loop over one segment's batches, from log start ``start`` (to ``stop``)."""
    out = []
    for batch in codec.iter_batches(memoryview(buf), path="seg.log"):
        if stop is not None and batch.base_offset >= stop:
            break
        if batch.last_offset < start:
            continue
        out.append(batch_line(batch) + "\n")
        out += [record_line(batch, rec, crc) + "\n" for rec, crc in batch.records_with_crcs()  # v0/v1: CRCs
                if rec.offset >= start and (stop is None or rec.offset < stop)]
    return "".join(out)


@needs_c
@settings(max_examples=100, deadline=None)
@given(segment(), st.integers(0, 40), st.sampled_from([None, columnar.Capacity(rows=3, batches=2)]))
def test_c_text_lines_equal_the_batch_by_batch_lines(buf, skip, capacity):
    first = next(codec.iter_batches(memoryview(buf), path="seg.log")).base_offset
    chunks = columnar.decode(buf, path="seg.log", capacity=capacity,
                             want=columnar.WANT_KEY | columnar.WANT_VALUE | columnar.WANT_HEADERS)
    got = b"".join(_text_chunk(chunk, first + skip, None, buf) for chunk in chunks)
    assert got.decode() == reference(buf, first + skip)


@settings(max_examples=100, deadline=None)
@given(segment(), st.integers(0, 12), st.integers(0, 40),
       st.sampled_from([None, columnar.Capacity(rows=3, batches=2)]), st.booleans())
def test_a_chunk_cut_at_a_window_end_dumps_as_the_reference_loop(buf, skip, length, capacity, accelerated):
    """``_below`` (a time window's end, ``dump --end``): the C text lines and the JSON lines (C, or
    the pure path's Arrow columns over the cut chunk's recounted buffers) of the cut chunks."""
    built = columnar._speedups
    try:
        if not accelerated:
            columnar._speedups = None
        cut_chunks_match_the_reference(buf, skip, length, capacity)
    finally:
        columnar._speedups = built


def cut_chunks_match_the_reference(buf: bytes, skip: int, length: int, capacity) -> None:
    first = next(codec.iter_batches(memoryview(buf), path="seg.log")).base_offset
    start, stop = first + skip, first + skip + length
    want = columnar.WANT_KEY | columnar.WANT_VALUE | columnar.WANT_HEADERS
    lines, json_rows = [], []
    for chunk in columnar.decode(buf, path="seg.log", capacity=capacity, want=want):
        chunk, cut = _below(chunk, stop)
        if columnar._speedups is not None:
            lines.append(_text_chunk(chunk, start, None, buf))
        json_rows += [json.loads(line) for line in _json_chunk("t", 0, 0, 0, chunk).splitlines()]
        if cut:
            break
    if columnar._speedups is not None:
        assert b"".join(lines).decode() == reference(buf, start, stop)
    expected = [(rec.offset, rec.timestamp) for batch in codec.iter_batches(memoryview(buf), path="seg.log")
                if batch.base_offset < stop for rec in batch.records() if rec.offset < stop]
    assert [(row["offset"], row["timestamp"]) for row in json_rows] == expected


def python_dump(path, **selection) -> bytes:
    with KafkaStore(str(path), "r") as store:
        return "".join(line.text + "\n" for line in store.dump(**selection)).encode()


def log_dir(tmp_path: Path) -> Path:
    """Two topics in small segments (rolls, index entries), headers, an aborted transaction, the log
    start of one partition moved into a batch."""
    return kafka_log_dir(tmp_path / "logs", 40, lambda j: [("h\u00e9\"", b"x"), ("z", None)],
                         after=lambda store: store.delete_records(31, topic="b", partition=1))


@needs_c
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("index", [False, True])
def test_dump_text_equals_the_record_by_record_dump(tmp_path, isolation, index):
    stores = [FIXTURES / "kafka" / name for name in KAFKA_FIXTURES] + [log_dir(tmp_path)]
    for path in stores:
        for topic, partition in ((None, None), ("b", 1)):
            selection = {"topic": topic, "partition": partition, "isolation": isolation, "index": index}
            expected = python_dump(path, **selection)
            with KafkaStore(str(path), "r") as store:
                got = b"".join(bytes(block) for block in store.dump_text(**selection))
            assert got == expected, (path, topic)
    assert b"endTxnMarker: ABORT" in python_dump(stores[-1], isolation="read_uncommitted", index=index)
    assert b"Log starting offset" in expected


@pytest.mark.parametrize("argv", [[], ["--index"], ["--isolation", "read_committed"]])
@pytest.mark.parametrize("accelerated", [True, False])
def test_cli_text_dump_prints_the_reference_lines(monkeypatch, argv, accelerated):
    if not accelerated:
        monkeypatch.setattr(columnar, "_speedups", None)
    path = FIXTURES / "kafka" / "txn"
    out = io.StringIO()
    assert cli.main(["dump", str(path), *argv], out) == 0
    isolation = argv[1] if "--isolation" in argv else "read_uncommitted"
    assert out.getvalue().encode() == python_dump(path, index="--index" in argv, isolation=isolation)


def _lines_then_error(lines) -> tuple[bytes, tuple]:
    out = []
    try:
        for line in lines:
            out.append(line)
    except SegstoreError as err:
        return b"".join(out), (type(err).__name__, err.path, err.pos, err.message)
    return b"".join(out), ()


@needs_c
@pytest.mark.parametrize("damage", ["v2 gzip stream cut", "v1 wrapper inner CRC"])
def test_a_batch_whose_records_do_not_decode_dumps_alike_in_c_and_python(tmp_path, damage):
    """``dump DIR`` (text) stops at a whole batch whose records do not decode, the batches before it
    printed: the C walk prints no line of it, and the record-by-record dump (``SEGSTORE_PURE_PYTHON``)
    printed its batch line first, then the same error."""
    import zlib

    import crc32c

    first = codec.encode_batch([(b"k", b"v", 1)], base_offset=0)
    if damage == "v2 gzip stream cut":
        bad = bytearray(codec.encode_batch([(b"k", b"v", 2), (b"k", b"w", 3)], base_offset=1,
                                           compression="gzip")[:-5])
        struct.pack_into(">i", bad, 8, len(bad) - codec.LOG_OVERHEAD)
        struct.pack_into(">I", bad, codec.CRC_OFFSET, crc32c.crc32c(bytes(bad[codec.ATTRIBUTES_OFFSET:])))
    else:
        body = struct.pack(">bbqi", 1, 0, 5, -1) + struct.pack(">i", 1) + b"v"
        inner = bytearray(struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body)
        inner[20] ^= 1
        value = compression.compress("gzip", bytes(inner))
        body = struct.pack(">bbqi", 1, 1, 5, -1) + struct.pack(">i", len(value)) + value
        bad = bytearray(struct.pack(">qiI", 1, len(body) + 4, zlib.crc32(body)) + body)
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(first + bytes(bad))
    with KafkaStore(str(tmp_path), "r") as store:
        fast = _lines_then_error(bytes(block) for block in store.dump_text())
        slow = _lines_then_error(line.text.encode() + b"\n" for line in store.dump())
    assert fast == slow and fast[1][2] is not None and f"position: {len(first)} ".encode() not in fast[0]


@needs_c
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_control_batch_whose_record_is_no_marker_dumps_alike_in_c_and_python(tmp_path, isolation):
    """A data batch whose attributes say control (its CRC holding): kafka-dump-log's
    ``ControlRecordType.parseTypeId`` cannot read its records' keys.  The record-by-record dump prints
    each as ``controlType: invalid (...)``; the C text dump stopped at the batch with
    ``a control record key of 4 bytes, found b'k0'`` and no path.  Alike now: the lines read_uncommitted,
    and read_committed (which asks the batch its marker type, ``CompletedFetch.containsAbortMarker``)
    the same error at the batch, named by its file, after the lines of the batches before it."""
    import crc32c

    first = codec.encode_batch([(b"k", b"v", 1)], base_offset=0)
    bad = bytearray(codec.encode_batch([(b"k0", b"v", 2), (b"k1", b"w", 3)], base_offset=1, producer_id=7,
                                       producer_epoch=0, base_sequence=0))
    struct.pack_into(">h", bad, codec.ATTRIBUTES_OFFSET, codec.TRANSACTIONAL_FLAG | codec.CONTROL_FLAG)
    struct.pack_into(">I", bad, codec.CRC_OFFSET, crc32c.crc32c(bytes(bad[codec.ATTRIBUTES_OFFSET:])))
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    log.write_bytes(first + bytes(bad) + codec.encode_batch([(b"z", b"y", 4)], base_offset=3))
    with KafkaStore(str(tmp_path), "r") as store:
        fast = _lines_then_error(bytes(block) for block in store.dump_text(isolation=isolation))
        slow = _lines_then_error(line.text.encode() + b"\n" for line in store.dump(isolation=isolation))
    assert fast == slow
    if isolation == "read_uncommitted":
        assert fast[1] == ()
        assert b"controlType: invalid (a control record key of 4 bytes, found b'k1')" in fast[0]
    else:
        assert fast[1][1:3] == (str(log), len(first)) and b"position: 0 " in fast[0]


def _header_key_store(tmp_path: Path, compression_name: str = "none") -> Path:
    """A partition whose one record has header keys ``a\\xffb`` and ``\\xed\\xa0\\x80`` (not UTF-8: a
    producer's own serializer, or a client in another language, writes any bytes there; Kafka 3.8's
    broker stores them, ``DefaultRecord.readHeaders`` keeps the bytes and ``LogValidator`` never
    decodes them as text) beside ``ok``."""
    import crc32c

    records = [(b"k", b"v", 1_700_000_000_000, [("ZZQ", b"hv"), ("YYY", None), ("ok", b"x")])]
    plain = bytearray(codec.encode_batch(records, base_offset=0))
    for placeholder, raw in ((b"ZZQ", b"a\xffb"), (b"YYY", b"\xed\xa0\x80")):
        at = plain.index(placeholder)
        plain[at:at + 3] = raw
    if compression_name != "none":     # the records region compressed, as a producer sends it
        region = bytes(plain[codec.RECORD_BATCH_OVERHEAD:])
        data = compression.compress(compression_name, region)
        plain = plain[:codec.RECORD_BATCH_OVERHEAD] + bytearray(data)
        attributes = struct.unpack_from(">h", plain, codec.ATTRIBUTES_OFFSET)[0]
        struct.pack_into(">h", plain, codec.ATTRIBUTES_OFFSET,
                         attributes | compression.COMPRESSION_NAMES.index(compression_name))
        struct.pack_into(">i", plain, 8, len(plain) - codec.LOG_OVERHEAD)
    struct.pack_into(">I", plain, codec.CRC_OFFSET, crc32c.crc32c(bytes(plain[codec.ATTRIBUTES_OFFSET:])))
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(bytes(plain))
    return tmp_path / "logs"


@pytest.mark.parametrize("compression_name", ["none", "gzip"])
@pytest.mark.parametrize("accelerated", [True, False])
def test_a_header_key_that_is_not_utf8_prints_as_kafka_dump_log_prints_it(monkeypatch, tmp_path,
                                                                           compression_name, accelerated):
    """kafka-dump-log (3.8 ``DumpLogSegments.dumpLog``) prints ``record.headers.map(_.key)``, and
    ``RecordHeader.key()`` is ``Utils.utf8``, ``new String(bytes, UTF_8)``: a U+FFFD for each malformed
    sequence (one for ``ED A0 80``, as Java reads it).  ``dump``, ``dump --json``, ``query`` and ``verify``
    stopped at the record with ``expected UTF-8 header keys, found invalid UTF-8`` (exit 1): the broker
    stores and serves such a record, so it is no damage.  ``--json`` gives the text and, as
    ``keyBase64``, the bytes stored."""
    if not accelerated:
        monkeypatch.setattr(columnar, "_speedups", None)
        monkeypatch.setattr(codec, "_decode_records", codec._decode_records_py)
    logs = _header_key_store(tmp_path, compression_name)
    out = io.StringIO()
    assert cli.main(["dump", str(logs)], out) == 0, out.getvalue()
    assert "headerKeys: [a\ufffdb,\ufffd,ok]" in out.getvalue()
    for argv in (["dump", str(logs), "--json"], ["dump", str(logs), "--json", "--threads", "2"],
                 ["query", str(logs), "--topic", "t", "--partition", "0", "--offset", "0", "--json"]):
        out = io.StringIO()
        assert cli.main(argv, out) == 0, argv
        (line,) = out.getvalue().splitlines()
        assert json.loads(line)["headers"] == [
            {"key": "a\ufffdb", "keyBase64": "Yf9i", "value": "aHY="},
            {"key": "\ufffd", "keyBase64": "7aCA", "value": None},
            {"key": "ok", "value": "eA=="}], argv
    out = io.StringIO()
    assert cli.main(["verify", str(logs)], out) == 0, out.getvalue()
    with KafkaStore(str(logs), "r") as store:
        (record,) = store.scan()
        assert [k for k, _ in record.headers] == ["a\ufffdb", "\ufffd", "ok"]
        assert [getattr(k, "raw", None) for k, _ in record.headers] == [b"a\xffb", b"\xed\xa0\x80", None]
        assert store.json_line(record) == out_line(logs)


def out_line(logs: Path) -> str:
    out = io.StringIO()
    assert cli.main(["dump", str(logs), "--json"], out) == 0
    return out.getvalue().rstrip("\n")


def test_a_dump_line_with_a_header_key_that_is_not_utf8_is_written_back_as_stored(tmp_path):
    """``write --input`` of the ``dump --json`` lines writes the batch again byte for byte: the header
    key's ``keyBase64`` bytes, not its text's UTF-8 (``EF BF BD`` for each U+FFFD); a ``keyBase64``
    that Java reads as another text than ``key`` (an edited line that contradicts itself) is refused."""
    logs = _header_key_store(tmp_path)
    dumped = tmp_path / "dump.jsonl"
    dumped.write_text(out_line(logs) + "\n")
    assert cli.main(["write", str(tmp_path / "copy"), "--format", "kafka", "--input", str(dumped)],
                    io.StringIO()) == 0
    log = "t-0/00000000000000000000.log"
    assert (tmp_path / "copy" / log).read_bytes() == (logs / log).read_bytes()
    dumped.write_text(out_line(logs).replace('"Yf9i"', '"Yf9j"') + "\n")
    assert cli.main(["write", str(tmp_path / "edited"), "--format", "kafka", "--input", str(dumped)],
                    io.StringIO()) == 1


def _outcome_of(run):
    """(bytes, error as (path, pos, message)) of a dump run to its end or its first error."""
    out = []
    try:
        for block in run():
            out.append(bytes(block) if not isinstance(block, str) else block.encode())
    except SegstoreError as err:
        return b"".join(out), (err.path, err.pos, err.message)
    return b"".join(out), None


def _both_dumps(path, **selection):
    with KafkaStore(str(path), "r") as store:
        reference = _outcome_of(lambda: (line.text + "\n" for line in store.dump(**selection)))
    with KafkaStore(str(path), "r") as store:
        text = _outcome_of(lambda: store.dump_text(**selection))
    return text, reference


def _legacy_message(offset: int, magic: int, attributes: int, value: bytes) -> bytes:
    import zlib

    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", 100) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


_EDGES = [-(2**63), -(2**63) + 1, -1, 0, 1, 2, 3, 2**63 - 2, 2**63 - 1]


@needs_c
@settings(max_examples=60, deadline=None)
@given(magic=st.sampled_from([0, 1]), codec_id=st.sampled_from([1, 2, 3]), wrapper=st.sampled_from(_EDGES),
       inner=st.lists(st.sampled_from(_EDGES), min_size=1, max_size=3), first=st.booleans())
def test_dump_text_of_legacy_wrappers_of_any_offsets_equals_the_record_by_record_dump(
        tmp_path_factory, magic, codec_id, wrapper, inner, first):
    """A legacy wrapper of any offsets (``Long.MIN_VALUE`` .. ``Long.MAX_VALUE``; inner offsets out of
    order, which Kafka 3.8 ``AbstractLegacyRecordBatch.DeepRecordsIterator`` shifts as they are and
    ``DumpLogSegments`` prints each of): the C text dump gives the reference's lines and error.  It left
    out the inner records after one of a lower offset (a wrapper of offset 1 over inner offsets
    ``3, -1, -1`` printed 1, 1 for 5, 1, 1), and failed on a wrapper ending below the log start
    (``Long.MIN_VALUE``) that the reference passes over."""
    part = tmp_path_factory.mktemp("legacy") / "t-0"
    part.mkdir()
    body = b"".join(_legacy_message(o, magic, 0, b"v%d" % i) for i, o in enumerate(inner))
    data = (_legacy_message(0, 1, 0, b"first") if first else b"") + _legacy_message(
        wrapper, magic, codec_id, compression.compress(codec_id, body))
    (part / "00000000000000000000.log").write_bytes(data)
    text, reference = _both_dumps(part)
    assert text == reference


@needs_c
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_dump_text_passes_over_an_undecodable_batch_below_the_log_start_as_the_reference(tmp_path, isolation):
    """A batch below the log start (``log-start-offset-checkpoint`` past it, as DeleteRecords leaves it)
    whose CRC holds but whose records do not decode: the record-by-record dump reads its header and
    passes over it (it dumps from the log start), as the JSON dump and reads do; the C text dump decoded
    it with the chunk and failed (``record 0 of 2: expected a length >= 0, found -64``, exit 1)."""
    import crc32c

    logs = tmp_path / "kafka-logs"
    (logs / "t-0").mkdir(parents=True)
    bad = bytearray(codec.encode_batch([(b"k", b"v", 2000), (b"k2", b"v2", 2001)], base_offset=1))
    bad[codec.RECORD_BATCH_OVERHEAD] = 0x7F          # the first record's length: -64
    struct.pack_into(">I", bad, codec.CRC_OFFSET, crc32c.crc32c(bytes(bad[codec.ATTRIBUTES_OFFSET:])))
    data = (codec.encode_batch([(b"a", b"x", 1000)], base_offset=0) + bytes(bad)
            + codec.encode_batch([(b"z", b"y", 3000)], base_offset=3))
    (logs / "t-0" / "00000000000000000000.log").write_bytes(data)
    (logs / "log-start-offset-checkpoint").write_text("0\n1\nt 0 3\n")
    text, reference = _both_dumps(logs, isolation=isolation)
    # (read_committed: both stop at it, where the last stable offset's producer-state walk decodes it)
    assert isolation == "read_committed" or (reference[1] is None and b"| offset: 3 " in reference[0])
    assert text == reference
