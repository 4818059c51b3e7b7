"""Row schemas of the ``segstore`` Spark source and the Arrow batches its readers yield.

The columns follow Spark's own Kafka connector (``key, value, topic, partition,
offset, timestamp, timestampType, headers``); RocketMQ stores add the fields a
RocketMQ message has and a Kafka record lacks.  RocketMQ maps onto the Kafka
names as: queue id -> ``partition``, queue offset -> ``offset``, body ->
``value``, first of the KEYS property -> ``key``.

:class:`ColumnBuffer` collects records column by column and turns them into one
``pyarrow.RecordBatch`` whose schema is exactly the one Spark checks against
(``pyspark.sql.pandas.types.to_arrow_schema(..., timezone="UTC")``: timestamps
in microseconds, UTC).  Nested columns (headers, keys, properties) are built
from flat value arrays plus offsets, never from nested Python objects.
A buffer belongs to one reading task; it is not thread-safe.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
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

from ..records import CREATE_TIME, LOG_APPEND_TIME, Message

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

_MICROS_PER_MILLI = 1000


def spark_schema(format_name: str) -> StructType:
    """The Spark schema of a store of ``format_name`` (formats other than RocketMQ get the Kafka columns)."""
    return ROCKETMQ_SCHEMA if format_name == ROCKETMQ else KAFKA_SCHEMA


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark requires of batches for ``schema`` (microsecond UTC timestamps)."""
    return to_arrow_schema(schema, timezone="UTC")


class ColumnBuffer:
    """Column lists of the records added since the last :meth:`flush`.

    ``add`` costs O(fields of the record); ``flush`` builds each column with one
    C-level Arrow call.  Not thread-safe: one buffer per reading task.
    """

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.arrow = arrow_schema(schema)
        self.rocketmq = len(schema.fields) == len(ROCKETMQ_SCHEMA.fields)
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.topic: list[str] = []
        self.partition: list[int] = []
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.timestamp_type: list[int] = []
        self.header_offsets: list[int] = [0]
        self.header_keys: list[str] = []
        self.header_values: list[bytes | None] = []
        self.tags: list[str | None] = []
        self.keys_offsets: list[int] = [0]
        self.keys_flat: list[str] = []
        self.prop_offsets: list[int] = [0]
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.born_timestamp: list[int] = []
        self.store_timestamp: list[int] = []
        self.born_host: list[str | None] = []
        self.store_host: list[str | None] = []
        self.msg_id: list[str | None] = []
        self.physical_offset: list[int] = []
        self.sys_flag: list[int] = []
        self.flag: list[int] = []
        self.reconsume_times: list[int] = []

    def add(self, message: Message, rocketmq: dict[str, Any] | None = None) -> None:
        """Add one record: its common view and, for RocketMQ, the fields of :func:`rocketmq_fields`."""
        self.rows += 1
        self.value.append(message.value)
        self.topic.append(message.topic)
        self.partition.append(message.partition)
        self.offset.append(message.offset)
        self.timestamp.append(message.timestamp * _MICROS_PER_MILLI)
        self.timestamp_type.append(TIMESTAMP_TYPE_IDS[message.timestamp_type])
        headers = message.headers
        if headers:
            self.header_keys.extend(name for name, _ in headers)
            self.header_values.extend(value for _, value in headers)
        self.header_offsets.append(len(self.header_keys))
        if rocketmq is None:
            self.key.append(message.key)
            return
        keys = rocketmq["keys"]
        self.key.append(keys[0].encode("utf-8") if keys else None)
        self.keys_flat.extend(keys)
        self.keys_offsets.append(len(self.keys_flat))
        properties = rocketmq["properties"]
        self.prop_keys.extend(properties)
        self.prop_values.extend(properties.values())
        self.prop_offsets.append(len(self.prop_keys))
        self.tags.append(rocketmq["tags"])
        self.born_timestamp.append(rocketmq["born_timestamp"] * _MICROS_PER_MILLI)
        self.store_timestamp.append(rocketmq["store_timestamp"] * _MICROS_PER_MILLI)
        self.born_host.append(rocketmq["born_host"])
        self.store_host.append(rocketmq["store_host"])
        self.msg_id.append(rocketmq["msg_id"])
        self.physical_offset.append(rocketmq["physical_offset"])
        self.sys_flag.append(rocketmq["sys_flag"])
        self.flag.append(rocketmq["flag"])
        self.reconsume_times.append(rocketmq["reconsume_times"])

    def flush(self) -> pa.RecordBatch:
        """The buffered rows as one record batch of exactly :attr:`arrow`; empties the buffer."""
        types = [field.type for field in self.arrow]
        header_type = types[7]
        struct_fields = list(header_type.value_type)
        headers = pa.ListArray.from_arrays(
            pa.array(self.header_offsets, pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(self.header_keys, pa.string()), pa.array(self.header_values, pa.binary())],
                fields=struct_fields),
            type=header_type)
        columns = [
            pa.array(self.key, types[0]),
            pa.array(self.value, types[1]),
            pa.array(self.topic, types[2]),
            pa.array(self.partition, types[3]),
            pa.array(self.offset, types[4]),
            pa.array(self.timestamp, types[5]),
            pa.array(self.timestamp_type, types[6]),
            headers,
        ]
        if self.rocketmq:
            columns += [
                pa.array(self.tags, types[8]),
                pa.ListArray.from_arrays(pa.array(self.keys_offsets, pa.int32()),
                                         pa.array(self.keys_flat, pa.string()), type=types[9]),
                pa.MapArray.from_arrays(pa.array(self.prop_offsets, pa.int32()),
                                        pa.array(self.prop_keys, pa.string()),
                                        pa.array(self.prop_values, pa.string()), type=types[10]),
                pa.array(self.born_timestamp, types[11]),
                pa.array(self.store_timestamp, types[12]),
                pa.array(self.born_host, types[13]),
                pa.array(self.store_host, types[14]),
                pa.array(self.msg_id, types[15]),
                pa.array(self.physical_offset, types[16]),
                pa.array(self.sys_flag, types[17]),
                pa.array(self.flag, types[18]),
                pa.array(self.reconsume_times, types[19]),
            ]
        batch = pa.RecordBatch.from_arrays(columns, schema=self.arrow)
        self._reset()
        return batch
