"""Dense queue entries, one per offset: RocketMQ's consume queue (``consumequeue/TOPIC/QUEUEID/``).

The core's dense index type, in the broker's byte layout and file naming: RocketMQ's
native ``queue`` files, and the extra ``queue`` layout of any other format
(:mod:`segstore.layouts.queue`, tags code 0).

One entry per message of the queue, logical offset = entry number::

    offset  bytes  field
    0       8      commitlog offset (physical) of the message
    8       4      message size
    12      8      tags code (Java String.hashCode of TAGS; delay messages: delivery time)

Files are ``mappedFileSizeConsumeQueue`` bytes (a multiple of 20), named by the byte
offset of their first entry (20 digits), so entry ``n`` is in the file named
``floor(n * 20 / file_size) * file_size``.  The valid entries of a file end at the
first slot without ``offset >= 0 and size > 0`` (the broker's recovery rule).

Thread-safety: reads may run concurrently with each other; appends, truncation and
close need the owning store's serialisation.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError, CorruptIndexError, OffsetOutOfRangeError, StorageFullError
from segstore.files import MappedFile
from segstore.index import EntryIndex
from segstore.javatext import parse_long
from segstore.log import SegmentedLog
from segstore.search import Bound, search

CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_DTYPE.itemsize == 20
FILE_NAME_DIGITS = 20
#: the option the broker's own queue files take their size from (an extra index of segstore's names its own)
BROKER_SIZE_OPTION = "mappedFileSizeConsumeQueue"
#: the size of the blank entries RocketMQ writes before a queue's first (``ConsumeQueue.fillPreBlank``:
#: ``Integer.MAX_VALUE``)
PRE_BLANK_SIZE = 2**31 - 1


def file_name(base: int) -> str:
    """The 20-digit, zero-padded name of a file starting at ``base``."""
    return f"{base:0{FILE_NAME_DIGITS}d}"


def name_offset(name: str) -> int | None:
    """The start offset a file of the 20 characters the broker names files with stands for, as its
    loader reads the name (RocketMQ ``MappedFile.init``: ``Long.parseLong(file.getName())``,
    :func:`segstore.javatext.parse_long`: ``"\u0660" * 19 + "\u0665"`` is 5); None for any other name
    (one it throws on, ``"\u00b2" * 20`` too, a negative one, or one of another length).  ``O(1)``."""
    value = parse_long(name) if len(name) == FILE_NAME_DIGITS else None
    return value if value is not None and value >= 0 else None


def parse_file_name(directory: str, name: str) -> int:
    """The start offset a 20-digit file name stands for (:func:`name_offset`).

    :raises CorruptDataError: the name is not 20 decimal digits (a file the broker's loader refuses).
    """
    offset = name_offset(name)
    if offset is None:
        raise CorruptDataError(f"expected file names of {FILE_NAME_DIGITS} digits, found {name!r}",
                               os.path.join(directory, name))
    return offset


#: Slots :func:`valid_entries` checks first; each further step checks twice as many.
FIRST_CHECK = 4096
#: The last files of a queue whose entries a reader counts slot by slot; the files before them are
#: full when their last slot is an entry (``ConsumeQueue.recover``, 4.9.7: the broker walks its last
#: three files only and takes the others as they are).
COUNTED_FILES = 3


def valid_entries(slots: np.ndarray) -> int:
    """How many leading slots are entries (``offset >= 0 and size > 0``).  ``O(entries)`` in numpy.

    The slots are checked in doubling steps up to the first that is not an entry: a queue file is
    preallocated (300,000 slots by default) and a store open loads every queue, so checking every
    slot read pages of zeros no entry was ever written to.
    """
    start, step = 0, FIRST_CHECK
    while start < len(slots):
        chunk = slots[start:start + step]
        bad = np.flatnonzero((chunk["offset"] < 0) | (chunk["size"] <= 0))
        if len(bad):
            return start + int(bad[0])
        start += len(chunk)
        step *= 2
    return len(slots)


def served_entries(slots: np.ndarray) -> int:
    """The slots of a consume-queue file the broker serves after its load: :func:`valid_entries`, or where
    slot 0 is no entry and entries follow it, that slot and the run of entries after it.  RocketMQ 4.9.7
    and 5.3.3 ``ConsumeQueue.truncateDirtyLogicFiles`` (run at every recovery whose queues reach the
    commitlog's end) keeps the last file's slot 0 whatever it holds below that end (``if (0 == i)``), then
    its entries up to the first that is none; ``ConsumeQueue.recover`` has stopped at the slot and deleted
    the files after the file (``truncateDirtyFiles``), or a reput from the commitlog writes them again.  A
    read of that slot raises, as of any other slot without an entry.  ``O(entries)``."""
    n = valid_entries(slots)
    if n or len(slots) < 2:
        return n
    after = valid_entries(slots[1:])
    return 1 + after if after else 0


def _is_entry(slot: np.void) -> bool:
    return bool(slot["offset"] >= 0 and slot["size"] > 0)


#: How long a file must have gone unchanged (its ``st_ctime``) before a reader's count of it is kept
#: (:func:`keep_entry_counts`) when the kernel's dirty-page settings cannot be read: its default
#: ``vm.dirty_expire_centisecs`` (30 s) and ``vm.dirty_writeback_centisecs`` (5 s), with room to spare.
QUIET_NS = 60 * 10**9


def _quiet_ns() -> int:
    """How long a page written through a shared map may stay dirty (so writable without a fault, which
    is what stamps the file's times) on this machine, with room to spare: the kernel's writeback
    delay (:func:`segstore.files.dirty_page_delay_ns`) plus 25 s, at least :data:`QUIET_NS`."""
    delay = files.dirty_page_delay_ns()
    return QUIET_NS if delay is None else max(QUIET_NS, delay + 25 * 10**9)


class _EntryCounts:
    """Counts of consume-queue files' entries (:func:`valid_entries`) kept across a reader's store opens,
    by file: ``(st_dev, st_ino)`` -> ``((size, mtime, ctime, slots), count, last entry's bytes)``.

    A count is handed out again only where the file's identity, size, times (ns) and readable slots are
    what they were when it was counted, the slot before the count is the same 20 bytes and the slot at
    it still no entry; and it was kept only where the file's ``st_ctime`` was :func:`_quiet_ns` older
    than the ``fstat`` taken before counting.  Why that is the count a new walk of the slots gives:

    - ``write``, ``truncate``, ``fallocate``, a rename over it or a new file (another inode) change
      ``st_ctime``/``st_size``/``st_ino``; ``st_ctime`` is stamped with the kernel's coarse clock, so a
      change in the same tick as the count would leave it as it was: the quiet period rules that out.
    - A write through a shared map stamps the times when it faults on a clean page (file systems that
      write back, ext4 or xfs, map clean pages read-only for that); a page dirtied before the count,
      still writable in a writer's map, takes writes without a fault until the kernel writes it back,
      which it does within ``vm.dirty_expire_centisecs`` plus a writeback period: the quiet period
      (longer) says no page was dirty at the count.
    - Where that does not hold (tmpfs never writes back; writeback held up for minutes), the writers
      still keep a file's entries one run from its first slot: the broker appends at its write
      position and its recovery (``ConsumeQueue.truncateDirtyLogicFiles``, 4.9.7 and 5.3.3) writes no
      slot, only deletes whole files; segstore appends at the count and cuts a run off the end
      (:meth:`ConsumeQueue.truncate`).  Of such a file, an entry before the count's slot and none at
      it is exactly that count, which the two slots checked say.

    What it does not see: a file written in place by something else through a map whose pages stayed
    dirty past the quiet period, or a file system that stamps no times.  Thread-safe (single dict
    operations: a race costs a count, never a wrong one); at most :attr:`limit` files, the oldest
    dropped first.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.quiet_ns = _quiet_ns()
        self.counts: dict[tuple[int, int], tuple[tuple[int, int, int, int], int, bytes]] = {}

    def count(self, mapped: MappedFile, slots: np.ndarray,
              counter: Callable[[np.ndarray], int] = valid_entries) -> int:
        """``counter`` of ``slots`` (``mapped``'s slots up to its first hole), from the count kept for the
        file where it still holds, else counted (and kept where the file is quiet)."""
        now = time.time_ns()
        st = mapped.stat()
        if st is None:
            return counter(slots)
        key, state = (st.st_dev, st.st_ino), (st.st_size, st.st_mtime_ns, st.st_ctime_ns, len(slots))
        kept = self.counts.get(key)
        if kept is not None and kept[0] == state:
            n, last = kept[1], kept[2]
            if (n == len(slots) or not _is_entry(slots[n])) and (n == 0 or slots[n - 1].tobytes() == last):
                return n
        n = counter(slots)
        self.counts.pop(key, None)
        if st.st_ctime_ns < now - self.quiet_ns:
            self.counts[key] = (state, n, slots[n - 1].tobytes() if n else b"")
            while len(self.counts) > self.limit:
                self.counts.pop(next(iter(self.counts)), None)
        return n


#: The counts kept across a reader's opens (:func:`keep_entry_counts`); None: every open counts.
_counts: _EntryCounts | None = None


def keep_entry_counts(limit: int = 1 << 16) -> None:
    """From now on in this process, keep each consume-queue file's count of entries a reader's open
    makes (:func:`valid_entries`, over every slot of a queue's last files: 10-14 ms of each open of a
    4M-message store) for the next open of the same unchanged file (:class:`_EntryCounts` says what
    is checked and why it is the count a new walk gives).  For a process that opens the same store
    again and again (a Spark worker opens it for each query's plan).  At most ``limit`` files.
    Idempotent."""
    global _counts
    if _counts is None:
        _counts = _EntryCounts(limit)


def _full(slots: np.ndarray, file_size: int) -> bool:
    """Whether ``slots`` (a file's, up to its data's end) fill the file and the last is an entry."""
    if len(slots) * CQ_DTYPE.itemsize != file_size or not len(slots):
        return False
    return _is_entry(slots[-1])


class ConsumeQueueFile(EntryIndex):
    """One consume-queue file: an :class:`EntryIndex` of :data:`CQ_DTYPE` starting at byte ``base``."""

    DTYPE = CQ_DTYPE
    __slots__ = ("base",)   # read by the C appends on every call

    def __init__(self, file: MappedFile, base: int, entries: int) -> None:
        super().__init__(file, entries)
        self.base = base

    @property
    def first_offset(self) -> int:
        """The logical offset of the file's first slot."""
        return self.base // CQ_DTYPE.itemsize


class ConsumeQueue:
    """The consume queue of one topic and queue id, over a :class:`SegmentedLog` of files.

    :param directory: ``consumequeue/TOPIC/QUEUEID``.
    :param file_size: bytes per file (a multiple of 20).
    :param writable: open the files for writing (and create the directory on first append).
    :param size_option: the option ``file_size`` comes from, as messages name it (an extra index of
        segstore's, which no broker loads, names its layout option).
    """

    __slots__ = ("__dict__", "log")    # read by the C appends on every call

    def __init__(self, directory: str, topic: str, queue_id: int, file_size: int, *,
                 writable: bool = False, cut_dir: str | None = None,
                 size_option: str = BROKER_SIZE_OPTION) -> None:
        if file_size % CQ_DTYPE.itemsize:
            raise CorruptIndexError(f"expected a consume-queue file size that is a multiple of "
                                    f"{CQ_DTYPE.itemsize}, found {file_size}", directory)
        self.directory = directory
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.size_option = size_option
        self.writable = writable
        self.log: SegmentedLog[ConsumeQueueFile] = SegmentedLog(self._new_file)
        self._resume_base = 0       # where the first file goes when the queue has none (after truncate)
        #: ``ConsumeQueue.minLogicOffset`` in entries: the first entry not below the commitlog's start
        self.min_logical = 0
        #: a 0-byte last file a crash left (not loaded; see :meth:`drop_empty_tail`)
        self.empty_tail: str | None = None
        #: files of zeros after a file with free slots (not loaded; see :meth:`_load`)
        self.unused_tail: list[str] = []
        #: where a writer keeps the bytes it cuts off a file that is too long (None: such a file
        #: is refused, as when reading)
        self.cut_dir = cut_dir
        #: what loading for writing did to files of the wrong length (recovery lines)
        self.repairs: list[str] = []
        #: ``(path, offset)`` of the first file missing between two others (deleted or lost) and the
        #: logical offset of its first entry; None when the files follow each other
        self.missing: tuple[str, int] | None = None
        #: a writer's ``(path, offset)`` of the first file before the last with a free slot (zeros
        #: over entries, later files holding more) and the logical offset of that slot; None: none
        self.hole: tuple[str, int] | None = None
        #: the files a reader's open took as full without counting their slots (see COUNTED_FILES)
        self._taken_full: list[ConsumeQueueFile] = []
        self._load()

    def _new_file(self, base: int) -> ConsumeQueueFile:
        files.make_dirs(self.directory)
        path = os.path.join(self.directory, file_name(base))
        # a file a crash left unused (see _load) is written now: no longer one to delete
        self.unused_tail = [p for p in self.unused_tail if p != path]
        if self.empty_tail == path:
            self.empty_tail = None
        mapped = MappedFile(path, self.file_size, create=True, reserve=True, parkable=True)
        return ConsumeQueueFile(mapped, base, 0)

    def _load(self) -> None:
        names = files.list_dir(self.directory)
        loaded = []
        for i, name in enumerate(names):
            base = parse_file_name(self.directory, name)
            path = os.path.join(self.directory, name)
            found = files.not_regular(path)
            if found == "nothing" and not self.writable:
                continue    # gone since the listing (a writer beside the reader truncated the queue)
            if found is not None:   # a FIFO is never opened (it would block); the broker's load refuses it
                raise CorruptIndexError(f"expected a consume-queue file of {self.file_size} bytes "
                                        f"({self.size_option}), found {found}", path)
            if i == len(names) - 1 and files.file_size(path) == 0:
                # A kill between creating the next file and sizing it leaves it empty.  The broker's
                # MappedFileQueue.doLoad deletes it from 5.1.3 on and refuses to start before (4.9.7:
                # "length not matched"); it holds nothing: read as absent, a writer's recovery deletes it.
                self.empty_tail = path
                continue
            # parkable: a store of thousands of queues holds two descriptors for each file it maps (the
            # map's and the file's) and reads or writes few at a time (files._OpenReaders); the C
            # appends (fastappend) leave a parked one to the Python path, which opens it again
            mapped = MappedFile(path, writable=self.writable, reserve=self.writable, parkable=True)
            if mapped.size != self.file_size:
                size = mapped.size
                if not self.writable or self.cut_dir is None:
                    mapped.close()
                    broker = (": the broker refuses to load it; segstore recover resizes it"
                              if self.size_option == BROKER_SIZE_OPTION else "")
                    raise CorruptIndexError(f"expected a consume-queue file of {self.file_size} bytes "
                                            f"({self.size_option}), found {size}{broker}", path)
                self.repairs.append(self._fix_size(mapped, size, self.cut_dir))
            # the slots before the file's first hole (unwritten, zeros: no entry there), so that a
            # hole is never read through the map (a full tmpfs answers that with SIGBUS)
            slots = mapped.array(CQ_DTYPE, 0, min(self.file_size, mapped.data_end()) // CQ_DTYPE.itemsize)
            # a reader takes an earlier file whose last slot is an entry as full, as the broker does:
            # counting every slot of every file made each open O(entries of the store) (14 ms of a
            # 4M-message store's 19 ms); a writer's recovery and verify count them all
            taken_full = (not self.writable and i < len(names) - COUNTED_FILES
                          and _full(slots, self.file_size))
            counts = _counts if not self.writable else None
            count = (len(slots) if taken_full else counts.count(mapped, slots, self._counter)
                     if counts is not None else self._counter(slots))
            loaded.append(ConsumeQueueFile(mapped, base, count))
            if taken_full:
                self._taken_full.append(loaded[-1])
        # Files without an entry after one with free slots: created for a batch (reserve) that a kill
        # stopped before it wrote.  Nothing is in them; read as absent (the broker's ConsumeQueue.recover
        # stops at the free slot and truncateDirtyLogicFiles deletes them; so does a writer's recovery).
        while len(loaded) > 1 and len(loaded[-1]) == 0 and not loaded[-2].is_full:
            unused = loaded.pop()
            unused.file.close()
            self.unused_tail.append(unused.file.path)
        if not self.writable:
            self._end_at_first_hole(loaded, self._counter)
        for before, after in itertools.pairwise(loaded):
            if after.base != before.base + self.file_size:
                gone = before.base + self.file_size
                self.missing = (os.path.join(self.directory, file_name(gone)), gone // CQ_DTYPE.itemsize)
                break
        if self.writable:
            # a reader's queue ends at such a slot (_end_at_first_hole), as the broker's recovery ends
            # it there; a writer's would hold the offsets past it without their entries
            seg = next((seg for seg in loaded[:-1] if not seg.is_full), None)
            if seg is not None:
                self.hole = (seg.file.path, seg.first_offset + len(seg))
        self.log.load(loaded)

    @property
    def _counter(self) -> Callable[[np.ndarray], int]:
        """How a file's entries are counted: a reader of the broker's queues serves what the broker serves
        after its load (:func:`served_entries`); a writer's recovery (which puts a hole's entries again)
        and an extra index count the run from the first slot."""
        broker = not self.writable and self.size_option == BROKER_SIZE_OPTION
        return served_entries if broker else valid_entries

    @staticmethod
    def _end_at_first_hole(loaded: list[ConsumeQueueFile], counter: Callable[[np.ndarray], int]) -> None:
        """A reader's files: one before the last with free slots was counted before a writer beside the
        reader filled it (the files are counted one after another while the writer appends): counted
        again.  Still not full, it is a hole (damage: verify names it), and this reader's queue ends
        there, as the files after it would be read as the offsets the hole lacks.  ``O(files)``, and the
        slots of such a file."""
        for i, seg in enumerate(loaded[:-1]):
            if seg.is_full:
                continue
            seg._count = counter(seg.all_slots())
            if not seg.is_full:
                for later in loaded[i + 1:]:
                    later.file.close()
                del loaded[i + 1:]
                return

    def count_every_file(self) -> None:
        """Count slot by slot (:func:`valid_entries`) the entries of the files a reader's open took as
        full (see :data:`COUNTED_FILES`), so that every file's count is what :meth:`_load` gives a
        writer.  For a check of the files themselves (verify).  ``O(entries of those files)``; not
        thread-safe (no reader of this queue may run meanwhile)."""
        for seg in self._taken_full:
            seg._count = valid_entries(seg.entries)
        self._taken_full.clear()

    def _fix_size(self, mapped: MappedFile, size: int, cut_dir: str) -> str:
        """Give a file of the wrong length the mapped-file size (``MappedFileQueue.load`` refuses any
        other); the recovery line.  Bytes past it are kept in ``cut_dir`` first; a short file is
        extended with zeros, its missing entries rebuilt by the recovery walk."""
        if size < self.file_size:
            mapped.resize(self.file_size)
            return (f"{mapped.path}: extended from {size} to {self.file_size} bytes with zeros "
                    f"(mappedFileSizeConsumeQueue); entries it lacks are rebuilt from the commitlog")
        kept = files.save_aside(mapped.path, self.file_size, mapped.view(self.file_size, size), into=cut_dir)
        mapped.resize(self.file_size)
        return (f"{mapped.path}:{self.file_size}: cut {size - self.file_size} bytes past the consume-queue "
                f"file size {self.file_size} (mappedFileSizeConsumeQueue), saved in {kept}")

    # -- offsets -------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        """The first logical offset held (the first file's first slot)."""
        first = self.log.segments.first
        return (max(first.first_offset, self.min_logical) if first is not None
                else self._resume_base // CQ_DTYPE.itemsize)

    def correct_min_offset(self, phy_min: int) -> None:
        """``ConsumeQueue.correctMinOffset``: the first entry pointing at or past the commitlog's
        first offset ``phy_min`` starts the queue (entries before it point at deleted commitlog files).

        The broker looks in the first file only, its clean-up having deleted the files wholly below
        ``phy_min``; files a crash left before that clean-up are passed over here, so the start is
        the one the broker reaches after it.  Runtime complexity: ``O(files skipped + log(entries))``.
        """
        for seg in self.log.segments:
            offsets = seg.entries["offset"]
            # a queue's physical offsets ascend: the one binary search finds the first live entry
            found = search(offsets, phy_min, Bound.SMALLEST_UPPER)
            self.min_logical = seg.first_offset + found
            if found < len(offsets) or seg is self.log.active:
                return

    @property
    def max_offset(self) -> int:
        """One past the last logical offset held."""
        active = self.log.active
        if active is None:
            return self._resume_base // CQ_DTYPE.itemsize
        return active.first_offset + len(active)

    @property
    def max_physical_end(self) -> int:
        """The commitlog offset just after the last message this queue points at (0 if empty)."""
        last = self.last_entry
        return 0 if last is None else last[0] + last[1]

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """``(commitlog offset, size)`` of the last entry held (None if empty)."""
        active = self.log.active
        while active is not None and len(active) == 0:
            active = self.log.segments.lower(active.base)
        if active is None:
            return None
        last = active.entries[-1]
        return int(last["offset"]), int(last["size"])

    # -- reading -------------------------------------------------------------
    def entries(self, start: int, count: int | None = None) -> np.ndarray:
        """Entries from logical offset ``start`` (at most ``count``), copied into one array.

        :raises OffsetOutOfRangeError: ``start`` is below :attr:`min_offset`.
        Runtime complexity: ``O(log(files) + count)``.
        """
        parts = self.entry_parts(start, count)
        if not parts:
            return np.zeros(0, dtype=CQ_DTYPE)
        return np.concatenate(parts)

    def entry_parts(self, start: int, count: int | None = None) -> list[np.ndarray]:
        """The entries :meth:`entries` gives, uncopied: views of the files' mapped entries, one per
        file, valid while the queue stays open (for a reader that takes a few fields of each entry).

        :raises OffsetOutOfRangeError: ``start`` is below :attr:`min_offset`.
        Runtime complexity: ``O(log(files) + files read)``.
        """
        if start < self.min_offset:
            raise OffsetOutOfRangeError(f"expected an offset of at least {self.min_offset} for "
                                        f"{self.topic}/{self.queue_id}, found {start}", self.directory)
        end = self.max_offset if count is None else min(self.max_offset, start + count)
        parts = []
        for seg in self.log.segments.values(start * CQ_DTYPE.itemsize, end * CQ_DTYPE.itemsize):
            lo = max(start - seg.first_offset, 0)
            hi = min(end - seg.first_offset, len(seg))
            if hi > lo:
                parts.append(seg.entries[lo:hi])
        return parts

    def segment_files(self) -> list[ConsumeQueueFile]:
        return list(self.log.segments)

    # -- writing -------------------------------------------------------------
    def append_array(self, rows: np.ndarray) -> None:
        """Append entries (a :data:`CQ_DTYPE` array), rolling to new files as they fill.

        One copy per file touched.  Runtime complexity: ``O(len(rows))``.
        """
        done = 0
        while done < len(rows):
            active = self.log.active
            if active is None or active.is_full:
                base = self._resume_base if active is None else active.base + self.file_size
                active = self.log.roll(base)
            take = min(active.capacity - len(active), len(rows) - done)
            active.append_array(rows[done:done + take])
            self.log.mark_dirty(active)
            done += take

    def start_at(self, offset: int, phy_min: int) -> None:
        """Start an empty queue (no file) at logical ``offset``, as RocketMQ 4.9.7
        ``ConsumeQueue.putMessagePositionInfo`` starts a queue whose first message dispatched has a
        queue offset above 0 (its earlier messages in commitlog files retention deleted): the file
        holding ``offset`` is created and its slots before it are filled with blank entries
        (``fillPreBlank``: offset 0, size ``Integer.MAX_VALUE``, tags code 0); the queue's first
        offset is then corrected against the commitlog's first offset ``phy_min``
        (:meth:`correct_min_offset`), as a load does.  ``O(entries per file)``.

        :raises ValueError: the queue holds a file already.
        """
        if self.log.active is not None:
            raise ValueError(f"expected an empty queue to start at {offset}, found one holding files")
        pos = offset * CQ_DTYPE.itemsize
        self._resume_base = pos - pos % self.file_size
        blanks = np.zeros((pos - self._resume_base) // CQ_DTYPE.itemsize, dtype=CQ_DTYPE)
        blanks["size"] = PRE_BLANK_SIZE
        if len(blanks):
            self.append_array(blanks)
            self.correct_min_offset(phy_min)

    def append_packed(self, data: bytes | bytearray | memoryview) -> None:
        """Append entries given as their 20-byte :data:`CQ_DTYPE` bytes (a memoryview of bytes), as
        :meth:`append_array` does; into the active file with no array built when they fit there.
        Runtime complexity: ``O(len(data))``.
        """
        active = self.log.active
        if active is not None and active.append_packed(data):
            self.log.mark_dirty(active)
            return
        self.append_array(np.frombuffer(data, dtype=CQ_DTYPE))

    def truncate(self, offset: int) -> None:
        """Keep logical offsets below ``offset``; files left without an entry are deleted.

        A file whose first entry is cut goes whole, as the broker's
        ``ConsumeQueue.truncateDirtyLogicFiles`` deletes it (4.9.7): a file of zeros
        left behind would read to the broker as an entry at slot 0 (offset 0, size 0).
        """
        pos = offset * CQ_DTYPE.itemsize
        seg = self.log.segment_for(pos)
        if seg is None:
            return
        if pos == seg.base:
            self._resume_base = seg.base        # an emptied queue continues where it was
            removed = self.log.truncate_after(seg.base - 1)
        else:
            seg.truncate_entries(offset - seg.first_offset)
            removed = self.log.truncate_after(seg.base)
        for gone in removed:
            files.remove(gone.file.path)

    def delete_below(self, offset: int) -> list[str]:
        """Delete the files, all but the last, whose every slot is below logical offset ``offset``;
        the paths deleted.  The broker's ``ConsumeQueue.deleteExpiredFile`` (4.9.7) goes by the
        commitlog offset of each file's last unit instead: a queue kept beside another log (the extra
        ``queue`` layout) goes by the log's start.  ``O(files deleted)``."""
        end = offset * CQ_DTYPE.itemsize
        gone = self.log.delete_oldest(lambda seg: seg.base + self.file_size > end)
        for seg in gone:
            files.remove(seg.file.path)
        return [seg.file.path for seg in gone]

    def fits(self, count: int) -> bool:
        """Whether ``count`` more entries go into the active file's reserved blocks (then
        :meth:`reserve` has nothing to do).  ``O(1)``."""
        active = self.log.active
        return (active is not None and len(active) + count <= active.capacity
                and (len(active) + count) * CQ_DTYPE.itemsize <= active.file.reserved)

    def reserve(self, count: int) -> list[str]:
        """Reserve the blocks that appending ``count`` entries writes into: the active file's next
        step, and the files the append rolls into, created and reserved as far as it reaches;
        the paths created (empty: the caller deletes them if the batch is refused after all,
        since a file of zeros after a file with free slots would end the queue early for a reader).

        :raises StorageFullError: the disk is full; the files this call created are deleted again.
        """
        active = self.log.active
        end = self.max_offset * CQ_DTYPE.itemsize + count * CQ_DTYPE.itemsize
        if active is not None:
            active.file.reserve_to(min(end - active.base, self.file_size), len(active) * CQ_DTYPE.itemsize)
            if len(active) + count <= active.capacity:
                return []       # the common case: the active file has room
        created: list[str] = []
        base = self._resume_base if active is None else active.base + self.file_size
        try:
            while base < end:
                path = os.path.join(self.directory, file_name(base))
                fresh = not files.exists(path)
                files.make_dirs(self.directory)
                mapped = MappedFile(path, self.file_size, create=True, reserve=True)
                if fresh:
                    created.append(path)
                try:
                    mapped.reserve_to(min(end - base, self.file_size))
                finally:
                    mapped.close()
                base += self.file_size
        except StorageFullError:
            for path in created:
                files.remove(path)
            raise
        return created

    def drop_empty_tail(self) -> list[str]:
        """Delete trailing files without a valid first entry and a 0-byte last file (left by a crash, or
        by an older segstore's recovery); the paths deleted.  The broker would read their slot 0 as an
        entry, and refuses a 0-byte file before 5.1.3."""
        gone = []
        leftover = [*self.unused_tail, *([self.empty_tail] if self.empty_tail else [])]
        for path in sorted(leftover, reverse=True):
            files.remove(path)
            gone.append(path)
        self.unused_tail, self.empty_tail = [], None
        active = self.log.active
        while active is not None and len(active) == 0:
            self.truncate(active.first_offset)
            gone.append(active.file.path)
            active = self.log.active
        return gone

    def zero_past_entries(self) -> list[str]:
        """Zero the bytes a file holds after its last entry (data past a zero slot: not an entry, which
        a crash or damage left), each run kept in :attr:`cut_dir` first (none without one); the recovery
        lines.  The broker's recovery ends the queue at the zero slot (4.9.7 ``ConsumeQueue.recover``:
        ``offset >= 0 && size > 0``) and leaves the bytes after it, which its next appends reach: once
        the entries before them are written, the next recovery reads such bytes as entries.
        ``O(data bytes after the entries)``: a file's holes are not read."""
        lines = []
        for seg in self.log.segments:
            start = len(seg) * CQ_DTYPE.itemsize
            if seg.file.first_nonzero(start) is None:
                continue
            stop = seg.file.first_nonzero(start, last=True)
            assert stop is not None
            kept = ""
            if self.cut_dir is not None:
                data = seg.file.pread(start, stop - start)
                kept = ", saved in " + files.save_aside(seg.file.path, start, data, into=self.cut_dir)
            seg.file.write(start, bytes(stop - start))
            seg.file.flush(start, stop)
            lines.append(f"{seg.file.path}:{start}: zeroed {stop - start} bytes of data after the last entry "
                         f"(no entry: the queue ends at the zero slot before them){kept}")
        return lines

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        if self.writable:
            self.log.close()
        else:
            for seg in self.log.segments:
                seg.close()
            self.log.segments.clear()
