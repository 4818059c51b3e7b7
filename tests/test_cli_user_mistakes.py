"""Mistakes a new user makes on the command line get the documented answer, never a quiet other one.

- ``retention``, ``compact`` and ``delete-records`` of a ``--topic``/``--partition`` the store does
  not hold: exit 1 naming what it holds (as ``dump``, ``query`` and ``info``), not "nothing to do".
- ``write --input`` lines that say a field twice (``value`` and ``body``, ``key`` and ``keys``) or give
  a negative time are refused (exit 1, the line named), not written with one of them dropped or the
  time replaced by the clock; a bad topic in a line is the input's problem (exit 1), not usage.
- ``query --count`` below 1 is a usage error, not "no record at offset N".
- RocketMQ ``--config mappedFileSizeCommitLog``/``mappedFileSizeConsumeQueue`` that the store's files
  plainly were not written with is refused (exit 2), not "repaired" into.
- A ``write --input`` message too large for the broker is named by its input line, not the log.
- RocketMQ ``deleteWhen`` takes what ``UtilAll.isItTimeToDo`` parses (``Integer.parseInt`` of each
  ``;``-separated part): ``99`` is the usual way to turn the time rule off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, cli_run, copy_writable

import segstore
from segstore.errors import InvalidMessageError, StorageIOError


def _jsonl(path: Path, *objs: dict) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in objs))
    return path


@pytest.fixture()
def kafka_logs(tmp_path: Path) -> Path:
    lines = _jsonl(tmp_path / "k.jsonl", *({"topic": "orders", "partition": p, "value": f"v{p}"}
                                           for p in range(3)))
    assert cli_run("write", tmp_path / "logs", "--format", "kafka", "--input", lines)[0] == 0
    return tmp_path / "logs"


@pytest.mark.parametrize("argv, said", [
    (("retention", "--topic", "nope", "--dry-run"), "expected a topic named 'nope', found topics orders"),
    (("retention", "--topic", "orders", "--partition", "9"),
     "expected --partition 9 in topic 'orders', found partitions 0-2"),
    (("compact", "--topic", "nope", "--dry-run"), "expected a topic named 'nope'"),
    (("delete-records", "--topic", "orders", "--partition", "9", "--before", "1"), "expected --partition 9"),
])
def test_maintenance_of_a_selection_the_store_lacks_says_what_it_holds(kafka_logs, argv, said):
    before = sorted(p.name for p in kafka_logs.rglob("*"))
    code, out, err = cli_run(argv[0], kafka_logs, *argv[1:])
    assert (code, out) == (1, "")
    assert said in err
    assert sorted(p.name for p in kafka_logs.rglob("*")) == before


_BOTH = [({"topic": "A", "value": "x", "timestamp": -5}, "line 2: expected a timestamp of at least 0 ms"),
         # written at the next offset, as CreateTime, the field dropped without a word
         ({"topic": "A", "value": "x", "offset": 7},
          "line 2: expected no offset in a plain message line (the store gives each message the next offset "
          "of its queue / partition; a dump --json line keeps its offsets), found offset 7"),
         ({"topic": "A", "value": "x", "timestamp_type": "LogAppendTime"},
          "line 2: expected no timestamp_type in a plain message line (the topic's message.timestamp.type "
          "decides it"),
         # RocketMQ's int() stored 1.9 as 1; Kafka's codec refused it naming no field
         ({"topic": "A", "value": "x", "timestamp": 1.9},
          "line 2: expected a timestamp in ms since the epoch (a whole number) or an ISO-8601 time, found "
          "the number 1.9"),
         # Kafka's codec said "expected records that Kafka can encode, found: int too big to convert"
         ({"topic": "A", "value": "x", "timestamp": 2**63},
          "line 2: expected a timestamp of at most 9223372036854775807 ms"),
         ({"topic": "a/b", "value": "x"}, "expected a topic of the characters")]
_ROCKETMQ = [({"topic": "A", "value": "x", "body": "y"}, "expected one of value or body, found both"),
             ({"topic": "A", "value": "x", "key": "k1", "keys": ["k2"]},
              "expected one of key or keys, found both"),
             ({"topic": "A", "value": "x", "key": "k1", "properties": {"KEYS": "k2"}},
              "expected one of key or the KEYS property, found both"),
             ({"topic": "A", "value": "x", "timestamp": 5, "born_timestamp": 6},
              "expected one of timestamp or born_timestamp, found both"),
             # RocketMQ 4.9.7 Message.putProperty: the properties are a HashMap, one value a name
             ({"topic": "A", "body": "x", "keys": ["k1"], "properties": {"KEYS": "k2"}},
              "expected one of keys or the KEYS property, found both"),
             ({"topic": "A", "body": "x", "tags": "y", "properties": {"TAGS": "z"}},
              "expected one of tags or the TAGS property, found both"),
             ({"topic": "A", "value": "x", "headers": [["a", "1"], ["a", "2"]]},
              "expected each property name once (RocketMQ properties are a map), found 'a' twice"),
             # int() stored true as sysFlag 0x1 (compressed); Kafka refuses it
             ({"topic": "A", "body": "x", "sys_flag": True}, "expected sys_flag as an integer, found true"),
             # RocketMQ 4.9.7 MessageDecoder.string2messageProperties drops an empty name or value (no
             # consumer would see it) and Message.putUserProperty refuses them
             ({"topic": "A", "body": "x", "properties": {"empty": "", "x": "1"}},
              "found the property 'empty' with an empty value"),
             ({"topic": "A", "value": "x", "headers": [["", "noname"]]},
              "found a property with an empty name (value 'noname')")]


def test_a_dump_line_with_an_integer_field_of_another_kind_is_refused(tmp_path):
    """A dump line is written back as stored (RocketMQ 4.9.7 MessageExtBrokerInner's int and long
    fields): a float flag is refused naming the field, not stored as int(1.5)."""
    src = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "body": "x"})
    assert cli_run("write", tmp_path / "s", "--input", src)[0] == 0
    _, out, _ = cli_run("dump", tmp_path / "s", "--json")
    line = json.loads(out)
    lines = _jsonl(tmp_path / "dump.jsonl", line, {**line, "flag": 1.5})
    code, out, err = cli_run("write", tmp_path / "copy", "--input", lines)
    assert (code, out) == (1, "")
    assert "expected flag as an integer, found the number 1.5" in err and str(lines) in err
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("fmt, line, said", [("rocketmq", *case) for case in _BOTH + _ROCKETMQ]
                         + [("kafka", *case) for case in _BOTH])
def test_a_write_input_line_that_would_lose_what_it_says_is_refused(tmp_path, fmt, line, said):
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "value": "ok"}, line)
    code, out, err = cli_run("write", tmp_path / "store", "--format", fmt, "--input", lines)
    assert (code, out) == (1, "")
    assert said in err and str(lines) in err
    assert not (tmp_path / "store").exists()        # a failed write removes what it created


@pytest.mark.parametrize("fmt, store", [("rocketmq", "new/sub/store"), ("kafka", "new/logs/t-0")])
def test_a_failed_write_removes_the_directories_it_made_above_the_store(tmp_path, fmt, store):
    """``write new/logs/t-0`` made ``new`` and ``new/logs`` for the store; a line refused while appending
    removed ``t-0`` and left the empty ``new/logs`` (and ``ulimit -f`` so too): the first directory the
    write made goes, with all in it; the directory that was there stays."""
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "t", "value": "ok"}, {"topic": "t", "value": 5})
    code, out, err = cli_run("write", tmp_path / store, "--format", fmt, "--input", lines)
    assert (code, out) == (1, "") and "line 2: expected" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    (tmp_path / "new").mkdir()
    code, _, _ = cli_run("write", tmp_path / store, "--format", fmt, "--input", lines)
    assert code == 1 and [p.name for p in (tmp_path / "new").iterdir()] == []


def test_the_common_names_alone_still_write_as_rocketmq_fields(tmp_path):
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "partition": 1, "value": "x", "key": "k1",
                                           "headers": [["TAGS", "t"]], "timestamp": 0})
    assert cli_run("write", tmp_path / "store", "--input", lines)[0] == 0
    _, out, _ = cli_run("dump", tmp_path / "store", "--json")
    (got,) = [json.loads(line) for line in out.splitlines()]
    assert (got["queue_id"], got["keys"], got["tags"], got["born_timestamp"]) == (1, ["k1"], "t", 0)


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@pytest.mark.parametrize("typo, meant", [("bodyy", "body"), ("vale", "value"), ("valueBase46", "valueBase64"),
                                         ("partiton", "partition")])
def test_an_unknown_field_of_a_write_input_line_lists_every_name_a_line_takes(tmp_path, fmt, typo, meant):
    """docs/cli.md (JSON-lines input): a plain line takes the common names ``topic``, ``value``, ``key``,
    ``partition``, ``timestamp``, ``headers``, the base64 forms ``valueBase64``/``bodyBase64``/``keyBase64``,
    and RocketMQ's own names into a RocketMQ store.  The RocketMQ error listed only its own names, none of
    the common ones the line could have meant (``value`` for ``vale``), Kafka's listed ``offset`` and
    ``timestamp_type``, which a plain line may not give, and neither listed the base64 forms."""
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "value": "ok"}, {"topic": "A", typo: "x"})
    code, out, err = cli_run("write", tmp_path / "store", "--format", fmt, "--input", lines)
    assert (code, out) == (1, "")
    assert f"{lines}:" in err and "line 2:" in err, err
    # Kafka takes no body (only bodyBase64): no name is meant there
    hint = "" if (fmt, meant) == ("kafka", "body") else f" (did you mean {meant!r}?)"
    assert f"found unknown field {typo!r}{hint}\n" in err, err
    listed = err.split("found unknown")[0]
    for name in ("topic", "value", "key", "partition", "timestamp", "headers", "valueBase64", "bodyBase64",
                 "keyBase64"):
        assert name in listed, (name, err)
    own = ("queue_id", "tags", "properties", "delay_level", "prepared_transaction_offset")
    assert all(name in listed for name in own) if fmt == "rocketmq" else not any(n in listed for n in own)
    assert "offset," not in listed and "timestamp_type" not in listed
    assert not (tmp_path / "store").exists()


def test_an_unknown_field_of_a_rocketmq_append_names_the_common_names_too(tmp_path):
    """The library's ``append`` of a dict: RocketMQ's own names and the common ones it maps."""
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a") as store:
        with pytest.raises(InvalidMessageError) as err:
            store.append({"topic": "A", "valu": "x"})
    said = str(err.value)
    assert "'queue_id'" in said and "'value'" in said and "'partition'" in said and "'headers'" in said
    assert "found unknown field ['valu'] (did you mean 'value'?)" in said, said


@pytest.mark.parametrize("count", ["0", "-3"])
def test_query_count_below_one_is_a_usage_error(kafka_logs, count):
    code, out, err = cli_run("query", kafka_logs, "--topic", "orders", "--partition", "0", "--offset", "0",
                             "--count", count)
    assert (code, out) == (2, "")
    assert f"--count expects a positive number, found {count}" in err


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("argv, said", [
    (("--key", "k", "--offset", "0"), "expected one of --key, --offset, --timestamp or --msg-id, found --key "
                                      "and --offset"),
    (("--timestamp", "0", "--key", "k"), "found --key and --timestamp"),
    (("--offset", "0", "--begin", "5"), "--begin goes with --key"),
    (("--offset", "0", "--end", "5"), "--end goes with --key"),
    (("--timestamp", "0", "--max", "1"), "--max goes with --key"),
    (("--key", "k", "--count", "2"), "--count goes with --offset or --timestamp"),
    (("--msg-id", "7F00000100002A9F0000000000000000", "--count", "2"), "found --count too"),
    (("--msg-id", "7F00000100002A9F0000000000000000", "--begin", "0"), "found --begin too"),
    # swapped bounds: a window of no time, said as dump says it, not "no record with key"
    (("--key", "k", "--begin", "2000", "--end", "1000"),
     "expected --begin at or before --end, found 2000 > 1000"),
])
def test_query_flags_of_another_lookup_are_refused_not_ignored(tmp_path, fmt, argv, said):
    """``query --key k --offset 0`` answered the key and dropped the offset; ``--offset N --begin T``,
    ``--timestamp T --max N``, ``--key K --count C`` and ``--msg-id ID --count C`` answered without the
    flag that goes with another lookup, as though it had not been given.  Each is a usage error
    (exit 2) naming what goes with what."""
    lines = _jsonl(tmp_path / "m.jsonl", *({"topic": "orders", "partition": 0, "key": "k", "value": f"v{i}"}
                                           for i in range(3)))
    assert cli_run("write", tmp_path / "s", "--format", fmt, "--input", lines)[0] == 0
    code, out, err = cli_run("query", tmp_path / "s", "--topic", "orders", "--partition", "0", *argv)
    if argv[0] == "--msg-id":   # --msg-id takes no --partition either: without it, the flag is named
        code, out, err = cli_run("query", tmp_path / "s", *argv)
    assert (code, out) == (2, ""), err
    assert said in err


def test_a_rocketmq_time_query_refuses_count(tmp_path):
    """A RocketMQ time query answers an offset (``getOffsetInQueueByTime``), not messages: ``--count 3``
    was dropped; refused now (exit 2).  Kafka's answer is the record found, and ``--count`` reads on
    from it."""
    for fmt in ("rocketmq", "kafka"):
        lines = _jsonl(tmp_path / f"{fmt}.jsonl", *({"topic": "orders", "partition": 0, "value": f"v{i}"}
                                                    for i in range(3)))
        assert cli_run("write", tmp_path / fmt, "--format", fmt, "--input", lines)[0] == 0
        code, out, err = cli_run("query", tmp_path / fmt, "--topic", "orders", "--timestamp", "0",
                                 "--count", "3", "--json")
        if fmt == "rocketmq":
            assert (code, out) == (2, "") and "a RocketMQ time query answers an offset" in err
        else:
            assert code == 0 and [json.loads(line)["offset"] for line in out.splitlines()] == [0, 1, 2]


@pytest.mark.parametrize("argv", [("--offset", "0"), ("--timestamp", "1"),
                                  ("--offset", "0", "--partition", "0")])
def test_a_kafka_query_of_several_topics_without_topic_asks_for_it(tmp_path, argv):
    """``segstore query LOGDIR --offset 0`` of a log dir with several topics said "expected a partition -0,
    found none" (exit 1): a partition named from an empty topic.  An offset or time is one partition's;
    the answer asks for --topic and names the topics held (exit 2), as a RocketMQ query does."""
    lines = _jsonl(tmp_path / "k.jsonl", {"topic": "orders", "value": "o"}, {"topic": "users", "value": "u"})
    assert cli_run("write", tmp_path / "logs", "--format", "kafka", "--input", lines)[0] == 0
    code, out, err = cli_run("query", tmp_path / "logs", *argv)
    assert (code, out) == (2, ""), err
    assert ("expected --topic (and --partition) for an offset or time query of a log directory, found none: "
            "it holds topics orders, users") in err
    code, out, err = cli_run("query", tmp_path / "logs", *argv, "--topic", "users")
    assert code == 0 and "payload" not in out and out.count("| offset: 0 ") == 1, err


@pytest.mark.parametrize("fmt, field", [("kafka", "timestamp"), ("rocketmq", "timestamp"),
                                        ("rocketmq", "born_timestamp"), ("rocketmq", "store_timestamp")])
def test_write_input_takes_iso_times_as_the_command_line_does(tmp_path, fmt, field):
    """A plain line's ``"timestamp": "2024-01-01T00:00:00Z"`` was refused, on Kafka as "expected records
    that Kafka can encode, found: 'str' object cannot be interpreted as an integer", naming no field.  A
    text time is ISO-8601 (UTC where it names no offset), as --timestamp/--begin take it; a float, a
    bool or a text that is no time is refused naming the field, line and byte, and nothing is written."""
    first = {"topic": "T", "value": "a", field: "2024-01-01T00:00:00Z"}
    second = {"topic": "T", "value": "b", field: "2024-01-01 02:00:00.250+02:00"}
    third = {"topic": "T", "value": "c", field: 1704067200001}
    assert cli_run("write", tmp_path / "s", "--format", fmt, "--input",
                   _jsonl(tmp_path / "in.jsonl", first, second, third))[0] == 0
    code, out, err = cli_run("dump", tmp_path / "s", "--json")
    assert code == 0, err
    dumped = "born_timestamp" if (fmt, field) == ("rocketmq", "timestamp") else field   # the common name
    assert [json.loads(line)[dumped] for line in out.splitlines()] == [1704067200000, 1704067200250,
                                                                       1704067200001]
    for value, said in (("yesterday", f"line 2: {field}: expected milliseconds since the epoch or an "
                                      "ISO-8601 time, found 'yesterday'"),
                        (1.5, f"line 2: expected a {field} in ms since the epoch (a whole number) or an "
                              "ISO-8601 time, found the number 1.5"),
                        (True, "found true")):
        code, out, err = cli_run("write", tmp_path / "new", "--format", fmt, "--input",
                                 _jsonl(tmp_path / "bad.jsonl", first, {**first, field: value}))
        assert (code, out) == (1, ""), err
        assert said in err and ":" + str(len(json.dumps(first)) + 1) + ":" in err
        assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("line, said", [
    ({"topic": "t", "value": 5}, "expected a value as a string or null, found the number 5"),
    ({"topic": "t", "value": "x", "key": [1]}, "expected a key as a string or null, found an array [1]"),
    ({"topic": "t", "value": "x", "headers": [["h", 5]]},
     "expected a header value as a string or null, found the number 5"),
])
@pytest.mark.parametrize("accelerated", [True, False])
def test_write_input_names_a_kafka_field_of_the_wrong_type_once(tmp_path, monkeypatch, line, said,
                                                               accelerated):
    """A Kafka line whose value is a number read "expected records that Kafka can encode, found: value
    as bytes, str or None, found int": two "found"s, the field's own words wrapped in a general one.
    The encoder's check says what it expected itself (C encoder and Python reference alike)."""
    from segstore_kafka import batch as codec

    if not accelerated:
        monkeypatch.setattr(codec, "_speedups", None)
    code, out, err = cli_run("write", tmp_path / "logs", "--format", "kafka", "--input",
                             _jsonl(tmp_path / "in.jsonl", line))
    assert (code, out) == (1, ""), err
    assert err.strip() == f"{tmp_path / 'in.jsonl'}:0: line 1: {said}"
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("when, ok", [("99", True), ("04;99", True), ("+4", True), ("", True),
                                      ("x", False), ("4.5", False), ("99999999999", False),
                                      ("04;", True), (";", True), (";04", False), ("04;;05", False),
                                      ("04; 05", False)])
def test_delete_when_takes_what_the_broker_parses(tmp_path, when, ok):
    """4.9.7 ``UtilAll.isItTimeToDo``: ``Integer.parseInt`` of each part of ``when.split(";")`` (which
    drops trailing empty parts only): an empty part before another, or one with blanks, throws, and
    ``CleanCommitLogService.run`` catches it before ``isSpaceToDelete``: that broker never deletes."""
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "body": "x"})
    assert cli_run("write", tmp_path / "store", "--input", lines)[0] == 0
    code, _, err = cli_run("retention", tmp_path / "store", "--config", f"deleteWhen={when}", "--dry-run")
    assert code == (0 if ok else 2), err


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@pytest.mark.parametrize("bad, said", [({"topic": "a b", "value": "x"}, "expected a topic of the characters"),
                                       ({"topic": "A", "value": 5}, "found the number 5"),
                                       ({"topic": "A", "value": "x", "bogus": 1}, "'bogus'")])
def test_a_bad_field_value_names_its_line_and_byte(tmp_path, fmt, bad, said):
    """A plugin appends lines in runs and refuses a run: the CLI finds the line it refused (docs/cli.md:
    "1 a bad line (named by file, byte and line)"), past the first runs too."""
    good = {"topic": "A", "value": "x" * 50}
    objs = [good] * 9000 + [bad] + [good] * 100
    src = tmp_path / "in.jsonl"
    text = "".join(json.dumps(obj) + "\n" for obj in objs)
    src.write_text(text)
    pos = len("".join(json.dumps(obj) + "\n" for obj in objs[:9000]))
    code, out, err = cli_run("write", tmp_path / "store", "--format", fmt, "--input", src)
    assert (code, out) == (1, "")
    assert err.startswith(f"{src}:{pos}: line 9001: ") and said in err


@pytest.mark.parametrize("config, said", [
    ("mappedFileSizeCommitLog=131072",
     "commitlog: expected files of 131072 bytes (mappedFileSizeCommitLog as given), found files written "
     "with 262144"),
    ("mappedFileSizeConsumeQueue=6000",
     "consumequeue: expected files of 6000 bytes (mappedFileSizeConsumeQueue as given), found files "
     "written with 640"),
    ("mappedFileSizeConsumeQueue=320", "found files written with 640"),
])
def test_a_file_size_the_store_was_not_written_with_is_refused_not_repaired_into(tmp_path, config, said):
    """4.9.7 ``MappedFileQueue.load`` refuses to start on files of another length than its
    ``mappedFileSize``.  ``write --config`` with a size the files plainly were not written with (their
    names step by another) used to "repair" every file to it: commitlog files cut in half (the rest kept
    aside), consume-queue files overlapping, then "appended", exit 0."""
    store = copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")
    before = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "body": "x"})
    code, out, err = cli_run("write", store, "--input", lines, "--config", config)
    assert (code, out) == (2, "") and said in err and "leave" in err
    assert {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert cli_run("info", store, "--config", config)[0] == 2
    # the size the files were written with is taken, given or not
    right = config.split("=")[0] + "=" + ("262144" if "CommitLog" in config else "640")
    assert cli_run("write", store, "--input", lines, "--config", right)[0] == 0
    assert cli_run("verify", store)[0] == 0


@pytest.mark.parametrize("fmt, config, said", [
    ("rocketmq", "maxMessageSize=1024", "expected a body of at most 1024 bytes (maxMessageSize), found 2000"),
    ("kafka", "max.message.bytes=1024", "expected a batch of at most max.message.bytes=1024 bytes"),
])
def test_a_message_too_large_names_its_input_line(tmp_path, fmt, config, said):
    """docs/cli.md: a bad ``write --input`` line is named by file, byte and line.  A message over the
    broker's limit (4.9.7 ``CommitLog.putMessage``: MESSAGE_SIZE_EXCEEDED; Kafka's max.message.bytes)
    was named at the new store's log (``STORE/commitlog:0``), a place that does not exist."""
    lines = _jsonl(tmp_path / "in.jsonl", {"topic": "A", "value": "small"},
                   {"topic": "A", "value": "x" * 2000}, {"topic": "A", "value": "small"})
    code, out, err = cli_run("write", tmp_path / "store", "--format", fmt, "--config", config,
                             "--input", lines)
    second = len(lines.read_text().splitlines()[0]) + 1
    assert (code, out) == (1, "")
    assert f"in.jsonl:{second}: line 2: {said}" in err, err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("when", ["1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.998Z", "1969-12-31"])
def test_a_time_before_the_epoch_is_no_list_offsets_code(kafka_logs, when):
    """``query --timestamp`` reads -1, -2, -3 and -4 as Kafka's ListOffsets codes; an ISO-8601 time just
    before 1970 came out as -1 ms or -2 ms and was answered as ``latest`` or ``earliest``.  A time names
    a time: before the epoch it is refused (exit 2), as a negative number that is no code is."""
    code, out, err = cli_run("query", kafka_logs, "--topic", "orders", "--partition", "0", "--timestamp",
                             when)
    assert (code, out) == (2, "")
    assert f"expected a time at or after the epoch, found '{when}'" in err
    assert cli_run("query", kafka_logs, "--topic", "orders", "--partition", "0", "--timestamp", "-2")[0] == 0


@pytest.mark.parametrize("argv", [
    ["write", "{f}/store", "--input", "{lines}"],
    ["write", "{f}/a/b", "--input", "{lines}", "--format", "kafka"],
    ["convert", "{src}", "{f}/out", "--to", "kafka"],
])
def test_a_store_path_under_a_file_is_a_usage_error(tmp_path, argv):
    """``segstore write afile/store`` said ``afile/store: Not a directory`` (the OS's words, exit 1), and
    ``convert SRC afile/out`` the same of its temporary sibling: the path is the argument's mistake, as a
    ``PATH`` that is a file is (exit 2), named with what is in the way."""
    (tmp_path / "f").write_text("x")
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    src = tmp_path / "src"
    assert cli_run("write", src, "--input", lines)[0] == 0
    code, out, err = cli_run(*(a.format(f=tmp_path / "f", lines=lines, src=src) for a in argv))
    assert (code, out) == (2, "")
    assert f"expected a directory to create the store in, found a file in the way: {tmp_path / 'f'}" in err
    assert (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize("argv", [["write", "", "--input", "{lines}"],
                                  ["convert", "{src}", "", "--to", "kafka"]])
def test_an_empty_store_path_is_a_usage_error(tmp_path, argv, monkeypatch):
    """Before: ``write ''`` said ``: expected an existing file or directory`` (exit 1); ``convert SRC ''``
    took the current directory for the destination and refused it as containing the source."""
    monkeypatch.chdir(tmp_path)
    lines = _jsonl(tmp_path / "m.jsonl", {"topic": "T", "value": "v"})
    src = tmp_path / "src"
    assert cli_run("write", src, "--input", lines)[0] == 0
    code, out, err = cli_run(*(a.format(lines=lines, src=src) for a in argv))
    assert (code, out) == (2, "") and "expected a store path, found an empty one" in err


def test_a_file_in_the_way_of_an_opened_store_is_named_so(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StorageIOError, match="expected a directory on the path, found a file in the way"):
        segstore.open(str(tmp_path / "f" / "store"), "rocketmq", "a")


@pytest.mark.parametrize("given, said", [
    ("rocketmq/basic/store/commitlog",
     "a directory inside the rocketmq store {root}/rocketmq/basic/store; pass that store's directory (or one "
     "of its files to dump)"),
    ("rocketmq/basic/store/consumequeue/TopicA/0", "a directory inside the rocketmq store "
                                                   "{root}/rocketmq/basic/store"),
    ("rocketmq/basic",
     "a directory holding a store, {root}/rocketmq/basic/store (rocketmq); pass its directory"),
    ("kafka", "a directory holding stores, {root}/kafka/gzip (kafka), {root}/kafka/logappendtime (kafka), "
              "{root}/kafka/lz4 (kafka) and 4 more; pass one directory"),
    ("", "a directory holding stores, {root}/kafka/gzip (kafka), {root}/kafka/logappendtime (kafka), "
         "{root}/rocketmq/abort/store (rocketmq) and 7 more; pass one directory"),
])
@pytest.mark.parametrize("command", ["info", "dump", "verify"])
def test_a_directory_next_to_a_store_names_the_store(command, given, said):
    """A new user points at the fixture's directory (``compat_fixtures/rocketmq/basic``, whose store is
    ``store/``) or at a directory of a store (``commitlog/``): "not a store of any known format ...; pass
    --format to say which it should be", advice that cannot help (neither format reads it).  The message
    now names the store the directory lies in (three levels up at most) or the stores it holds."""
    root = FIXTURES
    code, out, err = cli_run(command, root / given if given else root)
    assert (code, out) == (2, "")
    assert "not a store of any known format (kafka, rocketmq)" in err
    assert said.format(root=root) in err


def test_a_directory_of_fixtures_names_stores_three_levels_down(tmp_path):
    """``segstore info compat_fixtures``, what a new user types first, said "pass --format to say which it
    should be", which cannot help: the stores lie two and three levels down (``kafka/gzip``,
    ``rocketmq/basic/store``).  The stores found are named, one of each format first; where none lies
    within three levels (or among the first 64 directories) the advice is as before."""
    for name in ("a/b/c/d/t-0", "x/y/store/commitlog"):
        (tmp_path / name).mkdir(parents=True)
    code, _, err = cli_run("info", tmp_path)
    assert code == 2
    assert err.rstrip().endswith(f"a directory holding a store, {tmp_path}/x/y/store (rocketmq); pass its "
                                 "directory")
    code, _, err = cli_run("info", tmp_path / "a")
    assert code == 2 and err.rstrip().endswith(f"a directory holding a store, {tmp_path}/a/b/c/d (kafka); "
                                               "pass its directory")
    (tmp_path / "empty").mkdir()
    code, _, err = cli_run("info", tmp_path / "empty")
    assert code == 2
    assert err.rstrip().endswith("not a store of any known format (kafka, rocketmq); pass --format to say "
                                 "which it should be")


def test_index_without_its_action_names_the_actions():
    """``segstore index`` said "the following arguments are required: index_command", the parser's own
    name for it; it names the actions the usage line lists."""
    code, out, err = cli_run("index")
    assert (code, out) == (2, "")
    assert err.rstrip().endswith("segstore index: error: the following arguments are required: "
                                 "{build,verify,drop}")
    assert "index_command" not in cli_run("index", "bild", "x")[2]


@pytest.mark.parametrize("option", ["--begin", "--begin="])
def test_a_basic_iso_date_is_taken_as_ms_and_said_so(option):
    """``--begin 20231114`` (ISO 8601's basic date, ``YYYYMMDD``) is ms, 05:37 on 1 January 1970, and the
    dump was the whole partition without a word.  It still is (both brokers and Kafka's tools read a
    number as ms), with a note naming the ISO form to write; 8 digits that are no date (month 13, day
    32, 30 February) get none."""
    part = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    argv = [option + "20231114"] if option.endswith("=") else [option, "20231114"]
    code, out, err = cli_run("dump", part, "--json", *argv)
    assert code == 0 and len(out.splitlines()) == 300
    assert err == ("segstore dump: note: --begin 20231114 is taken as milliseconds since the epoch, "
                   "1970-01-01T05:37:11.114Z; as a date (YYYYMMDD) it is --begin 2023-11-14\n")
    code, out, err = cli_run("dump", part, "--json", "--begin", "2023-11-14")
    assert (code, err) == (0, "")
    for not_a_date in ("20231314", "20231132", "20230230", "12345678"):
        code, out, err = cli_run("dump", part, "--json", "--begin", not_a_date)
        assert (code, err) == (0, ""), err


@pytest.mark.parametrize("option", ["--begin", "--begin="])
def test_a_time_in_seconds_is_taken_as_ms_and_said_so(option):
    """``--begin 1700000000`` (``date +%s``: seconds) is ms to both brokers and Kafka's tools, January 1970:
    the dump was the whole partition without a word, as if every record were newer.  It still is (the
    same answer as Kafka's --time would give), with a note on stderr naming the ms the seconds would be;
    ms (13 digits) and ISO times get none."""
    part = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    argv = [option + "1700000000"] if option.endswith("=") else [option, "1700000000"]
    code, out, err = cli_run("dump", part, "--json", *argv)
    assert code == 0 and len(out.splitlines()) == 300
    assert err == ("segstore dump: note: --begin 1700000000 is taken as milliseconds since the epoch, "
                   "1970-01-20T16:13:20.000Z; as seconds (2023-11-14T22:13:20Z) it is --begin "
                   "1700000000000\n")
    for fine in ("1700000000000", "2023-11-14T22:13:20Z"):
        code, out, err = cli_run("dump", part, "--json", "--begin", fine)
        assert (code, len(out.splitlines()), err) == (0, 300, "")
