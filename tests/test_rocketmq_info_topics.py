"""RocketMQ ``info`` lists the topics of ``config/topics.json`` (queue counts, permission) beside what the
consume queues hold.

Sources (rocketmq-all-4.9.7): common/.../TopicConfig.java (readQueueNums, writeQueueNums, perm, order,
topicSysFlag as TopicConfigManager persists them), common/.../constant/PermName.java (``perm2String``:
R, W, X for the read 4, write 2 and inherit 1 bits).
"""

from __future__ import annotations

import json

from segstore_rocketmq.topicconfig import perm_text

import segstore
from segstore.cli import main


def test_perm_text_is_perm2string():
    assert [perm_text(p) for p in (6, 4, 2, 7, 0, 1, 14)] == ["RW-", "R--", "-W-", "RWX", "---", "--X", "RW-"]


def test_info_lists_the_topics_json_topics_without_consume_queues(tmp_path, capsys):
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a") as s:
        s.append_batch([{"topic": "T", "queue_id": q, "body": b"x"} for q in (0, 1)])
    path = store / "config" / "topics.json"
    document = json.loads(path.read_text())
    document["topicConfigTable"]["Idle"] = {"order": False, "perm": 4, "readQueueNums": 8,
                                            "topicFilterType": "SINGLE_TAG", "topicName": "Idle",
                                            "topicSysFlag": 0, "writeQueueNums": 16}
    path.write_text(json.dumps(document))
    assert main(["info", str(store), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["topics"] == ["T"]                      # what the consume queues hold
    assert info["topic_configs"] == {
        "Idle": {"read_queue_nums": 8, "write_queue_nums": 16, "perm": "R--", "order": False,
                 "topic_sys_flag": 0, "queues_stored": 0},
        "T": {"read_queue_nums": 2, "write_queue_nums": 2, "perm": "RW-", "order": False, "topic_sys_flag": 0,
              "queues_stored": 2},
    }
    assert main(["info", str(store)]) == 0
    text = capsys.readouterr().out
    assert "topic_configs:\n  Idle:\n    read_queue_nums: 8\n    write_queue_nums: 16\n    perm: R--\n" \
        in text


def test_info_gives_each_queue_its_last_updated_time_as_topic_status_does(tmp_path, capsys):
    """``mqadmin topicStatus``'s "Last Updated" (4.9.7 ``AdminBrokerProcessor.getTopicStatsInfo``): the
    store time of the queue's message at ``max - 1`` (``getMessageStoreTimeStamp``), -1 where that
    message cannot be read."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", messageIndexEnable=False) as s:
        s.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"x", "store_timestamp": 1_000 + i}
                        for i in range(7)])
        last = s.append({"topic": "U", "queue_id": 3, "body": b"y", "store_timestamp": 5_000})
    assert main(["info", str(store), "--json"]) == 0
    queues = {(q["topic"], q["queue_id"]): q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert {key: q["last_updated"] for key, q in queues.items()} == {
        ("T", 0): 1_006, ("T", 1): 1_005, ("U", 3): 5_000}
    commitlog = next((store / "commitlog").iterdir())
    with commitlog.open("r+b") as f:               # U's message: its magic code no longer one
        f.seek(last.position + 4)
        f.write(b"\0\0\0\0")
    assert main(["info", str(store), "--json"]) == 0
    queues = {(q["topic"], q["queue_id"]): q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert queues["U", 3]["last_updated"] == -1 and queues["T", 0]["last_updated"] == 1_006


def test_each_queues_bytes_are_what_the_broker_put_for_it(tmp_path, capsys):
    """``bytes`` per queue: the commitlog bytes of its messages, as the broker's own ``putMessage`` results
    (``put.jsonl``: each message's size) add up for the messages the broker dispatched to the queue (not a
    prepared or rolled-back transaction message: ``CommitLogDispatcherBuildConsumeQueue`` skips them);
    after retention cut the first commitlog files, only the messages still stored count (the consume
    queue's min offset moved past the rest)."""
    from conftest import FIXTURES, copy_writable

    fixture = FIXTURES / "rocketmq" / "basic"
    puts = [json.loads(line) for line in (fixture / "put.jsonl").read_text().splitlines()]
    messages = json.loads((fixture / "spec.json").read_text())["messages"]
    prepared, rolled_back = 0x4, 0xC            # MessageSysFlag.TRANSACTION_PREPARED_TYPE, ..._ROLLBACK_TYPE
    assert {messages[put["index"]].get("sysFlag", 0) & 0xC for put in puts} >= {prepared, rolled_back}

    def expected(min_physical: int) -> dict[tuple[str, int], int]:
        found: dict[tuple[str, int], int] = {}
        for put in puts:
            if messages[put["index"]].get("sysFlag", 0) & 0xC in (prepared, rolled_back):
                continue
            if put["physicalOffset"] >= min_physical:
                key = (put["topic"], put["queueId"])
                found[key] = found.get(key, 0) + put["size"]
        return found

    assert main(["info", str(fixture / "store"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {(q["topic"], q["queue_id"]): q["bytes"] for q in info["queues"]} == expected(0)
    totals: dict[str, int] = {}
    for (topic, _), size in expected(0).items():
        totals[topic] = totals.get(topic, 0) + size
    assert [(t["topic"], t["bytes"]) for t in info["topic_bytes"]] == sorted(totals.items(),
                                                                          key=lambda item: -item[1])
    assert main(["info", str(fixture / "store"), "--topic", "TopicA", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topic_bytes"] == [{"topic": "TopicA",
                                                                    "bytes": totals["TopicA"]}]
    store = copy_writable(fixture / "store", tmp_path / "store")
    with segstore.open(store, mode="a") as s:      # years on: every commitlog file but the last expires
        s.retention(now_ms=max(put["storeTimestamp"] for put in puts) + 10 * 365 * 86_400_000)
        cut = s.info()
    assert 0 < cut["commitlog"]["min_offset"] < cut["commitlog"]["max_offset"]
    after = {(q["topic"], q["queue_id"]): q["bytes"] for q in cut["queues"]}
    assert {key: n for key, n in after.items() if n} == expected(cut["commitlog"]["min_offset"])


def test_delay_queues_say_what_is_left_to_deliver_and_when(tmp_path, capsys):
    """``delay_queues``: per delay level, the ``SCHEDULE_TOPIC_XXXX`` queue (level - 1) from the offset
    ``delayOffset.json`` delivered up to; each message falls due at its store time plus the level's delay
    (4.9.7 ``ScheduleMessageService.computeDeliverTimestamp``, kept as the consume-queue tags code). The
    basic fixture's broker stored three level-18 (2h) messages and delivered none."""
    from conftest import FIXTURES, copy_writable

    fixture = FIXTURES / "rocketmq" / "basic"
    puts = [json.loads(line) for line in (fixture / "put.jsonl").read_text().splitlines()]
    scheduled = [put["storeTimestamp"] + 2 * 3_600_000 for put in puts
                 if put["topic"] == "SCHEDULE_TOPIC_XXXX"]
    assert len(scheduled) == 3
    store = copy_writable(fixture / "store", tmp_path / "store")
    offsets = store / "config" / "delayOffset.json"
    for delivered, pending, due in (({}, 3, scheduled), ({"18": 2}, 1, scheduled[2:]), ({"18": 3}, 0, [])):
        offsets.write_text(json.dumps({"offsetTable": delivered}))
        assert main(["info", str(store), "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)["delay_queues"]
        assert row == {"topic": "SCHEDULE_TOPIC_XXXX", "queue_id": 17, "level": 18, "delay": "2h",
                       "delivered_offset": int(delivered.get("18", 0)),
                       "max_offset": 3, "pending": pending, "next_due": due[0] if due else -1,
                       "last_due": due[-1] if due else -1}
    assert main(["info", str(store), "--topic", "TopicA", "--json"]) == 0     # narrowed like the queues
    assert json.loads(capsys.readouterr().out)["delay_queues"] == []


def test_group_configs_are_subscription_group_json_as_the_broker_loads_it(tmp_path, capsys):
    """``group_configs``: ``config/subscriptionGroup.json`` per group, as 4.9.7's
    ``SubscriptionGroupManager.decode`` fills ``SubscriptionGroupConfig`` through fastjson (an absent or
    null field keeps the class's default: consume and broadcast enabled, 1 retry queue, 16 retries, broker
    0, slow reads from broker 1); a field fastjson cannot cast fails the load: ``info`` shows the data error
    naming the file as ``group_configs_error``, ``verify`` reports it."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a") as s:
        s.append_batch([{"topic": "T", "queue_id": 0, "body": b"x"}])
    path = store / "config" / "subscriptionGroup.json"
    path.write_text(json.dumps({
        "dataVersion": {"counter": 3, "timestamp": 1795334929000},
        "subscriptionGroupTable": {
            "orders": {"brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": False,
                       "consumeFromMinEnable": True, "groupName": "orders",
                       "notifyConsumerIdsChangedEnable": True,
                       "retryMaxTimes": 3, "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1},
            "audit": {"groupName": "audit", "consumeBroadcastEnable": "false", "retryMaxTimes": None}}},
        indent="\t"))
    assert main(["info", str(store), "--json"]) == 0
    configs = json.loads(capsys.readouterr().out)["group_configs"]
    defaults = {"consumeEnable": True, "consumeFromMinEnable": True, "consumeBroadcastEnable": True,
                "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                "notifyConsumerIdsChangedEnable": True}
    assert configs == {"audit": {**defaults, "consumeBroadcastEnable": False},
                       "orders": {**defaults, "consumeEnable": False, "retryMaxTimes": 3}}
    path.write_text('{"subscriptionGroupTable": {"g": {"retryMaxTimes": "many"}}}')
    assert main(["info", str(store)]) == 0      # the rest answered, the error beside it (the broker stops)
    out = capsys.readouterr().out               # (tests/test_rocketmq_group_delay_unreadable.py)
    assert "group_configs_error: " in out
    assert "subscriptionGroup.json: expected retryMaxTimes of group 'g' (a Java int)" in out
    assert main(["verify", str(store)]) == 1            # verify names it too, among the store's problems
    assert "subscriptionGroup.json: expected retryMaxTimes of group 'g'" in capsys.readouterr().out
    path.unlink()
    assert main(["info", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["group_configs"] == {}


def test_a_queue_or_partition_selection_keeps_its_topics_bytes(tmp_path, capsys):
    """``info --topic T --queue Q`` (``mqadmin topicStatus -t T`` narrowed to one queue) and Kafka's
    ``--partition P``: ``topic_bytes`` is a per-topic row (no queue of its own), so the selection keeps the
    topic's whole size; it was dropped, and the text said ``topic_bytes: -`` as for an empty topic."""
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", messageIndexEnable=False) as s:
        s.append_batch([{"topic": t, "queue_id": i % 2, "body": b"x" * (10 + i)}
                        for i, t in enumerate("TTTUU")])
    assert main(["info", str(store), "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert main(["info", str(store), "--topic", "T", "--queue", "1", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert [(q["topic"], q["queue_id"]) for q in one["queues"]] == [("T", 1)]
    assert one["topic_bytes"] == [t for t in whole["topic_bytes"] if t["topic"] == "T"] != []
    assert main(["info", str(store), "--queue", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topic_bytes"] == whole["topic_bytes"]
    kafka = tmp_path / "kafka"
    with segstore.open(kafka, format="kafka", mode="a") as s:
        for p in (0, 1):
            s.append_batch([{"topic": "K", "partition": p, "value": b"v" * (5 + p)}])
    assert main(["info", str(kafka), "--json"]) == 0
    sizes = json.loads(capsys.readouterr().out)["topic_bytes"]
    assert main(["info", str(kafka), "--topic", "K", "--partition", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topic_bytes"] == sizes != []


def test_info_says_an_unclean_shutdown_and_the_checkpoint(tmp_path, capsys):
    """``info`` gives the checkpoint's fields (4.9.7 ``StoreCheckpoint``: physicMsgTimestamp,
    logicsMsgTimestamp, indexMsgTimestamp, which bound the next abnormal recovery) and ``unclean_shutdown``:
    the ``abort`` file ``DefaultMessageStore.start`` creates and ``shutdown`` removes was there, so the
    broker's next start runs ``recoverAbnormally``.  A writer reports what it found when it opened (its own
    abort file is not a crash); a checkpoint that cannot be read is ``checkpoint_error``."""
    from conftest import FIXTURES, copy_writable

    crashed = copy_writable(FIXTURES / "rocketmq" / "abort" / "store", tmp_path / "crashed")
    raw = (crashed / "checkpoint").read_bytes()
    fields = [int.from_bytes(raw[at:at + 8], "big", signed=True) for at in (0, 8, 16)]
    assert main(["info", str(crashed), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["unclean_shutdown"] is True
    assert [info["checkpoint"][name] for name in ("physicMsgTimestamp", "logicsMsgTimestamp",
                                                  "indexMsgTimestamp")] == fields
    assert main(["info", str(crashed)]) == 0
    text = capsys.readouterr().out
    assert f"unclean_shutdown: True\ncheckpoint:\n  physicMsgTimestamp: {fields[0]}\n" in text
    with segstore.open(crashed, mode="a") as s:
        assert s.info()["unclean_shutdown"] is True
    with segstore.open(crashed) as s:
        assert s.info()["unclean_shutdown"] is False
    with segstore.open(tmp_path / "new", format="rocketmq", mode="a") as s:
        assert s.info()["unclean_shutdown"] is False
    (crashed / "checkpoint").write_bytes(b"\0" * 10)
    assert main(["info", str(crashed), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "checkpoint" not in info and "expected a checkpoint" in info["checkpoint_error"]
