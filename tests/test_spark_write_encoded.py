"""A Spark write whose driver encodes each task's rows as they come in (``prepare_staged``, the JVM
writer's ``write_prepare``) leaves the store ``append_arrow`` of the same rows leaves, byte for byte; where
the encoding cannot hold, the commit appends the rows as before.

The commit sets only each batch's baseOffset and partitionLeaderEpoch, which Kafka's batch checksum
does not cover: Kafka 3.8.0 ``clients/src/main/java/org/apache/kafka/common/record/DefaultRecordBatch.java``,
"The CRC covers the data from the attributes to the end of the batch" (``computeChecksum``:
``Crc32C.compute(buffer, ATTRIBUTES_OFFSET, ...)``), the leader setting both without a new checksum
(``setLastOffset``, ``setPartitionLeaderEpoch``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_support import spark, writer  # noqa: F401

import segstore
from segstore.errors import InvalidTopicError
from segstore.spark import bridge
from segstore.spark.datasource import Prepared, StagedJob, StagedWrite, prepare_staged
from segstore.spark.options import WriteOptions

SPARK_TIMESTAMP = pa.timestamp("us", tz="UTC")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_700_000_000_000


def staged_table(rows: int, first: int, partitions: int, *, timestamps: bool = True) -> pa.Table:
    """Rows as a Spark task stages them (Spark's Arrow types), in batches of 100 rows."""
    ids = np.arange(first, first + rows)
    rng = np.random.default_rng(first)     # values a codec does not shrink to nothing: segments roll
    columns = {
        "topic": pa.array(["orders"] * rows, pa.string()),
        "partition": pa.array(ids % partitions, pa.int32()),
        "key": pa.array([f"k{i}" for i in ids.tolist()], pa.string()),
        "value": pa.array([rng.bytes(20 + i % 90) for i in ids.tolist()], pa.binary()),
    }
    if timestamps:
        columns["timestamp"] = pa.array((T0 + ids) * 1000, pa.int64()).cast(SPARK_TIMESTAMP)
    table = pa.table(columns)
    return pa.Table.from_batches(table.to_batches(max_chunksize=100))


def stage(job: StagedJob, task: int, table: pa.Table) -> StagedWrite:
    path = os.path.join(job.job_dir, f"part-{task:05d}-0.arrow")
    with pa.OSFile(path, "wb") as f, pa.ipc.new_stream(f, table.schema) as out:
        for batch in table.to_batches():
            out.write_batch(batch)
    return StagedWrite(task, path, table.num_rows)


def files_of(root: Path) -> dict[str, str]:
    """Every file under ``root`` (but the writer's lock) by its digest."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def seed(path: Path, config: dict[str, str]) -> None:
    """Records already in the store, the last of partition 1 written in leader epoch 5: the commit
    stamps its batches with each partition's latest epoch, and appends after its log end."""
    with segstore.open(str(path), "kafka", "a", **config) as store:
        store.append_arrow(pa.table({"topic": ["orders"] * 3, "partition": pa.array([0, 1, 2], pa.int32()),
                                     "value": [b"old"] * 3, "timestamp": pa.array([T0 - 1] * 3, pa.int64())}))
        store.partition_of("orders", 1).append_records([(b"e", b"epoch 5", T0)], leader_epoch=5)


def commit(root: Path, config: dict[str, str], tables: list[pa.Table], *, encode: bool,
           encode_config: dict[str, str] | None = None) -> list[bool]:
    """Commit ``tables`` as a job's staged files, encoded first (``encode_config``: the options the
    driver encoded under) or not; returns which files were encoded."""
    options = WriteOptions(path=str(root / "store"), format="kafka",
                           config=tuple((k, v) for k, v in config.items()))
    job = StagedJob.start(options, "job", local_root=str(root / "staging"))
    staged = [stage(job, task, table) for task, table in enumerate(tables)]
    prepared: dict[str, Prepared] = {}
    if encode:
        at_encode = options if encode_config is None else WriteOptions(
            path=options.path, format="kafka", config=tuple(encode_config.items()))
        for part in staged:
            ahead = prepare_staged(at_encode, part.path)
            if ahead is not None:
                prepared[part.path] = ahead
    job.commit(staged, prepared)
    assert not os.path.exists(job.root)     # the staging is gone
    return [part.path in prepared for part in staged]


@pytest.mark.parametrize("codec", CODECS)
def test_encoded_ahead_the_store_is_append_arrows_byte_for_byte(tmp_path: Path, codec: str) -> None:
    """Several partitions, rolls (``segment.bytes`` a few batches), a store holding records (one
    partition in leader epoch 5), three tasks: the same files as ``append_arrow`` of the rows (the
    epoch and base offsets set at the commit, outside the batches' CRC-32C: Kafka 3.8.0
    ``DefaultRecordBatch.computeChecksum`` covers ``ATTRIBUTES_OFFSET`` to the end)."""
    config = {"compression.type": codec, "segment.bytes": "6000", "index.interval.bytes": "1000"}
    tables = [staged_table(700, 0, 3), staged_table(450, 700, 3), staged_table(20, 1150, 3)]
    seed(tmp_path / "encoded" / "store", config)
    assert commit(tmp_path / "encoded", config, tables, encode=True) == [True, True, True]
    seed(tmp_path / "reference", config)
    with segstore.open(str(tmp_path / "reference"), "kafka", "a", **config) as store:
        from segstore.spark.datasource import staged_columns

        options = WriteOptions(path="unused", format="kafka")
        whole = pa.concat_tables([staged_columns(t, options) for t in tables])  # type: ignore[misc]
        store.append_arrow(whole)
    got, expected = files_of(tmp_path / "encoded" / "store"), files_of(tmp_path / "reference")
    assert sum(name.endswith(".log") for name in got) > 3 * 4       # each partition rolled
    assert got == expected
    with segstore.open(str(tmp_path / "encoded" / "store"), "kafka") as store:
        assert store.verify() == []
        epochs = {b.partition_leader_epoch for b in store.partition_of("orders", 1).batches()}
        assert epochs == {0, 5}


def test_a_batch_encoded_at_offset_0_differs_only_outside_its_checksum() -> None:
    """What the commit relies on, with the encoder itself: the batch at base offset B and epoch E is
    the batch at 0 and 0 with bytes 0..8 and 12..16 set, whatever the codec."""
    from segstore_kafka import arrowappend, arrowstage
    from segstore_kafka.partition import KafkaConfig, encode_columns

    @given(st.sampled_from(CODECS), st.integers(0, 2**62), st.integers(0, 2**31 - 1))
    @settings(max_examples=40, deadline=None)
    def check(codec: str, base: int, epoch: int) -> None:
        config = KafkaConfig.from_mapping({"compression.type": codec})
        plan = arrowappend.plan(staged_table(30, 0, 1).cast(pa.schema([
            ("topic", pa.string()), ("partition", pa.int32()), ("key", pa.binary()), ("value", pa.binary()),
            ("timestamp", pa.timestamp("ms", tz="UTC"))])).combine_chunks().to_batches()[0])
        columns, rows = plan.columns(0), plan.groups[0][2]
        at_zero = bytearray(encode_columns(config, columns, rows, base_offset=0, leader_epoch=0, now=0))
        placed = encode_columns(config, columns, rows, base_offset=base, leader_epoch=epoch, now=0)
        arrowstage.BASE_OFFSET.pack_into(at_zero, arrowstage.BASE_OFFSET_AT, base)
        arrowstage.LEADER_EPOCH.pack_into(at_zero, arrowstage.LEADER_EPOCH_AT, epoch)
        assert bytes(at_zero) == placed

    check()


@pytest.mark.parametrize("case", ["no times", "log append time", "config changed"])
def test_rows_the_encoding_cannot_hold_are_appended_as_before(tmp_path: Path, case: str) -> None:
    """Rows whose batches depend on the append (no time: the append's; a LogAppendTime topic) are not
    encoded, and an encoding made under another config than the store's at the commit is not taken:
    either way the store is the one the rows' append leaves."""
    config = {"compression.type": "lz4", "segment.bytes": "8000"}
    encode_config = None
    if case == "log append time":
        config["message.timestamp.type"] = "LogAppendTime"
    if case == "config changed":
        encode_config = {**config, "compression.type": "zstd"}
    tables = [staged_table(300, 0, 2, timestamps=case != "no times")]
    encoded = commit(tmp_path / "a", config, tables, encode=True, encode_config=encode_config)
    assert encoded == [case == "config changed"]
    commit(tmp_path / "b", config, tables, encode=False)
    if case == "config changed":
        assert files_of(tmp_path / "a" / "store") == files_of(tmp_path / "b" / "store")
    else:   # the append's own time in each: the records, not the bytes
        def read(path: Path) -> list[tuple]:
            with segstore.open(str(path), "kafka") as store:
                return [(r.partition, r.offset, r.key, r.value) for r in store.scan()]
        assert read(tmp_path / "a" / "store") == read(tmp_path / "b" / "store")


def test_a_refused_topic_in_an_encoded_file_appends_nothing(tmp_path: Path) -> None:
    """The commit checks every encoded file's topics and partitions before the first append, as it
    checks staged rows: a refusal leaves the store as it was and the staging removed."""
    config: dict[str, str] = {}
    seed(tmp_path / "store", config)
    before = files_of(tmp_path / "store")
    good = staged_table(50, 0, 2)
    bad = good.set_column(0, "topic", pa.array(["no/slash"] * good.num_rows, pa.string()))
    with pytest.raises(InvalidTopicError):
        commit(tmp_path, config, [good, bad], encode=True)
    assert files_of(tmp_path / "store") == before
    assert not os.path.exists(tmp_path / "staging")


def test_an_encoding_of_another_staged_file_is_not_taken(tmp_path: Path) -> None:
    """An encoding is taken only for a staged file of the size it was read at; one beside a file of
    another size (a file replaced since) is left aside and the file's rows are appended."""
    options = WriteOptions(path=str(tmp_path / "store"), format="kafka")
    job = StagedJob.start(options, "job", local_root=str(tmp_path / "staging"))
    first = stage(job, 0, staged_table(40, 0, 1))
    ahead = prepare_staged(options, first.path)
    assert ahead is not None and ahead.size == os.path.getsize(first.path)
    assert len(list(ahead.encoded.chunks)) == len(ahead.encoded.manifest["batches"])
    second = stage(job, 0, staged_table(41, 100, 1))      # the same name, other rows
    job.commit([second], {second.path: ahead})
    with segstore.open(str(tmp_path / "store"), "kafka") as store:
        assert [r.key for r in store.scan()] == [f"k{i}".encode() for i in range(100, 141)]


def _request(options: WriteOptions, job: StagedJob, **more: Any) -> dict[str, Any]:
    return {"options": {"path": options.path, "format": "kafka"}, "root": job.root, "jobDir": job.job_dir,
            **more}


def test_the_driver_prepares_each_file_as_it_comes_and_commits_them(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM writer's requests to one worker child: ``write_prepare`` of each task's file as the task
    commits (kept in the child, never the store touched), then ``write_commit`` appends them encoded;
    past the budget a file is left to the commit's rows.  The store is ``append_arrow``'s of the rows."""
    options = WriteOptions(path=str(tmp_path / "store"), format="kafka")
    job = StagedJob.start(options, "job", local_root=str(tmp_path / "staging"))
    tables = [staged_table(300, 0, 2), staged_table(200, 300, 2), staged_table(100, 500, 2)]
    staged = [stage(job, task, table) for task, table in enumerate(tables)]
    sizes = [os.path.getsize(part.path) for part in staged]
    monkeypatch.setattr(bridge, "PREPARE_BUDGET", sizes[2] + sizes[0])
    answers = [bridge.write_prepare(_request(options, job, staged=[p.partition_id, p.path, p.rows]))
               for p in (staged[2], staged[0], staged[1])]        # in the order the tasks ended
    assert answers == [{"prepared": True}, {"prepared": True}, {"prepared": False}]
    assert not os.path.exists(options.path)        # nothing written before the commit
    assert bridge._preparing is not None
    assert set(bridge._preparing.futures) == {staged[0].path, staged[2].path}
    taken: list[str] = []
    real = StagedJob._take_prepared

    def spy(store: Any, part: StagedWrite, prepared: Any) -> Any:
        found = real(store, part, prepared)
        if found is not None:
            taken.append(part.path)
        return found

    monkeypatch.setattr(StagedJob, "_take_prepared", staticmethod(spy))
    bridge.write_commit(_request(options, job, staged=[[p.partition_id, p.path, p.rows] for p in staged]))
    assert taken == [staged[0].path, staged[2].path] and bridge._preparing is None
    assert not os.path.exists(job.root)
    with segstore.open(str(tmp_path / "reference"), "kafka", "a") as store:
        from segstore.spark.datasource import staged_columns

        for table in tables:        # the commit appends file by file, in partition order
            store.append_arrow(staged_columns(table, options))
    assert files_of(tmp_path / "store") == files_of(tmp_path / "reference")


def test_an_abort_drops_what_was_prepared(tmp_path: Path) -> None:
    """``write_abort`` after prepares: the encodings are dropped, the staging removed, no store made;
    and a later job's commit in the same child never takes an earlier job's encodings."""
    options = WriteOptions(path=str(tmp_path / "store"), format="kafka")
    job = StagedJob.start(options, "job1", local_root=str(tmp_path / "staging"))
    part = stage(job, 0, staged_table(50, 0, 1))
    prepared = bridge.write_prepare(_request(options, job, staged=[0, part.path, part.rows]))
    assert prepared == {"prepared": True}
    bridge.write_abort(_request(options, job))
    assert bridge._preparing is None and not os.path.exists(job.root) and not os.path.exists(options.path)
    job2 = StagedJob.start(options, "job2", local_root=str(tmp_path / "staging"))
    other = stage(job2, 0, staged_table(20, 100, 1))
    prepared = bridge.write_prepare(_request(options, job2, staged=[0, other.path, other.rows]))
    assert prepared == {"prepared": True}
    job3 = StagedJob.start(options, "job3", local_root=str(tmp_path / "staging"))
    third = stage(job3, 0, staged_table(30, 200, 1))
    bridge.write_commit(_request(options, job3, staged=[[0, third.path, third.rows]]))
    assert bridge._preparing is None         # job2's encodings dropped, not appended
    with segstore.open(str(tmp_path / "store"), "kafka") as store:
        assert [r.key for r in store.scan()] == [f"k{i}".encode() for i in range(200, 230)]


@pytest.mark.spark
def test_a_spark_write_leaves_the_store_append_arrow_of_its_rows_leaves(spark, writer,  # noqa: F811
                                                                        tmp_path: Path) -> None:
    """End to end, each writer: two tasks (two slices of the rows, in order) stage their files (the JVM
    writer's driver encodes each as it comes in, the commit sets the offsets); the store is
    ``append_arrow``'s of the same rows, byte for byte."""
    config = {"compression.type": "zstd", "segment.bytes": "6000", "index.interval.bytes": "1000"}
    rows = staged_table(600, 0, 3).combine_chunks()
    halves = [rows.slice(0, 300), rows.slice(300)]
    seed(tmp_path / "store", config)
    schema = "topic string, partition int, key string, value binary, timestamp timestamp"
    frame = spark.createDataFrame(spark.sparkContext.parallelize(rows.to_pylist(), 2), schema)
    frame.write.format("segstore").option("writer", writer).option("format", "kafka") \
        .option("config", json.dumps(config)).mode("append").save(str(tmp_path / "store"))
    seed(tmp_path / "reference", config)
    from segstore.spark.datasource import staged_columns

    options = WriteOptions(path="unused", format="kafka")
    with segstore.open(str(tmp_path / "reference"), "kafka", "a", **config) as store:
        store.append_arrow(pa.concat_tables([staged_columns(half, options) for half in halves]))  # type: ignore[misc]
    assert files_of(tmp_path / "store") == files_of(tmp_path / "reference")
