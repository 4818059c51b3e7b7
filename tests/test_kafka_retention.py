"""Kafka retention, DeleteRecords and the log-dir checkpoints, rule by rule against Kafka 3.8.0's source.

Sources (apache/kafka 3.8.0):
- core/src/main/scala/kafka/log/UnifiedLog.scala: deleteOldSegments, deletableSegments, deleteSegments,
  deleteRetentionSizeBreachedSegments, deleteRetentionMsBreachedSegments,
  deleteLogStartOffsetBreachedSegments, maybeIncrementLogStartOffset, updateHighWatermark
- core/src/main/scala/kafka/log/LocalLog.scala: deleteSegmentFiles (``.deleted`` renames, then removal)
- core/src/main/scala/kafka/log/LogLoader.scala: removeTempFilesAndCollectSwapFiles, load (log start)
- core/src/main/scala/kafka/log/LogManager.scala: checkpointLogStartOffsetsInDir
- core/src/main/scala/kafka/cluster/Partition.scala: deleteRecordsOnLeader
- storage/.../log/LogSegment.java: largestTimestamp (max timestamp, else lastModified)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords
from kafka_messages import pre_0_10_1_segments
from segstore_kafka import retention
from segstore_kafka.checkpoints import read_offsets, write_offsets
from segstore_kafka.partition import KafkaConfig, Partition
from segstore_kafka.retention import SegmentInfo, plan_deletions

import segstore
from segstore import cli
from segstore.cli import main
from segstore.errors import ConfigError, OffsetOutOfRangeError
from segstore.records import Message

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _build(path: Path, segments: int = 6, per_segment: int = 4, *, epochs: bool = False) -> Path:
    """A partition of ``segments`` segments of ``per_segment`` one-record batches; record i has timestamp
    T0 + 1000 * i and leader epoch i // 8 (when ``epochs``)."""
    part = Partition(str(path), KafkaConfig(), writable=True, clock=Clock())
    n = 0
    for s in range(segments):
        if s:
            part.log.active.on_become_inactive()
            part.log.roll(part.next_offset).make_appendable()
        for _ in range(per_segment):
            part.append_records([(f"k{n}".encode(), b"v" * 50, T0 + 1000 * n, [])],
                                leader_epoch=n // 8 if epochs else 0)
            n += 1
    part.close()
    return path


def _open(path: Path, clock: Clock | None = None, **config: object) -> Partition:
    return Partition(str(path), KafkaConfig.from_mapping(config), writable=True, clock=clock or Clock())


def _kafka_python_offsets(path: Path) -> list[int]:
    """Offsets of every record as kafka-python reads the ``.log`` files."""
    out = []
    for log in sorted(path.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            out.extend(r.offset for r in records.next_batch())
    return out


def _segment_bases(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in path.glob("*.log"))


# -- the pure plan -----------------------------------------------------------------

segment_lists = st.lists(st.tuples(st.integers(1, 40), st.integers(0, 5_000), st.integers(-1, 10_000)),
                         min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(spec=segment_lists, empty_last=st.booleans(), retention_bytes=st.integers(-1, 3_000),
       retention_ms=st.integers(-1, 10_000), hw_cut=st.floats(0, 1), start_cut=st.floats(0, 1))
def test_plan_keeps_unifiedlogs_invariants(spec, empty_last, retention_bytes, retention_ms, hw_cut,
                                           start_cut) -> None:
    """UnifiedLog.deletableSegments/deleteSegments: deletions are a prefix, never past the high watermark,
    never an empty last segment; the log start is the first kept base; retention.bytes stops as soon as
    deleting the next segment would take the log under the limit."""
    bases, base = [], 0
    for count, _, _ in spec:
        bases.append(base)
        base += count
    end = base
    sizes = [s for _, s, _ in spec]
    if empty_last:
        bases.append(end)
        sizes.append(0)
        spec = [*spec, (0, 0, -1)]
    segs = [SegmentInfo(b, sz, ts) for b, sz, (_, _, ts) in zip(bases, sizes, spec, strict=True)]
    hw = int(end * hw_cut)
    start = min(int(end * start_cut), hw)
    plan = plan_deletions(segs, log_start_offset=start, log_end_offset=end, high_watermark=hw,
                          retention_bytes=retention_bytes, retention_ms=retention_ms, now_ms=10_000)
    deleted = [d.base for d in plan.deletions]
    assert deleted == bases[:len(deleted)]
    assert all(d.upper <= hw for d in plan.deletions)
    kept = [s for s in segs if s.base not in deleted]
    if plan.rolled_at is not None:
        assert plan.rolled_at == end
        kept.append(SegmentInfo(end, 0, -1))
    assert kept, "a partition always keeps one segment"
    assert plan.log_start_offset == max(start, kept[0].base)
    for d in plan.deletions:
        if d.reason == retention.REASON_LOG_START:
            assert d.upper <= plan.log_start_offset
        if d.reason == retention.REASON_TIME:
            assert 10_000 - segs[bases.index(d.base)].largest_timestamp > retention_ms
    if any(d.reason == retention.REASON_SIZE for d in plan.deletions):  # as the size pass left it
        gone = {d.base for d in plan.deletions if d.reason != retention.REASON_TIME}
        assert sum(s.size for s in segs if s.base not in gone) >= retention_bytes


def test_size_rule_stops_before_going_under_the_limit() -> None:
    """deleteRetentionSizeBreachedSegments: ``diff = size - retention.bytes``; delete while
    ``diff - segment.size >= 0``."""
    segs = [SegmentInfo(0, 100, 1), SegmentInfo(10, 100, 1), SegmentInfo(20, 100, 1), SegmentInfo(30, 50, 1)]
    plan = plan_deletions(segs, log_start_offset=0, log_end_offset=35, high_watermark=35, retention_bytes=150)
    assert [d.base for d in plan.deletions] == [0, 10] and plan.log_start_offset == 20
    plan = plan_deletions(segs, log_start_offset=0, log_end_offset=35, high_watermark=35, retention_bytes=351)
    assert plan.deletions == [] and plan.log_start_offset == 0


def test_compact_only_policy_runs_only_the_log_start_rule() -> None:
    """UnifiedLog.deleteOldSegments: without ``delete`` in cleanup.policy only the log start rule runs."""
    segs = [SegmentInfo(0, 100, 1), SegmentInfo(10, 100, 1), SegmentInfo(20, 100, 1)]
    plan = plan_deletions(segs, log_start_offset=12, log_end_offset=30, high_watermark=30, retention_bytes=0,
                          retention_ms=0, now_ms=10, delete_policy=False)
    assert [(d.base, d.reason) for d in plan.deletions] == [(0, retention.REASON_LOG_START)]
    assert plan.log_start_offset == 12


# -- applied to partitions -----------------------------------------------------------

def test_retention_bytes_deletes_oldest_and_renames_through_deleted(tmp_path: Path, monkeypatch) -> None:
    path = _build(tmp_path / "logs" / "t-0")
    before = _kafka_python_offsets(path)
    sizes = [os.path.getsize(p) for p in sorted(path.glob("*.log"))]
    limit = sum(sizes) - sizes[0] - sizes[1] - 1  # two whole segments over, not three
    renames: list[tuple[str, str]] = []
    real_rename = retention.files.rename
    monkeypatch.setattr(retention.files, "rename", lambda a, b: (renames.append((a, b)), real_rename(a, b)))
    part = _open(path, **{"retention.bytes": limit})
    result = retention.delete_old_segments(part)
    assert [d.base for d in result.deletions] == [0, 4]
    assert {d.reason for d in result.deletions} == {"retention.bytes"}
    assert part.log_start_offset == 8 == result.log_start_offset
    # LocalLog.deleteSegmentFiles: every file of the segment renamed to .deleted, then removed
    assert sorted(os.path.basename(a) for a, _ in renames) == sorted(
        f"{b:020d}{s}" for b in (0, 4) for s in (".log", ".index", ".timeindex")
        if (b, s) != (-1, ""))
    assert all(b == a + ".deleted" for a, b in renames)
    assert not list(path.glob("*.deleted"))
    part.close()
    assert _segment_bases(path) == [8, 12, 16, 20]
    assert _kafka_python_offsets(path) == [o for o in before if o >= 8]
    # LogManager.checkpointLogStartOffsetsInDir: no entry while the log start is the first base
    assert read_offsets(str(tmp_path / "logs" / "log-start-offset-checkpoint")) == {}
    with segstore.open(path) as store:
        assert store.verify() == []
        assert store.offset_range("t", 0) == (8, 24)


def test_retention_ms_can_delete_the_active_segment_after_rolling(tmp_path: Path) -> None:
    """UnifiedLog.deleteSegments: when every segment is deletable a new one is rolled at the log end first."""
    path = _build(tmp_path / "logs" / "t-0", segments=3)
    clock = Clock(T0 + 1000 * 11 + 5001)  # the newest record (offset 11) is 5001 ms old
    part = _open(path, clock, **{"retention.ms": 5000})
    result = retention.delete_old_segments(part)
    assert [d.base for d in result.deletions] == [0, 4, 8] and result.rolled_at == 12
    assert part.log_start_offset == 12 and part.next_offset == 12
    part.append_records([(b"k", b"after", clock.now, [])])
    part.close()
    assert _segment_bases(path) == [12]
    assert _kafka_python_offsets(path) == [12]


def test_retention_ms_is_measured_from_the_largest_timestamp(tmp_path: Path) -> None:
    """deleteRetentionMsBreachedSegments: ``now - segment.largestTimestamp > retention.ms``, oldest first."""
    path = _build(tmp_path / "logs" / "t-0", segments=4)
    # segment 4..7 has largest timestamp T0 + 7000: exactly 5000 old is kept (strictly greater deletes)
    part = _open(path, Clock(T0 + 7000 + 5000), **{"retention.ms": 5000})
    result = retention.delete_old_segments(part)
    assert [d.base for d in result.deletions] == [0]
    part.close()


def test_largest_timestamp_falls_back_to_mtime(tmp_path: Path) -> None:
    """LogSegment.largestTimestamp: the file's lastModified when no record has a timestamp (>= 0)."""
    path = tmp_path / "logs" / "t-0"
    part = Partition(str(path), KafkaConfig(), writable=True, clock=Clock())
    part.append_records([(b"k", b"v", -1, [])])
    part.log.active.on_become_inactive()
    part.log.roll(part.next_offset).make_appendable()
    part.append_records([(b"k", b"v", -1, [])])
    part.close()
    old = path / f"{0:020d}.log"
    os.utime(old, ns=(T0 * 1_000_000, T0 * 1_000_000))
    part = _open(path, Clock(T0 + 10_000), **{"retention.ms": 9_999})
    info = retention.segment_info(part.segments[0])
    assert info.largest_timestamp == T0
    assert [d.base for d in retention.delete_old_segments(part).deletions] == [0]
    part.close()


def _pre_0_10_1_log_dir(tmp_path: Path, *, clean: bool) -> Path:
    """A log dir holding ``old-0`` as a Kafka 0.10.0 broker left it: v1 messages with timestamps (from
    1_600_000_000_000), a ``.index`` and no ``.timeindex`` (0.10.1 brought it) in segments 0 and 4, the
    recovery point at the log end and the clean-shutdown marker where ``clean``, else the recovery point
    at 0 (a crash before the first flush: the broker's next load recovers every segment)."""
    logs = tmp_path / "logs"
    part = logs / "old-0"
    part.mkdir(parents=True)
    pre_0_10_1_segments(part)
    write_offsets(str(logs / "recovery-point-offset-checkpoint"), {("old", 0): 8 if clean else 0})
    if clean:
        (logs / ".kafka_cleanshutdown").write_bytes(b"")
    for log in part.glob("*.log"):       # written (their last modification) at T0
        os.utime(log, ns=(T0 * 1_000_000, T0 * 1_000_000))
    return logs


@pytest.mark.parametrize("opened", ["log dir", "partition dir"])
@pytest.mark.parametrize("clean", [True, False], ids=["clean shutdown", "unclean"])
def test_segments_without_a_time_index_are_retained_by_their_files_mtime(tmp_path: Path, capsys, clean: bool,
                                                                           opened: str) -> None:
    """Kafka 3.8.0 loads a segment whose ``.timeindex`` is missing with an empty one
    (``LogLoader.loadSegmentFiles``: ``timeIndexFileNewlyCreated``, ``LogSegment.sanityCheck``:
    ``timeIndex().resize(0)``) and rebuilds it only where it recovers the segment (``LogLoader.recoverLog``
    after an unclean shutdown, from the recovery point).  Its ``maxTimestampSoFar`` is the time index's
    last entry (``readMaxTimestampAndOffsetSoFar``: ``timeIndex().lastEntry()``, -1 for an empty one), so
    ``largestTimestamp``, what ``retention.ms`` is measured from (``UnifiedLog.deleteOldSegments``), is
    the ``.log`` file's ``lastModified`` even where its v1 messages have timestamps: the records of
    0.10.0 from 2020 are retained by the file's time.  segstore took the records' timestamps and deleted
    the segments a 3.8 broker keeps."""
    logs = _pre_0_10_1_log_dir(tmp_path, clean=clean)
    target = logs if opened == "log dir" else logs / "old-0"
    code, out, err = _run(capsys, "retention", str(target), "--config", "retention.ms=5000", "--now-ms",
                          str(T0 + 1000), "--json")
    assert code == 0, err
    (result,) = [json.loads(line) for line in out.splitlines()]
    if clean:       # 1 s past the files' time: kept
        assert result["deleted_segments"] == []
        assert _segment_bases(logs / "old-0") == [0, 4]
    else:           # rebuilt from the records: their 2020 timestamps are past retention.ms
        assert [d["base_offset"] for d in result["deleted_segments"]] == [0, 4]
    assert not list((logs / "old-0").glob("*.deleted"))


def test_a_time_lookup_searches_segments_without_a_time_index_up_to_their_files_mtime(tmp_path: Path) -> None:
    """Kafka 3.8.0 ``UnifiedLog.fetchOffsetByTimestamp`` searches the first segment whose ``largestTimestamp``
    is at or past the time (``searchOffsetInLocalLog``: ``segmentsCopy.find(_.largestTimestamp >=
    targetTimestamp)``), and that segment alone: for a segment loaded without a time index, its file's
    ``lastModified``; its records then answer (``LogSegment.findOffsetByTimestamp``:
    ``searchForTimestamp`` from the empty index's position 0), none where all are older, though segment
    4 holds offset 5 (segstore went on to it).  The max-timestamp lookup (``MAX_TIMESTAMP``) finds no
    batch of the empty index's -1 there.  A filter's start (``first_offset_from_time``) searches on."""
    logs = _pre_0_10_1_log_dir(tmp_path, clean=True)
    with segstore.open(logs / "old-0") as store:
        assert store.offset_for_time("old", 0, 1_600_000_000_002) == 2
        assert store.offset_for_time("old", 0, 1_600_000_000_005) is None   # segment 0's mtime reaches it
        assert store.offset_for_time("old", 0, T0 + 1) is None      # past the files' mtime
        assert store.partition_of("old", 0).offset_for_time(-3) is None
        assert store.first_offset_from_time("old", 0, 1_600_000_000_005) == 5
        assert store.offsets_between("old", 0, 1_600_000_000_005) == (8, 8)      # kcat -o s@T: none


#: segment 4's records of v0_then_v2_segments are stamped T_V2 + their offset
T_V2 = 1_600_000_000_000


@pytest.mark.parametrize("mtime", ["after the records", "before them"])
def test_a_time_lookup_over_v0_messages_answers_as_kafka(tmp_path: Path, capsys, monkeypatch, mtime: str
                                                          ) -> None:
    """v0 messages (Kafka before 0.10.0) carry no timestamp: segment 0's ``maxTimestampSoFar`` is -1 (its
    empty ``.timeindex``'s last entry), so Kafka 3.8.0 ``LogSegment.largestTimestamp`` is its file's
    ``lastModified``, and ``UnifiedLog.searchOffsetInLocalLog`` searches that segment alone for every time
    up to it: ``FileRecords.searchForTimestamp`` finds no batch whose max timestamp (-1) reaches the time,
    and ListOffsets answers none, though segment 4's v2 records are stamped after it (segstore went on
    to segment 4 and answered its offsets).  Past the file's mtime segment 4 answers.  ``query
    --timestamp`` prints no record (exit 1), as kafka-get-offsets, and says why and where the first later
    record is; a filter's start (Spark's pruning, ``first_offset_from_time``) still reads segment 4."""
    from kafka_messages import v0_then_v2_segments

    part = tmp_path / "old-0"
    part.mkdir()
    v0_then_v2_segments(part)
    written = T0 if mtime == "after the records" else 1_600_000_000_000
    os.utime(part / f"{0:020d}.log", ns=(written * 1_000_000, written * 1_000_000))
    times = (1_600_000_000_004, 1_600_000_000_006)
    with segstore.open(part) as store:
        found = {t: store.offset_for_time("old", 0, t) for t in times}
        offsets = {t: t - T_V2 for t in times}
        assert found == ({t: None for t in times} if mtime == "after the records" else offsets)
        assert {t: store.first_offset_from_time("old", 0, t) for t in times} == offsets
        assert store.partition_of("old", 0).offset_for_time(-3).offset == 7         # MAX_TIMESTAMP
        # the library's why (dump --begin's words), none where the lookup answers or the window holds none
        why = store.time_lookup_miss("old", 0, 1_600_000_000_006)
        if mtime == "after the records":
            assert why is not None and why.startswith("as Kafka 3.8 ListOffsets answers it: ")
        else:
            assert why is None
        assert store.time_lookup_miss("old", 0, 1_600_000_000_006, 1_600_000_000_005) is None
        with pytest.raises(ConfigError, match="expected an end time in ms since the epoch, found str"):
            store.time_lookup_miss("old", 0, 1_600_000_000_006, "later")
    code, out, err = _run(capsys, "query", str(part), "--topic", "old", "--partition", "0", "--timestamp",
                          "1600000000006")
    assert (code, out.count("offset: 6 ")) == ((1, 0) if mtime == "after the records" else (0, 1))
    if mtime == "after the records":      # why none, though records are stored after the time
        assert err.startswith("segstore query: old-0: none, as Kafka 3.8 ListOffsets answers it: ")
        assert f"segment 0, where its largest timestamp (no record timestamp known: v0 messages, or no " \
               f".timeindex; its file's mtime, {T0}, taken) reaches it" in err
        assert err.rstrip().endswith("offset 6 (timestamp 1600000000006) of a later segment is the first "
                                     "record at or after it (--offset 6 reads from there)")
    # dump --begin seeks as a consumer does (ListOffsets), so prints none there either, and says why in
    # the same words; a window whose records are all before that first later record has nothing to say
    code, out, err = _run(capsys, "dump", str(part), "--begin", "1600000000006")
    assert code == (1 if mtime == "after the records" else 0)
    assert out.count("| offset: ") == (0 if mtime == "after the records" else 2)
    if mtime == "after the records":
        lines = err.splitlines()
        assert lines[0] == ("segstore dump: old/0: no message stored from 2020-09-13T12:26:40.006Z "
                            "(1600000000006)")
        assert lines[1].startswith("segstore dump: old-0: nothing dumped from 1600000000006, as Kafka 3.8 "
                                   "ListOffsets answers it: its lookup searches only the first segment ")
        assert lines[1].endswith("offset 6 (timestamp 1600000000006) of a later segment is the first record "
                                 "at or after it") and len(lines) == 2
        code, _, err = _run(capsys, "dump", str(part), "--begin", "1600000000004", "--end", "1600000000004")
        assert code == 1 and "nothing dumped from 1600000000004, as Kafka 3.8" in err
        code, _, err = _run(capsys, "dump", str(part), "--begin", "1600000000002", "--end", "1600000000003")
        assert code == 1 and err.count("\n") == 1 and "Kafka 3.8" not in err
    else:
        assert err == ""
    if mtime == "after the records":     # a follow from --begin starts at the log end, and says why
        monkeypatch.setattr(cli, "_reader_gone", lambda out, seconds: True)      # one look, then done
        code, out, err = _run(capsys, "dump", str(part), "--begin", "1600000000006", "--follow")
        assert (code, out) == (0, "")
        assert err.startswith("segstore dump: old-0: following from offset 8, as Kafka 3.8 ListOffsets "
                              "answers it: ") and err.count("\n") == 1


def test_a_dump_from_a_time_notes_a_partition_the_lookup_passes_over(tmp_path: Path, capsys) -> None:
    """A log directory's dump --begin prints the partitions whose lookup finds records and notes on stderr
    each one whose lookup answers none though records are that new (segment 0 of v0 messages measured by
    its file's mtime, Kafka 3.8 UnifiedLog.searchOffsetInLocalLog), exit 0: it passed over it silently."""
    from kafka_messages import v0_then_v2_segments

    logs = tmp_path / "logs"
    (logs / "old-0").mkdir(parents=True)
    v0_then_v2_segments(logs / "old-0")
    os.utime(logs / "old-0" / f"{0:020d}.log", ns=(T0 * 1_000_000, T0 * 1_000_000))
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append(Message("new", b"v", partition=0, timestamp=T_V2 + 10))
    code, out, err = _run(capsys, "dump", str(logs), "--begin", str(T_V2 + 6))
    assert code == 0 and out.count("| offset: ") == 1
    assert err.startswith("segstore dump: note: old-0: nothing dumped from 1600000000006, as Kafka 3.8 "
                          "ListOffsets answers it: ") and err.count("\n") == 1


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_high_watermark_bounds_deletion(tmp_path: Path) -> None:
    """deletableSegments: a segment whose upper bound is above the high watermark is kept
    (replication-offset-checkpoint read beside the other log-dir checkpoints; updateHighWatermark clamps)."""
    logs = tmp_path / "logs"
    path = _build(logs / "t-0")
    write_offsets(str(logs / "replication-offset-checkpoint"), {("t", 0): 9})
    part = _open(path, **{"retention.bytes": 0})
    assert retention.high_watermark(part) == 9
    result = retention.delete_old_segments(part)
    assert [d.base for d in result.deletions] == [0, 4]  # segment 8..11 ends past offset 9
    part.close()
    write_offsets(str(logs / "replication-offset-checkpoint"), {("t", 0): 10_000})
    part = _open(path)
    assert retention.high_watermark(part) == part.next_offset == 24
    part.close()


def test_leader_epochs_truncated_from_the_new_start(tmp_path: Path) -> None:
    """maybeIncrementLogStartOffset: leaderEpochCache.truncateFromStart(logStartOffset)."""
    path = _build(tmp_path / "logs" / "t-0", epochs=True)
    sizes = [os.path.getsize(p) for p in sorted(path.glob("*.log"))]
    part = _open(path, **{"retention.bytes": sum(sizes[3:])})  # the last three segments stay
    assert [e.start_offset for e in part.epochs.entries] == [0, 8, 16]
    retention.delete_old_segments(part)
    assert part.log_start_offset == 12
    assert [tuple(e) for e in part.epochs.entries] == [(1, 12), (2, 16)]
    part.close()
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 12\n2 16\n"


def test_delete_records_moves_the_log_start_and_drops_whole_segments(tmp_path: Path) -> None:
    """Partition.deleteRecordsOnLeader + maybeIncrementLogStartOffset, then
    deleteLogStartOffsetBreachedSegments (a segment goes when the next one starts at or below the start)."""
    logs = tmp_path / "logs"
    path = _build(logs / "t-0")
    with segstore.open(path, format="kafka", mode="a") as store:
        results = store.delete_records(10)
    assert results[0]["log_start_offset"] == 10
    assert [d["base_offset"] for d in results[0]["deleted_segments"]] == [0, 4]
    assert _segment_bases(path) == [8, 12, 16, 20]
    assert read_offsets(str(logs / "log-start-offset-checkpoint")) == {("t", 0): 10}
    with segstore.open(path) as store:  # LogLoader: max(checkpoint, first base)
        assert store.offset_range("t", 0) == (10, 24)
        assert [r.offset for r in store.read("t", 0, 0)] == list(range(10, 24))
        assert store.verify() == []
    with segstore.open(path, format="kafka", mode="a") as store:
        assert store.delete_records(5)[0]["log_start_offset"] == 10  # never backwards
        assert store.delete_records(-1)[0]["log_start_offset"] == 24  # -1: the high watermark
    assert _segment_bases(path) == [20]
    with pytest.raises(OffsetOutOfRangeError):
        with segstore.open(path, format="kafka", mode="a") as store:
            store.delete_records(25)


def test_delete_records_refused_without_the_delete_policy(tmp_path: Path) -> None:
    path = _build(tmp_path / "logs" / "t-0", segments=2)
    part = _open(path, **{"cleanup.policy": "compact"})
    with pytest.raises(ConfigError, match=r"cleanup\.policy"):
        retention.delete_records(part, 3)
    part.close()


def test_crash_after_the_checkpoint_completes_on_the_next_run(tmp_path: Path, monkeypatch) -> None:
    """The log start is durable before any rename; a crash there leaves whole segments that the next
    retention pass (deleteLogStartOffsetBreachedSegments) removes; stray .deleted files are removed on
    open (LogLoader.removeTempFilesAndCollectSwapFiles)."""
    logs = tmp_path / "logs"
    path = _build(logs / "t-0")

    def crash(segments):
        raise KeyboardInterrupt

    monkeypatch.setattr(retention, "delete_segment_files", crash)
    part = _open(path)
    with pytest.raises(KeyboardInterrupt):
        retention.delete_records(part, 9)
    part.abandon()
    monkeypatch.undo()
    assert _segment_bases(path) == [0, 4, 8, 12, 16, 20]
    (path / f"{0:020d}.index.deleted").write_bytes(b"x")
    part = _open(path)
    assert part.log_start_offset == 0  # the partition alone; the store applies the log-dir checkpoint
    assert not list(path.glob("*.deleted"))
    part.close()
    with segstore.open(path, format="kafka", mode="a") as store:
        assert store.offset_range("t", 0) == (9, 24)
        result = store.retention()[0]
    assert [d["base_offset"] for d in result["deleted_segments"]] == [0, 4]
    assert _kafka_python_offsets(path) == list(range(8, 24))


def test_a_crash_between_the_log_and_index_renames_is_finished_by_recover(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    """``delete_segment_files`` renames a segment's ``.log`` to ``.deleted`` before its indexes
    (``LocalLog.deleteSegmentFiles``); a crash between leaves ``.log.deleted`` and the indexes.  Kafka 3.8.0
    ``LogLoader.removeTempFilesAndCollectSwapFiles`` removes the ``.deleted`` file and
    ``LogLoader.loadSegmentFiles`` then deletes the indexes it orphaned ("Found an orphaned index file"):
    nothing is lost, the records are below the log start.  ``recover`` does both in one run."""
    logs = tmp_path / "logs"
    path = _build(logs / "t-0")
    real_rename = retention.files.rename

    def rename(src: str, dst: str) -> None:
        real_rename(src, dst)
        if src.endswith(".log"):
            raise KeyboardInterrupt

    monkeypatch.setattr(retention.files, "rename", rename)
    part = _open(path)
    with pytest.raises(KeyboardInterrupt):
        retention.delete_records(part, 4)
    part.abandon()
    monkeypatch.undo()
    base = f"{0:020d}"
    assert sorted(p.name for p in path.glob(f"{base}.*")) == [f"{base}.index", f"{base}.log.deleted",
                                                              f"{base}.timeindex"]
    assert main(["recover", str(logs)]) == 0
    out = capsys.readouterr().out
    assert f"{path / base}.log.deleted: removed" in out
    assert f"{path / base}.index: removed" in out and f"{path / base}.timeindex: removed" in out
    assert not list(path.glob(f"{base}.*"))
    assert main(["verify", str(logs)]) == 0
    assert main(["recover", str(logs)]) == 0
    with segstore.open(logs) as store:
        assert store.offset_range("t", 0) == (4, 24)
    assert _kafka_python_offsets(path) == list(range(4, 24))


def test_an_orphaned_index_with_no_deletion_beside_it_is_left_for_verify(tmp_path: Path) -> None:
    """Kafka's loader would delete an index whose ``.log`` is simply gone too, but those records are lost:
    segstore's writable open leaves it for ``verify`` to report (only a ``.log.deleted`` beside it says the
    deletion was meant)."""
    path = _build(tmp_path / "logs" / "t-0")
    (path / f"{0:020d}.log").unlink()
    _open(path).close()
    assert (path / f"{0:020d}.index").exists() and (path / f"{0:020d}.timeindex").exists()


def _tree(logs: Path) -> dict[str, bytes]:
    """The partitions' files, and the log starts (a writable open of the log dir writes its checkpoints
    on close, changed or not)."""
    tree = {str(p.relative_to(logs)): p.read_bytes() for p in sorted(logs.glob("*-0/*")) if p.is_file()}
    with segstore.open(logs) as store:
        return {**tree, **{t: str(store.offset_range(t, 0)[0]).encode() for t in ("t", "u")}}


def test_delete_records_over_a_log_dir_checks_every_partition_before_changing_any(tmp_path: Path,
                                                                                  capsys) -> None:
    """Kafka 3.8.0 ``Partition.deleteRecordsOnLeader`` answers each partition on its own
    (OFFSET_OUT_OF_RANGE past its high watermark).  segstore refuses the whole request instead, naming
    the partition, and changes nothing: t-0 sorts first and used to lose its segments below 9 before u-0
    (high watermark 4) raised, with nothing on stdout."""
    logs = tmp_path / "logs"
    _build(logs / "t-0")
    _build(logs / "u-0", segments=1)
    before = _tree(logs)
    assert main(["delete-records", str(logs), "--before", "9", "--json"]) == 2
    captured = capsys.readouterr()
    assert _tree(logs) == before
    assert captured.out == ""
    assert f"{logs / 'u-0'}: expected an offset of u-0 at most its high watermark 4, found 9" in captured.err
    with segstore.open(logs, format="kafka", mode="a") as store:
        with pytest.raises(OffsetOutOfRangeError, match="u-0"):
            store.delete_records(9)
    assert _tree(logs) == before
    # narrowed to the partitions it suits, it goes through
    assert main(["delete-records", str(logs), "--topic", "t", "--before", "9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["log_start_offset"] == 9
    assert _segment_bases(logs / "t-0") == [8, 12, 16, 20]


def test_log_dir_writes_the_replication_offset_checkpoint(tmp_path: Path) -> None:
    """ReplicaManager.HighWatermarkFilename: each partition's high watermark, beside the other checkpoints."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"x", partition=p, timestamp=1) for p in (0, 1, 1)])
    assert read_offsets(str(logs / "replication-offset-checkpoint")) == {("a", 0): 1, ("a", 1): 2}
    write_offsets(str(logs / "replication-offset-checkpoint"), {("a", 0): 0, ("a", 1): 7})
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"y", partition=0, timestamp=1)])
    # appended to: committed to its end; untouched: the read value clamped to the log end
    assert read_offsets(str(logs / "replication-offset-checkpoint")) == {("a", 0): 2, ("a", 1): 2}


def test_cli_retention_dry_run_then_apply(tmp_path: Path, capsys) -> None:
    path = _build(tmp_path / "logs" / "t-0")
    listing = sorted(p.name for p in path.iterdir())
    last = os.path.getsize(path / f"{20:020d}.log")
    args = [str(path), "--config", f"retention.bytes={last}", "--json"]
    assert main(["retention", *args, "--dry-run"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] and [d["base_offset"] for d in planned["deleted_segments"]] == [0, 4, 8, 12, 16]
    assert sorted(p.name for p in path.iterdir()) == listing
    assert main(["retention", *args]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["deleted_segments"] == planned["deleted_segments"] and done["log_start_offset"] == 20
    assert _segment_bases(path) == [20]
    assert main(["verify", str(path)]) == 0
    assert main(["delete-records", str(path), "--before", "99"]) == 2
    assert main(["delete-records", str(path), "--before", "22", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["log_start_offset"] == 22
    assert main(["retention", str(path), "--config", "retention.bogus=1"]) == 2


def test_a_real_run_over_a_log_dir_with_partitions_left_alone_is_no_dry_run(tmp_path: Path, capsys) -> None:
    """The partitions a run leaves alone (the KRaft metadata log for retention, an internal topic for
    DeleteRecords) said ``dry_run: true`` in a real run, so the summary of a run that had deleted
    segments read "retention (dry run): 1 partition would change ...; nothing was changed"."""
    from conftest import FIXTURES, copy_writable

    logs = copy_writable(FIXTURES / "real" / "kraft-confluent-7.5.1", tmp_path / "logs")
    _build(logs / "t-0")
    last = os.path.getsize(logs / "t-0" / f"{20:020d}.log")
    assert main(["retention", str(logs), "--config", f"retention.bytes={last}"]) == 0
    out = capsys.readouterr().out
    assert "t-0: deleted 5 segments, offsets 0-19" in out
    assert out.endswith("retention: 1 partition changed, 53 unchanged\n"), out
    assert "dry run" not in out and _segment_bases(logs / "t-0") == [20]
    assert main(["retention", str(logs), "--config", "retention.ms=0", "--json"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert not any(r["dry_run"] for r in results)
    assert [r["topic"] for r in results if "skipped" in r] == ["__cluster_metadata"]
    # DeleteRecords leaves the internal topics of a whole log dir alone, in a real run as such
    assert main(["delete-records", str(logs), "--topic", "t", "--before", "22"]) == 0
    capsys.readouterr()
    _build(tmp_path / "logs2" / "__consumer_offsets-0")
    _build(tmp_path / "logs2" / "t-0")
    assert main(["delete-records", str(tmp_path / "logs2"), "--before", "9"]) == 0
    out = capsys.readouterr().out
    assert "__consumer_offsets-0: skipped: internal topic" in out and "t-0: deleted 2 segments" in out
    assert out.endswith("delete-records: 1 partition changed, 1 unchanged\n"), out
    assert main(["delete-records", str(tmp_path / "logs2"), "--before", "10", "--dry-run", "--json"]) == 0
    assert all(json.loads(line)["dry_run"] for line in capsys.readouterr().out.splitlines())


@pytest.mark.parametrize("opened", ["log dir", "partition"])
def test_a_malformed_log_start_checkpoint_is_replaced_not_a_half_done_run(tmp_path: Path, capsys,
                                                                          opened: str) -> None:
    """Kafka 3.8.0 ``LogManager.loadLogs`` reads a malformed ``log-start-offset-checkpoint`` as empty
    ("resetting to the base offset of the first segment") and its next ``checkpointLogStartOffsetsInDir``
    replaces it.  segstore read it so at open but refused it when writing the new log start: the run
    failed (exit 1) after the leader epochs were cut to the new start (and, for retention deleting every
    segment, a segment rolled), leaving every old segment and a log start of 0 beside a
    ``leader-epoch-checkpoint`` starting at the new one."""
    logs = tmp_path / "logs"
    path = _build(logs / "t-0", epochs=True)
    (logs / "log-start-offset-checkpoint").write_text("0\n2\nt 0 5\n")     # says 2 entries, holds 1
    target = logs if opened == "log dir" else path
    assert main(["delete-records", str(target), "--before", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["log_start_offset"] == 10
    assert _segment_bases(path) == [8, 12, 16, 20]
    assert read_offsets(str(logs / "log-start-offset-checkpoint")) == {("t", 0): 10}
    assert (path / "leader-epoch-checkpoint").read_text().splitlines()[2:] == ["1 10", "2 16"]
    with segstore.open(path) as store:
        assert store.offset_range("t", 0) == (10, 24)
        assert store.verify() == []


def test_now_ms_takes_an_iso_time_as_the_other_commands(tmp_path: Path, capsys) -> None:
    """``--now-ms T`` of retention and compact took only milliseconds (a usage error for
    ``2023-11-14T22:13:40Z``), where consumers and transactions take milliseconds or ISO-8601 as
    docs/cli.md says of every time option."""
    path = _build(tmp_path / "logs" / "t-0")
    iso = "2023-11-14T22:13:40Z"              # T0 + 20000 ms
    assert main(["retention", str(path), "--config", "retention.ms=5000", "--now-ms", iso,
                 "--dry-run", "--json"]) == 0
    by_iso = json.loads(capsys.readouterr().out)
    assert main(["retention", str(path), "--config", "retention.ms=5000", "--now-ms", str(T0 + 20_000),
                 "--dry-run", "--json"]) == 0
    assert by_iso == json.loads(capsys.readouterr().out) and by_iso["deleted_segments"]
    assert main(["compact", str(path), "--config", "cleanup.policy=compact", "--now-ms", iso,
                 "--dry-run"]) == 0
