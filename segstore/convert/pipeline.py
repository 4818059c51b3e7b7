"""The streaming conversion: read a source store in order, map each record, write the destination.

Both formats are reached through the registry: each plugin's ``conversion()`` is
its side (:class:`segstore.convert.interchange.FormatConversion`), and this module
speaks only :class:`Entry` records, so any two registered formats convert.

What a run does (``docs/conversion.md`` has the user's view):

1. Detect the source format; refuse an unknown one, a store two plugins claim, a
   conversion to the source's own format, and an existing destination (unless
   ``force``).
2. Write into a temporary sibling ``.DST.converting`` holding a small journal
   (:data:`JOURNAL_NAME`: the options and the state ``running`` / ``done``).  An
   interrupted run leaves only that sibling; ``resume`` reopens it, and the target's
   writer skips what the destination holds already (Kafka: each partition's end
   offset; RocketMQ: the messages in the commitlog).
   Before any record, the journal on disk records the source as the run finds it: every
   stream (``FormatConversion.extents``: empty ones too, with where each starts; ``streams``),
   the logs they are read from (``FormatConversion.logs``: ``logs``) and the first record each
   stream reads (``firsts``, :func:`_firsts`).  A resumed run compares the source it finds with
   them and refuses one that changed in a way its skipping would get wrong (:func:`_check_source`,
   :func:`_check_firsts`); the way back reads ``streams`` for where each stream started, which
   the destination may not hold (:func:`_extents`).  Then every stream is created in the
   destination (``open_streams``).
3. With ``verify``, check the destination's files (``Store.verify``), its streams
   (``check_streams``), and re-read every record, comparing it with the source mapped again
   (the target's verifier).
4. Rename the sibling into place (an old destination is moved aside first with
   ``force`` and removed once the new one is in place).  The journal stays in the
   result as its provenance; a later conversion back reads the source config from it.

Memory is bounded whatever the store size: the writers hold bounded buffers (Kafka:
at most :data:`BATCH_RECORDS` records per partition and 64 MiB in all), and the
k-way merge that puts streams converted from the target back in its order holds one
entry per stream (columns: one batch of :data:`MERGE_READ_ROWS` rows shared among the streams
that may be merged, so that memory grows with the partitions only past a few hundred of them, by about
a record batch each; the other streams are read one at a time).

Not thread-safe: one conversion per destination (the stores' writer locks enforce it).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import itertools
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from segstore import arrays, files, registry
from segstore.api import open as open_store
from segstore.columns import binary_buffers
from segstore.errors import (
    ConfigError,
    ConversionError,
    ConversionOptionError,
    CorruptDataError,
    InvalidMessageError,
    InvalidTopicError,
    NotFoundError,
    OffsetOutOfRangeError,
    UnsupportedOperationError,
    cut,
)
from segstore.overlap import pipelined
from segstore.store import Store

from . import COMPRESSIONS
from .interchange import ENTRY_SCHEMA, Entry, Extent, FormatConversion, LogSpan, Options, Peer, Sized

#: The journal in the temporary directory, kept in the result as its provenance.
JOURNAL_NAME = "segstore-convert.json"
JOURNAL_VERSION = 1
STATE_RUNNING = "running"
STATE_DONE = "done"
TEMP_SUFFIX = ".converting"
OLD_SUFFIX = ".replaced"
#: Entries per destination write, by the name a target side gives as its ``batch_setting`` (the
#: test-suite shrinks them): records per record batch (Kafka), messages per commitlog write (RocketMQ).
BATCH_RECORDS = 500
ROCKETMQ_BATCH = 8192
#: Entries between two progress updates.
PROGRESS_STEP = 500
#: Convert in Arrow batches where both sides can (False: entry by entry, the reference the columnar
#: path is tested equal to).
COLUMNAR = True
#: Rows of a merged item (:func:`_batches_in_order`) at most (at least half of it but the last).
MERGE_ROWS = 1 << 16
#: Rows of the batches of all merged streams together (``Options.read_rows`` of each: a merge holds
#: a batch of every stream it merges, and the rows of one or two more in the items after it), and
#: of one stream's at least.  1M messages from 16 Kafka partitions: 236-248 MB of anonymous memory
#: at the peak with 8k-row batches, 314 MB with the decoder's 16k; past 512 partitions memory
#: grows with them, by about a record batch each.
MERGE_READ_ROWS = 1 << 17
MIN_READ_ROWS = 256
#: Where ``--timestamp`` takes a record's time from, when the source has two (RocketMQ: born, store).
TIMESTAMP_SOURCES = ("born", "store")
#: How many verify differences an error lists.
REPORT_LIMIT = 20
#: The errors that end a run for good: the destination refuses a record with these options (a batch
#: larger than Kafka's ``segment.bytes``, as 3.8.0 ``UnifiedLog.append`` refuses it with a
#: ``RecordBatchTooLargeException``), a source record does not map, a name or offset does not fit.
#: A resume (the same options, the same source) meets them again, so such a run removes the
#: ``.DST.converting`` it wrote; any other failure (Ctrl-C, a full disk, corrupt source data, which
#: ``--skip-corrupt`` passes, a source file gone while it was read) keeps it for ``--resume``.
DEAD_ENDS: tuple[type[BaseException], ...] = (ConfigError, ConversionError, InvalidMessageError,
                                              OffsetOutOfRangeError, UnsupportedOperationError)


@dataclass
class ConversionReport:
    """What a conversion did."""

    src: str
    dst: str
    source_format: str
    target_format: str
    messages: int = 0
    bytes: int = 0
    already_present: int = 0
    skipped: list[str] = field(default_factory=list)
    #: what the source keeps beside its records that the target has no place for
    #: (``FormatConversion.not_carried``), a line per stream
    not_carried: list[str] = field(default_factory=list)
    verified: bool = False
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """The report as the CLI prints it."""
        rate = self.messages / self.seconds if self.seconds > 0 else 0.0
        out = [f"{self.src} ({self.source_format}) -> {self.dst} ({self.target_format}): "
               f"{self.messages} messages, {self.bytes} bytes in {self.seconds:.2f}s ({rate:.0f} msg/s)"]
        if self.already_present:
            out.append(f"resumed: {self.already_present} messages were already converted")
        out.extend(f"skipped corrupt data: {line}" for line in self.skipped)
        out.extend(f"not carried: {line}" for line in self.not_carried)
        if self.verified:
            out.append("verified: every record matches the source")
        return out


# -- progress --------------------------------------------------------------------

@runtime_checkable
class _CountedBar(Protocol):
    """A bar that shows its count and total (tqdm's); ``progress.Bar`` does not promise them."""

    n: int
    total: int | None


class _Progress:
    """Conversion progress through :mod:`segstore.progress`: messages out of ``total`` (an estimate from
    the source's offset ranges), with the byte rate beside the bar.

    ``enabled`` True forces a bar on stderr, False none; None follows what the caller installed (the CLI:
    a bar on a terminal only), else a bar when stderr is a terminal.
    """

    def __init__(self, enabled: bool | None, label: str, total: int | None) -> None:
        from .. import progress

        self._stack = contextlib.ExitStack()
        if enabled is False:
            self._stack.enter_context(progress.reporting(progress.SILENT))
        elif progress.installed() is None and (enabled or sys.stderr.isatty()):
            self._stack.enter_context(progress.reporting(progress.TqdmSink()))
        self._bar = self._stack.enter_context(progress.bar(label, total, unit="msg"))
        self._start = time.perf_counter()
        self._bytes = 0

    def update(self, messages: int, nbytes: int) -> None:
        self._bytes += nbytes
        if self._bar is not None:
            bar = self._bar
            if isinstance(bar, _CountedBar) and bar.total is not None \
                    and bar.n + messages > bar.total:   # the estimate was short
                bar.total = bar.n + messages
            self._bar.update(messages)
            elapsed = time.perf_counter() - self._start
            if elapsed > 0 and self._bytes and hasattr(self._bar, "set_postfix_str"):
                self._bar.set_postfix_str(f"{self._bytes / elapsed / 1e6:.1f} MB/s", refresh=False)

    def close(self) -> None:
        self._stack.close()


def _source_messages(source: Any) -> int:
    """How many messages the source holds, from its offset ranges (the progress total; an estimate)."""
    return sum(end - start for topic in source.topics() for partition in source.partitions(topic)
               for start, end in [source.offset_range(topic, partition)])


# -- the source's entries in conversion order --------------------------------------------------

def _in_order(source_side: FormatConversion, target_side: FormatConversion, source: Store,
              options: Options, *, round_trip: bool = False) -> Iterator[Sized]:
    """The source's entries in conversion order: streams that came from the target merged back into
    the target's own order (k-way merge on :meth:`FormatConversion.home_position`), then the others
    stream by stream."""
    streams = (source_side.round_trip_streams if round_trip else source_side.streams)(source, options)
    merged: list[Iterator[Sized]] = []
    native: list[Iterator[Sized]] = []
    for stream in streams:
        first = next(stream, None)
        if first is None:
            continue
        chained = itertools.chain((first,), stream)
        (merged if target_side.home_position(first[0]) is not None else native).append(chained)
    if merged:
        def position(item: Sized) -> int:
            found = target_side.home_position(item[0])
            if found is None:
                entry = item[0]
                raise ConversionError(f"expected every record of {entry.topic}-{entry.partition} (converted "
                                      f"from {target_side.topics.side}) to start with "
                                      f"{target_side.home_marker}, found offset {entry.offset} without it")
            return found

        yield from heapq.merge(*merged, key=position)
    for stream in native:
        yield from stream


class _KeysNotCarried(Exception):
    """A source batch holds a header key the columns may not carry (:func:`_carried_keys`)."""


#: What Java reads a malformed UTF-8 sequence as (``new String(bytes, UTF_8)``), as UTF-8.
_REPLACEMENT = "\ufffd".encode()


def _holds_replacement(keys: pa.Array) -> bool:
    """Whether a string array's bytes (those of its rows, or more: a child array whose parent is a
    slice) hold a U+FFFD.  Its UTF-8 starts with the byte EF, and text without a byte from EF up (ASCII,
    most scripts of the BMP: their lead bytes are below EF) holds none: the largest byte, over the
    array's own memory, decides most batches (about 0.05 ns a byte, SIMD); the others are searched.
    (``pc.match_substring`` over the keys was a fifth of a RocketMQ -> Kafka conversion's CPU, a
    ``bytes`` search over a copy of them 4% of a Kafka -> RocketMQ one.)"""
    if not len(keys):
        return False
    offsets, data = binary_buffers(keys)
    start, end = int(offsets[0]), int(offsets[-1])
    if end <= start:
        return False
    view = np.frombuffer(data, np.uint8, end - start, start)
    return int(view.max()) >= _REPLACEMENT[0] and _REPLACEMENT in view.tobytes()


def _carried_keys(stream: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``stream``'s batches, ending with :class:`_KeysNotCarried` at one whose header keys hold a U+FFFD:
    ``ENTRY_SCHEMA``'s keys are text, a stored key or property name is bytes (a Kafka header key on disk,
    a RocketMQ property name as a batch send stores it) that may not be UTF-8, which an entry keeps
    (a :class:`segstore.javatext.JavaText`) and its columns would hold as Java's text of them.  One
    vectorized pass over the keys a batch."""
    try:
        for batch in stream:
            if _holds_replacement(batch.column("headers").values.field("key")):
                raise _KeysNotCarried
            yield batch
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _convert(source_side: FormatConversion, target_side: FormatConversion, source: Store, dest: Store,
             reading: Options, writing: Options, report: ConversionReport, progress: _Progress) -> None:
    if COLUMNAR:
        try:
            if _convert_columns(source_side, target_side, source, dest, reading, writing, report, progress):
                return
        except _KeysNotCarried:
            # entry by entry from the start: the writer skips what the columns wrote (as it skips what
            # a resumed run finds), which is counted as written, not as present
            report.already_present -= report.messages
            del reading.skipped[:]
    writer = target_side.writer(dest, writing)
    pending_messages = pending_bytes = 0
    for entry, size in _in_order(source_side, target_side, source, reading):
        if writer.add(entry, size):
            report.messages += 1
            report.bytes += size
            pending_messages += 1
            pending_bytes += size
        else:
            report.already_present += 1
        if pending_messages >= PROGRESS_STEP:
            progress.update(pending_messages, pending_bytes)
            pending_messages = pending_bytes = 0
    writer.flush_all()
    progress.update(pending_messages, pending_bytes)
    report.skipped.extend(reading.skipped)


def _convert_columns(source_side: FormatConversion, target_side: FormatConversion, source: Store,
                     dest: Store, reading: Options, writing: Options, report: ConversionReport,
                     progress: _Progress) -> bool:
    """The conversion in ``ENTRY_SCHEMA`` batches, where the source reads columns, the target writes
    them and says in columns where rows that came from it lay (:func:`_batches_in_order`); False
    (nothing done) otherwise."""
    if target_side.home_positions(arrays.empty_batch(ENTRY_SCHEMA)) is None:
        return False
    streams = source_side.arrow_streams(source, reading)
    if streams is None:
        return False
    writer = target_side.arrow_writer(dest, writing)
    if writer is None:
        return False
    streams = [_carried_keys(stream) for stream in streams]
    probes = None
    if target_side.home_marker:     # streams that came from the target are merged: read them small
        # (shared among all the streams: which are merged only their first batches tell)
        probes = source_side.arrow_streams(source, replace(reading, read_rows=read_rows(len(streams))))
        probes = None if probes is None else [_carried_keys(probe) for probe in probes]

    def prepared() -> Iterator[tuple[list[pa.RecordBatch] | None, np.ndarray | None, Any]]:
        for pieces, order in _batches_in_order(streams, target_side, probes):
            made = writer.prepare(pieces, order)
            # prepared merged rows stand alone: the item lets go of the source's batches, so that
            # the items queued hold only what the writer made of them (with a writer slower than
            # the reading, the queue is full: each item held two rounds of every stream's batches)
            yield (pieces if made is None or order is None else None), order, made

    def write(item: tuple[list[pa.RecordBatch] | None, np.ndarray | None, Any]) -> tuple[int, int, int]:
        pieces, order, made = item
        if order is None:
            assert pieces is not None
            return writer.add_batch(pieces[0], made)
        return writer.add_rows(pieces, order, made)

    # the source reads its next items (the merge orders them, the target parses them) while the
    # target writes this one: an item whose merge read every stream's next batch costs the reading
    # thread several times one that took rows already read, and the item queued evens that out
    try:
        for written, nbytes, present in pipelined(prepared(), write, name="segstore-convert-read"):
            report.already_present += present
            report.messages += written
            report.bytes += nbytes
            progress.update(written, nbytes)
    except _KeysNotCarried:
        writer.flush_all()      # what was taken is written (the run going on entry by entry skips it)
        raise
    writer.flush_all()
    report.skipped.extend(reading.skipped)
    return True


#: A merged stream's position once it has ended (above every position).
_DONE = np.iinfo(np.int64).max


def read_rows(streams: int) -> int:
    """Rows a batch of each of ``streams`` streams that may be merged: :data:`MERGE_READ_ROWS`
    shared, at least :data:`MIN_READ_ROWS`."""
    return max(MIN_READ_ROWS, MERGE_READ_ROWS // max(1, streams))


class _Cursor:
    """A stream of batches, the rows of its current batch not yet taken (``at``) and their home
    positions in the target."""

    def __init__(self, stream: Iterator[pa.RecordBatch], target_side: FormatConversion) -> None:
        self.stream = stream
        self.target_side = target_side
        self.batch: pa.RecordBatch | None = None
        self.positions = np.zeros(0, np.int64)
        self.at = 0
        self.last = -1
        self.next()

    def next(self) -> bool:
        """Move to the stream's next non-empty batch; False at its end."""
        for batch in self.stream:
            if batch.num_rows:
                self.batch, self.at = batch, 0
                positions = self.target_side.home_positions(batch)
                assert positions is not None        # _convert_columns checked the target says
                self.positions = positions
                return True
        self.batch = None
        return False

    def check_home(self) -> None:
        """Every row of the batch came from the target, in increasing positions (what the merge needs).

        :raises ConversionError: a row without the target's marker, or positions going back.
        """
        assert self.batch is not None
        positions = self.positions
        bad = np.flatnonzero(positions < 0)
        if len(bad):
            row = self.batch.slice(int(bad[0]), 1).to_pylist()[0]
            side = self.target_side
            raise ConversionError(f"expected every record of {row['topic']}-{row['partition']} (converted "
                                  f"from {side.topics.side}) to start with {side.home_marker}, found "
                                  f"offset {row['offset']} without it")
        steps = np.diff(positions, prepend=self.last)
        if (steps < 0).any():
            row = self.batch.slice(int(np.flatnonzero(steps < 0)[0]), 1).to_pylist()[0]
            raise ConversionError(f"expected the records of {row['topic']}-{row['partition']} in the "
                                  f"order they had in the {self.target_side.topics.side} store they came "
                                  f"from, found offset {row['offset']} out of it")
        self.last = int(positions[-1])


def _batches_in_order(streams: list[Iterator[pa.RecordBatch]], target_side: FormatConversion,
                      probes: list[Iterator[pa.RecordBatch]] | None = None,
                      ) -> Iterator[tuple[list[pa.RecordBatch], np.ndarray | None]]:
    """:func:`_in_order` in batches: streams whose first row came from the target merged back into
    the target's order, a batch of each stream at a time (rows of equal position in stream order,
    as ``heapq.merge``), in items of ``MERGE_ROWS / 2`` to ``MERGE_ROWS`` rows but the last, then
    the other streams one after another.  Each item is a list of batches and the order of their
    rows (row numbers over the list's batches one after another; None: one batch, as it is): a
    merge gives its pieces as they are and the order, and the writer reorders
    (:meth:`ArrowWriter.add_rows`; concatenating or taking every column here would copy each
    header of every row once more).

    ``probes``: the same streams read in small batches (``Options.read_rows``), or None.  A stream
    is told merged or native by its first batch, read from its probe: a merged stream goes on in
    the probe's batches, a native one is read again from ``streams`` when its turn comes.  Memory:
    a small batch per merged stream, and one native stream at a time (without probes, every
    native stream's first batch is held until its turn)."""
    merged: list[_Cursor] = []
    native: list[_Cursor | Iterator[pa.RecordBatch]] = []
    for i, stream in enumerate(streams):
        probe = stream if probes is None else probes[i]
        cursor = _Cursor(probe, target_side)
        if cursor.batch is None:
            continue
        if cursor.positions[0] >= 0:
            merged.append(cursor)
        elif probes is None:
            native.append(cursor)
        else:
            close = getattr(probe, "close", None)
            if close is not None:
                close()
            native.append(stream)
    for cursor in merged:
        cursor.check_home()
    # per stream: its batch's last position and its first position not taken (_DONE once ended);
    # a step looks at the streams holding rows up to its bound only (with hundreds of partitions
    # a step takes rows of a few: the others cost one numpy comparison, not a Python step each)
    tops = np.array([int(cursor.positions[-1]) for cursor in merged], np.int64)
    heads = np.array([int(cursor.positions[0]) for cursor in merged], np.int64)
    live = len(merged)
    while live:
        pieces: list[pa.RecordBatch] = []
        keys: list[np.ndarray] = []
        taken = 0
        # steps until the item holds half of MERGE_ROWS (a stream's batch ending early does not end
        # the item: the writer's per-item work stays per 32k-64k rows however small the batches)
        while live and taken < MERGE_ROWS // 2:
            bound = int(tops.min())
            active = np.flatnonzero(heads <= bound).tolist()      # in stream order
            ends = [int(merged[i].positions.searchsorted(bound, "right")) for i in active]
            room = MERGE_ROWS - taken
            if sum(ends) - sum(merged[i].at for i in active) > room:
                # at most MERGE_ROWS rows an item: the writer's work comes in even steps to overlap
                # the source's reading with (segstore.overlap), and an item's memory stays bounded
                waiting = np.concatenate([merged[i].positions[merged[i].at:end]
                                          for i, end in zip(active, ends, strict=True)])
                bound = int(np.partition(waiting, room - 1)[room - 1])
                ends = [int(merged[i].positions.searchsorted(bound, "right")) for i in active]
            # positions past the steps before (their bounds): one stable sort orders the item
            for i, stop in zip(active, ends, strict=True):
                cursor = merged[i]
                if stop > cursor.at:
                    assert cursor.batch is not None
                    pieces.append(cursor.batch.slice(cursor.at, stop - cursor.at))
                    keys.append(cursor.positions[cursor.at:stop])
                    taken += stop - cursor.at
                    cursor.at = stop
            for i in active:
                cursor = merged[i]
                if cursor.at < len(cursor.positions):
                    heads[i] = cursor.positions[cursor.at]
                elif cursor.next():
                    cursor.check_home()
                    tops[i], heads[i] = cursor.positions[-1], cursor.positions[0]
                else:
                    tops[i] = heads[i] = _DONE
                    live -= 1
        if len(pieces) == 1:
            yield pieces, None
            continue
        yield pieces, np.argsort(np.concatenate(keys), kind="stable")
    for turn in native:
        if isinstance(turn, _Cursor):
            assert turn.batch is not None
            yield [turn.batch], None
            turn = turn.stream
        for later in turn:
            yield [later], None


def _compare(source_side: FormatConversion, target_side: FormatConversion, source: Store, dest: Store,
             reading: Options, writing: Options, check: _Progress) -> list[str]:
    """Every source entry against the destination (the target's verifier), and every native source
    record against its entry (``options.problems``), up to :data:`REPORT_LIMIT` findings."""
    verifier = target_side.verifier(dest, writing)
    problems: list[str] = []
    n = 0
    for n, (entry, _) in enumerate(_in_order(source_side, target_side, source, reading, round_trip=True), 1):
        if n % PROGRESS_STEP == 0:
            check.update(PROGRESS_STEP, 0)
        problem = verifier.check(entry)
        if problem is not None:
            problems.append(problem)
        problems.extend(reading.problems)
        reading.problems.clear()
        if len(problems) >= REPORT_LIMIT:
            return problems
    check.update(n % PROGRESS_STEP, 0)
    return (problems + verifier.rest())[:REPORT_LIMIT]


def kafka_entry_of(record: Any) -> Entry:
    """A record read from a Kafka store as an :class:`Entry` (what a conversion compares)."""
    return registry.get("kafka").conversion().entry_of(record)


# -- the run -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _RunOptions:
    to: str
    topics: list[str] | None
    compression: str
    config: dict[str, Any]
    timestamp: str
    skip_corrupt: bool
    decompress_bodies: bool = False

    def journal(self, src: str, source_format: str) -> dict[str, Any]:
        return {"version": JOURNAL_VERSION, "src": src if files.is_url(src) else os.path.abspath(src),
                "source_format": source_format,
                "to": self.to, "topics": self.topics, "compression": self.compression,
                "config": self.config, "timestamp": self.timestamp,
                "decompress_bodies": self.decompress_bodies}

    def sides(self, source_side: FormatConversion, target_side: FormatConversion, source_format: str,
              ) -> tuple[Options, Options]:
        """What the source side and the target side are told (each names the other as its peer)."""
        batch = globals().get(target_side.batch_setting, BATCH_RECORDS)
        common = {"topics": self.topics, "compression": self.compression, "timestamp": self.timestamp,
                  "skip_corrupt": self.skip_corrupt, "decompress_bodies": self.decompress_bodies,
                  "batch_records": batch}
        return (Options(peer=Peer(self.to, target_side.topics), **common),
                Options(peer=Peer(source_format, source_side.topics), **common))


#: What a journal written before a setting existed ran with (so that its run can be resumed).
_JOURNAL_DEFAULTS: dict[str, Any] = {"decompress_bodies": False}


def temp_path(dst: str) -> str:
    """The temporary sibling a conversion into ``dst`` writes to."""
    parent, name = os.path.split(os.path.abspath(dst))
    return os.path.join(parent, f".{name}{TEMP_SUFFIX}")


def _side(name: str, role: str, path: str | None = None) -> FormatConversion:
    """The conversion side of registered format ``name``.

    :raises ConversionError: no such format, or one that cannot be converted.
    """
    if name not in registry.names():
        raise ConversionError(f"expected a {role} format of {', '.join(registry.names())}, found {cut(name)}",
                              path)
    try:
        side: FormatConversion = registry.get(name).conversion()
    except UnsupportedOperationError as err:
        raise ConversionError(f"expected a {role} format that converts, found {cut(name)} ({err.message})",
                              path) from err
    return side


def _check_options(target_side: FormatConversion, compression: str, timestamp: str) -> None:
    """:raises ConversionOptionError: a compression the target lacks, an unknown timestamp source."""
    side = target_side.topics.side
    if compression not in COMPRESSIONS:
        raise ConversionOptionError(f"expected a compression of {', '.join(COMPRESSIONS)}, "
                                    f"found {cut(compression)}")
    if compression not in target_side.compressions:
        if target_side.compressions == ("none",):
            raise ConversionOptionError(f"expected no --compression for a {side} destination, "
                                        f"found {cut(compression)}")
        raise ConversionOptionError(f"expected a compression of {', '.join(target_side.compressions)} for a "
                                    f"{side} destination, found {cut(compression)}")
    if timestamp not in TIMESTAMP_SOURCES:
        raise ConversionOptionError(f"expected a timestamp source of {', '.join(TIMESTAMP_SOURCES)}, "
                                    f"found {cut(timestamp)}")


#: The journal members a run reads back (not only compares), with the JSON type each holds when not null.
_JOURNAL_TYPES: dict[str, tuple[type, str]] = {"source_format": (str, "a string"),
                                               "source_config": (dict, "an object"),
                                               "streams": (list, "an array"),
                                               "logs": (list, "an array"),
                                               "firsts": (list, "an array"),
                                               "written": (list, "an array")}
#: The journal's records of the source: each item's form, and the types of the fields naming it
#: (before its start and end).
_RECORDS: dict[str, tuple[str, tuple[type, ...]]] = {
    "streams": ("[topic, partition, start, end]", (str, int)), "logs": ("[name, start, end]", (str,)),
    "written": ("[name, start, end]", (str,))}
#: ``(start, end)`` by what names each: ``(topic, partition)`` (a stream), ``(name,)`` (a log).
_Spans = dict[tuple[Any, ...], tuple[int, int]]


def _read_journal(path: str) -> dict[str, Any] | None:
    """The journal in ``path``, None when there is none.

    :raises ConversionError: not a JSON object, or a member read back of the wrong type.
    """
    journal = os.path.join(path, JOURNAL_NAME)
    if not files.is_file(journal):
        return None
    try:
        data = json.loads(files.read_text(journal))
    except ValueError as err:
        raise ConversionError(f"expected a JSON conversion journal, found {err}", journal) from err
    if not isinstance(data, dict):
        raise ConversionError(f"expected a JSON object as the conversion journal, found {cut(data)}", journal)
    for key, (kind, name) in _JOURNAL_TYPES.items():
        value = data.get(key)
        if value is not None and not isinstance(value, kind):
            raise ConversionError(f"expected {key} in the conversion journal to be {name} or null, "
                                  f"found {cut(value)}", journal)
    return data


def _recorded(journal: dict[str, Any], key: str, path: str) -> _Spans | None:
    """The journal's ``streams`` or ``logs`` (:data:`_RECORDS`) as ``(start, end)`` by what names each
    (``(topic, partition)``, ``(name,)``); None when it has none.

    :raises ConversionError: an item of another form, naming ``path`` (the journal).
    """
    items = journal.get(key)
    if items is None:
        return None
    form, kinds = _RECORDS[key]
    out: _Spans = {}
    for item in items:
        try:
            *name, start, end = item
            out[tuple(kind(part) for kind, part in zip(kinds, name, strict=True))] = (int(start), int(end))
        except (TypeError, ValueError) as err:
            raise ConversionError(f"expected {key} of {form} in the conversion journal, found {item!r}",
                                  path) from err
    return out


def _write_journal(path: str, data: dict[str, Any]) -> None:
    files.write_atomic(os.path.join(path, JOURNAL_NAME), json.dumps(data, indent=1, sort_keys=True) + "\n")


def _local_part(src: str) -> str:
    """The local path a source names: itself, a ``file://`` URL's path, "" for other URLs (a
    remote source cannot overlap a local destination)."""
    if not files.is_url(src):
        return src
    return urllib.parse.urlparse(src).path if src.lower().startswith("file://") else ""


def _comparable(key: str, value: Any) -> Any:
    """A journal member as a resume compares it: ``config`` values as text (``--config`` gives
    ``"1048576"`` where the library may have been given ``1048576``; the destination reads both
    alike), the others as they are."""
    if key != "config" or not isinstance(value, dict):
        return value
    return {str(name): str(v).lower() if isinstance(v, bool) else str(v) for name, v in value.items()}


def _prepare(src: str, dst: str, tmp: str, options: _RunOptions, source_format: str, resume: bool,
             force: bool) -> dict[str, Any]:
    """Check the destination and create (or, resuming, check) the temporary directory; returns the journal."""
    local, target = _local_part(src), os.path.realpath(dst)
    source = os.path.realpath(local) if local else ""
    if source and os.path.commonpath([source, target]) in (source, target):
        raise ConversionError(f"expected a destination outside the source and not containing it, found "
                              f"{target} and source {source}", dst)
    if files.exists(dst):
        if not force:
            raise ConversionError("expected a destination that does not exist, found one "
                                  "(pass --force to replace it)", dst)
        _check_replaceable(dst, options.to)
    wanted = options.journal(src, source_format)
    journal = _read_journal(tmp) if resume else None
    if journal is not None:
        recorded = {k: journal.get(k, _JOURNAL_DEFAULTS.get(k)) for k in wanted}
        other = [k for k in wanted if _comparable(k, recorded[k]) != _comparable(k, wanted[k])]
        if other:
            raise ConversionError("expected to resume the same conversion, found one with other options: "
                                  + "; ".join(f"{k} {cut(recorded[k])} (this run: {cut(wanted[k])})"
                                              for k in other), tmp)
        return journal
    if resume and (not files.is_dir(tmp) or (files.list_dir(tmp) and not force)):
        raise ConversionError("expected an interrupted conversion to resume, found "
                              + ("a directory without a journal (pass --force to start over)"
                                 if files.exists(tmp) else "none"), tmp)
    # Resuming, an empty directory is a run killed before it wrote its journal: nothing was done
    # (and --force starts over from any other directory without one).
    if files.exists(tmp):
        if not force and not resume:
            raise ConversionError("expected no interrupted conversion, found one "
                                  "(pass --resume to continue it or --force to start over)", tmp)
        if force:
            _check_replaceable(tmp, options.to, marked=True)
        files.remove_tree(tmp)
    files.make_dirs(tmp)
    journal = {**wanted, "state": STATE_RUNNING}
    _write_journal(tmp, journal)
    return journal


def _finished(src: str, dst: str, tmp: str, options: _RunOptions, source_format: str,
              source_side: FormatConversion, report: ConversionReport) -> bool:
    """Whether ``dst`` is this very conversion, done: a run killed after it installed the store but
    before it said so is resumed by doing nothing (``report.already_present`` set to what it holds).

    Only with no ``.DST.converting`` left, a journal in ``dst`` saying ``done`` with this run's options
    and the source's streams as the journal recorded them (a source appended to since is refused as
    before: the destination exists).  ``O(streams)``.
    """
    if not files.is_dir(dst) or files.exists(tmp):
        return False
    journal = _read_journal(dst)
    if journal is None or journal.get("state") != STATE_DONE:
        return False
    wanted = options.journal(src, source_format)
    if any(_comparable(k, journal.get(k, _JOURNAL_DEFAULTS.get(k))) != _comparable(k, wanted[k])
           for k in wanted):
        return False
    with open_store(src, format=source_format, mode="r") as source:
        reading, _ = options.sides(source_side, _side(options.to, "target"), source_format)
        extents = _extents(source_side, source, reading, src, options.to)
    if [[e.topic, e.partition, e.start, e.end] for e in extents] != journal.get("streams"):
        return False
    report.already_present = int(journal.get("messages") or 0)
    return True


def _check_replaceable(path: str, to: str, *, marked: bool = False) -> None:
    """Refuse to let ``--force`` delete ``path`` unless it is what a conversion into format ``to``
    would replace: an empty directory or a store of format ``to`` (``marked``, for the temporary
    directory: also one holding a conversion journal, or the temporary file a journal is written
    through).  A typo (``segstore convert store ~/``) must not delete a directory of other files.
    ``O(entries of path)`` and the formats' ``detect``.

    :raises ConversionOptionError: naming ``path`` and what it holds.
    """
    if not files.is_dir(path):
        found = "a file"
    else:
        names = files.list_dir(path)
        if not names or (marked and {JOURNAL_NAME, f"{JOURNAL_NAME}.tmp"} & set(names)):
            return
        matches = [name for name in registry.names() if registry.get(name).detect(path)]
        if matches == [to]:
            return
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        found = (f"a {' and '.join(matches)} store" if matches
                 else f"a directory that is no store, holding {shown}")
    raise ConversionOptionError(f"expected a {to} store or an empty directory for --force to replace, "
                                f"found {found} (remove it yourself, or convert into a new path)", path)


def _check_topics(src: str, source_format: str, source_side: FormatConversion, topics: list[str]) -> None:
    """Refuse a selection naming topics the source does not hold, before anything is created.

    :raises NotFoundError: names them, and the topics the source holds.
    """
    with open_store(src, format=source_format, mode="r") as source:
        held = source.topics()
        missing = source_side.missing_topics(source, topics)
    if missing:
        shown = ", ".join(held[:20]) + (f" and {len(held) - 20} more" if len(held) > 20 else "")
        raise NotFoundError(f"expected source topics named {', '.join(map(repr, missing))}, found "
                            f"{'topics ' + shown if held else 'no topics'}", src)


def _destination_config(src: str, options: _RunOptions) -> dict[str, Any]:
    """User config over the config recorded when ``src`` itself was converted from ``options.to``."""
    journal = _read_journal(src)
    recorded: dict[str, Any] = {}
    if journal is not None and journal.get("source_format") == options.to:
        recorded = dict(journal.get("source_config") or {})
    return {**recorded, **options.config}


def _open_destination(tmp: str, to: str, dest_config: dict[str, Any], src: str,
                      options: _RunOptions) -> Store:
    """Open the temporary directory for appends.

    :raises ConfigError: a config the destination refuses; one that holds a value the source's
        journal recorded (not one this run's ``config`` overrides) names that journal as its origin.
    """
    try:
        return open_store(tmp, format=to, mode="a", **dest_config)
    except ConfigError as err:
        recorded = sorted(set(dest_config) - set(options.config))
        if not recorded:
            raise
        raise ConfigError(f"{err.message} (with {', '.join(recorded)} from source_config of the conversion "
                          f"journal {os.path.join(src, JOURNAL_NAME)}; --config NAME=VALUE overrides it)",
                          err.path) from err


def _extents(source_side: FormatConversion, source: Store, reading: Options, src: str,
             to: str) -> list[Extent]:
    """The source's streams (:meth:`FormatConversion.extents`), with where each started in the store
    of format ``to`` that ``src`` was itself converted from (its journal's ``streams``), where the
    source's own files cannot hold that: an empty stream takes the recorded end (Kafka: an empty
    partition's log start), or the recorded start and end where it never held an entry (its min
    offset 0) and the recorded one had records (Kafka: a partition of transaction markers only,
    which no RocketMQ queue holds: they come back at their offsets), a stream with records the
    recorded start when it is not past the first record (Kafka: a log start before the first record
    kept) and the recorded end when it is past the last (Kafka: a log end after the last record
    kept).

    :raises InvalidTopicError: a stream named as a topic the target's broker keeps for itself
        (:func:`_check_internal`).
    """
    extents = source_side.extents(source, reading)
    journal = _read_journal(src)
    if journal is None or journal.get("source_format") != to:
        _check_internal(source_side, extents, None, to)
        return extents
    path = os.path.join(src, JOURNAL_NAME)
    recorded = _recorded(journal, "streams", path) or {}
    _check_internal(source_side, extents, recorded, to)
    whole = _holds_written(_recorded(journal, "written", path),
                           source_side.logs(source, replace(reading, topics=None)))
    out = []
    for extent in extents:
        found = recorded.get((extent.topic, extent.partition))
        if found is not None and extent.empty and found[0] < found[1] and extent.start == 0:
            # a stream that never held an entry of its own where the source recorded records: they
            # were all ones no stream holds (Kafka transaction markers), which come back in place
            extent = replace(extent, start=found[0], end=found[1] if whole else found[0])
        elif found is not None and extent.empty:
            extent = replace(extent, start=found[1], end=found[1])
        elif found is not None:
            extent = replace(extent, start=min(found[0], extent.start),
                             end=max(found[1], extent.end) if whole else extent.end)
        out.append(extent)
    return out


def _check_internal(source_side: FormatConversion, extents: list[Extent], recorded: _Spans | None,
                    to: str) -> None:
    """Refuse a stream that would become one of the target's internal topics
    (:attr:`TopicRules.internal`: Kafka's ``__consumer_offsets``, ``__transaction_state``,
    ``__cluster_metadata``, legal RocketMQ names) unless it came from the target: one with entries
    all of the target's (:attr:`Extent.home`), an empty one the source's journal (``recorded``, of a
    conversion from the target) holds or of a topic whose other streams with entries are all the
    target's (a copy without its journal).  Its broker would read any other's records as its own (Kafka
    3.8.0 ``GroupMetadataManager.doLoadGroupsAndOffsets`` fails the partition's load at a record
    without a key), so the run stops before it converts anything.  ``O(streams)``.

    :raises InvalidTopicError: naming the stream and how to leave it out.
    """
    rules = _side(to, "target").topics
    homes: dict[str, bool] = {}     # internal topic -> all its streams with entries came from the target
    for extent in extents:
        if extent.topic in rules.internal and not extent.empty:
            homes[extent.topic] = homes.get(extent.topic, True) and extent.home
    for extent in extents:
        if extent.topic not in rules.internal or extent.home or (extent.empty and (
                homes.get(extent.topic, False)
                or (recorded is not None and (extent.topic, extent.partition) in recorded))):
            continue
        side, names = source_side.topics.side, ", ".join(sorted(rules.internal))
        how = (f"an empty one no conversion from {rules.side} recorded" if extent.empty
               else f"whose records did not all come from {rules.side}")
        raise InvalidTopicError(f"expected no {side} topic converted into one a {rules.side} broker keeps "
                                f"for its own records ({names}), found {extent.topic}-{extent.partition}, "
                                f"{how} (leave the topic out: --topic names the topics to convert)")


def _holds_written(written: _Spans | None, logs: list[LogSpan]) -> bool:
    """Whether a store converted from another still holds every entry its conversion wrote: each log
    the journal recorded as ``written`` (the destination's, once done) still there and ending where it
    ended or later (appended to since).  One that ends before (a torn tail recovered away: RocketMQ
    4.9.7 ``CommitLog.recoverAbnormally``) lost entries of streams no one can tell, so no recorded end
    is taken past the entries held: the copy would end past records it lacks, as if cleaned away.  A
    journal without ``written`` (an earlier version's) is taken as whole.  ``O(logs)``."""
    if written is None:
        return True
    now = {(span.name,): span.end for span in logs}
    return all(name in now and now[name] >= end for name, (_, end) in written.items())


def _check_source(journal: dict[str, Any], extents: list[Extent], logs: list[LogSpan],
                  target_side: FormatConversion, src: str, tmp: str) -> None:
    """Refuse to resume over a source that changed since the interrupted run in a way the target's
    skipping gets wrong: ``journal``'s ``streams`` and ``logs`` (the source as the interrupted run
    found it, on disk before it converted anything) against ``extents`` and ``logs`` (as this run
    finds it).  A target that skips stream by stream (:attr:`FormatConversion.resumes_by_offset`)
    takes a source only appended to: every recorded stream and log still there with its start and
    at least its end, new ones anywhere (their records come after every one converted).  One that
    skips a count of entries takes only the same source: records added, removed or moved anywhere
    but past the last one converted change which entries the count skips, and where the interrupted
    run stopped is not recorded.  A journal without them (a new run's, or one written by a version
    that recorded the streams only once done) is not checked: the resume skips as it always did.
    ``O(streams + logs)``.

    :raises ConversionError: naming the first stream or log changed, with what the interrupted run
        found and what is there now.
    """
    grows = target_side.resumes_by_offset
    streams: _Spans = {(e.topic, e.partition): (e.start, e.end) for e in extents}
    held_logs: _Spans = {(span.name,): (span.start, span.end) for span in logs}
    for key, unit, now in (("streams", "offsets", streams), ("logs", "bytes", held_logs)):
        recorded = _recorded(journal, key, os.path.join(tmp, JOURNAL_NAME))
        change = None if recorded is None else _first_change(recorded, now, grows)
        if change is None:
            continue
        name = "-".join(map(str, change[0]))
        then, there = ("none" if span is None else f"{unit} {span[0]} to {span[1]}" for span in change[1:])
        how = (", or only appended to" if grows else f" (a {target_side.topics.side} destination resumes by "
               f"counting the records it holds, which any change of the source misplaces)")
        raise ConversionError(f"expected the source as the interrupted run found it{how}, found {name}: "
                              f"{then} then, {there} now (convert with --force instead of --resume to start "
                              f"over)", src)


def _firsts(source_side: FormatConversion, source: Store, reading: Options) -> list[list[Any]]:
    """The first entry of each of the source's streams, as ``[topic, partition, offset, digest]``
    (:func:`_digest`): what tells a source only appended to from another store put at its path
    with offsets and sizes as large (a resume would keep the other store's records below them).
    A stream whose first record is damaged is left out (with ``skip_corrupt`` or not, so that a
    resume may change that setting).  ``O(streams)`` first reads.
    """
    probe = replace(reading, skip_corrupt=False, skipped=[], problems=[])
    out: list[list[Any]] = []
    for stream in source_side.first_streams(source, probe):
        try:
            first = next(stream, None)
        except CorruptDataError:
            first = None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if first is not None:
            entry = first[0]
            out.append([entry.topic, entry.partition, entry.offset, _digest(entry)])
    return out


def _digest(entry: Entry) -> str:
    """SHA-256 of every field of ``entry`` (hex, 32 digits)."""
    fields = hashlib.sha256()
    for part in (entry.topic, entry.partition, entry.offset, entry.timestamp, entry.timestamp_type,
                 entry.transactional, entry.control, entry.producer_id, entry.producer_epoch,
                 len(entry.headers)):
        fields.update(repr(part).encode() + b"\0")
    for name, value in [("", entry.key), ("", entry.value), *entry.headers]:
        fields.update(name.encode() + b"\0")
        fields.update(b"-" if value is None else b"%d:%s" % (len(value), bytes(value)))
    return fields.hexdigest()[:32]


def _check_firsts(journal: dict[str, Any], firsts: list[list[Any]], src: str, tmp: str) -> None:
    """Refuse to resume when a stream's first record (:func:`_firsts`) is not the one the interrupted
    run found (or none is now): the store at the source's path is another one.  A journal without
    ``firsts`` (written by an earlier version) is not checked.

    :raises ConversionError: naming the stream, and the offset of its first record then and now.
    """
    recorded = journal.get("firsts")
    if recorded is None:
        return
    now = {(topic, partition): (offset, digest) for topic, partition, offset, digest in firsts}
    for item in recorded:
        try:
            topic, partition, offset, digest = item
            key, was = (str(topic), int(partition)), (int(offset), str(digest))
        except (TypeError, ValueError) as err:
            raise ConversionError(f"expected firsts of [topic, partition, offset, digest] in the conversion "
                                  f"journal, found {item!r}", os.path.join(tmp, JOURNAL_NAME)) from err
        found = now.get(key)
        if found != was:
            there = "none" if found is None else f"another at offset {found[0]}"
            raise ConversionError(f"expected the source as the interrupted run found it, found {key[0]}-"
                                  f"{key[1]}: a first record at offset {was[0]} then, {there} now (another "
                                  f"store at this path?) (convert with --force instead of --resume to start "
                                  f"over)", src)


def _first_change(recorded: _Spans, now: _Spans, grows: bool
                  ) -> tuple[tuple[Any, ...], tuple[int, int] | None, tuple[int, int] | None] | None:
    """The first of ``recorded`` (``(start, end)`` by name) that ``now`` lacks or holds otherwise, with
    both (None where absent), then (unless ``grows``) the first ``now`` adds; None when there is none.
    ``grows``: one with the same start and an end at or past the recorded one, and one added, are
    no change."""
    for name, was in recorded.items():
        found = now.get(name)
        if found != was and not (grows and found is not None and found[0] == was[0] and found[1] >= was[1]):
            return name, was, found
    if not grows:
        for name, found in now.items():
            if name not in recorded:
                return name, None, found
    return None


def _install(tmp: str, dst: str) -> None:
    """Rename ``tmp`` to ``dst``; an existing ``dst`` (``force``) is moved aside first, then removed.

    A replaced destination left aside by an install that was itself interrupted is removed too.
    ``dst`` is renamed by its absolute path: ``.`` (the working directory) cannot be renamed by that name.
    """
    dst = os.path.abspath(dst)
    old = f"{temp_path(dst)[:-len(TEMP_SUFFIX)]}{OLD_SUFFIX}"
    _remove(old)
    if files.exists(dst):
        files.rename(dst, old)
    files.rename(tmp, dst)
    files.fsync_dir(os.path.dirname(os.path.abspath(dst)))
    _remove(old)


def _remove(path: str) -> None:
    if os.path.islink(path):
        files.remove(path)
    elif files.is_dir(path):
        files.remove_tree(path)
    elif files.exists(path):
        files.remove(path)


def run(src: str, dst: str, *, to: str, topics: list[str] | None, compression: str, config: dict[str, Any],
        resume: bool, verify: bool, force: bool, skip_corrupt: bool, progress: bool | None,
        timestamp: str, decompress_bodies: bool = False) -> ConversionReport:
    """Run one conversion (see :func:`segstore.convert.convert`)."""
    target_side = _side(to, "target")
    _check_options(target_side, compression, timestamp)
    target_side.check_config(dict(config), compression, timestamp)
    if not files.is_dir(src):
        raise ConversionError("expected a source store directory, found none", src)
    source_format = registry.detect(src)
    if source_format == to:     # the arguments do not go together (exit 2), as a --format the path lacks
        raise ConversionOptionError(f"expected a source of another format than the target {cut(to)}, "
                                    f"found {cut(to)}", src)
    source_side = _side(source_format, "source", src)
    if timestamp != "born" and not source_side.chooses_timestamp:
        # silently ignored before: the records of such a source keep their one time
        raise ConversionOptionError(f"expected --timestamp {timestamp} only for a source whose messages have "
                                    f"a store time besides their born time (RocketMQ), found a "
                                    f"{source_format} source", src)
    if decompress_bodies and not source_side.inflates_bodies:
        raise ConversionOptionError(f"expected --decompress-bodies only for a source whose messages may hold "
                                    f"compressed bodies (RocketMQ), found a {source_format} source", src)
    options = _RunOptions(to=to, topics=None if topics is None else sorted(set(topics)),
                          compression=compression, config=dict(config), timestamp=timestamp,
                          skip_corrupt=skip_corrupt, decompress_bodies=decompress_bodies)
    if options.topics is not None:
        _check_topics(src, source_format, source_side, options.topics)
    report = ConversionReport(src=src, dst=dst, source_format=source_format, target_format=to)
    # A destination that is a symbolic link (a store kept on another disk) is converted where it
    # points: the temporary sibling on that disk and the link kept, pointing at the new store.
    # Beside the link, the install renamed the link aside, put a directory on the link's disk in
    # its place, and then could not remove the link it had renamed (rmtree refuses links).
    dst = os.path.realpath(dst) if os.path.islink(dst) else dst
    if not (files.is_dir(dst) and files.list_dir(dst)):
        registry.check_new_store(dst, to, whole=True)     # not where another store's broker fails
    tmp = temp_path(dst)
    if resume and not force and _finished(src, dst, tmp, options, source_format, source_side, report):
        if verify:
            check = _Progress(progress, f"convert {source_format} -> {to}: verify", report.already_present)
            try:
                _verify(src, source_format, dst, options, _destination_config(src, options), check)
            finally:
                check.close()
            report.verified = True
        return report
    journal = _prepare(src, dst, tmp, options, source_format, resume, force)
    started = time.perf_counter()
    bar = None
    converting = False
    try:
        with open_store(src, format=source_format, mode="r") as source:
            bar = _Progress(progress, f"convert {source_format} -> {to}", _source_messages(source))
            journal["source_config"] = source_side.source_config(source)
            dest_config = _destination_config(src, options)
            reading, writing = options.sides(source_side, target_side, source_format)
            extents = _extents(source_side, source, reading, src, to)
            logs = source_side.logs(source, reading)
            firsts = _firsts(source_side, source, reading)
            _check_source(journal, extents, logs, target_side, src, tmp)
            _check_firsts(journal, firsts, src, tmp)
            # on disk before anything is converted: what a resume of this run checks the source
            # against (and, once done, where each stream started for the way back)
            journal["streams"] = [[e.topic, e.partition, e.start, e.end] for e in extents]
            journal["logs"] = [[span.name, span.start, span.end] for span in logs]
            journal["firsts"] = firsts
            _write_journal(tmp, journal)
            with _open_destination(tmp, to, dest_config, src, options) as dest:
                target_side.open_streams(dest, extents, writing)
                converting = True
                _convert(source_side, target_side, source, dest, reading, writing, report, bar)
                report.not_carried = source_side.not_carried(source, reading)
                target_side.close_streams(dest, extents, writing)
                # what a conversion back takes the recorded ends on (:func:`_holds_written`)
                journal["written"] = [[span.name, span.start, span.end]
                                      for span in target_side.logs(dest, replace(writing, topics=None))]
    except BaseException as err:
        if (not converting and not resume) or (converting and isinstance(err, DEAD_ENDS)):
            # Refused before it started (a config name the target does not know, an unreadable
            # source): nothing was converted, so no interrupted run is left to resume or force.
            # Refused while converting (DEAD_ENDS): a resume would be refused at the same record,
            # and a corrected run would trip over what is left.
            _remove(tmp)
        if isinstance(err, InvalidTopicError) and err.path is None:
            # a topic the target cannot name or hold: the source's (its name mapped, found mid-run)
            raise InvalidTopicError(err.message, src) from err
        raise
    finally:
        if bar is not None:
            bar.close()
    report.seconds = time.perf_counter() - started
    journal.update(state=STATE_DONE, messages=report.messages + report.already_present)
    _write_journal(tmp, journal)
    if verify:
        check = _Progress(progress, f"convert {source_format} -> {to}: verify", report.messages
                          + report.already_present)
        try:
            _verify(src, source_format, tmp, options, dest_config, check)
        finally:
            check.close()
        report.verified = True
    _install(tmp, dst)
    return report


def _verify(src: str, source_format: str, tmp: str, options: _RunOptions, dest_config: dict[str, Any],
            check: _Progress) -> None:
    """Check the converted files and compare every record with the source.

    :raises ConversionError: a finding; the temporary directory is kept for inspection.
    """
    source_side, target_side = _side(source_format, "source"), _side(options.to, "target")
    with open_store(src, format=source_format, mode="r") as source, \
            open_store(tmp, format=options.to, mode="r", **dest_config) as dest:
        findings = [str(p) for p in dest.verify()][:REPORT_LIMIT]
        if not findings:
            reading, writing = options.sides(source_side, target_side, source_format)
            extents = _extents(source_side, source, reading, src, options.to)
            findings = target_side.check_streams(dest, extents, writing)[:REPORT_LIMIT]
        if not findings:
            findings = _compare(source_side, target_side, source, dest, reading, writing, check)
    if findings:
        raise ConversionError(f"expected the converted store to match the source, found {len(findings)} "
                              f"difference(s) (kept for inspection): " + "; ".join(findings[:3]), tmp)


__all__ = ["ConversionReport", "kafka_entry_of", "run", "temp_path"]
