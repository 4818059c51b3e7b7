"""``segstore query`` without ``--queue``/``--partition``: a time is looked up in every queue of the
topic (as ``kafka-get-offsets --time`` lists every partition), an offset or a tag query of a topic
with several queues is refused (an offset is one queue's: answering queue 0 was a silent guess),
and a topic with one queue is read there whatever its number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_run as run
from conftest import kafka_log_dir

import segstore

BASE = 1_700_000_000_000


def rocketmq_store(path: Path) -> Path:
    """Topic ``T`` over queues 0-2 (store times rising 10 ms a message, queue 2 the last written to),
    topic ``One`` on queue 5 alone."""
    with segstore.open(path, format="rocketmq", mode="a", mappedFileSizeCommitLog=1 << 16,
                       mappedFileSizeConsumeQueue=20 * 256, messageIndexEnable=False) as store:
        for i in range(30):
            store.append({"topic": "T", "queue_id": i % 3, "body": b"m%d" % i, "tags": "a" if i % 2 else "b",
                          "store_timestamp": BASE + 10 * i})
        store.append({"topic": "One", "queue_id": 5, "body": b"only", "store_timestamp": BASE})
    return path


def test_a_time_without_a_queue_is_looked_up_in_every_queue(tmp_path):
    path = str(rocketmq_store(tmp_path / "rmq"))
    for fmt_args in ([], ["--json"]):
        code, out, err = run("query", path, "--topic", "T", "--timestamp", str(BASE + 205), *fmt_args)
        assert (code, err) == (0, "")
        each = [run("query", path, "--topic", "T", "--queue", str(q), "--timestamp", str(BASE + 205),
                    *fmt_args)[1] for q in range(3)]
        assert out == "".join(each)
    answers = [json.loads(line) for line in out.splitlines()]
    # message i is in queue i % 3 at offset i // 3, stored at BASE + 10 i: from +205 on, i = 21, 22, 23
    assert [(a["queue_id"], a["offset"]) for a in answers] == [(0, 7), (1, 7), (2, 7)]
    code, out, err = run("query", path, "--topic", "T", "--timestamp", str(BASE + 285))
    assert code == 0 and out.startswith("T/2: offset 9 is the first")      # only i = 29 (queue 2) so new
    assert len(out.splitlines()) == 1
    assert "T/0: no message stored at or after" in err and "T/1: no message stored at or after" in err
    code, out, err = run("query", path, "--topic", "T", "--timestamp", str(BASE + 10**6))
    assert (code, out) == (1, "") and err.count("no message stored at or after") == 3


def test_a_kafka_time_without_a_partition_is_looked_up_in_every_partition(tmp_path):
    path = str(kafka_log_dir(tmp_path / "logs", 12, lambda j: []))
    code, out, err = run("query", path, "--topic", "b", "--timestamp", str(BASE + 4), "--json")
    assert (code, err) == (0, "")
    each = [run("query", path, "--topic", "b", "--partition", str(p), "--timestamp", str(BASE + 4),
                "--json")[1] for p in (0, 1)]
    assert out == "".join(each) and all(each)
    assert [json.loads(line)["partition"] for line in out.splitlines()] == [0, 1]


def test_a_kafka_time_answer_in_text_names_its_partition(tmp_path):
    """Kafka's answer prints the found record as kafka-dump-log does (a batch header, a record line), and
    neither names the partition: asked of every partition, the text answers of ``b-0`` and ``b-1`` could
    not be told apart.  Each answer now starts with the line ``kafka-get-offsets`` would have given,
    ``TOPIC-P: offset N is the first stored at or after T`` (as a RocketMQ answer's line), the offset that
    of the ``--json`` object; ``earliest`` and ``max-timestamp`` are named as such."""
    path = str(kafka_log_dir(tmp_path / "logs", 12, lambda j: []))
    for spec, says in ((str(BASE + 4), f"is the first stored at or after {BASE + 4}"),
                       ("earliest", "(the log start offset)"), ("max-timestamp", "(timestamp ")):
        code, out, err = run("query", path, "--topic", "b", "--timestamp", spec)
        assert (code, err) == (0, "")
        code, js, _ = run("query", path, "--topic", "b", "--timestamp", spec, "--json")
        offsets = [(a["partition"], a["offset"]) for a in map(json.loads, js.splitlines())]
        headings = [line for line in out.splitlines() if line.startswith("b-")]
        assert len(headings) == 2 and all(says in line for line in headings)
        for (p, offset), line in zip(offsets, headings, strict=True):
            assert line.startswith(f"b-{p}: ") and f"offset {offset}" in line
        # each heading is followed by that partition's record: its offset in the next record line
        lines = out.splitlines()
        for (_p, offset), line in zip(offsets, headings, strict=True):
            after = lines[lines.index(line) + 1:]
            assert next(x for x in after if x.startswith("| offset: ")).startswith(f"| offset: {offset} ")


@pytest.mark.parametrize("ask", [["--offset", "1"], ["--offset", "1", "--tag", "a"]])
def test_an_offset_without_a_queue_of_a_topic_with_several_is_refused(tmp_path, ask):
    path = str(rocketmq_store(tmp_path / "rmq"))
    code, out, err = run("query", path, "--topic", "T", *ask)
    assert (code, out) == (2, "")
    assert "expected --queue/--partition as well, found neither: topic 'T' has queues/partitions 0-2" in err


def test_an_offset_of_a_topic_with_one_queue_reads_that_queue(tmp_path):
    path = str(rocketmq_store(tmp_path / "rmq"))
    code, out, err = run("query", path, "--topic", "One", "--offset", "0", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["queue_id"] == 5 and json.loads(out)["body"] == "b25seQ=="   # "only"
    kafka = str(kafka_log_dir(tmp_path / "logs", 12, lambda j: []))
    code, out, err = run("query", kafka, "--topic", "a", "--offset", "0")
    assert code == 2 and "topic 'a' has queues/partitions 0-1" in err


def test_a_time_of_a_topic_with_one_queue_is_looked_up_in_that_queue(tmp_path):
    """A time without ``--queue`` is looked up in every queue of the topic, one queue too, whatever its
    number: ``One`` (queue 5 only) was looked up in queue 0 ("expected a consume queue for One/0", exit 1),
    and a Kafka topic held as ``topic-3`` alone in partition 0 ("expected a partition topic-0")."""
    path = str(rocketmq_store(tmp_path / "rmq"))
    code, out, err = run("query", path, "--topic", "One", "--timestamp", str(BASE), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"topic": "One", "queue_id": 5, "timestamp": BASE, "offset": 0}
    logs = kafka_log_dir(tmp_path / "logs", 12, lambda j: [])
    (logs / "b-1").rename(logs / "b-3")
    (logs / "b-0").rename(logs / "c-0")
    code, out, err = run("query", logs, "--topic", "b", "--timestamp", "0")
    assert (code, err) == (0, "")
    assert out.startswith("b-3: offset 0 is the first stored at or after 0\n"), out


def test_a_kafka_time_answer_says_where_a_read_committed_read_starts():
    """Kafka 3.8.0 ``UnifiedLog.fetchOffsetByTimestamp`` answers the offset whatever is stored there; a
    read_committed read from it skips an aborted transaction's records: the heading names both offsets
    rather than one the record under it does not carry."""
    from conftest import FIXTURES

    path = str(FIXTURES / "kafka" / "txn" / "topic-0")
    code, out, err = run("query", path, "--timestamp", "0", "--isolation", "read_committed")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == ("topic-0: offset 0 is the first stored at or after 0; a read_committed read from "
                        "there starts at offset 3")
    assert lines[2].startswith("| offset: 3 ")
    code, out, err = run("query", path, "--timestamp", "0")
    assert out.splitlines()[0] == "topic-0: offset 0 is the first stored at or after 0"


def test_a_rocketmq_time_answer_in_json_has_the_keys_docs_cli_md_names(tmp_path):
    """docs/cli.md: a RocketMQ time query answers ``{"topic", "queue_id", "timestamp", "offset"}``, the time
    asked and the queue offset found, which ``--offset`` then reads as that message's ``queue_offset``."""
    path = str(rocketmq_store(tmp_path / "rmq"))
    code, out, err = run("query", path, "--topic", "T", "--queue", "1", "--timestamp", str(BASE + 205),
                         "--json")
    assert (code, err) == (0, "")
    answer = json.loads(out)
    assert answer == {"topic": "T", "queue_id": 1, "timestamp": BASE + 205, "offset": 7}
    code, out, _ = run("query", path, "--topic", "T", "--queue", "1", "--offset", "7", "--json")
    message = json.loads(out)
    assert code == 0 and message["queue_offset"] == 7 and message["store_timestamp"] >= BASE + 205
