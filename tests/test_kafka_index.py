"""Kafka offset / time / transaction indexes and checkpoint files, against the real broker's files."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, KAFKA_FIXTURES
from hypothesis import example, given, settings
from hypothesis import strategies as st
from segstore_kafka.checkpoints import (
    EpochEntry,
    LeaderEpochCache,
    read_leader_epochs,
    read_offsets,
    write_leader_epochs,
    write_offsets,
)
from segstore_kafka.offsetindex import OFFSET_ENTRY, OffsetIndex
from segstore_kafka.timeindex import TIME_ENTRY, TimeIndex
from segstore_kafka.txnindex import AbortedTxn, TransactionIndex

from segstore.errors import CorruptDataError, CorruptIndexError

MAX = 10 * 1024 * 1024


def _dump(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "kafka" / name / "dump.jsonl").read_text().splitlines()]


def _open_indexes(name: str) -> tuple[dict[int, OffsetIndex], dict[int, TimeIndex]]:
    part = FIXTURES / "kafka" / name / "topic-0"
    bases = [d["baseOffset"] for d in _dump(name) if d["type"] == "segment"]
    return ({b: OffsetIndex.open(str(part / f"{b:020d}.index"), b, max_index_size=MAX) for b in bases},
            {b: TimeIndex.open(str(part / f"{b:020d}.timeindex"), b, max_index_size=MAX) for b in bases})


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_index_entries_equal_the_real_dump(name: str) -> None:
    offsets, times = _open_indexes(name)
    dump = _dump(name)
    for seg in (d for d in dump if d["type"] == "segment"):
        assert len(offsets[seg["baseOffset"]]) == seg["indexEntries"]
        assert len(times[seg["baseOffset"]]) == seg["timeIndexEntries"]
    want_offsets = [(d["segment"], d["offset"], d["position"]) for d in dump if d["type"] == "index_entry"]
    want_times = [(d["segment"], d["timestamp"], d["offset"]) for d in dump if d["type"] == "timeindex_entry"]
    assert [(b, *e) for b, idx in offsets.items() for e in idx.pairs()] == want_offsets
    assert [(b, *e) for b, idx in times.items() for e in idx.pairs()] == want_times


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_lookups_equal_the_real_index_lookups(name: str) -> None:
    offsets, times = _open_indexes(name)
    checked = 0
    for d in _dump(name):
        if d["type"] == "offset_lookup":
            got = offsets[d["segment"]].lookup_offset(d["target"])
            assert got._asdict() == d["index_lookup"], d
            checked += 1
        elif d["type"] == "timestamp_lookup":
            got = times[d["segment"]].lookup_timestamp(d["target"])
            assert got._asdict() == d["timeindex_lookup"], d
            checked += 1
    assert checked >= 100


@pytest.mark.parametrize("name", KAFKA_FIXTURES)
def test_txnindex_and_leader_epochs_equal_the_real_dump(name: str) -> None:
    part = FIXTURES / "kafka" / name / "topic-0"
    dump = _dump(name)
    got = [(b, *t) for b in (d["baseOffset"] for d in dump if d["type"] == "segment")
           for t in TransactionIndex(str(part / f"{b:020d}.txnindex")).all()]
    assert got == [(d["segment"], d["producerId"], d["firstOffset"], d["lastOffset"], d["lastStableOffset"])
                   for d in dump if d["type"] == "txnindex_entry"]
    (epochs,) = [d for d in dump if d["type"] == "leader_epoch_checkpoint"]
    assert read_leader_epochs(str(part / "leader-epoch-checkpoint")) == [
        EpochEntry(e["epoch"], e["startOffset"]) for e in epochs["entries"]]


def test_leader_epoch_checkpoint_round_trips_byte_for_byte(tmp_path: Path) -> None:
    src = FIXTURES / "kafka" / "uncompressed" / "topic-0" / "leader-epoch-checkpoint"
    out = tmp_path / "leader-epoch-checkpoint"
    write_leader_epochs(str(out), read_leader_epochs(str(src)))
    assert out.read_bytes() == src.read_bytes()
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


def test_leader_epoch_cache_rules(tmp_path: Path) -> None:
    cache = LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))
    assert cache.assign(0, 0) and not cache.assign(0, 5) and cache.assign(2, 10) and not cache.assign(1, 20)
    assert cache.epoch_for(9) == 0 and cache.epoch_for(10) == 2
    cache.truncate_from_start(4)
    assert cache.entries == [EpochEntry(0, 4), EpochEntry(2, 10)]
    cache.truncate_from_end(10)
    cache.flush()
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n0 4\n"


def test_log_dir_offset_checkpoints(tmp_path: Path) -> None:
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offsets(path, {("b", 1): 7, ("a", 0): 12})
    assert Path(path).read_text() == "0\n2\na 0 12\nb 1 7\n"
    assert read_offsets(path) == {("a", 0): 12, ("b", 1): 7}


@pytest.mark.parametrize("text, pos", [("1\n0\n", 0), ("0\n2\n0 0\n", 4), ("0\n1\n0\n", 4), ("0\nx\n", 2)])
def test_bad_checkpoints_are_typed_errors_with_positions(tmp_path: Path, text: str, pos: int) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptDataError) as info:
        read_leader_epochs(str(path))
    assert info.value.path == str(path) and info.value.pos == pos


# -- corruption and crash shapes ------------------------------------------------

def _write_entries(path: Path, dtype: np.dtype, rows: list[tuple], extra_zero_slots: int = 0) -> None:
    path.write_bytes(np.array(rows, dtype=dtype).tobytes() + bytes(extra_zero_slots * dtype.itemsize))


def test_index_size_not_a_multiple_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes(8 * 3 + 5))
    with pytest.raises(CorruptIndexError) as info:
        OffsetIndex.open(str(path), 0, max_index_size=MAX)
    assert info.value.path == str(path) and info.value.pos == 24
    assert "29 bytes" in str(info.value)


@pytest.mark.parametrize("cls, dtype, rows, slot", [
    (OffsetIndex, OFFSET_ENTRY, [(3, 100), (9, 400), (5, 600)], 2),
    (OffsetIndex, OFFSET_ENTRY, [(3, 100), (9, 400), (12, 300)], 2),
    (TimeIndex, TIME_ENTRY, [(1000, 3), (900, 5)], 1),
    (TimeIndex, TIME_ENTRY, [(1000, 3), (1100, 2)], 1),
])
def test_out_of_order_entries_are_corrupt(tmp_path: Path, cls: type, dtype: np.dtype, rows: list,
                                          slot: int) -> None:
    path = tmp_path / "00000000000000000010.idx"
    _write_entries(path, dtype, rows)
    with pytest.raises(CorruptIndexError) as info:
        cls.open(str(path), 10, max_index_size=MAX)
    assert info.value.path == str(path) and info.value.pos == slot * dtype.itemsize


def test_negative_relative_offset_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.index"
    _write_entries(path, OFFSET_ENTRY, [(-4, 100)])
    with pytest.raises(CorruptIndexError, match="at or after the base offset 10, found 6"):
        OffsetIndex.open(str(path), 10, max_index_size=MAX)


def test_untrimmed_index_left_by_a_crash_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    _write_entries(path, OFFSET_ENTRY, [(5, 900), (11, 1900)], extra_zero_slots=1000)
    idx = OffsetIndex.open(str(path), 0, max_index_size=MAX)
    assert len(idx) == 2 and idx.untrimmed
    assert idx.lookup_offset(100).offset == 11
    tpath = tmp_path / "00000000000000000000.timeindex"
    _write_entries(tpath, TIME_ENTRY, [(50, 5)], extra_zero_slots=10)
    tidx = TimeIndex.open(str(tpath), 0, max_index_size=MAX)
    assert len(tidx) == 1 and tidx.untrimmed


def test_a_closed_segments_single_zero_time_entry_is_an_entry(tmp_path: Path) -> None:
    """Kafka 3.8.0 TimeIndex.maybeAppend adds (0, base) to an empty index (0 > -1), and
    LogSegment.onBecomeInactiveSegment forces it in when the segment's largest timestamp is 0 at its base:
    the trimmed file is 12 zero bytes, one entry (the oracle's TimeIndex counts 1).  Read as an empty
    untrimmed file, verify called the segment crashed and every writable open rebuilt it and the ones after.
    """
    tpath = tmp_path / "00000000000000000000.timeindex"
    _write_entries(tpath, TIME_ENTRY, [(0, 0)])
    tidx = TimeIndex.open(str(tpath), 0, max_index_size=MAX)
    assert len(tidx) == 1 and not tidx.untrimmed
    assert tidx.last_entry == (0, 0)
    # preallocated zeros beyond it stay what they were: no entries, a crash's untrimmed file
    _write_entries(tpath, TIME_ENTRY, [(0, 0)], extra_zero_slots=10)
    tidx = TimeIndex.open(str(tpath), 0, max_index_size=MAX)
    assert len(tidx) == 0 and tidx.untrimmed
    # the offset index never holds (0, 0): Kafka indexes a batch only after index.interval.bytes
    path = tmp_path / "00000000000000000000.index"
    _write_entries(path, OFFSET_ENTRY, [(0, 0)])
    assert len(OffsetIndex.open(str(path), 0, max_index_size=MAX)) == 0


def test_a_segment_of_timestamp_zero_verifies_and_keeps_its_neighbours_indexes(tmp_path: Path) -> None:
    import segstore
    from segstore.cli import main

    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a", **{"segment.bytes": 100}) as s:
        for _ in range(2):
            s.append_batch([{"topic": "t", "partition": 0, "key": b"k", "value": b"v", "timestamp": 0}])
    part = tmp_path / "logs" / "t-0"
    assert (part / "00000000000000000000.timeindex").read_bytes() == bytes(12)
    assert main(["verify", str(tmp_path / "logs")]) == 0
    assert main(["recover", str(tmp_path / "logs")]) == 0


def test_preallocate_append_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex.open(str(path), 100, max_index_size=8 * 4 + 5, create=True)
    assert path.stat().st_size == 32 and idx.capacity == 4
    idx.append_entry(110, 1000)
    with pytest.raises(CorruptIndexError):
        idx.append_entry(110, 2000)
    idx.append_entry(120, 2000)
    idx.trim()
    idx.close()
    assert path.read_bytes() == np.array([(10, 1000), (20, 2000)], dtype=OFFSET_ENTRY).tobytes()


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path: Path) -> None:
    idx = TimeIndex.open(str(tmp_path / "0.timeindex"), 0, max_index_size=36, create=True)
    assert idx.maybe_append(10, 1) and not idx.maybe_append(10, 2) and idx.maybe_append(20, 3)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(30, 4)
    assert idx.maybe_append(30, 4, skip_full_check=True)
    assert idx.pairs() == [(10, 1), (20, 3), (30, 4)]


def test_txnindex_append_truncate(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(str(path), writable=True)
    assert not path.exists()
    idx.append(AbortedTxn(7, 0, 6, 5))
    idx.append(AbortedTxn(8, 3, 12, 13))
    with pytest.raises(CorruptIndexError):
        idx.append(AbortedTxn(9, 3, 12, 13))
    assert idx.aborted_in(7, 20) == [AbortedTxn(8, 3, 12, 13)]
    idx.truncate_to(10)
    assert idx.all() == [AbortedTxn(7, 0, 6, 5)] and path.stat().st_size == 34
    idx.close()


def test_txnindex_torn_last_entry_reads_the_whole_ones_and_is_a_problem(tmp_path: Path) -> None:
    """Kafka 3.8 ``TransactionIndex.hasNext``: fewer than 34 bytes left are not an entry."""
    src = FIXTURES / "kafka" / "txn" / "topic-0" / "00000000000000000000.txnindex"
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    whole = TransactionIndex(str(path)).all()
    with path.open("ab") as f:
        f.write(b"\0\0\0")
    index = TransactionIndex(str(path))
    assert index.all() == whole and index.torn_bytes == 3
    assert index.problems(0) == [(str(path), 204, "expected whole 34-byte entries, found 3 bytes after the "
                                                  "last (an append a crash tore)")]
    with pytest.raises(CorruptIndexError) as info:
        TransactionIndex(str(path), writable=True).append(whole[-1]._replace(last_offset=10**6))
    assert info.value.pos == 207


# -- lookups against a brute-force oracle --------------------------------------

@settings(max_examples=60, deadline=None)
@given(base=st.integers(0, 10_000),
       steps=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), min_size=0, max_size=60),
       targets=st.lists(st.integers(-10, 200_000), min_size=1, max_size=30))
def test_offset_lookup_matches_a_linear_scan(tmp_path_factory: pytest.TempPathFactory, base: int,
                                             steps: list[tuple[int, int]], targets: list[int]) -> None:
    path = tmp_path_factory.mktemp("oi") / f"{base:020d}.index"
    idx = OffsetIndex.open(str(path), base, max_index_size=8 * 64, create=True)
    entries, offset, position = [], base, 0
    for d_off, d_pos in steps:
        offset, position = offset + d_off, position + d_pos
        idx.append_entry(offset, position)
        entries.append((offset, position))
    for target in targets:
        target += base
        want = max((e for e in entries if e[0] <= target), default=(base, 0))
        assert tuple(idx.lookup_offset(target)) == want
    idx.close()


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(-20, 100), st.integers(0, 7)), max_size=60),
       targets=st.lists(st.integers(0, 10_000), min_size=1, max_size=30))
def test_time_lookup_matches_a_linear_scan(tmp_path_factory: pytest.TempPathFactory,
                                           steps: list[tuple[int, int]], targets: list[int]) -> None:
    path = tmp_path_factory.mktemp("ti") / "00000000000000000000.timeindex"
    idx = TimeIndex.open(str(path), 0, max_index_size=12 * 64, create=True)
    entries: list[tuple[int, int]] = []
    max_ts, offset = 0, 0
    for d_ts, d_off in steps:
        max_ts, offset = max(max_ts, max_ts + d_ts), offset + d_off
        if idx.maybe_append(max_ts, offset):
            entries.append((max_ts, offset))
    assert all(a[0] < b[0] and a[1] <= b[1] for a, b in itertools.pairwise(entries))
    for target in targets:
        want = max((e for e in entries if e[0] <= target), default=(-1, 0))
        assert tuple(idx.lookup_timestamp(target)) == want
    idx.close()


@settings(max_examples=60, deadline=None)
@example(actions=[("append", 1), ("append", 2), ("lookup", 0), ("truncate", 5), ("append", 50),
                  ("lookup", 150)])
@given(actions=st.lists(st.tuples(st.sampled_from(["append", "lookup", "truncate"]), st.integers(0, 400)),
                        max_size=80))
def test_lookups_interleaved_with_appends_and_truncations(tmp_path_factory: pytest.TempPathFactory,
                                                          actions: list[tuple[str, int]]) -> None:
    """Lookups search cached native copies of the columns: appends extend them, truncations reset them,
    and a truncation followed by new entries of the same count never answers from the old ones."""
    tmp = tmp_path_factory.mktemp("mixed")
    base = 100
    oi = OffsetIndex.open(str(tmp / f"{base:020d}.index"), base, max_index_size=8 * 40, create=True)
    ti = TimeIndex.open(str(tmp / f"{base:020d}.timeindex"), base, max_index_size=12 * 40, create=True)
    entries: list[tuple[int, int, int]] = []   # (offset, position, timestamp), the oracle
    for action, n in actions:
        if action == "append" and len(entries) < 38:
            last = entries[-1] if entries else (base, 0, 1_000)
            entry = (last[0] + 1 + n % 7, last[1] + 1 + n, last[2] + 1 + n % 5)
            oi.append_entry(entry[0], entry[1])
            assert ti.maybe_append(entry[2], entry[0])
            entries.append(entry)
        elif action == "truncate":
            cut = base + n % 200
            oi.truncate_to(cut)
            ti.truncate_to(cut)
            entries = [e for e in entries if e[0] < cut]
        if action != "lookup":
            continue
        target = base + n % 200
        want = max(((o, p) for o, p, _ in entries if o <= target), default=(base, 0))
        assert tuple(oi.lookup_offset(target)) == want
        assert oi.lookup_position(target) == want[1]
        stamp = 1_000 + n % 200
        want_ts = max(((t, o) for o, _, t in entries if t <= stamp), default=(-1, base))
        assert tuple(ti.lookup_timestamp(stamp)) == want_ts
    oi.close()
    ti.close()
