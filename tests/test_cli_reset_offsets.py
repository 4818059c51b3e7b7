"""``segstore consumers --reset-offsets`` (RocketMQ, the broker stopped): a group's new offsets as
``kafka-consumer-groups --reset-offsets`` plans them (``--to-datetime``: each queue's first offset stored
at or after the time, its end where none is; ``--to-earliest``, ``--to-latest``), printed, and written to
``config/consumerOffset.json`` only with ``--execute``, all queues at once, the file before kept as
``.bak``.  ``--to-offset`` and ``--shift-by`` clamp into each queue's range, as the tool's
``checkOffsetsRange``.  ``--by-duration``, ``--to-current``, ``--from-file`` and ``--export`` follow
``ConsumerGroupCommand.prepareOffsetsToReset``, ``parseResetPlan`` and ``exportOffsetsToCsv`` (Kafka
3.8.0, tools/.../consumer/group/ConsumerGroupCommand.java).  (Kafka: test_kafka_reset_offsets.py.)
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pytest
from conftest import cli_run as run

import segstore
from segstore.cli import duration_ns
from segstore.errors import InvalidTopicError

BASE = 1_700_000_000_000


def store_with_groups(path: Path) -> Path:
    """Topic T on queues 0-1 (message i on queue i % 2 at offset i // 2, stored at BASE + 10 i), U on
    queue 0; g1 committed T/0 at 2 only, g2 committed U/0 at 1."""
    with segstore.open(path, format="rocketmq", mode="a", messageIndexEnable=False) as store:
        store.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"x", "store_timestamp": BASE + 10 * i}
                            for i in range(10)])
        store.append_batch([{"topic": "U", "queue_id": 0, "body": b"y", "store_timestamp": BASE}])
        store.commit_offset("g1", "T", 0, 2)
        store.commit_offset("g2", "U", 0, 1)
    return path


def committed(path: Path) -> dict[tuple[str, str, int], int | None]:
    with segstore.open(path) as store:
        return {(r.group, r.topic, r.partition): r.committed_offset for r in store.consumer_groups().rows}


@pytest.mark.parametrize("target, expected", [
    (["--to-datetime", str(BASE + 35)], {0: 2, 1: 2}),      # from +35: T/0 i = 4 (+40), T/1 i = 5 (+50)
    (["--to-datetime", "2023-11-14T22:13:20.000Z"], {0: 0, 1: 0}),
    (["--to-datetime", str(BASE + 10**6)], {0: 5, 1: 5}),   # nothing that new: the queue's end
    (["--to-earliest"], {0: 0, 1: 0}),
    (["--to-latest"], {0: 5, 1: 5}),
    (["--by-duration", "PT0.010S", "--now-ms", str(BASE + 45)], {0: 2, 1: 2}),   # as --to-datetime +35
    (["--by-duration=-PT1H", "--now-ms", str(BASE)], {0: 5, 1: 5}),            # the future: the end
    (["--to-current"], {0: 2, 1: 5}),           # T/1 never committed: its end, as the tool's
])
def test_a_plan_is_printed_and_written_only_with_execute(tmp_path, target, expected):
    path = store_with_groups(tmp_path / "store")
    before = (path / "config" / "consumerOffset.json").read_bytes()
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", *target, "--json")
    assert code == 0 and "nothing written: add --execute" in err
    assert json.loads(out) == [{"group": "g1", "topic": "T", "partition": q, "new_offset": o}
                               for q, o in expected.items()]
    assert (path / "config" / "consumerOffset.json").read_bytes() == before
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", *target, "--execute")
    assert code == 0 and err == ""
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        *(["g1", "T", str(q), str(o)] for q, o in expected.items())]
    assert committed(path) == {("g1", "T", 0): expected[0], ("g1", "T", 1): expected[1], ("g2", "U", 0): 1}
    assert (path / "config" / "consumerOffset.json.bak").read_bytes() == before    # the way back


def test_topic_narrows_and_unknown_groups_and_kafka_are_refused(tmp_path):
    path = store_with_groups(tmp_path / "store")
    code, out, _ = run("consumers", str(path), "--group", "g2", "--reset-offsets", "--to-earliest",
                       "--topic", "U", "--execute")
    assert code == 0 and committed(path)[("g2", "U", 0)] == 0
    code, out, err = run("consumers", str(path), "--group", "g2", "--reset-offsets", "--to-earliest",
                         "--topic", "T")
    assert (code, out) == (1, "") and "expected consumer group 'g2' on topic 'T', found groups g1, g2" in err
    for argv, words in ([["--group", "g1", "--reset-offsets"], "needs --group G and one of"],
                        [["--reset-offsets", "--to-latest"], "needs --group G and one of"],
                        [["--group", "g1", "--execute"], "go with --reset-offsets"],
                        [["--group", "g1", "--reset-offsets", "--to-latest", "--to-earliest"],
                         "not allowed with"]):
        code, out, err = run("consumers", str(path), *argv)
        assert code == 2 and out == "" and words in err, argv


@pytest.mark.parametrize("target, expected", [
    (["--to-offset", "4"], {0: 4, 1: 4}),
    (["--to-offset", "9"], {0: 5, 1: 5}),      # past the end: the end
    (["--shift-by", "-5"], {0: 0, 1: None}),   # g1 committed T/0 at 2, not T/1: nothing to shift there
    (["--shift-by", "2"], {0: 4, 1: None}),
])
def test_offsets_and_shifts_are_clamped_into_each_queue(tmp_path, target, expected):
    path = store_with_groups(tmp_path / "store")
    code, out, _ = run("consumers", str(path), "--group", "g1", "--reset-offsets", *target, "--execute")
    assert code == 0 and len(out.splitlines()) == 1 + sum(o is not None for o in expected.values())
    assert {(t, q): o for (g, t, q), o in committed(path).items() if g == "g1"} == {
        ("T", q): o for q, o in expected.items()}


def test_delete_removes_a_topics_entry_or_the_whole_group(tmp_path):
    """``consumers --delete``: RocketMQ removes the group's ``topic@group`` entries of consumerOffset.json
    (``ConsumerOffsetManager.removeOffset``, what ``mqadmin deleteSubGroup -r true`` does to offsets), in one
    write with the file before kept as ``.bak``; only with ``--execute``."""
    path = store_with_groups(tmp_path / "store")
    with segstore.open(path, mode="a") as store:
        store.commit_offsets("g1", {("U", 0): 1})
    before = (path / "config" / "consumerOffset.json").read_bytes()
    code, out, err = run("consumers", str(path), "--group", "g1", "--delete", "--topic", "T")
    assert code == 0 and "nothing written" in err and out.split()[-4:] == ["g1", "T", "0", "2"]
    assert (path / "config" / "consumerOffset.json").read_bytes() == before
    code, out, err = run("consumers", str(path), "--group", "g1", "--delete", "--topic", "T", "--execute")
    assert (code, err) == (0, "")
    assert committed(path) == {("g1", "U", 0): 1, ("g2", "U", 0): 1}
    assert (path / "config" / "consumerOffset.json.bak").read_bytes() == before
    code, out, err = run("consumers", str(path), "--group", "g1", "--delete", "--execute")
    assert code == 0 and committed(path) == {("g2", "U", 0): 1}
    code, out, err = run("consumers", str(path), "--group", "g1", "--delete")
    assert (code, out) == (1, "") and "expected consumer group 'g1', found groups g2" in err
    for argv, words in ((["--delete"], "--delete needs --group G"),
                        (["--group", "g2", "--delete", "--reset-offsets"], "do not go together"),
                        (["--group", "g2", "--delete", "--to-latest"], "do not go together")):
        code, out, err = run("consumers", str(path), *argv)
        assert code == 2 and out == "" and words in err, argv


def test_dump_group_prints_the_backlog_in_commitlog_order(tmp_path):
    """RocketMQ: g1 committed T/0 at 2 (T/1 never): T/0's offsets 2-4, in commitlog order, as dump prints
    them."""
    path = store_with_groups(tmp_path / "store")
    code, whole, _ = run("dump", str(path), "--json")
    code, out, _ = run("dump", str(path), "--group", "g1", "--json")

    def pending(line: str) -> bool:
        message = json.loads(line)
        return (message["topic"], message["queue_id"]) == ("T", 0) and message["queue_offset"] >= 2

    assert code == 0 and out.splitlines() == [line for line in whole.splitlines() if pending(line)]
    assert len(out.splitlines()) == 3


def test_dump_group_of_a_queue_it_never_committed_says_so(tmp_path):
    """RocketMQ: g1 never committed T/1, whose 5 messages ``consumers`` counts as its lag (4.9.7
    ``AdminBrokerProcessor.getConsumeStats`` reads a missing offset as 0): ``dump --group g1 --queue 1``
    has nothing to start from and exits 1, saying g1 committed no offset there, not that g1 consumed
    every message stored, which is the opposite of what ``consumers`` shows."""
    path = store_with_groups(tmp_path / "store")
    code, out, err = run("consumers", str(path), "--group", "g1", "--json")
    assert {(r["topic"], r["partition"]): r["lag"] for r in json.loads(out)}[("T", 1)] == 5
    code, out, err = run("dump", str(path), "--group", "g1", "--topic", "T", "--queue", "1")
    assert (code, out) == (1, "")
    assert "consumed every message" not in err
    assert "segstore dump: T/1: group 'g1' committed no offset here" in err
    code, out, err = run("dump", str(path), "--group", "g1", "--topic", "T", "--queue", "0")
    assert code == 0 and len(out.splitlines()) == 3 and err == ""


@pytest.mark.parametrize("text, ns", [
    ("PT15M", 15 * 60 * 10**9), ("P1DT2H30M", (26 * 60 + 30) * 60 * 10**9), ("p2d", 2 * 86400 * 10**9),
    ("PT0.5S", 5 * 10**8), ("PT-1.25S", -125 * 10**7), ("-PT6H", -6 * 3600 * 10**9),
    ("PT1H-30M", 30 * 60 * 10**9),
    ("PT0,000000001S", 1),
])
def test_durations_read_as_java_time_duration_parse(text, ns):
    assert duration_ns(text) == ns


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1D", "P1H", "PT1D", "PT1.S5", "PT0.0000000001S", ""])
def test_what_duration_parse_refuses_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="ISO-8601 duration"):
        duration_ns(text)


@pytest.mark.parametrize("text", ["P99999999999999999999D", "P106751991167301D", "PT9223372036854775808S",
                                  "PT153722867280912931M", "P106751991167300DT24H"])
def test_a_duration_past_a_java_long_of_seconds_is_refused(text):
    """JDK ``Duration.parse``: ``Long.parseLong`` of each number, ``Math.multiplyExact`` to seconds and
    ``Math.addExact`` of the parts, an overflow a ``DateTimeParseException``; before, Python's integers took
    any size, and ``--by-duration P99999999999999999999D`` planned the earliest offsets."""
    with pytest.raises(argparse.ArgumentTypeError, match="at most 2\\^63-1 seconds"):
        duration_ns(text)
    assert duration_ns("PT9223372036854775807S") == (2**63 - 1) * 10**9


@pytest.mark.parametrize("argv", [["--to-offset", "9223372036854775808"],
                                  ["--to-offset", "-9223372036854775809"],
                                  ["--shift-by", "9223372036854775808"], ["--to-offset", "1_000"],
                                  ["--by-duration", "P99999999999999999999D"]])
def test_an_offset_past_a_java_long_is_a_usage_error(tmp_path, argv):
    """kafka-consumer-groups' ``--to-offset``/``--shift-by`` are ``OptionSpec<Long>``: a number past a long is
    refused as a usage error.  Before: taken, clamped into the queue's range and committed."""
    path = store_with_groups(tmp_path / "store")
    before = committed(path)
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", *argv, "--execute")
    assert (code, out) == (2, "") and f"argument {argv[0]}: expected " in err
    assert committed(path) == before


def test_an_exported_plan_restores_the_group_from_a_file(tmp_path):
    """``--to-current --export`` saves where g1 is (``topic,partition,offset`` lines); after a reset,
    ``--from-file`` of that file puts it back, queue by queue."""
    path = store_with_groups(tmp_path / "store")
    with segstore.open(path, mode="a") as store:
        store.commit_offsets("g1", {("T", 1): 4})
    code, saved, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--to-current",
                           "--export")
    assert code == 0 and saved == "T,0,2\nT,1,4\n" and "nothing written" in err
    (tmp_path / "plan.csv").write_text(saved)
    run("consumers", str(path), "--group", "g1", "--reset-offsets", "--to-earliest", "--execute")
    assert committed(path)[("g1", "T", 1)] == 0
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file",
                         tmp_path / "plan.csv", "--execute")
    assert (code, err) == (0, "") and out.split()[4:] == ["g1", "T", "0", "2", "g1", "T", "1", "4"]
    assert committed(path) == {("g1", "T", 0): 2, ("g1", "T", 1): 4, ("g2", "U", 0): 1}


def test_a_plan_file_of_several_groups_gives_the_groups_lines_clamped(tmp_path, monkeypatch):
    """``group,topic,partition,offset`` lines: only --group's are taken, a queue the group never committed
    included, each clamped into its queue; ``-`` reads stdin; --topic keeps its lines."""
    path = store_with_groups(tmp_path / "store")
    plan = "g2,U,0,0\r\ng1,T,1,99\n\ng1,U,0,-3\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(plan.encode())))
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file", "-",
                         "--execute")
    assert (code, err) == (0, "")
    assert committed(path) == {("g1", "T", 0): 2, ("g1", "T", 1): 5, ("g1", "U", 0): 0, ("g2", "U", 0): 1}
    (tmp_path / "plan.csv").write_text(plan)
    code, out, err = run("consumers", str(path), "--group", "g2", "--reset-offsets", "--from-file",
                         tmp_path / "plan.csv", "--topic", "U", "--json")
    assert code == 0 and json.loads(out) == [{"group": "g2", "topic": "U", "partition": 0, "new_offset": 0}]


def test_a_plan_file_may_be_a_pipe(tmp_path):
    """``--from-file <(cmd)``: a FIFO, read once."""
    import os
    import threading

    path = store_with_groups(tmp_path / "store")
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("T,1,3\n"))
    writer.start()
    code, out, _ = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file", fifo,
                       "--json")
    writer.join()
    assert code == 0 and json.loads(out) == [{"group": "g1", "topic": "T", "partition": 1, "new_offset": 3}]


@pytest.mark.parametrize("line", ["T,0,9223372036854775808", "T,2147483648,1", "T,0,1_0", "T,1_0,1"])
def test_a_plan_line_past_javas_int_or_long_is_refused(tmp_path, line):
    """Kafka 3.8.0 ``ConsumerGroupCommand.parseResetPlan`` reads each line with Jackson's CSV reader into an
    ``int`` partition and a ``long`` offset: a number past them, or with ``_`` in it, does not read.  Before:
    Python's ``int`` took them, and the offset was clamped into the partition and committed."""
    path = store_with_groups(tmp_path / "store")
    before = (path / "config" / "consumerOffset.json").read_bytes()
    (tmp_path / "plan.csv").write_text(f"T,1,3\n{line}\n")
    got, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file",
                        tmp_path / "plan.csv", "--execute")
    assert (got, out) == (2, "") and "plan.csv:6: expected topic,partition,offset" in err
    assert (path / "config" / "consumerOffset.json").read_bytes() == before
    (tmp_path / "plan.csv").write_text("T, 1 , 3 \n")       # blanks around the numbers are trimmed
    got, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file",
                        tmp_path / "plan.csv", "--json")
    assert got == 0 and json.loads(out) == [{"group": "g1", "topic": "T", "partition": 1, "new_offset": 3}]


def test_a_bad_plan_file_is_named_at_its_line_and_nothing_is_written(tmp_path):
    path = store_with_groups(tmp_path / "store")
    before = (path / "config" / "consumerOffset.json").read_bytes()
    for text, code, words in (
            ("T,0,1\nT,1\n", 2, "plan.csv:6: expected topic,partition,offset (or "
                                 "group,topic,partition,offset) as the first line has 3 fields, found 'T,1'"),
            ("T,zero,1\n", 2, "plan.csv:0: expected topic,partition,offset"),
            ("a,b\n", 2, "as the first line has 2 fields"),
            ("g2,U,0,0\n", 1, "plan.csv: expected a reset plan for group 'g1', found none"),
            ("", 1, "expected a reset plan for group 'g1', found none"),
            ("V,0,1\n", 1, "expected V-0 here to plan the new offset of group 'g1'")):
        (tmp_path / "plan.csv").write_text(text)
        got, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file",
                            tmp_path / "plan.csv", "--execute")
        assert (got, out) == (code, "") and words in err and "Traceback" not in err, text
    got, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file",
                        tmp_path / "nothing.csv")
    assert got == 2 and "nothing.csv: expected a CSV reset plan, found no such file or directory" in err
    assert (path / "config" / "consumerOffset.json").read_bytes() == before
    for argv, words in ((["--export"], "--export goes with --reset-offsets"),
                        (["--reset-offsets", "--to-current", "--export", "--json"], "not with --json"),
                        (["--reset-offsets", "--by-duration", "1h"], "expected an ISO-8601 duration")):
        got, out, err = run("consumers", str(path), "--group", "g1", *argv)
        assert (got, out) == (2, "") and words in err, argv


def test_topic_with_partitions_plans_those_partitions_committed_or_not(tmp_path):
    """``--topic T:0,1`` (``ConsumerGroupCommand.parseTopicsWithPartitions``): exactly those partitions,
    whether or not the group committed them, so a new group can be given its offsets; it narrows
    ``--from-file`` too; ``--delete`` takes whole topics only."""
    path = store_with_groups(tmp_path / "store")
    code, out, _ = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--topic", "T:1",
                       "--to-offset", "3", "--json")
    assert code == 0 and json.loads(out) == [{"group": "g1", "topic": "T", "partition": 1, "new_offset": 3}]
    code, out, _ = run("consumers", str(path), "--group", "fresh", "--reset-offsets", "--topic", "T:1,0,1",
                       "--to-earliest", "--execute")
    assert code == 0 and committed(path)[("fresh", "T", 0)] == 0 and committed(path)[("fresh", "T", 1)] == 0
    (tmp_path / "plan.csv").write_text("T,0,4\nT,1,4\nU,0,1\n")
    code, out, _ = run("consumers", str(path), "--group", "g2", "--reset-offsets", "--topic", "T:1",
                       "--from-file", tmp_path / "plan.csv", "--json")
    assert code == 0 and json.loads(out) == [{"group": "g2", "topic": "T", "partition": 1, "new_offset": 4}]
    for argv, code_, words in (
            (["--reset-offsets", "--topic", "T:x", "--to-latest"], 2, "expected TOPIC or TOPIC:PARTITION"),
            (["--reset-offsets", "--topic", ":1", "--to-latest"], 2, "expected TOPIC or TOPIC:PARTITION"),
            (["--reset-offsets", "--topic", "T:7", "--to-latest"], 1, "expected T-7 here"),
            (["--delete", "--topic", "T:0"], 2, "--delete removes a whole topic's offsets")):
        got, out, err = run("consumers", str(path), "--group", "g1", *argv)
        assert (got, out) == (code_, "") and words in err, argv


def test_members_of_a_rocketmq_store_say_the_files_keep_none(tmp_path):
    """RocketMQ keeps group members and states in the broker's memory only: ``--members`` says so once,
    not that every group has no active members (a Kafka group's state)."""
    path = store_with_groups(tmp_path / "store")
    code, out, err = run("consumers", str(path), "--members")
    assert code == 0 and out.split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert "keep no group members or states" in err and "no active members" not in err


def test_a_groups_exported_offsets_point_at_the_same_messages_after_conversion_to_kafka(tmp_path):
    """docs/conversion.md, "Consumer positions": a RocketMQ queue offset is the Kafka offset of the same
    message after ``convert``, so an export from the source, its topic names escaped (``%`` -> ``.25``),
    plans on the Kafka copy the offsets that name the same next messages."""
    from segstore.convert import convert
    from segstore.convert.topicnames import kafka_from_rocketmq

    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", messageIndexEnable=False) as store:
        store.append_batch([{"topic": t, "queue_id": i % 2, "body": b"%s-%d" % (t.encode(), i)}
                            for t in ("T", "%RETRY%g") for i in range(9)])
        store.commit_offsets("g", {("T", 0): 2, ("T", 1): 3, ("%RETRY%g", 0): 1})
    convert(str(path), str(tmp_path / "kafka"), to="kafka")
    code, saved, _ = run("consumers", str(path), "--group", "g", "--reset-offsets", "--to-current",
                         "--export")
    assert code == 0
    renamed = "".join(f"{kafka_from_rocketmq(line.split(',')[0])},{line.split(',', 1)[1]}\n"
                      for line in saved.splitlines())
    (tmp_path / "plan.csv").write_text(renamed)
    code, out, _ = run("consumers", tmp_path / "kafka", "--group", "g", "--reset-offsets", "--from-file",
                       tmp_path / "plan.csv", "--json")
    assert code == 0
    with segstore.open(path) as source, segstore.open(tmp_path / "kafka") as copy:
        for row in json.loads(out):
            original = next(t for t in source.topics() if kafka_from_rocketmq(t) == row["topic"])
            before = list(source.read(original, row["partition"], row["new_offset"], 1))
            after = list(copy.read(row["topic"], row["partition"], row["new_offset"], 1))
            assert [m.body for m in before] == [r.value for r in after]     # none: both at their end
            assert source.offset_range(original, row["partition"]) == copy.offset_range(row["topic"],
                                                                                        row["partition"])
    # the queue g never committed is planned at its end (--to-current, as the tool's)
    assert {(r["topic"], r["partition"], r["new_offset"]) for r in json.loads(out)} == {
        ("T", 0, 2), ("T", 1, 3), (".25RETRY.25g", 0, 1), (".25RETRY.25g", 1, 4)}


def test_a_queue_without_files_is_an_empty_queue_to_reset(tmp_path):
    """A push consumer commits its ``%RETRY%group`` queue before any retry message exists: no consume-queue
    files, ``getMaxOffsetInQueue`` 0.  A reset plans 0 for it rather than calling it another broker's."""
    path = store_with_groups(tmp_path / "store")
    offsets = path / "config" / "consumerOffset.json"
    offsets.write_text(offsets.read_text().replace('"T@g1":{', '"%RETRY%g1@g1":{0:0\n\t\t},\n\t\t"T@g1":{'))
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--to-latest",
                         "--export", "--execute")
    assert code == 0, err
    assert out.splitlines() == ["%RETRY%g1,0,0", "T,0,5", "T,1,5"]
    assert committed(path)[("g1", "%RETRY%g1", 0)] == 0 and committed(path)[("g1", "T", 0)] == 5


@pytest.mark.parametrize("target", [["--to-datetime", str(BASE)],
                                    ["--by-duration", "PT1H", "--now-ms", str(BASE + 3_600_000)]])
def test_a_queue_without_files_is_an_empty_queue_to_reset_by_time(tmp_path, target):
    """As above, by time: the queue's offset by time is 0 (4.9.7
    ``DefaultMessageStore.getOffsetInQueueByTime`` of a consume queue with no file:
    ``ConsumeQueue.getOffsetInQueueByTime`` finds no mapped file, 0), and the end where none is, 0 too.
    ``--to-datetime``/``--by-duration`` failed the whole plan, exit 1 ("expected a consume queue for
    %RETRY%g1/0"), where ``--to-latest`` and the others plan 0."""
    path = store_with_groups(tmp_path / "store")
    offsets = path / "config" / "consumerOffset.json"
    offsets.write_text(offsets.read_text().replace('"T@g1":{', '"%RETRY%g1@g1":{0:0\n\t\t},\n\t\t"T@g1":{'))
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", *target, "--export")
    assert code == 0, err
    assert out.splitlines() == ["%RETRY%g1,0,0", "T,0,0", "T,1,0"]


def test_a_configured_queue_without_files_is_an_empty_queue_for_a_new_group(tmp_path):
    """The broker creates ``%RETRY%group`` in topics.json (one queue) when the group's consumer first
    heartbeats (4.9.7 ClientManageProcessor.heartBeat -> createTopicInSendMessageBackMethod), with no
    consume-queue files until a retry: DefaultMessageStore answers min and max offset 0 for it, so
    ``--topic %RETRY%new:0`` gives a new group offset 0 there; a queue past readQueueNums is still none."""
    path = store_with_groups(tmp_path / "store")
    topics = path / "config" / "topics.json"
    topics.write_text(topics.read_text().replace(
        '"topicConfigTable":{', '"topicConfigTable":{\n\t\t"%RETRY%new":{\n\t\t\t"perm":6,\n\t\t\t'
        '"readQueueNums":1,\n\t\t\t"topicName":"%RETRY%new",\n\t\t\t"writeQueueNums":1\n\t\t},', 1))
    code, out, err = run("consumers", str(path), "--group", "new", "--reset-offsets",
                         "--topic", "%RETRY%new:0", "--to-latest", "--export", "--execute")
    assert (code, out) == (0, "%RETRY%new,0,0\n"), err
    assert committed(path)[("new", "%RETRY%new", 0)] == 0
    (tmp_path / "plan.csv").write_text("%RETRY%new,0,7\n")      # clamped into [0, 0]
    code, out, err = run("consumers", str(path), "--group", "other", "--reset-offsets", "--from-file",
                         tmp_path / "plan.csv", "--export")
    assert (code, out) == (0, "%RETRY%new,0,0\n"), err
    code, out, err = run("consumers", str(path), "--group", "new", "--reset-offsets",
                         "--topic", "%RETRY%new:1", "--to-latest")
    assert (code, out) == (1, "") and "expected %RETRY%new-1 here" in err


def test_offsets_retention_minutes_is_refused_on_a_rocketmq_store(tmp_path):
    """``--offsets-retention-minutes`` is Kafka's ``offsets.retention.minutes``; 4.9.7 ConsumerOffsetManager
    expires nothing (its ``scanUnsubscribedTopic`` is called nowhere), so the option would change nothing:
    refused (exit 2) rather than silently ignored, and nothing is written."""
    path = store_with_groups(tmp_path / "store")
    before = committed(path)
    for argv in ([], ["--group", "g1", "--reset-offsets", "--to-latest", "--execute"],
                 ["--group", "g1", "--delete", "--execute"], ["--list"]):
        code, out, err = run("consumers", str(path), *argv, "--offsets-retention-minutes", "5")
        assert (code, out) == (2, "") and "RocketMQ consumer offsets do not expire" in err, argv
    assert committed(path) == before


def test_a_group_or_topic_the_broker_cannot_read_back_is_not_committed(tmp_path):
    """4.9.7 ConsumerOffsetManager keys offsets ``topic@group`` and reads back only keys that split on ``@``
    into two (queryOffset, whichTopicByConsumer, removeOffset); the client refuses a group outside
    ``[%|a-zA-Z0-9_-]{1,255}`` (Validators.checkGroup).  A reset for group ``x@y`` wrote ``T@x@y``, a key
    neither the broker nor ``consumers`` nor ``--delete`` ever saw again; now it is refused, nothing
    written."""
    path = store_with_groups(tmp_path / "store")
    offsets = path / "config" / "consumerOffset.json"
    before = offsets.read_bytes()
    for group in ("x@y", "g 1", "grüppe", "g" * 256):
        code, out, err = run("consumers", str(path), "--group", group, "--reset-offsets", "--topic", "T:0",
                             "--to-latest", "--execute")
        assert (code, out) == (2, "") and "expected a consumer group" in err, group
    with segstore.open(path, format="rocketmq", mode="a") as store, \
            pytest.raises(InvalidTopicError):
        store.commit_offsets("g1", {("T", 0): 1, ("a@b", 0): 0})
    assert offsets.read_bytes() == before
    code, _, err = run("consumers", str(path), "--group", "%|_-" + "g" * 251, "--reset-offsets", "--topic",
                       "T:0", "--to-latest", "--execute")
    assert code == 0, err


@pytest.mark.parametrize("argv", [
    ["--to-offset", " 3"], ["--to-offset", "3 "], ["--to-offset", "\U0001d7d1"],
    ["--shift-by", "+\U0001d7cf"],
    ["--to-offset", "3", "--topic", "T:\U0001d7ce"], ["--to-offset", "3", "--topic", "T: 1"],
    ["--to-offset", "3", "--topic", "T:1_0"],
])
def test_numbers_kafka_consumer_groups_refuses_are_refused(tmp_path, argv):
    """3.8 kafka-consumer-groups: ``--to-offset`` / ``--shift-by`` are jopt-simple ``OptionSpec<Long>``
    (``Long.valueOf``, untrimmed), ``--topic T:P,...`` ``parseTopicsWithPartitions``' ``Integer.parseInt``:
    a blank, a ``_`` or a digit past the BMP (two surrogates to Java) throws.  Python's ``int`` took them."""
    path = store_with_groups(tmp_path / "store")
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", *argv)
    assert (code, out) == (2, ""), err


def test_numbers_in_any_bmp_decimal_digits_are_what_kafka_consumer_groups_reads(tmp_path):
    """The same methods read ARABIC-INDIC DIGIT THREE as 3 and leading zeros of any number, and so does
    ``parseResetPlan`` (Jackson's ``NumberInput.parseInt``/``parseLong``, which hand any text but ASCII
    digits to ``Integer.parseInt`` / ``Long.parseLong``); a partition past the BMP is refused there too."""
    path = store_with_groups(tmp_path / "store")
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--to-offset", "\u0663",
                         "--topic", "T:" + "0" * 25 + "1", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"group": "g1", "topic": "T", "partition": 1, "new_offset": 3}]
    plan = tmp_path / "plan.csv"
    plan.write_text("T,\u0660,\uff14\n", encoding="utf-8")
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file", plan,
                         "--json")
    assert code == 0, err
    assert json.loads(out) == [{"group": "g1", "topic": "T", "partition": 0, "new_offset": 4}]
    plan.write_text("T,\U0001d7ce,4\n", encoding="utf-8")
    code, out, err = run("consumers", str(path), "--group", "g1", "--reset-offsets", "--from-file", plan)
    assert (code, out) == (2, "") and "expected topic,partition,offset" in err


def test_offsets_retention_minutes_is_read_as_configdef_reads_the_brokers():
    """``--offsets-retention-minutes`` stands for 3.8 ``offsets.retention.minutes``: ``ConfigDef.parseType``
    trims it (``String.trim``: U+0000..U+0020 only) and reads it with ``Integer.parseInt``.  Python's
    ``int`` took ``1_0`` as 10, a digit past the BMP, and a NO-BREAK SPACE around the number."""
    import argparse

    from segstore.cli import retention_minutes

    assert retention_minutes(" \u0665\t") == 5
    assert retention_minutes("0" * 30 + "7") == 7
    for text in ("1_0", "\U0001d7d3", "\xa05", "2147483648", "0"):
        with pytest.raises(argparse.ArgumentTypeError):
            retention_minutes(text)
