"""Every Kafka compat fixture (written by Kafka 3.8's own storage code) read and rewritten by segstore."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, KAFKA_FIXTURES, copy_writable
from segstore_kafka.batch import RECORD_BATCH_OVERHEAD, iter_batches
from segstore_kafka.checkpoints import read_leader_epochs
from segstore_kafka.compression import XERIAL_BLOCK_LENGTH, XERIAL_HEADER, decompress
from segstore_kafka.offsetindex import OffsetIndex
from segstore_kafka.partition import KafkaConfig, Partition
from segstore_kafka.timeindex import TimeIndex
from segstore_kafka.txnindex import TransactionIndex

import segstore
from segstore.cli import main

# zstd too: one level-3 frame without content size or checksum, flushed as a block and ended with
# an empty last block, is what zstd-jni 1.5.2 writes for Kafka.  Not snappy: the xerial framing is
# the same, but snappy-java 1.1.8.3's C++ snappy hashes 4-byte sequences into small tables
# (inputs under 16 KiB) from the top 14 bits of the product, cramjam's encoder from the top
# log2(table size) bits, so they choose different matches (see test_snappy_framing_is_kafkas).
BYTE_IDENTICAL = ("uncompressed", "logappendtime", "gzip", "lz4", "zstd")


def _dump(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "kafka" / name / "dump.jsonl").read_text().splitlines()]


def _partition_dir(name: str) -> Path:
    return FIXTURES / "kafka" / name / "topic-0"


def _expected_json(name: str) -> list[dict]:
    """The real dump's batch and record lines in the shape of ``segstore dump --json``: each batch's
    ``segment_base_offset`` the base offset of the segment the real dump lists it under, each record's
    ``log_start_offset`` 0 (no fixture has a ``log-start-offset-checkpoint``: ``LogLoader`` starts the
    log at the first segment's base)."""
    out = []
    batch = None
    segment = None
    for d in _dump(name):
        if d["type"] == "segment":
            segment = d["baseOffset"]
        elif d["type"] == "batch":
            batch = {"base_offset": d["baseOffset"], "last_offset": d["lastOffset"],
                     "position": d["position"],
                     "size": d["sizeInBytes"], "crc": d["crc"], "compression": d["compression"],
                     "magic": d["magic"], "producer_id": d["producerId"],
                     "producer_epoch": d["producerEpoch"],
                     "base_sequence": d["baseSequence"], "partition_leader_epoch": d["partitionLeaderEpoch"],
                     "is_transactional": d["isTransactional"], "is_control": d["isControl"],
                     "max_timestamp": d["maxTimestamp"], "base_timestamp": d["baseTimestamp"],
                     "delete_horizon_ms": d["deleteHorizonMs"], "segment_base_offset": segment}
            timestamp_type = d["timestampType"]
        elif d["type"] == "record":
            out.append({"topic": "topic", "partition": 0, "log_start_offset": 0, "offset": d["offset"],
                        "timestamp": d["timestamp"],
                        "timestamp_type": timestamp_type, "key": d["key_b64"], "value": d["value_b64"],
                        "headers": [{"key": h["key"], "value": h["value_b64"]} for h in d["headers"]],
                        "batch": batch})
    return out


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_dump_json_equals_the_real_dump(name: str) -> None:
    out = io.StringIO()
    assert main(["dump", str(_partition_dir(name)), "--format", "kafka", "--json"], out=out) == 0
    got = [json.loads(line) for line in out.getvalue().splitlines()]
    want = _expected_json(name)
    assert len(got) == len(want) == sum(1 for d in _dump(name) if d["type"] == "record")
    for g, w in zip(got, want, strict=True):
        assert g == w


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_detected_and_offsets(name: str) -> None:
    dump = _dump(name)
    with segstore.open(_partition_dir(name)) as store:
        assert store.format == "kafka"
        assert store.topics() == ["topic"] and store.partitions("topic") == [0]
        last = max(d["lastOffset"] for d in dump if d["type"] == "batch")
        assert store.offset_range("topic", 0) == (0, last + 1)
        assert store.verify() == []
        infos = store.segment_infos("topic", 0)
        assert [i["start_offset"] for i in infos] == [d["baseOffset"] for d in dump if d["type"] == "segment"]
        assert infos[-1]["end_offset"] == last + 1


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_translate_offset_and_find_by_timestamp_equal_the_real_code(name: str) -> None:
    part = Partition(str(_partition_dir(name)), KafkaConfig())
    segs = {seg.base: seg for seg in part.segments}
    checked = 0
    for d in _dump(name):
        if d["type"] == "offset_lookup":
            got = segs[d["segment"]].translate_offset(d["target"])
            assert (got._asdict() if got else None) == d["translateOffset"], d
            checked += 1
        elif d["type"] == "timestamp_lookup":
            got = segs[d["segment"]].find_offset_by_timestamp(d["target"], 0)
            want = d["findOffsetByTimestamp"]
            assert (None if got is None else [got.timestamp, got.offset, got.leader_epoch]) == \
                (None if want is None else [want["timestamp"], want["offset"], want["leaderEpoch"]]), d
            checked += 1
    part.close()
    assert checked >= 100


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_recover_rebuilds_indexes_equal_to_the_files(name: str, tmp_path: Path) -> None:
    part_dir = copy_writable(_partition_dir(name), tmp_path / "topic-0")
    checks = {d["segment"]: d for d in _dump(name) if d["type"] == "recover_check"}
    config = json.loads((FIXTURES / "kafka" / name / "spec.json").read_text())["config"]
    with segstore.open(part_dir, format="kafka", mode="a", **config) as store:
        assert store.recover() == []
    for base, check in checks.items():
        assert check["offsetIndexMatches"] and check["timeIndexMatches"]
        for suffix in (".index", ".timeindex", ".log"):
            assert (part_dir / f"{base:020d}{suffix}").read_bytes() == \
                (_partition_dir(name) / f"{base:020d}{suffix}").read_bytes(), (base, suffix)
    assert (part_dir / "leader-epoch-checkpoint").read_bytes() == \
        (_partition_dir(name) / "leader-epoch-checkpoint").read_bytes()


def _written(name: str, tmp_path: Path) -> Path:
    out = tmp_path / "topic-0"
    spec = FIXTURES / "kafka" / name / "spec.json"
    assert main(["write", str(out), "--format", "kafka", "--spec", str(spec)], out=io.StringIO()) == 0
    return out


@pytest.mark.parametrize("name", BYTE_IDENTICAL)
def test_write_spec_is_byte_identical(name: str, tmp_path: Path) -> None:
    out = _written(name, tmp_path)
    real = _partition_dir(name)
    names = sorted(p.name for p in real.iterdir())
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == names
    for file in names:
        assert (out / file).read_bytes() == (real / file).read_bytes(), file


@pytest.mark.parametrize("name", sorted(set(KAFKA_FIXTURES) - set(BYTE_IDENTICAL)))
def test_write_spec_of_compressed_partitions_decodes_the_same(name: str, tmp_path: Path) -> None:
    out = _written(name, tmp_path)
    real = _partition_dir(name)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        sorted(p.name for p in real.iterdir())
    for log in sorted(real.glob("*.log")):
        ours = list(iter_batches((out / log.name).read_bytes(), path=str(out / log.name)))
        theirs = list(iter_batches(log.read_bytes(), path=str(log)))
        assert [(b.base_offset, b.last_offset, b.compression, b.producer_id, b.is_control) for b in ours] == \
            [(b.base_offset, b.last_offset, b.compression, b.producer_id, b.is_control) for b in theirs]
        for a, b in zip(ours, theirs, strict=True):
            assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in a.records()] == \
                [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records()]
        base = int(log.stem)
        ours_idx = OffsetIndex.open(str(out / f"{log.stem}.index"), base, max_index_size=1 << 20).pairs()
        ours_time = TimeIndex.open(str(out / f"{log.stem}.timeindex"), base, max_index_size=1 << 20).pairs()
        if [b.position for b in ours] == [b.position for b in theirs]:
            assert ours_idx == OffsetIndex.open(str(real / f"{log.stem}.index"), base,
                                                max_index_size=1 << 20).pairs()
            assert ours_time == TimeIndex.open(str(real / f"{log.stem}.timeindex"), base,
                                               max_index_size=1 << 20).pairs()
        else:  # other compressed sizes: the entries must still be Kafka's rule over our own log
            by_position = {b.position: b.last_offset for b in ours}
            assert all(by_position.get(pos) == off for off, pos in ours_idx)
        assert TransactionIndex(str(out / f"{log.stem}.txnindex")).all() == \
            TransactionIndex(str(real / f"{log.stem}.txnindex")).all()
    assert read_leader_epochs(str(out / "leader-epoch-checkpoint")) == \
        read_leader_epochs(str(real / "leader-epoch-checkpoint"))


def _xerial_blocks(region: bytes) -> tuple[bytes, list[bytes]]:
    """The xerial header of a snappy record region and each of its blocks, decompressed on its own."""
    header, pos, blocks = region[:XERIAL_HEADER.size], XERIAL_HEADER.size, []
    while pos < len(region):
        (length,) = XERIAL_BLOCK_LENGTH.unpack_from(region, pos)
        end = pos + XERIAL_BLOCK_LENGTH.size + length
        blocks.append(decompress("snappy", header + region[pos:end]))
        pos = end
    return header, blocks


def test_snappy_framing_is_kafkas(tmp_path: Path) -> None:
    """Every snappy batch: the same xerial header and blocks, each block decoding to the same bytes
    (the raw snappy inside a block may choose other matches, see BYTE_IDENTICAL)."""
    out = _written("snappy", tmp_path)
    for log in sorted(_partition_dir("snappy").glob("*.log")):
        ours = list(iter_batches((out / log.name).read_bytes()))
        theirs = list(iter_batches(log.read_bytes()))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert _xerial_blocks(bytes(a.data[RECORD_BATCH_OVERHEAD:])) == \
                _xerial_blocks(bytes(b.data[RECORD_BATCH_OVERHEAD:]))
