"""A round trip of a store of 1,000,000 small messages, both directions, compared byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import segstore
from segstore.convert import convert

MESSAGES = 1_000_000
APPEND_BATCH = 20_000
CONFIG = {"mappedFileSizeCommitLog": 32 << 20, "messageIndexEnable": False}


def commitlog_digest(store_dir: Path) -> tuple[int, str]:
    """``(data end, sha256 of the commitlog bytes up to it)``."""
    with segstore.open(store_dir, "rocketmq") as store:
        end = store.commitlog.end
    digest = hashlib.sha256()
    for f in sorted((store_dir / "commitlog").iterdir()):
        base = int(f.name)
        if base < end:
            digest.update(f.read_bytes()[:end - base])
    return end, digest.hexdigest()


@pytest.mark.slow
def test_million_messages_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    with segstore.open(src, "rocketmq", "a", **CONFIG) as store:
        for start in range(0, MESSAGES, APPEND_BATCH):
            store.append_batch([{"topic": f"T{i % 3}", "queue_id": i % 4, "body": b"m%d" % i,
                                 "born_timestamp": 1_700_000_000_000 + i,
                                 "store_timestamp": 1_700_000_000_000 + i}
                                for i in range(start, start + APPEND_BATCH)])
    kafka, back = tmp_path / "kafka", tmp_path / "back"
    report = convert(src, kafka, to="kafka")
    assert report.messages == MESSAGES
    # Message i goes to topic T(i % 3), queue i % 4: twelve queues, one per i % 12.
    expected = {(f"T{k % 3}", k % 4): (0, len(range(k, MESSAGES, 12))) for k in range(12)}
    with segstore.open(kafka, "kafka") as store:
        assert {key: store.offset_range(*key) for key in expected} == expected
    again = convert(kafka, back, to="rocketmq", config={"messageIndexEnable": False})
    assert again.messages == MESSAGES
    assert commitlog_digest(back) == commitlog_digest(src)
    with segstore.open(back, "rocketmq") as store:
        assert {key: store.offset_range(*key) for key in expected} == expected
