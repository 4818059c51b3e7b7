"""What every index layout shares: streams, the state file and the catch-up protocol (the options
and :data:`~.options.INDEX_ROOT`: :mod:`.options`).

A *stream* is one RocketMQ queue, one Kafka partition, one stream of any
format: the unit an index covers.  An index layout is either *native* to a
format (the broker keeps it, and the plugin declares it:
:attr:`segstore.plugin.FormatPlugin.native_indexes`) and then only looked up
through the store, or *extra*: kept by segstore in its own files beside the
broker's, under a ``.segstore/`` directory the brokers never look into, where
the store's :meth:`segstore.logview.LogView.index_home` puts it:

- RocketMQ: ``STORE/.segstore/LAYOUT/TOPIC/QUEUEID/``.  ``DefaultMessageStore``
  only opens fixed paths under the store root (``commitlog``, ``consumequeue``,
  ``index``, ``config``, ``checkpoint``, ``abort``, ``lock``, timer and
  compaction directories), so an unknown directory there is never read.
- Kafka: ``PARTITION/.segstore/LAYOUT/``.  Kafka 3.8's ``LogLoader`` lists only
  regular files of a partition directory (it deletes ``.deleted``/``.cleaned``
  files, completes ``.swap`` files and deletes ``.index``/``.timeindex``/
  ``.txnindex`` files without a ``.log``), so a subdirectory is never touched;
  deleting the partition deletes the directory recursively.  The files cannot
  go in the log directory itself: ``LogManager`` parses every subdirectory
  there as ``TOPIC-PARTITION`` and takes the whole log directory offline when
  a name does not parse.

Every extra stream index keeps ``state.json`` beside its files: how far the log
is indexed (``indexed_end``: one past the last offset indexed, the layout's
recovery point), a fingerprint of the record at ``indexed_end - 1``
(``last_record``: its offset, timestamp and a CRC of its key, value and
headers) and whether it was closed cleanly.  The log is the truth:

- **catch-up**: records past ``indexed_end`` (appended by this store, or by the
  real broker while segstore was not looking) are indexed on open for append
  and after every append; a reader looks them up by scanning the short tail;
- **the log changed under the index** (its tail cut, by a recovery or a broker
  truncating, then written again by a writer that does not keep the index): the
  record at ``indexed_end - 1`` no longer matches ``last_record`` (one record
  read).  A writer rebuilds the index from the log; a reader answers from the
  log alone and ``verify`` reports it.  A state without ``last_record`` (an
  earlier segstore wrote it) cannot be checked so: its first writer rebuilds it,
  readers use it as it is;
- **rewritten in place** (compaction): before records move, the store calls
  :func:`segstore.layouts.forget_from`, which drops the stream's entries from the
  first offset rewritten (they are indexed again after);
- **crash**: a stream opened for append whose state is not clean has entries
  past its recovery point cut, then catches up; files that do not even parse
  (torn, wrong size, out of order), or a ``state.json`` that does not, are
  deleted and rebuilt from the log (a reader reports them in ``verify`` and
  refuses lookups through them);
- **retention**: files wholly below the log start are deleted by the next writer (on open, append
  or close), the last one kept; entries below the log start in a file it cuts are out of range
  (lookups and verify pass over them).

Thread-safety: as the owning store (one appending thread; lookups from it).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

import numpy as np

from segstore import files, progress
from segstore.errors import ConfigError, CorruptDataError, NotFoundError, UnsupportedOperationError
from segstore.logview import LogView, Positions, int64_column, stream_batches, stream_positions
from segstore.store import Problem, Store

from .options import INDEX_ROOT

STATE_FILE = "state.json"
STATE_VERSION = 1


@dataclass(frozen=True, slots=True, order=True)
class Stream:
    """One RocketMQ queue or Kafka partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}"


def sparse_points(sizes: np.ndarray, file_bytes: int, interval: int) -> np.ndarray:
    """Which records of a chunk get a sparse index entry (a boolean mask).

    Think of a file's records laid end to end: a record gets an entry when its
    bytes cover a multiple of ``interval`` (byte 0 included, so the first record
    of a file always gets one and a lookup never starts before the file).  About
    one entry per ``interval`` bytes, as Kafka's ``index.interval.bytes``; unlike
    Kafka's running counter the rule depends only on the record and the bytes
    before it in the file (``file_bytes`` before the chunk), so appending in
    pieces gives exactly the entries of one build.  ``O(n)`` in numpy.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    before = file_bytes + np.cumsum(sizes, dtype=np.int64) - sizes
    return (before + sizes - 1) // interval > (before - 1) // interval


#: The fields of a record's fingerprint (:meth:`StreamIndex.record_mark`), as ``state.json`` has them.
MARK_FIELDS = ("offset", "time", "crc")


def content_crc(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]) -> int:
    """CRC-32 of a record's key, value and headers, each length-prefixed (a null one as length -1), so
    that moving bytes from one to the next changes it."""
    parts: list[bytes | None] = [key, value]
    for name, data in headers:
        parts += [name.encode("utf-8", "surrogatepass"), data]
    crc = 0
    for part in parts:
        crc = zlib.crc32((-1 if part is None else len(part)).to_bytes(8, "big", signed=True), crc)
        if part:
            crc = zlib.crc32(part, crc)
    return crc


def _mark_text(mark: dict[str, int] | None) -> str:
    """A fingerprint in words, for messages."""
    if mark is None:
        return "no record"
    return f"timestamp {mark['time']}, crc {mark['crc']}"


class StreamState:
    """``state.json`` of one extra stream index: recovery point, last record's fingerprint, clean flag,
    layout carry values."""

    def __init__(self, directory: str, layout: str) -> None:
        self.path = os.path.join(directory, STATE_FILE)
        self.layout = layout
        self.indexed_end = -1
        #: the fingerprint of the record at ``indexed_end - 1`` (:meth:`StreamIndex.record_mark`);
        #: None when there was none in the log
        self.last_record: dict[str, int] | None = None
        #: False for a state an earlier segstore wrote, without ``last_record`` (nothing to check)
        self.fingerprinted = True
        self.clean = False
        self.carry: dict[str, int] = {}
        #: the layout options the index was built with (they win over the caller's when it is reopened)
        self.options: dict[str, Any] = {}

    def load(self) -> bool:
        """Read the file; False when there is none (a new index).

        :raises CorruptDataError: the file does not parse or belongs to another layout.
        """
        if not files.exists(self.path):
            return False
        try:
            data = json.loads(files.read_text(self.path))
            layout, version = data["layout"], data["version"]
        except (ValueError, KeyError, TypeError) as err:
            raise CorruptDataError(f"expected a JSON index state, found unreadable content ({err})",
                                   self.path) from err
        if layout != self.layout or version != STATE_VERSION:
            raise CorruptDataError(f"expected the state of a {self.layout!r} index (version "
                                   f"{STATE_VERSION}), found {layout!r} version {version}", self.path)
        try:
            self.indexed_end = int(data["indexed_end"])
            self.fingerprinted = "last_record" in data
            last = data.get("last_record")
            self.last_record = None if last is None else {name: int(last[name]) for name in MARK_FIELDS}
            self.clean = bool(data["clean"])
            self.carry = {k: int(v) for k, v in data.get("carry", {}).items()}
            self.options = dict(data.get("options", {}))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CorruptDataError(f"expected a JSON index state, found unreadable content ({err})",
                                   self.path) from err
        return True

    def save(self, *, clean: bool) -> None:
        self.clean = clean
        files.write_atomic(self.path, json.dumps({
            "layout": self.layout, "version": STATE_VERSION, "indexed_end": self.indexed_end,
            "last_record": self.last_record, "clean": clean, "carry": self.carry,
            "options": self.options}, sort_keys=True))


class StreamIndex:
    """An extra layout's index of one stream: files in :attr:`directory` plus :class:`StreamState`.

    Subclasses implement :meth:`_open_files`, :meth:`_index_from` (catch up from
    ``indexed_end``), :meth:`_cut_to` (drop entries at or past an offset), :meth:`_drop_below`
    (delete files below the log start) and :meth:`_expected_problems` (verify against the log),
    and the lookups they offer.
    """

    def __init__(self, layout: Layout, stream: Stream, directory: str, *, writable: bool) -> None:
        self.layout = layout
        self.store: LogView = layout.view
        #: the options a new index of the stream is built with; those of its state once loaded
        self.options = layout.new_stream_options()
        #: whether :meth:`open` loaded the stream's state (its options are the ones it was built with)
        self.loaded = False
        self.stream = stream
        self.directory = directory
        self.writable = writable
        self.state = StreamState(directory, layout.name)
        self.actions: list[str] = []
        #: why the files could not be opened read-only (lookups raise it, ``verify`` reports it)
        self.broken: CorruptDataError | None = None
        #: a reader's: how the log changed under the index (:meth:`log_changed`); lookups then read the
        #: log alone and ``verify`` reports it.  Looked at once, by the first lookup or ``verify``.
        self.stale: str | None = None
        self._looked = False
        #: the ``indexed_end`` whose record ``state.last_record`` is the fingerprint of (None: none taken)
        self._marked_end: int | None = None

    # -- lifecycle -----------------------------------------------------------
    def open(self) -> None:
        """Load (and in append mode recover and catch up) the stream's index.

        A state or files that do not parse make a reader's index :attr:`broken` and a writer's rebuilt.
        """
        try:
            existed = self.state.load()
            if existed:
                self.options = {**self.options, **self.state.options}
                self._marked_end = self.state.indexed_end if self.state.fingerprinted else None
                self.loaded = True
            self.state.options = self.options
            self._open_files()
        except CorruptDataError as err:
            if not self.writable:
                self._close_files()
                self.broken = err
                return
            self._discard()
            self.actions.append(f"{self.directory}: rebuilt: {err.message}")
            existed = False
        if not existed:
            self.state.indexed_end = self.log_start()
        if not self.writable:
            return
        changed = self.log_changed() if existed else None
        if existed and changed is None and not self.state.fingerprinted:
            changed = ("expected the fingerprint of the last record indexed (last_record), found a state "
                       "without one (an earlier segstore wrote it)")
        if changed is not None:
            self._discard()
            self.actions.append(f"{self.directory}: rebuilt: {changed}")
        elif existed and not self.state.clean:
            self._forget(self.state.indexed_end)
            self.actions.append(f"{self.directory}: recovered: entries from offset {self.state.indexed_end} "
                                "rebuilt from the log")
        self._save(clean=False)
        self.catch_up()

    def _discard(self, *, new_options: bool = False) -> None:
        """Delete every file of the stream index and start it empty (it will be rebuilt); its state file
        is rewritten first (not clean), so that a rebuild cut short keeps the options.

        The index keeps the options it was built with; ``new_options`` (a requested build) takes
        those its caller named (:attr:`Layout.requested`) in their place.
        """
        self._close_files()
        if new_options:
            self.options = {**self.options, **self.layout.requested}
        self.state.options = self.options
        self.state.indexed_end = self.log_start()
        self.state.carry = {}
        self._marked_end = None
        self.stale = None
        if files.is_file(self.state.path):
            # the state first, not clean, from the log start, with the options now asked for: a build cut
            # short after it (a full disk) leaves the index to be rebuilt with them, not with the defaults
            # (a lost state kept none); one that could not write it leaves the index as it was
            self._save(clean=False)
            for name in files.list_dir(self.directory):
                entry = os.path.join(self.directory, name)
                if name != STATE_FILE:
                    (files.remove_tree if files.is_dir(entry) else files.remove)(entry)
        else:
            files.remove_tree(self.directory)
            files.make_dirs(self.directory)
        self._open_files()

    def _forget(self, offset: int) -> None:
        """Drop the entries at or past ``offset``; ``indexed_end`` becomes where indexing restarts."""
        self.state.indexed_end = self._cut_to(offset)
        self._marked_end = None

    def forget_from(self, offset: int) -> None:
        """The log's records from ``offset`` on are about to be rewritten where they lie (compaction
        moves them): drop their entries, durably, before (the next :meth:`catch_up` indexes them again)."""
        if offset >= self.state.indexed_end:
            return
        self._forget(offset)
        self.actions.append(f"{self.directory}: entries from offset {self.state.indexed_end} dropped: the "
                            "log is rewritten there")
        self._flush_files()
        self._save(clean=False)

    def catch_up(self) -> int:
        """Index the records appended since ``indexed_end``; returns how many offsets were indexed.

        Files wholly below the log start go first (:meth:`_drop_below`).
        """
        log_start = self.log_start()
        self._drop_below(log_start)
        start = max(self.state.indexed_end, log_start)
        if start >= self.log_end():
            return 0
        if start > self.state.indexed_end:
            self.actions.append(f"{self.directory}: started over at offset {start}: the log start moved past "
                                f"the index end {self.state.indexed_end}")
            self._skip_to(start)
        done = self._index_from(start)
        self.state.indexed_end = done
        return done - start

    def flush(self) -> None:
        if self.writable:
            self._flush_files()
            self._save(clean=False)

    def close(self) -> None:
        if self.writable:
            self._flush_files()
            # retention, delete-records or compaction may have moved the log start since the last append
            self._drop_below(self.log_start())
            self._trim_files()
            self._save(clean=True)
        self._close_files()

    def _save(self, *, clean: bool) -> None:
        """Write the state, with the fingerprint of the record at ``indexed_end - 1`` (read again only when
        ``indexed_end`` moved since it was taken)."""
        state = self.state
        if self._marked_end != state.indexed_end:
            last = state.indexed_end - 1
            state.last_record = self.record_mark(last) if last >= self.log_start() else None
            self._marked_end = state.indexed_end
        state.fingerprinted = True
        state.save(clean=clean)

    def abandon(self) -> None:
        """Release the files as a killed process would: nothing flushed, trimmed or marked clean."""
        self._close_files()

    def drop(self) -> None:
        self._close_files()
        files.remove_tree(self.directory)

    # -- the log -------------------------------------------------------------
    def log_start(self) -> int:
        return self.store.offset_range(self.stream.topic, self.stream.partition)[0]

    def log_end(self) -> int:
        return self.store.offset_range(self.stream.topic, self.stream.partition)[1]

    def batches(self, start: int, end: int, columns: list[str]) -> Any:
        """The stream's ``scan_arrow`` batches of offsets ``[start, end)`` (``offset`` first)."""
        return stream_batches(self.store, self.stream.topic, self.stream.partition, start, end, columns)

    def positions(self, start: int, end: int) -> Iterator[Positions]:
        """The stream's ``(offsets, positions, sizes)`` of offsets ``[start, end)``, chunk by chunk
        (:meth:`LogView.positions`: no record decoded where the format keeps a dense index)."""
        return stream_positions(self.store, self.stream.topic, self.stream.partition, start, end)

    def columns(self, start: int, end: int, names: list[str]) -> dict[str, np.ndarray]:
        """int64 columns ``names`` of offsets ``[start, end)`` (``offset`` always), concatenated.

        For ``verify`` and bounded scans; catch-up goes batch by batch (:meth:`batches`).
        """
        parts: dict[str, list[np.ndarray]] = {name: [] for name in ["offset", *names]}
        for batch in self.batches(start, end, names):
            for name in parts:
                parts[name].append(int64_column(batch, name))
        return {name: np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
                for name, arrays in parts.items()}

    def record_mark(self, offset: int) -> dict[str, int] | None:
        """The fingerprint of the record at ``offset``, None when the log has none there: its offset,
        timestamp and a CRC-32 of its key, value and headers (the common record).  One record read."""
        record = self.read_from_log(offset)
        if record is None:
            return None
        common = self.store.to_common(record)
        if common.offset != offset:
            return None
        return {"offset": offset, "time": common.timestamp,
                "crc": content_crc(common.key, common.value, common.headers)}

    def log_changed(self) -> str | None:
        """How the log changed under the index since it was saved, or None: it ends before
        ``indexed_end``, or its record at ``indexed_end - 1`` is not the one ``last_record`` took (a state
        without one is only checked for the first).  Records below the log start (retention) are no
        change: catching up starts the index over.  One record read."""
        state = self.state
        end, log_end = state.indexed_end, self.log_end()
        if end <= self.log_start():
            return None
        if end > log_end:
            return f"expected the log to reach offset {end}, as the index does, found it ending at {log_end}"
        if not state.fingerprinted:
            return None
        found = self.record_mark(end - 1)
        if found == state.last_record:
            return None
        return (f"expected offset {end - 1} to hold the record the index ends with "
                f"({_mark_text(state.last_record)}), found {_mark_text(found)}")

    def look_at_log(self) -> None:
        """A reader's: see (once) whether the log changed under the index (:attr:`stale`)."""
        if not self.writable and not self._looked and self.broken is None:
            self._looked = True
            self.stale = self.log_changed()

    def read_from_log(self, offset: int) -> Any | None:
        """The record at ``offset`` (the first at or after it) by the store's own read, not the index."""
        return next(self.store.read(self.stream.topic, self.stream.partition, offset, 1), None)

    def verify(self) -> list[Problem]:
        """Problems of this index against the log (entries it should hold and does not)."""
        if self.broken is not None:
            return [Problem(self.broken.path or self.directory, self.broken.pos,
                            f"{self.broken.message} "
                            f"(rebuild: segstore index build PATH --index {self.layout.name})")]
        self.look_at_log()
        if self.stale is not None:
            return [Problem(self.state.path, None, f"{self.stale}: the log changed under the index (its next "
                            f"writer rebuilds it; or: segstore index build PATH --index {self.layout.name})")]
        return self._expected_problems()

    # -- subclass hooks --------------------------------------------------------
    def _open_files(self) -> None:
        raise NotImplementedError

    def _index_from(self, start: int) -> int:
        raise NotImplementedError

    def _cut_to(self, offset: int) -> int:
        """Drop entries at or past ``offset``; returns the offset indexing restarts from (``<= offset``)."""
        raise NotImplementedError

    def _skip_to(self, offset: int) -> None:
        """The log start moved past ``indexed_end`` (retention): start over at ``offset``."""
        self._discard()
        self.state.indexed_end = offset

    def _drop_below(self, offset: int) -> None:
        """Delete the files, all but the last, whose entries all lie below ``offset`` (the log start).

        The brokers delete a log file's indexes with it (Kafka 3.8.0 ``LogSegment.deleteIfExists``;
        RocketMQ 4.9.7 ``ConsumeQueue.deleteExpiredFile``, ``IndexService.deleteExpiredFile``, never
        the last file); without this an index under retention would grow forever.
        """
        raise NotImplementedError

    def _expected_problems(self) -> list[Problem]:
        raise NotImplementedError

    def _flush_files(self) -> None:
        raise NotImplementedError

    def _trim_files(self) -> None:
        """Shrink preallocated files to their entries (clean close)."""

    def _close_files(self) -> None:
        raise NotImplementedError


class Layout:
    """One index layout over one open store: a :class:`StreamIndex` per stream (extra) or the plugin's.

    Implements :class:`segstore.index.IndexLayout`.  ``native`` layouts only look
    up; their files belong to the broker and are never written here.
    """

    name: ClassVar[str]
    native: ClassVar[bool]
    #: the lookups this layout answers: "offset" (record at an offset), "time", "key"
    answers: ClassVar[frozenset[str]]

    def __init__(self, store: Store, options: Mapping[str, Any], *, writable: bool | None = None,
                 requested: Mapping[str, Any] | None = None) -> None:
        self.store = store
        #: the store as the core sees it: every read of the log goes through it
        self.view = cast(LogView, store)
        self.options = dict(options)
        #: the options among ``options`` the caller named (parsed; the rest are defaults): what a
        #: requested build changes in an index, which keeps the others it was built with
        self.requested: dict[str, Any] = dict(requested or {})
        #: the options the layout's indexes on disk were built with (those of the first stream whose
        #: state loaded): a stream new to the layout takes them (:meth:`new_stream_options`)
        self.inherited: dict[str, Any] = {}
        #: whether this layout's own files are written (default: the store's mode); a read-only
        #: store can get extra indexes built (``segstore index build`` never opens the log for append)
        self.writable = store.mode == "a" if writable is None else writable

    def new_stream_options(self) -> dict[str, Any]:
        """The options an index of a stream new to the layout is built with: those the layout's indexes
        on disk were built with (a partition written after ``key.index.headers=trace`` was built
        indexes the header too), but the ones the caller named."""
        return {**self.options, **self.inherited, **self.requested}

    # -- IndexLayout ---------------------------------------------------------------
    # ``build`` and ``append`` take no records: a layout reads what it needs (positions,
    # sizes, store times, keys) from the log itself, from its recovery point on, so the
    # same call serves a full build, an append and a catch-up after another writer.
    def build(self) -> None:
        """Rebuild from a scan of the log (extra layouts); native layouts are the broker's: nothing to do."""

    def append(self) -> None:
        """Index what the log gained since the last call (the store calls it after each append)."""

    def flush(self) -> None:
        """Make the index durable."""

    def verify(self) -> list[Problem]:
        return []

    def close(self) -> None:
        """Release the files."""

    def abandon(self) -> None:
        """Release the files without a clean shutdown (crash simulation)."""
        self.close()

    def drop(self) -> list[str]:
        """Delete the layout's files (extra layouts); returns the paths removed."""
        raise UnsupportedOperationError(f"the {self.name!r} index is native to {self.store.format} stores: "
                                        "it belongs to the broker and is never dropped", self.store.path)

    @property
    def actions(self) -> list[str]:
        """What opening the layout did (recovery, rebuilds), one line each."""
        return []

    # -- lookups -----------------------------------------------------------------
    def read_at(self, stream: Stream, offset: int) -> Any | None:
        """The store record at ``offset`` of ``stream`` (None: not in the log)."""
        raise self._unsupported("offset")

    def offset_for_time(self, stream: Stream, timestamp: int) -> int | None:
        """The first offset whose timestamp is at or after ``timestamp`` (None: none)."""
        raise self._unsupported("time")

    def find_key(self, stream: Stream, key: bytes, max_hits: int | None = None) -> list[int]:
        """Offsets of the records of ``stream`` carrying ``key``, ascending (the newest ``max_hits``)."""
        raise self._unsupported("key")

    def _unsupported(self, what: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(f"expected a layout answering {what} lookups, found the "
                                         f"{self.name!r} layout", self.store.path)

    def streams(self) -> list[Stream]:
        return [Stream(t, p) for t in self.store.topics() for p in self.store.partitions(t)]

    def _check_range(self, stream: Stream, offset: int) -> bool:
        start, end = self.store.offset_range(stream.topic, stream.partition)
        return start <= offset < end


#: the :class:`StreamIndex` class of an :class:`ExtraLayout` (its lookups are typed by it)
IndexT = TypeVar("IndexT", bound=StreamIndex)


class ExtraLayout(Layout, Generic[IndexT]):
    """A layout segstore keeps in its own files: one :class:`StreamIndex` per stream."""

    native = False
    # Not ClassVar: a ClassVar cannot hold a type variable; subclasses set it on the class all the same.
    stream_class: type[IndexT]
    #: the layout options this layout's files depend on (:data:`~.options.DEFAULT_OPTIONS`)
    option_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, store: Store, options: Mapping[str, Any], *, writable: bool | None = None,
                 open_streams: bool = True, requested: Mapping[str, Any] | None = None) -> None:
        super().__init__(store, options, writable=writable, requested=requested)
        self._streams: dict[Stream, IndexT] = {}
        self._locks: list[files.WriterLock] = []
        if not open_streams:
            return
        try:
            if self.writable:
                self._acquire_locks()
            streams = self.streams()
            built = {s for s in streams if files.exists(os.path.join(self.directory(s), STATE_FILE))}
            # the streams with an index on disk first: the new ones take their options
            for stream in [*(s for s in streams if s in built), *(s for s in streams if s not in built)]:
                if self.writable or stream in built:
                    self._open_stream(stream)
        except BaseException:
            self.close()
            raise

    def directory(self, stream: Stream) -> str:
        """Where the stream's index files live: ``HOME/.segstore/LAYOUT[/SUB]`` (``LogView.index_home``)."""
        home, sub = self.view.index_home(stream.topic, stream.partition)
        root = os.path.join(home, INDEX_ROOT, self.name)
        return os.path.join(root, sub) if sub else root

    def homes(self) -> list[str]:
        """The directories the streams' ``.segstore`` trees hang from."""
        return self.view.index_homes()

    def lock_paths(self) -> list[str]:
        """The lock files a writer of this layout holds (one writer per index at a time):
        ``HOME/.segstore/LAYOUT.lock`` per home."""
        return [os.path.join(home, INDEX_ROOT, f"{self.name}.lock") for home in self.homes()]

    def _acquire_locks(self) -> None:
        """Take every lock of :meth:`lock_paths` (released by :meth:`_release_locks`).

        :raises StoreLockedError: another writer holds one.
        """
        for path in self.lock_paths():
            files.make_dirs(os.path.dirname(path))
            lock = files.WriterLock(path)
            lock.acquire()
            self._locks.append(lock)

    def _open_stream(self, stream: Stream) -> IndexT:
        index = self.stream_class(self, stream, self.directory(stream), writable=self.writable)
        if self.writable:
            files.make_dirs(index.directory)
        index.open()
        if index.loaded and not self.inherited:
            self.inherited = dict(index.state.options)
        self._streams[stream] = index
        return index

    def stream_index(self, stream: Stream) -> IndexT | None:
        """The stream's index; created (append mode) for a stream new since open."""
        index = self._streams.get(stream)
        if index is None and self.writable:
            index = self._open_stream(stream)
        return index

    def _index(self, stream: Stream) -> IndexT:
        """The stream's index for a lookup.

        :raises NotFoundError: the stream has no index of this layout.
        :raises CorruptDataError: its files are damaged (opened read-only: not rebuilt).
        """
        index = self._streams.get(stream)
        if index is None and stream in self.streams():
            # a stream new since the index was built (another writer made it: the broker, or segstore
            # with indexes=[]): an index of nothing yet, so a lookup reads the whole stream as the
            # tail it has not indexed (what catching up will index)
            index = self._open_stream(stream)
        if index is None:
            raise NotFoundError(f"expected a {self.name!r} index for {stream}, found none "
                                f"(run: segstore index build PATH --index {self.name})",
                                self.directory(stream))
        if index.broken is not None:
            raise index.broken
        index.look_at_log()
        return index

    def check_options(self, requested: Mapping[str, Any]) -> None:
        """Refuse an option the caller named (``requested``, parsed) that differs from the one an index
        on disk was built with: the index keeps its own (``state.json``), so the one asked for would be
        ignored without a word (``key.index.headers`` named on open, and no header value found).

        :raises ConfigError: naming the stream's state file and the ``index build`` that rebuilds it.
        """
        for index in self._streams.values():
            for name in self.option_names:
                if name in requested and not _same_option(name, requested[name], index.options[name]):
                    raise ConfigError(
                        f"expected {name} {requested[name]!r}, as asked, found the {self.name!r} index built "
                        f"with {index.options[name]!r}, which it keeps (rebuild it with the new value: "
                        f"segstore index build PATH --index {self.name} --option {name}={requested[name]})",
                        index.state.path)

    def forget_from(self, stream: Stream, offset: int) -> None:
        """The store is about to rewrite the stream's records from ``offset`` on where they lie: the index
        drops its entries from there, durably, first (:func:`segstore.layouts.forget_from`).

        Opened for writing: the entries are cut now (the next :meth:`append` indexes them again).  Else
        (``open_streams=False``): under the writer lock, the state on disk is set back to
        ``offset`` and marked not clean, so that the next writer cuts them and readers leave them.
        """
        index = self._streams.get(stream)
        if index is not None and index.writable:
            index.forget_from(offset)
            return
        if self._locks:     # opened for writing, and the stream new since: nothing of it indexed yet
            return
        self._acquire_locks()
        try:
            stored = self.stream_class(self, stream, self.directory(stream), writable=True)
            try:
                if not stored.state.load() or stored.state.indexed_end <= offset:
                    return
            except CorruptDataError:
                return      # its next writer rebuilds it; readers refuse lookups through it
            stored.state.indexed_end = offset
            stored._save(clean=False)
        finally:
            self._release_locks()

    def has_files(self) -> bool:
        """Whether any stream has this index on disk (its state file)."""
        if not any(files.is_dir(os.path.join(home, INDEX_ROOT, self.name)) for home in self.homes()):
            return False
        return any(files.exists(os.path.join(self.directory(s), STATE_FILE)) for s in self.streams())

    @property
    def actions(self) -> list[str]:
        return [line for index in self._streams.values() for line in index.actions]

    def build(self) -> None:
        """Delete and rebuild every stream's index from the log."""
        streams = self.streams()
        with progress.task(f"index build {self.name}", len(streams), unit="stream") as done:
            for stream in streams:
                index = self.stream_index(stream)
                if index is not None:
                    index._discard(new_options=True)
                    index.catch_up()
                done(1)

    def append(self) -> None:
        for stream in self.streams():
            index = self.stream_index(stream)
            if index is not None:
                index.catch_up()

    def flush(self) -> None:
        for index in self._streams.values():
            index.flush()

    def verify(self) -> list[Problem]:
        """Each stream's index checked against the log.

        A layout never built over a store that has streams is one problem (it is not clean: a
        lookup through it would refuse), at the first home's ``.segstore/LAYOUT``.
        """
        streams = self.streams()
        if streams and not self._streams and not self.has_files():
            return [Problem(os.path.join(self.homes()[0], INDEX_ROOT, self.name), None,
                            f"expected a built {self.name!r} index, found none "
                            f"(run: segstore index build PATH --index {self.name})")]
        problems: list[Problem] = []
        for stream in streams:
            index = self._streams.get(stream)
            # none: a stream new since the build, behind as a tail is (lookups read it)
            if index is not None:
                problems.extend(index.verify())
        return problems

    def close(self) -> None:
        streams, self._streams = self._streams, {}
        for index in streams.values():
            index.close()
        self._release_locks()

    def abandon(self) -> None:
        streams, self._streams = self._streams, {}
        for index in streams.values():
            index.abandon()
        self._release_locks()

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks = []

    def drop(self) -> list[str]:
        """Delete every stream's index directory; returns those that existed.

        Under the writer locks (taken here when not held): a store keeping the index open for
        append would go on writing into deleted files, and fail to save its state at close.

        :raises StoreLockedError: another writer holds a lock of the layout; nothing is deleted.
        """
        try:
            if not self._locks:
                self._acquire_locks()
            removed = []
            for stream in self.streams():
                index = self._streams.pop(stream, None)
                if index is not None:
                    index.drop()
                directory = self.directory(stream)
                if files.exists(directory):
                    files.remove_tree(directory)
                    removed.append(directory)
                    _prune_empty(os.path.dirname(directory))
            # the lock files go while held (a writer starting meanwhile takes a new one)
            for path in self.lock_paths():
                files.remove(path)
                _prune_empty(os.path.dirname(path))
        finally:
            self._release_locks()
        return removed


def _same_option(name: str, asked: Any, built: Any) -> bool:
    """Whether option ``name`` asked as ``asked`` is the one an index was built with (header lists
    compare as sets of names: their order makes the same index)."""
    if name == "key.index.headers":
        return {h for h in str(asked).split(",") if h} == {h for h in str(built).split(",") if h}
    return bool(asked == built)


def _prune_empty(directory: str) -> None:
    """Remove ``directory`` and its parents while they are empty and inside a ``.segstore`` tree."""
    while INDEX_ROOT in directory.split(os.sep) and files.is_dir(directory) and not files.list_dir(directory):
        files.remove_tree(directory)
        directory = os.path.dirname(directory)
