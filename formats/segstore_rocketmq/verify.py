"""``verify`` for a RocketMQ store: every file checked against the commitlog, one problem per finding.

- commitlog: every record is a valid message (magic, length, body CRC, its stored
  physical offset equals its position) or a BLANK that reaches the end of its
  file; damaged ranges are reported and the walk goes on after them
  (:func:`.recovery.walk`); non-zero bytes after the last message are a torn tail;
- consume queues: every entry points at a message of that topic and queue, with
  the message's size, tags code and queue offset; nothing after the first
  invalid slot; every message that needs an entry has one;
- index files: header counts in range, every entry points at a message carrying
  a key with that hash, chains go backwards, slots point at used entries;
- the checkpoint (:func:`.checkpoint.check`) and the JSON config files.

Problems render as ``path:pos: what was expected, found what``.  Runtime
complexity: ``O(commitlog bytes + entries)``; read-only, thread-safe with readers.
"""

from __future__ import annotations

import os

import numpy as np

from segstore import files, progress
from segstore.errors import CorruptDataError, SegstoreError
from segstore.store import Problem

from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .checkpoint import check as check_checkpoint
from .commitlog import KEPT_ASIDE
from .consumequeue import CQ_DTYPE
from .consumequeue_ext import MAX_ADDR as EXT_MAX_ADDR
from .consumequeue_ext import real_offset
from .indexfile import HEADER, INDEX_COUNT_POS, INVALID_INDEX, IndexHeader
from .lifecycle import ABORT_FILE
from .message import Blank, End, RocketMQMessage, decode
from .recovery import SEARCH_WINDOW, Walked, nonzero_extent, walk
from .topicconfig import loads_fastjson

CONFIG_DIR = "config"
#: where the tags code sits in a consume-queue entry (after the long offset and int size)
# ignore: numpy types ``fields`` as optional; a structured dtype always has it.
ENTRY_TAGS_POS = CQ_DTYPE.fields["tags_code"][1]  # type: ignore[index]


def _damage(path: str, view: memoryview, pos: int, base: int) -> str:
    """What is wrong with the record at ``pos`` (for a damaged range found by the walk)."""
    try:
        record = decode(view, pos, path=path)
    except CorruptDataError as err:
        return err.message
    if isinstance(record, RocketMQMessage):
        return (
            f"expected a message stored at physical offset {base + pos}, "
            f"found one claiming offset {record.physical_offset}"
        )
    if isinstance(record, Blank):
        left = len(view) - pos
        return f"expected a BLANK reaching the end of the file ({left} bytes), found size {record.size}"
    assert isinstance(record, End)
    return "expected a message or a BLANK, found zeros before later valid messages"


def _verify_commitlog(store, problems: list[Problem]) -> Walked:
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
    if len(cl.log.segments) == 0:
        return Walked.empty()
    w = walk(cl, cl.min_offset, store.tags_code)
    for path, pos, length in w.gaps:
        seg = next(s for s in cl.log.segments if s.path == path)
        problems.append(
            Problem(path, pos, f"{_damage(path, seg.file.view(), pos, seg.base)} ({length} damaged bytes)")
        )
    for seg in cl.log.segments:
        if seg.base + cl.file_size <= w.end:
            continue
        pos = max(w.end - seg.base, 0)
        stop = nonzero_extent(seg.file.view(), pos, seg.path)
        if stop > pos:
            problems.append(
                Problem(
                    seg.path,
                    pos,
                    f"expected a valid message or zeros after the last message, "
                    f"found {stop - pos} bytes of torn or damaged data",
                )
            )
    return w.messages


def _first_nonzero(file: files.MappedFile, pos: int) -> int | None:
    """The position of the first non-zero byte of ``file`` at or after ``pos`` (None: zeros to the end);
    only the file's data ranges are read (a preallocated file's holes are zeros)."""
    view = file.view()
    for lo, hi in files.data_ranges(file.path, pos, len(view)):
        for start in range(lo, hi, SEARCH_WINDOW):
            chunk = np.frombuffer(view, np.uint8, min(SEARCH_WINDOW, hi - start), start)
            hits = np.flatnonzero(chunk)
            if len(hits):
                return start + int(hits[0])
    return None


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


def _verify_queues(store, walked: Walked, problems: list[Problem]) -> None:
    """Every entry against the walked message at its offset, vectorized per consume-queue file; the
    entries found wrong (and extension addresses, which are few) are then reported one by one."""
    numbers = {topic: k for k, topic in enumerate(walked.topics)}
    groups = walked.groups()
    covered: dict[tuple[str, int], list[np.ndarray]] = {}
    for (topic, qid), cq in sorted(store.queues.items()):
        last = cq.log.active
        if last is not None and len(last) == 0:
            problems.append(Problem(last.file.path, 0, "expected an entry in slot 0 of the last "
                                    "consume-queue file, found none: the broker reads it as an entry at "
                                    "offset 0, size 0 (segstore recover deletes the file)"))
        ext = store.queue_exts.get((topic, qid))
        number = numbers.get(topic, -1)
        mine = groups.get((number, qid), np.zeros(0, np.intp))
        for seg in cq.segment_files():
            rows = seg.entries
            first = seg.first_offset
            phys = rows["offset"].astype(np.int64)
            stored = rows["tags_code"].astype(np.int64)
            resolved = np.asarray(store.entry_tags_codes(topic, qid, rows["tags_code"]), np.int64)
            claimed = first + np.arange(len(rows), dtype=np.int64)
            # the usual case: the queue's messages from this file's first offset, one per entry
            lo = int(np.searchsorted(walked.queue_offset[mine], first)) if len(mine) else 0
            at = mine[lo:lo + len(rows)]
            if len(at) == len(rows) and np.array_equal(walked.phy[at], phys):
                found = np.ones(len(rows), bool)
            else:
                at, found = walked.find(phys)
            addressed = stored <= EXT_MAX_ADDR
            wrong = found & ((walked.topic[at] != number) | (walked.queue_id[at] != qid)
                             | (walked.queue_offset[at] != claimed) | (walked.size[at] != rows["size"])
                             | (walked.tags_code[at] != resolved))
            seen = found.copy()
            live = claimed >= cq.min_offset      # older entries expired with their commitlog file (retention)
            for i in np.flatnonzero((~found | wrong | addressed) & live).tolist():
                pos = i * CQ_DTYPE.itemsize
                phy, size, tags = int(phys[i]), int(rows["size"][i]), int(resolved[i])
                expected = f"{topic}/{qid} offset {first + i}"
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
                        seen[i] = True
                        continue
                if m is None:
                    problems.append(Problem(seg.file.path, pos,
                                            f"expected the entry of {expected} to point at a valid message, "
                                            f"found commitlog offset {phy}"))
                    continue
                if not wrong[i]:
                    continue
                problems.append(Problem(
                    seg.file.path, pos,
                    f"expected ({topic}, {qid}, {first + i}, size {size}, tags code {tags}) at commitlog "
                    f"offset {phy}, found ({walked.topics[int(walked.topic[m])]}, {int(walked.queue_id[m])}, "
                    f"{int(walked.queue_offset[m])}, size {int(walked.size[m])}, "
                    f"tags code {int(walked.tags_code[m])})"))
            covered.setdefault((topic, qid), []).append(claimed[seen])
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
    if not store.queues:
        # a commitlog-only store (a backup): nothing is inconsistent; readers scan, recover builds them
        return
    # every message that needs an entry has one
    ok = ~walked.has_queue_entry()
    for (topic, qid), claimed in covered.items():
        queue_rows = groups.get((numbers.get(topic, -1), qid))
        if queue_rows is not None:
            ok[queue_rows] |= np.isin(walked.queue_offset[queue_rows], np.concatenate(claimed))
    for m in np.flatnonzero(~ok).tolist():
        topic, qid = walked.topics[int(walked.topic[m])], int(walked.queue_id[m])
        offset = int(walked.queue_offset[m])
        cq = store.queues.get((topic, qid))
        where = cq.directory if cq is not None else os.path.join(store.path, "consumequeue", topic)
        problems.append(
            Problem(
                where,
                offset * CQ_DTYPE.itemsize,
                f"expected an entry for the message at commitlog offset {int(walked.phy[m])} "
                f"({topic}/{qid} offset {offset}), found none",
            )
        )


def _verify_index(store, walked: Walked, problems: list[Problem]) -> None:
    index = store.index
    if index is None:
        return
    for f in index.files:
        h = f.header
        stored_count = IndexHeader.unpack(f.file.view(0, HEADER.size)).index_count
        if stored_count > f.index_num:
            problems.append(
                Problem(
                    f.path, INDEX_COUNT_POS, f"expected indexCount <= {f.index_num}, found {stored_count}"
                )
            )
        entries = f.entries
        numbers = np.arange(1, h.index_count)
        phys = entries["phy_offset"].astype(np.int64)
        hashes = entries["hash"].astype(np.int64)
        diffs, prevs = entries["time_diff"].astype(np.int64), entries["prev"].astype(np.int64)
        owners = walked.index_matches(phys, hashes)
        if owners is not None:      # the entries are the messages' keys in put order
            at, found, carried = owners, np.ones(len(phys), bool), np.ones(len(phys), bool)
        else:
            at, found = walked.find(phys)
            carried = found.copy()
            carried[found] = walked.carries_hash(at[found], hashes[found])
        links_bad = found & ((diffs < 0) | (prevs < INVALID_INDEX) | (prevs >= numbers))
        for i in np.flatnonzero(~carried | links_bad).tolist():
            n, phy, hsh = int(numbers[i]), int(phys[i]), int(hashes[i])
            pos = f.entry_pos(n)
            if phy < store.commitlog.min_offset:  # expired: its commitlog file was deleted (retention)
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
        bad_slots = np.flatnonzero(f.slots >= h.index_count)
        if len(bad_slots):
            s = int(bad_slots[0])
            problems.append(
                Problem(
                    f.path,
                    f.slot_pos(s),
                    f"expected slot {s} to hold an entry below {h.index_count}, found {int(f.slots[s])}",
                )
            )
        if len(entries) and int(entries["phy_offset"][-1]) != h.end_phy_offset:
            problems.append(
                Problem(
                    f.path,
                    24,
                    f"expected endPhyOffset {int(entries['phy_offset'][-1])} "
                    f"(the last entry's), found {h.end_phy_offset}",
                )
            )


def _verify_files(store, problems: list[Problem]) -> None:
    path = os.path.join(store.path, CHECKPOINT_FILE)
    if files.exists(path):
        problems.extend(
            Problem(path, pos, msg) for pos, msg in check_checkpoint(files.read_bytes(path), path=path)
        )
    config_dir = os.path.join(store.path, CONFIG_DIR)
    for name in files.list_dir(config_dir):
        if not name.endswith(".json"):
            continue
        cpath = os.path.join(config_dir, name)
        try:
            loads_fastjson(files.read_text(cpath), cpath)
        except SegstoreError as err:
            problems.append(Problem(cpath, err.pos, err.message))


def verify_store(store) -> list[Problem]:
    """Every problem found in a :class:`~segstore_rocketmq.store.RocketMQStore` (empty: clean)."""
    problems: list[Problem] = []
    with progress.task("verify", len(store.commitlog.log.segments) * store.commitlog.file_size):
        walked = _verify_commitlog(store, problems)
    _verify_queues(store, walked, problems)
    _verify_queue_exts(store, problems)
    _verify_index(store, walked, problems)
    _verify_files(store, problems)
    _verify_shutdown(store, problems)
    return problems


def _verify_shutdown(store, problems: list[Problem]) -> None:
    """An ``abort`` file seen by a reader: the last writer crashed (or still runs).  A store open for
    append has its own (``DefaultMessageStore.start`` creates it), so only readers report it."""
    abort = os.path.join(store.path, ABORT_FILE)
    if store.mode == "r" and files.exists(abort):
        problems.append(Problem(abort, None, (
            "expected no abort file (a clean shutdown removes it), found one: the last writer did not "
            "shut down cleanly or is still running; `segstore recover` repairs what it left")))
