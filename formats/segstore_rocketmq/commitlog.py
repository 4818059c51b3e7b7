"""The RocketMQ commitlog: one log shared by every topic, in fixed-size mapped files.

Files are ``mappedFileSizeCommitLog`` bytes, named by their start (physical)
offset in 20 digits, kept in a :class:`segstore.log.SegmentedLog`.  A message is
written only if its size plus 8 bytes fits in what is left of the file
(``END_FILE_MIN_BLANK_LENGTH``); otherwise the file is closed with a BLANK record
``[int remaining][int BLANK_MAGIC]`` and the message starts the next file.

:meth:`CommitLog.place` assigns physical offsets to a batch of encoded sizes
(deciding the BLANKs and rolls), and :meth:`CommitLog.write_batch` writes the
batch with one slice assignment per file touched.  Decoding goes through the pure
codec in :mod:`.message`.

Thread-safety: reads of written bytes may run concurrently with one appending
thread; appends, rolls, truncation and close need the owning store's serialisation.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from segstore import files
from segstore.errors import (
    CorruptDataError,
    NotFoundError,
    OffsetOutOfRangeError,
    StorageFullError,
    TruncatedDataError,
)
from segstore.files import MappedFile
from segstore.log import SegmentedLog

from . import columnar
from .consumequeue import file_name, parse_file_name
from .dirnames import KEPT_ASIDE
from .message import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    PREFIX,
    Blank,
    End,
    RocketMQMessage,
    blank_record,
    decode,
    store_timestamp_at,
)

if TYPE_CHECKING:
    import mmap

assert END_FILE_MIN_BLANK_LENGTH == 8
#: Bytes looked at a time when searching a file for data (bounded memory over 1 GiB files).
SEARCH_WINDOW = 1 << 24


def nonzero_extent(file: files.MappedFile, pos: int, zeros_from: int | None = None) -> int:
    """One past the last non-zero byte of ``file`` at or after ``pos`` (``pos`` if none); ``zeros_from``:
    where the caller found nothing but zeros to the file's end already (not read again).

    Only the file's data ranges are read (a preallocated file's holes are zeros), through its
    descriptor a window at a time (:meth:`MappedFile.first_nonzero`): memory stays bounded on
    1 GiB files, and no hole is read through the map (a full tmpfs answers that with SIGBUS).
    """
    if zeros_from is not None and zeros_from <= pos:
        return pos
    last = file.first_nonzero(pos, zeros_from, last=True)
    return pos if last is None else last


def holds_data(file: files.MappedFile) -> bool:
    """Whether a file holds any non-zero byte (only its data ranges are read, a window at a time,
    through the descriptor).  Safe on a file a writer beside the reader is writing."""
    return file.first_nonzero(0) is not None


def _decode_at(seg: CommitLogFile, pos: int, limit: int, check_crc: bool) -> RocketMQMessage | Blank | End:
    """The record at ``pos`` of ``seg``, viewing only its own bytes (before ``limit``).

    A remote file then fetches just the blocks the record touches, not the whole file:
    the prefix says how long the record is; a BLANK needs no more than its prefix.
    """
    head = seg.file.view(pos, min(pos + PREFIX.size, limit))
    end = limit
    if len(head) == PREFIX.size:
        total, magic = PREFIX.unpack_from(head)
        end = pos + PREFIX.size if magic == BLANK_MAGIC or total <= PREFIX.size else min(pos + total, limit)
    return decode(seg.file.view(pos, end), 0, path=seg.path, base_pos=pos, check_crc=check_crc)

class CommitLogFile:
    """One commitlog file: a :class:`MappedFile` starting at physical offset ``base``.

    ``wrote`` is the position (within the file) up to which bytes are written.
    """

    __slots__ = ("base", "file", "wrote")

    def __init__(self, file: MappedFile, base: int, wrote: int) -> None:
        self.file = file
        self.base = base
        self.wrote = wrote

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def end(self) -> int:
        """The physical offset just past the written bytes."""
        return self.base + self.wrote

    def flush(self) -> None:
        self.file.flush(0, self.wrote)

    def close(self) -> None:
        self.file.close()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a batch goes: per message its physical offset; the BLANKs to write first."""

    offsets: list[int]
    blanks: list[tuple[int, int]]     # (physical offset, size) of each BLANK, in order
    end: int                          # the physical offset after the batch


def place(start: int, sizes: list[int], file_size: int) -> Placement:
    """Physical offsets for messages of these sizes appended at ``start``: the BLANK rule.

    The broker's rule (``CommitLog.DefaultAppendMessageCallback.doAppend``): a
    message needs ``size + END_FILE_MIN_BLANK_LENGTH`` bytes left in its file, else
    a BLANK fills the rest and the message opens the next file.  Sizes must be at
    most ``file_size - 8`` (the store checks maxMessageSize).  The C batch encoder
    (``_speedups.encode_plain``) applies the same rule and is tested equal to this.
    Runtime complexity: ``O(len(sizes))``.
    """
    offsets = []
    blanks = []
    pos = start
    file_end = pos - pos % file_size + file_size
    for size in sizes:
        if pos + size + END_FILE_MIN_BLANK_LENGTH > file_end:
            blanks.append((pos, file_end - pos))
            pos = file_end
            file_end += file_size
        offsets.append(pos)
        pos += size
    return Placement(offsets, blanks, pos)


class CommitLog:
    """The ``commitlog/`` directory.

    :param directory: the ``commitlog`` directory.
    :param file_size: ``mappedFileSizeCommitLog``; every file must have exactly this length.
    :param writable: map the files for writing (new files are created on roll).
    """

    __slots__ = ("__dict__", "_active", "log")     # read by the C appends on every call

    def __init__(self, directory: str, file_size: int, *, writable: bool = False) -> None:
        self.directory = directory
        self.file_size = file_size
        self.writable = writable
        self.log: SegmentedLog[CommitLogFile] = SegmentedLog(self._new_file)
        self._spare: set[str] = set()
        self._active: CommitLogFile | None = None     # self.log.active, kept at each change (hot path)
        #: a 0-byte last file a crash left (not loaded; see :meth:`remove_empty_tail`)
        self.empty_tail: str | None = None
        #: what loading for writing did to files of the wrong length (recovery lines; see :meth:`_fix_size`)
        self.repairs: list[str] = []
        #: ``(path, pos, end)`` of each range of commitlog bytes that is gone, with the messages it held:
        #: a file before the last that was short (from ``pos`` to its end, ``end`` the physical offset
        #: after it), or files missing between two others (``path`` the first missing, ``pos`` 0)
        self.lost: list[tuple[str, int, int]] = []
        #: ``(path, start, end)`` of each run of files missing between two others: the physical range
        #: ``[start, end)`` (the first missing file's path); found at load
        self.missing: list[tuple[str, int, int]] = []
        #: called with a file's base and its first message's store time before that message is written
        #: (the store's flusher keeps the checkpoint below it: ``FlushService.file_begun``)
        self.before_file_begun: Callable[[int, int], None] | None = None
        self._load()

    def _new_file(self, base: int) -> CommitLogFile:
        """Open the file at ``base`` (using a preallocated one if there) and preallocate the next.

        Like the broker's ``AllocateMappedFileService``, the next file is created
        ahead of need (sparse: its blocks are reserved as it is written); a clean
        :meth:`close` deletes it again.  Files keep their blocks reserved a step
        ahead of the data (see :meth:`reserve`).
        """
        files.make_dirs(self.directory)
        path = os.path.join(self.directory, file_name(base))
        self._spare.discard(path)
        mapped = MappedFile(path, self.file_size, create=True, reserve=True)
        spare = os.path.join(self.directory, file_name(base + self.file_size))
        if not files.exists(spare):
            try:
                MappedFile(spare, self.file_size, create=True).close()
                self._spare.add(spare)
            except StorageFullError:
                pass    # ahead of need: the batch that needs it is refused whole by reserve()
        else:
            self._spare.add(spare)
        return CommitLogFile(mapped, base, 0)

    def reserve(self, end: int) -> None:
        """Reserve the blocks that appending up to physical ``end`` writes into: the rest of the
        active file's step (:meth:`MappedFile.reserve_to`) and every file the append rolls into,
        created (sparse) and reserved up to ``end``.

        Called before a batch writes anything, so that a full disk refuses the batch
        whole (:class:`StorageFullError`) instead of failing it half-written.  Files
        created stay as preallocated spares (zeros: the broker and :meth:`_load`
        take trailing ones as such).  Runtime complexity: ``O(files touched)``.
        """
        active = self._active
        if active is not None:
            active.file.reserve_to(min(end - active.base, self.file_size), active.wrote)
            base = active.base + self.file_size
        else:
            base = self.end - self.end % self.file_size
        while base < end:
            path = os.path.join(self.directory, file_name(base))
            files.make_dirs(self.directory)
            spare = MappedFile(path, self.file_size, create=True, reserve=True)
            try:
                spare.reserve_to(min(end - base, self.file_size))
            finally:
                spare.close()
            self._spare.add(path)
            base += self.file_size

    def fits(self, end: int) -> bool:
        """Whether appending up to physical ``end`` stays within the blocks reserved in the active
        file (then :meth:`reserve` has nothing to do).  ``O(1)``."""
        active = self._active
        return active is not None and end <= active.base + min(self.file_size, active.file.reserved)

    def _load(self) -> None:
        loaded = []
        names = [name for name in files.list_dir(self.directory) if KEPT_ASIDE not in name]
        last_data: int | None = None     # the last file holding data: looked up where a size is wrong
        for i, name in enumerate(names):
            base = parse_file_name(self.directory, name)
            path = os.path.join(self.directory, name)
            found = files.not_regular(path)
            if found == "nothing" and not self.writable:
                # gone since the listing: a reader beside a writer whose close deleted its spare
                # (or whose retention deleted an old file); it holds nothing to read
                continue
            if found is not None:
                raise CorruptDataError(f"expected a commitlog file of {self.file_size} bytes "
                                       f"(mappedFileSizeCommitLog), found {found}", path)
            try:
                size = files.file_size(path)
            except NotFoundError:
                if self.writable:
                    raise
                continue    # gone since the look above (as there)
            if size == 0 and i == len(names) - 1:
                # A broker killed while creating its next file leaves it empty: RocketMQ 5.1.3+
                # (MappedFileQueue.doLoad) deletes it, 4.5.1-5.1.2 refuse to start, 4.2-4.4 stop
                # loading there.  It holds nothing: read as absent; a writer's recovery removes it.
                self.empty_tail = path
                continue
            if base % self.file_size:
                raise CorruptDataError(f"expected a commitlog file name that is a multiple of "
                                       f"{self.file_size}, found {name}", path)
            if size != self.file_size:
                if not self.writable:
                    short = size < self.file_size
                    # a short file lost what its missing bytes held: recover keeps what it still holds
                    kept = ("extending it with zeros and keeping the messages it holds whole (a message its "
                            "end tore is saved aside; those past it are lost)" if short else
                            "cutting the bytes past that size (saved aside) and keeping every message")
                    raise (TruncatedDataError if short else CorruptDataError)(
                        f"expected a commitlog file of {self.file_size} bytes (mappedFileSizeCommitLog), "
                        f"found {size}: the broker refuses to load it (MappedFileQueue.load); segstore "
                        f"recover resizes it, {kept}", path, min(size, self.file_size))
                if last_data is None:
                    last_data = self._last_holding_data(names)
                self.repairs += self._fix_size(path, base, size, last=i >= last_data)
            # Every file but the last is full; the last one's end is set by set_end().
            try:
                mapped = MappedFile(path, writable=self.writable, reserve=self.writable)
            except NotFoundError:
                if self.writable:
                    raise
                continue    # gone since the look above (as there)
            loaded.append(CommitLogFile(mapped, base, self.file_size))
        # Trailing files with nothing written are the allocator's preallocation, not data.  Zeros at a
        # file's start alone do not make it one: a damaged or power-cut file may hold data after them,
        # which recovery keeps (a clean close deletes spares).
        while loaded and not holds_data(loaded[-1].file):
            spare = loaded.pop()
            self._spare.add(spare.path)
            spare.close()
        for before, after in itertools.pairwise(loaded):
            if after.base != before.base + self.file_size:
                # deleted or lost between two others; the broker loads the rest (MappedFileQueue.load
                # lists what is there) and skips entries pointing into the gap (getMessage finds no
                # file: MESSAGE_WAS_REMOVING), so readers go on; verify and recover report it
                start = before.base + self.file_size
                gone = os.path.join(self.directory, file_name(start))
                self.missing.append((gone, start, after.base))
                self.lost.append((gone, 0, after.base))
        self.log.load(loaded)
        self._active = self.log.active

    def _last_holding_data(self, names: list[str]) -> int:
        """The index in ``names`` of the last file holding a non-zero byte (0 if none does): the files
        after it are the allocator's preallocated spares, which the load drops, so a short file before
        them ends the data as a short last file does.  Reads the trailing files' data ranges only."""
        for j in range(len(names) - 1, 0, -1):
            path = os.path.join(self.directory, names[j])
            if not files.is_file(path) or not files.file_size(path):
                continue
            mapped = MappedFile(path)
            try:
                if holds_data(mapped):
                    return j
            finally:
                mapped.close()
        return 0

    def _fix_size(self, path: str, base: int, size: int, *, last: bool) -> list[str]:
        """Give a file of the wrong length the mapped-file size, as the broker's loader needs
        (``MappedFileQueue.load`` refuses any other length); the recovery lines saying what was done.

        Bytes past the size cannot belong to the commitlog (no message spans two files): they
        are kept in the recovery directory and cut.  A short file is extended with zeros; a
        file before the last must then end in a BLANK, or the broker's recovery walk would stop
        in it and truncate every later file: the BLANK goes where the file's messages end,
        after the bytes of a message the short end tore (kept aside first), or at the short end
        when other damage comes first (left in place for the recovery walk to report).
        """
        from .recovery import aside_dir

        into = aside_dir(self.directory)
        mapped = MappedFile(path, writable=True)
        lines = []
        try:
            if size > self.file_size:
                extra = mapped.view(self.file_size, size)
                if np.frombuffer(extra, np.uint8).any():
                    kept = files.save_aside(path, self.file_size, extra, into=into)
                    lines.append(f"{path}:{self.file_size}: cut {size - self.file_size} bytes past the "
                                 f"commitlog file size {self.file_size} (the broker refuses the file), "
                                 f"saved in {kept}")
                else:
                    lines.append(f"{path}:{self.file_size}: cut {size - self.file_size} zero bytes past the "
                                 f"commitlog file size {self.file_size} (the broker refuses the file)")
                del extra
                mapped.resize(self.file_size)
                return lines
            mapped.resize(self.file_size)
            lines.append(f"{path}: extended from {size} to {self.file_size} bytes with zeros "
                         f"(mappedFileSizeCommitLog; the broker refuses a file of another size)")
            if last:
                return lines    # the recovery walk ends the data (and cuts a torn message) there
            view = mapped.view(0, size)
            rows = columnar.Rows(max(1, min(columnar.BATCH_ROWS, size // columnar.MIN_MESSAGE_SIZE + 1)))
            pos, status, blank = 0, columnar.DONE, 0
            while pos < size:
                n, pos, status, blank = columnar.decode_region(view, pos, size, size, base, rows)
                if status != columnar.DONE or n == 0:
                    break
            cut_from: int | None = None
            blank_at: int | None
            if pos >= size:
                blank_at = size
            elif status == columnar.BLANK and pos + blank == self.file_size:
                blank_at = None     # the file ended in its BLANK already
            elif size - pos < PREFIX.size or PREFIX.unpack_from(view, pos)[0] > size - pos:
                blank_at = cut_from = pos   # a message the short end tore
            elif status == columnar.END and not np.frombuffer(view, np.uint8, size - pos, pos).any():
                blank_at = pos
            else:
                blank_at = size     # other damage first: left in place, the walk reports it
            if blank_at is not None:
                self.lost.append((path, size if cut_from is None else cut_from, base + self.file_size))
            if cut_from is not None:
                kept = files.save_aside(path, cut_from, view[cut_from:size], into=into)
                lines.append(f"{path}:{cut_from}: cut {size - cut_from} bytes of a message the file's short "
                             f"end tore, saved in {kept}")
            del view
            if blank_at is not None:
                if blank_at > self.file_size - END_FILE_MIN_BLANK_LENGTH:
                    raise CorruptDataError(f"expected room for a BLANK ending the file, found "
                                           f"{self.file_size - blank_at} bytes", path, blank_at)
                if cut_from is not None:
                    mapped.write(cut_from, bytes(size - cut_from))
                mapped.write(blank_at, PREFIX.pack(self.file_size - blank_at, BLANK_MAGIC))
                lines.append(f"{path}:{blank_at}: wrote a BLANK of {self.file_size - blank_at} bytes: the "
                             f"file ends there as a full file does, so the broker's walk goes on to the next")
            mapped.flush()
        finally:
            mapped.close()
        return lines

    def remove_empty_tail(self) -> list[str]:
        """Delete the 0-byte last file a crash left (as RocketMQ 5.x's ``MappedFileQueue.doLoad`` does);
        the recovery line saying so, or none."""
        path, self.empty_tail = self.empty_tail, None
        if path is None:
            return []
        files.remove(path)
        return [f"{path}: removed the empty commitlog file a crash left "
                f"(0 bytes; brokers 4.5.1 to 5.1.2 refuse to start on it)"]

    # -- positions -----------------------------------------------------------
    @property
    def min_offset(self) -> int:
        first = self.log.segments.first
        return first.base if first is not None else 0

    @property
    def end(self) -> int:
        """The physical offset the next message goes to (end of the written bytes)."""
        active = self._active
        return active.base + active.wrote if active is not None else 0     # asked twice per append

    def set_end(self, offset: int) -> None:
        """Declare the written end (after a walk or recovery); later files must not exist."""
        active = self.log.segment_for(offset)
        if active is None:
            return
        if offset - active.base > self.file_size:   # never a written end past its file's bytes
            raise CorruptDataError(f"expected a data end within {active.path} (at most "
                                   f"{active.base + self.file_size}), found {offset}", active.path,
                                   self.file_size)
        active.wrote = offset - active.base
        for seg in self.log.segments.values(offset):
            if seg.base > offset:
                raise CorruptDataError(f"expected no commitlog file after the data end {offset}, "
                                       f"found one at {seg.base}", seg.path, 0)

    def file_for(self, offset: int) -> CommitLogFile:
        """The file holding physical ``offset``.

        :raises OffsetOutOfRangeError: no file holds it.
        """
        seg = self.log.segment_for(offset)
        if seg is None or offset >= seg.base + self.file_size:
            raise OffsetOutOfRangeError(f"expected a physical offset in [{self.min_offset}, {self.end}), "
                                        f"found {offset}", self.directory)
        return seg

    # -- reading -------------------------------------------------------------
    def read(self, offset: int, *, check_crc: bool = True) -> RocketMQMessage:
        """The message at physical ``offset``.

        :raises CorruptDataError: no message there (a BLANK, unwritten space or garbage).
        """
        self.check_not_lost(offset)
        seg = self.file_for(offset)
        pos = offset - seg.base
        record = _decode_at(seg, pos, self.file_size, check_crc)
        if not isinstance(record, RocketMQMessage):
            found = (f"the end-of-file BLANK filler ({record.size} bytes)" if isinstance(record, Blank)
                     else "unwritten space (a zero size and magic code)")
            raise CorruptDataError(f"expected a message at physical offset {offset}, found {found}",
                                   seg.path, pos)
        wrong = columnar.contradiction(record.physical_offset, record.queue_id, offset)
        if wrong is not None:
            raise CorruptDataError(wrong, seg.path, pos)
        return record

    def check_not_lost(self, offset: int) -> None:
        """Raise where physical ``offset`` lies in files missing between others, as a walk names them
        (:meth:`check_gap_before`): a queue's read of a message there is that loss, not an offset out
        of the log's range.

        :raises CorruptDataError: naming the first missing file of the gap.
        """
        for path, gone, end in self.missing:
            if gone <= offset < end:
                raise CorruptDataError(f"expected commitlog files from physical offset {gone} to {end}, "
                                       "found none: the messages they held are lost", path)

    def check_gap_before(self, seg: CommitLogFile, start: int) -> None:
        """Raise when files are missing between the walk's ``start`` and ``seg`` (their messages are
        lost: a read in commitlog order names them instead of passing over them; verify reports
        them, recover exits 1 naming them).

        :raises CorruptDataError: naming the first missing file.
        """
        for path, gone, end in self.missing:
            if end == seg.base and gone >= start:
                raise CorruptDataError(f"expected commitlog files from physical offset {gone} to {end}, "
                                       "found none: the messages they held are lost", path)

    def files_between(self, start: int | None, end: int | None) -> Iterator[tuple[CommitLogFile, int, int]]:
        """The files holding physical offsets ``[start, end)`` (None: the log's ends), in order, each
        with that range clamped to the log (``lo``, ``hi``); a gap before a file raises its error
        (:meth:`check_gap_before`) in its place."""
        lo = self.min_offset if start is None else max(start, self.min_offset)
        hi = self.end if end is None else min(end, self.end)
        for seg in self.log.segments.values(lo):
            if seg.base >= hi:
                return
            self.check_gap_before(seg, lo)
            yield seg, lo, hi

    def walk(self, start: int | None = None, *, check_crc: bool = True,
             stop_at_end: bool = True) -> Iterator[tuple[int, RocketMQMessage | Blank]]:
        """``(physical offset, record)`` for every message and BLANK from ``start``, in order.

        A file ends at its BLANK or at unwritten space (zeros).  With
        ``stop_at_end`` the walk also stops at :attr:`end`, and zeros followed by data in their file
        before that end raise (:meth:`check_zeros_end`); without it (:meth:`find_end`, which opening
        a store uses) the first zeros end the file's data, as the broker's recovery walk ends there.

        :raises CorruptDataError: a damaged record, a BLANK not reaching the end of its file, or
            (``stop_at_end``) zeros before later data, after the records before it.
        """
        start = self.min_offset if start is None else start
        limit = self.end if stop_at_end else None
        for seg in self.log.segments.values(start):
            self.check_gap_before(seg, start)
            pos = max(start - seg.base, 0)
            file_end = seg.wrote if stop_at_end else seg.file.size
            while pos < file_end:
                record = _decode_at(seg, pos, file_end, check_crc)
                if isinstance(record, End):
                    if stop_at_end:     # a reader's walk: zeros with data after them are damage
                        self.check_zeros_end(seg, pos, file_end)
                    break
                if isinstance(record, Blank) and (record.size < END_FILE_MIN_BLANK_LENGTH
                                                  or pos + record.size != self.file_size):
                    raise CorruptDataError(f"expected a BLANK reaching the end of the file "
                                           f"({self.file_size - pos} bytes), found size {record.size}",
                                           seg.path, pos)
                yield seg.base + pos, record
                if isinstance(record, Blank):
                    break
                pos += record.size
            if limit is not None and seg.base + file_end >= limit:
                return

    def check_zeros_end(self, seg: CommitLogFile, pos: int, limit: int) -> None:
        """Zeros at ``pos`` of ``seg`` (a message's place) end its data only when nothing but zeros
        follow up to ``limit`` (its written end): a preallocated file's unwritten tail.  Non-zero bytes
        after them are damage, not the end: zeros written over a message's header hide every message
        after it in the file.  RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` takes magic 0
        for an illegal magic code (its recovery cuts the log there), not a BLANK; verify reports the
        same bytes (``recovery.walk_batches`` finds the next valid message and calls the zeros before
        it a gap).  Called only where a walk meets zeros before ``limit`` (a file that ends without
        its BLANK, or damage), never per message: ``O(data bytes after pos)`` then.

        :raises CorruptDataError: naming the file and ``pos``, worded as verify words it.
        """
        later = seg.file.first_nonzero(pos, limit)
        if later is None:
            return
        from .recovery import next_valid_message  # recovery imports this module

        segs = list(self.log.segments.values(seg.base))     # seg, then the files after it
        found = next_valid_message(segs, 0, pos)
        if found is None:
            raise CorruptDataError(f"expected a message or a BLANK, found zeros before non-zero bytes at "
                                   f"{later}", seg.path, pos)
        j, q = found
        raise CorruptDataError("expected a message or a BLANK, found zeros before later valid messages "
                               f"({segs[j].base + q - seg.base - pos} damaged bytes)", seg.path, pos)

    def find_end(self, start: int, *, torn_tail: bool = False) -> int:
        """The data end, walking from a known message boundary ``start`` to the first unwritten space.

        ``torn_tail``: a record that does not decode but is a torn last write (:meth:`torn_at`) ends
        the data there instead of raising (a reader of a store whose writer was killed mid-copy sees
        the prefix; recovery cuts the tail when the store is next opened for appending).  Other
        damage (:meth:`_end_past_damage`), and files missing between others, do not raise then
        either: the end lies past them, so a reader's walk meets them and raises their error after
        the messages before them, as it does for damage below the end.
        """
        end = start
        try:
            for offset, record in self.walk(start, stop_at_end=False):
                end = offset + record.size      # a message's size, or a BLANK's: to the end of its file
        except CorruptDataError:
            if not torn_tail:
                raise
            return self._end_past_damage(start)
        return end

    def _end_past_damage(self, start: int) -> int:
        """:meth:`find_end` of a reader whose walk from ``start`` met damage or missing files: the end
        of the last file's data, a record there that is a torn last write (:meth:`torn_at`) left out.

        A damaged record that is not torn ends its file's data for this walk, as it ends the
        broker's recovery walk (4.9.7 ``CommitLog.checkMessageAndReturnSize``); the end is then
        past its bytes (its length where it fits in the file, else its file's last non-zero byte),
        unless a later file holds data, whose walk gives the end.  ``O(bytes walked)``.
        """
        end = start
        for seg in self.log.segments.values(start):
            pos = max(start - seg.base, 0)
            size = seg.file.size
            while pos < size:
                try:
                    record = _decode_at(seg, pos, size, True)
                except CorruptDataError:
                    if self.torn_at(seg.base + pos):
                        return seg.base + pos
                    head = bytes(seg.file.view(pos, min(pos + PREFIX.size, size))).ljust(PREFIX.size, b"\0")
                    total, _ = PREFIX.unpack(head)
                    stop = pos + total if PREFIX.size < total <= size - pos else pos
                    end = seg.base + max(stop, nonzero_extent(seg.file, pos))
                    break
                if isinstance(record, End):
                    break
                if isinstance(record, Blank):   # one not reaching the file's end is met by the reader
                    end = seg.base + size
                    break
                end = seg.base + pos + record.size
                pos += record.size
        return end

    def torn_at(self, offset: int) -> bool:
        """Whether the record at ``offset`` is a torn last write: a length that fits in its file, the
        bytes written up to some point of the record and zeros from there to the end of the file, and
        nothing in any later file.  ``O(bytes after offset)``."""
        seg = self.file_for(offset)
        pos = offset - seg.base
        head = seg.file.view(pos, min(pos + PREFIX.size, seg.file.size))
        if len(head) < PREFIX.size:
            return False
        total, _ = PREFIX.unpack_from(head)
        if not PREFIX.size < total <= self.file_size - pos:
            return False
        if seg.file.first_nonzero(pos + total - 1) is not None:  # last byte on (holes are not read)
            return False
        return not any(later.file.first_nonzero(0) is not None
                       for later in self.log.segments.values(seg.base + 1) if later.base > seg.base)

    # -- writing -------------------------------------------------------------
    def place(self, sizes: list[int]) -> Placement:
        """:func:`place` from :attr:`end`."""
        return place(self.end, sizes, self.file_size)

    def write_batch(self, start: int, chunks: Sequence[bytes | bytearray | memoryview], offsets: list[int],
                    blanks: list[tuple[int, int]], sizes: list[int]) -> list[CommitLogFile]:
        """Write encoded messages placed by :meth:`place` (``start`` is :attr:`end` then).

        The chunks of each file are joined and written with one slice assignment.
        Returns the files touched.  :attr:`before_file_begun` hears of each file the batch begins
        before anything is written.
        """
        if self.before_file_begun is not None and offsets:
            self._tell_files_begun(self.before_file_begun, start, chunks, offsets)
        touched = []
        blank_iter = iter(blanks)
        next_blank = next(blank_iter, None)
        i = 0
        n = len(chunks)
        pos = start
        while i < n or next_blank is not None:
            seg = self._file_at(pos)
            file_end = seg.base + self.file_size
            j = i
            while j < n and offsets[j] < file_end:
                j += 1
            data = chunks[i] if j == i + 1 else b"".join(chunks[i:j])     # one chunk: written as it is
            write_pos = pos - seg.base
            if data:
                seg.file.write(write_pos, data)
            seg.wrote = write_pos + len(data)
            if next_blank is not None and next_blank[0] < file_end:
                blank_pos, blank_size = next_blank
                seg.file.write(blank_pos - seg.base, blank_record(blank_size))
                seg.wrote = self.file_size
                next_blank = next(blank_iter, None)
                pos = file_end
            else:
                pos = offsets[j - 1] + sizes[j - 1] if j > i else pos
            seg.file.appended(write_pos, seg.wrote)
            self.log.mark_dirty(seg)
            touched.append(seg)
            i = j
        return touched

    def _tell_files_begun(self, hook: Callable[[int, int], None], start: int,
                          chunks: Sequence[bytes | bytearray | memoryview], offsets: list[int]) -> None:
        """Call ``hook`` (:attr:`before_file_begun`) for each file whose first message is in the batch
        (a chunk placed at a file's start: the one at ``start`` when it is one, the others rolled into).
        ``O(files begun * log(chunks))``."""
        size = self.file_size
        base = start if start % size == 0 else start - start % size + size
        while base <= offsets[-1]:
            i = bisect.bisect_left(offsets, base)
            if offsets[i] == base and len(chunks[i]):
                hook(base, store_timestamp_at(chunks[i]))
            base += size

    def unwritten_map(self) -> tuple[mmap.mmap | None, int]:
        """The active file's writable map and the data end in it, for encoding in place: bytes from
        there to the file's end are unwritten.  ``(None, 0)`` when there is no active file or it is
        full.

        The map is a buffer for a call that copies into it and keeps no reference (the store
        holds its lock meanwhile); what it wrote is reported with :meth:`written_in_place`.
        """
        active = self._active
        if active is None or active.wrote >= active.file.reserved or active.wrote == 0:
            return None, 0      # a file's first message goes through write_batch (before_file_begun)
        return active.file.buffer(), active.wrote

    def reserved_end(self) -> int:
        """Where the blocks reserved in the active file end, in it (0 without one): an in-place
        encoder writes below it only (past it, a full disk would kill it with SIGBUS)."""
        active = self._active
        return 0 if active is None else min(self.file_size, active.file.reserved)

    def written_in_place(self, n: int) -> None:
        """Account ``n`` bytes written at the data end through :meth:`unwritten_map` (no BLANK among them)."""
        active = self._active
        if active is None:
            raise OffsetOutOfRangeError(f"expected an active commitlog file to account {n} bytes written "
                                        "in place (see unwritten_map), found none", self.directory)
        active.wrote += n
        active.file.appended(active.wrote - n, active.wrote)
        self.log.mark_dirty(active)

    def discard_unwritten(self, n: int) -> None:
        """Zero ``n`` bytes at the data end that :meth:`unwritten_map` handed out but the batch was refused:
        a recovery walking past the end must not find messages nobody acknowledged."""
        active = self._active
        if active is not None and n > 0:
            active.file.write(active.wrote, bytes(n))

    def _file_at(self, pos: int) -> CommitLogFile:
        active = self._active
        if active is not None and active.base <= pos < active.base + self.file_size:
            return active
        seg = self.log.segment_for(pos)
        if seg is None or pos >= seg.base + self.file_size:
            seg = self._active = self.log.roll(pos - pos % self.file_size)
        return seg

    def start_at(self, base: int) -> None:
        """Make a commitlog that holds no data start at the file at physical ``base`` (a multiple of the
        file size): its files so far (empty) and preallocated ones are deleted, and the next message
        goes to ``base``, as RocketMQ 4.9.7 ``MappedFileQueue.getLastMappedFile(startOffset)`` creates a
        queue's first file at ``startOffset - startOffset % mappedFileSize`` (a slave's commitlog starts
        at its master's, ``CommitLog.appendData``).  ``O(files)``.

        :raises OffsetOutOfRangeError: the commitlog holds data, or ``base`` is negative or not at a
            file's start.
        """
        if base < 0 or base % self.file_size:
            raise OffsetOutOfRangeError(f"expected a commitlog start at a multiple of the file size "
                                        f"{self.file_size}, found {base}", self.directory)
        if self.end != self.min_offset:
            raise OffsetOutOfRangeError(f"expected a commitlog without data to start at {base}, found data "
                                        f"from {self.min_offset} to {self.end}", self.directory)
        removed = self.log.truncate_after(-1)
        for path in [seg.path for seg in removed] + sorted(self._spare):
            files.remove(path)
        self._spare.clear()
        self._active = self.log.roll(base)

    def truncate(self, offset: int) -> None:
        """Zero everything from physical ``offset`` on and delete later files."""
        seg = self.log.segment_for(offset)
        if seg is None:
            return
        pos = offset - seg.base
        if seg.wrote > pos:
            seg.file.write(pos, bytes(seg.wrote - pos))
        seg.wrote = pos
        removed_files = self.log.truncate_after(seg.base)
        self._active = self.log.active
        for removed in removed_files:
            files.remove(removed.path)

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        """Flush, close, and delete preallocated files nothing was written to (a clean shutdown)."""
        if self.writable:
            self.log.close()
            self._active = None
            for path in sorted(self._spare):
                files.remove(path)
            self._spare.clear()
        else:
            self.abandon()

    def abandon(self) -> None:
        """Close without flushing or deleting preallocated files (as a killed broker leaves them)."""
        for seg in self.log.segments:
            seg.close()
        self.log.segments.clear()
        self._active = None
        self._spare.clear()
