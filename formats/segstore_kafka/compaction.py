"""Log compaction of one Kafka partition, as Kafka 3.8's log cleaner does it.

Sources (apache/kafka 3.8.0): ``core/src/main/scala/kafka/log/LogCleaner.scala``
(``Cleaner.doClean``, ``buildOffsetMap``, ``groupSegmentsBySize``, ``cleanSegments``,
``cleanInto``, ``shouldRetainRecord``, ``CleanedTransactionMetadata``, ``LogToClean``),
``LogCleanerManager.cleanableOffsets`` and ``calculateCleanableBytes``,
``clients/.../record/MemoryRecords.filterTo``, ``LocalLog.replaceSegments`` and
``collectAbortedTransactions``, ``storage/.../log/TransactionIndex.collectAbortedTxns``.

- **Range**: from the first dirty offset (``cleaner-offset-checkpoint`` in the log
  directory, reset to the log start when outside ``[log start, log end]``) to the first
  uncleanable offset: the least of the last stable offset (the high watermark, or the
  first offset of a transaction open there: :func:`last_stable_offset`), the active
  segment's base, and the base of
  the first segment newer than ``min.compaction.lag.ms`` (``cleanableOffsets``), moved
  down to the base of the segment holding it (``LogToClean``, ``calculateCleanableBytes``):
  the segment holding the last stable offset is never cleaned, nor is the active one.
  Unlike the broker, the command cleans whatever the dirty ratio.
- **Offset map** (:mod:`.offsetmap`): the latest offset of every key in the dirty range, aborted
  transactional batches (:func:`aborted_between`) and control batches left out, in
  ``log.cleaner.dedupe.buffer.size`` of memory (24 bytes a key: its MD5 and the offset).  When the
  map is full (90 % of its slots) the pass ends where the map got to (``buildOffsetMapForSegment``)
  and the next pass, as the broker's next cleaning of the log, starts there; passes repeat until the
  range is clean.
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
  batch keeps its base and last offset.  The cleaned ``.timeindex`` takes each kept
  batch's max timestamp as ``filterTo`` reports it: a rebuilt batch's is that of the
  records it keeps, not the source batch's.
- **Swap**: each group is written as ``BASE.log.cleaned`` (and ``.index``,
  ``.timeindex``, ``.txnindex`` ``.cleaned``) with the last source segment's mtime,
  renamed to ``.swap``, the source segments renamed ``.deleted`` and removed, then the
  ``.swap`` files renamed to their final names.  A crash while any file of the group is
  still ``.cleaned`` rolls back on the next writable open (its ``.swap`` files go too);
  once all are ``.swap``, it completes (:mod:`.loader`, as ``LogLoader``).
  ``cleaner-offset-checkpoint`` then holds the map's end.
- **Extra indexes** (segstore's own, :mod:`segstore.layouts`; the broker has none): their entries
  point at record positions the swap moves, so before the first group is swapped in, the
  partition's extra indexes drop their entries from the group's base
  (:func:`segstore.layouts.forget_from`); the store indexes those records again afterwards.

Both sides read column chunks (:func:`.columnar.decode`) and decide per row with numpy: keys are
hashed and looked up a chunk at a time, batches kept whole are copied as they are, and a batch
that loses records (or gains a delete horizon) is re-encoded by the codec from the rows it keeps
(the records it drops are never built; one C call encodes each such batch from the chunk's
buffers, ``arrowencode.encode_retained``, the Python codec without the accelerator).  Producer state
is summarised per chunk with numpy.  Transactional and control batches go through the
transaction state machine one by one.

Thread-safety: not thread-safe; the store's writer lock is held by the caller.
"""

from __future__ import annotations

import functools
import heapq
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from segstore import files
from segstore.errors import ConfigError, CorruptDataError, UnsupportedOperationError

from . import arrowencode, columnar
from . import batch as codec
from .brokerconfig import DEDUPE_BUFFER_SIZE
from .checkpoints import offset_of, read_offsets, write_offsets
from .loader import CLEANED_SUFFIX, SWAP_SUFFIX
from .logdir import high_watermark, log_dir_of
from .offsetindex import OFFSET_ENTRY
from .offsetmap import OffsetMap, md5_digests
from .partition import Partition
from .retention import delete_segment_files
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_name,
)
from .timeindex import TIME_ENTRY
from .topicconfig import is_log_managed
from .txnindex import AbortedTxn, TransactionIndex

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
#: ``Long.MAX_VALUE``
LONG_MAX = 2**63 - 1
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


# -- the partition's state the cleaner reads ----------------------------------------------

@dataclass(frozen=True, slots=True)
class LastRecord:
    """``UnifiedLog.lastRecordsOfActiveProducers``: a producer's last data offset (None after a marker
    of a newer epoch) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    last_data_offset: int | None
    last_timestamp: int
    open_first: int | None      # the first offset of its transaction still open


def _producer_summaries(batches: np.ndarray) -> Iterable[tuple[int, int, int, int, int, int, bool]]:
    """Per producer id of a run of batch rows (log order, ids >= 0): ``(max epoch, last data offset at
    or after that epoch's first batch, last data offset, last max timestamp, first transactional
    data offset after its last marker, whether it has a marker)``, -1 for none.  numpy per run."""
    order = np.argsort(batches["producer_id"], kind="stable")
    rows = batches[order]
    pid = rows["producer_id"]
    starts = np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]])
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(rows)]))
    idx = np.arange(len(rows))
    epoch = rows["producer_epoch"].astype(np.int64)
    last = rows["base_offset"] + rows["last_offset_delta"]
    control = _flag(rows, codec.CONTROL_FLAG)
    txn = _flag(rows, codec.TRANSACTIONAL_FLAG)
    big = np.int64(len(rows))
    max_epoch = np.maximum.reduceat(epoch, starts)
    first_max = np.minimum.reduceat(np.where(epoch == max_epoch[group], idx, big), starts)
    after_max = np.maximum.reduceat(np.where(~control & (idx >= first_max[group]), last, -1), starts)
    any_data = np.maximum.reduceat(np.where(~control, last, -1), starts)
    last_control = np.maximum.reduceat(np.where(control, idx, -1), starts)
    first_open = np.minimum.reduceat(np.where(txn & ~control & (idx > last_control[group]), idx, big), starts)
    ends = np.r_[starts[1:], len(rows)] - 1
    open_base = np.where(first_open < big, rows["base_offset"][np.minimum(first_open, big - 1)], -1)
    return zip(pid[starts].tolist(), max_epoch.tolist(), after_max.tolist(), any_data.tolist(),
               rows["max_timestamp"][ends].tolist(), open_base.tolist(), (last_control >= 0).tolist(),
               strict=True)


def producer_state(part: Partition, now_ms: int, *, end: int | None = None
                   ) -> tuple[dict[int, LastRecord], int | None]:
    """Active producers (not idle ``producer.id.expiration.ms`` unless in a transaction) and the first
    offset of a transaction still open (None: none open), from the batches below ``end`` (None: all):
    with ``end`` the high watermark, the transactions open there, whether or not a marker at or past
    it ends them later.

    As ``ProducerStateManager`` loads them from the log: a producer's epoch only grows (a newer epoch
    forgets the last data offset), a marker closes its open transaction.  Batch headers come from the
    column chunks; producers are summarised per chunk with numpy and merged in log order (Python
    per producer and chunk, not per batch).
    """
    entries, start = _seeded(part, end)
    for seg in part.segments:
        if end is not None and seg.base >= end:
            break
        later = part.log.segments.higher(seg.base)
        if later is not None and later.base <= start:
            continue        # wholly before the snapshot: its state is in it
        for chunk in seg.header_chunks():
            batches = chunk.batches
            last = batches["base_offset"] + batches["last_offset_delta"]
            below = (batches["base_offset"] < end) if end is not None else True
            batches = batches[(batches["producer_id"] >= 0) & (batches["magic"] >= codec.MAGIC_V2)
                              & (last >= part.log_start_offset) & below & (batches["base_offset"] >= start)]
            if not len(batches):
                continue
            for pid, epoch, after_max, any_data, ts, open_base, has_control in _producer_summaries(batches):
                entry = entries.get(pid)
                if entry is None:
                    entries[pid] = _ProducerEntry(epoch, None if after_max < 0 else after_max, ts,
                                                  None if open_base < 0 else open_base)
                    continue
                if epoch > entry.epoch:
                    entry.epoch, entry.last_data_offset = epoch, None if after_max < 0 else after_max
                elif any_data >= 0:
                    entry.last_data_offset = any_data
                entry.last_timestamp = ts
                if has_control:
                    entry.open_first = None if open_base < 0 else open_base
                elif entry.open_first is None and open_base >= 0:
                    entry.open_first = open_base
    active = {pid: LastRecord(e.last_data_offset, e.epoch) for pid, e in entries.items()
              if e.open_first is not None or now_ms - e.last_timestamp < PRODUCER_ID_EXPIRATION_MS}
    open_txns = [e.open_first for e in entries.values() if e.open_first is not None]
    return active, min(open_txns) if open_txns else None


def _seeded(part: Partition, upto: int | None) -> tuple[dict[int, _ProducerEntry], int]:
    """The producers of the broker's newest snapshot up to ``upto`` (:func:`.producers.newest_seed`),
    and the offset the log's batches replay from: what the broker holds of producers whose batches
    were deleted, a transaction open from a deleted offset among them.  Snapshots that do not read are
    passed over, as the broker's loader drops them (``ProducerStateManager.loadFromSnapshot``)."""
    from .producers import newest_seed

    states, start = newest_seed(part, upto)
    # the snapshot's last data offset (below the log start, or in the log before ``start``), as
    # lastRecordsOfActiveProducers has it
    return {pid: _ProducerEntry(state.producer_epoch,
                                None if state.last_data_offset < 0 else state.last_data_offset,
                                state.last_timestamp, state.txn_start_offset)
            for pid, state in states.items()}, start


def stable_below(part: Partition, hw: int, open_first: int | None) -> int:
    """``UnifiedLog.lastStableOffset`` from the high watermark ``hw`` and :func:`producer_state`'s first
    open offset below it (``end=hw``), moved up to the log start where below it
    (``maybeIncrementFirstUnstableOffset``: a transaction open from a deleted offset holds the log
    start, never less).

    The broker's first unstable offset is that of its earliest transaction either still open
    (``ongoingTxns``) or ended by a marker at or past the high watermark (``unreplicatedTxns``,
    dropped by ``onHighWatermarkUpdated`` once the marker is below it): both are exactly the
    transactions open at the high watermark.  One whose marker the followers have not copied may
    yet be lost with it, so read_committed readers wait, and the cleaner stops, at its first offset."""
    return hw if open_first is None else min(max(open_first, part.log_start_offset), hw)


def last_stable_offset(part: Partition, now_ms: int) -> int:
    """:func:`stable_below` of the partition as its files stand.  ``O(batches below the high watermark)``."""
    hw = high_watermark(part)
    return stable_below(part, hw, producer_state(part, now_ms, end=hw)[1])


def aborted_between(part: Partition, start: int, end: int) -> list[AbortedTxn]:
    """Kafka 3.8.0 ``UnifiedLog.collectAbortedTransactions(start, end)``, that is
    ``LocalLog.collectAbortedTransactions(logStartOffset, start, end)``: the aborted transactions
    ending at or after the log start and starting before ``end``.

    An aborted transaction is indexed in the segment of its marker, so the search runs from the segment
    holding ``start`` (none: nothing found, as ``floorSegment`` is empty) through later segments, until
    a segment's index has an entry whose last stable offset is at or past ``end``
    (``TransactionIndex.collectAbortedTxns``, ``isComplete``).  Stopping at the first entry whose
    *marker* is past ``end`` instead missed a transaction that began below ``end`` while the other was
    open and was aborted in a later segment: its data was then kept as committed.
    """
    out: list[AbortedTxn] = []
    first = part.log.segments.floor(start)
    if first is None:
        return out
    for seg in part.log.segments.values(first.base):
        found, complete = seg.txn_index.collect_aborted(part.log_start_offset, end)
        out.extend(found)
        if complete:
            break
    return out


@dataclass(slots=True)
class CompactionResult:
    """What one compaction of a partition did.

    ``records_read`` / ``bytes_before``: the records and bytes the segments it cleaned held before it,
    each counted once; ``records_kept`` / ``bytes_after``: what those segments hold after it (a batch kept
    as an empty header: its header's bytes, no record).  One pass is one broker cleaning, and these are
    its ``CleanerStats`` (Kafka 3.8.0 ``LogCleaner.recordStats``: "Start size: ... (N messages)", "End
    size: ... (M messages)"); a run of several passes reports the whole run, not the sum of its passes'
    stats, which count the records an earlier pass kept again in each later one
    (:meth:`add_pass`).  ``groups``: the groups each pass cleaned, in order.
    """

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
    passes: int = 0
    map_full: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "first_dirty_offset": self.first_dirty_offset,
                "first_uncleanable_offset": self.first_uncleanable_offset, "end_offset": self.end_offset,
                "groups": [list(g) for g in self.groups], "records_read": self.records_read,
                "records_kept": self.records_kept, "bytes_before": self.bytes_before,
                "bytes_after": self.bytes_after, "dry_run": self.dry_run, "passes": self.passes,
                "map_full": self.map_full}

    def add_pass(self, read: int, kept: int, before: int, after: int) -> None:
        """Fold one pass's ``CleanerStats`` (records read and kept, bytes read and written) into the run.

        A pass reads every segment below its map's end, which are all those an earlier pass of the run
        wrote (the map's end only grows): what it reads is what the earlier passes kept plus the records
        they had not reached.  So the run read what this pass reads plus what the earlier passes
        dropped, and keeps what this pass keeps.
        """
        if self.passes:
            read += self.records_read - self.records_kept
            before += self.bytes_before - self.bytes_after
        self.records_read, self.records_kept, self.bytes_before, self.bytes_after = read, kept, before, after
        self.passes += 1


# -- cleaning -------------------------------------------------------------------------------

def _check_format(seg: LogSegment) -> None:
    for chunk in seg.column_chunks(0):
        legacy = np.flatnonzero(chunk.batches["magic"] < codec.MAGIC_V2)
        if len(legacy):
            row = chunk.batches[legacy[0]]
            raise UnsupportedOperationError(
                f"expected record batches of magic 2 to compact, found magic {int(row['magic'])} "
                f"(message format v0/v1 is not compacted by segstore)", seg.path, int(row["position"]))


def cleanable_offsets(part: Partition, now_ms: int) -> tuple[int, int]:
    """``LogCleanerManager.cleanableOffsets``: ``(first dirty, first uncleanable)``, the latter not yet
    moved down to its segment's base (:func:`cleanable_range` does, as the cleaner)."""
    found = offset_of(os.path.join(log_dir_of(part), CLEANER_OFFSET_CHECKPOINT), (part.topic, part.partition))
    dirty = part.log_start_offset if found is None else found
    if dirty < part.log_start_offset or dirty > part.next_offset:
        dirty = part.log_start_offset
    bounds = [last_stable_offset(part, now_ms), part.active_segment().base]
    lag = max(getattr(part.config, "min_compaction_lag_ms", 0), 0)
    if lag > 0:
        for seg in part.segments[:-1]:
            later = part.log.segments.higher(seg.base)       # never None: seg is not the last
            if seg.base >= dirty or (later is not None and later.base > dirty):
                # LogSegment.largestTimestamp: an empty segment's is its file's mtime
                if seg.largest_timestamp() > now_ms - lag:
                    bounds.append(seg.base)
                    break
    return dirty, max(dirty, min(bounds))


def cleanable_range(part: Partition, now_ms: int) -> tuple[int, int]:
    """``(first dirty, first uncleanable)`` as the cleaner uses them: :func:`cleanable_offsets`, then the
    first uncleanable offset moved down to the base of the segment holding it (Kafka 3.8.0
    ``LogToClean``, ``LogCleanerManager.calculateCleanableBytes``: the first segment of
    ``nonActiveLogSegmentsFrom(uncleanableOffset)``, else the active segment).

    The cleaner never cleans part of a segment: the one holding the last stable offset (an open
    transaction, the high watermark) stays as it is.  When that base is at or below the first dirty
    offset nothing is cleanable (``cleanableBytes`` is 0); the pair is then ``(dirty, dirty)``."""
    dirty, uncleanable = cleanable_offsets(part, now_ms)
    active = part.active_segment().base
    if uncleanable < active:
        # values() starts at the floor segment, or the first when none is below (LogSegments.values)
        uncleanable = part.log.segments.values(uncleanable)[0].base
    else:
        uncleanable = active
    return dirty, max(dirty, uncleanable)


def _flag(batches: np.ndarray, flag: int) -> np.ndarray:
    return (batches["magic"] >= codec.MAGIC_V2) & (batches["attributes"] & flag != 0)


def _valid(chunk: columnar.Chunk, name: str) -> np.ndarray:
    """The non-null flags of a binary column of a chunk (its Arrow validity bitmap, unpacked)."""
    rows = chunk.rows
    return np.unpackbits(chunk.buffers[f"{name}_valid"], count=rows, bitorder="little").astype(np.bool_)


def _control_kind(chunk: columnar.Chunk, batch: int, path: str) -> str | None:
    """The control record type of a control batch of a chunk (None: no record left, already cleaned)."""
    row = chunk.batches[batch]
    if row["record_count"] == 0:
        return None
    first = int(row["first_row"])
    offsets, data = chunk.buffers["key_offsets"], chunk.buffers["key_data"]
    has_key = chunk.buffers["key_valid"][first >> 3] >> (first & 7) & 1
    key = data[offsets[first]:offsets[first + 1]].tobytes() if has_key else b""
    if len(key) < codec.CONTROL_KEY.size:
        raise CorruptDataError(f"a control record key of {codec.CONTROL_KEY.size} bytes, found {key!r}",
                               path, int(row["position"]))
    version, type_id = codec.CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptDataError(f"a control record key version >= 0, found {version}", path,
                               int(row["position"]))
    return codec.CONTROL_TYPES.get(type_id, codec.UNKNOWN_CONTROL_TYPE)


def _transaction_flags(chunk: columnar.Chunk, count: int, meta: CleanedTransactionMetadata,
                       path: str) -> np.ndarray:
    """``onControlBatchRead`` / ``onBatchRead`` over the first ``count`` batches of a chunk: per batch,
    True where it may be discarded (a marker) or is aborted (a data batch).

    Only transactional and control batches reach the Python state machine: a plain batch is never
    aborted and only advances the pending aborted transactions, which the next transactional batch
    does as well.
    """
    batches = chunk.batches[:count]
    flags = np.zeros(count, np.bool_)
    control = _flag(batches, codec.CONTROL_FLAG)
    for i in np.flatnonzero(control | _flag(batches, codec.TRANSACTIONAL_FLAG)).tolist():
        header = columnar.record_batch(batches[i].tolist())
        if control[i]:
            flags[i] = meta.on_control_batch(header, _control_kind(chunk, i, path))
        else:
            flags[i] = meta.on_batch(header)
    return flags


def build_offset_map(part: Partition, start: int, end: int, omap: OffsetMap) -> bool:
    """``Cleaner.buildOffsetMap``: the latest offset of each key in ``[start, end)`` into ``omap``
    (cleared first), and ``omap.latest_offset``: the last offset read when the map filled, else ``end -
    1`` (``buildOffsetMapForSegment`` fast-forwards past a segment's trailing gap); True when the map
    filled before ``end``.

    Column chunks of keys only, digests and map updates per chunk (no per-record Python).
    """
    omap.clear()
    meta = CleanedTransactionMetadata()
    meta.add_aborted(aborted_between(part, start, end))
    for seg in part.segments:
        nxt = part.log.segments.higher(seg.base)
        if seg.base >= end or (nxt is not None and nxt.base <= start):
            continue
        for chunk in seg.column_chunks(columnar.WANT_KEY):
            batches = chunk.batches
            count = int(np.searchsorted(batches["base_offset"], end))     # batches starting before end
            discard = _transaction_flags(chunk, count, meta, seg.path)
            last = batches["base_offset"][:count] + batches["last_offset_delta"][:count]
            rows = chunk.rows
            offset = chunk.buffers["offset"][:rows]
            row_batch = chunk.buffers["row_batch"][:rows]
            mapped = np.zeros(count, np.bool_)     # data batches whose keys go into the map
            mapped[:] = ~_flag(batches[:count], codec.CONTROL_FLAG) & ~discard
            in_map = np.zeros(rows, np.bool_)
            inside = row_batch < count
            in_map[inside] = mapped[row_batch[inside]]
            eligible = np.flatnonzero(in_map & _valid(chunk, "key") & (offset >= start))
            digests = md5_digests(chunk.buffers["key_offsets"], chunk.buffers["key_data"], eligible)
            put = omap.put_until_full(digests, offset[eligible])
            if put < len(eligible):
                stopped = int(row_batch[eligible[put]])   # the batch being read when the map filled
                done = last[:stopped]
                done = done[done >= start]
                if len(done):
                    omap.update_latest_offset(max(omap.latest_offset, int(done[-1])))
                return True
            done = last[last >= start]
            if len(done):
                omap.update_latest_offset(int(done[-1]))
            if count < len(batches):
                break
        # "In the case of offsets gap, fast forward to latest expected offset in this segment": a segment
        # mapped whole maps up to the next dirty segment's base (or the end), whatever its last batch
        omap.update_latest_offset((end if nxt is None else min(nxt.base, end)) - 1)
    return False


def group_segments(segs: list[LogSegment], max_size: int, max_index_size: int,
                   first_uncleanable: int) -> list[list[LogSegment]]:
    """``Cleaner.groupSegmentsBySize``: consecutive segments whose log and index sizes stay within the limits
    and whose offsets fit one segment's 32-bit relative offsets from the group's first base."""
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
                    # Scala's ``group.last``: the group is built by prepending, so its first segment,
                    # whose base the cleaned segment takes (relative offsets are 32-bit)
                    and (head.size == 0 or last_offset - group[0].base <= 2**31 - 1)):
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


def _records(chunk: columnar.Chunk, rows: np.ndarray, has_key: np.ndarray,
             has_value: np.ndarray) -> list[codec.Record]:
    """The records of ``rows`` of a chunk (keys, values, headers from its buffers): only the records
    a rewritten batch keeps are built, never the ones it drops."""
    b = chunk.buffers
    key_at, key_data = b["key_offsets"], b["key_data"]
    value_at, value_data = b["value_offsets"], b["value_data"]
    header_at, hkey_at, hkey_data = b["header_offsets"], b["hkey_offsets"], b["hkey_data"]
    hvalue_at, hvalue_valid, hvalue_data = b["hvalue_offsets"], b["hvalue_valid"], b["hvalue_data"]
    offsets, stamps = b["offset"], b["timestamp"]
    out = []
    for r in rows.tolist():
        headers = [(hkey_data[hkey_at[h]:hkey_at[h + 1]].tobytes().decode("utf-8"),
                    hvalue_data[hvalue_at[h]:hvalue_at[h + 1]].tobytes()
                    if hvalue_valid[h >> 3] >> (h & 7) & 1 else None)
                   for h in range(int(header_at[r]), int(header_at[r + 1]))]
        out.append(codec.Record(int(offsets[r]), int(stamps[r]),
                                key_data[key_at[r]:key_at[r + 1]].tobytes() if has_key[r] else None,
                                value_data[value_at[r]:value_at[r + 1]].tobytes() if has_value[r] else None,
                                headers))
    return out


def _chunk_columns(chunk: columnar.Chunk, has_key: np.ndarray, has_value: np.ndarray) -> arrowencode.Columns:
    """A chunk's rows as the C batch encoder's columns (its int32 offsets as they are, validity one
    byte a row)."""
    b, rows = chunk.buffers, chunk.rows
    header_at = b["header_offsets"][:rows + 1]     # from 0 in a chunk
    headers = int(header_at[-1])
    hvalue_valid = np.unpackbits(b["hvalue_valid"], count=headers, bitorder="little")
    return arrowencode.Columns.of_buffers(rows, (
        has_key.view(np.uint8), b["key_offsets"][:rows + 1], b["key_data"],
        has_value.view(np.uint8), b["value_offsets"][:rows + 1], b["value_data"],
        np.ascontiguousarray(b["timestamp"][:rows], np.int64), header_at,
        b["hkey_offsets"][:headers + 1], b["hkey_data"], hvalue_valid,
        b["hvalue_offsets"][:headers + 1], b["hvalue_data"]))


# What the filter does with each batch of a chunk.
DROP, RAW, REWRITE, EMPTY = 0, 1, 2, 3


class _Filter:
    """``cleanInto`` over the column chunks of one group's segments: ``MemoryRecords.filterTo`` with the
    cleaner's ``RecordFilter`` decided per row with numpy, the kept bytes appended to the cleaned
    segment one read buffer (``IO_BUFFER_SIZE``) of source batches at a time.

    Batches kept whole are copied as they are (runs of them in one slice); only a batch that loses
    records or gains a delete horizon is re-encoded (``encode_retained_batch``) from its kept rows.
    """

    def __init__(self, omap: OffsetMap, meta: CleanedTransactionMetadata, active: dict[int, LastRecord],
                 now_ms: int, delete_retention_ms: int, result: CompactionResult) -> None:
        self.omap, self.meta, self.now, self.result = omap, meta, now_ms, result
        self.retention = delete_retention_ms
        pids = sorted(active)
        self.active_pids = np.array(pids, np.int64)
        self.active_last = np.array([-1 if active[p].last_data_offset is None else active[p].last_data_offset
                                     for p in pids], np.int64)
        self.active_has_last = np.array([active[p].last_data_offset is not None for p in pids], np.bool_)
        self.active_epoch = np.array([active[p].producer_epoch for p in pids], np.int64)

    def _last_of_producer(self, batches: np.ndarray, control: np.ndarray) -> np.ndarray:
        """Per batch: it holds an active producer's last data offset (or is its last marker)."""
        pid = batches["producer_id"]
        pos = np.searchsorted(self.active_pids, pid)
        found = (pid >= 0) & (pos < len(self.active_pids))
        found[found] = self.active_pids[pos[found]] == pid[found]
        idx = np.where(found, pos, 0)
        if not len(self.active_pids):
            return found
        last = batches["base_offset"] + batches["last_offset_delta"]
        by_data = last == self.active_last[idx]
        by_marker = control & (batches["producer_epoch"] == self.active_epoch[idx])
        return found & np.where(self.active_has_last[idx], by_data, by_marker)

    def segment(self, seg: LogSegment, cleaned: _CleanedSegment) -> None:
        """Filter one segment into ``cleaned``."""
        view = seg.log.view()
        capacity = IO_BUFFER_SIZE
        pending: list[bytes] = []     # the open read buffer's kept bytes, and its aggregates
        state = {"start": -1, "max_offset": -1, "max_ts": codec.NO_TIMESTAMP, "ts_offset": -1}

        def close() -> None:
            if pending:
                cleaned.append(state["max_offset"], state["max_ts"], state["ts_offset"], b"".join(pending))
            pending.clear()
            state.update(start=-1, max_offset=-1, max_ts=codec.NO_TIMESTAMP, ts_offset=-1)

        for chunk in seg.column_chunks(columnar.WANT_KEY | columnar.WANT_VALUE | columnar.WANT_HEADERS):
            batches = chunk.batches
            action, max_offset, max_ts, pieces = self._decide(chunk, seg.path)
            position = batches["position"]
            ends = position + batches["size"]
            last = batches["base_offset"] + batches["last_offset_delta"]
            i, n = 0, len(batches)
            while i < n:
                if state["start"] < 0:
                    state["start"] = int(position[i])
                    while int(batches["size"][i]) > capacity:
                        capacity *= 2
                j = max(int(np.searchsorted(ends, state["start"] + capacity, side="right")), i)
                self._take(i, j, action, max_offset, max_ts, last, batches, position, ends, pieces, view,
                           pending, state)
                i = j
                if i < n:
                    close()
        close()

    @staticmethod
    def _take(i: int, j: int, action: np.ndarray, max_offset: np.ndarray, max_ts: np.ndarray,
              last: np.ndarray, batches: np.ndarray, position: np.ndarray, ends: np.ndarray,
              pieces: dict[int, bytes], view: memoryview, pending: list[bytes],
              state: dict[str, int]) -> None:
        """Batches ``[i, j)`` of a chunk into the open read buffer
        (``FilterResult.updateRetainedBatchMetadata``: the greatest max timestamp, first met, with its
        batch's last offset)."""
        out = np.flatnonzero(action[i:j] != DROP) + i
        if not len(out):
            return
        state["max_offset"] = max(state["max_offset"], int(max_offset[out].max()))
        stamps = max_ts[out]
        top = int(np.argmax(stamps))
        if int(stamps[top]) > state["max_ts"]:
            state["max_ts"], state["ts_offset"] = int(stamps[top]), int(last[out[top]])
        raw = action[out] == RAW
        # runs of adjacent whole batches are one slice of the source; each other batch its own bytes
        breaks = np.flatnonzero(~raw[1:] | ~raw[:-1] | (np.diff(out) != 1)) + 1
        for run in np.split(out, breaks):
            first = int(run[0])
            if action[first] == RAW:
                pending.append(bytes(view[int(position[first]):int(ends[run[-1]])]))
            else:
                pending.append(pieces[first])

    def _decide(self, chunk: columnar.Chunk,
                path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, bytes]]:
        """Per batch of a chunk: its action, the largest offset it keeps, the max timestamp it reports to
        the cleaned segment, and the bytes of the batches written anew (by batch index)."""
        batches = chunk.batches
        n, rows = len(batches), chunk.rows
        control = _flag(batches, codec.CONTROL_FLAG)
        can_discard = _transaction_flags(chunk, n, self.meta, path)
        horizon = np.where(_flag(batches, codec.DELETE_HORIZON_FLAG), batches["base_timestamp"],
                           codec.NO_TIMESTAMP)
        horizon_passed = (horizon != codec.NO_TIMESTAMP) & (horizon <= self.now)
        discard_records = np.where(control, can_discard & horizon_passed, can_discard)
        is_last = self._last_of_producer(batches, control)
        retain_deletes = (horizon == codec.NO_TIMESTAMP) | (self.now < horizon)

        offset = chunk.buffers["offset"][:rows]
        row_batch = chunk.buffers["row_batch"][:rows]
        has_key, has_value = _valid(chunk, "key"), _valid(chunk, "value")
        latest = self.omap.latest_offset
        lookup = np.flatnonzero(has_key & (offset <= latest) & ~control[row_batch])
        found = np.full(rows, -1, np.int64)
        digests = md5_digests(chunk.buffers["key_offsets"], chunk.buffers["key_data"], lookup)
        found[lookup] = self.omap.get(digests)
        keep = ~discard_records[row_batch] & (
            control[row_batch] | (offset > latest)
            | (has_key & (offset >= found) & (has_value | retain_deletes[row_batch])))
        kept = np.bincount(row_batch, weights=keep, minlength=n).astype(np.int64)
        tombstones = np.bincount(row_batch, weights=keep & ~has_value, minlength=n) > 0
        total = batches["record_count"].astype(np.int64)
        last = batches["base_offset"] + batches["last_offset_delta"]
        set_horizon = (tombstones | (can_discard & control)) & (horizon == codec.NO_TIMESTAMP)

        action = np.full(n, DROP, np.int8)
        action[(kept > 0) & (kept == total) & ~set_horizon] = RAW
        action[(kept > 0) & ((kept < total) | set_horizon)] = REWRITE
        action[(kept == 0) & is_last] = EMPTY
        action[discard_records & ~is_last] = DROP
        largest_kept = np.full(n, -1, np.int64)
        np.maximum.at(largest_kept, row_batch[keep], offset[keep])
        max_offset = np.where(action == REWRITE, np.where(kept < total, largest_kept, last), last)
        # MemoryRecords.filterTo: a batch copied whole or kept as an empty header reports its own max
        # timestamp; a rebuilt one reports MemoryRecordsBuilder.info(), the max timestamp of the records
        # it keeps (LogAppendTime: the batch's), so a dropped record's later timestamp does not reach the
        # cleaned .timeindex (LogSegment.recover rebuilds it from the records that are there)
        kept_ts = np.full(n, codec.NO_TIMESTAMP, np.int64)
        np.maximum.at(kept_ts, row_batch[keep], chunk.buffers["timestamp"][:rows][keep])
        log_append = _flag(batches, codec.TIMESTAMP_TYPE_FLAG)
        max_ts = np.where((action == REWRITE) & ~log_append, kept_ts, batches["max_timestamp"])

        self.result.records_read += rows
        self.result.records_kept += int(kept[action != DROP].sum())
        pieces: dict[int, bytes] = {}
        encoder = None
        for i in np.flatnonzero(action >= REWRITE).tolist():
            header = columnar.record_batch(batches[i].tolist())
            if action[i] == EMPTY:
                pieces[i] = codec.encode_empty_batch(header)
                continue
            first = int(batches["first_row"][i])
            kept_rows = np.flatnonzero(keep[first:first + int(total[i])]) + first
            new_horizon = self.now + self.retention if set_horizon[i] else int(horizon[i])
            if arrowencode.native():
                encoder = encoder or _chunk_columns(chunk, has_key, has_value)
                pieces[i] = arrowencode.encode_retained(encoder, header, kept_rows, offset[kept_rows],
                                                        delete_horizon_ms=new_horizon)
            else:
                pieces[i] = codec.encode_retained_batch(
                    header, _records(chunk, kept_rows, has_key, has_value), delete_horizon_ms=new_horizon)
        return action, max_offset, max_ts, pieces


#: ``Int.MaxValue``: the most memory one cleaner thread's key map takes
MAX_MAP_MEMORY = 2**31 - 1


def cleaner_offset_map(dedupe_buffer_size: int) -> OffsetMap:
    """The key map one cleaner thread gets of ``log.cleaner.dedupe.buffer.size``: Kafka 3.8.0's
    ``LogCleaner`` gives ``SkimpyOffsetMap`` ``math.min(dedupeBufferSize / numThreads, Int.MaxValue)``
    bytes, so a buffer over 2 GiB holds no more keys a pass than one of 2 GiB."""
    return OffsetMap(min(dedupe_buffer_size, MAX_MAP_MEMORY))


def _check_horizon(part: Partition, now: int) -> None:
    """Refuse a clean whose delete horizon ``now + delete.retention.ms`` is past a long, before anything
    changes.  Kafka 3.8.0 ``MemoryRecords.filterTo`` adds them as Java longs: the horizon wraps negative
    (the next clean drops the tombstones at once) and the records' timestamp deltas from it wrap too,
    which segstore's batch codec does not write.

    :raises ConfigError: naming the value and what to give instead.
    """
    retention = part.config.delete_retention_ms
    if not -LONG_MAX - 1 <= now <= LONG_MAX:
        raise ConfigError(f"expected a time (now, --now-ms) within a long, found {now}", part.path)
    if now + retention > LONG_MAX:
        raise ConfigError(f"expected delete.retention.ms of {part.topic} at most {LONG_MAX - now} (the "
                          f"delete horizon now + delete.retention.ms a long), found {retention}: the "
                          "broker's sum wraps negative and its next clean drops the tombstones; give "
                          "--config delete.retention.ms=N", part.path)


def compact_partition(part: Partition, *, now_ms: int | None = None, dry_run: bool = False,
                      dedupe_buffer_size: int = DEDUPE_BUFFER_SIZE,
                      rewriting: Callable[[int], None] | None = None) -> CompactionResult:
    """Clean a writable partition as the broker's cleaner thread does; see the module docs.

    ``rewriting(offset)`` is called before records from ``offset`` on are moved (a group swapped in).

    The key map holds ``dedupe_buffer_size / 24`` entries at most (``log.cleaner.dedupe.buffer.size``);
    when it fills before the first uncleanable offset, the pass cleans up to where it got, and the
    next pass starts there (the broker's next cleaning of the log), until the range is clean.  A dry
    run plans the first pass only (``map_full`` says whether more would follow).
    """
    now = part.clock() if now_ms is None else now_ms
    for seg in part.segments:
        _check_format(seg)
    omap = cleaner_offset_map(dedupe_buffer_size)
    result: CompactionResult | None = None
    while True:
        dirty, uncleanable = cleanable_range(part, now)
        if result is None:
            result = CompactionResult(part.topic, part.partition, dirty, uncleanable, dirty, dry_run=dry_run)
        if uncleanable <= dirty:
            return result
        _check_horizon(part, now)
        result.map_full = build_offset_map(part, dirty, uncleanable, omap)
        result.end_offset = omap.latest_offset + 1
        stats = _clean(part, omap, uncleanable, now, result, rewriting)
        result.add_pass(stats.records_read, stats.records_kept, stats.bytes_before, stats.bytes_after)
        if dry_run or not result.map_full:
            return result


def _clean(part: Partition, omap: OffsetMap, uncleanable: int, now: int, result: CompactionResult,
           rewriting: Callable[[int], None] | None = None) -> CompactionResult:
    """``Cleaner.doClean`` after the map: every group below the map's end cleaned and swapped in, then
    ``cleaner-offset-checkpoint`` set to the end (not in a dry run).  ``rewriting(base)`` is called
    with the first group's base before any group is swapped in.  The groups are added to
    ``result.groups``; returns this pass's own stats (records and bytes read and kept)."""
    end = omap.latest_offset + 1
    before = [s for s in part.segments if s.base < end]
    active, _ = producer_state(part, now)
    meta = CleanedTransactionMetadata()
    config = part.config
    stats = CompactionResult(part.topic, part.partition, result.first_dirty_offset,
                             result.first_uncleanable_offset, end, dry_run=result.dry_run)
    clean = _Filter(omap, meta, active, now, config.delete_retention_ms, stats)
    groups = group_segments(before, config.segment_bytes, config.segment_index_bytes, uncleanable)
    if groups and rewriting is not None and not result.dry_run:
        rewriting(groups[0][0].base)
    for group in groups:
        result.groups.append([s.base for s in group])
        stats.bytes_before += sum(s.size for s in group)
        cleaned = _CleanedSegment(part, group[0].base)
        meta.cleaned_index = cleaned.aborted
        for i, seg in enumerate(group):
            upper = group[i + 1].base if i + 1 < len(group) else seg.next_offset()
            meta.add_aborted(aborted_between(part, seg.base, upper))
            clean.segment(seg, cleaned)
        stats.bytes_after += cleaned.size
        if not result.dry_run:
            _swap_in(part, cleaned, group)
    if not result.dry_run:
        checkpoint = os.path.join(log_dir_of(part), CLEANER_OFFSET_CHECKPOINT)
        offsets_cp = read_offsets(checkpoint)
        offsets_cp[(part.topic, part.partition)] = end
        write_offsets(checkpoint, offsets_cp)
    return stats


def _swap_in(part: Partition, cleaned: _CleanedSegment, group: list[LogSegment]) -> None:
    """``LocalLog.replaceSegments``: ``.cleaned`` -> ``.swap``; old segments -> ``.deleted`` -> gone;
    ``.swap`` -> final names.  Each step renames the ``.log`` first, then the indexes, as
    ``LogSegment.changeFileSuffixes`` does: a crash once the ``.log`` has its final name leaves
    index ``.swap`` files alone, which ``LogLoader`` renames; with the indexes renamed first, it
    took the final ``.timeindex`` for a replaced segment's file and deleted it beside a ``.log.swap``."""
    mtime_ns = os.stat(group[-1].path).st_mtime_ns
    written = cleaned.write(mtime_ns)
    swaps = []
    for path in written:
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
            partition: int | None = None,
            dedupe_buffer_size: int = DEDUPE_BUFFER_SIZE) -> list[dict[str, Any]]:
    """:func:`compact_partition` over every (selected) partition of a store opened for appends.

    Left alone, with the reason in the result: the KRaft metadata log (the cleaner never runs on it),
    and a topic whose ``cleanup.policy`` is known without ``compact``: from the command line, or for a
    topic the files describe (its ConfigRecord, else the broker default ``delete``; :mod:`.topicconfig`),
    and a topic whose files set a ``segment.index.bytes`` no index can be created with (the broker's
    cleaner fails creating the cleaned segment's and marks the partition uncleanable).  A topic nothing
    says anything of is compacted as asked.  The partition's extra indexes drop their
    entries before records move (:func:`segstore.layouts.forget_from`)."""
    from segstore.layouts import forget_from

    parts = store._partitions()
    results = []
    for (t, n), p in parts.items():
        if (topic is not None and t != topic) or (partition is not None and n != partition):
            continue
        reason = _not_compacted(store, p)
        if reason is not None:
            # dry_run as the run's, as every other result (and retention's left-alone ones) says it
            results.append({"topic": t, "partition": n, "skipped": reason, "dry_run": dry_run})
            continue
        result = compact_partition(p, now_ms=now_ms, dry_run=dry_run, dedupe_buffer_size=dedupe_buffer_size,
                                   rewriting=functools.partial(forget_from, store, t, n))
        results.append(result.to_dict())
    return results


def _not_compacted(store: Any, part: Partition) -> str | None:
    """Why the cleaner leaves ``part`` alone, or None."""
    if not is_log_managed(part.topic):
        return "the KRaft metadata log: the log cleaner never runs on it"
    configs = getattr(store, "topic_configs", None)
    known = configs is not None and (configs.for_topic(part.topic).described
                                     or "cleanup_policy" in configs.explicit)
    if known and "compact" not in part.config.cleanup_policy.split(","):
        return f"cleanup.policy={part.config.cleanup_policy}: the log cleaner does not compact this topic"
    if part.unwritable is not None:     # the cleaned segment's indexes cannot be created: uncleanable
        return part.unwritable
    return None
