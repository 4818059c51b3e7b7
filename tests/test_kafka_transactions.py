"""Kafka transactions through the store API and the read_committed view, against a log Kafka 3.8 wrote.

compat_fixtures/kafka/txn/ was written by Kafka 3.8.0's own LogSegment/UnifiedLog code from spec.json
(two transactional producers interleaved, COMMIT and ABORT markers, coordinator epoch 7).
Sources: clients/.../producer/internals/TransactionManager + RecordAccumulator (sequence per partition
from 0, continuing across a producer epoch's batches); core/.../log/ProducerStateManager and
UnifiedLog.append (aborted transactions to .txnindex); clients/.../consumer/internals/CompletedFetch
(read_committed skips aborted transactions' batches and control batches, reads up to the LSO).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES
from segstore_kafka.batch import iter_batches
from segstore_kafka.partition import KafkaConfig
from segstore_kafka.spec import spec_records
from segstore_kafka.store import KafkaStore

TXN = FIXTURES / "kafka" / "txn"
T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _spec() -> dict:
    return json.loads((TXN / "spec.json").read_text())


def test_replaying_through_transactions_writes_the_brokers_bytes(tmp_path: Path) -> None:
    """The Transaction API picks the same sequences Kafka's producer did and writes the same markers and
    .txnindex entries: every batch equals the broker's byte for byte (snappy ones record for record:
    snappy-java's matcher differs, see tests/test_kafka_fixtures.py), every .txnindex byte for byte."""
    spec = _spec()
    path = tmp_path / "topic-0"
    store = KafkaStore(str(path), "a", KafkaConfig.from_mapping(spec["config"]), clock=Clock(0))
    open_txns = {}
    for batch in spec["batches"]:
        pid = batch.get("producer_id")
        if "control" in batch:
            txn = open_txns.pop(pid)
            assert txn.coordinator_epoch == batch["coordinator_epoch"]
            (txn.commit if batch["control"] == "COMMIT" else txn.abort)(timestamp=batch["timestamp"])
        elif batch.get("transactional"):
            txn = open_txns.get(pid) or open_txns.setdefault(
                pid, store.transaction(pid, batch["producer_epoch"], coordinator_epoch=7))
            assert txn._sequences.get(("topic", 0), None) in (None, batch["base_sequence"])
            records = [{"topic": "topic", "partition": 0, "key": k, "value": v, "timestamp": ts,
                        "headers": h} for k, v, ts, h in spec_records(batch)]
            txn.append_batch(records, compression=batch["compression"])
            assert txn._sequences[("topic", 0)] - len(records) == batch["base_sequence"]
        else:
            store.partition.append_records(spec_records(batch), compression=batch["compression"])
    assert not open_txns
    store.close()
    for ref in sorted((TXN / "topic-0").iterdir()):
        if ref.suffix == ".txnindex":
            assert (path / ref.name).read_bytes() == ref.read_bytes(), ref.name
        if ref.suffix != ".log":
            continue
        ours, theirs = iter_batches((path / ref.name).read_bytes()), iter_batches(ref.read_bytes())
        for mine, broker in zip(ours, theirs, strict=True):
            if broker.compression == "snappy":
                assert (mine.base_offset, mine.last_offset, mine.attributes, mine.producer_id,
                        mine.base_sequence, mine.records()) == (
                    broker.base_offset, broker.last_offset, broker.attributes, broker.producer_id,
                    broker.base_sequence, broker.records())
            else:
                assert bytes(mine.data) == bytes(broker.data), (ref.name, broker.base_offset)


def _committed_oracle() -> list[int]:
    """Offsets a read_committed consumer sees, from the spec alone: a transactional batch counts when its
    producer's next marker is a COMMIT; markers are hidden."""
    spec = _spec()
    offset, pending, visible = 0, {}, []
    for batch in spec["batches"]:
        if "control" in batch:
            offsets = pending.pop(batch["producer_id"], [])
            if batch["control"] == "COMMIT":
                visible.extend(offsets)
            offset += 1
            continue
        n = len(batch["records"])
        span = list(range(offset, offset + n))
        if batch.get("transactional"):
            pending.setdefault(batch["producer_id"], []).extend(span)
        else:
            visible.extend(span)
        offset += n
    open_first = min((o[0] for o in pending.values() if o), default=offset)
    return sorted(o for o in visible if o < open_first)


def test_read_committed_on_the_brokers_log() -> None:
    with KafkaStore(str(TXN / "topic-0"), "r") as store:
        got = [r.offset for r in store.read_committed("topic", 0)]
        everything = [r.offset for r in store.read("topic", 0)]
        controls = {r.offset for r in store.read("topic", 0) if r.batch.is_control}
    assert got == _committed_oracle()
    assert set(got) < set(everything) - controls


def test_commit_abort_sequences_and_the_last_stable_offset(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with KafkaStore(str(logs), "a", clock=Clock()) as store:
        with store.transaction(5, 0) as txn:
            txn.append_batch([{"topic": "a", "partition": p, "value": b"c%d" % p} for p in (0, 1)])
        with pytest.raises(RuntimeError), store.transaction(5, 0) as txn:
            txn.append_batch([{"topic": "a", "partition": 0, "value": b"x"}] * 2)
            raise RuntimeError("aborts the transaction")
        store.append({"topic": "a", "partition": 0, "value": b"plain"})
        open_txn = store.transaction(5, 1)  # a new producer epoch starts its sequences at 0
        open_txn.append_batch([{"topic": "a", "partition": 0, "value": b"open"}])
        store.append({"topic": "a", "partition": 0, "value": b"after"})
        assert [r.value for r in store.read_committed("a", 0)] == [b"c0", b"plain"]  # up to the LSO
        assert [r.value for r in store.read("a", 0)][-2:] == [b"open", b"after"]
        open_txn.commit()
        assert [r.value for r in store.read_committed("a", 0)] == [b"c0", b"plain", b"open", b"after"]
        assert [r.value for r in store.read_committed("a", 1)] == [b"c1"]
    batches = [b for log in sorted((logs / "a-0").glob("*.log")) for b in iter_batches(log.read_bytes())]
    summary = [(b.base_offset, b.producer_epoch, b.base_sequence, b.is_transactional, b.control_type()
                if b.is_control else None) for b in batches]
    assert summary == [(0, 0, 0, True, None), (1, 0, -1, True, "COMMIT"), (2, 0, 1, True, None),
                       (4, 0, -1, True, "ABORT"), (5, -1, -1, False, None), (6, 1, 0, True, None),
                       (7, -1, -1, False, None), (8, 1, -1, True, "COMMIT")]
    txnindex = (logs / "a-0" / f"{0:020d}.txnindex").read_bytes()
    assert len(txnindex) == 34  # one aborted transaction: producer 5, offsets 2..4
    assert int.from_bytes(txnindex[2:10], "big") == 5 and int.from_bytes(txnindex[10:18], "big") == 2
    assert int.from_bytes(txnindex[18:26], "big") == 4


def test_compacting_the_brokers_transactional_log(tmp_path: Path) -> None:
    """LogCleaner over Kafka's own transactional log: aborted data gone, the committed view compacted to the
    latest record per key below the cleaned end (keyless records dropped), offsets unchanged, the active
    segment and everything past the last stable offset untouched; kafka-python and verify read it."""
    from kafka.record.memory_records import MemoryRecords

    path = tmp_path / "logs" / "topic-0"
    shutil.copytree(TXN / "topic-0", path)
    with KafkaStore(str(path), "r") as store:
        committed = [(r.offset, r.key, r.value) for r in store.read_committed("topic", 0)]
    with KafkaStore(str(path), "a", KafkaConfig.from_mapping({"cleanup.policy": "compact"}),
                    clock=Clock(T0 + 2 * 24 * 3600 * 1000)) as store:
        result = store.compact()[0]
        end = result["end_offset"]
        latest = {k: o for o, k, _ in committed if o < end and k is not None}
        assert [(r.offset, r.key, r.value) for r in store.read_committed("topic", 0)] == [
            (o, k, v) for o, k, v in committed if o >= end or (k is not None and latest[k] == o)]
        assert store.verify() == []
    for log in sorted(path.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            assert records.next_batch().validate_crc()


def test_every_read_committed_path_ends_at_the_last_stable_offset(tmp_path: Path) -> None:
    """A transaction still open holds back everything from its first offset (``UnifiedLog.lastStableOffset``,
    ``Partition.fetchRecords`` with ``FetchIsolation.TXN_COMMITTED``): read, scan, scan_arrow, dump and
    dump --json agree, before and after the commit."""
    logs = tmp_path / "logs"
    with KafkaStore(str(logs), "a", clock=Clock()) as store:
        store.append({"topic": "a", "partition": 0, "value": b"before"})
        with pytest.raises(RuntimeError), store.transaction(7, 0) as txn:
            txn.append_batch([{"topic": "a", "partition": 0, "value": b"aborted"}])
            raise RuntimeError("aborts the transaction")
        open_txn = store.transaction(7, 1)
        open_txn.append_batch([{"topic": "a", "partition": 0, "value": b"open"}])
        store.append({"topic": "a", "partition": 0, "value": b"after"})

        def views() -> list[list[bytes]]:
            read = [r.value for r in store.read("a", 0, isolation="read_committed")]
            scan = [r.value for r in store.scan(isolation="read_committed")]
            arrow = [v for b in store.scan_arrow(["value"], isolation="read_committed")
                     for v in b.column("value").to_pylist()]
            dumped = [json.loads(line)["value"] for chunk in store.dump_json(isolation="read_committed")
                      for line in bytes(chunk).decode().splitlines()]
            texts = [line.text for line in store.dump(isolation="read_committed")]
            records = [t for t in texts if t.startswith("| offset:")]
            return [read, scan, arrow, [base64.b64decode(v) for v in dumped], [b"x"] * len(records)]

        read, scan, arrow, dumped, records = views()
        assert read == scan == arrow == dumped == [b"before"]
        assert len(records) == 1
        assert [r.value for r in store.read_committed("a", 0)] == read
        open_txn.commit()
        read, scan, arrow, dumped, records = views()
        assert read == scan == arrow == dumped == [b"before", b"open", b"after"]
        assert len(records) == 3


def test_a_lost_txnindex_is_found_and_rebuilt_as_kafka_wrote_it(tmp_path: Path) -> None:
    """Without its ``.txnindex`` a segment's aborted transactions read back at read_committed: verify names
    each abort its ABORT markers complete that no entry covers, and recover rebuilds the files Kafka 3.8
    wrote (``LogSegment.recover`` with ``ProducerStateManager``), byte for byte."""
    from conftest import cli_run, copy_writable

    part = copy_writable(TXN / "topic-0", tmp_path / "topic-0")
    lost = sorted(part.glob("*.txnindex"))[1:3]
    for path in lost:
        path.unlink()
    code, out, _ = cli_run("verify", part)
    assert code == 1
    named = [line for line in out.splitlines() if ".txnindex: expected a .txnindex entry of producer" in line]
    assert {line.split(":")[0] for line in named} == {str(p) for p in lost}
    assert len(named) == sum((TXN / "topic-0" / p.name).stat().st_size // 34 for p in lost)
    code, out, _ = cli_run("recover", part)
    assert code == 0 and all(f"{p}: rebuilt: expected a .txnindex entry" in out for p in lost)
    for path in lost:
        assert path.read_bytes() == (TXN / "topic-0" / path.name).read_bytes()
    assert cli_run("verify", part)[0] == 0


def test_a_marker_whose_record_does_not_read_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    """verify lists a control record Kafka rejects (a negative key version, CRC intact) among its problems;
    the .txnindex check passes that batch by instead of raising out of verify."""
    import struct

    import crc32c
    from conftest import copy_writable

    part = copy_writable(TXN / "topic-0", tmp_path / "topic-0")
    log = sorted(part.glob("*.log"))[0]
    data = bytearray(log.read_bytes())
    marker = next(b for b in iter_batches(bytes(data)) if b.is_control)
    # the record after the 61-byte header: length, attributes, timestamp delta, offset delta, key length
    # (one byte each here), then the key's int16 version
    key_at = marker.position + 61 + 5
    assert data[key_at - 1] == 0x08             # the key length (zigzag 4)
    data[key_at] = 0xFF
    data[marker.position + 17:marker.position + 21] = struct.pack(
        ">I", crc32c.crc32c(bytes(data[marker.position + 21:marker.position + marker.size])))
    log.write_bytes(bytes(data))
    with KafkaStore(str(part)) as store:
        problems = store.verify()
    assert any("a control record key version >= 0" in p.message for p in problems)


def test_markers_of_a_log_append_time_topic_are_stamped_log_append_time(tmp_path: Path) -> None:
    """The leader validates a marker as any batch it appends (Kafka 3.8.0 UnifiedLog.append with
    validateAndAssignOffsets, LogValidator.assignOffsetsNonCompressed: ``if (timestampType ==
    LOG_APPEND_TIME) batch.setMaxTimestamp(LOG_APPEND_TIME, now)``), so in a LogAppendTime topic the
    COMMIT/ABORT batches carry the LogAppendTime attribute like the data batches; they were CreateTime."""
    logs = tmp_path / "logs"
    clock = Clock(T0 + 500)
    config = KafkaConfig(message_timestamp_type="LogAppendTime")
    with KafkaStore(str(logs), "a", clock=clock, config=config) as store:
        with store.transaction(5, 0) as txn:
            txn.append_batch([{"topic": "a", "partition": 0, "value": b"c", "timestamp": T0}])
        clock.now += 7
        with pytest.raises(RuntimeError), store.transaction(5, 0) as txn:
            txn.append_batch([{"topic": "a", "partition": 0, "value": b"x", "timestamp": T0}])
            raise RuntimeError("aborts the transaction")
    batches = list(iter_batches((logs / "a-0" / f"{0:020d}.log").read_bytes()))
    seen = [(b.control_type() if b.is_control else None, b.timestamp_type, b.max_timestamp) for b in batches]
    assert seen == [(None, "LogAppendTime", T0 + 500), ("COMMIT", "LogAppendTime", T0 + 500),
                    (None, "LogAppendTime", T0 + 507), ("ABORT", "LogAppendTime", T0 + 507)]


@pytest.mark.parametrize(("items", "error"), [
    # a.b exists: 3.8 ReplicationControlManager.validateNewTopicNames refuses a_b (Topic.hasCollision)
    ([{"topic": "fresh", "partition": 0, "value": b"x"}, {"topic": "a_b", "partition": 0, "value": b"x"}],
     "collide"),
    ([{"topic": "fresh", "partition": 0, "value": "\udc80"}], "UTF-8"),
    ([{"topic": "fresh", "partition": 0, "value": b"x", "timestamp": 1.5}], "timestamp"),
    ([{"topic": "a.b", "partition": 0.0, "value": b"x"}], "integer partition"),
    ([{"topic": "fresh", "partition": 0, "value": b"x"}, {"topic": "fresh", "partition": -1, "value": b"x"}],
     "partition from 0"),
])
def test_a_refused_transactional_append_writes_nothing_and_creates_nothing(
        tmp_path: Path, items: list, error: str) -> None:
    """A transaction's append_batch checks its records, topics and partitions as KafkaStore.append_batch
    does, before any partition is created: it used to create ``a_b`` beside ``a.b``, answer
    ``partition=0.0``, raise a bare UnicodeEncodeError, and leave an empty partition behind a refused
    record."""
    from segstore.errors import SegstoreError

    store = KafkaStore(str(tmp_path / "logs"), "a", KafkaConfig(), clock=Clock())
    store.append_batch([{"topic": "a.b", "partition": 0, "value": b"v"}])
    before = sorted(p.name for p in (tmp_path / "logs").iterdir())
    txn = store.transaction(7)
    with pytest.raises(SegstoreError, match=error):
        txn.append_batch(items)
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == before
    assert store.partition_of("a.b", 0).next_offset == 1
    assert txn.commit() == []       # nothing written: no partition to mark
    store.close()


def test_a_fenced_producer_or_coordinator_epoch_is_refused(tmp_path: Path) -> None:
    """Kafka 3.8.0 ``ProducerAppendInfo.checkProducerEpoch`` refuses a client's batch (and a coordinator's
    marker) whose producer epoch is below the producer's current one in the partition
    (``InvalidProducerEpochException``: a newer epoch fenced it, here the coordinator's abort of a
    timed-out transaction, written with the bumped epoch), and ``checkCoordinatorEpoch`` a marker whose
    coordinator epoch is below the one of the producer's last marker
    (``TransactionCoordinatorFencedException``).  segstore wrote both, a zombie's records and markers
    into the log; now refused before anything is written."""
    from segstore.errors import InvalidMessageError

    path = tmp_path / "t-0"
    store = KafkaStore(str(path), "a", KafkaConfig(), clock=Clock())
    record = {"topic": "t", "partition": 0, "value": b"x"}
    with store.transaction(5, 0, coordinator_epoch=3) as txn:
        txn.append_batch([record])                                  # 0, the COMMIT at 1
    txn = store.transaction(5, 0, coordinator_epoch=3)
    txn.append_batch([record])                                      # 2
    fence = store.transaction(5, 1, coordinator_epoch=3)            # the coordinator's timeout abort:
    fence._sequences[("t", 0)] = 0                                  # a marker of the bumped epoch
    fence.abort()                                                   # at 3
    end = store.partition.next_offset
    with pytest.raises(InvalidMessageError, match=r"epoch at or above 1 .*InvalidProducerEpoch.*found 0"):
        store.transaction(5, 0, coordinator_epoch=3).append_batch([record])
    with pytest.raises(InvalidMessageError, match=r"epoch at or above 1 .*found 0"):
        txn.commit()                                                # the zombie's own marker
    stale = store.transaction(5, 1, coordinator_epoch=2)
    stale.append_batch([record])                                    # epoch 1 is current: written, 4
    with pytest.raises(InvalidMessageError, match=r"coordinator epoch at or above 3 .*Fenced.*found 2"):
        stale.abort()
    assert store.partition.next_offset == end + 1
    written = [(b.base_offset, b.producer_epoch, b.is_control) for b in store.partition.batches(end)]
    assert written == [(4, 1, False)]
    with store.transaction(5, 1, coordinator_epoch=4) as newer:     # a newer coordinator finishes it
        newer.append_batch([record])
    with store.transaction(6, 0) as other:                          # another producer is not fenced
        other.append_batch([record])
    store.close()


@pytest.mark.parametrize("args, found", [
    ((True, 0, 0), "producer_id as an integer, found bool True"),
    ((5.0, 0, 0), "producer_id as an integer, found float 5.0"),
    ((5, "1", 0), "producer_epoch as an integer, found str '1'"),
    ((5, 0, 1.5), "coordinator_epoch as an integer, found float 1.5"),
    ((5, 0, True), "coordinator_epoch as an integer, found bool True"),
    ((5, 0, -5), "coordinator epoch in [0, 2147483647], found -5"),
    ((5, 0, 2**31), "coordinator epoch in [0, 2147483647], found 2147483648"),
    ((2**63, 0, 0), "producer id in [0, 9223372036854775807] and an epoch in [0, 32767], "
                    "found 9223372036854775808"),
])
def test_a_transactions_ids_and_epochs_are_checked_before_anything_is_written(tmp_path: Path, args, found):
    """A producer id is Kafka's int64 >= 0, a producer epoch an int16 >= 0, a coordinator epoch the
    EndTransactionMarker's int32, a leader epoch >= 0.  A bool, float or str reached the encoder (a
    TypeError or ``struct.error``; True wrote producer 1), and a coordinator epoch out of range failed only
    at commit, the transaction's records written and left open (read_committed readers stopped there)."""
    from segstore.errors import InvalidMessageError

    path = tmp_path / "t-0"
    store = KafkaStore(str(path), "a", KafkaConfig(), clock=Clock())
    pid, epoch, coordinator = args
    with pytest.raises(InvalidMessageError, match=re.escape(found)) as err:
        store.transaction(pid, epoch, coordinator_epoch=coordinator)
    assert err.value.path == str(path)
    txn = store.transaction(5, 0)
    txn.append_batch([{"topic": "t", "partition": 0, "value": b"x"}])
    with pytest.raises(InvalidMessageError, match="timestamp as an integer, found str 'y'"):
        txn.commit(timestamp="y")
    assert txn.commit(timestamp=T0)[0].offset == 1
    assert store.partition.next_offset == 2
    store.close()


def test_a_snapshot_that_does_not_read_does_not_stop_a_transaction(tmp_path: Path) -> None:
    """The fencing check reads the producer state, seeded from the producer snapshot named for the first
    segment where the log was cut below it; Kafka 3.8.0's loader drops a snapshot that does not read
    (``ProducerStateManager.loadFromSnapshot``), so a damaged one must not refuse the append with a
    CorruptDataError."""
    path = tmp_path / "t-0"
    store = KafkaStore(str(path), "a", KafkaConfig(), clock=Clock())
    store.partition.start_at(10)
    store.append_batch([{"topic": "t", "partition": 0, "value": b"x"}])
    (path / f"{10:020d}.snapshot").write_bytes(b"\0\1garbage")
    with store.transaction(5, 0) as txn:
        txn.append_batch([{"topic": "t", "partition": 0, "value": b"y"}])
    assert store.partition.next_offset == 13
    store.close()


def test_a_marker_not_flagged_transactional_ends_its_producers_transaction_as_kafka_reads_it(tmp_path):
    """Kafka 3.8.0 ``ProducerAppendInfo.append`` takes any control batch of a producer as its end marker
    (``batch.isControlBatch()``, the transactional flag unread), so an ABORT marker without that flag
    aborts the open transaction: ``LogSegment.recover`` indexes it in ``.txnindex`` and a read_committed
    consumer skips the aborted batch.  segstore's transaction tracker passed over the marker (it observed
    transactional batches only): no ``.txnindex`` entry, and read_committed reads returned offset 0."""
    import struct

    from kafka_messages import marked_transaction

    import segstore

    data, marker, after = marked_transaction(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0),
                                             marker_transactional=False)
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(data + marker + after)
    with segstore.open(part) as store:
        assert any(".txnindex" in p.path and "abort at offset 1" in p.message for p in store.verify())
    with segstore.open(part, format="kafka", mode="a") as store:
        store.recover()
        assert [r.offset for r in store.read("t", 0, 0, isolation="read_committed")] == [2]
        assert store.verify() == []
    # version 0, producer 5, first offset 0, last offset 1, last stable offset 2
    assert (part / "00000000000000000000.txnindex").read_bytes() == struct.pack(">hqqqq", 0, 5, 0, 1, 2)


def test_a_plain_batch_of_a_producer_in_a_transaction_is_refused_as_kafka_refuses_it(tmp_path):
    """Kafka 3.8.0 ``ProducerAppendInfo.appendDataBatch``: "Expected transactional write from producer"
    (``InvalidTxnStateException``) for a non-transactional data batch of a producer whose transaction is
    open, on a leader's and a follower's append alike; and ``LogSegment.recover`` does not catch it, so a
    log holding one does not load.  ``append_encoded`` wrote it.  After the producer's marker it is taken."""
    from segstore_kafka.batch import encode_batch, encode_control_batch

    from segstore.errors import InvalidMessageError

    path = tmp_path / "t-0"
    txn = encode_batch([(b"k", b"v", 1)], base_offset=0, producer_id=5, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    plain = encode_batch([(b"k2", b"v2", 2)], base_offset=1, producer_id=5, producer_epoch=0, base_sequence=1)
    with KafkaStore(str(path), "a") as store:
        store.append_encoded("t", 0, txn)
        refused = "producer 5, which has a transaction open from offset 0"
        with pytest.raises(InvalidMessageError, match=refused):
            store.append_encoded("t", 0, plain)
        assert store.offset_range("t", 0) == (0, 1)
        store.append_encoded("t", 0, encode_control_batch("COMMIT", base_offset=1, producer_id=5,
                                                          producer_epoch=0, coordinator_epoch=0, timestamp=2))
        store.append_encoded("t", 0, encode_batch([(b"k2", b"v2", 2)], base_offset=2, producer_id=5,
                                                  producer_epoch=0, base_sequence=1))
        assert store.offset_range("t", 0) == (0, 3)


def test_verify_names_a_plain_batch_of_a_producer_in_a_transaction_written_by_hand(tmp_path):
    """Kafka 3.8.0 ``ProducerAppendInfo.appendDataBatch`` throws ``InvalidTxnStateException`` ("Expected
    transactional write from producer") on a non-transactional data batch of a producer whose transaction
    is open, also where it replays a log's producer state (``LogSegment.recover``,
    ``UnifiedLog.rebuildProducerState``), uncaught: the broker does not load such a log.  verify said ok
    of one.  Named once per open transaction and segment at its first such batch, also when the
    transaction opened in an earlier segment; other producers' plain batches, and the producer's after
    its marker, are fine."""
    from segstore_kafka.batch import encode_batch, encode_control_batch

    def data(offset: int, pid: int, seq: int, txn: bool = False) -> bytes:
        return encode_batch([(b"k", b"v", offset)], base_offset=offset, producer_id=pid, producer_epoch=0,
                            base_sequence=seq, is_transactional=txn)

    part = tmp_path / "t-0"
    part.mkdir()
    first = data(0, 5, 0, txn=True) + data(1, 6, 0)
    (part / "00000000000000000000.log").write_bytes(first)
    second = [data(2, 6, 1, txn=True), data(3, 5, 1), data(4, 5, 2), data(5, 7, 0), data(6, 6, 2),
              encode_control_batch("COMMIT", base_offset=7, producer_id=5, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=7),
              data(8, 5, 3)]
    (part / "00000000000000000002.log").write_bytes(b"".join(second))
    with KafkaStore(str(tmp_path), "r") as store:     # (the closed segment's missing time index aside)
        problems = [p for p in store.verify() if p.path.endswith(".log")]
    log = str(part / "00000000000000000002.log")
    pos = {offset: sum(map(len, second[:i])) for i, offset in enumerate((2, 3, 4, 5, 6, 7, 8))}
    assert [(p.path, p.pos) for p in problems] == [(log, pos[3]), (log, pos[6])]
    assert "expected a transactional batch from producer 5, which has a transaction open from offset 0, " \
           "found a non-transactional one at offset 3" in problems[0].message
    assert "InvalidTxnStateException" in problems[0].message
    assert "producer 6, which has a transaction open from offset 2, found a non-transactional one at " \
           "offset 6" in problems[1].message


@pytest.mark.parametrize("seed", range(6))
def test_verify_names_plain_batches_in_transactions_as_a_batch_by_batch_replay(tmp_path, seed):
    """The plain batches verify names (numpy over a segment's batches at once) are those a batch by batch
    replay of ``ProducerAppendInfo.appendDataBatch``'s check finds, the first of each open transaction
    and segment, over random interleavings of three producers across three segments."""
    import random

    from segstore_kafka.batch import encode_batch, encode_control_batch

    rng = random.Random(seed)
    part = tmp_path / "t-0"
    part.mkdir()
    open_from: dict[int, int] = {}
    expected = []
    offset = 0
    for base in (0, 40, 80):
        log, data, reported = part / f"{base:020d}.log", b"", set()
        for offset in range(base, base + 40):
            pid, kind = rng.choice((1, 2, 3)), rng.choice(("txn", "plain", "plain", "COMMIT", "ABORT"))
            if kind in ("COMMIT", "ABORT"):
                batch = encode_control_batch(kind, base_offset=offset, producer_id=pid, producer_epoch=0,
                                             coordinator_epoch=0, timestamp=offset)
                open_from.pop(pid, None)
            else:
                batch = encode_batch([(b"k", b"v", offset)], base_offset=offset, producer_id=pid,
                                     producer_epoch=0, base_sequence=offset, is_transactional=kind == "txn")
                if kind == "txn":
                    open_from.setdefault(pid, offset)
                elif pid in open_from and (pid, open_from[pid]) not in reported:
                    reported.add((pid, open_from[pid]))
                    expected.append((str(log), len(data), f"producer {pid}, which has a transaction open "
                                     f"from offset {open_from[pid]}, found a non-transactional one at offset "
                                     f"{offset}:"))
            data += batch
        log.write_bytes(data)
    with KafkaStore(str(tmp_path), "r") as store:
        found = [p for p in store.verify() if "non-transactional" in p.message]
    assert len(found) == len(expected) > 0
    for problem, (path, pos, text) in zip(found, expected, strict=True):
        assert (problem.path, problem.pos) == (path, pos)
        assert text in problem.message
