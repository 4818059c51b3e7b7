"""The fast batch append (segstore_rocketmq.fastappend): C and Python agree, both equal the general path."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import itertools
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_rocketmq import fastappend
from segstore_rocketmq.fastappend import KEYS_FIRST, encode_plain_py, file_chunks
from segstore_rocketmq.indexfile import IndexFile
from segstore_rocketmq.message import MESSAGE_MAGIC, encode_topic
from segstore_rocketmq.store import RocketMQStore

from segstore.errors import InvalidMessageError, InvalidTopicError, MessageTooLargeError, SegstoreError
from segstore.indexes import keyhash

needs_c = pytest.mark.skipif(fastappend._speedups is None, reason="segstore_rocketmq._speedups not built")

TOPICS = ["T", "Topic-1", "ünï", "a_b%c"]
IPV4 = (bytes([10, 0, 0, 7]), 10911)
IPV6 = (bytes(range(16)), 65535)

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
plain_item = st.fixed_dictionaries(
    {"topic": st.sampled_from(TOPICS)},
    optional={
        "queue_id": st.one_of(st.none(), st.integers(0, 7)),
        "body": st.one_of(st.none(), st.binary(max_size=300)),
        "tags": st.one_of(st.none(), text),
        "keys": st.one_of(st.none(), text, st.lists(text, max_size=4), st.tuples(text, text)),
        "born_timestamp": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        "store_timestamp": st.one_of(st.none(), st.integers(0, 2**62)),
        "flag": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        "properties": st.one_of(st.none(), st.just({})),
    },
)
#: One field of an item the fast path leaves to the general path (or that it must still take).
odd_field = st.one_of(
    st.tuples(st.just("queue_id"), st.sampled_from([2**31, True, -1, 1.0])),
    st.tuples(st.just("body"), st.sampled_from(["str body", bytearray(b"b")])),
    st.tuples(st.sampled_from(["tags", "keys"]), st.sampled_from(["a\x01b", "c\x02", "\ud800", "x y", "  ",
                                                                  "😀 k", b"b", ["a\x02"], [b"k"]])),
    st.tuples(st.just("born_timestamp"), st.just(2**63)),
    st.tuples(st.just("flag"), st.just(2**31)),
    st.tuples(st.just("properties"), st.just({"a": "b"})),
    st.tuples(st.just("delay_level"), st.just(1)),
    st.tuples(st.just("topic"), st.just("Unknown")),
)


@st.composite
def batch(draw) -> list[dict]:
    """Mostly plain items; sometimes one carries an odd field."""
    items = draw(st.lists(plain_item, max_size=12))
    if items and draw(st.booleans()):
        name, value = draw(odd_field)
        items[draw(st.integers(0, len(items) - 1))][name] = value
    return items


def both(items, topic_fields, next_offsets, host, start, file_size, limit, with_index, dest_size,
         trailing=False, dest_start=0):
    """encode_plain of the C extension and of the Python reference, each on its own copies
    (``trailing``: the properties style of brokers up to 4.9.0 and from 5.2.0; ``dest_start``: where
    ``start`` lies in the destination buffer, as the data end in a mapped file)."""
    out = []
    for fn in (fastappend._speedups.encode_plain, encode_plain_py):
        offsets = dict(next_offsets)
        dest = None if dest_size is None else bytearray(dest_start + dest_size)
        res = fn(copy.deepcopy(items), dict(topic_fields), offsets, KEYS_FIRST, 1_700_000_000_123, host[0],
                 host[1], start, file_size, limit, with_index, dest, trailing, dest_start)
        out.append((res, offsets, dest))
    return out


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=batch(), known=st.sets(st.sampled_from(TOPICS), min_size=1),
       offsets=st.dictionaries(st.tuples(st.sampled_from(TOPICS), st.integers(0, 7)), st.integers(0, 2**40),
                               max_size=6),
       v6=st.booleans(), file_size=st.sampled_from([256, 700, 4096, 1 << 30]),
       start_in_file=st.integers(0, 4096), limit=st.sampled_from([150, 400, 4 << 20]),
       with_index=st.booleans(), in_place=st.booleans(), trailing=st.booleans(),
       dest_start=st.sampled_from([0, 1, 37, 4096]))
def test_c_equals_python(items, known, offsets, v6, file_size, start_in_file, limit, with_index, in_place,
                         trailing, dest_start):
    topic_fields = {t: encode_topic(t, MESSAGE_MAGIC) for t in known}
    start = 3 * file_size + min(start_in_file, file_size - 1)
    dest_size = min(file_size - start % file_size, 3000) if in_place else None   # a map's unwritten rest
    c, py = both(items, topic_fields, offsets, IPV6 if v6 else IPV4, start, file_size, limit, with_index,
                 dest_size, trailing, dest_start if in_place else 0)
    assert c == py
    res, _, dest = c
    if isinstance(res, tuple) and res[0] is None and res[2]:     # written in place: from dest_start on
        assert not any(dest[:dest_start])
        assert int.from_bytes(dest[dest_start:dest_start + 4], "big") == res[2][0].size


def test_plain_items_take_the_fast_path():
    topic_fields = {"T": encode_topic("T", MESSAGE_MAGIC)}
    items = [{"topic": "T", "queue_id": 1, "body": b"x", "tags": "A", "keys": ["k1", "k2 k3"]},
             {"topic": "T", "body": b"y"}]
    offsets = {("T", 1): 5}
    data, blanks, results, cq, queues, index, end = encode_plain_py(
        items, topic_fields, offsets, KEYS_FIRST, 7, *IPV4, 100, 1 << 20, 4 << 20, True, None)
    assert blanks == [] and end == 100 + len(data)
    second = 100 + results[0].size
    assert [(r.partition, r.offset, r.position) for r in results] == [(1, 5, 100), (0, 0, second)]
    assert queues == [(("T", 1), 0, 1), (("T", 0), 1, 1)]
    assert offsets == {("T", 1): 5}     # read only: the store advances its queues when it writes
    assert np.frombuffer(index, dtype=np.int64).reshape(3, -1).shape == (3, 3)   # k1, k2, k3
    assert len(cq) == 2 * 20


@needs_c
@pytest.mark.parametrize("keys", ["", [""], ("",), [], ["", ""]])
def test_empty_tags_and_keys_are_no_property_in_c_and_python(keys):
    """4.9.7's Message constructor sets no TAGS/KEYS for an empty text, and the broker's
    ``SendMessageProcessor.sendMessage`` drops an empty-valued pair
    (``MessageDecoder.string2messageProperties``): ``KEYS`` of ``[""]`` was written empty by both."""
    topic_fields = {"T": encode_topic("T", MESSAGE_MAGIC)}
    items = [{"topic": "T", "body": b"x", "tags": "", "keys": keys}]
    c, py = both(items, topic_fields, {}, IPV4, 0, 1 << 20, 4 << 20, True, None)
    assert c == py
    data = c[0][0]
    joined = " ".join(keys) if isinstance(keys, list | tuple) else keys
    assert (b"KEYS" in data) == bool(joined) and b"TAGS" not in data
    if not joined:      # the bytes of the message without either field
        bare = [{"topic": "T", "body": b"x"}]
        assert c == both(bare, topic_fields, {}, IPV4, 0, 1 << 20, 4 << 20, True, None)[0]


@pytest.mark.parametrize("item", [
    {"topic": "T", "born_host": "1.2.3.4:5"},
    {"topic": "T", "delay_level": 2},
    {"topic": "T", "properties": {"a": "b"}},
    {"topic": "T", "tags": "a\x01"},
    {"topic": "T", "body": bytearray(b"x")},
    {"topic": "T", "queue_id": -1},
    {"topic": "T", "queue_id": 2**31 - 1},
    {"topic": "T", "body": bytes(5000)},
])
def test_other_items_are_left_to_the_general_path(item):
    topic_fields = {"T": encode_topic("T", MESSAGE_MAGIC)}
    offsets: dict = {}
    out = encode_plain_py([item], topic_fields, offsets, KEYS_FIRST, 7, *IPV4, 0, 1 << 20, 4096, True, None)
    assert out is None
    assert offsets == {}


def test_unknown_topic_is_returned_first():
    out = encode_plain_py([{"topic": "New"}], {}, {}, KEYS_FIRST, 7, *IPV4, 0, 1 << 20, 4096, True, None)
    assert out == "New"


def test_file_chunks_cut_at_blanks():
    data = bytearray(range(30))
    chunks, offsets, sizes = file_chunks(data, 90, [(100, 10), (120, 5)])
    assert [bytes(c) for c in chunks] == [bytes(range(10)), bytes(range(10, 20)), bytes(range(20, 30))]
    assert offsets == [90, 110, 125] and sizes == [10, 10, 10]


# -- through the store ------------------------------------------------------------

SMALL = {"mappedFileSizeCommitLog": 2048, "mappedFileSizeConsumeQueue": 200, "maxHashSlotNum": 16,
         "maxIndexNum": 64}


def store_files(path: Path) -> dict[str, bytes]:
    """Every file's bytes, index files by position (their names are wall-clock times)."""
    out = {}
    for dirpath, _, names in os.walk(path):
        for i, name in enumerate(sorted(names)):
            rel = os.path.relpath(os.path.join(dirpath, name), path)
            key = f"index/{i}" if rel.startswith("index") else rel
            out[key] = Path(dirpath, name).read_bytes()
    return out


def batches(seed: int) -> list[list[dict]]:
    rng = np.random.default_rng(seed)
    out = []
    n = 0
    for size in (1, 7, 40, 3, 100):
        batch = []
        for _ in range(size):
            batch.append({"topic": ["A", "B"][int(rng.integers(2))], "queue_id": int(rng.integers(3)),
                          "body": rng.bytes(int(rng.integers(0, 200))), "tags": f"tag{n % 3}",
                          "keys": [f"k{n}", f"order-{n % 5}"], "born_timestamp": 1_000 + n})
            n += 1
        out.append(batch)
    return out


def write(path: Path, seed: int, clock_ms: int = 1_700_000_000_000, *, in_c: bool = True) -> list:
    """``in_c``: the C batch append where it takes a batch (else the Python batch path)."""
    results = []
    with RocketMQStore(str(path), "a", SMALL, clock=lambda: clock_ms) as store:
        if not in_c:
            store._append_many = None
        for batch in batches(seed):
            results += store.append_batch(batch)
        results.append(store.append({"topic": "A", "body": b"single", "keys": "one two"}))
    return results


@pytest.mark.parametrize("seed", [1, 2])
def test_fast_path_writes_what_the_general_path_writes(tmp_path, monkeypatch, seed):
    fast = write(tmp_path / "fast", seed)
    # the store imports the fast encoder where it appends: patched where it lives
    monkeypatch.setattr(fastappend, "encode_batch", lambda store, items, now: None)
    general = write(tmp_path / "general", seed, in_c=False)
    assert fast == general
    a, b = store_files(tmp_path / "fast"), store_files(tmp_path / "general")
    assert a.keys() == b.keys() and len([k for k in a if k.startswith("commitlog")]) > 2
    assert [k for k in a if a[k] != b[k]] == []
    with RocketMQStore(str(tmp_path / "fast"), "r", SMALL) as store:
        assert store.verify() == []
        assert [m.body for m in store.query_by_key("A", "one")] == [b"single"]


def test_fast_path_refuses_like_the_general_path(tmp_path):
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL, clock=lambda: 5) as store:
        store.append_batch([{"topic": "A", "body": b"ok"}])
        end = store.commitlog.end
        with pytest.raises(InvalidTopicError):
            store.append_batch([{"topic": "A", "body": b"x"}, {"topic": "../x", "body": b"y"}])
        with pytest.raises(MessageTooLargeError):
            store.append_batch([{"topic": "A", "body": b"x"}, {"topic": "A", "body": bytes(4000)}])
        with pytest.raises(InvalidMessageError):
            store.append_batch([{"topic": "A", "body": b"x"}, {"topic": "A", "tags": "a\x02b"}])
        assert store.commitlog.end == end and store.offset_range("A", 0) == (0, 1)
        assert store.append_batch([]) == []


# -- IndexFile put ------------------------------------------------------------------


def put_all(tmp_path: Path, name: str, chunks, how: str) -> bytes:
    """An index file after putting ``chunks`` of (hash, phy, stamp) rows one put per chunk."""
    index = IndexFile.create(str(tmp_path / name), 8, 40, end_phy_offset=0, end_timestamp=0)
    for rows in chunks:
        hashes, phys, stamps = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
        if how == "each":       # one entry per put: the broker's putKey order
            for i in range(len(rows)):
                index.put(hashes[i:i + 1], phys[i:i + 1], stamps[i:i + 1])
        else:
            index.put(hashes, phys, stamps)
    data = index.file.read(0, index.file.size)      # the header as each put left it
    index.close()
    return data


@needs_c
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**40),
                                          st.integers(-5, 2**45)), max_size=25), max_size=5))
def test_index_put_in_c_equals_the_broker_order_and_numpy(tmp_path_factory, chunks):
    tmp = tmp_path_factory.mktemp("index")
    in_c = put_all(tmp, "c", chunks, "put")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(keyhash, "_speedups", None)     # the numpy reference
        assert in_c == put_all(tmp, "each", chunks, "each")
        assert in_c == put_all(tmp, "numpy", chunks, "put")


# -- the single append in one C call (_speedups.Appender) ---------------------------------


#: Flush intervals no test outlasts: the store's flush thread wakes only at close.  A C call finding the
#: flusher's lock held leaves its items to the general path (``append_holding_lock``), so a timed flush
#: landing in a run (a queue flush syncs every queue under the lock: slow on a loaded machine) made
#: ``taken`` one short now and then (8 of 33 batches where the rolls leave 9).
NO_TIMED_FLUSH = {"flushIntervalCommitLog": 3_600_000, "flushIntervalConsumeQueue": 3_600_000}


def append_through(path: Path, calls: list, *, fast: str, append: str, in_c: bool, clock_ms: int,
                   taken: list | None, config: dict) -> list:
    """Each of ``calls`` passed to the store's ``append`` method (``append`` or ``append_batch``): its
    result, or the class of the error it raised.  ``in_c``: through the C call the store keeps in
    attribute ``fast`` where it takes the call (``taken`` collects those results); otherwise through
    the general path with the pure-Python encoder (the reference)."""
    out: list = []
    with RocketMQStore(str(path), "a", {**config, **NO_TIMED_FLUSH}, clock=lambda: clock_ms) as store:
        c_call = getattr(store, fast)
        assert c_call is not None

        def counted(arg):
            result = c_call(arg)
            if result is not None and taken is not None:
                taken.append(result)
            return result
        setattr(store, fast, counted if in_c else None)
        method = getattr(store, append)
        for arg in calls:
            try:
                out.append(method(copy.deepcopy(arg)))
            except SegstoreError as err:
                out.append(type(err))
        flusher = store._flusher
        assert flusher is not None and flusher._appended_end == store.commitlog.end
    return out


def append_each(path: Path, items: list[dict], *, in_c: bool, clock_ms: int = 1_700_000_000_000,
                taken: list | None = None, config: dict = SMALL) -> list:
    """``items`` appended one ``append`` each (:func:`append_through`, the C single append)."""
    return append_through(path, items, fast="_append_one", append="append", in_c=in_c, clock_ms=clock_ms,
                          taken=taken, config=config)


@contextlib.contextmanager
def flusher_lock_held(store: RocketMQStore) -> Iterator[None]:
    """The store's flusher lock held by another thread for the body of the ``with``."""
    held = threading.Event()
    done = threading.Event()

    def hold():
        with store._flusher.lock:
            held.set()
            done.wait(10)
    thread = threading.Thread(target=hold)
    thread.start()
    try:
        held.wait(10)
        yield
    finally:
        done.set()
        thread.join()


@pytest.fixture
def no_block_reservation(monkeypatch):
    """A filesystem without ``posix_fallocate``: files reserve no blocks, writers write through the
    descriptors."""
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "not supported")
    monkeypatch.setattr(os, "posix_fallocate", unsupported)


def assert_c_writes_the_reference(tmp: Path, append_with, calls: list, config: dict,
                                  taken: list | None = None) -> None:
    """``append_with`` (:func:`append_each` or :func:`append_batches`) gives the same results and errors
    through the C call as through the general path with the pure-Python encoder, and leaves every store
    file byte for byte the same.  ``taken`` collects what the C call took."""
    in_c = append_with(tmp / "c", calls, in_c=True, config=config, taken=taken)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fastappend, "encode_plain", encode_plain_py)
        reference = append_with(tmp / "py", calls, in_c=False, config=config)
    assert in_c == reference
    a, b = store_files(tmp / "c"), store_files(tmp / "py")
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


@st.composite
def singles(draw) -> list[dict]:
    """Plain items to a few queues (most to a queue made already: the C path's), a few carrying a field
    the C path leaves to the general one."""
    items = draw(st.lists(plain_item, min_size=4, max_size=40))
    for item in items:
        if draw(st.integers(0, 3)):
            item["topic"], item["queue_id"] = draw(st.sampled_from([("T", 0), ("ünï", 1)]))
    for _ in range(draw(st.integers(0, 3))):
        name, value = draw(odd_field)
        items[draw(st.integers(0, len(items) - 1))][name] = value
    return items


#: Files that roll now and then in an example (SMALL ones roll at almost every message, and a file is
#: rolled into, and reserved, by the general path).
MEDIUM = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 400, "maxHashSlotNum": 16,
          "maxIndexNum": 48}


@needs_c
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=singles())
def test_single_append_in_c_writes_what_the_python_reference_writes(tmp_path_factory, items):
    """Same results, same errors and every store file byte for byte (commitlog rolls with BLANKs,
    consume-queue and IndexFile rolls included) as the general path with the pure-Python encoder."""
    tmp = tmp_path_factory.mktemp("single")
    # the queues most items go to, made and their files' blocks reserved (by the general path)
    warm = [{"topic": t, "queue_id": q, "keys": "w"} for t, q in [("T", 0), ("ünï", 1)] for _ in (1, 2)]
    items = warm + items
    assert_c_writes_the_reference(tmp, append_each, items, MEDIUM)


@needs_c
def test_single_append_in_c_takes_the_common_path(tmp_path):
    """Plain messages to queues that exist go through the C call (all but each queue's first and those
    that roll a file), and the store reads back, verifies and answers key queries."""
    items = [m for b in batches(3) for m in b]
    taken: list = []
    roomy = {"mappedFileSizeCommitLog": 16 << 10, "mappedFileSizeConsumeQueue": 2000, "maxHashSlotNum": 64,
             "maxIndexNum": 1000}
    results = append_each(tmp_path / "s", items, in_c=True, taken=taken, config=roomy)
    assert len(taken) > len(items) * 3 // 4 and all(r in results for r in taken)
    with RocketMQStore(str(tmp_path / "s"), "r", roomy) as store:
        assert store.verify() == []
        assert [m.body for m in store.read("A", 1)] == [m["body"] for m in items
                                                        if m["topic"] == "A" and m["queue_id"] == 1]
        assert [m.queue_offset for m in store.query_by_key("B", f"k{len(items) - 1}")] in ([], [
            results[-1].offset])


@needs_c
def test_single_append_in_c_stamps_the_wall_clock_and_yields_to_a_held_lock(tmp_path):
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        for body in (b"first", b"more"):   # make the queue and reserve blocks (the general path)
            store.append({"topic": "A", "body": body})
        before = time.time_ns() // 1_000_000
        result = store._append_one({"topic": "A", "body": b"second"})
        assert result is not None and before <= result.extra["store_timestamp"] <= time.time_ns() // 1_000_000
        end = store.commitlog.end
        with flusher_lock_held(store):
            assert store._append_one({"topic": "A", "body": b"third"}) is None   # the general path waits
            assert store.commitlog.end == end
        assert store.append({"topic": "A", "body": b"third"}).offset == 3
    with RocketMQStore(str(tmp_path / "sync"), "a", {**SMALL, "flushDiskType": "SYNC_FLUSH"}) as store:
        assert store._append_one is None and store._append_many is None    # an append waits for its sync


def test_what_the_c_append_reads_on_every_call_is_a_slot_member(tmp_path):
    """The Appender reads and sets about forty attributes a call; at an offset in the object they cost
    a fifth of a single append less than through instance dicts (2026-11-29). A name moved out of
    ``__slots__`` still works (the dict path) but silently slows every append: this holds the list."""
    def member(obj, name):
        for klass in type(obj).__mro__:
            if name in vars(klass):
                return type(vars(klass)[name]).__name__ == "member_descriptor" and hasattr(obj, name)
        return False

    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        store.append({"topic": "A", "body": b"x", "keys": ["k"]})
        cq = store.queues[("A", 0)]
        index_file = store.index.files[-1]
        reads = [   # (object, the names read or set on it); a list: an IndexHeader is not hashable
            (store, ("indexes", "queues", "_next_offsets", "_plain_topics", "_trailing_separator")),
            (store.commitlog, ("_active", "log")), (store.commitlog._active, ("base", "file", "wrote")),
            (store.commitlog.log, ("_dirty",)), (cq, ("log",)), (cq.log, ("segments", "_dirty")),
            (cq.log.segments._last, ("_count", "base", "file")),
            (cq.log.segments._last.file, ("_mm", "reserved", "size", "_fd", "_reserving")),
            (store._flushing(),
             ("lock", "_appended_end", "_last_store_ts", "_cq_dirty_entries", "_cq_last_ts")),
            (store.topic_configs, ("topics",)), (store.index, ("files",)),
            (index_file, ("file", "slot_num", "index_num", "header")),
            (index_file.header, ("index_count", "end_phy_offset", "end_timestamp")),
        ]
        missing = [f"{type(obj).__name__}.{name}" for obj, names in reads for name in names
                   if not member(obj, name)]
        assert missing == []


@needs_c
def test_single_append_in_c_without_block_reservation(tmp_path, no_block_reservation):
    """On a filesystem without ``posix_fallocate`` (files reserve no blocks) the C path writes through
    the descriptors, as the general path does, and the same bytes."""
    items = [m for b in batches(4) for m in b]
    taken: list = []
    assert_c_writes_the_reference(tmp_path, append_each, items, MEDIUM, taken)
    assert len(taken) > len(items) // 2


# -- the batch append in one C call (_speedups.Appender.append_batch) ----------------------------


def append_batches(path: Path, batches: list[list[dict]], *, in_c: bool, clock_ms: int = 1_700_000_000_000,
                   taken: list | None = None, config: dict = MEDIUM) -> list:
    """Each batch appended with one ``append_batch`` (:func:`append_through`, the C batch append)."""
    return append_through(path, batches, fast="_append_many", append="append_batch", in_c=in_c,
                          clock_ms=clock_ms, taken=taken, config=config)


#: Files that roll now and then in a run of batches.
BATCH_FILES = {"mappedFileSizeCommitLog": 32 << 10, "mappedFileSizeConsumeQueue": 1000, "maxHashSlotNum": 16,
               "maxIndexNum": 300}
#: Queues made (and their files' blocks reserved) before the batches: more than the C path finds by a scan.
WARM_QUEUES = [("T", q) for q in range(18)] + [("Topic-1", 1)]


@st.composite
def batch_runs(draw) -> list[list[dict]]:
    """Batches of plain items, most to queues made already (the C path's), now and then one carrying a
    field the C path leaves to the general one; a few batches spread over many queues."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        items = draw(st.lists(plain_item, max_size=12))
        spread = draw(st.booleans())
        made = st.sampled_from(WARM_QUEUES if spread else WARM_QUEUES[:2])
        if draw(st.integers(0, 3)):     # all to queues made already, else as drawn
            for item in items:
                item["topic"], item["queue_id"] = draw(made)
        if items and not draw(st.integers(0, 3)):
            name, value = draw(odd_field)
            items[draw(st.integers(0, len(items) - 1))][name] = value
        out.append(items)
    return out


def warm_batch() -> list[dict]:
    """Makes the queues of WARM_QUEUES (a second one reserves their files' blocks)."""
    return [{"topic": t, "queue_id": q, "keys": "w"} for t, q in WARM_QUEUES]


@needs_c
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=batch_runs())
def test_batch_append_in_c_writes_what_the_python_reference_writes(tmp_path_factory, runs):
    """Same results, same errors and every store file byte for byte (rolls of commitlog, consume-queue
    and IndexFile files included: the general path's) as the general path with the pure-Python encoder."""
    tmp = tmp_path_factory.mktemp("batch")
    runs = [warm_batch(), warm_batch(), *runs]
    assert_c_writes_the_reference(tmp, append_batches, runs, BATCH_FILES)


@needs_c
def test_batch_append_in_c_takes_the_common_path(tmp_path):
    """Batches of plain messages to queues that exist go through the C call (all but those that roll a
    file or reserve blocks), several queues a batch, more than it finds by a scan in one; the store reads
    back, verifies and answers key queries."""
    roomy = {"mappedFileSizeCommitLog": 64 << 10, "mappedFileSizeConsumeQueue": 4000, "maxHashSlotNum": 64,
             "maxIndexNum": 4000}
    spread = [{"topic": t, "queue_id": q, "body": b"spread", "keys": [f"s{q}"]}
              for t, q in reversed(WARM_QUEUES)]
    runs = [warm_batch(), warm_batch(), *([{**m, "topic": "T"} for m in b] for b in batches(5)), spread * 2]
    taken: list = []
    results = append_batches(tmp_path / "s", runs, in_c=True, taken=taken, config=roomy)
    assert taken == results[2:]
    with pytest.MonkeyPatch.context() as mp:     # the batches over 19 queues too: the same bytes
        mp.setattr(fastappend, "encode_plain", encode_plain_py)
        assert append_batches(tmp_path / "py", runs, in_c=False, config=roomy) == results
    a, b = store_files(tmp_path / "s"), store_files(tmp_path / "py")
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []
    with RocketMQStore(str(tmp_path / "s"), "r", roomy) as store:
        assert store.verify() == []
        assert [m.body for m in store.read("T", 17)] == [b"", b"", b"spread", b"spread"]
        assert sorted(m.queue_offset for m in store.query_by_key("T", "s17")) == [2, 3]
        assert [m.body for m in store.read("T", 1)] == [m.get("body", b"") for b in runs for m in b
                                                        if m["queue_id"] == 1 and m["topic"] == "T"]


@needs_c
def test_batch_append_in_c_yields_to_a_held_lock_and_leaves_other_items(tmp_path):
    with RocketMQStore(str(tmp_path / "s"), "a", SMALL) as store:
        for body in (b"first", b"more"):   # make the queue and reserve blocks (the general path)
            store.append_batch([{"topic": "A", "body": body}])
        many = store._append_many
        assert many([{"topic": "A", "body": b"x"}, {"topic": "A", "body": b"y"}]) is not None
        end = store.commitlog.end
        for items in ([], ({"topic": "A"},), [{"topic": "A"}, {"topic": "A", "delay_level": 1}],
                      [{"topic": "A"}, {"topic": "B"}], [{"topic": "A", "queue_id": 1}]):
            assert many(items) is None and store.commitlog.end == end    # nothing written
        with flusher_lock_held(store):
            assert many([{"topic": "A", "body": b"z"}]) is None       # the general path waits
            assert store.commitlog.end == end
        assert [r.offset for r in store.append_batch([{"topic": "A"}, {"topic": "B"}])] == [4, 0]


@needs_c
def test_batch_append_in_c_without_block_reservation(tmp_path, no_block_reservation):
    """On a filesystem without ``posix_fallocate`` the C batch append writes through the descriptors, as
    the general path does, and the same bytes."""
    items = [{**m, "topic": "T"} for b in batches(7) for m in b]
    runs = [warm_batch(), warm_batch(), *(items[i:i + 5] for i in range(0, len(items), 5))]
    taken: list = []
    assert_c_writes_the_reference(tmp_path, append_batches, runs, MEDIUM, taken)
    assert len(taken) > len(runs) // 4     # the rest roll a file (MEDIUM's are small)


#: Bytes around every branch of a UTF-8 reader: ASCII, each lead's second-byte bounds (E0 A0, ED 9F/A0,
#: F0 90, F4 8F/90), continuation bytes, leads no UTF-8 has (C0, C1, F5, FF).
_UTF8_EDGES = [0x41, 0x20, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
               0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF]


@given(st.lists(st.sampled_from(_UTF8_EDGES), min_size=1, max_size=10).map(bytes))
@settings(max_examples=400, deadline=None)
def test_c_tags_hash_of_bytes_that_are_not_utf8_is_javas(value):
    """The C tags code and index hashes (``tags_hashes``, ``index_entries``: the columnar writer's, over
    stored properties that need not be UTF-8) are ``String.hashCode`` of ``new String(bytes, UTF_8)``
    (RocketMQ 4.9.7 ``MessageExtBrokerInner.tagsString2tagsCode``): a U+FFFD for each malformed sequence
    as Java reads it (segstore.javatext).  Before, the C read any byte from C0 up as a lead and hashed
    the bits it found (and read past the value's end)."""
    from segstore_rocketmq import _speedups

    from segstore.indexes.javahash import string_hash
    from segstore.javatext import java_utf8

    if _speedups is None:
        pytest.skip("segstore_rocketmq._speedups not built")
    props = b"TAGS\x01" + value
    tags = np.empty(1, np.int64)
    _speedups.tags_hashes(props, np.zeros(1, np.int64), np.array([len(props)], np.int32), tags)
    assert int(tags[0]) == string_hash(java_utf8(value))


@needs_c
@given(st.lists(st.tuples(st.integers(0, 56), st.integers(-(1 << 63), (1 << 63) - 1)), max_size=12))
@settings(max_examples=150, deadline=None)
def test_put_be64_writes_as_the_numpy_scatter(writes):
    """``_speedups.put_be64`` (the offsets ``arrowwrite.placed`` writes into messages laid out before
    they were placed, QUEUEOFFSET and PHYSICALOFFSET as 4.9.7 ``CommitLog.MessageExtEncoder.encode``
    writes them: big-endian ``long``) writes what the numpy scatter, its reference, writes; a
    position less than 8 bytes from the end is a ValueError."""
    from segstore_rocketmq import _speedups, arrowwrite

    positions = np.array([p for p, _ in writes], np.int64)
    values = np.array([v for _, v in writes], np.int64)
    out, expected = np.full(64, 0xAA, np.uint8), np.full(64, 0xAA, np.uint8)
    _speedups.put_be64(out, positions, values)
    for p, v in writes:         # one at a time: a later write over an earlier one wins, as in C
        expected[p:p + 8] = np.frombuffer(v.to_bytes(8, "big", signed=True), np.uint8)
    assert out.tobytes() == expected.tobytes()
    starts = sorted(p for p, _ in writes)
    if all(b - a >= 8 for a, b in itertools.pairwise(starts)):      # (numpy's scatter: writes apart)
        scattered = np.full(64, 0xAA, np.uint8)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(arrowwrite, "_speedups", None)
            arrowwrite._put_i64(scattered, positions, values)
        assert scattered.tobytes() == expected.tobytes()
    with pytest.raises(ValueError, match="8 bytes inside"):
        _speedups.put_be64(out, np.array([57], np.int64), np.array([1], np.int64))


@needs_c
@given(data=st.data(), rows=st.integers(0, 40))
@settings(max_examples=150, deadline=None)
def test_encode_restored_lays_messages_out_as_the_numpy_reference(data, rows):
    """``_speedups.encode_restored`` (the columnar restore's messages: header, body CRC and gather in one
    pass) equals ``arrowwrite._layout_py`` (a structured header, zlib CRCs and the slices joined in
    Python): the bytes 4.9.7 ``CommitLog.MessageExtEncoder.encode`` writes for v1 messages with IPv4
    hosts, and where each topic and properties lie.  Bodies and properties are slices in any order
    of shared buffers (a merge's rows), up to 40 rows (past the 8 ahead it starts loading)."""
    from segstore_rocketmq import arrowwrite as aw

    def column(low, high):
        return np.array(data.draw(st.lists(st.integers(low, high), min_size=rows, max_size=rows)), np.int64)

    def slices():
        buffer = data.draw(st.binary(max_size=200))
        starts = column(0, len(buffer))
        lengths = np.array([data.draw(st.integers(0, len(buffer) - s)) for s in starts.tolist()], np.int32)
        return aw.Slices(buffer, starts, lengths)

    def hosts():
        return np.array([data.draw(st.binary(min_size=4, max_size=4)) for _ in range(rows)], "S4")

    topics = data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True))
    msgs = aw.Restored(topics=topics, topic_code=column(0, len(topics) - 1).astype(np.int32),
                       queue_id=column(0, 2**31 - 1), queue_offset=column(0, 2**62),
                       physical_offset=column(0, 2**62), flag=column(-2**31, 2**31 - 1),
                       sys_flag=column(0, 2**31 - 1), reconsume_times=column(0, 2**31 - 1),
                       prepared_transaction_offset=column(-1, 2**62), born_timestamp=column(-1, 2**62),
                       store_timestamp=column(-1, 2**62), born_ip=hosts(), born_port=column(0, 65535),
                       store_ip=hosts(), store_port=column(0, 65535), body=slices(), properties=slices())
    sizes, topic_bytes, _ = aw._sizes(msgs)
    queue_offset, sys_flag = column(0, 2**62), column(0, 2**31 - 1)
    made = aw._layout(msgs, sizes, topic_bytes, queue_offset, sys_flag)
    expected = aw._layout_py(msgs, sizes, topic_bytes, queue_offset, sys_flag)
    assert made[0].tobytes() == expected[0].tobytes() and len(made[0]) == int(sizes.sum())
    assert made[1].tolist() == expected[1].tolist() and made[2].tolist() == expected[2].tolist()
    if rows:        # a slice outside its buffer: a ValueError, nothing read past it
        outside = aw.Slices(msgs.body.data, msgs.body.starts + 10**6, msgs.body.lengths)
        bad = dataclasses.replace(msgs, body=outside)
        with pytest.raises(ValueError):
            aw._layout(bad, sizes, topic_bytes, queue_offset, sys_flag)
