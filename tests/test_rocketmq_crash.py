"""Crash tests: a real writer process killed with SIGKILL at random points, in both flush modes.

After each kill the store is opened for append (recovery runs); at the end every
acknowledged message is there (SYNC_FLUSH), what is read is exactly the prefix
of what was written (both modes), verify is clean, and the abort/lock files
behave as the broker's.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest
from conftest import kill_after_append
from rocketmq_crash_writer import CONFIG, message

import segstore
from segstore.errors import StoreLockedError

WRITER = os.path.join(os.path.dirname(__file__), "rocketmq_crash_writer.py")
KILLS = 12


def _run_and_kill(path: str, flush_type: str, acks_wanted: int) -> list[tuple[int, int]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, WRITER, path, flush_type],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    acked = []
    try:
        for line in proc.stdout:
            i, phy = map(int, line.split())
            acked.append((i, phy))
            if len(acked) >= acks_wanted:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
    assert acked, f"the writer acknowledged nothing: {err}"
    return acked


@pytest.mark.slow
@pytest.mark.parametrize("flush_type", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path, flush_type):
    rng = random.Random(20240229 if flush_type == "SYNC_FLUSH" else 7)
    path = str(tmp_path / "store")
    acked: list[tuple[int, int]] = []
    for _ in range(KILLS):
        acked += _run_and_kill(path, flush_type, rng.randint(1, 120))
        assert os.path.exists(os.path.join(path, "abort"))  # killed: no clean shutdown
        with segstore.open(path, format="rocketmq", mode="a", flushDiskType=flush_type, **CONFIG) as store:
            # The walk's verdict; files the kill left half-made (a 0-byte IndexFile created just
            # before the kill) are set aside first, so their lines may come before it.
            verdicts = [line for line in store.recovery_lines if line.startswith("commitlog: ")]
            assert len(verdicts) == 1 and "unclean shutdown" in verdicts[0], store.recovery_lines
    assert not os.path.exists(os.path.join(path, "abort"))
    with segstore.open(path, format="rocketmq", mode="r", **CONFIG) as store:
        bodies = [m.body for m in store.scan()]
        assert bodies == [message(i)["body"] for i in range(len(bodies))]  # an exact prefix
        acked_ids = {i for i, _ in acked}
        if flush_type == "SYNC_FLUSH":
            assert max(acked_ids) < len(bodies)
        by_phy = {m.physical_offset: m for m in store.scan()}
        for i, phy in acked:
            if i < len(bodies):
                assert by_phy[phy].body == message(i)["body"]
        for q in store.partitions("Crash"):
            start, _ = store.offset_range("Crash", q)
            assert [m.body for m in store.read("Crash", q, start)] == [
                message(i)["body"] for i in range(len(bodies)) if i % 2 == q
            ]
        sample = rng.sample(range(len(bodies)), 10)
        for i in sample:
            assert [m.body for m in store.query_by_key("Crash", f"k{i}")] == [message(i)["body"]]
        assert store.verify() == []


ROLLS = [
    # the next commitlog file: not yet made, made; the write of the BLANK and the message rolling into it
    # (the third call: the C append takes the others) begun or done
    "segstore_rocketmq.commitlog:CommitLog._new_file:enter:2",
    "segstore_rocketmq.commitlog:CommitLog._new_file:exit:2",
    "segstore_rocketmq.commitlog:CommitLog.write_batch:enter:3",
    "segstore_rocketmq.commitlog:CommitLog.write_batch:exit:3",
    # the next IndexFile (63 keys a file, at message 63): before it is made, made with no key, the full
    # one flushed, its first key put
    "segstore.indexes.keyhash:IndexService._new_file:enter:2",
    "segstore.indexes.keyhash:IndexFile.create:exit:2",
    "segstore.indexes.keyhash:IndexFile.flush:enter:1",
    "segstore.indexes.keyhash:IndexFile.put:exit:64",
    # the next consume-queue file (20 entries a file; the third made: queue 0's second, at message 40)
    "segstore.indexes.dense:ConsumeQueue._new_file:enter:3",
    "segstore.indexes.dense:ConsumeQueue._new_file:exit:3",
]


@pytest.mark.parametrize("flush_type", ["SYNC_FLUSH", "ASYNC_FLUSH"])
@pytest.mark.parametrize("kill", ROLLS)
def test_a_writer_killed_mid_roll_loses_nothing_acknowledged(tmp_path, flush_type, kill):
    """A writer killed at a point of a commitlog, IndexFile or consume-queue roll (its own SIGKILL at the
    N-th call of that step): the next open recovers every acknowledged message, in order, each queue and
    key lookup reads them and verify is clean.  The storage oracle (RocketMQ 4.9.7 ``DefaultMessageStore``
    loading the recovered store) read the same messages and key hits after 101 such kills at 13 points of
    the rolls and flushes in both flush modes (and 18 kills timed by acknowledgements just before a roll),
    logging no error and refusing nothing."""
    path = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, WRITER, path, flush_type, kill], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr
    acked = [tuple(map(int, line.split())) for line in run.stdout.splitlines()]
    with segstore.open(path, format="rocketmq", mode="a", flushDiskType=flush_type, **CONFIG) as store:
        bodies = [m.body for m in store.scan()]
        assert bodies == [message(i)["body"] for i in range(len(bodies))]      # an exact prefix
        assert len(bodies) >= len(acked)
        by_phy = {m.physical_offset: m.body for m in store.scan()}
        assert all(by_phy[phy] == message(i)["body"] for i, phy in acked)
        for q in store.partitions("Crash"):
            assert [m.body for m in store.read("Crash", q)] == [b for i, b in enumerate(bodies) if i % 2 == q]
        for i in range(len(bodies)):
            assert [m.body for m in store.query_by_key("Crash", f"k{i}")] == [bodies[i]]
    with segstore.open(path, format="rocketmq", mode="r", **CONFIG) as store:
        assert store.verify() == []


def test_lock_abort_and_readers(tmp_path):
    path = str(tmp_path / "store")
    writer = segstore.open(path, format="rocketmq", mode="a", **CONFIG)
    try:
        writer.append(message(0))
        assert os.path.exists(os.path.join(path, "abort"))
        with pytest.raises(StoreLockedError):
            segstore.open(path, format="rocketmq", mode="a", **CONFIG)
        with segstore.open(path, format="rocketmq", mode="r", **CONFIG) as reader:  # never blocked
            assert [m.body for m in reader.scan()] == [message(0)["body"]]
    finally:
        writer.close()
    assert not os.path.exists(os.path.join(path, "abort"))
    with open(os.path.join(path, "lock"), "rb") as f:
        assert f.read() == b"lock"
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as again:  # lock released
        assert again.recovery_lines[0].startswith("commitlog: clean shutdown")


def test_sync_flush_group_commit_from_threads(tmp_path):
    """Many threads appending in SYNC_FLUSH: every append returns durable, offsets unique and dense."""
    import threading

    path = str(tmp_path / "store")
    results = []
    with segstore.open(path, format="rocketmq", mode="a", flushDiskType="SYNC_FLUSH", **CONFIG) as store:

        def work(t: int) -> None:
            for n in range(25):
                r = store.append(message(t * 100 + n))
                assert store._flusher.flushed_offset >= r.position + r.size
                results.append(r)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 100
        assert sorted(r.position for r in results) == sorted({r.position for r in results})
        assert store.verify() == []


# -- files a kill leaves while creating them (issue 15) ---------------------------------------

SMALL_CQ = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 200}


def _crash_store(path: str, n: int) -> None:
    """A store of ``n`` messages over queues 0 and 1, left as a kill leaves it (abort file, no clean-up)."""
    store = segstore.open(path, format="rocketmq", mode="a", **SMALL_CQ)
    store.append_batch([{"topic": "Crash", "queue_id": i % 2, "body": message(i)["body"]} for i in range(n)])
    store.abandon()


def _bodies(path: str, queue: int) -> list[bytes]:
    with segstore.open(path, format="rocketmq", mode="r", **SMALL_CQ) as store:
        return [m.body for m in store.read("Crash", queue)]


def test_a_zero_byte_last_consume_queue_file_is_read_as_absent_and_recovery_deletes_it(tmp_path):
    """A kill between creating a consume-queue file and sizing it leaves 0 bytes.  RocketMQ 5.1.3+
    (``MappedFileQueue.doLoad``) deletes such a last file; 4.9.7's ``doLoad`` refuses to load
    ("length not matched").  Reads treat it as absent, verify names it, recovery deletes it."""
    path = str(tmp_path / "s")
    _crash_store(path, 14)                      # queue 1: 7 entries in file 0 (10 slots)
    empty = tmp_path / "s" / "consumequeue" / "Crash" / "1" / "00000000000000000200"
    empty.write_bytes(b"")
    want = [message(i)["body"] for i in range(1, 14, 2)]
    assert _bodies(path, 1) == want
    with segstore.open(path, format="rocketmq", mode="r", **SMALL_CQ) as store:
        assert any(p.path == str(empty) and "found 0" in p.message for p in store.verify())
    with segstore.open(path, format="rocketmq", mode="a", **SMALL_CQ) as store:
        assert any(str(empty) in line for line in store.recovery_lines)
        store.append({"topic": "Crash", "queue_id": 1, "body": b"next"})
    assert _bodies(path, 1) == [*want, b"next"]
    with segstore.open(path, format="rocketmq", mode="r", **SMALL_CQ) as store:
        assert store.verify() == []


def test_files_a_batch_reserved_before_a_kill_are_not_read_as_entries(tmp_path):
    """A batch creates the consume-queue files it rolls into before it writes; a kill after the
    commitlog write leaves files of zeros after one with free slots (the last may be 0 bytes).
    Readers see the queue end at the free slot (not at the zero file's start); recovery dispatches
    the commitlog's messages into them and deletes only the ones left without an entry."""
    path = str(tmp_path / "s")
    _crash_store(path, 26)                              # queue 0: 13 entries, files 0 (10) and 200 (3)
    queue = tmp_path / "s" / "consumequeue" / "Crash" / "0"
    first = bytearray((queue / "00000000000000000000").read_bytes())
    first[7 * 20:] = bytes(3 * 20)                      # the entries of messages 14..24 never written
    (queue / "00000000000000000000").write_bytes(first)
    (queue / "00000000000000000200").write_bytes(bytes(200))
    (queue / "00000000000000000400").write_bytes(b"")
    assert len(_bodies(path, 0)) == 7                   # not 10: the zero file is no entries
    with segstore.open(path, format="rocketmq", mode="a", **SMALL_CQ) as store:
        assert any("rebuilt 6 entries" in line for line in store.recovery_lines), store.recovery_lines
    assert _bodies(path, 0) == [message(i)["body"] for i in range(0, 26, 2)]
    assert sorted(p.name for p in queue.iterdir()) == ["00000000000000000000", "00000000000000000200"]
    with segstore.open(path, format="rocketmq", mode="r", **SMALL_CQ) as store:
        assert store.verify() == []


def test_a_zero_byte_index_file_a_kill_left_is_set_aside_and_its_entries_rebuilt(tmp_path):
    """A kill between creating an IndexFile and sizing it leaves 0 bytes (the crash test above
    hit it in CI).  Recovery sets it aside, still says the shutdown was unclean, and keys stay
    queryable."""
    path = str(tmp_path / "s")
    store = segstore.open(path, format="rocketmq", mode="a", **SMALL_CQ)
    store.append_batch([{"topic": "Crash", "queue_id": 0, "body": message(i)["body"], "keys": f"k{i}"}
                        for i in range(6)])
    store.abandon()
    index = tmp_path / "s" / "index"
    (index / "29991231235959999").write_bytes(b"")     # later than any file the store wrote
    with segstore.open(path, format="rocketmq", mode="a", **SMALL_CQ) as store:
        lines = store.recovery_lines
        assert any(line.startswith(f"{index / '29991231235959999'}: moved to") for line in lines), lines
        assert [line for line in lines if line.startswith("commitlog: unclean shutdown")], lines
    assert not (index / "29991231235959999").exists()
    assert (tmp_path / "s" / ".segstore" / "cut" / "index" / "29991231235959999").stat().st_size == 0
    with segstore.open(path, format="rocketmq", mode="r", **SMALL_CQ) as store:
        assert [m.body for m in store.query_by_key("Crash", "k4")] == [message(4)["body"]]
        assert store.verify() == []


@pytest.mark.slow
def test_kills_while_opening_appending_rolling_and_closing_both_formats(tmp_path):
    """The crash harness (tests/crash.py), bounded: a few dozen kills of each format's writer, half
    of them a moment after the writer opens its store (recovering the previous kill).  At length:
    ``scripts/crash.sh 1000`` (figures in docs/reliability.md)."""
    import crash

    kept = str(tmp_path / "kept")    # the stores of kills that went wrong, for the failure's reader
    records = [r for fmt in crash.FORMATS for r in crash.run_job((fmt, 16, 20261123, 8, kept))]
    bad = [r for r in records if r["outcome"] != "ok" or r.get("final")]
    assert bad == [], "\n".join(map(repr, bad))
    assert sum(r["lost"] for r in records) == 0 and sum(r["acked"] for r in records) > 0
    for fmt in crash.FORMATS:
        assert any(r["phase"] == "open" for r in records if r["format"] == fmt)


def test_the_harness_final_check_of_a_store_no_kill_made(tmp_path):
    """Every kill of a store's turn may land before the writer makes it: the final check (keeping
    copies) then recovers a new, empty store, and keeps nothing."""
    import crash

    record: dict = {}
    crash._finish(record, "rocketmq", str(tmp_path / "never"), str(tmp_path / "kept"), "rocketmq-1-0")
    assert record["final"] == [] and "kept" not in record and not (tmp_path / "kept").exists()


def test_the_harness_final_check_keeps_the_last_kills_copies(tmp_path):
    """A final check that passes removes only its own copy: the copies kept of the turn's last kill
    (which went wrong) stay beside it."""
    import crash

    store, kept = tmp_path / "store", tmp_path / "kept"
    crash._final_check("rocketmq", str(store))          # a clean, empty store
    (kept / "rocketmq-1-7" / "after").mkdir(parents=True)
    record: dict = {}
    crash._finish(record, "rocketmq", str(store), str(kept), "rocketmq-1-7")
    assert record["final"] == [] and "kept" not in record
    assert sorted(p.name for p in (kept / "rocketmq-1-7").iterdir()) == ["after"]


_TOPIC_WRITER = """
import sys, segstore
store = segstore.open(sys.argv[1], format="rocketmq", mode="a")
store.append({"topic": "First", "queue_id": 0, "body": b"a"})
store.append_batch([{"topic": "Second", "queue_id": q, "body": b"b"} for q in range(3)])
for q in range(2):
    store.append({"topic": "Third", "queue_id": q, "body": b"c"})
print("appended", flush=True)
sys.stdin.read()
"""


def test_topics_a_killed_writer_created_are_in_topics_json(tmp_path):
    # A 4.9.7 broker persists its topic table when a send creates a topic
    # (broker/src/main/java/org/apache/rocketmq/broker/topic/TopicConfigManager.java
    # createTopicInSendMessageMethod: this.persist()), and routes only the topics in it: a kill after
    # the append must not lose the topic from config/topics.json.
    import json

    path = str(tmp_path / "store")
    kill_after_append(_TOPIC_WRITER, path)
    assert os.path.exists(os.path.join(path, "abort"))  # killed: no close ran
    with open(os.path.join(path, "config", "topics.json")) as f:
        table = json.load(f)["topicConfigTable"]
    assert {name: table[name]["writeQueueNums"] for name in ("First", "Second", "Third")} == {
        "First": 1, "Second": 3, "Third": 2}


def test_the_background_flush_goes_on_after_a_failed_flush(tmp_path, monkeypatch):
    """RocketMQ 4.9.7 ``CommitLog.FlushRealTimeService.run`` (and ``DefaultMessageStore
    .FlushConsumeQueueService.run``) catch what a flush throws, log it and flush again at the next
    interval.  segstore's flush thread died at the first failed msync (a traceback on stderr from the
    thread) and flushed nothing more in ``ASYNC_FLUSH`` until the store was closed."""
    import threading
    import time

    from segstore.errors import StorageIOError

    died: list[object] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    store = segstore.open(tmp_path / "s", format="rocketmq", mode="a",
                          **{**CONFIG, "flushIntervalCommitLog": 5, "flushCommitLogLeastPages": 1})
    try:
        flusher = store._flusher
        real = flusher._flush_commitlog
        failures = [StorageIOError("msync: Input/output error", str(tmp_path / "s" / "commitlog"), 0)]

        def flaky(*, force: bool) -> bool:
            if failures:
                raise failures.pop()
            return real(force=force)

        monkeypatch.setattr(flusher, "_flush_commitlog", flaky)
        store.append_batch([message(i) for i in range(40)])
        deadline = time.monotonic() + 10
        while flusher.flushed_offset < store.commitlog.end and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not failures and died == []
        assert flusher.flushed_offset == store.commitlog.end
        assert isinstance(flusher.last_error, StorageIOError)
    finally:
        store.close()


@pytest.mark.parametrize("then", ["close", "recover"])
def test_a_store_whose_index_put_failed_is_closed_with_its_abort_file(tmp_path, monkeypatch, then):
    """The disk filled while the index was put, after the messages and their queue entries were
    written (the append raises ``StorageFullError``).  RocketMQ 4.9.7 marks the store unwriteable then
    (``IndexService.buildIndex``: ``makeIndexFileError``) and ``DefaultMessageStore.shutdown`` keeps the
    ``abort`` file (``runningFlags.isWriteable()`` is false), so its next start recovers abnormally and
    dispatches the messages to the index again; a clean start (``recoverNormally``,
    ``IndexService.load(true)``) never indexes them.  segstore's close removed it; ``recover``, which
    rebuilds the index, closes cleanly again."""
    from segstore_rocketmq.indexfile import IndexService

    from segstore.errors import StorageFullError

    path = tmp_path / "s"
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(5)])

    def full(*args, **kwargs):
        raise StorageFullError("No space left on device", str(path / "index"), 0)

    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        with monkeypatch.context() as patched:
            patched.setattr(IndexService, "put_batch", full)
            patched.setattr(IndexService, "put_hashes", full)
            with pytest.raises(StorageFullError, match="not all indexed"):
                store.append_batch([message(i) for i in range(5, 10)])
        if then == "recover":
            store.recover()
    if then == "recover":
        assert not (path / "abort").exists()
        with segstore.open(path, format="rocketmq") as reader:
            assert [m.physical_offset for m in reader.find("Crash", "k7")] == [
                m.physical_offset for m in reader.read("Crash", 1, 3, 1)]
        return
    assert (path / "abort").exists()
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        assert store.abort_at_open
        assert [m.physical_offset for m in store.find("Crash", "k7")] == [
            m.physical_offset for m in store.read("Crash", 1, 3, 1)]
    assert not (path / "abort").exists()


_AHEAD_WRITER = """
import sys, segstore
store = segstore.open(sys.argv[1], format="rocketmq", mode="a")
store.configure_queues_ahead([("Ahead", 0), ("Ahead", 2), ("Unwritten", 0)])
store.append({"topic": "Ahead", "queue_id": 1, "body": b"a"})
store.append({"topic": "Other", "queue_id": 1, "body": b"b"})
print("appended", flush=True)
sys.stdin.read()
"""


def test_a_killed_writer_that_named_queues_ahead_leaves_them_and_its_own(tmp_path):
    # as test_topics_a_killed_writer_created_are_in_topics_json: a conversion names the queues it is
    # about to write in one write of topics.json (RocketMQStore.configure_queues_ahead) rather than
    # one write per new queue; a kill leaves those and any other queue an append created
    import json

    path = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", _AHEAD_WRITER, path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout.readline() == "appended\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()
    assert os.path.exists(os.path.join(path, "abort"))  # killed: no close ran
    with open(os.path.join(path, "config", "topics.json")) as f:
        table = json.load(f)["topicConfigTable"]
    assert {name: entry["writeQueueNums"] for name, entry in table.items()} == {
        "Ahead": 3, "Unwritten": 1, "Other": 2}
    # closed cleanly, the table is the queues written only
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append({"topic": "Late", "queue_id": 0, "body": b"c"})
    with open(os.path.join(path, "config", "topics.json")) as f:
        table = json.load(f)["topicConfigTable"]
    assert {name: entry["writeQueueNums"] for name, entry in table.items()} == {
        "Ahead": 3, "Unwritten": 1, "Other": 2, "Late": 1}
