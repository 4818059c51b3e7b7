"""Regression tests for the findings of the seeded corruption suite (issue 15), each on a damaged
copy of a broker-written store (``compat_fixtures/``), as ``tests/damage.py`` damages them:
``python -m tests.damage --seed 20261123 --case N`` reproduces the case named in each test.

Broker behaviour referred to is RocketMQ 4.9.7's (``CommitLog.recoverNormally`` /
``recoverAbnormally``, ``MappedFileQueue.load``, ``IndexFile.putKey``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import damage
import numpy as np
import pytest
from segstore_rocketmq.config import validate_topic
from segstore_rocketmq.message import BLANK_MAGIC, PREFIX
from segstore_rocketmq.recovery import _odd

import segstore
from segstore import cli, files
from segstore.errors import CorruptDataError, InvalidTopicError, SegstoreError, UnrepairedDataError

FILE_SIZE = 65536       # mappedFileSizeCommitLog of both RocketMQ fixtures
# Message field positions (MessageDecoder): QUEUEID, QUEUEOFFSET, PHYSICALOFFSET; the body at 88 (v1).
QUEUEID_POS, QUEUEOFFSET_POS, PHYSICALOFFSET_POS, BODY_POS = 12, 20, 28, 88


def _store(tmp_path: Path, name: str = "basic") -> Path:
    return damage.make_pristine("rocketmq", name, tmp_path / "copy")


def _records(store: Path) -> list[dict]:
    rc, records, err = damage.dump_records(str(store))
    assert rc == 0, err
    return records


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    got = capsys.readouterr()
    return rc, got.out, got.err


def _file_of(store: Path, phy: int) -> tuple[Path, int]:
    base = phy - phy % FILE_SIZE
    return store / "commitlog" / f"{base:020d}", phy - base


def _patch(store: Path, phy: int, data: bytes) -> Path:
    path, pos = _file_of(store, phy)
    raw = bytearray(path.read_bytes())
    raw[pos:pos + len(data)] = data
    path.write_bytes(bytes(raw))
    return path


def _canon(records: list[dict]) -> set[str]:
    return {json.dumps(r, sort_keys=True) for r in records}


# -- non-regular files and stray names in commitlog/ (cases 302, 196) ----------------------------------


@pytest.mark.parametrize("command", [["dump", "--json"], ["verify"], ["info"], ["recover"]])
def test_a_symlink_loop_in_place_of_a_commitlog_file_is_a_data_error_naming_it(tmp_path, capsys, command):
    """Case 302: a symlink loop (and its partner, a stray name) where a commitlog file was; it was
    exit 2 (usage) "not a store of any known format" without naming the file."""
    store = _store(tmp_path, "abort")
    target = store / "commitlog" / f"{262144:020d}"
    target.unlink()
    os.symlink(target.name + ".loop", target)
    os.symlink(target.name, target.with_name(target.name + ".loop"))
    rc, _, err = _cli(capsys, *command, str(store))
    assert rc == 1
    assert f"{target}: expected a commitlog file of {FILE_SIZE} bytes" in err
    assert "found a symlink loop" in err


def test_a_stray_name_in_commitlog_is_a_data_error_naming_it(tmp_path, capsys):
    store = _store(tmp_path)
    stray = store / "commitlog" / "notes.txt"
    stray.write_text("x")
    rc, _, err = _cli(capsys, "verify", str(store))
    assert rc == 1 and f"{stray}: expected file names of 20 digits, found 'notes.txt'" in err


def test_a_fifo_in_place_of_a_commitlog_file_names_it_and_the_stores_file_size(tmp_path, capsys):
    """Case 196: the message said "expected ... 1073741824 bytes, found 0" (the default size, as the
    FIFO was taken for the first file); the size comes from the file names now."""
    store = _store(tmp_path, "abort")
    target = store / "commitlog" / f"{0:020d}"
    target.unlink()
    os.mkfifo(target)
    for command in (["dump", "--json"], ["verify"], ["recover"]):
        rc, _, err = _cli(capsys, *command, str(store))
        assert rc == 1
        assert f"{target}: expected a commitlog file of {FILE_SIZE} bytes (mappedFileSizeCommitLog), " \
               f"found a FIFO" in err


def test_the_file_size_comes_from_the_names_when_the_first_file_is_damaged(tmp_path, capsys):
    store = _store(tmp_path, "abort")
    first = store / "commitlog" / f"{0:020d}"
    first.write_bytes(first.read_bytes()[:1000])
    rc, _, err = _cli(capsys, "info", str(store))
    assert rc == 1 and f"{first}:1000: expected a commitlog file of {FILE_SIZE} bytes" in err


# -- damage with intact messages after it (cases 160, 811, 829) ------------------------------------------


def _damage_message(store: Path, records: list[dict], how: str) -> dict:
    """Damage one message early in the commitlog (of the basic store's three files) as ``how`` says."""
    victim = records[3] if how != "middle-file" else next(
        r for r in records if r["physical_offset"] >= 2 * 262144 and r["size"] > 1000)
    phy = victim["physical_offset"]
    if how == "negative-size":      # case 829: -2**31 over TOTALSIZE
        _patch(store, phy, struct.pack(">i", -(1 << 31)))
    else:                           # cases 160, 811: a flipped bit / a huge int inside the body
        path, pos = _file_of(store, phy + BODY_POS + 100)
        raw = bytearray(path.read_bytes())
        raw[pos] ^= 0x10
        path.write_bytes(bytes(raw))
    return victim


@pytest.mark.parametrize("how", ["negative-size", "body", "middle-file"])
def test_damage_with_intact_messages_after_it_is_left_in_place_and_recover_exits_1(tmp_path, capsys, how):
    """``recoverNormally``/``recoverAbnormally`` stop at the first bad message and truncate
    everything after it (``truncateDirtyFiles``), intact messages included.  segstore cuts only
    a torn tail: the damaged message stays, every later message stays, and recover says it could
    not repair it (exit 1 naming the place) instead of exiting 0 over a store that still fails."""
    store = _store(tmp_path)
    records = _records(store)
    victim = _damage_message(store, records, how)
    path, pos = _file_of(store, victim["physical_offset"])
    before = path.read_bytes()
    rc, out, err = _cli(capsys, "recover", str(store))
    assert rc == 1
    assert f"{path}:{pos}: expected messages, found {victim['size']} damaged bytes with intact messages " \
           f"after them" in err
    assert "commitlog: full check" in out          # every other repair was done and printed
    assert path.read_bytes() == before             # nothing of the file was cut or rewritten
    with segstore.open(str(store)) as s:
        for r in records:
            if r is victim:
                with pytest.raises(SegstoreError):
                    s.message_at(r["physical_offset"])
                continue
            assert base64.b64encode(s.message_at(r["physical_offset"]).body).decode() == r["body"]


def test_the_library_recover_raises_the_unrepaired_damage_with_what_it_did(tmp_path):
    store = _store(tmp_path)
    _damage_message(store, _records(store), "negative-size")
    with segstore.open(str(store), mode="a") as s, pytest.raises(UnrepairedDataError) as caught:
        s.recover()
    assert caught.value.pos is not None and caught.value.path.endswith(f"{0:020d}")
    assert any("full check" in line for line in caught.value.actions)


# -- a commitlog file of the wrong size (case 317) -------------------------------------------------------


def test_a_short_middle_commitlog_file_is_named_and_recover_resizes_it_keeping_all(tmp_path, capsys):
    """Case 317: ``MappedFileQueue.load`` refuses a file whose length is not the mapped-file size,
    and so did every command.  Readers name it; recover extends it, keeps the torn message's bytes
    aside and ends the file with a BLANK (``recoverNormally`` goes on to the next file at a BLANK),
    so no message of the later files is lost, and exits 1 naming the queue entries of the
    messages the missing bytes held."""
    store = _store(tmp_path, "abort")
    records = _records(store)
    middle = store / "commitlog" / f"{131072:020d}"
    cut_at = 52460
    middle.write_bytes(middle.read_bytes()[:cut_at])
    for command in (["dump", "--json"], ["verify"], ["info"]):
        rc, _, err = _cli(capsys, *command, str(store))
        assert rc == 1 and f"{middle}:{cut_at}: expected a commitlog file of {FILE_SIZE} bytes" in err
        assert "refuses to load it" in err
    rc, out, err = _cli(capsys, "recover", str(store))
    end = 131072 + cut_at
    torn = next(r for r in records if r["physical_offset"] < end < r["physical_offset"] + r["size"])
    pos = torn["physical_offset"] - 131072
    lost = [r for r in records if r["physical_offset"] >= torn["physical_offset"]
            and r["physical_offset"] < 131072 + FILE_SIZE]
    # the messages the missing bytes held are gone; their queue entries are left, and recover says so
    assert rc == 1 and f"{middle}:{pos}: expected the file's messages up to {FILE_SIZE} bytes, found them " \
                       f"lost with its missing bytes; {len(lost)} consume-queue entries point at them" in err
    assert f"{middle}:{pos}: wrote a BLANK of {FILE_SIZE - pos} bytes" in out
    assert middle.stat().st_size == FILE_SIZE
    assert PREFIX.unpack_from(middle.read_bytes(), pos) == (FILE_SIZE - pos, BLANK_MAGIC)
    kept = store / ".segstore" / "cut" / "commitlog" / f"{middle.name}.cut-{pos}"
    pristine = damage.FIXTURES / "rocketmq" / "abort" / "store" / "commitlog" / middle.name
    assert kept.read_bytes() == pristine.read_bytes()[pos:cut_at]
    after = _records(store)
    assert _canon(after) <= _canon(records)        # nothing invented
    wanted = [r for r in records if r["physical_offset"] + r["size"] <= 131072 + cut_at
              or r["physical_offset"] >= 131072 + FILE_SIZE]
    assert _canon(wanted) <= _canon(after)         # nothing intact lost


def test_a_long_commitlog_file_has_its_extra_bytes_kept_aside_by_recover(tmp_path, capsys):
    store = _store(tmp_path, "abort")
    records = _records(store)
    middle = store / "commitlog" / f"{65536:020d}"
    middle.write_bytes(middle.read_bytes() + b"garbage" * 10)
    rc, _, err = _cli(capsys, "verify", str(store))
    assert rc == 1 and f"{middle}:{FILE_SIZE}: expected a commitlog file of {FILE_SIZE} bytes" in err
    rc, out, _ = _cli(capsys, "recover", str(store))
    assert rc == 0 and f"cut 70 bytes past the commitlog file size {FILE_SIZE}" in out
    assert (store / ".segstore" / "cut" / "commitlog" / f"{middle.name}.cut-{FILE_SIZE}").read_bytes() \
        == b"garbage" * 10
    assert _canon(_records(store)) == _canon(records)


# -- header fields no CRC covers -------------------------------------------------------------------------


def test_a_negative_queue_id_never_creates_a_queue_directory(tmp_path, capsys):
    """Issue 15: recover created ``consumequeue/TopicB/-1``, after which every open failed."""
    store = _store(tmp_path)
    victim = _records(store)[3]
    _patch(store, victim["physical_offset"] + QUEUEID_POS, struct.pack(">i", -1))
    rc, out, err = _cli(capsys, "verify", str(store))
    assert rc == 1 and "expected a queue id >= 0, found -1" in out
    rc, _, err = _cli(capsys, "recover", str(store))
    # left in place as a whole message whose header alone is wrong (4.9.7 keeps it: it checks no queue id)
    assert rc == 1 and "whole message" in err
    assert sorted(os.listdir(store / "consumequeue" / victim["topic"])) == ["0", "1", "2", "3"]
    rc, _, err = _cli(capsys, "dump", "--json", str(store))
    assert rc == 1 and "expected a queue id >= 0, found -1" in err     # never served


def test_a_damaged_queue_offset_leaves_its_queue_whole(tmp_path, capsys):
    """Issue 15: a QUEUEOFFSET changed to 999 (no CRC covers it) made recover take the queue for one
    missing earlier entries, rebuild it from the commitlog, meet the same message again and leave
    the whole queue empty.  The message is torn; every entry of its queue stays."""
    store = _store(tmp_path)
    records = _records(store)
    victim = records[3]
    cq = store / "consumequeue" / victim["topic"] / str(victim["queue_id"]) / f"{0:020d}"
    before = cq.read_bytes()
    _patch(store, victim["physical_offset"] + QUEUEOFFSET_POS, struct.pack(">q", 999))
    rc, out, err = _cli(capsys, "recover", str(store))
    path, pos = _file_of(store, victim["physical_offset"])
    assert rc == 1 and f"{path}:{pos}: queue offset 999 contradicts its queue's other messages" in out
    assert f"{path}:{pos}: expected messages" in err
    assert cq.read_bytes() == before
    mine = [r for r in records if (r["topic"], r["queue_id"]) == (victim["topic"], victim["queue_id"])]
    with segstore.open(str(store)) as s:
        assert s.offset_range(victim["topic"], victim["queue_id"]) == (0, len(mine))


@pytest.mark.parametrize(("offsets", "odd"), [
    ([5, 999, 7], [False, True, False]),
    ([999, 1, 2], [True, False, False]),
    ([5, 6, 999, 8], [False, False, True, False]),
    ([0, 1, 2, 3], [False] * 4),
    ([3, 4], [False, False]),             # two messages: which one is wrong cannot be told
    ([5, 6, 7, 999], [False] * 4),        # the last one: nothing after it to tell
])
def test_odd_queue_offsets(offsets, odd):
    assert _odd(np.array(offsets, np.int64)).tolist() == odd


def test_a_damaged_topic_name_is_a_data_error_and_never_makes_a_queue_outside_consumequeue(tmp_path, capsys):
    """Issue 15: ``../icA`` in a stored topic was exit 2; recover then wrote ``STORE/icA/1``."""
    store = _store(tmp_path)
    victim = _records(store)[3]
    body = base64.b64decode(victim["body"])
    _patch(store, victim["physical_offset"] + BODY_POS + len(body) + 1, b"../icA")   # after the topic length
    rc, out, _ = _cli(capsys, "verify", str(store))
    assert rc == 1 and "expected a topic of the characters [%|a-zA-Z0-9_-], found '../icA'" in out
    rc, _, _ = _cli(capsys, "recover", str(store))
    assert rc == 1
    assert not (store / "icA").exists() and not (store / "consumequeue" / "..").joinpath("icA").exists()


def test_a_message_claiming_another_physical_offset_is_never_served(tmp_path, capsys):
    """Issue 15: a PHYSICALOFFSET of -1 (no CRC covers it) was served by dump with the bogus offset."""
    store = _store(tmp_path)
    victim = _records(store)[3]
    _patch(store, victim["physical_offset"] + PHYSICALOFFSET_POS, struct.pack(">q", -1))
    path, pos = _file_of(store, victim["physical_offset"])
    rc, out, err = _cli(capsys, "dump", "--json", str(store))
    phy = victim["physical_offset"]
    assert rc == 1
    assert f"{path}:{pos}: expected a message stored at physical offset {phy}, found one claiming offset -1" \
        in err
    assert '"physical_offset": -1' not in out
    with segstore.open(str(store)) as s, pytest.raises(SegstoreError, match="claiming offset -1"):
        list(s.read(victim["topic"], victim["queue_id"]))


def test_a_conversion_meeting_offsets_that_go_back_names_the_partition(tmp_path, capsys):
    """Issue 15: ``expected offsets to increase in TOPIC-1, found offset 0 after 62`` named no file."""
    store = _store(tmp_path)
    victim = next(r for r in _records(store) if r["queue_offset"] >= 2)
    _patch(store, victim["physical_offset"] + QUEUEOFFSET_POS, struct.pack(">q", 0))
    dest = tmp_path / "kafka"
    rc, _, err = _cli(capsys, "convert", "--to", "kafka", str(store), str(dest))
    assert rc == 1
    # the destination partition being written (under the conversion's staging directory)
    name = f"{victim['topic']}-{victim['queue_id']}"
    assert re.match(rf"{tmp_path}/\S*kafka\S*/{name}: expected the source's offsets of {name} to increase, "
                    rf"found offset 0 after {victim['queue_offset'] - 1}\n", err), err


# -- consume queues, index files, the preallocated tail --------------------------------------------------


def test_a_consume_queue_file_with_a_byte_appended_does_not_block_recover(tmp_path, capsys):
    store = _store(tmp_path)
    cq = store / "consumequeue" / "TopicA" / "0" / f"{0:020d}"
    size = cq.stat().st_size
    cq.write_bytes(cq.read_bytes() + b"\x01")
    rc, _, err = _cli(capsys, "verify", str(store))
    assert rc == 1 and f"{cq}: expected a consume-queue file of {size} bytes" in err
    rc, out, _ = _cli(capsys, "recover", str(store))
    assert rc == 0 and f"{cq}:{size}: cut 1 bytes past the consume-queue file size" in out
    kept = store / ".segstore" / "cut" / "consumequeue" / "TopicA" / "0" / f"{cq.name}.cut-{size}"
    assert kept.read_bytes() == b"\x01"
    assert _cli(capsys, "verify", str(store))[0] == 0


@pytest.mark.parametrize(("damage_it", "where"), [
    (lambda b: b[:-100], ": expected an index file of 5416 bytes (64 slots, 256 entries), found 5316"),
    (lambda b: b + bytes(100),
     ":5416: expected an index file of 5416 bytes (64 slots, 256 entries), found 5516"),
    (lambda b: b[:16] + struct.pack(">q", 123456) + b[24:], ":16: expected beginPhyOffset 0"),
    (lambda b: b[:36] + struct.pack(">i", 10 ** 6) + b[40:], ":36: expected indexCount <= 256"),
    (lambda b: b[:52] + struct.pack(">i", 10 ** 6) + b[56:], ":52: expected slot 3 to hold an entry below"),
], ids=["truncated", "extended", "beginPhyOffset", "indexCount", "slot"])
def test_verify_sees_index_file_geometry_header_and_slots(tmp_path, capsys, damage_it, where):
    """Issue 15: a truncated or extended IndexFile, or a changed ``beginPhyOffset``, verified clean."""
    store = _store(tmp_path)
    first = sorted((store / "index").iterdir())[0]
    first.write_bytes(damage_it(first.read_bytes()))
    rc, out, _ = _cli(capsys, "verify", str(store))
    assert rc == 1 and f"{first}{where}" in out


def test_recover_sets_a_damaged_begin_phy_offset_to_the_first_entrys(tmp_path, capsys):
    store = _store(tmp_path)
    first = sorted((store / "index").iterdir())[0]
    raw = first.read_bytes()
    first.write_bytes(raw[:16] + struct.pack(">q", 123456) + raw[24:])
    rc, out, _ = _cli(capsys, "recover", str(store))
    assert rc == 0 and f"{first}: beginPhyOffset 123456 set to its first entry's, 0" in out
    assert first.read_bytes() == raw


@pytest.mark.parametrize("change", [-100, 100])
def test_recover_sets_an_index_file_of_the_wrong_size_aside_and_rebuilds_it(tmp_path, capsys, change):
    """A short file is set aside and rebuilt; a longer one is the broker's first ``fileTotalSize`` bytes
    (``IndexFile``'s ``MappedFile``): kept, the zeros past them cut
    (test_rocketmq_index_short_file.py)."""
    store = _store(tmp_path)
    first = sorted((store / "index").iterdir())[0]
    raw = first.read_bytes()
    first.write_bytes(raw[:change] if change < 0 else raw + bytes(change))
    rc, out, _ = _cli(capsys, "recover", str(store))
    if change < 0:
        assert rc == 0 and f"{first}: moved to" in out
        assert (store / ".segstore" / "cut" / "index" / first.name).stat().st_size == len(raw) + change
    else:
        assert rc == 0 and f"{first}:{len(raw)}: cut {change} bytes past the index file's" in out
        assert first.read_bytes() == raw
    assert _cli(capsys, "verify", str(store))[0] == 0
    rc, out, _ = _cli(capsys, "query", "--topic", "TopicA", "--key", "key-0", "--json", str(store))
    assert rc == 0 and '"key-0"' in out


def test_garbage_in_the_preallocated_tail_is_reported_and_kept_when_cut(tmp_path, capsys):
    store = _store(tmp_path)
    last = sorted((store / "commitlog").iterdir())[-1]
    raw = bytearray(last.read_bytes())
    raw[-100:-90] = b"x" * 10
    last.write_bytes(bytes(raw))
    rc, out, _ = _cli(capsys, "verify", str(store))
    assert rc == 1 and "expected a valid message or zeros after the last message" in out
    rc, out, _ = _cli(capsys, "recover", str(store))
    assert rc == 0 and "torn tail, saved in" in out
    kept = next((store / ".segstore" / "cut" / "commitlog").iterdir())
    assert b"x" * 10 in kept.read_bytes()


def test_values_in_topic_errors_are_cut():
    with pytest.raises(InvalidTopicError) as caught:
        validate_topic("../" * 42)     # 126 characters: under the length limit, so the value is shown
    assert "..." in str(caught.value) and "more characters" in str(caught.value)


# -- readers beside a writer ----------------------------------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys, time, segstore
    with segstore.open(sys.argv[1], format="rocketmq", mode="a", mappedFileSizeCommitLog=16384,
                       mappedFileSizeConsumeQueue=400) as store:
        for i in range(int(sys.argv[2])):
            store.append_batch([{"topic": "Live", "queue_id": j % 2, "body": b"m%d-" % j * (1 + j % 7)}
                                for j in range(3 * i, 3 * i + 3)])
            if i == 0:
                print("ready", flush=True)
            time.sleep(0.001)
""")


def _body(j: int) -> bytes:
    return b"m%d-" % j * (1 + j % 7)


def test_a_commitlog_file_gone_since_the_listing_is_nothing_to_a_reader(tmp_path, monkeypatch):
    """A writer's close deletes its preallocated spare: a reader that listed ``commitlog/`` just before
    finds the name gone (the rolling-writer test below met it once in a full run).  Nothing is there
    to read: the reader goes on; a writer, which holds the lock, still calls it what it is."""
    store = str(tmp_path / "s")
    sizes = {"mappedFileSizeCommitLog": 16384, "mappedFileSizeConsumeQueue": 400}
    with segstore.open(store, format="rocketmq", mode="a", **sizes) as s:
        s.append_batch([{"topic": "T", "body": _body(j)} for j in range(200)])
    listed = files.list_dir
    gone = f"{16384 * 61:020d}"     # past every file: where the spare of a later roll would be

    def with_gone(path):
        names = listed(path)
        return [*names, gone] if os.path.basename(path) == "commitlog" else names

    monkeypatch.setattr(files, "list_dir", with_gone)
    with segstore.open(store, format="rocketmq", **sizes) as s:
        assert [m.body for m in s.read("T", 0)] == [_body(j) for j in range(200)]
    with pytest.raises(CorruptDataError, match="found nothing"):
        segstore.open(store, format="rocketmq", mode="a", **sizes)


def test_readers_beside_a_rolling_writer_see_a_consistent_prefix(tmp_path):
    """Issue 15: 9 of 22 live reads raised ``OffsetOutOfRangeError`` while the writer rolled a file
    (the reader listed the commitlog before the queues, whose entries then pointed into a file it
    had taken for the writer's preallocation).  A real writer process appends and rolls a 16 KiB
    commitlog about every 40 messages; every read here is an exact prefix, never an error."""
    store = str(tmp_path / "live")
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, store, "1500"], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        reads, seen = 0, 0
        deadline = time.monotonic() + 120
        while writer.poll() is None and time.monotonic() < deadline:
            with segstore.open(store, format="rocketmq", mappedFileSizeCommitLog=16384,
                               mappedFileSizeConsumeQueue=400) as s:
                for qid in (0, 1):
                    low, high = s.offset_range("Live", qid)
                    start = max(low, high - 30)
                    got = [m.body for m in s.read("Live", qid, start)]
                    assert got == [_body(qid + 2 * k) for k in range(start, high)]
                if reads % 8 == 0:
                    scanned = [m.body for m in s.scan()]
                    assert scanned == [_body(j) for j in range(len(scanned))]
                    assert len(scanned) >= seen
                    seen = len(scanned)
            reads += 1
        assert writer.wait(timeout=120) == 0
    finally:
        writer.kill()
    assert reads >= 10 and seen > 100


# -- recover exits 0 only over a store that reads (seed 20261124, case 68) -----------------------------


def test_recover_exit_0_means_the_store_dumps_after_it(tmp_path):
    """Seed 20261124 case 68: a bit flipped at byte 341 of the lz4 partition's segment 160, below the
    log dir's recovery point.  Kafka 3.8's ``LogLoader.recoverLog`` leaves segments below it alone,
    and recover did too, exiting 0; ``dump --json`` after it then failed on the batch's CRC (the
    long run's one unexplained ``dump-after-recover``).  Now recover exits 1 naming the batch, and the
    harness counts an exit 0 followed by a failing dump as a finding."""
    result = damage.run_case(20261124, 68, tmp_path, commands=("verify", "recover"))
    case = result.case
    assert (case.fmt, case.source, case.target, case.mutation) == \
        ("kafka", "lz4", "topic-0/00000000000000000160.log", "bitflip")
    runs = {run.command: run for run in result.runs}
    assert runs["recover"].rc == 1 and runs["recover"].outcome == "typed"
    assert "00000000000000000160.log:267: " in runs["recover"].stderr
    assert "left by recovery" in runs["recover"].stderr
    assert "dump-after-recover" not in runs
    assert not result.bad()


@pytest.mark.parametrize("name", ["abort", "basic"])
def test_a_queue_entry_past_the_last_commitlog_file_is_not_the_data_end(tmp_path, capsys, name):
    """Seed 20261125 case 65: random bytes over a consume-queue entry of the ``abort`` store gave it a
    physical offset far past the last commitlog file.  A reader took the queues' highest end as where
    to start looking for the data end, declared the commitlog written up to there, and dump --json
    and convert died in the C walk (``ValueError``).  The log is the truth: reads see every message
    of the pristine store; verify names the entry (exit 1), and so does dump where it is the queue's
    last (``abort``: a queue reaching past the log's end is one whose last messages are gone; an entry
    in the middle, ``basic``'s, is the queue's damage, which only verify reads every entry for)."""
    store = _store(tmp_path, name)
    before = _records(store)
    queue = store / "consumequeue" / "TopicA" / "1" / f"{0:020d}"
    data = bytearray(queue.read_bytes())
    entries = np.frombuffer(bytes(data), dtype=">i8,>i4,>i8")
    last = int(np.flatnonzero(entries["f1"] > 0)[-1])        # the queue's last entry: its end is the max
    data[20 * last:20 * last + 8] = (5815764116506727).to_bytes(8, "big")     # the case's bogus offset
    queue.write_bytes(bytes(data))
    rc, out, err = _cli(capsys, "dump", "--json", str(store))
    assert [json.loads(line) for line in out.splitlines()] == before
    past_end = f"{queue}:{20 * last}: expected the commitlog to hold the message of TopicA/1"
    assert (rc, past_end in err) == ((1, True) if name == "abort" else (0, False))
    rc, out, err = _cli(capsys, "verify", str(store))
    assert rc == 1
    assert f"{queue}:{20 * last}:" in out + err
    rc, _out, err = _cli(capsys, "convert", str(store), str(tmp_path / "k"), "--to", "kafka")
    assert rc in (0, 1) and "Traceback" not in err


def test_a_reader_of_a_killed_writers_store_sees_the_prefix_before_a_torn_last_message(tmp_path):
    """Crash suite, seed 20261127: a writer killed mid-copy of a message left its first bytes and
    zeros after them, and a reader's open raised CorruptDataError (the store was "unopenable"
    until an append opened it).  A torn last write ends the data for a reader, as recovery cuts
    it; a record followed by other bytes is still an error, met by the reader after the messages
    before it (it used to be raised by the open, leaving nothing read)."""
    import segstore as api
    from segstore.errors import CorruptDataError

    cfg = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 200}
    store_dir = tmp_path / "s"
    with api.open(store_dir, "rocketmq", "a", **cfg) as s:
        results = s.append_batch([{"topic": "T", "queue_id": i % 2, "body": bytes([65 + i % 26]) * 100}
                                  for i in range(30)])
    last = results[-1]
    name = store_dir / "commitlog" / f"{last.position - last.position % 8192:020d}"
    data = bytearray(name.read_bytes())
    pos = last.position % 8192
    torn = bytearray(data)
    torn[pos + 40:pos + last.size] = bytes(last.size - 40)        # only the first 40 bytes written
    name.write_bytes(torn)
    queue = store_dir / "consumequeue" / "T" / str(last.partition) / f"{last.offset // 10 * 200:020d}"
    entries = bytearray(queue.read_bytes())
    at = last.offset % 10 * 20
    entries[at:at + 20] = bytes(20)                                 # killed before its queue entry
    queue.write_bytes(entries)
    (store_dir / "abort").write_bytes(b"")
    with api.open(store_dir, "rocketmq", "r", **cfg) as s:
        assert s.commitlog.end == last.position
        assert len(list(s.scan())) == 29
    garbage = bytearray(torn)
    garbage[pos + last.size + 10] = 7                               # bytes after it: not a torn tail
    name.write_bytes(garbage)
    with api.open(store_dir, "rocketmq", "r", **cfg) as s:
        read = []
        with pytest.raises(CorruptDataError) as err:
            read.extend(s.scan())
        assert len(read) == 29 and err.value.path == str(name)


# -- issue 28: found by the longer runs ----------------------------------------------------------------


def test_a_fifo_in_place_of_a_consume_queue_file_is_named(tmp_path, capsys):
    """Seed 20261228 case 104: a FIFO in place of the abort store's only ``TopicA/0`` queue file was
    read as a 0-byte file a crash left (verify said so; ``query --offset 0`` answered "no record")."""
    store = _store(tmp_path, "abort")
    target = store / "consumequeue" / "TopicA" / "0" / f"{0:020d}"
    target.unlink()
    os.mkfifo(target)
    for command in (["verify"], ["query", "--topic", "TopicA", "--queue", "0", "--offset", "0"], ["recover"]):
        rc, _, err = _cli(capsys, *command, str(store))
        assert rc == 1
        assert f"{target}: expected a consume-queue file of 640 bytes (mappedFileSizeConsumeQueue), " \
               "found a FIFO" in err


def test_a_last_message_whose_properties_are_not_utf8_is_not_cut_by_recover(tmp_path, capsys):
    """RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` reads a message's properties with ``new
    String(bytesContent, 0, propertiesLength, UTF_8)`` (a U+FFFD for each malformed sequence, never an
    error): its recovery keeps such a message.  segstore, which did not read it, cut it as a torn
    tail (``recover`` exit 0, the commitlog shortened, the message moved to ``.segstore/cut``), then
    left it in place and exited 1 naming it; it reads it as the broker does now: a valid message,
    nothing to repair (exit 0), and ``dump`` prints it (it stopped there, exit 1)."""
    store = _store(tmp_path)
    last = max(_records(store), key=lambda r: r["physical_offset"])
    path = max((p for p in (store / "commitlog").iterdir() if int(p.name) <= last["physical_offset"]),
               key=lambda p: int(p.name))
    pos = last["physical_offset"] - int(path.name)
    data = bytearray(path.read_bytes())
    props_at = pos + last["size"] - len(
        "\x02".join(f"{k}\x01{v}" for k, v in last["properties"].items()).encode())
    first = next(iter(last["properties"])).encode()
    assert bytes(data[props_at:props_at + len(first)]) == first
    data[props_at] = 0xFF                   # the first property name's first byte (no CRC covers it)
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    rc, out, err = _cli(capsys, "recover", str(store))
    assert rc == 0 and "left in place" not in err, (out, err)
    assert path.read_bytes() == before
    assert not (store / ".segstore" / "cut").exists()
    rc, out, err = _cli(capsys, "dump", str(store), "--json")
    assert rc == 0, err
    assert json.loads(out.splitlines()[-1])["properties"] == {
        "\ufffd" + first.decode()[1:]: last["properties"][first.decode()], **{
            k: v for k, v in last["properties"].items() if k != first.decode()}}
    # a write's open (its recovery) cut it too, and wrote the new message over its place, exit 0
    lines = tmp_path / "new.jsonl"
    lines.write_text(json.dumps({"topic": last["topic"], "queue_id": last["queue_id"], "body": "new"}) + "\n")
    rc, _, err = _cli(capsys, "write", str(store), "--input", str(lines))
    assert rc == 0, err
    assert path.read_bytes()[:pos + last["size"]] == before[:pos + last["size"]]
