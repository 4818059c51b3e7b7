"""Retention of a RocketMQ store, by the 4.9.7 broker's clean-up services.

Sources (apache/rocketmq ``rocketmq-all-4.9.7``, ``store/src/main/java/org/apache/rocketmq/store/``):

- ``DefaultMessageStore.CleanCommitLogService.deleteExpiredFiles``: a run deletes when
  it is time (``isTimeToDelete``: the hour of the day, local time, is one of
  ``deleteWhen``'s ``;``-separated hours), the disk is full (``isSpaceToDelete``: the
  used ratio passes ``diskMaxUsedSpaceRatio`` percent, clamped to 10..95), or a manual
  delete was asked for (``executeDeleteFilesManually``: the next 20 runs).  With
  ``cleanFileForciblyEnable`` and the disk over 85 % used (``diskSpaceCleanForciblyRatio``)
  the run cleans at once (``cleanImmediately``), ignoring the files' age.
- ``MappedFileQueue.deleteExpiredFileByTime``: every commitlog file but the last, oldest
  first, is deleted when ``now >= lastModified + fileReservedTime hours`` (or cleaning at
  once), at most 10 per run (``DELETE_FILES_BATCH_MAX``); the first one kept stops the run.
- ``CleanConsumeQueueService.deleteExpiredFiles`` with the commitlog's new first offset:
  ``ConsumeQueue.deleteExpiredFile`` (``MappedFileQueue.deleteExpiredFileByOffset``):
  every consume-queue file but the last, oldest first, whose last 20-byte unit points
  below it; then ``correctMinOffset``; then ``IndexService.deleteExpiredFile``: every
  index file but the last, oldest first, whose ``endPhyOffset`` is below it.

Offline, ``deleteWhen`` is honoured only when given: a run without it is the admin's
manual delete.  Runs repeat, as the broker's every 10 s, while one deletes something
and a trigger still holds (a manual delete: 20 runs at most).

Crash behaviour: files are deleted whole, commitlog first, oldest first, never the
last (active) one, so a crash leaves a store whose commitlog starts at a file
boundary; on open every consume queue starts at its first entry at or past that
boundary (``correctMinOffset``), and the next run deletes the queue and index files
left over.  The ``checkpoint`` is not touched: its timestamps still bound recovery.

Thread-safety: not thread-safe; the store's writer lock is held by the caller.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from segstore import files
from segstore.javatext import parse_int

from .dirnames import INDEX_DIR
from .indexfile import IndexService

HOUR_MS = 3600 * 1000
#: ``MappedFileQueue.DELETE_FILES_BATCH_MAX``
DELETE_FILES_BATCH_MAX = 10
#: ``CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES``
MAX_MANUAL_DELETE_FILE_TIMES = 20
#: the system properties ``rocketmq.broker.diskSpaceCleanForciblyRatio`` and ``...WarningLevelRatio``
DISK_SPACE_CLEAN_FORCIBLY_RATIO = 0.85
DISK_SPACE_WARNING_LEVEL_RATIO = 0.90


def used_ratio(total: int, free: int, usable: int, freed: int = 0) -> float:
    """``UtilAll.getDiskPartitionSpaceUsedPercent``: used / (used + usable), rounded up to 1 %,
    after ``freed`` more bytes are released."""
    if total <= 0:
        return -1.0
    used = max(total - free - freed, 0)
    entire = used + usable + freed
    return math.ceil(used * 100 / entire) / 100.0 if entire else -1.0


def is_time_to_delete(delete_when: str, now_ms: int) -> bool:
    """``UtilAll.isItTimeToDo``: the hour of ``now_ms`` (local time) is one of the listed hours, each
    ``Integer.parseInt`` of its text (``deleteWhen`` is checked so when the config is made)."""
    hour = time.localtime(now_ms / 1000).tm_hour
    return any(parse_int(h) == hour for h in delete_when.split(";") if h.strip())


@dataclass(slots=True)
class RetentionResult:
    """What a retention run deleted (or, dry, would delete)."""

    min_offset_before: int
    min_offset: int
    commitlog_files: list[str] = field(default_factory=list)
    consume_queue_files: list[str] = field(default_factory=list)
    index_files: list[str] = field(default_factory=list)
    runs: int = 0
    triggers: list[str] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"min_offset_before": self.min_offset_before, "min_offset": self.min_offset,
                "commitlog_files": list(self.commitlog_files),
                "consume_queue_files": list(self.consume_queue_files), "index_files": list(self.index_files),
                "runs": self.runs, "triggers": list(self.triggers), "dry_run": self.dry_run}


def _disk_ratio_of(path: str) -> Callable[[int], float]:
    total, free, usable = files.disk_space(path)
    return lambda freed: used_ratio(total, free, usable, freed)


def plan_commitlog(bases_mtimes: list[tuple[int, int, int]], *, now_ms: int, file_reserved_time: int,
                   delete_when: str, disk_max_used_space_ratio: int, clean_forcibly: bool,
                   disk_ratio: Callable[[int], float]) -> tuple[int, list[str], int]:
    """Which commitlog files the runs of ``CleanCommitLogService`` delete.

    :param bases_mtimes: ``(base, last modified ms, allocated bytes)`` of every file, oldest first.
    :param disk_ratio: the disk's used ratio once the given bytes are freed.
    :returns: ``(number of files deleted from the front, triggers seen, runs that deleted)``.
    """
    ratio_limit = min(max(disk_max_used_space_ratio, 10), 95) / 100.0  # getDiskMaxUsedSpaceRatio
    reserved_ms = file_reserved_time * HOUR_MS
    manual = 0 if delete_when else MAX_MANUAL_DELETE_FILE_TIMES
    deleted, freed, runs = 0, 0, 0
    triggers: list[str] = []
    while True:
        ratio = disk_ratio(freed)
        timeup = bool(delete_when) and is_time_to_delete(delete_when, now_ms)
        space_full = ratio < 0 or ratio > ratio_limit
        clean_now = clean_forcibly and ratio > DISK_SPACE_CLEAN_FORCIBLY_RATIO
        if not (timeup or space_full or manual > 0):
            break
        for name, on in (("deleteWhen", timeup), ("diskMaxUsedSpaceRatio", space_full),
                         ("cleanFileForcibly", clean_now), ("manual", manual > 0 and not timeup)):
            if on and name not in triggers:
                triggers.append(name)
        manual = max(manual - 1, 0)
        this_run = 0
        # every file but the last (the active one), oldest first, until one is kept
        for _base, mtime, allocated in bases_mtimes[deleted:-1]:
            if not (now_ms >= mtime + reserved_ms or clean_now):
                break
            this_run += 1
            freed += allocated
            if this_run >= DELETE_FILES_BATCH_MAX:
                break
        deleted += this_run
        if this_run == 0:
            break
        runs += 1
    return deleted, triggers, runs


def run(store: Any, *, now_ms: int | None = None, dry_run: bool = False,
        disk_ratio: Callable[[int], float] | None = None) -> RetentionResult:
    """Apply the broker's commitlog, consume-queue and index clean-up to an open store.

    :param now_ms: the clock file ages and ``deleteWhen`` are measured against.
    :param disk_ratio: the used ratio of the store's disk once the given bytes are freed
        (by default measured on the store's file system).
    """
    config = store.config
    now = int(time.time() * 1000) if now_ms is None else now_ms
    commitlog = store.commitlog
    segs = list(commitlog.log.segments)
    info = [(seg.base, files.mtime_ms(seg.path), files.allocated_size(seg.path)) for seg in segs]
    count, triggers, runs = plan_commitlog(
        info, now_ms=now, file_reserved_time=config.fileReservedTime, delete_when=config.deleteWhen,
        disk_max_used_space_ratio=config.diskMaxUsedSpaceRatio, clean_forcibly=config.cleanFileForciblyEnable,
        disk_ratio=disk_ratio or _disk_ratio_of(store.path))
    gone = segs[:count]
    new_min = segs[count].base if count < len(segs) else commitlog.min_offset
    result = RetentionResult(commitlog.min_offset, new_min, [s.path for s in gone], runs=runs,
                             triggers=triggers, dry_run=dry_run)
    if not dry_run:
        for seg in _drop_first(commitlog.log, len(gone)):
            files.remove(seg.path)  # MappedFile.destroy: unmapped (closed), deleted
        if gone:
            files.fsync_dir(commitlog.directory)
    # CleanConsumeQueueService: always after a start (lastPhysicalMinOffset begins at 0)
    if new_min > 0:
        result.consume_queue_files = _clean_queues(store, new_min, dry_run)
        result.index_files = _clean_index(store, new_min, dry_run)
    return result


def _drop_first(log: Any, count: int) -> list[Any]:
    """The first ``count`` files of a log, removed from it (and from its dirty set) and closed."""
    left = iter(range(count))
    return log.delete_oldest(lambda seg: next(left, None) is None)


def _clean_queues(store: Any, phy_min: int, dry_run: bool) -> list[str]:
    """``ConsumeQueue.deleteExpiredFile``: files but the last whose last unit points below ``phy_min``."""
    removed: list[str] = []
    for cq in store.queues.values():
        segs = list(cq.log.segments)
        gone = []
        for seg in segs[:-1]:
            last = seg.all_slots()[-1]  # the unit at mappedFileSize - CQ_STORE_UNIT_SIZE
            if not int(last["offset"]) < phy_min:
                break
            gone.append(seg)
        removed.extend(seg.file.path for seg in gone)
        if dry_run:
            continue
        for seg in _drop_first(cq.log, len(gone)):
            files.remove(seg.file.path)
        if gone:
            files.fsync_dir(cq.directory)
        cq.correct_min_offset(phy_min)
    return removed


def _clean_index(store: Any, phy_min: int, dry_run: bool) -> list[str]:
    """``IndexService.deleteExpiredFile``: files but the last whose ``endPhyOffset`` is below ``phy_min``.

    With ``messageIndexEnable`` off the store holds no index service, but the broker's is built and
    loaded all the same (only ``CommitLogDispatcherBuildIndex`` asks the flag) and
    ``CleanConsumeQueueService`` always calls it: the files written while the index was on expire too."""
    if store.index is not None:
        return list(store.index.delete_expired(phy_min, dry_run=dry_run))
    directory = os.path.join(store.path, INDEX_DIR)
    if not files.is_dir(directory):
        return []
    service = IndexService(directory, store.config.maxHashSlotNum, store.config.maxIndexNum,
                           writable=not dry_run, past_end=True)
    try:
        service.load()
        return list(service.delete_expired(phy_min, dry_run=dry_run))
    finally:
        service.close()
