"""verify and recovery against damaged stores: bytes flipped or cut in every kind of file."""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest
from conftest import FIXTURES, cli_run, copy_writable
from rocketmq_crash_writer import CONFIG, message
from segstore_rocketmq import recovery as rec

import segstore
from segstore import files
from segstore.errors import SegstoreError

N = 60


@pytest.fixture
def store_dir(tmp_path):
    path = str(tmp_path / "store")
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(N)])
    return path


def _open(path, mode="r"):
    return segstore.open(path, format="rocketmq", mode=mode, **CONFIG)


def _flip(path: str, pos: int) -> None:
    data = bytearray(files.read_bytes(path))
    data[pos] ^= 0xFF
    files.write_bytes(path, bytes(data[pos : pos + 1]), pos)


def _intact_bodies(path: str) -> list[bytes]:
    """Bodies of every valid message, walking past damage (recovery's walk)."""
    with _open(path) as store:
        w = rec.walk(store.commitlog, store.commitlog.min_offset, store.tags_code)
        return [store.commitlog.read(phy).body for phy in w.messages.phy.tolist()]


def test_fixture_store_verifies_clean():
    with segstore.open(str(FIXTURES / "rocketmq" / "basic" / "store"), format="rocketmq") as store:
        assert store.verify() == []


def test_unclean_shutdown_is_the_only_problem_of_the_abort_fixture():
    """The 4.9.7 broker halted without shutdown() leaves ``abort`` (DefaultMessageStore.start creates it,
    shutdown deletes it): a reader reports it, and nothing else is wrong with those files."""
    store_dir = FIXTURES / "rocketmq" / "abort" / "store"
    with segstore.open(str(store_dir), format="rocketmq") as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(store_dir / "abort"), None)]
    assert "did not shut down cleanly" in problems[0].message


def test_clean_store_verifies_clean(store_dir):
    with _open(store_dir) as store:
        assert store.verify() == []


def test_flipped_commitlog_body_is_named_and_recovery_keeps_the_rest(store_dir):
    with _open(store_dir) as store:
        victim = next(m for m in store.scan() if m.queue_offset == 5 and m.queue_id == 0)
    seg_base = victim.physical_offset - victim.physical_offset % CONFIG["mappedFileSizeCommitLog"]
    path = os.path.join(store_dir, "commitlog", f"{seg_base:020d}")
    pos = victim.physical_offset - seg_base
    _flip(path, pos + victim.size - 3)  # in the properties: the CRC covers the body only
    _flip(path, pos + 100)  # in the body
    with _open(store_dir) as store:
        problems = [str(p) for p in store.verify()]
    assert any(p.startswith(f"{path}:{pos}: ") for p in problems), problems
    before = _intact_bodies(store_dir)
    assert len(before) == N - 1
    with _open(store_dir, "a") as store:
        assert any("damaged bytes left in place" in line for line in store.recovery_lines)
    assert _intact_bodies(store_dir) == before  # recovery lost no intact message


def test_torn_tail_is_cut_and_kept_aside(store_dir):
    with _open(store_dir) as store:
        last = list(store.scan())[-1]
    base = last.physical_offset - last.physical_offset % CONFIG["mappedFileSizeCommitLog"]
    path = os.path.join(store_dir, "commitlog", f"{base:020d}")
    pos = last.physical_offset - base
    torn = files.read_bytes(path)[pos : pos + last.size]
    files.write_bytes(path, bytes(last.size - 10), pos + 10)  # the end of the last message never landed
    files.touch(os.path.join(store_dir, "abort"))
    with _open(store_dir) as store:
        assert any(str(p).startswith(f"{path}:{pos}: ") for p in store.verify())
    with _open(store_dir, "a") as store:
        assert any(f"{path}:{pos}: cut 10 bytes" in line for line in store.recovery_lines)
        assert store.verify() == []
        assert store.offset_range("Crash", last.queue_id)[1] == last.queue_offset  # its entry dropped
    # kept under .segstore/cut/, never in commitlog/ (MappedFileQueue.load refuses foreign files there)
    kept = os.path.join(store_dir, ".segstore", "cut", "commitlog", f"{base:020d}.cut-{pos}")
    assert files.read_bytes(kept) == torn[:10]
    assert [n for n in os.listdir(os.path.join(store_dir, "commitlog")) if ".cut-" in n] == []
    assert len(_intact_bodies(store_dir)) == N - 1


def test_consume_queue_damage_is_named_and_rebuilt(store_dir):
    path = os.path.join(store_dir, "consumequeue", "Crash", "1", f"{0:020d}")
    _flip(path, 20 * 3 + 9)  # the size of entry 3
    _flip(path, 20 * 7 + 15)  # the tags code of entry 7
    with _open(store_dir) as store:
        problems = [str(p) for p in store.verify()]
    assert any(p.startswith(f"{path}:140: ") for p in problems), problems
    files.touch(os.path.join(store_dir, "abort"))
    with _open(store_dir, "a") as store:
        assert store.verify() == []
        assert [m.body for m in store.read("Crash", 1)] == [message(i)["body"] for i in range(N) if i % 2]


def test_a_lost_queue_directory_is_named_by_the_queue(store_dir):
    """The entries a queue without a directory lacks are named at ``consumequeue/TOPIC/QUEUEID:POS``, as
    any other queue's (they used to be named at the topic's directory, a position in no file): once, as
    the run of messages they are (they used to be a line per message)."""
    queue_dir = os.path.join(store_dir, "consumequeue", "Crash", "1")
    with _open(store_dir) as store:
        phys = [m.physical_offset for m in store.read("Crash", 1)]
    for name in files.list_dir(queue_dir):
        os.remove(os.path.join(queue_dir, name))
    os.rmdir(queue_dir)
    with _open(store_dir) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(queue_dir, 0)]
    assert (f"expected entries for the {len(phys)} messages at commitlog offsets {phys[0]} to {phys[-1]} "
            f"(Crash/1 offsets 0 to {len(phys) - 1}), found none") in problems[0].message


def test_a_lost_queue_of_the_broker_fixture_is_one_line_as_recover_rebuilds_it(tmp_path):
    """A consume-queue directory of the 4.9.7 broker's store deleted: ``verify`` printed a line per message
    (45 for TopicA/1, whose messages lie in all three commitlog files, so the walk's batches each found
    some); it prints one naming the run, the count ``recover`` then rebuilds (``ConsumeQueue`` entries are
    rebuilt from the commitlog, 4.9.7 ``CommitLogDispatcherBuildConsumeQueue``), and ``--json`` holds one
    problem."""
    store_dir = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    with segstore.open(str(store_dir), format="rocketmq") as store:
        phys = [m.physical_offset for m in store.read("TopicA", 1)]
        files_held = {p // store.commitlog.file_size for p in phys}
    assert len(files_held) > 1      # the run crosses the walk's batches
    queue_dir = store_dir / "consumequeue" / "TopicA" / "1"
    shutil.rmtree(queue_dir)
    code, out, _ = cli_run("verify", store_dir)
    assert code == 1 and out.splitlines() == [
        f"{queue_dir}:0: expected entries for the {len(phys)} messages at commitlog offsets {phys[0]} to "
        f"{phys[-1]} (TopicA/1 offsets 0 to {len(phys) - 1}), found none: consumers of the queue miss them "
        "(segstore recover rebuilds them from the commitlog)"]
    code, out, _ = cli_run("verify", "--json", store_dir)
    assert code == 1 and [(p["path"], p["pos"]) for p in json.loads(out)["problems"]] == [(str(queue_dir), 0)]
    code, out, _ = cli_run("recover", store_dir)
    assert code == 0 and f"consumequeue TopicA/1: rebuilt {len(phys)} entries from queue offset 0" in out


def test_missing_entries_apart_are_runs_apart(tmp_path):
    """Entries pointing elsewhere in two places of one queue file (their commitlog offset 1, inside the
    first message): two runs of missing entries (beside the entries found wrong there), not one spanning
    the entries in place between them."""
    store_dir = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    with segstore.open(str(store_dir), format="rocketmq") as store:
        phys = [m.physical_offset for m in store.read("TopicB", 2)]
    assert len(phys) >= 12
    queue_file = store_dir / "consumequeue" / "TopicB" / "2" / f"{0:020d}"
    for first in (2, 8):
        for n in range(first, first + 3):
            files.write_bytes(str(queue_file), (1).to_bytes(8, "big"), 20 * n)
    with segstore.open(str(store_dir), format="rocketmq") as store:
        missing = [p for p in store.verify() if "found none" in p.message]
    assert [(p.pos, p.message) for p in missing] == [
        (20 * first, f"expected entries for the 3 messages at commitlog offsets {phys[first]} to "
                     f"{phys[first + 2]} (TopicB/2 offsets {first} to {first + 2}), found none: consumers "
                     "of the queue miss them (segstore recover rebuilds them from the commitlog)")
        for first in (2, 8)]


@pytest.mark.parametrize("slot", [5, 17])
def test_zeros_over_entries_before_a_queues_last_file_are_rebuilt_not_the_rest_dropped(store_dir, slot):
    """Zeros over entries of a consume-queue file before the queue's last: a writer's open counted the
    offsets past them as held, so recovery compared entries it could not read and then cut the queue at
    the zeros as "past the commitlog end" (its later files deleted, exit 0, verify still failing).
    4.9.7 ``ConsumeQueue.recover`` ends the queue at such a slot; segstore rebuilds from it."""
    from segstore.cli import main

    queue_dir = os.path.join(store_dir, "consumequeue", "Crash", "1")
    names = files.list_dir(queue_dir)
    assert len(names) >= 2
    before = {name: files.read_bytes(os.path.join(queue_dir, name)) for name in names}
    first = os.path.join(queue_dir, names[0])
    files.write_bytes(first, bytes(40), slot * 20 % CONFIG["mappedFileSizeConsumeQueue"])
    with _open(store_dir) as store:
        assert store.verify() != []
    assert main(["recover", store_dir]) == 0
    assert {name: files.read_bytes(os.path.join(queue_dir, name)) for name in files.list_dir(queue_dir)} \
        == before
    with _open(store_dir) as store:
        assert store.verify() == []
        assert [m.body for m in store.read("Crash", 1)] == [message(i)["body"] for i in range(N) if i % 2]


def test_index_damage_is_named_and_rebuilt_per_entry(store_dir):
    index_dir = os.path.join(store_dir, "index")
    first = os.path.join(index_dir, files.list_dir(index_dir)[0])
    slots = CONFIG["maxHashSlotNum"]
    entry_pos = 40 + slots * 4 + 20 * 10
    _flip(first, entry_pos + 6)  # the offset of entry 10
    with _open(store_dir) as store:
        problems = [str(p) for p in store.verify()]
    assert any(p.startswith(f"{first}:{entry_pos}: ") for p in problems), problems
    files.touch(os.path.join(store_dir, "abort"))
    with _open(store_dir, "a") as store:
        assert any(f"{first}:{entry_pos}: index entry 10" in line for line in store.recovery_lines)
        assert store.verify() == []
        for i in range(N):
            assert [m.body for m in store.query_by_key("Crash", f"k{i}")] == [message(i)["body"]]


def test_zeroed_hash_slots_are_pointed_back_at_their_chains(store_dir, capsys):
    """Slots zeroed in an IndexFile hide every key of their chains from a query (it walks only its
    slot's chain); verify names them, and ``recover`` used to leave them so (exit 0, verify still
    failing).  It now points each at the newest entry hashed to it, as ``IndexFile.putKey`` (4.9.7)
    leaves it: the broker's bytes (the basic fixture's files are left as they are)."""
    from segstore.cli import main

    index_dir = os.path.join(store_dir, "index")
    first = os.path.join(index_dir, files.list_dir(index_dir)[0])
    before = files.read_bytes(first)
    files.write_bytes(first, bytes(4 * CONFIG["maxHashSlotNum"]), 40)
    with _open(store_dir) as store:
        assert any(str(p).startswith(f"{first}:") for p in store.verify())
        assert not all(list(store.query_by_key("Crash", f"k{i}")) for i in range(N))
    assert main(["recover", store_dir]) == 0
    assert f"{first}:40: pointed " in capsys.readouterr().out
    assert files.read_bytes(first) == before
    with _open(store_dir) as store:
        assert store.verify() == []
        for i in range(N):
            assert [m.body for m in store.query_by_key("Crash", f"k{i}")] == [message(i)["body"]]


@pytest.mark.parametrize("fixture", ["basic", "abort"])
def test_the_slot_check_passes_sound_broker_files_and_fails_each_damaged_slot(tmp_path, fixture):
    """``IndexFile.repair_slots`` hashes every entry only where its quick check (the non-zero slots hold
    exactly the chains' heads) fails: every file the broker wrote passes it, and zeroing any one slot in
    use, or pointing one at an entry inside a chain, fails it."""
    import json

    from segstore.indexes.keyhash import IndexFile

    config = json.loads((FIXTURES / "rocketmq" / fixture / "spec.json").read_text())["config"]
    store = copy_writable(FIXTURES / "rocketmq" / fixture / "store", tmp_path / "store")
    index_dir = os.path.join(store, "index")
    names = files.list_dir(index_dir)
    assert names
    for name in names:
        index = IndexFile.open(os.path.join(index_dir, name), config["maxHashSlotNum"], config["maxIndexNum"],
                               writable=True)
        try:
            assert index._slots_hold_the_heads(index.header.index_count)
            assert index.repair_slots() == []
            used = [int(k) for k in index.slots.nonzero()[0]]
            assert used
            rng = random.Random(name)
            for slot in rng.sample(used, min(5, len(used))):
                held = int(index.slots[slot])
                index.slots[slot] = 0
                assert not index._slots_hold_the_heads(index.header.index_count)
                prev = int(index.entries_all["prev"][held])
                if prev:                                    # a chain's inner entry instead of its head
                    index.slots[slot] = prev
                    assert not index._slots_hold_the_heads(index.header.index_count)
                index.slots[slot] = held
            assert index._slots_hold_the_heads(index.header.index_count)
        finally:
            index.file.close()


def test_checkpoint_damage_is_named(store_dir):
    path = os.path.join(store_dir, "checkpoint")
    _flip(path, 1000)
    with _open(store_dir) as store:
        assert [str(p) for p in store.verify()] == [f"{path}:1000: expected zeros after byte 40, found 0xff"]


@pytest.mark.parametrize("damage, said", [
    (lambda path: files.write_bytes(path, b"\x01" * 10, 4096),
     "cut 10 bytes past the checkpoint's 4096, saved in"),
    (lambda path: os.truncate(path, 30), "extended from 30 to 4096 bytes with zeros"),
    (lambda path: files.write_bytes(path, b"junk", 1000), "zeroed 4 non-zero bytes after the fields"),
    (lambda path: files.write_bytes(path, (-5).to_bytes(8, "big", signed=True), 8),
     "logicsMsgTimestamp -5 set to 0"),
])
def test_recover_repairs_the_checkpoint_problems_verify_names_and_says_so(store_dir, damage, said, capsys):
    """verify names a checkpoint of another size, bytes after its fields and a negative field; ``recover``
    used to leave the last three as they were (exit 0, verify still failing) and to extend a short one
    without a word.  4.9.7 ``StoreCheckpoint`` maps one 4096-byte page and writes only the fields."""
    from segstore.cli import main

    path = os.path.join(store_dir, "checkpoint")
    damage(path)
    with _open(store_dir) as store:
        assert [p.path for p in store.verify()] == [path]
    assert main(["recover", store_dir]) == 0
    assert said in capsys.readouterr().out
    assert os.path.getsize(path) == 4096
    with _open(store_dir) as store:
        assert store.verify() == []


def test_cut_files_raise_typed_errors_and_opening_to_append_resizes_them(store_dir):
    path = os.path.join(store_dir, "commitlog", f"{0:020d}")
    data = files.read_bytes(path)
    files.write_atomic(path, data[:5000])
    with pytest.raises(SegstoreError) as err:
        with _open(store_dir):
            pass
    assert path in str(err.value)
    # it said "recover resizes it, keeping every message", though the messages past 5000 bytes are gone
    assert str(err.value).endswith("segstore recover resizes it, extending it with zeros and keeping the "
                                   "messages it holds whole (a message its end tore is saved aside; those "
                                   "past it are lost)")
    # MappedFileQueue.load refuses the file; a writer (recovery) extends it, keeping every byte
    with _open(store_dir, "a") as store:
        assert any(line.startswith(f"{path}: extended from 5000") for line in store.recovery_lines)
    assert files.read_bytes(path)[:4900] == data[:4900]


@pytest.mark.parametrize("seed", range(12))
def test_random_flips_never_raise_untyped_and_never_lose_intact_messages(tmp_path, seed):
    rng = random.Random(seed)
    src = tmp_path / "src"
    with segstore.open(str(src), format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(N)])
    store_dir = str(copy_writable(src, tmp_path / "store"))
    candidates = []
    for root, _, names in os.walk(store_dir):
        # config/*.json left out: segstore.files.read_text lets UnicodeDecodeError through (reported)
        if os.path.basename(root) != "config":
            candidates += [os.path.join(root, n) for n in names if n not in ("lock", "abort")]
    for _ in range(3):
        path = rng.choice(sorted(candidates))
        size = files.file_size(path)
        if size:
            _flip(path, rng.randrange(size))
    files.touch(os.path.join(store_dir, "abort"))
    try:
        with _open(store_dir) as store:
            store.verify()
        intact = _intact_bodies(store_dir)
        with _open(store_dir, "a") as store:
            store.verify()
        assert _intact_bodies(store_dir) == intact
    except SegstoreError:
        pass


def test_segstore_recover_checks_the_whole_store(tmp_path, capsys):
    """``segstore recover`` repairs a damaged queue entry far before the files a restart re-checks."""
    from segstore.cli import main

    store_dir = copy_writable(FIXTURES / "rocketmq" / "abort" / "store", tmp_path / "store")
    files.remove(store_dir / "abort")
    path = str(store_dir / "consumequeue" / "TopicA" / "1" / f"{0:020d}")
    _flip(path, 20 * 2 + 5)  # the commitlog offset of entry 2
    assert main(["verify", str(store_dir)]) == 1
    assert f"{path}:40: " in capsys.readouterr().out
    assert main(["recover", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert "commitlog: full check" in out and "consumequeue TopicA/1: rewrote 1 entries" in out
    assert main(["verify", str(store_dir)]) == 0


def _thirty(path) -> None:
    with segstore.open(str(path), format="rocketmq", mode="a", mappedFileSizeCommitLog=4096,
                       mappedFileSizeConsumeQueue=200, maxHashSlotNum=16, maxIndexNum=64) as s:
        for i in range(30):
            s.append({"topic": "T", "queue_id": 0, "body": b"x" * 200, "keys": [f"k{i}"]})


def test_a_short_last_file_before_the_allocators_spare_is_a_torn_tail(tmp_path, capsys):
    """A writer killed with its next file preallocated (all zeros) and its last data file torn short: the
    spare holds no data, so the short file is the last one and its torn end is cut, as for a short last
    file (the broker's load of the same bytes zero-padded: maxOffset 27, truncateDirtyLogicFiles drops the
    entries past it; RocketMQ 4.9.7 MappedFileQueue.load refuses the short file itself).  Found by a
    differential run against the oracle."""
    from segstore.cli import main

    store = tmp_path / "st"
    s = segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=4096,
                      mappedFileSizeConsumeQueue=200, maxHashSlotNum=16, maxIndexNum=64)
    for i in range(30):
        s.append({"topic": "T", "queue_id": 0, "body": b"x" * 200, "keys": [f"k{i}"]})
    s.abandon()         # a crash: the abort file stays, the allocator's spare after the last file too
    names = sorted(os.listdir(store / "commitlog"))
    assert len(names) == 4 and not any((store / "commitlog" / names[-1]).read_bytes())
    os.truncate(store / "commitlog" / names[-2], 500)
    assert main(["recover", str(store)]) == 0
    capsys.readouterr()
    assert main(["verify", str(store)]) == 0
    with segstore.open(str(store)) as reader:
        assert reader.info()["queues"][0]["max_offset"] == 27


def test_recover_names_entries_into_a_blank_an_earlier_recovery_wrote_every_time(tmp_path, capsys):
    """A short file before intact ones: the first recover gives it its BLANK and exits 1 naming the
    entries that point at the lost messages; later ones found the same entries pointing into that BLANK
    and exited 0 (docs/cli.md: exit 1 while damage with intact messages after it must stay)."""
    from segstore.cli import main

    store = tmp_path / "st"
    _thirty(store)
    short = store / "commitlog" / f"{4096:020d}"
    os.truncate(short, 1500)
    for _ in range(3):
        assert main(["recover", str(store)]) == 1
        err = capsys.readouterr().err
        assert f"{short}:1500: expected " in err and "(T/0: 8)" in err
    assert main(["verify", str(store)]) == 1


def test_a_delay_entry_holding_the_plain_tags_code_is_what_the_broker_writes_after_a_crash(tmp_path):
    """RocketMQ 4.9.7 ``DefaultMessageStore.load`` runs ``recover`` before ``ScheduleMessageService.load``
    parses the delay levels: after a crash ``CommitLog.recoverAbnormally`` dispatches the messages again,
    ``CommitLog.checkMessageAndReturnSize`` caps the delay level at ``getMaxDelayLevel()`` (0 then) and
    keeps the plain tags code (the TAGS hash, 0 without) in the ``SCHEDULE_TOPIC_XXXX`` entry instead of
    the delivery time (the broker's own store code, the storage oracle's ``RmqLoad``, writes 0 for a
    delay message without tags).  verify accepts either; any other code stays damage, reported as
    ``expected`` what the message implies, ``found`` what the entry holds.  Before: exit 1 on the
    broker's store, with expected and found the other way round."""
    import struct

    from segstore_rocketmq.javacompat import string_hash

    store_dir = tmp_path / "s"
    with segstore.open(store_dir, format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=200) as store:
        store.append({"topic": "T1", "queue_id": 0, "body": b"x", "tags": "plain"})
        store.append({"topic": "T1", "queue_id": 0, "body": b"delay", "delay_level": 3})
        store.append({"topic": "T1", "queue_id": 0, "body": b"tagged", "delay_level": 3, "tags": "t"})
    queue = store_dir / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "2" / f"{0:020d}"
    entries = bytearray(queue.read_bytes())
    with segstore.open(store_dir) as store:
        delivery = [struct.unpack_from(">q", entries, 20 * n + 12)[0] for n in range(2)]
        assert delivery == [store.tags_code(m) for m in store.scan() if m.topic == "SCHEDULE_TOPIC_XXXX"]
        assert store.verify() == []

    def put(codes: list[int]) -> None:
        for n, code in enumerate(codes):
            struct.pack_into(">q", entries, 20 * n + 12, code)
        queue.write_bytes(bytes(entries))

    put([0, string_hash("t")])      # what the broker's crash recovery writes
    with segstore.open(store_dir) as store:
        assert store.verify() == []
    put([12345, string_hash("t")])
    with segstore.open(store_dir) as store:
        problems = [str(p) for p in store.verify()]
        phy = next(m.physical_offset for m in store.scan() if m.topic == "SCHEDULE_TOPIC_XXXX")
    size = struct.unpack_from(">i", entries, 8)[0]
    assert problems == [f"{queue}:0: expected the entry of the message at commitlog offset {phy}: "
                        f"(SCHEDULE_TOPIC_XXXX, 2, 0, size {size}, tags code {delivery[0]}), "
                        f"found (SCHEDULE_TOPIC_XXXX, 2, 0, size {size}, tags code 12345)"]
    plain = store_dir / "consumequeue" / "T1" / "0" / f"{0:020d}"
    put([0, string_hash("t")])
    raw = bytearray(plain.read_bytes())
    struct.pack_into(">q", raw, 12, 0)      # an ordinary topic's entry takes only the TAGS hash
    plain.write_bytes(bytes(raw))
    with segstore.open(store_dir) as store:
        assert [p.path for p in store.verify()] == [str(plain)]


def test_delay_entries_written_under_another_message_delay_level_are_the_brokers_not_damage(tmp_path, capsys):
    """``messageDelayLevel`` is the broker's config, not recorded in the store: a 4.9.7 broker with
    ``1s 90m 2d`` writes store time + 90 min as a level-2 entry's tags code (``CommitLog.asyncPutMessage``,
    ``ScheduleMessageService.computeDeliverTimestamp``; the storage oracle's ``RmqLoad`` under that config
    reads every entry so).  Opened without that config, verify called the store damaged (exit 1) and
    recover rewrote the entries with the default levels' delays (5 s, 10 s): messages due in two days
    delivered at once.  Every delay ``ScheduleMessageService.parseDelayLevel`` builds is a whole number of
    seconds: such a delivery time is kept; any other code is still damage that recover rewrites.
    ``dump --json`` showed the default levels' times as the entries' ``tags_code``."""
    import json
    import struct

    from segstore.cli import main

    store_dir = tmp_path / "s"
    levels = {"messageDelayLevel": "1s 90m 2d"}
    with segstore.open(store_dir, format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=200, **levels) as store:
        for level in (2, 3, 7):         # 7: clamped to the last level, 3
            store.append({"topic": "T1", "queue_id": 0, "body": b"later", "delay_level": level,
                          "store_timestamp": 1_700_000_000_000})
    queues = store_dir / "consumequeue" / "SCHEDULE_TOPIC_XXXX"
    before = {p: p.read_bytes() for p in queues.rglob("0*")}
    codes = sorted(struct.unpack_from(">q", data, 12 + 20 * n)[0] - 1_700_000_000_000
                   for data in before.values() for n in range(len(data) // 20)
                   if struct.unpack_from(">i", data, 20 * n + 8)[0])
    assert codes == [5_400_000, 172_800_000, 172_800_000]
    for config in ({}, levels):
        with segstore.open(store_dir, **config) as store:
            assert store.verify() == []
        assert main(["verify", str(store_dir)]) == 0
        assert main(["recover", str(store_dir)]) == 0
        assert "rewrote" not in capsys.readouterr().out
        assert {p: p.read_bytes() for p in queues.rglob("0*")} == before
        # dump --json shows what the entries hold (docs/rocketmq.md), not the default levels' times
        given = [f"--config={k}={v}" for k, v in config.items()]
        assert main(["dump", str(store_dir), "--json", *given]) == 0
        dumped = [json.loads(line)["tags_code"] - 1_700_000_000_000
                  for line in capsys.readouterr().out.splitlines()]
        assert sorted(dumped) == codes
    # a code that is no delivery time (before the store time) is damage, rewritten by recover
    level3 = queues / "2" / f"{0:020d}"
    data = bytearray(before[level3])
    struct.pack_into(">q", data, 12, 1_699_999_999_000)
    level3.write_bytes(bytes(data))
    assert main(["verify", str(store_dir), "--config", "messageDelayLevel=1s 90m 2d"]) == 1
    assert main(["recover", str(store_dir), "--config", "messageDelayLevel=1s 90m 2d"]) == 0
    assert "SCHEDULE_TOPIC_XXXX/2: rewrote 1 entries" in capsys.readouterr().out
    assert level3.read_bytes() == before[level3]


def test_an_index_that_stops_short_of_the_keyed_messages_is_named_and_recover_puts_them(tmp_path, capsys):
    """4.9.7 ``IndexService.buildIndex`` indexes every dispatched message with keys (but rollbacks),
    so a last IndexFile lost leaves ``queryMessage`` missing the keys of every message after the
    file before it.  verify used to call that store clean while ``recover`` rebuilt 233 entries."""
    from segstore.cli import main

    store_dir = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    index_dir = store_dir / "index"
    _, last = sorted(files.list_dir(str(index_dir)))
    os.remove(index_dir / last)
    with segstore.open(str(store_dir), format="rocketmq") as store:
        assert list(store.query_by_key("TopicB", "key-359")) == []      # lost with the file
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(index_dir), None)]
    # 367946 too: the lost file held the rest of its keys
    assert ("expected index entries for the 155 messages with keys from commitlog offset 367946 on "
            "(IndexService.buildIndex indexes each), found its last entry at commitlog offset 367946"
            ) in problems[0].message
    assert main(["verify", str(store_dir)]) == 1
    assert main(["recover", str(store_dir)]) == 0
    capsys.readouterr()
    assert main(["verify", str(store_dir)]) == 0
    with segstore.open(str(store_dir), format="rocketmq") as store:
        assert [m.queue_offset for m in store.query_by_key("TopicB", "key-359")] == [44]


def test_a_lost_first_index_file_is_named_and_recover_rebuilds_its_entries(tmp_path, capsys):
    """4.9.7 ``IndexService.buildIndex`` indexes every dispatched message with keys, so a lost *first*
    IndexFile leaves ``queryMessage`` missing the keys of every message before the second file's first
    entry; ``IndexService.load`` loads the files it finds and rebuilds none.  verify called that store
    clean (only an index stopping short at its end was named); recover rewrote the second file and left
    the first's messages unindexed.  recover now puts them again, the broker's very bytes."""
    from segstore.cli import main

    source = FIXTURES / "rocketmq" / "basic" / "store"
    store_dir = copy_writable(source, tmp_path / "store")
    index_dir = store_dir / "index"
    first, second = sorted(files.list_dir(str(index_dir)))
    os.remove(index_dir / first)
    with segstore.open(str(store_dir), format="rocketmq") as store:
        assert list(store.query_by_key("TopicB", "key-1")) == []      # lost with the file
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(index_dir), None)]
    # 367946 too: the second file holds only the rest of its keys
    assert ("expected index entries for the 166 messages with keys at commitlog offsets 0 to 367946 "
            "(IndexService.buildIndex indexes each), found the first entry of its first file, "
            f"{second}, at commitlog offset 367946 (an index file before it was lost)") in problems[0].message
    assert main(["verify", str(store_dir)]) == 1
    assert main(["recover", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert f"{index_dir / second}: messages with keys from commitlog offset 0 have no entries" in out
    assert main(["verify", str(store_dir)]) == 0
    with segstore.open(str(store_dir), format="rocketmq") as store:
        assert [m.queue_offset for m in store.query_by_key("TopicB", "key-1")] == [0]
    rebuilt = sorted(files.list_dir(str(index_dir)))
    assert [(index_dir / name).read_bytes() for name in rebuilt] == \
        [(source / "index" / name).read_bytes() for name in (first, second)]


def test_a_lost_middle_index_file_is_named_and_recover_rebuilds_from_the_file_before(tmp_path):
    """The same as a lost first file, between two files (40-entry files: a message's keys roll over)."""
    store_dir = tmp_path / "store"
    small = {"maxIndexNum": 40, "maxHashSlotNum": 8}
    with segstore.open(str(store_dir), format="rocketmq", mode="a", **small) as store:
        for i in range(10):
            store.append_batch([{"topic": "T", "body": b"x", "keys": [f"k{i * 10 + j}", f"z{j}"]}
                                for j in range(10)])
    names = sorted(files.list_dir(str(store_dir / "index")))
    os.remove(store_dir / "index" / names[2])
    with segstore.open(str(store_dir), format="rocketmq") as store:
        missed = [k for k in range(100) if not list(store.query_by_key("T", f"k{k}"))]
        problems = store.verify()
    assert missed and [(p.path, p.pos) for p in problems] == [(str(store_dir / "index"), None)]
    assert f"found no file between {names[1]} (last entry at commitlog offset " in problems[0].message
    assert f"{len(missed)} messages with keys" in problems[0].message
    with segstore.open(str(store_dir), format="rocketmq", mode="a") as store:
        assert any("an index file was lost" in line for line in store.recover())
    with segstore.open(str(store_dir), format="rocketmq") as store:
        assert store.verify() == []
        assert all(list(store.query_by_key("T", f"k{k}")) for k in range(100))


def _last_message(path: str):
    with _open(path) as store:
        return max(store.scan(), key=lambda m: m.physical_offset)


def test_a_damaged_last_message_is_met_by_readers_after_the_messages_before_it(store_dir):
    """A last message damaged but not torn (a wrong magic code: 4.9.7
    ``CommitLog.checkMessageAndReturnSize`` logs "found a illegal magic code" and recovery truncates
    there) whose queue entry cannot be read: opening the store for reading raised its error, so
    ``dump`` printed nothing and ``verify`` gave that one line.  Now the reader serves the messages
    before it and raises there, and verify names every problem."""
    last = _last_message(store_dir)
    path = os.path.join(store_dir, "commitlog", f"{last.physical_offset // 16384 * 16384:020d}")
    pos = last.physical_offset % 16384
    _flip(path, pos + 4)    # the magic code
    with _open(store_dir) as store:
        read = []
        with pytest.raises(SegstoreError) as err:
            read.extend(store.scan())
        assert len(read) == N - 1
        assert err.value.path == path
        problems = [(p.path, p.pos) for p in store.verify()]
    assert (path, pos) in problems
    assert any(f"consumequeue/Crash/{last.queue_id}/" in p for p, _ in problems), problems


def test_a_commitlog_file_missing_past_the_queues_is_named_by_readers(tmp_path):
    """A commitlog file missing between two others where the consume queues do not reach past it
    (lost with them): opening for reading raised ``expected a physical offset in [...]`` naming no
    file; the reader now serves the messages before the gap and names the missing file, as it does
    where the queues cover the gap."""
    path = str(tmp_path / "store")
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(600)])
    names = sorted(os.listdir(os.path.join(path, "commitlog")))
    assert len(names) >= 3
    gone = os.path.join(path, "commitlog", names[1])
    os.remove(gone)
    shutil.rmtree(os.path.join(path, "consumequeue"))
    with _open(path) as store:
        read = []
        with pytest.raises(SegstoreError) as err:
            read.extend(store.scan())
        assert err.value.path == gone
        assert read and all(m.physical_offset < int(names[1]) for m in read)
        problems = store.verify()
    assert problems[0].path == gone and "found none" in problems[0].message


def test_a_commitlog_file_misnamed_is_named_not_the_file_size_taken_from_it(tmp_path):
    """A commitlog file renamed to a name that is no multiple of the file size (every file still
    of the one length 4.9.7 ``MappedFileQueue.load`` accepts): the size taken from the names was
    the step to the wrong name, and verify blamed the first file's length ("expected a commitlog
    file of 16288 bytes ... found 16384 ... segstore recover resizes it").  Files that all have one
    length were written with it: the misnamed file is named."""
    path = str(tmp_path / "store")
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(300)])
    names = sorted(os.listdir(os.path.join(path, "commitlog")))
    assert len(names) == 3     # the two steps between names are one each
    wrong = os.path.join(path, "commitlog", f"{int(names[-1]) - 96:020d}")
    os.rename(os.path.join(path, "commitlog", names[-1]), wrong)
    with pytest.raises(SegstoreError) as err:
        segstore.open(path, format="rocketmq")
    assert err.value.path == wrong and "multiple of 16384" in err.value.message


def test_a_damaged_last_message_says_what_is_wrong_with_it(store_dir):
    """A last message whose body CRC no longer matches (4.9.7 ``checkMessageAndReturnSize`` with
    ``checkCRCOnRecover``, the default, logs "CRC check failed" and recovery truncates there) was
    reported as "N bytes of torn or damaged data" only; the line now says what the record holds, as
    a reader's error does."""
    last = _last_message(store_dir)
    path = os.path.join(store_dir, "commitlog", f"{last.physical_offset // 16384 * 16384:020d}")
    pos = last.physical_offset % 16384
    raw = files.read_bytes(path)[pos:pos + last.size]
    at = raw.index(last.body)
    assert raw.count(last.body) == 1
    _flip(path, pos + at)     # the body's first byte
    with _open(store_dir) as store:
        problems = [p.message for p in store.verify() if (p.path, p.pos) == (path, pos)]
    assert len(problems) == 1 and "torn or damaged data" in problems[0], problems
    assert "body CRC" in problems[0], problems


def test_a_misnamed_consume_queue_file_is_a_problem_and_recover_rebuilds_its_entries(tmp_path):
    """A consume-queue file renamed to a name no multiple of the file size (``...0400`` to ``...0410``):
    verify was clean, reading it at the slot its name falls in, while RocketMQ 4.9.7 loads it at 410
    (``MappedFileQueue.load``), ``findMappedFileByOffset`` finds no file for offsets 20-39 and
    ``getMessage`` skips them (``OFFSET_FOUND_NULL``).  verify names the file; recover rebuilds
    the entries into files the broker finds."""
    path = str(tmp_path / "store")
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(300)])
        before = [m.physical_offset for m in store.read("Crash", 0, 0)]
    queue = os.path.join(path, "consumequeue", "Crash", "0")
    wrong = os.path.join(queue, f"{410:020d}")
    os.rename(os.path.join(queue, f"{400:020d}"), wrong)
    with _open(path) as store:
        problems = store.verify()
    assert [(p.path, p.pos) for p in problems] == [(wrong, None)], problems
    assert "offsets 20 to 39" in problems[0].message
    with _open(path, "a") as store:
        store.recover()
    assert not os.path.exists(wrong) and os.path.exists(os.path.join(queue, f"{400:020d}"))
    with _open(path) as store:
        assert store.verify() == []
        assert [m.physical_offset for m in store.read("Crash", 0, 0)] == before


def test_recover_rewrites_a_blank_whose_size_does_not_reach_its_files_end(tmp_path):
    """A file-ending BLANK whose size field was damaged (106 bytes left, 50 stored): recover left it as
    damage with intact messages after it and exited 1 saying the broker would truncate them, but
    RocketMQ 4.9.7 takes any record with BLANK's magic for its file's end (``checkMessageAndReturnSize``
    answers size 0; ``recoverNormally`` goes on at the next file) and keeps them all.  recover now
    rewrites the size, keeping the old bytes aside, and the store reads and verifies whole."""
    from segstore_rocketmq.message import BLANK_MAGIC, PREFIX

    path = str(tmp_path / "store")
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(300)])
    first = os.path.join(path, "commitlog", f"{0:020d}")
    data = files.read_bytes(first)
    with _open(path) as store:
        ends = [m.physical_offset + m.size for m in store.scan() if m.physical_offset < 16384]
        total = len(list(store.scan()))
    pos = max(ends)
    assert PREFIX.unpack_from(data, pos) == (16384 - pos, BLANK_MAGIC)
    files.write_bytes(first, PREFIX.pack(7, BLANK_MAGIC), pos)
    with _open(path) as store:
        assert [(p.path, p.pos) for p in store.verify()] == [(first, pos)]
    with _open(path, "a") as store:
        lines = store.recover()
    assert any(f"{first}:{pos}: rewrote the size of the BLANK" in line for line in lines), lines
    assert files.read_bytes(first) == data
    kept = os.path.join(path, ".segstore", "cut", "commitlog", f"{0:020d}.cut-{pos}")
    assert files.read_bytes(kept) == PREFIX.pack(7, BLANK_MAGIC)
    with _open(path) as store:
        assert store.verify() == [] and len(list(store.scan())) == total


def test_recover_keeps_a_whole_last_message_whose_physical_offset_field_is_damaged(store_dir):
    """The last message's PHYSICALOFFSET field flipped (no CRC covers it; length, magic and body CRC
    intact): recover cut it as a "torn tail" and exited 0, though RocketMQ 4.9.7's recovery checks
    none of those header fields (``checkMessageAndReturnSize``), keeps it, and serves it through its
    queue entry.  It was written whole: recover leaves it and its entry in place and exits 1 naming
    it, as it does for such a message before others."""
    from segstore.errors import UnrepairedDataError

    last = _last_message(store_dir)
    path = os.path.join(store_dir, "commitlog", f"{last.physical_offset // 16384 * 16384:020d}")
    pos = last.physical_offset % 16384
    _flip(path, pos + 35)     # the low byte of the physical offset (bytes 28-35)
    data = files.read_bytes(path)
    with _open(store_dir, "a") as store, pytest.raises(UnrepairedDataError) as err:
        store.recover()
    assert (err.value.path, err.value.pos) == (path, pos)
    assert "whole message" in err.value.message
    assert files.read_bytes(path) == data
    assert not os.path.exists(os.path.join(store_dir, ".segstore", "cut", "commitlog"))
    with _open(store_dir) as store:
        assert store.offset_range(last.topic, last.queue_id)[1] == last.queue_offset + 1


def test_recover_says_the_broker_keeps_a_whole_message_whose_header_alone_is_wrong(store_dir):
    """The same damage to a message before others: recover left it in place and exited 1 saying a
    broker "stops its recovery walk at damage ... and truncates every message after it", which 4.9.7
    does not do for header fields it never checks.  The error now says what the message is."""
    from segstore.errors import UnrepairedDataError

    with _open(store_dir) as store:
        victim = sorted(store.scan(), key=lambda m: m.physical_offset)[N // 2]
    path = os.path.join(store_dir, "commitlog", f"{victim.physical_offset // 16384 * 16384:020d}")
    pos = victim.physical_offset % 16384
    _flip(path, pos + 35)
    with _open(store_dir, "a") as store, pytest.raises(UnrepairedDataError) as err:
        store.recover()
    assert (err.value.path, err.value.pos) == (path, pos)
    assert "whole message" in err.value.message and "truncates" not in err.value.message


@pytest.mark.parametrize("threads", [1, 3])
def test_a_scheduled_message_whose_delay_the_broker_cannot_parse_is_reported(tmp_path, threads):
    """RocketMQ 4.9.7 CommitLog.checkMessageAndReturnSize runs Integer.parseInt on a SCHEDULE_TOPIC_XXXX
    message's DELAY in every dispatch and recovery walk; its NumberFormatException ends in
    DispatchRequest(-1, false): the reput service stops there and recovery truncates the commitlog at
    that message, losing every later one. verify called such a store ok."""
    store_dir = tmp_path / "s"
    with segstore.open(store_dir, format="rocketmq", mode="a", mappedFileSizeCommitLog=65536) as store:
        store.append({"topic": "T1", "queue_id": 0, "body": b"a", "delay_level": 7})
        second = store.append({"topic": "T1", "queue_id": 0, "body": b"b", "delay_level": 3})
        store.append({"topic": "T1", "queue_id": 0, "body": b"c", "delay_level": 3})
    path = store_dir / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    at = data.index(b"DELAY\x013", second.position)
    data[at + 6:at + 7] = b"x"
    path.write_bytes(bytes(data))
    with segstore.open(store_dir) as store:
        problems = store.verify(threads=threads) if threads > 1 else store.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(path), second.position)]
    assert "DELAY as a Java int, found 'x'" in problems[0].message
