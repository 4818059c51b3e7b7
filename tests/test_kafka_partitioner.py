"""A Kafka record naming no partition goes where the Java producer puts it (segstore_kafka.partitioner).

Kafka 3.8 clients:
- ``KafkaProducer.partition``: a record's own partition wins; else a serialized key (not null) is
  hashed, ``BuiltInPartitioner.partitionForKey(serializedKey, numPartitions)`` =
  ``Utils.toPositive(Utils.murmur2(serializedKey)) % numPartitions``, numPartitions the topic's
  partition count in the cluster metadata; a record without key takes the sticky partition.
- ``Utils.murmur2``: the vectors are ``UtilsTest.testMurmur2``'s (clients/src/test/java/org/apache/
  kafka/common/utils/UtilsTest.java).

Before the fix every record naming no partition went to partition 0, keyed or not: segstore's
records and a later producer's for the same key ended in different partitions.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_messages import partition as partition_record
from kafka_messages import topic as topic_record
from segstore_kafka import arrowappend, dictappend, partitioner
from segstore_kafka.store import KafkaStore
from test_kafka_metadata import write_metadata_log

from segstore import cli
from segstore.columns import binary_buffers
from segstore.errors import NotFoundError

#: UtilsTest.testMurmur2: key bytes -> Utils.murmur2
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def _java_partition(key: bytes, count: int) -> int:
    """BuiltInPartitioner.partitionForKey (toPositive: & 0x7fffffff) of UtilsTest's murmur2 value, or
    the reference's (tested equal to those) for the other keys."""
    return (JAVA_MURMUR2.get(key, partitioner.murmur2_py(key)) & 0x7FFFFFFF) % count


@pytest.mark.parametrize(("key", "want"), JAVA_MURMUR2.items())
def test_murmur2_is_kafkas(key, want):
    assert partitioner.murmur2_py(key) == want
    assert partitioner.murmur2(key) == want


def test_murmur2_of_arrow_values_is_kafkas():
    keys = pa.array(list(JAVA_MURMUR2), pa.binary())
    assert partitioner.murmur2_offsets(*binary_buffers(keys)).tolist() == list(JAVA_MURMUR2.values())
    sliced = keys.slice(2, 3)
    assert partitioner.murmur2_offsets(*binary_buffers(sliced)).tolist() == list(JAVA_MURMUR2.values())[2:5]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(max_size=13), max_size=8))
def test_c_murmur2_equals_the_reference(keys):
    want = [partitioner.murmur2_py(k) for k in keys]
    assert [partitioner.murmur2(k) for k in keys] == want
    assert partitioner.murmur2_offsets(*binary_buffers(pa.array(keys, pa.binary()))).tolist() == want


@pytest.mark.parametrize("count", [2, 3, 7, 1 << 31])
def test_partition_for_key_is_the_java_clients(count):
    for key in JAVA_MURMUR2:
        assert partitioner.partition_for_key(key, count) == (JAVA_MURMUR2[key] & 0x7FFFFFFF) % count
        assert partitioner.partition_for_key(key.decode(), count) == _java_partition(key, count)  # UTF-8
    hashes = np.array(list(JAVA_MURMUR2.values()), np.int32)
    want = [_java_partition(k, count) for k in JAVA_MURMUR2]
    assert partitioner.key_partitions(hashes, count).tolist() == want


def _log_dir(path: Path, topic: str, numbers: list[int]) -> Path:
    for n in numbers:
        (path / f"{topic}-{n}").mkdir(parents=True)
    return path


def _sorted(rows: list) -> list:
    return sorted(rows, key=repr)      # keys may be None


def _where(path: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    with KafkaStore(str(path)) as store:
        return _sorted([(r.partition, r.key, r.value) for r in store.scan() if r.topic == "t"])


KEYS = [*JAVA_MURMUR2, *(f"k{i}".encode() for i in range(8))]


@pytest.mark.parametrize("general", [False, True], ids=["plain", "general"])
def test_keyed_dicts_naming_no_partition_go_to_their_keys_partition(tmp_path, general):
    """The plain dicts' C path and the general path (an ``offset`` field) route alike."""
    logs = _log_dir(tmp_path / "logs", "t", [0, 1, 2])
    extra = {"offset": -1} if general else {}
    items = [{"topic": "t", "key": k, "value": b"v", **extra} for k in KEYS]
    items += [{"topic": "t", "value": b"nokey", **extra},
              {"topic": "t", "key": None, "value": b"null", **extra},
              {"topic": "t", "key": KEYS[0], "value": b"named", "partition": 2, **extra}]
    with KafkaStore(str(logs), "a") as store:
        results = store.append_batch(items)
    want = _sorted([(_java_partition(k, 3), k, b"v") for k in KEYS]
                   + [(0, None, b"nokey"), (0, None, b"null"), (2, KEYS[0], b"named")])
    assert _where(logs) == want
    assert [r.partition for r in results[:len(KEYS)]] == [_java_partition(k, 3) for k in KEYS]
    assert {_java_partition(k, 3) for k in KEYS} == {0, 1, 2}     # the keys do spread


def test_a_topic_of_one_partition_or_none_takes_partition_0(tmp_path):
    logs = _log_dir(tmp_path / "logs", "t", [0])
    with KafkaStore(str(logs), "a") as store:
        store.append_batch([{"topic": "t", "key": k, "value": b"v"} for k in KEYS])
        store.append_batch([{"topic": "new", "key": k, "value": b"v"} for k in KEYS])
        assert store.partitions("t") == [0]
        assert store.partitions("new") == [0]


def test_the_metadata_partition_count_wins_over_the_directories(tmp_path):
    """A broker holds the partitions assigned to it: the count is the metadata's (5), not 3."""
    logs = _log_dir(tmp_path / "logs", "t", [0, 1, 2, 3, 4])
    write_metadata_log(logs, [topic_record("t", "AAAAAAAAAAAAAAAAAAAAMw")]
                       + [partition_record("AAAAAAAAAAAAAAAAAAAAMw", n, [1]) for n in range(7)])
    with KafkaStore(str(logs), "a") as store:
        assert store.partition_widths()["t"] == 7
        held = [k for k in KEYS if _java_partition(k, 7) <= 4]
        store.append_batch([{"topic": "t", "key": k, "value": b"v"} for k in held])
    assert _where(logs) == _sorted([(_java_partition(k, 7), k, b"v") for k in held])


@pytest.mark.parametrize("general", [False, True], ids=["plain", "general"])
def test_a_key_choosing_a_partition_not_held_is_refused(tmp_path, general):
    """Never written to another partition than the producer's: refused, naming topic, partition, key."""
    logs = _log_dir(tmp_path / "logs", "t", [1, 2])      # 3 partitions, 0 held by another broker
    key = next(k for k in KEYS if _java_partition(k, 3) == 0)
    extra = {"offset": -1} if general else {}
    with KafkaStore(str(logs), "a") as store:
        with pytest.raises(NotFoundError, match=rf"expected partition 0 of topic 't' here.*key {key!r}.*"
                                                r"3 partitions.*found no t-0"):
            store.append_batch([{"topic": "t", "key": b"x" * 3, "value": b"v", "partition": 1, **extra},
                                {"topic": "t", "key": key, "value": b"v", **extra}])
        assert store.partitions("t") == [1, 2]
    assert _where(logs) == []       # nothing written


def test_a_partition_directory_store_routes_over_its_log_directory(tmp_path):
    logs = _log_dir(tmp_path / "logs", "t", [0, 1, 2])
    here = next(k for k in KEYS if _java_partition(k, 3) == 1)
    other = next(k for k in KEYS if _java_partition(k, 3) == 2)
    with KafkaStore(str(logs / "t-1"), "a") as store:
        store.append_batch([{"topic": "t", "key": here, "value": b"v"}])
        with pytest.raises(NotFoundError, match="found no t-2"):
            store.append_batch([{"topic": "t", "key": other, "value": b"v"}])
    assert _where(logs) == [(1, here, b"v")]


def test_plain_groups_route_in_c_as_the_reference():
    widths = {"t": 3}
    items = [{"topic": "t", "key": k, "value": b"v"} for k in KEYS] + [{"topic": "t", "value": b"v"}]
    groups, _ = dictappend.plain_groups(items, widths)
    assert groups == dictappend.plain_groups_py(items, widths)
    got = {p: (np.frombuffer(rows, np.int64).tolist(), routed) for _, p, rows, _, routed in groups}
    for p, (rows, routed) in got.items():
        keyed = [i for i in rows if i < len(KEYS)]
        assert all(_java_partition(KEYS[i], 3) == p for i in keyed)
        assert routed == (keyed[0] if keyed else -1)


def test_arrow_rows_without_a_partition_column_go_to_their_keys_partition(tmp_path):
    logs = _log_dir(tmp_path / "logs", "t", [0, 1, 2])
    keys = [*KEYS, None]
    table = pa.table({"topic": ["t"] * len(keys), "key": keys, "value": [b"v"] * len(keys)})
    with KafkaStore(str(logs), "a") as store:
        assert store.append_arrow(table) == len(keys)
    assert _where(logs) == _sorted([(_java_partition(k, 3), k, b"v") for k in KEYS] + [(0, None, b"v")])


def test_arrow_plan_routes_per_topic():
    a = next(k for k in KEYS if _java_partition(k, 5) != 0)
    b = KEYS[1]
    table = pa.record_batch({"topic": ["a", "b", "a", "c"], "key": [a, b, None, KEYS[2]],
                             "value": [b"v"] * 4})
    plan = arrowappend.plan(table, {"a": 5, "b": 2})
    got = {(t, p): rows.tolist() for t, p, rows in plan.groups}
    assert got == {("a", _java_partition(a, 5)): [0], ("b", _java_partition(b, 2)): [1],
                   ("a", 0): [2], ("c", 0): [3]}
    assert plan.routed == {("a", _java_partition(a, 5)): 0, ("b", _java_partition(b, 2)): 1}


def test_arrow_key_choosing_a_partition_not_held_is_refused(tmp_path):
    logs = _log_dir(tmp_path / "logs", "t", [1, 2])
    key = next(k for k in KEYS if _java_partition(k, 3) == 0)
    with KafkaStore(str(logs), "a") as store:
        with pytest.raises(NotFoundError, match="found no t-0"):
            store.append_arrow(pa.table({"topic": ["t"], "key": [key], "value": [b"v"]}))
    assert _where(logs) == []


def test_cli_write_input_routes_keyed_lines(tmp_path, capsys):
    logs = _log_dir(tmp_path / "logs", "orders", [0, 1, 2])
    lines = tmp_path / "k.jsonl"
    lines.write_text("".join(json.dumps({"topic": "orders", "key": k.decode(), "value": "v"}) + "\n"
                             for k in KEYS) + '{"topic": "orders", "value": "nokey"}\n')
    assert cli.main(["write", str(logs), "--format", "kafka", "--input", str(lines)], io.StringIO()) == 0
    with KafkaStore(str(logs)) as store:
        got = _sorted([(r.partition, r.key) for r in store.scan()])
    assert got == _sorted([(_java_partition(k, 3), k) for k in KEYS] + [(0, None)])


def test_cli_write_input_refuses_a_key_whose_partition_is_not_held(tmp_path, capsys):
    logs = _log_dir(tmp_path / "logs", "orders", [1, 2])
    key = next(k for k in KEYS if _java_partition(k, 3) == 0)
    lines = tmp_path / "k.jsonl"
    lines.write_text(json.dumps({"topic": "orders", "key": key.decode(), "value": "v"}) + "\n")
    assert cli.main(["write", str(logs), "--format", "kafka", "--input", str(lines)], io.StringIO()) == 1
    err = capsys.readouterr().err
    assert f"expected partition 0 of topic 'orders' here, the one key {key.decode()!r}" in err
    assert "Traceback" not in err
    assert not (logs / "orders-0").exists()


def test_cli_write_input_cuts_batches_of_the_partition_keys_route_to(tmp_path, capsys):
    """``write --input`` ends a partition's batch before it passes ``max.message.bytes``: the lines a
    key routes there count toward that partition's batch (counted under partition 0, a batch of
    explicit and keyed lines for partition 1 passed the limit and was refused)."""
    logs = _log_dir(tmp_path / "logs", "t", [0, 1, 2])
    one = [k for k in (f"k{i}" for i in range(200)) if partitioner.partition_for_key(k, 3) == 1][:20]
    lines = tmp_path / "k.jsonl"
    with lines.open("w") as out:
        for i, key in enumerate(one):
            out.write(json.dumps({"topic": "t", "partition": 1, "value": f"{i:03d}" + "x" * 97}) + "\n")
            out.write(json.dumps({"topic": "t", "key": key, "value": f"{i:03d}" + "y" * 97}) + "\n")
    argv = ["write", str(logs), "--input", str(lines), "--config", "max.message.bytes=2000"]
    assert cli.main(argv, io.StringIO()) == 0, capsys.readouterr().err
    with KafkaStore(str(logs)) as store:
        records = list(store.read("t", 1))
    assert len(records) == 2 * len(one)
    assert max(r.batch.size for r in records) <= 2000


def test_a_transactions_keyed_dicts_naming_no_partition_go_to_their_keys_partition(tmp_path):
    """A transactional producer partitions as any (KafkaProducer.partition before the accumulator)."""
    logs = _log_dir(tmp_path / "logs", "t", [0, 1, 2])
    with KafkaStore(str(logs), "a") as store:
        with store.transaction(7) as txn:
            results = txn.append_batch([{"topic": "t", "key": k, "value": b"v"} for k in KEYS]
                                       + [{"topic": "t", "value": b"nokey"}])
        assert [r.partition for r in results] == [_java_partition(k, 3) for k in KEYS] + [0]
        missing = _log_dir(tmp_path / "other", "t", [1, 2])
    key = next(k for k in KEYS if _java_partition(k, 3) == 0)
    with KafkaStore(str(missing), "a") as store:
        txn = store.transaction(8)
        with pytest.raises(NotFoundError, match="found no t-0"):
            txn.append_batch([{"topic": "t", "key": key, "value": b"v"}])
        assert store.partitions("t") == [1, 2]
