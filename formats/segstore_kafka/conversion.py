"""Kafka's side of a format conversion (``KafkaFormat.conversion()``).

A Kafka record *is* a conversion :class:`Entry` (the common record with its batch's
producer identity and control flag), so nothing is mapped: a source partition is
read as entries in offset order, and entries are written back as record batches at
their own offsets.  A peer carries its own fields in the headers; Kafka keeps them
as they are.

What a written batch holds: entries of one kind (timestamp type, transaction,
producer; one time with LogAppendTime so each record reads back its own time; a
control record alone), at most ``options.batch_records`` records and
:data:`BATCH_BYTES` source bytes, within ``segment.bytes``.  Memory stays bounded:
at most :data:`BUFFER_BYTES` source bytes are buffered over all partitions.

Not thread-safe: one conversion per destination.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segstore import arrays
from segstore.convert.interchange import (
    ENTRY_SCHEMA,
    ArrowWriter,
    Entry,
    Extent,
    FormatConversion,
    LogSpan,
    Options,
    Peer,
    Sized,
    Verifier,
    Writer,
)
from segstore.convert.topicnames import WORD_CHARS, TopicRules
from segstore.errors import (
    ConfigError,
    ConversionError,
    ConversionOptionError,
    CorruptDataError,
    InvalidMessageError,
    InvalidTopicError,
    NotFoundError,
    SegstoreError,
)
from segstore.overlap import shared
from segstore.records import CREATE_TIME, LOG_APPEND_TIME
from segstore.search import Bound, search
from segstore.store import Store

from . import batch as codec
from .arrowencode import Columns, encode_batch_columns
from .brokerconfig import SERVER_PROPERTIES, resolve, static_layer
from .dirnames import METADATA_TOPIC
from .partition import MAX_TOPIC_LENGTH, KafkaConfig
from .topicconfig import COMPACTED_INTERNAL_TOPICS

#: Kafka topic names (``Topic.validate``): ``[a-zA-Z0-9._-]``, at most 249 characters, not ``.``
#: or ``..``; a peer's characters Kafka lacks are escaped as ``.XX``.  Internal: the broker's own
#: topics (3.8.0 ``Topic.INTERNAL_TOPICS``, whose records ``GroupMetadataManager`` /
#: ``TransactionStateManager`` load as theirs, a record without a key failing the partition's
#: load; ``Topic.CLUSTER_METADATA_TOPIC_NAME``, KRaft's metadata log, which ``LogManager.loadLogs``
#: skips and the Raft client reads as the cluster's metadata).
TOPICS = TopicRules("Kafka", WORD_CHARS + "._-", "[a-zA-Z0-9._-]", MAX_TOPIC_LENGTH, ".",
                    frozenset({".", ".."}), COMPACTED_INTERNAL_TOPICS | {METADATA_TOPIC})

#: Source bytes per batch (well under the broker's default max.message.bytes, 1,048,588, and
#: never more than segment.bytes), and bytes buffered over all partitions before every buffer
#: is written.
BATCH_BYTES = 512 << 10
BUFFER_BYTES = 64 << 20
#: Added batches the partitions' pending rows may hold on to (a pending row keeps its whole batch
#: alive) before every partition's rows are written: with many partitions each waiting for more rows,
#: 1M messages over 1,024 of them peaked at 404 MB of anonymous memory without this bound.
PINNED_BATCHES = 3
#: Kafka leader epoch written into converted batches (a batch field the conversion does not carry).
LEADER_EPOCH = 0


def entry_of(record: Any) -> Entry:
    """A record read from a Kafka store (``KafkaStore.read``/``scan``) as an :class:`Entry`."""
    batch = record.batch
    return Entry(topic=record.topic, partition=record.partition, offset=record.offset,
                 timestamp=record.timestamp, key=record.key, value=record.value, headers=record.headers,
                 timestamp_type=batch.timestamp_type, transactional=batch.is_transactional,
                 control=batch.is_control, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch)


# -- the source side -------------------------------------------------------------------------

def partition_entries(source: Any, topic: str, partition: int, options: Options, *,
                      lazy: bool = False) -> Iterator[Sized]:
    """``(record with its batch flags, its encoded size)`` of one partition in offset order; with
    ``skip_corrupt`` a corrupt batch is reported and reading goes on after it (or, when its
    length cannot be trusted, at the next segment).  ``lazy`` decodes each record as it is taken
    (``RecordBatch.iter_records``) for a reader of the first few: a batch's records are otherwise
    built all at once (in C, ~0.3 µs a record, where a whole batch may hold thousands)."""
    part = source.partition_of(topic, partition)
    start = part.log_start_offset
    expected: int | None = None     # what verify and reads check: no CRC covers the base offset
    for seg in part.segments:
        pos: int | None = 0
        while pos is not None:
            try:
                for batch in seg.batches(pos):
                    expected = _in_order(batch, expected)
                    control = batch.is_control
                    transactional = batch.is_transactional
                    # Legacy v0 sets have no timestamp type: their records (timestamp -1) come back as v2
                    # CreateTime records, the type Kafka itself gives them when it up-converts.
                    ts_type = LOG_APPEND_TIME if batch.timestamp_type == LOG_APPEND_TIME else CREATE_TIME
                    pid, epoch = batch.producer_id, batch.producer_epoch
                    for rec in batch.iter_records() if lazy else batch.records():
                        if rec.offset < start:
                            continue
                        yield Entry(topic=topic, partition=partition, offset=rec.offset,
                                    timestamp=rec.timestamp, key=rec.key, value=rec.value,
                                    headers=list(rec.headers), timestamp_type=ts_type,
                                    transactional=transactional, control=control, producer_id=pid,
                                    producer_epoch=epoch), rec.size_in_bytes
                    pos = batch.position + batch.size
            except CorruptDataError as err:
                if not options.skip_corrupt:
                    raise
                options.skipped.append(str(err))
                pos = _after_batch(seg, pos)
            else:
                pos = None


#: The ``scan_arrow`` columns an entry batch is made of (all of ``ENTRY_SCHEMA`` but ``size``, which is
#: the source batch's ``size`` on its first row).
_ENTRY_COLUMNS = [name for name in ENTRY_SCHEMA.names if name != "size"]


def partition_batches(source: Any, topic: str, partition: int, batch_rows: int | None = None,
                      threads: int | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`partition_entries` as ``ENTRY_SCHEMA`` batches, from the partition's columns
    (``scan_arrow``; ``batch_rows`` and ``threads`` as there).  A row's ``size`` is its batch's bytes on the
    batch's first row and 0 on the others (so the sizes add up to the log bytes read); a legacy
    record's timestamp type is CreateTime, as in :func:`partition_entries`."""
    log_append = arrays.number(_LOG_APPEND_TIME_ID, pa.int32())
    for batch in source.scan_arrow([*_ENTRY_COLUMNS, "baseOffset", "size"], topic=topic, partition=partition,
                                   batch_rows=batch_rows, threads=threads):
        n = batch.num_rows
        if not n:
            continue
        bases = arrays.natural(batch.column("baseOffset"))
        first = np.ones(n, bool)
        first[1:] = bases[1:] != bases[:-1]
        size = np.where(first, arrays.int64s(batch.column("size")), 0)     # int64 already
        kind = pc.equal(batch.column("timestampType"), log_append).cast(pa.int32())
        columns = [kind if name == "timestampType" else batch.column(name) for name in _ENTRY_COLUMNS]
        yield pa.RecordBatch.from_arrays([*columns, arrays.from_numpy(size)], schema=ENTRY_SCHEMA)


def _selected(source: Any, options: Options) -> list[tuple[str, int]]:
    """The ``(topic, partition)`` pairs ``options.topics`` selects of the Kafka store ``source``, in
    the store's order."""
    return [(topic, partition) for topic in source.topics()
            if options.topics is None or topic in options.topics
            for partition in source.partitions(topic)]


def _in_order(batch: codec.RecordBatch, expected: int | None) -> int:
    """The offset the batch after ``batch`` must reach; raises what verify and reads report when
    ``batch`` goes back below ``expected`` (no CRC covers the base offset).

    :raises CorruptDataError: naming the batch's file and position.
    """
    if expected is not None and batch.base_offset < expected:
        raise CorruptDataError(f"expected offsets from {expected}, found a batch at {batch.base_offset}",
                               batch.path, batch.position)
    return batch.last_offset + 1


def _after_batch(seg: Any, pos: int) -> int | None:
    """The position after the (damaged) batch at ``pos`` if its length field stays inside the
    segment, else None (the rest of the segment is skipped)."""
    try:
        header = codec.read_batch_header(seg.view(), pos, path=seg.path)
    except CorruptDataError:
        return None
    end = pos + header.size
    return end if pos < end < seg.size else None


# -- the target side ----------------------------------------------------------------------------

class _PartitionTarget:
    """What both Kafka writers keep: the batch limits, and per partition the end offset it held
    when the run started (``present``: a resumed run skips what is there) and the next offset
    expected (``next``)."""

    def __init__(self, dest: Any, options: Options) -> None:
        self.dest = dest
        self.peer = options.peer
        self.compression = options.compression
        # the destination's compression.<codec>.level (3.8.0 KIP-390: LogConfig.getCompression, the
        # level the broker compresses its topic's codec at); the codec's default level unless given
        self.level = dest.config.level_of(self.compression)
        self.batch_records = options.batch_records
        # a batch over either is refused (3.8.0 UnifiedLog.analyzeAndValidateRecords: max.message.bytes,
        # RecordTooLargeException; UnifiedLog.append: segment.bytes, RecordBatchTooLargeException)
        self.batch_limit = min(dest.config.segment_bytes, dest.config.max_message_bytes)
        self.batch_bytes = min(BATCH_BYTES, self.batch_limit)
        self.buffered = 0
        self.present: dict[tuple[str, int], int] = {}
        self.next: dict[tuple[str, int], int] = {}
        self.parts: dict[tuple[str, int], Any] = {}
        self.topics: set[str] = set()

    def _partition(self, key: tuple[str, int]) -> Any:
        """The destination partition (created on first use; looked up once per run: a lookup
        checks the topic name, and it is asked for at every batch written)."""
        part = self.parts.get(key)
        if part is None:
            if key[0] not in self.topics:   # (a topic no extent names, rmq.nonqueued, is checked here)
                _check_new_partition(self.dest, key, self.peer)
                self.topics.add(key[0])
            part = self.parts[key] = self.dest.partition_of(key[0], key[1], create=True)
        return part

    def _start(self, key: tuple[str, int]) -> None:
        """Note the partition's end offset the first time ``key`` is written."""
        if key not in self.next:
            end = self._partition(key).next_offset
            self.present[key] = end
            self.next[key] = end


def _check_new_partition(dest: Any, key: tuple[str, int], peer: Peer) -> None:
    """:raises InvalidTopicError: a partition to create that Kafka refuses (``KafkaStore.check_destinations``:
        a topic whose name collides with another's once ``.`` and ``_`` are made the same, which 3.8.0
        ``ReplicationControlManager`` refuses to create, "Topic 'a_b' collides with existing topic: a.b"),
        naming it; nothing for one ``dest`` holds already (a resumed run)."""
    try:
        dest.check_destinations([key])
    except InvalidTopicError as err:
        raise InvalidTopicError(f"expected {key[0]}-{key[1]} (converted from {peer.name}) as a partition of "
                                f"the Kafka log directory, found it refused: {err.message} (leave one of "
                                f"the topics out: --topic names the topics to convert)") from err


class KafkaWriter(_PartitionTarget, Writer):
    """Buffers entries per partition and appends them as record batches at their own offsets.

    Entries at offsets the partition already holds (``resume``) are skipped; an offset
    below one already written is a :class:`ConversionError`.
    """

    def __init__(self, dest: Any, options: Options) -> None:
        super().__init__(dest, options)
        self.buffers: dict[tuple[str, int], list[Entry]] = {}
        self.buffer_sizes: dict[tuple[str, int], int] = {}

    def add(self, entry: Entry, size: int) -> bool:
        key = (entry.topic, entry.partition)
        self._start(key)
        if entry.offset < self.present[key]:
            return False
        if entry.offset < self.next[key]:
            raise ConversionError(f"expected the source's offsets of {key[0]}-{key[1]} to increase, found "
                                  f"offset {entry.offset} after {self.next[key] - 1}",
                                  self._partition(key).path)
        buffer = self.buffers.setdefault(key, [])
        if buffer and (not _same_batch(buffer[-1], entry)
                       or self.buffer_sizes[key] + size > self.batch_bytes):
            self.flush(key)
            buffer = self.buffers.setdefault(key, [])
        buffer.append(entry)
        self.buffer_sizes[key] = self.buffer_sizes.get(key, 0) + size
        self.buffered += size
        self.next[key] = entry.offset + 1
        if entry.control or len(buffer) >= self.batch_records or self.buffer_sizes[key] >= self.batch_bytes:
            self.flush(key)
        elif self.buffered >= BUFFER_BYTES:
            self.flush_all()
        return True

    def flush(self, key: tuple[str, int]) -> None:
        entries = self.buffers.pop(key, None)
        self.buffered -= self.buffer_sizes.pop(key, 0)
        if not entries:
            return
        self._write(self._partition(key), entries)

    def _write(self, part: Any, entries: list[Entry]) -> None:
        """Append ``entries`` as one batch, or as halves while the batch would pass ``segment.bytes`` or
        ``max.message.bytes`` (the buffer limit counts source bytes; the encoded records can be larger)."""
        base = part.next_offset
        deltas = [e.offset - base for e in entries]
        first = entries[0]
        log_append = first.timestamp_type == LOG_APPEND_TIME
        data = codec.encode_batch(
            [(e.key, e.value, e.timestamp, e.headers) for e in entries], base_offset=base,
            compression="none" if first.control else self.compression, partition_leader_epoch=LEADER_EPOCH,
            producer_id=first.producer_id, producer_epoch=first.producer_epoch,
            is_transactional=first.transactional, is_control=first.control,
            timestamp_type=first.timestamp_type, log_append_time=first.timestamp if log_append else None,
            offset_deltas=None if deltas[-1] == len(deltas) - 1 else deltas,
            compression_level=None if first.control else self.level, stored_keys=True)
        if len(data) > self.batch_limit and len(entries) > 1:
            half = len(entries) // 2
            self._write(part, entries[:half])
            self._write(part, entries[half:])
            return
        part.append_encoded(data, now_ms=max(e.timestamp for e in entries), check_times=False)

    def flush_all(self) -> None:
        for key in list(self.buffers):
            self.flush(key)


def _same_batch(a: Entry, b: Entry) -> bool:
    if (a.timestamp_type, a.transactional, a.control, a.producer_id, a.producer_epoch) != \
            (b.timestamp_type, b.transactional, b.control, b.producer_id, b.producer_epoch):
        return False
    return a.timestamp_type != LOG_APPEND_TIME or a.timestamp == b.timestamp


#: A row's batch kind: the columns whose change starts a new batch (:func:`_same_batch`).
_KIND_COLUMNS = ("timestampType", "isTransactional", "isControl", "producerId", "producerEpoch")
_LOG_APPEND_TIME_ID = 1
FIRST_AT_LEAST = Bound.SMALLEST_UPPER


class _Pending:
    """A partition's rows not written yet: ``(columns, row indices)`` pieces of one batch kind, their
    offsets, count and source bytes."""

    __slots__ = ("bytes", "count", "kind", "offsets", "pieces")

    def __init__(self) -> None:
        self.pieces: list[tuple[Columns, np.ndarray]] = []
        self.offsets: list[np.ndarray] = []
        self.count = 0
        self.bytes = 0
        self.kind: tuple[Any, ...] = ()


class _Batch:
    """An added ``ENTRY_SCHEMA`` batch as numpy columns (and its encoder's view of the records), its
    rows sorted by partition (``order``, stable; partition ``g`` is ``order[edges[g]:edges[g + 1]]``).

    What every partition's cut needs is computed here once for the whole batch, so that a partition
    takes slices of it (a batch of many partitions holds few rows of each).  ``O(rows)``.
    """

    def __init__(self, batch: pa.RecordBatch, order: np.ndarray, edges: np.ndarray,
                 keys: list[tuple[str, int]]) -> None:
        def column(name: str) -> np.ndarray:
            return arrays.natural(batch.column(name))

        self.edges = edges
        self.keys = keys        # each partition's (topic, partition), in the sorted order

        times = arrays.int64s(batch.column("timestamp"))
        self.columns = Columns(batch.column("key"), batch.column("value"), times, batch.column("headers"))
        self.order = order
        # sorted by partition from here on
        self.offsets = column("offset").astype(np.int64, copy=False)[order]
        self.kinds = [column(name)[order] for name in _KIND_COLUMNS]
        self.times = times[order]
        self.log_append = self.kinds[0] == _LOG_APPEND_TIME_ID
        # the rows whose batch kind differs from the row before in their partition
        change = np.zeros(len(order), bool)
        for kind in self.kinds:
            change[1:] |= kind[1:] != kind[:-1]
        change[1:] |= self.log_append[1:] & (self.times[1:] != self.times[:-1])
        change[edges[:-1]] = False
        self.starts = np.flatnonzero(change)
        # source bytes up to and including each row, over the whole batch
        self.cumulative = np.cumsum(column("size").astype(np.int64, copy=False)[order])
        # the rows whose offset does not increase from the row before in their partition
        steps = np.ones(len(order), bool)
        steps[1:] = self.offsets[1:] > self.offsets[:-1]
        steps[edges[:-1]] = True
        self.unordered = np.flatnonzero(~steps)

    @classmethod
    def grouped(cls, batch: pa.RecordBatch) -> _Batch:
        """``batch`` (at least one row) sorted by (topic, partition), stably."""
        n = batch.num_rows
        topics = pc.dictionary_encode(batch.column("topic"))
        codes = arrays.int64s(topics.indices)
        partitions = arrays.int64s(batch.column("partition"))
        span = int(partitions.max()) + 1 if n else 1
        if (n and not topics.null_count and int(partitions.min()) >= 0
                and len(topics.dictionary) * span <= 1 << 16):
            # the same order from a 16-bit key (numpy's stable sort is a radix sort there, a timsort
            # for int64: 0.46 against 2.25 ms a 64k-row batch of 16 partitions)
            group = (codes * span + partitions).astype(np.uint16)
        else:
            group = (codes << 32) | partitions
        order = np.argsort(group, kind="stable")
        edges = np.concatenate(([0], np.flatnonzero(np.diff(group[order])) + 1, [n]))
        names = topics.dictionary.to_pylist()
        firsts = order[edges[:-1]]
        keys = [(names[code], partition)
                for code, partition in zip(codes[firsts].tolist(), partitions[firsts].tolist(), strict=True)]
        return cls(batch, order, edges, keys)

    def bytes_before(self, i: int) -> int:
        """The source bytes of the sorted rows before ``i``."""
        return int(self.cumulative[i - 1]) if i else 0


class KafkaArrowWriter(_PartitionTarget, ArrowWriter):
    """:class:`KafkaWriter` for ``ENTRY_SCHEMA`` batches: rows grouped per partition with numpy, cut
    into record batches by the same rules (one kind per batch, ``options.batch_records`` records,
    :data:`BATCH_BYTES` source bytes, a control record alone) and encoded from the columns in C,
    row indices and all (no per-partition copy).

    The one difference: the :data:`BUFFER_BYTES` bound on everything buffered is checked after each
    added batch instead of after each record, and everything is written too once the pending rows
    hold on to more than :data:`PINNED_BATCHES` added batches (with many partitions, batch
    boundaries can then differ; the records do not).

    The batches an added batch completes are queued, then encoded together by this thread and a
    pool thread (:func:`segstore.overlap.shared`; the C encoder and the codecs release the GIL), and
    appended in order: a batch's base offset is known before it is encoded (the one after the last
    offset queued for its partition), so only the appends need the partition.
    """

    def __init__(self, dest: Any, options: Options) -> None:
        super().__init__(dest, options)
        self.pending: dict[tuple[str, int], _Pending] = {}
        self.queued: list[tuple[tuple[str, int], list[tuple[Columns, np.ndarray]], np.ndarray,
                                tuple[Any, ...]]] = []

    def prepare(self, pieces: list[pa.RecordBatch], order: np.ndarray | None) -> _Batch | None:
        """A batch as it comes (``order`` None) grouped by partition (:class:`_Batch`, its columns
        laid out for the encoder), for :meth:`add_batch`; None for a merge's rows (this writer takes
        them as a copy: ``add_taken``).  Reads only the batch: safe beside a write."""
        if order is not None or len(pieces) != 1 or not pieces[0].num_rows:
            return None
        data = _Batch.grouped(pieces[0])
        with contextlib.suppress(InvalidMessageError):     # raised where the rows are encoded
            data.columns.lay_out()
        return data

    def add_batch(self, batch: pa.RecordBatch, prepared: _Batch | None = None) -> tuple[int, int, int]:
        if batch.num_rows == 0:
            return 0, 0, 0
        data = prepared if prepared is not None else _Batch.grouped(batch)
        written = nbytes = present = 0
        for key, (lo, hi) in zip(data.keys, itertools.pairwise(data.edges.tolist()), strict=True):
            taken, size, held = self._add_partition(key, data, lo, hi)
            written += taken
            nbytes += size
            present += held
        if self.buffered >= BUFFER_BYTES or self._pinned() > PINNED_BATCHES:
            self.flush_all()
        self._write_queued()
        return written, nbytes, present

    def _pinned(self) -> int:
        """How many added batches the pending rows hold on to."""
        return len({id(columns) for pending in self.pending.values() for columns, _ in pending.pieces})

    def _add_partition(self, key: tuple[str, int], data: _Batch, lo: int, hi: int
                       ) -> tuple[int, int, int]:
        """Add the sorted rows ``lo:hi`` of ``data`` (one partition's, in source order): held rows
        skipped, the rest cut into record batches.  ``O(log rows)`` a batch cut, plus slices."""
        self._start(key)
        offsets = data.offsets
        # offsets increase: checked below for the rows not held
        start = search(offsets, self.present[key], FIRST_AT_LEAST, lo, hi)
        held = start - lo
        if start == hi:
            return 0, 0, held
        bad = search(data.unordered, start + 1, FIRST_AT_LEAST)
        if int(offsets[start]) < self.next[key]:
            self._unordered(key, int(offsets[start]), self.next[key] - 1)
        if bad < len(data.unordered) and data.unordered[bad] < hi:
            row = int(data.unordered[bad])
            self._unordered(key, int(offsets[row]), int(offsets[row - 1]))
        self.next[key] = int(offsets[hi - 1]) + 1
        kinds, times, log_append, control = data.kinds, data.times, data.log_append, data.kinds[2]
        cumulative = data.cumulative
        i = start
        while i < hi:
            kind = (*(column[i].item() for column in kinds), times[i].item() if log_append[i] else None)
            before = data.bytes_before(i)
            pending = self.pending.setdefault(key, _Pending())
            size = int(cumulative[i]) - before
            if pending.count and (kind != pending.kind or pending.bytes + size > self.batch_bytes):
                self.flush(key)
                pending = self.pending.setdefault(key, _Pending())
            # rows i.. join the batch until a flush-before (kind change, bytes past the limit) or a
            # flush-after (a control record, the record count, the byte limit reached)
            end = min(hi, i + self.batch_records - pending.count)
            later = search(data.starts, i + 1, FIRST_AT_LEAST)
            if later < len(data.starts):
                end = min(end, int(data.starts[later]))
            if control[i]:
                end = i + 1
            room = self.batch_bytes - pending.bytes + before
            past = search(cumulative, room + 1, FIRST_AT_LEAST, start, hi)   # the first row past room
            reach = search(cumulative, room, FIRST_AT_LEAST, start, hi)      # the first row reaching it
            end = min(end, max(past, i + 1), reach + 1)
            nbytes = int(cumulative[end - 1]) - before
            pending.pieces.append((data.columns, data.order[i:end]))
            pending.offsets.append(offsets[i:end])
            pending.kind = kind
            pending.count += end - i
            pending.bytes += nbytes
            self.buffered += nbytes
            if control[end - 1] or pending.count >= self.batch_records or pending.bytes >= self.batch_bytes:
                self.flush(key)
            i = end
        return hi - start, int(cumulative[hi - 1]) - data.bytes_before(start), held

    def _unordered(self, key: tuple[str, int], offset: int, after: int) -> NoReturn:
        raise ConversionError(f"expected the source's offsets of {key[0]}-{key[1]} to increase, found "
                              f"offset {offset} after {after}", self._partition(key).path)

    def flush(self, key: tuple[str, int]) -> None:
        """Queue the partition's pending rows as one batch (:meth:`_write_queued` writes it)."""
        pending = self.pending.pop(key, None)
        if pending is None or not pending.count:
            return
        self.buffered -= pending.bytes
        self.queued.append((key, pending.pieces, np.concatenate(pending.offsets), pending.kind))

    def _write_queued(self) -> None:
        """Encode the queued batches (two threads) and append them in order.  An encoding error is
        raised after the batches before it are appended, as one thread would."""
        queued, self.queued = self.queued, []
        if not queued:
            return
        planned: list[tuple[Any, list[tuple[Columns, np.ndarray]], np.ndarray, tuple[Any, ...], int]] = []
        bases: dict[tuple[str, int], int] = {}
        for key, pieces, offsets, kind in queued:
            part = self._partition(key)
            base = bases.get(key, part.next_offset)
            bases[key] = int(offsets[-1]) + 1
            planned.append((part, pieces, offsets, kind, base))
            for columns, _ in pieces:
                columns.lay_out()       # here, not once per thread

        def encode(job: tuple) -> tuple[bytes | None, SegstoreError | None]:
            _, pieces, offsets, kind, base = job
            try:
                return self._encode(pieces, offsets, kind, base), None
            except SegstoreError as err:
                return None, err

        encoded = shared(encode, planned)
        # appended a partition at a time (each partition's batches in order; the partitions' files are
        # apart, so the bytes are those of one batch after another), a run of them in one write
        runs: dict[int, tuple[Any, list[tuple[Any, ...]]]] = {}
        failed = None
        for (part, pieces, offsets, kind, _), (data, error) in zip(planned, encoded, strict=True):
            if error is not None:
                failed = error
                break
            runs.setdefault(id(part), (part, []))[1].append((pieces, offsets, kind, data))
        for part, batches in runs.values():
            self._append(part, batches)
        if failed is not None:
            raise failed

    def _encode(self, pieces: list[tuple[Columns, np.ndarray]], offsets: np.ndarray, kind: tuple[Any, ...],
                base: int) -> bytes:
        """The rows as one batch at base offset ``base``.  Thread-safe (columns laid out already)."""
        ts_type, transactional, control, producer_id, producer_epoch, log_append_time = kind
        log_append = ts_type == _LOG_APPEND_TIME_ID
        return encode_batch_columns(
            pieces, offsets, base_offset=base,
            compression="none" if control else self.compression, partition_leader_epoch=LEADER_EPOCH,
            producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=bool(transactional),
            is_control=bool(control), timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
            log_append_time=log_append_time, compression_level=None if control else self.level)

    def _append(self, part: Any, batches: list[tuple[Any, ...]]) -> None:
        """Append a partition's encoded batches (``(pieces, offsets, kind, data)`` each), in order: runs
        of them through :meth:`Partition.append_encoded_run`, one whose batch would pass
        ``segment.bytes`` or ``max.message.bytes`` as halves (:meth:`_append_halves`)."""
        datas: list[bytes] = []
        rows: list[list[tuple[Columns, np.ndarray]]] = []
        for pieces, offsets, kind, data in batches:
            if len(data) > self.batch_limit and len(offsets) > 1:
                if datas:
                    part.append_encoded_run(datas, lambda i, rows=rows: _now(rows[i]))
                    datas, rows = [], []
                self._append_halves(part, pieces, offsets, kind, data)
                continue
            datas.append(data)
            rows.append(pieces)
        if datas:
            part.append_encoded_run(datas, lambda i: _now(rows[i]))

    def _append_halves(self, part: Any, pieces: list[tuple[Columns, np.ndarray]], offsets: np.ndarray,
                       kind: tuple[Any, ...], data: bytes) -> None:
        """Append the rows' batch ``data``, or the rows as halves while their batch would pass
        ``segment.bytes`` or ``max.message.bytes``."""
        if len(data) > self.batch_limit and len(offsets) > 1:
            half = len(offsets) // 2
            for rows, at in zip(_split(pieces, half), (offsets[:half], offsets[half:]), strict=True):
                self._append_halves(part, rows, at, kind, self._encode(rows, at, kind, part.next_offset))
            return
        part.append_encoded(data, now_ms=_now(pieces), check_times=False)

    def flush_all(self) -> None:
        for key in list(self.pending):
            self.flush(key)
        self._write_queued()


#: The smallest record batch: its 61-byte header and one record with no key, value or header, in 7
#: bytes (Kafka 3.8.0 ``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``, ``DefaultRecord.sizeInBytes``).
MIN_BATCH_BYTES = codec.RECORD_BATCH_OVERHEAD + 7


def _check_batch_room(part: Any, name: str) -> None:
    """Refuse partition ``name`` (records to write into) when its ``segment.bytes`` or
    ``max.message.bytes`` is below the smallest batch: 3.8.0 ``UnifiedLog.append`` refuses every
    batch of it (a ``RecordBatchTooLargeException``, a ``RecordTooLargeException``), and Kafka's
    config takes ``segment.bytes`` from 14 (``LogConfig``: ``LegacyRecord.RECORD_OVERHEAD_V0``).

    :raises ConfigError: naming the setting, the smallest batch and the partition (not its path: the
        run removes the directory it is in).
    """
    for setting, value in (("segment.bytes", part.config.segment_bytes),
                           ("max.message.bytes", part.config.max_message_bytes)):
        if value < MIN_BATCH_BYTES:
            raise ConfigError(f"expected {setting} of at least {MIN_BATCH_BYTES} (the smallest record batch) "
                              f"for partition {name} to convert records into, found {value}")


def _now(pieces: list[tuple[Columns, np.ndarray]]) -> int:
    """The time a batch of the rows ``pieces`` is appended at: their largest timestamp (a conversion
    replays records a broker took; ``segment.ms`` counts from it where the segment has no time)."""
    return max(int(columns.timestamps[rows].max()) for columns, rows in pieces if len(rows))


def _split(pieces: list[tuple[Columns, np.ndarray]], at: int
           ) -> tuple[list[tuple[Columns, np.ndarray]], list[tuple[Columns, np.ndarray]]]:
    """The first ``at`` rows of ``pieces`` and the rest."""
    first, second = [], []
    for columns, rows in pieces:
        if at >= len(rows):
            first.append((columns, rows))
        elif at <= 0:
            second.append((columns, rows))
        else:
            first.append((columns, rows[:at]))
            second.append((columns, rows[at:]))
        at -= len(rows)
    return first, second


class KafkaVerifier(Verifier):
    """Each entry against the next record of its partition in the destination."""

    def __init__(self, dest: Any, options: Options) -> None:
        self.dest = dest
        self.readers: dict[tuple[str, int], Iterator[Any]] = {}

    def check(self, entry: Entry) -> str | None:
        key = (entry.topic, entry.partition)
        if key not in self.readers:
            self.readers[key] = self.dest.read(*key)
        record = next(self.readers[key], None)
        found = None if record is None else entry_of(record)
        if found != entry:
            return f"{key[0]}-{key[1]} offset {entry.offset}: expected {entry}, found {found}"
        return None

    def rest(self) -> list[str]:
        problems = []
        for key, reader in self.readers.items():
            extra = next(reader, None)
            if extra is not None:
                problems.append(f"{key[0]}-{key[1]}: expected no record after the source's, found offset "
                                f"{extra.offset}")
        return problems


class KafkaConversion(FormatConversion):
    """Kafka's side of a conversion (see the module docstring)."""

    topics = TOPICS
    compressions = ("none", "gzip", "snappy", "lz4", "zstd")
    resumes_by_offset = True        # KafkaWriter / KafkaArrowWriter: ``present``, a partition's end offset

    def check_config(self, config: dict[str, Any], compression: str, timestamp: str) -> None:
        """A topic's ``compression.type`` (but ``producer``) and ``message.timestamp.type`` decide what
        its batches hold (apache/kafka 3.8.0 ``LogValidator.validateMessagesAndAssignOffsets``: batches
        recompressed to ``targetCompression``, their times set to the append time for
        ``LOG_APPEND_TIME``), so one given with ``--config`` must agree with ``--compression`` /
        ``--timestamp``, which write the batches (taken and ignored before).  A value Kafka does not
        know is the destination's ``ConfigError``, raised here for the names and values given alone.

        :raises ConfigError: a name or value Kafka's topic config does not take.
        :raises ConversionOptionError: a config the options contradict.
        """
        KafkaConfig.from_mapping(dict(config))
        # a server.properties (--config-file) gives every topic's default: its log.message.timestamp.type
        # and compression.type decide the batches as much as the topic names do
        static = resolve([static_layer(config)])
        names = {**{name: value.strip() for name, value in static.items()},
                 **{str(name).replace("_", "."): str(value).strip() for name, value in config.items()
                    if name != SERVER_PROPERTIES}}
        given = names.get("compression.type")
        codec = "none" if given == "uncompressed" else given
        if codec in self.compressions and codec != compression:
            raise ConversionOptionError(f"expected --compression {codec} for a Kafka destination of "
                                        f"compression.type={given} (or compression.type=producer), "
                                        f"found --compression {compression}")
        given = names.get("message.timestamp.type")
        wanted = {"CreateTime": "born", "LogAppendTime": "store"}.get(given or "")
        if wanted is not None and wanted != timestamp:
            raise ConversionOptionError(f"expected --timestamp {wanted} for a Kafka destination of "
                                        f"message.timestamp.type={given}, found --timestamp {timestamp}")

    def streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """One stream per selected partition, in offset order."""
        return [partition_entries(source, topic, partition, options)
                for topic, partition in _selected(source, options)]

    def first_streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """:meth:`streams` decoding each record as it is taken: a resume's check reads one record a
        partition, which cost a whole batch's records each (a tenth of a conversion's CPU where
        batches are large) before."""
        return [partition_entries(source, topic, partition, options, lazy=True)
                for topic, partition in _selected(source, options)]

    def arrow_streams(self, source: Store, options: Options) -> list[Iterator[pa.RecordBatch]] | None:
        """:meth:`streams` in columns (:func:`partition_batches`, ``options.read_rows`` rows a batch
        at most but for a bigger record batch); None with ``skip_corrupt`` (skipping damage goes
        batch by batch, :func:`partition_entries`).  A single stream is read on the default number
        of threads (``scan_arrow``'s); several on one thread each: the conversion merges them,
        holding a batch of each, and a stream read on N threads holds a round of N ranges."""
        if options.skip_corrupt:
            return None
        chosen = _selected(source, options)
        threads = None if len(chosen) == 1 else 1
        return [partition_batches(source, topic, partition, options.read_rows, threads)
                for topic, partition in chosen]

    def entry_of(self, record: Any, peer: Peer | None = None) -> Entry:
        """A record read from a Kafka store as its entry (the same whatever the peer)."""
        return entry_of(record)

    def not_carried(self, source: Store, options: Options) -> list[str]:
        """Each selected partition's producer state that the records converted do not carry
        (``KafkaStore.not_carried``): the batches' sequences (a RocketMQ message has no place for them,
        so the way back writes none), batches the log cleaner emptied (no record to convert) and
        ``.snapshot`` files; a broker loading the way back takes those producers' next batches whatever
        their sequence.  And the leader epochs (the way back writes epoch 0)."""
        store: Any = source
        return [f"{topic}-{partition}: {words}"
                for (topic, partition), words in store.not_carried(conversion=True).items()
                if options.topics is None or topic in options.topics]

    def extents(self, source: Store, options: Options) -> list[Extent]:
        """Each selected partition from its log start to its log end (empty ones too)."""
        store: Any = source
        return [Extent(topic, partition, *store.offset_range(topic, partition))
                for topic in store.topics() if options.topics is None or topic in options.topics
                for partition in store.partitions(topic)]

    def logs(self, source: Store, options: Options) -> list[LogSpan]:
        """Each selected partition's segment files (``TOPIC-PARTITION/BASE.log``), from byte 0 to their
        size.  Appends grow the last one or add segments; the broker's other changes show here even
        where the partition's offsets stay (apache/kafka 3.8.0): retention deletes whole segments
        (``UnifiedLog.deleteOldSegments``), the cleaner rewrites them smaller and merges them into
        the first of a group (``LogCleaner`` ``Cleaner.cleanSegments``, ``groupSegmentsBySize``),
        recovery truncates a torn tail (``LogLoader``).  ``O(segments)``."""
        store: Any = source
        return [LogSpan(f"{topic}-{partition}/{os.path.basename(info['path'])}", 0, info["bytes"])
                for topic in store.topics() if options.topics is None or topic in options.topics
                for partition in store.partitions(topic)
                for info in store.segment_infos(topic, partition)]

    def open_streams(self, dest: Store, extents: list[Extent], options: Options) -> None:
        """Every partition, each starting at its extent's start: an empty one is left as the broker
        leaves a partition whose records were all deleted (``UnifiedLog.truncateFullyAndStartAt``:
        one empty segment named by the log start), and the first batch written into one with
        records starts there (so its log start is the source's, as ``LogLoader`` reads it back).

        :raises InvalidTopicError: a topic Kafka refuses to create (:func:`_check_new_partition`), before
            any record is written.
        """
        store: Any = dest
        checked: set[str] = set()
        for extent in extents:
            if extent.topic not in checked:     # (Kafka checks a new topic's name, not its other partitions)
                _check_new_partition(store, (extent.topic, extent.partition), options.peer)
                checked.add(extent.topic)
            part = store.partition_of(extent.topic, extent.partition, create=True)
            if not extent.empty:
                _check_batch_room(part, f"{extent.topic}-{extent.partition}")
            if part.next_offset != extent.start and not any(seg.size for seg in part.segments):
                part.start_at(extent.start)

    def close_streams(self, dest: Store, extents: list[Extent], options: Options) -> None:
        """Each partition with records that ends before its extent ends (a source whose records at the
        end of its log are gone: cleaned, or aborted and compacted away) ends there, as the broker leaves
        it: an empty last segment named by the log end offset (3.8.0 ``LogLoader.load``)."""
        store: Any = dest
        for extent in extents:
            if extent.empty:
                continue
            part = store.partition_of(extent.topic, extent.partition, create=True)
            if part.next_offset < extent.end and any(seg.size for seg in part.segments):
                part.end_at(extent.end)

    def check_streams(self, dest: Store, extents: list[Extent], options: Options) -> list[str]:
        """Each partition there, from the extent's start to at least its end."""
        store: Any = dest
        problems = []
        for extent in extents:
            name = f"{extent.topic}-{extent.partition}"
            try:
                start, end = store.offset_range(extent.topic, extent.partition)
            except NotFoundError:
                problems.append(f"{name}: expected the partition (offsets {extent.start} to {extent.end}), "
                                "found none")
                continue
            # (past the end: a copy of Kafka records whose last ones, or all, are markers, which no
            # queue holds; records in a partition are compared with the source's one by one)
            if start != extent.start or end < extent.end:
                wanted = " (empty)" if extent.empty else f" to at least {extent.end}"
                problems.append(f"{name}: expected offsets from {extent.start}{wanted}, "
                                f"found {start} to {end}")
        return problems

    def writer(self, dest: Store, options: Options) -> Writer:
        return KafkaWriter(dest, options)

    def arrow_writer(self, dest: Store, options: Options) -> ArrowWriter:
        return KafkaArrowWriter(dest, options)

    def verifier(self, dest: Store, options: Options) -> Verifier:
        return KafkaVerifier(dest, options)
