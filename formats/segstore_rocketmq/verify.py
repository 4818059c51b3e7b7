"""``verify`` for a RocketMQ store: every file checked against the commitlog, one problem per finding.

- commitlog: every record is a valid message (magic, length, body CRC, its stored
  physical offset equals its position) or a BLANK that reaches the end of its
  file; damaged ranges are reported and the walk goes on after them
  (:func:`.recovery.walk`); non-zero bytes after the last message are a torn tail;
- consume queues: every entry points at a message of that topic and queue, with
  the message's size, tags code and queue offset; nothing after the first
  invalid slot; every message that needs an entry has one;
- index files: header counts in range, every entry points at a message carrying
  a key with that hash, no message's keys put twice, chains go backwards, slots point
  at used entries, every message with keys covered by a file (none before, between or after them);
- the checkpoint (:func:`.checkpoint.check`) and the JSON config files.

Problems render as ``path:pos: what was expected, found what``.  Runtime
complexity: ``O(commitlog bytes + entries)``; read-only, thread-safe with readers.
"""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Any

import numpy as np

from segstore import files, overlap, progress
from segstore.arrays import unique
from segstore.errors import CorruptDataError, InvalidTopicError, OffsetOutOfRangeError, SegstoreError, cut
from segstore.javatext import parse_int, parse_long
from segstore.search import Bound, search
from segstore.store import Problem

from . import columnar, multidispatch
from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .checkpoint import FILE_SIZE as CHECKPOINT_SIZE
from .checkpoint import check as check_checkpoint
from .config import SCHEDULE_TOPIC, TOPIC_MAX_LENGTH_V2, is_delivery_time, validate_topic
from .consumequeue import CQ_DTYPE
from .consumequeue_ext import MAX_ADDR as EXT_MAX_ADDR
from .consumequeue_ext import real_offset
from .dirnames import BCQ_DIR, KEPT_ASIDE, has_timer_store
from .indexfile import (
    FIRST_ENTRY,
    HEADER,
    INDEX_COUNT_POS,
    INVALID_INDEX,
    IndexHeader,
    IndexRequest,
    file_size,
    index_key_hash,
    index_keys,
)
from .javacompat import string_hash
from .lifecycle import ABORT_FILE
from .message import PROPERTY_DELAY, Blank, End, RocketMQMessage, decode
from .recovery import Walk, Walked, messages_at, nonzero_extent, sane_links, walk_batches
from .topicconfig import (
    BACKUP_SUFFIX,
    CONSUMER_OFFSET_FILE,
    DELAY_OFFSET_FILE,
    SUBSCRIPTION_GROUP_FILE,
    TOPICS_FILE,
    load_managed,
    loads_fastjson,
    read_consumer_offsets,
    read_delay_offset_file,
    read_subscription_group_file,
    read_topics,
    topic_and_group,
)

CONFIG_DIR = "config"
#: where the tags code sits in a consume-queue entry (after the long offset and int size)
# ignore: numpy types ``fields`` as optional; a structured dtype always has it.
ENTRY_TAGS_POS = CQ_DTYPE.fields["tags_code"][1]  # type: ignore[index]
#: where the IndexFile header's fields sit: endTimestamp after beginTimestamp, beginPhyOffset after both
END_TIME_POS = struct.calcsize(">q")
BEGIN_PHY_POS = struct.calcsize(">qq")


def _damage(path: str, view: memoryview, pos: int, base: int) -> str:
    """What is wrong with the record at ``pos`` (for a damaged range found by the walk)."""
    try:
        record = decode(view, pos, path=path)
    except CorruptDataError as err:
        return err.message
    if isinstance(record, RocketMQMessage):
        why = columnar.contradiction(record.physical_offset, record.queue_id, base + pos)
        if why is None:     # the walk refused its topic
            try:
                validate_topic(record.topic, TOPIC_MAX_LENGTH_V2)
            except InvalidTopicError as err:
                return err.message
        return str(why)
    if isinstance(record, Blank):
        left = len(view) - pos
        return f"expected a BLANK reaching the end of the file ({left} bytes), found size {record.size}"
    assert isinstance(record, End)
    return "expected a message or a BLANK, found zeros before later valid messages"


def _tail_damage(seg, pos: int) -> str:
    """What is wrong with the record at ``pos`` of ``seg`` where the data ends in non-zero bytes (a
    wrong magic code, a bad body CRC, a torn length): a sentence in brackets, or nothing where the
    record starts with zeros (its header unwritten, bytes after it)."""
    view = seg.file.view()
    head = bytes(view[pos:pos + 8])
    del view
    if not any(head):
        return ""
    return f" ({_damage(seg.path, seg.file.view(), pos, seg.base)})"


def _verify_commitlog(store, problems: list[Problem], missing: _MissingEntries, threads: int = 1
                      ) -> tuple[Walk, _Coverage]:
    """The commitlog's problems into ``problems``; messages lacking a consume-queue entry into
    ``missing`` (checked a walk batch at a time).  Returns the walk (its end and gaps) and what
    its lockstep confirmed (:class:`_Coverage`)."""
    cl = store.commitlog
    if cl.empty_tail is not None:
        problems.append(Problem(cl.empty_tail, 0, f"expected a commitlog file of {cl.file_size} bytes "
                                "(mappedFileSizeCommitLog), found 0: a crash left it empty and RocketMQ "
                                "4.5.1 to 5.1.2 refuse to start on it (segstore recover removes it)"))
    for name in files.list_dir(cl.directory):
        if KEPT_ASIDE in name:
            problems.append(Problem(os.path.join(cl.directory, name), 0,
                                    f"expected only commitlog files of {cl.file_size} bytes in commitlog/ "
                                    "(RocketMQ's MappedFileQueue.load refuses any other), found bytes an "
                                    "older recovery cut (segstore recover moves them to .segstore/cut/)"))
    for path, start, end in cl.missing:
        problems.append(Problem(path, None, f"expected commitlog files from physical offset {start} to {end} "
                                "(consecutive names differ by the mapped-file size), found none: the "
                                "messages they held are lost"))
    w = Walk(start=cl.min_offset, end=cl.min_offset)
    cover = _Coverage(store)
    if len(cl.log.segments) == 0:
        return w, cover
    unparsed: list[tuple[int, str]] = []

    def tags_code(msg: RocketMQMessage) -> int:     # called for SCHEDULE_TOPIC_XXXX messages only
        text = msg.properties.get(PROPERTY_DELAY)
        if text and parse_int(text) is None:
            unparsed.append((msg.physical_offset, text))
        return store.tags_code(msg)

    for batch in walk_batches(cl, cl.min_offset, tags_code, w, threads=threads):
        cover.check(batch, missing)
        if len(batch):
            cover.newest = max(cover.newest or 0, int(batch.store_timestamp.max()))
    for phys, text in sorted(unparsed):
        seg = next(s for s in cl.log.segments if s.base <= phys < s.base + cl.file_size)
        problems.append(Problem(seg.path, phys - seg.base, (
            f"expected a {SCHEDULE_TOPIC} message's DELAY as a Java int, found {text!r}: RocketMQ 4.9.7 "
            "CommitLog.checkMessageAndReturnSize's Integer.parseInt fails on it, so the broker's dispatch "
            "stops at this message and its recovery truncates the commitlog here")))
    for path, pos, length in w.gaps:
        seg = next(s for s in cl.log.segments if s.path == path)
        problems.append(
            Problem(path, pos, f"{_damage(path, seg.file.view(), pos, seg.base)} ({length} damaged bytes)")
        )
    for seg in cl.log.segments:
        if seg.base + cl.file_size <= w.end:
            continue
        pos = max(w.end - seg.base, 0)
        stop = nonzero_extent(seg.file, pos, w.zeros.get(seg.path))
        if stop > pos:
            problems.append(
                Problem(
                    seg.path,
                    pos,
                    f"expected a valid message or zeros after the last message, "
                    f"found {stop - pos} bytes of torn or damaged data{_tail_damage(seg, pos)}",
                )
            )
    return w, cover


def _first_nonzero(file: files.MappedFile, pos: int) -> int | None:
    """The position of the first non-zero byte of ``file`` at or after ``pos`` (None: zeros to the end);
    only the file's data ranges are read (a preallocated file's holes are zeros)."""
    return file.first_nonzero(pos)


def _unit(ext, address: int):
    """The extension unit at ``address``, None if missing or malformed (reported by _verify_queue_exts)."""
    if ext is None:
        return None
    try:
        return ext.get(address)
    except SegstoreError:
        return None


def _verify_queue_exts(store, problems: list[Problem]) -> None:
    """Every unit of every ``consumequeue_ext`` file parses (size = 20 + bitMapSize)."""
    for ext in store.queue_exts.values():
        try:
            ext.units()
        except SegstoreError as err:
            problems.append(Problem(err.path or ext.directory, err.pos, err.message))


#: Consume-queue or index entries checked at a time (bounds the messages decoded for them).
ENTRY_CHUNK = 1 << 16


def _mark(bits: np.ndarray, at: np.ndarray) -> None:
    """Set bits ``at`` of a little-endian bit set (a uint8 array)."""
    np.bitwise_or.at(bits, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))


def _mark_range(bits: np.ndarray, start: int, stop: int) -> None:
    """Set bits ``start .. stop`` of a little-endian bit set."""
    if start >= stop:
        return
    first, last = start >> 3, (stop - 1) >> 3
    if first == last:
        bits[first] |= ((1 << (stop - start)) - 1) << (start & 7)
        return
    bits[first] |= (0xFF << (start & 7)) & 0xFF
    bits[first + 1:last] = 0xFF
    bits[last] |= (1 << (((stop - 1) & 7) + 1)) - 1


def _marked(bits: np.ndarray | None, lo: int, n: int) -> np.ndarray:
    """Bits ``lo .. lo + n`` of a bit set (``lo`` a multiple of 8) as bools; all false for None."""
    if bits is None:
        return np.zeros(n, bool)
    return np.unpackbits(bits[lo >> 3:(lo + n + 7) >> 3], bitorder="little", count=n).view(bool)


def _run_bounds(values: np.ndarray, groups: np.ndarray | None = None) -> list[tuple[int, int]]:
    """The first and last index of each run of ``values`` that goes up by one (and, given ``groups``,
    stays in one group), in order; none for no values.  ``O(len(values))`` in numpy, a tuple per run."""
    if not len(values):
        return []
    step = np.diff(values) != 1
    if groups is not None:
        step |= np.diff(groups) != 0
    breaks = np.flatnonzero(step) + 1
    return list(zip(np.r_[0, breaks].tolist(), (np.r_[breaks, len(values)] - 1).tolist(), strict=True))


class _MissingEntries:
    """The walked messages lacking their consume-queue entry, as runs: consecutive offsets of one queue
    (a queue directory deleted lacks all of its entries) are one problem naming how many, their queue
    offsets and commitlog offsets, as ``recover`` rebuilds them (``rebuilt N entries from queue offset
    O``), not a line per message (a lost queue of a million messages printed a million lines).

    Runs are kept as ``[first offset, last offset, first commitlog offset, last commitlog offset]``;
    adding a batch's messages of one queue is ``O(its messages)`` in numpy, a list item per run.
    Not thread-safe (the walk's batches are checked in turn)."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, int], list[list[int]]] = {}

    def add(self, key: tuple[str, int], offsets: np.ndarray, phys: np.ndarray) -> None:
        """Messages of queue ``key`` without an entry, in commitlog order."""
        runs = self.runs.setdefault(key, [])
        for a, b in _run_bounds(offsets):
            first = int(offsets[a])
            if runs and runs[-1][1] + 1 == first:
                runs[-1][1], runs[-1][3] = int(offsets[b]), int(phys[b])
            else:
                runs.append([first, int(offsets[b]), int(phys[a]), int(phys[b])])

    def problems(self, store) -> list[Problem]:
        """One problem per run, in commitlog order of their first messages."""
        found = []
        for (topic, qid), runs in self.runs.items():
            cq = store.queues.get((topic, qid))
            # a queue without a directory: where its directory belongs (positions are queue bytes there too)
            where = (cq.directory if cq is not None
                     else os.path.join(store.path, "consumequeue", topic, str(qid)))
            for first, last, first_phy, last_phy in runs:
                if first == last:
                    what = (f"expected an entry for the message at commitlog offset {first_phy} "
                            f"({topic}/{qid} offset {first}), found none")
                else:
                    what = (f"expected entries for the {last - first + 1} messages at commitlog offsets "
                            f"{first_phy} to {last_phy} ({topic}/{qid} offsets {first} to {last}), found "
                            "none: consumers of the queue miss them (segstore recover rebuilds them "
                            "from the commitlog)")
                found.append((first_phy, Problem(where, first * CQ_DTYPE.itemsize, what)))
        found.sort(key=lambda item: item[0])
        return [problem for _, problem in found]


class _Coverage:
    """One pass over the walk, a batch at a time, against the queues and the index (a lockstep).

    Whether each walked message that needs a consume-queue entry has one: the entry at its
    queue offset exists and points at a valid message (or has a missing extension unit,
    reported with the entry).  And which consume-queue and IndexFile entries the batch
    confirms: an entry pointing at a walked message that it describes exactly (topic,
    queue, offset, size and tags code; an IndexFile entry whose message carries its hash,
    with sane links) has nothing to report, so the entry checks afterwards decode only the
    messages of the entries not confirmed (none in a sound store).  The queues' and the
    index's files are read where the batch's entries are (no copy of a queue); what is kept
    is one bit per entry.
    """

    def __init__(self, store) -> None:
        self.store = store
        self.layout: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, list]] = {}
        #: (topic, queue id, consume-queue file number) -> bits of its entries confirmed
        self.queue_bits: dict[tuple[str, int, int], np.ndarray] = {}
        index_files = store.index.files if store.index is not None else []
        #: per index file: bits of its entries (``f.entries``) confirmed
        self.index_bits: list[np.ndarray] = [np.zeros((len(f.entries) + 7) >> 3, np.uint8)
                                             for f in index_files]
        #: the newest store time of the messages walked (None: none)
        self.newest: int | None = None
        #: the index files holding entries, and the commitlog offsets of their first and last entries'
        #: messages; None where the store has no index file (no index kept, or a commitlog-only copy:
        #: nothing to compare)
        held = [f for f in index_files if len(f.entries)]
        self.index_held: list | None = held if index_files else None
        self.index_firsts = np.array([int(f.entries["phy_offset"][0]) for f in held], np.int64)
        self.index_lasts = np.array([int(f.entries["phy_offset"][-1]) for f in held], np.int64)
        #: the messages at the files' ends (first and last entries): how many entries all files hold
        #: of each, against its key count (a message whose keys a lost file held in part)
        self.index_edges: dict[int, int] = {}
        for f in held:
            phys = f.entries["phy_offset"]
            for phy in {int(phys[0]), int(phys[-1])}:
                self.index_edges[phy] = self.index_edges.get(phy, 0) + int(np.count_nonzero(phys == phy))
        #: messages with keys no index file covers, per gap (``i``: before ``index_held[i]``, the last:
        #: after every file): [how many, the first's offset, the last's offset]
        self.unindexed: dict[int, list[int]] = {}
        self.batch_topics = store.topic_configs.batch_cq_topics()

    def _files(self, key: tuple[str, int]):
        got = self.layout.get(key)
        if got is None:
            segs = self.store.queues[key].segment_files()
            got = self.layout[key] = (np.array([s.first_offset for s in segs], np.int64),
                                      np.array([len(s) for s in segs], np.int64), segs)
        return got

    def queue_confirmed(self, key: tuple[str, int], j: int) -> np.ndarray | None:
        """The bits of consume-queue file ``j`` of queue ``key`` the walk confirmed (None: none)."""
        return self.queue_bits.get((*key, j))

    def check(self, batch: Walked, missing: _MissingEntries) -> None:
        self._check_queues(batch, missing)
        self._confirm_index(batch)
        self._count_unindexed(batch)

    def _count_unindexed(self, batch: Walked) -> None:
        """Count the batch's messages with keys that no index file's entries cover: the broker indexes
        every one as it dispatches it (4.9.7 ``IndexService.buildIndex``; a full file rolls to a new
        one mid-message, so consecutive files leave no message out), so one before the first file's
        first entry, between two files' or after the last file's last lost its entries (a file deleted,
        a crash before the flush) and key lookups miss it."""
        if self.index_held is None or not len(batch) or self._inside_one_file(int(batch.phy[0]),
                                                                              int(batch.phy[-1])):
            return
        counts = np.diff(batch.key_offsets)
        keyed, counts = batch.phy[counts > 0], counts[counts > 0]
        file_at = np.searchsorted(self.index_firsts, keyed, side="right") - 1
        covered = file_at >= 0
        if len(self.index_lasts):
            covered &= keyed <= self.index_lasts[np.maximum(file_at, 0)]
        gaps = file_at + 1
        # a file's first or last message with fewer entries than keys lost the rest with the file
        # before (its gap) or after it
        for j in np.flatnonzero(covered & np.isin(keyed, list(self.index_edges))).tolist():
            phy = int(keyed[j])
            if self.index_edges[phy] < int(counts[j]):
                covered[j] = False
                gaps[j] = file_at[j] if phy == int(self.index_firsts[file_at[j]]) else file_at[j] + 1
        if covered.all():
            return
        gaps, at = gaps[~covered], keyed[~covered]
        for gap in unique(gaps).tolist():
            mine = at[gaps == gap]
            found = self.unindexed.setdefault(gap, [0, int(mine.min()), int(mine.max())])
            found[0] += len(mine)
            found[1], found[2] = min(found[1], int(mine.min())), max(found[2], int(mine.max()))

    def _inside_one_file(self, lo: int, hi: int) -> bool:
        """Whether every message from commitlog offset ``lo`` to ``hi`` lies inside one index file's
        entries, strictly between its first and last entries' messages, and before any later file's:
        then :meth:`_count_unindexed` counts none of them (the usual batch, in ``O(files)``)."""
        j = int(np.searchsorted(self.index_firsts, lo, side="right")) - 1
        return (j >= 0 and hi <= int(self.index_lasts[j])
                and (j + 1 == len(self.index_firsts) or hi < int(self.index_firsts[j + 1]))
                and not any(lo <= edge <= hi for edge in self.index_edges))

    def unindexed_problems(self, directory: str) -> list[Problem]:
        """One problem at ``directory`` (``index/``) per run of messages with keys the index files do
        not cover (:meth:`_count_unindexed`)."""
        held, problems = self.index_held or [], []
        for gap, (count, first, last) in sorted(self.unindexed.items()):
            if not held:
                found = "no entry"
            elif gap == len(held):
                found = f"its last entry at commitlog offset {int(self.index_lasts[-1])}"
            elif gap == 0:
                found = (f"the first entry of its first file, {os.path.basename(held[0].path)}, at commitlog "
                         f"offset {int(self.index_firsts[0])} (an index file before it was lost)")
            else:
                found = (f"no file between {os.path.basename(held[gap - 1].path)} (last entry at commitlog "
                         f"offset {int(self.index_lasts[gap - 1])}) and {os.path.basename(held[gap].path)} "
                         f"(first at {int(self.index_firsts[gap])}; an index file between them was lost)")
            where = f"from commitlog offset {first} on" if gap == len(held) else \
                f"at commitlog offsets {first} to {last}"
            problems.append(Problem(directory, None, (
                f"expected index entries for the {count} messages with keys {where} (IndexService.buildIndex "
                f"indexes each), found {found}: key lookups miss them (the broker does not rebuild a lost "
                "index file; segstore recover puts them)")))
        return problems

    def _check_queues(self, batch: Walked, missing: _MissingEntries) -> None:
        store = self.store
        if not store.queues:
            # a commitlog-only store (a backup): nothing is inconsistent; readers scan, recover builds them
            return
        ok = ~batch.has_queue_entry(self.batch_topics)
        groups = batch.groups()
        for (number, qid), mine in groups.items():
            key = (batch.topics[number], qid)
            if key not in store.queues:
                continue
            mine = mine[~ok[mine]]
            offsets = batch.queue_offset[mine]
            firsts, lens, segs = self._files(key)
            if self._run_confirmed(key, batch, mine, offsets, firsts, lens, segs):
                ok[mine] = True
                continue
            k = np.searchsorted(firsts, offsets, side="right") - 1
            if len(firsts):
                inside = (k >= 0) & (offsets - firsts[np.maximum(k, 0)] < lens[np.maximum(k, 0)])
            else:       # a queue without files (emptied for a rebuild): no entry at all
                inside = np.zeros(len(k), bool)
            phys = np.full(len(mine), -1, np.int64)
            stored = np.zeros(len(mine), np.int64)
            sizes = np.zeros(len(mine), np.int64)
            for j in unique(k[inside]).tolist():
                sel = inside & (k == j)
                rows = segs[j].entries[offsets[sel] - firsts[j]]
                phys[sel], stored[sel], sizes[sel] = rows["offset"], rows["tags_code"], rows["size"]
            seen = inside & (phys == batch.phy[mine])     # the entry points at this message (walked)
            # the entry is exactly this message's (an extension address is checked with its unit later)
            exact = (seen & (sizes == batch.size[mine]) & (stored == batch.tags_code[mine])
                     & (stored > EXT_MAX_ADDR))
            for j in unique(k[exact]).tolist():
                sel = exact & (k == j)
                slot = (*key, j)
                bits = self.queue_bits.get(slot)
                if bits is None:
                    bits = self.queue_bits[slot] = np.zeros((int(lens[j]) + 7) >> 3, np.uint8)
                _mark(bits, offsets[sel] - firsts[j])
            other = np.flatnonzero(inside & ~seen)
            if len(other):      # an entry pointing elsewhere: seen if at a valid message
                _, _, found = messages_at(store.commitlog, phys[other], store.tags_code, {},
                                          store.commitlog.min_offset, store.commitlog.end)
                ext = store.queue_exts.get(key)
                for i in np.flatnonzero(~found & (stored[other] <= EXT_MAX_ADDR)).tolist():
                    found[i] = _unit(ext, int(stored[other][i])) is None
                seen[other] = found
            ok[mine] = seen
        lost = ~ok
        if not lost.any():      # a sound batch: nothing to group
            return
        for (number, qid), mine in groups.items():
            mine = mine[lost[mine]]
            if len(mine):
                missing.add((batch.topics[number], qid), batch.queue_offset[mine], batch.phy[mine])

    def _run_confirmed(self, key: tuple[str, int], batch: Walked, mine: np.ndarray, offsets: np.ndarray,
                       firsts: np.ndarray, lens: np.ndarray, segs: list) -> bool:
        """The usual case, in slices: the messages ``mine`` hold consecutive queue offsets inside one
        consume-queue file whose entries are exactly theirs (then all are marked confirmed)."""
        if not len(mine):
            return True
        start = int(offsets[0])
        if not np.array_equal(offsets, np.arange(start, start + len(mine))):
            return False
        j = int(np.searchsorted(firsts, start, side="right")) - 1
        if j < 0 or start - int(firsts[j]) + len(mine) > int(lens[j]):
            return False
        lo = start - int(firsts[j])
        if not batch.confirms_queue_run(segs[j].entries[lo:lo + len(mine)], mine):
            return False
        slot = (*key, j)
        bits = self.queue_bits.get(slot)
        if bits is None:
            bits = self.queue_bits[slot] = np.zeros((int(lens[j]) + 7) >> 3, np.uint8)
        _mark_range(bits, lo, lo + len(mine))
        return True

    def _confirm_index(self, batch: Walked) -> None:
        """Mark the IndexFile entries pointing into the batch's range that hash a key of the walked
        message they point at, with a time diff >= 0 and a previous entry below their own."""
        if not self.index_bits or not len(batch):
            return
        lo_phy, hi_phy = int(batch.phy[0]), int(batch.phy[-1])
        for f, bits in zip(self.store.index.files, self.index_bits, strict=True):
            entries = f.entries
            if not len(entries):
                continue
            column = entries["phy_offset"]
            lo = search(column, lo_phy, Bound.SMALLEST_UPPER)
            hi = search(column, hi_phy + 1, Bound.SMALLEST_UPPER, lo)
            if lo >= hi:
                continue
            chunk = entries[lo:hi]
            if batch.confirms_index_run(chunk, lo):     # the usual case: the batch's keys, in put order
                _mark_range(bits, lo, hi)
                continue
            phys = chunk["phy_offset"].astype(np.int64)
            links = sane_links(chunk, lo)
            at, found = batch.find(phys)
            good = found & links
            good[good] = batch.carries_hash(at[good], chunk["hash"][good].astype(np.int64))
            _mark(bits, lo + np.flatnonzero(good))


class _IntoLostFiles:
    """Entries of one consume-queue or index file pointing into commitlog files lost between others
    (``CommitLog.missing``) or at or past the commitlog's data end (its last files or tail lost), as runs
    of consecutive slots: a lost file of a million messages left a line per entry (the basic fixture's
    middle file: 336 lines beside the one naming the file); each run is one problem, how many, their
    offsets and commitlog offsets, as ``recover`` names the entries it drops past the end.  Other
    entries pointing at no valid message stay a problem each.  ``O(entries added)`` in numpy
    (:func:`_run_bounds`, as :class:`_MissingEntries`), a list item per run; not thread-safe (one
    file's entries are checked in turn)."""

    def __init__(self, missing: list[tuple[str, int, int]], end: int) -> None:
        self.starts = np.array([start for _, start, _ in missing], np.int64)
        self.ends = np.array([stop for _, _, stop in missing], np.int64)
        self.end = end
        #: [first slot, last slot, first commitlog offset, last, the lost range's index (len(starts):
        #: past the end)]
        self.runs: list[list[int]] = []

    def take(self, slots: np.ndarray, phys: np.ndarray) -> np.ndarray:
        """Keep the entries (``slots`` ascending, ``phys`` their offsets) pointing into a lost range or
        past the end; returns which they were."""
        if not len(slots):
            return np.zeros(0, bool)
        past = phys >= self.end
        if len(self.starts):
            gap = np.searchsorted(self.starts, phys, side="right") - 1
            inside = (gap >= 0) & (phys < self.ends[np.maximum(gap, 0)]) & ~past
        else:
            gap, inside = np.zeros(len(phys), np.int64), np.zeros(len(phys), bool)
        gap[past] = len(self.starts)
        inside |= past
        kept = np.flatnonzero(inside)
        slots, phys, gap = slots[kept], phys[kept], gap[kept]
        for a, b in _run_bounds(slots, gap):
            first, g = int(slots[a]), int(gap[a])
            last = self.runs[-1] if self.runs else None
            if last is not None and last[1] + 1 == first and last[4] == g:
                last[1], last[3] = int(slots[b]), int(phys[b])
            else:
                self.runs.append([first, int(slots[b]), int(phys[a]), int(phys[b]), g])
        return inside

    def _said(self, one: str, many: str, after: tuple[str, str], shift: int = 0) -> list[tuple[int, str]]:
        """``(first slot, text)`` per run: ``one`` or ``many`` formatted with ``first`` and ``last`` (the
        slots plus ``shift``), ``n``, ``first_phy``, ``last_phy`` and ``lost`` (the range's words);
        ``after`` ends a run of several: its first a run into lost files, its second one past the end."""
        said = []
        for first, last, first_phy, last_phy, g in self.runs:
            past = g == len(self.starts)
            lost = (f"at or past the commitlog's end {self.end}" if past else
                    f"in the commitlog files lost from physical offset {int(self.starts[g])} to "
                    f"{int(self.ends[g])}")
            words = {"first": first + shift, "last": last + shift, "n": last - first + 1,
                     "first_phy": first_phy, "last_phy": last_phy, "lost": lost}
            said.append((first, one.format(**words) if first == last
                         else many.format(**words) + after[past]))
        return said

    def index_problems(self, f) -> list[Problem]:
        """One problem per run of index file ``f``'s entries (numbered from 1) pointing into lost files."""
        rebuilt = "segstore recover cuts the index there and rebuilds it from the commitlog"
        return [Problem(f.path, f.entry_pos(first), text) for first, text in self._said(
            "expected index entry {first} to point at a valid message, found commitlog offset {first_phy}, "
            "{lost}",
            "expected index entries {first} to {last} to point at valid messages, found {n} pointing into "
            "commitlog offsets {first_phy} to {last_phy}, {lost}",
            (f": their messages are gone with those files ({rebuilt})", f" ({rebuilt})"))]

    def problems(self, path: str, topic: str, qid: int, first_offset: int) -> list[Problem]:
        """One problem per run of a consume-queue file's entries (``first_offset``: its first slot's)."""
        queue = f"{topic}/{qid}".replace("{", "{{").replace("}", "}}")
        return [Problem(path, first * CQ_DTYPE.itemsize, text) for first, text in self._said(
            f"expected the entry of {queue} offset {{first}} to point at a valid message, found commitlog "
            "offset {first_phy}, {lost}",
            f"expected the entries of {queue} offsets {{first}} to {{last}} to point at valid messages, "
            "found {n} pointing into commitlog offsets {first_phy} to {last_phy}, {lost}",
            (": their messages are gone with those files",
             ": the broker's next start drops them (4.9.7 CommitLog.recoverNormally and recoverAbnormally: "
             "truncateDirtyLogicFiles), as segstore recover does"), first_offset)]


def _verify_queues(store, w: Walk, cover: _Coverage, problems: list[Problem]) -> None:
    """Every entry the walk did not confirm (``cover``) against the message at its offset (decoded
    where it lies), vectorized per :data:`ENTRY_CHUNK` entries; the entries found wrong (and
    extension addresses, which are few) are then reported one by one."""
    topics: dict[str, int] = {}
    for directory, ids in store.unloadable_queues:
        problems.append(_unloadable_topic_dir(directory, ids))
    for (topic, qid), cq in sorted(store.queues.items()):
        if cq.empty_tail is not None:
            problems.append(Problem(cq.empty_tail, 0, f"expected a consume-queue file of {cq.file_size} "
                                    "bytes (mappedFileSizeConsumeQueue), found 0: a crash left it empty and "
                                    "RocketMQ before 5.1.3 refuses to start on it (segstore recover deletes "
                                    "it)"))
        last = cq.log.active
        if last is not None and len(last) == 0:
            problems.append(Problem(last.file.path, 0, "expected an entry in slot 0 of the last "
                                    "consume-queue file, found none: the broker reads it as an entry at "
                                    "offset 0, size 0 (segstore recover deletes the file)"))
        ext = store.queue_exts.get((topic, qid))
        for j, seg in enumerate(cq.segment_files()):
            if seg.base % cq.file_size:
                _misnamed_queue_file(cq, seg, problems)
            entries = seg.entries
            confirmed = cover.queue_confirmed((topic, qid), j)
            lost = _IntoLostFiles(store.commitlog.missing, w.end)
            for lo in range(0, len(entries), ENTRY_CHUNK):
                chunk = entries[lo:lo + ENTRY_CHUNK]
                todo = np.flatnonzero(~_marked(confirmed, lo, len(chunk)))
                if len(todo):
                    _check_entries(store, w, topics, topic, qid, cq, ext, seg, lo + todo, chunk[todo],
                                   problems, lost)
            problems.extend(lost.problems(seg.file.path, topic, qid, seg.first_offset))
            at_byte = _first_nonzero(seg.file, len(seg) * CQ_DTYPE.itemsize)
            if at_byte is not None:
                at_byte -= at_byte % CQ_DTYPE.itemsize
                problems.append(
                    Problem(
                        seg.file.path,
                        len(seg) * CQ_DTYPE.itemsize,
                        f"expected zeros after the last valid entry, found data at byte {at_byte}",
                    )
                )


def _unloadable_topic_dir(directory: str, ids: list[int]) -> Problem:
    """A topic directory of consume queues whose name is not UTF-8, once (not each entry as a stranger's:
    no topic is named so): RocketMQ 4.9.7 ``DefaultMessageStore.loadConsumeQueue`` lists it through
    ``java.io.File``, which decodes the name, and that text's path names no directory
    (:func:`.dirnames.queue_dirs`), so the broker loads none of its queues; neither does segstore.  The
    messages its entries point at are checked against their own topics' queues (entries missing there
    are problems of their own)."""
    name = repr(os.fsencode(os.path.basename(directory)))[1:]
    listed = ", ".join(map(str, ids))
    return Problem(directory, None, (
        f"expected a topic directory name that is UTF-8 text, found the bytes {name}, holding queue"
        f"{'s' if len(ids) > 1 else ''} {listed}: the broker loads none of them (4.9.7 "
        "DefaultMessageStore.loadConsumeQueue: java.io.File decodes the name, a U+FFFD for each malformed "
        "sequence, and finds no directory of that text), nor does segstore; rename it to the topic its "
        "entries are of, or remove it (segstore recover rebuilds a topic's missing entries from the "
        "commitlog)"))


def _misnamed_queue_file(cq, seg, problems: list[Problem]) -> None:
    """A consume-queue file named by no multiple of the file size (renamed): RocketMQ 4.9.7 loads it
    at the offset its name says (``MappedFileQueue.load``), so ``findMappedFileByOffset`` finds no file
    for the offsets its place should hold, and ``getMessage`` skips them (``OFFSET_FOUND_NULL``, the
    next file); readers here take it at the slot its name falls in, so its entries check out."""
    base = seg.base - seg.base % cq.file_size
    first = base // CQ_DTYPE.itemsize
    last = first + cq.file_size // CQ_DTYPE.itemsize - 1
    problems.append(Problem(seg.file.path, None, (
        f"expected a consume-queue file name that is a multiple of {cq.file_size} "
        f"(mappedFileSizeConsumeQueue), found {os.path.basename(seg.file.path)}: the broker finds no "
        f"file for {cq.topic}/{cq.queue_id} offsets {first} to {last} and skips them (segstore recover "
        f"rebuilds them from the commitlog)")))


def _check_entries(store, w: Walk, topics: dict[str, int], topic: str, qid: int, cq, ext, seg,
                   slots: np.ndarray, rows: np.ndarray, problems: list[Problem],
                   lost: _IntoLostFiles) -> None:
    """Entries ``rows`` (in slots ``slots``, ascending) of one consume-queue file against their messages;
    those pointing into lost commitlog files (live ones, without an extension address) go to ``lost``."""
    phys = rows["offset"].astype(np.int64)
    stored = rows["tags_code"].astype(np.int64)
    resolved = np.asarray(store.entry_tags_codes(topic, qid, rows["tags_code"]), np.int64)
    claimed = seg.first_offset + slots.astype(np.int64)
    walked, at, found = messages_at(store.commitlog, phys, store.tags_code, topics, w.start, w.end)
    number = topics.get(topic, -1)
    addressed = stored <= EXT_MAX_ADDR
    wrong = np.zeros(len(rows), bool)
    tags_only = np.zeros(len(rows), bool)      # right but for the tags code
    f = found
    wrong[f] = ((walked.topic[at[f]] != number) | (walked.queue_id[at[f]] != qid)
                | (walked.queue_offset[at[f]] != claimed[f]) | (walked.size[at[f]] != rows["size"][f]))
    tags_only[f] = ~wrong[f] & (walked.tags_code[at[f]] != resolved[f])
    if topic == SCHEDULE_TOPIC and tags_only.any():
        _accept_undelayed(store, phys, resolved, tags_only)
        # the delivery time under the broker's own messageDelayLevel, which the store does not record
        t = np.flatnonzero(tags_only)
        tags_only[t] = ~is_delivery_time(resolved[t], walked.store_timestamp[at[t]])
    wrong |= tags_only
    for i in np.flatnonzero(wrong).tolist():
        # an entry of a multi-dispatch (LMQ) queue points at a message of another topic by design
        if _multi_dispatched(store, int(phys[i]), topic, qid, int(claimed[i]), int(rows["size"][i]),
                             int(resolved[i])):
            wrong[i] = False
    live = claimed >= cq.min_offset      # older entries expired with their commitlog file (retention)
    gone = ~found & live & ~addressed
    gone[gone] = lost.take(slots[gone].astype(np.int64), phys[gone])
    for i in np.flatnonzero((~found | wrong | addressed) & live & ~gone).tolist():
        pos = int(slots[i]) * CQ_DTYPE.itemsize
        phy, size, tags = int(phys[i]), int(rows["size"][i]), int(resolved[i])
        expected = f"{topic}/{qid} offset {int(claimed[i])}"
        m = int(at[i]) if found[i] else None
        if addressed[i]:
            unit = _unit(ext, int(stored[i]))
            if unit is None or (m is not None and unit.store_timestamp != walked.store_timestamp[m]):
                shown = "none" if unit is None else f"store time {unit.store_timestamp}"
                problems.append(Problem(
                    seg.file.path, pos + ENTRY_TAGS_POS,
                    f"expected the extension unit of {expected} at consumequeue_ext address "
                    f"{int(stored[i])} (real offset {real_offset(int(stored[i]))})"
                    + (f" with store time {int(walked.store_timestamp[m])}" if m is not None else "")
                    + f", found {shown}"))
                continue
        if m is None:
            problems.append(Problem(seg.file.path, pos,
                                    f"expected the entry of {expected} to point at a valid message, "
                                    f"found commitlog offset {phy}"))
            continue
        if not wrong[i]:
            continue
        # the entry is what lies at its position; what it should be comes from the message it points at
        problems.append(Problem(
            seg.file.path, pos,
            f"expected the entry of the message at commitlog offset {phy}: "
            f"({walked.topics[int(walked.topic[m])]}, {int(walked.queue_id[m])}, "
            f"{int(walked.queue_offset[m])}, size {int(walked.size[m])}, "
            f"tags code {int(walked.tags_code[m])}), "
            f"found ({topic}, {qid}, {int(claimed[i])}, size {size}, tags code {tags})"))


def _accept_undelayed(store, phys: np.ndarray, resolved: np.ndarray, tags_only: np.ndarray) -> None:
    """Clear ``tags_only`` (entries right but for the tags code) for the ``SCHEDULE_TOPIC_XXXX``
    entries holding the message's plain tags code (its TAGS hash, 0 without) instead of its delivery
    time.  RocketMQ 4.9.7 ``DefaultMessageStore.load`` runs ``recover`` (after a crash
    ``CommitLog.recoverAbnormally``, which dispatches the messages again) before
    ``ScheduleMessageService.load`` parses the delay levels, so ``CommitLog.checkMessageAndReturnSize``
    caps the level at ``getMaxDelayLevel()``, 0, and keeps the tags code it had.  segstore's own
    recover writes the delivery time.  Few entries (delay messages whose code differs): each
    message is decoded once.  ``O(such entries)``."""
    for i in np.flatnonzero(tags_only).tolist():
        try:
            tags = store.commitlog.read(int(phys[i]), check_crc=False).tags
        except SegstoreError:
            continue
        if int(resolved[i]) == (string_hash(tags) if tags else 0):
            tags_only[i] = False


def _multi_dispatched(store, phy: int, topic: str, qid: int, offset: int, size: int, tags: int) -> bool:
    """Whether the message at ``phy`` is entry ``offset`` of ``topic``/``qid`` by multi-dispatch (RocketMQ
    4.9.7 ``ConsumeQueue.multiDispatchLmqQueue``: the message's size and tags code, the queue and offset
    its ``INNER_MULTI_DISPATCH``/``INNER_MULTI_QUEUE_OFFSET`` name).  One decode, for entries the
    columns found wrong only."""
    try:
        msg = store.commitlog.read(phy)
    except (CorruptDataError, OffsetOutOfRangeError):
        return False
    return store.tags_code(msg) == tags and multidispatch.is_entry(msg, topic, qid, offset, size)


def _index_structure(store) -> tuple[list[list[Problem]], list[Problem]]:
    """Each index file's slot and chain problems (:func:`_check_chains`), and the keys put again
    (:func:`_verify_index_repeats`): the checks of the index files alone.  Thread-safe (reads)."""
    index = store.index
    if index is None:
        return [], []
    chains = []
    for f in index.files:
        found: list[Problem] = []
        _check_chains(f, found)
        chains.append(found)
    repeats: list[Problem] = []
    _verify_index_repeats(store, repeats)
    return chains, repeats


def _bad_slots(f) -> np.ndarray:
    """The slots of index file ``f`` that point past its entries."""
    return f.slots_past_entries()


def _verify_index(store, w: Walk, cover: _Coverage, problems: list[Problem], chains: list[list[Problem]]
                  ) -> None:
    """Every index file's header, slots and the entries the walk did not confirm (``cover``); each
    file's chain problems (``chains``, :func:`_index_structure`) at their place."""
    index = store.index
    if index is None:
        return
    problems.extend(cover.unindexed_problems(index.directory))
    for path, message in index.refused:
        problems.append(Problem(path, None, message))
    size = file_size(index.slot_num, index.index_num)
    for path, actual in index.longer:
        problems.append(Problem(path, size, (
            f"expected an index file of {size} bytes ({index.slot_num} slots, {index.index_num} entries), "
            f"found {actual} bytes: the broker maps only the first {size} (IndexFile's MappedFile), the "
            f"{actual - size} past them are never read (segstore recover cuts them, keeping them in "
            ".segstore/cut/index/)")))
    for path in index.strays:
        name = os.path.basename(path)
        # 4.9.7 IndexService.load: new IndexFile -> MappedFile.init parses the name (Long.parseLong);
        # the NumberFormatException is logged and the file skipped, any number is opened as an IndexFile
        kind = files.not_regular(path)
        broker = ("the broker's IndexService.load skips it (its name is no number), logging an error at "
                  "each start" if parse_long(name) is None else
                  f"the broker's IndexService.load stops there (new IndexFile throws on {kind}), loading "
                  "none of the files after it" if kind is not None else
                  "the broker's IndexService.load opens it as an index file, growing a short one to its "
                  "size, and queries it")
        problems.append(Problem(path, None, (
            f"expected only index files named by their creation time (17 digits) in index/, found {name!r}: "
            f"{broker} (segstore recover moves it to .segstore/cut/index/)")))
    prev_phy = -1
    for f, confirmed, chained in zip(index.files, cover.index_bits, chains, strict=True):
        h = f.header
        stored_count = IndexHeader.unpack(f.file.view(0, HEADER.size)).index_count
        if stored_count > f.index_num:
            problems.append(
                Problem(
                    f.path, INDEX_COUNT_POS, f"expected indexCount <= {f.index_num}, found {stored_count}"
                )
            )
        entries = f.entries
        lost = _IntoLostFiles(store.commitlog.missing, w.end)
        for lo in range(0, len(entries), ENTRY_CHUNK):
            chunk = entries[lo:lo + ENTRY_CHUNK]
            todo = np.flatnonzero(~_marked(confirmed, lo, len(chunk)))
            if len(todo):
                _check_index_entries(store, w, f, lo + todo, chunk[todo], problems, lost)
        problems.extend(lost.index_problems(f))
        bad_slots = _bad_slots(f)
        if len(bad_slots):
            s = int(bad_slots[0])
            problems.append(
                Problem(
                    f.path,
                    f.slot_pos(s),
                    f"expected slot {s} to hold an entry below {h.index_count}, found {int(f.slots[s])}",
                )
            )
        problems.extend(chained)
        prev_phy = _check_order(f, prev_phy, problems)
        _check_header_times(store, w, f, problems)
        if len(entries) and int(entries["phy_offset"][0]) != h.begin_phy_offset:
            # IndexFile.putKey sets beginPhyOffset with the file's first entry
            first = int(entries["phy_offset"][0])
            problems.append(Problem(f.path, BEGIN_PHY_POS, f"expected beginPhyOffset {first} (the first "
                                                           f"entry's), found {h.begin_phy_offset}"))
        if len(entries) and int(entries["phy_offset"][-1]) != h.end_phy_offset:
            problems.append(
                Problem(
                    f.path,
                    24,
                    f"expected endPhyOffset {int(entries['phy_offset'][-1])} "
                    f"(the last entry's), found {h.end_phy_offset}",
                )
            )


def _verify_index_repeats(store, problems: list[Problem]) -> None:
    """Keys of a message put again: the entries of one message lie together in the broker's put
    order (``indexfile.index_keys``; a message's keys may go on in the next file), and RocketMQ
    4.9.7 after an abnormal start indexes the message at the last file's ``endPhyOffset`` again
    (``IndexService.buildIndex`` skips only the messages below it), so ``queryMessage`` returns it
    twice.  Only the runs holding a hash twice (rare: a key listed twice in ``KEYS``) read their
    message (:func:`_key_runs`).  ``O(entries)``."""
    index = store.index
    if index is None:
        return
    carry_phy, carry = -1, np.zeros(0, np.int64)          # the run the entries before ended with
    for i, f in enumerate(index.files):
        runs, carry_phy, carry = _key_runs(f.entries, carry_phy, carry, ENTRY_CHUNK)
        for phy, run, before, start in runs:
            _check_key_run(store, index.files[:i + 1], phy, run, before, start, problems)


#: A run of one message's entries: its offset, its hashes from its start (in this file or the ones
#: before) to the end of its part in one chunk, how many of them lie before that part, and where
#: that part starts in its file.
KeyRun = tuple[int, np.ndarray, int, int]


def _key_runs(entries: np.ndarray, carry_phy: int, carry: np.ndarray, chunk: int = ENTRY_CHUNK
              ) -> tuple[list[KeyRun], int, np.ndarray]:
    """The runs of one message's entries among one index file's ``entries`` (as stored) that hold a
    hash twice, chunk by ``chunk`` entries (a run goes on over chunks and files: ``carry``, the hashes
    of the run the entries before ended with at offset ``carry_phy``), and the run these entries end
    with (``carry_phy`` and ``carry`` for the next file).  One pass in C over the entries where they
    lie (``index_key_runs``: 12 ms of a 1M-message verify in numpy) where the offsets never go down
    and no run is long; else, and without C, :func:`_key_runs_py`, its reference.  ``O(entries)``."""
    if not len(entries):
        return [], carry_phy, carry
    found = None
    if columnar._speedups is not None:
        found = columnar._speedups.index_key_runs(entries, carry_phy, np.ascontiguousarray(carry, np.int64),
                                                  chunk)
    if found is None:
        return _key_runs_py(entries, carry_phy, carry, chunk)
    segments, tail = found
    phys, hashes = entries["phy_offset"], entries["hash"]

    def run_hashes(rs: int, e: int) -> np.ndarray:
        own = hashes[max(rs, 0):e].astype(np.int64)
        return np.concatenate([carry[len(carry) + rs:], own]) if rs < 0 else own

    runs = [(int(phys[e - 1]), run_hashes(rs, e), s - rs, s)
            for s, e, rs in np.frombuffer(segments, np.int64).reshape(-1, 3).tolist()]
    return runs, int(phys[-1]), run_hashes(tail, len(entries))


def _key_runs_py(entries: np.ndarray, carry_phy: int, carry: np.ndarray, chunk: int = ENTRY_CHUNK
                 ) -> tuple[list[KeyRun], int, np.ndarray]:
    """:func:`_key_runs` in numpy: each chunk's entries (after the carried run where the chunk goes
    on with it) by :func:`_put_twice`; memory bounded by ``chunk``."""
    runs: list[KeyRun] = []
    for lo in range(0, len(entries), chunk):
        part = entries[lo:lo + chunk]
        phys, hashes = part["phy_offset"].astype(np.int64), part["hash"].astype(np.int64)
        lead = carry if phys[0] == carry_phy else np.zeros(0, np.int64)
        all_phys = np.concatenate([np.full(len(lead), carry_phy, np.int64), phys])
        all_hashes = np.concatenate([lead, hashes])
        for phy in _put_twice(all_phys, all_hashes).tolist():
            runs.append((phy, all_hashes[all_phys == phy], len(lead) if phy == carry_phy else 0,
                         lo + int(np.flatnonzero(phys == phy)[0])))
        tail = hashes[phys == phys[-1]]
        carry = np.concatenate([lead, tail]) if len(tail) == len(phys) and len(lead) else tail
        carry_phy = int(phys[-1])
    return runs, carry_phy, carry


#: The longest run of one message's entries :func:`_put_twice` compares by shifts (longer: sorted).
SHIFTED_RUN = 8


def _put_twice(phys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """The offsets (ascending, once each) holding one hash twice among ``phys``' entries.  Entries
    in commitlog order (the broker's put order) hold each message's entries together, in runs of a
    few: each entry is compared with the few before it, ``O(e * run)``; entries out of order or
    longer runs are sorted by (offset, hash) instead, ``O(e log e)``.  Both give the same set."""
    if len(phys) < 2:
        return np.zeros(0, np.int64)
    step = np.diff(phys)
    if not (step >= 0).all():
        return _put_twice_sorted(phys, hashes)
    starts = np.flatnonzero(step)
    runs = np.diff(starts, prepend=-1, append=len(phys) - 1)
    longest = int(runs.max())
    if longest > SHIFTED_RUN:
        return _put_twice_sorted(phys, hashes)
    twice = np.zeros(len(phys), bool)
    for d in range(1, longest):
        twice[d:] |= (phys[d:] == phys[:-d]) & (hashes[d:] == hashes[:-d])
    return unique(phys[twice])     # (np.unique's first call imports numpy.ma: 9-14 ms)


def _put_twice_sorted(phys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """:func:`_put_twice` by a sort of the entries by (offset, hash)."""
    order = np.lexsort((hashes, phys))
    twice = (np.diff(phys[order]) == 0) & (np.diff(hashes[order]) == 0)
    return unique(phys[order][1:][twice])


def _check_key_run(store, files, phy: int, run: np.ndarray, before: int, first: int,
                   problems: list[Problem]) -> None:
    """The entries ``run`` of the message at ``phy`` (``before`` of them in earlier chunks or files,
    the rest from ``first`` on in the last of ``files``' entries) against its keys in put order: the
    first entry out of that order is named once, by the first part of the run holding a hash twice
    (a part before it holding none was not checked; one holding one named it already)."""
    try:
        msg = store.commitlog.read(phy)
    except SegstoreError:
        return          # the entry checks report an entry that points at no valid message
    keys = index_keys(IndexRequest(msg.topic, phy, msg.store_timestamp, msg.properties.get("UNIQ_KEY"),
                                   msg.properties.get("KEYS"), msg.sys_flag))
    own = np.array([index_key_hash(k) for k in keys], np.int64)
    wrong = np.flatnonzero(np.concatenate([run[:len(own)] != own[:len(run)],
                                           np.ones(max(0, len(run) - len(own)), bool)]))
    if not len(wrong) or (wrong[0] < before and len(unique(run[:before])) < before):
        return
    at, k = first + int(wrong[0]) - before, len(files) - 1    # where in files[k].entries: below 0,
    while at < 0 and k > 0:                                     # in a file before (the run goes on
        k -= 1                                                  # from it)
        at += len(files[k].entries)
    f, n = files[k], at + 1
    problems.append(Problem(f.path, f.entry_pos(n), f"expected the {len(own)} key(s) of the message at {phy} "
                                                    f"indexed once, found index entry {n} put again"))


def _check_chains(f, problems: list[Problem]) -> None:
    """The slots and chains of one index file as the broker's ``IndexFile.putKey`` leaves them
    (:meth:`IndexFile.chain_faults <segstore.indexes.keyhash.IndexFile.chain_faults>`): a query walks a
    slot's chain only, so a slot or a link that points elsewhere hides keys from ``queryMessage``.
    Slots pointing past the entries are left to :func:`_bad_slots`' report."""
    problems.extend(Problem(f.path, pos, message) for pos, message in f.chain_faults())


def _check_order(f, prev_phy: int, problems: list[Problem]) -> int:
    """Index entries are put in commitlog order (dispatch order, keys of one message together): the
    first entry whose offset is below the one before (in this or an earlier file) is reported.
    Returns the last entry's offset (``prev_phy`` for the next file)."""
    phys = f.entries["phy_offset"]      # compared where they lie, ENTRY_CHUNK at a time: int64 copies
    if not len(phys):                   # of millions of entries were pages zeroed for one comparison
        return prev_phy
    down = 0 if int(phys[0]) < prev_phy else None
    for lo in range(1, len(phys) if down is None else 0, ENTRY_CHUNK):
        hi = min(len(phys), lo + ENTRY_CHUNK)
        hits = np.flatnonzero(phys[lo:hi] < phys[lo - 1:hi - 1])
        if len(hits):
            down = lo + int(hits[0])
            break
    if down is not None:
        n = FIRST_ENTRY + down
        before = prev_phy if down == 0 else int(phys[down - 1])
        problems.append(Problem(f.path, f.entry_pos(n),
                                f"expected index entry {n} to point at or after the entry before it "
                                f"(commitlog offset {before}), found {int(phys[down])}"))
    return int(phys[-1])


def _check_header_times(store, w: Walk, f, problems: list[Problem]) -> None:
    """``beginTimestamp``/``endTimestamp`` are the store times of the first and last entry's messages
    (``IndexFile.putKey``); the broker picks the files a time-bounded query reads by them
    (``isTimeMatched``) and computes each entry's time from the begin time."""
    entries = f.entries
    if not len(entries):
        return
    ends = np.array([entries["phy_offset"][0], entries["phy_offset"][-1]], np.int64)
    walked, at, found = messages_at(store.commitlog, ends, store.tags_code, {}, w.start, w.end)
    h = f.header
    for pos, name, held, i in ((0, "beginTimestamp", h.begin_timestamp, 0),
                               (END_TIME_POS, "endTimestamp", h.end_timestamp, 1)):
        stored = int(walked.store_timestamp[at[i]]) if found[i] else held
        if stored != held:
            which = "first" if i == 0 else "last"
            problems.append(Problem(f.path, pos, f"expected {name} {stored} (the store time of the {which} "
                                                 f"entry's message), found {held}"))


def _check_index_entries(store, w: Walk, f, at_slots: np.ndarray, entries: np.ndarray,
                         problems: list[Problem], lost: _IntoLostFiles) -> None:
    """Entries ``entries`` (at ``at_slots`` of ``f.entries``, ascending) against the messages they
    point at; those pointing into lost commitlog files go to ``lost`` (by entry number)."""
    numbers = at_slots + 1
    phys = entries["phy_offset"].astype(np.int64)
    hashes = entries["hash"].astype(np.int64)
    diffs, prevs = entries["time_diff"].astype(np.int64), entries["prev"].astype(np.int64)
    walked, at, found = messages_at(store.commitlog, phys, store.tags_code, {}, w.start, w.end)
    carried = found.copy()
    carried[found] = walked.carries_hash(at[found], hashes[found])
    links_bad = found & ((diffs < 0) | (prevs < INVALID_INDEX) | (prevs >= numbers))
    gone = ~found
    gone[gone] = lost.take(numbers[gone].astype(np.int64), phys[gone])
    carried |= gone
    for i in np.flatnonzero(~carried | links_bad).tolist():
        n, phy, hsh = int(numbers[i]), int(phys[i]), int(hashes[i])
        pos = f.entry_pos(n)
        if 0 <= phy < store.commitlog.min_offset:  # expired: its commitlog file was deleted (retention)
            continue
        if not found[i]:
            problems.append(Problem(f.path, pos, f"expected index entry {n} to point at a valid message, "
                                                 f"found commitlog offset {phy}"))
            continue
        if not carried[i]:
            m = int(at[i])
            own = sorted(set(walked.key_hashes[walked.key_offsets[m]:walked.key_offsets[m + 1]].tolist()))
            problems.append(Problem(f.path, pos, f"expected index entry {n} to hash a key of the message "
                                                 f"at {phy} ({own}), found {hsh}"))
        if links_bad[i]:
            problems.append(Problem(f.path, pos, f"expected a time diff >= 0 and a previous entry below "
                                                 f"{n}, found {int(diffs[i])} and {int(prevs[i])}"))


def _verify_files(store, problems: list[Problem], newest: int | None) -> None:
    path = os.path.join(store.path, CHECKPOINT_FILE)
    found = files.not_regular(path)
    if found not in (None, "nothing"):
        # StoreCheckpoint opens it with RandomAccessFile: the broker does not start
        problems.append(Problem(path, None, f"expected a checkpoint file of {CHECKPOINT_SIZE} bytes, "
                                            f"found {found}"))
    elif files.exists(path):
        problems.extend(Problem(path, pos, msg) for pos, msg in
                        check_checkpoint(files.read_bytes(path), path=path, newest=newest))
    config_dir = os.path.join(store.path, CONFIG_DIR)
    # the files the broker's managers read (and segstore reads or rewrites) as their classes do
    readers: dict[str, Any] = {
        TOPICS_FILE: read_topics, CONSUMER_OFFSET_FILE: read_consumer_offsets,
        DELAY_OFFSET_FILE: read_delay_offset_file, SUBSCRIPTION_GROUP_FILE: read_subscription_group_file}
    names = files.list_dir(config_dir)
    managed = {n for n in names if n.endswith(".json")}
    managed |= {n.removesuffix(BACKUP_SUFFIX) for n in names if n.endswith(".json" + BACKUP_SUFFIX)}
    for name in sorted(managed):
        cpath = os.path.join(config_dir, name)
        reader = readers.get(name, lambda path: loads_fastjson(files.read_text(path), path))
        decoded = _config_problems(cpath, reader)
        problems.extend(decoded)
        if name == CONSUMER_OFFSET_FILE and not decoded:
            problems.extend(_stray_offset_keys(cpath))


def _stray_offset_keys(path: str) -> list[Problem]:
    """The ``offsetTable`` keys of ``consumerOffset.json`` (the file the broker loads: it or its
    ``.bak``) that are no ``topic@group`` (:func:`.topicconfig.topic_and_group`): the broker loads and
    keeps them, but no consumer group's offsets are under them, so ``consumers`` skips them too."""
    loaded = load_managed(path, read_consumer_offsets)
    if loaded is None:
        return []
    return [Problem(path, None, f"expected offsetTable keys as topic@group (4.9.7 ConsumerOffsetManager "
                                f"commits and queries no other), found {cut(name)}: no consumer group "
                                f"reads its offsets")
            for name in loaded[1] if topic_and_group(name) is None]


def _config_problems(path: str, reader: Any) -> list[Problem]:
    """What is wrong with a config file as the broker's ``ConfigManager.load`` (rocketmq-all-4.9.7) takes
    it: a main file it cannot decode (a problem even where its ``.bak`` serves instead: the next persist
    copies the damaged file over that ``.bak``), or, with the main file missing or empty, the ``.bak``.
    A sound main file is read once."""
    failed: SegstoreError | None = None
    if files.exists(path) and files.file_size(path):
        try:
            reader(path)
        except SegstoreError as err:
            failed = err
        else:
            return []
    try:
        load_managed(path, reader)      # the main file failed or is empty: what the .bak gives
    except SegstoreError as err:
        return [Problem(err.path or path, err.pos, err.message)]
    if failed is None:
        return []
    return [Problem(path, failed.pos, f"{failed.message} (the broker loads {os.path.basename(path)}"
                                      f"{BACKUP_SUFFIX} instead)")]


def verify_store(store, threads: int = 1) -> list[Problem]:
    """Every problem found in a :class:`~segstore_rocketmq.store.RocketMQStore` (empty: clean); the
    commitlog decoded on ``threads`` threads (the same problems with any number)."""
    problems: list[Problem] = []
    missing = _MissingEntries()
    for cq in store.queues.values():    # a reader's open took the early files of each queue as full
        cq.count_every_file()
    # the index files' own structure (chains, slots, keys put again) needs no walk: with several
    # threads it is checked beside the walk (numpy over the files, mostly without the GIL)
    structure = overlap.beside(lambda: _index_structure(store)) if threads > 1 else None
    try:
        with progress.task("verify", len(store.commitlog.log.segments) * store.commitlog.file_size):
            w, cover = _verify_commitlog(store, problems, missing, threads)
        _verify_queues(store, w, cover, problems)
        problems.extend(missing.problems(store))
        _verify_queue_exts(store, problems)
    except BaseException:
        if structure is not None:
            with contextlib.suppress(BaseException):    # done before the store can change; this error first
                structure()
        raise
    chains, repeats = structure() if structure is not None else _index_structure(store)
    _verify_index(store, w, cover, problems, chains)
    problems.extend(repeats)
    _verify_files(store, problems, cover.newest)
    _verify_5x_files(store, problems)
    _verify_shutdown(store, problems)
    return problems


def _verify_5x_files(store, problems: list[Problem]) -> None:
    """RocketMQ 5.x files beside the 4.x layout: batch consume queues and the timer store (the modules
    that read them load only where their files are, as for ``info``: a 4.x store's verify paid ~1 ms
    importing them)."""
    if files.is_dir(os.path.join(store.path, BCQ_DIR)):
        from . import batchconsumequeue

        for queue in batchconsumequeue.load(store.path).values():
            problems.extend(queue.problems(store.commitlog.end))
    if has_timer_store(store.path):
        from . import timerstore

        problems.extend(timerstore.verify(store.path))


def _verify_shutdown(store, problems: list[Problem]) -> None:
    """An ``abort`` file seen by a reader: the last writer crashed (or still runs).  A store open for
    append has its own (``DefaultMessageStore.start`` creates it), so only readers report it."""
    abort = os.path.join(store.path, ABORT_FILE)
    if store.mode == "r" and files.exists(abort):
        problems.append(Problem(abort, None, (
            "expected no abort file (a clean shutdown removes it), found one: the last writer did not "
            "shut down cleanly or is still running; `segstore recover` repairs what it left")))
