"""A log directory's close: partitions closed in threads (each trimmed and flushed once, then the
checkpoints), the ones no thread could take (a capped address space refuses new threads) closed by
the caller, and the first partition's error raised once every partition is closed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from segstore_kafka import logdir
from segstore_kafka.checkpoints import read_offsets
from segstore_kafka.partition import Partition

import segstore
from segstore.errors import StorageIOError
from segstore.records import Message

PARTITIONS = 6
RECORDS = 5


def fill(path: Path) -> segstore.Store:
    """A log directory store holding RECORDS records in each of PARTITIONS partitions, left open."""
    store = segstore.open(path, format="kafka", mode="a")
    store.append_batch([Message("t", b"v" * 50, partition=p, timestamp=1)
                        for p in range(PARTITIONS)] * RECORDS)
    return store


def check_closed_cleanly(path: Path) -> None:
    """Every index trimmed to its entries, the checkpoints written, every record readable."""
    for index in list(path.glob("*/*.index")) + list(path.glob("*/*.timeindex")):
        assert index.stat().st_size < 1024, index      # trimmed, not the preallocated 10 MiB
    assert read_offsets(str(path / "recovery-point-offset-checkpoint")) == \
        {("t", p): RECORDS for p in range(PARTITIONS)}
    with segstore.open(path) as store:
        for p in range(PARTITIONS):
            assert [r.offset for r in store.read("t", p, 0)] == list(range(RECORDS))


@pytest.mark.parametrize("threads_that_start", [0, 1, 2, 100])
def test_partitions_no_thread_took_are_closed_by_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          threads_that_start: int) -> None:
    store = fill(tmp_path / "logs")
    start = threading.Thread.start
    started = []

    def capped(thread: threading.Thread) -> None:
        if len(started) >= threads_that_start:
            raise RuntimeError("can't start new thread")
        started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", capped)
    store.close()
    monkeypatch.undo()
    assert len(started) <= threads_that_start          # an idle thread takes the next partition
    check_closed_cleanly(tmp_path / "logs")


def test_a_partition_that_fails_to_close_is_raised_after_the_others_closed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = fill(tmp_path / "logs")
    close = Partition.close
    closed = []

    def failing(part: Partition) -> None:
        if part.partition == 3:
            raise StorageIOError("expected a disk that writes, found none", part.path)
        close(part)
        closed.append(part.partition)

    monkeypatch.setattr(Partition, "close", failing)
    with pytest.raises(StorageIOError, match="a disk that writes"):
        store.close()
    assert sorted(closed) == [p for p in range(PARTITIONS) if p != 3]
    assert not (tmp_path / "logs" / "recovery-point-offset-checkpoint").exists() or \
        ("t", 3) not in read_offsets(str(tmp_path / "logs" / "recovery-point-offset-checkpoint"))
    assert logdir.CLOSE_THREADS > 1
