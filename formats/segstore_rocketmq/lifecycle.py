"""The RocketMQ store's life cycle around its files: abort marker, recovery, flushing, queries, verify.

:class:`LifecycleMixin` is mixed into :class:`~segstore_rocketmq.store.RocketMQStore`
(which owns the commitlog, queues and index) and adds what the broker's
``DefaultMessageStore`` does around them:

- opening for append (the writer lock is already held): the ``checkpoint`` is
  mapped, recovery runs (unclean if the ``abort`` file is there, see
  :mod:`.recovery`), the ``abort`` file is created, the flusher starts
  (:mod:`.flush`);
- appends hold the flusher's lock, then wait for durability in ``SYNC_FLUSH``
  (group commit) without holding it;
- a clean close stops the flusher, flushes everything, writes the checkpoint
  and removes ``abort``; :meth:`abandon` (a simulated crash) leaves all of it;
- key and time queries (:mod:`.query`), ``segstore query`` and ``verify`` (:mod:`.verify`).

Thread-safety: appends from several threads are serialised by the flusher's
lock (and share syncs); everything else is as thread-safe as the store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from segstore import files, progress
from segstore.errors import (
    ConversionError,
    CorruptDataError,
    InvalidTopicError,
    NotFoundError,
    OffsetOutOfRangeError,
    StoreClosedError,
    UnrepairedDataError,
    UnsupportedOperationError,
)
from segstore.overlap import thread_count
from segstore.records import Message, Record
from segstore.store import (
    READ_COMMITTED,
    AppendResult,
    DumpLine,
    Problem,
    QueryRequest,
    QueryResult,
    check_isolation,
    read_until_damage,
    text_word,
)

from .checkpoint import FILE_NAME as CHECKPOINT_FILE
from .checkpoint import CheckpointFile
from .config import TOPIC_MAX_LENGTH_V2, validate_topic
from .consumequeue import CUT_DIR, SEGSTORE_DIR
from .dirnames import INDEX_DIR
from .message import RocketMQMessage, has_queue_entry
from .query import (
    NO_HIT_LIMIT,
    SCAN_NOTE,
    TIME_MAX,
    DamagedMessage,
    newest_messages,
    query_by_key,
    scan_by_key,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from segstore.layouts import IndexSet

    from .commitlog import CommitLog
    from .config import BrokerConfig
    from .consumequeue import ConsumeQueue
    from .fastappend import PlainBatch
    from .flush import FlushService
    from .indexfile import IndexService
    from .topicconfig import TopicConfigs

ABORT_FILE = "abort"
#: A chunk whose columns append_arrow makes again for writing (not kept from its check).
_MAKE_AGAIN = object()


def keys_and_tags(msg: RocketMQMessage) -> str:
    """``keys=a,b tags=T`` for a message's lines (``-`` for none; a value holding white space, a quote or
    a control character quoted, :func:`segstore.store.text_word`)."""
    keys = ",".join(msg.keys)
    return f"keys={text_word(keys) if keys else '-'} tags={text_word(msg.tags) if msg.tags else '-'}"


class _StoreHost(Protocol):
    """What :class:`LifecycleMixin` needs of the class it is mixed into (``RocketMQStore``)."""

    path: str
    config: BrokerConfig
    queues: dict[tuple[str, int], ConsumeQueue]
    index: IndexService | None
    indexes: IndexSet | None
    notes: list[str]
    topic_configs: TopicConfigs
    _next_offsets: dict[tuple[str, int], int]

    @property
    def commitlog(self) -> CommitLog: ...
    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue: ...
    def tags_code(self, msg: RocketMQMessage) -> int: ...
    def flush(self) -> None: ...
    def _check_open(self) -> None: ...
    def _check_writable(self) -> None: ...
    def _find_key(self, key: Any, partition: Any, begin: Any, end: Any, max_hits: Any, *,
                  topic: Any = "") -> bytes: ...
    def _append_locked(self, messages: Iterable[Any], *, as_stored: bool = False) -> list[AppendResult]: ...
    def _write_plain(self, batch: PlainBatch) -> list[AppendResult]: ...
    def scan(self) -> Iterator[RocketMQMessage]: ...
    @property
    def trailing_separator(self) -> bool: ...
    def read(self, topic: str, partition: int, offset: int = 0,
             count: int | None = None) -> Iterator[RocketMQMessage]: ...
    def offset_range(self, topic: str, partition: int) -> tuple[int, int]: ...
    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None: ...
    def to_json(self, record: RocketMQMessage) -> dict[str, Any]: ...


class _Lifecycle(_StoreHost, Protocol):
    """The store as the mixin's methods see it (their ``self`` type): the host's members and the
    mixin's own that they call on each other.  mypy checks at each call that the store has them all."""

    checkpoint: CheckpointFile | None
    #: whether opening for append found an ``abort`` file (the last writer crashed); None: not opened so
    abort_at_open: bool | None
    recovery_lines: list[str]
    _flusher: FlushService | None
    _left_damaged: list[tuple[str, int, int]]
    _left_whole: list[tuple[str, int, int, str]]
    _blank_entries: list[tuple[str, int, dict[tuple[str, int], int]]]
    _append_one: Callable[[Any], AppendResult | None] | None
    _append_many: Callable[[Any], list[AppendResult] | None] | None
    _checked_whole: tuple[Any, ...] | None
    index_incomplete: bool

    def _appender(self, flusher: FlushService) -> Any: ...
    def _flushing(self) -> FlushService: ...
    def _checked_state(self) -> tuple[Any, ...]: ...
    def _recover(self, *, abnormal: bool, full: bool = False, threads: int | None = None) -> list[str]: ...
    def _commitlog_bytes(self) -> int: ...
    def _check_lost_messages(self, actions: list[str]) -> None: ...
    def _append(self, messages: Iterable[Any], *, as_stored: bool) -> list[AppendResult]: ...
    def append_placed(self, batch: PlainBatch, last_store_timestamp: int, count: int) -> None: ...
    def append_stored(self, messages: Iterable[RocketMQMessage]) -> list[AppendResult]: ...
    def encode_checked(self, built: Iterable[RocketMQMessage]) -> list[bytearray]: ...
    def _arrow_columns(self, chunk: pa.RecordBatch, trailing: bool) -> Any: ...
    def _message_or_none(self, physical_offset: int) -> RocketMQMessage | DamagedMessage | None: ...
    def _unchecked_or_none(self, physical_offset: int) -> RocketMQMessage | None: ...
    def query_by_key(self, topic: str, key: str, *, max_hits: int = 32, begin: int = 0,
                     end: int = TIME_MAX) -> list[RocketMQMessage]: ...
    def _hits(self, found: list[RocketMQMessage], decompress: bool = False,
              damage: CorruptDataError | None = None) -> QueryResult: ...
    def consumed(self, msg: RocketMQMessage) -> RocketMQMessage: ...
    def _key_hits(self, topic: str, key: str | bytes, partition: int | None, begin: int | None,
                  end: int | None, max_hits: int | None, *,
                  committed: bool = False) -> list[RocketMQMessage]: ...
    def describe(self, record: RocketMQMessage) -> str: ...


class LifecycleMixin:
    """Abort file, checkpoint, recovery, flush modes, queries and verify for a RocketMQ store.

    Its methods take ``self`` as :class:`_Lifecycle`: what they use of the host class is
    declared in :class:`_StoreHost`.
    """

    checkpoint: CheckpointFile | None
    #: whether opening for append found an ``abort`` file (the last writer crashed); None: not opened so
    abort_at_open: bool | None
    recovery_lines: list[str]
    _flusher: FlushService | None
    _left_damaged: list[tuple[str, int, int]]
    _left_whole: list[tuple[str, int, int, str]]
    #: the BLANKs ending a file that queue entries point into, as the last full recovery found them
    _blank_entries: list[tuple[str, int, dict[tuple[str, int], int]]]
    #: the single append in one C call while open for append (None: the general path only)
    _append_one: Callable[[Any], AppendResult | None] | None
    #: the batch append of a list in one C call while open for append (None: the general path only)
    _append_many: Callable[[Any], list[AppendResult] | None] | None
    _checked_whole: tuple[Any, ...] | None
    #: an index put failed after its messages were written (a full disk): a close keeps the ``abort``
    #: file, as 4.9.7 ``DefaultMessageStore.shutdown`` keeps it once ``makeIndexFileError`` made the
    #: store unwriteable, so that the next start recovers the index; :meth:`recover` rebuilds it
    index_incomplete: bool

    def _init_lifecycle(self) -> None:
        self.checkpoint = None
        self.abort_at_open = None
        self.recovery_lines = []
        self._flusher = None
        self._append_one = None
        self._append_many = None
        self._left_damaged = []     # damaged ranges the last recovery left in place (see recover)
        self._left_whole = []       # of those, whole messages at the data's end (keep_whole_tail)
        self._blank_entries = []
        #: the store's extent (:meth:`_checked_state`) when a recovery last walked and checked all of
        #: it with nothing left damaged; None when none did (see recover)
        self._checked_whole = None
        self.index_incomplete = False

    def _flushing(self: _Lifecycle) -> FlushService:
        """The flusher of a store opened for append (callers check that first).

        :raises StoreClosedError: the store was closed (the flusher is gone).
        """
        if self._flusher is None:
            raise StoreClosedError("expected a store open for append, found it closed", self.path)
        return self._flusher

    # -- open / close ----------------------------------------------------------------
    def _open_for_append(self: _Lifecycle) -> None:
        """Recover what the last writer left, mark the store open, start flushing."""
        from .flush import FlushPolicy, FlushService  # the writer's thread and policy: not for reading

        abort = os.path.join(self.path, ABORT_FILE)
        crashed = self.abort_at_open = files.exists(abort)
        checkpoint = self.checkpoint = CheckpointFile(os.path.join(self.path, CHECKPOINT_FILE), writable=True)
        resized = checkpoint.repairs + [line for q in self.queues.values() for line in q.repairs]
        if self.index is not None:
            aside = os.path.join(self.path, SEGSTORE_DIR, CUT_DIR, "index")
            resized += (self.index.set_aside_strays(aside) + self.index.set_aside_refused(aside)
                        + self.index.cut_past_end(aside))

            def index_file_full(end_timestamp: int) -> None:
                """A file the recovery's re-indexing fills records its end, as 4.9.7's dispatch through
                IndexService.buildIndex does (IndexService.flush); :meth:`_recover` writes the checkpoint."""
                checkpoint.value.index_file_flushed(end_timestamp)

            self.index.on_file_full = index_file_full
        self.recovery_lines = (self.commitlog.repairs + resized + self.commitlog.remove_empty_tail()
                               + self._recover(abnormal=crashed))
        self._next_offsets = {key: cq.max_offset for key, cq in self.queues.items()}
        files.touch(abort)
        files.fsync_dir(self.path)
        flusher = self._flusher = FlushService(
            self.commitlog,
            lambda: list(self.queues.values()),
            checkpoint,
            FlushPolicy.from_config(self.config),
        )
        if self.index is not None:
            self.index.on_file_full = flusher.index_file_full
        self.commitlog.before_file_begun = flusher.file_begun
        flusher.start()
        appender = self._appender(flusher)
        if appender is not None:
            self._append_one, self._append_many = appender.append, appender.append_batch

    def _recover(self: _Lifecycle, *, abnormal: bool, full: bool = False,
                 threads: int | None = None) -> list[str]:
        from .recovery import RecoveryContext, recover  # a reader never recovers (the module: 3 ms)

        if self.checkpoint is None:
            raise StoreClosedError("expected a store open for append, found it closed", self.path)
        ctx = RecoveryContext(
            self.commitlog,
            self.queues,
            self._queue,
            self.index,
            self.checkpoint.value,
            self.tags_code,
            abnormal,
            full,
            confirm_offset=self.config.is_5x,
            threads=thread_count(threads),
            batch_topics=self.topic_configs.batch_cq_topics(),
            multi_dispatch=self.config.enableMultiDispatch,
            lmq=self.config.enableLmq,
            index_safe=self.config.messageIndexEnable and self.config.messageIndexSafe,
            index_directory=os.path.join(self.path, INDEX_DIR),
        )
        index_before = self.checkpoint.value.index_msg_timestamp
        lines = recover(ctx)
        self._left_damaged = ctx.left
        self._left_whole = ctx.whole
        self._blank_entries = ctx.blank_entries
        self._checked_whole = self._checked_state() if ctx.checked_whole else None
        if ctx.checkpoint_changed or self.checkpoint.value.index_msg_timestamp != index_before:
            # a time lowered to the data that is left, or the end of an IndexFile filled and flushed
            self.checkpoint.flush()
        return lines

    def _flush_durable(self: _Lifecycle) -> None:
        """Flush commitlog, queues and checkpoint through the flusher (under its lock)."""
        flusher = self._flushing()
        flusher.flush_all()
        if self.index is not None:
            with flusher.lock:
                self.index.flush()

    def _close_durable(self: _Lifecycle) -> None:
        """A clean shutdown: stop the flusher, flush everything, remove the abort file (kept while the
        index misses messages: :attr:`index_incomplete`)."""
        self._flushing().stop()
        self.flush()
        if not self.index_incomplete:
            files.remove(os.path.join(self.path, ABORT_FILE))
            files.fsync_dir(self.path)

    def _abandon_durable(self: _Lifecycle) -> None:
        """A crash: stop the flusher thread, flush nothing, leave the abort file."""
        if self._flusher is not None:
            self._flusher.stop()

    def _release_lifecycle(self: _Lifecycle) -> None:
        self._append_one = self._append_many = None
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        if self.checkpoint is not None:
            self.checkpoint.close()
            self.checkpoint = None

    # -- appending --------------------------------------------------------------------
    def append(self: _Lifecycle, message: Message | Mapping[str, Any]) -> AppendResult:
        """Append one message; returns where it landed (:meth:`append_batch` of one).

        A plain message (:mod:`.fastappend`) in ``ASYNC_FLUSH`` is one C call (``_append_one``);
        whatever that path does not take goes through :meth:`append_batch`'s.
        """
        one = self._append_one
        if one is not None:
            result = one(message)
            if result is not None:
                return result
        return self._append([message], as_stored=False)[0]

    def append_batch(self: _Lifecycle, messages: Iterable[Message | Mapping[str, Any]]) -> list[AppendResult]:
        """Append messages in order; in ``SYNC_FLUSH`` returns once they are durable.

        Several threads may append at once: appends are serialised, and writers
        waiting for durability share one sync (group commit).  A list of plain messages
        (:mod:`.fastappend`) in ``ASYNC_FLUSH`` is one C call (``_append_many``) where every file
        has room for it; anything else goes through the general path.
        """
        many = self._append_many
        if many is not None:
            results = many(messages)
            if results is not None:
                return results
        return self._append(messages, as_stored=False)

    def append_stored(self: _Lifecycle, messages: Iterable[RocketMQMessage]) -> list[AppendResult]:
        """Append messages that were stored once already, exactly as given.

        Topic, queue, flag, sysFlag, times, hosts and the properties in their stored
        order are kept; none of the broker's put-time rules (delay rewrite, HashMap
        order, store clock) applies.  Only the placement is the store's: a message
        lands at the next physical and queue offset, as in :meth:`append_batch`.
        Used to restore a converted store byte for byte.
        """
        return self._append(messages, as_stored=True)

    def append_arrow(self: _Lifecycle, batch: pa.RecordBatch | pa.Table) -> int:
        """Append the rows of a ``pyarrow.RecordBatch`` or ``Table`` of
        :data:`segstore.columns.ROCKETMQ_SCHEMA` (what :meth:`scan_arrow` yields) as
        :meth:`append_stored` appends messages; returns the rows appended.  Which columns make a
        message and which are derived (and not read): :mod:`.appendarrow`.  The common rows are
        encoded in columns (C), without a Python object each; the placement is the store's.  A scan
        of one store appended to an empty one of the same geometry and version scans equal to it (one whose
        source retention trimmed once started where the source starts: :meth:`start_commitlog_at`,
        :meth:`start_queue_at`).

        Rows are written :data:`.appendarrow.CHUNK_ROWS` at a time (memory stays bounded), once every
        chunk is checked: a refused call writes nothing.  In ``SYNC_FLUSH`` returns once they are
        durable.

        :raises InvalidMessageError: not Arrow data of that schema, or a row the format cannot carry.
        :raises InvalidTopicError: a topic the broker refuses.
        :raises MessageTooLargeError: a message above ``maxMessageSize``.
        """
        import pyarrow.compute as pc  # pyarrow.compute (0.05 s to import) only where a computation runs

        from . import appendarrow, arrowwrite  # the columnar writer's modules load on first use

        self._check_writable()
        chunks = appendarrow.batches(batch)
        trailing = self.trailing_separator
        # checked whole first: a refusal writes nothing.  The columns the check makes are kept for the
        # writing pass while they hold CHUNK_ROWS rows in all (memory stays bounded), made again past that.
        kept: list[Any] = []
        rows = 0
        for chunk in chunks:
            for topic in pc.unique(chunk.column("topic")).to_pylist():
                validate_topic(topic, self.config.topic_max_length)
            msgs = self._arrow_columns(chunk, trailing)
            if msgs is None:
                self.encode_checked(appendarrow.reference_messages(chunk, trailing))
            rows += chunk.num_rows
            kept.append(msgs if rows <= appendarrow.CHUNK_ROWS else _MAKE_AGAIN)
        appended = 0
        for chunk, msgs in zip(chunks, kept, strict=True):
            written = False
            if msgs is _MAKE_AGAIN:
                msgs = self._arrow_columns(chunk, trailing)
            if msgs is not None:
                with self._flushing().lock:     # placed at the end the lock keeps
                    start = self.commitlog.end
                    placed = arrowwrite.assign(self, msgs, start)
                    encoded = None if placed is None else arrowwrite.encode(self, placed, start)
                    if encoded is not None:
                        self.append_placed(encoded[0], encoded[1], chunk.num_rows)
                        written = True
            if not written:      # the reference: one message object a row
                self.append_stored(appendarrow.reference_messages(chunk, trailing))
            appended += chunk.num_rows
        return appended

    def _arrow_columns(self: _Lifecycle, chunk: pa.RecordBatch, trailing: bool) -> Any:
        """:func:`.appendarrow.columns` of ``chunk`` if the columnar path is built and takes every row, its
        messages within the size limit (:func:`.arrowwrite.assign` takes them); None otherwise."""
        from . import appendarrow

        if not appendarrow.available():
            return None
        msgs = appendarrow.columns(chunk, trailing)
        if msgs is None or appendarrow.oversized(msgs, self.config):
            return None
        return msgs

    def append_placed(self: _Lifecycle, batch: PlainBatch, last_store_timestamp: int, count: int) -> None:
        """Write ``count`` messages the caller encoded and placed at the commitlog's end, with their
        consume-queue rows and index entries (a conversion restoring messages in columns,
        ``arrowwrite``): as :meth:`append_stored` writes them, without an :class:`AppendResult`
        each.  In ``SYNC_FLUSH`` returns once they are durable.

        :raises ConversionError: the batch was placed at another position than the commitlog's end.
        """
        self._check_writable()
        flusher = self._flushing()
        with flusher.lock:
            if batch.start != self.commitlog.end:
                raise ConversionError(f"expected a batch placed at the commitlog end {self.commitlog.end}, "
                                      f"found one at {batch.start}", self.path, batch.start)
            self._write_plain(batch)
            if self.indexes is not None:  # extra index layouts (segstore.layouts)
                self.indexes.append()
            end = self.commitlog.end
            if count:
                flusher.appended(end, last_store_timestamp, count)
        if count:
            flusher.wait_durable(end)

    def _append(self: _Lifecycle, messages: Iterable[Any], *, as_stored: bool) -> list[AppendResult]:
        flusher = self._flusher
        if flusher is None:     # read-only or closed: the error that says which
            self._check_writable()
            flusher = self._flushing()
        with flusher.lock:      # _append_locked checks again under the lock
            results = self._append_locked(messages, as_stored=as_stored)
            if self.indexes is not None:  # extra index layouts (segstore.layouts)
                self.indexes.append()
            end = self.commitlog.end
            if results:
                flusher.appended(end, results[-1].extra["store_timestamp"], len(results))
        if results:
            flusher.wait_durable(end)
        return results

    # -- recovery -------------------------------------------------------------------------
    def recover(self: _Lifecycle, threads: int | None = None) -> list[str]:
        """What recovery did when the store was opened for append, then a full check of the whole store.

        The full check walks the whole commitlog and checks every consume-queue
        and index entry of it (the broker only re-checks the last files), repairing
        what it finds the same way.  ``threads`` (default: see segstore.overlap.thread_count)
        decodes the commitlog on that many threads (the same repairs with any number; the
        recovery at open uses the default).  Runtime complexity: ``O(store size)``.

        :raises ConfigError: ``threads`` below 1.
        """
        threads = thread_count(threads)
        self._check_writable()
        opened, self.recovery_lines = self.recovery_lines, []
        total = self._commitlog_bytes()
        with self._flushing().lock, progress.task("recover", total) as advance:
            if self._checked_whole is not None and self._checked_whole == self._checked_state():
                # The recovery at open walked the whole commitlog and checked every queue and index
                # entry (a store that lost its queues or index, a small store, an abort file before
                # the first file's messages) and nothing has changed since: the same walk would find
                # what it left, so the full check is that one.
                lines = ["commitlog: full check; the recovery at open walked and checked the whole store"]
                advance(total)
            else:
                lines = self._recover(abnormal=False, full=True, threads=threads)
            self._next_offsets = {key: cq.max_offset for key, cq in self.queues.items()}
            self.index_incomplete = False   # every message's keys are indexed again
        self._check_lost_messages(opened + lines)
        whole = [w[:3] for w in self._left_whole]
        damaged = [left for left in self._left_damaged if left not in whole]
        if damaged:
            # The broker would stop its walk there and truncate the intact messages after it.
            path, pos, length = damaged[0]
            more = len(damaged) - 1
            raise UnrepairedDataError(
                f"expected messages, found {length} damaged bytes with intact messages after them: "
                f"left in place, as cutting them would lose those messages"
                + (f" ({more} more damaged range{'s' if more > 1 else ''})" if more else "")
                + "; every other repair is done (a RocketMQ broker started on the store stops its recovery "
                "walk at damage in the files it walks and truncates every message after it: read or "
                "convert them out first)", path, pos, actions=opened + lines)
        if self._left_whole:
            path, pos, length, why = self._left_whole[0]
            raise UnrepairedDataError(
                f"expected a message whose header matches its place, found a whole message of {length} "
                f"bytes (its length, magic and body CRC check out) whose header does not ({why}): left in "
                f"place, as the broker keeps it (its recovery checks none of those fields) and cutting it "
                f"would lose it; every other repair is done", path, pos, actions=opened + lines)
        return opened + lines

    def _checked_state(self: _Lifecycle) -> tuple[Any, ...]:
        """What a write or repair changes: the commitlog's extent, each queue's and each index file's
        entries.  ``O(queues + index files)``."""
        cl = self.commitlog
        index = () if self.index is None else tuple((f.path, f.header.index_count) for f in self.index.files)
        return (cl.min_offset, cl.end, index,
                tuple((key, q.min_offset, q.max_offset) for key, q in sorted(self.queues.items())))

    def _check_lost_messages(self: _Lifecycle, actions: list[str]) -> None:
        """After a short commitlog file was resized, or with files missing between others: raise what
        says that queue entries point at the messages the missing bytes held (their offsets cannot be
        given back; the broker would serve what lies there now, or skip them where no file is).
        ``O(entries log ranges)`` in numpy, over the queues' maps (:func:`.recovery.entries_in_ranges`)."""
        from .recovery import entries_in_ranges  # only a writer recovers (see _recover)

        lost = self.commitlog.lost
        for (path, pos, end), pointed in zip(lost, entries_in_ranges(self.queues, lost), strict=True):
            lo = int(os.path.basename(path)) + pos
            hit = list(pointed.items())
            where = ", ".join(f"{t}/{q}: {n}" for (t, q), n in hit[:5])
            pointing = (f"; {sum(pointed.values())} consume-queue entries point at them "
                        f"({where}{', ...' if len(hit) > 5 else ''})")
            if pos == 0 and not files.exists(path):
                raise UnrepairedDataError(
                    f"expected commitlog files from physical offset {lo} to {end}, found none: the messages "
                    f"they held are lost{pointing if hit else ''}; every other repair is done",
                    path, None, actions=actions)
            if hit:
                raise UnrepairedDataError(
                    f"expected the file's messages up to {self.commitlog.file_size} bytes, found them lost "
                    f"with its missing bytes{pointing}; every other repair is done",
                    path, pos, actions=actions)
        if self._blank_entries:
            # the same loss seen again: a short file an earlier recovery gave its BLANK (the lost list
            # above is only known to the run that resized it); the entries cannot be taken back
            path, pos, pointed = self._blank_entries[0]
            where = ", ".join(f"{t}/{q}: {n}" for (t, q), n in list(pointed.items())[:5])
            more = len(self._blank_entries) - 1
            raise UnrepairedDataError(
                f"expected messages where {sum(pointed.values())} consume-queue entries point ({where}"
                f"{', ...' if len(pointed) > 5 else ''}), found the BLANK ending the file: the messages they "
                f"named are lost" + (f" ({more} more such file{'s' if more > 1 else ''})" if more else "")
                + "; every other repair is done", path, pos, actions=actions)

    def _commitlog_bytes(self: _Lifecycle) -> int:
        """Bytes of commitlog files a full walk reads (the total of its progress)."""
        return len(self.commitlog.log.segments) * self.commitlog.file_size

    # -- queries ---------------------------------------------------------------------------
    def _message_or_none(self: _Lifecycle, physical_offset: int) -> RocketMQMessage | DamagedMessage | None:
        """A key hit's message; None where the index points at no message (deleted, past the end, not a
        message's first byte); a :class:`DamagedMessage` where one is there but its checks fail."""
        try:
            return self.commitlog.read(physical_offset)
        except OffsetOutOfRangeError:
            return None
        except CorruptDataError as err:
            damaged = self._unchecked_or_none(physical_offset)
            return None if damaged is None else DamagedMessage(damaged, err)

    def query_by_key(
        self: _Lifecycle, topic: str, key: str, *, max_hits: int = 32, begin: int = 0, end: int = TIME_MAX
    ) -> list[RocketMQMessage]:
        """Messages of ``topic`` carrying ``key`` (``KEYS`` or ``UNIQ_KEY``) stored in ``[begin, end]``.

        The newest ``max_hits``, in commitlog order, as the broker's ``queryMessage``
        returns them; hash collisions are filtered out against the commitlog.
        A store without index files (a backup, ``messageIndexEnable=false``) is
        scanned instead, and :attr:`notes` says so; one whose ``index/`` the broker's load stops at
        before any file (a directory named by a number first) answers as the broker does: nothing.
        """
        self._check_open()
        index = self.index
        if index is None or not (index.files or index.stray_files or index.stopped_at is not None):
            if self.commitlog.end <= self.commitlog.min_offset:
                return []
            if SCAN_NOTE not in self.notes:
                self.notes.append(SCAN_NOTE)
            return scan_by_key(self.scan(), topic, key, max_hits=max_hits, begin=begin, end=end)
        return query_by_key(
            index, topic, key, self._message_or_none, max_hits=max_hits, begin=begin, end=end
        )

    def find(self: _Lifecycle, topic: str, key: str | bytes, *, partition: int | None = None,
             begin: int | None = None, end: int | None = None, max_hits: int | None = None) -> list[Record]:
        """:meth:`segstore.store.Store.find` as the broker's ``queryMessage`` answers it (RocketMQ 4.9.7
        ``DefaultMessageStore.queryMessage``, ``IndexService.queryOffset``, ``IndexFile.selectPhyOffset``):
        ``begin``/``end`` in ms, inclusive, against the store time as each IndexFile keeps it (whole seconds
        after the file's beginTimestamp; a store without IndexFiles is scanned and compares the store time
        itself); ``max_hits`` the newest of the whole topic (or ``partition``), the last stored.  Hash
        collisions are checked against the commitlog.  Returned in queue then offset order (``segstore
        query --key`` shows the same hits in commitlog order, as the broker returns them)."""
        hits = self._key_hits(topic, key, partition, begin, end, max_hits)
        ordered: list[RocketMQMessage] = sorted(hits, key=lambda m: (m.queue_id, m.queue_offset,
                                                                     m.physical_offset))
        return list(ordered)

    def _key_hits(self: _Lifecycle, topic: str, key: str | bytes, partition: int | None, begin: int | None,
                  end: int | None, max_hits: int | None, *, committed: bool = False) -> list[RocketMQMessage]:
        """:meth:`find`'s hits in commitlog order; ``committed`` leaves out what no consumer is given
        before ``max_hits`` counts."""
        self._check_open()
        raw = self._find_key(key, partition, begin, end, max_hits, topic=topic)
        if not isinstance(key, str):
            try:
                key = raw.decode("utf-8")
            except UnicodeDecodeError:
                return []   # the broker's keys are Java strings: no such key is indexed
        hits = self.query_by_key(topic, key, max_hits=NO_HIT_LIMIT, begin=0 if begin is None else begin,
                                 end=TIME_MAX if end is None else end)
        hits = [m for m in hits if (partition is None or m.queue_id == partition)
                and (not committed or has_queue_entry(m.sys_flag))]
        return newest_messages(hits, max_hits)

    def query(self: _Lifecycle, request: QueryRequest) -> QueryResult:
        """``segstore query``: by key, by queue offset, or the queue offset for a time.

        ``request.isolation``: ``read_committed`` leaves out key hits no consumer is given
        (prepared and rolled-back transaction messages, which the IndexFiles hold but no consume
        queue does); offset and time queries go through the consume queues, which hold only what
        consumers are given, so both levels answer them alike.

        :raises InvalidTopicError: no topic given (every RocketMQ query names one).
        :raises NotFoundError: a topic name the broker refuses (``TopicValidator``), which no store holds.
        """
        self._check_open()
        committed = check_isolation(request.isolation) == READ_COMMITTED
        if request.topic is None:
            raise InvalidTopicError("expected --topic for a RocketMQ query, found none", self.path)
        try:
            validate_topic(request.topic, TOPIC_MAX_LENGTH_V2)   # v2 messages hold long topics
        except InvalidTopicError as err:
            # a name the broker refuses is a topic no store holds: what dump, info and a Kafka query answer
            # for it (the CLI's exit 1, naming the topics held), not a refused write's usage error
            raise NotFoundError(f"{err.message}: no store holds such a topic", self.path) from None
        if request.key is not None:   # what find answers (read_committed: of what consumers are given)
            return self._hits(self._key_hits(request.topic, request.key, request.partition, request.begin,
                                             request.end, request.max, committed=committed),
                              request.decompress)
        queue = request.partition if request.partition is not None else 0
        if request.timestamp is not None:
            if request.timestamp < 0:   # not a store time; -1/-2/-3 stand for Kafka's ListOffsets specs
                raise UnsupportedOperationError(
                    f"expected a time at or after the epoch (ms or ISO-8601), found {request.timestamp}: "
                    "earliest, latest and max-timestamp are Kafka's (a RocketMQ queue's offsets: "
                    "segstore info)", self.path)
            if request.count != 1:
                raise UnsupportedOperationError(
                    f"--count {request.count}: a RocketMQ time query answers an offset, not messages (read "
                    "them from it with --offset N --count C)", self.path)
            if request.decompress:
                raise UnsupportedOperationError(
                    "--decompress-bodies: a RocketMQ time query answers an offset, not messages (read them "
                    "from it with --offset N --decompress-bodies)", self.path)
            offset = self.offset_for_time(request.topic, queue, request.timestamp)
            answer = {"topic": request.topic, "queue_id": queue, "timestamp": request.timestamp,
                      "offset": offset}
            if offset is None:
                text = (f"{request.topic}/{queue}: no message stored at or after {request.timestamp} "
                        f"(the queue ends at offset {self.offset_range(request.topic, queue)[1]})")
            else:
                text = (f"{request.topic}/{queue}: offset {offset} is the first stored at or after "
                        f"{request.timestamp}")
            return QueryResult(lines=[DumpLine(text, answer)], found=offset is not None, offset=offset)
        if request.offset is None:
            raise UnsupportedOperationError("expected --key, --offset or --timestamp in a RocketMQ query, "
                                            "found none", self.path)
        # the messages before damage the read meets are answered, then the damage (as dump does)
        found, damage = read_until_damage(self.read(request.topic, queue, request.offset, request.count))
        if damage is not None and not found:
            raise damage
        return self._hits(found, request.decompress, damage)

    def _hits(self: _Lifecycle, found: list[RocketMQMessage], decompress: bool = False,
              damage: CorruptDataError | None = None) -> QueryResult:
        """The answer listing ``found`` (``decompress``: as consumers read them, :meth:`consumed`), then
        ``damage`` met after them."""
        if decompress:
            found = [self.consumed(m) for m in found]
        lines = [DumpLine(self.describe(m), self.to_json(m)) for m in found]
        return QueryResult(records=list(found), lines=lines, found=bool(found), damage=damage)

    def describe(self: _Lifecycle, record: RocketMQMessage) -> str:
        """One human-readable line for a message; the topic, ``keys`` and ``tags`` as ``dump`` shows them
        (:func:`keys_and_tags`)."""
        return (f"{text_word(record.topic)}/{record.queue_id}@{record.queue_offset} "
                f"phy={record.physical_offset} size={record.size} store={record.store_timestamp} "
                f"{keys_and_tags(record)} msgId={record.msg_id}")

    # -- verify -----------------------------------------------------------------------------
    def verify(self: _Lifecycle, threads: int | None = None) -> list[Problem]:
        """Check every commitlog message, queue entry, index entry, the checkpoint and config (.verify).

        ``threads`` (default: see segstore.overlap.thread_count) decodes the commitlog by byte ranges on
        that many threads (``recovery.walk_batches``); the same problems in the same order.

        :raises ConfigError: ``threads`` below 1.
        """
        from .verify import verify_store

        self._check_open()
        return verify_store(self, thread_count(threads))
