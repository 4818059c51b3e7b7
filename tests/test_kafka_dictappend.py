"""Kafka ``append_batch`` of plain dicts in C (segstore_kafka.dictappend): equal to the references.

The C functions are tested equal to their pure-Python references (which go
through ``Message.coerce``'s meaning and the per-record reference encoder), and a
store written through the fast path equal, byte for byte, to one written through
the general path (the same records as :class:`Message` objects).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_kafka import batch as codec
from segstore_kafka import dictappend
from segstore_kafka.compression import COMPRESSION_NAMES, codec_id
from segstore_kafka.partition import KafkaConfig
from segstore_kafka.store import KafkaStore

import segstore
from segstore.errors import InvalidMessageError, InvalidTopicError, NotFoundError
from segstore.records import Message
from segstore.store import AppendResult

NOW = 1_700_000_000_000

blobs = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=12))
headers = st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3),
                    st.tuples(st.tuples(st.text(max_size=4), blobs)),
                    st.lists(st.lists(st.text(max_size=4), min_size=2, max_size=2), max_size=2))


@st.composite
def plain_item(draw) -> dict:
    item = {"topic": draw(st.sampled_from(["t", "u", "t-2"])), "value": draw(blobs)}
    if draw(st.booleans()):
        item["partition"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        item["key"] = draw(blobs)
    if draw(st.booleans()):
        item["timestamp"] = draw(st.one_of(st.integers(-1, 2**40), st.sampled_from([2**63 - 1, -1])))
    if draw(st.booleans()):
        item["headers"] = draw(headers)
    if draw(st.integers(0, 3)) == 0:   # a Message is plain too
        return Message(**{**item, "headers": item.get("headers") or [],
                          "offset": draw(st.integers(-1, 9)), "timestamp_type": "CreateTime"})
    return item


def _general(item) -> dict:
    """``item`` as a dict the general path takes (an ``offset`` field is not plain)."""
    if isinstance(item, Message):
        item = {name: getattr(item, name) for name in ("topic", "partition", "key", "value", "timestamp",
                                                         "headers")}
    return {**item, "offset": -1}


def _native():
    if not dictappend.native():
        pytest.skip("segstore_kafka._speedups not in use")
    return dictappend._speedups


@settings(max_examples=50, deadline=None)
@given(items=st.lists(plain_item(), max_size=12), codec_name=st.sampled_from(COMPRESSION_NAMES),
       log_append=st.booleans(), now=st.integers(0, 2**62),
       widths=st.dictionaries(st.sampled_from(["t", "u", "t-2"]), st.integers(2, 7), max_size=3))
def test_c_equals_the_reference(items, codec_name, log_append, now, widths):
    c = _native()
    groups, snapshot = c.plain_groups(items, widths)
    assert groups == dictappend.plain_groups_py(items, widths)
    number = codec_id(codec_name)
    for topic, partition, rows, bound, _ in groups:
        n = len(rows) // 8
        flags = codec.attributes(number, log_append=log_append, is_transactional=False, is_control=False)
        header = (5, 3, flags, n - 1, now if log_append else None, -1, -1, -1)
        ours = dictappend.encode_plain(items, rows, bound, now, header, number, snapshot)
        assert ours == dictappend.encode_plain_py(items, rows, bound, now, header, number)
        assert ours == dictappend.encode_plain(items, rows, bound, now, header, number)     # read again
        # the reference is what the general path encodes: Message.coerce, then the batch encoder
        msgs = [Message.coerce(_general(items[i])) for i in np.frombuffer(rows, np.int64).tolist()]
        assert {m.topic for m in msgs} == {topic}
        assert ours == codec.encode_batch(
            [(m.key, m.value, m.timestamp if m.timestamp >= 0 else now, m.headers) for m in msgs],
            base_offset=5, compression=codec_name, partition_leader_epoch=3,
            timestamp_type="LogAppendTime" if log_append else "CreateTime",
            log_append_time=now if log_append else None)
        bounds = np.frombuffer(c.plain_bounds(items, rows), np.int64)
        assert bounds.tolist() == dictappend.plain_bounds_py(items, rows).tolist()
        assert int(bounds.sum()) == bound
        extra = {"segment": 0}
        got: list = [None] * len(items)
        want: list = [None] * len(items)
        c.plain_results(got, rows, topic, partition, 5, 7, 9, extra)
        dictappend.plain_results_py(want, rows, topic, partition, 5, 7, 9, extra)
        assert got == want


class _Message(Message):
    __slots__ = ()


NOT_PLAIN = [
    _Message("t", b"v"),
    Message("t", 5),
    Message("t", b"v", timestamp=None),   # type: ignore[arg-type]
    {"topic": "t", "value": b"v", "offset": 3},
    {"topic": "t"},
    {"value": b"v"},
    {"topic": b"t", "value": b"v"},
    {"topic": "t", "value": bytearray(b"v")},
    {"topic": "t", "value": b"v", "key": 5},
    {"topic": "t", "value": "\ud800"},
    {"topic": "t", "value": b"v", "partition": -1},
    {"topic": "t", "value": b"v", "partition": 2**31},
    {"topic": "t", "value": b"v", "partition": True},
    {"topic": "t", "value": b"v", "timestamp": 2**63},
    {"topic": "t", "value": b"v", "timestamp": -2},    # refused by the general path (ProducerRecord)
    {"topic": "t", "value": b"v", "timestamp": None},
    {"topic": "t", "value": b"v", "timestamp": 1.5},
    {"topic": "t", "value": b"v", "headers": {"a": b"b"}},
    {"topic": "t", "value": b"v", "headers": [("a", b"b", b"c")]},
    {"topic": "t", "value": b"v", "headers": [(b"a", b"b")]},
    {"topic": "t", "value": b"v", "headers": [("a", 5)]},
    {"topic": "t", "value": b"v", "headers": "ab"},
    {"topic": "t", "value": b"v", 1: 2},
]


@pytest.mark.parametrize("item", NOT_PLAIN, ids=range(len(NOT_PLAIN)))
def test_other_items_are_left_to_the_general_path(item):
    items = [{"topic": "t", "value": b"ok"}, item]
    assert dictappend.plain_groups_py(items, {}) is None
    if dictappend.native():
        assert dictappend._speedups.plain_groups(items, {}) is None
        assert dictappend.plain_groups(items) is None


HEADER = (0, -1, 0, 0, None, -1, -1, -1)


def test_items_changed_after_grouping_are_refused_or_as_read():
    c = _native()
    headers = [("h", b"x")]
    items = [{"topic": "t", "value": b"v", "headers": headers}]
    ([(_, _, rows, bound, _)], snapshot) = c.plain_groups(items, {})
    want = dictappend.encode_plain_py(items, rows, bound, NOW, HEADER, 0)
    items[0] = {"topic": "t", "value": 5}
    with pytest.raises(ValueError, match="plain items"):     # read again: refused
        dictappend.encode_plain(items, rows, bound, NOW, HEADER, 0)
    assert dictappend.encode_plain(items, rows, bound, NOW, HEADER, 0, snapshot) == want   # as read
    headers.append(("k", 5))        # the snapshot holds the headers list: checked again
    with pytest.raises(ValueError, match="plain items"):
        dictappend.encode_plain(items, rows, bound, NOW, HEADER, 0, snapshot)
    headers[1] = ("k", b"y" * 10_000)     # past the bound: the buffer grows
    items[0] = {"topic": "t", "value": b"v", "headers": headers}
    assert dictappend.encode_plain(items, rows, bound, NOW, HEADER, 0, snapshot) == \
        dictappend.encode_plain_py(items, rows, bound, NOW, HEADER, 0)
    with pytest.raises(ValueError, match="plain items"):
        dictappend.encode_plain(items, np.array([1], np.int64).tobytes(), bound, NOW, HEADER, 0, snapshot)


def test_groups_are_in_first_seen_order():
    items = [{"topic": "b", "value": b"1"}, {"topic": "a", "value": b"2", "partition": 1},
             {"topic": "b", "value": b"3", "partition": 0}, {"topic": "a", "value": b"4", "partition": 1}]
    groups, _ = dictappend.plain_groups(items)
    assert [(t, p, np.frombuffer(r, np.int64).tolist()) for t, p, r, *_ in groups] == \
        [("b", 0, [0, 2]), ("a", 1, [1, 3])]


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _store(path: Path, clock=lambda: NOW, **config) -> KafkaStore:
    return KafkaStore(str(path), "a", KafkaConfig.from_mapping(config), explicit=list(config), clock=clock)


def _write(path: Path, calls: list[list], **config) -> list[list[AppendResult] | str]:
    """Each call's results, or its refusal: a keyed dict naming no partition of a topic an earlier call
    gave a partition 1 (not 0) goes to its key's partition, which may be one not there (refused)."""
    out: list[list[AppendResult] | str] = []
    with _store(path, **config) as store:
        for items in calls:
            try:
                out.append(store.append_batch(items))
            except NotFoundError as err:
                out.append(err.message.replace(str(path), "PATH"))
    return out


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.lists(plain_item(), min_size=1, max_size=8), min_size=1, max_size=3),
       codec_name=st.sampled_from(["none", "gzip", "zstd"]),
       timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]))
def test_fast_path_writes_what_the_general_path_writes(tmp_path_factory, calls, codec_name, timestamp_type):
    config = {"compression.type": codec_name, "message.timestamp.type": timestamp_type}
    fast, general = tmp_path_factory.mktemp("fast"), tmp_path_factory.mktemp("general")
    fast_results = _write(fast, calls, **config)
    general_results = _write(general, [[_general(item) for item in items] for items in calls], **config)
    assert _files(fast) == _files(general)
    assert fast_results == general_results


def test_fast_path_refuses_like_the_general_path(tmp_path):
    items = [{"topic": "ok", "value": b"1"}, {"topic": "bad/name", "value": b"2"}]
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        with pytest.raises(InvalidTopicError):
            store.append_batch(items)
        assert store.topics() == []          # nothing written, no partition created
        with pytest.raises(InvalidMessageError):
            store.append_batch([{"topic": "ok", "value": b"1"}, {"topic": "ok", "value": 5}])
        assert store.topics() == []
        results = store.append_batch(iter([{"topic": "ok", "value": b"1", "key": "k"}]))
        assert [(r.topic, r.partition, r.offset) for r in results] == [("ok", 0, 0)]
        assert [(r.key, r.value) for r in store.scan()] == [(b"k", b"1")]


def test_a_clock_before_1970_takes_the_general_path(tmp_path):
    with _store(tmp_path / "t-0", clock=lambda: -7) as store:
        store.append_batch([{"topic": "t", "value": b"v", "partition": 0}])
        assert [r.timestamp for r in store.scan()] == [-7]


@pytest.mark.parametrize("bad", [{"value": 5}, {"timestamp": "x"}, {"timestamp": 1.5}, {"timestamp": -2},
                                 {"headers": [(b"k", b"v")]}])
def test_general_path_refuses_before_creating_a_partition(tmp_path, bad):
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        with pytest.raises(InvalidMessageError):
            store.append_batch([{"topic": "ok", "value": b"1"}, {"topic": "ok", "value": b"2", **bad}])
        assert store.topics() == []


def test_messages_are_plain():
    items = [Message("t", b"v", key="k", partition=1, offset=5, timestamp=7, headers=[("h", "x")]),
             {"topic": "t", "value": b"w", "partition": 1}]
    ([(topic, partition, rows, _, _)], _) = dictappend.plain_groups(items, {"t": 3})
    assert (topic, partition, np.frombuffer(rows, np.int64).tolist()) == ("t", 1, [0, 1])
    assert dictappend.plain_groups_py(items, {"t": 3}) == dictappend.plain_groups(items, {"t": 3})[0]


@pytest.mark.parametrize(("bad", "error"), [
    ({"value": "\ud800"}, InvalidMessageError), ({"key": "\ud800"}, InvalidMessageError),
    ({"headers": [("k", "\ud800")]}, InvalidMessageError), ({"topic": 5}, InvalidTopicError),
    ({"topic": None}, InvalidTopicError),
    # a topic that is no dict key: "TypeError: unhashable type: 'list'" from the grouping by partition
    ({"topic": ["a"]}, InvalidTopicError), ({"topic": {"a": 1}}, InvalidTopicError)])
def test_general_path_refuses_with_typed_errors(tmp_path, bad, error):
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        with pytest.raises(error):
            store.append_batch([{"topic": "ok", "value": b"1", **bad}])
        assert store.topics() == []


@pytest.mark.parametrize("name", ["uncompressed", "gzip", "lz4", "zstd"])
def test_every_compat_fixture_replays_through_append_batch(tmp_path, name):
    # Kafka 3.8's own files (compat_fixtures/kafka): their records as dicts, 10 a call, read back the same
    fixture = Path(__file__).resolve().parent.parent / "compat_fixtures" / "kafka" / name
    config = json.loads((fixture / "spec.json").read_text())["config"]
    with segstore.open(str(fixture / "topic-0"), format="kafka") as source, \
            _store(tmp_path / "topic-0", **config) as copy:
        want = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in source.scan()]
        items = [{"topic": "topic", "key": r.key, "value": r.value, "timestamp": r.timestamp,
                  "headers": r.headers} for r in source.scan()]
        assert dictappend.plain_groups(items) is not None
        for start in range(0, len(items), 10):
            copy.append_batch(items[start:start + 10])
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in copy.scan()] == want


def _batches(path: Path) -> list[tuple[int, int, int]]:
    """``(base offset, record count, size)`` of each batch of a partition's segments, in order."""
    out = []
    for log in sorted(path.glob("*.log")):
        out += [(b.base_offset, b.last_offset - b.base_offset + 1, b.size)
                for b in codec.iter_batches(log.read_bytes())]
    return out


@pytest.mark.parametrize("general", [False, True], ids=["plain", "general"])
@pytest.mark.parametrize("codec_name", ["none", "zstd"])
def test_records_too_many_for_one_batch_are_cut_into_batches_the_broker_takes(tmp_path, general, codec_name):
    """A call whose records for one partition make a batch larger than max.message.bytes (Kafka 3.8
    ``LogValidator``: RecordTooLargeException) or segment.bytes used to be refused as one batch, after
    the call's other partitions were written (their records acknowledged by no result). They are cut
    into batches as append_arrow cuts its rows, each one the broker takes, in order, offsets contiguous."""
    config = {"max.message.bytes": 4096, "segment.bytes": 6000, "compression.type": codec_name}
    values = [random.Random(i).randbytes(100) for i in range(300)]     # incompressible
    items: list = [{"topic": "t", "partition": 0, "value": b"first"}]
    items += [{"topic": "t", "partition": 1, "key": f"k{i}", "value": v, "headers": [("h", b"x")]}
              for i, v in enumerate(values)]
    if general:
        items = [_general(item) for item in items]
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a", **config) as store:
        results = store.append_batch(items)
        assert [(r.partition, r.offset) for r in results] == [(0, 0)] + [(1, i) for i in range(300)]
        assert [r.value for r in store.read("t", 1)] == values
    batches = _batches(tmp_path / "logs" / "t-1")
    assert len(batches) > 1 and all(size <= 4096 for _, _, size in batches)
    assert [base for base, _, _ in batches] == np.cumsum([0] + [n for _, n, _ in batches[:-1]]).tolist()
    # each result names its record's batch
    sizes = [size for _, n, size in batches for _ in range(n)]
    assert [r.size for r in results[1:]] == sizes


@pytest.mark.parametrize("general", [False, True], ids=["plain", "general"])
def test_a_record_too_large_alone_is_refused_and_nothing_is_written(tmp_path, general):
    """A record larger than max.message.bytes alone is refused before any partition is written or
    created: the call's records of other partitions used to be written first."""
    from segstore.errors import MessageTooLargeError

    items: list = [{"topic": "t", "partition": 0, "value": b"small"},
                   {"topic": "t", "partition": 2, "value": b"x" * 5000}]
    if general:
        items = [_general(item) for item in items]
    config = {"max.message.bytes": 4096}
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a", **config) as store:
        store.append_batch([{"topic": "t", "partition": 0, "value": b"before"}])
        with pytest.raises(MessageTooLargeError, match=r"t-2.*max.message.bytes=4096"):
            store.append_batch(items)
        assert [r.value for r in store.read("t", 0)] == [b"before"]
        assert sorted(p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()) == ["t-0"]
