"""Helpers of the Spark tests: the one shared session, fixture configs, the library's rows.

Test modules import the ``spark`` fixture from here; every module gets the same
SparkSession (``getOrCreate``), started once per test run and stopped at its end.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import segstore

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "compat_fixtures"


@pytest.fixture(scope="session")
def spark():
    """The local SparkSession shared by every Spark test (segstore source registered)."""
    pytest.importorskip("pyspark")
    from segstore.spark import local_session

    session = local_session("segstore-tests", cores=2)
    yield session
    session.stop()


#: The source's two batch readers: the columnar JVM reader (``segstore/spark/java``) and PySpark's
#: Python data source (``segstore.spark.datasource``), chosen per read with ``.option("reader", ...)``.
READERS = ("jvm", "python")


@pytest.fixture(params=READERS)
def reader(request, spark):
    """Each batch reader in turn; the JVM reader's jar must be on the test session's classpath."""
    from segstore.spark import jvm_source_loaded

    assert jvm_source_loaded(spark), "local_session() should have built and loaded the JVM reader's jar"
    return request.param


#: Where a batch write's tasks stage their rows: the JVM side (``SegstoreBatchWrite``) or PySpark's
#: Python data source (``segstore.spark.datasource.SegstoreWriter``); the commit is Python's either way.
WRITERS = ("jvm", "python")


@pytest.fixture(params=WRITERS)
def writer(request, spark):
    """Each batch writer in turn (``.option("writer", ...)``)."""
    from segstore.spark import jvm_source_loaded

    assert jvm_source_loaded(spark), "local_session() should have built and loaded the JVM side's jar"
    return request.param


def source(spark, reader):
    """``spark.read.format("segstore")`` reading with ``reader`` (``jvm`` or ``python``)."""
    return spark.read.format("segstore").option("reader", reader)


def fixture_config(store_path: Path) -> dict[str, Any]:
    """The broker config a fixture was written with (spec.json next to the store), for ``segstore.open``."""
    spec = store_path.parent / "spec.json"
    if not spec.exists():
        return {}
    return json.loads(spec.read_text())["config"]


def utc(ms: int) -> datetime:
    """A millisecond timestamp as Spark collects it with the session time zone UTC (naive)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(tzinfo=None)


TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}


def library_rows(path: Path, config: dict[str, Any], *, format_name: str | None = None,
                 include_control: bool = False) -> list[dict[str, Any]]:
    """Every record the library reads through its queues/partitions, as Spark rows should show it.

    Built from ``to_common`` and the ``dump --json`` view (``to_json``), not from the
    Spark source's own conversion, so it checks that conversion.
    """
    rows = []
    with segstore.open(str(path), format=format_name, **config) as store:
        for topic in store.topics():
            for partition in store.partitions(topic):
                for record in store.read(topic, partition):
                    common = store.to_common(record)
                    dumped = store.to_json(record)
                    if not include_control and dumped.get("batch", {}).get("is_control"):
                        continue
                    rows.append(_row(store.format, common, dumped))
    return rows


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _row(format_name: str, common: segstore.Message, dumped: dict[str, Any]) -> dict[str, Any]:
    row = {
        "value": common.value,
        "topic": common.topic,
        "partition": common.partition,
        "offset": common.offset,
        "timestamp": utc(common.timestamp),
        "timestampType": TIMESTAMP_TYPES[common.timestamp_type],
        # null for no headers, as Spark's Kafka connector (KafkaRecordToRowConverter)
        "headers": [{"key": k, "value": v} for k, v in common.headers] or None,
    }
    if format_name != "rocketmq":
        row["key"] = _b64(dumped["key"])
        assert row["value"] == _b64(dumped["value"])
        return row
    keys = dumped["keys"]
    assert row["value"] == _b64(dumped["body"])
    row.update({
        "key": keys[0].encode("utf-8") if keys else None,
        "tags": dumped["tags"],
        "keys": keys,
        "properties": dumped["properties"],
        "bornTimestamp": utc(dumped["born_timestamp"]),
        "storeTimestamp": utc(dumped["store_timestamp"]),
        "bornHost": dumped["born_host"],
        "storeHost": dumped["store_host"],
        "msgId": dumped["msg_id"],
        "physicalOffset": dumped["physical_offset"],
        "sysFlag": dumped["sys_flag"],
        "flag": dumped["flag"],
        "reconsumeTimes": dumped["reconsume_times"],
    })
    return row


def spark_rows(df) -> list[dict[str, Any]]:
    """Collected rows as plain dicts, ordered by (topic, partition, offset)."""
    out = []
    for row in df.orderBy("topic", "partition", "offset").collect():
        d = row.asDict(recursive=True)
        if d["headers"] is not None:
            d["headers"] = [{"key": h["key"], "value": h["value"]} for h in d["headers"]]
        out.append(d)
    return out


def sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))
