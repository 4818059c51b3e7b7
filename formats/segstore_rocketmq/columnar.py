"""Columnar decoding of the RocketMQ commitlog: a mapped byte region in, Arrow record batches out.

Two steps, each with a C implementation (``_speedups``) and a pure-Python
reference decoding through :mod:`.message` (kept equal by the tests):

1. :func:`decode_region` walks the records of ``view[pos:limit]`` that start
   before ``stop`` and fills one :data:`ROW_DTYPE` row per message: the fixed
   fields, the hosts as raw bytes, where the body, topic and properties lie in
   the view, and whether the body CRC matches (with a ``fill`` mask, only the
   groups of fields a projection's columns are built from: :func:`fill_for`;
   every record is decoded and checked the same).  It stops at a BLANK, at
   unwritten zeros, at the first record :func:`.message.decode` refuses (the
   caller re-decodes that one record with :func:`.message.decode` for the typed
   error, so both paths raise the same error at the same position) or when the
   rows are full.  :func:`decode_at` does the same for a list of positions (a
   consume queue's entries).
2. :func:`build_batch` turns rows into a ``pyarrow.RecordBatch`` of
   :data:`segstore.columns.ROCKETMQ_SCHEMA` (projected): fixed columns are the
   rows' fields, variable columns are gathered out of the map into one data
   buffer each (a copy: an Arrow buffer over the map would pin the mmap open),
   the property columns are split on 0x01/0x02 and copied in one C pass, hosts
   and msgIds are formatted in C.

The C path runs no Python per message.  Both functions are pure (buffers in,
arrays out) and thread-safe; the C loops release the GIL.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from segstore import speedups
from segstore.columns import pooled, pooled_together
from segstore.errors import CorruptDataError, SegstoreError
from segstore.javatext import JAVA_REPLACE

from .indexfile import IndexRequest, index_key_hashes, index_keys
from .javacompat import string_hash
from .message import (
    BLANK_MAGIC,
    HEADERS,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    PREFIX,
    PROPERTIES_LENGTH,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_KEY,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_HOST_MASK,
    SYSFLAG_STOREHOST_V6,
    TOPIC_LENGTH_V1,
    TOPIC_LENGTH_V2,
    RocketMQMessage,
    body_crc,
    decode,
    stored_properties,
    stored_properties_of,
)

if TYPE_CHECKING:   # pyarrow loads where rows become columns: the walk itself (a store's open) needs none
    import pyarrow as pa

# Built without a C compiler (or SEGSTORE_PURE_PYTHON=1): the Python reference below.
_speedups: Any = speedups.load("segstore_rocketmq._speedups")   # a C extension: no types to read

#: The decoded columns (``Cols`` in ``_speedups.c``): int64 and int32 fields, in this order, one
#: row of a block each; ``*_pos`` are view positions, ``position`` the physical offset (view position + base).
I8_FIELDS = ("position", "queue_offset", "physical_offset", "born_timestamp", "store_timestamp", "prepared",
             "body_pos", "topic_pos", "props_pos")
I4_FIELDS = ("size", "magic", "body_crc", "queue_id", "flag", "sys_flag", "born_port", "store_port",
             "reconsume", "body_len", "topic_len", "props_len")
#: uint8 bytes per row: born IP and store IP (16 each, an IPv4 address zero-padded), crc_ok.
U8_PER_ROW = 16 + 16 + 1
_I8 = {name: k for k, name in enumerate(I8_FIELDS)}
_I4 = {name: k for k, name in enumerate(I4_FIELDS)}

#: The groups of fields a decode may leave out (``fill``; ``FILL_*`` in ``_speedups_decode.c``):
#: a batch built for a projection decodes only those its columns read.  Every decode fills the
#: others (position, offsets, size, body CRC, queue id, sys flag, where the body and topic lie,
#: crc_ok): what every read checks.
FILL_TIMES, FILL_PROPS, FILL_HOSTS, FILL_REST = 1, 2, 4, 8
FILL_ALL = FILL_TIMES | FILL_PROPS | FILL_HOSTS | FILL_REST
_FIELD_GROUP = {"born_timestamp": FILL_TIMES, "store_timestamp": FILL_TIMES,
                "props_pos": FILL_PROPS, "props_len": FILL_PROPS,
                "born_ip": FILL_HOSTS, "store_ip": FILL_HOSTS,
                "born_port": FILL_HOSTS, "store_port": FILL_HOSTS,
                "magic": FILL_REST, "flag": FILL_REST, "reconsume": FILL_REST, "prepared": FILL_REST}
#: The groups each column of :data:`segstore.columns.ROCKETMQ_SCHEMA` is built from (none: only
#: fields every decode fills).  A column not named here takes them all.
_COLUMN_GROUPS = {"topic": 0, "partition": 0, "offset": 0, "value": 0, "timestampType": 0, "position": 0,
                  "size": 0, "physicalOffset": 0, "sysFlag": 0, "bodyCrc": 0,
                  "timestamp": FILL_TIMES, "bornTimestamp": FILL_TIMES, "storeTimestamp": FILL_TIMES,
                  "key": FILL_PROPS, "tags": FILL_PROPS, "keys": FILL_PROPS, "properties": FILL_PROPS,
                  "headers": FILL_PROPS, "flag": FILL_REST, "reconsumeTimes": FILL_REST,
                  "preparedTransactionOffset": FILL_REST, "magic": FILL_REST, "propertiesBytes": FILL_PROPS,
                  "bornHost": FILL_HOSTS, "storeHost": FILL_HOSTS, "msgId": FILL_HOSTS}


def fill_for(names: Iterable[str]) -> int:
    """The ``fill`` groups a decode must fill for a batch of the columns ``names``."""
    fill = 0
    for name in names:
        fill |= _COLUMN_GROUPS.get(name, FILL_ALL)
    return fill


class Rows:
    """Decoded messages as columns: three blocks of ``cap`` rows, the first ``n`` filled.

    ``rows[name]`` is a field's column (a view of the filled rows): the
    :data:`I8_FIELDS`, :data:`I4_FIELDS`, ``born_ip``/``store_ip`` (``n x 16``) and
    ``crc_ok``.  Arrow columns built from it share its memory, so a walk makes
    new rows for every batch.

    ``view``: the bytes the ``*_pos`` fields index where they are not the walked file's (None: they
    are): a row :func:`java_row` built.  ``topic``: the topic (UTF-8) every row holds where the
    reader knows it (each row checked against the entry of a queue of that one topic), None where
    not: the topic column is then that value repeated instead of a gather.  ``claims``: per row, the
    entry of the read's queue ranges it claims (-1: none), where the decode found them
    (:func:`decode_region`'s ``ranges``), else None; rows made of others (:meth:`select`) have none.
    """

    __slots__ = ("cap", "claims", "filled", "i4", "i8", "n", "topic", "u8", "view")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.n = 0
        #: the groups of fields the last decode filled (``FILL_*``); the others hold whatever the
        #: memory held, and reading one raises
        self.filled = FILL_ALL
        self.i8 = pooled((len(I8_FIELDS), cap), np.int64)
        self.i4 = pooled((len(I4_FIELDS), cap), np.int32)
        self.u8 = pooled(U8_PER_ROW * cap, np.uint8)
        self.view: memoryview | None = None
        self.topic: bytes | None = None
        self.claims: np.ndarray | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str) -> np.ndarray:
        group = _FIELD_GROUP.get(name, 0)
        if group and not self.filled & group:
            raise LookupError(f"{name}: not decoded (the rows were decoded for a projection without it)")
        k = _I8.get(name)
        if k is not None:
            return self.i8[k, :self.n]
        k = _I4.get(name)
        if k is not None:
            return self.i4[k, :self.n]
        cap = self.cap
        if name == "born_ip":
            return self.u8[:16 * cap].reshape(cap, 16)[:self.n]
        if name == "store_ip":
            return self.u8[16 * cap:32 * cap].reshape(cap, 16)[:self.n]
        if name == "crc_ok":
            return self.u8[32 * cap:32 * cap + self.n]
        raise KeyError(name)

    def select(self, index: np.ndarray | slice) -> Rows:
        """The chosen rows (a mask, indices or a slice of the filled ones), copied into new rows."""
        picked = np.arange(self.n)[index]
        out = Rows(len(picked))
        out.n = len(picked)
        out.filled = self.filled
        out.view = self.view
        out.topic = self.topic
        out.i8[:] = self.i8[:, picked]
        out.i4[:] = self.i4[:, picked]
        cap, m = self.cap, out.n
        for k in (0, 1):                # born_ip, store_ip: copied as they are, filled or not
            out.u8[16 * m * k:16 * m * (k + 1)].reshape(m, 16)[:] = \
                self.u8[16 * cap * k:16 * cap * (k + 1)].reshape(cap, 16)[picked]
        out["crc_ok"][:] = self["crc_ok"][picked]
        return out

    def require(self, groups: int) -> None:
        """Raise unless the last decode filled ``groups`` (for a reader of the blocks themselves)."""
        if groups & ~self.filled:
            raise LookupError(f"expected rows decoded with fill {groups}, found {self.filled}")

    def equals(self, other: Rows) -> bool:
        """Same filled rows, field for field (those both decodes filled)."""
        names = [name for name in (*I8_FIELDS, *I4_FIELDS, "born_ip", "store_ip", "crc_ok")
                 if not _FIELD_GROUP.get(name, 0) & ~(self.filled & other.filled)]
        return self.n == other.n and all(np.array_equal(self[name], other[name]) for name in names)


#: decode_region's status: stop reached or rows full, a BLANK, unwritten zeros, a record decode refuses.
DONE, BLANK, END, BAD = range(4)
#: Bytes a message takes at least (``message.HEADERS[0]``): bounds the rows a region can hold.
MIN_MESSAGE_SIZE = HEADERS[0].size
BORN_HOST, STORE_HOST, MSG_ID = range(3)
#: The longest host or msgId text of an IPv4 and an IPv6 row (``HOST_TEXT_V4``... in C): hosts
#: "255.255.255.255:-2147483648" and "[8 groups]:-2147483648", msgIds 32 and 56 hex digits.
HOST_TEXT_LONGEST = {BORN_HOST: (27, 53), STORE_HOST: (27, 53), MSG_ID: (32, 56)}
_HOST_COLUMNS = {"bornHost": BORN_HOST, "storeHost": STORE_HOST, "msgId": MSG_ID}


# -- step 1: rows ---------------------------------------------------------------------------


def _fill_row(rows: Rows, n: int, msg: RocketMQMessage, pos: int, base: int) -> None:
    header = HEADERS[msg.sys_flag & SYSFLAG_HOST_MASK].size
    topic_len = len(msg.topic.encode("utf-8"))
    length_field = (TOPIC_LENGTH_V1 if msg.magic == MESSAGE_MAGIC else TOPIC_LENGTH_V2).size
    body_pos = pos + header
    topic_pos = body_pos + len(msg.body) + length_field
    props_pos = topic_pos + topic_len + PROPERTIES_LENGTH.size
    rows.i8[:, n] = (base + pos, msg.queue_offset, msg.physical_offset, msg.born_timestamp,
                     msg.store_timestamp, msg.prepared_transaction_offset, body_pos, topic_pos, props_pos)
    rows.i4[:, n] = (msg.size, msg.magic, msg.body_crc, msg.queue_id, msg.flag, msg.sys_flag,
                     msg.born_host.port, msg.store_host.port, msg.reconsume_times, len(msg.body), topic_len,
                     pos + msg.size - props_pos)
    cap = rows.cap
    for at, ip in ((16 * n, msg.born_host.ip), (16 * (cap + n), msg.store_host.ip)):
        rows.u8[at:at + 16] = np.frombuffer(ip.ljust(16, b"\0"), np.uint8)
    rows.u8[32 * cap + n] = body_crc(msg.body) == msg.body_crc


def _decode_one_py(view: memoryview, pos: int, limit: int, strict: bool) -> RocketMQMessage | None:
    try:     # properties that are not UTF-8 refused, as the C walk refuses them (see java_row)
        record = decode(view[:limit], pos, check_crc=strict, java_text=False)
    except SegstoreError:
        return None
    return record if isinstance(record, RocketMQMessage) else None


def decode_region_py(view: memoryview, pos: int, stop: int, limit: int, base: int, rows: Rows,
                     strict: bool) -> tuple[int, int, int, int]:
    """The reference of :func:`decode_region`, one :func:`.message.decode` per record."""
    view = memoryview(view)
    n, status, blank = 0, DONE, 0
    while n < rows.cap and pos < stop:
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
    rows.n = n
    return n, pos, status, blank


def decode_at_py(view: memoryview, positions: np.ndarray, limit: int, base: int, rows: Rows,
                 strict: bool) -> int:
    """The reference of :func:`decode_at`."""
    view = memoryview(view)
    for n in range(len(positions)):       # stops at the first bad one: O(rows decoded), not O(positions)
        pos = int(positions[n])
        msg = _decode_one_py(view, pos, limit, strict) if 0 <= pos <= limit - PREFIX.size else None
        if msg is None:
            rows.n = n
            return n
        _fill_row(rows, n, msg, pos, base)
    rows.n = len(positions)
    return rows.n


def decode_region(view: memoryview, pos: int, stop: int, limit: int, base: int, rows: Rows,
                  strict: bool = True, fill: int = FILL_ALL, ranges: QueueRanges | None = None
                  ) -> tuple[int, int, int, int]:
    """Decode the records of ``view[pos:limit]`` starting before ``stop`` into ``rows``.

    Returns ``(n, pos, status, blank_size)``: rows filled, where the walk stopped,
    why (:data:`DONE`, :data:`BLANK`, :data:`END`, :data:`BAD`) and a BLANK's size.
    ``strict``: a body CRC mismatch is :data:`BAD`; else it clears ``crc_ok``.  ``fill``: the
    groups of fields to fill besides those every decode fills (:func:`fill_for`; the same records
    are decoded and checked whatever it is).  ``ranges``: in C, each row's claim of an entry of
    them found as it is decoded (:attr:`Rows.claims`, which :func:`claim_entries` takes).
    Runtime complexity: ``O(bytes walked)``.
    """
    rows.claims = None
    if _speedups is not None:
        claims = pooled(rows.cap, np.int64) if ranges is not None else None
        result = _speedups.decode_region(view, pos, stop, limit, base, rows.i8, rows.i4, rows.u8, strict,
                                         fill, None if ranges is None else (*ranges, claims))
        rows.n, rows.filled = result[0], fill
        if claims is not None:
            rows.claims = claims[:rows.n]
        return result
    rows.filled = FILL_ALL
    return decode_region_py(view, pos, stop, limit, base, rows, strict)


@dataclass(slots=True)
class KeyEntries:
    """Each decoded row's IndexFile entries and TAGS hash, as :func:`index_entries` gives them:
    ``counts`` (int32) and ``tags`` (int64) per row, ``hashes`` (int64) the entries in order."""

    counts: np.ndarray
    hashes: np.ndarray
    tags: np.ndarray

    def first(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`index_entries` of the first ``n`` rows."""
        counts = self.counts[:n]
        return counts, self.hashes[:int(counts.sum(dtype=np.int64))], self.tags[:n]


@dataclass(slots=True)
class TopicNumbers:
    """Rows' topics numbered ``0, 1, ...`` by first appearance among the rows (``_speedups.topic_codes``,
    or the C decode as it decodes each row): ``local`` (int32) per row, ``firsts`` (int64, ascending)
    the first row holding each number."""

    local: np.ndarray
    firsts: np.ndarray

    def codes(self, view: memoryview, rows: Rows, n: int, codes: dict[str, int]) -> np.ndarray:
        """:func:`topic_codes` of the first ``n`` rows: per row its topic's number in ``codes`` (new topics
        added in order of first appearance), int32.  Each distinct topic is decoded once; ``O(n)``."""
        firsts = self.firsts[:int(np.searchsorted(self.firsts, n))]     # the topics of the first n rows
        view = memoryview(view)
        places = zip(rows["topic_pos"][firsts].tolist(), rows["topic_len"][firsts].tolist(), strict=True)
        numbers = np.array([codes.setdefault(bytes(view[p:p + size]).decode("utf-8"), len(codes))
                            for p, size in places], np.int32)
        local = self.local[:n]
        # the usual batch: its topics already numbered so, in ``codes`` (a gather of every row saved)
        return local if np.array_equal(numbers, np.arange(len(numbers))) else numbers[local]


def decode_region_indexed(view: memoryview, pos: int, stop: int, limit: int, base: int, rows: Rows
                          ) -> tuple[tuple[int, int, int, int], KeyEntries | None, TopicNumbers | None]:
    """:func:`decode_region` (strict, every field), and in C each row's :func:`index_entries`, found
    a thousand rows after they are decoded, while their bytes are still in the cache (a walk's
    second pass over a whole batch read them from memory again), and its topic's number (as
    :func:`topic_codes` finds them, as it is decoded).  None for either where the C walk did not
    find them (the pure-Python decode; more entries than ``3 * cap + 16``; no memory for the
    topics' table): :func:`index_entries`, :func:`topic_codes` then.  ``O(bytes walked)``."""
    if _speedups is None:
        return decode_region(view, pos, stop, limit, base, rows), None, None
    counts, local, tags, firsts, hashes = pooled_together([
        (rows.cap, np.int32), (rows.cap, np.int32), (rows.cap, np.int64), (rows.cap, np.int64),
        (3 * rows.cap + 16, np.int64)])
    n, end, status, blank, total, k = _speedups.decode_region_indexed(
        view, pos, stop, limit, base, rows.i8, rows.i4, rows.u8, True, counts, hashes, tags, local, firsts)
    rows.n, rows.filled = n, FILL_ALL
    return ((n, end, status, blank), KeyEntries(counts, hashes[:total], tags) if total >= 0 else None,
            TopicNumbers(local, firsts[:k]) if k >= 0 else None)


def decode_at(view: memoryview, positions: np.ndarray, limit: int, base: int, rows: Rows,
              strict: bool = True, fill: int = FILL_ALL) -> int:
    """Decode the message at each view position (int64) into ``rows``; returns how many before a bad
    one.  ``fill``: as :func:`decode_region`'s."""
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    if _speedups is not None:
        rows.n = _speedups.decode_at(view, positions, limit, base, rows.i8, rows.i4, rows.u8, strict, fill)
        rows.filled = fill
        return rows.n
    rows.filled = FILL_ALL
    return decode_at_py(view, positions, limit, base, rows, strict)


def contradicting(rows: Rows) -> int | None:
    """The first row whose header contradicts where it lies, or None: a PHYSICALOFFSET other than its
    position, or a negative QUEUEID (no broker stores one).  No CRC covers these fields, so a
    damaged one decodes: such a message is torn, never served, dispatched or indexed.  ``O(rows)``."""
    bad = np.flatnonzero((rows["physical_offset"] != rows["position"]) | (rows["queue_id"] < 0))
    return int(bad[0]) if len(bad) else None


def contradiction(physical_offset: int, queue_id: int, position: int) -> str | None:
    """What :func:`contradicting` finds wrong with a message stored at ``position``, or None."""
    if physical_offset != position:
        return (f"expected a message stored at physical offset {position}, "
                f"found one claiming offset {physical_offset}")
    if queue_id < 0:
        return f"expected a queue id >= 0, found {queue_id}"
    return None


def raise_bad(view: memoryview, pos: int, limit: int, path: str | None, strict: bool = True) -> None:
    """Raise the typed error :func:`.message.decode` gives for the record at ``pos`` (one :data:`BAD`).

    :raises CorruptDataError: always (a :class:`TruncatedDataError` where the record is cut short).
    """
    record = decode(memoryview(view)[:limit], pos, path=path, check_crc=strict, java_text=False)
    raise CorruptDataError(f"expected a message, found {record!r}", path, pos)


def java_row(view: memoryview, pos: int, limit: int, base: int, strict: bool = True) -> Rows | None:
    """The row of the message at ``view[pos:limit]`` when :func:`decode_region` stops there (:data:`BAD`)
    only because its properties or its topic are not UTF-8 (a surrogate's three bytes ``ED A0 80``
    neither), else None (damage).

    RocketMQ 4.9.7 reads such properties as ``new String(bytes, UTF_8)`` does (``CommitLog.
    checkMessageAndReturnSize``, ``MessageDecoder.string2messageProperties``: a U+FFFD for each
    malformed sequence) and keeps, dispatches and serves the message: its tags code and IndexFile
    key hashes are those Java strings' ``hashCode()``.  It reads the topic so too (there and in
    ``MessageDecoder.decode``): a topic the broker's ``TopicValidator`` refuses, which the walks then
    take as any such topic.  The row's positions index its own bytes (:attr:`Rows.view`): the message
    as stored, then its properties and its topic as Java reads them, written as UTF-8, where
    ``props_pos``/``props_len`` and ``topic_pos``/``topic_len`` point, so the property and topic
    columns, the dump lines and the hashes every reader makes of rows are those of Java's text;
    ``size`` and every other field are the stored message's.  The walks build this one row in Python
    and go on in C after it (:func:`walk_file`, ``recovery``): a store holding none pays nothing.
    ``O(its size)``.
    """
    try:
        msg = decode(memoryview(view)[:limit], pos, check_crc=strict, java_text=True)
    except SegstoreError:
        return None
    if not isinstance(msg, RocketMQMessage):
        return None
    stored = stored_properties(view, pos)
    text = stored.decode("utf-8", JAVA_REPLACE).encode("utf-8")
    topic = msg.topic.encode("utf-8")
    rows = Rows(1)
    _fill_row(rows, 0, msg, 0, base + pos)
    rows.i8[_I8["props_pos"], 0] = msg.size
    rows.i4[_I4["props_len"], 0] = len(text)
    rows.i8[_I8["topic_pos"], 0] = msg.size + len(text)
    rows.i4[_I4["topic_len"], 0] = len(topic)
    rows.n = 1
    rows.view = memoryview(bytes(memoryview(view)[pos:pos + msg.size]) + text + topic)
    return rows


def view_of(view: memoryview, rows: Rows) -> memoryview:
    """The bytes ``rows``' positions index: ``view`` (their file's), or the row's own (:func:`java_row`)."""
    return view if rows.view is None else rows.view


# -- step 2: columns --------------------------------------------------------------------------


#: Rows whose bytes are copied into every gathered column (body, topic) before the next rows (see
#: ``_speedups.gather_columns``): about 0.5 MB of 230-byte messages, which stays in the L2 cache.
GATHER_CHUNK = 2048


class _Variable:
    """A binary/string column of slices ``view[start:start+length]`` (copied into one data buffer),
    to be filled with the others of its batch by :func:`_gather`.  ``items``: per row, where its
    items start (n + 1 int32) when a row holds several (a list column's values); ``valid``: the
    rows that are not null (lengths of null rows are <= 0)."""

    def __init__(self, kind: pa.DataType, starts: np.ndarray, lengths: np.ndarray,
                 valid: np.ndarray | None = None, items: np.ndarray | None = None) -> None:
        self.kind = kind
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int32)
        self.valid, self.items = valid, items
        used = self.lengths if valid is None else self.lengths[valid]
        self.offsets, self.data = pooled_together([(len(self.lengths) + 1, np.int32),
                                                   (int(used.sum(dtype=np.int64)), np.uint8)])

    def array(self) -> pa.Array:
        return _assembled(self.kind, self.spec())

    def spec(self) -> Spec:
        """The column as an :data:`Spec` (its buffers)."""
        n = len(self.lengths)
        bitmap, nulls = None, 0
        if self.valid is not None:
            nulls = n - int(np.count_nonzero(self.valid))
            bitmap = np.packbits(self.valid, bitorder="little") if nulls else None
        return (_BINARY, n, nulls, (bitmap, self.offsets, self.data), ())


def _gather(view: memoryview, n: int, columns: list[_Variable]) -> None:
    """Fill the columns of a batch of ``n`` rows in one pass, :data:`GATHER_CHUNK` rows at a time."""
    if columns:
        _speedups.gather_columns(view, n, GATHER_CHUNK, tuple(
            (c.starts, c.lengths, c.items, c.offsets, c.data) for c in columns))


def variable_column(kind: pa.DataType, view: memoryview, starts: np.ndarray, lengths: np.ndarray,
                    valid: np.ndarray | None = None) -> pa.Array:
    """One binary/string column of the slices ``view[start:start+length]`` (copied into one buffer);
    ``valid``: the rows that are not null.  For callers outside a walk (conversion)."""
    column = _Variable(kind, starts, lengths, valid)
    _gather(view, len(column.lengths), [column])
    return column.array()


def _repeated(value: bytes, n: int) -> Spec:
    """A binary/string column of ``value`` in each of ``n`` rows (a batch of one topic): its offsets a
    range, its data ``value`` copied by doubling, where a gather read every row's bytes
    (``bench_spark``'s every-column query: 34 instructions a row)."""
    size = len(value)
    offsets, data = pooled_together([(n + 1, np.int32), (n * size, np.uint8)])
    np.multiply(np.arange(n + 1, dtype=np.int32), size, out=offsets)
    if len(data):
        data[:size] = np.frombuffer(value, np.uint8)
        filled = size
        while filled < len(data):
            step = min(filled, len(data) - filled)
            data[filled:filled + step] = data[:step]
            filled += step
    return (_BINARY, n, 0, (None, offsets, data), ())


def _fixed(values: np.ndarray) -> Spec:
    """A fixed-width column of ``values`` (no nulls) as a :data:`Spec`."""
    values = np.ascontiguousarray(values)
    return (_FIXED[values.dtype.itemsize], len(values), 0, (None, values), ())


class _Properties:
    """The rows' properties split once (``_speedups.split_properties``): where each item, TAGS value
    and KEYS token lies in the view (what :class:`JsonWriter` formats)."""

    def __init__(self, view: memoryview, rows: Rows) -> None:
        n = len(rows)
        self.view = view
        lengths = rows["props_len"]
        self.item_offsets, self.tags, self.tags_lens, self.token_offsets = pooled_together(
            [(n + 1, np.int32), (n, np.int64), (n, np.int32), (n + 1, np.int32)])
        # a guess that fits usual messages (a few properties, a few keys), then the sure bound
        for cap in (4 * n + 16, int(lengths.sum(dtype=np.int64)) // 2 + n + 1):
            names, name_lens, values, value_lens, tokens, token_lens = pooled_together(
                [(cap, np.int64), (cap, np.int32)] * 3)
            items, count = _speedups.split_properties(
                view, rows["props_pos"], lengths, self.item_offsets, names, name_lens, values, value_lens,
                self.tags, self.tags_lens, self.token_offsets, tokens, token_lens)
            if items >= 0:
                break
        self.names, self.name_lens = names[:items], name_lens[:items]
        self.values, self.value_lens = values[:items], value_lens[:items]
        self.tokens, self.token_lens = tokens[:count], token_lens[:count]


def _strings(count: int, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None = None,
             nulls: int = 0) -> Spec:
    """A binary/string column of ``count`` values over ``offsets`` and ``data`` as a :data:`Spec`;
    ``valid`` (uint8, one per value) is read only when ``nulls``."""
    bitmap = None
    if nulls and valid is not None:
        bitmap = np.packbits(valid[:count].view(bool), bitorder="little")
    return (_BINARY, count, nulls, (bitmap, offsets, data), ())


class _PropertyColumns:
    """The rows' property columns, split and copied in one C pass (``_speedups.property_columns``):
    ``names`` and ``values`` (every row's items in order, ``item_offsets`` per row), ``tags``,
    ``tokens`` (the KEYS tokens, ``token_offsets`` per row) and ``key`` (each row's first token).
    ``keys_only``: only ``tokens`` and ``key`` are made (the others stay None), for a batch that
    wants no other property column: no copy of every property's name and value; ``key_only`` as well:
    only ``key`` (``tokens`` empty), for a batch that wants no ``keys`` list either."""

    def __init__(self, view: memoryview, rows: Rows, keys_only: bool = False, key_only: bool = False) -> None:
        n = len(rows)
        lengths = rows["props_len"]
        total = int(lengths.sum(dtype=np.int64))
        cap = total // 2 + n + 1        # items or tokens at most (each takes a byte and a separator)
        # two allocations, not fourteen (each gives up the GIL: see pooled_together): the buffers of the
        # KEYS columns, and those of the others, which keys_only leaves unused (a kept key column keeps
        # only its own group alive)
        self.token_offsets, keys, tokens, key_valid, tokens_data, keys_data = pooled_together(
            [(n + 1, np.int32), (n + 1, np.int32), (cap + 1, np.int32), (n, np.uint8), (total, np.uint8),
             (total, np.uint8)])
        (self.item_offsets, tags, names, values, tag_valid, names_data, values_data,
         tags_data) = pooled_together([(n + 1, np.int32), (n + 1, np.int32), (cap + 1, np.int32),
                                       (cap + 1, np.int32), (n, np.uint8), *[(total, np.uint8)] * 3])
        data = [names_data, values_data, tags_data, tokens_data, keys_data]
        items, count, tag_nulls, key_nulls = _speedups.property_columns(
            view, rows["props_pos"], lengths, self.item_offsets, names, data[0], values, data[1], tags,
            data[2], tag_valid, self.token_offsets, tokens, data[3], keys, data[4], key_valid, not keys_only,
            not (keys_only and key_only))
        self.items = items
        self.names: Spec | None = None
        self.values: Spec | None = None
        self.tags: Spec | None = None
        if not keys_only:
            self.names = _strings(items, names, data[0])
            self.values = _strings(items, values, data[1])
            self.tags = _strings(n, tags, data[2], tag_valid, tag_nulls)
        self.tokens = _strings(count, tokens, data[3])
        self.key = _strings(n, keys, data[4], key_valid, key_nulls)


def host_text_bound(rows: Rows, which: int) -> int:
    """Bytes that the rows' born host, store host or msgId texts take at most (IPv6 ones are longer).
    The buffer is no larger than needed: its pages are fresh memory every batch."""
    v4, v6 = HOST_TEXT_LONGEST[which]
    bit = SYSFLAG_BORNHOST_V6 if which == BORN_HOST else SYSFLAG_STOREHOST_V6
    wide = int(np.count_nonzero(rows["sys_flag"] & bit))
    return (len(rows) - wide) * v4 + wide * v6


def _host_texts(rows: Rows, which: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows' born host, store host or msgId texts (``_speedups.format_hosts``): offsets and data."""
    n = len(rows)
    offsets, data = pooled_together([(n + 1, np.int32), (host_text_bound(rows, which), np.uint8)])
    rows.require(FILL_HOSTS)
    used = _speedups.format_hosts(rows.i8, rows.i4, rows.u8, n, which, offsets, data)
    return offsets, data[:used]


def _host_column(rows: Rows, which: int) -> Spec:
    offsets, data = _host_texts(rows, which)
    return (_BINARY, len(rows), 0, (None, offsets, data), ())


class JsonWriter:
    """Formats rows as ``dump --json`` lines (``store.JSON_KEYS``, as ``json.dumps(..., ensure_ascii=False)``
    writes them, each ending in a newline) in C, into one buffer reused from batch to batch.  One writer
    per thread (the C loop gives up the GIL while it writes)."""

    def __init__(self) -> None:
        self._out = np.empty(0, np.uint8)

    def lines(self, view: memoryview, rows: Rows, tags_codes: np.ndarray) -> memoryview:
        """The rows' lines (valid until the next call); ``tags_codes``: each row's consume-queue tags code.
        Needs the C accelerator (without it the caller formats message by message)."""
        rows.require(FILL_ALL)
        p = _Properties(view, rows)
        hosts = [part for which in (BORN_HOST, STORE_HOST, MSG_ID) for part in _host_texts(rows, which)]
        args = (view, rows.i8, rows.i4, rows.u8, len(rows), np.ascontiguousarray(tags_codes, dtype=np.int64),
                p.item_offsets, p.names, p.name_lens, p.values, p.value_lens, p.tags, p.tags_lens,
                p.token_offsets, p.tokens, p.token_lens, *hosts)
        used = _speedups.json_lines(*args, self._out)
        if used < 0:
            self._out = np.empty(-used, np.uint8)
            used = _speedups.json_lines(*args, self._out)
        return self._out.data[:used]


class TextWriter:
    """Formats rows as the message lines of the text dump (``RocketMQStore.dump``'s, each ending in a
    newline) in C, into one buffer reused from batch to batch.  One writer per thread."""

    def __init__(self) -> None:
        self._out = np.empty(0, np.uint8)

    def lines(self, view: memoryview, rows: Rows) -> memoryview:
        """The rows' lines (valid until the next call).  Needs the C accelerator (without it the
        caller formats message by message).  ``O(bytes of the rows' bodies)`` (a body is checked
        for UTF-8 whole, as its preview decodes it)."""
        rows.require(FILL_ALL)
        p = _Properties(view, rows)
        args = (view, rows.i8, rows.i4, rows.u8, len(rows), p.tags, p.tags_lens, p.token_offsets, p.tokens,
                p.token_lens)
        used = _speedups.text_lines(*args, self._out)
        if used < 0:
            self._out = np.empty(-used, np.uint8)
            used = _speedups.text_lines(*args, self._out)
        return self._out.data[:used]


@functools.cache
def _fixed_columns() -> dict[str, tuple[str, pa.DataType]]:
    """Columns that are one of the rows' fields: (field, Arrow type)."""
    import pyarrow as pa

    from segstore.columns import TIMESTAMP

    return {
        "partition": ("queue_id", pa.int32()), "offset": ("queue_offset", pa.int64()),
        "timestamp": ("born_timestamp", TIMESTAMP), "position": ("position", pa.int64()),
        "size": ("size", pa.int32()), "bornTimestamp": ("born_timestamp", TIMESTAMP),
        "storeTimestamp": ("store_timestamp", TIMESTAMP), "physicalOffset": ("physical_offset", pa.int64()),
        "sysFlag": ("sys_flag", pa.int32()), "flag": ("flag", pa.int32()),
        "reconsumeTimes": ("reconsume", pa.int32()),
        "bodyCrc": ("body_crc", pa.int32()), "preparedTransactionOffset": ("prepared", pa.int64()),
        "magic": ("magic", pa.int32()),
    }


#: Columns built from the split properties.
_PROPERTY_COLUMNS = frozenset({"key", "tags", "keys", "properties", "headers"})


#: A column's layout as ``_speedups.export_arrays`` takes it (see ``_speedups_arrow.c``): ``(kind, length,
#: null_count, buffers, children)``, kind ``b"f" + width`` (fixed width), ``b"s"`` (binary or string),
#: ``b"l"`` (list or map), ``b"t"`` (struct); buffers numpy arrays (or None: no validity).
Spec = tuple[bytes, int, int, tuple[Any, ...], tuple[Any, ...]]
_BINARY, _LIST, _STRUCT = b"s", b"l", b"t"
_FIXED = {1: b"f\x01", 2: b"f\x02", 4: b"f\x04", 8: b"f\x08"}


def _assembled(kind: pa.DataType, spec: Spec) -> pa.Array:
    """The array ``spec`` lays out, of type ``kind``, by pyarrow's ``from_buffers`` (a call per array:
    the reference of ``_speedups.export_arrays``, which hands the whole batch over in one)."""
    import pyarrow as pa

    _, n, nulls, buffers, children = spec
    if pa.types.is_map(kind):
        keys, items = (_assembled(f.type, child) for f, child in zip((kind.key_field, kind.item_field),
                                                                       children[0][4], strict=True))
        return pa.MapArray.from_arrays(_assembled(pa.int32(), _fixed(buffers[1][:n + 1])), keys, items)
    if pa.types.is_list(kind):
        items = _assembled(kind.value_type, children[0])
        return pa.ListArray.from_arrays(_assembled(pa.int32(), _fixed(buffers[1][:n + 1])), items)
    if pa.types.is_struct(kind):
        fields = list(kind)
        arrays = [_assembled(f.type, child) for f, child in zip(fields, children, strict=True)]
        return pa.StructArray.from_arrays(arrays, fields=fields)
    bitmap = pa.py_buffer(buffers[0]) if nulls else None
    if len(buffers) == 3:       # binary or string: the used part of the data
        offsets = buffers[1][:n + 1]
        data = buffers[2][:int(offsets[n])]
        return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                     null_count=nulls)
    return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(buffers[1])], null_count=nulls)


def _column_specs(view: memoryview, rows: Rows, names: list[str]) -> list[Spec]:
    """The columns ``names`` (of :data:`segstore.columns.ROCKETMQ_SCHEMA`, ``propertiesBytes`` not
    among them) of the rows as :data:`Spec` layouts, their buffers filled by the C calls."""
    fixed = _fixed_columns()
    n = len(rows)
    wanted = set(names)
    p = _PropertyColumns(view, rows, keys_only=not wanted & {"tags", "properties", "headers"},
                         key_only="keys" not in wanted) if wanted & _PROPERTY_COLUMNS else None
    # the body and topic columns, gathered in one pass over the batch's messages
    var: dict[str, _Variable] = {}
    if "value" in wanted:
        var["value"] = _Variable(_kinds()["value"], rows["body_pos"], rows["body_len"])
    repeated = rows.topic is not None and len(rows.topic) * n < 1 << 31      # int32 offsets
    if "topic" in wanted and not repeated:
        var["topic"] = _Variable(_kinds()["topic"], rows["topic_pos"], rows["topic_len"])
    _gather(view, n, list(var.values()))
    built: dict[str, Spec] = {name: column.spec() for name, column in var.items()}
    if "topic" in wanted and repeated:
        built["topic"] = _repeated(cast(bytes, rows.topic), n)
    if p is not None:
        built["key"] = p.key
        if p.tags is not None:
            built["tags"] = p.tags

    columns: list[Spec] = []
    for name in names:
        if name in fixed:
            column = _fixed(rows[fixed[name][0]])
        elif name in ("value", "topic", "key", "tags"):
            column = built[name]
        elif name == "timestampType":
            column = _fixed(np.zeros(n, np.int32))
        elif name == "keys":
            assert p is not None
            column = (_LIST, n, 0, (None, p.token_offsets), (p.tokens,))
        elif name in ("properties", "headers"):     # a map is a list of (key, value) structs
            assert p is not None and p.names is not None and p.values is not None
            pairs = (_STRUCT, p.items, 0, (None,), (p.names, p.values))
            column = (_LIST, n, 0, (None, p.item_offsets), (pairs,))
        elif name in _HOST_COLUMNS:
            column = _host_column(rows, _HOST_COLUMNS[name])
        else:
            raise AssertionError(f"no builder for column {name}")
        columns.append(column)
    return columns


@functools.cache
def _kinds() -> dict[str, pa.DataType]:
    """The Arrow type of each column of :data:`segstore.columns.ROCKETMQ_SCHEMA`."""
    from segstore.columns import ROCKETMQ_SCHEMA

    return {field.name: field.type for field in ROCKETMQ_SCHEMA}


def _build_c(view: memoryview, rows: Rows, schema: pa.Schema) -> list[pa.Array]:
    """The columns of ``schema`` laid out by the C calls and wrapped by pyarrow a call per array (what
    :func:`_exported` hands over in one)."""
    names = [name for name in schema.names if name != "propertiesBytes"]
    made = dict(zip(names, _column_specs(view, rows, names), strict=True))
    return [_stored_properties_column(view, rows) if field.name == "propertiesBytes"
            else _assembled(field.type, made[field.name]) for field in schema]


class _Export(NamedTuple):
    """What :func:`_exported` needs of a schema, worked out once per schema object."""

    schema: pa.Schema      # kept: its id is the key
    names: list[str]       # the columns laid out in C: the schema's but propertiesBytes
    inner: pa.Schema       # those columns' schema
    stored_at: int         # propertiesBytes' place in schema, -1 for none


#: by ``id(schema)``: the schemas of a process are few (the projections scans ask for)
_exports: dict[int, _Export] = {}


def _export_of(schema: pa.Schema) -> _Export:
    found = _exports.get(id(schema))
    if found is not None and found.schema is schema:
        return found
    stored_at = schema.get_field_index("propertiesBytes")
    inner = schema if stored_at < 0 else schema.remove(stored_at)
    found = _Export(schema, inner.names, inner, stored_at)
    if len(_exports) >= 64:
        _exports.clear()
    _exports[id(schema)] = found
    return found


def _exported(view: memoryview, rows: Rows, schema: pa.Schema) -> pa.RecordBatch:
    """:func:`build_batch` with the columns handed to pyarrow in one call (``_speedups.export_arrays``,
    through the Arrow C data interface): the Python a batch took to wrap them (~30 pyarrow calls) ran
    one thread at a time in a scan on several."""
    import pyarrow as pa

    export = _export_of(schema)
    spec = (_STRUCT, len(rows), 0, (None,), tuple(_column_specs(view, rows, export.names)))
    address = _speedups.export_arrays(spec)
    try:
        batch = pa.RecordBatch._import_from_c(address, export.inner)
    finally:
        _speedups.release_arrays(address)     # the struct freed; released too where the import failed
    if export.stored_at >= 0:
        batch = batch.add_column(export.stored_at, schema.field(export.stored_at),
                                 _stored_properties_column(view, rows))
    return batch


def _stored_properties_column(view: memoryview, rows: Rows) -> pa.Array:
    """The ``propertiesBytes`` column: null but for a row :func:`java_row` built (the C walk takes only
    UTF-8 properties), whose stored properties are not UTF-8."""
    import pyarrow as pa

    if rows.view is None:
        return pa.nulls(len(rows), pa.binary())
    return pa.array([stored_properties_of(m.properties) for m in messages(view, rows)], pa.binary())


def messages(view: memoryview, rows: Rows) -> list[RocketMQMessage]:
    """The rows' messages, decoded again one by one (the references' and the rare rows' way)."""
    view = memoryview(view)
    header_sizes = np.array([HEADERS[f & SYSFLAG_HOST_MASK].size for f in rows["sys_flag"].tolist()],
                            np.int64)
    # cast: every row is a message the walk decoded (never a BLANK or the end of a file)
    return cast("list[RocketMQMessage]",
                [decode(view, pos, check_crc=False) for pos in (rows["body_pos"] - header_sizes).tolist()])


def _build_py(view: memoryview, rows: Rows, schema: pa.Schema) -> list[pa.Array]:
    """The reference of the column builders: one :func:`.message.decode` per row, ``pa.array`` per column."""
    import pyarrow as pa

    msgs = messages(view, rows)

    def raw(text: str) -> bytes:      # properties are decoded as Java decodes them: no lone surrogate
        return text.encode("utf-8")

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
        "propertiesBytes": ([stored_properties_of(m.properties) for m in msgs], None),
    }
    columns = []
    for field in schema:
        data, stored_as = values[field.name]
        columns.append(pa.array(data, type=field.type) if stored_as is None
                       else pa.array(data, type=stored_as).view(field.type))
    return columns


def build_batch(view: memoryview, rows: Rows, schema: pa.Schema | None = None, *, exported: bool = True
                ) -> pa.RecordBatch:
    """The rows (from :func:`decode_region` over ``view``) as a batch of ``schema`` (a projection of
    :data:`segstore.columns.ROCKETMQ_SCHEMA`; all of it when None); only its columns are built.
    With the C accelerator, the columns are laid out in C and (``exported``, unless the schema has
    none but ``propertiesBytes`` or the rows are none) handed to pyarrow in one call
    (:func:`_exported`), else wrapped a pyarrow call an array.
    Runtime complexity: ``O(rows + bytes of the variable columns built)``."""
    import pyarrow as pa

    if schema is None:
        from segstore.columns import ROCKETMQ_SCHEMA

        schema = ROCKETMQ_SCHEMA
    if exported and _speedups is not None and len(rows) and schema.names != ["propertiesBytes"]:
        return _exported(view, rows, schema)
    build = _build_c if _speedups is not None else _build_py
    return pa.RecordBatch.from_arrays(build(view, rows, schema), schema=schema)


def rows_of(batch_rows: int) -> Rows:
    """Empty rows for at most ``batch_rows`` messages."""
    return Rows(batch_rows)


# -- the walk -----------------------------------------------------------------------------------

#: Rows per batch, and bytes of the log per batch (so a batch's variable columns stay far below
#: Arrow's 2 GiB int32 offsets; a batch ends after the message crossing it).
BATCH_ROWS = 1 << 16
BATCH_BYTES = 64 << 20
#: Rows per ``scan_arrow`` batch by default.  A batch's columns are new memory (the caller may keep
#: them); the smaller the batch, the more of a dropped batch's memory the pool hands to the next one
#: instead of fresh pages the kernel must zero.  Measured over 1M messages: 64k-row batches faulted
#: in 144 MB of huge pages (system time up to the C decode's own), 16k-row ones 66 MB, for ~0.3 ms
#: more Python per batch.
SCAN_BATCH_ROWS = 1 << 14


class Reach:
    """Where a :func:`walk_file` stopped: ``pos`` (the first record boundary at or after its ``stop``,
    or where the file's data ends) and ``ended`` (True: a BLANK or unwritten zeros ended the file's
    data there, so nothing after it in the file is read)."""

    __slots__ = ("ended", "pos")

    def __init__(self, pos: int) -> None:
        self.pos, self.ended = pos, False


def walk_file(view: memoryview, pos: int, limit: int, base: int, file_size: int, path: str | None, *,
              stop: int | None = None, strict: bool = True, batch_rows: int = BATCH_ROWS,
              batch_bytes: int = BATCH_BYTES, reuse: bool = False, reach: Reach | None = None,
              fill: int = FILL_ALL, zeros_end: Callable[[int], None] | None = None,
              ranges: QueueRanges | None = None) -> Iterator[Rows]:
    """Rows of the messages of one commitlog file from ``pos`` (a record boundary), as ``CommitLog.walk``
    reads them: up to ``limit`` (its written end), those starting before ``stop``, ending at a BLANK
    (which must reach the end of the file) or unwritten zeros.  Yields new :class:`Rows` of at most
    ``batch_rows`` rows / about ``batch_bytes`` bytes of the log each; with ``reuse``, the same
    rows every time (for a caller done with each before asking for the next: no new memory to fault in).

    ``reach`` (when given) is kept up to date with where the walk stands (:class:`Reach`).  ``fill``:
    the groups of fields decoded (:func:`decode_region`).  ``zeros_end(pos)``: called where zeros
    end the walk before ``limit`` (once a file at most, never per record), to raise where data
    follows them (``CommitLog.check_zeros_end``: damage, not the file's unwritten tail).  ``ranges``:
    queue ranges whose entries the rows claim as they are decoded (:func:`decode_region`).

    :raises CorruptDataError: a record :func:`.message.decode` refuses (its own typed error and
        position; with ``strict`` a body CRC mismatch too), a BLANK not reaching the end of the file,
        or what ``zeros_end`` raises.
    """
    stop = limit if stop is None else min(stop, limit)
    reach = reach or Reach(pos)
    reach.pos = pos
    kept: Rows | None = None
    while pos < stop:
        chunk = min(stop, pos + batch_bytes)
        cap = max(1, min(batch_rows, (chunk - pos) // MIN_MESSAGE_SIZE + 1))
        if kept is None or kept.cap < cap:
            rows = Rows(cap)
            if reuse:
                kept = rows
        else:
            rows = kept
        _, pos, status, blank = decode_region(view, pos, chunk, limit, base, rows, strict, fill, ranges)
        odd = java_row(view, pos, limit, base, strict) if status == BAD else None
        reach.pos = pos
        for part in (rows, odd) if odd is not None else (rows,):
            wrong = contradicting(part)
            if wrong is not None:
                at = int(part["position"][wrong])
                why = contradiction(int(part["physical_offset"][wrong]), int(part["queue_id"][wrong]), at)
                if wrong:
                    yield part.select(slice(0, wrong))
                raise CorruptDataError(str(why), path, at - base)
            if len(part):
                yield part
        if odd is not None:     # a message whose properties are not UTF-8: the C walk goes on after it
            pos += int(odd["size"][0])
            reach.pos = pos
            continue
        if status == BAD:
            raise_bad(view, pos, limit, path, strict)
        if status == BLANK and (blank < PREFIX.size or pos + blank != file_size):
            raise CorruptDataError(f"expected a BLANK reaching the end of the file ({file_size - pos} "
                                   f"bytes), found size {blank}", path, pos)
        if status == END and pos < limit and zeros_end is not None:
            zeros_end(pos)
        if status in (BLANK, END):
            reach.ended = True
            return
    if pos >= limit:
        reach.ended = True


#: Bytes of the commitlog per range of a parallel walk (``RocketMQStore._parallel_regions``,
#: ``recovery.walk_batches``), and ranges per thread in a round: what a round holds stays small
#: enough for the memory pool to hand the next round the pages of the last (measured on 200k
#: messages: 2 MiB, 1 a thread: 10% more CPU than one thread's walk and no page faults; 4 MiB,
#: 2 a thread: 40% more, 100 times the faults).
SPLIT_BYTES = 2 << 20
PER_ROUND = 1

#: The bytes a plausible message header needs: its TOTALSIZE, MAGICCODE ... PHYSICALOFFSET.
_HEADER_PREFIX = 36
_PHYSICAL_OFFSET_AT = 28
_MAGICS = tuple(np.frombuffer(PREFIX.pack(0, magic)[4:], np.uint8)
                for magic in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2))
#: The magics' distinct first bytes: where :func:`next_boundary` looks further.
_MAGIC_FIRST = sorted({int(magic[0]) for magic in _MAGICS})


def next_boundary(view: memoryview, pos: int, limit: int, base: int) -> int:
    """The first position in ``[pos, limit)`` where a message header plausibly starts: a message magic
    and a PHYSICALOFFSET equal to the position (``base + p``), the sync mark by which a parallel
    walk splits a file; ``limit`` when there is none.  A guess: a body may hold those bytes, so a
    split walk takes a boundary only where the walk before it ended (:class:`Reach`).
    ``O(bytes searched)``, in C (``_speedups.next_boundary``: one call, the GIL given up only past
    the first 64 KiB; the reference's twenty numpy calls gave it up twenty times a range, each time
    waiting for it back behind the other threads' Python) or :func:`next_boundary_py`.  Thread-safe.
    """
    if _speedups is not None:
        return int(_speedups.next_boundary(view, pos, limit, base))
    return next_boundary_py(view, pos, limit, base)


def next_boundary_py(view: memoryview, pos: int, limit: int, base: int) -> int:
    """The reference of :func:`next_boundary`, in numpy, searching a window that doubles from 4 KiB:
    one compare per byte with the magics' first byte, the rest only where it matched (a range of
    zeros past a crashed file's data is searched whole: eight compares a byte and their masks cost
    60M instructions per 2 MiB)."""
    window = 4 << 10
    size = len(view)
    while pos < limit:
        span = min(limit, size - _HEADER_PREFIX + 1) - pos     # where a whole header may start
        span = min(span, window)
        if span <= 0:
            return limit
        data = np.frombuffer(view[pos:pos + span + _HEADER_PREFIX - 1], np.uint8)
        first = data[4:4 + span] == _MAGIC_FIRST[0]
        for byte in _MAGIC_FIRST[1:]:
            first |= data[4:4 + span] == byte
        candidates = np.flatnonzero(first)
        hits = np.zeros(len(candidates), bool)
        for magic in _MAGICS:
            hit = data[4 + candidates] == magic[0]
            for k in range(1, 4):
                hit &= data[4 + k + candidates] == magic[k]
            hits |= hit
        for at in candidates[hits].tolist():
            field = data[at + _PHYSICAL_OFFSET_AT:at + _PHYSICAL_OFFSET_AT + 8].tobytes()
            if int.from_bytes(field, "big", signed=True) == base + pos + at:
                return pos + at
        pos += span
        window *= 2
    return limit


def topic_is(view: memoryview, rows: Rows, topic: str) -> np.ndarray:
    """Per row, whether its topic is ``topic`` (bool array), without building the topic column.  A
    ``topic`` holding a lone surrogate (``--topic`` given bytes that are not UTF-8, as ``os.fsdecode``
    reads them) is no row's: the broker reads a stored topic as ``new String(bytes, UTF_8)``, which
    never holds one."""
    try:
        wanted = topic.encode("utf-8")
    except UnicodeEncodeError:
        return np.zeros(len(rows), bool)
    same = rows["topic_len"] == len(wanted)
    if not wanted or not same.any():
        return same
    if _speedups is None:
        view = memoryview(view)
        places = zip(rows["topic_pos"].tolist(), same.tolist(), strict=True)
        return np.array([ok and bytes(view[p:p + len(wanted)]) == wanted for p, ok in places], dtype=bool)
    starts = rows["topic_pos"][same]
    data = np.empty(len(starts) * len(wanted), np.uint8)
    _speedups.gather(view, starts, np.full(len(starts), len(wanted), np.int32),
                     np.empty(len(starts) + 1, np.int32), data)
    same[same] = (data.reshape(len(starts), len(wanted)) == np.frombuffer(wanted, np.uint8)).all(axis=1)
    return same


class QueueEntries(NamedTuple):
    """The consume-queue entries of a read's queue ranges, sorted by position, as :func:`match_entries`
    checks a walk's rows against them.  ``phys``: the positions, ascending; ``order``: each one's index
    among the ranges' entries one range after another, where range ``r`` holds those from ``bounds[r]``
    to ``bounds[r + 1]``, of slot ``part_slots[r]`` (the read's ``queues`` index) from queue offset
    ``part_firsts[r]`` on; ``sizes``: their message sizes, in position order as ``phys`` (all int64).  Per
    slot its ``queue_ids`` (int64) and topic ``topic_data[topic_offsets[slot]:topic_offsets[slot + 1]]``
    (UTF-8).  No per-entry queue offset or slot is stored: 24 bytes per entry."""

    phys: np.ndarray
    order: np.ndarray
    sizes: np.ndarray
    bounds: np.ndarray
    part_slots: np.ndarray
    part_firsts: np.ndarray
    queue_ids: np.ndarray
    topic_offsets: np.ndarray
    topic_data: bytes

    def columns(self, at: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The message sizes, queue offsets and slots of the sorted entries ``at``."""
        order = self.order[at]
        part = np.searchsorted(self.bounds, order, side="right") - 1
        return self.sizes[at], self.part_firsts[part] + order - self.bounds[part], self.part_slots[part]


def merge_entries(positions: np.ndarray, sizes: np.ndarray, bounds: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(phys, order, sorted sizes)``: the order that sorts ``positions`` (int64) stably, numpy's stable
    argsort's, and ``positions`` and ``sizes`` (int64) in that order (:class:`QueueEntries`' first three).
    Where the positions are ranges one after another (range ``r`` from ``bounds[r]`` to ``bounds[r + 1]``),
    each ascending as a queue's entries do, one C merge of the ranges writes all three into the Arrow
    pool (no sort, no gather after it, no fresh memory to fault in: ``O(n log ranges)``); else (a
    damaged queue, or no C) the sort and two gathers."""
    if _speedups is not None:
        order, phys, ordered = (pooled(len(positions), np.int64) for _ in range(3))
        if _speedups.merge_order(positions, np.ascontiguousarray(bounds, dtype=np.int64), order, sizes, phys,
                                 ordered):
            return phys, order, ordered
    order = np.argsort(positions, kind="stable")
    return positions[order], order, sizes[order]


def match_entries_py(view: memoryview, rows: Rows, entries: QueueEntries, first: int, last: int,
                     met: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """The reference of :func:`match_entries` (numpy, a Python comparison per matched row's topic)."""
    phys, topic_offsets, topic_data = entries.phys, entries.topic_offsets, entries.topic_data
    walked = rows["position"]
    at = np.searchsorted(walked, phys[first:last])
    at[at >= len(walked)] = 0
    met_here = np.flatnonzero(walked[at] == phys[first:last])
    hit, want = at[met_here], first + met_here
    sizes, offsets, slots = entries.columns(want)
    wrong = ((rows["size"][hit] != sizes) | (rows["queue_id"][hit] != entries.queue_ids[slots])
             | (rows["queue_offset"][hit] != offsets))
    view = memoryview(view)
    for k, (row, slot) in enumerate(zip(hit.tolist(), slots.tolist(), strict=True)):
        start, length = int(rows["topic_pos"][row]), int(rows["topic_len"][row])
        topic = topic_data[topic_offsets[slot]:topic_offsets[slot + 1]]
        wrong[k] |= bytes(view[start:start + length]) != topic
    bad = int(np.argmax(wrong)) if wrong.any() else len(hit)
    met[want[:bad]] = True
    hits = hit[:bad].astype(np.int64)
    identity = bad == len(walked) and bool((hits == np.arange(bad)).all())
    return hits, int(want[bad]) if bad < len(hit) else -1, identity


def match_entries(view: memoryview, rows: Rows, entries: QueueEntries, first: int, last: int,
                  met: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """Match the entries ``first:last`` (:class:`QueueEntries`) with a walk's ``rows`` over ``view``
    (both ascend in position): an entry at a row's position must be that row's message (its size, its
    queue offset, its slot's queue id and topic); an entry at no row's position is passed over (unmet).
    Returns ``(hits, wrong, identity)``: the row of each matched entry in entry order up to the first
    that fails the check, that entry (-1: none), and whether the hits are every row once in order (the
    rows need no selection); sets ``met[j]`` (bool) for each matched entry before ``wrong``.
    ``O(rows + entries)`` in C (one merge of the two ascending lists).
    """
    if _speedups is None:
        return match_entries_py(view, rows, entries, first, last, met)
    hits = pooled(max(0, last - first), np.int64)
    count, wrong, identity = _speedups.match_entries(
        view, rows["position"], rows["size"], rows["queue_id"], rows["queue_offset"], rows["topic_pos"],
        rows["topic_len"], entries.phys, entries.order, entries.sizes, entries.bounds, entries.part_slots,
        entries.part_firsts, first, last, entries.queue_ids, entries.topic_offsets, entries.topic_data, met,
        hits)
    return hits[:count], wrong, identity


class QueueRanges(NamedTuple):
    """The consume-queue entries of a read's queue ranges one range after another, as
    :func:`claim_entries` checks a walk's rows against them: range ``r`` holds ``positions`` and
    ``sizes`` (int64) from ``bounds[r]`` to ``bounds[r + 1]``, of slot ``part_slots[r]`` from queue
    offset ``part_firsts[r]`` on; the slots' ``queue_ids``, ``topic_offsets`` and ``topic_data`` as
    :class:`QueueEntries` has them (which :meth:`merged` makes of them)."""

    positions: np.ndarray
    sizes: np.ndarray
    bounds: np.ndarray
    part_slots: np.ndarray
    part_firsts: np.ndarray
    queue_ids: np.ndarray
    topic_offsets: np.ndarray
    topic_data: bytes

    def claimable(self) -> bool:
        """Whether :func:`claim_entries` applies: each range ascends and no two ranges are of one queue
        (``O(entries)`` in numpy)."""
        queues = {(int(self.queue_ids[s]), self.topic_data[self.topic_offsets[s]:self.topic_offsets[s + 1]])
                  for s in self.part_slots.tolist()}
        if len(queues) != len(self.part_slots):
            return False
        descents = np.flatnonzero(self.positions[1:] < self.positions[:-1]) + 1
        return bool(np.isin(descents, self.bounds).all())

    def merged(self) -> QueueEntries:
        """The entries sorted by position (:func:`merge_entries`), as :func:`match_entries` takes them."""
        phys, order, sizes = merge_entries(self.positions, self.sizes, self.bounds)
        return QueueEntries(phys, order, sizes, self.bounds, self.part_slots, self.part_firsts,
                            self.queue_ids, self.topic_offsets, self.topic_data)


def claim_entries_py(view: memoryview, rows: Rows, ranges: QueueRanges, cursors: np.ndarray, met: np.ndarray
                     ) -> tuple[np.ndarray, int, bool]:
    """The reference of :func:`claim_entries` (a Python loop over the rows)."""
    view = memoryview(view)
    slots = {(int(ranges.queue_ids[s]),
              ranges.topic_data[ranges.topic_offsets[s]:ranges.topic_offsets[s + 1]]): r
             for r, s in enumerate(ranges.part_slots.tolist())}
    bounds = ranges.bounds.tolist()
    hits = []
    for i in range(len(rows)):
        start, length = int(rows["topic_pos"][i]), int(rows["topic_len"][i])
        r = slots.get((int(rows["queue_id"][i]), bytes(view[start:start + length])))
        if r is None:
            continue
        k = int(rows["queue_offset"][i]) - int(ranges.part_firsts[r])
        if not 0 <= k < bounds[r + 1] - bounds[r]:
            continue
        o = bounds[r] + k
        if ranges.positions[o] == rows["position"][i] and ranges.sizes[o] == rows["size"][i]:
            met[o] = True
            hits.append(i)
    passed = 0
    if len(rows):
        last = int(rows["position"][-1])
        for r in range(len(bounds) - 1):
            ahead = int(np.searchsorted(ranges.positions[cursors[r]:bounds[r + 1]], last, side="right"))
            passed += ahead
            cursors[r] += ahead
    return np.array(hits, np.int64), passed, len(hits) == len(rows)


def claim_entries(view: memoryview, rows: Rows, ranges: QueueRanges, cursors: np.ndarray, met: np.ndarray
                  ) -> tuple[np.ndarray, int, bool]:
    """Claim for each of a walk's ``rows`` over ``view`` (ascending in position) the entry of its queue
    offset in the range of its queue (:class:`QueueRanges`, :meth:`~QueueRanges.claimable`), where that
    entry lies at the row's position with the row's size; a row no range holds is not read.  Each range's
    cursor (``cursors[r]``, int64, an index into the entries) passes over its entries at or before the
    last row's position.  Returns ``(hits, passed, identity)``: the claiming rows in order, how many
    entries the cursors passed, and whether every row claimed one; sets ``met[o]`` (bool) for each entry
    claimed.  ``len(hits) == passed``: every entry passed was claimed, so :func:`match_entries` of those
    entries finds the same hits and nothing wrong or unmet; else the caller asks it what is wrong.
    ``O(rows + entries passed)`` in C (no merge of the ranges).  Rows whose decode claimed their
    entries (:attr:`Rows.claims`, from the same ``ranges``) are not read again: 82 -> 16 instructions a
    row of ``bench_spark``'s value query, plus ~45 in the decode (2026-12-02, cachegrind).
    """
    if _speedups is None:
        return claim_entries_py(view, rows, ranges, cursors, met)
    hits = pooled(len(rows), np.int64)
    count, passed, identity = _speedups.claim_entries(
        view, rows["position"], rows["size"], rows["queue_id"], rows["queue_offset"], rows["topic_pos"],
        rows["topic_len"], ranges.positions, ranges.sizes, ranges.bounds, ranges.part_slots,
        ranges.part_firsts, ranges.queue_ids, ranges.topic_offsets, ranges.topic_data, cursors, met, hits,
        *(() if rows.claims is None else (rows.claims,)))
    return hits[:count], passed, identity


# -- what the consume queues and the IndexFile need ------------------------------------------


def tags_hashes(view: memoryview, rows: Rows) -> np.ndarray:
    """Per row, the Java hash of its TAGS (0 without or empty): a plain message's consume-queue tags code
    (the store applies the delay-message rule on top)."""
    tags = np.empty(len(rows), np.int64)
    if _speedups is not None:
        _speedups.tags_hashes(view, rows["props_pos"], rows["props_len"], tags)
        return tags
    for i, msg in enumerate(messages(view, rows)):
        tags[i] = string_hash(msg.tags) if msg.tags else 0
    return tags


def index_entries(view: memoryview, rows: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, how many IndexFile entries the broker puts for it, and their index hashes in order
    (``indexfile.index_keys``: topic#UNIQ_KEY, then topic#token for each KEYS token); and per row
    the Java hash of its TAGS (:func:`tags_hashes`), found in the same pass over the properties."""
    n = len(rows)
    counts = pooled(n, np.int32)
    if _speedups is not None:
        tags = pooled(n, np.int64)
        for cap in (3 * n + 16, int(rows["props_len"].sum(dtype=np.int64)) // 2 + n + 1):
            hashes = pooled(cap, np.int64)
            total = _speedups.index_entries(view, rows["topic_pos"], rows["topic_len"], rows["props_pos"],
                                            rows["props_len"], rows["sys_flag"], counts, hashes, tags)
            if total >= 0:
                return counts, hashes[:total], tags
    keys: list[str] = []
    for i, msg in enumerate(messages(view, rows)):
        props = msg.properties
        mine = index_keys(IndexRequest(msg.topic, msg.physical_offset, msg.store_timestamp,
                                       props.get(PROPERTY_UNIQ_KEY), props.get(PROPERTY_KEYS), msg.sys_flag))
        counts[i] = len(mine)
        keys.extend(mine)
    return counts, index_key_hashes(keys), tags_hashes(view, rows)


def topic_codes(view: memoryview, rows: Rows, codes: dict[str, int]) -> np.ndarray:
    """Per row, its topic's number in ``codes`` (topic -> number; new topics are added), int32.

    The C path numbers the batch's topics where they lie (``_speedups.topic_codes``: one
    comparison per row while the topic stays the same) and decodes each distinct topic once.
    """
    n = len(rows)
    if _speedups is None:
        return np.array([codes.setdefault(m.topic, len(codes)) for m in messages(view, rows)], np.int32)
    if not n:
        return np.zeros(0, np.int32)
    local = pooled(n, np.int32)
    firsts = _speedups.topic_codes(view, rows["topic_pos"], rows["topic_len"], local)
    return TopicNumbers(local, np.array(firsts, np.int64)).codes(view, rows, n, codes)
