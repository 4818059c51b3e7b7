"""Spark reads of every compat fixture equal the library's own reads; options prune planning."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import timezone

import pytest
from conftest import KAFKA_FIXTURES, ROCKETMQ_FIXTURES
from spark_support import (  # noqa: F401
    FIXTURES,
    fixture_config,
    library_rows,
    reader,
    sort_rows,
    source,
    spark,
    spark_rows,
)

import segstore
from segstore.errors import TruncatedDataError

pytestmark = pytest.mark.spark


def _load(spark, reader, path, config, **options):  # noqa: F811
    """A DataFrame of the store read by ``reader``, with the headers column (``includeHeaders``), as
    the library rows have."""
    options.setdefault("includeHeaders", "true")
    frame = source(spark, reader).option("config", json.dumps(config))
    for name, value in options.items():
        frame = frame.option(name, value)
    return frame.load(str(path))


@pytest.fixture(scope="module")
def rocketmq_stores(tmp_path_factory):
    """Each RocketMQ fixture store; `abort` as a copy (its unclean shutdown may need recovery)."""
    stores = {}
    for name in ROCKETMQ_FIXTURES:
        src = FIXTURES / "rocketmq" / name / "store"
        if name == "abort":
            dst = tmp_path_factory.mktemp("abort") / "store"
            shutil.copytree(src, dst, copy_function=shutil.copyfile)
            shutil.copyfile(FIXTURES / "rocketmq" / name / "spec.json", dst.parent / "spec.json")
            src = dst
        stores[name] = src
    return stores


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_rocketmq_fixture_rows_equal_library(spark, reader, rocketmq_stores, name):  # noqa: F811
    path = rocketmq_stores[name]
    config = fixture_config(path)
    expected = sort_rows(library_rows(path, config))
    df = _load(spark, reader, path, config)
    assert df.schema.fieldNames()[:8] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                          "timestampType", "headers"]
    got = spark_rows(df)
    assert len(got) == len(expected) > 0
    assert got == expected


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_kafka_fixture_rows_equal_library(spark, reader, name):  # noqa: F811
    path = FIXTURES / "kafka" / name / "topic-0"
    config = fixture_config(path)
    expected = sort_rows(library_rows(path, config))
    got = spark_rows(_load(spark, reader, path, config))
    assert len(got) == len(expected) > 0
    assert got == expected


def test_kafka_control_records_on_request(spark, reader):  # noqa: F811
    path = FIXTURES / "kafka" / "txn" / "topic-0"
    config = fixture_config(path)
    expected = sort_rows(library_rows(path, config, include_control=True))
    got = spark_rows(_load(spark, reader, path, config, includeControlRecords="true", format="kafka"))
    assert len(got) == len(expected) > len(library_rows(path, config))
    assert got == expected


def test_forced_format_and_missing_store_are_reported(spark, reader, tmp_path):  # noqa: F811
    kafka_dir = FIXTURES / "kafka" / "txn" / "topic-0"
    with pytest.raises(Exception, match="expected a rocketmq store, found a kafka store"):
        _load(spark, reader, kafka_dir, {}, format="rocketmq").schema  # noqa: B018
    rocketmq_dir = FIXTURES / "rocketmq" / "basic" / "store"
    with pytest.raises(Exception, match="expected a kafka store, found a rocketmq store"):
        _load(spark, reader, rocketmq_dir, {}, format="kafka").schema  # noqa: B018
    with pytest.raises(Exception, match="nothing: expected a store directory to read, found no such file"):
        _load(spark, reader, tmp_path / "nothing", {}).schema  # noqa: B018
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="not a store of any known format"):
        _load(spark, reader, tmp_path / "empty", {}).schema  # noqa: B018


def test_a_torn_kafka_tail_is_the_error_a_read_of_every_record_raises(spark, reader, tmp_path):  # noqa: F811
    """Spark plans to each partition's last whole batch; a read to the end is refused as scan_arrow refuses
    it, not given the partition's other records (or none) as if they were all."""
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "kafka" / "uncompressed", logs, ignore=shutil.ignore_patterns("*.json*"))
    (log,) = sorted(logs.glob("*/*.log"))[-1:]
    os.truncate(log, log.stat().st_size - 3)
    with segstore.open(str(logs), format="kafka") as store, pytest.raises(TruncatedDataError) as raised:
        list(store.scan_arrow())
    with pytest.raises(Exception, match=re.escape(str(raised.value))):
        _load(spark, reader, logs, fixture_config(FIXTURES / "kafka" / "uncompressed" / "topic-0")).count()
    # a read that ends before the tail is whole: what it asks for is all there
    rows = _load(spark, reader, logs, fixture_config(FIXTURES / "kafka" / "uncompressed" / "topic-0"),
                 endingOffsets=json.dumps({"topic": {"0": 3}})).count()
    assert rows == 3


def _planned(df) -> int:
    return df.rdd.getNumPartitions()


def test_assign_and_offsets_prune_planning_rocketmq(spark, reader, rocketmq_stores):  # noqa: F811
    path = rocketmq_stores["basic"]
    config = fixture_config(path)
    with segstore.open(str(path), **config) as store:
        files = store.segment_infos("TopicA", 2)          # the queue's consume-queue files
    # a target that holds the largest file of the queue but not two: one input partition per file
    target = max(f["bytes"] for f in files)
    assert len(files) >= 2 and target < sum(f["bytes"] for f in files[-2:])
    sizing = {"maxBytesPerPartition": str(target), "minPartitions": "1"}
    all_parts = _planned(_load(spark, reader, path, config, **sizing))
    one_topic = _load(spark, reader, path, config, subscribe="TopicA", **sizing)
    one_queue = _load(spark, reader, path, config, assign='{"TopicA": [2]}', **sizing)
    start = files[-1]["start_offset"]
    tail = _load(spark, reader, path, config, assign='{"TopicA": [2]}',
                 startingOffsets=json.dumps({"TopicA": {"2": start}}), **sizing)
    assert _planned(one_topic) < all_parts
    assert _planned(one_queue) == len(files) < _planned(one_topic)
    assert _planned(tail) == 1
    library = library_rows(path, config)
    got = {(r.partition, r.offset) for r in tail.select("partition", "offset").collect()}
    assert got == {(r["partition"], r["offset"]) for r in library if r["topic"] == "TopicA"
                   and r["partition"] == 2 and r["offset"] >= start}
    assert one_queue.count() == sum(r["topic"] == "TopicA" and r["partition"] == 2 for r in library)
    pattern = _load(spark, reader, path, config, subscribePattern="Topic[AB]")
    assert pattern.count() == sum(r["topic"] in ("TopicA", "TopicB") for r in library)


def test_pushdown_reader_prunes_its_plan(rocketmq_stores):
    """PushdownReader (used where Spark keeps a pushdown's plan per scan) prunes exactly."""
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual

    from segstore.spark.datasource import PushdownReader, SegstoreReader
    from segstore.spark.options import parse_read_options
    from segstore.spark.schema import spark_schema

    path = rocketmq_stores["basic"]
    config = fixture_config(path)
    library = library_rows(path, config)
    options = parse_read_options({"path": str(path), "config": json.dumps(config), "minPartitions": "1",
                                  "maxBytesPerPartition": "512", "includeHeaders": "true"})
    schema = spark_schema("rocketmq")
    plain = SegstoreReader(options, "rocketmq", schema)
    assert "pushFilters" not in vars(SegstoreReader)     # Spark pushes nothing to the plain reader
    assert len(plain.partitions()) > 1
    pushing = PushdownReader(options, "rocketmq", schema)
    everything = len(pushing.partitions())
    filters = [EqualTo(("topic",), "TopicB"), EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), 3)]
    assert pushing.pushFilters(filters) == []
    parts = pushing.partitions()
    assert 0 < len(parts) < everything
    offsets = sorted(o for p in parts for b in pushing.read(p) for o in b.column("offset").to_pylist())
    assert offsets == sorted(r["offset"] for r in library
                             if r["topic"] == "TopicB" and r["partition"] == 0 and r["offset"] >= 3)
    assert pushing.pushFilters([]) == [] and len(pushing.partitions()) == everything     # nothing kept


def test_pushdown_only_where_spark_keeps_it_per_scan(spark, reader):  # noqa: F811
    """The Python reader prunes by pushed filters only where Spark keeps the plan per scan; the
    JVM reader's scan builder is made per scan (SupportsPushDownFilters), so it always prunes."""
    from segstore.spark import pushdown_is_per_scan

    provider = spark.sparkContext._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2")
    shared = any(m.getName() == "setReadInfo" for m in provider.getMethods())
    assert pushdown_is_per_scan(spark) is (not shared)
    path = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    df = _load(spark, reader, path, fixture_config(path), minPartitions="1",
               maxBytesPerPartition=str(fixture_config(path)["segment.bytes"]))
    tail = df.filter("offset >= 295")
    assert tail.count() == 5
    if reader == "python" and shared:      # e.g. Spark 4.3: the plan is not pruned, Spark filters the rows
        assert _planned(tail) == _planned(df)
    else:
        assert _planned(tail) == 1


def test_time_options_prune_kafka_segments(spark, reader):  # noqa: F811
    path = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    config = fixture_config(path)
    library = library_rows(path, config)
    sizing = {"maxBytesPerPartition": str(config["segment.bytes"]), "minPartitions": "1"}
    segments = _planned(_load(spark, reader, path, config, **sizing))
    # partitions are filled to segment.bytes each: as many as the logs' bytes need
    log_bytes = sum(p.stat().st_size for p in path.glob("*.log"))
    assert segments == -(-log_bytes // config["segment.bytes"]) > 1
    cut = library[len(library) * 3 // 4]["timestamp"].replace(tzinfo=timezone.utc)
    ms = int(cut.timestamp() * 1000)
    late = _load(spark, reader, path, config, startingOffsetsByTimestamp=json.dumps({"topic": {"0": ms}}),
                 **sizing)
    assert _planned(late) < segments
    with segstore.open(str(path), **config) as store:
        first = store.offset_for_time("topic", 0, ms)
    assert sorted(r.offset for r in late.select("offset").collect()) == \
        [r["offset"] for r in library if r["offset"] >= first]
    early = _load(spark, reader, path, config, endingOffsetsByTimestamp=json.dumps({"topic": {"0": ms}}),
                  **sizing)
    assert early.count() == first - library[0]["offset"]


def test_options_offsets_and_timestamps(spark, reader, rocketmq_stores):  # noqa: F811
    path = rocketmq_stores["basic"]
    config = fixture_config(path)
    library = library_rows(path, config)
    # specific offsets name every partition read, -2 (earliest) and -1 (latest) the others, as the connector
    # requires (Spark 4 KafkaOffsetReaderAdmin.fetchPartitionOffsets)
    queues = sorted({r["partition"] for r in library if r["topic"] == "TopicA"})
    df = _load(spark, reader, path, config, topics="TopicA",
               startingOffsets=json.dumps({"TopicA": {str(q): 10 if q == 0 else -2 for q in queues}}),
               endingOffsets=json.dumps({"TopicA": {str(q): {0: 20, 1: 5}.get(q, -1) for q in queues}}))
    got = {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}
    expected = {(r["partition"], r["offset"]) for r in library if r["topic"] == "TopicA"
                and ((r["partition"] == 0 and 10 <= r["offset"] < 20)
                     or (r["partition"] == 1 and r["offset"] < 5)
                     or r["partition"] > 1)}
    assert got == expected
    stamps = sorted(r["storeTimestamp"] for r in library if r["topic"] == "TopicA")
    middle = stamps[len(stamps) // 2]
    ms = int(middle.replace(tzinfo=timezone.utc).timestamp() * 1000)
    after = _load(spark, reader, path, config, topics="TopicA", startingTimestamp=str(ms))
    assert after.count() == sum(1 for s in stamps if s >= middle)
    # Spark 4 SubscribeStrategy: describeTopics fails for a topic the cluster lacks
    with pytest.raises(Exception, match="option subscribe names topic NoSuchTopic, which the store does not"):
        _load(spark, reader, path, config, topics="NoSuchTopic").collect()


def test_headers_column_only_with_include_headers(spark, reader):  # noqa: F811
    path = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    config = fixture_config(path)
    plain = source(spark, reader).option("config", json.dumps(config)).load(str(path))
    assert plain.schema.fieldNames() == ["key", "value", "topic", "partition", "offset", "timestamp",
                                         "timestampType"]
    expected = sort_rows(library_rows(path, config))
    assert [r.asDict() for r in plain.orderBy("offset").collect()] == \
        [{k: v for k, v in r.items() if k != "headers"} for r in expected]
    rocketmq = FIXTURES / "rocketmq" / "basic" / "store"
    assert "headers" not in source(spark, reader).load(str(rocketmq)).schema.fieldNames()
    assert "headers" in _load(spark, reader, rocketmq, {}).schema.fieldNames()


def test_read_committed_hides_aborted_transactions(spark, reader):  # noqa: F811
    path = FIXTURES / "kafka" / "txn" / "topic-0"
    config = fixture_config(path)
    with segstore.open(str(path), **config) as store:
        committed = [r.offset for r in store.read("topic", 0, isolation="read_committed")]
        uncommitted = [r.offset for r in store.read("topic", 0) if not r.batch.is_control]
    assert len(committed) < len(uncommitted)
    df = _load(spark, reader, path, config,
               **{"kafka.isolation.level": "read_committed", "minPartitions": "3"})
    assert sorted(r.offset for r in df.select("offset").collect()) == committed
    df = _load(spark, reader, path, config, **{"kafka.isolation.level": "read_uncommitted"})
    assert sorted(r.offset for r in df.select("offset").collect()) == uncommitted
    # RocketMQ queues hold committed messages only: both levels read the same rows
    rocketmq = FIXTURES / "rocketmq" / "basic" / "store"
    assert _load(spark, reader, rocketmq, {}, **{"kafka.isolation.level": "read_committed"}).count() == \
        len(library_rows(rocketmq, {}))


def test_fail_on_data_loss(spark, reader, tmp_path):  # noqa: F811
    path = tmp_path / "logs"
    config = {"segment.bytes": 1024, "retention.bytes": 2048}
    with segstore.open(str(path), format="kafka", mode="a", **config) as store:
        for i in range(60):
            store.append_batch([segstore.Message(topic="t", value=b"x" * 100 + str(i).encode())])
        low, high = store.offset_range("t", 0)
    assert low > 0    # retention deleted the first segments
    asked = json.dumps({"t": {"0": 0}})
    with pytest.raises(Exception, match=rf"t-0 from offset 0.*from {low} on.*failOnDataLoss=false") as err:
        _load(spark, reader, path, {}, startingOffsets=asked).count()
    assert "--" not in str(err.value).split("\n")[0]
    skipped = _load(spark, reader, path, {}, startingOffsets=asked, failOnDataLoss="false")
    assert sorted(r.offset for r in skipped.select("offset").collect()) == list(range(low, high))


@pytest.mark.parametrize(("option", "value", "message"), [
    ("kafka.bootstrap.servers", "localhost:9092", "load(PATH)"),
    ("kafka.security.protocol", "SSL", "load(PATH)"),
    ("groupIdPrefix", "g", "load(PATH)"),
    ("subscribeTopics", "x", "unknown option"),
    ("maxRecordsPerPartition", "0", "maxRecordsPerPartition must be at least 1"),
    # a batch query ignores the streaming admission options (Spark 4 KafkaSourceProvider.validateBatchOptions)
    # but for a minimum above the maximum (validateGeneralOptions)
    ("minOffsetsPerTrigger", "5", "minOffsetPerTrigger(5) is higher than the maxOffsetsPerTrigger(4)"),
])
def test_connector_options_that_make_no_sense_offline_are_refused(spark, reader, option, value, message):  # noqa: F811
    path = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    with pytest.raises(Exception, match=re.escape(message)):
        frame = source(spark, reader).option(option, value).option("maxOffsetsPerTrigger", "4")
        frame.load(str(path)).count()


def test_errors_name_options_not_cli_flags(spark, reader, tmp_path):  # noqa: F811
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.bin").write_bytes(b"not a store")
    with pytest.raises(Exception) as err:
        source(spark, reader).load(str(tmp_path / "junk")).count()
    text = str(err.value)
    assert "not a store of any known format" in text
    assert '.option("format", NAME)' in text and "--format" not in text


@pytest.mark.parametrize("name", [*KAFKA_FIXTURES, "rocketmq-basic"])
def test_batches_cut_small_read_in_place_equal_library(spark, name):  # noqa: F811
    """Flat columns cut into batches of 3 rows (``maxRecordsPerBatch``) reach the JVM reader as windows
    of the buffers in the worker's arena (offsets starting above 0, nulls not starting on a byte
    shifted into a copy): the rows are still the library's."""
    if name == "rocketmq-basic":
        path = FIXTURES / "rocketmq" / "basic" / "store"
    else:
        path = FIXTURES / "kafka" / name / "topic-0"
    config = fixture_config(path)
    expected = [{k: v for k, v in row.items() if k != "headers"}
                for row in sort_rows(library_rows(path, config))]
    frame = (spark.read.format("segstore").option("reader", "jvm").option("config", json.dumps(config))
             .option("maxRecordsPerBatch", "3").load(str(path)))
    got = [row.asDict() for row in frame.orderBy("topic", "partition", "offset").collect()]
    assert "headers" not in frame.columns and len(got) == len(expected) > 0
    assert got == expected
