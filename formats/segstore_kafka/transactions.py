"""Kafka transactions through the store: a producer's transactional batches, then COMMIT or ABORT markers,
and the ``read_committed`` view.

What the log gets is what a transactional producer and the transaction coordinator
make a Kafka 3.8 broker write (``clients/.../producer/internals/Sender``,
``RecordAccumulator``; ``core/.../coordinator/transaction/TransactionMarkerChannelManager``;
``UnifiedLog.append`` with ``ProducerStateManager``):

- every batch of the transaction carries the producer id and epoch, the
  transactional attribute, and the producer's next sequence for that partition (0
  for a producer epoch new to the partition, else one past the last batch's last
  sequence, wrapping at 2^31);
- ``commit``/``abort`` append one control batch (``EndTransactionMarker``: version 0,
  the coordinator epoch) to every partition the transaction wrote; an ABORT adds the
  transaction to the segment's ``.txnindex`` (first offset, marker offset, last
  stable offset), as the broker's ``completeTxn`` does.

``read_committed`` (the consumer's ``isolation.level``, ``Fetcher`` with the
broker's ``FetchIsolation.TXN_COMMITTED``): records up to the last stable offset
(the first offset of a transaction open at the high watermark, else the high watermark),
control batches hidden, and the batches of aborted transactions (by ``.txnindex``:
same producer, from the transaction's first offset up to its marker) skipped.

Thread-safety: not thread-safe; one transaction at a time per producer id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from segstore.errors import CorruptDataError, InvalidMessageError, NotFoundError, StoreClosedError
from segstore.records import Message, integer_field
from segstore.store import AppendResult

from . import batch as codec
from .compaction import producer_state, stable_below
from .logdir import high_watermark
from .partition import Partition, no_key_message, time_out_of_range

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def next_sequence(part: Partition, producer_id: int, producer_epoch: int) -> int:
    """The producer's next sequence in a partition: one past its last batch's last sequence in the same
    epoch, else 0.  One header pass from the newest segment back; where the log holds no batch of
    the producer, its last sequence in the broker's newest producer snapshot (the log cut below its
    batches, :func:`.producers.newest_seed`): the broker still expects the one after it
    (``ProducerAppendInfo.checkSequence``), and the producer sends it."""
    from .producers import newest_seed

    for seg in reversed(part.segments):
        last = None
        for header in seg.headers():
            if header.producer_id == producer_id and not header.is_control:
                last = header
        if last is not None:
            if last.producer_epoch != producer_epoch or last.base_sequence < 0:
                return 0
            return codec.increment_sequence(last.last_sequence, 1)
    states, _ = newest_seed(part)      # one that does not read is dropped, as the broker's loader does
    state = states.get(producer_id)
    if state is None or state.producer_epoch != producer_epoch or state.last_sequence < 0:
        return 0
    return codec.increment_sequence(state.last_sequence, 1)


def check_fencing(part: Partition, producer_id: int, producer_epoch: int, *,
                  coordinator_epoch: int | None = None) -> None:
    """Refuse a write the partition leader refuses as a zombie's (Kafka 3.8.0 ``ProducerAppendInfo``,
    origin CLIENT for data, COORDINATOR for markers): a producer epoch below the producer's current one
    there (``checkProducerEpoch``: ``InvalidProducerEpochException``; a newer epoch fenced this
    producer, through ``InitProducerId`` or the coordinator's abort of a timed-out transaction), or a
    marker's coordinator epoch below the one of its last marker there (``checkCoordinatorEpoch``:
    ``TransactionCoordinatorFencedException``).  The producer state is the broker's after loading the
    log (:func:`.producers.describe_producers`: an expired producer is forgotten, as the broker forgets it).

    :raises InvalidMessageError: a fenced epoch (nothing written).
    """
    from .producers import describe_producers

    try:
        states = describe_producers(part, part.clock())
    except CorruptDataError:
        return      # a producer snapshot that does not read: the broker's loader drops it (no state to fence)
    for state in states:
        if state.producer_id != producer_id:
            continue
        if producer_epoch < state.producer_epoch:
            raise InvalidMessageError(
                f"expected producer {producer_id}'s epoch at or above {state.producer_epoch} (its latest in "
                f"{part.topic}-{part.partition}; Kafka refuses an older one, InvalidProducerEpochException), "
                f"found {producer_epoch}", part.path)
        if coordinator_epoch is not None and coordinator_epoch < state.coordinator_epoch:
            raise InvalidMessageError(
                f"expected a coordinator epoch at or above {state.coordinator_epoch} (of producer "
                f"{producer_id}'s last marker in {part.topic}-{part.partition}; Kafka refuses an older one, "
                f"TransactionCoordinatorFencedException), found {coordinator_epoch}", part.path)


class Transaction:
    """One transaction of one producer over a :class:`~segstore_kafka.store.KafkaStore` opened for appends.

    Use as a context manager (commits on success, aborts on an exception), or call
    :meth:`commit` / :meth:`abort`.
    """

    def __init__(self, store: Any, producer_id: int, producer_epoch: int = 0, *,
                 coordinator_epoch: int = 0) -> None:
        # checked here, before a batch is written: a bool, a float or a str reached the encoder
        # (TypeError, struct.error, True as producer 1), and a coordinator epoch out of range failed only
        # at commit, the transaction's batches written and left open
        try:
            producer_id = integer_field(producer_id, "producer_id")
            producer_epoch = integer_field(producer_epoch, "producer_epoch")
            coordinator_epoch = integer_field(coordinator_epoch, "coordinator_epoch")
        except InvalidMessageError as err:
            raise InvalidMessageError(err.message, store.path) from None
        if not 0 <= producer_id <= INT64_MAX or not 0 <= producer_epoch <= 32767:
            raise InvalidMessageError(f"expected a producer id in [0, {INT64_MAX}] and an epoch in "
                                      f"[0, 32767], found {producer_id} and {producer_epoch}", store.path)
        if not 0 <= coordinator_epoch <= INT32_MAX:     # EndTransactionMarker's int32, a leader epoch
            raise InvalidMessageError(f"expected a coordinator epoch in [0, {INT32_MAX}], found "
                                      f"{coordinator_epoch}", store.path)
        self.store = store
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self._sequences: dict[tuple[str, int], int] = {}
        self.done = False

    def append(self, message: Message | dict) -> AppendResult:
        return self.append_batch([message])[0]

    def append_batch(self, messages: Iterable[Message | dict], *,
                     compression: str | None = None) -> list[AppendResult]:
        """One transactional batch per partition touched, in first-seen order; results in input order.

        ``compression`` overrides the topic's ``compression.type`` (a producer's own choice)."""
        if self.done:
            raise StoreClosedError("expected an open transaction, found it already ended", self.store.path)
        self.store._check_writable()
        # checked as KafkaStore.append_batch checks them, before any partition is created
        msgs, groups = self.store.checked_messages(list(messages))
        results: list[AppendResult | None] = [None] * len(msgs)
        for key in groups:      # every partition new to the transaction checked before anything is written
            if key not in self._sequences:
                try:
                    held = self.store.partition_of(*key)
                except NotFoundError:
                    continue        # a new partition: no producer state to fence
                check_fencing(held, self.producer_id, self.producer_epoch)
        # and every record's key and time (LogValidator.validateKey, validateTimestamp: a record's time
        # only where it has a key), a partition's batch at a time; processRecordErrors reports a batch's
        # time error before its missing keys
        for key, indices in groups.items():
            config, _, _, now = self.store._append_state(*key)
            keyless = [i for i in indices if msgs[i].key is None] if config.compact else []
            timed = [i for i in indices if msgs[i].key is not None or not config.compact] \
                if config.checks_timestamps else []
            for i in timed:
                stamp = msgs[i].timestamp
                if stamp is not None and stamp >= 0 and time_out_of_range(config, stamp, now):
                    raise InvalidMessageError(f"Timestamp {stamp} of a record for {key[0]}-{key[1]} is out "
                                              "of range of the topic's message.timestamp.before/after.max.ms",
                                              self.store.path)
            if keyless:
                raise InvalidMessageError(no_key_message(f"message {keyless[0]} of the call", config),
                                          self.store.path)
        for key, indices in groups.items():
            part = self.store.partition_of(*key, create=True)
            if key not in self._sequences:
                self._sequences[key] = next_sequence(part, self.producer_id, self.producer_epoch)
            now = part.clock()
            records = [(m.key, m.value, now if m.timestamp is None or m.timestamp < 0 else m.timestamp,
                        m.headers)
                       for m in (msgs[i] for i in indices)]
            done = part.append_records(records, producer_id=self.producer_id,
                                       producer_epoch=self.producer_epoch, base_sequence=self._sequences[key],
                                       transactional=True, compression=compression, now_ms=now,
                                       check_times=False)      # every partition's checked above
            self._sequences[key] = codec.increment_sequence(self._sequences[key], len(records))
            for n, i in enumerate(indices):
                results[i] = AppendResult(key[0], key[1], done.base_offset + n, done.position, done.size,
                                          {"segment": done.segment, "producer_id": self.producer_id})
        return [r for r in results if r is not None]

    def _end(self, kind: str, timestamp: int | None) -> list[AppendResult]:
        if self.done:
            raise StoreClosedError("expected an open transaction, found it already ended", self.store.path)
        try:
            timestamp = integer_field(timestamp, "timestamp", None)
        except InvalidMessageError as err:
            raise InvalidMessageError(err.message, self.store.path) from None
        for topic, partition in self._sequences:      # every marker checked before one is written
            check_fencing(self.store.partition_of(topic, partition), self.producer_id, self.producer_epoch,
                          coordinator_epoch=self.coordinator_epoch)
        self.done = True
        out = []
        for topic, partition in self._sequences:
            part = self.store.partition_of(topic, partition)
            done = part.append_control(kind, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                       coordinator_epoch=self.coordinator_epoch,
                                       timestamp=part.clock() if timestamp is None else timestamp)
            out.append(AppendResult(topic, partition, done.base_offset, done.position, done.size,
                                    {"segment": done.segment, "marker": kind}))
        return out

    def commit(self, timestamp: int | None = None) -> list[AppendResult]:
        """Write a COMMIT marker to every partition the transaction wrote."""
        return self._end("COMMIT", timestamp)

    def abort(self, timestamp: int | None = None) -> list[AppendResult]:
        """Write an ABORT marker to every partition the transaction wrote (and its ``.txnindex`` entry)."""
        return self._end("ABORT", timestamp)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if self.done:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def last_stable_offset(part: Partition) -> int:
    """``UnifiedLog.lastStableOffset``: the first offset of a transaction open at the high watermark
    (still open, or ended by a marker the followers have not copied yet), else the high watermark
    (:func:`.compaction.stable_below`)."""
    hw = high_watermark(part)
    return stable_below(part, hw, first_open_offset(part, hw))


def first_open_offset(part: Partition, end: int | None = None) -> int | None:
    """The first offset of a transaction open in ``part`` at offset ``end`` (None: the log end; None
    returned: none), from the producer state the batches below it imply
    (:func:`compaction.producer_state`, a walk of every batch header).

    Remembered on the partition for its segments as they are (bases and sizes, and the log start)
    and ``end``: a read_committed read of a few records paid the whole walk every time (11 ms a
    read of a 17 MB log).  An append, a truncation, a roll or a deletion changes the key; a cleaning
    changes sizes, and never touches an open transaction (it stops at the first uncleanable offset,
    at most the last stable one).  ``O(segments)`` when remembered, ``O(batches)`` otherwise."""
    key = (part.log_start_offset, end, tuple((seg.base, seg.size) for seg in part.segments))
    known = part.open_transactions
    if known is not None and known[0] == key:
        return known[1]
    _, open_first = producer_state(part, part.clock(), end=end)
    part.open_transactions = (key, open_first)
    return open_first
