"""The segment map: an ordered map from base offset to segment.

Kafka keeps a partition's segments in a concurrent skip list keyed by base
offset (``LogSegments``); a RocketMQ ``MappedFileQueue`` is the same idea over
the shared commitlog (keyed by physical start offset) and over each consume
queue (keyed by byte offset).  Both are a :class:`SegmentMap` here, a
``sortedcontainers.SortedDict`` once it holds more than :data:`FEW` segments; until then a sorted list
of bases and a dict (:class:`_Few`, the part of ``SortedDict``'s interface the map uses), so that
opening a store of few segments a partition (most stores) does not import sortedcontainers (8.8M
instructions, ~1.8 ms of a first Kafka scan).

Thread-safety: reads may run concurrently with each other; a mutation
(``add``/``remove``/``clear``) needs the caller's lock against readers.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from sortedcontainers import SortedDict

S = TypeVar("S")

#: The most segments a map keeps in a :class:`_Few` before it moves them into a ``SortedDict``.
FEW = 256


class _Few:
    """``SortedDict``'s methods a :class:`SegmentMap` calls, over a sorted list of keys and a dict (the
    same answers and errors: ``pop`` of a missing key a KeyError, ``peekitem`` past the end an
    IndexError).  ``O(n)`` an insert or removal (a list move of at most :data:`FEW` items)."""

    __slots__ = ("_keys", "_values")

    def __init__(self) -> None:
        self._keys: list[int] = []
        self._values: dict[int, Any] = {}

    def __setitem__(self, key: int, value: Any) -> None:
        if key not in self._values:
            bisect.insort(self._keys, key)
        self._values[key] = value

    def __getitem__(self, key: int) -> Any:
        return self._values[key]

    def get(self, key: int) -> Any:
        return self._values.get(key)

    def pop(self, key: int) -> Any:
        value = self._values.pop(key)
        del self._keys[bisect.bisect_left(self._keys, key)]
        return value

    def clear(self) -> None:
        self._keys.clear()
        self._values.clear()

    def bisect_left(self, key: int) -> int:
        return bisect.bisect_left(self._keys, key)

    def bisect_right(self, key: int) -> int:
        return bisect.bisect_right(self._keys, key)

    def peekitem(self, index: int) -> tuple[int, Any]:
        key = self._keys[index]
        return key, self._values[key]

    def keys(self) -> list[int]:
        return self._keys

    def values(self) -> list[Any]:
        return [self._values[key] for key in self._keys]

    def items(self) -> list[tuple[int, Any]]:
        return [(key, self._values[key]) for key in self._keys]

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._values


class SegmentMap(Generic[S]):
    """Segments ordered by base offset (absolute offsets only)."""

    __slots__ = ("_last", "_map")

    def __init__(self) -> None:
        self._map: SortedDict | _Few = _Few()
        # the last segment, kept at each mutation: every append asks for it (SortedDict.peekitem
        # costs about a microsecond of Python per call)
        self._last: S | None = None

    def add(self, base: int, segment: S) -> None:
        """Insert (or replace) the segment starting at ``base``.  ``O(log(n))`` (amortized: the map's
        :data:`FEW` + 1st segment moves them all into a ``SortedDict``, where they stay)."""
        self._map[base] = segment
        if len(self._map) > FEW and isinstance(self._map, _Few):
            from sortedcontainers import SortedDict

            self._map = SortedDict(self._map.items())
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
