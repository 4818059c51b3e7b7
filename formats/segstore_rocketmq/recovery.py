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
- at a bad message the walk looks for the next valid message (same file, then
  later files).  If there is one, the damaged bytes are left in place and
  reported, and nothing after them is lost; only a torn *tail* (no valid message
  after it) is cut, and the cut bytes are first saved beside the file
  (:func:`segstore.files.save_aside`);
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from segstore import files, progress
from segstore.errors import CorruptDataError, OffsetOutOfRangeError
from segstore.search import Bound, search

from .checkpoint import Checkpoint
from .commitlog import END_FILE_MIN_BLANK_LENGTH, KEPT_ASIDE, CommitLog, CommitLogFile
from .consumequeue import CQ_DTYPE, ConsumeQueue
from .consumequeue_ext import is_ext_address
from .indexfile import IndexFile, IndexRequest, IndexService, index_key_hashes, index_keys
from .message import (
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

#: A clean shutdown re-checks the last this-many commitlog files (``recoverNormally``).
NORMAL_RECOVERY_FILES = 3
#: segstore's own directory at the store root (``segstore.layouts`` keeps its indexes there too)
SEGSTORE_DIR = ".segstore"
#: under it, the bytes recovery cut, by the directory they were cut from
CUT_DIR = "cut"
#: The first three bytes of both message magics (0xDAA320A7 and 0xDAA320AB), at byte 4 of a message.
MAGIC_PREFIX = (MESSAGE_MAGIC & 0xFFFFFFFF).to_bytes(4, "big")[:3]
MAGIC_POS = PREFIX.size // 2
#: Bytes searched at a time when looking for the next valid message.
SEARCH_WINDOW = 1 << 24


@dataclass(slots=True)
class Walked:
    """What recovery keeps of one valid message (no body)."""

    phy: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    sys_flag: int
    store_timestamp: int
    uniq_key: str | None
    keys: str | None
    tags_code: int

    @property
    def has_queue_entry(self) -> bool:
        """Prepared and rollback transaction messages get no consume-queue entry."""
        return self.sys_flag & SYSFLAG_TRANSACTION_MASK not in (
            SYSFLAG_TRANSACTION_PREPARED,
            SYSFLAG_TRANSACTION_ROLLBACK,
        )

    def index_request(self) -> IndexRequest:
        return IndexRequest(
            self.topic, self.phy, self.store_timestamp, self.uniq_key, self.keys, self.sys_flag
        )


@dataclass(slots=True)
class Walk:
    """The result of walking the commitlog: valid messages, the data end, the damaged ranges skipped."""

    start: int
    end: int
    messages: list[Walked] = field(default_factory=list)
    gaps: list[tuple[str, int, int]] = field(default_factory=list)  # (path, pos, length)


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


# -- walking the commitlog -----------------------------------------------------------


def _valid_at(seg: CommitLogFile, view: memoryview, pos: int) -> RocketMQMessage | Blank | End | None:
    """The record at ``pos`` if it is a valid message (at its own offset), BLANK or end; None if damaged."""
    try:
        record = decode(view, pos, path=seg.path)
    except CorruptDataError:
        return None
    if isinstance(record, RocketMQMessage):
        return record if record.physical_offset == seg.base + pos else None
    if isinstance(record, Blank):
        size = len(view)
        return record if record.size >= END_FILE_MIN_BLANK_LENGTH and pos + record.size == size else None
    return record


def _next_valid_in_file(seg: CommitLogFile, view: memoryview, pos: int) -> int | None:
    """Position of the first valid message after ``pos`` in this file, or None.

    Candidates are found by searching for the magic bytes (C speed, a window at
    a time); each is confirmed by a full decode with CRC and its stored offset.
    """
    size = len(view)
    start = pos + 1
    while start < size:
        stop = min(size, start + SEARCH_WINDOW + MAGIC_POS + len(MAGIC_PREFIX))
        if not np.frombuffer(view, dtype=np.uint8, count=stop - start, offset=start).any():
            start += SEARCH_WINDOW  # unwritten space: nothing to find (no copy)
            continue
        chunk = bytes(view[start:stop])
        at = chunk.find(MAGIC_PREFIX)
        while at >= 0:
            candidate = start + at - MAGIC_POS
            if candidate > pos and isinstance(_valid_at(seg, view, candidate), RocketMQMessage):
                return candidate
            at = chunk.find(MAGIC_PREFIX, at + 1)
        start += SEARCH_WINDOW
    return None


def next_valid_message(segs: list[CommitLogFile], i: int, pos: int) -> tuple[int, int] | None:
    """``(file index, position)`` of the next valid message after ``segs[i]`` at ``pos``, or None."""
    found = _next_valid_in_file(segs[i], segs[i].file.view(), pos)
    if found is not None:
        return i, found
    for j in range(i + 1, len(segs)):
        view = segs[j].file.view()
        if isinstance(_valid_at(segs[j], view, 0), RocketMQMessage):
            return j, 0
        found = _next_valid_in_file(segs[j], view, 0)
        if found is not None:
            return j, found
    return None


def walk(
    commitlog: CommitLog, start: int, tags_code: Callable[[RocketMQMessage], int], *, past_zeros: bool = True
) -> Walk:
    """Walk every file from the one holding ``start`` (a message boundary), validating each record.

    After damaged bytes the walk goes on at the next valid message, if any.  With
    ``past_zeros`` it also looks past unwritten (zero) space for later messages
    (holes a power loss can leave); without, zeros end the data, as for the broker.
    Runtime complexity: ``O(bytes walked)`` (decode and CRC per message), plus
    ``O(file size)`` to look past zeros.
    """
    segs = [s for s in commitlog.log.segments if s.base + commitlog.file_size > start]
    result = Walk(start=start, end=start)
    i, pos = 0, (start - segs[0].base) if segs else 0
    while i < len(segs):
        seg = segs[i]
        view = seg.file.view()
        record = _valid_at(seg, view, pos) if pos < len(view) else End()
        if isinstance(record, RocketMQMessage):
            result.messages.append(
                Walked(
                    record.physical_offset,
                    record.size,
                    record.topic,
                    record.queue_id,
                    record.queue_offset,
                    record.sys_flag,
                    record.store_timestamp,
                    record.properties.get("UNIQ_KEY"),
                    record.properties.get("KEYS"),
                    tags_code(record),
                )
            )
            pos += record.size
            result.end = seg.base + pos
            continue
        if isinstance(record, Blank):
            i, pos = i + 1, 0
            result.end = seg.base + commitlog.file_size
            progress.advance(commitlog.file_size)  # a whole commitlog file walked (verify, recover)
            continue
        # damaged bytes, or the end of the data in this file: is there a valid message later?
        if isinstance(record, End) and not past_zeros:
            break
        nxt = next_valid_message(segs, i, pos)
        if nxt is None:
            break
        j, q = nxt
        gap_end = segs[j].base + q
        result.gaps.append((seg.path, pos, gap_end - seg.base - pos))
        progress.advance((j - i) * commitlog.file_size)
        i, pos = j, q
    if i < len(segs):
        progress.advance(commitlog.file_size)  # the last file: its data ends before its end
    return result


def nonzero_extent(view: memoryview, pos: int) -> int:
    """One past the last non-zero byte at or after ``pos`` (``pos`` if none).

    Scans a window at a time (``np.any``), so memory stays bounded on 1 GiB files.
    """
    size = len(view)
    last = pos
    for lo in range(pos, size, SEARCH_WINDOW):
        chunk = np.frombuffer(view, dtype=np.uint8, count=min(SEARCH_WINDOW, size - lo), offset=lo)
        if chunk.any():
            last = lo + int(np.flatnonzero(chunk)[-1]) + 1
    return last


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


def cut_tail(commitlog: CommitLog, end: int) -> list[str]:
    """Cut the commitlog at ``end``, saving every non-zero byte cut in :func:`aside_dir` first."""
    lines = []
    for seg in list(commitlog.log.segments):
        if seg.base + commitlog.file_size <= end:
            continue
        pos = max(end - seg.base, 0)
        view = seg.file.view()
        stop = nonzero_extent(view, pos)
        if stop > pos:
            kept = files.save_aside(seg.path, pos, view[pos:stop], into=aside_dir(commitlog.directory))
            lines.append(f"{seg.path}:{pos}: cut {stop - pos} bytes of torn tail, saved in {kept}")
        del view
        # only the non-zero bytes need zeroing: the rest of a preallocated file stays sparse
        seg.wrote = stop
    commitlog.truncate(end)
    commitlog.set_end(end)
    return lines


def _start_offset(ctx: RecoveryContext) -> int:
    """Where the walk starts: the broker's file, moved back to cover what the queues and index lack."""
    cl = ctx.commitlog
    segs = list(cl.log.segments)
    if ctx.abnormal:
        chosen = segs[0]
        limit = ctx.checkpoint.min_timestamp
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
    seg.file.write(pos - seg.base, row.tobytes())
    q.log.mark_dirty(seg)


def _dispatch_queues(
    ctx: RecoveryContext, messages: list[Walked], only: set[tuple[str, int]] | None, lines: list[str]
) -> set[tuple[str, int]]:
    """Check, rewrite or append walked messages' entries; returns the queues missing earlier entries."""
    gapped: set[tuple[str, int]] = set()
    pending: dict[tuple[str, int], list[Walked]] = {}
    fixed: dict[tuple[str, int], int] = {}
    for m in messages:
        if not m.has_queue_entry:
            continue
        key = (m.topic, m.queue_id)
        if (only is not None and key not in only) or key in gapped:
            continue
        q = ctx.queues.get(key)
        if q is None:
            q = ctx.queues[key] = ctx.open_queue(*key)
        waiting = pending.setdefault(key, [])
        next_offset = q.max_offset + len(waiting)
        if m.queue_offset == next_offset:
            waiting.append(m)
        elif m.queue_offset > next_offset:
            gapped.add(key)
        elif m.queue_offset >= q.min_offset and m.queue_offset < q.max_offset:
            row = _queue_row(q, m.queue_offset)
            want = (m.phy, m.size, m.tags_code)
            got = (int(row["offset"]), int(row["size"]), int(row["tags_code"])) if row is not None else want
            if is_ext_address(got[2]):      # a consumequeue_ext address (filter-enabled broker): keep it
                got = (*got[:2], m.tags_code)
            if got != want:
                _write_row(q, m.queue_offset, np.array([want], dtype=CQ_DTYPE))
                fixed[key] = fixed.get(key, 0) + 1
    for key, waiting in pending.items():
        if key in gapped or not waiting:
            continue
        rows = np.array([(m.phy, m.size, m.tags_code) for m in waiting], dtype=CQ_DTYPE)
        ctx.queues[key].append_array(rows)
        lines.append(
            f"consumequeue {key[0]}/{key[1]}: rebuilt {len(rows)} entries from queue offset "
            f"{waiting[0].queue_offset}"
        )
    for key, n in sorted(fixed.items()):
        lines.append(f"consumequeue {key[0]}/{key[1]}: rewrote {n} entries that did not match their message")
    return gapped


def _drop_queue_entries_past(ctx: RecoveryContext, end: int, lines: list[str]) -> None:
    """Drop entries pointing at or past the commitlog end (the broker's ``truncateDirtyLogicFiles``)."""
    for (topic, queue_id), q in sorted(ctx.queues.items()):
        lo, hi = q.min_offset, q.max_offset
        # entries are in commitlog order: binary search for the first at or past the end
        while lo < hi:
            mid = (lo + hi) // 2
            row = _queue_row(q, mid)
            if row is not None and int(row["offset"]) < end:
                lo = mid + 1
            else:
                hi = mid
        if lo < q.max_offset:
            dropped = q.max_offset - lo
            q.truncate(lo)
            lines.append(
                f"consumequeue {topic}/{queue_id}: dropped {dropped} entries at or past the "
                f"commitlog end {end}"
            )


def _drop_empty_queue_files(ctx: RecoveryContext, lines: list[str]) -> None:
    """Delete consume-queue files left without an entry at the end of a queue: the broker's load
    would take their zero slot 0 as an entry (offset 0, size 0) and dispatch the commitlog again."""
    for key, q in sorted(ctx.queues.items()):
        for path in q.drop_empty_tail():
            lines.append(f"consumequeue {key[0]}/{key[1]}: deleted {path}, which held no entry")


def _drop_damaged_queues(ctx: RecoveryContext, gapped: set[tuple[str, int]], lines: list[str]) -> None:
    for key in sorted(gapped):
        q = ctx.queues[key]
        if q.max_offset > q.min_offset:
            lines.append(
                f"consumequeue {key[0]}/{key[1]}: earlier entries missing, rebuilding the queue "
                f"from the start of the commitlog"
            )
        q.truncate(q.min_offset)


# -- index ----------------------------------------------------------------------------


def _first_bad_entry(
    index: IndexService, walked: dict[int, Walked], walk_start: int, end: int
) -> tuple[int, int] | None:
    """``(file number, entry number)`` of the first index entry that cannot be trusted, or None.

    Bad: offsets going backwards, at or past the end, or (from the walk start on)
    not the offset of a valid message carrying a key with that hash.
    """
    prev_phy = -1
    for fi, f in enumerate(index.files):
        entries = f.entries
        phys = entries["phy_offset"].astype(np.int64)
        hashes = entries["hash"].astype(np.int64)
        order_ok = np.empty(len(phys), dtype=bool)
        if len(phys):
            order_ok[0] = phys[0] >= prev_phy
            order_ok[1:] = phys[1:] >= phys[:-1]
        bad = ~order_ok | (phys >= end) | (phys < 0)
        for n in np.flatnonzero(~bad & (phys >= walk_start)).tolist():
            m = walked.get(int(phys[n]))
            if m is None or int(hashes[n]) not in index_key_hashes(index_keys(m.index_request())).tolist():
                bad[n] = True
                break
        hits = np.flatnonzero(bad)
        if len(hits):
            return fi, int(hits[0]) + 1
        if len(phys):
            prev_phy = int(phys[-1])
    return None


def _store_time(ctx: RecoveryContext, walked: dict[int, Walked], phy: int) -> int:
    if phy in walked:
        return walked[phy].store_timestamp
    try:
        return ctx.commitlog.read(phy).store_timestamp
    except (CorruptDataError, OffsetOutOfRangeError):
        return 0


def _resume_point(index: IndexService, fi: int) -> tuple[int, int]:
    """Where re-indexing resumes when file ``fi`` is left empty: ``(commitlog offset, keys to skip)``.

    An emptied file starts where the previous one ended, as the broker's
    ``getAndCreateLastIndexFile`` creates it; the previous file's last message
    may have had more keys than fitted (``IndexService.putKey`` rolls mid-message),
    so that message is resumed after the keys the previous file holds.
    """
    if fi == 0:
        return index.files[0].header.begin_phy_offset, 0
    prev = index.files[fi - 1].header
    held = index.files[fi - 1].entries["phy_offset"]
    return prev.end_phy_offset, int(np.count_nonzero(held == prev.end_phy_offset))


def _recover_index(ctx: RecoveryContext, w: Walk, lines: list[str]) -> tuple[int, int, int]:
    """Cut the index at its first bad entry.

    Returns the commitlog offset to re-index from, how many keys of the message
    there are indexed already (see :func:`_resume_point`), and how many trusted
    entries were cut: the entries of the last kept message are always put again,
    since a crash may have indexed only some of its keys (the same bytes result
    when it had them all).
    """
    index = ctx.index
    assert index is not None
    walked = {m.phy: m for m in w.messages}
    bad = _first_bad_entry(index, walked, w.start, w.end)
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
        keep = search(kept_phys, kept_phys[-1], Bound.SMALLEST_UPPER)
    if bad is not None:
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
        end_time = _store_time(ctx, walked, int(f.entries["phy_offset"][keep - 1]))
        f.truncate(keep, end_time)
        # the message at the new end is indexed whole: resume after it
        return index.end_phy_offset + 1, 0, trusted - keep
    # the file's first message is put again from the file's first entry on (it is not indexed
    # anywhere else unless it began in the previous file)
    start, skip = _resume_point(index, fi)
    prev = index.files[fi - 1].header if fi else None
    f.truncate(0, 0, *((prev.end_phy_offset, prev.end_timestamp) if prev else (0, 0)))
    return start, skip, trusted


# -- the driver -------------------------------------------------------------------------


def _walk_from(ctx: RecoveryContext, start: int, w: Walk) -> Iterator[Walked]:
    """Messages from ``start``: from the main walk when it covers them, else a second walk."""
    if start < w.start:
        extra = walk(ctx.commitlog, start, ctx.tags_code)
        yield from (m for m in extra.messages if m.phy < w.start)
    yield from (m for m in w.messages if m.phy >= start)


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
    start = cl.min_offset if ctx.full else _start_offset(ctx)
    w = walk(cl, start, ctx.tags_code, past_zeros=ctx.abnormal or ctx.full)
    lines.append(f"commitlog: {kind}; walked {len(w.messages)} messages from {start} to {w.end}")
    for path, pos, length in w.gaps:
        lines.append(
            f"{path}:{pos}: {length} damaged bytes left in place; the messages after them are intact"
        )
    lines.extend(cut_tail(cl, w.end))

    gapped = _dispatch_queues(ctx, w.messages, None, lines)
    _drop_queue_entries_past(ctx, w.end, lines)
    if gapped:
        _drop_damaged_queues(ctx, gapped, lines)
        full = walk(cl, cl.min_offset, ctx.tags_code)
        _dispatch_queues(ctx, full.messages, gapped, lines)
    _drop_empty_queue_files(ctx, lines)

    if ctx.index is not None:
        reindex_from, skip, cut = _recover_index(ctx, w, lines)
        requests = [m.index_request() for m in _walk_from(ctx, reindex_from, w)]
        resumed = bool(requests) and requests[0].phy_offset == reindex_from
        put = ctx.index.put_batch(requests, skip_keys=skip if resumed else 0)
        if put != cut:
            lines.append(f"index: rebuilt {put} entries for messages from commitlog offset {reindex_from}")
    return lines


def queue_dir(store_dir: str, topic: str, queue_id: int) -> str:
    """``consumequeue/TOPIC/QUEUEID`` under a store."""
    return os.path.join(store_dir, "consumequeue", topic, str(queue_id))
