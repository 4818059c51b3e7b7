"""The segment map: an ordered map from base offset to segment.

Kafka keeps a partition's segments in a concurrent skip list keyed by base
offset (``LogSegments``); a RocketMQ ``MappedFileQueue`` is the same idea over
the shared commitlog (keyed by physical start offset) and over each consume
queue (keyed by byte offset).  Both are a :class:`SegmentMap` here, a
``sortedcontainers.SortedDict``.

Thread-safety: reads may run concurrently with each other; a mutation
(``add``/``remove``/``clear``) needs the caller's lock against readers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from sortedcontainers import SortedDict

S = TypeVar("S")


class SegmentMap(Generic[S]):
    """Segments ordered by base offset (absolute offsets only)."""

    __slots__ = ("_last", "_map")

    def __init__(self) -> None:
        self._map: SortedDict = SortedDict()
        # the last segment, kept at each mutation: every append asks for it (SortedDict.peekitem
        # costs about a microsecond of Python per call)
        self._last: S | None = None

    def add(self, base: int, segment: S) -> None:
        """Insert (or replace) the segment starting at ``base``.  ``O(log(n))``."""
        self._map[base] = segment
        self._last = self._map.peekitem(-1)[1]

    def remove(self, base: int) -> S:
        """Remove and return the segment starting at ``base``.  ``O(log(n))``.

        :raises KeyError: no segment starts there.
        """
        segment = self._map.pop(base)
        self._last = self._map.peekitem(-1)[1] if self._map else None
        return segment

    def get(self, base: int) -> S | None:
        return self._map.get(base)

    def clear(self) -> None:
        self._map.clear()
        self._last = None

    def floor(self, offset: int) -> S | None:
        """The segment with the greatest base ``<= offset`` (the one that can hold it).  ``O(log(n))``."""
        i = self._map.bisect_right(offset)
        return self._map.peekitem(i - 1)[1] if i else None

    def lower(self, offset: int) -> S | None:
        """The segment with the greatest base ``< offset``.  ``O(log(n))``."""
        i = self._map.bisect_left(offset)
        return self._map.peekitem(i - 1)[1] if i else None

    def higher(self, offset: int) -> S | None:
        """The segment with the least base ``> offset``.  ``O(log(n))``."""
        i = self._map.bisect_right(offset)
        return self._map.peekitem(i)[1] if i < len(self._map) else None

    def floor_base(self, offset: int) -> int | None:
        """The greatest base ``<= offset``, or None."""
        i = self._map.bisect_right(offset)
        return self._map.peekitem(i - 1)[0] if i else None

    def values(self, start: int | None = None, end: int | None = None) -> list[S]:
        """Segments that can hold offsets in ``[start, end)``, in order.

        That is the floor segment of ``start`` and every later one whose base is
        ``< end``.  ``O(log(n) + k)``.
        """
        keys = self._map.keys()
        lo = 0
        if start is not None:
            lo = max(self._map.bisect_right(start) - 1, 0)
        hi = len(keys) if end is None else self._map.bisect_left(end)
        return [self._map[keys[i]] for i in range(lo, hi)]

    @property
    def active(self) -> S | None:
        """The last segment (the one appended to), or None when empty.  ``O(1)``."""
        return self._last

    @property
    def first(self) -> S | None:
        return self._map.peekitem(0)[1] if self._map else None

    def bases(self) -> list[int]:
        return list(self._map.keys())

    def items(self) -> list[tuple[int, S]]:
        return list(self._map.items())

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[S]:
        return iter(list(self._map.values()))

    def __contains__(self, base: object) -> bool:
        return base in self._map

    def _check(self) -> None:
        """Assert the invariants (tests call this after every action)."""
        keys = list(self._map.keys())
        if keys != sorted(set(keys)):
            raise AssertionError(f"segment bases out of order: {keys}")
