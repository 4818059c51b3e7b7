"""The Kafka record codec against batches written by Apache Kafka 3.8's own code, and kafka-python.

Every ``.log`` under ``compat_fixtures/kafka/*/topic-0`` was written by Kafka's
``MemoryRecordsBuilder``/``LogSegment`` (see compat_fixtures/README.md); its
``dump.jsonl`` is the real code's view of every batch and record.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from segstore_kafka import batch as codec
from segstore_kafka.compression import COMPRESSION_NAMES

KAFKA = FIXTURES / "kafka"


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def _load(name: str) -> tuple[list[codec.RecordBatch], list[dict], list[dict]]:
    dump = [json.loads(line) for line in (KAFKA / name / "dump.jsonl").read_text().splitlines()]
    batches = []
    for log in sorted((KAFKA / name / "topic-0").glob("*.log")):
        batches.extend(codec.iter_batches(log.read_bytes(), path=str(log)))
    return (batches, [d for d in dump if d["type"] == "batch"], [d for d in dump if d["type"] == "record"])


def _spec_value(item: dict, name: str) -> bytes | None:
    if f"{name}_b64" in item:
        return base64.b64decode(item[f"{name}_b64"])
    value = item.get(name)
    return None if value is None else value.encode("utf-8")


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_every_batch_header_equals_kafkas_dump(name: str) -> None:
    batches, expected, _records = _load(name)
    assert len(batches) == len(expected)
    for batch, want in zip(batches, expected, strict=True):
        got = {
            "baseOffset": batch.base_offset, "lastOffset": batch.last_offset, "count": batch.record_count,
            "magic": batch.magic, "crc": batch.crc, "compression": batch.compression,
            "compressionId": COMPRESSION_NAMES.index(batch.compression),
            "timestampType": batch.timestamp_type, "maxTimestamp": batch.max_timestamp,
            "partitionLeaderEpoch": batch.partition_leader_epoch, "producerId": batch.producer_id,
            "producerEpoch": batch.producer_epoch, "baseSequence": batch.base_sequence,
            "lastSequence": batch.last_sequence, "isTransactional": batch.is_transactional,
            "isControl": batch.is_control, "position": batch.position, "sizeInBytes": batch.size,
            "baseTimestamp": batch.base_timestamp, "deleteHorizonMs": batch.delete_horizon_ms,
        }
        assert got == {key: want[key] for key in got}, f"batch at {batch.position}"
        assert batch.is_valid()


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_every_record_equals_kafkas_dump(name: str) -> None:
    batches, _expected, expected = _load(name)
    records = [(batch, record) for batch in batches for record in batch.records()]
    assert len(records) == len(expected)
    for (batch, record), want in zip(records, expected, strict=True):
        got = {
            "offset": record.offset, "timestamp": record.timestamp, "sequence": record.sequence,
            "sizeInBytes": record.size_in_bytes, "key_b64": _b64(record.key), "value_b64": _b64(record.value),
            "headers": [{"key": k, "value_b64": _b64(v)} for k, v in record.headers],
        }
        want_headers = [{"key": h["key"], "value_b64": h.get("value_b64")} for h in want["headers"]]
        assert got == {**{key: want.get(key) for key in got}, "headers": want_headers}
        if "controlType" in want:
            assert batch.control_type() == want["controlType"]
            assert codec.parse_control_record(record.key, record.value) == (
                want["controlType"], want["coordinatorEpoch"])


def _reencode(batch: codec.RecordBatch, spec_records: list[dict] | None = None) -> bytes:
    records = batch.records()
    if batch.is_control:
        kind, epoch = codec.parse_control_record(records[0].key, records[0].value)
        return codec.encode_control_batch(
            kind, base_offset=batch.base_offset, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, coordinator_epoch=epoch, timestamp=records[0].timestamp,
            partition_leader_epoch=batch.partition_leader_epoch)
    if spec_records is not None:  # LogAppendTime hides the create times: take them from the spec
        inputs = [(_spec_value(r, "key"), _spec_value(r, "value"), r["timestamp"],
                   [(h["key"], _spec_value(h, "value")) for h in r.get("headers", [])]) for r in spec_records]
    else:
        inputs = [(r.key, r.value, r.timestamp, r.headers) for r in records]
    return codec.encode_batch(
        inputs, base_offset=batch.base_offset, compression=batch.compression,
        partition_leader_epoch=batch.partition_leader_epoch, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional, timestamp_type=batch.timestamp_type,
        log_append_time=batch.max_timestamp)


# Kafka frames and compresses these exactly as segstore does; snappy-java's raw blocks differ from
# cramjam's encoder, so snappy batches are compared by content.
BYTE_IDENTICAL = ("none", "gzip", "lz4", "zstd")


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_reencoding_gives_kafkas_bytes(name: str) -> None:
    batches, _expected, _records = _load(name)
    spec = json.loads((KAFKA / name / "spec.json").read_text())
    spec_batches = spec["batches"] if batches[0].timestamp_type == codec.LOG_APPEND_TIME else None
    identical = 0
    for index, batch in enumerate(batches):
        out = _reencode(batch, spec_batches[index]["records"] if spec_batches else None)
        if batch.compression in BYTE_IDENTICAL:
            assert out == bytes(batch.data), f"{name} batch at {batch.position}"
            identical += 1
        else:
            again = next(codec.iter_batches(out))
            assert again.records() == batch.records()
            assert (again.base_offset, again.last_offset, again.max_timestamp, again.attributes) == (
                batch.base_offset, batch.last_offset, batch.max_timestamp, batch.attributes)
    assert identical or name == "snappy"


def test_log_append_time_batch_uses_max_timestamp_for_every_record() -> None:
    batches, _expected, _records = _load("logappendtime")
    for batch in batches:
        assert batch.timestamp_type == codec.LOG_APPEND_TIME
        assert {r.timestamp for r in batch.records()} == {batch.max_timestamp}


@pytest.mark.parametrize("compression", COMPRESSION_NAMES)
def test_kafka_python_reads_every_fixture_batch_we_reencode(compression: str) -> None:
    batches, _expected, _records = _load("uncompressed")
    for batch in batches:
        records = batch.records()
        out = codec.encode_batch([(r.key, r.value, r.timestamp, r.headers) for r in records],
                                 base_offset=batch.base_offset, compression=compression,
                                 producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                                 base_sequence=batch.base_sequence,
                                 partition_leader_epoch=batch.partition_leader_epoch)
        theirs = DefaultRecordBatch(out)
        assert theirs.validate_crc()
        assert (theirs.base_offset, theirs.last_offset_delta, theirs.max_timestamp, theirs.producer_id,
                theirs.base_sequence, theirs.compression_type) == (
            batch.base_offset, batch.last_offset_delta, batch.max_timestamp, batch.producer_id,
            batch.base_sequence, COMPRESSION_NAMES.index(compression))
        got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in theirs]
        assert got == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def test_kafka_python_walks_a_whole_fixture_log() -> None:
    for log in sorted((KAFKA / "txn" / "topic-0").glob("*.log")):
        theirs = MemoryRecords(log.read_bytes())
        ours = list(codec.iter_batches(log.read_bytes()))
        count = 0
        while theirs.has_next():
            their_batch = theirs.next_batch()
            assert their_batch.base_offset == ours[count].base_offset
            assert their_batch.is_control_batch == ours[count].is_control
            count += 1
        assert count == len(ours)


def test_fixture_logs_are_whole_valid_prefixes() -> None:
    for name in KAFKA_FIXTURES:
        for log in sorted((KAFKA / name / "topic-0").glob("*.log")):
            data = log.read_bytes()
            assert codec.valid_prefix(data, path=str(log)) == (len(data), None)


def _first_log(name: str) -> Path:
    return sorted((KAFKA / name / "topic-0").glob("*.log"))[0]


def test_header_scan_agrees_with_full_iteration() -> None:
    for name in KAFKA_FIXTURES:
        data = _first_log(name).read_bytes()
        pos = 0
        for batch in codec.iter_batches(data):
            header = codec.read_batch_header(data, pos)
            assert header == batch
            pos += header.size


@pytest.mark.parametrize("name", ["txn", "logappendtime", "uncompressed"])
def test_pure_python_path_gives_the_same_fixture_results(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = [(batch, batch.records(), _reencode(batch)) for batch in _load(name)[0]]
    monkeypatch.setattr(codec, "_decode_records", codec._decode_records_py)
    monkeypatch.setattr(codec, "_encode_records", codec._encode_records_py)
    for batch, records, encoded in fast:
        assert batch.records() == records
        assert _reencode(batch) == encoded
