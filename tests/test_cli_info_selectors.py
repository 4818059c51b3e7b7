"""``segstore info --topic T [--queue Q]``: one topic's part of a big store, as ``mqadmin topicStatus -t T``
shows one topic; the store-wide parts (commitlog, config, cluster) as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli_run as run
from conftest import kafka_log_dir

import segstore


def info(*argv: str) -> dict:
    code, out, err = run("info", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def rocketmq_store(path: Path) -> Path:
    with segstore.open(path, format="rocketmq", mode="a", messageIndexEnable=False) as store:
        store.append_batch([{"topic": topic, "queue_id": q, "body": b"x"}
                            for topic in ("A", "B") for q in (0, 1, 2)])
    topics = path / "config" / "topics.json"
    document = json.loads(topics.read_text())
    document["topicConfigTable"]["Idle"] = {**document["topicConfigTable"]["A"], "topicName": "Idle"}
    topics.write_text(json.dumps(document))
    return path


def test_rocketmq_info_of_one_topic_and_queue(tmp_path):
    path = str(rocketmq_store(tmp_path / "rmq"))
    whole, one = info(path), info(path, "--topic", "B")
    assert [(q["topic"], q["queue_id"]) for q in one["queues"]] == [("B", 0), ("B", 1), ("B", 2)]
    assert one["queues"] == [q for q in whole["queues"] if q["topic"] == "B"]
    assert one["topics"] == ["B"] and list(one["topic_configs"]) == ["B"]
    assert one["commitlog"] == whole["commitlog"] and one["config"] == whole["config"]
    assert [q["queue_id"] for q in info(path, "--topic", "B", "--queue", "2")["queues"]] == [2]
    idle = info(path, "--topic", "Idle")            # configured in topics.json, no queue stored yet
    assert idle["queues"] == [] and list(idle["topic_configs"]) == ["Idle"]
    code, out, err = run("info", path, "--topic", "Nope")
    assert (code, out) == (1, "") and "expected a topic named 'Nope', found topics A, B" in err
    code, out, err = run("info", path, "--topic", "A", "--queue", "7")
    assert (code, out) == (1, "") and "expected --queue 7 in topic 'A', found queues 0-2" in err


def test_kafka_info_of_one_topic_and_partition(tmp_path):
    path = str(kafka_log_dir(tmp_path / "logs", 8, lambda j: []))
    whole = info(path)
    one = info(path, "--topic", "b", "--partition", "1")
    assert one["partitions"] == [p for p in whole["partitions"] if (p["topic"], p["partition"]) == ("b", 1)]
    assert len(one["partitions"]) == 1
    code, text, _ = run("info", path, "--topic", "a")
    assert code == 0 and "topic=a, partition=0" in text and "topic=b" not in text


def test_a_configured_partition_or_queue_no_local_file_holds_is_shown_not_refused():
    """``kafka-topics --describe --topic T --partitions P`` shows a partition the metadata log assigns to
    another broker; ``info --topic T --partition P`` refused it (exit 1, "expected a topic named T") though
    ``--topic T`` alone showed the topic and that assignment.  The real KRaft dir holds no ``payment-failed``
    partition (it is on broker 2).  A partition past the topic's count is still refused."""
    from conftest import FIXTURES

    real = str(FIXTURES / "real" / "kraft-confluent-7.5.1")
    one = info(real, "--topic", "payment-failed", "--partition", "0")
    assert one["partitions"] == [] and list(one["topics"]) == ["payment-failed"]
    assigned = one["topics"]["payment-failed"]["assignments"]
    assert [(a["partition"], a["replicas"]) for a in assigned] == [(0, [2])]
    code, out, _ = run("info", real, "--topic", "payment-failed", "--partition", "1")
    assert (code, out) == (1, "")


def test_a_queue_of_a_topic_only_topics_json_names_is_shown(tmp_path):
    """As ``--topic Idle`` alone: its config, no queues, for a queue below its queue counts."""
    path = str(rocketmq_store(tmp_path / "rmq"))
    counts = info(path)["topic_configs"]["Idle"]
    last = max(counts["read_queue_nums"], counts["write_queue_nums"]) - 1
    idle = info(path, "--topic", "Idle", "--queue", str(last))
    assert idle["queues"] == [] and list(idle["topic_configs"]) == ["Idle"]
    code, out, _ = run("info", path, "--topic", "Idle", "--queue", str(last + 1))
    assert (code, out) == (1, "")


def test_a_partition_past_a_configured_topics_count_is_named_not_the_topic(tmp_path):
    """``info --topic payment-failed --partition 1`` (the metadata log gives the topic one partition, on
    another broker) said "expected a topic named 'payment-failed'", a topic ``--topic`` alone shows; the
    partition is what the store lacks, named with the topic's partitions, as for a topic held here.  So for a
    queue past the counts of a topic only topics.json names."""
    from conftest import FIXTURES

    real = str(FIXTURES / "real" / "kraft-confluent-7.5.1")
    code, out, err = run("info", real, "--topic", "payment-failed", "--partition", "1")
    assert (code, out) == (1, "")
    assert "expected --partition 1 in topic 'payment-failed', found partitions 0" in err, err
    path = str(rocketmq_store(tmp_path / "rmq"))
    counts = info(path)["topic_configs"]["Idle"]
    last = max(counts["read_queue_nums"], counts["write_queue_nums"]) - 1
    code, out, err = run("info", path, "--topic", "Idle", "--queue", str(last + 1))
    assert (code, out) == (1, "")
    assert f"expected --queue {last + 1} in topic 'Idle', found queues 0-{last}" in err, err
