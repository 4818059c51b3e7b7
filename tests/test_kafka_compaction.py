"""Kafka log compaction, rule by rule against Kafka 3.8.0's cleaner.

Sources (apache/kafka 3.8.0):
- core/src/main/scala/kafka/log/LogCleaner.scala: Cleaner.doClean, buildOffsetMap, groupSegmentsBySize,
  cleanSegments, cleanInto, shouldRetainRecord, CleanedTransactionMetadata
- core/src/main/scala/kafka/log/LogCleanerManager.scala: cleanableOffsets, calculateCleanableBytes
  (LogToClean in LogCleaner.scala)
- core/src/main/scala/kafka/log/LocalLog.scala: collectAbortedTransactions;
  storage/.../log/TransactionIndex.java: collectAbortedTxns
- clients/src/main/java/org/apache/kafka/common/record/MemoryRecords.java: filterTo,
  buildRetainedRecordsInto; DefaultRecordBatch.writeEmptyHeader
- core/src/main/scala/kafka/log/LocalLog.scala: replaceSegments; LogLoader.scala:
  removeTempFilesAndCollectSwapFiles and the swap passes of load
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from segstore_kafka import arrowencode, compaction
from segstore_kafka import batch as codec
from segstore_kafka.batch import iter_batches
from segstore_kafka.checkpoints import read_offsets, write_offsets
from segstore_kafka.offsetindex import OFFSET_ENTRY
from segstore_kafka.partition import KafkaConfig, Partition
from segstore_kafka.timeindex import TIME_ENTRY
from segstore_kafka.txnindex import AbortedTxn, TransactionIndex

import segstore
from segstore.cli import main

T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _open(path: Path, clock: Clock | None = None, **config: object) -> Partition:
    return Partition(str(path), KafkaConfig.from_mapping({"cleanup.policy": "compact", **config}),
                     writable=True, clock=clock or Clock())


def _roll(part: Partition) -> None:
    part.log.active.on_become_inactive()
    part.log.roll(part.next_offset).make_appendable()


def _records(path: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of each data record as kafka-python reads the ``.log`` files (CRC checked)."""
    out = []
    for log in sorted(path.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
            if not batch.is_control_batch:
                out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def _batches(path: Path) -> list:
    return [b for log in sorted(path.glob("*.log")) for b in iter_batches(log.read_bytes(), path=str(log))]


def _build(path: Path, rng: random.Random, *, segments: int = 5, per_segment: int = 6,
           tombstone_rate: float = 0.15) -> list[tuple[int, bytes, bytes | None]]:
    part = _open(path)
    written = []
    for s in range(segments):
        if s:
            _roll(part)
        for _ in range(per_segment):
            batch = []
            for _ in range(rng.randrange(1, 4)):
                key = b"k%d" % rng.randrange(8)
                value = None if rng.random() < tombstone_rate else rng.randbytes(rng.randrange(1, 40))
                batch.append((key, value, T0 + len(written), []))
                written.append((part.next_offset + len(batch) - 1, key, value))
            part.append_records(batch, compression=rng.choice(["none", "gzip"]))
    part.close()
    return written


def _expected(written, end: int) -> list[tuple[int, bytes, bytes | None]]:
    """The records a first clean keeps (shouldRetainRecord): below ``end`` the latest per key, tombstones
    included (their batches get a delete horizon now); from ``end`` on everything."""
    latest = {key: off for off, key, _ in written if off < end}
    return [(o, k, v) for o, k, v in written if o >= end or latest[k] == o]


@pytest.mark.parametrize("seed", range(6))
def test_latest_record_per_key_offsets_kept(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "logs" / "t-0"
    written = _build(path, random.Random(seed))
    active_before = (path / sorted(p.name for p in path.glob("*.log"))[-1]).read_bytes()
    before = {b.base_offset: (b.last_offset, b.producer_id) for b in _batches(path)}
    part = _open(path)
    result = compaction.compact_partition(part)
    part.close()
    end = result.end_offset
    # the offset map ends after the last record below the active segment (the first uncleanable offset)
    assert result.first_uncleanable_offset == int(sorted(p.name for p in path.glob("*.log"))[-1][:20])
    assert end == max(o for o, _, _ in written if o < result.first_uncleanable_offset) + 1
    assert _records(path) == _expected(written, end) != [(o, k, v) for o, k, v in written]
    # offsets kept: every surviving batch has the base and last offset it had
    for b in _batches(path):
        assert before[b.base_offset][0] == b.last_offset
    # the active segment is never cleaned
    assert (path / sorted(p.name for p in path.glob("*.log"))[-1]).read_bytes() == active_before
    assert not [p for p in path.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert read_offsets(str(tmp_path / "logs" / "cleaner-offset-checkpoint")) == {("t", 0): end}
    with segstore.open(path) as store:
        assert store.verify() == []
        assert [(r.offset, r.key, r.value) for r in store.read("t", 0, 0)] == _expected(written, end)


def test_tombstones_get_a_delete_horizon_then_go(tmp_path: Path) -> None:
    """A tombstone's batch gets deleteHorizonMs = now + delete.retention.ms on its first clean
    (MemoryRecords.filterTo, needToSetDeleteHorizon); a later clean at or past it drops the tombstone."""
    path = tmp_path / "logs" / "t-0"
    clock = Clock()
    part = _open(path, clock, **{"delete.retention.ms": 1000})
    part.append_records([(b"a", b"1", T0, []), (b"b", b"1", T0, [])])
    part.append_records([(b"a", None, T0, [])])
    _roll(part)
    part.append_records([(b"c", b"1", T0, [])])
    compaction.compact_partition(part)
    tomb = next(b for b in _batches(path) if any(r.value is None for r in b.records()))
    assert tomb.delete_horizon_ms == T0 + 1000
    assert _records(path)[:2] == [(1, b"b", b"1"), (2, b"a", None)]

    def clean_again(now: int) -> None:
        _roll(part)
        part.append_records([(b"z", b"1", now, [])])
        _roll(part)
        part.append_records([(b"y", b"1", now, [])])
        clock.now = now
        compaction.compact_partition(part)

    clean_again(T0 + 999)
    assert (2, b"a", None) in _records(path)
    clean_again(T0 + 1000)
    assert (2, b"a", None) not in _records(path) and (1, b"b", b"1") in _records(path)
    part.close()
    with segstore.open(path) as store:
        assert store.verify() == []


def test_a_delete_horizon_past_a_long_is_refused_before_anything_changes(tmp_path: Path, capsys) -> None:
    """MemoryRecords.filterTo (Kafka 3.8.0) sets ``deleteHorizonMs = filter.currentTime +
    filter.deleteRetentionMs``, a Java long sum: delete.retention.ms=Long.MAX_VALUE (a common "forever")
    wraps it negative and the next clean drops the tombstones.  segstore's encoder got the unbounded sum
    and the command died with an OverflowError traceback, part of the log already swapped; it now refuses
    the value (exit 2) before any change, naming the largest that fits."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    part.append_records([(b"a", b"1", T0, []), (b"b", b"1", T0, [])])
    part.append_records([(b"a", None, T0, [])])
    _roll(part)
    part.append_records([(b"c", b"1", T0, [])])
    part.close()
    listing = {p.name: p.read_bytes() for p in path.iterdir()}
    forever = ["--config", "cleanup.policy=compact", "--config", f"delete.retention.ms={2**63 - 1}",
               "--now-ms", str(T0)]
    for dry in ([], ["--dry-run"]):
        assert main(["compact", str(path), *forever, *dry]) == 2
        err = capsys.readouterr().err
        assert f"expected delete.retention.ms of t at most {2**63 - 1 - T0}" in err and "Traceback" not in err
        assert {p.name: p.read_bytes() for p in path.iterdir()} == listing
    with pytest.raises(SystemExit, match="2"):      # argparse's: no long
        main(["compact", str(path), "--config", "cleanup.policy=compact", "--now-ms", str(2**64)])
    err = capsys.readouterr().err
    assert "expected milliseconds since the epoch (a Java long) or an ISO-8601 time, found " \
           "18446744073709551616" in err
    assert main(["compact", str(path), "--config", "cleanup.policy=compact", "--config",
                 f"delete.retention.ms={2**63 - 1 - T0}", "--now-ms", str(T0)]) == 0
    tomb = next(b for b in _batches(path) if any(r.value is None for r in b.records()))
    assert tomb.delete_horizon_ms == 2**63 - 1


def test_transactions_as_the_cleaner_treats_them(tmp_path: Path) -> None:
    """Aborted data goes; the ABORT marker stays (with its .txnindex entry) while batches of its transaction
    were seen; the batch holding an active producer's last data offset is kept as an empty header
    (BatchRetention.RETAIN_EMPTY); a COMMIT marker stays while its transaction's batches do."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    part.append_records([(b"a", b"x", T0, [])], producer_id=7, producer_epoch=0, base_sequence=0,
                        transactional=True)
    part.append_records([(b"b", b"x", T0, [])], producer_id=8, producer_epoch=0, base_sequence=0,
                        transactional=True)
    part.append_control("ABORT", producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=T0)
    part.append_control("COMMIT", producer_id=8, producer_epoch=0, coordinator_epoch=0, timestamp=T0)
    part.append_records([(b"c", b"x", T0, [])])
    _roll(part)
    part.append_records([(b"d", b"x", T0, [])])
    compaction.compact_partition(part, now_ms=T0 + 10)
    part.close()
    kinds = [(b.base_offset, b.record_count, b.producer_id, b.control_type() if b.is_control else None)
             for b in _batches(path)]
    assert kinds == [(0, 0, 7, None),      # aborted, but producer 7's last data offset: an empty header
                     (1, 1, 8, None), (2, 1, 7, "ABORT"), (3, 1, 8, "COMMIT"), (4, 1, -1, None),
                     (5, 1, -1, None)]
    assert _records(path) == [(1, b"b", b"x"), (4, b"c", b"x"), (5, b"d", b"x")]
    txn = (path / f"{0:020d}.txnindex").read_bytes()
    assert len(txn) == 34  # the kept ABORT marker's entry (CleanedTransactionMetadata.cleanedIndex)
    abort = next(b for b in _batches(path) if b.control_type() == "ABORT")
    assert abort.delete_horizon_ms == -1  # batches of its transaction were seen: no empty-txn horizon


@pytest.mark.parametrize("lag", [False, True])
def test_an_aborted_transaction_indexed_past_an_entry_with_a_lower_lso_is_found(tmp_path: Path,
                                                                                lag: bool) -> None:
    """Kafka 3.8.0 TransactionIndex.collectAbortedTxns stops at the first entry whose lastStableOffset is
    at or past the upper bound, and LocalLog.collectAbortedTransactions walks later segments until then.
    Producer 2 aborts x@1 with its marker two segments on; producer 1's entry in between (marker 3) has
    last stable offset 1, below the bound 2 of segment 0, so the search goes on and finds producer 2's
    (first offset 1).  Cleaner.buildOffsetMap and cleanSegments then treat x@1 as aborted: x@0 stays the
    key's latest, x@1 goes (an empty header: producer 2 is active), both markers keep their entries.
    segstore stopped at producer 1's entry (its marker past the bound): x@1 came back for read_committed,
    and with min.compaction.lag.ms bounding the clean at 2, the committed x@0 was deleted."""
    path = tmp_path / "logs" / "t-0"
    later = T0 + 100_000 if lag else T0
    part = _open(path, **({"min.compaction.lag.ms": 1000} if lag else {}))
    txn = {"producer_epoch": 0, "base_sequence": 0, "transactional": True}
    part.append_records([(b"x", b"committed", T0, [])])
    part.append_records([(b"x", b"aborted-2", T0 + 1, [])], producer_id=2, **txn)
    _roll(part)
    part.append_records([(b"y", b"aborted-1", later + 2, [])], producer_id=1, **txn)
    part.append_control("ABORT", producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=later + 3)
    _roll(part)
    part.append_control("ABORT", producer_id=2, producer_epoch=0, coordinator_epoch=0, timestamp=later + 4)
    _roll(part)
    part.append_records([(b"z", b"1", later + 5, [])])
    entries = [AbortedTxn(1, 2, 3, 1), AbortedTxn(2, 1, 4, 5)]
    assert [t for s in part.segments for t in s.txn_index.all()] == entries
    # producer 1's starts at the bound (not in [0, 2)) but does not end the search; producer 2's does
    assert compaction.aborted_between(part, 0, 2) == [entries[1]]
    result = compaction.compact_partition(part, now_ms=later + 10)
    part.close()
    assert result.groups == ([[0]] if lag else [[0, 2, 4]])
    uncleaned = [(2, b"y", b"aborted-1")] if lag else []     # segment 2 is newer than the lag
    assert _records(path) == [(0, b"x", b"committed"), *uncleaned, (5, b"z", b"1")]
    with segstore.open(path) as store:
        assert [r.offset for r in store.read("t", 0, isolation="read_committed")] == [0, 5]
        assert store.verify() == []
    if not lag:   # the cleaned index keeps both kept markers' entries (CleanedTransactionMetadata)
        assert TransactionIndex(str(path / f"{0:020d}.txnindex")).all() == entries


def test_idle_producers_are_not_kept(tmp_path: Path) -> None:
    """Past producer.id.expiration.ms the producer is not active: its aborted batch goes whole."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    part.append_records([(b"a", b"x", T0, [])], producer_id=7, producer_epoch=0, base_sequence=0,
                        transactional=True)
    part.append_control("ABORT", producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=T0)
    _roll(part)
    part.append_records([(b"d", b"x", T0, [])])
    compaction.compact_partition(part, now_ms=T0 + DAY + 1)
    part.close()
    assert [b.base_offset for b in _batches(path)] == [1, 2]


def test_open_transaction_and_compaction_lag_bound_the_clean(tmp_path: Path) -> None:
    """cleanableOffsets: the first uncleanable offset is the least of the last stable offset (an open
    transaction), the active segment and the first segment newer than min.compaction.lag.ms."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path, **{"min.compaction.lag.ms": 1000})
    part.append_records([(b"a", b"1", T0, [])])
    _roll(part)
    part.append_records([(b"a", b"2", T0 + 5000, [])])
    _roll(part)
    part.append_records([(b"a", b"3", T0 + 5000, [])])
    assert compaction.cleanable_offsets(part, T0 + 5500) == (0, 1)
    assert compaction.cleanable_offsets(part, T0 + 7000) == (0, 2)
    part.append_records([(b"t", b"1", T0, [])], producer_id=3, producer_epoch=0, base_sequence=0,
                        transactional=True)
    _roll(part)
    part.append_records([(b"a", b"4", T0 + 5000, [])])
    assert compaction.cleanable_offsets(part, T0 + 7000) == (0, 3)  # the open transaction at 3
    # LogToClean (calculateCleanableBytes): down to the base of the segment holding it
    assert compaction.cleanable_range(part, T0 + 7000) == (0, 2)
    part.close()


def test_compaction_lag_of_a_segment_without_timestamps_is_its_files_mtime(tmp_path: Path) -> None:
    """LogCleanerManager.cleanableOffsets (Kafka 3.8.0) measures min.compaction.lag.ms against
    ``LogSegment.largestTimestamp``: a segment with no record timestamp (an empty one, as a clean that
    kept nothing of it leaves) counts by its ``.log`` file's mtime, so a recent empty segment bounds the
    clean as a recent record would."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    for value in (b"1", b"2", b"3"):
        part.append_records([(b"a", value, T0, [])])
        _roll(part)
    part.append_records([(b"a", b"4", T0, [])])
    part.close()
    for suffix in (".log", ".index", ".timeindex"):     # segment 1 emptied: nothing left of it but files
        (path / f"{1:020d}{suffix}").write_bytes(b"")
    part = _open(path, **{"min.compaction.lag.ms": 1000})
    empty = part.log.segments.floor(1)
    assert empty is not None and empty.base == 1 and empty.size == 0
    now = T0 + 10_000
    os.utime(empty.path, ns=(now * 1_000_000, (now - 500) * 1_000_000))   # written 500 ms ago
    assert compaction.cleanable_offsets(part, now) == (0, 1)
    os.utime(empty.path, ns=(now * 1_000_000, (now - 5000) * 1_000_000))  # 5 s ago: past the lag
    assert compaction.cleanable_offsets(part, now) == (0, 3)                 # the active segment's base
    part.close()


def test_the_map_of_a_segment_ending_in_a_gap_reaches_the_next_segment(tmp_path: Path) -> None:
    """Kafka 3.8.0 ``Cleaner.buildOffsetMapForSegment`` ends each segment it maps whole with
    ``map.updateLatestOffset(nextSegmentStartOffset - 1)`` ("In the case of offsets gap, fast forward"),
    so the clean of a log whose last dirty segment ends in a gap (its last records compacted away, the
    cleaner-offset-checkpoint gone) checkpoints the next segment's base.  segstore stopped at the last
    batch read: it checkpointed 6 of a segment ending at 5 beside one at 8, the next run mapped nothing
    from 6 and checkpointed 0, and every later run cleaned the whole log again."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    for key in (b"a", b"b", b"c", b"d"):
        part.append_records([(key, b"1", T0, [])])
    _roll(part)
    for key in (b"a", b"b", None, None):                     # 6 and 7: keyless, dropped by the clean
        # (unvalidated, as a follower copies them: a leader refuses them, LogValidator.validateKey)
        part.append_records([(key, b"2", T0, [])], check_times=False)
    _roll(part)
    part.append_records([(b"z", b"3", T0, [])])
    part.close()
    checkpoint = tmp_path / "logs" / "cleaner-offset-checkpoint"
    ends = []
    for _ in range(2):
        part = _open(path)
        ends.append(compaction.compact_partition(part).end_offset)
        part.close()
        assert read_offsets(str(checkpoint)) == {("t", 0): 8}
        checkpoint.unlink()                     # a copy without it: the whole log is dirty again
    assert ends == [8, 8]
    part = _open(path)
    compaction.compact_partition(part)
    part.close()
    part = _open(path)
    again = compaction.compact_partition(part)           # clean: nothing to do, the checkpoint stays
    part.close()
    assert again.passes == 0 and read_offsets(str(checkpoint)) == {("t", 0): 8}


class _Seg:
    """What ``groupSegmentsBySize`` reads of a segment: base offset, size, index entries."""

    def __init__(self, base: int, size: int = 100) -> None:
        self.base, self.size = base, size
        self.offset_index: list[int] = []
        self.time_index: list[int] = []


def test_a_group_holds_no_offset_past_32_bits_of_its_first_segments_base() -> None:
    """Kafka 3.8.0 ``Cleaner.groupSegmentsBySize`` adds a segment while its last offset (the next base - 1,
    or the first uncleanable offset - 1) less ``group.last.baseOffset`` fits an Int: the group is built
    by prepending, so ``group.last`` is its *first* segment, whose base the cleaned segment takes.
    segstore measured from the group's newest segment instead, so a group could hold offsets 2^31 and
    more past the cleaned segment's base: relative offsets its indexes cannot hold."""
    bases = [0, 2**30, 2**31 - 5]
    segs = [_Seg(b) for b in bases]
    groups = compaction.group_segments(segs, 1 << 30, 1 << 20, 2**31 + 100)   # type: ignore[arg-type]
    assert [[s.base for s in g] for g in groups] == [[0, 2**30], [2**31 - 5]]
    # an empty segment is taken whatever its offsets ("avoid empty log left every 2^31 message")
    segs = [_Seg(0), _Seg(2**30), _Seg(2**31 - 5, size=0)]
    groups = compaction.group_segments(segs, 1 << 30, 1 << 20, 2**31 + 100)   # type: ignore[arg-type]
    assert [[s.base for s in g] for g in groups] == [[0, 2**30, 2**31 - 5]]


def _three_then_active(path: Path, *, open_transaction: bool) -> Partition:
    """Segment 0 holding offsets 0-2 (a@0, a@1, then b@2: an open transaction's or plain), active
    segment 3."""
    part = _open(path)
    part.append_records([(b"a", b"1", T0, [])])
    part.append_records([(b"a", b"2", T0 + 1, [])])
    if open_transaction:
        part.append_records([(b"b", b"open", T0 + 2, [])], producer_id=9, producer_epoch=0, base_sequence=0,
                            transactional=True)
    else:
        part.append_records([(b"b", b"1", T0 + 2, [])])
    _roll(part)
    part.append_records([(b"c", b"1", T0 + 3, [])])
    return part


@pytest.mark.parametrize("bound", ["open transaction", "high watermark"])
def test_the_segment_holding_the_last_stable_offset_is_not_cleaned(tmp_path: Path, bound: str) -> None:
    """Kafka 3.8.0 LogCleaner.scala LogToClean: LogCleanerManager.cleanableOffsets answers the last stable
    offset (2: an open transaction's first offset, or the high watermark), and calculateCleanableBytes
    replaces it with the base of the segment holding it (nonActiveLogSegmentsFrom(2).head, base 0): the
    cleaner maps and cleans nothing, and writes no cleaner-offset-checkpoint.  segstore cleaned offsets
    0-1 inside that segment (a@0 dropped) and checkpointed 2."""
    path = tmp_path / "logs" / "t-0"
    part = _three_then_active(path, open_transaction=bound == "open transaction")
    if bound == "high watermark":
        part.flush()
        write_offsets(str(tmp_path / "logs" / "replication-offset-checkpoint"), {("t", 0): 2})
    def segment_0() -> dict[str, bytes]:     # (the active segment's indexes are trimmed on close)
        return {p.name: p.read_bytes() for p in path.iterdir() if p.name.startswith(f"{0:020d}")}

    before = segment_0()
    assert compaction.cleanable_offsets(part, T0 + 1000) == (0, 2)
    assert compaction.cleanable_range(part, T0 + 1000) == (0, 0)
    result = compaction.compact_partition(part, now_ms=T0 + 1000)
    part.close()
    assert (result.first_uncleanable_offset, result.groups, result.records_read) == (0, [], 0)
    assert segment_0() == before
    assert not (tmp_path / "logs" / "cleaner-offset-checkpoint").exists()


def test_below_the_segment_holding_the_last_stable_offset_is_cleaned(tmp_path: Path) -> None:
    """Kafka 3.8.0 LogToClean / calculateCleanableBytes: with the open transaction in the third segment,
    the first two are cleaned and the checkpoint is the end of the map, that segment's base."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    part.append_records([(b"a", b"1", T0, [])])
    _roll(part)
    part.append_records([(b"a", b"2", T0, [])])
    _roll(part)
    part.append_records([(b"a", b"3", T0, [])])
    part.append_records([(b"b", b"open", T0, [])], producer_id=9, producer_epoch=0, base_sequence=0,
                        transactional=True)
    _roll(part)
    part.append_records([(b"a", b"4", T0, [])])
    result = compaction.compact_partition(part, now_ms=T0 + 10)
    part.close()
    assert (result.first_uncleanable_offset, result.groups, result.end_offset) == (2, [[0, 1]], 2)
    assert _records(path) == [(1, b"a", b"2"), (2, b"a", b"3"), (3, b"b", b"open"), (4, b"a", b"4")]
    assert read_offsets(str(tmp_path / "logs" / "cleaner-offset-checkpoint")) == {("t", 0): 2}


def test_a_rebuilt_batch_reports_the_max_timestamp_of_the_records_it_keeps(tmp_path: Path) -> None:
    """Kafka 3.8.0 MemoryRecords.filterTo: a rebuilt batch reports MemoryRecordsBuilder.info(), the max
    timestamp of its retained records with the batch's last offset, and Cleaner.cleanInto appends that to
    the cleaned segment (LogSegment.append): the .timeindex holds (2000, 2), as LogSegment.recover
    rebuilds it.  segstore kept the source batch's 3000 (a@1, dropped): the index disagreed with the
    records, max-timestamp queries found nothing and retention.ms kept the segment."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    part.append_records([(b"b", b"1", 1000, []), (b"a", b"1", 3000, [])])
    part.append_records([(b"a", b"2", 2000, [])])
    _roll(part)
    part.append_records([(b"z", b"1", 2500, [])])
    compaction.compact_partition(part, now_ms=5000)
    part.close()
    assert _records(path) == [(0, b"b", b"1"), (2, b"a", b"2"), (3, b"z", b"1")]
    cleaned = (path / f"{0:020d}.timeindex").read_bytes()
    assert np.frombuffer(cleaned, dtype=TIME_ENTRY).tolist() == [(2000, 2)]
    shutil.copytree(path, tmp_path / "rebuilt" / "t-0")
    rebuilt = _open(tmp_path / "rebuilt" / "t-0")
    rebuilt.segments[0].recover()
    rebuilt.close()
    assert (tmp_path / "rebuilt" / "t-0" / f"{0:020d}.timeindex").read_bytes() == cleaned
    with segstore.open(path) as store:
        assert store.verify() == []
    part = _open(path)
    assert part.segments[0].max_timestamp_so_far().timestamp == 2000
    found = part.offset_for_time(-3)      # ListOffsetsRequest.MAX_TIMESTAMP
    part.close()
    assert found is not None and (found.timestamp, found.offset) == (2500, 3)


def _crash_at(monkeypatch, stage: str) -> None:
    real_rename = compaction.files.rename

    def rename(src: str, dst: str) -> None:
        if stage == "cleaned" and dst.endswith(".swap"):
            raise KeyboardInterrupt
        if stage == "swap" and dst.endswith(".deleted"):
            raise KeyboardInterrupt
        real_rename(src, dst)

    monkeypatch.setattr(compaction.files, "rename", rename)


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_a_crash_mid_swap_rolls_back_or_completes_on_open(tmp_path: Path, monkeypatch, stage: str) -> None:
    """``.cleaned`` files left: the next writable open removes them (roll back); ``.swap`` files left: it
    removes the replaced segments and renames the swaps (complete), as LogLoader.load."""
    written = _build(tmp_path / "ref" / "t-0", random.Random(3))
    shutil.copytree(tmp_path / "ref", tmp_path / "logs")
    path = tmp_path / "logs" / "t-0"
    original = {p.name: p.read_bytes() for p in path.glob("*.log")}
    reference = _open(tmp_path / "ref" / "t-0")
    done = compaction.compact_partition(reference, now_ms=T0)
    reference.close()
    part = _open(path)
    _crash_at(monkeypatch, stage)
    with pytest.raises(KeyboardInterrupt):
        compaction.compact_partition(part, now_ms=T0)
    part.abandon()
    monkeypatch.undo()
    assert any(p.name.endswith("." + stage) for p in path.iterdir())
    reopened = _open(path)
    reopened.close()
    assert not [p for p in path.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    if stage == "cleaned":
        assert {p.name: p.read_bytes() for p in path.glob("*.log")} == original
        assert _records(path) == [(o, k, v) for o, k, v in written]
    else:
        group = done.groups[0]
        ref = tmp_path / "ref" / "t-0"
        assert (path / f"{group[0]:020d}.log").read_bytes() == (ref / f"{group[0]:020d}.log").read_bytes()
        assert not any((path / f"{b:020d}.log").exists() for b in group[1:])
    with segstore.open(path) as store:
        assert store.verify() == []


def test_cli_compact_and_dry_run(tmp_path: Path, capsys) -> None:
    path = tmp_path / "logs" / "t-0"
    written = _build(path, random.Random(9))
    listing = {p.name: p.read_bytes() for p in path.iterdir()}
    assert main(["compact", str(path), "--config", "cleanup.policy=compact", "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] and planned["records_kept"] < planned["records_read"]
    assert {p.name: p.read_bytes() for p in path.iterdir()} == listing
    assert main(["compact", str(path), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["records_kept"], done["groups"]) == (planned["records_kept"], planned["groups"])
    assert _records(path) == _expected(written, done["end_offset"])
    assert main(["verify", str(path), "-q"]) == 0


def test_cleaned_index_entries_follow_the_read_buffer_chunks(tmp_path: Path) -> None:
    """cleanInto appends a whole read buffer (256 KiB: log.cleaner.io.buffer.size / 2) of kept batches at a
    time; LogSegment.append indexes (largest offset of the chunk, chunk start) once index.interval.bytes
    have passed since the last entry."""
    path = tmp_path / "logs" / "t-0"
    part = _open(path)
    rng = random.Random(1)
    for s in range(3):
        if s:
            _roll(part)
        for _ in range(400):
            part.append_records([(b"k%d" % rng.randrange(5000), rng.randbytes(1000), T0, [])])
    result = compaction.compact_partition(part)
    part.close()
    assert result.groups == [[0, 400]]
    batches = [b for b in _batches(path) if b.base_offset < 800]
    entries = np.frombuffer((path / f"{0:020d}.index").read_bytes(), dtype=OFFSET_ENTRY)
    by_position = {b.position: b for b in batches}
    assert len(entries) >= 2
    for rel, pos in entries.tolist():
        assert pos in by_position and rel >= by_position[pos].last_offset  # a chunk of several batches
    assert any(rel > by_position[pos].last_offset for rel, pos in entries.tolist())
    with segstore.open(path) as store:
        assert store.verify() == []


def _killed_before(n: int, real_rename):
    """A rename that kills the process (KeyboardInterrupt) instead of doing its ``n``-th rename."""
    seen = itertools.count()

    def rename(src: str, dst: str) -> None:
        if next(seen) == n:
            raise KeyboardInterrupt
        real_rename(src, dst)

    return rename


def test_a_crash_at_every_rename_rolls_back_or_completes(tmp_path: Path, monkeypatch) -> None:
    """Killed before any of the renames of LocalLog.replaceSegments (cleaned->swap, old->deleted,
    swap->final), the next writable open (LogLoader) leaves either the old segments or the cleaned one,
    never a mix: the partition reads as before or as after the clean, and verifies clean."""
    ref = tmp_path / "ref" / "t-0"
    written = _build(ref, random.Random(5), segments=3)
    shutil.copytree(tmp_path / "ref", tmp_path / "pristine")
    before = _records(ref)
    part = _open(ref)
    calls = []
    real_rename = compaction.files.rename
    monkeypatch.setattr(compaction.files, "rename", lambda a, b: (calls.append(b), real_rename(a, b)))
    compaction.compact_partition(part, now_ms=T0)
    part.close()
    monkeypatch.undo()
    after = _records(ref)
    assert after != before and len(calls) >= 6
    outcomes = []
    for k in range(len(calls)):
        work = tmp_path / f"crash{k}"
        shutil.copytree(tmp_path / "pristine", work)
        path = work / "t-0"
        monkeypatch.setattr(compaction.files, "rename", _killed_before(k, real_rename))
        crashed = _open(path)
        with pytest.raises(KeyboardInterrupt):
            compaction.compact_partition(crashed, now_ms=T0)
        crashed.abandon()
        monkeypatch.undo()
        _open(path).close()
        assert not [p for p in path.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
        assert _records(path) in (before, after), f"crash before rename {k} ({calls[k]})"
        outcomes.append(_records(path) == after)
        with segstore.open(path) as store:
            assert store.verify() == []
    # rolled back while a .cleaned file was left (a .swap at or past the smallest .cleaned base is an
    # unfinished operation: removed), completed once every file was .swap
    last_swap = max(i for i, name in enumerate(calls) if name.endswith(".swap"))
    assert outcomes == [False] * (last_swap + 1) + [True] * (len(calls) - last_swap - 1)
    assert written


@given(st.integers(0, 2**32), st.sampled_from(["CreateTime", "LogAppendTime"]),
       st.sampled_from(["none", "gzip", "zstd"]))
@settings(max_examples=15, deadline=None)
def test_the_c_batch_encoder_cleans_to_the_same_bytes_as_the_codec(tmp_path_factory: pytest.TempPathFactory,
                                                                  seed: int, timestamp_type: str,
                                                                  compression: str) -> None:
    """Rewritten batches (records dropped, delete horizons set) come out of the C encoder
    (``arrowencode.encode_retained``) byte for byte as ``batch.encode_retained_batch`` writes them."""
    if not arrowencode.native():
        pytest.skip("compares the C encoder with the codec")
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("encoders")
    path = root / "c" / "t-0"
    part = _open(path, **{"message.timestamp.type": timestamp_type})
    for s in range(4):
        if s:
            _roll(part)
        for _ in range(rng.randrange(1, 6)):
            value = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(40))
            batch = [(b"k%d" % rng.randrange(6), value,
                      T0 + rng.randrange(-5, 1000),
                      [(rng.choice(["h", "é", ""]), rng.choice([None, b"", rng.randbytes(5)]))
                       for _ in range(rng.randrange(3))])
                     for _ in range(rng.randrange(1, 8))]
            part.append_records(batch, compression=compression, producer_id=rng.choice([-1, 7]),
                                producer_epoch=rng.choice([-1, 0]))
    part.close()
    shutil.copytree(root / "c", root / "py")
    cleaned = {}
    encoded = {"c": 0, "py": 0}       # batches rewritten by each encoder
    real_c, real_py = arrowencode.encode_retained, codec.encode_retained_batch

    def counted_c(*args, **kwargs) -> bytes:
        encoded["c"] += 1
        return real_c(*args, **kwargs)

    def counted_py(*args, **kwargs) -> bytes:
        encoded["py"] += 1
        return real_py(*args, **kwargs)

    for name, native in (("c", True), ("py", False)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(arrowencode, "native", lambda native=native: native)
            patch.setattr(arrowencode, "encode_retained", counted_c)
            patch.setattr(codec, "encode_retained_batch", counted_py)
            part = _open(root / name / "t-0")
            result = compaction.compact_partition(part)
            part.close()
        cleaned[name] = {p.name: p.read_bytes() for p in sorted((root / name / "t-0").iterdir())}
    assert result.records_kept < result.records_read
    # the same batches rewritten, each by its own encoder (an example whose batches are all kept
    # whole or dropped whole rewrites none: hypothesis found one, so "some" is not asserted)
    assert encoded["c"] == encoded["py"]
    assert cleaned["c"] == cleaned["py"]


def test_a_producer_of_the_snapshot_keeps_its_last_data_offset_below_the_log(tmp_path: Path) -> None:
    """Where the log was cut below its first segment, the broker's producer snapshot named for it holds
    producer 21 (``ProducerStateManager.readSnapshot``: its last batch's ``lastOffset``, below the log
    start), and ``lastRecordsOfActiveProducers`` gives the cleaner that offset: no batch left in the log
    is the producer's last, so its COMMIT marker, past its delete horizon, goes whole
    (``checkBatchRetention``: DELETE, not RETAIN_EMPTY as for a producer whose last entry is a marker)."""
    from segstore_kafka import snapshot

    path = tmp_path / "logs" / "t-0"
    part = _open(path, **{"delete.retention.ms": 1000})
    part.start_at(10)
    entries = np.zeros(1, snapshot.ENTRY)
    entries[0] = (21, 4, 17, 9, 0, T0, 6, 8)                  # open from 8, its last batch ended at 9
    (path / f"{10:020d}.snapshot").write_bytes(snapshot.write_snapshot(entries))
    part.append_control("COMMIT", producer_id=21, producer_epoch=4, coordinator_epoch=6, timestamp=T0)  # 10
    part.append_records([(b"a", b"1", T0, [])])
    _roll(part)
    part.append_records([(b"a", b"2", T0, [])])
    _roll(part)
    part.append_records([(b"b", b"1", T0, [])])
    compaction.compact_partition(part, now_ms=T0)             # the marker gets its delete horizon
    part.append_records([(b"a", b"3", T0, [])])
    _roll(part)
    part.append_records([(b"b", b"2", T0, [])])
    compaction.compact_partition(part, now_ms=T0 + 2000)      # past it: the marker goes
    part.close()
    assert [(b.base_offset, b.is_control) for b in _batches(path)] == [(13, False), (14, False), (15, False)]
