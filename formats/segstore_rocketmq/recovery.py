"""Recovery of a RocketMQ store after a clean or an unclean shutdown.

What the broker does (``DefaultMessageStore.recover``): consume queues are loaded
up to their first invalid entry; the commitlog is walked, from the third-last
file after a clean shutdown, or after a crash (``abort`` file present) from the
last file whose first message is older than the checkpoint's
``min(physic, logics) - 3 s``; the walk stops at the first message that fails
its checks, everything after it is cut, consume-queue entries pointing at or
past the cut are dropped, and (after a crash) every message walked is
dispatched again to the consume queues and the index.  Index files newer than
the checkpoint's ``indexMsgTimestamp`` are deleted after a crash.

What segstore does, and better:

- every message walked is validated (magic, length, body CRC, and its stored
  physical offset equals where it is, which the broker does not check);
- at a bad message, or at zeros, the walk looks for the next valid message (same
  file, then later files), after a clean shutdown as after a crash.  If there is
  one, the damaged bytes are left in place and reported, and nothing after them
  is lost; only a torn *tail* (no valid message after it) is cut, and the cut
  bytes are first saved (:func:`segstore.files.save_aside`);
- consume-queue entries of walked messages are checked and rewritten when
  wrong, missing ones appended, and entries at or past the end dropped; a queue
  whose earlier entries are missing is rebuilt from the start of the commitlog;
- index files are never thrown away whole: entries are checked one by one
  (ascending offsets, before the end, pointing at a message that carries that
  key), the index is cut at the first bad entry (slots fall back along their
  chains) and rebuilt from the commitlog from there, byte-identical to what
  the broker writes.

:func:`recover` returns one line per action.  Not thread-safe: the store runs it
before any append, holding the writer lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from segstore import files, progress
from segstore.errors import CorruptDataError, InvalidTopicError, OffsetOutOfRangeError
from segstore.overlap import ahead
from segstore.search import Bound, first_true, search

from . import columnar, multidispatch
from .checkpoint import Checkpoint
from .commitlog import (
    END_FILE_MIN_BLANK_LENGTH,
    KEPT_ASIDE,
    SEARCH_WINDOW,
    CommitLog,
    CommitLogFile,
    nonzero_extent,
)
from .config import SCHEDULE_TOPIC, TOPIC_MAX_LENGTH_V2, is_delivery_time, validate_topic
from .consumequeue import CQ_DTYPE, CUT_DIR, SEGSTORE_DIR, ConsumeQueue
from .consumequeue_ext import MAX_ADDR as EXT_MAX_ADDR
from .indexfile import FIRST_ENTRY, INVALID_INDEX, IndexFile, IndexService, end_timestamps
from .message import (
    BLANK_MAGIC,
    MESSAGE_MAGIC,
    PREFIX,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    Blank,
    End,
    RocketMQMessage,
    decode,
)
from .multidispatch import PROPERTY_INNER_MULTI_DISPATCH

#: A clean shutdown re-checks the last this-many commitlog files (``recoverNormally``).
NORMAL_RECOVERY_FILES = 3
#: The first three bytes of both message magics (0xDAA320A7 and 0xDAA320AB), at byte 4 of a message.
MAGIC_PREFIX = (MESSAGE_MAGIC & 0xFFFFFFFF).to_bytes(4, "big")[:3]
MAGIC_POS = PREFIX.size // 2


def _carries(key_offsets: np.ndarray, key_hashes: np.ndarray, at: np.ndarray,
             hashes: np.ndarray) -> np.ndarray:
    """Whether message ``at[i]``, whose entry hashes are ``key_hashes[key_offsets[m]:key_offsets[m + 1]]``,
    has an IndexFile entry of hash ``hashes[i]`` (vectorized over i)."""
    starts = key_offsets[at]
    counts = key_offsets[at + 1] - starts
    hit = np.zeros(len(at), bool)
    for j in range(int(counts.max()) if len(counts) else 0):
        has = counts > j
        hit[has] |= key_hashes[starts[has] + j] == hashes[has]
    return hit


def sane_links(chunk: np.ndarray, lo: int) -> np.ndarray:
    """Per IndexFile entry of ``chunk`` (entries ``lo + 1, lo + 2, ...`` of their file, as stored): a
    time diff >= 0 and a previous entry from ``INVALID_INDEX`` to below its own number."""
    numbers = np.arange(lo + 1, lo + 1 + len(chunk))
    return (chunk["time_diff"] >= 0) & (chunk["prev"] >= INVALID_INDEX) & (chunk["prev"] < numbers)


#: The span of queue ids up to which :meth:`Walked.groups` splits a one-topic batch by comparisons.
FEW_QUEUES = 8


def group_order(topic: np.ndarray, queue_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows ordered by (topic number, queue id), stably (each queue's in their own order), and
    where each run of one queue starts in that order (after the first).

    A batch's topics and queues mostly span a small range: then the sort key is one uint16 per
    row, which numpy sorts stably by radix in ``O(n)`` (an int64 key takes a merge sort)."""
    if not len(topic):
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    t_low, q_low = int(topic.min()), int(queue_id.min())
    q_span = int(queue_id.max()) - q_low + 1
    if (int(topic.max()) - t_low + 1) * q_span <= 1 << 16:
        key = ((topic - t_low).astype(np.int64) * q_span + (queue_id - q_low)).astype(np.uint16)
    else:
        key = (topic.astype(np.int64) << 32) | (queue_id.astype(np.int64) - q_low)
    order = np.argsort(key, kind="stable")
    return order, np.flatnonzero(np.diff(key[order])) + 1


@dataclass(slots=True)
class Walked:
    """Columns of the valid messages a walk found, in commitlog order (no bodies).

    ``topic`` numbers index ``topics``; ``key_offsets`` (n + 1) delimit each message's
    IndexFile entry hashes in ``key_hashes`` (``indexfile.index_keys`` order).
    """

    topics: list[str]
    phy: np.ndarray             # int64
    size: np.ndarray            # int32
    topic: np.ndarray           # int32
    queue_id: np.ndarray        # int32
    queue_offset: np.ndarray    # int64
    sys_flag: np.ndarray        # int32
    store_timestamp: np.ndarray  # int64
    tags_code: np.ndarray       # int64
    key_offsets: np.ndarray     # int64
    key_hashes: np.ndarray      # int64

    _COLUMNS = ("phy", "size", "topic", "queue_id", "queue_offset", "sys_flag", "store_timestamp",
                "tags_code")

    @classmethod
    def empty(cls, topics: list[str] | None = None) -> Walked:
        return cls(topics if topics is not None else [], *(np.zeros(0, t) for t in (  # type: ignore[call-arg]  # mypy cannot count the columns * unpacks
            np.int64, np.int32, np.int32, np.int32, np.int64, np.int32, np.int64, np.int64)),
            np.zeros(1, np.int64), np.zeros(0, np.int64))

    @classmethod
    def concat(cls, parts: list[Walked], topics: list[str]) -> Walked:
        """One column set of the parts, in order (their topic numbers refer to ``topics``)."""
        if not parts:
            return cls.empty(topics)
        counts = np.concatenate([np.diff(p.key_offsets) for p in parts])
        offsets = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        del counts
        columns = []
        for name in (*cls._COLUMNS, "key_hashes"):      # a column at a time, each part's freed after it
            columns.append(np.concatenate([getattr(p, name) for p in parts]))
            for p in parts:
                setattr(p, name, None)
        return cls(topics, *columns[:-1], offsets, columns[-1])  # type: ignore[call-arg]  # mypy cannot count the columns * unpacks

    def __len__(self) -> int:
        return len(self.phy)

    def select(self, mask: np.ndarray) -> Walked:
        """The messages where ``mask`` is true."""
        counts = np.diff(self.key_offsets)
        offsets = np.zeros(int(np.count_nonzero(mask)) + 1, np.int64)
        np.cumsum(counts[mask], out=offsets[1:])
        return Walked(self.topics, *(getattr(self, c)[mask] for c in self._COLUMNS), offsets,  # type: ignore[call-arg]  # mypy cannot count the columns * unpacks
                      self.key_hashes[np.repeat(mask, counts)])

    def has_queue_entry(self, batch_topics: frozenset[str] = frozenset()) -> np.ndarray:
        """Prepared and rollback transaction messages get no consume-queue entry; nor do the messages
        of ``batch_topics`` (5.x ``queue.type=BatchCQ`` topics: their units are in ``batchconsumequeue/``)."""
        kind = self.sys_flag & SYSFLAG_TRANSACTION_MASK
        entry = (kind != SYSFLAG_TRANSACTION_PREPARED) & (kind != SYSFLAG_TRANSACTION_ROLLBACK)
        numbers = [i for i, name in enumerate(self.topics) if name in batch_topics]
        if numbers:
            entry &= ~np.isin(self.topic, numbers)
        return entry

    def find(self, phys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each physical offset: the index of the message there (clipped) and whether there is one."""
        at = np.searchsorted(self.phy, phys)
        at = np.minimum(at, max(len(self.phy) - 1, 0))
        found = (self.phy[at] == phys) if len(self.phy) else np.zeros(len(phys), bool)
        return at, found

    def carries_hash(self, at: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Whether message ``at[i]`` has an IndexFile entry of hash ``hashes[i]`` (vectorized over i)."""
        return _carries(self.key_offsets, self.key_hashes, at, hashes)

    def index_matches(self, phys: np.ndarray, hashes: np.ndarray) -> np.ndarray | None:
        """Whether IndexFile entries ``(phys, hashes)`` are exactly a run of these messages' entries in
        put order (the usual case: then every entry points at a message carrying its key): the
        message index of each entry, or None when they are not (check them one by one)."""
        if not len(phys):
            return np.zeros(0, np.intp)
        at, found = self.find(phys[:1])
        if not found[0]:
            return None
        start = int(self.key_offsets[at[0]])
        stop = start + len(phys)
        if stop > len(self.key_hashes) or not np.array_equal(self.key_hashes[start:stop], hashes):
            return None
        owners = np.searchsorted(self.key_offsets, np.arange(start, stop), side="right") - 1
        return owners if np.array_equal(self.phy[owners], phys) else None

    def confirms_index_run(self, chunk: np.ndarray, lo: int) -> bool:
        """Whether the IndexFile entries ``chunk`` (entries ``lo + 1, lo + 2, ...`` of their file, as
        stored) are exactly these messages' entries in put order from the message at the first entry's
        offset on, each with a time diff >= 0 and a previous entry from ``INVALID_INDEX`` to below its
        own number: then each points at a message carrying its key, with sane links (verify's usual
        batch).  False for no entries.  One pass in C over the entries where they lie
        (``index_run_confirmed``); else :meth:`_confirms_index_run_py`, its reference.  ``O(entries)``."""
        if columnar._speedups is not None:
            return bool(columnar._speedups.index_run_confirmed(chunk, lo, self.key_hashes, self.key_offsets,
                                                               self.phy))
        return self._confirms_index_run_py(chunk, lo)

    def _confirms_index_run_py(self, chunk: np.ndarray, lo: int) -> bool:
        """:meth:`confirms_index_run` in numpy."""
        if not len(chunk):
            return False
        phys = chunk["phy_offset"].astype(np.int64)
        first = int(self.key_offsets[int(np.searchsorted(self.phy, phys[0]))])
        return bool(first + len(phys) <= len(self.key_hashes) and sane_links(chunk, lo).all()
                    and np.array_equal(self.key_hashes[first:first + len(phys)], chunk["hash"])
                    and np.array_equal(self.entry_phys(first, first + len(phys)), phys))

    def confirms_queue_run(self, entries: np.ndarray, mine: np.ndarray) -> bool:
        """Whether the consume-queue ``entries`` (:data:`CQ_DTYPE`, as stored) are exactly the messages
        ``mine`` (indices of these columns, one per entry): each at its message's offset, with its size
        and its tags code, which is no extension address (verify's usual batch of a queue).  One pass
        in C over the entries where they lie (``queue_run_confirmed``), the messages' columns read in
        place; else :meth:`_confirms_queue_run_py`, its reference.  ``O(entries)``."""
        if columnar._speedups is not None:
            return bool(columnar._speedups.queue_run_confirmed(
                entries, np.ascontiguousarray(mine, np.intp), np.ascontiguousarray(self.phy, np.int64),
                np.ascontiguousarray(self.size, np.int32), np.ascontiguousarray(self.tags_code, np.int64),
                EXT_MAX_ADDR))
        return self._confirms_queue_run_py(entries, mine)

    def _confirms_queue_run_py(self, entries: np.ndarray, mine: np.ndarray) -> bool:
        """:meth:`confirms_queue_run` in numpy."""
        stored = entries["tags_code"]
        return bool(np.array_equal(entries["offset"], self.phy[mine]) and (stored > EXT_MAX_ADDR).all()
                    and np.array_equal(entries["size"], self.size[mine])
                    and np.array_equal(stored, self.tags_code[mine]))

    def groups(self) -> dict[tuple[int, int], np.ndarray]:
        """The messages of each (topic number, queue id), as indices in commitlog order, in (topic, queue)
        order.  A batch of one topic over fewer than :data:`FEW_QUEUES` queue ids (the usual one) is split
        by a comparison per queue, ``O(n * queues)``; others by a stable sort (:func:`group_order`),
        which took 0.8 ms of a 64k-row batch against 0.24 ms (a 1M-message verify: 13 -> 4 ms)."""
        if len(self.topic):
            number, low = int(self.topic.min()), int(self.queue_id.min())
            if number == int(self.topic.max()) and int(self.queue_id.max()) - low < FEW_QUEUES:
                shifted = self.queue_id - low
                return {(number, low + q): np.flatnonzero(shifted == q)
                        for q in np.flatnonzero(np.bincount(shifted)).tolist()}
        order, bounds = group_order(self.topic, self.queue_id)
        return {(int(self.topic[run[0]]), int(self.queue_id[run[0]])): run
                for run in np.split(order, bounds) if len(run)}

    def entry_phys(self, start: int, stop: int) -> np.ndarray:
        """The physical offsets of IndexFile entries ``start .. stop`` of the messages (``key_hashes``
        positions): each entry's message's."""
        return np.repeat(self.phy, np.diff(self.key_offsets))[start:stop]

    def index_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The IndexFile entries of the messages in order: hashes, physical offsets, store timestamps."""
        counts = np.diff(self.key_offsets)
        return self.key_hashes, np.repeat(self.phy, counts), np.repeat(self.store_timestamp, counts)


def _walked(view: memoryview, rows: columnar.Rows, tags_code: Callable[[RocketMQMessage], int],
            topics: dict[str, int], numbers: np.ndarray | None = None,
            keys: columnar.KeyEntries | None = None) -> Walked:
    """What recovery keeps of decoded rows: the queue and index columns, computed in C.

    The tags code is the TAGS hash; delay messages (``SCHEDULE_TOPIC_XXXX``) take the
    store's rule (``tags_code``), message by message, as they are few.  ``numbers``: the
    rows' topic numbers in ``topics`` when the caller has them already; ``keys``: their index
    entries, when the decode found them (:func:`.columnar.decode_region_indexed`).
    """
    if numbers is None:
        numbers = columnar.topic_codes(view, rows, topics)
    counts, hashes, codes = keys.first(len(rows)) if keys is not None else columnar.index_entries(view, rows)
    scheduled = topics.get(SCHEDULE_TOPIC)
    if scheduled is not None and (numbers == scheduled).any():
        at = np.flatnonzero(numbers == scheduled)
        codes[at] = [tags_code(m) for m in columnar.messages(view, rows.select(at))]
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Walked([], rows["position"].copy(), rows["size"].copy(), numbers, rows["queue_id"].copy(),
                  rows["queue_offset"].copy(), rows["sys_flag"].copy(), rows["store_timestamp"].copy(), codes,
                  offsets, hashes)


def messages_at(commitlog: CommitLog, phys: np.ndarray, tags_code: Callable[[RocketMQMessage], int],
                topics: dict[str, int], start: int, end: int) -> tuple[Walked, np.ndarray, np.ndarray]:
    """The walked messages at physical offsets ``phys`` (any order), decoded where they lie.

    Returns their columns (topic numbers from ``topics``, which grows), for each offset the row
    of its message (0 where none) and whether there is a valid message there (magic, lengths,
    body CRC, stored at its own offset, in ``[start, end)``): the message a walk from ``start``
    finds there.  Each message is decoded once however many offsets name it.
    Memory: ``O(len(phys))``; one C call per run of valid offsets in a file.
    """
    sorted_phys, inverse = np.unique(np.asarray(phys, np.int64), return_inverse=True)  # each message once
    found = np.zeros(len(sorted_phys), bool)
    parts: list[Walked] = []
    rows = columnar.Rows(max(1, len(sorted_phys)))
    i = int(np.searchsorted(sorted_phys, start))
    stop_all = int(np.searchsorted(sorted_phys, end))
    while i < stop_all:
        seg = commitlog.log.segment_for(int(sorted_phys[i]))
        if seg is None:
            i += 1
            continue
        view = seg.file.view()
        stop = min(stop_all, i + int(np.searchsorted(sorted_phys[i:stop_all], seg.base + len(view))))
        if stop <= i:       # past the file's end
            i += 1
            continue
        first = i
        relative = sorted_phys[first:stop] - seg.base     # once per file: each bad offset below is O(1)
        while i < stop:
            n = columnar.decode_at(view, relative[i - first:], len(view), seg.base, rows)
            misplaced = columnar.contradicting(rows)
            if misplaced is not None:      # header contradicts its place (a copy, a damaged field)
                n = rows.n = misplaced
            if n:
                parts.append(_walked(view, rows, tags_code, topics))
                found[i:i + n] = True
            odd = (columnar.java_row(view, int(relative[i + n - first]), len(view), seg.base)
                   if misplaced is None and i + n < stop else None)
            if odd is not None and columnar.contradicting(odd) is None:     # properties not UTF-8
                parts.append(_walked(columnar.view_of(view, odd), odd, tags_code, topics))
                found[i + n] = True
            i += n + (i + n < stop)     # past the offset that holds no valid message
    walked = Walked.concat(parts, list(topics))
    rank = np.zeros(len(sorted_phys), np.intp)
    rank[found] = np.arange(int(np.count_nonzero(found)))
    return walked, rank[inverse], found[inverse]


@dataclass(slots=True)
class Walk:
    """The result of walking the commitlog: valid messages, the data end, the damaged ranges skipped."""

    start: int
    end: int
    messages: Walked = field(default_factory=Walked.empty)
    gaps: list[tuple[str, int, int]] = field(default_factory=list)  # (path, pos, length)
    last: int = -1      # the physical offset of the last valid message walked (-1: none)
    #: the BLANKs ending the files walked, ``(path, pos, physical end)``: no message starts there
    blanks: list[tuple[str, int, int]] = field(default_factory=list)
    #: by file path, where the walk's look past its data (:func:`next_valid_message`) found nothing
    #: but zeros from there to the file's end: what is cut there need not be read again (``cut_tail``)
    zeros: dict[str, int] = field(default_factory=dict)


@dataclass
class RecoveryContext:
    """What recovery works on: the store's open (writable) parts.

    :param queues: every consume queue loaded, by ``(topic, queue_id)``.
    :param open_queue: opens (creating if needed) and registers a queue the walk found.
    :param tags_code: a message's consume-queue tags code (tags hash, or a delay message's delivery time).
    :param abnormal: the ``abort`` file was present (the last writer did not close cleanly).
    :param full: check the whole store (every message, queue entry and index entry), not only
        what the broker re-checks after a shutdown (``segstore recover``).
    """

    commitlog: CommitLog
    queues: dict[tuple[str, int], ConsumeQueue]
    open_queue: Callable[[str, int], ConsumeQueue]
    index: IndexService | None
    checkpoint: Checkpoint
    tags_code: Callable[[RocketMQMessage], int]
    abnormal: bool
    full: bool = False
    #: a 5.x store: the checkpoint's ``confirmPhyOffset`` becomes the last valid message's offset
    confirm_offset: bool = False
    #: threads the commitlog walk decodes on (:func:`walk_batches`); the same repairs with any number
    threads: int = 1
    #: 5.x ``queue.type=BatchCQ`` topics (``config/topics.json``): the broker dispatches their messages
    #: to ``batchconsumequeue/``, never to a consume queue (``ConsumeQueueStore.findOrCreateConsumeQueue``)
    batch_topics: frozenset[str] = frozenset()
    #: ``enableMultiDispatch`` / ``enableLmq`` (4.9.7 MessageStoreConfig): re-dispatch the multi-dispatch
    #: (LMQ) entries of the messages walked (:class:`_MultiDispatch`)
    multi_dispatch: bool = False
    lmq: bool = False
    #: ``messageIndexEnable && messageIndexSafe`` (4.9.7 ``CommitLog.isMappedFileMatchedRecover``): after a
    #: crash the walk starts at the last file whose first store time is at most
    #: ``Checkpoint.min_timestamp_index`` (the index's time too), not ``min_timestamp``
    index_safe: bool = False
    #: the store's ``index/``: with :attr:`index` None (``messageIndexEnable`` off) the IndexFiles left there
    #: from when it was on are not loaded, but the broker's next start loads them whatever the config
    #: (4.9.7 ``DefaultMessageStore.load`` -> ``IndexService.load``), so their header ends are read
    index_directory: str | None = None
    #: filled by :func:`recover`: the damaged ranges ``(path, pos, length)`` left in place (valid
    #: messages follow them, so cutting them would lose intact messages)
    left: list[tuple[str, int, int]] = field(default_factory=list)
    #: filled by :func:`recover`: of :attr:`left`, the whole messages at the data's end whose header
    #: contradicts their place (:func:`keep_whole_tail`), ``(path, pos, length, why)``
    whole: list[tuple[str, int, int, str]] = field(default_factory=list)
    #: filled by a :func:`recover` that walks the whole commitlog: the BLANKs ending a file that
    #: consume-queue entries point into, ``(path, pos, entries by queue)`` (:func:`entries_in_ranges`)
    blank_entries: list[tuple[str, int, dict[tuple[str, int], int]]] = field(default_factory=list)
    #: set by :func:`recover` when it changed a checkpoint field (the caller writes the file)
    checkpoint_changed: bool = False
    #: set by :func:`recover` when its walk was a full check's: from the commitlog's first byte to
    #: its end, every queue and index entry of it checked, and nothing left damaged or undispatched
    checked_whole: bool = False


# -- walking the commitlog -----------------------------------------------------------


def _valid_at(seg: CommitLogFile, view: memoryview, pos: int) -> RocketMQMessage | Blank | End | None:
    """The record at ``pos`` if it is a valid message (at its own offset), BLANK or end; None if damaged."""
    try:
        record = decode(view, pos, path=seg.path)
    except CorruptDataError:
        return None
    if isinstance(record, RocketMQMessage):
        return record if columnar.contradiction(record.physical_offset, record.queue_id,
                                                seg.base + pos) is None else None
    if isinstance(record, Blank):
        size = len(view)
        return record if record.size >= END_FILE_MIN_BLANK_LENGTH and pos + record.size == size else None
    return record


def _next_valid_in_file(seg: CommitLogFile, view: memoryview, pos: int,
                        zeros: dict[str, int] | None = None) -> int | None:
    """Position of the first valid message after ``pos`` in this file, or None.

    Candidates are found by searching for the magic bytes (C speed, a window at
    a time, in the file's data ranges only: its holes are zeros); each is
    confirmed by a full decode with CRC and its stored offset.  A range's leading zeros are
    skipped first (:meth:`MappedFile.first_nonzero`, windows it reuses): after a store's last
    message they are most of what is left of its blocks reserved ahead (8 MB of a 1 GiB file),
    which the search copied out whole.  ``zeros`` gains ``seg.path: pos + 1`` where nothing but
    zeros follows (:attr:`Walk.zeros`).
    """
    nonzero = False
    for data_start, data_end in seg.file.data_ranges(pos + 1):
        # a valid message's TOTALSIZE is not zero, so its magic lies past the first non-zero byte
        start = seg.file.first_nonzero(data_start, data_end)
        nonzero = nonzero or start is not None
        while start is not None and start < data_end:
            # read through the descriptor, inside the data range: a hole read through the map
            # costs a page (on a full tmpfs, a SIGBUS), and a message reaching into one is torn
            stop = min(data_end, start + SEARCH_WINDOW + MAGIC_POS + len(MAGIC_PREFIX))
            chunk = seg.file.pread(start, stop - start)
            at = chunk.find(MAGIC_PREFIX)
            while at >= 0:
                candidate = start + at - MAGIC_POS
                if candidate > pos and _inside(seg, candidate, data_start, data_end) \
                        and isinstance(_valid_at(seg, view, candidate), RocketMQMessage):
                    return candidate
                at = chunk.find(MAGIC_PREFIX, at + 1)
            start += SEARCH_WINDOW
    if not nonzero and zeros is not None:
        zeros[seg.path] = pos + 1
    return None


def _inside(seg: CommitLogFile, candidate: int, data_start: int, data_end: int) -> bool:
    """Whether the record whose length field is at ``candidate`` lies within the data range
    ``[data_start, data_end)`` (read through the descriptor: nothing of a hole through the map)."""
    if candidate < data_start or candidate + PREFIX.size > data_end:
        return False
    total, _ = PREFIX.unpack_from(seg.file.pread(candidate, PREFIX.size))
    return candidate + total <= data_end


def next_valid_message(segs: list[CommitLogFile], i: int, pos: int,
                       zeros: dict[str, int] | None = None) -> tuple[int, int] | None:
    """``(file index, position)`` of the next valid message after ``segs[i]`` at ``pos``, or None;
    ``zeros`` as :func:`_next_valid_in_file` gives it."""
    found = _next_valid_in_file(segs[i], segs[i].file.view(), pos, zeros)
    if found is not None:
        return i, found
    for j in range(i + 1, len(segs)):
        view = segs[j].file.view()
        if isinstance(_valid_at(segs[j], view, 0), RocketMQMessage):
            return j, 0
        found = _next_valid_in_file(segs[j], view, 0, zeros)
        if found is not None:
            return j, found
    return None


def _torn_row(view: memoryview, rows: columnar.Rows, topics: dict[str, int],
              numbered: columnar.TopicNumbers | None = None) -> tuple[int | None, np.ndarray]:
    """The first row a walk must take as damaged though it decodes, or None: its header contradicts
    where it lies (:func:`.columnar.contradicting`) or names a topic no broker accepts (``../x``
    would put its queue outside ``consumequeue/``); and the topic numbers of the rows before it.
    ``topics`` gains the batch's topics; ``numbered``: the rows' topics as the decode numbered them
    (None: numbered here, :func:`.columnar.topic_codes`)."""
    first = columnar.contradicting(rows)
    n = len(rows) if first is None else first
    numbers = np.zeros(0, np.int32)
    if n:
        if numbered is not None:
            numbers = numbered.codes(view, rows, n, topics)
        else:
            numbers = columnar.topic_codes(view, rows if n == len(rows) else rows.select(slice(0, n)), topics)
        # however numbered: a topic no broker accepts ends the rows the walk takes
        invalid = [code for name, code in topics.items() if not _valid_topic(name)]
        if invalid:
            hits = np.flatnonzero(np.isin(numbers, invalid))
            if len(hits):
                first = int(hits[0])
                numbers = numbers[:first]
    return first, numbers


def _valid_topic(name: str) -> bool:
    try:
        validate_topic(name, TOPIC_MAX_LENGTH_V2)   # a stored topic: v2 messages hold long ones
    except InvalidTopicError:
        return False
    return True


def walk(commitlog: CommitLog, start: int, tags_code: Callable[[RocketMQMessage], int]) -> Walk:
    """:func:`walk_batches` with every batch's columns kept (``Walk.messages``): memory grows with the
    walk, for callers that need every message at once."""
    result = Walk(start=start, end=start)
    parts = list(walk_batches(commitlog, start, tags_code, result))
    result.messages = Walked.concat(parts, parts[-1].topics if parts else [])
    return result


#: Rows of a walk's first step (:func:`_step`): 150 KB of buffers, below ``segstore.columns.POOL_MIN``
#: (a walk of more takes one step more than with 64k rows from the first).
FIRST_STEP_ROWS = 1024


@dataclass(slots=True)
class _Step:
    """One decode of a walk from ``start``: ``n`` rows to ``stop``, the status and a BLANK's size
    (:func:`.columnar.decode_region`), the rows' columns (``batch``, None without rows; its topic
    numbers index ``names``)."""

    start: int
    n: int
    stop: int
    status: int
    blank: int
    batch: Walked | None


def _step(seg: CommitLogFile, view: memoryview, pos: int, stop: int, topics: dict[str, int],
          tags_code: Callable[[RocketMQMessage], int], kept: list[columnar.Rows]) -> _Step:
    """Decode the messages of ``seg`` from ``pos`` that start before ``stop`` (at most a batch), as a
    walk takes them: the rows before a torn one (:func:`_torn_row`, which stops there with
    :data:`.columnar.BAD`), and a message whose properties are not UTF-8 where the C decode stops
    at one (:func:`.columnar.java_row`: the broker reads it and dispatches it); ``topics`` gains
    their topics; ``kept`` holds the rows buffer reused."""
    size = len(view)
    # a walk's first step takes FIRST_STEP_ROWS rows, the next ones BATCH_ROWS: its stop is the file's
    # end, and a small store's data, ending far before it, needs no 64k rows (10 MB)
    cap = max(1, min(columnar.BATCH_ROWS, (stop - pos) // columnar.MIN_MESSAGE_SIZE + 1,
                     columnar.BATCH_ROWS if kept else FIRST_STEP_ROWS))
    if not kept or kept[0].cap < cap:
        kept[:] = [columnar.Rows(cap)]
    rows = kept[0]
    (n, end, status, blank), keys, numbered = columnar.decode_region_indexed(view, pos, stop, size, seg.base,
                                                                             rows)
    misplaced, numbers = _torn_row(view, rows, topics, numbered)
    if misplaced is not None:   # a copy, a damaged offset, queue id or topic (no CRC covers them)
        n = misplaced
        end = int(rows["position"][n]) - seg.base
        status = columnar.BAD
        rows = rows.select(slice(0, n))
    batch = _walked(view, rows, tags_code, topics, numbers, keys) if n else None
    odd = None
    if status == columnar.BAD and misplaced is None:
        odd = columnar.java_row(view, end, size, seg.base)
    if odd is not None:
        own = columnar.view_of(view, odd)
        wrong, numbers = _torn_row(own, odd, topics)
        if wrong is None:
            extra = _walked(own, odd, tags_code, topics, numbers)
            batch = extra if batch is None else Walked.concat([batch, extra], list(topics))
            n, end, status = n + 1, end + int(odd["size"][0]), columnar.DONE
    return _Step(pos, n, end, status, blank, batch)


@dataclass(slots=True)
class _Ahead:
    """A range of a commitlog file walked ahead: from ``at`` (a guessed boundary) to the first
    message boundary at or after ``stop``, as :func:`_step` steps whose topic numbers index
    ``names``."""

    file: int
    at: int
    stop: int
    steps: list[_Step]
    names: list[str]


#: A range of :class:`_WalkAhead` is this many times ``columnar.SPLIT_BYTES`` (4 MiB: about 18k
#: messages of 230 bytes, a step of rows), as one thread's walk takes 64k-row steps: each step and
#: each of the caller's checks of it pays its numpy and Python again.  Measured (2026-12-02, load
#: 7-13, medians of 5-9 fresh processes): verify of 4M messages on two threads 0.503 s of CPU with 2
#: MiB ranges, 0.488 s with 4, 0.477 s with 8 (one thread: 0.456 s); recover of 500k messages (queues
#: and IndexFile lost) 0.117 s, 0.108 s, 0.123 s, with 8.8k, 10.7k and 13.4k page faults.
WALK_SPLIT_FACTOR = 2
#: Ranges a thread of :class:`_WalkAhead` walks ahead of the batch the walk hands out.
WALK_AHEAD = 2


class _WalkAhead:
    """The steps of :func:`walk_batches`, taken by byte ranges of the files' data on ``threads``
    threads of their own (:func:`segstore.overlap.ahead`), each range from the message boundary found
    next to its start (:func:`.columnar.next_boundary`).  The threads walk ahead while the caller
    checks or dispatches the batches already handed out (a verify's lockstep against the queues and
    the IndexFile, a recovery's consume-queue and IndexFile writes), :data:`WALK_AHEAD` ranges a
    thread at most.  A step is handed out only where the walk stands at its start; elsewhere (a guess
    that was no boundary, the walk going on after damage) the walk's own position is decoded here up
    to the next range's start, so the walk sees what one thread sees.  Past a file's data
    (:attr:`CommitLogFile.wrote`) the walk decodes here.  Not thread-safe (one walk); :meth:`close`
    stops the threads.  Memory: ``WALK_AHEAD * threads`` ranges and their columns."""

    def __init__(self, segs: list[CommitLogFile], pos: int, threads: int,
                 tags_code: Callable[[RocketMQMessage], int]) -> None:
        self.tags_code = tags_code
        self.results = ahead(self._ranges(segs, pos), self._walk, threads, WALK_AHEAD * threads)
        self.head: _Ahead | None = None
        self.used = 0       # steps of head handed out

    def close(self) -> None:
        """Stop the threads (waiting for the ranges they are walking): nothing reads the files after."""
        self.results.close()

    @staticmethod
    def _ranges(segs: list[CommitLogFile], pos: int
                ) -> Iterator[tuple[int, CommitLogFile, int, int, int, bool]]:
        for i, seg in enumerate(segs):
            lo = pos if i == 0 else 0
            step = columnar.SPLIT_BYTES * WALK_SPLIT_FACTOR
            ends = [*range(lo + step, seg.wrote, step), max(seg.wrote, lo)]
            for a, b, bound in zip([lo, *ends[:-1]], ends, [*ends[1:], ends[-1]], strict=True):
                yield i, seg, a, b, bound, a == lo

    def _walk(self, task: tuple[int, CommitLogFile, int, int, int, bool]) -> _Ahead:
        i, seg, a, b, bound, first = task
        view = seg.file.view()
        at = a if first else columnar.next_boundary(view, a, b, seg.base)
        stop = columnar.next_boundary(view, b, bound, seg.base) if b < bound else b
        topics: dict[str, int] = {}
        steps: list[_Step] = []
        kept: list[columnar.Rows] = []
        pos = at
        while pos < stop:
            step = _step(seg, view, pos, stop, topics, self.tags_code, kept)
            steps.append(step)
            if step.status != columnar.DONE or not step.n:
                break
            pos = step.stop
        return _Ahead(i, at, stop, steps, list(topics))

    def _next(self, i: int, pos: int) -> _Ahead | None:
        """The range walked ahead of file ``i`` that ends after ``pos`` (None: none)."""
        while True:
            if self.head is None:
                got = next(self.results, None)
                if got is None:
                    return None
                _, ahead, error = got
                if error is not None:
                    raise error
                self.head, self.used = ahead, 0
            assert self.head is not None
            if self.head.file > i:
                return None
            if self.head.file == i and self.head.stop > pos:
                return self.head
            self.head = None

    def step(self, i: int, seg: CommitLogFile, view: memoryview, pos: int, topics: dict[str, int],
             kept: list[columnar.Rows]) -> _Step:
        """The walk's next step of file ``i`` from ``pos`` (topic numbers in ``topics``)."""
        ahead = self._next(i, pos)
        if ahead is None:
            return _step(seg, view, pos, len(view), topics, self.tags_code, kept)
        while self.used < len(ahead.steps) and ahead.steps[self.used].start < pos:
            self.used += 1          # steps the walk went past (after damage it goes on further on)
        if self.used < len(ahead.steps) and ahead.steps[self.used].start == pos:
            step = ahead.steps[self.used]
            self.used += 1
            if step.batch is not None and len(step.batch):
                numbers = np.array([topics.setdefault(name, len(topics)) for name in ahead.names], np.int32)
                step.batch.topic = numbers[step.batch.topic]
            return step
        return _step(seg, view, pos, ahead.at if ahead.at > pos else ahead.stop, topics, self.tags_code, kept)


def walk_batches(
    commitlog: CommitLog, start: int, tags_code: Callable[[RocketMQMessage], int], result: Walk, *,
    counted: bool = True, threads: int = 1, known_end: int | None = None
) -> Iterator[Walked]:
    """Walk every file from the one holding ``start`` (a message boundary), validating each record;
    yields the valid messages' columns a bounded batch at a time (:data:`.columnar.BATCH_ROWS`) and
    fills ``result``'s end and gaps as it goes (complete once exhausted).  Topic numbers are the same
    across batches (each batch's ``topics`` lists every topic seen so far).  ``counted``: the bytes
    walked advance the progress bar (not for a walk over bytes walked already).

    Messages are decoded in batches by :func:`.columnar.decode_region` (magic,
    lengths, body CRC) and must be stored at their own physical offset.  After
    damaged bytes, and after zeros (unwritten space a power loss can leave, or damage: zeros
    over a message's header), the walk goes on at the next valid message, if any: the data
    ends only where no valid message follows.  The broker's walk ends at the first zeros
    (``checkMessageAndReturnSize``: magic 0 is an "illegal magic code") and cuts what follows,
    after a clean shutdown as after a crash; a store cleanly shut down holds nothing after its
    data end, so looking costs a read of the rest of the last file (its data ranges only).
    ``threads`` above 1 decodes the files' data by byte ranges on that many threads
    (:class:`_WalkAhead`): the same messages, gaps and end; batches cut elsewhere.  ``known_end``: a
    data end known already (a walk again over what a recovery cut there): the walk does not look past it.
    Runtime complexity: ``O(bytes walked)`` in C, plus ``O(file size)`` to look past zeros.
    """
    segs = [s for s in commitlog.log.segments if s.base + commitlog.file_size > start]
    advance = progress.advance if counted else (lambda _: None)
    topics: dict[str, int] = {}
    i, pos = 0, (start - segs[0].base) if segs else 0
    split = _WalkAhead(segs, pos, threads, tags_code) if threads > 1 and segs else None
    kept: list[columnar.Rows] = []     # one buffer for every batch: _walked copies what it keeps
    try:
        while i < len(segs):
            seg = segs[i]
            view = seg.file.view()
            size = len(view)
            status = columnar.END
            if pos < size:
                step = (split.step(i, seg, view, pos, topics, kept) if split is not None
                        else _step(seg, view, pos, size, topics, tags_code, kept))
                n, stop, status, blank, batch = step.n, step.stop, step.status, step.blank, step.batch
                if n and batch is not None:
                    batch.topics = list(topics)
                    pos = stop
                    result.end = seg.base + pos
                    result.last = int(batch.phy[-1])
                    yield batch
                if status == columnar.DONE:
                    continue
                if status == columnar.BLANK and blank >= END_FILE_MIN_BLANK_LENGTH and pos + blank == size:
                    result.blanks.append((seg.path, pos, seg.base + size))
                    i, pos = i + 1, 0
                    result.end = seg.base + commitlog.file_size
                    advance(commitlog.file_size)  # a whole commitlog file walked (verify, recover)
                    continue
            if known_end is not None and seg.base + pos >= known_end:
                break
            # damaged bytes, or the end of the data in this file: is there a valid message later?
            nxt = next_valid_message(segs, i, pos, result.zeros)
            if nxt is None:
                break
            j, q = nxt
            gap_end = segs[j].base + q
            result.gaps.append((seg.path, pos, gap_end - seg.base - pos))
            advance((j - i) * commitlog.file_size)
            i, pos = j, q
    finally:
        if split is not None:    # its threads stop before the caller goes on (and may change the files)
            split.close()
    if i < len(segs):
        advance(commitlog.file_size)  # the last file: its data ends before its end


def entries_in_ranges(queues: dict[tuple[str, int], ConsumeQueue], ranges: list[tuple[str, int, int]]
                      ) -> list[dict[tuple[str, int], int]]:
    """For each of ``ranges`` (``(path, pos, physical end)``: from byte ``pos`` of the commitlog file
    named ``path`` to ``end``; in any order, not overlapping), the consume-queue entries pointing into
    it, counted by queue (in queue order, queues without any left out): entries whose messages are lost
    (a file's missing bytes, the BLANK an earlier recovery gave a short file), which the broker's
    ``getMessage`` would serve as what lies there now.  ``O(entries log ranges)`` in numpy, over the
    queues' maps."""
    if not ranges:
        return []
    starts = np.array([int(os.path.basename(path)) + pos for path, pos, _ in ranges], np.int64)
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    ends = np.array([end for _, _, end in ranges], np.int64)[order]
    counts = np.zeros((len(ranges), len(queues)), np.int64)     # by range in ``order``
    keys = sorted(queues)
    for k, key in enumerate(keys):
        for seg in queues[key].segment_files():
            phys = seg.entries["offset"].astype(np.int64)
            at = np.searchsorted(starts, phys, side="right") - 1
            inside = (at >= 0) & (phys < ends[np.maximum(at, 0)])
            if inside.any():
                counts[:, k] += np.bincount(at[inside], minlength=len(ranges))
    by_range = np.empty_like(counts)
    by_range[order] = counts
    return [{keys[k]: int(n) for k, n in enumerate(row) if n} for row in by_range]


def aside_dir(directory: str) -> str:
    """Where bytes cut from the files of ``STORE/commitlog`` are kept: ``STORE/.segstore/cut/commitlog``.

    Not in ``commitlog/`` itself: ``MappedFileQueue.load`` (RocketMQ 4.5.1 to 5.x) refuses to
    start on a directory holding any file of another length than the mapped-file size (4.2-4.4
    stop loading there; only 5.1.3+ skip subdirectories), and the broker never lists the store
    root, where segstore's other files live under ``.segstore/`` too.
    """
    store = os.path.dirname(os.path.normpath(directory))
    return os.path.join(store, SEGSTORE_DIR, CUT_DIR, os.path.basename(os.path.normpath(directory)))


def move_kept_aside(commitlog: CommitLog) -> list[str]:
    """Move ``FILE.cut-POS`` files an older segstore left inside ``commitlog/`` to :func:`aside_dir`."""
    lines = []
    target = aside_dir(commitlog.directory)
    for name in files.list_dir(commitlog.directory):
        if KEPT_ASIDE in name:
            files.make_dirs(target)
            files.rename(os.path.join(commitlog.directory, name), os.path.join(target, name))
            lines.append(f"{os.path.join(commitlog.directory, name)}: moved to {target}, where the broker "
                         f"does not look")
    return lines


def cut_tail(commitlog: CommitLog, end: int, zeros: Mapping[str, int] | None = None) -> list[str]:
    """Cut the commitlog at ``end``, saving every non-zero byte cut in :func:`aside_dir` first; ``zeros``:
    where each file holds nothing but zeros from (:attr:`Walk.zeros`), not read again."""
    lines = []
    for seg in list(commitlog.log.segments):
        if seg.base + commitlog.file_size <= end:
            continue
        pos = max(end - seg.base, 0)
        view = seg.file.view()
        stop = nonzero_extent(seg.file, pos, None if zeros is None else zeros.get(seg.path))
        if stop > pos:
            kept = files.save_aside(seg.path, pos, view[pos:stop], into=aside_dir(commitlog.directory))
            lines.append(f"{seg.path}:{pos}: cut {stop - pos} bytes of torn tail, saved in {kept}")
        del view
        # only the non-zero bytes need zeroing: the rest of a preallocated file stays sparse
        seg.wrote = stop
    commitlog.truncate(end)
    commitlog.set_end(end)
    return lines


def repair_blanks(commitlog: CommitLog, gaps: list[tuple[str, int, int]]) -> list[str]:
    """Give a file-ending BLANK whose size field is wrong the size reaching its file's end; the lines.

    ``gaps`` are a walk's damaged ranges ``(path, pos, length)``; those repaired are removed from it.
    A repaired one starts with BLANK's magic and runs to its file's end (the next valid message
    starts a later file) with nothing but zeros after the BLANK's 8 bytes: RocketMQ 4.9.7 takes any
    record with BLANK's magic for its file's end whatever its size (``checkMessageAndReturnSize``
    answers size 0, and ``recoverNormally``/``recoverAbnormally`` and ``ReputMessageService`` go on
    at the next file), so it keeps every message after it; only the size field is damaged.  The
    BLANK's old 8 bytes are kept in :func:`aside_dir` first.
    """
    lines = []
    for gap in list(gaps):
        path, pos, length = gap
        seg = next((s for s in commitlog.log.segments if s.path == path), None)
        if seg is None or pos + length != commitlog.file_size or length < END_FILE_MIN_BLANK_LENGTH:
            continue
        old = seg.file.pread(pos, PREFIX.size)
        size, magic = PREFIX.unpack(old)
        if magic != BLANK_MAGIC or seg.file.first_nonzero(pos + PREFIX.size, commitlog.file_size) is not None:
            continue
        kept = files.save_aside(path, pos, old, into=aside_dir(commitlog.directory))
        seg.file.write(pos, PREFIX.pack(length, BLANK_MAGIC))
        seg.file.flush()
        gaps.remove(gap)
        lines.append(f"{path}:{pos}: rewrote the size of the BLANK ending the file from {size} to {length} "
                     f"(the broker takes any BLANK for its file's end and goes on at the next file), "
                     f"the old bytes saved in {kept}")
    return lines


def whole_but_misplaced(seg: CommitLogFile, pos: int) -> tuple[int, str] | None:
    """``(size, why)`` of the message at ``pos`` of ``seg`` where it is whole (its length, magic and body
    CRC check out) but its header contradicts its place (a physical offset, queue id or topic no CRC
    covers: ``why``); None where it is no such message (damaged, or valid).

    Such a message was written whole and damaged after: RocketMQ 4.9.7's recovery checks none of
    those fields (``checkMessageAndReturnSize``), keeps it and every message after it, and its queue
    entry serves it.  (A message whose properties are not UTF-8 is valid: the broker reads them with
    ``new String(bytes, UTF_8)``, and so does the walk, :func:`.columnar.java_row`.)  ``O(its bytes)``.
    """
    try:
        record = decode(seg.file.view(), pos, path=seg.path)
    except CorruptDataError:
        return None
    if not isinstance(record, RocketMQMessage):
        return None
    why = columnar.contradiction(record.physical_offset, record.queue_id, seg.base + pos)
    if why is None:
        try:
            validate_topic(record.topic, TOPIC_MAX_LENGTH_V2)
        except InvalidTopicError as err:
            return record.size, err.message
        return None     # a valid message
    return record.size, str(why)


def keep_whole_tail(commitlog: CommitLog, w: Walk) -> list[tuple[str, int, int, str]]:
    """The messages at the walk's end that are whole though the walk refused them
    (:func:`whole_but_misplaced`): ``(path, pos, length, why)`` each; ``w.end`` moves past them.
    They are no torn tail to cut: the broker keeps them."""
    found: list[tuple[str, int, int, str]] = []
    while True:
        seg = commitlog.log.segment_for(w.end)
        pos = w.end - seg.base if seg is not None else commitlog.file_size
        if seg is None or pos >= commitlog.file_size:
            return found
        whole = whole_but_misplaced(seg, pos)
        if whole is None:
            return found
        found.append((seg.path, pos, *whole))
        w.end += whole[0]


def _start_offset(ctx: RecoveryContext) -> int:
    """Where the walk starts: the broker's file, moved back to cover what the queues and index lack."""
    cl = ctx.commitlog
    segs = list(cl.log.segments)
    if ctx.abnormal:
        chosen = segs[0]
        limit = ctx.checkpoint.min_timestamp_index if ctx.index_safe else ctx.checkpoint.min_timestamp
        for seg in reversed(segs):
            first = _valid_at(seg, seg.file.view(), 0)
            if isinstance(first, RocketMQMessage) and 0 < first.store_timestamp <= limit:
                chosen = seg
                break
        start = chosen.base
    else:
        start = segs[max(0, len(segs) - NORMAL_RECOVERY_FILES)].base
    queue_end = max((q.max_physical_end for q in ctx.queues.values()), default=0)
    wanted = [queue_end]
    if ctx.index is not None:
        wanted.append(ctx.index.end_phy_offset)
    low = min(wanted)
    if low < start:
        floor = cl.log.segment_for(low)
        start = floor.base if floor is not None else cl.min_offset
    return max(start, cl.min_offset)


# -- consume queues -------------------------------------------------------------------


def _queue_row(q: ConsumeQueue, offset: int) -> np.ndarray | None:
    rows = q.entries(offset, 1)
    return rows[0] if len(rows) else None


def _write_row(q: ConsumeQueue, offset: int, row: np.ndarray) -> None:
    pos = offset * CQ_DTYPE.itemsize
    seg = q.log.segment_for(pos)
    if seg is None:
        raise OffsetOutOfRangeError(f"expected a consume-queue file holding entry {offset}, found none",
                                    q.directory, pos)
    seg.file.write(pos - seg.base, row.tobytes())
    q.log.mark_dirty(seg)


class _Dispatch:
    """Checks, rewrites or appends walked messages' entries, a batch at a time (:meth:`add`, in
    commitlog order); :meth:`finish` reports, and returns the queues missing earlier entries.

    Per queue, in commitlog order: a message at the queue's next offset is appended,
    one below the queue's end before the dispatch is compared with its entry
    (rewritten when it differs), and one past it means earlier entries are missing
    (the queue is then left for a rebuild: nothing done to it is reported, as it is
    emptied).  Vectorized per queue and batch; a queue whose messages do not simply
    continue it takes the message-by-message rule.  Memory: per queue, not per message.
    """

    def __init__(self, ctx: RecoveryContext, only: set[tuple[str, int]] | None) -> None:
        self.ctx = ctx
        self.only = only
        self.gapped: set[tuple[str, int]] = set()
        self.first_seen: dict[tuple[str, int], int] = {}    # queue -> rank of its first message
        self.before: dict[tuple[str, int], tuple[int, int]] = {}  # queue -> (min, max) before dispatch
        self.appended: dict[tuple[str, int], list[int]] = {}  # queue -> [entries appended, first offset]
        self.fixed: dict[tuple[str, int], int] = {}
        #: (physical offset, size, queue offset) of messages whose QUEUEOFFSET contradicts their queue
        self.odd: list[tuple[int, int, int]] = []
        self.undo: dict[tuple[str, int], list[tuple[int, np.ndarray]]] = {}  # rewritten entries' old rows
        #: a rebuild's queues whose messages skip offsets: queue -> (next offset, offset found, its
        #: commitlog offset); the entries before it are kept, none after
        self.stopped: dict[tuple[str, int], tuple[int, int, int]] = {}
        #: queue -> the highest queue offset of its walked messages (:func:`_drop_stale_entries`)
        self.walked_top: dict[tuple[str, int], int] = {}

    def _undo(self, key: tuple[str, int], q: ConsumeQueue, high: int) -> None:
        """A gap in ``key``: put its entries back as they were before the dispatch (what later
        steps check and report is the queue as the walk found it)."""
        self.gapped.add(key)
        if q.max_offset > high:
            q.truncate(high)
        for offset, row in reversed(self.undo.pop(key, [])):
            _write_row(q, offset, row)

    def add(self, messages: Walked) -> None:
        chosen = np.flatnonzero(messages.has_queue_entry(self.ctx.batch_topics))
        if not len(chosen):     # a batch of prepared or rolled back transaction messages only
            return
        order, bounds = group_order(messages.topic[chosen], messages.queue_id[chosen])
        chosen = chosen[order]
        runs = sorted(zip(np.concatenate([[0], bounds]).tolist(),
                          np.concatenate([bounds, [len(chosen)]]).tolist(), strict=True),
                      key=lambda run: int(chosen[run[0]]))     # in order of first message
        for lo, hi in runs:
            at = chosen[lo:hi]
            first = int(at[0])
            key = (messages.topics[int(messages.topic[first])], int(messages.queue_id[first]))
            self.first_seen.setdefault(key, len(self.first_seen))
            self.walked_top[key] = max(self.walked_top.get(key, -1), int(messages.queue_offset[at].max()))
            if (self.only is not None and key not in self.only) or key in self.gapped or key in self.stopped:
                continue
            q = self.ctx.queues.get(key)
            if q is None:
                q = self.ctx.queues[key] = self.ctx.open_queue(*key)
            low, high = self.before.setdefault(key, (q.min_offset, q.max_offset))
            offsets = messages.queue_offset[at]
            if self.only is not None and q.log.active is None and q.max_offset == 0 < int(offsets[0]) \
                    and self.ctx.commitlog.min_offset > 0:
                # the rebuild from the commitlog's start, of a queue without files whose first message
                # has a queue offset above 0: its earlier messages were in the files retention
                # deleted; the broker's dispatch starts the queue there (fillPreBlank)
                q.start_at(int(offsets[0]), self.ctx.commitlog.min_offset)
            end = q.max_offset
            new = offsets >= end
            if np.array_equal(offsets[new], np.arange(end, end + int(np.count_nonzero(new)))) \
                    and not _odd(offsets).any():
                append, compare = at[new], at[~new & (offsets >= low) & (offsets < high)]
            else:
                append, compare, gap, odd = _dispatch_one_by_one(q, messages, at, low, high)
                self.odd += zip(messages.phy[odd].tolist(), messages.size[odd].tolist(),
                                messages.queue_offset[odd].tolist(), strict=True)
                if gap and self.only is None:
                    self._undo(key, q, high)
                    continue
                if gap:
                    # the rebuild from the commitlog's start: the entries before the gap are right (as
                    # the broker's dispatch writes them); the messages from it on can get none
                    after = at[messages.queue_offset[at] > q.max_offset + len(append)]
                    first = int(after[0])
                    self.stopped[key] = (q.max_offset + len(append), int(messages.queue_offset[first]),
                                         int(messages.phy[first]))
            n = _compare_entries(q, messages, compare, self.undo.setdefault(key, []))
            if n:
                self.fixed[key] = self.fixed.get(key, 0) + n
            if len(append):
                rows = np.empty(len(append), dtype=CQ_DTYPE)
                rows["offset"], rows["size"] = messages.phy[append], messages.size[append]
                rows["tags_code"] = messages.tags_code[append]
                q.append_array(rows)
                done = self.appended.setdefault(key, [0, int(messages.queue_offset[append[0]])])
                done[0] += len(rows)

    def finish(self, lines: list[str]) -> set[tuple[str, int]]:
        for key in sorted(self.appended, key=self.first_seen.__getitem__):
            if key not in self.gapped:
                n, start = self.appended[key]
                lines.append(f"consumequeue {key[0]}/{key[1]}: rebuilt {n} entries from queue offset {start}")
        for key, n in sorted(self.fixed.items()):
            if key not in self.gapped:
                lines.append(f"consumequeue {key[0]}/{key[1]}: rewrote {n} entries that did not match their "
                             f"message")
        for key, (expected, found, phy) in sorted(self.stopped.items()):
            lines.append(f"consumequeue {key[0]}/{key[1]}: the message at commitlog offset {phy} has queue "
                         f"offset {found} where {expected} comes next (the messages between are not in the "
                         f"commitlog): the entries before it are kept, it and the later ones get none")
        return self.gapped

    def held_entries(self, key: tuple[str, int]) -> bool:
        """Whether the queue held entries before the dispatch."""
        low, high = self.before[key]
        return high > low


def _odd(offsets: np.ndarray) -> np.ndarray:
    """Per message of one queue (in commitlog order), whether its queue offset breaks the sequence its
    neighbours keep: the next one continues from the previous one (for the first, the next two
    continue each other and not from it).  QUEUEOFFSET is under no CRC; such a message is torn.
    The last one is never judged (nothing after it to tell).  ``O(n)``."""
    odd = np.zeros(len(offsets), bool)
    if len(offsets) >= 3:
        odd[0] = (offsets[0] != offsets[1] - 1) & (offsets[2] == offsets[1] + 1)
        odd[1:-1] = (offsets[2:] == offsets[:-2] + 2) & (offsets[1:-1] != offsets[:-2] + 1)
    return odd


def _dispatch_one_by_one(q: ConsumeQueue, messages: Walked, at: np.ndarray, low: int,
                         high: int) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
    """The exact per-message rule for one queue's messages ``at``: (to append, to compare, gap found,
    odd ones), those to append and compare the messages before a gap where one is found;
    ``[low, high)`` are the queue's offsets before the dispatch (the ones compared).
    An odd message (:func:`_odd`) is neither appended nor compared: one wrong field would otherwise
    empty its queue, or rewrite another message's entry to point at it."""
    append: list[int] = []
    compare: list[int] = []
    odd = _odd(messages.queue_offset[at])
    for i, offset, bad in zip(at.tolist(), messages.queue_offset[at].tolist(), odd.tolist(), strict=True):
        next_offset = q.max_offset + len(append)
        if bad:
            continue
        if offset == next_offset:
            append.append(i)
        elif offset > next_offset:     # what comes before the gap, then the gap
            return np.array(append, np.int64), np.array(compare, np.int64), True, at[odd]
        elif low <= offset < high:
            compare.append(i)
    return np.array(append, np.int64), np.array(compare, np.int64), False, at[odd]


def _compare_entries(q: ConsumeQueue, messages: Walked, at: np.ndarray,
                     undo: list[tuple[int, np.ndarray]]) -> int:
    """Rewrite the entries of messages ``at`` (in the queue already) that differ from them; how many.
    Each rewritten entry's offset and former row are added to ``undo``."""
    if not len(at):
        return 0
    offsets = messages.queue_offset[at]
    lo = int(offsets.min())
    rows = q.entries(lo, int(offsets.max()) - lo + 1)
    have = rows[np.minimum(offsets - lo, len(rows) - 1)] if len(rows) else None
    if have is None:
        return 0
    present = offsets - lo < len(rows)
    stored = have["tags_code"]
    # a consumequeue_ext address (filter-enabled broker) stands for the tags code: kept as it is
    tags_differ = (stored != messages.tags_code[at]) & (stored > EXT_MAX_ADDR)
    if q.topic == SCHEDULE_TOPIC:
        # a delivery time under the broker's messageDelayLevel (not recorded in the store) is kept: the
        # levels segstore was given may not be the broker's, and the broker delivers by this code
        tags_differ &= ~is_delivery_time(stored, messages.store_timestamp[at])
    differ = present & ((have["offset"] != messages.phy[at]) | (have["size"] != messages.size[at])
                        | tags_differ)
    for i in np.flatnonzero(differ).tolist():
        j = int(at[i])
        undo.append((int(offsets[i]), have[i].copy()))
        _write_row(q, int(offsets[i]), np.array([(messages.phy[j], messages.size[j], messages.tags_code[j])],
                                                dtype=CQ_DTYPE))
    return int(np.count_nonzero(differ))


#: bytes every message carrying ``INNER_MULTI_DISPATCH`` holds (its property name and the 0x01 after it)
_MULTI_MARK = multidispatch.PROPERTY_INNER_MULTI_DISPATCH.encode() + b"\x01"


class _MultiDispatch:
    """The multi-dispatch (LMQ) entries of the walked messages, re-dispatched as the broker's recovery
    does (RocketMQ 4.9.7: ``recoverAbnormally`` dispatches every message walked through
    ``ConsumeQueue.putMessagePositionInfoWrapper``, whose ``multiDispatchLmqQueue`` writes the entry of
    each queue ``INNER_MULTI_DISPATCH`` names, when ``enableMultiDispatch``).

    :meth:`add` keeps the messages whose bytes hold the property (a C-speed search of each batch's bytes;
    a body holding the same bytes is dropped when decoded), :meth:`finish` decodes them in commitlog
    order and applies ``putMessagePositionInfo``'s rule per queue: an entry the queue holds already
    (its offset below the queue's end, or the message not past the queue's last) is left as it is, the
    queue's next offset is appended.  An entry past the queue's end (earlier ones missing) is reported
    and not written: the broker would write it into the wrong slot ("logic queue order maybe wrong").
    """

    def __init__(self, ctx: RecoveryContext) -> None:
        self.ctx = ctx
        self.phys: list[int] = []

    def add(self, batch: Walked) -> None:
        if not len(batch):
            return
        cl = self.ctx.commitlog
        lo, hi = int(batch.phy[0]), int(batch.phy[-1]) + int(batch.size[-1])
        entry = batch.has_queue_entry(self.ctx.batch_topics)
        hits: set[int] = set()
        while lo < hi:
            seg = cl.log.segment_for(lo)
            if seg is None:
                break
            stop = min(hi, seg.base + cl.file_size)
            data = bytes(seg.file.view()[lo - seg.base:stop - seg.base])
            at = data.find(_MULTI_MARK)
            while at >= 0:
                hits.add(int(np.searchsorted(batch.phy, lo + at, side="right")) - 1)
                at = data.find(_MULTI_MARK, at + 1)
            lo = stop
        self.phys += [int(batch.phy[i]) for i in sorted(hits) if i >= 0 and entry[i]]

    def finish(self, end: int, lines: list[str]) -> None:
        ctx = self.ctx
        appended: dict[tuple[str, int], list[int]] = {}
        for phy in self.phys:
            if phy >= end:
                break
            msg = ctx.commitlog.read(phy)
            for name, qid, offset in multidispatch.targets(msg.properties, msg.queue_id, ctx.lmq):
                try:
                    validate_topic(name, TOPIC_MAX_LENGTH_V2)
                except InvalidTopicError:
                    lines.append(f"commitlog {phy}: INNER_MULTI_DISPATCH names {name!r}, not a queue name; "
                                 f"not dispatched")
                    continue
                q = ctx.queues.get((name, qid))
                if q is None:
                    q = ctx.queues[name, qid] = ctx.open_queue(name, qid)
                if phy + msg.size <= q.max_physical_end or offset < q.max_offset:
                    continue        # putMessagePositionInfo: "build consume queue repeatedly"
                if offset > q.max_offset:
                    lines.append(f"consumequeue {name}/{qid}: multi-dispatch entry {offset} of the message "
                                 f"at commitlog offset {phy} is past the queue's end {q.max_offset}; "
                                 f"not written")
                    continue
                q.append_array(np.array([(phy, msg.size, ctx.tags_code(msg))], dtype=CQ_DTYPE))
                appended.setdefault((name, qid), [0, offset])[0] += 1
        for (name, qid), (n, first) in appended.items():
            lines.append(f"consumequeue {name}/{qid}: re-dispatched {n} multi-dispatch entries from queue "
                         f"offset {first}")


def _drop_queue_entries_past(ctx: RecoveryContext, end: int, lines: list[str]) -> None:
    """Drop entries pointing at or past the commitlog end (the broker's ``truncateDirtyLogicFiles``)."""
    for (topic, queue_id), q in sorted(ctx.queues.items()):
        # entries are in commitlog order: binary search for the first at or past the end
        def past_end(offset: int, q: ConsumeQueue = q) -> bool:
            row = _queue_row(q, offset)
            return row is None or int(row["offset"]) >= end

        lo = first_true(past_end, q.min_offset, q.max_offset)
        if lo < q.max_offset:
            dropped = q.max_offset - lo
            q.truncate(lo)
            lines.append(
                f"consumequeue {topic}/{queue_id}: dropped {dropped} entries at or past the "
                f"commitlog end {end}"
            )


def _stale_from(ctx: RecoveryContext, key: tuple[str, int], q: ConsumeQueue, lo: int) -> int:
    """The first queue offset from ``lo`` on from which every entry of ``key`` is provably stale: it
    points at no message, or at one of another queue that names no queue to be dispatched to besides its
    own (``INNER_MULTI_DISPATCH``).  Reads one message per such entry, from the last back."""
    first = q.max_offset
    for offset in range(q.max_offset - 1, lo - 1, -1):
        row = _queue_row(q, offset)
        if row is None:
            break
        try:
            msg = ctx.commitlog.read(int(row["offset"]), check_crc=False)
        except (CorruptDataError, OffsetOutOfRangeError):
            first = offset      # the walk found no message starting there
            continue
        if (msg.topic, msg.queue_id) == key or PROPERTY_INNER_MULTI_DISPATCH in msg.properties:
            break
        first = offset
    return first


def _drop_stale_entries(ctx: RecoveryContext, dispatch: _Dispatch, w: Walk, gapped: set[tuple[str, int]],
                        lines: list[str]) -> None:
    """Drop the entries past a queue's last walked message that point into the walked commitlog at no
    message of that queue: stale entries.  RocketMQ 4.9.7 ``ConsumeQueue.truncateDirtyLogicFiles`` (its
    recovery after a torn or lost commitlog tail) moves a queue's write position back without clearing
    the entries after it; new messages of other queues then fill the commitlog there, and the broker's
    next start (``ConsumeQueue.recover`` takes entries up to the first zero one) serves the stale entry:
    another queue's message under this queue's next offset.  Only where the walk left no damage in
    place (a damaged message there may be this queue's) and without multi-dispatch (an LMQ entry points
    at another topic's message).  ``O(queues)`` binary searches, one message read per entry dropped."""
    if ctx.left or dispatch.odd or ctx.multi_dispatch:
        return
    for key, q in sorted(ctx.queues.items()):
        if key in gapped or key in dispatch.stopped or multidispatch.is_lmq(key[0]) \
                or key[0] in ctx.batch_topics:
            continue
        top = dispatch.walked_top.get(key)
        start = q.min_offset if top is None else max(top + 1, q.min_offset)
        if start >= q.max_offset:
            continue

        def walked(offset: int, q: ConsumeQueue = q) -> bool:
            row = _queue_row(q, offset)
            return row is not None and w.start <= int(row["offset"]) < w.end

        lo = _stale_from(ctx, key, q, first_true(walked, start, q.max_offset))
        if lo < q.max_offset:
            dropped = q.max_offset - lo
            q.truncate(lo)
            lines.append(f"consumequeue {key[0]}/{key[1]}: dropped {dropped} stale entries from queue offset "
                         f"{lo}: they point into the commitlog walked at no message of this queue")


def _drop_empty_queue_files(ctx: RecoveryContext, lines: list[str]) -> None:
    """Delete consume-queue files left without an entry at the end of a queue: the broker's load
    would take their zero slot 0 as an entry (offset 0, size 0) and dispatch the commitlog again."""
    for key, q in sorted(ctx.queues.items()):
        for path in q.drop_empty_tail():
            lines.append(f"consumequeue {key[0]}/{key[1]}: deleted {path}, which held no entry")


def _zero_past_queue_entries(ctx: RecoveryContext, lines: list[str]) -> None:
    """Zero the data the consume-queue files hold after their last entry (``zero_past_entries``), which
    ``verify`` names and the broker's appends would reach: a check of the whole store's (a full
    recovery, or one that walked the whole commitlog), which reads every queue file past its entries."""
    for key, q in sorted(ctx.queues.items()):
        lines.extend(f"consumequeue {key[0]}/{key[1]}: {line}" for line in q.zero_past_entries())


def _drop_damaged_queues(ctx: RecoveryContext, dispatch: _Dispatch, lines: list[str]) -> None:
    for key in sorted(dispatch.gapped):
        q = ctx.queues[key]
        if dispatch.held_entries(key):
            lines.append(
                f"consumequeue {key[0]}/{key[1]}: earlier entries missing, rebuilding the queue "
                f"from the start of the commitlog"
            )
        q.truncate(q.min_offset)


# -- index ----------------------------------------------------------------------------


#: Index entries checked at a time (bounds the rows decoded for them).
INDEX_CHUNK = 1 << 16


def _first_not_carried(cl: CommitLog, phys: np.ndarray, hashes: np.ndarray,
                       ordinals: np.ndarray) -> int | None:
    """The first ``i`` where ``phys[i]`` (ascending, inside the walked range) is not the offset of a
    valid message (magic, lengths, body CRC, stored at its own offset) whose key number
    ``ordinals[i]`` (in the broker's put order, ``indexfile.index_keys``) has hash ``hashes[i]``,
    or None: an entry past the message's last key is one put again (see :func:`_entry_ordinals`).
    The messages are decoded where they lie (:func:`.columnar.decode_at`), so memory is bounded by
    the chunk, not the store."""
    done = 0
    rows = columnar.Rows(max(1, len(phys)))
    while done < len(phys):
        seg = cl.log.segment_for(int(phys[done]))
        if seg is None:
            return done
        view = seg.file.view()
        if phys[done] >= seg.base + len(view):     # past the file's end: in a file that is missing
            return done
        stop = done + int(np.searchsorted(phys[done:], seg.base + len(view)))
        n = columnar.decode_at(view, phys[done:stop] - seg.base, len(view), seg.base, rows)
        misplaced = columnar.contradicting(rows)
        if misplaced is not None:      # header contradicts its place (a copy, a damaged field)
            n = rows.n = misplaced
        if n:
            counts, own, _ = columnar.index_entries(view, rows)
            offsets = np.zeros(n + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            hit = _holds_key(offsets, own, ordinals[done:done + n], hashes[done:done + n])
            if not hit.all():
                return done + int(np.flatnonzero(~hit)[0])
        done += n
        if done < stop:     # no valid message there, or one whose properties are not UTF-8
            odd = columnar.java_row(view, int(phys[done]) - seg.base, len(view), seg.base) \
                if misplaced is None else None
            if odd is None or columnar.contradicting(odd) is not None:
                return done
            counts, own, _ = columnar.index_entries(columnar.view_of(view, odd), odd)
            if not _holds_key(np.array([0, int(counts[0])], np.int64), own, ordinals[done:done + 1],
                              hashes[done:done + 1]).all():
                return done
            done += 1
    return None


def _holds_key(key_offsets: np.ndarray, key_hashes: np.ndarray, ordinals: np.ndarray,
               hashes: np.ndarray) -> np.ndarray:
    """Whether row ``i``'s key number ``ordinals[i]`` (its keys' hashes
    ``key_hashes[key_offsets[i]:key_offsets[i + 1]]``) exists and has hash ``hashes[i]``."""
    counts = key_offsets[1:len(ordinals) + 1] - key_offsets[:len(ordinals)]
    inside = ordinals < counts
    hit = np.zeros(len(ordinals), bool)
    hit[inside] = key_hashes[key_offsets[:len(ordinals)][inside] + ordinals[inside]] == hashes[inside]
    return hit


def _entry_ordinals(phys: np.ndarray, prev_phy: int, prev_ordinal: int) -> np.ndarray:
    """For each entry of ``phys`` (ascending), its number among the entries of its message: the
    entries of one message lie together, in the broker's put order, a file's first ones going
    on from the previous file's (``prev_phy``, the last one's number ``prev_ordinal``).  RocketMQ
    4.9.7's ``IndexService.buildIndex`` after an abnormal start indexes the message at the last
    file's ``endPhyOffset`` again (it skips only those below it): its second run of keys numbers
    past its last key."""
    n = len(phys)
    idx = np.arange(n)
    new_run = np.empty(n, bool)
    if n:
        new_run[0] = phys[0] != prev_phy
        new_run[1:] = phys[1:] != phys[:-1]
    starts = np.maximum.accumulate(np.where(new_run, idx, 0)) if n else idx
    ordinals = idx - starts
    first_new = int(np.argmax(new_run)) if new_run.any() else n
    ordinals[:first_new] += prev_ordinal + 1
    return ordinals


def _first_bad_entry(cl: CommitLog, index: IndexService, walk_start: int,
                     end: int) -> tuple[int, int] | None:
    """``(file number, entry number)`` of the first index entry that cannot be trusted, or None.

    Bad: offsets going backwards, at or past the end, a negative time diff, or (from the walk start on)
    not the offset of a valid message whose key at that place in the put order has
    that hash (so an entry put again after a crash is bad), or (in a file holding entries from the
    walk start on) a link other than the one ``IndexFile.putKey`` leaves: a torn page can zero an
    entry's last bytes, its link, and keep its hash and offset; the chain of its slot ends there,
    hiding the older keys of that slot from every query, where the broker's recovery rebuilds the
    file (RocketMQ 4.9.7 ``IndexService.load(false)`` drops the files past the checkpoint).
    Vectorized per :data:`INDEX_CHUNK` entries.
    """
    prev_phy = -1
    prev_ordinal = -1
    for fi, f in enumerate(index.files):
        entries = f.entries
        wrong_link = f.first_wrong_link() \
            if len(entries) and int(entries["phy_offset"][-1]) >= walk_start else None
        for lo in range(0, len(entries), INDEX_CHUNK):
            chunk = entries[lo:lo + INDEX_CHUNK]
            phys = chunk["phy_offset"].astype(np.int64)
            hashes = chunk["hash"].astype(np.int64)
            order_ok = np.empty(len(phys), dtype=bool)
            order_ok[0] = phys[0] >= prev_phy
            order_ok[1:] = phys[1:] >= phys[:-1]
            # a negative time diff: torn (IndexFile.putKey clamps it to [0, Integer.MAX_VALUE]); a query
            # stops at it (selectPhyOffset breaks on timeDiff < 0), hiding the older keys of its slot
            bad = ~order_ok | (phys >= end) | (phys < 0) | (chunk["time_diff"] < 0)
            hits = np.flatnonzero(bad)
            first = int(hits[0]) if len(hits) else len(phys)
            # only entries before the first bad one matter: their offsets ascend
            ordinals = _entry_ordinals(phys, prev_phy, prev_ordinal)
            checked = np.flatnonzero(phys[:first] >= walk_start)
            k = _first_not_carried(cl, phys[checked], hashes[checked], ordinals[checked])
            if k is not None:
                first = int(checked[k])
            if wrong_link is not None and lo <= wrong_link - FIRST_ENTRY < lo + first:
                first = wrong_link - FIRST_ENTRY - lo
            if first < len(phys):
                return fi, lo + first + 1
            prev_phy, prev_ordinal = int(phys[-1]), int(ordinals[-1])
    return None


def _store_time(ctx: RecoveryContext, phy: int) -> int:
    try:
        return ctx.commitlog.read(phy).store_timestamp
    except (CorruptDataError, OffsetOutOfRangeError):
        return 0


def _resume_point(index: IndexService, fi: int) -> tuple[int, int]:
    """Where re-indexing resumes when file ``fi`` is left empty: ``(commitlog offset, keys to skip)``.

    An emptied file starts where the previous one ended, as the broker's
    ``getAndCreateLastIndexFile`` creates it; the previous file's last message
    may have had more keys than fitted (``IndexService.putKey`` rolls mid-message),
    so that message is resumed after the keys the earlier files hold: the previous
    file's, and where that file holds only this message's keys, the files before it
    too (a message of more keys than a file takes spans several).
    """
    if fi == 0:
        return index.files[0].header.begin_phy_offset, 0
    phy = index.files[fi - 1].header.end_phy_offset
    skip = 0
    for f in reversed(index.files[:fi]):
        held = f.entries["phy_offset"]
        skip += int(np.count_nonzero(held == phy))
        if not len(held) or int(held[0]) != phy:
            break
    return phy, skip


def _first_keyed(ctx: RecoveryContext, after: int, hi: int) -> int | None:
    """The commitlog offset of the first message with index keys above ``after`` and below ``hi``
    (``after`` a message's start, or below the commitlog), or None.  Walks from ``after`` until it
    meets one or ``hi``."""
    cl = ctx.commitlog
    lo = max(after, cl.min_offset)
    if lo >= hi:
        return None
    if after >= cl.min_offset:
        # a sound index's next file starts at the message after its last entry's (or at that one):
        # its TOTALSIZE says so without decoding a batch (a walk of each gap was an eighth of a
        # recovery of 200,000 messages over 11 files)
        try:
            seg = cl.file_for(after)
        except OffsetOutOfRangeError:
            seg = None
        view = seg.file.view() if seg is not None else None
        if seg is not None and view is not None and after - seg.base + 4 <= len(view):
            size = int.from_bytes(view[after - seg.base:after - seg.base + 4], "big", signed=True)
            if 0 < size and after + size >= hi:
                return None
    for batch in walk_batches(cl, lo, ctx.tags_code, Walk(lo, lo), counted=False, known_end=hi):
        keyed = batch.phy[(np.diff(batch.key_offsets) > 0) & (batch.phy > after) & (batch.phy < hi)]
        if len(keyed):
            return int(keyed.min())
        if len(batch) and int(batch.phy.max()) >= hi:
            break
    return None


def _lost_file(ctx: RecoveryContext, index: IndexService, upto: int) -> tuple[int, int] | None:
    """``(file number, commitlog offset)`` where an index file was lost among the first ``upto`` files:
    the first message with keys below the first entry of file ``i`` and above the last entry of the
    file before it holding entries, or None.  RocketMQ 4.9.7 ``IndexService.buildIndex`` indexes
    every message with keys it dispatches, rolling to a new file mid-message when one is full, so
    only a file lost leaves such a message out (``IndexService.load`` loads the files it finds and
    rebuilds none).  Walks only the messages between two files (none in a sound index) and below
    the first."""
    prev_last = -1
    for fi, f in enumerate(index.files[:upto]):
        if not len(f.entries):
            continue
        found = _first_keyed(ctx, prev_last, int(f.entries["phy_offset"][0]))
        if found is not None:
            return fi, found
        prev_last = int(f.entries["phy_offset"][-1])
    return None


def _recover_index(ctx: RecoveryContext, w: Walk, lines: list[str]) -> tuple[int, int, int]:
    """Cut the index at its first bad entry.

    Returns the commitlog offset to re-index from, how many keys of the message
    there are indexed already (see :func:`_resume_point`), and how many trusted
    entries were cut: the entries of the last kept message are put again, since a
    crash may have indexed only some of its keys (the same bytes result when it had
    them all), unless retention deleted its commitlog file: then they stay as they
    are (nothing is left to put them again from).  The offset may lie below the
    commitlog's first file (:class:`_IndexPut` starts there).
    """
    index = ctx.index
    assert index is not None
    # slots first: the entries put again below link to what their slots hold
    lines.extend(_fix_slots(index))
    # the header's ends next: re-indexing resumes from them (_resume_point), and a put skips what lies
    # below the last file's endPhyOffset
    lines.extend(_fix_header_ends(ctx, index))
    bad = _first_bad_entry(ctx.commitlog, index, w.start, w.end)
    lost = _lost_file(ctx, index, len(index.files) if bad is None else bad[0] + 1)
    if lost is not None:
        # the broker leaves such messages unindexed; segstore's one rebuild path (cut the index where
        # it goes wrong, put the rest again) indexes them: from the file after the loss on
        lines.append(f"{index.files[lost[0]].path}: messages with keys from commitlog offset {lost[1]} have "
                     f"no entries before its first (an index file was lost; the broker does not rebuild "
                     f"one); its entries and the later files' are rebuilt from the commitlog")
        bad = lost[0], 1
    if bad is None:
        last = index.last
        if last is None:
            return 0, 0, 0
        if last.count == 0:
            return (*_resume_point(index, len(index.files) - 1), 0)
        fi, number = len(index.files) - 1, last.header.index_count
    else:
        fi, number = bad
    f: IndexFile = index.files[fi]
    trusted = number - 1
    keep = trusted
    if keep > 0:
        kept_phys = f.entries["phy_offset"][:keep].astype(np.int64)
        if kept_phys[-1] >= ctx.commitlog.min_offset:
            keep = search(kept_phys, kept_phys[-1], Bound.SMALLEST_UPPER)
    if bad is not None and lost is None:
        lines.append(
            f"{f.path}:{f.entry_pos(number)}: index entry {number} does not match the commitlog; "
            f"kept {keep} entries before it, rebuilding the rest"
        )
    for later in index.files[fi + 1 :]:
        later.close()
        files.remove(later.path)
        lines.append(f"{later.path}: removed; its entries are rebuilt from the commitlog")
    del index.files[fi + 1 :]
    if keep > 0:
        if keep < f.count:
            end_time = _store_time(ctx, int(f.entries["phy_offset"][keep - 1]))
            f.truncate(keep, end_time)
            # the slots fell back along the cut entries' links, one of which may be the damage that cut
            # them (a zeroed link ends the chain early): the kept entries' links are sound, the slots
            # follow them (a slot must hold its newest kept entry, or the older keys of it go unfound)
            f.repair_slots()
        # the message at the new end is indexed whole: resume after it
        return index.end_phy_offset + 1, 0, trusted - keep
    # the file's first message is put again from the file's first entry on (it is not indexed
    # anywhere else unless it began in the previous file)
    # (a file lost before the first: from the first message it held on)
    start, skip = _resume_point(index, fi) if lost is None or fi else (lost[1], 0)
    prev = index.files[fi - 1].header if fi else None
    f.truncate(0, 0, *((prev.end_phy_offset, prev.end_timestamp) if prev else (0, 0)))
    return start, skip, trusted


def _fix_begin_offsets(index: IndexService) -> list[str]:
    """Set each file's ``beginPhyOffset`` to its first entry's (``IndexFile.putKey`` sets it with that
    entry; no check covers the header); the recovery lines."""
    lines = []
    for f in index.files:
        entries = f.entries
        if len(entries) and int(entries["phy_offset"][0]) != f.header.begin_phy_offset:
            lines.append(f"{f.path}: beginPhyOffset {f.header.begin_phy_offset} set to its first entry's, "
                         f"{int(entries['phy_offset'][0])}")
            f.header.begin_phy_offset = int(entries["phy_offset"][0])
            f.write_header()
    return lines


def _fix_header_ends(ctx: RecoveryContext, index: IndexService) -> list[str]:
    """Give each file the times and offsets 4.9.7 ``IndexFile.putKey`` leaves over the entries its
    ``indexCount`` holds: ``beginTimestamp`` the store time of the first entry's message (the time diffs
    are counted from it), ``endPhyOffset``/``endTimestamp`` the last entry's offset and its message's
    store time; a file without entries what ``IndexFile``'s constructor writes, the previous file's
    ends (``getAndCreateLastIndexFile``).  A damaged field there misleads the broker: ``selectPhyOffset``
    stops at an entry whose time reads before the query's begin (a negative ``beginTimestamp`` hid every
    older key of its chains), ``isTimeMatched`` picks files by the times, ``buildIndex`` skips messages
    below the last file's ``endPhyOffset``, and an end past a damaged (lowered) ``indexCount`` made
    segstore's re-indexing resume past the messages that count left out.  A time is taken only from a
    message that reads (two a file); the counts are left as they are on disk.  The recovery lines."""
    lines = []
    prev: IndexFile | None = None
    for f in index.files:
        h = f.header
        entries = f.entries
        if len(entries):
            begin_phy, end_phy = int(entries["phy_offset"][0]), int(entries["phy_offset"][-1])
            begin_ts = _store_time(ctx, begin_phy) or h.begin_timestamp
            end_ts = _store_time(ctx, end_phy) or h.end_timestamp
            begin_phy = h.begin_phy_offset      # _fix_begin_offsets, once the index is rebuilt
        elif prev is not None:
            begin_phy = end_phy = prev.header.end_phy_offset
            begin_ts = end_ts = prev.header.end_timestamp
        else:
            begin_phy = end_phy = h.begin_phy_offset
            begin_ts = end_ts = h.begin_timestamp
        held = (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset)
        wanted = (begin_ts, end_ts, begin_phy, end_phy)
        if wanted != held:
            names = ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset")
            changed = ", ".join(f"{name} {old} -> {new}"
                                for name, old, new in zip(names, held, wanted, strict=True) if old != new)
            lines.append(f"{f.path}: {changed} (what IndexFile.putKey leaves over its {f.count} entries)")
            h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset = wanted
            f.write_ends()
        prev = f
    return lines


def _fix_slots(index: IndexService) -> list[str]:
    """Point each file's slots at the newest entry hashed to each (:meth:`IndexFile.repair_slots`;
    entries cut afterwards move their slots back along the chains); the recovery lines."""
    lines = []
    for f in index.files:
        wrong = f.repair_slots()
        if wrong:
            lines.append(f"{f.path}:{f.slot_pos(wrong[0])}: pointed {len(wrong)} hash slots at the newest "
                         f"entry hashed to each (a key query walks only its slot's chain)")
    return lines


# -- the driver -------------------------------------------------------------------------


class _IndexPut:
    """Puts the IndexFile entries of walked messages from commitlog offset ``start`` on, a batch at a
    time in commitlog order (the first ``skip`` keys of the message at ``start`` are indexed already);
    ``put`` counts them.

    ``start`` comes from the index (:func:`_recover_index`), which retention leaves behind the
    commitlog: an IndexFile without entries resumes at 0, one whose entries all point into deleted
    files resumes below the first file left.  The walk then starts at that file (:attr:`start` is
    moved up to ``min_offset``), as the broker's dispatch never starts below the commitlog's first
    file (``DefaultMessageStore.start`` and ``ReputMessageService.doReput``, RocketMQ 4.9.7); the
    message whose keys ``skip`` counts is gone with its file.
    """

    def __init__(self, index: IndexService, start: int, skip: int, min_offset: int) -> None:
        self.index, self.start, self.skip = index, start, skip
        if start < min_offset:
            self.start, self.skip = min_offset, 0
        self.put = 0
        self.first = True

    def add(self, batch: Walked) -> None:
        if len(batch) and batch.phy[0] < self.start:    # sorted: only a batch holding the start is cut
            batch = batch.select(batch.phy >= self.start)
        hashes, phys, stamps = batch.index_columns()
        if self.first and len(phys):
            if self.skip and phys[0] == self.start:   # keys of that message indexed already
                hashes, phys, stamps = hashes[self.skip:], phys[self.skip:], stamps[self.skip:]
            self.first = False
        self.put += self.index.put_hashes(hashes, phys, stamps)

    def below(self, ctx: RecoveryContext, walk_start: int) -> None:
        """The messages below the main walk's start (from :attr:`start`), which take a walk of their own."""
        if self.start >= walk_start:
            return
        for batch in walk_batches(ctx.commitlog, self.start, ctx.tags_code, Walk(self.start, self.start)):
            below = batch.phy < walk_start
            self.add(batch.select(below))
            if not below.all():
                break       # the main walk's messages follow


def _index_from(ctx: RecoveryContext, start: int, w: Walk, skip: int) -> _IndexPut:
    """Put the IndexFile entries of the messages from ``start`` on, a walk batch at a time (the
    first ``skip`` keys of the message at ``start`` are indexed already); what was put, from where.

    The messages below the main walk's start take a walk of their own; the main walk's are
    walked again (the commitlog is cut at its end now)."""
    assert ctx.index is not None
    puts = _IndexPut(ctx.index, start, skip, ctx.commitlog.min_offset)
    puts.below(ctx, w.start)
    for batch in walk_batches(ctx.commitlog, w.start, ctx.tags_code, Walk(w.start, w.start), counted=False,
                              known_end=w.end):
        puts.add(batch)
    return puts


def _holds_no_entry(index: IndexService | None) -> bool:
    """Whether the index holds no entry (none built yet, or its files were lost): then what
    :func:`_recover_index` decides and does (nothing, or resetting a damaged empty file's header)
    does not depend on the walk, so it can run before it."""
    return index is not None and all(not len(f.entries) for f in index.files)


def _clamp_checkpoint(ctx: RecoveryContext, newest: int, lines: list[str]) -> None:
    """Set the checkpoint times past the newest message kept (``newest``, its store time) to it,
    ``indexMsgTimestamp`` only past the IndexFiles' ends too; run last, once the index is recovered:
    the ends of the files as recovery left them (a file it removed or cut, whose entries pointed into
    a lost commitlog tail, ended past every message kept, and ``verify`` then reported the
    checkpoint recovery had just written)."""
    # the walk reaches the data's end, so it saw the newest message kept (the broker stores
    # under its put lock, store times follow commitlog order): a checkpoint time past it (a
    # torn tail's, or damage: see checkpoint.check) would make the broker's next abnormal
    # recovery start too late.  indexMsgTimestamp bounds no recovery start (getMinTimestampIndex takes
    # the min): lowered below an IndexFile's end it would make the broker's next crash-start destroy
    # that sound file (IndexService.load), and store times need not ascend, so only past them all
    # (a store opened with messageIndexEnable off has no IndexService, but the files left in index/ are
    # loaded by the broker's next start all the same: their headers are read)
    if ctx.index is not None:
        ends = [f.header.end_timestamp for f in ctx.index.files]
    else:
        ends = end_timestamps(ctx.index_directory) if ctx.index_directory is not None else []
    index_newest = max([newest, *ends])
    for name in ctx.checkpoint.clamp_times(newest, index_newest):
        ctx.checkpoint_changed = True
        shown = index_newest if name == "indexMsgTimestamp" else newest
        lines.append(f"checkpoint: {name} set to the newest message's store time, {shown}")


def recover(ctx: RecoveryContext) -> list[str]:
    """Recover the store in place; returns one line per action taken (empty: nothing to do)."""
    cl = ctx.commitlog
    lines: list[str] = []
    kind = "unclean shutdown (abort file present)" if ctx.abnormal else "clean shutdown"
    if ctx.full:
        kind = "full check"
    if len(cl.log.segments) == 0:
        for key, q in sorted(ctx.queues.items()):
            if q.max_offset > q.min_offset:
                q.truncate(q.min_offset)
                lines.append(f"consumequeue {key[0]}/{key[1]}: dropped every entry (no commitlog)")
        _drop_empty_queue_files(ctx, lines)
        return lines
    lines.extend(move_kept_aside(cl))
    for key, q in sorted(ctx.queues.items()):
        if q.missing is not None:
            # a file missing between two others: the entries from it on are rebuilt from the commitlog
            # (the broker's getMessage skips a missing file's entries: OFFSET_FOUND_NULL, next file)
            path, offset = q.missing
            q.truncate(offset)
            q.missing = None
            lines.append(f"consumequeue {key[0]}/{key[1]}: {path} missing; entries from queue offset "
                         f"{offset} on are rebuilt from the commitlog")
        elif q.hole is not None:
            # no entry in a slot before the queue's last file (zeroed): as a missing file, the entries
            # from it on are rebuilt (4.9.7 ConsumeQueue.recover ends the queue at such a slot and
            # truncateDirtyLogicFiles deletes the files after it, whose entries the broker never
            # dispatches again: it resumes at the other queues' end)
            path, offset = q.hole
            q.truncate(offset)
            pos = offset * CQ_DTYPE.itemsize % q.file_size
            lines.append(f"consumequeue {key[0]}/{key[1]}: {path}:{pos}: no entry at queue offset {offset}, "
                         f"entries after it; entries from it on are rebuilt from the commitlog")
        q.hole = None
    start = cl.min_offset if ctx.full else _start_offset(ctx)
    w = Walk(start=start, end=start)
    dispatch = _Dispatch(ctx, None)
    # an index without entries is rebuilt in the same walk (no second walk over the commitlog)
    puts: _IndexPut | None = None
    cut = 0
    if _holds_no_entry(ctx.index):
        assert ctx.index is not None
        reindex_from, skip, cut = _recover_index(ctx, w, lines)
        puts = _IndexPut(ctx.index, reindex_from, skip, cl.min_offset)
        puts.below(ctx, start)
    walked = 0
    newest = 0
    multi = _MultiDispatch(ctx) if ctx.multi_dispatch else None
    for batch in walk_batches(cl, start, ctx.tags_code, w, threads=ctx.threads):
        walked += len(batch)
        if len(batch):
            newest = max(newest, int(batch.store_timestamp.max()))
        dispatch.add(batch)
        if multi is not None:
            multi.add(batch)
        if puts is not None:
            puts.add(batch)
    lines.append(f"commitlog: {kind}; walked {walked} messages from {start} to {w.end}")
    lines.extend(repair_blanks(cl, w.gaps))
    ctx.whole = []
    for path, pos, length in w.gaps:    # a gap that is one whole message whose header alone is wrong
        gap_seg = next(s for s in cl.log.segments if s.path == path)
        whole = whole_but_misplaced(gap_seg, pos)
        if whole is not None and whole[0] == length:
            ctx.whole.append((path, pos, length, whole[1]))
    mid = {(path, pos) for path, pos, _, _ in ctx.whole}
    ctx.whole += keep_whole_tail(cl, w)
    ctx.left = list(w.gaps) + [(path, pos, length) for path, pos, length, _ in ctx.whole
                               if (path, pos) not in mid]
    if start == cl.min_offset:     # a walk of the whole commitlog saw every file's BLANK
        ctx.blank_entries = [(path, pos, hit) for (path, pos, _), hit
                             in zip(w.blanks, entries_in_ranges(ctx.queues, w.blanks), strict=True) if hit]
    for path, pos, length in w.gaps:
        if (path, pos) not in mid:
            lines.append(
                f"{path}:{pos}: {length} damaged bytes left in place; the messages after them are intact"
            )
    for path, pos, length, why in ctx.whole:
        lines.append(f"{path}:{pos}: a whole message of {length} bytes left in place, its header "
                     f"contradicting its place ({why}): the broker keeps it (it checks none of those fields)")
    lines.extend(cut_tail(cl, w.end, w.zeros))
    if ctx.confirm_offset and w.last >= 0:
        # CommitLog.recoverNormally/recoverAbnormally (rocketmq-all-5.3.0, not in controller mode):
        # setConfirmOffset(lastValidMsgPhyOffset), the start of the last valid message, which
        # StoreCheckpoint.flush writes as confirmPhyOffset
        ctx.checkpoint.confirm_phy_offset = w.last

    for phy, size, offset in dispatch.odd:
        seg = cl.log.segment_for(phy)
        if seg is not None:
            ctx.left.append((seg.path, phy - seg.base, size))
            lines.append(f"{seg.path}:{phy - seg.base}: queue offset {offset} contradicts its queue's "
                         f"other messages; left in place, not dispatched")
    gapped = dispatch.finish(lines)
    ctx.checked_whole = start == cl.min_offset and not ctx.left and not gapped
    _drop_queue_entries_past(ctx, w.end, lines)
    _drop_stale_entries(ctx, dispatch, w, gapped, lines)
    if gapped:
        _drop_damaged_queues(ctx, dispatch, lines)
        rebuild = _Dispatch(ctx, gapped)
        for batch in walk_batches(cl, cl.min_offset, ctx.tags_code, Walk(cl.min_offset, cl.min_offset),
                                  threads=ctx.threads, known_end=w.end):
            rebuild.add(batch)
        rebuild.finish(lines)
    if multi is not None:
        multi.finish(w.end, lines)
    _drop_empty_queue_files(ctx, lines)
    if ctx.full or start == cl.min_offset:
        _zero_past_queue_entries(ctx, lines)

    if puts is not None:
        if puts.put != cut:
            lines.append(f"index: rebuilt {puts.put} entries for messages from commitlog offset {puts.start}")
    elif ctx.index is not None:
        reindex_from, skip, cut = _recover_index(ctx, w, lines)
        puts = _index_from(ctx, reindex_from, w, skip)
        if puts.put != cut:
            lines.append(f"index: rebuilt {puts.put} entries for messages from commitlog offset {puts.start}")
        lines.extend(_fix_begin_offsets(ctx.index))
    if newest:
        _clamp_checkpoint(ctx, newest, lines)
    return lines


def queue_dir(store_dir: str, topic: str, queue_id: int) -> str:
    """``consumequeue/TOPIC/QUEUEID`` under a store."""
    return os.path.join(store_dir, "consumequeue", topic, str(queue_id))
