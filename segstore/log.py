"""The log manager: segments in a :class:`SegmentMap`, with roll, flush, retention and recovery.

One class serves both layouts: the RocketMQ commitlog (one shared log of
fixed-size mapped files keyed by physical start offset), each RocketMQ consume
queue (keyed by byte offset), and each Kafka partition (``.log`` segments keyed
by base offset).  What a segment is, when it is full and how it is validated is
the format's business, passed in as a factory and callbacks; the ordering,
the choice of segment for an offset, rolling, flushing what is dirty, cutting
after a point and dropping old segments is done here once.

Thread-safety: not thread-safe; the owning store serialises appends and
structural changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

from .segments import SegmentMap


class Segment(Protocol):
    """What the log manager needs of a segment."""

    base: int

    def flush(self) -> None: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=Segment)


class SegmentedLog(Generic[S]):
    """An ordered set of segments with one active (last) segment.

    :param factory: makes a new, empty segment starting at a base offset.
    """

    __slots__ = ("__dict__", "_dirty", "_factory", "segments")   # read by the C appends on every call

    def __init__(self, factory: Callable[[int], S]) -> None:
        self.segments: SegmentMap[S] = SegmentMap()
        self._factory = factory
        self._dirty: dict[int, S] = {}

    def load(self, segments: Iterable[S]) -> None:
        """Adopt existing segments (opened by the format) in any order."""
        for seg in segments:
            self.segments.add(seg.base, seg)

    @property
    def active(self) -> S | None:
        return self.segments.active

    def segment_for(self, offset: int) -> S | None:
        """The segment that can hold ``offset`` (greatest base ``<= offset``).  ``O(log(n))``."""
        return self.segments.floor(offset)

    def roll(self, base: int) -> S:
        """Start a new active segment at ``base`` (after flushing the old one).

        An old active segment of the same base (an empty one rolled at its own base: Kafka's
        ``UnifiedLog.roll`` deletes such a segment and makes a new one) is closed before its successor
        opens the same files: replaced in the map unclosed, it held its descriptors and maps until
        collected."""
        old = self.segments.active
        if old is not None:
            old.flush()
            self._dirty.pop(old.base, None)
            if old.base == base:
                self.segments.remove(base)
                old.close()
        seg = self._factory(base)
        self.segments.add(base, seg)
        return seg

    def mark_dirty(self, segment: S) -> None:
        """Record that ``segment`` has bytes not yet flushed."""
        self._dirty[segment.base] = segment

    def flush(self) -> None:
        """Flush every segment written since the last flush."""
        dirty, self._dirty = self._dirty, {}
        for seg in dirty.values():
            seg.flush()

    def truncate_after(self, base: int) -> list[S]:
        """Remove (and return, closed) every segment whose base is greater than ``base``."""
        removed = [s for s in self.segments.values(base) if s.base > base]
        for seg in removed:
            self.segments.remove(seg.base)
            self._dirty.pop(seg.base, None)
            seg.close()
        return removed

    def delete_oldest(self, keep: Callable[[S], bool]) -> list[S]:
        """Remove (and return, closed) segments from the oldest while ``keep`` says no.

        The active segment is never removed (retention semantics).
        """
        removed: list[S] = []
        for seg in self.segments:
            if seg is self.segments.active or keep(seg):
                break
            self.segments.remove(seg.base)
            self._dirty.pop(seg.base, None)
            seg.close()
            removed.append(seg)
        return removed

    def close(self) -> None:
        self.flush()
        for seg in self.segments:
            seg.close()
        self.segments.clear()
