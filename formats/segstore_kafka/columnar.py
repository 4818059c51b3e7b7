"""Columnar decode of a Kafka ``.log`` byte region into Arrow record batches.

A region of a mapped segment is walked once, batch by batch; every record
becomes a row of :data:`segstore.columns.KAFKA_SCHEMA`.  The walk fills plain
numpy buffers (the layout below), which :func:`to_arrow` wraps into Arrow arrays
without copying (``pa.Array.from_buffers``).  Two decoders fill them:

- the C loop ``_speedups.decode_columns`` (when built): CRC-32C of each v2 batch,
  then its records straight from the map (or from the decompressed stream) into
  the buffers, keys/values/headers copied into one contiguous data buffer each;
- the reference, :func:`_decode_reference`, which decodes through the record
  codec of :mod:`.batch` (``iter_batches`` + ``RecordBatch.records``).

The C loop takes only batches it can prove whole and valid, and stops before any
other (a legacy v0/v1 entry, a torn or corrupt batch): the reference then decodes
that batch or raises its typed error, so both paths give the same rows, the same
errors and the same positions by construction (and the tests check that the C
loop accepts exactly what the reference accepts).  Rows decoded before an error
are yielded before it is raised.

Buffer layout of one chunk (:data:`BUFFERS`, in the order the C loop takes them)::

    batches          BATCH_DTYPE[batches]   one row per batch: header fields, position, size, first row
    offset           int64[rows]            absolute offset
    timestamp        int64[rows]            ms (the batch max timestamp under LogAppendTime)
    sequence         int32[rows]            producer sequence (base + offset delta, wrapping), or -1
    row_batch        int32[rows]            the row's batch (index into ``batches``)
    key_offsets      int32[rows + 1]        Arrow binary offsets into key_data
    key_valid        uint8[rows / 8]        Arrow validity bitmap (0 = null key)
    key_data         uint8[...]
    value_*          the same for values
    header_offsets   int32[rows + 1]        Arrow list offsets into the headers
    hkey_offsets     int32[headers + 1]     header keys (UTF-8: as Java reads them, see HKEY_RAW)
    hkey_data        uint8[...]
    hvalue_offsets   int32[headers + 1]     header values (nullable)
    hvalue_valid     uint8[headers / 8]
    hvalue_data      uint8[...]

Memory is bounded by the chunk capacities (:class:`Capacity`), grown only when a
single batch does not fit an empty chunk.  Pure (buffers in, arrays out, no
files); thread-safe.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from segstore import speedups
from segstore.arrays import from_numpy
from segstore.columns import pooled_together
from segstore.errors import CorruptDataError, SegstoreError

from . import batch as codec
from .compression import decompress

if TYPE_CHECKING:   # pyarrow loads where a chunk becomes a record batch (the walk itself needs none)
    import pyarrow as pa

# The C extension is optional (segstore.speedups warns once when it is missing); the reference
# below gives the same rows.
_speedups = speedups.load("segstore_kafka._speedups")

__all__ = ["BATCH_DTYPE", "BUFFERS", "Capacity", "Chunk", "decode", "json_lines", "record_batch", "to_arrow"]

#: One row per batch (native byte order; the C ``BatchRow``).
BATCH_DTYPE = np.dtype([
    ("base_offset", "=i8"),
    ("position", "=i8"),         # the batch's byte position in its file
    ("base_timestamp", "=i8"),
    ("max_timestamp", "=i8"),
    ("producer_id", "=i8"),
    ("last_offset_delta", "=i8"),  # a legacy wrapper's offset span is not bounded by int32
    ("size", "=i4"),             # the batch's bytes, log overhead included
    ("leader_epoch", "=i4"),
    ("base_sequence", "=i4"),
    ("record_count", "=i4"),
    ("crc", "=u4"),
    ("first_row", "=i4"),        # its first row in the chunk
    ("attributes", "=i2"),
    ("producer_epoch", "=i2"),
    ("magic", "=i1"),
    ("pad", "V3"),
])
assert BATCH_DTYPE.itemsize == 80

BUFFERS = ("batches", "offset", "timestamp", "sequence", "row_batch",
           "key_offsets", "key_valid", "key_data", "value_offsets", "value_valid", "value_data",
           "header_offsets", "hkey_offsets", "hkey_data", "hvalue_offsets", "hvalue_valid", "hvalue_data")
COUNTS = ("batches", "rows", "key", "value", "headers", "hkey", "hvalue",
          "key_nulls", "value_nulls", "hvalue_nulls")

# How the C loop stopped, and which buffers were short (its STOP_* and NEED_* values).
STOP_END, STOP_FULL, STOP_DECLINE = 0, 1, 2
#: The buffer (objects, one per header; not one the C loops take) that a chunk holding a header key that
#: is not UTF-8 has: its stored bytes (``hkey_data`` holds the key as Java reads it, a U+FFFD for each
#: malformed sequence: ``RecordHeader.key()``), None for the other keys.  Only the reference decodes
#: such keys (the C loop declines their batches).
HKEY_RAW = "hkey_raw"
#: The column of those bytes (``segstore.columns.KAFKA_SCHEMA``), built from :data:`HKEY_RAW` (the C
#: export lays out the others).
STORED_KEYS = "headerKeysBytes"
WANT_KEY, WANT_VALUE, WANT_HEADERS = 1, 2, 4
#: Batch rows only, as Kafka 3.8's producer state reads a log (``ProducerStateManager`` /
#: ``ProducerAppendInfo.append``, ``LogSegment.recover``): a data batch is taken on its header and CRC,
#: its records not decoded (no row); a control batch's records (its marker) are decoded.
WANT_BATCH_HEADERS = 8
#: Row buffers the C loop may leave unwritten (:func:`want_flags`, for a scan's columns that do not read
#: them): ``timestamp``; ``sequence``, ``row_batch`` and (without :data:`WANT_HEADERS`) ``header_offsets``.
OMIT_TIMESTAMP, OMIT_ROW_EXTRAS = 16, 32
_NEED = {"batches": 1, "rows": 2, "key": 4, "value": 8, "headers": 16, "hkey": 32, "hvalue": 64}
_DATA = ("key", "value", "hkey", "hvalue")
#: The fewest bytes of a v2 record (seven one-byte varints: length, attributes, timestamp and offset
#: deltas, key and value lengths, header count; ``MIN_RECORD_SIZE`` in ``_speedups.c``) and of a v2
#: batch (its header, ``V2_HEADER_SIZE``).
MIN_RECORD_SIZE = 7
MIN_BATCH_SIZE = codec.RECORD_BATCH_OVERHEAD

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: The columns whose values the decoder must copy; the rest come from fixed-width buffers.
VARIABLE = {"key": WANT_KEY, "value": WANT_VALUE, "headers": WANT_HEADERS, STORED_KEYS: WANT_HEADERS}


@dataclass(frozen=True, slots=True)
class Capacity:
    """Most rows, batches and data bytes of one chunk (what bounds a scan's memory)."""

    # Small enough that the allocator reuses the freed buffers of the chunk before (fresh pages
    # fault in at a cost that doubled the scan time with 64k-row chunks), large enough that
    # the per-chunk Python is noise.
    rows: int = 16384
    batches: int = 4096
    key: int = 1 << 20
    value: int = 4 << 20
    headers: int = 1 << 17
    hkey: int = 2 << 20
    hvalue: int = 4 << 20

    @classmethod
    def for_rows(cls, rows: int) -> Capacity:
        """The default capacity for chunks of ``rows`` rows (at least one).  Fewer than the default's:
        the data buffers in proportion, at least 4 KiB each (a reader that holds chunks of many streams
        at once keeps each small).  More: the rows alone, the data buffers and batches the default's,
        so a chunk of small records holds more of them (up to the default's 4 MiB of values) and a
        reader pays its per-chunk Python fewer times (the Spark worker's CPU per value query of 4M
        100-byte values 0.26-0.28 -> 0.22-0.25 s at 65,536 rows: about 41k a chunk).  A batch bigger
        than that still comes whole (:meth:`grown`)."""
        default = cls()
        rows = max(1, rows)
        if rows >= default.rows:
            return default if rows == default.rows else replace(default, rows=rows)
        return cls(rows=rows, **{name: max(4096 if name in _DATA else 1,
                                           getattr(default, name) * rows // default.rows)
                                 for name in ("batches", "key", "value", "headers", "hkey", "hvalue")})

    @classmethod
    def for_bytes(cls, size: int, rows: int | None = None) -> Capacity:
        """A capacity for a ``size``-byte range of a log: data buffers of at most ``size`` bytes each (at
        least 4 KiB), so a reader of several ranges at once does not take the default's megabytes for
        each, and ``rows`` rows, by default enough for records of 64 bytes on average (the default's
        at least), so that the range of an uncompressed log of usual records comes as one chunk, not
        a full one and a remainder (each chunk costs its batch's Python)."""
        default = cls()
        size = max(4096, size)
        return cls(rows=rows or max(default.rows, size // 64), batches=default.batches,
                   **{name: min(getattr(default, name), size) for name in _DATA})

    def within(self, size: int) -> Capacity:
        """This capacity cut to what a ``size``-byte region of uncompressed v2 batches can fill: a batch
        takes :data:`MIN_BATCH_SIZE` bytes at least, a record :data:`MIN_RECORD_SIZE`, a header two (its
        two lengths), and keys and values are bytes of the region (4 KiB at least, as :meth:`for_bytes`,
        for what a compressed batch inflates to).  A small segment's chunk then takes kilobytes, not the
        default's megabytes (blocks that big come from Arrow's pool: :data:`segstore.columns.POOL_MIN`);
        a compressed batch holding more still comes whole (:meth:`grown`).  Itself where nothing is cut
        (a region of the default's size or more)."""
        size = max(0, size)
        cut = replace(self, rows=min(self.rows, size // MIN_RECORD_SIZE + 1),
                      batches=min(self.batches, size // MIN_BATCH_SIZE + 1),
                      headers=min(self.headers, size // 2 + 1),
                      **{name: min(getattr(self, name), max(4096, size)) for name in _DATA})
        return self if cut == self else cut

    def grown(self, need: int) -> Capacity:
        """Four times the buffers the C loop found short (``need`` is its mask)."""
        return replace(self, **{name: getattr(self, name) * 4 for name, bit in _NEED.items() if need & bit})


@dataclass(slots=True)
class Chunk:
    """The buffers of one decoded run of whole batches, with their filled counts."""

    buffers: dict[str, np.ndarray]
    counts: dict[str, int]

    @property
    def rows(self) -> int:
        return self.counts["rows"]

    @property
    def batches(self) -> np.ndarray:
        """The batch rows (``BATCH_DTYPE``), in log order."""
        return self.buffers["batches"][:self.counts["batches"]]

    def blob(self, name: str, row: int) -> bytes | None:
        """Row ``row``'s ``key`` or ``value`` (``name``) bytes, None where null: what its Arrow column
        (:func:`to_arrow`) holds there, read without making one."""
        b = self.buffers
        if self.counts[f"{name}_nulls"] and not b[f"{name}_valid"][row >> 3] >> (row & 7) & 1:
            return None
        at = b[f"{name}_offsets"]
        return b[f"{name}_data"][int(at[row]):int(at[row + 1])].tobytes()

    def head(self, rows: int, batches: int) -> Chunk:
        """The first ``rows`` rows and ``batches`` batches (the rows' batches among them) over the same
        buffers, their counts recomputed (data sizes from the offsets, nulls from the validity bits).
        ``O(rows + headers)``."""
        b = self.buffers
        counts = dict(self.counts, rows=rows, batches=batches)
        for name in ("key", "value"):
            if name in self.counts and f"{name}_offsets" in b and len(b[f"{name}_offsets"]) > rows:
                counts[name] = int(b[f"{name}_offsets"][rows])
                counts[f"{name}_nulls"] = rows - _set_bits(b[f"{name}_valid"], rows)
        if "headers" in self.counts and len(b["header_offsets"]) > rows:
            headers = counts["headers"] = int(b["header_offsets"][rows]) if rows else 0
            if len(b["hkey_offsets"]) > headers:
                counts["hkey"] = int(b["hkey_offsets"][headers])
                counts["hvalue"] = int(b["hvalue_offsets"][headers])
                counts["hvalue_nulls"] = headers - _set_bits(b["hvalue_valid"], headers)
        return Chunk(b, counts)


def _set_bits(bits: np.ndarray, n: int) -> int:
    """How many of the first ``n`` bits of a little-endian validity bitmap are set."""
    return int(np.unpackbits(bits[:(n + 7) // 8], bitorder="little")[:n].sum()) if n else 0


def _bits(flags: np.ndarray) -> np.ndarray:
    return np.packbits(flags.astype(np.bool_), bitorder="little")


def _allocate(cap: Capacity, want: int) -> dict[str, np.ndarray]:
    """Fresh buffers for one chunk: each yielded chunk owns its memory (Arrow arrays point into it),
    carved from one buffer of an Arrow pool (:func:`segstore.columns.pooled_together`: freed chunks'
    memory is reused instead of mapped and zeroed afresh, and a chunk costs one allocation)."""
    rows = cap.rows
    key, value, headers = bool(want & WANT_KEY), bool(want & WANT_VALUE), bool(want & WANT_HEADERS)
    i32, u8 = np.int32, np.uint8
    shapes: dict[str, tuple[int, type | np.dtype]] = {
        "batches": (cap.batches, BATCH_DTYPE),
        "offset": (rows, np.int64), "timestamp": (rows, np.int64),
        "sequence": (rows, i32), "row_batch": (rows, i32), "header_offsets": (rows + 1, i32)}
    if key:
        shapes.update(key_offsets=(rows + 1, i32), key_valid=(rows // 8 + 1, u8), key_data=(cap.key, u8))
    if value:
        shapes.update(value_offsets=(rows + 1, i32), value_valid=(rows // 8 + 1, u8),
                      value_data=(cap.value, u8))
    if headers:
        shapes.update(hkey_offsets=(cap.headers, i32), hkey_data=(cap.hkey, u8),
                      hvalue_offsets=(cap.headers, i32), hvalue_valid=(cap.headers // 8 + 1, u8),
                      hvalue_data=(cap.hvalue, u8))
    buffers = dict(zip(shapes, pooled_together(list(shapes.values())), strict=True))
    for name in BUFFERS:        # a column not wanted: a one-item placeholder the C loop leaves alone
        if name not in buffers:
            buffers[name] = np.zeros(1, u8 if name.endswith(("_data", "_valid")) else i32)
    return buffers


def _inflater(path: str):
    """The one call into the decompressors, as ``RecordBatch.records`` makes it (same bounds, same errors)."""
    def inflate(codec_id: int, data, pos: int) -> bytes:
        return decompress(codec_id, data, path=path, pos=pos)
    return inflate


def want_flags(columns: Iterable[str]) -> int:
    """The C loop's ``want`` mask for a scan of the columns named: the variable columns to copy (only
    they cost a copy), and the row buffers none of them reads to leave unwritten (:data:`OMIT_TIMESTAMP`,
    :data:`OMIT_ROW_EXTRAS`): a chunk decoded with it holds those columns (and ``offset`` and the batch
    rows) for :func:`to_arrow`, not every buffer."""
    names = set(columns)
    flags = 0
    for name in names:
        flags |= VARIABLE.get(name, 0)
    if "timestamp" not in names:
        flags |= OMIT_TIMESTAMP
    if "sequence" not in names:
        flags |= OMIT_ROW_EXTRAS
    return flags


def decode(view, *, path: str = "<memory>", start: int = 0, end: int | None = None,
           want: int = WANT_KEY | WANT_VALUE | WANT_HEADERS, capacity: Capacity | None = None,
           accelerated: bool = True) -> Iterator[Chunk]:
    """Chunks of the batches that start in ``[start, end)`` of a ``.log`` buffer, in log order.

    ``start`` must be a batch boundary; a batch starting before ``end`` is decoded
    whole.  ``want`` (:data:`WANT_KEY` | ...) names the variable columns to fill.
    ``accelerated=False`` uses only the reference.  ``O(bytes)``, memory bounded
    by ``capacity``.  ``view`` may be a function giving the buffer (a file's ``view``): it is
    asked again for each chunk and let go of before the chunk is given, so that a reader between
    two chunks holds no view of a mapped file (which then may let go of its map and descriptor:
    a merge holds a reader of each of thousands of partitions); the first buffer's length bounds
    the region.

    :raises TruncatedDataError: the region ends inside a batch (after the rows before it).
    :raises CorruptDataError: a bad length, magic, CRC, compressed stream or record.
    """
    take = view if callable(view) else None
    view = _bytes_view(view() if take is not None else view)
    end = len(view) if end is None else min(end, len(view))
    cap = (capacity or Capacity()).within(end - start)
    c = _speedups if accelerated else None     # the C loop, where built and wanted
    inflate = _inflater(path)
    pos = start
    while pos < end:
        if view is None:    # (let go of after a chunk: taken again, as the file is now)
            view = _bytes_view(take())      # type: ignore[misc]
            end = min(end, len(view))
            if pos >= end:
                return
        if c is not None:
            buffers = _allocate(cap, want)
            stop, pos, counts, need = c.decode_columns(view, pos, end, want, inflate,
                                                       tuple(buffers[name] for name in BUFFERS))
            filled = dict(zip(COUNTS, counts, strict=True))
            if filled["batches"]:
                if take is not None:
                    view = None
                yield Chunk(buffers, filled)
            if stop == STOP_END:
                return
            if stop == STOP_FULL:
                if not filled["batches"]:
                    cap = cap.grown(need)
                continue
            if view is None:
                view = _bytes_view(take())      # type: ignore[misc]
                end = min(end, len(view))
        chunk, pos, error = _decode_reference(view, pos, end, path, cap.rows, single=c is not None,
                                              headers_only=bool(want & WANT_BATCH_HEADERS))
        if chunk is not None:
            if take is not None:
                view = None
            yield chunk
        if error is not None:
            raise error


def _bytes_view(buffer: Any) -> memoryview:
    """``buffer`` as a memoryview of bytes (itself where it is one)."""
    if isinstance(buffer, memoryview) and buffer.format == "B":
        return buffer
    return memoryview(buffer).cast("B")


# ---------------------------------------------------------------------------------
# The reference: the record codec of batch.py, row by row into the same buffers


def _decode_reference(view: memoryview, pos: int, end: int, path: str, max_rows: int,
                      single: bool, headers_only: bool = False
                      ) -> tuple[Chunk | None, int, SegstoreError | None]:
    """Decode whole batches from ``pos`` through :mod:`.batch`: ``(chunk, next position, error)``.

    Stops at ``end``, after ``max_rows`` rows, at the first error (returned, with
    the rows before it), and with ``single`` (the C loop declined the batch at
    ``pos``) before the first v2 batch after the first batch: legacy entries,
    which the C loop never takes, are decoded here in runs.  ``headers_only``
    (:data:`WANT_BATCH_HEADERS`): a data batch's records are not decoded (no row).
    """
    batches: list[tuple[Any, ...]] = []
    offsets: list[int] = []
    timestamps, sequences, row_batch = [], [], []
    keys, values, header_lists = [], [], []
    error = None
    try:
        while pos < end and len(offsets) < max_rows:
            batch = next(codec.iter_batches(view, path=path, start=pos))
            if single and batches and batch.magic >= codec.MAGIC_V2:
                break
            records = batch.records() if not headers_only or batch.is_control else []
            batches.append((batch.base_offset, batch.position, batch.base_timestamp, batch.max_timestamp,
                            batch.producer_id, batch.last_offset_delta, batch.size,
                            batch.partition_leader_epoch, batch.base_sequence, batch.record_count, batch.crc,
                            len(offsets), batch.attributes, batch.producer_epoch, batch.magic, b""))
            index = len(batches) - 1
            for record in records:
                if not _INT64_MIN <= record.offset <= _INT64_MAX:  # a damaged legacy wrapper's offset shift
                    raise CorruptDataError(f"expected record offsets within int64, found {record.offset}",
                                           path, batch.position)
                offsets.append(record.offset)
                timestamps.append(record.timestamp)
                sequences.append(record.sequence)
                row_batch.append(index)
                keys.append(record.key)
                values.append(record.value)
                header_lists.append(record.headers)
            pos = batch.position + batch.size
    except SegstoreError as err:
        error = err
    if not batches:
        return None, pos, error
    headers = [h for hs in header_lists for h in hs]
    buffers = {"batches": np.array(batches, BATCH_DTYPE),
               "offset": np.array(offsets, np.int64), "timestamp": np.array(timestamps, np.int64),
               "sequence": np.array(sequences, np.int32), "row_batch": np.array(row_batch, np.int32),
               "header_offsets": np.cumsum([0] + [len(hs) for hs in header_lists], dtype=np.int32)}
    counts = {"batches": len(batches), "rows": len(offsets), "headers": len(headers)}
    for name, blobs in (("key", keys), ("value", values), ("hkey", [k.encode() for k, _ in headers]),
                        ("hvalue", [v for _, v in headers])):
        buffers[f"{name}_offsets"] = np.cumsum([0] + [len(b) if b is not None else 0 for b in blobs],
                                               dtype=np.int32)
        data = b"".join(b for b in blobs if b is not None)
        buffers[f"{name}_data"] = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
        counts[name] = len(data)
        if name != "hkey":
            buffers[f"{name}_valid"] = _bits(np.array([b is not None for b in blobs] + [False], np.bool_))
            counts[f"{name}_nulls"] = sum(b is None for b in blobs)
    raws = [getattr(k, "raw", None) for k, _ in headers]
    if any(raw is not None for raw in raws):    # keys that are not UTF-8 (only this path decodes them)
        buffers[HKEY_RAW] = np.array(raws, dtype=object)
    return Chunk(buffers, counts), pos, error


# ---------------------------------------------------------------------------------
# Arrow


def _binary(type_: pa.DataType, n: int, offsets: np.ndarray, data: np.ndarray, size: int,
            valid: np.ndarray | None, nulls: int) -> pa.Array:
    import pyarrow as pa

    validity = pa.py_buffer(valid) if nulls else None
    buffers = [validity, pa.py_buffer(offsets[:n + 1]), pa.py_buffer(data[:size])]
    return pa.Array.from_buffers(type_, n, buffers,
                                 null_count=nulls)


def _repeated_string(value: str, n: int) -> pa.Array:
    import pyarrow as pa

    encoded = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * n)])


def spread_runs(columns: list[np.ndarray], counts: np.ndarray, accelerated: bool = True) -> list[np.ndarray]:
    """``np.repeat(column, counts)`` for each column (one value per batch; ``counts``: int64 rows per
    batch), into one pool allocation; the C loop, where built, gives up the GIL
    for it (np.repeat holds it: on several threads half a scan's work went one thread at a time).
    ``O(rows)`` per column."""
    c = _speedups if accelerated else None
    if c is None:
        return [np.repeat(column, counts) for column in columns]
    sources = [np.ascontiguousarray(column) for column in columns]
    rows = int(counts.sum())
    targets = pooled_together([(rows, source.dtype) for source in sources])
    c.spread_runs(counts, tuple((source, target, source.dtype.itemsize)
                                for source, target in zip(sources, targets, strict=True)))
    return targets


class _Export(NamedTuple):
    """What ``export_chunk`` needs of a schema, worked out once per schema object."""

    schema: pa.Schema      # kept: its id is the key
    codes: bytes | None    # the columns' places in KAFKA_SCHEMA; None: not KAFKA_SCHEMA's columns
    inner: pa.Schema       # the columns export_chunk lays out: schema but STORED_KEYS
    stored_at: int         # STORED_KEYS's place in schema, -1 for none


#: by ``id(schema)``: the schemas of a process are few (the projections scans ask for)
_exports: dict[int, _Export] = {}


def _export_of(schema: pa.Schema) -> _Export:
    """``schema``'s :class:`_Export`: its columns as ``export_chunk`` numbers them (their places in
    ``KAFKA_SCHEMA``), or None where a column is not one of ``KAFKA_SCHEMA``'s, of its type, or comes
    twice."""
    found = _exports.get(id(schema))
    if found is not None and found.schema is schema:
        return found
    from segstore.columns import KAFKA_SCHEMA

    names = KAFKA_SCHEMA.names
    ok = len(schema) > 0 and len(set(schema.names)) == len(schema.names) and all(
        field.name in names and field.type == KAFKA_SCHEMA.field(field.name).type
        and field.nullable == KAFKA_SCHEMA.field(field.name).nullable for field in schema)
    stored_at = schema.get_field_index(STORED_KEYS)
    inner = schema if stored_at < 0 else schema.remove(stored_at)
    ok = ok and len(inner) > 0
    found = _Export(schema, bytes(names.index(name) for name in inner.names) if ok else None, inner,
                    stored_at)
    if len(_exports) >= 64:
        _exports.clear()
    _exports[id(schema)] = found
    return found


def _export_args(chunk: Chunk) -> tuple[tuple[int, ...], tuple[np.ndarray, ...]]:
    """The ``counts`` and ``buffers`` arguments of ``export_chunk`` for ``chunk``."""
    c = chunk.counts
    return ((c["rows"], c["batches"], c["key"], c["value"], c["headers"], c["hkey"], c["hvalue"],
             c["key_nulls"], c["value_nulls"], c["hvalue_nulls"]),
            tuple([chunk.buffers[name] for name in BUFFERS]))


def _exported(chunk: Chunk, export: _Export, topic: str, partition: int, segment: int) -> pa.RecordBatch:
    """:func:`to_arrow` by ``export_chunk``: the columns laid out in C over the chunk's buffers (the
    batch-level ones written out per row into one pool buffer) and imported by pyarrow in one call."""
    import pyarrow as pa

    encoded = topic.encode("utf-8")
    assert _speedups is not None and export.codes is not None
    counts, buffers = _export_args(chunk)
    [scratch] = pooled_together([(_speedups.export_scratch(export.codes, counts[0], len(encoded)), np.uint8)])
    address = _speedups.export_chunk(export.codes, counts, buffers, scratch, encoded, partition, segment)
    try:
        batch = pa.RecordBatch._import_from_c(address, export.inner)
    finally:
        _speedups.release_export(address)   # the struct freed; released too where the import failed
    if export.stored_at >= 0:
        batch = batch.add_column(export.stored_at, export.schema.field(export.stored_at), stored_keys(chunk))
    return batch


#: :func:`stored_keys`' all-null columns by length: a scan's chunks are mostly of one length, and an
#: Arrow array is immutable, so their batches share one (it took ~10 us of pyarrow calls a chunk).
#: Cleared when it holds 8 (each holds 4.1 bytes a row: 67 KB for a default chunk of 16,384 rows).
_null_keys: dict[int, pa.Array] = {}


def stored_keys(chunk: Chunk) -> pa.Array:
    """The :data:`STORED_KEYS` column of the chunk's rows: null for a record whose header keys are all
    UTF-8 (every record of a chunk without :data:`HKEY_RAW`), else each key's stored bytes, null for
    its UTF-8 ones.  ``O(rows)`` for such a chunk, ``O(1)`` else (made once per length)."""
    import pyarrow as pa

    n = chunk.rows
    kind = pa.list_(pa.binary())
    raws = chunk.buffers.get(HKEY_RAW)
    if raws is None:    # (its own zeroed buffers: pa.nulls' shared ones concatenate to other bytes)
        nulls = _null_keys.get(n)
        if nulls is None:
            valid, offsets = np.zeros((n + 7) // 8, np.uint8), np.zeros(n + 1, np.int32)
            valid.flags.writeable = offsets.flags.writeable = False     # immutable buffers: shared
            empty = pa.Array.from_buffers(pa.binary(), 0, [None, pa.py_buffer(offsets[:1]),
                                                            pa.py_buffer(b"")])
            nulls = pa.Array.from_buffers(kind, n, [pa.py_buffer(valid), pa.py_buffer(offsets)],
                                          null_count=n, children=[empty])
            if len(_null_keys) >= 8:
                _null_keys.clear()
            _null_keys[n] = nulls
        return nulls
    ends = chunk.buffers["header_offsets"][:n + 1].tolist()
    rows = [raws[a:b].tolist() for a, b in itertools.pairwise(ends)]
    return pa.array([row if any(raw is not None for raw in row) else None for row in rows], kind)


def to_arrow(chunk: Chunk, schema: pa.Schema | None = None, *, topic: str, partition: int,
             segment: int, accelerated: bool = True) -> pa.RecordBatch:
    """The chunk's rows as a record batch of ``schema`` (:data:`KAFKA_SCHEMA`, the default, or a
    projection of it).

    Fixed-width columns wrap the chunk's buffers without copying; batch-level
    columns are gathered per row.  ``O(rows)`` in C: where the accelerator is built (and
    ``accelerated``), every column is laid out in one C call and handed to pyarrow through the
    Arrow C data interface (:func:`_exported`); else the reference below, a pyarrow call a column
    and numpy.  Thread-safety: as the chunk (read only).
    """
    import pyarrow as pa

    from segstore.columns import HEADER, HEADERS, KAFKA_SCHEMA, TIMESTAMP

    if schema is None:
        schema = KAFKA_SCHEMA
    if accelerated and _speedups is not None and chunk.counts["rows"]:
        export = _export_of(schema)
        if export.codes is not None:
            return _exported(chunk, export, topic, partition, segment)
    b = chunk.buffers
    c = chunk.counts
    n = c["rows"]
    batches = chunk.batches
    attributes = batches["attributes"]
    v2 = batches["magic"] >= codec.MAGIC_V2
    # the batch-level columns (and the chunk's partition and segment), per batch: written out per row
    # together (:func:`spread_runs`: the GIL given up)
    per_batch: dict[str, Callable[[], np.ndarray]] = {
        "position": lambda: batches["position"], "size": lambda: batches["size"],
        "baseOffset": lambda: batches["base_offset"], "leaderEpoch": lambda: batches["leader_epoch"],
        "magic": lambda: batches["magic"],
        "compression": lambda: (attributes & codec.CODEC_MASK).astype(np.int8),
        "isTransactional": lambda: v2 & (attributes & codec.TRANSACTIONAL_FLAG != 0),
        "isControl": lambda: v2 & (attributes & codec.CONTROL_FLAG != 0),
        "producerId": lambda: batches["producer_id"], "producerEpoch": lambda: batches["producer_epoch"],
        "timestampType": lambda: np.where(batches["magic"] == 0, -1,
                                          attributes & codec.TIMESTAMP_TYPE_FLAG != 0).astype(np.int32),
        "partition": lambda: np.full(len(batches), partition, np.int32),
        "segment": lambda: np.full(len(batches), segment, np.int64),
    }
    wanted = [name for name in schema.names if name in per_batch]
    # rows of each batch: the next batch's first row less its own (np.diff with append= took 20 us a chunk)
    first_rows = batches["first_row"]
    rows_per_batch = np.empty(len(first_rows), np.int64)
    np.subtract(first_rows[1:], first_rows[:-1], out=rows_per_batch[:-1])
    if len(first_rows):
        rows_per_batch[-1] = n - first_rows[-1]
    per_row = dict(zip(wanted, spread_runs([per_batch[name]() for name in wanted], rows_per_batch),
                       strict=True))

    def headers() -> pa.Array:
        nh = c["headers"]
        keys = _binary(pa.string(), nh, b["hkey_offsets"], b["hkey_data"], c["hkey"], None, 0)
        values = _binary(pa.binary(), nh, b["hvalue_offsets"], b["hvalue_data"], c["hvalue"],
                         b["hvalue_valid"], c["hvalue_nulls"])
        pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER))
        return pa.ListArray.from_arrays(from_numpy(b["header_offsets"][:n + 1]), pairs, type=HEADERS)

    build = {
        "key": lambda: _binary(pa.binary(), n, b["key_offsets"], b["key_data"], c["key"], b["key_valid"],
                               c["key_nulls"]),
        "value": lambda: _binary(pa.binary(), n, b["value_offsets"], b["value_data"], c["value"],
                                 b["value_valid"], c["value_nulls"]),
        "topic": lambda: _repeated_string(topic, n),
        "partition": lambda: from_numpy(per_row["partition"]),
        "offset": lambda: from_numpy(b["offset"][:n]),
        "timestamp": lambda: from_numpy(b["timestamp"][:n], TIMESTAMP),
        "timestampType": lambda: from_numpy(per_row["timestampType"]),
        "headers": headers,
        "position": lambda: from_numpy(per_row["position"]),
        "size": lambda: from_numpy(per_row["size"]),
        "baseOffset": lambda: from_numpy(per_row["baseOffset"]),
        "leaderEpoch": lambda: from_numpy(per_row["leaderEpoch"]),
        "magic": lambda: from_numpy(per_row["magic"]),
        "compression": lambda: from_numpy(per_row["compression"]),
        "isTransactional": lambda: from_numpy(per_row["isTransactional"]),
        "isControl": lambda: from_numpy(per_row["isControl"]),
        "producerId": lambda: from_numpy(per_row["producerId"]),
        "producerEpoch": lambda: from_numpy(per_row["producerEpoch"]),
        "sequence": lambda: from_numpy(b["sequence"][:n]),
        "segment": lambda: from_numpy(per_row["segment"]),
        STORED_KEYS: lambda: stored_keys(chunk),
    }
    return pa.RecordBatch.from_arrays([build[name]() for name in schema.names], schema=schema)


# ---------------------------------------------------------------------------------
# dump --json


def record_batch(row: tuple) -> codec.RecordBatch:
    """The :class:`batch.RecordBatch` header of one ``BATCH_DTYPE`` row (``.tolist()`` item), no data."""
    (base_offset, position, base_timestamp, max_timestamp, producer_id, last_offset_delta, size, leader_epoch,
     base_sequence, record_count, crc, _first_row, attributes, producer_epoch, magic, _pad) = row
    return codec.RecordBatch(base_offset, size - codec.LOG_OVERHEAD, leader_epoch, magic, crc, attributes,
                             last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                             base_sequence, record_count, position)


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def header_json(key: str, value: bytes | None, raw: bytes | None = None) -> dict[str, str | None]:
    """A header as ``dump --json`` gives it: ``key`` (the text Java reads), ``value`` (base64 or null), and
    between them ``keyBase64``, the key's stored bytes, where they are not UTF-8 (``raw``, or a
    :class:`segstore.javatext.JavaText` key's)."""
    raw = getattr(key, "raw", None) if raw is None else raw
    if raw is None:
        return {"key": key, "value": _b64(value)}
    return {"key": key, "keyBase64": _b64(raw), "value": _b64(value)}


def text_lines(chunk: Chunk, heads: list[bytes | None], timestamp_types: list[bytes], tails: list[bytes],
               start: int) -> bytes:
    """The text dump's lines of a chunk (UTF-8) in C: per batch its ``head`` (its batch line and a
    newline; None leaves the batch and its records out), then a ``record_line`` (store.py) per
    record from offset ``start`` on, with the batch's timestamp type, each record's producer
    sequence and ``tail`` (a control record's text, with its leading space).  ``O(rows)``.  Needs the
    C accelerator (without it the caller formats record by record)."""
    assert _speedups is not None, "text_lines needs the C accelerator"
    buffers = tuple(chunk.buffers[name] for name in BUFFERS)
    return _speedups.text_lines(heads, timestamp_types, tails, buffers, chunk.rows, chunk.counts["batches"],
                                start)


def json_lines(chunk: Chunk, prefix: str, timestamp_types: list[str], tails: list[str]) -> bytes:
    """One JSON line per row (ASCII): ``prefix`` + offset, timestamp, the row's batch's timestamp type
    (JSON), key, value, headers, then its batch's ``tail`` (JSON that closes the object).

    Byte for byte what ``json.dumps`` writes for the same object (the C loop where built,
    else ``json.dumps`` per row).  ``O(rows)``.
    """
    n = chunk.rows
    raws = chunk.buffers.get(HKEY_RAW)
    if _speedups is not None and raws is None:
        buffers = tuple(chunk.buffers[name] for name in BUFFERS)
        return _speedups.json_lines(prefix.encode(), [t.encode() for t in timestamp_types],
                                    [t.encode() for t in tails], buffers, n, chunk.counts["batches"])
    import pyarrow as pa

    from segstore.columns import KAFKA_SCHEMA

    schema = pa.schema([KAFKA_SCHEMA.field(name) for name in ("offset", "key", "value", "headers")])
    table = to_arrow(chunk, schema, topic="", partition=0, segment=0)
    timestamps = chunk.buffers["timestamp"][:n].tolist()
    row_batch = chunk.buffers["row_batch"][:n].tolist()
    header_at = chunk.buffers["header_offsets"][:n].tolist()
    out = []
    for i, row in enumerate(table.to_pylist()):
        headers = json.dumps([header_json(h["key"], h["value"],
                                          None if raws is None else raws[header_at[i] + j])
                              for j, h in enumerate(row["headers"])])
        out.append(f'{prefix}{row["offset"]}, "timestamp": {timestamps[i]}, "timestamp_type": '
                   f'{timestamp_types[row_batch[i]]}, "key": {json.dumps(_b64(row["key"]))}, '
                   f'"value": {json.dumps(_b64(row["value"]))}, "headers": {headers}{tails[row_batch[i]]}')
    return "".join(out).encode("ascii")
