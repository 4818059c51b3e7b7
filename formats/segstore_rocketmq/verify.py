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
from .consumequeue_ext import is_ext_address, real_offset
from .indexfile import HEADER, INDEX_COUNT_POS, INVALID_INDEX, IndexHeader, index_key_hashes, index_keys
from .lifecycle import ABORT_FILE
from .message import Blank, End, RocketMQMessage, decode
from .recovery import Walked, nonzero_extent, walk
from .topicconfig import loads_fastjson

CONFIG_DIR = "config"
#: where the tags code sits in a consume-queue entry (after the long offset and int size)
ENTRY_TAGS_POS = CQ_DTYPE.fields["tags_code"][1]


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


def _verify_commitlog(store, problems: list[Problem]) -> dict[int, Walked]:
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
        return {}
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
        stop = nonzero_extent(seg.file.view(), pos)
        if stop > pos:
            problems.append(
                Problem(
                    seg.path,
                    pos,
                    f"expected a valid message or zeros after the last message, "
                    f"found {stop - pos} bytes of torn or damaged data",
                )
            )
    return {m.phy: m for m in w.messages}


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
            problems.append(Problem(err.path, err.pos, err.message))


def _verify_queues(store, walked: dict[int, Walked], problems: list[Problem]) -> None:
    covered: set[tuple[str, int, int]] = set()
    for (topic, qid), cq in sorted(store.queues.items()):
        last = cq.log.active
        if last is not None and len(last) == 0:
            problems.append(Problem(last.file.path, 0, "expected an entry in slot 0 of the last "
                                    "consume-queue file, found none: the broker reads it as an entry at "
                                    "offset 0, size 0 (segstore recover deletes the file)"))
        ext = store.queue_exts.get((topic, qid))
        for seg in cq.segment_files():
            rows = seg.entries
            first = seg.first_offset
            stored = rows["tags_code"].tolist()
            resolved = store.entry_tags_codes(topic, qid, rows["tags_code"]).tolist()
            for i, (phy, size, tags) in enumerate(
                zip(rows["offset"].tolist(), rows["size"].tolist(), resolved, strict=True)
            ):
                if first + i < cq.min_offset:  # expired: its commitlog file was deleted (retention)
                    continue
                pos = i * CQ_DTYPE.itemsize
                m = walked.get(phy)
                expected = f"{topic}/{qid} offset {first + i}"
                if is_ext_address(stored[i]):
                    unit = _unit(ext, stored[i])
                    if unit is None or (m is not None and unit.store_timestamp != m.store_timestamp):
                        found = "none" if unit is None else f"store time {unit.store_timestamp}"
                        problems.append(Problem(
                            seg.file.path, pos + ENTRY_TAGS_POS,
                            f"expected the extension unit of {expected} at consumequeue_ext address "
                            f"{stored[i]} (real offset {real_offset(stored[i])})"
                            + (f" with store time {m.store_timestamp}" if m is not None else "")
                            + f", found {found}"))
                        covered.add((topic, qid, first + i))
                        continue
                if m is None:
                    problems.append(
                        Problem(
                            seg.file.path,
                            pos,
                            f"expected the entry of {expected} to point at a "
                            f"valid message, found commitlog offset {phy}",
                        )
                    )
                    continue
                found = (m.topic, m.queue_id, m.queue_offset, m.size, m.tags_code)
                if found != (topic, qid, first + i, size, tags):
                    problems.append(
                        Problem(
                            seg.file.path,
                            pos,
                            f"expected ({topic}, {qid}, {first + i}, size {size}, "
                            f"tags code {tags}) at commitlog offset {phy}, "
                            f"found ({m.topic}, {m.queue_id}, {m.queue_offset}, "
                            f"size {m.size}, tags code {m.tags_code})",
                        )
                    )
                covered.add((topic, qid, first + i))
            rest = seg.all_slots()[len(seg) :]
            nonzero = (
                np.flatnonzero(rest.view(np.uint8).reshape(len(rest), -1).any(axis=1)) if len(rest) else []
            )
            if len(nonzero):
                at = (len(seg) + int(nonzero[0])) * CQ_DTYPE.itemsize
                problems.append(
                    Problem(
                        seg.file.path,
                        len(seg) * CQ_DTYPE.itemsize,
                        f"expected zeros after the last valid entry, found data at byte {at}",
                    )
                )
    if not store.queues:
        # a commitlog-only store (a backup): nothing is inconsistent; readers scan, recover builds them
        return
    for m in walked.values():
        if m.has_queue_entry and (m.topic, m.queue_id, m.queue_offset) not in covered:
            cq = store.queues.get((m.topic, m.queue_id))
            where = cq.directory if cq is not None else os.path.join(store.path, "consumequeue", m.topic)
            problems.append(
                Problem(
                    where,
                    m.queue_offset * CQ_DTYPE.itemsize,
                    f"expected an entry for the message at commitlog offset {m.phy} "
                    f"({m.topic}/{m.queue_id} offset {m.queue_offset}), found none",
                )
            )


def _verify_index(store, walked: dict[int, Walked], problems: list[Problem]) -> None:
    index = store.index
    if index is None:
        return
    hashes_of: dict[int, set[int]] = {}
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
        for n, (hsh, phy, diff, prev) in zip(numbers.tolist(), entries.tolist(), strict=True):
            pos = f.entry_pos(n)
            if phy < store.commitlog.min_offset:  # expired: its commitlog file was deleted (retention)
                continue
            m = walked.get(phy)
            if m is None:
                problems.append(
                    Problem(
                        f.path,
                        pos,
                        f"expected index entry {n} to point at a valid message, found commitlog offset {phy}",
                    )
                )
                continue
            if phy not in hashes_of:
                hashes_of[phy] = set(index_key_hashes(index_keys(m.index_request())).tolist())
            if hsh not in hashes_of[phy]:
                problems.append(
                    Problem(
                        f.path,
                        pos,
                        f"expected index entry {n} to hash a key of the message at "
                        f"{phy} ({sorted(hashes_of[phy])}), found {hsh}",
                    )
                )
            if diff < 0 or not INVALID_INDEX <= prev < n:
                problems.append(
                    Problem(
                        f.path,
                        pos,
                        f"expected a time diff >= 0 and a previous entry below {n}, found {diff} and {prev}",
                    )
                )
        bad_slots = np.flatnonzero(f.slots.astype(np.int64) >= h.index_count)
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
