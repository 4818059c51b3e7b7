"""``offset``: a sparse offset index (Kafka ``.index`` entries) over any :class:`~segstore.logview.LogView`.

One entry per ``layout.interval.bytes`` of the stream's records: offset ->
log position (the ``position`` column of ``scan_arrow``).  Positions are stored
relative to the log file holding them (:meth:`~segstore.logview.LogView.position_bases`),
so they fit the entry's 32 bits: a file covers offsets from its base whose
records lie in one log file, and is named ``{base offset:020d}-{log file base:020d}.index``.
A lookup is one binary search, then :meth:`~segstore.logview.LogView.record_at`
walks the log from the entry (skipping other streams' records where the log is
shared).

Built and caught up from :meth:`~segstore.logview.LogView.positions` with numpy (over a
RocketMQ queue: its consume-queue entries, no message decoded); verified against
``scan_arrow`` batches.
Thread-safety: as the owning store.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from segstore.indexes.sparse import OFFSET_ENTRY, OffsetIndex

from .base import ExtraLayout, Stream, sparse_points
from .sparse import SparseFiles

#: Digits of a base offset in a file name (Kafka's ``%020d``).
NAME_DIGITS = 20
#: ASCII digits only (``\d`` alone takes every Unicode digit, "\u0665", which int() reads as 5).
OFFSET_NAME = re.compile(rf"^(?P<base>\d{{{NAME_DIGITS}}})-(?P<logfile>\d{{{NAME_DIGITS}}})\.index$",
                         re.ASCII)
_COLUMNS = ["position", "size"]


class OffsetStreamIndex(SparseFiles[OffsetIndex]):
    """Sparse offset -> log position entries of one stream."""

    index_class = OffsetIndex

    def parse_name(self, name: str) -> tuple[int, int] | None:
        m = OFFSET_NAME.match(name)
        return (int(m["base"]), int(m["logfile"])) if m else None

    def file_name(self, base: int, extra: int) -> str:
        return f"{base:0{NAME_DIGITS}d}-{extra:0{NAME_DIGITS}d}.index"

    def _bases(self, positions: np.ndarray) -> np.ndarray:
        return self.store.position_bases(self.stream.topic, self.stream.partition, positions)

    def _index_from(self, start: int) -> int:
        done = start
        for offsets, positions, sizes in self.positions(start, self.log_end()):
            bases = self._bases(positions)
            filled = 0
            while filled < len(offsets):
                filled += self._fill(offsets[filled:], positions[filled:], sizes[filled:], bases[filled:])
            done = int(offsets[-1]) + 1
        return done

    def _fill(self, offsets: np.ndarray, positions: np.ndarray, sizes: np.ndarray, bases: np.ndarray) -> int:
        """Entries for the leading records that fit the active file; returns how many records it covered."""
        active = self.files.active
        if active is None or active.is_full or self.extra[active.base_offset] != int(bases[0]):
            active = self._new_file(int(offsets[0]), int(bases[0]))
        other = np.flatnonzero(bases != bases[0])
        run = int(other[0]) if len(other) else len(offsets)
        file_bytes = self.state.carry.get("file_bytes", 0)
        points = np.flatnonzero(sparse_points(sizes[:run], file_bytes, self.options["layout.interval.bytes"]))
        room = active.capacity - len(active)
        if len(points) > room:
            run, points = int(points[room]), points[:room]
        rows = np.empty(len(points), dtype=OFFSET_ENTRY)
        rows["relative_offset"] = offsets[points] - active.base_offset
        rows["position"] = positions[points] - bases[0]
        active.append_array(rows)
        self.state.carry = {"file_bytes": file_bytes + int(sizes[:run].sum())}
        return run

    def read_at(self, offset: int) -> Any | None:
        """Binary search the file's entries, then walk the log to the record.

        Runtime complexity: ``O(log n)`` plus the records stored between the entry
        and the target: about ``layout.interval.bytes`` of this stream's, times the
        interleaving of a shared log.
        """
        index = self.files.floor(offset)
        # nothing indexed at or below it (a stream new since the build), or past ``indexed_end``: the
        # entries there are a writer's that died before it saved its state (the log may have lost
        # and rewritten their records since), and the records are read from the log
        if index is None or offset >= self.state.indexed_end:
            return self.read_from_log(offset)
        entry = index.lookup_offset(offset)
        position = self.extra[index.base_offset] + entry.position
        return self.store.record_at(self.stream.topic, self.stream.partition, offset, position)

    def _file_difference(self, base: int, index: OffsetIndex, start: int, end: int,
                         rolled: bool, past: bool) -> tuple[int, str] | None:
        cols = self.columns(max(base, start), end, _COLUMNS)
        offsets, positions, sizes = cols["offset"], cols["position"], cols["size"]
        if base >= start:
            points = np.flatnonzero(sparse_points(sizes, 0, self.options["layout.interval.bytes"]))
            expected = self._entries(base, offsets[points], positions[points])
            return self.first_difference(self._held(index, end), expected)
        slot, found = self._entries_from(index, start, end)
        # each entry is expected to name its record: compared with the record at or after its offset
        named = np.searchsorted(offsets, base + found["relative_offset"].astype(np.int64))
        rows = np.minimum(named, len(offsets) - 1) if len(offsets) else named[:0]
        return self.first_difference(found, self._entries(base, offsets[rows], positions[rows]), slot)

    def _entries(self, base: int, offsets: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The entries of the file at ``base`` for records at ``offsets`` and log ``positions``."""
        rows = np.empty(len(offsets), dtype=OFFSET_ENTRY)
        rows["relative_offset"] = offsets - base
        rows["position"] = positions - self.extra[base]
        return rows


class OffsetLayout(ExtraLayout[OffsetStreamIndex]):
    """``offset`` kept by segstore: a sparse offset index per stream."""

    name = "offset"
    answers = frozenset({"offset"})
    stream_class = OffsetStreamIndex
    option_names = ("layout.interval.bytes", "layout.index.bytes")

    def read_at(self, stream: Stream, offset: int) -> Any | None:
        if not self._check_range(stream, offset):
            return None
        index = self._index(stream)
        return index.read_from_log(offset) if index.stale is not None else index.read_at(offset)
