"""Checkpoint file, and recovery after clean and unclean shutdowns."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT
from segstore_rocketmq.checkpoint import FILE_SIZE, Checkpoint, CheckpointFile, check

import segstore
from segstore import files
from segstore.errors import TruncatedDataError

ROCKETMQ = FIXTURES / "rocketmq"


def _store_line(name: str) -> dict:
    with open(ROCKETMQ / name / "dump.jsonl", encoding="utf-8") as f:
        return next(d for d in map(json.loads, f) if d["type"] == "store")


@pytest.mark.parametrize("name", ["basic", "abort"])
def test_checkpoint_fields_equal_the_brokers(name):
    raw = _store_line(name)["checkpointRaw"]
    cp = CheckpointFile(str(ROCKETMQ / name / "store" / "checkpoint")).value
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        raw["physicMsgTimestamp"],
        raw["logicsMsgTimestamp"],
        raw["indexMsgTimestamp"],
    )
    data = files.read_bytes(ROCKETMQ / name / "store" / "checkpoint")
    assert check(data, path="checkpoint") == []
    assert cp.pack() == data


def test_checkpoint_min_timestamps():
    cp = Checkpoint(10_000, 7_000, 2_000)
    assert cp.min_timestamp == 4_000 and cp.min_timestamp_index == 2_000
    assert Checkpoint(1_000, 5_000).min_timestamp == 0


def test_checkpoint_5x_fields_tolerated_and_short_file_rejected():
    cp = Checkpoint(1, 2, 3, 4, 5)
    assert Checkpoint.unpack(cp.pack()) == cp
    assert Checkpoint.unpack(cp.pack()[:24]) == Checkpoint(1, 2, 3)
    with pytest.raises(TruncatedDataError):
        Checkpoint.unpack(b"\x00" * 10, path="cp")


def test_checkpoint_check_names_positions():
    data = bytearray(Checkpoint(1, 2, 3).pack())
    data[100] = 7
    data[8] = 0x80
    problems = check(bytes(data), path="cp")
    assert (100, "expected zeros after byte 40, found 0x07") in problems
    assert any(pos == 8 and "logicsMsgTimestamp" in msg for pos, msg in problems)
    assert check(bytes(data[:50]), path="cp")[0][0] == 50
    # a checkpoint a kill left unsized (the broker's StoreCheckpoint creates, then maps): one problem
    assert check(b"", path="cp") == [(0, f"expected a checkpoint of {FILE_SIZE} bytes, found 0")]


def test_checkpoint_file_round_trip(tmp_path):
    path = str(tmp_path / "checkpoint")
    cpf = CheckpointFile(path, writable=True)
    cpf.value.physic_msg_timestamp = 123
    cpf.value.index_msg_timestamp = 9
    cpf.flush()
    cpf.close()
    assert files.file_size(path) == FILE_SIZE
    assert CheckpointFile(path).value == Checkpoint(123, 0, 9)


def test_a_new_checkpoint_is_whole_before_it_is_mapped(tmp_path, monkeypatch):
    """A writer killed while it makes a store leaves no checkpoint or a whole one, never a short one
    (the crash suite killed one between creating the file and sizing it: a 0-byte checkpoint beside
    the lock, which no reader then took for a store, and which verify reports)."""
    from segstore_rocketmq import checkpoint as cp
    from segstore_rocketmq.dirnames import is_rocketmq_store

    class Killed(Exception):
        pass

    def killed(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(cp.files, "MappedFile", killed)   # the kill: as the writer maps the new file
    files.write_atomic(tmp_path / "lock", b"lock")
    with pytest.raises(Killed):
        CheckpointFile(str(tmp_path / "checkpoint"), writable=True)
    assert files.file_size(str(tmp_path / "checkpoint")) == FILE_SIZE and is_rocketmq_store(str(tmp_path))


# -- recovery -------------------------------------------------------------------------

import os  # noqa: E402

from conftest import copy_writable  # noqa: E402
from segstore_rocketmq import recovery as rec  # noqa: E402
from segstore_rocketmq.commitlog import CommitLog  # noqa: E402
from segstore_rocketmq.config import DEFAULT_DELAY_LEVELS, SCHEDULE_TOPIC, parse_delay_levels  # noqa: E402
from segstore_rocketmq.consumequeue import ConsumeQueue  # noqa: E402
from segstore_rocketmq.indexfile import IndexRequest, IndexService  # noqa: E402
from segstore_rocketmq.javacompat import string_hash  # noqa: E402
from segstore_rocketmq.message import RocketMQMessage  # noqa: E402

DELAYS = parse_delay_levels(DEFAULT_DELAY_LEVELS)


def tags_code(msg: RocketMQMessage) -> int:
    level = msg.properties.get("DELAY")
    if msg.topic == SCHEDULE_TOPIC and level is not None and int(level) > 0:
        return msg.store_timestamp + DELAYS[min(int(level), len(DELAYS)) - 1]
    return string_hash(msg.tags) if msg.tags else 0


class Opened:
    """The parts of a store, opened writable the way a store opens them (test helper)."""

    def __init__(self, store_dir: str, config: dict, abnormal: bool) -> None:
        self.dir = store_dir
        self.commitlog = CommitLog(
            os.path.join(store_dir, "commitlog"), config["mappedFileSizeCommitLog"], writable=True
        )
        self.cq_size = config["mappedFileSizeConsumeQueue"]
        self.queues = {}
        cq_root = os.path.join(store_dir, "consumequeue")
        for topic in files.list_dir(cq_root):
            for qid in files.list_dir(os.path.join(cq_root, topic)):
                self.queues[(topic, int(qid))] = self.open_queue(topic, int(qid))
        self.index = IndexService(
            os.path.join(store_dir, "index"), config["maxHashSlotNum"], config["maxIndexNum"], writable=True
        )
        self.index.load()
        self.checkpoint = CheckpointFile(os.path.join(store_dir, "checkpoint")).value
        self.abnormal = abnormal

    def open_queue(self, topic: str, qid: int) -> ConsumeQueue:
        return ConsumeQueue(rec.queue_dir(self.dir, topic, qid), topic, qid, self.cq_size, writable=True)

    def context(self) -> rec.RecoveryContext:
        return rec.RecoveryContext(
            self.commitlog,
            self.queues,
            self.open_queue,
            self.index,
            self.checkpoint,
            tags_code,
            self.abnormal,
        )

    def recover(self) -> list[str]:
        return rec.recover(self.context())

    def close(self) -> None:
        self.commitlog.close()
        for q in self.queues.values():
            q.close()
        self.index.close()


def _lines(name: str, kind: str) -> list[dict]:
    with open(ROCKETMQ / name / "dump.jsonl", encoding="utf-8") as f:
        return [d for d in map(json.loads, f) if d["type"] == kind]


def _spec_config(name: str) -> dict:
    with open(ROCKETMQ / name / "spec.json", encoding="utf-8") as f:
        return json.load(f)["config"]


def _state(opened: Opened) -> tuple[dict, list]:
    """Queue ranges and every message reachable through a queue, as (topic, qid, qoffset, phy, raw bytes)."""
    ranges = {}
    messages = []
    cl = opened.commitlog
    for (topic, qid), q in sorted(opened.queues.items()):
        ranges[(topic, qid)] = (q.min_offset, q.max_offset)
        for n, row in enumerate(q.entries(q.min_offset)):
            phy, size = int(row["offset"]), int(row["size"])
            seg = cl.file_for(phy)
            raw = bytes(seg.file.view(phy - seg.base, phy - seg.base + size))
            messages.append((topic, qid, q.min_offset + n, phy, raw.hex()))
    return ranges, messages


@pytest.mark.parametrize("name", ["abort", "basic"])
def test_recovery_matches_the_brokers_recovered_view(tmp_path, name):
    store = copy_writable(ROCKETMQ / name / "store", tmp_path / "store")
    abnormal = files.exists(store / "abort")
    opened = Opened(str(store), _spec_config(name), abnormal)
    lines = opened.recover()
    assert lines[0].startswith("commitlog: " + ("unclean" if abnormal else "clean"))
    recovered = _lines(name, "recovered")[0]
    assert opened.commitlog.end == recovered["maxPhyOffset"]
    assert opened.commitlog.min_offset == recovered["minPhyOffset"]
    ranges, messages = _state(opened)
    want_ranges = {
        (d["topic"], d["queueId"]): (d["minOffset"], d["maxOffset"]) for d in _lines(name, "queue")
    }
    assert ranges == want_ranges
    want = sorted(
        (d["topic"], d["queueId"], d["queueOffset"], d["physicalOffset"], d["rawHex"].lower())
        for d in _lines(name, "message")
    )
    assert sorted(messages) == want
    # the index was kept (per entry) and answers like the broker's rebuilt one
    after = {d["rawHeader"]["endPhyOffset"]: d["rawHeader"] for d in _lines(name, "indexfileAfterRecovery")}
    for f in opened.index.files:
        raw = after[f.header.end_phy_offset]
        assert (f.header.index_count, f.header.hash_slot_count) == (raw["indexCount"], raw["hashSlotCount"])
    opened.close()
    # the index files are the broker's bytes
    for name_ in files.list_dir(store / "index"):
        assert files.read_bytes(store / "index" / name_) == files.read_bytes(
            ROCKETMQ / name / "store" / "index" / name_
        )


# -- IndexFile entries put twice (issue 28) ------------------------------------------------------------

def _broker_reindexed(store: str, *, delete_last: bool) -> None:
    """The IndexFiles RocketMQ 4.9.7 leaves after an abnormal start (``DefaultMessageStore.load`` with
    the ``abort`` file, checked with its store code on the basic fixture torn by 40 bytes):
    ``IndexService.load(false)`` destroys the files whose ``endTimestamp`` is past the checkpoint's
    ``indexMsgTimestamp`` (``delete_last``: the basic fixture's second file), and
    ``recoverAbnormally`` dispatches the walked messages again; ``IndexService.buildIndex`` skips only
    those *below* the last file's ``endPhyOffset``, so the message at it, whose keys that file already
    holds, is indexed again (``queryMessage`` then returns ``[367946, 367946]``, or for the last file
    kept, ``tx-commit`` at 651704 twice)."""
    config = _config_of("basic")
    service = IndexService(os.path.join(store, "index"), config["maxHashSlotNum"], config["maxIndexNum"],
                           writable=True)
    service.load()
    if delete_last:
        gone = service.files.pop()
        gone.close()
        os.remove(gone.path)
    floor = service.files[-1].header.end_phy_offset
    with segstore.open(store) as reader:
        requests = [IndexRequest(m.topic, m.physical_offset, m.store_timestamp, m.properties.get("UNIQ_KEY"),
                                 m.properties.get("KEYS"), m.sys_flag)
                    for m in reader.scan() if m.physical_offset >= floor]
    service.put_batch(requests)      # the broker's buildIndex: from the end offset, that message included
    for f in service.files:
        f.flush()
        f.close()


def _config_of(name: str) -> dict:
    with open(ROCKETMQ / name / "spec.json", encoding="utf-8") as f:
        return json.load(f)["config"]


def _entry_pairs(store: str) -> list[tuple[int, int]]:
    config = _config_of("basic")
    service = IndexService(os.path.join(store, "index"), config["maxHashSlotNum"], config["maxIndexNum"])
    service.load()
    pairs = [(int(h), int(p)) for f in service.files
             for h, p in zip(f.entries["hash"], f.entries["phy_offset"], strict=True)]
    for f in service.files:
        f.close()
    return pairs


@pytest.mark.parametrize("delete_last", [True, False], ids=["file deleted", "file kept"])
def test_recover_puts_no_key_twice_and_verify_names_a_key_put_twice(tmp_path, delete_last):
    """A store whose index holds one message's keys twice (what the broker's own abnormal recovery
    writes, above): ``verify`` names the first entry put again, ``recover`` cuts the index there and
    rebuilds it from the commitlog, putting each message's keys once (the keys of a message whose
    keys span two files, 367946, continue in the next file after those the previous one holds), so
    ``queryMessage`` answers each key once."""
    store = str(tmp_path / "store")
    copy_writable(ROCKETMQ / "basic" / "store", store)
    before = _entry_pairs(store)
    _broker_reindexed(store, delete_last=delete_last)
    twice = _entry_pairs(store)
    assert len(twice) > len(set(twice))
    with segstore.open(store, format="rocketmq") as reader:
        problems = reader.verify()
    assert any("put again" in p.message for p in problems), problems
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        writer.recover()
        assert writer.verify() == []
        assert [m.physical_offset for m in writer.find("TopicB", "key-189")] == [367946]
    after = _entry_pairs(store)
    assert len(after) == len(set(after)) and sorted(after) == sorted(before)


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "abort"])
@pytest.mark.parametrize("torn", [40, 3000])
def test_recover_of_a_torn_tail_indexes_each_key_once(tmp_path, torn, abort):
    """The basic fixture with the end of its data zeroed (the issue's 40 and 3000 bytes): after
    ``recover`` the index holds the broker's entries of every message before the cut, each once
    (the message at 367946 has two keys in the first file and one in the second)."""
    store = tmp_path / "store"
    copy_writable(ROCKETMQ / "basic" / "store", store)
    before = _entry_pairs(str(store))
    end, base = 651958, 524288
    last = store / "commitlog" / f"{base:020d}"
    data = bytearray(last.read_bytes())
    data[end - base - torn:end - base] = bytes(torn)
    last.write_bytes(bytes(data))
    if abort:
        (store / "abort").touch()
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        cut = writer.commitlog.end
        assert writer.verify() == []
    after = _entry_pairs(str(store))
    assert len(after) == len(set(after))
    assert after == [(h, p) for h, p in before if p < cut]


# -- a store copied without its holes ------------------------------------------------------------------

def _copy_store(src: Path, dst: Path, *, holes: bool) -> Path:
    """A copy of a store: ``holes``, its files' zero pages left as holes (``cp --sparse=always``);
    else written out as zeros, as ``shutil.copytree`` and most backup tools copy a preallocated file."""
    for path in sorted(src.rglob("*")):
        to = dst / path.relative_to(src)
        if path.is_dir():
            to.mkdir(parents=True)
            continue
        to.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        with open(to, "wb") as f:
            if not holes:
                f.write(data)
                continue
            f.truncate(len(data))
            for at in range(0, len(data), 4096):
                if any(data[at:at + 4096]):
                    f.seek(at)
                    f.write(data[at:at + 4096])
    return dst


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stray", [None, 60000, 65535], ids=["zeros", "a byte in the zeros", "the last byte"])
@pytest.mark.parametrize("window", [None, 8192], ids=["default window", "8 KiB windows"])
def test_a_store_copied_without_its_holes_recovers_as_the_sparse_copy(tmp_path, monkeypatch, stray, window):
    """The abort fixture (data to 47312 in its fourth 64 KiB commitlog file) copied with and without its
    holes: ``recover`` writes the same bytes and says the same lines of both.  The zeros past the data
    are read a window at a time (a dense copy has no hole to skip: all of them are read, each window
    told zero by one compare), and a stray byte in them is still found: the walk looks past it, and the
    tail is cut to the data's end with it, its bytes saved aside (``cut_tail``)."""
    from segstore import cli

    if window is not None:
        monkeypatch.setattr(files, "SCAN_WINDOW", window)
    src = tmp_path / "src"
    copy_writable(ROCKETMQ / "abort" / "store", src)
    last = src / "commitlog" / f"{196608:020d}"
    if stray is not None:
        files.write_bytes(str(last), b"\x07", stray)
    outs, trees = [], []
    for holes in (True, False):
        store = _copy_store(src, tmp_path / ("sparse" if holes else "dense"), holes=holes)
        size = (store / "commitlog" / last.name).stat().st_size
        whole = files.data_ranges(str(store / "commitlog" / last.name), 0, size) == [(0, size)]
        if holes and whole:
            pytest.skip("the file system keeps no holes")
        assert holes or whole
        out = io.StringIO()
        assert cli.main(["recover", str(store)], out=out) == 0
        outs.append(out.getvalue().replace(str(store), "STORE"))
        trees.append(_tree(store))
    assert outs[0] == outs[1]
    assert trees[0] == trees[1]
    recovered = trees[1][f"commitlog/{last.name}"]
    assert not any(recovered[47312:])
    cut = [line for line in outs[1].splitlines() if "torn tail" in line]
    if stray is None:
        assert cut == []
    else:
        assert cut == [f"STORE/commitlog/{last.name}:47312: cut {stray + 1 - 47312} bytes of torn tail, "
                       f"saved in STORE/.segstore/cut/commitlog/{last.name}.cut-47312"]
        assert trees[1][f".segstore/cut/commitlog/{last.name}.cut-47312"][-1:] == b"\x07"


@pytest.mark.parametrize("at", [300, 620], ids=["two slots past the last entry", "in the file's last slot"])
def test_recover_zeros_data_after_a_queues_last_entry(tmp_path, at):
    """Bytes after the zero slot that ends a consume queue (its last file holds entries 32-44 to byte
    260): ``verify`` names them ("expected zeros after the last valid entry"), but ``recover`` left them
    and exited 0, so the store it called recovered did not verify.  RocketMQ 4.9.7
    ``ConsumeQueue.recover`` ends the queue at the first slot without ``offset >= 0 && size > 0`` and
    ``truncateDirtyFiles`` zeroes nothing, so the broker's next appends reach those bytes and, written up
    to them, its next recovery reads them as entries.  recover now zeroes them, kept aside first."""
    from segstore import cli

    store = tmp_path / "store"
    copy_writable(ROCKETMQ / "basic" / "store", store)
    queue = store / "consumequeue" / "TopicA" / "0" / "00000000000000000640"
    files.write_bytes(str(queue), b"\x01\x02\x03\x04", at)
    out = io.StringIO()
    assert cli.main(["verify", str(store)], out=out) == 1
    assert f"{queue}:260: expected zeros after the last valid entry, found data at byte {at - at % 20}" \
        in out.getvalue()
    out = io.StringIO()
    assert cli.main(["recover", str(store)], out=out) == 0
    kept = store / ".segstore" / "cut" / "consumequeue" / "TopicA" / "0" / f"{queue.name}.cut-260"
    assert f"consumequeue TopicA/0: {queue}:260: zeroed {at + 4 - 260} bytes of data after the last entry " \
           f"(no entry: the queue ends at the zero slot before them), saved in {kept}" in out.getvalue()
    assert kept.read_bytes()[-4:] == b"\x01\x02\x03\x04" and len(kept.read_bytes()) == at + 4 - 260
    assert not any(queue.read_bytes()[260:])
    out = io.StringIO()
    assert cli.main(["verify", str(store)], out=out) == 0, out.getvalue()


@pytest.mark.parametrize("command", ["recover", "verify"])
def test_the_zeros_past_a_dense_copys_data_are_read_once(tmp_path, monkeypatch, command):
    """The abort fixture copied without its holes (data to 47312 of its fourth 64 KiB file, zeros after):
    ``recover`` (the broker's unclean path, the IndexFile rebuilt) and ``verify`` (of the recovered copy)
    read those zeros once.
    The walk's look past its end (``next_valid_message``) finds them zeros; the tail's cut
    (``cut_tail``), verify's check of the tail and the walks again over the recovered commitlog (the
    index's puts) read them again each, three times in all for a recovery."""
    from segstore import cli

    store = _copy_store(ROCKETMQ / "abort" / "store", tmp_path / "dense", holes=False)
    if command == "verify":
        assert cli.main(["recover", str(store)], out=io.StringIO()) == 0
    last, end, size = f"{196608:020d}", 47312, 65536
    read = np.zeros(size, np.int64)
    pread = files.MappedFile.pread

    def counted(self, pos, n):
        if Path(self.path).name == last and Path(self.path).parent.name == "commitlog":
            read[pos:pos + n] += 1
        return pread(self, pos, n)

    monkeypatch.setattr(files.MappedFile, "pread", counted)
    out = io.StringIO()
    assert cli.main([command, str(store)], out=out) == 0
    assert read[end + 1:].min() == 1 and read[end:].max() == 1, np.bincount(read[end:])
    assert not any((store / "commitlog" / last).read_bytes()[end:])


@pytest.mark.parametrize("lost", [3, 12])
def test_recover_of_an_index_header_that_lost_its_last_puts(tmp_path, lost):
    """A crash that left the last IndexFile's header count ``lost`` puts behind its slots and entries
    (the header's page not written back; slots then point past the count) and the commitlog's tail
    torn, abort file left: the recovery keeps the broker's entries of every message before the cut,
    each once, and the file verifies.  (RocketMQ 4.9.7's ``DefaultMessageStore.load`` and
    ``queryMessage`` answered every key of the same shape as ``find`` does, on stores segstore wrote
    and recovered so; the storage oracle, 2026-11-29.)"""
    from segstore_rocketmq import indexfile as ix

    store = tmp_path / "store"
    copy_writable(ROCKETMQ / "basic" / "store", store)
    before = _entry_pairs(str(store))
    last_index = store / "index" / files.list_dir(store / "index")[-1]
    data = bytearray(last_index.read_bytes())
    count = int.from_bytes(data[ix.INDEX_COUNT_POS:ix.INDEX_COUNT_POS + 4], "big")
    data[ix.INDEX_COUNT_POS:ix.INDEX_COUNT_POS + 4] = (count - lost).to_bytes(4, "big")
    last_index.write_bytes(bytes(data))
    end, base = 651958, 524288
    tail = store / "commitlog" / f"{base:020d}"
    data = bytearray(tail.read_bytes())
    data[end - base - 3000:end - base] = bytes(3000)
    tail.write_bytes(bytes(data))
    (store / "abort").touch()
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        cut = writer.commitlog.end
        assert writer.verify() == []
    after = _entry_pairs(str(store))
    assert len(after) == len(set(after))
    assert after == [(h, p) for h, p in before if p < cut]


def _walks(monkeypatch) -> list[int]:
    """Count the commitlog walks recovery makes (each a call of ``walk_batches``)."""
    from segstore_rocketmq import recovery

    starts: list[int] = []
    walk = recovery.walk_batches

    def counted(cl, start, *args, **kwargs):
        starts.append(start)
        return walk(cl, start, *args, **kwargs)

    monkeypatch.setattr(recovery, "walk_batches", counted)
    return starts


def test_recover_after_an_open_that_rebuilt_everything_walks_once(tmp_path, monkeypatch):
    """A store that lost its consume queues and IndexFile (abort file left): opening it for append
    walks the whole commitlog, rebuilding both and checking every entry, so ``recover``'s full check
    is that walk; until anything changes, after which it walks again."""
    import shutil

    store = tmp_path / "store"
    copy_writable(ROCKETMQ / "basic" / "store", store)
    with segstore.open(store, format="rocketmq") as reader:
        expected = {(t, q): reader.offset_range(t, q) for t, q in reader.queues}
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    (store / "abort").touch()
    walks = _walks(monkeypatch)
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        assert walks == [0]
        lines = writer.recover()
        assert walks == [0]
        assert lines[-1] == "commitlog: full check; the recovery at open walked and checked the whole store"
        assert any(line.startswith("index: rebuilt") for line in lines)
        assert {key: writer.offset_range(*key) for key in expected} == expected
        assert writer.verify() == []
        writer.append({"topic": "TopicA", "queue_id": 0, "body": b"after"})
        lines = writer.recover()
        assert any(line.startswith("commitlog: full check; walked") for line in lines), lines
        assert len(walks) > 1 and walks[1] == 0
        assert writer.verify() == []


# -- recovery after retention deleted the commitlog files the index and queues point into -------------

RETAINED = {"mappedFileSizeCommitLog": 2048, "mappedFileSizeConsumeQueue": 160, "maxHashSlotNum": 64,
            "maxIndexNum": 64}


def _retained(store: Path, keyed: int) -> int:
    """40 messages of 100 bytes (10 a commitlog file), the first 5 of topic B (their queue then points
    only into deleted files), the first ``keyed`` with a key; then ``segstore retention`` with
    ``fileReservedTime=0`` deletes every commitlog file but the last.  Returns the new min offset."""
    from segstore_rocketmq.store import RocketMQStore

    with RocketMQStore(str(store), "a", RETAINED) as writer:
        for i in range(40):
            writer.append_batch([{"topic": "B" if i < 5 else "A", "queue_id": 0, "body": bytes(100),
                                  "store_timestamp": 1_700_000_000_000 + 300 * i,
                                  **({"keys": [f"k{i}"]} if i < keyed else {})}])
    with RocketMQStore(str(store), "a", {**RETAINED, "fileReservedTime": 0}) as writer:
        result = writer.retention(now_ms=2_000_000_000_000, disk_ratio=lambda freed: 0.30)[0]
        assert len(writer.commitlog.log.segments) == 1 and result["min_offset"] > 0
        return int(result["min_offset"])


def _store_files(store: Path) -> dict[str, bytes]:
    """Every file of the store but the ``abort`` file, by path."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.name != "abort"}


def _readable(store: Path) -> dict[tuple[str, int], list[tuple[int, int, bytes]]]:
    """Every queue's readable messages as ``(queue offset, physical offset, body)``; verify must pass."""
    with segstore.open(store) as reader:
        assert reader.verify() == []
        return {(t, q): [(m.queue_offset, m.physical_offset, m.body)
                         for m in reader.read(t, q, reader.offset_range(t, q)[0])] for t, q in reader.queues}


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "abort"])
@pytest.mark.parametrize("case", ["no keys", "keys below", "index lost the last keys"])
def test_recover_after_retention_walks_from_the_first_commitlog_file(tmp_path, monkeypatch, case, abort):
    """Retention deleted every commitlog file but the last; the IndexFile holds no entry ("no keys":
    it resumes at offset 0), or only entries of messages in deleted files ("keys below"), or lost the
    entries of the messages left ("index lost the last keys").  Opening for append and ``recover``
    (C, and ``SEGSTORE_PURE_PYTHON=1``) walk the commitlog from its first file, never below it, with
    or without the abort file; they leave the store as retention left it, and re-put lost entries
    (the broker's bytes: those retention left).

    The broker never walks below its first commitlog file either (RocketMQ 4.9.7,
    store/src/main/java/org/apache/rocketmq/store/): ``DefaultMessageStore.start`` raises the reput
    offset to ``commitLog.getMinOffset()`` ("[TooSmallCqOffset]") and
    ``ReputMessageService.doReput`` does again; ``CommitLog.recoverNormally`` and
    ``recoverAbnormally`` (``DefaultMessageStore.recover``) walk from a file of the mapped-file
    queue, the files left, ``recoverAbnormally`` from index 0 when no file's first message is
    older than the checkpoint; ``index/IndexService.load`` takes the IndexFiles as they are (after
    a crash it drops those past ``indexMsgTimestamp``), and ``buildIndex`` indexes only what the
    dispatch walks.  (The storage oracle, RmqLoad of 4.9.7, loads the store of "no keys" and "keys
    below" before and after segstore's recovery alike: min offset 6144, the same queues, messages
    and queries; 2026-11-30.)"""
    from segstore_rocketmq.indexfile import IndexService as Service

    store = tmp_path / "store"
    min_offset = _retained(store, 40 if case == "index lost the last keys" else 30 if case == "keys below"
                           else 0)
    left = _store_files(store)
    want = _readable(store)
    if case == "index lost the last keys":
        service = Service(str(store / "index"), RETAINED["maxHashSlotNum"], RETAINED["maxIndexNum"],
                          writable=True)
        service.load()
        (f,) = service.files
        below = int(np.count_nonzero(f.entries["phy_offset"] < min_offset))
        f.truncate(below, 1_700_000_000_000 + 300 * (below - 1))
        f.flush()
        f.close()
        assert 0 < below < 40
    if abort:
        (store / "abort").touch()
    pure = tmp_path / "pure"
    shutil.copytree(store, pure)
    walks = _walks(monkeypatch)
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        lines, end = writer.recovery_lines, writer.commitlog.end
        assert writer.recover()[-1] == ("commitlog: full check; the recovery at open walked and checked the "
                                        "whole store")
    assert walks and min(walks) == min_offset
    kind = "unclean shutdown (abort file present)" if abort else "clean shutdown"
    messages = sum(map(len, want.values()))
    assert lines[0] == f"commitlog: {kind}; walked {messages} messages from {min_offset} to {end}"
    rebuilt = [line for line in lines if line.startswith("index:")]
    assert rebuilt == ([f"index: rebuilt {40 - below} entries for messages from commitlog offset "
                        f"{min_offset}"] if case == "index lost the last keys" else [])
    assert _store_files(store) == left and _readable(store) == want
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")]),
           "SEGSTORE_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-m", "segstore.cli", "recover", str(pure)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[:len(lines)] == [line.replace(str(store), str(pure)) for line in lines]
    assert _store_files(pure) == left and _readable(pure) == want


# -- the checkpoint keeps the broker's abnormal recovery early enough (store times out of order) ---------

BACKWARD = {"mappedFileSizeCommitLog": 16384, "mappedFileSizeConsumeQueue": 400, "maxHashSlotNum": 16,
            "maxIndexNum": 64}
NOW_MS = 1_764_000_000_000
DAY_MS = 86_400_000


def _broker_abnormal_start(store: Path) -> int:
    """Where RocketMQ 4.9.7 ``CommitLog.recoverAbnormally`` starts after a crash, from the checkpoint
    on disk (store/src/main/java/org/apache/rocketmq/store/CommitLog.java): the last file for which
    ``isMappedFileMatchedRecover`` holds (its first message's store time, read at 56 or 68 by the
    born-host flag, is not 0 and at most ``StoreCheckpoint.getMinTimestamp()``, min(physic, logics)
    less 3 s and at least 0), the first file when none does."""
    from segstore_rocketmq.message import SYSFLAG_BORNHOST_V6

    point = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    bases = sorted(int(name) for name in files.list_dir(store / "commitlog"))
    for base in reversed(bases):
        head = files.read_bytes(store / "commitlog" / f"{base:020d}")[:80]
        if int.from_bytes(head[4:8], "big", signed=True) != -626843481:   # MESSAGE_MAGIC_CODE
            continue
        born_v6 = int.from_bytes(head[36:40], "big") & SYSFLAG_BORNHOST_V6
        stored = int.from_bytes(head[68:76] if born_v6 else head[56:64], "big", signed=True)
        if stored != 0 and stored <= point.min_timestamp:
            return base
    return bases[0]


def _plain(i: int, stored: int) -> dict:
    return {"topic": "Backward", "queue_id": i % 2, "body": b"x" * 300, "store_timestamp": stored}


def _arrow_rows(tmp_path: Path, stamps: list[int]):
    """The rows ``scan_arrow`` yields of messages stored at ``stamps`` (what ``append_arrow`` takes)."""
    import pyarrow as pa

    source = tmp_path / "source"
    with segstore.open(source, format="rocketmq", mode="a", **BACKWARD) as writer:
        writer.append_batch([_plain(i, stamp) for i, stamp in enumerate(stamps)])
    with segstore.open(source, format="rocketmq") as reader:
        return pa.Table.from_batches(list(reader.scan_arrow()))


@pytest.mark.parametrize("how", ["append", "append_arrow"])
def test_a_file_begun_with_an_older_store_time_lowers_the_checkpoint_before_it_is_written(tmp_path, how):
    """Store times need not ascend in segstore (``store_timestamp`` of an append, ``append_stored``,
    ``append_arrow``, a conversion from Kafka's CreateTime): messages acknowledged in ``SYNC_FLUSH``
    after the checkpoint was last written, in the tail of one file, then a new file whose first
    message is a day older.  The broker (RocketMQ 4.9.7 ``CommitLog.recoverAbnormally`` /
    ``isMappedFileMatchedRecover`` against ``StoreCheckpoint.getMinTimestamp``) starts its recovery
    at the last file whose first message is older than the checkpoint, so with the checkpoint the
    flush wrote it started at the new file and never dispatched the tail of the one before: after a
    power loss that took the consume-queue pages not yet flushed, those acknowledged messages were
    gone from their queues (the storage oracle, RmqLoad of 4.9.7: 39 of 60 messages reachable, "[BUG]
    logic queue order maybe wrong"; 60 with the checkpoint lowered to the new file's first store time).
    The checkpoint on disk must make it start at or before the first message whose queue entry is
    not provably flushed."""
    store = tmp_path / "store"
    stamps = [NOW_MS + i for i in range(20)] + [NOW_MS - DAY_MS + i for i in range(20, 60)]
    rows = _arrow_rows(tmp_path, stamps)
    with segstore.open(store, format="rocketmq", mode="a", flushDiskType="SYNC_FLUSH", **BACKWARD) as writer:
        if how == "append":
            for i in range(20):
                writer.append(_plain(i, NOW_MS + i))
        else:
            writer.append_arrow(rows.slice(0, 20))
        writer.flush()
        unflushed = writer.commitlog.end         # queue entries past here wait for the 60 s flush
        if how == "append":
            i = 20
            while len(writer.commitlog.log.segments) < 2:
                writer.append(_plain(i, NOW_MS - DAY_MS + i))
                i += 1
        else:       # one batch: the tail of the first file, then the second
            writer.append_arrow(rows.slice(20))
        second = writer.commitlog.log.active.base
        assert unflushed < second
        writer.abandon()
    assert (store / "abort").exists()
    assert _broker_abnormal_start(store) <= unflushed


def test_a_checkpoint_written_before_the_commitlog_flush_caught_up_stays_below_later_files(tmp_path):
    """``ASYNC_FLUSH``: the consume queues' 60 s flush writes the checkpoint (``FlushConsumeQueueService``
    in 4.9.7 ``DefaultMessageStore``) while the commitlog is flushed only up to an earlier message, and
    a later file begins with a store time older than the times flushed.  The checkpoint written must
    not let ``CommitLog.recoverAbnormally`` start at that later file (it would never look at the
    commitlog bytes not yet durable before it, to which the flushed queue entries point)."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", **BACKWARD) as writer:
        flusher = writer._flusher
        flusher.stop()      # no background flush: this test runs its steps
        for i in range(20):
            writer.append(_plain(i, NOW_MS + i))
        writer.flush()
        durable = writer.commitlog.end
        i = 20
        while len(writer.commitlog.log.segments) < 2:
            writer.append(_plain(i, NOW_MS - DAY_MS + i))
            i += 1
        for j in range(5):
            writer.append(_plain(i + j, NOW_MS + DAY_MS + j))
        with flusher.lock:
            flusher._flush_queues(force=True)   # the thorough queue flush, then its checkpoint
            flusher._flush_checkpoint()
        assert flusher.flushed_offset == durable      # the commitlog flush has not caught up
        writer.abandon()
    assert _broker_abnormal_start(store) <= durable


def test_a_file_begun_with_a_negative_store_time_is_begun_after_everything_before_it_is_flushed(tmp_path):
    """A Kafka record without a timestamp (magic v0, NO_TIMESTAMP -1) converts to a message stored at
    -1.  RocketMQ 4.9.7 ``CommitLog.isMappedFileMatchedRecover`` takes any store time but 0 that is
    at most ``StoreCheckpoint.getMinTimestamp()`` (never below 0), so ``recoverAbnormally`` may start
    at a file whose first message is stored at -1 whatever the checkpoint says: every message
    acknowledged before that file is begun must be flushed (commitlog and consume queues) first."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", flushDiskType="SYNC_FLUSH", **BACKWARD) as writer:
        flusher = writer._flusher
        for i in range(20):
            writer.append(_plain(i, NOW_MS + i))
        writer.flush()
        i = 20
        while len(writer.commitlog.log.segments) < 2:
            acknowledged = writer.commitlog.end
            writer.append(_plain(i, -1))
            i += 1
        durable = flusher.durable_offset
        writer.abandon()
    assert _broker_abnormal_start(store) == 16384 and acknowledged <= durable


# -- IndexFiles a crash-start of the broker deletes (indexMsgTimestamp) --------------------------------

SMALL_INDEX = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 400, "maxHashSlotNum": 16,
               "maxIndexNum": 8}


def _broker_crash_load_deletes(store: Path) -> list[str]:
    """The IndexFiles RocketMQ 4.9.7 ``IndexService.load(false)`` destroys when it starts after a crash
    (store/.../index/IndexService.java): each whose header ``endTimestamp`` is past the checkpoint's
    ``indexMsgTimestamp``, whatever comes after it."""
    point = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    gone = []
    for name in sorted(files.list_dir(store / "index")):
        end = int.from_bytes(files.read_bytes(store / "index" / name)[8:16], "big", signed=True)
        if end > point.index_msg_timestamp:
            gone.append(name)
    return gone


def _keyed_then_older_without_keys(store: Path) -> None:
    """Messages with two keys each at NOW_MS on (four full IndexFiles of 7 entries: the checkpoint's
    ``indexMsgTimestamp`` the last one's end, as ``IndexService.flush`` writes it), then a day older
    ones (the broker's clock stepped back, or ``store_timestamp`` given), one with a key, over two more
    commitlog files; then a crash."""
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        i = 0
        while len(writer.commitlog.log.segments) < 2:
            writer.append({"topic": "T", "queue_id": 0, "body": b"x" * 200, "keys": [f"k{i}", f"j{i}"],
                           "store_timestamp": NOW_MS + i})
            i += 1
        while len(writer.commitlog.log.segments) < 3:
            writer.append({"topic": "T", "queue_id": 0, "body": b"x" * 200,
                           "store_timestamp": NOW_MS - DAY_MS + 1000 * i})
            i += 1
        writer.append({"topic": "T", "queue_id": 0, "body": b"x" * 200, "keys": ["late"],
                       "store_timestamp": NOW_MS - DAY_MS + 1000 * i})
        for j in range(1, 6):
            writer.append({"topic": "T", "queue_id": 0, "body": b"x" * 200,
                           "store_timestamp": NOW_MS - DAY_MS + 1000 * (i + j)})
        writer.flush()
        writer.abandon()


def test_recovery_never_lowers_index_msg_timestamp_below_a_full_index_files_end(tmp_path):
    """Store times out of order after a crash: the walk of the last commitlog file sees only the older
    times, and recovery set every checkpoint time past the newest of them to it, ``indexMsgTimestamp``
    too.  The broker never lowers that field (4.9.7 ``IndexService.flush`` sets it to a full file's
    end; its recovery leaves it), and ``IndexService.load(false)`` destroys every IndexFile whose
    ``endTimestamp`` is past it: after segstore's recovery the broker's next crash-start deleted the
    four sound full IndexFiles (every key of the first messages gone from ``queryMsgByKey``), which
    with the broker's own checkpoint it keeps."""
    store = tmp_path / "store"
    _keyed_then_older_without_keys(store)
    before = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    assert _broker_crash_load_deletes(store) == []
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        walked = writer.recovery_lines[0]
        assert walked.startswith("commitlog: unclean shutdown (abort file present); walked ")
        assert walked.endswith(" from 8192 to 10245")     # the last file: only the older times
        assert not any("indexMsgTimestamp" in line for line in writer.recovery_lines)
        writer.abandon()      # crashed again: the broker starts on it
    after = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    assert after.index_msg_timestamp == before.index_msg_timestamp == NOW_MS + 13
    assert _broker_crash_load_deletes(store) == []
    segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX).close()
    with segstore.open(store, format="rocketmq") as reader:
        assert [m.store_timestamp for m in reader.find("T", "k0")] == [NOW_MS]
        assert reader.verify() == []


def test_index_files_the_recovery_fills_record_their_end_in_the_checkpoint(tmp_path):
    """4.9.7 ``recoverAbnormally`` dispatches each message walked to ``IndexService.buildIndex``; a file
    that fills makes ``getAndCreateLastIndexFile`` flush it (``IndexService.flush``), writing its end
    time to the checkpoint's ``indexMsgTimestamp``.  segstore's recovery rebuilt three full files and
    left the field at the first file's end, so the broker's next crash-start (``IndexService.load(false)``)
    destroyed the three it had just rebuilt."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        for i in range(30):
            writer.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": [f"k{i}"],
                           "store_timestamp": NOW_MS + i})
        writer.flush()
        ends = [f.header.end_timestamp for f in writer.index.files]
        paths = [f.path for f in writer.index.files]
        writer.abandon()
    assert ends == [NOW_MS + 6, NOW_MS + 13, NOW_MS + 20, NOW_MS + 27, NOW_MS + 29]
    for path in paths[1:]:      # lost: the first file's entries end at message 6
        files.remove(path)
    point = CheckpointFile(str(store / "checkpoint"), writable=True)
    point.value.index_msg_timestamp = NOW_MS + 6
    point.flush()
    point.close()
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        assert "index: rebuilt 24 entries for messages from commitlog offset 501" in writer.recovery_lines
        assert [f.header.end_timestamp for f in writer.index.files] == ends
        writer.abandon()
    assert Checkpoint.unpack(files.read_bytes(store / "checkpoint")).index_msg_timestamp == NOW_MS + 27
    assert _broker_crash_load_deletes(store) == [sorted(files.list_dir(store / "index"))[-1]]


def test_a_full_index_file_ending_at_no_positive_time_leaves_the_checkpoint(tmp_path):
    """4.9.7 ``IndexService.flush`` writes a full file's ``endTimestamp`` to the checkpoint only when it is
    above 0; a file whose last key's message is stored at -1 (a Kafka record without a timestamp,
    converted) left ``indexMsgTimestamp`` at -1, and the broker's next crash-start destroyed every
    IndexFile ending later (all the others)."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        for i in range(21):
            writer.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": [f"k{i}"],
                           "store_timestamp": -1 if i == 20 else NOW_MS + i})
        writer.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": ["z"],
                       "store_timestamp": NOW_MS + 50})
        assert [f.header.end_timestamp for f in writer.index.files] == [NOW_MS + 6, NOW_MS + 13, -1,
                                                                         NOW_MS + 50]
        writer.flush()
        writer.abandon()
    assert Checkpoint.unpack(files.read_bytes(store / "checkpoint")).index_msg_timestamp == NOW_MS + 13
    assert _broker_crash_load_deletes(store) == [sorted(files.list_dir(store / "index"))[-1]]


def test_recovery_with_the_index_off_never_lowers_index_msg_timestamp_below_a_left_index_files_end(tmp_path):
    """The same store reopened with ``messageIndexEnable=false`` (the index turned off after it was on):
    recovery loaded no IndexFile, so it took the walk's newest store time as the bound and lowered
    ``indexMsgTimestamp`` to it, a day before the four full files' ends.  The broker loads ``index/``
    whatever the config (4.9.7 ``DefaultMessageStore.load`` calls ``IndexService.load(lastExitOK)``;
    messageIndexEnable only gates ``CommitLogDispatcherBuildIndex``), and its next crash-start destroyed
    all four (``IndexService.load``: ``endTimestamp > indexMsgTimestamp``).  Recovery now reads the
    files' 40-byte headers, the index on or off."""
    store = tmp_path / "store"
    _keyed_then_older_without_keys(store)
    before = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    assert len(files.list_dir(store / "index")) == 5      # four full and the one written to
    with segstore.open(store, format="rocketmq", mode="a", messageIndexEnable=False, **SMALL_INDEX) as writer:
        assert writer.recovery_lines[0].endswith(" from 8192 to 10245")     # only the older times
        assert not any("indexMsgTimestamp" in line for line in writer.recovery_lines)
        writer.abandon()      # crashed again: the broker starts on it
    after = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    assert after.index_msg_timestamp == before.index_msg_timestamp == NOW_MS + 13
    assert _broker_crash_load_deletes(store) == []


def test_recovery_with_the_index_off_still_lowers_index_msg_timestamp_past_every_left_file(tmp_path):
    """The bound is the newest of the walk and the files' ends: a checkpoint ``indexMsgTimestamp`` past
    both (damage) is still set to it with the index off, and a file in ``index/`` shorter than the
    header reads its end as 0 (the broker maps it at the configured size, zeros)."""
    store = tmp_path / "store"
    _keyed_then_older_without_keys(store)
    files.write_bytes(str(store / "index" / "99999999999999999"), b"\x00\x00\x00\x00")
    point = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    point.index_msg_timestamp = NOW_MS + DAY_MS
    files.write_bytes(str(store / "checkpoint"), point.pack())
    with segstore.open(store, format="rocketmq", mode="a", messageIndexEnable=False, **SMALL_INDEX) as writer:
        assert f"checkpoint: indexMsgTimestamp set to the newest message's store time, {NOW_MS + 13}" \
            in writer.recovery_lines
        writer.abandon()
    assert Checkpoint.unpack(files.read_bytes(store / "checkpoint")).index_msg_timestamp == NOW_MS + 13


@pytest.mark.parametrize("abort", [False, True], ids=["clean", "abort"])
@pytest.mark.parametrize("torn_entries", [0, 2])
def test_recover_of_an_index_entry_whose_link_a_torn_page_zeroed(tmp_path, abort, torn_entries):
    """A torn page of the last IndexFile: the last bytes of an entry (its link to the entry before it in
    its slot, ``IndexFile.putKey``) zeroed, and ``torn_entries`` whole entries after it.  Its hash and
    offset still name its message, so recover kept it, and the slot's chain ended there: every older
    key of that slot went unfound (a storage-oracle crash run: ``k507`` found by RocketMQ 4.9.7 after
    its own recovery, which drops the index files past the checkpoint, ``IndexService.load(false)``,
    and not after ``segstore recover``; ``verify`` still named the link).  The entry is cut and its
    message indexed again, and the slots follow the kept links: the file is the broker's again."""
    from segstore_rocketmq import indexfile as ix

    store = tmp_path / "store"
    copy_writable(ROCKETMQ / "basic" / "store", store)
    config = _config_of("basic")
    last_index = store / "index" / files.list_dir(store / "index")[-1]
    written = last_index.read_bytes()
    count = int.from_bytes(written[ix.INDEX_COUNT_POS:ix.INDEX_COUNT_POS + 4], "big")
    first_entry = ix.HEADER.size + config["maxHashSlotNum"] * ix.SLOT_DTYPE.itemsize
    entries = np.frombuffer(written, ix.ENTRY_DTYPE, count, first_entry)
    # the newest entry early enough for ``torn_entries`` after it whose link names an older entry
    number = max(n for n in range(1, count - torn_entries) if entries[n]["prev"] > 0)
    linked = int(entries[number]["prev"])
    data = bytearray(written)
    link_end = first_entry + (number + 1) * ix.ENTRY_DTYPE.itemsize
    data[link_end - 4:link_end + torn_entries * ix.ENTRY_DTYPE.itemsize] = bytes(4 + torn_entries * 20)
    last_index.write_bytes(bytes(data))
    if abort:
        (store / "abort").touch()
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        writer.recover()
        assert writer.verify() == []
        message = writer.commitlog.read(int(entries[linked]["phy_offset"]))
        key = (message.keys or [message.properties["UNIQ_KEY"]])[0]
        assert message.physical_offset in [m.physical_offset for m in writer.find(message.topic, key)]
    assert last_index.read_bytes() == written


def test_recovery_after_the_last_commitlog_file_was_lost_leaves_a_checkpoint_verify_accepts(tmp_path):
    """A crash, then the last commitlog file lost (the checkpoint newer than the data left): recovery
    drops the consume-queue entries past the end (as 4.9.7 ``truncateDirtyLogicFiles``), cuts the index
    where its entries point past the end, and sets the checkpoint times past the newest message kept to
    it.  ``indexMsgTimestamp`` was bounded by the IndexFiles' ends read before the index was cut, the end
    of a file recovery then removed: ``verify`` of the store recovery had just written reported
    ``expected indexMsgTimestamp at most the newest message's store time``.  The bound is now taken
    once the index is recovered (``recovery._clamp_checkpoint``)."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        i = 0
        after = 0
        while after < 12:       # four commitlog files, the last holding 12 messages (a full IndexFile)
            after += len(writer.commitlog.log.segments) >= 4
            writer.append({"topic": "T", "queue_id": i % 2, "body": b"x" * 200, "keys": [f"k{i}"],
                           "store_timestamp": NOW_MS + i})
            i += 1
        writer.flush()
        last = writer.commitlog.log.segments.active.path
        writer.abandon()
    files.remove(last)
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        assert any("dropped" in line and "past the commitlog end" in line for line in writer.recovery_lines)
        newest = max(m.store_timestamp for m in writer.scan())
    point = Checkpoint.unpack(files.read_bytes(store / "checkpoint"))
    assert point.index_msg_timestamp <= newest and point.physic_msg_timestamp == newest
    with segstore.open(store, format="rocketmq") as reader:
        assert reader.verify() == []
        assert [m.store_timestamp for m in reader.find("T", "k0")] == [NOW_MS]


@pytest.mark.parametrize("abort", [False, True])
def test_recovery_drops_a_stale_entry_past_a_queues_last_message(tmp_path, abort):
    """RocketMQ 4.9.7 ``ConsumeQueue.truncateDirtyLogicFiles`` (its recovery of a torn or lost commitlog
    tail) moves a queue's write position back and leaves the entries after it on disk; the broker then
    stores other queues' messages over the cut tail, and its next start (``ConsumeQueue.recover``: the
    entries up to the first zero one) serves the stale entry.  Checked with the 4.9.7 store (the
    oracle's ``getMessage(TopicC, 2, 50)`` after a clean and a crash start returned TopicA/0's message
    at that offset).  segstore's read refused it and verify reported it, but recovery kept it: every
    later verify reported it again.  Recovery now drops it (``recovery._drop_stale_entries``)."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        for i in range(20):
            writer.append({"topic": "T", "queue_id": int(i >= 10), "body": b"x" * 50, "keys": [f"k{i}"]})
    with segstore.open(store, format="rocketmq") as reader:
        last_of_1 = next(iter(reader.read("T", 1, 9)))
        assert reader.offset_range("T", 0) == (0, 10)
    cq = store / "consumequeue" / "T" / "0" / "00000000000000000000"
    data = bytearray(files.read_bytes(cq))
    # entry 10 of T/0: T/1's last message
    data[200:220] = np.array([(last_of_1.physical_offset, last_of_1.size, 0)], dtype=">i8,>i4,>i8").tobytes()
    files.write_bytes(str(cq), bytes(data))
    with segstore.open(store, format="rocketmq") as reader:
        assert reader.offset_range("T", 0) == (0, 11)
        assert any("expected the entry of the message" in p.message for p in reader.verify())
    if abort:
        (store / "abort").touch()
    with segstore.open(store, format="rocketmq", mode="a", **SMALL_INDEX) as writer:
        assert ("consumequeue T/0: dropped 1 stale entries from queue offset 10: they point into the "
                "commitlog walked at no message of this queue") in writer.recovery_lines
        assert writer.offset_range("T", 0) == (0, 10) and writer.offset_range("T", 1) == (0, 10)
    with segstore.open(store, format="rocketmq") as reader:
        assert reader.verify() == []
        assert [m.offset for m in reader.read("T", 0)] == list(range(10))


@pytest.mark.parametrize("abort", [False, True])
def test_recovery_cuts_the_index_at_an_entry_with_a_negative_time_diff(tmp_path, abort):
    """A torn IndexFile entry whose time diff reads negative: 4.9.7 ``IndexFile.putKey`` never writes one
    (it clamps to [0, Integer.MAX_VALUE]) and ``selectPhyOffset`` stops its chain walk there, hiding the
    older keys of that slot.  After a crash the broker rebuilds the file (``IndexService.load(false)``
    drops it; the oracle's ``queryMessage`` found every key); segstore's recovery kept the entry, its
    verify then reported it, and a key behind it stayed unfound.  Recovery now cuts the index there
    (``recovery._first_bad_entry``) and puts the rest again."""
    store = tmp_path / "store"
    config = {**SMALL_INDEX, "maxIndexNum": 64}
    with segstore.open(store, format="rocketmq", mode="a", **config) as writer:
        for i in range(4):
            writer.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": [f"k{i}", "same"]})
        path = writer.index.files[-1].path
        third = writer.find("T", "k2")[0].physical_offset
    data = bytearray(files.read_bytes(path))
    torn = 40 + 16 * 4 + 6 * 20          # header, 16 slots, entry 6 (the third message's "same")
    assert int.from_bytes(data[torn + 4:torn + 12], "big") == third
    data[torn + 12:torn + 16] = (-1).to_bytes(4, "big", signed=True)
    files.write_bytes(path, bytes(data))
    with segstore.open(store, format="rocketmq") as reader:
        assert [m.offset for m in reader.find("T", "same")] == [3]     # the chain stops at entry 6
    if abort:
        (store / "abort").touch()
    with segstore.open(store, format="rocketmq", mode="a", **config) as writer:
        assert any("index entry 6 does not match the commitlog" in line for line in writer.recovery_lines)
    with segstore.open(store, format="rocketmq") as reader:
        assert reader.verify() == []
        assert sorted(m.offset for m in reader.find("T", "same")) == [0, 1, 2, 3]


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12)), max_size=60), st.booleans())
def test_walked_groups_split_by_comparisons_as_by_the_sort(pairs, one_topic):
    """``Walked.groups``: a one-topic batch over a few queue ids is split by a comparison per queue; the
    same runs, in the same (topic, queue) order, as the stable sort of every other batch
    (:func:`recovery.group_order`)."""
    if one_topic:
        pairs = [(1, q % rec.FEW_QUEUES + 3) for _, q in pairs]
    n = len(pairs)
    walked = rec.Walked.empty()
    walked.topic = np.array([t for t, _ in pairs], np.int32)
    walked.queue_id = np.array([q for _, q in pairs], np.int32)
    order, bounds = rec.group_order(walked.topic, walked.queue_id)
    expected = [((int(walked.topic[r[0]]), int(walked.queue_id[r[0]])), r.tolist())
                for r in np.split(order, bounds) if len(r)]
    got = walked.groups()
    assert [(key, run.tolist()) for key, run in got.items()] == expected
    assert sum(len(run) for run in got.values()) == n


needs_c = pytest.mark.skipif(rec.columnar._speedups is None, reason="segstore_rocketmq._speedups not built")


@needs_c
@given(st.lists(st.lists(st.integers(-2**31, 2**31 - 1), max_size=3), min_size=1, max_size=12), st.data())
def test_c_index_run_confirmed_equals_the_numpy_reference(keys, data):
    """``Walked.confirms_index_run`` (``index_run_confirmed``, one pass in C) finds what its numpy reference
    finds: true for a run of the messages' entries in put order from the first entry's message on, with
    sane links (prev from 0 to below the entry's own number, time diff >= 0); false once a hash, an
    offset, a link or a time diff is off, the run goes past the messages' entries, or it starts elsewhere."""
    from segstore.indexes.keyhash import ENTRY_DTYPE

    walked = rec.Walked.empty()
    walked.phy = np.cumsum([100 + 7 * i for i in range(len(keys))]).astype(np.int64)
    walked.key_offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys])]).astype(np.int64)
    walked.key_hashes = np.array([h for k in keys for h in k], np.int64)
    owners = np.repeat(walked.phy, [len(k) for k in keys])
    total = len(walked.key_hashes)
    start = data.draw(st.integers(0, total))
    stop = data.draw(st.integers(start, total))
    lo = data.draw(st.integers(0, 50))
    entries = np.zeros(stop - start, ENTRY_DTYPE)
    entries["hash"] = walked.key_hashes[start:stop]
    entries["phy_offset"] = owners[start:stop]
    entries["time_diff"] = [data.draw(st.integers(0, 9)) for _ in range(len(entries))]
    entries["prev"] = [data.draw(st.integers(0, lo + j)) for j in range(len(entries))]
    # undamaged, a run from a message's first entry is confirmed (one from inside a message compares
    # with the entries from that message's first on: mostly not)
    whole = len(entries) > 0 and start in walked.key_offsets.tolist()
    for _ in range(data.draw(st.integers(0, 2))):
        if not len(entries):
            break
        j = data.draw(st.integers(0, len(entries) - 1))
        field, value = data.draw(st.sampled_from([("hash", 1), ("phy_offset", 1), ("phy_offset", -100),
                                                  ("time_diff", -1), ("prev", -1), ("prev", lo + j + 1)]))
        held = int(entries[field][j])
        entries[field][j] = value if field in ("time_diff", "prev") else held ^ 1 if field == "hash" \
            else held + value
        whole = False
    c = walked.confirms_index_run(entries, lo)
    assert c == walked._confirms_index_run_py(entries, lo)
    if whole:
        assert c


@needs_c
@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**31 - 1),
                          st.integers(-2**63, 2**63 - 1)), min_size=1, max_size=12), st.data())
def test_c_queue_run_confirmed_equals_the_numpy_reference(messages, data):
    """``Walked.confirms_queue_run`` (``queue_run_confirmed``, one pass in C) finds what its numpy reference
    finds: true where each consume-queue entry is its message's offset, size and tags code (no extension
    address: above ``consumequeue_ext.MAX_ADDR``), false once any field of any entry differs."""
    walked = rec.Walked.empty()
    walked.phy = np.array([m[0] for m in messages], np.int64)
    walked.size = np.array([m[1] for m in messages], np.int32)
    walked.tags_code = np.array([m[2] for m in messages], np.int64)
    mine = np.array(data.draw(st.lists(st.integers(0, len(messages) - 1), max_size=10)), np.intp)
    entries = np.zeros(len(mine), rec.CQ_DTYPE)
    entries["offset"], entries["size"], entries["tags_code"] = walked.phy[mine], walked.size[mine], \
        walked.tags_code[mine]
    expected = bool((walked.tags_code[mine] > rec.EXT_MAX_ADDR).all())
    for _ in range(data.draw(st.integers(0, 2))):
        if not len(entries):
            break
        j = data.draw(st.integers(0, len(entries) - 1))
        field = data.draw(st.sampled_from(["offset", "size", "tags_code"]))
        entries[field][j] = int(entries[field][j]) ^ data.draw(st.integers(1, 2**30))
        expected = False
    got = walked.confirms_queue_run(entries, mine)
    assert got == walked._confirms_queue_run_py(entries, mine)
    if expected:
        assert got
    past = np.array([len(messages)], np.intp)     # a row past the columns
    with pytest.raises(ValueError):
        rec.columnar._speedups.queue_run_confirmed(np.zeros(1, rec.CQ_DTYPE), past, walked.phy, walked.size,
                                                   walked.tags_code, rec.EXT_MAX_ADDR)
