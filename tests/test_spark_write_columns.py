"""The Spark writer's columnar commit (Kafka ``append_arrow``) appends what its per-message path does.

No Spark session: ``staged_columns`` and ``staged_messages`` read the staged Arrow table a write
task leaves (Spark's Arrow types: timestamps in microseconds, strings or binary), and the commit
appends one or the other.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import segstore
from segstore.columns import HEADERS
from segstore.errors import ConfigError
from segstore.spark.datasource import _destinations, staged_columns, staged_messages
from segstore.spark.options import WriteOptions

SPARK_TIMESTAMP = pa.timestamp("us", tz="UTC")

rows = st.lists(st.fixed_dictionaries({
    "topic": st.sampled_from(["orders", "audit", None]),
    "partition": st.sampled_from([0, 2, None]),
    "key": st.one_of(st.none(), st.text(max_size=6)),
    "value": st.one_of(st.none(), st.binary(max_size=40)),
    # microseconds: a few before the epoch (the append's time, as -1 ms is), sub-ms remainders
    "timestamp": st.one_of(st.none(), st.integers(-3_000, 3_000),
                           st.integers(1_700_000_000_000_000, 1_700_000_100_000_000)),
    "headers": st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=4), st.binary(max_size=6)),
                                             max_size=2)),
}), min_size=1, max_size=30)


def staged_table(items: list[dict]) -> pa.Table:
    return pa.table({
        "topic": pa.array([i["topic"] for i in items], pa.string()),
        "partition": pa.array([i["partition"] for i in items], pa.int32()),
        "key": pa.array([i["key"] for i in items], pa.string()),
        "value": pa.array([i["value"] for i in items], pa.binary()),
        "timestamp": pa.array([i["timestamp"] for i in items], pa.int64()).cast(SPARK_TIMESTAMP),
        "headers": pa.array([None if i["headers"] is None
                             else [{"key": k, "value": v} for k, v in i["headers"]] for i in items], HEADERS),
    })


def stored(path) -> list[tuple]:
    with segstore.open(str(path), "kafka") as store:
        return [(r.topic, r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp)
                for topic in store.topics() for p in store.partitions(topic) for r in store.read(topic, p)]


@given(rows)
@settings(max_examples=25, deadline=None)
def test_columnar_commit_appends_what_the_message_path_does(tmp_path_factory: pytest.TempPathFactory,
                                                            items: list[dict]) -> None:
    root = tmp_path_factory.mktemp("write")
    table = staged_table(items)
    options = WriteOptions(path=str(root), format="kafka", topic="default-topic", partition=1)
    columns = staged_columns(table, options)
    assert columns is not None
    before = int(time.time() * 1000)
    with segstore.open(str(root / "columns"), "kafka", "a") as store:
        store.append_arrow(columns)
    with segstore.open(str(root / "messages"), "kafka", "a") as store:
        store.append_batch(list(staged_messages(table, options)))
    after = int(time.time() * 1000)
    got, expected = stored(root / "columns"), stored(root / "messages")
    assert [row[:6] for row in got] == [row[:6] for row in expected]
    for (*_, ts_got), (*_, ts_expected) in zip(got, expected, strict=True):
        if ts_expected >= before:    # no time, or one before the epoch: the append's own clock
            assert before <= ts_got <= after
        else:
            assert ts_got == ts_expected


@given(rows, st.sampled_from([None, "orders", "audit"]), st.sampled_from([None, 1]))
@settings(max_examples=60, deadline=None)
def test_a_commit_checks_the_destinations_of_every_message(items: list[dict], one_topic: str | None,
                                                           partition: int | None) -> None:
    """The (topic, partition) pairs the commit checks before it appends (``_destinations``: one topic's
    rows by their partitions alone, several topics' by grouping both) are the messages' own."""
    if one_topic is not None:       # every row of one topic (a null one takes the option's)
        items = [{**item, "topic": item["topic"] and one_topic} for item in items]
    options = WriteOptions(path="unused", format="kafka", topic="default-topic", partition=partition)
    table = staged_table(items)
    assert _destinations(table, options) == {(m.topic, m.partition) for m in staged_messages(table, options)}
    assert _destinations(table.slice(0, 0), options) == set()


def test_a_null_topic_without_the_option_is_refused_as_the_message_path_refuses_it() -> None:
    table = staged_table([{"topic": "t", "partition": 0, "key": None, "value": b"a", "timestamp": None,
                           "headers": None},
                          {"topic": None, "partition": 0, "key": None, "value": b"b", "timestamp": None,
                           "headers": None}])
    options = WriteOptions(path="unused", format="kafka")
    with pytest.raises(ConfigError) as columnar:
        staged_columns(table, options)
    with pytest.raises(ConfigError) as messages:
        list(staged_messages(table, options))
    assert str(columnar.value) == str(messages.value)


def test_columns_that_do_not_convert_fall_back_to_the_message_path() -> None:
    table = pa.table({"topic": ["t"], "value": [b"v"], "headers": pa.array([[1, 2]], pa.list_(pa.int64()))})
    assert staged_columns(table, WriteOptions(path="unused", format="kafka")) is None


def test_a_spark_task_reads_on_one_thread(tmp_path) -> None:
    """Spark runs a task per core: a task's scan takes one thread, not the store's default (every core)."""
    from segstore.spark import planning
    from segstore.spark.datasource import read_slices
    from segstore.spark.options import parse_read_options
    from segstore.spark.schema import spark_schema

    with segstore.open(str(tmp_path / "k"), "kafka", "a") as store:
        store.append_batch([{"topic": "t", "value": b"v%d" % i} for i in range(5)])
    asked: list[dict] = []
    with segstore.open(str(tmp_path / "k"), "kafka") as store:
        scan_arrow = store.scan_arrow

        def recording(*args, **kwargs):
            asked.append(kwargs)
            return scan_arrow(*args, **kwargs)

        store.scan_arrow = recording    # type: ignore[method-assign]
        partition = planning.SegstoreInputPartition(0, str(tmp_path / "k"), "kafka", (),
                                                    (planning.Slice("t", 0, 0, 5, 100),))
        options = parse_read_options({"path": "x"})
        batches = list(read_slices(partition, spark_schema("kafka"), options, store))
    assert sum(b.num_rows for b in batches) == 5
    assert asked and all(kwargs.get("threads") == 1 for kwargs in asked)


def test_a_long_timestamp_column_is_ms_on_both_paths(tmp_path) -> None:
    """A ``timestamp`` column of longs is ms since the epoch (as everywhere a time is given as a number):
    the columnar path took it for Spark's microseconds and stored 1970 times."""
    table = pa.table({"topic": ["t", "t", "t"], "value": [b"a", b"b", b"c"],
                      "timestamp": pa.array([1_700_000_000_123, 0, -5], pa.int64())})
    options = WriteOptions(path=str(tmp_path), format="kafka")
    columns = staged_columns(table, options)
    assert columns is not None
    assert columns.column("timestamp").to_pylist() == [1_700_000_000_123, 0, -1]     # -1: the append's time
    assert [m.timestamp for m in staged_messages(table, options)] == [1_700_000_000_123, 0, -1]
    with segstore.open(str(tmp_path / "k"), "kafka", "a") as store:
        store.append_arrow(columns)
    assert stored(tmp_path / "k")[0][-1] == 1_700_000_000_123


def _stage(job, partition_id: int, table: pa.Table):
    """One write task's staged file, as a task leaves it (an Arrow IPC stream)."""
    from segstore.spark.datasource import StagedWrite, staged_name

    path = os.path.join(job.job_dir, staged_name(partition_id, 0))
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return StagedWrite(partition_id, path, table.num_rows)


def _java_partition(key: bytes, count: int) -> int:
    """BuiltInPartitioner.partitionForKey (murmur2_py is tested against Kafka's UtilsTest vectors)."""
    from segstore_kafka.partitioner import murmur2_py

    return (murmur2_py(key) & 0x7FFFFFFF) % count


def test_rows_without_a_partition_go_to_their_keys_partition_as_kafkas_producer(tmp_path) -> None:
    """No ``partition`` column and no ``partition`` option: a keyed row goes where Kafka 3.8's producer
    puts its key (BuiltInPartitioner.partitionForKey over the topic's partitions), an unkeyed one to 0
    (before, every row went to the option's default 0); the option, when given, still wins."""
    from segstore.spark.datasource import StagedJob

    logs = tmp_path / "logs"
    for n in range(3):
        (logs / f"t-{n}").mkdir(parents=True)
    keys = [f"k{i}".encode() for i in range(12)]
    table = pa.table({"topic": ["t"] * 13, "key": pa.array([*keys, None], pa.binary()),
                      "value": [b"v"] * 13})
    job = StagedJob.start(WriteOptions(path=str(logs), format="kafka"), "job", local_root=str(tmp_path / "s"))
    job.commit([_stage(job, 0, table)])
    with segstore.open(str(logs), "kafka") as store:
        got = sorted(((r.partition, r.key) for r in store.scan()), key=repr)
    assert got == sorted([(_java_partition(k, 3), k) for k in keys] + [(0, None)], key=repr)
    options = WriteOptions(path=str(logs), format="kafka", partition=2)
    job = StagedJob.start(options, "job2", local_root=str(tmp_path / "s"))
    job.commit([_stage(job, 0, table)])
    with segstore.open(str(logs), "kafka") as store:
        assert len(list(store.read("t", 2))) == 13 + sum(_java_partition(k, 3) == 2 for k in keys)


def test_a_key_whose_partition_is_not_held_refuses_the_commit_before_any_file(tmp_path) -> None:
    from segstore.errors import NotFoundError
    from segstore.spark.datasource import StagedJob

    logs = tmp_path / "logs"
    for n in (1, 2):
        (logs / f"t-{n}").mkdir(parents=True)
    key = next(k for k in (f"k{i}".encode() for i in range(50)) if _java_partition(k, 3) == 0)
    job = StagedJob.start(WriteOptions(path=str(logs), format="kafka"), "job", local_root=str(tmp_path / "s"))
    first = _stage(job, 0, pa.table({"topic": ["t"], "key": [b"x"], "value": [b"v"], "partition": [1]}))
    second = _stage(job, 1, pa.table({"topic": ["t"], "key": pa.array([key], pa.binary()), "value": [b"v"]}))
    with pytest.raises(NotFoundError, match="found no t-0"):
        job.commit([first, second])
    with segstore.open(str(logs), "kafka") as store:
        assert list(store.scan()) == []         # the first file was not appended either
