"""The fast path of a RocketMQ batch append: plain messages encoded and placed in one call.

A *plain* append item is an exact ``dict`` whose keys are among
:data:`PLAIN_FIELDS`, with ``topic`` an exact ``str``, ``queue_id`` an ``int`` in
``[0, MAX_QUEUE_ID]`` (or absent/None), ``body`` ``bytes`` (or absent/None), ``tags`` a
``str``, ``keys`` a ``str`` or a list/tuple of ``str`` (text without the property
separators 0x01/0x02, UTF-8 encodable), ``born_timestamp``/``store_timestamp``
64-bit ``int``, ``flag`` a 32-bit ``int``, ``properties`` absent, None or ``{}``,
and a stored size within the limit.  Such a message needs none of the broker's
put-time rules beyond the ones applied here: the properties are ``TAGS`` and
``KEYS`` in Java ``HashMap`` order, both hosts are the store host, sysFlag holds
only the host bits, and the consume-queue tags code is the tag's hash.  Anything
else (hosts, delay levels, transactions, user properties, :class:`Message`
objects, an oversized or out-of-range field) goes through the store's general
path, which also raises the typed errors.

:func:`encode_plain` is ``segstore_rocketmq._speedups.encode_plain`` (C) when the
extension is built, else :func:`encode_plain_py`, which builds each message and
writes it with the reference encoder (:func:`.message.encode`) and places the batch
with the one BLANK rule (:func:`.commitlog.place`); the C function is tested equal
to it byte for byte.  Both return the same values:

- ``None``: an item is not plain;
- a ``str``: the first item's topic missing from ``topic_fields`` (validate it,
  add its encoded field, call again);
- otherwise ``(data, blanks, results, cq_rows, queues, index, end)``:
  ``data`` every message's bytes back to back (a bytearray; None when they were
  written into ``dest``, a writable buffer whose byte ``dest_start`` is physical
  offset ``start``, which happens when it is given and the batch fits in it with
  no BLANK), ``blanks`` the
  ``(physical offset, size)`` BLANK records placed before the messages that open
  a new file, ``results`` one :class:`AppendResult` per item, ``cq_rows`` the
  consume-queue entries (:data:`CQ_DTYPE`) grouped by queue, ``queues`` one
  ``((topic, queue_id), first row, rows)`` per queue in first-appearance order,
  ``index`` three native int64 columns (index hashes, physical offsets, store
  times) of the ``topic#key`` entries in the broker's order, ``end`` the physical
  offset after the batch.  Nothing passed in is changed (``next_offsets`` only
  read: the store advances its queues when it writes the batch).

:func:`encode_batch` asks a store (any :class:`PlainTarget`) for what the encoding
needs and returns a :class:`PlainBatch`; the store writes it.

Thread-safety: pure functions; the store serialises its appends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any, NamedTuple, Protocol

import numpy as np

from segstore import files, speedups
from segstore.errors import InvalidMessageError
from segstore.store import AppendResult

from .commitlog import CommitLog, place
from .config import BrokerConfig
from .consumequeue import CQ_DTYPE
from .flush import ASYNC_FLUSH, FlushService
from .indexfile import build_key, index_key_hash
from .javacompat import hashmap_order, string_hash
from .message import (
    END_FILE_MIN_BLANK_LENGTH,
    KEY_SEPARATOR,
    MAX_QUEUE_ID,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    Host,
    RocketMQMessage,
    encode,
    encode_properties,
    encoded_size,
    host_flags,
    msg_id,
)

# Built without a C compiler (or SEGSTORE_PURE_PYTHON=1): the pure-Python reference below.
_speedups = speedups.load("segstore_rocketmq._speedups")

#: Keys a plain append dict may carry.
PLAIN_FIELDS = frozenset({"topic", "queue_id", "body", "tags", "keys", "born_timestamp", "store_timestamp",
                          "flag", "properties"})
#: Whether Java's HashMap iterates KEYS before TAGS (the broker's properties order).
KEYS_FIRST = hashmap_order([PROPERTY_TAGS, PROPERTY_KEYS])[0] == PROPERTY_KEYS
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
#: Columns of the ``index`` part: hashes, physical offsets, store times.
INDEX_COLUMNS = 3


class _NotPlain(Exception):
    """An item the fast path does not take (internal to :func:`encode_plain_py`)."""


def _int(value: Any, default: int, lo: int, hi: int) -> int:
    if value is None:
        return default
    if type(value) is not int or not lo <= value <= hi:
        raise _NotPlain
    return value


def _text(value: Any) -> str:
    if type(value) is not str or NAME_VALUE_SEPARATOR in value or PROPERTY_SEPARATOR in value:
        raise _NotPlain
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _NotPlain from None
    return value


def _plain(item: Any, topic_fields: Mapping[str, bytes], store_ts: int, host: Host,
           limit: int, trailing: bool = False) -> RocketMQMessage | str:
    """The message of a plain item (its size set, not yet encoded), or its topic if unknown."""
    if type(item) is not dict or not item.keys() <= PLAIN_FIELDS:
        raise _NotPlain
    props = item.get("properties")
    if props is not None and not (type(props) is dict and not props):
        raise _NotPlain
    topic = item.get("topic")
    if type(topic) is not str:
        raise _NotPlain
    topic_field = topic_fields.get(topic)
    if topic_field is None:
        return topic
    queue_id = _int(item.get("queue_id"), 0, 0, MAX_QUEUE_ID)
    body = item.get("body")
    if body is None:
        body = b""
    elif type(body) is not bytes:
        raise _NotPlain
    produced: dict[str, str] = {}
    tags = item.get("tags")
    if tags is not None:
        if type(tags) is not str:
            raise _NotPlain
        if tags:
            produced[PROPERTY_TAGS] = _text(tags)
    keys = item.get("keys")
    if type(keys) is str:
        if keys:
            produced[PROPERTY_KEYS] = _text(keys)
    elif type(keys) is list or type(keys) is tuple:
        joined = KEY_SEPARATOR.join([_text(k) for k in keys])
        if joined:      # [""]: no KEYS, as the general path (RocketMQStore._build)
            produced[PROPERTY_KEYS] = joined
    elif keys is not None:
        raise _NotPlain
    stored = _int(item.get("store_timestamp"), store_ts, INT64_MIN, INT64_MAX)
    born = _int(item.get("born_timestamp"), stored, INT64_MIN, INT64_MAX)
    flag = _int(item.get("flag"), 0, INT32_MIN, INT32_MAX)
    if len(produced) > 1 and KEYS_FIRST:
        produced = {PROPERTY_KEYS: produced[PROPERTY_KEYS], PROPERTY_TAGS: produced[PROPERTY_TAGS]}
    try:
        properties_len = len(encode_properties(produced, trailing))
    except InvalidMessageError:
        raise _NotPlain from None
    msg = RocketMQMessage(topic, queue_id, body, produced, flag, born_timestamp=born, born_host=host,
                          store_timestamp=stored, store_host=host, trailing_separator=trailing)
    msg.sys_flag = host_flags(host, host)
    msg.size = encoded_size(len(body), len(topic_field), properties_len, msg.sys_flag)
    if msg.size > limit:
        raise _NotPlain
    return msg


def encode_plain_py(items: list, topic_fields: dict[str, bytes], next_offsets: Mapping[tuple[str, int], int],
                    keys_first: bool, store_ts: int, store_ip: bytes, store_port: int, start: int,
                    file_size: int, limit: int, with_index: bool, dest: Any = None,
                    trailing: bool = False, dest_start: int = 0) -> Any:
    """The pure-Python reference of the C ``encode_plain`` (see the module docstring)."""
    if keys_first != KEYS_FIRST:
        raise ValueError(f"expected keys_first={KEYS_FIRST} (Java HashMap order), found {keys_first}")
    host = Host(store_ip, store_port)
    limit = min(limit, file_size - END_FILE_MIN_BLANK_LENGTH)
    msgs = []
    for item in items:
        try:
            msg = _plain(item, topic_fields, store_ts, host, limit, trailing)
        except _NotPlain:
            return None
        if isinstance(msg, str):
            return msg
        msgs.append(msg)
    slots: dict[tuple[str, int], int] = {}
    bases: list[int] = []
    counts: list[int] = []
    for msg in msgs:
        key = (msg.topic, msg.queue_id)
        if key not in slots:
            base = next_offsets.get(key, 0)
            if type(base) is not int or base < 0:
                raise TypeError("next_offsets values must be ints >= 0")
            slots[key] = len(bases)
            bases.append(base)
            counts.append(0)
        counts[slots[key]] += 1
    firsts = list(accumulate(counts[:-1], initial=0))
    queues = [(key, firsts[s], counts[s]) for key, s in slots.items()]
    seen = [0] * len(bases)
    cq = np.zeros(len(msgs), dtype=CQ_DTYPE)
    data = bytearray()
    results = []
    index: list[tuple[int, int, int]] = []
    placement = place(start, [msg.size for msg in msgs], file_size)
    for msg, pos in zip(msgs, placement.offsets, strict=True):
        s = slots[(msg.topic, msg.queue_id)]
        msg.queue_offset = bases[s] + seen[s]
        msg.physical_offset = pos
        tags = msg.properties.get(PROPERTY_TAGS)
        cq[firsts[s] + seen[s]] = (pos, msg.size, string_hash(tags) if tags else 0)
        seen[s] += 1
        data += encode(msg)
        keys = msg.properties.get(PROPERTY_KEYS)
        if with_index and keys:
            index.extend((index_key_hash(build_key(msg.topic, k)), pos, msg.store_timestamp)
                         for k in keys.split(KEY_SEPARATOR) if k)
        results.append(AppendResult(msg.topic, msg.queue_id, msg.queue_offset, pos, msg.size,
                                    {"msg_id": msg_id(host, pos), "store_timestamp": msg.store_timestamp}))
    columns = np.array(index, dtype=np.int64).reshape(-1, INDEX_COLUMNS).T
    encoded: bytearray | None = data    # None: encoded straight into ``dest``
    if not 0 <= dest_start <= (dest_start if dest is None else len(dest)):
        raise ValueError("expected dest_start within dest")
    if dest is not None and not placement.blanks and \
            len(data) + END_FILE_MIN_BLANK_LENGTH <= len(dest) - dest_start:
        dest[dest_start:dest_start + len(data)] = data
        encoded = None
    return (encoded, placement.blanks, results, bytearray(cq.tobytes()), queues, bytearray(columns.tobytes()),
            placement.end)


if _speedups is not None:
    _speedups.init(AppendResult)
    encode_plain = _speedups.encode_plain
else:
    encode_plain = encode_plain_py



def file_chunks(data: bytearray | memoryview, start: int, blanks: list[tuple[int, int]]
                ) -> tuple[list[memoryview], list[int], list[int]]:
    """``data`` cut where BLANKs open a new file: (chunks, their physical offsets, their sizes).

    The form :meth:`CommitLog.write_batch` takes, one chunk per file touched.
    """
    view = memoryview(data)
    chunks, offsets = [], []
    done = 0
    phys = start
    for blank_pos, blank_size in blanks:
        n = blank_pos - phys
        chunks.append(view[done:done + n])
        offsets.append(phys)
        done += n
        phys = blank_pos + blank_size
    chunks.append(view[done:])
    offsets.append(phys)
    return chunks, offsets, [len(c) for c in chunks]


class PlainTarget(Protocol):
    """What :func:`encode_batch` reads of a store (all read-only here)."""

    @property
    def commitlog(self) -> CommitLog: ...
    config: BrokerConfig

    @property
    def store_host(self) -> Host: ...

    @property
    def trailing_separator(self) -> bool: ...

    @property
    def indexed(self) -> bool: ...

    @property
    def plain_topic_fields(self) -> Mapping[str, bytes]: ...

    @property
    def next_offsets(self) -> Mapping[tuple[str, int], int]: ...

    def plain_topic_field(self, topic: str) -> bytes | None: ...


class PlainBatch(NamedTuple):
    """An encoded batch of plain messages, placed from ``start`` (see the module docstring).

    The fields are :func:`encode_plain`'s return values in its order, then ``start``: a batch is
    that tuple, taken as it is (a single append is about 10 us of Python; a copy into numpy
    arrays or a constructor call per batch is a measurable part of it).
    """

    data: bytearray | memoryview | None     # None: already in the active file (``written in place``)
    blanks: list[tuple[int, int]]
    results: list[AppendResult]
    cq_rows: bytearray | memoryview     # packed CQ_DTYPE rows, grouped by queue (see ``queues``)
    queues: list[tuple[tuple[str, int], int, int]]
    index_entries: bytearray | memoryview   # three native int64 columns: hashes, physical offsets, times
    end: int
    start: int

    def write(self, commitlog: CommitLog) -> None:
        """Write the messages and BLANKs into ``commitlog`` (whose end is still ``start``)."""
        if self.data is None:                   # encoded straight into the active file
            commitlog.written_in_place(self.end - self.start)
        else:
            chunks, offsets, sizes = file_chunks(self.data, self.start, self.blanks)
            commitlog.write_batch(self.start, chunks, offsets, self.blanks, sizes)

    def index_columns(self) -> tuple[memoryview, memoryview, memoryview]:
        """The key-index entries: (hashes, physical offsets, store times), ``q`` memoryviews."""
        entries = memoryview(self.index_entries).cast("q")
        n = len(entries) // INDEX_COLUMNS
        return entries[:n], entries[n:2 * n], entries[2 * n:]


_new_batch = tuple.__new__     # PlainBatch from encode_plain's tuple without a Python-level __new__


def encode_batch(store: PlainTarget, items: list, now: int) -> PlainBatch | None:
    """``items`` encoded and placed at the end of ``store``'s commitlog if every one is plain; None
    otherwise.  Changes nothing of the store but (when the batch fits the active file) bytes past
    its data end, which it does not count as written until the store writes the batch.

    Runtime complexity: ``O(n)`` in C, plus one Python step per topic not seen before.
    """
    commitlog = store.commitlog
    config = store.config
    host = store.store_host
    start = commitlog.end
    # the active file's map up to its reserved blocks (in place only there: past them a full disk
    # would kill the process with SIGBUS) and the data end in it; encode_plain holds the buffer
    # only while it runs, and the view is released before this returns
    mapped, dest_start = commitlog.unwritten_map()
    dest = None if mapped is None else memoryview(mapped)[:commitlog.reserved_end()]
    try:
        while True:
            # the C encoder checks whole sizes only: one above maxMessageSize (its body may be larger
            # than that) is not plain, and the general path checks body and size as the broker does
            out = encode_plain(items, store.plain_topic_fields, store.next_offsets, KEYS_FIRST, now, host.ip,
                               host.port, start, config.mappedFileSizeCommitLog, config.maxMessageSize,
                               store.indexed, dest, store.trailing_separator, dest_start)
            if not isinstance(out, str):
                break
            # raises InvalidTopicError for a topic the broker refuses; None: a v2 topic, which only
            # the general path writes
            if store.plain_topic_field(out) is None:
                return None
    finally:
        if dest is not None:
            dest.release()
    if out is None:
        return None
    return _new_batch(PlainBatch, (*out, start))


class AppenderTarget(PlainTarget, Protocol):
    """What :func:`appender` reads of a store besides a :class:`PlainTarget`'s (the C ``Appender`` reads
    them again at every call: ``queues``, ``_next_offsets``, ``_plain_topics``, ``_trailing_separator``,
    ``indexes``)."""

    index: Any
    topic_configs: Any
    _clock: Callable[[], int]


def appender(store: AppenderTarget, flusher: FlushService, wall_clock: Callable[[], int]) -> Any:
    """The store's common appends in one C call each (``_speedups.Appender``): ``append(item)`` returns an
    :class:`AppendResult`, ``append_batch(items)`` (a list) their list, or None where the common path
    does not take the item or every item of the batch (nothing changed: the store's general path
    appends them).  None when there is no C extension, or in ``SYNC_FLUSH`` (an append waits for its
    sync there: the general path's group commit).  ``wall_clock``: the store's default clock, which
    the C path reads itself (``time.time_ns() // 10**6``).

    A call does what :func:`encode_batch` and the store's ``_write_plain`` do for the same items, with
    the same bytes (tests/test_rocketmq_speedups.py holds it equal to the pure-Python path, store files
    byte for byte), writing the messages, their consume-queue entries and index entries through the
    files' maps within their reserved blocks.
    """
    if _speedups is None or flusher.policy.flush_disk_type != ASYNC_FLUSH:
        return None
    host = store.store_host
    clock = None if store._clock is wall_clock else store._clock
    # maxMessageSize as the whole size the C path takes: see encode_batch
    return _speedups.Appender(store, store.commitlog, flusher, store.index, clock, store.topic_configs,
                              host.ip, host.port, KEYS_FIRST, store.config.mappedFileSizeCommitLog,
                              store.config.maxMessageSize, files.WRITEBACK_BYTES)
