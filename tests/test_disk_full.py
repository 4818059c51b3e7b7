"""A full disk is a typed error, never a signal (issue 15): the RocketMQ writer used to die of SIGBUS.

Files written through a map keep their blocks reserved ahead of the writer
(``posix_fallocate``, :class:`segstore.files.MappedFile` ``reserve=True``, :meth:`reserve_to`): a
step at a time, so that disk use follows the data (issue 28: one message took 1.4 GB), and a batch
reserves everything it writes into (the files it rolls into, the steps it reaches) before it writes
a byte, so a full disk refuses the batch whole with :class:`StorageFullError`; the store stays
readable while the disk is full and takes appends again once there is room.  Kafka's ``.log`` is cut
back to the last whole batch when a write fails (no torn batch).

Two ways to a full disk: a real one (a 1 MiB tmpfs mounted in a user and mount
namespace, where the machine allows it), and ``posix_fallocate`` failing with ENOSPC
(monkeypatched at the files layer, the one module that creates files).
"""

from __future__ import annotations

import errno
import json
import os
import re
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


@pytest.mark.parametrize("sizes", ["small", "large"])
@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_a_full_tmpfs_is_a_typed_error_and_the_store_stays_readable(tmp_path, fmt, sizes):
    """``large``: every file bigger than the filesystem (as the brokers' default sizes are bigger than
    a small disk): written all the same, its blocks reserved step by step until the disk is full."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not _can_mount_tmpfs(mnt):
        pytest.skip("no user+mount namespace here to mount a small tmpfs (the ENOSPC tests below still run)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    size, filler = ("1m", 262144) if sizes == "small" else ("2m", 524288)
    script = (f"mount -t tmpfs -o size={size} tmpfs {mnt} && head -c {filler} /dev/zero > {mnt}/filler && "
              f"exec {sys.executable} {WRITER} {fmt} {mnt}/store {mnt}/filler {sizes}")
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


def test_a_full_disk_says_what_was_expected_and_what_was_found(tmp_path, no_space):
    """The errors' form (``path:pos: expected ..., found ...``); before: ``path:pos: no space left on the
    device (No space left on device)``, saying neither what the write needed nor in the house form."""
    mapped = files.MappedFile(str(tmp_path / "f"), 64 << 20, create=True, reserve=True)
    try:
        reserved = mapped.reserved
        no_space["full"] = True
        with pytest.raises(StorageFullError) as raised:
            mapped.reserve_to(reserved + 1)
    finally:
        mapped.close()
    err = raised.value
    assert (err.path, err.pos) == (str(tmp_path / "f"), reserved)
    assert re.fullmatch(r"expected room for \d+ more bytes, found no space left on the device \(.+\)",
                        err.message), err.message
    with pytest.raises(StorageFullError, match=r": expected room on the device, found no space left on the "
                                               r"device \(No space left on device\)$"):
        raise files._translate(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), str(tmp_path / "g"))


def test_a_new_rocketmq_stores_lock_file_on_a_full_disk_is_a_typed_error(tmp_path, monkeypatch):
    """The 4 bytes ``lock`` a new store's lock file holds (``WriterLock.content``) met ENOSPC as a bare
    ``OSError``: ``segstore write NEW --input ...`` then said ``<stdout>: expected room on the device``,
    naming its output, not the lock file.  Now a :class:`StorageFullError` naming the lock file, the
    lock let go (the store opens for writing once there is room) and the new store removed."""
    from conftest import cli_run

    real = os.pwrite
    full = {"on": True}

    def pwrite(fd: int, data: bytes, pos: int) -> int:
        if full["on"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)
    lock = files.WriterLock(tmp_path / "lock", b"lock")
    with pytest.raises(StorageFullError) as raised:
        lock.acquire()
    assert (raised.value.path, lock.held) == (str(tmp_path / "lock"), False)
    (tmp_path / "in.jsonl").write_text('{"topic": "T", "value": "x"}\n', encoding="utf-8")
    code, out, err = cli_run("write", tmp_path / "store", "--input", tmp_path / "in.jsonl")
    assert (code, out) == (1, "")
    assert err.startswith(f"{tmp_path / 'store' / 'lock'}: expected room on the device, found no space "
                          "left"), err
    assert not (tmp_path / "store").exists()
    full["on"] = False
    lock.acquire()      # not held by the failed acquire's descriptor
    lock.release()
    assert (tmp_path / "lock").read_bytes() == b"lock"


def test_a_preallocated_commitlog_file_that_gets_no_room_is_not_left_empty(tmp_path, monkeypatch):
    """RocketMQ's next commitlog file is made ahead of need (``AllocateMappedFileService``), sparse: where
    extending it found the disk full (a file system without sparse files), the append went on (exit 0) and
    left the 0-byte file, which RocketMQ 4.5.1 to 5.1.2 refuse to start on and ``verify`` reports.  The
    file is removed, as a reserving file's is (:meth:`MappedFile._allocate`)."""
    real = os.ftruncate
    spare = tmp_path / "s" / "commitlog" / f"{4096:020d}"

    def ftruncate(fd: int, size: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == str(spare) and size > 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, size)

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    spare.parent.mkdir(parents=True)
    with pytest.raises(StorageFullError):
        files.MappedFile(str(spare), 4096, create=True).close()
    assert not spare.exists()
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **CONFIG) as store:
        store.append({"topic": "T", "body": b"x"})
    assert not spare.exists()
    with segstore.open(tmp_path / "s") as store:
        assert [m.body for m in store.scan()] == [b"x"]
        assert store.verify() == []


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


# -- disk use follows the data (issue 28) ---------------------------------------------------------

def _blocks(path: Path) -> int:
    """Bytes of disk the files under ``path`` take (allocated blocks, reserved ones included)."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def test_one_message_in_a_new_rocketmq_store_takes_megabytes_not_gigabytes(tmp_path):
    """The broker's file sizes at its defaults (RocketMQ 4.9.7 ``MessageStoreConfig``: a 1 GiB commitlog
    file, 300,000-entry consume-queue files, IndexFiles of 5,000,000 slots and 20,000,000 entries), as
    sparse files, with blocks reserved only a step ahead of what is written: a whole slot table (the
    broker writes its slots anywhere) and a step of each file."""
    path = tmp_path / "s"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": ["k"]})
    sizes = {p.relative_to(path).parts[0]: p.stat().st_size for p in path.rglob("*") if p.is_file()}
    assert sizes["commitlog"] == 1 << 30 and sizes["consumequeue"] == 6_000_000
    assert sizes["index"] == 40 + 5_000_000 * 4 + 20_000_000 * 20
    assert _blocks(path) < 48 << 20       # was 1.4 GB: the slot table (20 MB), a step of the others
    with segstore.open(path) as store:
        assert [m.body for m in store.read("T", 0)] == [b"x"] and store.verify() == []


def test_one_record_in_a_new_kafka_partition_takes_kilobytes(tmp_path):
    """Kafka preallocates ``segment.index.bytes`` (10 MiB) for ``.index`` and ``.timeindex`` as sparse
    files (``AbstractIndex``: ``raf.setLength``); segstore reserves a step of each, not all of it."""
    path = tmp_path / "k"
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append({"topic": "t", "partition": 0, "value": b"x"})
        part = path / "t-0"
        assert (part / f"{0:020d}.index").stat().st_size == 10 << 20     # the broker's size while active
        assert _blocks(part) < 2 << 20


@pytest.mark.parametrize("plain", [True, False], ids=["fast path", "general path"])
@pytest.mark.parametrize("needs", ["commitlog step", "consume-queue step"])
def test_a_batch_past_the_reserved_step_is_refused_whole(tmp_path, no_space, plain, needs):
    """A batch that reaches past the blocks reserved in the active file reserves the next step first:
    a full disk refuses it whole (nothing written, in place or not), and it goes through once there
    is room."""
    config = {"mappedFileSizeCommitLog": 16 << 20, "mappedFileSizeConsumeQueue": 20 * 100_000,
              "maxHashSlotNum": 8, "maxIndexNum": 32}
    path = tmp_path / "s"
    extra = {} if plain else {"born_host": "10.0.0.1:9"}
    with RocketMQStore(str(path), "a", config, clock=lambda: 7) as store:
        store.append_batch([{"topic": "T", "body": b"x" * 100, **extra} for _ in range(3)])
        store.flush()
        before = (store.commitlog.end, dict(store.next_offsets), snapshot(path))
        no_space["full"] = True
        # 1 MiB of commitlog (its step: 1 MiB) / 4,000 consume-queue entries (its step: 125,000 bytes)
        size, count = (16 << 10, 70) if needs.startswith("commitlog") else (1, 7000)
        batch = [{"topic": "T", "body": b"y" * size, **extra} for _ in range(count)]
        with pytest.raises(StorageFullError, match="no space left"):
            store.append_batch(batch)
        store.flush()
        assert (store.commitlog.end, dict(store.next_offsets)) == before[:2]
        assert snapshot(path) == before[2]
        no_space["full"] = False
        results = store.append_batch(batch)
        assert [r.offset for r in results] == list(range(3, 3 + len(batch)))
        assert store.verify() == []


def test_an_index_file_reserves_its_entries_before_it_puts_them(tmp_path, no_space):
    """IndexFile puts write through the map: the entries' blocks are reserved first, a step at a time;
    a full disk refuses the put with nothing written."""
    from segstore.indexes.keyhash import IndexFile

    index = IndexFile.create(str(tmp_path / "i"), 64, 100_000)       # 2 MB of entries, steps of 125 KB
    index.put(list(range(10)), list(range(10)), [1_700_000_000_000] * 10)
    no_space["full"] = True
    count = index.header.index_count
    with pytest.raises(StorageFullError):
        index.put(list(range(10_000)), list(range(10, 10_010)), [1_700_000_000_000] * 10_000)
    assert index.header.index_count == count and index.file.first_nonzero(index.entry_pos(count)) is None
    no_space["full"] = False
    assert index.put(list(range(10_000)), list(range(10, 10_010)), [1_700_000_000_000] * 10_000) == 10_000
    index.close()
