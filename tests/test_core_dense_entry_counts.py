"""Consume-queue counts kept across a reader's opens (``dense.keep_entry_counts``, a Spark worker's):
a reader's queue ends where a new count of every slot ends it, whatever the writers did between
the opens (segstore/indexes/dense.py, ``_EntryCounts``)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segstore import files
from segstore.indexes import dense
from segstore.indexes.dense import CQ_DTYPE, ConsumeQueue

#: ten slots a file: a queue of a few dozen entries spans several files, all of them counted
FILE_SIZE = 10 * CQ_DTYPE.itemsize


@pytest.fixture
def counts(monkeypatch):
    """Counts kept, files quiet at once (their times are older than the quiet period), and a tally of
    the slot walks (``valid_entries`` calls) opens make."""
    kept = dense._EntryCounts(limit=1 << 10)
    kept.quiet_ns = 0
    monkeypatch.setattr(dense, "_counts", kept)
    walks = []
    real = dense.valid_entries

    def counting(slots):
        walks.append(len(slots))
        return real(slots)

    monkeypatch.setattr(dense, "valid_entries", counting)
    return SimpleNamespace(kept=kept, walks=walks)


def _entries(first: int, count: int) -> np.ndarray:
    rows = np.zeros(count, CQ_DTYPE)
    rows["offset"] = (first + np.arange(count)) * 100
    rows["size"] = 100
    return rows


def _append(directory, count: int) -> None:
    cq = ConsumeQueue(str(directory), "t", 0, FILE_SIZE, writable=True)
    cq.append_array(_entries(cq.max_offset, count))
    cq.flush()
    cq.close()


def _truncate(directory, offset: int) -> None:
    cq = ConsumeQueue(str(directory), "t", 0, FILE_SIZE, writable=True)
    cq.truncate(offset)
    cq.close()


def _read_end(directory) -> int:
    """A reader's open: where its queue ends."""
    cq = ConsumeQueue(str(directory), "t", 0, FILE_SIZE)
    try:
        return cq.max_offset
    finally:
        cq.close()


def _fresh_end(directory) -> int:
    """The same open with no count kept: every slot walked."""
    kept, dense._counts = dense._counts, None
    try:
        return _read_end(directory)
    finally:
        dense._counts = kept


def _clock_past(path) -> None:
    """Wait until the kernel's coarse clock, which stamps ``st_ctime``, has moved past ``path``'s: a
    write from now on stamps another time (a write in the same tick would not; the quiet period keeps
    that out of real counts, which this test's zero period does not)."""
    probe = f"{path}.probe"
    stamp = os.stat(path).st_ctime_ns
    while True:
        with open(probe, "wb"):
            pass
        if os.stat(probe).st_ctime_ns > stamp:
            os.remove(probe)
            return


def test_an_unchanged_queue_is_opened_again_without_walking_its_slots(counts, tmp_path):
    _append(tmp_path, 25)                   # three files: 10, 10 and 5 entries
    assert _read_end(tmp_path) == 25
    assert len(counts.walks) == 3
    assert _read_end(tmp_path) == 25
    assert len(counts.walks) == 3           # no file walked again


def test_a_file_changed_within_the_quiet_period_is_walked_at_every_open(counts, tmp_path):
    counts.kept.quiet_ns = 3600 * 10**9     # every file changed within the hour
    _append(tmp_path, 25)
    assert _read_end(tmp_path) == _read_end(tmp_path) == 25
    assert len(counts.walks) == 6 and not counts.kept.counts


def test_writers_appends_and_cuts_between_opens_are_seen(counts, tmp_path):
    _append(tmp_path, 15)
    assert _read_end(tmp_path) == 15
    _append(tmp_path, 3)                    # into the second file, through its map
    assert _read_end(tmp_path) == _fresh_end(tmp_path) == 18
    _truncate(tmp_path, 12)                 # zeros over its last 6 entries
    assert _read_end(tmp_path) == _fresh_end(tmp_path) == 12
    _append(tmp_path, 6)                    # the same 6 entries again: the same end, by its slots
    assert _read_end(tmp_path) == _fresh_end(tmp_path) == 18


def test_zeros_written_over_an_entry_before_the_end_are_seen(counts, tmp_path):
    """Damage in the middle of a file (not a writer's append or cut): the file's times say it changed."""
    _append(tmp_path, 18)
    assert _read_end(tmp_path) == 18
    path = tmp_path / dense.file_name(FILE_SIZE)
    _clock_past(path)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, bytes(CQ_DTYPE.itemsize), 3 * CQ_DTYPE.itemsize)      # slot 3 of the second file
    finally:
        os.close(fd)
    assert _read_end(tmp_path) == _fresh_end(tmp_path) == 13


def test_a_replaced_file_is_walked(counts, tmp_path):
    _append(tmp_path, 18)
    assert _read_end(tmp_path) == 18
    path = tmp_path / dense.file_name(FILE_SIZE)
    data = bytearray(path.read_bytes())
    data[4 * CQ_DTYPE.itemsize:] = bytes(len(data) - 4 * CQ_DTYPE.itemsize)
    (tmp_path / "new").write_bytes(bytes(data))
    os.replace(tmp_path / "new", path)      # another inode, same size
    assert _read_end(tmp_path) == _fresh_end(tmp_path) == 14


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 25)),
                                st.tuples(st.just("cut"), st.integers(0, 60))), min_size=1, max_size=8))
def test_a_kept_count_is_a_new_walk_s_even_where_writes_stamp_no_time(counts, tmp_path_factory, monkeypatch,
                                                                      steps):
    """Writes through a map whose pages stayed dirty stamp no time (tmpfs; writeback held up): every file
    looks unchanged here (its inode, constant times), and what the writers do (segstore's appends at
    the end and cuts of the end; the broker's appends) is still seen, by the slots the count checks."""
    directory = tmp_path_factory.mktemp("cq")

    def unchanged(mapped):
        return SimpleNamespace(st_dev=0, st_ino=os.stat(mapped.path).st_ino, st_size=mapped.size,
                               st_mtime_ns=1, st_ctime_ns=1)

    monkeypatch.setattr(files.MappedFile, "stat", unchanged)
    _append(directory, 1)
    for kind, number in steps:
        assert _read_end(directory) == _fresh_end(directory)
        if kind == "append":
            _append(directory, number)
        else:
            end = _fresh_end(directory)
            if end:
                _truncate(directory, max(1, min(number, end)))   # a file left empty would be deleted
    assert _read_end(directory) == _fresh_end(directory)
