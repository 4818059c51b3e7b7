"""Damaged and hostile Kafka files: typed errors naming the file, never a crash, hang or silent pass
(issue 15, the Kafka examples).

Batches are laid out as Kafka 3.8's ``DefaultRecordBatch`` defines them (``batch.HEADER``:
61-byte header, CRC-32C from the attributes to the end), with the record region framed
as ``org.apache.kafka.common.compress`` frames it; the damage is then written over
them and the CRC recomputed where a case needs it to hold (a corruption that the CRC
cannot see).  Index entries are ``OffsetIndex.java``'s 8-byte entries.  Commands run in
a fresh process under a 2 GiB address-space limit and a time limit, as a user's would.
"""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import pytest
import zstandard
from conftest import FIXTURES, ROOT, copy_writable
from segstore_kafka import batch as codec
from segstore_kafka.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, RECORD_BATCH_OVERHEAD, encode_batch
from segstore_kafka.checkpoints import read_leader_epochs
from segstore_kafka.compression import MAX_DECOMPRESSED_BYTES, decompress

import segstore
from segstore import files
from segstore.errors import MAX_SHOWN, CorruptDataError, cut

UNCOMPRESSED = FIXTURES / "kafka" / "uncompressed" / "topic-0"
SEG0 = "00000000000000000000"
ADDRESS_SPACE = 2 << 30
COMMANDS = [["dump", "--json"], ["verify"], ["info"], ["query", "--offset", "0", "--count", "1000"]]
_LENGTH = struct.Struct(">i")
_COUNT_OFFSET = RECORD_BATCH_OVERHEAD - 4
_CRC = struct.Struct(">I")


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI in a fresh process with a 2 GiB address space; a signal shows as a negative rc."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    return subprocess.run([sys.executable, "-m", "segstore.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=_limits, check=False)


def _library_read(path: Path) -> subprocess.CompletedProcess:
    code = ("import segstore, sys\n"
            "try:\n"
            f"    with segstore.open({str(path)!r}) as s: n = sum(1 for _ in s.scan())\n"
            "except segstore.SegstoreError as e: print('typed', e); sys.exit(1)\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          preexec_fn=_limits, check=False)


def _rebatch(batch: bytes, region: bytes, *, record_count: int | None = None) -> bytes:
    """``batch`` with its record region replaced, length and (unless told) count kept, CRC recomputed:
    damage the CRC cannot see."""
    head = bytearray(batch[:RECORD_BATCH_OVERHEAD])
    _LENGTH.pack_into(head, 8, RECORD_BATCH_OVERHEAD - codec.LOG_OVERHEAD + len(region))
    if record_count is not None:
        _LENGTH.pack_into(head, _COUNT_OFFSET, record_count)
    _CRC.pack_into(head, CRC_OFFSET, crc32c.crc32c(bytes(head[ATTRIBUTES_OFFSET:]) + region))
    return bytes(head) + region


def _partition_with(tmp_path: Path, make_bad) -> tuple[Path, Path, int]:
    """A copy of the fixture partition with one more batch appended to its last segment:
    ``make_bad(base_offset)`` returns its bytes.  Returns (partition, log, batch position)."""
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    with segstore.open(part) as store:
        end = store.offset_range("topic", 0)[1]
    log = sorted(part.glob("*.log"))[-1]
    position = log.stat().st_size
    with log.open("ab") as f:
        f.write(make_bad(end))
    return part, log, position


def _assert_typed(proc: subprocess.CompletedProcess, path: Path, *needles: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in proc.stderr + proc.stdout


# -- no size from a file is trusted -------------------------------------------------------

def _snappy_lying_length(base: int) -> bytes:
    """A snappy batch (raw snappy block, as old clients sent) whose length varint says 0xffffffff."""
    good = encode_batch([(b"k", b"v" * 50, 5, [])], base_offset=base, compression="snappy")
    return _rebatch(good, b"\xff\xff\xff\xff\x0f" + b"\x00" * 40)


@pytest.mark.parametrize("command", [*COMMANDS, ["recover"]], ids=lambda c: c[0])
def test_a_snappy_length_of_0xffffffff_is_a_typed_error_not_an_abort(tmp_path: Path, command: list) -> None:
    """``memory allocation of 4294967295 bytes failed`` used to abort dump, convert and reads
    (the codec allocated the declared length) while verify said clean."""
    part, log, position = _partition_with(tmp_path, _snappy_lying_length)
    proc = _run(command[0], str(part), *command[1:])
    if command[0] == "info":     # decodes no records: the batch is whole, its CRC holds
        assert proc.returncode == 0, proc.stderr
        return
    # recover keeps the batch (its CRC holds: Kafka's LogSegment.recover checks no more) and, since
    # verify still finds it, exits 1 naming it (issue 15: exit 0 only when clean afterwards)
    # query: from offset 0, 1000 records run into the bad batch
    _assert_typed(proc, log, f":{position + RECORD_BATCH_OVERHEAD}:", "at most")


def test_a_snappy_lying_length_fails_a_library_read_and_a_conversion_with_a_typed_error(
        tmp_path: Path) -> None:
    part, log, _ = _partition_with(tmp_path, _snappy_lying_length)
    proc = _library_read(part)
    assert (proc.returncode, proc.stdout.startswith("typed")) == (1, True), proc.stderr
    proc = _run("convert", str(part), str(tmp_path / "out"), "--to", "rocketmq")
    _assert_typed(proc, log)


def _multi_member(member: bytes, total: int) -> bytes:
    n = -(-total // (64 << 20))
    return member * n


def _gzip_bomb(base: int) -> bytes:
    """2.2 GiB of zeros as gzip members of 64 MiB each (GZIPInputStream reads concatenated
    members): about 2.3 MB of batch."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = deflater.compress(bytes(64 << 20)) + deflater.flush()
    good = encode_batch([(None, b"v", 5, [])], base_offset=base, compression="gzip")
    return _rebatch(good, _multi_member(member, int(2.2 * (1 << 30))))


def _zstd_bomb(base: int) -> bytes:
    """2.2 GiB of zeros as zstd frames of 64 MiB, no content size (as zstd-jni's stream writes)."""
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(bytes(64 << 20))
    good = encode_batch([(None, b"v", 5, [])], base_offset=base, compression="zstd")
    return _rebatch(good, _multi_member(frame, int(2.2 * (1 << 30))))


@pytest.mark.parametrize("bomb", [_gzip_bomb, _zstd_bomb], ids=["gzip", "zstd"])
def test_a_batch_inflating_to_2_gib_is_a_typed_error_not_memory_error(tmp_path: Path, bomb) -> None:
    part, log, position = _partition_with(tmp_path, bomb)
    for command in (["dump", "--json"], ["verify"]):
        proc = _run(command[0], str(part), *command[1:], timeout=120)
        _assert_typed(proc, log, f":{position + RECORD_BATCH_OVERHEAD}:",
                      f"inflating to at most {MAX_DECOMPRESSED_BYTES} bytes")
        assert "MemoryError" not in proc.stderr


@pytest.mark.parametrize("codec_name", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_stops_at_the_limit_for_every_codec(codec_name: str) -> None:
    data = os.urandom(1000) + bytes(300_000)
    stream = codec.compress(codec_name, data)
    assert decompress(codec_name, stream, limit=len(data)) == data
    with pytest.raises(CorruptDataError) as info:
        decompress(codec_name, stream, path="x.log", pos=61, limit=len(data) - 1)
    assert (info.value.path, info.value.pos) == ("x.log", 61)
    assert f"inflating to at most {len(data) - 1} bytes" in info.value.message


def test_the_c_record_decoder_takes_no_count_from_the_file_on_trust() -> None:
    """A record count of 2**31 - 1 over a few bytes must not size a list by it."""
    good = encode_batch([(b"k", b"v", 5, [])], base_offset=0)
    batch = codec.read_batch_header(_rebatch(good, good[RECORD_BATCH_OVERHEAD:], record_count=2**31 - 1), 0)
    with pytest.raises(CorruptDataError) as info:
        batch.records()
    assert "runs past them" in info.value.message


# -- index entries ------------------------------------------------------------------------

def _index_with_position(tmp_path: Path, position: int) -> tuple[Path, Path]:
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    index = part / f"{SEG0}.index"
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, position)        # slot 0: (relative offset, position)
    index.write_bytes(bytes(data))
    return part, index


@pytest.mark.parametrize("command", [*COMMANDS, ["recover"]], ids=lambda c: c[0])
def test_an_index_position_of_minus_2_is_never_a_struct_error(tmp_path: Path, command: list) -> None:
    part, index = _index_with_position(tmp_path, -2)
    proc = _run(command[0], str(part), *command[1:])
    assert "Traceback" not in proc.stderr and "struct.error" not in proc.stderr
    if command[0] == "verify":
        _assert_typed(proc, index, f"{index}:4:", "expected a log position >= 0 in slot 0, found -2")
    else:        # readers go on without the index (the log is the truth); recover rebuilds it
        assert proc.returncode == 0, proc.stderr
    if command[0] == "recover":
        assert _run("verify", str(part)).returncode == 0


def test_an_index_position_of_minus_2_still_serves_reads_in_process(tmp_path: Path) -> None:
    part, _ = _index_with_position(tmp_path, -2)
    with segstore.open(part) as store, segstore.open(UNCOMPRESSED) as original:
        assert [r.value for r in store.read("topic", 0, 40, 5)] == [r.value for r in original.read("topic", 0,
                                                                                                    40, 5)]


# -- files that are not files -------------------------------------------------------------

@pytest.mark.parametrize("command", [["verify"], ["dump", "--json"], ["info"]], ids=lambda c: c[0])
def test_a_fifo_in_place_of_a_log_is_refused_at_once(tmp_path: Path, command: list) -> None:
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    log = part / f"{SEG0}.log"
    log.unlink()
    os.mkfifo(log)
    proc = _run(command[0], str(part), *command[1:], timeout=30)   # used to block forever
    _assert_typed(proc, log, "expected a regular file, found a FIFO")


def test_no_module_opens_a_non_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for call in (lambda: files.read_bytes(fifo), lambda: files.MappedFile(fifo),
                 lambda: files.AppendFile(fifo), lambda: files.read_text(tmp_path)):
        with pytest.raises(CorruptDataError) as info:
            call()
        assert "expected a regular file" in info.value.message


def test_a_directory_in_place_of_an_index_is_a_typed_error(tmp_path: Path) -> None:
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    index = part / f"{SEG0}.timeindex"
    index.unlink()
    index.mkdir()
    proc = _run("verify", str(part))
    _assert_typed(proc, index, "expected a regular file, found a directory")


# -- messages stay readable ---------------------------------------------------------------

def test_values_in_error_messages_are_cut(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n" + "7" * 1_000_000 + "\n")
    with pytest.raises(CorruptDataError) as info:
        read_leader_epochs(str(path))
    assert len(str(info.value)) < len(str(path)) + MAX_SHOWN + 100
    assert "more characters" in str(info.value)


def test_cut_shows_short_values_whole_and_says_what_it_left_out() -> None:
    assert cut("abc") == "'abc'"
    assert cut(b"\x00" * 3) == repr(b"\x00" * 3)
    assert cut("x" * 500, 10) == "'xxxxxxxxxx'... (490 more characters)"
    assert cut(b"y" * 500, 10) == "b'yyyyyyyyyy'... (490 more bytes)"
    assert cut(list(range(1000)), 20).endswith("more characters)")


# -- verify sees every problem once ----------------------------------------------------------

def test_verify_decodes_records_under_a_crc_that_holds(tmp_path: Path) -> None:
    """One record count too many, CRC recomputed: the CRC holds, the records do not decode."""
    def bad(base: int) -> bytes:
        good = encode_batch([(b"k", b"v", 5, []), (b"l", b"w", 6, [])], base_offset=base)
        return _rebatch(good, good[RECORD_BATCH_OVERHEAD:], record_count=3)

    part, log, position = _partition_with(tmp_path, bad)
    with segstore.open(part) as store:
        problems = store.verify()
    # record 2 of 3 would start where the batch ends
    assert [(p.path, p.pos) for p in problems] == [(str(log), log.stat().st_size)]
    assert position < log.stat().st_size and "record 2 of 3 runs past them" in problems[0].message


@pytest.mark.parametrize("first", ["index", "timeindex"])
def test_verify_reports_both_corrupt_indexes_of_a_segment(tmp_path: Path, first: str) -> None:
    """A segment whose ``.index`` and ``.timeindex`` are both torn mid-entry: verify named the first file
    opened (the ``.index``) and read the segment without indexes, so the ``.timeindex`` went unchecked
    and unnamed until a second run.  Each is an independent problem (Kafka 3.8.0
    ``OffsetIndex.sanityCheck`` and ``TimeIndex.sanityCheck``: "Index file ... is corrupt, found N
    bytes which is neither positive nor a multiple of" the entry size): both are named, and the log is
    still read."""
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    index, times = part / f"{SEG0}.index", part / f"{SEG0}.timeindex"
    damaged = [index, times] if first == "index" else [times]
    for path in damaged:
        path.write_bytes(path.read_bytes() + b"\x01\x02\x03")
    with segstore.open(part) as store:
        problems = store.verify()
        assert len(list(store.read("topic", 0))) == 300
    assert [p.path for p in problems] == [str(p) for p in damaged]
    assert "whole number of 12-byte entries" in problems[-1].message


def test_verify_reports_a_corrupt_index_and_a_later_torn_segment_each_once(tmp_path: Path) -> None:
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    index = part / f"{SEG0}.index"
    index.write_bytes(index.read_bytes() + b"\x01\x02\x03")
    logs = sorted(part.glob("*.log"))
    torn = logs[2]
    data = torn.read_bytes()
    torn.write_bytes(data[:-5])
    with segstore.open(part) as store:
        problems = store.verify()
    assert [p.path for p in problems] == [str(index), str(torn)]
    assert "whole number of 8-byte entries" in problems[0].message
    assert problems[1].pos < len(data) - 5


def test_verify_after_a_crc_error_reports_no_false_index_lines_and_goes_on(tmp_path: Path) -> None:
    part = copy_writable(UNCOMPRESSED, tmp_path / "topic-0")
    log = part / f"{SEG0}.log"
    batches = list(codec.iter_batches(log.read_bytes(), path=str(log)))
    first, later = batches[1], batches[-1]
    data = bytearray(log.read_bytes())
    data[first.position + 80] ^= 0x01      # inside the records: CRC error
    data[later.position + 80] ^= 0x01      # an independent one further on
    log.write_bytes(bytes(data))
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(log), first.position + CRC_OFFSET),
                                                   (str(log), later.position + CRC_OFFSET)]
    assert not any("no batch" in p.message for p in problems)


def test_header_struct_is_kafka_38_default_record_batch() -> None:
    """``DefaultRecordBatch``: RECORDS_COUNT_OFFSET = 57, RECORD_BATCH_OVERHEAD = 61, CRC at 17."""
    assert (HEADER.size, _COUNT_OFFSET, CRC_OFFSET, ATTRIBUTES_OFFSET) == (61, 57, 17, 21)


def test_dump_index_dumps_the_log_past_an_unreadable_index_and_then_fails(tmp_path: Path) -> None:
    part, index = _index_with_position(tmp_path, -2)
    proc = _run("dump", str(part), "--index")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{index}:4: expected a log position >= 0 in slot 0, found -2")
    assert proc.stdout.count("| offset:") == 300          # every record was dumped first
