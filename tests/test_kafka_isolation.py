"""``isolation="read_committed"`` reads of Kafka partitions, as a read_committed consumer sees them.

Oracle: the txn fixture's ``spec.json`` (what the producers sent, with their COMMIT and
ABORT markers, in log order) zipped with ``dump.jsonl`` (the batches the real broker
wrote, with their offsets).  A data record is aborted when the next marker of its
producer is an ABORT.  The reader under test uses the ``.txnindex`` files instead
(Kafka ``CompletedFetch`` with ``UnifiedLog.collectAbortedTransactions``).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, copy_writable

import segstore
from segstore.errors import ConfigError

TXN = FIXTURES / "kafka" / "txn"
PART = TXN / "topic-0"


def _oracle() -> tuple[list[int], set[int], set[int]]:
    """(every offset in the log, aborted data offsets, control record offsets)."""
    spec = json.loads((TXN / "spec.json").read_text())["batches"]
    dump = [json.loads(line) for line in (TXN / "dump.jsonl").read_text().splitlines()]
    batches = [d for d in dump if d["type"] == "batch"]
    assert len(batches) == len(spec)
    every, aborted, control = [], set(), set()
    open_txn: dict[int, list[int]] = {}
    for sent, written in zip(spec, batches, strict=True):
        offsets = list(range(written["baseOffset"], written["lastOffset"] + 1))
        every += offsets
        if sent.get("control"):
            assert written["isControl"]
            control.update(offsets)
            pending = open_txn.pop(sent["producer_id"], [])
            if sent["control"] == "ABORT":
                aborted.update(pending)
        elif sent.get("transactional"):
            open_txn.setdefault(sent["producer_id"], []).extend(offsets)
    return every, aborted, control


def test_read_committed_hides_aborted_and_control_records():
    every, aborted, control = _oracle()
    assert aborted and control
    committed = [o for o in every if o not in aborted and o not in control]
    with segstore.open(str(PART)) as store:
        assert [r.offset for r in store.read("topic", 0)] == every
        assert [r.offset for r in store.read("topic", 0, isolation="read_committed")] == committed
        assert [r.offset for r in store.scan(isolation="read_committed")] == committed
        # from every start offset: what a consumer fetching from there gets
        for start in range(0, every[-1] + 2, 7):
            got = [r.offset for r in store.read("topic", 0, start, isolation="read_committed")]
            assert got == [o for o in committed if o >= start], start
        assert [r.offset for r in store.read("topic", 0, 5, 4, isolation="read_committed")] == \
            [o for o in committed if o >= 5][:4]


def test_read_committed_of_a_log_directory_and_without_transactions(tmp_path):
    every, aborted, control = _oracle()
    logdir = tmp_path / "logs"
    copy_writable(PART, logdir / "topic-0")
    with segstore.open(str(logdir)) as store:
        assert [r.offset for r in store.scan(isolation="read_committed")] == \
            [o for o in every if o not in aborted and o not in control]
    plain = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    with segstore.open(str(plain)) as store:
        assert [r.offset for r in store.scan(isolation="read_committed")] == [r.offset for r in store.scan()]


def test_unknown_isolation_is_refused():
    with segstore.open(str(PART)) as store, pytest.raises(ConfigError, match="read_committed"):
        list(store.read("topic", 0, isolation="committed"))


def _arrow_offsets(store, **kwargs) -> list[int]:
    batches = store.scan_arrow(["offset", "value"], **kwargs)
    return [o for batch in batches for o in batch.column("offset").to_pylist()]


def test_scan_arrow_read_committed_equals_the_consumers_view():
    """The columnar reader's ``isolation`` (a mask per row) keeps what ``read`` keeps, from every offset."""
    every, aborted, control = _oracle()
    committed = [o for o in every if o not in aborted and o not in control]
    with segstore.open(str(PART)) as store:
        assert _arrow_offsets(store) == every
        assert _arrow_offsets(store, isolation="read_committed") == committed
        for start in range(0, every[-1] + 2):
            got = _arrow_offsets(store, topic="topic", partition=0, offset=start, isolation="read_committed")
            assert got == [o for o in committed if o >= start], start
        # the projection asked for comes back, whatever the mask needed to read
        for batch in store.scan_arrow(["value"], isolation="read_committed"):
            assert batch.schema.names == ["value"]
        with pytest.raises(ConfigError, match="read_committed"):
            list(store.scan_arrow(["offset"], isolation="committed"))
    plain = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    with segstore.open(str(plain)) as store:
        assert _arrow_offsets(store, isolation="read_committed") == [r.offset for r in store.scan()]


def test_the_first_open_transaction_is_remembered_until_the_log_changes(tmp_path, monkeypatch):
    """``transactions.first_open_offset`` walks the batch headers once per state of the segments: a
    second read_committed read does not walk again, an append of an open transaction and its commit
    are both seen."""
    from segstore_kafka import transactions

    walks = []
    real = transactions.producer_state

    def counted(part, now_ms, **kwargs):
        walks.append(part.next_offset)
        return real(part, now_ms, **kwargs)

    monkeypatch.setattr(transactions, "producer_state", counted)
    message = {"topic": "T", "partition": 0, "key": b"k", "value": b"v"}
    with segstore.open(str(tmp_path / "k"), "kafka", "a") as store:
        store.append_batch([message] * 3)

        def committed() -> list[int]:
            return [r.offset for r in store.read("T", 0, isolation="read_committed")]

        assert committed() == committed() == [0, 1, 2]
        assert walks == [3]
        txn = store.transaction(7, 0)
        txn.append_batch([message] * 2)                     # offsets 3, 4: open
        store.append_batch([message])                       # offset 5, after the open transaction
        assert committed() == [0, 1, 2] and walks == [3, 6]
        txn.commit()                                        # the marker at 6
        assert committed() == [0, 1, 2, 3, 4, 5] and walks == [3, 6, 7]
        assert committed() == [0, 1, 2, 3, 4, 5] and walks == [3, 6, 7]


def test_a_transaction_ended_at_or_past_the_high_watermark_holds_the_last_stable_offset(tmp_path):
    """Kafka 3.8.0 ``ProducerStateManager.firstUnstableOffset`` is the earliest first offset of the
    ongoing transactions *and* of the completed ones whose marker is at or past the high watermark
    (``completeTxn`` moves them to ``unreplicatedTxns``; ``onHighWatermarkUpdated`` drops them only once
    ``lastOffset < highWatermark``); ``UnifiedLog.lastStableOffset`` is it where below the high
    watermark.  A follower's log dir (or a broker's checkpoint written before its last appends) has
    such a marker past ``replication-offset-checkpoint``: its transaction was read as committed, and
    the cleaner's bound (``LogCleanerManager.cleanableOffsets``, ``log.lastStableOffset``) passed it."""
    from segstore_kafka import compaction

    logs = tmp_path / "logs"
    message = {"topic": "T", "partition": 0, "key": b"k", "value": b"v"}
    with segstore.open(str(logs), "kafka", "a", **{"segment.bytes": 200}) as store:
        store.append_batch([message])                       # 0
        txn = store.transaction(7, 0)
        txn.append_batch([message, message])                # 1, 2
        store.append_batch([message])                       # 3
        txn.commit()                                        # the COMMIT marker at 4
        for _ in range(3):
            store.append_batch([message])                   # 5, 6, 7
    checkpoint = logs / "replication-offset-checkpoint"
    for hw, stable, seen in ((4, 1, [0]), (5, 5, [0, 1, 2, 3]), (3, 1, [0]), (1, 1, [0])):
        checkpoint.write_text(f"0\n1\nT 0 {hw}\n")
        with segstore.open(str(logs)) as store:
            assert store.last_stable_offset("T", 0) == stable
            assert [r.offset for r in store.read("T", 0, isolation="read_committed")] == seen
            assert _arrow_offsets(store, topic="T", partition=0, isolation="read_committed") == seen
    checkpoint.write_text("0\n1\nT 0 4\n")
    with segstore.open(str(logs), "kafka", "a") as store:
        part = store.partition_of("T", 0)
        assert part.segments[1].base <= 4 < part.segments[-1].base   # the marker is in no active segment
        assert compaction.cleanable_offsets(part, part.clock())[1] == 1
        store.abandon()


@pytest.mark.parametrize("method", ["last_stable_offset", "high_watermark"])
@pytest.mark.parametrize("partition", ["0", 0.0, True])
def test_the_offset_bounds_refuse_a_partition_that_is_not_an_integer(method, partition):
    """``high_watermark("topic", "0")`` said the log held no partition topic-0, ``last_stable_offset``
    took ``0.0`` and ``True`` for partitions 0 and 1: refused as ``offset_range`` and ``read`` refuse them."""
    with segstore.open(str(PART)) as store, pytest.raises(ConfigError, match="a partition as an integer"):
        getattr(store, method)("topic", partition)


def _with_undecodable_batch(tmp_path):
    """The txn fixture with one more data batch whose CRC holds but whose records do not decode (a
    record count one too many): (partition, log, that batch's position, its base offset)."""
    import struct

    import crc32c
    from segstore_kafka.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, RECORD_BATCH_OVERHEAD, encode_batch

    part = copy_writable(PART, tmp_path / "topic-0")
    with segstore.open(str(part)) as store:
        end = store.offset_range("topic", 0)[1]
    good = encode_batch([(b"k", b"v", 5, []), (b"l", b"w", 6, [])], base_offset=end)
    head = bytearray(good[:RECORD_BATCH_OVERHEAD])
    struct.pack_into(">i", head, RECORD_BATCH_OVERHEAD - 4, 3)
    struct.pack_into(">I", head, CRC_OFFSET, crc32c.crc32c(bytes(head[ATTRIBUTES_OFFSET:])
                                                           + good[RECORD_BATCH_OVERHEAD:]))
    log = sorted(part.glob("*.log"))[-1]
    position = log.stat().st_size
    with log.open("ab") as f:
        f.write(bytes(head) + good[RECORD_BATCH_OVERHEAD:])
    return part, log, position, end


def test_read_committed_of_good_records_passes_over_a_batch_whose_records_do_not_decode(tmp_path):
    """Kafka 3.8 builds the producer state the last stable offset comes from out of batch headers only
    (``ProducerStateManager`` / ``ProducerAppendInfo.append``, ``UnifiedLog.loadProducersFromRecords``,
    ``LogSegment.recover`` checks ``batch.ensureValid``, the CRC): of a control batch it reads its one
    record, the marker, never a data batch's records.  A read_committed read of good records used to
    fail on a batch far past them whose records do not decode; one that reaches it names it."""
    import numpy as np
    from segstore_kafka import columnar

    every, aborted, control = _oracle()
    committed = [o for o in every if o not in aborted and o not in control]
    part, log, position, end = _with_undecodable_batch(tmp_path)
    with segstore.open(str(part)) as store:
        assert store.last_stable_offset("topic", 0) == end + 2      # the bad batch is not transactional
        assert [r.offset for r in store.read("topic", 0, 0, 3, isolation="read_committed")] == committed[:3]
        with pytest.raises(segstore.SegstoreError) as err:
            list(store.read("topic", 0, 0, isolation="read_committed"))
        assert f"{log}:{log.stat().st_size}:" in str(err.value)      # where record 2 of 3 would start
    # the C loop and the reference take the header walk alike: data batches give no row
    view = memoryview(log.read_bytes())
    for accelerated in (True, False):
        chunks = list(columnar.decode(view, path=str(log), want=columnar.WANT_BATCH_HEADERS,
                                      accelerated=accelerated))
        rows = np.concatenate([c.batches for c in chunks])
        assert int(rows["position"][-1]) == position
        marker_rows = sum(c.rows for c in chunks)
        assert marker_rows == int(((rows["attributes"] & 0x20) != 0).sum()) > 0
