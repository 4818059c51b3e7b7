"""Kafka corruption and crash recovery: typed errors naming file and byte, cut bytes kept, indexes rebuilt."""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import crc32c
import numpy as np
import pytest
from conftest import FIXTURES, copy_writable, kill_after_append
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka_messages import marked_transaction
from segstore_kafka.batch import (
    CRC_OFFSET,
    MAGIC_OFFSET,
    encode_batch,
    encode_control_batch,
    encode_empty_batch,
    iter_batches,
)
from segstore_kafka.offsetindex import OFFSET_ENTRY
from segstore_kafka.segment import LogSegment
from segstore_kafka.timeindex import TIME_ENTRY

import segstore
from segstore.errors import CorruptDataError, TruncatedDataError, UnrepairedDataError
from segstore.records import Message

CONFIG = {"segment.bytes": 6935, "index.interval.bytes": 990}   # the uncompressed fixture's
SEG0 = "00000000000000000000"


def _fixture(tmp_path: Path) -> Path:
    return copy_writable(FIXTURES / "kafka" / "uncompressed" / "topic-0", tmp_path / "topic-0")


def _flip(path: Path, pos: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


def _one_segment(tmp_path: Path, data: bytes, name: str = "t-0") -> tuple[Path, Path]:
    """A partition directory ``name`` under ``tmp_path`` of one segment holding ``data``: the directory
    and its ``.log``."""
    part = tmp_path / name
    part.mkdir()
    log = part / f"{SEG0}.log"
    log.write_bytes(data)
    return part, log


def _positions(path: Path) -> list[int]:
    return [b.position for b in iter_batches(path.read_bytes(), path=str(path))]


def _values(store: segstore.Store) -> list[bytes | None]:
    return [r.value for r in store.scan()]


@pytest.mark.parametrize("where", ["crc", "record", "attributes"])
def test_bit_flips_are_typed_errors_with_file_and_position(tmp_path: Path, where: str) -> None:
    part = _fixture(tmp_path)
    log = part / f"{SEG0}.log"
    batch_pos = _positions(log)[3]
    offset = {"crc": CRC_OFFSET, "record": 70, "attributes": CRC_OFFSET + 4}[where]
    _flip(log, batch_pos + offset)
    with segstore.open(part) as store:
        with pytest.raises(CorruptDataError) as info:
            _values(store)
        assert info.value.path == str(log) and info.value.pos == batch_pos + CRC_OFFSET
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems][:1] == [(str(log), batch_pos + CRC_OFFSET)]


def test_wrong_magic_is_a_typed_error(tmp_path: Path) -> None:
    part = _fixture(tmp_path)
    log = part / f"{SEG0}.log"
    batch_pos = _positions(log)[2]
    data = bytearray(log.read_bytes())
    data[batch_pos + MAGIC_OFFSET] = 7
    log.write_bytes(bytes(data))
    with segstore.open(part) as store, pytest.raises(CorruptDataError, match="magic") as info:
        _values(store)
    assert info.value.path == str(log) and info.value.pos == batch_pos + MAGIC_OFFSET


def test_a_cut_log_reads_as_a_truncated_error_then_recovers_keeping_the_cut_bytes(tmp_path: Path) -> None:
    part = _fixture(tmp_path)
    log = part / "00000000000000000289.log"
    original = log.read_bytes()
    last = _positions(log)[-1]
    cut_at = last + 30
    log.write_bytes(original[:cut_at])
    with segstore.open(part) as store, pytest.raises(TruncatedDataError) as info:
        _values(store)
    assert info.value.path == str(log) and info.value.pos == last
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        assert store.verify() == []
        end = store.offset_range("topic", 0)[1]
    assert log.read_bytes() == original[:last]
    assert Path(f"{log}.cut-{last}").read_bytes() == original[last:cut_at]
    assert end == max([289] + [b.last_offset + 1 for b in iter_batches(original[:last], path="x")])


def test_recover_cuts_a_corrupt_middle_segment_and_keeps_the_later_ones(tmp_path: Path) -> None:
    part = _fixture(tmp_path)
    log = part / "00000000000000000137.log"
    bad = _positions(log)[2]
    _flip(log, bad + 80)
    later = sorted(p.name for p in part.glob("*.log") if p.name > log.name)
    contents = {name: (part / name).read_bytes() for name in later}
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.verify() == []
        assert store.offset_range("topic", 0)[1] == 137 + sum(
            b.record_count for b in iter_batches(log.read_bytes(), path=str(log)))
    assert any("cut" in line and str(log) in line for line in lines)
    for name in later:
        assert not (part / name).exists()
        assert (part / f"{name}.cut-0").read_bytes() == contents[name]     # byte for byte, its last 0 too
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 123\n"


def test_corrupt_index_files_are_reported_once_by_readers_and_rebuilt_on_append(tmp_path: Path) -> None:
    """A reader reads past a corrupt index (the log is the truth) and verify names it once."""
    part = _fixture(tmp_path)
    index = part / f"{SEG0}.index"
    good = index.read_bytes()
    with segstore.open(part) as store:
        expected = [r.offset for r in store.scan()]
    index.write_bytes(good + b"\x01\x02\x03")
    with segstore.open(part) as store:
        problems = store.verify()
        assert [(p.path, p.pos) for p in problems] == [(str(index), len(good))]
        assert "whole number of 8-byte entries" in problems[0].message
        assert [r.offset for r in store.scan()] == expected
        assert [r.offset for r in store.read("topic", 0, expected[-1])] == [expected[-1]]
    index.write_bytes(good[8:16] + good[:8] + good[16:])          # decreasing offsets
    with segstore.open(part) as store:
        assert [(p.path, p.pos) for p in store.verify()] == [(str(index), 8)]
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        assert store.verify() == []
    assert index.read_bytes() == good


def test_index_pointing_at_the_wrong_batch_is_reported_by_verify(tmp_path: Path) -> None:
    part = _fixture(tmp_path)
    index = part / f"{SEG0}.index"
    data = bytearray(index.read_bytes())
    data[7] ^= 0x04                                                 # position of slot 0
    index.write_bytes(bytes(data))
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(index), 0)]


def test_untrimmed_active_index_after_a_crash_is_recognised_and_rebuilt(tmp_path: Path) -> None:
    rng = random.Random(5)
    clean, crashed = tmp_path / "clean" / "t-0", tmp_path / "crashed" / "t-0"
    config = {"index.interval.bytes": 200, "segment.bytes": 5000}
    messages = [Message("t", rng.randbytes(rng.randrange(10, 90)), key=b"k", timestamp=1_000 + i)
                for i in range(120)]
    for path in (clean, crashed):
        store = segstore.open(path, format="kafka", mode="a", **config)
        for i in range(0, len(messages), 4):
            store.append_batch(messages[i:i + 4])
        if path == crashed:
            store.abandon()
        else:
            store.close()
    active = sorted(crashed.glob("*.index"))[-1]
    assert active.stat().st_size == 10 * 1024 * 1024       # preallocated, left untrimmed
    with segstore.open(crashed) as store:                     # reading: recognised, not garbage
        assert [r.value for r in store.scan()] == [m.value for m in messages]
        assert store.offset_for_time("t", 0, 1_050) == 50
    with segstore.open(crashed, format="kafka", mode="a", **config) as store:
        assert [r.value for r in store.read("t", 0, 100)] == [m.value for m in messages[100:]]
    for name in ("index", "timeindex", "log"):
        for file in sorted(clean.glob(f"*.{name}")):
            assert (crashed / file.name).read_bytes() == file.read_bytes(), file.name


@pytest.mark.parametrize("segments", [1, 3])
@pytest.mark.parametrize("cut", ["last offset index entry", "last batch"])
def test_an_active_log_cut_under_its_indexes_gets_them_rebuilt_not_an_error_at_close(
        tmp_path: Path, segments: int, cut: str) -> None:
    """A ``.log`` cut at a batch boundary (by another tool, an operator, a follower's truncation) while
    its ``.index``/``.timeindex`` still name batches past the cut: the indexes are derived from the log,
    so a writable open rebuilds them as Kafka 3.8.0 ``LogSegment.recover`` does (``reset``, rebuilt from
    the batches, ``trimToValidSize``), and ``close()`` forces the max timestamp in without the time
    index going backwards (it raised CorruptIndexError: "expected an offset of at least the last
    indexed")."""
    config = {"index.interval.bytes": 200, "segment.bytes": 6000 if segments == 3 else 1 << 20}
    messages = [Message("t", b"v%03d" % i * 8, key=b"k", timestamp=1_000 + i) for i in range(150)]
    part = tmp_path / "cut" / "t-0"
    with segstore.open(part, format="kafka", mode="a", **config) as store:
        for message in messages:
            store.append_batch([message])
    logs = sorted(part.glob("*.log"))
    assert len(logs) == segments
    active = logs[-1]
    positions = _positions(active)
    last_entry = int(np.fromfile(active.with_suffix(".index"), dtype=OFFSET_ENTRY)["position"][-1])
    at = last_entry if cut == "last offset index entry" else positions[-1]
    # the last batch is not indexed: only the time index's entry forced in at close names it
    assert cut != "last batch" or last_entry < at
    kept = len(messages) - (len(positions) - positions.index(at))
    with open(active, "r+b") as file:
        file.truncate(at)
    with segstore.open(part, format="kafka", mode="a", **config) as store:
        assert store.offset_range("t", 0)[1] == kept
    times = np.fromfile(active.with_suffix(".timeindex"), dtype=TIME_ENTRY)
    assert int(times["relative_offset"][-1]) + int(active.stem) == kept - 1
    reference = tmp_path / "reference" / "t-0"
    with segstore.open(reference, format="kafka", mode="a", **config) as store:
        for message in messages[:kept]:
            store.append_batch([message])
    for name in ("index", "timeindex", "log"):
        file = active.with_suffix(f".{name}")
        assert file.read_bytes() == (reference / file.name).read_bytes(), file.name
    with segstore.open(part, format="kafka", mode="a", **config) as store:
        for message in messages[kept:]:
            store.append_batch([message])
        assert store.verify() == []
        assert _values(store) == [m.value for m in messages]


def test_crash_loop_never_loses_an_acknowledged_batch(tmp_path: Path) -> None:
    rng = random.Random(11)
    path = tmp_path / "t-0"
    config = {"index.interval.bytes": 100, "segment.bytes": 1500}
    appended: list[bytes] = []
    for round_ in range(12):
        store = segstore.open(path, format="kafka", mode="a", **config)
        assert [r.value for r in store.scan()] == appended
        for _ in range(rng.randrange(1, 6)):
            batch = [Message("t", rng.randbytes(rng.randrange(60)), timestamp=round_) for _ in range(3)]
            store.append_batch(batch)
            appended += [m.value for m in batch]
        if round_ % 3 == 2:
            store.close()
            continue
        store.abandon()
        log = sorted(path.glob("*.log"))[-1]
        torn = rng.randrange(1, 40)
        with log.open("ab") as f:
            f.write(rng.randbytes(torn))                        # a torn write after the last batch
    with segstore.open(path, format="kafka", mode="a", **config) as store:
        assert [r.value for r in store.scan()] == appended
        assert store.verify() == []
    assert list(path.glob("*.cut-*"))


def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    part = _fixture(tmp_path)
    for suffix in (".index", ".timeindex"):
        shutil.move(str(part / f"{SEG0}{suffix}"), str(tmp_path / f"saved{suffix}"))
    with segstore.open(part) as store:                        # reading works without them
        assert len(_values(store)) == 300
    with segstore.open(part, format="kafka", mode="a", **CONFIG):
        pass
    for suffix in (".index", ".timeindex"):
        assert (part / f"{SEG0}{suffix}").read_bytes() == (tmp_path / f"saved{suffix}").read_bytes()


# -- the leader epoch cache: recovery changes the checkpoint only where the broker would -------------

def _compacted_partition(path: Path, checkpoint: str) -> Path:
    """One segment at base 0 whose records below offset 4 compaction removed (its first batch starts at
    4, as Kafka's cleaner keeps a batch's base offset) and between 9 and 130; epoch 0 from 4, epoch 1
    from 130, epoch 2 from 200; ``leader-epoch-checkpoint`` as given."""
    from segstore_kafka.batch import encode_batch

    path.mkdir(parents=True)
    batches = [(4, 0, 4), (8, 0, 2), (130, 1, 3), (200, 2, 1)]
    data = b"".join(encode_batch([(b"k%d" % (base + i), b"v", 1_700_000_000_000 + base + i, [])
                                  for i in range(count)], base_offset=base, partition_leader_epoch=epoch)
                    for base, epoch, count in batches)
    (path / f"{SEG0}.log").write_bytes(data)
    (path / "leader-epoch-checkpoint").write_text(checkpoint)
    return path


@pytest.mark.parametrize(("checkpoint", "after"), [
    # the broker's own: epoch 0 from 0 (compaction removed 0-3), 1 from 123 (removed 123-129), 2 from 200
    ("0\n3\n0 0\n1 123\n2 200\n", "0\n3\n0 0\n1 123\n2 200\n"),
    # epoch 2's entry never flushed before a crash: the batch of a newer epoch adds it
    ("0\n2\n0 0\n1 123\n", "0\n3\n0 0\n1 123\n2 200\n"),
    # none at all: every epoch from its first batch
    (None, "0\n3\n0 4\n1 130\n2 200\n"),
])
def test_recover_keeps_the_leader_epoch_checkpoint_the_broker_keeps(tmp_path: Path, checkpoint: str | None,
                                                                    after: str) -> None:
    """Kafka 3.8.0 ``LogSegment.recover`` assigns a batch's epoch to the cache ``LogLoader`` loaded from
    the checkpoint only when it is newer than the latest (``batch.partitionLeaderEpoch() >
    cache.latestEpoch()``), and ``LeaderEpochFileCache.assign`` (``isUpdateNeeded``) changes nothing for
    an entry of the latest epoch with a later start offset: a compacted partition keeps ``0 0`` although
    its first batch starts at 4."""
    part = _compacted_partition(tmp_path / "t-0", checkpoint or "")
    if checkpoint is None:
        (part / "leader-epoch-checkpoint").unlink()
    (part / f"{SEG0}.index").unlink(missing_ok=True)
    with segstore.open(part, format="kafka", mode="a") as store:
        store.recover()
        assert store.verify() == []
    assert (part / "leader-epoch-checkpoint").read_text() == after


def test_recover_says_when_it_drops_leader_epochs_past_the_log_end(tmp_path: Path, capsys) -> None:
    """Kafka 3.8.0 ``LogLoader.load`` truncates the epoch cache to the log end
    (``LeaderEpochFileCache.truncateFromEnd``, which logs the entries it clears); ``segstore recover``
    dropped such an entry from ``leader-epoch-checkpoint`` and printed "nothing to recover"."""
    import json

    from segstore.cli import main

    part = _compacted_partition(tmp_path / "t-0", "0\n3\n0 0\n1 123\n2 200\n")
    with segstore.open(part, format="kafka", mode="a") as store:   # the indexes, as the broker wrote them
        store.flush()
    (part / "leader-epoch-checkpoint").write_text("0\n4\n0 0\n1 123\n2 200\n5 900\n")
    assert main(["recover", str(part), "--json"]) == 0
    actions = json.loads(capsys.readouterr().out)["actions"]
    assert actions == [f"{part / 'leader-epoch-checkpoint'}: dropped the leader epochs starting at or past "
                       "the log end 201: 5 900"]
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n1 123\n2 200\n"
    assert main(["recover", str(part)]) == 0
    assert capsys.readouterr().out == f"{part}: nothing to recover\n"


def test_recover_of_a_healthy_compacted_partition_changes_no_file(tmp_path: Path) -> None:
    """``segstore recover`` on what a broker left after a clean shutdown (indexes built): byte for byte
    the same files after."""
    part = _compacted_partition(tmp_path / "t-0", "0\n3\n0 0\n1 123\n2 200\n")
    with segstore.open(part, format="kafka", mode="a") as store:   # the indexes, as the broker wrote them
        store.flush()
    before = {p.name: p.read_bytes() for p in part.iterdir() if p.is_file()}
    from segstore.cli import main

    assert main(["recover", str(part)]) == 0
    assert {p.name: p.read_bytes() for p in part.iterdir() if p.is_file()} == before


def test_swap_and_deleted_files_are_left_by_reads_and_completed_by_a_writable_open(tmp_path: Path) -> None:
    """docs/kafka.md says what each open does with a compaction's interrupted swap: Kafka 3.8.0
    ``LogLoader.load`` (``removeTempFilesAndCollectSwapFiles``, then the ``.swap`` renames) completes it at
    startup, and so does a writable open; a read-only open changes no file and reads the ``.log`` files as
    they stand (the log before the swap, less a segment already renamed ``.deleted``)."""
    part = tmp_path / "t-0"
    with segstore.open(tmp_path, format="kafka", mode="a", **{"segment.bytes": 100}) as store:
        for n in range(3):
            store.append_batch([Message("t", f"v{n}".encode(), key=b"k", partition=0, timestamp=1000 + n)])
    bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
    assert bases == [0, 1, 2]
    # the cleaned segment 0 (offset 1's batch, as a clean that keeps k's latest before 2 writes it) as a
    # swap, segment 1 already renamed .deleted
    (part / f"{SEG0}.log.swap").write_bytes((part / f"{1:020d}.log").read_bytes())
    (part / f"{1:020d}.log").rename(part / f"{1:020d}.log.deleted")
    listing = sorted(p.name for p in part.iterdir())
    with segstore.open(part) as store:
        assert [(r.offset, r.value) for r in store.scan()] == [(0, b"v0"), (2, b"v2")]
    assert sorted(p.name for p in part.iterdir()) == listing
    with segstore.open(part, format="kafka", mode="a") as store:
        assert [(r.offset, r.value) for r in store.scan()] == [(1, b"v1"), (2, b"v2")]
    names = sorted(p.name for p in part.iterdir())
    assert not [n for n in names if n.endswith((".swap", ".deleted"))]
    assert [n for n in names if n.endswith(".log")] == [f"{SEG0}.log", f"{2:020d}.log"]
    assert f"{1:020d}.index" not in names and f"{1:020d}.timeindex" not in names


_KILLED_WRITER = """
import os, sys, segstore
store = segstore.open(sys.argv[1], format="kafka", mode="a", **{"segment.bytes": 2048})
for i in range(200):
    store.append({"topic": "t", "partition": 0, "value": b"v%d-" % i * 20})
print("appended", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("layout", ["logdir", "partition"])
def test_reopen_after_a_kill_rebuilds_leader_epochs_from_the_recovery_point(tmp_path: Path,
                                                                          layout: str) -> None:
    # Kafka 3.8.0 core/src/main/scala/kafka/log/LogLoader.scala recoverLog: without a clean shutdown
    # every segment from the recovery point (LogManager.loadLog: 0 without a checkpoint entry) is
    # recovered, and LogSegment.recover assigns each batch's epoch to the leader epoch cache, so the
    # epochs of a log a killed writer left start at its first batch, not at the first damaged segment.

    store_path = tmp_path / "logs"
    store_path.mkdir()
    part_dir = store_path / "t-0"
    if layout == "partition":
        part_dir.mkdir()
    kill_after_append(_KILLED_WRITER, str(store_path if layout == "logdir" else part_dir))
    assert not (part_dir / "leader-epoch-checkpoint").exists()     # a kill writes no checkpoint
    assert len(list(part_dir.glob("*.log"))) > 2
    target = store_path if layout == "logdir" else part_dir
    with segstore.open(str(target), format="kafka", mode="a", **{"segment.bytes": 2048}) as store:
        store.append({"topic": "t", "partition": 0, "value": b"after"})
    assert (part_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


@pytest.mark.parametrize(("checkpoint", "cache"), [
    # an entry going back in epoch drops the later ones it conflicts with
    ("0\n3\n0 0\n3 238\n1 123\n", [(0, 0), (1, 123)]),
    # the same epoch again at a later offset changes nothing; at an earlier one it replaces it
    ("0\n3\n0 0\n1 123\n1 130\n", [(0, 0), (1, 123)]),
    ("0\n3\n0 0\n1 130\n1 123\n", [(0, 0), (1, 123)]),
    # a newer epoch at an offset not past the latest's drops that one
    ("0\n3\n0 0\n1 123\n3 100\n", [(0, 0), (3, 100)]),
    # the broker's own, monotonic: as it stands
    ("0\n3\n0 0\n1 123\n3 238\n", [(0, 0), (1, 123), (3, 238)]),
])
def test_the_epoch_cache_loads_as_the_brokers_leader_epoch_file_cache(tmp_path: Path, checkpoint: str,
                                                                     cache: list[tuple[int, int]]) -> None:
    """Kafka 3.8.0 ``LeaderEpochFileCache``'s constructor assigns each entry of the file in turn
    (``assign``: ``isUpdateNeeded``, ``maybeTruncateNonMonotonicEntries``); segstore took the lines as
    they stood, so ``info`` showed ``0 0; 3 238; 1 123`` and epoch lookups used the conflicting entries.
    The file itself is left as it is by a reader."""
    from segstore_kafka.checkpoints import LeaderEpochCache

    part = copy_writable(FIXTURES / "kafka" / "uncompressed" / "topic-0", tmp_path / "t-0")
    (part / "leader-epoch-checkpoint").write_text(checkpoint)
    assert [(e.epoch, e.start_offset) for e in
            LeaderEpochCache.load(str(part / "leader-epoch-checkpoint")).entries] == cache
    with segstore.open(part) as store:
        (info,) = store.info()["partitions"]
    assert info["leader_epochs"] == [[epoch, start] for epoch, start in cache]
    assert (part / "leader-epoch-checkpoint").read_text() == checkpoint


@pytest.mark.parametrize("damage", ["emptied log", "index entry off its batch"])
def test_recover_says_which_segments_it_rebuilt_for_what_its_check_found(tmp_path: Path, damage: str) -> None:
    """Kafka 3.8.0 LogLoader.recoverLog recovers every segment from the recovery point, and
    LogSegment.recover truncates the indexes to the valid bytes and rebuilds them: a segment whose log
    was emptied loses its index entries, as does one with an entry off its batch.  ``recover`` did it
    and answered no action ("nothing to recover") when nothing was cut; each rebuilt segment is said."""
    part = _fixture(tmp_path)
    seg = "00000000000000000073"
    if damage == "emptied log":
        (part / f"{seg}.log").write_bytes(b"")
    else:
        index = part / f"{seg}.index"
        data = bytearray(index.read_bytes())
        data[7] ^= 0x04                                             # position of slot 0
        index.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    with segstore.open(part, mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.verify() == []
    changed = sorted(name for name, data in before.items() if (part / name).read_bytes() != data)
    assert f"{seg}.index" in changed
    said = [line.split(":")[0] for line in lines]
    assert said[0] == str(part / f"{seg}.log")
    assert all(str(part / name) in said for name in changed if name.endswith(".log"))
    assert all(name.startswith(seg) or name > seg for name in changed)
    if damage == "emptied log":
        assert (part / f"{seg}.index").read_bytes() == b""
        assert (part / f"{seg}.timeindex").read_bytes() == b""


def test_recover_claims_no_txnindex_rebuild_of_a_segment_set_aside_after_a_cut(tmp_path: Path) -> None:
    """Kafka 3.8.0 LogLoader.recoverLog deletes every segment after one LogSegment.recover truncated
    (segstore sets them aside whole): a ``.txnindex`` of such a segment, judged against a transaction
    state read from the torn log before it, is neither wrong nor rebuilt.  ``recover`` said
    ``00000000000000000108.txnindex: rebuilt: expected a .txnindex entry ...`` and then removed it."""
    part = copy_writable(FIXTURES / "kafka" / "txn" / "topic-0", tmp_path / "topic-0")
    torn = part / "00000000000000000054.log"
    torn.write_bytes(torn.read_bytes()[:1500])
    with segstore.open(part, mode="a", **{"segment.bytes": 4108, "index.interval.bytes": 586}) as store:
        lines = store.recover()
    later = [line for line in lines if "00000000000000000108" in line.split(":")[0]]
    assert len(later) == 1
    assert later[0].startswith(f"{part / '00000000000000000108.log'}: removed after the cut")
    assert not (part / "00000000000000000108.txnindex").exists()
    assert lines[0].startswith(f"{torn}: rebuilt indexes over 1372 valid bytes; cut 128 bytes")


def _rename_segment(part: Path, base: int, new_base: int) -> Path:
    for suffix in (".log", ".index", ".timeindex"):
        (part / f"{base:020d}{suffix}").rename(part / f"{new_base:020d}{suffix}")
    return part / f"{new_base:020d}.log"


def test_a_batch_ending_below_its_segments_base_offset_is_named_and_survives_recover(tmp_path: Path) -> None:
    """Segment 137 renamed 150: its first two batches (137..144, 145..149) end below the base offset its
    name gives.  Kafka 3.8.0 ``LogSegment.recover`` (``ensureOffsetInRange``) throws
    ``LogSegmentOffsetOverflowException`` at the first; ``LogLoader.retryOnOffsetOverflow`` calls
    ``LocalLog.splitOverflowedSegment``, whose ``require(segment.hasOverflow)`` fails, and the broker
    does not start.  verify names the batch (it said nothing once recover had rebuilt the indexes), and
    recover indexes the rest without it, where it threw a ``CorruptIndexError`` half way through
    (indexes reset and left untrimmed) when ``index.interval.bytes`` gave the second batch an entry."""
    part = _fixture(tmp_path)
    with segstore.open(part) as store:
        offsets = [r.offset for r in store.scan()]
    log = _rename_segment(part, 137, 150)
    message = "expected batches ending at or after the segment's base offset 150 (its file name), " \
              "found one of offsets 137..144"
    with segstore.open(part) as store:
        assert [(p.path, p.pos) for p in store.verify() if message in p.message] == [(str(log), 0)]
    with segstore.open(part, format="kafka", mode="a", **{**CONFIG, "index.interval.bytes": 100}) as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(log), 0) and message in info.value.message
        assert [(p.path, p.pos, message in p.message) for p in store.verify()] == [(str(log), 0, True)]
    with segstore.open(part) as store:
        assert [(p.path, p.pos) for p in store.verify()] == [(str(log), 0)]
        assert [r.offset for r in store.scan()] == offsets


@pytest.mark.parametrize(("suffix", "entry"), [(".index", OFFSET_ENTRY.itemsize),
                                               (".timeindex", TIME_ENTRY.itemsize)])
def test_verify_names_the_index_a_crash_left_untrimmed_and_the_byte_its_zeros_start(
        tmp_path: Path, suffix: str, entry: int) -> None:
    """A closed segment's index ending in preallocated all-zero slots: Kafka 3.8 counts the file's whole
    length as entries (``AbstractIndex``: ``_entries = mmap.position() / entrySize``), so in a segment its
    recovery leaves alone they are read as entries.  verify named the ``.log`` and no byte, and said
    neither which index nor where; it now names the index file at its first zero slot."""
    part = _fixture(tmp_path)
    index = part / f"{73:020d}{suffix}"
    good = index.read_bytes()
    index.write_bytes(good + bytes(10 * entry))
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(index), len(good))]
    assert "found 10 all-zero slots" in problems[0].message
    (part / f"{73:020d}.index").unlink()
    with segstore.open(part) as store:
        assert [(p.path, p.pos) for p in store.verify()][:1] == [(str(part / f"{73:020d}.index"), None)]
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        store.recover()
        assert store.verify() == []
    assert index.read_bytes() == good


def test_recover_says_each_rebuild_once_when_the_open_already_recovered(tmp_path: Path) -> None:
    """A copy of segment 0's log as segment 50, without indexes: the writable open recovers from it (an
    offset index missing: Kafka 3.8 ``LogLoader.loadSegmentFiles``, ``NoSuchFileException``), and the
    check recover runs after it still finds what no recovery cuts (offsets going back).  recover rebuilt
    every segment from 50 a second time and listed each rebuild twice; it now lists each once."""
    part = _fixture(tmp_path)
    (part / f"{50:020d}.log").write_bytes((part / f"{SEG0}.log").read_bytes())
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
    rebuilt = [line.split(":")[0] for line in info.value.actions if "rebuilt indexes" in line]
    assert rebuilt == [str(part / f"{base:020d}.log") for base in (50, 73, 137, 217, 289)]


def test_recover_removes_the_producer_snapshots_past_the_log_end_it_cut_back_to(tmp_path: Path) -> None:
    """Kafka 3.8.0 takes a producer snapshot at each new segment's base offset (and at the log end on a
    clean shutdown).  A recovery that cuts the log back below them leaves snapshots describing producers
    of records no longer there; the broker's load deletes each past the log end
    (``ProducerStateManager.truncateAndReload`` from ``UnifiedLog.rebuildProducerState``), but once
    appends carry the log past one again the broker loads it as the state at its offset (a transaction
    open in the cut records would hang the last stable offset).  recover now removes them as the
    broker would, saying so; a snapshot at or below the new end stays."""
    from segstore_kafka.snapshot import ENTRY, write_snapshot

    part = _fixture(tmp_path)
    entries = np.zeros(1, dtype=ENTRY)
    entries[0] = (7, 0, 4, 250, 4, 1_700_000_000_000, 0, 246)          # a transaction open from 246
    for base in (73, 137, 217, 289, 300):
        (part / f"{base:020d}.snapshot").write_bytes(write_snapshot(entries))
    log = part / f"{73:020d}.log"
    _flip(log, _positions(log)[3] + 80)                                  # the log ends at 97 after recovery
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.offset_range("topic", 0)[1] == 97
    assert sorted(p.name for p in part.glob("*.snapshot")) == [f"{73:020d}.snapshot"]
    assert [line.split(":")[0] for line in lines if "producer snapshot" in line] == [
        str(part / f"{base:020d}.snapshot") for base in (137, 217, 289, 300)]


@pytest.mark.parametrize(("name", "found"), [
    ("foo.log", "Kafka's LogLoader cannot parse it"),
    ("backup.index", "Kafka's LogLoader cannot parse it"),
    ("old.snapshot", "Kafka's LogLoader cannot parse it"),
    ("x.log.swap", "Kafka's LogLoader cannot parse it"),
    ("99999999999999999999.log", "Kafka's LogLoader cannot parse it"),      # past a Java long
    ("73.log", "expected 00000000000000000073.log (the base offset, 20 digits), found '73.log'"),
    # Long.parseLong reads any BMP decimal digit: ARABIC-INDIC SEVEN, THREE is offset 73
    ("\u0667\u0663.log", "expected 00000000000000000073.log (the base offset, 20 digits)"),
    ("-73.log", "expected -00000000000000000073.log (the base offset, 20 digits)"),
    ("\u00b2.snapshot", "Kafka's LogLoader cannot parse it"),               # SUPERSCRIPT TWO: no decimal
    ("\U0001d7d5.log.swap", "Kafka's LogLoader cannot parse it"),          # a digit past the BMP
])
def test_verify_names_a_file_kafkas_loader_cannot_take_an_offset_from(tmp_path: Path, name: str,
                                                                      found: str) -> None:
    """Kafka 3.8.0 ``LogLoader.loadSegmentFiles`` takes the offset of every ``.log`` and index file (and
    ``removeTempFilesAndCollectSwapFiles`` of every ``.swap``/``.cleaned``, ``ProducerStateManager`` of
    every ``.snapshot``) with ``LogFileUtils.offsetFromFileName``, ``Long.parseLong`` of the text before
    the first dot: a ``NumberFormatException`` nothing catches, and the broker does not start.  A
    ``.log`` named by an unpadded offset is opened as ``%020d.log`` of it, its own records never read.
    verify passed both; it names them now, and recover, which cannot tell what they are, exits 1."""
    part = _fixture(tmp_path)
    (part / name).write_bytes((part / f"{73:020d}.log").read_bytes())
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos, found in p.message) for p in problems] == [(str(part / name), None, True)]
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store, \
            pytest.raises(UnrepairedDataError) as info:
        store.recover()
    assert info.value.path == str(part / name)
    assert (part / name).exists()


def test_a_snapshot_name_long_parselong_refuses_is_named_not_a_crash(tmp_path: Path) -> None:
    """Kafka 3.8.0 ``ProducerStateManager.listSnapshotFiles`` takes every ``*.snapshot``'s offset with
    ``LogFileUtils.offsetFromFileName`` (``Long.parseLong``): twenty SUPERSCRIPT TWOs are ``str.isdigit``
    but no decimal digits, and ``int()`` raised ValueError out of ``transactions --producers``."""
    from conftest import cli_run

    part = _fixture(tmp_path)
    (part / ("\u00b2" * 20 + ".snapshot")).write_bytes(b"")
    code, out, err = cli_run("transactions", part, "--producers")
    assert code == 0 and "Traceback" not in err, err
    code, out, err = cli_run("verify", part)
    assert code == 1 and "LogFileUtils.offsetFromFileName: NumberFormatException" in out + err


def test_a_corrupt_producer_snapshot_is_named_and_a_writable_open_removes_it_as_the_broker(
        tmp_path: Path) -> None:
    """Kafka 3.8.0 ``ProducerStateManager.loadFromSnapshot`` deletes a snapshot ``readSnapshot`` refuses
    (``CorruptSnapshotException``: version, CRC32C) and one past the log end (``truncateAndReload``),
    then rebuilds the producer state from an older snapshot or the log.  verify said nothing of either;
    it now names the corrupt one at its CRC, and a writable open (recover, an append) removes both as
    the broker's load does, even with nothing to recover in the log: a log cut back at a batch boundary
    leaves no torn tail, and records appended past the stale snapshot would make the broker load it."""
    from segstore_kafka.snapshot import CRC_POS, ENTRY, write_snapshot

    part = _fixture(tmp_path)
    entries = np.zeros(1, dtype=ENTRY)
    entries[0] = (7, 0, 4, 250, 4, 1_700_000_000_000, 0, -1)
    good = write_snapshot(entries)
    (part / f"{289:020d}.snapshot").write_bytes(good)
    bad = part / f"{217:020d}.snapshot"
    bad.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    (part / f"{400:020d}.snapshot").write_bytes(good)                 # past the log end, 300
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(bad), CRC_POS)]
    assert "ProducerStateManager.loadFromSnapshot" in problems[0].message
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.verify() == []
    assert [line.split(":")[0] for line in lines] == [str(bad), str(part / f"{400:020d}.snapshot")]
    assert sorted(p.name for p in part.glob("*.snapshot")) == [f"{289:020d}.snapshot"]


def test_recover_of_a_preallocated_segment_keeps_no_zeros_and_reads_none_whole(tmp_path: Path) -> None:
    """Kafka 3.8.0 with ``preallocate`` makes the active segment ``segment.bytes`` long at once
    (``FileRecords.openChannel``: ``setLength``, a sparse file on Linux); after a crash its log ends in
    that zero tail, which ``LogSegment.recover`` cuts (a length of 0 is below ``RECORD_OVERHEAD_V0``).
    recover read the whole tail into memory and kept it as a ``.cut`` file of as many zeros (a 1 GiB
    segment: 1 GiB of memory and 1 GiB written to a disk that may be full).  The zeros hold nothing to
    keep: a torn batch before them is kept byte for byte, its zeros a hole of the copy; a tail of zeros
    only keeps no file."""
    part = _fixture(tmp_path)
    log = part / "00000000000000000289.log"
    whole = log.read_bytes()
    with open(log, "r+b") as f:
        f.truncate(256 << 20)                                   # preallocated: a hole after the data
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.verify() == []
    assert log.read_bytes() == whole
    assert list(part.glob("*.cut-*")) == []
    assert any("cut 268434167 bytes at 1289 (all zeros: nothing to keep)" in line for line in lines)
    torn = whole[:-10]                                           # a torn last batch, then the zeros
    log.write_bytes(torn)
    with open(log, "r+b") as f:
        f.truncate(1 << 20)
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        store.recover()
    assert log.read_bytes() == b""
    kept = part / "00000000000000000289.log.cut-0"
    assert kept.read_bytes() == torn + bytes((1 << 20) - len(torn))
    assert kept.stat().st_blocks * 512 < 1 << 19                # the zeros are a hole, not written


@pytest.mark.parametrize(("entry", "found"), [
    ((1_700_000_002_627, 500), "found offset 573 past its last batch's last offset 136"),
    ((1_800_000_000_000, 63),
     "found timestamp 1800000000000 above the largest of its batches, 1700000002627"),
])
def test_verify_names_a_time_index_entry_the_segments_batches_do_not_hold(tmp_path: Path, entry: tuple,
                                                                           found: str) -> None:
    """Kafka 3.8.0 appends to a ``.timeindex`` only (the max timestamp so far, its batch's offset) of
    batches appended to that segment (``LogSegment.append``, ``recover``) and takes the last entry for
    the segment's largest timestamp (``readMaxTimestampAndOffsetSoFar``).  An entry past the segment's
    last offset or above every batch's timestamp makes ``UnifiedLog.fetchOffsetByTimestamp`` pick the
    segment for a time none of its records reach and answer no offset (later segments hold one), and
    keeps the segment from time retention.  verify passed both; it names the entry, recover rebuilds."""
    part = _fixture(tmp_path)
    index = part / f"{73:020d}.timeindex"
    good = index.read_bytes()
    data = bytearray(good)
    data[48:60] = np.array([entry], dtype=TIME_ENTRY).tobytes()
    index.write_bytes(bytes(data))
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(index), 48)]
    assert f"expected the entry of slot 4 to name a batch of the segment, {found}" == problems[0].message
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        store.recover()
        assert store.verify() == []
    assert index.read_bytes() == good


def test_recover_says_it_moves_a_checkpoint_past_the_log_end_back_to_it(tmp_path: Path, capsys) -> None:
    """A log dir whose ``recovery-point-offset-checkpoint`` and ``replication-offset-checkpoint`` say 500
    of a partition ending at 300 (verify names both): Kafka 3.8.0 ``LogLoader.recoverLog`` takes
    ``min(recoveryPoint, logEndOffset)`` and ``UnifiedLog.updateHighWatermark`` clamps the high watermark
    to the log end, and recover writes the same at close.  It said "nothing to recover" while it
    rewrote both files; it now says what it set each to."""
    from segstore_kafka.checkpoints import read_offsets, write_offsets

    from segstore.cli import main

    logs = tmp_path / "logs"
    copy_writable(FIXTURES / "kafka" / "uncompressed" / "topic-0", logs / "topic-0")
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        write_offsets(str(logs / name), {("topic", 0): 500})
    assert main(["recover", str(logs)]) == 0
    out = capsys.readouterr().out
    assert "nothing to recover" not in out
    for name, label in (("recovery-point-offset-checkpoint", "recovery point"),
                        ("replication-offset-checkpoint", "high watermark")):
        assert f"{logs / name}: the {label} of topic-0, 500, is past its log end: set to 300" in out
        assert read_offsets(str(logs / name)) == {("topic", 0): 300}
    assert main(["verify", str(logs)]) == 0


def test_a_damaged_swap_is_named_and_recover_keeps_the_segments_it_replaces(tmp_path: Path) -> None:
    """A compaction's ``00000000000000000073.log.swap`` (segments 73 and 137 cleaned into one) with a bit
    flipped in it.  Kafka 3.8.0 ``LogLoader.load`` installs every swap ``removeTempFilesAndCollectSwapFiles``
    keeps (deleting the segments in ``[its base, its next offset)``), then ``LogSegment.recover`` cuts it at
    the damage: records intact in the replaced segments are gone.  verify said ok (it read the segments as
    they stand and never the swap); recover completed the swap as the broker does and removed both
    segments without keeping them.  verify now names the swap's damage, and recover keeps the ``.log``
    of each segment it replaces (``NAME.log.cut-0``) when the swap is damaged."""
    part = _fixture(tmp_path)
    originals = {base: (part / f"{base:020d}.log").read_bytes() for base in (73, 137)}
    swap = part / f"{73:020d}.log.swap"
    swap.write_bytes(originals[73] + originals[137])
    bad = len(originals[73]) + _positions(part / f"{137:020d}.log")[2] + 80
    _flip(swap, bad)
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, "installs this swap" in p.message) for p in problems] == [(str(swap), True)]
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.verify() == []
    for base, data in originals.items():
        assert (part / f"{base:020d}.log.cut-0").read_bytes() == data
        assert any(f"{base:020d}.log: removed (replaced by an interrupted swap, which is damaged" in line
                   for line in lines)


def test_a_segment_whose_offsets_overflow_its_index_is_recovered_without_a_crash(tmp_path: Path) -> None:
    """One segment at base 0 holding offsets 0, 1, 3000000000, 3000000001: more than
    ``Integer.MAX_VALUE`` past its base, as Kafka before 2.0 could leave it (KAFKA-6264).  Kafka 3.8.0
    ``LogSegment.recover`` throws ``LogSegmentOffsetOverflowException`` there and ``LogLoader`` splits the
    segment (``LocalLog.splitOverflowedSegment``).  A writable open of it died with a
    ``CorruptIndexError`` half way through rebuilding its indexes (left preallocated) and verify then
    said ok; now the batches no index can name stay unindexed, verify names the first, recover exits 1
    on it, and the records read as before."""
    from segstore_kafka.batch import encode_batch

    part = tmp_path / "t-0"
    part.mkdir()
    offsets = [0, 1, 3_000_000_000, 3_000_000_001]
    log = part / f"{SEG0}.log"
    log.write_bytes(b"".join(encode_batch([(b"k", b"v" * 50, 1_700_000_000_000 + i, [])], base_offset=o)
                             for i, o in enumerate(offsets)))
    third = _positions(log)[2]
    message = "expected batches ending at most 2147483647 past the segment's base offset 0, found one of " \
              "offsets 3000000000..3000000000"
    with segstore.open(part, format="kafka", mode="a", **{"index.interval.bytes": 10}) as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(log), third) and message in info.value.message
    with segstore.open(part) as store:
        assert [(p.path, p.pos) for p in store.verify()] == [(str(log), third)]
        assert [r.offset for r in store.scan()] == offsets
    assert (part / f"{SEG0}.index").stat().st_size == 8              # trimmed: the entry of offset 1 only


@pytest.mark.parametrize("case", ["renamed", "empty-active"])
def test_verify_names_a_segment_named_below_the_end_of_the_one_before(tmp_path: Path, case: str) -> None:
    """Kafka 3.8.0 maps segments by the base offset of their names (``LogSegments``) and checks nothing
    across them: segment 73 renamed 50 (its batches still from 73) makes a fetch from 60 read it
    (``floorSegment``) and return 73 on, skipping 60..72 of segment 0; an empty active segment named 290
    of a log ending at 300 puts the log end back at 290 (``readNextOffset``), and the next append reuses
    offsets.  verify passed both once recover had rebuilt the renamed segment's indexes; it names them."""
    part = _fixture(tmp_path)
    if case == "renamed":
        seg, before, end = _rename_segment(part, 73, 50), SEG0, 73
    else:
        seg, before, end = part / f"{290:020d}.log", "00000000000000000289", 300
        seg.write_bytes(b"")
    message = f"expected a base offset of at least {end} (the end of {before}.log), found {int(seg.stem)}"
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(seg), None) and message in info.value.message
    with segstore.open(part) as store:
        assert [(p.path, p.pos, message in p.message) for p in store.verify()] == [(str(seg), None, True)]


def test_recover_says_when_it_adds_leader_epochs_the_checkpoint_lacked(tmp_path: Path, capsys) -> None:
    """Kafka 3.8.0 ``LogSegment.recover`` assigns each recovered batch's epoch newer than the cache's latest
    (``LeaderEpochFileCache.assign``, which logs each new entry), and the cache is written back.  recover
    did the same to a partition whose ``leader-epoch-checkpoint`` was gone or short and printed "nothing
    to recover" while it wrote the file; it now says which entries it added."""
    from segstore.cli import main

    part = _fixture(tmp_path)
    checkpoint = part / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n1\n0 0\n")
    assert main(["recover", str(part)]) == 0
    assert capsys.readouterr().out == (f"{checkpoint}: added the leader epochs of recovered batches the "
                                       "checkpoint lacked: 1 123, 3 238\n")
    assert checkpoint.read_text() == "0\n3\n0 0\n1 123\n3 238\n"
    assert main(["recover", str(part)]) == 0
    assert capsys.readouterr().out == f"{part}: nothing to recover\n"


def test_recover_keeps_a_legacy_wrapper_whose_inner_set_does_not_read_and_what_follows(
        tmp_path: Path) -> None:
    """Kafka 3.8 ``LogSegment.recover`` checks each batch with ``ensureValid()``: for a v0/v1 entry
    ``AbstractLegacyRecordBatch.ensureValid`` checks the outer message's own size and CRC, never the
    compressed inner set.  recover cut the segment at a gzip wrapper whose first inner message's CRC
    fails (``cut 145 bytes at 39``), the good message after it lost; it stays, and verify names it."""
    import zlib

    from segstore_kafka import compression

    def message(offset: int, attributes: int, value: bytes, timestamp: int) -> bytes:
        body = struct.pack(">bbqi", 1, attributes, timestamp, -1) + struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body

    inner = bytearray(b"".join(message(i, 0, b"v%d" % i, 100 + i) for i in range(3)))
    inner[20] ^= 1                                                  # its first message's timestamp
    first = message(0, 0, b"first", 5)
    wrapper = message(3, 1, compression.compress("gzip", bytes(inner)), 0)
    data = first + wrapper + message(4, 0, b"after", 5)
    part, log = _one_segment(tmp_path, data, "old-0")
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError):
            store.recover()
    assert log.read_bytes() == data and list(part.glob("*.cut-*")) == []
    with segstore.open(part) as store:
        assert [(p.path, p.pos) for p in store.verify()] == [(str(log), len(first))]
        with pytest.raises(CorruptDataError) as info:
            _values(store)
        assert (info.value.path, info.value.pos) == (str(log), len(first))


@pytest.mark.parametrize("segment", [SEG0, "00000000000000000289"])
def test_recover_keeps_a_batch_of_an_unknown_magic_whose_size_and_crc_hold(tmp_path: Path,
                                                                          segment: str) -> None:
    """Kafka 3.8 ``FileLogInputStream.nextBatch`` reads an entry of magic 2 or more as a
    ``DefaultFileChannelRecordBatch`` (no check of the magic), and ``LogSegment.recover`` keeps it when
    ``DefaultRecordBatch.ensureValid`` holds (size >= 61 and CRC-32C, which does not cover the magic
    byte), its ``lastOffset`` counting in the log end offset.  recover cut the segment at such a batch
    and set every later segment aside (``cut 6362 bytes at 159 ...: expected magic 0, 1 or 2, found 7``).
    It stays; reads and verify name its magic (``ByteBufferLogInputStream``: no consumer reads it)."""
    part = _fixture(tmp_path)
    log = part / f"{segment}.log"
    batches = list(iter_batches(log.read_bytes(), path=str(log)))
    bad = batches[2] if segment == SEG0 else batches[-1]
    data = bytearray(log.read_bytes())
    data[bad.position + MAGIC_OFFSET] = 7
    log.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in part.glob("*.log")}
    with segstore.open(part) as store:
        end = store.offset_range("topic", 0)[1]
    assert end == 289 + sum(b.record_count for b in iter_batches(
        (part / "00000000000000000289.log").read_bytes()))
    with segstore.open(part, format="kafka", mode="a", **CONFIG) as store:
        with pytest.raises(UnrepairedDataError):
            store.recover()
        assert store.offset_range("topic", 0)[1] == end
    assert {p.name: p.read_bytes() for p in part.glob("*.log")} == before
    assert list(part.glob("*.cut-*")) == []
    with segstore.open(part) as store:
        problems = store.verify()
        assert [(p.path, p.pos) for p in problems] == [(str(log), bad.position + MAGIC_OFFSET)]
        assert "magic" in problems[0].message
        with pytest.raises(CorruptDataError, match="magic") as info:
            _values(store)
        assert (info.value.path, info.value.pos) == (str(log), bad.position + MAGIC_OFFSET)


def test_an_empty_control_batch_is_read_verified_and_recovered_as_kafka_does(tmp_path: Path) -> None:
    """A control batch of no records (``DefaultRecordBatch.writeEmptyHeader``: a marker the cleaner
    emptied) completes nothing: Kafka 3.8 ``ProducerAppendInfo.append`` ("An empty control batch means
    the entire transaction has been cleaned from the log") and the consumer's
    ``CompletedFetch.containsAbortMarker`` (no record: no abort) pass it.  recover raised
    ``expected a control batch with one control record, found none`` after resetting the indexes,
    verify named it, and a read took the next batch's first record as its marker
    (``a control record key of 4 bytes, found b'k2'``, no path)."""
    codec_batch = encode_batch(
        [(b"k", b"v", 1)], base_offset=0, producer_id=5, producer_epoch=0, base_sequence=0,
        is_transactional=True)
    marker = next(iter_batches(encode_control_batch("ABORT", base_offset=1, producer_id=5, producer_epoch=0,
                                                    coordinator_epoch=0, timestamp=2)))
    data = codec_batch + encode_empty_batch(marker) + encode_batch([(b"k2", b"v2", 3)], base_offset=2)
    part, log = _one_segment(tmp_path, data)
    with segstore.open(part) as store:
        assert store.verify() == []
        assert [r.offset for r in store.scan()] == [0, 2]
        list(store.read("t", 0, isolation="read_committed"))          # asks each control batch its type
    with segstore.open(part, format="kafka", mode="a") as store:
        store.recover()
        assert store.offset_range("t", 0)[1] == 3
    assert log.read_bytes() == data and list(part.glob("*.cut-*")) == []
    assert (part / f"{SEG0}.index").stat().st_size == 0


def test_a_batch_whose_last_offset_passes_long_max_is_named_not_a_crash(tmp_path: Path) -> None:
    """A batch of base offset ``Long.MAX_VALUE - 1`` and last offset delta 2 (its CRC holding): Kafka
    3.8 ``DefaultRecordBatch.lastOffset`` (``baseOffset + lastOffsetDelta``) wraps below the segment's
    base and ``LogSegment.recover`` throws ``LogSegmentOffsetOverflowException`` (``ensureOffsetInRange``).
    verify and recover died with ``OverflowError: Python int too large to convert to C long``; the
    batch is named as any batch no index can name, its records as past int64."""
    from segstore_kafka.batch import ATTRIBUTES_OFFSET, HEADER

    bad = bytearray(encode_batch([(b"k%d" % i, b"v", 2000 + i) for i in range(3)], base_offset=1))
    fields = list(HEADER.unpack_from(bad))
    fields[0] = (1 << 63) - 2
    HEADER.pack_into(bad, 0, *fields)
    struct.pack_into(">I", bad, CRC_OFFSET, crc32c.crc32c(bytes(bad[ATTRIBUTES_OFFSET:])))
    first = encode_batch([(b"a", b"x", 1000)], base_offset=0)
    data = first + bytes(bad) + encode_batch([(b"z", b"y", 3000)], base_offset=4)
    part, log = _one_segment(tmp_path, data)
    with segstore.open(part) as store:
        problems = store.verify()
    assert (problems[0].path, problems[0].pos) == (str(log), len(first))
    assert "found one of offsets 9223372036854775806..9223372036854775808" in problems[0].message
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(log), len(first))
    assert log.read_bytes() == data


@pytest.mark.parametrize("open_txn", [True, False])
def test_recover_cuts_after_a_marker_that_does_not_parse_as_kafka_does(tmp_path: Path,
                                                                      open_txn: bool) -> None:
    """Kafka 3.8 ``LogSegment.recover`` counts a batch's bytes as valid, then hands a batch with a
    producer id to ``updateProducerState``: ``ProducerAppendInfo.append`` reads a control batch's record
    with ``EndTransactionMarker.deserialize``, whose ``InvalidRecordException`` (a key under 4 bytes) the
    recovery catches, cutting the segment after that batch.  recover raised the error after resetting the
    indexes (left preallocated, 10 MiB each), cut nothing, and without an open transaction did not read
    the marker at all; now it cuts where Kafka does, keeping the cut bytes."""
    data, marker, after = marked_transaction(b"\x00", b"\x00" * 6, open_txn=open_txn)
    part, log = _one_segment(tmp_path, data + marker + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError):      # the marker stays (Kafka keeps it), named
            store.recover()
        assert store.offset_range("t", 0)[1] == 2
    assert log.read_bytes() == data + marker
    assert Path(f"{log}.cut-{len(data + marker)}").read_bytes() == after
    assert (part / f"{SEG0}.index").stat().st_size == 0


def test_recover_keeps_an_entry_of_a_negative_magic_whose_size_and_crc_32_hold(tmp_path: Path) -> None:
    """Kafka 3.8 ``FileLogInputStream.nextBatch`` frames any magic below 2 as a legacy entry
    (``LegacyFileChannelRecordBatch``), and ``LogSegment.recover`` keeps it when
    ``LegacyRecord.ensureValid`` holds: a size of at least 14 and its CRC-32 (over the magic on).
    recover cut the segment there (``expected magic 0, 1 or 2, found -1``); it stays, reads name
    its magic, and one whose CRC-32 fails is cut as before."""
    import zlib

    def message(offset: int, magic: int, value: bytes) -> bytes:
        body = struct.pack(">bbqi", magic, 0, 5, -1) + struct.pack(">i", len(value)) + value
        return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body

    first, odd, after = message(0, 1, b"a"), message(1, -1, b"b"), message(2, 1, b"c")
    part, log = _one_segment(tmp_path, first + odd + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(log), len(first) + 16)
        assert store.offset_range("t", 0)[1] == 3
    assert log.read_bytes() == first + odd + after and list(part.glob("*.cut-*")) == []
    with segstore.open(part) as store:
        with pytest.raises(CorruptDataError, match="magic") as err:
            _values(store)
        assert (err.value.path, err.value.pos) == (str(log), len(first) + 16)
    bad = bytearray(odd)
    bad[-1] ^= 1
    log.write_bytes(first + bytes(bad) + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        store.recover()
    assert log.read_bytes() == first


def test_recover_cuts_nothing_at_a_compressed_marker_whose_stream_does_not_inflate(tmp_path: Path) -> None:
    """A gzip control batch whose stream's header is wrong (its CRC holding): Kafka 3.8
    ``GzipCompression.wrapForInput`` throws a ``KafkaException``, which ``LogSegment.recover`` does not
    catch (the log does not load): nothing is cut, and the batch is named."""
    data, built, after = marked_transaction(b"\x00\x00\x00\x00", b"\x00" * 6, compression="gzip")
    marker = bytearray(built)
    marker[61] ^= 0xFF                                              # the gzip magic
    struct.pack_into(">I", marker, CRC_OFFSET, crc32c.crc32c(bytes(marker[21:])))
    part, log = _one_segment(tmp_path, data + bytes(marker) + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert info.value.path == str(log)
    assert log.read_bytes() == data + bytes(marker) + after and list(part.glob("*.cut-*")) == []


def _with_a_later_segment(tmp_path: Path, data: bytes) -> tuple[Path, Path, Path, bytes]:
    """``tmp_path/t-0`` of segment 0 holding ``data`` and segment 40 holding one batch, their indexes
    trimmed and empty as a clean shutdown left them: the directory, the two ``.log`` files and the later
    one's bytes."""
    later = encode_batch([(b"k", b"w", 4_000)], base_offset=40)
    part, log = _one_segment(tmp_path, data)
    next_log = part / "00000000000000000040.log"
    next_log.write_bytes(later)
    for name in (SEG0, "00000000000000000040"):
        for suffix in (".index", ".timeindex"):
            (part / f"{name}{suffix}").write_bytes(b"")
    return part, log, next_log, later


@pytest.mark.parametrize("index", ["offset index entry", "time index entry forced in at the end"])
def test_recover_empties_a_segment_whose_offsets_make_an_index_go_back_as_kafkas_loader_does(
        tmp_path: Path, index: str) -> None:
    """A log whose offsets go back (a batch of offset 5 after one of 20): Kafka 3.8.0 ``LogSegment.recover``
    rebuilds the indexes and ``OffsetIndex.append`` (an offset not above the last entry's) or, for the
    entry forced in at the end, ``TimeIndex.maybeAppend`` (an offset below the last entry's) throws
    ``InvalidOffsetException``; ``LogLoader.recoverLog`` catches it and calls
    ``segment.truncateTo(segment.baseOffset)``: the segment is emptied and, its bytes truncated, every later
    segment deleted.  segstore raised ``CorruptIndexError`` (``expected an offset above the last indexed 20,
    found 5``) after resetting the indexes, leaving both preallocated (10 MiB each); now it empties the
    segment as the broker does, keeping what it cuts."""
    offsets = [0, 10, 20, 5, 30] if index == "offset index entry" else [0, 10, 20, 5]
    data = b"".join(encode_batch([(b"k", b"v" * 100, 1_000 + i)], base_offset=o)
                    for i, o in enumerate(offsets))
    part, log, next_log, later = _with_a_later_segment(tmp_path, data)
    # 171-byte batches: an entry for every batch after the first, or only for the one of offset 20
    config = {"index.interval.bytes": 50 if index == "offset index entry" else 300}
    with segstore.open(part, format="kafka", mode="a", **config) as store:
        lines = store.recover()
        assert store.offset_range("t", 0) == (0, 0)
        assert _values(store) == []
    assert "InvalidOffsetException" in lines[0] and f"{log}:513:" in lines[0]
    assert log.read_bytes() == b"" and Path(f"{log}.cut-0").read_bytes() == data
    assert not next_log.exists() and Path(f"{next_log}.cut-0").read_bytes() == later
    for suffix in (".index", ".timeindex"):
        assert (part / f"{SEG0}{suffix}").stat().st_size == 0


@pytest.mark.parametrize("index", ["offset index entry", "time index entry forced in at the end"])
def test_recover_keeps_the_batches_before_an_index_entry_at_the_base_offset_as_kafkas_truncate_to_does(
        tmp_path: Path, index: str) -> None:
    """Kafka 3.8.0 ``LogLoader.recoverLog`` (core/src/main/scala/kafka/log/LogLoader.scala) answers
    ``InvalidOffsetException`` from ``recoverSegment`` with ``segment.truncateTo(segment.baseOffset)``,
    and ``LogSegment.truncateTo``
    (storage/src/main/java/org/apache/kafka/storage/internals/log/LogSegment.java) cuts at
    ``translateOffset(baseOffset)``: ``OffsetIndex.lookup`` in the index ``recover`` half rebuilt, then
    the first batch from there whose last offset reaches the base offset. Where that index's first entry
    names the base offset itself (batch B of offset 0 after A of 0..5: the entry (0, 721)), the cut is at
    B and A stays. The storage oracle's classes (``LogSegment.recover``, ``truncateTo``):
    "truncateTo(base) cut 342", segment 0 of 721 bytes, next offset 6, both indexes empty, segment 40
    deleted. segstore cut all 1,063 bytes at 0 (offsets 0..5 gone); now 342 at 721, kept aside."""
    a = encode_batch([(b"k", b"v" * 100, 1_000 + i) for i in range(6)], base_offset=0)
    b = encode_batch([(b"k", b"w" * 100, 500)], base_offset=0)
    # the offset index goes back at C (offset 0 again); the forced time entry at D (max timestamp 3000 of
    # offset 3, below the entry (1005, 5) made at B)
    tail = (encode_batch([(b"k", b"x" * 100, 3_000)], base_offset=0) if index == "offset index entry"
            else encode_batch([(b"k", b"x" * 100, 3_000)], base_offset=3))
    part, log, next_log, later = _with_a_later_segment(tmp_path, a + b + tail)
    # 721-, 171- and 171-byte batches: B gets the first entry; C another (50), or D none (300)
    config = {"index.interval.bytes": 50 if index == "offset index entry" else 300}
    with segstore.open(part, format="kafka", mode="a", **config) as store:
        lines = store.recover()
        assert store.offset_range("t", 0) == (0, 6)
        assert [r.offset for r in store.scan()] == list(range(6))
    assert "InvalidOffsetException" in lines[0] and f"cut 342 bytes at {len(a)}" in lines[0]
    assert log.read_bytes() == a and Path(f"{log}.cut-{len(a)}").read_bytes() == b + tail
    assert not next_log.exists() and Path(f"{next_log}.cut-0").read_bytes() == later
    # truncateTo left both indexes empty; the close forces the max timestamp in (LogSegment.close)
    assert (part / f"{SEG0}.index").read_bytes() == b""
    assert (part / f"{SEG0}.timeindex").read_bytes() == struct.pack(">qi", 1_005, 5)


@pytest.mark.parametrize("type_id", [2, 9])
def test_a_producers_control_batch_of_another_type_is_named_and_kept_as_kafka_cannot_load_it(
        tmp_path: Path, type_id: int) -> None:
    """A control batch with a producer id whose record is no end-transaction marker (type 2,
    ``LEADER_CHANGE``, or 9, which ``ControlRecordType.fromTypeId`` gives as ``UNKNOWN``): Kafka 3.8.0
    ``LogSegment.updateProducerState`` hands it to ``ProducerAppendInfo.append``, whose
    ``EndTransactionMarker.deserialize`` throws ``IllegalArgumentException``
    (``ensureTransactionMarkerControlType``), which ``LogSegment.recover`` does not catch: the broker does
    not load the log.  segstore's verify found nothing and recover passed it (closing the producer's
    transaction as a COMMIT would); now verify names it and recover keeps it, exiting 1, as for the other
    batches the broker cannot load."""
    data, marker, after = marked_transaction(struct.pack(">hh", 0, type_id), b"\x00" * 6)
    part, log = _one_segment(tmp_path, data + marker + after)
    with segstore.open(part) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(log), len(data))]
    assert "IllegalArgumentException" in problems[0].message
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(log), len(data))
        assert store.offset_range("t", 0)[1] == 3
    assert log.read_bytes() == data + marker + after and list(part.glob("*.cut-*")) == []


def test_recover_reads_a_marker_of_magic_3_as_v2_as_the_brokers_producer_state_does(tmp_path: Path) -> None:
    """An ABORT marker whose magic byte is 3 (the CRC-32C, over bytes 21 on, holds): Kafka 3.8.0
    ``FileLogInputStream.nextBatch`` frames it as a ``DefaultFileChannelRecordBatch``, ``LogSegment.recover``
    keeps it (``ensureValid``), assigns its leader epoch (magic >= 2) and ``ProducerAppendInfo.append``
    decodes its record as v2: the transaction is aborted and ``.txnindex`` gets its entry.  segstore kept
    the batch but skipped it for epochs and transactions: no ``.txnindex`` (read_committed readers got the
    aborted record) and the epoch started one batch late (``2 2`` for ``2 1``)."""
    data = encode_batch([(b"k", b"v", 1)], base_offset=0, producer_id=5, producer_epoch=0, base_sequence=0,
                        is_transactional=True, partition_leader_epoch=1)
    marker = bytearray(encode_control_batch("ABORT", base_offset=1, producer_id=5, producer_epoch=0,
                                            coordinator_epoch=0, timestamp=2, partition_leader_epoch=2))
    marker[MAGIC_OFFSET] = 3
    after = encode_batch([(b"k2", b"v2", 3)], base_offset=2, partition_leader_epoch=2)
    part, log = _one_segment(tmp_path, data + bytes(marker) + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError, match="magic"):      # the magic stays named, as before
            store.recover()
    assert log.read_bytes() == data + bytes(marker) + after
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n2 1\n"
    # version 0, producer 5, first offset 0, last offset 1, last stable offset 2
    assert (part / f"{SEG0}.txnindex").read_bytes() == struct.pack(">hqqqq", 0, 5, 0, 1, 2)


@pytest.mark.parametrize("stream", ["snappy header only", "gzip member of part of the record",
                                    "gzip member cut short"])
def test_recover_cuts_after_a_compressed_marker_whose_whole_stream_holds_too_few_bytes(
        tmp_path: Path, stream: str) -> None:
    """A compressed marker whose stream ends before its record does.  Where the stream itself reads to its
    end (a xerial snappy stream of its header alone, which ``SnappyInputStream`` ends at a block boundary;
    a whole gzip member of part of the record), Kafka 3.8.0 ``DefaultRecord.readFrom`` /
    ``ByteUtils.readUnsignedVarint`` find the record short: an ``InvalidRecordException``
    (``StreamRecordIterator.readNext``) that ``LogSegment.recover`` catches after counting the batch, so
    the segment is cut after it, as for an uncompressed marker.  segstore cut nothing for any compressed
    marker.  A gzip member cut short is an ``EOFException`` (``IOException``: a ``KafkaException``), not
    caught: nothing is cut, as before."""
    from segstore_kafka import compression
    from segstore_kafka.batch import _encode_records_py

    name = "snappy" if stream.startswith("snappy") else "gzip"
    data, built, after = marked_transaction(b"\x00\x00\x00\x00", b"\x00" * 6, compression=name)
    marker = bytearray(built)
    records = _encode_records_py([(b"\x00\x00\x00\x00", b"\x00" * 6, 2)], None)[0]
    if stream == "snappy header only":
        marker = marker[:61 + 16]
    elif stream == "gzip member of part of the record":
        marker = marker[:61] + compression.compress("gzip", records[:5])
    else:
        marker = marker[:-12]
    struct.pack_into(">i", marker, 8, len(marker) - 12)
    struct.pack_into(">I", marker, CRC_OFFSET, crc32c.crc32c(bytes(marker[21:])))
    part, log = _one_segment(tmp_path, data + bytes(marker) + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as info:       # the marker stays (Kafka keeps it), named
            store.recover()
        assert info.value.path == str(log)
    if stream == "gzip member cut short":
        assert log.read_bytes() == data + bytes(marker) + after and list(part.glob("*.cut-*")) == []
    else:
        assert log.read_bytes() == data + bytes(marker)
        assert Path(f"{log}.cut-{len(data + marker)}").read_bytes() == after


@pytest.mark.parametrize("null", ["key", "value"])
def test_recover_cuts_nothing_at_a_marker_of_a_null_key_or_value_as_kafka_cannot_load_it(
        tmp_path: Path, null: str) -> None:
    """A producer's control batch whose record's key is null, or whose value is null under an ABORT key:
    Kafka 3.8.0 ``ProducerAppendInfo.append`` hands the key to ``ControlRecordType.parseTypeId`` and the
    value to ``EndTransactionMarker.deserializeValue``, which call ``remaining()`` on it: a
    ``NullPointerException``, which ``LogSegment.recover`` does not catch (only ``CorruptRecordException``
    and ``InvalidRecordException``), so the broker does not load the log and nothing is cut.  segstore cut
    the segment after the marker, as for a marker too short to parse."""
    key, value = (None, b"\x00" * 6) if null == "key" else (struct.pack(">hh", 0, 0), None)
    data, marker, after = marked_transaction(key, value)
    part, log = _one_segment(tmp_path, data + marker + after)
    with segstore.open(part, format="kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.recover()
        assert (info.value.path, info.value.pos) == (str(log), len(data))
    assert log.read_bytes() == data + marker + after and list(part.glob("*.cut-*")) == []


def test_a_missing_offset_index_below_the_recovery_point_rebuilds_that_segment_alone(tmp_path: Path) -> None:
    """Kafka 3.8.0 ``LogLoader.loadSegmentFiles`` (core/src/main/scala/kafka/log/LogLoader.scala): a
    segment whose offset index is missing fails ``LogSegment.sanityCheck`` (``NoSuchFileException``)
    and is recovered alone (``recoverSegment``); ``recoverLog`` then recovers only the segments from the
    recovery point.  A log dir whose checkpoint puts the recovery point at the log end (300) and whose
    segment 73 lost its ``.index``: segstore rebuilt the indexes of 73 and of every segment after it
    (137, 217, 289: checked against the storage oracle, which rebuilds 73 only); now 73 alone, as the
    broker wrote it, and the later segments keep their files."""
    from segstore_kafka.checkpoints import write_offsets

    logs = tmp_path / "logs"
    part = copy_writable(FIXTURES / "kafka" / "uncompressed" / "topic-0", logs / "topic-0")
    write_offsets(str(logs / "recovery-point-offset-checkpoint"), {("topic", 0): 300})
    seg = f"{73:020d}"
    written = (part / f"{seg}.index").read_bytes()
    (part / f"{seg}.index").unlink()
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    with segstore.open(str(logs), format="kafka", mode="a", **CONFIG) as store:
        lines = store.recover()
        assert store.verify() == []
    assert [line.split(":")[0] for line in lines if "rebuilt indexes" in line] == [str(part / f"{seg}.log")]
    assert (part / f"{seg}.index").read_bytes() == written       # LogSegment.recover's rebuild: the broker's
    assert sorted(name for name, data in before.items() if (part / name).read_bytes() != data) == []


def test_a_writer_cuts_a_last_batch_whose_end_a_power_loss_zeroed_before_it_appends(tmp_path: Path) -> None:
    """A power loss kept the last batch's header and length and lost the page holding its last bytes
    (zeros, the file length unchanged): the header walk of the tail ends at the log's end, so the
    writable open appended after the torn batch.  Kafka 3.8.0 ``LogLoader.recoverLog`` validates each
    batch from the recovery point (``LogSegment.recover``: ``ensureValid``) and truncates the log at the
    torn one, dropping what was appended after it: acknowledged records (a storage-oracle run of
    tests/crash_writer.py with such a tear: Kafka kept 222 records of 473).  The open now cuts the torn
    batch (kept aside) before the append."""
    part = tmp_path / "t-0"
    config = {"segment.bytes": 1 << 20, "index.interval.bytes": 4096}
    for i in range(3):
        with segstore.open(str(part), format="kafka", mode="a", **config) as store:
            store.append_batch([{"topic": "t", "partition": 0, "value": b"v%d-%d" % (i, j) * 20}
                                for j in range(5)])
    log = part / f"{SEG0}.log"
    data = bytearray(log.read_bytes())
    last = _positions(log)[-1]
    data[-30:] = bytes(30)                                          # the last batch's end, torn
    log.write_bytes(bytes(data))
    with segstore.open(str(part), format="kafka", mode="a", **config) as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 10
    assert list(part.glob("*.cut-*"))                               # the torn batch kept aside
    batches = list(iter_batches(log.read_bytes(), path=str(log)))   # every CRC holds: Kafka keeps them all
    assert (batches[-1].position, batches[-1].base_offset) == (last, 10)     # where the torn one began
    with segstore.open(str(part)) as store:
        assert [r.value for r in store.scan()][-1] == b"after" and len(_values(store)) == 11


@pytest.mark.parametrize("opened", ["logdir", "partition"])
def test_a_writer_cuts_a_batch_a_power_loss_tore_past_the_recovery_point_before_it_appends(tmp_path: Path,
                                                                                       opened: str) -> None:
    """The same tear inside what a killed writer appended but before the active segment's last index
    entry (page write-back has no order): Kafka 3.8.0 ``LogLoader.recoverLog`` validates every batch
    from the recovery point (``recovery-point-offset-checkpoint``, moved to the log end by a clean
    close only) and truncates at the torn one.  The writable open of the log dir now checks the batches
    past the recovery point too, and cuts there before it appends.  So does the open of the partition
    directory, with its parent log dir's recovery point (``LogManager.loadLogs`` hands it to
    ``LogLoader``): it took none (0: the tail after the last index entry only), appended at 60 after the
    torn batch, and the broker's load then truncated 5,015 bytes at it, the append with them (storage
    oracle).  Its close moves the parent's entry to the log end, as a log dir's does."""
    from segstore_kafka.checkpoints import write_offsets

    logs = tmp_path / "logs"
    config = {"segment.bytes": 1 << 20, "index.interval.bytes": 100}
    for i in range(3):
        with segstore.open(str(logs), format="kafka", mode="a", **config) as store:
            for k in range(4):                                      # a batch of 5 records each
                store.append_batch([{"topic": "t", "partition": 0, "value": b"v%d-%d-%d" % (i, k, j) * 20}
                                    for j in range(5)])
    write_offsets(str(logs / "recovery-point-offset-checkpoint"), {("t", 0): 20})   # session 2 killed
    part = logs / "t-0"
    log = part / f"{SEG0}.log"
    positions = _positions(log)
    index = np.fromfile(part / f"{SEG0}.index", dtype=OFFSET_ENTRY)
    assert int(index["position"][-1]) > positions[5]                # the tear lies before the last entry
    data = bytearray(log.read_bytes())
    torn = positions[5]                                             # offsets 25-29, past the recovery point
    data[positions[6] - 30:positions[6]] = bytes(30)
    log.write_bytes(bytes(data))
    target = logs if opened == "logdir" else part
    with segstore.open(str(target), format="kafka", mode="a", **config) as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 25
    batches = list(iter_batches(log.read_bytes(), path=str(log)))   # every CRC holds: Kafka keeps them all
    assert (batches[-1].position, batches[-1].base_offset) == (torn, 25)
    assert list(part.glob("*.cut-*"))                               # the cut batches kept aside
    assert (logs / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 26\n"


def _log_dir_of_batches(root: Path) -> Path:
    """A log dir whose ``t-0`` holds 3 batches of 5 records, closed by segstore (its recovery point
    checkpointed at the log end, 15; no clean-shutdown marker: segstore leaves none)."""
    for i in range(3):
        with segstore.open(str(root), format="kafka", mode="a") as store:
            store.append_batch([{"topic": "t", "partition": 0, "value": b"v%d-%d" % (i, j) * 20}
                                for j in range(5)])
    assert "t 0 15" in (root / "recovery-point-offset-checkpoint").read_text()
    return root / "t-0" / f"{SEG0}.log"


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_a_crc_failing_tail_is_cut_only_after_a_crash(tmp_path: Path, clean_shutdown: bool) -> None:
    """Kafka 3.8.0 ``LogLoader.load`` recovers segments (``recoverLog``: ``LogSegment.recover`` checks
    each batch's CRC and truncates at the first bad one) only without the log dir's
    ``.kafka_cleanshutdown`` (``hadCleanShutdown``): with it, a batch whose CRC fails is loaded as it is
    (damage a read meets), not a write a crash tore, and a writable open leaves it."""
    log = _log_dir_of_batches(tmp_path / "logs")
    checkpoint = tmp_path / "logs" / "recovery-point-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 15", "t 0 0"))   # nothing known flushed
    data = bytearray(log.read_bytes())
    data[-30:] = bytes(30)                                  # the last batch's end: zeros, as a torn page
    log.write_bytes(bytes(data))
    if clean_shutdown:
        (tmp_path / "logs" / ".kafka_cleanshutdown").write_bytes(b"")
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        store.append({"topic": "t", "partition": 0, "value": b"after"})
    assert bool(list(log.parent.glob("*.cut-*"))) is not clean_shutdown
    assert (log.read_bytes()[:len(data)] == bytes(data)) is clean_shutdown


def test_a_crc_failing_batch_below_the_recovery_point_is_damage_not_cut(tmp_path: Path) -> None:
    """Batches below a partition's recovery point were flushed (Kafka 3.8.0 moves the recovery point
    only past flushed data, ``UnifiedLog.flush``): a CRC failing there is damage, which a writable open
    leaves for ``verify`` to name and readers to stop at, where Kafka's ``recoverLog`` would truncate the
    whole segment holding the recovery point at it and drop the batches after it."""
    log = _log_dir_of_batches(tmp_path / "logs")
    first, second = _positions(log)[:2]
    data = bytearray(log.read_bytes())
    data[second - 10] ^= 0xFF                               # a record byte of the first batch
    log.write_bytes(bytes(data))
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 15
    assert not list(log.parent.glob("*.cut-*")) and log.read_bytes()[:len(data)] == bytes(data)
    with segstore.open(str(tmp_path / "logs")) as store:
        with pytest.raises(CorruptDataError) as err:
            list(store.scan())
    assert err.value.pos == first + 17                     # the CRC field of the damaged batch


def _kafka_unclean_load_cuts_at(log_dir: Path, topic: str, partition: int) -> tuple[str, int] | None:
    """Where Kafka 3.8.0's next load of the partition without ``.kafka_cleanshutdown`` truncates it:
    ``LogLoader.recoverLog`` (core/src/main/scala/kafka/log/LogLoader.scala) recovers
    ``segments.values(recoveryPointCheckpoint, Long.MaxValue)``, the segment holding the recovery point
    on (``LogSegments.values``: ``floorKey(from)``), each by ``LogSegment.recover``, which truncates at the
    first batch ``ensureValid`` fails; every later segment is deleted.  None: nothing is cut."""
    point = 0
    checkpoint = log_dir / "recovery-point-offset-checkpoint"
    for line in checkpoint.read_text().splitlines()[2:] if checkpoint.exists() else []:
        name, number, offset = line.split()
        if (name, int(number)) == (topic, partition):
            point = int(offset)
    logs = sorted((log_dir / f"{topic}-{partition}").glob("*.log"))
    floor = max((i for i, log in enumerate(logs) if int(log.name[:20]) <= point), default=0)
    for log in logs[floor:]:
        try:
            for _ in iter_batches(log.read_bytes(), path=str(log)):
                pass
        except CorruptDataError as err:
            return log.name, err.pos or 0
    return None


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_appends_after_damage_below_the_recovery_point_go_to_a_new_segment(
        tmp_path: Path, clean_shutdown: bool) -> None:
    """The storage oracle (Kafka 3.8.0's code) on a partition whose active segment holds a CRC failing
    below the recovery point (damage a writable open keeps), appended to by segstore and closed without
    the clean-shutdown marker: its next unclean load recovered the segment holding the recovery point,
    truncated it at the damage and deleted what followed, the appended batch with it (1,919 bytes).  The
    first append now rolls: the batch lands in segment 15, the recovery point (16) names it, the broker's
    recovery reaches no damage, and the damaged segment stays as it was.  With the marker (an open that
    checks no CRC) alike: segstore removes the marker, so the broker's next load recovers."""
    log = _log_dir_of_batches(tmp_path / "logs")
    first, second = _positions(log)[:2]
    data = bytearray(log.read_bytes())
    data[second - 10] ^= 0xFF                               # a record byte of the first batch
    log.write_bytes(bytes(data))
    if clean_shutdown:
        (tmp_path / "logs" / ".kafka_cleanshutdown").write_bytes(b"")
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) == (log.name, first + 17)
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 15
    assert log.read_bytes() == bytes(data)
    assert sorted(p.name for p in log.parent.glob("*.log")) == [log.name, "00000000000000000015.log"]
    assert "t 0 16" in (tmp_path / "logs" / "recovery-point-offset-checkpoint").read_text()
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) is None
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:    # no damage: no roll
        assert store.append({"topic": "t", "partition": 0, "value": b"again"}).offset == 16
        assert [b.base_offset for b in store.partition_of("t", 0).batches(15)] == [15, 16]
    assert len(list(log.parent.glob("*.log"))) == 2


def test_a_flush_moves_a_partition_directorys_recovery_point_past_the_damage_it_rolled_over(
        tmp_path: Path) -> None:
    """A partition directory whose log dir's recovery point (5) was left behind by a killed writer, its
    active segment holding a CRC failing below it (damage the open keeps): the first append rolls
    (``Partition.active_holds_damage``), but only the close moved the checkpointed point, so a writer
    killed after ``flush`` left 5 there and Kafka 3.8.0's next load (``LogLoader.recoverLog`` from the
    segment holding it, core/src/main/scala/kafka/log/LogLoader.scala) cut segment 0 at the damage and
    deleted segment 15, the flushed append with it.  A flush now writes the point as a log directory's
    flush writes its checkpoints (``LogManager.checkpointRecoveryOffsetsInDir`` after flushing)."""
    log = _log_dir_of_batches(tmp_path / "logs")
    checkpoint = tmp_path / "logs" / "recovery-point-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 15", "t 0 5"))
    first, second = _positions(log)[:2]
    _flip(log, second - 10)                                 # a record byte of batch 0 (offsets 0..4)
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) == (log.name, first + 17)
    store = segstore.open(str(log.parent), format="kafka", mode="a")
    assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 15
    store.flush()
    store.abandon()                                         # killed: no close
    assert "t 0 16" in checkpoint.read_text()
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) is None


_KILLED_BEFORE_FLUSH = """
import sys, segstore
store = segstore.open(sys.argv[1], format="kafka", mode="a", **{"segment.bytes": 600})
store.append({"topic": "t", "partition": 0, "value": b"after"})
print("appended", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize(("damage", "opened"), [
    ("active segment below the point", "logdir"), ("active segment below the point", "partition"),
    ("earlier segment after a clean shutdown", "logdir"),
    ("earlier segment after a clean shutdown", "partition"),
])
def test_a_writer_killed_before_its_first_flush_leaves_no_recovery_point_before_damage(
        tmp_path: Path, damage: str, opened: str) -> None:
    """A log dir whose ``recovery-point-offset-checkpoint`` (5) is behind the log end (15), with damage
    Kafka 3.8.0's next unclean load reaches from it (``LogLoader.recoverLog`` recovers the segment holding
    the point and every later one, core/src/main/scala/kafka/log/LogLoader.scala; ``LogSegment.recover``
    truncates at the first batch ``ensureValid`` fails and every later segment is deleted): a CRC failing
    below the point in the active segment (which a writable open keeps, and the first append rolls past),
    or in a later segment after a clean shutdown (an open that checks no CRC).  A writer appended offset 15
    and was killed (SIGKILL) before any flush or close: the checkpoint still said 5, and the storage
    oracle's recovery then cut segment 0 (1,518 bytes) or segment 5 (506 bytes) and skipped what followed
    ("LogLoader deletes segments after a truncated one"), the acknowledged append with it.  Now the first
    append moves the checkpointed point to the log end first (the segments synced), past the damage."""
    root = tmp_path / "logs"
    part = root / "t-0"
    if damage.startswith("active"):
        log = _log_dir_of_batches(root)
        _flip(log, _positions(log)[1] - 10)                # a record byte of batch 0 (offsets 0..4)
        damaged = log
    else:
        log = _three_segments(root)                        # (its last-batch flip undone: segment 0 intact)
        _flip(log, log.stat().st_size - 10)
        damaged = part / f"{5:020d}.log"
        _flip(damaged, damaged.stat().st_size - 10)
        (root / ".kafka_cleanshutdown").write_bytes(b"")
    # (u-0: a partition the log dir does not hold; its entry, as any other partition's, stays as it was)
    (root / "recovery-point-offset-checkpoint").write_text("0\n2\nt 0 5\nu 0 3\n")
    before = {p.name: p.read_bytes() for p in part.glob("*.log")}
    cut = _kafka_unclean_load_cuts_at(root, "t", 0)
    assert cut is not None and cut[0] == damaged.name
    kill_after_append(_KILLED_BEFORE_FLUSH, str(root if opened == "logdir" else part))
    assert (root / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 15\nu 0 3\n"
    assert _kafka_unclean_load_cuts_at(root, "t", 0) is None
    assert {name: (part / name).read_bytes()[:len(data)] for name, data in before.items()} == before  # kept
    with segstore.open(str(root)) as store:
        assert [r.value for r in store.read("t", 0, offset=15)] == [b"after"]


def test_damage_in_an_earlier_segment_needs_no_roll(tmp_path: Path) -> None:
    """A CRC failing in a segment before the active one, below the recovery point: the appends go to the
    active segment as they would, and the recovery point the close checkpoints (the log end) lies past the
    damaged segment, so Kafka 3.8.0's next unclean load (``LogLoader.recoverLog`` from the segment holding
    it) never reaches the damage."""
    root = tmp_path / "logs"
    for i in range(3):
        with segstore.open(str(root), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
            store.append_batch([{"topic": "t", "partition": 0, "value": b"v%d-%d" % (i, j) * 20}
                                for j in range(5)])
    log = root / "t-0" / f"{SEG0}.log"
    assert sorted(p.name[:20] for p in log.parent.glob("*.log")) == [SEG0, f"{5:020d}", f"{10:020d}"]
    _flip(log, log.stat().st_size - 10)                    # a record byte of its one batch
    damaged = log.read_bytes()
    with pytest.raises(CorruptDataError):
        list(iter_batches(damaged, path=str(log)))
    with segstore.open(str(root), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 15
    assert log.read_bytes() == damaged
    assert sorted(p.name[:20] for p in log.parent.glob("*.log")) == [SEG0, f"{5:020d}", f"{10:020d}"]
    assert _kafka_unclean_load_cuts_at(root, "t", 0) is None


def _three_segments(root: Path) -> Path:
    """``root/t-0`` of three segments (0, 5, 10) of one 5-record batch each, the last batch of the first
    flipped in a record byte, as a partition directory opened alone sees it: its log dir names no
    recovery point for it (``recovery-point-offset-checkpoint`` gone).  Returns the first ``.log``."""
    for i in range(3):
        with segstore.open(str(root), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
            store.append_batch([{"topic": "t", "partition": 0, "value": b"v%d-%d" % (i, j) * 20}
                                for j in range(5)])
    (root / "recovery-point-offset-checkpoint").unlink()
    log = root / "t-0" / f"{SEG0}.log"
    _flip(log, log.stat().st_size - 10)
    return log


def test_a_partition_opened_alone_after_a_crash_is_recovered_from_offset_0_before_an_append(
        tmp_path: Path) -> None:
    """A partition directory opened alone, its log dir naming no recovery point for it: Kafka 3.8.0
    ``LogManager.loadLogs`` (core/src/main/scala/kafka/log/LogManager.scala) hands ``LogLoader`` 0
    (``recoveryPoints.getOrElse(topicPartition, 0L)``), and after a crash (no ``.kafka_cleanshutdown``)
    ``recoverLog`` recovers every segment from there, cuts at the first batch ``ensureValid`` fails and
    deletes every later segment. segstore checked only the active segment's tail and appended offset 15 to
    segment 10: the storage oracle's ``LogSegment.recover`` then cut segment 0 (506 bytes) and deleted
    segments 5 and 10, the appended record with them. Now the open recovers from offset 0 as the broker's
    load does (what it cuts kept aside) and the append lands after what the broker keeps."""
    log = _three_segments(tmp_path / "logs")
    damaged = {p.name: p.read_bytes() for p in log.parent.glob("*.log")}
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) == (log.name, 17)
    with segstore.open(str(log.parent), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 0
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) is None
    assert {p.name[:-len(".cut-0")]: p.read_bytes() for p in log.parent.glob("*.cut-0")} == damaged


def test_a_partition_opened_alone_refuses_appends_after_damage_a_clean_shutdown_left(tmp_path: Path) -> None:
    """The same partition after a clean shutdown (``.kafka_cleanshutdown``: Kafka 3.8.0 ``LogLoader.load``
    recovers nothing, so the damage is no torn write and the open keeps it).  segstore removes the marker,
    and with no recovery point for the partition the broker's next load recovered it from offset 0, cut
    segment 0 and deleted the segment the append went to (storage oracle, as above).  No roll can keep an
    append from that: the first append is refused, naming the damage, and nothing is written; after
    ``recover`` (which cuts it, kept aside) appends go on."""
    log = _three_segments(tmp_path / "logs")
    (tmp_path / "logs" / ".kafka_cleanshutdown").write_bytes(b"")
    before = {p.name: p.read_bytes() for p in log.parent.iterdir()}
    with segstore.open(str(log.parent), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
        with pytest.raises(UnrepairedDataError) as info:
            store.append({"topic": "t", "partition": 0, "value": b"after"})
        assert (info.value.path, info.value.pos) == (str(log), 17)
        assert "recovers every segment from offset 0" in info.value.message
    assert {p.name: p.read_bytes() for p in log.parent.iterdir()} == before
    with segstore.open(str(log.parent), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
        store.recover()
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 0
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) is None


def test_damage_in_an_earlier_segment_is_left_where_the_close_checkpoints_the_recovery_point(
        tmp_path: Path) -> None:
    """The clean-shutdown case of a partition its log dir's checkpoint names (at 0): the close moves that
    entry to the log end (``write_recovery_point``), so the broker's next load recovers none of the
    earlier segments and an append is safe; the damage is kept and the append goes to the active
    segment."""
    log = _three_segments(tmp_path / "logs")
    (tmp_path / "logs" / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    (tmp_path / "logs" / ".kafka_cleanshutdown").write_bytes(b"")
    damaged = log.read_bytes()
    with segstore.open(str(log.parent), format="kafka", mode="a", **{"segment.bytes": 600}) as store:
        assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 15
    assert log.read_bytes() == damaged
    assert _kafka_unclean_load_cuts_at(tmp_path / "logs", "t", 0) is None


def _offsets_going_back(part: Path) -> bytes:
    """One segment of batches at offsets 0, 10, 20, 5, 30 (171 bytes each: an index entry for each after
    the first at ``index.interval.bytes`` 50, the one of 5 not above 20's), trimmed empty indexes."""
    data = b"".join(encode_batch([(b"k", b"v" * 100, 1_000 + i)], base_offset=o)
                    for i, o in enumerate([0, 10, 20, 5, 30]))
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(data)
    for suffix in (".index", ".timeindex"):
        (part / f"{SEG0}{suffix}").write_bytes(b"")
    return data


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.integers(0, 50), st.integers(0, 200)),
                min_size=1, max_size=8),
       st.integers(0, 400), st.integers(-1, 2**20), st.one_of(st.just(1 << 20), st.integers(12, 64)))
# offsets 10 and 20 fill the time index of segment.index.bytes 36 (3 slots, TimeIndex.isFull at 2): the
# batch of 5 after them gets no entry, so nothing goes back (index_gone_back named it, a needless rebuild)
@example([(0, 0, 0, 100), (10, 0, 1, 100), (20, 0, 2, 100), (5, 0, 0, 100)], 50, -1, 36)
def test_index_gone_back_names_what_recover_cuts_for_invalid_offset(
        tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[int, int, int, int]], interval: int,
        flip: int, index_bytes: int) -> None:
    """``LogSegment.index_gone_back`` (the open's and the first append's look for what Kafka 3.8.0
    ``LogSegment.recover`` throws ``InvalidOffsetException`` on) names a batch exactly where ``recover``
    cuts for it, over batches of any offsets (rising, repeated, going back), sizes, times,
    ``index.interval.bytes`` and ``segment.index.bytes`` (the rebuilt indexes filling up:
    ``OffsetIndex``/``TimeIndex.isFull`` in storage/.../log/, where ``recover`` adds no more entries), a
    byte flipped anywhere or not (a CRC or framing failing where recover's walk ends, or an offset
    moved); and it names the batch recover's error names."""
    part = tmp_path_factory.mktemp("gone") / "t-0"
    part.mkdir()
    data = b"".join(encode_batch([(b"k", b"v" * size, stamp) for _ in range(count + 1)], base_offset=base)
                    for base, count, stamp, size in batches)
    if flip >= 0:
        at = flip % len(data)
        data = data[:at] + bytes([data[at] ^ 1 << flip % 8]) + data[at + 1:]
    (part / f"{SEG0}.log").write_bytes(data)
    for suffix in (".index", ".timeindex"):
        (part / f"{SEG0}{suffix}").write_bytes(b"")
    seg = LogSegment(str(part), 0, index_interval_bytes=interval, max_index_size=index_bytes, writable=True)
    try:
        found = seg.index_gone_back()
        result = seg.recover()
    finally:
        seg.close()
    invalid = result.error is not None and "InvalidOffsetException" in result.error
    assert (found is not None) is invalid
    if found is not None:
        assert str(found) == result.error


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_an_active_segment_whose_recovery_throws_invalid_offset_takes_no_append(
        tmp_path: Path, clean_shutdown: bool) -> None:
    """An active segment whose offsets go back so that Kafka 3.8.0 ``LogSegment.recover``'s rebuilt
    offset index goes back (``OffsetIndex.append``: ``InvalidOffsetException``): ``LogLoader.recoverLog``
    truncates it to its base offset (``LogSegment.truncateTo``).  segstore's open looked for torn and CRC
    failing batches only, appended offset 31 to the segment and checkpointed the recovery point (32)
    in it: the storage oracle's ``recover`` then threw, ``truncateTo(0)`` cut all 928 bytes, the append
    with them.  After a crash the open now recovers the segment as the broker's load does (cut and kept,
    :meth:`LogSegment.index_gone_back`); after a clean shutdown it keeps it and the first append rolls
    (:meth:`Partition.active_holds_damage`), the recovery point then naming the new segment."""
    part = tmp_path / "logs" / "t-0"
    data = _offsets_going_back(part)
    (tmp_path / "logs" / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 1\n")
    if clean_shutdown:
        (tmp_path / "logs" / ".kafka_cleanshutdown").write_bytes(b"")
    log = part / f"{SEG0}.log"
    config = {"index.interval.bytes": 50, "segment.ms": 2**62}    # no roll for the records' 1970 times
    with segstore.open(str(part), format="kafka", mode="a", **config) as store:
        at = store.append({"topic": "t", "partition": 0, "value": b"after"})
    if clean_shutdown:
        assert (at.offset, log.read_bytes()) == (31, data)
        assert (part / "00000000000000000031.log").exists()
        assert "t 0 32" in (tmp_path / "logs" / "recovery-point-offset-checkpoint").read_text()
    else:
        assert at.offset == 0 and Path(f"{log}.cut-0").read_bytes() == data
    with segstore.open(str(part), format="kafka", mode="a", **config) as store:
        segments = store.partition_of("t", 0).segments
        last = segments[-1]
        assert last.index_gone_back() is None and last.first_torn_batch(0, last.base) is None


@pytest.mark.parametrize("append", [False, True])
def test_a_writable_open_drops_leader_epochs_past_the_log_end_where_nothing_is_recovered(
        tmp_path: Path, append: bool) -> None:
    """Kafka 3.8.0 ``LogLoader.load`` (core/src/main/scala/kafka/log/LogLoader.scala) calls
    ``leaderEpochCache.truncateFromEndAsyncFlush(nextOffset)`` on every load, whether ``recoverLog``
    recovered a segment or not.  A writable open of a partition that needs no recovery kept ``5 900``
    past its log end 201, and its append at 201 in epoch 5 added no entry (5 is no newer than the
    latest): the checkpoint said epoch 5 starts at 900, and the broker's load then dropped that entry,
    leaving the batch's epoch in no entry (``leader_epoch_rebuilt`` of the storage oracle: ``5 201``).
    The open now drops it and says so; the append is written in epoch 5 still (the broker appends next
    in the epoch it was elected in, or a later one: ``Partition.makeLeader``) and starts its entry."""
    part = _compacted_partition(tmp_path / "t-0", "0\n3\n0 0\n1 123\n2 200\n")
    with segstore.open(part, format="kafka", mode="a") as store:   # the indexes, as the broker wrote them
        store.flush()
    epochs = part / "leader-epoch-checkpoint"
    epochs.write_text("0\n4\n0 0\n1 123\n2 200\n5 900\n")
    with segstore.open(part, format="kafka", mode="a") as store:
        assert store.recover() == [f"{epochs}: dropped the leader epochs starting at or past the log end "
                                   "201: 5 900"]
        if append:
            assert store.append({"topic": "t", "partition": 0, "value": b"after"}).offset == 201
    assert epochs.read_text().splitlines()[2:] == ["0 0", "1 123", "2 200"] + (["5 201"] if append else [])
    with segstore.open(part) as store:
        assert [b.partition_leader_epoch for b in store.partition.batches(201)] == ([5] if append else [])


def _legacy_entry(offset: int, value: bytes, *, codec_id: int = 0) -> bytes:
    """One v1 log entry (``LegacyRecord.write``: offset, size, CRC-32 of magic..end, magic 1, attributes,
    timestamp, null key, value) with a correct CRC."""
    import zlib

    body = (struct.pack(">bbqi", 1, codec_id, 1_600_000_000_000 + offset, -1) + struct.pack(">i", len(value))
            + value)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def _legacy_wrapper(last_offset: int, count: int, *, inflates: bool = True) -> bytes:
    """A gzip v1 wrapper of ``count`` inner messages (relative offsets 0..count-1) ending at
    ``last_offset``; ``inflates`` False: its value is no gzip stream (its own CRC holds all the same)."""
    from segstore_kafka import compression

    inner = b"".join(_legacy_entry(i, b"inner-%d" % i) for i in range(count))
    return _legacy_entry(last_offset, compression.compress("gzip", inner) if inflates else b"not gzip",
                         codec_id=1)


@pytest.mark.parametrize(("damage", "recovery_point", "cut"), [
    ("torn wrapper", 5, True),          # its last bytes zeros, past the recovery point: a crash's
    ("torn wrapper", None, True),       # no recovery point known: the tail from the last index entry
    ("torn wrapper", 9, False),         # below the recovery point: flushed, damage
    ("uninflatable wrapper", 5, False),  # ensureValid checks the outer message only
    ("torn plain entry", 5, True),
])
def test_a_writable_open_checks_legacy_entries_past_the_recovery_point_as_kafkas_recovery_does(
        tmp_path: Path, damage: str, recovery_point: int | None, cut: bool) -> None:
    """One scan finds what a crash tore before a writable open appends (``LogSegment.first_torn_batch``),
    from the recovery point and, where none is known, from the last index entry alike: Kafka 3.8.0
    ``LogSegment.recover`` frames v0/v1 entries as ``FileLogInputStream.nextBatch`` does and checks them
    with ``batch.ensureValid()``
    (``AbstractLegacyRecordBatch.ensureValid``: the outer message's size and CRC-32, never the
    compressed inner set), and ``LogLoader.recoverLog`` truncates the log at the first that fails.
    A legacy entry torn past the recovery point is cut (kept aside) before the append; one below it is
    damage and stays; a wrapper whose CRC-32 holds stays whatever its inner set."""
    from segstore_kafka.checkpoints import write_offsets

    logs = tmp_path / "logs"
    part = logs / "t-0"
    part.mkdir(parents=True)
    wrapper = _legacy_wrapper(7, 3, inflates=damage != "uninflatable wrapper")
    entries = [_legacy_entry(0, b"zero"), _legacy_wrapper(3, 3), _legacy_entry(4, b"four"), wrapper,
               _legacy_entry(8, b"eight")]
    log = part / f"{SEG0}.log"
    log.write_bytes(b"".join(entries))
    with segstore.open(str(logs), format="kafka", mode="a") as store:   # its indexes, as a broker's
        store.flush()
    assert (part / f"{SEG0}.index").exists()
    data = bytearray(log.read_bytes())
    torn_at = sum(map(len, entries[:3]))
    if damage == "torn wrapper":
        end = torn_at + len(wrapper)
        data[end - 10:end] = bytes(10)
    elif damage == "torn plain entry":
        torn_at = sum(map(len, entries[:4]))
        data[-3:] = bytes(3)
    log.write_bytes(bytes(data))
    if recovery_point is not None:
        write_offsets(str(logs / "recovery-point-offset-checkpoint"), {("t", 0): recovery_point})
    else:
        (logs / "recovery-point-offset-checkpoint").unlink()        # none known: the parent names none
    target = logs if recovery_point is not None else part
    with segstore.open(str(target), format="kafka", mode="a") as store:
        appended = store.append({"topic": "t", "partition": 0, "value": b"after"})
    assert bool(list(part.glob("*.cut-*"))) is cut
    if cut:
        assert appended.offset == (8 if damage == "torn plain entry" else 5)
        assert log.read_bytes() == bytes(data[:torn_at])            # (the append rolled: segment.ms)
    else:
        assert appended.offset == 9 and log.read_bytes()[:len(data)] == bytes(data)
