"""The four layouts over a Kafka partition (or every partition of a log directory).

- ``offset`` (native): the segment's sparse ``.index``.
- ``time`` (native): the segment's sparse ``.timeindex``.
- ``queue`` (extra): a dense, ConsumeQueue-style index: one 20-byte entry per
  offset, ``[i8 batch position][i4 batch size][i8 tags code (0: Kafka has no tags)]``,
  in the RocketMQ plugin's own :class:`ConsumeQueue` files under
  ``PARTITION/.segstore/queue/consumequeue/``.  A lookup is one slot read and one
  batch decode, with no binary search and no scan; it costs 20 bytes per record.
  Offsets missing from the log (compaction) point at the batch holding the
  next offset, as a fetch from them would.
- ``key`` (extra): a RocketMQ IndexFile-style hash index (the RocketMQ plugin's
  :class:`IndexService`) under ``PARTITION/.segstore/key/``, keyed by
  ``topic#key`` for the record key and for the values of the headers named in
  ``key.index.headers``; entries hold the record's offset where RocketMQ holds a
  commitlog position.  Candidates are checked against the log, so a hash
  collision never returns another key's record.

Thread-safety: as the owning store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
from segstore_kafka.store import KafkaRecord, KafkaStore
from segstore_rocketmq.consumequeue import CQ_DTYPE, ConsumeQueue
from segstore_rocketmq.indexfile import IndexRequest, IndexService, build_key, index_key_hashes

from segstore import files
from segstore.errors import CorruptIndexError
from segstore.records import Record
from segstore.store import Problem

from .base import INDEX_ROOT, ExtraLayout, IndexT, Layout, Stream, StreamIndex

QUEUE_FILES_DIR = "consumequeue"
NO_TAGS_CODE = 0
TIME_MIN, TIME_MAX = -(2**63), 2**63 - 1
#: Records decoded per IndexFile put while building the key index.
KEY_BATCH = 8192


def key_text(value: bytes) -> str:
    """A key as the string the IndexFile hashes (bytes that are not UTF-8 kept by surrogate escapes)."""
    return bytes(value).decode("utf-8", "surrogateescape")


class OffsetLayout(Layout):
    """``offset`` on Kafka: the segments' own sparse ``.index`` files (native)."""

    name = "offset"
    native = True
    format = "kafka"
    answers = frozenset({"offset"})

    def read_at(self, stream: Stream, offset: int) -> Record | None:
        """Segment floor, binary search of its ``.index``, then a hop over batch headers."""
        if not self._check_range(stream, offset):
            return None
        return next(self.store.read(stream.topic, stream.partition, offset, 1), None)


class TimeLayout(Layout):
    """``time`` on Kafka: the segments' own sparse ``.timeindex`` files (native)."""

    name = "time"
    native = True
    format = "kafka"
    answers = frozenset({"time"})

    def offset_for_time(self, stream: Stream, timestamp: int) -> int | None:
        return self.store.offset_for_time(stream.topic, stream.partition, timestamp)


def _batch_headers(part: Any, start: int, end: int) -> Iterator[Any]:
    """Headers of the batches holding offsets in ``[start, end)``, in order (no record decode)."""
    found = part.translate_offset(start)
    if found is None:
        return
    seg, where = found
    for current in part.log.segments.values(seg.base):
        for header in current.headers(where.position if current is seg else 0):
            if header.base_offset >= end:
                return
            yield header


class QueueStreamIndex(StreamIndex):
    """Dense per-offset entries of one partition in ConsumeQueue files."""

    store: KafkaStore

    def _part(self) -> Any:
        return self.store.partition_of(self.stream.topic, self.stream.partition)

    def _open_files(self) -> None:
        self.cq = ConsumeQueue(os.path.join(self.directory, QUEUE_FILES_DIR), self.stream.topic,
                               self.stream.partition, self.options["layout.queue.file.bytes"],
                               writable=self.writable)

    def _rows(self, start: int, end: int) -> tuple[np.ndarray, int]:
        """Entries for offsets ``start ..`` up to the last whole batch before ``end``, and where they stop."""
        lasts, positions, sizes = [], [], []
        for header in _batch_headers(self._part(), start, end):
            lasts.append(header.last_offset)
            positions.append(header.position)
            sizes.append(header.size)
        if not lasts:
            return np.zeros(0, dtype=CQ_DTYPE), start
        last = np.asarray(lasts, dtype=np.int64)
        covers = np.diff(np.concatenate(([start - 1], last)))
        rows = np.empty(int(covers.sum()), dtype=CQ_DTYPE)
        rows["offset"] = np.repeat(np.asarray(positions, dtype=np.int64), covers)
        rows["size"] = np.repeat(np.asarray(sizes, dtype=np.int64), covers)
        rows["tags_code"] = NO_TAGS_CODE
        return rows, int(last[-1]) + 1

    def _index_from(self, start: int) -> int:
        rows, done = self._rows(start, self.log_end())
        if not len(rows):
            return start
        cq = self.cq
        if cq.log.active is None:
            entry_size = CQ_DTYPE.itemsize
            base = (start * entry_size) // cq.file_size * cq.file_size
            cq.log.roll(base)
            rows = np.concatenate([np.repeat(rows[:1], start - base // entry_size), rows])
        elif cq.max_offset != start:
            raise CorruptIndexError(f"expected the dense index to end at offset {start}, "
                                    f"found {cq.max_offset}",
                                    cq.directory)
        cq.append_array(rows)
        return done

    def _cut_to(self, offset: int) -> int:
        cq = self.cq
        if cq.log.active is None or offset <= cq.min_offset:
            self._discard()
            return self.log_start()
        restart = min(offset, cq.max_offset)
        cq.truncate(restart)
        return restart

    def read_at(self, offset: int) -> KafkaRecord | None:
        """One slot, one batch decode.  ``O(log segments)`` for the segment, ``O(1)`` for the slot."""
        cq = self.cq
        if not cq.min_offset <= offset < min(cq.max_offset, self.state.indexed_end):
            return next(self.store.read(self.stream.topic, self.stream.partition, offset, 1), None)
        row = cq.entries(offset, 1)[0]
        part = self._part()
        seg = part.log.segment_for(offset)
        batch = next(seg.batches(int(row["offset"])))
        for record in batch.records():
            if record.offset >= offset:
                return KafkaRecord(part.topic, part.partition, batch, record)
        return None

    def _expected_problems(self) -> list[Problem]:
        start = max(self.log_start(), self.cq.min_offset)
        expected, _ = self._rows(start, self.state.indexed_end)
        found = self.cq.entries(start, len(expected)) if len(expected) else np.zeros(0, dtype=CQ_DTYPE)
        n = min(len(found), len(expected))
        diff = np.flatnonzero(found[:n] != expected[:n])
        if len(diff) or len(found) != len(expected):
            slot = int(diff[0]) if len(diff) else n
            seg = self.cq.log.segment_for((start + slot) * CQ_DTYPE.itemsize)
            path = seg.file.path if seg is not None else self.cq.directory
            pos = ((start + slot) * CQ_DTYPE.itemsize - seg.base) if seg is not None else None
            want = tuple(expected[slot].tolist()) if slot < len(expected) else "no entry"
            got = tuple(found[slot].tolist()) if slot < len(found) else "no entry"
            return [Problem(path, pos, f"expected {want} for offset {start + slot}, found {got}")]
        return []

    def _flush_files(self) -> None:
        self.cq.flush()

    def _close_files(self) -> None:
        if hasattr(self, "cq"):
            self.cq.close()
            del self.cq


class KeyStreamIndex(StreamIndex):
    """``topic#key`` -> offset entries of one partition in IndexFiles."""

    store: KafkaStore

    def _open_files(self) -> None:
        self.service = IndexService(self.directory, self.options["key.index.slots"],
                                    self.options["key.index.entries"], writable=self.writable)
        bad = self.service.load()
        if bad:
            self.service.close()
            raise CorruptIndexError(f"expected index files of {self.options['key.index.slots']} slots and "
                                    f"{self.options['key.index.entries']} entries, found others: {bad}",
                                    self.directory)

    @property
    def header_names(self) -> frozenset[str]:
        """The headers indexed as keys (``key.index.headers``, as the index was built)."""
        names = self.options["key.index.headers"]
        if getattr(self, "_names_from", None) != names:
            self._names_from = names
            self._names = frozenset(name for name in names.split(",") if name)
        return self._names

    def keys_of(self, record: Any) -> list[bytes]:
        """The values a record is indexed under: its key, then the named headers present."""
        out = [] if record.key is None else [bytes(record.key)]
        names = self.header_names
        if names:
            out.extend(bytes(v) for k, v in record.headers if k in names and v is not None)
        return out

    def _records(self, start: int, end: int) -> Iterator[Any]:
        for record in self.store.read(self.stream.topic, self.stream.partition, start):
            if record.offset >= end:
                return
            if not record.batch.is_control:
                yield record

    def _index_from(self, start: int) -> int:
        """Decode the batches from ``start`` and put one entry per key, a batch of puts at a time."""
        end = self.log_end()
        pending: list[IndexRequest] = []
        topic = self.stream.topic
        names = self.header_names
        part = self.store.partition_of(topic, self.stream.partition)
        for batch in part.batches(start):
            if batch.base_offset >= end:
                break
            if batch.is_control:
                continue
            for record in batch.records():
                if not start <= record.offset < end:
                    continue
                if record.key is not None:
                    pending.append(IndexRequest(topic, record.offset, record.timestamp, key_text(record.key),
                                                None))
                if names:
                    pending.extend(IndexRequest(topic, record.offset, record.timestamp, key_text(v), None)
                                   for k, v in record.headers if k in names and v is not None)
            if len(pending) >= KEY_BATCH:
                self.service.put_batch(pending)
                pending = []
        self.service.put_batch(pending)
        return end

    def _cut_to(self, offset: int) -> int:
        """Drop the files holding entries at or past ``offset``, and the last file before them."""
        service = self.service
        keep = [f for f in service.files if f.count and f.header.begin_phy_offset < offset]
        for f in [f for f in service.files if f not in keep]:
            f.close()
            files.remove(f.path)
        restart = self.log_start()
        if keep:
            last = keep.pop()
            restart = last.header.begin_phy_offset
            last.close()
            files.remove(last.path)
        service.files = keep
        return min(restart, offset)

    def find_key(self, key: bytes, max_hits: int | None) -> list[int]:
        """Offsets of records carrying ``key``: the hash chain for indexed offsets, a scan for the tail.

        ``O(chain length)`` index reads plus one record read per candidate.
        """
        start, indexed = self.log_start(), self.state.indexed_end
        hits: set[int] = set()
        for offset in self.service.query(self.stream.topic, key_text(key), TIME_MIN, TIME_MAX):
            if offset in hits or not start <= offset < indexed:
                continue
            record = next(self.store.read(self.stream.topic, self.stream.partition, offset, 1), None)
            if record is not None and record.offset == offset and key in self.keys_of(record):
                hits.add(offset)
        for record in self._records(max(indexed, start), self.log_end()):
            if key in self.keys_of(record):
                hits.add(record.offset)
        ordered = sorted(hits)
        return ordered if max_hits is None else ordered[len(ordered) - max_hits:] if max_hits > 0 else []

    def _expected_problems(self) -> list[Problem]:
        topic = self.stream.topic
        keys, offsets = [], []
        for record in self._records(self.log_start(), self.state.indexed_end):
            for key in self.keys_of(record):
                keys.append(build_key(topic, key_text(key)))
                offsets.append(record.offset)
        expected = np.zeros(len(keys), dtype=[("hash", "<i8"), ("offset", "<i8")])
        expected["hash"] = index_key_hashes(keys)
        expected["offset"] = offsets
        stored = [f.entries for f in self.service.files]
        found_rows = np.concatenate(stored) if stored else np.zeros(0, dtype=expected.dtype)
        found = np.zeros(len(found_rows), dtype=expected.dtype)
        if len(found_rows):
            found["hash"] = found_rows["hash"]
            found["offset"] = found_rows["phy_offset"]
            found = found[found["offset"] >= self.log_start()]
        expected.sort(order=["offset", "hash"])
        found.sort(order=["offset", "hash"])
        if len(expected) != len(found) or np.any(expected != found):
            n = min(len(expected), len(found))
            diff = np.flatnonzero(expected[:n] != found[:n])
            slot = int(diff[0]) if len(diff) else n
            want = tuple(expected[slot].tolist()) if slot < len(expected) else "no entry"
            got = tuple(found[slot].tolist()) if slot < len(found) else "no entry"
            return [Problem(self.directory, None, f"expected (hash, offset) entry {want} "
                            f"(entry {slot} in offset order), found {got}")]
        return []

    def _flush_files(self) -> None:
        self.service.flush()

    def _close_files(self) -> None:
        if hasattr(self, "service"):
            self.service.close()
            del self.service


class _ExtraPartitionLayout(ExtraLayout[IndexT]):
    format = "kafka"
    store: KafkaStore

    def directory(self, stream: Stream) -> str:
        part = self.store.partition_of(stream.topic, stream.partition)
        return os.path.join(part.path, INDEX_ROOT, self.name)

    def lock_paths(self) -> list[str]:
        return [os.path.join(self.store.partition_of(s.topic, s.partition).path, INDEX_ROOT,
                             f"{self.name}.lock") for s in self.streams()]


class QueueLayout(_ExtraPartitionLayout[QueueStreamIndex]):
    """``queue`` on Kafka: dense ConsumeQueue-style entries per partition (extra)."""

    name = "queue"
    answers = frozenset({"offset"})
    stream_class = QueueStreamIndex

    def read_at(self, stream: Stream, offset: int) -> Record | None:
        if not self._check_range(stream, offset):
            return None
        return self._index(stream).read_at(offset)


class KeyLayout(_ExtraPartitionLayout[KeyStreamIndex]):
    """``key`` on Kafka: IndexFile-style key hash index per partition (extra)."""

    name = "key"
    answers = frozenset({"key"})
    stream_class = KeyStreamIndex

    def find_key(self, stream: Stream, key: bytes, max_hits: int | None = None) -> list[int]:
        return self._index(stream).find_key(bytes(key), max_hits)



