"""The ``segstore`` Spark data source (PySpark's Python Data Source API).

Batch reads, streaming reads and batch writes of RocketMQ stores and Kafka log
directories::

    segstore.spark.register(spark)
    df = spark.read.format("segstore").load("/data/rocketmq/store")
    df.write.format("segstore").option("topic", "T").mode("append").save("/data/out")

Where each piece runs:

- driver: ``schema`` (detects the format), ``pushFilters`` and ``partitions``
  (open the store read-only, prune, plan from the segment maps), streaming
  offsets, and the writer's ``commit`` / ``abort``;
- executors: ``read`` opens the store read-only by path and reads its slices;
  the writer's ``write`` stages the task's rows as one Arrow IPC file.

Nothing here opens a file directly: stores go through ``segstore.open`` and
staged files through :mod:`segstore.files`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from .. import api, arrays, files, registry
from ..columns import HEADERS
from ..errors import (
    ConfigError,
    CorruptDataError,
    NotFoundError,
    SegstoreError,
    UnsupportedOperationError,
    WrongFormatError,
)
from ..records import Message
from ..search import Bound, search
from ..store import Store
from . import planning
from .options import (
    READ_UNCOMMITTED,
    READER_JVM,
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)
from .raised import Carried
from .schema import HEADER_TYPE, KAFKA, ROCKETMQ, arrow_schema, spark_schema

NAME = "segstore"
#: The Python data source's name where the columnar JVM source holds ``segstore`` (which
#: then hands it writes, streams and ``reader=python`` reads).
PYTHON_NAME = "segstore-python"

#: Rows appended to the store per ``append_batch`` call when committing a write.
COMMIT_CHUNK_ROWS = 10_000

STAGING_SUFFIX = ".segstore-staging"

_MICROS_PER_MILLI = 1000


#: Advice in library errors written for the command line, and what a Spark user sets instead.
_CLI_ADVICE = (("pass --format to say which it should be", 'set .option("format", NAME) to say which it is'),
               ("pass --format", 'set .option("format", NAME)'))


def spark_words(err: SegstoreError) -> SegstoreError:
    """``err`` with command-line advice (``--format``) put as the data source's option."""
    message = err.message
    for cli, option in _CLI_ADVICE:
        message = message.replace(cli, option)
    if message == err.message:
        return err
    return type(err)(message, err.path, err.pos)


def open_store(path: str, format_name: str | None, config: tuple[tuple[str, str], ...],
               mode: str = "r") -> Store:
    """Open a store for the data source (the one place it calls ``segstore.open``).

    :raises SegstoreError: as ``segstore.open``, advice given as Spark options.
    """
    try:
        return api.open(path, format=format_name, mode=mode, **dict(config))
    except SegstoreError as err:
        translated = spark_words(err)
        if translated is err:
            raise
        raise translated from err


def _offset_index(offsets: pa.Array, bound: int) -> int:
    """The number of leading rows of a batch with ``offset < bound`` (its offsets ascend)."""
    return search(arrays.to_numpy(offsets, np.int64), bound, Bound.SMALLEST_UPPER)


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """A columnar batch as the batch Spark requires: ``target``'s columns, in its order and
    types (millisecond timestamps cast to microseconds; list and map fields renamed).  A row
    with no headers has null ``headers``, not an empty array, as Spark's Kafka connector gives
    a record without headers (KafkaRecordToRowConverter.toInternalRowWithHeaders)."""
    if not len(target):
        return batch.select([])      # no column asked (a count): the rows stay, as a batch of none
    arrays = []
    for field in target:
        column = batch.column(field.name)
        column = column if column.type == field.type else column.cast(field.type)
        if field.name == "headers":
            column = _null_if_empty(column)
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _null_if_empty(column: pa.Array) -> pa.Array:
    """The list column with its empty lists made null.  ``O(rows)`` in Arrow."""
    empty = pc.equal(pc.list_value_length(column), 0)
    if not pc.any(empty).as_py():
        return column
    return pc.if_else(empty, pa.scalar(None, type=column.type), column)


def read_slices(partition: InputPartition, schema: StructType,
                options: ReadOptions, store: Store | None = None, *,
                chunk_rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """Read one input partition: each slice ``[start, end)`` through ``store.scan_arrow``.

    Runs on an executor; opens the store read-only by path (or reads ``store``, opened
    read-only by the caller after the plan was made, and leaves it open).  The store's columnar
    batches go to Spark as they are, cut at the slice's ends by a binary search on
    their ``offset`` column, cast to Spark's Arrow types, and sliced to at most
    ``maxRecordsPerBatch`` rows.  Kafka control records are dropped by a mask unless
    ``includeControlRecords``; ``kafka.isolation.level`` goes on as the store's
    ``isolation``.  A partition planned in log order (:data:`.planning.ORDER_LOG`, a RocketMQ
    byte range) reads all its slices in one pass, ``store.scan_arrow(queues=...)``, which keeps
    exactly their messages.  ``chunk_rows``: the rows of a Kafka store's own chunks (its
    ``scan_arrow``'s ``batch_rows``; None: the store's default).  No per-record Python:
    ``O(records)`` in Arrow / C.

    :raises TypeError: ``partition`` was not planned by this source.
    :raises UnsupportedOperationError: the store's format has no columnar reader.
    """
    if not isinstance(partition, planning.SegstoreInputPartition):
        if type(partition) is InputPartition and partition.value is None:
            return      # Spark's stand-in task when the plan has no partitions: no rows
        raise TypeError(f"expected a SegstoreInputPartition, found {type(partition).__name__}")
    if store is None:
        with open_store(partition.path, partition.format, partition.config) as opened:
            yield from _read_slices(partition, schema, options, opened, chunk_rows)
    else:
        yield from _read_slices(partition, schema, options, store, chunk_rows)


def _read_slices(partition: planning.SegstoreInputPartition, schema: StructType, options: ReadOptions,
                 store: Store, chunk_rows: int | None) -> Iterator[pa.RecordBatch]:
    max_rows = options.max_records_per_batch
    target = arrow_schema(schema)
    kafka = store.format == KAFKA
    skip_control = kafka and not options.include_control_records   # transaction markers
    columns = list(target.names)
    for extra_column in ("offset", *(("isControl",) if skip_control else ())):
        if extra_column not in columns:
            columns.append(extra_column)
    extra: dict[str, Any] = {}
    if kafka and options.isolation != READ_UNCOMMITTED:
        extra["isolation"] = options.isolation
    if kafka and chunk_rows is not None:
        extra["batch_rows"] = chunk_rows
    if store.format == ROCKETMQ and options.decompress_bodies:
        extra["decompress"] = True      # bodies as consumers read them
    # Any: the format's own read options (Kafka's isolation, RocketMQ's queues) are not in
    # Store.scan_arrow's signature
    reader: Any = store
    slices = _still_held(partition.slices, options, store)
    if partition.order == planning.ORDER_LOG:
        # one pass over the task's byte range of the shared log: the store keeps exactly the slices'
        # messages (nothing to cut), in log order (each partition's in offset order)
        queues = [(s.topic, s.partition, s.start, s.end) for s in slices]
        for batch in reader.scan_arrow(list(target.names) or ["offset"], queues=queues, threads=1, **extra):
            if batch.num_rows:
                spark_batch = to_spark_batch(batch, target)
                for at in range(0, spark_batch.num_rows, max_rows):
                    yield spark_batch.slice(at, max_rows)
        return
    for piece in slices:
        start, end = piece.start, piece.end
        try:
            # one thread a task: Spark runs a task per core already (a store's default would take every
            # core in each task and oversubscribe the executor)
            for batch in reader.scan_arrow(columns, topic=piece.topic, partition=piece.partition,
                                           offset=start, threads=1, **extra):
                offsets = batch.column("offset")
                first = _offset_index(offsets, start)
                stop = _offset_index(offsets, end)
                batch = batch.slice(first, max(0, stop - first))
                # a filter copies every column: only where the batch holds a transaction marker
                if skip_control and pc.any(batch.column("isControl")).as_py():
                    batch = batch.filter(pc.invert(batch.column("isControl")))
                if batch.num_rows:
                    spark_batch = to_spark_batch(batch, target)
                    for at in range(0, spark_batch.num_rows, max_rows):
                        yield spark_batch.slice(at, max_rows)
                if stop < len(offsets) or (stop and offsets[stop - 1].as_py() >= end - 1):
                    # the slice ends in or with this batch: the next one may be a live writer's
                    # batch not yet whole, past the end a stream's micro-batch planned
                    break
        except CorruptDataError as err:
            if not _torn_past(store, piece, err):
                raise


def _still_held(slices: tuple[planning.Slice, ...], options: ReadOptions,
                store: Store) -> list[planning.Slice]:
    """The slices as the store opened for the read still holds them: retention may have removed offsets
    since the driver planned, and they are lost as offsets lost before planning are
    (:func:`.planning.check_lost`): an error, or with ``failOnDataLoss=false`` the slice from the log
    start on (a slice wholly removed is left out).

    :raises OffsetOutOfRangeError: a slice starts before the log start and ``failOnDataLoss`` is true.
    """
    held = []
    for piece in slices:
        low = store.offset_range(piece.topic, piece.partition)[0]
        start = planning.check_lost(options, "the read planned", piece.topic, piece.partition,
                                    piece.start, low)
        if start < piece.end:
            held.append(piece if start == piece.start else dataclasses.replace(piece, start=start))
    return held


def _torn_past(store: Store, piece: planning.Slice, err: CorruptDataError) -> bool:
    """Whether ``err`` is the partition's torn tail (:meth:`Store.tail_error`) lying past the slice: met
    where the slice's last records were dropped from the batches (a read_committed read drops the
    transaction marker ending it), once every record of the slice was read."""
    tail = store.tail_error(piece.topic, piece.partition)
    return (tail is not None and (tail.path, tail.pos) == (err.path, err.pos)
            and piece.end <= store.offset_range(piece.topic, piece.partition)[1])


#: The column whose lower bounds ``offset_for_time`` answers: Kafka looks up record
#: timestamps; RocketMQ looks up store times (``timestamp`` is the born time there).
TIME_COLUMNS = {KAFKA: "timestamp", ROCKETMQ: "storeTimestamp"}


def check_read_schema(requested: StructType, format_name: str) -> None:
    """Refuse a user-given schema naming a column the store lacks or giving one another type.

    Both readers ask it of the schema Spark hands them (the JVM reader through :mod:`.bridge`'s
    ``plan``), so a ``.schema(...)`` is refused alike, on the driver, before anything is read.

    :raises ConfigError: naming the column, the type found and the type expected.
    """
    known = {f.name: f.dataType for f in spark_schema(format_name, include_headers=True).fields}
    for field in requested.fields:
        expected = known.get(field.name)
        if expected is None:
            raise ConfigError(f"the schema names column {field.name!r}, which a {format_name} store does not "
                              f"have; its columns are {', '.join(known)}")
        if expected != field.dataType:
            raise ConfigError(f"the schema gives column {field.name} type {field.dataType.simpleString()}, "
                              f"expected {expected.simpleString()}")


def _min_partitions(options: ReadOptions) -> int:
    # SegstoreDataSource._read_options fills it in; 1 is the planner's own default.
    return options.min_partitions or 1


class SegstoreReader(DataSourceReader):
    """Batch reader: plans by bytes from the options alone, reads slices on executors.

    It takes no filters: Spark evaluates them on the rows read.  Options
    (``assign``, ``subscribe``, ``startingOffsets`` ...) restrict what is planned.
    """

    def __init__(self, options: ReadOptions, format_name: str, schema: StructType) -> None:
        self.options = options
        self.format = format_name
        self.schema = schema
        self.pruning = planning.Pruning()

    def plan(self) -> planning.Plan:
        """Open the store on the driver and plan the read."""
        with open_store(self.options.path, self.format, self.options.config) as store:
            return planning.plan_batch(store, self.options, self.pruning)

    def partitions(self) -> list[InputPartition]:
        """The plan's input partitions.

        :raises Carried: the library's ``UnsupportedOperationError`` (a format whose store does not list
            its segments): PySpark's planning worker would read one empty partition for it.
        """
        try:
            return planning.input_partitions(self.plan(), self.options, self.format)
        except UnsupportedOperationError as err:
            raise Carried(err) from err

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_slices(partition, self.schema, self.options)


class PushdownReader(SegstoreReader):
    """Batch reader that also prunes its plan with the filters Spark pushes.

    Used only on a Spark that keeps what a pushdown planned with that one scan
    (see :func:`segstore.spark.pushdown_is_per_scan`): the plan then answers only
    the query whose filters made it.  Each ``pushFilters`` call starts from no
    pruning, so nothing of an earlier call survives in this object either.
    """

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        self.pruning, remaining = planning.pushdown(filters, time_column=TIME_COLUMNS.get(self.format))
        return remaining


class SegstoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader tailing a live store.

    Offsets are ``{topic: {partition: next offset}}``.  ``latestOffset`` reopens the
    store read-only, so it sees what a writer (another process) appended since;
    partitions that appear later start at their earliest offset.  With
    ``trigger(availableNow=True)`` the query stops at the offsets the store had
    when it started, in as many micro-batches as ``maxOffsetsPerTrigger`` needs.
    """

    def __init__(self, options: ReadOptions, format_name: str, schema: StructType) -> None:
        self.options = options
        self.format = format_name
        self.schema = schema
        self.available_now: planning.Offsets | None = None
        #: when the last micro-batch ``minOffsetsPerTrigger`` admitted was made (ms; 0: none yet)
        self.last_trigger_ms = 0

    def initialOffset(self) -> dict:
        return self._start_positions()

    def _stable_end(self, store: Store, topic: str, partition: int, high: int) -> int:
        """Where a micro-batch may end in a partition whose log ends at ``high``
        (:func:`.planning.last_fetchable`: the high watermark, or under ``read_committed`` the last stable
        offset).  A read_committed read stops there: a batch ending at the log end would move the
        checkpoint past records delivered only once their transaction commits."""
        return planning.last_fetchable(store, self.options, topic, partition, high)

    def _start_positions(self) -> planning.Offsets:
        with open_store(self.options.path, self.format, self.options.config) as store:
            offsets: planning.Offsets = {}
            pairs = planning.selected(store, self.options)
            planning.check_named(self.options, set(pairs), ending=False)
            for topic, partition in pairs:
                low, high = store.offset_range(topic, partition)
                latest = max(low, self._stable_end(store, topic, partition, high))
                start = planning.start_offset(store, self.options, topic, partition, low, high, latest=latest,
                                              past_end=True)
                offsets.setdefault(topic, {})[str(partition)] = start
            return offsets

    def _latest(self, start: planning.Offsets) -> tuple[planning.Offsets, planning.Offsets]:
        """Latest offsets of every partition, and ``start`` extended with new partitions.

        A partition's latest offset is never before its start while the log reaches that far: under
        ``read_committed`` a start past the last stable offset waits there for the transaction to end.
        A start past the log end is offsets gone back: the latest offset is the log end, and
        :meth:`partitions` reports the micro-batch (:func:`.planning.check_gone_back`)."""
        with open_store(self.options.path, self.format, self.options.config) as store:
            latest: planning.Offsets = {}
            extended = {t: dict(ps) for t, ps in start.items()}
            for topic, partition in planning.selected(store, self.options):
                low, high = store.offset_range(topic, partition)
                begin = extended.setdefault(topic, {}).setdefault(str(partition), low)
                end = max(min(begin, high), self._stable_end(store, topic, partition, high))
                latest.setdefault(topic, {})[str(partition)] = end
            return latest, extended

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now, _ = self._latest({})

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next micro-batch: every offset waiting (``ReadAllAvailable``), or as the options'
        ``minOffsetsPerTrigger`` (:meth:`admit`; PySpark passes no delay nor two limits together, so both
        come from the options) and ``maxOffsetsPerTrigger`` (or ``limit``'s maximum) admit."""
        if isinstance(limit, ReadAllAvailable):
            return self.admit(start, None, None)
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        return self.admit(start, self.options.min_offsets_per_trigger, most)

    def admit(self, start: dict | None, min_offsets: int | None, max_offsets: int | None) -> dict:
        """The end of the next micro-batch from ``start`` (the initial offsets where None), as Spark 4
        KafkaMicroBatchStream.latestOffset admits it: ``start`` itself where ``min_offsets`` delays the
        batch (:func:`.planning.delays_batch`, with the options' ``maxTriggerDelay`` and this reader's
        :attr:`last_trigger_ms`, which it updates), else up to ``max_offsets`` offsets
        (:func:`.planning.limit_offsets`) or every offset waiting."""
        given = start
        latest, start = self._latest(start or self._start_positions())
        # offsets gone back: the batch ends at the log's end whatever the limits, as the connector's
        # (Spark 4 KafkaMicroBatchStream.rateLimit leaves a partition with no offsets waiting at its end)
        start = {t: {p: min(begin, latest.get(t, {}).get(p, begin)) for p, begin in ps.items()}
                 for t, ps in start.items()}
        if self.available_now is not None:
            # only what the store held when the availableNow query started
            snapshot = self.available_now
            latest = {t: {p: max(start[t][p], min(end, snapshot.get(t, {}).get(p, start[t][p])))
                          for p, end in ps.items()} for t, ps in latest.items()}
        if min_offsets is not None:
            delayed, self.last_trigger_ms = planning.delays_batch(
                given or start, latest, min_offsets, self.options.max_trigger_delay_ms, self.last_trigger_ms,
                time.time_ns() // 1_000_000)
            if delayed:
                return given or start
        if max_offsets is not None:
            return planning.limit_offsets(start, latest, max_offsets)
        return latest

    def getDefaultReadLimit(self) -> ReadLimit:
        # the connector's (Spark 4 KafkaMicroBatchStream.getDefaultReadLimit) as far as PySpark carries it:
        # no composite limit and no delay, which latestOffset takes from the options
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        with open_store(self.options.path, self.format, self.options.config) as store:
            ranges = []
            gone = sorted((t, int(k)) for t, ps in start.items() for k in ps if k not in end.get(t, {}))
            added = []
            for topic in sorted(end):
                for key in sorted(end[topic], key=int):
                    lo = start.get(topic, {}).get(key)
                    hi = end[topic][key]
                    partition = int(key)
                    low = store.offset_range(topic, partition)[0]
                    if lo is None:
                        lo = low
                        if low != 0:
                            added.append((topic, partition, low))
                    if lo > hi:
                        planning.check_gone_back(self.options, topic, partition, lo, hi)
                        continue
                    # offsets the query has not read yet that retention removed since
                    lo = planning.check_lost(self.options, "the stream's next offset", topic, partition,
                                             lo, low)
                    if lo >= hi:
                        continue
                    infos = store.segment_infos(topic, partition)
                    segments = tuple(planning.SegmentInfo.coerce(s) for s in infos)
                    ranges.append(planning.PartitionRange(topic, partition, lo, hi, segments))
            planning.check_partitions_changed(self.options, gone, added)
        if self.options.max_records_per_partition is not None:
            # every micro-batch's ranges, as the connector's (Spark 4 KafkaMicroBatchStream
            # .planInputPartitions: getOffsetRangesFromResolvedOffsets hands them all to
            # KafkaOffsetRangeCalculator.getRanges)
            result = planning.plan_by_records(ranges, self.options)
        else:
            result = planning.plan(ranges, max_bytes=self.options.max_bytes_per_partition,
                                   min_partitions=_min_partitions(self.options))
        return planning.input_partitions(result, self.options, self.format)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_slices(partition, self.schema, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to release: the source never holds files between micro-batches."""


# -- writing --------------------------------------------------------------------------------

_HEADERS_TYPE = ArrayType(HEADER_TYPE)

_WRITE_COLUMNS = {
    "value": (BinaryType, StringType),
    "key": (BinaryType, StringType),
    "topic": (StringType,),
    "partition": (IntegerType, LongType),
    "timestamp": (TimestampType, LongType),
}


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """Refuse, on the driver, a DataFrame the writer cannot append.

    :raises ConfigError: no ``value`` column, a column of the wrong type, or neither a
        ``topic`` column nor a ``topic`` option.
    """
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ConfigError(f"a value column (binary or string) is required; found columns {sorted(fields)}")
    for name, data_type in fields.items():
        if name == "headers":
            if data_type.simpleString() != _HEADERS_TYPE.simpleString():
                raise ConfigError(f"column headers must be array<struct<key:string,value:binary>>, "
                                  f"found {data_type.simpleString()}")
            continue
        allowed = _WRITE_COLUMNS.get(name)
        if allowed is None:
            continue
        if not isinstance(data_type, allowed):
            raise ConfigError(f"column {name} must be {' or '.join(t.typeName() for t in allowed)}, "
                              f"found {data_type.simpleString()}")
    if "topic" not in fields and options.topic is None:
        raise ConfigError('a topic column or .option("topic", NAME) is required')


@dataclass(frozen=True)
class StagedWrite(WriterCommitMessage):
    """What one write task staged: its partition id, the file, the row count."""

    partition_id: int
    path: str
    rows: int


def _utf8(value: Any) -> Any:
    return value.encode("utf-8") if isinstance(value, str) else value


def _pylist(table: pa.Table, name: str, default: Any) -> list[Any]:
    """A column as Python values (``[default] * rows`` when absent); times as ms since the epoch."""
    if name not in table.column_names:
        return [default] * table.num_rows
    column = table.column(name)
    if pa.types.is_timestamp(column.type):
        micros = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
        return [None if us is None else us // _MICROS_PER_MILLI for us in micros]
    return column.to_pylist()


def staged_messages(table: pa.Table, options: WriteOptions) -> Iterator[Message]:
    """The messages of one staged table, in row order (O(rows); other columns are ignored)."""
    values = _pylist(table, "value", None)
    topics = _pylist(table, "topic", options.topic)
    default_partition = options.partition if options.partition is not None else 0
    partitions = _pylist(table, "partition", default_partition)
    keys = _pylist(table, "key", None)
    headers = _pylist(table, "headers", None)
    timestamps = _pylist(table, "timestamp", None)
    for i, value in enumerate(values):
        topic = topics[i] if topics[i] is not None else options.topic
        if topic is None:
            raise ConfigError(f"row {i} has a null topic and no topic option is set")
        yield Message(
            topic=topic,
            value=_utf8(value),
            key=_utf8(keys[i]),
            partition=partitions[i] if partitions[i] is not None else default_partition,
            # below 0 is the append's time, as staged_columns makes it (an append refuses one below -1)
            timestamp=-1 if timestamps[i] is None or timestamps[i] < 0 else timestamps[i],
            headers=[(h["key"], h["value"]) for h in headers[i] or ()],
        )


def _destinations(table: pa.Table, options: WriteOptions) -> set[tuple[Any, Any]]:
    """The ``(topic, partition)`` pairs a staged table's rows go to (null ones the options'), in Arrow
    (:func:`staged_messages` where its columns do not convert).

    :raises ConfigError: a row with a null topic and no ``topic`` option.
    """
    # the two columns alone: the append converts the rest (keys, values, times, headers) once, itself
    table = table.select([name for name in ("topic", "partition") if name in table.column_names])
    columns = staged_columns(table, options)
    if columns is None:
        return {(m.topic, m.partition) for m in staged_messages(table, options)}
    if "partition" not in columns.column_names:     # no column, no option: partition 0 (but see _check)
        return {(topic, 0) for topic in columns.column("topic").unique().to_pylist()}
    topic = columns.column("topic")
    if columns.num_rows and pc.all(pc.equal(topic, topic[0])).as_py():
        # one topic (a task's rows mostly are): its partitions alone, as ints, without hashing every
        # row's topic (group_by: 4-7 ms a 125,000-row file, this 2 ms)
        partitions = pc.unique(columns.column("partition")).to_pylist()
        return {(topic[0].as_py(), partition) for partition in partitions}
    found = columns.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([])
    return set(zip(found.column("topic").to_pylist(), found.column("partition").to_pylist(), strict=True))


def staged_columns(table: pa.Table, options: WriteOptions) -> pa.Table | None:
    """One staged table as the columns a columnar append takes (``Store.append_arrow``), meaning
    what :func:`staged_messages` makes of it: null topics and partitions take the options',
    strings become UTF-8 bytes, times become ms (a null or negative one: the append's time).
    None where a column does not convert (the caller then appends :func:`staged_messages`).
    ``O(rows)`` in Arrow, no per-row Python.

    :raises ConfigError: a row with a null topic and no ``topic`` option.
    """
    rows = table.num_rows

    def column(name: str) -> pa.ChunkedArray | None:
        return table.column(name) if name in table.column_names else None

    try:
        topic = column("topic")
        if topic is None or topic.null_count:
            if options.topic is None:
                first = 0 if topic is None else pc.index(pc.is_null(topic), True).as_py()
                raise ConfigError(f"row {first} has a null topic and no topic option is set")
            # the options' values as Arrow scalars made from buffers: pa.scalar / pa.repeat of a
            # Python value go through pyarrow's pandas bridge (0.2 s of imports, once a driver worker)
            default_topic = arrays.string_scalar(options.topic)
            topic = (pa.repeat(default_topic, rows) if topic is None
                     else pc.fill_null(topic.cast(pa.string()), default_topic))
        out: dict[str, Any] = {"topic": topic}
        partition = column("partition")
        if partition is not None or options.partition is not None:
            default_partition = arrays.number(options.partition or 0, pa.int32())
            out["partition"] = (pa.repeat(default_partition, rows) if partition is None
                                else pc.fill_null(partition.cast(pa.int32()), default_partition))
        # else no partition column: the append sends a keyed row to its key's partition, as Kafka's
        # producer does (KafkaStore.append_arrow), the others to partition 0
        for name in ("key", "value"):
            values = column(name)
            out[name] = pa.nulls(rows, pa.binary()) if values is None else values.cast(pa.binary())
        stamps = column("timestamp")
        if stamps is not None:
            if pa.types.is_timestamp(stamps.type):
                # floor to ms as staged_messages does
                given = stamps.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
                millis = pc.divide(given, arrays.number(_MICROS_PER_MILLI, pa.int64()))
            else:       # a long column is ms since the epoch already, as staged_messages reads it
                given = millis = stamps.cast(pa.int64())
            # below 0 means "the append's time" either way
            out["timestamp"] = pc.if_else(pc.less(given, arrays.number(0, pa.int64())),
                                          arrays.number(-1, pa.int64()), millis)
        headers = column("headers")
        if headers is not None:
            out["headers"] = headers.cast(HEADERS)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return pa.table(out)


#: A directory name Kafka gives a partition: ``TOPIC-N``.
_KAFKA_PARTITION_DIR = re.compile(r"^.+-\d+$")


def local_staging_root() -> str:
    """Where a ``local[...]`` session stages writes by default: ``$TMPDIR/segstore-staging``."""
    return os.path.join(tempfile.gettempdir(), "segstore-staging")


def staging_root(options: WriteOptions, *, local_root: str | None) -> str:
    """Where write tasks stage their rows: never inside a directory a broker loads.

    A Kafka broker loads every subdirectory of a log dir as a partition and takes the
    log dir offline when one is not named like one (``LogManager.loadLogs``), so
    nothing may go beside a partition directory.  In order:

    - the ``stagingDir`` option;
    - ``local_root`` (a ``local[...]`` session: :func:`local_staging_root`, in the
      system temporary directory, which the local executors share);
    - else beside the broker's top directory, hidden: for ``/d/kafka-logs/t-0`` (a
      ``TOPIC-N`` directory) ``/d/.kafka-logs.segstore-staging``, for ``/d/store``
      ``/d/.store.segstore-staging``: on the store's filesystem, which the
      executors of a cluster must see anyway, and outside what brokers read.
    """
    if options.staging_dir:
        return options.staging_dir
    if local_root:
        return local_root
    top = os.path.abspath(options.path)
    if _KAFKA_PARTITION_DIR.match(os.path.basename(top)):
        top = os.path.dirname(top)
    return os.path.join(os.path.dirname(top), f".{os.path.basename(top)}{STAGING_SUFFIX}")


@dataclass(frozen=True)
class StagedJob:
    """One write job's staging: ``root`` (:func:`staging_root`) and the job's directory in it.

    Write tasks put their rows in ``part-PPPPP-A.arrow`` files there (:func:`staged_name`);
    :meth:`commit` appends them to the store in partition order, :meth:`clean` removes them.
    Both write paths stage so: PySpark's Python data source (:class:`SegstoreWriter`) and the
    JVM side's writer, whose driver calls :mod:`.bridge`'s ``write_*`` requests.
    """

    options: WriteOptions
    root: str
    job_dir: str

    @classmethod
    def start(cls, options: WriteOptions, job_id: str, *, local_root: str | None) -> StagedJob:
        """A new job: its directory made, here, on the driver, and never by a task: a task Spark has
        not stopped yet when the job fails must not bring the directory back after ``abort``
        removed it."""
        root = staging_root(options, local_root=local_root)
        job = cls(options, root, os.path.join(root, job_id))
        for attempt in range(3):
            try:
                files.make_dirs(job.job_dir)
                break
            except NotFoundError:
                # another job's clean removed the shared root between our making it and our job dir
                if attempt == 2:
                    raise
        return job

    def clean(self) -> None:
        """Remove the job's directory, and the root if nothing else is in it."""
        for attempt in range(3):
            try:
                files.remove_tree(self.job_dir)
                break
            except SegstoreError:
                if attempt == 2:   # a late task kept writing into it
                    raise
        files.remove_dir_if_empty(self.root)     # other jobs may still be staging there

    def commit(self, staged: list[StagedWrite]) -> None:
        """Append every staged file to the store, in partition order, then :meth:`clean`.

        Every file is checked before the first is appended (:meth:`_check`: a null topic without the
        ``topic`` option, a topic or partition the format refuses, a Kafka key whose partition the
        log directory does not hold), so such a refusal appends
        nothing, and a store the commit created is removed again (``files.RemovedOnFailure``).  Each
        staged file is deleted once appended, on a thread beside the next file's append: freeing a
        file's pages in the kernel was a tenth of a 1,000,000-row commit.
        """
        from concurrent.futures import ThreadPoolExecutor

        parts = [part for part in sorted(staged, key=lambda m: m.partition_id) if part.rows]
        removals = ThreadPoolExecutor(1, thread_name_prefix="segstore-staged-remove")
        try:
            options = self.options
            with files.RemovedOnFailure(options.path), \
                    open_store(options.path, options.format, options.config, mode="a") as store:
                for part in parts:
                    self._check(store, part)
                for part in parts:
                    self._append(store, part)
                    removals.submit(files.remove, part.path)
        finally:
            removals.shutdown()
            self.clean()      # what a removal failed to delete, this deletes or reports

    def _check(self, store: Store, part: StagedWrite) -> None:
        """Raise what appending ``part`` would raise for its rows' topics and partitions, writing nothing
        (``O(rows)`` in Arrow; the message path's Python only where its columns do not convert)."""
        staged = files.MappedFile(part.path)
        try:
            table = pa.ipc.open_stream(pa.py_buffer(staged.view())).read_all()
            try:
                pairs = _destinations(table, self.options)
                routed = None
                if (store.format == KAFKA and self.options.partition is None
                        and "partition" not in table.column_names and "key" in table.column_names):
                    # a keyed row goes to its key's partition (KafkaStore.append_arrow): checked so
                    named = [name for name in ("topic", "key") if name in table.column_names]
                    routed = staged_columns(table.select(named), self.options)
            except ConfigError as err:      # its row numbers count in the task's rows
                raise ConfigError(f"write task {part.partition_id}: {err.message}", err.path,
                                  err.pos) from None
            del table
            if routed is not None:
                store.check_arrow_destinations(routed)      # type: ignore[attr-defined]  # KafkaStore's
                return
        finally:
            staged.close()
        store.check_destinations(sorted(pairs, key=lambda pair: (str(pair[0]), str(pair[1]))))

    def _append(self, store: Store, part: StagedWrite) -> None:
        # the staged file mapped, not read: its batches are appended straight from the page cache
        # (a read copied 72 MB in 0.04-0.06 s per 500,000 rows: a fifth of the commit)
        staged = files.MappedFile(part.path)
        try:
            self._append_table(store, pa.ipc.open_stream(pa.py_buffer(staged.view())).read_all())
        finally:
            staged.close()      # once the table is gone; an Arrow buffer still held keeps the map alive

    def _append_table(self, store: Store, table: pa.Table) -> None:
        # Kafka appends columns whole (its append_arrow takes a producer's columns; RocketMQ's takes
        # stored messages' and would drop keys and headers: its append_batch takes the Messages
        # without headers on its plain C path)
        columns = staged_columns(table, self.options) if store.format == KAFKA else None
        if columns is not None:
            store.append_arrow(columns)
            return
        chunk: list[Message] = []
        for message in staged_messages(table, self.options):
            chunk.append(message)
            if len(chunk) >= COMMIT_CHUNK_ROWS:
                store.append_batch(chunk)
                chunk = []
        if chunk:
            store.append_batch(chunk)


def staged_name(partition_id: int, attempt: int) -> str:
    """The file a write task stages its rows in, in its job's directory."""
    return f"part-{partition_id:05d}-{attempt}.arrow"


def check_append_mode(options: WriteOptions, overwrite: bool) -> None:
    """:raises ConfigError: ``overwrite`` (stores are append-only)."""
    if overwrite:
        raise ConfigError("segstore stores are append-only: use .mode(\"append\")", options.path)


def check_destination(options: WriteOptions) -> None:
    """Refuse, on the driver before any task runs, a destination the commit's ``segstore.open(mode="a")``
    refuses whatever the rows: a file where the store's directory goes, a store of another format than the
    ``format`` option, a directory holding files of no known format (no ``format`` option), an unknown
    ``format``; as ``api.open`` checks them (a job's tasks ran, and staged every row, before the commit
    refused).  Nothing is made.  ``O(entries of path)``.

    :raises WrongFormatError, FormatNotFoundError: as above.
    """
    path = options.path
    if options.format is not None:
        registry.get(options.format)
    if not files.exists(path):
        return
    if not files.is_dir(path):
        raise WrongFormatError("expected a directory to write a store in, found a file", path)
    if options.format is not None:
        others = registry.other_formats(path, options.format)
        if others:
            raise WrongFormatError(f"expected a {options.format} store, found a {others[0]} store", path)
    elif files.list_dir(path):
        registry.detect(path)


class SegstoreWriter(DataSourceArrowWriter):
    """Batch writer: tasks stage Arrow files; the driver appends them in partition order.

    The driver makes the job's staging directory (:meth:`StagedJob.start`); a task's ``write``
    puts its rows in a file there (atomic write); ``commit`` (run only when every task succeeded)
    appends the staged rows partition by partition, then deletes the job's directory and the
    staging root if nothing else is in it; ``abort`` only deletes them.  The store is never
    touched by a job that fails.  The staging directory must be visible to the driver and every
    executor.
    """

    def __init__(self, options: WriteOptions, schema: StructType, job_id: str, *,
                 local_root: str | None = None) -> None:
        self.options = options
        self.schema = schema
        self.job = StagedJob.start(options, job_id, local_root=local_root)

    @property
    def root(self) -> str:
        return self.job.root

    @property
    def job_dir(self) -> str:
        return self.job.job_dir

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition_id = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        # Each batch goes into the stream as it arrives and the stream's buffer is written as it
        # is: the task holds its rows once (not the batches, the stream and a bytes copy of it),
        # and on a machine short of memory each 100 MB copy was a tenth of a second of page faults
        sink = pa.BufferOutputStream()
        out: pa.ipc.RecordBatchStreamWriter | None = None
        rows = 0
        for batch in iterator:
            if out is None:
                out = pa.ipc.new_stream(sink, batch.schema)
            out.write_batch(batch)
            rows += batch.num_rows
        if out is not None:
            out.close()
        path = os.path.join(self.job_dir, staged_name(partition_id, attempt))
        # fails once the job is aborted; no fsync: the commit reads the file in this job, and a crash
        # before the commit ends the job with nothing appended (the store's own writes are durable)
        files.write_atomic(path, memoryview(sink.getvalue()), fsync=False)
        return StagedWrite(partition_id, path, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.job.commit([m for m in messages if isinstance(m, StagedWrite)])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.job.clean()


class SegstoreDataSource(DataSource):
    """``spark.read.format("segstore")`` / ``spark.readStream`` / ``df.write.format("segstore")``.

    What :func:`segstore.spark.register` records of the session, as class attributes
    (they travel with the class to Spark's Python workers):

    - ``default_min_partitions``: the planner's ``minPartitions`` when the option is
      absent (the session's default parallelism, so that every core gets work);
    - ``filter_pushdown``: whether readers take Spark's filters to prune their plan,
      only on a Spark that keeps a pushdown's plan with its one scan;
    - ``local_staging``: the session runs ``local[...]``: where its writers stage
      (:func:`local_staging_root`, unless given); None on a cluster.
    """

    registered_name: ClassVar[str] = NAME
    default_min_partitions: ClassVar[int] = 1
    filter_pushdown: ClassVar[bool] = False
    local_staging: ClassVar[str | None] = None
    #: the store's format, once ``schema`` (or a reader) detected it
    detected_format: str | None = None

    @classmethod
    def name(cls) -> str:
        return cls.registered_name

    @classmethod
    def configured(cls, *, parallelism: int = 1, filter_pushdown: bool = False,
                   local_master: bool = False, local_staging: str | None = None,
                   name: str = NAME) -> type[SegstoreDataSource]:
        """A subclass carrying what :func:`segstore.spark.register` found out about the session.

        ``local_staging`` (where a local session's writers stage) defaults to
        :func:`local_staging_root` when ``local_master``; it is ignored otherwise.
        ``name`` is the name it registers under (:data:`PYTHON_NAME` beside the JVM source).
        """
        staging = (local_staging or local_staging_root()) if local_master else None
        return type(cls.__name__, (cls,), {"registered_name": name,
                                           "default_min_partitions": max(1, parallelism),
                                           "filter_pushdown": filter_pushdown, "local_staging": staging,
                                           "__module__": cls.__module__, "__doc__": cls.__doc__})

    def _read_options(self, *, streaming: bool = False) -> ReadOptions:
        options = parse_read_options(self.options, streaming=streaming)
        if options.min_partitions is None:
            options = dataclasses.replace(options, min_partitions=self.default_min_partitions)
        return options

    def _format(self, options: ReadOptions) -> str:
        # schema() ran in another Python worker, but Spark pickles this object after it and
        # plans with that copy: the format it detected saves the planner opening the store again
        if self.detected_format is not None:
            return self.detected_format
        with open_store(options.path, options.format, options.config) as store:
            self.detected_format = store.format
            return store.format

    def schema(self) -> StructType:
        options = parse_read_options(self.options, streaming=None)    # a batch read's or a stream's
        return spark_schema(self._format(options), include_headers=options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._read_options()
        if options.reader == READER_JVM:
            raise ConfigError("option reader=jvm: the columnar JVM reader is not on this session's "
                              "classpath; `python -m segstore.spark.jvm` builds its jar and prints the path "
                              "to pass as spark.jars (local_session() does this itself)", options.path)
        format_name = self._format(options)
        # the schema Spark hands over is the user's where one was given: the batches are the store's
        # columns in the store's types, never cast to another's
        check_read_schema(schema, format_name)
        reader_class = PushdownReader if self.filter_pushdown else SegstoreReader
        return reader_class(options, format_name, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = self._read_options(streaming=True)
        format_name = self._format(options)
        check_read_schema(schema, format_name)
        return SegstoreStreamReader(options, format_name, schema)

    def writer(self, schema: StructType, overwrite: bool) -> SegstoreWriter:
        options = parse_write_options(self.options)
        if options.writer == READER_JVM:
            raise ConfigError("option writer=jvm: the JVM side of the source is not on this session's "
                              "classpath; `python -m segstore.spark.jvm` builds its jar and prints the path "
                              "to pass as spark.jars (local_session() does this itself)", options.path)
        check_append_mode(options, overwrite)
        check_write_schema(schema, options)
        check_destination(options)
        return SegstoreWriter(options, schema, uuid.uuid4().hex, local_root=self.local_staging)


__all__ = ["NAME", "PYTHON_NAME", "PushdownReader", "SegstoreDataSource", "SegstoreReader",
           "SegstoreStreamReader", "SegstoreWriter", "StagedJob"]
