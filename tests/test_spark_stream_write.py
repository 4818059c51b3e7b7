"""Spark writes (staged, committed only when every task succeeded) and streaming reads of live stores."""

from __future__ import annotations

import json
import os
import re
import tempfile

import pytest
from spark_support import (  # noqa: F401
    FIXTURES,
    fixture_config,
    library_rows,
    reader,
    source,
    spark,
    utc,
    writer,
)

import segstore

pytestmark = pytest.mark.spark

HEADERS = "array<struct<key:string,value:binary>>"


def _library_values(path, topic, partition):
    with segstore.open(str(path)) as store:
        return [store.to_common(r) for r in store.read(topic, partition)]


@pytest.mark.parametrize("format_name", ["rocketmq", "kafka"])
def test_write_appends_in_dataframe_order(spark, writer, tmp_path, format_name):  # noqa: F811
    path = tmp_path / "store"
    rows = [(f"v{i}".encode(), f"k{i}", "orders", i % 2, [("h", f"{i}".encode())]) for i in range(40)]
    schema = f"value binary, key string, topic string, partition int, headers {HEADERS}"
    df = spark.createDataFrame(rows, schema)
    df.coalesce(3).write.format("segstore").option("writer", writer).option("format", format_name) \
        .mode("append").save(str(path))
    for partition in (0, 1):
        got = _library_values(path, "orders", partition)
        expected = [r for r in rows if r[3] == partition]
        assert [m.value for m in got] == [r[0] for r in expected]
        assert [m.offset for m in got] == list(range(len(expected)))
        assert [m.key for m in got] == [r[1].encode() for r in expected]
        if format_name == "kafka":
            assert [m.headers for m in got] == [r[4] for r in expected]
    assert os.listdir(tmp_path) == ["store"]      # nothing staged beside the store
    # a second job appends after the first
    spark.createDataFrame([("more",)], "value string").write.format("segstore").option("writer", writer) \
        .option("topic", "orders").mode("append").save(str(path))
    assert _library_values(path, "orders", 0)[-1].value == b"more"


def test_a_batch_write_is_staged_by_the_jvm_side_unless_told(spark, tmp_path):  # noqa: F811
    """``format("segstore")`` stages in the JVM by default: it takes ``writer=jvm``, which the Python data
    source alone refuses; ``writer=python`` goes to the Python data source."""
    path = str(tmp_path / "store")
    frame = spark.createDataFrame([(f"v{i}", i) for i in range(10)], "value string, timestamp_ms long") \
        .selectExpr("value", "timestamp_millis(timestamp_ms) AS timestamp").repartition(2)
    frame.write.format("segstore").option("topic", "t").mode("append").save(path)
    frame.write.format("segstore").option("writer", "jvm").option("topic", "t").mode("append").save(path)
    frame.write.format("segstore").option("writer", "python").option("topic", "t").mode("append").save(path)
    with pytest.raises(Exception, match="writer=jvm: the JVM side of the source is not on this session"):
        frame.write.format(_register(spark, "segstore_python_only")).option("writer", "jvm") \
            .option("topic", "t").mode("append").save(path)
    with pytest.raises(Exception, match="option writer must be jvm or python, found jvn"):
        frame.write.format("segstore").option("writer", "jvn").option("topic", "t").mode("append").save(path)
    got = _library_values(path, "t", 0)
    # every job's rows, their times as given (ms)
    assert sorted(m.value for m in got) == sorted([f"v{i}".encode() for i in range(10)] * 3)
    assert sorted(m.timestamp for m in got) == sorted(list(range(10)) * 3)
    assert os.listdir(tmp_path) == ["store"]


def test_write_failure_leaves_store_untouched(spark, writer, tmp_path):  # noqa: F811
    from pyspark.sql import functions as F

    path = tmp_path / "store"
    with segstore.open(str(path), format="kafka", mode="a") as store:
        store.append_batch([segstore.Message(topic="t", value=b"before")])

    @F.udf("binary")
    def explode_on_13(i):
        if i == 13:
            raise ValueError("task fails on row 13")
        return str(i).encode()

    df = spark.range(0, 20, numPartitions=4).select(explode_on_13("id").alias("value"))
    with pytest.raises(Exception, match="task fails on row 13"):
        df.write.format("segstore").option("writer", writer).option("topic", "t").mode("append") \
            .save(str(path))
    assert [m.value for m in _library_values(path, "t", 0)] == [b"before"]
    assert os.listdir(tmp_path) == ["store"]


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
def test_a_commit_refused_by_a_later_task_appends_nothing(spark, writer, tmp_path, format_name):  # noqa: F811
    """Every staged file is checked before the first is appended: a row of a later task with a null
    topic (no topic option) or a topic the format refuses appends none of the earlier tasks' rows,
    to an existing store or a new one (which is removed again, as a failed ``write`` removes it)."""
    sc = spark.sparkContext
    existing = tmp_path / "existing"
    with segstore.open(str(existing), format=format_name, mode="a") as store:
        store.append_batch([segstore.Message(topic="Orders", value=b"before")])
    for bad, said in ((None, "write task 1: row 0 has a null topic"), ("bad topic", "topic")):
        rows = sc.parallelize([("good1", "Orders"), ("good2", "Orders")], 1) \
            .union(sc.parallelize([("bad", bad)], 1))
        frame = spark.createDataFrame(rows, "value string, topic string")
        for path in (existing, tmp_path / "new"):
            with pytest.raises(Exception, match=said):
                frame.write.format("segstore").option("format", format_name).option("writer", writer) \
                    .mode("append").save(str(path))
            assert not (tmp_path / "new").exists()
            assert [m.value for m in _library_values(existing, "Orders", 0)] == [b"before"]


def test_write_refuses_bad_frames(spark, writer, tmp_path):  # noqa: F811
    path = str(tmp_path / "store")

    def write(schema):
        return spark.createDataFrame([("x",)], schema).write.format("segstore").option("writer", writer)

    with pytest.raises(Exception, match="value column"):
        write("payload string").option("topic", "t").mode("append").save(path)
    with pytest.raises(Exception, match="topic"):
        write("value string").mode("append").save(path)
    with pytest.raises(Exception, match="append-only"):
        write("value string").option("topic", "t").mode("overwrite").save(path)
    assert not os.path.exists(path)


def _append(path, format_name, start, count, partitions=2):
    with segstore.open(str(path), format=format_name, mode="a") as store:
        store.append_batch([segstore.Message(topic="live", value=f"m{i}".encode(), partition=i % partitions)
                            for i in range(start, start + count)])


def _run_available(spark, reader, path, checkpoint, batches):  # noqa: F811
    """Run the stream until it has read what the store holds now, then stop it."""

    def collect(df, batch_id):
        batches.append((batch_id, [r.value for r in df.select("value").collect()]))

    stream = (spark.readStream.format("segstore").option("reader", reader)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "12").load(str(path)))
    query = (stream.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    query.awaitTermination(300)
    assert query.exception() is None


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
def test_stream_tails_a_live_store_exactly_once(spark, reader, tmp_path, format_name):  # noqa: F811
    path = tmp_path / "live"
    _append(path, format_name, 0, 30)
    batches: list[tuple[int, list[bytes]]] = []
    _run_available(spark, reader, path, tmp_path / "checkpoint", batches)
    first = [v for _, b in batches for v in b]
    assert sorted(first) == sorted(f"m{i}".encode() for i in range(30))
    assert max(len(b) for _, b in batches) <= 12 and len(batches) >= 3      # maxOffsetsPerTrigger
    seen = len(batches)
    _append(path, format_name, 30, 25, partitions=3)   # the writer also adds a new partition
    _run_available(spark, reader, path, tmp_path / "checkpoint", batches)
    new = [v for _, b in batches[seen:] for v in b]
    assert sorted(new) == sorted(f"m{i}".encode() for i in range(30, 55))
    ids = [i for i, _ in batches]
    assert ids == list(range(len(ids)))          # the restarted query resumed from its checkpoint
    _run_available(spark, reader, path, tmp_path / "checkpoint", batches)
    assert len(batches) == len(ids)              # nothing new: no batch at all


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
def test_stream_running_query_sees_appends_once(spark, reader, tmp_path, format_name):  # noqa: F811
    # the query keeps polling while a writer appends and closes (a Kafka writer trims its active
    # index on close; readers take index files as a snapshot: docs/spark.md, "Streaming")
    path = tmp_path / "live"
    _append(path, format_name, 0, 10)
    batches: list[list[bytes]] = []

    def collect(df, batch_id):
        batches.append([r.value for r in df.select("value").collect()])

    query = (spark.readStream.format("segstore").option("reader", reader).option("startingOffsets", "latest")
             .load(str(path))
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        assert [v for b in batches for v in b] == []          # startingOffsets latest: nothing old
        for round_start in (10, 20):
            _append(path, format_name, round_start, 10)
            query.processAllAvailable()
        got = [v for b in batches for v in b]
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(10, 30))
        assert len(got) == len(set(got))
    finally:
        query.stop()


def test_min_offsets_per_trigger_holds_micro_batches_until_enough_wait(spark, reader, tmp_path):  # noqa: F811
    """Spark 4 KafkaMicroBatchStream: minOffsetsPerTrigger with maxTriggerDelay makes no micro-batch while
    fewer offsets wait and the delay (an hour here) has not passed since the last one, the query's first
    trigger excepted; both readers (the JVM one keeps the last batch's time across triggers, as the
    connector's lastTriggerMillis)."""
    path = tmp_path / "live"
    _append(path, "kafka", 0, 2, partitions=1)
    batches: list[list[bytes]] = []

    def collect(df, batch_id):
        batches.append(sorted(r.value for r in df.select("value").collect()))

    query = (spark.readStream.format("segstore").option("reader", reader)
             .option("startingOffsets", "earliest")
             .option("minOffsetsPerTrigger", "3").option("maxTriggerDelay", "1h").load(str(path))
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        assert batches == [[b"m0", b"m1"]]
        _append(path, "kafka", 2, 2, partitions=1)
        query.processAllAvailable()
        assert batches == [[b"m0", b"m1"]]              # 2 waiting: no micro-batch
        _append(path, "kafka", 4, 1, partitions=1)
        query.processAllAvailable()
        assert batches == [[b"m0", b"m1"], [b"m2", b"m3", b"m4"]]
    finally:
        query.stop()


@pytest.mark.parametrize(("options", "message"), [
    ({"minOffsetsPerTrigger": "3", "maxTriggerDelay": "1.5s"}, "maxTriggerDelay: time must be specified as"),
    ({"minOffsetsPerTrigger": "three"}, "option minOffsetsPerTrigger must be an integer, found 'three'"),
    ({"minOffsetsPerTrigger": "5", "maxOffsetsPerTrigger": "4"}, "minOffsetPerTrigger(5) is higher than"),
])
def test_a_stream_refuses_bad_admission_options_alike(spark, reader, tmp_path, options, message):  # noqa: F811
    """The JVM reader reads its read limits before the worker sees the options (SegstoreStream
    .getDefaultReadLimit): both readers refuse alike."""
    path = tmp_path / "live"
    _append(path, "kafka", 0, 1, partitions=1)
    queries = []
    with pytest.raises(Exception, match=re.escape(message)):       # at load or at the first trigger
        frame = spark.readStream.format("segstore").option("reader", reader).options(**options)
        frame = frame.load(str(path))
        queries.append(frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
                       .start())
        queries[0].processAllAvailable()
    for query in queries:
        query.stop()


def test_rocketmq_fixture_copied_to_kafka_through_spark(spark, reader, tmp_path):  # noqa: F811
    store = FIXTURES / "rocketmq" / "basic" / "store"
    config = fixture_config(store)
    target = tmp_path / "kafka"
    df = source(spark, reader).option("config", json.dumps(config)).option("includeHeaders", "true") \
        .load(str(store))
    df.select("key", "value", "topic", "partition", "timestamp", "headers") \
        .write.format("segstore").option("format", "kafka").mode("append").save(str(target))
    expected = library_rows(store, config)
    with segstore.open(str(target)) as copied:
        got = [copied.to_common(r)
               for t in copied.topics() for p in copied.partitions(t) for r in copied.read(t, p)]
    assert len(got) == len(expected)
    by_place = {(m.topic, m.partition, m.offset): m for m in got}
    for row in expected:     # queue offsets start at 0 in the fixture: Kafka offsets equal them
        m = by_place[(row["topic"], row["partition"], row["offset"])]
        assert (m.key, m.value, utc(m.timestamp)) == (row["key"], row["value"], row["timestamp"])
        assert ([{"key": k, "value": v} for k, v in m.headers] or None) == row["headers"]


def _register(spark, name: str, **settings):  # noqa: F811
    """Register the source as ``register`` would for a session like ``settings`` describes, under its
    own name, so that the session's ``segstore`` stays as it is."""
    from segstore.spark.datasource import SegstoreDataSource

    source = SegstoreDataSource.configured(**settings)
    source.name = classmethod(lambda cls: name)
    spark.dataSource.register(source)
    return name


@pytest.fixture
def cluster_source(spark):  # noqa: F811
    """The source as registered on a cluster session (not local: staging beside the broker's dirs)."""
    return _register(spark, "segstore_cluster", local_master=False)


@pytest.fixture
def local_staging(spark, tmp_path):  # noqa: F811
    """The source as registered on a local session, staging under this test's own root (not the shared
    ``$TMPDIR/segstore-staging``, which concurrent test runs use); returns (name, root)."""
    root = tmp_path / "local-staging"
    return _register(spark, "segstore_local", local_master=True, local_staging=str(root)), root


def _failing_frame(spark):  # noqa: F811
    from pyspark.sql import functions as F

    @F.udf("binary")
    def explode_on_13(i):
        if i == 13:
            raise ValueError("task fails on row 13")
        return str(i).encode()

    return spark.range(0, 20, numPartitions=4).select(explode_on_13("id").alias("value"))


@pytest.mark.parametrize("source", ["local", "cluster"])
def test_kafka_partition_dir_write_leaves_the_log_dir_as_kafka_loads_it(spark, tmp_path, source,  # noqa: F811
                                                                        request):
    # Kafka's LogManager loads every directory of a log dir as TOPIC-N (UnifiedLog.parseTopicPartitionName)
    # and takes the log dir offline for one it cannot parse: nothing may appear there, even for a while.
    data = tmp_path / "data"
    if source == "local":
        name, staging = request.getfixturevalue("local_staging")
    else:     # beside the log dir, hidden (staging_root)
        name, staging = request.getfixturevalue("cluster_source"), data / ".kafka-logs.segstore-staging"
    logs = data / "kafka-logs"
    part = logs / "orders-0"
    with segstore.open(str(part), format="kafka", mode="a") as store:
        store.append_batch([segstore.Message(topic="orders", value=b"before")])
    spark.createDataFrame([(f"v{i}",) for i in range(30)], "value string").repartition(3) \
        .write.format(name).option("topic", "orders").mode("append").save(str(part))
    assert len(_library_values(part, "orders", 0)) == 31
    assert os.listdir(logs) == ["orders-0"] and os.listdir(data) == ["kafka-logs"]
    assert not staging.exists()          # this test's staging root: gone once its job committed
    with pytest.raises(Exception, match="task fails on row 13"):
        _failing_frame(spark).write.format(name).option("topic", "orders").mode("append").save(str(part))
    assert len(_library_values(part, "orders", 0)) == 31
    assert os.listdir(logs) == ["orders-0"] and os.listdir(data) == ["kafka-logs"]
    assert not staging.exists()          # and once its failed job aborted


def test_staging_root_is_outside_broker_directories(tmp_path):
    from segstore.spark.datasource import SegstoreDataSource, staging_root
    from segstore.spark.options import parse_write_options

    def root(path, local_root=None, **options):
        return staging_root(parse_write_options({"path": str(path), **options}), local_root=local_root)

    assert root(tmp_path / "kafka-logs" / "orders-0") == str(tmp_path / ".kafka-logs.segstore-staging")
    assert root(tmp_path / "kafka-logs") == str(tmp_path / ".kafka-logs.segstore-staging")
    assert root(tmp_path / "store") == str(tmp_path / ".store.segstore-staging")
    assert root(tmp_path / "store", local_root=str(tmp_path / "l")) == str(tmp_path / "l")
    assert root(tmp_path / "store", local_root=str(tmp_path / "l"), stagingDir=str(tmp_path / "s")) \
        == str(tmp_path / "s")
    # what register() records for a local session, and nothing for a cluster
    assert SegstoreDataSource.configured(local_master=True).local_staging \
        == os.path.join(tempfile.gettempdir(), "segstore-staging")
    cluster = SegstoreDataSource.configured(local_master=False, local_staging=str(tmp_path))
    assert cluster.local_staging is None


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
def test_both_writers_store_the_same_rows(spark, tmp_path, format_name):  # noqa: F811
    """The JVM side's staging and the Python data source's store the same records: nulls in every
    nullable column, strings and binary, more rows than one staged Arrow batch holds (65,536; Kafka), and
    an empty frame, which appends nothing.  Records in the same order: the frame's partitions in order."""
    from pyspark.sql import functions as F

    # Kafka's: one task over a staged batch's rows; RocketMQ's commit appends messages one by one
    # (70,000 cost 20 s there), and the staging is the same for both formats
    rows = 70_000 if format_name == "kafka" else 3_000
    i = F.col("id")
    text = i.cast("string")

    def unless(every, column):
        return F.when(i % every == 0, None).otherwise(column)

    # one task of more rows than a staged batch holds, two small ones
    big, small = spark.range(0, rows - 100, numPartitions=1), spark.range(rows - 100, rows, numPartitions=2)
    frame = big.union(small).select(
        unless(5, F.concat(F.lit("k"), text)).alias("key"),
        unless(7, text.cast("binary")).alias("value"),
        F.lit("t").alias("topic"),
        unless(3, (i % 2).cast("int")).alias("partition"),
        F.timestamp_millis(i + 1_700_000_000_000).alias("timestamp"),
        unless(4, F.array(F.struct(F.lit("h").alias("key"), text.cast("binary").alias("value"))))
        .alias("headers"))
    got = {}
    for side in ("jvm", "python"):
        path = tmp_path / side
        for df in (frame, frame.limit(0)):
            df.write.format("segstore").option("writer", side).option("format", format_name) \
                .option("partition", "1").mode("append").save(str(path))
        with segstore.open(str(path)) as store:
            got[side] = [(m.partition, m.offset, m.key, m.value, m.timestamp,
                          m.headers if format_name == "kafka" else None)
                         for p in store.partitions("t") for m in map(store.to_common, store.read("t", p))]
    assert len(got["jvm"]) == rows
    assert got["jvm"] == got["python"]
    assert sorted(m[3] or b"" for m in got["jvm"]) == sorted(b"" if i % 7 == 0 else str(i).encode()
                                                               for i in range(rows))
