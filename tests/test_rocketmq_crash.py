"""Crash tests: a real writer process killed with SIGKILL at random points, in both flush modes.

After each kill the store is opened for append (recovery runs); at the end every
acknowledged message is there (SYNC_FLUSH), what is read is exactly the prefix
of what was written (both modes), verify is clean, and the abort/lock files
behave as the broker's.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest
from rocketmq_crash_writer import CONFIG, message

import segstore
from segstore.errors import StoreLockedError

WRITER = os.path.join(os.path.dirname(__file__), "rocketmq_crash_writer.py")
KILLS = 12


def _run_and_kill(path: str, flush_type: str, acks_wanted: int) -> list[tuple[int, int]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, WRITER, path, flush_type],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    acked = []
    try:
        for line in proc.stdout:
            i, phy = map(int, line.split())
            acked.append((i, phy))
            if len(acked) >= acks_wanted:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
    assert acked, f"the writer acknowledged nothing: {err}"
    return acked


@pytest.mark.slow
@pytest.mark.parametrize("flush_type", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path, flush_type):
    rng = random.Random(20240229 if flush_type == "SYNC_FLUSH" else 7)
    path = str(tmp_path / "store")
    acked: list[tuple[int, int]] = []
    for _ in range(KILLS):
        acked += _run_and_kill(path, flush_type, rng.randint(1, 120))
        assert os.path.exists(os.path.join(path, "abort"))  # killed: no clean shutdown
        with segstore.open(path, format="rocketmq", mode="a", flushDiskType=flush_type, **CONFIG) as store:
            assert store.recovery_lines and "unclean" in store.recovery_lines[0]
    assert not os.path.exists(os.path.join(path, "abort"))
    with segstore.open(path, format="rocketmq", mode="r", **CONFIG) as store:
        bodies = [m.body for m in store.scan()]
        assert bodies == [message(i)["body"] for i in range(len(bodies))]  # an exact prefix
        acked_ids = {i for i, _ in acked}
        if flush_type == "SYNC_FLUSH":
            assert max(acked_ids) < len(bodies)
        by_phy = {m.physical_offset: m for m in store.scan()}
        for i, phy in acked:
            if i < len(bodies):
                assert by_phy[phy].body == message(i)["body"]
        for q in store.partitions("Crash"):
            start, _ = store.offset_range("Crash", q)
            assert [m.body for m in store.read("Crash", q, start)] == [
                message(i)["body"] for i in range(len(bodies)) if i % 2 == q
            ]
        sample = rng.sample(range(len(bodies)), 10)
        for i in sample:
            assert [m.body for m in store.query_by_key("Crash", f"k{i}")] == [message(i)["body"]]
        assert store.verify() == []


def test_lock_abort_and_readers(tmp_path):
    path = str(tmp_path / "store")
    writer = segstore.open(path, format="rocketmq", mode="a", **CONFIG)
    try:
        writer.append(message(0))
        assert os.path.exists(os.path.join(path, "abort"))
        with pytest.raises(StoreLockedError):
            segstore.open(path, format="rocketmq", mode="a", **CONFIG)
        with segstore.open(path, format="rocketmq", mode="r", **CONFIG) as reader:  # never blocked
            assert [m.body for m in reader.scan()] == [message(0)["body"]]
    finally:
        writer.close()
    assert not os.path.exists(os.path.join(path, "abort"))
    with open(os.path.join(path, "lock"), "rb") as f:
        assert f.read() == b"lock"
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as again:  # lock released
        assert again.recovery_lines[0].startswith("commitlog: clean shutdown")


def test_sync_flush_group_commit_from_threads(tmp_path):
    """Many threads appending in SYNC_FLUSH: every append returns durable, offsets unique and dense."""
    import threading

    path = str(tmp_path / "store")
    results = []
    with segstore.open(path, format="rocketmq", mode="a", flushDiskType="SYNC_FLUSH", **CONFIG) as store:

        def work(t: int) -> None:
            for n in range(25):
                r = store.append(message(t * 100 + n))
                assert store._flusher.flushed_offset >= r.position + r.size
                results.append(r)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 100
        assert sorted(r.position for r in results) == sorted({r.position for r in results})
        assert store.verify() == []
