"""IndexFile: layout, the broker's hash, puts byte-identical to the broker's, key queries as the broker's."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_rocketmq import indexfile as ix
from segstore_rocketmq import message as msgcodec
from segstore_rocketmq.javacompat import string_hash
from segstore_rocketmq.query import query_by_key

import segstore
from segstore import files
from segstore.errors import CorruptIndexError
from segstore.indexes import keyhash

ROCKETMQ = FIXTURES / "rocketmq"


def _fixture_lines(name: str, kind: str) -> list[dict]:
    with open(ROCKETMQ / name / "dump.jsonl", encoding="utf-8") as f:
        return [d for d in map(json.loads, f) if d["type"] == kind]


def _config(name: str) -> dict:
    with open(ROCKETMQ / name / "spec.json", encoding="utf-8") as f:
        return json.load(f)["config"]


class CommitLogReader:
    """Reads messages at physical offsets from a fixture's commitlog files (test helper)."""

    def __init__(self, store_dir: str, file_size: int) -> None:
        directory = os.path.join(store_dir, "commitlog")
        self.file_size = file_size
        self.data = {int(n): files.read_bytes(os.path.join(directory, n)) for n in files.list_dir(directory)}

    def __call__(self, phy: int) -> msgcodec.RocketMQMessage | None:
        base = phy - phy % self.file_size
        buf = self.data.get(base)
        if buf is None:
            return None
        rec = msgcodec.decode(buf, phy - base)
        return rec if isinstance(rec, msgcodec.RocketMQMessage) else None


def _service(store_dir: str, config: dict) -> ix.IndexService:
    service = ix.IndexService(
        os.path.join(store_dir, "index"), config["maxHashSlotNum"], config["maxIndexNum"]
    )
    assert service.load() == []
    return service


# -- the hash -----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=20))
def test_vectorised_hash_equals_java_string_hash(keys):
    expected = []
    for k in keys:
        h = abs(string_hash(k))
        expected.append(0 if h == 2**31 else h)
    assert ix.index_key_hashes(keys).tolist() == expected
    assert [ix.index_key_hash(k) for k in keys] == expected


def test_hash_of_min_value_is_zero():
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, a classic Java example
    assert string_hash("polygenelubricants") == -(2**31)
    assert ix.index_key_hash("polygenelubricants") == 0


def test_layout_sizes():
    assert ix.HEADER.size == 40
    assert ix.ENTRY_DTYPE.itemsize == 20
    assert ix.file_size(64, 256) == 5416


# -- the fixture files --------------------------------------------------------------


@pytest.mark.parametrize("name", ["basic", "abort"])
def test_headers_equal_the_brokers(name):
    config = _config(name)
    service = _service(str(ROCKETMQ / name / "store"), config)
    on_disk = {d["name"]: d["rawHeader"] for d in _fixture_lines(name, "indexfileOnDisk")}
    assert [f.name for f in service.files] == sorted(on_disk)
    for f in service.files:
        raw = on_disk[f.name]
        h = f.header
        assert (
            h.begin_timestamp,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
            h.hash_slot_count,
            h.index_count,
        ) == (
            raw["beginTimestamp"],
            raw["endTimestamp"],
            raw["beginPhyOffset"],
            raw["endPhyOffset"],
            raw["hashSlotCount"],
            raw["indexCount"],
        )
    service.close()


@pytest.mark.parametrize("name", ["basic", "abort"])
def test_key_queries_equal_the_brokers(name):
    store_dir = str(ROCKETMQ / name / "store")
    config = _config(name)
    service = _service(store_dir, config)
    reader = CommitLogReader(store_dir, config["mappedFileSizeCommitLog"])
    queries = _fixture_lines(name, "query")
    assert queries
    for q in queries:
        hits = query_by_key(service, q["topic"], q["key"], reader)
        assert [m.physical_offset for m in hits] == [h["physicalOffset"] for h in q["hits"]], q["key"]
        assert [m.msg_id for m in hits] == [h["msgId"] for h in q["hits"]]
    service.close()


def _requests_from_commitlog(store_dir: str, file_size: int) -> list[ix.IndexRequest]:
    reader = CommitLogReader(store_dir, file_size)
    out = []
    for base in sorted(reader.data):
        buf, pos = reader.data[base], 0
        while True:
            rec = msgcodec.decode(buf, pos)
            if not isinstance(rec, msgcodec.RocketMQMessage):
                break
            out.append(
                ix.IndexRequest(
                    rec.topic,
                    rec.physical_offset,
                    rec.store_timestamp,
                    rec.properties.get("UNIQ_KEY"),
                    rec.properties.get("KEYS"),
                    rec.sys_flag,
                )
            )
            pos += rec.size
    return out


@pytest.mark.parametrize("name", ["basic", "abort"])
@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_rebuilt_index_files_are_byte_identical(tmp_path, name, batch):
    """Indexing the fixture's commitlog again writes the broker's index files byte for byte."""
    store_dir = str(ROCKETMQ / name / "store")
    config = _config(name)
    requests = _requests_from_commitlog(store_dir, config["mappedFileSizeCommitLog"])
    clock = iter(range(10**12, 10**12 + 1000))
    service = ix.IndexService(
        str(tmp_path / "index"),
        config["maxHashSlotNum"],
        config["maxIndexNum"],
        writable=True,
        clock=lambda: next(clock),
    )
    for start in range(0, len(requests), batch):
        service.put_batch(requests[start : start + batch])
    service.flush()
    mine = [files.read_bytes(f.path) for f in service.files]
    service.close()
    theirs_dir = ROCKETMQ / name / "store" / "index"
    theirs = [files.read_bytes(theirs_dir / n) for n in files.list_dir(theirs_dir)]
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):
        assert a == b


# -- behaviour ------------------------------------------------------------------------


def _oracle_put(entries, slot_num, index_num):
    """A straight per-entry transcription of the broker's putKey, to check the batch put."""
    header = dict(begin_ts=0, end_ts=0, begin_phy=0, end_phy=0, slots_used=0, count=1)
    slots = [0] * slot_num
    rows = [None] * index_num
    for h, phy, ts in entries:
        if header["count"] >= index_num:
            break
        slot = h % slot_num
        value = slots[slot]
        if value <= 0 or value > header["count"]:
            value = 0
        diff = (ts - header["begin_ts"]) // 1000
        diff = 0 if header["begin_ts"] <= 0 else max(0, min(diff, 2**31 - 1))
        rows[header["count"]] = (h, phy, diff, value)
        slots[slot] = header["count"]
        if header["count"] <= 1:
            header["begin_phy"], header["begin_ts"] = phy, ts
        if value == 0:
            header["slots_used"] += 1
        header["count"] += 1
        header["end_phy"], header["end_ts"] = phy, ts
    return header, slots, rows


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**40), st.integers(0, 10**6)), max_size=40),
    st.integers(1, 9),
)
def test_batch_put_equals_per_entry_oracle(tmp_path_factory, raw, batch):
    entries = []
    ts, phy = 1_700_000_000_000, 0
    for h, dphy, dts in raw:
        phy += dphy
        ts += dts
        entries.append((h, phy, ts))
    path = str(tmp_path_factory.mktemp("idx") / "20240101000000000")
    f = ix.IndexFile.create(path, 7, 16)
    arr = np.array(entries, dtype=np.int64).reshape(-1, 3)
    for start in range(0, len(entries), batch):
        chunk = arr[start : start + batch]
        f.put(chunk[:, 0], chunk[:, 1], chunk[:, 2])
    header, slots, rows = _oracle_put(entries, 7, 16)
    assert f.slots.tolist() == slots
    for n in range(1, header["count"]):
        assert tuple(int(x) for x in f.entries_all[n]) == rows[n]
    h = f.header
    assert (
        h.begin_timestamp,
        h.end_timestamp,
        h.begin_phy_offset,
        h.end_phy_offset,
        h.hash_slot_count,
        h.index_count,
    ) == (
        header["begin_ts"],
        header["end_ts"],
        header["begin_phy"],
        header["end_phy"],
        header["slots_used"],
        header["count"],
    )
    f.close()


def _request(topic, phy, ts, *keys, uniq=None, sys_flag=0):
    return ix.IndexRequest(topic, phy, ts, uniq, " ".join(keys) if keys else None, sys_flag)


def test_rollover_starts_from_previous_end_and_full_file_holds_max_minus_one(tmp_path):
    clock = iter([1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001])
    full_at = []
    service = ix.IndexService(
        str(tmp_path / "index"), 4, 5, writable=True, clock=lambda: next(clock), on_file_full=full_at.append
    )
    requests = [_request("T", 100 * i, 1_700_000_000_000 + 1000 * i, f"k{i}") for i in range(6)]
    assert service.put_batch(requests) == 6
    names = [f.name for f in service.files]
    assert len(names) == 2 and names[0] != names[1]  # same millisecond: the name moves on
    first, second = service.files
    assert first.count == 4 and first.is_full
    assert full_at == [first.header.end_timestamp]
    assert second.header.begin_phy_offset == 400 and second.header.end_phy_offset == 500
    assert second.count == 2
    service.close()
    reopened = ix.IndexService(str(tmp_path / "index"), 4, 5)
    reopened.load()
    assert [list(reopened.query("T", f"k{i}")) for i in range(6)] == [[100 * i] for i in range(6)]
    reopened.close()


def test_rollback_not_indexed_and_replays_skipped(tmp_path):
    service = ix.IndexService(str(tmp_path / "index"), 8, 32, writable=True)
    assert (
        service.put_batch(
            [
                _request("T", 0, 1, "a", uniq="U0"),
                _request("T", 50, 2, "b", sys_flag=0xC),
                _request("T", 90, 3, "c", "", "d"),
            ]
        )
        == 4
    )
    assert service.put_batch([_request("T", 0, 1, "a")]) == 0  # below endPhyOffset: a replay
    assert list(service.query("T", "b")) == []
    assert list(service.query("T", "d")) == [90]
    service.close()


def test_collision_never_returns_another_topics_message(tmp_path):
    """Keys whose hashes collide in a tiny slot table: the commitlog check filters them."""
    service = ix.IndexService(str(tmp_path / "index"), 1, 64, writable=True)
    messages = {}
    rng = random.Random(7)
    for i in range(30):
        topic = rng.choice(["A", "B"])
        key = rng.choice(["x", "y", "z"])
        messages[i * 10] = msgcodec.RocketMQMessage(
            topic=topic, queue_id=0, properties={"KEYS": key}, physical_offset=i * 10
        )
        service.put_batch([_request(topic, i * 10, 1000 + i, key)])
    for topic in "AB":
        for key in "xyz":
            got = [m.physical_offset for m in query_by_key(service, topic, key, messages.get, max_hits=100)]
            want = sorted(p for p, m in messages.items() if m.topic == topic and m.keys == [key])
            assert got == want
            newest = [m.physical_offset for m in query_by_key(service, topic, key, messages.get, max_hits=2)]
            assert newest == want[-2:]
    service.close()


def test_time_window(tmp_path):
    service = ix.IndexService(str(tmp_path / "index"), 16, 64, writable=True)
    base = 1_700_000_000_000
    service.put_batch([_request("T", i, base + 10_000 * i, "k") for i in range(10)])
    assert list(service.query("T", "k", base + 20_000, base + 50_000)) == [5, 4, 3, 2]
    service.close()


def test_wrong_size_file_is_a_typed_error(tmp_path):
    path = tmp_path / "20240101000000000"
    files.write_atomic(path, bytes(100))
    with pytest.raises(CorruptIndexError) as err:
        ix.IndexFile.open(str(path), 64, 256)
    assert str(path) in str(err.value) and "5416" in str(err.value)
    service = ix.IndexService(str(tmp_path), 64, 256)
    assert service.load() == ["20240101000000000"]


#: Seven entries of a 3-slot file, in slots 0,1,0,1,0,1,0: their hashes, commitlog offsets, store times.
SEVEN = (np.array([0, 1, 3, 4, 6, 7, 9], dtype=np.int64), np.arange(7, dtype=np.int64) * 100,
         1_700_000_000_000 + np.arange(7, dtype=np.int64) * 100)


def test_truncate_restores_slots_along_chains(tmp_path):
    f = ix.IndexFile.create(str(tmp_path / "20240101000000000"), 3, 32)
    hashes, phys, stamps = SEVEN
    f.put(hashes[:4], phys[:4], stamps[:4])
    snapshot = (f.slots.copy(), f.header.pack())
    f.put(hashes[4:], phys[4:], stamps[4:])
    f.truncate(4, int(stamps[3]))
    assert f.slots.tolist() == snapshot[0].tolist()
    assert f.header.pack() == snapshot[1]
    assert not any(f.file.read(f.entry_pos(5), f.entry_pos(8) - f.entry_pos(5)))
    f.close()


def test_truncate_walks_back_slots_of_a_put_killed_before_its_header(tmp_path):
    """A writer killed inside ``put`` leaves the batch's entries and slots written and the header's
    count before them (``put`` writes the header last).  Recovery keeps the counted entries: each slot
    the batch moved goes back along its chain to the newest counted entry of its slot (CI once cut
    such a slot to 0, and the next put linked entry 14 to 0 instead of entry 3)."""
    f = ix.IndexFile.create(str(tmp_path / "20240101000000000"), 3, 32)
    hashes, phys, stamps = SEVEN
    f.put(hashes[:4], phys[:4], stamps[:4])
    slots_before, header_before = f.slots.copy(), f.header.pack()
    f.put(hashes[4:], phys[4:], stamps[4:])
    f.close()
    with open(tmp_path / "20240101000000000", "r+b") as raw:
        raw.write(header_before)             # the kill: the second batch's header never written
    f = ix.IndexFile.open(str(tmp_path / "20240101000000000"), 3, 32, writable=True)
    assert f.header.index_count == 5 and (f.slots > 4).any()
    f.truncate(4, int(stamps[3]))
    assert f.slots.tolist() == slots_before.tolist()
    f.put(hashes[4:], phys[4:], stamps[4:])     # put again, as recovery does: entry 5 links to entry 3
    assert f.chain_faults() == []
    assert int(f.entries_all[5]["prev"]) == 3
    f.close()


def test_truncate_finds_a_slot_again_when_damage_broke_its_chain(tmp_path):
    """A slot that damage aimed past the count at an entry of another slot (or out of the file) is not
    walked into that slot's chain, nor cut to 0 (which hid its older keys from every lookup): it takes
    the newest kept entry of its own slot, as a file given only the kept entries has it."""
    hashes, phys, stamps = SEVEN
    fresh = ix.IndexFile.create(str(tmp_path / "fresh"), 3, 32)
    fresh.put(hashes[:4], phys[:4], stamps[:4])
    # entry 6 is slot 1's (its chain: 4, 2) and entry 7 slot 0's (5, 3, 1); 40 is past the file's
    # 32 entries; (7, 6) is the file undamaged
    for n, (zero, one) in enumerate([(6, 7), (40, 40), (-5, -5), (7, 6)]):
        f = ix.IndexFile.create(str(tmp_path / f"damaged{n}"), 3, 32)
        f.put(hashes, phys, stamps)
        f.slots[0], f.slots[1] = zero, one
        f.truncate(4, int(stamps[3]))
        assert f.slots.tolist() == fresh.slots.tolist() == [3, 4, 0]
        assert f.chain_faults() == []
        f.close()
    fresh.close()


# -- through the store and the CLI ------------------------------------------------------


@pytest.mark.parametrize("name", ["basic", "abort"])
def test_spec_replay_writes_the_brokers_index_files(tmp_path, name):
    """``segstore write --spec`` (the plugin's write_spec) writes the broker's index files byte for byte."""
    from segstore import registry

    with open(ROCKETMQ / name / "spec.json", encoding="utf-8") as f:
        spec = json.load(f)
    out = tmp_path / "store"
    registry.get("rocketmq").write_spec(str(out), spec, spec["config"])
    mine = [files.read_bytes(out / "index" / n) for n in files.list_dir(out / "index")]
    theirs_dir = ROCKETMQ / name / "store" / "index"
    theirs = [files.read_bytes(theirs_dir / n) for n in files.list_dir(theirs_dir)]
    assert len(mine) == len(theirs) >= 1
    for a, b in zip(mine, theirs, strict=True):
        assert a == b


def test_cli_key_query_json_equals_the_brokers_hits(tmp_path, capsys):
    from segstore.cli import main

    path = str(ROCKETMQ / "basic" / "store")
    for q in [d for d in _fixture_lines("basic", "query") if len(d["hits"]) > 1][:5]:
        code = main(["query", path, "--topic", q["topic"], "--key", q["key"], "--max", "64", "--json"])
        got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert code == 0
        assert [(g["physical_offset"], g["msg_id"]) for g in got] == [
            (h["physicalOffset"], h["msgId"]) for h in q["hits"]
        ]
    assert main(["query", path, "--topic", "TopicA", "--key", "no-such-key"]) == 1


def test_cli_time_and_offset_queries(capsys):
    from segstore.cli import main

    path = str(ROCKETMQ / "basic" / "store")
    messages = [d for d in _fixture_lines("basic", "message") if d["topic"] == "TopicA" and d["queueId"] == 1]
    messages.sort(key=lambda d: d["queueOffset"])
    target = messages[10]
    assert (
        main(
            [
                "query",
                path,
                "--topic",
                "TopicA",
                "--queue",
                "1",
                "--timestamp",
                str(target["storeTimestamp"]),
                "--json",
            ]
        )
        == 0
    )
    answer = json.loads(capsys.readouterr().out)
    first = min(d["queueOffset"] for d in messages if d["storeTimestamp"] >= target["storeTimestamp"])
    assert answer["offset"] == first
    assert (
        main(["query", path, "--topic", "TopicA", "--queue", "1", "--offset", "3", "--count", "2", "--json"])
        == 0
    )
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [g["queue_offset"] for g in got] == [3, 4]


def test_geometry_on_disk(tmp_path):
    assert ix.geometry_on_disk(str(ROCKETMQ / "basic" / "store" / "index")) == {
        "maxHashSlotNum": 64,
        "maxIndexNum": 256,
    }
    service = ix.IndexService(str(tmp_path), 7, 30, writable=True)
    service.put_batch([_request("T", 100 * i, 1_700_000_000_000 + i, f"k{i}") for i in range(1, 9)])
    service.close()
    assert ix.geometry_on_disk(str(tmp_path)) == {"maxHashSlotNum": 7, "maxIndexNum": 30}
    assert ix.geometry_on_disk(str(tmp_path / "missing")) == {}


def test_geometry_of_a_large_file_reads_no_slots(tmp_path, monkeypatch):
    """Above ``GEOMETRY_SEARCH_LIMIT`` only the broker's 1:4 split is tried, and its slots are not read to
    check it: the chain check over a default file's 5M slots cost every open of such a store 74 ms and
    56 MB (``benchmarks/bench_columnar.py``: scan_arrow 0.94x the hop loop)."""
    from segstore.indexes import keyhash

    config = {"maxHashSlotNum": 100_000, "maxIndexNum": 400_000}
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **config) as store:
        store.append_batch([{"topic": "T", "body": b"x", "keys": [f"k{i}"]} for i in range(50)])
    (index_file,) = (tmp_path / "s" / "index").iterdir()
    assert index_file.stat().st_size > keyhash.GEOMETRY_SEARCH_LIMIT

    def refused(*args):
        raise AssertionError("the slots of a large index file were read")

    monkeypatch.setattr(keyhash, "_chains_fit", refused)
    assert ix.geometry_on_disk(str(tmp_path / "s" / "index")) == config


@pytest.mark.parametrize("slots, entries", [(8, 64), (21, 63)])
def test_geometry_of_messages_with_two_keys_from_offset_0_is_the_one_the_slots_agree_with(tmp_path, slots,
                                                                                          entries):
    """An index file's size is ``40 + 4 * slots + 20 * entries``: 1352 bytes are 8 slots and 64 entries
    (as written) but also 3 and 65.  Read with 3 slots, the unused entry 0 of the real file (offset 0)
    and the last message's second key (offset 660) sit where the header's begin and end offsets are
    looked for, so the split was taken: a store opened without ``maxHashSlotNum``/``maxIndexNum``
    answered ``queryMessage`` for a key of all 7 messages with 1 of them (the 4.9.7 broker, given the
    config as the file was written, finds all 7: ``IndexFile.selectPhyOffset``, storage oracle).
    The split whose slots head chains of their own hashes (``keyHash % hashSlotNum``) is the file's.
    21 slots and 63 entries (1344 bytes) also fit the broker's 1:4 ratio, 16 and 64, which was taken
    whenever its probed entries matched: every key query found nothing."""
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       maxHashSlotNum=slots, maxIndexNum=entries) as store:
        for i in range(7):
            store.append({"topic": "TsT", "queue_id": 0, "body": b"t%d" % i, "keys": [f"ts{i}", "tsall"],
                          "store_timestamp": 1_700_000_000_000})
        offsets = [m.physical_offset for m in store.scan()]
    assert offsets[0] == 0
    assert ix.geometry_on_disk(str(tmp_path / "s" / "index")) == {"maxHashSlotNum": slots,
                                                                   "maxIndexNum": entries}
    with segstore.open(tmp_path / "s") as store:
        assert [m.physical_offset for m in store.query_by_key("TsT", "tsall")] == offsets
        assert [m.physical_offset for m in store.query_by_key("TsT", "ts6")] == offsets[6:]
        assert store.verify() == []


def test_cli_query_without_topic_is_a_usage_error(capsys):
    from segstore.cli import main

    assert main(["query", str(ROCKETMQ / "basic" / "store"), "--key", "k"]) == 2
    assert "--topic" in capsys.readouterr().err


# -- a clean reopen keeps the newest index file's first message ---------------------------
# The broker's IndexService.putKey rolls to a new file (getAndCreateLastIndexFile: begin = the
# full file's end offset and time) when IndexFile.putKey finds indexCount == maxIndexNum, so the
# newest file may hold only one message's keys; a clean restart keeps every index file
# (IndexService.load) and queryOffset/selectPhyOffset find those keys (rocketmq-all-4.9.7).
ROLL_CONFIG = {"mappedFileSizeCommitLog": 8 * 1024, "mappedFileSizeConsumeQueue": 20 * 16,
               "maxHashSlotNum": 8, "maxIndexNum": 32}
ROLL_CLOCK = 1_700_000_000_000


def _index_bytes(store_dir) -> dict[str, bytes]:
    directory = os.path.join(store_dir, "index")
    return {n: files.read_bytes(os.path.join(directory, n)) for n in files.list_dir(directory)}


def _append(store_dir, keys_per_message: list[list[str]], stamps: list[int]) -> None:
    import segstore

    with segstore.open(store_dir, format="rocketmq", mode="a", **ROLL_CONFIG) as store:
        store.append_batch([{"topic": "T", "queue_id": 0, "body": b"x", "keys": keys, "store_timestamp": ts}
                            for keys, ts in zip(keys_per_message, stamps, strict=True)])


@pytest.mark.parametrize("pure", [False, True], ids=["c", "python"])
@pytest.mark.parametrize(
    ("last_keys", "gap_ms", "in_full_file"),
    [
        (["k3"], 0, 0),  # the hypothesis example of test_layouts_lookup: the newest hit went missing
        (["k3"], 5_000, 0),  # the new file's first time diff is measured from the full file's end time
        (["k3", "a", "b"], 0, 1),  # a message whose keys span the roll: 1 key in the full file, 2 in the new
    ],
)
def test_clean_reopen_keeps_a_file_holding_one_message(tmp_path, monkeypatch, capsys, pure, last_keys, gap_ms,
                                                       in_full_file):
    from segstore.cli import main

    if pure:
        monkeypatch.setattr(keyhash, "_speedups", None)  # the core put takes the plugin's C
    store_dir = tmp_path / "T-0"
    fill = ROLL_CONFIG["maxIndexNum"] - 1 - in_full_file  # single-key messages before the last one
    keys = [[f"f{i % 5}"] for i in range(fill)] + [last_keys]
    stamps = [ROLL_CLOCK + i for i in range(fill)] + [ROLL_CLOCK + fill - 1 + gap_ms]
    _append(store_dir, keys, stamps)
    written = _index_bytes(store_dir)
    first, newest = (ix.IndexFile.open(os.path.join(store_dir, "index", n), 8, 32) for n in sorted(written))
    assert first.is_full and newest.count == len(last_keys) - in_full_file
    assert newest.entries["time_diff"][0] == gap_ms // 1000
    last_phy = int(newest.header.begin_phy_offset)
    first.close()
    newest.close()

    _append(store_dir, [], [])  # a clean reopen for append runs recovery: the files must stay as they are
    assert _index_bytes(store_dir) == written

    import segstore

    with segstore.open(store_dir, format="rocketmq") as store:
        for key in last_keys:
            assert [m.physical_offset for m in store.query_by_key("T", key)] == [last_phy]
    code = main(["query", str(store_dir), "--topic", "T", "--key", "k3", "--json"])
    assert code == 0
    hits = [json.loads(line)["physical_offset"] for line in capsys.readouterr().out.splitlines()]
    assert hits == [last_phy]


def test_reopen_puts_the_keys_a_crash_left_out_of_a_message_spanning_the_roll(tmp_path):
    """The newest file lost the last key of a message that began in the full file: recovery puts it
    again after the keys the full file holds, and the files come back as the broker wrote them."""
    store_dir = tmp_path / "T-0"
    fill = ROLL_CONFIG["maxIndexNum"] - 2
    _append(store_dir, [[f"f{i % 5}"] for i in range(fill)] + [["k3", "a", "b"]],
            [ROLL_CLOCK + i for i in range(fill + 1)])
    written = _index_bytes(store_dir)
    newest_name = sorted(written)[-1]
    newest = ix.IndexFile.open(os.path.join(store_dir, "index", newest_name), 8, 32, writable=True)
    assert newest.count == 2
    newest.truncate(1, newest.header.end_timestamp)  # as if the broker died between the two puts
    newest.close()
    assert _index_bytes(store_dir) != written
    _append(store_dir, [], [])
    assert _index_bytes(store_dir) == written


@pytest.mark.parametrize("how", ["append", "append_batch", "append_stored"])
def test_a_message_without_keys_opens_the_index_file_as_the_broker_does(tmp_path, how):
    """RocketMQ 4.9.7 ``CommitLogDispatcherBuildIndex.dispatch`` -> ``IndexService.buildIndex`` calls
    ``retryGetAndCreateIndexFile`` for every dispatched message, keys or not: the first message of a
    store makes an IndexFile (no entries) even without keys; ``messageIndexEnable=false`` none."""
    import segstore

    message = {"topic": "T", "queue_id": 0, "body": b"x"}
    with segstore.open(str(tmp_path / "source"), "rocketmq", "a", messageIndexEnable=False) as source:
        source.append(message)
        stored = list(source.read("T", 0))
    for enabled in (True, False):
        path = tmp_path / f"{how}-{enabled}"
        with segstore.open(str(path), "rocketmq", "a", messageIndexEnable=enabled) as store:
            if how == "append":
                store.append(message)
            elif how == "append_batch":
                store.append_batch([message, message])
            else:
                store.append_stored(stored)
        names = os.listdir(path / "index") if (path / "index").exists() else []
        assert len(names) == (1 if enabled else 0), names
        if enabled:
            geometry = keyhash.geometry_on_disk(str(path / "index"))
            index = keyhash.IndexFile.open(str(path / "index" / names[0]), geometry["maxHashSlotNum"],
                                           geometry["maxIndexNum"])
            assert index.count == 0
            index.close()


@pytest.mark.parametrize("put", ["c", "numpy"])
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.data())
def test_truncate_after_a_put_killed_before_its_header_equals_putting_only_what_is_kept(
        tmp_path_factory, put, slot_num, data) -> None:
    """A put killed before its header (entries and slots written, the count not), then recovery's
    truncate to any ``keep`` of the counted entries: the same slots, header and kept entries as a file
    that was only ever given those ``keep`` entries.  Both puts write the header last."""
    with pytest.MonkeyPatch.context() as mp:
        if put == "numpy":
            mp.setattr(keyhash, "_speedups", None)
        _truncate_after_a_killed_put(tmp_path_factory, slot_num, data)


def _truncate_after_a_killed_put(tmp_path_factory, slot_num: int, data) -> None:
    index_num = 40
    counted = data.draw(st.integers(1, 15))
    torn = data.draw(st.integers(1, 15))
    keep = data.draw(st.integers(1, counted))
    hashes = data.draw(st.lists(st.integers(0, 2**31 - 1), min_size=counted + torn, max_size=counted + torn))
    phys = [4096 + 100 * i for i in range(counted + torn)]
    stamps = [1_700_000_000_000 + 1_500 * i for i in range(counted + torn)]
    where = tmp_path_factory.mktemp("torn")
    f = ix.IndexFile.create(str(where / "20240101000000000"), slot_num, index_num, 4096, 1_700_000_000_000)
    f.put(hashes[:counted], phys[:counted], stamps[:counted])
    header = f.header.pack()
    f.put(hashes[counted:], phys[counted:], stamps[counted:])
    f.close()
    with open(where / "20240101000000000", "r+b") as raw:
        raw.write(header)
    f = ix.IndexFile.open(str(where / "20240101000000000"), slot_num, index_num, writable=True)
    f.truncate(keep, stamps[keep - 1])
    g = ix.IndexFile.create(str(where / "20240101000000001"), slot_num, index_num, 4096, 1_700_000_000_000)
    g.put(hashes[:keep], phys[:keep], stamps[:keep])
    assert f.slots.tolist() == g.slots.tolist()
    assert f.header.pack() == g.header.pack()
    assert f.entries.tobytes() == g.entries.tobytes()
    f.close()
    g.close()


def _reference_truncate(f: keyhash.IndexFile, keep: int, end_timestamp: int, start_phy_offset: int = 0,
                        start_timestamp: int = 0) -> None:
    """``IndexFile.truncate`` slot by slot in plain Python, the reference the vectorized one must equal
    byte for byte: a slot pointing past the kept entries walks back along its chain; where the walk
    meets damage (a slot outside the file, a link that does not go back, an entry of another slot)
    the slot takes the newest kept entry of its own slot instead."""
    new_count = ix.FIRST_ENTRY + keep
    old_count = max(f.header.index_count, new_count)
    slots = f.slots.astype(np.int64)
    prevs = f.entries_all["prev"].astype(np.int64)
    owners = f.entries_all["hash"].astype(np.int64) % f.slot_num
    newest = {}
    for n in range(ix.FIRST_ENTRY, new_count):
        newest[int(owners[n])] = n
    for slot in range(f.slot_num):
        at = int(slots[slot])
        if ix.INVALID_INDEX <= at < new_count:
            continue
        whole = 0 <= at < f.index_num
        while whole and at >= new_count:
            older = int(prevs[at])
            whole = ix.INVALID_INDEX <= older < at and owners[at] == slot
            at = older
        if whole and at != ix.INVALID_INDEX:
            whole = owners[at] == slot
        slots[slot] = at if whole else newest.get(slot, ix.INVALID_INDEX)
    f.slots[:] = slots
    f.file.write(f.entry_pos(new_count), bytes((old_count - new_count) * ix.ENTRY_DTYPE.itemsize))
    header = f.header
    header.index_count = new_count
    header.hash_slot_count = int(np.count_nonzero(slots))
    if keep > 0:
        header.end_phy_offset = int(f.entries_all[new_count - 1]["phy_offset"])
        header.end_timestamp = end_timestamp
    else:
        header.begin_phy_offset = header.end_phy_offset = start_phy_offset
        header.begin_timestamp = header.end_timestamp = start_timestamp
    f.write_header()


_INT32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(2, 24), st.data())
def test_truncate_equals_the_whole_table_reference(tmp_path_factory, slot_num, index_num, data) -> None:
    """Byte-identical to :func:`_reference_truncate` on put files and on damaged ones (slots and links
    pointing anywhere, a count the file does not hold), every ``keep``."""
    puts = data.draw(st.integers(0, index_num - 1))
    hashes = data.draw(st.lists(st.integers(0, 2**31 - 1), min_size=puts, max_size=puts))
    keep = data.draw(st.integers(0, index_num - 1))
    damage = data.draw(st.lists(st.tuples(st.sampled_from(["slot", "prev", "count"]), st.integers(0, 10**6),
                                          _INT32), max_size=4))
    where = tmp_path_factory.mktemp("trunc")
    path = str(where / "20240101000000000")
    f = ix.IndexFile.create(path, slot_num, index_num, 4096, 1_700_000_000_000)
    if puts:
        f.put(hashes, [4096 + 100 * i for i in range(puts)], [1_700_000_000_000 + 7 * i for i in range(puts)])
    f.flush()
    f.close()
    raw = bytearray(open(path, "rb").read())
    for kind, at, value in damage:
        if kind == "slot":
            pos = ix.HEADER.size + (at % slot_num) * 4
        elif kind == "prev":
            pos = ix.HEADER.size + slot_num * 4 + (at % index_num) * ix.ENTRY_DTYPE.itemsize + 16
        else:
            pos = ix.INDEX_COUNT_POS
            value = at % (index_num + 3)
        raw[pos:pos + 4] = value.to_bytes(4, "big", signed=True)
    copies = []
    for name, truncate in (("new", ix.IndexFile.truncate), ("reference", _reference_truncate)):
        copy = where / name / "20240101000000000"
        copy.parent.mkdir()
        copy.write_bytes(raw)
        g = ix.IndexFile.open(str(copy), slot_num, index_num, writable=True)
        truncate(g, keep, 1_700_000_009_999, 512, 1_600_000_000_000)
        g.flush()
        g.close()
        copies.append(copy.read_bytes())
    assert copies[0] == copies[1]


FULL_CONFIG = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 4,
               "maxIndexNum": 3}


@pytest.mark.parametrize("how", ["append_batch", "append_batch_general", "append_arrow"])
def test_a_message_after_the_one_that_fills_the_index_file_opens_the_next(tmp_path, how):
    """RocketMQ 4.9.7 ``IndexService.buildIndex`` begins with ``retryGetAndCreateIndexFile`` for every
    message dispatched, keys or not, and ``getAndCreateLastIndexFile`` makes a new file (begin and end
    fields the full file's end offset and time, ``IndexFile``'s constructor) whenever the last one
    ``isWriteFull``.  So in one batch, a keyless message after the message whose keys filled the file
    opens the next file.  Before the fix only the next append opened it: a store closed after such a
    batch held one IndexFile fewer than the broker's."""
    import pyarrow as pa

    clock = iter(range(ROLL_CLOCK, ROLL_CLOCK + 100_000, 1_000))
    extra = {"properties": {"u": "v"}} if how == "append_batch_general" else {}
    items = [{"topic": "T", "queue_id": 0, "body": b"first", **extra},
             {"topic": "T", "queue_id": 0, "body": b"keyed", "keys": ["a", "b"], **extra},     # fills it
             {"topic": "T", "queue_id": 0, "body": b"after", **extra}]
    source = tmp_path / "source"
    with segstore.open(str(source), "rocketmq", "a", **FULL_CONFIG) as store:
        store.append_batch(items)
        if how == "append_arrow":
            table = pa.Table.from_batches(list(store.scan_arrow()))
    if how == "append_arrow":
        from segstore_rocketmq.store import RocketMQStore
        copied = tmp_path / "copied"
        with RocketMQStore(str(copied), "a", FULL_CONFIG, clock=lambda: next(clock)) as store:
            store.append_arrow(table)
        source = copied
    names = sorted(os.listdir(source / "index"))
    assert len(names) == 2, names
    full, opened = (ix.IndexFile.open(str(source / "index" / n), 4, 3) for n in names)
    keyed = int(full.header.end_phy_offset)
    assert full.is_full and keyed > 0
    assert opened.count == 0
    assert (opened.header.begin_phy_offset, opened.header.end_phy_offset) == (keyed, keyed)
    assert opened.header.begin_timestamp == opened.header.end_timestamp == full.header.end_timestamp
    full.close()
    opened.close()


@pytest.mark.parametrize("first_at_zero", [False, True])
def test_a_clean_reopen_keeps_a_message_whose_keys_span_three_files(tmp_path, first_at_zero):
    """``maxIndexNum`` 2: one entry a file, so a message of three keys spans three files
    (``IndexService.putKey`` rolls at each key).  A clean restart of the 4.9.7 broker keeps every index
    file (``IndexService.load`` with ``lastExitOK``) and dispatches again only past the consume queues'
    end (``DefaultMessageStore.start``: ``reputFromOffset``), so a reopen leaves the files as they are.
    Before the fix the reopen's recovery counted the message's keys in the file before the last only,
    put the others again and rewrote the last file (and made one more)."""
    config = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 4,
              "maxIndexNum": 2}
    store_dir = str(tmp_path / "s")
    first = [] if first_at_zero else [{"topic": "T", "queue_id": 0, "body": b"w"}]
    with segstore.open(store_dir, "rocketmq", "a", **config) as store:
        store.append_batch([*first, {"topic": "T", "queue_id": 0, "body": b"x", "keys": ["k3", "k0", "k1"]}])
    written = _index_bytes(store_dir)
    assert len(written) == 3
    with segstore.open(store_dir, "rocketmq", "a", **config):
        pass
    assert _index_bytes(store_dir) == written
    with segstore.open(store_dir, "rocketmq", **config) as store:
        assert all(len(list(store.query_by_key("T", k))) == 1 for k in ("k3", "k0", "k1"))


@pytest.mark.parametrize("after_full", [False, True])
def test_an_index_file_without_entries_keeps_index_count_0_on_disk(tmp_path, after_full):
    """4.9.7 ``IndexHeader`` holds ``indexCount`` 1 in memory from the start but writes it to the file only
    in ``incIndexCount`` (a key put) and ``updateByteBuffer`` (``IndexFile.flush``, which
    ``IndexService.flush`` runs only for the full file a new one follows; ``IndexService.shutdown`` does
    nothing), so a file the broker opened for a keyless message keeps 0 there, and the begin/end fields
    its constructor set.  Before the fix a close wrote 1."""
    store_dir = str(tmp_path / "s")
    keyed = [{"topic": "T", "queue_id": 0, "body": b"w"},
             {"topic": "T", "queue_id": 0, "body": b"x", "keys": ["a", "b"]}] if after_full else []
    with segstore.open(store_dir, "rocketmq", "a", **FULL_CONFIG) as store:
        store.append_batch([*keyed, {"topic": "T", "queue_id": 0, "body": b"y"}])
    written = _index_bytes(store_dir)
    last = written[sorted(written)[-1]]
    assert len(written) == (2 if after_full else 1)
    assert last[32:40] == bytes(8)      # hashSlotCount and indexCount as the constructor left them
    if after_full:
        full = written[sorted(written)[0]]
        assert last[:32] == full[8:16] + full[8:16] + full[24:32] + full[24:32]
    else:
        assert last[:40] == bytes(40)


def test_a_key_whose_put_was_cut_before_the_count_is_found_as_the_broker_finds_it(tmp_path):
    """``IndexFile.putKey`` (RocketMQ 4.9.7) writes the entry and the slot, then the header's count; a
    crash between them leaves a slot naming the entry at ``indexCount``.  ``selectPhyOffset`` refuses a
    slot only past it (``slotValue > indexCount``), so the broker's ``queryMessage`` finds that key and
    the older keys of its chain (checked with the oracle on a store so cut); segstore's query refused
    ``slot >= indexCount`` and found none of them."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", maxHashSlotNum=16, maxIndexNum=64) as writer:
        for i in range(5):
            writer.append({"topic": "T", "queue_id": 0, "body": b"x", "keys": [f"k{i}", "same"]})
        path = writer.index.files[-1].path
    data = bytearray(files.read_bytes(path))
    count = int.from_bytes(data[36:40], "big")
    data[36:40] = (count - 1).to_bytes(4, "big")       # the last put ("same" of message 4) not counted
    files.write_bytes(path, bytes(data))
    with segstore.open(store, format="rocketmq") as reader:
        assert sorted(m.offset for m in reader.find("T", "same")) == [0, 1, 2, 3, 4]
        assert [m.offset for m in reader.find("T", "k4")] == [4]
