"""The files-and-mmaps module and the error hierarchy."""

import errno
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segstore import errors, files


def test_error_renders_path_and_position():
    err = errors.CorruptDataError("expected magic 0xDAA320A7, found 0x00000000", "/x/commitlog/0", 208)
    assert str(err) == "/x/commitlog/0:208: expected magic 0xDAA320A7, found 0x00000000"
    assert isinstance(err, ValueError)
    assert str(errors.NotFoundError("no such topic", "/x")) == "/x: no such topic"
    import pickle

    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.pos == 208


def test_mapped_file_preallocates_sparse_and_persists(tmp_path):
    path = tmp_path / "f"
    mf = files.MappedFile(path, 1 << 20, create=True)
    assert os.path.getsize(path) == 1 << 20
    assert os.stat(path).st_blocks * 512 < 1 << 20  # sparse: not every block allocated
    mf.write(10, b"hello")
    mf.flush(0, 15)
    assert bytes(mf.view(10, 15)) == b"hello"
    with pytest.raises(errors.StorageIOError):
        mf.write((1 << 20) - 2, b"abc")
    mf.close()
    ro = files.MappedFile(path)
    assert ro.read(10, 5) == b"hello" and ro.size == 1 << 20
    arr = ro.array(np.dtype(">i4"), 0, 4)
    assert arr.tolist() == [0, 0, int.from_bytes(b"\0\0he", "big"), int.from_bytes(b"llo\0", "big")]
    del arr
    ro.close()


@given(st.integers(1, 40000), st.lists(st.integers(0, 39999), max_size=3), st.integers(0, 40000),
       st.sampled_from([4096, 8192, 1 << 20]))
@settings(max_examples=60, deadline=None)
def test_first_nonzero_of_a_file_of_written_zeros_equals_the_numpy_reference(tmp_path_factory, size, hits,
                                                                            start, window):
    """A file whose zeros are written out (no hole to skip: every window is read and told zero by one
    compare, a whole window's against zeros kept) answers as a search of its bytes does."""
    path = tmp_path_factory.mktemp("z") / "dense"
    data = bytearray(size)
    for at in hits:
        if at < size:
            data[at] = 1 + at % 255
    path.write_bytes(bytes(data))
    nonzero = [at for at in np.flatnonzero(np.frombuffer(bytes(data), np.uint8)).tolist() if at >= start]
    old = files.SCAN_WINDOW
    files.SCAN_WINDOW = window
    try:
        mf = files.MappedFile(path)
        try:
            assert mf.first_nonzero(start) == (nonzero[0] if nonzero else None)
            assert mf.first_nonzero(start, last=True) == (nonzero[-1] + 1 if nonzero else None)
        finally:
            mf.close()
    finally:
        files.SCAN_WINDOW = old


def test_mapped_file_too_short_for_reader(tmp_path):
    path = tmp_path / "short"
    path.write_bytes(b"x" * 10)
    with pytest.raises(errors.TruncatedDataError) as info:
        files.MappedFile(path, 100)
    assert info.value.pos == 10


@given(st.binary(max_size=300), st.integers(0, 300))
@settings(max_examples=40, deadline=None)
def test_mapped_file_zero_tail_reads_a_short_file_as_a_broker_maps_it(tmp_path_factory, data, extra):
    """``zero_tail``: a file shorter than asked reads as ``FileChannel.map`` at the full size shows it (its
    bytes, then zeros), and is not written: its length and bytes stay as they were."""
    path = tmp_path_factory.mktemp("z") / "short"
    path.write_bytes(data)
    size = len(data) + extra
    mf = files.MappedFile(path, size, zero_tail=True)
    try:
        assert mf.size == size and bytes(mf.view()) == data + bytes(extra)
        assert mf.short == (len(data) if extra else None)
        assert mf.pread(0, size) == data + bytes(extra)
    finally:
        mf.close()
    assert path.read_bytes() == data


def test_append_file(tmp_path):
    af = files.AppendFile(tmp_path / "a.log", create=True)
    assert af.append(b"abc") == 0
    assert af.append(b"defg") == 3
    assert bytes(af.view()) == b"abcdefg"
    af.truncate(5)
    assert af.size == 5 and af.read(0, 100) == b"abcde"
    af.flush()
    af.close()


def test_missing_file_is_typed(tmp_path):
    with pytest.raises(errors.NotFoundError) as info:
        files.read_bytes(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(info.value)
    assert files.list_dir(tmp_path / "nope") == []


def test_disk_full_is_typed(monkeypatch, tmp_path):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    af = files.AppendFile(tmp_path / "a.log", create=True)
    with pytest.raises(errors.StorageFullError) as info:
        af.append(b"x")
    assert info.value.path.endswith("a.log") and info.value.pos == 0
    assert af.size == 0  # nothing acknowledged


_DENIED = "expected permission to access the file, found none"
_READ_ONLY = "expected a writable file system, found a read-only one"


@pytest.mark.parametrize("code, said", [(errno.EROFS, _READ_ONLY), (errno.EACCES, _DENIED),
                                        (errno.EPERM, _DENIED)])
def test_a_read_only_mount_or_a_denied_file_says_what_was_expected(monkeypatch, tmp_path, code, said):
    """``segstore retention`` over a log dir on a read-only mount said only ``PATH: Read-only file system``:
    errors are ``path: expected ..., found ...`` like the rest."""
    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    (tmp_path / "a").write_bytes(b"x")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(errors.StorageIOError) as info:
        files.rename(tmp_path / "a", tmp_path / "b")
    assert info.value.message.startswith(said)
    assert os.strerror(code) in info.value.message and info.value.path.endswith("a")


def test_write_atomic_and_save_aside(tmp_path):
    path = tmp_path / "cp"
    files.write_atomic(path, "0\n1\n")
    files.write_atomic(path, "0\n2\n")
    assert path.read_text() == "0\n2\n" and not (tmp_path / "cp.tmp").exists()
    kept = files.save_aside(path, 2, b"torn")
    kept2 = files.save_aside(path, 2, b"again")
    assert open(kept, "rb").read() == b"torn" and kept != kept2 and open(kept2, "rb").read() == b"again"


def test_writer_lock_excludes_other_processes(tmp_path):
    lock = files.WriterLock(tmp_path / "lock", b"lock")
    lock.acquire()
    assert (tmp_path / "lock").read_bytes() == b"lock"
    code = (f"import sys; from segstore import files, errors\n"
            f"l = files.WriterLock({str(tmp_path / 'lock')!r})\n"
            "try:\n    l.acquire()\nexcept errors.StoreLockedError:\n    sys.exit(3)\n")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 3
    lock.release()
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_remove_missing_file_is_fine(tmp_path):
    files.remove(tmp_path / "never-there")
    (tmp_path / "f").write_bytes(b"x")
    files.remove(tmp_path / "f")
    assert not (tmp_path / "f").exists()


def test_read_text_names_the_first_bad_byte(tmp_path):
    (tmp_path / "t.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(errors.CorruptDataError) as info:
        files.read_text(tmp_path / "t.json")
    assert info.value.pos == 7 and "0xff" in str(info.value)


def test_in_memory_file_survives_its_writer_shrinking_it(tmp_path):
    path = tmp_path / "active.index"
    writer = files.MappedFile(path, 4096, create=True)
    writer.write(0, b"\x01" * 16)
    reader = files.MappedFile(path, in_memory=True)
    writer.resize(16)          # the writer trims, as Kafka does on roll and close
    assert reader.size == 4096
    assert bytes(reader.view(4000, 4096)) == bytes(96)   # a map would fault here (SIGBUS)
    assert reader.array(np.dtype(">i4"), 0, 4).tolist() == [0x01010101] * 4
    reader.close()
    writer.close()


@given(data=st.binary(max_size=300).map(lambda b: b.replace(b"\r", b"\n")), chunk=st.integers(1, 40))
@settings(max_examples=200)
def test_iter_lines_gives_every_line_and_its_position(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("lines") / "f"
    path.write_bytes(data)
    expected, pos = [], 0
    for line in data.split(b"\n"):
        expected.append((pos, line + b"\n"))
        pos += len(line) + 1
    expected[-1] = (expected[-1][0], expected[-1][1][:-1])
    if expected[-1][1] == b"":
        expected.pop()
    assert list(files.iter_lines(path, chunk=chunk)) == expected


def test_iter_lines_refuses_a_line_longer_than_the_limit(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"ok\n" + b"x" * 100 + b"\nend\n")
    with pytest.raises(errors.MessageTooLargeError) as info:
        list(files.iter_lines(path, chunk=8, max_line=50))
    assert (info.value.path, info.value.pos) == (str(path), 3)


def test_flush_reaches_the_disk_for_an_empty_file_and_a_whole_one(monkeypatch, tmp_path):
    """A file resized to 0 (a Kafka index trimmed on close) has no map, yet its flush still
    ``fdatasync``\\ s it: the truncation is part of what must be durable."""
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(files.os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    f = files.MappedFile(tmp_path / "x.index", 4096, create=True)
    f.write(0, b"abc")
    f.flush()
    assert len(synced) == 1
    f.resize(0)
    f.flush()
    assert len(synced) == 2
    f.close()
    assert (tmp_path / "x.index").stat().st_size == 0


def test_appends_start_the_writeback_of_each_whole_chunk_and_nothing_else(monkeypatch, tmp_path):
    """Every WRITEBACK_BYTES appended have their writeback started once, the whole chunks an
    append completes and no more; the bytes are the file's either way."""
    started = []
    monkeypatch.setattr(files, "WRITEBACK_BYTES", 1000)
    monkeypatch.setattr(files, "_sync_file_range", lambda fd, at, n, flags: started.append((at, n, flags)))
    f = files.AppendFile(tmp_path / "a.log", create=True)
    sizes = [300, 300, 300, 300, 2500, 1, 599]          # ends 300 600 900 1200 3700 3701 4300
    for i, n in enumerate(sizes):
        f.append(bytes([i]) * n)
    f.close()
    assert started == [(0, 1000, 2), (1000, 2000, 2), (3000, 1000, 2)]
    assert (tmp_path / "a.log").read_bytes() == b"".join(bytes([i]) * n for i, n in enumerate(sizes))


@pytest.mark.skipif(files._sync_file_range is None, reason="no sync_file_range here")
def test_the_writeback_start_is_linux_sync_file_range(tmp_path):
    f = files.AppendFile(tmp_path / "b.log", create=True)
    f.append(b"x" * (files.WRITEBACK_BYTES + 5))
    assert files._sync_file_range(f._fd, 0, files.WRITEBACK_BYTES, 2) == 0
    f.close()
    assert os.path.getsize(tmp_path / "b.log") == files.WRITEBACK_BYTES + 5
