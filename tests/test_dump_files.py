"""``segstore dump FILE...``: single Kafka and RocketMQ files, as ``kafka-dump-log --files`` dumps them.

Through the real CLI (``main()`` with captured output).  The expected values come from the
store's own reader (records, index pairs) or from the files' bytes, never from the dumper.
Output shapes follow Kafka 3.8.0 ``core/src/main/scala/kafka/tools/DumpLogSegments.scala``
(``printBatchLevel``, ``dumpIndex``, ``dumpTimeIndex``, ``dumpTxnIndex``, ``dumpProducerIdSnapshot``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct

import numpy as np
import pytest
from conftest import FIXTURES, copy_writable
from hypothesis import given
from hypothesis import strategies as st
from segstore_kafka import batch as codec
from segstore_kafka import snapshot
from segstore_kafka.offsetindex import OFFSET_ENTRY

import segstore
from segstore import cli
from segstore.errors import CorruptDataError

KAFKA_PART = FIXTURES / "kafka" / "uncompressed" / "topic-0"
TXN_PART = next((FIXTURES / "kafka" / "txn").iterdir())
ROCKETMQ = FIXTURES / "rocketmq" / "basic" / "store"


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


def _records_of(log_path) -> list[codec.Record]:
    data = log_path.read_bytes()
    return [r for b in codec.iter_batches(data) for r in b.records()]


# -- Kafka .log ---------------------------------------------------------------------------------


def test_a_log_file_dump_has_every_batch_and_record_of_the_segment(capsys):
    log = KAFKA_PART / "00000000000000000073.log"
    code, out, err = run(capsys, "dump", log, "--deep-iteration")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 73"]
    batches = list(codec.iter_batches(log.read_bytes()))
    batch_lines = [line for line in lines if line.startswith("baseOffset: ")]
    assert [int(line.split()[1]) for line in batch_lines] == [b.base_offset for b in batches]
    assert [int(line.split(" position: ")[1].split()[0]) for line in batch_lines] == [
        b.position for b in batches
    ]
    # RecordBatch.deleteHorizonMs() is an OptionalLong, which the tool concatenates (3.8 printBatchLevel)
    assert all("isvalid: true" in line and "deleteHorizonMs: OptionalLong.empty " in line
               for line in batch_lines)
    record_lines = [line for line in lines if line.startswith("| offset: ")]
    assert [int(line.split()[2]) for line in record_lines] == [r.offset for r in _records_of(log)]


def test_kafka_dump_logs_files_flag_is_taken_as_it_is(capsys):
    """A Kafka operator types ``kafka-dump-log --files A.log,A.index``: ``segstore dump --files ...`` was a
    usage error (exit 2, "unrecognized arguments").  It dumps the comma-separated files, the same as
    naming them as PATHs; a directory after ``--files`` and no path at all are usage errors."""
    log, index = KAFKA_PART / "00000000000000000073.log", KAFKA_PART / "00000000000000000073.index"
    code, out, err = run(capsys, "dump", "--files", f"{log},{index}", "--deep-iteration")
    assert code == 0, err
    assert (code, out) == run(capsys, "dump", log, index, "--deep-iteration")[:2]
    assert [line for line in out.splitlines() if line.startswith("Dumping ")] == [
        f"Dumping {log}", f"Dumping {index}"]
    code, out, err = run(capsys, "dump", "--files", KAFKA_PART)
    assert code == 2 and "--files: expected single files" in err
    code, out, err = run(capsys, "dump")
    assert code == 2 and "found none" in err


def test_a_file_named_with_a_trailing_slash_is_dumped_as_kafka_dump_log_takes_it(capsys, tmp_path):
    """kafka-dump-log 3.8.0 (``DumpLogSegments``: ``new File(arg)``) takes ``00000000000000000073.log/`` as
    the file, java.io.File dropping the trailing separator; segstore refused it as no such file (the OS
    opens no file by that name: ENOTDIR).  It is dumped as that file (PATH or --files, a RocketMQ
    commitlog file too), printed under the name without the slash, as the tool's ``Dumping`` line
    prints File's text; a name of no file is still refused, exit 2, and a directory keeps its slash."""
    log = KAFKA_PART / "00000000000000000073.log"
    expected = run(capsys, "dump", log, "--deep-iteration")[:2]
    assert expected[0] == 0 and expected[1].startswith(f"Dumping {log}\n")
    assert run(capsys, "dump", f"{log}/", "--deep-iteration")[:2] == expected
    assert run(capsys, "dump", f"{log}//", "--deep-iteration")[:2] == expected
    assert run(capsys, "dump", "--files", f"{log}/", "--deep-iteration")[:2] == expected
    commitlog = ROCKETMQ / "commitlog" / "00000000000000000000"
    code, out, err = run(capsys, "dump", f"{commitlog}/", "--json")
    assert (code, out) == run(capsys, "dump", commitlog, "--json")[:2] and code == 0, err
    code, out, err = run(capsys, "dump", f"{KAFKA_PART}/missing.log/")
    assert (code, out) == (2, "") and "missing.log/: expected an existing store directory, found no such " \
        "file or directory" in err
    code, _, err = run(capsys, "dump", "--files", f"{KAFKA_PART}/")
    assert code == 2 and "--files: expected single files" in err


def test_print_data_log_with_decoders(capsys):
    log = KAFKA_PART / "00000000000000000073.log"
    records = _records_of(log)
    for decoder, encode in [
        ("hex", bytes.hex),
        ("base64", lambda b: base64.b64encode(b).decode()),
        ("utf-8", lambda b: b.decode("utf-8", "replace")),
    ]:
        code, out, _ = run(capsys, "dump", log, "--value-decoder", decoder, "--key-decoder", "hex", "--json")
        assert code == 0
        rows = [json.loads(line) for line in out.splitlines()]
        got = [(row["key"], row["payload"]) for row in rows if row.get("kind") == "record"]
        assert got == [
            (None if r.key is None else r.key.hex(), None if r.value is None else encode(r.value))
            for r in records
        ]


def test_json_decoder_reformats_json_and_flags_what_is_not(tmp_path, capsys):
    part = tmp_path / "t-0"
    part.mkdir()
    data = codec.encode_batch([(b"k", b'{ "a" : [1, 2] }', 1000), (b"k", b"not json", 1001)], base_offset=0)
    (part / "00000000000000000000.log").write_bytes(data)
    code, out, _ = run(capsys, "dump", part / "00000000000000000000.log", "--value-decoder", "json")
    assert code == 0
    assert 'payload: {"a":[1,2]}' in out
    assert "payload: !invalid JSON" in out and "not json" in out


@pytest.mark.parametrize("package", ["org.apache.kafka.tools.api", "kafka.serializer"])
def test_decoder_classes_of_kafka_dump_log_run_as_their_decoders(tmp_path, capsys, package):
    """kafka-dump-log's --key-decoder-class / --value-decoder-class (3.8.0 DumpLogSegments
    .convertDeprecatedDecoderClass; tools-api IntegerDecoder / LongDecoder: ByteBuffer.wrap(bytes)
    .getInt() / getLong(), the first 4 / 8 bytes big-endian and signed, any more ignored)."""
    part = tmp_path / "t-0"
    part.mkdir()
    records = [(struct.pack(">i", -7) + b"xx", struct.pack(">q", 2**40 + 5), 1000),
               (b"\x01", "héllo".encode(), 1001)]
    log = part / "00000000000000000000.log"
    log.write_bytes(codec.encode_batch(records, base_offset=0))
    code, out, err = run(capsys, "dump", log, "--key-decoder-class", f"{package}.IntegerDecoder",
                         "--value-decoder-class", f"{package}.LongDecoder")
    assert code == 0, err
    assert " key: -7 payload: 1099511627781" in out
    assert " key: !invalid integer (1 bytes, expected at least 4): 01 payload: !invalid long (6 bytes, " \
           "expected at least 8): 68c3a96c6c6f" in out
    code, out, err = run(capsys, "dump", log, "--value-decoder-class", f"{package}.StringDecoder")
    assert code == 0, err
    assert " key: \x01 payload: héllo" in out      # keys StringDecoder by default, as the tool


@pytest.mark.parametrize("name", ["org.apache.kafka.tools.api.DefaultDecoder", "com.example.MyDecoder"])
def test_a_decoder_class_segstore_cannot_run_is_a_usage_error(capsys, name):
    log = KAFKA_PART / "00000000000000000073.log"
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "dump", log, "--value-decoder-class", name)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "--value-decoder-class: expected one of " in err and f"found {name!r}" in err


def test_max_bytes_reads_only_whole_batches_within_the_limit(capsys):
    log = KAFKA_PART / "00000000000000000073.log"
    batches = list(codec.iter_batches(log.read_bytes()))
    limit = batches[0].size + batches[1].size + batches[2].size - 1  # the third batch does not fit
    code, out, err = run(capsys, "dump", log, "--max-bytes", limit)
    assert code == 0, err
    shown = [line for line in out.splitlines() if line.startswith("baseOffset: ")]
    assert [int(line.split()[1]) for line in shown] == [b.base_offset for b in batches[:2]]
    assert "invalid bytes" not in out + err


def test_a_torn_log_reports_the_invalid_bytes_and_exits_1(tmp_path, capsys):
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    log = part / "00000000000000000289.log"
    data = log.read_bytes()
    log.write_bytes(data[:-7])
    code, _, err = run(capsys, "dump", log)
    assert code == 1
    last = list(codec.iter_batches(data))[-1]
    assert f"Found {last.size - 7} invalid bytes at the end of {log.name}" in err
    assert "Traceback" not in err


def _compacted_consumer_offsets(tmp_path):
    """A healthy ``__consumer_offsets-0`` whose first segment the log cleaner compacted: group ``g``
    committed partitions 0-3 of ``orders`` (offsets 0-3), then 0 and 2 again (4, 5), then 0 (6); the
    cleaner keeps the last commit of each partition: offsets 1, 3, 5, 6."""
    from segstore_kafka.partition import KafkaConfig, Partition

    part_dir = tmp_path / "__consumer_offsets-0"

    def key(partition: int) -> bytes:   # OffsetCommitKey v1: group, topic, partition
        return (struct.pack(">h", 1) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 6) + b"orders"
                + struct.pack(">i", partition))

    def value(offset: int) -> bytes:    # OffsetCommitValue v3: offset, leader epoch, metadata, commit time
        return struct.pack(">hqih", 3, offset, 0, 0) + struct.pack(">q", 1_700_000_000_000 + offset)

    part = Partition(str(part_dir), KafkaConfig.from_mapping({"cleanup.policy": "compact"}), writable=True,
                     clock=lambda: 1_700_000_000_000)
    for n, commits in enumerate([[0, 1, 2, 3], [0, 2], [0]]):
        part.append_records([(key(p), value(10 * n + p), 1_700_000_000_000 + n, []) for p in commits])
    part.log.active.on_become_inactive()
    part.log.roll(part.next_offset).make_appendable()
    part.append_records([(key(0), value(99), 1_700_000_000_100, [])])
    part.close()
    assert cli.main(["compact", str(part_dir), "--config", "cleanup.policy=compact"], io.StringIO()) == 0
    return part_dir / "00000000000000000000.log"


@pytest.mark.parametrize("flags", [["--offsets-decoder"], ["--deep-iteration"],
                                   ["--deep-iteration", "--json"]])
def test_a_compacted_segment_has_non_consecutive_offsets_and_that_is_no_damage(tmp_path, capsys, flags):
    """kafka-dump-log (Kafka 3.8.0 ``DumpLogSegments.dumpLog``) collects each pair of record offsets that do
    not follow one another and, once every file is dumped, prints on stderr ``Non-consecutive offsets in
    ABSOLUTE_PATH`` and ``  A is followed by B`` per pair, newest first (the pairs are prepended to a
    Scala list), then returns normally: exit status 0.  A compacted log has such gaps by design."""
    log = _compacted_consumer_offsets(tmp_path)
    assert [r.offset for r in _records_of(log)] == [1, 3, 5, 6]
    assert run(capsys, "verify", log.parent, "-q")[:2] == (0, "")
    code, out, err = run(capsys, "dump", log, *flags)
    assert code == 0, err
    if "--json" in flags:
        objects = [json.loads(line) for line in out.splitlines()]
        assert [o["offset"] for o in objects if o["kind"] == "record"] == [1, 3, 5, 6]
        note = [o for o in objects if o["kind"] == "non-consecutive"]
        assert note == [{"file": str(log), "format": "kafka", "file_kind": "log", "kind": "non-consecutive",
                         "pairs": [[1, 3], [3, 5]]}]
        assert err == ""
        return
    shown = [line.split()[2] for line in out.splitlines() if line.startswith("| offset: ")]
    assert shown == ["1", "3", "5", "6"]
    if flags == ["--offsets-decoder"]:
        assert 'key: {"type":"1","data":{"group":"g","topic":"orders","partition":1}}' in out
    assert err == f"Non-consecutive offsets in {log.resolve()}\n  3 is followed by 5\n  1 is followed by 3\n"


# -- Kafka indexes ------------------------------------------------------------------------------


def test_index_and_timeindex_dumps_list_the_entries(capsys):
    store = segstore.open(KAFKA_PART)
    seg = next(s for s in store.partition.segments if s.base == 73)
    pairs = [(p.offset, p.position) for p in seg.offset_index.pairs()]
    times = [(t.timestamp, t.offset) for t in seg.time_index.pairs()]
    store.close()
    code, out, err = run(
        capsys,
        "dump",
        KAFKA_PART / "00000000000000000073.index",
        KAFKA_PART / "00000000000000000073.timeindex",
    )
    assert code == 0, err
    got_pairs = [
        tuple(int(x) for x in line.split()[1::2]) for line in out.splitlines() if line.startswith("offset: ")
    ]
    got_times = [
        tuple(int(x) for x in line.split()[1::2])
        for line in out.splitlines()
        if line.startswith("timestamp: ")
    ]
    assert got_pairs == pairs and got_times == times and pairs


def test_an_index_entry_that_disagrees_with_the_log_is_a_mismatch(tmp_path, capsys):
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    index = part / "00000000000000000073.index"
    slots = np.frombuffer(bytearray(index.read_bytes()), dtype=OFFSET_ENTRY)
    slots["position"][1] = slots["position"][0]  # entry 1 now points at entry 0's batch
    index.write_bytes(slots.tobytes())
    code, out, err = run(capsys, "dump", index)
    assert code == 1
    first_offset = 73 + int(slots["relative_offset"][0])
    second_offset = 73 + int(slots["relative_offset"][1])
    assert f"Index offset: {second_offset}, log offset: {first_offset}" in err
    code, out, err = run(capsys, "dump", index, "--verify-index-only")
    assert code == 1 and "offset: " not in out


def test_a_negative_index_position_is_a_mismatch_not_a_batch_read_from_the_end(tmp_path, capsys):
    # Kafka 3.8 DumpLogSegments.dumpIndex reads each entry's batch through FileRecords.slice, which
    # refuses a negative position; struct would read it from the end of the .log instead (a batch
    # that is really there, so no mismatch), and a far negative one raised struct.error.
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    index = part / "00000000000000000073.index"
    log_size = (part / "00000000000000000073.log").stat().st_size
    slots = np.frombuffer(bytearray(index.read_bytes()), dtype=OFFSET_ENTRY)
    offset = 73 + int(slots["relative_offset"][1])
    slots["position"][1] = int(slots["position"][1]) - log_size  # the same batch, counted from the end
    slots["position"][2] = -(2**31)
    index.write_bytes(slots.tobytes())
    code, out, err = run(capsys, "dump", index, part / "00000000000000000073.timeindex")
    assert code == 1, err
    assert f"  Index offset: {offset}, log offset: -1\n" in err and "None" not in err
    assert f"offset: {offset} position: {int(slots['position'][1])}\n" in out
    assert "Traceback" not in err and "struct.error" not in err
    with pytest.raises(CorruptDataError, match="expected a batch position of at least 0"):
        codec.read_batch_header((part / "00000000000000000073.log").read_bytes(), -61)


def test_index_findings_are_printed_after_the_dumps_as_kafka_dump_log_groups_them(tmp_path, capsys):
    """Kafka 3.8 DumpLogSegments.main prints what dumpIndex and dumpTimeIndex found once every file is
    dumped, on stderr: ``Mismatches in :ABSPATH`` then ``  Index offset: I, log offset: L`` per
    entry, newest first (prepended to the list); TimeIndexDumpErrors.printErrors: ``Found timestamp
    mismatch in :ABSPATH`` / ``  Index timestamp: ...`` and ``The following indexed offsets are not
    found in the log.`` / ``Indexed offset: I, found log offset: L``.  A .log cut mid-batch leaves
    entries past its end: no batch there (the offset index reads -1, the time index's "not found")."""
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    log = part / "00000000000000000073.log"
    index, timeindex = part / "00000000000000000073.index", part / "00000000000000000073.timeindex"
    slots = np.frombuffer(index.read_bytes(), dtype=OFFSET_ENTRY)
    cut = int(slots["position"][2]) - 43           # inside the batch before the third entry's
    log.write_bytes(log.read_bytes()[:cut])
    times = np.frombuffer(timeindex.read_bytes(), dtype=[("t", ">i8"), ("r", ">i4")])
    last_whole = max(73 + int(r) for r, p in slots.tolist() if p < cut)   # entries name their batch's last
    lost = [73 + int(r) for r in times["r"] if 73 + int(r) > last_whole]
    code, out, err = run(capsys, "dump", index, timeindex)
    assert code == 1
    entries = [f"timestamp: {int(t)} offset: {73 + int(r)}" for t, r in times.tolist()]
    assert out.endswith("\n".join(entries) + "\n")
    assert err.splitlines() == [
        f"Mismatches in :{index}",
        *(f"  Index offset: {73 + int(r)}, log offset: -1" for r in reversed(slots["relative_offset"][2:])),
        "The following indexed offsets are not found in the log.",
        *(f"Indexed offset: {offset}, found log offset: -1" for offset in lost),
    ] and lost
    # a time-index timestamp the batch does not hold: its group names the file, two spaces per entry
    log.write_bytes((KAFKA_PART / log.name).read_bytes())
    data = bytearray(timeindex.read_bytes())
    data[0:8] = struct.pack(">q", int(times["t"][0]) + 1)
    timeindex.write_bytes(bytes(data))
    code, _, err = run(capsys, "dump", timeindex, "--verify-index-only")
    assert code == 1 and err.splitlines() == [
        f"Found timestamp mismatch in :{timeindex}",
        f"  Index timestamp: {int(times['t'][0]) + 1}, log timestamp: {int(times['t'][0])}",
    ]


def test_index_sanity_check(tmp_path, capsys):
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    index = part / "00000000000000000073.index"
    code, out, _ = run(capsys, "dump", index, "--index-sanity-check")
    assert code == 0 and f"{index} passed sanity check." in out
    index.write_bytes(index.read_bytes() + b"\x00\x00\x00")  # OffsetIndex.sanityCheck: not a multiple of 8
    code, out, err = run(capsys, "dump", index, "--index-sanity-check")
    assert code == 1
    assert "which is neither positive nor a multiple of 8" in err
    timeindex = part / "00000000000000000073.timeindex"
    data = bytearray(timeindex.read_bytes())
    data[-12:-4] = struct.pack(">q", 1)  # TimeIndex.sanityCheck: last timestamp below the first
    timeindex.write_bytes(bytes(data))
    code, _, err = run(capsys, "dump", timeindex, "--index-sanity-check")
    assert code == 1 and "the last timestamp is 1 which is less than the first timestamp" in err


def test_txnindex_dump_lists_the_aborted_transactions(capsys):
    path = next(p for p in sorted(TXN_PART.glob("*.txnindex")) if p.stat().st_size)
    code, out, _ = run(capsys, "dump", path)
    assert code == 0
    rows = np.frombuffer(
        path.read_bytes(),
        dtype=np.dtype(
            [("version", ">i2"), ("pid", ">i8"), ("first", ">i8"), ("last", ">i8"), ("lso", ">i8")]
        ),
    )
    expected = [
        f"version: {v} producerId: {p} firstOffset: {f} lastOffset: {la} lastStableOffset: {s}"
        for v, p, f, la, s in rows.tolist()
    ]
    assert out.splitlines()[1:] == expected


def test_leader_epoch_checkpoint_dump(capsys):
    code, out, _ = run(capsys, "dump", KAFKA_PART / "leader-epoch-checkpoint", "--json")
    assert code == 0
    lines = (KAFKA_PART / "leader-epoch-checkpoint").read_text().split("\n")
    expected = [[int(x) for x in line.split()] for line in lines[2 : 2 + int(lines[1])]]
    assert [[row["epoch"], row["start_offset"]] for row in map(json.loads, out.splitlines())] == expected



def test_every_json_line_of_a_file_dump_names_its_kind(tmp_path, capsys):
    """docs/cli.md promises each ``dump FILE --json`` object ``file``, ``format``, ``file_kind`` and
    ``kind``: a reader that dispatches on ``kind`` (as it must for a ``.log``: ``start``, ``batch``,
    ``record``...) found none on the checkpoint files' lines."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "recovery-point-offset-checkpoint").write_text("0\n2\nt 0 5\nt 1 7\n")
    files = [KAFKA_PART / "leader-epoch-checkpoint", logs / "recovery-point-offset-checkpoint",
             KAFKA_PART / "00000000000000000000.index", ROCKETMQ / "checkpoint"]
    code, out, _ = run(capsys, "dump", *files, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and {r["file_kind"] for r in rows} == {
        "leader-epoch-checkpoint", "offset-checkpoint", "index", "checkpoint"}
    assert [r for r in rows if not {"file", "format", "file_kind", "kind"} <= r.keys()] == []
    checkpoint = [r for r in rows if r["file_kind"] == "offset-checkpoint"]
    assert [(r["kind"], r["topic"], r["partition"], r["offset"]) for r in checkpoint] == [
        ("entry", "t", 0, 5), ("entry", "t", 1, 7)]



def test_an_indexfile_header_json_names_its_fields_in_one_style(capsys):
    """The header object's geometry came as ``maxHashSlotNum``/``maxIndexNum`` beside
    ``hash_slot_count``, ``index_count``...: a reader of one object had to know two spellings."""
    index = sorted((ROCKETMQ / "index").iterdir())[0]
    code, out, _ = run(capsys, "dump", index, "--json")
    header = json.loads(out.splitlines()[0])
    data = index.read_bytes()
    slots = (len(data) - 40 - 20 * header["max_index_num"]) // 4
    assert code == 0 and header["kind"] == "header" and header["max_hash_slot_num"] == slots > 0
    assert [key for key in header if key != key.lower()] == []


# -- producer-state snapshots -------------------------------------------------------------------


def _entries(rows: list[tuple[int, ...]]) -> np.ndarray:
    return np.array(rows, dtype=snapshot.ENTRY)


ENTRY_ROWS = st.lists(
    st.tuples(
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**15 - 1),
        st.integers(-1, 2**31 - 1),
        st.integers(-1, 2**63 - 1),
        st.integers(0, 2**31 - 1),
        st.integers(-1, 2**63 - 1),
        st.integers(-1, 2**31 - 1),
        st.integers(-1, 2**63 - 1),
    ),
    max_size=20,
)


@given(ENTRY_ROWS)
def test_snapshot_round_trip(rows):
    data = snapshot.write_snapshot(_entries(rows))
    assert len(data) == snapshot.HEADER.size + 46 * len(rows)
    assert [tuple(r) for r in snapshot.read_snapshot(data).tolist()] == rows


@given(ENTRY_ROWS.filter(bool), st.data())
def test_any_flipped_snapshot_byte_is_refused(rows, data):
    raw = bytearray(snapshot.write_snapshot(_entries(rows)))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(segstore.errors.CorruptDataError):
        snapshot.read_snapshot(bytes(raw))


def test_snapshot_file_dump_prints_each_producer(tmp_path, capsys):
    # Layout from ProducerStateManager.writeSnapshot (Kafka 3.8.0), built by hand: version 1, CRC32C, entries.
    body = (
        struct.pack(">i", 2)
        + struct.pack(">qhiqiqiq", 1000, 3, 41, 120, 4, 1700000000123, 7, 117)
        + struct.pack(">qhiqiqiq", 1001, 0, -1, -1, 0, 1700000000999, -1, -1)
    )
    import crc32c

    (tmp_path / "00000000000000000121.snapshot").write_bytes(
        struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    )
    code, out, err = run(capsys, "dump", tmp_path / "00000000000000000121.snapshot")
    assert code == 0, err
    assert out.splitlines()[1:] == [
        "producerId: 1000 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong[117] "
        "lastTimestamp: 1700000000123 firstSequence: 37 lastSequence: 41 lastOffset: 120 offsetDelta: 4 "
        "timestamp: 1700000000123",
        "producerId: 1001 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000999 ",
    ]
    (tmp_path / "00000000000000000121.snapshot").write_bytes(struct.pack(">hI", 1, 12345) + body)
    code, _, err = run(capsys, "dump", tmp_path / "00000000000000000121.snapshot")
    assert code == 1 and "expected CRC 12345 (stored)" in err and "Traceback" not in err
    # dumpProducerIdSnapshot catches CorruptSnapshotException, prints its message and goes on to the
    # next file: the files named after a bad snapshot were not dumped at all
    code, out, err = run(capsys, "dump", tmp_path / "00000000000000000121.snapshot",
                         KAFKA_PART / "00000000000000000073.log")
    assert code == 1 and "expected CRC 12345 (stored)" in err
    assert f"Dumping {KAFKA_PART / '00000000000000000073.log'}\nLog starting offset: 73\nbaseOffset: " in out


# -- RocketMQ single files ----------------------------------------------------------------------


def test_a_commitlog_file_dump_has_the_messages_of_that_file(capsys):
    path = ROCKETMQ / "commitlog" / "00000000000000262144"
    size = path.stat().st_size
    with segstore.open(ROCKETMQ) as store:
        expected = [
            (m.physical_offset, m.topic, m.queue_id, m.queue_offset)
            for m in store.scan()
            if 262144 <= m.physical_offset < 262144 + size
        ]
    code, out, err = run(capsys, "dump", path, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    got = [
        (r["physical_offset"], r["topic"], r["queue_id"], r["queue_offset"])
        for r in rows
        if r["kind"] == "message"
    ]
    assert got == expected and got
    assert all(r["file_kind"] == "commitlog" and r["format"] == "rocketmq" for r in rows)


@pytest.mark.parametrize("into", [0, 1, 2, 3, 4, 7])
def test_a_commitlog_file_dump_cut_by_max_bytes_claims_no_end_of_data(capsys, into):
    """``--max-bytes N`` ends a commitlog file's dump at the last whole message within N bytes, as
    kafka-dump-log's ``--max-bytes`` ends at the last whole batch (Kafka 3.8.0 ``DumpLogSegments.dumpLog``:
    ``FileRecords.slice(0, maxBytes)``, nothing said of the batch cut off): a limit a few bytes into the
    next message, whose size field starts with zero bytes, said "end of data at position P" (JSON:
    ``{"kind": "end"}``), where the broker's data goes on (its end is the unwritten zeros, 4.9.7
    ``CommitLog.checkMessageAndReturnSize``'s magic 0)."""
    path = ROCKETMQ / "commitlog" / "00000000000000000000"
    code, whole, _ = run(capsys, "dump", path, "--json")
    rows = [json.loads(line) for line in whole.splitlines()]
    first, second = rows[0], rows[1]
    assert code == 0 and first["kind"] == second["kind"] == "message"
    limit = second["physical_offset"] + into
    code, out, err = run(capsys, "dump", path, "--json", "--max-bytes", limit)
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [first]
    code, out, err = run(capsys, "dump", path, "--max-bytes", limit)
    assert (code, err) == (0, "") and "end of data" not in out and len(out.splitlines()) == 2


def test_a_commitlog_file_dump_names_zeros_before_later_messages(tmp_path, capsys):
    """Zeros over a message's header with messages after them are damage (RocketMQ 4.9.7
    ``CommitLog.checkMessageAndReturnSize``: magic 0 is an illegal magic code), not the file's end of
    data: the dump says so on stderr and exits 1 (before: "end of data" and exit 0, every later
    message of the file left out).  Zeros to the end of the file still end it quietly."""
    path = tmp_path / "00000000000000524288"      # the last file: its data ends in zeros
    path.write_bytes((ROCKETMQ / "commitlog" / path.name).read_bytes())
    code, out, _ = run(capsys, "dump", path, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and rows[-1]["kind"] == "end" and len(rows) > 4
    third = rows[2]["physical_offset"] - 524288
    with open(path, "r+b") as f:
        f.seek(third)
        f.write(bytes(8))
    code, out, _ = run(capsys, "dump", path, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and [r["kind"] for r in rows] == ["message", "message", "error"]
    assert rows[-1]["position"] == third
    assert rows[-1]["error"].startswith("expected a message or a BLANK, found zeros before non-zero bytes")
    code, out, err = run(capsys, "dump", path)
    assert code == 1 and len(out.splitlines()) == 3     # "Dumping FILE", two messages
    assert f"{path}:{third}: expected a message or a BLANK, found zeros before non-zero bytes" in err


def test_consume_queue_index_file_and_checkpoint_dumps(capsys):
    cq = ROCKETMQ / "consumequeue" / "TopicA" / "0" / "00000000000000000640"
    code, out, _ = run(capsys, "dump", cq, "--json")
    assert code == 0
    with segstore.open(ROCKETMQ) as store:
        queue = store.queues[("TopicA", 0)]
        want = queue.entries(32)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["queue_offset"], r["commitlog_offset"], r["size"]) for r in rows] == [
        (32 + i, int(e["offset"]), int(e["size"])) for i, e in enumerate(want[: len(rows)])
    ]
    assert len(rows) == min(len(want), 32)
    index = sorted((ROCKETMQ / "index").iterdir())[0]
    code, out, _ = run(capsys, "dump", index)
    lines = out.splitlines()
    header = dict(zip(lines[1].split()[::2], lines[1].split()[1::2], strict=True))
    assert (
        code == 0
        and len([line for line in lines if line.startswith("entry: ")]) == int(header["indexCount:"]) - 1
    )
    code, out, _ = run(capsys, "dump", ROCKETMQ / "checkpoint")
    physic = struct.unpack(">q", (ROCKETMQ / "checkpoint").read_bytes()[:8])[0]
    assert code == 0 and f"physicMsgTimestamp: {physic} " in out


@pytest.mark.parametrize("keep", [13, 40 + 7], ids=["no whole entry", "two entries and 7 bytes"])
def test_a_consume_queue_file_dump_names_bytes_short_of_an_entry(tmp_path, capsys, keep):
    """A consume-queue file cut mid-entry (13 bytes: no whole 20-byte entry) was dumped as nothing at all,
    exit 0, as an empty queue file.  The broker never loads such a file (RocketMQ 4.9.7
    ``MappedFileQueue.load``: every file of a queue is mappedFileSizeConsumeQueue long, whole 20-byte
    ``CQ_STORE_UNIT_SIZE`` entries): the bytes left over are a problem line at their position, exit 1."""
    cq = tmp_path / "00000000000000000640"
    cq.write_bytes((ROCKETMQ / "consumequeue" / "TopicA" / "0" / cq.name).read_bytes()[:keep])
    code, out, err = run(capsys, "dump", cq)
    entries = keep // 20
    assert code == 1 and len(out.splitlines()) == 1 + entries
    assert err.strip() == f"{cq}:{entries * 20}: expected a whole 20-byte entry, found {keep % 20} bytes"


# -- usage ---------------------------------------------------------------------------------------


def test_file_dumps_refuse_store_selectors_and_unknown_files(tmp_path, capsys):
    code, _, err = run(capsys, "dump", KAFKA_PART / "00000000000000000073.log", "--topic", "x")
    assert code == 2 and "single files are dumped whole" in err
    (tmp_path / "notes.txt").write_text("hi")
    code, _, err = run(capsys, "dump", tmp_path / "notes.txt")
    assert code == 2 and "expected a file of a known format" in err
    code, _, err = run(capsys, "dump", KAFKA_PART, "--print-data-log")
    assert code == 2 and "dumping single files only" in err
    code, _, err = run(
        capsys,
        "dump",
        KAFKA_PART / "00000000000000000073.log",
        "--offsets-decoder",
        "--cluster-metadata-decoder",
    )
    assert code == 2 and "pick one of" in err


@pytest.mark.parametrize("name", ["00000000000000000000.log", "00000000000000000000.index", "checkpoint"])
def test_a_fifo_named_as_a_store_file_is_named_a_fifo(tmp_path, capsys, name):
    """Before: ``expected a file of a known format (kafka, rocketmq), found '00000000000000000000.log'``, as
    if the name were wrong: it is what the path is that is."""
    os.mkfifo(tmp_path / name)
    code, out, err = run(capsys, "dump", tmp_path / name)
    assert (code, out) == (2, "")
    assert f"{tmp_path / name}: expected a regular file to dump, found a FIFO" in err


# Written by Kafka 3.8.0's own ProducerStateManager.writeSnapshot (the storage oracle's classes, see
# /work/shared/oracle/README.md; invoked through reflection on a map of three ProducerStateEntry: pid 2
# with a sequence that wraps, pid 1000 with an open transaction, pid 1001 with no batch metadata), and
# read back by its readSnapshot, whose ProducerStateEntry.toString gave the firstSeq values below.
KAFKA_SNAPSHOT = bytes.fromhex(
    "0001a59e53a30000000300000000000000027fff0000000200000000000000000000000500000000000000057fffffff"
    "000000000000000000000000000003e80003000000290000000000000078000000040000018bcfe5687b000000070000"
    "00000000007500000000000003e90000ffffffffffffffffffffffff000000000000018bcfe56be7ffffffffffffffff"
    "ffffffff"
)


def test_a_snapshot_written_by_kafka_reads_and_rewrites_byte_for_byte(tmp_path, capsys):
    entries = snapshot.read_snapshot(KAFKA_SNAPSHOT)
    assert entries["producer_id"].tolist() == [2, 1000, 1001]
    assert snapshot.write_snapshot(entries) == KAFKA_SNAPSHOT
    path = tmp_path / "00000000000000000121.snapshot"
    path.write_bytes(KAFKA_SNAPSHOT)
    code, out, _ = run(capsys, "dump", path)
    assert code == 0
    assert out.splitlines()[1:] == [
        "producerId: 2 producerEpoch: 32767 coordinatorEpoch: 2147483647 currentTxnFirstOffset: "
        "OptionalLong[0] lastTimestamp: 5 firstSequence: 2147483645 lastSequence: 2 lastOffset: 0 "
        "offsetDelta: 5 timestamp: 5",
        "producerId: 1000 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong[117] "
        "lastTimestamp: 1700000000123 firstSequence: 37 lastSequence: 41 lastOffset: 120 offsetDelta: 4 "
        "timestamp: 1700000000123",
        "producerId: 1001 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000999 ",
    ]


REAL_METADATA = FIXTURES / "real" / "kraft-confluent-7.5.1" / "__cluster_metadata-0"


def test_kraft_control_records_print_as_dump_log_segments_does(capsys):
    """3.8 ``DumpLogSegments.dumpLog``: a snapshot's header and footer as their JSON converters write
    them, any other control type as ``controlType: NAME(ID)``; the directory dump prints the same."""
    snapshot_file = next(REAL_METADATA.glob("*.checkpoint"))
    code, out, _ = run(capsys, "dump", snapshot_file, "--deep-iteration")
    records = [line for line in out.splitlines() if line.startswith("| ")]
    assert code == 0
    header = json.loads(records[0].split(" SnapshotHeader ")[1])
    assert list(header) == ["version", "lastContainedLogTimestamp"] and header["version"] == 0
    assert records[0].endswith(' headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":'
                               f'{header["lastContainedLogTimestamp"]}}}')
    assert records[-1].endswith(' SnapshotFooter {"version":0}')
    log = REAL_METADATA / "00000000000000000000.log"
    code, out, _ = run(capsys, "dump", log, "--deep-iteration")
    leader_change = [line for line in out.splitlines() if "LEADER_CHANGE" in line]
    assert leader_change and all(line.endswith(" controlType: LEADER_CHANGE(2)") for line in leader_change)
    code, whole, _ = run(capsys, "dump", REAL_METADATA)
    assert set(leader_change) <= set(whole.splitlines())


def test_skip_record_metadata_prints_what_the_tool_prints(tmp_path, capsys):
    """``dumpLog``'s prefix: ``| `` goes before the first part printed other than the payload, which always
    follows a space; a record with nothing to print is an empty line."""
    batches = [{"compression": "none", "records": [{"key": None, "value": "nokey", "timestamp": 1},
                                                   {"key": "k", "value": None, "timestamp": 2},
                                                   {"key": "k", "value": "v", "timestamp": 3},
                                                   {"key": None, "value": None, "timestamp": 4}]},
               {"control": "COMMIT", "producer_id": 5, "producer_epoch": 0, "coordinator_epoch": 0,
                "timestamp": 5}]
    (tmp_path / "s.json").write_text(json.dumps({"config": {}, "batches": batches}))
    assert run(capsys, "write", tmp_path / "t-0", "--spec", tmp_path / "s.json")[0] == 0
    log = tmp_path / "t-0" / "00000000000000000000.log"
    code, out, _ = run(capsys, "dump", log, "--print-data-log", "--skip-record-metadata")
    assert code == 0
    records = [line for line in out.splitlines()[2:] if not line.startswith("baseOffset: ")]
    assert records == [" payload: nokey", "| key: k", "| key: k payload: v", "", ""]
    code, out, _ = run(capsys, "dump", log, "--deep-iteration", "--skip-record-metadata")
    assert [line for line in out.splitlines()[2:] if not line.startswith("baseOffset: ")] == [""] * 5


def test_a_delete_horizon_prints_as_an_optional_long(tmp_path, capsys):
    """``RecordBatch.deleteHorizonMs()`` is an ``OptionalLong``: the cleaner's horizon on a batch holding a
    tombstone prints as ``OptionalLong[MS]``, none as ``OptionalLong.empty``; the directory dump alike."""
    t = 1_700_000_000_000
    batches = [{"compression": "none", "records": [{"key": "k", "value": "a", "timestamp": t}]},
               {"compression": "none", "records": [{"key": "k", "value": None, "timestamp": t + 1}]},
               {"compression": "none", "records": [{"key": "j", "value": "b", "timestamp": t + 2}]}]
    (tmp_path / "s.json").write_text(json.dumps({"config": {"segment.bytes": 150}, "batches": batches}))
    logs = tmp_path / "logs"
    assert run(capsys, "write", logs / "t-0", "--spec", tmp_path / "s.json")[0] == 0
    assert run(capsys, "compact", logs, "--config", "cleanup.policy=compact", "--config", "segment.bytes=150",
               "--now-ms", str(t + 100))[0] == 0
    _, out, _ = run(capsys, "dump", logs / "t-0" / "00000000000000000000.log")
    horizons = [line.split(" deleteHorizonMs: ")[1].split(" position: ")[0]
                for line in out.splitlines() if line.startswith("baseOffset: ")]
    assert f"OptionalLong[{t + 100 + 86_400_000}]" in horizons     # now + delete.retention.ms (1 day)
    assert set(horizons) <= {f"OptionalLong[{t + 100 + 86_400_000}]", "OptionalLong.empty"}
    _, whole, _ = run(capsys, "dump", logs)
    assert f"deleteHorizonMs: OptionalLong[{t + 100 + 86_400_000}]" in whole


def test_a_legacy_message_whose_crc_fails_is_printed_invalid_not_cut_off(tmp_path, capsys):
    """Kafka 3.8 DumpLogSegments.dumpLog prints every record of a whole v0/v1 entry with its own
    ``isValid: ${r.isValid}`` (AbstractLegacyRecordBatch.isValid: the stored CRC against the bytes)
    and goes on; only a torn tail is "invalid bytes at the end".  A flipped value byte was reported
    as 38 invalid bytes (exit 1) and its record line left out."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for i in range(3):
        builder.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i)
    data = bytearray(builder.build())
    data[-1] ^= 1                                   # the last message's value: "v2" now reads "v3"
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(data))
    crc = struct.unpack_from(">I", data, len(data) - 26)[0]      # the last message's stored CRC
    code, out, err = run(capsys, "dump", log, "--print-data-log")
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [
        f"offset: 2 position: 76 CreateTime: 1700000000002 size: 38 magic: 1 compresscodec: none crc: {crc} "
        "isvalid: false",
        f"| offset: 2 CreateTime: 1700000000002 keySize: 2 valueSize: 2 isValid: false crc: {crc}}} "
        "key: k2 payload: v3",
    ]
    assert "isValid: true crc: " in out.splitlines()[3]


def test_txnindex_dump_prints_the_whole_entries_before_a_torn_tail_or_a_newer_version(tmp_path, capsys):
    """Kafka 3.8 DumpLogSegments.dumpTxnIndex walks TransactionIndex.allAbortedTxns: whole 34-byte
    entries only (hasNext: at least TOTAL_SIZE bytes left), throwing at an entry of a version above
    AbortedTxn.CURRENT_VERSION (0) after printing those before it.  A torn tail printed no entry at
    all, and a version-1 entry was printed as if it were valid."""
    source = next(p for p in sorted(TXN_PART.glob("*.txnindex")) if p.stat().st_size >= 68)
    path = tmp_path / source.name
    data = source.read_bytes()[:68]
    path.write_bytes(data + b"\x00" * 12)                       # a torn third entry
    code, out, err = run(capsys, "dump", path)
    assert code == 1 and [line.split()[1] for line in out.splitlines()[1:]] == ["0", "0"]
    assert err == f"{path}:68: expected a 34-byte aborted-transaction entry, found 12 bytes\n"
    path.write_bytes(data[:34] + b"\x00\x01" + data[36:])      # the second entry at version 1
    code, out, err = run(capsys, "dump", path)
    assert code == 1 and len(out.splitlines()) == 2 and out.splitlines()[1].startswith("version: 0 ")
    assert err.startswith(f"{path}:34: expected aborted-transaction version 0 or below")
    assert err.endswith("found 1\n")


def test_a_store_dump_with_index_prints_each_txnindex_as_its_file_dump_does(capsys):
    """``dump PARTITION_DIR --index`` dumps each segment's index files as kafka-dump-log --files does
    them (DumpLogSegments.dumpTxnIndex: ``Dumping X.txnindex``, then ``version: V producerId: ...``);
    the aborted transactions came with neither the heading nor the version."""
    code, whole, _ = run(capsys, "dump", TXN_PART, "--index")
    assert code == 0
    txn_files = sorted(TXN_PART.glob("*.txnindex"))
    assert txn_files
    for path in txn_files:
        code, out, _ = run(capsys, "dump", path)
        assert code == 0 and out.startswith(f"Dumping {path}\n")
        assert out in whole


def test_files_kafka_writes_that_the_tool_does_not_dump_are_ignored_as_kafka_dump_log_does(tmp_path, capsys):
    """Kafka 3.8 DumpLogSegments.main dumps by the suffix after the last dot; any other (a partition's
    ``partition.metadata``, a ``.log.deleted`` segment awaiting deletion) prints ``Dumping X``, then
    ``Ignoring unknown file X`` on stderr, and the other files are still dumped (exit 0).  segstore
    refused the whole command (exit 2, "expected a file of a known format"), so ``dump topic-0/*``
    dumped nothing."""
    part = copy_writable(KAFKA_PART, tmp_path / "topic-0")
    (part / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    log = part / "00000000000000000073.log"
    deleted = part / "00000000000000000073.log.deleted"
    deleted.write_bytes(log.read_bytes())
    metadata = part / "partition.metadata"
    code, out, err = run(capsys, "dump", metadata, log, deleted)
    assert code == 0
    assert out.startswith(f"Dumping {metadata}\nDumping {log}\nLog starting offset: 73\n")
    assert out.endswith(f"Dumping {deleted}\n")
    assert err == f"Ignoring unknown file {metadata}\nIgnoring unknown file {deleted}\n"
    code, out, _ = run(capsys, "dump", deleted, "--json")
    assert code == 0 and json.loads(out) == {"file": str(deleted), "format": "kafka", "file_kind": "ignored",
                                             "kind": "ignored"}
    (tmp_path / "notes.txt").write_text("hi")                    # not a name Kafka writes: still refused
    code, _, err = run(capsys, "dump", tmp_path / "notes.txt")
    assert code == 2 and "expected a file of a known format" in err


def test_a_batch_whose_records_do_not_decode_is_named_and_the_batches_after_it_dumped(tmp_path, capsys):
    """A v2 batch whose frame holds (its length leads to the next batch, as FileLogInputStream.nextBatch
    reads it) but whose records do not decode: the tool dies there (InvalidRecordException); segstore
    said ``Found N invalid bytes at the end`` of every byte from that batch on, the next whole, valid
    batch included.  Now the batch's problem is named, its followers dumped, and only real trailing
    bytes are called so."""
    first = bytearray(codec.encode_batch([(b"k", b"v", 1000), (b"k", b"v", 1001)], base_offset=0))
    first[61] = 0x7F                                 # the first record's length varint: -64
    second = codec.encode_batch([(b"k", b"v2", 1001)], base_offset=2)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(first) + second + b"\0" * 5)
    code, out, err = run(capsys, "dump", log, "--print-data-log")
    assert code == 1
    lines = out.splitlines()
    assert lines[2].startswith("baseOffset: 0 ") and lines[2].endswith("isvalid: false")
    assert lines[3].startswith("baseOffset: 2 lastOffset: 2 count: 1 ")
    assert f"position: {len(first)} " in lines[3]
    assert lines[4].endswith("key: k payload: v2") and len(lines) == 5
    assert err.splitlines() == [
        f"{log}:61: record 0 of 2: expected a length >= 0, found -64",
        f"Found 5 invalid bytes at the end of {log.name} ({log}:{len(first) + len(second)}: expected a batch "
        "of more than 17 bytes, found 5)",
    ]


def test_findings_name_the_file_as_java_s_get_absolute_path_does(tmp_path, capsys, monkeypatch):
    """DumpLogSegments keys its findings by ``File.getAbsolutePath``: the working directory joined to
    the path as typed, ``./`` and ``../`` kept (only repeated slashes dropped); ``os.path.abspath``
    folded them, so ``--files ./X.log`` headed its non-consecutive offsets with another path."""
    log = tmp_path / "sub" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(codec.encode_batch([(b"k", b"v", 1000), (b"k", b"w", 1001)], base_offset=0,
                                       offset_deltas=[0, 2]))
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    typed = "./..//sub/00000000000000000000.log"
    code, _, err = run(capsys, "dump", typed, "--deep-iteration")
    assert code == 0
    assert err == f"Non-consecutive offsets in {tmp_path}/other/./../sub/00000000000000000000.log\n" \
                  "  0 is followed by 2\n"


@pytest.mark.parametrize("pure", [False, True])
def test_a_batch_of_an_unknown_codec_id_is_a_typed_error_not_a_traceback(tmp_path, capsys, pure):
    """Kafka 3.8 ``CompressionType.forId`` throws on attribute codec ids 5 to 7, and
    ``DumpLogSegments.printBatchLevel`` asks for ``batch.compressionType`` first.  A batch whose CRC
    holds over codec id 7 made ``dump FILE`` (and, in pure Python, ``dump DIR``) die of an
    ``IndexError`` in ``RecordBatch.compression``; it is the error reading its records gives."""
    import subprocess
    import sys

    import crc32c

    first = codec.encode_batch([(b"k", b"v", 1)], base_offset=0)
    bad = bytearray(codec.encode_batch([(b"k", b"v", 2)], base_offset=1))
    bad[codec.ATTRIBUTES_OFFSET + 1] |= 7
    struct.pack_into(">I", bad, codec.CRC_OFFSET, crc32c.crc32c(bytes(bad[codec.ATTRIBUTES_OFFSET:])))
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    log.write_bytes(first + bytes(bad))
    message = f"{log}:{len(first) + codec.HEADER.size}: expected a compression codec id of 0 to 4 (none, " \
              "gzip, snappy, lz4, zstd), found 7"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "SEGSTORE_PURE_PYTHON": "1",
           "PYTHONPATH": os.pathsep.join([root, os.path.join(root, "formats")])}
    for argv in (["dump", log, "--deep-iteration"], ["dump", log], ["dump", log, "--json"], ["dump", part],
                 ["dump", part, "--json"]):
        if pure:
            proc = subprocess.run([sys.executable, "-m", "segstore.cli", *map(str, argv)],
                                  capture_output=True, text=True, env=env, timeout=120)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        else:
            code, out, err = run(capsys, *argv)
        # --json: the file dump's "invalid-bytes" object carries the error
        assert code == 1 and message in err + out and "Traceback" not in err, (argv, err)


def test_checkpoint_json_dump_names_the_fields_as_info_does(capsys):
    """``dump checkpoint --json`` and ``info --json``'s ``checkpoint`` name the five fields alike, by
    the broker's names (4.9.7 ``StoreCheckpoint``: physicMsgTimestamp, logicsMsgTimestamp,
    indexMsgTimestamp, masterFlushedOffset, confirmPhyOffset): one checkpoint, one set of keys."""
    code, out, _ = run(capsys, "dump", ROCKETMQ / "checkpoint", "--json")
    dumped = json.loads(out.splitlines()[0])
    code2, out2, _ = run(capsys, "info", ROCKETMQ, "--json")
    info = json.loads(out2)["checkpoint"]
    assert code == code2 == 0 and list(info) and {k: dumped[k] for k in info} == info
    assert "physic_msg_timestamp" not in dumped


def test_print_data_log_decodes_as_javas_string_decoder(tmp_path, capsys):
    """kafka-dump-log's ``--print-data-log`` (3.8 ``DumpLogSegments``, ``kafka.serializer.StringDecoder``:
    ``new String(bytes, UTF_8)``) writes one U+FFFD for an encoded surrogate ``ED A0 80`` (JDK
    ``String.decodeUTF8_UTF16`` reads it as one malformed character) where Python's ``replace`` wrote
    three; a RocketMQ body is printed the same way (``new String(body, UTF_8)``)."""
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    log.write_bytes(codec.encode_batch([(b"\xed\xa0\x80k", b"v\xed\xa0\x80\xff", 5)], base_offset=0))
    for argv in ([], ["--value-decoder", "utf-8", "--key-decoder", "utf-8"]):
        code, out, err = run(capsys, "dump", log, "--print-data-log", *argv)
        assert code == 0, err
        assert out.splitlines()[-1].endswith(" key: \ufffdk payload: v\ufffd\ufffd"), argv
    store = tmp_path / "rmq"
    with segstore.open(store, format="rocketmq", mode="a", mappedFileSizeCommitLog=4096) as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"v\xed\xa0\x80\xff"}])
    code, out, err = run(capsys, "dump", next((store / "commitlog").iterdir()), "--print-data-log")
    assert code == 0 and " payload: v\ufffd\ufffd\n" in out, err


def test_a_commitlog_file_dump_prints_properties_that_are_not_utf8_as_the_broker_reads_them(tmp_path, capsys):
    """RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` and ``MessageDecoder.decodeMessage`` read
    the properties with ``new String(bytes, UTF_8)``: a U+FFFD for each malformed sequence, never an
    error, and the broker keeps and serves the message.  ``dump FILE`` stopped at it with a problem
    (``'utf-8' codec can't decode byte 0xff``, exit 1) and printed none of the messages after it; it
    prints the message now, and ``--json`` adds the stored bytes as ``properties_base64``."""
    store = tmp_path / "rmq"
    with segstore.open(store, format="rocketmq", mode="a", mappedFileSizeCommitLog=4096) as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"a", "keys": ["k1"],
                           "properties": {"ZZQ": "v"}},
                          {"topic": "T", "queue_id": 0, "body": b"b", "keys": ["k2"]}])
    log = next((store / "commitlog").iterdir())
    data = bytearray(log.read_bytes())
    at = data.index(b"ZZQ")
    data[at:at + 3] = b"a\xffb"             # outside the body CRC
    log.write_bytes(bytes(data))
    code, out, err = run(capsys, "dump", log)
    assert code == 0, err
    assert [line.split(" keys: ")[1] for line in out.splitlines() if "keys: " in line] == ["k1 tags: -",
                                                                                            "k2 tags: -"]
    code, out, err = run(capsys, "dump", log, "--json")
    assert code == 0, err
    first = json.loads(out.splitlines()[0])
    assert first["properties"]["a\ufffdb"] == "v"
    assert b"a\xffb\x01v" in base64.b64decode(first["properties_base64"])
    assert "properties_base64" not in json.loads(out.splitlines()[1])


def test_file_names_print_as_java_io_file_prints_them(tmp_path, capsys, monkeypatch):
    """kafka-dump-log (3.8 ``DumpLogSegments``) prints ``Dumping $file``, ``$file is empty.`` and ``$file
    passed sanity check.`` of ``new File(arg)``, whose text ``UnixFileSystem.normalize`` made: repeated
    slashes one, a trailing one dropped, ``.`` kept.  segstore printed the argument as typed
    (``Dumping ./t-0//00000000000000000000.index``)."""
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(codec.encode_batch([(b"k", b"v", 1)], base_offset=0))
    (part / "00000000000000000000.index").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "dump", ".//t-0//00000000000000000000.index")
    assert code == 0, err
    assert out == "Dumping ./t-0/00000000000000000000.index\n./t-0/00000000000000000000.index is empty.\n"


def test_a_commitlog_file_dump_quotes_a_topic_key_or_tag_holding_a_control_character(tmp_path, capsys):
    """``dump COMMITLOG_FILE`` printed keys and tags as they are: a key holding a space read as two words,
    one holding ``ESC [ 3 1 m`` or a line break acted on the terminal or split the line.  They are now
    words as the store's dump writes them (``segstore.store.text_word``): quoted where they hold white
    space, a quote or a control character (C0, DEL, C1), ``json.loads`` reading them back.  (RocketMQ
    4.9.7 ``TopicValidator`` refuses such a topic at the producer; a commitlog holds what was written.)"""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", mappedFileSizeCommitLog=4096) as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"a", "keys": ["k\x1b[31m", "k2"],
                           "tags": "t\x9b"},
                          {"topic": "T", "queue_id": 0, "body": b"b", "keys": ["plain"], "tags": "x\ny"}])
    log = next((store / "commitlog").iterdir())
    data = bytearray(log.read_bytes())
    at = data.rindex(b"\x01T\x00")      # the second message's topic field: one byte long, then T
    data[at + 1:at + 2] = b"\x7f"                 # outside the body CRC
    log.write_bytes(bytes(data))
    code, out, err = run(capsys, "dump", log)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("physicalOffset: ")]
    assert not any(c < " " or "\x7f" <= c <= "\x9f" for c in out.replace("\n", ""))
    assert [line.split(" keys: ")[1] for line in lines] == ['"k\\u001b[31m,k2" tags: "t\\u009b"',
                                                           'plain tags: "x\\ny"']
    assert [line.split(" topic: ")[1].split(" ")[0] for line in lines] == ["T", '"\\u007f"']
