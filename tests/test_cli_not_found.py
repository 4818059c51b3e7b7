"""What the command line says when what was asked for is not there (issue 28, items 7, 8 and 10).

A lookup that matches nothing, or a selector naming a topic, partition or group the store
does not hold, leaves stdout empty, names what is missing on stderr and exits 1 (README: 1
for not found / data, 2 for usage); nothing is created on disk.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, copy_writable

import segstore
from segstore import cli

BASIC = FIXTURES / "rocketmq" / "basic" / "store"
KAFKA_PART = FIXTURES / "kafka" / "uncompressed" / "topic-0"
FUTURE = "9999999999999"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    out = io.StringIO()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), capsys.readouterr().err


# -- item 10: a lookup that matched nothing prints nothing on stdout --------------------------------

NO_HIT_QUERIES = [
    (BASIC, ["--topic", "TopicA", "--queue", "0", "--timestamp", FUTURE], "no message stored at or after"),
    (BASIC, ["--topic", "TopicA", "--queue", "0", "--offset", "999"], "no record at offset 999"),
    (BASIC, ["--topic", "TopicA", "--key", "no-such-key"], "no record with key 'no-such-key'"),
    (BASIC, ["--msg-id", "7F00000100002A9F00000000FFFFFFFF"], "no message with msgId"),
    (BASIC, ["--msg-id", "7F0000010000000000000000", "--topic", "TopicA"], "no message with msgId"),
    (BASIC, ["--topic", "TopicA", "--queue", "0", "--offset", "0", "--tag", "NOTAG"], "no record tagged"),
    (KAFKA_PART, ["--timestamp", FUTURE], "no record stored at or after timestamp"),
    (KAFKA_PART, ["--offset", "999"], "no record at offset 999"),
    (KAFKA_PART, ["--key", "no-such-key"], "no record with key 'no-such-key'"),
]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("store", "argv", "said"), NO_HIT_QUERIES,
                         ids=[f"{s.parent.name}:{' '.join(a[-2:])}" for s, a, _ in NO_HIT_QUERIES])
def test_a_query_that_matched_nothing_leaves_stdout_empty(capsys, store, argv, said, as_json):
    code, out, err = run(capsys, "query", store, *argv, *(["--json"] if as_json else []))
    assert (code, out) == (1, "")
    assert said in err


def test_a_partition_directorys_misses_name_the_topic_its_name_fixes(capsys):
    """A Kafka partition directory opened alone holds one topic and partition, which its name (TOPIC-N)
    fixes: a miss names them (``topic/0``), where it said ``*/0`` (``*/*`` for a key or a dump's
    window) as though any topic could be meant.  A log directory of several still says ``*``."""
    for argv, said in ((["query", "--offset", "999"], "segstore query: topic/0: no record at offset 999, at "
                                                      "or past its end: offsets 0 to 299 are held\n"),
                       (["query", "--key", "nokey"], "segstore query: topic/0: no record with key 'nokey'\n"),
                       (["dump", "--begin", FUTURE], "segstore dump: topic/0: no message stored from ")):
        code, out, err = run(capsys, argv[0], KAFKA_PART, *argv[1:])
        assert (code, out) == (1, "") and err.startswith(said)
    code, _, err = run(capsys, "query", KAFKA_PART.parent, "--key", "nokey")
    assert code == 1 and err == "segstore query: */*: no record with key 'nokey'\n"


def test_an_offset_past_the_end_says_what_is_held(capsys, tmp_path):
    """``query --offset 45`` of a queue of 45 messages said only "no record at offset 45": the offset is
    past what is stored (the broker's getMessage answers OFFSET_OVERFLOW_ONE / OFFSET_OVERFLOW_BADLY,
    Kafka's fetch OFFSET_OUT_OF_RANGE), so the miss names what is held.  An empty queue says it holds
    none."""
    code, out, err = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--offset", "45")
    assert (code, out, err) == (1, "", "segstore query: TopicA/0: no record at offset 45, at or past its "
                                       "end: offsets 0 to 44 are held\n")
    path = tmp_path / "logs"
    with segstore.open(path / "e-0", format="kafka", mode="a"):
        pass
    code, out, err = run(capsys, "query", path, "--topic", "e", "--partition", "0", "--offset", "0")
    assert (code, out, err) == (1, "", "segstore query: e/0: no record at offset 0, at or past its end: it "
                                       "holds none (its end is 0)\n")


def test_the_rocketmq_time_lookup_says_where_the_queue_ends_on_stderr(capsys):
    code, out, err = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--timestamp", FUTURE)
    assert (code, out) == (1, "")
    assert err == (f"segstore query: TopicA/0: no message stored at or after {FUTURE} "
                   "(the queue ends at offset 45)\n")
    code, out, _ = run(capsys, "query", BASIC, "--topic", "TopicA", "--queue", "0", "--timestamp", "0",
                       "--json")
    assert code == 0 and json.loads(out)["offset"] == 0


# -- item 7: a selector naming what the store does not hold ------------------------------------------

TYPO_DUMPS = [
    (BASIC, ["--topic", "NoTopic"], "expected a topic named 'NoTopic', found topics SCHEDULE_TOPIC_XXXX, "
                                    "TopicA, TopicB"),
    (BASIC, ["--topic", "TopicA", "--queue", "5"], "expected --queue 5 in topic 'TopicA', found queues 0-3"),
    (BASIC, ["--queue", "99"], "expected --queue 99 in any topic, found queues 0-3, 17"),
    (KAFKA_PART, ["--partition", "5"], "expected --partition 5 in any topic, found partitions 0"),
    (KAFKA_PART, ["--topic", "NoTopic"], "expected a topic named 'NoTopic', found topics topic"),
]


@pytest.mark.parametrize("extra", [[], ["--json"], ["--index"]], ids=["text", "json", "index"])
@pytest.mark.parametrize(("store", "argv", "said"), TYPO_DUMPS,
                         ids=[f"{s.parent.name}:{' '.join(a)}" for s, a, _ in TYPO_DUMPS])
def test_dump_of_a_topic_or_partition_the_store_does_not_hold_says_so(capsys, store, argv, said, extra):
    if extra == ["--json"] and store is KAFKA_PART and "--partition" not in argv:
        extra = ["--json", "--isolation", "read_committed"]   # the committed C path filters too
    code, out, err = run(capsys, "dump", store, *argv, *extra)
    assert (code, out) == (1, "")
    assert err == f"{store}: {said}\n"


QUEUE_5 = "expected --queue 5 in topic 'TopicA', found queues 0-3"
TYPO_QUERIES = [
    (BASIC, ["--topic", "NoTopic", "--queue", "0", "--offset", "0"],
     "expected a topic named 'NoTopic', found topics SCHEDULE_TOPIC_XXXX, TopicA, TopicB"),
    (BASIC, ["--topic", "TopicA", "--queue", "5", "--offset", "0"], QUEUE_5),
    (BASIC, ["--topic", "TopicA", "--queue", "5", "--timestamp", "0"], QUEUE_5),
    ("log-dir", ["--topic", "orders", "--partition", "1", "--offset", "0"],
     "expected --partition 1 in topic 'orders', found partitions 0, 2"),
    ("log-dir", ["--topic", "orders", "--partition", "1", "--key", "k"],
     "expected --partition 1 in topic 'orders', found partitions 0, 2"),
    ("log-dir", ["--topic", "order", "--partition", "0", "--timestamp", "0"],
     "expected a topic named 'order', found topics orders"),
    # a partition directory (orders-2): another partition or topic is not held either (exit 1, not a
    # usage error), and --partition is never dropped for the directory's own partition
    ("part-dir", ["--partition", "0", "--offset", "0"],
     "expected --partition 0 in any topic, found partitions 2"),
    ("part-dir", ["--partition", "0", "--timestamp", "0"],
     "expected --partition 0 in any topic, found partitions 2"),
    ("part-dir", ["--topic", "orders", "--partition", "0", "--offset", "0"],
     "expected --partition 0 in topic 'orders', found partitions 2"),
    ("part-dir", ["--topic", "users", "--offset", "0"],
     "expected a topic named 'users', found topics orders"),
]


@pytest.mark.parametrize(("store", "argv", "said"), TYPO_QUERIES,
                         ids=[f"{getattr(s, 'parent', Path(s)).name}:{' '.join(a)}" for s, a, _ in
                              TYPO_QUERIES])
def test_a_query_of_a_selection_the_store_lacks_says_what_it_holds(tmp_path, capsys, store, argv, said):
    """A query names what the store holds, as dump does, instead of the format's bare "found none"
    (an offset or time lookup) or a miss (a key lookup of a partition that is not there)."""
    if store in ("log-dir", "part-dir"):      # a Kafka log directory of partitions orders-0 and orders-2
        kind, store = store, tmp_path / "logs"
        with segstore.open(store, "kafka", "a") as kafka:
            kafka.append_batch([{"topic": "orders", "partition": 0, "key": b"k", "value": b"v"},
                                {"topic": "orders", "partition": 2, "value": b"w"}])
        if kind == "part-dir":
            store = store / "orders-2"
    code, out, err = run(capsys, "query", store, *argv)
    assert (code, out) == (1, "")
    assert err == f"{store}: {said}\n"


def test_dump_of_a_held_but_empty_selection_is_not_an_error(tmp_path, capsys):
    empty = tmp_path / "empty-0"
    empty.mkdir()
    (empty / "00000000000000000000.log").write_bytes(b"")
    code, _, err = run(capsys, "dump", empty, "--topic", "empty", "--partition", "0")
    assert (code, err) == (0, "")
    # JSON: no record, and the partition line a copy needs to hold the empty partition
    line = ('{"topic": "empty", "partition": 0, "log_start_offset": 0, "log_end_offset": 0, '
            '"high_watermark": 0, "leader_epochs": []}\n')
    assert run(capsys, "dump", empty, "--topic", "empty", "--partition", "0", "--json") == (0, line, "")


def test_dump_tag_that_matches_nothing_says_so_on_stderr(capsys):
    code, out, err = run(capsys, "dump", BASIC, "--topic", "TopicA", "--tag", "NoSuchTag")
    assert (code, out) == (1, "")
    assert err == "segstore dump: TopicA/*: no message tagged 'NoSuchTag'\n"
    code, out, _ = run(capsys, "dump", BASIC, "--topic", "TopicA", "--queue", "0", "--tag", "TagA")
    assert code == 0 and out


def _with_consumer_offsets(tmp_path: Path) -> Path:
    store = copy_writable(BASIC, tmp_path / "store")
    (store / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicA@billing":{0:4,1:3\n\t\t}\n\t}\n}')
    return store


def test_consumers_of_a_group_that_committed_nothing_says_so(tmp_path, capsys):
    store = _with_consumer_offsets(tmp_path)
    code, out, _ = run(capsys, "consumers", store, "--group", "billing")
    assert code == 0 and "billing" in out
    for extra in ([], ["--json"]):
        code, out, err = run(capsys, "consumers", store, "--group", "nogroup", *extra)
        assert (code, out) == (1, "")
        assert err == f"{store}: expected consumer group 'nogroup', found groups billing\n"


@pytest.mark.parametrize(("source", "to"), [(BASIC, "kafka"), (KAFKA_PART, "rocketmq")],
                         ids=["rocketmq-to-kafka", "kafka-to-rocketmq"])
def test_convert_of_a_topic_the_source_does_not_hold_creates_nothing(tmp_path, capsys, source, to):
    dst = tmp_path / "dst"
    code, out, err = run(capsys, "convert", source, dst, "--to", to, "--topic", "NoSuchTopic")
    assert (code, out) == (1, "")
    assert "expected source topics" in err and "'NoSuchTopic'" in err and "0 messages" not in err
    assert os.listdir(tmp_path) == []


# -- item 8: a conversion refused before it started leaves nothing -----------------------------------

@pytest.mark.parametrize(("source", "to", "typo", "fixed"), [
    (BASIC, "kafka", "segment.bytez=1048576", "segment.bytes=1048576"),
    (KAFKA_PART, "rocketmq", "mappedFileSizeCommitLg=262144", "mappedFileSizeCommitLog=262144"),
], ids=["to-kafka", "to-rocketmq"])
def test_a_config_typo_leaves_no_interrupted_conversion_behind(tmp_path, capsys, source, to, typo, fixed):
    dst = tmp_path / "dst"
    code, out, err = run(capsys, "convert", source, dst, "--to", to, "--config", typo)
    assert (code, out) == (2, "")
    assert typo.split("=")[0] in err
    assert os.listdir(tmp_path) == []          # no dst, no .dst.converting with state "running"
    code, out, err = run(capsys, "convert", source, dst, "--to", to, "--config", fixed)
    assert code == 0, err
    assert os.listdir(tmp_path) == ["dst"]


def test_a_library_conversion_refused_before_it_started_leaves_nothing(tmp_path):
    from segstore.convert import convert
    from segstore.errors import ConfigError

    with pytest.raises(ConfigError, match=r"segment\.bytez"):
        convert(BASIC, tmp_path / "dst", to="kafka", config={"segment.bytez": 1})
    assert os.listdir(tmp_path) == []


def test_a_topic_only_the_commitlog_holds_is_no_typo(tmp_path, capsys):
    """A prepared transaction message (sysFlag 0x4) has no consume-queue entry, so no queue lists its
    topic; dump and convert read the commitlog and show it, so naming that topic is not an error."""
    import segstore

    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a") as writer:
        writer.append_batch([{"topic": "Half", "queue_id": 0, "body": b"prepared", "sys_flag": 4},
                             {"topic": "Other", "queue_id": 0, "body": b"plain"}])
    with segstore.open(store) as reader:
        assert reader.topics() == ["Other"]
    code, out, err = run(capsys, "dump", store, "--topic", "Half", "--json")
    assert code == 0, err
    assert [json.loads(line)["topic"] for line in out.splitlines()] == ["Half"]
    code, out, err = run(capsys, "convert", store, tmp_path / "dst", "--to", "kafka", "--topic", "Half")
    assert code == 0, err
    assert "1 messages" in out


@pytest.mark.parametrize("topic, said", [("", "expected a non-empty topic name, found ''"),
                                         ("../x", "expected a topic of the characters [%|a-zA-Z0-9_-], "
                                                  "found '../x'")])
@pytest.mark.parametrize("ask", [["--key", "k"], ["--timestamp", "0"], ["--offset", "0"]])
def test_a_rocketmq_query_of_a_topic_no_broker_allows_names_the_store(capsys, topic, said, ask):
    """A RocketMQ query of a topic name ``TopicValidator`` refuses names a topic the store does not hold:
    exit 1 naming the store and the topics it holds, as ``dump``/``info --topic`` of that name and a Kafka
    query of a name Kafka refuses answer (docs/cli.md, "Exit codes": a selector naming what the store does
    not hold).  It was a usage error (exit 2) for this one command of this one format.  The library says
    why no store holds it."""
    from segstore.errors import NotFoundError
    from segstore.store import QueryRequest

    code, out, err = run(capsys, "query", BASIC, "--topic", topic, *ask)
    assert (code, out) == (1, "")
    assert err.startswith(f"{BASIC}: expected a topic named {topic!r}, found topics ")
    with segstore.open(BASIC) as store, pytest.raises(NotFoundError, match=re.escape(said)):
        store.query(QueryRequest(topic=topic, partition=0, key="k"))


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@pytest.mark.parametrize("ask", [["--key", "k"], ["--timestamp", "0"], ["--offset", "0", "--queue", "0"]])
def test_a_query_of_a_topic_no_broker_allows_exits_as_dump_in_both_formats(tmp_path, capsys, fmt, ask):
    """``query --topic ../x`` of a RocketMQ store exited 2 and of a Kafka log dir 1; ``dump --topic ../x``
    exits 1 in both.  Now the same: 1, naming the topics held."""
    with segstore.open(tmp_path / "s", format=fmt, mode="a") as writer:
        writer.append({"topic": "T", "partition": 0, "value": b"x", "key": b"k"})
    for command in (["query", *ask], ["dump"]):
        code, out, err = run(capsys, command[0], tmp_path / "s", "--topic", "../x", *command[1:])
        said = f"{tmp_path / 's'}: expected a topic named '../x', found topics T\n"
        assert (code, out, err) == (1, "", said)


@pytest.mark.parametrize("command", [["query", "--topic", "TopicA", "--offset", "0"],
                                     ["dump", "--topic", "TopicA"]])
def test_queue_and_partition_naming_two_queues_is_a_usage_error(capsys, command):
    """``--partition`` is ``--queue``'s alias: given both, naming two queues, the queue won and the partition
    was dropped without a word.  Refused now (exit 2); the same number twice is one queue."""
    code, out, err = run(capsys, command[0], BASIC, *command[1:], "--queue", "0", "--partition", "1")
    assert (code, out) == (2, "")
    assert "expected one queue/partition, found --queue 0 and --partition 1" in err
    code, out, _ = run(capsys, command[0], BASIC, *command[1:], "--queue", "1", "--partition", "1")
    assert code == 0 and out


# -- a partition or queue directory's name given as the topic -------------------------------------

def _orders_log_dir(tmp_path: Path) -> Path:
    """A Kafka log dir of ``orders-0``, ``orders-2`` (and a commit of group ``g`` to ``orders`` 2)."""
    from kafka_messages import offset_commit

    from segstore.records import Message

    logs = tmp_path / "logs"
    with segstore.open(logs, "kafka", "a") as kafka:
        kafka.append_batch([{"topic": "orders", "partition": 0, "key": b"k", "value": b"v"},
                            {"topic": "orders", "partition": 2, "value": b"w"}])
        key, value = offset_commit("g", "orders", 2, 1, commit_ms=1)
        kafka.append_batch([Message("__consumer_offsets", value, key=key, partition=0, timestamp=1)])
    return logs


DIRECTORY_NAMES = [   # (store, argv of a command given the directory's name, the hint it adds)
    *[("kafka", [*command, "--topic", "orders-2"], " (did you mean --topic orders --partition 2?)")
      for command in (["dump"], ["dump", "--json"], ["info"], ["query", "--offset", "0"],
                      ["retention", "--dry-run"], ["delete-records", "--before", "0", "--dry-run"],
                      ["compact", "--dry-run"], ["transactions", "--producers"])],
    *[("rocketmq", [*command, "--topic", "TopicA/1"], " (did you mean --topic TopicA --queue 1?)")
      for command in (["dump"], ["dump", "--follow"], ["info"], ["query", "--offset", "0"],
                      ["delete-records", "--before", "0", "--dry-run"])],
    ("kafka", ["consumers", "--topic", "orders-2"], " (did you mean --topic orders:2?)"),
    ("kafka", ["consumers", "--group", "g", "--reset-offsets", "--to-earliest", "--topic", "orders-2"],
     " (did you mean --topic orders:2?)"),
    ("rocketmq", ["consumers", "--topic", "TopicA/1"],
     " (did you mean --topic TopicA? it takes the topic's every queue)"),
]


@pytest.mark.parametrize(("kind", "argv", "hint"), DIRECTORY_NAMES,
                         ids=[f"{kind}:{' '.join(argv)}" for kind, argv, _ in DIRECTORY_NAMES])
def test_a_directory_name_given_as_the_topic_says_what_was_meant(tmp_path, capsys, kind, argv, hint):
    """``--topic orders-2`` (Kafka 3.8's log dir ``TOPIC-PARTITION``, ``UnifiedLog.parseTopicPartitionName``)
    or ``--topic TopicA/1`` (RocketMQ 4.9.7's ``consumequeue/TOPIC/QUEUE``) was refused naming the topics
    held, with no word that the directory's topic and partition were meant: every command taking
    ``--topic`` now says which flags name them."""
    store = _orders_log_dir(tmp_path) if kind == "kafka" else _with_consumer_offsets(tmp_path)
    code, out, err = run(capsys, argv[0], store, *argv[1:])
    assert (code, out) == (1, "")
    assert err.endswith(f"{hint}\n") and err.count("did you mean") == 1
    # a partition the topic does not have, or no number after the separator: no hint
    bad = argv[-1][:-1] + "7"
    code, out, err = run(capsys, argv[0], store, *argv[1:-1], bad)
    assert code == 1 and "did you mean" not in err and f"'{bad}'" in err


def test_the_hint_of_a_kafka_directory_name_in_full(tmp_path, capsys):
    logs = _orders_log_dir(tmp_path)
    code, out, err = run(capsys, "dump", logs, "--topic", "orders-0")
    assert (code, out) == (1, "")
    assert err == (f"{logs}: expected a topic named 'orders-0', found topics __consumer_offsets, orders "
                   "(did you mean --topic orders --partition 0?)\n")
    code, out, err = run(capsys, "dump", logs, "--topic", "orders-x")
    assert (code, err) == (1, f"{logs}: expected a topic named 'orders-x', found topics __consumer_offsets, "
                              "orders\n")


@pytest.mark.parametrize(("kind", "topic", "hint"), [
    ("kafka", "orders-2", " (did you mean --topic orders? it takes the topic's every partition)"),
    ("rocketmq", "TopicA/3", " (did you mean --topic TopicA? it takes the topic's every queue)")])
def test_convert_of_a_directory_name_says_the_topic(tmp_path, capsys, kind, topic, hint):
    store = _orders_log_dir(tmp_path) if kind == "kafka" else BASIC
    to = "rocketmq" if kind == "kafka" else "kafka"
    code, out, err = run(capsys, "convert", store, tmp_path / "dst", "--to", to, "--topic", topic)
    assert (code, out) == (1, "")
    assert err.endswith(f"{hint}\n") and f"expected source topics named '{topic}'" in err
    assert not (tmp_path / "dst").exists()
