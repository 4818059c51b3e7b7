"""Sparse per-stream index files (``.index``/``.timeindex`` entries) kept by segstore.

Used by the extra sparse offset and time layouts (:mod:`.offset`, :mod:`.time`)
over any store whose format does not keep them (RocketMQ queues, say).  The
entries are the core's (:class:`segstore.indexes.sparse.OffsetIndex`,
:class:`segstore.indexes.timeindex.TimeIndex`, Kafka's byte layout), so there
is one entry layout and one binary search for every log.  Files roll when full
(and, for the offset layout, when the stream's records move to the next log
file, because entry positions are 32-bit and relative to that file); a rolled
file is trimmed and never written again, so after a crash only a stream's last
file is rebuilt.

Thread-safety: as :class:`segstore.layouts.base.StreamIndex`.
"""

from __future__ import annotations

import os
from typing import Generic, TypeVar

import numpy as np

from segstore import files
from segstore.errors import CorruptIndexError
from segstore.files import MappedFile
from segstore.indexes.sparse import KafkaIndex, check_length
from segstore.search import Bound
from segstore.segments import SegmentMap
from segstore.store import Problem

from .base import StreamIndex

#: the index file class of a :class:`SparseFiles` (offset or time entries)
IndexFileT = TypeVar("IndexFileT", bound=KafkaIndex)


def open_index_file(cls: type[IndexFileT], path: str, base: int, max_index_size: int, *,
                    writable: bool) -> IndexFileT:
    """Open one index file segstore wrote.

    A file shorter than the preallocated size was trimmed (at roll or clean close),
    so every slot is an entry, all-zero ones included (Kafka's rule); a file of
    the preallocated size may be untrimmed, and trailing all-zero slots are not
    entries then.  :raises CorruptIndexError: not whole entries, or out of order.
    """
    mapped = MappedFile(path, writable=writable)
    try:
        size = cls.DTYPE.itemsize
        check_length(path, mapped.size, size)
        slots = mapped.array(cls.DTYPE)
        if mapped.size < (max_index_size // size) * size:
            cls.sanity_check(slots, path, base)
            return cls(mapped, base, len(slots))
        count, untrimmed = cls.count_valid_entries(slots, path, base)
    except BaseException:
        mapped.close()
        raise
    return cls(mapped, base, count, untrimmed=untrimmed)


class SparseFiles(StreamIndex, Generic[IndexFileT]):
    """A stream's sparse index as :class:`KafkaIndex` files in a segment map keyed by base offset.

    Subclasses set :attr:`index_class`, name files (:meth:`file_name`,
    :meth:`parse_name`), fill the active file (:meth:`_fill`) and check a file's
    entries against the log (:meth:`_file_difference`).
    """

    index_class: type[IndexFileT]
    suffix: str

    def _open_files(self) -> None:
        self.files: SegmentMap[IndexFileT] = SegmentMap()
        self.extra: dict[int, int] = {}
        max_size = self.options["layout.index.bytes"]
        for name in files.list_dir(self.directory):
            parsed = self.parse_name(name)
            if parsed is None:
                continue
            base, extra = parsed
            index = open_index_file(self.index_class, os.path.join(self.directory, name), base, max_size,
                                    writable=self.writable)
            self.files.add(base, index)
            self.extra[base] = extra
        active = self.files.active
        if self.writable and active is not None:
            active.grow(max_size)

    def parse_name(self, name: str) -> tuple[int, int] | None:
        raise NotImplementedError

    def file_name(self, base: int, extra: int) -> str:
        raise NotImplementedError

    def _new_file(self, base: int, extra: int) -> IndexFileT:
        active = self.files.active
        if active is not None:
            self._close_active(active)
        path = os.path.join(self.directory, self.file_name(base, extra))
        index = self.index_class.open(path, base, max_index_size=self.options["layout.index.bytes"],
                                      writable=True, create=True)
        if len(index):
            raise CorruptIndexError(f"expected a new, empty index file, found {len(index)} entries", path, 0)
        self.files.add(base, index)
        self.extra[base] = extra
        self.state.carry = {}
        return index

    def _close_active(self, active: IndexFileT) -> None:
        """A file that stops being written: trimmed and flushed."""
        active.trim()
        active.flush()

    def _remove_file(self, base: int) -> None:
        index = self.files.remove(base)
        self.extra.pop(base, None)
        index.close()
        files.remove(index.path)

    def _cut_to(self, offset: int) -> int:
        """Drop the files from the one holding ``offset`` on; returns where indexing restarts.

        The last remaining file goes too (its sparse windows and running maximum
        cannot be trusted past a crash), so indexing restarts at its base.
        """
        for base in [b for b in self.files.bases() if b >= offset]:
            self._remove_file(base)
        last = self.files.active
        restart = offset
        if last is not None:
            restart = last.base_offset
            self._remove_file(last.base_offset)
        self.state.carry = {}
        return restart

    def _drop_below(self, offset: int) -> None:
        """Delete the files before the one that can hold ``offset``: the next file's base is at or
        below it, so they index nothing from it on.  ``O(log n)`` when there are none."""
        first = self.files.first
        floor = self.files.floor_base(offset)
        if first is None or floor is None or first.base_offset >= floor:
            return
        for base in self.files.bases():
            if base >= floor:
                break
            self._remove_file(base)

    def _expected_problems(self) -> list[Problem]:
        """Each file's entries against the log; files wholly below the log start are out of range
        (the next writer deletes them), and so are the entries at or past ``indexed_end`` (a writer's
        that died before it saved its state: no lookup uses them, the next writer cuts them)."""
        problems = []
        start, indexed = self.log_start(), self.state.indexed_end
        bases = self.files.bases()
        for i, (base, index) in enumerate(self.files.items()):
            if base >= indexed:
                break
            following = bases[i + 1] if i + 1 < len(bases) else None
            rolled = following is not None and following <= indexed
            end = following if rolled and following is not None else indexed
            if end <= start:
                continue
            diff = self._file_difference(base, index, start, end, rolled,
                                         past=following is not None and not rolled)
            if diff is not None:
                problems.append(Problem(index.path, diff[0] * index.entry_size, diff[1]))
        return problems

    def _file_difference(self, base: int, index: IndexFileT, start: int, end: int,
                         rolled: bool, past: bool) -> tuple[int, str] | None:
        """``(slot, message)`` of the first entry of the file at ``base``, which indexes offsets up to
        ``end``, that is not what the log's records from ``max(base, start)`` make; None when all are.
        Only its entries below ``end`` are looked at (:meth:`_held`); ``past``: the file was rolled
        past ``indexed_end``, after the state was saved (the entry a roll forces in may be there).

        A file that begins below the log start ``start`` lost the records before it, and with them
        the bytes its sparse entries are spaced by: its entries below the start are out of range, and
        each one at or past it is checked against the record it names (:meth:`_entries_from`).
        """
        raise NotImplementedError

    @staticmethod
    def _held(index: IndexFileT, end: int) -> np.ndarray:
        """The file's entries of offsets below ``end``."""
        return index.entries[:index.lookup("relative_offset", end - index.base_offset, Bound.SMALLEST_UPPER)]

    @classmethod
    def _entries_from(cls, index: IndexFileT, start: int, end: int) -> tuple[int, np.ndarray]:
        """The slot of the file's first entry at or past offset ``start``, and the entries from it below
        ``end``."""
        slot = index.lookup("relative_offset", start - index.base_offset, Bound.SMALLEST_UPPER)
        return slot, cls._held(index, end)[slot:]

    def _flush_files(self) -> None:
        active = self.files.active
        if active is not None:
            active.flush()

    def _trim_files(self) -> None:
        active = self.files.active
        if active is not None:
            active.trim()

    def _close_files(self) -> None:
        for index in getattr(self, "files", ()):
            index.close()
        self.files = SegmentMap()
        self.extra = {}

    @staticmethod
    def first_difference(found: np.ndarray, expected: np.ndarray,
                         first_slot: int = 0) -> tuple[int, str] | None:
        """``(slot, message)`` of the first entry that differs from ``expected``; None when equal.

        ``found`` are the file's entries from slot ``first_slot`` on.
        """
        n = min(len(found), len(expected))
        diff = np.flatnonzero(found[:n] != expected[:n])
        if len(diff):
            i = int(diff[0])
            return first_slot + i, (f"expected entry {tuple(expected[i].tolist())} in slot {first_slot + i}, "
                                    f"found {tuple(found[i].tolist())}")
        if len(found) != len(expected):
            return first_slot + n, (f"expected {first_slot + len(expected)} entries, "
                                    f"found {first_slot + len(found)}")
        return None
