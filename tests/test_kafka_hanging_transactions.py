"""A partition's producers and hanging transactions offline: ``segstore transactions --producers``,
``--find-hanging``, ``--abort`` (``KafkaStore.producers``, ``hanging_transactions``, ``abort_transaction``),
as ``kafka-transactions describe-producers``, ``find-hanging`` and ``abort`` ask the brokers.

Expected values are derived by hand from apache/kafka 3.8.0:
- storage/.../log/ProducerStateManager.java, ``ProducerAppendInfo``: per producer the epoch (a new one
  forgets the old one's sequences), the last sequence of its last data batch, its last batch's max
  timestamp, its last marker's coordinator epoch, the first offset of its transaction still open; an
  idle producer without an open transaction expires after ``producer.id.expiration.ms`` (1 day);
- tools/.../TransactionsCommand.java ``FindHangingTransactionsCommand``: open longer than the max
  transaction timeout (15 minutes) and not ``Ongoing``/``PrepareCommit``/``PrepareAbort`` with the
  partition in the coordinator's state of the producer's transactional id (or no such id);
  ``AbortTransactionCommand``: the producer whose open transaction starts at ``--start-offset``, its
  coordinator epoch or 0, through ``WriteTxnMarkers`` (an ABORT marker, the ``.txnindex`` entry).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_run as run
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_messages import transaction
from segstore_kafka import batch as codec
from segstore_kafka import snapshot

import segstore
from segstore.errors import InvalidMessageError
from segstore.records import Message

T0 = 1_700_000_000_000
MINUTE = 60_000
DAY = 24 * 60 * MINUTE
TXN_TOPIC = "__transaction_state"


def build(path: Path, *, coordinator: list[tuple[bytes, bytes | None]] | None = None) -> Path:
    """t-0: a plain record (0); producer 7's committed transaction (1, marker 2, coordinator epoch 3);
    producer 9's transaction left open (3, epoch 2); producer 11 idempotent (4-6 in two batches,
    sequences 0-2); producer 12 at epoch 0 (7) then epoch 1 (8); producer 13 idle for days (9)."""
    with segstore.open(path, format="kafka", mode="a") as store:
        store.append_batch([Message("t", b"plain", timestamp=T0)])
        part = store.partition_of("t", 0)
        with store.transaction(7, 0, coordinator_epoch=3) as txn:
            txn.append_batch([Message("t", b"c", timestamp=T0 + 1)])
            txn.commit(timestamp=T0 + 2)
        store.transaction(9, 2).append_batch([Message("t", b"open", timestamp=T0 + 3)])
        part.append_records([(None, b"i", T0 + 4)] * 2, producer_id=11, producer_epoch=0, base_sequence=0)
        part.append_records([(None, b"i", T0 + 5)], producer_id=11, producer_epoch=0, base_sequence=2)
        part.append_records([(None, b"e", T0 + 6)], producer_id=12, producer_epoch=0, base_sequence=0)
        part.append_records([(None, b"e", T0 + 7)], producer_id=12, producer_epoch=1, base_sequence=0)
        part.append_records([(None, b"old", T0 - 3 * DAY)], producer_id=13, producer_epoch=0, base_sequence=5)
        if coordinator:
            store.append_batch([Message(TXN_TOPIC, v, key=k, timestamp=T0) for k, v in coordinator])
    return path


def test_producers_are_the_brokers_producer_state(tmp_path):
    logs = build(tmp_path / "logs")
    with segstore.open(logs) as store:
        found = store.producers(now_ms=T0 + MINUTE)
    assert list(found) == [("t", 0)]
    fields = ("producer_id", "producer_epoch", "coordinator_epoch", "last_sequence", "last_timestamp",
              "current_transaction_start_offset")
    assert [tuple(p[f] for f in fields) for p in found["t", 0]] == [
        (7, 0, 3, 0, T0 + 2, None),       # the marker's timestamp is the producer's last
        (9, 2, -1, 0, T0 + 3, 3),
        (11, 0, -1, 2, T0 + 5, None),
        (12, 1, -1, 0, T0 + 7, None),     # epoch 1's own sequence
    ]                                     # 13: idle past producer.id.expiration.ms
    with segstore.open(logs) as store:
        assert [p["producer_id"] for p in store.producers("t", 0, now_ms=T0 - 3 * DAY + MINUTE)["t", 0]] == [
            7, 9, 11, 12, 13]


def test_the_producers_table_prints_no_open_transaction_as_the_tool_does(tmp_path):
    """Kafka 3.8.0 ``TransactionsCommand.DescribeProducersCommand`` prints a producer with no open transaction
    with ``CurrentTransactionStartOffset`` ``None`` (``-1`` for no coordinator epoch); the JSON keeps null."""
    logs = build(tmp_path / "logs")
    code, out, _ = run("transactions", logs, "--producers", "--now-ms", str(T0 + MINUTE))
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [row[-1] for row in rows] == ["None", "3", "None", "None"]
    assert rows[1][4] == "-1"
    code, out, _ = run("transactions", logs, "--producers", "--now-ms", str(T0 + MINUTE), "--json")
    assert [r["current_transaction_start_offset"] for r in json.loads(out)] == [None, 3, None, None]


def _retained_log(tmp_path: Path, batches: int = 6) -> tuple[Path, Path, list[int], int]:
    """A log of ``batches`` one-record batches in segments of 200 bytes: ``(logs, part_dir, bases, end)``,
    the segments' base offsets and the log end offset.  :func:`_delete_below` then plays retention."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a", **{"segment.bytes": 200}) as store:
        for i in range(batches):
            store.append_batch([Message("t", b"x" * 60, timestamp=T0 + i)])
        bases = [seg.base for seg in store.partition_of("t", 0).segments]
        end = store.partition_of("t", 0).next_offset
    return logs, logs / "t-0", bases, end


def _delete_below(part_dir: Path, first: int) -> None:
    """Delete the segments below ``first`` as retention does (their log and index files)."""
    for name in list(part_dir.iterdir()):
        if name.suffix in (".log", ".index", ".timeindex") and int(name.stem) < first:
            name.unlink()


def _producer_21(first: int, txn_start: int) -> np.ndarray:
    """A snapshot's one entry: producer 21, epoch 4, last sequence 17 at ``first - 1``, coordinator epoch 6,
    its transaction open from ``txn_start`` (-1: none)."""
    entries = np.zeros(1, snapshot.ENTRY)
    entries[0] = (21, 4, 17, first - 1, 0, T0, 6, txn_start)
    return entries


def test_a_log_cut_below_its_first_segment_starts_from_the_snapshot(tmp_path):
    """Retention deleted producer 21's batches; the broker's snapshot named for the first segment kept it."""
    logs, part_dir, bases, _ = _retained_log(tmp_path)
    first = bases[-1]
    _delete_below(part_dir, first)
    (part_dir / "log-start-offset-checkpoint").unlink(missing_ok=True)
    (part_dir / f"{first:020d}.snapshot").write_bytes(snapshot.write_snapshot(_producer_21(first, first - 1)))
    with segstore.open(logs) as store:
        (producer,) = store.producers(now_ms=T0)["t", 0]
    assert producer == {"producer_id": 21, "producer_epoch": 4, "coordinator_epoch": 6, "last_sequence": 17,
                        "last_timestamp": T0, "current_transaction_start_offset": first - 1}


@pytest.mark.parametrize("state, partitions, hangs", [
    (None, None, True),                          # no transactional id has producer 9
    ("Ongoing", {"t": [0]}, False),              # its coordinator still finishes it
    ("PrepareAbort", {"t": [0]}, False),
    ("Ongoing", {"t": [1]}, True),               # the coordinator does not know this partition
    ("CompleteCommit", {"t": [0]}, True),        # finished without this partition's marker
])
def test_hanging_is_judged_against_the_coordinators_state(tmp_path, state, partitions, hangs):
    coordinator = ([transaction("app", producer_id=9, epoch=2, state=state, partitions=partitions)] if state
                   else None)
    logs = build(tmp_path / "logs", coordinator=coordinator)
    with segstore.open(logs) as store:
        rows, notes, damage = store.hanging_transactions(now_ms=T0 + 16 * MINUTE)
        assert damage == []
        assert store.hanging_transactions(now_ms=T0 + 14 * MINUTE)[0] == []      # not open long enough
        shorter = store.hanging_transactions(now_ms=T0 + 3 * MINUTE, max_timeout_ms=MINUTE)[0]
        assert [(r["producer_id"], r["duration_min"]) for r in shorter] == [(r["producer_id"], 2)
                                                                             for r in rows]
    if not hangs:
        assert rows == []
        return
    (row,) = rows       # open 16 minutes less 3 ms: 15, floored as TimeUnit.toMinutes
    assert (row["topic"], row["partition"], row["producer_id"], row["current_transaction_start_offset"],
            row["duration_min"], row["transactional_id"]) == ("t", 0, 9, 3, 15, "app" if state else None)
    assert notes and "__transaction_state partitions here" in notes[0]


def test_find_hanging_then_abort_from_the_command_line(tmp_path):
    logs = build(tmp_path / "logs")
    now = str(T0 + DAY // 2)
    code, out, err = run("transactions", logs, "--find-hanging", "--now-ms", now)
    assert code == 0 and "no __transaction_state partitions here" in err
    assert [line.split() for line in out.splitlines()] == [
        ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
         "LastTimestamp", "Duration(min)"],
        ["t", "0", "9", "2", "-1", "3", str(T0 + 3), str((DAY // 2 - 3) // MINUTE)]]
    end = _end(logs)
    abort = ("transactions", logs, "--abort", "--topic", "t", "--partition", "0", "--now-ms", now)
    code, out, err = run(*abort, "--start-offset", "4")
    assert (code, out) == (1, "")
    assert "expected a transaction open from offset 4 in t-0, found open ones from 3" in err
    code, out, err = run(*abort, "--start-offset", "3", "--json")
    assert code == 0 and "nothing written" in err and json.loads(out)[0]["producer_id"] == 9
    assert _end(logs) == end
    code, out, err = run(*abort, "--start-offset", "3", "--execute")
    assert (code, err) == (0, "")
    with segstore.open(logs) as store:
        part = store.partition_of("t", 0)
        marker = list(part.batches(end))
        assert store.producers(now_ms=int(now))["t", 0][1]["current_transaction_start_offset"] is None
        assert [r.value for r in store.read("t", 0, isolation="read_committed")] == [
            b"plain", b"c", b"i", b"i", b"i", b"e", b"e", b"old"]
        (aborted,) = [txn for seg in part.segments for txn in seg.txn_index.all()]
        assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (9, 3, end)
    (batch,) = marker
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.max_timestamp) == (
        end, 9, 2, int(now))
    (record,) = batch.records()
    assert codec.parse_control_record(record.key, record.value) == ("ABORT", 0)   # no marker yet: epoch 0
    code, out, _ = run("transactions", logs, "--find-hanging", "--now-ms", now)
    assert len(out.splitlines()) == 1


def test_a_dead_transactional_id_is_left_out_as_the_coordinator_leaves_it_out(tmp_path):
    """Kafka 3.8.0 TransactionStateManager.listTransactionStates (``shouldInclude``: Dead is filtered, "a
    transient state ... in the process of expiration") and TransactionCoordinator.handleDescribeTransactions
    (Dead: TRANSACTIONAL_ID_NOT_FOUND): a Dead id is neither listed nor described, so find-hanging (which
    looks ids up by producer through ListTransactions) finds no id for its producer."""
    logs = build(tmp_path / "logs", coordinator=[
        transaction("gone", producer_id=9, epoch=2, state="Dead", partitions={"t": [0]}),
        transaction("live", producer_id=7, state="CompleteCommit", start_ms=T0, update_ms=T0 + 2)])
    code, out, _ = run("transactions", logs)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["TransactionalId", "live"]
    code, out, err = run("transactions", logs, "--transactional-id", "gone")
    assert (code, out) == (1, "") and "no transactional id 'gone'" in err
    code, out, _ = run("transactions", logs, "--find-hanging", "--now-ms", str(T0 + DAY // 2), "--json")
    assert code == 0 and [(r["producer_id"], r["transactional_id"]) for r in json.loads(out)] == [(9, None)]


def test_a_start_time_the_log_holds_as_none_prints_as_the_tool_prints_it(tmp_path):
    """DescribeTransactionsHandler (3.8.0) gives a negative transactionStartTimeMs no start time, and
    TransactionsCommand.DescribeTransactionsCommand prints that as ``None``; the JSON keeps the log's -1."""
    logs = build(tmp_path / "logs", coordinator=[
        transaction("idle", producer_id=7, state="Empty", start_ms=-1, update_ms=T0)])
    code, out, _ = run("transactions", logs)
    assert code == 0 and out.splitlines()[1].split() == ["idle", "0", "7", "0", "Empty", "60000", "None",
                                                         str(T0)]
    code, out, _ = run("transactions", logs, "--json")
    assert json.loads(out)[0]["start_timestamp"] == -1


def test_coordinator_records_that_do_not_read_are_named_and_damage_exits_1(tmp_path):
    """TransactionLogValue.json's PartitionIds is not nullable: the generated reader throws (Kafka 3.8.0
    MessageDataGenerator.generateVariableLengthReader), so the record does not load. The transactional id
    and the batch holding it are named; describe, find-hanging and dump go on. A CRC that does not hold
    stops the load there: the commands show what they read and exit 1 (docs/cli.md: 1 for damage met)."""
    _, good = transaction("app", producer_id=9, epoch=2, state="Ongoing", partitions={"t": [0]})
    key = transaction("app", producer_id=9)[0]
    null_ids = good[:-24] + struct.pack(">i", -1) + good[-16:]      # the partition id list: count -1
    logs = build(tmp_path / "logs", coordinator=[
        transaction("live", producer_id=7, state="CompleteCommit"), (key, null_ids)])
    log = logs / f"{TXN_TOPIC}-0" / "00000000000000000000.log"
    with segstore.open(logs) as store:
        (batch,) = store.partition_of(TXN_TOPIC, 0).batches()
    where = f"{log}:{batch.position}"
    code, out, err = run("transactions", logs)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["TransactionalId", "live"]
    assert (f"{where}: the TransactionLogValue of transactional id 'app' in this batch does not read: "
            "expected a value of the non-nullable field PartitionIds, found null (-1)") in err
    code, out, err = run("transactions", logs, "--find-hanging", "--now-ms", str(T0 + DAY // 2), "--json")
    assert code == 0 and [r["producer_id"] for r in json.loads(out)] == [9]
    code, out, err = run("dump", log, "--transaction-log-decoder")
    assert code == 0 and "Error at offset 1, skipping. expected a value of the non-nullable field" in out
    data = bytearray(log.read_bytes())
    data[batch.position + 17] ^= 0xFF       # the batch's CRC
    log.write_bytes(bytes(data))
    for argv in ((), ("--json",), ("--find-hanging", "--topic", "t", "--now-ms", str(T0 + DAY // 2))):
        code, out, err = run("transactions", logs, *argv)
        assert code == 1 and out and f"{log}:{batch.position + 17}: expected CRC-32C" in err, argv


def _end(path: Path) -> int:
    with segstore.open(path) as store:
        return store.offset_range("t", 0)[1]


def test_usage_errors(tmp_path):
    logs = build(tmp_path / "logs")
    for argv, words in ((["--abort", "--topic", "t"], "--abort needs --topic T --partition P"),
                        (["--producers", "--start-offset", "3"], "--start-offset and --execute go with"),
                        (["--producers", "--max-transaction-timeout", "3"], "goes with --find-hanging"),
                        (["--find-hanging", "--max-transaction-timeout", "-1"], "expected minutes >= 0"),
                        (["--topic", "t"], "--topic goes with --producers, --find-hanging or --abort"),
                        (["--producers", "--find-hanging"], "not allowed with")):
        code, out, err = run("transactions", logs, *argv)
        assert code == 2 and out == "" and words in err, argv
    # a selection the log dir lacks is named with what it holds, as every other command names it (the
    # bare "found none" read as if the log dir held no topic at all)
    for argv, said in ((["--producers", "--topic", "nope"], "expected a topic named 'nope', found topics t"),
                       (["--find-hanging", "--topic", "t", "--partition", "3"],
                        "expected --partition 3 in topic 't', found partitions 0"),
                       (["--abort", "--topic", "u", "--partition", "0", "--start-offset", "3"],
                        "expected a topic named 'u', found topics t")):
        code, out, err = run("transactions", logs, *argv)
        assert (code, out, err) == (1, "", f"{logs}: {said}\n"), argv
    rmq = tmp_path / "rmq"
    with segstore.open(rmq, format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "body": b"x"}])
    code, out, err = run("transactions", rmq, "--producers")
    assert code == 2 and "rocketmq stores keep no producer state" in err


@pytest.mark.parametrize(("argv", "said"), [
    (["--find-hanging", "--max-transaction-timeout", "2147483648"], "(a Java int)"),
    (["--find-hanging", "--max-transaction-timeout", "99999999999999999999"], "(a Java int)"),
    (["--abort", "--topic", "t", "--partition", "0", "--start-offset", "9223372036854775808"],
     "(a Java long)"),
    # Integer.valueOf / Long.valueOf: untrimmed, no digit past the BMP (two surrogates to Java)
    (["--find-hanging", "--max-transaction-timeout", " 5"], "(a Java int)"),
    (["--find-hanging", "--max-transaction-timeout", "\U0001d7d3"], "(a Java int)"),
    (["--abort", "--topic", "t", "--partition", "0", "--start-offset", "\U0001d7d3"], "(a Java long)"),
])
def test_a_number_past_the_tools_type_is_a_usage_error(tmp_path, argv, said):
    """3.8.0 ``TransactionsCommand`` (argparse4j): ``--max-transaction-timeout`` is an ``Integer``,
    ``--start-offset`` a ``Long``; a number past them is refused as a usage error.  Before: any size taken
    (``--max-transaction-timeout 99999999999999999999`` listed nothing as hanging, exit 0)."""
    logs = build(tmp_path / "logs")
    code, out, err = run("transactions", logs, *argv)
    assert (code, out) == (2, "") and f"argument {argv[-2]}: expected a whole number" in err and said in err


def test_a_batch_still_being_written_counts_for_none(tmp_path):
    """A live log ends inside the batch its broker is writing (a crashed one inside a torn one): the
    producer state and the last stable offset are those of the whole batches before it."""
    logs = build(tmp_path / "logs")
    with segstore.open(logs) as store:
        before = store.producers(now_ms=T0 + MINUTE)
        stable = store.last_stable_offset("t", 0)
    with segstore.open(logs, mode="a") as store:
        store.partition_of("t", 0).append_records([(None, b"y" * 300, T0 + 9)], producer_id=30,
                                                  producer_epoch=0, base_sequence=0, transactional=True)
    log = max((logs / "t-0").glob("*.log"))
    log.write_bytes(log.read_bytes()[:-120])
    with segstore.open(logs) as store:
        assert store.producers(now_ms=T0 + MINUTE) == before
        assert store.last_stable_offset("t", 0) == stable == 3     # producer 9's open transaction
        assert store.hanging_transactions(now_ms=T0 + DAY // 2)[0][0]["producer_id"] == 9


def _replayed(part) -> dict[int, tuple]:
    """Producer state by a batch-by-batch replay of ``ProducerAppendInfo``'s rules, the reference
    ``describe_producers``' per-chunk numpy must equal."""
    states: dict[int, list] = {}
    for seg in part.segments:
        for batch in codec.iter_batches(seg.log.view(), path=seg.path):
            if batch.producer_id < 0 or batch.magic < 2:
                continue
            state = states.setdefault(batch.producer_id, [batch.producer_epoch, -1, -1, -1, None])
            if batch.producer_epoch > state[0]:
                state[0], state[1] = batch.producer_epoch, -1
            if batch.is_control:
                (record,) = batch.records()
                state[3] = codec.parse_control_record(record.key, record.value)[1]
                state[4] = None
            else:
                if batch.producer_epoch == state[0]:
                    state[1] = codec.increment_sequence(batch.base_sequence, batch.last_offset_delta)
                if batch.is_transactional and state[4] is None:
                    state[4] = batch.base_offset
            state[2] = batch.max_timestamp
    return {pid: (s[0], s[1], s[2], s[3], s[4]) for pid, s in states.items()}


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["plain", "txn", "COMMIT", "ABORT"]),
                          st.booleans(), st.integers(1, 3)), min_size=1, max_size=30))
def test_producer_state_equals_a_batch_by_batch_replay(tmp_path_factory, steps):
    """Across chunks and rolled segments (300-byte segments), the numpy summary per chunk gives what a
    replay of every batch gives: epochs that grow (a new one forgets the sequence), sequences, the last
    timestamp, the last marker's coordinator epoch, the open transaction's first offset."""
    logs = tmp_path_factory.mktemp("producers") / "logs"
    epochs = {pid: 0 for pid in (1, 2, 3)}
    sequences = {pid: 0 for pid in (1, 2, 3)}
    in_txn = {pid: False for pid in (1, 2, 3)}
    with segstore.open(logs, format="kafka", mode="a", **{"segment.bytes": 300}) as store:
        part = store.partition_of("t", 0, create=True)
        for i, (pid, kind, bump, count) in enumerate(steps):
            if bump:
                epochs[pid] += 1
                sequences[pid] = 0
            if kind in ("COMMIT", "ABORT"):
                part.append_control(kind, producer_id=pid, producer_epoch=epochs[pid], coordinator_epoch=i,
                                    timestamp=T0 + i)
                in_txn[pid] = False
                continue
            if kind == "plain" and in_txn[pid]:     # InvalidTxnStateException, as Kafka refuses it
                with pytest.raises(InvalidMessageError):
                    part.append_records([(None, b"v", T0 + i)], producer_id=pid, producer_epoch=epochs[pid],
                                        base_sequence=sequences[pid])
                continue
            part.append_records([(None, b"v", T0 + i)] * count, producer_id=pid, producer_epoch=epochs[pid],
                                base_sequence=sequences[pid], transactional=kind == "txn")
            in_txn[pid] = in_txn[pid] or kind == "txn"
            sequences[pid] += count
    with segstore.open(logs) as store:
        part = store.partition_of("t", 0)
        found = {p["producer_id"]: (p["producer_epoch"], p["last_sequence"], p["last_timestamp"],
                                    p["coordinator_epoch"], p["current_transaction_start_offset"])
                 for p in store.producers(now_ms=T0)["t", 0]}
        assert found == _replayed(part)


def test_a_transaction_open_from_a_deleted_offset_holds_the_last_stable_offset_at_the_log_start(tmp_path):
    """Retention deleted the start of producer 21's transaction, still open: the broker keeps it in its
    producer state (the snapshot named for the first kept segment, ``ProducerStateManager``'s
    ``ongoingTxns``) and ``UnifiedLog.maybeIncrementFirstUnstableOffset`` moves its first unstable
    offset up to the log start, so ``lastStableOffset`` is the log start: read_committed consumers get
    nothing until it is aborted, and the cleaner cleans nothing.  ``transactions --producers`` showed
    the transaction open while read_committed reads went on to the high watermark.  A snapshot that
    does not read is dropped, as the broker's loader drops it (``loadFromSnapshot``)."""
    from segstore_kafka import compaction

    logs, part_dir, bases, end = _retained_log(tmp_path)
    first = bases[-2]
    _delete_below(part_dir, first)
    snap = part_dir / f"{first:020d}.snapshot"
    snap.write_bytes(snapshot.write_snapshot(_producer_21(first, first - 1)))
    with segstore.open(logs) as store:
        assert store.producers(now_ms=T0)["t", 0][0]["current_transaction_start_offset"] == first - 1
        assert store.offset_range("t", 0) == (first, end)
        assert store.last_stable_offset("t", 0) == first
        assert list(store.read("t", 0, first, isolation="read_committed")) == []
        assert [r.offset for r in store.read("t", 0, first)] == list(range(first, end))
    with segstore.open(logs, format="kafka", mode="a") as store:
        assert compaction.cleanable_offsets(store.partition_of("t", 0), T0)[1] == first
        store.abandon()
    snap.write_bytes(snap.read_bytes()[:-1])
    with segstore.open(logs) as store:
        assert store.last_stable_offset("t", 0) == end


def test_aborts_after_a_cut_log_index_the_snapshots_open_transaction(tmp_path):
    """Kafka 3.8.0 ``ProducerStateManager`` loads producer 21's transaction, open from a deleted offset,
    from the snapshot named for the first segment.  Another producer's abort meanwhile is indexed with
    it as its last stable offset (``lastStableOffset(completedTxn)``, ``findNextIncompleteTxn``), and
    its own ABORT (``kafka-transactions abort``) completes it from that offset
    (``appendEndTxnMarker``: ``CompletedTxn(producerId, currentTxnFirstOffset, ...)``) and gets its
    ``.txnindex`` entry.  segstore rebuilt the open transactions from the kept batches only: the other
    abort's entry said no transaction was open, and producer 21's abort got no entry at all."""
    from segstore_kafka.txnindex import AbortedTxn, TransactionIndex

    logs, part_dir, bases, _ = _retained_log(tmp_path)
    first = bases[-2]
    _delete_below(part_dir, first)
    (part_dir / f"{first:020d}.snapshot").write_bytes(snapshot.write_snapshot(_producer_21(first, first - 1)))
    with segstore.open(logs, format="kafka", mode="a") as store:
        with store.transaction(30, 0) as txn:
            txn.append_batch([Message("t", b"a", partition=0, timestamp=T0)])
            txn.abort(timestamp=T0)
        end = store.partition_of("t", 0).next_offset
        store.abort_transaction("t", 0, first - 1, now_ms=T0)
        active = store.partition_of("t", 0).segments[-1].base
    assert TransactionIndex(str(part_dir / f"{active:020d}.txnindex")).all() == [
        AbortedTxn(30, end - 2, end - 1, first - 1),      # producer 21's transaction was still open
        AbortedTxn(21, first - 1, end, end + 1),
    ]
    with segstore.open(logs) as store:
        assert store.verify() == []


def test_a_producer_known_only_from_the_snapshot_goes_on_with_its_next_sequence(tmp_path):
    """Retention deleted producer 21's batches; the broker's snapshot holds its epoch 4 and last sequence
    17, so Kafka 3.8.0 ``ProducerAppendInfo.checkSequence`` takes only 18 next in that epoch
    (``OutOfOrderSequenceException`` otherwise), which its producer sends.  ``store.transaction(21, 4)``
    started again at 0; a new epoch still starts at 0."""
    logs, part_dir, bases, _ = _retained_log(tmp_path)
    first = bases[-2]
    _delete_below(part_dir, first)
    (part_dir / f"{first:020d}.snapshot").write_bytes(snapshot.write_snapshot(_producer_21(first, -1)))
    with segstore.open(logs, format="kafka", mode="a") as store:
        with store.transaction(21, 4, coordinator_epoch=6) as txn:
            txn.append_batch([Message("t", b"a", partition=0, timestamp=T0)] * 2)
        with store.transaction(21, 5, coordinator_epoch=6) as txn:
            txn.append_batch([Message("t", b"b", partition=0, timestamp=T0)])
        part = store.partition_of("t", 0)
        sequences = [(b.producer_epoch, b.base_sequence) for b in part.batches(first) if not b.is_control
                     and b.producer_id == 21]
    assert sequences == [(4, 18), (5, 0)]


def test_the_tables_are_the_tools_tab_separated_columns(tmp_path):
    """``kafka-transactions`` prints its tables with Kafka 3.8.0 ``ToolsUtils.prettyPrintTable``: each cell
    padded to its column's widest, then a tab, the last column too (``printRow``).  segstore separated
    the columns with single spaces, so a script splitting the tool's lines on tabs got one field."""
    logs = build(tmp_path / "logs")
    code, out, _ = run("transactions", logs, "--find-hanging", "--now-ms", str(T0 + DAY // 2))
    assert code == 0
    assert out == ("Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
                   "LastTimestamp\tDuration(min)\t\n"
                   "t    \t0        \t9         \t2            \t-1              \t3          \t"
                   "1700000000003\t719          \t\n")
    code, out, _ = run("transactions", logs, "--producers", "--now-ms", str(T0 + MINUTE))
    assert code == 0
    assert [line.split("\t") for line in out.splitlines()][:2] == [
        ["Topic", "Partition", "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
         "LastTimestamp", "CurrentTransactionStartOffset", ""],
        ["t    ", "0        ", "7         ", "0            ", "3                     ", "0           ",
         "1700000000002", "None                         ", ""]]


@pytest.mark.parametrize("call, found", [
    (lambda s: s.open_transaction("t", 0, "3"), "expected an offset as an integer, found str '3'"),
    (lambda s: s.open_transaction("t", 0, True), "expected an offset as an integer, found bool True"),
    (lambda s: s.abort_transaction("t", 0, 3.0), "expected an offset as an integer, found float 3.0"),
    (lambda s: s.open_transaction("t", "0", 3), "expected a partition as an integer, found str '0'"),
    (lambda s: s.abort_transaction("t", 0, 3, now_ms="x"), "time in ms since the epoch, found str 'x'"),
])
def test_open_and_abort_transaction_check_their_arguments(tmp_path, call, found):
    """``open_transaction("t", 0, "3")`` answered "expected a transaction open from offset 3 in t-0, found
    open ones from 3", and ``abort_transaction(..., now_ms="x")`` raised a TypeError: refused as
    :meth:`read` refuses such an offset (ConfigError), before anything is looked up or written."""
    from segstore.errors import ConfigError

    logs = build(tmp_path / "logs")
    end = _end(logs)
    with segstore.open(logs, format="kafka", mode="a") as store:
        with pytest.raises(ConfigError, match=re.escape(found)):
            call(store)
        assert store.open_transaction("t", 0, 3)["producer_id"] == 9
    assert _end(logs) == end


@pytest.mark.parametrize("call, found", [
    (lambda s: s.producers("t", "0"), "expected a partition as an integer, found str '0'"),
    (lambda s: s.hanging_transactions("t", 0.0), "expected a partition as an integer, found float 0.0"),
    (lambda s: s.producers(now_ms="x"), "time in ms since the epoch, found str 'x'"),
    (lambda s: s.hanging_transactions(max_timeout_ms="15"), "transaction timeout as ms >= 0, found str '15'"),
    (lambda s: s.hanging_transactions(max_timeout_ms=-1), "transaction timeout as ms >= 0, found int -1"),
])
def test_producers_and_hanging_transactions_check_their_arguments(tmp_path, call, found):
    """``producers("t", "0")`` said "expected t-0 here, found none" of a partition the log dir holds,
    ``now_ms="x"`` met the clock's arithmetic (TypeError): refused as :meth:`read` refuses them."""
    from segstore.errors import ConfigError

    with segstore.open(build(tmp_path / "logs")) as store, pytest.raises(ConfigError, match=re.escape(found)):
        call(store)


def test_after_a_broker_restart_the_state_is_in_its_newest_snapshot(tmp_path):
    """Kafka 3.8.0 ``ProducerStateManager.truncateAndReload`` drops the snapshots at or below the log start
    when the broker restarts, and ``loadFromSnapshot`` loads the newest one left (written at a roll or at
    shutdown), replaying the batches from its offset; one that does not read is dropped and the next
    older one tried.  Retention had deleted the start of producer 21's transaction: after a restart only
    the later snapshots hold it, and segstore, which looked only for one named for the first segment,
    neither listed the producer (``--producers``, ``--find-hanging``) nor held the last stable offset at
    the log start."""
    logs, part_dir, bases, end = _retained_log(tmp_path, 8)
    first, later = bases[-4], bases[-2]
    _delete_below(part_dir, first)
    entries = _producer_21(first, first - 1)
    (part_dir / f"{later:020d}.snapshot").write_bytes(snapshot.write_snapshot(entries))
    (part_dir / f"{end:020d}.snapshot").write_bytes(b"\0\1torn")          # the newest does not read
    (part_dir / f"{end + 5:020d}.snapshot").write_bytes(snapshot.write_snapshot(entries[:0]))  # past the end
    with segstore.open(logs) as store:
        (producer,) = store.producers(now_ms=T0)["t", 0]
        assert producer["current_transaction_start_offset"] == first - 1
        assert store.last_stable_offset("t", 0) == first
        rows, _, _ = store.hanging_transactions(now_ms=T0 + DAY // 2)
        assert [(r["producer_id"], r["current_transaction_start_offset"]) for r in rows] == [(21, first - 1)]
    with segstore.open(logs, format="kafka", mode="a") as store:
        with store.transaction(21, 4, coordinator_epoch=6) as txn:   # the sequence goes on from 17
            txn.append_batch([Message("t", b"a", partition=0, timestamp=T0)])
        assert [b.base_sequence for b in store.partition_of("t", 0).batches(end) if not b.is_control] == [18]
