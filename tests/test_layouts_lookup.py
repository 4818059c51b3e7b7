"""Every index layout answers every lookup exactly like a brute-force scan of the log, on both formats.

Stores are generated (hypothesis) with small files, intervals and index files so
that every roll path runs: commitlog files, consume-queue files, Kafka segments,
sparse index files and IndexFiles all fill up.  Timestamps wander backwards as
well as forwards, keys collide across records, and some records carry a key only
in a named header.  The oracle is a scan of ``store.scan()``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import segstore
from segstore.layouts import LAYOUT_NAMES, IndexSet
from segstore.layouts.base import Stream

KEYS = [f"k{i}" for i in range(6)]
HEADER = "h"

ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": 8 * 1024, "mappedFileSizeConsumeQueue": 20 * 16,
                   "maxHashSlotNum": 8, "maxIndexNum": 32}   # the broker's 1:4 ratio
KAFKA_CONFIG = {"segment.bytes": 2048, "index.interval.bytes": 256, "segment.index.bytes": 64}
LAYOUT_OPTIONS = {"layout.interval.bytes": 400, "layout.index.bytes": 48, "layout.queue.file.bytes": 20 * 16,
                  "key.index.headers": HEADER, "key.index.slots": 4, "key.index.entries": 12}

message = st.fixed_dictionaries({
    "partition": st.integers(0, 2),
    "key": st.sampled_from([None, *KEYS]),
    "header": st.sampled_from([None, *KEYS]),
    "step": st.integers(-40, 100),
    "size": st.integers(0, 300),
})
batches = st.lists(st.lists(message, min_size=1, max_size=6), min_size=1, max_size=12)


def _write(path: Path, fmt: str, data: list[list[dict]], indexes: list[str] | None) -> None:
    """Append ``data`` batch by batch (Kafka: one partition directory, partition 0 only)."""
    clock = 1_700_000_000_000
    config = ROCKETMQ_CONFIG if fmt == "rocketmq" else KAFKA_CONFIG
    extra = {} if indexes is None else {"indexes": indexes, **LAYOUT_OPTIONS}
    with segstore.open(path, format=fmt, mode="a", **config, **extra) as store:
        for n, batch in enumerate(data):
            items = []
            for i, m in enumerate(batch):
                clock += m["step"]
                body = bytes([(n + i) % 251]) * m["size"]
                if fmt == "rocketmq":
                    properties = {HEADER: m["header"]} if m["header"] else {}
                    items.append({"topic": "T", "queue_id": m["partition"], "body": body,
                                  "keys": [m["key"]] if m["key"] else [], "properties": properties,
                                  "store_timestamp": clock})
                else:
                    headers = [(HEADER, m["header"].encode())] if m["header"] else []
                    items.append({"topic": "T", "partition": 0, "value": body, "timestamp": clock,
                                  "key": m["key"].encode() if m["key"] else None, "headers": headers})
            store.append_batch(items)


def _oracle(store) -> dict[Stream, list[tuple[int, int, set[bytes], object]]]:
    """Per stream: (offset, timestamp, keys, identity) of every record, by scanning the log."""
    out: dict[Stream, list] = {}
    for record in store.scan():
        if store.format == "rocketmq":
            keys = {k.encode() for k in record.keys}
            uniq = record.properties.get("UNIQ_KEY")
            if uniq:
                keys.add(uniq.encode())
            row = (record.queue_offset, record.store_timestamp, keys, record.physical_offset)
            out.setdefault(Stream(record.topic, record.queue_id), []).append(row)
        else:
            keys = {record.key} if record.key is not None else set()
            keys |= {v for k, v in record.headers if k == HEADER}
            row = (record.offset, record.timestamp, keys, record.offset)
            out.setdefault(Stream(record.topic, record.partition), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r[0])
    return out


def _identity(store, record) -> object:
    return record.physical_offset if store.format == "rocketmq" else record.offset


def check_against_scan(store, indexes: IndexSet) -> None:
    """Every layout's lookups equal the brute-force answer, for every offset, time and key."""
    oracle = _oracle(store)
    for stream, rows in oracle.items():
        start, end = store.offset_range(stream.topic, stream.partition)
        for name in ("queue", "offset"):
            layout = indexes[name]
            for offset, _, _, identity in rows:
                found = layout.read_at(stream, offset)
                assert found is not None and _identity(store, found) == identity, (name, stream, offset)
            assert layout.read_at(stream, end) is None
            assert layout.read_at(stream, start - 1) is None
        stamps = [ts for _, ts, _, _ in rows]
        targets = sorted({min(stamps) - 1, max(stamps) + 1, *stamps, *(t + 1 for t in stamps)})
        for target in targets:
            expected = next((o for o, ts, _, _ in rows if ts >= target), None)
            assert indexes["time"].offset_for_time(stream, target) == expected, (stream, target)
        for key in [k.encode() for k in KEYS] + [b"absent"]:
            expected = [o for o, _, keys, _ in rows if key in keys]
            assert indexes["key"].find_key(stream, key) == expected, (stream, key)
            assert indexes["key"].find_key(stream, key, 2) == expected[-2:]


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@settings(max_examples=12, deadline=None)
@given(data=batches)
def test_built_indexes_answer_like_a_scan(tmp_path_factory, fmt: str, data: list[list[dict]]) -> None:
    path = tmp_path_factory.mktemp(fmt) / "T-0"
    _write(path, fmt, data, indexes=None)
    with segstore.open(path, format=fmt, indexes=[]) as store:
        indexes = IndexSet(store, LAYOUT_NAMES, LAYOUT_OPTIONS, writable=True)
        try:
            indexes.build()
            assert indexes.verify() == []
            check_against_scan(store, indexes)
        finally:
            indexes.close()


def _keyed(*batches_of_keys: str) -> list[list[dict]]:
    """Batches of partition-0 messages of no body, all at one store time, with these keys ("-": none)."""
    return [[{"partition": 0, "key": None if k == "-" else k, "header": None, "step": 0, "size": 0}
             for k in batch.split()] for batch in batches_of_keys]


#: 31 keys fill the first IndexFile (maxIndexNum 32 holds 31); the last message is alone in the
#: second file, and the reopen for append dropped it (recovery resumed past the file's begin offset).
ALONE_IN_NEWEST_INDEX_FILE = _keyed("k4 - k1 k3", "k5 k5 k4 k2 k1 k5", "k4 k2 k5 k3 k4", "- k0 k2 - k2",
                                    "k5 k3 k3 k1 - -", "k0 k5 k0 k4 k1 k2", "k4 k2 k3 k3 -", "k3")


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@settings(max_examples=10, deadline=None)
@given(data=batches, split=st.integers(0, 12))
@example(data=ALONE_IN_NEWEST_INDEX_FILE, split=12)
def test_indexes_kept_on_append_answer_like_a_scan(tmp_path_factory, fmt: str, data: list[list[dict]],
                                                    split: int) -> None:
    """Appends with the indexes attached (and a reopen halfway) give the same answers."""
    path = tmp_path_factory.mktemp(fmt) / "T-0"
    _write(path, fmt, data[:split], indexes=list(LAYOUT_NAMES))
    _write(path, fmt, data[split:], indexes=list(LAYOUT_NAMES))
    with segstore.open(path, format=fmt, indexes=list(LAYOUT_NAMES)) as store:
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


def test_extra_index_files_stay_in_their_directory(tmp_path: Path) -> None:
    """Extra layouts write only under .segstore/ (RocketMQ: store root; Kafka: the partition)."""
    data = [[{"partition": p, "key": "k1", "header": None, "step": 5, "size": 50} for p in (0, 1, 2)]] * 5
    for fmt in ("rocketmq", "kafka"):
        path = tmp_path / fmt / "T-0"
        _write(path, fmt, data, indexes=[])
        before = {os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs}
        with segstore.open(path, format=fmt, indexes=[]) as store:
            indexes = IndexSet(store, LAYOUT_NAMES, writable=True)
            indexes.build()
            indexes.close()
        after = {os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs}
        assert before <= after
        assert all(p.startswith(".segstore/") for p in after - before), sorted(after - before)


@pytest.mark.parametrize("writer", ["library", "cli"])
def test_a_queue_new_since_the_build_is_read_as_a_tail(tmp_path: Path, writer: str) -> None:
    """A queue another writer made after ``index build`` (the broker, or segstore with ``indexes=[]``) has no
    stream index yet: lookups read it whole, as the tail an index has not caught up with, and verify
    finds nothing wrong; ``write --input`` keeps the store's layouts up, as a library append does."""
    import json

    from conftest import cli_run

    store = tmp_path / "store"
    sizes = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 2000}
    with segstore.open(str(store), format="rocketmq", mode="a", **sizes) as s:
        s.append_batch([{"topic": "T", "queue_id": i % 3, "body": b"x", "store_timestamp": 1_000_000 + i}
                        for i in range(30)])
    assert cli_run("index", "build", store, "--index", "time")[0] == 0
    later = [{"topic": "T", "queue_id": i % 4, "body": "y", "store_timestamp": 2_000_000 + i}
             for i in range(8)]
    if writer == "library":
        with segstore.open(str(store), format="rocketmq", mode="a", indexes=[], **sizes) as s:
            s.append_batch([{**m, "body": b"y"} for m in later])
    else:
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(m) + "\n" for m in later))
        assert cli_run("write", store, "--input", tmp_path / "in.jsonl")[0] == 0
    with segstore.open(str(store)) as s:
        assert s.indexes is not None and "time" in s.indexes
        assert [s.offset_for_time("T", q, 1_000_020) for q in range(4)] == [7, 7, 6, 0]
    with segstore.open(str(store), indexes=[]) as s:
        assert [s.offset_for_time("T", q, 1_000_020) for q in range(4)] == [7, 7, 6, 0]
    code, out, err = cli_run("index", "verify", store, "--index", "time")
    assert code == 0, out + err
    if writer == "cli":     # the CLI's write kept the layout: queue 3 has its own index
        assert (store / ".segstore" / "time" / "T" / "3").is_dir()


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_verify_of_an_index_never_built_or_dropped_is_a_problem(tmp_path: Path, fmt: str) -> None:
    """``index verify --index offset`` on a store that has no such index (never built, or dropped) said
    "ok" and exited 0: a user checking the index they rely on was told it is sound.  It is one problem
    naming the layout's directory and the command that builds it; after a build it is clean again."""
    from conftest import cli_run

    name = "offset" if fmt == "rocketmq" else "queue"
    store = tmp_path / "store"
    with segstore.open(str(store), format=fmt, mode="a", indexes=[]) as s:
        s.append_batch([{"topic": "T", "partition": 0, "value": b"v"} if fmt == "kafka"
                        else {"topic": "T", "queue_id": 0, "body": b"v"} for _ in range(5)])
    for attempt in ("never built", "dropped"):
        code, out, err = cli_run("index", "verify", store, "--index", name)
        assert code == 1, (attempt, out, err)
        assert f"expected a built {name!r} index, found none" in out
        assert f"run: segstore index build PATH --index {name}" in out
        assert cli_run("index", "build", store, "--index", name)[0] == 0
        assert cli_run("index", "verify", store, "--index", name)[0] == 0
        assert cli_run("index", "drop", store, "--index", name)[0] == 0


def test_index_build_checks_its_options_before_saying_anything_is_done(tmp_path: Path) -> None:
    """``index build --index key --index offset --option bogus=1`` on a RocketMQ store printed "key: native
    to rocketmq stores, kept by the broker" on stdout, then failed on the option (exit 2)."""
    from conftest import cli_run

    store = tmp_path / "store"
    with segstore.open(str(store), format="rocketmq", mode="a", indexes=[]) as s:
        s.append_batch([{"topic": "T", "queue_id": 0, "body": b"v"}])
    code, out, err = cli_run("index", "build", store, "--index", "key", "--index", "offset",
                             "--option", "bogus=1")
    assert code == 2 and out == "", (out, err)
    assert "found 'bogus'" in err
    assert not (store / ".segstore" / "offset").exists()


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_index_lookups_check_their_arguments(tmp_path: Path, fmt: str) -> None:
    """``store.indexes.find_key`` / ``offset_for_time`` / ``read_at`` (the API the docs show) took what
    ``store.find`` and ``store.offset_for_time`` refuse: ``find_key(key=5)`` looked up five zero bytes
    (``bytes(5)``) and found nothing, a str key was a TypeError where ``find`` takes it as UTF-8,
    ``max_hits=-1`` gave every hit but the oldest on RocketMQ and none on Kafka, ``2.5`` a TypeError; a
    RocketMQ queue the store does not hold was "expected a 'time' index for T/7 ... (run: segstore index
    build ...)", as if building an index would make the queue.  Each is now the store's own typed error."""
    from segstore.errors import ConfigError, NotFoundError

    path = tmp_path / "T-0"
    _write(path, fmt, [[{"partition": 0, "key": "k1", "header": None, "step": 10, "size": 5}] * 4],
           indexes=list(LAYOUT_NAMES))
    with segstore.open(path, format=fmt, indexes=list(LAYOUT_NAMES)) as store:
        indexes = store.indexes
        assert indexes.find_key("T", 0, "k1") == indexes.find_key("T", 0, b"k1") == [0, 1, 2, 3]
        assert indexes.find_key("T", 0, bytearray(b"k1"), 2) == [2, 3]
        bad = [lambda: indexes.find_key("T", 0, 5), lambda: indexes.find_key("T", 0, None),
               lambda: indexes.find_key("T", 0, b"k1", -1), lambda: indexes.find_key("T", 0, b"k1", 2.5),
               lambda: indexes.find_key("T", 0, b"k1", "3"), lambda: indexes.find_key("T", "0", b"k1"),
               lambda: indexes.offset_for_time("T", 0, "x"), lambda: indexes.offset_for_time("T", 0, -5),
               lambda: indexes.offset_for_time("T", 0, float("nan")), lambda: indexes.read_at("T", 0, "3"),
               lambda: indexes.read_at("T", 0, 1.0), lambda: indexes.read_at("T", True, 1)]
        for lookup in bad:
            with pytest.raises(ConfigError):
                lookup()
        # docs/index-layouts.md: "the store's own NotFoundError" (the CLI's exit 1, what the store does not
        # hold); a Kafka partition directory asked for another partition (or topic) raised
        # InvalidTopicError, a usage error (exit 2) for a name nothing is wrong with
        for topic, queue in (("T", 7), ("U", 0)):
            with pytest.raises(NotFoundError) as held:
                store.offset_range(topic, queue)
            for lookup, more in ((indexes.find_key, (b"k1",)), (indexes.offset_for_time, (1,)),
                                 (indexes.read_at, (0,)), (lambda t, q: list(store.read(t, q)), ())):
                with pytest.raises(NotFoundError) as caught:
                    lookup(topic, queue, *more)
                assert caught.value.message == held.value.message


def test_key_index_headers_are_names_however_they_are_written(tmp_path: Path) -> None:
    """``key.index.headers="trace, id"`` indexed the header named " id" (with its space), which no record
    has: the values of ``id`` were never found, without a word; a list of names, the natural Python
    spelling, was an AttributeError (a traceback) once the store was open.  Names are stripped, a list or
    tuple of str is taken, anything else is refused before any file is made (ConfigError)."""
    from segstore.errors import ConfigError

    record = {"topic": "T", "partition": 0, "value": b"v", "headers": [("trace", b"t1"), ("id", b"i1")]}
    for n, value in enumerate(["trace, id", " trace ,id,", ["trace", " id"], ("id", "trace")]):
        path = tmp_path / f"s{n}" / "T-0"
        options = {"key.index.headers": value}
        with segstore.open(path, format="kafka", mode="a", indexes=["key"], **options) as s:
            s.append(record)
            assert (s.indexes.find_key("T", 0, b"t1"), s.indexes.find_key("T", 0, b"i1")) == ([0], [0]), value
    for n, value in enumerate([5, ["trace", 5], b"trace", {"trace": 1}]):
        path = tmp_path / f"bad{n}" / "T-0"
        with pytest.raises(ConfigError, match=r"key\.index\.headers as header names"):
            segstore.open(path, format="kafka", mode="a", indexes=["key"], **{"key.index.headers": value})
        assert not path.exists()
