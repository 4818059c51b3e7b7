"""``time``: a sparse time index (Kafka ``.timeindex`` entries) over any :class:`~segstore.logview.LogView`.

Per stream, ``{base:020d}.timeindex`` files of (max time so far -> offset)
entries, one per ``layout.interval.bytes`` of records, by the store's
:attr:`~segstore.logview.LogView.time_column` (RocketMQ: the store time the
broker's ``getOffsetInQueueByTime`` goes by).  As in Kafka, each entry holds the
largest time up to the record it points at (the first record reaching it),
entries strictly increase, and a file gets its final maximum forced in when it
rolls, so the last entry of a rolled file is the largest time it covers.

``offset_for_time`` is one binary search plus a short forward scan of the
time column (``scan_arrow``), instead of a binary search reading the log at every
probe.  Built and caught up from ``scan_arrow`` batches with numpy.
Thread-safety: as the owning store.
"""

from __future__ import annotations

import numpy as np

from segstore.indexes.timeindex import NO_TIMESTAMP, TIME_ENTRY, TimeIndex
from segstore.logview import int64_column
from segstore.search import Bound, search

from .base import ExtraLayout, Stream, sparse_points
from .sparse import SparseFiles

#: Digits of a base offset in a file name (Kafka's ``%020d``).
NAME_DIGITS = 20
TIME_MIN = -(2**63)


class TimeStreamIndex(SparseFiles[TimeIndex]):
    """Sparse (max time so far -> offset) entries of one stream, ``{base:020d}.timeindex`` files."""

    index_class = TimeIndex

    @property
    def time_column(self) -> str:
        return self.store.time_column

    def parse_name(self, name: str) -> tuple[int, int] | None:
        stem, dot, suffix = name.partition(".")
        # ASCII digits only: str.isdigit takes "\u00b2" (int() refuses it) and "\u0665" (int() reads 5)
        named = (dot and suffix == "timeindex" and len(stem) == NAME_DIGITS
                 and stem.isascii() and stem.isdigit())
        return (int(stem), 0) if named else None

    def file_name(self, base: int, extra: int) -> str:
        return f"{base:0{NAME_DIGITS}d}.timeindex"

    def _close_active(self, active: TimeIndex) -> None:
        carry = self.state.carry
        if "max_ts" in carry:
            active.maybe_append(carry["max_ts"], carry["max_offset"], skip_full_check=True)
        super()._close_active(active)

    def _index_from(self, start: int) -> int:
        done = start
        for batch in self.batches(start, self.log_end(), ["size", self.time_column]):
            offsets, sizes = int64_column(batch, "offset"), int64_column(batch, "size")
            stamps = int64_column(batch, self.time_column)
            filled = 0
            while filled < len(offsets):
                filled += self._fill(offsets[filled:], sizes[filled:], stamps[filled:])
            done = int(offsets[-1]) + 1
        return done

    def _fill(self, offsets: np.ndarray, sizes: np.ndarray, stamps: np.ndarray) -> int:
        active = self.files.active
        if active is None or active.is_full:
            active = self._new_file(int(offsets[0]), 0)
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
        """The first offset at or after the log start stored at or after ``timestamp``.

        Skips rolled files whose last (largest) entry is older, binary searches
        the first file that may hold it, then scans from that entry up to the
        next one (times read in batches): ``O(log n)`` plus about
        ``layout.interval.bytes`` of records; no log read per probe.  Entries
        below the log start (retention cut the file) bound nothing: the scan
        starts at the log start and stops at the first entry past it.  Entries at
        or past ``indexed_end`` are a writer's that died before it saved its
        state (the log may have lost and rewritten their records since): none is
        used, the records from ``indexed_end`` on are scanned as the tail.
        """
        start, end = self.log_start(), self.log_end()
        indexed = max(min(self.state.indexed_end, end), start)
        held = [(base, index) for base, index in self.files.items() if base < indexed]
        for i, (base, index) in enumerate(held):
            last = i + 1 == len(held)
            file_end = indexed if last else held[i + 1][0]
            if file_end <= start:
                continue
            times, offsets = index.column("timestamp"), index.column("relative_offset")
            # the entries of records below ``indexed`` (in a rolled file: all of them)
            count = search(offsets, indexed - base, Bound.SMALLEST_UPPER)
            if not last and (not count or times.item(count - 1) < timestamp):
                continue
            # the first entry of the file at or past the log start
            live = search(offsets, start - base, Bound.SMALLEST_UPPER, 0, count) if start > base else 0
            slot = max(search(times, timestamp, Bound.LARGEST_LOWER, 0, count), live - 1)
            # every record before an entry's is stored before the entry's time: none before ``first``
            # qualifies
            first = base + offsets.item(slot) if slot >= live else max(base, start)
            # the next entry's record is stored after ``timestamp``: the answer is at or before it
            stop = base + offsets.item(slot + 1) + 1 if slot + 1 < count else file_end
            found = self._scan(max(first, start), min(stop, file_end), timestamp)
            if found is not None:
                return found
            if last:
                return self._scan(indexed, end, timestamp)
        return self._scan(start, end, timestamp)

    def _scan(self, first: int, end: int, timestamp: int) -> int | None:
        """The first offset in ``[first, end)`` stored at or after ``timestamp`` (times read in batches)."""
        for batch in self.batches(first, end, [self.time_column]):
            hit = np.flatnonzero(int64_column(batch, self.time_column) >= timestamp)
            if len(hit):
                return int(int64_column(batch, "offset")[hit[0]])
        return None

    def _file_difference(self, base: int, index: TimeIndex, start: int, end: int,
                         rolled: bool, past: bool) -> tuple[int, str] | None:
        cols = self.columns(max(base, start), end, ["size", self.time_column])
        offsets, stamps = cols["offset"], cols[self.time_column]
        if base >= start:
            rows, _, carry = self._plan(base, offsets, cols["size"], stamps, {}, NO_TIMESTAMP,
                                        len(offsets) + 1)
            if rolled and "max_ts" in carry and (not len(rows) or carry["max_ts"] > rows["timestamp"][-1]):
                final = np.array([(carry["max_ts"], carry["max_offset"] - base)], dtype=TIME_ENTRY)
                rows = np.concatenate([rows, final])
            held = self._held(index, end)
            if past and len(held) == len(rows) + 1:
                held = held[:-1]    # the entry the roll past indexed_end forced in: not looked at
            return self.first_difference(held, rows)
        entries = self._held(index, end)
        # a rolled file's last entry holds the largest time of the whole file, the records cut included
        if rolled and len(stamps) and (not len(entries) or int(entries["timestamp"][-1]) < int(stamps.max())):
            last = tuple(entries[-1].tolist()) if len(entries) else "no entry"
            return max(len(entries) - 1, 0), (f"expected a last entry of at least time {int(stamps.max())}, "
                                              f"the largest of offsets {start}..{end - 1}, found {last}")
        slot, found = self._entries_from(index, start, end)
        # an entry (T, o): o is the first record of the file stored at T or later, and stored at T; the
        # records from the log start before o are older: o is the first of them to reach T
        reached = np.searchsorted(np.maximum.accumulate(stamps), found["timestamp"].astype(np.int64))
        rows = np.minimum(reached, len(stamps) - 1) if len(stamps) else reached[:0]
        expected = np.empty(len(rows), dtype=TIME_ENTRY)
        expected["timestamp"] = stamps[rows]
        expected["relative_offset"] = offsets[rows] - base
        return self.first_difference(found, expected, slot)


class TimeLayout(ExtraLayout[TimeStreamIndex]):
    """``time`` kept by segstore: a sparse time index per stream."""

    name = "time"
    answers = frozenset({"time"})
    stream_class = TimeStreamIndex
    option_names = ("layout.interval.bytes", "layout.index.bytes")

    def offset_for_time(self, stream: Stream, timestamp: int) -> int | None:
        index = self._index(stream)
        if index.stale is not None:     # the log changed under the index: the log alone answers
            return index._scan(index.log_start(), index.log_end(), timestamp)
        return index.offset_for_time(timestamp)
