"""Bodies a producer compressed, read as consumers read them (``segstore_rocketmq.bodycodec``).

RocketMQ 4.9.7: the producer compresses a body over ``compressMsgBodyOverHowmuch`` and sets SYSFLAG
0x1 and the type in bits 8-10 (``DefaultMQProducerImpl.tryToCompressMessage``,
``MessageSysFlag``); a consumer inflates it in ``MessageDecoder.decode(deCompressBody=true)`` with
``ZlibCompressor``/``Lz4Compressor``/``ZstdCompressor.decompress`` (type 0 and 3 zlib, 1 LZ4 frame,
2 zstd frame; ``CompressionType.findByValue``).  The store messages below were also decoded by the
real 4.9.7 ``MessageDecoder.decode(buffer, true, true, true)`` (the storage oracle's classes,
2026-11-29): it gave each message the body these tests expect, and kept the stored SYSFLAG.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib

import lz4.frame
import numpy as np
import pyarrow as pa
import pytest
import zstandard
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import bodycodec

import segstore
from segstore.errors import CorruptDataError

ZLIB, ZLIB_OLD, LZ4, ZSTD = 0x301, 0x1, 0x101, 0x201     # as producers set them (ZLIB_OLD: before types)


def _compress(kind: int, body: bytes, level: int = 5) -> bytes:
    if kind in (ZLIB, ZLIB_OLD):
        return zlib.compress(body, level)
    if kind == LZ4:
        return lz4.frame.compress(body)
    return zstandard.ZstdCompressor(level=level).compress(body)


KINDS = st.sampled_from([ZLIB, ZLIB_OLD, LZ4, ZSTD])
#: SYSFLAG bits a compressed message may carry besides its compression: transaction, IPv6 hosts
OTHER_BITS = st.sampled_from([0, 0x8, 0x10, 0x20, 0x30])


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=20_000), KINDS, OTHER_BITS, st.integers(1, 9))
def test_a_compressed_body_inflates_to_what_the_producer_sent(body, kind, other, level):
    assert bodycodec.decompress(_compress(kind, body, level), kind | other) == body


@given(st.binary(max_size=300), st.sampled_from([0, 0x4, 0x10, 0x300, 0x200]))
def test_a_body_without_the_compressed_flag_is_read_as_stored(body, sys_flag):
    """Type bits without bit 0 say nothing: the body is not compressed."""
    assert bodycodec.compression_of(sys_flag) is None
    assert bodycodec.decompress(body, sys_flag) == body


@pytest.mark.parametrize("kind", [ZLIB, LZ4, ZSTD])
def test_an_empty_compressed_body_reads_as_empty(kind):
    """Each Compressor.decompress reads into a buffer as long as the body: an empty one gives nothing."""
    assert bodycodec.decompress(b"", kind) == b""


@pytest.mark.parametrize("type_bits", [4, 5, 6, 7])
def test_a_compression_type_no_broker_knows_is_refused(type_bits):
    sys_flag = 0x1 | type_bits << 8
    with pytest.raises(CorruptDataError, match="compression type of 0-3"):
        bodycodec.decompress(zlib.compress(b"body"), sys_flag)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=4000), KINDS, st.data())
def test_a_damaged_or_cut_body_is_a_typed_error(body, kind, data):
    """Cut short, or with a byte changed, a compressed body fails with CorruptDataError, never another
    exception (zlib: or inflates to the same bytes)."""
    packed = bytearray(_compress(kind, body))
    if data.draw(st.booleans()):
        packed = packed[:data.draw(st.integers(1, len(packed) - 1))]    # (cut to nothing: empty, above)
    else:
        at = data.draw(st.integers(0, len(packed) - 1))
        packed[at] ^= data.draw(st.integers(1, 255))
    try:
        got = bodycodec.decompress(bytes(packed), kind)
    except CorruptDataError as err:
        assert "body" in str(err)
    else:
        # zlib's Adler-32 covers the data; LZ4 and zstd frames written without a content checksum
        # (the libraries' default, as Java's streams) may inflate a changed byte to other data
        if kind in (ZLIB, ZLIB_OLD):
            assert got == body


@pytest.mark.parametrize("kind", [ZLIB, LZ4, ZSTD])
def test_a_body_inflating_past_the_limit_is_refused(kind):
    bomb = _compress(kind, bytes(1 << 20))
    assert bodycodec.decompress(bomb, kind, limit=1 << 20) == bytes(1 << 20)
    with pytest.raises(CorruptDataError, match="at most"):
        bodycodec.decompress(bomb, kind, limit=(1 << 20) - 1)


def test_inflated_values_past_the_batch_limit_are_cut_into_batches():
    """A batch whose inflated values would pass max_bytes is several batches of binary values."""
    bodies = [bytes([i]) * 3000 for i in range(10)]
    packed = [zlib.compress(b) for b in bodies]
    offsets = np.cumsum([0, *map(len, packed)]).astype(np.int32)
    values = pa.Array.from_buffers(pa.binary(), 10,
                                   [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(packed))])
    batch = pa.RecordBatch.from_arrays([values], names=["value"])
    flags = np.full(10, ZLIB, np.int32)
    flags[3] = 0                        # stored as is: already its own bytes
    packed_3 = packed[3]
    pieces = list(bodycodec.consumer_batches(batch, flags, np.arange(10, dtype=np.int64) * 100,
                                             lambda pos: ("log", pos), max_bytes=7000))
    # rows 0-1 (6,000 bytes), 2-4 (3,000 + row 3's stored bytes + 3,000), 5-6, 7-8, 9
    assert [p.num_rows for p in pieces] == [2, 3, 2, 2, 1]
    assert all(p.schema.field("value").type == pa.binary() for p in pieces)
    got = [v for p in pieces for v in p.column("value").to_pylist()]
    assert got == [*bodies[:3], packed_3, *bodies[4:]]


# -- through the store ------------------------------------------------------------------


BODIES = [b"hello " * 2000, b"plain", b"x" * 5000, b"y" * 7000, b"z" * 6000, b""]
FLAGS = [ZLIB, 0, LZ4, ZSTD, ZLIB_OLD, ZLIB]


@pytest.fixture
def compressed_store(tmp_path):
    """Messages as a producer stores them: three compression types, the type-less zlib of older
    producers, an empty compressed body and a plain one, in two queues."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        for n, (body, flag) in enumerate(zip(BODIES, FLAGS, strict=True)):
            stored = _compress(flag, body) if flag and body else body
            store.append({"topic": "T", "queue_id": n % 2, "body": stored, "sys_flag": flag})
    return path


def _values(batches, column="value"):
    return [v for b in batches for v in b.column(column).to_pylist()]


def test_scan_arrow_reads_bodies_as_consumers_with_decompress_on_every_path(compressed_store):
    with segstore.open(compressed_store) as store:
        stored = _values(store.scan_arrow(["value"]))
        assert stored[1] == b"plain" and stored[0] == zlib.compress(BODIES[0], 5)
        assert _values(store.scan_arrow(["value"], decompress=True)) == BODIES
        assert _values(store.scan_arrow(["value"], decompress=True, threads=2)) == BODIES
        queues = [("T", q, 0, 3) for q in (0, 1)]
        assert _values(store.scan_arrow(["value"], queues=queues, decompress=True)) == BODIES
        assert _values(store.scan_arrow(["value"], topic="T", partition=1, decompress=True)) == BODIES[1::2]
        # each row says what its value is: the compressed flag cleared where the body was inflated
        flags = _values(store.scan_arrow(["sysFlag", "value"], decompress=True), "sysFlag")
        assert flags == [f & ~1 for f in FLAGS]
        assert _values(store.scan_arrow(["sysFlag"]), "sysFlag") == FLAGS


def test_a_copy_of_consumer_batches_is_a_store_of_the_same_bodies(compressed_store, tmp_path):
    """scan_arrow(decompress=True) piped into append_arrow: each message written uncompressed with a
    flag that says so; consumers read the same bodies from both stores."""
    copy = tmp_path / "copy"
    with segstore.open(compressed_store) as source:
        with segstore.open(copy, format="rocketmq", mode="a") as target:
            for batch in source.scan_arrow(decompress=True):
                target.append_arrow(batch)
    with segstore.open(copy) as store:
        assert store.verify() == []
        assert _values(store.scan_arrow(["value"])) == BODIES
        assert _values(store.scan_arrow(["value"], decompress=True)) == BODIES


def test_a_body_that_does_not_inflate_names_its_file_and_message(compressed_store, tmp_path):
    path = tmp_path / "bad"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"plain", "sys_flag": 0})
        at = store.append({"topic": "T", "queue_id": 0, "body": b"not zlib at all", "sys_flag": ZLIB})
    with segstore.open(path) as store:
        assert _values(store.scan_arrow(["value"]))[1] == b"not zlib at all"     # stored: readable
        with pytest.raises(CorruptDataError) as caught:
            _values(store.scan_arrow(["value"], decompress=True))
        err = caught.value
        assert err.path == str(path / "commitlog" / f"{0:020d}") and err.pos == at.position
        assert "expected a zlib body" in str(err)


# -- dump and read ----------------------------------------------------------------------


def _dumped(store, json_lines: bool, **kwargs) -> bytes:
    dump = store.dump_json if json_lines else store.dump_text
    return b"".join(bytes(block) for block in dump(**kwargs))


@pytest.mark.parametrize("json_lines", [True, False], ids=["json", "text"])
def test_dump_gives_bodies_as_consumers_read_them_with_decompress(compressed_store, monkeypatch, json_lines):
    """Every path of dump (C one thread, C threads, the Python reference) gives the same bytes: as
    stored, or with ``decompress`` each message's line as its consumer's message would have it."""
    from segstore_rocketmq import columnar
    from segstore_rocketmq.store import message_line

    with segstore.open(compressed_store) as store:
        stored = [m for m in store.scan()]
        consumed = [dataclasses.replace(m, body=body, sys_flag=m.sys_flag & ~1)
                    for m, body in zip(stored, BODIES, strict=True)]
        if json_lines:
            expected = [json.dumps(store.to_json(m), ensure_ascii=False) for m in consumed]
            plain = [json.dumps(store.to_json(m), ensure_ascii=False) for m in stored]
        else:
            expected, plain = [message_line(m) for m in consumed], [message_line(m) for m in stored]
        for threads in (1, 2):
            got = _dumped(store, json_lines, threads=threads, decompress=True).decode().splitlines()
            assert got == expected
            assert _dumped(store, json_lines, threads=threads).decode().splitlines() == plain
        monkeypatch.setattr(columnar, "_speedups", None)
        assert _dumped(store, json_lines, decompress=True).decode().splitlines() == expected


def test_read_gives_bodies_as_consumers_read_them_with_decompress(compressed_store):
    with segstore.open(compressed_store) as store:
        assert [m.body for m in store.read("T", 0, decompress=True)] == BODIES[0::2]
        assert [m.sys_flag for m in store.read("T", 0, decompress=True)] == [f & ~1 for f in FLAGS[0::2]]
        assert next(m.body for m in store.read("T", 0)) == zlib.compress(BODIES[0], 5)


def test_the_dump_command_line_flag(compressed_store, tmp_path, capsys):
    from segstore.cli import main

    assert main(["dump", str(compressed_store), "--json", "--decompress-bodies"]) == 0
    bodies = [base64.b64decode(json.loads(line)["body"]) for line in capsys.readouterr().out.splitlines()]
    assert bodies == BODIES
    assert main(["dump", str(compressed_store), "--tag", "none", "--decompress-bodies"]) == 1
    capsys.readouterr()
    kafka = str(FIXTURES / "kafka" / "txn" / "topic-0")
    assert main(["dump", kafka, "--decompress-bodies"]) == 2
    assert "no compressed bodies" in capsys.readouterr().err
    log = str(compressed_store / "commitlog" / f"{0:020d}")
    assert main(["dump", log, "--decompress-bodies"]) == 2


def test_the_query_command_line_flag(tmp_path, capsys):
    """query by key, by offset, by msgId and by tag gives consumers' bodies with --decompress-bodies."""
    from segstore.cli import main

    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append({"topic": "T", "queue_id": 0, "body": zlib.compress(BODIES[0]), "sys_flag": ZLIB,
                      "keys": ["order-1"], "tags": "new"})
    with segstore.open(path) as store:
        msg_id = store.to_json(next(store.read("T", 0)))["msg_id"]

    def body(argv: list[str]) -> bytes:
        assert main(["query", str(path), *argv, "--json"]) == 0
        return base64.b64decode(json.loads(capsys.readouterr().out)["body"])

    for argv in (["--topic", "T", "--key", "order-1"], ["--topic", "T", "--queue", "0", "--offset", "0"],
                 ["--msg-id", msg_id], ["--topic", "T", "--queue", "0", "--offset", "0", "--tag", "new"]):
        assert body([*argv, "--decompress-bodies"]) == BODIES[0], argv
        assert body(argv) == zlib.compress(BODIES[0]), argv
    kafka = str(FIXTURES / "kafka" / "txn" / "topic-0")
    assert main(["query", kafka, "--offset", "0", "--decompress-bodies"]) == 2
    assert "no compressed bodies" in capsys.readouterr().err
