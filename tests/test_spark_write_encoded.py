"""A Spark write whose tasks encode their rows (``encode_staged``) leaves the store ``append_arrow`` of the
same rows leaves, byte for byte; where the encoding cannot hold, the commit appends the rows as before.

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

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_support import spark, writer  # noqa: F401

import segstore
from segstore.errors import InvalidTopicError
from segstore.spark.datasource import ENCODED, ENCODED_MANIFEST, StagedJob, StagedWrite, encode_staged
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
    tasks encoded under) or not; returns which files were encoded."""
    options = WriteOptions(path=str(root / "store"), format="kafka",
                           config=tuple((k, v) for k, v in config.items()))
    job = StagedJob.start(options, "job", local_root=str(root / "staging"))
    staged = [stage(job, task, table) for task, table in enumerate(tables)]
    encoded = [False] * len(staged)
    if encode:
        at_encode = options if encode_config is None else WriteOptions(
            path=options.path, format="kafka", config=tuple(encode_config.items()))
        encoded = [encode_staged(at_encode, part.path) for part in staged]
    job.commit(staged)
    assert not os.path.exists(job.root)     # the staging is gone, encodings with it
    return encoded


@pytest.mark.parametrize("codec", CODECS)
def test_encoded_in_the_tasks_the_store_is_append_arrows_byte_for_byte(tmp_path: Path, codec: str) -> None:
    """Several partitions, rolls (``segment.bytes`` a few batches), a store holding records (one
    partition in leader epoch 5), three tasks: the same files as ``append_arrow`` of the rows."""
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
    """The manifest names the size of the staged file it was encoded from; an encoding beside a file
    of another size (a task attempt's leftovers) is left aside and the rows are appended."""
    options = WriteOptions(path=str(tmp_path / "store"), format="kafka")
    job = StagedJob.start(options, "job", local_root=str(tmp_path / "staging"))
    first = stage(job, 0, staged_table(40, 0, 1))
    assert encode_staged(options, first.path)
    manifest = json.loads(Path(first.path + ENCODED_MANIFEST).read_text())
    assert os.path.getsize(first.path + ENCODED) == sum(size for _, _, size, _ in manifest["batches"])
    second = stage(job, 0, staged_table(41, 100, 1))      # the same name, other rows
    job.commit([second])
    with segstore.open(str(tmp_path / "store"), "kafka") as store:
        assert [r.key for r in store.scan()] == [f"k{i}".encode() for i in range(100, 141)]


@pytest.mark.spark
def test_a_spark_write_leaves_the_store_append_arrow_of_its_rows_leaves(spark, writer,  # noqa: F811
                                                                        tmp_path: Path) -> None:
    """End to end, each writer: two tasks (two slices of the rows, in order) encode their files, the
    commit sets the offsets; the store is ``append_arrow``'s of the same rows, byte for byte."""
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
