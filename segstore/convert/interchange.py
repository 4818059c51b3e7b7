"""What a format plugin provides to the converter: the interchange record and each side's contract.

A conversion reads the source through its plugin's :class:`FormatConversion` as
:class:`Entry` records (the common record of :mod:`segstore.records`, plus the
producer identity and control flag of a log with transactions), and writes them
through the target plugin's.  The core knows no format: it finds both sides with
``registry.get(name).conversion()`` and speaks only this module, so any two
registered formats convert, a third-party one included.

Each plugin keeps what only it knows: how its records carry their own fields in
an entry's headers so they come back exactly, how it carries a foreign entry's
fields (prefixed with the peer format's name), its topic-name alphabet
(:class:`segstore.convert.topicnames.TopicRules`), how it numbers and places the
records it writes.  A format whose records *are* entries (Kafka) maps nothing.

Pure declarations; thread-safety is each implementation's (one conversion per
destination).
"""

from __future__ import annotations

import abc
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from segstore.columns import CONNECTOR_FIELDS
from segstore.errors import UnsupportedOperationError
from segstore.records import CREATE_TIME, Header
from segstore.store import Store

from .topicnames import TopicRules

#: A batch's producer id and epoch when it has none (Kafka's ``RecordBatch.NO_PRODUCER_ID``/``_EPOCH``).
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1


@dataclass(slots=True, eq=False)
class Entry:
    """One record in conversion: the common record with what a conversion keeps of its batch.

    ``topic`` is a name of the peer format's alphabet once a source hands the entry over
    (see :meth:`FormatConversion.entries`).  ``offset`` is absolute (-1 while a source
    still has to number it).  ``transactional``/``producer_id``/``producer_epoch`` are the
    producer identity of the record's batch (-1 when it had none); ``control`` marks a
    record no consumer sees (a transaction marker).

    Two entries are equal when every field is, a header key by its bytes: a key kept as stored
    bytes that are not UTF-8 (a :class:`segstore.javatext.JavaText`, ``raw``) equals only a key of
    those bytes, not every key Java reads as the same text (``--verify`` compares entries).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    timestamp_type: str = CREATE_TIME
    transactional: bool = False
    control: bool = False
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return (_entry_fields(self) == _entry_fields(other)
                and [getattr(k, "raw", None) for k, _ in self.headers]
                == [getattr(k, "raw", None) for k, _ in other.headers])

    __hash__ = None     # type: ignore[assignment]  # mutable, as a dataclass with eq is


#: An entry's fields, in order, as one tuple (what a dataclass's own ``__eq__`` compares).
_entry_fields = operator.attrgetter(*(f.name for f in fields(Entry)))


@dataclass(frozen=True)
class Peer:
    """The other side of a conversion as a plugin sees it: its format name (the prefix of the
    fields it carries for that format) and its topic-name rules."""

    name: str
    topics: TopicRules


@dataclass
class Options:
    """One run's options as both sides see them.

    ``batch_records``: entries per destination write (a record batch, a commitlog write).
    ``read_rows``: rows of a source's :meth:`FormatConversion.arrow_streams` batch at most (the
    converter holds a batch of every stream it merges); None: the format's own size.
    ``decompress_bodies``: a source gives bodies its producer compressed inflated, as consumers
    read them (:attr:`FormatConversion.inflates_bodies`; others have none);
    ``skipped``: where a source reports each corrupt region it skips (``skip_corrupt``);
    ``problems``: where it reports a record its entry does not give back (``verify``).
    """

    peer: Peer
    topics: list[str] | None = None
    compression: str = "none"
    timestamp: str = "born"
    skip_corrupt: bool = False
    decompress_bodies: bool = False
    batch_records: int = 500
    read_rows: int | None = None
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Extent:
    """One stream of a store, whether it holds records or not: offsets ``[start, end)`` as the
    side's entries number them (``start`` the first a consumer can read: Kafka's log start, a
    RocketMQ queue's min offset; ``end`` the next one to write), the topic named as the side's
    entries name it.  An empty stream (``start == end``) has no entry to carry it: a conversion
    creates it from its extent, so empty partitions and queues, and where they start, are kept.
    ``home``: its entries came from a store of the peer format (its first and last do; False for an
    empty stream, which has none to tell)."""

    topic: str
    partition: int
    start: int
    end: int
    home: bool = False

    @property
    def empty(self) -> bool:
        return self.start >= self.end


@dataclass(frozen=True)
class LogSpan:
    """One log a source's entries are read from (a Kafka segment file, the RocketMQ commitlog), by a
    name unique in the source, and the bytes it holds, ``[start, end)`` (its own positions or
    offsets).  Kept so that a resumed conversion tells whether the source changed since the
    interrupted run (:meth:`FormatConversion.logs`)."""

    name: str
    start: int
    end: int


#: ``(entry, source bytes)``: what a source stream yields.
Sized = tuple[Entry, int]

#: :class:`Entry` records as columns (a columnar conversion's batches): the common columns of
#: :mod:`segstore.columns` (``timestampType`` 0 CreateTime, 1 LogAppendTime), the batch's
#: producer identity and control flag, and each record's source bytes (``size``).
ENTRY_SCHEMA = pa.schema([
    *CONNECTOR_FIELDS,
    pa.field("isTransactional", pa.bool_(), nullable=False),
    pa.field("isControl", pa.bool_(), nullable=False),
    pa.field("producerId", pa.int64(), nullable=False),
    pa.field("producerEpoch", pa.int16(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
])
assert len(ENTRY_SCHEMA) == 13


class Writer(abc.ABC):
    """Writes entries into a destination store, in batches."""

    @abc.abstractmethod
    def add(self, entry: Entry, size: int) -> bool:
        """Buffer ``entry`` (``size`` source bytes); False if the destination holds it already (resume)."""

    @abc.abstractmethod
    def flush_all(self) -> None:
        """Write everything buffered."""


def add_taken(writer: ArrowWriter, pieces: list[pa.RecordBatch], order: np.ndarray) -> tuple[int, int, int]:
    """``writer.add_batch`` of the rows of ``pieces`` taken in ``order`` (batch by batch where a
    column passes Arrow's 2 GiB of offsets)."""
    taken = pa.Table.from_batches(pieces, schema=ENTRY_SCHEMA).take(pa.array(order))
    written = nbytes = present = 0
    for batch in taken.to_batches():
        w, b, p = writer.add_batch(batch)
        written, nbytes, present = written + w, nbytes + b, present + p
    return written, nbytes, present


class ArrowWriter(abc.ABC):
    """Writes :data:`ENTRY_SCHEMA` batches into a destination store (a columnar conversion)."""

    @abc.abstractmethod
    def add_batch(self, batch: pa.RecordBatch, prepared: Any = None) -> tuple[int, int, int]:
        """Buffer or write ``batch``'s rows; returns the rows taken, their source bytes (``size``) and
        the rows the destination held already (a resumed run).  ``prepared``: what :meth:`prepare`
        gave for the batch (``order`` None), or None."""

    def prepare(self, pieces: list[pa.RecordBatch], order: np.ndarray | None) -> Any:
        """What :meth:`add_rows` (or, for one batch as it is, ``order`` None, :meth:`add_batch`)
        would first make of these rows without the destination (their columns parsed, grouped or
        reordered), for it to take as ``prepared``; None when nothing (this default).  For merged
        rows it stands for them alone: a conversion then lets go of ``pieces`` (and of the source
        batches they are slices of) while the rows wait to be written.  It must not touch the
        destination or change the writer: a conversion calls it on another thread while the writer
        writes the rows before (``segstore.overlap.pipelined``)."""
        return None

    def add_rows(self, pieces: list[pa.RecordBatch] | None, order: np.ndarray,
                 prepared: Any = None) -> tuple[int, int, int]:
        """:meth:`add_batch` of the rows of ``pieces`` (one after another) in the order ``order``
        (int64 row numbers, each row once): what a merge of several streams gives, streams that
        came from this format (each row starts with its ``home_marker``: the merge checked); ``prepared``:
        what :meth:`prepare` gave for them, and then ``pieces`` is None.  This default takes the
        rows (a copy of every column); a writer that parses its columns first overrides it to
        reorder only what it made."""
        assert pieces is not None       # (this default's prepare gives nothing)
        return add_taken(self, pieces, order)

    @abc.abstractmethod
    def flush_all(self) -> None:
        """Write everything buffered."""


class Verifier(abc.ABC):
    """Compares a converted destination with the source's entries, one by one, in conversion order."""

    @abc.abstractmethod
    def check(self, entry: Entry) -> str | None:
        """What the destination holds differently from ``entry``; None when it matches."""

    @abc.abstractmethod
    def rest(self) -> list[str]:
        """What the destination holds beyond the source's entries."""


_SHARED: dict[type, FormatConversion] = {}


class FormatConversion(abc.ABC):
    """A format's side of a conversion (``FormatPlugin.conversion()``)."""

    #: The format's topic names (escaped into by a peer that lacks some of their characters).
    topics: TopicRules
    #: The batch compressions it can write (``--compression``).
    compressions: tuple[str, ...] = ("none",)
    #: The converter setting that sizes its writes (``segstore.convert.pipeline.BATCH_RECORDS``...).
    batch_setting: str = "BATCH_RECORDS"
    #: Whether its records may hold bodies their producer compressed, which it can give inflated
    #: (``Options.decompress_bodies``, ``--decompress-bodies``).
    inflates_bodies: bool = False
    #: Whether its records have a second time a conversion may take as the record's time
    #: (``Options.timestamp``, ``--timestamp store``: RocketMQ's store time beside the born time).
    chooses_timestamp: bool = False
    #: How its writers skip what a resumed run's destination holds already: True, stream by stream
    #: (each entry below the end offset the destination holds of the entry's stream); False, by
    #: count (as many entries of the conversion order as the destination holds).  A resume takes a
    #: source appended to since the interrupted run only with True: counted, records added to any
    #: stream but the last converted shift which entries are skipped.
    resumes_by_offset: bool = False

    def check_config(self, config: dict[str, Any], compression: str, timestamp: str) -> None:
        """Refuse a destination ``config`` (the user's, by the format's names) with a name or value the
        format does not take, before the pipeline adds the source journal's (whose errors name the
        journal), or that says otherwise than ``compression`` / ``timestamp`` about what is written
        (none by default).

        :raises ConfigError: a name or value the destination refuses.
        :raises ConversionOptionError: naming the config and the option.
        """
        return None

    @abc.abstractmethod
    def streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """The source's entries, one stream per run of records the format keeps in order (a
        partition, a whole commitlog); topic names already in ``options.peer``'s alphabet.

        With ``options.skip_corrupt`` damaged bytes go to ``options.skipped`` and reading
        goes on after them; otherwise they raise :class:`CorruptDataError`.
        """

    def missing_topics(self, source: Store, names: list[str]) -> list[str]:
        """The ``names`` (source topic names, ``--topic``) that select nothing of ``source``: by default
        those its store does not list (``Store.topics``)."""
        held = set(source.topics())
        return [name for name in names if name not in held]

    def arrow_streams(self, source: Store, options: Options) -> list[Iterator[pa.RecordBatch]] | None:
        """:meth:`streams` as :data:`ENTRY_SCHEMA` batches (the same entries, the same order), or
        None where the format reads no columns for these options (then the converter uses
        :meth:`streams`)."""
        return None

    def arrow_writer(self, dest: Store, options: Options) -> ArrowWriter | None:
        """A writer of :data:`ENTRY_SCHEMA` batches into ``dest``, equal to :meth:`writer` in what it
        writes; None where the format has none."""
        return None

    def first_streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """:meth:`streams`, for a reader taking only each stream's first entries (a resume's check of
        the source, before anything is converted): the same entries, which a format may decode one at
        a time where :meth:`streams` decodes a whole batch of them.  By default :meth:`streams`."""
        return self.streams(source, options)

    def round_trip_streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """:meth:`streams` for ``--verify``: a format whose entries carry its records' own fields
        also checks each record comes back whole from its entry (``options.problems``)."""
        return self.streams(source, options)

    def entry_of(self, record: Any, peer: Peer | None = None) -> Entry:
        """A record of this format (as its store reads it) as the entry a conversion to ``peer`` makes.

        :raises UnsupportedOperationError: the format does not say.
        """
        raise UnsupportedOperationError(f"{type(self).__name__} does not map single records")

    def home_position(self, entry: Entry) -> int | None:
        """Where ``entry`` lay in a store of this format it was converted from (the converter
        merges such streams back into that order); None for an entry that did not come from one.

        :raises ConversionError: a position that does not parse.
        """
        return None

    def home_positions(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """:meth:`home_position` of each row of an :data:`ENTRY_SCHEMA` batch (int64, -1 for a row that
        did not come from this format); None where the format cannot say in columns (the converter
        then goes entry by entry).  A format without :attr:`home_marker` has no such rows.

        :raises ConversionError: a position that does not parse.
        """
        return np.full(batch.num_rows, -1, np.int64) if not self.home_marker else None

    #: What marks an entry that came from this format (named in errors).
    home_marker: str = ""

    @abc.abstractmethod
    def writer(self, dest: Store, options: Options) -> Writer:
        """A writer of entries into ``dest`` (opened for append, possibly holding a resumed run's part)."""

    @abc.abstractmethod
    def verifier(self, dest: Store, options: Options) -> Verifier:
        """A verifier of ``dest`` (read-only) against the source's entries."""

    @classmethod
    def shared(cls) -> FormatConversion:
        """One object of this class for every caller (a side holds no state between runs)."""
        found = _SHARED.get(cls)
        if found is None:
            found = _SHARED[cls] = cls()
        return found

    def converted_offset(self, dest: Store, topic: str, queue: int, peer: Peer, offset: int) -> int:
        """Where a consumer of ``peer``'s store that committed ``offset`` on ``topic``/``queue`` (this
        format's names) goes on in ``dest``, a store of this format converted from it: the offset of
        the first entry converted from ``offset`` or a later one, the queue's end where there is none.
        This default: the same offset (a format whose conversion keeps the peer's offsets)."""
        return offset

    def not_carried(self, source: Store, options: Options) -> list[str]:
        """What a conversion of the selected streams does not carry of ``source`` (state a format keeps
        beside its records, which the peer has no place for), a line per stream that has any, as the
        report says it.  This default: nothing."""
        return []

    def extents(self, source: Store, options: Options) -> list[Extent]:
        """Every selected stream of ``source`` (``options.topics``), empty ones included, named and
        numbered as :meth:`streams` names and numbers its entries; [] where the format has none to
        keep (then only the streams that hold records come across)."""
        return []

    def logs(self, source: Store, options: Options) -> list[LogSpan]:
        """The logs the selected entries are read from, with the bytes each holds; [] where the format
        names none (then :meth:`extents` alone tell a resumed run whether the source changed).  A source
        only appended to keeps each log with its start and at least its end (new ones may follow); a
        log deleted, cut at either end or rewritten smaller (Kafka compaction, whose stream offsets
        stay) is a change.  Cheap: ``O(logs)``, no record read."""
        return []

    def open_streams(self, dest: Store, extents: list[Extent], options: Options) -> None:
        """Create in ``dest`` each stream of ``extents`` (the source's, named and numbered as the
        source's entries are) that its entries will not create: an empty one at its start where the
        format can hold that.  Called before any entry is written, again when a run resumes: a
        stream ``dest`` holds already is left as it is.  This default creates none."""
        return

    def close_streams(self, dest: Store, extents: list[Extent], options: Options) -> None:
        """Once every entry is written, end each stream of ``extents`` that holds records where its extent
        ends, past its last entry where the format can hold that (a Kafka log end after its last record).
        Called again when a resumed run finishes.  This default does nothing."""
        return

    def check_streams(self, dest: Store, extents: list[Extent], options: Options) -> list[str]:
        """What ``dest`` lacks of ``extents`` after a conversion (``--verify``): a stream missing, or
        starting elsewhere than where :meth:`open_streams` put it; one line each."""
        return []

    def source_config(self, source: Store) -> dict[str, Any]:
        """The source's config by the format's own names (kept in the journal for the way back)."""
        config = getattr(source, "config", None)
        as_dict: Callable[[], dict[str, Any]] | None = getattr(config, "as_dict", None)
        return as_dict() if as_dict is not None else {}


__all__ = ["ENTRY_SCHEMA", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "ArrowWriter", "Entry", "Extent",
           "FormatConversion",
           "LogSpan", "Options", "Peer", "Sized",
           "Verifier", "Writer"]
