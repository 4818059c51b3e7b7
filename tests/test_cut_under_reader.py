"""A file another process cuts while segstore reads it.

Kafka cuts its ``.log`` files in place: ``LogSegment.recover`` truncates a torn tail to the valid
bytes (``log.truncateTo(validBytes)``) and a follower replica truncating to its leader cuts the
segment holding the offset (``LogSegment.truncateTo``: ``FileRecords.truncateTo``, which is
``FileChannel.truncate``), Kafka 3.8.0 ``storage/.../internals/log/LogSegment.java``.  Kafka's own
reader is not hurt (``FileRecords`` reads through the channel); a reader through a map is twice:
``mmap`` refuses a length the file no longer has (a bare ``ValueError``), and touching a mapped
page past the file's new end kills the process (SIGBUS).  A reader sees the file as it is now,
and an error names the file and both sizes.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

import segstore
from segstore import files
from segstore.errors import TruncatedDataError

ROOT = Path(__file__).resolve().parent.parent
LOG = "00000000000000000000.log"


@pytest.fixture(params=[False, True], ids=["new-maps", "kept-maps"])
def maps(request):
    """Both ways a reader gets its maps: a new one per open, or kept across opens (Spark workers)."""
    if request.param:
        files.keep_read_maps()
    try:
        yield
    finally:
        files.stop_keeping_read_maps()


def _cut_before_mapping(monkeypatch, path: Path, size: int) -> None:
    """The next map of ``path`` finds it cut to ``size`` bytes: what another process's truncation
    between a reader's ``fstat`` and its ``mmap`` does."""
    real = mmap.mmap
    inode = os.stat(path).st_ino

    def cut_then_map(fd, length, *args, **kwargs):
        if os.fstat(fd).st_ino == inode:
            os.truncate(path, size)
        return real(fd, length, *args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", cut_then_map)


def test_an_append_file_cut_before_its_map_is_read_as_it_is_now(tmp_path, monkeypatch, maps):
    path = tmp_path / "a.log"
    path.write_bytes(b"x" * 10_000)
    reader = files.AppendFile(path)
    _cut_before_mapping(monkeypatch, path, 3000)
    assert bytes(reader.view()) == b"x" * 3000 and reader.size == 3000
    reader.close()


def test_an_append_file_cut_after_its_map_shrinks_its_view(tmp_path, monkeypatch, maps):
    """A reader that mapped the file before the cut gets a map of what is left, not the old one
    (whose pages past the new end would fault)."""
    monkeypatch.setattr(files, "RESIZE_CHECK_SECONDS", 0)   # the length taken again at every view
    path = tmp_path / "a.log"
    path.write_bytes(b"x" * 3 * mmap.PAGESIZE)
    reader = files.AppendFile(path)
    assert len(reader.view()) == 3 * mmap.PAGESIZE
    os.truncate(path, 100)
    assert len(reader.view()) == reader.size == 100     # (the length first: the old map's pages fault)
    assert bytes(reader.view()) == b"x" * 100
    os.truncate(path, 0)
    assert bytes(reader.view()) == b"" and reader.size == 0
    path.write_bytes(b"y" * 500)    # grown again: a reader never sees more than it found at open
    assert bytes(reader.view()) == b"" and reader.size == 0
    reader.close()


def test_a_mapped_file_of_no_given_size_cut_before_its_map_is_mapped_as_it_is_now(tmp_path, monkeypatch,
                                                                                  maps):
    path = tmp_path / "f"
    path.write_bytes(b"z" * 10_000)
    _cut_before_mapping(monkeypatch, path, 10)
    mapped = files.MappedFile(path)
    assert mapped.size == 10 and bytes(mapped.view()) == b"z" * 10
    mapped.close()


def test_a_mapped_file_of_a_given_size_cut_before_its_map_is_a_typed_error(tmp_path, monkeypatch, maps):
    path = tmp_path / "f"
    path.write_bytes(b"z" * 10_000)
    _cut_before_mapping(monkeypatch, path, 10)
    with pytest.raises(TruncatedDataError) as info:
        files.MappedFile(path, 10_000)
    assert info.value.path == str(path) and info.value.pos == 10
    assert "expected at least 10000 bytes to map, found 10" in info.value.message


def _kafka_with_torn_tail(tmp_path: Path) -> tuple[Path, int]:
    """A partition of three records, its log ending in a torn batch (a length of 4096, 4012 bytes
    there); the size of its whole batches."""
    part = tmp_path / "logs" / "t-0"
    with segstore.open(part, format="kafka", mode="a") as store:
        for i in range(3):
            store.append({"topic": "t", "partition": 0, "value": b"v%d" % i})
    good = (part / LOG).stat().st_size
    with open(part / LOG, "ab") as log:
        log.write(b"\x00" * 8 + (4096).to_bytes(4, "big") + b"\x01" * 4000)
    return part, good


def test_a_kafka_log_recovery_cuts_while_a_reader_opens_it_reads_the_whole_batches(tmp_path, monkeypatch):
    """The broker's recovery cuts the torn tail between the reader's ``fstat`` of the ``.log`` and
    its map (segstore's ``dump`` beside a starting broker): the reader reads the three records,
    where it raised ``ValueError: mmap length is greater than file size``."""
    part, good = _kafka_with_torn_tail(tmp_path)
    _cut_before_mapping(monkeypatch, part / LOG, good)
    with segstore.open(tmp_path / "logs") as store:
        assert store.offset_range("t", 0) == (0, 3)
        assert [r.value for r in store.read("t", 0)] == [b"v0", b"v1", b"v2"]


_READ_PAST_THE_CUT = """
import os, sys, time, segstore
from segstore import files
from segstore.errors import SegstoreError
logs, log, good = sys.argv[1], sys.argv[2], int(sys.argv[3])
with segstore.open(logs) as store:
    os.truncate(log, good)      # a replica truncating to its leader while the store is open
    time.sleep(files.RESIZE_CHECK_SECONDS)
    try:
        print(sum(1 for _ in store.read("t", 0, int(sys.argv[4]))))
    except SegstoreError as err:
        print(type(err).__name__, err)
"""


@pytest.mark.parametrize("pure", ["0", "1"])
@pytest.mark.parametrize("start", [0, 3])
def test_a_kafka_log_cut_under_an_open_store_is_read_as_it_is_now_not_a_fatal_signal(tmp_path, pure, start):
    """A store opened (its active ``.log`` mapped whole) before a cut of five 64 KiB batches: a read
    of what is left gives it, a read from an offset that was cut says the file ends early; neither
    touches the pages past the file's end, which killed the process with SIGBUS."""
    part = tmp_path / "logs" / "t-0"
    with segstore.open(part, format="kafka", mode="a") as store:
        store.append({"topic": "t", "partition": 0, "value": b"a"})
    good = (part / LOG).stat().st_size
    with segstore.open(part, format="kafka", mode="a") as store:
        for _ in range(5):
            store.append({"topic": "t", "partition": 0, "value": os.urandom(65536)})
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}", "SEGSTORE_PURE_PYTHON": pure}
    proc = subprocess.run([sys.executable, "-c", _READ_PAST_THE_CUT, str(tmp_path / "logs"), str(part / LOG),
                           str(good), str(start)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    if start == 0:
        assert proc.stdout.strip() == "1"
    else:
        assert proc.stdout.startswith("TruncatedDataError")
        assert f"found the file ending at {good}" in proc.stdout
