"""The key-hash file: RocketMQ's IndexFile (``index/``), a hash index from ``topic#key`` to positions.

The core's key index type, in the broker's byte layout: RocketMQ's native ``key``
files (entries hold commitlog offsets), and the extra ``key`` layout of any other
format (:mod:`segstore.layouts.key`, entries hold record offsets).  ``IndexFile.put``
exists once, in numpy; a plugin may lend a C ``index_put`` tested equal to it
(:func:`use_accelerator`).

Layout of one file (big-endian), as ``IndexHeader``/``IndexFile`` write it::

    0      header (40 bytes)
             beginTimestamp  i8   store time of the first entry (or the previous file's end)
             endTimestamp    i8   store time of the last entry
             beginPhyOffset  i8   commitlog offset of the first entry
             endPhyOffset    i8   commitlog offset of the last entry
             hashSlotCount   i4   slots that were empty when an entry was put into them
             indexCount      i4   next entry number (entry 0 is never used; 0 on disk loads as 1)
    40     maxHashSlotNum slots  i4  the newest entry number hashed to that slot (0: empty)
    ...    maxIndexNum entries (20 bytes each)
             keyHash         i4   abs(String.hashCode(topic + "#" + key)), Integer.MIN_VALUE -> 0
             phyOffset       i8   the message's commitlog offset
             timeDiff        i4   (storeTimestamp - beginTimestamp) / 1000, clamped to [0, 2^31-1]
             prevIndex       i4   the previous entry of the same slot (0: end of chain)

A full file holds ``maxIndexNum - 1`` entries; the next key goes to a new file
named by the local wall-clock time ``yyyyMMddHHmmssSSS``, whose header starts at
the previous file's end offset and time.  Per message the broker indexes
``UNIQ_KEY`` first, then every non-empty ``KEYS`` token; rollback messages are
not indexed, and a message below the current file's ``endPhyOffset`` is skipped
(a replay after recovery).

:class:`IndexFile` is one file over a :class:`segstore.files.MappedFile`;
:class:`IndexService` is the directory (load, put with roll, query, flush).
Hashes of a batch of keys are computed in numpy (:func:`index_key_hashes`), and
a batch of entries is put with a handful of array operations.

A query walks the slot's chain newest first, as the broker does; unlike the
broker, the caller (the store) checks each candidate's topic and key against
the commitlog, so a hash collision never returns another key's message.
"""

from __future__ import annotations

import functools
import os
import struct
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from segstore import files
from segstore.errors import ConfigError, CorruptIndexError, TruncatedDataError
from segstore.javatext import parse_long

from .javahash import string_hash, string_hashes

#: The C ``index_put`` of a format plugin that has one (:func:`use_accelerator`); None: numpy.
_speedups: ModuleType | None = None


def use_accelerator(module: ModuleType | None) -> None:
    """Put entries with ``module.index_put`` (a plugin's C accelerator, tested equal to
    :meth:`IndexFile.put`'s numpy reference); None goes back to numpy.  Call at import time."""
    global _speedups
    _speedups = module if module is not None and hasattr(module, "index_put") else None

HEADER = struct.Struct(
    ">q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
assert HEADER.size == 40
INDEX_COUNT_POS = struct.calcsize(">qqqqi")
#: the header's times and offsets: the fields before the two counts
ENDS_SIZE = struct.calcsize(">qqqq")

SLOT_DTYPE = np.dtype(">i4")
assert SLOT_DTYPE.itemsize == 4

ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev", ">i4")])
assert ENTRY_DTYPE.itemsize == 20
#: The same entry for one-at-a-time puts (fields as in ENTRY_DTYPE).
ENTRY = struct.Struct(">iqii")
assert ENTRY.size == ENTRY_DTYPE.itemsize
#: Up to this many entries a put goes entry by entry: numpy's set-up costs more than it saves.
SMALL_PUT = 16
#: Slots :meth:`IndexFile.slots_past_entries` compares at a time (its temporaries stay this small).
SLOT_CHUNK = 1 << 18
#: Entries :func:`_chain_facts_reference` chains at a time (its temporaries: about 50 bytes an entry).
CHAIN_CHUNK = 1 << 15

INVALID_INDEX = 0
FIRST_ENTRY = 1  # entry 0 is never used
MS_PER_SECOND = 1000
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
KEY_SEPARATOR = " "
TOPIC_KEY_SEPARATOR = "#"
FILE_NAME_LENGTH = len("yyyyMMddHHmmssSSS")

#: Index files up to this size may be searched for an unusual slots/entries split.
GEOMETRY_SEARCH_LIMIT = 1 << 20

DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 5_000_000 * 4

TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_ROLLBACK = 0xC


#: An int64 column: a numpy array or a ``memoryview`` cast to ``"q"``.
Int64s = np.ndarray | memoryview


def _int64s(column: Sequence[int] | Int64s) -> Int64s:
    """``column`` as a contiguous int64 buffer (a ``q`` memoryview is one already)."""
    if isinstance(column, memoryview) and column.format == "q" and column.contiguous:
        return column
    return np.ascontiguousarray(column, dtype=np.int64)


def file_size(slot_num: int, index_num: int) -> int:
    """Bytes of an index file with that many slots and entries."""
    return HEADER.size + slot_num * SLOT_DTYPE.itemsize + index_num * ENTRY_DTYPE.itemsize


def build_key(topic: str, key: str) -> str:
    """The string the broker hashes: ``topic#key``."""
    return f"{topic}{TOPIC_KEY_SEPARATOR}{key}"


def index_key_hashes(keys: Sequence[str]) -> np.ndarray:
    """The broker's index hash of each key: ``abs(String.hashCode(key))``, ``MIN_VALUE`` -> 0.

    Returns int64 hashes in ``[0, 2**31)``.  ``O(total code units)`` in numpy.
    """
    return abs_hashes(string_hashes(keys))


def abs_hashes(signed: np.ndarray) -> np.ndarray:
    """``IndexService.buildKey``'s hash rule over signed ``String.hashCode`` values: ``abs``, MIN -> 0."""
    hashes = np.abs(signed)
    hashes[signed == INT32_MIN] = 0
    return hashes


def index_key_hash(key: str) -> int:
    """The broker's index hash of one ``topic#key`` string (a query's: no numpy set-up for one key)."""
    signed = string_hash(key)
    return 0 if signed == INT32_MIN else abs(signed)


def file_name_for(ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, as the broker names a new index file."""
    seconds, millis = divmod(ms, MS_PER_SECOND)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{millis:03d}"


def geometry_on_disk(directory: str) -> dict[str, int]:
    """``maxHashSlotNum`` and ``maxIndexNum`` an existing ``index/`` directory was written with.

    A file's size is ``40 + 4 * slots + 20 * entries``; of the splits that fit,
    the one whose first and last used entries hold the header's begin and end
    offsets and whose slots head chains of their own hashes is taken (the broker's
    1:4 ratio when several fit or nothing is indexed, and in a file over
    :data:`GEOMETRY_SEARCH_LIMIT`, whose slots are not read).  A full file
    (``indexCount`` = ``maxIndexNum``: the broker rolled past it) decides, as its
    count says how many entries the broker put in it; else the last file.  ``{}``
    when there is no index file or no split fits.
    ``O(files)`` headers read, until the first full one.
    """
    names = [n for n in files.list_dir(directory) if is_file_name(n)]
    last: dict[str, int] = {}
    for i, name in enumerate(names):
        path = os.path.join(directory, name)
        if files.not_regular(path) is not None:
            continue
        # Mapped, not read: only the header and the two probed entries are paged in
        # (a default-sized index file is ~420 MB).
        mapped = files.MappedFile(path)
        try:
            found = geometry_of(mapped.view())
            count = IndexHeader.unpack(mapped.view(0, HEADER.size)).index_count \
                if mapped.size >= HEADER.size else 0
        finally:
            mapped.close()
        if found and count == found["maxIndexNum"]:
            return found        # a full file: a file cut short would hold fewer entries than its count
        if i == len(names) - 1:
            last = found
    return last


def geometry_of(data: memoryview) -> dict[str, int]:
    if len(data) < HEADER.size:
        return {}
    header = IndexHeader.unpack(data)
    room = len(data) - HEADER.size
    ratio = DEFAULT_MAX_INDEX_NUM // DEFAULT_MAX_HASH_SLOT_NUM
    per_slot = SLOT_DTYPE.itemsize + ratio * ENTRY_DTYPE.itemsize
    # the broker's ratio first; other splits are only searched in small files
    tried = [room // per_slot] if room % per_slot == 0 else []
    if room <= GEOMETRY_SEARCH_LIMIT:
        tried += range(1, room // SLOT_DTYPE.itemsize + 1)
    fits = []
    for slots in tried:
        rest = room - slots * SLOT_DTYPE.itemsize
        if rest % ENTRY_DTYPE.itemsize:
            continue
        entries = rest // ENTRY_DTYPE.itemsize
        if entries < header.index_count or slots == 0:
            continue
        table = np.frombuffer(
            data,
            dtype=ENTRY_DTYPE,
            count=header.index_count,
            offset=HEADER.size + slots * SLOT_DTYPE.itemsize,
        )
        last = header.index_count - 1
        if last < FIRST_ENTRY or (
            int(table["phy_offset"][FIRST_ENTRY]) == header.begin_phy_offset
            and int(table["phy_offset"][last]) == header.end_phy_offset
        ):
            fits.append((slots, entries))
        if fits and fits[0][1] == ratio * fits[0][0] and room > GEOMETRY_SEARCH_LIMIT:
            break       # a large file: the broker's ratio (its slots are not read to check them)
    if not fits:
        return {}
    slots, entries = fits[0]
    if len(fits) > 1 and room <= GEOMETRY_SEARCH_LIMIT:
        # several splits may match the two probed entries (a message's keys share its offset, and an
        # unused entry 0 reads as offset 0): the one whose slots head chains of their own hashes is the
        # file's.  Never a large file's: reading a default file's 5M slots cost every open 74 ms and
        # 56 MB (its one split, the broker's ratio, needs no check)
        slots, entries = next((fit for fit in fits if _chains_fit(data, header, fit[0])), fits[0])
    return {"maxHashSlotNum": slots, "maxIndexNum": entries}


def _chains_fit(data: memoryview, header: IndexHeader, slots: int) -> bool:
    """Whether ``data`` read with ``slots`` hash slots is an index file as 4.9.7 ``IndexFile.putKey`` writes
    one: entry 0 never written (``indexCount`` starts at 1) and every used slot naming an entry below
    ``indexCount`` whose key hash falls in that slot (``keyHash % hashSlotNum``).  ``O(slots)``."""
    entries_at = HEADER.size + slots * SLOT_DTYPE.itemsize
    if any(data[entries_at:entries_at + ENTRY_DTYPE.itemsize]):
        return False
    heads = np.frombuffer(data, dtype=SLOT_DTYPE, count=slots, offset=HEADER.size).astype(np.int64)
    used = np.flatnonzero(heads > INVALID_INDEX)
    if (heads[used] >= header.index_count).any():
        return False
    table = np.frombuffer(data, dtype=ENTRY_DTYPE, count=header.index_count, offset=entries_at)
    return bool((table["hash"][heads[used]].astype(np.int64) % slots == used).all())


@dataclass(slots=True)
class IndexHeader:
    """The 40-byte header, as loaded (``index_count`` 0 loads as 1, as the broker does)."""

    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = FIRST_ENTRY

    @classmethod
    def unpack(cls, data: bytes | memoryview) -> IndexHeader:
        fields = HEADER.unpack_from(data, 0)
        header = cls(*fields)
        if header.index_count <= 0:
            header.index_count = FIRST_ENTRY
        return header

    def pack(self) -> bytes:
        return HEADER.pack(
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )


class IndexFile:
    """One index file: header, slots and entries over a mapped file.

    Thread-safety: lookups may run while one thread puts (an entry is written
    before the slot and the count that publish it); ``truncate``/``close`` need
    exclusive access.
    """

    # read by the C appends on every call; the dict holds the cached views
    __slots__ = ("__dict__", "file", "head", "header", "index_num", "slot_num")

    def __init__(self, file: files.MappedFile, slot_num: int, index_num: int) -> None:
        expected = file_size(slot_num, index_num)
        if file.size != expected:
            raise CorruptIndexError(
                f"expected an index file of {expected} bytes ({slot_num} slots, {index_num} entries), "
                f"found {file.size} bytes",
                file.path,
                min(file.size, expected),
            )
        self.file = file
        self.slot_num = slot_num
        self.index_num = index_num
        self.header = IndexHeader.unpack(file.view(0, HEADER.size))
        # a damaged count cannot promise more entries than the file holds (verify reports it)
        self.header.index_count = min(self.header.index_count, index_num)
        self.head = file.array(np.uint8, 0, HEADER.size)

    # The slot and entry tables are viewed on first use: opening a store then touches
    # only the headers (a remote index file, 420 MB at the broker's defaults, is not
    # fetched until a key query needs it).
    @functools.cached_property
    def slots(self) -> np.ndarray:
        return self.file.array(SLOT_DTYPE, HEADER.size, self.slot_num)

    @functools.cached_property
    def entries_all(self) -> np.ndarray:
        return self.file.array(ENTRY_DTYPE, HEADER.size + self.slot_num * SLOT_DTYPE.itemsize, self.index_num)

    # -- lifecycle ------------------------------------------------------------
    @classmethod
    def create(
        cls, path: str, slot_num: int, index_num: int, end_phy_offset: int = 0, end_timestamp: int = 0
    ) -> IndexFile:
        """A new, empty file starting where the previous one ended (0: the first file).

        As the broker does, the begin/end fields are written at once and the
        counts with the first key put (an unused file's indexCount stays 0 on disk).
        """
        mapped = files.MappedFile(path, file_size(slot_num, index_num), create=True, writable=True,
                                  reserve=True)
        try:
            # the whole slot table (puts write slots anywhere in it, through the map) and a step of
            # entries: a full disk is a StorageFullError here, not a SIGBUS in a put
            mapped.reserve_to(HEADER.size + slot_num * SLOT_DTYPE.itemsize + ENTRY_DTYPE.itemsize)
        except BaseException:
            mapped.close()
            files.remove(path)
            raise
        index = cls(mapped, slot_num, index_num)
        header = index.header
        if end_phy_offset > 0:
            header.begin_phy_offset = header.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            header.begin_timestamp = header.end_timestamp = end_timestamp
        mapped.write(
            0,
            HEADER.pack(
                header.begin_timestamp,
                header.end_timestamp,
                header.begin_phy_offset,
                header.end_phy_offset,
                0,
                0,
            ),
        )
        return index

    @classmethod
    def open(cls, path: str, slot_num: int, index_num: int, *, writable: bool = False,
             zero_tail: bool = False, past_end: bool = False) -> IndexFile:
        """The file at ``path``.  ``zero_tail`` (read-only): a file shorter than its size reads as the
        broker's ``IndexFile`` maps one (``MappedFile`` maps ``fileTotalSize`` bytes): its bytes, then
        zeros (:attr:`files.MappedFile.short`).  ``past_end``: a file longer than its size is its
        first ``fileTotalSize`` bytes, as that mapping reads it (the bytes past them are neither read
        nor changed).

        :raises CorruptIndexError: the file is not ``slot_num`` slots and ``index_num`` entries long
            (nor shorter, with ``zero_tail``; nor longer, with ``past_end``).
        """
        expected = file_size(slot_num, index_num)
        size = expected if (zero_tail and not writable) or (past_end and files.file_size(path) > expected) \
            else None
        return cls(files.MappedFile(path, size, writable=writable, reserve=writable, zero_tail=zero_tail),
                   slot_num, index_num)

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def name(self) -> str:
        return os.path.basename(self.file.path)

    @property
    def count(self) -> int:
        """Entries held (entry 0 is unused, so this is ``indexCount - 1``)."""
        return self.header.index_count - FIRST_ENTRY

    @property
    def is_full(self) -> bool:
        return self.header.index_count >= self.index_num

    @property
    def entries(self) -> np.ndarray:
        """The used entries ``1 .. indexCount-1`` (zero-copy view)."""
        return self.entries_all[FIRST_ENTRY : self.header.index_count]

    def entry_pos(self, number: int) -> int:
        """Byte position of entry ``number`` in the file."""
        return HEADER.size + self.slot_num * SLOT_DTYPE.itemsize + number * ENTRY_DTYPE.itemsize

    def slot_pos(self, slot: int) -> int:
        return HEADER.size + slot * SLOT_DTYPE.itemsize

    def write_header(self) -> None:
        self.file.write(0, self.header.pack())

    def write_ends(self) -> None:
        """Write the header's times and offsets only: its counts stay as they are on disk (an unused
        file's ``indexCount`` 0, as the broker leaves it)."""
        self.file.write(0, self.header.pack()[:ENDS_SIZE])

    def flush(self) -> None:
        """Make the whole file durable (the broker forces the whole map).  The header is written as
        the broker's ``IndexFile.flush`` writes it (``updateByteBuffer``) once an entry was put; a file
        without one keeps what its creation wrote, ``indexCount`` 0 (the in-memory 1 reaches the file
        with the first put, ``IndexHeader.incIndexCount``; 4.9.7 flushes only a full file)."""
        if self.header.index_count > FIRST_ENTRY:
            self.write_header()
        self.file.flush()

    def close(self) -> None:
        del self.head
        self.__dict__.pop("slots", None)
        self.__dict__.pop("entries_all", None)
        self.file.close()

    # -- put --------------------------------------------------------------------
    def put(self, hashes: Sequence[int] | Int64s, phy_offsets: Sequence[int] | Int64s,
            store_timestamps: Sequence[int] | Int64s) -> int:
        """Put as many of these entries as fit, in order; returns how many were put.

        Same bytes as the broker's ``putKey`` called once per entry: each entry
        chains to the slot's previous newest entry (possibly one put earlier in
        this batch), the slot then points at it, the header follows.
        Runtime complexity: ``O(k log k)`` numpy work for ``k`` entries.
        """
        room = self.index_num - self.header.index_count
        k = min(room, len(hashes))
        if k <= 0:
            return 0
        # the entries' blocks (and, in a file opened as it was left, the slot table's) before they
        # are written through the map; a full disk: StorageFullError, nothing put
        self.file.reserve_to(self.entry_pos(self.header.index_count + k))
        if _speedups is not None:    # puts as many as fit (k), the columns passed whole: no slices
            return self._put_c(_speedups, hashes, phy_offsets, store_timestamps)
        hashes = np.asarray(hashes[:k], dtype=np.int64)
        phys = np.asarray(phy_offsets[:k], dtype=np.int64)
        stamps = np.asarray(store_timestamps[:k], dtype=np.int64)
        header = self.header
        first_number = header.index_count
        numbers = np.arange(first_number, first_number + k, dtype=np.int64)
        slot_of = hashes % self.slot_num

        # time diffs: the first entry of a file sees the begin time before it is reset to its own
        begins = np.full(k, header.begin_timestamp, dtype=np.int64)
        if first_number <= FIRST_ENTRY:
            begins[1:] = stamps[0]
        diffs = np.clip((stamps - begins) // MS_PER_SECOND, 0, INT32_MAX)
        diffs[begins <= 0] = 0

        # chain: previous entry with the same slot in this batch, else the slot's current value
        order = np.argsort(slot_of, kind="stable")
        sorted_slots = slot_of[order]
        group_start = np.ones(k, dtype=bool)
        group_start[1:] = sorted_slots[1:] != sorted_slots[:-1]
        prev_sorted = np.empty(k, dtype=np.int64)
        prev_sorted[1:] = numbers[order][:-1]
        current = self.slots[sorted_slots[group_start]].astype(np.int64)
        stale = (current <= INVALID_INDEX) | (current > header.index_count)
        current[stale] = INVALID_INDEX
        prev_sorted[group_start] = current
        prev = np.empty(k, dtype=np.int64)
        prev[order] = prev_sorted

        rows = np.empty(k, dtype=ENTRY_DTYPE)
        rows["hash"] = hashes
        rows["phy_offset"] = phys
        rows["time_diff"] = diffs
        rows["prev"] = prev
        self.file.write(self.entry_pos(first_number), rows.tobytes())
        group_end = np.ones(k, dtype=bool)
        group_end[:-1] = group_start[1:]
        self.slots[sorted_slots[group_end]] = numbers[order][group_end]

        if first_number <= FIRST_ENTRY:
            header.begin_phy_offset = int(phys[0])
            header.begin_timestamp = int(stamps[0])
        header.hash_slot_count += int(np.count_nonzero(stale))
        header.index_count += k
        header.end_phy_offset = int(phys[-1])
        header.end_timestamp = int(stamps[-1])
        self.write_header()
        return k

    def _put_c(self, c: ModuleType, hashes: Sequence[int] | Int64s, phy_offsets: Sequence[int] | Int64s,
               store_timestamps: Sequence[int] | Int64s) -> int:
        """:meth:`put` in C (``_speedups.index_put``): the entries one at a time as :meth:`_put_each`, then
        the header, written into the map as :meth:`write_header` does."""
        header = self.header
        # the columns of a RocketMQ append ("q" memoryviews of the C encoder's output) pass as they are
        if not (type(hashes) is memoryview and hashes.format == "q" and type(phy_offsets) is memoryview
                and phy_offsets.format == "q" and type(store_timestamps) is memoryview
                and store_timestamps.format == "q"):
            hashes, phy_offsets, store_timestamps = (
                _int64s(hashes), _int64s(phy_offsets), _int64s(store_timestamps))
        fields, put = c.index_put(
            self.head, self.slots, self.entries_all, self.slot_num,
            (header.begin_timestamp, header.end_timestamp, header.begin_phy_offset, header.end_phy_offset,
             header.hash_slot_count, header.index_count),
            hashes, phy_offsets, store_timestamps)
        (header.begin_timestamp, header.end_timestamp, header.begin_phy_offset, header.end_phy_offset,
         header.hash_slot_count, header.index_count) = fields
        return put

    # -- query ------------------------------------------------------------------
    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether ``[begin, end]`` overlaps this file's time range (the broker's test)."""
        b, e = self.header.begin_timestamp, self.header.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def candidates(self, key_hash: int, begin: int, end: int) -> Generator[int, None, bool]:
        """The ``phy_offset`` of this hash's entries stored in ``[begin, end]``, newest first; returns
        whether the walk came back to an entry it read (a cycle: see below).

        Walks the slot's chain as the broker's ``selectPhyOffset`` (RocketMQ 4.9.7 and 5.3.3) does: a
        link is followed wherever it points from 1 to ``indexCount``, to a later entry too (damage: a
        put only ever links back); a slot or link naming the entry at ``indexCount`` is read (a put
        writes its entry and slot before the count, and the broker's queries find a key whose put a
        crash cut before the count); an entry past the file's last (a count past ``maxIndexNum``) ends
        the walk, as the broker's read past its map throws there.  A walk that comes back to an entry
        it read ends there: the broker reads the cycle again and again, adding the same offsets until
        it holds ``maxNum`` and ends the whole query (a cycle holding none of the key's loops forever),
        so the entries read once are every one it finds.  Runtime complexity: ``O(chain length)``.
        """
        count = self.header.index_count
        number = int(self.slots[key_hash % self.slot_num])
        if number <= INVALID_INDEX or number > count or count <= FIRST_ENTRY:
            return False
        begin_ts = self.header.begin_timestamp
        read: set[int] = set()
        while number < self.index_num:
            entry = self.entries_all[number]
            diff = int(entry["time_diff"])
            if diff < 0:
                return False
            when = begin_ts + diff * MS_PER_SECOND
            if int(entry["hash"]) == key_hash and begin <= when <= end:
                yield int(entry["phy_offset"])
            prev = int(entry["prev"])
            if prev <= INVALID_INDEX or prev > count or prev == number or when < begin:
                return False
            read.add(number)
            if prev in read:
                return True
            number = prev
        return False

    # -- checks -----------------------------------------------------------------------
    def slots_past_entries(self) -> np.ndarray:
        """The slots that point past the file's entries (ascending).  ``O(slots)``, a chunk at a time
        (a bool per slot of the broker's 5M was 5 MB of pages zeroed for each verify)."""
        count, found = self.header.index_count, []
        for lo in range(0, len(self.slots), SLOT_CHUNK):
            found.append(lo + np.flatnonzero(self.slots[lo:lo + SLOT_CHUNK] >= count))
        return np.concatenate(found) if found else np.zeros(0, np.int64)

    def first_wrong_link(self) -> int | None:
        """The number of the first entry whose link is not the one the broker's ``IndexFile.putKey``
        leaves (the newest entry before it in its slot, 0 for the first: :meth:`chain_faults`), or None.
        A query walks a slot's chain only, so a wrong link (a torn page zeroed it) hides every older
        entry of that slot.  ``O(entries + slots)`` (:func:`chain_facts`)."""
        _, links, i, *_ = chain_facts(self.entries, self.slots, self.header.index_count)
        return FIRST_ENTRY + i if links else None

    def chain_faults(self) -> list[tuple[int, str]]:
        """``(byte position, message)`` of what makes the slots and chains differ from what the
        broker's ``IndexFile.putKey`` leaves: each entry (a hash >= 0: ``abs(String.hashCode)``) links
        to the newest entry before it whose hash falls in the same slot (``hash % hashSlotNum``; 0 for
        the first), and each slot points at its newest entry (0: none).  A query walks a slot's chain
        only: a slot or a link that points elsewhere hides keys from every lookup.  The first wrong
        hash, link and slot, with a count; slots pointing past the entries are
        :meth:`slots_past_entries`'.  ``O(entries + slots)`` (:func:`chain_facts`).  Thread-safe (reads)."""
        entries = self.entries
        negative, links, i, expected_link, slots, s, expected_slot = chain_facts(
            entries, self.slots, self.header.index_count)
        faults = []
        if negative >= 0:
            n = FIRST_ENTRY + negative
            found = int(entries["hash"][negative])
            faults.append((self.entry_pos(n), f"expected index entry {n} to hold a key hash >= 0 "
                                              f"(abs of String.hashCode), found {found}"))
        if links:
            n = FIRST_ENTRY + i
            more = f" ({links - 1} more)" if links > 1 else ""
            held, slot = int(entries["prev"][i]), int(entries["hash"][i]) % self.slot_num
            faults.append((self.entry_pos(n), f"expected index entry {n} to link to entry {expected_link} "
                                              f"(the one before it in slot {slot}), found {held}{more}"))
        if slots:
            more = f" ({slots - 1} more)" if slots > 1 else ""
            faults.append((self.slot_pos(s), f"expected slot {s} to point at entry {expected_slot} (the "
                                             f"newest hashed to it), found {int(self.slots[s])}{more}"))
        return faults

    # -- recovery -------------------------------------------------------------------
    def _owners(self, numbers: np.ndarray | slice) -> np.ndarray:
        """The slot each of entries ``numbers`` (an index array or a slice) belongs to: its hash modulo
        the slot count."""
        return self.entries_all["hash"][numbers].astype(np.int64) % self.slot_num

    def _newest_kept(self, slots: np.ndarray, count: int) -> np.ndarray:
        """For each of ``slots``, the newest of entries ``[FIRST_ENTRY, count)`` that belongs to it
        (:meth:`_owners`), else :data:`INVALID_INDEX`.  ``O(count)``: read for damage only."""
        owner = self._owners(slice(FIRST_ENTRY, count))
        numbers = np.flatnonzero(np.isin(owner, slots))
        found, last_seen = np.unique(owner[numbers][::-1], return_index=True)
        newest = numbers[::-1][last_seen] + FIRST_ENTRY
        out = np.full(len(slots), INVALID_INDEX, np.int64)
        if len(found):
            at = np.minimum(np.searchsorted(found, slots), len(found) - 1)
            hit = found[at] == slots
            out[hit] = newest[at[hit]]
        return out

    def repair_slots(self) -> list[int]:
        """Point every slot at the newest of the file's entries hashed to it (0: none), and count the
        slots holding one in ``hashSlotCount``, as the broker's ``IndexFile.putKey`` leaves them: a
        query walks only its slot's chain, so a damaged slot hides every key of that chain.  The
        slots rewritten (ascending).  ``O(entries + slots)``: a check of the links first (about 45 ms
        for 2M entries and 5M slots), the hashes of every entry only where it fails (ten times that)."""
        count = self.header.index_count
        if self._slots_hold_the_heads(count):
            return []
        expected = np.zeros(self.slot_num, np.int64)
        if count > FIRST_ENTRY:
            np.maximum.at(expected, self._owners(slice(FIRST_ENTRY, count)),
                          np.arange(FIRST_ENTRY, count, dtype=np.int64))
        stored = self.slots
        wrong = np.flatnonzero(stored.astype(np.int64) != expected)
        if len(wrong):
            stored[wrong] = expected[wrong]
            # hashSlotCount counts the slots a put found empty: the slots holding an entry
            self.header.hash_slot_count = int(np.count_nonzero(expected))
            self.write_header()
        return wrong.tolist()

    def _slots_hold_the_heads(self, count: int) -> bool:
        """Whether the non-zero slots hold exactly the chains' heads, each once: the entries no later
        entry links to (``putKey`` links a new entry to its slot's head, in that slot's chain only).
        What a sound file shows; a zeroed or overwritten slot fails it (one holding another slot's
        head would pass, which ``verify`` still finds).  ``O(entries + slots)`` without hashing."""
        if count <= FIRST_ENTRY:
            return not self.slots.any()
        prev = self.entries_all["prev"][FIRST_ENTRY:count]
        linked = np.zeros(count, bool)
        linked[prev[(prev > INVALID_INDEX) & (prev < count)]] = True
        heads = ~linked[FIRST_ENTRY:]
        stored = self.slots
        pointed_at = stored[stored != INVALID_INDEX]
        if (len(pointed_at) != np.count_nonzero(heads) or pointed_at.min() < FIRST_ENTRY
                or pointed_at.max() >= count):
            return False
        pointed = np.zeros(count, bool)
        pointed[pointed_at] = True
        return bool(np.array_equal(pointed[FIRST_ENTRY:], heads))

    def truncate(self, keep: int, end_timestamp: int, start_phy_offset: int = 0,
                 start_timestamp: int = 0) -> None:
        """Keep the first ``keep`` entries; slots pointing past them fall back along their chains.

        ``end_timestamp`` is the store time of the message of the last kept entry
        (the header's end time; the entry itself only holds whole seconds).
        ``keep == 0`` leaves the header as :meth:`create` wrote it, starting at
        ``start_phy_offset``/``start_timestamp`` (the previous file's end, 0 for
        the first file): the first put measures its time diff from that begin
        time, so only then does a re-put write the broker's bytes again.
        Runtime complexity: one vectorized pass over the slot table to find the slots that
        point past the kept entries (4 bytes a slot, a twentieth of the file at the broker's
        defaults), then ``O(those slots * chain depth + entries dropped)``: the links read and
        the slots written are only those; the entry table is read whole (``O(keep)``) only where
        damage broke such a slot's chain, to find the slot's newest kept entry.
        """
        new_count = FIRST_ENTRY + keep
        old_count = max(self.header.index_count, new_count)
        stored = self.slots
        # Unsigned, a negative slot (damage) reads as >= 2**31: past the kept entries too.
        unsigned = stored.view(">u4")
        touched = np.flatnonzero(unsigned >= new_count)
        nonzero = int(np.count_nonzero(unsigned))
        if len(touched):
            slots = unsigned[touched].astype(np.int64)
            # A slot past the header's count is a put cut short: a batch writes its entries and slots
            # before the header, so its chain runs back through entries written but not counted, each
            # an entry of that slot.  A slot outside the file's entries, a link that does not go back
            # or an entry of another slot on the way is damage: that slot is found again among the
            # kept entries instead.
            damaged = slots >= self.index_num
            slots[damaged] = INVALID_INDEX
            prevs = self.entries_all["prev"]
            moving = np.flatnonzero(slots >= new_count)
            while len(moving):
                current = slots[moving]
                older = prevs[current].astype(np.int64)
                broken_link = (older >= current) | (older < INVALID_INDEX)    # a link must go back
                bad = broken_link | (self._owners(current) != touched[moving])
                damaged[moving[bad]] = True
                slots[moving] = np.where(bad, INVALID_INDEX, older)
                moving = moving[slots[moving] >= new_count]
            landed = np.flatnonzero(slots > INVALID_INDEX)
            stray = self._owners(slots[landed]) != touched[landed]
            damaged[landed[stray]] = True
            if damaged.any():
                slots[damaged] = self._newest_kept(touched[damaged], new_count)
            stored[touched] = slots
            nonzero -= int(np.count_nonzero(slots == INVALID_INDEX))
        self.file.write(self.entry_pos(new_count), bytes((old_count - new_count) * ENTRY_DTYPE.itemsize))
        header = self.header
        header.index_count = new_count
        header.hash_slot_count = nonzero
        if keep > 0:
            header.end_phy_offset = int(self.entries_all[new_count - 1]["phy_offset"])
            header.end_timestamp = end_timestamp
        else:
            header.begin_phy_offset = header.end_phy_offset = start_phy_offset
            header.begin_timestamp = header.end_timestamp = start_timestamp
        self.write_header()


def chain_facts(entries: np.ndarray, slots: np.ndarray, index_count: int) -> tuple[int, ...]:
    """What :meth:`IndexFile.chain_faults` reports of ``entries`` (entry 1 on, :data:`ENTRY_DTYPE`)
    over ``slots``: (the first entry with a negative hash, the count of wrong links, the first of them
    and the link it should hold, the count of wrong slots among those below ``index_count``, the
    first of them and the entry it should point at), -1 where none.  ``O(e + s)`` in C (the
    accelerator's ``index_chains``, :func:`use_accelerator`, without the GIL: a sound file with one
    bit per entry of scratch, any other with one int32 per slot); :func:`_chain_facts_reference`
    otherwise, ``O(e log e + s)``.  Thread-safe (reads)."""
    index_chains = getattr(_speedups, "index_chains", None)
    if index_chains is not None and len(slots):
        return tuple(index_chains(entries, slots, index_count))
    return _chain_facts_reference(entries, slots, index_count)


def _chain_facts_reference(entries: np.ndarray, slots: np.ndarray, index_count: int) -> tuple[int, ...]:
    """:func:`chain_facts` in numpy, as the C pass runs: entries in order, :data:`CHAIN_CHUNK` at a time,
    each chained to the newest entry before it in its slot (within a chunk by a stable sort on the slot,
    across chunks by the newest entry number of each slot so far, one int32 per slot), then each slot
    compared with its newest entry.  ``O(e log CHAIN_CHUNK + s)`` time, ``O(s + CHAIN_CHUNK)`` memory
    (the whole table sorted at once took 1.3 GB for the broker's 20M entries)."""
    slot_num = len(slots)
    newest = np.zeros(slot_num, np.int32)
    negative, links, link, expected_link = -1, 0, -1, -1
    for lo in range(0, len(entries), CHAIN_CHUNK):
        chunk = entries[lo:lo + CHAIN_CHUNK]
        hashes = chunk["hash"].astype(np.int64)
        if negative < 0 and (below := np.flatnonzero(hashes < 0)).size:
            negative = lo + int(below[0])
        slot_of = hashes % slot_num
        order = np.argsort(slot_of, kind="stable")
        in_slot = slot_of[order]
        numbers = order + (FIRST_ENTRY + lo)            # each sorted entry's number
        first = np.ones(len(order), bool)
        first[1:] = in_slot[1:] != in_slot[:-1]
        chained = np.empty(len(order), np.int64)
        chained[1:] = numbers[:-1]
        chained[first] = newest[in_slot[first]]
        expected_prev = np.empty(len(order), np.int64)
        expected_prev[order] = chained
        wrong = np.flatnonzero(chunk["prev"] != expected_prev)
        if len(wrong) and not links:
            link, expected_link = lo + int(wrong[0]), int(expected_prev[wrong[0]])
        links += len(wrong)
        last = np.ones(len(order), bool)
        last[:-1] = first[1:]
        newest[in_slot[last]] = numbers[last]
    wrong_slots, slot, expected_slot = 0, -1, -1
    for lo in range(0, slot_num, SLOT_CHUNK):
        held, expected = slots[lo:lo + SLOT_CHUNK], newest[lo:lo + SLOT_CHUNK]
        wrong = np.flatnonzero((held != expected) & (held < index_count))
        if len(wrong) and not wrong_slots:
            slot, expected_slot = lo + int(wrong[0]), int(expected[wrong[0]])
        wrong_slots += len(wrong)
    return negative, links, link, expected_link, wrong_slots, slot, expected_slot


@dataclass(slots=True)
class IndexRequest:
    """What the index needs of one message."""

    topic: str
    phy_offset: int
    store_timestamp: int
    uniq_key: str | None
    keys: str | None  # the KEYS property (space-separated)
    sys_flag: int = 0


def index_keys(request: IndexRequest) -> list[str]:
    """The ``topic#key`` strings the broker indexes for a message, in its order."""
    if request.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK:
        return []
    out = []
    if request.uniq_key is not None:
        out.append(build_key(request.topic, request.uniq_key))
    if request.keys:
        out.extend(build_key(request.topic, k) for k in request.keys.split(KEY_SEPARATOR) if k)
    return out


def is_file_name(name: str) -> bool:
    """Whether ``name`` is one segstore gives an index file, as the broker does (``yyyyMMddHHmmssSSS``:
    17 ASCII digits; the broker opens any name ``Long.parseLong`` reads, :meth:`IndexService.load`)."""
    return len(name) == FILE_NAME_LENGTH and name.isascii() and name.isdigit()


def end_timestamps(directory: str) -> list[int]:
    """The header ``endTimestamp`` of every file in ``directory``, an ``index/`` no :class:`IndexService`
    loaded (``messageIndexEnable`` off): 4.9.7 ``IndexService.load`` opens every file there as an IndexFile
    whatever the config, and reads its header from the start (a file shorter than the header reads
    zeros past its end: the broker maps it at the configured size); it skips a name ``Long.parseLong``
    refuses (``MappedFile.init`` throws ``NumberFormatException``, logged) and stops at an entry it cannot
    map (a directory: ``IOException``, ``load`` returns false).  Only the 40 header bytes are read;
    ``[]`` without the directory."""
    if not files.is_dir(directory):
        return []
    ends = []
    for name in files.list_dir(directory):
        path = os.path.join(directory, name)
        if parse_long(name) is None:
            continue
        if not files.is_file(path):
            break
        mapped = files.MappedFile(path)
        try:
            head = mapped.pread(0, HEADER.size)
        finally:
            mapped.close()
        ends.append(IndexHeader.unpack(head.ljust(HEADER.size, b"\0")).end_timestamp)
    return ends


class IndexService:
    """The ``index/`` directory: files in name (creation) order, the last one active.

    :param clock: milliseconds since the epoch, used to name new files.
    :param zero_fill_short: a reader queries a file shorter than its size zero-filled (:meth:`load`).
    :param past_end: a file longer than its size is read and written as its first bytes (:meth:`load`).
    Thread-safety: one writer; queries may run concurrently with it.
    """

    __slots__ = ("__dict__", "files")      # read by the C appends on every call

    def __init__(
        self,
        directory: str,
        slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM,
        index_num: int = DEFAULT_MAX_INDEX_NUM,
        *,
        writable: bool = False,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        on_file_full: Callable[[int], None] | None = None,
        zero_fill_short: bool = False,
        past_end: bool = False,
        numbered_strays: bool = False,
    ) -> None:
        self.directory = directory
        self.past_end = past_end
        #: a reader's :meth:`load` opens the files named by another number too, for queries (:meth:`load`)
        self.numbered_strays = numbered_strays and not writable
        #: a reader's :meth:`load` queries a short file zero-filled (given where its geometry is known)
        self.zero_fill_short = zero_fill_short and not writable
        self.slot_num = slot_num
        self.index_num = index_num
        self.writable = writable
        self.clock = clock
        self.on_file_full = on_file_full
        self.files: list[IndexFile] = []
        #: ``(path, error message)`` of each file :meth:`load` could not open (wrong size): left out of
        #: queries, reported by verify, set aside and rebuilt by recovery (:meth:`set_aside_refused`)
        self.refused: list[tuple[str, str]] = []
        #: ``(path, its size)`` of each file :meth:`load` opened as its first bytes (``past_end``): the
        #: bytes past them are never read (reported by verify, kept aside and cut by :meth:`cut_past_end`)
        self.longer: list[tuple[str, int]] = []
        #: paths in the directory not named as index files (17 digits): the broker's
        #: ``IndexService.load`` opens those named by a number as one and skips the others (reported by
        #: verify, set aside by recovery: :meth:`set_aside_strays`)
        self.strays: list[str] = []
        #: the strays a reader opened as index files (``numbered_strays``): queried with :attr:`files`
        self.stray_files: list[IndexFile] = []
        #: the name at which :meth:`load` stopped as the broker's does (a directory named by a number):
        #: the files after it are not queried; None: it went through the directory
        self.stopped_at: str | None = None

    def load(self) -> list[str]:
        """Open every index file; returns the names of files that could not be opened (wrong size).

        With ``zero_fill_short``, a reader still queries a file shorter than its size as the broker does
        (its ``MappedFile`` maps the whole size, zeros past the file's end: keys whose slot and chain lie
        in the bytes held are found), read into memory with nothing written (:meth:`IndexFile.open`
        ``zero_tail``); it is refused all the same (verify reports it, recovery rebuilds it).
        With ``past_end``, a file longer than its size is opened as its first bytes, as that mapping
        reads and writes it (:attr:`longer`).

        Files not named by 17 digits are :attr:`strays`.  With ``numbered_strays``, a reader opens those
        the broker opens too (4.9.7 and 5.3.3 ``IndexService.load``: every file whose name
        ``Long.parseLong`` reads, ``123`` or ``-5`` as well, in ``Arrays.sort`` order of their paths, a
        directory among them stopping the load) into :attr:`stray_files`, which :meth:`query` reads in
        that order with :attr:`files`, as ``queryOffset`` reads its ``indexFileList``.
        """
        bad = []
        size = file_size(self.slot_num, self.index_num)
        stopped_at: str | None = None
        self.stopped_at = None
        for name in files.list_dir(self.directory):
            path = os.path.join(self.directory, name)
            named = is_file_name(name)
            if not named:
                self.strays.append(path)
                if not self.numbered_strays or parse_long(name) is None:
                    continue
            kind = files.not_regular(path) if stopped_at is None else None
            if not named:
                if kind is None and stopped_at is None:
                    self._open_stray(path)
                self.stopped_at = stopped_at = stopped_at or (name if kind is not None else None)
                continue
            if kind is not None or stopped_at is not None:
                # 4.9.7 IndexService.load: new IndexFile throws IOException (RandomAccessFile, or the map,
                # refuses it) and load returns false there, the files after it left unloaded (the broker
                # starts all the same: DefaultMessageStore.load ignores that result)
                bad.append(name)
                self.refused.append((path, f"expected an index file, found {kind}: the broker's "
                                           "IndexService.load stops there (new IndexFile throws), loading "
                                           "none of the files after it" if kind is not None else
                                     f"expected an index file the broker loads, found it after {stopped_at}, "
                                     "where the broker's IndexService.load stops"))
                self.stopped_at = stopped_at = stopped_at or name
                continue
            try:
                opened = IndexFile.open(path, self.slot_num, self.index_num, writable=self.writable,
                                        past_end=self.past_end)
                self.files.append(opened)
                if self.past_end and (actual := files.file_size(path)) > size:
                    self.longer.append((path, actual))
            except CorruptIndexError as err:
                bad.append(name)
                self.refused.append((path, err.message))
                if self.zero_fill_short and not files.is_url(path) \
                        and files.file_size(path) < file_size(self.slot_num, self.index_num):
                    self._open_short(path)
        return bad

    def _open_stray(self, path: str) -> None:
        """Open the stray file at ``path`` for queries as the broker's load maps it (:meth:`load`
        ``numbered_strays``): its first bytes, zeros past a short one's end; left out where it cannot be
        read so (changed since)."""
        try:
            self.stray_files.append(IndexFile.open(path, self.slot_num, self.index_num, zero_tail=True,
                                                   past_end=True))
        except (CorruptIndexError, TruncatedDataError):
            return

    def _open_short(self, path: str) -> None:
        """Add the short file at ``path`` zero-filled (:meth:`load`); left out where it cannot be read
        so (changed since)."""
        try:
            self.files.append(IndexFile.open(path, self.slot_num, self.index_num, zero_tail=True))
        except (CorruptIndexError, TruncatedDataError):
            return

    def set_aside_refused(self, into: str) -> list[str]:
        """Move the first refused file and every later one into ``into`` (a directory the broker never
        lists), so that recovery rebuilds their entries from the commitlog; the recovery lines.
        Later files go too: the index must stay in commitlog order, and they are rebuilt with it."""
        if not self.refused:
            return []
        first = min(path for path, _ in self.refused)
        for f in [f for f in self.files if f.path > first]:
            f.close()
            self.files.remove(f)
        lines = []
        for name in files.list_dir(self.directory):
            path = os.path.join(self.directory, name)
            if is_file_name(name) and path >= first:
                files.make_dirs(into)
                files.rename(path, os.path.join(into, name))
                why = dict(self.refused).get(path, "after a refused file")
                lines.append(f"{path}: moved to {into} ({why}); its entries are rebuilt from the commitlog")
        self.refused, self.stopped_at = [], None
        return lines

    def cut_past_end(self, into: str) -> list[str]:
        """Cut each file :meth:`load` opened as its first bytes (:attr:`longer`) to its size, the non-zero
        bytes past it kept in ``into`` first (a directory the broker never lists); the recovery lines.
        The broker's mapping never reads those bytes, so what it reads is the same after.
        ``O(bytes past the sizes)``."""
        lines = []
        size = file_size(self.slot_num, self.index_num)
        held = {f.path: i for i, f in enumerate(self.files)}
        for path, actual in self.longer:
            at = held.get(path)
            if at is None:      # moved aside whole (set_aside_refused): kept as it is
                continue
            self.files[at].close()
            kept, _ = files.save_range_aside(path, size, into=into)
            mapped = files.MappedFile(path, writable=True)
            try:
                mapped.resize(size)
            finally:
                mapped.close()
            self.files[at] = IndexFile.open(path, self.slot_num, self.index_num, writable=self.writable)
            saved = f", saved in {kept}" if kept is not None else " (zeros)"
            lines.append(f"{path}:{size}: cut {actual - size} bytes past the index file's {size} (the broker "
                         f"maps only those){saved}")
        self.longer = []
        return lines

    def set_aside_strays(self, into: str) -> list[str]:
        """Move what :meth:`load` found in the directory beside the index files into ``into`` (a
        directory the broker never lists): its ``IndexService.load`` would open each as an index file
        (a name sorting after the real ones becomes the file it writes to).  The recovery lines."""
        lines = []
        for path in self.strays:
            files.make_dirs(into)
            target = os.path.join(into, os.path.basename(path))
            n = 1
            while files.exists(target):
                target, n = f"{os.path.join(into, os.path.basename(path))}.{n}", n + 1
            files.rename(path, target)
            lines.append(f"{path}: moved to {target}: not an index file (the broker opens every file in "
                         f"index/ as one)")
        self.strays = []
        return lines

    @property
    def last(self) -> IndexFile | None:
        return self.files[-1] if self.files else None

    def _new_file(self) -> IndexFile:
        prev = self.last
        end_phy = prev.header.end_phy_offset if prev else 0
        end_ts = prev.header.end_timestamp if prev else 0
        files.make_dirs(self.directory)
        ms = self.clock()
        while files.exists(os.path.join(self.directory, file_name_for(ms))):
            ms += 1
        created = IndexFile.create(
            os.path.join(self.directory, file_name_for(ms)), self.slot_num, self.index_num, end_phy, end_ts
        )
        if prev is not None:
            prev.flush()
            if self.on_file_full is not None:
                self.on_file_full(prev.header.end_timestamp)
        self.files.append(created)
        return created

    def _writable_file(self) -> IndexFile:
        last = self.files[-1] if self.files else None      # not .last: once per append
        return last if last is not None and not last.is_full else self._new_file()

    def put_batch(self, requests: Sequence[IndexRequest], skip_keys: int = 0) -> int:
        """Index messages (ascending commitlog offsets); returns the number of entries put.

        Messages below the active file's ``endPhyOffset`` are skipped (already
        indexed), as the broker does.  ``skip_keys``: the first message's first
        keys that are indexed already (recovery resuming a message whose keys
        span two files).  Runtime complexity: ``O(keys)`` plus the numpy put,
        one header write per file touched.
        """
        if not requests:
            return 0
        current = self._writable_file()
        floor = current.header.end_phy_offset
        keys: list[str] = []
        phys: list[int] = []
        stamps: list[int] = []
        for n, req in enumerate(requests):
            if req.phy_offset < floor:
                continue
            for key in index_keys(req)[skip_keys if n == 0 else 0:]:
                keys.append(key)
                phys.append(req.phy_offset)
                stamps.append(req.store_timestamp)
        if not keys:
            return 0
        hashes = index_key_hashes(keys) if len(keys) > SMALL_PUT else [index_key_hash(k) for k in keys]
        return self._put_all(current, hashes, np.asarray(phys, dtype=np.int64),
                             np.asarray(stamps, dtype=np.int64))

    def put_hashes(self, hashes: Int64s, phy_offsets: Int64s, store_timestamps: Int64s) -> int:
        """Put entries whose index hashes are computed (``index_key_hash`` of ``topic#key``), in order.

        The columns are int64 arrays or memoryviews of format ``q``.  As
        :meth:`put_batch`, entries below the active file's ``endPhyOffset`` are
        skipped.  Returns the number of entries put.
        """
        if not len(hashes):
            return 0
        current = self._writable_file()
        floor = current.header.end_phy_offset
        if phy_offsets[0] < floor:
            hashes, phy_offsets, store_timestamps = (np.asarray(c, dtype=np.int64)
                                                     for c in (hashes, phy_offsets, store_timestamps))
            keep = phy_offsets >= floor
            hashes, phy_offsets, store_timestamps = hashes[keep], phy_offsets[keep], store_timestamps[keep]
        return self._put_all(current, hashes, phy_offsets, store_timestamps)

    def _put_all(self, current: IndexFile, hashes: Sequence[int] | Int64s, phys: Int64s,
                 stamps: Int64s) -> int:
        """Put every entry from ``current`` on, opening new files as they fill."""
        n = len(phys)
        done = current.put(hashes, phys, stamps)
        while done < n:
            current = self._new_file()
            put = current.put(hashes[done:], phys[done:], stamps[done:])
            if not put:     # the broker's IndexService.putKey would create files forever (4.9.7)
                self.files.remove(current)
                current.close()
                files.remove(current.path)
                raise ConfigError(f"expected index files of at least {FIRST_ENTRY + 1} entries "
                                  f"(maxIndexNum), found {self.index_num}: a new file takes no entry",
                                  self.directory)
            done += put
        return done

    def delete_expired(self, offset: int, *, dry_run: bool = False) -> list[str]:
        """``IndexService.deleteExpiredFile`` (4.9.7): delete the files, all but the last, oldest first,
        whose ``endPhyOffset`` is below ``offset``; the paths deleted (``dry_run``: that would be)."""
        gone = []
        for f in self.files[:-1]:
            if f.header.end_phy_offset >= offset:
                break
            gone.append(f)
        if not dry_run:
            for f in gone:
                self.files.remove(f)
                f.close()
                files.remove(f.path)
            if gone:
                files.fsync_dir(self.directory)
        return [f.path for f in gone]

    def query(self, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1) -> Iterator[int]:
        """Candidate commitlog offsets for ``topic#key`` in ``[begin, end]``, newest first.

        Candidates only match the hash: the caller checks the message.  Files are
        visited newest first, stopping at one that begins before ``begin``, or after one whose chain
        walk came round a cycle (:meth:`IndexFile.candidates`), as ``IndexService.queryOffset`` stops.
        """
        key_hash = index_key_hash(build_key(topic, key))
        loaded = sorted([*self.files, *self.stray_files], key=lambda f: f.path) if self.stray_files \
            else self.files
        for f in reversed(loaded):
            # a walk round a cycle: the broker's never leaves that file (selectPhyOffset loops to maxNum)
            if f.is_time_matched(begin, end) and (yield from f.candidates(key_hash, begin, end)):
                return
            if f.header.begin_timestamp < begin:
                return

    @property
    def end_phy_offset(self) -> int:
        """The commitlog offset of the last indexed message (0: nothing indexed)."""
        return self.last.header.end_phy_offset if self.last else 0

    def flush(self) -> None:
        """Make the active file durable (header included)."""
        if self.last is not None:
            self.last.flush()

    def close(self) -> None:
        for f in self.files + self.stray_files:
            f.close()
        self.files, self.stray_files = [], []
