"""The hot path of Kafka lookups: header-only batch hops agree with the codec's reader, on any log."""

from __future__ import annotations

import random
import struct

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from segstore_kafka import batch as codec
from segstore_kafka.segment import H_BASE_OFFSET, H_LAST_OFFSET_DELTA, H_MAX_TIMESTAMP, header_fields

from segstore.errors import CorruptDataError, TruncatedDataError

PATH = "/logs/topic-0/00000000000000000000.log"


def _v2_log(rng: random.Random, batches: int) -> bytes:
    out, offset = [], 0
    for _ in range(batches):
        n = rng.randrange(1, 6)
        records = [(b"k", rng.randbytes(rng.randrange(0, 300)), 1_700_000_000_000 + rng.randrange(1000))
                   for _ in range(n)]
        out.append(codec.encode_batch(records, base_offset=offset,
                                      compression=rng.choice(codec.COMPRESSION_NAMES)))
        offset += n
    return b"".join(out)


def _legacy_log(magic: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    for i in range(4):
        builder.append(i, 1_600_000_000_000 + i if magic else None, b"k%d" % i, b"v" * i)
    return bytes(builder.build())


def _walk(view: memoryview, reader) -> list:
    """Every batch from the start by ``reader``, or the error it stops with."""
    out, pos = [], 0
    try:
        while pos < len(view):
            fields, size = reader(view, pos)
            out.append((pos, fields))
            pos += size
    except (CorruptDataError, TruncatedDataError) as err:
        out.append((type(err), str(err)))
    return out


def _by_header_fields(view: memoryview, pos: int) -> tuple[tuple, int]:
    fields = header_fields(view, pos, PATH)
    return ((fields[H_BASE_OFFSET], fields[H_BASE_OFFSET] + fields[H_LAST_OFFSET_DELTA],
             fields[H_MAX_TIMESTAMP]), fields[1] + codec.LOG_OVERHEAD)


def _by_codec(view: memoryview, pos: int) -> tuple[tuple, int]:
    b = codec.read_batch_header(view, pos, path=PATH)
    return (b.base_offset, b.last_offset, b.max_timestamp), b.size


@pytest.mark.parametrize("seed", range(4))
def test_header_hops_equal_the_codec_on_every_cut_and_flip(seed: int) -> None:
    """Whole, torn (cut at every byte of the last batch) and bit-flipped logs: the same batches,
    or the same typed error at the same position, as ``batch.read_batch_header``."""
    rng = random.Random(seed)
    log = _v2_log(rng, 6) + (_legacy_log(seed % 2) if seed >= 2 else b"")
    variants = [log] + [log[:cut] for cut in range(len(log) - 80, len(log))]
    for _ in range(40):
        flipped = bytearray(log)
        pos = rng.randrange(len(log))
        flipped[pos] ^= 1 << rng.randrange(8)
        variants.append(bytes(flipped))
    for data in variants:
        view = memoryview(data)
        assert _walk(view, _by_header_fields) == _walk(view, _by_codec)


def test_header_hops_read_legacy_entries_through_the_codec() -> None:
    # a legacy set, then an entry whose length is below any message's
    log = _legacy_log(1) + struct.pack(">qi", 99, 3) + bytes(codec.HEADER_UP_TO_MAGIC)
    view = memoryview(log)
    hops = _walk(view, _by_header_fields)
    assert [fields for _, fields in hops[:-1]] == [(i, i, 1_600_000_000_000 + i) for i in range(4)]
    assert hops[-1][0] is CorruptDataError
    assert hops == _walk(view, _by_codec)
