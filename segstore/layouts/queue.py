"""``queue``: a dense index, one 20-byte entry per offset, over any :class:`~segstore.logview.LogView`.

The entries are the core's dense queue entries (:mod:`segstore.indexes.dense`,
RocketMQ's ConsumeQueue byte layout): ``[i8 position][i4 size][i8 tags code]``
with the ``position`` and ``size`` columns of the store's ``scan_arrow`` (Kafka:
the batch's file position and size) and tags code 0, in ConsumeQueue files under
``HOME/.segstore/queue/consumequeue/``.  A lookup is one slot read and one
:meth:`~segstore.logview.LogView.record_at`, with no binary search and no scan;
it costs 20 bytes per record.  Offsets missing from the log (compaction) point at
the record holding the next offset, as a fetch from them would.

Built and caught up from ``scan_arrow`` batches with numpy (no per-record Python).
Thread-safety: as the owning store.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from segstore.errors import CorruptIndexError
from segstore.indexes.dense import CQ_DTYPE, ConsumeQueue
from segstore.logview import int64_column
from segstore.store import Problem

from .base import ExtraLayout, Stream, StreamIndex

QUEUE_FILES_DIR = "consumequeue"
NO_TAGS_CODE = 0
_COLUMNS = ["position", "size"]


class QueueStreamIndex(StreamIndex):
    """Dense per-offset entries of one stream in ConsumeQueue files."""

    def _open_files(self) -> None:
        self.cq = ConsumeQueue(os.path.join(self.directory, QUEUE_FILES_DIR), self.stream.topic,
                               self.stream.partition, self.options["layout.queue.file.bytes"],
                               writable=self.writable, size_option="layout.queue.file.bytes")

    def _rows(self, start: int, end: int) -> tuple[np.ndarray, int]:
        """Entries for offsets ``start ..`` up to the last record before ``end``, and where they stop.

        Each offset gets the entry of the first record at or after it.  ``O(n)`` in numpy per batch.
        """
        parts = []
        first = start
        for batch in self.batches(start, end, _COLUMNS):
            offsets = int64_column(batch, "offset")
            # each record covers the offsets after the previous record's, up to its own
            covers = np.diff(np.concatenate(([first - 1], offsets)))
            at = np.repeat(np.arange(len(offsets)), covers)
            rows = np.empty(len(at), dtype=CQ_DTYPE)
            rows["offset"] = int64_column(batch, "position")[at]
            rows["size"] = int64_column(batch, "size")[at]
            rows["tags_code"] = NO_TAGS_CODE
            parts.append(rows)
            first = int(offsets[-1]) + 1
        if not parts:
            return np.zeros(0, dtype=CQ_DTYPE), start
        return np.concatenate(parts), first

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

    def _drop_below(self, offset: int) -> None:
        self.cq.delete_below(offset)

    def read_at(self, offset: int) -> Any | None:
        """One slot, one :meth:`~segstore.logview.LogView.record_at`.  ``O(1)`` for the slot.

        Offsets past ``indexed_end``, and every offset when the log changed under the index
        (:attr:`stale`), are read from the log.
        """
        cq = self.cq
        if self.stale is not None or not cq.min_offset <= offset < min(cq.max_offset, self.state.indexed_end):
            return self.read_from_log(offset)
        row = cq.entries(offset, 1)[0]
        return self.store.record_at(self.stream.topic, self.stream.partition, offset, int(row["offset"]))

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


class QueueLayout(ExtraLayout[QueueStreamIndex]):
    """``queue`` kept by segstore: dense ConsumeQueue-style entries per stream."""

    name = "queue"
    answers = frozenset({"offset"})
    stream_class = QueueStreamIndex
    option_names = ("layout.queue.file.bytes",)

    def read_at(self, stream: Stream, offset: int) -> Any | None:
        if not self._check_range(stream, offset):
            return None
        return self._index(stream).read_at(offset)
