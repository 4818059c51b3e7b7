"""``segstore query`` over a damaged store answers what ``dump`` answers: the messages before the
damage, then the damage named at its file and byte, exit 1 (docs/cli.md, "Exit codes and output").

- ``query --offset N --count C`` whose read meets damage after some of its records printed nothing
  and exited 1 with the error alone, though ``dump``, ``read`` and ``scan`` give those records first.
  A consumer fetching from N gets them too: Kafka 3.8 ``UnifiedLog.read`` returns the batches before
  a corrupt one (``FileRecords.batchesFrom``), RocketMQ 4.9.7 ``DefaultMessageStore.getMessage``
  the messages before the one it cannot read.  Damage at the first record asked still gives the
  error alone, as before.
- Kafka time lookups (``query --timestamp``, ``offset_for_time``) decode the batch they land in
  without a CRC check, as 3.8 ``LogSegment.findOffsetByTimestamp`` does; records that do not decode
  named the record, where every read names the batch's failed CRC.  Now they name the CRC too.  And
  ``max-timestamp`` in such a batch (3.8 ``UnifiedLog.fetchOffsetByTimestamp``, whose
  ``offsetOfMaxTimestamp`` fails on it) answered "no record", as of an empty partition.
- Kafka ``read(offset, count)`` decoded one record past ``count``: damage right after the records
  asked failed the read. RocketMQ's read (and a Kafka fetch of that many records) stops at them.
- A RocketMQ queue read reaching a commitlog file lost between others raised an OffsetOutOfRangeError
  naming no file, where the commitlog walk names the lost files; an entry at unwritten space said
  ``found End()``.
- A Kafka key query (no key index: a scan of the key column) meeting damage printed none of the
  hits before it.
- The Kafka record decoder's and the codecs' damage messages lacked the house form's ``expected``
  (``log:351: record 0 of 5: well-formed varints, found ...``, ``a valid gzip stream of 85 bytes,
  found: ...``).
- A RocketMQ time lookup read each probed message whole, body CRC checked, where 4.9.7 reads its
  store time alone: damage outside the window asked failed ``query --timestamp`` and
  ``dump --begin/--end``, and a window starting at the damaged message printed nothing.
- A Kafka segment whose batches do not walk whole (damage mid-log) failed every time lookup, even of
  times only later segments hold; 3.8 takes its largest timestamp from its time index.
- A Kafka time lookup landing in a batch cut short in a closed segment (a length past the file's end)
  answered the next segment's first offset, exit 0, where every read names the batch.
- The pure-Python RocketMQ dump of a time window walked the whole commitlog, so it met damage
  before or after the window that the C dump, walking the window's messages only, does not.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cli_run

import segstore

T = 1_700_000_000_000


@pytest.fixture(scope="module")
def kafka_store(tmp_path_factory) -> Path:
    """T-0: 12 batches of 5 records (offsets 0..59), 2 batches a segment."""
    root = tmp_path_factory.mktemp("kafka")
    with segstore.open(str(root / "base"), format="kafka", mode="a", **{"segment.bytes": 700}) as store:
        for b in range(12):
            store.append_batch([{"topic": "T", "partition": 0, "key": f"k{b * 5 + j}", "value": "v" * 30,
                                 "timestamp": T + (b * 5 + j) * 1000} for j in range(5)])
    return root / "base"


@pytest.fixture(scope="module")
def rocketmq_store(tmp_path_factory) -> Path:
    """T/0 and T/1, 30 messages each, alternating, over 4 KiB commitlog files."""
    root = tmp_path_factory.mktemp("rmq")
    lines = [json.dumps({"topic": "T", "queue_id": i % 2, "body": "x" * 48, "tags": f"tag{i % 3}",
                         "keys": [f"k{i}"], "store_timestamp": T + i * 1000}) for i in range(60)]
    (root / "in.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = cli_run("write", root / "base", "--input", root / "in.jsonl",
                           "--config", "mappedFileSizeCommitLog=4096")
    assert code == 0, err
    return root / "base"


def _cli_pure(*argv: object) -> tuple[int, str, str]:
    """``segstore ARGV`` in a process of its own with ``SEGSTORE_PURE_PYTHON=1`` (the C accelerators
    are chosen at import): exit code, stdout, stderr."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "formats"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "SEGSTORE_PURE_PYTHON": "1", "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-m", "segstore.cli", *map(str, argv)], capture_output=True,
                          text=True, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def _flip(path: Path, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ 0xFF]))


def _kafka_bad_crc(store: Path, tmp_path: Path) -> tuple[Path, str]:
    """The second batch of segment 20 (offsets 25..29) with a flipped record byte: its CRC fails."""
    copy = tmp_path / "k"
    shutil.copytree(store, copy)
    log = copy / "T-0" / "00000000000000000020.log"
    first = 12 + struct.unpack(">i", log.read_bytes()[8:12])[0]
    _flip(log, first + 100)
    return copy, f"{log}:{first + 17}: expected CRC-32C"


def _rocketmq_bad_crc(store: Path, tmp_path: Path) -> tuple[Path, str]:
    """T/0's message at queue offset 5 with a flipped body byte."""
    copy = tmp_path / "r"
    shutil.copytree(store, copy)
    with segstore.open(str(copy)) as opened:
        victim = list(opened.read("T", 0))[5]
    name = copy / "commitlog" / f"{victim.physical_offset // 4096 * 4096:020d}"
    _flip(name, victim.physical_offset % 4096 + victim.size - 20)
    return copy, f"{name}:{victim.physical_offset % 4096}: expected a well-formed message"


@pytest.mark.parametrize("as_json", [False, True])
def test_a_kafka_offset_query_prints_the_records_before_the_damage_then_names_it(kafka_store, tmp_path,
                                                                                  as_json):
    copy, error = _kafka_bad_crc(kafka_store, tmp_path)
    code, out, err = cli_run("query", copy, "--topic", "T", "--offset", 18, "--count", 10,
                             *(["--json"] if as_json else []))
    assert code == 1
    assert error in err
    if as_json:
        assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(18, 25))
    else:
        shown = [int(line.split()[2]) for line in out.splitlines() if line.startswith("| offset:")]
        assert shown == list(range(18, 25))
    # the same records and error as dump's read of them
    code, dumped, dump_err = cli_run("dump", copy, "--json")
    assert code == 1 and error in dump_err
    assert [json.loads(line)["offset"] for line in dumped.splitlines()][18:] == list(range(18, 25))


def test_a_kafka_offset_query_at_the_damaged_batch_is_the_error_alone(kafka_store, tmp_path):
    copy, error = _kafka_bad_crc(kafka_store, tmp_path)
    code, out, err = cli_run("query", copy, "--topic", "T", "--offset", 26, "--count", 3)
    assert (code, out) == (1, "")
    assert error in err


def test_a_kafka_time_query_prints_the_records_before_the_damage_then_names_it(kafka_store, tmp_path):
    copy, error = _kafka_bad_crc(kafka_store, tmp_path)
    code, out, err = cli_run("query", copy, "--topic", "T", "--timestamp", T + 22_000, "--count", 10)
    assert code == 1
    assert error in err
    assert out.splitlines()[0] == f"T-0: offset 22 is the first stored at or after {T + 22_000}"
    assert [int(line.split()[2]) for line in out.splitlines() if line.startswith("| offset:")] == [22, 23, 24]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_rocketmq_offset_query_prints_the_messages_before_the_damage_then_names_it(rocketmq_store, tmp_path,
                                                                                      as_json):
    copy, error = _rocketmq_bad_crc(rocketmq_store, tmp_path)
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 0, "--offset", 2, "--count", 10,
                             *(["--json"] if as_json else []))
    assert code == 1
    assert error in err
    if as_json:
        assert [json.loads(line)["queue_offset"] for line in out.splitlines()] == [2, 3, 4]
    else:
        assert [line.split()[0] for line in out.splitlines()] == ["T/0@2", "T/0@3", "T/0@4"]
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 0, "--offset", 5, "--count", 10)
    assert (code, out) == (1, "")
    assert error in err


def test_a_rocketmq_offset_query_meeting_a_wrong_queue_entry_prints_the_messages_before_it(rocketmq_store,
                                                                                            tmp_path):
    """T/0's consume-queue entry 3 pointing at the message of entry 0."""
    copy = tmp_path / "r"
    shutil.copytree(rocketmq_store, copy)
    queue = copy / "consumequeue" / "T" / "0" / f"{0:020d}"
    data = bytearray(queue.read_bytes())
    data[60:68] = data[0:8]
    queue.write_bytes(bytes(data))
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 0, "--offset", 0, "--count", 10)
    assert code == 1
    assert [line.split()[0] for line in out.splitlines()] == ["T/0@0", "T/0@1", "T/0@2"]
    assert "(queue offset 3), found a T/0 message" in err


def _kafka_undecodable(store: Path, tmp_path: Path, segment: int) -> tuple[Path, str]:
    """The second batch of a segment with its first record's length flipped: its records do not
    decode, and its CRC fails."""
    copy = tmp_path / "k"
    shutil.copytree(store, copy)
    log = copy / "T-0" / f"{segment:020d}.log"
    second = 12 + struct.unpack(">i", log.read_bytes()[8:12])[0]
    _flip(log, second + 61)
    return copy, f"{log}:{second + 17}: expected CRC-32C"


def test_a_kafka_time_lookup_names_the_damage_where_every_read_does(kafka_store, tmp_path):
    """A time inside a batch whose records do not decode: its bad CRC, at the CRC's byte, as read, dump
    and scan name it (Kafka's time lookup checks no CRC: a batch that decodes still answers), not the
    record its damage left undecodable."""
    copy, error = _kafka_undecodable(kafka_store, tmp_path, 20)
    code, _, dump_err = cli_run("dump", copy)
    assert code == 1 and error in dump_err
    code, out, err = cli_run("query", copy, "--topic", "T", "--timestamp", T + 26_000)
    assert (code, out) == (1, "")
    assert error in err
    with segstore.open(str(copy)) as opened:
        with pytest.raises(segstore.errors.CorruptDataError, match="expected CRC-32C"):
            opened.offset_for_time("T", 0, T + 26_000)
        assert opened.offset_for_time("T", 0, T + 22_000) == 22     # before the damage
        assert opened.offset_for_time("T", 0, T + 31_000) == 31     # after it


def test_kafka_max_timestamp_in_a_damaged_batch_is_its_damage_not_no_record(kafka_store, tmp_path):
    """The batch holding the largest timestamp does not decode: Kafka's ``offsetOfMaxTimestamp`` fails
    on it; segstore answered "no record stored at or after timestamp -3", as of an empty partition."""
    copy, error = _kafka_undecodable(kafka_store, tmp_path, 50)
    code, out, err = cli_run("query", copy, "--topic", "T", "--timestamp", "max-timestamp")
    assert (code, out) == (1, "")
    assert error in err
    assert "no record" not in err


def test_a_kafka_read_of_count_records_stops_before_damage_after_them(kafka_store, tmp_path):
    """``read(offset, count)`` decoded one record past ``count`` before stopping, so damage right after
    the records asked (a torn last batch, a bad CRC in the next batch) failed a read, and a
    ``query --offset --count``, that never needed it; RocketMQ's read stops at the count."""
    copy, error = _kafka_bad_crc(kafka_store, tmp_path)
    with segstore.open(str(copy)) as opened:
        assert [r.offset for r in opened.read("T", 0, 22, 3)] == [22, 23, 24]
        assert [r.offset for r in opened.read("T", 0, 22, 0)] == []
        with pytest.raises(segstore.errors.CorruptDataError):
            list(opened.read("T", 0, 22, 4))
    code, out, err = cli_run("query", copy, "--topic", "T", "--offset", 20, "--count", 5)
    assert (code, err) == (0, "")
    assert [int(line.split()[2]) for line in out.splitlines() if line.startswith("| offset:")] == \
        list(range(20, 25))
    code, out, err = cli_run("query", copy, "--topic", "T", "--offset", 20, "--count", 6)
    assert code == 1 and error in err


def test_a_rocketmq_queue_read_into_a_lost_middle_file_names_it_as_the_commitlog_walk_does(rocketmq_store,
                                                                                            tmp_path):
    """The second commitlog file is gone: ``dump``/``scan`` name it (``expected commitlog files from
    physical offset 4096 to 8192, found none``); a queue's read (``read``, ``query --offset``,
    ``query --timestamp``) raised an ``OffsetOutOfRangeError`` naming no file instead, and
    ``query --offset`` printed none of the messages before it."""
    copy = tmp_path / "r"
    shutil.copytree(rocketmq_store, copy)
    (copy / "commitlog" / f"{4096:020d}").unlink()
    error = (f"{copy / 'commitlog' / f'{4096:020d}'}: expected commitlog files from physical offset 4096 to "
             "8192, found none: the messages they held are lost")
    with segstore.open(str(copy)) as opened:
        with pytest.raises(segstore.errors.CorruptDataError) as scanned:
            list(opened.scan())
        assert str(scanned.value) == error
        with pytest.raises(segstore.errors.CorruptDataError) as failed:
            list(opened.read("T", 0))
        assert str(failed.value) == error
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 0, "--offset", 0, "--count", 100)
    assert code == 1 and error in err
    shown = [line.split()[0] for line in out.splitlines()]
    assert shown and shown == [f"T/0@{i}" for i in range(len(shown))]
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 0, "--timestamp", T + 40_000)
    assert code == 1 and error in err


def test_a_rocketmq_queue_entry_at_unwritten_space_says_so_in_words(rocketmq_store, tmp_path):
    """An entry pointing at zeros: ``found unwritten space ...``, not a Python repr (``found End()``)."""
    copy = tmp_path / "r"
    shutil.copytree(rocketmq_store, copy)
    with segstore.open(str(copy)) as opened:
        victim = list(opened.read("T", 1))[3]
    name = copy / "commitlog" / f"{victim.physical_offset // 4096 * 4096:020d}"
    with open(name, "r+b") as f:
        f.seek(victim.physical_offset % 4096)
        f.write(bytes(8))
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 1, "--offset", 0, "--count", 10)
    assert code == 1
    assert [line.split()[0] for line in out.splitlines()] == ["T/1@0", "T/1@1", "T/1@2"]
    assert (f"{name}:{victim.physical_offset % 4096}: expected a message at physical offset "
            f"{victim.physical_offset}, found unwritten space (a zero size and magic code)") in err


@pytest.mark.parametrize("argv", [(), ("--max", "1"), ("--json",)])
def test_a_kafka_key_query_prints_the_hits_before_the_damage_then_names_it(kafka_store, tmp_path, argv):
    """Without the extra key index a Kafka key query scans the key column: damage after a hit printed
    nothing, exit 1, though the hit's record reads whole (``dump`` prints it)."""
    copy, error = _kafka_bad_crc(kafka_store, tmp_path)
    code, out, err = cli_run("query", copy, "--topic", "T", "--key", "k3", *argv)
    assert code == 1 and error in err
    if "--json" in argv:
        assert [json.loads(line)["offset"] for line in out.splitlines()] == [3]
    else:
        assert out == f"T/0 offset 3 timestamp {T + 3000} key k3\n"
    code, out, err = cli_run("query", copy, "--topic", "T", "--key", "k40")   # past the damage: unknown
    assert (code, out) == (1, "") and error in err
    with segstore.open(str(copy)) as opened:   # the library's find raises it, as before
        with pytest.raises(segstore.errors.CorruptDataError, match="expected CRC-32C"):
            opened.find("T", "k3")


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_batch_whose_payload_is_garbage_under_a_good_crc_is_named_alike_by_every_read(tmp_path, codec,
                                                                                       pure):
    """Records (compressed or not) that do not decode under a CRC that holds: every read gives the records
    before the batch, then the same ``path:pos: expected ..., found ...`` (the record decoder's and the
    codecs' messages lacked the ``expected``: ``...: a valid gzip stream of 85 bytes, found: ...``)."""
    import random

    import crc32c

    path = tmp_path / "k"
    with segstore.open(str(path), format="kafka", mode="a", **{"compression.type": codec}) as store:
        for b in range(4):
            store.append_batch([{"topic": "T", "partition": 0, "key": f"k{b * 5 + j}", "value": "v" * 30,
                                 "timestamp": T + b * 5 + j} for j in range(5)])
    log = path / "T-0" / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    pos = 0
    for _ in range(2):
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
    rng = random.Random(7)
    data[pos + 61:end] = bytes(rng.randrange(256) for _ in range(end - pos - 61))
    if codec == "none":
        data[pos + 61] = 0xFF    # a first record length varint too long to decode
    struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21:end])))
    log.write_bytes(bytes(data))
    errors = set()
    code, out, err = cli_run("dump", path, "--json")
    assert code == 1 and [json.loads(line)["offset"] for line in out.splitlines()] == list(range(10))
    errors.add(err.strip())
    code, out, err = cli_run("query", path, "--topic", "T", "--offset", 5, "--count", 20)
    assert code == 1 and out
    errors.add(err.strip())
    with segstore.open(str(path)) as opened:
        for read in (lambda: list(opened.read("T", 0)), lambda: list(opened.scan()),
                     lambda: list(opened.scan_arrow(threads=1)), lambda: list(opened.scan_arrow(threads=3))):
            with pytest.raises(segstore.errors.CorruptDataError) as failed:
                read()
            errors.add(str(failed.value))
    if pure:   # the pure-Python decoders (a process of their own: the choice is made at import)
        code, out, err = _cli_pure("dump", path, "--json")
        assert code == 1 and [json.loads(line)["offset"] for line in out.splitlines()] == list(range(10))
        errors.add(err.strip())
    (error,) = errors
    assert error.startswith(f"{log}:")
    assert ": expected " in error.split(f"{log}:", 1)[1]
    if codec != "none":
        assert f"expected a valid {codec} stream of" in error


def _rocketmq_bad_body(store: Path, tmp_path: Path) -> tuple[Path, str]:
    """T/0's message at queue offset 5 (stored at T + 10 s) with a flipped body byte: its body CRC fails,
    its header holds."""
    copy = tmp_path / "r"
    shutil.copytree(store, copy)
    with segstore.open(str(copy)) as opened:
        victim = list(opened.read("T", 0))[5]
    assert victim.store_timestamp == T + 10_000
    name = copy / "commitlog" / f"{victim.physical_offset // 4096 * 4096:020d}"
    _flip(name, victim.physical_offset % 4096 + 90)     # the body's third byte (IPv4 hosts: body at 88)
    return copy, f"{name}:{victim.physical_offset % 4096}: expected a well-formed message"


@pytest.mark.parametrize("pure", [False, True])
def test_a_rocketmq_time_lookup_passes_over_a_damaged_body_it_need_not_read(rocketmq_store, tmp_path, pure):
    """4.9.7 ``ConsumeQueue.getOffsetInQueueByTime`` reads each probed message's store time alone
    (``CommitLog.pickupStoreTimestamp``): a damaged body does not stop it.  segstore read the whole
    message, body CRC checked, so ``query --timestamp`` and ``dump --begin/--end`` failed on damage
    outside the window asked (exit 1, nothing printed); and a window starting at the damaged message
    printed none of the messages before it in the commitlog.  The pure-Python dump walked the whole
    commitlog for a window, so it met damage before or after it that the C dump (which walks the
    window's messages only) does not."""
    run = _cli_pure if pure else cli_run
    copy, error = _rocketmq_bad_body(rocketmq_store, tmp_path)
    code, out, err = cli_run("query", copy, "--topic", "T", "--queue", 0, "--timestamp", T + 12_000)
    assert (code, err) == (0, "")
    assert out == f"T/0: offset 6 is the first stored at or after {T + 12_000}\n"
    with segstore.open(str(copy)) as opened:
        assert opened.offset_for_time("T", 0, T + 10_000) == 5
        assert opened.offsets_between("T", 0, T + 11_000, T + 20_000) == (6, 11)
    code, out, err = run("dump", copy, "--begin", T + 11_000, "--end", T + 12_000, "--json")
    assert (code, err) == (0, "")
    assert [(m["queue_id"], m["queue_offset"]) for m in map(json.loads, out.splitlines())] == [(1, 5), (0, 6)]
    code, out, err = run("dump", copy, "--begin", T + 2000, "--end", T + 3000)   # before the damage
    assert (code, err, len(out.splitlines())) == (0, "", 2)
    for threads in ("1", "3"):   # the window holds the damaged message: the one before it, then the damage
        code, out, err = run("dump", copy, "--begin", T + 9_000, "--end", T + 12_000, "--json",
                                 "--threads", threads)
        assert code == 1 and error in err
        assert [(m["queue_id"], m["queue_offset"]) for m in map(json.loads, out.splitlines())] == [(1, 4)]


def test_a_kafka_time_lookup_past_a_damaged_segment_answers_from_the_segments_after_it(kafka_store, tmp_path):
    """Zeros over the end of segment 20's first batch and the header of its second: a walk of its batches
    stops there, so its largest timestamp was unknown and every time lookup raised, even of a time only
    a later segment holds, and ``dump --begin/--end`` printed nothing.  Kafka 3.8 takes a segment's
    largest timestamp from its time index (``LogSegment.readMaxTimestampAndOffsetSoFar``), and
    ``UnifiedLog.fetchOffsetByTimestamp`` passes over a segment whose largest timestamp is older."""
    copy = tmp_path / "k"
    shutil.copytree(kafka_store, copy)
    log = copy / "T-0" / f"{20:020d}.log"
    first = 12 + struct.unpack(">i", log.read_bytes()[8:12])[0]
    with open(log, "r+b") as f:
        f.seek(first - 40)
        f.write(bytes(100))
    error = f"{log}:17: expected CRC-32C"    # the first batch's, as every read names it
    with segstore.open(str(copy)) as opened:
        assert opened.offset_for_time("T", 0, T + 45_000) == 45
        assert opened.offset_for_time("T", 0, T + 12_000) == 12
        with pytest.raises(segstore.errors.CorruptDataError):
            opened.offset_for_time("T", 0, T + 26_000)    # a time the damaged segment may hold
    code, out, err = cli_run("query", copy, "--topic", "T", "--timestamp", T + 45_000)
    assert code == 0 and out.startswith(f"T-0: offset 45 is the first stored at or after {T + 45_000}\n")
    code, out, err = cli_run("dump", copy, "--begin", T + 1000, "--end", T + 30_000, "--json")
    assert code == 1 and error in err
    assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(1, 20))


def test_a_kafka_time_lookup_does_not_answer_past_a_cut_batch_of_a_closed_segment(kafka_store, tmp_path):
    """Segment 20's second batch (offsets 25..29) with a length reaching past the file's end: a time
    lookup of a time it holds answered offset 30 from the next segment, exit 0, where every read names
    the batch.  A batch the log ends inside is a live writer's only in the active segment."""
    copy = tmp_path / "k"
    shutil.copytree(kafka_store, copy)
    log = copy / "T-0" / f"{20:020d}.log"
    data = bytearray(log.read_bytes())
    first = 12 + struct.unpack_from(">i", data, 8)[0]
    struct.pack_into(">i", data, first + 8, 100_000)
    log.write_bytes(bytes(data))
    error = f"{log}:{first}: expected a 100012-byte batch, found {len(data) - first} bytes"
    code, _, err = cli_run("dump", copy)
    assert code == 1 and error in err
    with segstore.open(str(copy)) as opened:
        with pytest.raises(segstore.errors.TruncatedDataError) as failed:
            opened.offset_for_time("T", 0, T + 26_000)
        assert str(failed.value) == error
        assert opened.offset_for_time("T", 0, T + 22_000) == 22
        assert opened.offset_for_time("T", 0, T + 31_000) == 31
    code, out, err = cli_run("query", copy, "--topic", "T", "--timestamp", T + 26_000)
    assert (code, out) == (1, "") and error in err


@pytest.mark.parametrize("threads", [1, 3])
def test_a_rocketmq_queue_scan_arrow_into_a_lost_middle_file_names_it(rocketmq_store, tmp_path, threads):
    """``scan_arrow(topic=, partition=)`` reads a queue through its entries, as ``read`` does: into a
    commitlog file lost between others it raised ``OffsetOutOfRangeError`` naming no file."""
    copy = tmp_path / "r"
    shutil.copytree(rocketmq_store, copy)
    (copy / "commitlog" / f"{4096:020d}").unlink()
    with segstore.open(str(copy)) as opened:
        with pytest.raises(segstore.errors.CorruptDataError) as failed:
            list(opened.scan_arrow(topic="T", partition=0, threads=threads))
    assert str(failed.value).endswith("expected commitlog files from physical offset 4096 to 8192, found "
                                      "none: the messages they held are lost")


def test_a_kafka_time_query_of_every_partition_names_damage_after_the_records_before_it(tmp_path):
    """``query --timestamp --count`` without ``--partition`` answers partition by partition: damage
    met after some of a partition's records must still end it with the error, exit 1, not a shorter
    answer and exit 0."""
    path = tmp_path / "k"
    with segstore.open(str(path), format="kafka", mode="a") as store:
        for p in (0, 1):
            for b in range(4):
                store.append_batch([{"topic": "T", "partition": p, "key": f"k{b * 5 + j}", "value": "v" * 30,
                                     "timestamp": T + (b * 5 + j) * 1000} for j in range(5)])
    log = path / "T-0" / f"{0:020d}.log"
    first = 12 + struct.unpack(">i", log.read_bytes()[8:12])[0]
    _flip(log, first + 100)
    code, out, err = cli_run("query", path, "--topic", "T", "--timestamp", T + 2000, "--count", 10)
    assert code == 1 and f"{log}:{first + 17}: expected CRC-32C" in err
    assert [int(line.split()[2]) for line in out.splitlines() if line.startswith("| offset:")] == [2, 3, 4]
