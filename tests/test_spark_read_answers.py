"""Both batch readers give a query's SQL answer: pushdown only skips rows that cannot match, options and
schemas are checked alike, whatever the times stored."""

from __future__ import annotations

import io

import pytest
from spark_support import reader, source, spark  # noqa: F401

import segstore
from segstore import Message, cli
from segstore.errors import ConfigError, OffsetOutOfRangeError, TruncatedDataError
from segstore.spark import planning

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


#: Store times of queue T/0, stepping back twice (the broker's clock was set back).
STEPPING_BACK = [1000, 3000, 2000, 4000, 1500, 5000, 4500, 6000]


def _rocketmq_store(path):
    with segstore.open(str(path), "rocketmq", "a") as store:
        for i, ms in enumerate(STEPPING_BACK):
            store.append({"topic": "T", "queue_id": 0, "body": b"m%d" % i, "born_timestamp": ms,
                          "store_timestamp": ms})
    return str(path)


@pytest.mark.parametrize("time_index", [False, True])
def test_store_time_filters_keep_rows_stored_after_the_clock_stepped_back(spark, reader, tmp_path,  # noqa: F811
                                                                          time_index):
    """RocketMQ 4.9.7 ConsumeQueue.getOffsetInQueueByTime binary searches store times as if they grew with
    queue offsets; pruning a filter by such a search dropped rows that match it.  Without segstore's
    ``time`` layout the bound is left to Spark; with it (running maximum) it prunes exactly."""
    path = _rocketmq_store(tmp_path / "rmq")
    if time_index:
        assert cli.main(["index", "build", path, "--index", "time"], io.StringIO()) == 0
    with segstore.open(path) as store:        # the store the planner opens: prunes with the index only
        assert planning.time_lookup_is_exact(store) is time_index
    frame = source(spark, reader).load(path)
    for bound in (1000, 1500, 2000, 2500, 4500, 6000):
        expected = sum(1 for ms in STEPPING_BACK if ms >= bound)
        assert frame.where(f"storeTimestamp >= timestamp_millis({bound})").count() == expected, bound
        equal = frame.where(f"storeTimestamp = timestamp_millis({bound})")
        assert equal.count() == STEPPING_BACK.count(bound), bound
        assert frame.where(f"storeTimestamp > timestamp_millis({bound})").count() == \
            sum(1 for ms in STEPPING_BACK if ms > bound)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("startingOffsets", '{"T_TYPO": {"0": 3}}', "startingOffsets names T_TYPO-0"),
    ("startingOffsets", '{"t": {"7": 3}}', "startingOffsets names t-7"),
    ("endingOffsets", '{"t": {"0": 3, "1": 4}}', "endingOffsets names t-1"),
    ("startingOffsets", "latest", "startingOffsets cannot be latest for a batch query"),
    ("startingOffsets", '{"t": {"0": -1}}', "startingOffsets for t-0 cannot be latest"),
    ("endingOffsets", "earliest", "endingOffsets cannot be earliest for a batch query"),
    ("endingOffsets", '{"t": {"0": -2}}', "endingOffsets for t-0 cannot be earliest"),
    ("subscribe", "", "subscribe must name at least one topic"),
    ("subscribePattern", " ", "subscribePattern must be a regular expression"),
    # Jackson refuses a number past a long (Python's float is inf: OverflowError, a worker's traceback)
    ("startingOffsets", '{"t": {"0": 1E400}}', "startingOffsets: t/0 must be an integer partition"),
    ("subscribePattern", r"\p{IsKlingon}", r"Unknown character property name \{IsKlingon\}"),
])
def test_offsets_the_connector_refuses_are_refused(spark, reader, kafka_logs, option, value,  # noqa: F811
                                                    message):
    """Spark 4 KafkaSourceProvider.validateBatchOptions refuses a batch start at latest and an end at
    earliest, and (validateGeneralOptions) an empty subscribe or subscribePattern;
    KafkaOffsetReaderAdmin.fetchPartitionOffsets refuses offsets of partitions not read.  Both readers used
    to read everything, or nothing, instead."""
    with pytest.raises(ConfigError, match=message):
        source(spark, reader).option(option, value).load(kafka_logs).count()


@pytest.mark.parametrize(("option", "value"), [
    ("subscribePattern", r"^\p{IsLatin}$"), ("subscribePattern", r"\p{blk=Basic Latin}"),
    ("assign", '{"t": ["0"]} '), ("assign", '{"t": [0.9], "u": null}'),
])
def test_options_read_as_java_and_jackson_read_them(spark, reader, kafka_logs, option, value):  # noqa: F811
    """A script or a block in subscribePattern (java.util.regex.Pattern, Java 17's tables) and assign as
    Spark 4 JsonUtils' Jackson reads it (a numeric string, a float cut toward zero, a null topic, text after
    the object) choose topic t on both readers; they were refused."""
    assert source(spark, reader).option(option, value).load(kafka_logs).count() == 5


def test_a_start_given_after_its_end_is_refused_by_both_readers(spark, reader, kafka_logs):  # noqa: F811
    """Spark 4.1 KafkaSourceProvider.checkOffsetLimitValidity refuses startingOffsets after endingOffsets
    for a partition; both readers read nothing instead."""
    frame = source(spark, reader).option("startingOffsets", '{"t": {"0": 4}}')
    with pytest.raises(ConfigError, match=r"startingOffsets for t-0 \(4\) is after its ending"):
        frame.option("endingOffsets", '{"t": {"0": 2}}').load(kafka_logs).count()
    assert frame.option("endingOffsets", '{"t": {"0": 5}}').load(kafka_logs).count() == 1


def test_a_record_without_headers_has_null_headers(spark, reader, tmp_path):  # noqa: F811
    """Spark's KafkaRecordToRowConverter.toInternalRowWithHeaders gives null headers to a record that has
    none (``headers IS NULL`` finds them); both readers gave an empty array."""
    path = str(tmp_path / "kafka-logs")
    with segstore.open(path, "kafka", "a") as store:
        store.append({"topic": "t", "partition": 0, "value": b"bare"})
        store.append({"topic": "t", "partition": 0, "value": b"dressed", "headers": [("h", b"x")]})
    rows = source(spark, reader).option("includeHeaders", "true").load(path).orderBy("offset").collect()
    assert [(r.value, r.headers) for r in rows] == [(b"bare", None), (b"dressed", [("h", b"x")])]


def test_a_read_ends_at_the_high_watermark(spark, reader, tmp_path):  # noqa: F811
    """Spark's Kafka connector reads to the latest offsets ListOffsets gives, the high watermark for a
    read_uncommitted consumer (Kafka 3.8.0 Partition.fetchOffsetForTimestamp), and its consumers fetch no
    further (UnifiedLog.read, FetchIsolation.HIGH_WATERMARK); both readers read the records the followers
    had not copied yet, up to the log end."""
    logs = tmp_path / "kafka-logs"
    with segstore.open(str(logs), "kafka", "a") as store:
        for i in range(5):
            store.append({"topic": "t", "partition": 0, "value": b"v%d" % i})
    checkpoint = logs / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 5\n", "t 0 3\n"))
    frame = source(spark, reader).load(str(logs))
    assert sorted(r.value for r in frame.collect()) == [b"v0", b"v1", b"v2"]
    assert frame.where("offset >= 1").count() == 2
    # an end past it is data loss, as the connector's consumer finds nothing to fetch there
    # (KafkaDataConsumer.get): an error, or the read stops at the high watermark
    past = source(spark, reader).option("endingOffsets", '{"t": {"0": 5}}')
    with pytest.raises(OffsetOutOfRangeError, match=r"Could not read records in offset \[3, 5\)"):
        past.load(str(logs)).count()
    assert past.option("failOnDataLoss", "false").load(str(logs)).count() == 3


def test_a_read_committed_batch_ends_at_the_last_stable_offset(spark, reader, tmp_path):  # noqa: F811
    """With a transaction open at the end of a partition, a read_committed batch read ends at its first
    offset, the last stable offset, as the connector: its ``latest`` ending offsets are ListOffsets' with the
    consumer's isolation level (Spark 4 KafkaOffsetReaderAdmin.listOffsets: ``ListOffsetsOptions(
    isolationLevel)``), which Kafka 3.8.0 Partition.fetchOffsetForTimestamp answers with
    ``localLog.lastStableOffset`` under READ_COMMITTED, and its consumer fetches no further
    (FetchIsolation.TXN_COMMITTED).  A record another producer appended after the open transaction is
    past it too; read_uncommitted reads to the high watermark."""
    path = str(tmp_path / "kafka-logs")
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"plain0", timestamp=1700000000000),
                            Message("t", b"plain1", timestamp=1700000000001)])
        txn = store.transaction(3000)
        txn.append_batch([Message("t", b"txn2", timestamp=1700000000002)])
        store.append_batch([Message("t", b"plain3", timestamp=1700000000003)])
        store.flush()
        def committed(**options):
            frame = source(spark, reader).option("kafka.isolation.level", "read_committed")
            return frame.options(**options).load(path)

        assert sorted(r.value for r in committed().collect()) == [b"plain0", b"plain1"]
        assert committed().where("offset >= 1").count() == 1
        # an end past the last stable offset is data loss there, as past the high watermark
        lost = r"Could not read records in offset \[2, 4\)"
        with pytest.raises(OffsetOutOfRangeError, match=lost):
            committed(endingOffsets='{"t": {"0": 4}}').count()
        assert committed(endingOffsets='{"t": {"0": 4}}', failOnDataLoss="false").count() == 2
        # a start time of a record past it finds no offset below the latest one (ListOffsets filters
        # offset < lastFetchableOffset): the strategy decides
        late, none = "1700000000003", r"no record of t-0 below its latest offset 2"
        with pytest.raises(OffsetOutOfRangeError, match=none):
            committed(startingTimestamp=late).count()
        assert committed(startingTimestamp=late, startingOffsetsByTimestampStrategy="latest").count() == 0
        uncommitted = source(spark, reader).load(path)
        assert sorted(r.value for r in uncommitted.collect()) == [b"plain0", b"plain1", b"plain3", b"txn2"]
        txn.commit(timestamp=1700000000004)
        store.flush()
    assert committed().count() == 4       # the marker at offset 4 is no row


def test_max_records_per_partition_cuts_tasks_as_the_connector(spark, reader, kafka_logs):  # noqa: F811
    """Spark 4 KafkaOffsetRangeCalculator.getRanges: 5 offsets at most 2 a task are ceil(5 / 2) = 3 tasks of
    5 // 3 = 1, then 4 // 2 = 2 and 2 offsets; a batch read divides only where the connector's unresolved
    range (here endingOffsets 5 from earliest, -2) is above the maximum."""
    from pyspark.sql.functions import spark_partition_id

    frame = source(spark, reader).options(maxRecordsPerPartition="2", endingOffsets='{"t": {"0": 5}}')
    rows = frame.load(kafka_logs).select(spark_partition_id().alias("task"), "offset").collect()
    tasks: dict[int, list[int]] = {}
    for row in rows:
        tasks.setdefault(row.task, []).append(row.offset)
    assert sorted(sorted(offsets) for offsets in tasks.values()) == [[0], [1, 2], [3, 4]]


def test_offsets_past_the_end_fail_the_read_as_in_the_connector(spark, reader, kafka_logs):  # noqa: F811
    """Spark 4 KafkaSourceRDD.compute: a resolved start after the resolved end fails ("Beginning offset 7 is
    after the ending offset 5"), whatever failOnDataLoss says; both readers read nothing instead, and
    clamped an end past the latest offset, where the connector's consumer fails (failOnDataLoss)."""
    frame = source(spark, reader).option("startingOffsets", '{"t": {"0": 7}}')
    for lenient in ("true", "false"):
        with pytest.raises(OffsetOutOfRangeError, match=r"Beginning offset 7 is after the ending "
                                                        r"offset 5 for topic t partition 0"):
            frame.option("failOnDataLoss", lenient).load(kafka_logs).count()
    ending = source(spark, reader).option("endingOffsets", '{"t": {"0": 9}}')
    with pytest.raises(Exception, match=r"Could not read records in offset \[5, 9\) for topic t partition 0"):
        ending.load(kafka_logs).count()
    assert ending.option("failOnDataLoss", "false").load(kafka_logs).count() == 5


def test_a_stream_may_start_at_latest_but_not_at_a_partition_not_read(kafka_logs):
    """Streams keep what the connector allows them (a start at latest); specific offsets must still
    name partitions read (Spark 4 KafkaOffsetReaderAdmin.fetchSpecificOffsets asserts it)."""
    from segstore.errors import ConfigError
    from segstore.spark.datasource import SegstoreStreamReader
    from segstore.spark.options import parse_read_options

    def initial(**options):
        parsed = parse_read_options({"path": kafka_logs, **options}, streaming=True)
        return SegstoreStreamReader(parsed, "kafka", None).initialOffset()

    assert initial(startingOffsets="latest") == {"t": {"0": 5}}
    assert initial(startingOffsets='{"t": {"0": 2}}') == {"t": {"0": 2}}
    with pytest.raises(ConfigError, match="startingOffsets names t-7"):
        initial(startingOffsets='{"t": {"0": 2, "7": 1}}')


@pytest.mark.parametrize(("schema", "message"), [
    ("value string, timestamp long", "gives column value type string, expected binary"),
    ("partition long", "gives column partition type bigint, expected int"),
    ("timestampType string", "gives column timestampType type string, expected int"),
    ("Value binary", "names column 'Value', which a kafka store does not have"),
])
def test_a_given_schema_is_refused_alike_by_both_readers(spark, reader, kafka_logs, schema, message):  # noqa: F811
    """The batches are the store's columns in its types: a schema giving others is a ConfigError on the
    driver (bridge.plan asked it for the JVM reader; the Python reader cast blindly, or failed mid-task)."""
    with pytest.raises(ConfigError, match=f"^the schema {message}"):
        source(spark, reader).schema(schema).load(kafka_logs).collect()


def test_a_given_schema_of_store_columns_reads_them(spark, reader, kafka_logs):  # noqa: F811
    frame = source(spark, reader).schema("offset long, value binary").load(kafka_logs)
    rows = frame.orderBy("offset").collect()
    assert [(r.offset, bytes(r.value)) for r in rows] == [(i, b"v%d" % i) for i in range(5)]


def test_a_stream_refuses_a_schema_of_other_types(kafka_logs):
    from pyspark.sql.types import StringType, StructField, StructType

    from segstore.errors import ConfigError
    from segstore.spark.datasource import SegstoreDataSource

    with pytest.raises(ConfigError, match="gives column value type string, expected binary"):
        SegstoreDataSource({"path": kafka_logs}).streamReader(StructType([StructField("value",
                                                                                   StringType())]))


def test_an_offset_filter_before_a_torn_tail_reads_where_the_reader_takes_filters(spark, reader,  # noqa: F811
                                                                                 tmp_path):
    """What docs/spark.md says of a torn Kafka tail (Kafka 3.8.0 LogSegment.recover would truncate it):
    a read ending before it by an offset filter is whole with the JVM reader, and with the Python reader
    only where Spark lets it take filters (segstore.spark.pushdown_is_per_scan); else it reads to the
    tail and raises what a read of every record raises."""
    import os

    from segstore.spark import pushdown_is_per_scan

    path = tmp_path / "kafka-logs"
    with segstore.open(str(path), "kafka", "a") as store:
        for i in range(10):
            store.append({"topic": "t", "partition": 0, "value": b"v%d" % i, "timestamp": 1700000000000 + i})
    log = path / "t-0" / "00000000000000000000.log"
    os.truncate(log, log.stat().st_size - 5)
    frame = source(spark, reader).load(str(path)).where("`offset` < 5")
    if reader == "jvm" or pushdown_is_per_scan(spark):
        assert frame.count() == 5
    else:
        with pytest.raises(TruncatedDataError):
            frame.count()
    assert source(spark, reader).option("endingOffsets", '{"t": {"0": 5}}').load(str(path)).count() == 5


def test_several_paths_are_named_in_the_error(spark, reader, kafka_logs):  # noqa: F811
    """Spark passes load(p1, p2) as option ``paths``: the error says one store path is taken, not that
    ``paths`` is an unknown option."""
    with pytest.raises(Exception, match=r"expected one store path in load\(PATH\), found 2"):
        source(spark, reader).load([kafka_logs, kafka_logs]).count()


def test_subscribe_pattern_reads_the_topics_it_finds_a_match_in(spark, reader, tmp_path):  # noqa: F811
    """Spark 4 ConsumerStrategy.scala SubscribePatternStrategy: ``topicRegex.findFirstIn(name)``, a Java
    regex found anywhere in the name; both readers read only the topics it matched whole."""
    path = str(tmp_path / "kafka-logs")
    with segstore.open(path, "kafka", "a") as store:
        for topic in ("orders", "old-orders", "payments"):
            store.append({"topic": topic, "partition": 0, "value": topic.encode()})
    frame = source(spark, reader).option("subscribePattern", "orders").load(path)
    assert sorted(r.topic for r in frame.collect()) == ["old-orders", "orders"]
    quoted = source(spark, reader).option("subscribePattern", r"^\Qold-orders\E$").load(path)
    assert [r.topic for r in quoted.collect()] == ["old-orders"]
