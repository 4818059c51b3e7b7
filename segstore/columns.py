"""The columnar record schema: what ``Store.scan_arrow`` yields, for every format.

Every read path that touches every message (scan, verify, recover, dump, convert,
Spark) works on ``pyarrow.RecordBatch`` es of this schema, produced by each
format's columnar decoder (C over the mapped log, a pure-Python reference kept
equal by tests).  A batch holds the rows of one contiguous region of one log, in
log order.

The common columns are those of Spark's Kafka connector, in its order and with
its meanings, so a batch is a Spark batch after a cast of the timestamps::

    key            binary          RocketMQ: the first KEYS token (UTF-8); null when none
    value          binary          RocketMQ: the body
    topic          string
    partition      int32           RocketMQ: the queue id
    offset         int64           RocketMQ: the queue offset
    timestamp      timestamp[ms]   RocketMQ: the born timestamp (as ``to_common``)
    timestampType  int32           0 CreateTime, 1 LogAppendTime (Kafka's TimestampType.id)
    headers        list<struct<key: string, value: binary>>   RocketMQ: the properties

then where the record lies in the log, for every format::

    position       int64           RocketMQ: the physical offset; Kafka: the batch's file position
    size           int32           RocketMQ: TOTALSIZE; Kafka: the batch's size in bytes

then the format's own columns (:data:`ROCKETMQ_FIELDS`, :data:`KAFKA_FIELDS`).
Timestamps are UTC milliseconds, as the brokers store them.

A ``columns=`` projection names the columns wanted; decoders build only those
(the variable-width ones are what costs).  The module is pure (no files) and
thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ConfigError, cut

if TYPE_CHECKING:   # pyarrow is imported where a type or column is made: `segstore info` needs none
    import pyarrow as pa

    TIMESTAMP: pa.DataType
    HEADER: pa.DataType
    HEADERS: pa.DataType
    #: Spark's Kafka connector columns, in its order.
    CONNECTOR_FIELDS: tuple[pa.Field, ...]
    #: Where each row lies in its log.
    POSITION_FIELDS: tuple[pa.Field, ...]
    #: A RocketMQ message's own fields (names as the Spark source has them).
    ROCKETMQ_FIELDS: tuple[pa.Field, ...]
    #: A Kafka record's batch-level fields, repeated on each of the batch's records.
    KAFKA_FIELDS: tuple[pa.Field, ...]
    COMMON_SCHEMA: pa.Schema
    ROCKETMQ_SCHEMA: pa.Schema
    KAFKA_SCHEMA: pa.Schema

_TYPES = ("TIMESTAMP", "HEADER", "HEADERS", "CONNECTOR_FIELDS", "POSITION_FIELDS", "ROCKETMQ_FIELDS",
          "KAFKA_FIELDS", "COMMON_SCHEMA", "ROCKETMQ_SCHEMA", "KAFKA_SCHEMA")
_types_lock = threading.Lock()


def __getattr__(name: str) -> Any:
    """The Arrow types and schemas above, made on first use (importing pyarrow costs 0.1-0.2 s, which a
    command that builds no column, such as ``segstore info``, does not pay).  Thread-safe: made once."""
    if name not in _TYPES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _types_lock:
        if name not in globals():
            globals().update(_make_types())
    return globals()[name]


def _make_types() -> dict[str, Any]:
    import pyarrow as pa

    timestamp = pa.timestamp("ms", tz="UTC")
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    headers = pa.list_(header)
    connector = (
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", timestamp, nullable=False),
        pa.field("timestampType", pa.int32(), nullable=False),
        pa.field("headers", headers),
    )
    position = (
        pa.field("position", pa.int64(), nullable=False),
        pa.field("size", pa.int32(), nullable=False),
    )
    rocketmq = (
        pa.field("tags", pa.string()),
        pa.field("keys", pa.list_(pa.string())),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
        pa.field("bornTimestamp", timestamp, nullable=False),
        pa.field("storeTimestamp", timestamp, nullable=False),
        pa.field("bornHost", pa.string(), nullable=False),
        pa.field("storeHost", pa.string(), nullable=False),
        pa.field("msgId", pa.string(), nullable=False),
        pa.field("physicalOffset", pa.int64(), nullable=False),
        pa.field("sysFlag", pa.int32(), nullable=False),
        pa.field("flag", pa.int32(), nullable=False),
        pa.field("reconsumeTimes", pa.int32(), nullable=False),
        pa.field("bodyCrc", pa.int32(), nullable=False),
        pa.field("preparedTransactionOffset", pa.int64(), nullable=False),
        pa.field("magic", pa.int32(), nullable=False),
        # the stored PROPERTIES bytes where they are not UTF-8 (``properties`` and ``headers`` hold the
        # broker's text of them, a U+FFFD for each malformed sequence), else null: what an append of
        # the row writes back (``dump --json``'s ``properties_base64``)
        pa.field("propertiesBytes", pa.binary()),
    )
    kafka = (
        pa.field("baseOffset", pa.int64(), nullable=False),
        pa.field("leaderEpoch", pa.int32(), nullable=False),
        pa.field("magic", pa.int8(), nullable=False),
        pa.field("compression", pa.int8(), nullable=False),
        pa.field("isTransactional", pa.bool_(), nullable=False),
        pa.field("isControl", pa.bool_(), nullable=False),
        pa.field("producerId", pa.int64(), nullable=False),
        pa.field("producerEpoch", pa.int16(), nullable=False),
        pa.field("sequence", pa.int32(), nullable=False),
        pa.field("segment", pa.int64(), nullable=False),
        # each header key's stored bytes where a record has one that is not UTF-8 (``headers`` holds
        # Java's text of it, ``RecordHeader.key()``: a U+FFFD for each malformed sequence; null items
        # for its UTF-8 keys), else null: what an append of the row writes back (``dump --json``'s
        # ``keyBase64``)
        pa.field("headerKeysBytes", pa.list_(pa.binary())),
    )
    made = {"TIMESTAMP": timestamp, "HEADER": header, "HEADERS": headers, "CONNECTOR_FIELDS": connector,
            "POSITION_FIELDS": position, "ROCKETMQ_FIELDS": rocketmq, "KAFKA_FIELDS": kafka,
            "COMMON_SCHEMA": pa.schema(connector + position),
            "ROCKETMQ_SCHEMA": pa.schema(connector + position + rocketmq),
            "KAFKA_SCHEMA": pa.schema(connector + position + kafka)}
    assert len(made["COMMON_SCHEMA"]) == 10
    assert len(made["ROCKETMQ_SCHEMA"]) == 26 and len(made["KAFKA_SCHEMA"]) == 21
    assert set(made) == set(_TYPES)
    return made


def project(schema: pa.Schema, columns: Iterable[str] | None) -> pa.Schema:
    """``schema`` narrowed to ``columns`` (in the order given, each once; one name alone is that
    column); all of it for None.

    :raises ConfigError: a name that is not a column of ``schema`` (or no str); ``columns`` neither a
        name nor an iterable of names.
    """
    if columns is None:
        return schema
    if not isinstance(columns, str) and not isinstance(columns, Iterable):
        raise ConfigError(f"expected columns as a column name or names, found {type(columns).__name__} "
                          f"{cut(columns)}")
    # a str is one name, not its characters; a name given twice is one column (an Arrow schema may
    # hold two fields of one name, which batch.column(name) then refuses)
    names = [columns] if isinstance(columns, str) else list(columns)
    unknown = [cut(name) for name in names if not isinstance(name, str)]
    if unknown:
        raise ConfigError(f"expected columns among {', '.join(schema.names)}, found {', '.join(unknown)}")
    wanted: Sequence[str] = list(dict.fromkeys(names))
    # a name not in the schema by plain lookup (Schema.get_field_index encodes the name: one holding a lone
    # surrogate, a command line's non-UTF-8 bytes, was its UnicodeEncodeError)
    unknown = [name for name in wanted if name not in schema.names]
    if unknown:
        raise ConfigError(f"expected columns among {', '.join(schema.names)}, found {', '.join(unknown)}")
    import pyarrow as pa

    return pa.schema([schema.field(name) for name in wanted])


# -- buffers of the columnar decoders -------------------------------------------------------

def binary_buffers(arr: pa.Array) -> tuple[np.ndarray, Any]:
    """A binary or string array's ``len(arr) + 1`` int32 offsets into its data buffer, and that
    buffer (``b""`` when it has none): the array's own memory, no copy (its slice offset applied).
    An array with no offsets buffer (one built from buffers with none) gives zeros."""
    buffers = arr.buffers()
    data = buffers[2] if buffers[2] is not None else b""
    if buffers[1] is None:
        return np.zeros(len(arr) + 1, np.int32), data
    return np.frombuffer(buffers[1], np.int32, len(arr) + 1, arr.offset * 4), data


def equal_rows(arr: pa.Array, value: bytes) -> np.ndarray:
    """Which rows of a binary or string array hold exactly ``value`` (False where null): what
    ``pyarrow.compute.equal`` answers, nulls as False, without loading ``pyarrow.compute`` (tens of ms).
    ``O(rows + bytes of the rows as long as value)``, in numpy, at most 4 MiB of bytes compared at once."""
    offsets, data = binary_buffers(arr)
    n = len(arr)
    keep = np.diff(offsets) == len(value)
    validity = arr.buffers()[0]
    if validity is not None:
        keep &= np.unpackbits(np.frombuffer(validity, np.uint8), count=arr.offset + n,
                              bitorder="little")[arr.offset:].astype(np.bool_)
    if value:
        rows = np.flatnonzero(keep)
        stored, wanted = np.frombuffer(data, np.uint8), np.frombuffer(value, np.uint8)
        span = np.arange(len(value))
        step = max(1, (4 << 20) // len(value))
        for at in range(0, len(rows), step):
            part = rows[at:at + step]
            keep[part] = (stored[offsets[part].astype(np.int64)[:, None] + span] == wanted).all(axis=1)
    return keep


def _batch_pool() -> pa.MemoryPool:
    """Arrow's jemalloc pool where pyarrow has it, else its default pool (:func:`pooled`)."""
    import pyarrow as pa

    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:     # a pyarrow built without jemalloc (macOS, Windows)
        return pa.default_memory_pool()


_pool: pa.MemoryPool | None = None     # the first block of POOL_MIN bytes or more sets it (pyarrow loads)
#: Where pooled() and pooled_together() take their big blocks first (set_arena); None: the pool only.
_arena: Any = None
#: Blocks smaller than this come from numpy (the C heap), bigger ones from Arrow's pool.  What the pool
#: is for, memory a batch frees kept for the next one's big blocks, small blocks get from the heap too
#: (glibc serves blocks below its mapping threshold from heaps it keeps: 128 KiB at first, then the
#: biggest block freed; the ``segstore`` command sets 32 MiB, ``segstore.allocator``); and a command
#: that only ever asks for small blocks, ``verify`` or ``dump`` of a small store, loads no pyarrow
#: (18-19 ms of CPU, ~133M instructions with the pool's first block).
POOL_MIN = 256 << 10


def set_arena(arena: Any) -> None:
    """From now on, in this process, :func:`pooled` and :func:`pooled_together` take each block of at
    least ``arena.min_block`` bytes from ``arena`` (``arena.take(nbytes)``: a writable buffer whose
    memory goes back when it and every view of it are gone, or None when the arena has no room; the
    pool serves then).  For a Spark worker child, whose arena is shared memory its JVM maps
    (``segstore.spark.arena``): the columns a decoder fills are there already.  None: the pool
    only.  The arena is used from one thread (a worker child reads on one)."""
    global _arena
    _arena = arena


def _allocate(nbytes: int) -> Any:
    """A writable, :data:`ALIGN`-aligned buffer of ``nbytes``: from the arena where one is set, has room
    and the block is big enough for it (:func:`set_arena`); else, below :data:`POOL_MIN` bytes, from
    numpy; else from the pool."""
    global _pool
    arena = _arena
    if arena is not None and nbytes >= arena.min_block:
        block = arena.take(nbytes)
        if block is not None:
            return block
    if nbytes < POOL_MIN:
        raw = np.empty(nbytes + ALIGN, np.uint8)
        skip = -raw.__array_interface__["data"][0] % ALIGN
        return raw[skip:skip + nbytes]
    import pyarrow as pa

    if _pool is None:
        _pool = _batch_pool()   # one pool of the process: a second thread here gets the same one
    return pa.allocate_buffer(nbytes, memory_pool=_pool)


def pooled(shape: int | tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """An uninitialized array, in an Arrow memory pool where it takes :data:`POOL_MIN` bytes or more
    (``np.empty`` in the pool): the buffers the formats' columnar decoders fill, batch after batch.
    Thread-safe.

    Every batch's columns are new memory; taken with ``np.empty`` from glibc, a batch's
    megabytes are mapped afresh and zeroed by the kernel page by page (a page fault each:
    that cost as much as copying the messages into them), as glibc gives big freed blocks back
    to the system.  An Arrow pool keeps freed memory for the next batch.  jemalloc rather than
    Arrow's default mimalloc: mimalloc's first megabytes of a process cost 0.06-0.1 s to get
    (a one-shot ``verify`` or ``dump`` pays them on every run; jemalloc 0.01 s), and a 1M-message
    ``scan_arrow`` peaked at 62 MB of anonymous memory with mimalloc, 26 MB with jemalloc.
    Big blocks come from the arena instead where one is set (:func:`set_arena`); small ones from
    numpy (:data:`POOL_MIN`).
    """
    dtype = np.dtype(dtype)
    if isinstance(shape, int):      # the usual case (per column per batch): no np.prod, no reshape
        return np.frombuffer(_allocate(shape * dtype.itemsize), dtype, shape)
    count = int(np.prod(shape))
    return np.frombuffer(_allocate(count * dtype.itemsize), dtype, count).reshape(shape)


#: Alignment of each array :func:`pooled_together` carves (Arrow's buffer alignment).
ALIGN = 64
#: Most bytes :func:`pooled_together` carves from one allocation: a bigger block is one jemalloc
#: gives back to the system when it is freed (Arrow's pool purges big extents at once), so the next
#: chunk's block is fresh pages, each a page fault (a 4M-record Kafka scan of 14 MB blocks faulted
#: 150k pages a run, 6k with blocks of at most this).
BLOCK = 4 << 20


def pooled_together(shapes: Sequence[tuple[int, type | np.dtype]]) -> list[np.ndarray]:
    """Uninitialized 1-d arrays of ``(length, dtype)`` each, carved (``ALIGN``-aligned) from as few
    buffers of where :func:`pooled` takes its memory from as hold them in :data:`BLOCK` bytes each (an array
    bigger than that in one of its own): the columns of one decoded chunk.  Thread-safe.

    Few allocations rather than one per column: ``pa.allocate_buffer`` gives up the GIL, and a
    thread that gives it up while another decodes waits for it back behind that thread's Python (a
    4M-record Kafka ``verify`` on two threads spent 0.16 s of 0.19 s so in 17 allocations a chunk).
    The arrays keep their whole buffer alive while any of them lives (a chunk's columns live
    together).  The layout of a list of shapes is worked out once (:data:`_layouts`).
    """
    key = (BLOCK, tuple(shapes))
    layout = _layouts.get(key)
    if layout is None:
        layout = _layout(shapes)
        if len(_layouts) >= 64:
            _layouts.clear()
        _layouts[key] = layout
    dtypes, places, blocks = layout
    buffers = [_allocate(max(total, 1)) for total in blocks]
    return [np.frombuffer(buffers[block], dtype, length, start)
            for (length, _), dtype, (block, start) in zip(shapes, dtypes, places, strict=True)]


#: :func:`pooled_together`'s layouts by their shapes: a process's are few (its decoders' chunk
#: capacities), and working one out took ~900 bytecodes of Python a chunk, twice for a Kafka chunk.
#: Cleared when it holds 64 (a reader of many small ranges asks for many).  Thread-safe: a dict's
#: get and set are atomic, and two threads working out one layout work out the same.
_layouts: dict[tuple[int, tuple[Any, ...]], tuple[list[np.dtype], list[tuple[int, int]], list[int]]] = {}


def _layout(shapes: Sequence[tuple[int, type | np.dtype]]
            ) -> tuple[list[np.dtype], list[tuple[int, int]], list[int]]:
    """The arrays' dtypes, each array's (block number, start in it), and each block's bytes: consecutive
    arrays (each ``ALIGN``-aligned) packed into blocks of at most :data:`BLOCK` bytes."""
    dtypes = [np.dtype(dtype) for _, dtype in shapes]
    sizes = [-(-length * dtype.itemsize // ALIGN) * ALIGN
             for (length, _), dtype in zip(shapes, dtypes, strict=True)]
    places, blocks = [], [0]
    for size in sizes:
        if blocks[-1] and blocks[-1] + size > BLOCK:
            blocks.append(0)
        places.append((len(blocks) - 1, blocks[-1]))
        blocks[-1] += size
    return dtypes, places, blocks
