"""The Spark planner, options and pushdown against a small fake store (no Spark session needed)."""

from __future__ import annotations

import bisect
import itertools
import pickle
import random
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from segstore.errors import ConfigError, NotFoundError, OffsetOutOfRangeError, TruncatedDataError
from segstore.spark import planning
from segstore.spark.options import (
    EARLIEST,
    LATEST,
    parse_read_options,
    parse_write_options,
)


class FakeStore:
    """Topics of partitions of segments of fixed-size messages; timestamps = 1000 * offset.

    A Kafka store to the planner: its time lookup is exact (``planning.time_lookup_is_exact``)."""

    format = "kafka"

    def __init__(self, layout: dict[str, dict[int, list[tuple[int, int]]]], message_bytes: int = 100) -> None:
        self.layout = layout          # topic -> partition -> [(start_offset, end_offset)] per segment
        self.message_bytes = message_bytes
        self.segment_calls = 0
        self.torn: dict[tuple[str, int], Exception] = {}     # what a read past each end would raise

    def topics(self):
        return sorted(self.layout)

    def partitions(self, topic):
        return sorted(self.layout[topic])

    def offset_range(self, topic, partition):
        segs = self.layout[topic][partition]
        return segs[0][0], segs[-1][1]

    def tail_error(self, topic, partition):
        return self.torn.get((topic, partition))

    def offset_for_time(self, topic, partition, ts):
        low, high = self.offset_range(topic, partition)
        first = max(low, -(-ts // 1000))
        return first if first < high else None

    def segment_infos(self, topic, partition):
        self.segment_calls += 1
        return [{"start_offset": a, "end_offset": b, "bytes": (b - a) * self.message_bytes,
                 "path": f"{topic}-{a}"}
                for a, b in self.layout[topic][partition]]


def _store() -> FakeStore:
    return FakeStore({
        "A": {0: [(0, 100), (100, 200), (200, 250)], 1: [(0, 100), (100, 200), (200, 250)]},
        "B": {0: [(50, 60)], 3: [(0, 1000)]},
    })


def _opts(**options):
    return parse_read_options({"path": "/store", **options})


def _offsets(result: planning.Plan) -> dict[tuple[str, int], list[tuple[int, int]]]:
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for slices in result.partitions:
        for s in slices:
            out.setdefault((s.topic, s.partition), []).append((s.start, s.end))
    return out


def _covers(result: planning.Plan, ranges: list[planning.PartitionRange]) -> None:
    """Every offset of every range is in exactly one slice, in order."""
    got = _offsets(result)
    for r in ranges:
        pieces = sorted(got.pop((r.topic, r.partition)))
        assert pieces[0][0] == r.start and pieces[-1][1] == r.end
        for (_, end), (start, _) in itertools.pairwise(pieces):
            assert end == start
        assert all(a < b for a, b in pieces)
    assert not got


# -- options ----------------------------------------------------------------------------------

def test_read_options_defaults_and_json_offsets():
    opts = _opts(startingOffsets='{"A": {"0": 5, "1": -1}}', topics="B, A")
    assert opts.topics == ("A", "B")
    assert opts.starting.for_partition("A", 0) == 5
    assert opts.starting.for_partition("A", 1) == LATEST
    assert opts.starting.for_partition("B", 0) == EARLIEST
    assert opts.ending.for_partition("A", 0) == LATEST
    streaming = parse_read_options({"path": "/s", "maxOffsetsPerTrigger": "7"}, streaming=True)
    assert streaming.max_offsets_per_trigger == 7
    assert parse_read_options({"path": "/s"}, streaming=True).starting.default == LATEST
    assert pickle.loads(pickle.dumps(opts)) == opts


@pytest.mark.parametrize(("options", "fragment"), [
    ({}, "path is required"),
    ({"path": "/s", "startingOffsets": "soon"}, "startingOffsets"),
    ({"path": "/s", "endingOffsets": '{"A": {"0": "x"}}'}, "endingOffsets"),
    ({"path": "/s", "endingOffsets": '{"A": {"0": -3}}'}, "-3"),
    ({"path": "/s", "startingTimestamp": "yesterday"}, "integer"),
    ({"path": "/s", "includeControlRecords": "maybe"}, "true or false"),
    ({"path": "/s", "subscribeTopics": "A"}, "unknown option"),
    ({"paths": '["/s", "/t"]'}, r"expected one store path in load\(PATH\), found 2: /s, /t"),
    ({"path": "/s", "subscribe": "A", "assign": '{"A": [0]}'}, "only one of subscribe"),
    ({"path": "/s", "subscribePattern": "A("}, "regular expression"),
    ({"path": "/s", "assign": '{"A": 0}'}, "partition lists"),
    ({"path": "/s", "assign": '{"A": [2147483648]}'}, r"must be integers \(Java ints\), found 2147483648"),
    ({"path": "/s", "startingOffsetsByTimestamp": '{"A": [1]}'}, "startingOffsetsByTimestamp"),
    ({"path": "/s", "endingOffsetsByTimestamp": '{"A": {"0": -5}}'}, ">= 0"),
    ({"path": "/s", "startingOffsetsByTimestampStrategy": "earliest"}, "error or latest"),
    ({"path": "/s", "failOnDataLoss": "sometimes"}, "true or false"),
    ({"path": "/s", "includeHeaders": "yes"}, "true or false"),
    ({"path": "/s", "kafka.isolation.level": "serializable"}, "read_uncommitted or read_committed"),
    ({"path": "/s", "kafka.bootstrap.servers": "b:9092"}, r"running Kafka cluster.*load\(PATH\)"),
    ({"path": "/s", "kafka.group.id": "g"}, "running Kafka cluster"),
    ({"path": "/s", "groupIdPrefix": "g"}, "running Kafka cluster"),
    ({"path": "/s", "fetchOffset.numRetries": "3"}, "running Kafka cluster"),
    ({"path": "/s", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition must be at least 1"),
    ({"path": "/s", "maxRecordsPerPartition": "1_000"}, "maxRecordsPerPartition must be an integer"),
    ({"path": "/s", "config": "[1]"}, "JSON object"),
    # untrimmed and JSON booleans refused as the connector refuses them: Scala's toBoolean, Jackson reading
    # Map[String, Map[Int, Long]] (Spark 4 JsonUtils.partitionOffsets), withName / valueOf of the choices,
    # and the JVM reader's equalsIgnoreCase (SegstoreTable.newScanBuilder); they were trimmed, or true read
    # as offset 1
    ({"path": "/s", "failOnDataLoss": " true"}, r"failOnDataLoss must be true or false, found ' true'"),
    ({"path": "/s", "includeHeaders": "false "}, r"includeHeaders.*found 'false '"),
    ({"path": "/s", "reader": " python "}, r"option reader must be jvm or python, found ' python '"),
    ({"path": "/s", "kafka.isolation.level": "read_committed "}, r"found 'read_committed '"),
    ({"path": "/s", "startingOffsetsByTimestampStrategy": " latest"}, r"error or latest, found ' latest'"),
    ({"path": "/s", "startingOffsets": '{"A": {"0": true}}'}, r"startingOffsets: A/0.*found True"),
    ({"path": "/s", "endingOffsets": '{"A": {"0": false}}'}, r"endingOffsets: A/0.*found False"),
    ({"path": "/s", "startingOffsetsByTimestamp": '{"A": {"0": true}}'}, r"startingOffsetsByTimestamp: A/0"),
    # integers as Java's Long.parseLong (the connector's toLong, the JVM reader's getDefaultReadLimit) reads
    # them: Python's int took "1_000" and " 5", which the JVM reader refused
    ({"path": "/s", "minPartitions": "2 "}, r"minPartitions must be an integer, found '2 '"),
    ({"path": "/s", "startingTimestamp": "1_000"}, r"startingTimestamp must be an integer, found '1_000'"),
    # a digit past the BMP is two surrogates to Long.parseLong, no digit; a number past a long throws too
    ({"path": "/s", "startingTimestamp": "9" * 20}, rf"startingTimestamp must be at most {2**63 - 1}"),
])
def test_read_options_refused(options, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_read_options(options)


@pytest.mark.parametrize("options", [
    {"startingTimestamp": "0", "startingOffsets": "soon"},
    {"startingTimestamp": "0", "startingOffsetsByTimestamp": "[1]", "startingOffsets": "latest"},
    {"startingOffsetsByTimestamp": '{"A": {"0": 0, "1": 0}, "B": {"0": 0, "3": 0}}',
     "startingOffsets": '{"A": {"0": 5}}'},
    {"endingTimestamp": "999999999", "endingOffsets": "earliest", "endingOffsetsByTimestamp": "{"},
    {"endingOffsetsByTimestamp": '{"A": {"0": 999999999, "1": 999999999}, "B": {"0": 999999999, '
                                 '"3": 999999999}}', "endingOffsets": '{"A": {"9": -2}}'},
])
def test_options_an_end_does_not_take_are_not_read(options):
    """Spark 4 KafkaSourceProvider.getKafkaOffsetRangeLimit takes, of each end's options, the global
    timestamp, else the per-partition timestamps, else the offsets, and never parses the others; they were
    parsed and checked here (a refused value, a partition not read), failing a query the connector runs."""
    assert _ranges(**options) == _ranges()


@pytest.mark.parametrize(("options", "fragment"), [
    ({"maxOffsetsPerTrigger": "0"}, "at least 1"),
    ({"minOffsetsPerTrigger": "3 "}, "minOffsetsPerTrigger must be an integer"),
    ({"minOffsetsPerTrigger": "4", "maxOffsetsPerTrigger": "3"}, r"minOffsetPerTrigger\(4\) is higher"),
    ({"maxTriggerDelay": "1.5s"}, r"maxTriggerDelay: time must be specified as seconds \(s\)"),
    ({"maxOffsetsPerTrigger": "1_000"}, r"must be an integer, found '1_000'"),
    ({"maxOffsetsPerTrigger": " 5"}, r"maxOffsetsPerTrigger must be an integer, found ' 5'"),
    # a digit past the BMP is two surrogates to Long.parseLong, no digit
    ({"maxOffsetsPerTrigger": "\U0001d7d3"}, r"maxOffsetsPerTrigger must be an integer"),
])
def test_stream_trigger_options_refused(options, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_read_options({"path": "/s", **options}, streaming=True)


@pytest.mark.parametrize("options", [
    {"maxOffsetsPerTrigger": "0"}, {"maxOffsetsPerTrigger": "soon"}, {"minOffsetsPerTrigger": "3"},
    {"maxTriggerDelay": "5m"}, {"minOffsetsPerTrigger": "3", "maxOffsetsPerTrigger": "3"},
])
def test_a_batch_read_ignores_trigger_options(options):
    """Spark 4 KafkaSourceProvider.validateBatchOptions only logs that a batch query ignores
    maxOffsetsPerTrigger, minOffsetsPerTrigger and maxTriggerDelay (validateGeneralOptions reads the first
    two only given together, as longs); a batch read refused them, or a maxOffsetsPerTrigger it ignored."""
    assert _opts(**options).max_offsets_per_trigger is None


@pytest.mark.parametrize(("options", "fragment"), [
    ({"minOffsetsPerTrigger": "4", "maxOffsetsPerTrigger": "3"},
     r"The value of minOffsetPerTrigger\(4\) is higher than the maxOffsetsPerTrigger\(3\)"),
    ({"minOffsetsPerTrigger": "x", "maxOffsetsPerTrigger": "3"}, "minOffsetsPerTrigger must be an integer"),
])
def test_a_batch_read_checks_trigger_bounds_given_together(options, fragment):
    with pytest.raises(ConfigError, match=fragment):
        _opts(**options)


#: Spark 4.3's JavaUtils.timeStringAsMs (what the connector's Utils.timeStringAsMs calls) on these texts,
#: run with javac/java against PySpark's own jars: the ms, or None where it throws NumberFormatException.
TIME_STRINGS = [
    ("15m", 900000), ("0", 0), ("5", 5), ("100ms", 100), ("2s", 2000), ("1min", 60000), ("1h", 3600000),
    ("1d", 86400000), ("999us", 0), ("-1500us", -1), ("-5s", -5000), (" 3S ", 3000), ("3 s", None),
    ("1.5s", None), ("10x", None), ("", None), ("m", None), ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", None), ("9223372036854775807s", 9223372036854775807),
    ("-9223372036854775807d", -9223372036854775808), ("+5", None), ("\u212a", None), ("5\u0130", None),
    ("\u0665", None), ("1_0", None),
]


@pytest.mark.parametrize(("text", "ms"), TIME_STRINGS)
def test_max_trigger_delay_is_read_as_spark_reads_time_strings(text, ms):
    if ms is None:
        with pytest.raises(ConfigError, match="maxTriggerDelay: time must be specified"):
            parse_read_options({"path": "/s", "maxTriggerDelay": text}, streaming=True)
    else:
        assert parse_read_options({"path": "/s", "maxTriggerDelay": text}, streaming=True) \
            .max_trigger_delay_ms == ms


def test_a_trigger_is_delayed_as_the_connector_delays_it():
    """Spark 4 KafkaMicroBatchStream.delayBatch: once maxTriggerDelay has passed since the last batch (0
    before the first, so the first trigger always makes one) a batch is made whatever is waiting; before,
    only with minOffsetsPerTrigger offsets waiting over every partition (a partition the start lacks counts
    from 0), each batch made restarting the delay."""
    start = {"t": {"0": 10, "1": 4}}
    two = {"t": {"0": 11, "1": 5}}
    assert planning.delays_batch(start, start, 5, 1000, 0, 5000) == (False, 5000)    # nothing waiting
    assert planning.delays_batch(start, start, 5, 1000, 4500, 5000) == (True, 4500)
    assert planning.delays_batch(start, two, 3, 1000, 5000, 5999) == (True, 5000)
    assert planning.delays_batch(start, two, 2, 1000, 5000, 5999) == (False, 5999)
    assert planning.delays_batch(start, two, 3, 1000, 5000, 6000) == (False, 6000)
    assert planning.delays_batch({"t": {"0": 10}}, two, 6, 1000, 5000, 5500) == (False, 5500)  # 1 + 5
    assert planning.delays_batch(start, two, 3, -1, 5000, 5000) == (False, 5000)


def test_read_option_values_take_any_case():
    """As the connector (Scala's toBoolean, upper-cased withName / valueOf) and the JVM reader."""
    opts = parse_read_options({"path": "/s", "failOnDataLoss": "FALSE", "reader": "Python",
                               "kafka.isolation.level": "READ_COMMITTED",
                               "startingOffsetsByTimestampStrategy": "Latest"})
    assert (opts.fail_on_data_loss, opts.reader, opts.isolation, opts.starting_timestamp_strategy) == (
        False, "python", "read_committed", "latest")


@pytest.mark.parametrize(("options", "fragment"), [
    ({"minPartitions": "2147483648"}, "minPartitions must be at most 2147483647, found 2147483648"),
    ({"startingTimestamp": "1000\xa0"}, r"startingTimestamp must be an integer, found '1000\\xa0'"),
    ({"endingTimestamp": "9223372036854775808"}, "endingTimestamp must be at most 9223372036854775807"),
    ({"maxBytesPerPartition": "\U0001d7cf"}, "maxBytesPerPartition must be an integer"),
    ({"startingOffsets": '{"A": {" 0": 5}}'}, r"startingOffsets: A/ 0 must be an integer partition"),
    ({"startingOffsets": '{"A": {"0_0": 5}}'}, r"startingOffsets: A/0_0 must be an integer partition"),
    ({"endingOffsets": '{"A": {"0": 9223372036854775808}}'}, r"endingOffsets: A/0 must be an integer"),
    ({"startingOffsetsByTimestamp": '{"A": {"2147483648": 5}}'}, r"startingOffsetsByTimestamp: A/2147483648"),
])
def test_numbers_are_read_as_java_reads_them(options, fragment):
    """The connector reads minPartitions with ``toInt`` (Integer.parseInt), times with ``trim.toLong``
    (String.trim cuts only characters up to U+0020) and JSON partitions and offsets with Jackson's Int keys
    and Long values (Spark 4 KafkaSourceProvider.validateGeneralOptions, getKafkaOffsetRangeLimit,
    JsonUtils.partitionOffsets); Python's int and strip took numbers past a Java int or long, a no-break
    space, a digit outside the BMP, whitespace and ``_`` in a partition key."""
    with pytest.raises(ConfigError, match=fragment):
        _opts(**options)


def test_texts_are_trimmed_and_cased_as_java_does():
    """The connector trims subscribe's topics, subscribePattern and earliest/latest with String.trim (Spark 4
    KafkaSourceProvider.strategy, getKafkaOffsetRangeLimit), which keeps a no-break space, reads true/false
    with equalsIgnoreCase (Scala's toBoolean), for which a long s is an s, and its choices upper-cased
    (toUpperCase(Locale.ROOT): withName, IsolationLevel.valueOf); Python's strip and lower() read them
    otherwise."""
    assert _opts(subscribe=" A\xa0, B ").topics == ("A\xa0", "B")
    assert _opts(subscribePattern="\x1fB\x00").topic_pattern == "B"
    with pytest.raises(ConfigError, match="startingOffsets must be earliest, latest or a JSON object"):
        _opts(startingOffsets="earliest\xa0")
    assert _opts(endingOffsets="\x00LATEST\n").ending.default == LATEST
    opts = _opts(failOnDataLoss="FAL\u017fE", includeHeaders="TRUE",
                 startingOffsetsByTimestampStrategy="late\u017ft")
    assert (opts.fail_on_data_loss, opts.include_headers, opts.starting_timestamp_strategy) == (False, True,
                                                                                              "latest")
    with pytest.raises(ConfigError, match="failOnDataLoss must be true or false"):
        _opts(failOnDataLoss="tru\u00e9")


def test_a_partition_named_twice_keeps_its_last_value():
    """Spark 4 JsonUtils.partitionOffsets / partitionTimestamps read a Map[Int, Long]: "0" and "00" are one
    partition, and the later value wins; the first was taken here."""
    assert _opts(startingOffsets='{"A": {"0": 1, "00": 7}}').starting.offsets == (("A", 0, 7),)
    assert _opts(startingOffsetsByTimestamp='{"A": {"+1": 5, "1": 9}}').starting_timestamps == (("A", 1, 9),)


def test_times_are_trimmed_as_the_connector_trims_them():
    """Spark 4 KafkaSourceProvider.getKafkaOffsetRangeLimit: ``params(...).trim`` then ``toLong``."""
    assert _opts(startingTimestamp=" 1000 ", endingTimestamp="2000\t").ending_timestamp == 2000
    assert _opts(startingTimestamp=" 1000 ").starting_timestamp == 1000
    # String.trim cuts every character up to U+0020, control characters too
    assert _opts(startingTimestamp="\x001000\x1f").starting_timestamp == 1000
    assert _opts(minPartitions="+\u0663").min_partitions == 3     # Character.digit reads any BMP digit
    # the connector's AssignStrategy reads nothing of a partition the topic lacks, a negative one too
    assert _ranges(assign='{"A": [-1, 0]}') == {("A", 0): (0, 250)}


def test_write_options_keep_config_case():
    opts = parse_write_options({"path": "/s", "topic": "T", "config": '{"mappedFileSizeCommitLog": 4096}'})
    assert opts.config == (("mappedFileSizeCommitLog", "4096"),)
    assert opts.topic == "T" and opts.partition is None     # not given: see staged_columns
    with pytest.raises(ConfigError, match="unknown writer option"):
        parse_write_options({"path": "/s", "compression": "gzip"})


# -- pushdown -----------------------------------------------------------------------------

def test_pushdown_consumes_exact_filters_and_keeps_the_rest():
    when = datetime(1970, 1, 1, 0, 0, 5, 500, tzinfo=timezone.utc)
    filters = [
        EqualTo(("topic",), "A"),
        In(("partition",), (0, 1, 2)),
        GreaterThan(("partition",), 0),
        GreaterThanOrEqual(("offset",), 10),
        LessThan(("offset",), 20),
        GreaterThanOrEqual(("timestamp",), when),
        StringStartsWith(("topic",), "A"),
        In(("offset",), (12, 15)),
    ]
    pruning, remaining = planning.pushdown(filters)
    assert pruning.topics == {"A"}
    assert pruning.partitions == {0, 1, 2} and pruning.partition_min == 1
    assert (pruning.offset_min, pruning.offset_max) == (12, 16)
    assert pruning.timestamp_min == 5000
    # timestamps, LIKE and offset IN stay with Spark, by reference
    assert [id(f) for f in remaining] == [id(filters[5]), id(filters[6]), id(filters[7])]


def test_pushdown_time_column_per_format():
    when = datetime(2020, 1, 1, tzinfo=timezone.utc)
    pruning, _ = planning.pushdown([GreaterThanOrEqual(("timestamp",), when)], time_column="storeTimestamp")
    assert pruning.timestamp_min is None
    pruning, _ = planning.pushdown([GreaterThan(("storeTimestamp",), when)], time_column="storeTimestamp")
    assert pruning.timestamp_min == int(when.timestamp() * 1000)
    pruning, remaining = planning.pushdown([LessThanOrEqual(("timestamp",), when)])
    assert pruning.timestamp_min is None and len(remaining) == 1


def test_pushdown_never_asks_the_time_lookup_for_a_time_before_the_epoch():
    """Kafka 3.8.0 UnifiedLog.fetchOffsetByTimestamp reads -1, -2 and -3 as the log end, its start and
    the largest timestamp's offset; as a filter's lower bound they are times (a v0 record's is -1),
    so such a bound prunes nothing, and a later bound of the same AND still does."""
    before = [datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=timezone.utc),      # -1 ms
              datetime(1969, 12, 31, 23, 59, 59, 997_000, tzinfo=timezone.utc),      # -3 ms
              datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=timezone.utc)]      # floors to -1 ms
    for when in before:
        for kind in (EqualTo, GreaterThan, GreaterThanOrEqual):
            pruning, remaining = planning.pushdown([kind(("timestamp",), when)])
            assert pruning.timestamp_min is None and len(remaining) == 1
    later = datetime(1970, 1, 1, 0, 0, 5, tzinfo=timezone.utc)
    pruning, _ = planning.pushdown([GreaterThanOrEqual(("timestamp",), before[0]),
                                    GreaterThanOrEqual(("timestamp",), later)])
    assert pruning.timestamp_min == 5000
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert planning.pushdown([GreaterThanOrEqual(("timestamp",), epoch)])[0].timestamp_min == 0


def test_pushdown_ignores_mistyped_values():
    filters = [EqualTo(("partition",), "0"), EqualTo(("topic",), 3), EqualTo(("offset",), True)]
    pruning, remaining = planning.pushdown(filters)
    assert remaining == filters
    assert pruning == planning.Pruning()


def test_pushdown_leaves_filters_over_filters_to_spark():
    # Not names no column (it wraps a filter): it used to raise AttributeError in pushdown.
    filters = [Not(EqualTo(("topic",), "A")), Not(In(("partition",), (0,)))]
    pruning, remaining = planning.pushdown(filters)
    assert [id(f) for f in remaining] == [id(f) for f in filters]
    assert pruning == planning.Pruning()


# -- ranges -------------------------------------------------------------------------------

def test_resolve_ranges_prunes_topics_partitions_offsets_and_time():
    store = _store()
    pruning, _ = planning.pushdown([EqualTo(("topic",), "A"), EqualTo(("partition",), 1),
                                    GreaterThanOrEqual(("offset",), 120),
                                    GreaterThanOrEqual(("timestamp",), datetime(1970, 1, 1, 0, 2, 10,
                                                                                tzinfo=timezone.utc))])
    ranges = planning.resolve_ranges(store, _opts(), pruning)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [("A", 1, 130, 250)]
    assert store.segment_calls == 1    # segment maps of pruned partitions are never read


def test_resolve_ranges_applies_offsets_and_timestamps():
    store = _store()
    opts = _opts(startingOffsets='{"A": {"0": -2, "1": -2}, "B": {"0": 50, "3": 900}}',
                 endingOffsets='{"A": {"0": 250, "1": -1}, "B": {"0": -1, "3": -1}}')
    got = {(r.topic, r.partition): (r.start, r.end) for r in planning.resolve_ranges(store, opts)}
    assert got == {("A", 0): (0, 250), ("A", 1): (0, 250), ("B", 0): (50, 60), ("B", 3): (900, 1000)}
    # as the connector: startingTimestamp wins over startingOffsets, which is not even read
    opts = _opts(startingOffsets='{"B": {"3": 900}}', startingTimestamp="30000", endingTimestamp="240000")
    got = {(r.topic, r.partition): (r.start, r.end) for r in planning.resolve_ranges(store, opts)}
    assert got == {("A", 0): (30, 240), ("A", 1): (30, 240), ("B", 0): (50, 60), ("B", 3): (30, 240)}


def test_a_time_bound_prunes_only_where_the_time_lookup_is_exact():
    """RocketMQ 4.9.7 ConsumeQueue.getOffsetInQueueByTime binary searches store times as if they grew
    with queue offsets (the broker's clock can step back): pruning by it would drop matching rows, so
    a filter's time bound prunes a RocketMQ read only through segstore's ``time`` layout, which keeps
    the running maximum; Kafka's lookup (3.8.0 LogSegment.findOffsetByTimestamp) is exact."""
    pruning, _ = planning.pushdown([GreaterThanOrEqual(("storeTimestamp",), datetime(
        1970, 1, 1, 0, 2, 10, tzinfo=timezone.utc))], time_column="storeTimestamp")
    kafka = _store()
    assert planning.time_lookup_is_exact(kafka)
    assert {r.start for r in planning.resolve_ranges(kafka, _opts(topics="A"), pruning)} == {130}
    rocketmq = _store()
    rocketmq.format = "rocketmq"
    assert not planning.time_lookup_is_exact(rocketmq)
    assert {r.start for r in planning.resolve_ranges(rocketmq, _opts(topics="A"), pruning)} == {0}
    # startingTimestamp is the connector's offset lookup, not a filter: it still goes by the store's
    starting = _opts(topics="A", startingTimestamp="130000")
    assert {r.start for r in planning.resolve_ranges(rocketmq, starting)} == {130}


def test_a_time_bound_prunes_a_kafka_read_to_the_first_matching_record_past_v0_messages(tmp_path):
    """Kafka 3.8.0's ListOffsets answers none for a time up to a v0 segment's file mtime (the segment
    without record times comes first: ``UnifiedLog.searchOffsetInLocalLog`` searches it alone), as
    ``offset_for_time`` does; a filter's time bound must not read that as "no row": the v2 records after
    it that match are read (``first_offset_from_time``), and only startingTimestamp, the connector's
    ListOffsets, answers as the broker."""
    from kafka_messages import v0_then_v2_segments

    import segstore

    part = tmp_path / "old-0"
    part.mkdir()
    v0_then_v2_segments(part)       # segment 0's file written now: after every record's time
    pruning, _ = planning.pushdown([GreaterThanOrEqual(("timestamp",), datetime(
        2020, 9, 13, 12, 26, 40, 5000, tzinfo=timezone.utc))])      # 1_600_000_000_005 ms
    with segstore.open(part) as store:
        assert store.offset_for_time("old", 0, 1_600_000_000_005) is None
        assert planning.time_lookup_is_exact(store)
        ranges = planning.resolve_ranges(store, _opts(topics="old"), pruning)
        assert [(r.start, r.end) for r in ranges] == [(5, 8)]
        starting = _opts(topics="old", startingTimestamp="1600000000005",
                         startingOffsetsByTimestampStrategy="latest")
        assert planning.resolve_ranges(store, starting) == []      # from the latest offset: nothing


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": "latest"}, "startingOffsets cannot be latest for a batch query"),
    ({"startingOffsets": ' LATEST '}, "startingOffsets cannot be latest for a batch query"),
    ({"startingOffsets": '{"A": {"0": 5, "1": -1}}'}, "startingOffsets for A-1 cannot be latest"),
    ({"endingOffsets": "earliest"}, "endingOffsets cannot be earliest for a batch query"),
    ({"endingOffsets": '{"B": {"3": -2}}'}, "endingOffsets for B-3 cannot be earliest"),
])
def test_a_batch_read_cannot_start_at_latest_or_end_at_earliest(options, message):
    """As Spark 4 KafkaSourceProvider.validateBatchOptions: such a batch read would read nothing."""
    with pytest.raises(ConfigError, match=message):
        planning.resolve_ranges(_store(), _opts(**options))


@pytest.mark.parametrize("options", [
    {"startingOffsets": '{"A": {"0": 150}}', "endingOffsets": '{"A": {"0": 100}}'},
    {"startingOffsetsByTimestamp": '{"A": {"0": 9000, "1": 0}, "B": {"0": 0, "3": 0}}',
     "endingOffsetsByTimestamp": '{"A": {"0": 8000, "1": 5000}, "B": {"0": 60000, "3": 0}}'},
])
def test_a_start_given_after_its_end_is_refused(options):
    """Spark 4.1 KafkaSourceProvider.checkOffsetLimitValidity (KafkaScan.toBatch) refuses a partition whose
    specific start offset (or start timestamp) is after its end offset (end timestamp); it read nothing."""
    with pytest.raises(ConfigError, match=r"for A-0 \((150|9000)\) is after its ending"):
        planning.resolve_ranges(_store(), _opts(**options))


def test_a_start_after_its_end_is_not_compared_across_kinds_or_with_named_positions():
    """The connector compares only like with like: a timestamp option takes precedence over the offsets
    (getKafkaOffsetRangeLimit), and -2/-1 are positions, not offsets to compare."""
    assert ("A", 0) not in _ranges(subscribe="A", startingOffsets='{"A": {"0": 150, "1": -2}}',
                                   endingOffsets='{"A": {"0": 150, "1": -1}}')
    got = _ranges(subscribe="A", startingOffsets='{"A": {"0": 150, "1": -2}}',
                  endingOffsets='{"A": {"0": 100, "1": -1}}', endingTimestamp="200000")
    assert got[("A", 0)] == (150, 200)
    got = _ranges(subscribe="A", startingOffsets='{"A": {"0": 20, "1": -2}}',
                  endingOffsets='{"A": {"0": -1, "1": -1}}')
    assert got[("A", 0)] == (20, 250)


@pytest.mark.parametrize(("options", "named"), [
    ({"startingOffsets": '{"A_TYPO": {"0": 3}}'}, "startingOffsets names A_TYPO-0"),
    ({"startingOffsets": '{"A": {"0": 3, "7": 3}}'}, "startingOffsets names A-7"),
    ({"endingOffsets": '{"B": {"1": 3}}'}, "endingOffsets names B-1"),
    ({"subscribe": "A", "startingOffsets": '{"B": {"0": 55}}'}, "startingOffsets names B-0"),
    ({"assign": '{"A": [0]}', "endingOffsets": '{"A": {"1": 5}}'}, "endingOffsets names A-1"),
    ({"startingOffsets": '{"A": {"1": 200}}'}, r"startingOffsets lacks A-0, B-0, B-3: .* specified: A-1, "
                                                r"assigned: A-0, A-1, B-0, B-3"),
    ({"subscribe": "A", "endingOffsets": '{"A": {"0": 5}}'}, "endingOffsets lacks A-1"),
    ({"assign": '{"A": [0, 1]}', "endingOffsets": '{}'}, "endingOffsets lacks A-0, A-1.*specified: none"),
    ({"subscribe": "A", "startingOffsets": '{"A": {"0": 5, "1": 5}}', "endingOffsets": '{"A": {"0": 9}}'},
     "options startingOffsets and endingOffsets must name the same partitions.*endingOffsets: A-0$"),
])
def test_offsets_naming_a_partition_not_read_are_refused(options, named):
    """Spark 4 KafkaOffsetReaderAdmin.fetchPartitionOffsets (KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED)
    takes specific offsets only naming exactly the partitions read, and KafkaSourceProvider.
    checkOffsetLimitValidity specific starting and ending offsets only naming the same ones; partitions left
    out took the named default here, and a name the read lacks was a typo read everything past."""
    with pytest.raises(ConfigError, match=named):
        planning.resolve_ranges(_store(), _opts(**options))
    every = '{"A": {"0": -2, "1": 200}, "B": {"0": -2, "3": -2}}'
    assert _ranges(startingOffsets=every)[("A", 1)] == (200, 250)
    assert _ranges(assign='{"A": [1]}', startingOffsets='{"A": {"1": 200}}') == {("A", 1): (200, 250)}


def test_a_read_to_a_torn_end_raises_the_tail_error_and_one_ending_before_it_does_not():
    """A batch plan reading a partition to its end raises what a read of every message there would
    (:meth:`Store.tail_error`), rather than leaving the torn tail's partition short; an end before it
    (``endingOffsets``, an offset filter) reads what is whole."""
    store = _store()
    store.torn[("A", 1)] = TruncatedDataError("a 77-byte batch, found 40 bytes", "A-1/0.log", 900)
    with pytest.raises(TruncatedDataError, match=r"A-1/0\.log:900"):
        planning.resolve_ranges(store, _opts())
    ends = '{"A": {"0": -1, "1": 200}, "B": {"0": -1, "3": -1}}'
    got = planning.resolve_ranges(store, _opts(endingOffsets=ends))
    assert {(r.topic, r.partition): (r.start, r.end) for r in got}[("A", 1)] == (0, 200)
    pruned = planning.Pruning(partitions=frozenset({0}))
    assert ("A", 1) not in {(r.topic, r.partition) for r in planning.resolve_ranges(store, _opts(), pruned)}


def _ranges(**options):
    ranges = planning.resolve_ranges(_store(), _opts(**options))
    return {(r.topic, r.partition): (r.start, r.end) for r in ranges}


def test_subscribe_pattern_and_assign_choose_partitions():
    everything = _ranges()
    assert set(everything) == {("A", 0), ("A", 1), ("B", 0), ("B", 3)}
    assert set(_ranges(subscribe="B")) == {("B", 0), ("B", 3)}
    assert set(_ranges(topics="A")) == {("A", 0), ("A", 1)}
    assert set(_ranges(subscribePattern="[AB]")) == set(everything)
    assert set(_ranges(subscribePattern="B|Z")) == {("B", 0), ("B", 3)}
    # a pattern finds a match in the name, as the connector's findFirstIn
    assert _opts(subscribePattern="Top").selects_topic("TopicA")
    assert not _opts(subscribePattern="^Top$").selects_topic("TopicA")
    assert _ranges(assign='{"A": [1], "B": [3]}') == {("A", 1): everything[("A", 1)],
                                                      ("B", 3): everything[("B", 3)]}


def test_subscribe_or_assign_of_a_topic_the_store_lacks_fails_and_of_a_partition_is_not_read():
    """Spark 4 ConsumerStrategy.scala: SubscribeStrategy and AssignStrategy describe the topics named
    (``Admin.describeTopics`` fails for a topic the cluster lacks), and AssignStrategy keeps the partitions
    named among those the topic has.  A subscribed topic the store lacked read nothing here, and an assigned
    partition it lacked was an error."""
    with pytest.raises(NotFoundError, match=r"option subscribe names topic C, which the store does not hold"):
        _ranges(subscribe="B, C")
    with pytest.raises(NotFoundError, match=r"option assign names topic C, Z, which the store does not hold"):
        _ranges(assign='{"B": [0], "C": [0], "Z": [1]}')
    assert _ranges(assign='{"B": [7]}') == {}
    assert set(_ranges(assign='{"B": [0, 7]}')) == {("B", 0)}
    # a partition not read cannot be given offsets
    with pytest.raises(ConfigError, match="startingOffsets names B-7"):
        _ranges(assign='{"B": [0, 7]}', startingOffsets='{"B": {"0": -2, "7": -2}}')


@pytest.mark.parametrize(("options", "fragment"), [
    ({"subscribe": ""}, "subscribe must name at least one topic"),
    ({"subscribe": " , "}, "subscribe must name at least one topic"),
    ({"topics": ""}, "topics must name at least one topic"),
    ({"subscribePattern": "  "}, "subscribePattern must be a regular expression"),
    ({"assign": ""}, "assign must be a JSON object.*no topic partitions to assign"),
    ({"subscribe": "", "assign": '{"A": [0]}'}, "only one of subscribe"),
])
def test_an_empty_topic_choice_is_refused_not_read_as_every_topic(options, fragment):
    """Spark 4 KafkaSourceProvider.validateGeneralOptions takes the strategy option's presence as the
    choice and refuses an empty ``subscribe`` ("No topics to subscribe to"), ``subscribePattern`` ("Pattern
    to subscribe is empty") or ``assign``; an empty value taken as absent read every topic of the store."""
    with pytest.raises(ConfigError, match=fragment):
        _ranges(**options)


@pytest.mark.parametrize(("pattern", "read", "not_read"), [
    ("orders", ["orders", "old-orders", "orders.v2"], ["order"]),
    ("^orders$", ["orders"], ["old-orders"]),
    (r"\Qorders.v2\E", ["orders.v2", "x-orders.v2"], ["ordersXv2"]),
    (r"^\p{Alpha}+$", ["orders"], ["orders2", "ördérs"]),
    (r"^\w+$", ["orders_2"], ["ördérs"]),
    (r"^(?<o>o)rders\k<o>?$", ["orders", "orderso"], ["order"]),
    ("(?i)^ORDERS$", ["orders"], ["ördérs"]),
    ("^a(?i)b|c", ["aB", "C", "xcx"], ["Ab"]),
    (r"^t\d{2}\z", ["t12"], ["t123"]),
    (r"^\p{IsLatin}+$", ["ördérs"], ["orders2", "заказы"]),
    (r"\p{InCyrillic}", ["заказы"], ["ördérs"]),
])
def test_subscribe_pattern_is_a_java_regex_found_in_the_name(pattern, read, not_read):
    """Spark 4 ConsumerStrategy.scala SubscribePatternStrategy.assignedTopicPartitions takes the topics in
    which ``topicPattern.r`` (java.util.regex.Pattern) finds a match (``findFirstIn``), not only those it
    matches whole; \\Q..\\E, \\p{Alpha}, (?<name>) and \\k<name> were errors in Python's re, and \\w or
    (?i) took non-ASCII letters, which Java's classes leave out."""
    opts = _opts(subscribePattern=pattern)
    assert [t for t in read + not_read if opts.selects_topic(t)] == read


@pytest.mark.parametrize(("pattern", "found"), [
    ("a{", "Illegal repetition"), ("t{,2}", "Illegal repetition"),
    ("(?P<n>a)", "Java's Pattern refuses"), (r"\y", r"Illegal/unsupported escape sequence"),
    ("(?iu)a", "Unicode case folding"), (r"a\X", "segstore does not translate"),
    (r"\p{IsKlingon}", r"Unknown character property name \{IsKlingon\}"),
])
def test_subscribe_pattern_java_refuses_or_python_cannot_run_alike_is_refused(pattern, found):
    """Java's Pattern.compile refuses a stray '{', ``(?P<``, an undefined escape (Python took them as
    literals or its own syntax); constructs Python cannot run alike (grapheme clusters, flag i with u or U,
    x) are refused rather than matched differently, and so is a script Java 17 does not know
    (tests/test_spark_javaregex.py has Java's own tables)."""
    with pytest.raises(ConfigError, match=rf"subscribePattern: .*expected a Java regular expression.*"
                                          rf"{found}"):
        _opts(subscribePattern=pattern)


def test_subscribe_pattern_is_trimmed_as_the_connector():
    """Spark 4 KafkaSourceProvider.strategy: SubscribePatternStrategy(value.trim())."""
    assert set(_ranges(subscribePattern=" B ")) == {("B", 0), ("B", 3)}


def test_offsets_by_timestamp_as_the_connector():
    # FakeStore: timestamp = 1000 * offset
    every = '{"A": {"0": 20000, "1": 0}, "B": {"0": 0, "3": 999000}}'
    got = _ranges(startingOffsetsByTimestamp=every)
    assert got == {("A", 0): (20, 250), ("A", 1): (0, 250), ("B", 0): (50, 60), ("B", 3): (999, 1000)}
    ends = '{"A": {"0": 30000, "1": 9999999}, "B": {"0": 55000, "3": 0}}'
    got = _ranges(endingOffsetsByTimestamp=ends)
    # an end time after every record is the partition's end; an empty range is no range
    assert got == {("A", 0): (0, 30), ("A", 1): (0, 250), ("B", 0): (50, 55)}
    with pytest.raises(ConfigError, match=r"every partition.*B-3"):
        _ranges(startingOffsetsByTimestamp='{"A": {"0": 1, "1": 1}, "B": {"0": 1}}')
    with pytest.raises(ConfigError, match=r"exactly the partitions read.*A-9"):
        _ranges(subscribe="A", startingOffsetsByTimestamp='{"A": {"0": 1, "1": 1, "9": 1}}')
    late = '{"A": {"0": 1, "1": 1}, "B": {"0": 1, "3": 99999999}}'
    with pytest.raises(OffsetOutOfRangeError, match=r"B-3.*startingOffsetsByTimestampStrategy=latest"):
        _ranges(startingOffsetsByTimestamp=late)
    latest = _ranges(startingOffsetsByTimestamp=late, startingOffsetsByTimestampStrategy="latest")
    assert ("B", 3) not in latest and latest[("B", 0)] == (50, 60)
    with pytest.raises(OffsetOutOfRangeError, match="startingTimestamp"):
        _ranges(startingTimestamp="99999999")


def test_fail_on_data_loss_errs_or_skips_what_retention_removed():
    # B/0 holds offsets 50..59: 10..49 were removed
    lost = r"Could not read records in offset \[10, 60\) for topic B partition 0: .*B-0 from offset 10"
    with pytest.raises(OffsetOutOfRangeError, match=lost + r".*from 50.*failOnDataLoss=false"):
        _ranges(assign='{"B": [0]}', startingOffsets='{"B": {"0": 10}}')
    assert _ranges(subscribe="B", startingOffsets='{"B": {"0": 10, "3": -2}}',
                   failOnDataLoss="false")[("B", 0)] == (50, 60)
    # a range wholly removed: nothing to read
    assert ("B", 0) not in _ranges(assign='{"B": [0]}', startingOffsets='{"B": {"0": 10}}',
                                   endingOffsets='{"B": {"0": 20}}', failOnDataLoss="false")
    # named positions and offsets still held are never data loss
    assert _ranges(assign='{"B": [0]}', startingOffsets='{"B": {"0": -2}}')[("B", 0)] == (50, 60)
    assert _ranges(assign='{"B": [0]}', startingOffsets='{"B": {"0": 55}}')[("B", 0)] == (55, 60)


@pytest.mark.parametrize("fail", ["true", "false"])
def test_offsets_past_the_end_as_the_connector_reads_them(fail):
    """Spark 4 KafkaSourceRDD.compute asserts the resolved start is not after the resolved end ("Beginning
    offset ... is after the ending offset"), whatever failOnDataLoss says, and KafkaDataConsumer.get finds
    nothing to fetch at or past the latest offset (InternalKafkaConsumer.fetch: OffsetOutOfRangeException),
    data loss: an error ("Could not read records in offset [latest, end)"), or the read stops there.  Both
    were clamped to the partition's end: a start past it read nothing, an end past it read to the end."""
    lenient = {"failOnDataLoss": fail, "assign": '{"A": [0]}'}
    # B-0 holds offsets 50..59, A-0 0..249
    with pytest.raises(OffsetOutOfRangeError,
                       match=r"Beginning offset 300 is after the ending offset 250 for topic A partition 0"):
        _ranges(startingOffsets='{"A": {"0": 300}}', **lenient)
    with pytest.raises(OffsetOutOfRangeError, match=r"Beginning offset 50 is after the ending offset 20 for "
                                                    r"topic B partition 0"):
        _ranges(failOnDataLoss=fail, assign='{"B": [0]}', endingOffsets='{"B": {"0": 20}}')
    with pytest.raises(OffsetOutOfRangeError, match=r"Beginning offset 30 is after the ending offset 10"):
        _ranges(startingTimestamp="30000", endingOffsets='{"A": {"0": 10}}', **lenient)
    past = [_opts(endingOffsets='{"A": {"0": 300}}', **lenient),
            _opts(startingOffsets='{"A": {"0": 250}}', endingOffsets='{"A": {"0": 300}}', **lenient),
            _opts(startingOffsets='{"A": {"0": 260}}', endingOffsets='{"A": {"0": 300}}', **lenient)]
    if fail == "true":
        for opts, first in zip(past, (250, 250, 260), strict=True):
            message = rf"Could not read records in offset \[{first}, 300\) for topic A partition 0"
            with pytest.raises(OffsetOutOfRangeError, match=message + ": its latest offset is 250"):
                planning.resolve_ranges(_store(), opts)
    else:
        got = [{(r.topic, r.partition): (r.start, r.end) for r in planning.resolve_ranges(_store(), opts)}
               for opts in past]
        assert got == [{("A", 0): (0, 250)}, {}, {}]
    # a partition a filter prunes fails the read too: the connector takes no filter
    pruning = planning.Pruning(partitions=frozenset({1}))
    with pytest.raises(OffsetOutOfRangeError, match="Beginning offset 300"):
        planning.resolve_ranges(_store(), _opts(failOnDataLoss=fail, subscribe="A",
                                                startingOffsets='{"A": {"0": 300, "1": 0}}'), pruning)
    # where the connector splits partitions (minPartitions above the partitions read) it resolves the ranges
    # on the driver and leaves out those holding no offset (KafkaOffsetRangeCalculator.getRanges)
    assert _ranges(startingOffsets='{"A": {"0": 300}}', minPartitions="2", **lenient) == {}
    with pytest.raises(OffsetOutOfRangeError, match="Beginning offset 300"):
        _ranges(startingOffsets='{"A": {"0": 300}}', minPartitions="1", **lenient)
    # an empty range, or one within the partition, is no error
    assert _ranges(startingOffsets='{"A": {"0": 250}}', **lenient) == {}
    assert _ranges(startingOffsets='{"A": {"0": 20}}', endingOffsets='{"A": {"0": 20}}', **lenient) == {}
    assert _ranges(endingOffsets='{"A": {"0": 250}}', **lenient) == {("A", 0): (0, 250)}


def test_read_options_connector_values():
    opts = _opts(includeHeaders="TRUE", failOnDataLoss="false", **{"kafka.isolation.level": "read_committed"})
    assert (opts.include_headers, opts.fail_on_data_loss, opts.isolation) == (True, False, "read_committed")
    opts = _opts()
    assert (opts.include_headers, opts.fail_on_data_loss, opts.isolation) == (False, True, "read_uncommitted")
    assert _opts(assign='{"B": [3, 0], "A": [1]}').assign == (("A", 1), ("B", 0), ("B", 3))


# -- planning -----------------------------------------------------------------------------

def test_plan_fills_partitions_to_the_target_across_segments():
    store = _store()
    ranges = planning.resolve_ranges(store, _opts(topics="A"))
    result = planning.plan(ranges, max_bytes=10_000)
    # 50 KB in 5 partitions of 10 KB: A/0's last segment (5 KB) shares one with A/1's first half
    assert [[(s.partition, s.start, s.end) for s in p] for p in result.partitions] == [
        [(0, 0, 100)], [(0, 100, 200)], [(0, 200, 250), (1, 0, 50)], [(1, 50, 150)], [(1, 150, 250)]]
    _covers(result, ranges)


def test_plan_cuts_segments_where_a_partition_is_full():
    store = _store()
    ranges = planning.resolve_ranges(store, _opts())
    result = planning.plan(ranges, max_bytes=25_000)
    _covers(result, ranges)
    sizes = [sum(s.bytes for s in p) for p in result.partitions]
    # 151 KB in 7 partitions of 21,571 bytes give or take a 100-byte message
    assert len(sizes) == 7 and max(sizes) - min(sizes) <= 100 and sum(sizes) == 151_000
    assert sum(1 for p in result.partitions for s in p if (s.topic, s.partition) == ("B", 3)) == 5


def test_plan_partitions_come_in_waves_of_the_parallelism():
    store = _store()
    ranges = planning.resolve_ranges(store, _opts())
    # 151 KB, 40 KB at most each, 2 cores: 4 partitions (2 waves of 2), not 3 (a straggler wave)
    result = planning.plan(ranges, max_bytes=40_000, min_partitions=2)
    assert len(result.partitions) == 4
    _covers(result, ranges)


def test_plan_min_partitions_lowers_the_target():
    store = _store()
    ranges = planning.resolve_ranges(store, _opts(topics="A"))
    result = planning.plan(ranges, max_bytes=1 << 30, min_partitions=8)
    assert len(result.partitions) == 8
    _covers(result, ranges)


def test_plan_counts_pruned_segments():
    store = _store()
    pruning, _ = planning.pushdown([EqualTo(("topic",), "A"), GreaterThanOrEqual(("offset",), 150)])
    result = planning.plan(planning.resolve_ranges(store, _opts(), pruning), max_bytes=10_000)
    assert (result.segments_total, result.segments_read) == (6, 4)
    # the two halves left of each partition fit one target together: merged into one slice
    assert [[(s.topic, s.partition, s.start, s.end) for s in p] for p in result.partitions] == [
        [("A", 0, 150, 250)], [("A", 1, 150, 250)]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=12), st.integers(1, 40_000), st.integers(1, 9),
       st.integers(0, 2 ** 32))
def test_plan_covers_every_offset_once_and_balances(sizes, max_bytes, min_parts, seed):
    rnd = random.Random(seed)
    layout: dict[str, dict[int, list[tuple[int, int]]]] = {}
    for i, n in enumerate(sizes):
        bounds = sorted({0, n, *rnd.sample(range(1, n + 1), min(n, 3))})
        layout.setdefault(f"t{i % 3}", {})[i] = list(itertools.pairwise(bounds))
    store = FakeStore(layout)
    ranges = planning.resolve_ranges(store, _opts())
    result = planning.plan(ranges, max_bytes=max_bytes, min_partitions=min_parts)
    _covers(result, ranges)
    target = min(max_bytes, -(-result.bytes // min_parts))
    for p in result.partitions:
        size = sum(s.bytes for s in p)
        # a partition exceeds the target by at most one message (100 bytes here)
        assert size <= target + store.message_bytes
    # a multiple of the parallelism whenever there are enough messages to cut
    if sum(r.end - r.start for r in ranges) >= 4 * len(result.partitions):
        assert len(result.partitions) % min_parts == 0


# -- maxRecordsPerPartition ---------------------------------------------------------------

def _range(topic: str, partition: int, start: int, end: int) -> planning.PartitionRange:
    return planning.PartitionRange(topic, partition, start, end, ())


def _cut(ranges, **kwargs) -> list[tuple[str, int, int, int]]:
    return [(r.topic, r.partition, r.start, r.end) for r in planning.record_ranges(ranges, **kwargs)]


def test_record_ranges_cut_as_the_connector_cuts():
    """Spark 4 KafkaOffsetRangeCalculator.getRanges (SPARK-49259): ``ceil(size / maxRecordsPerPartition)``
    pieces per range, ``remaining / (parts - part)`` offsets each (getDividedPartition), so the remainder
    goes to the last pieces; then ``minPartitions`` above the number of pieces divides them again, pieces
    that would get one part (getPartCount: ``Math.round(size / total * minPartitions)``) kept whole, and
    the other pieces of their topic partition with them."""
    ten, two = _range("A", 0, 0, 10), _range("B", 0, 0, 2)
    assert _cut([ten], max_records=4, min_partitions=None) == [("A", 0, 0, 3), ("A", 0, 3, 6),
                                                               ("A", 0, 6, 10)]
    assert _cut([ten], max_records=5, min_partitions=None) == [("A", 0, 0, 5), ("A", 0, 5, 10)]
    assert _cut([ten], max_records=10, min_partitions=None) == [("A", 0, 0, 10)]
    assert _cut([_range("A", 0, 7, 7), two], max_records=1, min_partitions=None) == [
        ("B", 0, 0, 1), ("B", 0, 1, 2)]
    # 4 pieces for 6 partitions: B's (2 of 12 offsets: one part) stays whole and out of the proportion,
    # each of A's gets round(size / 10 * 5) = 2 parts
    assert _cut([ten, two], max_records=4, min_partitions=6) == [
        ("A", 0, 0, 1), ("A", 0, 1, 3), ("A", 0, 3, 4), ("A", 0, 4, 6), ("A", 0, 6, 8), ("A", 0, 8, 10),
        ("B", 0, 0, 2)]
    # minPartitions alone, as before SPARK-49259 (SPARK-36576's rule)
    assert _cut([ten, two], max_records=None, min_partitions=3) == [("A", 0, 0, 5), ("A", 0, 5, 10),
                                                                    ("B", 0, 0, 2)]
    assert _cut([ten, two], max_records=None, min_partitions=2) == [("A", 0, 0, 10), ("B", 0, 0, 2)]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 400)), min_size=1, max_size=6),
       st.integers(1, 120), st.none() | st.integers(1, 30))
def test_record_ranges_hold_at_most_the_maximum_and_cover_every_offset_once(spans, most, min_parts):
    ranges = [_range("t", i, start, start + size) for i, (start, size) in enumerate(spans)]
    pieces = planning.record_ranges(ranges, max_records=most, min_partitions=min_parts)
    assert all(0 < p.end - p.start <= most for p in pieces)
    for r in ranges:
        mine = [(p.start, p.end) for p in pieces if p.partition == r.partition]
        assert [o for a, b in mine for o in range(a, b)] == list(range(r.start, r.end))


def test_a_batch_read_splits_by_records_where_the_connector_does():
    """Spark 4 KafkaOffsetReaderAdmin.getOffsetRangesFromUnresolvedOffsets divides only where
    shouldDivvyUpLargePartitions says so, judged on the offsets before earliest (-2) and latest (-1) are
    resolved: from earliest to latest a range is 1 in size whatever it holds, so maxRecordsPerPartition
    alone leaves it whole; an offset named at either end, or minPartitions above the partitions read, and
    every range read is cut."""
    store = FakeStore({"A": {0: [(0, 100), (100, 250)]}, "B": {0: [(0, 10)]}})

    def pieces(**options):
        result = planning.plan_batch(store, _opts(maxRecordsPerPartition="40", **options))
        return [[(s.topic, s.partition, s.start, s.end) for s in p] for p in result.partitions]

    assert len(pieces()) == 1      # the byte plan: both partitions in one task
    # A: ceil(250 / 40) = 7 pieces, 250 // 7 = 35, 215 // 6 = 35, then 180 // 5 = 36 each
    seven = [[("A", 0, 0, 35)], [("A", 0, 35, 70)], [("A", 0, 70, 106)], [("A", 0, 106, 142)],
             [("A", 0, 142, 178)], [("A", 0, 178, 214)], [("A", 0, 214, 250)], [("B", 0, 0, 10)]]
    assert pieces(endingOffsets='{"A": {"0": 250}, "B": {"0": 10}}') == seven
    # B's range is -1 - (-2) = 1 and A's -1 - 200 < 0: no division, A from 200 to its end in one task
    assert pieces(startingOffsets='{"A": {"0": 200}, "B": {"0": -2}}') == [[("A", 0, 200, 250),
                                                                          ("B", 0, 0, 10)]]
    assert pieces(minPartitions="3") == seven
    # times are resolved first (ListOffsets), a time no record matches to latest (-1): an end time after
    # every record leaves the range at -1 - (-2) = 1, one inside A's records cuts A (its end 200 from -2)
    assert len(pieces(endingTimestamp="99999999")) == 1
    assert pieces(endingTimestamp="200000")[:2] == [[("A", 0, 0, 40)], [("A", 0, 40, 80)]]   # 200 / 5
    # a task's bytes above maxBytesPerPartition are cut further (100 bytes a message here)
    cut = pieces(minPartitions="3", maxBytesPerPartition="2000")
    assert cut[:2] == [[("A", 0, 0, 18)], [("A", 0, 18, 35)]] and len(cut) == 15


# -- streaming limits ---------------------------------------------------------------------

def test_limit_offsets_shares_in_proportion():
    start = {"A": {"0": 0, "1": 10}, "B": {"0": 5}}
    latest = {"A": {"0": 100, "1": 10}, "B": {"0": 55}}
    assert planning.limit_offsets(start, latest, 1000) == latest
    limited = planning.limit_offsets(start, latest, 30)
    assert limited == {"A": {"0": 20, "1": 10}, "B": {"0": 15}}
    # below one offset each, each partition waiting still gets one (Math.ceil), as the connector's
    assert planning.limit_offsets(start, latest, 1) == {"A": {"0": 1, "1": 10}, "B": {"0": 6}}


def test_limit_offsets_never_starves_a_small_partition():
    """Spark 4 KafkaMicroBatchStream.rateLimit: shares below one round up ("Don't completely starve small
    topicpartitions"), the others down.  Shares by largest remainders gave the busy partition every offset
    of each micro-batch while it had more waiting, so a quiet partition's record waited for it to drain."""
    start = {"busy": {"0": 0}, "quiet": {"0": 0}}
    latest = {"busy": {"0": 1000}, "quiet": {"0": 1}}
    assert planning.limit_offsets(start, latest, 10) == {"busy": {"0": 9}, "quiet": {"0": 1}}
    # three partitions of 10 waiting: 10 * (10 / 30) = 3.33 each, rounded down
    even = {"a": {"0": 10, "1": 10, "2": 10}}
    assert planning.limit_offsets({"a": {"0": 0, "1": 0, "2": 0}}, even, 10) == \
        {"a": {"0": 3, "1": 3, "2": 3}}


def test_input_partitions_carry_paths_and_offsets_only():
    store = _store()
    opts = _opts(config='{"x": "1"}')
    parts = planning.input_partitions(planning.plan(planning.resolve_ranges(store, opts), max_bytes=10_000),
                                      opts, "kafka")
    clone = pickle.loads(pickle.dumps(parts[0]))
    assert (clone.path, clone.format, clone.config) == ("/store", "kafka", (("x", "1"),))
    assert clone.slices == parts[0].slices
    assert [p.index for p in parts] == list(range(len(parts)))


# -- log order (a RocketMQ commitlog shared by every queue) ---------------------------------------

class FakeSharedLog(FakeStore):
    """Queues interleaved in one log: message ``i`` of the log (100 bytes at ``100 * i``) belongs to
    ``owners[i]``; one consume-queue file per queue."""

    def __init__(self, owners: list[tuple[str, int]]) -> None:
        self.positions: dict[tuple[str, int], list[int]] = {}
        for i, owner in enumerate(owners):
            self.positions.setdefault(owner, []).append(100 * i)
        layout: dict[str, dict[int, list[tuple[int, int]]]] = {}
        for (topic, partition), where in self.positions.items():
            layout.setdefault(topic, {})[partition] = [(0, len(where))]
        super().__init__(layout)

    def queue_span(self, topic, partition, start, end):
        where = self.positions[(topic, partition)]
        return where[start], where[end - 1] + 100

    def queue_offsets_at(self, topic, partition, positions):
        return [bisect.bisect_left(self.positions[(topic, partition)], p) for p in positions]


def _interleaved(queues: int, messages: int, seed: int = 0) -> FakeSharedLog:
    rnd = random.Random(seed)
    return FakeSharedLog([(f"t{q % 2}", q) for q in (rnd.randrange(queues) for _ in range(messages))])


def _log_covers(store: FakeSharedLog, result: planning.Plan, ranges) -> None:
    """Every offset once, and the tasks' messages in disjoint byte ranges, in task order."""
    _covers(result, ranges)
    where = store.positions
    spans = [(min(where[(s.topic, s.partition)][s.start] for s in task),
              max(where[(s.topic, s.partition)][s.end - 1] for s in task)) for task in result.partitions]
    assert all(a <= b for a, b in spans)
    assert all(b1 < a2 for (_, b1), (a2, _) in itertools.pairwise(spans))


def test_plan_read_takes_log_order_for_most_of_the_log_and_queues_for_a_small_part():
    store = _interleaved(8, 4000)
    everything = planning.resolve_ranges(store, _opts())
    result = planning.plan_read(store, everything, max_bytes=50_000, min_partitions=2)
    assert result.order == planning.ORDER_LOG and len(result.partitions) == 8
    _log_covers(store, result, everything)
    sizes = [sum(s.bytes for s in task) for task in result.partitions]
    assert max(sizes) - min(sizes) <= 0.2 * max(sizes)          # random interleaving: about even
    # a quarter of the queues: their messages are a quarter of the log they lie in
    quarter = planning.resolve_ranges(store, _opts(assign='{"t0": [0], "t1": [1]}'))
    assert planning.plan_read(store, quarter, max_bytes=50_000, min_partitions=2) == \
        planning.plan(quarter, max_bytes=50_000, min_partitions=2)
    # a store without a shared log (Kafka) is always planned by partitions
    plain = _store()
    ranges = planning.resolve_ranges(plain, _opts())
    assert planning.plan_read(plain, ranges, max_bytes=10_000) == planning.plan(ranges, max_bytes=10_000)


def test_log_order_follows_the_fraction_of_the_span_read():
    # t0/0 holds the first half of the log, t1/1 the second: reading one is all of its own span
    store = FakeSharedLog([("t0", 0)] * 500 + [("t1", 1)] * 500)
    one = planning.resolve_ranges(store, _opts(assign='{"t1": [1]}'))
    assert planning.plan_read(store, one, max_bytes=10_000).order == planning.ORDER_LOG
    # the last tenth of t0/0 and the first tenth of t1/1: a fifth of the log between them
    ends = planning.resolve_ranges(store, _opts(startingOffsets='{"t0": {"0": 450}, "t1": {"1": -2}}',
                                                endingOffsets='{"t0": {"0": -1}, "t1": {"1": 50}}'))
    assert planning.plan_read(store, ends, max_bytes=10_000).order == planning.ORDER_LOG
    apart = planning.resolve_ranges(store, _opts(endingOffsets='{"t0": {"0": 50}, "t1": {"1": -1}}',
                                                 startingOffsets='{"t0": {"0": -2}, "t1": {"1": 450}}'))
    assert planning.plan_read(store, apart, max_bytes=10_000).order == planning.ORDER_QUEUE
    # one queue interleaved with another, holding 55% or 65% of the log: the rule's 60% between
    for share, order in ((11, planning.ORDER_QUEUE), (13, planning.ORDER_LOG)):
        mixed = FakeSharedLog([("t0", 0) if i % 20 < share else ("t1", 1) for i in range(400)])
        ranges = planning.resolve_ranges(mixed, _opts(assign='{"t0": [0]}'))
        assert planning.plan_read(mixed, ranges, max_bytes=10_000).order == order


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.integers(1, 600), st.integers(0, 2 ** 32), st.integers(1, 30_000),
       st.integers(1, 5), st.integers(0, 50))
def test_log_order_plan_covers_every_offset_once(queues, messages, seed, max_bytes, min_parts, offset_min):
    store = _interleaved(queues, messages, seed)
    pruning, _ = planning.pushdown([GreaterThanOrEqual(("offset",), offset_min)])
    ranges = planning.resolve_ranges(store, _opts(), pruning)
    result = planning.plan_log_order(store, ranges, max_bytes=max_bytes, min_partitions=min_parts)
    if result is None:
        return
    _log_covers(store, result, ranges)
    assert result.bytes == sum(r.end - r.start for r in ranges) * store.message_bytes
    assert len(result.partitions) <= min_parts * -(-result.bytes // (max_bytes * min_parts))


def test_log_order_travels_with_the_input_partitions():
    store = _interleaved(4, 400)
    opts = _opts()
    result = planning.plan_read(store, planning.resolve_ranges(store, opts), max_bytes=10_000)
    parts = planning.input_partitions(result, opts, "rocketmq")
    assert {pickle.loads(pickle.dumps(p)).order for p in parts} == {planning.ORDER_LOG}


def test_kafka_internal_topics_are_read_only_without_a_topic_option():
    """Spark 4 ConsumerStrategy.scala: subscribePattern lists topics with Admin.listTopics (no internal
    topic), subscribe and assign drop internal partitions (retrieveAllPartitions: filterNot isInternal;
    Kafka 3.8.0 Topic.isInternal), and the KRaft ``__cluster_metadata`` log is no topic to a client; a
    pattern read ``__consumer_offsets`` and ``__cluster_metadata`` records here."""
    from spark_support import FIXTURES

    import segstore

    real = FIXTURES / "real" / "kraft-confluent-7.5.1"
    client = {"delivery-create-request", "payment-create-response"}
    with segstore.open(str(real), "kafka") as store:
        def topics(**options):
            return {t for t, _ in planning.selected(store, _opts(**options))}

        assert topics() == client | {"__consumer_offsets", "__cluster_metadata"}
        assert topics(subscribePattern=".*") == topics(subscribePattern="-") == client
        assert topics(subscribe="__consumer_offsets, delivery-create-request") == {"delivery-create-request"}
        assert topics(assign='{"__consumer_offsets": [0, 4]}') == set()
        with pytest.raises(NotFoundError, match="names topic __cluster_metadata, which the store does not"):
            topics(subscribe="__cluster_metadata")
