"""RocketMQ 5.x store files (issue 16): checkpoint fields, v2 messages, batch consume queue, timer store.

Sources: apache/rocketmq tag rocketmq-all-5.3.0; each test names the file and method it follows.
Files a 5.x broker writes that segstore does not write itself are laid out by the independent writer in
``tests/rocketmq_broker_files.py`` (from those sources), since no 5.x broker runs here.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import segstore

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200,
         "maxHashSlotNum": 64, "maxIndexNum": 256}


def _checkpoint(path: Path) -> tuple[int, int, int, int, int]:
    # store/.../StoreCheckpoint.java flush: five big-endian longs at 0, 8, 16, 24, 32
    return struct.unpack_from(">5q", (path / "checkpoint").read_bytes())


def _append(path: Path, version: str, n: int) -> list[int]:
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion=version, **SMALL) as store:
        return [store.append({"topic": "abc", "queue_id": i % 2, "body": b"m%d" % i}).position
                for i in range(n)]


@pytest.mark.parametrize("version", ["5.0.0", "5.3.0"])
def test_5x_recovery_sets_confirm_phy_offset(tmp_path: Path, version: str) -> None:
    """CommitLog.recoverNormally / recoverAbnormally (not in controller mode): setConfirmOffset(
    lastValidMsgPhyOffset), the start of the last valid message; StoreCheckpoint.flush writes it at
    32.  DefaultMessageStore.load reads masterFlushedOffset back and nothing offline changes it."""
    path = tmp_path / "s"
    first = _append(path, version, 3)      # a new store: nothing to recover, the field stays 0
    assert _checkpoint(path)[4] == 0
    second = _append(path, version, 4)     # opening recovered the 3 messages: the last one's start
    assert _checkpoint(path)[4] == first[-1]
    data = bytearray((path / "checkpoint").read_bytes())
    data[24:32] = struct.pack(">q", 777)   # as a slave's sync left it
    (path / "checkpoint").write_bytes(bytes(data))
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion=version, **SMALL) as store:
        store.append({"topic": "abc", "queue_id": 0, "body": b"x"})
        store.abandon()                    # a crash: the abort file stays, the checkpoint unflushed
    with segstore.open(path, "rocketmq", mode="a", rocketmqVersion=version, **SMALL):
        pass                               # recoverAbnormally walks to the message of the crashed run
    cp = _checkpoint(path)
    assert cp[3] == 777
    with segstore.open(path, "rocketmq") as store:
        last = max(m.physical_offset for m in store.scan())
    assert cp[4] == last > second[-1]


def test_4x_store_leaves_the_5x_fields_alone(tmp_path: Path) -> None:
    """A 4.x StoreCheckpoint has three fields; the bytes from 24 stay as they were (zero)."""
    path = tmp_path / "s"
    _append(path, "4.9.7", 3)
    _append(path, "4.9.7", 1)
    assert _checkpoint(path)[3:] == (0, 0)
