"""Spark reads of every compat fixture equal the library's own reads; pushdown prunes planning."""

from __future__ import annotations

import json
import shutil
from datetime import timezone

import pytest
from conftest import KAFKA_FIXTURES, ROCKETMQ_FIXTURES
from spark_support import FIXTURES, fixture_config, library_rows, sort_rows, spark, spark_rows  # noqa: F401

import segstore

pytestmark = pytest.mark.spark


def _load(spark, path, config, **options):  # noqa: F811
    reader = spark.read.format("segstore").option("config", json.dumps(config))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(path))


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
def test_rocketmq_fixture_rows_equal_library(spark, rocketmq_stores, name):  # noqa: F811
    path = rocketmq_stores[name]
    config = fixture_config(path)
    expected = sort_rows(library_rows(path, config))
    df = _load(spark, path, config)
    assert df.schema.fieldNames()[:8] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                          "timestampType", "headers"]
    got = spark_rows(df)
    assert len(got) == len(expected) > 0
    assert got == expected


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_kafka_fixture_rows_equal_library(spark, name):  # noqa: F811
    path = FIXTURES / "kafka" / name / "topic-0"
    config = fixture_config(path)
    expected = sort_rows(library_rows(path, config))
    got = spark_rows(_load(spark, path, config))
    assert len(got) == len(expected) > 0
    assert got == expected


def test_kafka_control_records_on_request(spark):  # noqa: F811
    path = FIXTURES / "kafka" / "txn" / "topic-0"
    config = fixture_config(path)
    expected = sort_rows(library_rows(path, config, include_control=True))
    got = spark_rows(_load(spark, path, config, includeControlRecords="true", format="kafka"))
    assert len(got) == len(expected) > len(library_rows(path, config))
    assert got == expected


def test_forced_format_and_missing_store_are_reported(spark, tmp_path):  # noqa: F811
    kafka_dir = FIXTURES / "kafka" / "txn" / "topic-0"
    with pytest.raises(Exception, match="expected a RocketMQ store"):
        _load(spark, kafka_dir, {}, format="rocketmq").schema  # noqa: B018
    with pytest.raises(Exception, match="nothing: expected a store directory to read, found no such file"):
        _load(spark, tmp_path / "nothing", {}).schema  # noqa: B018
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="not a store of any known format"):
        _load(spark, tmp_path / "empty", {}).schema  # noqa: B018


def _planned(df) -> int:
    return df.rdd.getNumPartitions()


def test_pushdown_prunes_partitions_rocketmq(spark, rocketmq_stores):  # noqa: F811
    path = rocketmq_stores["basic"]
    config = fixture_config(path)
    with segstore.open(str(path), **config) as store:
        files = store.segment_infos("TopicA", 2)          # the queue's consume-queue files
    # a target that holds the largest file of the queue but not two: one input partition per file
    target = max(f["bytes"] for f in files)
    assert len(files) >= 2 and target < sum(f["bytes"] for f in files[-2:])
    df = _load(spark, path, config, maxBytesPerPartition=str(target), minPartitions="1")
    all_parts = _planned(df)
    one_topic = df.filter("topic = 'TopicA'")
    one_queue = df.filter("topic = 'TopicA' AND partition = 2")
    tail = df.filter(f"topic = 'TopicA' AND partition = 2 AND offset >= {files[-1]['start_offset']}")
    assert _planned(one_topic) < all_parts
    assert _planned(one_queue) == len(files) < _planned(one_topic)
    assert _planned(tail) == 1
    library = library_rows(path, config)
    got = {(r.partition, r.offset) for r in tail.select("partition", "offset").collect()}
    assert got == {(r["partition"], r["offset"]) for r in library if r["topic"] == "TopicA"
                   and r["partition"] == 2 and r["offset"] >= files[-1]["start_offset"]}
    assert one_queue.count() == sum(r["topic"] == "TopicA" and r["partition"] == 2 for r in library)


def test_pushdown_offset_and_store_time_rocketmq(spark, rocketmq_stores):  # noqa: F811
    path = rocketmq_stores["basic"]
    config = fixture_config(path)
    library = [r for r in library_rows(path, config) if r["topic"] == "TopicB" and r["partition"] == 0]
    df = _load(spark, path, config, maxBytesPerPartition="512", minPartitions="1")
    df = df.filter("topic = 'TopicB' AND partition = 0")
    cut = library[len(library) // 2]["storeTimestamp"].replace(tzinfo=timezone.utc)
    later = df.filter(df.storeTimestamp >= cut)
    assert _planned(later) < _planned(df)
    assert later.count() == sum(r["storeTimestamp"] >= cut.replace(tzinfo=None) for r in library)
    window = df.filter("offset > 3 AND offset <= 10")
    assert sorted(r.offset for r in window.select("offset").collect()) == list(range(4, 11))


def test_pushdown_prunes_kafka_segments(spark):  # noqa: F811
    path = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    config = fixture_config(path)
    library = library_rows(path, config)
    # no segment exceeds segment.bytes and no two together fit it: one input partition per segment
    df = _load(spark, path, config, maxBytesPerPartition=str(config["segment.bytes"]),
               minPartitions="1")
    segments = _planned(df)
    assert segments == len(list((FIXTURES / "kafka" / "uncompressed" / "topic-0").glob("*.log")))
    last = max(r["offset"] for r in library)
    tail = df.filter(f"offset >= {last - 5}")
    assert _planned(tail) == 1
    assert tail.count() == 6
    cut = library[len(library) * 3 // 4]["timestamp"].replace(tzinfo=timezone.utc)
    late = df.filter(df.timestamp >= cut)
    assert _planned(late) < segments
    assert late.count() == sum(r["timestamp"] >= cut.replace(tzinfo=None) for r in library)


def test_options_offsets_and_timestamps(spark, rocketmq_stores):  # noqa: F811
    path = rocketmq_stores["basic"]
    config = fixture_config(path)
    library = library_rows(path, config)
    df = _load(spark, path, config, topics="TopicA",
               startingOffsets=json.dumps({"TopicA": {"0": 10}}),
               endingOffsets=json.dumps({"TopicA": {"0": 20, "1": 5}}))
    got = {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}
    expected = {(r["partition"], r["offset"]) for r in library if r["topic"] == "TopicA"
                and ((r["partition"] == 0 and 10 <= r["offset"] < 20)
                     or (r["partition"] == 1 and r["offset"] < 5)
                     or r["partition"] > 1)}
    assert got == expected
    stamps = sorted(r["storeTimestamp"] for r in library if r["topic"] == "TopicA")
    middle = stamps[len(stamps) // 2]
    ms = int(middle.replace(tzinfo=timezone.utc).timestamp() * 1000)
    after = _load(spark, path, config, topics="TopicA", startingTimestamp=str(ms))
    assert after.count() == sum(1 for s in stamps if s >= middle)
    assert _load(spark, path, config, topics="NoSuchTopic").collect() == []
