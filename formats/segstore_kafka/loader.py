"""What ``LogLoader.load`` does to a partition directory before it opens the segments.

Kafka 3.8.0, ``core/src/main/scala/kafka/log/LogLoader.scala``:

1. ``removeTempFilesAndCollectSwapFiles``: remove every ``*.deleted`` file; note every
   ``*.cleaned`` file's base offset and every ``*.swap`` file; remove the ``*.swap``
   files whose base offset is at or past the smallest ``*.cleaned`` base (an
   unfinished split); remove every ``*.cleaned`` file.
2. For the ``*.log.swap`` files left: ``min`` of their bases and ``max`` of their next
   offsets (one past their last batch) bound the segments they replace.
3. Remove every other file whose name starts with an offset in ``[min, max)``
   (the replaced segments not yet renamed to ``.deleted``).
4. Rename every ``*.swap`` file to its name without ``.swap``.
5. ``loadSegmentFiles``: delete every index file (``.index``, ``.timeindex``, ``.txnindex``)
   with no ``.log`` beside it ("Found an orphaned index file").  Only those whose
   ``.log.deleted`` step 1 removed are deleted here: a deletion (retention's
   ``LocalLog.deleteSegmentFiles``, or a cleaner's ``replaceSegments``) renames the ``.log``
   before the indexes, so a crash between leaves them, and their records are below the log
   start.  An index orphaned any other way (its ``.log`` lost) is left for ``verify`` to
   report: its records are gone.

So a cleaner (``compaction.py``) that crashed while any file of its output was
still ``*.cleaned`` rolls back (the old segments stay), and one that crashed once
every file was renamed ``*.swap`` rolls forward (the old segments go).

Only a writable open applies this (a read-only open never changes files, and
ignores these files: only ``%020d.log`` names are segments).
"""

from __future__ import annotations

import os

from segstore import files
from segstore.errors import CorruptDataError, SegstoreError, TruncatedDataError
from segstore.javatext import parse_long

from . import batch as codec

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
#: a producer-state snapshot (``LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX``)
SNAPSHOT_SUFFIX = ".snapshot"
LOG_SUFFIX = ".log"
#: the index files of a segment (``LocalLog.isIndexFile``)
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def offset_from_name(name: str) -> int | None:
    """``LogFileUtils.offsetFromFileName``: ``Long.parseLong`` of the text before the first ``.``
    (:func:`segstore.javatext.parse_long`); None where it throws."""
    return parse_long(name.split(".", 1)[0])


def _next_offset(path: str, base: int) -> int:
    """One past the last whole batch of a ``.log`` file (``LogSegment.readNextOffset``)."""
    data = memoryview(files.read_bytes(path))
    nxt, pos = base, 0
    try:
        while pos < len(data):
            header = codec.read_batch_header(data, pos, path=path)
            nxt = header.last_offset + 1
            pos += header.size
    except CorruptDataError:
        pass
    return nxt


def swap_damage(path: str) -> CorruptDataError | SegstoreError | None:
    """The first problem of a ``*.log.swap`` file: a batch whose length, magic or CRC does not hold (what
    ``LogSegment.recover`` checks); None when it is whole.  Kafka's cleaner flushes its output before
    renaming it ``.swap``, so a damaged one is the disk's doing: the broker's load still installs it
    over the segments it replaces, and its recovery then cuts it.  ``O(file bytes)``."""
    data = files.read_bytes(path)
    valid, error = codec.valid_prefix(memoryview(data), path=path)
    if error is None and valid < len(data):
        return TruncatedDataError(f"expected whole batches to the end, found {len(data) - valid} bytes "
                                  "after the last", path, valid)
    return error


def pending_swap_problems(path: str) -> list[tuple[str, int | None, str]]:
    """The ``*.log.swap`` files a partition directory holds that the broker's next load installs
    (``LogLoader.load``; not those an unfinished split leaves, which it deletes) and that are damaged
    (:func:`swap_damage`): the segments they replace are deleted and the swap cut where it is damaged,
    so intact records are lost to the broker.  ``O(bytes of the swap files)``."""
    problems: list[tuple[str, int | None, str]] = []
    for name in _valid_swaps(path):
        if not name[:-len(SWAP_SUFFIX)].endswith(LOG_SUFFIX):
            continue
        error = swap_damage(os.path.join(path, name))
        if error is not None:
            problems.append((error.path or os.path.join(path, name), error.pos,
                             f"{error.message}: the broker's next load installs this swap over the segments "
                             "it replaces (LogLoader.load) and its recovery cuts it there (run recover, "
                             "which keeps the replaced segments)"))
    return problems


def _valid_swaps(path: str) -> list[str]:
    """The ``*.swap`` names the broker's load renames into place (``removeTempFilesAndCollectSwapFiles``:
    not those at or past the smallest ``*.cleaned`` base), without changing anything."""
    names = [name for name in files.list_dir(path) if offset_from_name(name) is not None
             and files.is_file(os.path.join(path, name))]
    cleaned = [offset_from_name(name) for name in names if name.endswith(CLEANED_SUFFIX)]
    cleaned_min = min((base for base in cleaned if base is not None), default=None)
    return [name for name in names if name.endswith(SWAP_SUFFIX)
            and (cleaned_min is None or (offset_from_name(name) or 0) < cleaned_min)]


def complete_interrupted(path: str) -> list[str]:
    """Finish or roll back what a crashed cleaner or retention left in a partition directory.

    Returns one line per file removed or renamed.
    """
    lines: list[str] = []
    names = files.list_dir(path)
    swaps: list[str] = []
    cleaned_min: int | None = None
    cleaned: list[str] = []
    #: the name stems (digits) of the ``.log.deleted`` files removed
    deleted_logs: list[str] = []
    for name in names:
        full = os.path.join(path, name)
        if not files.is_file(full):
            continue
        if name.endswith(DELETED_SUFFIX):
            files.remove(full)
            lines.append(f"{full}: removed (left by an interrupted deletion)")
            if name.endswith(LOG_SUFFIX + DELETED_SUFFIX):
                deleted_logs.append(name[:-len(LOG_SUFFIX + DELETED_SUFFIX)])
        elif offset_from_name(name) is None:
            # no offset in the name: Kafka's offsetFromFileName throws on it and the broker does not
            # start; left as it is for verify to name (misnamed_files)
            continue
        elif name.endswith(CLEANED_SUFFIX):
            base = offset_from_name(name)
            if base is not None:
                cleaned_min = base if cleaned_min is None else min(cleaned_min, base)
            cleaned.append(full)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(name)
    valid: list[str] = []
    for name in swaps:
        base = offset_from_name(name)
        if cleaned_min is not None and base is not None and base >= cleaned_min:
            files.remove(os.path.join(path, name))
            lines.append(f"{os.path.join(path, name)}: removed (an unfinished split)")
        else:
            valid.append(name)
    for full in cleaned:
        files.remove(full)
        lines.append(f"{full}: removed (an unfinished clean, rolled back)")
    low: int | None = None
    high: int | None = None
    damaged = False
    for name in valid:
        base = offset_from_name(name)
        if base is None or not name[:-len(SWAP_SUFFIX)].endswith(LOG_SUFFIX):
            continue
        nxt = _next_offset(os.path.join(path, name), base)
        low = base if low is None else min(low, base)
        high = nxt if high is None else max(high, nxt)
        damaged = damaged or swap_damage(os.path.join(path, name)) is not None
    if low is not None and high is not None:
        for name in files.list_dir(path):
            full = os.path.join(path, name)
            offset = offset_from_name(name)
            if (not name.endswith(SWAP_SUFFIX) and offset is not None and low <= offset < high
                    and files.is_file(full)):
                # a damaged swap loses records its recovery cuts: the segments it replaces are kept
                kept = files.save_range_aside(full, 0)[0] if damaged and name.endswith(LOG_SUFFIX) else None
                files.remove(full)
                lines.append(f"{full}: removed (replaced by an interrupted swap"
                             + (f", which is damaged: kept in {kept})" if kept is not None else ")"))
    for name in valid:
        full = os.path.join(path, name)
        files.rename(full, full[:-len(SWAP_SUFFIX)])
        lines.append(f"{full}: renamed to {name[:-len(SWAP_SUFFIX)]} (an interrupted swap completed)")
    lines += _remove_orphaned_by_deletion(path, deleted_logs)
    if lines:
        files.fsync_dir(path)
    return lines


def snapshot_problems(path: str) -> list[tuple[str, int | None, str]]:
    """The producer snapshots of a partition directory that do not read as Kafka 3.8.0
    ``ProducerStateManager.readSnapshot`` reads them (version, CRC32C, entry count): the broker's
    ``loadFromSnapshot`` deletes such a one when it comes to it ("Failed to load producer snapshot")
    and rebuilds the state from an older snapshot or the log.  ``O(snapshot bytes)``."""
    # the snapshot codec is imported only here: not by `info`, nor by a read that opens the loader
    from .snapshot import read_snapshot

    problems: list[tuple[str, int | None, str]] = []
    for name in files.list_dir(path):
        full = os.path.join(path, name)
        if not name.endswith(SNAPSHOT_SUFFIX) or offset_from_name(name) is None or not files.is_file(full):
            continue
        try:
            read_snapshot(files.read_bytes(full), path=full)
        except CorruptDataError as err:
            problems.append((err.path or full, err.pos,
                             f"{err.message}: the broker deletes the snapshot when it loads producer state "
                             "(ProducerStateManager.loadFromSnapshot) and rebuilds that state from an older "
                             "snapshot or the log (run recover)"))
    return problems


def tidy_snapshots(path: str, end: int) -> list[str]:
    """What a writable open does to the producer snapshots, as the broker's load does: remove the ones
    that do not read (:func:`snapshot_problems`) and those past the log end ``end``
    (:func:`remove_snapshots_past`).  Returns one line per file removed."""
    lines: list[str] = []
    for full, _, message in snapshot_problems(path):
        files.remove(full)
        lines.append(f"{full}: removed ({message.removesuffix(' (run recover)')})")
    if lines:
        files.fsync_dir(path)
    return lines + remove_snapshots_past(path, end)


def remove_snapshots_past(path: str, end: int) -> list[str]:
    """Remove the producer snapshots (``%020d.snapshot``) past the log end ``end``, as the broker's load
    does (Kafka 3.8.0 ``ProducerStateManager.truncateAndReload``, from ``UnifiedLog.rebuildProducerState``:
    a snapshot with ``offset > logEndOffset`` is deleted).  One left past a log a recovery cut back
    describes producers of records no longer there; once appends carry the log past it again the broker
    would load it as the state at its offset (an ongoing transaction of cut records hangs the last
    stable offset).  Returns one line per file removed."""
    lines: list[str] = []
    for name in files.list_dir(path):
        offset = offset_from_name(name)
        full = os.path.join(path, name)
        if (name.endswith(SNAPSHOT_SUFFIX) and offset is not None and offset > end
                and files.is_file(full)):
            files.remove(full)
            lines.append(f"{full}: removed (a producer snapshot past the log end {end}, as the broker's "
                         "ProducerStateManager.truncateAndReload removes it)")
    if lines:
        files.fsync_dir(path)
    return lines


def _remove_orphaned_by_deletion(path: str, stems: list[str]) -> list[str]:
    """Step 5 for the segments whose ``.log.deleted`` was removed: their index files left without a
    ``.log`` (Kafka 3.8.0 ``LogLoader.loadSegmentFiles`` deletes every orphaned index).  Runs after
    the swaps are renamed, as the broker's does: a ``.log.swap`` of the same base gives them a ``.log``
    again (and step 3 removed the old ones already)."""
    lines: list[str] = []
    for stem in stems:
        if files.exists(os.path.join(path, stem + LOG_SUFFIX)):
            continue
        for suffix in INDEX_SUFFIXES:
            full = os.path.join(path, stem + suffix)
            if files.is_file(full):
                files.remove(full)
                lines.append(f"{full}: removed (an index left by an interrupted deletion, "
                             "its segment already deleted)")
    return lines
