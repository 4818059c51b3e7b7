"""Log compaction of one Kafka partition, as Kafka 3.8's log cleaner does it.

Sources (apache/kafka 3.8.0): ``core/src/main/scala/kafka/log/LogCleaner.scala``
(``Cleaner.doClean``, ``buildOffsetMap``, ``groupSegmentsBySize``, ``cleanSegments``,
``cleanInto``, ``shouldRetainRecord``, ``CleanedTransactionMetadata``),
``LogCleanerManager.cleanableOffsets``, ``clients/.../record/MemoryRecords.filterTo``,
``LocalLog.replaceSegments``.

- **Range**: from the first dirty offset (``cleaner-offset-checkpoint`` in the log
  directory, reset to the log start when outside ``[log start, log end]``) to the first
  uncleanable offset: the least of the last stable offset (the high watermark, or the
  first offset of a transaction still open), the active segment's base, and the base of
  the first segment newer than ``min.compaction.lag.ms``.  The active segment is never
  cleaned.  Unlike the broker, the command cleans whatever the dirty ratio.
- **Offset map**: the latest offset of every key in the dirty range, aborted
  transactional batches and control batches left out.
- **Filter** (every segment below the map's end, in groups of at most ``segment.bytes``
  / ``segment.index.bytes``): a record is kept when it is past the map, or is the
  latest for its key and has a value or its batch's delete horizon has not passed; a
  keyless record goes.  A tombstone's batch gets a delete horizon of now +
  ``delete.retention.ms`` the first time it is cleaned (the tombstone goes on a later
  clean after that).  Aborted transactional batches go; an ABORT marker stays while
  batches of its transaction do (and its ``.txnindex`` entry is kept); a COMMIT marker
  goes once no batch of its transaction is left; an empty transaction's marker goes
  after its delete horizon.  A batch holding an active producer's last data offset
  (or its last marker) is kept as an empty header.  Offsets never change: a kept
  batch keeps its base and last offset.
- **Swap**: each group is written as ``BASE.log.cleaned`` (and ``.index``,
  ``.timeindex``, ``.txnindex`` ``.cleaned``) with the last source segment's mtime,
  renamed to ``.swap``, the source segments renamed ``.deleted`` and removed, then the
  ``.swap`` files renamed to their final names.  A crash while any file of the group is
  still ``.cleaned`` rolls back on the next writable open (its ``.swap`` files go too);
  once all are ``.swap``, it completes (:mod:`.loader`, as ``LogLoader``).
  ``cleaner-offset-checkpoint`` then holds the map's end.

Record decoding and the key map run in Python (one dict entry per key); this is an
offline maintenance command, not a read path.

Thread-safety: not thread-safe; the store's writer lock is held by the caller.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from segstore import files
from segstore.errors import UnsupportedOperationError

from . import batch as codec
from .checkpoints import read_offsets, write_offsets
from .loader import CLEANED_SUFFIX, SWAP_SUFFIX
from .offsetindex import OFFSET_ENTRY
from .partition import Partition
from .retention import delete_segment_files, high_watermark, log_dir_of
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_name,
)
from .timeindex import TIME_ENTRY
from .txnindex import AbortedTxn, TransactionIndex

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
#: ``log.cleaner.io.buffer.size`` (512 KiB) / one cleaner thread / 2: the read buffer's size
IO_BUFFER_SIZE = 512 * 1024 // 2
#: ``producer.id.expiration.ms`` (broker default): a producer idle this long is no longer active
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000


# -- transactions as the cleaner tracks them ---------------------------------------------

class CleanedTransactionMetadata:
    """``LogCleaner.CleanedTransactionMetadata``: which transactional batches and markers may go."""

    def __init__(self) -> None:
        self._committed: set[int] = set()
        self._aborted: dict[int, list[Any]] = {}     # producer id -> [AbortedTxn, last observed offset]
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        self._n = 0
        self.cleaned_index: list[AbortedTxn] | None = None

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._pending, (txn.first_offset, self._n, txn))
            self._n += 1

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch(self, batch: codec.RecordBatch, kind: str | None) -> bool:
        """True when the marker may be discarded."""
        self._consume_up_to(batch.last_offset)
        if kind is None:  # an empty control batch was already cleaned
            return True
        if kind == "ABORT":
            meta = self._aborted.pop(batch.producer_id, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if kind == "COMMIT":
            if batch.producer_id in self._committed:
                self._committed.discard(batch.producer_id)
                return False
            return True
        return False

    def on_batch(self, batch: codec.RecordBatch) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        meta = self._aborted.get(batch.producer_id)
        if meta is not None:
            meta[1] = batch.last_offset
            return True
        self._committed.add(batch.producer_id)
        return False


def _control_kind(batch: codec.RecordBatch) -> str | None:
    records = batch.records()
    if not records:
        return None
    kind, _ = codec.parse_control_record(records[0].key, records[0].value)
    return kind


# -- the partition's state the cleaner reads ----------------------------------------------

@dataclass(frozen=True, slots=True)
class LastRecord:
    """``UnifiedLog.lastRecordsOfActiveProducers``: a producer's last data offset (None after a marker
    of a newer epoch) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


def producer_state(part: Partition, now_ms: int) -> tuple[dict[int, LastRecord], int | None]:
    """Active producers (not idle ``producer.id.expiration.ms`` unless in a transaction) and the first
    offset of a transaction still open (None: none open).  One header pass, no record decoding."""
    entries: dict[int, list[Any]] = {}  # pid -> [epoch, last data offset, last timestamp, open txn first]
    for seg in part.segments:
        for header in seg.headers():
            if header.producer_id < 0 or header.last_offset < part.log_start_offset:
                continue
            entry = entries.setdefault(header.producer_id, [header.producer_epoch, None, -1, None])
            if header.producer_epoch > entry[0]:
                entry[0], entry[1] = header.producer_epoch, None
            entry[2] = header.max_timestamp
            if header.is_control:
                entry[3] = None
            else:
                entry[1] = header.last_offset
                if header.is_transactional and entry[3] is None:
                    entry[3] = header.base_offset
    active = {pid: LastRecord(e[1], e[0]) for pid, e in entries.items()
              if e[3] is not None or now_ms - e[2] < PRODUCER_ID_EXPIRATION_MS}
    open_txns = [e[3] for e in entries.values() if e[3] is not None]
    return active, min(open_txns) if open_txns else None


def aborted_between(part: Partition, start: int, end: int) -> list[AbortedTxn]:
    """``LocalLog.collectAbortedTransactions``: aborted transactions overlapping ``[start, end)``.

    An aborted transaction is indexed in the segment of its marker, so the search runs from the segment
    holding ``start`` on, until a segment has an entry ending at or past ``end`` (``isComplete``).
    """
    out: list[AbortedTxn] = []
    first = part.log.segments.floor(start) or part.log.segments.first
    for seg in part.log.segments.values(first.base if first is not None else 0):
        out.extend(seg.txn_index.aborted_in(start, end))
        if any(txn.last_offset >= end for txn in seg.txn_index.all()):
            break
    return out


@dataclass(slots=True)
class CompactionResult:
    topic: str
    partition: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    end_offset: int
    groups: list[list[int]] = field(default_factory=list)
    records_read: int = 0
    records_kept: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "first_dirty_offset": self.first_dirty_offset,
                "first_uncleanable_offset": self.first_uncleanable_offset, "end_offset": self.end_offset,
                "groups": [list(g) for g in self.groups], "records_read": self.records_read,
                "records_kept": self.records_kept, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "dry_run": self.dry_run}


# -- cleaning -------------------------------------------------------------------------------

def _check_format(seg: LogSegment) -> None:
    for header in seg.headers():
        if header.magic < codec.MAGIC_V2:
            raise UnsupportedOperationError(
                f"expected record batches of magic 2 to compact, found magic {header.magic} "
                f"(message format v0/v1 is not compacted by segstore)", seg.path, header.position)


def cleanable_offsets(part: Partition, now_ms: int) -> tuple[int, int]:
    """``LogCleanerManager.cleanableOffsets``: ``(first dirty, first uncleanable)``."""
    checkpoint = read_offsets(os.path.join(log_dir_of(part), CLEANER_OFFSET_CHECKPOINT))
    dirty = checkpoint.get((part.topic, part.partition), part.log_start_offset)
    if dirty < part.log_start_offset or dirty > part.next_offset:
        dirty = part.log_start_offset
    _, open_first = producer_state(part, now_ms)
    stable = high_watermark(part) if open_first is None else min(open_first, high_watermark(part))
    bounds = [stable, part.active_segment().base]
    lag = max(getattr(part.config, "min_compaction_lag_ms", 0), 0)
    if lag > 0:
        for seg in part.segments[:-1]:
            later = part.log.segments.higher(seg.base)       # never None: seg is not the last
            if seg.base >= dirty or (later is not None and later.base > dirty):
                if seg.max_timestamp_so_far().timestamp > now_ms - lag:
                    bounds.append(seg.base)
                    break
    return dirty, max(dirty, min(bounds))


def build_offset_map(part: Partition, start: int, end: int) -> tuple[dict[bytes, int], int]:
    """``Cleaner.buildOffsetMap``: key -> latest offset in ``[start, end)``, and the latest offset seen."""
    meta = CleanedTransactionMetadata()
    meta.add_aborted(aborted_between(part, start, end))
    latest = -1
    offsets: dict[bytes, int] = {}
    for seg in part.segments:
        nxt = part.log.segments.higher(seg.base)
        if seg.base >= end or (nxt is not None and nxt.base <= start):
            continue
        for batch in seg.batches():
            if batch.base_offset >= end:
                break
            if batch.is_control:
                meta.on_control_batch(batch, _control_kind(batch))
            elif not meta.on_batch(batch):
                for record in batch.records():
                    if record.key is not None and record.offset >= start:
                        offsets[record.key] = record.offset
            if batch.last_offset >= start:
                latest = max(latest, batch.last_offset)
    return offsets, latest


def group_segments(segs: list[LogSegment], max_size: int, max_index_size: int,
                   first_uncleanable: int) -> list[list[LogSegment]]:
    """``Cleaner.groupSegmentsBySize``: consecutive segments whose log and index sizes stay within the limits
    and whose offsets fit one segment's 32-bit relative offsets."""
    groups: list[list[LogSegment]] = []
    rest = list(segs)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = len(group[0].offset_index) * OFFSET_ENTRY.itemsize
        time_size = len(group[0].time_index) * TIME_ENTRY.itemsize
        while rest:
            head = rest[0]
            last_offset = rest[1].base - 1 if len(rest) > 1 else first_uncleanable - 1
            h_index = len(head.offset_index) * OFFSET_ENTRY.itemsize
            h_time = len(head.time_index) * TIME_ENTRY.itemsize
            if not (log_size + head.size <= max_size and index_size + h_index <= max_index_size
                    and time_size + h_time <= max_index_size
                    and (head.size == 0 or last_offset - group[-1].base <= 2**31 - 1)):
                break
            group.append(rest.pop(0))
            log_size += head.size
            index_size += h_index
            time_size += h_time
        groups.append(group)
    return groups


class _CleanedSegment:
    """The ``.cleaned`` output of one group: ``LogSegment.append`` per chunk, indexes as Kafka builds them."""

    def __init__(self, part: Partition, base: int) -> None:
        self.part = part
        self.base = base
        self.chunks: list[bytes] = []
        self.size = 0
        self.offset_entries: list[tuple[int, int]] = []
        self.time_entries: list[tuple[int, int]] = []
        self.since_index = 0
        self.max_ts = codec.NO_TIMESTAMP
        self.max_ts_offset = base
        self.aborted: list[AbortedTxn] = []

    def _time_maybe_append(self, ts: int, offset: int) -> None:
        # TimeIndex.maybeAppend: only past the last entry (an empty index's is NO_TIMESTAMP)
        if ts > (self.time_entries[-1][0] if self.time_entries else codec.NO_TIMESTAMP):
            self.time_entries.append((ts, offset))

    def append(self, largest_offset: int, max_ts: int, ts_offset: int, data: bytes) -> None:
        """``LogSegment.append`` of one chunk of kept batches."""
        position = self.size
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, ts_offset
        if self.since_index > self.part.config.index_interval_bytes:
            self.offset_entries.append((largest_offset, position))
            self._time_maybe_append(self.max_ts, self.max_ts_offset)
            self.since_index = 0
        self.since_index += len(data)
        self.chunks.append(data)
        self.size += len(data)

    def path(self, suffix: str, extra: str = "") -> str:
        return os.path.join(self.part.path, file_name(self.base, suffix) + extra)

    def write(self, mtime_ns: int) -> list[str]:
        """Write the ``.cleaned`` files (``onBecomeInactiveSegment``, flush, ``setLastModified``)."""
        self._time_maybe_append(self.max_ts, self.max_ts_offset)
        offsets = np.array([(o - self.base, p) for o, p in self.offset_entries], dtype=OFFSET_ENTRY)
        times = np.array([(t, o - self.base) for t, o in self.time_entries], dtype=TIME_ENTRY)
        written = []
        for suffix, data in ((LOG_SUFFIX, b"".join(self.chunks)), (INDEX_SUFFIX, offsets.tobytes()),
                             (TIME_INDEX_SUFFIX, times.tobytes())):
            target = self.path(suffix, CLEANED_SUFFIX)
            files.write_atomic(target, data)
            written.append(target)
        if self.aborted:
            txn = TransactionIndex(self.path(TXN_INDEX_SUFFIX, CLEANED_SUFFIX), writable=True)
            for entry in self.aborted:
                txn.append(entry)
            txn.flush()
            txn.close()
            written.append(self.path(TXN_INDEX_SUFFIX, CLEANED_SUFFIX))
        for target in written:
            os.utime(target, ns=(mtime_ns, mtime_ns))
        return written


def _chunks(seg: LogSegment) -> Iterable[list[codec.RecordBatch]]:
    """The batches of a segment as the cleaner's read buffer takes them (``cleanInto``): whole batches
    within the buffer from the current position; a batch larger than the buffer doubles it."""
    capacity = IO_BUFFER_SIZE
    chunk: list[codec.RecordBatch] = []
    start = 0
    for batch in seg.batches():
        if chunk and batch.position + batch.size > start + capacity:
            yield chunk
            chunk = []
        if not chunk:
            start = batch.position
            while batch.size > capacity:
                capacity *= 2
        chunk.append(batch)
    if chunk:
        yield chunk


def _filter_chunk(chunk: list[codec.RecordBatch], offsets: dict[bytes, int], latest: int,
                  meta: CleanedTransactionMetadata, active: dict[int, LastRecord], now_ms: int,
                  delete_retention_ms: int, result: CompactionResult
                  ) -> tuple[bytes, int, int, int]:
    """``MemoryRecords.filterTo`` with the cleaner's ``RecordFilter``: ``(kept bytes, max offset,
    max timestamp, offset of max timestamp)``."""
    out: list[bytes] = []
    max_offset, max_ts, ts_offset = -1, codec.NO_TIMESTAMP, -1
    for batch in chunk:
        kind = _control_kind(batch) if batch.is_control else None
        can_discard = meta.on_control_batch(batch, kind) if batch.is_control else meta.on_batch(batch)
        horizon = batch.delete_horizon_ms
        if batch.is_control:
            discard_records = can_discard and horizon != codec.NO_TIMESTAMP and horizon <= now_ms
        else:
            discard_records = can_discard
        last = active.get(batch.producer_id) if batch.producer_id >= 0 else None
        is_last_of_producer = last is not None and (
            batch.last_offset == last.last_data_offset if last.last_data_offset is not None
            else batch.is_control and batch.producer_epoch == last.producer_epoch)
        marker_for_empty_txn = can_discard and batch.is_control
        records = batch.records()
        result.records_read += len(records)
        if not is_last_of_producer and discard_records:
            continue  # BatchRetention.DELETE
        kept = []
        tombstones = False
        for record in records:
            if discard_records:
                keep = False
            elif batch.is_control:
                keep = True
            elif record.offset > latest:
                keep = True
            elif record.key is None:
                keep = False
            else:
                retain_deletes = horizon == codec.NO_TIMESTAMP or now_ms < horizon
                keep = record.offset >= offsets.get(record.key, -1) and (record.value is not None
                                                                          or retain_deletes)
            if keep:
                kept.append(record)
                tombstones = tombstones or record.value is None
        if kept:
            set_horizon = (tombstones or marker_for_empty_txn) and horizon == codec.NO_TIMESTAMP
            if len(kept) == len(records) and not set_horizon:
                out.append(bytes(batch.data))
            else:
                new_horizon = now_ms + delete_retention_ms if set_horizon else horizon
                out.append(codec.encode_retained_batch(batch, kept, delete_horizon_ms=new_horizon))
            max_offset = max(max_offset, max(r.offset for r in kept) if len(kept) < len(records)
                             else batch.last_offset)
        elif is_last_of_producer:  # BatchRetention.RETAIN_EMPTY
            out.append(codec.encode_empty_batch(batch))
            max_offset = max(max_offset, batch.last_offset)
        else:
            continue
        if batch.max_timestamp > max_ts:
            max_ts, ts_offset = batch.max_timestamp, batch.last_offset
        result.records_kept += len(kept)
    return b"".join(out), max_offset, max_ts, ts_offset


def compact_partition(part: Partition, *, now_ms: int | None = None,
                      dry_run: bool = False) -> CompactionResult:
    """Clean a writable partition once, as the broker's cleaner thread does; see the module docs."""
    now = part.clock() if now_ms is None else now_ms
    for seg in part.segments:
        _check_format(seg)
    dirty, uncleanable = cleanable_offsets(part, now)
    result = CompactionResult(part.topic, part.partition, dirty, uncleanable, dirty, dry_run=dry_run)
    if uncleanable <= dirty:
        return result
    offsets, latest = build_offset_map(part, dirty, uncleanable)
    end = latest + 1
    result.end_offset = end
    before = [s for s in part.segments if s.base < end]
    active, _ = producer_state(part, now)
    meta = CleanedTransactionMetadata()
    config = part.config
    for group in group_segments(before, config.segment_bytes, config.segment_index_bytes, uncleanable):
        result.groups.append([s.base for s in group])
        result.bytes_before += sum(s.size for s in group)
        cleaned = _CleanedSegment(part, group[0].base)
        meta.cleaned_index = cleaned.aborted
        for i, seg in enumerate(group):
            upper = group[i + 1].base if i + 1 < len(group) else seg.next_offset()
            meta.add_aborted(aborted_between(part, seg.base, upper))
            for chunk in _chunks(seg):
                data, max_offset, max_ts, ts_offset = _filter_chunk(
                    chunk, offsets, latest, meta, active, now, part.config.delete_retention_ms, result)
                if data:
                    cleaned.append(max_offset, max_ts, ts_offset, data)
        result.bytes_after += cleaned.size
        if not dry_run:
            _swap_in(part, cleaned, group)
    if not dry_run:
        checkpoint = os.path.join(log_dir_of(part), CLEANER_OFFSET_CHECKPOINT)
        offsets_cp = read_offsets(checkpoint)
        offsets_cp[(part.topic, part.partition)] = end
        write_offsets(checkpoint, offsets_cp)
    return result


def _swap_in(part: Partition, cleaned: _CleanedSegment, group: list[LogSegment]) -> None:
    """``LocalLog.replaceSegments``: ``.cleaned`` -> ``.swap``; old segments -> ``.deleted`` -> gone;
    ``.swap`` -> final names."""
    mtime_ns = os.stat(group[-1].path).st_mtime_ns
    written = cleaned.write(mtime_ns)
    swaps = []
    for path in reversed(written):
        swap = path[:-len(CLEANED_SUFFIX)] + SWAP_SUFFIX
        files.rename(path, swap)
        swaps.append(swap)
    files.fsync_dir(part.path)
    for seg in group:
        part.log.segments.remove(seg.base)
    delete_segment_files(group)
    for swap in swaps:
        files.rename(swap, swap[:-len(SWAP_SUFFIX)])
    files.fsync_dir(part.path)
    part.log.segments.add(cleaned.base, part._open_segment(cleaned.base, create=False))


def compact(store: Any, *, now_ms: int | None = None, dry_run: bool = False, topic: str | None = None,
            partition: int | None = None) -> list[dict[str, Any]]:
    """:func:`compact_partition` over every (selected) partition of a store opened for appends."""
    parts = store._partitions()
    return [compact_partition(p, now_ms=now_ms, dry_run=dry_run).to_dict()
            for (t, n), p in parts.items()
            if (topic is None or t == topic) and (partition is None or n == partition)]
