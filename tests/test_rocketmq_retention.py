"""RocketMQ retention, rule by rule against the 4.9.7 broker's clean-up services.

Sources (apache/rocketmq rocketmq-all-4.9.7, store/src/main/java/org/apache/rocketmq/store/):
- DefaultMessageStore.java: CleanCommitLogService.deleteExpiredFiles / isTimeToDelete / isSpaceToDelete /
  executeDeleteFilesManually; CleanConsumeQueueService.deleteExpiredFiles; recoverTopicQueueTable
- MappedFileQueue.java: deleteExpiredFileByTime (never the last file, DELETE_FILES_BATCH_MAX = 10),
  deleteExpiredFileByOffset (the last 20-byte unit of a consume-queue file)
- ConsumeQueue.java: deleteExpiredFile, correctMinOffset
- index/IndexService.java: deleteExpiredFile (endPhyOffset below the commitlog's first offset)
- config/MessageStoreConfig.java: fileReservedTime 72, deleteWhen "04", diskMaxUsedSpaceRatio 75 (10..95),
  cleanFileForciblyEnable true; common UtilAll.isItTimeToDo, getDiskPartitionSpaceUsedPercent
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import retention
from segstore_rocketmq.checkpoint import check as check_checkpoint
from segstore_rocketmq.consumequeue import CQ_DTYPE, ConsumeQueue
from segstore_rocketmq.retention import HOUR_MS, plan_commitlog, used_ratio
from segstore_rocketmq.store import RocketMQStore

from segstore.cli import main
from segstore.errors import ConfigError

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 64,
         "maxIndexNum": 64}
T0 = 1_700_000_000_000


def low_disk(freed: int) -> float:  # a disk far from full: no disk trigger
    return 0.30


def _build(tmp_path: Path) -> Path:
    """A store of 2 topics x 2 queues over ~9 commitlog files; file i last modified at T0 + i hours."""
    path = tmp_path / "s"
    with RocketMQStore(str(path), "a", SMALL, clock=lambda: T0) as store:
        for i in range(240):
            store.append_batch([{"topic": f"t{i % 2}", "queue_id": (i // 2) % 2,
                                 "body": b"m%04d" % i + b"x" * 80, "keys": [f"k{i}"],
                                 "tags": "a" if i % 3 else "b"}])
    logs = sorted((path / "commitlog").iterdir())
    for i, log in enumerate(logs):
        os.utime(log, ns=((T0 + i * HOUR_MS) * 1_000_000,) * 2)
    return path


def _messages(store: RocketMQStore) -> dict[tuple[str, int], list[tuple[int, int, bytes]]]:
    """Every queue's readable messages as ``(queue offset, physical offset, body)``."""
    out = {}
    for topic in store.topics():
        for q in store.partitions(topic):
            start, _ = store.offset_range(topic, q)
            out[(topic, q)] = [(m.queue_offset, m.physical_offset, m.body)
                               for m in store.read(topic, q, start)]
    return out


def _open(path: Path, **config) -> RocketMQStore:
    return RocketMQStore(str(path), "a", {**SMALL, **config}, clock=lambda: T0)


def test_expired_commitlog_files_then_queues_and_index_files(tmp_path: Path) -> None:
    path = _build(tmp_path)
    logs = sorted((path / "commitlog").iterdir())
    assert len(logs) >= 6
    with RocketMQStore(str(path), "r", SMALL) as store:
        before = _messages(store)
        queue_files = {key: [(s.file.path, int(s.all_slots()[-1]["offset"])) for s in cq.segment_files()]
                       for key, cq in store.queues.items()}
        index_files = [(f.path, f.header.end_phy_offset) for f in store.index.files]
    assert len(index_files) > 2
    checkpoint = (path / "checkpoint").read_bytes()
    # fileReservedTime=2: files modified 3+ hours before now are expired (now >= lastModified + 2 h)
    now = T0 + 5 * HOUR_MS
    with _open(path, fileReservedTime=2) as store:
        result = store.retention(now_ms=now, disk_ratio=low_disk)[0]
    assert result["triggers"] == ["manual"]
    assert result["commitlog_files"] == [str(p) for p in logs[:4]]  # modified at T0 .. T0 + 3 h
    new_min = int(logs[4].name)
    assert result["min_offset"] == new_min
    assert sorted((path / "commitlog").iterdir()) == logs[4:]
    # ConsumeQueue.deleteExpiredFile: files but the last, from the oldest, whose last unit is below the min
    want_cq = []
    for files_ in queue_files.values():
        for i, (name, last) in enumerate(files_[:-1]):
            if last >= new_min:
                break
            want_cq.append(name)
            assert i < len(files_) - 1
    assert sorted(result["consume_queue_files"]) == sorted(want_cq) and want_cq
    assert not any(os.path.exists(p) for p in want_cq)
    # IndexService.deleteExpiredFile: files but the last whose endPhyOffset is below the min
    want_index = []
    for name, end in index_files[:-1]:
        if end >= new_min:
            break
        want_index.append(name)
    assert result["index_files"] == want_index and want_index
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []
        after = _messages(store)
        # correctMinOffset: each queue starts at its first entry at or past the commitlog's first offset
        assert after == {key: [m for m in msgs if m[1] >= new_min] for key, msgs in before.items()}
        assert all(store.offset_range(*key)[0] == rows[0][0] for key, rows in after.items() if rows)
        hits = store.query_by_key("t0", "k238")
        assert [m.body[:5] for m in hits] == [b"m0238"]
        assert store.query_by_key("t0", "k0") == []
    assert check_checkpoint((path / "checkpoint").read_bytes(), path=str(path / "checkpoint")) == []
    assert (path / "checkpoint").read_bytes()[:24] == checkpoint[:24]
    with _open(path) as store:  # reopened for append: recovery keeps everything left
        assert store.recover() == [] or all("cut" not in line for line in store.recover())
        store.append_batch([{"topic": "t0", "queue_id": 0, "body": b"after"}])
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []
        assert _messages(store)[("t0", 0)][:-1] == after[("t0", 0)]


def test_the_last_commitlog_file_is_never_deleted(tmp_path: Path) -> None:
    """deleteExpiredFileByTime walks ``mfs.length - 1`` files: the active one stays, however old."""
    path = _build(tmp_path)
    logs = sorted((path / "commitlog").iterdir())
    with _open(path, fileReservedTime=0) as store:
        result = store.retention(now_ms=T0 + 1000 * HOUR_MS, disk_ratio=low_disk)[0]
    assert result["commitlog_files"] == [str(p) for p in logs[:-1]]
    assert sorted((path / "commitlog").iterdir()) == logs[-1:]
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []


def test_delete_when_is_honoured_when_given(tmp_path: Path) -> None:
    """isTimeToDelete: only at the listed hours (local time), unless the disk is full."""
    path = _build(tmp_path)
    now = T0 + 5 * HOUR_MS
    hour = time.localtime(now / 1000).tm_hour
    other = (hour + 1) % 24
    with _open(path, fileReservedTime=2, deleteWhen=f"{other}") as store:
        result = store.retention(now_ms=now, disk_ratio=low_disk)[0]
        assert result["commitlog_files"] == [] and result["runs"] == 0
        # isSpaceToDelete: the disk over diskMaxUsedSpaceRatio also starts a run (expired files only)
        result = store.retention(now_ms=now, dry_run=True, disk_ratio=lambda freed: 0.80)[0]
        assert len(result["commitlog_files"]) == 4 and result["triggers"] == ["diskMaxUsedSpaceRatio"]
    with _open(path, fileReservedTime=2, deleteWhen=f"{other};{hour}") as store:
        result = store.retention(now_ms=now, disk_ratio=low_disk)[0]
    assert len(result["commitlog_files"]) == 4 and result["triggers"] == ["deleteWhen"]


def test_a_nearly_full_disk_cleans_at_once(tmp_path: Path) -> None:
    """cleanImmediately (cleanFileForciblyEnable and over 85 % used): files go whatever their age, while
    the disk stays that full; without cleanFileForciblyEnable only expired files go."""
    path = _build(tmp_path)
    logs = sorted((path / "commitlog").iterdir())
    with _open(path, fileReservedTime=72, cleanFileForciblyEnable="false") as store:
        assert store.retention(now_ms=T0, dry_run=True, disk_ratio=lambda f: 0.9)[0]["commitlog_files"] == []
    with _open(path, fileReservedTime=72) as store:
        result = store.retention(now_ms=T0, disk_ratio=lambda freed: 0.9)[0]
    assert result["commitlog_files"] == [str(p) for p in logs[:-1]]
    assert "cleanFileForcibly" in result["triggers"]
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []
    # the ratio is measured once per run (of at most 10 files): 25 young files, the disk under 85 %
    # once 10 are freed, so the second run cleans nothing more (none has expired)
    info = [(i * 4096, T0, 4096) for i in range(25)]
    deleted, triggers, runs = plan_commitlog(
        info, now_ms=T0, file_reserved_time=72, delete_when="99", disk_max_used_space_ratio=75,
        clean_forcibly=True, disk_ratio=lambda freed: 0.9 if freed < 10 * 4096 else 0.5)
    assert (deleted, runs) == (10, 1) and triggers == ["diskMaxUsedSpaceRatio", "cleanFileForcibly"]


@settings(max_examples=100, deadline=None)
@given(ages=st.lists(st.integers(0, 100), min_size=1, max_size=250), reserved=st.integers(0, 100),
       manual=st.booleans())
def test_commitlog_plan_follows_deleteExpiredFileByTime(ages, reserved, manual) -> None:
    """Oldest first, stop at the first file kept, never the last; 10 per run; a manual delete is 20 runs."""
    now = T0 + 1000 * HOUR_MS
    info = [(i * 4096, now - age * HOUR_MS, 4096) for i, age in enumerate(ages)]
    deleted, triggers, runs = plan_commitlog(
        info, now_ms=now, file_reserved_time=reserved, delete_when="" if manual else "99",
        disk_max_used_space_ratio=75, clean_forcibly=True, disk_ratio=lambda freed: 0.3)
    if not manual:
        assert (deleted, runs) == (0, 0)
        return
    expired = 0
    for age in ages[:-1]:
        if age < reserved:
            break
        expired += 1
    expired = min(expired, 20 * 10)  # a manual delete is 20 runs of at most 10 files
    assert deleted == expired
    assert runs == -(-expired // 10) and triggers == ["manual"]


def test_used_ratio_rounds_up_like_utilall() -> None:
    """getDiskPartitionSpaceUsedPercent: used * 100 / (used + usable), rounded up to a whole percent."""
    assert used_ratio(1000, 400, 300) == 0.67  # 600 / 900 = 66.7 %
    assert used_ratio(1000, 500, 500) == 0.5
    assert used_ratio(0, 0, 0) == -1.0


def test_dry_run_changes_nothing_and_cli(tmp_path: Path, capsys) -> None:
    path = _build(tmp_path)
    listing = sorted(str(p) for p in path.rglob("*"))
    common = [str(path), "--config", "fileReservedTime=2", "--config", "cleanFileForciblyEnable=false",
              "--config", "diskMaxUsedSpaceRatio=95", "--now-ms", str(T0 + 5 * HOUR_MS), "--json"]
    assert main(["retention", *common, "--dry-run"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] and len(planned["commitlog_files"]) == 4
    assert sorted(str(p) for p in path.rglob("*")) == listing
    assert main(["retention", *common]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["commitlog_files"] == planned["commitlog_files"]
    assert done["consume_queue_files"] == planned["consume_queue_files"]
    assert done["index_files"] == planned["index_files"]
    assert main(["verify", str(path), "-q"]) == 0
    assert main(["retention", str(path), "--config", "deleteWhen=x"]) == 2
    assert main(["retention", str(path), "--topic", "t0"]) == 2


def test_crash_after_the_commitlog_files_completes_on_open_and_next_run(tmp_path: Path, monkeypatch) -> None:
    """A crash between the commitlog and the queue clean-up: queues start past the deleted files on open
    (recoverTopicQueueTable -> correctMinOffset) and the next run deletes their expired files."""
    path = _build(tmp_path)
    with RocketMQStore(str(path), "r", SMALL) as store:
        before = _messages(store)

    def crash(store, phy_min, dry_run):
        raise KeyboardInterrupt

    monkeypatch.setattr(retention, "_clean_queues", crash)
    store = _open(path, fileReservedTime=2)
    with pytest.raises(KeyboardInterrupt):
        store.retention(now_ms=T0 + 5 * HOUR_MS, disk_ratio=low_disk)
    store.abandon()
    monkeypatch.undo()
    new_min = int(sorted((path / "commitlog").iterdir())[0].name)
    with _open(path):  # the restart: recovery after the crash
        pass
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []
        assert _messages(store) == {k: [m for m in v if m[1] >= new_min] for k, v in before.items()}
    with _open(path, fileReservedTime=2) as store:
        result = store.retention(now_ms=T0 + 5 * HOUR_MS, disk_ratio=low_disk)[0]
    assert result["commitlog_files"] == [] and result["consume_queue_files"] and result["index_files"]


def test_retention_config_names_are_checked() -> None:
    from segstore_rocketmq.config import BrokerConfig

    cfg = BrokerConfig.from_mapping({"fileReservedTime": "48", "deleteWhen": "04;16",
                                     "diskMaxUsedSpaceRatio": "88", "cleanFileForciblyEnable": "false"})
    assert (cfg.fileReservedTime, cfg.deleteWhen, cfg.diskMaxUsedSpaceRatio) == (48, "04;16", 88)
    for bad in ({"deleteWhen": "4am"}, {"fileReservedTime": "-1"}, {"deleteWhen": "4;x"}):
        with pytest.raises(ConfigError):
            BrokerConfig.from_mapping(bad)
    # UtilAll.isItTimeToDo parses each part with Integer.parseInt: 24 and 99 are hours that never come
    assert BrokerConfig.from_mapping({"deleteWhen": "24"}).deleteWhen == "24"


@pytest.mark.parametrize("name", ["fileReservedTime", "diskMaxUsedSpaceRatio"])
def test_retention_numbers_are_java_ints(name: str) -> None:
    """4.9.7 ``MessageStoreConfig``: ``int fileReservedTime``, ``int diskMaxUsedSpaceRatio``;
    ``MixAll.properties2Object`` parses them with ``Integer.parseInt`` and, where that throws, ignores
    the line (the broker keeps its default, 72 h / 75 %): a value past an int is refused, not obeyed."""
    from segstore_rocketmq.config import BrokerConfig

    assert getattr(BrokerConfig.from_mapping({name: str(2**31 - 1)}), name) == 2**31 - 1
    for bad in (str(2**31), "99999999999", "1_000"):
        with pytest.raises(ConfigError):
            BrokerConfig.from_mapping({name: bad})


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 500), min_size=0, max_size=45), cut=st.floats(0, 1.2))
def test_correct_min_offset_matches_a_scan(tmp_path_factory, sizes, cut) -> None:
    """ConsumeQueue.correctMinOffset: the queue starts at its first entry pointing at or past the
    commitlog's first offset (files of 8 entries; entries wholly expired files are passed over)."""
    directory = tmp_path_factory.mktemp("cq") / "t" / "0"
    phys = np.cumsum([0, *sizes[:-1]]) if sizes else np.zeros(0, dtype=np.int64)
    rows = np.zeros(len(sizes), dtype=CQ_DTYPE)
    rows["offset"], rows["size"] = phys, sizes
    cq = ConsumeQueue(str(directory), "t", 0, 8 * CQ_DTYPE.itemsize, writable=True)
    cq.append_array(rows)
    phy_min = int(cut * (int(phys[-1]) + 1)) if sizes else 0
    cq.correct_min_offset(phy_min)
    want = next((i for i, p in enumerate(phys.tolist()) if p >= phy_min), len(sizes))
    assert cq.min_offset == (want if sizes else 0)
    cq.close()


def test_retention_in_the_session_that_wrote_the_files(tmp_path: Path) -> None:
    """Files written and rolled in this session go cleanly (nothing left to flush in them); the store
    keeps appending and closes clean."""
    path = tmp_path / "s"
    with RocketMQStore(str(path), "a", {**SMALL, "fileReservedTime": 0}, clock=lambda: T0) as store:
        for i in range(120):
            store.append_batch([{"topic": "t", "queue_id": 0, "body": b"x" * 90 + b"%03d" % i}])
        files_written = len(store.commitlog.log.segments)
        # the files' mtimes are the wall clock's: an hour later every file but the active one has expired
        result = store.retention(now_ms=int(time.time() * 1000) + HOUR_MS, disk_ratio=low_disk)[0]
        assert len(result["commitlog_files"]) == files_written - 1 > 0
        assert result["commitlog_files"] and not any(os.path.exists(p) for p in result["commitlog_files"])
        store.append_batch([{"topic": "t", "queue_id": 0, "body": b"after"}])
        store.flush()
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []
        start, end = store.offset_range("t", 0)
        bodies = [m.body for m in store.read("t", 0, start)]
    assert bodies[-1] == b"after" and len(bodies) == end - start and start > 0


@pytest.mark.parametrize("dry_run", [False, True])
def test_index_files_expire_with_message_index_enable_off(tmp_path: Path, dry_run: bool) -> None:
    """4.9.7 ``DefaultMessageStore``: the ``IndexService`` is built and loaded whatever
    ``messageIndexEnable`` says (only ``CommitLogDispatcherBuildIndex`` asks it), and
    ``CleanConsumeQueueService.deleteExpiredFiles`` always calls ``indexService.deleteExpiredFile``:
    index files written while the index was on expire with the commitlog under the broker, so here too."""
    path = _build(tmp_path)
    with RocketMQStore(str(path), "r", SMALL) as store:
        index_files = [(f.path, f.header.end_phy_offset) for f in store.index.files]
    now = T0 + 5 * HOUR_MS
    opened = RocketMQStore(str(path), "r" if dry_run else "a",
                           {**SMALL, "fileReservedTime": 2, "messageIndexEnable": False}, clock=lambda: T0)
    with opened as store:
        result = store.retention(now_ms=now, disk_ratio=low_disk, dry_run=dry_run)[0]
    new_min = result["min_offset"]
    want = []
    for name, end in index_files[:-1]:
        if end >= new_min:
            break
        want.append(name)
    assert want and result["index_files"] == want
    left = sorted(str(p) for p in (path / "index").iterdir())
    assert left == sorted(name for name, _ in index_files if dry_run or name not in want)
    with RocketMQStore(str(path), "r", SMALL) as store:
        assert store.verify() == []
