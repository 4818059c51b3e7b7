"""Arrow batches of the Spark source: exactly the schema Spark checks, values as given (no session)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark")

from segstore.spark.schema import (
    KAFKA_SCHEMA,
    OFFSET_INDEX,
    ROCKETMQ_SCHEMA,
    ColumnBuffer,
    arrow_schema,
    spark_schema,
)


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def test_kafka_rows_become_one_batch_of_the_exact_schema():
    buffer = ColumnBuffer(KAFKA_SCHEMA)
    buffer.add((b"k", b"v", "t", 3, 7, 1_700_000_000_123, 1, [("h", b"x"), ("n", None)]))
    buffer.add((None, None, "t", 3, 8, -1, 0, []))
    assert len(buffer) == 2
    batch = buffer.flush()
    assert len(buffer) == 0
    assert batch.schema.equals(arrow_schema(KAFKA_SCHEMA))
    rows = batch.to_pylist()
    assert rows[0] == {"key": b"k", "value": b"v", "topic": "t", "partition": 3, "offset": 7,
                       "timestamp": _utc(1_700_000_000_123), "timestampType": 1,
                       "headers": [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]}
    assert rows[1]["key"] is None and rows[1]["headers"] == [] and rows[1]["timestamp"] == _utc(-1)


def test_rocketmq_rows_carry_every_extra_column():
    buffer = ColumnBuffer(ROCKETMQ_SCHEMA)
    props = {"KEYS": "a b", "TAGS": "T"}
    buffer.add((b"a", b"body", "TopicA", 1, 0, 1000, 0, [("KEYS", b"a b"), ("TAGS", b"T")],
                "T", ["a", "b"], props, 1000, 2000, "10.0.0.1:1", "[::1]:2", "ID", 4096, 0, 5, 2))
    row = buffer.flush().to_pylist()[0]
    assert row["keys"] == ["a", "b"] and row["properties"] == list(props.items())
    assert (row["bornTimestamp"], row["storeTimestamp"]) == (_utc(1000), _utc(2000))
    assert (row["bornHost"], row["storeHost"], row["msgId"]) == ("10.0.0.1:1", "[::1]:2", "ID")
    assert (row["physicalOffset"], row["sysFlag"], row["flag"], row["reconsumeTimes"]) == (4096, 0, 5, 2)


def test_empty_flush_and_schema_choice():
    assert ColumnBuffer(KAFKA_SCHEMA).flush().num_rows == 0
    assert spark_schema("rocketmq") is ROCKETMQ_SCHEMA and spark_schema("kafka") is KAFKA_SCHEMA
    assert KAFKA_SCHEMA.fieldNames()[OFFSET_INDEX] == "offset"
