"""RocketMQ bodies a producer compressed, through a conversion: copied as stored by default (the way
back exact), or inflated for Kafka consumers with ``decompress_bodies`` (``--decompress-bodies``).
The codec and what RocketMQ 4.9.7's consumer decoder gives: tests/test_rocketmq_bodycodec.py."""

from __future__ import annotations

import zlib
from pathlib import Path

import lz4.frame
import pytest
from conftest import FIXTURES
from test_convert_pipeline import interrupted, scan_json

import segstore
from segstore.cli import main
from segstore.convert import convert
from segstore.errors import ConversionError, CorruptDataError

BODIES = [b"hello " * 2000, b"plain", b"x" * 5000, b"z" * 6000]
STORED = [(zlib.compress(BODIES[0]), 0x301), (BODIES[1], 0), (lz4.frame.compress(BODIES[2]), 0x101),
          (zlib.compress(BODIES[3]), 0x1)]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as writer:
        for n, (body, flag) in enumerate(STORED):
            writer.append({"topic": "T", "queue_id": n % 2, "body": body, "sys_flag": flag,
                           "keys": [f"k{n}"]})
    return path


def _records(path: Path) -> list[tuple[bytes, bytes | None]]:
    """(value, rmq.sys_flag header) of every record, in commitlog order."""
    with segstore.open(path) as kafka:
        records = [r for t in kafka.topics() for p in kafka.partitions(t) for r in kafka.read(t, p)]
    records.sort(key=lambda r: int(dict(r.headers)["rmq.physical_offset"]))
    return [(r.value, dict(r.headers).get("rmq.sys_flag")) for r in records]


def test_compressed_bodies_are_converted_as_stored_by_default_and_come_back_exact(store, tmp_path):
    convert(store, tmp_path / "kafka", to="kafka", verify=True)
    assert _records(tmp_path / "kafka") == [(b, str(f).encode() if f else None) for b, f in STORED]
    convert(tmp_path / "kafka", tmp_path / "back", to="rocketmq", verify=True)
    assert scan_json(tmp_path / "back", "rocketmq") == scan_json(store, "rocketmq")     # every field


@pytest.mark.parametrize("columns", [True, False], ids=["columnar", "message by message"])
def test_decompress_bodies_writes_what_consumers_read(store, tmp_path, monkeypatch, columns):
    if not columns:     # the path a --skip-corrupt run (or no C accelerator) takes
        from segstore_rocketmq.conversion import RocketMQConversion

        monkeypatch.setattr(RocketMQConversion, "arrow_streams", lambda self, source, options: None)
    report = convert(store, tmp_path / "kafka", to="kafka", decompress_bodies=True, verify=True)
    assert report.verified
    # the flag says what the value is now: 0x1 cleared (the type bits of 0x301 stay, as
    # MessageSysFlag.clearCompressedFlag leaves them)
    assert _records(tmp_path / "kafka") == [(BODIES[0], b"768"), (BODIES[1], None), (BODIES[2], b"256"),
                                            (BODIES[3], None)]


def test_the_way_back_from_inflated_bodies_is_refused_saying_why(store, tmp_path):
    convert(store, tmp_path / "kafka", to="kafka", decompress_bodies=True)
    with pytest.raises(ConversionError, match="--decompress-bodies"):
        convert(tmp_path / "kafka", tmp_path / "back", to="rocketmq")


def test_decompress_bodies_needs_a_source_with_compressed_bodies(tmp_path):
    with pytest.raises(ConversionError, match="RocketMQ"):
        convert(FIXTURES / "kafka" / "txn" / "topic-0", tmp_path / "out", to="rocketmq",
                decompress_bodies=True)


def test_a_body_that_does_not_inflate_stops_the_conversion_at_its_message(tmp_path):
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as writer:
        writer.append({"topic": "T", "queue_id": 0, "body": b"ok", "sys_flag": 0})
        at = writer.append({"topic": "T", "queue_id": 0, "body": b"not zlib", "sys_flag": 0x301})
    with pytest.raises(CorruptDataError) as caught:
        convert(path, tmp_path / "kafka", to="kafka", decompress_bodies=True)
    assert caught.value.pos == at.position and caught.value.path.endswith(f"{0:020d}")
    report = convert(path, tmp_path / "kafka", to="kafka", decompress_bodies=True, skip_corrupt=True,
                     force=True)
    assert report.messages == 1 and "not inflate" in " ".join(report.skipped)


def test_a_resume_keeps_the_setting_it_started_with(store, tmp_path, monkeypatch):
    out = tmp_path / "out"
    interrupted(monkeypatch, "BATCH_RECORDS", 1, 2, store, out, to="kafka", decompress_bodies=True)
    with pytest.raises(ConversionError, match="same conversion"):
        convert(store, out, to="kafka", resume=True)
    convert(store, out, to="kafka", resume=True, decompress_bodies=True, verify=True)
    assert [value for value, _ in _records(out)] == BODIES


def test_the_command_line_flag(store, tmp_path, capsys):
    assert main(["convert", str(store), str(tmp_path / "kafka"), "--to", "kafka", "--decompress-bodies"]) == 0
    assert [value for value, _ in _records(tmp_path / "kafka")] == BODIES
    # options that do not go together are usage errors (docs/conversion.md), nothing created
    kafka = str(FIXTURES / "kafka" / "txn" / "topic-0")
    for flag in (["--decompress-bodies"], ["--compression", "gzip"]):
        assert main(["convert", kafka, str(tmp_path / "out"), "--to", "rocketmq", *flag]) == 2
        assert "expected" in capsys.readouterr().err and not (tmp_path / "out").exists()
