"""Round trips of every compat fixture (files written by the real brokers) through the converter.

RocketMQ -> Kafka -> RocketMQ must give back the broker's commitlog byte for byte
(every field of every message, commitlog order across topics, BLANKs) and the
same consume queues; Kafka -> RocketMQ -> Kafka every record (offset, timestamp,
key, value, headers) with its batch's transaction and control flags.  The Kafka
output must read in kafka-python, batch by batch, and verify clean.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, ROCKETMQ_FIXTURES
from kafka.record.memory_records import MemoryRecords

import segstore
from segstore import cli
from segstore.convert import convert
from segstore.convert.mapping import NONQUEUED_TOPIC, came_from_rocketmq
from segstore.convert.pipeline import JOURNAL_NAME, kafka_entry_of

#: Small index files: the fixtures' own sizes (the store cannot read them back from disk).
ROCKETMQ_CONFIG = {"maxHashSlotNum": 64, "maxIndexNum": 256}
#: A Kafka source carries no commitlog file size; a small one keeps the new store small.
KAFKA_TO_ROCKETMQ_CONFIG = {**ROCKETMQ_CONFIG, "mappedFileSizeCommitLog": 1 << 20}


def rocketmq_store(name: str) -> Path:
    return FIXTURES / "rocketmq" / name / "store"


def kafka_partition(name: str) -> Path:
    return FIXTURES / "kafka" / name / "topic-0"


def rocketmq_messages(path: Path) -> list[dict]:
    with segstore.open(path, "rocketmq") as store:
        return [store.to_json(m) | {"properties_order": list(m.properties)} for m in store.scan()]


def kafka_entries(path: Path) -> list:
    with segstore.open(path, "kafka") as store:
        return [kafka_entry_of(r) for r in store.scan()]


def tree_bytes(root: Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def kafka_python_records(log_dir: Path) -> list[tuple]:
    """Every record of every ``.log`` segment as kafka-python decodes it (CRC checked)."""
    out = []
    for log in sorted(log_dir.rglob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc(), f"{log}: kafka-python found a bad CRC"
            for r in batch:
                out.append((log.parent.name, r.offset, r.timestamp, r.key, r.value,
                            [(k, v) for k, v in r.headers]))
    return out


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_rocketmq_round_trip_is_byte_identical(name: str, tmp_path: Path) -> None:
    src = rocketmq_store(name)
    kafka_dir, back = tmp_path / "kafka", tmp_path / "back"
    there = convert(src, kafka_dir, to="kafka", verify=True)
    again = convert(kafka_dir, back, to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    expected = rocketmq_messages(src)
    assert there.messages == again.messages == len(expected) > 0
    assert rocketmq_messages(back) == expected
    with segstore.open(src, "rocketmq") as store:
        end = store.commitlog.end
    ours, theirs = tree_bytes(back, "commitlog"), tree_bytes(src, "commitlog")
    holding = sorted(name for name in theirs if int(name) < end)   # the broker may preallocate the next file
    assert sorted(ours) == holding
    for file_name in holding:
        valid = min(len(theirs[file_name]), end - int(file_name))
        assert ours[file_name][:valid] == theirs[file_name][:valid], f"commitlog {file_name} differs"
    with segstore.open(back, "rocketmq") as store:
        assert store.verify() == []
    assert consume_queues(back) == consume_queues(src)


@pytest.mark.parametrize("columnar", [True, False])
def test_a_trimmed_rocketmq_store_comes_back_whole_from_its_kafka_copy(tmp_path: Path, columnar: bool,
                                                                      monkeypatch) -> None:
    """A store whose oldest commitlog files retention deleted (RocketMQ 4.9.7
    ``DefaultMessageStore.deleteExpiredFiles``) starts its commitlog at a later file and its queues
    past 0 (``ConsumeQueue.correctMinOffset``).  Its Kafka copy keeps the queue offsets and the
    physical offsets (``rmq.physical_offset``); the way back starts the new store where the source
    starts, as a slave's store starts at its master's (``MappedFileQueue.getLastMappedFile(startOffset)``,
    ``ConsumeQueue.fillPreBlank``), so every message lands at its offsets again.  The way back used to
    start at 0 and stop at the first message with a ConversionError."""
    if not columnar:        # the entry path (RocketMQWriter, _append_stored), as without the C accelerator
        from segstore_rocketmq import arrowwrite

        monkeypatch.setattr(arrowwrite, "available", lambda: False)
    src = tmp_path / "src"
    shutil.copytree(rocketmq_store("basic"), src)
    with segstore.open(src, "rocketmq", mode="a", fileReservedTime=1, **ROCKETMQ_CONFIG) as store:
        store.retention(now_ms=1_900_000_000_000)
    with segstore.open(src, "rocketmq") as store:
        assert store.commitlog.min_offset > 0
        ranges = {(t, q): store.offset_range(t, q) for t in store.topics() for q in store.partitions(t)}
    assert any(start > 0 for start, _ in ranges.values())
    kafka_dir, back = tmp_path / "kafka", tmp_path / "back"
    convert(src, kafka_dir, to="kafka", verify=True)
    convert(kafka_dir, back, to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    assert rocketmq_messages(back) == rocketmq_messages(src)
    assert consume_queues(back) == consume_queues(src)
    with segstore.open(back, "rocketmq") as store:
        back_ranges = {(t, q): store.offset_range(t, q) for t in store.topics() for q in store.partitions(t)}
        assert back_ranges == ranges
        assert store.verify() == []
    ours, theirs = tree_bytes(back, "commitlog"), tree_bytes(src, "commitlog")
    assert sorted(ours) == sorted(theirs)[:len(ours)] and min(ours) == min(theirs)


def consume_queues(path: Path) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Every consume queue as ``(queue offset, physical offset)`` pairs."""
    with segstore.open(path, "rocketmq") as store:
        return {(t, q): [(m.queue_offset, m.physical_offset)
                         for m in store.read(t, q, store.offset_range(t, q)[0])]
                for t in store.topics() for q in store.partitions(t)}


@pytest.mark.parametrize("name", ROCKETMQ_FIXTURES)
def test_rocketmq_to_kafka_reads_in_kafka_python_and_verifies(name: str, tmp_path: Path) -> None:
    out = tmp_path / "kafka"
    convert(rocketmq_store(name), out, to="kafka", compression="gzip")
    with segstore.open(out, "kafka") as store:
        assert store.verify() == []
        ours = [(f"{r.topic}-{r.partition}", r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in store.scan()]
    assert sorted(kafka_python_records(out)) == sorted(ours)
    messages = rocketmq_messages(rocketmq_store(name))
    assert len(ours) == len(messages)
    queued = [m for m in messages if m["sys_flag"] & 0xC not in (0x4, 0xC)]
    # Each queue became a partition whose offsets are the queue offsets.
    with segstore.open(out, "kafka") as store:
        for m in queued:
            (record,) = store.read(m["topic"], m["queue_id"], m["queue_offset"], 1)
            assert record.offset == m["queue_offset"]
            assert record.value == __import__("base64").b64decode(m["body"])
            assert record.timestamp == m["born_timestamp"]
            assert record.key == (m["keys"][0].encode() if m["keys"] else None)
            assert came_from_rocketmq(record.headers)


def test_nonqueued_transactions_go_to_the_reserved_topic(tmp_path: Path) -> None:
    out = tmp_path / "kafka"
    convert(rocketmq_store("basic"), out, to="kafka")
    with segstore.open(out, "kafka") as store:
        side = [dict(r.headers) for r in store.read(NONQUEUED_TOPIC, 0)]
    flags = sorted(int(h.get("rmq.sys_flag", b"0")) & 0xC for h in side)
    assert flags == [0x4, 0xC]
    assert all(h["rmq.topic"] in (b"TopicA", b"TopicB") for h in side)


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_kafka_round_trip_reproduces_every_record(name: str, tmp_path: Path) -> None:
    src = kafka_partition(name)
    rmq, back = tmp_path / "rmq", tmp_path / "back"
    convert(src, rmq, to="rocketmq", verify=True, config=KAFKA_TO_ROCKETMQ_CONFIG)
    with segstore.open(rmq, "rocketmq") as store:
        assert store.verify() == []
    convert(rmq, back, to="kafka", verify=True, compression="lz4")
    expected = kafka_entries(src)
    assert kafka_entries(back / "topic-0") == expected
    assert len(expected) > 0
    assert len(kafka_python_records(back)) == len(expected)


def test_kafka_transaction_markers_are_hidden_from_rocketmq_consumers(tmp_path: Path) -> None:
    rmq = tmp_path / "rmq"
    convert(kafka_partition("txn"), rmq, to="rocketmq", config=KAFKA_TO_ROCKETMQ_CONFIG)
    entries = kafka_entries(kafka_partition("txn"))
    controls = [e for e in entries if e.control]
    with segstore.open(rmq, "rocketmq") as store:
        queued = list(store.read("topic", 0))
        stored = list(store.scan())
    assert controls and len(stored) == len(entries)
    assert len(queued) == len(entries) - len(controls)
    # Queue offsets are dense; each message keeps the Kafka offset it had.
    assert [m.queue_offset for m in queued] == list(range(len(queued)))
    assert [int(m.properties["kafka.offset"]) for m in queued] == [e.offset for e in entries if not e.control]


def test_cli_convert_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, back = tmp_path / "k", tmp_path / "r"
    assert cli.main(["convert", str(rocketmq_store("basic")), str(out), "--to", "kafka", "--verify",
                     "--compression", "zstd"]) == 0
    assert "366 messages" in capsys.readouterr().out
    assert cli.main(["convert", str(out), str(back), "--to", "rocketmq", "--verify",
                     "--config", "maxHashSlotNum=64", "--config", "maxIndexNum=256"]) == 0
    assert cli.main(["verify", str(back), "-q"]) == 0
    assert (back / JOURNAL_NAME).is_file() and not os.path.exists(tmp_path / ".r.converting")


def test_kafka_output_indexes_equal_a_rebuild_from_the_logs(tmp_path: Path) -> None:
    """What Kafka's fixtures show (``recover_check``): recovery rebuilds the same index files."""
    out, rebuilt = tmp_path / "k", tmp_path / "rebuilt"
    convert(rocketmq_store("basic"), out, to="kafka",
            config={"segment.bytes": 65536, "index.interval.bytes": 600})
    shutil.copytree(out, rebuilt)
    indexes = sorted(p.relative_to(rebuilt) for p in rebuilt.rglob("*")
                     if p.suffix in (".index", ".timeindex"))
    assert len(indexes) > 2 * 9                  # several segments in some partitions
    for name in indexes:
        (rebuilt / name).unlink()
    with segstore.open(rebuilt, "kafka", "a") as store:
        assert store.recover()
    for name in indexes:
        assert (rebuilt / name).read_bytes() == (out / name).read_bytes(), name
