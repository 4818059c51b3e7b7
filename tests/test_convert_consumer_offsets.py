"""Consumer positions across a conversion (``consumers --reset-offsets --from-file F --converted-from
FORMAT``): a Kafka group's committed offsets, exported from the source, go on in the RocketMQ store
converted from it, whose queue offsets are dense where the Kafka offsets have gaps (transaction
markers, compaction): each becomes the queue offset of the first message converted from that Kafka
offset or a later one, its topic the name the conversion gave it.
"""

from __future__ import annotations

import bisect
import json
import shutil
from pathlib import Path

import pytest
from conftest import cli_run
from test_convert_mapping import ROCKETMQ_CONFIG, write_kafka

import segstore
from segstore import registry
from segstore.convert import convert
from segstore.convert.interchange import Peer
from segstore.errors import ConversionError

TOPIC, ESCAPED = "orders.v1", "orders%2Ev1"


def _records(count: int, tag: str) -> list:
    return [(b"k%d" % i, b"%s-%d" % (tag.encode(), i), []) for i in range(count)]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path, dict[int, list[int]]]:
    """A Kafka log dir of two partitions whose offsets have gaps (offset deltas, a transaction's
    marker), the RocketMQ store converted from it, and each partition's data offsets (the records
    its queue holds)."""
    root = tmp_path_factory.mktemp("converted")
    src = root / "kafka"
    plain = {"transactional": False, "log_append": False, "compression": "none"}
    write_kafka(src, TOPIC, 0, [{"records": _records(3, "a"), "gap": 0, **plain},
                                {"records": _records(4, "b"), "gap": 3, **plain},
                                {"records": _records(2, "c"), "gap": 0, **plain, "transactional": True},
                                {"control": "COMMIT", "gap": 0},
                                {"records": _records(3, "d"), "gap": 2, **plain}])
    write_kafka(src, TOPIC, 1, [{"records": _records(5, "e"), "gap": 0, **plain}])
    dst = root / "rocketmq"
    convert(src, dst, to="rocketmq", verify=True, config=ROCKETMQ_CONFIG)
    with segstore.open(src, "kafka") as store:
        # (a transaction's marker is in no RocketMQ queue: a rolled-back message of the commitlog)
        offsets = {p: [r.offset for r in store.read(TOPIC, p) if not r.batch.is_control] for p in (0, 1)}
    assert offsets[0] != list(range(offsets[0][0], offsets[0][0] + len(offsets[0])))      # gaps
    return src, dst, offsets


def _tree(path: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in path.rglob("*") if p.is_file())


def _expected(data_offsets: list[int], committed: int) -> int:
    """The queue offset of the first record at or past ``committed`` (the queue's end past them all)."""
    return bisect.bisect_left(data_offsets, committed)


def test_each_kafka_offset_goes_to_the_first_message_converted_from_it_or_later(converted):
    """Every Kafka offset from before the first record to past the last (in gaps, on a marker, on a
    record) goes to the queue offset of the first record at or past it."""
    _, dst, offsets = converted
    side = registry.get("rocketmq").conversion()
    peer = Peer("kafka", registry.get("kafka").conversion().topics)
    with segstore.open(dst, "rocketmq") as store:
        for partition, data in offsets.items():
            for committed in range(0, data[-1] + 3):
                assert side.converted_offset(store, ESCAPED, partition, peer, committed) \
                    == _expected(data, committed), (partition, committed)


def test_a_message_appended_after_the_conversion_counts_as_past_every_converted_one(converted, tmp_path):
    """A group that had read the whole Kafka partition goes on with what was appended to the RocketMQ
    queue since (messages without ``kafka.offset``), not past it."""
    _, dst, offsets = converted
    copy = tmp_path / "store"
    shutil.copytree(dst, copy)
    with segstore.open(copy, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append({"topic": ESCAPED, "queue_id": 1, "body": b"native"})
    side = registry.get("rocketmq").conversion()
    peer = Peer("kafka", registry.get("kafka").conversion().topics)
    with segstore.open(copy, "rocketmq") as store:
        end = store.offset_range(ESCAPED, 1)[1]
        past = side.converted_offset(store, ESCAPED, 1, peer, offsets[1][-1] + 1)
        assert past == end - 1 == len(offsets[1])
        assert side.converted_offset(store, ESCAPED, 1, peer, offsets[1][-1]) == end - 2


def test_a_kafka_offset_property_that_is_no_number_is_a_conversion_error(tmp_path):
    path = tmp_path / "store"
    with segstore.open(path, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append({"topic": "t", "queue_id": 0, "body": b"x", "properties": {"kafka.offset": "x"}})
    side = registry.get("rocketmq").conversion()
    with segstore.open(path, "rocketmq") as store, pytest.raises(ConversionError, match=r"kafka\.offset"):
        side.converted_offset(store, "t", 0, Peer("kafka", registry.get("kafka").conversion().topics), 5)


def test_a_kafka_group_exported_goes_on_in_the_converted_store(converted, tmp_path):
    """The operator's two commands: the group's plan exported from the Kafka source (its names and
    offsets), executed on the RocketMQ store with ``--converted-from kafka``."""
    _, dst, offsets = converted
    store = tmp_path / "store"
    shutil.copytree(dst, store)
    committed = {0: offsets[0][4] - 1, 1: offsets[1][2]}      # in a gap of partition 0; on a record
    plan = tmp_path / "g.csv"
    plan.write_text("".join(f"{TOPIC},{p},{o}\n" for p, o in committed.items()))
    code, out, err = cli_run("consumers", store, "--group", "g", "--reset-offsets", "--from-file", plan,
                             "--converted-from", "kafka", "--execute", "--json")
    assert code == 0, err
    want = {p: _expected(offsets[p], o) for p, o in committed.items()}
    assert want == {0: 4, 1: 2}
    assert [(row["topic"], row["partition"], row["new_offset"]) for row in json.loads(out)] == \
        [(ESCAPED, p, o) for p, o in sorted(want.items())]
    code, out, err = cli_run("consumers", store, "--group", "g", "--json")
    assert code == 0, err
    assert {(row["topic"], row["partition"]): row["committed_offset"] for row in json.loads(out)} == \
        {(ESCAPED, p): o for p, o in want.items()}


@pytest.mark.parametrize("argv, words", [
    (["--to-earliest", "--converted-from", "kafka"], "--converted-from goes with --from-file"),
    (["--from-file", "PLAN", "--converted-from", "rocketmq"], "expected the format of the store"),
    (["--from-file", "PLAN", "--converted-from", "kafak"], "found 'kafak'"),
])
def test_converted_from_refuses_what_it_cannot_mean(converted, tmp_path, argv, words):
    """Without a file of the source's offsets, or naming no format it could have been converted from:
    a usage error (exit 2), nothing written."""
    _, dst, _ = converted
    plan = tmp_path / "g.csv"
    plan.write_text(f"{TOPIC},0,1\n")
    before = _tree(dst)
    code, _, err = cli_run("consumers", dst, "--group", "g", "--reset-offsets", "--execute",
                           *[str(plan) if arg == "PLAN" else arg for arg in argv])
    assert code == 2 and words in err, err
    assert _tree(dst) == before         # refused before the store was opened to write


def test_a_line_of_a_partition_the_store_lacks_is_named_and_nothing_is_written(converted, tmp_path):
    _, dst, _ = converted
    plan = tmp_path / "g.csv"
    plan.write_text(f"{TOPIC},0,1\n{TOPIC},7,5\n")
    before = sorted(p.name for p in (dst / "config").iterdir())
    code, _, err = cli_run("consumers", dst, "--group", "g", "--reset-offsets", "--from-file", plan,
                           "--converted-from", "kafka", "--execute")
    assert code == 1 and f"expected {ESCAPED}-7 here to plan the new offset of group 'g'" in err, err
    assert sorted(p.name for p in (dst / "config").iterdir()) == before     # no consumerOffset.json


def test_a_rocketmq_group_plan_names_the_kafka_topics_its_conversion_made(tmp_path):
    """RocketMQ -> Kafka keeps the offsets (a queue offset is the Kafka offset); ``--converted-from
    rocketmq`` renames a topic whose name Kafka cannot hold as the conversion did (``%`` -> ``.25``),
    what ``sed`` did before."""
    src, dst = tmp_path / "rocketmq", tmp_path / "kafka"
    with segstore.open(src, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch([{"topic": "%RETRY%g", "queue_id": i % 2, "body": b"m%d" % i} for i in range(8)])
    convert(src, dst, to="kafka", verify=True)
    plan = tmp_path / "g.csv"
    plan.write_text("%RETRY%g,0,2\n%RETRY%g,1,9\n")
    code, out, err = cli_run("consumers", dst, "--group", "g", "--reset-offsets", "--from-file", plan,
                             "--converted-from", "rocketmq", "--json")
    assert code == 0 and "nothing written" in err, err
    assert [(row["topic"], row["partition"], row["new_offset"]) for row in json.loads(out)] == \
        [(".25RETRY.25g", 0, 2), (".25RETRY.25g", 1, 4)]        # 9 clamped to the partition's end
