"""Resetting a Kafka consumer group's offsets offline (``segstore consumers --reset-offsets --execute`` on
a log dir, ``KafkaStore.commit_offsets``): what ``kafka-consumer-groups --reset-offsets --execute`` has the
group coordinator write, written into the group's partition of ``__consumer_offsets``.

The bytes are the broker's (apache/kafka 3.8.0, core/src/main/scala/kafka/coordinator/group/
GroupMetadataManager.scala): ``offsetCommitKey`` (v1) and ``offsetCommitValue`` (v3 without an expire
timestamp, ``MetadataVersion.offsetCommitValueVersion``), one batch a commit request with base sequence 0
(``generateOffsetRecords``); ``partitionFor`` = ``Utils.abs(groupId.hashCode) % partitions``;
``cleanupGroupMetadata`` tombstones an expired group's offsets and, once it is Dead after a generation past
0, its group key, in one batch (``MemoryRecords.withRecords``: base sequence -1).  They are checked
against the commits a real broker (Confluent 7.5.1 = Apache Kafka 3.5) left in
compat_fixtures/real/kraft-confluent-7.5.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, copy_writable
from conftest import cli_run as run
from hypothesis import given
from hypothesis import strategies as st
from kafka_messages import group_metadata, offset_commit
from segstore_kafka import batch as codec
from segstore_kafka import offsetcommit

import segstore
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    InvalidMessageError,
    NotFoundError,
    OffsetOutOfRangeError,
    UnsupportedOperationError,
)
from segstore.records import Message

REAL = FIXTURES / "real" / "kraft-confluent-7.5.1"
OFFSETS = "__consumer_offsets"
#: order-group's partition (26), where the real broker wrote its GroupMetadata at offset 0 and its commits at
#: 1-3; the group became Empty at GROUP_EMPTY_MS (offset 6's currentStateTimestamp)
ORDER_PARTITION = 26
GROUP_EMPTY_MS = 1737560186412
DAY = 24 * 3600 * 1000


def _batches(partition: int) -> list[tuple[codec.RecordBatch, bytes]]:
    path = REAL / f"{OFFSETS}-{partition}" / "00000000000000000000.log"
    data = path.read_bytes()
    return [(b, data[b.position:b.position + b.size]) for b in codec.iter_batches(data)]


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_a_commit_batch_is_the_brokers_byte_for_byte(offset):
    """The real broker's commits of order-group (one request each) rebuilt from their fields."""
    batch, raw = _batches(ORDER_PARTITION)[offset]
    (record,) = batch.records()
    topic = record.key[2 + 2 + len("order-group") + 2:-4].decode()        # after version, group, length
    value_commit_ms = int.from_bytes(record.value[-8:], "big")
    rebuilt = codec.encode_batch(
        [(offsetcommit.commit_key("order-group", topic, 0), offsetcommit.commit_value(0, value_commit_ms),
          record.timestamp)],
        base_offset=batch.base_offset, partition_leader_epoch=batch.partition_leader_epoch, producer_id=-1,
        producer_epoch=-1, base_sequence=0)
    assert rebuilt == raw


def test_groups_live_in_the_partition_their_id_hashes_to():
    """Java ``String.hashCode`` (UTF-16 code units, int32) through ``Utils.abs``, modulo 50: where the real
    broker put its three groups, and Java's own values."""
    for group, partition in (("delivery-group", 36), ("order-group", 26), ("payment-group", 14)):
        assert offsetcommit.coordinator_partition(group, 50) == partition
        assert any(b.records() for b, _ in _batches(partition))
    assert offsetcommit.java_string_hash("") == 0
    assert offsetcommit.java_string_hash("hello") == 99162322
    assert offsetcommit.java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00    # a surrogate pair
    assert offsetcommit.java_string_hash("polygenelubricants") == -(1 << 31)
    assert offsetcommit.coordinator_partition("polygenelubricants", 50) == 0        # Utils.abs(MIN_VALUE)
    with pytest.raises(InvalidMessageError, match="of at most 32767 UTF-8 bytes, found 32768"):
        offsetcommit.commit_key("g" * 32768, "t", 0)
    with pytest.raises(InvalidMessageError, match="expected a topic of Unicode text"):
        offsetcommit.commit_key("g", "t\udc80", 0)
    with pytest.raises(InvalidMessageError, match=r"expected a partition in \[-2147483648, 2147483647\]"):
        offsetcommit.commit_key("g", "t", 1 << 31)
    with pytest.raises(InvalidMessageError, match="expected an offset in"):
        offsetcommit.commit_value(1 << 63, 0)


@given(st.text(max_size=40), st.text(max_size=40), st.integers(0, (1 << 31) - 1),
       st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 63) - 1), st.text(max_size=20))
def test_commit_records_equal_the_schema_encoder(group, topic, partition, offset, commit_ms, metadata):
    """The fixed layouts against the test suite's schema-driven encoder of OffsetCommitKey/Value.json."""
    key, value = offset_commit(group, topic, partition, offset, commit_ms=commit_ms, metadata=metadata)
    assert offsetcommit.commit_key(group, topic, partition) == key
    assert offsetcommit.commit_value(offset, commit_ms, metadata=metadata) == value


def _groups(path: Path, now_ms: int) -> dict[tuple[str, str, int], int | None]:
    with segstore.open(path) as store:
        return {(r.group, r.topic, r.partition): r.committed_offset
                for r in store.consumer_groups(now_ms=now_ms).rows}


def _tail(path: Path, partition: int, start: int) -> list[tuple[codec.RecordBatch, list[codec.Record]]]:
    with segstore.open(path) as store:
        part = store.partition_of(OFFSETS, partition)
        return [(b, b.records()) for b in part.batches(start)]


def test_a_reset_inside_retention_appends_one_commit_batch(tmp_path):
    """order-group, a day after it became Empty: its commits are live, so only the commit batch is written,
    at the log end, in the leader epoch the partition's log ends with; the other groups are untouched."""
    logs = copy_writable(REAL, tmp_path / "logs")
    now = GROUP_EMPTY_MS + DAY
    before = _groups(logs, now)
    code, out, err = run("consumers", logs, "--group", "order-group", "--reset-offsets", "--to-latest",
                         "--topic", "payment-create-response", "--now-ms", now, "--execute")
    assert (code, err) == (0, "")
    assert out.split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET",
                           "order-group", "payment-create-response", "0", "0"]
    (batch, records), = _tail(logs, ORDER_PARTITION, 7)
    assert (batch.base_offset, batch.base_sequence, batch.producer_id,
            batch.partition_leader_epoch) == (7, 0, -1, 52)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (*offset_commit("order-group", "payment-create-response", 0, 0, commit_ms=now), now)]
    assert _groups(logs, now) == before      # the same offset (0 = the log end), now committed again
    code, out, _ = run("verify", logs)
    assert code == 0


def test_a_reset_of_an_expired_group_tombstones_it_first(tmp_path):
    """Nearly two years after order-group became Empty the broker's offset cleanup would remove it, the new
    commit with it: the reset writes that cleanup's tombstones first (each commit key, then the group key:
    generation 4), then the commit, which a simple group then holds."""
    logs = copy_writable(REAL, tmp_path / "logs")
    now = GROUP_EMPTY_MS + 700 * DAY
    code, out, err = run("consumers", logs, "--group", "order-group", "--reset-offsets", "--to-offset", "5",
                         "--topic", "payment-create-response", "--now-ms", now, "--execute")
    assert code == 0 and "4 records of group 'order-group' expired" in err and "tombstoned first" in err
    assert out.split()[-1] == "0"           # 5 clamped to the partition's end, 0
    (tombs, dead), (commit, kept) = _tail(logs, ORDER_PARTITION, 7)
    assert tombs.base_sequence == -1 and all(r.value is None for r in dead)
    assert [r.key for r in dead] == [
        offset_commit("order-group", t, 0, None)[0]
        for t in ("payment-failed", "delivery-create-response", "payment-create-response")
    ] + [group_metadata("order-group", tombstone=True)[0]]
    assert commit.base_sequence == 0 and [r.key for r in kept] == [
        offset_commit("order-group", "payment-create-response", 0, None)[0]]
    with segstore.open(logs) as store:
        (row,) = store.consumer_groups("order-group", now_ms=now).rows
    assert (row.topic, row.committed_offset, row.state, row.extras["coordinator_partition"]) == (
        "payment-create-response", 0, "Empty", ORDER_PARTITION)


def _log_dir(path: Path, *, members: bool) -> Path:
    """A log dir without KRaft metadata: topic t (partitions 0, 1 of 10 and 4 records) and group g's
    commits (t-0 at 3, t-1 at 1) in its partition of 50; g Stable with a member when ``members``."""
    partition = offsetcommit.coordinator_partition("g", 50)
    member = [{"memberId": "m1", "clientId": "c1", "clientHost": "/10.0.0.1", "topics": ["t"],
               "assigned": {"t": [0, 1]}}]
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"v", partition=0, timestamp=1000 + i) for i in range(10)])
        store.append_batch([Message("t", b"v", partition=1, timestamp=1000 + i) for i in range(4)])
        records = (group_metadata("g", generation=2, members=member if members else [], state_ms=2000),
                   offset_commit("g", "t", 0, 3, commit_ms=2000),
                   offset_commit("g", "t", 1, 1, commit_ms=2000))
        store.append_batch([Message(OFFSETS, value, key=key, partition=partition, timestamp=2000)
                            for key, value in records])
    return path


@pytest.mark.parametrize("target, expected", [
    (["--to-earliest"], {0: 0, 1: 0}),
    (["--to-latest"], {0: 10, 1: 4}),
    (["--to-datetime", "1005"], {0: 5, 1: 4}),        # t-1 holds nothing that new: its end
    (["--to-offset", "7"], {0: 7, 1: 4}),             # clamped to t-1's end
    (["--shift-by", "-2"], {0: 1, 1: 0}),             # 1 - 2 clamped to the start
    (["--shift-by", "20"], {0: 10, 1: 4}),
    (["--to-current"], {0: 3, 1: 1}),
])
def test_every_target_is_planned_then_committed(tmp_path, target, expected):
    logs = _log_dir(tmp_path / "logs", members=False)
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", *target, "--json")
    assert code == 0 and "nothing written" in err
    assert json.loads(out) == [{"group": "g", "topic": "t", "partition": p, "new_offset": o}
                               for p, o in expected.items()]
    assert _groups(logs, 3000) == {("g", "t", 0): 3, ("g", "t", 1): 1}
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", *target, "--execute",
                         "--now-ms", 3000)
    assert code == 0 and "nothing written" not in err
    assert _groups(logs, 3000) == {("g", "t", p): o for p, o in expected.items()}


def test_a_plan_file_commits_its_offsets_and_by_duration_reads_the_clock(tmp_path):
    """``--from-file`` (``ConsumerGroupCommand.parseResetPlan``) commits the file's offsets, clamped;
    ``--by-duration`` without ``--now-ms`` counts back from the clock, as the tool's ``Instant.now()``."""
    logs = _log_dir(tmp_path / "logs", members=False)
    (tmp_path / "plan.csv").write_text("t,1,2\nt,0,99\n")
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--from-file",
                         tmp_path / "plan.csv", "--execute", "--now-ms", 3000)
    assert (code, err) == (0, "")
    assert _groups(logs, 3000) == {("g", "t", 0): 10, ("g", "t", 1): 2}
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--by-duration", "P36500D",
                         "--json")    # a century back: before every record, so each partition's start
    assert code == 0 and [row["new_offset"] for row in json.loads(out)] == [0, 0]


def test_a_group_with_members_is_reset_with_a_warning(tmp_path):
    """kafka-consumer-groups refuses a group that is not inactive; offline the log's last state is all there
    is (a broker stopped under its consumers leaves Stable), so the reset goes on and says what must hold."""
    logs = _log_dir(tmp_path / "logs", members=True)
    code, _, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest", "--execute",
                       "--now-ms", 3000)
    assert code == 0 and "group 'g' was Stable, with members" in err and "must be stopped" in err
    assert _groups(logs, 3000) == {("g", "t", 0): 0, ("g", "t", 1): 0}


def test_the_library_checks_everything_before_writing(tmp_path):
    logs = _log_dir(tmp_path / "logs", members=False)
    partition = offsetcommit.coordinator_partition("g", 50)
    with segstore.open(logs, mode="a") as store:
        end = store.offset_range(OFFSETS, partition)[1]
        with pytest.raises(OffsetOutOfRangeError, match=r"expected an offset \[0, 4\] for t-1, found 5"):
            store.commit_offsets("g", {("t", 0): 2, ("t", 1): 5})
        with pytest.raises(OffsetOutOfRangeError, match="at least 0 for elsewhere-3, found -1"):
            store.commit_offsets("g", {("elsewhere", 3): -1})
        assert store.offset_range(OFFSETS, partition)[1] == end
        # a group with no records here: its hash names the partition, with Kafka's default count
        other = next(g for g in "hijk" if offsetcommit.coordinator_partition(g, 50) != partition)
        with pytest.raises(NotFoundError, match=f"expected {OFFSETS}-\\d+ .group '{other}''s partition. in "
                                                "this log directory, found none"):
            store.commit_offsets(other, {("t", 0): 1})
        hashed = offsetcommit.coordinator_partition
        same = next(g for g in map("g{}".format, range(999)) if hashed(g, 50) == partition)
        notes = store.commit_offsets(same, {("t", 0): 1, ("other-broker", 0): 12}, now_ms=5000)
        assert len(notes) == 1 and "Kafka's default of 50 partitions" in notes[0]
    with segstore.open(logs) as store:
        rows = store.consumer_groups(same, now_ms=5000).rows
    assert {(r.topic, r.partition, r.committed_offset) for r in rows} == {("t", 0, 1),
                                                                          ("other-broker", 0, 12)}


def test_a_replica_the_cluster_may_not_elect_is_named(tmp_path):
    """The real dir's node 1 is __consumer_offsets-26's only in-sync replica: no note.  Were node 2 in sync
    too, whichever leads when the cluster comes back keeps its own log: the note says so."""
    logs = copy_writable(REAL, tmp_path / "logs")
    with segstore.open(logs, mode="a") as store:
        assert store.commit_offsets("order-group", {}) == []
        store.metadata.topic(OFFSETS).partitions[ORDER_PARTITION].isr = [1, 2]
        (note,) = store.commit_offsets("order-group", {}, now_ms=GROUP_EMPTY_MS)
    assert "in sync [1, 2]: what is written here lasts only if node 1 leads it" in note


def test_a_partition_another_broker_holds_is_named(tmp_path):
    logs = copy_writable(REAL, tmp_path / "logs")
    code, out, err = run("consumers", logs, "--group", "order-group", "--reset-offsets", "--to-earliest")
    assert (code, out) == (1, "")
    assert "expected delivery-create-response-0 here to plan the new offset of group 'order-group'" in err
    code, out, err = run("consumers", logs, "--group", "payment-group", "--reset-offsets", "--shift-by", "1",
                         "--topic", "payment-create-request")
    assert (code, out) == (1, "") and "expected payment-create-request-0 here" in err
    # with --topic already given, the first error's advice (--topic T resets one topic) went in a circle
    assert "--topic T resets one topic" not in err and "is in that broker's log dir" in err


def test_latest_is_the_high_watermark(tmp_path):
    """``--to-latest`` is the tool's ``latest`` offset (ListOffsets, read_uncommitted): the high watermark,
    below the log end where the broker stopped before its followers caught up."""
    logs = _log_dir(tmp_path / "logs", members=False)
    checkpoint = logs / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 10\n", "t 0 6\n"))
    code, out, _ = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-latest", "--json")
    assert code == 0 and [r["new_offset"] for r in json.loads(out)] == [6, 4]
    code, out, _ = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-offset", "9", "--json")
    assert [r["new_offset"] for r in json.loads(out)] == [6, 4]


def test_a_partition_that_does_not_read_whole_takes_no_commit(tmp_path):
    """Which records to tombstone, and the log end, would be guesses past a damaged batch: exit 1, the batch
    named, nothing written."""
    logs = copy_writable(REAL, tmp_path / "logs")
    log = logs / f"{OFFSETS}-{ORDER_PARTITION}" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[783 + 17] ^= 0xFF              # the CRC of the batch at offset 1 (position 783)
    log.write_bytes(bytes(data))
    code, out, err = run("consumers", logs, "--group", "order-group", "--reset-offsets", "--to-earliest",
                         "--topic", "payment-create-response", "--execute")
    assert (code, out) == (1, "")
    # the command names the damaged batch, and refuses to write offsets planned from a partial load
    assert f"{log}:800: expected CRC-32C" in err and "nothing written" in err
    # the library call refuses it too
    with segstore.open(logs, mode="a") as store, pytest.raises(CorruptDataError) as refused:
        store.commit_offsets("order-group", {("payment-create-response", 0): 0})
    assert str(refused.value).startswith(
        f"{log}:800: expected {OFFSETS}-{ORDER_PARTITION} (group 'order-group''s partition) to read")
    assert log.read_bytes() == bytes(data) and len(list(log.parent.glob("*.log"))) == 1


def test_delete_offsets_and_groups_as_the_coordinator_writes_them(tmp_path):
    """``--delete --topic T`` (OffsetDelete) tombstones the group's commit keys of T; ``--delete``
    (DeleteGroups) every commit key, then the group key of a classic group past generation 0
    (GroupMetadataManager.cleanupGroupMetadata: one batch, base sequence -1)."""
    logs = copy_writable(REAL, tmp_path / "logs")
    now = GROUP_EMPTY_MS + DAY
    code, out, err = run("consumers", logs, "--group", "order-group", "--delete", "--topic",
                         "payment-failed", "--now-ms", now, "--execute")
    assert (code, err) == (0, "") and out.split()[-4:] == ["order-group", "payment-failed", "0", "0"]
    assert {t for _, t, _ in _groups(logs, now)} == {"delivery-create-request", "delivery-create-response",
                                                     "payment-create-response", "payment-create-request"}
    (batch, records), = _tail(logs, ORDER_PARTITION, 7)
    assert batch.base_sequence == -1 and [(r.key, r.value) for r in records] == [
        offset_commit("order-group", "payment-failed", 0, None)]
    code, out, err = run("consumers", logs, "--group", "order-group", "--delete", "--now-ms", now,
                         "--execute")
    assert code == 0 and len(out.splitlines()) == 3
    (batch, records), = _tail(logs, ORDER_PARTITION, 8)
    left = ("delivery-create-response", "payment-create-response")
    assert [r.key for r in records] == [offset_commit("order-group", t, 0, None)[0] for t in left] + [
        group_metadata("order-group", tombstone=True)[0]]
    assert "order-group" not in {g for g, _, _ in _groups(logs, now)}
    code, out, err = run("consumers", logs, "--group", "order-group", "--delete")
    assert (code, out) == (1, "") and "expected consumer group 'order-group', found groups" in err


def test_a_kip848_group_is_deleted_topic_by_topic_only(tmp_path):
    from test_kafka_consumer_groups import build

    logs = tmp_path / "logs"
    build(logs)
    with segstore.open(logs, mode="a") as store:
        with pytest.raises(UnsupportedOperationError, match=r"of the consumer protocol \(KIP-848\)"):
            store.delete_offsets("kip848")
        with pytest.raises(NotFoundError, match="expected offsets of consumer group 'kip848' of topic"):
            store.delete_offsets("kip848", "payments")
        assert store.delete_offsets("kip848", "orders", now_ms=GROUP_EMPTY_MS) == []  # found where it is
    with segstore.open(logs) as store:
        assert not [r for r in store.consumer_groups("kip848").rows if r.committed_offset is not None]


def test_dump_group_prints_what_the_group_has_not_consumed(tmp_path):
    """``dump --group G``: each partition the group committed, from its committed offset to the high
    watermark (the lag ``consumers`` shows), in the dump's own lines."""
    logs = _log_dir(tmp_path / "logs", members=False)
    checkpoint = logs / "replication-offset-checkpoint"
    # records 8 and 9 past the high watermark: not given to consumers yet
    checkpoint.write_text(checkpoint.read_text().replace("t 0 10\n", "t 0 8\n"))
    code, out, _ = run("dump", logs, "--group", "g", "--json")
    assert code == 0
    assert [(r["partition"], r["offset"]) for r in map(json.loads, out.splitlines())] == [
        *((0, o) for o in range(3, 8)), *((1, o) for o in range(1, 4))]
    code, whole, _ = run("dump", logs, "--topic", "t", "--partition", "1", "--json")
    code, out, _ = run("dump", logs, "--group", "g", "--partition", "1", "--json")
    assert out.splitlines() == whole.splitlines()[1:]
    with segstore.open(logs, mode="a") as store:
        store.commit_offsets("g", {("t", 0): 8, ("t", 1): 4}, now_ms=3000)
    code, out, err = run("dump", logs, "--group", "g")
    assert (code, out) == (1, "") and "segstore dump: */*: group 'g' has consumed every message stored" in err
    code, out, err = run("dump", logs, "--group", "g", "--begin", "0")
    assert code == 2 and "--group and --begin/--end do not go together" in err


def test_to_current_keeps_the_committed_offset_and_to_datetime_stops_at_the_high_watermark(tmp_path):
    """3.8 ``ConsumerGroupCommand.prepareOffsetsToReset``: ``--to-current`` is the committed offset as it is
    (no ``checkOffsetsRange``), even below the log start; ``--to-datetime`` takes what ListOffsets answers,
    which is only below the high watermark (``Partition.fetchOffsetForTimestamp``), and falls back to the
    latest offset (``getLogTimestampOffsets``)."""
    logs = _log_dir(tmp_path / "logs", members=False)
    assert run("delete-records", logs, "--topic", "t", "--partition", "0", "--before", "5")[0] == 0
    checkpoint = logs / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 1 4\n", "t 1 2\n"))    # t-1: log end 4, HW 2
    code, out, _ = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-current", "--export",
                       "--now-ms", 3000)
    assert (code, out) == (0, "t,0,3\nt,1,1\n")                 # t-0's 3 is below its log start 5
    code, _, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-current", "--execute",
                       "--now-ms", 3000)
    assert code == 0, err                                        # nothing to commit again: nothing refused
    assert _groups(logs, 3000) == {("g", "t", 0): 3, ("g", "t", 1): 1}
    code, out, _ = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-datetime", "1003",
                       "--export", "--now-ms", 3000)
    assert (code, out) == (0, "t,0,5\nt,1,2\n")                 # t-1's record of 1003 is offset 3, past HW 2


def test_the_help_of_to_current_says_it_keeps_the_offset_unclamped():
    """``segstore consumers --help`` said ``--to-current`` gives each committed offset "clamped to its
    range"; it keeps it as it is (the test above), as the tool does and docs/cli.md says."""
    import argparse

    from segstore.cli import build_parser

    consumers = next(a for a in build_parser()._actions
                     if isinstance(a, argparse._SubParsersAction)).choices["consumers"]
    text = " ".join(next(a for a in consumers._actions if "--to-current" in a.option_strings).help.split())
    assert "not clamped" in text and "clamped to its range" not in text


def test_topic_resets_every_partition_of_the_topic_committed_or_not(tmp_path):
    """3.8 ``ConsumerGroupCommand.getPartitionsToReset``: ``--topic T`` takes T's partitions from
    ``describeTopics`` (``parseTopicPartitionsToReset``), every one, not only those the group committed:
    a replay of T from its start must not leave a partition at ``auto.offset.reset``, and a group new to T
    gets offsets in each.  Offline: every partition of T this log dir holds; one the directory numbers say
    is elsewhere (t-3 here, another broker's) is named on stderr.  ``--shift-by`` still moves only
    committed offsets, and names the partitions it leaves."""
    logs = tmp_path / "logs"
    partition = offsetcommit.coordinator_partition("g", 50)
    with segstore.open(logs, format="kafka", mode="a") as store:
        for p, n in ((0, 10), (1, 4), (2, 6), (4, 2)):
            store.append_batch([Message("t", b"v", partition=p, timestamp=1000 + i) for i in range(n)])
        key, value = offset_commit("g", "t", 0, 3, commit_ms=2000)
        store.append_batch([Message(OFFSETS, value, key=key, partition=partition, timestamp=2000)])
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest", "--topic",
                         "t", "--execute", "--now-ms", 3000)
    assert code == 0 and "t-3: not in this log dir (another broker's)" in err
    assert out.split()[4:] == ["g", "t", "0", "0", "g", "t", "1", "0", "g", "t", "2", "0", "g", "t", "4", "0"]
    assert _groups(logs, 3000) == {("g", "t", p): 0 for p in (0, 1, 2, 4)}
    code, out, _ = run("consumers", logs, "--group", "fresh", "--reset-offsets", "--to-offset", "5",
                       "--topic", "t", "--export")
    assert (code, out) == (0, "t,0,5\nt,1,4\nt,2,5\nt,4,2\n")
    code, out, _ = run("consumers", logs, "--group", "g", "--reset-offsets", "--shift-by", "2", "--topic",
                       "t", "--export")
    assert (code, out) == (0, "t,0,2\nt,1,2\nt,2,2\nt,4,2\n")
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--shift-by", "2", "--topic",
                         "t:0,3", "--export")       # the tool throws for t-3 and resets nothing: said
    assert (code, out) == (0, "t,0,2\n") and "t-3: no committed offset of group 'g' to shift" in err
    code, out, err = run("consumers", logs, "--group", "fresh", "--reset-offsets", "--shift-by", "2",
                         "--topic", "t")
    assert (code, out) == (1, "") and "expected a committed offset of group 'fresh' to shift" in err
    with segstore.open(logs, mode="a") as store:      # u-45 alone: 45 partitions elsewhere, 20 named
        store.append_batch([Message("u", b"v", partition=45, timestamp=1000)])
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest", "--topic",
                         "u")
    assert code == 0 and "u-0, u-1, " in err and ", u-19 and 25 more: not in this log dir" in err
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest", "--topic",
                         "v")
    assert (code, out) == (1, "") and "expected consumer group 'g' on topic 'v', found groups g" in err


def test_the_tools_dry_run_and_all_topics_are_taken(tmp_path):
    """kafka-consumer-groups' own spellings (3.8 ``ConsumerGroupCommandOptions``): ``--dry-run`` (the plan
    only, segstore's default too) and the scope ``--all-topics`` (the group's committed partitions,
    ``getPartitionsToReset``), so a command line written for the tool runs; ``checkArgs`` refuses
    ``--dry-run`` with ``--execute``."""
    logs = _log_dir(tmp_path / "logs", members=False)
    code, plain, _ = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest", "--json")
    code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest",
                         "--all-topics", "--dry-run", "--json")
    assert (code, out) == (0, plain) and "nothing written" in err
    assert _groups(logs, 3000) == {("g", "t", 0): 3, ("g", "t", 1): 1}
    for argv, words in (
            (["--dry-run", "--execute"], "only accepts one of --execute and --dry-run"),
            (["--all-topics", "--topic", "t"], "--all-topics (every partition the group committed"),
    ):
        code, out, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest", *argv)
        assert (code, out) == (2, "") and words in err, argv
    code, out, err = run("consumers", logs, "--group", "g", "--dry-run")
    assert (code, out) == (2, "") and "--dry-run and --execute go with --reset-offsets" in err
    assert _groups(logs, 3000) == {("g", "t", 0): 3, ("g", "t", 1): 1}


def test_delete_offsets_of_some_partitions_of_a_topic(tmp_path):
    """3.8 ``ConsumerGroupCommand.deleteOffsets`` takes ``--topic T:0,1`` (``parseTopicsWithPartitions``):
    OffsetDelete of those partitions only, which ``cleanupGroupMetadata`` tombstones; the group key follows
    only once an Empty group holds no offset.  segstore refused it (exit 2)."""
    logs = _log_dir(tmp_path / "logs", members=False)
    partition = offsetcommit.coordinator_partition("g", 50)
    end = _tail(logs, partition, 0)[-1][0].last_offset + 1
    code, out, err = run("consumers", logs, "--group", "g", "--delete-offsets", "--topic", "t:1,5",
                         "--execute", "--now-ms", 3000)
    assert (code, err) == (0, "") and out.split()[4:] == ["g", "t", "1", "1"]
    (batch, records), = _tail(logs, partition, end)
    assert batch.base_sequence == -1
    assert [(r.key, r.value) for r in records] == [offset_commit("g", "t", 1, None)]
    assert _groups(logs, 3000) == {("g", "t", 0): 3}
    code, out, err = run("consumers", logs, "--group", "g", "--delete", "--topic", "t:1")
    assert (code, out) == (1, "") and "expected offsets of consumer group 'g' on t partitions [1]" in err
    with segstore.open(logs, mode="a") as store:
        with pytest.raises(NotFoundError, match=r"'t' partitions \[1\] in __consumer_offsets-\d+, found no"):
            store.delete_offsets("g", "t", partitions=[1])
        with pytest.raises(ConfigError, match="expected a topic with the partitions"):
            store.delete_offsets("g", partitions=[0])
        with pytest.raises(ConfigError, match="expected partition numbers of t"):
            store.delete_offsets("g", "t", partitions=["0"])
        assert store.delete_offsets("g", "t", partitions=(0,), now_ms=3000) == []
    (_, records), = _tail(logs, partition, end + 1)
    assert [r.key for r in records] == [offset_commit("g", "t", 0, None)[0],
                                        group_metadata("g", tombstone=True)[0]]
    assert _groups(logs, 3000) == {}


def test_deleting_a_stable_groups_offsets_says_what_the_broker_would_refuse(tmp_path):
    """3.8 ``GroupCoordinator.handleDeleteGroups`` refuses a group with members (NON_EMPTY_GROUP), while
    ``handleDeleteOffsets`` deletes a Stable consumer group's offsets of the topics no member subscribes to
    and refuses only the others (GROUP_SUBSCRIBED_TO_TOPIC): the warning on a group the log leaves Stable
    says which, not that the tool deletes offsets of inactive groups only."""
    logs = _log_dir(tmp_path / "logs", members=True)
    code, _, err = run("consumers", logs, "--group", "g", "--delete-offsets", "--topic", "t")
    assert code == 0 and "(kafka-consumer-groups deletes an active group's offsets only of topics its " \
        "members do not subscribe to)" in err
    code, _, err = run("consumers", logs, "--group", "g", "--delete")
    assert code == 0 and "(kafka-consumer-groups deletes only an inactive group)" in err
    code, _, err = run("consumers", logs, "--group", "g", "--reset-offsets", "--to-earliest")
    assert code == 0 and "(kafka-consumer-groups resets only an inactive group)" in err


def test_a_second_topic_or_group_is_refused_not_silently_dropped(tmp_path):
    """kafka-consumer-groups takes ``--topic`` and ``--group`` several times (3.8 ``ConsumerGroupCommand``:
    ``valuesOf(topicOpt)``, ``valuesOf(groupOpt)``); segstore takes one, and argparse kept the last, so
    ``--reset-offsets --topic a --topic b --execute`` reset b alone and said nothing of a.  A second is a
    usage error, before anything is read or written."""
    logs = _log_dir(tmp_path / "logs", members=False)
    for argv in (["--group", "g", "--reset-offsets", "--to-earliest", "--topic", "t", "--topic", "t:0"],
                 ["--group", "g", "--group", "h", "--reset-offsets", "--to-earliest", "--topic", "t"],
                 ["--group", "g", "--delete", "--topic", "u", "--topic", "t"]):
        code, out, err = run("consumers", logs, *argv, "--execute", "--now-ms", 3000)
        assert (code, out) == (2, "") and "given twice" in err and "segstore takes one" in err, argv
    assert _groups(logs, 3000) == {("g", "t", 0): 3, ("g", "t", 1): 1}


@pytest.mark.parametrize("argv, words", [
    (["--converted-from", "rocketmq"], "--converted-from goes with --reset-offsets --from-file"),
    (["--list", "--converted-from", "rocketmq"], "--converted-from goes with --reset-offsets --from-file"),
    (["--group", "g", "--delete", "--export"], "--export goes with --reset-offsets, not with --delete"),
    (["--group", "g", "--delete", "--offsets-retention-minutes", "5", "--execute"],
     "--offsets-retention-minutes goes with the view of groups or --reset-offsets, not with --delete"),
])
def test_options_a_command_does_not_use_are_refused(tmp_path, argv, words):
    """An option the command would not use was dropped without a word (exit 0): a user who wrote
    ``--delete --export`` to save what goes got no CSV, ``--converted-from`` on the view changed nothing.
    Each is a usage error, before anything is written."""
    logs = _log_dir(tmp_path / "logs", members=False)
    code, out, err = run("consumers", logs, *argv)
    assert (code, out) == (2, "") and words in err
    assert _groups(logs, 3000) == {("g", "t", 0): 3, ("g", "t", 1): 1}
