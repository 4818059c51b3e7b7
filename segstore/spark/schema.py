"""Row schemas of the ``segstore`` Spark source and the Arrow batches its readers yield.

The columns follow Spark's own Kafka connector (``key, value, topic, partition,
offset, timestamp, timestampType, headers``); RocketMQ stores add the fields a
RocketMQ message has and a Kafka record lacks.  RocketMQ maps onto the Kafka
names as: queue id -> ``partition``, queue offset -> ``offset``, body ->
``value``, first of the KEYS property -> ``key``.

:class:`ColumnBuffer` collects records column by column and turns them into one
``pyarrow.RecordBatch`` whose schema is exactly the one Spark checks against
(``pyspark.sql.pandas.types.to_arrow_schema(..., timezone="UTC")``: timestamps
in microseconds, UTC).  A buffer belongs to one reading task; it is not thread-safe.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..records import CREATE_TIME, LOG_APPEND_TIME

ROCKETMQ = "rocketmq"
KAFKA = "kafka"

#: Spark's Kafka connector numbers timestamp types as Kafka's ``TimestampType.id``.
TIMESTAMP_TYPE_IDS = {CREATE_TIME: 0, LOG_APPEND_TIME: 1}

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

KAFKA_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(HEADER_TYPE)),
]

ROCKETMQ_EXTRA_FIELDS = [
    StructField("tags", StringType()),
    StructField("keys", ArrayType(StringType())),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("bornTimestamp", TimestampType()),
    StructField("storeTimestamp", TimestampType()),
    StructField("bornHost", StringType()),
    StructField("storeHost", StringType()),
    StructField("msgId", StringType()),
    StructField("physicalOffset", LongType()),
    StructField("sysFlag", IntegerType()),
    StructField("flag", IntegerType()),
    StructField("reconsumeTimes", IntegerType()),
]

KAFKA_SCHEMA = StructType(KAFKA_FIELDS)
ROCKETMQ_SCHEMA = StructType(KAFKA_FIELDS + ROCKETMQ_EXTRA_FIELDS)
assert len(KAFKA_SCHEMA.fields) == 8
assert len(ROCKETMQ_SCHEMA.fields) == 20
#: Positions in a row tuple (schema order) that readers and the buffer look at.
OFFSET_INDEX = KAFKA_SCHEMA.fieldNames().index("offset")
HEADERS_INDEX = KAFKA_SCHEMA.fieldNames().index("headers")

_MICROS_PER_MILLI = 1000


#: Every column a row tuple carries, in tuple order (Kafka rows stop after ``headers``).
ROW_COLUMNS = ROCKETMQ_SCHEMA.fieldNames()


def spark_schema(format_name: str, *, include_headers: bool = True) -> StructType:
    """The Spark schema of a store of ``format_name`` (formats other than RocketMQ get the Kafka
    columns); without ``headers`` unless ``include_headers``, as Spark's Kafka connector
    (its ``includeHeaders`` option)."""
    schema = ROCKETMQ_SCHEMA if format_name == ROCKETMQ else KAFKA_SCHEMA
    if include_headers:
        return schema
    return StructType([f for f in schema.fields if f.name != "headers"])


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark requires of batches for ``schema`` (microsecond UTC timestamps)."""
    return to_arrow_schema(schema, timezone="UTC")


#: Column kinds :meth:`ColumnBuffer.flush` builds differently from plain values.
_TIMESTAMP_COLUMNS = frozenset({"timestamp", "bornTimestamp", "storeTimestamp"})


class ColumnBuffer:
    """Rows added since the last :meth:`flush`, turned into one Arrow batch at a time.

    A row is a tuple in the order of the full schema (:data:`ROW_COLUMNS`; a schema
    without ``headers`` skips that element); timestamps are milliseconds, ``timestampType``
    the id of :data:`TIMESTAMP_TYPE_IDS`, headers a list of ``(key, value)``, RocketMQ
    ``keys`` a list and ``properties`` a dict.  ``add`` is one ``list.append``;
    ``flush`` transposes with ``zip`` and builds each column with one Arrow call,
    so the per-record Python work is the caller's extraction only.
    Not thread-safe: one buffer per reading task.
    """

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.arrow = arrow_schema(schema)
        self.rows: list[tuple] = []
        self.add = self.rows.append
        # where each column of the schema sits in a row tuple (a schema may leave out headers)
        self.positions = [ROW_COLUMNS.index(name) for name in schema.fieldNames()]

    def __len__(self) -> int:
        return len(self.rows)

    def _headers(self, column: tuple, list_type: pa.DataType) -> pa.Array:
        offsets = [0, *itertools.accumulate(map(len, column))]
        flat = list(itertools.chain.from_iterable(column))
        keys = [k for k, _ in flat]
        values = [v for _, v in flat]
        entries = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                             fields=list(list_type.value_type))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries, type=list_type)

    def flush(self) -> pa.RecordBatch:
        """The buffered rows as one record batch of exactly :attr:`arrow`; empties the buffer."""
        columns = list(zip(*self.rows, strict=True)) if self.rows else [() for _ in ROW_COLUMNS]
        arrays = []
        for i, field in zip(self.positions, self.arrow, strict=True):
            values = columns[i]
            if i == HEADERS_INDEX:
                arrays.append(self._headers(values, field.type))
            elif field.name in _TIMESTAMP_COLUMNS:
                millis = pa.array(values, pa.int64())
                arrays.append(pc.multiply(millis, _MICROS_PER_MILLI).cast(field.type))
            else:
                arrays.append(pa.array(values, field.type))
        self.rows.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)
