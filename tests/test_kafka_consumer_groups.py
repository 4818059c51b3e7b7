"""Consumer groups offline: ``segstore consumers`` on a Kafka log dir gives what ``kafka-consumer-groups
--describe`` would give once the group coordinator has loaded ``__consumer_offsets``.

The expected values are derived by hand from Kafka's rules (apache/kafka 3.8.0):
- core/src/main/scala/kafka/coordinator/group/GroupMetadataManager.scala ``doLoadGroupsAndOffsets``: the
  log read from its start; per key the latest record wins and a tombstone deletes it; offset commits in
  transactional batches wait for their producer's COMMIT marker, which applies each unless the key holds a
  commit of a later batch (``CommitRecordMetadataAndOffset.olderThan``), and are dropped by ABORT;
  ``readGroupMessageValue``: a group with members loads Stable, without Empty; groups with offsets only
  load Empty without a protocol type;
- core/.../coordinator/group/GroupMetadata.scala ``removeExpiredOffsets``: an Empty group's offsets expire
  ``offsets.retention.minutes`` after it became Empty (``currentStateTimestamp``), a Stable consumer
  group's only for topics no member subscribes to, a simple group's after the commit, and a v1 commit's
  own ``expireTimestamp`` wins; ``cleanupGroupMetadata``: an Empty group without offsets is Dead;
- group-coordinator/.../consumer/ConsumerGroup.java ``maybeUpdateGroupState`` and
  ConsumerGroupMember.java ``isReconciledTo`` (KIP-848 groups);
- tools/.../consumer/group/ConsumerGroupCommand.java ``collectGroupsOffsets``, ``printOffsets``,
  ``getLag``: members with partitions, most partitions first, partitions by number, then the committed
  partitions no member holds with ``-`` member columns; LAG = LOG-END-OFFSET - CURRENT-OFFSET.
The records are written from the group-coordinator message schemas (OffsetCommitKey/Value.json,
GroupMetadataKey/Value.json, ConsumerGroup*Key/Value.json) by ``kafka_messages``.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest
from conftest import FIXTURES, cli_run, copy_writable
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_messages import group_metadata, offset_commit, versioned
from segstore_kafka import internal_topics as it

import segstore
from segstore.cli import main
from segstore.errors import ConfigError
from segstore.records import Message

DAY = 24 * 3600 * 1000
T0 = 1_700_000_000_000
NOW = T0 + 10 * DAY
ORDERS_ID = "AAAAAAAAAAAAAAAAAAAAEQ"
OFFSETS = "__consumer_offsets"


def _records(store, pairs, *, timestamp: int = T0, partition: int = 0) -> None:
    """One batch of ``__consumer_offsets`` records (key, value) in one partition."""
    store.append_batch([Message(OFFSETS, value, key=key, partition=partition, timestamp=timestamp)
                        for key, value in pairs])


def _kip848(record_type: int, key: dict, value: dict | None) -> tuple[bytes, bytes | None]:
    key_schema, value_schema = it.CONSUMER_GROUP_RECORDS[record_type]
    encoded = None if value is None else versioned(value_schema, 0, value)
    return versioned(key_schema, record_type, key), encoded


def build(log_dir: Path) -> None:
    """The log dir the tests read: ``orders`` (partitions of 10 and 7 records), ``payments`` (4), and the
    group commits the module docstring's rules turn into the expected rows below."""
    with segstore.open(log_dir, format="kafka", mode="a", **{"segment.bytes": 700}) as store:
        store.append_batch([Message("orders", b"o", partition=0, timestamp=T0) for _ in range(10)])
        store.append_batch([Message("orders", b"o", partition=1, timestamp=T0) for _ in range(7)])
        store.append_batch([Message("payments", b"p", timestamp=T0) for _ in range(4)])
        members = [
            {"memberId": "m1", "clientId": "c1", "clientHost": "/10.0.0.1", "topics": ["orders"],
             "assigned": {"orders": [1, 0]}},
            {"memberId": "m2", "clientId": "c2", "clientHost": "/10.0.0.2", "topics": ["payments"],
             "assigned": {"payments": [0]}},
        ]
        # live: a Stable consumer group; the latest commit wins; an unsubscribed topic's old commit expires
        _records(store, [group_metadata("live", generation=3, members=members, state_ms=T0),
                         offset_commit("live", "orders", 0, 3, commit_ms=T0),
                         offset_commit("live", "old", 0, 4, commit_ms=T0 + 3 * DAY)])
        _records(store, [offset_commit("live", "orders", 0, 5, commit_ms=T0 + 9 * DAY),
                         offset_commit("live", "orders", 1, 7, commit_ms=T0 + 9 * DAY),
                         offset_commit("live", "payments", 0, 2, commit_ms=T0 + DAY)])
        # gone: deleted (DeleteGroups writes an offset tombstone and a group tombstone)
        _records(store, [group_metadata("gone", generation=1), offset_commit("gone", "orders", 0, 1)])
        _records(store, [offset_commit("gone", "orders", 0, None), group_metadata("gone", tombstone=True)])
        # idle: Empty since T0 + 3 days, so its recent commit expires with it; recent: Empty since T0 + 5 days
        _records(store, [group_metadata("idle", generation=2, state_ms=T0 + 3 * DAY),
                         offset_commit("idle", "orders", 0, 2, commit_ms=T0 + 9 * DAY),
                         group_metadata("recent", generation=4, state_ms=T0 + 5 * DAY),
                         offset_commit("recent", "orders", 1, 6, commit_ms=T0 + DAY)])
        # simple: offsets only; legacy: v1 commits whose own expire timestamps decide
        _records(store, [offset_commit("simple", "payments", 0, 1, commit_ms=T0 + 8 * DAY),
                         offset_commit("legacy", "orders", 0, 1, commit_ms=T0 + 9 * DAY,
                                       expire_ms=T0 + 9 * DAY),
                         offset_commit("legacy2", "orders", 0, 1, commit_ms=T0, expire_ms=T0 + 11 * DAY)])
        # txn: TxnOffsetCommit batches
        t7 = store.transaction(7)
        t7.append_batch([Message(OFFSETS, v, key=k, timestamp=T0 + 9 * DAY) for k, v in (
            offset_commit("txn", "orders", 0, 9, commit_ms=T0 + 9 * DAY),
            offset_commit("txn", "payments", 0, 3, commit_ms=T0 + 9 * DAY))])
        _records(store, [offset_commit("txn", "orders", 0, 8, commit_ms=T0 + 9 * DAY)])  # a later batch
        t7.commit(timestamp=T0 + 9 * DAY)
        t8 = store.transaction(8)
        t8.append_batch([Message(OFFSETS, v, key=k, timestamp=T0) for k, v in (
            offset_commit("txn", "orders", 1, 4, commit_ms=T0 + 9 * DAY),)])
        t8.abort(timestamp=T0)
        t9 = store.transaction(9)       # never ended: pending, not visible
        t9.append_batch([Message(OFFSETS, v, key=k, timestamp=T0) for k, v in (
            offset_commit("txn", "orders", 1, 6, commit_ms=T0 + 9 * DAY),)])
        # kip848: a KIP-848 consumer group, Stable: its member reconciled to the target assignment epoch
        _records(store, [
            _kip848(3, {"groupId": "kip848"}, {"epoch": 5}),
            _kip848(4, {"groupId": "kip848"}, {"topics": [{"topicId": ORDERS_ID, "topicName": "orders",
                                                           "numPartitions": 2, "partitionMetadata": []}]}),
            _kip848(5, {"groupId": "kip848", "memberId": "ma"}, {
                "instanceId": None, "rackId": None, "clientId": "ca", "clientHost": "/10.0.0.9",
                "subscribedTopicNames": ["orders"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 1000,
                "serverAssignor": "uniform"}),
            _kip848(6, {"groupId": "kip848"}, {"assignmentEpoch": 5}),
            _kip848(8, {"groupId": "kip848", "memberId": "ma"}, {
                "memberEpoch": 5, "previousMemberEpoch": 4, "state": 0,
                "assignedPartitions": [{"topicId": ORDERS_ID, "partitions": [1]}],
                "partitionsPendingRevocation": []}),
            offset_commit("kip848", "orders", 1, 6, commit_ms=T0 + 9 * DAY),
        ])
        # records this reader cannot read: a newer record type, a newer value version
        _records(store, [(struct.pack(">hh", 17, 0), b"\x00\x00"),
                         (offset_commit("future", "orders", 0, 1)[0], struct.pack(">h", 9) + b"\x00" * 8)])


def _expected() -> list[list[str]]:
    """GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID STATE, by group."""
    return [
        ["kip848", "orders", "1", "6", "7", "1", "ma", "/10.0.0.9", "ca", "Stable"],
        ["legacy2", "orders", "0", "1", "10", "9", "-", "-", "-", "Empty"],
        ["live", "orders", "0", "5", "10", "5", "m1", "/10.0.0.1", "c1", "Stable"],
        ["live", "orders", "1", "7", "7", "0", "m1", "/10.0.0.1", "c1", "Stable"],
        ["live", "payments", "0", "2", "4", "2", "m2", "/10.0.0.2", "c2", "Stable"],
        ["recent", "orders", "1", "6", "7", "1", "-", "-", "-", "Empty"],
        ["simple", "payments", "0", "1", "4", "3", "-", "-", "-", "Empty"],
        ["txn", "orders", "0", "8", "10", "2", "-", "-", "-", "Empty"],
        ["txn", "payments", "0", "3", "4", "1", "-", "-", "-", "Empty"],
    ]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line and not line.startswith("GROUP ")]


def test_consumers_describe_the_groups_as_the_coordinator_loads_them(tmp_path, capsys):
    logs = tmp_path / "logs"
    build(logs)
    code, out, err = _run(capsys, "consumers", logs, "--now-ms", NOW)
    assert code == 0, err
    assert _table(out) == _expected()
    # the header as kafka-consumer-groups prints it, one table per group
    assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                           "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID", "STATE"]
    # what could not be read is counted and named, and what is still pending said
    assert "unknown record type 17 records (not read): 1" in err
    assert "OffsetCommitValue v9 (this reader knows v0-4): 1" in err
    assert "transactional offset commits still pending (not shown): 1" in err
    assert "Consumer group 'simple' has no active members." in err


def test_json_rows_carry_the_commit_and_group_fields(tmp_path, capsys):
    logs = tmp_path / "logs"
    build(logs)
    code, out, _ = _run(capsys, "consumers", logs, "--now-ms", NOW, "--group", "live", "--json")
    assert code == 0
    rows = json.loads(out)
    fields = ("topic", "partition", "committed_offset", "log_end_offset", "lag", "consumer_id")
    assert [tuple(r[f] for f in fields) for r in rows] == [
        ("orders", 0, 5, 10, 5, "m1"), ("orders", 1, 7, 7, 0, "m1"), ("payments", 0, 2, 4, 2, "m2")]
    assert rows[0]["extras"]["generation"] == 3 and rows[0]["extras"]["protocol"] == "range"
    assert rows[0]["extras"]["commit_timestamp"] == T0 + 9 * DAY
    assert _run(capsys, "consumers", logs, "--group", "gone")[0] == 1     # deleted: no such group
    # the library answers the same
    with segstore.open(logs) as store:
        found = store.consumer_groups("live", now_ms=NOW)
    assert [r.to_dict() for r in found.rows] == rows


def test_expiry_follows_the_clock_and_the_retention(tmp_path, capsys):
    logs = tmp_path / "logs"
    build(logs)
    # the files' own time (the newest record, T0 + 9 days): idle's and live's old offsets are 6 days old
    code, out, _ = _run(capsys, "consumers", logs)
    assert code == 0 and ["idle", "orders", "0", "2", "10", "8", "-", "-", "-", "Empty"] in _table(out)
    assert ["live", "old", "0", "4", "-", "-", "-", "-", "-", "Stable"] in _table(out)
    # a retention of 30 days at NOW keeps them all
    code, out, _ = _run(capsys, "consumers", logs, "--now-ms", NOW, "--offsets-retention-minutes",
                        30 * 24 * 60)
    groups = {row[0] for row in _table(out)}
    assert groups >= {"idle", "legacy2"} and "legacy" not in groups


def test_a_compacted_offsets_topic_describes_the_same(tmp_path, capsys):
    """The log cleaner keeps each key's latest record (and tombstones until their horizon): a compacted
    ``__consumer_offsets`` loads to the same groups."""
    logs = tmp_path / "logs"
    build(logs)
    part = logs / f"{OFFSETS}-0"
    assert len(list(part.glob("*.log"))) > 3
    before = _run(capsys, "consumers", logs, "--now-ms", NOW, "--json")[1]
    records = sum(1 for _ in segstore.open(part).scan())
    code, out, _ = _run(capsys, "compact", part, "--now-ms", NOW, "--json")
    assert code == 0 and json.loads(out)["records_kept"] < records
    assert _run(capsys, "verify", part)[0] == 0
    assert _run(capsys, "consumers", logs, "--now-ms", NOW, "--json")[1] == before


def test_the_real_kraft_dirs_groups(capsys):
    """Three classic groups a Confluent 7.5.1 node committed for: each Empty (its last GroupMetadata has no
    members), each committed offset as its last OffsetCommit; log end offsets where this node holds the
    partition (delivery-create-request-0, payment-create-response-0: 0), else unknown."""
    code, out, err = _run(capsys, "consumers", FIXTURES / "real" / "kraft-confluent-7.5.1")
    assert code == 0, err
    assert _table(out) == [
        ["delivery-group", "delivery-create-request", "0", "0", "0", "0", "-", "-", "-", "Empty"],
        ["order-group", "delivery-create-response", "0", "0", "-", "-", "-", "-", "-", "Empty"],
        ["order-group", "payment-create-response", "0", "0", "0", "0", "-", "-", "-", "Empty"],
        ["order-group", "payment-failed", "0", "0", "-", "-", "-", "-", "-", "Empty"],
        ["payment-group", "payment-create-request", "0", "1", "-", "-", "-", "-", "-", "Empty"],
    ]


def test_the_tools_own_flags_describe_all_groups_and_delete_offsets(capsys):
    """kafka-consumer-groups' spellings were usage errors ("unrecognized arguments"): ``--describe`` and
    ``--all-groups`` give the default view, ``--delete-offsets --topic T`` is ``--delete --topic T``.
    Each contradiction with another flag is a usage error."""
    real = FIXTURES / "real" / "kraft-confluent-7.5.1"
    plain = _run(capsys, "consumers", real)
    assert plain[0] == 0
    assert _run(capsys, "consumers", real, "--describe", "--all-groups") == plain
    one = _run(capsys, "consumers", real, "--group", "order-group")
    assert _run(capsys, "consumers", real, "--describe", "--group", "order-group") == one
    code, out, err = _run(capsys, "consumers", real, "--group", "order-group", "--delete-offsets",
                          "--topic", "payment-failed")
    assert (code, out, err) == _run(capsys, "consumers", real, "--group", "order-group", "--delete",
                                    "--topic", "payment-failed")
    assert code == 0 and _table(out) == [["order-group", "payment-failed", "0", "0"]]
    assert "nothing written" in err
    for argv, message in ((["--all-groups", "--group", "g"], "--all-groups and --group"),
                          (["--describe", "--list"], "--describe is the view of groups"),
                          (["--group", "order-group", "--delete-offsets"], "expected --topic, found none")):
        code, _, err = _run(capsys, "consumers", real, *argv)
        assert code == 2 and message in err, (argv, err)


def test_transactions_from_the_transaction_log(tmp_path, capsys):
    """TransactionStateManager.loadTransactionMetadata: the latest value per transactional id, tombstones
    delete; an Empty transaction's partitions are not kept (TransactionLog.readTxnRecordValue)."""
    from kafka_messages import transaction

    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("__transaction_state", v, key=k, timestamp=T0) for k, v in (
            transaction("app-1", producer_id=1000, state="Ongoing", partitions={"orders": [0, 1]},
                        start_ms=T0, update_ms=T0),
            transaction("app-1", producer_id=1000, epoch=1, state="CompleteCommit",
                        partitions={"orders": [0]}, start_ms=T0, update_ms=T0 + 5),
            transaction("app-2", producer_id=1001, state="Empty", partitions={"orders": [0]}),
            transaction("app-3", producer_id=1002, state="Ongoing"),
            transaction("app-3", producer_id=1002, tombstone=True),
        )])
    code, out, _ = _run(capsys, "transactions", logs, "--json")
    assert code == 0
    assert json.loads(out) == [
        {"transactional_id": "app-1", "producer_id": 1000, "producer_epoch": 1, "state": "CompleteCommit",
         "timeout_ms": 60000, "start_timestamp": T0, "last_update_timestamp": T0 + 5,
         "partitions": ["orders-0"], "coordinator_partition": 0},
        {"transactional_id": "app-2", "producer_id": 1001, "producer_epoch": 0, "state": "Empty",
         "timeout_ms": 60000, "start_timestamp": 0, "last_update_timestamp": 0, "partitions": [],
         "coordinator_partition": 0},
    ]
    code, out, _ = _run(capsys, "transactions", logs)
    assert out.splitlines()[1].split() == ["app-1", "0", "1000", "1", "CompleteCommit", "60000", str(T0),
                                           str(T0 + 5), "orders-0"]
    assert _run(capsys, "transactions", logs, "--transactional-id", "app-3")[0] == 1


def test_transactions_without_the_transaction_log_say_so(capsys):
    """The txn fixture's log directory holds transactional batches but no __transaction_state: the header
    alone (exit 0) read as "no transaction"; stderr now says the coordinator's state is not here, and
    where the open transactions are listed from (--producers, --find-hanging)."""
    logs = FIXTURES / "kafka" / "txn"
    for argv in ((), ("--json",)):
        code, out, err = _run(capsys, "transactions", logs, *argv)
        assert code == 0 and out.count("\n") == 1        # the header, or []
        assert err == (f"segstore transactions: {logs}: no __transaction_state partition here: the "
                       "transaction coordinator's state is not in this log directory (transactions "
                       "--producers lists each partition's producers and open transactions; --find-hanging "
                       "those open too long)\n")
    assert _run(capsys, "transactions", logs, "--json")[1] == "[]\n"


def test_the_consumers_of_a_copy_are_the_consumers_of_the_original(tmp_path, capsys):
    """Reading never writes: the real dir's answer does not depend on where it lies."""
    copy = copy_writable(FIXTURES / "real" / "kraft-confluent-7.5.1", tmp_path / "logs")
    assert _run(capsys, "consumers", copy, "--json")[1] == \
        _run(capsys, "consumers", FIXTURES / "real" / "kraft-confluent-7.5.1", "--json")[1]


# -- whatever the bytes, a count and a name, never a crash ----------------------------------------------


def _batch(rows):
    import pyarrow as pa
    from segstore_kafka.coordinator import COLUMNS

    n = len(rows)
    columns = {"offset": list(range(n)), "key": [k for k, _, _ in rows], "value": [v for _, v, _ in rows],
               "timestamp": [T0] * n, "baseOffset": list(range(n)), "isControl": [c for _, _, c in rows],
               "isTransactional": [c for _, _, c in rows], "producerId": [1] * n}
    return pa.RecordBatch.from_pydict(columns, schema=COLUMNS)


_keys = st.one_of(st.binary(max_size=40), st.tuples(st.integers(-2, 20), st.binary(max_size=40)).map(
    lambda kv: struct.pack(">h", kv[0]) + kv[1]), st.none())


#: Whole records of each kind, which the draws below cut short, mix and mark transactional.
_VALID = [offset_commit("g", "t", 0, 5, commit_ms=T0), offset_commit("g", "t", 0, None),
          offset_commit("g", "t", 1, 2, expire_ms=T0 + 1),
          group_metadata("g", members=[{"memberId": "m", "clientId": "c", "clientHost": "h", "topics": ["t"],
                                        "assigned": {"t": [0]}}]),
          group_metadata("g", tombstone=True),
          _kip848(3, {"groupId": "k"}, {"epoch": 2}),
          _kip848(5, {"groupId": "k", "memberId": "m"}, {
              "instanceId": None, "rackId": None, "clientId": "c", "clientHost": "h",
              "subscribedTopicNames": ["t"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 1,
              "serverAssignor": None}),
          _kip848(8, {"groupId": "k", "memberId": "m"}, {
              "memberEpoch": 1, "previousMemberEpoch": 0, "state": 1,
              "assignedPartitions": [{"topicId": ORDERS_ID, "partitions": [0]}],
              "partitionsPendingRevocation": []})]
_records_drawn = st.one_of(
    st.tuples(_keys, st.one_of(st.none(), st.binary(max_size=60))),
    st.sampled_from(_VALID),
    st.tuples(st.sampled_from(_VALID), st.integers(0, 40)).map(
        lambda rc: (rc[0][0], None if rc[0][1] is None else rc[0][1][:rc[1]])))


@settings(max_examples=200)
@given(rows=st.lists(st.tuples(_records_drawn, st.booleans()).map(lambda r: (*r[0], r[1])), max_size=12))
def test_any_records_load_or_are_named(rows):
    from segstore_kafka import groups
    from segstore_kafka.coordinator import CoordinatorLog

    log = CoordinatorLog(groups.is_offset_commit)
    log.add(_batch(rows))
    found = groups.consumer_groups({0: log}, log_end=lambda topic, partition: None, now_ms=T0)
    assert all(isinstance(note, str) for note in found.notes)
    assert all(row.group is not None for row in found.rows)


def test_state_and_members_views(tmp_path, capsys):
    """``--state``: a line a group (ConsumerGroupCommand.printStates: strategy, state, member count; the
    coordinator as its partition); ``--members``: a line a member, with its partition count."""
    logs = tmp_path / "logs"
    build(logs)
    code, out, _ = _run(capsys, "consumers", logs, "--state", "--now-ms", NOW)
    assert code == 0
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert out.split()[:6] == ["GROUP", "COORDINATOR-PARTITION", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS",
                               "kip848"]
    assert lines["live"] == ["0", "range", "Stable", "2"]
    assert lines["kip848"] == ["0", "uniform", "Stable", "1"]
    assert lines["simple"] == ["0", "-", "Empty", "0"]
    code, out, err = _run(capsys, "consumers", logs, "--members", "--json", "--now-ms", NOW)
    member = {"group_instance_id": None}
    assert code == 0 and json.loads(out) == [
        {**member, "group": "kip848", "consumer_id": "ma", "host": "/10.0.0.9", "client_id": "ca",
         "partitions": 1, "assignment": [["orders", 1]]},
        {**member, "group": "live", "consumer_id": "m1", "host": "/10.0.0.1", "client_id": "c1",
         "partitions": 2, "assignment": [["orders", 0], ["orders", 1]]},
        {**member, "group": "live", "consumer_id": "m2", "host": "/10.0.0.2", "client_id": "c2",
         "partitions": 1, "assignment": [["payments", 0]]}]
    assert "Consumer group 'simple' has no active members." in err
    code, out, err = _run(capsys, "consumers", logs, "--state", "--members")
    assert (code, out) == (2, "") and "one view at a time" in err
    code, out, err = _run(capsys, "consumers", logs, "--verbose")
    assert (code, out) == (2, "") and "--verbose goes with --members" in err


def test_list_names_the_groups_and_filters_by_state_and_type(tmp_path, capsys):
    """``--list`` (``ConsumerGroupCommand.listGroups``): a group id a line; ``--state``/``--type`` add their
    columns (GROUP padded to its longest id + 10, the others to 20, as ``printGroupInfo``) and with values
    keep the groups in those states / of those types, case-insensitive; a value Kafka does not know is
    refused (``consumerGroupStatesFromString``)."""
    logs = tmp_path / "logs"
    build(logs)
    code, out, _ = _run(capsys, "consumers", logs, "--list", "--now-ms", NOW)
    assert (code, out.split()) == (0, ["kip848", "legacy2", "live", "recent", "simple", "txn"])
    code, out, _ = _run(capsys, "consumers", logs, "--list", "--state", "stable", "--type", "--now-ms", NOW)
    assert code == 0 and out.splitlines() == [
        f"{'GROUP':<25} {'TYPE':<20} STATE", f"{'kip848':<25} {'Consumer':<20} Stable",
        f"{'live':<25} {'Classic':<20} Stable"]
    code, out, _ = _run(capsys, "consumers", logs, "--list", "--type", "Classic", "--state", "Empty,STABLE",
                        "--json", "--now-ms", NOW)
    assert json.loads(out) == [{"group": g, "type": "Classic", "state": state} for g, state in (
        ("legacy2", "Empty"), ("live", "Stable"), ("recent", "Empty"), ("simple", "Empty"), ("txn", "Empty"))]
    # the store path right after an option whose value may be left out is the path, not the value
    _, by_value, _ = _run(capsys, "consumers", logs, "--list", "--state", "--type", "--now-ms", NOW)
    assert _run(capsys, "consumers", "--now-ms", NOW, "--list", "--state", "--type", logs)[1] == by_value
    assert _run(capsys, "consumers", "--now-ms", NOW, "--state", logs)[1] == \
        _run(capsys, "consumers", logs, "--state", "--now-ms", NOW)[1]
    code, out, err = _run(capsys, "consumers", "--list")
    assert (code, out) == (2, "") and "required: path" in err
    for argv, words in ((["--list", "--state", "Rebalancing"], "expected a group state among Assigning, "
                                                                 "CompletingRebalance, Dead, Empty"),
                        (["--list", "--type", "share"], "expected a group type among Classic, Consumer"),
                        (["--list", "--members"], "one view at a time"),
                        (["--type"], "filter --list"), (["--state", "Empty"], "filter --list"),
                        (["--list", "--group", "live", "--reset-offsets", "--to-latest"], "not with")):
        code, out, err = _run(capsys, "consumers", logs, *argv)
        assert (code, out) == (2, "") and words in err, argv


def test_topic_narrows_the_groups_to_those_consuming_it(tmp_path, capsys):
    """``--topic T`` (``T:P,...``): the groups with a committed offset or an assigned partition there, and of
    their rows only that topic's; ``--list``/``--members`` narrow alike; none: exit 1."""
    logs = tmp_path / "logs"
    build(logs)
    code, out, _ = _run(capsys, "consumers", logs, "--topic", "payments", "--json", "--now-ms", NOW)
    rows = json.loads(out)
    assert code == 0 and {row["topic"] for row in rows} == {"payments"}
    assert sorted({row["group"] for row in rows}) == ["live", "simple", "txn"]
    _, everything, _ = _run(capsys, "consumers", logs, "--json", "--now-ms", NOW)
    assert rows == [row for row in json.loads(everything) if row["topic"] == "payments"]
    code, out, _ = _run(capsys, "consumers", logs, "--topic", "orders:1", "--list", "--now-ms", NOW)
    assert (code, out.split()) == (0, ["kip848", "live", "recent"])
    code, out, _ = _run(capsys, "consumers", logs, "--topic", "payments", "--members", "--json",
                        "--now-ms", NOW)
    assert {m["group"] for m in json.loads(out)} == {"live"}
    code, out, err = _run(capsys, "consumers", logs, "--topic", "nothing", "--now-ms", NOW)
    assert (code, out) == (1, "") and "expected a consumer group on topic 'nothing'" in err


def test_members_without_partitions_and_static_members(tmp_path, capsys):
    """``--members`` lists every member the coordinator stored, as ``collectGroupsMembers`` does (not only
    those holding partitions, which is all ``--describe``'s rows name); GROUP-INSTANCE-ID shows only where
    a member is static; ``--verbose`` adds ASSIGNMENT as Kafka 3.5's ``printMembers`` prints it."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("orders", b"o", partition=p, timestamp=T0) for p in range(12)])
        members = [
            {"memberId": "busy", "clientId": "c1", "clientHost": "/10.0.0.1", "topics": ["orders", "more"],
             "assigned": {"orders": [10, 2, 0], "more": [1]}, "groupInstanceId": "pod-1"},
            {"memberId": "idle", "clientId": "c2", "clientHost": "/10.0.0.2", "topics": ["orders"],
             "assigned": {}},
        ]
        _records(store, [group_metadata("g", generation=2, members=members, state_ms=T0)])
    code, out, err = _run(capsys, "consumers", logs, "--members", "--verbose", "--now-ms", NOW)
    assert code == 0 and err == ""
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
        ["g", "busy", "pod-1", "/10.0.0.1", "c1", "4", "more(1),", "orders(0,2,10)"],
        ["g", "idle", "/10.0.0.2", "c2", "0", "-"]]
    code, out, _ = _run(capsys, "consumers", logs, "--members", "--now-ms", NOW)
    assert out.split()[:5] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID"]
    assert "ASSIGNMENT" not in out
    code, out, _ = _run(capsys, "consumers", logs, "--state", "--now-ms", NOW)
    assert out.splitlines()[1].split() == ["g", "0", "range", "Stable", "2"]
    # --describe names only the member holding partitions, as collectGroupsOffsets does
    code, out, _ = _run(capsys, "consumers", logs, "--json", "--now-ms", NOW)
    assert {row["consumer_id"] for row in json.loads(out)} == {"busy"}


def test_a_v1_tombstone_removes_a_v0_commit_of_the_same_partition(tmp_path, capsys):
    """3.8 ``GroupMetadataManager.readMessageKey`` reads OffsetCommitKey v0 and v1 as the same
    ``GroupTopicPartition``: a v1 tombstone (or commit) replaces a v0 commit of it, as a loaded group
    coordinator's ``loadedOffsets.remove`` does; the raw key bytes differ only in the version."""
    from segstore_kafka import offsetcommit

    partition = offsetcommit.coordinator_partition("g", 50)
    key, value = offset_commit("g", "t", 0, 4, commit_ms=2000)
    v0 = b"\x00\x00" + key[2:]
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v", partition=0, timestamp=1000 + i) for i in range(10)])
        store.append_batch([Message(OFFSETS, value, key=v0, partition=partition, timestamp=2000)])
    code, out, _ = _run(capsys, "consumers", logs, "--json", "--now-ms", 3000)
    assert code == 0 and [(r["group"], r["committed_offset"]) for r in json.loads(out)] == [("g", 4)]
    with segstore.open(logs, format="kafka", mode="a") as store:
        tombstone = offset_commit("g", "t", 0, None)[0]
        store.append_batch([Message(OFFSETS, None, key=tombstone, partition=partition, timestamp=2001)])
    code, out, _ = _run(capsys, "consumers", logs, "--now-ms", 3000)
    assert (code, out) == (0, "")


def test_offsets_partitions_holding_no_group_say_so(tmp_path, capsys):
    """A log dir whose ``__consumer_offsets`` partitions hold no live group (an empty partition, as the
    real KRaft dir's 47 of 50 are; a group deleted: DeleteGroups' offset and group tombstones) printed
    nothing at all, exit 0, where a log dir without the topic says why on stderr: it says so too (the
    tool's empty answer is the same, the reason a line of stderr)."""
    logs = tmp_path / "logs"
    (logs / f"{OFFSETS}-0").mkdir(parents=True)
    for name in (f"{0:020d}.log", f"{0:020d}.index", f"{0:020d}.timeindex"):
        (logs / f"{OFFSETS}-0" / name).write_bytes(b"")
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v", partition=0, timestamp=T0)])
    said = f"no consumer group in the 1 {OFFSETS} partition here: none committed offsets, or each was deleted"
    for argv in ([], ["--json"], ["--list"]):
        code, out, err = _run(capsys, "consumers", logs, *argv)
        assert (code, out.strip()) == (0, "[]" if argv == ["--json"] else "") and said in err
    with segstore.open(logs, format="kafka", mode="a") as store:
        _records(store, [group_metadata("gone", generation=1), offset_commit("gone", "t", 0, 1)])
        _records(store, [offset_commit("gone", "t", 0, None), group_metadata("gone", tombstone=True)])
    code, out, err = _run(capsys, "consumers", logs)
    assert (code, out) == (0, "") and said in err
    code, out, err = _run(capsys, "consumers", logs, "--group", "gone")     # a group asked for: as before
    assert code == 1 and said not in err


# -- records the coordinator cannot read, damaged files, bad arguments -----------------------------------


def _one_batch_each(store, pairs) -> list[str]:
    """Each (key, value) of ``__consumer_offsets`` in a batch of its own; the ``file:position`` of each."""
    where = []
    for key, value in pairs:
        (done,) = store.append_batch([Message(OFFSETS, value, key=key, timestamp=T0)])
        where.append(f"{store.partition_of(OFFSETS, 0).segments[-1].path}:{done.position}")
    return where


def test_a_null_where_kafka_allows_none_is_a_record_not_read(tmp_path, capsys):
    """The generated readers throw ``non-nullable field X was serialized as null`` (Kafka 3.8.0
    MessageDataGenerator.generateVariableLengthReader): an OffsetCommitKey with a null group or topic, a
    member with a null clientId (GroupMetadataValue.json), a consumer subscription with a null topic list
    (GroupMetadata.computeSubscribedTopics catches only SchemaException, so the group does not load) do not
    load, nor does one whose topic name is cut short (ByteBufferAccessor.readArray's RuntimeException); one
    that ends inside a number loads (ConsumerProtocol.deserializeSubscription's SchemaException: topics
    unknown). Each is named with the batch holding it; the rest loads."""
    logs = tmp_path / "logs"
    member = {"memberId": "m", "groupInstanceId": None, "clientId": "c", "clientHost": "/h",
              "rebalanceTimeout": 1, "sessionTimeout": 1, "subscription": None,
              "assignment": base64.b64encode(b"\x00\x00" + b"\x00" * 8).decode()}
    no_topics = base64.b64encode(struct.pack(">hii", 0, -1, -1)).decode()
    short = base64.b64encode(struct.pack(">hh", 0, 1)).decode()       # ends inside the topic count
    cut = base64.b64encode(struct.pack(">hih", 0, 1, 9) + b"ord").decode()     # a topic name cut short

    def group(name: str, **changed):
        value = {"protocolType": "consumer", "generation": 1, "protocol": "range", "leader": "m",
                 "currentStateTimestamp": T0, "members": [{**member, "subscription": no_topics, **changed}]}
        return (versioned(it.GROUP_METADATA_KEY, 2, {"group": name}),
                versioned(it.GROUP_METADATA_VALUE, 3, value))

    _, value = offset_commit("x", "orders", 0, 5, commit_ms=T0)
    null_group = struct.pack(">hh", 1, -1) + struct.pack(">h", 6) + b"orders" + struct.pack(">i", 0)
    null_topic = versioned(it.OFFSET_COMMIT_KEY, 1, {"group": "g", "topic": "x", "partition": 0})
    null_topic = null_topic[:5] + struct.pack(">h", -1) + null_topic[-4:]
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("orders", b"o", timestamp=T0) for _ in range(10)])
        where = _one_batch_each(store, [
            (null_group, value), (null_topic, value), group("nulls", clientId=None), group("no-topics"),
            group("short", subscription=short), group("cut", subscription=cut),
            offset_commit("g", "orders", 0, 3, commit_ms=T0)])
    for view in ((), ("--json",), ("--list",), ("--state",), ("--members",)):
        code, out, err = _run(capsys, "consumers", logs, "--now-ms", T0, *view)
        assert code == 0, err
        assert "Traceback" not in err
    code, out, err = _run(capsys, "consumers", logs, "--now-ms", T0)
    assert _table(out) == [["g", "orders", "0", "3", "10", "7", "-", "-", "-", "Empty"]]
    code, out, _ = _run(capsys, "consumers", logs, "--now-ms", T0, "--list")
    assert out.split() == ["g", "short"]
    assert (f"OffsetCommitKey v1 records that do not read (expected a value of the non-nullable field group, "
            f"found null (-1)): 1, the first in the batch at {where[0]}") in err
    assert f"non-nullable field topic, found null (-1)): 1, the first in the batch at {where[1]}" in err
    assert f"non-nullable field clientId, found null (-1)): 1, the first in the batch at {where[2]}" in err
    assert ("GroupMetadataValue records with a consumer subscription that does not read (expected a value of "
            "the non-nullable field Topics, found null (-1)): 1, the first in the batch at "
            f"{where[3]}") in err
    assert ("(expected 9 bytes of Topics element, found 3 left): 1, the first in the batch at "
            f"{where[5]}") in err


def test_bytes_after_a_known_version_load_and_a_record_not_read_says_what_failed(tmp_path, capsys):
    """GroupMetadataManager.readOffsetMessageValue and CoordinatorRecordSerde.readMessage (Kafka 3.8.0) read
    a value's fields and never its remainder: an OffsetCommitValue v3 with bytes after it loads. A value
    that ends early is named by what is missing, not as a version this reader does not know."""
    logs = tmp_path / "logs"
    key, value = offset_commit("g", "orders", 0, 7, commit_ms=T0)
    cut_key, cut = offset_commit("g", "orders", 1, 4, commit_ms=T0)
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("orders", b"o", partition=p, timestamp=T0)
                            for p in (0, 1) for _ in range(10)])
        where = _one_batch_each(store, [(key, value + b"\x00\x00"), (cut_key, cut[:6])])
    code, out, err = _run(capsys, "consumers", logs, "--now-ms", T0)
    assert code == 0 and _table(out) == [["g", "orders", "0", "7", "10", "3", "-", "-", "-", "Empty"]]
    assert ("OffsetCommitValue v3 records that do not read (expected 8 bytes of offset, found 4 left): 1, "
            f"the first in the batch at {where[1]}") in err
    assert "this reader knows" not in err


def _damaged(tmp_path) -> tuple[Path, Path, bytes]:
    """Group g committed 1..5 in five batches of ``__consumer_offsets-0``; the third batch's CRC is broken,
    so the log reads up to offset 2 only."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("orders", b"o", timestamp=T0) for _ in range(10)])
        for i in range(5):
            _records(store, [offset_commit("g", "orders", 0, i + 1, commit_ms=T0 + i)], timestamp=T0 + i)
    log = logs / f"{OFFSETS}-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[2 * len(data) // 5 + 70] ^= 0xFF       # a record byte of the third batch: its CRC no longer holds
    log.write_bytes(bytes(data))
    return logs, log, bytes(data)


def test_a_damaged_offsets_log_shows_what_it_read_and_exits_1(tmp_path, capsys):
    """What was read is shown (as ``dump`` shows the records before damage), the damage named (file and
    byte) on stderr and the exit status 1 (docs/cli.md: 1 for damage met); a reset or a deletion is not
    written from a partial load."""
    logs, log, data = _damaged(tmp_path)
    damage = f"{log}:{2 * len(data) // 5 + 17}: expected CRC-32C"
    code, out, err = _run(capsys, "consumers", logs, "--group", "g")
    assert code == 1 and _table(out)[0][:4] == ["g", "orders", "0", "2"] and damage in err
    for view in (("--json",), ("--list",), ("--state",), ("--members",)):
        code, out, err = _run(capsys, "consumers", logs, *view)
        assert code == 1 and out and damage in err, view
    code, out, err = _run(capsys, "consumers", logs, "--group", "g", "--reset-offsets", "--to-current",
                          "--export")
    assert (code, out) == (1, "orders,0,2\n") and damage in err
    code, out, err = _run(capsys, "dump", logs, "--group", "g", "--topic", "orders", "--json")
    assert code == 1 and json.loads(out.splitlines()[0])["offset"] == 2 and damage in err
    for change in (("--reset-offsets", "--to-latest"), ("--delete",)):
        code, out, err = _run(capsys, "consumers", logs, "--group", "g", *change, "--execute")
        assert (code, out) == (1, "") and damage in err and "nothing written" in err
    assert log.read_bytes() == data and len(list(log.parent.glob("*.log"))) == 1


@pytest.mark.parametrize("minutes", ["0", "-5", str(2**31)])
def test_offsets_retention_minutes_outside_what_the_broker_takes_is_refused(tmp_path, minutes):
    """Kafka 3.8.0 KafkaConfig defines GroupCoordinatorConfig.OFFSETS_RETENTION_MINUTES_CONFIG as ``INT``,
    ``atLeast(1)``: 0 minutes (which expired every offset and had a reset tombstone them all), a negative
    or a number past an INT is a bad argument, exit 2, before anything is written."""
    logs = tmp_path / "logs"
    build(logs)
    before = sorted((p.name, p.stat().st_size) for p in logs.rglob("*.log"))
    assert cli_run("consumers", logs, "--offsets-retention-minutes", minutes)[0] == 2
    code, out, err = cli_run("consumers", logs, "--group", "idle", "--reset-offsets", "--to-earliest",
                             "--execute", "--offsets-retention-minutes", minutes)
    assert (code, out) == (2, "") and "offsets.retention.minutes" in err
    assert sorted((p.name, p.stat().st_size) for p in logs.rglob("*.log")) == before
    with segstore.open(logs, mode="a") as store:
        for call in (lambda ms: store.consumer_groups(offsets_retention_ms=ms),
                     lambda ms: store.commit_offsets("idle", {("orders", 0): 0}, offsets_retention_ms=ms)):
            with pytest.raises(ConfigError, match=r"offsets\.retention\.minutes"):
                call(int(minutes) * 60_000)
    assert sorted((p.name, p.stat().st_size) for p in logs.rglob("*.log")) == before


def test_the_empty_group_id_is_listed_as_it_is(tmp_path, capsys):
    """Kafka commits offsets of the group id "" (GroupCoordinator.isValidGroupId, 3.8.0: OffsetCommit asks
    only that it is not null); ``--list --state``/``--type`` print it as it is, "Unknown" being a state's."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("orders", b"o", timestamp=T0) for _ in range(10)])
        _records(store, [offset_commit("", "orders", 0, 4, commit_ms=T0),
                         offset_commit("real", "orders", 0, 5, commit_ms=T0)])
    code, out, _ = _run(capsys, "consumers", logs, "--list", "--state", "--type")
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TYPE", "STATE"], ["Classic", "Empty"], ["real", "Classic", "Empty"]]
    assert out.splitlines()[1].startswith(" ") and "Unknown" not in out


def test_the_offsets_log_is_loaded_once_and_each_high_watermark_read_once(tmp_path, capsys, monkeypatch):
    """A group that is not there is answered from the one load (the miss names the groups there), and the
    log end of a partition many groups committed is read once, not once per row."""
    from segstore_kafka import store as kafka_store

    logs = tmp_path / "logs"
    build(logs)
    loads, ends = [], []
    load, end = kafka_store.KafkaStore._coordinator_logs, kafka_store.high_watermark
    monkeypatch.setattr(kafka_store.KafkaStore, "_coordinator_logs",
                        lambda self, *a, **k: loads.append(a[0]) or load(self, *a, **k))
    monkeypatch.setattr(kafka_store, "high_watermark",
                        lambda part: ends.append((part.topic, part.partition)) or end(part))
    code, _, err = _run(capsys, "consumers", logs, "--group", "nobody", "--now-ms", NOW)
    assert code == 1 and loads == [OFFSETS]
    assert "found groups kip848, legacy2, live, recent, simple, txn" in err
    _run(capsys, "consumers", logs, "--now-ms", NOW)
    assert sorted(ends) == [("orders", 0), ("orders", 1), ("payments", 0)]     # once each, of many rows


def test_the_tools_describe_offsets_is_the_default_view(capsys):
    """3.8 ``ConsumerGroupCommand.describeGroups``: ``--describe --offsets`` is the offsets view, the one
    without a sub-action; ``ConsumerGroupCommandOptions.checkArgs`` takes at most one of ``--members``,
    ``--offsets`` and ``--state``.  ``--offsets`` was an unrecognized argument (exit 2)."""
    real = FIXTURES / "real" / "kraft-confluent-7.5.1"
    one = _run(capsys, "consumers", real, "--group", "order-group")
    assert one[0] == 0
    assert _run(capsys, "consumers", real, "--describe", "--offsets", "--group", "order-group") == one
    for argv in (["--offsets", "--members"], ["--describe", "--offsets", "--state"], ["--offsets", "--list"],
                 ["--offsets", "--group", "order-group", "--reset-offsets", "--to-earliest"]):
        code, out, err = _run(capsys, "consumers", real, *argv)
        assert (code, out) == (2, "") and "--offsets is the default view" in err, argv


def test_groups_of_other_protocol_types_are_not_consumer_groups(tmp_path, capsys):
    """3.8 ``KafkaAdminClient.listConsumerGroups`` keeps only the listed groups of protocol type ``consumer``
    or none, and ``DescribeConsumerGroupsHandler`` fails any other ("GroupId G is not a consumer group"):
    the Stable groups a Kafka Connect cluster (``connect``) or Schema Registry (``sr``) leave are not in
    ``kafka-consumer-groups --list`` nor ``--describe --all-groups``.  They are named on stderr; a group
    named is still answered (the broker's DeleteGroups and OffsetDelete take any group)."""
    logs = tmp_path / "logs"
    worker = [{"memberId": "w1", "clientId": "connect-1", "clientHost": "/10.0.0.5", "topics": [],
               "assigned": {}}]
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([Message("orders", b"o", timestamp=T0) for _ in range(4)])
        _records(store, [group_metadata("connect-cluster", generation=7, protocol_type="connect",
                                        protocol="sessioned", members=worker, state_ms=T0),
                         group_metadata("schema-registry", generation=2, protocol_type="sr", protocol="v0",
                                        members=worker, state_ms=T0),
                         offset_commit("connect-cluster", "orders", 0, 1, commit_ms=T0),
                         offset_commit("app", "orders", 0, 3, commit_ms=T0)])
    code, out, err = _run(capsys, "consumers", logs, "--list")
    assert (code, out) == (0, "app\n")
    assert "left out: connect-cluster (connect), schema-registry (sr)" in err
    code, out, _ = _run(capsys, "consumers", logs, "--state")
    assert code == 0 and [row[0] for row in _table(out)] == ["app"]
    with segstore.open(logs) as store:
        assert store.consumer_groups().groups() == ["app"]
        found = store.consumer_groups("connect-cluster")
    assert [(r.group, r.committed_offset, r.state) for r in found.rows] == [("connect-cluster", 1, "Stable")]
    assert found.notes == ["group 'connect-cluster' is of protocol type 'connect', not a consumer group: "
                           "kafka-consumer-groups neither lists nor describes it"]
    assert found.all_groups == ["app"]
