"""``LogView``: the one contract between the core and a format's store.

Everything generic in the core (the index layouts of :mod:`segstore.layouts`,
conversion, Spark) sees a store only through this protocol; a format plugin's
store implements it, mostly with what a :class:`segstore.store.Store` has anyway:

- **streams**: :meth:`topics` and :meth:`partitions` (a RocketMQ queue, a Kafka
  partition, a stream of any other log);
- **offset ranges**: :meth:`offset_range` of each stream;
- **columnar batches** per offset range: :meth:`scan_arrow` with ``topic``,
  ``partition`` and ``offset`` yields ``pyarrow.RecordBatch`` es of the
  :mod:`segstore.columns` schema in offset order.  The columns the core relies on
  are ``offset``, ``position`` and ``size`` (where the record lies in the log),
  ``timestamp`` / :attr:`time_column`, ``key`` and ``headers``;
- **where each record lies**: :meth:`positions`, the ``offset``, ``position`` and
  ``size`` of the stream's records without decoding them where the format keeps a
  dense index of its own (a RocketMQ consume queue), else :func:`scan_positions`;
- **record access**: :meth:`read` by offset, and :meth:`record_at` from a log
  position an index entry gave;
- **the common record** (:meth:`to_common`) of what :meth:`read` returns;
- **where the extra indexes of a stream live** (:meth:`index_home`) and how
  positions split into file and in-file position (:meth:`position_bases`).

A format's *native* index files (the broker's own) are declared by its plugin
(:attr:`segstore.plugin.FormatPlugin.native_indexes`); lookups through them go
to the store (:meth:`read`, ``offset_for_time``, :meth:`KeyLookup.key_offsets`).

Thread-safety: as the store implementing it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from . import arrays
from .search import Bound, search

if TYPE_CHECKING:
    import pyarrow as pa

    from .records import Message


#: One chunk of :meth:`LogView.positions`: int64 ``(offsets, positions, sizes)`` of equal length.
Positions = tuple[np.ndarray, np.ndarray, np.ndarray]


@runtime_checkable
class LogView(Protocol):
    """What the core needs of a store (see the module docstring)."""

    path: str
    format: str
    mode: str

    #: The :meth:`scan_arrow` column time lookups go by (Kafka ``timestamp``, RocketMQ ``storeTimestamp``).
    time_column: str
    #: A boolean :meth:`scan_arrow` column marking records that carry no data (Kafka ``isControl``):
    #: never indexed by key.  None: every record is data.
    control_column: str | None

    def topics(self) -> list[str]:
        """Topic names, sorted."""
        ...

    def partitions(self, topic: str) -> list[int]:
        """The streams (queue ids / partitions) of ``topic``, sorted."""
        ...

    def offset_range(self, topic: str, partition: int) -> tuple[int, int]:
        """``(start, end)``: the first offset held and one past the last."""
        ...

    def scan_arrow(self, columns: Iterable[str] | None = None, *, topic: str | None = None,
                   partition: int | None = None, offset: int = 0) -> Iterator[pa.RecordBatch]:
        """With ``topic`` and ``partition``: that stream's records from ``offset`` on, in offset order,
        as batches of the format's :mod:`segstore.columns` schema projected to ``columns``."""
        ...

    def positions(self, topic: str, partition: int, offset: int = 0) -> Iterator[Positions]:
        """Where the stream's records lie, from ``offset`` on (the first at or after it), in offset
        order: chunks of int64 ``(offsets, positions, sizes)``, the values of :meth:`scan_arrow`'s
        ``offset``, ``position`` and ``size`` columns.

        A format that keeps a dense per-record index (a RocketMQ consume queue) reads it and
        decodes no record: the entries are taken as that index holds them, as the broker's own
        reader takes them (``verify`` checks them against the log).  Any other answers
        :func:`scan_positions`.  Memory: one chunk.
        """
        ...

    def read(self, topic: str, partition: int, offset: int = 0, count: int | None = None) -> Iterator[Any]:
        """Records of one stream from an absolute offset (the first at or after it), in offset order."""
        ...

    def record_at(self, topic: str, partition: int, offset: int, position: int) -> Any | None:
        """The record of the stream at or after ``offset``, looked for from log ``position`` on.

        ``position`` comes from an index entry (``scan_arrow``'s ``position`` of a record at or
        before ``offset``); the format walks from there instead of searching.  None: no such record.
        """
        ...

    def position_bases(self, topic: str, partition: int, positions: np.ndarray) -> np.ndarray:
        """The position where the log file holding each of ``positions`` starts (int64).

        Sparse offset entries hold positions relative to it (they are 32-bit).  A log of one
        file, or whose positions are per file already (Kafka), answers zeros.
        """
        ...

    def index_home(self, topic: str, partition: int) -> tuple[str, str]:
        """``(directory, sub-path)``: the extra index files of layout ``L`` over this stream go in
        ``directory/.segstore/L/sub-path`` (sub-path may be ``""``), where the broker never looks."""
        ...

    def index_homes(self) -> list[str]:
        """Every ``directory`` :meth:`index_home` can answer, without listing streams (cheap: opening
        a store asks it to find extra indexes on disk)."""
        ...

    def to_common(self, record: Any) -> Message:
        """A record of :meth:`read` in the common model."""
        ...


@runtime_checkable
class KeyLookup(Protocol):
    """A store whose format keeps a native key index (declared ``key`` in its plugin's native indexes)."""

    def key_offsets(self, topic: str, partition: int, key: bytes, max_hits: int | None = None) -> list[int]:
        """Offsets of the stream's records carrying ``key``, ascending (the newest ``max_hits``)."""
        ...


def stream_batches(view: LogView, topic: str, partition: int, start: int, end: int,
                   columns: Iterable[str]) -> Iterator[pa.RecordBatch]:
    """:meth:`LogView.scan_arrow` of one stream cut to offsets ``[start, end)`` (``offset`` among the
    columns).  Memory: one batch."""
    names = list(dict.fromkeys(["offset", *columns]))
    if start >= end:
        return
    for batch in view.scan_arrow(names, topic=topic, partition=partition, offset=start):
        if not batch.num_rows:
            continue
        offsets = int64_column(batch, "offset")
        if offsets[0] >= end:
            return
        if offsets[-1] >= end:
            yield batch.slice(0, search(offsets, end, Bound.SMALLEST_UPPER))
            return
        yield batch


def scan_positions(view: LogView, topic: str, partition: int, offset: int = 0) -> Iterator[Positions]:
    """:meth:`LogView.positions` through :meth:`LogView.scan_arrow` (each record decoded): the
    answer of a format with no dense per-record index of its own."""
    for batch in view.scan_arrow(["offset", "position", "size"], topic=topic, partition=partition,
                                 offset=offset):
        if batch.num_rows:
            yield (int64_column(batch, "offset"), int64_column(batch, "position"),
                   int64_column(batch, "size"))


def stream_positions(view: LogView, topic: str, partition: int, start: int,
                     end: int) -> Iterator[Positions]:
    """:meth:`LogView.positions` of one stream cut to offsets ``[start, end)``.  Memory: one chunk."""
    if start >= end:
        return
    for offsets, positions, sizes in view.positions(topic, partition, start):
        if not len(offsets):
            continue
        if offsets[0] >= end:
            return
        if offsets[-1] >= end:
            cut = search(offsets, end, Bound.SMALLEST_UPPER)
            yield offsets[:cut], positions[:cut], sizes[:cut]
            return
        yield offsets, positions, sizes


def int64_column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """A non-null integer or timestamp column of ``batch`` as int64 numpy (zero-copy where it can)."""
    import pyarrow as pa

    column = batch.column(name)
    if column.type != pa.int64():
        column = column.cast(pa.int64())
    return arrays.to_numpy(column, np.int64)     # Array.to_numpy imports pandas (0.2 s) at its first call
