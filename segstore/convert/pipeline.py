"""The streaming conversion: read a source store in order, map each record, write the destination.

What a run does (``docs/conversion.md`` has the user's view):

1. Detect the source format; refuse an unknown one, a store two plugins claim, a
   conversion to the source's own format, and an existing destination (unless
   ``force``).
2. Write into a temporary sibling ``.DST.converting`` holding a small journal
   (:data:`JOURNAL_NAME`: the options and the state ``running`` / ``done``).  An
   interrupted run leaves only that sibling; ``resume`` reopens it, finds how far
   the destination got (Kafka: each partition's end offset; RocketMQ: the messages
   in the commitlog) and continues with the next source record.
3. With ``verify``, check the destination's files (``Store.verify``) and re-read
   every record, comparing it with the source mapped again.
4. Rename the sibling into place (an old destination is moved aside first with
   ``force`` and removed once the new one is in place).  The journal stays in the
   result as its provenance; a later conversion back reads the source config from it.

Memory is bounded whatever the store size: RocketMQ -> Kafka keeps at most
:data:`BATCH_RECORDS` records per partition and :data:`BUFFER_BYTES` in all;
Kafka -> RocketMQ holds one record per partition in the k-way merge that puts a
converted RocketMQ store back in commitlog order.

Not thread-safe: one conversion per destination (the stores' writer locks enforce it).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from segstore_kafka import batch as kafka_codec
from segstore_rocketmq.message import MESSAGE_MAGIC, Host, RocketMQMessage
from segstore_rocketmq.recovery import next_valid_message as next_valid_after

from segstore import files, registry
from segstore.api import open as open_store
from segstore.errors import ConversionError, CorruptDataError
from segstore.records import CREATE_TIME, LOG_APPEND_TIME

from . import COMPRESSIONS, TARGETS
from .mapping import (
    TIMESTAMP_SOURCES,
    KafkaEntry,
    came_from_kafka,
    came_from_rocketmq,
    kafka_to_rocketmq,
    restore_kafka,
    restore_rocketmq,
    rocketmq_to_kafka,
)

#: The journal in the temporary directory, kept in the result as its provenance.
JOURNAL_NAME = "segstore-convert.json"
JOURNAL_VERSION = 1
STATE_RUNNING = "running"
STATE_DONE = "done"
TEMP_SUFFIX = ".converting"
OLD_SUFFIX = ".replaced"
#: Records and source bytes per Kafka batch (well under the broker's default max.message.bytes,
#: 1,048,588, and never more than segment.bytes), and bytes buffered over all partitions
#: before every buffer is written.
BATCH_RECORDS = 500
BATCH_BYTES = 512 << 10
BUFFER_BYTES = 64 << 20
#: RocketMQ messages per commitlog write.
ROCKETMQ_BATCH = 1000
#: Kafka leader epoch written into converted batches (a batch field the conversion does not carry).
LEADER_EPOCH = 0
MASK32 = 0xFFFFFFFF
#: How many verify differences an error lists.
REPORT_LIMIT = 20


@dataclass
class ConversionReport:
    """What a conversion did."""

    src: str
    dst: str
    source_format: str
    target_format: str
    messages: int = 0
    bytes: int = 0
    already_present: int = 0
    skipped: list[str] = field(default_factory=list)
    verified: bool = False
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """The report as the CLI prints it."""
        rate = self.messages / self.seconds if self.seconds > 0 else 0.0
        out = [f"{self.src} ({self.source_format}) -> {self.dst} ({self.target_format}): "
               f"{self.messages} messages, {self.bytes} bytes in {self.seconds:.2f}s ({rate:.0f} msg/s)"]
        if self.already_present:
            out.append(f"resumed: {self.already_present} messages were already converted")
        out.extend(f"skipped corrupt data: {line}" for line in self.skipped)
        if self.verified:
            out.append("verified: every record matches the source")
        return out


# -- progress --------------------------------------------------------------------

@runtime_checkable
class _CountedBar(Protocol):
    """A bar that shows its count and total (tqdm's); ``progress.Bar`` does not promise them."""

    n: int
    total: int | None


class _Progress:
    """Conversion progress through :mod:`segstore.progress`: messages out of ``total`` (an estimate from
    the source's offset ranges), with the byte rate beside the bar.

    ``enabled`` True forces a bar on stderr, False none; None follows what the caller installed (the CLI:
    a bar on a terminal only), else a bar when stderr is a terminal.
    """

    def __init__(self, enabled: bool | None, label: str, total: int | None) -> None:
        from .. import progress

        self._stack = contextlib.ExitStack()
        if enabled is False:
            self._stack.enter_context(progress.reporting(progress.SILENT))
        elif progress.installed() is None and (enabled or sys.stderr.isatty()):
            self._stack.enter_context(progress.reporting(progress.TqdmSink()))
        self._bar = self._stack.enter_context(progress.bar(label, total, unit="msg"))
        self._start = time.perf_counter()
        self._bytes = 0

    def update(self, messages: int, nbytes: int) -> None:
        self._bytes += nbytes
        if self._bar is not None:
            bar = self._bar
            if isinstance(bar, _CountedBar) and bar.total is not None \
                    and bar.n + messages > bar.total:   # the estimate was short
                bar.total = bar.n + messages
            self._bar.update(messages)
            elapsed = time.perf_counter() - self._start
            if elapsed > 0 and self._bytes and hasattr(self._bar, "set_postfix_str"):
                self._bar.set_postfix_str(f"{self._bytes / elapsed / 1e6:.1f} MB/s", refresh=False)

    def close(self) -> None:
        self._stack.close()


def _source_messages(source: Any) -> int:
    """How many messages the source holds, from its offset ranges (the progress total; an estimate)."""
    return sum(end - start for topic in source.topics() for partition in source.partitions(topic)
               for start, end in [source.offset_range(topic, partition)])


# -- source readers ------------------------------------------------------------------

def _rocketmq_messages(source: Any, report: ConversionReport,
                       skip_corrupt: bool) -> Iterator[RocketMQMessage]:
    """Every commitlog message in physical order; with ``skip_corrupt`` damaged bytes are
    reported and reading goes on at the next valid message (found as recovery finds it)."""
    commitlog = source.commitlog
    start: int | None = None
    while True:
        try:
            for _, record in commitlog.walk(start):
                if isinstance(record, RocketMQMessage):
                    yield record
        except CorruptDataError as err:
            if not skip_corrupt:
                raise
            report.skipped.append(str(err))
            start = _next_valid_message(commitlog, err.path, err.pos or 0)
            if start is not None:
                continue
        return


def _next_valid_message(commitlog: Any, path: str | None, pos: int) -> int | None:
    """The physical offset of the first valid message after file position ``pos`` of ``path``."""
    segments = list(commitlog.log.segments)
    index = next((i for i, seg in enumerate(segments) if seg.path == path), None)
    if index is None:
        return None
    found = next_valid_after(segments, index, pos)
    return None if found is None else segments[found[0]].base + found[1]


def _kafka_entries(source: Any, topic: str, partition: int, report: ConversionReport,
                   skip_corrupt: bool) -> Iterator[tuple[KafkaEntry, int]]:
    """``(record with its batch flags, its encoded size)`` of one partition in offset order; with
    ``skip_corrupt`` a corrupt batch is reported and reading goes on after it (or, when its
    length cannot be trusted, at the next segment)."""
    part = source.partition_of(topic, partition)
    start = part.log_start_offset
    for seg in part.segments:
        pos: int | None = 0
        while pos is not None:
            try:
                for batch in seg.batches(pos):
                    control = batch.is_control
                    transactional = batch.is_transactional
                    # Legacy v0 sets have no timestamp type: their records (timestamp -1) come back as v2
                    # CreateTime records, the type Kafka itself gives them when it up-converts.
                    ts_type = LOG_APPEND_TIME if batch.timestamp_type == LOG_APPEND_TIME else CREATE_TIME
                    pid, epoch = batch.producer_id, batch.producer_epoch
                    for rec in batch.records():
                        if rec.offset < start:
                            continue
                        yield KafkaEntry(topic=topic, partition=partition, offset=rec.offset,
                                         timestamp=rec.timestamp, key=rec.key, value=rec.value,
                                         headers=list(rec.headers), timestamp_type=ts_type,
                                         transactional=transactional, control=control, producer_id=pid,
                                         producer_epoch=epoch), rec.size_in_bytes
                    pos = batch.position + batch.size
            except CorruptDataError as err:
                if not skip_corrupt:
                    raise
                report.skipped.append(str(err))
                pos = _after_batch(seg, pos)
            else:
                pos = None


def _after_batch(seg: Any, pos: int) -> int | None:
    """The position after the (damaged) batch at ``pos`` if its length field stays inside the
    segment, else None (the rest of the segment is skipped)."""
    try:
        header = kafka_codec.read_batch_header(seg.view(), pos, path=seg.path)
    except CorruptDataError:
        return None
    end = pos + header.size
    return end if pos < end < seg.size else None


def _physical_offset(item: tuple[KafkaEntry, int]) -> int:
    """The merge key: the ``rmq.physical_offset`` header every record of a converted partition starts with."""
    entry = item[0]
    if not came_from_rocketmq(entry.headers):
        raise ConversionError(f"expected every record of {entry.topic}-{entry.partition} (converted from "
                              f"RocketMQ) to start with the header rmq.physical_offset, found offset "
                              f"{entry.offset} without it")
    try:
        return int(entry.headers[0][1] or b"")
    except ValueError as err:
        raise ConversionError(f"expected a decimal rmq.physical_offset at {entry.topic}-{entry.partition} "
                              f"offset {entry.offset}, found {entry.headers[0][1]!r}") from err


def _kafka_in_order(source: Any, topics: list[str] | None, report: ConversionReport,
                    skip_corrupt: bool) -> Iterator[tuple[KafkaEntry, int]]:
    """``(record, size)`` in conversion order: partitions converted from RocketMQ merged back into
    commitlog order (k-way merge on ``rmq.physical_offset``), then the others partition by partition."""
    merged: list[Iterator[tuple[KafkaEntry, int]]] = []
    native: list[Iterator[tuple[KafkaEntry, int]]] = []
    for topic in source.topics():
        if topics is not None and topic not in topics:
            continue
        for partition in source.partitions(topic):
            entries = _kafka_entries(source, topic, partition, report, skip_corrupt)
            first = next(entries, None)
            if first is None:
                continue
            chained = _chain(first, entries)
            (merged if came_from_rocketmq(first[0].headers) else native).append(chained)
    if merged:
        yield from heapq.merge(*merged, key=_physical_offset)
    for entries in native:
        yield from entries


def _chain(first: tuple[KafkaEntry, int], rest: Iterator[tuple[KafkaEntry, int]]
           ) -> Iterator[tuple[KafkaEntry, int]]:
    yield first
    yield from rest


# -- RocketMQ -> Kafka -----------------------------------------------------------------

class _KafkaWriter:
    """Buffers entries per partition and appends them as record batches at their own offsets.

    A batch holds entries of one kind (timestamp type, transaction, producer; one
    store time with LogAppendTime so each record reads back its own time; a control
    record alone).  Entries at offsets the partition already holds (``resume``) are
    skipped; an offset below one already written is a :class:`ConversionError`.
    """

    def __init__(self, dest: Any, compression: str) -> None:
        self.dest = dest
        self.compression = compression
        self.segment_bytes = dest.config.segment_bytes
        self.batch_bytes = min(BATCH_BYTES, self.segment_bytes)
        self.buffers: dict[tuple[str, int], list[KafkaEntry]] = {}
        self.buffer_sizes: dict[tuple[str, int], int] = {}
        self.buffered = 0
        self.present: dict[tuple[str, int], int] = {}
        self.next: dict[tuple[str, int], int] = {}

    def _partition(self, key: tuple[str, int]) -> Any:
        return self.dest.partition_of(key[0], key[1], create=True)

    def add(self, entry: KafkaEntry, size: int) -> bool:
        """Buffer ``entry`` (about ``size`` bytes); False if the destination holds it already (resume)."""
        key = (entry.topic, entry.partition)
        if key not in self.next:
            end = self._partition(key).next_offset
            self.present[key] = end
            self.next[key] = end
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
        if entry.control or len(buffer) >= BATCH_RECORDS or self.buffer_sizes[key] >= self.batch_bytes:
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

    def _write(self, part: Any, entries: list[KafkaEntry]) -> None:
        """Append ``entries`` as one batch, or as halves while the batch would pass ``segment.bytes``
        (the buffer limit counts source bytes; the encoded records can be larger)."""
        base = part.next_offset
        deltas = [e.offset - base for e in entries]
        first = entries[0]
        log_append = first.timestamp_type == LOG_APPEND_TIME
        data = kafka_codec.encode_batch(
            [(e.key, e.value, e.timestamp, e.headers) for e in entries], base_offset=base,
            compression="none" if first.control else self.compression, partition_leader_epoch=LEADER_EPOCH,
            producer_id=first.producer_id, producer_epoch=first.producer_epoch,
            is_transactional=first.transactional, is_control=first.control,
            timestamp_type=first.timestamp_type, log_append_time=first.timestamp if log_append else None,
            offset_deltas=None if deltas[-1] == len(deltas) - 1 else deltas)
        if len(data) > self.segment_bytes and len(entries) > 1:
            half = len(entries) // 2
            self._write(part, entries[:half])
            self._write(part, entries[half:])
            return
        part.append_encoded(data, now_ms=max(e.timestamp for e in entries))

    def flush_all(self) -> None:
        for key in list(self.buffers):
            self.flush(key)


def _same_batch(a: KafkaEntry, b: KafkaEntry) -> bool:
    if (a.timestamp_type, a.transactional, a.control, a.producer_id, a.producer_epoch) != \
            (b.timestamp_type, b.transactional, b.control, b.producer_id, b.producer_epoch):
        return False
    return a.timestamp_type != LOG_APPEND_TIME or a.timestamp == b.timestamp


def _rocketmq_pairs(source: Any, topics: list[str] | None, timestamp: str, report: ConversionReport,
                    skip_corrupt: bool) -> Iterator[tuple[RocketMQMessage, KafkaEntry]]:
    """``(source message, Kafka entry)`` for each selected source message, in commitlog order;
    non-queued messages numbered in :data:`NONQUEUED_TOPIC`."""
    nonqueued = 0
    for msg in _rocketmq_messages(source, report, skip_corrupt):
        if topics is not None and msg.topic not in topics:
            continue
        entry = rocketmq_to_kafka(msg, timestamp=timestamp)
        if entry.offset < 0:
            entry.offset = nonqueued
            nonqueued += 1
        yield msg, entry


def _rocketmq_entries(source: Any, topics: list[str] | None, timestamp: str, report: ConversionReport,
                      skip_corrupt: bool) -> Iterator[tuple[KafkaEntry, int]]:
    """``(Kafka entry, source bytes)`` for each selected source message (:func:`_rocketmq_pairs`)."""
    for msg, entry in _rocketmq_pairs(source, topics, timestamp, report, skip_corrupt):
        yield entry, msg.size


def _to_kafka(source: Any, dest: Any, options: _Options, report: ConversionReport,
              progress: _Progress) -> None:
    writer = _KafkaWriter(dest, options.compression)
    pending_messages = pending_bytes = 0
    for entry, size in _rocketmq_entries(source, options.topics, options.timestamp, report,
                                         options.skip_corrupt):
        if writer.add(entry, size):
            report.messages += 1
            report.bytes += size
            pending_messages += 1
            pending_bytes += size
        else:
            report.already_present += 1
        if pending_messages >= BATCH_RECORDS:
            progress.update(pending_messages, pending_bytes)
            pending_messages = pending_bytes = 0
    writer.flush_all()
    progress.update(pending_messages, pending_bytes)


# -- Kafka -> RocketMQ -----------------------------------------------------------------

def _append_stored(store: Any, messages: list[RocketMQMessage]) -> None:
    """Append messages exactly as given (topic, queue, properties order, times, hosts, flags),
    checking each lands at its recorded physical and queue offset.

    ``RocketMQStore.append_batch`` applies the broker's put-time rules to what it is
    given (delay-level rewrite, HashMap properties order, store clock); a message
    restored from Kafka was stored once already and is written as it is with
    ``append_stored``; commitlog placement, consume queues, index, topic configs
    and flushing stay the store's own.

    :raises ConversionError: the destination placed a message elsewhere than the
        source had it (another commitlog file size, or a non-empty destination), or
        a message uses the v2 layout, which the store does not write.
    """
    for msg in messages:
        if msg.magic != MESSAGE_MAGIC:
            raise ConversionError(f"expected messages of the v1 layout (magic "
                                  f"0x{MESSAGE_MAGIC & MASK32:08X}), found magic 0x{msg.magic & MASK32:08X} "
                                  f"at source physical offset {msg.physical_offset}", store.path)
    expected = [(msg.physical_offset, msg.queue_offset) for msg in messages]
    results = store.append_stored(messages)
    for (physical, queue), result in zip(expected, results, strict=True):
        if (result.position, result.offset) != (physical, queue):
            raise ConversionError(
                f"expected {result.topic}/{result.partition} queue offset {queue} at physical offset "
                f"{physical} as in the source, found queue offset {result.offset} at {result.position} "
                f"(the destination was not empty, its mappedFileSizeCommitLog differs from the source's, "
                f"or an earlier message was stored with another size than in the source)",
                store.path, result.position)


def _native_item(msg: RocketMQMessage) -> dict[str, Any]:
    """The ``append_batch`` item for a message made from a native Kafka record (the store
    applies the broker's put-time conventions: HashMap properties order, host bits)."""
    return {"topic": msg.topic, "queue_id": msg.queue_id, "body": msg.body, "properties": msg.properties,
            "born_timestamp": msg.born_timestamp, "born_host": msg.born_host, "store_host": msg.store_host,
            "store_timestamp": msg.store_timestamp, "sys_flag": msg.sys_flag}


class _RocketMQWriter:
    """Groups messages into commitlog batches: restored ones through :func:`_append_stored`,
    native ones through the store's ``append_batch``."""

    def __init__(self, dest: Any) -> None:
        self.dest = dest
        self.restored: list[RocketMQMessage] = []
        self.native: list[dict[str, Any]] = []

    def add(self, msg: RocketMQMessage, restored: bool) -> None:
        if restored:
            if self.native:
                self.flush()
            self.restored.append(msg)
        else:
            if self.restored:
                self.flush()
            self.native.append(_native_item(msg))
        if len(self.restored) + len(self.native) >= ROCKETMQ_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.restored:
            _append_stored(self.dest, self.restored)
            self.restored = []
        if self.native:
            self.dest.append_batch(self.native)
            self.native = []


def _rocketmq_from_kafka(source: Any, options: _Options, report: ConversionReport,
                         store_host: Host) -> Iterator[tuple[RocketMQMessage, bool, int, KafkaEntry]]:
    """``(message, restored, source bytes, source record)`` in conversion order."""
    for entry, size in _kafka_in_order(source, options.topics, report, options.skip_corrupt):
        restored = came_from_rocketmq(entry.headers)
        yield kafka_to_rocketmq(entry, store_host=store_host), restored, size, entry


def _to_rocketmq(source: Any, dest: Any, options: _Options, report: ConversionReport,
                 progress: _Progress) -> None:
    present = sum(1 for _ in dest.scan())
    writer = _RocketMQWriter(dest)
    store_host = Host.parse(dest.config.storeHost)
    pending_messages = pending_bytes = 0
    for index, (msg, restored, size, _) in enumerate(_rocketmq_from_kafka(source, options, report,
                                                                          store_host)):
        if index < present:
            report.already_present += 1
            continue
        writer.add(msg, restored)
        report.messages += 1
        report.bytes += size
        pending_messages += 1
        pending_bytes += size
        if pending_messages >= ROCKETMQ_BATCH:
            progress.update(pending_messages, pending_bytes)
            pending_messages = pending_bytes = 0
    writer.flush()
    progress.update(pending_messages, pending_bytes)


# -- verification ----------------------------------------------------------------------

def kafka_entry_of(record: Any) -> KafkaEntry:
    """A record read from a Kafka store as a :class:`KafkaEntry` (what a conversion compares)."""
    batch = record.batch
    transactional = batch.is_transactional
    return KafkaEntry(topic=record.topic, partition=record.partition, offset=record.offset,
                      timestamp=record.timestamp, key=record.key, value=record.value, headers=record.headers,
                      timestamp_type=batch.timestamp_type, transactional=transactional,
                      control=batch.is_control,
                      producer_id=batch.producer_id, producer_epoch=batch.producer_epoch)


def _verify_kafka(source: Any, dest: Any, options: _Options, check: _Progress) -> list[str]:
    report = ConversionReport("", "", "", "")
    readers: dict[tuple[str, int], Iterator[Any]] = {}
    problems: list[str] = []
    pairs = _rocketmq_pairs(source, options.topics, options.timestamp, report, options.skip_corrupt)
    n = 0
    for n, (msg, expected) in enumerate(pairs, 1):
        if n % BATCH_RECORDS == 0:
            check.update(BATCH_RECORDS, 0)
        key = (expected.topic, expected.partition)
        if key not in readers:
            readers[key] = dest.read(*key)
        record = next(readers[key], None)
        found = None if record is None else kafka_entry_of(record)
        if found != expected:
            problems.append(f"{key[0]}-{key[1]} offset {expected.offset}: expected {expected}, found {found}")
        elif not came_from_kafka(msg):
            # The record must give back every field of the message (the mapping's inverse),
            # not only what the mapping made of it.
            problem = _restored_rocketmq_problem(msg, found)
            if problem is not None:
                problems.append(f"{key[0]}-{key[1]} offset {expected.offset}: {problem}")
        if len(problems) >= REPORT_LIMIT:
            break
    check.update(n % BATCH_RECORDS, 0)
    for key, reader in readers.items():
        extra = next(reader, None)
        if extra is not None and len(problems) < REPORT_LIMIT:
            problems.append(f"{key[0]}-{key[1]}: expected no record after the source's, found offset "
                            f"{extra.offset}")
    return problems


def _message_fields(msg: RocketMQMessage, restored: bool) -> tuple:
    common = (msg.topic, msg.queue_id, msg.body, msg.flag, msg.sys_flag, msg.born_timestamp, msg.born_host,
              msg.store_timestamp, msg.store_host, msg.reconsume_times, msg.prepared_transaction_offset)
    if restored:
        return (*common, list(msg.properties.items()), msg.physical_offset, msg.queue_offset, msg.magic,
                msg.trailing_separator)
    return (*common, sorted(msg.properties.items()))


def _restored_rocketmq_problem(msg: RocketMQMessage, found: KafkaEntry) -> str | None:
    """What the Kafka record ``found`` gives back differently from the message it was made from."""
    try:
        back = restore_rocketmq(found)
    except ConversionError as err:
        return str(err)
    want, got = _message_fields(msg, True), _message_fields(back, True)
    return None if got == want else f"expected the message back as {want}, found {got}"


def _restored_kafka_problem(entry: KafkaEntry, found: RocketMQMessage) -> str | None:
    """What the RocketMQ message ``found`` gives back differently from the Kafka record it was made from."""
    try:
        back = restore_kafka(found)
    except ConversionError as err:
        return str(err)
    return None if back == entry else f"expected the record back as {entry}, found {back}"


def _verify_rocketmq(source: Any, dest: Any, options: _Options, check: _Progress) -> list[str]:
    report = ConversionReport("", "", "", "")
    store_host = Host.parse(dest.config.storeHost)
    problems: list[str] = []
    actual = dest.scan()
    converted = _rocketmq_from_kafka(source, options, report, store_host)
    n = 0
    for n, (expected, restored, _, entry) in enumerate(converted, 1):
        if n % BATCH_RECORDS == 0:
            check.update(BATCH_RECORDS, 0)
        found = next(actual, None)
        want = _message_fields(expected, restored)
        got = None if found is None else _message_fields(found, restored)
        if got != want:
            problems.append(f"expected {want}, found {got}")
        elif not restored and found is not None:   # found: got == want, which is never None
            problem = _restored_kafka_problem(entry, found)
            if problem is not None:
                problems.append(f"{entry.topic}-{entry.partition} offset {entry.offset}: {problem}")
        if len(problems) >= REPORT_LIMIT:
            break
    check.update(n % BATCH_RECORDS, 0)
    extra = next(actual, None)
    if extra is not None and len(problems) < REPORT_LIMIT:
        problems.append(f"expected no message after the source's, found one at {extra.physical_offset}")
    return problems


# -- the run -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Options:
    to: str
    topics: list[str] | None
    compression: str
    config: dict[str, Any]
    timestamp: str
    skip_corrupt: bool

    def journal(self, src: str, source_format: str) -> dict[str, Any]:
        return {"version": JOURNAL_VERSION, "src": src if files.is_url(src) else os.path.abspath(src),
                "source_format": source_format,
                "to": self.to, "topics": self.topics, "compression": self.compression,
                "config": self.config, "timestamp": self.timestamp}


def temp_path(dst: str) -> str:
    """The temporary sibling a conversion into ``dst`` writes to."""
    parent, name = os.path.split(os.path.abspath(dst))
    return os.path.join(parent, f".{name}{TEMP_SUFFIX}")


def _check_options(to: str, compression: str, timestamp: str) -> None:
    if to not in TARGETS:
        raise ConversionError(f"expected a target format of {', '.join(TARGETS)}, found {to!r}")
    if compression not in COMPRESSIONS:
        raise ConversionError(f"expected a compression of {', '.join(COMPRESSIONS)}, found {compression!r}")
    if to == "rocketmq" and compression != "none":
        raise ConversionError(f"expected no --compression for a RocketMQ destination, found {compression!r}")
    if timestamp not in TIMESTAMP_SOURCES:
        raise ConversionError(f"expected a timestamp source of {', '.join(TIMESTAMP_SOURCES)}, "
                              f"found {timestamp!r}")


def _read_journal(path: str) -> dict[str, Any] | None:
    journal = os.path.join(path, JOURNAL_NAME)
    if not files.is_file(journal):
        return None
    try:
        return json.loads(files.read_text(journal))
    except ValueError as err:
        raise ConversionError(f"expected a JSON conversion journal, found {err}", journal) from err


def _write_journal(path: str, data: dict[str, Any]) -> None:
    files.write_atomic(os.path.join(path, JOURNAL_NAME), json.dumps(data, indent=1, sort_keys=True) + "\n")


def _local_part(src: str) -> str:
    """The local path a source names: itself, a ``file://`` URL's path, "" for other URLs (a
    remote source cannot overlap a local destination)."""
    if not files.is_url(src):
        return src
    return urllib.parse.urlparse(src).path if src.lower().startswith("file://") else ""


def _prepare(src: str, dst: str, tmp: str, options: _Options, source_format: str, resume: bool,
             force: bool) -> dict[str, Any]:
    """Check the destination and create (or, resuming, check) the temporary directory; returns the journal."""
    local, target = _local_part(src), os.path.realpath(dst)
    source = os.path.realpath(local) if local else ""
    if source and os.path.commonpath([source, target]) in (source, target):
        raise ConversionError(f"expected a destination outside the source and not containing it, found "
                              f"{target} and source {source}", dst)
    if files.exists(dst) and not force:
        raise ConversionError("expected a destination that does not exist, found one "
                              "(pass --force to replace it)", dst)
    wanted = options.journal(src, source_format)
    if resume:
        journal = _read_journal(tmp)
        if journal is None:
            raise ConversionError("expected an interrupted conversion to resume, found none", tmp)
        recorded = {k: journal.get(k) for k in wanted}
        if recorded != wanted:
            raise ConversionError(f"expected to resume the same conversion, found one with other options: "
                                  f"{recorded} (this run: {wanted})", tmp)
        return journal
    if files.exists(tmp):
        if not force:
            raise ConversionError("expected no interrupted conversion, found one "
                                  "(pass --resume to continue it or --force to start over)", tmp)
        files.remove_tree(tmp)
    files.make_dirs(tmp)
    journal = {**wanted, "state": STATE_RUNNING}
    _write_journal(tmp, journal)
    return journal


def _destination_config(src: str, options: _Options) -> dict[str, Any]:
    """User config over the config recorded when ``src`` itself was converted from ``options.to``."""
    journal = _read_journal(src)
    recorded: dict[str, Any] = {}
    if journal is not None and journal.get("source_format") == options.to:
        recorded = dict(journal.get("source_config") or {})
    return {**recorded, **options.config}


def _source_config(source: Any) -> dict[str, Any]:
    config = getattr(source, "config", None)
    as_dict = getattr(config, "as_dict", None)
    return as_dict() if as_dict is not None else {}


def _install(tmp: str, dst: str) -> None:
    """Rename ``tmp`` to ``dst``; an existing ``dst`` (``force``) is moved aside first, then removed.

    A replaced destination left aside by an install that was itself interrupted is removed too.
    """
    old = f"{temp_path(dst)[:-len(TEMP_SUFFIX)]}{OLD_SUFFIX}"
    _remove(old)
    if files.exists(dst):
        files.rename(dst, old)
    files.rename(tmp, dst)
    files.fsync_dir(os.path.dirname(os.path.abspath(dst)))
    _remove(old)


def _remove(path: str) -> None:
    if files.is_dir(path):
        files.remove_tree(path)
    elif files.exists(path):
        files.remove(path)


def run(src: str, dst: str, *, to: str, topics: list[str] | None, compression: str, config: dict[str, Any],
        resume: bool, verify: bool, force: bool, skip_corrupt: bool, progress: bool | None,
        timestamp: str) -> ConversionReport:
    """Run one conversion (see :func:`segstore.convert.convert`)."""
    _check_options(to, compression, timestamp)
    if not files.is_dir(src):
        raise ConversionError("expected a source store directory, found none", src)
    source_format = registry.detect(src)
    if source_format not in TARGETS:
        raise ConversionError(f"expected a source of format {' or '.join(TARGETS)}, "
                              f"found {source_format!r}", src)
    if source_format == to:
        raise ConversionError(f"expected a source of another format than the target {to!r}, "
                              f"found {to!r}", src)
    options = _Options(to=to, topics=None if topics is None else sorted(set(topics)), compression=compression,
                       config=dict(config), timestamp=timestamp, skip_corrupt=skip_corrupt)
    tmp = temp_path(dst)
    journal = _prepare(src, dst, tmp, options, source_format, resume, force)
    report = ConversionReport(src=src, dst=dst, source_format=source_format, target_format=to)
    started = time.perf_counter()
    bar = None
    try:
        with open_store(src, format=source_format, mode="r") as source:
            bar = _Progress(progress, f"convert {source_format} -> {to}", _source_messages(source))
            journal["source_config"] = _source_config(source)
            dest_config = _destination_config(src, options)
            with open_store(tmp, format=to, mode="a", **dest_config) as dest:
                if to == "kafka":
                    _to_kafka(source, dest, options, report, bar)
                else:
                    _to_rocketmq(source, dest, options, report, bar)
    finally:
        if bar is not None:
            bar.close()
    report.seconds = time.perf_counter() - started
    journal.update(state=STATE_DONE, messages=report.messages + report.already_present)
    _write_journal(tmp, journal)
    if verify:
        check = _Progress(progress, f"convert {source_format} -> {to}: verify", report.messages
                          + report.already_present)
        try:
            _verify(src, source_format, tmp, options, dest_config, check)
        finally:
            check.close()
        report.verified = True
    _install(tmp, dst)
    return report


def _verify(src: str, source_format: str, tmp: str, options: _Options, dest_config: dict[str, Any],
            check: _Progress) -> None:
    """Check the converted files and compare every record with the source.

    :raises ConversionError: a finding; the temporary directory is kept for inspection.
    """
    with open_store(src, format=source_format, mode="r") as source, \
            open_store(tmp, format=options.to, mode="r", **dest_config) as dest:
        findings = [str(p) for p in dest.verify()][:REPORT_LIMIT]
        if not findings:
            compare = _verify_kafka if options.to == "kafka" else _verify_rocketmq
            findings = compare(source, dest, options, check)
    if findings:
        raise ConversionError(f"expected the converted store to match the source, found {len(findings)} "
                              f"difference(s) (kept for inspection): " + "; ".join(findings[:3]), tmp)


__all__ = ["ConversionReport", "kafka_entry_of", "run", "temp_path"]
