"""Every query on one DataFrame or one SQL view answers as the library does, whatever ran before.

Spark 4.3 keeps the read info a filter pushdown planned on the relation's provider
(``PythonDataSourceV2.setReadInfo``, called from ``PythonScanBuilder.pushFilters``) and
hands it to every later scan of that relation that pushes nothing, and to every scan
of the same query.  These tests run unfiltered and filtered queries in turn on the same
relation, on the RocketMQ and Kafka compat fixtures, and compare each count with the
library's reads (``segstore.open``).
"""

from __future__ import annotations

import json
from datetime import timezone

import pytest
from spark_support import FIXTURES, fixture_config, library_rows, reader, source, spark  # noqa: F401

pytestmark = pytest.mark.spark

STORES = {
    "rocketmq": (FIXTURES / "rocketmq" / "basic" / "store", "storeTimestamp"),
    "kafka": (FIXTURES / "kafka" / "uncompressed" / "topic-0", "timestamp"),
}


def _queries(rows, time_column):
    """(SQL condition, library count) for each pushed kind: topic, partition, offset, time."""
    topics = sorted({r["topic"] for r in rows})
    partitions = sorted({r["partition"] for r in rows})
    offsets = sorted(r["offset"] for r in rows)
    stamps = sorted(r[time_column] for r in rows)
    topic, partition = topics[-1], partitions[-1]
    cut_offset = offsets[len(offsets) // 2]
    cut_time = stamps[len(stamps) * 3 // 4]
    when = cut_time.replace(tzinfo=timezone.utc).isoformat(sep=" ").replace("+00:00", "")
    return [
        (f"topic = '{topic}'", sum(r["topic"] == topic for r in rows)),
        (f"topic IN ('{topics[0]}', 'nothing')", sum(r["topic"] == topics[0] for r in rows)),
        (f"partition = {partition}", sum(r["partition"] == partition for r in rows)),
        (f"partition < {partition}", sum(r["partition"] < partition for r in rows)),
        ("partition = 99", 0),
        (f"offset >= {cut_offset}", sum(r["offset"] >= cut_offset for r in rows)),
        ("offset < 3", sum(r["offset"] < 3 for r in rows)),
        (f"topic = '{topic}' AND partition = {partition} AND offset >= 2",
         sum(r["topic"] == topic and r["partition"] == partition and r["offset"] >= 2 for r in rows)),
        (f"{time_column} >= TIMESTAMP '{when}'", sum(r[time_column] >= cut_time for r in rows)),
    ]


@pytest.mark.parametrize("format_name", sorted(STORES))
def test_one_dataframe_and_one_view_answer_every_query(spark, reader, format_name):  # noqa: F811
    path, time_column = STORES[format_name]
    config = fixture_config(path)
    rows = library_rows(path, config)
    queries = _queries(rows, time_column)
    df = source(spark, reader).option("config", json.dumps(config)).load(str(path))
    view = f"segstore_{format_name}_{reader}"
    df.createOrReplaceTempView(view)
    sql = spark.sql

    assert df.count() == len(rows) > 0
    assert sql(f"SELECT count(*) FROM {view}").first()[0] == len(rows)
    for condition, expected in queries:
        assert df.where(condition).count() == expected, condition
        assert sql(f"SELECT count(*) FROM {view} WHERE {condition}").first()[0] == expected, condition
        assert df.count() == len(rows), f"after {condition}"
        assert sql(f"SELECT count(*) FROM {view}").first()[0] == len(rows), f"after {condition}"
    # two scans of the relation in one query, each with its own filters
    (first, n_first), (second, n_second) = queries[0], queries[5]
    assert df.where(first).union(df.where(second)).count() == n_first + n_second
    assert sql(f"SELECT count(*) FROM (SELECT offset FROM {view} WHERE {first} "
               f"UNION ALL SELECT offset FROM {view} WHERE {second})").first()[0] == n_first + n_second
    assert df.where(first).union(df).count() == n_first + len(rows)
    assert df.count() == len(rows)
    assert sql(f"SELECT count(*) FROM {view}").first()[0] == len(rows)
