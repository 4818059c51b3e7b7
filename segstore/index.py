"""Index layouts: fixed-size entries over a mapped file, and the protocol every layout implements.

:class:`EntryIndex` is what Kafka's ``AbstractIndex`` is: it owns everything that
does not depend on the entry format (the mapped file, the entry count, append,
truncate, resize, flush) and the lookup through the one binary search
(:func:`segstore.search.search`).  A layout only declares its numpy dtype (a
big-endian structured dtype whose size is asserted) and what its columns mean:

- RocketMQ ConsumeQueue: ``[i8 commitlog offset][i4 size][i8 tags code]`` (20 bytes),
- Kafka offset index: ``[i4 relative offset][i4 position]`` (8 bytes),
- Kafka time index: ``[i8 timestamp][i4 relative offset]`` (12 bytes),
- the entries of a RocketMQ IndexFile: ``[i4 hash][i8 offset][i4 time diff][i4 prev]`` (20 bytes).

The log is the truth; every index is derived from it and can be rebuilt from a
scan.  :class:`IndexLayout` is what a layout offers to a store so that any
layout can sit over any log.

Thread-safety: lookups may run concurrently with each other and with one
appending thread (entries become visible when the count is published);
``truncate_entries``/``resize``/``close`` need exclusive access.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from .errors import CorruptIndexError
from .files import MappedFile
from .search import Bound, search


class EntryIndex:
    """Fixed-size entries of ``DTYPE`` stored from byte 0 of one :class:`MappedFile`.

    :param file: the mapped file (its size is the capacity).
    :param entries: how many entries are valid (the rest is preallocated space).
    """

    DTYPE: ClassVar[np.dtype]
    # members, not dict entries: a format's C append (RocketMQ's Appender) reads and sets them
    # on every call; anything else a subclass or a test sets goes in the dict
    __slots__ = ("__dict__", "_count", "file")

    def __init__(self, file: MappedFile, entries: int) -> None:
        self.file = file
        itemsize = self.DTYPE.itemsize
        if entries < 0 or entries * itemsize > file.size:
            raise CorruptIndexError(
                f"expected at most {file.size // itemsize} entries of {itemsize} bytes, found {entries}",
                file.path)
        self._count = entries

    @property
    def entry_size(self) -> int:
        return self.DTYPE.itemsize

    @property
    def capacity(self) -> int:
        """How many entries fit in the file as mapped."""
        return self.file.size // self.DTYPE.itemsize

    def __len__(self) -> int:
        return self._count

    @property
    def is_full(self) -> bool:
        return self._count >= self.capacity

    @property
    def entries(self) -> np.ndarray:
        """The valid entries as a structured array viewing the map (zero-copy).  ``O(1)``."""
        return self.file.array(self.DTYPE, 0, self._count)

    def all_slots(self) -> np.ndarray:
        """Every slot the file can hold, valid or not (for recovery scans)."""
        return self.file.array(self.DTYPE, 0, self.capacity)

    def entry(self, slot: int) -> np.void:
        if not 0 <= slot < self._count:
            raise IndexError(f"slot {slot} out of range [0, {self._count})")
        return self.entries[slot]

    def reserve(self, n: int = 1) -> None:
        """Have the blocks of the next ``n`` entries reserved before they are written
        (:meth:`MappedFile.reserve_to`; a step at a time).  ``O(1)`` when they are.

        :raises StorageFullError: the disk is full.
        """
        itemsize = self.DTYPE.itemsize
        self.file.reserve_to(min(self.file.size, (self._count + n) * itemsize), self._count * itemsize)

    def append(self, *fields: Any) -> None:
        """Append one entry (field values in dtype order).  ``O(1)``."""
        self.append_array(np.array([tuple(fields)], dtype=self.DTYPE))

    def append_array(self, rows: np.ndarray) -> None:
        """Append many entries in one copy.  ``O(k)``.

        :raises CorruptIndexError: they do not fit (callers roll before that).
        """
        n = len(rows)
        if self._count + n > self.capacity:
            raise CorruptIndexError(
                f"index full: room for {self.capacity - self._count} more entries, asked for {n}",
                self.file.path, self._count * self.entry_size)
        start = self._count * self.entry_size
        data = rows if rows.dtype == self.DTYPE else rows.astype(self.DTYPE)
        self.file.write(start, data.tobytes())
        self._count += n

    def append_packed(self, data: bytes | bytearray | memoryview) -> bool:
        """Append entries given as their bytes in the file's layout (a whole number of ``DTYPE``
        items; a memoryview of bytes) if they fit; False, nothing written, if they do not.

        The append of callers that hold the entries encoded already (a RocketMQ append gets
        its consume-queue rows from the C encoder): no array is built.  ``O(k)``.

        :raises CorruptIndexError: ``data`` is not a whole number of entries.
        """
        n = len(data)
        itemsize = self.DTYPE.itemsize
        if n % itemsize:
            raise CorruptIndexError(f"expected whole entries of {itemsize} bytes, found {n} bytes",
                                    self.file.path, self._count * itemsize)
        start = self._count * itemsize
        if start + n > self.file.size:
            return False
        self.file.write(start, data)
        self._count += n // itemsize
        return True

    def truncate_entries(self, n: int) -> None:
        """Keep the first ``n`` entries; the rest of the file is zeroed."""
        if n >= self._count:
            return
        start = n * self.entry_size
        self.file.write(start, bytes(self._count * self.entry_size - start))
        self._count = n

    def lookup(self, column: str, target: int, bound: Bound) -> int:
        """The slot holding ``target`` in ``column`` at the given bound (see :func:`search`).

        ``-1`` (LARGEST_LOWER) or ``len(self)`` (SMALLEST_UPPER) when there is none.
        Runtime complexity: ``O(log(n))``.
        """
        return search(self.column(column), target, bound)

    def column(self, name: str) -> np.ndarray:
        """The column lookups search (a view of the map; subclasses may keep a native copy)."""
        return self.entries[name]

    def flush(self) -> None:
        self.file.flush(0, self._count * self.entry_size)

    def resize_to_entries(self, n: int | None = None) -> None:
        """Resize the file to hold exactly ``n`` entries (default: the valid ones: trim)."""
        n = self._count if n is None else n
        self.file.resize(n * self.entry_size)

    def close(self) -> None:
        self.file.close()


@runtime_checkable
class IndexLayout(Protocol):
    """What an index layout offers a store (native or extra).

    ``name`` is the layout's CLI/API name (``"queue"``, ``"offset"``, ``"time"``,
    ``"key"``); ``native`` says whether the broker itself keeps it.  A layout reads
    the log itself (the log is the truth): ``build`` from the start, ``append``
    from the point it has indexed up to, so a crash or another writer's appends
    are caught up the same way.
    """

    name: ClassVar[str]
    native: ClassVar[bool]

    def build(self) -> None:
        """Rebuild the whole index from a scan of the log."""

    def append(self) -> None:
        """Index what the log holds past the point already indexed."""

    def flush(self) -> None:
        """Make the index durable."""

    def verify(self) -> list[Any]:
        """Problems found (``segstore.store.Problem``), checked against the log."""

    def close(self) -> None:
        """Release the files."""
