"""The public store API every format plugin implements.

``segstore.open`` returns a :class:`Store`.  The base class owns what does not
depend on the format (mode checks, the context manager, the closed state); the
plugin's subclass owns the files.  A store is not thread-safe unless its class
says so: share one between threads only behind a lock.
"""

from __future__ import annotations

import abc
import functools
import json
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .errors import (
    ConfigError,
    CorruptDataError,
    NotFoundError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    SegstoreError,
    StoreClosedError,
    UnsupportedOperationError,
    cut,
    shown_number,
)
from .records import Message, Record

if TYPE_CHECKING:
    import pyarrow as pa

    from .consumers import ConsumerGroups
    from .layouts import IndexSet


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of ``verify``: renders as ``path:pos: message``."""

    path: str
    pos: int | None
    message: str

    def __str__(self) -> str:
        if self.pos is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.pos}: {self.message}"


@dataclass(slots=True)
class AppendResult:
    """Where an appended message landed.

    Not frozen: a frozen dataclass's ``__init__`` costs microseconds per result on
    the append path; treat it as read-only all the same.
    """

    topic: str
    partition: int
    offset: int
    position: int          # byte position in the log (RocketMQ physical offset, Kafka file position)
    size: int
    extra: dict[str, Any] = field(default_factory=dict)   # msg_id, store_timestamp, ...


#: ``QueryRequest.max`` for "every hit": key queries have no silent cap.
QUERY_ALL = 2**63 - 1

#: Isolation levels, as Kafka consumers' ``isolation.level``: every stored record, or what a
#: read_committed consumer is given (no records of aborted transactions, no transaction markers).
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


def check_isolation(level: str) -> str:
    """``level`` if it is one of :data:`ISOLATION_LEVELS`.

    :raises ConfigError: any other value.
    """
    if level not in ISOLATION_LEVELS:
        raise ConfigError(f"isolation must be {' or '.join(ISOLATION_LEVELS)}, found {level!r}")
    return level


@dataclass(frozen=True, slots=True)
class DumpLine:
    """One line of a dump or a query answer: ``text`` for a terminal, ``data`` for ``--json``.

    A ``problem`` line (an index entry that disagrees with the log, torn bytes, a bad CRC)
    reports a finding rather than content.  A ``note`` line remarks on the content without it
    being a problem (kafka-dump-log's non-consecutive offsets, which a compacted log has by
    design).  ``json=False`` marks a line only the human-readable output shows (a heading, a
    batch header).  ``json_text``: the ``--json`` line itself where the format writes ``data``
    otherwise than :func:`segstore.jsontext.dumps` (a record's line as its ``dump --json`` writes
    it, :meth:`Store.json_line`).  The CLI decides where each goes and what the exit code is.
    """

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    problem: bool = False
    json: bool = True
    note: bool = False
    json_text: str | None = None


@dataclass(slots=True)
class QueryRequest:
    """What ``segstore query`` asks; each format answers the combinations it supports.

    ``max`` bounds key hits (the newest ``max``); the default is every hit.  ``decompress``: bodies as
    consumers read them, where a format stores them as their producer compressed them (RocketMQ).
    """

    topic: str | None = None
    partition: int | None = None
    key: str | None = None
    offset: int | None = None
    count: int = 1
    timestamp: int | None = None
    begin: int | None = None
    end: int | None = None
    max: int = QUERY_ALL
    isolation: str = READ_UNCOMMITTED
    decompress: bool = False


@dataclass(slots=True)
class QueryResult:
    """The answer to a :class:`QueryRequest`.

    ``records``: the records found, in the order shown; ``offset``: the answer of a lookup
    by time that yields an offset rather than records (RocketMQ); ``lines``: how the CLI
    shows the answer (each line's ``text``, or its ``data`` as one JSON object);
    ``found``: whether anything matched (the CLI exits 1 when not); ``damage``: the error a read met
    after the records listed (the CLI prints them, then names it and exits 1, as ``dump`` does).
    """

    records: list[Record] = field(default_factory=list)
    lines: list[DumpLine] = field(default_factory=list)
    found: bool = False
    offset: int | None = None
    damage: CorruptDataError | None = None


def read_until_damage(records: Iterable[_T]) -> tuple[list[_T], CorruptDataError | None]:
    """The records of a read up to the damage it meets, and that damage (None: it read whole): what
    a query answers with the records before the damage, then the error (never none of them)."""
    found: list[_T] = []
    try:
        for record in records:
            found.append(record)
    except CorruptDataError as err:
        return found, err
    return found, None


#: a concrete store class (``with KafkaStore(...) as store`` gives a ``KafkaStore``)
StoreT = TypeVar("StoreT", bound="Store")
_T = TypeVar("_T")
_ReadT = TypeVar("_ReadT", bound=Callable[..., Iterator[Any]])


def reads_while_open(method: _ReadT) -> _ReadT:
    """A store method returning a read's iterator, made to raise :class:`StoreClosedError` where that
    iterator is read on after the store's ``close()`` (:meth:`Store._while_open`)."""
    @functools.wraps(method)
    def reading(self: Store, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return self._while_open(method(self, *args, **kwargs))

    return cast(_ReadT, reading)


def check_mode(mode: str, path: str) -> None:
    """Refuse a store mode other than ``"r"`` (read) and ``"a"`` (append).

    :raises ConfigError: naming the mode found.
    """
    if mode not in ("r", "a"):
        raise ConfigError(f"expected mode 'r' (read) or 'a' (append), found {mode!r}", path)


def _integer(value: Any) -> bool:
    """Whether ``value`` is an integer (Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _a(word: str) -> str:
    """``word`` after its indefinite article (``an end``, ``a begin``)."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def check_natural(name: str, value: Any, path: str | None = None) -> None:
    """:raises ConfigError: ``value`` (what the caller calls ``name``: a partition, ``max_hits``, an offset)
        is not an integer of at least 0; None passes (any)."""
    if value is not None and (not _integer(value) or value < 0):
        raise ConfigError(f"expected {name} as an integer of at least 0, found {type(value).__name__} "
                          f"{cut(value)}", path)


def check_time(name: str, value: Any, path: str | None = None, *, negative: bool = False) -> None:
    """:raises ConfigError: ``value`` (a time the caller calls ``name``) is not a number of ms (NaN
        included), or is negative (unless ``negative``); None passes."""
    if value is not None and (not isinstance(value, numbers.Real) or isinstance(value, bool)
                              or value != value):   # NaN: no time, every comparison with it false
        raise ConfigError(f"expected {_a(name)} time in ms since the epoch, found {type(value).__name__} "
                          f"{cut(value)}", path)
    if value is not None and value < 0 and not negative:
        raise ConfigError(f"expected {_a(name)} time of at least 0 ms, found {shown_number(value)}", path)


def check_batch_rows(batch_rows: Any, path: str | None = None) -> None:
    """:raises ConfigError: a ``scan_arrow`` ``batch_rows`` that is not an integer of at least 1 (None: the
        format's default)."""
    if batch_rows is not None and (not _integer(batch_rows) or batch_rows < 1):
        raise ConfigError(f"expected batch_rows of at least 1, found {cut(batch_rows)}", path)


def check_decompress(decompress: Any, path: str | None = None) -> None:
    """:raises ConfigError: a ``decompress`` (RocketMQ's read option, taken by Kafka's reads too) that is
        not True or False (``"no"`` would be true and inflate)."""
    if not isinstance(decompress, bool):
        raise ConfigError(f"expected decompress as True or False, found {type(decompress).__name__} "
                          f"{cut(decompress)}", path)


def lookup_key(key: Any, path: str | None = None) -> bytes:
    """A key to look up (``Store.find``) as bytes: a str as UTF-8, bytes-like as it is.

    A str holding ``surrogateescape`` characters is the bytes they stand for: a Kafka record's
    ``keys`` keeps a key that is not UTF-8 so (``records.py``), and so does Python with a command
    line's ``--key`` of such bytes; any other lone surrogate is written as it is read back
    (``surrogatepass``, as RocketMQ properties are decoded).

    :raises ConfigError: neither (``bytes(5)`` would be five zero bytes, ``bytes(None)`` a TypeError).
    """
    if isinstance(key, str):
        try:
            return key.encode("utf-8")
        except UnicodeEncodeError:
            try:
                return key.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return key.encode("utf-8", "surrogatepass")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise ConfigError(f"expected a key as str or bytes, found {type(key).__name__} {cut(key)}", path)


#: What :func:`quoted_text` escapes beyond JSON's escapes: DEL and the C1 controls (U+0080..U+009F),
#: which ``json.dumps`` leaves as they are, and a terminal may act on (U+009B is CSI, as ``ESC [``).
_TEXT_ESCAPES = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}
#: A character that makes :func:`text_word` quote a word: white space (``str.isspace``: a line break
#: too), a double quote, or a control character (Unicode's Cc: C0, DEL, C1).
_NEEDS_QUOTES = re.compile(r'[\s"\x00-\x1f\x7f-\x9f]')


def quoted_text(text: str) -> str:
    """``text`` as one quoted word of a human-readable line: JSON's quoting (``json.dumps`` with
    ``ensure_ascii=False``: ``\\n``, ``\\u001b``...), DEL and the C1 controls escaped too
    (``\\u007f``, ``\\u009b``), so no control character reaches the line as it is; ``json.loads``
    reads the text back."""
    return json.dumps(text, ensure_ascii=False).translate(_TEXT_ESCAPES)


def text_word(text: str) -> str:
    """``text`` as one word of a human-readable line (``name=value``): as it is, or :func:`quoted_text`
    where it holds white space (a line break too), a double quote or a control character (``ESC``,
    ``DEL``, C1), or is empty: the line stays one line, its words split as printed, and a terminal shown
    it acts on none of its characters (a word holding ``ESC [ 2 J`` would clear it, one holding a
    carriage return could print a line over another)."""
    return quoted_text(text) if not text or _NEEDS_QUOTES.search(text) else text


def key_word(key: bytes) -> str:
    """A record key as one word of a human-readable line (``describe``, a key query's hit): as it is,
    bytes that are not UTF-8 as ``\\xNN``; quoted as :func:`text_word` quotes (white space, quotes,
    control characters, empty), so that the line stays one line and its words split as printed."""
    return text_word(key.decode("utf-8", "backslashreplace"))


class Store(abc.ABC):
    """An open message-log store of one format.

    Modes: ``"r"`` reads (never blocks, never writes a byte), ``"a"`` appends
    (takes the writer lock, recovers first if needed).
    """

    format: str = ""
    #: the index layouts ``segstore.layouts.attach`` gave the store (None: none)
    indexes: IndexSet | None = None

    def __init__(self, path: str, mode: str) -> None:
        check_mode(mode, path)
        self.path = path
        self.mode = mode
        self._closed = False

    # -- lifecycle ---------------------------------------------------------
    def __enter__(self: StoreT) -> StoreT:
        """:raises StoreClosedError: the store was closed (as ``with`` a closed file refuses)."""
        self._check_open()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Flush (in append mode) and release every file. Idempotent."""
        self._closed = True

    # Not abstract: a no-op is the right default for a store that buffers nothing.
    def flush(self) -> None:  # noqa: B027
        """Make everything appended so far durable."""

    def abandon(self) -> None:
        """Drop the store as a killed process would: release files and the writer lock
        without flushing, checkpointing or marking a clean shutdown.

        What was written stays in the page cache (as after SIGKILL); the next open
        for append must recover.  The conformance suite uses it to crash a store.
        """
        raise UnsupportedOperationError(f"{self.format} stores cannot simulate a crash", self.path)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("store is closed", self.path)

    def _while_open(self, items: Iterator[_T]) -> Iterator[_T]:
        """``items`` (a read's iterator), raising :class:`StoreClosedError` where it is read on after
        :meth:`close`: each item and the end are checked against the store's state, so a read resumed
        after close neither ends early (a closed store's files are gone from its maps) nor reports
        what closed files read as (zeros: false damage).  One check per item, never per byte."""
        try:
            for item in items:
                self._check_open()
                yield item
            self._check_open()
        finally:
            close = getattr(items, "close", None)
            if close is not None:   # release the views the read holds now, not when collected
                close()

    def _check_writable(self) -> None:
        self._check_open()
        if self.mode != "a":
            raise ReadOnlyError("store was opened read-only (mode='r'); open it with mode='a' to append",
                                self.path)

    # -- writing -----------------------------------------------------------
    def append(self, message: Message | dict) -> AppendResult:
        """Append one message; returns where it landed."""
        return self.append_batch([message])[0]

    @abc.abstractmethod
    def append_batch(self, messages: Iterable[Message | dict]) -> list[AppendResult]:
        """Append messages in order, as one batch where the format has batches."""

    def check_destinations(self, destinations: Iterable[tuple[str, int]]) -> None:  # noqa: B027
        """Raise what an append to each ``(topic, partition)`` would raise for the names alone (a topic the
        format refuses, a partition out of range or not this directory's), writing nothing: for a
        writer that appends in several calls and must refuse before the first (Spark's commit).
        ``O(destinations)``.

        :raises InvalidMessageError: (or :class:`InvalidTopicError`) as the append would.
        """

    def append_arrow(self, batch: pa.RecordBatch | pa.Table) -> int:
        """Append the rows of a ``pyarrow.RecordBatch`` or ``Table`` of :mod:`segstore.columns`' schema
        (the columns :meth:`scan_arrow` yields: ``topic``, ``partition``, ``key``, ``value``,
        ``timestamp``, ``headers``; the format says which it needs and which it ignores), in order,
        encoded from the columns without a Python object per row; returns the rows appended.

        The columnar twin of :meth:`append_batch`: the same validation and typed errors, and a
        refused call writes nothing.  Memory is bounded by the format's batch size, not by the
        input's.  A scan piped into an append of another store is the fastest copy there is.

        :raises UnsupportedOperationError: the format has no columnar append.
        """
        raise UnsupportedOperationError(f"{self.format} stores do not support columnar appends", self.path)

    # -- reading -----------------------------------------------------------
    @abc.abstractmethod
    def scan(self) -> Iterator[Record]:
        """Every record in physical (log) order (each a :class:`Record` of the format's class)."""

    def scan_arrow(self, columns: Iterable[str] | None = None, *, topic: str | None = None,
                   partition: int | None = None, offset: int = 0, start: int | None = None,
                   end: int | None = None, threads: int | None = None) -> Iterator[pa.RecordBatch]:
        """The records as ``pyarrow.RecordBatch`` es of :mod:`segstore.columns`' schema for this format.

        With no arguments: every record in log order.  With ``topic`` and
        ``partition``: that queue/partition from absolute ``offset`` on, in offset
        order.  With ``start``/``end``: the records whose log position lies in
        ``[start, end)``.  ``columns`` projects (only those columns are built).
        Memory is bounded by the batch size, not the store.  ``threads``: how many threads a
        format that splits its reads may use (default: see segstore.overlap.thread_count); the same
        records in the same order and the same error at the same place with any number (the
        batches may be cut elsewhere).
        """
        raise UnsupportedOperationError(f"{self.format} stores do not support columnar reads", self.path)

    @abc.abstractmethod
    def read(self, topic: str, partition: int, offset: int = 0, count: int | None = None) -> Iterator[Record]:
        """Records of one queue/partition from an absolute offset, in offset order."""

    def _check_read(self, partition: Any, offset: Any, count: Any = None, *,
                    any_partition: bool = False) -> None:
        """:meth:`read`'s (and :meth:`scan_arrow`'s) arguments, before anything is looked up.

        :raises ConfigError: a partition (None allowed with ``any_partition``), offset or count (None: no
            limit) that is not an integer, or a negative count.
        :raises OffsetOutOfRangeError: a negative offset: no record has one (Kafka 3.8's
            ``KafkaConsumer.seek`` refuses it); RocketMQ's read took it as the first offset and its
            ``scan_arrow`` refused it, Kafka's read and scan gave every record.
        """
        for name, value, optional in (("partition", partition, any_partition), ("offset", offset, False),
                                      ("count", count, True)):
            if not _integer(value) and (value is not None or not optional):
                raise ConfigError(f"expected {'an' if name == 'offset' else 'a'} {name} as an integer, "
                                  f"found {type(value).__name__} {cut(value)}", self.path)
        if offset < 0:
            raise OffsetOutOfRangeError(f"expected an offset of at least 0 (offsets start at 0), "
                                        f"found {shown_number(offset)}", self.path)
        if count is not None and count < 0:
            # a count of -1 read nothing, silently: no limit is None
            raise ConfigError(f"expected a count of at least 0 (None: no limit), found {shown_number(count)}",
                              self.path)

    def _check_positions(self, start: Any, end: Any) -> None:
        """:meth:`scan_arrow`'s byte range, before anything is read.

        :raises ConfigError: a ``start`` or ``end`` (None: the log's start / end) that is not an integer:
            a str met a comparison deep in the read (TypeError), a float ``1.5`` was taken as a position.
        """
        for name, value in (("start", start), ("end", end)):
            if value is not None and not _integer(value):
                raise ConfigError(f"expected {_a(name)} position as an integer (a byte position in the log), "
                                  f"found {type(value).__name__} {cut(value)}", self.path)

    @abc.abstractmethod
    def topics(self) -> list[str]:
        """Topic names, sorted."""

    @abc.abstractmethod
    def partitions(self, topic: str) -> list[int]:
        """Queue ids / partitions of a topic, sorted."""

    @abc.abstractmethod
    def offset_range(self, topic: str, partition: int) -> tuple[int, int]:
        """``(start, end)``: the first offset held and one past the last."""

    def tail_error(self, topic: str, partition: int) -> SegstoreError | None:
        """What a read of ``topic``/``partition`` to its end meets past :meth:`offset_range`'s end: the
        bytes after the last whole message of a log the format keeps per partition (a tail a crash
        tore, or a live writer's message not yet whole), as a read of every message raises it; None
        where the log ends with a whole message, or the format has no such log (RocketMQ's queues
        end at their last entry).  For plans that stop at the end offset and still mean to read
        everything (Spark's batch reads).

        :raises NotFoundError: no such partition / queue.
        :raises StoreClosedError: the store was closed.
        """
        self.offset_range(topic, partition)     # the partition's checks (closed, no such queue, not a number)
        return None

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first offset of ``topic``/``partition`` whose timestamp is at or after ``timestamp``
        (ms since the epoch); None when every record is older.  The same call on every format.

        The timestamp is the one the format's broker looks offsets up by: Kafka's record
        timestamp as its ``.timeindex`` keeps it (``ListOffsets``), RocketMQ's store timestamp
        (``getOffsetInQueueByTime``; the born timestamp, ``Record.timestamp``, is the producer's
        clock and is not indexed).  ``O(log n)`` index reads.

        :raises ConfigError: a partition that is not an integer, a time that is no number (NaN included),
            a negative time (not a time: Kafka's ``ListOffsets`` reads -1, -2, -3 and -4
            as latest, earliest, max-timestamp and earliest local, which ``segstore query --timestamp``
            asks through :meth:`query`'s request, never here), as :meth:`offsets_between`.
        :raises NotFoundError: no such partition / queue.
        """
        raise UnsupportedOperationError(f"{self.format} stores do not support lookups by time", self.path)

    def _check_partition(self, partition: Any) -> None:
        """:raises ConfigError: a queue / partition that is not an integer (a str ``"0"`` would be looked up
            and reported as a partition the store does not hold; ``True`` or ``0.0`` taken for 1 and 0), as
            :meth:`read` refuses it."""
        if not _integer(partition):
            raise ConfigError(f"expected a partition as an integer, found {type(partition).__name__} "
                              f"{cut(partition)}", self.path)

    def _check_topic(self, topic: Any, *, any_topic: bool = False) -> None:
        """:raises ConfigError: a topic that is not a str (None allowed with ``any_topic``): a list met a
            dict lookup (``TypeError: unhashable type``), an int of thousands of digits the message naming
            it (``str()``'s ValueError)."""
        if not (isinstance(topic, str) or (topic is None and any_topic)):
            raise ConfigError(f"expected a topic as a str, found {type(topic).__name__} {cut(topic)}",
                              self.path)

    def _check_dump(self, topic: Any, partition: Any, tag: Any = None) -> None:
        """:meth:`dump`'s (``dump_json``, ``dump_text``) selection: a topic (or None), a partition (or
        None) and a tag (or None) of their kinds.

        :raises ConfigError: any other (an int topic or tag met ``str`` methods in the dump's first
            step, ``AttributeError``; a list partition numpy's ``ValueError``)."""
        self._check_topic(topic, any_topic=True)
        self._check_read(partition, 0, any_partition=True)
        if tag is not None and not isinstance(tag, str):
            raise ConfigError(f"expected a tag as a str, found {type(tag).__name__} {cut(tag)}", self.path)

    def _check_time(self, name: str, value: int | None, *, negative: bool = False,
                    required: bool = False) -> None:
        """:raises ConfigError: ``value`` (a time the caller calls ``name``) is not a number of ms (NaN
            included), or is negative (unless ``negative``) (:func:`check_time`), or None where
            ``required`` (a lookup's time: None met a comparison, ``TypeError``)."""
        if value is None and required:
            raise ConfigError(f"expected {_a(name)} time in ms since the epoch, found None", self.path)
        check_time(name, value, self.path, negative=negative)

    def offsets_between(self, topic: str, partition: int, begin: int | None = None,
                        end: int | None = None) -> tuple[int, int]:
        """``(start, stop)``: the offsets of ``topic``/``partition`` stored from ``begin`` through ``end``
        (ms since the epoch, both inclusive; None: from the log's start / to its end), as a consumer
        that seeks by time finds them: ``start`` the first offset at or after ``begin``, ``stop`` the
        first after ``end`` (:meth:`offset_for_time`, so each format's own time; RocketMQ ``mqadmin
        printMsg -b -e``, kcat's ``-o s@T -o e@T``).  ``start == stop``: none.  Where timestamps go
        back within a log, a record between the two may carry a time outside the window: the
        brokers' lookup, not a filter.  ``O(log n)`` index reads.

        :raises ConfigError: a partition that is not an integer, a time that is no number (NaN included),
            a negative time (Kafka's ``ListOffsets`` reads -1 and -2 as latest and
            earliest).
        :raises NotFoundError: no such partition / queue.
        """
        self._check_time("begin", begin)
        self._check_time("end", end)
        first, last = self.offset_range(topic, partition)
        latest = 2**63 - 1      # no record holds a later time (an int64 of ms)
        start = (first if begin is None else None if begin > latest
                 else self.offset_for_time(topic, partition, begin))
        start = last if start is None else max(start, first)
        after = None if end is None or end >= latest else self.offset_for_time(topic, partition, end + 1)
        stop = last if after is None else min(after, last)
        return start, max(start, stop)

    def segment_infos(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """The files holding a queue/partition, in offset order, for planners (Spark splits): per file
        ``start_offset``, ``end_offset`` (exclusive), ``bytes`` and ``path``."""
        raise UnsupportedOperationError(f"{self.format} stores do not list their segments", self.path)

    def find(self, topic: str, key: str | bytes, *, partition: int | None = None, begin: int | None = None,
             end: int | None = None, max_hits: int | None = None) -> list[Record]:
        """The records of ``topic`` carrying ``key``, the same call and the same answer as ``segstore query
        --key`` on every format.

        Key semantics are those of Spark and conversion: Kafka the record key (bytes equal); RocketMQ any
        ``KEYS`` token or the ``UNIQ_KEY`` (a str key is UTF-8).  ``partition`` narrows to one partition /
        queue.  ``begin``/``end``: milliseconds since the epoch, both inclusive, compared with the time the
        format's broker looks keys up by: RocketMQ the store time as its IndexFile keeps it (whole seconds
        after the file's first entry, ``IndexFile.selectPhyOffset``), Kafka the record timestamp (the
        ``.timeindex`` time; Kafka has no key lookup of its own).  ``max_hits``: at most that many hits
        in all (not per partition), the newest: RocketMQ the last stored, as the broker's
        ``queryMessage`` walks its IndexFiles from the newest entry back; Kafka the latest record
        timestamps (ties: the later partition, then offset).  Returned in partition then offset order.

        Lookups go through the ``key`` index layout (see :mod:`segstore.layouts`): RocketMQ's own
        IndexFiles, Kafka's extra key index (built by ``segstore index build PATH --index key``) plus a
        scan of the tail it does not cover yet; a format may answer without an index (Kafka scans the key
        column, ``O(bytes of the topic)``).  This generic version reads every hit's record: ``O(hits)``.

        :raises ConfigError: a topic not a str, a key neither str nor bytes, ``partition``/``max_hits`` not
            an integer of at least 0, ``begin``/``end`` not a number.
        :raises NotFoundError: a topic the store does not hold, or a ``partition`` of it that it does not
            hold, as ``read`` and ``offset_range`` raise it (a misspelt topic is no "no hits").
        """
        from .layouts import find_records

        self._check_open()
        raw = self._find_key(key, partition, begin, end, max_hits, topic=topic)
        found = find_records(self, topic, raw, partition=partition)
        if begin is not None or end is not None:
            low, high = begin if begin is not None else -(2**63), end if end is not None else 2**63 - 1
            found = [r for r in found if low <= r.timestamp <= high]
        return newest_hits(found, max_hits)

    def _find_key(self, key: Any, partition: Any, begin: Any, end: Any, max_hits: Any, *,
                  topic: Any = "") -> bytes:
        """:meth:`find`'s arguments checked before anything is looked up; returns the key as bytes.

        :raises ConfigError: a topic that is not a str (Kafka's find took None for every topic's records
            under one partition's), a key neither str nor bytes, a partition or ``max_hits`` not an
            integer (None: any), a negative ``max_hits``, a ``begin``/``end`` not a number of ms.
        :raises NotFoundError: a topic the store does not hold, or a partition of it it does not hold
            (RocketMQ 4.9.7 ``MQAdminImpl.queryMessage`` throws ``TOPIC_NOT_EXIST`` for a topic without
            queues; ``read`` and ``offset_range`` raise it for the same names).
        """
        self._check_topic(topic)
        raw = lookup_key(key, self.path)
        for name, value in (("partition", partition), ("max_hits", max_hits)):
            check_natural(name, value, self.path)
        self._check_time("begin", begin, negative=True)
        self._check_time("end", end, negative=True)
        if partition is not None:
            self.offset_range(topic, partition)     # the store's own NotFoundError for an unheld one
        else:
            topics = self.topics()
            if topic not in topics:
                shown = ", ".join(topics[:20]) + (f" and {len(topics) - 20} more" if len(topics) > 20 else "")
                raise NotFoundError(f"expected a topic named {topic!r}, found "
                                    f"{'topics ' + shown if topics else 'no topics'}", self.path)
        return raw

    def to_common(self, record: Record) -> Message:
        """The record as a :class:`Message` (``record.to_message()``).

        :raises ConfigError: not a :class:`Record` (a record of any format).
        """
        if not isinstance(record, Record):
            raise ConfigError(f"expected a record read from a store, found {type(record).__name__}",
                              self.path)
        return record.to_message()

    @abc.abstractmethod
    def to_json(self, record: Any) -> dict[str, Any]:
        """The record as one ``dump --json`` object.

        :raises ConfigError: not a record of this format (the built-in formats; :meth:`_check_record`).
        """

    def json_line(self, record: Any) -> str:
        """The record's ``dump --json`` line (without its newline), the very text :meth:`dump_json`
        writes for it, so ``query --json`` prints what ``dump --json`` prints: by default
        :func:`segstore.jsontext.dumps` of :meth:`to_json` (a format whose dump writes otherwise says so).

        :raises ConfigError: as :meth:`to_json`.
        """
        from . import jsontext

        return jsontext.dumps(self.to_json(record))

    def _check_record(self, record: Any, kind: type) -> None:
        """:raises ConfigError: ``record`` is not a ``kind`` (a record this format's reads give): another
            format's record or a :class:`Message` has none of this layout's fields (an AttributeError
            from inside ``to_json``); ``to_common`` takes either."""
        if not isinstance(record, kind):
            raise ConfigError(f"expected a {self.format} record (read from a {self.format} store), found "
                              f"{type(record).__name__} (to_common() takes a "
                              f"record of any format)", self.path)

    def describe(self, record: Any) -> str:
        """The record as one human-readable line (``segstore query`` without ``--json``)."""
        line = f"{text_word(record.topic)}/{record.partition}@{record.offset} timestamp={record.timestamp}"
        if record.key is None:
            return line
        return f"{line} key={key_word(record.key)}"

    # -- tooling -----------------------------------------------------------
    @abc.abstractmethod
    def info(self) -> dict[str, Any]:
        """Topics, partitions, offset ranges, files and sizes."""

    @abc.abstractmethod
    def verify(self) -> list[Problem]:
        """Check every file; an empty list means clean.  The built-in formats also take ``threads``
        (how many threads decode the logs; default: see segstore.overlap.thread_count)."""

    def recover(self) -> list[str]:
        """Repair what a crash left; returns one line per action taken.

        :raises UnrepairedDataError: damage remains that cannot be cut without losing intact
            records after it; its ``actions`` are the lines of what was done.
        """
        raise UnsupportedOperationError(f"{self.format} stores do not support recovery", self.path)

    def retention(self, *, dry_run: bool = False, **options: Any) -> list[dict[str, Any]]:
        """Delete what the broker's retention rules delete; one result dict per log touched.

        ``dry_run`` plans without writing.  The options and rules are the format's.
        """
        raise UnsupportedOperationError(f"{self.format} stores do not support retention", self.path)

    def delete_records(self, before: int, *, dry_run: bool = False, **options: Any) -> list[dict[str, Any]]:
        """Move the log start to ``before`` (Kafka DeleteRecords); one result dict per log touched."""
        raise UnsupportedOperationError(f"{self.format} stores do not support deleting records", self.path)

    def compact(self, *, dry_run: bool = False, **options: Any) -> list[dict[str, Any]]:
        """Compact the logs as the broker's cleaner does; one result dict per log touched."""
        raise UnsupportedOperationError(f"{self.format} stores do not support compaction", self.path)

    def config_notes(self, topic: str | None = None) -> list[str]:
        """Lines about the config the store uses for ``topic`` (every topic when None): where a value
        given by the caller overrides one the store's own files set, or a file's value was not applied.

        :raises StoreClosedError: the store was closed (as every other call answers then).
        """
        self._check_open()
        return []

    def dump(self, *, topic: str | None = None, partition: int | None = None, index: bool = False,
             isolation: str = READ_UNCOMMITTED, begin: int | None = None, end: int | None = None,
             offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None) -> Iterator[DumpLine]:
        """The human-readable dump, line by line, lazily: every record (of ``topic`` /
        ``partition`` when given) in log order, in the format's own layout; with ``index`` the
        index files too and the problems found checking them (``problem`` lines).

        ``isolation``, ``begin``, ``end`` and ``offsets`` as :meth:`dump_json`.  This default (for
        plugins without a layout of their own) is one line a record from :meth:`scan`:
        ``O(records)`` in Python; the built-in formats override it with their columnar dumps.
        """
        for record in self._dump_records(topic, partition, isolation, begin, end, offsets):
            yield DumpLine(f"{record.topic}/{record.partition} offset {record.offset} "
                           f"timestamp {record.timestamp}", self.to_json(record))

    def dump_json(self, *, topic: str | None = None, partition: int | None = None,
                  isolation: str = READ_UNCOMMITTED, threads: int | None = None, begin: int | None = None,
                  end: int | None = None, offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None
                  ) -> Iterator[bytes | memoryview]:
        """The ``dump --json`` lines: blocks of UTF-8 text, one :meth:`to_json` object a line, built
        a batch of records at a time (memory bounded by the batch, not the store).  A block may be
        a view of a buffer the next block reuses: write it out (or ``bytes()`` it) before asking
        for the next.

        ``isolation``: :data:`READ_COMMITTED` leaves out what a read_committed consumer never
        sees, where the format has transactions.  ``threads``: how many threads a format that
        splits its work may use (default: see segstore.overlap.thread_count; the same bytes with
        any).  ``begin``/``end`` (ms, inclusive): only each partition's records at the offsets
        :meth:`offsets_between` gives (:meth:`time_windows`), what a consumer seeking by time
        reads; ``offsets``, ``{(topic, partition): (start, stop)}``, those offsets instead (what
        ``dump --follow`` asks for each time).  The default (for plugins without a columnar dump)
        is a block a record from :meth:`scan` and :meth:`to_json`, on one thread.

        :raises ConfigError: an unknown isolation level.
        :raises UnsupportedOperationError: an isolation level the format cannot apply.
        """
        for record in self._dump_records(topic, partition, isolation, begin, end, offsets):
            yield (self.json_line(record) + "\n").encode("utf-8")

    def dump_text(self, *, topic: str | None = None, partition: int | None = None, index: bool = False,
                  isolation: str = READ_UNCOMMITTED, threads: int | None = None, begin: int | None = None,
                  end: int | None = None, offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None
                  ) -> Iterator[bytes | memoryview]:
        """:meth:`dump`'s lines (every one's ``text``, each ending in a newline) as blocks of UTF-8
        text, what the CLI's text dump writes; blocks may be views of a reused buffer, as
        :meth:`dump_json`'s.  ``threads``, ``begin``, ``end`` and ``offsets`` as
        :meth:`dump_json`.  This default is a block a line of :meth:`dump`; a format with a batch
        formatter overrides it (the same bytes).

        :raises ConfigError: an unknown isolation level.
        """
        for line in self.dump(topic=topic, partition=partition, index=index, isolation=isolation,
                              begin=begin, end=end, offsets=offsets):
            yield line.text.encode("utf-8", "surrogatepass") + b"\n"

    def _dump_records(self, topic: str | None, partition: int | None, isolation: str,
                      begin: int | None = None, end: int | None = None,
                      offsets: Mapping[tuple[str, int], tuple[int, int]] | None = None) -> Iterator[Any]:
        if check_isolation(isolation) != READ_UNCOMMITTED:
            raise UnsupportedOperationError(f"{self.format} stores have no transactions to hide "
                                            f"({isolation})", self.path)
        windows = self.dump_windows(topic, partition, begin, end, offsets)
        for record in self.scan():
            if topic is not None and record.topic != topic:
                continue
            if partition is not None and record.partition != partition:
                continue
            if windows is not None:
                start, stop = windows.get((record.topic, record.partition), (0, 0))
                if not start <= record.offset < stop:
                    continue
            yield record

    def dump_windows(self, topic: str | None, partition: int | None, begin: int | None, end: int | None,
                     offsets: Mapping[tuple[str, int], tuple[int, int]] | None
                     ) -> dict[tuple[str, int], tuple[int, int]] | None:
        """The windows a dump reads: ``offsets`` of the selected partitions (those holding some, each
        from its log start at least), else :meth:`time_windows`; None: the whole dump.

        :raises ConfigError: both ``offsets`` and a time given.
        """
        if offsets is None:
            return self.time_windows(topic, partition, begin, end)
        if begin is not None or end is not None:
            raise ConfigError("expected offsets or begin/end, found both", self.path)
        windows = {}
        for (t, p), (start, stop) in offsets.items():
            if (topic is None or t == topic) and (partition is None or p == partition):
                start = max(start, self.offset_range(t, p)[0])
                if start < stop:
                    windows[t, p] = (start, stop)
        return windows

    def time_windows(self, topic: str | None, partition: int | None, begin: int | None, end: int | None
                ) -> dict[tuple[str, int], tuple[int, int]] | None:
        """:meth:`offsets_between` of every selected partition (``topic``/``partition``, None: all)
        whose window holds a record, by ``(topic, partition)``; None when neither time is given.
        ``O(partitions log n)``."""
        if begin is None and end is None:
            return None
        found = {}
        for t in [topic] if topic is not None else self.topics():
            for p in self.partitions(t):
                if partition is None or p == partition:
                    start, stop = self.offsets_between(t, p, begin, end)
                    if start < stop:
                        found[t, p] = (start, stop)
        return found

    def consumer_groups(self, group: str | None = None, *, now_ms: int | None = None,
                        **options: Any) -> ConsumerGroups:
        """Consumer groups' committed offsets, one :class:`~segstore.consumers.ConsumerOffset` per group and
        partition (queue), as ``kafka-consumer-groups --describe`` lists them; only ``group``'s when given
        (no rows: no such group).  ``now_ms``: when offsets are judged expired, where the format expires
        them; ``options`` are the format's own.

        :raises ConfigError: a group that is not a str, a ``now_ms`` that is not whole ms (the built-in
            formats).
        """
        raise UnsupportedOperationError(f"{self.format} stores do not keep consumer offsets segstore reads",
                                        self.path)

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int], *,
                       now_ms: int | None = None, **options: Any) -> list[str]:
        """Commit ``group``'s next offsets, ``{(topic, partition): offset}``, all or none, where the
        broker keeps them (what ``kafka-consumer-groups --reset-offsets --execute`` has the broker
        do; the broker must be stopped).  ``now_ms``: the commit time, where the format keeps one;
        ``options`` as :meth:`consumer_groups`'.  Returns notes the caller should pass on (where the
        commit may not last, what else was written).

        :raises OffsetOutOfRangeError: an offset outside its partition's range; nothing written.
        :raises ConfigError: a group or offsets of the wrong kind (the built-in formats); nothing written.
        """
        raise UnsupportedOperationError(f"{self.format} stores do not keep consumer offsets segstore writes",
                                        self.path)

    def _check_commit(self, group: Any, offsets: Any) -> None:
        """:meth:`commit_offsets`' arguments, before any offset is looked at.

        :raises ConfigError: a group that is not a non-empty str, offsets that are not a mapping of
            ``(topic, partition)`` to an integer offset.
        """
        if not isinstance(group, str) or not group:
            raise ConfigError(f"expected a group id as a non-empty str, found {type(group).__name__} "
                              f"{cut(group)}", self.path)
        if not isinstance(offsets, Mapping):
            raise ConfigError(f"expected offsets as a mapping of (topic, partition) to offset, found "
                              f"{type(offsets).__name__}", self.path)
        for key, offset in offsets.items():
            if (not isinstance(key, tuple) or len(key) != 2 or not isinstance(key[0], str)
                    or not _integer(key[1])):
                raise ConfigError(f"expected offsets keyed by (topic, partition), found {cut(key)}",
                                  self.path)
            if not _integer(offset):
                raise ConfigError(f"expected an integer offset for {key[0]}/{key[1]}, found "
                                  f"{type(offset).__name__} {cut(offset)}", self.path)

    def _check_group_call(self, group: Any, topic: Any = None, now_ms: Any = None, *,
                          any_group: bool = False) -> None:
        """:meth:`consumer_groups` / :meth:`commit_offsets` / :meth:`delete_offsets` arguments of the wrong
        kind, before anything is read.

        :raises ConfigError: a group that is not a str (None where ``any_group``), a topic that is not a str
            or None, a ``now_ms`` that is not a whole number of ms since the epoch in an int64 (or None).
        """
        if not (isinstance(group, str) or (group is None and any_group)):
            raise ConfigError(f"expected a group id as a str, found {type(group).__name__} {cut(group)}",
                              self.path)
        if topic is not None and not isinstance(topic, str):
            raise ConfigError(f"expected a topic as a str, found {type(topic).__name__} {cut(topic)}",
                              self.path)
        if now_ms is not None and not _integer(now_ms):
            raise ConfigError(f"expected now_ms as whole ms since the epoch, found {type(now_ms).__name__} "
                              f"{cut(now_ms)}", self.path)
        if now_ms is not None and not -(1 << 63) <= now_ms < 1 << 63:     # a record timestamp: an int64
            raise ConfigError(f"expected now_ms within a 64-bit timestamp, found {shown_number(now_ms)}",
                              self.path)

    def _deleted_partitions(self, topic: str | None, partitions: Iterable[int] | None) -> set[int] | None:
        """:meth:`delete_offsets`' ``partitions`` as a set (None: every partition of ``topic``).

        :raises ConfigError: ``partitions`` without ``topic``, or not partition numbers.
        """
        if partitions is None:
            return None
        if topic is None:
            raise ConfigError("expected a topic with the partitions whose offsets to delete, found none",
                              self.path)
        chosen = list(partitions) if isinstance(partitions, Iterable) else [partitions]
        for number in chosen:
            if not _integer(number) or number < 0:
                raise ConfigError(f"expected partition numbers of {topic} (ints at least 0), found "
                                  f"{type(number).__name__} {cut(number)}", self.path)
        return set(chosen)

    def delete_offsets(self, group: str, topic: str | None = None, *, partitions: Iterable[int] | None = None,
                       now_ms: int | None = None, **options: Any) -> list[str]:
        """Delete ``group``'s committed offsets of ``topic`` (only of its ``partitions`` when given, as
        ``--delete-offsets --topic T:0,1``), or the whole group (None), where the broker keeps them
        (``kafka-consumer-groups --delete-offsets`` / ``--delete``; the broker must be stopped).  Returns
        notes as :meth:`commit_offsets`.

        :raises NotFoundError: the group holds no offset of ``topic`` (of ``partitions``; or none at all).
        :raises ConfigError: ``partitions`` without ``topic``, or not partition numbers.
        """
        raise UnsupportedOperationError(f"{self.format} stores do not keep consumer offsets segstore writes",
                                        self.path)

    def transaction_states(self, transactional_id: str | None = None) -> list[dict[str, Any]]:
        """The transaction coordinator's state per transactional id, where the format keeps one.  A dict
        with ``error`` names what could not be read (``path:pos: what``); one with ``damage`` too, a file
        that did not read whole (the state past there is missing)."""
        raise UnsupportedOperationError(f"{self.format} stores keep no transaction coordinator state",
                                        self.path)

    def query(self, request: QueryRequest) -> QueryResult:
        """Answer ``segstore query``: the records (or offset) found and how to show them."""
        raise UnsupportedOperationError(f"{self.format} stores do not support queries", self.path)


def bytes_by_topic(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``info``'s ``topic_bytes``: the ``bytes`` of its per-queue (partition) rows summed by ``topic``, the
    largest first (which topics fill the disk), ties by name."""
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["topic"]] = totals.get(row["topic"], 0) + row["bytes"]
    return [{"topic": name, "bytes": size}
            for name, size in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))]


def newest_hits(records: list[Record], max_hits: int | None) -> list[Record]:
    """The ``max_hits`` records of ``records`` with the latest timestamps (ties: the later partition, then
    offset), in partition then offset order; every record when ``max_hits`` is None.

    Runtime complexity: ``O(n log(n))``.
    """
    if max_hits is not None:
        records = sorted(records, key=lambda r: (r.timestamp, r.partition, r.offset))
        # records[-max_hits:], not records[len - max_hits:]: with fewer records than max_hits that start
        # is negative and would drop the oldest ones (every hit is kept, as the broker's queryMessage does)
        records = records[-max_hits:] if max_hits > 0 else []
    return sorted(records, key=lambda r: (r.partition, r.offset))
