"""``KafkaStore``: the segstore store API over one partition directory or a whole log directory.

A path holding ``%020d.log`` files (or a new empty directory named ``TOPIC-N``)
is one partition; any other directory is a log directory of ``TOPIC-N/``
partitions.  Appends write one RecordBatch per call per partition.  Reads yield
:class:`KafkaRecord` views that keep their batch reachable, so ``to_json`` and
the dump can show the batch fields.

Thread-safety: not thread-safe (see :class:`segstore.store.Store`).
"""

from __future__ import annotations

import base64
import contextvars
import dataclasses
import json as jsonlib
import numbers
import os
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Mapping
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import numpy as np

from segstore import files, progress
from segstore.arrays import from_numpy, to_numpy, unique
from segstore.columns import equal_rows, project
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    CorruptIndexError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    NotFoundError,
    OffsetOutOfRangeError,
    SegstoreError,
    UnrepairedDataError,
    UnsupportedOperationError,
    cut,
    shown,
    shown_number,
)
from segstore.files import BrokerLock, DirectoryLock
from segstore.logview import Positions, scan_positions
from segstore.overlap import ahead, in_rounds, thread_count
from segstore.records import Message, Record, message_list, message_timestamp
from segstore.search import Bound, search
from segstore.store import (
    ISOLATION_LEVELS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AppendResult,
    DumpLine,
    Problem,
    QueryRequest,
    QueryResult,
    Store,
    bytes_by_topic,
    check_batch_rows,
    check_decompress,
    check_isolation,
    key_word,
    newest_hits,
    read_until_damage,
    reads_while_open,
)

from . import batch as codec
from . import columnar
from .brokerconfig import DEDUPE_BUFFER_SIZE, offsets_retention_ms
from .checkpoints import REPLICATION_OFFSET_CHECKPOINT, EpochEntry, LeaderEpochCache
from .dirnames import (
    META_PROPERTIES,
    METADATA_PARTITION_DIR,
    METADATA_TOPIC,
    PARTITION_METADATA,
    loaded_as_after_a_crash,
    named_path,
    partition_numbers,
)
from .logdir import (
    LogDir,
    checkpointed,
    forget_clean_shutdown,
    had_clean_shutdown,
    high_watermark,
    is_partition_dir,
    load_log_start,
    recovery_point_in,
    write_checkpoint_entry,
    write_log_start,
    write_recovery_point,
)
from .partition import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    LIST_OFFSETS_CODES,
    MAX_TIMESTAMP,
    KafkaConfig,
    Partition,
    check_batch_size,
    check_records,
    encode_columns,
    encode_records,
    no_key_message,
    now_ms,
    parse_partition_dir,
    plain_header,
    validate_topic,
)
from .topicconfig import TopicConfigs
from .txnindex import AbortedTxn

if TYPE_CHECKING:   # pyarrow, the appenders and the coordinators' logs load where used (info: none)
    import pyarrow as pa

    from segstore.consumers import ConsumerGroups

    from . import arrowappend, arrowencode, groups, kraft, transactions
    from .coordinator import CoordinatorLog
    from .properties import NodeIdentity
    from .record import KafkaRecord, batch_json
    from .segment import LogSegment

_T = TypeVar("_T")
_D = TypeVar("_D")

#: The lock file a Kafka broker keeps in each log dir while it runs (LogManager.LockFileName).
BROKER_LOCK_FILE = ".lock"

#: ``isolation.level`` of Kafka consumers: what :meth:`KafkaStore.read` yields (the core's names).
__all__ = ["ISOLATION_LEVELS", "READ_COMMITTED", "READ_UNCOMMITTED", "KafkaRecord", "KafkaStore"]


#: :mod:`.record` once loaded (:func:`_record_module`)
_record: ModuleType | None = None


def _record_module() -> ModuleType:
    """:mod:`.record`, loaded where a read first makes a record (a ``scan_arrow`` makes none); its
    ``KafkaRecord`` and ``batch_json`` are this module's globals from then on, for the calls made per
    record (an ``import`` statement took 0.6 us, a sixth of ``to_json``; an attribute of the module
    0.5%)."""
    global _record
    if _record is None:
        from . import record

        globals().update(KafkaRecord=record.KafkaRecord, batch_json=record.batch_json)
        _record = record
    return _record


def __getattr__(name: str) -> Any:
    """:class:`.record.KafkaRecord` and :func:`.record.batch_json` by their old names here (their module
    loads on first use)."""
    if name in ("KafkaRecord", "batch_json"):
        return getattr(_record_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CommittedFilter:
    """Which batches a read_committed consumer keeps, fetching from ``start``, asked batch by batch
    in log order.

    As the broker's read_committed fetch and the consumer's ``CompletedFetch`` do: the
    broker returns nothing from the last stable offset on
    (:func:`transactions.last_stable_offset`, from the producer state the log
    implies) and sends the aborted transactions of the fetched range; a producer
    becomes aborted once a batch reaches its aborted transaction's first offset, its
    transactional batches are dropped until its ABORT marker, and control batches
    are never returned.  Decided per batch,
    not per record.
    """

    def __init__(self, part: Partition, start: int) -> None:
        self.lso = _last_stable_offset(part)
        self.pending = part.aborted_transactions(start, self.lso)   # by first offset
        self.aborted: set[int] = set()
        self.next = 0

    def keeps(self, batch: codec.RecordBatch, control_type: str | None = None) -> bool:
        """Whether the consumer is given ``batch``; ``control_type``: a control batch's type when the
        caller decoded it already (``batch`` then need not hold its records).  Nothing from the last
        stable offset on (a read_committed fetch ends there)."""
        if batch.base_offset >= self.lso:
            return False
        if batch.producer_id != codec.NO_PRODUCER_ID:      # Kafka's hasProducerId
            pending = self.pending
            while self.next < len(pending) and pending[self.next].first_offset <= batch.last_offset:
                self.aborted.add(pending[self.next].producer_id)
                self.next += 1
            if batch.is_control:
                if (control_type or batch.control_type()) == "ABORT":
                    self.aborted.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in self.aborted:
                return False
        return not batch.is_control


def _last_stable_offset(part: Partition) -> int:
    """:func:`.transactions.last_stable_offset` (the module, with the producer-state and compaction code it
    uses, loads where a read_committed read needs it: a read_uncommitted scan never does)."""
    from .transactions import last_stable_offset

    return last_stable_offset(part)


def _control_records(chunk: columnar.Chunk, batches: list[codec.RecordBatch]) -> list[codec.Record | None]:
    """Each decoded batch's control record (its first record's key and value; None for a data batch
    and for a control batch of no records, whose first row is the next batch's), from the chunk
    (``batches`` hold no records): read from its buffers, no Arrow column made (a small store's text
    dump loads no pyarrow)."""
    if not any(b.is_control for b in batches):
        return [None] * len(batches)
    return [codec.Record(batch.base_offset, batch.max_timestamp, chunk.blob("key", first),
                         chunk.blob("value", first))
            if batch.is_control and batch.record_count else None
            for batch, first in zip(batches, chunk.batches["first_row"].tolist(), strict=True)]


def _control_kind(record: codec.Record, batch: codec.RecordBatch, path: str | None) -> str:
    """A control record's type name (``path``: the batch's log, which errors name).

    :raises CorruptDataError: a record that is not a control record.
    """
    try:
        return codec.parse_control_record(record.key, record.value)[0]
    except ValueError as err:
        raise CorruptDataError(str(err), path, batch.position) from err


def _control_kinds(records: list[codec.Record | None], batches: list[codec.RecordBatch],
                   path: str | None) -> list[str | None]:
    """The control type of each of :func:`_control_records`' records (None for a data batch).

    :raises CorruptDataError: a control batch whose record is not a control record.
    """
    return [None if record is None else _control_kind(record, batch, path)
            for record, batch in zip(records, batches, strict=True)]


def _control_types(chunk: columnar.Chunk, batches: list[codec.RecordBatch],
                   path: str | None) -> list[str | None]:
    """Each decoded batch's control type (None for a data batch), from its first record's key and
    value in the chunk (``batches`` hold no records).

    :raises CorruptDataError: a control batch whose record is not a control record.
    """
    return _control_kinds(_control_records(chunk, batches), batches, path)


def _committed(part: Partition, batches: Iterable[codec.RecordBatch],
               start: int) -> Iterator[codec.RecordBatch]:
    """The batches a read_committed consumer keeps, fetching from ``start`` (:class:`_CommittedFilter`)."""
    keeps = _CommittedFilter(part, start).keeps
    return (batch for batch in batches if keeps(batch))


#: The columns :func:`_committed_rows` reads.
_TXN_COLUMNS = ("offset", "producerId", "isTransactional", "isControl")


def _committed_rows(batch: pa.RecordBatch, aborted: list[AbortedTxn], lso: int) -> pa.RecordBatch:
    """The rows of a columnar ``batch`` (with :data:`_TXN_COLUMNS`) a read_committed consumer keeps.

    The per-row form of :func:`_committed`: a record is dropped when it is at or
    past the last stable offset ``lso``, a control record, or transactional with
    the producer id of an aborted transaction (``aborted``, ordered by first
    offset, from the ``.txnindex``) whose offsets ``[first offset, ABORT marker]``
    hold it; the consumer drops exactly these, since its aborted set gains a
    producer at the transaction's first batch and loses it at the marker.
    ``O(rows x aborted transactions overlapping the batch)``, vectorized per transaction.
    """
    offsets = to_numpy(batch.column("offset"), np.int64)
    keep = ~to_numpy(batch.column("isControl"), np.bool_) & (offsets < lso)
    if len(offsets) and aborted:
        low, high = offsets[0], offsets[-1]
        producers = to_numpy(batch.column("producerId"), np.int64)
        transactional = to_numpy(batch.column("isTransactional"), np.bool_)
        for txn in aborted:
            if txn.first_offset > high:
                break       # ordered by first offset: no later one reaches this batch
            if txn.last_offset < low:
                continue
            keep &= ~((producers == txn.producer_id) & transactional
                      & (offsets >= txn.first_offset) & (offsets <= txn.last_offset))
    return batch.filter(from_numpy(keep))


def _partition_number(partition: Any) -> int:
    """An appended message's partition as an ``int``: a numpy integer (a column of a scan fed back) as
    its value.  Checked here, for every message, rather than where a partition is created only: a
    partition already held was found by ``(topic, 0.0)`` or ``(topic, np.int64(0))`` (equal keys) and
    appended to, while a new one refused the same value.

    :raises InvalidTopicError: not an integer (a float, a bool, a str), as :func:`.partition.validate_topic`.
    """
    if type(partition) is int:
        return partition
    if isinstance(partition, numbers.Integral) and not isinstance(partition, bool):
        return int(partition)
    raise InvalidTopicError(f"expected an integer partition, found {shown(partition)}")


def _timestamp_number(timestamp: Any) -> int:
    """An appended message's timestamp as an ``int`` (a numpy integer as its value), before the encoder
    sees it: there a float or a str was "'float' object cannot be interpreted as an integer" and a
    bool stored as 1 ms.  Checked as RocketMQ's appends check it (:func:`message_timestamp`).

    :raises InvalidMessageError: not an integer, below -1 or past an int64 (:func:`message_timestamp`).
    """
    return message_timestamp(timestamp)


def _stamp(timestamp: Any, now: int) -> Any:
    """A message's timestamp as appended: ``now`` for one below 0 or None; what is not an int is
    left for the encoder to refuse (InvalidMessageError)."""
    if timestamp is None or (type(timestamp) is int and timestamp < 0):
        return now
    return timestamp


def _message_bound(m: Message) -> int:
    """At most the bytes a checked message's record takes in a batch (``arrowappend``'s overheads)."""
    from .arrowappend import HEADER_OVERHEAD, RECORD_OVERHEAD

    size = RECORD_OVERHEAD + len(m.key or b"") + len(m.value or b"")
    for name, value in m.headers or ():
        size += HEADER_OVERHEAD + len(name.encode("utf-8")) + len(value or b"")
    return size


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def _trimmed_start(part: Partition) -> int | None:
    """The log start where records below it are still stored (DeleteRecords moved it into a batch
    or past whole segments: ``UnifiedLog.maybeIncrementLogStartOffset`` rewrites nothing), else None
    (the log starts at its first segment: read every segment whole)."""
    first = part.log.segments.first
    return part.log_start_offset if first is not None and part.log_start_offset > first.base else None


#: :func:`batch_json` as ``json.dumps`` writes it, for the ``%`` of one batch's values (its keys in order)
_BATCH_JSON = ('{"base_offset": %d, "last_offset": %d, "position": %d, "size": %d, "crc": %d, '
               '"compression": %s, "magic": %d, "producer_id": %d, "producer_epoch": %d, '
               '"base_sequence": %d, "partition_leader_epoch": %d, "is_transactional": %s, '
               '"is_control": %s, "max_timestamp": %d, "base_timestamp": %d, "delete_horizon_ms": %d, '
               '"segment_base_offset": %d}')
_JSON_COMPRESSION = tuple(jsonlib.dumps(name) for name in codec.COMPRESSION_NAMES)
_JSON_BOOL = ("false", "true")
#: a batch's timestamp type (``RecordBatch.timestamp_type``) as JSON: magic 0, create time, log append time
_JSON_STAMP_TYPES = tuple(jsonlib.dumps(name) for name in ("NoTimestampType", codec.CREATE_TIME,
                                                           codec.LOG_APPEND_TIME))


def _json_chunk(topic: str, partition: int, log_start_offset: int, segment_base_offset: int,
                chunk: columnar.Chunk) -> bytes:
    """A chunk's ``dump --json`` lines (``KafkaStore.dump_json``) of the segment named
    ``segment_base_offset`` of a partition whose log starts at ``log_start_offset``; thread-safe."""
    prefix = (f'{{"topic": {jsonlib.dumps(topic)}, "partition": {partition}, '
              f'"log_start_offset": {log_start_offset}, "offset": ')
    stamp_types, tails = batch_tails(chunk.batches, segment_base_offset)
    return columnar.json_lines(chunk, prefix, stamp_types, tails)


class _CopiedExtent:
    """What a copy written from a partition's ``dump --json`` record lines holds (``write --input``,
    :mod:`.jsonl`): the log end offset past the last dumped batch (none where no record was dumped),
    and the leader epochs its batches start (``Partition.append_encoded``: an epoch newer than the
    latest at the batch's base offset).  ``KafkaStore.dump_json`` adds a partition line where these
    are not the partition's own (a log whose every record from its log start is gone, or whose last
    ones are: retention, DeleteRecords, the cleaner; an epoch the cache starts before its first
    batch that survived the cleaner), so the copy's log ends where the source's does and its
    ``leader-epoch-checkpoint`` answers as the source's."""

    __slots__ = ("end", "entries")

    def __init__(self) -> None:
        self.end: int | None = None
        self.entries: list[EpochEntry] = []

    def add(self, chunk: columnar.Chunk, first_row: int) -> None:
        """Take the batches of ``chunk`` whose records from ``first_row`` on were dumped.
        ``O(rows)`` in numpy, ``O(epoch changes)`` in Python."""
        if first_row >= chunk.rows:
            return
        owners = chunk.buffers["row_batch"][first_row:chunk.rows]
        dumped = chunk.batches[owners[np.r_[True, owners[1:] != owners[:-1]]]]
        last = dumped[-1]
        self.end = int(last["base_offset"]) + int(last["last_offset_delta"]) + 1
        epochs = dumped["leader_epoch"].astype(np.int64)
        latest = self.entries[-1].epoch if self.entries else -1
        before = np.maximum.accumulate(np.concatenate(([latest], epochs[:-1])))
        for i in np.flatnonzero(epochs > before).tolist():
            self.entries.append(EpochEntry(int(epochs[i]), int(dumped["base_offset"][i])))

    def line(self, topic: str, partition: int, part: Partition) -> bytes | None:
        """The partition line (ASCII, with its newline) where the copy would differ from ``part``:
        ``{"topic", "partition", "log_start_offset", "log_end_offset", "high_watermark", "leader_epochs"}``
        (a copy's high watermark is its log end, segstore being its only writer), the epochs as
        Kafka 3.8 ``LogLoader.load`` holds them (truncated from the log end, then from the log start:
        ``truncateFromEndAsyncFlush(nextOffset)``, ``truncateFromStartAsyncFlush``); else None."""
        start, end, hw = part.log_start_offset, part.next_offset, high_watermark(part)
        loaded = LeaderEpochCache("", part.epochs.entries)
        loaded.truncate_from_end(end)
        loaded.truncate_from_start(start)
        copied = LeaderEpochCache("", self.entries)
        copied.truncate_from_start(start)
        if self.end == end == hw and copied.entries == loaded.entries:
            return None
        epochs = ", ".join(f"[{e.epoch}, {e.start_offset}]" for e in loaded.entries)
        return (f'{{"topic": {jsonlib.dumps(topic)}, "partition": {partition}, "log_start_offset": {start}, '
                f'"log_end_offset": {end}, "high_watermark": {hw}, "leader_epochs": [{epochs}]}}\n'
                ).encode("ascii")


def batch_tails(rows: np.ndarray, segment_base_offset: int) -> tuple[list[str], list[str]]:
    """Per batch (``columnar.BATCH_DTYPE`` rows, of the segment named ``segment_base_offset``) the JSON
    of its timestamp type and the tail of its records' ``dump --json`` lines: ``, "batch": `` +
    ``json.dumps(batch_json(batch, segment_base_offset))`` + ``}``, from the batch columns (a ``%`` a
    batch, not a RecordBatch and a dict: this is the part of a dump that holds the GIL).
    ``O(batches)``."""
    attributes, magic = rows["attributes"].astype(np.int64), rows["magic"].astype(np.int64)
    v2 = magic >= codec.MAGIC_V2
    stamp_types = np.where(magic == 0, 0, np.where(attributes & codec.TIMESTAMP_TYPE_FLAG, 2, 1)).tolist()
    base_timestamps = rows["base_timestamp"]
    horizon = np.where(v2 & (attributes & codec.DELETE_HORIZON_FLAG != 0), base_timestamps,
                       codec.NO_TIMESTAMP)
    bases = rows["base_offset"].tolist()
    lasts = [base + delta for base, delta in zip(bases, rows["last_offset_delta"].tolist(), strict=True)]
    columns = (bases, lasts, rows["position"].tolist(), rows["size"].tolist(), rows["crc"].tolist(),
               [_JSON_COMPRESSION[c] for c in (attributes & codec.CODEC_MASK).tolist()], magic.tolist(),
               rows["producer_id"].tolist(), rows["producer_epoch"].tolist(), rows["base_sequence"].tolist(),
               rows["leader_epoch"].tolist(),
               [_JSON_BOOL[x] for x in (v2 & (attributes & codec.TRANSACTIONAL_FLAG != 0)).tolist()],
               [_JSON_BOOL[x] for x in (v2 & (attributes & codec.CONTROL_FLAG != 0)).tolist()],
               rows["max_timestamp"].tolist(), base_timestamps.tolist(), horizon.tolist(),
               [segment_base_offset] * len(bases))
    return ([_JSON_STAMP_TYPES[t] for t in stamp_types],
            [f', "batch": {_BATCH_JSON % values}}}\n' for values in zip(*columns, strict=True)])


def _text(line: str) -> bytes:
    return line.encode("utf-8", "surrogatepass")


def _none_for_time(part: Partition, timestamp: int) -> list[DumpLine]:
    """Why a time lookup of ``part`` found no offset where a later record is at or after ``timestamp``
    (none otherwise: no record is): the segment the broker searches alone
    (``Partition.time_lookup_segment``) holds none, its largest timestamp measured by its file's mtime
    (a segment of v0 messages, or without ``.timeindex``)."""
    if timestamp < 0:
        return []
    first = part.first_offset_from_time(timestamp)
    seg = part.time_lookup_segment(timestamp)
    if first is None or seg is None:
        return []
    try:
        known = seg.max_timestamp_so_far().timestamp >= 0
    except CorruptDataError:
        known = True
    largest = ("its largest timestamp" if known else
               "its largest timestamp (no record timestamp known: v0 messages, or no .timeindex; its "
               f"file's mtime, {files.mtime_ms(seg.path)}, taken)")
    return [DumpLine(
        f"{part.topic}-{part.partition}: none, as Kafka 3.8 ListOffsets answers it: its lookup searches only "
        f"the first segment whose largest timestamp reaches {timestamp}, segment {seg.base}, where "
        f"{largest} reaches it but no record does; offset {first.offset} (timestamp {first.timestamp}) of a "
        f"later segment is the first record at or after it (--offset {first.offset} reads from there)")]


def _metadata_image(log_dir: str) -> kraft.MetadataImage | None:
    """:func:`.kraft.load_image` of ``log_dir``; its module (the metadata image's replay, 2.4 ms of
    imports) is loaded only where the log directory has a metadata log to replay."""
    if not files.is_dir(os.path.join(log_dir, METADATA_PARTITION_DIR)):
        return None
    from . import kraft
    return kraft.load_image(log_dir)


def _node_identity(log_dir: str) -> NodeIdentity | None:
    """:func:`.properties.node_identity` of ``log_dir``; its module (and the properties parser) is loaded
    only where the log directory has a ``meta.properties`` (none: None, as that function answers)."""
    if not files.is_file(os.path.join(log_dir, META_PROPERTIES)):
        return None
    from .properties import node_identity
    return node_identity(log_dir)


def _replication_factor(topic: kraft.TopicState) -> int | None:
    """``kafka-topics --describe``'s ReplicationFactor: its first partition's replica count
    (``TopicCommand.TopicDescription``); None for a topic without partitions."""
    first = min(topic.partitions, default=None)
    return None if first is None else len(topic.partitions[first].replicas)


def _assignment(partition: int, state: kraft.PartitionState) -> dict[str, Any]:
    """One partition as the metadata image holds it, as ``kafka-topics --describe`` prints it (Leader -1:
    none; the reassignment's adding/removing replicas only while one runs), and whether it is under-
    replicated (fewer in-sync replicas than replicas, ``--under-replicated-partitions``) or has no leader
    (``--unavailable-partitions``)."""
    row: dict[str, Any] = {"partition": partition, "leader": state.leader, "leader_epoch": state.leader_epoch,
                           "replicas": list(state.replicas), "isr": list(state.isr)}
    if state.adding_replicas:
        row["adding_replicas"] = list(state.adding_replicas)
    if state.removing_replicas:
        row["removing_replicas"] = list(state.removing_replicas)
    row["under_replicated"] = len(state.isr) < len(state.replicas)
    row["leaderless"] = state.leader < 0
    return row


def _max_timestamp(part: Partition) -> int | None:
    """The partition's largest record timestamp: its segments' ``maxTimestampSoFar`` (the time index's
    last entry, then the batch headers after it), what ``ListOffsets`` answers for the max-timestamp
    spec (``kafka-get-offsets --time max-timestamp``); -1 for no record, None where a segment cannot
    be read (``verify`` says why).  ``O(segments)`` index reads and short header walks."""
    try:
        return max((seg.max_timestamp_so_far().timestamp for seg in part.segments),
                   default=codec.NO_TIMESTAMP)
    except SegstoreError:
        return None


def _below(chunk: columnar.Chunk, stop: int | None) -> tuple[columnar.Chunk, bool]:
    """``chunk`` as far as a dump to ``stop`` (exclusive; None: no end) reads it, and whether the dump
    ends with it: the batches whose base offset is below ``stop`` and their records below it, as
    :meth:`KafkaStore.dump`'s loop (a shallow copy over the same buffers where some are cut).  It ends
    where its last batch reaches ``stop - 1``, so nothing after is decoded (a batch a live writer is
    still writing there is never read).  ``O(rows)``."""
    if stop is None:
        return chunk, False
    n = chunk.rows
    batch_rows = chunk.batches
    over = batch_rows["base_offset"] >= stop
    batches = int(np.argmax(over)) if over.any() else len(over)
    beyond = (chunk.buffers["row_batch"][:n] >= batches) | (chunk.buffers["offset"][:n] >= stop)
    rows = int(np.argmax(beyond)) if beyond.any() else n
    if rows == n and batches == len(over):
        reached = bool(len(batch_rows)) and int(batch_rows["base_offset"][-1]
                                                + batch_rows["last_offset_delta"][-1]) >= stop - 1
        return chunk, reached
    return chunk.head(rows, batches), True


def _text_chunk(chunk: columnar.Chunk, start: int,
                keeps: Callable[[codec.RecordBatch, str | None], bool] | None,
                view: bytes | memoryview, path: str = "<memory>") -> bytes:
    """A chunk's text dump lines (``KafkaStore.dump_text``): the batches ending below ``start`` and
    those ``keeps`` (a read_committed filter, asked in log order) drops left out, the records
    below ``start`` too.  A batch line per batch in Python, the record lines in C; ``view`` (the log
    the chunk was decoded from, at ``path``) gives a chunk holding v0/v1 messages its lines in
    Python: each such message's line names its own CRC, which the columns do not keep (logs from
    before Kafka 0.11); and one holding a control batch of more than one record (each record's line
    its own control text)."""
    from .dumpfile import control_text

    batches = [columnar.record_batch(row) for row in chunk.batches.tolist()]
    controls = _control_records(chunk, batches)
    # the types only for a read_committed filter: the lines name a record that is no marker as
    # kafka-dump-log cannot read it (control_text), the record-by-record dump's lines
    kinds = _control_kinds(controls, batches, path) if keeps is not None else [None] * len(batches)
    heads: list[bytes | None] = []
    for batch, kind in zip(batches, kinds, strict=True):
        kept = batch.last_offset >= start and (keeps is None or keeps(batch, kind))
        heads.append(_text(batch_line(batch) + "\n") if kept else None)
    # v0/v1 messages, and a control batch of more than one record (the C lines give each record of a
    # batch its first record's control text; kafka-dump-log reads each record's own): lines in Python
    if any(batch.magic < codec.MAGIC_V2 or (batch.is_control and batch.record_count > 1)
           for batch in batches):
        row_batch = chunk.buffers["row_batch"][:chunk.rows]
        out = []
        for b, (batch, head) in enumerate(zip(batches, heads, strict=True)):
            if head is not None:
                out.append(head)
                whole = next(codec.iter_batches(memoryview(view), path=path, check_crc=False,
                                                start=batch.position))
                # the rows the chunk holds: a window's cut keeps a prefix of the batch's records (by
                # count: a v1 wrapper's inner offsets need not rise, DeepRecordsIterator takes them so)
                held = int(np.count_nonzero(row_batch == b))
                out += _record_lines(whole, start, held)
        return b"".join(out)
    tails = [b"" if record is None else _text(" " + control_text(record, pos=batch.position))
             for record, batch in zip(controls, batches, strict=True)]
    return columnar.text_lines(chunk, heads, [_text(b.timestamp_type) for b in batches], tails, start)


def _passed_over(seg: Any, position: int, start: int, stop: int | None,
                 keeps: Callable[..., bool] | None) -> int | None:
    """Where :meth:`KafkaStore.dump`'s record-by-record walk goes on after the batch at ``position``
    when it does not decode its records (-1: the walk ends there), else None (it decodes them, and
    fails as the columns did): a batch whose header and CRC hold (it reads every batch so), ending
    below ``start`` or one ``keeps`` (read_committed) leaves out, or starting at or past ``stop``."""
    try:
        batch = next(seg.batches(position))
    except (CorruptDataError, StopIteration):
        return None
    if stop is not None and batch.base_offset >= stop:
        return -1
    if batch.last_offset >= start and (keeps is None or keeps(batch)):
        return None
    if stop is not None and batch.last_offset >= stop - 1:
        return -1
    return int(batch.position + batch.size)


def _record_lines(batch: codec.RecordBatch, start: int, count: int | None = None) -> list[bytes]:
    """The text lines of ``batch``'s records at offset ``start`` or past it (of its first ``count``
    records), each with its newline."""
    return [_text(record_line(batch, record, crc) + "\n")
            for record, crc in batch.records_with_crcs()[:count] if record.offset >= start]


def batch_line(batch: codec.RecordBatch) -> str:
    """``kafka-dump-log --deep-iteration``'s batch line (:func:`.dumpfile.batch_text`), at the batch's
    position in its segment; a batch read here passed its CRC check (``isvalid: true``)."""
    from .dumpfile import batch_text  # the dump's text (and its decoders): not for info or scans

    return batch_text(batch, batch.position, True)


def record_line(batch: codec.RecordBatch, record: codec.Record, crc: int | None = None) -> str:
    """``kafka-dump-log --deep-iteration``'s record line (:func:`.dumpfile.record_text`; ``crc`` a v0/v1
    message's own)."""
    from .dumpfile import control_text, record_text

    control = ""
    if batch.is_control:
        control = control_text(record, path=batch.path, pos=batch.position)
    return record_text(batch, record, control=control, crc=crc)


#: Bytes of a segment per range of a parallel read (:meth:`KafkaStore._parallel_chunks`), and ranges
#: per thread in a round: what a round holds stays small enough for the memory pool to hand the next
#: round the pages of the last (as RocketMQ's ``SPLIT_BYTES``); each range's chunks take data
#: buffers of its size at most (``Capacity.for_bytes``), not the default's megabytes.
SPLIT_BYTES = 2 << 20
PER_ROUND = 1
#: Ranges a thread of a verify's decoding may be ahead of the checks (:class:`_DecodedAhead`).
AHEAD = 3
#: Ranges a thread of a dump's walk ahead (``dump_json(walk_ahead=True)``) may have formatted past the
#: block the caller holds: each holds a range's chunks and their text (about 2.5 times its bytes), fresh
#: pages where more are alive (500k records, two threads, medians of 3 under load: 29k, 35k and 39k
#: page faults with 1, 2 and 3, and 0.61, 0.63 and 0.68 s of CPU).
DUMP_AHEAD = 1
#: A verify's ranges are this many times :data:`SPLIT_BYTES`: its chunks hold the batches' headers
#: and no column data, so a longer range costs no memory, and the Python each range costs (its
#: buffers, its chunk) runs under the GIL the decoding threads share.  4M records on 2 threads, medians
#: of 9 fresh processes in two runs: 1.21-1.33x one thread with 2 MiB ranges, 1.47-1.62x with 8 MiB
#: (32 MiB: 1.33x).
VERIFY_SPLIT_FACTOR = 4


def split_points(seg: Any, lo: int, step: int | None = None) -> list[int]:
    """Where to cut segment ``seg``'s log after ``lo`` for a parallel read: about every ``step`` bytes
    (:data:`SPLIT_BYTES` by default), at the offset-index position next to it (a batch starts there
    when the index is right; a wrong one costs a decode again, never a wrong row).  ``O(entries)``."""
    step = SPLIT_BYTES if step is None else step
    size = seg.log.size
    hints = seg.offset_index.columns()["position"].astype(np.int64)
    wanted = np.arange(lo + step, size, step, dtype=np.int64)
    if not len(hints) or not len(wanted):
        return []
    cuts = unique(hints[np.minimum(np.searchsorted(hints, wanted), len(hints) - 1)])
    return [int(c) for c in cuts[(cuts > lo) & (cuts < size)]]


class _Range(NamedTuple):
    """A byte range ``[begin, end)`` of one segment of the ``partition``-th partition read, cut at
    offset-index positions (``first``: ``begin`` is where the read starts in this segment)."""

    partition: int
    segment: Any
    begin: int
    end: int
    first: bool


def _recover_partition(task: tuple[Partition, int, contextvars.Context]) -> list[str]:
    """One partition of :meth:`KafkaStore.recover`, in the context its task was made in."""
    part, point, context = task
    return context.run(part.recover, point)


class _DecodedAhead:
    """The chunks ``LogSegment.check_log`` asks for (``columnar.decode(view, start=pos, want=0)`` of a
    segment from ``pos``), decoded ahead by byte ranges on ``threads`` threads: the segments in the
    order they are checked, each cut at offset-index positions (:func:`split_points`).

    A range's chunks are handed out where the walk stands at the range's start; elsewhere (a
    position no batch starts at, the walk going on after a bad batch) the walk's own position is
    decoded here up to the range's end, so what ``check_log`` sees is what one thread decodes.
    A segment whose ranges were not decoded ahead is decoded here.  The ranges are decoded on
    ``threads`` threads of their own while the checks run (:func:`segstore.overlap.ahead`), until
    :meth:`close`, which the caller must call before the store can change.  Not thread-safe (one
    verify); memory: :data:`AHEAD` ranges a thread.
    """

    def __init__(self, segments: list[Any], threads: int) -> None:
        self.order = {id(seg): number for number, seg in enumerate(segments)}
        self.results = ahead(self._ranges(segments), self._decode, threads, AHEAD * threads)
        self.head: Any = None

    def close(self) -> None:
        """Stop decoding ahead (waits for the ranges being decoded)."""
        self.results.close()

    @staticmethod
    def _ranges(segments: list[Any]) -> Iterator[_Range]:
        """Each segment's ranges (``_Range.partition``: here the segment's number)."""
        for number, seg in enumerate(segments):
            cuts = split_points(seg, 0, SPLIT_BYTES * VERIFY_SPLIT_FACTOR)
            for a, b in zip([0, *cuts], [*cuts, seg.log.size], strict=True):
                yield _Range(number, seg, a, b, a == 0)

    @staticmethod
    def _decode(task: _Range, at: int | None = None
                ) -> tuple[int, int, list[columnar.Chunk], BaseException | None]:
        seg = task.segment
        at = task.begin if at is None else at
        reach, out = at, []
        try:
            for chunk in columnar.decode(seg.log.view(), path=seg.path, start=at, end=task.end, want=0,
                                         capacity=columnar.Capacity.for_bytes(task.end - at)):
                batches = chunk.batches
                reach = int(batches["position"][-1]) + int(batches["size"][-1])
                out.append(chunk)
        except SegstoreError as err:
            return at, reach, out, err
        return at, reach, out, None

    def _next(self, number: int, pos: int) -> Any:
        """The next range decoded ahead of segment ``number`` ending after ``pos``, or None."""
        while True:
            if self.head is None:
                self.head = next(self.results, None)
                if self.head is None:
                    return None
            task = self.head[0]
            if task.partition > number:
                return None
            if task.partition == number and task.end > pos:
                return self.head
            self.head = None            # a range the walk is past (or a segment it left early)

    def __call__(self, seg: Any, pos: int) -> Iterator[columnar.Chunk]:
        number = self.order[id(seg)]
        end = seg.log.size
        while pos < end:
            ahead = self._next(number, pos)
            if ahead is None:
                yield from columnar.decode(seg.log.view(), path=seg.path, start=pos, want=0)
                return
            task, result, error = ahead
            self.head = None
            if error is not None:
                raise error
            at, reach, chunks, failure = result
            if at != pos:
                at, reach, chunks, failure = self._decode(task, pos)
            yield from chunks
            if failure is not None:
                raise failure
            pos = reach


class KafkaStore(Store):
    """A Kafka partition directory or log directory opened for reading (``"r"``) or appending (``"a"``)."""

    format = "kafka"

    def __init__(self, path: str, mode: str = "r", config: KafkaConfig | None = None, *,
                 explicit: Collection[str] = (), clock: Callable[[], int] = now_ms,
                 static: Mapping[str, str] | None = None) -> None:
        """:param explicit: the config names the caller gave (they override each topic's own config in
        the metadata log, :mod:`.topicconfig`).
        :param static: the broker's ``server.properties`` names (:mod:`.brokerconfig`), under the metadata
        log's dynamic broker configs (``config`` holds the topic configs they give already)."""
        super().__init__(path, mode)
        self.config = config or KafkaConfig()
        writable = mode == "a"
        if not writable and not files.is_dir(path):
            raise NotFoundError("expected a Kafka partition or log directory, found nothing", path)
        self.single = is_partition_dir(path)
        #: the log directory: the store's path, or a partition directory's parent
        self.log_dir_path = os.path.dirname(named_path(path)) if self.single else path
        #: problems met reading the cluster's files (meta.properties, the metadata log) for verify
        self._cluster_problems: list[Problem] = []
        self.metadata = self._load(_metadata_image, "the metadata log")
        self.identity = self._load(_node_identity, "meta.properties")
        retention = offsets_retention_ms(static or {})
        #: the server.properties' offsets.retention.minutes: the group calls' default offsets_retention_ms
        self._group_defaults = {} if retention is None else {"offsets_retention_ms": retention}
        self.topic_configs = TopicConfigs(self.config, explicit, self.metadata,
                                          self.identity.node_id if self.identity is not None else None,
                                          static)
        # Writers lock directories, never files: a log directory store locks the log directory
        # (exclusive), a partition directory store its partition's (exclusive) and the log directory
        # around it (shared), so two writers on one partition collide whichever directory they
        # opened, and a log directory store's partitions need no lock each (a descriptor held from
        # open to close: a store writing thousands of partitions, a conversion, met ulimit -n).
        # Kafka 3.8 deletes its log dir `.lock` at clean shutdown (FileLock.destroy); a lock
        # file of ours would be left behind.
        self._lock: DirectoryLock | None = None
        self._broker_lock: BrokerLock | None = None
        #: the directory did not exist: a write that fails before any record is stored removes it
        self._created = writable and not files.exists(path)
        #: partition_widths' cache: (the log dir's widths_version, the widths)
        self._widths: tuple[int, dict[str, int]] | None = None
        if writable:
            files.make_dirs(path)
            log_dir = os.path.dirname(named_path(path)) if self.single else path
            # A running broker holds `.lock` in its log dir (LogManager.lockLogDirs, FileLock).
            self._broker_lock = BrokerLock(os.path.join(log_dir, BROKER_LOCK_FILE), "a Kafka broker")
            self._broker_lock.acquire()
            self._lock = DirectoryLock(log_dir if self.single else path, shared=self.single)
            try:
                self._lock.acquire()
            except BaseException:
                self._broker_lock.release()
                raise
        try:
            if self.single:
                topic, number = parse_partition_dir(path)
                parent = os.path.dirname(os.path.abspath(path))
                # the parent log dir's recovery point, as LogManager.loadLogs hands it to LogLoader: a
                # batch a crash tore past it is cut before an append (Partition._recover_crashed); moved
                # to the log end at close only where the file names the partition (write_recovery_point)
                point = None if loaded_as_after_a_crash(topic) else recovery_point_in(parent, topic, number)
                self._part: Partition | None = Partition(
                    path, self.topic_configs.config_for(topic), writable=writable, clock=clock,
                    unwritable=self.topic_configs.unwritable(topic), recovery_point=point or 0,
                    recovery_point_kept=point is not None,
                    clean_shutdown=had_clean_shutdown(parent) and not loaded_as_after_a_crash(topic),
                    write_recovery_point=write_recovery_point)
                load_log_start(self._part)  # the parent log dir's checkpoint
                if writable:
                    forget_clean_shutdown(parent)
                self._dir: LogDir | None = None
            else:
                self._part = None
                self._dir = LogDir(path, self.topic_configs.config_for, writable=writable, clock=clock,
                                   unwritable=self.topic_configs.unwritable)
        except BaseException:
            self._release_locks()
            raise

    def _load(self, reader: Callable[[str], _T], what: str) -> _T | None:
        """``reader(log dir)``; a file it cannot read is a verify problem, not a failure to open."""
        try:
            return reader(self.log_dir_path)
        except SegstoreError as err:
            self._cluster_problems.append(Problem(err.path or self.log_dir_path, err.pos,
                                                  f"{what} not read: {err.message}"))
            return None

    # -- partitions ---------------------------------------------------------------
    @property
    def _log_dir(self) -> LogDir:
        """The log directory of a log-directory store (the store has it exactly when ``_part`` is None)."""
        if self._dir is None:
            raise UnsupportedOperationError("expected a log directory store, found a partition directory",
                                            self.path)
        return self._dir

    def _partitions(self) -> dict[tuple[str, int], Partition]:
        """Every partition by ``(topic, partition)``, sorted.

        :raises StoreClosedError: the store was closed (its partitions' files are gone: their segment
            lists read as empty).
        """
        self._check_open()
        if self._part is not None:
            return {(self._part.topic, self._part.partition): self._part}
        return dict(sorted(self._log_dir.partitions.items()))

    def partition_of(self, topic: str, partition: int, *, create: bool = False) -> Partition:
        """The :class:`Partition` for ``(topic, partition)``.

        :raises NotFoundError: no such partition (and not ``create``); a partition directory store asked
            for another partition to read, as a log directory without it answers (the CLI's exit 1).
        :raises InvalidTopicError: a partition directory store asked to create (append to) another
            partition: it holds one, and a message of another can only go to a log directory.
        :raises StoreClosedError: the store was closed.
        """
        self._check_open()
        if self._part is not None:
            if (topic, partition) != (self._part.topic, self._part.partition):
                held = f"{self._part.topic}-{self._part.partition}"
                if create:
                    raise InvalidTopicError(f"expected {held} (this directory's partition), found "
                                            f"{topic}-{partition}", self.path)
                raise NotFoundError(f"expected a partition {topic}-{partition}, found none (this directory "
                                    f"is partition {held})", self.path)
            return self._part
        new = create and self.mode == "a" and (topic, partition) not in self._log_dir.partitions
        part = self._log_dir.partition(topic, partition, create=create and self.mode == "a")
        if part is None:
            raise NotFoundError(f"expected a partition {topic}-{partition}, found none", self.path)
        state = self.metadata.topics.get(topic) if new and self._kraft_node() else None  # type: ignore[union-attr]
        if state is not None:
            # a KRaft broker flushes the topic id before a log's first append (UnifiedLog.
            # maybeFlushMetadataFile): without it, it would rename the directory -stray on start
            files.write_atomic(os.path.join(part.path, PARTITION_METADATA),
                               f"version: 0\ntopic_id: {state.topic_id}")
        return part

    def _kraft_node(self) -> bool:
        """Whether this log directory is a KRaft node's with its metadata log (``meta.properties`` and
        ``__cluster_metadata-0``): its broker keeps only the partitions the metadata image assigns it."""
        return self.metadata is not None and self.identity is not None

    def _check_assigned(self, topic: str, partition: int) -> None:
        """Refuse a partition to create in a KRaft node's log directory that the metadata image does not
        assign to this node: its 3.8 broker refuses a produce there (UNKNOWN_TOPIC_OR_PARTITION) and
        would rename the directory ``-stray`` on start (``LogManager.isStrayKraftReplica``), taking
        the records appended with it.  ``O(1)``.

        :raises InvalidTopicError: naming the partition and the node.
        """
        if (self._part is not None or (topic, partition) in self._log_dir.partitions or not self._kraft_node()
                or topic == METADATA_TOPIC):      # the controller's own log, not a broker's replica
            return
        assert self.metadata is not None and self.identity is not None     # _kraft_node
        state = self.metadata.topics.get(topic)
        assigned = None if state is None else state.partitions.get(partition)
        if assigned is None or self.identity.node_id not in assigned.replicas:
            whose = ("no such partition in the metadata log" if assigned is None
                     else f"replicas {list(assigned.replicas)}")
            raise InvalidTopicError(f"expected a partition the metadata log assigns to node "
                                    f"{self.identity.node_id}, found {topic}-{partition} ({whose}): its "
                                    f"broker would rename the directory -stray "
                                    f"(LogManager.isStrayKraftReplica)", self.path)

    def partition_widths(self) -> dict[str, int]:
        """Each topic's partition count, for the topics of more than one: the KRaft metadata's
        (``partitionsForTopic``, what a producer's metadata gives) where it has the topic, else what
        the partition directories here say (the highest number + 1; a partition directory store: its
        log directory's, of its own topic).  Where a keyed record naming no partition goes
        (:mod:`.partitioner`).
        Cached: ``O(topics)`` when a partition was created since the last call, else ``O(1)``."""
        self._check_open()
        version = self._dir.widths_version if self._dir is not None else 0
        if self._widths is None or self._widths[0] != version:
            if self._dir is not None:
                widths = dict(self._dir.widths)
            else:       # the one topic this store takes (a log dir may hold thousands of directories)
                topic = self.partition.topic
                widths = {topic: max(partition_numbers(self.log_dir_path, topic), default=-1) + 1}
            if self.metadata is not None:
                widths.update({name: len(t.partitions) for name, t in self.metadata.topics.items()
                               if t.partitions})
            self._widths = (version, {t: n for t, n in widths.items() if n > 1})
        return self._widths[1]

    def _check_routed(self, topic: str, partition: int, key: Any) -> None:
        """:raises NotFoundError: ``key`` chose ``topic``'s ``partition`` (:meth:`partition_widths`),
        which this store does not hold."""
        held = (self._part is not None and (topic, partition) == (self._part.topic, self._part.partition)) \
            or (self._dir is not None and (topic, partition) in self._dir.partitions)
        if not held:
            # appends by key only: not loaded for reads
            from . import partitioner

            raise partitioner.not_held(self.path, topic, partition, self.partition_widths()[topic], key)

    def _route_keyed(self, items: list[Any], msgs: list[Message], unnamed: list[bool]) -> None:
        """Each keyed item of ``items`` naming no partition (a dict without one, or ``unnamed``: its
        partition None), of a topic of more than one partition: its message of ``msgs``
        (``Message.coerce`` of it) in its key's partition, as ``dictappend.plain_groups`` routes plain
        dicts.  ``O(items)``.

        :raises NotFoundError: a key chose a partition this store does not hold.
        """
        widths = self.partition_widths()
        if not widths:
            return
        from . import partitioner

        for item, m, none in zip(items, msgs, unnamed, strict=True):
            width = widths.get(m.topic, 0) if isinstance(m.topic, str) else 0
            if (width > 1 and (none or (isinstance(item, Mapping) and "partition" not in item))
                    and isinstance(m.key, bytes)):
                m.partition = partitioner.partition_for_key(m.key, width)
                given = item.get("key") if isinstance(item, Mapping) else m.key
                self._check_routed(m.topic, m.partition, given)

    @property
    def partition(self) -> Partition:
        """The one partition of a partition-directory store."""
        if self._part is None:
            raise InvalidTopicError("expected a partition directory, found a log directory", self.path)
        return self._part

    # -- writing ------------------------------------------------------------------
    def append_batch(self, messages: Iterable[Message | dict]) -> list[AppendResult]:
        """One RecordBatch per partition touched, in first-seen order; results in input order.

        A partition's records that make a batch larger than ``max.message.bytes`` or ``segment.bytes``
        allow are cut into several, as :meth:`append_arrow` cuts its rows (:func:`.arrowappend.cuts`,
        at most about 1 MiB of records each): a producer's records are never refused for the call
        that carries them, only a record too large for a batch alone.

        Every topic, partition and batch is checked before anything is written: a refused call
        writes nothing and creates no partition (its batches are encoded first, and held together
        until they are appended).  Plain dicts and :class:`Message` s (:mod:`.dictappend`) are
        grouped, encoded and answered in C, one call per step; anything else goes through
        :meth:`Message.coerce` and the per-record encoder (the same bytes).  The results of one
        batch share its ``extra`` dict.

        A dict naming no ``partition`` (or None, as ``ProducerRecord``'s null) goes to partition 0, or,
        where it has a key (not None) and its topic more than one partition (:meth:`partition_widths`,
        as the call starts), to the one the Java producer chooses for the key (:mod:`.partitioner`); a
        :class:`Message` names its partition (None: none, as a dict's).

        :raises MessageTooLargeError: a record too large for a batch alone (nothing is written).
        :raises NotFoundError: a key chose a partition this store does not hold (nothing is written).
        """
        from . import dictappend

        self._check_writable()
        items = message_list(messages)
        planned = dictappend.plain_groups(items, self.partition_widths())
        if planned is None or any(bound is None for _, _, _, bound, _ in planned[0]):
            return self._append_messages(items)
        groups, snapshot = planned
        for topic, partition, _, _, routed in groups:
            if routed >= 0:
                self._check_routed(topic, partition, items[routed]["key"])
        self._check_partitions([(topic, partition) for topic, partition, _, _, _ in groups])
        batches: list[tuple[str, int, KafkaConfig, int, list[tuple[bytes, bytes]]]] = []
        for topic, partition, rows, bound, _ in groups:
            config, base, epoch, now = self._append_state(topic, partition)
            indices = np.frombuffer(rows, np.int64)
            if now < 0:     # a clock before 1970 (tests): timestamps below 0 are the general path's
                msgs = [Message.coerce(items[i]) for i in indices.tolist()]
                general = self._encoded_messages(topic, partition, config, msgs, base, epoch, now)
                batches.append((topic, partition, config, now,
                                [(indices[run].tobytes(), data) for run, data in general]))
                continue
            assert bound is not None        # else the general path took the call
            whole = self._encoded_plain(items, snapshot, rows, bound, config, base, epoch, now)
            if self._fits(whole, config, topic, partition):
                batches.append((topic, partition, config, now, [(rows, whole)]))
                continue
            sizes = dictappend.plain_bounds(items, rows)
            cut = []
            for run in self._runs(sizes, config):
                data = self._encoded_plain(items, snapshot, indices[run].tobytes(), int(sizes[run].sum()),
                                           config, base, epoch, now)
                check_batch_size(len(data), config, self._partition_path(topic, partition))
                cut.append((indices[run].tobytes(), data))
                base += len(run)
            batches.append((topic, partition, config, now, cut))
        for topic, partition, config, now, runs in batches:
            self._check_timestamps(topic, partition, config, now, [data for _, data in runs])
        results: list[Any] = [None] * len(items)
        for topic, partition, _, now, runs in batches:
            part = self.partition_of(topic, partition, create=True)
            for run_rows, data in runs:
                done = part.append_encoded(data, now_ms=now, check_times=False)   # checked above
                dictappend.plain_results(results, run_rows, topic, partition, done.base_offset, done.position,
                                         done.size, {"segment": done.segment})
            part.apply_retention()
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return results

    @staticmethod
    def _encoded_plain(items: list, snapshot: Any, rows: bytes, bound: int, config: KafkaConfig, base: int,
                       epoch: int, now: int) -> bytes:
        """The plain ``items`` at ``rows`` as one batch an append writes at ``base`` (``now`` >= 0;
        ``bound`` and ``snapshot``: :func:`.dictappend.plain_groups`' of them), in one C call."""
        from . import dictappend

        header, codec_number = plain_header(config, len(rows) // 8, now, base_offset=base, leader_epoch=epoch)
        return dictappend.encode_plain(items, rows, bound, now, header, codec_number, snapshot,
                                       config.level_of(config.codec))

    def _append_state(self, topic: str, partition: int) -> tuple[KafkaConfig, int, int, int]:
        """``(config, log end offset, leader epoch, now)`` of the partition an append writes, held
        or not yet created (a new partition starts at offset 0, epoch 0)."""
        part = self._part if self._part is not None else self._log_dir.partitions.get((topic, partition))
        if part is not None:
            return part.config, part.next_offset, part.append_epoch, part.clock()
        return self._log_dir.config_for(topic), 0, 0, self._log_dir.clock()

    def _partition_path(self, topic: str, partition: int) -> str:
        return self._part.path if self._part is not None else os.path.join(self.path, f"{topic}-{partition}")

    def _fits(self, data: bytes, config: KafkaConfig, topic: str, partition: int) -> bool:
        """Whether ``data``, one batch, is one the broker takes under ``config``
        (:func:`check_batch_size`)."""
        try:
            check_batch_size(len(data), config, self._partition_path(topic, partition))
        except MessageTooLargeError:
            return False
        return True

    @staticmethod
    def _runs(sizes: np.ndarray, config: KafkaConfig) -> list[np.ndarray]:
        """The positions of records of ``sizes`` (each an upper bound of its encoded size) cut into the
        batches :meth:`append_arrow` would cut them into under ``config`` (``arrowappend.batch_limit``)."""
        from . import arrowappend

        limit = arrowappend.batch_limit(config.max_message_bytes, config.segment_bytes,
                                        config.codec != "none")
        return list(arrowappend.cuts(np.arange(len(sizes)), sizes, None, limit))

    def _encoded_messages(self, topic: str, partition: int, config: KafkaConfig, msgs: list[Message],
                          base: int, epoch: int, now: int) -> list[tuple[np.ndarray, bytes]]:
        """``msgs`` (checked: :meth:`checked_messages`) encoded as the batches an append writes at ``base``:
        one, or, where it is too large, cut as :meth:`_runs` cuts; each with the positions of its
        messages.

        :raises MessageTooLargeError: a message too large for a batch alone.
        """
        def encode(run: np.ndarray, base: int) -> bytes:
            return encode_records(config, [(m.key, m.value, _stamp(m.timestamp, now), m.headers)
                                           for m in (msgs[i] for i in run.tolist())],
                                  base_offset=base, leader_epoch=epoch, now=now)

        everything = np.arange(len(msgs))
        whole = encode(everything, base)
        if self._fits(whole, config, topic, partition):
            return [(everything, whole)]
        out = []
        for run in self._runs(np.array([_message_bound(m) for m in msgs], np.int64), config):
            data = encode(run, base)
            check_batch_size(len(data), config, self._partition_path(topic, partition))
            out.append((run, data))
            base += len(run)
        return out

    def append_arrow(self, batch: pa.RecordBatch | pa.Table) -> int:
        """Append the rows of a ``pyarrow.RecordBatch`` or ``Table`` of :data:`KAFKA_SCHEMA`'s columns
        (see :mod:`.arrowappend` for which are used), in order; returns the rows appended.

        Each input batch's rows become, per partition in first-seen order, batches of at most
        about 1 MiB of records (fewer where ``max.message.bytes`` is smaller; a new batch also
        where ``baseOffset`` changes, so a scan piped in keeps its batches), each encoded in one C
        call and appended at the log end offset: what :meth:`append_batch` writes for the same rows
        when they fit one batch.  Besides the input's own columns and a few int64 per row of one
        of its batches (of up to ``arrowappend.KEPT_PLAN_ROWS`` rows for a table of
        several), memory is bounded by the batch size, whatever the input's.

        Every column, topic and partition of all the rows is checked before anything is written: a
        refused call writes nothing and creates no partition.  ``O(bytes)``, no per-row Python.
        Rows naming no partition (no ``partition`` column, or a null in it) go to partition 0, or,
        keyed rows of a topic of more than one partition, to their key's, as :meth:`append_batch`
        routes dicts naming none (or a None partition).

        :raises InvalidMessageError: not a RecordBatch or Table, a column missing or of the wrong type,
            a null topic, a null header key, a control record.
        :raises InvalidTopicError: a topic or partition Kafka refuses, or another partition than this
            partition directory's.
        :raises MessageTooLargeError: a record too large for a batch alone (nothing is written).
        :raises NotFoundError: a key chose a partition this store does not hold.
        """
        import pyarrow as pa

        from . import arrowappend

        self._check_writable()
        if not isinstance(batch, (pa.Table, pa.RecordBatch)):
            raise InvalidMessageError(f"expected a pyarrow RecordBatch or Table of the segstore.columns "
                                      f"schema, found {type(batch).__name__}", self.path)
        batches = [b for b in (batch.to_batches() if isinstance(batch, pa.Table) else [batch]) if b.num_rows]
        # every batch is planned (and so checked) before anything is written; the plans of the
        # first KEPT_PLAN_ROWS rows are kept for the write, the later batches planned again as
        # they are written: memory stays bounded, and a table of a few batches is planned once
        # (planning twice was a sixth of a Spark write's commit)
        kept: list[arrowappend.Plan | None] = []
        budget = arrowappend.KEPT_PLAN_ROWS
        # taken once: a batch planned again routes its keys as it was checked
        widths = self.partition_widths()
        for b in batches:
            plan = self._checked_plan(b, widths)
            self._check_lone_rows(plan)
            self._check_plan_times(plan)
            keep = b.num_rows <= budget
            kept.append(plan if keep else None)
            budget -= b.num_rows if keep else 0
        appended = 0
        for i, b in enumerate(batches):
            kept_plan, kept[i] = kept[i], None      # a kept plan goes once its batch is written
            plan = kept_plan if kept_plan is not None else arrowappend.plan(b, widths)
            columns: arrowencode.Columns | None = None
            for topic, partition, rows in plan.groups:
                part = self.partition_of(topic, partition, create=True)
                now = part.clock()
                if columns is None:
                    columns = plan.columns(now)
                limit = arrowappend.batch_limit(part.config.max_message_bytes, part.config.segment_bytes,
                                                part.config.codec != "none")
                for run in arrowappend.cuts(rows, plan.sizes, plan.batch_ids, limit):
                    part.append_columns(columns, run, now, check_times=False)   # _check_plan_times
                    appended += len(run)
                part.apply_retention()
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return appended

    def _check_timestamps(self, topic: str, partition: int, config: KafkaConfig, now: int,
                          datas: list[bytes]) -> None:
        """Refuse a batch of ``datas`` (encoded for ``topic``-``partition`` under ``config`` at ``now``)
        with a record time the topic's ``message.timestamp.before/after.max.ms`` refuse
        (:func:`.partition.check_timestamps`), or, on a compacted topic, a record without a key
        (:func:`.partition.check_keys`, as ``LogValidator.validateRecord`` checks both: one decode of each
        batch's records, :func:`.partition.check_records`); called before anything is written, so the
        append is all or none.

        :raises InvalidMessageError: naming the record.
        """
        if config.checks_timestamps or config.compact:
            path = self._partition_path(topic, partition)
            for data in datas:
                check_records(codec.read_batch_header(data, 0, path=path), config, now, path)

    def _check_plan_times(self, plan: Any) -> None:
        """Refuse, before anything is written, a row of ``plan`` whose time the topic's
        ``message.timestamp.before/after.max.ms`` refuse (:func:`check_timestamps`; a row without a time
        is stamped now, in range), or, on a compacted topic, a row without a key (:func:`check_keys`).
        Batch by batch as they will be written (``arrowappend.cuts``) where both apply: 3.8
        ``LogValidator.validateRecord`` checks a record's time only where it has a key, and
        ``processRecordErrors`` reports a batch's time error before its missing keys.
        ``O(rows)`` numpy where a topic sets a bound or compacts, nothing elsewhere.

        :raises InvalidMessageError: naming the row's time and the range, or the row without a key.
        """
        from . import arrowappend

        for topic, partition, rows in plan.groups:
            config, _, _, now = self._append_state(topic, partition)
            if not (config.compact or config.checks_timestamps):
                continue
            runs: Iterable[np.ndarray] = [rows]
            if config.compact and config.checks_timestamps:      # each batch's own precedence
                limit = arrowappend.batch_limit(config.max_message_bytes, config.segment_bytes,
                                                config.codec != "none")
                runs = arrowappend.cuts(rows, plan.sizes, plan.batch_ids, limit)
            keyless = np.asarray(plan.key.is_null(), bool) if config.compact else None
            for run in runs:
                nulls = run[keyless[run]] if keyless is not None else run[:0]
                if config.checks_timestamps:
                    self._refuse_plan_times(plan, run if keyless is None else run[~keyless[run]], config,
                                            now, topic, partition)
                if len(nulls):
                    raise InvalidMessageError(no_key_message(f"row {int(nulls[0])} of the batch", config),
                                              self._partition_path(topic, partition))

    def _refuse_plan_times(self, plan: Any, rows: np.ndarray, config: KafkaConfig, now: int, topic: str,
                           partition: int) -> None:
        """:meth:`_check_plan_times` of ``rows``' times."""
        stamps = plan.timestamps[rows]
        diff = np.int64(now) - stamps          # wraps as Java's long subtraction does
        bad = (stamps >= 0) & ((diff > config.timestamp_before_max_ms)
                               | (-diff > config.timestamp_after_max_ms))
        if bad.any():
            first = int(stamps[np.flatnonzero(bad)[0]])
            low, high = now - config.timestamp_before_max_ms, now + config.timestamp_after_max_ms
            raise InvalidMessageError(
                f"Timestamp {first} of a record for {topic}-{partition} is out of range. The timestamp "
                f"should be within [{max(low, -2**63)}, {min(high, 2**63 - 1)}]",
                self._partition_path(topic, partition))

    def _check_lone_rows(self, plan: Any) -> None:
        """Refuse, before anything is written, a row of ``plan`` too large for a batch alone.  Only a
        row whose size bound is over ``arrowappend.batch_limit`` can make a batch the broker refuses
        (a run of smaller rows stays under the limit, a compressed one within its slack), and such a
        row is its batch alone: it is encoded here as that batch (whose size its offset and time do not
        change) and checked.  ``O(rows)`` numpy, plus the encoding of those rows.

        :raises MessageTooLargeError: the batch of such a row is larger than ``max.message.bytes`` or
            ``segment.bytes``.
        """
        from . import arrowappend

        columns = None
        for topic, partition, rows in plan.groups:
            config = self._append_state(topic, partition)[0]
            limit = arrowappend.batch_limit(config.max_message_bytes, config.segment_bytes,
                                            config.codec != "none")
            for row in rows[plan.sizes[rows] > limit].tolist():
                if columns is None:
                    columns = plan.columns(0)
                data = encode_columns(config, columns, np.array([row], np.int64), base_offset=0,
                                      leader_epoch=0, now=0)
                check_batch_size(len(data), config, self._partition_path(topic, partition))

    def _checked_plan(self, batch: pa.RecordBatch, widths: dict[str, int]) -> Any:
        """``arrowappend.plan`` of ``batch`` whose topics and partitions (those keys chose too) this
        store takes.

        :raises InvalidTopicError: see :meth:`append_arrow`.
        :raises NotFoundError: a key chose a partition this store does not hold.
        """
        from . import arrowappend

        plan = arrowappend.plan(batch, widths)
        for (topic, partition), row in plan.routed.items():
            self._check_routed(topic, partition, plan.key[row].as_py())
        self._check_partitions([(topic, partition) for topic, partition, _ in plan.groups])
        return plan

    def check_arrow_destinations(self, table: pa.Table) -> None:
        """Raise what :meth:`append_arrow` of ``table`` would raise for its topics and partitions (a
        keyed row naming none routed as it routes it), writing nothing: the columns ``topic``,
        ``value`` and ``key`` are enough (the Spark writer checks every staged file first).

        :raises InvalidMessageError: see :meth:`append_arrow`.
        :raises NotFoundError: a key chose a partition this store does not hold.
        """
        self._check_writable()
        widths = self.partition_widths()
        for batch in table.to_batches():
            if batch.num_rows:
                self._checked_plan(batch, widths)

    def batch_records_limit(self, topic: str) -> int:
        """The records bytes (uncompressed, upper bound) one batch of ``topic`` may hold here, as
        :meth:`append_arrow` cuts its batches (``arrowappend.batch_limit``: about 1 MiB, less where
        ``max.message.bytes`` or ``segment.bytes`` is smaller): what a writer of several records a call
        keeps each call's batch under."""
        from . import arrowappend

        config = self._part.config if self._part is not None else self._log_dir.config_for(topic)
        return arrowappend.batch_limit(config.max_message_bytes, config.segment_bytes, config.codec != "none")

    def check_destinations(self, destinations: Iterable[tuple[str, int]]) -> None:
        """:meth:`Store.check_destinations`: the topics and partitions Kafka refuses, or another partition
        than this partition directory's (what :meth:`append_batch` checks first)."""
        self._check_writable()
        self._check_partitions(destinations)

    def _cluster_topics(self) -> Iterable[str]:
        """The topics the metadata log names (none without one): a new topic must not collide with them."""
        return self.metadata.topics.keys() if self.metadata is not None else ()

    def _check_partitions(self, keys: Iterable[tuple[str, int]]) -> None:
        """:raises InvalidTopicError: a topic or partition Kafka refuses, or another partition than
        this partition directory's.
        :raises ConfigError: a topic whose config in the files the broker appends nothing with
        (:meth:`.topicconfig.TopicConfigs.unwritable`)."""
        known = self._cluster_topics()
        for topic, partition in keys:
            refused = self.topic_configs.unwritable(topic)
            if refused is not None:
                raise ConfigError(refused, self._partition_path(topic, partition))
            if self._part is not None:
                self.partition_of(topic, partition, create=True)    # another partition: InvalidTopicError
            else:
                self._log_dir.check_new_partition(topic, partition, known)
                self._check_assigned(topic, partition)

    def _append_messages(self, items: list[Message | dict]) -> list[AppendResult]:
        """:meth:`append_batch` of items that are not all plain dicts."""
        msgs, groups = self.checked_messages(items)
        batches = []
        for (topic, partition), indices in groups.items():
            config, base, epoch, now = self._append_state(topic, partition)
            group = [msgs[i] for i in indices]
            batches.append((topic, partition, indices, config, now,
                            self._encoded_messages(topic, partition, config, group, base, epoch, now)))
        for topic, partition, _, config, now, runs in batches:
            self._check_timestamps(topic, partition, config, now, [data for _, data in runs])
        results: list[AppendResult | None] = [None] * len(msgs)
        for topic, partition, indices, _, now, runs in batches:
            part = self.partition_of(topic, partition, create=True)
            for run, data in runs:
                done = part.append_encoded(data, now_ms=now, check_times=False)   # checked above
                extra = {"segment": done.segment}
                for n, k in enumerate(run.tolist()):
                    results[indices[k]] = AppendResult(topic, partition, done.base_offset + n, done.position,
                                                       done.size, extra)
            part.apply_retention()
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return [r for r in results if r is not None]

    def checked_messages(self, items: list[Message | dict]) -> tuple[list[Message],
                                                                     dict[tuple[str, int], list[int]]]:
        """The messages an append of ``items`` writes (``Message.coerce`` of each, a keyed one naming no
        partition routed to its key's) and their indices by ``(topic, partition)`` in first-seen order,
        every field, topic and partition checked: an append that raises here writes nothing and creates
        no partition.  ``O(items)``.

        :raises InvalidMessageError: a field Kafka cannot encode.
        :raises InvalidTopicError: a topic or partition Kafka refuses, or another partition than this
            partition directory's.
        :raises NotFoundError: a key chose a partition this store does not hold.
        """
        try:
            msgs = [Message.coerce(m) for m in items]
        except UnicodeEncodeError as err:   # a str key or value with a lone surrogate
            # said in Python's words ("'utf-8' codec can't encode character '\ud800' in position 1:
            # surrogates not allowed"), the whole value (70,000 characters) not cut
            raise InvalidMessageError(f"expected text UTF-8 can encode, found {cut(err.object)} (a lone "
                                      f"surrogate at character {err.start})") from err
        # a partition of None names none, as ProducerRecord's null partition leaves it to the partitioner
        # (it was "expected an integer partition, found 'None'"; RocketMQ's appends take it as queue 0)
        unnamed = [m.partition is None for m in msgs]
        if any(unnamed):    # the caller's own Message keeps its None: routed here, not for its next append
            msgs = [dataclasses.replace(m) if none and m is item else m
                    for m, item, none in zip(msgs, items, unnamed, strict=True)]
        for m in msgs:
            m.partition = 0 if m.partition is None else _partition_number(m.partition)
            if m.timestamp is not None:
                m.timestamp = _timestamp_number(m.timestamp)
        self._route_keyed(items, msgs, unnamed)
        groups: dict[tuple[str, int], list[int]] = {}
        for i, m in enumerate(msgs):
            if not isinstance(m.topic, str):    # a list or dict topic is no key: refused before grouping
                validate_topic(m.topic, m.partition)
            groups.setdefault((m.topic, m.partition), []).append(i)
        self._check_partitions(groups)
        # the records' fields too (Message.coerce takes any value): a refused call creates nothing
        codec.check_records([(m.key, m.value, _stamp(m.timestamp, 0), m.headers) for m in msgs])
        return msgs, groups

    def append_encoded(self, topic: str, partition: int, data: bytes, *, new_segment: bool = False,
                       segment_base: int | None = None, log_start: int | None = None) -> None:
        """Append one encoded RecordBatch that keeps the offsets it carries (a restored ``dump --json``
        batch, :mod:`.jsonl`), creating the partition if needed: at or after the log end offset, as a
        follower appends (``Partition.append_encoded`` with ``keep_offsets``); ``new_segment`` rolls first,
        to a segment named ``segment_base`` where given; ``log_start`` is the log start of a partition
        that held no record before (``Partition.append_encoded``).

        :raises OffsetOutOfRangeError: the batch lies before the log end offset, ``segment_base`` past its
            base offset or ``log_start`` past its last offset.
        :raises InvalidTopicError: a topic or partition Kafka refuses, or another partition than this
            partition directory's.
        """
        self._check_writable()
        if self._part is None:
            self._log_dir.check_new_partition(topic, partition, self._cluster_topics())
            self._check_assigned(topic, partition)
        part = self.partition_of(topic, partition, create=True)
        before = part.log_start_offset
        part.append_encoded(data, keep_offsets=True, new_segment=new_segment, segment_base=segment_base,
                            log_start=log_start)
        if self._part is not None and part.log_start_offset > before:
            write_log_start(part)   # (a log directory writes its checkpoints on close)
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()

    def restore_extent(self, topic: str, partition: int, *, log_start: int, log_end: int,
                       leader_epochs: Iterable[EpochEntry] | None = None,
                       high_watermark: int | None = None) -> None:
        """Make a partition span its source's offsets where the records restored into it do not (a
        ``dump --json`` partition line, :mod:`.jsonl`), creating it if needed: an empty one starts at
        ``log_start`` (``Partition.start_at``: one empty segment named from it, as Kafka 3.8
        ``UnifiedLog.deleteSegments`` leaves a log whose every segment retention deleted, and
        ``LogLoader`` loads an empty segment), never before its own log end; then a log that ends before
        ``log_end`` ends there (``Partition.end_at``: an empty last segment named from it, as the broker's
        log is whose records at the end the cleaner removed, or DeleteRecords moved the log start past).
        ``leader_epochs`` (the source's, as ``LogLoader`` loaded them) are assigned onto the partition's
        in turn (``LeaderEpochCache.merge``): a copy whose first batch of an epoch the cleaner removed
        starts that epoch where its source does.  ``high_watermark`` (from the log start to the log
        end) is checkpointed as the partition's (``replication-offset-checkpoint``; for a partition
        directory, in its parent, as ``write_log_start`` does), so consumers of the copy read up to where
        the source's do (Kafka 3.8 ``UnifiedLog.read``, ``FetchIsolation.HIGH_WATERMARK``).

        :raises OffsetOutOfRangeError: ``log_end`` below the partition's log end offset, or below
            ``log_start``; ``high_watermark`` outside them.
        :raises InvalidTopicError: as :meth:`append_encoded`.
        """
        self._check_writable()
        if not 0 <= log_start <= log_end:
            raise OffsetOutOfRangeError(f"expected a log start offset from 0 to the log end offset "
                                        f"{log_end}, found {log_start}", self.path)
        if high_watermark is not None and not log_start <= high_watermark <= log_end:
            raise OffsetOutOfRangeError(f"expected a high watermark from the log start offset {log_start} to "
                                        f"the log end offset {log_end}, found {high_watermark}", self.path)
        if self._part is None:
            self._log_dir.check_new_partition(topic, partition, self._cluster_topics())
            self._check_assigned(topic, partition)
        part = self.partition_of(topic, partition, create=True)
        if log_end < part.next_offset:
            raise OffsetOutOfRangeError(f"expected a log end offset at or past {part.next_offset} (the log "
                                        f"end offset of {topic}-{partition}), found {log_end}", part.path)
        if log_start > part.next_offset and not any(seg.size for seg in part.segments):
            part.start_at(log_start)
        part.end_at(log_end)
        if leader_epochs is not None:
            part.epochs.merge(leader_epochs)
        if high_watermark is not None:
            if self._part is not None:
                # (none written where none is and the log end is the high watermark: the parent may be
                # any directory)
                if (high_watermark != part.next_offset
                        or checkpointed(part, REPLICATION_OFFSET_CHECKPOINT) is not None):
                    write_checkpoint_entry(part, REPLICATION_OFFSET_CHECKPOINT, high_watermark)
            else:
                self._log_dir.set_high_watermark((topic, partition), high_watermark)

    # -- reading ------------------------------------------------------------------
    def _records(self, part: Partition, start: int | None,
                 isolation: str = READ_UNCOMMITTED) -> Iterator[KafkaRecord]:
        record_type = _record_module().KafkaRecord
        batches = part.batches(start)
        if check_isolation(isolation) == READ_COMMITTED:
            batches = _committed(part, batches, part.log_start_offset if start is None else start)
        for batch in batches:
            # an iterator read on after close(): a closed partition's segments are gone (the walk
            # would end early, silently) or read as closed files; say the store is closed, as
            # RocketMQ's reads do.  Once a batch, not per record.
            self._check_open()
            seg = part.log.segment_for(batch.base_offset)     # the segment the batch was read from
            named = batch.base_offset if seg is None else seg.base
            for record in batch.records():
                if start is None or record.offset >= start:
                    yield record_type(part.topic, part.partition, batch, record, part.log_start_offset, named)
        self._check_open()      # the walk ended: because the log did, not because close() emptied it

    def scan(self, *, isolation: str = READ_UNCOMMITTED, decompress: bool = False) -> Iterator[KafkaRecord]:
        """Every record of every partition from its log start (what a consumer can fetch: the
        records of a batch below it stay in the file, ``dump FILE`` shows them).  ``isolation``
        and ``decompress`` as in :meth:`read`."""
        self._check_open()
        check_decompress(decompress, self.path)
        for part in self._partitions().values():
            yield from self._records(part, _trimmed_start(part), isolation)

    def read(self, topic: str, partition: int, offset: int = 0, count: int | None = None, *,
             isolation: str = READ_UNCOMMITTED, decompress: bool = False) -> Iterator[KafkaRecord]:
        """Records of one partition from ``offset`` on (at most ``count``).

        ``isolation`` is the consumer's ``isolation.level``: ``"read_uncommitted"``
        (default) yields every stored record, transaction markers included;
        ``"read_committed"`` yields what a read_committed consumer is given: no
        records of aborted transactions (found through the ``.txnindex`` files), no
        control records, and nothing from the last stable offset on (the first offset
        of a transaction open at the high watermark, at least the log start, else the high
        watermark, from the producer state the log implies as ``ProducerStateManager`` loads it:
        :func:`.transactions.last_stable_offset`).

        ``decompress`` is RocketMQ's option (its bodies are stored as their producer compressed
        them), taken here so that code written for either format reads both; it changes nothing:
        a Kafka producer compresses whole batches, never one record's value, and records always
        come decompressed, as consumers read them.

        :raises ConfigError: an unknown isolation level, a ``decompress`` not True or False.
        """
        self._check_open()
        self._check_topic(topic)
        self._check_read(partition, offset, count)
        check_decompress(decompress, self.path)
        part = self.partition_of(topic, partition)
        if count is not None and count <= 0:
            return
        for n, record in enumerate(self._records(part, max(offset, part.log_start_offset), isolation), 1):
            yield record
            if count is not None and n >= count:
                return   # before the next record is decoded: damage past the count is not this read's

    @reads_while_open
    def scan_arrow(self, columns: Iterable[str] | None = None, *, topic: str | None = None,
                   partition: int | None = None, offset: int = 0, start: int | None = None,
                   end: int | None = None, isolation: str = READ_UNCOMMITTED,
                   batch_rows: int | None = None, threads: int | None = None, decompress: bool = False
                   ) -> Iterator[pa.RecordBatch]:
        """Record batches of :data:`segstore.columns.KAFKA_SCHEMA` (or its ``columns`` projection).

        Partitions (those of ``topic`` and/or ``partition`` when given) in (topic,
        partition) order, each in log order from ``offset`` (at least its log start;
        the start found through the offset index).  ``start``/``end`` select the
        batches whose file position lies in ``[start, end)`` of the segment holding
        ``offset`` (its first segment by default).  Control records are kept
        (``isControl``).  A batch holds at most one chunk of one segment
        (:class:`columnar.Capacity`), so memory does not grow with the log; ``batch_rows``
        sets the chunks' rows (about that many at most; below the default's 16,384 the data
        buffers shrink in proportion, above it they stay the default's, so only chunks of
        small records grow; a single Kafka batch with more records still comes whole).
        ``O(bytes read)``, decoded in C where built.  ``isolation`` as in
        :meth:`read`: ``"read_committed"`` drops control records and the records
        of aborted transactions (:func:`_committed_rows`); a batch may then be empty.

        ``threads`` (default: see segstore.overlap.thread_count) decodes the segments, cut into byte
        ranges at offset-index positions, on that many threads (:meth:`_parallel_chunks`; not with
        ``start``/``end`` nor for a remote log): the same rows in the same order and the same error
        at the same place as one thread, batches cut where the ranges are.  ``decompress`` as in
        :meth:`read` (the ``value`` column is always the records' values as consumers read them).

        :raises NotFoundError: ``topic`` and ``partition`` name no partition.
        :raises CorruptDataError: a bad batch (after the rows before it).
        :raises ConfigError: an unknown isolation level, ``batch_rows`` or ``threads`` below 1, a
            ``decompress`` not True or False.
        """
        from segstore.columns import KAFKA_SCHEMA

        self._check_open()
        self._check_topic(topic, any_topic=True)
        self._check_read(partition, offset, any_partition=True)
        self._check_positions(start, end)
        check_decompress(decompress, self.path)
        threads = thread_count(threads)
        check_batch_rows(batch_rows)
        schema = project(KAFKA_SCHEMA, columns)
        committed = check_isolation(isolation) == READ_COMMITTED
        built = schema
        if committed:   # the columns that decide what a read_committed consumer sees
            missing = [name for name in _TXN_COLUMNS if name not in schema.names]
            built = project(KAFKA_SCHEMA, [*schema.names, *missing])
        want = columnar.want_flags(built.names)
        if topic is not None and partition is not None:
            parts = {(topic, partition): self.partition_of(topic, partition)}
        else:
            parts = {key: part for key, part in self._partitions().items()
                     if (topic is None or key[0] == topic) and (partition is None or key[1] == partition)}
        ranged = start is not None or end is not None
        capacity = None if batch_rows is None else columnar.Capacity.for_rows(batch_rows)
        parallel = threads > 1 and not ranged and not any(seg.log.remote for part in parts.values()
                                                          for seg in part.segments)
        made: dict[int, tuple[columnar.Chunk, Any]] = {}
        if parallel:
            def build(t: str, p: int, seg: Any, chunk: columnar.Chunk) -> pa.RecordBatch:
                return columnar.to_arrow(chunk, built, topic=t, partition=p, segment=seg.base)

            starts = [max(offset, part.log_start_offset) or None for part in parts.values()]
            streams = self._parallel_chunks(parts, starts, want, capacity, threads, build, made)
        for (t, p), part in parts.items():
            target = max(offset, part.log_start_offset)
            dropping = not ranged and target > 0
            if parallel:
                chunks = part.in_order(next(streams), want)
            else:
                chunks = part.column_chunks(want, offset=offset if ranged else (target if dropping else None),
                                            start=start, end=end, capacity=capacity)
            lso = _last_stable_offset(part) if committed else part.next_offset
            aborted = part.aborted_transactions(target, lso) if committed else []
            for seg, chunk in chunks:
                first = 0
                if dropping:  # rows of the first batch below the offset asked for
                    first = search(chunk.buffers["offset"][:chunk.rows], target, Bound.SMALLEST_UPPER)
                    dropping = first == chunk.rows
                if first < chunk.rows:
                    chunk_made, batch = made.pop(id(chunk), (None, None))
                    if chunk_made is not chunk or batch is None:     # a chunk decoded again by in_order
                        batch = columnar.to_arrow(chunk, built, topic=t, partition=p, segment=seg.base)
                    batch = batch.slice(first)
                    if committed:
                        batch = _committed_rows(batch, aborted, lso).select(schema.names)
                    yield batch

    def _split_ranges(self, parts: dict[tuple[str, int], Partition], starts: list[int | None]
                      ) -> Iterator[_Range]:
        """The byte ranges of :meth:`_parallel_chunks`, partition by partition in ``parts`` order, each
        partition's in log order from the batch holding its start offset (None: every segment
        whole), as ``Partition.column_chunks(offset=...)`` reads them (:class:`_Range`)."""
        for number, (part, target) in enumerate(zip(parts.values(), starts, strict=True)):
            first, position = (part.segments[0], 0) if part.segments else (None, 0)
            if target is not None:
                found = part.translate_offset(target)
                first, position = (found[0], found[1].position) if found is not None else (None, 0)
            if first is None:
                continue
            for seg in part.segments:
                if seg.base < first.base:
                    continue
                lo = position if seg is first else 0
                cuts = split_points(seg, lo)
                for a, b in zip([lo, *cuts], [*cuts, seg.log.size], strict=True):
                    yield _Range(number, seg, a, b, a == lo)

    def _parallel_chunks(self, parts: dict[tuple[str, int], Partition], starts: list[int | None],
                         want: int, capacity: columnar.Capacity | None, threads: int,
                         make: Callable[[str, int, Any, columnar.Chunk], Any],
                         made: dict[int, tuple[columnar.Chunk, Any]], walk_ahead: bool = False
                         ) -> Generator[Iterator[tuple[Any, columnar.Chunk]], None, None]:
        """Per partition of ``parts`` (in order; the next asked for once the one before is read
        through), its ``(segment, chunk)`` pairs from the batch holding its start offset
        (``starts``, see :meth:`_split_ranges`), as ``Partition.column_chunks`` gives them, decoded
        on ``threads`` threads; ``make(topic, partition, segment, chunk)`` runs on the decoding
        thread (it must be thread-safe) and what it made is in ``made`` (``id(chunk)``: the chunk
        and it).

        The segments are cut at offset-index positions (a batch starts there when the index is
        right); a range is taken only where the range before it ended (its last batch's end),
        else decoded again from there, so the chunks, and a decode error raised after the chunks
        before it, are those of one thread.  Memory: ``PER_ROUND * threads`` ranges of about
        :data:`SPLIT_BYTES` and their batches at a time (:func:`segstore.overlap.in_rounds`).
        ``walk_ahead``: the ranges are decoded on ``threads`` threads of their own, up to
        :data:`DUMP_AHEAD` ranges a thread past the one handed out, also while this generator is suspended
        (:func:`segstore.overlap.ahead`), for a caller that reads it within one call of its own and
        closes it (or reads it to its end) before the store can change; closing it (this generator,
        not a partition's) waits for the ranges being decoded.
        """
        keys = list(parts)

        def decode(task: _Range, at: int | None = None
                   ) -> tuple[int, int, list[tuple[columnar.Chunk, Any]], BaseException | None]:
            seg = task.segment
            at = task.begin if at is None else at
            reach, out = at, []
            topic, partition = keys[task.partition]
            try:
                for chunk in seg.column_chunks(want, at, task.end, capacity or columnar.Capacity.for_bytes(
                        task.end - at)):
                    batches = chunk.batches
                    reach = int(batches["position"][-1]) + int(batches["size"][-1])
                    out.append((chunk, make(topic, partition, seg, chunk)))
            except SegstoreError as err:
                return at, reach, out, err
            return at, reach, out, None

        ranges = self._split_ranges(parts, starts)
        results = (ahead(ranges, decode, threads, DUMP_AHEAD * threads) if walk_ahead
                   else in_rounds(ranges, decode, threads, PER_ROUND * threads))
        pending: list[Any] = []       # a result of the next partition, read ahead

        def partition_chunks(number: int) -> Iterator[tuple[Any, columnar.Chunk]]:
            segment, expected = None, 0
            while True:
                if pending:
                    task, result, error = pending.pop()
                else:
                    try:
                        task, result, error = next(results)
                    except StopIteration:
                        return
                if task.partition != number:
                    pending.append((task, result, error))
                    return
                if error is not None:
                    raise error
                at, reach, out, failure = result
                if task.segment is not segment or task.first:
                    segment, expected = task.segment, task.begin
                if at != expected:      # an index position the range before did not end at
                    if expected >= task.end:
                        continue        # the range before decoded past this whole range
                    at, reach, out, failure = decode(task, expected)
                for chunk, batch in out:
                    made[id(chunk)] = (chunk, batch)
                    yield task.segment, chunk
                if failure is not None:
                    raise failure
                expected = reach

        try:
            for number in range(len(keys)):
                yield partition_chunks(number)
        finally:
            results.close()     # a walk ahead's threads stop before the caller goes on

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self._partitions()})

    def partitions(self, topic: str) -> list[int]:
        self._check_topic(topic)
        return sorted(p for t, p in self._partitions() if t == topic)

    def offset_range(self, topic: str, partition: int) -> tuple[int, int]:
        self._check_topic(topic)
        self._check_partition(partition)
        part = self.partition_of(topic, partition)
        return part.log_start_offset, part.next_offset

    def tail_error(self, topic: str, partition: int) -> CorruptDataError | None:
        """:meth:`Store.tail_error`: the active segment's bytes after its last whole batch, walked from the
        offset index's last entry.  ``O(batches after it)``."""
        self._check_open()
        self._check_partition(partition)
        return self.partition_of(topic, partition).check_open_error()

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark (``replication-offset-checkpoint``, clamped to the log, else
        its end): what a read_uncommitted consumer reads up to (Kafka 3.8.0 ``UnifiedLog.read``,
        ``FetchIsolation.HIGH_WATERMARK``), below the log end by what followers had not copied.
        ``O(1)``: a stat of the checkpoint, parsed once a version."""
        self._check_open()
        self._check_partition(partition)
        return high_watermark(self.partition_of(topic, partition))

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The partition's last stable offset (``UnifiedLog.lastStableOffset``): the first offset of a
        transaction open at the high watermark (at least the log start), else the high watermark
        (:func:`.transactions.last_stable_offset`); what a ``read_committed`` consumer reads up to.
        ``O(segments)`` once known, ``O(batch headers)`` the first time."""
        self._check_open()
        self._check_partition(partition)
        return _last_stable_offset(self.partition_of(topic, partition))

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """:meth:`Store.offset_for_time` by the ``.timeindex`` (``ListOffsets``): the first offset whose
        record timestamp is at or after ``timestamp``; ``O(log n)`` index reads and one segment hop.

        :raises ConfigError: a negative ``timestamp``: ``Partition.offset_for_time`` (Kafka 3.8.0
            ``UnifiedLog.fetchOffsetByTimestamp``) would read -1 to -4 as the ListOffsets codes
            latest, earliest, max-timestamp and earliest local, and any other negative as a time before
            every record; ``segstore query --timestamp earliest|latest|max-timestamp|-4`` reaches those
            through :meth:`query` (``QueryRequest.timestamp``), not here.
        :raises NotFoundError: the store holds no such partition.
        """
        found = self._time_lookup_partition(topic, partition, timestamp).offset_for_time(timestamp)
        return None if found is None else found.offset

    def first_offset_from_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first offset whose record timestamp is at or after ``timestamp`` (None: none), every
        segment searched (``Partition.first_offset_from_time``): where a filter on the record time may
        start a read.  :meth:`offset_for_time` answers as the broker does, which may be none where a
        segment without record times (v0 messages, no ``.timeindex``) comes first.

        :raises ConfigError: as :meth:`offset_for_time`.
        :raises NotFoundError: the store holds no such partition.
        """
        found = self._time_lookup_partition(topic, partition, timestamp).first_offset_from_time(timestamp)
        return None if found is None else found.offset

    def _time_lookup_partition(self, topic: str, partition: int, timestamp: int) -> Partition:
        """The partition a time lookup searches, its arguments checked (the errors of
        :meth:`offset_for_time`)."""
        self._check_topic(topic)
        self._check_partition(partition)
        self._check_time("lookup", timestamp, required=True)
        if (topic, partition) not in self._partitions():
            raise NotFoundError(f"expected a partition {topic}-{partition}, found none", self.path)
        return self.partition_of(topic, partition)

    # -- segstore.logview.LogView (what the core's generic index layouts use) ----------------
    #: time lookups go by the record timestamp, as the .timeindex and ListOffsets
    time_column = "timestamp"
    #: transaction markers are records but carry no data: never indexed by key
    control_column: str | None = "isControl"

    def record_at(self, topic: str, partition: int, offset: int, position: int) -> KafkaRecord | None:
        """The record at or after ``offset``, decoding the batch at file ``position`` of the segment
        holding ``offset``: one batch decode.  An offset past that batch (a gap compaction left at
        a segment's end) is read through the offset index instead."""
        record_type = _record_module().KafkaRecord
        self._check_open()
        part = self.partition_of(topic, partition)
        seg = part.log.segment_for(offset)
        if seg is not None:
            batch = next(seg.batches(position), None)
            if batch is not None and batch.base_offset <= offset <= batch.last_offset:
                for record in batch.records():
                    if record.offset >= offset:
                        return record_type(part.topic, part.partition, batch, record, part.log_start_offset,
                                           seg.base)
        return next(self.read(topic, partition, offset, 1), None)

    def positions(self, topic: str, partition: int, offset: int = 0) -> Iterator[Positions]:
        """:func:`~segstore.logview.scan_positions`: Kafka keeps no per-record index (the ``.index``
        is sparse), so the batches are decoded."""
        return scan_positions(self, topic, partition, offset)

    def position_bases(self, topic: str, partition: int, positions: np.ndarray) -> np.ndarray:
        """Zeros: ``position`` is a file position in its segment already."""
        return np.zeros(len(positions), dtype=np.int64)

    def index_home(self, topic: str, partition: int) -> tuple[str, str]:
        """Extra indexes under ``PARTITION/.segstore/LAYOUT`` (``LogLoader`` lists regular files only)."""
        return self.partition_of(topic, partition).path, ""

    def index_homes(self) -> list[str]:
        """Every partition directory (each keeps its own extra indexes)."""
        return sorted(part.path for part in self._partitions().values())

    def segment_infos(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """Per segment ``{start_offset, end_offset, bytes, path}`` (end exclusive), for planners."""
        self._check_partition(partition)
        part = self.partition_of(topic, partition)
        segs = part.segments
        out = []
        for i, seg in enumerate(segs):
            end = segs[i + 1].base if i + 1 < len(segs) else part.next_offset
            out.append({"start_offset": seg.base, "end_offset": end, "bytes": seg.size, "path": seg.path})
        return out

    def to_json(self, record: KafkaRecord) -> dict[str, Any]:
        if _record is None:
            _record_module()
        self._check_record(record, KafkaRecord)
        return {"topic": record.topic, "partition": record.partition,
                "log_start_offset": record.log_start_offset, "offset": record.offset,
                "timestamp": record.timestamp, "timestamp_type": record.batch.timestamp_type,
                "key": _b64(record.key), "value": _b64(record.value),
                "headers": [columnar.header_json(k, v) for k, v in record.headers],
                "batch": batch_json(record.batch, record.segment_base_offset)}

    def json_line(self, record: KafkaRecord) -> str:
        """``json.dumps(self.to_json(record))``: ASCII, header keys escaped (``\\u00fc``), as
        :meth:`dump_json` writes every line."""
        return jsonlib.dumps(self.to_json(record))

    # -- tooling ------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Partitions (offsets, the high watermark consumers read up to, segments, sizes, leader epochs,
        the ``partition.metadata`` topic id); for a
        log directory with ``meta.properties`` or a metadata log also ``cluster`` (cluster id, node id,
        ``metadata.version``, brokers, records replayed) and ``topics`` (each topic's id, partition
        count and non-default configs, as the metadata log says)."""
        self._check_open()
        parts: list[dict[str, Any]] = []
        by_id = {t.topic_id: t for t in self.metadata.topics.values()} if self.metadata is not None else {}
        for (topic, partition), part in self._partitions().items():
            topic_id = self._topic_id_file(part)[0]
            parts.append({"topic": topic, "partition": partition, "topic_id": topic_id,
                          "start_offset": part.log_start_offset, "end_offset": part.next_offset,
                          "high_watermark": high_watermark(part),
                          "segments": len(part.segments), "bytes": sum(s.size for s in part.segments),
                          "max_timestamp": _max_timestamp(part),
                          "leader_epochs": [list(e) for e in part.epochs.entries],
                          "stray": self._stray(topic, partition, topic_id, by_id)})
        info: dict[str, Any] = {"format": self.format, "path": self.path,
                                "layout": "partition" if self.single else "log-dir"}
        if self.identity is not None or self.metadata is not None:
            identity = self.identity
            info["cluster"] = {"cluster_id": identity.cluster_id if identity else None,
                               "node_id": identity.node_id if identity else None,
                               **(self.metadata.summary() if self.metadata is not None else {})}
        if self.metadata is not None:
            info["topics"] = {name: {"id": t.topic_id, "partitions": len(t.partitions),
                                     "replication_factor": _replication_factor(t),
                                     "configs": self.metadata.topic_configs(name),
                                     "assignments": [_assignment(p, t.partitions[p])
                                                     for p in sorted(t.partitions)]}
                              for name, t in sorted(self.metadata.topics.items())}
        info["partitions"] = parts
        info["topic_bytes"] = bytes_by_topic(parts)     # kafka-log-dirs gives partitions only
        return info

    def _stray(self, topic: str, partition: int, topic_id: str | None,
               by_id: Mapping[str, kraft.TopicState]) -> bool | None:
        """Whether a Kafka 3.8 broker starting on this log directory would mark the partition stray and
        rename it ``-stray`` (``LogManager.isStrayKraftReplica``): no topic id in ``partition.metadata``,
        no such topic id and partition in the metadata image (``by_id``: its topics by id), or replicas
        without this node.  None where that cannot be told (no metadata log or node id) and for the
        metadata log itself."""
        if self.metadata is None or self.identity is None or topic == METADATA_TOPIC:
            return None
        if topic_id is None:
            return True
        state = by_id.get(topic_id)
        assigned = None if state is None else state.partitions.get(partition)
        return assigned is None or self.identity.node_id not in assigned.replicas

    @staticmethod
    def _topic_id_file(part: Partition) -> tuple[str | None, Problem | None]:
        """The topic id of a partition's ``partition.metadata`` (None: absent or unreadable, the problem)."""
        from .properties import read_partition_metadata

        try:
            return read_partition_metadata(part.path), None
        except SegstoreError as err:
            return None, Problem(err.path or part.path, err.pos, err.message)

    def verify(self, threads: int | None = None) -> list[Problem]:
        """Every partition's files (:meth:`Partition.verify`), then the cluster's: ``meta.properties`` and
        the metadata log read, each of its records decoded, and each ``partition.metadata`` topic id
        equal to the id the metadata log gives the topic (the broker refuses to load a partition whose
        id differs: ``UnifiedLog.assignTopicId``, ``InconsistentTopicIdException``).

        ``threads`` (default: see segstore.overlap.thread_count) decodes the logs (CRCs, records) by byte
        ranges on that many threads ahead of the checks (:class:`_DecodedAhead`); the same
        problems in the same order with any number.

        :raises ConfigError: ``threads`` below 1.
        """
        self._check_open()
        threads = thread_count(threads)
        parts = self._partitions().values()
        problems = self._dir.layout_problems() if self._dir is not None else []
        segments = [seg for part in parts for seg in part.segments]
        local = not any(seg.log.remote for seg in segments)
        decoded = _DecodedAhead(segments, threads) if threads > 1 and local else None
        try:
            with progress.task("verify", sum(s.size for s in segments)):
                problems += [problem for part in parts for problem in part.verify(decoded)]
        finally:
            if decoded is not None:
                decoded.close()
        found = [Problem(path, pos, message) for path, pos, message in problems]
        found += self._cluster_problems
        if self.metadata is not None:
            found += [Problem(self.metadata.partition_dir, None, line) for line in self.metadata.problems]
        ids = self.topic_configs.topic_ids()
        for part in parts:
            topic_id, problem = self._topic_id_file(part)
            if problem is not None:
                found.append(problem)
            expected = ids.get(part.topic)
            if topic_id is not None and expected is not None and topic_id != expected:
                found.append(Problem(os.path.join(part.path, PARTITION_METADATA), 0,
                                     f"expected topic id {expected} (the metadata log's id of {part.topic}), "
                                     f"found {topic_id}"))
        return found

    def recover(self, threads: int | None = None) -> list[str]:
        """Recover every partition (Kafka 3.8 ``LogLoader.recoverLog``), then verify them.

        Kafka leaves segments below the recovery point as they are, and what a recovery
        cannot cut (damage there, a damaged checkpoint) stays: recover says so by
        raising instead of returning as if the store were clean.  ``O(store bytes)``.

        ``threads`` (default: see segstore.overlap.thread_count) recovers that many partitions
        at once (a partition's files are its own; each is recovered on one thread, mostly in C
        releasing the GIL) and decodes the verify's logs by byte ranges as :meth:`verify` does.
        The same files, lines and error with any number; with several threads, partitions after
        one that raised may have been recovered too (a recovery is safe to repeat).

        :raises UnrepairedDataError: a partition still has problems after recovery; its
            ``actions`` are the lines of what was done, its position the first problem.
        :raises ConfigError: ``threads`` below 1.
        """
        self._check_writable()
        threads = thread_count(threads)
        points = self._dir.recovery_points if self._dir is not None else {}
        parts = self._partitions()
        total = sum(s.size for part in parts.values() for s in part.segments)
        with progress.task("recover", total):
            # each task carries a copy of this context, so its progress reaches this task's bar
            tasks = [(part, points.get(key, 0), contextvars.copy_context()) for key, part in parts.items()]
            lines: list[str] = []
            # one thread: a partition at a time, stopping at the first error, as before threads;
            # several: every partition in one round (a partition waits for no other)
            for _, result, error in in_rounds(iter(tasks), _recover_partition, threads,
                                              1 if threads == 1 else len(tasks)):
                if error is not None:
                    raise error
                lines += cast(list[str], result)
        if self._dir is not None:
            lines += self._dir.checkpoint_changes()
        segments = [seg for part in parts.values() for seg in part.segments]
        local = not any(seg.log.remote for seg in segments)
        decoded = _DecodedAhead(segments, threads) if threads > 1 and local else None
        try:
            with progress.task("verify", sum(s.size for s in segments)):
                left = [problem for part in parts.values() for problem in part.verify(decoded)]
        finally:
            if decoded is not None:
                decoded.close()
        if self._dir is not None:
            left += self._dir.log_start_problems()
        if left:
            path, pos, message = left[0]
            more = len(left) - 1
            raise UnrepairedDataError(
                f"{message}; left by recovery (below the recovery point, or in a file it does not repair)"
                + (f" ({more} more problem{'s' if more > 1 else ''}, see verify)" if more else "")
                + "; every other repair is done", path, pos, actions=lines)
        return lines

    # -- retention, DeleteRecords, compaction (retention.py, compaction.py) ------------
    def retention(self, *, dry_run: bool = False, now_ms: int | None = None, topic: str | None = None,
                  partition: int | None = None, **options: Any) -> list[dict[str, Any]]:
        """``retention.bytes``, ``retention.ms`` and the log start, as ``UnifiedLog.deleteOldSegments``."""
        from . import retention as retention_rules

        if not dry_run:
            self._check_writable()
        self._check_open()
        return retention_rules.retention(self, now_ms=now_ms, dry_run=dry_run, topic=topic,
                                         partition=partition)

    def delete_records(self, before: int, *, dry_run: bool = False, topic: str | None = None,
                       partition: int | None = None, **options: Any) -> list[dict[str, Any]]:
        """Kafka DeleteRecords: the log start moves to ``before`` (-1: the high watermark)."""
        from . import retention as retention_rules

        if not dry_run:
            self._check_writable()
        self._check_open()
        return retention_rules.delete_records_in(self, before, dry_run=dry_run, topic=topic,
                                                 partition=partition)

    def config_notes(self, topic: str | None = None) -> list[str]:
        """:meth:`Store.config_notes`: the command line's configs that override what the metadata log
        sets for a topic, the metadata log's values not applied (:mod:`.topicconfig`)."""
        self._check_open()
        topics = {t for t, _ in self._partitions() if topic is None or t == topic}
        return self.topic_configs.notes(topics)

    # -- the coordinators' logs (groups.py, txnstate.py) ------------------------------------
    def _coordinator_logs(self, topic: str, pending_key: Callable[[bytes], bool] | None,
                          damage: list[str], same_key: Callable[[bytes], bytes] | None = None
                          ) -> dict[int, CoordinatorLog]:
        """Each partition of an internal topic loaded from its log start (a read that fails part way keeps
        what came before it, and says where it stopped in ``damage``)."""
        from .coordinator import COLUMNS, CoordinatorLog

        logs: dict[int, CoordinatorLog] = {}
        for (t, p), _part in self._partitions().items():
            if t != topic:
                continue
            log = logs[p] = CoordinatorLog(pending_key, same_key)
            try:
                for batch in self.scan_arrow(COLUMNS.names, topic=t, partition=p):
                    log.add(batch)
            except SegstoreError as err:
                damage.append(f"{err} ({t}-{p} is loaded only up to there: what it holds past it is missing)")
                log.failed = err
        return logs

    def _batch_words(self, topic: str) -> Callable[[int, int], str]:
        """``where(partition, batch base offset)``: ``path:position`` of that batch of ``topic``'s partition,
        for the notes that name a record that does not read (found only then: an index search each)."""
        parts = self._partitions()

        def where(partition: int, batch_offset: int) -> str:
            part = parts.get((topic, partition))
            try:
                found = part.translate_offset(batch_offset) if part is not None else None
            except SegstoreError:
                found = None
            if found is None:
                return f"{topic}-{partition} (the batch at offset {batch_offset})"
            seg, batch = found
            return f"{seg.path}:{batch.position}"

        return where

    def consumer_groups(self, group: str | None = None, *, now_ms: int | None = None,
                        **options: Any) -> ConsumerGroups:
        """:meth:`Store.consumer_groups` from ``__consumer_offsets`` as the group coordinator loads it
        (:mod:`.groups`): offsets expired at ``now_ms`` (default: the newest record's time in the topic)
        after ``offsets_retention_ms`` (default: the ``offsets.retention.minutes`` of the
        ``server.properties`` the store was opened with, else 7 days); log end offsets are the high
        watermarks of the partitions this store holds.  ``O(records of __consumer_offsets)``, Python per
        distinct key (:mod:`.coordinator`).
        """
        from . import groups

        self._check_open()
        self._check_group_call(group, now_ms=now_ms, any_group=True)
        retention_ms = groups.retention_ms({**self._group_defaults, **options})
        notes: list[str] = []
        damage: list[str] = []
        logs = self._coordinator_logs(groups.OFFSETS_TOPIC, groups.is_offset_commit, damage,
                                      groups.same_offset_key)
        if not logs:
            notes.append(f"no {groups.OFFSETS_TOPIC} partition here: no consumer group committed offsets")
        parts = self._partitions()
        ends: dict[tuple[str, int], int | None] = {}

        def log_end(topic: str, partition: int) -> int | None:
            # once per partition: the high watermark re-reads the log dir's checkpoint file
            if (topic, partition) not in ends:
                part = parts.get((topic, partition))
                ends[topic, partition] = None if part is None else high_watermark(part)
            return ends[topic, partition]

        names = {t.topic_id: name for name, t in self.metadata.topics.items()} if self.metadata else {}
        found = groups.consumer_groups(logs, log_end=log_end, topic_names=names, now_ms=now_ms,
                                       retention_ms=retention_ms, group=group,
                                       where=self._batch_words(groups.OFFSETS_TOPIC))
        found.notes[:0] = notes
        found.damage = damage
        return found

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int], *,
                       now_ms: int | None = None, **options: Any) -> list[str]:
        """:meth:`Store.commit_offsets`: the group coordinator's commit of ``offsets`` (``{(topic,
        partition): next offset}``), one batch of ``OffsetCommit`` records (:mod:`.offsetcommit`)
        appended to the group's partition of ``__consumer_offsets``, the offsets in (topic, partition)
        order, committed at ``now_ms`` (default: the clock).  All or none: every offset is checked
        first.  The previous commits stay in the log (a reset to them is the way back).

        What the broker's offset cleanup removes of the group at ``now_ms`` (``offsets_retention_ms``
        in ``options``, default 7 days: an ``Empty`` group's offsets expire that long after it
        became empty, whatever their commit time) is tombstoned first, in a batch of its own, as the
        cleanup would at the broker's start: else it would remove the new commits with the rest.

        The group's partition is where its records are, else its id's hash modulo the topic's
        partitions (the KRaft metadata's count, else Kafka's default 50; a note says so).  The
        notes also say when the commit lasts only if this node leads that partition when the
        cluster comes back (another in-sync replica that leads has its followers truncate it away).

        :raises OffsetOutOfRangeError: a negative offset, or one outside a partition of this log
            directory's ``[log start, log end]``; nothing written.
        :raises NotFoundError: the group's partition of ``__consumer_offsets`` is not in this log
            directory (another broker's).
        :raises CorruptDataError: the group's records lie in another partition than its hash names.
        """
        from . import groups, offsetcommit

        self._check_writable()
        self._check_commit(group, offsets)
        self._check_group_call(group, now_ms=now_ms)
        retention = groups.retention_ms({**self._group_defaults, **options})
        held = self._partitions()
        for (topic, partition), offset in offsets.items():
            start, end = self.offset_range(topic, partition) if (topic, partition) in held else (0, None)
            if offset < start or (end is not None and offset > end):
                span = f"[{start}, {end}]" if end is not None else "at least 0"
                raise OffsetOutOfRangeError(f"expected an offset {span} for {topic}-{partition}, "
                                            f"found {shown_number(offset)}", self.path)
        home = self._group_home(group)
        if not offsets:
            return home.notes
        now = home.part.clock() if now_ms is None else now_ms
        tombstones = home.group.cleanup_keys(now, retention) if home.group is not None else []
        if tombstones:
            home.part.append_records([(key, None, now) for key in tombstones], compression="none", now_ms=now)
            home.notes.append(f"{home.name}: {len(tombstones)} records of group {group!r} expired at {now} "
                              f"(offsets.retention.minutes={retention // 60000}): tombstoned first, as the "
                              "broker's offset cleanup would")
        records = [(offsetcommit.commit_key(group, topic, partition), offsetcommit.commit_value(offset, now),
                    now) for (topic, partition), offset in sorted(offsets.items())]
        home.part.append_records(records, compression="none", base_sequence=0, now_ms=now)
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return home.notes

    def delete_offsets(self, group: str, topic: str | None = None, *, partitions: Iterable[int] | None = None,
                       now_ms: int | None = None, **options: Any) -> list[str]:
        """:meth:`Store.delete_offsets`: what the group coordinator writes for ``OffsetDelete`` of ``topic``
        (of its ``partitions`` where given: the tool's ``--topic T:0,1``, those the group committed)
        or ``DeleteGroups`` (None), Kafka 3.8.0 ``GroupMetadataManager.cleanupGroupMetadata``: one batch
        of tombstones in the group's partition of ``__consumer_offsets`` at ``now_ms`` (default: the
        clock), each deleted offset's commit key, then the group's key where a classic group that had a
        generation is deleted or left empty without offsets (``Dead``).  Found and noted as
        :meth:`commit_offsets`.

        :raises NotFoundError: the group holds no offset of ``topic`` (or none at all), or its partition
            of ``__consumer_offsets`` is not in this log directory.
        :raises UnsupportedOperationError: deleting a KIP-848 consumer group (its own records are not
            written here; ``topic`` deletes its offsets of one topic).
        """
        from . import groups, offsetcommit

        self._check_writable()
        self._check_group_call(group, topic, now_ms)
        numbers = self._deleted_partitions(topic, partitions)
        home = self._group_home(group)
        found = home.group
        chosen = sorted(tp for tp in (found.offsets if found is not None else {})
                        if (topic is None or tp[0] == topic) and (numbers is None or tp[1] in numbers))
        if not chosen:
            where = f" of topic {topic!r}" if topic is not None else ""
            if numbers is not None:
                where += f" partitions {sorted(numbers)}"
            raise NotFoundError(f"expected offsets of consumer group {group!r}{where} in {home.name}, "
                                "found none", self.path)
        assert found is not None
        if topic is None and found.kind != "classic":
            raise UnsupportedOperationError(
                f"expected a classic group to delete, found group {group!r} of the consumer protocol "
                "(KIP-848), whose own records segstore does not write: --topic deletes its offsets of one "
                "topic", self.path)
        keys = [offsetcommit.commit_key(group, t, p) for t, p in chosen]
        emptied = found.state == groups.EMPTY and len(chosen) == len(found.offsets)
        if found.kind == "classic" and found.generation > 0 and (topic is None or emptied):
            keys.append(offsetcommit.group_key(group))
        now = home.part.clock() if now_ms is None else now_ms
        home.part.append_records([(key, None, now) for key in keys], compression="none", now_ms=now)
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return home.notes

    def _group_home(self, group: str) -> groups.GroupHome:
        """Where ``group``'s records go: its partition of ``__consumer_offsets`` (where its records are, else
        its id's hash modulo the KRaft metadata's partition count, else Kafka's default 50, noted), the
        group as loaded there, and notes (another in-sync replica could lead the partition).

        :raises CorruptDataError: the group's records lie in another partition than its hash names, or
            that partition does not read whole (what is there would be guessed).
        :raises NotFoundError: the partition is not in this log directory (another broker's).
        """
        from . import groups, offsetcommit

        name = groups.OFFSETS_TOPIC
        notes: list[str] = []
        topic_state = self.metadata.topic(name) if self.metadata is not None else None
        count = len(topic_state.partitions) if topic_state is not None and topic_state.partitions else None
        names = {t.topic_id: n for n, t in self.metadata.topics.items()} if self.metadata else {}
        loaded_logs = self._coordinator_logs(name, groups.is_offset_commit, [], groups.same_offset_key)
        loaded = {p: groups.load_partition(log, p, groups.Notes(), names) for p, log in loaded_logs.items()}
        where = {p for p, found in loaded.items() if group in found}
        hashed = offsetcommit.coordinator_partition(group, count or groups.DEFAULT_OFFSETS_PARTITIONS)
        if count is not None and where and where != {hashed}:
            found = ", ".join(f"{name}-{p}" for p in sorted(where))
            raise CorruptDataError(f"expected group {group!r}'s records in {name}-{hashed} (its id's hash "
                                   f"modulo {count} partitions), found them in {found}", self.path)
        number = min(where) if where else hashed
        failed = loaded_logs[number].failed if number in loaded_logs else None
        if failed is not None:      # what to tombstone, and where the log ends, would be guesses
            raise CorruptDataError(f"expected {name}-{number} (group {group!r}'s partition) to read whole "
                                   f"before writing to it, found: {failed.message}", failed.path, failed.pos)
        if count is None and not where:
            notes.append(f"{name}-{number}: group {group!r}'s partition with Kafka's default of "
                         f"{groups.DEFAULT_OFFSETS_PARTITIONS} partitions (no KRaft metadata here says how "
                         "many there are)")
        part = self._partitions().get((name, number))
        if part is None:
            raise NotFoundError(f"expected {name}-{number} (group {group!r}'s partition) in this log "
                                "directory, found none: another broker holds it", self.path)
        state = topic_state.partitions.get(number) if topic_state is not None else None
        node = self.identity.node_id if self.identity is not None else None
        if state is not None and node is not None and [r for r in state.isr if r != node]:
            notes.append(f"{name}-{number} has replicas {state.replicas}, in sync {state.isr}: what is "
                         f"written here lasts only if node {node} leads it when the cluster comes back (a "
                         "follower truncates what its leader does not hold)")
        return groups.GroupHome(f"{name}-{number}", part, loaded.get(number, {}).get(group), notes)

    def transaction_states(self, transactional_id: str | None = None) -> list[dict[str, Any]]:
        """:meth:`Store.transaction_states` from ``__transaction_state`` (:mod:`.txnstate`); a record that
        does not read is named by its batch's file and position."""
        from . import txnstate

        self._check_open()
        damage: list[str] = []
        found = txnstate.transaction_states(self._coordinator_logs(txnstate.TRANSACTION_TOPIC, None, damage),
                                            transactional_id,
                                            where=self._batch_words(txnstate.TRANSACTION_TOPIC))
        return found + [{"transactional_id": None, "error": line, "damage": True} for line in damage]

    def producers(self, topic: str | None = None, partition: int | None = None, *,
                  now_ms: int | None = None) -> dict[tuple[str, int], list[dict[str, Any]]]:
        """Per partition (of ``topic``/``partition`` when given), its active producers as ``kafka-transactions
        describe-producers`` lists them (:mod:`.producers`), at ``now_ms`` (default: the clock).
        ``O(batches)`` in numpy.

        :raises NotFoundError: ``topic``/``partition`` names no partition here.
        """
        from . import producers

        self._check_open()
        self._check_time("now", now_ms)
        found = {}
        for key, part in self._selected_partitions(topic, partition).items():
            now = part.clock() if now_ms is None else now_ms
            found[key] = [p.to_dict() for p in producers.describe_producers(part, now)]
        return found

    def not_carried(self, topic: str | None = None, partition: int | None = None, *,
                    conversion: bool = False) -> dict[tuple[str, int], str]:
        """Per partition (of ``topic``/``partition`` when given) that has any, what a copy of its records
        from the log start (``dump --json`` lines written back, a conversion) does not carry of its
        producer state, in words (``1 batch the log cleaner emptied (the state of producer 7)``): batches
        the log cleaner emptied, ``.snapshot`` files, the producers whose state the records alone do not
        rebuild (:func:`.producers.not_carried`; a partition whose log is damaged: that its state could not
        be read).  ``conversion``: a copy that keeps neither the batches' sequences nor their leader
        epochs (a RocketMQ message has no place for them: the way back writes no sequence and epoch 0),
        which names the epochs other than 0 too.  ``O(batches)`` in numpy.

        :raises NotFoundError: ``topic``/``partition`` names no partition here.
        """
        from . import producers

        self._check_open()
        found = {}
        for key, part in self._selected_partitions(topic, partition).items():
            try:
                words = producers.not_carried(part, keeps_sequences=not conversion).words()
            except CorruptDataError as err:     # a damaged log (a run that skips corrupt data goes on)
                words = f"its producer state, which its damaged log does not give ({err.message})"
            epochs = sorted({epoch for epoch, _ in part.epochs.entries} - {0}) if conversion else []
            if epochs:
                shown = f"{epochs[0]}" if len(epochs) == 1 else f"{epochs[0]} to {epochs[-1]}"
                words = "; ".join(filter(None, (words, f"leader epoch{'s' if len(epochs) > 1 else ''} "
                                                       f"{shown} (the way back writes epoch 0)")))
            if words:
                found[key] = words
        return found

    def hanging_transactions(self, topic: str | None = None, partition: int | None = None, *,
                             now_ms: int | None = None, max_timeout_ms: int | None = None
                             ) -> tuple[list[dict[str, Any]], list[str], list[str]]:
        """The hanging transactions of the partitions here (of ``topic``/``partition``), as
        ``kafka-transactions find-hanging`` finds them (:func:`.producers.hanging`): open longer than
        ``max_timeout_ms`` (default 15 minutes) at ``now_ms`` (default: the clock) with no coordinator
        state here that still finishes them.  Returns the rows, notes (coordinator state held by
        other brokers) and damage (``__transaction_state`` files that did not read whole: the state
        past there is missing, and a transaction it finishes may be listed).
        """
        from . import producers, txnstate

        self._check_open()
        self._check_time("now", now_ms)
        if max_timeout_ms is not None and (not isinstance(max_timeout_ms, numbers.Integral)
                                           or isinstance(max_timeout_ms, bool) or max_timeout_ms < 0):
            raise ConfigError(f"expected a transaction timeout as ms >= 0, found "
                              f"{type(max_timeout_ms).__name__} {cut(max_timeout_ms)}", self.path)
        timeout = (producers.DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN * 60_000 if max_timeout_ms is None
                   else max_timeout_ms)
        notes: list[str] = []
        damage: list[str] = []
        coordinator = self._coordinator_logs(txnstate.TRANSACTION_TOPIC, None, damage)
        states = producers.by_producer_id(txnstate.transaction_states(coordinator))
        topic_state = self.metadata.topic(txnstate.TRANSACTION_TOPIC) if self.metadata is not None else None
        count = len(topic_state.partitions) if topic_state is not None and topic_state.partitions else None
        rows = []
        for (t, p), part in self._selected_partitions(topic, partition).items():
            now = part.clock() if now_ms is None else now_ms
            found = producers.describe_producers(part, now)
            for producer, txn_id in producers.hanging(t, p, found, states, now, timeout):
                rows.append({"topic": t, "partition": p, **producer.to_dict(), "transactional_id": txn_id,
                             "duration_min": (now - producer.last_timestamp) // 60_000})
        if rows and (count is None or len(coordinator) < count):
            name = txnstate.TRANSACTION_TOPIC
            held = (f"{len(coordinator)} of {count} {name} partitions" if count is not None
                    else f"{len(coordinator) or 'no'} {name} partitions")
            notes.append(f"{held} here: a transaction listed may belong to a transactional id another "
                         "broker's coordinator still finishes")
        return rows, notes, damage

    def open_transaction(self, topic: str, partition: int, start_offset: int, *,
                         now_ms: int | None = None) -> dict[str, Any]:
        """The producer whose transaction is open in ``topic``-``partition`` from ``start_offset`` (as
        ``kafka-transactions abort --start-offset`` finds it through ``DescribeProducers``), as
        :meth:`producers` lists it.

        :raises NotFoundError: no transaction is open there from that offset (the open ones are named).
        :raises ConfigError: a partition or start offset that is not an integer, a ``now_ms`` that is no time.
        """
        self._check_transaction_args(partition, start_offset, now_ms)
        return self._open_transaction(self.partition_of(topic, partition), start_offset, now_ms).to_dict()

    def _check_transaction_args(self, partition: Any, start_offset: Any, now_ms: Any) -> None:
        """:meth:`open_transaction`'s and :meth:`abort_transaction`'s arguments: a str ``"16"`` was looked up
        and refused as "no transaction open from offset 16, found open ones from 16", a str ``now_ms``
        met the clock's arithmetic (TypeError).

        :raises ConfigError: as :meth:`read` and :meth:`offsets_between` refuse them.
        """
        self._check_read(partition, start_offset)
        self._check_time("now", now_ms)

    def _open_transaction(self, part: Partition, start_offset: int, now_ms: int | None) -> Any:
        from . import producers

        self._check_open()
        now = part.clock() if now_ms is None else now_ms
        found = [p for p in producers.describe_producers(part, now) if p.txn_start_offset is not None]
        for producer in found:
            if producer.txn_start_offset == start_offset:
                return producer
        starts = ", ".join(str(p.txn_start_offset) for p in found) or "none"
        raise NotFoundError(f"expected a transaction open from offset {start_offset} in {part.topic}-"
                            f"{part.partition}, found open ones from {starts}", self.path)

    def abort_transaction(self, topic: str, partition: int, start_offset: int, *,
                          now_ms: int | None = None) -> dict[str, Any]:
        """Abort the transaction :meth:`open_transaction` finds, as ``kafka-transactions abort`` has the
        partition leader do (``WriteTxnMarkers``): an ABORT marker of its producer id and epoch with
        the producer's last coordinator epoch (0 where it has none, as the tool takes it), at the log
        end at ``now_ms`` (default: the clock), added to the ``.txnindex``.  Returns the producer.

        :raises NotFoundError: no transaction is open there from that offset (the open ones are named).
        :raises ConfigError: a partition or start offset that is not an integer, a ``now_ms`` that is no time.
        """
        self._check_writable()
        self._check_transaction_args(partition, start_offset, now_ms)
        part = self.partition_of(topic, partition)
        producer = self._open_transaction(part, start_offset, now_ms)
        part.append_control("ABORT", producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
                            coordinator_epoch=max(producer.coordinator_epoch, 0),
                            timestamp=part.clock() if now_ms is None else now_ms)
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return cast(dict[str, Any], producer.to_dict())

    def _selected_partitions(self, topic: str | None, partition: int | None
                             ) -> dict[tuple[str, int], Partition]:
        """The partitions of ``topic``/``partition`` (None: any).

        :raises NotFoundError: a topic or partition given that is not here.
        :raises ConfigError: a partition that is not an integer (a str ``"0"`` was "expected t-0 here,
            found none").
        """
        if partition is not None:
            self._check_partition(partition)
        chosen = {(t, p): part for t, p, part in self._selected(topic, partition)}
        if not chosen and (topic is not None or partition is not None):
            where = f"{topic}-{partition}" if topic is not None and partition is not None else (
                f"topic {topic!r}" if topic is not None else f"partition {partition}")
            raise NotFoundError(f"expected {where} here, found none", self.path)
        return chosen

    # -- transactions (transactions.py) ---------------------------------------------------
    def transaction(self, producer_id: int, producer_epoch: int = 0, *,
                    coordinator_epoch: int = 0) -> transactions.Transaction:
        """A producer's transaction: ``txn.append_batch(...)`` writes transactional batches,
        ``txn.commit()`` / ``txn.abort()`` the markers (a ``with`` block commits, or aborts on error)."""
        from . import transactions

        self._check_writable()
        return transactions.Transaction(self, producer_id, producer_epoch,
                                        coordinator_epoch=coordinator_epoch)

    def read_committed(self, topic: str, partition: int, offset: int = 0,
                       count: int | None = None) -> Iterator[KafkaRecord]:
        """``read(..., isolation="read_committed")``."""
        return self.read(topic, partition, offset, count, isolation=READ_COMMITTED)

    def compact(self, *, dry_run: bool = False, now_ms: int | None = None, topic: str | None = None,
                partition: int | None = None, dedupe_buffer_size: int = DEDUPE_BUFFER_SIZE,
                **options: Any) -> list[dict[str, Any]]:
        """Kafka's log cleaner over each partition (``cleanup.policy=compact`` semantics); the option
        ``dedupe_buffer_size`` is ``log.cleaner.dedupe.buffer.size`` (a full key map cleans in passes).
        The extra indexes attached (``segstore.layouts``) index the moved records again."""
        from . import compaction

        if not dry_run:
            self._check_writable()
        self._check_open()
        results = compaction.compact(self, now_ms=now_ms, dry_run=dry_run, topic=topic, partition=partition,
                                     dedupe_buffer_size=dedupe_buffer_size)
        if not dry_run and self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.append()
        return results

    def _selected(self, topic: str | None, partition: int | None) -> Iterator[tuple[str, int, Partition]]:
        for (t, p), part in self._partitions().items():
            if (topic is None or t == topic) and (partition is None or p == partition):
                yield t, p, part

    @reads_while_open
    def dump(self, *, topic: str | None = None, partition: int | None = None, index: bool = False,
             isolation: str = READ_UNCOMMITTED, begin: int | None = None, end: int | None = None,
             offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None,
             continues: tuple[str, int, int] | None = None, decompress: bool = False) -> Iterator[DumpLine]:
        """kafka-dump-log lines, segment by segment: a heading, then each batch line and its record
        lines; with ``index`` each segment's index entries, then what :meth:`verify` finds (``problem``
        lines).  ``read_committed`` leaves out control batches and the batches of aborted
        transactions (:class:`_CommittedFilter`).  ``begin``/``end`` (ms, inclusive): each
        partition's records at :meth:`offsets_between`'s offsets only, under their batch lines, in
        the segments holding them (a partition without one is left out); ``offsets``
        (``{(topic, partition): (start, stop)}``) those offsets instead.  ``continues``: ``(topic,
        partition, offset)`` where an earlier dump's lines ended, that partition's window up to just
        before ``offset``: a dump whose first window is that partition's from ``offset``, inside a
        segment (past its base), goes on under the heading the earlier one gave that segment, without
        repeating it (``dump --follow``).

        ``decompress`` as in :meth:`read`: taken, so that a dump written for both formats runs on
        either; records always come decompressed.

        :raises CorruptIndexError: with ``index=True``, after everything else was dumped, for the
            first index file that could not be read (so it could not be dumped).
        :raises ConfigError: a ``decompress`` not True or False.
        """
        self._check_dump(topic, partition)
        check_decompress(decompress, self.path)

        def records(seg: LogSegment, position: int, start: int, stop: int | None,
                    keeps: Callable[..., bool] | None) -> Iterator[DumpLine]:
            for batch in seg.batches(position):
                if stop is not None and batch.base_offset >= stop:
                    return
                if batch.last_offset >= start and (keeps is None or keeps(batch)):
                    # decoded first: a batch whose records do not decode gets no line (as in the C walk)
                    rows = batch.records_with_crcs()
                    yield DumpLine(batch_line(batch), json=False)  # the batch as stored, then
                    for rec, crc in rows:                           # the records a consumer gets
                        if rec.offset >= start and (stop is None or rec.offset < stop):
                            yield DumpLine(record_line(batch, rec, crc), json=False)
                if stop is not None and batch.last_offset >= stop - 1:
                    return      # the window's last batch: what follows is not read (as _below)

        return self._dump_walk(topic, partition, index, isolation, records, lambda line: line,
                               begin, end, offsets, continues)

    @reads_while_open
    def dump_text(self, *, topic: str | None = None, partition: int | None = None, index: bool = False,
                  isolation: str = READ_UNCOMMITTED, threads: int | None = None, begin: int | None = None,
                  end: int | None = None, offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                  continues: tuple[str, int, int] | None = None, decompress: bool = False
                  ) -> Iterator[bytes | memoryview]:
        """:meth:`dump`'s lines as blocks of UTF-8 text, each line ending in a newline: the batch and
        record lines a decoded chunk at a time in C where built (per batch its line in Python, per
        record nothing), the same bytes as :meth:`dump`'s loop.  ``threads``: taken, one is used.
        ``begin``, ``end``, ``offsets``, ``continues`` and ``decompress`` as :meth:`dump`.
        ``O(bytes read)``.

        :raises ConfigError: an unknown isolation level, ``threads`` below 1, a ``decompress`` not True
            or False.
        :raises CorruptIndexError: as :meth:`dump`.
        """
        self._check_dump(topic, partition)
        thread_count(threads)     # checked as the other formats' and dump_json's (one is used)
        check_decompress(decompress, self.path)
        if columnar._speedups is None:
            return (line.text.encode("utf-8", "surrogatepass") + b"\n" for line in self.dump(
                topic=topic, partition=partition, index=index, isolation=isolation, begin=begin, end=end,
                offsets=offsets, continues=continues))
        want = columnar.WANT_KEY | columnar.WANT_VALUE | columnar.WANT_HEADERS

        def records(seg: LogSegment, position: int, start: int, stop: int | None,
                    keeps: Callable[..., bool] | None) -> Iterator[bytes]:
            at: int | None = position
            while at is not None:
                chunks, done, at = seg.column_chunks(want, start=at), at, None
                while True:
                    try:
                        chunk = next(chunks)
                    except StopIteration:
                        return
                    except CorruptDataError:
                        # the batch at ``done`` does not decode: one the record-by-record dump passes over
                        # undecoded (below the start, left out by read_committed) is passed over here too
                        at = _passed_over(seg, done, start, stop, keeps)
                        if at is None:
                            raise
                        if at < 0:
                            return
                        break
                    done = int(chunk.batches["position"][-1]) + int(chunk.batches["size"][-1])
                    chunk, cut = _below(chunk, stop)
                    try:
                        lines = _text_chunk(chunk, start, keeps, seg.log.view(), seg.path)
                    except CorruptDataError as err:
                        # a control batch whose record is no marker, met by the read_committed filter
                        # (before it asked any batch of the chunk): the lines of the batches before it,
                        # then its error, as the record-by-record dump prints them
                        before = int(np.count_nonzero(chunk.batches["position"] < (err.pos or 0)))
                        if before:
                            head = chunk.head(int(chunk.batches["first_row"][before]), before)
                            lines = _text_chunk(head, start, keeps, seg.log.view(), seg.path)
                            if lines:
                                yield lines
                        raise
                    if lines:
                        yield lines
                    if cut:
                        return

        return self._dump_walk(topic, partition, index, isolation, records,
                               lambda line: _text(line.text + "\n"), begin, end, offsets, continues)

    def _dump_walk(self, topic: str | None, partition: int | None, index: bool, isolation: str,
                   records: Callable[[LogSegment, int, int, int | None, Callable[..., bool] | None],
                                     Iterator[_D]],
                   line: Callable[[DumpLine], _D], begin: int | None = None, end: int | None = None,
                   offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                   continues: tuple[str, int, int] | None = None) -> Iterator[_D]:
        """The walk :meth:`dump` and :meth:`dump_text` share: per selected partition from its log
        start (with ``begin``/``end`` or ``offsets``, over :meth:`dump_windows`' offsets only, in the
        segments holding them), each segment's heading (but the first's where the dump ``continues``
        an earlier one, see :meth:`dump`), ``records(segment, byte position, first offset, offset to
        stop at or None, read_committed filter or None)``, with ``index`` the segment's index lines,
        then the partition's problems; every line not a record's made by ``line``.  Lazy: nothing is
        checked or read before the first item is asked."""
        self._check_open()
        committed = check_isolation(isolation) == READ_COMMITTED
        windows = self.dump_windows(topic, partition, begin, end, offsets)
        unreadable: list[tuple[str, int | None, str]] = []
        resumed = None      # the offset the earlier dump ended before, until its segment comes
        for t, p, part in self._selected(topic, partition):
            start, stop = part.log_start_offset, None
            if windows is not None:
                if (t, p) not in windows:
                    continue
                start, stop = windows[t, p]
            if continues is not None:
                resumed = continues[2] if continues == (t, p, start) else None
                continues = None
            keeps = _CommittedFilter(part, start).keeps if committed else None
            segments = part.segments
            for i, seg in enumerate(segments):
                if i + 1 < len(segments) and segments[i + 1].base <= start:
                    # wholly below the start (below the log start, the broker's next retention pass
                    # deletes it; below a window's, it holds none of its records)
                    continue
                if stop is not None and seg.base >= stop:
                    break
                position = 0
                if windows is not None and seg.base < start:    # the window starts inside it
                    found = seg.translate_offset(start)
                    position = found.position if found is not None else 0
                if resumed is None or seg.base >= resumed:    # inside it: the earlier dump headed it
                    yield line(DumpLine(f"Dumping {seg.path}", json=False))
                    yield line(DumpLine(f"Log starting offset: {seg.base}", json=False))
                resumed = None
                yield from records(seg, position, start, stop, keeps)
                if index:
                    yield from map(line, self._dump_indexes(seg))
            if index:
                for path, pos, message in part.verify():
                    yield line(DumpLine(str(Problem(path, pos, message)),
                                        {"path": path, "pos": pos, "message": message}, problem=True))
                unreadable += part.index_problems
        if unreadable:
            path, pos, message = unreadable[0]
            raise CorruptIndexError(message, path, pos)

    @reads_while_open
    def dump_json(self, *, topic: str | None = None, partition: int | None = None,
                  isolation: str = READ_UNCOMMITTED, threads: int | None = None, begin: int | None = None,
                  end: int | None = None, offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                  decompress: bool = False, walk_ahead: bool = False) -> Iterator[bytes | memoryview]:
        """``dump --json`` lines (ASCII), a decoded chunk at a time in C where built: byte for byte
        ``json.dumps(self.to_json(record))`` for each record of :meth:`scan` (``scan(isolation=...)``),
        so from each partition's log start.  ``threads`` (default: see segstore.overlap.thread_count)
        decodes and formats on that many threads as :meth:`scan_arrow` does, the same bytes.
        ``begin``/``end`` (ms, inclusive): each partition's records at :meth:`offsets_between`'s
        offsets only (read from the batch holding the first, on one thread); ``offsets`` those
        offsets instead.  ``decompress`` as in :meth:`read` (taken; records always come decompressed).
        ``O(bytes read)``.

        ``walk_ahead`` (with ``threads`` above 1): the ranges are decoded and formatted ahead of the
        block the caller holds, also while this generator is suspended (:func:`segstore.overlap.ahead`:
        the caller's own work on a block runs beside the formatting of the next ones), :data:`DUMP_AHEAD`
        ranges a thread at most.  Only for a caller that reads the blocks within one call of its own
        and closes the generator (or reads it to its end) before it closes or changes the store (the
        CLI's dump): closing it waits for the threads.  Without it no thread runs while the generator
        is suspended.

        :raises ConfigError: an unknown isolation level, ``threads`` below 1, a ``decompress`` not True
            or False.
        """
        self._check_open()
        self._check_dump(topic, partition)
        check_decompress(decompress, self.path)
        committed = check_isolation(isolation) == READ_COMMITTED
        threads = thread_count(threads)
        want = columnar.WANT_KEY | columnar.WANT_VALUE | columnar.WANT_HEADERS
        selected = {(t, p): part for t, p, part in self._selected(topic, partition)}
        windows = self.dump_windows(topic, partition, begin, end, offsets)
        if windows is not None:
            selected = {key: part for key, part in selected.items() if key in windows}
        made: dict[int, tuple[columnar.Chunk, Any]] = {}
        remote = any(seg.log.remote for part in selected.values() for seg in part.segments)
        streams: Generator[Iterator[tuple[Any, columnar.Chunk]], None, None] | None = None
        if threads > 1 and windows is None and not remote:
            # chunks of the default's rows: a chunk's lines are one bytes object, which a bigger
            # chunk makes bigger (200k records, ranges on one thread: 0.20 s of CPU with twice the
            # rows, 0.13-0.17 s with the default's, as one thread's path)
            capacity = columnar.Capacity.for_bytes(SPLIT_BYTES, columnar.Capacity().rows)
            log_starts = {key: part.log_start_offset for key, part in selected.items()}
            streams = self._parallel_chunks(
                selected, [_trimmed_start(part) for part in selected.values()], want, capacity, threads,
                lambda t, p, seg, chunk: _json_chunk(t, p, log_starts[t, p], seg.base, chunk), made,
                walk_ahead)
        try:
            yield from self._json_blocks(selected, windows, committed, streams, made, want)
        finally:
            if streams is not None:
                streams.close()     # (a walk ahead's threads stop before the caller goes on)

    def _json_blocks(self, selected: dict[tuple[str, int], Partition],
                     windows: dict[tuple[str, int], tuple[int, int]] | None, committed: bool,
                     streams: Iterator[Iterator[tuple[Any, columnar.Chunk]]] | None,
                     made: dict[int, tuple[columnar.Chunk, Any]], want: int) -> Iterator[bytes]:
        """:meth:`dump_json`'s blocks, partition by partition: each chunk's lines (made ahead, in
        ``made``, where ``streams`` decoded it; else here), filtered."""
        for (t, p), part in selected.items():
            start, stop = windows[t, p] if windows is not None else (_trimmed_start(part), None)
            keeps = (_CommittedFilter(part, part.log_start_offset if start is None else start).keeps
                     if committed else None)
            # a whole partition's records: where they do not say where its log ends, a partition line
            copied = _CopiedExtent() if windows is None and not committed else None
            dropping = start is not None
            chunks = (part.in_order(next(streams), want) if streams is not None
                      else part.column_chunks(want, offset=start))
            for seg, whole in chunks:
                chunk, cut = _below(whole, stop)
                chunk_made, lines = made.pop(id(chunk), (None, None))
                if chunk_made is not chunk or lines is None:     # not decoded ahead
                    lines = _json_chunk(t, p, part.log_start_offset, seg.base, chunk)
                rows = chunk.batches
                below = 0   # rows of the first batches below the log start
                if dropping and start is not None:
                    below = search(chunk.buffers["offset"][:chunk.rows], start, Bound.SMALLEST_UPPER)
                    dropping = below == chunk.rows
                kept = None
                if keeps is not None:
                    batches = [columnar.record_batch(row) for row in rows.tolist()]
                    kept = np.array([keeps(b, kind) for b, kind in
                                     zip(batches, _control_types(chunk, batches, seg.path), strict=True)],
                                    dtype=bool)
                if kept is not None and not kept.all():
                    # a record is one line (JSON escapes newlines): keep the kept batches' lines
                    per_row = np.repeat(kept, np.diff(rows["first_row"], append=chunk.rows))
                    per_row[:below] = False
                    split = np.array(lines.split(b"\n")[:-1], dtype=object)[per_row]
                    lines = b"".join(line + b"\n" for line in split.tolist())
                elif below:
                    lines = lines.split(b"\n", below)[-1]
                if copied is not None:
                    copied.add(chunk, below)
                if lines:
                    yield lines
                if cut:
                    break
            extent = copied.line(t, p, part) if copied is not None else None
            if extent is not None:
                yield extent

    @staticmethod
    def _dump_indexes(seg: Any) -> Iterator[DumpLine]:
        yield DumpLine(f"Dumping {seg.offset_index.path}", json=False)
        for offset, position in seg.offset_index.pairs():
            yield DumpLine(f"offset: {offset} position: {position}", json=False)
        yield DumpLine(f"Dumping {seg.time_index.path}", json=False)
        for timestamp, offset in seg.time_index.pairs():
            yield DumpLine(f"timestamp: {timestamp} offset: {offset}", json=False)
        if files.exists(seg.txn_index.path):   # written with a segment's first aborted transaction
            # as kafka-dump-log (and dump X.txnindex) prints it: DumpLogSegments.dumpTxnIndex
            yield DumpLine(f"Dumping {seg.txn_index.path}", json=False)
            for version, producer_id, first, last, stable in seg.txn_index.entries().tolist():
                yield DumpLine(f"version: {version} producerId: {producer_id} firstOffset: {first} "
                               f"lastOffset: {last} lastStableOffset: {stable}", json=False)

    def find(self, topic: str, key: str | bytes, *, partition: int | None = None, begin: int | None = None,
             end: int | None = None, max_hits: int | None = None) -> list[Record]:
        """:meth:`Store.find`: through the extra key index when the partitions have one
        (``segstore index build PATH --index key``), else by scanning the key column of each
        partition (:meth:`scan_arrow`, in C where built): ``O(bytes of the topic's logs)``.
        A topic or partition the store does not hold is a ``NotFoundError``, as for :meth:`read`.
        """
        found, damage = self._find_until_damage(topic, key, partition=partition, begin=begin, end=end,
                                                max_hits=max_hits)
        if damage is not None:
            raise damage
        return found

    def _find_until_damage(self, topic: str, key: str | bytes, *, partition: int | None, begin: int | None,
                           end: int | None, max_hits: int | None
                           ) -> tuple[list[Record], CorruptDataError | None]:
        """:meth:`find`'s hits, and the damage its scan of the key column met (None: it read whole):
        then the hits are those of the records before it (what ``query --key`` prints before naming
        the damage, as ``dump`` prints the records before it)."""
        self._check_open()
        raw = self._find_key(key, partition, begin, end, max_hits, topic=topic)
        if self._has_key_index():
            # the key index holds the values of the key.index.headers headers too (store.indexes.find_key
            # answers them); find means the record key, as the scan below and as Spark and conversion
            indexed = super().find(topic, key, partition=partition, begin=begin, end=end)
            return newest_hits([r for r in indexed if r.key == raw], max_hits), None
        wanted = bytes(raw)
        hits: list[tuple[int, int, int]] = []     # (timestamp, partition, offset): picked before any is read
        parts: dict[int, Partition] = {}
        damage: CorruptDataError | None = None
        try:
            for _t, p, part in self._selected(topic, partition):
                parts[p] = part
                self._key_hits(topic, p, wanted, begin, end, hits)
        except CorruptDataError as err:   # the hits before it stand; the damage is named after them
            damage = err
        if max_hits is not None:   # the newest in all, as Store.find and newest_hits pick them
            hits = sorted(hits)
            hits = hits[-max_hits:] if max_hits > 0 else []   # every hit when fewer than max_hits
        ordered = sorted(hits, key=lambda hit: hit[1:])
        return [self._record_at(parts[p], o) for _t, p, o in ordered], damage

    def _key_hits(self, topic: str, p: int, wanted: bytes, begin: int | None, end: int | None,
                  hits: list[tuple[int, int, int]]) -> None:
        """Add to ``hits`` the (timestamp, partition, offset) of each record of ``topic``-``p`` whose key
        is ``wanted`` (timestamps in ``[begin, end]``), batch by batch: those before damage stand.

        :raises CorruptDataError: damage met in the partition's key column.
        """
        for batch in self.scan_arrow(["key", "offset", "timestamp", "isControl"], topic=topic, partition=p):
            # in numpy over the column's buffers: pyarrow.compute (tens of ms to import) not loaded
            keep = equal_rows(batch.column("key"), wanted)     # False where the key is null
            # a transaction marker's key is its version and type, no record key: never a hit, as the
            # key index never holds one and no consumer is given one
            keep &= ~to_numpy(batch.column("isControl"), np.bool_)
            stamps = to_numpy(batch.column("timestamp"), np.int64)     # ms, as stored
            if begin is not None:
                keep &= stamps >= begin
            if end is not None:
                keep &= stamps <= end
            rows = np.flatnonzero(keep)
            offsets = to_numpy(batch.column("offset"), np.int64)[rows]
            hits += [(t, p, o) for t, o in zip(stamps[rows].tolist(), offsets.tolist(), strict=True)]

    def _has_key_index(self) -> bool:
        """Whether the extra key index layout is attached or on disk (``segstore.layouts``)."""
        if self.indexes is not None and "key" in self.indexes:
            return True
        from segstore.layouts import present_layouts

        return "key" in present_layouts(self)

    def _record_at(self, part: Partition, offset: int) -> KafkaRecord:
        record = next(self.read(part.topic, part.partition, offset, 1), None)
        if record is None or record.offset != offset:
            raise NotFoundError(f"expected a record at offset {offset} of {part.topic}-{part.partition}, "
                                "found none", self.path)
        return record

    def query(self, request: QueryRequest) -> QueryResult:
        """``--offset N`` (the batch holding it, then ``--count`` records), ``--timestamp MS`` (the same
        from the first offset at or after it), or ``--key K`` (:meth:`find`; each hit one line).
        ``request.isolation`` as :meth:`read`."""
        self._check_open()
        isolation = check_isolation(request.isolation)
        if request.key is not None:
            return self._query_key(request)
        parts = self._partitions()
        if request.topic is None and len(parts) == 1:
            topic, partition = next(iter(parts))
            if request.partition is not None:   # another one is not held: partition_of says so
                partition = request.partition
        elif request.topic is None:
            # an offset or a time is one partition's: which one cannot be guessed among several
            held = sorted({topic for topic, _ in parts})
            raise InvalidTopicError("expected --topic (and --partition) for an offset or time query of a "
                                    "log directory, found none: it holds "
                                    + (f"topics {', '.join(held)}" if held else "no topic"), self.path)
        else:
            topic, partition = request.topic, request.partition if request.partition is not None else 0
        if (topic, partition) not in parts:   # not held (the CLI names what is), of a log or partition dir
            raise NotFoundError(f"expected a partition {topic}-{partition}, found none", self.path)
        part = self.partition_of(topic, partition)
        offset = request.offset
        # the log start, whether earliest or earliest local asked for it (Partition.offset_for_time)
        earliest = request.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
        if request.timestamp is not None:
            self._check_time("query", request.timestamp, negative=True)
            # a broker reads another negative as a time before every record; asked for one, a user
            # meant a code 3.8.0 lacks (or a typo), which the first record's offset would hide
            if request.timestamp < 0 and request.timestamp not in LIST_OFFSETS_CODES:
                raise ConfigError(
                    "expected a time at or after the epoch (ms or ISO-8601) or one of Kafka 3.8's "
                    "ListOffsets codes -1 (latest), -2 (earliest), -3 (max-timestamp), -4 (earliest local), "
                    f"found {request.timestamp}", self.path)
            found = part.offset_for_time(request.timestamp)
            # Kafka 3.8 Partition.fetchOffsetForTimestamp: ListOffsets answers only offsets a consumer
            # may fetch, below the high watermark (the last stable offset for read_committed); latest
            # is that bound itself, earliest and earliest local are never bounded
            committed = isolation == READ_COMMITTED
            fetchable = _last_stable_offset(part) if committed else high_watermark(part)
            bound = "last stable offset" if committed else "high watermark"
            if request.timestamp == LATEST_TIMESTAMP:
                # below the log end (an open transaction, a high watermark the followers hold back) the
                # records from there are stored, only not yet given to consumers
                there = ("where no record is stored yet" if fetchable >= part.next_offset else
                         f"the records stored from there to the log end offset {part.next_offset} not yet "
                         f"given to {isolation} consumers")
                return QueryResult(lines=[DumpLine(f"{topic}-{partition}: latest is offset {fetchable} (the "
                                                   f"{bound}), {there}")])
            if found is None:
                return QueryResult(lines=_none_for_time(part, request.timestamp))
            if not earliest and found.offset >= fetchable:
                return QueryResult(lines=[DumpLine(
                    f"{topic}-{partition}: the first record found, offset {found.offset}, is at or past the "
                    f"{bound} {fetchable} (not yet given to consumers: kafka-get-offsets answers none)")])
            if not earliest and found.offset < part.log_start_offset:
                # only MAX_TIMESTAMP gets here: fetchOffsetByTimestamp reads its segment as it is, records a
                # DeleteRecords left below the log start included; a read from there starts at the log
                # start and would show another record as the answer
                return QueryResult(lines=[DumpLine(
                    f"{topic}-{partition}: max-timestamp is offset {found.offset} (timestamp "
                    f"{found.timestamp}), below the log start offset {part.log_start_offset}: its record "
                    "was deleted")])
            offset = found.offset
        if offset is None:
            raise UnsupportedOperationError("expected --key, --offset or --timestamp in a Kafka query, "
                                            "found none", self.path)
        # the records before damage the read meets are answered, then the damage (as dump does)
        records, damage = read_until_damage(self.read(topic, partition, offset, request.count,
                                                      isolation=isolation))
        if damage is not None and not records:
            raise damage
        if not records:
            if earliest:
                # UnifiedLog.fetchOffsetByTimestamp(EARLIEST_TIMESTAMP) answers the log start offset
                # whatever is stored there (kafka-get-offsets --time earliest prints it): say which
                # offset, as latest does, rather than that no record is that new
                assert offset is not None
                there = (", where no record is stored yet" if offset >= part.next_offset
                         else f"; a {isolation} read finds no record from there")
                name = "earliest" if request.timestamp == EARLIEST_TIMESTAMP else "earliest local"
                return QueryResult(lines=[DumpLine(f"{topic}-{partition}: {name} is offset {offset} (the "
                                                   f"log start offset){there}")])
            if isolation == READ_COMMITTED and offset is not None \
                    and part.log_start_offset <= offset < part.next_offset:
                # records are stored there: say why a read_committed consumer (a fetch that ends at the
                # last stable offset, CompletedFetch skipping markers and aborted batches) gets none
                stable = _last_stable_offset(part)
                why = (f"offset {offset} is at or past the last stable offset {stable}, where a "
                       "read_committed read stops" if offset >= stable else
                       f"from offset {offset} to the last stable offset {stable} a read_committed read "
                       "finds only transaction markers and aborted records")
                return QueryResult(lines=[DumpLine(
                    f"{topic}-{partition}: {why} (records are stored up to the log end offset "
                    f"{part.next_offset}; --isolation read_uncommitted shows them)")])
            return QueryResult()
        lines = []
        if request.timestamp is not None:
            # the record lines do not name their partition: a heading says which one answered, and with
            # what offset (kafka-get-offsets' TOPIC:PARTITION:OFFSET), as a RocketMQ answer's line does
            if earliest:
                name = "earliest" if request.timestamp == EARLIEST_TIMESTAMP else "earliest local"
                heading = f"{name} is offset {offset} (the log start offset)"
            elif request.timestamp == MAX_TIMESTAMP:
                assert found is not None    # a time found nothing: answered above
                heading = f"max-timestamp is offset {offset} (timestamp {found.timestamp})"
            else:
                heading = f"offset {offset} is the first stored at or after {request.timestamp}"
            if records[0].offset != offset:   # aborted records (or markers) skipped by a read_committed read
                heading += f"; a {isolation} read from there starts at offset {records[0].offset}"
            lines.append(DumpLine(f"{topic}-{partition}: {heading}", json=False))
        batch = None
        crcs: dict[int, int | None] = {}
        for record in records:   # each batch's header over its own records, as kafka-dump-log prints them
            if record.batch is not batch:
                batch = record.batch
                lines.append(DumpLine(batch_line(batch), json=False))
                crcs = {r.offset: crc for r, crc in batch.records_with_crcs()}
            line = record_line(batch, record.record, crcs.get(record.offset))
            data = self.to_json(record)
            lines.append(DumpLine(line, data, json_text=jsonlib.dumps(data)))   # as dump_json writes it
        return QueryResult(records=list(records), lines=lines, found=True, damage=damage)

    def _query_key(self, request: QueryRequest) -> QueryResult:
        """Key hits as :meth:`find` answers them (of every topic when none is given): the newest
        ``request.max`` in all, of what the isolation level shows, in topic, partition and offset order;
        one line each."""
        assert request.key is not None
        topics = [request.topic] if request.topic is not None else self.topics()
        records: list[Record] = []
        damage: CorruptDataError | None = None
        for topic in topics:
            if request.partition is None or request.partition in self.partitions(topic):
                found, damage = self._find_until_damage(topic, request.key, partition=request.partition,
                                                        begin=request.begin, end=request.end, max_hits=None)
                records += found
                if damage is not None:   # the hits before it are printed, then it is named (as dump)
                    break
        if damage is not None and not records:
            raise damage
        if request.isolation == READ_COMMITTED:
            records = [r for r in records if self._committed_record(r)]
        if request.max < len(records):   # kept in topic, partition, offset order
            chosen = {id(r) for r in newest_hits(records, request.max)}
            records = [r for r in records if id(r) in chosen]
        # the hit's own key as one word (a line a hit), its JSON dump_json's line
        lines = [DumpLine(f"{r.topic}/{r.partition} offset {r.offset} timestamp {r.timestamp} "
                          f"key {key_word(r.key or b'')}", data, json_text=jsonlib.dumps(data))
                 for r in records for data in [self.to_json(cast("KafkaRecord", r))]]
        return QueryResult(records=records, lines=lines, found=bool(records), damage=damage)

    def _committed_record(self, record: Record) -> bool:
        """Whether a read_committed consumer fetching from ``record``'s offset is given it."""
        assert isinstance(record, _record_module().KafkaRecord)
        part = self.partition_of(record.topic, record.partition)
        first = next(self._records(part, record.offset, READ_COMMITTED), None)
        return first is not None and first.offset == record.offset

    # -- lifecycle ----------------------------------------------------------------
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Close; a write that failed in a directory this store created, before any record was
        stored, leaves nothing behind (no empty partition, no checkpoint files)."""
        if exc_type is not None and self._created and not self._closed and self._holds_nothing():
            self.abandon()
            files.remove_tree(self.path)
            return
        self.close()

    def _holds_nothing(self) -> bool:
        return all(seg.size == 0 for part in self._partitions().values() for seg in part.segments)

    def flush(self) -> None:
        self._check_open()
        if self._part is not None:
            self._part.flush()
            if self._part.writable:
                # what is flushed is recovered no more (LogManager.checkpointRecoveryOffsetsInDir after a
                # flush; a log dir's flush writes its checkpoints alike): a writer killed after it leaves
                # the broker no recovery point below what it appended, past damage kept below it
                write_recovery_point(self._part)
        else:
            self._log_dir.flush()
        if self.indexes is not None:  # extra index layouts (segstore.layouts)
            self.indexes.flush()

    def close(self) -> None:
        if self._closed:
            return
        if self.indexes is not None:  # extra index layouts (segstore.layouts): closed cleanly first
            self.indexes.close()
        if self._part is not None:
            if self.mode == "a":
                self._part.flush()
                if self._part.writable:
                    write_recovery_point(self._part)
            self._part.close()
        else:
            self._log_dir.close()
        self._release_locks()
        super().close()

    def abandon(self) -> None:
        if self._closed:
            return
        if self.indexes is not None:  # extra index layouts (segstore.layouts): left as a crash leaves them
            self.indexes.abandon()
        if self._part is not None:
            self._part.abandon()
        else:
            self._log_dir.abandon()
        self._release_locks()
        self._closed = True

    def _release_locks(self) -> None:
        if self._lock is not None:
            self._lock.release()
        if self._broker_lock is not None:
            self._broker_lock.release()
