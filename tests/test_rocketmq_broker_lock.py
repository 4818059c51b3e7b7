"""A running RocketMQ broker and a segstore writer keep out of each other's store.

rocketmq-all-4.9.7 ``DefaultMessageStore.start`` takes ``STORE/lock`` with
``lockFile.getChannel().tryLock(0, 1, false)``: a POSIX record lock on its first byte on Linux
(``fcntl(F_SETLK)``), which an ``flock`` neither sees nor blocks.  The child here takes that lock as the
JVM does (``fcntl.lockf`` on byte 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_run as run

import segstore
from segstore.errors import StoreLockedError

TRY_LOCK = "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)"


def _store(path: Path) -> Path:
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"x"} for _ in range(3)])
        store.commit_offset("g", "T", 0, 1)
    return path


def test_a_running_brokers_lock_keeps_writers_out(tmp_path):
    path = _store(tmp_path / "store")
    offsets = path / "config" / "consumerOffset.json"
    before = offsets.read_bytes()
    code = ("import fcntl, sys\n"
            f"f = open({str(path / 'lock')!r}, 'r+')\n"
            f"{TRY_LOCK}\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "locked\n"
        with pytest.raises(StoreLockedError) as info:
            segstore.open(path, format="rocketmq", mode="a")
        assert info.value.path == str(path / "lock") and "RocketMQ broker" in info.value.message
        status, out, err = run("consumers", path, "--group", "g", "--reset-offsets", "--to-latest",
                               "--execute")
        assert status != 0 and out == "" and "RocketMQ broker holds this lock" in err
        assert offsets.read_bytes() == before
        with segstore.open(path) as reader:             # readers take no lock
            assert reader.committed_offset("g", "T", 0) == 1
    finally:
        child.communicate("", timeout=60)
    with segstore.open(path, format="rocketmq", mode="a") as store:     # a broker that stopped holds none
        store.commit_offset("g", "T", 0, 3)


def test_a_broker_cannot_start_on_a_store_segstore_writes(tmp_path):
    path = _store(tmp_path / "store")
    code = ("import fcntl\n"
            f"f = open({str(path / 'lock')!r}, 'r+')\n"
            f"try:\n    {TRY_LOCK}\nexcept OSError:\n    print('refused')\nelse:\n    print('started')\n")
    with segstore.open(path, format="rocketmq", mode="a"):
        taken = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert taken.stdout == "refused\n"
    taken = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert taken.stdout == "started\n"
    assert os.path.getsize(path / "lock") == 4        # the broker's own 4 bytes, "lock"
