"""What real Kafka brokers leave on disk reads, verifies, recovers and converts (issue 12, Kafka items).

The log directories here are laid out as Kafka 3.8 lays them out: partition
directories from the compat fixtures (written by the broker's own log code), and
beside them the files the broker makes, with the contents its sources define:

- ``leader-epoch-checkpoint`` created empty (``LeaderEpochCheckpointFile`` creates the
  file before the first write; ``CheckpointFile.CheckpointReadBuffer.read`` returns an
  empty list for a file with no line, or with a version line only);
- ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint`` (``LogManager`` /
  ``ReplicaManager``), ``meta.properties`` (``MetaPropertiesEnsemble``),
  ``.kafka_cleanshutdown`` (``CleanShutdownFileHandler``) and ``partition.metadata``
  (``PartitionMetadataFile``);
- no ``.lock``: ``LogManager`` locks ``.lock`` in each log dir and deletes it at clean
  shutdown (``kafka.utils.FileLock.destroy``).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES, ROOT, copy_writable
from kafka_messages import pre_0_10_1_segments
from segstore_kafka.batch import encode_batch
from segstore_kafka.checkpoints import read_leader_epochs, read_offsets
from segstore_kafka.spec import write_spec

import segstore
from segstore import cli
from segstore.convert import convert
from segstore.convert.pipeline import kafka_entry_of
from segstore.errors import (
    ConversionError,
    CorruptDataError,
    OffsetOutOfRangeError,
    StoreLockedError,
    UnrepairedDataError,
)

UNCOMPRESSED = FIXTURES / "kafka" / "uncompressed"
CONFIG = {"segment.bytes": 6935, "index.interval.bytes": 990}   # the uncompressed fixture's
EMPTY_CHECKPOINT_TEXTS = ["", "0\n"]      # both read as no entries by CheckpointReadBuffer.read


def _run(*argv: str) -> tuple[int, str, str]:
    """The CLI in a fresh process (so a crash or hang shows as one)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    proc = subprocess.run([sys.executable, "-m", "segstore.cli", *argv], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _kafka38_log_dir(root: Path, empty: str) -> Path:
    """A log dir as a Kafka 3.8 broker leaves it after a clean shutdown, two topics' partitions
    with empty ``leader-epoch-checkpoint`` files (``__consumer_offsets``-like: never led)."""
    log_dir = root / "kafka-logs"
    log_dir.mkdir()
    copy_writable(UNCOMPRESSED / "topic-0", log_dir / "topic-0")
    for n in range(3):
        empty_part = log_dir / f"__consumer_offsets-{n}"
        empty_part.mkdir()
        # An empty segment: what UnifiedLog creates for a new partition (LogSegment.open, create=true).
        for suffix in (".log", ".index", ".timeindex"):
            (empty_part / f"{0:020d}{suffix}").write_bytes(b"")
        (empty_part / "leader-epoch-checkpoint").write_text(empty)
        (empty_part / "partition.metadata").write_text("version: 0\ntopic_id: 7wJ7cYtBQ0ecqWnKyd2ZOQ\n")
    # a topic id the broker can read (PartitionMetadataReadBuffer refuses the zero id)
    (log_dir / "topic-0" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint"):
        (log_dir / name).write_text(empty)
    (log_dir / "meta.properties").write_text("#\nnode.id=1\nversion=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\n")
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":-1}')
    return log_dir


@pytest.mark.parametrize("empty", EMPTY_CHECKPOINT_TEXTS, ids=["no-line", "version-only"])
def test_empty_checkpoints_read_as_no_entries(tmp_path: Path, empty: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(empty)
    assert read_leader_epochs(str(path)) == []
    assert read_offsets(str(path)) == {}


@pytest.mark.parametrize("text", ["0\r\n1\r\n3 100\r\n", "0\r1\r3 100"])
def test_checkpoint_lines_end_as_java_readline_ends_them(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(text.encode())
    assert read_leader_epochs(str(path)) == [(3, 100)]


@pytest.mark.parametrize("text", [" 0\n0\n", "0\n 1\n3 100\n", "1\n0\n", "0\n-1\n"])
def test_checkpoints_kafka_refuses_are_typed_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptDataError) as info:
        read_leader_epochs(str(path))
    assert info.value.path == str(path)


@pytest.mark.parametrize(("text", "entries"), [
    ("0" * 20 + "\n1\n\u0661 \u0662\u0660\n", [(1, 20)]),        # ARABIC-INDIC DIGITS ONE, TWO, ZERO
    ("+0\n\uff11\n+3 " + "0" * 25 + "100\n", [(3, 100)]),          # FULLWIDTH DIGIT ONE, leading zeros
    ("0\n1\n-2147483648 9223372036854775807\n", [(-2147483648, 9223372036854775807)]),
    ("0\n1\n1\t\x0b\x0c5 \t\n", [(1, 5)]),       # Java's \s: space, tab, VT, FF; trailing ones dropped
])
def test_leader_epochs_read_as_kafka_reads_them(tmp_path: Path, text: str, entries: list) -> None:
    """server-common 3.8.0 ``CheckpointFile.CheckpointReadBuffer.read`` (``toInt``: ``Integer.parseInt``
    of the version and count lines) and storage ``LeaderEpochCheckpointFile.Formatter.fromString``
    (``Integer.parseInt`` of the epoch, ``Long.parseLong`` of the offset): Java reads any decimal digit
    of the BMP and leading zeros of any number."""
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text, encoding="utf-8")
    assert read_leader_epochs(str(path)) == entries


def test_offset_checkpoints_read_as_kafka_reads_them(tmp_path: Path) -> None:
    """3.8.0 ``OffsetCheckpointFile.Formatter.fromString``: ``partition.toInt``, ``offset.toLong``."""
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n3\nt \u0660 \u0665\nt 1 " + "0" * 30 + "12\nt +2 \uff17\n", encoding="utf-8")
    assert read_offsets(str(path)) == {("t", 0): 5, ("t", 1): 12, ("t", 2): 7}


@pytest.mark.parametrize("text", [
    "0\n1\n\U0001d7cf 5\n",                     # MATHEMATICAL BOLD DIGIT ONE: a surrogate pair to Java
    "0\n1\n2147483648 5\n",                     # past an int epoch
    "0\n1\n1 9223372036854775808\n",            # past a long offset
    "0\n1\n1 1_000\n",
    "\U0001d7ce\n0\n",
    "0\n1\n 1 5\n",                              # Pattern.split: an empty first field, three in all
    "0\n1\n1 5\u00a0\n",                         # NO-BREAK SPACE is no \s to Java: "5\u00a0" no long
    "0\n1\n1\u20035\n",                          # EM SPACE: one field
])
def test_leader_epochs_kafka_throws_on_are_typed_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorruptDataError):
        read_leader_epochs(str(path))


@pytest.mark.parametrize("empty", EMPTY_CHECKPOINT_TEXTS, ids=["no-line", "version-only"])
def test_a_log_dir_with_empty_checkpoints_serves_every_command(tmp_path: Path, empty: str) -> None:
    log_dir = _kafka38_log_dir(tmp_path, empty)
    with segstore.open(UNCOMPRESSED / "topic-0") as store:
        expected = [store.to_json(r) for r in store.scan()]
    rc, out, err = _run("info", str(log_dir), "--json")
    assert rc == 0, err
    info = json.loads(out)
    assert {(p["topic"], p["partition"]) for p in info["partitions"]} == {
        ("topic", 0), *(("__consumer_offsets", n) for n in range(3))}
    rc, out, err = _run("dump", str(log_dir), "--json")
    assert rc == 0, err
    # the empty partitions too, as partition lines (a copy written from the dump holds them)
    empty_partitions = [{"topic": "__consumer_offsets", "partition": n, "log_start_offset": 0,
                         "log_end_offset": 0, "high_watermark": 0, "leader_epochs": []}
                        for n in range(3)]
    assert [json.loads(line) for line in out.splitlines()] == empty_partitions + expected
    rc, out, err = _run("verify", str(log_dir))
    assert (rc, err) == (0, f"{log_dir}: ok\n")
    rc, out, err = _run("query", str(log_dir), "--topic", "topic", "--partition", "0", "--offset", "5",
                        "--json")
    assert rc == 0, err
    assert json.loads(out.splitlines()[0])["offset"] == 5
    rmq, back = tmp_path / "rmq", tmp_path / "back"
    rc, out, err = _run("convert", str(log_dir), str(rmq), "--to", "rocketmq", "--verify",
                        "--config", "mappedFileSizeCommitLog=1048576")
    assert rc == 0, err
    rc, out, err = _run("convert", str(rmq), str(back), "--to", "kafka", "--verify")
    assert rc == 0, err
    with segstore.open(back / "topic-0") as store:
        assert [store.to_json(r) | {"batch": None} for r in store.scan()] == \
            [e | {"batch": None} for e in expected]


def test_writing_into_a_kafka_log_dir_leaves_no_lock_file_and_keeps_its_files(tmp_path: Path) -> None:
    log_dir = _kafka38_log_dir(tmp_path, "")
    before = {p.name for p in log_dir.iterdir()}
    with segstore.open(log_dir, "kafka", mode="a", **CONFIG) as store:
        store.append({"topic": "topic", "partition": 0, "key": b"k", "value": b"v", "timestamp": 1})
        store.append({"topic": "new", "partition": 2, "key": None, "value": b"v", "timestamp": 1})
    leftovers = [p for p in log_dir.rglob("*.lock")]
    assert leftovers == []
    # a writer takes the broker's clean-shutdown marker away (LogManager.loadLogs deletes it on load)
    assert {p.name for p in log_dir.iterdir()} == (before - {".kafka_cleanshutdown"}) | {"new-2"}
    assert read_offsets(str(log_dir / "recovery-point-offset-checkpoint"))[("new", 2)] == 1


def test_write_and_convert_leave_no_lock_file(tmp_path: Path) -> None:
    spec_dst = tmp_path / "t-0"
    rc, _, err = _run("write", str(spec_dst), "--format", "kafka", "--spec", str(UNCOMPRESSED / "spec.json"))
    assert rc == 0, err
    rmq, back = tmp_path / "rmq", tmp_path / "back"
    convert(str(spec_dst), str(rmq), to="rocketmq", config={"mappedFileSizeCommitLog": 1 << 20})
    convert(str(rmq), str(back), to="kafka")
    for root in (spec_dst, back):
        assert [p for p in root.rglob("*") if p.name.endswith(".lock")] == []


def _hold_in_child(path: Path, ready: Path, release: Path) -> subprocess.Popen:
    code = (f"import segstore, time, os\n"
            f"s = segstore.open({str(path)!r}, 'kafka', mode='a')\n"
            f"open({str(ready)!r}, 'w').close()\n"
            f"while not os.path.exists({str(release)!r}): time.sleep(0.02)\n"
            f"s.close()\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


@pytest.mark.parametrize("first, second", [("log-dir", "partition"), ("partition", "log-dir"),
                                           ("partition", "partition"), ("log-dir", "log-dir")])
def test_one_writer_per_partition_whichever_directory_was_opened(tmp_path: Path, first: str,
                                                                  second: str) -> None:
    log_dir = tmp_path / "logs"
    copy_writable(UNCOMPRESSED / "topic-0", log_dir / "topic-0")
    paths = {"log-dir": log_dir, "partition": log_dir / "topic-0"}
    ready, release = tmp_path / "ready", tmp_path / "release"
    child = _hold_in_child(paths[first], ready, release)
    try:
        for _ in range(1500):
            if ready.exists() or child.poll() is not None:
                break
            threading.Event().wait(0.02)
        assert ready.exists()
        with pytest.raises(StoreLockedError):
            segstore.open(paths[second], "kafka", mode="a")
        with segstore.open(paths[second], "kafka") as reader:   # readers never take the lock
            assert reader.offset_range("topic", 0)[1] == 289 + 11
    finally:
        release.touch()
        child.wait(timeout=60)
    with segstore.open(paths[second], "kafka", mode="a") as store:   # free again once closed
        assert store.offset_range("topic", 0)[1] == 300


def test_one_writer_per_partition_in_one_process(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    copy_writable(UNCOMPRESSED / "topic-0", log_dir / "topic-0")
    with segstore.open(log_dir, "kafka", mode="a"), pytest.raises(StoreLockedError):
        segstore.open(log_dir / "topic-0", "kafka", mode="a")
    with segstore.open(log_dir / "topic-0", "kafka", mode="a"), pytest.raises(StoreLockedError):
        segstore.open(log_dir, "kafka", mode="a")


def _index_files(part: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.suffix in (".index", ".timeindex")}


def test_recover_without_config_leaves_intact_segments_alone(tmp_path: Path) -> None:
    """The fixture's indexes were built with index.interval.bytes=990; recover with the default
    (4096) must not rebuild them (Kafka 3.8 ``LogLoader.recoverLog`` only recovers past the
    recovery point, and an intact segment is intact)."""
    part = copy_writable(UNCOMPRESSED / "topic-0", tmp_path / "topic-0")
    before = _index_files(part)
    rc, _, err = _run("recover", str(part))
    assert rc == 0, err
    assert _index_files(part) == before
    assert [p.name for p in part.iterdir() if ".cut-" in p.name] == []


def test_recover_rebuilds_from_the_first_damaged_segment_only(tmp_path: Path) -> None:
    part = copy_writable(UNCOMPRESSED / "topic-0", tmp_path / "topic-0")
    before = _index_files(part)
    logs = sorted(part.glob("*.log"))
    data = logs[-1].read_bytes()
    logs[-1].write_bytes(data[:-7])                               # a torn tail in the last segment
    with segstore.open(part, "kafka", mode="a") as store:          # default config
        store.recover()
        assert store.verify() == []
    after = _index_files(part)
    last = logs[-1].stem
    assert {k: v for k, v in after.items() if not k.startswith(last)} == \
        {k: v for k, v in before.items() if not k.startswith(last)}


def test_recover_starts_at_the_log_dirs_recovery_point(tmp_path: Path) -> None:
    """Segments wholly below ``recovery-point-offset-checkpoint`` are not even read (Kafka
    ``segments.values(recoveryPointCheckpoint, ...)``): damage there stays for verify."""
    log_dir = tmp_path / "logs"
    part = copy_writable(UNCOMPRESSED / "topic-0", log_dir / "topic-0")
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\ntopic 0 280\n")
    first = sorted(part.glob("*.index"))[0]
    data = bytearray(first.read_bytes())
    data[7] ^= 0x04                     # slot 0 points into the middle of a batch
    first.write_bytes(bytes(data))
    with segstore.open(log_dir, "kafka", mode="a") as store:
        with pytest.raises(UnrepairedDataError) as left:      # recover says what it left (issue 15)
            store.recover()
    assert left.value.path == str(first) and left.value.pos == 0
    assert first.read_bytes() == bytes(data)
    part2 = copy_writable(UNCOMPRESSED / "topic-0", tmp_path / "alone" / "topic-0")
    (part2 / first.name).write_bytes(bytes(data))
    with segstore.open(part2, "kafka", mode="a") as store:   # no recovery point: all checked
        store.recover()
        assert store.verify() == []


def _spec(start_offset: int, leader_epoch: int) -> dict:
    spec = json.loads((UNCOMPRESSED / "spec.json").read_text())
    for batch in spec["batches"]:
        batch.pop("leader_epoch", None)
    return spec | {"start_offset": start_offset, "leader_epoch": leader_epoch}


def test_write_spec_honours_start_offset_and_leader_epoch(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(_spec(1000, 7)))
    part = tmp_path / "orders-3"
    rc, _, err = _run("write", str(part), "--format", "kafka", "--spec", str(spec_path))
    assert rc == 0, err
    logs = sorted(p.name for p in part.glob("*.log"))
    assert logs[0] == f"{1000:020d}.log"
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n1\n7 1000\n"
    with segstore.open(part) as store, segstore.open(UNCOMPRESSED / "topic-0") as original:
        records = list(store.scan())
        assert [r.offset for r in records] == [r.offset + 1000 for r in original.scan()]
        assert {r.batch.partition_leader_epoch for r in records} == {7}
        assert store.offset_range("orders", 3) == (1000, 1300)
        assert store.verify() == []


def test_write_spec_with_a_start_offset_into_a_log_with_records_is_refused(tmp_path: Path) -> None:
    part = copy_writable(UNCOMPRESSED / "topic-0", tmp_path / "topic-0")
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    with pytest.raises(OffsetOutOfRangeError) as info:
        write_spec(str(part), _spec(5, 0), {})
    assert "expected an empty log to start at offset 5" in info.value.message
    assert {p.name: p.read_bytes() for p in part.iterdir()} == before


def _idempotent_partition(path: Path) -> Path:
    """Batches as an idempotent (non-transactional) Kafka 3.8 producer leaves them
    (``RecordAccumulator`` sets producer id, epoch and base sequence; no transactional bit)."""
    with segstore.open(path, "kafka", mode="a") as store:
        part = store.partition
        part.append_records([(b"a", b"1", 10, []), (b"b", b"2", 11, [])], producer_id=4711,
                            producer_epoch=3, base_sequence=0)
        part.append_records([(None, b"3", 12, [])], producer_id=4711, producer_epoch=4, base_sequence=0)
        part.append_records([(b"c", None, 13, [("h", b"x")])])
        part.append_records([(b"d", b"4", 14, [])], producer_id=9, producer_epoch=0, base_sequence=5,
                            transactional=True)
    return path


def test_kafka_to_rocketmq_to_kafka_keeps_producer_id_and_epoch_of_every_batch(tmp_path: Path) -> None:
    src = _idempotent_partition(tmp_path / "src" / "orders-0")
    convert(str(src.parent), str(tmp_path / "rmq"), to="rocketmq", verify=True,
            config={"mappedFileSizeCommitLog": 1 << 20})
    convert(str(tmp_path / "rmq"), str(tmp_path / "back"), to="kafka", verify=True)
    with segstore.open(src) as a, segstore.open(tmp_path / "back" / "orders-0") as b:
        want = [kafka_entry_of(r) for r in a.scan()]
        got = [kafka_entry_of(r) for r in b.scan()]
    assert [(e.producer_id, e.producer_epoch) for e in want] == [(4711, 3), (4711, 3), (4711, 4), (-1, -1),
                                                                 (9, 0)]
    assert got == want


def test_convert_verify_fails_when_the_mapping_drops_a_kept_field(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """--verify must compare what the docs say is kept, not only what the mapping made."""
    from segstore_rocketmq import conversion

    from segstore.convert import pipeline

    src = _idempotent_partition(tmp_path / "src" / "orders-0")
    real = conversion.from_entry

    def lossy(entry, peer, **kwargs):   # the old mapping: producer id/epoch kept for transactions only
        msg = real(entry, peer, **kwargs)
        msg.properties.pop(peer.name + conversion.P_PRODUCER, None)
        return msg

    monkeypatch.setattr(conversion, "from_entry", lossy)
    # the entry path writes through from_entry (the columns make the same properties in C)
    monkeypatch.setattr(pipeline, "COLUMNAR", False)
    with pytest.raises(ConversionError) as info:
        convert(str(src.parent), str(tmp_path / "rmq"), to="rocketmq", verify=True,
                config={"mappedFileSizeCommitLog": 1 << 20})
    assert "producer_id=4711" in str(info.value)


def test_kafka_key_is_one_thing_in_library_columns_dump_and_conversion(tmp_path: Path) -> None:
    """Null, empty, binary and text keys: ``to_common``, Spark's (and Arrow's) ``key`` column,
    ``dump --json`` and a conversion round trip give the record's key bytes, unchanged (the
    RocketMQ first-KEYS-token rule is not Kafka's: a Kafka key is one opaque byte string)."""
    keys = [None, b"", b"\x00\xff binary", "ключ".encode(), b"two words"]
    src = tmp_path / "src" / "k-0"
    with segstore.open(src, "kafka", mode="a") as store:
        store.partition.append_records([(k, b"v", 100 + i, []) for i, k in enumerate(keys)])
    with segstore.open(src) as store:
        records = list(store.scan())
        assert [store.to_common(r).key for r in records] == keys
        table = pa.Table.from_batches(list(store.scan_arrow(["key"])))
        assert table.column("key").to_pylist() == keys         # also Spark's ``key`` column
        dumped = b"".join(bytes(block) for block in store.dump_json()).decode("ascii")
    assert [None if (k := json.loads(line)["key"]) is None else base64.b64decode(k)
            for line in dumped.splitlines()] == keys
    convert(str(src.parent), str(tmp_path / "rmq"), to="rocketmq",
            config={"mappedFileSizeCommitLog": 1 << 20})
    convert(str(tmp_path / "rmq"), str(tmp_path / "back"), to="kafka")
    with segstore.open(tmp_path / "back" / "k-0") as store:
        assert [r.key for r in store.scan()] == keys


def test_cli_main_in_process_reads_empty_checkpoint_log_dir(tmp_path: Path) -> None:
    log_dir = _kafka38_log_dir(tmp_path, "")
    out = io.StringIO()
    assert cli.main(["verify", str(log_dir)], out) == 0


def test_encode_batch_still_round_trips_through_an_empty_checkpoint_partition(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "leader-epoch-checkpoint").write_text("")
    with segstore.open(part, "kafka", mode="a") as store:
        store.partition.append_encoded(encode_batch([(b"k", b"v", 5, [])], base_offset=0,
                                                    partition_leader_epoch=2))
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"


def test_segments_without_time_index_as_kafka_before_0_10_1_left_them(tmp_path: Path) -> None:
    """Kafka < 0.10.1 wrote no ``.timeindex``, and v0/v1 batches only; Kafka 3.8 makes a missing one
    empty (``LogSegment.sanityCheck``: ``timeIndex().resize(0)``) and recovers nothing for it."""
    part = tmp_path / "old-0"
    part.mkdir()
    pre_0_10_1_segments(part)
    with segstore.open(part) as store:
        assert store.verify() == []
        assert [r.offset for r in store.scan()] == list(range(8))
        assert list(part.glob("*.timeindex")) == []               # reading never writes
    with segstore.open(part, "kafka", mode="a", **CONFIG) as store:
        assert store.recover() == []
        assert store.verify() == []
    assert (part / f"{0:020d}.timeindex").read_bytes() == b""


def test_a_missing_time_index_beside_v2_batches_is_named_and_rebuilt(tmp_path: Path) -> None:
    """Kafka 0.11 and later write a ``.timeindex`` beside every v2 segment; a closed segment without one is
    loaded by Kafka 3.8 with an empty one (``LogSegment.sanityCheck``), which it rebuilds only in a
    segment it recovers (``LogLoader.recoverLog``, from the recovery point).  verify used to pass it,
    then recover made it empty and kept it ("an intact segment keeps its files"), after which verify
    failed on the empty file: the two now agree, and recover rebuilds it from the log."""
    part = copy_writable(UNCOMPRESSED / "topic-0", tmp_path / "topic-0")
    originals = {path.name: path.read_bytes() for path in part.glob("*.timeindex")}
    for path in part.glob("*.timeindex"):
        path.unlink()
    before = _index_files(part)
    def lookups(store: segstore.Store) -> list[int | None]:
        # times through the store; the ListOffsets codes latest (-1) and earliest (-2) through the
        # partition (Kafka 3.8.0 UnifiedLog.fetchOffsetByTimestamp): Store.offset_for_time takes times only
        codes = [store.partition_of("topic", 0).offset_for_time(code) for code in (-1, -2)]
        return ([store.offset_for_time("topic", 0, t) for t in (1700000000120, 1700000005000)]
                + [None if found is None else found.offset for found in codes])

    with segstore.open(UNCOMPRESSED / "topic-0") as original:
        times = lookups(original)
    last = sorted(part.glob("*.log"))[-1].stem
    closed = sorted(f"{p.stem}.timeindex" for p in part.glob("*.log") if p.stem != last)
    with segstore.open(part) as store:
        problems = store.verify()
        assert sorted((Path(p.path).name, p.pos) for p in problems) == [(name, None) for name in closed]
        assert all("found no such file" in p.message for p in problems)
        assert lookups(store) == times
        assert list(part.glob("*.timeindex")) == []               # reading never writes
    with segstore.open(part, "kafka", mode="a", **CONFIG) as store:
        assert store.recover()
        assert store.verify() == []
    after = _index_files(part)
    assert {k: v for k, v in after.items() if k.endswith(".index")} == before
    assert {name: (part / name).read_bytes() for name in closed} == {name: originals[name] for name in closed}


@pytest.mark.parametrize("lines", [
    [{"topic": "bad topic", "partition": 0, "value": "x"}],
    [{"topic": "good", "partition": 0, "value": "x"}, {"topic": "bad topic", "partition": 0, "value": "x"}],
], ids=["only-bad", "good-then-bad"])
def test_a_refused_write_leaves_no_partial_files(tmp_path: Path, lines: list) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rc, _, err = _run("write", str(tmp_path / "logs"), "--format", "kafka", "--input", str(src))
    assert rc == 1 and "bad topic" in err           # a bad line: the input's problem (docs/cli.md)
    assert not (tmp_path / "logs").exists()
    log_dir = tmp_path / "existing"                      # an existing log dir: no partition made,
    part = copy_writable(UNCOMPRESSED / "topic-0", log_dir / "topic-0")   # its partitions unchanged
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    rc, _, err = _run("write", str(log_dir), "--format", "kafka", "--input", str(src))
    assert rc == 1
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["topic-0"]
    assert {p.name: p.read_bytes() for p in part.iterdir()} == before


def test_a_running_brokers_log_dir_lock_keeps_writers_out(tmp_path: Path) -> None:
    """Kafka 3.8's LogManager holds ``.lock`` in each log dir with ``FileChannel.tryLock``, a POSIX
    record lock on Linux; the child takes the same kind of lock (``fcntl.lockf``)."""
    log_dir = tmp_path / "logs"
    copy_writable(UNCOMPRESSED / "topic-0", log_dir / "topic-0")
    lock, ready, release = log_dir / ".lock", tmp_path / "ready", tmp_path / "release"
    lock.write_bytes(b"")
    code = (f"import fcntl, os, time\n"
            f"f = open({str(lock)!r}, 'r+')\n"
            f"fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            f"open({str(ready)!r}, 'w').close()\n"
            f"while not os.path.exists({str(release)!r}): time.sleep(0.02)\n")
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(1500):
            if ready.exists() or child.poll() is not None:
                break
            threading.Event().wait(0.02)
        assert ready.exists()
        for path in (log_dir, log_dir / "topic-0"):
            with pytest.raises(StoreLockedError) as info:
                segstore.open(path, "kafka", mode="a")
            assert info.value.path == str(lock) and "Kafka broker" in info.value.message
        with segstore.open(log_dir) as reader:
            assert reader.offset_range("topic", 0) == (0, 300)
    finally:
        release.touch()
        child.wait(timeout=60)
    with segstore.open(log_dir, "kafka", mode="a"):      # a broker that stopped holds nothing
        pass
    assert lock.exists()                                 # and its file is not ours to delete


def test_a_writer_removes_the_clean_shutdown_marker_as_the_brokers_loader_does(tmp_path: Path) -> None:
    """Kafka 3.8.0 LogManager.loadLogs deletes .kafka_cleanshutdown when it loads a log dir; with it
    present and no producer snapshot, UnifiedLog.rebuildProducerState (reloadFromCleanShutdown) scans
    nothing, so an open transaction segstore appended was lost to the broker (its LSO moved past
    uncommitted records).  A reader leaves it; a writer of the log dir, or of one partition in it,
    removes it."""
    import shutil

    import segstore

    src = FIXTURES / "real" / "kraft-confluent-7.5.1"
    logs = copy_writable(src, tmp_path / "kd")
    marker = logs / ".kafka_cleanshutdown"
    assert marker.exists()
    with segstore.open(str(logs)):
        pass
    assert marker.exists()
    with segstore.open(str(logs), mode="a"):
        pass
    assert not marker.exists()
    shutil.copy(src / ".kafka_cleanshutdown", marker)
    with segstore.open(str(logs / "delivery-create-request-0"), mode="a"):
        pass
    assert not marker.exists()


def test_a_log_dir_of_empty_partition_directories_is_kafkas(tmp_path: Path) -> None:
    """Kafka 3.8 ``LogManager.loadLogs`` loads every directory ``UnifiedLog.parseTopicPartitionName``
    takes, an empty one as a partition with an empty log (``LogLoader.load`` opens its first
    segment); ``UnifiedLog.apply`` makes the directory first, so a broker stopped between the two
    leaves one.  Such a log dir was "not a store of any known format", and with a checkpoint beside
    it read as holding no partition."""
    from segstore.errors import WrongFormatError
    from segstore.registry import detect

    logs = tmp_path / "logs"
    (logs / "t-0").mkdir(parents=True)
    assert detect(str(logs)) == "kafka"
    with segstore.open(str(logs)) as store:
        assert (store.topics(), store.partitions("t"), store.offset_range("t", 0)) == (["t"], [0], (0, 0))
    code, out, err = _run("info", str(logs))
    assert (code, err) == (0, "") and "topic=t, partition=0" in out and "end_offset=0" in out
    (logs / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")    # a broker's own file
    (logs / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    assert detect(str(logs)) == "kafka"
    with segstore.open(str(logs)) as store:
        assert store.partitions("t") == [0]
    with segstore.open(str(logs), mode="a") as store:      # the broker's loader opens its first segment
        store.append({"topic": "t", "partition": 0, "value": b"v"})
    assert sorted(os.listdir(logs / "t-0")) >= ["00000000000000000000.index", "00000000000000000000.log"]
    # an empty directory named like a partition among other things is no Kafka log dir
    other = tmp_path / "other"
    (other / "build-2").mkdir(parents=True)
    (other / "notes.txt").write_text("x")
    with pytest.raises(WrongFormatError, match="not a store of any known format"):
        detect(str(other))
    # nor does one beside a RocketMQ store's files make it two formats'
    rocketmq = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "rmq")
    (rocketmq / "x-1").mkdir()
    assert detect(str(rocketmq)) == "rocketmq"


def test_the_kraft_metadata_partition_is_in_no_log_dir_checkpoint(tmp_path: Path) -> None:
    """Kafka 3.8.0 LogManager.loadLogs skips ``__cluster_metadata-0`` (``KafkaRaftServer.MetadataTopic``),
    so checkpointRecoveryOffsetsInDir / checkpointLogStartOffsetsInDir never write it,
    ReplicaManager.checkpointHighWatermarks has no partition for it, and KafkaMetadataLog.apply opens
    it with ``recoveryPoint = 0L``: the real node's checkpoints hold every partition but it.  A
    writable open and close of the log dir must leave them so, the others updated."""
    logs = copy_writable(FIXTURES / "real" / "kraft-confluent-7.5.1", tmp_path / "kd")
    names = ("recovery-point-offset-checkpoint", "replication-offset-checkpoint")
    before = {name: read_offsets(str(logs / name)) for name in names}
    assert all(("__cluster_metadata", 0) not in offsets for offsets in before.values())
    with segstore.open(str(logs), mode="a") as store:
        store.append_batch([{"topic": "delivery-create-request", "partition": 0, "value": b"x"}])
    for name in (*names, "log-start-offset-checkpoint"):
        after = read_offsets(str(logs / name))
        assert ("__cluster_metadata", 0) not in after, name
    for name in names:
        after = read_offsets(str(logs / name))
        assert set(after) == set(before[name])
        assert after[("delivery-create-request", 0)] == 1
        assert after[("__consumer_offsets", 14)] == before[name][("__consumer_offsets", 14)]


@pytest.mark.parametrize("opened", ["log dir", "partition dir"])
def test_the_kraft_metadata_log_is_recovered_from_offset_0_whatever_the_clean_shutdown_marker(
        tmp_path: Path, opened: str) -> None:
    """Kafka 3.8.0 ``KafkaMetadataLog.apply`` opens ``__cluster_metadata-0`` with ``recoveryPoint = 0L`` and
    ``lastShutdownClean = false``: ``LogLoader.recoverLog`` recovers every segment at each start, whatever
    ``.kafka_cleanshutdown`` says of the log dir (``LogManager`` writes the marker for its own logs), and cuts
    the log at the first batch whose CRC fails.  segstore took the log dir's marker for the metadata log too:
    a writable open left the torn last batch of a real node's metadata log in place, for the controller to
    cut at its next start."""
    logs = copy_writable(FIXTURES / "real" / "kraft-confluent-7.5.1", tmp_path / "kd")
    assert (logs / ".kafka_cleanshutdown").exists()
    part = logs / "__cluster_metadata-0"
    log = part / f"{0:020d}.log"
    size = log.stat().st_size
    last_batch_at, last_offset = 2098375, 30637       # the log's last batch, one record
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF                                  # its record: the batch's CRC fails
    log.write_bytes(bytes(data))
    with segstore.open(part) as store:
        assert store.offset_range("__cluster_metadata", 0)[1] == last_offset + 1
    target = logs if opened == "log dir" else part
    with segstore.open(target, "kafka", mode="a") as store:
        assert store.offset_range("__cluster_metadata", 0)[1] == last_offset
    assert log.stat().st_size == last_batch_at < size
    with segstore.open(part) as store:
        assert store.verify() == []
        assert store.offset_range("__cluster_metadata", 0)[1] == last_offset
    # the other partitions of the log dir were shut down cleanly: nothing of theirs was walked or changed
    assert ("__consumer_offsets", 14) in read_offsets(str(logs / "recovery-point-offset-checkpoint"))
