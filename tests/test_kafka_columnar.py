"""The columnar decoder of Kafka log regions (``segstore_kafka.columnar``, C and reference).

The C loop must give what the reference gives (the record codec of ``batch.py``,
itself the per-message decode): the same rows, and on damaged or torn input the
same rows before the problem and the same typed error at the same position.
Segments are generated with every codec, control and transactional batches,
LogAppendTime, compacted offsets, headers, and legacy v0/v1 entries written by
kafka-python's legacy builder.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import json
import mmap
import struct
from pathlib import Path

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, kafka_log_dir
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from segstore_kafka import batch as codec
from segstore_kafka import columnar, compression

import segstore
from segstore import cli
from segstore.columns import KAFKA_SCHEMA, project
from segstore.errors import ConfigError, NotFoundError, SegstoreError

needs_c = pytest.mark.skipif(columnar._speedups is None, reason="segstore_kafka._speedups not built")

header_values = st.one_of(st.none(), st.binary(max_size=12))
header_keys = st.one_of(st.text(max_size=6), st.sampled_from(["é", "\x00\"\\", "\U0001f600", "\u2028"]))
records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        st.one_of(st.none(), st.binary(max_size=60)),
        st.integers(0, 2**41),
        st.lists(st.tuples(header_keys, header_values), max_size=3),
    ),
    min_size=0, max_size=12,
)


def _legacy_entry(magic: int, codec_id: int, count: int, first_offset: int) -> bytes:
    """A legacy v0/v1 message set as kafka-python writes it (a wrapper when compressed)."""
    builder = LegacyRecordBatchBuilder(magic, codec_id, 1 << 20)
    last = first_offset + count - 1
    for i in range(count):
        builder.append(i if codec_id and magic == 1 else first_offset + i,
                       1_600_000_000_000 + i if magic else None, b"k%d" % i if i % 2 else None, b"v" * i)
    buf = bytearray(builder.build())
    if codec_id:  # the broker stamps a wrapper with its last inner offset
        struct.pack_into(">q", buf, 0, last)
    return bytes(buf)


def _recrc(data: bytearray) -> None:
    struct.pack_into(">I", data, codec.CRC_OFFSET, crc32c.crc32c(bytes(data[codec.ATTRIBUTES_OFFSET:])))


@st.composite
def segments(draw) -> bytes:
    """A run of batches and legacy entries, then maybe damage: bytes changed (the CRC fixed or not), a cut."""
    entries = []
    offset = draw(st.sampled_from([0, 5, 2**40]))
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["v2", "v2", "v2", "control", "legacy"]))
        if kind == "legacy":
            magic, codec_id = draw(st.sampled_from([0, 1])), draw(st.sampled_from([0, 1, 2]))
            count = draw(st.integers(1, 4))
            entries.append(_legacy_entry(magic, codec_id, count, offset))
            offset += count
            continue
        if kind == "control":
            entries.append(codec.encode_control_batch(draw(st.sampled_from(["COMMIT", "ABORT"])),
                                                      base_offset=offset, producer_id=7, producer_epoch=1,
                                                      coordinator_epoch=3, timestamp=1_700_000_000_000))
            offset += 1
            continue
        records = draw(records_strategy)
        log_append = draw(st.booleans())
        compacted = draw(st.booleans())
        deltas = [3 * i for i in range(len(records))] if compacted else None
        data = codec.encode_batch(
            records, base_offset=offset, compression=draw(st.sampled_from(compression.COMPRESSION_NAMES)),
            partition_leader_epoch=draw(st.sampled_from([-1, 0, 9])),
            producer_id=draw(st.sampled_from([-1, 42])), producer_epoch=draw(st.sampled_from([-1, 2])),
            base_sequence=draw(st.sampled_from([-1, 0, 2**31 - 3])), is_transactional=draw(st.booleans()),
            timestamp_type=codec.LOG_APPEND_TIME if log_append else codec.CREATE_TIME,
            log_append_time=1_650_000_000_000 if log_append else None, offset_deltas=deltas)
        if draw(st.integers(0, 4)) == 0 and len(data) > codec.HEADER.size:  # records damaged, CRC right
            damaged = bytearray(data)
            for _ in range(draw(st.integers(1, 3))):
                damaged[draw(st.integers(codec.HEADER.size, len(damaged) - 1))] = draw(st.integers(0, 255))
            if draw(st.booleans()):
                count = draw(st.sampled_from([-1, 0, 2**31 - 1]))
                struct.pack_into(">i", damaged, codec.HEADER.size - 4, count)
            _recrc(damaged)
            data = bytes(damaged)
        entries.append(data)
        offset += (deltas[-1] + 1) if deltas else max(len(records), 1)
    buf = bytearray(b"".join(entries))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    if draw(st.integers(0, 3)) == 0:
        buf = buf[:draw(st.integers(0, len(buf)))]
    return bytes(buf)


def _outcome(buf: bytes, *, accelerated: bool, capacity: columnar.Capacity | None = None,
             columns=None, start: int = 0, end: int | None = None):
    """(rows as Python values, error as (type, message, path, pos) or None)."""
    schema = project(KAFKA_SCHEMA, columns)
    batches = []
    error = None
    try:
        for chunk in columnar.decode(buf, path="seg.log", accelerated=accelerated, capacity=capacity,
                                     want=columnar.want_flags(schema.names), start=start, end=end):
            batches.append(columnar.to_arrow(chunk, schema, topic="t", partition=3, segment=11,
                                             accelerated=accelerated))
    except SegstoreError as err:
        error = (type(err), err.message, err.path, err.pos)
    table = pa.Table.from_batches(batches, schema=schema)
    return table.to_pylist(), error


@pytest.fixture
def pure_codec(monkeypatch):
    """The reference all the way down: batch.py's pure-Python record loop."""
    monkeypatch.setattr(codec, "_decode_records", codec._decode_records_py)


def _per_message(buf: bytes) -> list[tuple]:
    """The object API's view of every record (what each row must say)."""
    out = []
    for batch in codec.iter_batches(buf, path="seg.log"):
        for r in batch.records():
            out.append((r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers], batch.position,
                        batch.size, batch.base_offset, batch.magic, batch.is_control, r.sequence))
    return out


@needs_c
@settings(max_examples=400, deadline=None)
@given(buf=segments(), small=st.booleans())
def test_c_columns_equal_the_reference_on_good_damaged_and_torn_segments(buf, small) -> None:
    saved = codec._decode_records
    codec._decode_records = codec._decode_records_py
    try:
        reference = _outcome(buf, accelerated=False)
    finally:
        codec._decode_records = saved
    tiny = columnar.Capacity(rows=3, batches=2, key=5, value=7, headers=1, hkey=2, hvalue=3)
    capacity = tiny if small else None
    assert _outcome(buf, accelerated=True, capacity=capacity) == reference


@needs_c
@settings(max_examples=100, deadline=None)
@given(counts=st.lists(st.integers(0, 40), max_size=30), seed=st.integers(0, 2**32 - 1))
def test_c_spread_runs_equal_np_repeat(counts, seed) -> None:
    rng = np.random.default_rng(seed)
    per_batch = np.array(counts, np.int64)
    n = len(counts)
    batches = np.zeros(n, columnar.BATCH_DTYPE)
    batches["position"] = rng.integers(0, 2**62, n)
    columns = [rng.integers(-2**62, 2**62, n), rng.integers(-2**30, 2**30, n).astype(np.int32),
               rng.integers(-99, 99, n).astype(np.int16), rng.integers(0, 2, n).astype(np.bool_),
               rng.integers(-99, 99, n).astype(np.int8), batches["position"]]     # the last strided
    got = columnar.spread_runs(columns, per_batch)
    expected = columnar.spread_runs(columns, per_batch, accelerated=False)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()


@needs_c
def test_c_spread_runs_refuses_sizes_that_do_not_fit() -> None:
    target = np.zeros(3, np.int64)
    with pytest.raises(ValueError, match="expected 2 source and 4 target items"):
        columnar._speedups.spread_runs(np.array([1, 3], np.int64), ((np.zeros(2, np.int64), target, 8),))
    with pytest.raises(ValueError, match="run lengths of at least 0"):
        columnar._speedups.spread_runs(np.array([-1], np.int64), ((np.zeros(1, np.int64), target, 8),))
    assert target.tolist() == [0, 0, 0]


@settings(max_examples=150, deadline=None)
@given(buf=segments())
def test_rows_say_what_the_per_message_decode_says(buf) -> None:
    rows, error = _outcome(buf, accelerated=columnar._speedups is not None)
    try:
        expected = _per_message(buf)
    except SegstoreError as err:
        assert error is not None and error[1:] == (err.message, err.path, err.pos)
        return
    assert error is None
    got = [(r["offset"], int(np.datetime64(r["timestamp"].replace(tzinfo=None), "ms").astype(np.int64)),
            r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]], r["position"], r["size"],
            r["baseOffset"], r["magic"], r["isControl"], r["sequence"]) for r in rows]
    assert got == expected
    assert all(r["topic"] == "t" and r["partition"] == 3 and r["segment"] == 11 for r in rows)


@needs_c
@settings(max_examples=100, deadline=None)
@given(buf=segments(),
       columns=st.lists(st.sampled_from(KAFKA_SCHEMA.names), min_size=1, max_size=6, unique=True))
def test_projections_build_only_what_is_asked_and_agree(buf, columns) -> None:
    full, error = _outcome(buf, accelerated=True)
    projected, projected_error = _outcome(buf, accelerated=True, columns=columns)
    assert projected_error == error
    assert projected == [{name: row[name] for name in columns} for row in full]


@needs_c
@settings(max_examples=150, deadline=None)
@given(buf=segments(), columns=st.permutations(KAFKA_SCHEMA.names), keep=st.integers(1, 20),
       topic=st.sampled_from(["t", "", "é-topic", "x" * 249]), partition=st.sampled_from([0, 7, 2**31 - 1]),
       segment=st.sampled_from([0, 12345, 2**62]))
def test_c_export_equals_the_reference_batch(buf, columns, keep, topic, partition, segment) -> None:
    """The record batch ``export_chunk`` lays out and pyarrow imports (Arrow C data interface) is the
    one the reference builds a column at a time, for every projection and column order: the same
    values, types and null counts, and it validates in full (offsets, bitmaps, lengths)."""
    schema = project(KAFKA_SCHEMA, columns[:keep])
    try:
        chunks = list(columnar.decode(buf, path="seg.log", want=columnar.want_flags(schema.names)))
    except SegstoreError:
        return      # the chunks before an error are compared by the tests above
    for chunk in chunks:
        ours = columnar.to_arrow(chunk, schema, topic=topic, partition=partition, segment=segment)
        reference = columnar.to_arrow(chunk, schema, topic=topic, partition=partition, segment=segment,
                                      accelerated=False)
        ours.validate(full=True)
        assert ours.schema == reference.schema == schema
        assert ours.equals(reference)
        assert [column.null_count for column in ours.columns] == [c.null_count for c in reference.columns]


@st.composite
def long_batches(draw) -> bytes:
    """v2 batches of up to 60 records each (``segments``' hold 12 at most): runs of a batch-level value
    around and past the 16 rows from which ``export_chunk`` writes a run by doubling copies
    (``EXPORT_FILL_MIN``), with the batch fields each column takes from the header varied."""
    entries, offset = [], draw(st.sampled_from([0, 2**40]))
    for count in draw(st.lists(st.integers(1, 60), min_size=1, max_size=6)):
        records = [(None if i % 3 else b"k%d" % i, b"v" * (i % 5), 1_700_000_000_000 + i, [])
                   for i in range(count)]
        entries.append(codec.encode_batch(
            records, base_offset=offset, compression=draw(st.sampled_from(["none", "gzip"])),
            partition_leader_epoch=draw(st.sampled_from([-1, 0, 2**31 - 1])),
            producer_id=draw(st.sampled_from([-1, 42, 2**62])), producer_epoch=draw(st.sampled_from([-1, 2])),
            base_sequence=draw(st.sampled_from([-1, 0])), is_transactional=draw(st.booleans()),
            timestamp_type=draw(st.sampled_from([codec.CREATE_TIME, codec.LOG_APPEND_TIME])),
            log_append_time=1_650_000_000_000))
        offset += count
    return b"".join(entries)


@needs_c
@settings(max_examples=60, deadline=None)
@given(buf=long_batches(), columns=st.permutations(KAFKA_SCHEMA.names),
       topic=st.sampled_from(["t", "", "x" * 249]), batch_rows=st.sampled_from([None, 7, 40]))
def test_c_export_of_long_batches_equals_the_reference_batch(buf, columns, topic, batch_rows) -> None:
    """Every column, in any order, of chunks (one batch or several) of batches long enough that their runs
    are written by doubling copies: what the reference builds."""
    schema = project(KAFKA_SCHEMA, columns)
    capacity = None if batch_rows is None else columnar.Capacity.for_rows(batch_rows)
    chunks = list(columnar.decode(buf, path="seg.log", want=columnar.want_flags(schema.names),
                                  capacity=capacity))
    assert sum(chunk.rows for chunk in chunks) > 0
    for chunk in chunks:
        ours = columnar.to_arrow(chunk, schema, topic=topic, partition=2**31 - 1, segment=2**62)
        reference = columnar.to_arrow(chunk, schema, topic=topic, partition=2**31 - 1, segment=2**62,
                                      accelerated=False)
        ours.validate(full=True)
        assert ours.equals(reference)


def test_the_all_null_stored_keys_of_chunks_of_one_length_are_one_immutable_array() -> None:
    """A chunk whose header keys are all UTF-8 gets the all-null ``headerKeysBytes`` column of its length,
    made once and shared by the batches of every such chunk: its buffers are immutable."""
    data = b"".join(codec.encode_batch([(b"k", b"v" * i, 1_700_000_000_000, [("h", b"x")])] * 3,
                                       base_offset=3 * i) for i in range(4))
    chunks = list(columnar.decode(data, want=columnar.want_flags(KAFKA_SCHEMA.names),
                                  capacity=columnar.Capacity.for_rows(3)))
    assert len(chunks) == 4 and all(chunk.rows == 3 for chunk in chunks)
    columns = [columnar.stored_keys(chunk) for chunk in chunks]
    assert all(column is columns[0] for column in columns)
    assert columns[0].to_pylist() == [None] * 3 and columns[0].null_count == 3
    columns[0].validate(full=True)
    assert not any(buffer.is_mutable for buffer in columns[0].buffers() if buffer is not None)
    assert columnar.stored_keys(chunks[0].head(2, 2)).to_pylist() == [None] * 2


@needs_c
def test_an_exported_batch_outlives_its_chunk_and_releases_its_buffers() -> None:
    """The exported batch holds the chunk's buffers (a view of each) until Arrow releases it: it
    reads the same once the chunk is gone, and dropping it gives every reference back."""
    import gc
    import sys

    recs = [(b"k%d" % i, b"v" * i, 1000 + i, [("h", b"x" * i)]) for i in range(300)]
    [chunk] = list(columnar.decode(codec.encode_batch(recs, base_offset=0), path="seg.log",
                                   want=columnar.want_flags(KAFKA_SCHEMA.names)))
    expected = columnar.to_arrow(chunk, KAFKA_SCHEMA, topic="t", partition=1, segment=0,
                                 accelerated=False).to_pylist()
    offsets = chunk.buffers["offset"]
    before = sys.getrefcount(offsets)
    batch = columnar.to_arrow(chunk, KAFKA_SCHEMA, topic="t", partition=1, segment=0)
    assert sys.getrefcount(offsets) == before + 1       # the export's view
    del chunk
    gc.collect()
    assert batch.to_pylist() == expected
    sliced = batch.slice(5, 10)
    del batch
    gc.collect()
    assert sys.getrefcount(offsets) == before           # the dict's reference gone, the view held
    assert sliced.to_pylist() == expected[5:15]
    del sliced
    gc.collect()
    assert sys.getrefcount(offsets) == before - 1       # released with the last Arrow reference


@needs_c
def test_c_export_refuses_counts_outside_the_buffers() -> None:
    recs = [(b"k", b"v", 1000, [])] * 10
    [chunk] = list(columnar.decode(codec.encode_batch(recs, base_offset=0), path="seg.log",
                                   want=columnar.want_flags(KAFKA_SCHEMA.names)))
    counts, buffers = columnar._export_args(chunk)
    scratch = np.zeros(1 << 16, np.uint8)
    codes = columnar._export_of(KAFKA_SCHEMA).codes
    too_many = (len(chunk.buffers["offset"]) + 1, *counts[1:])
    for rows in (too_many[0], 1 << 61, -1):     # past the buffers, past what a size can hold, negative
        with pytest.raises(ValueError, match="within its buffers"):
            columnar._speedups.export_chunk(codes, (rows, *counts[1:]), buffers, scratch, b"t", 0, 0)
    with pytest.raises(ValueError, match="within its buffers"):
        huge_values = (*counts[:3], 1 << 40, *counts[4:])
        columnar._speedups.export_chunk(codes, huge_values, buffers, scratch, b"t", 0, 0)
    with pytest.raises(ValueError, match="scratch"):
        columnar._speedups.export_chunk(codes, counts, buffers, np.zeros(8, np.uint8), b"t", 0, 0)
    import sys

    before = sys.getrefcount(scratch)
    address = columnar._speedups.export_chunk(codes, counts, buffers, scratch, b"t", 0, 0)
    assert sys.getrefcount(scratch) == before + 1
    columnar._speedups.release_export(address)      # never imported: released here
    assert sys.getrefcount(scratch) == before


@needs_c
def test_c_takes_every_whole_valid_v2_batch_and_declines_legacy() -> None:
    recs = [(b"k%d" % i, b"v" * i, 1000 + i, [("h", b"x")]) for i in range(50)]
    buf = b"".join(codec.encode_batch(recs, base_offset=50 * i, compression=name)
                   for i, name in enumerate(compression.COMPRESSION_NAMES))
    buffers = columnar._allocate(columnar.Capacity(), 7)
    stop, pos, counts, need = columnar._speedups.decode_columns(
        buf, 0, len(buf), 7, columnar._inflater("x"), tuple(buffers[n] for n in columnar.BUFFERS))
    assert (stop, pos, counts[:2], need) == (columnar.STOP_END, len(buf), (5, 250), 0)
    legacy = _legacy_entry(1, 0, 2, 250)
    stop, pos, counts, _ = columnar._speedups.decode_columns(
        buf + legacy, 0, len(buf) + len(legacy), 7, columnar._inflater("x"),
        tuple(buffers[n] for n in columnar.BUFFERS))
    assert (stop, pos, counts[:2]) == (columnar.STOP_DECLINE, len(buf), (5, 250))


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(records_strategy, min_size=1, max_size=6), accelerated=st.booleans())
def test_a_small_regions_chunk_is_sized_to_it_and_holds_it_whole(batches, accelerated) -> None:
    """The default capacity cut to the region (``Capacity.within``): buffers no bigger than what its
    bytes can fill (a small segment's chunk takes kilobytes: no block big enough for Arrow's pool), and
    an uncompressed region still comes as one chunk, every record in it."""
    buf = b"".join(codec.encode_batch(records, base_offset=100 * i) for i, records in enumerate(batches))
    cap = columnar.Capacity().within(len(buf))
    assert cap.rows <= len(buf) // 7 + 1 and cap.batches <= len(buf) // codec.HEADER.size + 1
    assert max(cap.key, cap.value, cap.hkey, cap.hvalue) <= max(4096, len(buf))
    chunks = list(columnar.decode(buf, accelerated=accelerated and columnar._speedups is not None))
    assert len(chunks) == 1 and chunks[0].rows == sum(map(len, batches))
    assert sum(b.nbytes for b in chunks[0].buffers.values()) < 256 << 10
    assert columnar.Capacity().within(64 << 20) == columnar.Capacity()      # a big region: the default


@pytest.mark.parametrize("name", compression.COMPRESSION_NAMES[1:])
def test_a_small_compressed_region_holding_more_than_its_bytes_comes_whole(name) -> None:
    """A compressed batch inflating to more rows and bytes than its region holds grows the cut buffers
    (``Capacity.grown``) and decodes as the reference does."""
    records = [(b"k", b"v" * 100, 7, [("h", b"x")])] * 3000
    buf = codec.encode_batch(records, base_offset=0, compression=name)
    assert columnar.Capacity().within(len(buf)).value < 3000 * 100     # the values inflate past it
    assert _outcome(buf, accelerated=columnar._speedups is not None) == _outcome(buf, accelerated=False)
    rows, error = _outcome(buf, accelerated=columnar._speedups is not None)
    assert error is None and len(rows) == 3000 and rows[-1]["value"] == b"v" * 100


@settings(max_examples=150, deadline=None)
@given(buf=segments(), accelerated=st.booleans())
def test_a_chunks_blob_is_what_its_arrow_column_holds(buf, accelerated) -> None:
    """``Chunk.blob`` (the Kafka text dump's control records) reads a row's key and value as the chunk's
    Arrow columns hold them, nulls too, from the C loop's chunks and the reference's."""
    schema = project(KAFKA_SCHEMA, ["key", "value"])
    with contextlib.suppress(SegstoreError):
        for chunk in columnar.decode(buf, accelerated=accelerated and columnar._speedups is not None):
            table = columnar.to_arrow(chunk, schema, topic="t", partition=0, segment=0)
            for name in ("key", "value"):
                assert [chunk.blob(name, row) for row in range(chunk.rows)] == table.column(name).to_pylist()


def test_a_byte_range_takes_the_batches_that_start_in_it() -> None:
    batches = [codec.encode_batch([(b"k", b"v%d" % i, i)], base_offset=i) for i in range(6)]
    buf = b"".join(batches)
    starts = np.cumsum([0] + [len(b) for b in batches])
    rows, error = _outcome(buf, accelerated=columnar._speedups is not None, start=int(starts[2]),
                           end=int(starts[4]) - 1)
    assert error is None and [r["offset"] for r in rows] == [2, 3]
    torn = buf + batches[0][:30]
    rows, error = _outcome(torn, accelerated=columnar._speedups is not None, end=len(buf))
    assert error is None and len(rows) == 6
    rows, error = _outcome(torn, accelerated=columnar._speedups is not None)
    assert len(rows) == 6 and error[0].__name__ == "TruncatedDataError" and error[3] == len(buf)


@needs_c
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), seed=st.integers(0, 2**32 - 1))
def test_c_crc32c_is_castagnoli(data, seed) -> None:
    assert columnar._speedups.crc32c(data) == crc32c.crc32c(data)
    assert columnar._speedups.crc32c(data, seed) == crc32c.crc32c(data, seed)


def _with_region(region: bytes, count: int, attributes: int = 0, base_offset: int = 0) -> bytes:
    """A v2 batch with a hand-made record region and a right CRC (only the records are wrong)."""
    length = codec.HEADER.size - codec.LOG_OVERHEAD + len(region)
    header = bytearray(codec.HEADER.pack(base_offset, length, 0, 2, 0, attributes, max(count - 1, 0), 0, 0,
                                         -1, -1, -1, count))
    header += region
    _recrc(header)
    return bytes(header)


def _region(*records) -> bytes:
    return codec.encode_batch(list(records), base_offset=0)[codec.HEADER.size:]


VALID = _region((b"a", b"b", 0))          # 10 00 00 00 02 61 02 62 00: one 8-byte record body
WITH_HEADER = _region((b"a", b"b", 0, [("z", None)]))
GOOD = codec.encode_batch([(b"k", b"v", 5, [("h", b"x")])] * 3, base_offset=0)


@needs_c
@pytest.mark.parametrize(("region", "count", "attributes", "base_offset"), [
    (VALID, 2, 0, 0), (VALID + b"\xff", 1, 0, 0), (b"\x0e" + VALID[1:], 1, 0, 0),
    (b"\x12" + VALID[1:] + b"\x00", 1, 0, 0), (VALID[:-2], 1, 0, 0),
    (WITH_HEADER.replace(b"z", b"\xff"), 1, 0, 0),
    (WITH_HEADER.replace(b"z", b"\xed"), 1, 0, 0), (VALID[:-1] + b"\x01", 1, 0, 0), (b"\x00", 1, 0, 0),
    (b"\x01" + VALID[1:], 1, 0, 0), (VALID, 2**31 - 1, 0, 0), (VALID, -1, 0, 0), (VALID, 0, 0, 0),
    (b"\x80" * 5 + b"\x01", 1, 0, 0), (b"\x16\x00" + b"\xff" * 10 + b"\x00", 1, 0, 0),
    (_region((b"a", b"b", 0, [("z", None)])).replace(b"\x01\x02z", b"\x01\x03z"), 1, 0, 0),
    (_region((b"a", b"b", 0)).replace(b"\x00\x00\x02a", b"\x00\x02\x02a"), 1, 0, 2**63 - 1),
    (compression.compress("lz4", VALID), 1, 3, 0), (compression.compress("lz4", VALID)[:-3], 1, 3, 0),
    (compression.compress("zstd", VALID + b"\x00"), 1, 4, 0), (VALID, 1, 5, 0), (VALID, 1, 7, 0),
], ids=["short-count", "trailing", "field-past-end", "body-too-long", "cut", "utf8", "surrogate",
        "neg-headers",
        "zero-length", "negative-length", "huge-count", "negative-count", "zero-count", "long-varint",
        "long-varlong", "header-key-past", "offset-overflow", "lz4", "lz4-cut", "zstd-trailing", "codec-5",
        "codec-7"])
def test_malformed_records_stop_both_decoders_alike(pure_codec, region, count, attributes,
                                                    base_offset) -> None:
    buf = GOOD + _with_region(region, count, attributes, base_offset) + GOOD
    reference = _outcome(buf, accelerated=False)
    assert _outcome(buf, accelerated=True) == reference
    assert reference[0][:3] == _outcome(GOOD, accelerated=False)[0]


# Lengths and deltas at the edges of one-, two- and three-byte varints (zigzag: 63/64 and 8191/8192),
# where the C varint reader takes its one- and two-byte shortcuts, and of the C loop's copies of keys
# (copy_short: word moves up to 32 bytes, memcpy beyond).
_varint_edges = st.sampled_from([0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 62, 63, 64, 65, 100, 127, 128, 8191,
                                 8192, 8193])


@needs_c
@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.tuples(st.one_of(st.none(), _varint_edges), st.one_of(st.none(), _varint_edges),
                                _varint_edges), min_size=1, max_size=4),
       cut=st.integers(0, 2**16), flips=st.lists(st.tuples(st.integers(0, 2**16), st.integers(0, 255)),
                                                max_size=2),
       extra=st.sampled_from([-1, 0, 0, 1]))
def test_c_varints_at_their_byte_edges_decode_as_the_reference_whole_cut_or_damaged(
        sizes, cut, flips, extra) -> None:
    records = [(None if k is None else b"k" * k, None if v is None else b"v" * v, t) for k, v, t in sizes]
    region = bytearray(_region(*records))
    for at, byte in flips:
        region[at % len(region)] = byte
    if cut % 3 == 0:        # a record or field cut short inside a batch whose CRC is right
        region = region[:cut % (len(region) + 1)]
    buf = GOOD + _with_region(bytes(region), len(records) + extra) + GOOD
    saved = codec._decode_records
    codec._decode_records = codec._decode_records_py     # the reference all the way down
    try:
        reference = _outcome(buf, accelerated=False)
    finally:
        codec._decode_records = saved
    assert _outcome(buf, accelerated=True) == reference


# The C loop's fast path (_speedups_columns.c, fast_records): a batch's records read field by field without
# a bound per field, one check a record that they end where its length says, and the checked loop taking
# over at the first record that is not of the usual shape.  Its reads may run FAST_OVERREAD bytes past a
# record's end, so it must stop short of the end of what is readable: a map's last batch is decoded here
# with nothing mapped after it (an unreadable page), so that a read past it crashes the test.
_PAGE = mmap.PAGESIZE


@pytest.fixture(scope="module")
def at_map_end():
    """``place(data)``: ``data`` as a memoryview ending exactly where a map's readable bytes end (a
    PROT_NONE page after them); one map of 2 MiB for the module, each call writing over the last."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    readable = 2 << 20
    mapped = mmap.mmap(-1, readable + _PAGE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
    assert libc.mprotect(address + readable, _PAGE, 0) == 0, ctypes.get_errno()   # PROT_NONE
    whole = memoryview(mapped)[:readable]

    def place(data: bytes) -> memoryview:
        whole[readable - len(data):] = data
        return whole[readable - len(data):]

    try:
        yield place
    finally:
        libc.mprotect(address + readable, _PAGE, mmap.PROT_READ | mmap.PROT_WRITE)
        whole.release()
        gc.collect()    # decode errors' traceback cycles may still hold views of the map
        with contextlib.suppress(BufferError):  # (a failed test's may: unmapped when they go)
            mapped.close()


def _record_starts(region: bytes, count: int) -> list[tuple[int, int, int]]:
    """(start, length varint's size, length) of each of the first ``count`` records of a good region."""
    out, pos = [], 0
    for _ in range(count):
        raw, shift, at = 0, 0, pos
        while True:
            byte = region[at]
            raw |= (byte & 0x7F) << shift
            shift += 7
            at += 1
            if byte < 0x80:
                break
        length = (raw >> 1) ^ -(raw & 1)
        out.append((pos, at - pos, length))
        pos = at + length
    return out


def _varint(value: int) -> bytes:
    raw, out = (value << 1) ^ (value >> 63), bytearray()
    raw &= (1 << 64) - 1
    while raw > 0x7F:
        out.append(raw & 0x7F | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


# timestamp and offset deltas at the fast loop's three-byte bound (zigzag 2^21: +-2^20) and past it
_DELTA_EDGES = [0, 1, 63, 64, 8191, 8192, 2**20 - 1, 2**20, 2**20 + 1, -1, -(2**20), -(2**20) - 1]
_FAST_SIZES = st.sampled_from([0, 1, 3, 7, 15, 16, 17, 31, 33, 100, 8191, 8192])
# offset deltas (rising) about the same bound: 2^20 - 1 takes three bytes, 2^20 four
_OFFSET_DELTA_EDGES = [0, 2**20 - 1, 2**20, 2**20 + 1, 2**21]
_PLAIN = {"deltas": False, "codec_name": "none", "which": 0, "at": 0, "byte": 0, "control": False,
          "log_append": False, "columns": None, "small": False}


def _reference_outcome(buf) -> tuple:
    saved = codec._decode_records
    codec._decode_records = codec._decode_records_py     # the reference all the way down
    try:
        return _outcome(buf, accelerated=False)
    finally:
        codec._decode_records = saved


@needs_c
@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.tuples(st.one_of(st.none(), _FAST_SIZES), st.one_of(st.none(), _FAST_SIZES),
                                  st.sampled_from(_DELTA_EDGES),
                                  st.lists(st.tuples(st.sampled_from(["", "h", "\xe9", "k" * 20]),
                                                     st.one_of(st.none(), _FAST_SIZES)), max_size=2)),
                        min_size=1, max_size=5),
       deltas=st.booleans(), codec_name=st.sampled_from(["none", "none", "none", "lz4"]),
       damage=st.sampled_from(["none", "none", "lie", "cut", "claim", "flip"]), which=st.integers(0, 4),
       by=st.sampled_from([-2, -1, 1, 2, 64]), at=st.integers(0, 2**16), byte=st.integers(0, 255),
       last=st.booleans(), control=st.booleans(), log_append=st.booleans(), columns=st.sampled_from(
           [None, ["value", "offset"], ["key", "timestamp", "sequence"], ["headers", "offset"]]),
       small=st.booleans())
@example(records=[(None, None, 0, [])] * 2, damage="lie", by=-2, last=False, **_PLAIN)
@example(records=[(None, None, 0, [])] * 2, damage="lie", by=1, last=True, **_PLAIN)
@example(records=[(1, 3, 0, [("h", 1)])], damage="claim", by=1, last=True, **_PLAIN)
def test_the_fast_record_loop_decodes_as_the_reference(at_map_end, records, deltas, codec_name, damage,
                                                       which, by, at, byte, last, control, log_append,
                                                       columns, small) -> None:
    """Records of every fast-loop shape and the edges where it hands over (varints of three and four
    bytes, headers, nulls), whole or with a record's length varint lying, the last record cut short (its
    length left or claiming the bytes left) or a byte changed (the CRC right), plain or compressed, the
    batch last in a map or followed by more, maybe after a control batch; every projection and full
    buffers: the rows and errors of the reference."""
    t0 = 1_700_000_000_000
    made = [(None if k is None else b"k" * k, None if v is None else b"v" * v, t0 + d,
             [(hk, None if hv is None else b"x" * hv) for hk, hv in hs]) for k, v, d, hs in records]
    batch = bytearray(codec.encode_batch(
        made, base_offset=5, offset_deltas=_OFFSET_DELTA_EDGES[:len(made)] if deltas else None,
        timestamp_type=codec.LOG_APPEND_TIME if log_append else codec.CREATE_TIME,
        log_append_time=t0 if log_append else None))
    region = bytes(batch[codec.HEADER.size:])
    if damage != "none":
        starts = _record_starts(region, len(made))
        start, size, length = starts[which % len(starts)]
        if damage == "lie":
            region = region[:start] + _varint(max(length + by, -1)) + region[start + size:]
        elif damage == "cut":
            start, size, length = starts[-1]
            region = region[:start + at % (size + length)]
        elif damage == "claim":
            start, size, length = starts[-1]
            region = _claiming(region, len(made), start + size + at % (length + 1))
        else:
            region = region[:at % len(region)] + bytes([byte]) + region[at % len(region) + 1:]
    attributes = int.from_bytes(batch[codec.ATTRIBUTES_OFFSET:codec.ATTRIBUTES_OFFSET + 2], "big")
    if codec_name != "none":
        region = compression.compress(codec_name, region)
        attributes |= compression.COMPRESSION_NAMES.index(codec_name)
    batch = bytearray(batch[:codec.HEADER.size] + region)
    struct.pack_into(">i", batch, 8, len(batch) - codec.LOG_OVERHEAD)
    struct.pack_into(">h", batch, codec.ATTRIBUTES_OFFSET, attributes)
    _recrc(batch)
    before = codec.encode_control_batch("COMMIT", base_offset=0, producer_id=7, producer_epoch=1,
                                        coordinator_epoch=3, timestamp=t0) if control else GOOD
    data = before + bytes(batch) + (b"" if last else GOOD)
    tiny = columnar.Capacity(rows=3, batches=2, key=5, value=7, headers=1, hkey=2, hvalue=3)
    view = at_map_end(data)
    projected = _outcome(view, accelerated=True, columns=columns)
    assert projected == _outcome(view, accelerated=False, columns=columns)
    assert _outcome(view, accelerated=True, capacity=tiny if small else None) == _reference_outcome(view)


def _claiming(region: bytes, count: int, cut: int) -> bytes:
    """``region`` cut at ``cut`` inside its last record, that record's length varint rewritten to claim
    exactly the bytes left (its fields then run past its end)."""
    start, size, _length = _record_starts(region, count)[-1]
    return region[:start] + _varint(max(0, cut - start - size)) + region[start + size:max(cut, start + size)]


@needs_c
@pytest.mark.parametrize("tail", [b"", b"\x00" * 3])
@pytest.mark.parametrize(("body", "count"), [
    (VALID, 1), (WITH_HEADER, 1), (_region((None, None, 0)), 1), (_region((b"k", b"v" * 100, 0)), 1),
    (_region((b"a", b"b", 0), (None, None, 9)), 2),
], ids=["one-byte-lengths", "header", "nulls", "value", "two"])
def test_a_batch_ending_at_the_end_of_a_map_is_read_without_reading_past_it(at_map_end, body, count,
                                                                            tail) -> None:
    """The smallest records (an 8-byte body: the fast loop may read FAST_OVERREAD bytes past it) as a
    map's last bytes: whole, cut in each place (the last record's length left, or claiming what is
    left), trailing bytes after them, their count one too many."""
    for cut in range(len(body) + 1):
        for region in (body[:cut] + tail, _claiming(body, count, cut) + tail):
            for extra in (0, 1):
                view = at_map_end(GOOD + _with_region(region, count + extra))
                assert _outcome(view, accelerated=True) == _reference_outcome(view)


@needs_c
@pytest.mark.parametrize("value", [2**20 - 9, 2**20 - 8])
def test_a_record_at_the_fast_loops_length_bound_decodes_as_the_reference(at_map_end, value) -> None:
    """A record of 2^20 - 1 bytes (its length a three-byte varint: the fast loop's) and of 2^20 (four
    bytes: the checked loop's), between two of the fast loop's."""
    data = codec.encode_batch([(b"a", b"b", 0), (None, b"v" * value, 1), (b"c", None, 2)], base_offset=0)
    lengths = [length for _, _, length in _record_starts(data[codec.HEADER.size:], 3)]
    assert lengths[1] == value + 8
    view = at_map_end(data)
    assert _outcome(view, accelerated=True) == _reference_outcome(view)


# ---------------------------------------------------------------------------------
# KafkaStore.scan_arrow and dump --json over real directories


def _object_rows(records) -> list[tuple]:
    return [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers, r.batch.position,
             r.batch.size, r.batch.is_control) for r in records]


def _arrow_rows(batches) -> list[tuple]:
    table = pa.Table.from_batches(list(batches), schema=KAFKA_SCHEMA)
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [(r["topic"], r["partition"], r["offset"], t, r["key"], r["value"],
             [(h["key"], h["value"]) for h in r["headers"]], r["position"], r["size"], r["isControl"])
            for r, t in zip(table.to_pylist(), ts, strict=True)]


@pytest.fixture(params=["c", "python"])
def accelerator(request, monkeypatch):
    if request.param == "c" and columnar._speedups is None:
        pytest.skip("segstore_kafka._speedups not built")
    if request.param == "python":
        monkeypatch.setattr(columnar, "_speedups", None)
    return request.param


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_scan_arrow_reads_the_fixtures_as_scan_does(name, accelerator) -> None:
    with segstore.open(FIXTURES / "kafka" / name / "topic-0") as store:
        assert _arrow_rows(store.scan_arrow()) == _object_rows(store.scan())
        last = store.offset_range("topic", 0)[1] - 1
        for offset in (0, 1, last, last + 1):
            assert _arrow_rows(store.scan_arrow(topic="topic", partition=0, offset=offset)) == \
                _object_rows(store.read("topic", 0, offset))


def _log_dir(tmp_path: Path) -> Path:
    """Two topics, small segments (many rolls and index entries), headers, transactions, compression."""
    return kafka_log_dir(tmp_path / "logs", 60, lambda j: [("h\u00e9\"", b"x" * j)])


def test_scan_arrow_over_a_log_dir_partitions_offsets_and_ranges(tmp_path, accelerator) -> None:
    path = _log_dir(tmp_path)
    with segstore.open(path) as store:
        assert _arrow_rows(store.scan_arrow()) == _object_rows(store.scan())
        for topic, partition in (("a", 0), ("b", 1)):
            start, end = store.offset_range(topic, partition)
            for offset in (0, start + 1, (start + end) // 2, end - 1, end, end + 7):
                assert _arrow_rows(store.scan_arrow(topic=topic, partition=partition, offset=offset)) == \
                    _object_rows(store.read(topic, partition, offset))
        assert _arrow_rows(store.scan_arrow(topic="a")) == \
            _object_rows(r for r in store.scan() if r.topic == "a")
        part = store.partition_of("a", 0)
        assert len(part.segments) > 3
        seg = part.segments[1]
        positions = [b.position for b in seg.batches()]
        lo, hi = positions[1] + 1, positions[-1]
        rows = _arrow_rows(store.scan_arrow(topic="a", partition=0, offset=seg.base, start=lo, end=hi))
        expected = [(r.offset, r.batch.position) for r in store.read("a", 0, seg.base)
                    if lo <= r.batch.position < hi and r.offset < part.segments[2].base]
        assert [(r[2], r[7]) for r in rows] == expected and expected
        projected = list(store.scan_arrow(["offset", "isControl"], topic="a", partition=0))
        table = pa.Table.from_batches(projected)
        assert table.schema.names == ["offset", "isControl"]
        assert table.column("isControl").to_pylist().count(True) == 1
        with pytest.raises(NotFoundError):
            list(store.scan_arrow(topic="c", partition=0))
        with pytest.raises(ConfigError):
            list(store.scan_arrow(["nope"]))


def test_scan_arrow_batch_rows_cuts_smaller_batches_of_the_same_rows(tmp_path, accelerator) -> None:
    path = tmp_path / "logs"
    with segstore.open(path, format="kafka", mode="a") as store:
        for i in range(40):     # record batches of 1-7 records
            store.append_batch([{"topic": "t", "partition": 0, "key": None, "value": b"v%d" % i,
                                 "headers": [("h", b"x" * j)]} for j in range(1 + i % 7)])
    with segstore.open(path) as store:
        whole = _arrow_rows(store.scan_arrow())
        assert len(whole) == sum(1 + i % 7 for i in range(40))
        for rows in (1, 5, 64):
            batches = list(store.scan_arrow(topic="t", partition=0, batch_rows=rows))
            assert _arrow_rows(batches) == whole
            # a chunk holds whole record batches (of 7 records at most): at most one more than fits
            assert max(batch.num_rows for batch in batches) <= rows + 6
            assert len(batches) >= len(whole) // (rows + 6)
        with pytest.raises(ConfigError, match="batch_rows of at least 1, found 0"):
            list(store.scan_arrow(batch_rows=0))


def test_scan_arrow_batch_rows_above_the_default_grows_chunks_of_small_records(tmp_path, accelerator) -> None:
    """``batch_rows`` above the default's rows: chunks of that many rows where the records are small,
    while the data buffers stay the default's (what bounds a chunk's memory in the C loop): big values
    still come in chunks of at most the default's value bytes; the same rows either way."""
    default = columnar.Capacity()
    path = tmp_path / "logs"
    with segstore.open(path, format="kafka", mode="a") as store:
        for start in range(0, 20_000, 2_000):      # small values, partition 0
            store.append_batch([segstore.Message(topic="t", partition=0, value=b"%d" % i)
                                for i in range(start, start + 2_000)])
        for _ in range(10):                         # 5 MB of values, partition 1
            store.append_batch([segstore.Message(topic="t", partition=1, value=b"x" * 1_000)] * 500)
    with segstore.open(path) as store:
        def scan(partition: int, batch_rows: int | None = None) -> list[pa.RecordBatch]:
            return list(store.scan_arrow(["offset", "value"], topic="t", partition=partition,
                                         batch_rows=batch_rows))

        small, small_grown = scan(0), scan(0, 4 * default.rows)
        assert pa.Table.from_batches(small_grown).equals(pa.Table.from_batches(small))
        # whole record batches of 2,000: at most one more than the rows fit
        assert len(small) > 1 and max(b.num_rows for b in small) <= default.rows + 2_000
        assert [b.num_rows for b in small_grown] == [20_000]
        big, big_grown = scan(1), scan(1, 4 * default.rows)
        assert pa.Table.from_batches(big_grown).equals(pa.Table.from_batches(big))
        assert [b.num_rows for b in big_grown] == [b.num_rows for b in big]
        if accelerator == "c":      # the C loop's chunks end at their data buffers (the reference's at rows)
            assert len(big) > 1 and max(b.num_rows for b in big) * 1_000 <= default.value + 500 * 1_000


def test_capacity_for_rows_scales_the_buffers_and_keeps_the_default_at_its_rows() -> None:
    default = columnar.Capacity()
    assert columnar.Capacity.for_rows(default.rows) == default
    # more rows than the default's: the rows alone, the data buffers (what bounds a chunk) the default's
    more = columnar.Capacity.for_rows(4 * default.rows)
    assert more.rows == 4 * default.rows
    assert dataclasses.replace(more, rows=default.rows) == default
    half = columnar.Capacity.for_rows(default.rows // 2)
    assert (half.rows, half.value, half.hkey, half.headers) == \
        (default.rows // 2, default.value // 2, default.hkey // 2, default.headers // 2)
    tiny = columnar.Capacity.for_rows(0)
    assert tiny.rows == 1 and tiny.batches >= 1 and min(tiny.key, tiny.value, tiny.hkey, tiny.hvalue) == 4096


@needs_c
def test_c_json_lines_refuses_buffers_that_do_not_hold_together(tmp_path) -> None:
    """The checks run before any byte is written (the passes without the GIL): a clear error."""
    log = next(Path(_log_dir(tmp_path), "a-0").glob("*.log")).read_bytes()
    chunk = next(columnar.decode(log))
    n, nb = chunk.rows, chunk.counts["batches"]
    types, tails = [b'"CreateTime"'] * nb, [b"}\n"] * nb

    def lines(types=types) -> bytes:
        return columnar._speedups.json_lines(b'{"offset": ', types, tails,
                                             tuple(chunk.buffers[name] for name in columnar.BUFFERS), n, nb)

    assert lines().count(b"\n") == n
    with pytest.raises(TypeError, match="timestamp types and tails as bytes"):
        lines(["CreateTime"] * nb)
    chunk.buffers["row_batch"][n - 1] = nb       # a row of a batch past the chunk's
    with pytest.raises(ValueError, match="row batches and offsets within the buffers"):
        lines()


def test_dump_json_lines_are_json_dumps_of_to_json(tmp_path, accelerator) -> None:
    path = _log_dir(tmp_path)
    with segstore.open(path) as store:
        dumped = b"".join(bytes(block) for block in store.dump_json()).decode("ascii")
        expected = "".join(json.dumps(store.to_json(r)) + "\n" for r in store.scan())
    assert dumped == expected
    with open(tmp_path / "dump.txt", "w", encoding="utf-8") as text, segstore.open(path) as store:
        text.write("before\n")   # text written before the dump's bytes keeps its place
        cli._write_blocks(store.dump_json(), text)
        text.write("after\n")
    assert (tmp_path / "dump.txt").read_text() == "before\n" + expected + "after\n"


@needs_c
@settings(max_examples=150, deadline=None)
@given(buf=segments())
def test_c_json_lines_equal_the_python_lines(buf) -> None:
    chunks = []
    with contextlib.suppress(SegstoreError):  # damaged segments: the chunks before the problem
        chunks.extend(columnar.decode(buf, path="seg.log"))
    for chunk in chunks:
        batches = [columnar.record_batch(row) for row in chunk.batches.tolist()]
        types = [json.dumps(b.timestamp_type) for b in batches]
        tails = [f', "b": {b.base_offset}}}\n' for b in batches]
        c_lines = columnar.json_lines(chunk, '{"t": 1, "offset": ', types, tails)
        saved = columnar._speedups
        columnar._speedups = None
        try:
            py_lines = columnar.json_lines(chunk, '{"t": 1, "offset": ', types, tails)
        finally:
            columnar._speedups = saved
        assert c_lines == py_lines
        assert isinstance(c_lines, bytes) and isinstance(py_lines, bytes)
        assert [json.loads(line)["offset"] for line in c_lines.splitlines()] == \
            chunk.buffers["offset"][:chunk.rows].tolist()


def test_verify_walks_every_batch_decoding_records_and_goes_on_after_a_bad_one(tmp_path, accelerator) -> None:
    path = _log_dir(tmp_path) / "a-0"
    with segstore.open(path) as store:
        assert store.verify() == []
        seg = store.partition.segments[1]
        batches = list(seg.batches())
        seg_path = Path(seg.path)
    data = bytearray(seg_path.read_bytes())
    bad_records = batches[1].position
    data[bad_records + codec.HEADER.size] = 0x7F  # the first record's length: runs past, CRC made right
    head = data[bad_records:bad_records + batches[1].size]
    _recrc(head)
    data[bad_records:bad_records + batches[1].size] = head
    bad_crc = batches[3].position
    data[bad_crc + batches[3].size - 1] ^= 1
    seg_path.write_bytes(bytes(data))
    with segstore.open(path) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [
        (str(seg_path), bad_records + codec.HEADER.size), (str(seg_path), bad_crc + codec.CRC_OFFSET)]
    assert "record 0 of" in problems[0].message and "CRC-32C" in problems[1].message


@pytest.mark.parametrize("batches", [[[0, 1, 1]], [[0, 2, 1, 3]], [[0, 1], [1, 2]], [[4, 5], [5]],
                                     [[0, 1, 2], [3, 4, 4]]])
def test_the_column_writer_refuses_offsets_that_do_not_increase_as_the_entry_writer(
        tmp_path: Path, batches: list[list[int]]) -> None:
    """Offsets of a partition that do not increase, within an added batch or from one to the next:
    the same ConversionError (which offset after which) from both Kafka writers, and the rows
    before it as the entry writer leaves them."""
    from segstore_kafka.conversion import KafkaArrowWriter, KafkaWriter
    from segstore_rocketmq.conversion import entries_to_batch

    from segstore.convert.interchange import Entry, Options, Peer
    from segstore.convert.mapping import _side
    from segstore.errors import ConversionError

    options = Options(peer=Peer("rocketmq", _side("rocketmq").topics), batch_records=2)
    errors = []
    for columns in (True, False):
        with segstore.open(tmp_path / str(columns), "kafka", "a") as store:
            writer = KafkaArrowWriter(store, options) if columns else KafkaWriter(store, options)
            with pytest.raises(ConversionError) as caught:
                for offsets in batches:
                    records = [Entry(topic="t", partition=0, offset=o, timestamp=o, key=None,
                                     value=b"v%d" % o) for o in offsets]
                    if columns:
                        writer.add_batch(entries_to_batch(records, [10] * len(records)))
                    else:
                        for record in records:
                            writer.add(record, 10)
                writer.flush_all()
            errors.append(str(caught.value).split(": ", 1)[-1])
    assert errors[0] == errors[1] and "to increase" in errors[0]


def _ints(bits: int, signed: bool = True):
    return st.integers(-2**(bits - 1), 2**(bits - 1) - 1) if signed else st.integers(0, 2**bits - 1)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(_ints(63), _ints(40, False), _ints(63), _ints(63), _ints(63), _ints(32),
                               _ints(31, False), _ints(32), _ints(32), _ints(31, False), _ints(32, False),
                               _ints(16), _ints(16), st.integers(0, 2)), max_size=20))
def test_dump_json_batch_tails_are_json_dumps_of_batch_json(rows) -> None:
    """``dump --json``'s batch objects from the batch columns: ``json.dumps(batch_json(batch, base))``,
    whatever the magic, flags (transactional, control, delete horizon, timestamp type) and codec."""
    from segstore_kafka.store import batch_json, batch_tails

    array = np.zeros(len(rows), columnar.BATCH_DTYPE)
    for i, (base, position, base_ts, max_ts, pid, delta, size, epoch, seq, count, crc, attributes, pepoch,
            magic) in enumerate(rows):
        attributes = attributes & ~0x07 | (abs(attributes) % 5)     # a codec Kafka has
        array[i] = (base, position, base_ts, max_ts, pid, delta, size, epoch, seq, count, crc, 0, attributes,
                    pepoch, magic, b"")
    types, tails = batch_tails(array, 7)
    batches = [columnar.record_batch(row) for row in array.tolist()]
    assert types == [json.dumps(b.timestamp_type) for b in batches]
    assert tails == [f', "batch": {json.dumps(batch_json(b, 7))}}}\n' for b in batches]


@pytest.mark.parametrize("accelerated", [True, False])
def test_a_v0_wrapper_whose_offsets_span_past_int64_is_a_typed_error(accelerated: bool) -> None:
    """A v0 wrapper's inner offsets are absolute and Kafka 3.8 checks none against the wrapper's
    (``DeepRecordsIterator``): its first inner offset is the batch's base offset, the wrapper's its
    last.  A first inner offset near -2**63 under a wrapper at 3 spans more than an int64, which the
    columns' ``last_offset_delta`` (int64) cannot hold: an ``OverflowError`` escaped the decoder."""
    import zlib

    def message(offset: int, attributes: int, value: bytes) -> bytes:
        body = struct.pack(">bbi", 0, attributes, -1) + struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body

    inner = message(-(2**63) + 3, 0, b"a") + message(3, 0, b"b")
    first = message(0, 0, b"x") + message(1, 0, b"y") + message(2, 0, b"z")
    data = first + message(3, 1, compression.compress("gzip", inner))
    with pytest.raises(SegstoreError) as info:
        list(columnar.decode(data, path="w.log", accelerated=accelerated))
    assert (info.value.path, info.value.pos) == ("w.log", len(first))
    *_, wrapper = codec.iter_batches(data, path="w.log")      # the record-by-record readers alike
    with pytest.raises(SegstoreError, match="spanning offsets within int64"):
        wrapper.records()


@pytest.mark.parametrize("compression_name", ["none", "gzip"])
def test_a_batch_whose_count_is_0_holds_no_record_whatever_its_bytes(compression_name: str) -> None:
    """Kafka 3.8 ``DefaultRecordBatch.iterator``: ``if (count() == 0) return Collections.emptyIterator()``,
    before anything of the records region (compressed or not) is read: what ``kafka-dump-log`` and the
    broker's readers take from such a batch is no record.  segstore read the region and raised
    ``expected 0 records filling 33 bytes, found 33 bytes after them`` (C and Python)."""
    first = codec.encode_batch([(b"a", b"x", 1000)], base_offset=0)
    bad = bytearray(codec.encode_batch([(b"k", b"v", 2000)], base_offset=1, compression=compression_name))
    struct.pack_into(">i", bad, 57, 0)
    if compression_name == "gzip":
        bad[codec.RECORD_BATCH_OVERHEAD:] = b"\xff" * (len(bad) - codec.RECORD_BATCH_OVERHEAD)
    struct.pack_into(">I", bad, codec.CRC_OFFSET, crc32c.crc32c(bytes(bad[codec.ATTRIBUTES_OFFSET:])))
    buf = first + bytes(bad) + codec.encode_batch([(b"z", b"y", 3000)], base_offset=2)
    assert [b.records() for b in codec.iter_batches(buf)][1] == []
    outcomes = [_outcome(buf, accelerated=False)]
    if columnar._speedups is not None:
        outcomes.append(_outcome(buf, accelerated=True))
    for rows, error in outcomes:
        assert error is None and [row["offset"] for row in rows] == [0, 2]


_EDGE_OFFSETS = [-(2**63), -(2**63) + 1, -2, -1, 0, 1, 2, 3, 2**63 - 2, 2**63 - 1]


def _legacy_offset_message(offset: int, magic: int, attributes: int, value: bytes) -> bytes:
    import zlib

    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", 100) if magic else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


@settings(max_examples=300, deadline=None)
@given(magic=st.sampled_from([0, 1]), codec_id=st.sampled_from([1, 2, 3]),
       wrapper=st.one_of(st.sampled_from(_EDGE_OFFSETS), _ints(64)),
       inner=st.lists(st.one_of(st.sampled_from(_EDGE_OFFSETS), _ints(64)), min_size=1, max_size=3))
def test_legacy_wrapper_offsets_at_the_int64_edges_decode_alike_and_never_crash(
        magic: int, codec_id: int, wrapper: int, inner: list[int]) -> None:
    """Legacy wrappers of any offsets (``Long.MIN_VALUE`` .. ``Long.MAX_VALUE``, under and inside the
    wrapper): the C loop and the reference give the same rows and the same typed error, as Kafka 3.8
    ``AbstractLegacyRecordBatch.DeepRecordsIterator`` resolves them (a v1 wrapper of offset 0 keeps the
    relative offsets, one below the last inner offset is invalid).  A v1 wrapper whose shift carried an
    inner offset above the last one past ``Long.MAX_VALUE`` (offset 3 over inner offsets
    ``2**63 - 2, 0``) raised ``OverflowError: Python int too large to convert to C long`` from both."""
    first = _legacy_offset_message(0, 1, 0, b"first")
    body = b"".join(_legacy_offset_message(o, magic, 0, b"v%d" % i) for i, o in enumerate(inner))
    buf = first + _legacy_offset_message(wrapper, magic, codec_id, compression.compress(codec_id, body))
    outcomes = [_outcome(buf, accelerated=False)]
    if columnar._speedups is not None:
        outcomes.append(_outcome(buf, accelerated=True))
    assert all(outcome == outcomes[0] for outcome in outcomes)
    rows, error = outcomes[0]
    assert all(-(2**63) <= row["offset"] < 2**63 for row in rows)
    *_, entry = codec.iter_batches(buf, path="seg.log")        # the object API: the same records or error
    try:
        offsets = [r.offset for r in entry.records()]
    except SegstoreError as err:
        assert error is not None and (err.path, err.pos) == ("seg.log", len(first)) == error[2:]
    else:
        assert error is None and [row["offset"] for row in rows] == [0, *offsets]


def test_a_v1_wrapper_shifting_an_inner_offset_past_int64_is_a_typed_error() -> None:
    """The example above: Java's ``absoluteBaseOffset + entry.offset()`` wraps; no int64 column holds the
    sum, so segstore names it where Kafka would give a wrapped, negative offset."""
    inner = _legacy_offset_message(2**63 - 2, 1, 0, b"a") + _legacy_offset_message(0, 1, 0, b"b")
    buf = _legacy_offset_message(3, 1, 1, compression.compress(1, inner))
    for accelerated in ([False, True] if columnar._speedups is not None else [False]):
        rows, error = _outcome(buf, accelerated=accelerated)
        assert rows == [] and error is not None and error[2:] == ("seg.log", 0)
        assert "within int64" in error[1]
