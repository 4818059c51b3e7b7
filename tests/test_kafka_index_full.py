"""Kafka segments whose indexes fill before the log does (a small ``segment.index.bytes``), issue 15.

Kafka 3.8's rules, read in ``storage/src/main/java/org/apache/kafka/storage/internals/log/``:

- ``LogSegment.shouldRoll`` (called by ``UnifiedLog.maybeRoll`` in
  ``core/src/main/scala/kafka/log/UnifiedLog.scala`` before every append) rolls when
  ``offsetIndex().isFull() || timeIndex().isFull()``;
- ``AbstractIndex`` sizes a new index to ``segment.index.bytes`` rounded down to whole
  entries (``roundDownToExactMultiple``); ``TimeIndex.isFull`` is ``entries >= maxEntries - 1``
  (the last slot is kept for the entry ``onBecomeInactiveSegment`` forces in on roll);
- ``LogSegment.append`` indexes a batch when ``bytesSinceLastIndexEntry > indexIntervalBytes``,
  and ``bytesSinceLastIndexEntry`` starts at 0 when a segment is opened, so a segment
  appended to across reopens gets fewer entries than ``LogSegment.recover`` (which counts
  from the log's start) rebuilds.  Kafka's ``recover`` then appends to a full index and
  throws; we keep the rebuilt indexes sparse instead (see docs/reliability.md).

With ``segment.index.bytes`` 64: the offset index holds 8 entries, the time index 5 (full at 4).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, kill_after_append
from kafka.record.memory_records import MemoryRecords

import segstore

CONFIG = {"segment.index.bytes": 64, "index.interval.bytes": 0}
OFFSET_SLOTS, TIME_SLOTS = 64 // 8, 64 // 12
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
T0 = 1_700_000_000_000


def _kafka_python_offsets(partition: Path) -> list[int]:
    """Offsets of every record as kafka-python reads the ``.log`` files."""
    out: list[int] = []
    for log in sorted(partition.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            out.extend(r.offset for r in records.next_batch())
    return out


def _sizes(partition: Path, suffix: str) -> list[int]:
    return [p.stat().st_size for p in sorted(partition.glob(f"*{suffix}"))]


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "segstore.cli", *argv], capture_output=True, text=True,
                          env=ENV, timeout=120, check=False)


def _append(store: Path, n: int, *, first_ts: int, ts_step: int) -> None:
    with segstore.open(store, format="kafka", mode="a", **CONFIG) as s:
        for i in range(n):
            s.append({"topic": "t", "partition": 0, "value": b"v" * 40, "timestamp": first_ts + i * ts_step})


@pytest.mark.parametrize(("ts_step", "batches_per_segment", "full"), [
    # timestamps rise: every indexed batch adds a time entry; 4 fill the time index (TimeIndex.isFull)
    (1, 1 + TIME_SLOTS - 1, "time"),
    # one timestamp: the time index keeps 1 entry, the offset index fills at 8 (AbstractIndex.isFull)
    (0, 1 + OFFSET_SLOTS, "offset"),
])
def test_appends_that_fill_an_index_roll_a_segment(tmp_path: Path, ts_step: int, batches_per_segment: int,
                                                   full: str) -> None:
    """LogSegment.shouldRoll / UnifiedLog.maybeRoll: a full index rolls before the next append; the first
    batch of a segment gets no entry (index.interval.bytes 0: every later one does)."""
    store = tmp_path / "k"
    _append(store, 4 * batches_per_segment + 2, first_ts=T0, ts_step=ts_step)
    partition = store / "t-0"
    bases = sorted(int(p.name[:20]) for p in partition.glob("*.log"))
    assert bases == [n * batches_per_segment for n in range(5)]
    rolled_offsets = _sizes(partition, ".index")[:-1]
    rolled_times = _sizes(partition, ".timeindex")[:-1]
    if full == "time":
        # 4 entries appended; the max timestamp onBecomeInactiveSegment forces into the reserved slot
        # is the last entry's already (the segment's last batch was indexed), so maybeAppend skips it
        assert rolled_times == [(TIME_SLOTS - 1) * 12] * 4
        assert rolled_offsets == [(TIME_SLOTS - 1) * 8] * 4
    else:
        assert rolled_offsets == [OFFSET_SLOTS * 8] * 4
        assert rolled_times == [12] * 4
    assert _kafka_python_offsets(partition) == list(range(4 * batches_per_segment + 2))
    verify = _cli("verify", str(store))
    assert verify.returncode == 0, verify.stdout + verify.stderr


_KILLED_WRITER = """
import os, sys, segstore
s = segstore.open(sys.argv[1], format="kafka", mode="a", **{config!r})
for i in range(int(sys.argv[2])):
    s.append({{"topic": "t", "partition": 0, "value": b"v" * 150, "timestamp": {t0}}})
os._exit(0)   # as a SIGKILL leaves it: nothing trimmed, nothing closed
"""


def _grown_across_reopens_then_killed(store: Path, config: dict) -> int:
    """Six sessions of 3 appends into one segment, then a writer killed after 3 more; the record count."""
    n = 0
    for _ in range(6):
        with segstore.open(store, format="kafka", mode="a", **config) as s:
            for _ in range(3):
                s.append({"topic": "t", "partition": 0, "value": b"v" * 150, "timestamp": T0})
                n += 1
    code = _KILLED_WRITER.format(config=config, t0=T0)
    subprocess.run([sys.executable, "-c", code, str(store), "3"], env=ENV, check=True, timeout=60)
    return n + 3


def test_a_segment_grown_across_reopens_then_killed_reopens_and_rolls(tmp_path: Path) -> None:
    """Six sessions of 3 appends (one timestamp: only the offset index fills), each reopen starting
    bytesSinceLastIndexEntry at 0 (LogSegment.java), then a killed one: LogSegment.recover rebuilds more
    entries than the 8 the offset index holds.
    Before the fix every later open for appending failed (``CorruptIndexError: ...index:64: index full``);
    now recovery keeps the indexes sparse, says so, and the next append rolls (shouldRoll: index full)."""
    config = {"segment.index.bytes": 64, "index.interval.bytes": 256}
    store = tmp_path / "k"
    n = _grown_across_reopens_then_killed(store, config)
    partition = store / "t-0"
    assert _sizes(partition, ".index") == [64]            # left untrimmed by the kill
    # the rebuild needs more than 8 entries: recovery (LogSegment.recover) counts from the log's start
    assert (partition / f"{0:020d}.log").stat().st_size // 256 > OFFSET_SLOTS

    with segstore.open(store, format="kafka", mode="a", **config) as s:
        assert [m.offset for m in s.scan()] == list(range(n))
        s.append({"topic": "t", "partition": 0, "value": b"after", "timestamp": T0})
    n += 1
    assert sorted(int(p.name[:20]) for p in partition.glob("*.log")) == [0, n - 1]
    assert _sizes(partition, ".index")[0] == OFFSET_SLOTS * 8
    assert _kafka_python_offsets(partition) == list(range(n))
    verify = _cli("verify", str(store), "--config", "segment.index.bytes=64")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    dump = _cli("dump", str(store), "--json")
    assert dump.returncode == 0, dump.stderr
    assert len(dump.stdout.splitlines()) == n


def test_a_writer_killed_after_rolling_past_a_full_index_leaves_the_recovery_point_past_it(
        tmp_path: Path) -> None:
    """The killed store above reopened and appended to by a writer killed (SIGKILL) before any flush: its
    log dir's ``recovery-point-offset-checkpoint`` still said 18, inside segment 0, and the storage
    oracle's ``LogSegment.recover`` of segment 0 threw ``IllegalArgumentException: Attempt to append to a
    full index (size = 8)``, which ``LogLoader.recoverLog`` (core/src/main/scala/kafka/log/LogLoader.scala)
    does not catch: Kafka 3.8.0 could not load the partition.  Now the first append, whose open's recovery
    found that index full, moves the checkpointed point to the log end (21) first: the broker's next load
    recovers only segment 21, the one the append rolled to."""
    config = {"segment.index.bytes": 64, "index.interval.bytes": 256}
    store = tmp_path / "k"
    n = _grown_across_reopens_then_killed(store, config)
    checkpoint = store / "recovery-point-offset-checkpoint"
    assert checkpoint.read_text() == "0\n1\nt 0 18\n"      # the last close's: the kill wrote none
    kill_after_append(_APPEND_THEN_WAIT.format(config=config, t0=T0), str(store))
    assert checkpoint.read_text() == f"0\n1\nt 0 {n}\n"
    assert sorted(int(p.name[:20]) for p in (store / "t-0").glob("*.log")) == [0, n]
    assert _kafka_python_offsets(store / "t-0") == list(range(n + 1))


_APPEND_THEN_WAIT = """
import sys, segstore
s = segstore.open(sys.argv[1], format="kafka", mode="a", **{config!r})
s.append({{"topic": "t", "partition": 0, "value": b"after", "timestamp": {t0}}})
print("appended", flush=True)
sys.stdin.read()
"""


def test_cli_recover_with_the_topics_index_size_keeps_the_indexes_sparse(tmp_path: Path) -> None:
    """``segstore recover --config segment.index.bytes=64`` on the killed store: exit 0, one line naming
    where the indexes filled, every record kept; a second recover finds nothing to do.  The full segment
    was left active: the recovery point the close checkpointed (the log end, 21) lay in it, and with no
    clean-shutdown marker Kafka 3.8.0's next load (``LogLoader.recoverLog`` from the segment holding it,
    core/src/main/scala/kafka/log/LogLoader.scala) ran the storage oracle's ``LogSegment.recover`` on it,
    which threw ``IllegalArgumentException: Attempt to append to a full index (size = 8)``: the partition
    did not load.  The recovery now rolls an empty segment at the log end, which holds the point."""
    config = {"segment.index.bytes": 64, "index.interval.bytes": 256}
    store = tmp_path / "k"
    n = _grown_across_reopens_then_killed(store, config)
    args = ["--config", "segment.index.bytes=64", "--config", "index.interval.bytes=256"]
    recover = _cli("recover", str(store), *args)
    assert recover.returncode == 0, recover.stdout + recover.stderr
    assert "full at position" in recover.stdout and "00000000000000000000.log" in recover.stdout
    assert f"rolled a new segment at {n}" in recover.stdout
    partition = store / "t-0"
    assert _sizes(partition, ".index") == [OFFSET_SLOTS * 8, 0]
    assert sorted(int(p.name[:20]) for p in partition.glob("*.log")) == [0, n]
    assert (store / "recovery-point-offset-checkpoint").read_text() == f"0\n1\nt 0 {n}\n"
    assert _kafka_python_offsets(partition) == list(range(n))
    again = _cli("verify", str(store), *args)
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("sessions", [1, 3])
def test_a_one_slot_time_index_takes_the_entry_forced_in_on_close(tmp_path: Path, sessions: int) -> None:
    """``segment.index.bytes`` 12: the time index has one slot, so ``TimeIndex.isFull`` (``entries >=
    maxEntries - 1``) holds from the start and every append rolls (``LogSegment.shouldRoll``).  The slot is
    the one kept for the roll's entry: ``LogSegment.onBecomeInactiveSegment`` and ``LogSegment.close`` both
    call ``timeIndex().maybeAppend(maxTimestampSoFar(), shallowOffsetOfMaxTimestampSoFar(), true)``
    (skipFullCheck), so every segment, the active one closed last included, ends with its max timestamp.
    Before the fix the active segment's ``.timeindex`` was closed empty (0 bytes)."""
    store = tmp_path / "k"
    per_session = 3 // sessions
    for s in range(sessions):
        with segstore.open(store, format="kafka", mode="a", **{"segment.index.bytes": 12}) as st:
            for i in range(per_session):
                n = s * per_session + i
                st.append({"topic": "t", "partition": 0, "value": b"v" * 40, "timestamp": T0 + 10 * n})
    partition = store / "t-0"
    assert sorted(int(p.name[:20]) for p in partition.glob("*.log")) == [0, 1, 2]
    for base in (0, 1, 2):
        entry = (partition / f"{base:020d}.timeindex").read_bytes()
        assert entry == (T0 + 10 * base).to_bytes(8, "big") + (0).to_bytes(4, "big")
    verify = _cli("verify", str(store), "--config", "segment.index.bytes=12")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_an_empty_segment_rolled_at_its_own_base_is_closed_before_its_successor(tmp_path: Path) -> None:
    """With a one-slot time index every append rolls, the first one into the new empty partition's own
    segment at its own base offset: Kafka 3.8.0 ``UnifiedLog.roll`` deletes that empty segment ("Trying to
    roll a new log segment ... while it already exists and is active with size 0") and makes a new one.
    segstore replaced it in the segment map without closing it: its log and index files stayed open
    (descriptors and maps) until the object was collected."""
    with segstore.open(tmp_path / "k", format="kafka", mode="a", **{"segment.index.bytes": 12}) as st:
        part = st.partition_of("t", 0, create=True)
        replaced = []
        for n in range(3):
            before = part.log.segments.active
            st.append({"topic": "t", "partition": 0, "value": b"v" * 40, "timestamp": T0 + n})
            after = part.log.segments.active
            if before is not None and after is not before and after.base == before.base:
                replaced.append(before)
        assert replaced, "no append rolled an empty segment at its own base"
        for seg in replaced:
            assert seg.log.closed and seg.offset_index.file.closed and seg.time_index.file.closed
        assert [seg.base for seg in part.log.segments] == [0, 1, 2]


@pytest.mark.parametrize(("ts_step", "per_segment", "offset_entries", "time_entries"), [
    # rising timestamps: the time index (4092 bytes, 341 slots) is full at 340 entries (TimeIndex.isFull)
    (1, 341, 340, 340),
    # one timestamp: its one entry stays; the offset index (512 slots) fills first (AbstractIndex.isFull)
    (0, 513, 512, 1),
], ids=["time index full", "offset index full"])
def test_a_4096_byte_index_rolls_at_kafkas_entries_across_reopens(
        tmp_path: Path, ts_step: int, per_segment: int, offset_entries: int, time_entries: int) -> None:
    """``segment.index.bytes`` 4096 with ``index.interval.bytes`` 0, as a 3.8 broker writes it: a segment
    rolls when ``LogSegment.shouldRoll`` finds ``offsetIndex().isFull() || timeIndex().isFull()`` before an
    append (the first batch of a segment unindexed: ``bytesSinceLastIndexEntry > indexIntervalBytes``
    with 0 bytes since), ``AbstractIndex`` sizing the files to whole entries
    (``roundDownToExactMultiple``: 4096 / 8, 4092 / 12) and trimming them on roll.  Written over three
    sessions (each reopen resizes the active segment's indexes back to 4096: ``LogLoader.load``'s
    ``resizeIndexes``), every record is read, verify finds nothing with or without the config, recover
    changes nothing, and an append to the full segment's successor continues it.  Pinned: segstore
    agreed with the rule already."""
    config = {"segment.index.bytes": 4096, "index.interval.bytes": 0}
    store = tmp_path / "k"
    n = 2 * per_segment + 7
    for session in range(3):
        with segstore.open(store, format="kafka", mode="a", **config) as s:
            for i in range(session * n // 3, (session + 1) * n // 3):
                s.append({"topic": "t", "partition": 0, "value": b"v", "timestamp": T0 + i * ts_step})
    partition = store / "t-0"
    # each of the two full segments spans one reopen, whose first batch is not indexed (a loaded
    # LogSegment's bytesSinceLastIndexEntry starts at 0): one batch more than a single session's
    bases = sorted(int(p.name[:20]) for p in partition.glob("*.log"))
    assert bases == [0, per_segment + 1, 2 * per_segment + 2]
    assert _sizes(partition, ".index")[:2] == [offset_entries * 8] * 2
    assert _sizes(partition, ".timeindex")[:2] == [time_entries * 12] * 2
    assert _kafka_python_offsets(partition) == list(range(n))
    before = {p.name: p.read_bytes() for p in partition.iterdir()}
    for args in ([], ["--config", "segment.index.bytes=4096", "--config", "index.interval.bytes=0"]):
        verify = _cli("verify", str(store), *args)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    with segstore.open(store, format="kafka", mode="a", **config) as s:
        assert s.recover() == []
        assert [m.offset for m in s.scan()] == list(range(n))
        s.append({"topic": "t", "partition": 0, "value": b"v", "timestamp": T0 + n * ts_step})
    after = {p.name: p.read_bytes() for p in partition.iterdir()}
    assert sorted(after) == sorted(before)
    assert all(after[name] == before[name] for name in before if name[:20] != f"{2 * per_segment + 2:020d}")


def test_a_lowered_index_size_rolls_past_an_active_segment_holding_more_entries(tmp_path: Path) -> None:
    """A topic's ``segment.index.bytes`` lowered below what its active segment's index holds: Kafka 3.8.0's
    ``LogLoader.load`` resizes the last segment's indexes to the new size (``resizeIndexes``), and
    ``AbstractIndex.resize`` truncates the file, then sets the map's position back past its new limit
    (``mmap.position(position)``: IllegalArgumentException), so the broker does not load the partition.
    segstore's first append finds that index full at the new size (``shouldRoll``) and rolls: the last
    segment is then a new one, which the broker resizes without a word; the old one keeps its index whole
    (only the last segment is resized)."""
    store = tmp_path / "k"
    with segstore.open(store, format="kafka", mode="a", **{"index.interval.bytes": 0}) as s:
        for i in range(300):
            s.append({"topic": "t", "partition": 0, "value": b"v", "timestamp": T0 + i})
    partition = store / "t-0"
    assert _sizes(partition, ".index") == [299 * 8]
    lowered = {"segment.index.bytes": 1024, "index.interval.bytes": 0}
    with segstore.open(store, format="kafka", mode="a", **lowered) as s:
        s.append({"topic": "t", "partition": 0, "value": b"v", "timestamp": T0 + 300})
    assert sorted(int(p.name[:20]) for p in partition.glob("*.log")) == [0, 300]
    assert _sizes(partition, ".index") == [299 * 8, 0]
    assert _kafka_python_offsets(partition) == list(range(301))
    verify = _cli("verify", str(store), "--config", "segment.index.bytes=1024")
    assert verify.returncode == 0, verify.stdout + verify.stderr
