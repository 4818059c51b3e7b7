"""Flushing a RocketMQ store the way the broker does, in its two ``flushDiskType`` modes.

- ``SYNC_FLUSH`` (the broker's ``GroupCommitService``): an append returns only
  once its commitlog bytes are durable.  Writers that wait at the same time share
  one ``msync``: the first becomes the leader and flushes everything appended so
  far, the others wait for it (group commit).  The leader msyncs without holding
  the append lock, so other writers keep appending meanwhile.
- ``ASYNC_FLUSH`` (``FlushRealTimeService``): a background thread wakes every
  ``flushIntervalCommitLog`` ms and msyncs the commitlog when at least
  ``flushCommitLogLeastPages`` 4 KiB pages are dirty, or whatever is dirty once
  ``flushCommitLogThoroughInterval`` (10 s) has passed.

In both modes the same thread flushes the consume queues
(``FlushConsumeQueueService``: every ``flushIntervalConsumeQueue`` ms, when
``flushConsumeQueueLeastPages`` pages are dirty, all of them every
``flushConsumeQueueThoroughInterval``, 60 s) and, on that thorough flush, the
checkpoint.  The checkpoint's ``physicMsgTimestamp`` is the store time of the
last message whose commitlog bytes were flushed, ``logicsMsgTimestamp`` that of
the last message whose queue entry was flushed, as the broker sets them.

After a crash the broker's ``CommitLog.recoverAbnormally`` starts at the last file
whose first message's store time is at most ``min(physic, logics) - 3 s``: with
store times that ascend (the broker's clock) that file begins before anything not
yet flushed.  segstore's store times need not ascend (``store_timestamp`` given,
a conversion), so the checkpoint on disk is kept below the first store time of
every file begun past what is flushed: no higher when it is written, and lowered
and written before a file whose first message is older is begun.

Thread-safety: :attr:`FlushService.lock` is the store's append lock; appends
hold it, and so does the flusher while it takes a snapshot of what to flush.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from segstore import overlap
from segstore.errors import SegstoreError

from .checkpoint import CheckpointFile
from .commitlog import CommitLog
from .consumequeue import CQ_DTYPE, ConsumeQueue

if TYPE_CHECKING:
    from .config import BrokerConfig

SYNC_FLUSH = "SYNC_FLUSH"
ASYNC_FLUSH = "ASYNC_FLUSH"
#: ``MappedFile.OS_PAGE_SIZE``: the unit of the broker's "least pages" thresholds.
OS_PAGE_SIZE = 4096
#: ``flushCommitLogThoroughInterval`` and ``flushConsumeQueueThoroughInterval`` defaults.
FLUSH_COMMITLOG_THOROUGH_INTERVAL_MS = 10_000
FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS = 60_000


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """The broker's flush settings (milliseconds and pages)."""

    flush_disk_type: str = ASYNC_FLUSH
    interval_commitlog: int = 500
    least_pages_commitlog: int = 4
    thorough_commitlog: int = FLUSH_COMMITLOG_THOROUGH_INTERVAL_MS
    interval_consume_queue: int = 1000
    least_pages_consume_queue: int = 2
    thorough_consume_queue: int = FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS

    @classmethod
    def from_config(cls, config: BrokerConfig) -> FlushPolicy:
        """From a :class:`~segstore_rocketmq.config.BrokerConfig` (its broker-named fields)."""
        return cls(
            config.flushDiskType,
            config.flushIntervalCommitLog,
            config.flushCommitLogLeastPages,
            config.flushCommitLogThoroughInterval,
            config.flushIntervalConsumeQueue,
            config.flushConsumeQueueLeastPages,
            config.flushConsumeQueueThoroughInterval,
        )


class FlushService:
    """Makes a store's appends durable under a :class:`FlushPolicy`.

    :param commitlog: the store's commitlog.
    :param queues: returns the store's consume queues (called under :attr:`lock`).
    :param checkpoint: the store's checkpoint file.
    :param now_ms: a monotonic clock in milliseconds (for the intervals).
    """

    # read and set by the C appends on every call (FlushService.appended's bookkeeping)
    __slots__ = ("__dict__", "_appended_end", "_cq_dirty_entries", "_cq_last_ts", "_last_store_ts", "lock")

    def __init__(
        self,
        commitlog: CommitLog,
        queues: Callable[[], Iterable[ConsumeQueue]],
        checkpoint: CheckpointFile,
        policy: FlushPolicy,
        *,
        now_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000,
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.checkpoint = checkpoint
        self.policy = policy
        self.now_ms = now_ms
        self.lock = threading.RLock()
        self._cond = threading.Condition()
        self._flushing = False
        self._flushed = commitlog.end  # commitlog bytes below this are durable
        self._appended_end = commitlog.end
        self._last_store_ts = 0  # store time of the last message appended
        self._cq_dirty_entries = 0
        self._cq_last_ts = 0  # store time of the last queue entry written
        self._cq_flushed = commitlog.end  # queue entries of the messages below this are durable
        #: (base, first store time) of each commitlog file begun past what is durable (see file_begun)
        self._begun: list[tuple[int, int]] = []
        #: ``Checkpoint.min_timestamp`` of the checkpoint on disk
        self._disk_min = checkpoint.value.min_timestamp
        self._stop = threading.Event()
        #: the last error the flush thread met (it flushes again at the next interval); None: none
        self.last_error: SegstoreError | None = None
        self._thread: threading.Thread | None = None
        start = now_ms()
        self._last_thorough_commitlog = start
        self._last_thorough_queues = start
        self._last_queue_flush = start

    # -- called by the store ---------------------------------------------------------
    def appended(self, end: int, store_timestamp: int, queue_entries: int) -> None:
        """Record an append (call while holding :attr:`lock`)."""
        self._appended_end = end
        self._last_store_ts = store_timestamp
        self._cq_dirty_entries += queue_entries
        if queue_entries:
            self._cq_last_ts = store_timestamp

    def file_begun(self, base: int, first_store_timestamp: int) -> None:
        """A commitlog file's first message is about to be written (call while holding :attr:`lock`).

        4.9.7 ``CommitLog.isMappedFileMatchedRecover`` starts the broker's recovery after a crash at the
        last file whose first store time is not 0 and at most the checkpoint's ``getMinTimestamp()``:
        when this one would be, the checkpoint is lowered to its first store time and written first,
        so that the recovery never starts past messages whose queue entries are not flushed yet.
        A negative store time (Kafka's NO_TIMESTAMP, -1, converted) is at most any checkpoint's: the
        recovery may start at this file whatever it holds, so everything before it is flushed first.
        """
        if first_store_timestamp == 0:      # never a recovery start (isMappedFileMatchedRecover)
            return
        if first_store_timestamp < 0:
            self._flush_commitlog(force=True)
            self._flush_queues(force=True)
            return
        self._begun.append((base, first_store_timestamp))
        if first_store_timestamp <= self._disk_min:
            self._flush_checkpoint()

    def wait_durable(self, end: int) -> None:
        """``SYNC_FLUSH``: return once commitlog bytes below ``end`` are durable (group commit).

        Call without holding :attr:`lock`.  Other modes return at once.
        """
        if self.policy.flush_disk_type != SYNC_FLUSH:
            return
        with self._cond:
            while self._flushed < end:
                if self._flushing:
                    self._cond.wait()
                    continue
                self._flushing = True
                self._cond.release()
                try:
                    self._flush_commitlog(force=True)
                finally:
                    self._cond.acquire()
                    self._flushing = False
                    self._cond.notify_all()

    @property
    def flushed_offset(self) -> int:
        """Commitlog bytes below this offset are durable."""
        return self._flushed

    @property
    def durable_offset(self) -> int:
        """Messages below this commitlog offset are durable: their bytes and their queue entries."""
        return min(self._flushed, self._cq_flushed)

    def start(self) -> None:
        """Start the background flusher (consume queues; the commitlog too in ``ASYNC_FLUSH``)."""
        if self._thread is None:
            self._thread = overlap.start_thread(self._run, "segstore-rocketmq-flush")

    def stop(self) -> None:
        """Stop the background thread (waits for it); idempotent.  Flushes nothing by itself."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def flush_all(self) -> None:
        """Flush the commitlog, every queue and the checkpoint now (``flush()``/clean close)."""
        self._flush_commitlog(force=True)
        self._flush_queues(force=True)
        self._flush_checkpoint()

    def index_file_full(self, end_timestamp: int) -> None:
        """An index file filled up and was flushed: record its end time in the checkpoint and flush it
        (:meth:`.Checkpoint.index_file_flushed`: not an end at or below 0)."""
        if self.checkpoint.value.index_file_flushed(end_timestamp):
            self._flush_checkpoint()

    # -- the work ------------------------------------------------------------------------
    def _flush_commitlog(self, *, force: bool) -> bool:
        with self.lock:
            start, end, stamp = self._flushed, self._appended_end, self._last_store_ts
            if end <= start or (not force and end - start < self.policy.least_pages_commitlog * OS_PAGE_SIZE):
                return False
            segments = self.commitlog.log.segments.values(start, end)
        size = self.commitlog.file_size
        for seg in segments:
            lo = max(start - seg.base, 0)
            hi = min(end - seg.base, size)
            if hi > lo:
                seg.file.flush(lo, hi)
        with self._cond:
            self._flushed = max(self._flushed, end)
        if stamp > 0:
            self.checkpoint.value.physic_msg_timestamp = stamp
        return True

    def _flush_queues(self, *, force: bool) -> bool:
        with self.lock:
            dirty_bytes = self._cq_dirty_entries * CQ_DTYPE.itemsize
            if not force and dirty_bytes < self.policy.least_pages_consume_queue * OS_PAGE_SIZE:
                return False
            for cq in self.queues():
                cq.flush()
            self._cq_dirty_entries = 0
            self._cq_flushed = self._appended_end
            stamp = self._cq_last_ts
            if stamp > 0:
                self.checkpoint.value.logics_msg_timestamp = stamp
        return True

    def _flush_checkpoint(self) -> None:
        """Write the checkpoint (``StoreCheckpoint.flush``), its two times no later than the first store
        time of any file begun past what is durable (see :meth:`file_begun`)."""
        with self.lock:     # no file is begun meanwhile (file_begun runs under it)
            durable = self.durable_offset
            self._begun = [(base, ts) for base, ts in self._begun if base > durable]
            value = self.checkpoint.value
            if self._begun:     # a copy: the flushes set the times without the lock
                floor = min(ts for _, ts in self._begun)
                value = dataclasses.replace(
                    value, physic_msg_timestamp=min(value.physic_msg_timestamp, floor),
                    logics_msg_timestamp=min(value.logics_msg_timestamp, floor))
            self.checkpoint.flush(value)
            self._disk_min = value.min_timestamp

    def _run(self) -> None:
        policy = self.policy
        tick = (
            policy.interval_commitlog
            if policy.flush_disk_type == ASYNC_FLUSH
            else policy.interval_consume_queue
        )
        while not self._stop.wait(min(tick, policy.interval_consume_queue) / 1000):
            now = self.now_ms()
            if policy.flush_disk_type == ASYNC_FLUSH:
                thorough = now - self._last_thorough_commitlog >= policy.thorough_commitlog
                if thorough:
                    self._last_thorough_commitlog = now
                self._background(functools.partial(self._flush_commitlog, force=thorough))
            if now - self._last_queue_flush >= policy.interval_consume_queue:
                self._last_queue_flush = now
                thorough = now - self._last_thorough_queues >= policy.thorough_consume_queue
                if thorough:
                    self._last_thorough_queues = now
                # least pages 0 flushes whatever is dirty every time, and the checkpoint with it (4.9.7
                # FlushConsumeQueueService.doFlush: "if (0 == flushConsumeQueueLeastPages)")
                if thorough or policy.least_pages_consume_queue == 0:
                    self._background(self._flush_queues_and_checkpoint)
                else:
                    self._background(functools.partial(self._flush_queues, force=False))

    def _flush_queues_and_checkpoint(self) -> None:
        """The thorough queue flush and, once it succeeded, the checkpoint."""
        self._flush_queues(force=True)
        self._flush_checkpoint()

    def _background(self, step: Callable[[], object]) -> None:
        """Run a step of the flush thread; an error it meets is kept in :attr:`last_error` and the thread
        goes on (4.9.7 ``FlushRealTimeService.run`` and ``FlushConsumeQueueService.run`` catch and log
        it and flush again at the next interval).  ``flush()`` and ``close()`` flush themselves and raise
        what they meet."""
        try:
            step()
        except SegstoreError as err:
            self.last_error = err
