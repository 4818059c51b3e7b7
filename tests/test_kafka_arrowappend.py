"""``KafkaStore.append_arrow``: a columnar append, the same bytes and refusals as ``append_batch``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_kafka import batch as codec
from segstore_kafka.arrowappend import batch_limit, cuts
from segstore_kafka.partition import KafkaConfig
from segstore_kafka.store import KafkaStore

import segstore
from segstore.columns import KAFKA_SCHEMA
from segstore.errors import InvalidMessageError, InvalidTopicError, MessageTooLargeError, ReadOnlyError

NOW = 1_700_000_000_000


def _store(path: Path, clock=lambda: NOW, **config) -> KafkaStore:
    return KafkaStore(str(path), "a", KafkaConfig.from_mapping(config), explicit=list(config), clock=clock)


def _logs(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*.log"))}


def _records(store) -> list[tuple]:
    return [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in store.scan()]


def _items(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        item = {"topic": ["a", "b.c"][i % 2], "partition": int(rng.integers(0, 3)),
                "value": bytes(rng.bytes(i % 50)), "timestamp": NOW + int(rng.integers(-5, 5))}
        if i % 3:
            item["key"] = b"key-%d" % i
        if i % 4 == 0:
            item["headers"] = [("h", b"x" * (i % 7)), ("n", None)]
        if i % 11 == 0:
            item["value"] = None
        out.append(item)
    return out


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd"])
def test_scan_piped_into_append_arrow_copies_the_store(tmp_path, compression):
    config = {"compression.type": compression}
    with _store(tmp_path / "a", **config) as a:
        for start, size in ((0, 7), (7, 40), (47, 1), (48, 25)):
            a.append_batch(_items(73)[start:start + size])
    with _store(tmp_path / "a", **config) as a, _store(tmp_path / "b", **config) as b, \
            _store(tmp_path / "c", **config) as c:
        scanned = list(a.scan_arrow(batch_rows=16))
        assert sum(b.append_arrow(batch) for batch in scanned) == 73
        assert c.append_arrow(pa.Table.from_batches(scanned, schema=KAFKA_SCHEMA)) == 73
        want = _records(a)
        assert _records(b) == want and _records(c) == want
    assert _logs(tmp_path / "b") == _logs(tmp_path / "a") == _logs(tmp_path / "c")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["t", "u", "t.v"]), st.integers(0, 40)), min_size=1, max_size=80),
       st.booleans())
def test_rows_group_by_topic_and_partition_in_first_seen_order(rows, one_topic):
    from segstore_kafka.arrowappend import _groups

    if one_topic:      # the usual table: one topic, its own path past the first compare
        rows = [("t", p) for _, p in rows]
    want: dict[tuple[str, int], list[int]] = {}
    for i, key in enumerate(rows):
        want.setdefault(key, []).append(i)
    found = _groups(pa.array([t for t, _ in rows]), np.array([p for _, p in rows], np.int64))
    assert [((t, p), r.tolist()) for t, p, r in found] == list(want.items())


def test_a_table_of_several_batches_writes_the_same_whatever_plans_are_kept(tmp_path, monkeypatch):
    from segstore_kafka import arrowappend

    with _store(tmp_path / "a") as a:
        a.append_batch(_items(73))
    with _store(tmp_path / "a") as a:
        whole = pa.Table.from_batches(list(a.scan_arrow()), schema=KAFKA_SCHEMA).combine_chunks()
        want = sorted(_records(a))
    table = pa.Table.from_batches(whole.to_batches(max_chunksize=16))
    assert [b.num_rows for b in table.to_batches()] == [16, 16, 16, 16, 9]
    planned: list[int] = []
    plan = arrowappend.plan
    monkeypatch.setattr(arrowappend, "plan",
                        lambda batch, *rest: planned.append(batch.num_rows) or plan(batch, *rest))
    logs = []
    # each batch is planned to be checked, and planned again to be written only past the kept rows
    for kept_rows, replanned in ((0, [16, 16, 16, 16, 9]), (20, [16, 16, 16, 9]), (1 << 20, [])):
        monkeypatch.setattr(arrowappend, "KEPT_PLAN_ROWS", kept_rows)
        planned.clear()
        with _store(tmp_path / f"kept{kept_rows}") as b:
            assert b.append_arrow(table) == 73
            assert sorted(_records(b)) == want
        assert planned == [16, 16, 16, 16, 9, *replanned]
        logs.append(_logs(tmp_path / f"kept{kept_rows}"))
    assert logs[0] == logs[1] == logs[2] and logs[0]


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_append_arrow_writes_what_append_batch_writes(tmp_path, timestamp_type):
    items = _items(30, seed=3)
    del items[4]["timestamp"]       # the append's time, as append_batch stamps a missing one
    items[5]["timestamp"] = -1
    table = pa.Table.from_pylist(
        [{"topic": m["topic"], "partition": m["partition"], "key": m.get("key"), "value": m["value"],
          "timestamp": m.get("timestamp"),
          "headers": [{"key": k, "value": v} for k, v in m.get("headers", [])]} for m in items],
        schema=pa.schema([KAFKA_SCHEMA.field(name) for name in ("topic", "partition", "key", "value")]
                         + [pa.field("timestamp", pa.int64()), KAFKA_SCHEMA.field("headers")]))
    config = {"message.timestamp.type": timestamp_type}
    with _store(tmp_path / "arrow", **config) as arrow, _store(tmp_path / "dicts", **config) as dicts:
        assert arrow.append_arrow(table) == 30
        dicts.append_batch(items)
        assert _records(arrow) == _records(dicts)
    assert _logs(tmp_path / "arrow") == _logs(tmp_path / "dicts")


def test_batches_stay_within_max_message_bytes(tmp_path):
    rows = 200
    table = pa.table({"topic": ["t"] * rows, "value": [b"v" * 100] * rows,
                      "timestamp": pa.array(range(NOW, NOW + rows), pa.timestamp("ms", tz="UTC"))})
    with _store(tmp_path / "t-0", **{"max.message.bytes": 2000, "compression.type": "zstd"}) as store:
        assert store.append_arrow(table) == rows
        batches = list(store.partition.batches())
        assert len(batches) > 10 and all(b.size <= 2000 for b in batches)
        assert [(r.offset, r.timestamp) for r in store.scan()] == [(i, NOW + i) for i in range(rows)]
        big = pa.table({"topic": ["t"], "value": [np.random.default_rng(1).bytes(5000)]})  # incompressible
        with pytest.raises(MessageTooLargeError):
            store.append_arrow(big)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_row_too_large_alone_is_refused_before_anything_is_written(tmp_path, compression):
    """A row too large for a batch alone (over max.message.bytes: Kafka 3.8 ``LogValidator``'s
    RecordTooLargeException) used to be found as its batch was written, after the rows of the
    partitions before it (kafka.md promises everything is checked first). A large row that compresses
    under the limit is still taken."""
    config = {"max.message.bytes": 4096, "compression.type": compression}
    noise = np.random.default_rng(3).bytes(5000)    # incompressible
    table = pa.table({"topic": ["t", "t", "u"], "partition": [0, 1, 0], "value": [b"small", noise, b"x"]})
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a", **config) as store:
        with pytest.raises(MessageTooLargeError, match=r"t-1.*max.message.bytes=4096"):
            store.append_arrow(table)
        assert store.topics() == []
        compressible = pa.table({"topic": ["t"], "value": [b"z" * 5000]})
        if compression == "none":
            with pytest.raises(MessageTooLargeError):
                store.append_arrow(compressible)
            assert store.topics() == []
        else:
            assert store.append_arrow(compressible) == 1


def test_cuts_respect_the_limit_and_the_batch_boundaries():
    sizes = np.array([10, 10, 10, 50, 10, 10, 10, 10], np.int64)
    rows = np.arange(8, dtype=np.int64)
    assert [r.tolist() for r in cuts(rows, sizes, None, 30)] == [[0, 1, 2], [3], [4, 5, 6], [7]]
    ids = np.array([0, 0, 1, 1, 1, 1, 2, 2], np.int64)
    assert [r.tolist() for r in cuts(rows, sizes, ids, 1000)] == [[0, 1], [2, 3, 4, 5], [6, 7]]
    assert batch_limit(1 << 30, 1 << 30, False) == 1 << 20
    assert batch_limit(2000, 1 << 30, False) == 2000 - codec.RECORD_BATCH_OVERHEAD


BAD = [
    (pa.table({"topic": ["t"]}), InvalidMessageError),                                   # no value column
    (pa.table({"topic": ["t"], "value": [5]}), InvalidMessageError),                     # not binary
    (pa.table({"topic": ["t", None], "value": [b"1", b"2"]}), InvalidMessageError),     # null topic
    (pa.table({"topic": ["t"], "value": [b"1"], "partition": [-1]}), InvalidMessageError),
    (pa.table({"topic": ["t", "bad/topic"], "value": [b"1", b"2"]}), InvalidTopicError),
    (pa.table({"topic": ["t"], "value": [b"1"], "isControl": [True]}), InvalidMessageError),
    (pa.table({"topic": ["t"], "value": [b"1"], "isControl": [1]}), InvalidMessageError),
    (pa.table({"topic": ["t"], "value": [b"1"], "timestamp": ["now"]}), InvalidMessageError),
    (pa.table({"topic": ["t"], "value": [b"1"], "headers": [[1]]}), InvalidMessageError),
    (pa.table({"topic": [1], "value": [b"1"]}), InvalidMessageError),
    (pa.table({"topic": ["t"], "value": [b"1"],
               "headers": pa.array([[{"key": None, "value": b"v"}]], KAFKA_SCHEMA.field("headers").type)}),
     InvalidMessageError),
]


@pytest.mark.parametrize(("table", "error"), BAD, ids=range(len(BAD)))
def test_a_refused_append_writes_nothing(tmp_path, table, error):
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        with pytest.raises(error):
            store.append_arrow(table)
        assert store.topics() == []


def test_a_bad_later_batch_of_a_table_writes_nothing(tmp_path):
    ok = pa.record_batch({"topic": ["ok", "ok"], "value": [b"1", b"2"]})
    bad = pa.record_batch({"topic": ["ok", "bad topic"], "value": [b"3", b"4"]})
    with segstore.open(str(tmp_path / "logs"), format="kafka", mode="a") as store:
        with pytest.raises(InvalidTopicError):
            store.append_arrow(pa.Table.from_batches([ok, bad]))
        assert store.topics() == []


def test_a_partition_directory_takes_only_its_partition(tmp_path):
    with _store(tmp_path / "t-0") as store:
        with pytest.raises(InvalidTopicError):
            store.append_arrow(pa.table({"topic": ["t", "t"], "partition": [0, 1], "value": [b"1", b"2"]}))
        assert store.partition.next_offset == 0
    with _store(tmp_path / "t-0") as store:
        assert store.append_arrow(pa.table({"topic": ["t"], "value": [b"1"]})) == 1
    with segstore.open(str(tmp_path / "t-0"), format="kafka") as store, pytest.raises(ReadOnlyError):
        store.append_arrow(pa.table({"topic": ["t"], "value": [b"1"]}))


def test_a_null_header_list_has_no_headers(tmp_path):
    # a null list slot may still span child items (Arrow allows it): they are not its headers
    items = pa.array([{"key": "a", "value": b"1"}, {"key": "b", "value": b"2"}, {"key": "c", "value": None}],
                     KAFKA_SCHEMA.field("headers").type.value_type)
    headers = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), items,
                                       mask=pa.array([False, True, False]))
    table = pa.table({"topic": ["t"] * 3, "value": [b"x", b"y", b"z"], "headers": headers})
    with _store(tmp_path / "t-0") as store:
        store.append_arrow(table)
        assert [r.headers for r in store.scan()] == [[("a", b"1")], [], [("c", None)]]


ROW = st.fixed_dictionaries({
    "topic": st.sampled_from(["t", "u"]), "partition": st.integers(0, 1),
    "key": st.one_of(st.none(), st.binary(max_size=12)),
    "value": st.one_of(st.none(), st.binary(max_size=40)),
    "timestamp": st.one_of(st.none(), st.integers(-1, 2**42)),
    "headers": st.one_of(st.none(), st.lists(st.fixed_dictionaries(
        {"key": st.text(max_size=5), "value": st.one_of(st.none(), st.binary(max_size=8))}), max_size=2))})
ROWS_SCHEMA = pa.schema([KAFKA_SCHEMA.field(name) for name in ("topic", "partition", "key", "value")]
                        + [pa.field("timestamp", pa.int64()), KAFKA_SCHEMA.field("headers")])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=20), compression=st.sampled_from(["none", "lz4", "zstd"]))
def test_append_arrow_equals_append_batch_of_the_same_rows(tmp_path_factory, rows, compression):
    items = [{"topic": r["topic"], "partition": r["partition"], "key": r["key"], "value": r["value"],
              "timestamp": -1 if r["timestamp"] is None else r["timestamp"],
              "headers": [(h["key"], h["value"]) for h in r["headers"] or ()]} for r in rows]
    arrow, dicts = tmp_path_factory.mktemp("arrow"), tmp_path_factory.mktemp("dicts")
    config = {"compression.type": compression}
    with _store(arrow, **config) as a, _store(dicts, **config) as d:
        assert a.append_arrow(pa.Table.from_pylist(rows, schema=ROWS_SCHEMA)) == len(rows)
        d.append_batch(items)
        assert _records(a) == _records(d)
    assert _logs(arrow) == _logs(dicts)


def test_column_types_arrow_spells_differently(tmp_path):
    table = pa.table({"topic": pa.array(["t", "t"]).dictionary_encode(),
                      "partition": pa.array([0, 0], pa.int64()),
                      "key": pa.array(["k", None], pa.large_string()),
                      "value": pa.array([b"1", b"2"], pa.large_binary()),
                      "timestamp": pa.array([NOW * 1000 + 999, None], pa.timestamp("us", tz="UTC"))})
    with _store(tmp_path / "t-0", clock=lambda: NOW + 1) as store:
        assert store.append_arrow(table) == 2
        assert [(r.key, r.value, r.timestamp) for r in store.scan()] == [(b"k", b"1", NOW),
                                                                         (None, b"2", NOW + 1)]


@pytest.mark.parametrize("name", ["uncompressed", "gzip", "snappy", "lz4", "zstd", "logappendtime"])
def test_every_compat_fixture_replays_through_append_arrow(tmp_path, name):
    # written by Kafka 3.8's own storage code (compat_fixtures/kafka); the copy's batches are
    # segstore's (no producer ids: an append, not a replica), its records the same
    fixture = Path(__file__).resolve().parent.parent / "compat_fixtures" / "kafka" / name
    config = json.loads((fixture / "spec.json").read_text())["config"]
    config.pop("message.timestamp.type", None)      # each record keeps the time it reads back with
    with segstore.open(str(fixture / "topic-0"), format="kafka") as source, \
            _store(tmp_path / "topic-0", **config) as copy:
        assert sum(copy.append_arrow(batch) for batch in source.scan_arrow(batch_rows=37)) == \
            sum(1 for _ in source.scan())
        assert _records(copy) == _records(source)
        assert len(copy.partition.segments) > 1      # segment.bytes rolled it as it would the source


def test_a_null_partition_is_routed_as_append_batch_routes_a_none_one(tmp_path):
    """Kafka 3.8 ``ProducerRecord``: a partition "non-negative or null"; ``KafkaProducer.partition`` routes a
    null one (``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % partitions`` for a key of
    a topic of several, else 0 here), as ``append_batch`` of a message whose partition is None does.
    Before: append_arrow refused the table, "expected a partition in every row, found 20 null"."""
    seed = [{"topic": t, "partition": p, "value": b"seed"}
            for t, p in (("a", 0), ("a", 1), ("a", 2), ("b.c", 0))]
    rows = [{"topic": ["a", "b.c"][i % 3 == 0], "partition": [None, 1, None, 0][i % 4],
              "key": None if i % 5 == 0 else b"key-%d" % i, "value": b"v%d" % i, "timestamp": NOW + i}
             for i in range(40)]
    rows = seed + rows
    table = pa.table({"topic": [r["topic"] for r in rows], "value": [r["value"] for r in rows],
                      "key": pa.array([r.get("key") for r in rows], pa.binary()),
                      "partition": pa.array([r["partition"] for r in rows], pa.int32()),
                      "timestamp": [r.get("timestamp", NOW) for r in rows]})
    with _store(tmp_path / "dicts") as a:
        a.append_batch(seed)
        want = [(r.topic, r.partition) for r in a.append_batch(rows[len(seed):])]
    with _store(tmp_path / "arrow") as b:
        b.append_batch(seed)
        b.append_arrow(table.slice(len(seed)))
    assert _logs(tmp_path / "arrow") == _logs(tmp_path / "dicts")
    routed = {(t, p) for (t, p), r in zip(want, rows[len(seed):], strict=True) if r["partition"] is None}
    assert {("a", 0), ("a", 2), ("b.c", 0)} <= routed       # keys routed over a's three partitions
