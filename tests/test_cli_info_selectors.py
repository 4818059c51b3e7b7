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
