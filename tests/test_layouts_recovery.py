"""Extra indexes after crashes, torn files, stale state and appends that did not keep them.

The log is the truth: whatever happened to the index files, the next open for
append cuts what it cannot trust, rebuilds from the log, and the lookups answer
like a scan again; a reader never writes and still answers right.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from test_layouts_lookup import LAYOUT_OPTIONS, _write, check_against_scan

import segstore
from segstore import cli
from segstore.layouts import LAYOUT_NAMES, IndexSet, layout_class

FORMATS = ["rocketmq", "kafka"]


def _data(batches: int, seed: int) -> list[list[dict]]:
    import random

    rnd = random.Random(seed)
    return [[{"partition": rnd.randint(0, 2), "key": rnd.choice([None, "k0", "k1", "k2"]),
              "header": rnd.choice([None, "k1", "k3"]), "step": rnd.randint(-20, 60),
              "size": rnd.randint(0, 250)}
             for _ in range(rnd.randint(1, 5))] for _ in range(batches)]


def _states(path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in path.rglob("state.json")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_crash_after_unflushed_appends_is_recovered(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "T-0"
    _write(path, fmt, _data(10, 1), indexes=list(LAYOUT_NAMES))
    store = segstore.open(path, format=fmt, mode="a", indexes=list(LAYOUT_NAMES), **LAYOUT_OPTIONS)
    store.flush()
    extra = {"topic": "T", "partition": 0, "value": b"x" * 100, "key": b"k9", "timestamp": 1}
    store.append_batch([extra] * 3)
    store.abandon()
    assert any(not s["clean"] for s in _states(path))

    with segstore.open(path, format=fmt, mode="a", indexes=list(LAYOUT_NAMES)) as store:
        assert any("recovered" in line for line in store.indexes.actions)
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)
    assert all(s["clean"] for s in _states(path))


@pytest.mark.parametrize("fmt", FORMATS)
def test_torn_index_files_are_rebuilt(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "T-0"
    _write(path, fmt, _data(12, 2), indexes=list(LAYOUT_NAMES))
    damaged = [p for p in path.rglob("*") if p.is_file() and p.suffix in (".index", ".timeindex")
               and ".segstore" in p.parts]
    damaged += [p for p in (path / ".segstore" / "key").glob("2*")] if fmt == "kafka" else []
    assert damaged
    for p in damaged:
        data = p.read_bytes()
        p.write_bytes(data[: max(len(data) - 5, 1)])

    with segstore.open(path, format=fmt, mode="a", indexes=list(LAYOUT_NAMES)) as store:
        assert any("rebuilt" in line for line in store.indexes.actions)
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


@pytest.mark.parametrize("fmt", FORMATS)
def test_appends_without_the_indexes_are_caught_up(tmp_path: Path, fmt: str) -> None:
    """A writer that does not keep the indexes (the real broker) leaves them behind; readers still answer
    right (the tail is scanned) and the next writer with them catches up."""
    path = tmp_path / "T-0"
    _write(path, fmt, _data(6, 3), indexes=list(LAYOUT_NAMES))
    _write(path, fmt, _data(6, 4), indexes=[])
    before = [s["indexed_end"] for s in _states(path)]

    with segstore.open(path, format=fmt) as store:
        extra = sorted(store.indexes.layouts)
        assert extra == sorted(n for n in LAYOUT_NAMES if not layout_class(n, fmt).native)
        full = IndexSet(store, LAYOUT_NAMES, writable=False)
        try:
            check_against_scan(store, full)
        finally:
            full.close()
    assert [s["indexed_end"] for s in _states(path)] == before

    with segstore.open(path, format=fmt, mode="a") as store:
        assert sorted(store.indexes.layouts) == extra
    assert [s["indexed_end"] for s in _states(path)] != before
    with segstore.open(path, format=fmt, indexes=list(LAYOUT_NAMES)) as store:
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


def test_kafka_log_cut_by_recovery_rebuilds_the_index(tmp_path: Path) -> None:
    """A torn log tail cut by the store's recovery leaves the index past the log end: the record it ends
    with is gone, so nothing tells how much of the log changed, and it is rebuilt."""
    path = tmp_path / "T-0"
    _write(path, "kafka", _data(15, 5), indexes=list(LAYOUT_NAMES))
    last_log = sorted(path.glob("*.log"))[-1]
    data = last_log.read_bytes()
    last_log.write_bytes(data[:-7])

    with segstore.open(path, format="kafka", mode="a", indexes=list(LAYOUT_NAMES)) as store:
        assert any("rebuilt: expected the log to reach offset" in line for line in store.indexes.actions)
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_reports_a_wrong_entry(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "T-0"
    _write(path, fmt, _data(12, 6), indexes=list(LAYOUT_NAMES))
    name = "time" if fmt == "rocketmq" else "queue"
    target = sorted(p for p in (path / ".segstore" / name).rglob("*")
                    if p.is_file() and p.name != "state.json")[0]
    data = bytearray(target.read_bytes())
    data[3] ^= 0x40
    target.write_bytes(bytes(data))
    with segstore.open(path, format=fmt) as store:
        problems = store.indexes.verify()
    assert problems and str(target) in str(problems[0])
    out = io.StringIO()
    assert cli.main(["index", "verify", str(path), "--index", name], out) == 1
    assert str(target) in out.getvalue()
    assert os.path.exists(target)


def test_kafka_retention_past_the_index_starts_it_over(tmp_path: Path) -> None:
    """Retention deleting segments the index covers: lookups below the log start say None, the rest still
    answer like a scan, and an index left behind entirely is started over at the new log start."""
    path = tmp_path / "T-0"
    config = {"segment.bytes": 1024, "retention.bytes": 3000}
    store = segstore.open(path, format="kafka", mode="a", indexes=list(LAYOUT_NAMES), **config,
                          **LAYOUT_OPTIONS)
    with store:
        for n in range(30):
            store.append_batch([{"topic": "T", "partition": 0, "value": bytes(120),
                                 "key": f"k{n % 3}".encode(),
                                 "headers": [], "timestamp": 1000 + n}])
        assert store.offset_range("T", 0)[0] > 0
        check_against_scan(store, store.indexes)
    with segstore.open(path, format="kafka", mode="a", indexes=[], **config) as plain:
        for n in range(30):
            plain.append_batch([{"topic": "T", "partition": 0, "value": bytes(120), "timestamp": 5000 + n}])
    with segstore.open(path, format="kafka", mode="a", indexes=list(LAYOUT_NAMES), **config) as store:
        assert any("started over" in line for line in store.indexes.actions)
        assert store.indexes.verify() == []
        check_against_scan(store, store.indexes)


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_writer_per_extra_index(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "T-0"
    _write(path, fmt, _data(2, 7), indexes=[])
    with segstore.open(path, format=fmt, indexes=[]) as store:
        first = IndexSet(store, LAYOUT_NAMES, writable=True)
        try:
            with pytest.raises(segstore.errors.StoreLockedError):
                IndexSet(store, LAYOUT_NAMES, writable=True)
        finally:
            first.close()
        IndexSet(store, LAYOUT_NAMES, writable=True).close()


def test_layouts_implement_the_core_protocol(tmp_path: Path) -> None:
    from segstore.index import IndexLayout

    for fmt in FORMATS:
        path = tmp_path / fmt / "T-0"
        _write(path, fmt, _data(2, 8), indexes=list(LAYOUT_NAMES))
        with segstore.open(path, format=fmt, indexes=list(LAYOUT_NAMES)) as store:
            for name in LAYOUT_NAMES:
                layout = store.indexes[name]
                assert isinstance(layout, IndexLayout)
                assert (layout.name, layout.native) == (name, layout_class(name, fmt).native)


@pytest.mark.parametrize("damage", ["slot", "link"])
def test_verify_reports_a_key_chain_that_hides_keys(tmp_path: Path, damage: str) -> None:
    """A slot of the extra key index (Kafka) aimed at another entry of its chain, or a link that ends
    the chain early: every entry is still there, so ``index verify`` compared the entries, found them
    all and said "ok" (exit 0), while ``find_key`` walks the slot's chain only and missed the older
    records of that key.  Verify checks the slots and links as RocketMQ's own verify checks the
    broker's IndexFiles (4.9.7 ``IndexFile.putKey``: each entry links to the slot's previous newest
    entry, the slot then points at it)."""
    from segstore.indexes import keyhash

    path = tmp_path / "T-0"
    options = {"key.index.slots": 4, "key.index.entries": 32}
    with segstore.open(path, format="kafka", mode="a", indexes=["key"], **options) as store:
        store.append_batch([{"topic": "T", "partition": 0, "value": b"v", "key": f"k{n % 3}".encode(),
                             "timestamp": 1000 + n} for n in range(12)])
    with segstore.open(path, format="kafka") as store:
        assert store.indexes.find_key("T", 0, b"k1") == [1, 4, 7, 10]
    (name,) = [p for p in (path / ".segstore" / "key").iterdir() if p.name != "state.json"]
    f = keyhash.IndexFile.open(str(name), 4, 32, writable=True)
    try:
        # the newest entry of k1 (offset 10) heads its slot's chain: 10 -> 7 -> 4 -> 1
        head = int(f.slots[keyhash.index_key_hash("T#k1") % f.slot_num])
        assert int(f.entries_all[head]["phy_offset"]) == 10
        if damage == "slot":
            f.slots[keyhash.index_key_hash("T#k1") % f.slot_num] = int(f.entries_all[head]["prev"])
            pos = f.slot_pos(keyhash.index_key_hash("T#k1") % f.slot_num)
        else:
            f.entries_all["prev"][head] = keyhash.INVALID_INDEX
            pos = f.entry_pos(head)
        f.flush()
    finally:
        f.close()
    with segstore.open(path, format="kafka") as store:
        assert store.indexes.find_key("T", 0, b"k1") != [1, 4, 7, 10]      # the damage hides records
        problems = store.indexes.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(name), pos)], problems
    out = io.StringIO()
    assert cli.main(["index", "verify", str(path), "--index", "key"], out) == 1
    assert f"{name}:{pos}: expected " in out.getvalue()
    assert cli.main(["index", "build", str(path), "--index", "key", "--option", "key.index.slots=4",
                     "--option", "key.index.entries=32"], io.StringIO()) == 0
    with segstore.open(path, format="kafka") as store:
        assert store.indexes.verify() == []
        assert store.indexes.find_key("T", 0, b"k1") == [1, 4, 7, 10]


@pytest.mark.parametrize("fmt", FORMATS)
def test_index_drop_waits_for_the_index_writer(tmp_path: Path, fmt: str) -> None:
    """``segstore index drop`` took no writer lock: with a store open for append keeping the index,
    it deleted the files under it (and its lock file), the writer went on indexing into unlinked
    files, and its close failed with NotFoundError on the state file it could no longer write.
    ``index build`` already refused (StoreLockedError, exit 1); ``drop`` does too, leaving every file,
    and drops once the writer is gone."""
    name = "key" if fmt == "kafka" else "time"
    path = tmp_path / "T-0"
    _write(path, fmt, _data(3, 9), indexes=[name])
    files_before = sorted(p for p in (path / ".segstore").rglob("*"))
    with segstore.open(path, format=fmt, mode="a", indexes=[name]) as store:
        out, err = io.StringIO(), io.StringIO()
        import contextlib
        with contextlib.redirect_stderr(err):
            assert cli.main(["index", "drop", str(path), "--index", name], out) == 1
        assert out.getvalue() == "" and f"{name}.lock: " in err.getvalue()
        assert sorted(p for p in (path / ".segstore").rglob("*")) == files_before
        store.append_batch([{"topic": "T", "partition": 0, "value": b"v", "key": b"k1", "timestamp": 5}]
                           if fmt == "kafka" else [{"topic": "T", "queue_id": 0, "body": b"v"}])
    with segstore.open(path, format=fmt) as store:
        assert store.indexes.verify() == []
    assert cli.main(["index", "drop", str(path), "--index", name], io.StringIO()) == 0
    assert not (path / ".segstore" / name).exists()


def test_readers_leave_sparse_entries_past_the_recovery_point(tmp_path: Path) -> None:
    """A writer keeping the sparse ``offset`` and ``time`` layouts over a RocketMQ queue dies after
    appending (its entries are in the files, its state.json still ends at the last flush); a power
    loss takes the messages it appended from the commitlog, and a writer without the index (the
    broker) writes others there.  The record the index ends with is unchanged, so nothing looks stale:
    the docs promise that readers answer from the index up to ``indexed_end`` and scan the tail, but the
    sparse layouts used every entry in their files: ``offset_for_time`` answered offsets of the lost
    messages (12 for a time first reached at 10) and ``read_at`` walked the commitlog from a lost
    message's position (CorruptDataError mid-message).  They now stop at ``indexed_end``, as the dense
    and key layouts do."""
    import glob

    path = tmp_path / "store"

    def message(n: int, when: int) -> dict:
        # the messages written after the loss are longer: the lost ones' positions fall inside them
        body = b"v%03d" % n + bytes(n // 100 * 7)
        return {"topic": "T", "queue_id": 0, "body": body, "store_timestamp": when}

    options = {"layout.interval.bytes": 1}
    with segstore.open(path, format="rocketmq", mode="a", indexes=["time", "offset"], **options) as store:
        store.append_batch([message(n, 1000 + n) for n in range(10)])
    store = segstore.open(path, format="rocketmq", mode="a", indexes=["time", "offset"])
    store.append_batch([message(n, 1000 + n) for n in range(10, 20)])
    lost_from = next(store.read("T", 0, 10, 1)).physical_offset
    store.abandon()
    (log,) = glob.glob(str(path / "commitlog" / "*"))
    with open(log, "r+b") as f:         # the power loss: the messages appended since the flush are gone
        f.seek(lost_from)
        f.write(bytes(os.path.getsize(log) - lost_from))
    with segstore.open(path, format="rocketmq", mode="a", indexes=[]) as store:
        assert store.offset_range("T", 0) == (0, 10)
        store.append_batch([message(100 + n, 5000 + n) for n in range(10, 20)])
    with segstore.open(path, format="rocketmq") as store:
        assert store.indexes is not None and sorted(store.indexes) == ["offset", "time"]
        times = [r.store_timestamp for r in store.read("T", 0)]
        for when in (999, 1005, 1009, 1012, 1019, 4000, 5010, 5015, 5019, 5020):
            want = next((o for o, t in enumerate(times) if t >= when), None)
            assert store.indexes.offset_for_time("T", 0, when) == want, when
        for offset in range(20):
            record = store.indexes.read_at("T", 0, offset)
            written = message(offset + 100 * (offset >= 10), 0)["body"]
            assert (record.queue_offset, record.body) == (offset, written)


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_passes_over_entries_past_the_recovery_point(tmp_path: Path, fmt: str) -> None:
    """A writer killed after appending leaves entries past the ``indexed_end`` its state saved; readers
    never use them and the next writer cuts them.  ``index verify`` passed over them for the dense and
    key layouts (Kafka) but reported the sparse ones (RocketMQ's ``offset`` and ``time``: "expected 10
    entries, found 20", exit 1) though every lookup was right."""
    path = tmp_path / "T-0"
    names = [n for n in LAYOUT_NAMES if not layout_class(n, fmt).native]

    def batch(first: int) -> list[dict]:
        return [{"topic": "T", "partition": 0, "value": b"v%d" % n, "key": b"k%d" % (n % 3),
                 "timestamp": 1000 + n} if fmt == "kafka" else
                {"topic": "T", "queue_id": 0, "body": b"v%d" % n, "keys": [f"k{n % 3}"],
                 "store_timestamp": 1000 + n} for n in range(first, first + 10)]

    options = {"layout.interval.bytes": 1}
    with segstore.open(path, format=fmt, mode="a", indexes=names, **options) as store:
        store.append_batch(batch(0))
    store = segstore.open(path, format=fmt, mode="a", indexes=names)
    store.append_batch(batch(10))
    store.abandon()
    assert all(s["indexed_end"] == 10 and not s["clean"] for s in _states(path))
    with segstore.open(path, format=fmt) as store:
        assert store.indexes.verify() == []
        full = IndexSet(store, LAYOUT_NAMES, writable=False)
        try:
            check_against_scan(store, full)
        finally:
            full.close()
    out = io.StringIO()
    argv = ["index", "verify", str(path), *(f"--index={n}" for n in names)]
    assert cli.main(argv, out) == 0, out.getvalue()


#: A RocketMQ queue whose time index file at offset 25 fills at offset 28 and rolls after it: the roll
#: forces the file's largest time in (1192 at offset 23), past the state saved at offset 28.
ROLLED_PAST = {"times": [1009, 992, 1180, 1183, 1048, 1097, 1179, 1126, 1022, 1091, 1020, 1048, 1168, 1137,
                         1145, 1097, 952, 1149, 1013, 1119, 1164, 954, 1062, 1192, 989, 988, 1135, 1031, 992,
                         1015, 1117, 1126, 1108, 1099, 965, 980, 1150, 1100, 958, 1060],
               "sizes": [36, 94, 27, 9, 92, 46, 93, 60, 16, 71, 85, 2, 15, 12, 18, 88, 22, 6, 34, 40, 28, 79,
                         3, 77, 73, 23, 55, 7, 38, 51, 18, 13, 85, 11, 52, 2, 84, 84, 63, 50],
               "saved": 28}


def test_verify_passes_over_the_entry_a_roll_past_the_recovery_point_forced_in(tmp_path: Path) -> None:
    """The time file a dead writer rolled after its last saved state holds the entry the roll forces in
    (its largest time) though the state ends before it: verify passes over it as over every entry the
    dead writer put past its recovery point, and the lookups still answer like a scan."""
    path = tmp_path / "store"
    times, sizes, saved = ROLLED_PAST["times"], ROLLED_PAST["sizes"], ROLLED_PAST["saved"]
    messages = [{"topic": "T", "queue_id": 0, "body": b"v%03d" % n + bytes(size), "store_timestamp": when}
                for n, (when, size) in enumerate(zip(times, sizes, strict=True))]
    options = {"layout.interval.bytes": 400, "layout.index.bytes": 36}
    with segstore.open(path, format="rocketmq", mode="a", indexes=["time"], **options) as store:
        store.append_batch(messages[:saved])
    store = segstore.open(path, format="rocketmq", mode="a", indexes=["time"])
    for m in messages[saved:]:
        store.append_batch([m])
    store.abandon()
    with segstore.open(path, format="rocketmq") as store:
        assert store.indexes.verify() == []
        for when in sorted({*times, min(times) - 1, max(times) + 1}):
            want = next((o for o, t in enumerate(times) if t >= when), None)
            assert store.indexes.offset_for_time("T", 0, when) == want, when


@pytest.mark.parametrize("fmt", FORMATS)
def test_recover_says_what_it_did_to_the_extra_indexes(tmp_path: Path, fmt: str) -> None:
    """``segstore recover`` (one line an action) over a store whose extra indexes a killed writer left:
    opening it for append recovered them (entries past the recovery point rebuilt from the log), yet
    it printed "PATH: nothing to recover".  Their lines are among its actions (text and ``--json``)."""
    path = tmp_path / "T-0"
    names = [n for n in LAYOUT_NAMES if not layout_class(n, fmt).native]
    _write(path, fmt, _data(4, 10), indexes=names)
    store = segstore.open(path, format=fmt, mode="a", indexes=names)
    store.append_batch([{"topic": "T", "partition": 0, "value": b"v", "key": b"k1", "timestamp": 5}]
                       if fmt == "kafka" else [{"topic": "T", "queue_id": 0, "body": b"v"}])
    store.abandon()
    out = io.StringIO()
    assert cli.main(["recover", str(path)], out) == 0
    assert "nothing to recover" not in out.getvalue()
    recovered = [line for line in out.getvalue().splitlines() if ": recovered: entries from offset" in line]
    layouts = {n for n in names if any(f"{os.sep}.segstore{os.sep}{n}" in line for line in recovered)}
    assert layouts == set(names)
    assert all(s["clean"] for s in _states(path))
    out = io.StringIO()
    assert cli.main(["recover", str(path), "--json"], out) == 0
    assert not [line for line in json.loads(out.getvalue())["actions"] if ".segstore" in line]


def test_a_torn_extra_queue_file_is_named_by_its_layout_option(tmp_path: Path) -> None:
    """A dense ``queue`` file of the wrong length under a Kafka partition's ``.segstore/`` was reported as
    RocketMQ's: "(mappedFileSizeConsumeQueue) ...: the broker refuses to load it; segstore recover
    resizes it", though no broker reads it and it is rebuilt, not resized.  It names its layout option
    and how to rebuild it."""
    path = tmp_path / "T-0"
    _write(path, "kafka", _data(3, 11), indexes=["queue"])
    (target,) = (path / ".segstore" / "queue").rglob("00000000000000000000")
    target.write_bytes(target.read_bytes()[:-5])
    out = io.StringIO()
    assert cli.main(["index", "verify", str(path), "--index", "queue"], out) == 1
    size = LAYOUT_OPTIONS["layout.queue.file.bytes"]
    assert out.getvalue() == (f"{target}: expected a consume-queue file of {size} bytes "
                              f"(layout.queue.file.bytes), found {size - 5} (rebuild: segstore index build "
                              "PATH --index queue)\n")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_an_index_build_cut_short_by_a_full_disk_is_a_line_and_builds_again(tmp_path: Path, monkeypatch,
                                                                             fmt: str, name: str) -> None:
    """``segstore index build PATH --index key`` over a built index on a full disk: its directory's
    mkdir found no room after its files were let go of, and the clean-up's close flushed them anyway:
    ``AttributeError: 'KeyStreamIndex' object has no attribute 'service'``, a traceback over the
    StorageFullError.  Now exit 1 naming the directory, and the next build and lookups answer as a
    scan.  That next build needs no ``--option`` again: the failed one deleted the index's state, and
    with it the options the index was built with, so a plain build took the defaults; now it writes
    the state (not clean, with the options) before it deletes the files."""
    import errno

    from conftest import cli_run

    if layout_class(name, fmt).native:
        pytest.skip(f"{name} is native to {fmt} stores")
    path = tmp_path / "T-0"
    _write(path, fmt, _data(6, 11), indexes=list(LAYOUT_NAMES))
    options = {option: value for option, value in LAYOUT_OPTIONS.items()
               if option.startswith(("layout.", f"{name}."))}
    built = [state["options"] for state in _states(path) if state["layout"] == name]
    assert built and all(state.items() >= options.items() for state in built)
    real_open, real_remove, real_mkdir = os.open, os.remove, os.mkdir
    removed = []

    def mkdir(target, *args, **kwargs):
        if f"{os.sep}.segstore{os.sep}" in os.fspath(target):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_mkdir(target, *args, **kwargs)

    def remove(target, *args, **kwargs):
        removed.append(target)
        return real_remove(target, *args, **kwargs)

    def open_file(target, *args, **kwargs):     # once the build removed a file: room for the state only
        if removed and f"{os.sep}.segstore{os.sep}" in os.fspath(target) and not os.fspath(target).endswith(
                ("state.json", "state.json.tmp")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(target, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(os, "mkdir", mkdir)
        patched.setattr(os, "remove", remove)
        patched.setattr(os, "open", open_file)
        code, _, err = cli_run("index", "build", path, "--index", name)
    assert code == 1, err
    assert "expected room on the device" in err and "Traceback" not in err, err
    code, _, err = cli_run("index", "build", path, "--index", name)
    assert code == 0, err
    built = [state["options"] for state in _states(path) if state["layout"] == name]
    assert built and all(state.items() >= options.items() for state in built)
    assert cli_run("index", "verify", path, "--index", name)[0] == 0
    with segstore.open(path, format=fmt, indexes=list(LAYOUT_NAMES)) as store:
        check_against_scan(store, store.indexes)
