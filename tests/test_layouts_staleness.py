"""Extra indexes whose log changed while they were not looking, and index state files that do not parse.

The log is the truth.  A log whose indexed tail was cut and written again by a
writer that does not keep the index (the real broker, or segstore with
``indexes=[]``), a log compacted in place, an unreadable ``state.json``: readers
still answer like a scan of the log (or refuse lookups through a damaged index and
say so in ``verify``), and the next writer with the index rebuilds what it cannot
trust.

Brokers cited:

- Kafka 3.8.0, ``storage/src/main/java/org/apache/kafka/storage/internals/log/LogSegment.java``
  ``recover``: a segment's bytes past its last valid batch are cut (``log.truncateTo(validBytes)``);
  ``core/src/main/scala/kafka/log/UnifiedLog.scala`` ``truncateTo``: a follower cuts its log back to
  the leader's and fetches again, so the cut offsets get other records.
- Kafka 3.8.0, ``core/src/main/scala/kafka/log/LogCleaner.scala`` ``Cleaner.cleanSegments``: the cleaned
  records are written into new segment files that ``UnifiedLog.replaceSegments`` swaps in, so the
  records kept move to other positions (offsets stay).
- RocketMQ 4.9.7, ``store/src/main/java/org/apache/rocketmq/store/CommitLog.java``
  ``recoverAbnormally``: after a crash (``abort`` file present) the commitlog is walked and cut at the
  first message that does not check (``mappedFileQueue.truncateDirtyFiles(processOffset)``); the
  broker then appends from there.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from test_layouts_lookup import LAYOUT_OPTIONS, check_against_scan

import segstore
from segstore import cli
from segstore.errors import CorruptDataError
from segstore.layouts import LAYOUT_NAMES, IndexSet, layout_class
from segstore.layouts.base import Stream

FORMATS = ["rocketmq", "kafka"]
ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 1000}


def _extra(fmt: str) -> list[str]:
    return [name for name in LAYOUT_NAMES if not layout_class(name, fmt).native]


def _items(fmt: str, n: int, *, size: int, t0: int, tag: int) -> list[dict]:
    """``n`` records over queues 0 and 1 (RocketMQ) or partition 0 (Kafka); keys k0..k2, a header ``h``."""
    out = []
    for i in range(n):
        body = bytes([tag]) * (size + i % 5 * 7)
        key, header = f"k{(i + tag) % 3}", f"k{(i + tag + 1) % 3}"
        if fmt == "rocketmq":
            out.append({"topic": "T", "queue_id": i % 2, "body": body, "keys": [key],
                        "properties": {"h": header}, "store_timestamp": t0 + i})
        else:
            out.append({"topic": "T", "partition": 0, "value": body, "key": key.encode(),
                        "headers": [("h", header.encode())], "timestamp": t0 + i})
    return out


def _open(path: Path, fmt: str, mode: str = "r", **options: object) -> segstore.Store:
    config = ROCKETMQ_CONFIG if fmt == "rocketmq" else {}
    return segstore.open(path, format=fmt, mode=mode, **config, **options)


def _write_indexed(path: Path, fmt: str) -> None:
    with _open(path, fmt, "a", indexes=_extra(fmt), **LAYOUT_OPTIONS) as store:
        for batch in range(6):
            store.append_batch(_items(fmt, 8, size=40, t0=1_000 + 100 * batch, tag=batch))


def _cut_log(path: Path, fmt: str, offset: int) -> None:
    """Tear the log at the record at ``offset`` of stream 0, as a crash leaves it; the next writer's
    recovery cuts it there (Kafka: the bytes of its batch; RocketMQ: zeros from it on, ``abort``)."""
    with _open(path, fmt, indexes=[]) as store:
        if fmt == "kafka":
            batch = next(store.scan_arrow(["offset", "position", "segment"], topic="T", partition=0,
                                          offset=offset))
            log = path / f"{batch.column('segment')[0].as_py():020d}.log"
            cut = batch.column("position")[0].as_py() + 20
        else:
            position = next(store.read("T", 0, offset, 1)).physical_offset
            log = sorted((path / "commitlog").iterdir())[0]
            cut = position
    data = log.read_bytes()
    log.write_bytes(data[:cut] + (bytes(len(data) - cut) if fmt == "rocketmq" else b""))
    if fmt == "rocketmq":
        (path / "abort").touch()


@pytest.mark.parametrize("fmt", FORMATS)
def test_log_cut_and_written_again_without_the_index(tmp_path: Path, fmt: str) -> None:
    """The indexed tail cut and written again, longer, by a writer without the index: the index state
    still reaches as far as the log does, but its entries there are another log's.  Readers answer
    from the log and verify says so; the next writer with the index rebuilds it."""
    path = tmp_path / "T-0"
    _write_indexed(path, fmt)
    with _open(path, fmt, indexes=[]) as store:
        before = store.offset_range("T", 0)
    _cut_log(path, fmt, before[1] - 12)
    with _open(path, fmt, "a", indexes=[]) as store:     # recovers the torn tail, then writes on
        assert store.offset_range("T", 0)[1] <= before[1] - 12
        store.append_batch(_items(fmt, 40, size=150, t0=500, tag=200))
        assert store.offset_range("T", 0)[1] > before[1]

    with _open(path, fmt) as store:
        assert sorted(store.indexes.layouts) == sorted(_extra(fmt))
        full = IndexSet(store, LAYOUT_NAMES, writable=False)
        try:
            check_against_scan(store, full)
            problems = full.verify()
        finally:
            full.close()
    assert problems and all("the log changed under the index" in p.message for p in problems)
    assert {Path(p.path).name for p in problems} == {"state.json"}
    out = io.StringIO()
    assert cli.main(["index", "verify", str(path), *[f"--index={n}" for n in _extra(fmt)]], out) == 1
    assert "the log changed under the index" in out.getvalue()

    with _open(path, fmt, "a") as store:
        assert any("rebuilt: expected offset" in line for line in store.indexes.actions)
        assert store.indexes.verify() == []
    with _open(path, fmt, indexes=list(LAYOUT_NAMES)) as store:
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


@pytest.mark.parametrize("fmt", FORMATS)
def test_state_without_a_fingerprint_is_rebuilt_by_its_writer(tmp_path: Path, fmt: str) -> None:
    """A state.json an earlier segstore wrote (no ``last_record``): readers use it as it is, the first
    writer rebuilds the index from the log and writes the fingerprint."""
    path = tmp_path / "T-0"
    _write_indexed(path, fmt)
    states = list(path.rglob("state.json"))
    for state in states:
        data = json.loads(state.read_text())
        assert data.pop("last_record")["offset"] == data["indexed_end"] - 1
        state.write_text(json.dumps(data))
    with _open(path, fmt, indexes=list(LAYOUT_NAMES)) as store:
        assert store.indexes.verify() == [] and store.indexes.actions == []
        check_against_scan(store, store.indexes)
    with _open(path, fmt, "a") as store:
        rebuilt = [line for line in store.indexes.actions if "an earlier segstore wrote it" in line]
        assert len(rebuilt) == len(states)
    assert all(json.loads(state.read_text())["last_record"] for state in states)
    with _open(path, fmt, indexes=list(LAYOUT_NAMES)) as store:
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


@pytest.mark.parametrize("content", ["", '{"layout": "L", "version": 99}'])
@pytest.mark.parametrize("fmt", FORMATS)
def test_unreadable_state_is_reported_then_rebuilt(tmp_path: Path, fmt: str, content: str) -> None:
    """A state.json that does not parse (empty after a power loss, a version this segstore does not know)
    is one damaged index: every command still runs; readers report it and refuse lookups through it;
    writers, ``index build`` and ``index drop`` rebuild or drop it."""
    path = tmp_path / "T-0"
    _write_indexed(path, fmt)
    name = _extra(fmt)[0]
    state = sorted((path / ".segstore" / name).rglob("state.json"))[0]
    damage = content.replace('"L"', json.dumps(name))

    def run(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        return cli.main([*argv], out), out.getvalue()

    state.write_text(damage)
    assert run("info", str(path))[0] == 0
    assert run("dump", str(path))[0] == 0
    code, text = run("index", "verify", str(path), "--index", name)
    assert code == 1 and f"{state}: expected" in text
    with _open(path, fmt) as store:
        stream = Stream("T", 0)
        lookup = {"time": lambda: store.indexes[name].offset_for_time(stream, 1_000),
                  "offset": lambda: store.indexes[name].read_at(stream, 3),
                  "queue": lambda: store.indexes[name].read_at(stream, 3),
                  "key": lambda: store.indexes[name].find_key(stream, b"k1")}[name]
        with pytest.raises(CorruptDataError, match="state"):
            lookup()

    with _open(path, fmt, "a") as store:
        assert any(line.startswith(f"{state.parent}: rebuilt: expected") for line in store.indexes.actions)
        assert store.indexes.verify() == []
    assert json.loads(state.read_text())["layout"] == name

    state.write_text(damage)
    assert run("index", "build", str(path), "--index", name)[0] == 0
    assert run("index", "verify", str(path), "--index", name)[0] == 0
    with _open(path, fmt, indexes=list(LAYOUT_NAMES)) as store:
        check_against_scan(store, store.indexes)

    state.write_text(damage)
    code, text = run("index", "drop", str(path), "--index", name)
    assert code == 0 and not state.exists()


def _compactable(path: Path) -> None:
    """Kafka segments of 600 bytes, 36 keyed records over 4 keys: compaction keeps few of the first 24."""
    config = {"segment.bytes": 600}
    with segstore.open(path, format="kafka", mode="a", indexes=["queue", "key"], **config) as store:
        for b in range(12):
            store.append_batch([{"topic": "T", "partition": 0, "value": bytes([b]) * (10 + 7 * i),
                                 "timestamp": 1000 + b, "key": f"k{(b * 3 + i) % 4}".encode(), "headers": []}
                                for i in range(3)])


def _check_every_layout(store: segstore.Store) -> None:
    """Every layout, opened read-only over ``store``, verifies clean and answers as a scan does."""
    full = IndexSet(store, LAYOUT_NAMES, writable=False)
    try:
        assert full.verify() == []
        check_against_scan(store, full)
    finally:
        full.close()


def _check_compacted(path: Path) -> None:
    with segstore.open(path, format="kafka") as store:
        assert store.offset_range("T", 0)[0] == 0
        assert len(list(store.read("T", 0))) < 36    # records moved: the cleaned segments were rewritten
        _check_every_layout(store)


def test_kafka_compaction_reindexes_the_extra_layouts(tmp_path: Path) -> None:
    """``segstore compact`` moves the records it keeps: the extra indexes it has attached index them again."""
    path = tmp_path / "T-0"
    _compactable(path)
    out = io.StringIO()
    assert cli.main(["compact", str(path), "--config", "cleanup.policy=compact"], out) == 0
    assert "kept 4 of 24 records" in out.getvalue()
    _check_compacted(path)


def test_kafka_compaction_without_the_indexes_sets_them_back(tmp_path: Path) -> None:
    """Compacted by a store that did not attach the extra indexes: their state is set back before the
    records move, so readers look them up in the log and the next writer indexes them again."""
    path = tmp_path / "T-0"
    _compactable(path)
    with segstore.open(path, format="kafka", mode="a", indexes=[], **{"segment.bytes": 600}) as store:
        assert store.compact()[0]["records_kept"] == 4
    states = [json.loads(p.read_text()) for p in (path / ".segstore").rglob("state.json")]
    assert states and all(s["indexed_end"] == 0 and not s["clean"] for s in states)
    _check_compacted(path)
    with segstore.open(path, format="kafka", mode="a") as store:
        assert store.indexes.verify() == []
    _check_compacted(path)


def test_kafka_compaction_crashing_between_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash after the first cleaned group is swapped in, before the next: the extra indexes dropped
    their entries before anything moved, so no entry is left pointing at a moved record."""
    from segstore_kafka import compaction

    path = tmp_path / "T-0"
    _compactable(path)
    swapped = []
    real_swap = compaction._swap_in

    def swap_then_crash(*args: object) -> None:
        if swapped:
            raise KeyboardInterrupt("killed")
        real_swap(*args)
        swapped.append(args)

    monkeypatch.setattr(compaction, "_swap_in", swap_then_crash)
    store = segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 600})
    with pytest.raises(KeyboardInterrupt):
        store.compact(**{"topic": "T"})
    store.abandon()
    assert swapped
    monkeypatch.undo()
    with segstore.open(path, format="kafka", mode="a") as store:
        assert store.indexes.verify() == []
    with segstore.open(path, format="kafka") as store:
        _check_every_layout(store)


@pytest.mark.parametrize("entries", [3, 4, 5])
def test_key_recovery_puts_no_key_twice(tmp_path: Path, entries: int) -> None:
    """A crash while a record's keys (its key, then a header) were split over two IndexFiles: recovery
    starts again where the first of those files begins, so verify finds every key once."""
    for n in range(1, 9):
        path = tmp_path / f"{n}" / "T-0"
        options = {"key.index.slots": 4, "key.index.entries": entries, "key.index.headers": "h"}

        def record(i: int) -> dict:
            return {"topic": "T", "partition": 0, "value": b"v", "timestamp": 1000 + i,
                    "key": f"k{i % 3}".encode(), "headers": [("h", f"x{i % 2}".encode())]}

        store = segstore.open(path, format="kafka", mode="a", indexes=["key"], **options)
        for i in range(n):
            store.append_batch([record(i)])
        store.flush()
        store.append_batch([record(n)])
        store.abandon()
        with segstore.open(path, format="kafka", mode="a") as store:
            assert store.indexes.verify() == [], (entries, n, store.indexes.actions)
            for key in (b"k0", b"k1", b"k2", b"x0", b"x1"):
                expected = [r.offset for r in store.read("T", 0)
                            if key in (r.key, *[v for _, v in r.headers])]
                assert store.indexes.find_key("T", 0, key) == expected


def test_offset_layout_reads_a_queue_new_since_the_build(tmp_path: Path) -> None:
    """A RocketMQ queue another writer created after the sparse offset index was built has no index
    files: a reader reads its records from the log (not None)."""
    path = tmp_path / "store"
    with _open(path, "rocketmq", "a", indexes=["offset"]) as store:
        store.append_batch([m for m in _items("rocketmq", 10, size=30, t0=1000, tag=1) if m["queue_id"] == 0])
    with _open(path, "rocketmq", "a", indexes=[]) as store:
        store.append_batch(_items("rocketmq", 10, size=30, t0=2000, tag=2))
    with _open(path, "rocketmq") as store:
        for offset in range(5):
            found = store.indexes.read_at("T", 1, offset)
            assert found is not None and (found.queue_id, found.queue_offset) == (1, offset)
        assert store.indexes.read_at("T", 1, 5) is None


@pytest.mark.parametrize("mode", ["a", "r"])
def test_an_option_the_index_was_not_built_with_is_refused(tmp_path: Path, mode: str) -> None:
    """``segstore.open(..., indexes=["key"], key.index.headers="trace")`` over a key index built without
    it: the index kept its own options (state.json) and ignored the one asked for, without a word, so
    ``find_key`` of a trace value found nothing, though the docs' own example asks for exactly this.  An
    option named that differs from the one an index on disk was built with is refused (ConfigError,
    exit 2) naming the state file and the ``index build`` that rebuilds it with the new value; named
    as built, or left out (the index's own), it is taken; ``index build --option`` rebuilds with it."""
    from segstore.errors import ConfigError

    path = tmp_path / "T-0"
    record = {"topic": "T", "partition": 0, "value": b"v", "key": b"k", "headers": [("trace", b"t1")]}
    with segstore.open(path, format="kafka", mode="a", indexes=["key"]) as store:
        store.append(record)
    state = path / ".segstore" / "key" / "state.json"
    asked = {"key.index.headers": "trace"}
    with pytest.raises(ConfigError) as caught:
        segstore.open(path, format="kafka", mode=mode, indexes=["key"], **asked).close()
    assert caught.value.path == str(state)
    assert "expected key.index.headers 'trace'" in caught.value.message
    assert "segstore index build PATH --index key --option key.index.headers=trace" in caught.value.message
    # the options it was built with, named or not, and options of layouts not opened, are fine
    for options in ({}, {"key.index.headers": ""}, {"layout.interval.bytes": 100}):
        with segstore.open(path, format="kafka", mode=mode, indexes=["key"], **options) as store:
            assert store.indexes.find_key("T", 0, b"k") == [0]
    out = io.StringIO()
    assert cli.main(["index", "build", str(path), "--index", "key", "--option", "key.index.headers=trace"],
                    out) == 0
    with segstore.open(path, format="kafka", mode=mode, indexes=["key"], **asked) as store:
        assert store.indexes.find_key("T", 0, b"t1") == [0]


def test_index_build_without_an_option_keeps_the_one_the_index_was_built_with(tmp_path: Path) -> None:
    """``index verify`` tells how to mend a damaged index: ``segstore index build PATH --index key``.
    Run as told over a key index built with ``key.index.headers=trace``, the rebuild took the default
    options for every one not named, so it came back without the header: ``find_key`` of a trace value
    found nothing from then on, without a word.  A rebuild keeps the options the index was built with
    but those ``--option`` names (``--option key.index.headers=`` to index no header again)."""
    path = tmp_path / "T-0"
    record = {"topic": "T", "partition": 0, "value": b"v", "key": b"k", "headers": [("trace", b"t1")]}
    with segstore.open(path, format="kafka", mode="a", indexes=["key"],
                       **{"key.index.headers": "trace", "key.index.slots": 8}) as store:
        store.append(record)
    state = path / ".segstore" / "key" / "state.json"

    def build(*options: str) -> None:
        argv = ["index", "build", str(path), "--index", "key"]
        assert cli.main([*argv, *(f"--option={o}" for o in options)], io.StringIO()) == 0

    build()
    assert json.loads(state.read_text())["options"]["key.index.headers"] == "trace"
    assert json.loads(state.read_text())["options"]["key.index.slots"] == 8
    with segstore.open(path, format="kafka") as store:
        assert store.indexes.find_key("T", 0, b"t1") == [0]
    build("key.index.headers=")
    assert json.loads(state.read_text())["options"]["key.index.headers"] == ""
    assert json.loads(state.read_text())["options"]["key.index.slots"] == 8
    with segstore.open(path, format="kafka") as store:
        assert store.indexes.find_key("T", 0, b"t1") == []


@pytest.mark.parametrize("how", ["write", "build"])
def test_a_partition_new_since_the_build_takes_the_index_options(tmp_path: Path, how: str) -> None:
    """A Kafka log directory whose key index was built with ``key.index.headers=trace``: a partition
    written later (``segstore write`` keeps the store's indexes) got a key index of the default options,
    without the header, and so did ``index build`` run again without ``--option``: ``find_key`` of its
    trace values found nothing, though its records carry them.  A stream new to an index takes the
    options the layout's indexes on disk were built with (but those the caller names)."""
    logs = tmp_path / "logs"

    def write(partition: int) -> None:
        line = {"topic": "T", "partition": partition, "value": "v", "headers": [["trace", f"t{partition}"]]}
        source = tmp_path / f"in{partition}.jsonl"
        source.write_text(json.dumps(line) + "\n")
        assert cli.main(["write", str(logs), "--format", "kafka", "--input", str(source)], io.StringIO()) == 0

    write(1)
    assert cli.main(["index", "build", str(logs), "--index", "key", "--option", "key.index.headers=trace"],
                    io.StringIO()) == 0
    if how == "write":
        write(0)
    else:
        with segstore.open(logs, format="kafka", mode="a", indexes=[]) as store:
            store.append({"topic": "T", "partition": 0, "value": b"v", "headers": [("trace", b"t0")]})
        with segstore.open(logs, format="kafka") as store:     # a reader reads the new one as a tail
            assert store.indexes.find_key("T", 0, b"t0") == [0]
        assert cli.main(["index", "build", str(logs), "--index", "key"], io.StringIO()) == 0
    state = json.loads((logs / "T-0" / ".segstore" / "key" / "state.json").read_text())
    assert state["options"]["key.index.headers"] == "trace"
    with segstore.open(logs, format="kafka") as store:
        assert store.indexes.find_key("T", 0, b"t0") == [0]
        assert store.indexes.find_key("T", 1, b"t1") == [0]
