"""Stores as real RocketMQ brokers of several versions leave them (issue 12).

The files are written by ``tests/rocketmq_broker_files.py`` from the broker sources'
layouts, independently of segstore's encoder; each test names the broker version and
the source file and method whose behaviour it reproduces.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq_broker_files import (
    Msg,
    broker_served_queue,
    java_hash,
    message_bytes,
    properties_string,
    write_filter_store,
    write_store,
)
from segstore_rocketmq.config import BrokerConfig, trailing_separator_for
from segstore_rocketmq.message import decode, encode_properties
from segstore_rocketmq.store import RocketMQStore
from segstore_rocketmq.topicconfig import dumps_fastjson, loads_fastjson

import segstore
from segstore.cli import main as cli_main
from segstore.convert import convert
from segstore.errors import ConfigError
from segstore.registry import detect

#: (version, whether ``MessageDecoder.messageProperties2String`` of that tag ends with 0x02)
VERSIONS = [((4, 2, 0), True), ((4, 8, 0), True), ((4, 9, 0), True), ((4, 9, 1), False), ((4, 9, 7), False),
            ((5, 1, 4), False), ((5, 2, 0), True), ((5, 3, 3), True)]
Version = tuple[int, int, int]
TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02")
SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200,
         "maxHashSlotNum": 64, "maxIndexNum": 256}


def messages(n: int, topic: str = "abc") -> list[Msg]:
    return [Msg(topic, i % 2, b"body-%d" % i,
                [("TAGS", f"t{i % 3}"), ("KEYS", f"k{i} x{i}"), ("UNIQ_KEY", f"U{i}")],
                store_timestamp=1_700_000_000_000 + i) for i in range(n)]


def commitlog_bytes(store: Path) -> dict[str, bytes]:
    d = store / "commitlog"
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize(("version", "trailing"), VERSIONS)
def test_version_styles_match_the_sources(version: Version, trailing: bool) -> None:
    # rocketmq-all-<version> common/.../message/MessageDecoder.java messageProperties2String
    assert trailing_separator_for(".".join(map(str, version))) is trailing
    assert properties_string([("A", "1")], version).endswith(b"\x02") is trailing


@settings(max_examples=60, deadline=None)
@given(pairs=st.dictionaries(st.text(TEXT, min_size=1), st.text(TEXT), max_size=5),
       version=st.sampled_from([v for v, _ in VERSIONS]))
def test_properties_codec_round_trips_every_style(pairs: dict[str, str], version: Version) -> None:
    raw = properties_string(list(pairs.items()), version)
    trailing = raw.endswith(b"\x02")
    assert encode_properties(pairs, trailing) == raw
    msg = decode(message_bytes(Msg("t", 0, b"x", list(pairs.items())), 0, 0, version))
    # read as the broker reads them: RocketMQ 4.9.7 MessageDecoder.string2messageProperties drops a pair
    # with an empty value (kvSepIndex < newIndex - 1), whichever style wrote it
    assert msg.properties == {name: value for name, value in pairs.items() if value}
    assert msg.trailing_separator is trailing


@pytest.mark.parametrize(("version", "trailing"), VERSIONS)
def test_appending_keeps_the_stores_style(tmp_path: Path, version: Version, trailing: bool) -> None:
    """A store written by broker <version> (CommitLog.doAppend + messageProperties2String of that tag),
    appended to by segstore configured as the reference 4.9.7: the new messages take the store's style,
    so the files equal those the old broker itself would have written for all the messages."""
    head = messages(20)
    tail = [Msg("abc", i % 2, b"tail-%d" % i, [("TAGS", f"t{i}")], store_timestamp=1_700_000_001_000 + i)
            for i in range(10)]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    write_store(str(ours), head, version=version)
    write_store(str(theirs), head + tail, version=version)
    with segstore.open(ours, "rocketmq", mode="a", **SMALL) as store:
        assert store.trailing_separator is trailing
        store.append_batch([{"topic": m.topic, "queue_id": m.queue_id, "body": m.body,
                             "tags": m.properties[0][1], "store_timestamp": m.store_timestamp,
                             "born_timestamp": m.store_timestamp - 5} for m in tail])
    assert commitlog_bytes(ours) == commitlog_bytes(theirs)
    with segstore.open(ours, "rocketmq") as store:
        assert [m.trailing_separator for m in store.scan()] == [trailing] * 30


def test_a_new_store_takes_the_configured_version(tmp_path: Path) -> None:
    for version, trailing in VERSIONS:
        path = tmp_path / "v{}.{}.{}".format(*version)
        with segstore.open(path, "rocketmq", mode="a", rocketmqVersion="{}.{}.{}".format(*version),
                           **SMALL) as store:
            store.append({"topic": "abc", "queue_id": 0, "body": b"x", "tags": "a", "keys": ["k"]})
        with segstore.open(path, "rocketmq") as store:
            (msg,) = store.scan()
        assert msg.trailing_separator is trailing
    assert BrokerConfig().rocketmqVersion == "4.9.7"
    with pytest.raises(ConfigError):
        BrokerConfig.from_mapping({"rocketmqVersion": "latest"})


@pytest.mark.parametrize("version", [(4, 2, 0), (4, 8, 0), (4, 9, 7), (5, 3, 3)])
def test_round_trip_through_kafka_is_byte_exact(tmp_path: Path, version: Version) -> None:
    """RocketMQ (broker <version>) -> Kafka -> RocketMQ gives back the old broker's commitlog and queues."""
    src = tmp_path / "src"
    write_store(str(src), messages(60), version=version)
    convert(src, tmp_path / "kafka", to="kafka", verify=True, config={})
    convert(tmp_path / "kafka", tmp_path / "back", to="rocketmq", verify=True,
            config={"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200,
                    "maxHashSlotNum": 64, "maxIndexNum": 256})
    assert commitlog_bytes(tmp_path / "back") == commitlog_bytes(src)
    for queue in ("0", "1"):
        cq = Path("consumequeue", "abc", queue, "0" * 20)
        assert (tmp_path / "back" / cq).read_bytes() == (src / cq).read_bytes()


# -- item 3: a 0-byte last commitlog file ------------------------------------------------------

def test_zero_byte_last_commitlog_file_reads_as_empty_and_recover_removes_it(tmp_path: Path) -> None:
    """A broker killed right after AllocateMappedFileService created its next file (RocketMQ 4.x,
    MappedFile.init) leaves that file at 0 bytes; 5.x MappedFileQueue.doLoad deletes it on load."""
    store = tmp_path / "s"
    written = write_store(str(store), messages(40))
    empty = store / "commitlog" / f"{written.end - written.end % 4096 + 4096:020d}"
    empty.touch()
    with segstore.open(store, "rocketmq") as s:
        assert [m.body for m in s.scan()] == [m.body for m in messages(40)]
        problems = s.verify()
    assert [(p.path, p.pos) for p in problems] == [(str(empty), 0)]
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        assert any("removed the empty commitlog file" in line for line in s.recover())
    assert not empty.exists()
    with segstore.open(store, "rocketmq") as s:
        assert s.verify() == []
        assert len(list(s.scan())) == 40


# -- item 4: a store of 0 messages ---------------------------------------------------------------

def empty_store(path: Path) -> Path:
    """What RocketMQ 4.9.7's broker leaves after start and shutdown with no message put:
    checkpoint (StoreCheckpoint, 4096 bytes), lock (DefaultMessageStore.start), config/*.json
    (ConfigManager.persist), no commitlog/ (MappedFileQueue creates files on the first put)."""
    path.mkdir()
    (path / "checkpoint").write_bytes(bytes(4096))
    (path / "lock").write_bytes(b"lock")
    (path / "config").mkdir()
    (path / "config" / "topics.json").write_text('{\n\t"dataVersion":{\n\t\t"counter":0,\n\t\t"timestamp":'
                                                 '1700000000000\n\t},\n\t"topicConfigTable":{}\n}')
    return path


def test_empty_store_is_a_store_of_zero_messages(tmp_path: Path) -> None:
    store = empty_store(tmp_path / "s")
    assert detect(str(store)) == "rocketmq"
    with segstore.open(store, "rocketmq") as s:
        assert list(s.scan()) == []
        assert s.topics() == []
        assert s.verify() == []
        assert s.info()["commitlog"]["files"] == []
    for command in (["info"], ["dump", "--json"], ["verify"]):
        assert cli_main([*command, str(store)]) == 0, command


def test_a_broker_killed_as_it_started_leaves_an_empty_store(tmp_path: Path) -> None:
    """RocketMQ 4.9.7's ``StoreCheckpoint`` constructor creates ``checkpoint`` and then maps its 4096
    bytes (which sizes the file); the ``DefaultMessageStore`` constructor creates ``lock`` (empty until
    ``start`` writes it).  A kill between them leaves both empty: a store of no message, its short
    checkpoint a verify problem (the broker reads it as zeros) that recovery makes whole."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "checkpoint").write_bytes(b"")
    (store / "lock").write_bytes(b"")
    assert detect(str(store)) == "rocketmq"
    with segstore.open(store, "rocketmq") as s:
        assert list(s.scan()) == []
        problems = [(p.pos, p.message) for p in s.verify()]
    assert problems == [(0, "expected a checkpoint of 4096 bytes, found 0")]
    assert cli_main(["recover", str(store)]) == 0
    assert (store / "checkpoint").stat().st_size == 4096
    with segstore.open(store, "rocketmq") as s:
        assert s.verify() == []


# -- item 14: one answer per question --------------------------------------------------------------

def test_time_lookup_past_the_last_message_has_one_answer(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "s"
    msgs = messages(10)
    write_store(str(store), msgs)
    late = max(m.store_timestamp for m in msgs) + 1
    with segstore.open(store, "rocketmq") as s:
        assert s.offset_for_time("abc", 0, late) is None
        assert s.offset_for_time("abc", 0, msgs[4].store_timestamp) == 2     # queue 0 holds 0, 2, 4, ...
    capsys.readouterr()
    assert cli_main(["query", str(store), "--topic", "abc", "--queue", "0", "--timestamp", str(late)]) == 1
    expected = f"segstore query: abc/0: no message stored at or after {late} (the queue ends at offset 5)\n"
    assert capsys.readouterr() == ("", expected)     # nothing matched: stdout stays empty (issue 28)
    assert cli_main(["query", str(store), "--topic", "abc", "--queue", "0", "--timestamp", str(late),
                     "--json"]) == 1
    assert capsys.readouterr() == ("", expected)
    doc = (Path(__file__).parent.parent / "docs" / "rocketmq.md").read_text()
    assert "no message stored\n  at or after MS (the queue ends at offset N)" in doc


def test_common_key_is_the_first_keys_token(tmp_path: Path) -> None:
    store = tmp_path / "s"
    write_store(str(store), messages(3))
    with segstore.open(store, "rocketmq") as s:
        records = list(s.scan())
        assert [s.to_common(r).key for r in records] == [b"k0", b"k1", b"k2"]
        assert [r.keys for r in records] == [["k0", "x0"], ["k1", "x1"], ["k2", "x2"]]


# -- item 8: what recover leaves must load in the broker ----------------------------------------

def torn_store(path: Path) -> tuple[list[tuple[int, int, int]], int]:
    """A 4.9.7 store killed while writing message 20 (CommitLog.doAppend wrote its first 10 bytes):
    abort file left (DefaultMessageStore.createTempFile), consume queues dispatched up to message 23
    (ReputMessageService had dispatched entries of messages whose bytes were still in the page cache).
    Queue 0's second file (entries 10, 11) and queue 1's (entry 10) then point only at lost messages."""
    msgs = messages(24)
    written = write_store(str(path), msgs)
    phys20 = written.placed[20][0]
    log = path / "commitlog" / f"{0:020d}"
    data = bytearray(log.read_bytes())
    data[phys20 + 10:written.end] = bytes(written.end - phys20 - 10)
    log.write_bytes(bytes(data))
    (path / "abort").write_bytes(b"")
    return written.placed, phys20


#: What the real RocketMQ 4.9.7 store served after its own recovery of ``torn_store`` (the storage
#: oracle of /work/shared/oracle: ``DefaultMessageStore.load()`` + ``start()``, then ``getMessage`` over
#: every queue; physical offsets by queue).  Run on the store ``segstore recover`` left, the broker
#: served exactly the same 20 messages with no warning; run on the same store with the emptied
#: consume-queue files left as zeros instead, it served 12 per queue: queue 0 ``[..., 2372, 0, 0]``,
#: queue 1 ``[..., 2506, 0, 130]`` (slot 0 of the zero file, then "Build consume queue repeatedly").
ORACLE_SERVED = {0: [0, 260, 520, 780, 1040, 1300, 1568, 1836, 2104, 2372],
                 1: [130, 390, 650, 910, 1170, 1434, 1702, 1970, 2238, 2506]}


def test_recover_leaves_what_the_broker_loads(tmp_path: Path) -> None:
    store = tmp_path / "s"
    placed, torn_at = torn_store(store)
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        lines = s.recover()
    assert any("consumequeue abc/0: dropped 2 entries" in line for line in lines)
    assert not (store / "consumequeue" / "abc" / "0" / f"{200:020d}").exists()
    # the broker's own recovery keeps exactly the messages before the torn one
    for queue in (0, 1):
        expected = [(phys, size) for i, (phys, size, _) in enumerate(placed) if i < 20 and i % 2 == queue]
        served = broker_served_queue(str(store / "consumequeue" / "abc" / str(queue)), 200, torn_at)
        assert served == expected
    # nothing but full-size, 20-digit files in commitlog/; the cut bytes under .segstore/cut/
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == [f"{0:020d}"]
    kept = store / ".segstore" / "cut" / "commitlog" / f"{0:020d}.cut-{torn_at}"
    assert len(kept.read_bytes()) == 10
    with segstore.open(store, "rocketmq") as s:
        assert s.verify() == []
        assert {q: [m.physical_offset for m in s.read("abc", q)] for q in (0, 1)} == ORACLE_SERVED
    for queue in (0, 1):
        served = broker_served_queue(str(store / "consumequeue" / "abc" / str(queue)), 200, torn_at)
        assert [phys for phys, _ in served] == ORACLE_SERVED[queue]


def test_a_zeroed_queue_file_is_what_the_broker_misreads(tmp_path: Path) -> None:
    """Why the file must go: left as zeros, 4.9.7's truncateDirtyLogicFiles takes its slot 0 as an entry."""
    store = tmp_path / "s"
    _placed, torn_at = torn_store(store)
    second = store / "consumequeue" / "abc" / "0" / f"{200:020d}"
    second.write_bytes(bytes(200))
    served = broker_served_queue(str(second.parent), 200, torn_at)
    assert served[-1] == (0, 0) and len(served) == 11
    with segstore.open(store, "rocketmq") as s:
        assert any(p.path == str(second) for p in s.verify())
    with segstore.open(store, "rocketmq", mode="a", **SMALL):
        pass
    assert not second.exists()


def test_cut_files_left_in_commitlog_by_an_older_recovery_are_moved(tmp_path: Path) -> None:
    store = tmp_path / "s"
    write_store(str(store), messages(10))
    legacy = store / "commitlog" / f"{0:020d}.cut-999"
    legacy.write_bytes(b"torn")
    with segstore.open(store, "rocketmq") as s:
        assert [p.path for p in s.verify()] == [str(legacy)]
    with segstore.open(store, "rocketmq", mode="a", **SMALL):
        pass
    assert not legacy.exists()
    assert (store / ".segstore" / "cut" / "commitlog" / legacy.name).read_bytes() == b"torn"


# -- item 7: config/ as the broker writes it with fastjson -------------------------------------------

#: fastjson 1.2.69 PrettyFormat (MapSerializer: a string key on a new line, an Integer key unquoted on
#: the same line), written by RocketMQ 4.9.7's ConfigManager.persist for ConsumerOffsetManager,
#: ScheduleMessageService (delayOffset.json) and SubscriptionGroupManager.
CONSUMER_OFFSETS = ('{\n\t"offsetTable":{\n\t\t"abc@billing":{0:4,1:3\n\t\t},'
                    '\n\t\t"%RETRY%billing@billing":{0:0'
                    '\n\t\t}\n\t}\n}')
DELAY_OFFSETS = '{\n\t"offsetTable":{1:7,3:2,18:0\n\t}\n}'
SUBSCRIPTION_GROUPS = ('{\n\t"dataVersion":{\n\t\t"counter":1,\n\t\t"timestamp":1700000000000\n\t},\n'
                       '\t"subscriptionGroupTable":{\n\t\t"billing":{\n\t\t\t"brokerId":0,\n'
                       '\t\t\t"consumeBroadcastEnable":true,\n\t\t\t"consumeEnable":true,\n'
                       '\t\t\t"groupName":"billing",\n\t\t\t"retryMaxTimes":16,\n\t\t\t"retryQueueNums":1\n'
                       '\t\t}\n\t}\n}')


def broker_config(store: Path) -> None:
    config = store / "config"
    config.mkdir(exist_ok=True)
    for name, text in (("consumerOffset.json", CONSUMER_OFFSETS), ("delayOffset.json", DELAY_OFFSETS),
                       ("subscriptionGroup.json", SUBSCRIPTION_GROUPS)):
        (config / name).write_text(text)
        (config / (name + ".bak")).write_text(text)


def test_fastjson_config_reads_verifies_and_is_kept(tmp_path: Path) -> None:
    store = tmp_path / "s"
    write_store(str(store), messages(10))
    broker_config(store)
    with segstore.open(store, "rocketmq") as s:
        assert s.verify() == []
        assert s.committed_offset("billing", "abc", 1) == 3
        assert s.info()["delay_offsets"] == {1: 7, 3: 2, 18: 0}
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        s.append({"topic": "abc", "queue_id": 0, "body": b"more"})
        s.commit_offset("billing", "abc", 0, 5)
    config = store / "config"
    # the table as loaded (fastjson's new ConcurrentHashMap(), file order), iterated by bucket
    # spread(hash) & 15, then insertion order within a bucket
    names = ["abc@billing", "%RETRY%billing@billing"]

    def bucket(name: str) -> int:
        u = java_hash(name) & 0xFFFFFFFF
        return (u ^ (u >> 16)) & 15

    order = sorted(names, key=lambda n: (bucket(n), names.index(n)))
    tables = {"abc@billing": "{0:5,1:3\n\t\t}", "%RETRY%billing@billing": "{0:0\n\t\t}"}
    expected = '{\n\t"offsetTable":{' + ",".join(f'\n\t\t"{n}":{tables[n]}' for n in order) + "\n\t}\n}"
    assert (config / "consumerOffset.json").read_text() == expected
    assert (config / "consumerOffset.json.bak").read_text() == CONSUMER_OFFSETS
    assert (config / "delayOffset.json").read_text() == DELAY_OFFSETS
    assert (config / "subscriptionGroup.json").read_text() == SUBSCRIPTION_GROUPS
    with segstore.open(store, "rocketmq") as s:
        assert s.verify() == []


def test_a_5x_consumer_offset_file_keeps_its_other_members(tmp_path: Path) -> None:
    """RocketMQ 5.x ConsumerOffsetManager adds dataVersion (fields sorted by fastjson's SortField)."""
    store = tmp_path / "s"
    write_store(str(store), messages(4))
    text = ('{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"stateVersion":0,'
            '\n\t\t"timestamp":1700000000000\n\t},'
            '\n\t"offsetTable":{\n\t\t"abc@g":{0:1\n\t\t}\n\t}\n}')
    (store / "config").mkdir()
    (store / "config" / "consumerOffset.json").write_text(text)
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        s.commit_offset("g", "abc", 0, 2)
    assert (store / "config" / "consumerOffset.json").read_text() == text.replace("{0:1", "{0:2")


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="%@_-"),
                               min_size=1, max_size=12),
                       st.dictionaries(st.integers(0, 40), st.integers(0, 1 << 40), min_size=1, max_size=6),
                       max_size=8))
def test_fastjson_codec_round_trips(table: dict[str, dict[int, int]]) -> None:
    doc = {"offsetTable": table}
    text = dumps_fastjson(doc)
    assert loads_fastjson(text, "x") == doc
    assert dumps_fastjson(loads_fastjson(text, "x")) == text


# -- item 6: stores with a commitlog only ------------------------------------------------------------

def test_commitlog_only_store_is_served_from_a_scan(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A backup of commitlog/ alone (as RocketMQ 4.9.7's own store tests and backups leave it):
    no consumequeue/, no index/.  Queues, offsets and keys come from a scan, and say so."""
    store = tmp_path / "s"
    msgs = messages(30)
    written = write_store(str(store), msgs, queues=False)
    with segstore.open(store, "rocketmq") as s:
        assert s.topics() == ["abc"]
        assert s.partitions("abc") == [0, 1]
        assert s.offset_range("abc", 1) == (0, 15)
        assert [m.body for m in s.read("abc", 1, 2, 2)] == [b"body-5", b"body-7"]
        assert [m.physical_offset for m in s.query_by_key("abc", "x3")] == [written.placed[3][0]]
        assert s.offset_for_time("abc", 0, msgs[10].store_timestamp) == 5
        assert s.verify() == []
        info = s.info()
        assert [q["max_offset"] for q in info["queues"]] == [15, 15]
        assert "scan of the commitlog" in info["notes"][0] and "segstore recover" in info["notes"][0]
    capsys.readouterr()
    assert cli_main(["query", str(store), "--topic", "abc", "--key", "k4", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["body"] == "Ym9keS00"                # b"body-4", stdout is JSON only
    assert "scan of the commitlog" in captured.err
    assert cli_main(["query", str(store), "--topic", "abc", "--queue", "0", "--offset", "3"]) == 0
    # recover builds what the broker's dispatch would have built
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        s.recover()
    reference = tmp_path / "ref"
    write_store(str(reference), msgs)
    for queue in ("0", "1"):
        cq = Path("consumequeue", "abc", queue, "0" * 20)
        assert (store / cq).read_bytes() == (reference / cq).read_bytes()
    with segstore.open(store, "rocketmq") as s:
        assert s.notes == [] and s.verify() == []
        assert [m.physical_offset for m in s.query_by_key("abc", "x3")] == [written.placed[3][0]]


# -- item 5: consumequeue_ext ---------------------------------------------------------------------

def test_consume_queue_ext_reads_dumps_and_verifies(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "s"
    msgs = messages(30)
    write_filter_store(str(store), msgs)
    cq0 = store / "consumequeue" / "abc" / "0" / ("0" * 20)
    before = cq0.read_bytes()
    with segstore.open(store, "rocketmq") as s:
        assert s.verify() == []                    # no entry reported as a tags-code mismatch
        assert [m.body for m in s.read("abc", 0, tag="t1")] == [b"body-%d" % i for i in range(0, 30, 2)
                                                                  if i % 3 == 1]
        units = s.queue_exts[("abc", 0)].units()
        assert len(units) == 15 and len({address for address, _ in units}) == 15   # two files, -1 mark
        assert [u.store_timestamp for _, u in units] == [m.store_timestamp for m in msgs[0::2]]
    capsys.readouterr()
    assert cli_main(["dump", "--json", str(store)]) == 0
    dumped = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["ext"]["store_timestamp"] for d in dumped] == [m.store_timestamp for m in msgs]
    assert all(d["ext"]["tags_code"] == d["tags_code"] and len(d["ext"]["bitmap"]) == 16 for d in dumped)
    # recovery keeps the addresses (it does not "fix" them into tags codes)
    with segstore.open(store, "rocketmq", mode="a", **SMALL) as s:
        s.recover()
    assert cq0.read_bytes() == before
    # a unit whose size disagrees with its bitMapSize, and one with another store time
    ext0 = store / "consumequeue_ext" / "abc" / "0" / ("0" * 20)
    data = bytearray(ext0.read_bytes())
    data[28 + 10:28 + 18] = (1).to_bytes(8, "big")          # unit 1's msgStoreTime
    data[0:2] = (27).to_bytes(2, "big")                      # unit 0's size
    ext0.write_bytes(bytes(data))
    with segstore.open(store, "rocketmq") as s:
        problems = s.verify()
    assert {(p.path, p.pos) for p in problems} == {(str(cq0), 12), (str(cq0), 32), (str(ext0), 0)}


def test_key_query_without_index_files_scans(tmp_path: Path) -> None:
    """A store written with messageIndexEnable=false (or whose index/ was not copied) has consume
    queues but no index: a key query still answers, from the commitlog."""
    store = tmp_path / "s"
    written = write_store(str(store), messages(12))
    with segstore.open(store, "rocketmq") as s:
        assert [m.physical_offset for m in s.query_by_key("abc", "U7")] == [written.placed[7][0]]
        assert s.query_by_key("abc", "nope") == []
        assert "scan of the commitlog" in s.notes[0]


def test_topics_json_keeps_what_it_read(tmp_path: Path) -> None:
    """RocketMQ 5.x TopicConfig adds ``attributes`` and DataVersion ``stateVersion``; the broker's
    TopicConfigManager (new ConcurrentHashMap<>(1024): 2048 bins) writes topics by spread(hash) & 2047."""
    store = tmp_path / "s"
    write_store(str(store), messages(4))
    (store / "config").mkdir()
    entry = ('{{\n\t\t\t"attributes":{{}},\n\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":{n},'
             '\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"{t}",\n\t\t\t"topicSysFlag":0,'
             '\n\t\t\t"writeQueueNums":{n}\n\t\t}}')
    head = '{\n\t"dataVersion":{\n\t\t"counter":%d,\n\t\t"stateVersion":0,\n\t\t"timestamp":%d\n\t},'
    (store / "config" / "topics.json").write_text(
        head % (2, 1) + '\n\t"topicConfigTable":{\n\t\t"abc":' + entry.format(n=2, t="abc") + "\n\t}\n}")
    with RocketMQStore(str(store), "a", SMALL, clock=lambda: 1_800_000_000_000) as s:
        s.append({"topic": "abc", "queue_id": 3, "body": b"x"})
        s.append({"topic": "zz", "queue_id": 0, "body": b"y"})
    text = (store / "config" / "topics.json").read_text()

    def bucket(name: str) -> int:
        u = java_hash(name) & 0xFFFFFFFF
        return (u ^ (u >> 16)) & 2047

    names = sorted(["abc", "zz"], key=bucket)
    tables = {"abc": entry.format(n=4, t="abc"),
              "zz": entry.format(n=1, t="zz").replace('\n\t\t\t"attributes":{},', "")}
    assert text == (head % (4, 1_800_000_000_000) + '\n\t"topicConfigTable":{'
                    + ",".join(f'\n\t\t"{n}":{tables[n]}' for n in names) + "\n\t}\n}")


def test_the_fixtures_delay_offset_file_is_fastjson_as_written() -> None:
    """compat_fixtures/rocketmq/basic/store/config/delayOffset.json, written by RocketMQ 4.9.7's
    ScheduleMessageService.persist (fastjson PrettyFormat)."""
    path = Path(__file__).parent.parent / "compat_fixtures" / "rocketmq" / "basic" / "store" / "config"
    text = (path / "delayOffset.json").read_text()
    assert dumps_fastjson(loads_fastjson(text, "x")) == text
