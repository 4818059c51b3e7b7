"""Extra indexes under retention, and layout options too small to hold an entry.

Retention moves a stream's log start: lookups answer from it as the store does
without the index, ``index verify`` passes over the entries below it, and the
next writer (the retention run itself, an open for append) deletes the index
files that index nothing from it on, as the brokers delete a segment's indexes
with it.  An option that leaves a file no room for an entry is refused before
any file is made (filling would otherwise open file after file, forever).
"""

from __future__ import annotations

import io
import itertools
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import segstore
from segstore import cli
from segstore.errors import ConfigError
from segstore.indexes.keyhash import IndexService
from segstore.indexes.timeindex import TIME_ENTRY
from segstore.layouts.base import Stream

ROOT = Path(__file__).resolve().parent.parent
BASE_MS = 1_700_000_000_000
LATER_MS = BASE_MS + 10**12          # every file is older than any reserved time then
ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": 2048, "mappedFileSizeConsumeQueue": 20 * 8}
KAFKA_CONFIG = {"segment.bytes": 1500}
OPTIONS = {"layout.interval.bytes": 300, "layout.index.bytes": 48, "layout.queue.file.bytes": 20 * 8,
           "key.index.slots": 4, "key.index.entries": 12}


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli.main(list(argv), out), out.getvalue()


def _rocketmq(path: Path, indexes: list[str], seed: int, count: int = 60) -> None:
    """``count`` messages over queues A/0 and A/1, store times wandering back and forth."""
    rnd = random.Random(seed)
    clock = BASE_MS
    with segstore.open(path, format="rocketmq", mode="a", indexes=indexes, **ROCKETMQ_CONFIG,
                       **OPTIONS) as store:
        for _ in range(count):
            clock += rnd.choice([0, 1, 5, -3, 20, -15])
            store.append_batch([{"topic": "A", "queue_id": rnd.randint(0, 1), "keys": ["k"],
                                 "body": bytes(rnd.randint(0, 150)), "store_timestamp": clock}])


def _rocketmq_retention(path: Path) -> None:
    """The admin's manual delete: every commitlog file but the last, and the queue files below it."""
    rc, out = _run("retention", str(path), "--config", "fileReservedTime=0", "--now-ms", str(LATER_MS))
    assert rc == 0 and "deleted" in out, out


def _stored(store, stream: Stream) -> list[tuple[int, int]]:
    """``(offset, time)`` of every record of the stream from its log start: the oracle."""
    start, _ = store.offset_range(stream.topic, stream.partition)
    time_of = (lambda r: r.store_timestamp) if store.format == "rocketmq" else (lambda r: r.timestamp)
    offset_of = (lambda r: r.queue_offset) if store.format == "rocketmq" else (lambda r: r.offset)
    return [(offset_of(r), time_of(r)) for r in store.read(stream.topic, stream.partition, start)]


def _below_start(bases: list[int], start: int) -> list[int]:
    """The sparse files (by base offset) that index nothing at or past ``start``: the next one's base
    is at or below it (the last file is never deleted, by the brokers' rule)."""
    return [base for base, after in itertools.pairwise(bases) if after <= start]


def _sparse_bases(directory: Path) -> list[int]:
    return sorted(int(p.name.split("-")[0].split(".")[0]) for p in directory.iterdir()
                  if p.name != "state.json")


def test_rocketmq_time_index_answers_from_the_queue_start_after_retention(tmp_path: Path) -> None:
    """The first messages left after retention are found: message 30, the queue's first, is stored at
    +30 and is the answer for any earlier time.  The broker's ``ConsumeQueue.getOffsetInQueueByTime``
    (rocketmq-all-4.9.7) searches from ``minLogicOffset`` and passes over units below the commitlog's
    min offset: the store's own answer without the index is that."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", indexes=["time"], **ROCKETMQ_CONFIG,
                       **{"layout.interval.bytes": 1000}) as store:
        for i in range(40):
            store.append_batch([{"topic": "A", "queue_id": 0, "body": bytes(100), "keys": ["k"],
                                 "store_timestamp": BASE_MS + i}])
    _rocketmq_retention(path)
    with segstore.open(path, format="rocketmq") as store:
        start, end = store.offset_range("A", 0)
        assert 0 < start < end and store.indexes is not None and "time" in store.indexes
        answers = {t: store.offset_for_time("A", 0, t) for t in (0, BASE_MS, BASE_MS + start, BASE_MS + end)}
    with segstore.open(path, format="rocketmq", indexes=[]) as plain:
        assert answers == {t: plain.offset_for_time("A", 0, t) for t in answers}
    assert answers == {0: start, BASE_MS: start, BASE_MS + start: start, BASE_MS + end: None}
    rc, out = _run("query", str(path), "--topic", "A", "--queue", "0", "--timestamp", "0")
    assert rc == 0 and f"offset {start} is the first" in out


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_rocketmq_sparse_indexes_after_retention_answer_like_a_scan(tmp_path: Path, seed: int) -> None:
    """Store times going backwards too: every target's answer is the first record from the queue start
    stored at or after it, with the index as without; ``index verify`` finds nothing."""
    path = tmp_path / "store"
    _rocketmq(path, ["offset", "time"], seed)
    _rocketmq_retention(path)
    assert _run("index", "verify", str(path), "--index", "offset", "--index", "time") == (0, "")
    with segstore.open(path, format="rocketmq") as store:
        assert any(store.offset_range("A", queue)[0] > 0 for queue in store.partitions("A"))
        for queue in store.partitions("A"):
            rows = _stored(store, Stream("A", queue))
            stamps = [t for _, t in rows]
            for target in sorted({0, *stamps, *(t + 1 for t in stamps), *(t - 1 for t in stamps)}):
                expected = next((o for o, t in rows if t >= target), None)
                assert store.indexes.offset_for_time("A", queue, target) == expected, (queue, target)
            for offset, _ in rows:
                assert store.indexes.read_at("A", queue, offset).queue_offset == offset


def test_rocketmq_files_below_the_queue_start_are_out_of_range_then_deleted(tmp_path: Path) -> None:
    """Retention run without the extra indexes attached leaves their files below the queue start: a
    reader's ``index verify`` passes over them (their entries name deleted messages), and the next
    writer deletes them, keeping the one the start cuts."""
    path = tmp_path / "store"
    _rocketmq(path, ["offset", "time"], 5, count=80)
    with segstore.open(path, format="rocketmq", mode="a", indexes=[], **ROCKETMQ_CONFIG) as store:
        store.retention(now_ms=LATER_MS, fileReservedTime=0)
    with segstore.open(path, format="rocketmq", indexes=[]) as store:
        starts = {q: store.offset_range("A", q)[0] for q in store.partitions("A")}

    def below() -> list[tuple[str, int, int]]:
        return [(name, q, b) for name in ("offset", "time") for q, start in starts.items()
                for b in _below_start(_sparse_bases(path / ".segstore" / name / "A" / str(q)), start)]

    left = below()
    assert {name for name, _, _ in left} == {"offset", "time"}
    assert _run("index", "verify", str(path), "--index", "offset", "--index", "time") == (0, "")
    with segstore.open(path, format="rocketmq", mode="a", **ROCKETMQ_CONFIG) as store:
        assert sorted(store.indexes.layouts) == ["offset", "time"]
    assert below() == []
    assert _run("index", "verify", str(path), "--index", "offset", "--index", "time") == (0, "")


def test_rocketmq_retention_deletes_the_extra_files_below_the_new_start(tmp_path: Path) -> None:
    """The retention run holds the extra indexes (found on disk) open for writing: its close deletes
    what the run left below the queue starts."""
    path = tmp_path / "store"
    _rocketmq(path, ["offset", "time"], 6, count=80)
    _rocketmq_retention(path)
    with segstore.open(path, format="rocketmq", indexes=[]) as store:
        starts = {q: store.offset_range("A", q)[0] for q in store.partitions("A")}
    assert all(start > 0 for start in starts.values())
    for name in ("offset", "time"):
        for queue, start in starts.items():
            assert _below_start(_sparse_bases(path / ".segstore" / name / "A" / str(queue)), start) == []


def test_verify_checks_the_entries_past_the_start_of_a_cut_time_file(tmp_path: Path) -> None:
    """In a file the queue start cuts, an entry naming the wrong message is still reported."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", indexes=["time"], **ROCKETMQ_CONFIG,
                       **{"layout.interval.bytes": 1000}) as store:
        for i in range(40):
            store.append_batch([{"topic": "A", "queue_id": 0, "body": bytes(100),
                                 "store_timestamp": BASE_MS + i}])
    _rocketmq_retention(path)
    with segstore.open(path, format="rocketmq", indexes=[]) as store:
        start = store.offset_range("A", 0)[0]
    directory = path / ".segstore" / "time" / "A" / "0"
    base = max(b for b in _sparse_bases(directory) if b < start)
    target = directory / f"{base:020d}.timeindex"
    entries = np.fromfile(target, dtype=TIME_ENTRY)
    slot = int(np.flatnonzero(base + entries["relative_offset"].astype(np.int64) >= start)[0])
    rel = entries["relative_offset"]
    assert slot + 1 < len(entries) and rel[slot + 1] > rel[slot] + 1
    assert _run("index", "verify", str(path), "--index", "time") == (0, "")
    entries["relative_offset"][slot] += 1        # names the next message: still in order, wrong
    entries.tofile(target)
    rc, out = _run("index", "verify", str(path), "--index", "time")
    assert rc == 1 and f"{target}:{slot * TIME_ENTRY.itemsize}: expected entry" in out


def _kafka(path: Path, count: int, first: int = 0) -> None:
    rnd = random.Random(first)
    with segstore.open(path, format="kafka", mode="a", indexes=["queue", "key"], **KAFKA_CONFIG,
                       **OPTIONS) as store:
        for i in range(first, first + count):
            store.append_batch([{"topic": "T", "partition": 0, "value": bytes(rnd.randint(0, 120)),
                                 "key": f"k{i % 4}".encode(), "timestamp": BASE_MS + i}])


def _kafka_leftovers(path: Path, start: int) -> list[str]:
    """Extra queue and key files indexing nothing at or past ``start`` (the last one aside)."""
    queue_dir = path / ".segstore" / "queue" / "consumequeue"
    cq_bases = sorted(int(p.name) for p in queue_dir.iterdir())
    left = [str(b) for b in cq_bases[:-1] if b + OPTIONS["layout.queue.file.bytes"] <= start * 20]
    service = IndexService(str(path / ".segstore" / "key"), OPTIONS["key.index.slots"],
                           OPTIONS["key.index.entries"])
    assert service.load() == []
    try:
        left += [f.name for f in service.files[:-1] if f.header.end_phy_offset < start]
    finally:
        service.close()
    return left


@pytest.mark.parametrize("how", ["retention", "delete-records", "append"])
def test_kafka_extra_files_below_the_log_start_are_deleted(tmp_path: Path, how: str) -> None:
    """The queue and key files of deleted segments go as Kafka deletes a segment's own indexes with it
    (3.8.0 ``LogSegment.deleteIfExists``: log, offset index, time index, transaction index), so an
    index under retention stops growing; lookups and ``index verify`` stay right."""
    path = tmp_path / "T-0"
    _kafka(path, 120)
    if how == "retention":
        rc, _ = _run("retention", str(path), "--config", "retention.bytes=3000")
    elif how == "delete-records":
        rc, _ = _run("delete-records", str(path), "--before", "90")
    else:   # retention by a writer without the extra indexes; the next one with them cleans up
        with segstore.open(path, format="kafka", mode="a", indexes=[], **KAFKA_CONFIG,
                           **{"retention.bytes": 3000}) as store:
            store.retention()
        rc = 0
    assert rc == 0
    with segstore.open(path, format="kafka", indexes=[]) as store:
        start, end = store.offset_range("T", 0)
    assert start >= 60
    if how == "append":
        assert _kafka_leftovers(path, start) != []
        _kafka(path, 5, first=end)
    assert _kafka_leftovers(path, start) == []
    assert _run("index", "verify", str(path), "--index", "queue", "--index", "key") == (0, "")
    with segstore.open(path, format="kafka") as store:
        rows = _stored(store, Stream("T", 0))
        assert rows[0][0] == start
        for offset, _ in rows:
            assert store.indexes.read_at("T", 0, offset).offset == offset
        for k in range(4):     # the record at offset i carries key k{i % 4}
            assert store.indexes.find_key("T", 0, f"k{k}".encode()) == [o for o, _ in rows if o % 4 == k]


BAD_OPTIONS = [("layout.index.bytes", n, ["offset", "time"]) for n in (1, 8, 12, 16, 23)] + [
    ("layout.queue.file.bytes", 30, ["queue"]), ("key.index.entries", 1, ["key"])]


@pytest.mark.parametrize(("option", "value", "names"), BAD_OPTIONS)
def test_options_leaving_a_file_no_entry_are_refused_before_any_file(tmp_path: Path, option: str, value: int,
                                                                      names: list[str]) -> None:
    fmt = "rocketmq" if "offset" in names else "kafka"
    path = tmp_path / "T-0"
    message = ({"topic": "A", "queue_id": 0, "body": b"x", "keys": ["k"]} if fmt == "rocketmq"
               else {"topic": "T", "partition": 0, "key": b"k", "value": b"v", "timestamp": 1000})
    with segstore.open(path, format=fmt, mode="a") as store:
        store.append_batch([message])
    argv = ["index", "build", str(path), *(a for n in names for a in ("--index", n)), "--option",
            f"{option}={value}"]
    assert _run(*argv)[0] == cli.EXIT_USAGE
    assert not (path / ".segstore").exists()
    fresh = tmp_path / "fresh" / "T-0"
    with pytest.raises(ConfigError, match=option):
        segstore.open(fresh, format=fmt, mode="a", indexes=names, **{option: value})
    assert not fresh.exists()


@pytest.mark.parametrize(("option", "value", "names"), [
    ("layout.index.bytes", 24, ["offset", "time"]), ("layout.queue.file.bytes", 20, ["queue"]),
    ("key.index.entries", 2, ["key"])])
def test_the_least_options_holding_an_entry_work(tmp_path: Path, option: str, value: int,
                                                 names: list[str]) -> None:
    fmt = "rocketmq" if "offset" in names else "kafka"
    topic = "A" if fmt == "rocketmq" else "T"
    path = tmp_path / "T-0"
    with segstore.open(path, format=fmt, mode="a", indexes=names, **{option: value}) as store:
        for i in range(6):
            if fmt == "rocketmq":
                store.append_batch([{"topic": "A", "queue_id": 0, "body": b"x" * 30, "keys": ["k"],
                                     "store_timestamp": 1000 + i}] * 2)
            else:
                store.append_batch([{"topic": "T", "partition": 0, "value": b"x" * 30, "key": b"k",
                                     "timestamp": 1000 + i}] * 2)
    with segstore.open(path, format=fmt) as store:
        assert store.indexes.verify() == []
        if "time" in names:
            assert store.indexes.offset_for_time(topic, 0, 1003) == 6
        if "key" in names:
            assert store.indexes.find_key(topic, 0, b"k") == list(range(12))
        else:
            found = [store.indexes.read_at(topic, 0, n) for n in range(12)]
            assert [r.offset if fmt == "kafka" else r.queue_offset for r in found] == list(range(12))


def test_rocketmq_index_files_without_an_entry_are_refused(tmp_path: Path) -> None:
    """``maxIndexNum`` 1 leaves an IndexFile no entry (its ``indexCount`` starts at 1); the broker's
    ``IndexService.putKey`` (rocketmq-all-4.9.7) would then create file after file forever."""
    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "A", "queue_id": 0, "body": b"x", "keys": ["k"]}])
    rc, _ = _run("query", str(path), "--topic", "A", "--key", "k", "--config", "maxIndexNum=1")
    assert rc == cli.EXIT_USAGE
    with pytest.raises(ConfigError, match="maxIndexNum"):
        segstore.open(tmp_path / "fresh", format="rocketmq", mode="a", maxIndexNum=1)


def test_an_index_file_taking_no_entry_stops_the_put(tmp_path: Path) -> None:
    """Whatever the geometry came from (files on disk), a put never spins on files that take nothing:
    run in a child process, so that a spin fails the test instead of hanging it."""
    code = (
        "import sys, numpy as np\n"
        "from segstore.errors import ConfigError\n"
        "from segstore.indexes.keyhash import IndexService\n"
        "s = IndexService(sys.argv[1], 4, 1, writable=True)\n"
        "try:\n"
        "    s.put_hashes(np.array([5]), np.array([0]), np.array([1]))\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "formats")]))
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "index")], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0 and "maxIndexNum" in done.stdout, done.stderr
    assert len(os.listdir(tmp_path / "index")) <= 1
