"""Input partitions of a Spark read, planned from the stores' segment maps.

Three pure steps, each testable without Spark:

1. :func:`pushdown` turns Spark's pushed filters into a :class:`Pruning`:
   topic, partition and offset predicates are exact and consumed; lower bounds
   on the time column prune through the store's time lookup (where it is exact:
   :func:`time_lookup_is_exact`) and stay with Spark for the exact check.
2. :func:`resolve_ranges` asks the store (driver side) for topics, partitions,
   offset ranges, time lookups and ``segment_infos`` and yields one
   :class:`PartitionRange` (absolute ``[start, end)`` plus its segments) per
   topic partition left after pruning.
3. :func:`plan` drops segments outside the ranges and fills input partitions
   with the rest in order, each to the same number of bytes, cutting a segment
   by offsets where a partition is full; the number of partitions is a multiple
   of the cluster's parallelism, so no wave of tasks leaves a core idle.  Input
   partitions carry paths and offsets only; executors open the store themselves.
   Where the partitions share one log (a RocketMQ commitlog) and the read takes
   most of the log it lies in, :func:`plan_log_order` cuts the log into byte
   ranges instead (see there); :func:`plan_read` chooses.  With ``maxRecordsPerPartition`` the ranges
   are cut into the tasks of Spark's Kafka connector instead (:func:`plan_by_records`), every
   micro-batch and the batch reads the connector cuts (:func:`splits_by_records`); :func:`plan_batch`
   chooses for a batch read.

Complexity: O(P + S) for P topic partitions and S segments (plus the pieces
produced).  Everything here runs on the driver in one thread.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from ..errors import ConfigError, NotFoundError, OffsetOutOfRangeError, SegstoreError
from .options import (
    EARLIEST,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    JAVA_INT_MAX,
    LATEST,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    STRATEGY_ERROR,
    TIME_CODES,
    ReadOptions,
)
from .schema import KAFKA

_MICROS_PER_MILLI = 1000


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment of a partition: offsets ``[start_offset, end_offset)`` in ``bytes`` bytes."""

    start_offset: int
    end_offset: int
    bytes: int
    path: str = ""

    @classmethod
    def coerce(cls, info: dict[str, Any] | SegmentInfo) -> SegmentInfo:
        if isinstance(info, SegmentInfo):
            return info
        return cls(int(info["start_offset"]), int(info["end_offset"]), int(info["bytes"]),
                   str(info.get("path", "")))


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """What to read of one topic partition: offsets ``[start, end)`` and its segments in order."""

    topic: str
    partition: int
    start: int
    end: int
    segments: tuple[SegmentInfo, ...]


@dataclass(frozen=True, slots=True)
class Slice:
    """Offsets ``[start, end)`` of one topic partition, about ``bytes`` bytes."""

    topic: str
    partition: int
    start: int
    end: int
    bytes: int


#: How a task reads its slices: each through its partition's own index, one after the other
#: (``queue``), or all in one pass over the shared log in its order (``log``: a RocketMQ task
#: walking its byte range of the commitlog, ``scan_arrow(queues=...)``).
ORDER_QUEUE = "queue"
ORDER_LOG = "log"


class SegstoreInputPartition(InputPartition):
    """One Spark task: the store to open, the slices to read and in which order, nothing else
    (picklable)."""

    def __init__(self, index: int, path: str, format_name: str, config: tuple[tuple[str, str], ...],
                 slices: tuple[Slice, ...], order: str = ORDER_QUEUE) -> None:
        super().__init__(index)
        self.index = index
        self.path = path
        self.format = format_name
        self.config = config
        self.slices = slices
        self.order = order

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.slices)

    def __repr__(self) -> str:
        return f"SegstoreInputPartition({self.index}, {len(self.slices)} slices, {self.bytes} bytes)"


@dataclass(slots=True)
class Pruning:
    """Restrictions from pushed filters; ``None`` means unrestricted.

    ``offset_min`` is inclusive, ``offset_max`` exclusive; ``timestamp_min`` is in
    milliseconds, a lower bound the store's time lookup turns into a start offset.
    """

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_min: int | None = None
    partition_max: int | None = None      # inclusive
    offset_min: int | None = None
    offset_max: int | None = None         # exclusive
    timestamp_min: int | None = None

    def allows_partition(self, partition: int) -> bool:
        if self.partitions is not None and partition not in self.partitions:
            return False
        if self.partition_min is not None and partition < self.partition_min:
            return False
        return self.partition_max is None or partition <= self.partition_max


def _raise_min(current: int | None, value: int) -> int:
    return value if current is None else max(current, value)


def _lower_max(current: int | None, value: int) -> int:
    return value if current is None else min(current, value)


def _intersect(current: frozenset | None, values: Iterable) -> frozenset:
    values = frozenset(values)
    return values if current is None else current & values


def _millis_floor(value: datetime) -> int:
    micros = round(value.timestamp() * 1_000_000)
    return micros // _MICROS_PER_MILLI


def _push_one(f: Filter, pruning: Pruning, *, time_column: str | None) -> bool:
    """Apply one filter to ``pruning``; True if Spark need not evaluate it again."""
    # Not (and any filter over other filters) names no column: Spark evaluates it.
    attribute = getattr(f, "attribute", None)
    if attribute is None or len(attribute) != 1:
        return False
    column = attribute[0]
    value = getattr(f, "value", None)
    if column == "topic":
        if isinstance(f, EqualTo) and isinstance(value, str):
            pruning.topics = _intersect(pruning.topics, [value])
            return True
        if isinstance(f, In) and all(isinstance(v, str) for v in f.value):
            pruning.topics = _intersect(pruning.topics, f.value)
            return True
        return False
    if column in ("partition", "offset"):
        if isinstance(f, In) and all(isinstance(v, int) for v in f.value):
            if column == "partition":
                pruning.partitions = _intersect(pruning.partitions, f.value)
                return True
            if f.value:  # offsets: prune to the hull, Spark keeps the exact membership test
                pruning.offset_min = _raise_min(pruning.offset_min, min(f.value))
                pruning.offset_max = _lower_max(pruning.offset_max, max(f.value) + 1)
            return False
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        low, high = {
            EqualTo: (value, value),
            GreaterThan: (value + 1, None),
            GreaterThanOrEqual: (value, None),
            LessThan: (None, value - 1),
            LessThanOrEqual: (None, value),
        }.get(type(f), (None, None))
        if low is None and high is None:
            return False
        if column == "partition":
            if low is not None:
                pruning.partition_min = _raise_min(pruning.partition_min, low)
            if high is not None:
                pruning.partition_max = _lower_max(pruning.partition_max, high)
        else:
            if low is not None:
                pruning.offset_min = _raise_min(pruning.offset_min, low)
            if high is not None:
                pruning.offset_max = _lower_max(pruning.offset_max, high + 1)
        return True
    if column == time_column and isinstance(value, datetime) and value.tzinfo is not None:
        if isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual)):
            ms = _millis_floor(value)
            # A bound before the epoch prunes nothing: records may hold such times (a v0 Kafka record's
            # timestamp is -1), and the time lookups give negative times other meanings (Kafka 3.8.0
            # UnifiedLog.fetchOffsetByTimestamp: -1 the log end, -2 its start, -3 the largest timestamp's
            # offset), so the lookup is never asked for one.
            if ms >= 0:
                pruning.timestamp_min = _raise_min(pruning.timestamp_min, ms)
    return False


def pushdown(filters: Sequence[Filter], *,
             time_column: str | None = "timestamp") -> tuple[Pruning, list[Filter]]:
    """Translate pushed filters (an AND) into a :class:`Pruning`.

    ``time_column`` is the column the store's ``offset_for_time`` looks up (Kafka: ``timestamp``;
    RocketMQ: ``storeTimestamp``), or None; :func:`resolve_ranges` prunes by its lower bound only
    where that lookup is exact (:func:`time_lookup_is_exact`).

    Returns the pruning and the filters Spark must still evaluate (by reference,
    as Spark requires): every filter not handled exactly here.
    """
    pruning = Pruning()
    remaining = [f for f in filters if not _push_one(f, pruning, time_column=time_column)]
    return pruning, remaining


class PlanningStore(Protocol):
    """What planning asks of a store (the driver opens it read-only)."""

    def topics(self) -> list[str]: ...
    def partitions(self, topic: str) -> list[int]: ...
    def offset_range(self, topic: str, partition: int) -> tuple[int, int]: ...
    def tail_error(self, topic: str, partition: int) -> SegstoreError | None: ...
    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None: ...
    def segment_infos(self, topic: str, partition: int) -> list[dict[str, Any]]: ...


@runtime_checkable
class SharedLogStore(PlanningStore, Protocol):
    """A store whose partitions are all written into one log (RocketMQ: queues into the commitlog)."""

    def queue_span(self, topic: str, partition: int, start: int, end: int) -> tuple[int, int]: ...
    def queue_offsets_at(self, topic: str, partition: int, positions: Iterable[int]) -> list[int]: ...


def position(bound: int, low: int, high: int) -> int:
    """The absolute offset a bound names in a partition holding ``[low, high)``, clamped to it."""
    if bound == EARLIEST:
        return low
    if bound == LATEST:
        return high
    return min(max(bound, low), high)


#: Formats whose own ``offset_for_time`` is the first offset at or after a time whatever order the times
#: were stored in: Kafka's goes by the ``.timeindex``, which keeps the largest time so far, and scans
#: from there for the first record at or after it (Kafka 3.8.0 LogSegment.findOffsetByTimestamp).
EXACT_TIME_LOOKUP_FORMATS = frozenset({KAFKA})


def high_watermark(store: PlanningStore, topic: str, partition: int, log_end: int) -> int:
    """Where a consumer's reads of ``topic``/``partition`` (whose log ends at ``log_end``) end: the store's
    high watermark where its format has one (Kafka: ``replication-offset-checkpoint``), else the log end.
    Spark's Kafka connector lists its latest offsets with ListOffsets (Kafka 3.8.0
    Partition.fetchOffsetForTimestamp answers LATEST_TIMESTAMP with the high watermark for
    READ_UNCOMMITTED, the last stable offset, below it, for READ_COMMITTED) and its consumers fetch no
    further (UnifiedLog.read, FetchIsolation.HIGH_WATERMARK): the records past it, which the followers had
    not copied, are not given to consumers yet."""
    found = getattr(store, "high_watermark", None)
    return log_end if found is None else min(log_end, found(topic, partition))


def last_fetchable(store: PlanningStore, options: ReadOptions, topic: str, partition: int,
                   log_end: int, high: int | None = None) -> int:
    """Where the options' consumer of ``topic``/``partition`` (whose log ends at ``log_end``) reads up to: the
    high watermark (:func:`high_watermark`), or under ``read_committed`` the last stable offset (the first
    offset of a transaction still open, at most the high watermark), as the connector lists latest offsets
    with the consumer's isolation level (Kafka 3.8.0 Partition.fetchOffsetForTimestamp: lastFetchableOffset
    is ``lastStableOffset`` for READ_COMMITTED, ``highWatermark`` for READ_UNCOMMITTED).  Also the bound of
    a start time's lookup: ListOffsets answers a time whose first record is at or past it with no offset
    (:func:`start_offset`).  ``high``: the high watermark, where the caller has it already."""
    if options.isolation != READ_COMMITTED:
        return high_watermark(store, topic, partition, log_end) if high is None else high
    stable = getattr(store, "last_stable_offset", None)     # formats with transactions (Kafka)
    return log_end if stable is None else min(log_end, stable(topic, partition))


def time_lookup_is_exact(store: PlanningStore) -> bool:
    """Whether ``store.offset_for_time`` answers a filter's time lower bound exactly: the first offset
    whose time is at or after it, so that every row before it fails the filter.

    Kafka's does (:data:`EXACT_TIME_LOOKUP_FORMATS`), and so does segstore's ``time`` layout, which keeps
    the running maximum (:mod:`segstore.layouts.time`).  RocketMQ's own lookup does not: it binary
    searches the consume queue for a store time as if store times grew with queue offsets, as the
    broker does (RocketMQ 4.9.7 ConsumeQueue.getOffsetInQueueByTime), but the store time is the broker's
    clock, which can step back, and a search then lands past rows that match.
    """
    from ..layouts.time import TimeLayout

    indexes = getattr(store, "indexes", None)
    if indexes is not None and isinstance(getattr(indexes, "layouts", {}).get("time"), TimeLayout):
        return True
    return getattr(store, "format", None) in EXACT_TIME_LOOKUP_FORMATS


def _code_offset(ms: int, low: int, latest: int) -> int | None:
    """Where a time option's ListOffsets code (:data:`.options.TIME_CODES`) points, as a Kafka 3.8.0
    broker answers it (Partition.fetchOffsetForTimestamp: LATEST_TIMESTAMP the last fetchable offset,
    ``latest``; EARLIEST_TIMESTAMP and EARLIEST_LOCAL_TIMESTAMP the log start, ``low``, no tiered storage
    being read); None for a time."""
    if ms == LATEST_TIMESTAMP:
        return latest
    if ms in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return low
    return None


def _time_offset(store: PlanningStore, topic: str, partition: int, ts: int, high: int) -> int:
    found = store.offset_for_time(topic, partition, ts)
    return high if found is None else found


def _filter_offset(store: PlanningStore, topic: str, partition: int, ts: int, high: int) -> int:
    """Where a filter's time lower bound ``ts`` lets a read start: the first offset at or after it, every
    segment searched where the store says so (Kafka's ``first_offset_from_time``: its broker's lookup,
    ``offset_for_time``, answers none where a segment without record times comes first, though later
    records match), else its ``offset_for_time``; ``high`` where none is."""
    lookup = getattr(store, "first_offset_from_time", None)
    found = (lookup if lookup is not None else store.offset_for_time)(topic, partition, ts)
    return high if found is None else found


def check_lost(options: ReadOptions, what: str, topic: str, partition: int, asked: int, low: int) -> int:
    """``asked`` if the store still holds it; else, offsets before ``low`` being gone (retention
    deleted them), ``low`` when ``failOnDataLoss`` is false.

    :raises OffsetOutOfRangeError: ``asked`` < ``low`` and ``failOnDataLoss`` is true (the default).
    """
    if asked < 0 or asked >= low:
        return asked
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(f"{what} asks {topic}-{partition} from offset {asked}, but the store "
                                    f"holds offsets from {low} on (retention removed the rest); set option "
                                    f"failOnDataLoss=false to read from {low} instead", options.path)
    return low


def check_gone_back(options: ReadOptions, topic: str, partition: int, start: int, end: int) -> None:
    """Report a micro-batch of ``topic``/``partition`` ending at ``end`` before its ``start``: the log now
    ends before the offset the stream reached (the topic was recreated, the store restored from an older
    copy, the log truncated, or ``startingOffsets`` named an offset past the end), as Spark's Kafka
    connector reports it (Spark 4 KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: "Partition
    X's offset was changed from A to B"): an error, or with ``failOnDataLoss=false`` a warning, the
    stream going on from ``end``.

    :raises OffsetOutOfRangeError: ``failOnDataLoss`` is true (the default).
    """
    message = (f"{topic}-{partition}'s offset was changed from {start} to {end}, some data may have been "
               f"missed: the log ends before the stream's offset (the topic recreated, the store restored "
               f"from an older copy, the log truncated, or startingOffsets past the end)")
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(f"{message}; set option failOnDataLoss=false to go on from {end}",
                                    options.path)
    warnings.warn(f"segstore: {options.path}: {message}; going on from {end} (failOnDataLoss=false)",
                  stacklevel=2)


def check_partitions_changed(options: ReadOptions, gone: Sequence[tuple[str, int]],
                             added: Sequence[tuple[str, int, int]]) -> None:
    """Report a micro-batch's partitions that are gone from the store since its start (``gone``: the topic
    deleted, or no longer chosen by the options), and partitions new since then whose first offset is not 0
    (``added``: ``(topic, partition, first offset)``: retention removed offsets before the stream saw them),
    as Spark's Kafka connector reports both (Spark 4
    KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: "... are gone", "Added partition X starts
    from N instead of 0", through reportDataLoss): an error, or
    with ``failOnDataLoss=false`` a warning, the stream going on without the gone partitions and from the
    added ones' first offsets.

    :raises OffsetOutOfRangeError: ``failOnDataLoss`` is true (the default).
    """
    messages = []
    if gone:
        messages.append(f"{_partition_names(gone)} {'is' if len(gone) == 1 else 'are'} gone from the store "
                        "(the topic deleted, or the options no longer choose it)")
    messages += [f"added partition {t}-{p} starts from offset {first} instead of 0" for t, p, first in added]
    if not messages:
        return
    message = "; ".join(messages) + ": some data may have been missed"
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(f"{message}; set option failOnDataLoss=false to go on without it",
                                    options.path)
    warnings.warn(f"segstore: {options.path}: {message}; going on without it (failOnDataLoss=false)",
                  stacklevel=2)


def _per_partition(entries: tuple[tuple[str, int, int], ...], topic: str, partition: int, name: str) -> int:
    for t, p, value in entries:
        if t == topic and p == partition:
            return value
    raise ConfigError(f"option {name} must name every partition read, as Spark's Kafka connector requires; "
                      f"{topic}-{partition} is missing")


def start_offset(store: PlanningStore, options: ReadOptions, topic: str, partition: int,
                 low: int, high: int, *, latest: int | None = None, past_end: bool = False,
                 batch: bool = False) -> int:
    """Where a read of ``topic``/``partition`` (holding ``[low, high)``) starts.

    ``latest`` is where a start at ``latest`` starts (default ``high``; a read_committed stream's
    last stable offset).  ``past_end``: keep a ``startingOffsets`` offset past ``high`` (a stream
    reports it at its first micro-batch, :func:`check_gone_back`) instead of starting at ``high``.
    ``batch``: a ``startingOffsets`` offset is the start as given, for :func:`check_readable` to judge
    as the connector's reader judges it.

    As Spark's Kafka connector: ``startingTimestamp`` first, then
    ``startingOffsetsByTimestamp``, then ``startingOffsets``.  A start time with no record at or after
    it before ``latest`` follows ``startingOffsetsByTimestampStrategy``: the broker's ListOffsets answers
    a time lookup only with an offset below the last fetchable one (Kafka 3.8.0
    Partition.fetchOffsetForTimestamp filters ``offset < lastFetchableOffset``: the high watermark, or the
    last stable offset under read_committed), and the connector takes no offset as the strategy says
    (Spark 4 KafkaOffsetReaderAdmin.readTimestampOffsets: an error, or the latest offset).  The
    ListOffsets codes -1, -2 and -4 start at ``latest`` and at ``low`` (:func:`_code_offset`).

    :raises OffsetOutOfRangeError: no record at or after the start time before ``latest`` (strategy
        ``error``), or offsets asked that retention removed (``failOnDataLoss``).
    """
    if latest is None:
        latest = high
    if options.starting_timestamp is not None:
        name, ms = "startingTimestamp", options.starting_timestamp
    elif options.starting_timestamps is not None:
        name = "startingOffsetsByTimestamp"
        ms = _per_partition(options.starting_timestamps, topic, partition, name)
    else:
        asked = options.starting.for_partition(topic, partition)
        if batch:
            return low if asked == EARLIEST else asked
        asked = check_lost(options, "option startingOffsets", topic, partition, asked, low)
        if asked == LATEST:
            return latest
        return asked if past_end and asked > high else position(asked, low, high)
    code = _code_offset(ms, low, latest)
    if code is not None:
        return code
    found = store.offset_for_time(topic, partition, ms)
    if found is not None and found < latest:
        return min(max(found, low), high)
    if options.starting_timestamp_strategy == STRATEGY_ERROR:
        raise OffsetOutOfRangeError(f"option {name}: no record of {topic}-{partition} below its latest "
                                    f"offset {latest} has a timestamp at or after {ms}; set option "
                                    "startingOffsetsByTimestampStrategy=latest to start at the partition's "
                                    "latest offset", options.path)
    return latest


def end_offset(store: PlanningStore, options: ReadOptions, topic: str, partition: int,
               low: int, high: int) -> int:
    """Where a read of ``topic``/``partition`` ends (exclusive): ``endingTimestamp``, then
    ``endingOffsetsByTimestamp``, then ``endingOffsets``; an end time after every record
    is the partition's end, as in the connector; the ListOffsets codes -1, -2 and -4 its latest offset and
    its log start (:func:`_code_offset`).  An ``endingOffsets`` offset is the end as given, for
    :func:`check_readable` to judge."""
    ms = options.ending_timestamp
    if ms is None and options.ending_timestamps is not None:
        ms = _per_partition(options.ending_timestamps, topic, partition, "endingOffsetsByTimestamp")
    if ms is not None:
        code = _code_offset(ms, low, high)
        if code is not None:
            return code
        return min(max(_time_offset(store, topic, partition, ms, high), low), high)
    asked = options.ending.for_partition(topic, partition)
    return high if asked == LATEST else asked


def check_readable(options: ReadOptions, topic: str, partition: int, start: int, end: int, low: int,
                   latest: int, *, given_end: bool = True, split: bool = False) -> tuple[int, int]:
    """The offsets ``[start, end)`` a batch read of ``topic``/``partition`` (holding ``[low, latest)``: its
    latest offset is the last fetchable one) gives, judged as Spark's Kafka connector's reader judges its
    resolved range (Spark 4 KafkaSourceRDD.compute, KafkaDataConsumer.get):

    - a start after the end fails the read whatever ``failOnDataLoss`` says ("Beginning offset ... is
      after the ending offset", an assertion there): a startingOffsets offset past the latest offset with
      the end at latest, an endingOffsets offset before the log start with the start at earliest, a start
      time after an end offset; but where the connector splits partitions (``split``: a ``minPartitions``
      option above the number of partitions read), it resolves the ranges on the driver and leaves out
      those that hold no offset (KafkaOffsetReaderAdmin.getOffsetRangesFromUnresolvedOffsets,
      KafkaOffsetRangeCalculator.getRanges: ``filter(_.size > 0)``), and the partition is not read;
    - offsets before the log start (retention removed them) are data loss (:func:`check_lost`);
    - an end given past the latest offset (``given_end``: an endingOffsets offset; ends at latest or by time
      never are): the consumer finds nothing to fetch there (InternalKafkaConsumer.fetch raises
      OffsetOutOfRangeException at an offset at or past it), which is data loss too: with
      ``failOnDataLoss`` an error ("Could not read records in offset [latest, end)"), else the read stops at
      the latest offset.

    :raises OffsetOutOfRangeError: as above.
    """
    where = f"topic {topic} partition {partition}"
    if start > end and split:
        return end, end
    if start > end:
        raise OffsetOutOfRangeError(f"Beginning offset {start} is after the ending offset {end} for {where}: "
                                    "the options resolve to a start after the end (the partition holds "
                                    f"offsets from {low} up to its latest offset {latest}); you either "
                                    "provided an invalid startingOffsets or endingOffsets, or the log was "
                                    "truncated", options.path)
    if start == end:
        return start, end
    if start < low:
        try:
            start = check_lost(options, "option startingOffsets", topic, partition, start, low)
        except OffsetOutOfRangeError as err:
            # the connector's words first (KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE), then which option
            raise OffsetOutOfRangeError(f"Could not read records in offset [{start}, {end}) for {where}: "
                                        f"{err.message}", options.path) from None
    if start < end and end > latest and given_end:
        if options.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"Could not read records in offset [{max(start, latest)}, {end}) for "
                                        f"{where}: its latest offset is {latest} (endingOffsets or "
                                        "startingOffsets past the end of the partition); set option "
                                        f"failOnDataLoss=false to read up to {latest}", options.path)
        end = max(start, latest)
    return start, end


def _partition_names(pairs: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in pairs)


def _not_read(entries: Iterable[tuple[str, int, int]], read: set[tuple[str, int]]) -> list[tuple[str, int]]:
    """The partitions per-partition option ``entries`` (``(topic, partition, value)``) name that the read
    does not include, in order."""
    return sorted({(t, p) for t, p, _ in entries} - read)


def check_named_offsets(options: ReadOptions, read: set[tuple[str, int]], *, ending: bool = True) -> None:
    """Refuse per-partition offsets that do not name exactly the partitions the read includes.

    Spark's Kafka connector takes specific offsets only for every partition it reads and no other: a
    batch read's startingOffsets and endingOffsets alike (Spark 4
    KafkaOffsetReaderAdmin.fetchPartitionOffsets, KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED) and a stream's
    startingOffsets (KafkaOffsetReaderAdmin.fetchSpecificOffsets: "If startingOffsets contains specific
    offsets, you must specify all TopicPartitions"), ``-2``/``-1`` standing for earliest/latest.  A
    partition left out took the named default here, and one named that is not read (a typo, a partition
    the store lacks, one ``subscribe``/``assign`` leave out) is a mistake too.  ``ending``: check
    ``endingOffsets`` too (a stream has no end).

    :raises ConfigError: naming the option, the partitions specified and those read.
    """
    bounds = [("startingOffsets", options.starting), *([("endingOffsets", options.ending)] if ending else [])]
    for name, bound in bounds:
        named = {(t, p) for t, p, _ in bound.offsets}
        if not bound.specific or named == read:
            continue
        extra, missing = sorted(named - read), sorted(read - named)
        what = []
        if extra:
            what.append(f"names {_partition_names(extra)}, which the read does not include (the store has no "
                        "such partition, or subscribe, subscribePattern or assign leave it out)")
        if missing:
            what.append(f"lacks {_partition_names(missing)}")
        raise ConfigError(f"option {name} {'; '.join(what)}: if {name} contains specific offsets, it must "
                          "specify all TopicPartitions read and no other (use -1 for latest, -2 for "
                          "earliest), as Spark's Kafka connector requires; specified: "
                          f"{_partition_names(sorted(named)) or 'none'}, assigned: "
                          f"{_partition_names(sorted(read)) or 'none'}", options.path)


def check_batch_bounds(options: ReadOptions) -> None:
    """Refuse offsets a batch read cannot start or end at, as Spark's Kafka connector does
    (Spark 4 KafkaSourceProvider.validateBatchOptions): a start at ``latest`` (-1) or an end at
    ``earliest`` (-2), named or per partition, which would read nothing, and a start given after its end
    (:func:`_check_start_not_after_end`).  Streams may start at latest.

    :raises ConfigError: naming the option and the partition.
    """
    for name, bound, refused, word in (("startingOffsets", options.starting, LATEST, "latest"),
                                       ("endingOffsets", options.ending, EARLIEST, "earliest")):
        if bound.default == refused:
            raise ConfigError(f"option {name} cannot be {word} for a batch query (it would read nothing; "
                              f"Spark's Kafka connector refuses it too)", options.path)
        for t, p, offset in bound.offsets:
            if offset == refused:
                raise ConfigError(f"option {name} for {t}-{p} cannot be {word} ({refused}) for a batch query "
                                  f"(it would read nothing; Spark's Kafka connector refuses it too)",
                                  options.path)
    _check_start_not_after_end(options)


def _check_start_not_after_end(options: ReadOptions) -> None:
    """Refuse a partition whose start, as given, is after its end, where both ends are given alike, as
    Spark's Kafka connector does before it reads (Spark 4.1 KafkaSourceProvider.checkOffsetLimitValidity,
    called from KafkaScan.toBatch): ``startingOffsets`` against ``endingOffsets`` (where no timestamp option
    takes precedence over either), ``startingOffsetsByTimestamp`` against ``endingOffsetsByTimestamp``
    (where neither ``startingTimestamp`` nor ``endingTimestamp`` is given).  Negative offsets (-2 earliest,
    -1 latest) are not compared.  Such a read read nothing, quietly.

    :raises ConfigError: naming the partition and both values.
    """
    if options.starting_timestamp is not None or options.ending_timestamp is not None:
        return
    pairs: tuple[tuple[str, str, tuple[tuple[str, int, int], ...], tuple[tuple[str, int, int], ...]], ...]
    if options.starting_timestamps is not None and options.ending_timestamps is not None:
        pairs = (("startingOffsetsByTimestamp", "endingOffsetsByTimestamp", options.starting_timestamps,
                  options.ending_timestamps),)
    elif options.starting_timestamps is None and options.ending_timestamps is None:
        pairs = (("startingOffsets", "endingOffsets", options.starting.offsets, options.ending.offsets),)
    else:
        return
    for start_name, end_name, starts, ends in pairs:
        end_of = {(t, p): value for t, p, value in ends}
        named = sorted({(t, p) for t, p, _ in starts}), sorted(end_of)
        if named[0] != named[1] and (start_name != "startingOffsets" or (options.starting.specific
                                                                           and options.ending.specific)):
            # MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET
            raise ConfigError(f"options {start_name} and {end_name} must name the same partitions, as "
                              f"Spark's Kafka connector requires; {start_name}: "
                              f"{_partition_names(named[0]) or 'none'}, {end_name}: "
                              f"{_partition_names(named[1]) or 'none'}", options.path)
        for t, p, start in starts:
            end = end_of.get((t, p))
            if end is not None and start >= 0 and end >= 0 and start > end:
                raise ConfigError(f"option {start_name} for {t}-{p} ({start}) is after its {end_name} "
                                  f"({end}): the start must not be after the end (Spark's Kafka connector "
                                  "refuses it too)", options.path)


def check_named(options: ReadOptions, read: set[tuple[str, int]], *, ending: bool = True) -> None:
    """The connector refuses per-partition timestamps naming partitions it does not read (Spark 4
    KafkaOffsetReaderAdmin.fetchSpecificTimestampBasedOffsets, in batch and in streams alike), and
    specific offsets that do not name the partitions read (:func:`check_named_offsets`).  ``ending``:
    check the ending options too (a stream has no end).

    :raises ConfigError: naming the option and the partitions.
    """
    named = [("startingOffsetsByTimestamp", options.starting_timestamps)]
    if ending:
        named.append(("endingOffsetsByTimestamp", options.ending_timestamps))
    for name, entries in named:
        extra = _not_read(entries or (), read)
        if extra:
            raise ConfigError(f"option {name} must name exactly the partitions read; the store has no "
                              f"{_partition_names(extra)} among them", options.path)
    check_named_offsets(options, read, ending=ending)


#: Kafka 3.8.0 Topic.INTERNAL_TOPICS: described as internal, listed by no ``listTopics`` of the connector.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: The topics of a Kafka log dir the connector reads nothing of: the internal ones, and the KRaft metadata
#: log (KafkaRaftServer's ``__cluster_metadata``), which no client sees as a topic.
KAFKA_NOT_CLIENT_TOPICS = KAFKA_INTERNAL_TOPICS | {"__cluster_metadata"}


def selected(store: PlanningStore, options: ReadOptions) -> list[tuple[str, int]]:
    """The (topic, partition) pairs ``subscribe`` / ``subscribePattern`` / ``assign`` leave, in order.

    As Spark's Kafka connector finds them (Spark 4 ConsumerStrategy.scala: SubscribeStrategy and
    AssignStrategy describe the topics named, ``Admin.describeTopics``, which fails for a topic the cluster
    lacks; AssignStrategy then keeps the partitions named among those the topics have, so a partition the
    topic lacks is not read, and no error).

    Kafka's internal topics are left out as the connector leaves them out: ``subscribePattern`` lists the
    topics through ``Admin.listTopics``, which lists no internal topic, and ``subscribe`` and ``assign`` drop
    the partitions of those ``describeTopics`` calls internal (ConsumerStrategy.retrieveAllPartitions:
    ``filterNot(_._2.isInternal)``; Kafka 3.8.0 Topic.isInternal: ``__consumer_offsets`` and
    ``__transaction_state``); ``__cluster_metadata`` is the KRaft metadata log, no topic to the cluster's
    clients at all.  Without any of the three options every topic is read.

    :raises NotFoundError: ``subscribe`` or ``assign`` names a topic the store does not hold.
    """
    topics = store.topics()
    chosen = options.topics is not None or options.topic_pattern is not None or options.assign is not None
    if chosen and getattr(store, "format", None) == KAFKA:
        topics = [t for t in topics if t not in KAFKA_NOT_CLIENT_TOPICS]
    named = options.topics if options.topics is not None else \
        sorted({t for t, _ in options.assign}) if options.assign is not None else ()
    missing = sorted(set(named) - set(topics) - KAFKA_INTERNAL_TOPICS)
    if missing:
        option = "subscribe" if options.topics is not None else "assign"
        raise NotFoundError(f"option {option} names topic {', '.join(missing)}, which the store does not "
                            "hold (Spark's Kafka connector fails alike: describeTopics finds no such topic)",
                            options.path)
    return [(t, p) for t in topics if options.selects_topic(t)
            for p in store.partitions(t) if options.selects(t, p)]


def resolve_ranges(store: PlanningStore, options: ReadOptions, pruning: Pruning | None = None,
                   *, with_segments: bool = True) -> list[PartitionRange]:
    """The offset range of every topic partition the options and the pruning leave.

    Costs one ``offset_range`` per partition, plus one time lookup per partition and time bound.

    :raises OffsetOutOfRangeError, ConfigError, NotFoundError: see :func:`start_offset`,
        :func:`end_offset`, :func:`selected`, :func:`check_batch_bounds`, :func:`check_named`.
    """
    return _resolve(store, options, pruning, with_segments=with_segments)[0]


def plan_batch(store: PlanningStore, options: ReadOptions, pruning: Pruning | None = None) -> Plan:
    """The plan of a batch read: its ranges (:func:`resolve_ranges`) cut as the connector cuts them where
    ``maxRecordsPerPartition`` makes it split them (:func:`splits_by_records`, :func:`plan_by_records`),
    else by bytes (:func:`plan_read`, ``minPartitions`` the options' or the default parallelism).

    :raises OffsetOutOfRangeError, ConfigError, NotFoundError: as :func:`resolve_ranges`.
    """
    ranges, unresolved = _resolve(store, options, pruning)
    if splits_by_records(options, unresolved):
        return plan_by_records(ranges, options)
    return plan_read(store, ranges, max_bytes=options.max_bytes_per_partition,
                     min_partitions=options.min_partitions or 1)


def _unresolved(options: ReadOptions, topic: str, partition: int, start: int, end: int, latest: int,
                high: int) -> int:
    """The size of ``topic``/``partition``'s range as the connector judges it before it resolves earliest
    and latest (Spark 4 KafkaOffsetReaderAdmin.getOffsetRangesFromUnresolvedOffsets: ``untilOffset -
    fromOffset`` of the offsets ``fetchPartitionOffsets`` gives): -2 for earliest and -1 for latest, an
    offset as named; a time as ListOffsets answers it (an offset, a ListOffsets code's offset too), or -1
    where no record matches (readTimestampOffsets: LATEST, for an end, or a start with the strategy
    ``latest``).  ``start``/``end``: the range resolved here, a time with no match resolved to ``latest``
    (the start's bound) and ``high`` (the end's)."""
    def listed(ms: int | None, entries: tuple[tuple[str, int, int], ...] | None, name: str, named: int,
               resolved: int, bound: int) -> int:
        if ms is None and entries is not None:
            ms = _per_partition(entries, topic, partition, name)
        if ms is None:
            return named
        return LATEST if ms not in TIME_CODES and resolved == bound else resolved

    return (listed(options.ending_timestamp, options.ending_timestamps, "endingOffsetsByTimestamp",
                   options.ending.for_partition(topic, partition), end, high)
            - listed(options.starting_timestamp, options.starting_timestamps, "startingOffsetsByTimestamp",
                     options.starting.for_partition(topic, partition), start, latest))


def _resolve(store: PlanningStore, options: ReadOptions, pruning: Pruning | None = None,
             *, with_segments: bool = True) -> tuple[list[PartitionRange], list[int]]:
    """:func:`resolve_ranges`, with the size of every partition's range as the connector judges it to
    decide whether to split (:func:`_unresolved`), a partition pruned by a filter included."""
    check_batch_bounds(options)
    pruning = pruning or Pruning()
    # a filter's time bound prunes only where the lookup cannot skip a row that matches it (Spark
    # checks the filter on every row read either way)
    timestamp_min = pruning.timestamp_min if time_lookup_is_exact(store) else None
    pairs = selected(store, options)
    check_named(options, set(pairs))
    # where the options bound a read by more than earliest and latest, they may make it fail (see
    # check_readable): a partition a filter prunes is judged too, as the connector, which takes no filter,
    # reads it
    bounded = (options.starting.specific or options.ending.specific or options.starting_timestamp is not None
               or options.ending_timestamp is not None or options.starting_timestamps is not None
               or options.ending_timestamps is not None)
    split = options.min_partitions_given is not None and options.min_partitions_given > len(pairs)
    ranges = []
    unresolved = []
    for topic, partition in pairs:
        kept = (pruning.topics is None or topic in pruning.topics) and pruning.allows_partition(partition)
        if not kept and not bounded:
            unresolved.append(LATEST - EARLIEST)
            continue
        low, log_end = store.offset_range(topic, partition)
        high = high_watermark(store, topic, partition, log_end)
        latest = max(low, last_fetchable(store, options, topic, partition, log_end, high))
        start = start_offset(store, options, topic, partition, low, high, latest=latest, batch=True)
        end = end_offset(store, options, topic, partition, low, high)
        given_end = (options.ending_timestamp is None and options.ending_timestamps is None
                     and options.ending.for_partition(topic, partition) != LATEST)
        unresolved.append(_unresolved(options, topic, partition, start, end, latest, high))
        start, end = check_readable(options, topic, partition, start, end, low, latest, given_end=given_end,
                                    split=split)
        if not kept:
            continue
        if timestamp_min is not None:
            start = max(start, _filter_offset(store, topic, partition, timestamp_min, high))
        if pruning.offset_min is not None:
            start = max(start, pruning.offset_min)
        if pruning.offset_max is not None:
            end = min(end, pruning.offset_max)
        if end >= log_end:
            # reading to the end: a torn tail is what a read of every message raises (scan_arrow,
            # dump), not messages to leave out quietly
            error = store.tail_error(topic, partition)
            if error is not None:
                raise error
        if start >= end:
            continue
        segments: tuple[SegmentInfo, ...] = ()
        if with_segments:
            segments = tuple(SegmentInfo.coerce(s) for s in store.segment_infos(topic, partition))
        ranges.append(PartitionRange(topic, partition, start, end, segments))
    return ranges, unresolved


@dataclass(slots=True)
class Plan:
    """The planned input partitions and what pruning dropped (for tests and logs); ``order`` says how
    each task reads its slices (:data:`ORDER_QUEUE` or :data:`ORDER_LOG`)."""

    partitions: list[list[Slice]] = field(default_factory=list)
    segments_total: int = 0
    segments_read: int = 0
    bytes: int = 0
    order: str = ORDER_QUEUE


def _pieces(rng: PartitionRange) -> Iterable[Slice]:
    """One slice per segment overlapping the range, clipped to it, its bytes in proportion."""
    segments = rng.segments or (SegmentInfo(rng.start, rng.end, rng.end - rng.start),)
    for seg in segments:
        start = max(seg.start_offset, rng.start)
        end = min(seg.end_offset, rng.end)
        if start >= end:
            continue
        span = seg.end_offset - seg.start_offset
        size = math.ceil(seg.bytes * (end - start) / span) if span > 0 else seg.bytes
        yield Slice(rng.topic, rng.partition, start, end, size)


def _overlaps(rng: PartitionRange, seg: SegmentInfo) -> bool:
    return seg.start_offset < rng.end and seg.end_offset > rng.start


def _add(slices: list[Slice], piece: Slice) -> None:
    """Append ``piece``, merged into the last slice when it continues its offsets."""
    last = slices[-1] if slices else None
    continues = last is not None and (last.topic, last.partition, last.end) == (piece.topic, piece.partition,
                                                                              piece.start)
    if last is not None and continues:
        slices[-1] = Slice(last.topic, last.partition, last.start, piece.end, last.bytes + piece.bytes)
    else:
        slices.append(piece)


def plan(ranges: Sequence[PartitionRange], *, max_bytes: int, min_partitions: int = 1) -> Plan:
    """Cut the ranges into input partitions of equal bytes, in a multiple of ``min_partitions``.

    ``min_partitions`` is the cluster's parallelism (or the ``minPartitions`` option):
    the partition count is the smallest multiple of it whose partitions hold at most
    ``max_bytes``, so every wave of tasks keeps every core busy and no wave ends with a
    straggler.  Partitions are filled to the same size in (topic, partition, offset)
    order, cutting a segment by offsets where a partition's end falls inside it (bytes
    per offset taken as even within a segment), so sizes differ by at most a message
    (more only where one message is larger than a partition); a piece that continues
    its predecessor's offsets in the same partition is merged into one slice.
    """
    result = Plan()
    pieces: list[Slice] = []
    for rng in ranges:
        result.segments_total += len(rng.segments)
        result.segments_read += sum(1 for s in rng.segments if _overlaps(rng, s))
        pieces.extend(_pieces(rng))
    total = sum(p.bytes for p in pieces)
    wave = max(1, min_partitions)
    parts = wave * max(1, math.ceil(total / (max(1, max_bytes) * wave)))
    # partition k ends where the bytes so far reach k/parts of the total (cumulative, so that
    # rounding to whole messages never leaves a sliver of a partition at the end)
    k, filled = 1, 0
    boundary = math.ceil(total * k / parts)
    current: list[Slice] = []
    for piece in pieces:
        result.bytes += piece.bytes
        while piece.start < piece.end:
            if filled + piece.bytes <= boundary:
                _add(current, piece)
                filled += piece.bytes
                break
            count = piece.end - piece.start
            # the offsets nearest to the boundary (bytes per offset even within a segment)
            take = min(count, round(max(0, boundary - filled) * count / piece.bytes))
            if take == 0 and not current:
                take = 1                                  # one message larger than a partition
            if take:
                head = math.ceil(piece.bytes * take / count)
                _add(current, Slice(piece.topic, piece.partition, piece.start, piece.start + take, head))
                filled += head
                piece = Slice(piece.topic, piece.partition, piece.start + take, piece.end, piece.bytes - head)
            result.partitions.append(current)
            current = []
            k += 1
            boundary = math.ceil(total * k / parts)
    if current:
        result.partitions.append(current)
    return result


#: The least share of the shared log's bytes (between the first and the last message read) that a
#: read must take for :func:`plan_read` to plan it in log order.  Below it, a task walking its byte
#: range would mostly decode messages it drops; above it, reading each queue through its consume
#: queue visits the log out of order, which costs more than the walk.  Measured in one process
#: (benchmarks/bench_spark.py's store, 8 interleaved queues, the connector's columns, two threads),
#: log order against the queue reads: 4M messages 0.60x the time for every queue, 1.15x for half of
#: them, 1.8x for a quarter, 3.0x for an eighth; 1M messages 0.68x, 1.2x, 1.7x, 2.7x.  They meet a
#: little above half.
LOG_ORDER_MIN_FRACTION = 0.6


def plan_read(store: PlanningStore, ranges: Sequence[PartitionRange], *, max_bytes: int,
              min_partitions: int = 1) -> Plan:
    """The plan of a batch read: :func:`plan_log_order` where it applies, else :func:`plan`."""
    found = plan_log_order(store, ranges, max_bytes=max_bytes, min_partitions=min_partitions)
    return found if found is not None else plan(ranges, max_bytes=max_bytes, min_partitions=min_partitions)


def plan_log_order(store: PlanningStore, ranges: Sequence[PartitionRange], *, max_bytes: int,
                   min_partitions: int = 1) -> Plan | None:
    """Input partitions that are byte ranges of the shared log (a RocketMQ commitlog), read in its order.

    Applies to a :class:`SharedLogStore` whose ranges take at least :data:`LOG_ORDER_MIN_FRACTION` of
    the log's bytes from the first message they read to the end of the last (the ranges' bytes from
    their segment infos, the span from ``queue_span``); None otherwise (plan by partitions).

    The partition count is :func:`plan`'s (a multiple of ``min_partitions`` holding at most
    ``max_bytes`` of the ranges' bytes each); the span is cut into that many byte ranges of equal
    length, and each task gets, per range, the offsets whose messages start in its byte range
    (``queue_offsets_at`` at the cuts: exact, a cut inside a message leaves it to the range it starts
    in).  So every offset of every range is in exactly one slice, and a task reads its slices in one
    pass over its byte range (:data:`ORDER_LOG`).  Tasks whose byte range holds none of the ranges'
    messages are left out.  ``O(P log n)`` lookups per cut for P partitions read, no message read.
    """
    if not isinstance(store, SharedLogStore) or not ranges:
        return None
    spans = [(a, b) for a, b in (store.queue_span(r.topic, r.partition, r.start, r.end) for r in ranges)
             if b > a]
    if not spans:
        return None
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    pieces = [list(_pieces(r)) for r in ranges]
    sizes = [sum(p.bytes for p in ps) for ps in pieces]
    total = sum(sizes)
    if total < LOG_ORDER_MIN_FRACTION * (last - first):
        return None
    result = Plan(order=ORDER_LOG, bytes=total)
    wave = max(1, min_partitions)
    parts = wave * max(1, math.ceil(total / (max(1, max_bytes) * wave)))
    cuts = [first + (last - first) * k // parts for k in range(1, parts)]
    tasks: list[list[Slice]] = [[] for _ in range(parts)]
    for rng, size in zip(ranges, sizes, strict=True):
        result.segments_total += len(rng.segments)
        result.segments_read += sum(1 for s in rng.segments if _overlaps(rng, s))
        at = [rng.start, *(min(max(o, rng.start), rng.end)
                           for o in store.queue_offsets_at(rng.topic, rng.partition, cuts)), rng.end]
        count = rng.end - rng.start
        for k, (a, b) in enumerate(itertools.pairwise(at)):
            if a < b:
                tasks[k].append(Slice(rng.topic, rng.partition, a, b, math.ceil(size * (b - a) / count)))
    result.partitions = [t for t in tasks if t]
    return result


def splits_by_records(options: ReadOptions, unresolved: Sequence[int]) -> bool:
    """Whether a batch read cuts its ranges by ``maxRecordsPerPartition``: where the option is given and the
    connector divides its ranges (Spark 4 KafkaOffsetReaderAdmin.shouldDivvyUpLargePartitions: a
    ``minPartitions`` option above the number of partitions read, or a range larger than the maximum, judged
    before earliest (-2) and latest (-1) are resolved: ``unresolved``, one size per partition read).  So
    earliest to latest, the defaults, is never split by the maximum alone (its size is 1), as there."""
    most = options.max_records_per_partition
    if most is None:
        return False
    fewer = options.min_partitions_given is not None and options.min_partitions_given > len(unresolved)
    return fewer or any(size > most for size in unresolved)


def _divide(rng: PartitionRange, parts: int) -> list[PartitionRange]:
    """``rng`` in ``parts`` pieces as Spark 4 KafkaOffsetRangeCalculator.getDividedPartition cuts it: each
    piece ``remaining // parts left`` offsets, so the last ones take the remainder of the division."""
    pieces = []
    remaining, start = rng.end - rng.start, rng.start
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        end = min(start + size, rng.end)
        pieces.append(PartitionRange(rng.topic, rng.partition, start, end, rng.segments))
        start = end
    return pieces


def _part_count(size: int, total: int, parts: int) -> int:
    # KafkaOffsetRangeCalculator.getPartCount: max(Math.round(size.toDouble / total * parts), 1).toInt
    return max(math.floor(size / total * parts + 0.5), 1)


def record_ranges(ranges: Sequence[PartitionRange], *, max_records: int | None,
                  min_partitions: int | None) -> list[PartitionRange]:
    """The offset ranges of the tasks of Spark 4 KafkaOffsetRangeCalculator.getRanges (with
    ``maxRecordsPerPartition``, SPARK-49259): each non-empty range in ``ceil(size / max_records)`` pieces
    (:func:`_divide`, in doubles as there), so none holds more than ``max_records`` offsets; then, where
    ``min_partitions`` is above the number of pieces, the pieces divided again in proportion to their size,
    those that would get one part kept whole and left out of the proportion (a topic partition with such a
    piece keeps all its pieces whole).  O(pieces)."""
    pieces = [r for r in ranges if r.end > r.start]
    if max_records is not None:
        pieces = [p for r in pieces
                  for p in _divide(r, min(math.ceil((r.end - r.start) / max_records), JAVA_INT_MAX))
                  if p.end > p.start]
    if min_partitions is None or min_partitions <= len(pieces):
        return pieces
    total = sum(p.end - p.start for p in pieces)
    whole = [p for p in pieces if _part_count(p.end - p.start, total, min_partitions) == 1]
    kept = {(p.topic, p.partition) for p in whole}
    split_total = total - sum(p.end - p.start for p in whole)
    split_min = max(min_partitions - len(whole), 1)
    return [q for p in pieces
            for q in _divide(p, 1 if (p.topic, p.partition) in kept
                             else _part_count(p.end - p.start, split_total, split_min))
            if q.end > q.start]


def plan_by_records(ranges: Sequence[PartitionRange], options: ReadOptions) -> Plan:
    """Input partitions of the connector's tasks (:func:`record_ranges` with the options'
    ``maxRecordsPerPartition`` and ``minPartitions`` as given), in their order, each cut further by
    ``maxBytesPerPartition`` (:func:`plan` of its one range) where its bytes are more."""
    result = Plan()
    for rng in ranges:
        result.segments_total += len(rng.segments)
        result.segments_read += sum(1 for s in rng.segments if _overlaps(rng, s))
    for piece in record_ranges(ranges, max_records=options.max_records_per_partition,
                               min_partitions=options.min_partitions_given):
        part = plan([piece], max_bytes=options.max_bytes_per_partition)
        result.partitions += part.partitions
        result.bytes += part.bytes
    return result


def input_partitions(result: Plan, options: ReadOptions, format_name: str) -> list[InputPartition]:
    """Spark input partitions of a plan: the store's path, format and config with the slices."""
    return [SegstoreInputPartition(i, options.path, format_name, options.config, tuple(slices), result.order)
            for i, slices in enumerate(result.partitions)]


#: Streaming positions: ``{topic: {partition (as str, JSON keys are strings): next offset}}``.
Offsets = dict[str, dict[str, int]]


def limit_offsets(start: Offsets, latest: Offsets, max_offsets: int) -> Offsets:
    """Move about ``max_offsets`` offsets past ``start`` towards ``latest``, shared out as Spark's Kafka
    source shares ``maxOffsetsPerTrigger`` (Spark 4 KafkaMicroBatchStream.rateLimit): each partition with
    offsets waiting gets ``max_offsets * waiting / total waiting`` (in doubles), rounded down, or up to
    one where that is below one, so that no partition is starved by busier ones; the batch may hold up to
    one offset more than ``max_offsets`` per such partition, or fewer than it.  A partition with nothing
    waiting stays at its latest offset.  Every partition of ``latest`` must be in ``start``.  O(P) for P
    partitions.
    """
    sizes = {(t, p): end - start[t][p] for t, ps in latest.items() for p, end in ps.items()
             if end - start[t][p] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return {t: dict(ps) for t, ps in latest.items()}
    result: Offsets = {}
    for t, ps in latest.items():
        for p, end in ps.items():
            size = sizes.get((t, p))
            if size is None:
                result.setdefault(t, {})[p] = end
                continue
            prorate = max_offsets * (size / total)
            share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
            result.setdefault(t, {})[p] = min(end, start[t][p] + share)
    return result


def delays_batch(start: Offsets, latest: Offsets, min_offsets: int, max_delay_ms: int, last_ms: int,
                 now_ms: int) -> tuple[bool, int]:
    """Whether a trigger makes no micro-batch for ``minOffsetsPerTrigger``, and the time of the last
    micro-batch made after it, as Spark 4 KafkaMicroBatchStream.delayBatch decides: a batch is made once
    ``max_delay_ms`` (``maxTriggerDelay``) has passed since the last one (``last_ms``; 0 before the first,
    so a query's first trigger always makes one), else only with at least ``min_offsets`` offsets waiting
    from ``start`` to ``latest`` over every partition (one ``start`` lacks counts from 0, as there), the
    time of the batch made being ``now_ms``.  The clock is the only source of time here, as there (the
    system clock, ``System.currentTimeMillis``).  O(P) for P partitions.
    """
    if now_ms - last_ms >= max_delay_ms:
        return False, now_ms
    waiting = sum(end - start.get(t, {}).get(p, 0) for t, ps in latest.items() for p, end in ps.items())
    if waiting < min_offsets:
        return True, last_ms
    return False, now_ms
