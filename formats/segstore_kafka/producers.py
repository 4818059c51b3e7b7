"""A partition's producers as ``kafka-transactions describe-producers`` reports them, and its hanging
transactions as ``kafka-transactions find-hanging`` finds them.

The producer state is what Kafka 3.8.0's ``ProducerStateManager`` holds once it has loaded the log
(storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerStateManager.java,
``ProducerAppendInfo``): per producer id its epoch (only grows; a new epoch forgets the
sequence of the old), the last sequence of its last data batch at that epoch, the max timestamp of
its last batch, the coordinator epoch of its last transaction marker (-1: none), and the first
offset of its transaction still open (a transactional data batch opens one, a COMMIT or ABORT
marker closes it).  A producer idle ``producer.id.expiration.ms`` (1 day) without an open
transaction is expired (``isProducerExpired``).  The state starts from the broker's newest
readable snapshot up to the log end (:func:`newest_seed`: what the broker keeps of producers whose
batches were deleted), then every batch header from its offset, read as column chunks: numpy per
chunk, Python per producer and chunk, and per marker (rare).

A transaction is hanging (``FindHangingTransactionsCommand``, tools/.../TransactionsCommand.java)
when it has been open longer than the largest transaction timeout (15 minutes by default) and the
transaction coordinator does not expect to finish it: no transactional id has its producer id, or
that id's state is not ``Ongoing``/``PrepareCommit``/``PrepareAbort`` with this partition.

Pure apart from the partition's own reads; not thread-safe.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from segstore import files
from segstore.errors import CorruptDataError
from segstore.javatext import parse_long

from . import batch as codec
from . import snapshot
from .partition import Partition

#: ``producer.id.expiration.ms`` (Kafka's default, 1 day).
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000
#: ``kafka-transactions find-hanging --max-transaction-timeout`` (minutes, the tool's default).
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
#: Transaction states in which the coordinator still writes the partitions' markers (or aborts on timeout).
COORDINATOR_FINISHES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})
NO_SEQUENCE = -1


@dataclass(slots=True)
class ProducerState:
    """One producer of a partition (``DescribeProducersResponse``'s ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    #: the coordinator epoch of its last marker, -1 for none
    coordinator_epoch: int
    #: the first offset of its transaction still open, None for none
    txn_start_offset: int | None
    #: the last offset of its last data batch (a snapshot's ``lastOffset``), -1 for none
    last_data_offset: int = -1

    def to_dict(self) -> dict[str, Any]:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "coordinator_epoch": self.coordinator_epoch, "last_sequence": self.last_sequence,
                "last_timestamp": self.last_timestamp,
                "current_transaction_start_offset": self.txn_start_offset}


def seed(part: Partition) -> tuple[dict[int, ProducerState], int]:
    """The snapshot's producers where the log was cut below its first segment, and that segment's base.

    :raises CorruptDataError: a snapshot that does not read (:func:`.snapshot.read_snapshot`).
    """
    first = next(iter(part.segments), None)
    base = first.base if first is not None else 0
    path = os.path.join(part.path, f"{base:020d}{snapshot.SUFFIX}")
    if base == 0 or not files.is_file(path):
        return {}, base
    return _snapshot_states(path), base


def newest_seed(part: Partition, upto: int | None = None) -> tuple[dict[int, ProducerState], int]:
    """The producer state the broker loads (``ProducerStateManager.loadFromSnapshot``): its newest
    snapshot from the first segment's base up to ``upto`` (None: the log end offset), an older one where
    a newer does not read (the broker deletes it and tries the next), and the offset its batches replay
    from (the snapshot's; without one, the first segment's base: the whole log).

    A broker restarted since retention deleted segments has dropped the snapshot at the log start
    (``truncateAndReload`` keeps those above it), so the state of producers whose batches were deleted,
    a transaction open from a deleted offset among them, is only in later snapshots (one per roll, one
    at shutdown).  Snapshots past ``upto`` are not the state there (``truncateAndReload`` drops those
    past the log end)."""
    first = next(iter(part.segments), None)
    base = first.base if first is not None else 0
    limit = part.next_offset if upto is None else min(upto, part.next_offset)
    found = []
    for name in files.list_dir(part.path):
        stem, dot, suffix = name.partition(".")
        # ProducerStateManager.listSnapshotFiles: LogFileUtils.offsetFromFile, Long.parseLong of the stem
        offset = parse_long(stem) if dot and "." + suffix == snapshot.SUFFIX and len(stem) == 20 else None
        if offset is not None and base <= offset <= limit and offset > 0:
            found.append((offset, name))
    for offset, name in sorted(found, reverse=True):
        try:
            return _snapshot_states(os.path.join(part.path, name)), offset
        except CorruptDataError:
            continue
    return {}, base


def _snapshot_states(path: str) -> dict[int, ProducerState]:
    """A snapshot file's producers.

    :raises CorruptDataError: a snapshot that does not read (:func:`.snapshot.read_snapshot`).
    """
    entries = snapshot.read_snapshot(files.read_bytes(path), path=path)
    return {int(e["producer_id"]): ProducerState(
        int(e["producer_id"]), int(e["producer_epoch"]), int(e["last_sequence"]), int(e["timestamp"]),
        int(e["coordinator_epoch"]),
        None if int(e["current_txn_first_offset"]) < 0 else int(e["current_txn_first_offset"]),
        int(e["last_offset"]))
        for e in entries}


def _marker_epoch(seg: Any, row: np.void) -> int:
    """The coordinator epoch of the control batch ``row`` of segment ``seg`` (-1: not a marker)."""
    pos, size = int(row["position"]), int(row["size"])
    for batch in codec.iter_batches(seg.log.view()[pos:pos + size], path=seg.path, base_pos=pos):
        for record in batch.records():
            try:
                _, epoch = codec.parse_control_record(record.key, record.value)
            except ValueError:
                return -1
            return -1 if epoch is None else epoch
    return -1


def _summaries(batches: np.ndarray) -> Iterable[tuple[int, np.ndarray]]:
    """Per producer id of a chunk's producer batches (log order), the positions of its rows."""
    if not len(batches):
        return
    order = np.argsort(batches["producer_id"], kind="stable")
    pids = batches["producer_id"][order]
    starts = np.flatnonzero(np.r_[True, pids[1:] != pids[:-1]])
    for at, end in zip(starts.tolist(), [*starts[1:].tolist(), len(order)], strict=True):
        yield int(pids[at]), order[at:end]


def describe_producers(part: Partition, now_ms: int) -> list[ProducerState]:
    """The partition's active producers by producer id.  ``O(batches)`` in numpy, plus Python per
    producer and chunk and per marker."""
    states, start = newest_seed(part)
    _replay(part, states, start, with_emptied=True)
    return [s for _, s in sorted(states.items())
            if s.txn_start_offset is not None or now_ms - s.last_timestamp < PRODUCER_ID_EXPIRATION_MS]


def _replay(part: Partition, states: dict[int, ProducerState], start: int, *, with_emptied: bool) -> int:
    """Every producer batch of the partition's log from ``start`` and its log start on applied to
    ``states`` as the broker replays them; ``with_emptied`` False passes over the data batches the log
    cleaner emptied (no record: what a copy of the records leaves out).  Returns how many such batches
    the log holds from there."""
    return _replays(part, [(states, start, with_emptied)])[0]


def _replays(part: Partition, runs: list[tuple[dict[int, ProducerState], int, bool]]) -> list[int]:
    """:func:`_replay` of each ``(states, start, with_emptied)`` of ``runs``, over one read of the log's
    batch headers (each read checks every batch's CRC: :func:`not_carried`'s two replays read the
    whole log twice, 0.15-0.3 s per 1M records after a conversion's last write).  The runs' states
    are their own, so each ends as its own replay leaves it; a damaged log raises as that does."""
    emptied = [0] * len(runs)
    for seg in part.segments:
        later = part.log.segments.higher(seg.base)
        # a segment wholly before a run's start (its snapshot's): its state is in the snapshot
        wanted = [i for i, (_, start, _) in enumerate(runs) if later is None or later.base > start]
        if not wanted:
            continue
        for chunk in seg.header_chunks():
            batches = chunk.batches
            last = batches["base_offset"] + batches["last_offset_delta"]
            kept = ((batches["producer_id"] >= 0) & (batches["magic"] >= codec.MAGIC_V2)
                    & (last >= part.log_start_offset))
            for i in wanted:
                states, start, with_emptied = runs[i]
                chosen = batches[kept & (batches["base_offset"] >= start)]
                empty = (chosen["record_count"] == 0) & ((chosen["attributes"] & codec.CONTROL_FLAG) == 0)
                emptied[i] += int(empty.sum())
                if not with_emptied:
                    chosen = chosen[~empty]
                for pid, rows in _summaries(chosen):
                    _merge(states, pid, seg, chosen[rows])
    return emptied


@dataclass(slots=True)
class NotCarried:
    """What a copy of a partition's records (``dump --json`` lines written back, a conversion) does not
    carry of its producer state (:func:`not_carried`)."""

    #: the data batches the log cleaner emptied (Kafka 3.8 ``LogCleaner`` keeps a producer's last
    #: batch, its records removed, so that ``ProducerStateManager`` keeps its last sequence)
    emptied: int
    #: the producer-state ``.snapshot`` files (what the broker keeps of producers whose batches are gone)
    snapshots: int
    #: the producer ids whose state the records alone do not rebuild (by epoch, last sequence and open
    #: transaction), ascending
    producers: list[int]
    #: the copy drops every batch's producer sequence (a conversion)
    sequences_dropped: bool = False

    def words(self) -> str:
        """The producers whose state is lost and what holds it, as a note says them; empty where the
        records rebuild every producer's state (a ``.snapshot`` then holds nothing they lack)."""
        if not self.producers:
            return ""
        held = []
        if self.emptied:
            held.append(f"{self.emptied} batch{'es' if self.emptied > 1 else ''} the log cleaner emptied")
        if self.snapshots:
            held.append(f"{self.snapshots} producer-state .snapshot file{'s' if self.snapshots > 1 else ''}")
        shown = ", ".join(map(str, self.producers[:8])) + (", ..." if len(self.producers) > 8 else "")
        if self.sequences_dropped:
            held.insert(0, "their sequences")
        return (f"the state of producer{'s' if len(self.producers) > 1 else ''} {shown} (held by "
                f"{' and '.join(held) or 'batches below the log start'})")


def not_carried(part: Partition, *, keeps_sequences: bool = True) -> NotCarried:
    """What a copy of ``part``'s records from its log start loses of its producer state: the batches the
    log cleaner emptied and the ``.snapshot`` files, which no record carries, and the producers whose
    state (epoch, last sequence, open transaction) the broker (Kafka 3.8 ``ProducerStateManager``: its
    newest snapshot, then the batches from there) holds otherwise than it rebuilds from those records
    alone.  A broker loading such a copy takes those producers' next batches whatever their sequence:
    a batch a producer retries across the copy is not found as a duplicate.  ``keeps_sequences`` False:
    a copy that drops the batches' sequences too (a conversion: a RocketMQ message has no place for
    them), which loses every producer's last sequence.  ``O(batches)``.

    :raises CorruptDataError: damage in the log (as :func:`describe_producers`).
    """
    states, start = newest_seed(part)
    carried: dict[int, ProducerState] = {}
    # the broker's state, and what the records alone rebuild (a batch the log start is inside included)
    emptied = _replays(part, [(states, start, True), (carried, 0, False)])[0]
    if not keeps_sequences:
        for state in carried.values():
            state.last_sequence = NO_SEQUENCE
    lost = []
    for pid, state in sorted(states.items()):
        copy = carried.get(pid)
        if copy is None or (copy.producer_epoch, copy.last_sequence, copy.txn_start_offset) != \
                (state.producer_epoch, state.last_sequence, state.txn_start_offset):
            lost.append(pid)
    snapshots = sum(1 for name in files.list_dir(part.path) if name.endswith(snapshot.SUFFIX))
    return NotCarried(emptied, snapshots, lost, not keeps_sequences)


def _merge(states: dict[int, ProducerState], pid: int, seg: Any, rows: np.ndarray) -> None:
    """One producer's batches of a chunk (log order) applied to its state, as the broker replays them."""
    control = (rows["attributes"] & codec.CONTROL_FLAG) != 0
    txn = (rows["attributes"] & codec.TRANSACTIONAL_FLAG) != 0
    epochs = rows["producer_epoch"].astype(np.int64)
    state = states.get(pid)
    top = int(epochs.max())
    if state is None:
        state = states[pid] = ProducerState(pid, top, NO_SEQUENCE, -1, -1, None)
    elif top > state.producer_epoch:
        state.last_sequence = NO_SEQUENCE       # a new epoch forgets the old one's batches
    state.producer_epoch = max(top, state.producer_epoch)
    data = np.flatnonzero(~control & (epochs == state.producer_epoch))
    if len(data):
        row = rows[data[-1]]
        first = int(row["base_sequence"])
        state.last_sequence = (codec.increment_sequence(first, int(row["last_offset_delta"])) if first >= 0
                               else NO_SEQUENCE)
    state.last_timestamp = int(rows["max_timestamp"][-1])
    markers = np.flatnonzero(control)
    if len(markers):
        state.coordinator_epoch = _marker_epoch(seg, rows[markers[-1]])
        opened = np.flatnonzero(txn & ~control & (np.arange(len(rows)) > markers[-1]))
        state.txn_start_offset = int(rows["base_offset"][opened[0]]) if len(opened) else None
    elif state.txn_start_offset is None:
        opened = np.flatnonzero(txn & ~control)
        if len(opened):
            state.txn_start_offset = int(rows["base_offset"][opened[0]])


def by_producer_id(coordinator: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """The transaction coordinator's states (:func:`.txnstate.transaction_states`) by producer id."""
    return {int(state["producer_id"]): state for state in coordinator if "producer_id" in state}


def hanging(topic: str, partition: int, producers: Iterable[ProducerState],
            coordinator: Mapping[int, Mapping[str, Any]], now_ms: int, max_timeout_ms: int
            ) -> list[tuple[ProducerState, str | None]]:
    """The hanging transactions of ``topic``-``partition``'s producers, given the transaction
    coordinator's states by producer id (:func:`by_producer_id`): ``(producer, transactional id or
    None)`` in producer order."""
    found = []
    for producer in producers:
        if producer.txn_start_offset is None or now_ms - producer.last_timestamp <= max_timeout_ms:
            continue
        known = coordinator.get(producer.producer_id)
        if known is not None and known["state"] in COORDINATOR_FINISHES \
                and f"{topic}-{partition}" in known["partitions"]:
            continue
        found.append((producer, None if known is None else known["transactional_id"]))
    return found
