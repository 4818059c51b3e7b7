"""Each topic's own config from the log directory's files: retention, compaction, DeleteRecords and verify
use what the KRaft metadata log says of a topic, under what the command line says.

Sources (apache/kafka 3.8.0):
- core/.../coordinator/group/GroupCoordinator.scala ``offsetsTopicConfigs`` and
  coordinator/transaction/TransactionStateManager.scala ``transactionTopicConfigs``: both internal
  topics are created with ``cleanup.policy=compact``;
- core/.../log/UnifiedLog.scala ``deleteOldSegments``: without ``delete`` in the policy only the
  log-start pass runs (a compacted topic never loses segments to retention.ms / retention.bytes);
- core/.../server/ReplicaManager.scala ``deleteRecordsOnLocalLog``: ``Topic.isInternal`` topics answer
  InvalidTopicException("Cannot delete records of internal topic ...");
- raft/.../KafkaMetadataLog.scala: the metadata log deletes its own segments below its snapshots; the
  log manager never runs retention or the cleaner on it;
- core/.../log/UnifiedLog.scala ``assignTopicId``: a ``partition.metadata`` id other than the
  metadata's is an InconsistentTopicIdException (the broker does not load the partition).
The metadata logs are written from the record schemas of metadata/src/main/resources/common/metadata/
(TopicRecord.json, PartitionRecord.json, ConfigRecord.json) by ``kafka_messages``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, copy_writable
from kafka_messages import config, partition, topic
from segstore_kafka.partition import KafkaConfig
from test_kafka_metadata import write_metadata_log

import segstore
from segstore.cli import main
from segstore.errors import ConfigError
from segstore.records import Message

T0 = 1_700_000_000_000
ORDERS_ID = "AAAAAAAAAAAAAAAAAAAAEQ"
TABLE_ID = "AAAAAAAAAAAAAAAAAAAAIg"
REAL = FIXTURES / "real" / "kraft-confluent-7.5.1"


def _fill(log_dir: Path, topics: list[str], *, segments: int = 3) -> None:
    """Each topic's partition 0 with ``segments`` segments of old records (timestamps T0...)."""
    with segstore.open(log_dir, format="kafka", mode="a", **{"segment.bytes": 200}) as store:
        for n in range(segments * 2):
            store.append_batch([Message(t, b"v" * 60, key=f"k{n}".encode(), timestamp=T0 + n)
                                for t in topics])


def _bases(part: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in part.glob("*.log"))


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _results(out: str) -> dict[str, dict]:
    return {f"{r['topic']}-{r['partition']}": r for r in map(json.loads, out.splitlines())}


# -- item: retention never deletes a compacted topic's segments ----------------------------------------

def test_retention_never_deletes_segments_of_the_internal_compacted_topics(tmp_path, capsys):
    logs = tmp_path / "logs"
    _fill(logs, ["__consumer_offsets", "__transaction_state", "orders"])
    before = {name: _bases(logs / f"{name}-0") for name in ("__consumer_offsets", "__transaction_state")}
    assert all(len(b) >= 3 for b in before.values())
    args = ["retention", str(logs), "--config", "retention.ms=1000", "--now-ms", str(T0 + 10**9), "--json"]
    code, out, _ = _run(capsys, *args, "--dry-run")
    assert code == 0
    planned = _results(out)
    assert planned["__consumer_offsets-0"]["deleted_segments"] == []
    assert planned["__transaction_state-0"]["deleted_segments"] == []
    assert planned["orders-0"]["deleted_segments"]          # a delete-policy topic does lose them
    code, out, _ = _run(capsys, *args)
    assert code == 0 and _results(out)["__consumer_offsets-0"]["deleted_segments"] == []
    assert {name: _bases(logs / f"{name}-0") for name in before} == before


def test_a_command_line_cleanup_policy_does_not_make_the_internal_topics_deletable(tmp_path, capsys):
    logs = tmp_path / "logs"
    _fill(logs, ["__consumer_offsets"])
    before = _bases(logs / "__consumer_offsets-0")
    code, out, err = _run(capsys, "retention", str(logs), "--config", "cleanup.policy=delete",
                          "--config", "retention.ms=1000", "--now-ms", str(T0 + 10**9), "--json")
    assert code == 0 and _results(out)["__consumer_offsets-0"]["deleted_segments"] == []
    assert "__consumer_offsets is always compacted" in err
    assert _bases(logs / "__consumer_offsets-0") == before


def test_delete_records_refuses_an_internal_topic_as_the_broker_does(tmp_path, capsys):
    logs = tmp_path / "logs"
    _fill(logs, ["__consumer_offsets", "orders"])
    before = _bases(logs / "__consumer_offsets-0")
    code, _, err = _run(capsys, "delete-records", str(logs / "__consumer_offsets-0"), "--before", "2")
    assert code == 2 and "Cannot delete records of internal topic __consumer_offsets" in err
    # the CLI's error form: path: expected ..., found ...
    assert err.startswith(f"{logs / '__consumer_offsets-0'}: expected a topic DeleteRecords may delete "
                          "records of, found the internal topic __consumer_offsets"), err
    code, _, err = _run(capsys, "delete-records", str(logs), "--topic", "__consumer_offsets", "--before", "2")
    assert code == 2 and "internal topic" in err
    # a log-dir-wide run changes the other topics and says why the internal one is left
    code, out, _ = _run(capsys, "delete-records", str(logs), "--before", "2", "--json")
    assert code == 0
    results = _results(out)
    assert "internal topic" in results["__consumer_offsets-0"]["skipped"]
    assert results["orders-0"]["log_start_offset"] == 2
    assert _bases(logs / "__consumer_offsets-0") == before
    with segstore.open(logs / "__consumer_offsets-0") as store:
        assert store.offset_range("__consumer_offsets", 0)[0] == 0


def test_share_group_state_is_an_ordinary_topic_to_kafka_3_8(tmp_path, capsys):
    """Kafka 3.8.0 ``Topic.INTERNAL_TOPICS`` (clients/.../common/internals/Topic.java) holds
    ``__consumer_offsets`` and ``__transaction_state`` only; ``__share_group_state`` joined it in 3.9
    (share groups, KIP-932).  So a 3.8 broker's ``ReplicaManager.deleteRecordsOnLocalLog`` deletes records of
    a topic of that name, and ``UnifiedLog.deleteOldSegments`` retains it by the broker's default
    ``cleanup.policy=delete``: segstore refused DeleteRecords on it as on the internal topics."""
    logs = tmp_path / "logs"
    _fill(logs, ["__share_group_state", "__transaction_state"])
    code, out, _ = _run(capsys, "delete-records", str(logs), "--before", "2", "--json")
    assert code == 0
    results = _results(out)
    assert results["__share_group_state-0"]["log_start_offset"] == 2
    assert "internal topic" in results["__transaction_state-0"]["skipped"]
    code, _, err = _run(capsys, "delete-records", str(logs / "__share_group_state-0"), "--before", "3")
    assert code == 0, err
    with segstore.open(logs / "__share_group_state-0") as store:
        assert store.offset_range("__share_group_state", 0)[0] == 3
    code, _, err = _run(capsys, "delete-records", str(logs / "__transaction_state-0"), "--before", "3")
    assert code == 2 and "Cannot delete records of internal topic __transaction_state" in err
    code, out, _ = _run(capsys, "retention", str(logs), "--config", "retention.ms=1000", "--now-ms",
                        str(T0 + 10**9), "--json")
    assert code == 0 and _results(out)["__share_group_state-0"]["deleted_segments"]
    # every segment past retention.ms, the active one rolled first: the log starts anew at its end
    assert _bases(logs / "__share_group_state-0") == [6]


# -- the metadata log's ConfigRecords ---------------------------------------------------------------

def _kraft_dir(tmp_path: Path) -> Path:
    """A KRaft log dir: ``table`` compacted and ``orders`` retained for 1 s by the metadata log."""
    logs = tmp_path / "logs"
    _fill(logs, ["orders", "table"])
    write_metadata_log(logs, [
        topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]), config("orders", "retention.ms", "1000"),
        topic("table", TABLE_ID), partition(TABLE_ID, 0, [1]), config("table", "cleanup.policy", "compact"),
    ])
    for name, topic_id in (("orders", ORDERS_ID), ("table", TABLE_ID)):
        (logs / f"{name}-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}\n")
    return logs


def test_delete_records_over_a_log_dir_refuses_a_compacted_topic_before_changing_any(tmp_path, capsys):
    """Kafka 3.8.0 ``Partition.deleteRecordsOnLeader`` answers a partition of a topic without ``delete`` in
    its ``cleanup.policy`` with POLICY_VIOLATION, the others on their own; segstore refuses the whole
    request, naming the partition, before any changes (orders-0 sorts first and used to lose its segments
    before table-0 raised)."""
    logs = _kraft_dir(tmp_path)
    before = {name: _bases(logs / f"{name}-0") for name in ("orders", "table")}
    code, out, err = _run(capsys, "delete-records", str(logs), "--before", "4", "--json")
    assert code == 2 and out == ""
    assert f"{logs / 'table-0'}: expected cleanup.policy with delete to delete records of table-0, " \
           "found 'compact'" in err
    assert {name: _bases(logs / f"{name}-0") for name in before} == before
    with segstore.open(logs) as store:
        assert store.offset_range("orders", 0)[0] == 0
    code, out, _ = _run(capsys, "delete-records", str(logs), "--topic", "orders", "--before", "4", "--json")
    assert code == 0 and _results(out)["orders-0"]["log_start_offset"] == 4


def test_retention_uses_each_topics_own_config_from_the_metadata_log(tmp_path, capsys):
    logs = _kraft_dir(tmp_path)
    code, out, _ = _run(capsys, "retention", str(logs), "--now-ms", str(T0 + 10**9), "--json", "--dry-run")
    assert code == 0
    results = _results(out)
    assert results["orders-0"]["deleted_segments"]                 # retention.ms=1000 from its ConfigRecord
    assert results["table-0"]["deleted_segments"] == []           # compact, from its ConfigRecord
    assert "KRaft metadata log" in results["__cluster_metadata-0"]["skipped"]
    # the command line overrides the file, and says so
    code, out, err = _run(capsys, "retention", str(logs), "--topic", "orders", "--config", "retention.ms=-1",
                          "--now-ms", str(T0 + 10**9), "--json", "--dry-run")
    assert code == 0 and _results(out)["orders-0"]["deleted_segments"] == []
    assert "orders: --config retention.ms=-1 overrides retention.ms=1000 of the metadata log" in err


def test_the_metadata_logs_dynamic_broker_defaults_apply_under_a_topics_own(tmp_path, capsys):
    """DynamicBrokerConfig: this node's dynamic config over the cluster default's, each topic config by its
    first synonym set (ServerTopicConfigSynonyms: retention.ms <- log.retention.ms, .minutes, .hours)."""
    logs = _kraft_dir(tmp_path)
    _fill(logs, ["plain"])
    write_metadata_log(logs, [topic("plain", "AAAAAAAAAAAAAAAAAAAAMw"),
                              config("", "log.retention.hours", "1000", resource_type=4),
                              config("1", "log.retention.minutes", "1", resource_type=4)])
    (logs / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=1\n")
    code, out, _ = _run(capsys, "retention", str(logs), "--now-ms", str(T0 + 10**9), "--json", "--dry-run")
    results = _results(out)
    assert code == 0 and results["plain-0"]["deleted_segments"]          # node 1: 1 minute
    assert results["table-0"]["deleted_segments"] == []                 # still compacted
    (logs / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=2\n")
    code, out, _ = _run(capsys, "retention", str(logs), "--now-ms", str(T0 + 10**9), "--json", "--dry-run")
    assert code == 0 and _results(out)["plain-0"]["deleted_segments"] == []   # the cluster's 1000 hours


def test_compact_leaves_a_delete_policy_topic_and_the_metadata_log_alone(tmp_path, capsys):
    logs = _kraft_dir(tmp_path)
    code, out, _ = _run(capsys, "compact", str(logs), "--json", "--dry-run")
    assert code == 0
    results = _results(out)
    assert "cleanup.policy=delete" in results["orders-0"]["skipped"]
    assert "KRaft metadata log" in results["__cluster_metadata-0"]["skipped"]
    assert "skipped" not in results["table-0"] and results["table-0"]["first_uncleanable_offset"] > 0


def test_info_shows_each_topics_id_and_configs(tmp_path, capsys):
    logs = _kraft_dir(tmp_path)
    code, out, _ = _run(capsys, "info", str(logs), "--json")
    assert code == 0
    info = json.loads(out)
    assignment = [{"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1],
                   "under_replicated": False, "leaderless": False}]
    assert info["topics"] == {
        "orders": {"id": ORDERS_ID, "partitions": 1, "replication_factor": 1,
                   "configs": {"retention.ms": "1000"}, "assignments": assignment},
        "table": {"id": TABLE_ID, "partitions": 1, "replication_factor": 1,
                  "configs": {"cleanup.policy": "compact"}, "assignments": assignment}}
    by_name = {p["topic"]: p for p in info["partitions"]}
    assert by_name["orders"]["topic_id"] == ORDERS_ID


def test_verify_finds_a_partition_metadata_id_the_metadata_log_disagrees_with(tmp_path, capsys):
    logs = _kraft_dir(tmp_path)
    assert _run(capsys, "verify", str(logs))[0] == 0
    (logs / "orders-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {TABLE_ID}\n")
    code, out, _ = _run(capsys, "verify", str(logs))
    assert code == 1
    assert (f"orders-0/partition.metadata:0: expected topic id {ORDERS_ID} (the metadata log's id of "
            f"orders), found {TABLE_ID}") in out
    (logs / "orders-0" / "partition.metadata").write_text("version: 0\ntopic_id: nonsense\n")
    code, out, _ = _run(capsys, "verify", str(logs))
    # the line once quoted (it was quoted twice: "'topic_id: nonsense'")
    assert code == 1 and "expected a line 'topic_id: ID' with a 22-character topic id, found " \
                         "'topic_id: nonsense'\n" in out
    (logs / "orders-0" / "partition.metadata").write_text("garbage")
    code, out, _ = _run(capsys, "verify", str(logs))
    assert code == 1 and "partition.metadata:0: expected a line 'version: N', found 'garbage'\n" in out


# -- the real KRaft log dir ----------------------------------------------------------------------------

def test_the_real_kraft_dirs_info_shows_what_its_metadata_log_says(capsys):
    code, out, _ = _run(capsys, "info", str(REAL), "--json")
    assert code == 0
    info = json.loads(out)
    cluster = info["cluster"]
    # meta.properties: cluster.id, node.id; bootstrap and metadata log: metadata.version 11 (3.5-IV2)
    assert (cluster["cluster_id"], cluster["node_id"]) == ("EpwKlK0lR6qKZW0cGwZz8w", 1)
    assert (cluster["metadata_version"], cluster["metadata_version_level"]) == ("3.5-IV2", 11)
    assert cluster["snapshot"] == "00000000000000028869-0000000189.checkpoint"
    assert cluster["metadata_offset"] == 30637 and cluster["records_not_read"] == 0
    topics = info["topics"]
    assert sorted(topics) == ["__consumer_offsets", "delivery-create-request", "delivery-create-response",
                              "payment-create-request", "payment-create-response", "payment-failed"]
    offsets = topics["__consumer_offsets"]
    assert {key: offsets[key] for key in ("id", "partitions", "replication_factor", "configs")} == {
        "id": "crCKTd0wTl6bQClKBtax4Q", "partitions": 50, "replication_factor": 3,
        "configs": {"compression.type": "producer", "cleanup.policy": "compact",
                    "segment.bytes": "104857600"}}
    # the cluster was stopped broker by broker: each partition kept its last in-sync replica and lost its
    # leader (PartitionChangeRecord leader -1)
    assert offsets["assignments"][0] == {"partition": 0, "leader": -1, "leader_epoch": 54,
                                         "replicas": [3, 1, 2], "isr": [1], "under_replicated": True,
                                         "leaderless": True}
    for described in topics.values():
        assert [a["partition"] for a in described["assignments"]] == list(range(described["partitions"]))
        for a in described["assignments"]:
            assert len(a["replicas"]) == described["replication_factor"]
            assert set(a["isr"]) <= set(a["replicas"])
            assert a["under_replicated"] == (len(a["isr"]) < len(a["replicas"]))
            assert a["leaderless"] == (a["leader"] == -1)
    code, out, _ = _run(capsys, "info", str(REAL), "--topic", "__consumer_offsets", "--partition", "0")
    assert "      - partition=0, leader=-1, leader_epoch=54, replicas=3,1,2, isr=1, under_replicated=True, " \
           "leaderless=True\n" in out and "partition=1," not in out
    # the high watermark: replication-offset-checkpoint's (version, count, then "topic partition offset"
    # lines, CheckpointFile / OffsetCheckpointFile), clamped into the log, the log end where none is
    lines = (REAL / "replication-offset-checkpoint").read_text().splitlines()
    checkpointed = {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:2 + int(lines[1])])}
    for part in info["partitions"]:
        hw = checkpointed.get((part["topic"], part["partition"]), part["end_offset"])
        assert part["high_watermark"] == min(max(hw, part["start_offset"]), part["end_offset"])
    assert any(part["high_watermark"] > 0 for part in info["partitions"])
    # topic_bytes: the partitions' bytes by topic, largest first
    totals: dict[str, int] = {}
    for part in info["partitions"]:
        totals[part["topic"]] = totals.get(part["topic"], 0) + part["bytes"]
    assert [(t["topic"], t["bytes"]) for t in info["topic_bytes"]] == sorted(
        totals.items(), key=lambda kv: (-kv[1], kv[0]))
    assert info["topic_bytes"][0]["topic"] == "__cluster_metadata"
    # the ids each partition.metadata holds, which the broker checked against the metadata log
    for part in info["partitions"]:
        if part["topic"] != "__cluster_metadata":
            assert part["topic_id"] == topics[part["topic"]]["id"]
    assert _run(capsys, "verify", str(REAL))[0] == 0


def test_the_real_kraft_dirs_snapshot_and_log_tail_give_the_image_a_full_replay_gives(tmp_path):
    """The snapshot at 28,869 holds the image the broker built from records 0..28,868; replaying the whole
    log (still there: its log start is 0) must end in the same topics, partition epochs, configs, brokers."""
    from segstore_kafka import kraft

    def view(image):
        return ({n: (t.topic_id, {p: (s.replicas, s.isr, s.leader, s.leader_epoch, s.partition_epoch)
                                  for p, s in t.partitions.items()}) for n, t in image.topics.items()},
                image.configs, image.features, {b: (s.epoch, s.fenced) for b, s in image.brokers.items()},
                image.next_producer_id)

    with_snapshot = kraft.load_image(str(REAL))
    copy = copy_writable(REAL, tmp_path / "logs")
    os.remove(copy / "__cluster_metadata-0" / "00000000000000028869-0000000189.checkpoint")
    full = kraft.load_image(str(copy))
    assert with_snapshot is not None and full is not None and full.snapshot is None
    assert view(with_snapshot) == view(full)
    assert full.counts["NO_OP_RECORD"] == 26698 and full.counts["PARTITION_CHANGE_RECORD"] == 3664


def test_retention_on_the_real_kraft_dir_skips_compacted_topics_because_its_files_say_so(tmp_path, capsys):
    logs = copy_writable(REAL, tmp_path / "logs")
    # no --config for __consumer_offsets at all: compact comes from the ConfigRecord (and the broker's rule)
    code, out, _ = _run(capsys, "retention", str(logs), "--config", "retention.ms=1", "--config",
                        "retention.bytes=0", "--now-ms", str(2 * T0), "--json", "--dry-run")
    assert code == 0
    results = _results(out)
    offsets = [r for name, r in results.items() if name.startswith("__consumer_offsets")]
    assert len(offsets) == 50 and all(r["deleted_segments"] == [] for r in offsets)
    assert "skipped" in results["__cluster_metadata-0"]
    # what the partitions use comes from the metadata log's ConfigRecords of __consumer_offsets
    with segstore.open(logs) as store:
        own = store.topic_configs.for_topic("__consumer_offsets")
        assert own.from_files == {"cleanup.policy": "compact", "compression.type": "producer",
                                  "segment.bytes": "104857600"}
        assert store.partition_of("__consumer_offsets", 14).config.segment_bytes == 104857600
        assert store.partition_of("delivery-create-request", 0).config.cleanup_policy == "delete"
    shutil.rmtree(logs)


def test_stray_partitions_are_those_a_38_broker_would_rename(tmp_path, capsys):
    """``stray`` per partition, as Kafka 3.8.0's ``LogManager.isStrayKraftReplica`` judges a log at startup
    (it renames such a directory ``-stray``): no topic id in ``partition.metadata``, a topic id and
    partition the metadata image lacks, or replicas without this node. The real node 1 holds no stray
    log; the metadata log itself is not judged."""
    logs = copy_writable(REAL, tmp_path / "logs")

    def strays() -> dict[str, bool | None]:
        assert main(["info", str(logs), "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["partitions"]
        return {f"{p['topic']}-{p['partition']}": p["stray"] for p in rows}

    found = strays()
    assert found.pop("__cluster_metadata-0") is None and set(found.values()) == {False}
    # delivery-create-response (id ammo_r0fQ9mnxC4Q6FMD-g) has replicas [3] in the metadata log
    elsewhere = logs / "delivery-create-response-0"
    shutil.copytree(logs / "payment-create-response-0", elsewhere)
    (elsewhere / "partition.metadata").write_text("version: 0\ntopic_id: ammo_r0fQ9mnxC4Q6FMD-g\n")
    found = strays()
    assert found["delivery-create-response-0"] is True and found["payment-create-response-0"] is False
    (logs / "payment-create-response-0" / "partition.metadata").unlink()              # no topic id
    (logs / "delivery-create-request-0" / "partition.metadata").write_text(
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")     # an id the image lacks
    found = strays()
    assert found["payment-create-response-0"] is True and found["delivery-create-request-0"] is True


def test_topic_configs_are_parsed_and_bounded_as_kafkas_log_config(tmp_path, capsys):
    """Kafka 3.8.0 ``LogConfig`` (``ConfigDef``): ``cleanup.policy`` is a LIST (``parseType`` trims it and
    splits at commas with the spaces around them), and the numbers have types and ``atLeast`` bounds.
    ``compact, delete`` in the metadata log was refused ("not applied"), so the topic was cleaned as a
    delete-only one, and ``delete.retention.ms=-1`` or ``retention.ms=-2`` were taken."""
    logs = tmp_path / "logs"
    _fill(logs, ["orders", "table"])
    write_metadata_log(logs, [
        topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
        config("orders", "delete.retention.ms", "-1"),
        topic("table", TABLE_ID), partition(TABLE_ID, 0, [1]),
        config("table", "cleanup.policy", "compact, delete"),
    ])
    code, out, err = _run(capsys, "compact", str(logs), "--json", "--dry-run")
    assert code == 0
    results = _results(out)
    assert "skipped" not in results["table-0"] and results["table-0"]["first_uncleanable_offset"] > 0
    assert "cleanup.policy" not in err
    assert "orders: delete.retention.ms=-1 from the metadata log not applied" in err
    code, out, _ = _run(capsys, "retention", str(logs), "--topic", "table", "--config",
                        "retention.ms=1000", "--now-ms", str(T0 + 10**9), "--json", "--dry-run")
    assert code == 0 and _results(out)["table-0"]["deleted_segments"]  # delete is in the policy too
    for bad in ("retention.ms=-2", "segment.bytes=13", "segment.bytes=2147483648", "delete.retention.ms=-1",
                "min.compaction.lag.ms=-1", "max.message.bytes=-1", "retention.bytes=9223372036854775808"):
        code, out, err = _run(capsys, "retention", str(logs), "--config", bad, "--dry-run")
        assert code == 2 and out == "", bad
        # past a long: ConfigDef's Long.parseLong throws ("Not a number of type LONG"), no bound is met
        name = bad.split("=")[0]
        assert f"expected {name} from " in err or f"expected an integer for {name} (" in err, err
    for good in ("retention.ms=-1", "retention.bytes=-5", "segment.bytes=14"):
        assert _run(capsys, "retention", str(logs), "--config", good, "--dry-run")[0] == 0, good


@pytest.mark.parametrize("value", ["1_000_000", 1_000_000.5, True, "1e6", ""])
def test_a_number_config_is_what_java_parses_not_what_python_cuts(value):
    """Kafka 3.8.0 ``ConfigDef.parseType`` (INT, LONG): a String is trimmed and read by
    ``Integer.parseInt``/``Long.parseLong``, which refuse ``_`` separators; another type than an
    integer is refused (``Expected value to be a 32-bit integer``).  Before: Python's ``int`` took
    ``1_000_000``, and cut ``1000000.5`` (or ``True``) to a whole number without a word."""
    with pytest.raises(ConfigError, match=r"expected an integer for segment\.bytes"):
        KafkaConfig.from_mapping({"segment.bytes": value})


def test_a_number_config_takes_what_java_takes():
    for value in (" 1000000 ", "+1000000", 1_000_000, np.int64(1_000_000)):
        assert KafkaConfig.from_mapping({"segment.bytes": value}).segment_bytes == 1_000_000


def test_a_negative_dynamic_retention_time_is_unlimited_as_the_broker_reads_it(tmp_path, capsys):
    """KafkaConfig.logRetentionTimeMillis (Kafka 3.8.0): log.retention.ms, else .minutes, else .hours, turned
    into milliseconds, and any negative result is -1 (keep forever).  log.retention.hours=-1 is how
    operators say "forever"; segstore multiplied it to -3600000, which retention.ms refuses, and warned that
    the metadata log's config was not applied."""
    logs = _kraft_dir(tmp_path)
    _fill(logs, ["plain"])
    write_metadata_log(logs, [topic("plain", "AAAAAAAAAAAAAAAAAAAAMw"),
                              config("", "log.retention.ms", "1000", resource_type=4),
                              config("1", "log.retention.hours", "-1", resource_type=4)])
    (logs / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=1\n")
    code, out, err = _run(capsys, "retention", str(logs), "--now-ms", str(T0 + 10**9), "--json", "--dry-run")
    assert code == 0 and _results(out)["plain-0"]["deleted_segments"] == []   # node 1: forever
    assert "not applied" not in err
    with segstore.open(logs) as store:
        assert store.config_notes("plain") == []


def test_a_command_line_config_equal_to_the_files_is_no_override(tmp_path, capsys):
    """``--config cleanup.policy=compact`` (as docs/cli.md's compact example gives it) over a log dir with
    ``__consumer_offsets`` said "--config cleanup.policy=compact overrides cleanup.policy=compact of the
    topic"; the same value is no override and says nothing, a different one still does."""
    logs = _kraft_dir(tmp_path)
    _fill(logs, ["__consumer_offsets"])
    code, _, err = _run(capsys, "compact", str(logs), "--config", "cleanup.policy=compact", "--dry-run")
    assert code == 0 and "overrides" not in err
    code, _, err = _run(capsys, "retention", str(logs), "--topic", "orders", "--config", "retention.ms=1000",
                        "--dry-run")
    assert code == 0 and "overrides" not in err
    code, _, err = _run(capsys, "retention", str(logs), "--topic", "orders", "--config", "retention.ms=2000",
                        "--dry-run")
    assert code == 0
    assert "orders: --config retention.ms=2000 overrides retention.ms=1000 of the metadata log" in err


def test_a_partition_compact_leaves_alone_says_dry_run_as_the_others(tmp_path, capsys):
    """``compact --dry-run --json``: a partition left alone (a delete-policy topic, the metadata log) had no
    ``dry_run`` field, unlike every other result (and retention's left-alone ones), and a dry run that left
    every partition alone printed ``compact: nothing to clean``, not ``compact (dry run): ...``."""
    logs = _kraft_dir(tmp_path)
    for dry in (True, False):
        code, out, _ = _run(capsys, "compact", str(logs), "--json", *(["--dry-run"] if dry else []))
        assert code == 0
        assert {name: r["dry_run"] for name, r in _results(out).items()} == {
            "__cluster_metadata-0": dry, "orders-0": dry, "table-0": dry}
    code, out, _ = _run(capsys, "compact", str(logs / "orders-0"), "--dry-run")
    assert code == 0 and out.endswith("compact (dry run): nothing to clean in 1 partition\n"), out


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts(tmp_path, capsys):
    """Kafka 3.8.0 takes ``cleanup.policy=`` (``ConfigDef.parseType``: an empty LIST; ``ValidList`` checks
    each of no entries) and ``LogConfig`` then has neither ``delete`` nor ``compact``: retention runs
    only the log-start pass, the cleaner leaves the log, DeleteRecords is a policy violation.  segstore
    refused the value, fell back to the default ``delete`` and deleted by ``retention.ms`` what the broker
    keeps forever."""
    logs = _kraft_dir(tmp_path)
    write_metadata_log(logs, [
        topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]), config("orders", "retention.ms", "1000"),
        config("orders", "cleanup.policy", ""),
        topic("table", TABLE_ID), partition(TABLE_ID, 0, [1]), config("table", "cleanup.policy", "compact"),
    ])
    before = _bases(logs / "orders-0")
    code, out, err = _run(capsys, "retention", str(logs), "--now-ms", str(T0 + 10**9), "--json")
    assert code == 0 and "not applied" not in err
    assert _results(out)["orders-0"]["deleted_segments"] == [] and _bases(logs / "orders-0") == before
    code, out, _ = _run(capsys, "compact", str(logs), "--topic", "orders", "--json", "--dry-run")
    assert code == 0 and "does not compact" in _results(out)["orders-0"]["skipped"]
    code, _, err = _run(capsys, "delete-records", str(logs), "--topic", "orders", "--before", "1")
    assert code == 2 and "expected cleanup.policy with delete" in err
    # the command line takes it as the broker's kafka-configs does
    code, out, _ = _run(capsys, "retention", str(logs / "orders-0"), "--config", "cleanup.policy=",
                        "--config", "retention.bytes=0", "--json", "--dry-run")
    assert code == 0 and _results(out)["orders-0"]["deleted_segments"] == []


@pytest.mark.parametrize("size", ["4", "8", " 11 "])
def test_a_metadata_logs_segment_index_size_below_an_entry_refuses_appends_as_the_broker_cannot(
        tmp_path, capsys, size):
    """Kafka 3.8.0 ``LogConfig`` takes ``segment.index.bytes`` from 4 (``atLeast(4)``); the broker then
    creates no index of the topic: ``AbstractIndex``'s constructor throws ``IllegalArgumentException
    ("Invalid max index size")`` for a new ``.timeindex`` below one 12-byte entry (``LogLoader.load``'s
    ``resizeIndexes`` of a new log's first segment, a roll's new segment, the cleaner's cleaned segment:
    ``LogCleaner`` marks the partition uncleanable).  segstore dropped the value ("not applied") and
    wrote the topic with the 10 MiB default.  Now appends to it (and its new partitions) are refused
    before anything is written, and compact leaves it alone; reads and other topics are unaffected."""
    logs = tmp_path / "logs"
    _fill(logs, ["orders"])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "cleanup.policy", "compact"),
                              config("orders", "segment.index.bytes", size)])
    before = sorted((p.name, p.stat().st_size) for p in (logs / "orders-0").iterdir())
    refused = rf"expected segment.index.bytes of at least 12 for orders, found {size.strip()} in the " \
              r"metadata log: .*Invalid max index size"
    with segstore.open(logs, format="kafka", mode="a") as store:
        for message in (Message("orders", b"v", key=b"k", partition=0, timestamp=T0),
                        Message("orders", b"v", key=b"k", partition=1, timestamp=T0)):
            with pytest.raises(ConfigError, match=refused):
                store.append(message)
        with pytest.raises(ConfigError, match=refused):   # one refused topic: nothing of the call written
            store.append_batch([{"topic": "other", "partition": 0, "value": b"v", "timestamp": T0},
                                {"topic": "orders", "partition": 0, "value": b"v", "timestamp": T0}])
        assert not (logs / "other-0").exists() and not (logs / "orders-1").exists()
        part = store.partition_of("orders", 0)
        with pytest.raises(ConfigError, match=refused):
            part.append_encoded(b"")
        assert len(list(store.read("orders", 0, 0))) == 6
        store.append(Message("other", b"v", partition=0, timestamp=T0))
    assert sorted((p.name, p.stat().st_size) for p in (logs / "orders-0").iterdir()) == before
    code, out, err = _run(capsys, "compact", str(logs), "--json")
    assert code == 0 and "Invalid max index size" in _results(out)["orders-0"]["skipped"]
    assert "orders: segment.index.bytes=" in err and "appends to the topic are refused" in err
    assert sorted((p.name, p.stat().st_size) for p in (logs / "orders-0").iterdir()) == before
    # one entry of each index: taken
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "segment.index.bytes", "12")])
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append(Message("orders", b"v", key=b"k", partition=0, timestamp=T0))
        assert store.partition_of("orders", 0).config.segment_index_bytes == 12


def test_a_topic_whose_index_size_is_below_an_entry_is_left_as_it_is_by_writable_opens_and_recover(
        tmp_path, capsys):
    """Kafka 3.8.0 ``LogLoader.load`` resizes the active segment's indexes to ``segment.index.bytes``
    (``LogSegment.resizeIndexes``) and ``LogSegment.recover`` resets them to it (``AbstractIndex.reset``:
    ``resize(maxIndexSize)``), which for 4..11 bytes cannot hold the entries the time index holds
    (``mmap.position`` past the new limit, then a full index): the broker loads no such partition.
    Before: segstore's writable open grew the active indexes to the 10 MiB default while open (trimmed at
    close; a crash left them so) and recover rebuilt a crash-left partition at that size.  Now a writable
    open and recover leave its files as they are, recover and verify saying why."""
    logs = tmp_path / "logs"
    _fill(logs, ["orders"])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "segment.index.bytes", "8")])
    part = logs / "orders-0"

    def files() -> list[tuple[str, bytes]]:
        return sorted((p.name, p.read_bytes()) for p in part.iterdir())

    before = files()
    with segstore.open(logs, format="kafka", mode="a") as store:
        assert files() == before        # before: the active .index and .timeindex at 10 MiB
        store.append(Message("other", b"v", partition=0, timestamp=T0))
    assert files() == before
    active = sorted(part.glob("*.log"))[-1]
    with active.open("ab") as log:       # a torn batch at the end, as a crash leaves one
        log.write(b"\x00" * 7)
    before = files()
    code, out, err = _run(capsys, "recover", str(logs))
    assert files() == before             # before: the torn bytes cut and the indexes rebuilt
    assert "orders-0: left as it is, not recovered: expected segment.index.bytes of at least 12" in out
    assert code == 1 and "00000000000000000005.log:131: " in err     # the torn batch stays, named
    code, out, _ = _run(capsys, "verify", str(logs))
    assert code == 1 and "recover leaves this partition as it is" in out


def test_retention_leaves_a_topic_whose_index_size_is_below_an_entry_as_the_cleaner_does(tmp_path, capsys):
    """Kafka 3.8.0 loads no partition of such a topic (``LogLoader.load``'s ``resizeIndexes``), and a
    deletion of every segment rolls first (``UnifiedLog.deleteSegments``), whose new ``.timeindex``
    ``AbstractIndex`` refuses ("Invalid max index size").  Before: ``retention`` deleted all six
    segments and rolled a new one at offset 6; now it skips the topic, saying why, as ``compact``."""
    logs = tmp_path / "logs"
    _fill(logs, ["orders"])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "segment.index.bytes", "8")])
    before = sorted(p.name for p in (logs / "orders-0").iterdir())
    code, out, _ = _run(capsys, "retention", str(logs), "--config", "retention.bytes=0", "--json")
    result = _results(out)["orders-0"]
    assert code == 0 and result["deleted_segments"] == [] and "Invalid max index size" in result["skipped"]
    assert sorted(p.name for p in (logs / "orders-0").iterdir()) == before


def test_delete_records_leaves_a_topic_whose_index_size_is_below_an_entry_as_retention_does(tmp_path, capsys):
    """As retention: Kafka 3.8.0 loads no partition of such a topic, so none answers DeleteRecords.
    Before: ``delete-records --before 3`` deleted its first three segments."""
    logs = tmp_path / "logs"
    _fill(logs, ["orders"])
    write_metadata_log(logs, [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, [1]),
                              config("orders", "segment.index.bytes", "8")])
    before = sorted(p.name for p in (logs / "orders-0").iterdir())
    code, out, _ = _run(capsys, "delete-records", str(logs), "--topic", "orders", "--before", "3", "--json")
    result = _results(out)["orders-0"]
    assert code == 0 and result["deleted_segments"] == [] and "Invalid max index size" in result["skipped"]
    assert result["log_start_offset"] == 0
    assert sorted(p.name for p in (logs / "orders-0").iterdir()) == before


@pytest.mark.parametrize(("text", "read"), [
    (f"version: 00000000000\ntopic_id: {ORDERS_ID}\n", True),        # Integer.parseInt: leading zeros
    (f"version: \u0660\ntopic_id: {ORDERS_ID}\n", True),              # ARABIC-INDIC DIGIT ZERO
    (f"version: 0\rtopic_id: {ORDERS_ID}", True),                     # readLine ends a line at \r
    (f"version: 0\ntopic_id: {ORDERS_ID}  \n", True),                 # trailing empty fields dropped
    (f"version: \U0001d7ce\ntopic_id: {ORDERS_ID}\n", False),         # surrogates: NumberFormatException
    (f" version: 0\ntopic_id: {ORDERS_ID}\n", False),                 # Pattern.split: three fields
    (f"version:\u00a00\ntopic_id: {ORDERS_ID}\n", False),             # NO-BREAK SPACE is no \s: one field
    (f"version: 0\n topic_id: {ORDERS_ID}\n", False),
])
def test_partition_metadata_is_read_as_kafka_reads_it(tmp_path, capsys, text, read):
    """3.8.0 storage ``PartitionMetadataReadBuffer.read``: each line (``BufferedReader.readLine``) split
    by ``WHITE_SPACES_PATTERN`` (``\\s+``, untrimmed), the version ``Integer.parseInt`` of the second
    field; what it throws on is a malformed file, which ``verify`` names."""
    logs = _kraft_dir(tmp_path)
    (logs / "orders-0" / "partition.metadata").write_text(text, encoding="utf-8")
    code, out, _ = _run(capsys, "verify", str(logs))
    assert (code, "orders-0/partition.metadata:" in out) == ((0, False) if read else (1, True)), out
