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

from collections.abc import Iterator
from typing import Any

from segstore.convert.interchange import Entry, FormatConversion, Options, Peer, Sized, Verifier, Writer
from segstore.convert.topicnames import WORD_CHARS, TopicRules
from segstore.errors import ConversionError, CorruptDataError
from segstore.records import CREATE_TIME, LOG_APPEND_TIME
from segstore.store import Store

from . import batch as codec
from .partition import MAX_TOPIC_LENGTH

#: Kafka topic names (``Topic.validate``): ``[a-zA-Z0-9._-]``, at most 249 characters, not ``.``
#: or ``..``; a peer's characters Kafka lacks are escaped as ``.XX``.
TOPICS = TopicRules("Kafka", WORD_CHARS + "._-", "[a-zA-Z0-9._-]", MAX_TOPIC_LENGTH, ".",
                    frozenset({".", ".."}))

#: Source bytes per batch (well under the broker's default max.message.bytes, 1,048,588, and
#: never more than segment.bytes), and bytes buffered over all partitions before every buffer
#: is written.
BATCH_BYTES = 512 << 10
BUFFER_BYTES = 64 << 20
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

def partition_entries(source: Any, topic: str, partition: int, options: Options) -> Iterator[Sized]:
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

class KafkaWriter(Writer):
    """Buffers entries per partition and appends them as record batches at their own offsets.

    Entries at offsets the partition already holds (``resume``) are skipped; an offset
    below one already written is a :class:`ConversionError`.
    """

    def __init__(self, dest: Any, options: Options) -> None:
        self.dest = dest
        self.compression = options.compression
        self.batch_records = options.batch_records
        self.segment_bytes = dest.config.segment_bytes
        self.batch_bytes = min(BATCH_BYTES, self.segment_bytes)
        self.buffers: dict[tuple[str, int], list[Entry]] = {}
        self.buffer_sizes: dict[tuple[str, int], int] = {}
        self.buffered = 0
        self.present: dict[tuple[str, int], int] = {}
        self.next: dict[tuple[str, int], int] = {}

    def _partition(self, key: tuple[str, int]) -> Any:
        return self.dest.partition_of(key[0], key[1], create=True)

    def add(self, entry: Entry, size: int) -> bool:
        key = (entry.topic, entry.partition)
        if key not in self.next:
            end = self._partition(key).next_offset
            self.present[key] = end
            self.next[key] = end
        if entry.offset < self.present[key]:
            return False
        if entry.offset < self.next[key]:
            raise ConversionError(f"expected offsets to increase in {key[0]}-{key[1]}, found offset "
                                  f"{entry.offset} after {self.next[key] - 1}")
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
        """Append ``entries`` as one batch, or as halves while the batch would pass ``segment.bytes``
        (the buffer limit counts source bytes; the encoded records can be larger)."""
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


def _same_batch(a: Entry, b: Entry) -> bool:
    if (a.timestamp_type, a.transactional, a.control, a.producer_id, a.producer_epoch) != \
            (b.timestamp_type, b.transactional, b.control, b.producer_id, b.producer_epoch):
        return False
    return a.timestamp_type != LOG_APPEND_TIME or a.timestamp == b.timestamp


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

    def streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """One stream per selected partition, in offset order."""
        store: Any = source
        return [partition_entries(store, topic, partition, options)
                for topic in store.topics() if options.topics is None or topic in options.topics
                for partition in store.partitions(topic)]

    def entry_of(self, record: Any, peer: Peer | None = None) -> Entry:
        """A record read from a Kafka store as its entry (the same whatever the peer)."""
        return entry_of(record)

    def writer(self, dest: Store, options: Options) -> Writer:
        return KafkaWriter(dest, options)

    def verifier(self, dest: Store, options: Options) -> Verifier:
        return KafkaVerifier(dest, options)
