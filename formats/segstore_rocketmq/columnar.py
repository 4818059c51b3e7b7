"""Columnar decoding of the RocketMQ commitlog: a mapped byte region in, Arrow record batches out.

Two steps, each with a C implementation (``_speedups``) and a pure-Python
reference decoding through :mod:`.message` (kept equal by the tests):

1. :func:`decode_region` walks the records of ``view[pos:limit]`` that start
   before ``stop`` and fills one :data:`ROW_DTYPE` row per message: the fixed
   fields, the hosts as raw bytes, where the body, topic and properties lie in
   the view, and whether the body CRC matches.  It stops at a BLANK, at
   unwritten zeros, at the first record :func:`.message.decode` refuses (the
   caller re-decodes that one record with :func:`.message.decode` for the typed
   error, so both paths raise the same error at the same position) or when the
   rows are full.  :func:`decode_at` does the same for a list of positions (a
   consume queue's entries).
2. :func:`build_batch` turns rows into a ``pyarrow.RecordBatch`` of
   :data:`segstore.columns.ROCKETMQ_SCHEMA` (projected): fixed columns are the
   rows' fields, variable columns are gathered out of the map into one data
   buffer each (a copy: an Arrow buffer over the map would pin the mmap open),
   properties are split on 0x01/0x02 in C, hosts and msgIds are formatted in C.

The C path runs no Python per message.  Both functions are pure (buffers in,
arrays out) and thread-safe; the C loops release the GIL.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from segstore.columns import HEADER, ROCKETMQ_SCHEMA, TIMESTAMP
from segstore.errors import CorruptDataError, SegstoreError

from .message import (
    BLANK_MAGIC,
    HEADERS,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    PREFIX,
    PROPERTIES_LENGTH,
    SYSFLAG_HOST_MASK,
    TOPIC_LENGTH_V1,
    TOPIC_LENGTH_V2,
    RocketMQMessage,
    body_crc,
    decode,
)

try:
    from . import _speedups
except ImportError:  # no C compiler at install: the Python reference below
    _speedups = None

#: One decoded message (``Row`` in ``_speedups.c``; native byte order).  ``*_pos``
#: are view positions, ``position`` the physical offset (view position + base).
ROW_DTYPE = np.dtype([
    ("position", "i8"), ("queue_offset", "i8"), ("physical_offset", "i8"), ("born_timestamp", "i8"),
    ("store_timestamp", "i8"), ("prepared", "i8"), ("body_pos", "i8"), ("topic_pos", "i8"),
    ("props_pos", "i8"),
    ("size", "i4"), ("magic", "i4"), ("body_crc", "i4"), ("queue_id", "i4"), ("flag", "i4"),
    ("sys_flag", "i4"), ("born_port", "i4"), ("store_port", "i4"), ("reconsume", "i4"),
    ("body_len", "i4"), ("topic_len", "i4"), ("props_len", "i4"),
    ("born_ip", "u1", 16), ("store_ip", "u1", 16), ("crc_ok", "u1"), ("pad", "u1", 7),
])
assert ROW_DTYPE.itemsize == 160

#: decode_region's status: stop reached or rows full, a BLANK, unwritten zeros, a record decode refuses.
DONE, BLANK, END, BAD = range(4)
#: Bytes a message takes at least (``message.HEADERS[0]``): bounds the rows a region can hold.
MIN_MESSAGE_SIZE = HEADERS[0].size
#: The longest host or msgId text (``HOST_TEXT_MAX`` in C): "[8 groups]:-2147483648".
HOST_TEXT_MAX = 64
BORN_HOST, STORE_HOST, MSG_ID = range(3)
_HOST_COLUMNS = {"bornHost": BORN_HOST, "storeHost": STORE_HOST, "msgId": MSG_ID}


# -- step 1: rows ---------------------------------------------------------------------------


def _fill_row(rows: np.ndarray, n: int, msg: RocketMQMessage, pos: int, base: int) -> None:
    header = HEADERS[msg.sys_flag & SYSFLAG_HOST_MASK].size
    topic_len = len(msg.topic.encode("utf-8"))
    length_field = (TOPIC_LENGTH_V1 if msg.magic == MESSAGE_MAGIC else TOPIC_LENGTH_V2).size
    body_pos = pos + header
    topic_pos = body_pos + len(msg.body) + length_field
    props_pos = topic_pos + topic_len + PROPERTIES_LENGTH.size
    born_ip = np.zeros(16, np.uint8)
    born_ip[:len(msg.born_host.ip)] = np.frombuffer(msg.born_host.ip, np.uint8)
    store_ip = np.zeros(16, np.uint8)
    store_ip[:len(msg.store_host.ip)] = np.frombuffer(msg.store_host.ip, np.uint8)
    rows[n] = (base + pos, msg.queue_offset, msg.physical_offset, msg.born_timestamp, msg.store_timestamp,
               msg.prepared_transaction_offset, body_pos, topic_pos, props_pos, msg.size, msg.magic,
               msg.body_crc, msg.queue_id, msg.flag, msg.sys_flag, msg.born_host.port, msg.store_host.port,
               msg.reconsume_times, len(msg.body), topic_len, pos + msg.size - props_pos, born_ip, store_ip,
               body_crc(msg.body) == msg.body_crc, np.zeros(7, np.uint8))


def _decode_one_py(view: memoryview, pos: int, limit: int, strict: bool) -> RocketMQMessage | None:
    try:
        record = decode(view[:limit], pos, check_crc=strict)
    except SegstoreError:
        return None
    return record if isinstance(record, RocketMQMessage) else None


def decode_region_py(view: memoryview, pos: int, stop: int, limit: int, base: int, rows: np.ndarray,
                     strict: bool) -> tuple[int, int, int, int]:
    """The reference of :func:`decode_region`, one :func:`.message.decode` per record."""
    view = memoryview(view)
    n, status, blank = 0, DONE, 0
    while n < len(rows) and pos < stop:
        if limit - pos < PREFIX.size:
            status = BAD if any(view[pos:limit]) else END
            break
        total, magic = PREFIX.unpack_from(view, pos)
        if magic == BLANK_MAGIC:
            status, blank = BLANK, total
            break
        if magic not in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
            status = END if total == 0 and magic == 0 else BAD
            break
        msg = _decode_one_py(view, pos, limit, strict)
        if msg is None:
            status = BAD
            break
        _fill_row(rows, n, msg, pos, base)
        n += 1
        pos += total
    return n, pos, status, blank


def decode_at_py(view: memoryview, positions: np.ndarray, limit: int, base: int, rows: np.ndarray,
                 strict: bool) -> int:
    """The reference of :func:`decode_at`."""
    view = memoryview(view)
    for n, pos in enumerate(positions.tolist()):
        msg = _decode_one_py(view, pos, limit, strict) if 0 <= pos <= limit - PREFIX.size else None
        if msg is None:
            return n
        _fill_row(rows, n, msg, pos, base)
    return len(positions)


def decode_region(view: memoryview, pos: int, stop: int, limit: int, base: int, rows: np.ndarray,
                  strict: bool = True) -> tuple[int, int, int, int]:
    """Decode the records of ``view[pos:limit]`` starting before ``stop`` into ``rows``.

    Returns ``(n, pos, status, blank_size)``: rows filled, where the walk stopped,
    why (:data:`DONE`, :data:`BLANK`, :data:`END`, :data:`BAD`) and a BLANK's size.
    ``strict``: a body CRC mismatch is :data:`BAD`; else it clears ``crc_ok``.
    Runtime complexity: ``O(bytes walked)``.
    """
    if _speedups is not None:
        return _speedups.decode_region(view, pos, stop, limit, base, rows, strict)
    return decode_region_py(view, pos, stop, limit, base, rows, strict)


def decode_at(view: memoryview, positions: np.ndarray, limit: int, base: int, rows: np.ndarray,
              strict: bool = True) -> int:
    """Decode the message at each view position (int64) into ``rows``; returns how many before a bad one."""
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    if _speedups is not None:
        return _speedups.decode_at(view, positions, limit, base, rows, strict)
    return decode_at_py(view, positions, limit, base, rows, strict)


def raise_bad(view: memoryview, pos: int, limit: int, path: str | None, strict: bool = True) -> None:
    """Raise the typed error :func:`.message.decode` gives for the record at ``pos`` (one :data:`BAD`).

    :raises CorruptDataError: always (a :class:`TruncatedDataError` where the record is cut short).
    """
    record = decode(memoryview(view)[:limit], pos, path=path, check_crc=strict)
    raise CorruptDataError(f"expected a message, found {record!r}", path, pos)


# -- step 2: columns --------------------------------------------------------------------------


def _col(rows: np.ndarray, name: str, dtype: str) -> np.ndarray:
    # always a copy: the rows' buffer is reused for the next batch (and a one-row field view is contiguous)
    return np.array(rows[name], dtype=dtype, copy=True)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _gathered(view: memoryview, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slices one after another, and their int32 offsets."""
    lengths = np.ascontiguousarray(np.maximum(lengths, 0), dtype=np.int32)
    offsets = _offsets(lengths)
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    _speedups.gather(view, np.ascontiguousarray(starts, dtype=np.int64), lengths, data)
    return offsets, data


def _variable(kind: pa.DataType, view: memoryview, starts: np.ndarray, lengths: np.ndarray,
              valid: np.ndarray | None = None) -> pa.Array:
    offsets, data = _gathered(view, starts, lengths)
    bitmap = None
    nulls = 0
    if valid is not None:
        nulls = int(len(valid) - np.count_nonzero(valid))
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(kind, len(lengths), [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _fixed(kind: pa.DataType, values: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])


class _Properties:
    """The rows' properties split once (``_speedups.split_properties``), for every column that needs them."""

    def __init__(self, view: memoryview, rows: np.ndarray) -> None:
        n = len(rows)
        starts = _col(rows, "props_pos", "i8")
        lengths = _col(rows, "props_len", "i4")
        cap = int(((lengths.astype(np.int64) + 1) // 2).sum()) + 1
        self.item_offsets = np.empty(n + 1, np.int32)
        names, name_lens = np.empty(cap, np.int64), np.empty(cap, np.int32)
        values, value_lens = np.empty(cap, np.int64), np.empty(cap, np.int32)
        self.tags, self.tags_lens = np.empty(n, np.int64), np.empty(n, np.int32)
        self.token_offsets = np.empty(n + 1, np.int32)
        tokens, token_lens = np.empty(cap, np.int64), np.empty(cap, np.int32)
        items, count = _speedups.split_properties(
            view, starts, lengths, self.item_offsets, names, name_lens, values, value_lens, self.tags,
            self.tags_lens, self.token_offsets, tokens, token_lens)
        self.names, self.name_lens = names[:items], name_lens[:items]
        self.values, self.value_lens = values[:items], value_lens[:items]
        self.tokens, self.token_lens = tokens[:count], token_lens[:count]


def _host_column(rows: np.ndarray, which: int) -> pa.Array:
    n = len(rows)
    offsets = np.empty(n + 1, np.int32)
    data = np.empty(n * HOST_TEXT_MAX, np.uint8)
    used = _speedups.format_hosts(np.ascontiguousarray(rows), which, offsets, data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data[:used])])


def _build_c(view: memoryview, rows: np.ndarray, schema: pa.Schema) -> list[pa.Array]:
    n = len(rows)
    props: _Properties | None = None
    built: dict[str, pa.Array] = {}

    def split() -> _Properties:
        nonlocal props
        if props is None:
            props = _Properties(view, rows)
        return props

    def names_values(kind: pa.DataType) -> tuple[pa.Array, pa.Array]:
        p = split()
        return (_variable(pa.string(), view, p.names, p.name_lens),
                _variable(kind, view, p.values, p.value_lens))

    fixed = {
        "partition": ("queue_id", pa.int32(), "i4"), "offset": ("queue_offset", pa.int64(), "i8"),
        "timestamp": ("born_timestamp", TIMESTAMP, "i8"), "position": ("position", pa.int64(), "i8"),
        "size": ("size", pa.int32(), "i4"), "bornTimestamp": ("born_timestamp", TIMESTAMP, "i8"),
        "storeTimestamp": ("store_timestamp", TIMESTAMP, "i8"),
        "physicalOffset": ("physical_offset", pa.int64(), "i8"), "sysFlag": ("sys_flag", pa.int32(), "i4"),
        "flag": ("flag", pa.int32(), "i4"), "reconsumeTimes": ("reconsume", pa.int32(), "i4"),
        "bodyCrc": ("body_crc", pa.int32(), "i4"),
        "preparedTransactionOffset": ("prepared", pa.int64(), "i8"), "magic": ("magic", pa.int32(), "i4"),
    }
    columns = []
    for field in schema:
        name = field.name
        if name in fixed:
            source, kind, dtype = fixed[name]
            column = _fixed(kind, _col(rows, source, dtype))
        elif name == "value":
            column = _variable(pa.binary(), view, rows["body_pos"], rows["body_len"])
        elif name == "topic":
            column = _variable(pa.string(), view, rows["topic_pos"], rows["topic_len"])
        elif name == "timestampType":
            column = _fixed(pa.int32(), np.zeros(n, np.int32))
        elif name == "key":
            p = split()
            has = p.token_offsets[1:] > p.token_offsets[:-1]
            first = np.minimum(p.token_offsets[:-1], max(len(p.tokens) - 1, 0))
            starts = np.where(has, p.tokens[first] if len(p.tokens) else 0, 0)
            lengths = np.where(has, p.token_lens[first] if len(p.tokens) else 0, 0)
            column = _variable(pa.binary(), view, starts, lengths, has)
        elif name == "tags":
            p = split()
            column = _variable(pa.string(), view, p.tags, p.tags_lens, p.tags_lens >= 0)
        elif name == "keys":
            p = split()
            tokens = _variable(pa.string(), view, p.tokens, p.token_lens)
            column = pa.ListArray.from_arrays(pa.array(p.token_offsets), tokens)
        elif name == "properties":
            if "properties" not in built:
                keys, values = names_values(pa.string())
                built[name] = pa.MapArray.from_arrays(pa.array(split().item_offsets), keys, values)
            column = built[name]
        elif name == "headers":
            keys, values = names_values(pa.binary())
            items = pa.StructArray.from_arrays([keys, values], fields=list(HEADER))
            column = pa.ListArray.from_arrays(pa.array(split().item_offsets), items)
        elif name in ("bornHost", "storeHost", "msgId"):
            column = _host_column(rows, _HOST_COLUMNS[name])
        else:
            raise AssertionError(f"no builder for column {name}")
        columns.append(column)
    return columns


def _build_py(view: memoryview, rows: np.ndarray, schema: pa.Schema) -> list[pa.Array]:
    """The reference of the column builders: one :func:`.message.decode` per row, ``pa.array`` per column."""
    view = memoryview(view)
    header_sizes = np.array([HEADERS[f & SYSFLAG_HOST_MASK].size for f in rows["sys_flag"].tolist()],
                            np.int64)
    starts = (rows["body_pos"] - header_sizes).tolist()
    msgs: list[RocketMQMessage] = [decode(view, pos, check_crc=False) for pos in starts]
    def raw(text: str) -> bytes:      # properties are decoded with surrogatepass: keep the stored bytes
        return text.encode("utf-8", "surrogatepass")

    def items(m: RocketMQMessage) -> list[tuple[bytes, bytes]]:
        return [(raw(k), raw(v)) for k, v in m.properties.items()]

    binary = pa.binary()
    values = {
        "key": ([raw(m.keys[0]) if m.keys else None for m in msgs], binary),
        "value": ([m.body for m in msgs], None),
        "topic": ([m.topic for m in msgs], None),
        "partition": ([m.queue_id for m in msgs], None),
        "offset": ([m.queue_offset for m in msgs], None),
        "timestamp": ([m.born_timestamp for m in msgs], None),
        "timestampType": ([0] * len(msgs), None),
        "headers": ([items(m) for m in msgs], pa.list_(pa.struct([("key", binary), ("value", binary)]))),
        "position": (rows["position"].tolist(), None),
        "size": ([m.size for m in msgs], None),
        "tags": ([raw(m.tags) if m.tags is not None else None for m in msgs], binary),
        "keys": ([[raw(k) for k in m.keys] for m in msgs], pa.list_(binary)),
        "properties": ([items(m) for m in msgs], pa.map_(binary, binary)),
        "bornTimestamp": ([m.born_timestamp for m in msgs], None),
        "storeTimestamp": ([m.store_timestamp for m in msgs], None),
        "bornHost": ([str(m.born_host) for m in msgs], None),
        "storeHost": ([str(m.store_host) for m in msgs], None),
        "msgId": ([m.msg_id for m in msgs], None),
        "physicalOffset": ([m.physical_offset for m in msgs], None),
        "sysFlag": ([m.sys_flag for m in msgs], None),
        "flag": ([m.flag for m in msgs], None),
        "reconsumeTimes": ([m.reconsume_times for m in msgs], None),
        "bodyCrc": ([m.body_crc for m in msgs], None),
        "preparedTransactionOffset": ([m.prepared_transaction_offset for m in msgs], None),
        "magic": ([m.magic for m in msgs], None),
    }
    columns = []
    for field in schema:
        data, stored_as = values[field.name]
        columns.append(pa.array(data, type=field.type) if stored_as is None
                       else pa.array(data, type=stored_as).view(field.type))
    return columns


def build_batch(view: memoryview, rows: np.ndarray, schema: pa.Schema = ROCKETMQ_SCHEMA) -> pa.RecordBatch:
    """The rows (from :func:`decode_region` over ``view``) as a batch of ``schema`` (a projection of
    :data:`segstore.columns.ROCKETMQ_SCHEMA`); only its columns are built.  Runtime complexity:
    ``O(rows + bytes of the variable columns built)``."""
    build = _build_c if _speedups is not None else _build_py
    return pa.RecordBatch.from_arrays(build(view, rows, schema), schema=schema)


def rows_of(batch_rows: int) -> np.ndarray:
    """An empty row buffer for at most ``batch_rows`` messages."""
    return np.empty(batch_rows, dtype=ROW_DTYPE)


# -- the walk -----------------------------------------------------------------------------------

#: Rows per batch, and bytes of the log per batch (so a batch's variable columns stay far below
#: Arrow's 2 GiB int32 offsets; a batch ends after the message crossing it).
BATCH_ROWS = 1 << 16
BATCH_BYTES = 64 << 20


def walk_file(view: memoryview, pos: int, limit: int, base: int, file_size: int, path: str | None, *,
              stop: int | None = None, strict: bool = True, batch_rows: int = BATCH_ROWS,
              batch_bytes: int = BATCH_BYTES) -> Iterator[np.ndarray]:
    """Rows of the messages of one commitlog file from ``pos`` (a record boundary), as ``CommitLog.walk``
    reads them: up to ``limit`` (its written end), those starting before ``stop``, ending at a BLANK
    (which must reach the end of the file) or unwritten zeros.  Yields row arrays of at most
    ``batch_rows`` rows / about ``batch_bytes`` bytes, reusing one buffer (copy what you keep).

    :raises CorruptDataError: a record :func:`.message.decode` refuses (its own typed error and
        position; with ``strict`` a body CRC mismatch too), or a BLANK not reaching the end of the file.
    """
    stop = limit if stop is None else min(stop, limit)
    rows = rows_of(max(1, min(batch_rows, (stop - pos) // MIN_MESSAGE_SIZE + 1)))
    while pos < stop:
        n, pos, status, blank = decode_region(view, pos, min(stop, pos + batch_bytes), limit, base, rows,
                                              strict)
        if n:
            yield rows[:n]
        if status == BAD:
            raise_bad(view, pos, limit, path, strict)
        if status == BLANK and (blank < PREFIX.size or pos + blank != file_size):
            raise CorruptDataError(f"expected a BLANK reaching the end of the file ({file_size - pos} "
                                   f"bytes), found size {blank}", path, pos)
        if status in (BLANK, END):
            return


def topic_is(view: memoryview, rows: np.ndarray, topic: str) -> np.ndarray:
    """Per row, whether its topic is ``topic`` (bool array), without building the topic column."""
    wanted = topic.encode("utf-8")
    same = rows["topic_len"] == len(wanted)
    if not wanted or not same.any():
        return same
    if _speedups is None:
        view = memoryview(view)
        places = zip(rows["topic_pos"].tolist(), same.tolist(), strict=True)
        return np.array([ok and bytes(view[p:p + len(wanted)]) == wanted for p, ok in places], dtype=bool)
    starts = rows["topic_pos"][same]
    _, data = _gathered(view, starts, np.full(len(starts), len(wanted), np.int32))
    same[same] = (data.reshape(len(starts), len(wanted)) == np.frombuffer(wanted, np.uint8)).all(axis=1)
    return same
