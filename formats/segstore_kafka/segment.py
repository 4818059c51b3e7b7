"""One Kafka log segment: ``%020d.log`` plus its offset, time and transaction indexes.

The ``.log`` file is the truth: a sequence of record batches (see
:mod:`segstore_kafka.batch`).  The indexes are sparse and derived from it, built
by the rule of Kafka 3.8's ``LogSegment.append``: *after* a batch is written, if
more than ``index.interval.bytes`` were appended since the last index entry (not
counting this batch), the offset index gets ``(batch last offset, batch start
position)`` and the time index gets ``(max timestamp so far, offset of the batch
that holds it)`` when that timestamp is greater than its last entry's.  A
segment's first batch never gets an entry.  When a segment rolls or closes the
time index gets its max timestamp forced in and both indexes are trimmed.

:meth:`LogSegment.recover` validates the log batch by batch (CRC and all),
cuts a torn or corrupt tail (keeping the cut bytes aside), and rebuilds every
index exactly as the appends would have.

Thread-safety: not thread-safe; the owning partition serialises access.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError, SegstoreError, TruncatedDataError
from segstore.files import AppendFile
from segstore.search import Bound, search

from . import batch as codec
from . import columnar
from .compression import decompress
from .offsetindex import KafkaIndex, OffsetIndex
from .timeindex import NO_TIMESTAMP, TimeIndex, TimestampOffset
from .txnindex import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from .results import RecoverResult

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: the index class a segment opens (offset or time)
_K = TypeVar("_K", bound=KafkaIndex)


# Lookups hop from batch to batch reading only the v2 header (``batch.HEADER``, one
# ``unpack_from`` on the mapped log); these name the fields they read from it.
HEADER = codec.HEADER
H_BASE_OFFSET, H_LENGTH, H_MAGIC, H_LAST_OFFSET_DELTA, H_MAX_TIMESTAMP = 0, 1, 3, 6, 8
# Unpacking bytes 0, 1, 2, ... makes the magic field read its own byte position.
assert HEADER.unpack(bytes(range(HEADER.size)))[H_MAGIC] == codec.MAGIC_OFFSET
V2_MIN_LENGTH = codec.RECORD_BATCH_OVERHEAD - codec.LOG_OVERHEAD


#: Blocks (``files.REMOTE_BLOCK_SIZE``) a remote log is fetched in per window of a column read.
REMOTE_WINDOW_BLOCKS = 2

def header_fields(view: memoryview, pos: int, path: str) -> tuple:
    """The ``batch.HEADER`` fields of the batch at ``view[pos]``, without CRC check or records.

    A whole v2 batch is read with one ``unpack_from``; anything else (a legacy
    v0/v1 entry, a short, torn or malformed one) goes through
    :func:`batch.read_batch_header`, which reads legacy entries and raises its typed
    errors, so both paths answer alike.  ``O(1)``.

    :raises TruncatedDataError: the log ends inside the batch.
    :raises CorruptDataError: a bad length or magic.
    """
    end = len(view)
    if end - pos >= HEADER.size:
        fields = HEADER.unpack_from(view, pos)
        length = fields[H_LENGTH]
        if (fields[H_MAGIC] == codec.MAGIC_V2 and length >= V2_MIN_LENGTH
                and pos + codec.LOG_OVERHEAD + length <= end):
            return fields
    b = codec.read_batch_header(view, pos, path=path)
    return (b.base_offset, b.length, b.partition_leader_epoch, b.magic, b.crc, b.attributes,
            b.last_offset_delta, b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
            b.base_sequence, b.record_count)


def file_name(base_offset: int, suffix: str) -> str:
    """``%020d`` + suffix, as Kafka names segment files."""
    return f"{base_offset:020d}{suffix}"


class LogOffsetPosition(NamedTuple):
    """The batch holding an offset: its last offset, start position and size (``translateOffset``)."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """The first record at or after a timestamp (``findOffsetByTimestamp``)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def transactional_rows(batches: np.ndarray) -> np.ndarray:
    """Which rows of a chunk's batch headers (``columnar.BATCH_DTYPE``) are transactional or control v2
    batches of a producer: the ones :class:`TransactionTracker` observes (:func:`tracked`)."""
    return ((batches["magic"] >= codec.MAGIC_V2) & (batches["producer_id"] >= 0)
            & (batches["attributes"] & (codec.TRANSACTIONAL_FLAG | codec.CONTROL_FLAG) != 0))


def plain_producer_rows(batches: np.ndarray) -> np.ndarray:
    """Which rows of a chunk's batch headers are a producer's non-transactional v2 data batches: the ones
    Kafka 3.8.0 ``ProducerAppendInfo.appendDataBatch`` refuses while that producer's transaction is open
    (:meth:`TransactionTracker.open_from`)."""
    return ((batches["magic"] >= codec.MAGIC_V2) & (batches["producer_id"] >= 0)
            & (batches["attributes"] & (codec.TRANSACTIONAL_FLAG | codec.CONTROL_FLAG) == 0))


class ProducerBatches(NamedTuple):
    """A segment's producer batches, as :meth:`LogSegment.check_log` finds them (positions rise)."""

    #: positions of the batches :class:`TransactionTracker` observes (:func:`transactional_rows`)
    tracked: np.ndarray
    #: positions of the non-transactional data batches of a producer (:func:`plain_producer_rows`)
    plain: np.ndarray
    #: their producer ids
    plain_ids: np.ndarray


def tracked(batch: codec.RecordBatch) -> bool:
    """Whether :class:`TransactionTracker` observes ``batch``: a producer's transactional batch, or its
    control batch whether or not that is flagged transactional (Kafka 3.8.0 ``ProducerAppendInfo.append``
    reads any control batch of a producer as its end marker)."""
    return batch.producer_id >= 0 and (batch.is_transactional or batch.is_control)


class TransactionTracker:
    """Open transactions of a partition, to fill ``.txnindex`` (Kafka ``ProducerStateManager``, reduced).

    A producer's transaction opens at its first transactional data batch and closes
    at its control marker; an ABORT yields an :class:`AbortedTxn` whose last stable
    offset is the first offset of the earliest other open transaction (else the
    marker's offset + 1).
    """

    def __init__(self) -> None:
        self._open: dict[int, int] = {}   # producer id -> first offset, insertion = offset order

    def opened(self, producer_id: int, first_offset: int) -> None:
        """A transaction open from ``first_offset`` before the batches observed (a producer snapshot's)."""
        self._open.setdefault(producer_id, first_offset)

    def open_from(self, producer_id: int) -> int | None:
        """The first offset of ``producer_id``'s open transaction, None when it has none open."""
        return self._open.get(producer_id)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> the first offset of its open transaction (a copy)."""
        return dict(self._open)

    def observe(self, batch: codec.RecordBatch) -> AbortedTxn | None:
        """Update with one batch; returns the aborted transaction it completes, if any."""
        pid = batch.producer_id
        if not tracked(batch):
            return None
        if not batch.is_control:
            self._open.setdefault(pid, batch.base_offset)
            return None
        if batch.record_count == 0:
            return None     # completes nothing (ProducerAppendInfo.append: an emptied marker)
        first = self._open.pop(pid, None)
        if first is None or batch.end_marker_type() != "ABORT":
            return None
        others = sorted(self._open.values())
        lso = others[0] if others else batch.last_offset + 1
        return AbortedTxn(pid, first, batch.last_offset, lso)


#: ``(segment, pos) -> chunks``: the chunks of the segment's log from batch boundary ``pos`` to its end,
#: as ``columnar.decode(view, start=pos, want=0)`` gives them (its error after the chunks before it).
ChunkSource = Callable[["LogSegment", int], Iterator[columnar.Chunk]]


#: what a producer's control batch may hold (None: no record, a marker the cleaner emptied)
_END_MARKERS = (None, "COMMIT", "ABORT")


def _not_a_marker(kind: str | None) -> str:
    """The problem of a producer's control batch of another control type (``kind``): Kafka 3.8.0
    ``ProducerAppendInfo.append`` reads it with ``EndTransactionMarker.deserialize``, whose
    ``ensureTransactionMarkerControlType`` throws ``IllegalArgumentException`` (not the
    ``InvalidRecordException`` ``LogSegment.recover`` catches): the broker does not load the log."""
    return (f"expected a COMMIT or ABORT marker in a control batch of a producer, found a {kind} control "
            "record: Kafka's EndTransactionMarker.deserialize throws IllegalArgumentException on it "
            "(ProducerAppendInfo.append) and the broker does not load the log")


def _stream_inflates(batch: codec.RecordBatch) -> bool:
    """Whether a batch's records region is a stream its codec reads to the end (uncompressed: always).
    Kafka 3.8.0 ``DefaultRecordBatch.StreamRecordIterator`` turns a failing stream into a
    ``KafkaException`` (``IOException``: a gzip, LZ4 or zstd stream cut short) or lets the codec's own
    exception through, neither caught by ``LogSegment.recover``; records that do not fill what a whole
    stream gave (a snappy stream SnappyInputStream ends at a block boundary, a gzip member of too few
    bytes) are an ``InvalidRecordException`` (``DefaultRecord.readFrom``), which it catches."""
    if batch.attributes & codec.CODEC_MASK == codec.NONE or batch.magic < codec.MAGIC_V2:
        return True
    try:
        decompress(batch.attributes & codec.CODEC_MASK, memoryview(batch.data)[codec.RECORD_BATCH_OVERHEAD:],
                   path=batch.path, pos=batch.position + codec.RECORD_BATCH_OVERHEAD)
    except CorruptDataError:
        return False
    return True


def _null_in_marker(batch: codec.RecordBatch) -> bool:
    """Whether a producer's control batch fails in Kafka 3.8.0 ``ProducerAppendInfo.append`` on a null: its
    record's key null (``ControlRecordType.parseTypeId`` calls ``key.remaining()``), or its value null
    under a COMMIT or ABORT key (``EndTransactionMarker.deserializeValue``, ``value.remaining()``): a
    ``NullPointerException``, not the ``InvalidRecordException`` ``LogSegment.recover`` catches."""
    as_v2 = batch if batch.magic == codec.MAGIC_V2 else replace(batch, magic=codec.MAGIC_V2)
    try:
        records = as_v2.records()
    except CorruptDataError:
        return False
    if not records:
        return False
    key, value = records[0].key, records[0].value
    if key is None:
        return True
    if len(key) < codec.CONTROL_KEY.size:
        return False
    version, type_id = codec.CONTROL_KEY.unpack_from(key)
    return version >= 0 and codec.CONTROL_TYPES.get(type_id) in ("COMMIT", "ABORT") and value is None


def _records_or_crc_error(batch: codec.RecordBatch, view: memoryview, position: int) -> list[codec.Record]:
    """``batch``'s records, decoded without a CRC check (Kafka's time lookups check none); records that
    do not decode under a CRC that does not hold raise the CRC's error, where every read of the batch
    (``read``, ``dump``, ``scan``, ``verify``) names the damage, not the record it left undecodable.

    :raises CorruptDataError: the records do not decode.
    """
    try:
        return batch.records()
    except CorruptDataError:
        if not batch.is_valid():
            next(codec.iter_batches(view, path=batch.path, start=position))   # raises the CRC's error
        raise


class LogSegment:
    """A ``.log`` file and its indexes, starting at absolute offset ``base``.

    :param directory: the partition directory.
    :param index_interval_bytes: Kafka ``index.interval.bytes``.
    :param max_index_size: Kafka ``segment.index.bytes`` (preallocation size of new indexes).
    :param writable: open the files for writing.
    :param create: create missing files (a new segment).
    :param read_indexes: False to leave the offset and time index files unread (a reader
        that found one corrupt): empty stand-ins, lookups walk the log from its start.
    """

    def __init__(self, directory: str, base: int, *, index_interval_bytes: int, max_index_size: int,
                 writable: bool = False, create: bool = False, created_ms: int = 0,
                 read_indexes: bool = True) -> None:
        self.base = base
        #: when the segment was made (what ``segment.ms`` counts from while it has no timestamps)
        self.created_ms = created_ms
        self.directory = directory
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.writable = writable or create
        self.log = AppendFile(self._path(LOG_SUFFIX), create=create, writable=self.writable)
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex
        #: names of index files that were missing when the segment was opened
        self.missing_indexes: list[str] = []
        #: the ``.timeindex`` was missing (Kafka before 0.10.1 wrote none): made empty, as Kafka 3.8 does,
        #: whose max timestamp is then the empty index's (-1) until a recovery rebuilds it or appends
        #: come (:meth:`max_timestamp_so_far`): ``retention.ms`` measures from the file's mtime
        self.legacy_time_index = False
        self._read_indexes = read_indexes or self.writable
        try:
            self.offset_index = self._open_index(OffsetIndex, INDEX_SUFFIX, create)
            self.time_index = self._open_index(TimeIndex, TIME_INDEX_SUFFIX, create)
        except BaseException:
            self.log.close()
            raise
        self.txn_index = TransactionIndex(self._path(TXN_INDEX_SUFFIX), writable=self.writable)
        self.bytes_since_last_index_entry = 0
        self._max_ts: TimestampOffset | None = None
        self._rolling_ts: int | None = None
        #: (log size, :meth:`index_gone_back`'s answer at that size)
        self._gone_back_kept: tuple[int, CorruptDataError | None] | None = None
        #: where :meth:`recover` found a rebuilt index full (None: it has not, or every entry fitted):
        #: Kafka 3.8.0's ``LogSegment.recover`` throws there (``IllegalArgumentException``, which no caller
        #: catches: the log does not load)
        self.index_full_at: int | None = None
        #: the log size at which a walk from its start found every batch a whole v2 one, its CRC holding
        #: and its last offset above the one before (no torn batch, no index going back: nothing to walk
        #: again while the size stays; only appends grow it, and recover forgets it)
        self._intact_size: int | None = None

    @property
    def indexes_read(self) -> bool:
        """Whether the offset and time index files were read (a reader passes over a corrupt one)."""
        return self._read_indexes

    def _path(self, suffix: str) -> str:
        return os.path.join(self.directory, file_name(self.base, suffix))

    def _open_index(self, cls: type[_K], suffix: str, create: bool) -> _K:
        path = self._path(suffix)
        if not self._read_indexes:
            return cls.absent(path, self.base)
        if not create and not files.exists(path):
            if cls is TimeIndex:
                # Kafka before 0.10.1 wrote no time index.  Kafka 3.8 makes a missing one empty
                # (LogSegment.sanityCheck: timeIndex().resize(0)) and recovers nothing for it.
                self.legacy_time_index = True
                if not self.writable:
                    return cls.absent(path, self.base)
                index = cls.open(path, self.base, max_index_size=self.max_index_size, writable=True,
                                 create=True)
                index.trim()
                return index
            self.missing_indexes.append(path)
            if not self.writable:
                # Reading never writes: an empty in-memory stand-in until recovery rebuilds it.
                return cls.absent(path, self.base)
            create = True
        return cls.open(path, self.base, max_index_size=self.max_index_size, writable=self.writable,
                        create=create)

    # -- state ----------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.log.path

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def needs_recovery(self) -> bool:
        """True when an index is missing or was left untrimmed (preallocated) by a crash, or the
        ``.txnindex`` is not as Kafka loads it (:meth:`TransactionIndex.problems`: torn, unreadable)."""
        return self.indexes_left_by_crash or bool(self.txn_index.problems(self.base))

    @property
    def indexes_left_by_crash(self) -> bool:
        """True when the offset or time index is missing or was left untrimmed (preallocated)."""
        return bool(self.missing_indexes) or self.offset_index.untrimmed or self.time_index.untrimmed

    def crash_left_problems(self) -> list[tuple[str, int | None, str]]:
        """What :attr:`indexes_left_by_crash` found, as ``verify`` names it: each index file missing or
        left untrimmed, at the byte where its all-zero slots begin (Kafka counts a file's whole length
        as entries: in a segment it does not recover, those slots are read as entries)."""
        found: list[tuple[str, int | None, str]] = [
            (path, None, "expected the segment's offset index, found no such file (run recover)")
            for path in self.missing_indexes]
        for index in (self.offset_index, self.time_index):
            if index.untrimmed:
                end = len(index) * index.entry_size
                found.append((index.path, end, f"expected the index of a closed segment to end after its "
                              f"{len(index)} entries, found {(index.file.size - end) // index.entry_size} "
                              "all-zero slots after them: left untrimmed (preallocated) by a crash "
                              "(run recover)"))
        return found

    @property
    def indexes_past_log(self) -> bool:
        """True when the last offset or time index entry names a batch the log no longer holds: a log
        cut at a batch boundary under its indexes (by another tool, or a follower's truncation), which
        :meth:`check_tail` does not see as a torn tail.  ``O(batches after the last index entry)``."""
        if len(self.offset_index) and self.last_indexed_position() >= self.log.size:
            return True
        return len(self.time_index) > 0 and self.time_index.last_entry.offset >= self.next_offset()

    def view(self) -> memoryview:
        return self.log.view()

    def batches(self, start: int = 0, *, check_crc: bool = True) -> Iterator[codec.RecordBatch]:
        """Batches from byte ``start`` to the end of the log, positions absolute in the file."""
        return codec.iter_batches(self.log.view(), path=self.path, check_crc=check_crc, start=start)

    def column_chunks(self, want: int, start: int = 0, end: int | None = None,
                      capacity: columnar.Capacity | None = None) -> Iterator[columnar.Chunk]:
        """The batches starting in ``[start, end)`` of the log, decoded into column chunks (CRC checked).

        ``start`` must be a batch boundary (:meth:`batch_at_or_after`).  ``O(bytes)``, memory bounded
        by the chunk ``capacity`` (the default :class:`columnar.Capacity` when None).
        """
        if self.log.remote:
            return self._remote_column_chunks(want, start, end, capacity)
        # (the view taken for each chunk: a reader between two holds none, so that the file may let
        # go of its map and descriptor, files._OpenReaders)
        return columnar.decode(self.log.view, path=self.path, start=start, end=end, want=want,
                               capacity=capacity)

    def header_chunks(self) -> Iterator[columnar.Chunk]:
        """The batch headers of the log's whole batches, as column chunks
        (:data:`columnar.WANT_BATCH_HEADERS`: what Kafka 3.8's producer state reads, ``ProducerAppendInfo``
        and ``LogSegment.recover``: each batch's header and CRC, a data batch's records not decoded, a
        control batch's marker decoded; a data batch gives no row): a last batch the log ends inside
        (a live writer's, not yet whole; or one a crash tore, which recovery cuts) counts for none, as
        in :meth:`next_offset`.  Other damage raises as in :meth:`column_chunks`."""
        try:
            yield from self.column_chunks(columnar.WANT_BATCH_HEADERS)
        except TruncatedDataError:
            return

    def _remote_column_chunks(self, want: int, start: int, end: int | None,
                              capacity: columnar.Capacity | None) -> Iterator[columnar.Chunk]:
        """:meth:`column_chunks` of a remote log: by byte-range windows, never the whole file.

        Each window ends at a batch start the offset index names (or the log's end), so no
        batch is cut; a window whose decode fails where the index was wrong is read again
        from its last whole batch to the log's end, which raises the log's own error if any.
        """
        size = self.log.size
        stop = size if end is None else min(end, size)
        positions = self.offset_index.columns()["position"]
        pos = start
        while pos < stop:
            reach = min(stop, pos + REMOTE_WINDOW_BLOCKS * files.REMOTE_BLOCK_SIZE)
            i = int(np.searchsorted(positions, reach, side="left"))
            window_end = int(positions[i]) if i < len(positions) else size
            last = pos
            try:
                for chunk in columnar.decode(self.log.window(pos, window_end), path=self.path, start=pos,
                                             end=min(window_end, stop), want=want, capacity=capacity):
                    batches = chunk.batches
                    last = int(batches["position"][-1] + batches["size"][-1])
                    yield chunk
            except SegstoreError:
                if window_end >= size:
                    raise
                yield from columnar.decode(self.log.window(last, size), path=self.path, start=last, end=stop,
                                           want=want, capacity=capacity)
                return
            pos = window_end

    def batch_at_or_after(self, position: int) -> int:
        """The position of the first batch starting at or after byte ``position`` (the log size if none).

        The offset index entry at or below it, then batch headers only.
        ``O(log(entries) + batches per index interval)``.
        """
        columns = self.offset_index.columns()
        slot = search(columns["position"], position, Bound.LARGEST_LOWER)
        pos = int(columns["position"][slot]) if slot >= 0 else 0
        while pos < min(position, self.log.size):
            pos += header_fields(self._batch_view(pos), pos, self.path)[H_LENGTH] + codec.LOG_OVERHEAD
        return pos

    def check_log(self, expected_offset: int | None, decoded: ChunkSource | None = None, *,
                  in_transaction: bool = False
                  ) -> tuple[list[tuple[str, int | None, str]], np.ndarray, np.ndarray, int, int | None, int,
                             ProducerBatches, int]:
        """The log's problems for ``verify``: ``(problems, batch positions, their last offsets, bytes
        walked, the offset the next segment must reach, the largest max timestamp of its v2 batches
        (-1: none), its producers' v2 batches (:class:`ProducerBatches`), the largest max timestamp of
        the batches whose records decoded, of any magic)``; the positions (int64) rise strictly (the
        walk only goes forward).

        Every batch's CRC is checked and its records decoded (the columnar decoder,
        C where built, no column copied); a control batch's marker is parsed.  After
        a bad batch whose header holds, the walk goes on at its length (as Kafka's
        ``FileLogInputStream`` trusts it); a header that does not hold ends the walk
        there.  A batch below ``expected_offset`` (the last one's end) is a problem.
        ``decoded``: where the chunks come from (``decoded(segment, pos)``, as
        ``columnar.decode(view, start=pos, want=0)`` gives them: decoded ahead on other threads);
        the log decoded here when None.  ``in_transaction``: a transaction is open where the segment
        starts; the plain producer batches are collected from there, else from the first chunk holding
        a transactional batch (none of a log without transactions: only they can be in one).
        ``O(bytes)``, per chunk numpy (no Python per batch but for the problems); memory bounded by one
        chunk (plus two int64 per batch, two more per plain producer batch collected).
        """
        problems: list[tuple[str, int | None, str]] = []
        starts: list[np.ndarray] = []
        ends: list[np.ndarray] = []
        transactional: list[np.ndarray] = []
        plain: list[np.ndarray] = []
        plain_ids: list[np.ndarray] = []
        largest = largest_any = NO_TIMESTAMP
        view = self.log.view()
        end = len(view)
        pos = 0
        #: a batch ending below the base offset was named (once a segment: the later ones share the cause)
        below_base = False
        while pos < end:
            try:
                chunks = (decoded(self, pos) if decoded is not None
                          else columnar.decode(view, path=self.path, start=pos, want=0))
                for chunk in chunks:
                    batches = chunk.batches
                    positions = batches["position"].astype(np.int64)
                    firsts = batches["base_offset"].astype(np.int64)
                    lasts = firsts + batches["last_offset_delta"]
                    starts.append(positions)
                    ends.append(lasts)
                    v2 = batches["magic"] >= codec.MAGIC_V2
                    transactional.append(positions[transactional_rows(batches)])
                    in_transaction = in_transaction or len(transactional[-1]) > 0
                    if in_transaction:
                        own = plain_producer_rows(batches)
                        plain.append(positions[own])
                        plain_ids.append(batches["producer_id"][own].astype(np.int64))
                    # v2 batches: Kafka 0.11 and later, which always wrote a time index
                    stamped = batches["max_timestamp"][v2]
                    if len(stamped):
                        largest = max(largest, int(stamped.max()))
                    if len(batches):
                        largest_any = max(largest_any, int(batches["max_timestamp"].max()))
                    found: list[tuple[int, int, tuple[str, int | None, str]]] = []
                    # each batch starts above the last one's end (the first above expected_offset)
                    if expected_offset is not None and int(firsts[0]) < expected_offset:
                        at = int(positions[0])
                        found.append((at, 0, self._offset_problem(at, expected_offset, int(firsts[0]))))
                    below = np.flatnonzero((lasts < self.base) | (lasts - self.base > codec.INT32_MAX))
                    if len(below) and not below_base:
                        i, below_base = int(below[0]), True
                        at = int(positions[i])
                        found.append((at, 1, self._below_base_problem(at, int(firsts[i]), int(lasts[i]))))
                    for i in (np.flatnonzero(firsts[1:] <= lasts[:-1]) + 1).tolist():
                        at = int(positions[i])
                        found.append((at, 0, self._offset_problem(at, int(lasts[i - 1]) + 1, int(firsts[i]))))
                    control = v2 & (batches["attributes"] & codec.CONTROL_FLAG != 0)
                    for i in np.flatnonzero(control).tolist():
                        problem = self._control_problem(view, int(positions[i]))
                        if problem is not None:
                            found.append((int(positions[i]), 2, problem))
                    problems += [problem for _pos, _kind, problem in sorted(found)]
                    expected_offset = int(lasts[-1]) + 1
                    pos = int(positions[-1]) + int(batches["size"][-1])
                pos = end
            except SegstoreError as err:
                try:
                    header = codec.read_batch_header(view, pos, path=self.path)
                except CorruptDataError:  # the header itself: what the decoder said, and the walk ends
                    problems.append((err.path or self.path, pos if err.pos is None else err.pos, err.message))
                    break
                starts.append(np.array([pos], np.int64))
                # base + delta wrapped as the chunks' int64 (and Java's long) sum wraps it: a base offset
                # near Long.MAX_VALUE ends past it
                ends.append(np.array([header.base_offset], np.int64) + header.last_offset_delta)
                if expected_offset is not None and header.base_offset < expected_offset:
                    problems.append(self._offset_problem(pos, expected_offset, header.base_offset))
                if not self.indexable(header.last_offset) and not below_base:
                    below_base = True
                    problems.append(self._below_base_problem(pos, header.base_offset, header.last_offset))
                problems.append((err.path or self.path, pos if err.pos is None else err.pos, err.message))
                expected_offset = header.last_offset + 1
                pos += header.size
        empty = [np.zeros(0, np.int64)]
        return (problems, np.concatenate(starts or empty), np.concatenate(ends or empty), pos,
                expected_offset, largest,
                ProducerBatches(np.concatenate(transactional or empty), np.concatenate(plain or empty),
                                np.concatenate(plain_ids or empty)),
                largest_any)

    def _offset_problem(self, pos: int, expected: int, found: int) -> tuple[str, int, str]:
        return (self.path, pos, f"expected offsets from {expected}, found a batch at {found}")

    def indexable(self, offset: int) -> bool:
        """Whether an index entry can name ``offset``: at most ``Integer.MAX_VALUE`` past the base offset
        and not below it (``AbstractIndex.toRelative``, ``LogSegment.canConvertToRelativeOffset``)."""
        return 0 <= offset - self.base <= codec.INT32_MAX

    def _below_base_problem(self, pos: int, first: int, last: int) -> tuple[str, int, str]:
        """A batch ending where no index of the segment can name it.  Kafka 3.8.0 ``LogSegment.recover``
        (``ensureOffsetInRange``) throws ``LogSegmentOffsetOverflowException`` on it and
        ``LogLoader.retryOnOffsetOverflow`` calls ``LocalLog.splitOverflowedSegment``: below the base
        offset (the file's name), its ``require(segment.hasOverflow)`` fails (the segment's last offset
        fits) and the broker does not start on the log directory; more than ``Integer.MAX_VALUE`` past
        it (a segment of Kafka before 2.0, KAFKA-6264), the broker splits the segment, which segstore
        does not: the batch stays unindexed."""
        if last < self.base:
            return (self.path, pos, f"expected batches ending at or after the segment's base offset "
                    f"{self.base} (its file name), found one of offsets {first}..{last}: Kafka's "
                    "LogSegment.recover cannot index it (LogSegmentOffsetOverflowException) and the broker "
                    "fails to load the log")
        return (self.path, pos, f"expected batches ending at most {codec.INT32_MAX} past the segment's base "
                f"offset {self.base}, found one of offsets {first}..{last}: no index can name it (Kafka "
                "splits such a segment when it recovers it, LocalLog.splitOverflowedSegment; segstore does "
                "not)")

    def _control_problem(self, view: memoryview, pos: int) -> tuple[str, int | None, str] | None:
        try:
            header = codec.read_batch_header(view, pos, path=self.path)
            kind = header.control_type()
        except CorruptDataError as err:
            return (err.path or self.path, pos if err.pos is None else err.pos, err.message)
        if header.producer_id >= 0 and kind not in _END_MARKERS:
            return (self.path, pos, _not_a_marker(kind))
        return None

    def _batch_view(self, pos: int) -> memoryview:
        """The log as a view (positions the file's) holding the header of the batch at ``pos``: the
        map locally; remotely only that header is fetched (a legacy entry whole: its last offset
        may lie in a compressed inner set)."""
        if not self.log.remote:
            return self.log.view()
        view = self.log.window(pos, pos + HEADER.size)
        if len(view) > pos + codec.MAGIC_OFFSET and view[pos + codec.MAGIC_OFFSET] < codec.MAGIC_V2:
            length = codec.ENTRY_PREFIX.unpack_from(view, pos)[1]
            view = self.log.window(pos, pos + codec.LOG_OVERHEAD + max(0, length))
        return view

    def headers(self, start: int = 0) -> Iterator[codec.RecordBatch]:
        """Batch headers only (no CRC, no record decode) from byte ``start``: cheap hops."""
        pos, end = start, self.log.size
        while pos < end:
            header = codec.read_batch_header(self._batch_view(pos), pos, path=self.path)
            yield header
            pos += header.size

    def max_timestamp_so_far(self) -> TimestampOffset:
        """The largest batch max timestamp and the last offset of its batch (loaded lazily), of the
        whole batches: a last batch the log ends inside (a live writer's, not yet whole; or one a
        crash tore, which recovery cuts) holds no record a reader is given, so it counts for none."""
        if self._max_ts is None and self.legacy_time_index:
            # Kafka 3.8.0 loads a missing time index empty (LogSegment.sanityCheck) and takes its last
            # entry for the max (readMaxTimestampAndOffsetSoFar: timeIndex().lastEntry(), -1): the records'
            # timestamps count only once recovery rebuilt it (recover() clears the flag; so does the
            # partition for a segment the broker's unclean load recovers), or as appends come
            self._max_ts = TimestampOffset(NO_TIMESTAMP, self.base)
        if self._max_ts is None:
            last = self.time_index.last_entry
            # an entry for records past the whole batches (a tail torn after it was written) is not one
            trusted = len(self.time_index) > 0 and last.offset < self.next_offset()
            best = TimestampOffset(last.timestamp, last.offset) if trusted else \
                TimestampOffset(NO_TIMESTAMP, self.base)
            start = self.offset_index.lookup_offset(best.offset).position if trusted else 0
            try:
                for header in self.headers(start):
                    if header.max_timestamp > best.timestamp:
                        best = TimestampOffset(header.max_timestamp, header.last_offset)
            except TruncatedDataError:
                pass
            self._max_ts = best
        return self._max_ts

    def largest_timestamp(self) -> int:
        """``LogSegment.largestTimestamp``: :meth:`max_timestamp_so_far`'s timestamp, else (no record
        timestamp: an empty segment) the ``.log`` file's mtime; what ``retention.ms`` and
        ``min.compaction.lag.ms`` are measured from."""
        largest = self.max_timestamp_so_far().timestamp
        return largest if largest >= 0 else files.mtime_ms(self.path)

    def rolling_timestamp(self) -> int | None:
        """The first batch's max timestamp (what ``segment.ms`` is measured from), None if empty."""
        if self._rolling_ts is None and self.log.size:
            self._rolling_ts = next(self.headers()).max_timestamp
        return self._rolling_ts

    def next_offset(self) -> int:
        """One past the last offset of the whole batches in the log (the base offset when empty).

        A torn or corrupt tail is not counted (reads and ``verify`` report it).
        ``O(batches after the last index entry)``; ``O(batches)`` when no whole batch starts where
        that entry points (a tail torn through the indexed batch, a log cut below the entry).
        """
        start = self.last_indexed_position()
        nxt = self._next_offset_from(start)
        if nxt is None and start:
            nxt = self._next_offset_from(0)
        return self.base if nxt is None else nxt

    def last_indexed_position(self) -> int:
        """Where the offset index's last entry points (0 without one)."""
        return self.offset_index.lookup_offset(self.offset_index.last_offset).position \
            if len(self.offset_index) else 0

    def _next_offset_from(self, start: int) -> int | None:
        """One past the last offset of the whole batches from byte ``start``; None if none is whole."""
        nxt = None
        try:
            for header in self.headers(start):
                nxt = header.last_offset + 1
        except CorruptDataError:
            pass
        return nxt

    # -- writing ----------------------------------------------------------------
    def make_appendable(self) -> None:
        """Give the indexes their preallocated room back (the segment becomes active)."""
        self.offset_index.grow(self.max_index_size)
        self.time_index.grow(self.max_index_size)

    def should_roll(self, *, batch_size: int, max_timestamp: int, max_offset: int, segment_bytes: int,
                    segment_ms: int, now_ms: int) -> bool:
        """Kafka ``LogSegment.shouldRoll`` (no jitter)."""
        rolling = self.rolling_timestamp()
        waited = max_timestamp - rolling if rolling is not None and rolling >= 0 else now_ms - self.created_ms
        return (self.size > segment_bytes - batch_size
                or (self.size > 0 and waited > segment_ms)
                or self.offset_index.is_full or self.time_index.is_full
                or max_offset - self.base > 0x7FFFFFFF)

    def append(self, data: bytes, *, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int) -> int:
        """Append one batch's bytes; returns its position.  Indexes per Kafka's interval rule.

        The blocks of the index entries it may add are reserved first (the index files are sparse,
        as Kafka's ``AbstractIndex`` makes them, and reserved a step at a time): a full disk refuses
        the batch before its bytes are in the log.
        """
        self.offset_index.reserve()
        self.time_index.reserve()
        position = self.log.append(data)
        if position == 0:
            self._rolling_ts = max_timestamp
        current = self.max_timestamp_so_far()
        if max_timestamp > current.timestamp:
            self._max_ts = TimestampOffset(max_timestamp, offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append_entry(last_offset, position)
            ts = self.max_timestamp_so_far()
            self.time_index.maybe_append(ts.timestamp, ts.offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(data)
        return position

    def on_become_inactive(self) -> None:
        """On roll: force the max timestamp into the time index, trim the indexes, flush."""
        ts = self.max_timestamp_so_far()
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()
        self.flush()

    # -- lookups ----------------------------------------------------------------
    def translate_offset(self, offset: int, start: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is ``>= offset``, walked from the index entry at or below it.

        Kafka ``LogSegment.translateOffset``: one index search, then batch headers
        only (no CRC, no records) from that position.
        ``O(log(entries) + batches per index interval)``.
        """
        position = self.offset_index.lookup_position(offset)
        if position < start:
            position = start
        end = self.log.size
        path = self.log.path
        while position < end:
            fields = header_fields(self._batch_view(position), position, path)
            size = fields[H_LENGTH] + codec.LOG_OVERHEAD
            last = fields[H_BASE_OFFSET] + fields[H_LAST_OFFSET_DELTA]
            if last >= offset:
                return LogOffsetPosition(last, position, size)
            position += size
        return None

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0, *,
                                 closed: bool = False) -> TimestampAndOffset | None:
        """The first record with timestamp ``>= timestamp`` and offset ``>= starting_offset``.

        Kafka ``LogSegment.findOffsetByTimestamp``: the time index gives an offset,
        the offset index its position; batch headers are walked to the first batch
        whose max timestamp reaches the target, and only that batch's records are
        decoded (no CRC check, as Kafka).  The walk ends at a last batch the log ends inside (a
        live writer's, or one a crash tore): it holds no record a reader is given.  In a ``closed``
        segment (not the active one) no writer is at work: such a batch is damage, raised as a read
        of it raises it, not passed over for an answer from the next segment.
        ``O(log(entries) + batches walked + records of one batch)``.
        """
        entry = self.time_index.lookup_timestamp(timestamp)
        position = self.offset_index.lookup_position(max(entry.offset, starting_offset))
        view = self.log.view()
        end = len(view)
        path = self.log.path
        while position < end:
            try:
                fields = header_fields(view, position, path)
            except TruncatedDataError:
                if closed:
                    raise
                return None
            if fields[H_MAX_TIMESTAMP] >= timestamp:
                full = codec.read_batch_header(view, position, path=path)
                for record in _records_or_crc_error(full, view, position):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = full.partition_leader_epoch
                        return TimestampAndOffset(record.timestamp, record.offset,
                                                  epoch if epoch >= 0 else None)
            position += fields[H_LENGTH] + codec.LOG_OVERHEAD
        return None

    def offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """The first record holding this segment's largest timestamp (Kafka 3.8
        ``UnifiedLog.fetchOffsetByTimestamp`` for ``MAX_TIMESTAMP`` on its segment: from where the offset
        index puts the batch :meth:`max_timestamp_so_far` names, the first batch of that max timestamp,
        then ``RecordBatch.offsetOfMaxTimestamp``: its first record of that timestamp); None when the
        segment holds no whole batch.  ``O(log(entries) + batches walked + records of one batch)``."""
        best = self.max_timestamp_so_far()
        position = self.offset_index.lookup_position(best.offset)
        try:
            for header in self.headers(position):
                if header.max_timestamp == best.timestamp:
                    epoch = header.partition_leader_epoch
                    for record in _records_or_crc_error(header, self.log.view(), header.position):
                        if record.timestamp == best.timestamp:
                            return TimestampAndOffset(record.timestamp, record.offset,
                                                      epoch if epoch >= 0 else None)
                    return None
        except TruncatedDataError:
            pass   # a last batch the log ends inside holds no record a reader is given
        # other damage is the answer's: a batch whose records do not decode is not "no record"
        return None

    # -- recovery ---------------------------------------------------------------
    def recover(self, on_batch: Callable[[codec.RecordBatch], None] | None = None) -> RecoverResult:
        """Validate every batch, cut the invalid tail (saved aside), rebuild the indexes.

        ``on_batch(batch)`` is called for every valid batch in order (leader epochs,
        transactions).  ``O(segment bytes)``; CRCs are checked in C.
        """
        self.offset_index.reset(self.max_index_size)
        self.time_index.reset(self.max_index_size)
        self.txn_index.reset()
        self.missing_indexes = []
        self.legacy_time_index = False        # rebuilt from the records, their timestamps counted
        self._max_ts = TimestampOffset(NO_TIMESTAMP, self.base)
        self._rolling_ts = None
        self._gone_back_kept = None
        self._intact_size = None
        buf = self.log.view()
        valid, error = codec.valid_prefix(buf, path=self.path)
        last_entry = 0
        full_at: int | None = None
        emptied = False
        last_batch: codec.RecordBatch | None = None
        for batch in codec.iter_batches(buf[:valid], path=self.path, check_crc=False):
            last_batch = batch
            if not self.indexable(batch.last_offset):
                # Kafka 3.8 throws here (LogSegmentOffsetOverflowException) and splits the segment, or
                # does not load the log; no index can hold the batch: it stays unindexed, verify names it
                if on_batch is not None:
                    on_batch(batch)
                continue
            if batch.max_timestamp > self._max_ts.timestamp:
                self._max_ts = TimestampOffset(batch.max_timestamp, batch.last_offset)
            if batch.position - last_entry > self.index_interval_bytes and full_at is None:
                if self.offset_index.is_full or self.time_index.is_full:
                    # Kafka 3.8's recover() appends here unchecked and throws on a full index: a log
                    # grown after a reopen (bytesSinceLastIndexEntry starts at 0) needs more entries
                    # than the writer made.  The indexes are sparse, so the rest of the segment goes
                    # unindexed (lookups walk it); an active one is rolled past (Partition._recover_from).
                    full_at = batch.position
                else:
                    gone_back = self._index_gone_back(batch, batch.last_offset, self._max_ts)
                    if gone_back is not None:
                        valid, error, emptied = self._truncate_to_base_at(), gone_back, True
                        break
                    self.offset_index.append_entry(batch.last_offset, batch.position)
                    self.time_index.maybe_append(self._max_ts.timestamp, self._max_ts.offset)
                    last_entry = batch.position
            try:
                if batch.is_control and batch.producer_id >= 0:
                    # ProducerAppendInfo.append: EndTransactionMarker.deserialize; a type other than COMMIT
                    # or ABORT throws IllegalArgumentException, which no recovery catches: kept, named
                    if batch.end_marker_type() not in _END_MARKERS:
                        continue
                if on_batch is not None:
                    on_batch(batch)
            except CorruptDataError as err:
                if not _stream_inflates(batch) or _null_in_marker(batch):
                    # what Kafka's recovery does not catch (a failing stream's KafkaException, a null
                    # key's or value's NullPointerException): nothing cut
                    continue
                # Kafka counted the batch's bytes as valid before updateProducerState threw: the
                # InvalidRecordException is caught and the segment cut after the batch
                valid, error = batch.position + batch.size, err
                break
        if not emptied and last_batch is not None:
            # the time index entry forced in below (outside Kafka's catch, inside LogLoader's)
            gone_back = self._index_gone_back(last_batch, None, self._max_ts)
            if gone_back is not None:
                valid, error, emptied = self._truncate_to_base_at(), gone_back, True
        del buf
        if emptied:
            # LogLoader.recoverLog catches the InvalidOffsetException and calls segment.truncateTo(its base
            # offset) (:meth:`_truncate_to_base_at`: the whole segment but where the rebuilt index's first
            # entry names the base offset), kept aside here; its indexes lose every entry (each names the
            # base offset or later) and get no max timestamp forced in (truncateTo appends none)
            self.offset_index.reset(self.max_index_size)
            self.time_index.reset(self.max_index_size)
            self.txn_index.reset()
        truncated = self.log.size - valid
        saved = None
        if truncated:
            # a preallocated segment (Kafka's ``preallocate``) ends in zeros: read and kept as holes
            saved, _ = files.save_range_aside(self.path, valid)
            self.log.truncate(valid)
        self.offset_index.trim()
        if emptied:
            self._max_ts = None         # of the bytes kept, read again where asked (max_timestamp_so_far)
        else:
            self.time_index.maybe_append(self._max_ts.timestamp, self._max_ts.offset, skip_full_check=True)
        self.time_index.trim()
        self.bytes_since_last_index_entry = 0
        self.index_full_at = full_at
        from .results import RecoverResult

        return RecoverResult(valid, truncated, saved, str(error) if error is not None else None, full_at)

    def _truncate_to_base_at(self) -> int:
        """Where Kafka 3.8.0 ``LogSegment.truncateTo(baseOffset)`` cuts a segment whose recovery threw
        ``InvalidOffsetException`` (what ``LogLoader.recoverLog`` calls then), with the offset index as
        ``recover`` left it: ``translateOffset(baseOffset)`` looks the base offset up in that index
        (``OffsetIndex.lookup``: the largest entry at or below it, else position 0) and cuts at the first
        batch from there whose last offset reaches it.  Every batch recovery walked reaches it (one below
        throws ``LogSegmentOffsetOverflowException`` first), so that is position 0, but where the rebuilt
        index's first entry names the base offset itself (a batch of last offset ``baseOffset`` after
        batches of higher offsets): there the cut is at that entry's batch, and the batches before it stay.
        ``O(log entries)``."""
        return self.offset_index.lookup_offset(self.base).position

    def _index_gone_back(self, batch: codec.RecordBatch, entry: int | None, max_ts: TimestampOffset
                         ) -> CorruptDataError | None:
        """Where the entry ``recover`` is about to add (an offset index entry for ``entry``, and the time
        index's for ``max_ts``, the max timestamp so far; ``entry`` None: only the latter, forced in at the
        end) would name an offset below the last one's (:meth:`_gone_back`), as the indexes stand."""
        return self._gone_back(batch, entry, max_ts,
                               self.offset_index.last_offset if len(self.offset_index) else None,
                               self.time_index.last_entry.offset if len(self.time_index) else None)

    def _gone_back(self, batch: codec.RecordBatch, entry: int | None, max_ts: TimestampOffset,
                   last_offset: int | None, last_time: int | None) -> CorruptDataError | None:
        """Where an offset index entry for ``entry`` (None: none added) after one of ``last_offset``, or a
        time index entry for ``max_ts`` after one naming ``last_time`` (None: an empty index), would name
        an offset below the last one's, as a log whose offsets go back makes it: Kafka 3.8.0
        ``OffsetIndex.append`` (offset not above the last) and ``TimeIndex.maybeAppend`` (offset below the
        last) throw ``InvalidOffsetException``, which ``LogLoader.recoverLog`` catches to truncate the
        segment to its base offset (:meth:`_truncate_to_base_at`).  None where the entries go forward."""
        if entry is not None and last_offset is not None and entry <= last_offset:
            index, last, found = self.offset_index.path, last_offset, entry
        elif last_time is not None and max_ts.offset < last_time:
            index, last, found = self.time_index.path, last_time, max_ts.offset
        else:
            return None
        return CorruptDataError(
            f"expected offsets going forward, found a batch of offsets {batch.base_offset}.."
            f"{batch.last_offset} that makes {os.path.basename(index)} go back from {last} to {found}: "
            "Kafka's index append throws InvalidOffsetException and LogLoader.recoverLog truncates the "
            "segment to its base offset (LogSegment.truncateTo)",
            self.path, batch.position)

    def index_gone_back(self) -> CorruptDataError | None:
        """The batch at which :meth:`recover` meets the indexes it rebuilds going back (Kafka 3.8.0
        ``LogSegment.recover`` throwing ``InvalidOffsetException``, on which ``LogLoader.recoverLog`` cuts
        the segment: :meth:`_truncate_to_base_at`), or None.

        Where the last offsets of the segment's batches rise, no entry can go back (the offset index's
        are some of them; the time index's, those of the batches holding its rising maxima): checked in C
        (:func:`.batch.valid_v2_end` with ``rising``) up to the first batch whose framing or CRC fails,
        where ``recover``'s walk ends, nothing more.  Elsewhere (offsets that do not rise, legacy
        batches) the entries ``recover`` adds at this segment's ``index.interval.bytes`` are followed over
        the batches it walks, Python per batch, each index filling up at ``segment.index.bytes`` as
        ``recover`` rebuilds it (no entry is added once one is full: :attr:`RecoverResult.index_full_at`;
        only the time index entry forced in at the end is checked then); records that stop the walk early
        (a marker ``recover`` cuts after) are not counted, so a segment named here may yet be cut before
        the batch named.  The answer is kept until the log's size changes.  ``O(bytes)``."""
        if self._intact_size == self.log.size:
            return None
        if self._gone_back_kept is not None and self._gone_back_kept[0] == self.log.size:
            return self._gone_back_kept[1]
        found = self._find_index_gone_back()
        self._gone_back_kept = (self.log.size, found)
        return found

    def _find_index_gone_back(self) -> CorruptDataError | None:
        """:meth:`index_gone_back`, not kept."""
        with self.log.view() as view:   # released at once: a writer's append may grow the file
            stop = codec.valid_v2_end(view, 0, rising=True)
            if stop >= len(view):
                self._intact_size = len(view)
                return None
            # a tail or v2 batch whose framing or CRC fails: recover's walk ends there
            if len(view) - stop <= codec.HEADER_UP_TO_MAGIC or (
                    view[stop + codec.MAGIC_OFFSET] == codec.MAGIC_V2
                    and codec.valid_v2_end(view, stop) == stop):
                return None
        last_entry = 0
        last_offset: int | None = None
        last_time: int | None = None
        last_stamp = NO_TIMESTAMP
        max_ts = TimestampOffset(NO_TIMESTAMP, self.base)
        # the rebuilt indexes' room (recover's reset to segment.index.bytes) and the entries they take
        offset_room = self.max_index_size // self.offset_index.entry_size
        time_room = self.max_index_size // self.time_index.entry_size
        offset_entries = time_entries = 0
        full = False
        batch: codec.RecordBatch | None = None
        try:
            for batch in self.batches():
                if not self.indexable(batch.last_offset):
                    continue
                if batch.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampOffset(batch.max_timestamp, batch.last_offset)
                if batch.position - last_entry > self.index_interval_bytes and not full:
                    if offset_entries >= offset_room or time_entries >= time_room - 1:
                        full = True             # OffsetIndex / TimeIndex.isFull: recover adds no more
                        continue
                    gone_back = self._gone_back(batch, batch.last_offset, max_ts, last_offset, last_time)
                    if gone_back is not None:
                        return gone_back
                    last_offset, last_entry = batch.last_offset, batch.position
                    offset_entries += 1
                    if max_ts.timestamp > last_stamp:
                        last_stamp, last_time = max_ts
                        time_entries += 1
        except CorruptDataError:
            pass                        # where recover's walk ends (a torn or corrupt batch)
        return None if batch is None else self._gone_back(batch, None, max_ts, last_offset, last_time)

    def first_torn_batch(self, start: int, from_offset: int) -> CorruptDataError | None:
        """The first batch from byte ``start`` (a batch boundary) that a crash may have torn, or None: one
        the log ends inside or whose framing fails (nothing after it can be walked), or one whose CRC
        fails and whose last offset is at or past ``from_offset``.

        Kafka 3.8.0 ``LogSegment.recover`` checks each batch as ``FileLogInputStream.nextBatch`` frames it
        and ``batch.ensureValid()`` validates it, v2 and legacy alike: a v0/v1 entry by its own size and
        CRC-32 (``AbstractLegacyRecordBatch.ensureValid``, the outer message only; a wrapper whose inner
        set does not read is kept), a v2 batch by its CRC-32C; ``LogLoader.recoverLog`` truncates the log
        at the first that fails.  A batch wholly below ``from_offset`` (the recovery point: flushed) whose
        CRC fails is damage, not a write a crash tore: not named (``verify`` names it, readers stop at it).
        ``O(bytes from start)``: the whole v2 batches whose CRC holds skipped in C
        (:func:`.batch.valid_v2_end`, which skips none :func:`.batch.iter_batches` refuses), what follows
        walked in Python (a legacy wrapper's inner set inflated where it is walked); from the log's start
        the walk checks the offsets rising too (:meth:`index_gone_back`'s), and a log found intact is not
        walked again while its size stays."""
        if start > self.log.size:
            return TruncatedDataError(f"expected the batch at {start}, found the log ending at "
                                      f"{self.log.size}", self.path, start)
        with self.log.view() as view:   # released at once: a writer's append may grow the file
            if self._intact_size == len(view):
                return None
            # from the log's start, the offsets checked on the way (index_gone_back's walk, done once)
            end = codec.valid_v2_end(view, start, rising=start == 0)
            if start == 0 and end >= len(view):
                self._intact_size = len(view)
                return None
            start = codec.valid_v2_end(view, end) if start == 0 else end
        try:
            for batch in self.batches(start, check_crc=False):
                if batch.last_offset >= from_offset and not batch.is_valid():
                    next(self.batches(batch.position, check_crc=True))  # raises the CRC's error
        except CorruptDataError as err:
            return err
        return None

    def check_tail(self) -> CorruptDataError | None:
        """Walk the headers from the last index entry: None if they end exactly at the end of the log."""
        start = self.last_indexed_position()
        if start > self.log.size:
            return TruncatedDataError(f"expected the batch the offset index's last entry points at, found "
                                      f"the log ending at {self.log.size}", self.path, start)
        try:
            for _ in self.headers(start):
                pass
        except CorruptDataError as err:
            return err
        return None

    # -- lifecycle ----------------------------------------------------------------
    def flush(self) -> None:
        if self.writable:
            self.log.flush()
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def close(self) -> None:
        """Close; a writable segment first forces its max timestamp in and trims (clean shutdown)."""
        # Only an index with a free slot takes it (LogSegment.close: maybeAppend with skipFullCheck, so
        # the slot TimeIndex.isFull keeps for it counts): a trimmed one got its max at roll, and one made
        # empty for a segment Kafka < 0.10.1 wrote stays empty (Kafka appends only to loaded segments).
        if (self.writable and self.log.size and not self.needs_recovery
                and len(self.time_index) < self.time_index.capacity):
            ts = self.max_timestamp_so_far()
            if self.indexable(ts.offset):       # (not of a batch no index can name: verify names it)
                self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        if self.writable:
            self.offset_index.trim()
            self.time_index.trim()
            self.flush()
        self.abandon()

    def abandon(self) -> None:
        """Release the files without trimming or flushing (as a killed process would)."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.close()

    def delete(self) -> None:
        """Close and remove every file of the segment (retention)."""
        self.abandon()
        for suffix in SUFFIXES:
            if files.exists(self._path(suffix)):
                files.remove(self._path(suffix))

    def __repr__(self) -> str:
        return f"LogSegment({self.path!r}, base={self.base}, size={self.size})"
