"""The four layouts over a RocketMQ store.

- ``queue`` (native): the consume queue, dense 20-byte entries per queue offset.
- ``key`` (native): the broker's IndexFile (``topic#key`` hash slots and chains).
- ``offset`` (extra): a Kafka-style sparse offset index per queue, one entry per
  ``layout.interval.bytes`` of the queue's messages: queue offset -> commitlog
  position.  A lookup walks the commitlog from the entry (skipping other queues'
  messages) instead of reading the consume queue.
- ``time`` (extra): a Kafka-style sparse time index per queue (max store time so
  far -> queue offset), so ``offset_for_time`` is one binary search plus a short
  forward scan instead of the broker's binary search reading the commitlog at
  every probe.

Store times are read in bulk straight from the commitlog map with numpy
(:func:`store_timestamps`): the field sits at a fixed place in every message once
the born-host family is known.

Thread-safety: as the owning store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from segstore_kafka.offsetindex import OFFSET_ENTRY, OffsetIndex
from segstore_kafka.timeindex import NO_TIMESTAMP, TIME_ENTRY, TimeIndex
from segstore_rocketmq.indexfile import IndexService
from segstore_rocketmq.message import (
    FIXED,
    IPV4_HOST,
    IPV6_HOST,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_POS,
    RocketMQMessage,
)
from segstore_rocketmq.query import query_by_key
from segstore_rocketmq.store import INDEX_DIR, RocketMQStore, has_queue_entry

from segstore import files
from segstore.errors import CorruptDataError, NotFoundError, OffsetOutOfRangeError, UnsupportedOperationError
from segstore.records import Record
from segstore.search import Bound
from segstore.store import Problem, Store

from .base import INDEX_ROOT, ExtraLayout, IndexT, Layout, Stream, sparse_points
from .sparse import IndexFileT, SparseFiles

SYSFLAG_FIELD = np.dtype(">i4")
STORE_TIMESTAMP_FIELD = np.dtype(">i8")
assert (SYSFLAG_FIELD.itemsize, STORE_TIMESTAMP_FIELD.itemsize) == (4, 8)
#: Where STORETIMESTAMP sits in a message: after the born host (IPv4 8 bytes, IPv6 20).
STORE_TIMESTAMP_POS_V4 = FIXED.size + IPV4_HOST.size
STORE_TIMESTAMP_POS_V6 = FIXED.size + IPV6_HOST.size
assert (STORE_TIMESTAMP_POS_V4, STORE_TIMESTAMP_POS_V6) == (56, 68)

#: Entries read per step of a forward scan (time lookups).
SCAN_CHUNK = 1024
#: Digits of a base offset in a file name (Kafka's ``%020d``).
NAME_DIGITS = 20
TIME_MIN = -(2**63)
#: No cap on key hits (the broker caps at maxMsgsNumBatch; the caller caps here).
NO_HIT_LIMIT = 2**31 - 1


def _gather(raw: np.ndarray, positions: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``dtype`` values at byte ``positions`` of ``raw`` (uint8), one fancy-index, no Python loop."""
    cells = raw[positions[:, None] + np.arange(dtype.itemsize)]
    return np.ascontiguousarray(cells).view(dtype).ravel()


def store_timestamps(store: Any, phys: np.ndarray) -> np.ndarray:
    """STORETIMESTAMP of the messages at commitlog offsets ``phys`` (int64).  ``O(n)`` in numpy."""
    phys = np.asarray(phys, dtype=np.int64)
    out = np.empty(len(phys), dtype=np.int64)
    if not len(phys):
        return out
    commitlog = store.commitlog
    bases = phys - phys % commitlog.file_size
    for base in np.unique(bases).tolist():
        seg = commitlog.file_for(base)
        chosen = bases == base
        rel = phys[chosen] - base
        raw = seg.file.array(np.uint8)
        flags = _gather(raw, rel + SYSFLAG_POS, SYSFLAG_FIELD)
        where = rel + np.where(flags & SYSFLAG_BORNHOST_V6, STORE_TIMESTAMP_POS_V6, STORE_TIMESTAMP_POS_V4)
        out[chosen] = _gather(raw, where, STORE_TIMESTAMP_FIELD)
    return out


def _queue(store: Any, stream: Stream) -> Any:
    cq = store.queues.get((stream.topic, stream.partition))
    if cq is None:
        raise NotFoundError(f"expected a consume queue for {stream}, found none", store.path)
    return cq


class QueueLayout(Layout):
    """``queue`` on RocketMQ: the broker's consume queue (native)."""

    name = "queue"
    native = True
    format = "rocketmq"
    answers = frozenset({"offset"})

    def read_at(self, stream: Stream, offset: int) -> Record | None:
        """One consume-queue entry, one commitlog read.  ``O(log files)``."""
        if not self._check_range(stream, offset):
            return None
        return next(self.store.read(stream.topic, stream.partition, offset, 1), None)


class KeyLayout(Layout):
    """``key`` on RocketMQ: the broker's IndexFile (native), every candidate checked against the commitlog."""

    store: RocketMQStore

    name = "key"
    native = True
    format = "rocketmq"
    answers = frozenset({"key"})

    def __init__(self, store: Store, options: Mapping[str, Any], *, writable: bool | None = None) -> None:
        super().__init__(store, options, writable=writable)
        self._own: IndexService | None = None

    def _service(self) -> IndexService:
        if self.store.index is not None:
            return self.store.index
        if self._own is None:
            directory = os.path.join(self.store.path, INDEX_DIR)
            if not files.is_dir(directory):
                raise UnsupportedOperationError("expected the broker's index/ directory "
                                                "(messageIndexEnable), "
                                                "found none", self.store.path)
            config = self.store.config
            self._own = IndexService(directory, config.maxHashSlotNum, config.maxIndexNum)
            self._own.load()
        return self._own

    def _message_at(self, phys: int) -> RocketMQMessage | None:
        try:
            return self.store.message_at(phys)
        except (CorruptDataError, OffsetOutOfRangeError):
            return None

    def find_key(self, stream: Stream, key: bytes, max_hits: int | None = None) -> list[int]:
        """Chain walk over the slot of ``topic#key`` in each file, newest first.  ``O(chain length)``."""
        text = key.decode("utf-8", "surrogateescape")
        found = query_by_key(self._service(), stream.topic, text, self._message_at, max_hits=NO_HIT_LIMIT)
        offsets = sorted(m.queue_offset for m in found
                         if m.queue_id == stream.partition and has_queue_entry(m.sys_flag))
        return offsets if max_hits is None else offsets[-max_hits:] if max_hits else []

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None


class _QueueSparse(SparseFiles[IndexFileT]):
    """What the RocketMQ offset and time indexes share: columns from the consume queue."""

    store: RocketMQStore

    def _columns(self, start: int, count: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(offsets, commitlog positions, sizes)`` of the queue from ``start``."""
        rows = _queue(self.store, self.stream).entries(start, count)
        offsets = start + np.arange(len(rows), dtype=np.int64)
        return offsets, rows["offset"].astype(np.int64), rows["size"].astype(np.int64)

    def _index_from(self, start: int) -> int:
        offsets, phys, sizes = self._columns(start)
        done = 0
        while done < len(offsets):
            done += self._fill(offsets[done:], phys[done:], sizes[done:])
        return start + len(offsets)

    def _fill(self, offsets: np.ndarray, phys: np.ndarray, sizes: np.ndarray) -> int:
        raise NotImplementedError


OFFSET_NAME = re.compile(rf"^(?P<base>\d{{{NAME_DIGITS}}})-(?P<commitlog>\d{{{NAME_DIGITS}}})\.index$")


class OffsetStreamIndex(_QueueSparse[OffsetIndex]):
    """Sparse queue offset -> commitlog position entries of one queue.

    A file covers queue offsets from its base whose messages lie in one commitlog
    file; its name is ``{base offset:020d}-{commitlog file base:020d}.index`` and
    positions are relative to that commitlog file (so they fit Kafka's 32 bits).
    """

    index_class = OffsetIndex

    def parse_name(self, name: str) -> tuple[int, int] | None:
        m = OFFSET_NAME.match(name)
        return (int(m["base"]), int(m["commitlog"])) if m else None

    def file_name(self, base: int, extra: int) -> str:
        return f"{base:020d}-{extra:020d}.index"

    def _commitlog_base(self, phys: np.ndarray) -> np.ndarray:
        return phys - phys % self.store.commitlog.file_size

    def _fill(self, offsets: np.ndarray, phys: np.ndarray, sizes: np.ndarray) -> int:
        cl_base = self._commitlog_base(phys)
        active = self.files.active
        if active is None or active.is_full or self.extra[active.base_offset] != int(cl_base[0]):
            active = self._new_file(int(offsets[0]), int(cl_base[0]))
        other = np.flatnonzero(cl_base != cl_base[0])
        run = int(other[0]) if len(other) else len(offsets)
        file_bytes = self.state.carry.get("file_bytes", 0)
        points = np.flatnonzero(sparse_points(sizes[:run], file_bytes, self.options["layout.interval.bytes"]))
        room = active.capacity - len(active)
        if len(points) > room:
            run, points = int(points[room]), points[:room]
        rows = np.empty(len(points), dtype=OFFSET_ENTRY)
        rows["relative_offset"] = offsets[points] - active.base_offset
        rows["position"] = phys[points] - cl_base[0]
        active.append_array(rows)
        self.state.carry = {"file_bytes": file_bytes + int(sizes[:run].sum())}
        return run

    def read_at(self, offset: int) -> RocketMQMessage | None:
        """Binary search the file's entries, then walk the commitlog to the message.

        Runtime complexity: ``O(log n)`` plus the messages (of every queue) stored
        between the entry and the target: about ``layout.interval.bytes`` of this
        queue's, times the interleaving.
        """
        index = self.files.floor(offset)
        if index is None:
            return None
        entry = index.lookup_offset(offset)
        start = self.extra[index.base_offset] + entry.position
        for _, record in self.store.commitlog.walk(start):
            if not isinstance(record, RocketMQMessage):
                continue
            if (record.topic, record.queue_id) == (self.stream.topic, self.stream.partition) \
                    and has_queue_entry(record.sys_flag):
                if record.queue_offset >= offset:
                    return record if record.queue_offset == offset else None
        return None

    def _expected_problems(self) -> list[Problem]:
        problems = []
        bases = self.files.bases()
        for i, (base, index) in enumerate(self.files.items()):
            end = bases[i + 1] if i + 1 < len(bases) else self.state.indexed_end
            offsets, phys, sizes = self._columns(max(base, self.log_start()), end - base)
            expected = np.zeros(0, dtype=OFFSET_ENTRY)
            if len(offsets):
                points = np.flatnonzero(sparse_points(sizes, 0, self.options["layout.interval.bytes"]))
                expected = np.empty(len(points), dtype=OFFSET_ENTRY)
                expected["relative_offset"] = offsets[points] - base
                expected["position"] = phys[points] - self.extra[base]
            diff = self.first_difference(index.entries, expected)
            if diff is not None:
                problems.append(Problem(index.path, diff[0] * OFFSET_ENTRY.itemsize, diff[1]))
        return problems


class TimeStreamIndex(_QueueSparse[TimeIndex]):
    """Sparse (max store time so far -> queue offset) entries of one queue, ``{base:020d}.timeindex`` files.

    As in Kafka, each entry holds the largest store time up to the record it
    points at (the first record reaching it), entries strictly increase, and a
    file gets its final maximum forced in when it rolls, so the last entry of a
    rolled file is the largest store time it covers.
    """

    index_class = TimeIndex

    def parse_name(self, name: str) -> tuple[int, int] | None:
        stem, dot, suffix = name.partition(".")
        named = dot and suffix == "timeindex" and len(stem) == NAME_DIGITS and stem.isdigit()
        return (int(stem), 0) if named else None

    def file_name(self, base: int, extra: int) -> str:
        return f"{base:020d}.timeindex"

    def _close_active(self, active: TimeIndex) -> None:
        carry = self.state.carry
        if "max_ts" in carry:
            active.maybe_append(carry["max_ts"], carry["max_offset"], skip_full_check=True)
        super()._close_active(active)

    def _fill(self, offsets: np.ndarray, phys: np.ndarray, sizes: np.ndarray) -> int:
        active = self.files.active
        if active is None or active.is_full:
            active = self._new_file(int(offsets[0]), 0)
        stamps = store_timestamps(self.store, phys)
        expected, run, carry = self._plan(active.base_offset, offsets, sizes, stamps, self.state.carry,
                                          active.last_entry.timestamp, active.capacity - 1 - len(active))
        active.append_array(expected)
        self.state.carry = carry
        return run

    def _plan(self, base: int, offsets: np.ndarray, sizes: np.ndarray, stamps: np.ndarray,
              carry: dict[str, int], last_ts: int, room: int) -> tuple[np.ndarray, int, dict[str, int]]:
        """The entries for these records (at most ``room``), how many records they cover, the new carry.

        Pure: used by appends and by ``verify``.  ``O(n)`` in numpy.
        """
        file_bytes = carry.get("file_bytes", 0)
        prev_max = carry.get("max_ts", TIME_MIN)
        running = np.maximum.accumulate(np.concatenate(([prev_max], stamps)))
        new_max = stamps > running[:-1]
        running = running[1:]
        first_of_max = np.maximum.accumulate(np.where(new_max, np.arange(len(stamps)), -1))
        points = np.flatnonzero(sparse_points(sizes, file_bytes, self.options["layout.interval.bytes"]))
        candidates = running[points]
        keep = candidates > np.concatenate(([last_ts], candidates[:-1]))
        points = points[keep]
        run = len(offsets)
        if len(points) > room:
            run, points = int(points[room]), points[:room]
        rows = np.empty(len(points), dtype=TIME_ENTRY)
        rows["timestamp"] = running[points]
        where = first_of_max[points]
        absolute = np.where(where >= 0, offsets[np.maximum(where, 0)], carry.get("max_offset", base))
        rows["relative_offset"] = absolute - base
        new_carry = {"file_bytes": file_bytes + int(sizes[:run].sum())}
        if run:
            at = int(first_of_max[run - 1])
            new_carry["max_ts"] = int(running[run - 1])
            new_carry["max_offset"] = int(offsets[at]) if at >= 0 else carry.get("max_offset", base)
        return rows, run, new_carry

    def offset_for_time(self, timestamp: int) -> int | None:
        """The first offset stored at or after ``timestamp``.

        Skips rolled files whose last (largest) entry is older, binary searches
        the first file that may hold it, then scans from that entry up to the
        next one (store times read in bulk): ``O(log n)`` plus about
        ``layout.interval.bytes`` of messages; no commitlog read per probe.
        """
        start, end = self.log_start(), self.log_end()
        bases = self.files.bases()
        for i, (base, index) in enumerate(self.files.items()):
            last = i + 1 == len(bases)
            if not last and index.last_entry.timestamp < timestamp:
                continue
            slot = index.lookup("timestamp", timestamp, Bound.LARGEST_LOWER)
            entries = index.entries
            first = base + int(entries["relative_offset"][slot]) if slot >= 0 else base
            # the next entry's record is stored after ``timestamp``: the answer is at or before it
            stop = base + int(entries["relative_offset"][slot + 1]) + 1 if slot + 1 < len(entries) else \
                (end if last else bases[i + 1])
            found = self._scan(max(first, start), min(stop, end), timestamp)
            if found is not None or last:
                return found
        return self._scan(start, end, timestamp) if not bases else None

    def _scan(self, first: int, end: int, timestamp: int) -> int | None:
        """The first offset in ``[first, end)`` stored at or after ``timestamp`` (times read in chunks)."""
        pos = first
        while pos < end:
            offsets, phys, _ = self._columns(pos, min(SCAN_CHUNK, end - pos))
            if not len(offsets):
                return None
            hit = np.flatnonzero(store_timestamps(self.store, phys) >= timestamp)
            if len(hit):
                return int(offsets[hit[0]])
            pos += len(offsets)
        return None

    def _expected_problems(self) -> list[Problem]:
        problems = []
        bases = self.files.bases()
        for i, (base, index) in enumerate(self.files.items()):
            rolled = i + 1 < len(bases)
            end = bases[i + 1] if rolled else self.state.indexed_end
            offsets, phys, sizes = self._columns(max(base, self.log_start()), end - base)
            rows, _, carry = self._plan(base, offsets, sizes, store_timestamps(self.store, phys), {},
                                        NO_TIMESTAMP, len(offsets) + 1)
            if rolled and "max_ts" in carry and (not len(rows) or carry["max_ts"] > rows["timestamp"][-1]):
                final = np.array([(carry["max_ts"], carry["max_offset"] - base)], dtype=TIME_ENTRY)
                rows = np.concatenate([rows, final])
            diff = self.first_difference(index.entries, rows)
            if diff is not None:
                problems.append(Problem(index.path, diff[0] * TIME_ENTRY.itemsize, diff[1]))
        return problems


class _ExtraQueueLayout(ExtraLayout[IndexT]):
    format = "rocketmq"

    def directory(self, stream: Stream) -> str:
        return os.path.join(self.store.path, INDEX_ROOT, self.name, stream.topic, str(stream.partition))

    def lock_paths(self) -> list[str]:
        return [os.path.join(self.store.path, INDEX_ROOT, f"{self.name}.lock")]

    def has_files(self) -> bool:
        return files.is_dir(os.path.join(self.store.path, INDEX_ROOT, self.name)) and super().has_files()


class OffsetLayout(_ExtraQueueLayout[OffsetStreamIndex]):
    """``offset`` on RocketMQ: sparse offset index per queue (extra)."""

    name = "offset"
    answers = frozenset({"offset"})
    stream_class = OffsetStreamIndex

    def read_at(self, stream: Stream, offset: int) -> Record | None:
        if not self._check_range(stream, offset):
            return None
        return self._index(stream).read_at(offset)


class TimeLayout(_ExtraQueueLayout[TimeStreamIndex]):
    """``time`` on RocketMQ: sparse time index per queue (extra)."""

    name = "time"
    answers = frozenset({"time"})
    stream_class = TimeStreamIndex

    def offset_for_time(self, stream: Stream, timestamp: int) -> int | None:
        return self._index(stream).offset_for_time(timestamp)

