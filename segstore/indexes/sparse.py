"""Sparse offset entries: Kafka's offset index (``%020d.index``), 8 bytes over :class:`EntryIndex`.

The core's sparse offset type, in Kafka's byte layout: Kafka's native ``offset``
files, and the extra ``offset`` layout of any other format (:mod:`segstore.layouts.offset`).

Layout (big-endian, ``OffsetIndex.java``), one entry per ``index.interval.bytes`` of log::

    0  int32  relative offset   (absolute offset - segment base offset)
    4  int32  position          (byte position of the batch in the segment's .log)

Entries are strictly increasing in both columns.  The index is derived from the
log and never checksummed: a crash is repaired by rebuilding it from the log.

An active index is preallocated to ``segment.index.bytes`` rounded down to whole
entries and trimmed when the segment rolls or closes.  Kafka counts a reopened
file's whole length as entries, so a file left untrimmed by a crash ends in
all-zero slots; :func:`count_valid_entries` recognises them so the segment can
be rebuilt instead of read as garbage entries.

Lookups search native int64 contiguous copies of the columns
(:meth:`KafkaIndex.columns`), extended as entries are appended: numpy's
``searchsorted`` converts a big-endian, strided or int32 column whole (to the
int64 of a Python int target) before searching, which made every lookup ``O(n)``.
The copies cost 8 bytes per column per entry of memory.

Thread-safety: as :class:`segstore.index.EntryIndex` (lookups concurrent with one
appending thread; resize/truncate/close exclusive).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple, TypeVar

import numpy as np

from segstore import files
from segstore.errors import CorruptIndexError
from segstore.files import MappedFile
from segstore.index import EntryIndex
from segstore.search import Bound, search

OFFSET_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
assert OFFSET_ENTRY.itemsize == 8

#: The largest relative offset an entry holds (an int32; ``np.iinfo`` built it anew on every append).
_INT32_MAX = (1 << 31) - 1


class OffsetPosition(NamedTuple):
    """An absolute offset and the byte position of the batch it maps to."""

    offset: int
    position: int


def _trailing_zero_start(nonzero: np.ndarray) -> int:
    """Number of slots up to and including the last slot flagged non-zero.  O(n) in numpy."""
    hits = np.flatnonzero(nonzero)
    return int(hits[-1]) + 1 if len(hits) else 0


def check_length(path: str, length: int, entry_size: int) -> None:
    """Raise :class:`CorruptIndexError` unless ``length`` is a whole number of entries."""
    if length % entry_size:
        raise CorruptIndexError(
            f"expected a whole number of {entry_size}-byte entries, found {length} bytes "
            f"({length % entry_size} left over)", path, length - length % entry_size)


class _AbsentFile:
    """The zero-length, unwritable file a missing index stands for while reading."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.size = 0

    def array(self, dtype: np.dtype, start: int = 0, count: int = -1) -> np.ndarray:
        return np.zeros(0, dtype=dtype)

    def flush(self, start: int = 0, end: int | None = None) -> None:
        """Nothing to make durable."""

    def reserve_to(self, end: int, start: int = 0) -> None:
        """Nothing to reserve."""

    def close(self) -> None:
        """Nothing to release."""


#: the concrete index class :meth:`KafkaIndex.open` and :meth:`KafkaIndex.absent` return
_K = TypeVar("_K", bound="KafkaIndex")


class KafkaIndex(EntryIndex):
    """What the offset and time index share: base offset, open/create, trim, untrimmed-crash detection."""

    OFFSET_COLUMN: ClassVar[str] = "relative_offset"
    #: (column, strictly increasing?) pairs every file's entries must satisfy.
    ORDER: ClassVar[tuple[tuple[str, bool], ...]]
    #: whether a real first entry can be all zeros, so that a file of exactly that one slot is one
    #: entry rather than an empty preallocated file
    ZERO_FIRST_ENTRY: ClassVar[bool] = False

    def __init__(self, file: MappedFile, base_offset: int, entries: int, *, untrimmed: bool = False) -> None:
        super().__init__(file, entries)
        self.base_offset = base_offset
        #: True when the file held all-zero slots after its entries (left untrimmed by a crash).
        self.untrimmed = untrimmed
        # Native copies of the columns: growth buffers, and (count, {column: buf[:count]})
        # published in one assignment so a concurrent reader sees a consistent pair.
        self._buffers: dict[str, np.ndarray] = {}
        self._columns: tuple[int, dict[str, np.ndarray]] = (0, {})

    def columns(self) -> dict[str, np.ndarray]:
        """Every column of the valid entries as a native int64 contiguous array.  ``O(1)`` amortised.

        Copies only the entries appended since the last call (into buffers that
        double when full); a truncation drops the copies.
        """
        count, columns = self._columns
        n = self._count
        if count == n and columns:
            return columns
        entries = self.file.array(self.DTYPE, 0, n)
        columns = {}
        for name in self.DTYPE.names or ():
            buf = self._buffers.get(name)
            if buf is None or len(buf) < n:
                grown = np.empty(max(n, 2 * len(buf) if buf is not None else 0, 16), dtype=np.int64)
                if buf is not None:
                    grown[:count] = buf[:count]
                self._buffers[name] = buf = grown
            buf[count:n] = entries[name][count:n]
            columns[name] = buf[:n]
        self._columns = (n, columns)
        return columns

    def column(self, name: str) -> np.ndarray:
        """The lookup column: its native copy (:meth:`columns`), so each search is ``O(log n)``."""
        return self.columns()[name]

    def truncate_entries(self, n: int) -> None:
        """Keep the first ``n`` entries; the column copies start over."""
        super().truncate_entries(n)
        self._columns = (0, {})

    @classmethod
    def open(cls: type[_K], path: str, base_offset: int, *, max_index_size: int, writable: bool = False,
             create: bool = False) -> _K:
        """Open (or, with ``create``, make preallocated) the index at ``path``.

        A new file is preallocated to ``max_index_size`` rounded down to whole entries.
        An existing one is sanity-checked (:meth:`count_valid_entries`); call
        :meth:`grow` before appending to it.

        :raises CorruptIndexError: the file is not a whole number of entries, or its
            entries are out of order.
        """
        entry_size = cls.DTYPE.itemsize
        capacity_bytes = (max_index_size // entry_size) * entry_size
        if create and not files.exists(path):
            if capacity_bytes < entry_size:
                raise CorruptIndexError(
                    f"expected segment.index.bytes of at least one {entry_size}-byte entry, "
                    f"found {max_index_size}", path)
            mapped = MappedFile(path, capacity_bytes, create=True, reserve=True, parkable=True)
            return cls(mapped, base_offset, 0)
        # Read-only: a snapshot, not a map; a writer trims its active index on roll and
        # close, and a reader touching a map past the new end dies of SIGBUS.
        # (a writer's is parkable: a store writing thousands of partitions holds two descriptors for
        # each index it maps, and uses few of them at a time)
        mapped = MappedFile(path, writable=writable, in_memory=not writable, reserve=writable,
                            parkable=writable)
        try:
            check_length(path, mapped.size, entry_size)
            # a writer's map is read up to the file's first hole only (zeros: no entry there; read
            # through the map, a full tmpfs answers a hole with SIGBUS)
            slots = mapped.array(cls.DTYPE) if not writable else \
                mapped.array(cls.DTYPE, 0, mapped.data_end() // entry_size)
            count, _ = cls.count_valid_entries(slots, path, base_offset)
            untrimmed = count < mapped.size // entry_size
        except BaseException:
            mapped.close()
            raise
        return cls(mapped, base_offset, count, untrimmed=untrimmed)

    @classmethod
    def absent(cls: type[_K], path: str, base_offset: int) -> _K:
        """An empty, read-only index standing for a missing file (reading never creates files)."""
        # _AbsentFile is not a MappedFile: it stands in for the part of one an index reads.
        return cls(_AbsentFile(path), base_offset, 0)  # type: ignore[arg-type]

    @classmethod
    def count_valid_entries(cls, slots: np.ndarray, path: str, base_offset: int) -> tuple[int, bool]:
        """``(entries, untrimmed)`` of a file's slots; trailing all-zero slots are not entries, except
        the one slot of a one-slot file where the layout's first entry can be zeros
        (:attr:`ZERO_FIRST_ENTRY`: a trimmed file holds exactly its entries).

        Runtime complexity: ``O(n)`` vectorised.
        :raises CorruptIndexError: entries out of order, or a negative relative offset.
        """
        nonzero = np.zeros(len(slots), dtype=bool)
        for name in slots.dtype.names or ():
            nonzero |= slots[name] != 0
        count = _trailing_zero_start(nonzero)
        if count == 0 and len(slots) == 1 and cls.ZERO_FIRST_ENTRY:
            count = 1
        entries = slots[:count]
        cls.sanity_check(entries, path, base_offset)
        return count, count < len(slots)

    @classmethod
    def sanity_check(cls, entries: np.ndarray, path: str, base_offset: int) -> None:
        """Raise :class:`CorruptIndexError` at the first entry breaking the layout's order."""
        entry_size = cls.DTYPE.itemsize
        rel = entries[cls.OFFSET_COLUMN].astype(np.int64)
        negative = np.flatnonzero(rel < 0)
        if len(negative):
            slot = int(negative[0])
            raise CorruptIndexError(
                f"expected offsets at or after the base offset {base_offset}, "
                f"found {base_offset + int(rel[slot])} in slot {slot}", path, slot * entry_size)
        for column, strict in cls.ORDER:
            slot = cls._first_break(entries[column], strict)
            if slot >= 0:
                word = "strictly increasing" if strict else "non-decreasing"
                raise CorruptIndexError(
                    f"expected {word} {column.replace('_', ' ')}s, found "
                    f"{int(entries[column][slot])} after {int(entries[column][slot - 1])} in slot {slot}",
                    path, slot * entry_size)

    @staticmethod
    def _first_break(column: np.ndarray, strict: bool) -> int:
        """First slot whose value is not greater (``strict``) / not at least its predecessor, or -1."""
        if len(column) < 2:
            return -1
        diffs = np.diff(column.astype(np.int64))
        bad = np.flatnonzero(diffs <= 0 if strict else diffs < 0)
        return int(bad[0]) + 1 if len(bad) else -1

    def relative(self, offset: int) -> int:
        """``offset`` relative to the base offset (must fit an int32)."""
        rel = offset - self.base_offset
        if not 0 <= rel <= _INT32_MAX:
            raise CorruptIndexError(
                f"expected an offset in [{self.base_offset}, {self.base_offset + _INT32_MAX}], "
                f"found {offset}", self.file.path, len(self) * self.entry_size)
        return rel

    def reset(self, max_index_size: int) -> None:
        """Drop every entry and make room for ``max_index_size`` bytes (recovery rebuild)."""
        self.truncate_entries(0)
        entry_size = self.entry_size
        self.file.resize((max_index_size // entry_size) * entry_size)
        self.untrimmed = False

    def grow(self, max_index_size: int) -> None:
        """Extend the file to ``max_index_size`` (whole entries) so the segment can take appends."""
        capacity_bytes = (max_index_size // self.entry_size) * self.entry_size
        if self.file.size < capacity_bytes:
            self.file.resize(capacity_bytes)

    def trim(self) -> None:
        """Shrink the file to its valid entries (Kafka ``trimToValidSize``: on roll and close)."""
        if self.file.size != len(self) * self.entry_size:
            self.resize_to_entries()
        self.untrimmed = False

    @property
    def path(self) -> str:
        return self.file.path


class OffsetIndex(KafkaIndex):
    """The ``.index`` file of one segment: absolute offset -> batch position, sparse.

    Lookups return the largest entry at or below the target (Kafka ``lookup``),
    ``(base_offset, 0)`` when the target precedes every entry.
    """

    DTYPE = OFFSET_ENTRY
    ORDER = (("relative_offset", True), ("position", True))

    @classmethod
    def sanity_check(cls, entries: np.ndarray, path: str, base_offset: int) -> None:
        """The shared order checks, and no negative position (no batch starts before the file).

        Kafka 3.8's ``OffsetIndex.sanityCheck`` only checks the length and the last
        offset; a negative position there would fail the broker's first read.
        """
        negative = np.flatnonzero(entries["position"] < 0)
        if len(negative):
            slot = int(negative[0])
            raise CorruptIndexError(f"expected a log position >= 0 in slot {slot}, found "
                                    f"{int(entries['position'][slot])}", path,
                                    # ignore: numpy types ``fields`` as optional; a structured dtype has it
                                    slot * cls.DTYPE.itemsize + cls.DTYPE.fields["position"][1])  # type: ignore[index]
        super().sanity_check(entries, path, base_offset)

    @property
    def last_offset(self) -> int:
        """The last indexed absolute offset (the base offset when empty)."""
        if not len(self):
            return self.base_offset
        return self.base_offset + int(self.entries["relative_offset"][-1])

    def append_entry(self, offset: int, position: int) -> None:
        """Add ``offset -> position``; offsets must increase.  ``O(1)``.

        :raises CorruptIndexError: the index is full or the offset does not increase.
        """
        if len(self) and offset <= self.last_offset:
            raise CorruptIndexError(
                f"expected an offset above the last indexed {self.last_offset}, found {offset}",
                self.file.path, len(self) * self.entry_size)
        self.append(self.relative(offset), position)

    def lookup_offset(self, target: int) -> OffsetPosition:
        """The largest entry with offset ``<= target``; ``(base_offset, 0)`` if none.  ``O(log n)``."""
        columns = self.columns()
        slot = search(columns["relative_offset"], target - self.base_offset, Bound.LARGEST_LOWER)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + columns["relative_offset"].item(slot),
                              columns["position"].item(slot))

    def lookup_position(self, target: int) -> int:
        """The position of the largest entry with offset ``<= target``; 0 if none.  ``O(log n)``.

        :meth:`lookup_offset` without building the pair (the hot path of offset lookups).
        """
        columns = self.columns()
        slot = search(columns["relative_offset"], target - self.base_offset, Bound.LARGEST_LOWER)
        return columns["position"].item(slot) if slot >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        rel = self.entries["relative_offset"]
        keep = search(rel, offset - self.base_offset, Bound.SMALLEST_UPPER)
        self.truncate_entries(keep)

    def pairs(self) -> list[OffsetPosition]:
        """Every entry as absolute ``(offset, position)`` (dumps and tests)."""
        return [OffsetPosition(self.base_offset + int(r), int(p)) for r, p in self.entries.tolist()]
