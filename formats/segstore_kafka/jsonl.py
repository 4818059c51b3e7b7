"""``segstore write --input FILE.jsonl`` into a Kafka partition or log directory: plain lines and
``dump --json`` lines.

A **plain line** is a :class:`segstore.records.Message` (``topic, partition, key, value,
headers, timestamp``); strings are UTF-8 text, ``valueBase64``/``keyBase64`` binary.  A line
naming no partition goes where ``KafkaStore.append_batch`` routes it (partition 0; with a key, of
a topic of several partitions, the Java producer's choice for the key: :mod:`.partitioner`).  Plain
lines are appended as new records: the log gives them offsets, one batch per partition a
chunk (``KafkaStore.append_batch``), a chunk ending early where a partition's records would
pass what one batch may hold (``KafkaStore.batch_records_limit``: 1 MiB, or less under a
smaller ``max.message.bytes`` or ``segment.bytes``), as a producer splits what the broker
would refuse as too large.  A single record over it is refused, as the broker refuses it.

A **dump line** is what ``segstore dump --json`` writes for a record (it has a ``batch``
object); its key, value and header values are base64.  Consecutive lines of one batch
(same topic, partition and batch base offset) become that batch again, encoded as the
broker did (``MemoryRecordsBuilder``; the log cleaner's form for a compacted batch,
``encode_retained_batch``): its base and last offset, producer id, epoch and base
sequence, leader epoch, transaction and control flags, compression, timestamp type and
delete horizon, each record at its own offset with its timestamp, key, value and headers.
The batch keeps its offsets, as a follower appends (at or after the log end offset: a
compacted log's gaps stay), and a batch the dump shows at position 0, or in a later segment,
begins a new segment named by its ``segment_base_offset``, as in its source (a cleaned segment
keeps its first base: Kafka 3.8 ``Cleaner.cleanSegments``).  A partition that held no record
starts where its source's log did (the first segment's base, or the ``log_start_offset`` below
it) and takes the lines' ``log_start_offset`` as its log start, as ``LogLoader`` reads one from
``log-start-offset-checkpoint``; both fields are optional (an older segstore's dump: the log
starts at the first batch, a segment is named by its first batch).  So a dump written into an
empty directory comes back byte for byte: the same ``.log`` files, and the same
``dump --json``.

What a dump cannot carry: a LogAppendTime batch's records show the batch's append time
(what a consumer reads), not the create times stored in the batch, so they come back with
the batch's base timestamp (one-record batches exactly; the other batches' CRCs differ);
a batch the cleaner emptied (no record to dump) is not restored; and a batch of the old
message formats (magic 0 or 1) is refused, as segstore writes RecordBatch v2 only.  A dump starts
at the log start offset: a batch holding it comes back with its records from there only (its
stored base and max timestamps kept, so the same dump); a segment the cleaner emptied whole has no
line (but one the log starts at), and the indexes and producer snapshots are the copy's own
(docs/cli.md, "JSON-lines input").

A **partition line** (``topic, partition, log_start_offset, log_end_offset, high_watermark,
leader_epochs``; no ``batch``) is what the dump adds after a partition's records where they do not say
where its log ends (none from its log start: DeleteRecords, retention, an empty partition; or its last
ones gone), that its high watermark is below its log end, or where its leader epochs start (the
cleaner removed an epoch's first batches).  The copy holds that partition from that log start to that
log end, with that high watermark, its epochs assigned as the source's cache holds them
(``KafkaStore.restore_extent``).
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from segstore.errors import InvalidMessageError, cut
from segstore.javatext import JavaText, java_text
from segstore.plugin import WRITE_CHUNK
from segstore.records import LOG_APPEND_TIME, check_line_fields, decode_base64_fields

from . import batch as codec
from . import partitioner
from .arrowappend import HEADER_OVERHEAD, RECORD_OVERHEAD
from .checkpoints import EpochEntry
from .store import KafkaStore

#: The fields of a ``dump --json`` line and of its ``batch`` object (``KafkaStore.to_json``,
#: ``batch_json``).
DUMP_FIELDS = frozenset({"topic", "partition", "log_start_offset", "offset", "timestamp", "timestamp_type",
                         "key", "value", "headers", "batch"})
BATCH_FIELDS = frozenset({"base_offset", "last_offset", "position", "size", "crc", "compression", "magic",
                          "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch",
                          "is_transactional", "is_control", "max_timestamp", "base_timestamp",
                          "delete_horizon_ms", "segment_base_offset"})
#: Line fields a dump of an older segstore lacks (None: the copy's log starts at its first segment).
_OPTIONAL = frozenset({"log_start_offset"})
#: Batch fields a dump of an older segstore may lack, and what they were then (a segment base of None:
#: the segment is named by its first batch's base offset).
_OPTIONAL_BATCH = {"base_timestamp": None, "delete_horizon_ms": codec.NO_TIMESTAMP,
                   "segment_base_offset": None}


#: The fields of a ``dump --json`` partition line (``KafkaStore.dump_json``): a partition whose records
#: do not say where its log ends (none from its log start, or the last ones gone) or which leader
#: epochs start where.
PARTITION_FIELDS = frozenset({"topic", "partition", "log_start_offset", "log_end_offset", "high_watermark",
                              "leader_epochs"})
#: Partition line fields that may be left out (no leader epochs: the copy's batches start its epochs;
#: no high watermark: the copy's is its log end).
_OPTIONAL_PARTITION = frozenset({"leader_epochs", "high_watermark"})
#: The largest leader epoch (``partitionLeaderEpoch``, a Java int) and offset (a Java long,
#: ``Long.MAX_VALUE``: a checkpoint file holds no other).
_MAX_EPOCH, _MAX_OFFSET = 2**31 - 1, 2**63 - 1


def is_dump_line(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is an object ``segstore dump --json`` wrote for a Kafka record or partition."""
    return "batch" in obj or is_partition_line(obj)


def is_partition_line(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is a ``dump --json`` partition line (it has a ``log_end_offset``)."""
    return "log_end_offset" in obj and "batch" not in obj


def _partition_extent(obj: Mapping[str, Any]) -> tuple[str, int, dict[str, Any]]:
    """``(topic, partition, restore_extent's keyword arguments)`` of a partition line.

    :raises InvalidMessageError: a field missing, unknown or not an integer, a log start past the log
        end, a high watermark outside them, or leader epochs that are not ``[epoch, start offset]``
        pairs rising in both, each start from the log start to before the log end (as ``LogLoader``
        leaves a cache).
    """
    unknown = sorted(set(obj) - PARTITION_FIELDS)
    missing = sorted(PARTITION_FIELDS - _OPTIONAL_PARTITION - set(obj))
    if unknown or missing:
        found = f"unknown field(s) {unknown}" if unknown else f"no {missing}"
        raise InvalidMessageError(f"expected the fields of a Kafka dump --json partition line "
                                  f"{sorted(PARTITION_FIELDS)}, found {found}")
    topic, partition, start, end = (obj[name] for name in ("topic", "partition", "log_start_offset",
                                                           "log_end_offset"))
    if type(topic) is not str:
        raise InvalidMessageError(f"expected a partition line's topic as a string, found {topic!r:.40}")
    if type(partition) is not int or partition < 0:
        raise InvalidMessageError(f"expected a partition line's partition as an integer of at least 0, "
                                  f"found {partition!r:.40}")
    if type(end) is not int or not 0 <= end <= _MAX_OFFSET:
        raise InvalidMessageError(f"expected a partition line's log_end_offset as an integer from 0 to "
                                  f"{_MAX_OFFSET}, found {end!r:.40}")
    if type(start) is not int or not 0 <= start <= end:
        raise InvalidMessageError(f"expected a partition line's log_start_offset from 0 to its "
                                  f"log_end_offset {end}, found {start!r:.40}")
    hw = obj.get("high_watermark")
    if hw is not None and (type(hw) is not int or not start <= hw <= end):
        raise InvalidMessageError(f"expected a partition line's high_watermark from its log_start_offset "
                                  f"{start} to its log_end_offset {end}, found {hw!r:.40}")
    if "leader_epochs" not in obj:
        return topic, partition, {"log_start": start, "log_end": end, "high_watermark": hw}
    given = obj["leader_epochs"]
    epochs: list[EpochEntry] = []
    for pair in given if type(given) is list else [given]:
        previous = epochs[-1] if epochs else EpochEntry(-1, start - 1)
        if not (type(pair) is list and len(pair) == 2 and all(type(x) is int for x in pair)
                and previous.epoch < pair[0] <= _MAX_EPOCH and previous.start_offset < pair[1] < end):
            raise InvalidMessageError(
                f"expected a partition line's leader_epochs as [epoch, start offset] pairs, epochs up to "
                f"{_MAX_EPOCH} and offsets from its log_start_offset {start} to before its log_end_offset "
                f"{end}, both rising, found {pair!r:.60}")
        epochs.append(EpochEntry(*pair))
    return topic, partition, {"log_start": start, "log_end": end, "high_watermark": hw,
                              "leader_epochs": epochs}


@dataclass(frozen=True, slots=True)
class _Batch:
    """The header fields of a dumped batch, as :func:`codec.encode_retained_batch` reads them."""

    base_offset: int
    last_offset: int
    timestamp_type: str
    max_timestamp: int
    compression: str
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool


@dataclass(frozen=True, slots=True)
class _Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _b64(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError) as err:
        raise InvalidMessageError(f"expected {what} as base64 (or null), found {str(value)[:40]!r} ({err})"
                                  ) from err


def _header_key(header: Mapping[str, Any]) -> str:
    """A dumped header's key: its ``key``, or with ``keyBase64`` (a key that is not UTF-8) those bytes,
    kept to be written as stored (a :class:`JavaText`), which must read as ``key`` as Java reads them.

    :raises InvalidMessageError: ``keyBase64`` that is not base64, or bytes Java reads as another text.
    """
    key = str(header["key"])
    if "keyBase64" not in header:
        return key
    raw = _b64(header["keyBase64"], "a header keyBase64")
    text = java_text(raw or b"")
    if text != key or not isinstance(text, JavaText):
        raise InvalidMessageError("expected a header keyBase64 of bytes that are not UTF-8 and read as its "
                                  f"key {cut(key)}, found {cut(text)}")
    return text


def _checked(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The batch object of a dump line whose fields are all there.

    :raises InvalidMessageError: a field missing or unknown, or a batch of the old formats.
    """
    batch = obj["batch"]
    if not isinstance(batch, dict):
        raise InvalidMessageError(f"expected a dump line's batch as an object, found {batch!r:.60}")
    unknown = sorted((set(obj) - DUMP_FIELDS) | {f"batch.{k}" for k in set(batch) - BATCH_FIELDS})
    missing = sorted((DUMP_FIELDS - _OPTIONAL - set(obj)) | {f"batch.{k}" for k in BATCH_FIELDS - set(batch)
                                                             if k not in _OPTIONAL_BATCH})
    if unknown or missing:
        found = f"unknown field(s) {unknown}" if unknown else f"no {missing}"
        raise InvalidMessageError(f"expected the fields of a Kafka dump --json line {sorted(DUMP_FIELDS)} "
                                  f"(batch: {sorted(BATCH_FIELDS)}), found {found}")
    if batch["magic"] != codec.MAGIC_V2:
        raise InvalidMessageError(f"expected a RecordBatch v2 (magic 2) to write, found magic "
                                  f"{batch['magic']} at offset {obj['offset']} (segstore writes v2 only: "
                                  "leave out the line's batch to append its record as a new one)")
    return {**_OPTIONAL_BATCH, **batch}


def _encoded(lines: list[Mapping[str, Any]]) -> bytes:
    """The batch the dump lines of one batch describe, encoded.

    :raises InvalidMessageError: the lines disagree on their batch, or a field is of the wrong kind.
    """
    first = lines[0]
    batch = _checked(first)
    kind = first["timestamp_type"]
    for line in lines[1:]:
        if line["batch"] != first["batch"] or line["timestamp_type"] != kind:
            raise InvalidMessageError(f"expected the records of the batch at offset {batch['base_offset']} "
                                      f"to agree on its fields, found offset {line['offset']} with others")
    log_append = kind == LOG_APPEND_TIME
    try:
        header = _Batch(int(batch["base_offset"]), int(batch["last_offset"]), kind,
                        int(batch["max_timestamp"]), str(batch["compression"]),
                        int(batch["partition_leader_epoch"]), int(batch["producer_id"]),
                        int(batch["producer_epoch"]), int(batch["base_sequence"]),
                        bool(batch["is_transactional"]), bool(batch["is_control"]))
        # a LogAppendTime record shows the append time: the create times stored are the batch's to give
        create_time = batch["base_timestamp"] if log_append and batch["base_timestamp"] is not None else None
        records = [_Record(int(line["offset"]),
                           int(line["timestamp"] if create_time is None else create_time),
                           _b64(line["key"], "a key"), _b64(line["value"], "a value"),
                           [(_header_key(h), _b64(h["value"], "a header value")) for h in line["headers"]])
                   for line in lines]
        _check_records(header, records)
        # the stored base and max timestamps: a batch a DeleteRecords cut shows only its records from
        # the log start, which keep their deltas from the stored base (``LocalLog.read`` serves it whole)
        stored = None if batch["base_timestamp"] is None else (int(batch["base_timestamp"]),
                                                                 header.max_timestamp)
        return codec.encode_retained_batch(header, records,  # type: ignore[arg-type]  # duck-typed batch
                                           delete_horizon_ms=int(batch["delete_horizon_ms"]),
                                           stored_keys=True, stored_times=stored)
    except InvalidMessageError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, struct.error) as err:
        # struct.error: a number past its field's width (a last_offset of 2**64) met at the header's pack
        raise InvalidMessageError(f"expected a Kafka dump --json line's fields of their kinds, found {err!r}"
                                  ) from err


def _placement(lines: list[Mapping[str, Any]]) -> tuple[int | None, int | None]:
    """Where the dump lines of one batch say their log lies: the base offset of the segment the batch
    is in (``batch.segment_base_offset``, at most the batch's base offset) and the partition's log
    start offset (the greatest ``log_start_offset`` of the lines, each at most the line's offset);
    None for what the lines leave out (a dump of an older segstore).

    :raises InvalidMessageError: a field that is not an integer, or one out of its range.
    """
    batch = lines[0]["batch"]
    base = batch.get("base_offset")
    segment = batch.get("segment_base_offset")
    if segment is not None and not (type(segment) is type(base) is int and 0 <= segment <= base):
        raise InvalidMessageError(f"expected a batch segment_base_offset from 0 to the batch's base offset "
                                  f"{base!r:.40}, found {segment!r:.40}")
    start: int | None = None
    for line in lines:
        if "log_start_offset" not in line:
            continue
        value, offset = line["log_start_offset"], line.get("offset")
        if not (type(value) is type(offset) is int and 0 <= value <= offset):
            raise InvalidMessageError(f"expected a log_start_offset from 0 to the line's offset "
                                      f"{offset!r:.40}, found {value!r:.40}")
        start = value if start is None else max(start, value)
    return segment, start


def _check_records(header: _Batch, records: list[_Record]) -> None:
    """The records of a batch in order within its offsets, and a control batch's ones the broker reads.

    :raises InvalidMessageError: offsets out of order or outside the batch's, or
        :func:`_check_control`'s.
    """
    offsets = [r.offset for r in records]
    if offsets != sorted(set(offsets)) or offsets[0] < header.base_offset or offsets[-1] > header.last_offset:
        raise InvalidMessageError(f"expected increasing record offsets within {header.base_offset}.."
                                  f"{header.last_offset}, found {offsets[:8]}")
    if header.is_control:
        _check_control(header, records)


def _check_control(header: _Batch, records: list[_Record]) -> None:
    """A control batch's records are ones the broker reads back: each a control record (a key of a
    version >= 0, an ABORT/COMMIT marker's value of 6 bytes, version >= 0), and the first an ABORT or
    COMMIT marker where the batch has a producer id.  Kafka 3.8 ``UnifiedLog.loadProducersFromRecords``
    hands every batch with a producer id to ``ProducerAppendInfo.append``, which reads a control
    batch's first record with ``EndTransactionMarker.deserialize``: another type, or a short value,
    throws, and the partition does not load (segstore's own reads refuse it too).

    :raises InvalidMessageError: a record the broker would not read.
    """
    for i, record in enumerate(records):
        try:
            kind, _ = codec.parse_control_record(record.key, record.value)
        except ValueError as err:
            raise InvalidMessageError(f"expected {err} (the control record at offset {record.offset})"
                                      ) from err
        if i == 0 and header.producer_id >= 0 and kind not in ("ABORT", "COMMIT"):
            raise InvalidMessageError(
                f"expected an ABORT or COMMIT marker as the control record of a batch with producer id "
                f"{header.producer_id} (Kafka reads it as an EndTransactionMarker), found a control record "
                f"of type {kind} at offset {record.offset}")


def write_lines(store: KafkaStore, lines: Iterable[Mapping[str, Any]]) -> int:
    """Append every line to ``store`` in order: runs of plain lines as new records (:data:`WRITE_CHUNK` at a
    time), the dump lines of each batch as that batch; returns the count."""
    count = 0
    plain: list[dict[str, Any]] = []    # plain dicts take append_batch's C path, others Message.coerce
    dumped: list[Mapping[str, Any]] = []
    # each partition's records bytes (an upper bound) in ``plain``, against its batch's limit
    pending: dict[tuple[str, int], int] = {}
    limits: dict[str, int] = {}

    def write_plain() -> None:
        if plain:
            store.append_batch(plain)
            plain.clear()
            pending.clear()

    def fits(obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` joins its partition's batch in ``plain`` (False: that batch is full); lines
        the encoder will refuse (a topic or partition of the wrong kind) are not counted."""
        topic, partition = obj.get("topic"), obj.get("partition", 0)
        if type(topic) is not str or type(partition) is not int:
            return True
        key = obj.get("key")
        if "partition" not in obj and isinstance(key, (str, bytes)):    # where append_batch routes it
            width = store.partition_widths().get(topic, 0)
            if width > 1:
                partition = partitioner.partition_for_key(key, width)
        limit = limits.get(topic)
        if limit is None:
            limit = limits[topic] = store.batch_records_limit(topic)
        held = pending.get((topic, partition), 0)
        size = _record_bound(obj)
        pending[(topic, partition)] = held + size
        return held == 0 or held + size <= limit

    def write_dumped() -> None:
        if dumped:
            data = _encoded(dumped)     # every field checked first
            segment_base, log_start = _placement(dumped)
            first = dumped[0]
            store.append_encoded(first["topic"], first["partition"], data,
                                 new_segment=first["batch"]["position"] == 0, segment_base=segment_base,
                                 log_start=log_start)
            dumped.clear()

    for obj in lines:
        if is_partition_line(obj):
            write_plain()
            write_dumped()
            topic, partition, extent = _partition_extent(obj)
            store.restore_extent(topic, partition, **extent)
            continue
        if is_dump_line(obj):
            write_plain()
            if dumped and _batch_key(obj) != _batch_key(dumped[0]):
                write_dumped()
            dumped.append(obj)
        else:
            write_dumped()
            check_line_fields(obj)
            obj = decode_base64_fields(obj)
            if not fits(obj):
                write_plain()
                fits(obj)
            plain.append(obj)
            if len(plain) >= WRITE_CHUNK:
                write_plain()
        count += 1
    write_plain()
    write_dumped()
    return count


def _bytes_bound(value: Any) -> int:
    """At most the bytes ``value`` (a key, value or header part) encodes to: a str's UTF-8 (4 bytes a
    code point at most, exact for ASCII), bytes their length; 0 for what the encoder refuses."""
    if isinstance(value, str):
        return len(value) if value.isascii() else 4 * len(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    return 0


def _record_bound(obj: Mapping[str, Any]) -> int:
    """At most the bytes a plain line's record takes in a batch (``arrowappend``'s overheads)."""
    size = RECORD_OVERHEAD + _bytes_bound(obj.get("key")) + _bytes_bound(obj.get("value"))
    headers = obj.get("headers")
    if isinstance(headers, (list, tuple)):
        for pair in headers:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                size += HEADER_OVERHEAD + _bytes_bound(pair[0]) + _bytes_bound(pair[1])
    return size


def _batch_key(obj: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    batch = obj["batch"]
    base = batch.get("base_offset") if isinstance(batch, dict) else None
    return obj.get("topic"), obj.get("partition"), base
