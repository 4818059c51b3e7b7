"""A RocketMQ store's columnar append: rows of :data:`segstore.columns.ROCKETMQ_SCHEMA` (what
``scan_arrow`` yields) appended as stored messages, a batch at a time.

A row is the message ``append_stored`` would write: ``topic``, ``partition`` (the queue id),
``value`` (the body; null as empty), ``properties`` (every stored property, in its stored order),
``bornTimestamp``, ``storeTimestamp``, ``bornHost``, ``storeHost``, ``sysFlag``, ``flag``,
``reconsumeTimes``, ``preparedTransactionOffset`` and ``magic``; where a row has
``propertiesBytes`` (a scan gives it for properties stored as bytes that are not UTF-8, which
``properties`` holds as the broker's text of them), those bytes are written instead, checked to
read as ``properties`` (those bytes' own trailing 0x02 or none).  The other columns (``key``,
``tags``, ``keys``, ``headers``, ``msgId``, ``bodyCrc``, ``position``, ``size``, ``offset``, ...)
are derived from those and not read; the placement (physical and queue offsets) is the store's, as
for any append.  The properties end with 0x02 in the store's style
(``RocketMQStore.trailing_separator``).  So a scan of one store appended to an empty store of the
same geometry and version scans equal to it, once that store starts where the source does (a source
retention trimmed: ``RocketMQStore.start_commitlog_at`` and ``start_queue_at`` first).

The common case (v1 messages with IPv4 hosts, topics other than ``SCHEDULE_TOPIC_XXXX``,
properties without the separators and within 32767 bytes; a row's ``propertiesBytes``, checked to read
as its ``properties``, are its encoded properties) is encoded in
columns with the conversion's columnar writer (:mod:`.arrowwrite`: :func:`~.arrowwrite.assign`
places the rows, :func:`~.arrowwrite.encode` gathers their bytes, consume-queue rows and IndexFile
entries in C) and written with ``append_placed``; a batch holding any other row goes through
:func:`reference_messages` and ``append_stored`` whole, the reference, which also raises the
typed errors (tested equal byte for byte).

Thread-safety: as the store's appends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segstore import arrays
from segstore.columns import binary_buffers
from segstore.errors import InvalidMessageError, cut

from . import arrowwrite
from .config import SCHEDULE_TOPIC
from .message import (
    MAX_PROPERTIES_BYTES,
    MAX_QUEUE_ID,
    MAX_TOPIC_BYTES_V1,
    MESSAGE_MAGIC,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    Host,
    RocketMQMessage,
    empty_property,
    java_properties_of,
)

#: The columns a row's message is made of (see the module docstring).
COLUMNS = ("topic", "partition", "value", "properties", "bornTimestamp", "storeTimestamp", "bornHost",
           "storeHost", "sysFlag", "flag", "reconsumeTimes", "preparedTransactionOffset", "magic")
#: The integer columns of a row's message (a null in one is refused).
_INT_COLUMNS = ("partition", "sysFlag", "flag", "reconsumeTimes", "preparedTransactionOffset", "magic")
#: The range of the message's 32-bit fields (sysFlag, flag, reconsumeTimes: Java ints).
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: The optional column of a row's stored properties bytes (``segstore.columns``: null where UTF-8).
STORED_PROPERTIES = "propertiesBytes"
#: Rows encoded and written at a time (memory stays bounded whatever the batch size).
CHUNK_ROWS = 1 << 16


def batches(data: Any) -> list[pa.RecordBatch]:
    """``data`` (a RecordBatch or Table) as record batches of at most :data:`CHUNK_ROWS` rows.

    :raises InvalidMessageError: not Arrow data, or a column of :data:`COLUMNS` missing.
    """
    if isinstance(data, pa.Table):
        out = data.to_batches(max_chunksize=CHUNK_ROWS)
    elif isinstance(data, pa.RecordBatch):
        out = [data.slice(at, CHUNK_ROWS) for at in range(0, data.num_rows, CHUNK_ROWS)]
    else:
        raise InvalidMessageError(f"expected a pyarrow RecordBatch or Table of the segstore.columns "
                                  f"schema, found {type(data).__name__}")
    schema = data.schema
    missing = [name for name in COLUMNS if schema.get_field_index(name) < 0]
    if missing:
        raise InvalidMessageError(f"expected the columns {', '.join(COLUMNS)} (segstore.columns."
                                  f"ROCKETMQ_SCHEMA), found none named {', '.join(missing)}")
    kind = schema.field("properties").type
    if not (pa.types.is_map(kind) or pa.types.is_null(kind)):
        raise InvalidMessageError(f"expected a map column properties (segstore.columns.ROCKETMQ_SCHEMA), "
                                  f"found {kind}")
    out = [b for b in out if b.num_rows]
    if pa.types.is_map(kind):
        start = 0
        for b in out:
            _check_properties(b, start)
            start += b.num_rows
    return out


def _shown(raw: bytes) -> str:
    """A property name or value of a row, as an error shows it (text, cut)."""
    return cut(raw.decode("utf-8", "replace"))


def _check_properties(batch: pa.RecordBatch, start: int) -> None:
    """Refuse a row (``start`` the batch's first row in the input) whose properties map holds a name
    twice (:func:`_check_names_once`), then one holding an empty name or value
    (:func:`_check_not_empty`), as an append of the message refuses either.  A scan never yields one.
    ``O(pairs)`` in Arrow.

    :raises InvalidMessageError: naming the row and the property.
    """
    column = _map_column(batch)
    offsets = arrays.int64s(column.offsets)
    lo, hi = int(offsets[0]), int(offsets[-1])
    if hi == lo:
        return
    keys = column.keys.slice(lo, hi - lo).cast(pa.binary())        # the map's own items: not sliced
    rows = np.repeat(np.arange(batch.num_rows), np.diff(offsets))   # each pair's row
    _check_names_once(keys, rows, start)
    _check_not_empty(keys, column.items.slice(lo, hi - lo).cast(pa.binary()), rows, start)


def _check_names_once(keys: pa.Array, rows: np.ndarray, start: int) -> None:
    """Refuse a row whose properties (``keys``, each pair's row in ``rows``) name a property twice: the
    broker's properties are a ``HashMap`` (4.9.7 ``Message.putProperty``), one value a name, and the
    two paths of this append disagreed (the columnar one wrote both pairs, the reference, a ``dict``,
    the last).

    :raises InvalidMessageError: naming the row and the property.
    """
    if len(keys) < 2:
        return
    # pairs sorted by row then name: a name twice in a row is two neighbours (pa.table, Table.group_by
    # and the numpy bridges import pandas, 0.25 s of a first small append: segstore.arrays' do not)
    pairs = pa.RecordBatch.from_arrays([arrays.from_numpy(rows), keys], names=["row", "name"])
    order = pc.sort_indices(pairs, sort_keys=[("row", "ascending"), ("name", "ascending")])
    rows, keys = rows[arrays.int64s(order)], keys.take(order)
    same = (arrays.to_numpy(pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1)), bool)
            & (rows[1:] == rows[:-1]))
    twice = np.flatnonzero(same)
    if len(twice):      # the first such row (the rows ascend)
        raise InvalidMessageError(f"expected each property name once (RocketMQ properties are a map), found "
                                  f"{_shown(keys[int(twice[0])].as_py())} twice in row "
                                  f"{start + int(rows[twice[0]])}")


def _ints(column: pa.Array, name: str) -> np.ndarray:
    """An integer column's values as int64 (a copy), whatever its width; through the buffers
    (``Array.to_numpy`` imports pandas).

    :raises InvalidMessageError: a column that does not convert to integers."""
    if not pa.types.is_integer(column.type):
        try:
            column = column.cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise InvalidMessageError(f"expected integers in column {name}, found {column.type}") from err
    return arrays.int64s(column)


def _millis(column: pa.Array, name: str) -> np.ndarray:
    """A time column's values as int64 ms.

    :raises InvalidMessageError: a column that is not a time or a number."""
    try:
        return arrays.int64s(column.cast(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise InvalidMessageError(f"expected times or integers in column {name}, "
                                  f"found {column.type}") from err


def _check_not_empty(keys: pa.Array, values: pa.Array, rows: np.ndarray, start: int) -> None:
    """Refuse a row whose properties (``keys`` and ``values``, each pair's row in ``rows``) hold an empty
    name or value, as an append of the message refuses it (:func:`.message.empty_property`: 4.9.7
    ``MessageDecoder.string2messageProperties`` drops the pair, so the row would scan back without it).

    :raises InvalidMessageError: naming the row and the property.
    """
    # lengths from the offsets (pc.equal(..., 0) makes a scalar of the 0, which imports pandas); a null
    # value is not an empty one
    empty = (np.diff(binary_buffers(keys)[0]) == 0) | (
        (np.diff(binary_buffers(values)[0]) == 0) & arrays.to_numpy(pc.is_valid(values), bool))
    found = np.flatnonzero(empty)
    if len(found):
        pair = int(found[0])
        row = int(rows[pair])
        name, value = (keys[pair].as_py() or b"").decode("utf-8", "replace"), \
            (values[pair].as_py() or b"").decode("utf-8", "replace")
        raise empty_property(name, value, f" in row {start + row}")


def _map_column(batch: pa.RecordBatch) -> pa.MapArray:
    column = batch.column("properties")
    if column.null_count:
        column = pc.fill_null(column, arrays.empty_list(column.type))
    return column


def _properties(batch: pa.RecordBatch, trailing: bool) -> arrowwrite.Slices | None:
    """Each row's properties encoded (``message.encode_properties``); None when a name or value holds a
    separator or is null, or a row's are longer than the format holds (the reference raises then).
    One C pass (``_speedups.join_properties``), tested equal to :func:`_properties_reference`."""
    assert arrowwrite._speedups is not None     # the columnar path exists only with the accelerator
    column = _map_column(batch)
    offsets = arrays.to_numpy(column.offsets, np.int32)
    lo, hi = int(offsets[0]), int(offsets[-1])
    if column.items.slice(lo, hi - lo).null_count:      # the map's own items: not sliced
        return None
    name_offsets, names = binary_buffers(column.keys)
    value_offsets, values = binary_buffers(column.items)
    joined = arrowwrite._speedups.join_properties(offsets, name_offsets, names, value_offsets, values,
                                                  trailing, MAX_PROPERTIES_BYTES)
    if joined is None:
        return None
    data, offsets = joined
    starts = np.frombuffer(offsets, np.int32)
    return arrowwrite.Slices(data, starts[:-1].astype(np.int64), np.diff(starts))


def _properties_reference(batch: pa.RecordBatch, trailing: bool) -> arrowwrite.Slices | None:
    """:func:`_properties` in Arrow's compute functions: the reference of its C pass."""
    column = _map_column(batch)
    offsets = arrays.int64s(column.offsets)
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys = column.keys.slice(lo, hi - lo).cast(pa.binary())        # the map's own items: not sliced
    values = column.items.slice(lo, hi - lo).cast(pa.binary())
    if keys.null_count or values.null_count:
        return None
    for part in (keys, values):
        for separator in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR):
            if pc.any(pc.match_substring(part, separator)).as_py():
                return None
    pairs = pc.binary_join_element_wise(keys, values, NAME_VALUE_SEPARATOR.encode())
    lists = pa.ListArray.from_arrays(pa.array(offsets - lo, pa.int32()), pairs)
    joined = pc.binary_join(lists, PROPERTY_SEPARATOR.encode())
    if trailing:
        ends = pc.if_else(pc.greater(pc.list_value_length(lists), 0), pa.scalar(PROPERTY_SEPARATOR.encode()),
                          pa.scalar(b""))
        joined = pc.binary_join_element_wise(joined, ends, b"")
    slices = arrowwrite.Slices.of(joined)
    if len(slices) and int(slices.lengths.max()) > MAX_PROPERTIES_BYTES:
        return None
    return slices


def columns(batch: pa.RecordBatch, trailing: bool) -> arrowwrite.Restored | None:
    """The rows as :class:`~.arrowwrite.Restored` columns (their offsets the source's, placed again by
    :func:`~.arrowwrite.assign`); None when a row is not the common case (see the module docstring)."""
    column = batch.column
    # a null's slot holds any value: the reference refuses a null field (and an int32 field's value
    # out of range, which the C encoder would cut)
    if any(column(name).null_count for name in _INT_COLUMNS):
        return None
    magic = _ints(column("magic"), "magic")
    if (magic != MESSAGE_MAGIC).any():
        return None
    topics_encoded = pc.dictionary_encode(column("topic"))
    topics = topics_encoded.dictionary.to_pylist()
    if any(t is None or t == SCHEDULE_TOPIC or len(t.encode("utf-8")) > MAX_TOPIC_BYTES_V1 for t in topics):
        return None
    hosts = [arrowwrite._hosts(column(name).cast(pa.binary())) for name in ("bornHost", "storeHost")]
    born, stored = hosts
    if born is None or stored is None:
        return None
    properties = _properties(batch, trailing)
    stored_bytes = _stored_properties(batch)
    if properties is not None and stored_bytes is not None:
        properties = _with_stored(batch, stored_bytes, properties)
    if properties is None:
        return None
    queue_id = _ints(column("partition"), "partition")
    if len(queue_id) and (queue_id.min() < 0 or queue_id.max() > MAX_QUEUE_ID):
        return None
    ints = {name: _ints(column(name), name)
            for name in ("sysFlag", "flag", "reconsumeTimes", "preparedTransactionOffset")}
    if any(len(ints[name]) and (ints[name].min() < INT32_MIN or ints[name].max() > INT32_MAX)
           for name in ("sysFlag", "flag", "reconsumeTimes")):
        return None
    n = batch.num_rows
    body = column("value")
    if body.null_count:
        body = pc.fill_null(body, arrays.binary_scalar(b""))
    return arrowwrite.Restored(
        topics, _ints(topics_encoded.indices, "topic").astype(np.int32), queue_id,
        np.zeros(n, np.int64), np.zeros(n, np.int64), ints["flag"], ints["sysFlag"], ints["reconsumeTimes"],
        ints["preparedTransactionOffset"], _millis(column("bornTimestamp"), "bornTimestamp"),
        _millis(column("storeTimestamp"), "storeTimestamp"),
        born[0], born[1], stored[0], stored[1], arrowwrite.Slices.of(body), properties)


def _with_stored(batch: pa.RecordBatch, stored: pa.Array, joined: arrowwrite.Slices
                 ) -> arrowwrite.Slices | None:
    """``joined`` (each row's properties encoded from their text) with each row that has stored bytes
    (``stored``, the :data:`STORED_PROPERTIES` column) taking those bytes as they are, as
    :func:`reference_messages` writes them; None where a row's bytes do not read as its properties
    (the reference raises then).  Each such row is checked in Python (:func:`.message.java_properties_of`,
    ``O(len(bytes))``): they are the rare rows a batch send stored as its client sent them; the rest
    are not touched."""
    stored = stored.cast(pa.binary())
    rows = np.flatnonzero(arrays.to_numpy(pc.is_valid(stored), bool))
    maps = _map_column(batch)
    for row in rows.tolist():
        try:
            java_properties_of(stored[row].as_py(), dict(maps[row].as_py()), STORED_PROPERTIES)
        except InvalidMessageError:
            return None
    n = len(joined)
    both = arrowwrite.Slices.concat([joined, arrowwrite.Slices.of(stored)])
    use = np.zeros(n, bool)
    use[rows] = True
    return arrowwrite.Slices(both.data, np.where(use, both.starts[n:], both.starts[:n]),
                             np.where(use, both.lengths[n:], both.lengths[:n]))


def oversized(msgs: arrowwrite.Restored, config: Any) -> bool:
    """Whether a message of ``msgs`` is larger than the store takes (:func:`.arrowwrite.too_large`): the
    reference raises its error then."""
    return arrowwrite.too_large(msgs, arrowwrite._sizes(msgs)[0], config)


def reference_messages(batch: pa.RecordBatch, trailing: bool) -> list[RocketMQMessage]:
    """The rows as messages for ``append_stored``, one Python object each: the reference of the
    columnar path, and the path of the rows it does not take.  ``O(rows)`` Python."""
    column = batch.column
    rows = zip(column("topic").to_pylist(), column("partition").to_pylist(), column("value").to_pylist(),
               column("properties").to_pylist(), _millis(column("bornTimestamp"), "bornTimestamp").tolist(),
               _millis(column("storeTimestamp"), "storeTimestamp").tolist(), column("bornHost").to_pylist(),
               column("storeHost").to_pylist(), column("sysFlag").to_pylist(), column("flag").to_pylist(),
               column("reconsumeTimes").to_pylist(), column("preparedTransactionOffset").to_pylist(),
               column("magic").to_pylist(), strict=True)
    msgs = [RocketMQMessage(topic=topic, queue_id=queue_id, body=body or b"", properties=dict(props or ()),
                            flag=flag, sys_flag=sys_flag, born_timestamp=born,
                            born_host=Host.parse(born_host), store_timestamp=stored,
                            store_host=Host.parse(store_host), reconsume_times=reconsume,
                            prepared_transaction_offset=prepared, magic=magic,
                            trailing_separator=trailing)
            for (topic, queue_id, body, props, born, stored, born_host, store_host, sys_flag, flag, reconsume,
                 prepared, magic) in rows]
    stored_column = _stored_properties(batch)
    for i, raw in enumerate(() if stored_column is None else stored_column.to_pylist()):
        if raw is not None:
            msg = msgs[i]
            try:
                msg.properties = java_properties_of(raw, msg.properties, f"row {i}'s {STORED_PROPERTIES}")
            except InvalidMessageError as err:
                raise InvalidMessageError(f"{err.message} (in row {i})") from err
            msg.trailing_separator = raw.endswith(PROPERTY_SEPARATOR.encode())    # stored bytes: as they are
    return msgs


def _stored_properties(batch: pa.RecordBatch) -> pa.Array | None:
    """``batch``'s :data:`STORED_PROPERTIES` column where it has one with a row that is not null, else
    None (a batch without one, or built by hand, is its ``properties``' text).

    :raises InvalidMessageError: a column of another type than binary.
    """
    if batch.schema.get_field_index(STORED_PROPERTIES) < 0:
        return None
    column = batch.column(STORED_PROPERTIES)
    if pa.types.is_null(column.type) or column.null_count == len(column):
        return None
    if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        raise InvalidMessageError(f"expected a binary column {STORED_PROPERTIES} (segstore.columns."
                                  f"ROCKETMQ_SCHEMA), found {column.type}")
    return column


def available() -> bool:
    """Whether the columnar path is built (its C functions); without them every row takes the reference."""
    return arrowwrite.available()
