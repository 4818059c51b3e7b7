"""A full disk is a typed error, never a signal (issue 15): the RocketMQ writer used to die of SIGBUS.

Files written through a map are created with their blocks reserved
(``posix_fallocate``, :class:`segstore.files.MappedFile` ``reserve=True``), and a batch
creates every file it rolls into before it writes a byte, so a full disk refuses the
batch whole with :class:`StorageFullError`; the store stays readable while the disk is
full and takes appends again once there is room.  Kafka's ``.log`` is cut back to the
last whole batch when a write fails (no torn batch).

Two ways to a full disk: a real one (a 1 MiB tmpfs mounted in a user and mount
namespace, where the machine allows it), and ``posix_fallocate`` failing with ENOSPC
(monkeypatched at the files layer, the one module that creates files).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from segstore_rocketmq.store import RocketMQStore
from test_rocketmq_append import snapshot

import segstore
from segstore import files
from segstore.errors import StorageFullError

WRITER = os.path.join(os.path.dirname(__file__), "disk_full_writer.py")


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {where}"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_a_full_tmpfs_is_a_typed_error_and_the_store_stays_readable(tmp_path, fmt):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not _can_mount_tmpfs(mnt):
        pytest.skip("no user+mount namespace here to mount a small tmpfs (the ENOSPC tests below still run)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    script = (f"mount -t tmpfs -o size=1m tmpfs {mnt} && head -c 262144 /dev/zero > {mnt}/filler && "
              f"exec {sys.executable} {WRITER} {fmt} {mnt}/store {mnt}/filler")
    proc = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]     # a SIGBUS is -7 / "Bus error"
    out = json.loads(proc.stdout)
    assert len(out["errors"]) >= 2 and all("StorageFullError" in e for e in out["errors"]), out["errors"]
    # While the disk was full: readable, verify clean, exactly what was acknowledged (no torn batch).
    assert "error" not in out["full_read"], out["full_read"]
    assert out["full_read"]["bodies"] == out["acked_when_full"] and len(out["acked_when_full"]) > 100
    assert [p for p in out["full_read"]["problems"] if "abort file" not in p] == []
    # After: every acknowledged message, at most the one batch whose index put found the disk full besides.
    after = out["after"]
    assert "error" not in after, after
    assert set(out["acked"]) <= set(after["bodies"]) and len(after["bodies"]) - len(out["acked"]) <= 3
    assert len(out["acked"]) > len(out["acked_when_full"])    # appends went on once there was room
    assert after["problems"] == []


CONFIG = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxMessageSize": 1024,
          "maxHashSlotNum": 8, "maxIndexNum": 32}


@pytest.fixture
def no_space(monkeypatch):
    """Turn ENOSPC on for every later ``posix_fallocate`` (as a full disk answers it)."""
    state = {"full": False}
    real = os.posix_fallocate

    def fallocate(fd: int, offset: int, length: int) -> None:
        if state["full"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    return state


@pytest.mark.parametrize("plain", [True, False], ids=["fast path", "general path"])
@pytest.mark.parametrize("needs", ["commitlog file", "consume-queue file"])
def test_a_batch_refused_for_space_changes_nothing(tmp_path, no_space, plain, needs):
    path = tmp_path / "s"
    extra = {} if plain else {"born_host": "10.0.0.1:9"}
    with RocketMQStore(str(path), "a", CONFIG, clock=lambda: 7) as store:
        store.append_batch([{"topic": "T", "body": b"x" * 100, **extra} for _ in range(3)])
        store.flush()
        before = (store.commitlog.end, dict(store.next_offsets), snapshot(path))
        no_space["full"] = True
        # 10 x 100-byte messages: 1 more file of 10 entries; 40 x 200 bytes: 2 more commitlog files
        size, count = (10, 10) if needs.startswith("consume") else (200, 40)
        batch = [{"topic": "T", "body": b"y" * size, **extra} for _ in range(count)]
        with pytest.raises(StorageFullError, match="no space left"):
            store.append_batch(batch)
        store.flush()
        assert (store.commitlog.end, dict(store.next_offsets)) == before[:2]
        left = snapshot(path)
        # only preallocated commitlog files (all zeros) may have come; no consume-queue file
        assert {k for k in left if k not in before[2]} <= {k for k in left if k.startswith("commitlog")}
        assert all(left[k] == before[2][k] for k in before[2])
        with segstore.open(str(path), format="rocketmq", mode="r", **CONFIG) as reader:   # readable meanwhile
            assert [m.body for m in reader.read("T", 0)] == [b"x" * 100] * 3
            assert [p for p in reader.verify() if not p.path.endswith("abort")] == []   # a live writer
        no_space["full"] = False
        results = store.append_batch(batch)
        assert [r.offset for r in results] == list(range(3, 3 + len(batch)))
        assert store.verify() == []


def test_a_mapped_file_that_gets_no_blocks_is_not_left_behind(tmp_path, no_space):
    no_space["full"] = True
    with pytest.raises(StorageFullError):
        files.MappedFile(str(tmp_path / "f"), 8192, create=True, reserve=True)
    assert not (tmp_path / "f").exists()      # a 0-byte file is what a crash leaves: none from us
    (tmp_path / "g").write_bytes(b"abc")
    with pytest.raises(StorageFullError):
        files.MappedFile(str(tmp_path / "g"), 8192, create=True, reserve=True)
    assert (tmp_path / "g").read_bytes() == b"abc"


def test_kafka_leaves_no_torn_batch_when_a_write_finds_the_disk_full(tmp_path, monkeypatch):
    """``pwrite`` writes part of a batch, then the disk is full: the ``.log`` is cut back to the last
    whole batch, reads and verify see only acknowledged batches, and appends go on once there is room."""
    path = str(tmp_path / "k")
    real = os.pwrite
    full = {"on": False}

    def pwrite(fd: int, data, pos: int) -> int:
        if full["on"]:
            real(fd, bytes(memoryview(data)[:len(data) // 2]), pos)   # half of it reaches the file
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "t", "partition": 0, "value": b"a%d" % i} for i in range(5)])
        log = next((tmp_path / "k" / "t-0").glob("*.log"))
        size = log.stat().st_size
        full["on"] = True
        with pytest.raises(StorageFullError):
            store.append_batch([{"topic": "t", "partition": 0, "value": b"b" * 500} for _ in range(5)])
        assert log.stat().st_size == size
        with segstore.open(path, format="kafka", mode="r") as reader:
            assert [m.value for m in reader.read("t", 0)] == [b"a%d" % i for i in range(5)]
            assert reader.verify() == []
        full["on"] = False
        results = store.append_batch([{"topic": "t", "partition": 0, "value": b"c"}])
        assert results[0].offset == 5
    with segstore.open(path, format="kafka", mode="r") as reader:
        assert [m.value for m in reader.read("t", 0)][-1] == b"c" and reader.verify() == []
