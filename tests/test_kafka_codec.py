"""Unit, property and corruption tests of the Kafka record codec (varints, batches, codecs, legacy)."""

from __future__ import annotations

import array
import collections
import contextlib
import random
import struct
import threading

import cramjam
import crc32c
import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from segstore_kafka import batch as codec
from segstore_kafka import compression, legacy
from segstore_kafka.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

from segstore.errors import CorruptDataError, InvalidMessageError, SegstoreError, TruncatedDataError

# ---------------------------------------------------------------------------------
# varints

# (value, zigzag 7-bit-group encoding), worked out by hand from ByteUtils' definition.
VARINT_VECTORS = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (300, "d804"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
]
VARLONG_VECTORS = [*VARINT_VECTORS, (2**31, "8080808010"), (2**63 - 1, "feffffffffffffffff01"),
                   (-(2**63), "ffffffffffffffffff01")]


@pytest.mark.parametrize(("value", "hexed"), VARINT_VECTORS)
def test_varint_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert encode_varint(value) == raw
    assert decode_varint(raw) == (value, len(raw))
    assert size_of_varint(value) == len(raw)


@pytest.mark.parametrize(("value", "hexed"), VARLONG_VECTORS)
def test_varlong_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert encode_varlong(value) == raw
    assert decode_varlong(b"\xaa" + raw + b"\xbb", 1) == (value, len(raw) + 1)
    assert size_of_varlong(value) == len(raw)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    raw = encode_varlong(value)
    assert decode_varlong(raw) == (value, len(raw)) and size_of_varlong(value) == len(raw)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert decode_varint(raw) == (value, len(raw)) and size_of_varint(value) == len(raw)


def test_varint_errors() -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(2**31)
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(-(2**63) - 1)
    with pytest.raises(ValueError, match="at most 5 bytes"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(ValueError, match="int32"):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(IndexError):
        decode_varlong(b"\x80\x80")


# ---------------------------------------------------------------------------------
# checksums and codecs


def test_crc32c_known_vector() -> None:
    assert crc32c.crc32c(b"123456789") == 0xE3069283


# The C CRC-32C runs three blocks at once and joins them (blocks of 8192 and 256 bytes):
# lengths around each boundary, then random ones across several rounds.
CRC_BOUNDARY_LENGTHS = [0, 1, 7, 8, 9, 767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1,
                        3 * 8192 + 3 * 256 + 7, 2 * 3 * 8192 + 5]


@pytest.mark.parametrize("length", CRC_BOUNDARY_LENGTHS)
def test_c_crc32c_equals_the_reference_at_block_boundaries(length: int) -> None:
    c = _accelerator()
    data = random.Random(length).randbytes(length)
    assert c.crc32c(data) == crc32c.crc32c(data)
    assert c.crc32c(data, 0x1234_5678) == crc32c.crc32c(data, 0x1234_5678)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=80_000), st.integers(0, 2**32 - 1))
def test_c_crc32c_equals_the_reference(data: bytes, start: int) -> None:
    assert _accelerator().crc32c(data, start) == crc32c.crc32c(data, start)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300),
                          st.sampled_from(["none", "legacy", "flip", "short", "magic", "back"])),
                max_size=6),
       st.integers(0, 2**32 - 1), st.integers(0, 70))
def test_c_valid_v2_end_equals_the_reference(entries: list[tuple[int, str]], seed: int, cut: int) -> None:
    """``valid_v2_end`` skips whole v2 batches whose CRC holds and stops at anything else: a legacy entry,
    a flipped byte, a length below the header or past the buffer, another magic, and with ``rising`` a
    batch whose last offset is not above the last one's (``back``: the base offset, which no CRC covers,
    moved back; or near Long.MAX_VALUE, a last offset wrapping negative); C and the Python reference
    agree on where, from any start (a batch boundary or not)."""
    rnd = random.Random(seed)
    parts = []
    for i, (size, damage) in enumerate(entries):
        if damage == "legacy":
            parts.append(_legacy_set(1, 0, 1 + size % 3, i))
            continue
        base = i if damage != "back" else rnd.choice([i - 2, i - 1, 2**63 - 1, -5])
        one = bytearray(codec.encode_batch([(None, rnd.randbytes(size), 1)], base_offset=max(base, 0)))
        struct.pack_into(">q", one, 0, base)
        if damage == "flip":
            one[rnd.randrange(len(one))] ^= 1 << rnd.randrange(8)
        elif damage == "short":
            struct.pack_into(">i", one, 8, rnd.choice([-1, 0, 48]))
        elif damage == "magic":
            one[codec.MAGIC_OFFSET] = rnd.choice([0, 1, 3])
        parts.append(bytes(one))
    data = b"".join(parts)
    data = data[:len(data) - cut] if cut < len(data) else data
    for start in (0, rnd.randrange(len(data) + 1), len(parts[0]) if parts else 0):
        for rising in (False, True):
            assert (_accelerator().valid_v2_end(data, start, rising)
                    == codec._valid_v2_end_py(data, start, rising))
    # the reference itself: it ends after the intact batches that lie whole in the buffer, at the first
    # damaged one (a flipped byte may leave a batch valid: the offset and leader epoch are not covered)
    expected = 0
    for part, (_, damage) in zip(parts, entries, strict=True):
        if damage not in ("none", "back") or expected + len(part) > len(data):
            break
        expected += len(part)
    if not any(damage == "flip" for _, damage in entries[:len(parts)]):
        assert codec._valid_v2_end_py(data, 0) == expected


#: v2 header fields a writer may set to anything the CRC then covers: (struct format, offset in the batch)
_CRC_COVERED = {"attributes": (">h", 21), "last_offset_delta": (">i", 23), "base_timestamp": (">q", 27),
                "max_timestamp": (">q", 35), "producer_id": (">q", 43), "producer_epoch": (">h", 51),
                "base_sequence": (">i", 53), "record_count": (">i", 57)}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200),
                          st.sampled_from(["none", "field", "length", "flip", "magic", "legacy"]),
                          st.sampled_from(sorted(_CRC_COVERED)), st.integers(-2**63, 2**63 - 1)),
                max_size=6),
       st.integers(0, 2**32 - 1), st.integers(0, 70))
def test_iter_batches_refuses_nothing_valid_v2_end_skips(entries: list[tuple[int, str, str, int]], seed: int,
                                                         cut: int) -> None:
    """What ``LogSegment.first_torn_batch`` fast-forwards past in C (``valid_v2_end``) is what its Python
    walk (``iter_batches``, CRC checked: Kafka 3.8.0 ``FileLogInputStream.nextBatch`` framing and
    ``DefaultRecordBatch.ensureValid``) takes whole: batches whose header fields hold anything under a CRC
    written over them (a codec id of 5 to 7, a negative record count or delta, any timestamps or producer),
    after batches whose length, CRC or magic fail or which are legacy; the walk over the skipped bytes
    raises nothing and ends where ``valid_v2_end`` stopped."""
    rnd = random.Random(seed)
    parts = []
    for i, (size, damage, name, value) in enumerate(entries):
        if damage == "legacy":
            parts.append(_legacy_set(1, 0, 1 + size % 3, i))
            continue
        one = bytearray(codec.encode_batch([(None, rnd.randbytes(size), 1)], base_offset=i))
        if damage == "field":
            fmt, at = _CRC_COVERED[name]
            bits = struct.calcsize(fmt) * 8
            struct.pack_into(fmt, one, at, (value + 2**(bits - 1)) % 2**bits - 2**(bits - 1))
            struct.pack_into(">I", one, codec.CRC_OFFSET, crc32c.crc32c(bytes(one[codec.ATTRIBUTES_OFFSET:])))
        elif damage == "length":
            struct.pack_into(">i", one, 8, value % 2**31 if value % 3 else -(value % 2**31))
        elif damage == "flip":
            one[rnd.randrange(len(one))] ^= 1 << rnd.randrange(8)
        elif damage == "magic":
            one[codec.MAGIC_OFFSET] = rnd.choice([0xFF, 0, 1, 3])
        parts.append(bytes(one))
    data = b"".join(parts)
    data = data[:len(data) - cut] if cut < len(data) else data
    end = codec.valid_v2_end(data, 0)
    assert end == codec._valid_v2_end_py(data, 0)
    walked = sum(batch.size for batch in codec.iter_batches(memoryview(data)[:end], check_crc=True))
    assert walked == end


def test_xxh32_matches_liblz4_header_checksums() -> None:
    for block_size in (lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB):
        for store_size in (False, True):
            frame = lz4.frame.compress(b"x" * 100, block_size=block_size, store_size=store_size)
            descriptor_end = 6 + (8 if store_size else 0)
            assert (compression._xxh32(frame[4:descriptor_end]) >> 8) & 0xFF == frame[descriptor_end]


@pytest.mark.parametrize("name", compression.COMPRESSION_NAMES)
@pytest.mark.parametrize("size", [0, 1, 1000, 32 * 1024, 32 * 1024 + 1, 200_000])
def test_codec_round_trip(name: str, size: int) -> None:
    data = random.Random(size).randbytes(size // 2) + b"abc" * (size // 6)
    data = data[:size]
    assert compression.decompress(name, compression.compress(name, data)) == data


# Values a producer sends: empty, binary, repetitive, and past the codecs' block sizes (xerial 32 KiB, LZ4
# 64 KiB, zstd 128 KiB): a random piece repeated, then random bytes.
codec_payloads = st.builds(lambda piece, times, tail: piece * times + tail, st.binary(max_size=3000),
                           st.integers(0, 120), st.binary(max_size=3000))


@settings(max_examples=60, deadline=None)
@given(data=codec_payloads, name=st.sampled_from(compression.COMPRESSION_NAMES[1:]))
def test_codec_round_trip_and_kafka_pythons_decoders_read_it(data: bytes, name: str) -> None:
    """Every codec's output decodes to the input here and in kafka-python's ``kafka.codec`` (gzip,
    xerial-aware snappy, the LZ4 frame, zstd), as a consumer's client reads a batch."""
    import kafka.codec

    out = compression.compress(name, data)
    assert compression.decompress(name, out) == data
    theirs = {"gzip": kafka.codec.gzip_decode, "snappy": kafka.codec.snappy_decode,
              "lz4": kafka.codec.lz4_decode, "zstd": kafka.codec.zstd_decode}[name]
    if data or name != "snappy":   # kafka-python takes a header-only xerial stream (len 16) for raw snappy;
        assert theirs(out) == data  # snappy-java reads it as empty, and Kafka writes no record-less batch


def test_codecs_are_thread_safe() -> None:
    errors: list[int] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(100):
            data = rng.randbytes(rng.randrange(1, 5000)) * 3
            for name in compression.COMPRESSION_NAMES:
                if compression.decompress(name, compression.compress(name, data)) != data:
                    errors.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_codec_framing_is_kafkas() -> None:
    gz = compression.compress("gzip", b"hello")
    assert gz[:10] == bytes.fromhex("1f8b08000000000000ff")
    sn = compression.compress("snappy", b"s" * 70_000)
    assert sn[:16] == bytes.fromhex("82534e41505059000000000100000001")
    raw_sizes, pos = [], 16
    while pos < len(sn):
        (length,) = struct.unpack_from(">i", sn, pos)
        raw_sizes.append(len(cramjam.snappy.decompress_raw(sn[pos + 4:pos + 4 + length])))
        pos += 4 + length
    assert raw_sizes == [32 * 1024, 32 * 1024, 70_000 - 64 * 1024]
    assert compression.compress("lz4", b"z")[:7] == bytes.fromhex("04224d18604082")
    zs = compression.compress("zstd", b"q" * 10)
    assert zs[:5] == bytes.fromhex("28b52ffd00")  # no content size, no checksum, not single segment


def test_lz4_dependent_blocks_refused() -> None:
    linked = bytearray(lz4.frame.compress(b"a" * 1000, store_size=False))
    linked[4] &= ~0x20  # FLG without the block-independence bit, header checksum redone
    linked[6] = (compression._xxh32(bytes(linked[4:6])) >> 8) & 0xFF
    with pytest.raises(CorruptDataError, match="independent blocks"):
        compression.decompress("lz4", bytes(linked), path="x.log", pos=7)


def test_corrupt_codec_streams_name_path_and_position() -> None:
    for name in compression.COMPRESSION_NAMES[1:]:
        with pytest.raises(CorruptDataError) as info:
            compression.decompress(name, b"\x00garbage-garbage-garbage", path="x.log", pos=99)
        assert (info.value.path, info.value.pos) == ("x.log", 99)


def test_unknown_codec() -> None:
    with pytest.raises(InvalidMessageError, match="expected a compression of"):
        codec.encode_batch([(b"k", b"v", 1)], base_offset=0, compression="brotli")


# ---------------------------------------------------------------------------------
# batch round trips

header_values = st.one_of(st.none(), st.binary(max_size=20))
records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(0, 2**41),
        st.lists(st.tuples(st.text(max_size=12), header_values), max_size=6),
    ),
    min_size=1, max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, name=st.sampled_from(compression.COMPRESSION_NAMES),
       base_offset=st.integers(0, 2**40), transactional=st.booleans(),
       producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)))
def test_batch_round_trip_and_kafka_python_reads_it(records, name, base_offset, transactional,
                                                    producer) -> None:
    producer_id, producer_epoch, base_sequence = producer
    out = codec.encode_batch(records, base_offset=base_offset, compression=name, producer_id=producer_id,
                             producer_epoch=producer_epoch, base_sequence=base_sequence,
                             is_transactional=transactional, partition_leader_epoch=5)
    (batch,) = codec.iter_batches(out, path="mem.log", base_pos=4096)
    assert (batch.base_offset, batch.record_count, batch.compression, batch.is_transactional) == (
        base_offset, len(records), name, transactional)
    assert (batch.position, batch.size, batch.partition_leader_epoch) == (4096, len(out), 5)
    assert batch.base_timestamp == records[0][2] and batch.max_timestamp == max(r[2] for r in records)
    decoded = batch.records()
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (k, v, t, list(h)) for k, v, t, h in records]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    if base_sequence >= 0:
        assert decoded[-1].sequence == codec.increment_sequence(base_sequence, len(records) - 1)
    theirs = DefaultRecordBatch(out)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs] == [
        (r.offset, r.key, r.value, r.headers) for r in decoded]


def test_control_batches_round_trip() -> None:
    for kind in ("COMMIT", "ABORT"):
        out = codec.encode_control_batch(kind, base_offset=42, producer_id=7, producer_epoch=3,
                                         coordinator_epoch=11, timestamp=1_700_000_000_000,
                                         partition_leader_epoch=2)
        (batch,) = codec.iter_batches(out)
        assert batch.is_control and batch.is_transactional and batch.control_type() == kind
        (record,) = batch.records()
        assert codec.parse_control_record(record.key, record.value) == (kind, 11)
        assert DefaultRecordBatch(out).is_control_batch
    plain = next(codec.iter_batches(codec.encode_batch([(b"k", b"v", 1)], base_offset=0)))
    assert plain.control_type() is None
    assert codec.parse_control_record(b"\x00\x00\x00\x02", None) == ("LEADER_CHANGE", None)
    assert codec.parse_control_record(b"\x00\x00\x00\x63", None) == ("UNKNOWN", None)
    for key, value in [(b"\x00\x00", None), (b"\xff\xff\x00\x01", b"\x00" * 6),
                       (b"\x00\x00\x00\x01", b"\x00"), (b"\x00\x00\x00\x00", b"\xff\xff\x00\x00\x00\x01")]:
        with pytest.raises(ValueError):
            codec.parse_control_record(key, value)
    broken = codec.encode_batch([(b"\x00", b"", 1)], base_offset=0, is_control=True, is_transactional=True)
    with pytest.raises(CorruptDataError, match="control record key"):
        next(codec.iter_batches(broken, path="c.log")).control_type()


def test_log_append_time_batch() -> None:
    out = codec.encode_batch([(b"a", b"1", 10), (b"b", b"2", 5)], base_offset=3,
                             timestamp_type="LogAppendTime", log_append_time=99)
    (batch,) = codec.iter_batches(out)
    assert batch.timestamp_type == "LogAppendTime" and batch.base_timestamp == 10
    assert [r.timestamp for r in batch.records()] == [99, 99]
    with pytest.raises(InvalidMessageError, match="log_append_time"):
        codec.encode_batch([(b"a", b"1", 10)], base_offset=0, timestamp_type="LogAppendTime")


def test_records_and_messages_as_input_and_offset_deltas() -> None:
    from segstore.records import Message

    inputs = [Message("t", value=b"v", key="k", timestamp=5, headers=[("h", b"x")]),
              codec.Record(0, 6, None, "str value", [])]
    out = codec.encode_batch(inputs, base_offset=100, offset_deltas=[0, 7])
    (batch,) = codec.iter_batches(out)
    assert batch.last_offset == 107
    assert [(r.offset, r.key, r.value, r.headers) for r in batch.records()] == [
        (100, b"k", b"v", [("h", b"x")]), (107, None, b"str value", [])]


@pytest.mark.parametrize("bad", [
    {"base_offset": -1}, {"producer_epoch": 2**15}, {"base_sequence": 2**31},
    {"partition_leader_epoch": 2**31},
])
def test_out_of_range_header_fields(bad: dict) -> None:
    kwargs = {"base_offset": 0, **bad}
    with pytest.raises(InvalidMessageError):
        codec.encode_batch([(b"k", b"v", 1)], **kwargs)


def test_invalid_record_fields() -> None:
    with pytest.raises(InvalidMessageError):
        codec.encode_batch([(b"k", 12345, 1)], base_offset=0)
    with pytest.raises(InvalidMessageError):
        codec.encode_batch([(b"k", b"v", 1, [(b"bytes-key", b"v")])], base_offset=0)
    with pytest.raises(InvalidMessageError):
        codec.encode_batch([(b"k",)], base_offset=0)


def test_sequence_wraps_like_kafka() -> None:
    assert codec.increment_sequence(2**31 - 2, 3) == 1
    out = codec.encode_batch([(None, b"x", 1)] * 4, base_offset=0, producer_id=1, producer_epoch=0,
                             base_sequence=2**31 - 2)
    (batch,) = codec.iter_batches(out)
    assert [r.sequence for r in batch.records()] == [2**31 - 2, 2**31 - 1, 0, 1]
    assert batch.last_sequence == 1


# ---------------------------------------------------------------------------------
# corruption: every problem is a typed error naming the file and the byte position


def _sample_log() -> bytes:
    return b"".join(
        codec.encode_batch([(b"key-%d" % i, b"value" * i, 1000 + i, [("h", b"v")])] * 3, base_offset=3 * i)
        for i in range(4))


def test_truncation_at_every_header_field_boundary() -> None:
    one = codec.encode_batch([(b"k", b"v", 1)], base_offset=0)
    data = _sample_log() + one
    start = len(data) - len(one)
    layout = codec.HEADER.format
    boundaries = sorted({struct.calcsize(layout[:i]) for i in range(1, len(layout) + 1)})
    for cut in [*boundaries[1:], len(one) - 1]:
        torn = data[:start + cut]
        with pytest.raises(TruncatedDataError) as info:
            list(codec.iter_batches(torn, path="00.log"))
        assert (info.value.path, info.value.pos) == ("00.log", start)
        assert codec.valid_prefix(torn, path="00.log")[0] == start
    assert codec.valid_prefix(data) == (len(data), None)


def test_every_single_bit_flip_after_the_length_is_caught() -> None:
    data = codec.encode_batch([(b"k", b"value", 1, [("h", None)]), (None, b"", 2)], base_offset=9,
                              compression="lz4")
    for index in range(codec.MAGIC_OFFSET, len(data)):
        for bit in (0, 3, 7):
            bad = bytearray(data)
            bad[index] ^= 1 << bit
            with pytest.raises(CorruptDataError) as info:   # a magic above 2 frames; its records raise
                [b.records() for b in codec.iter_batches(bytes(bad), path="p.log", base_pos=100)]
            assert info.value.path == "p.log" and info.value.pos in (100, 100 + codec.MAGIC_OFFSET,
                                                                     100 + codec.CRC_OFFSET)


def test_wrong_magic_and_bad_length() -> None:
    data = bytearray(codec.encode_batch([(b"k", b"v", 1)], base_offset=0))
    data[codec.MAGIC_OFFSET] = 7
    # FileLogInputStream.nextBatch frames a magic above 2 as v2 (what recovery keeps when its CRC holds);
    # its records are what no reader reads (ByteBufferLogInputStream.nextBatchSize)
    (batch,) = codec.iter_batches(bytes(data), path="m.log")
    assert (batch.magic, batch.last_offset) == (7, 0)
    with pytest.raises(CorruptDataError, match="magic 0, 1 or 2, found 7") as info:
        batch.records()
    assert info.value.pos == codec.MAGIC_OFFSET
    data[codec.MAGIC_OFFSET] = 0xF9
    with pytest.raises(CorruptDataError, match="magic 0, 1 or 2, found -7") as info:
        list(codec.iter_batches(bytes(data), path="m.log"))
    assert info.value.pos == codec.MAGIC_OFFSET
    short = bytearray(codec.encode_batch([(b"k", b"v", 1)], base_offset=0))
    struct.pack_into(">i", short, 8, 20)
    with pytest.raises(CorruptDataError, match="v2 batch length of at least 49, found 20"):
        codec.read_batch_header(bytes(short), 0, path="m.log")
    struct.pack_into(">i", short, 8, 3)
    with pytest.raises(CorruptDataError, match="at least 14, found 3"):
        codec.read_batch_header(bytes(short), 0, path="m.log")
    assert codec.LEGACY_MIN_MESSAGE_SIZE == legacy.MIN_MESSAGE_SIZE   # the legacy module loads on use


def _with_region(region: bytes, count: int, attributes: int = 0) -> bytes:
    """A v2 batch with a hand-made record region and a correct CRC (so only the records are wrong)."""
    header = bytearray(codec.HEADER.pack(0, codec.HEADER.size - codec.LOG_OVERHEAD + len(region), 0, 2, 0,
                                         attributes,
                                         max(count - 1, 0), 0, 0, -1, -1, -1, count))
    crc = crc32c.crc32c(bytes(header[codec.ATTRIBUTES_OFFSET:]) + region)
    struct.pack_into(">I", header, codec.CRC_OFFSET, crc)
    return bytes(header) + region


def _region(*records) -> bytes:
    return codec.encode_batch(list(records), base_offset=0)[codec.HEADER.size:]


VALID = _region((b"a", b"b", 0))          # 10 00 00 00 02 61 02 62 00: one 8-byte record body
WITH_HEADER = _region((b"a", b"b", 0, [("z", None)]))


@pytest.mark.parametrize(("region", "count", "match"), [
    (VALID, 2, "runs past"),
    (VALID + b"\xff", 1, "bytes after"),
    (b"\x0e" + VALID[1:], 1, "fields within its 7 bytes, found one running past them"),
    (b"\x12" + VALID[1:] + b"\x00", 1, "fields filling its 9 bytes, found 1 bytes after them"),
    (VALID[:-2], 1, "record 0 of 1 runs past them"),
    (VALID[:-1] + b"\x01", 1, "header count >= 0, found -1"),
], ids=["short-count", "trailing", "field-past-end", "body-too-long", "cut", "neg-headers"])
def test_malformed_records_raise_with_position(region: bytes, count: int, match: str) -> None:
    (batch,) = codec.iter_batches(_with_region(region, count), path="r.log", base_pos=50)
    with pytest.raises(CorruptDataError, match=match) as info:
        batch.records()
    assert info.value.path == "r.log" and info.value.pos >= 50 + codec.HEADER.size


@pytest.mark.parametrize("decode", ["c", "python"])
def test_a_header_key_that_is_not_utf8_reads_as_java_reads_it_keeping_its_bytes(decode: str) -> None:
    """Kafka 3.8 ``DefaultRecord.readHeaders`` keeps a header key's bytes and ``RecordHeader.key()`` reads
    them with ``Utils.utf8`` (``new String(bytes, UTF_8)``: U+FFFD, never an error), so the broker
    stores and serves such a record; it was a CorruptDataError here (``expected UTF-8 header keys``)."""
    if decode == "c" and codec._speedups is None:
        pytest.skip("segstore_kafka._speedups not built")
    decoder = codec._speedups.decode_records if decode == "c" else codec._decode_records_py
    # WITH_HEADER (16 00 00 00 02 61 02 62 02 02 7a 01) with the key "z" made a 5-byte key, the body 4 longer
    region = b"\x1e" + WITH_HEADER[1:9] + b"\x0aa\xff\xed\xa0\x80\x01"
    assert WITH_HEADER[9:] == b"\x02z\x01"
    (record,) = decoder(region, 1, 0, 0, None, -1)
    ((key, value),) = record.headers
    assert (key, value, key.raw) == ("a\ufffd\ufffd", None, b"a\xff\xed\xa0\x80")


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_damage_never_escapes_as_another_error(data) -> None:
    batch_bytes = codec.encode_batch([(b"k" * 3, b"v" * 20, 5, [("hk", b"hv")])] * 4, base_offset=0,
                                     compression=data.draw(st.sampled_from(compression.COMPRESSION_NAMES)))
    region = bytearray(batch_bytes[codec.HEADER.size:])
    for _ in range(data.draw(st.integers(1, 4))):
        region[data.draw(st.integers(0, len(region) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(region)))
    damaged = bytearray(batch_bytes[:codec.HEADER.size]) + region[:cut]
    struct.pack_into(">i", damaged, 8, len(damaged) - codec.LOG_OVERHEAD)
    try:
        for batch in codec.iter_batches(bytes(damaged), check_crc=False):
            batch.records()
    except SegstoreError as err:
        assert err.path == "<memory>" and err.pos is not None


# ---------------------------------------------------------------------------------
# legacy message formats v0 / v1, written by kafka-python's legacy builder


def _legacy_set(magic: int, codec_id: int, count: int, last_offset: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec_id, 1 << 20)
    for i in range(count):
        builder.append(i if magic == 1 or codec_id else last_offset - count + 1 + i,
                       1_600_000_000_000 + i if magic else None,
                       b"k%d" % i if i % 2 else None, b"v" * i)
    buf = bytearray(builder.build())
    if codec_id:  # the broker stamps a wrapper with its last inner offset
        struct.pack_into(">q", buf, 0, last_offset)
    return bytes(buf)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec_id", [0, 1, 2])
def test_legacy_message_sets_read_like_kafka_python(magic: int, codec_id: int) -> None:
    data = _legacy_set(magic, codec_id, 5, last_offset=104 if magic else 4)
    ours = [(b.magic, r.offset, r.timestamp, r.key, r.value)
            for b in codec.iter_batches(data) for r in b.records()]
    theirs, records = [], MemoryRecords(data)
    while records.has_next():
        for r in records.next_batch():
            theirs.append((magic, r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value))
    assert ours == theirs and len(ours) == 5
    batches = list(codec.iter_batches(data))
    assert batches[-1].last_offset == ours[-1][1] and batches[0].base_offset == ours[0][1]
    assert all(b.is_valid() for b in batches)
    assert codec.valid_prefix(data) == (len(data), None)


def test_legacy_v0_lz4_with_kafkas_old_header_checksum() -> None:
    inner = _legacy_set(0, 0, 3, last_offset=2)
    frame = bytearray(compression.compress("lz4", inner))
    frame[6] = (compression._xxh32(bytes(frame[:6])) >> 8) & 0xFF  # the v0 bug: the magic hashed too
    body = struct.pack(">bb", 0, 3) + struct.pack(">i", -1) + struct.pack(">i", len(frame)) + bytes(frame)
    entry = struct.pack(">qiI", 2, len(body) + 4, legacy.zlib.crc32(body)) + body
    (batch,) = codec.iter_batches(entry)
    assert [(r.offset, r.value) for r in batch.records()] == [(0, b""), (1, b"v"), (2, b"vv")]


def test_legacy_corruption() -> None:
    data = bytearray(_legacy_set(1, 0, 2, last_offset=1))
    data[-1] ^= 1
    with pytest.raises(CorruptDataError, match="CRC-32") as info:
        list(codec.iter_batches(bytes(data), path="old.log"))
    assert info.value.pos == len(_legacy_set(1, 0, 1, 0)) + codec.LOG_OVERHEAD
    with pytest.raises(TruncatedDataError):
        list(codec.iter_batches(bytes(data[:-3]), path="old.log"))


# ---------------------------------------------------------------------------------
# the C accelerator gives exactly what the pure-Python reference gives


def _accelerator():
    """The C codec batches use, or skip: not built, or switched off by ``SEGSTORE_PURE_PYTHON``."""
    if codec._speedups is None:
        pytest.skip("segstore_kafka._speedups not in use")
    return codec._speedups


def _outcome(function, *args):
    """The result, or the error type family and ValueError args, of ``function(*args)``."""
    try:
        return "ok", function(*args)
    except ValueError as err:
        return "ValueError", err.args
    except (TypeError, OverflowError, AttributeError) as err:
        return "TypeError", type(err).__name__ if not isinstance(err, AttributeError) else "AttributeError"


@settings(max_examples=150, deadline=None)
@given(records=records_strategy, deltas=st.booleans())
def test_c_encoder_matches_python(records, deltas) -> None:
    speedups = _accelerator()
    offset_deltas = [3 * i for i in range(len(records))] if deltas else None
    assert speedups.encode_records(records, offset_deltas) == codec._encode_records_py(records, offset_deltas)


@pytest.mark.parametrize("records", [
    [(b"k", 5, 1)], [(b"k", b"v", 2**63)], [(b"k", b"v", 1.5)], [(b"k", b"v", 1, [(b"key", b"v")])],
    [(b"k", b"v", 1, [("key",)])], [(b"k", b"v", 1, [("\ud800", b"v")])], [(b"k",)], [object()],
    [(b"k", b"v", 0), (b"k", b"v", -(2**63))], [(bytearray(b"k"), memoryview(b"v"), None, None)],
    [(array.array("b", [1, 2]), None, 1, collections.deque([("h", b"x")]))], [(b"k", b"v", 1, [("h", 7)])],
])
def test_c_encoder_rejects_what_python_rejects(records) -> None:
    speedups = _accelerator()
    ours = _outcome(speedups.encode_records, records, None)
    theirs = _outcome(codec._encode_records_py, records, None)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        assert ours == theirs
    with pytest.raises(InvalidMessageError) if ours[0] != "ok" else contextlib.nullcontext():
        codec.encode_batch(records, base_offset=0)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_c_decoder_matches_python_on_good_and_damaged_regions(data) -> None:
    speedups = _accelerator()
    records = data.draw(records_strategy)
    region = bytearray(codec._encode_records_py(records, None)[0])
    for _ in range(data.draw(st.integers(0, 3))):
        if region:
            region[data.draw(st.integers(0, len(region) - 1))] = data.draw(st.integers(0, 255))
    region = bytes(region[:data.draw(st.integers(0, len(region)))] if data.draw(st.booleans()) else region)
    count = len(records) + data.draw(st.sampled_from([0, 0, 0, -1, 1, 2**31 - 1]))
    args = (region, count, data.draw(st.sampled_from([0, 2**63 - 2])),
            data.draw(st.integers(-(2**63), 2**63 - 1)),
            data.draw(st.sampled_from([None, 77])), data.draw(st.sampled_from([-1, 0, 2**31 - 3])))
    assert _outcome(speedups.decode_records, *args) == _outcome(codec._decode_records_py, *args)


def _batch_outcome(take):
    """The records ``take()`` gives, or the error's type, message and position."""
    try:
        return "ok", take()
    except CorruptDataError as err:
        return "CorruptDataError", str(err), err.pos


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_iter_records_gives_what_records_gives_one_at_a_time(data) -> None:
    """``RecordBatch.iter_records`` (a resume's probe of each partition's first record) gives the
    records and errors :meth:`records` gives, over each codec and damaged record regions, and its
    first records without decoding the rest: a record past the first ones that does not decode
    stops it only when reached."""
    records = data.draw(records_strategy)
    compression = data.draw(st.sampled_from(["none", "gzip", "lz4", "zstd"]))
    raw = bytearray(codec.encode_batch(records, base_offset=data.draw(st.sampled_from([0, 1000])),
                                       compression=compression))
    if compression == "none" and len(raw) > codec.RECORD_BATCH_OVERHEAD:
        for _ in range(data.draw(st.integers(0, 2))):
            at = data.draw(st.integers(codec.RECORD_BATCH_OVERHEAD, len(raw) - 1))
            raw[at] = data.draw(st.integers(0, 255))
    (batch,) = codec.iter_batches(bytes(raw), check_crc=False)
    whole = _batch_outcome(batch.records)
    assert _batch_outcome(lambda: list(batch.iter_records())) == whole
    if whole[0] == "ok" and whole[1]:
        assert next(batch.iter_records()) == whole[1][0]


def test_iter_records_reaches_a_damaged_record_only_when_taken() -> None:
    raw = bytearray(codec.encode_batch([(b"k%d" % i, b"v" * 20, 0, []) for i in range(3)], base_offset=7))
    raw[-1] = 0x7F      # the last record's header count: far more headers than its bytes hold
    (batch,) = codec.iter_batches(bytes(raw), check_crc=False)
    with pytest.raises(CorruptDataError):
        batch.records()
    records = batch.iter_records()
    assert [next(records).offset, next(records).offset] == [7, 8]
    with pytest.raises(CorruptDataError):
        next(records)


def test_c_decoder_rejects_varints_like_python() -> None:
    speedups = _accelerator()
    for region in [b"\x80" * 5 + b"\x01", b"\x02\x00" + b"\xff" * 9 + b"\x03",
                   b"\x16\x00" + b"\xff" * 10 + b"\x00",
                   b"\x0e\x00\x00\x00\x8f\x8f\x8f\x8f\x8f\x01\x00\x00"]:
        args = (region, 1, 0, 0, None, -1)
        assert _outcome(speedups.decode_records, *args) == _outcome(codec._decode_records_py, *args)
        assert _outcome(speedups.decode_records, *args)[0] == "ValueError"


def test_the_accelerator_is_what_batches_use_when_built() -> None:
    speedups = _accelerator()
    assert codec._decode_records is speedups.decode_records
    assert codec._encode_records is speedups.encode_records


def test_legacy_v1_log_append_time_wrapper_stamps_every_inner_message() -> None:
    data = bytearray(_legacy_set(1, 1, 3, last_offset=12))
    attributes_at = legacy.CRC_COVERED_FROM + 1
    data[attributes_at] |= legacy.TIMESTAMP_TYPE_FLAG
    struct.pack_into(">q", data, legacy.MESSAGE_PREFIX.size, 1_650_000_000_000)  # the broker's append time
    struct.pack_into(">I", data, codec.LOG_OVERHEAD, legacy.compute_crc(data))
    (batch,) = codec.iter_batches(bytes(data))
    assert batch.timestamp_type == "LogAppendTime" and batch.max_timestamp == 1_650_000_000_000
    stamped = [(r.offset, r.timestamp) for r in batch.records()]
    assert stamped == [(offset, 1_650_000_000_000) for offset in (10, 11, 12)]


def test_unchecked_iteration_reports_validity_separately() -> None:
    data = bytearray(codec.encode_batch([(b"k", b"v", 1)], base_offset=0))
    data[-1] ^= 0x40
    (batch,) = codec.iter_batches(bytes(data), check_crc=False)
    assert not batch.is_valid() and batch.compute_crc() != batch.crc
    assert codec.valid_prefix(bytes(data))[0] == 0


def _legacy_message(offset: int, magic: int, attributes: int, value: bytes | None, timestamp: int = 0,
                    key: bytes | None = None) -> bytes:
    """One legacy log entry (LegacyRecord.write) with a correct CRC."""
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    return struct.pack(">qiI", offset, len(body) + 4, legacy.zlib.crc32(body)) + body


def _legacy_wrapper(offset: int, magic: int, codec_id: int, inner: bytes, timestamp: int = 0,
                    log_append_time: bool = False, raw: bytes | None = None) -> bytes:
    value = compression.compress(codec_id, inner) if raw is None else raw
    flags = codec_id | (legacy.TIMESTAMP_TYPE_FLAG if log_append_time else 0)
    return _legacy_message(offset, magic, flags, value, timestamp)


def _bad_inner_crc_set() -> bytes:
    inner = bytearray(b"".join(_legacy_message(i, 1, 0, b"v%d" % i, 100 + i) for i in range(3)))
    inner[legacy.MESSAGE_PREFIX.size + 2] ^= 1          # the first inner message's timestamp
    return bytes(inner)


@pytest.mark.parametrize("damage", ["inner CRC", "gzip stream", "codec id"])
def test_a_wrapper_whose_own_crc_holds_is_whole_its_inner_damage_is_its_records(damage: str) -> None:
    """Kafka 3.8 ``LogSegment.recover`` checks a legacy entry with ``batch.ensureValid()``, which
    ``AbstractLegacyRecordBatch`` answers with ``outerRecord().ensureValid()``: the wrapper's own size
    and CRC.  The inner set is decompressed only when the records are read (``DeepRecordsIterator``),
    and fails there.  The batches were cut at such a wrapper (recover lost the good entries after it)."""
    wrapper = {"inner CRC": _legacy_wrapper(3, 1, 1, _bad_inner_crc_set()),
               "gzip stream": _legacy_wrapper(3, 1, 1, b"", raw=b"\x1f\x8b\x08garbage"),
               "codec id": _legacy_message(3, 1, compression.ZSTD, b"abc")}[damage]
    first, after = _legacy_message(0, 1, 0, b"first", 5), _legacy_message(4, 1, 0, b"after", 5)
    data = first + wrapper + after
    assert codec.valid_prefix(data, path="old.log") == (len(data), None)
    batches = list(codec.iter_batches(data, path="old.log"))
    assert [b.position for b in batches] == [0, len(first), len(first) + len(wrapper)]
    assert batches[1].last_offset == 3 and batches[1].is_valid()
    with pytest.raises(CorruptDataError) as info:
        batches[1].records()
    assert (info.value.path, info.value.pos) == ("old.log", len(first))
    assert [r.value for r in batches[2].records()] == [b"after"]


def test_v1_wrapper_offsets_as_kafkas_deep_iterator_resolves_them() -> None:
    """``AbstractLegacyRecordBatch.DeepRecordsIterator`` (Kafka 3.8): a v1 wrapper of offset 0 (what
    some librdkafka versions produce) takes its inner relative offsets as they are; a wrapper offset
    below the last inner offset is an ``InvalidRecordException``.  Both gave negative offsets."""
    inner = b"".join(_legacy_message(i, 1, 0, b"v%d" % i, 100 + i) for i in range(3))
    (batch,) = codec.iter_batches(_legacy_wrapper(0, 1, 1, inner), path="old.log")
    assert [r.offset for r in batch.records()] == [0, 1, 2] and batch.base_offset == 0
    (batch,) = codec.iter_batches(_legacy_wrapper(1, 1, 1, inner), path="old.log")
    with pytest.raises(CorruptDataError, match=r"last inner offset 2 .*found wrapper offset 1") as info:
        batch.records()
    assert (info.value.path, info.value.pos) == ("old.log", 0)
    (batch,) = codec.iter_batches(_legacy_wrapper(9, 1, 1, inner), path="old.log")
    assert [r.offset for r in batch.records()] == [7, 8, 9]


@pytest.mark.parametrize("codec_id", [1, 2, 3])
def test_a_wrapper_of_no_inner_message_is_invalid_as_kafka_reads_it(codec_id: int) -> None:
    """``DeepRecordsIterator`` (Kafka 3.8): "Found invalid compressed record set with no inner records".
    It read as a batch of no records; the entry itself stays whole (its own CRC holds)."""
    data = _legacy_wrapper(5, 1, codec_id, b"") + _legacy_message(6, 1, 0, b"after")
    assert codec.valid_prefix(data, path="old.log") == (len(data), None)
    wrapper, after = codec.iter_batches(data, path="old.log")
    with pytest.raises(CorruptDataError, match="no inner message") as info:
        wrapper.records()
    assert (info.value.path, info.value.pos) == ("old.log", 0)
    assert [r.offset for r in after.records()] == [6]


def test_log_append_time_stamps_inner_v1_messages_only() -> None:
    """``DeepRecordsIterator`` (Kafka 3.8) hands the wrapper's timestamp and type to inner messages of
    magic 1 only, and ``LegacyRecord.timestamp()`` of a magic 0 message is -1 whatever its wrapper:
    a v1 LogAppendTime wrapper's v0 inner messages were stamped with its time."""
    inner = _legacy_message(0, 0, 0, b"old") + _legacy_message(1, 1, 0, b"new", 7)
    (batch,) = codec.iter_batches(_legacy_wrapper(11, 1, 1, inner, 1_650_000_000_000, log_append_time=True))
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(10, -1), (11, 1_650_000_000_000)]


@pytest.mark.parametrize("tail", [b"\x00" * 11, b"partial", "cut message"])
def test_an_inner_set_ending_inside_an_entry_ends_there_as_kafka_reads_it(tail) -> None:
    """``AbstractLegacyRecordBatch.DataLogInputStream.nextBatch`` (Kafka 3.8) returns null, ending the
    inner set, when the decompressed bytes end inside an entry's offset and size or inside the
    message its size gives: the whole messages before are read.  They were refused as corrupt."""
    inner = b"".join(_legacy_message(i, 1, 0, b"v%d" % i, 100 + i) for i in range(2))
    if tail == "cut message":
        tail = _legacy_message(2, 1, 0, b"v2", 102)[:-1]
    (batch,) = codec.iter_batches(_legacy_wrapper(1, 1, 2, inner + tail), path="old.log")
    assert [(r.offset, r.value) for r in batch.records()] == [(0, b"v0"), (1, b"v1")]
    short = struct.pack(">qi", 2, legacy.MIN_MESSAGE_SIZE - 1) + bytes(20)
    (batch,) = codec.iter_batches(_legacy_wrapper(1, 1, 2, inner + short), path="old.log")
    with pytest.raises(CorruptDataError, match="size of at least 14, found 13") as info:
        batch.records()     # "Record size is less than the minimum record overhead (14)"
    assert (info.value.path, info.value.pos) == ("old.log", 0)


def _legacy_raw(offset: int, magic: int, body_after_attributes: bytes, attributes: int = 0) -> bytes:
    """A legacy log entry of any body (after magic and attributes), with a correct CRC."""
    body = struct.pack(">bb", magic, attributes) + body_after_attributes
    return struct.pack(">qiI", offset, len(body) + 4, legacy.zlib.crc32(body)) + body


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_key_and_value_read_as_legacy_record_reads_them(magic: int) -> None:
    """Kafka 3.8 ``LegacyRecord.key()``/``value()`` read each through ``Utils.sizeDelimited``: any
    negative length is null, and bytes after the value are not looked at (the message's CRC covers
    them).  A length of -2 and 3 bytes after the value were refused as corrupt."""
    stamp = struct.pack(">q", 77) if magic else b""
    data = (_legacy_raw(0, magic, stamp + struct.pack(">i", -2) + struct.pack(">i", 2) + b"v0")
            + _legacy_raw(1, magic, stamp + struct.pack(">i", 1) + b"k" + struct.pack(">i", -7))
            + _legacy_raw(2, magic, stamp + struct.pack(">i", -1) + struct.pack(">i", 2) + b"v2" + b"xyz"))
    assert codec.valid_prefix(data, path="old.log") == (len(data), None)
    records = [r for b in codec.iter_batches(data, path="old.log") for r in b.records()]
    assert [(r.offset, r.key, r.value) for r in records] == [(0, None, b"v0"), (1, b"k", None),
                                                             (2, None, b"v2")]
    (wrapper,) = codec.iter_batches(_legacy_wrapper(2, magic, 1, data, 5), path="old.log")
    assert [(r.offset, r.key, r.value) for r in wrapper.records()] == [(0, None, b"v0"), (1, b"k", None),
                                                                       (2, None, b"v2")]


@pytest.mark.parametrize("body", ["v1 of size 14", "key past the end"])
def test_a_legacy_message_whose_crc_holds_is_whole_its_fields_are_its_records(body: str) -> None:
    """Kafka 3.8 ``FileLogInputStream.nextBatch`` takes a legacy entry of any size from 14
    (``RECORD_OVERHEAD_V0``, "stricter checking is done later") and ``LogSegment.recover`` checks it by
    ``LegacyRecord.ensureValid``: that size and the CRC.  Its key and value are read with its records.
    A v1 message of 14 bytes, or one whose key length runs past it, cut the log (recover lost what
    followed)."""
    raw = {"v1 of size 14": (1, struct.pack(">q", 5)),
           "key past the end": (0, struct.pack(">i", 100) + b"k" + struct.pack(">i", -1))}[body]
    bad = _legacy_raw(0, *raw)
    after = _legacy_message(1, 1, 0, b"after", 5)
    data = bad + after
    assert codec.valid_prefix(data, path="old.log") == (len(data), None)
    first, second = codec.iter_batches(data, path="old.log")
    assert (first.size, first.last_offset, first.is_valid()) == (len(bad), 0, True)
    with pytest.raises(CorruptDataError) as info:
        first.records()
    assert (info.value.path, info.value.pos) == ("old.log", 0)
    assert [r.value for r in second.records()] == [b"after"]


def test_lz4_reads_the_first_frame_only_as_kafkas_lz4_block_input_stream() -> None:
    """Kafka 3.8 ``Lz4BlockInputStream`` sets ``finished`` at the first frame's end mark and reads no
    further (``read()`` returns -1).  A second frame after it was decoded too: a v1 wrapper showed
    inner messages Kafka does not (their offsets shifted), a v2 batch was refused for bytes after its
    records."""
    inner = [_legacy_message(i, 1, 0, b"v%d" % i, 100 + i) for i in range(3)]
    frames = compression.compress("lz4", inner[0] + inner[1]) + compression.compress("lz4", inner[2])
    (wrapper,) = codec.iter_batches(_legacy_wrapper(11, 1, 3, b"", raw=frames), path="old.log")
    assert [(r.offset, r.value) for r in wrapper.records()] == [(10, b"v0"), (11, b"v1")]
    one = codec.encode_batch([(b"k", b"v", 1), (None, b"w", 2)], base_offset=0, compression="lz4")
    region = one[codec.HEADER.size:] + compression.compress("lz4", b"\x00" * 9)
    (batch,) = codec.iter_batches(_with_region(region, 2, attributes=compression.LZ4), path="n.log")
    assert [(r.offset, r.value) for r in batch.records()] == [(0, b"v"), (1, b"w")]


@pytest.mark.parametrize("tail", [b"\x00", b"\x00\x00\x07"])
def test_xerial_snappy_ends_where_fewer_than_four_bytes_are_left(tail: bytes) -> None:
    """snappy-java's ``SnappyInputStream.hasNextChunk`` (what Kafka 3.8's ``SnappyCompression`` reads
    through) ends the stream when fewer than 4 bytes are left for a block length.  Such a tail was
    refused as a cut stream."""
    records = [(b"k", b"v", 1), (None, b"w", 2)]
    region = codec.encode_batch(records, base_offset=0, compression="snappy")[codec.HEADER.size:] + tail
    (batch,) = codec.iter_batches(_with_region(region, 2, attributes=compression.SNAPPY), path="s.log")
    assert [(r.offset, r.value) for r in batch.records()] == [(0, b"v"), (1, b"w")]


@pytest.mark.parametrize("tail", [b"\x00" * 30, b"not a gzip member, padding", b"\x1f\x8b\x08"])
def test_gzip_ignores_what_follows_a_member_unless_a_member_header_does(tail: bytes) -> None:
    """Kafka 3.8 reads gzip through JDK's ``GZIPInputStream``, whose ``readTrailer`` reads another
    member only where the bytes after one begin with a header ``readHeader`` takes, and ignores them
    otherwise ("ignore any malformed, do nothing").  Zero padding or other bytes after the member were
    refused as a corrupt stream; a second member is still read."""
    records = [(b"k", b"v", 1), (None, b"w", 2)]
    region = codec.encode_batch(records, base_offset=0, compression="gzip")[codec.HEADER.size:] + tail
    (batch,) = codec.iter_batches(_with_region(region, 2, attributes=compression.GZIP), path="g.log")
    assert [(r.offset, r.value) for r in batch.records()] == [(0, b"v"), (1, b"w")]
    two = compression.compress("gzip", b"abc") + compression.compress("gzip", b"def") + tail
    assert compression.decompress("gzip", two) == b"abcdef"
    bad_member = compression.compress("gzip", b"abc") + compression.compress("gzip", b"def")[:12] + bytes(20)
    with pytest.raises(CorruptDataError):   # a header it takes, then a member that does not inflate
        compression.decompress("gzip", bad_member)


@pytest.mark.parametrize("magic_v0", [False, True])
def test_lz4_content_checksum_is_not_verified_as_kafka_does_not(magic_v0: bool) -> None:
    """Kafka 3.8 ``Lz4BlockInputStream.readBlock`` at the end mark: ``if (flg.isContentChecksumSet())
    in.getInt(); // TODO: verify this content checksum``.  A frame whose content checksum does not
    match (block checksums are verified) was refused by liblz4's check."""
    frame = bytearray(lz4.frame.compress(b"payload " * 50, content_checksum=True, store_size=magic_v0))
    frame[-1] ^= 0xFF
    assert compression.decompress("lz4", bytes(frame), legacy_lz4=magic_v0) == b"payload " * 50


def test_a_tail_of_17_bytes_is_torn_whatever_its_length_field_says() -> None:
    """Kafka 3.8 ``FileLogInputStream.nextBatch``: ``if (position >= end - HEADER_SIZE_UP_TO_MAGIC) return
    null``: 17 bytes left (no batch is that short) end the data, before the length is read.  segstore
    read the length and called a torn 17-byte tail holding a small one corrupt (``expected a batch length
    of at least 14, found 3``), not torn."""
    whole = codec.encode_batch([(b"k", b"v", 1)], base_offset=0)
    tail = struct.pack(">qi", 1, 3) + b"\x00" * 5
    assert len(tail) == codec.HEADER_UP_TO_MAGIC
    with pytest.raises(TruncatedDataError) as info:
        list(codec.iter_batches(whole + tail, path="t.log"))
    assert (info.value.path, info.value.pos) == ("t.log", len(whole))
    assert codec.valid_prefix(whole + tail)[0] == len(whole)
