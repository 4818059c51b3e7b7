"""Row schemas of the ``segstore`` Spark source and the Arrow batches its readers yield.

The columns follow Spark's own Kafka connector (``key, value, topic, partition,
offset, timestamp, timestampType, headers``); RocketMQ stores add the fields a
RocketMQ message has and a Kafka record lacks.  RocketMQ maps onto the Kafka
names as: queue id -> ``partition``, queue offset -> ``offset``, body ->
``value``, first of the KEYS property -> ``key``.

The names are those of :mod:`segstore.columns`, so a reader asks the store's
``scan_arrow`` for exactly these columns; :func:`arrow_schema` is the schema Spark
checks its batches against (``pyspark.sql.pandas.types.to_arrow_schema(...,
timezone="UTC")``: timestamps in microseconds, UTC).
"""

from __future__ import annotations

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

ROCKETMQ = "rocketmq"
KAFKA = "kafka"

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
