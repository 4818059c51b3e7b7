"""The stream reader's micro-batch offsets (``latestOffset``, ``partitions``, ``read``), driven without a
Spark session as the micro-batch engine drives it: what each micro-batch ends at and reads."""

from __future__ import annotations

import os
import shutil
import time

import pytest

import segstore
from segstore import Message
from segstore.errors import ConfigError, OffsetOutOfRangeError
from segstore.spark.datasource import SegstoreStreamReader, read_slices
from segstore.spark.options import parse_read_options
from segstore.spark.schema import spark_schema

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable

T0 = 1700000000000
COMMITTED = {"kafka.isolation.level": "read_committed"}


def stream(path, format_name="kafka", **options) -> SegstoreStreamReader:
    parsed = parse_read_options({"path": str(path), **options}, streaming=True)
    return SegstoreStreamReader(parsed, format_name, spark_schema(format_name))


def micro_batch(reader: SegstoreStreamReader, start: dict) -> tuple[dict, list[bytes]]:
    """One trigger: the end ``latestOffset`` gives and the values its partitions read."""
    end = reader.latestOffset(start, None)
    values = []
    for part in reader.partitions(start, end):
        for batch in read_slices(part, reader.schema, reader.options):
            values += batch.column("value").to_pylist()
    return end, values


def test_a_read_committed_stream_ends_its_batches_at_the_last_stable_offset(tmp_path):
    """A read_committed consumer lists latest offsets at the last stable offset (Kafka 3.8.0
    Partition.fetchOffsetForTimestamp: LATEST_TIMESTAMP under READ_COMMITTED is localLog.lastStableOffset),
    and Spark's connector lists them with the consumer's isolation level.  Ending a micro-batch at the
    log end while the read stops at the open transaction lost the transaction's records for good."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"plain0", timestamp=T0), Message("t", b"plain1", timestamp=T0)])
        txn = store.transaction(3000)
        txn.append_batch([Message("t", b"txn2", timestamp=T0), Message("t", b"txn3", timestamp=T0)])
        store.append_batch([Message("t", b"plain4", timestamp=T0)])
        store.flush()
        reader = stream(tmp_path, **COMMITTED, startingOffsets="earliest")
        start = reader.initialOffset()
        end, values = micro_batch(reader, start)
        assert (end, values) == ({"t": {"0": 2}}, [b"plain0", b"plain1"])
        assert stream(tmp_path, **COMMITTED).initialOffset() == {"t": {"0": 2}}
        txn.commit(timestamp=T0)
        store.append_batch([Message("t", b"plain6", timestamp=T0)])
        store.flush()
        end, values = micro_batch(reader, end)
    assert (end, values) == ({"t": {"0": 7}}, [b"txn2", b"txn3", b"plain4", b"plain6"])


def test_a_read_committed_stream_started_past_an_open_transaction_waits_there(tmp_path):
    """A start past the last stable offset is not a batch ending before it (which would go back and read
    what the start left out): the stream holds until the transaction ends."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        txn = store.transaction(3000)
        txn.append_batch([Message("t", b"txn0", timestamp=T0)])
        store.append_batch([Message("t", b"plain1", timestamp=T0), Message("t", b"plain2", timestamp=T0)])
        store.flush()
        reader = stream(tmp_path, **COMMITTED, startingOffsets='{"t": {"0": 2}}')
        start = reader.initialOffset()
        assert micro_batch(reader, start) == ({"t": {"0": 2}}, [])
        txn.commit(timestamp=T0)
        store.flush()
    assert micro_batch(reader, start) == ({"t": {"0": 4}}, [b"plain2"])


def test_every_micro_batch_is_cut_by_max_records_per_partition(tmp_path):
    """Spark 4 KafkaMicroBatchStream.planInputPartitions: getOffsetRangesFromResolvedOffsets hands every
    micro-batch's ranges to KafkaOffsetRangeCalculator.getRanges, so maxRecordsPerPartition cuts them
    whatever the options' offsets (the JVM reader plans its micro-batches through this reader too)."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, timestamp=T0) for i in range(7)])
    reader = stream(tmp_path, startingOffsets="earliest", maxRecordsPerPartition="3")
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    tasks = [[(s.start, s.end) for s in part.slices] for part in reader.partitions(start, end)]
    assert tasks == [[(0, 2)], [(2, 4)], [(4, 7)]]     # ceil(7 / 3) = 3 pieces: 7 // 3, 5 // 2, 3


def test_min_offsets_per_trigger_delays_micro_batches_until_enough_wait(tmp_path):
    """Spark 4 KafkaMicroBatchStream.latestOffset: with minOffsetsPerTrigger a trigger ends its micro-batch
    at its start (no batch) while fewer offsets wait and maxTriggerDelay has not passed since the last batch;
    the first trigger always makes one; maxOffsetsPerTrigger still bounds a batch made.  An hour's delay
    keeps the clock out of it."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, timestamp=T0) for i in range(2)])
        reader = stream(tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="3", maxTriggerDelay="1h",
                        maxOffsetsPerTrigger="4")
        start = reader.initialOffset()
        end, values = micro_batch(reader, start)
        assert (end, values) == ({"t": {"0": 2}}, [b"v0", b"v1"])          # the first, though 2 < 3
        store.append_batch([Message("t", b"v%d" % i, timestamp=T0) for i in range(2, 4)])
        store.flush()
        assert reader.latestOffset(end, None) == end                        # 2 waiting: delayed
        store.append_batch([Message("t", b"v%d" % i, timestamp=T0) for i in range(4, 9)])
        store.flush()
        end, values = micro_batch(reader, end)
        assert (end, values) == ({"t": {"0": 6}}, [b"v2", b"v3", b"v4", b"v5"])   # 7 waiting, 4 at most
    # a delay that has passed makes a batch of what waits (a negative one has always passed)
    eager = stream(tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="100", maxTriggerDelay="-1ms")
    eager.last_trigger_ms = time.time_ns() // 1_000_000
    assert eager.latestOffset({"t": {"0": 6}}, None) == {"t": {"0": 9}}
    patient = stream(tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="100")      # 15m default
    patient.last_trigger_ms = time.time_ns() // 1_000_000
    assert patient.latestOffset({"t": {"0": 6}}, None) == {"t": {"0": 6}}
    assert patient.latestOffset({"t": {"0": 6}}, ReadAllAvailable()) == {"t": {"0": 9}}


def _tear_last_batch(path, topic: str) -> None:
    """Cut the last batch of ``topic``-0 short, as a broker's append in progress leaves it."""
    with segstore.open(str(path)) as store:
        infos = store.segment_infos(topic, 0)
    log = infos[-1]["path"]
    size = os.path.getsize(log)
    with segstore.open(str(path), format="kafka", mode="a") as store:
        store.append_batch([Message(topic, b"torn%d" % i, timestamp=T0) for i in range(3)])
    os.truncate(log, size + 30)


@pytest.mark.parametrize("options", [{}, COMMITTED])
def test_a_stream_reads_to_the_last_whole_batch_before_a_torn_tail(tmp_path, options):
    """The micro-batch ends at the last whole batch (``offset_range``), and its read must stop there too,
    not ask for the torn batch after it (TruncatedDataError).  Under read_committed the slice's last
    record is the COMMIT marker, which the read drops."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"m%d" % i, timestamp=T0) for i in range(3)])
        with store.transaction(3000) as txn:
            txn.append_batch([Message("t", b"txn3", timestamp=T0)])
    _tear_last_batch(tmp_path, "t")
    reader = stream(tmp_path, **options, startingOffsets="earliest")
    end, values = micro_batch(reader, reader.initialOffset())
    assert end == {"t": {"0": 5}}
    assert values == [b"m0", b"m1", b"m2", b"txn3"]


@pytest.mark.parametrize(("option", "value"), [
    ("endingOffsets", "latest"), ("EndingOffsets", "7"),
    ("endingOffsetsByTimestamp", '{"t": {"0": 1700000000000}}')])
def test_a_stream_refuses_ending_options(tmp_path, option, value):
    """Spark 4 KafkaSourceProvider.validateStreamOptions throws for endingOffsets and
    endingOffsetsByTimestamp in a streaming query (names case-insensitive); both readers took them and read
    past them."""
    with pytest.raises(ConfigError, match=f"option e{option[1:]} is not valid in streaming queries"):
        parse_read_options({"path": str(tmp_path), option: value}, streaming=True)


@pytest.mark.parametrize("value", ["1700000000000", "soon"])
def test_a_stream_ignores_ending_timestamp_as_the_connector(tmp_path, value):
    """Spark 4 KafkaSourceProvider.validateStreamOptions refuses only endingOffsets and
    endingOffsetsByTimestamp, and a stream resolves only its starting options (toMicroBatchStream), so
    endingTimestamp is never read there, not even parsed; a stream refused it."""
    parsed = parse_read_options({"path": str(tmp_path), "endingTimestamp": value}, streaming=True)
    assert parsed.ending_timestamp is None


def test_max_offsets_per_trigger_is_a_java_long(tmp_path):
    """The JVM reader parses maxOffsetsPerTrigger as a Java long (SegstoreStream.getDefaultReadLimit, for
    Spark's ReadLimit.maxRows); the Python parser refuses what it cannot hold with the same message."""
    def parse(value):
        return parse_read_options({"path": str(tmp_path), "maxOffsetsPerTrigger": value}, streaming=True)

    assert parse(str(2**63 - 1)).max_offsets_per_trigger == 2**63 - 1
    with pytest.raises(ConfigError, match=f"option maxOffsetsPerTrigger must be at most {2**63 - 1}, "
                                          f"found {2**63}"):
        parse(str(2**63))


_RETENTION_CONFIG = {"kafka": {"segment.bytes": 300}, "rocketmq": {"mappedFileSizeCommitLog": 4096}}


def _retained_store(path, format_name: str) -> None:
    """Topic ``live``, partition (queue) 0: 100 messages in many small segments (commitlog files)."""
    config = _RETENTION_CONFIG[format_name]
    for i in range(0, 100, 5):
        with segstore.open(str(path), format=format_name, mode="a", **config) as store:
            store.append_batch([Message("live", b"m%d" % j) for j in range(i, i + 5)])


def _retain(path, format_name: str) -> int:
    """Remove the oldest messages as retention does; the new log start."""
    with segstore.open(str(path), mode="a", **_RETENTION_CONFIG[format_name]) as store:
        if format_name == "kafka":
            store.delete_records(60, topic="live", partition=0)
        else:
            store.retention(now_ms=10**13)
        return store.offset_range("live", 0)[0]


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_retention_between_planning_and_reading_follows_fail_on_data_loss(tmp_path, format_name,
                                                                          fail_on_data_loss):
    """Offsets retention removes after the driver planned a micro-batch are lost as those removed before
    it: an OffsetOutOfRangeError, or with failOnDataLoss=false the rows from the new log start.  Kafka
    used to skip them silently, RocketMQ to fail whatever the option."""
    _retained_store(tmp_path, format_name)
    reader = stream(tmp_path, format_name, startingOffsets="earliest",
                    failOnDataLoss=str(fail_on_data_loss).lower())
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, None))
    low = _retain(tmp_path, format_name)
    assert 0 < low < 100

    def read():
        return [o for p in parts for b in read_slices(p, reader.schema, reader.options)
                for o in b.column("offset").to_pylist()]

    if fail_on_data_loss:
        lost = f"from offset 0, but the store holds offsets from {low} on"
        with pytest.raises(OffsetOutOfRangeError, match=lost):
            read()
    else:
        assert read() == list(range(low, 100))


def test_the_jvm_reader_checks_a_stream_schema_as_a_batch_one(tmp_path):
    """The JVM reader's stream requests carry the query's schema and the worker refuses it as the batch
    plan and the Python reader do (a given ``value string`` used to be cast, an unknown column to fail in
    a task)."""
    from pyspark.sql.types import StringType, StructField, StructType

    from segstore.spark import bridge

    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v", timestamp=T0)])

    def initial(schema: StructType) -> dict:
        return bridge.stream_initial({"options": {"path": str(tmp_path), "startingOffsets": "earliest"},
                                      "schema": schema.json(), "parallelism": 1})

    assert initial(spark_schema("kafka")) == {"offsets": {"t": {"0": 0}}}
    with pytest.raises(ConfigError, match="gives column value type string, expected binary"):
        initial(StructType([StructField("value", StringType())]))
    with pytest.raises(ConfigError, match="names column 'body', which a kafka store does not have"):
        initial(StructType([StructField("body", StringType())]))


def _recreate(path, format_name: str, count: int) -> None:
    """The topic deleted and made again: ``live``-0 holds offsets ``0 .. count - 1`` anew."""
    shutil.rmtree(path, ignore_errors=True)
    with segstore.open(str(path), format=format_name, mode="a") as store:
        store.append_batch([Message("live", b"new%d" % i) for i in range(count)])


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
@pytest.mark.parametrize("trigger", ["default", "maxOffsetsPerTrigger", "availableNow"])
def test_offsets_gone_back_are_data_loss(tmp_path, format_name, trigger):
    """A stream whose offset is past the log's end (the topic recreated) reports it as Spark's Kafka
    connector does (Spark 4 KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: "Partition X's
    offset was changed from A to B", through reportDataLoss): failOnDataLoss=true fails the micro-batch;
    false warns and ends it at the new log end (KafkaMicroBatchStream.rateLimit leaves such a partition
    at its end), and the stream goes on from there.  It used to skip silently, or hold for good."""
    path = tmp_path / "store"
    _recreate(path, format_name, 20)
    options = {"maxOffsetsPerTrigger": "3"} if trigger == "maxOffsetsPerTrigger" else {}
    strict = stream(path, format_name, startingOffsets="earliest", **options)
    lenient = stream(path, format_name, startingOffsets="earliest", failOnDataLoss="false", **options)
    if trigger == "availableNow":
        strict.prepareForTriggerAvailableNow()
        lenient.prepareForTriggerAvailableNow()
    reached = {"live": {"0": 20}}
    _recreate(path, format_name, 5)
    with pytest.raises(OffsetOutOfRangeError, match="live-0's offset was changed from 20 to 5"):
        micro_batch(strict, reached)
    with pytest.warns(UserWarning, match="live-0's offset was changed from 20 to 5"):
        end, values = micro_batch(lenient, reached)
    assert (end, values) == ({"live": {"0": 5}}, [])
    with segstore.open(str(path), mode="a") as store:
        store.append_batch([Message("live", b"new5")])
    if trigger != "availableNow":       # an availableNow query stops at the snapshot's 20
        assert micro_batch(lenient, end) == ({"live": {"0": 6}}, [b"new5"])


def test_a_starting_offset_past_the_end_is_data_loss(tmp_path):
    """The connector takes specific starting offsets as given (Spark 4 KafkaOffsetReaderAdmin.
    fetchSpecificOffsets) and reports one past the end at the first micro-batch; it was clamped to the end
    silently."""
    _recreate(tmp_path / "store", "kafka", 5)
    start = stream(tmp_path / "store", startingOffsets='{"live": {"0": 1000}}').initialOffset()
    assert start == {"live": {"0": 1000}}
    with pytest.raises(OffsetOutOfRangeError, match="offset was changed from 1000 to 5"):
        micro_batch(stream(tmp_path / "store"), start)


def test_partitions_gone_or_added_past_offset_zero_are_data_loss(tmp_path):
    """Spark 4 KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets reports, through reportDataLoss,
    partitions of the start offsets missing from the end ("... are gone. Some data may have been missed")
    and a partition added since whose earliest offset is not 0 ("Added partition X starts from N instead of
    0").  A topic deleted under a running stream lost its unread records silently."""
    path = tmp_path / "store"
    with segstore.open(str(path), format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"a0"), Message("b", b"b0"), Message("b", b"b1")])
    strict = stream(path, startingOffsets="earliest")
    lenient = stream(path, startingOffsets="earliest", failOnDataLoss="false")
    start = strict.initialOffset()
    assert start == {"a": {"0": 0}, "b": {"0": 0}}
    shutil.rmtree(path / "b-0")
    with pytest.raises(OffsetOutOfRangeError, match="b-0 is gone from the store"):
        micro_batch(strict, start)
    with pytest.warns(UserWarning, match="b-0 is gone from the store"):
        end, values = micro_batch(lenient, start)
    assert (end, values) == ({"a": {"0": 1}}, [b"a0"])
    # a partition new since the last micro-batch, whose offsets before 3 retention already removed
    with segstore.open(str(path), format="kafka", mode="a") as store:
        store.append_batch([Message("c", b"c%d" % i) for i in range(5)])
        store.delete_records(3, topic="c", partition=0)
    with pytest.raises(OffsetOutOfRangeError, match="added partition c-0 starts from offset 3 instead of 0"):
        micro_batch(strict, end)
    with pytest.warns(UserWarning, match="added partition c-0 starts from offset 3 instead of 0"):
        assert micro_batch(lenient, end) == ({"a": {"0": 1}, "c": {"0": 5}}, [b"c3", b"c4"])
    # one added at offset 0 is no loss
    with segstore.open(str(path), format="kafka", mode="a") as store:
        store.append_batch([Message("d", b"d0")])
    assert micro_batch(strict, {"a": {"0": 1}, "c": {"0": 5}}) == \
        ({"a": {"0": 1}, "c": {"0": 5}, "d": {"0": 1}}, [b"d0"])


@pytest.mark.parametrize(("value", "named"), [('{"a": {"0": 1500}, "a_typo": {"0": 1}}', "a_typo-0"),
                                              ('{"a": {"0": 1500, "7": 1}}', "a-7")])
def test_a_stream_refuses_start_times_for_partitions_it_does_not_read(tmp_path, value, named):
    """Spark 4 KafkaOffsetReaderAdmin.fetchSpecificTimestampBasedOffsets asserts startingOffsetsByTimestamp
    names exactly the partitions assigned, for a stream's initial offsets as for a batch (which refused
    them here already); a stream ignored a typo'd topic or a partition the store lacks."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"a0", timestamp=1000), Message("a", b"a1", timestamp=2000)])
    message = f"startingOffsetsByTimestamp must name exactly the partitions read; the store has no {named}"
    with pytest.raises(ConfigError, match=message):
        stream(tmp_path, startingOffsetsByTimestamp=value).initialOffset()
    exact = stream(tmp_path, startingOffsetsByTimestamp='{"a": {"0": 1500}}')
    assert exact.initialOffset() == {"a": {"0": 1}}


def test_a_stream_ends_its_batches_at_the_high_watermark(tmp_path):
    """The connector's latest offsets are ListOffsets' (Kafka 3.8.0 Partition.fetchOffsetForTimestamp:
    the high watermark for READ_UNCOMMITTED); micro-batches read the records past it, which the followers
    had not copied yet, as soon as they were in the log."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i) for i in range(5)])
    checkpoint = tmp_path / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 5\n", "t 0 3\n"))
    reader = stream(tmp_path, startingOffsets="earliest")
    end, values = micro_batch(reader, reader.initialOffset())
    assert (end, values) == ({"t": {"0": 3}}, [b"v0", b"v1", b"v2"])
    assert stream(tmp_path).initialOffset() == {"t": {"0": 3}}       # latest
    checkpoint.write_text(checkpoint.read_text().replace("t 0 3\n", "t 0 5\n"))
    assert micro_batch(reader, end) == ({"t": {"0": 5}}, [b"v3", b"v4"])


def _batch_ranges(path, **options) -> dict:
    from segstore.spark import planning

    parsed = parse_read_options({"path": str(path), **options})
    with segstore.open(str(path)) as store:
        return {(r.topic, r.partition): (r.start, r.end) for r in planning.resolve_ranges(store, parsed)}


@pytest.mark.parametrize("option", ["startingTimestamp", "startingOffsetsByTimestamp"])
def test_a_start_time_at_or_past_the_high_watermark_follows_the_strategy(tmp_path, option):
    """ListOffsets answers a time lookup only with an offset below the last fetchable one (Kafka 3.8.0
    Partition.fetchOffsetForTimestamp: ``offset < lastFetchableOffset``, the high watermark, the last stable
    offset under READ_COMMITTED), and the connector takes no offset as its strategy says (Spark 4
    KafkaOffsetReaderAdmin.readTimestampOffsets: an error, or the latest offset).  A time whose first record
    lay past the high watermark gave a batch that read nothing and a stream waiting at that record."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, timestamp=T0 + 1000 * i) for i in range(5)])
    checkpoint = tmp_path / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 5\n", "t 0 3\n"))

    def start(ms: int) -> dict:
        return {option: str(ms) if option == "startingTimestamp" else f'{{"t": {{"0": {ms}}}}}'}

    assert _batch_ranges(tmp_path, **start(T0 + 2000)) == {("t", 0): (2, 3)}
    assert stream(tmp_path, **start(T0 + 2000)).initialOffset() == {"t": {"0": 2}}
    for ms in (T0 + 3000, T0 + 4000):
        with pytest.raises(OffsetOutOfRangeError, match=r"t-0 below its latest offset 3"):
            _batch_ranges(tmp_path, **start(ms))
        with pytest.raises(OffsetOutOfRangeError, match=r"t-0 below its latest offset 3"):
            stream(tmp_path, **start(ms)).initialOffset()
        assert _batch_ranges(tmp_path, **start(ms), startingOffsetsByTimestampStrategy="latest") == {}
        latest = stream(tmp_path, **start(ms), startingOffsetsByTimestampStrategy="latest")
        assert latest.initialOffset() == {"t": {"0": 3}}


def test_a_read_committed_start_time_past_the_last_stable_offset_follows_the_strategy(tmp_path):
    """Under READ_COMMITTED the bound is the last stable offset (Kafka 3.8.0
    Partition.fetchOffsetForTimestamp), in batch as in a stream."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"plain0", timestamp=T0)])
        txn = store.transaction(3000)
        txn.append_batch([Message("t", b"txn1", timestamp=T0 + 1000)])
        store.append_batch([Message("t", b"plain2", timestamp=T0 + 2000)])
        store.flush()
        for ms in (T0 + 1000, T0 + 2000):
            with pytest.raises(OffsetOutOfRangeError, match=r"t-0 below its latest offset 1"):
                _batch_ranges(tmp_path, **COMMITTED, startingTimestamp=str(ms))
            with pytest.raises(OffsetOutOfRangeError, match=r"t-0 below its latest offset 1"):
                stream(tmp_path, **COMMITTED, startingTimestamp=str(ms)).initialOffset()
            latest = stream(tmp_path, **COMMITTED, startingTimestamp=str(ms),
                            startingOffsetsByTimestampStrategy="latest")
            assert latest.initialOffset() == {"t": {"0": 1}}
        assert _batch_ranges(tmp_path, **COMMITTED, startingTimestamp=str(T0)) == {("t", 0): (0, 3)}
        txn.abort()


@pytest.mark.parametrize("option", ["startingTimestamp", "startingOffsetsByTimestamp"])
def test_time_options_take_the_list_offsets_codes_as_the_connector(tmp_path, option):
    """Spark 4's connector hands its times to ListOffsets as they are (KafkaOffsetReaderAdmin:
    OffsetSpec.forTimestamp; KafkaSourceProvider parses any long), and the broker reads -1 as the latest
    offset, -2 and -4 (earliest local, no tiered storage) as the log start (Kafka 3.8.0
    Partition.fetchOffsetForTimestamp, UnifiedLog.fetchOffsetByTimestamp).  Every negative was refused.
    -3 (max timestamp) and other negatives stay refused: their meaning depends on the broker."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v%d" % i, timestamp=T0 + 1000 * i) for i in range(5)])
    checkpoint = tmp_path / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 5\n", "t 0 3\n"))
    ending = option.replace("starting", "ending")

    def at(name: str, ms: int) -> dict:
        return {name: str(ms) if "ByTimestamp" not in name else f'{{"t": {{"0": {ms}}}}}'}

    assert _batch_ranges(tmp_path, **at(option, -2)) == {("t", 0): (0, 3)}
    assert _batch_ranges(tmp_path, **at(option, -4)) == {("t", 0): (0, 3)}
    assert _batch_ranges(tmp_path, **at(option, -1)) == {}
    assert stream(tmp_path, **at(option, -1)).initialOffset() == {"t": {"0": 3}}
    assert stream(tmp_path, **at(option, -2)).initialOffset() == {"t": {"0": 0}}
    assert _batch_ranges(tmp_path, **at(ending, -1)) == {("t", 0): (0, 3)}
    assert _batch_ranges(tmp_path, **at(ending, -2)) == {}
    for ms in (-3, -5):
        with pytest.raises(ConfigError, match=rf"{option}: expected ms since the epoch.*found {ms}"):
            _batch_ranges(tmp_path, **at(option, ms))


def test_a_stream_refuses_starting_offsets_that_leave_out_a_partition(tmp_path):
    """Spark 4 KafkaOffsetReaderAdmin.fetchSpecificOffsets asserts a stream's specific startingOffsets name
    every partition assigned ("If startingOffsets contains specific offsets, you must specify all
    TopicPartitions"); a partition left out started at latest here."""
    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"a0", partition=0), Message("a", b"a1", partition=1)])
    with pytest.raises(ConfigError, match=r"startingOffsets lacks a-1: .*specified: a-0, assigned: a-0, a-1"):
        stream(tmp_path, startingOffsets='{"a": {"0": 0}}').initialOffset()
    assert stream(tmp_path, startingOffsets='{"a": {"0": 0, "1": -1}}').initialOffset() == \
        {"a": {"0": 0, "1": 1}}


def test_a_streams_schema_and_reads_never_parse_its_ending_timestamp(tmp_path):
    """Spark asks a stream's schema and its partitions' reads as it asks a batch read's: they parsed the
    options as a batch read's, refusing an endingTimestamp the connector never reads in a stream (Spark 4
    KafkaSourceProvider.validateStreamOptions, toMicroBatchStream); a batch read still refuses it."""
    from segstore.spark import bridge
    from segstore.spark.datasource import SegstoreDataSource

    with segstore.open(str(tmp_path), format="kafka", mode="a") as store:
        store.append_batch([Message("a", b"a0")])
    options = {"path": str(tmp_path), "endingTimestamp": "soon", "startingOffsets": "earliest"}
    source = SegstoreDataSource(options)
    schema = source.schema()
    reader = source.streamReader(schema)
    end, values = micro_batch(reader, reader.initialOffset())
    assert (end, values) == ({"a": {"0": 1}}, [b"a0"])
    assert bridge.schema({"options": options})["format"] == "kafka"
    with pytest.raises(ConfigError, match="endingTimestamp must be an integer"):
        source.reader(schema)
