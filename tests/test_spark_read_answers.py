"""Both batch readers give a query's SQL answer: pushdown only skips rows that cannot match, options and
schemas are checked alike, whatever the times stored."""

from __future__ import annotations

import pytest
from spark_support import reader, source, spark  # noqa: F401

import segstore

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def kafka_logs(tmp_path_factory):
    """A Kafka log dir: topic ``t``, partition 0, five records at 1700000000000 + i ms."""
    path = tmp_path_factory.mktemp("kafka") / "kafka-logs"
    with segstore.open(str(path), "kafka", "a") as store:
        for i in range(5):
            store.append({"topic": "t", "partition": 0, "key": b"k", "value": b"v%d" % i,
                          "timestamp": 1700000000000 + i})
    return str(path)


@pytest.mark.parametrize("where", ["timestamp >= timestamp_millis(-1)", "timestamp >= timestamp_millis(-3)",
                                   "timestamp >= timestamp_millis(-2)",
                                   "timestamp > TIMESTAMP '1969-12-31 23:59:59.9995'",
                                   "timestamp >= timestamp_millis(-1) AND timestamp >= timestamp_millis(0)"])
def test_a_time_bound_before_the_epoch_keeps_every_later_row(spark, reader, kafka_logs, where):  # noqa: F811
    """Negative times mean positions only in ListOffsets (Kafka 3.8.0 UnifiedLog.fetchOffsetByTimestamp:
    -1 latest, -2 earliest, -3 the largest timestamp's offset); as a filter's bound, -1 ms is a time
    like any other, and every record here is after it."""
    assert source(spark, reader).load(kafka_logs).where(where).count() == 5
