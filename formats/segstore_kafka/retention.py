"""Log retention and DeleteRecords over one Kafka partition, by Kafka 3.8's rules.

The rules are ``core/src/main/scala/kafka/log/UnifiedLog.scala`` (3.8.0):

- ``deleteOldSegments``: with ``cleanup.policy`` containing ``delete``, three passes in
  this order: ``deleteLogStartOffsetBreachedSegments`` (a segment whose *next* segment
  starts at or below the log start offset), ``deleteRetentionSizeBreachedSegments``
  (while the log is larger than ``retention.bytes`` by at least the oldest segment's
  size), ``deleteRetentionMsBreachedSegments`` (``now - largestTimestamp >
  retention.ms``, the largest timestamp being the file's mtime when the segment has
  none).  Without ``delete`` only the first pass runs.
- ``deletableSegments``: from the oldest segment while the predicate holds; a segment
  whose upper bound (the next segment's base, or the log end) is above the high
  watermark is never deleted, nor a last segment that is empty.
- ``deleteSegments``: when every segment is deletable, a new empty segment is rolled
  at the log end first (the active segment *can* go, the partition keeps one);
  the log start moves to the base of the segment after the last deleted one
  (``maybeIncrementLogStartOffset``, which also truncates the leader epoch cache
  from the start); then ``LocalLog.deleteSegmentFiles`` renames each file of the
  segments to ``*.deleted`` and removes them (the broker after
  ``file.delete.delay.ms``; here at once).
- DeleteRecords (``Partition.deleteRecordsOnLeader``): refused unless the policy
  has ``delete``; offset -1 means the high watermark; the log start only moves
  forward and never past the high watermark.

Crash behaviour: the log start (``log-start-offset-checkpoint`` in the log
directory, the partition directory's parent) and the leader epochs are written
before any file is renamed; a crash after that leaves whole segments or
``*.deleted`` files, and ``LogLoader`` (and :mod:`.loader` on a writable open) removes
``*.deleted`` files and takes ``max(checkpoint, first base)`` as the log start.

The high watermark is read from ``replication-offset-checkpoint`` beside the
other log-dir checkpoints, clamped to ``[log start, log end]`` as
``UnifiedLog.updateHighWatermark`` does; a partition absent from it (a store
segstore wrote, with no replicas) has everything committed: the log end.

Thread-safety: not thread-safe; the owning store serialises calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from segstore import files
from segstore.errors import ConfigError, InvalidTopicError, OffsetOutOfRangeError

from .loader import DELETED_SUFFIX
from .logdir import high_watermark, write_log_start
from .partition import Partition
from .segment import NO_TIMESTAMP, SUFFIXES, LogSegment, file_name
from .topicconfig import INTERNAL_TOPICS, is_log_managed

#: ``DeleteRecordsRequest.HIGH_WATERMARK``
HIGH_WATERMARK = -1

REASON_LOG_START = "log-start-offset"
REASON_SIZE = "retention.bytes"
REASON_TIME = "retention.ms"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the retention rules look at in one segment."""

    base: int
    size: int
    #: ``LogSegment.largestTimestamp``: the max timestamp, else the file's mtime
    largest_timestamp: int


@dataclass(frozen=True, slots=True)
class Deletion:
    """One segment the rules delete, and why."""

    base: int
    #: the next segment's base (or the log end): the segment's offsets are ``[base, upper)``
    upper: int
    size: int
    reason: str


@dataclass(slots=True)
class Plan:
    """The outcome of the retention passes over a list of segments (pure data)."""

    deletions: list[Deletion] = field(default_factory=list)
    log_start_offset: int = 0
    #: a new empty segment was (or would be) rolled at the log end first
    rolled_at: int | None = None


def plan_deletions(segments: list[SegmentInfo], *, log_start_offset: int, log_end_offset: int,
                   high_watermark: int, retention_bytes: int = -1, retention_ms: int = -1,
                   now_ms: int = 0, delete_policy: bool = True) -> Plan:
    """Run ``UnifiedLog.deleteOldSegments`` over ``segments`` (oldest first) without touching files.

    Runtime complexity: ``O(segments)`` per pass.
    """
    segs = list(segments)
    plan = Plan(log_start_offset=log_start_offset)

    def run_pass(predicate: Callable[[SegmentInfo, SegmentInfo | None], bool], reason: str) -> None:
        # UnifiedLog.deletableSegments
        deletable: list[Deletion] = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            last_and_empty = nxt is None and seg.size == 0
            upper = nxt.base if nxt is not None else log_end_offset
            # `&&` short-circuits: the stateful size predicate only sees segments below the high watermark.
            if high_watermark >= upper and predicate(seg, nxt) and not last_and_empty:
                deletable.append(Deletion(seg.base, upper, seg.size, reason))
            else:
                break
        if not deletable:
            return
        # UnifiedLog.deleteSegments: keep one segment, rolling an empty one at the log end first.
        if len(deletable) == len(segs):
            plan.rolled_at = log_end_offset
            segs.append(SegmentInfo(log_end_offset, 0, NO_TIMESTAMP))
            if deletable[-1].base == log_end_offset:
                deletable.pop()
        if not deletable:
            return
        del segs[:len(deletable)]
        plan.log_start_offset = max(plan.log_start_offset, segs[0].base)
        plan.deletions.extend(deletable)

    run_pass(lambda seg, nxt: nxt is not None and nxt.base <= plan.log_start_offset, REASON_LOG_START)
    if delete_policy:
        total = sum(s.size for s in segs)
        if retention_bytes >= 0 and total >= retention_bytes:
            diff = [total - retention_bytes]

            def size_breached(seg: SegmentInfo, nxt: SegmentInfo | None) -> bool:
                if diff[0] - seg.size >= 0:
                    diff[0] -= seg.size
                    return True
                return False

            run_pass(size_breached, REASON_SIZE)
        if retention_ms >= 0:
            run_pass(lambda seg, nxt: now_ms - seg.largest_timestamp > retention_ms, REASON_TIME)
    return plan


# -- the log-dir checkpoints ----------------------------------------------------

# -- applying -------------------------------------------------------------------

@dataclass(slots=True)
class RetentionResult:
    """What a retention run or a DeleteRecords did (or, dry, would do) to one partition."""

    topic: str
    partition: int
    high_watermark: int
    log_start_offset_before: int
    log_start_offset: int
    deletions: list[Deletion]
    rolled_at: int | None
    dry_run: bool
    #: files removed (after their ``.deleted`` rename)
    removed_files: list[str] = field(default_factory=list)
    #: why the partition was left alone (None: the rules ran)
    skipped: str | None = None
    #: a retention run's limits, ``{"retention.ms": ..., "retention.bytes": ...}`` as the partition's config
    #: gave them (-1: none); None for DeleteRecords and a partition left alone
    limits: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        skipped = {} if self.skipped is None else {"skipped": self.skipped}
        limits = {} if self.limits is None else {"limits": dict(self.limits)}
        return {"topic": self.topic, "partition": self.partition, **skipped, **limits,
                "high_watermark": self.high_watermark,
                "log_start_offset_before": self.log_start_offset_before,
                "log_start_offset": self.log_start_offset, "rolled_at": self.rolled_at,
                "dry_run": self.dry_run, "removed_files": list(self.removed_files),
                "deleted_segments": [{"base_offset": d.base, "end_offset": d.upper, "bytes": d.size,
                                      "reason": d.reason} for d in self.deletions]}


def segment_info(seg: LogSegment) -> SegmentInfo:
    """``LogSegment.largestTimestamp``: the largest batch timestamp, else the ``.log`` file's mtime."""
    return SegmentInfo(seg.base, seg.size, seg.largest_timestamp())


def _delete_policy(part: Partition) -> bool:
    return "delete" in getattr(part.config, "cleanup_policy", "delete").split(",")


def delete_old_segments(part: Partition, *, now_ms: int | None = None, hw: int | None = None,
                        dry_run: bool = False) -> RetentionResult:
    """Apply ``retention.bytes``, ``retention.ms`` and the log start to a writable partition.

    :param now_ms: the clock ``retention.ms`` is measured against (the partition's clock by default).
    :param hw: the high watermark (by default :func:`high_watermark`).
    :param dry_run: plan only; nothing is written.
    """
    now = part.clock() if now_ms is None else now_ms
    hw = high_watermark(part) if hw is None else hw
    plan = plan_deletions([segment_info(s) for s in part.segments], log_start_offset=part.log_start_offset,
                          log_end_offset=part.next_offset, high_watermark=hw,
                          retention_bytes=part.config.retention_bytes, retention_ms=part.config.retention_ms,
                          now_ms=now, delete_policy=_delete_policy(part))
    result = _apply(part, plan, hw, dry_run)
    result.limits = {"retention.ms": part.config.retention_ms, "retention.bytes": part.config.retention_bytes}
    return result


def delete_records(part: Partition, before: int, *, hw: int | None = None,
                   dry_run: bool = False) -> RetentionResult:
    """Kafka DeleteRecords: move the log start to ``before`` (-1: the high watermark), then drop the
    segments wholly below it (``deleteLogStartOffsetBreachedSegments``, the broker's next retention pass).

    :raises ConfigError: ``cleanup.policy`` has no ``delete`` (the broker's PolicyViolationException).
    :raises OffsetOutOfRangeError: ``before`` is negative (other than -1) or past the high watermark.
    """
    hw = high_watermark(part) if hw is None else hw
    return _delete_records_to(part, check_delete_records(part, before, hw), hw, dry_run)


def check_delete_records(part: Partition, before: int, hw: int) -> int:
    """The offset DeleteRecords of ``before`` moves ``part``'s log start to (-1: ``hw``), or why the broker
    refuses it (``Partition.deleteRecordsOnLeader``); changes nothing.

    :raises ConfigError: ``cleanup.policy`` has no ``delete`` (the broker's PolicyViolationException).
    :raises OffsetOutOfRangeError: ``before`` is negative (other than -1) or past the high watermark.
    """
    name = f"{part.topic}-{part.partition}"
    if not _delete_policy(part):
        raise ConfigError(f"expected cleanup.policy with delete to delete records of "
                          f"{name}, found {part.config.cleanup_policy!r}", part.path)
    target = hw if before == HIGH_WATERMARK else before
    if target < 0:
        raise OffsetOutOfRangeError(f"expected an offset of {name} >= 0 or -1 (the high watermark), "
                                    f"found {before}", part.path)
    if target > hw:
        raise OffsetOutOfRangeError(f"expected an offset of {name} at most its high watermark {hw}, "
                                    f"found {target}", part.path)
    return target


def _delete_records_to(part: Partition, target: int, hw: int, dry_run: bool) -> RetentionResult:
    """DeleteRecords of a ``target`` :func:`check_delete_records` accepted."""
    start = max(part.log_start_offset, target)
    plan = plan_deletions([segment_info(s) for s in part.segments], log_start_offset=start,
                          log_end_offset=part.next_offset, high_watermark=hw, delete_policy=False)
    return _apply(part, plan, hw, dry_run)


def _apply(part: Partition, plan: Plan, hw: int, dry_run: bool) -> RetentionResult:
    result = RetentionResult(part.topic, part.partition, hw, part.log_start_offset, plan.log_start_offset,
                             plan.deletions, plan.rolled_at, dry_run)
    if dry_run or (not plan.deletions and plan.log_start_offset == part.log_start_offset):
        return result
    if plan.rolled_at is not None:
        part.active_segment().on_become_inactive()
        part.log.roll(plan.rolled_at).make_appendable()
    gone = [part.log.segments.remove(d.base) for d in plan.deletions]
    # The commit point: the new log start and epochs are durable before any file is renamed.
    part.log_start_offset = plan.log_start_offset
    part.epochs.truncate_from_start(part.log_start_offset)
    part.epochs.flush()
    write_log_start(part)
    result.removed_files = delete_segment_files(gone)
    return result


def delete_segment_files(segments: Iterable[LogSegment]) -> list[str]:
    """``LocalLog.deleteSegmentFiles``: rename each segment file to ``*.deleted``, then remove them."""
    segments = list(segments)
    renamed: list[str] = []
    for seg in segments:
        seg.abandon()
        for suffix in SUFFIXES:
            path = os.path.join(seg.directory, file_name(seg.base, suffix))
            if files.exists(path):
                files.rename(path, path + DELETED_SUFFIX)
                renamed.append(path + DELETED_SUFFIX)
    if segments:
        files.fsync_dir(segments[0].directory)
    for path in renamed:
        files.remove(path)
    return renamed


# -- the store-level calls ---------------------------------------------------------

def _partitions(store: Any, topic: str | None, partition: int | None) -> list[Partition]:
    parts = store._partitions()
    return [p for (t, n), p in parts.items()
            if (topic is None or t == topic) and (partition is None or n == partition)]


#: What the retention and DeleteRecords results say of the KRaft metadata log.
METADATA_LOG_SKIPPED = ("the KRaft metadata log: the quorum deletes its segments below its snapshots, the "
                        "log manager's retention never runs on it")


def _left_alone(part: Partition, dry_run: bool, reason: str | None = None) -> RetentionResult:
    """A result saying the partition was not touched, and why (``dry_run`` as the run's: the CLI's
    summary says "dry run" when a result does); ``reason`` None: the metadata log's or an internal
    topic's."""
    reason = reason or (METADATA_LOG_SKIPPED if not is_log_managed(part.topic)
                        else f"internal topic: {_internal_refusal(part.topic)}")
    return RetentionResult(part.topic, part.partition, high_watermark(part), part.log_start_offset,
                           part.log_start_offset, [], None, dry_run, skipped=reason)


def _internal_refusal(topic: str) -> str:
    """``ReplicaManager.deleteRecordsOnLocalLog``'s answer for an internal topic."""
    return f"Cannot delete records of internal topic {topic} (the broker answers InvalidTopicException)"


def retention(store: Any, *, now_ms: int | None = None, dry_run: bool = False, topic: str | None = None,
              partition: int | None = None) -> list[dict[str, Any]]:
    """:func:`delete_old_segments` over every (selected) partition of a store opened for appends; the
    KRaft metadata log is left alone (its result says why), and so is a topic whose config the broker
    creates no index with (:attr:`.partition.Partition.unwritable`: Kafka 3.8.0 cannot load it, and the
    roll a deletion of every segment takes, ``UnifiedLog.deleteSegments``, would create one)."""
    return [(delete_old_segments(p, now_ms=now_ms, dry_run=dry_run)
             if is_log_managed(p.topic) and p.unwritable is None
             else _left_alone(p, dry_run, p.unwritable)).to_dict()
            for p in _partitions(store, topic, partition)]


def delete_records_in(store: Any, before: int, *, dry_run: bool = False, topic: str | None = None,
                      partition: int | None = None) -> list[dict[str, Any]]:
    """:func:`delete_records` over every (selected) partition of a store opened for appends.

    An internal topic (and the KRaft metadata log) is refused as the broker refuses it: named (by
    ``topic``, or as the store's one partition), the call raises before anything changes; met in a
    whole log directory, it is left alone and its result says why, as is a topic whose config the broker
    creates no index with (:attr:`.partition.Partition.unwritable`: Kafka 3.8.0 loads none of its
    partitions, so none answers a DeleteRecords, and retention and compact leave it too).  Every other
    partition is checked
    (:func:`check_delete_records`) before any changes: one the broker would refuse (its
    ``DeleteRecords`` answer for that partition is an error) fails the whole call with nothing changed,
    rather than leaving the partitions before it changed and those after it not.

    :raises InvalidTopicError: ``topic`` names an internal topic, or the store is one's partition.
    :raises ConfigError: a selected partition's ``cleanup.policy`` has no ``delete``.
    :raises OffsetOutOfRangeError: ``before`` is negative (other than -1) or past a selected partition's
        high watermark.
    """
    parts = _partitions(store, topic, partition)
    named = topic is not None or getattr(store, "single", False)
    for part in parts:
        if named and (part.topic in INTERNAL_TOPICS or not is_log_managed(part.topic)):
            found = (f"the internal topic {part.topic} ({_internal_refusal(part.topic)})"
                     if part.topic in INTERNAL_TOPICS else f"{part.topic} ({METADATA_LOG_SKIPPED})")
            raise InvalidTopicError(f"expected a topic DeleteRecords may delete records of, found {found}",
                                    part.path)
    targets: dict[int, tuple[int, int]] = {}
    for i, part in enumerate(parts):
        if part.topic not in INTERNAL_TOPICS and is_log_managed(part.topic) and part.unwritable is None:
            hw = high_watermark(part)
            targets[i] = (check_delete_records(part, before, hw), hw)
    return [(_delete_records_to(p, *targets[i], dry_run) if i in targets
             else _left_alone(p, dry_run, p.unwritable)).to_dict() for i, p in enumerate(parts)]
