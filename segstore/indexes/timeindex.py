"""Sparse time entries: Kafka's time index (``%020d.timeindex``), 12 bytes over :class:`EntryIndex`.

The core's time type, in Kafka's byte layout: Kafka's native ``time`` files, and the
extra ``time`` layout of any other format (:mod:`segstore.layouts.time`).

Layout (big-endian, ``TimeIndex.java``)::

    0  int64  timestamp         (the segment's max timestamp so far, ms)
    8  int32  relative offset   (offset of the batch holding that timestamp - base offset)

Timestamps strictly increase; offsets never decrease.  An entry is only added
when its timestamp is greater than the last one's.  The last slot of a file is
reserved for the entry forced in when the segment rolls, so the index counts as
full one entry early (Kafka ``TimeIndex.isFull``).

Thread-safety: as :class:`segstore.index.EntryIndex`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from segstore.errors import CorruptIndexError
from segstore.search import Bound, search

from .sparse import KafkaIndex

TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
assert TIME_ENTRY.itemsize == 12

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    """A timestamp and the absolute offset it was indexed with."""

    timestamp: int
    offset: int


class TimeIndex(KafkaIndex):
    """The ``.timeindex`` file of one segment: max timestamp so far -> offset, sparse.

    :meth:`lookup_timestamp` returns the largest entry with timestamp ``<=`` the
    target, ``(-1, base_offset)`` when the target precedes every entry.
    """

    DTYPE = TIME_ENTRY
    ORDER = (("timestamp", True), ("relative_offset", False))
    # Kafka 3.8.0 TimeIndex.maybeAppend adds (0, base) to an empty index (0 > the empty index's -1), and
    # LogSegment.onBecomeInactiveSegment forces it in for a segment whose largest timestamp is 0 at its
    # base offset: a closed segment's trimmed 12-byte file of zeros is that entry
    ZERO_FIRST_ENTRY = True

    @property
    def is_full(self) -> bool:
        """Full one entry early: the last slot is kept for the entry forced in on roll."""
        return len(self) >= self.capacity - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        if not len(self):
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        ts, rel = self.entries[-1]
        return TimestampOffset(int(ts), self.base_offset + int(rel))

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add ``timestamp -> offset`` if the timestamp is greater than the last entry's.

        Returns whether an entry was added.  ``O(1)``.
        :raises CorruptIndexError: full (unless ``skip_full_check``), or the offset or
            timestamp would go backwards.
        """
        pos = len(self) * self.entry_size
        if not skip_full_check and self.is_full:
            raise CorruptIndexError(f"expected room for a time index entry, found the index full "
                                    f"({len(self)} entries)", self.file.path, pos)
        last = self.last_entry
        if len(self) and offset < last.offset:
            raise CorruptIndexError(f"expected an offset of at least the last indexed {last.offset}, "
                                    f"found {offset}", self.file.path, pos)
        if len(self) and timestamp < last.timestamp:
            raise CorruptIndexError(f"expected a timestamp of at least the last indexed {last.timestamp}, "
                                    f"found {timestamp}", self.file.path, pos)
        if timestamp <= last.timestamp:
            return False
        self.append(timestamp, self.relative(offset))
        return True

    def lookup_timestamp(self, target: int) -> TimestampOffset:
        """The largest entry with timestamp ``<= target``; ``(-1, base_offset)`` if none.  ``O(log n)``."""
        columns = self.columns()
        slot = search(columns["timestamp"], target, Bound.LARGEST_LOWER)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(columns["timestamp"].item(slot),
                               self.base_offset + columns["relative_offset"].item(slot))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        rel = self.entries["relative_offset"]
        keep = search(rel, offset - self.base_offset, Bound.SMALLEST_UPPER)
        self.truncate_entries(keep)

    def pairs(self) -> list[TimestampOffset]:
        """Every entry as ``(timestamp, absolute offset)`` (dumps and tests)."""
        return [TimestampOffset(int(t), self.base_offset + int(r)) for t, r in self.entries.tolist()]
