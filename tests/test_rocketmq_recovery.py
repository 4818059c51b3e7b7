"""Checkpoint file, and recovery after clean and unclean shutdowns."""

from __future__ import annotations

import json

import pytest

from segstore import files
from segstore.errors import TruncatedDataError
from segstore_rocketmq.checkpoint import FILE_SIZE, Checkpoint, CheckpointFile, check

from conftest import FIXTURES

ROCKETMQ = FIXTURES / "rocketmq"


def _store_line(name: str) -> dict:
    with open(ROCKETMQ / name / "dump.jsonl", encoding="utf-8") as f:
        return next(d for d in map(json.loads, f) if d["type"] == "store")


@pytest.mark.parametrize("name", ["basic", "abort"])
def test_checkpoint_fields_equal_the_brokers(name):
    raw = _store_line(name)["checkpointRaw"]
    cp = CheckpointFile(str(ROCKETMQ / name / "store" / "checkpoint")).value
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        raw["physicMsgTimestamp"], raw["logicsMsgTimestamp"], raw["indexMsgTimestamp"])
    data = files.read_bytes(ROCKETMQ / name / "store" / "checkpoint")
    assert check(data, path="checkpoint") == []
    assert cp.pack() == data


def test_checkpoint_min_timestamps():
    cp = Checkpoint(10_000, 7_000, 2_000)
    assert cp.min_timestamp == 4_000 and cp.min_timestamp_index == 2_000
    assert Checkpoint(1_000, 5_000).min_timestamp == 0


def test_checkpoint_5x_fields_tolerated_and_short_file_rejected():
    cp = Checkpoint(1, 2, 3, 4, 5)
    assert Checkpoint.unpack(cp.pack()) == cp
    assert Checkpoint.unpack(cp.pack()[:24]) == Checkpoint(1, 2, 3)
    with pytest.raises(TruncatedDataError):
        Checkpoint.unpack(b"\x00" * 10, path="cp")


def test_checkpoint_check_names_positions():
    data = bytearray(Checkpoint(1, 2, 3).pack())
    data[100] = 7
    data[8] = 0x80
    problems = check(bytes(data), path="cp")
    assert (100, "expected zeros after byte 40, found 0x07") in problems
    assert any(pos == 8 and "logicsMsgTimestamp" in msg for pos, msg in problems)
    assert check(bytes(data[:50]), path="cp")[0][0] == 50


def test_checkpoint_file_round_trip(tmp_path):
    path = str(tmp_path / "checkpoint")
    cpf = CheckpointFile(path, writable=True)
    cpf.value.physic_msg_timestamp = 123
    cpf.value.index_msg_timestamp = 9
    cpf.flush()
    cpf.close()
    assert files.file_size(path) == FILE_SIZE
    assert CheckpointFile(path).value == Checkpoint(123, 0, 9)
