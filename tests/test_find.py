"""``Store.find(topic, key, ...)`` and ``Store.offset_for_time(...)``: one call, the same meaning, on both
formats (the public API).  Expected answers come from a plain scan of the same store."""

from __future__ import annotations

import io
import json
import struct

import pytest
from conftest import FIXTURES, copy_writable

import segstore
from segstore import cli
from segstore.errors import ConfigError, NotFoundError

ROCKETMQ = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA = FIXTURES / "kafka" / "uncompressed" / "topic-0"


def _kafka_with_key_index(tmp_path):
    part = copy_writable(KAFKA, tmp_path / "topic-0")
    assert cli.main(["index", "build", str(part), "--index", "key"], io.StringIO()) == 0
    return part


def test_find_on_rocketmq_returns_every_message_carrying_the_key():
    with segstore.open(ROCKETMQ) as store:
        scanned = [
            (m.queue_id, m.queue_offset) for m in store.scan() if m.topic == "TopicA" and "shared-0" in m.keys
        ]
        found = store.find("TopicA", "shared-0")
        assert sorted((m.queue_id, m.queue_offset) for m in found) == sorted(scanned) and len(scanned) > 1
        assert [(m.queue_id, m.queue_offset) for m in found] == sorted(scanned)  # partition, then offset
        one = store.find("TopicA", "shared-0", partition=scanned[0][0])
        assert {m.queue_id for m in one} == {scanned[0][0]}
        newest = store.find("TopicA", "shared-0", max_hits=1)   # one hit in all, not one per queue
        last = max((m for m in store.scan() if m.topic == "TopicA" and "shared-0" in m.keys),
                   key=lambda m: m.physical_offset)
        assert [(m.queue_id, m.queue_offset) for m in newest] == [(last.queue_id, last.queue_offset)]
        assert store.find("TopicA", "no-such-key") == []


def test_find_on_kafka_returns_records_with_that_key(tmp_path):
    part = _kafka_with_key_index(tmp_path)
    with segstore.open(part) as store:
        scanned = [r.offset for r in store.scan() if r.key == b"key-14"]
        found = store.find("topic", "key-14")
        assert [r.offset for r in found] == scanned and len(scanned) > 1
        assert all(r.key == b"key-14" for r in found)
        assert [r.offset for r in store.find("topic", b"key-14", max_hits=1)] == scanned[-1:]
        window = [
            r.offset
            for r in store.scan()
            if r.key == b"key-14" and found[0].timestamp <= r.timestamp <= found[0].timestamp
        ]
        assert [
            r.offset for r in store.find("topic", "key-14", begin=found[0].timestamp, end=found[0].timestamp)
        ] == window


def test_find_on_kafka_without_a_key_index_scans_the_key_column_to_the_same_answer(tmp_path):
    part = _kafka_with_key_index(tmp_path)
    calls = [("key-14", {}), (b"key-14", {"max_hits": 1}), ("key-3", {"partition": 0}), ("nope", {})]
    with segstore.open(part) as indexed, segstore.open(KAFKA) as scanned:
        assert "key" in indexed.indexes and scanned.indexes is None
        for key, options in calls:
            want = [(r.partition, r.offset) for r in indexed.find("topic", key, **options)]
            assert [(r.partition, r.offset) for r in scanned.find("topic", key, **options)] == want
        hits = scanned.find("topic", "key-14")
        first = hits[0].timestamp
        assert [r.offset for r in scanned.find("topic", "key-14", begin=first, end=first)] == [
            r.offset for r in hits if r.timestamp == first]
        for topic, partition in (("topic", 7), ("other", None)):
            with pytest.raises(NotFoundError):      # as a read of them, not "no hits"
                scanned.find(topic, "key-14", partition=partition)


@pytest.mark.parametrize("path,topic", [(ROCKETMQ, "TopicA"), (KAFKA, "topic")], ids=["rocketmq", "kafka"])
def test_offset_for_time_is_the_first_offset_at_or_after_the_time(path, topic):
    with segstore.open(path) as store:
        partition = store.partitions(topic)[0]
        start, _ = store.offset_range(topic, partition)
        records = list(store.read(topic, partition, start))
        # the time each format indexes: Kafka the record timestamp, RocketMQ the store timestamp
        times = [getattr(r, "store_timestamp", None) or r.timestamp for r in records]
        offsets = [
            getattr(r, "queue_offset", None) if store.format == "rocketmq" else r.offset for r in records
        ]
        for i in (0, len(records) // 2, len(records) - 1):
            # ListOffsets / getOffsetInQueueByTime: the first offset, in offset order, whose time is >= target
            target = times[i]
            assert store.offset_for_time(topic, partition, target) == next(
                o for o, t in zip(offsets, times, strict=True) if t >= target
            )
        assert store.offset_for_time(topic, partition, max(times) + 1) is None
        assert store.offset_for_time(topic, partition, min(times) - 1) == start


@pytest.mark.parametrize("path,topic", [(ROCKETMQ, "TopicA"), (KAFKA, "topic")], ids=["rocketmq", "kafka"])
def test_offset_for_time_of_a_partition_the_store_lacks_is_not_found(path, topic):
    with segstore.open(path) as store, pytest.raises(NotFoundError):
        store.offset_for_time(topic, 99, 0)


def test_offset_for_time_of_a_queue_the_store_lacks_is_not_found_with_a_time_index(tmp_path):
    """Through the extra ``time`` index a queue the store does not hold was "expected a 'time' index for
    T/9, found none (run: segstore index build PATH --index time)": a rebuild cannot make a queue.  It is
    the store's answer now, as without the index (and, on the CLI, "expected --queue 9 ...")."""
    store_dir = copy_writable(ROCKETMQ, tmp_path / "store")
    assert cli.main(["index", "build", str(store_dir), "--index", "time"], io.StringIO()) == 0
    with segstore.open(store_dir) as store:
        assert "time" in store.indexes
        for topic, queue in (("TopicA", 99), ("NoTopic", 0)):
            with pytest.raises(NotFoundError, match=f"a consume queue for {topic}/{queue}, found none"):
                store.offset_for_time(topic, queue, 0)
        assert store.offset_for_time("TopicA", 0, 0) == store.offset_range("TopicA", 0)[0]


@pytest.mark.parametrize("path,topic", [(ROCKETMQ, "TopicA"), (KAFKA, "topic")], ids=["rocketmq", "kafka"])
def test_lookups_refuse_a_partition_or_time_that_is_no_number_as_read_does(path, topic):
    """``read`` refuses a partition that is not an integer (ConfigError); ``offset_range``,
    ``offset_for_time`` and ``offsets_between`` looked a str ``"0"`` up and said the store held no
    partition 0 (NotFoundError, of a partition it holds), and took ``True`` and ``0.0`` for 0 and 1.  A NaN
    time, which no comparison holds for, answered None (``offset_for_time``), an empty window
    (``offsets_between``) and no hit (``find``) as if no record were that new: refused now too."""
    nan = float("nan")
    with segstore.open(path) as store:
        partition = store.partitions(topic)[0]
        for bad in (str(partition), True, float(partition), None):
            for method, extra in (("offset_range", ()), ("offset_for_time", (0,)), ("offsets_between", ()),
                                  ("read", ())):
                with pytest.raises(ConfigError, match="expected a partition as an integer"):
                    list(getattr(store, method)(topic, bad, *extra))
        with pytest.raises(ConfigError, match="found float nan"):
            store.offset_for_time(topic, partition, nan)
        for window in ({"begin": nan}, {"end": nan}):
            with pytest.raises(ConfigError, match="found float nan"):
                store.offsets_between(topic, partition, **window)
            with pytest.raises(ConfigError, match="found float nan"):
                store.find(topic, "k", **window)
        assert store.offsets_between(topic, partition) == store.offset_range(topic, partition)


def test_kafka_find_never_answers_a_transaction_marker(tmp_path):
    """A transaction marker's key is its version and type (``EndTransactionMarker``: 0x0000 then 0 for ABORT,
    1 for COMMIT), no record key; no consumer is given it.  ``find`` without a key index scanned the key
    column with the markers in it and answered them for ``b"\\0\\0\\0\\1"``; through the key index, which
    skips control batches, it answered none: the same call gave two answers.  Neither answers one now."""
    logs = copy_writable(FIXTURES / "kafka" / "txn", tmp_path / "txn")
    with segstore.open(logs / "topic-0") as store:
        markers = {r.offset for r in store.read("topic", 0) if r.batch.is_control}
        assert markers
        user = store.find("topic", b"key-4")
        for marker_key in (b"\0\0\0\0", b"\0\0\0\1"):
            assert store.find("topic", marker_key) == []
    assert cli.main(["index", "build", str(logs / "topic-0"), "--index", "key"], io.StringIO()) == 0
    with segstore.open(logs / "topic-0") as store:
        for marker_key in (b"\0\0\0\0", b"\0\0\0\1"):
            assert store.find("topic", marker_key) == []
        assert [r.offset for r in store.find("topic", b"key-4")] == [r.offset for r in user]


def test_kafka_find_means_the_record_key_with_headers_in_the_key_index(tmp_path):
    """A key index built with ``key.index.headers`` holds header values as keys too, and
    ``store.indexes.find_key`` answers them (docs/index-layouts.md).  ``find`` and ``query --key`` mean the
    record key (README "Keys mean the same in the library, Spark and conversion"), which is what they
    answer without the index; with it they also answered a record whose header carried the key, and
    ``query`` printed it as ``key k1`` though its key is ``zz``.  Both answer the record key only now."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "T", "key": b"k1", "value": b"a"},
                            {"topic": "T", "key": b"zz", "value": b"b", "headers": [("trace", b"k1")]},
                            {"topic": "T", "key": b"k1", "value": b"c", "headers": [("trace", b"k1")]}])
    before = _cli_hits(logs, "--topic", "T", "--key", "k1")
    assert before == [(0, 0), (0, 2)]
    assert cli.main(["index", "build", str(logs), "--index", "key", "--option", "key.index.headers=trace"],
                    io.StringIO()) == 0
    with segstore.open(logs) as store:
        assert store.indexes.find_key("T", 0, b"k1") == [0, 1, 2]     # the header values, as documented
        assert [r.offset for r in store.find("T", "k1")] == [0, 2]
        assert [r.offset for r in store.find("T", "k1", max_hits=1)] == [2]
        assert store.find("T", "zz")[0].offset == 1
    assert _cli_hits(logs, "--topic", "T", "--key", "k1") == before


# -- one meaning for key lookups: the library's find and the CLI's query --key ----------------------

#: RocketMQ IndexFile layout (4.9.7 ``IndexHeader``, ``IndexFile``): a 40-byte header (beginTimestamp,
#: endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount), 4-byte slots, 20-byte entries
#: (keyHash, phyOffset, timeDiff, prevIndex).
INDEX_HEADER = struct.Struct(">qqqqii")
INDEX_ENTRY = struct.Struct(">iqii")
SLOT_SIZE = 4


def _index_times(store_dir, hash_slots: int) -> dict[int, int]:
    """Per commitlog offset, the time the broker's key lookup compares with ``begin``/``end``, read from
    the IndexFiles' bytes: ``IndexFile.putKey`` stores ``(storeTimestamp - beginTimestamp) / 1000`` (whole
    seconds, rounded down) and ``selectPhyOffset`` compares ``beginTimestamp + timeDiff * 1000`` with
    ``[begin, end]``, both ends inclusive, in milliseconds."""
    times: dict[int, int] = {}
    for path in sorted((store_dir / "index").iterdir()):
        data = path.read_bytes()
        begin, _, _, _, _, count = INDEX_HEADER.unpack_from(data)   # hashSlotCount: slots used, not the size
        first = INDEX_HEADER.size + hash_slots * SLOT_SIZE
        for number in range(1, count):      # entry 0 is never used (invalidIndex)
            _, phy, diff, _ = INDEX_ENTRY.unpack_from(data, first + number * INDEX_ENTRY.size)
            times[phy] = begin + diff * 1000
    return times


def _cli_hits(path, *argv) -> list[tuple[int, int]]:
    """The hits of ``segstore query --key ... --json``, in partition then offset order (RocketMQ prints
    them in commitlog order, as the broker returns them)."""
    out = io.StringIO()
    assert cli.main(["query", str(path), *argv, "--json"], out) == 0
    return sorted((o.get("queue_id", o.get("partition")), o.get("queue_offset", o.get("offset")))
                  for o in map(json.loads, out.getvalue().splitlines()))


def test_rocketmq_key_lookups_mean_what_the_broker_means_in_the_library_and_the_cli():
    """One meaning, the broker's (RocketMQ 4.9.7 ``DefaultMessageStore.queryMessage`` over
    ``IndexService.queryOffset`` and ``IndexFile.selectPhyOffset``): ``begin``/``end`` are milliseconds
    since the epoch, inclusive, compared with the message's *store* time as its IndexFile keeps it (whole
    seconds after the file's beginTimestamp); ``max`` counts hits of the whole topic, the newest (the
    index is walked from its newest entry back).  ``store.find`` and ``segstore query --key`` agree."""
    config = json.loads((ROCKETMQ.parent / "spec.json").read_text())["config"]
    index_time = _index_times(ROCKETMQ, config["maxHashSlotNum"])
    with segstore.open(ROCKETMQ) as store:
        carrying = sorted((m for m in store.scan() if m.topic == "TopicA" and "shared-0" in m.keys),
                          key=lambda m: m.physical_offset)
        # a window opening 1 ms after the first IndexFile begins: the messages that file holds are
        # stored later than that, but the file keeps their time as its begin (under a second after it)
        begin = min(index_time[m.physical_offset] for m in carrying) + 1
        end = max(m.store_timestamp for m in carrying)
        want = [m for m in carrying if begin <= index_time[m.physical_offset] <= end]
        assert 0 < len(want) < len([m for m in carrying if begin <= m.store_timestamp <= end])
        assert not [m for m in carrying if begin <= m.born_timestamp <= end]     # not the born time
        expected = sorted((m.queue_id, m.queue_offset) for m in want)
        found = store.find("TopicA", "shared-0", begin=begin, end=end)
        assert [(m.queue_id, m.queue_offset) for m in found] == expected
        assert _cli_hits(ROCKETMQ, "--topic", "TopicA", "--key", "shared-0", "--begin", str(begin),
                         "--end", str(end)) == expected
        newest = sorted((m.queue_id, m.queue_offset) for m in want[-2:])
        assert [(m.queue_id, m.queue_offset)
                for m in store.find("TopicA", "shared-0", begin=begin, end=end, max_hits=2)] == newest
        assert _cli_hits(ROCKETMQ, "--topic", "TopicA", "--key", "shared-0", "--begin", str(begin),
                         "--end", str(end), "--max", "2") == newest
        three = sorted((m.queue_id, m.queue_offset) for m in carrying[-3:])
        assert [(m.queue_id, m.queue_offset) for m in store.find("TopicA", "shared-0", max_hits=3)] == three
        assert _cli_hits(ROCKETMQ, "--topic", "TopicA", "--key", "shared-0", "--max", "3") == three
        one_queue = [m for m in carrying if m.queue_id == carrying[0].queue_id]
        assert [(m.queue_id, m.queue_offset)
                for m in store.find("TopicA", "shared-0", partition=carrying[0].queue_id, max_hits=1)] == [
            (one_queue[-1].queue_id, one_queue[-1].queue_offset)]


def test_kafka_key_lookups_count_max_hits_over_the_whole_topic(tmp_path):
    """Kafka has no broker key lookup: ``begin``/``end`` are the record timestamps (the time its
    ``.timeindex`` and ListOffsets use), and ``max`` counts hits of the whole topic, the newest by
    record timestamp (ties: the later partition and offset), in the library and the CLI alike."""
    logdir = tmp_path / "logs"
    with segstore.open(logdir, format="kafka", mode="a") as store:
        store.append_batch([segstore.records.Message("t", b"v%d" % i, key=b"k", partition=i % 3,
                                                     timestamp=1_700_000_000_000 + i) for i in range(9)])
    with segstore.open(logdir) as store:
        every = store.find("t", "k")
        assert [(r.partition, r.offset) for r in every] == [(p, o) for p in range(3) for o in range(3)]
        newest = sorted(every, key=lambda r: r.timestamp)[-4:]
        expected = sorted((r.partition, r.offset) for r in newest)
        assert [(r.partition, r.offset) for r in store.find("t", "k", max_hits=4)] == expected
        window = [(r.partition, r.offset) for r in every
                  if 1_700_000_000_002 <= r.timestamp <= 1_700_000_000_006]
        assert [(r.partition, r.offset) for r in store.find("t", "k", begin=1_700_000_000_002,
                                                            end=1_700_000_000_006)] == window
    assert _cli_hits(logdir, "--topic", "t", "--key", "k", "--max", "4") == expected
    assert _cli_hits(logdir, "--topic", "t", "--key", "k", "--begin", "1700000000002",
                     "--end", "1700000000006") == window


def test_max_hits_above_the_number_of_hits_keeps_every_hit(tmp_path, capsys):
    """RocketMQ 4.9.7 ``DefaultMessageStore.queryMessage(topic, key, maxNum, begin, end)`` (over
    ``IndexService.queryOffset``) returns every hit when fewer than ``maxNum`` carry the key; the newest
    ``max_hits`` keep all of them, on both formats, with and without Kafka's extra key index, and
    ``segstore query --key --max N`` shows them all (no "2 of 3 hits shown")."""
    kafka, rocketmq = tmp_path / "k", tmp_path / "r"
    with segstore.open(kafka, format="kafka", mode="a") as store:
        for i in range(3):
            store.append({"topic": "t", "key": b"k", "value": b"v%d" % i})
    with segstore.open(rocketmq, format="rocketmq", mode="a", mappedFileSizeCommitLog=1 << 20,
                       mappedFileSizeConsumeQueue=20_000, maxHashSlotNum=100, maxIndexNum=400) as store:
        for i in range(3):
            store.append({"topic": "T", "queue_id": 0, "body": b"b%d" % i, "keys": ["k"]})
    for path, topic in ((kafka, "t"), (rocketmq, "T")):
        with segstore.open(path) as store:
            for max_hits in (3, 4, 5, 100):
                assert [r.offset for r in store.find(topic, "k", max_hits=max_hits)] == [0, 1, 2], max_hits
            assert [r.offset for r in store.find(topic, "k", max_hits=2)] == [1, 2]
        capsys.readouterr()
        assert _cli_hits(path, "--topic", topic, "--key", "k", "--max", "5") == [(0, 0), (0, 1), (0, 2)]
        assert "hits shown" not in capsys.readouterr().err
    assert cli.main(["index", "build", str(kafka / "t-0"), "--index", "key"], io.StringIO()) == 0
    with segstore.open(kafka / "t-0") as store:
        assert "key" in store.indexes
        assert [r.offset for r in store.find("t", "k", max_hits=5)] == [0, 1, 2]


def test_offset_for_time_refuses_a_negative_time_on_every_format(tmp_path):
    """``offset_for_time`` means a time on every format: a negative one is refused (ConfigError), as
    ``offsets_between`` refuses it.  Before: Kafka passed it to ``Partition.offset_for_time`` (Kafka
    3.8.0 ``UnifiedLog.fetchOffsetByTimestamp``), which reads -1, -2 and -3 as the ListOffsets codes
    latest, earliest and max-timestamp (here 3, 0 and 1); RocketMQ answered 0.  The CLI's
    ``query --timestamp earliest|latest|max-timestamp`` (``kafka-get-offsets --time``) still answers,
    through ``Store.query``."""
    kafka, rocketmq = tmp_path / "k", tmp_path / "r"
    with segstore.open(kafka, format="kafka", mode="a") as store:
        for i in range(3):
            store.append({"topic": "T", "value": b"x", "timestamp": 1000 + (2 - i) * (i % 2)})
    with segstore.open(rocketmq, format="rocketmq", mode="a", mappedFileSizeCommitLog=1 << 20,
                       mappedFileSizeConsumeQueue=2000, messageIndexEnable=False) as store:
        for _ in range(3):
            store.append({"topic": "T", "value": b"x"})
    for path in (kafka, rocketmq):
        with segstore.open(path) as store:
            for when in (-1, -2, -3, -4):
                refused = f"expected a lookup time of at least 0 ms, found {when}$"
                with pytest.raises(ConfigError, match=refused):
                    store.offset_for_time("T", 0, when)
                with pytest.raises(ConfigError):
                    store.offsets_between("T", 0, begin=when)
            assert store.offset_for_time("T", 0, 0) == 0
    answers = {}
    for spec in ("earliest", "max-timestamp", "-2", "-3"):
        out = io.StringIO()
        assert cli.main(["query", str(kafka), "--topic", "T", "--partition", "0", "--timestamp", spec,
                         "--count", "1", "--json"], out) == 0
        answers[spec] = json.loads(out.getvalue().splitlines()[0])["offset"]
    assert answers == {"earliest": 0, "max-timestamp": 1, "-2": 0, "-3": 1}


def test_a_stores_indexes_list_their_names(tmp_path):
    """``store.indexes`` answers ``in`` and ``[name]``; iterating it (``list(store.indexes)``, ``for name in
    store.indexes``) fell back to ``__getitem__(0)`` and raised NotFoundError "expected the 0 index"."""
    store_dir = copy_writable(ROCKETMQ, tmp_path / "store")
    assert cli.main(["index", "build", str(store_dir), "--index", "time", "--index", "offset"],
                    io.StringIO()) == 0
    with segstore.open(store_dir) as store:
        assert sorted(store.indexes) == ["offset", "time"] and len(store.indexes) == 2
        assert all(name in store.indexes for name in store.indexes)
