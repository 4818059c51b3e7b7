"""Restore RocketMQ messages from a conversion's columns: the columnar write path of a Kafka (or any
peer) store converted back into the RocketMQ store it came from.

An ``ENTRY_SCHEMA`` row whose first header is ``rmq.physical_offset`` carries every field of the
RocketMQ message it was made from (``conversion.to_entry``); ``conversion.restore_message`` reads
them back entry by entry.  Here a run of such rows is restored at once: the ``rmq.*`` headers are
read as columns (numpy/Arrow), the messages encoded into one buffer in commitlog layout (header
as :data:`MESSAGE_HEADER`, body CRC, body, topic, properties: one C pass, ``_speedups.encode_restored``),
their placement, queue offsets, consume-queue rows and IndexFile entries computed with numpy and
the read side's C (``tags_hashes``, ``index_entries``), and the batch written through the
store's batch append (:meth:`LifecycleMixin.append_placed`).

A peer's own records (a native Kafka store's) are written the same way: :func:`native_fields`
makes the properties ``conversion.from_entry`` gives them in one C pass
(``_speedups.native_properties``: ``<peer>.offset``, ``KEYS`` or the key in base64, the headers as
JSON with base64 values, ... in the store's Java HashMap order), :func:`assign` places them as the
store's append would (physical offsets, each queue's next offsets).

The rows these paths do not take go to the entry-by-entry writer, the reference, which writes
them or raises its typed error: :func:`restored_fields` returns None for a run holding any row
with a v2 message, an IPv6 host, a delay message (``SCHEDULE_TOPIC_XXXX``), a header that does
not parse or repeats, a property the format cannot carry; :func:`encode` for one whose size or
placement differs from the source's.  The two are tested equal byte for byte.

Needs the C accelerator (``arrow_writer`` is None without it).  Pure functions over columns;
not thread-safe (one conversion per destination).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import zlib
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segstore import arrays, grouping, speedups
from segstore.columns import binary_buffers
from segstore.convert.interchange import ArrowWriter, Entry, Options, Peer, add_taken
from segstore.convert.topicnames import escape, unescape
from segstore.errors import InvalidTopicError
from segstore.records import CREATE_TIME, LOG_APPEND_TIME

from .config import SCHEDULE_TOPIC
from .consumequeue import CQ_DTYPE
from .conversion import (
    _RMQ_PREFIX,
    H_BORN_HOST,
    H_BORN_TIMESTAMP,
    H_FLAG,
    H_MAGIC,
    H_PHYSICAL_OFFSET,
    H_PREPARED_OFFSET,
    H_QUEUE_ID,
    H_QUEUE_OFFSET,
    H_RECONSUME_TIMES,
    H_STORE_HOST,
    H_STORE_TIMESTAMP,
    H_SYS_FLAG,
    H_TOPIC,
    H_TRAILING_SEPARATOR,
    P_CONTROL,
    P_EMPTY_KEY,
    P_HEADERS,
    P_KEY,
    P_NULL_VALUE,
    P_OFFSET,
    P_PRODUCER,
    P_TIMESTAMP_TYPE,
    P_TXN,
    RMQ_PROPERTY_PREFIX,
    TOPICS,
    TRAILING_TEXT,
    WRITE_BYTES,
    RocketMQWriter,
    _append_stored,
    first_headers,
    from_entry,
    header_items,
    nonqueued_topic,
    start_where_restored,
)
from .fastappend import INDEX_COLUMNS, PlainBatch
from .javacompat import hashmap_order
from .message import (
    END_FILE_MIN_BLANK_LENGTH,
    HEADERS,
    MAX_PROPERTIES_BYTES,
    MAX_QUEUE_ID,
    MAX_TOPIC_BYTES_V1,
    MESSAGE_MAGIC,
    NO_QUEUE_ENTRY,
    PROPERTY_KEYS,
    SYSFLAG_HOST_MASK,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_ROLLBACK,
    Host,
    RocketMQMessage,
    decode_properties,
    encode_properties,
)

_speedups = speedups.load("segstore_rocketmq._speedups")

#: A v1 message's header with IPv4 hosts (``message.HEADER_FIELDS``), big-endian, as numpy writes it.
MESSAGE_HEADER = np.dtype([
    ("total_size", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
    ("queue_offset", ">i8"), ("physical_offset", ">i8"), ("sys_flag", ">i4"), ("born_timestamp", ">i8"),
    ("born_ip", "S4"), ("born_port", ">i4"), ("store_timestamp", ">i8"), ("store_ip", "S4"),
    ("store_port", ">i4"), ("reconsume_times", ">i4"), ("prepared_transaction_offset", ">i8"),
    ("body_length", ">i4"),
])
assert MESSAGE_HEADER.itemsize == HEADERS[0].size == 88
#: The topic length (v1: one byte) and the properties length (two bytes) before their fields.
TOPIC_LENGTH = np.dtype(">i1")
PROPERTIES_LENGTH = np.dtype(">i2")
#: Slices per message in the gather: header, body, topic field, properties length, properties.
_PIECES = 5

#: Below this many rows a run with a row this path declines goes to the entry path whole (above,
#: it is halved until the declined rows are found).
SPLIT_ROWS = 32
#: A merged item of more than this many pieces holding fewer than :data:`COMBINE_ROWS` rows each on
#: average is parsed as one batch (:meth:`RocketMQArrowWriter.prepare`): a piece's parse has a fixed
#: cost of ~0.3 ms, and a merge of 1,024 partitions gives ~1,000 pieces of ~50 rows an item.
COMBINE_PIECES = 64
COMBINE_ROWS = 512
#: A write that touched :data:`MANY_QUEUES` queues or more makes the next writes hold
#: ``ROWS_PER_QUEUE`` rows a queue if that is more than ``batch_records``, up to
#: :data:`MAX_WRITE_ROWS` rows: each queue a write touches is an append to its consume-queue file
#: (1,024 queues and 8,192-message writes: 127k of them per 1M messages, ~2.5 s).  The bytes
#: written do not depend on how the writes are cut.
MANY_QUEUES = 64
ROWS_PER_QUEUE = 32
MAX_WRITE_ROWS = 1 << 16

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def available() -> bool:
    """Whether the C functions this path needs are built."""
    return _speedups is not None


@dataclass
class Slices:
    """A binary column as ``data`` (any buffer) with each row's int64 ``starts`` and int32 ``lengths``
    in it: rows are sliced or reordered without copying a byte (:func:`encode` gathers them once)."""

    data: Any
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, arr: pa.Array) -> Slices:
        """The rows of a binary array (a null as empty); no copy."""
        offsets, data = binary_buffers(arr)
        lengths = np.diff(offsets)
        if arr.null_count:
            lengths[~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)] = 0
        return cls(data, offsets[:-1].astype(np.int64), lengths)

    def __getitem__(self, index: Any) -> Slices:
        return Slices(self.data, self.starts[index], self.lengths[index])

    @classmethod
    def concat(cls, columns: list[Slices]) -> Slices:
        """The rows of ``columns`` one after another, the bytes they span copied into one buffer."""
        datas, starts = [], []
        base = 0
        for column in columns:
            low = int(column.starts.min()) if len(column) else 0
            high = int((column.starts + column.lengths).max()) if len(column) else 0
            datas.append(np.frombuffer(column.data, np.uint8)[low:high])
            starts.append(column.starts - low + base)
            base += high - low
        return cls(np.concatenate(datas), np.concatenate(starts),
                   np.concatenate([column.lengths for column in columns]))

    def __len__(self) -> int:
        return len(self.starts)

    def to_pylist(self) -> list[bytes]:
        """The rows as bytes (tests)."""
        view = memoryview(self.data).cast("B")
        rows = zip(self.starts.tolist(), self.lengths.tolist(), strict=True)
        return [bytes(view[start:start + n]) for start, n in rows]


@dataclass
class Restored:
    """The messages of a run of restored rows, as columns (one entry per row)."""

    topics: list[str]               # distinct topics, by topic_code
    topic_code: np.ndarray          # int32
    queue_id: np.ndarray            # int64 (checked within int32)
    queue_offset: np.ndarray        # int64: the source's
    physical_offset: np.ndarray     # int64: the source's
    flag: np.ndarray
    sys_flag: np.ndarray
    reconsume_times: np.ndarray
    prepared_transaction_offset: np.ndarray
    born_timestamp: np.ndarray
    store_timestamp: np.ndarray
    born_ip: np.ndarray             # S4
    born_port: np.ndarray
    store_ip: np.ndarray
    store_port: np.ndarray
    body: Slices                    # nulls as empty
    properties: Slices              # encoded (``message.encode_properties``)


def _ints(values: pa.Array, bounds: tuple[int, int]) -> np.ndarray | None:
    """Decimal header values as int64 within ``bounds``; None if one does not parse the way ``int()``
    surely reads it (then the reference path decides)."""
    if values.null_count:
        return None
    try:
        parsed = pc.cast(values.cast(pa.string()), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if len(parsed) and (parsed.min() < bounds[0] or parsed.max() > bounds[1]):
        return None
    return parsed


def _hosts(values: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """``ip:port`` header values as (S4 IPs, ports); None for one that is not IPv4 or does not parse."""
    if values.null_count:
        return None
    encoded = pc.dictionary_encode(values)
    ips, ports = [], []
    for text in encoded.dictionary.to_pylist():
        try:
            host = Host.parse(text.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            return None
        if host.is_v6:
            return None
        ips.append(host.ip)
        ports.append(host.port)
    codes = arrays.to_numpy(encoded.indices, np.int32)
    return np.array(ips, "S4")[codes], np.array(ports, np.int64)[codes]


#: The ``rmq.*`` headers ``_speedups.restore_headers`` reads, in its order (``RH_*`` in the C).
_RESTORE_NAMES = tuple(name.encode() for name in (
    H_PHYSICAL_OFFSET, H_BORN_TIMESTAMP, H_STORE_TIMESTAMP, H_FLAG, H_SYS_FLAG, H_RECONSUME_TIMES,
    H_PREPARED_OFFSET, H_QUEUE_OFFSET, H_BORN_HOST, H_STORE_HOST, H_MAGIC, H_TRAILING_SEPARATOR, H_TOPIC,
    H_QUEUE_ID))
#: ``restore_headers``' decimal ints, in its order: the first of :data:`_RESTORE_NAMES`.
_RESTORE_INTS = 8

#: A header's rows and values (:func:`_topics` looks them up): None when no row has it, False when a
#: row has it twice.
Found = tuple[np.ndarray, pa.Array] | None | bool


def restored_fields(batch: pa.RecordBatch, peer: Peer) -> Restored | None:
    """The messages ``conversion.restore_message`` makes of ``batch``'s rows (every one made by
    ``to_entry``), in columns; None when a row needs the reference path (see the module docstring).

    The headers are read in one C pass (``_speedups.restore_headers``); :func:`restored_fields_arrow`
    is the same in Arrow compute, the reference (tested equal).  ``O(headers)``.
    """
    assert _speedups is not None        # the writer exists only with the accelerator (available())
    n = batch.num_rows
    rows, keys, values, valid = header_items(batch)
    if keys.null_count:
        return None
    key_offsets, key_data = binary_buffers(keys)
    value_offsets, value_data = binary_buffers(values)
    ints = np.zeros((_RESTORE_INTS, n), np.int64)
    ints[7] = batch.column("offset").to_numpy().astype(np.int64)       # rmq.queue_offset's default
    ips = np.zeros((2, n, 4), np.uint8)
    ports = np.zeros((2, n), np.int64)
    trailing = np.zeros(n, np.uint8)
    places = np.zeros((2, n), np.int64)
    prop_offsets = np.zeros(n + 1, np.int32)
    room = (int(key_offsets[-1]) - int(key_offsets[0]) + int(value_offsets[-1]) - int(value_offsets[0])
            + 2 * len(keys) + 1)
    prop_data = np.empty(room, np.uint8)
    status, used, topic_repeated, queue_repeated = _speedups.restore_headers(
        rows, key_offsets, key_data, value_offsets, value_data, valid, _RESTORE_NAMES,
        RMQ_PROPERTY_PREFIX.encode(), TRAILING_TEXT, ints, ips, ports, trailing, places, prop_offsets,
        prop_data)
    if status or topic_repeated or queue_repeated:
        # (a row repeating rmq.topic or rmq.queue_id: restore_message refuses it, as any rmq.* header a
        # row holds twice, whatever the row's topic, and so does restored_fields_arrow)
        return None

    def field(name: str) -> Found:
        place = places[int(name == H_QUEUE_ID)]
        having = np.flatnonzero(place >= 0)
        return (having, values.take(pa.array(place[having]))) if len(having) else None

    topics = _topics(batch, peer, field)
    if topics is None:
        return None
    properties = Slices(prop_data[:used], prop_offsets[:-1].astype(np.int64), np.diff(prop_offsets))
    body = Slices.of(batch.column("value"))
    ip = ips.reshape(2, n * 4).view("S4")
    return Restored(topics[0], topics[1], topics[2], ints[7], ints[0], ints[3], ints[4], ints[5], ints[6],
                    ints[1], ints[2], ip[0], ports[0], ip[1], ports[1], body, properties)


def _topics(batch: pa.RecordBatch, peer: Peer, field: Any) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """(topics, topic_code, queue_id) of the rows: the reserved topic's rows carry theirs in the
    ``rmq.topic`` and ``rmq.queue_id`` headers (``field(name)``: :data:`Found`), the others are
    escaped names; None when a row needs the reference path."""
    n = batch.num_rows
    topic_column = batch.column("topic")
    queue_id = batch.column("partition").to_numpy().astype(np.int64)
    topic_code = np.zeros(n, np.int32)
    by_name: dict[str, int] = {}
    entry_topics = pc.dictionary_encode(topic_column)
    entry_codes = entry_topics.indices.to_numpy(zero_copy_only=False)
    nonqueued = nonqueued_topic(peer)
    for code, name in enumerate(entry_topics.dictionary.to_pylist()):
        rows = entry_codes == code
        if name == nonqueued:
            found_topic, found_queue = field(H_TOPIC), field(H_QUEUE_ID)
            if not found_topic or not found_queue:
                return None
            need = np.flatnonzero(rows)
            if not (np.isin(need, found_topic[0]).all() and np.isin(need, found_queue[0]).all()):
                return None
            queues = _ints(found_queue[1], _INT32)
            if queues is None or found_topic[1].null_count:
                return None
            try:
                texts = [value.decode("utf-8") for value in found_topic[1].to_pylist()]
            except UnicodeDecodeError:
                return None
            at_topic = {int(r): t for r, t in zip(found_topic[0].tolist(), texts, strict=True)}
            at_queue = dict(zip(found_queue[0].tolist(), queues.tolist(), strict=True))
            for r in need.tolist():
                topic_code[r] = by_name.setdefault(at_topic[r], len(by_name))
                queue_id[r] = at_queue[r]
            continue
        try:
            topic = unescape(name, TOPICS, peer.topics)
        except InvalidTopicError:
            return None
        topic_code[rows] = by_name.setdefault(topic, len(by_name))
    topics = list(by_name)
    if any(t == SCHEDULE_TOPIC or len(t.encode("utf-8")) > MAX_TOPIC_BYTES_V1 for t in topics):
        return None
    if n and (queue_id.min() < 0 or queue_id.max() > MAX_QUEUE_ID):
        return None
    return topics, topic_code, queue_id


def restored_fields_arrow(batch: pa.RecordBatch, peer: Peer) -> Restored | None:
    """:func:`restored_fields` in Arrow compute and numpy: the reference the C pass is tested against."""
    n = batch.num_rows
    headers = batch.column("headers")
    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy().astype(np.int64)
    items = pc.list_flatten(headers)
    keys, values = items.field("key"), items.field("value")
    row_of = np.repeat(np.arange(n), counts)
    encoded = pc.dictionary_encode(keys)
    dictionary = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    code_of = {name: code for code, name in enumerate(dictionary)}

    def field(name: str) -> Any:
        """(rows having it, its values); None when absent everywhere; False when a row repeats it."""
        code = code_of.get(name)
        if code is None:
            return None
        mask = codes == code
        rows = row_of[mask]
        if len(rows) > 1 and (np.diff(rows) == 0).any():
            return False
        return rows, values.filter(pa.array(mask))

    def required(name: str, bounds: tuple[int, int]) -> np.ndarray | None:
        found = field(name)
        if not found or len(found[0]) != n:
            return None
        return _ints(found[1], bounds)

    def optional(name: str, bounds: tuple[int, int], default: np.ndarray) -> np.ndarray | None:
        found = field(name)
        if found is None:
            return default
        if found is False:
            return None
        parsed = _ints(found[1], bounds)
        if parsed is None:
            return None
        out = default.copy()
        out[found[0]] = parsed
        return out

    zeros = np.zeros(n, np.int64)
    physical = required(H_PHYSICAL_OFFSET, _INT64)
    born = required(H_BORN_TIMESTAMP, _INT64)
    stored = required(H_STORE_TIMESTAMP, _INT64)
    flag = optional(H_FLAG, _INT32, zeros)
    sys_flag = optional(H_SYS_FLAG, _INT32, zeros)
    reconsume = optional(H_RECONSUME_TIMES, _INT32, zeros)
    prepared = optional(H_PREPARED_OFFSET, _INT64, zeros)
    offsets = batch.column("offset").to_numpy().astype(np.int64)
    queue_offset = optional(H_QUEUE_OFFSET, _INT64, offsets)
    if (physical is None or born is None or stored is None or flag is None or sys_flag is None
            or reconsume is None or prepared is None or queue_offset is None):
        return None
    if field(H_MAGIC) is not None:        # v2 messages (any rmq.magic header): the reference path
        return None
    if any(field(name) is False for name in dictionary
           if name is not None and name.startswith(_RMQ_PREFIX) and not name.startswith(RMQ_PROPERTY_PREFIX)):
        return None     # an rmq.* header a row repeats, read or not (rmq.msg_id): restore_message refuses it
    hosts = []
    for name in (H_BORN_HOST, H_STORE_HOST):
        found = field(name)
        if not found or len(found[0]) != n:
            return None
        parsed = _hosts(found[1])
        if parsed is None:
            return None
        hosts.append(parsed)
    trailing = np.zeros(n, bool)
    found = field(H_TRAILING_SEPARATOR)
    if found is False:
        return None
    if found:
        said = pc.equal(found[1], pa.scalar(TRAILING_TEXT, pa.binary())).to_numpy(zero_copy_only=False)
        if not said.all():      # another value (or a null): the reference path names the record
            return None
        trailing[found[0]] = said

    topics = _topics(batch, peer, field)
    if topics is None:
        return None
    properties = _properties(n, row_of, codes, dictionary, keys, values, trailing, RMQ_PROPERTY_PREFIX)
    if properties is None:
        return None
    body = Slices.of(pc.fill_null(batch.column("value"), pa.scalar(b"", pa.binary())))
    return Restored(*topics, queue_offset, physical, flag, sys_flag, reconsume, prepared,
                    born, stored, hosts[0][0], hosts[0][1], hosts[1][0], hosts[1][1], body,
                    Slices.of(properties))


def _properties(n: int, row_of: np.ndarray, codes: np.ndarray, dictionary: list[str], keys: pa.Array,
                values: pa.Array, trailing: np.ndarray, prefix: str) -> pa.Array | None:
    """Each row's ``rmq.p.*`` headers as encoded properties (``NAME 0x01 VALUE`` joined by 0x02, a
    trailing 0x02 where the style has it); None for a repeated name, a value that is not UTF-8 or
    holds a separator, or properties over 32767 bytes."""
    is_property = np.array([name.startswith(prefix) for name in dictionary], bool)
    mask = is_property[codes] if len(dictionary) else np.zeros(len(codes), bool)
    rows = row_of[mask]
    cells = n * max(len(dictionary), 1)
    pair = rows * max(len(dictionary), 1) + codes[mask]
    # a name twice in a row: counted in a table of rows x names where that is small (a sort costs more)
    repeated = (np.bincount(pair, minlength=cells).max(initial=0) > 1 if cells <= 1 << 22
                else len(arrays.unique(pair)) != len(pair))
    if repeated:
        return None
    stripped = pa.array([name[len(prefix):] if name.startswith(prefix) else "" for name in dictionary],
                        pa.string())
    chosen = pa.array(mask)
    names = stripped.take(pa.array(codes[mask]))
    try:
        texts = pc.fill_null(values.filter(chosen), pa.scalar(b"", pa.binary())).cast(pa.string())
    except pa.ArrowInvalid:
        return None
    pairs = pc.binary_join_element_wise(names, texts, "\x01")
    per_row = np.bincount(rows, minlength=n)
    list_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(per_row, out=list_offsets[1:])
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(list_offsets), pairs), "\x02")
    ones = pc.count_substring(joined, "\x01").to_numpy()
    twos = pc.count_substring(joined, "\x02").to_numpy()
    if ((ones != per_row) | (twos != np.maximum(per_row - 1, 0))).any():
        return None
    if trailing.any():
        tail = pc.binary_join_element_wise(joined, pa.scalar(""), "\x02")
        joined = pc.if_else(pa.array(trailing & (per_row > 0)), tail, joined)
    encoded = joined.cast(pa.binary())
    if len(encoded) and pc.max(pc.binary_length(encoded)).as_py() > MAX_PROPERTIES_BYTES:
        return None
    return encoded


def native_names(peer: Peer) -> tuple[str, ...]:
    """The properties :func:`.conversion.from_entry` gives a record of ``peer``'s own, in the order it
    puts them (``NP_*`` in the C: each row has ``<peer>.offset``, at most one of ``KEYS`` and
    ``<peer>.key`` and ``<peer>.empty_key``, and at most one of ``<peer>.txn`` and ``<peer>.producer``)."""
    prefix = peer.name
    return (prefix + P_OFFSET, PROPERTY_KEYS, prefix + P_KEY, prefix + P_EMPTY_KEY, prefix + P_NULL_VALUE,
            prefix + P_TIMESTAMP_TYPE, prefix + P_HEADERS, prefix + P_TXN, prefix + P_PRODUCER,
            prefix + P_CONTROL)


@functools.lru_cache(maxsize=8)
def native_orders(names: tuple[str, ...]) -> bytes:
    """For each set of :func:`native_names` (bit ``f`` for field ``f``), the field numbers in the
    order the store writes them: Java HashMap's order of the names put in ``from_entry``'s order
    (``RocketMQStore._ordered``), 0xFF after the last.  Cached per peer."""
    fields = len(names)
    table = np.full((1 << fields, fields), 0xFF, np.uint8)
    for mask in range(1, 1 << fields):
        present = [names[f] for f in range(fields) if mask >> f & 1]
        order = hashmap_order(present)
        table[mask, :len(order)] = [names.index(name) for name in order]
    return table.tobytes()


#: The columns a row needs to go through :func:`native_fields` (a null one goes entry by entry).
_NEVER_NULL = ("topic", "partition", "offset", "timestamp", "timestampType", "isTransactional", "isControl",
               "producerId", "producerEpoch")


def native_fields(batch: pa.RecordBatch, peer: Peer, store: Any, *, validated_only: bool = False
                  ) -> Restored | None:
    """The messages ``store``'s append makes of ``batch``'s rows (records of ``peer``'s own, none made by
    ``to_entry``; :func:`.conversion.from_entry`), in columns, their queue and physical offsets 0
    (:func:`assign` places them); None when a row needs the entry path: a topic RocketMQ refuses or
    writes as v2, a store host in IPv6, a null in a column of :data:`_NEVER_NULL`, properties of
    32767 bytes or more, a header name that is not UTF-8.

    The properties are encoded in one C pass (``_speedups.native_properties``), tested equal to
    :func:`native_properties_reference`.  ``O(rows + key and header bytes)``; reads ``store``'s
    topics and host (validated topics are added to its cache of plain topics).  ``validated_only``:
    a topic not in that cache yet gives None too, and the store is only read (what
    :meth:`RocketMQArrowWriter.prepare` runs on a conversion's reading thread while the writer
    writes: a dictionary look-up, atomic under the GIL, against the writer's adding to it).
    """
    assert _speedups is not None        # the writer exists only with the accelerator (available())
    n = batch.num_rows
    host = store.store_host
    column = batch.column
    if host.is_v6 or any(column(name).null_count for name in _NEVER_NULL):
        return None
    topics: list[str] = []
    entry_topics = pc.dictionary_encode(column("topic"))
    codes = np.empty(len(entry_topics.dictionary), np.int32)
    for code, name in enumerate(entry_topics.dictionary.to_pylist()):
        try:
            topic = escape(name, peer.topics, TOPICS)
            if topic == SCHEDULE_TOPIC:
                return None
            if validated_only:
                if topic not in store.plain_topic_fields:
                    return None
            elif store.plain_topic_field(topic) is None:
                return None
        except InvalidTopicError:
            return None
        if topic not in topics:
            topics.append(topic)
        codes[code] = topics.index(topic)
    topic_code = codes[arrays.natural(entry_topics.indices)] if n else np.zeros(0, np.int32)
    queue_id = arrays.int64s(column("partition"))
    if n and (queue_id.min() < 0 or queue_id.max() > MAX_QUEUE_ID):
        return None

    key = column("key")
    key_offsets, key_data = binary_buffers(key)
    key_valid = b"" if not key.null_count else arrays.natural(key.is_valid()).view(np.uint8)
    value = column("value")
    null_value = arrays.natural(value.is_null()).view(np.uint8)
    log_append = (arrays.natural(column("timestampType")) == 1).astype(np.uint8)
    rows, header_keys, header_values, header_valid = header_items(batch)
    if header_keys.null_count:
        return None
    hk_offsets, hk_data = binary_buffers(header_keys)
    hv_offsets, hv_data = binary_buffers(header_values)
    control = arrays.natural(column("isControl")).view(np.uint8)
    producers = np.concatenate([arrays.int64s(column("producerId")), arrays.int64s(column("producerEpoch"))])
    names = native_names(peer)
    encoded_names = tuple(name.encode("utf-8") for name in names)
    log_append_text = LOG_APPEND_TIME.encode()
    # the C pass's bound of every row, summed
    room = (n * (sum(map(len, encoded_names)) + 2 * len(names) + len(log_append_text) + 75)
            + 2 * (int(key_offsets[-1]) - int(key_offsets[0]))
            + 6 * (int(hk_offsets[-1]) - int(hk_offsets[0])) + 2 * (int(hv_offsets[-1]) - int(hv_offsets[0]))
            + 16 * len(header_keys) + 1)
    prop_offsets = np.zeros(n + 1, np.int32)
    prop_data = np.empty(room, np.uint8)
    status, used = _speedups.native_properties(
        arrays.int64s(column("offset")), key_offsets, key_data, key_valid, null_value,
        log_append, rows, hk_offsets, hk_data, hv_offsets, hv_data, header_valid,
        arrays.natural(column("isTransactional")).view(np.uint8), control, producers,
        encoded_names, native_orders(names), log_append_text, store.trailing_separator, prop_offsets,
        prop_data)
    if status:
        return None
    stamps = arrays.int64s(column("timestamp"))
    zeros = np.zeros(n, np.int64)
    ip = np.full(n, host.ip, "S4")
    port = np.full(n, host.port, np.int64)
    return Restored(topics, topic_code, queue_id, zeros, zeros.copy(), zeros.copy(),
                    np.where(control.astype(bool), SYSFLAG_TRANSACTION_ROLLBACK, 0).astype(np.int64),
                    zeros.copy(), zeros.copy(), stamps, stamps, ip, port, ip, port, Slices.of(value),
                    Slices(prop_data[:used], prop_offsets[:-1].astype(np.int64), np.diff(prop_offsets)))


def native_properties_reference(batch: pa.RecordBatch, peer: Peer, store: Any) -> list[bytes]:
    """Each row's properties as the entry path stores them (``from_entry``, the store's HashMap
    order, its trailing 0x02 style): the reference of :func:`native_fields`' C pass (tests)."""
    out = []
    for entry, _ in batch_entries(batch):
        props = from_entry(entry, peer, store_host=store.store_host).properties
        ordered = {name: props[name] for name in hashmap_order(props)}
        out.append(encode_properties(ordered, store.trailing_separator))
    return out


def _sizes(msgs: Restored) -> tuple[np.ndarray, list[bytes], np.ndarray]:
    """Each message's stored size, the topics encoded, and each message's topic length."""
    topic_bytes = [t.encode("utf-8") for t in msgs.topics]
    topic_lengths = np.array([len(t) for t in topic_bytes], np.int32)[msgs.topic_code]
    sizes = (MESSAGE_HEADER.itemsize + msgs.body.lengths.astype(np.int64) + TOPIC_LENGTH.itemsize
             + topic_lengths + PROPERTIES_LENGTH.itemsize + msgs.properties.lengths)
    return sizes, topic_bytes, topic_lengths


def _queued(msgs: Restored) -> np.ndarray:
    """Whether each message gets a consume-queue entry (not a prepared or rolled-back one)."""
    return ~np.isin(msgs.sys_flag & SYSFLAG_TRANSACTION_MASK, list(NO_QUEUE_ENTRY))


def _start_where_restored(store: Any, msgs: Restored) -> None:
    """:func:`.conversion.start_where_restored` of a run of restored messages: the first one's physical
    offset, each queue's first queue offset.  ``O(rows)`` in numpy."""
    queued = np.flatnonzero(_queued(msgs))
    keys = msgs.topic_code[queued].astype(np.int64) << 32 | msgs.queue_id[queued].astype(np.int64)
    _, first = np.unique(keys, return_index=True)
    rows = queued[np.sort(first)].tolist()
    starts = [(msgs.topics[int(msgs.topic_code[i])], int(msgs.queue_id[i]), int(msgs.queue_offset[i]))
              for i in rows]
    start_where_restored(store, int(msgs.physical_offset[0]), starts)


def too_large(msgs: Restored, sizes: np.ndarray, config: Any) -> bool:
    """Whether a message of ``msgs`` (of these ``sizes``) is one the store's append refuses: a body above
    ``maxMessageSize``, a message above ``max_stored_size`` or a commitlog file (4.9.7
    ``CommitLog.MessageExtEncoder.encode``, ``doAppend``).  ``O(rows)``."""
    if not len(sizes):
        return False
    limit = min(config.max_stored_size, config.mappedFileSizeCommitLog - END_FILE_MIN_BLANK_LENGTH)
    return bool(int(msgs.body.lengths.max()) > config.maxMessageSize or int(sizes.max()) > limit)


def assign(store: Any, msgs: Restored, start: int) -> Restored | None:
    """``msgs`` with the physical offsets the store's append gives them from ``start`` (a BLANK
    before one that does not fit its file with ``END_FILE_MIN_BLANK_LENGTH`` to spare) and the
    queue offsets it takes (:func:`_queue_plan`; 0 for a message without a queue entry); None when
    one is larger than a message may be (the entry path raises then).  ``O(rows log rows)`` plus a
    step per file rolled into and a dictionary look-up per queue."""
    config = store.config
    file_size = config.mappedFileSizeCommitLog
    sizes = _sizes(msgs)[0]
    n = len(sizes)
    if too_large(msgs, sizes, config):
        return None
    physical = _physical(sizes, start, file_size)
    queue_offset = np.zeros(n, np.int64)
    rows, _, offsets = _queue_plan(store, msgs, _queued(msgs))
    queue_offset[rows] = offsets
    return dataclasses.replace(msgs, physical_offset=physical, queue_offset=queue_offset)


def _physical(sizes: np.ndarray, start: int, file_size: int) -> np.ndarray:
    """The physical offsets the store's append gives messages of ``sizes`` from ``start``: each where
    the last one ended if it fits its file with ``END_FILE_MIN_BLANK_LENGTH`` to spare, else at the
    next file's start (after a BLANK).  ``O(rows)`` plus a step per file rolled into."""
    n = len(sizes)
    physical = np.empty(n, np.int64)
    at, i = start, 0
    while i < n:
        ends = at + np.cumsum(sizes[i:])
        fits = ends + END_FILE_MIN_BLANK_LENGTH <= at - at % file_size + file_size
        k = n - i if fits.all() else int(np.argmin(fits))
        physical[i:i + k] = ends[:k] - sizes[i:i + k]
        i += k
        at = at - at % file_size + file_size        # the next message opens the next file
    return physical


@dataclass
class LaidOut:
    """Messages of the peer's own encoded before they are placed (:func:`lay_out`): the commitlog
    bytes of each with queue and physical offsets 0, which :func:`placed` writes in once the store's
    end and queues are known, and what else of :func:`encode` depends on the bytes alone."""

    fields: Restored
    sizes: np.ndarray
    #: where each message starts in ``data``, and its end (n + 1)
    at: np.ndarray
    data: np.ndarray
    queued: np.ndarray
    tags: np.ndarray
    #: the index entries' hashes, and where each message's start (n + 1); None: the store keeps no index
    hashes: np.ndarray
    entry_at: np.ndarray | None


#: Where a message's QUEUEOFFSET and PHYSICALOFFSET lie in its header.
_QUEUE_OFFSET_AT, _PHYSICAL_OFFSET_AT = 20, 28
assert MESSAGE_HEADER.fields is not None and MESSAGE_HEADER.fields["queue_offset"][1] == _QUEUE_OFFSET_AT \
    and MESSAGE_HEADER.fields["physical_offset"][1] == _PHYSICAL_OFFSET_AT
_I64_BYTES = np.arange(8, dtype=np.int64)


def lay_out(msgs: Restored, config: Any, indexed: bool) -> LaidOut | None:
    """:func:`encode`'s work on ``msgs`` (records of the peer's own, :func:`native_fields`) that does
    not depend on where they land: the layout (one C pass, body CRCs included), TAGS hashes and
    index entries (``indexed``: the store keeps an index); None when a message is too large (the
    entry path raises then).  Touches no store: a conversion's reading thread runs it while the
    writer writes the batches before.  ``O(bytes)``."""
    assert _speedups is not None
    sizes, topic_bytes, topic_lengths = _sizes(msgs)
    if too_large(msgs, sizes, config):
        return None
    n = len(sizes)
    zeros = np.zeros(n, np.int64)
    unplaced = dataclasses.replace(msgs, physical_offset=zeros, queue_offset=zeros)
    sys_flag = msgs.sys_flag & ~SYSFLAG_HOST_MASK
    data, topic_pos, props_pos = _layout(unplaced, sizes, topic_bytes, zeros, sys_flag)
    tags, hashes, counts = _tags_and_hashes(msgs, data, topic_pos, topic_lengths, props_pos, sys_flag,
                                            indexed)
    entry_at = None
    if counts is not None:
        entry_at = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=entry_at[1:])
    at = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=at[1:])
    return LaidOut(msgs, sizes, at, data, _queued(msgs), tags, hashes, entry_at)


def _tags_and_hashes(msgs: Restored, data: np.ndarray, topic_pos: np.ndarray, topic_lengths: np.ndarray,
                     props_pos: np.ndarray, sys_flag: np.ndarray, indexed: bool
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Of laid-out messages (:func:`_layout`'s ``data``, ``topic_pos``, ``props_pos``): each one's TAGS
    hash (its consume-queue tags code) and, ``indexed`` (the store keeps an index), its index entries'
    hashes in message order with how many each has (None without an index).  One C pass; what neither
    depends on is where the messages land.  ``O(bytes of the properties)``."""
    c = _speedups
    assert c is not None
    n = len(props_pos)
    prop_lengths = msgs.properties.lengths
    tags = np.empty(n, np.int64)
    if not indexed:
        c.tags_hashes(data, props_pos, prop_lengths, tags)
        return tags, np.zeros(0, np.int64), None
    counts = np.empty(n, np.int32)
    hashes = np.empty(int(prop_lengths.sum(dtype=np.int64)) // 2 + n + 1, np.int64)
    total = c.index_entries(data, topic_pos, topic_lengths, props_pos, prop_lengths,
                            sys_flag.astype(np.int32), counts, hashes, tags)
    return tags, hashes[:total], counts


def _index_rows(hashes: np.ndarray, physical: np.ndarray, store_timestamp: np.ndarray, counts: np.ndarray
                ) -> np.ndarray:
    """The index entries of messages at ``physical`` (``counts`` each, their ``hashes`` in message order)
    as the store's batch append takes them: the hashes, then each entry's commitlog offset, then its
    store timestamp."""
    return np.concatenate([hashes, np.repeat(physical, counts), np.repeat(store_timestamp, counts)])


def _put_i64(data: np.ndarray, positions: np.ndarray, values: np.ndarray) -> None:
    """Write ``values`` as big-endian int64s at byte ``positions`` of ``data`` (a uint8 array): one C
    pass (``_speedups.put_be64``, keeping the GIL; the scatter below, its reference, took 0.44 ms
    a field of 8192 rows, 0.1 s per 1M messages of the writer's ~0.45 s), else numpy."""
    put = getattr(_speedups, "put_be64", None)
    if put is not None:
        put(data, np.ascontiguousarray(positions, np.int64), np.ascontiguousarray(values, np.int64))
        return
    data[positions[:, None] + _I64_BYTES] = values.astype(">i8").view(np.uint8).reshape(-1, 8)


def placed(store: Any, laid: LaidOut, start: int, stop: int, end: int) -> tuple[PlainBatch, int]:
    """Rows ``start:stop`` of ``laid`` placed at ``end`` (the commitlog end) as :func:`assign` and
    :func:`encode` place and encode them, the same bytes: their offsets written into their laid-out
    bytes (in place: each row is placed once), their consume-queue rows and index entries.
    ``O(rows)`` in numpy, plus a dictionary look-up per queue."""
    sizes = laid.sizes[start:stop]
    file_size = store.config.mappedFileSizeCommitLog
    physical = _physical(sizes, end, file_size)
    # a BLANK wherever a message does not start where the one before ended (_placement's, without
    # checking what _physical made so)
    before = np.empty(len(sizes), np.int64)
    before[0] = end
    np.add(physical[:-1], sizes[:-1], out=before[1:])
    moved = np.flatnonzero(physical != before)
    blanks = [(int(before[i]), int(physical[i] - before[i])) for i in moved.tolist()]
    msgs = _sliced(laid.fields, start, stop)
    rows, groups, offsets = _queue_plan(store, msgs, laid.queued[start:stop])
    lo = int(laid.at[start])
    data = laid.data[lo:int(laid.at[stop])]
    heads = laid.at[start:stop] - lo
    _put_i64(data, heads + _PHYSICAL_OFFSET_AT, physical)
    _put_i64(data, heads[rows] + _QUEUE_OFFSET_AT, offsets)
    index = np.zeros(0, np.int64)
    if laid.entry_at is not None:
        entry_at = laid.entry_at[start:stop + 1]
        index = _index_rows(laid.hashes[int(entry_at[0]):int(entry_at[-1])], physical, msgs.store_timestamp,
                            np.diff(entry_at))
    cq = np.zeros(len(rows), CQ_DTYPE)
    cq["offset"], cq["size"], cq["tags_code"] = physical[rows], sizes[rows], laid.tags[start:stop][rows]
    return (PlainBatch(data=data.data, blanks=blanks, results=[], cq_rows=cq.data.cast("B"), queues=groups,
                       index_entries=index.data.cast("B"), end=int(physical[-1] + sizes[-1]), start=end),
            int(msgs.store_timestamp[-1]))


def encode(store: Any, msgs: Restored, start: int) -> tuple[PlainBatch, int] | None:
    """The messages encoded and placed at ``start`` (the commitlog end) as the store's batch append
    writes them, with their consume-queue rows and index entries, and the last store timestamp;
    None when a message would not land where the source had it (its physical or queue offset), or
    is too large: the reference path raises the error then."""
    assert _speedups is not None        # arrow_writer is None without it
    config = store.config
    file_size = config.mappedFileSizeCommitLog
    sizes, topic_bytes, topic_lengths = _sizes(msgs)
    if too_large(msgs, sizes, config):
        return None
    blanks = _placement(start, msgs.physical_offset, sizes, file_size)
    if blanks is None:
        return None
    queued = _queued(msgs)
    if (msgs.queue_offset[~queued] != 0).any():     # the store writes 0 there
        return None
    queues = _queues(store, msgs, queued)
    if queues is None:
        return None

    sys_flag = msgs.sys_flag & ~SYSFLAG_HOST_MASK           # IPv4 hosts: no host bits
    queue_offset = np.where(queued, msgs.queue_offset, 0)
    data, topic_pos, props_pos = _layout(msgs, sizes, topic_bytes, queue_offset, sys_flag)
    tags, hashes, counts = _tags_and_hashes(msgs, data, topic_pos, topic_lengths, props_pos, sys_flag,
                                            store.index is not None)
    index = (np.zeros(0, np.int64) if counts is None
             else _index_rows(hashes, msgs.physical_offset, msgs.store_timestamp, counts))
    order, groups = queues
    cq = np.zeros(len(order), CQ_DTYPE)
    cq["offset"], cq["size"], cq["tags_code"] = msgs.physical_offset[order], sizes[order], tags[order]
    assert len(index) % INDEX_COLUMNS == 0
    end = int(msgs.physical_offset[-1] + sizes[-1])
    # the arrays' own memory as bytes (a tobytes and a bytearray of each copied it twice)
    return (PlainBatch(data=data.data, blanks=blanks, results=[], cq_rows=cq.data.cast("B"),
                       queues=groups, index_entries=index.data.cast("B"), end=end, start=start),
            int(msgs.store_timestamp[-1]))


def _header_columns(msgs: Restored, sizes: np.ndarray, queue_offset: np.ndarray, sys_flag: np.ndarray
                    ) -> tuple[np.ndarray, ...]:
    """The int64 columns of the messages' headers, in ``_speedups.encode_restored``'s order."""
    return tuple(np.ascontiguousarray(column, np.int64) for column in (
        sizes, msgs.queue_id, msgs.flag, queue_offset, msgs.physical_offset, sys_flag, msgs.born_timestamp,
        msgs.born_port, msgs.store_timestamp, msgs.store_port, msgs.reconsume_times,
        msgs.prepared_transaction_offset))


def _layout(msgs: Restored, sizes: np.ndarray, topic_bytes: list[bytes], queue_offset: np.ndarray,
            sys_flag: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The messages laid out as the commitlog holds them (``sizes``: each one's stored size; ``queue_offset``
    and ``sys_flag``: the values written), and where each one's topic and properties lie in them: one
    C pass (``_speedups.encode_restored``: header, body CRC and the gather), :func:`_layout_py` without it.
    ``O(bytes)``."""
    c = _speedups
    if c is None:
        return _layout_py(msgs, sizes, topic_bytes, queue_offset, sys_flag)
    n = len(sizes)
    topic_fields, topic_at = _topic_fields(topic_bytes)
    body, props = msgs.body, msgs.properties
    data = np.empty(int(sizes.sum()), np.uint8)     # every byte written below: no zeroing pass
    topic_pos, props_pos = np.empty(n, np.int64), np.empty(n, np.int64)
    c.encode_restored(_header_columns(msgs, sizes, queue_offset, sys_flag),
                      np.ascontiguousarray(msgs.born_ip, "S4"), np.ascontiguousarray(msgs.store_ip, "S4"),
                      body.data, np.ascontiguousarray(body.starts, np.int64),
                      np.ascontiguousarray(body.lengths, np.int32), topic_fields, topic_at,
                      np.ascontiguousarray(msgs.topic_code, np.int32), props.data,
                      np.ascontiguousarray(props.starts, np.int64),
                      np.ascontiguousarray(props.lengths, np.int32),
                      data, topic_pos, props_pos)
    return data, topic_pos, props_pos


def _topic_fields(topic_bytes: list[bytes]) -> tuple[bytes, np.ndarray]:
    """The topics' fields (a length byte and the topic) one after another, and where each one starts."""
    topic_at = np.zeros(len(topic_bytes), np.int64)
    np.cumsum([1 + len(t) for t in topic_bytes[:-1]], out=topic_at[1:])
    return b"".join(bytes([len(t)]) + t for t in topic_bytes), topic_at


def _layout_py(msgs: Restored, sizes: np.ndarray, topic_bytes: list[bytes], queue_offset: np.ndarray,
               sys_flag: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_layout` in numpy and Python: the header as a structured array, the body CRCs by zlib,
    every message's slices joined in layout order; the reference the C pass is tested equal to."""
    n = len(sizes)
    body, props = msgs.body, msgs.properties
    body_data, body_starts, body_lengths = body.data, body.starts, body.lengths
    prop_data, prop_starts, prop_lengths = props.data, props.starts, props.lengths
    topic_lengths = np.array([len(t) for t in topic_bytes], np.int32)[msgs.topic_code]
    crcs = np.array([zlib.crc32(bytes(memoryview(body_data)[s:s + k])) & 0x7FFFFFFF
                     for s, k in zip(body_starts.tolist(), body_lengths.tolist(), strict=True)], np.int64)
    head = np.zeros(n, MESSAGE_HEADER)
    for name, column in (("total_size", sizes), ("magic", np.full(n, MESSAGE_MAGIC)), ("body_crc", crcs),
                         ("queue_id", msgs.queue_id), ("flag", msgs.flag), ("queue_offset", queue_offset),
                         ("physical_offset", msgs.physical_offset), ("sys_flag", sys_flag),
                         ("born_timestamp", msgs.born_timestamp), ("born_ip", msgs.born_ip),
                         ("born_port", msgs.born_port), ("store_timestamp", msgs.store_timestamp),
                         ("store_ip", msgs.store_ip), ("store_port", msgs.store_port),
                         ("reconsume_times", msgs.reconsume_times),
                         ("prepared_transaction_offset", msgs.prepared_transaction_offset),
                         ("body_length", body_lengths)):
        head[name] = column
    topic_fields, topic_at = _topic_fields(topic_bytes)
    prop_length_field = prop_lengths.astype(PROPERTIES_LENGTH)
    # each message's slices in layout order, each from its own column
    parts = (head, body_data, topic_fields, prop_length_field, prop_data)
    starts = np.stack([np.arange(n, dtype=np.int64) * MESSAGE_HEADER.itemsize, body_starts,
                       topic_at[msgs.topic_code], np.arange(n, dtype=np.int64) * PROPERTIES_LENGTH.itemsize,
                       prop_starts], axis=1).ravel()
    lengths = np.stack([np.full(n, MESSAGE_HEADER.itemsize, np.int32), body_lengths,
                        (topic_lengths + TOPIC_LENGTH.itemsize).astype(np.int32),
                        np.full(n, PROPERTIES_LENGTH.itemsize, np.int32), prop_lengths], axis=1).ravel()
    assert len(parts) == _PIECES
    views = [np.frombuffer(part, np.uint8) for part in parts]
    pieces = zip(starts.tolist(), lengths.tolist(), strict=True)
    data = np.frombuffer(b"".join(views[i % _PIECES][s:s + k].tobytes()
                                  for i, (s, k) in enumerate(pieces) if k > 0), np.uint8)
    # where each message's topic and properties lie in ``data`` (what the read side's C takes)
    at = np.zeros(n, np.int64)
    np.cumsum(sizes[:-1], out=at[1:])
    topic_pos = at + MESSAGE_HEADER.itemsize + body_lengths + TOPIC_LENGTH.itemsize
    props_pos = topic_pos + topic_lengths + PROPERTIES_LENGTH.itemsize
    return data, topic_pos, props_pos


def _placement(start: int, physical: np.ndarray, sizes: np.ndarray, file_size: int
               ) -> list[tuple[int, int]] | None:
    """The BLANKs ``commitlog.place`` puts before messages of ``sizes`` appended at ``start``, if it
    puts them at ``physical``; None otherwise.  (A message goes where the last one ended if it fits
    with ``END_FILE_MIN_BLANK_LENGTH`` to spare in that file, else at the next file's start after a
    BLANK.)"""
    before = np.concatenate(([start], physical[:-1] + sizes[:-1]))
    file_end = before - before % file_size + file_size
    fits = before + sizes + END_FILE_MIN_BLANK_LENGTH <= file_end
    expected = np.where(fits, before, file_end)
    if not np.array_equal(expected, physical):
        return None
    moved = np.flatnonzero(~fits)
    return [(int(before[i]), int(file_end[i] - before[i])) for i in moved.tolist()]


def _queue_plan(store: Any, msgs: Restored, queued: np.ndarray
                ) -> tuple[np.ndarray, list[tuple[tuple[str, int], int, int]], np.ndarray]:
    """The queued rows grouped by queue in first-appearance order (row order within each),
    ``((topic, queue), first, count)`` per queue, and the queue offsets the store's append gives
    those rows in that order (each queue's next offset on).  ``O(rows)`` for the queues of a few
    topics (:func:`segstore.grouping.pair_groups`), plus a dictionary look-up per queue."""
    rows = np.flatnonzero(queued)
    _, _, order, bounds = grouping.pair_groups(msgs.topic_code[rows], msgs.queue_id[rows])
    starts, counts = bounds[:-1], np.diff(bounds)
    groups = []
    bases = np.empty(len(starts), np.int64)
    next_offsets = store.next_offsets
    for g, row in enumerate(rows[order[starts]].tolist()):
        queue = (msgs.topics[msgs.topic_code[row]], int(msgs.queue_id[row]))
        bases[g] = next_offsets.get(queue, 0)
        groups.append((queue, int(starts[g]), int(counts[g])))
    group = np.repeat(np.arange(len(starts)), counts)
    offsets = bases[group] + np.arange(len(order)) - starts[group]
    return rows[order], groups, offsets


def _queues(store: Any, msgs: Restored, queued: np.ndarray
            ) -> tuple[np.ndarray, list[tuple[tuple[str, int], int, int]]] | None:
    """:func:`_queue_plan`'s rows and queues, if the rows' source queue offsets are the ones the
    store gives them; None otherwise."""
    rows, groups, offsets = _queue_plan(store, msgs, queued)
    if not np.array_equal(msgs.queue_offset[rows], offsets):
        return None
    return rows, groups


def _rows(msgs: Restored, index: Any) -> Restored:
    """``msgs`` with ``index`` (a slice or row numbers) applied to every column; no bytes copied."""
    return Restored(**{field.name: getattr(msgs, field.name) if field.name == "topics"   # not a column
                       else getattr(msgs, field.name)[index] for field in dataclasses.fields(Restored)})


def _concat(parts: list[Restored]) -> Restored:
    """The rows of ``parts`` one after another (their topics numbered again; the bodies and
    properties copied once into one buffer each)."""
    if len(parts) == 1:
        return parts[0]
    numbers: dict[str, int] = {}
    codes = []
    for part in parts:
        renumber = np.array([numbers.setdefault(topic, len(numbers)) for topic in part.topics], np.int32)
        codes.append(renumber[part.topic_code] if len(renumber) else part.topic_code)
    columns: dict[str, Any] = {"topics": list(numbers), "topic_code": np.concatenate(codes)}
    for field in dataclasses.fields(Restored):
        if field.name not in columns:
            values = [getattr(part, field.name) for part in parts]
            joined = Slices.concat(values) if isinstance(values[0], Slices) else np.concatenate(values)
            columns[field.name] = joined
    return Restored(**columns)


def _sliced(msgs: Restored, start: int, stop: int) -> Restored:
    """Rows ``[start, stop)`` of ``msgs``."""
    return _rows(msgs, slice(start, stop))


def _taken(msgs: Restored, order: np.ndarray) -> Restored:
    """The rows of ``msgs`` in the order ``order``."""
    return _rows(msgs, order)


def restored_messages(msgs: Restored) -> list[RocketMQMessage]:
    """The messages of ``msgs`` as objects, the bytes ``restore_message`` gives their entries (tested
    equal): what a run :func:`encode` declines is appended as (``conversion._append_stored``, which
    raises the typed error).  ``O(rows)`` Python."""
    def texts(column: Slices) -> list[bytes]:
        data = np.frombuffer(column.data, np.uint8) if len(column) else np.zeros(0, np.uint8)
        return [data[start:start + n].tobytes()
                for start, n in zip(column.starts.tolist(), column.lengths.tolist(), strict=True)]

    def hosts(ips: np.ndarray, ports: np.ndarray) -> list[Host]:
        octets = np.ascontiguousarray(ips).view(np.uint8).reshape(-1, 4)
        return [Host(row.tobytes(), port) for row, port in zip(octets, ports.tolist(), strict=True)]

    properties = texts(msgs.properties)
    return [RocketMQMessage(topic=msgs.topics[code], queue_id=queue_id, body=body,
                            # the pairs as encoded, empty ones too: the entry path writes them so
                            properties=decode_properties(props, every_pair=True), flag=flag,
                            queue_offset=queue_offset,
                            physical_offset=physical, sys_flag=sys_flag, born_timestamp=born,
                            born_host=born_host, store_timestamp=stored, store_host=store_host,
                            reconsume_times=reconsume, prepared_transaction_offset=prepared,
                            trailing_separator=props.endswith(b"\x02"))
            for (code, queue_id, body, props, flag, queue_offset, physical, sys_flag, born, born_host, stored,
                 store_host, reconsume, prepared)
            in zip(msgs.topic_code.tolist(), msgs.queue_id.tolist(), texts(msgs.body), properties,
                   msgs.flag.tolist(), msgs.queue_offset.tolist(), msgs.physical_offset.tolist(),
                   msgs.sys_flag.tolist(), msgs.born_timestamp.tolist(), hosts(msgs.born_ip, msgs.born_port),
                   msgs.store_timestamp.tolist(), hosts(msgs.store_ip, msgs.store_port),
                   msgs.reconsume_times.tolist(), msgs.prepared_transaction_offset.tolist(), strict=True)]


@dataclass
class Prepared:
    """:meth:`RocketMQArrowWriter.prepare`'s result: the rows' messages, each piece's parsed on its
    own, the order to write them in and their source bytes, all
    :meth:`~RocketMQArrowWriter.add_rows` needs (not the source's batches, which a conversion then
    lets go of while the rows wait to be written: a piece's messages keep only its bodies' buffer
    of the source, the rest is their own).  The writer joins and reorders them (``_concat``,
    ``_taken``): the reading thread is the one a conversion back from Kafka waits for."""

    parts: list[Restored]
    order: np.ndarray
    nbytes: int


@dataclass
class PreparedNative:
    """:meth:`RocketMQArrowWriter.prepare`'s result for one batch of the peer's own records: their
    messages laid out, still to be placed (:func:`placed`), and the batch's source bytes."""

    laid: LaidOut
    nbytes: int


def restored_rows(batch: pa.RecordBatch) -> np.ndarray:
    """Per row of an ``ENTRY_SCHEMA`` batch, whether its first header is ``rmq.physical_offset`` (it
    was made by ``to_entry``: ``conversion.came_from_rocketmq``).  One C pass
    (:func:`.conversion.first_headers`), else :func:`restored_rows_arrow`."""
    found = first_headers(batch, H_PHYSICAL_OFFSET)
    return restored_rows_arrow(batch) if found is None else found[0]


def restored_rows_arrow(batch: pa.RecordBatch) -> np.ndarray:
    """:func:`restored_rows` in Arrow compute: the reference of the C pass."""
    headers = batch.column("headers")
    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy().astype(np.int64)
    has = counts > 0
    out = np.zeros(batch.num_rows, bool)
    if has.any():
        firsts = (np.cumsum(counts) - counts)[has]
        keys = pc.list_flatten(headers).field("key").take(pa.array(firsts))
        out[has] = pc.equal(keys, pa.scalar(H_PHYSICAL_OFFSET, pa.string())).to_numpy(zero_copy_only=False)
    return out


def batch_entries(batch: pa.RecordBatch) -> list[tuple[Entry, int]]:
    """The rows of an ``ENTRY_SCHEMA`` batch as ``(entry, size)`` (the entry-by-entry path's input)."""
    column = batch.column
    headers = [[(h["key"], h["value"]) for h in row or ()] for row in column("headers").to_pylist()]
    kinds = [LOG_APPEND_TIME if k == 1 else CREATE_TIME for k in column("timestampType").to_pylist()]
    rows = zip(column("topic").to_pylist(), column("partition").to_pylist(), column("offset").to_pylist(),
               column("timestamp").cast(pa.int64()).to_pylist(), column("key").to_pylist(),
               column("value").to_pylist(), headers, kinds, column("isTransactional").to_pylist(),
               column("isControl").to_pylist(), column("producerId").to_pylist(),
               column("producerEpoch").to_pylist(), column("size").to_pylist(), strict=True)
    return [(Entry(topic=t, partition=p, offset=o, timestamp=ts, key=k, value=v, headers=h,
                   timestamp_type=kind, transactional=txn, control=ctl, producer_id=pid,
                   producer_epoch=epoch), size)
            for t, p, o, ts, k, v, h, kind, txn, ctl, pid, epoch, size in rows]


class RocketMQArrowWriter(ArrowWriter):
    """:class:`RocketMQWriter` for ``ENTRY_SCHEMA`` batches: runs of restored rows (converted from
    RocketMQ) go through :func:`restored_fields`, runs of the peer's own records through
    :func:`native_fields` and :func:`assign`, both through :func:`encode` into the store's batch
    append, ``options.batch_records`` messages a write; a run these paths decline goes through a
    :class:`RocketMQWriter` entry by entry (which raises the typed errors).  The same bytes as
    :class:`RocketMQWriter` (tested).

    Resuming, the first rows (as many as the destination holds messages) are skipped.
    """

    def __init__(self, dest: Any, options: Options) -> None:
        self.dest = dest
        self.peer = options.peer
        self.batch = self.base_batch = max(options.batch_records, 1)
        self.present = sum(b.num_rows for b in dest.scan_arrow(["physicalOffset"]))
        self.seen = 0
        self.entries = RocketMQWriter(dest, options, present=0)
        # (the piece, its messages (laid out: prepared) or None, start, stop, whether they are a peer's
        # own records still to be placed); piece None: the messages alone (prepared)
        self.pending: list[tuple[pa.RecordBatch | None, Restored | LaidOut | None, int, int, bool]] = []
        self.pending_rows = self.pending_bytes = 0

    def add_batch(self, batch: pa.RecordBatch, prepared: Any = None) -> tuple[int, int, int]:
        """:meth:`ArrowWriter.add_batch`; ``prepared``: :meth:`prepare`'s :class:`PreparedNative` for
        ``batch``, whose messages are taken as they are."""
        if isinstance(prepared, PreparedNative):
            n = batch.num_rows
            self.seen += n
            if self.entries.restored or self.entries.native:
                self.entries.flush()
            self._pend(batch, prepared.laid, native=True)
            return n, prepared.nbytes, 0
        held = min(max(self.present - self.seen, 0), batch.num_rows)
        self.seen += batch.num_rows
        batch = batch.slice(held)
        n = batch.num_rows
        if not n:
            return 0, 0, held
        restored = restored_rows(batch)
        bounds = [0, *(np.flatnonzero(np.diff(restored)) + 1).tolist(), n]
        for start, stop in itertools.pairwise(bounds):
            piece = batch.slice(start, stop - start)
            if restored[start]:
                if self.entries.restored or self.entries.native:
                    self.entries.flush()
                self._add_restored(piece)
            else:
                if self.entries.restored or self.entries.native:
                    self.entries.flush()
                self._add_native(piece)
        return n, int(pc.sum(batch.column("size")).as_py() or 0), held

    def prepare(self, pieces: list[pa.RecordBatch], order: np.ndarray | None
                ) -> Prepared | PreparedNative | None:
        """:meth:`ArrowWriter.prepare`: :meth:`_prepare_native` of one batch as it is (``order`` None),
        else :meth:`_prepare_rows`.  Safe beside a write."""
        if order is None:
            return self._prepare_native(pieces[0])
        return self._prepare_rows(pieces, order)

    def _prepare_rows(self, pieces: list[pa.RecordBatch], order: np.ndarray) -> Prepared | None:
        """The restored messages of the rows of ``pieces`` (each piece's columns parsed as they are;
        :meth:`add_rows` joins them and puts them in ``order``: a merge's order costs a copy of
        the bodies and properties, not of every header), which stand for the rows on their own;
        None when this path declines a row, and in a resumed run (whose first rows are skipped, by
        rows).  Every row is restored (``ArrowWriter.add_rows``: the merge checked each starts with
        ``rmq.physical_offset``).  Reads only the peer and ``present``, which no write changes: safe
        beside a write.  ``O(rows + header bytes)``."""
        if self.present or not len(order):
            return None
        if len(pieces) > COMBINE_PIECES and len(order) < COMBINE_ROWS * len(pieces):
            # many small pieces (a merge of hundreds of partitions): one copy of their columns costs
            # less than the C pass's fixed cost once per piece
            pieces = pa.Table.from_batches(pieces).combine_chunks().to_batches()
        parts = [restored_fields(piece, self.peer) for piece in pieces]
        if any(part is None for part in parts):
            return None
        nbytes = sum(int(piece.column("size").to_numpy().sum()) for piece in pieces)
        return Prepared(cast("list[Restored]", parts), order, nbytes)

    def _prepare_native(self, batch: pa.RecordBatch) -> PreparedNative | None:
        """:meth:`prepare` of one batch as it is: its messages (:func:`native_fields`) laid out
        (:func:`lay_out`) when every row is a record of the peer's own (none made by ``to_entry``) to
        a topic the destination has validated already, else None (:meth:`add_batch` then finds its
        runs and parses them, and validates the topics: the first batch of each).  Moves the parse
        and the encoding off the writer, the thread a conversion to RocketMQ waits for (which then
        only places them).  Reads only the peer, ``present`` and the destination's host, separator,
        config, validated topics and whether it keeps an index: safe beside a write.
        ``O(rows + bytes)``."""
        if self.present or not batch.num_rows or restored_rows(batch).any():
            return None
        fields = native_fields(batch, self.peer, self.dest, validated_only=True)
        laid = None if fields is None else lay_out(fields, self.dest.config, self.dest.index is not None)
        if laid is None:
            return None
        return PreparedNative(laid, int(pc.sum(batch.column("size")).as_py() or 0))

    def add_rows(self, pieces: list[pa.RecordBatch] | None, order: np.ndarray,
                 prepared: Prepared | None = None) -> tuple[int, int, int]:
        """:meth:`add_batch` of the rows of ``pieces`` in ``order``: through :meth:`prepare` (its
        result given, then ``pieces`` may be None, or made here; its parts are taken from it) when
        this path takes every row, else the rows taken first."""
        n = len(order)
        if prepared is None:
            assert pieces is not None
            if self.present > self.seen or not n:
                return add_taken(self, pieces, order)
            prepared = self._prepare_rows(pieces, order)
            if prepared is None:
                return add_taken(self, pieces, order)
        self.seen += n
        if self.entries.restored or self.entries.native:
            self.entries.flush()
        # the joined messages stand for the parts from here: let go of them (and of the source's
        # bodies they keep) before the writes, not once the item has been written
        parts, prepared.parts = prepared.parts, []
        msgs = _taken(_concat(parts), prepared.order)
        del parts
        self._pend(None, msgs)
        return n, prepared.nbytes, 0

    def _add_restored(self, piece: pa.RecordBatch) -> None:
        fields = restored_fields(piece, self.peer)
        n = piece.num_rows
        if fields is None and n > SPLIT_ROWS:     # the rows this path declines, found by halves
            self._add_restored(piece.slice(0, n // 2))
            self._add_restored(piece.slice(n // 2))
            return
        self._pend(piece, fields)

    def _add_native(self, piece: pa.RecordBatch) -> None:
        fields = native_fields(piece, self.peer, self.dest)
        n = piece.num_rows
        if fields is None and n > SPLIT_ROWS and not self.dest.store_host.is_v6:   # declined rows, by halves
            self._add_native(piece.slice(0, n // 2))
            self._add_native(piece.slice(n // 2))
            return
        self._pend(piece, fields, native=True)

    def _pend(self, piece: pa.RecordBatch | None, fields: Restored | LaidOut | None,
              native: bool = False) -> None:
        """Queue the rows of ``piece`` (None: the rows are ``fields``, restored messages, alone) for
        :meth:`flush`, writing whenever ``batch`` rows or ``WRITE_BYTES`` of bodies are pending;
        ``native``: ``fields`` still to be placed (:func:`assign`), records of the peer's own."""
        if fields is not None:
            # in the rows' order already
            lengths = (fields.fields if isinstance(fields, LaidOut) else fields).body.lengths
        else:
            assert piece is not None
            lengths = pc.fill_null(pc.binary_length(piece.column("value")), 0).to_numpy(zero_copy_only=False)
        ends = np.cumsum(lengths, dtype=np.int64)
        n, at = len(ends), 0
        while at < n:
            before = int(ends[at - 1]) if at else 0
            fits = int(np.searchsorted(ends, before + WRITE_BYTES - self.pending_bytes, side="right")) - at
            take = max(1, min(n - at, self.batch - self.pending_rows, fits))
            self.pending.append((piece, fields, at, at + take, native))
            self.pending_rows += take
            self.pending_bytes += int(ends[at + take - 1]) - before
            at += take
            if self.pending_rows >= self.batch or self.pending_bytes >= WRITE_BYTES:
                self.flush()

    def flush(self) -> None:
        """Write the rows pending (each run in columns, or entry by entry if declined)."""
        pending, self.pending, self.pending_rows, self.pending_bytes = self.pending, [], 0, 0
        for piece, fields, start, stop, native in pending:
            if isinstance(fields, LaidOut):
                if (fields.entry_at is not None) == (self.dest.index is not None):
                    self._append_placed(placed(self.dest, fields, start, stop, self.dest.commitlog.end),
                                        stop - start)
                    continue
                fields = fields.fields      # (laid out for a store with or without an index: as the others)
            done = None
            msgs = None if fields is None else _sliced(fields, start, stop)
            if msgs is not None and not native and len(msgs.queue_id):
                _start_where_restored(self.dest, msgs)
            end = self.dest.commitlog.end
            if msgs is not None and native:
                msgs = assign(self.dest, msgs, end)
            if msgs is not None:
                done = encode(self.dest, msgs, end)
            if done is None and piece is None:
                assert msgs is not None and not native
                _append_stored(self.dest, restored_messages(msgs))      # as the entry path would
            elif done is None:
                assert piece is not None
                for entry, size in batch_entries(piece.slice(start, stop - start)):
                    self.entries.add(entry, size)
                self.entries.flush()
            else:
                self._append_placed(done, stop - start)

    def _append_placed(self, done: tuple[PlainBatch, int], count: int) -> None:
        """Write ``count`` messages encoded and placed (:func:`encode`, :func:`placed`)."""
        self.dest.append_placed(done[0], done[1], count)
        # a write appends to each queue it touches: with many queues, more rows a write
        queues = len(done[0].queues)
        self.batch = self.base_batch if queues < MANY_QUEUES else \
            max(self.base_batch, min(MAX_WRITE_ROWS, ROWS_PER_QUEUE * queues))

    def flush_all(self) -> None:
        self.flush()
        self.entries.flush_all()
