"""The fast path of a Kafka batch append: plain dicts grouped, encoded and answered in C.

A *plain* append item is an exact ``dict`` whose keys are among
:data:`PLAIN_FIELDS`, with ``topic`` an exact ``str`` and ``value`` present,
``partition`` an exact ``int`` in ``[0, 2**31)`` (absent: see below), ``key`` and
``value`` None, ``bytes`` or a UTF-8 encodable ``str``, ``timestamp`` an exact
``int`` from -1 to int64's largest (absent or -1: the append's time, as
:meth:`KafkaStore.append_batch` stamps it; below -1 refused by the general path),
``headers`` absent, None or a list/tuple of 2-item lists/tuples of a UTF-8 encodable
``str`` and a key/value-like value.  A :class:`Message` (exactly) whose fields are so is plain too (its
``offset`` and ``timestamp_type`` are not written: the log assigns both).  Such an
item means exactly what :meth:`segstore.records.Message.coerce` makes of it;
anything else (another field, another type) goes through the store's general
path, which raises the typed errors.

The steps, each one C call over all the items (``segstore_kafka._speedups``)
or its pure-Python reference here (``SEGSTORE_PURE_PYTHON=1`` or no compiler;
tested equal to C with hypothesis):

- :func:`plain_groups`: None when an item is not plain, else one
  ``(topic, partition, rows, bound, routed)`` per partition in first-seen order:
  ``rows`` the items' indices (int64), ``bound`` an upper bound of the records'
  encoded size (None: too large for one batch, the general path decides),
  ``routed`` the first item whose key chose the partition (-1: none), and a
  snapshot of what it read (C: the items' fields held, so they are not read
  twice).  A dict naming no partition is in partition 0, or, with a key (not
  None) and a topic of more than one partition (``widths``), in the one the
  Java producer's partitioner gives its key (:mod:`.partitioner`);
- :func:`plain_bounds`: each item's size bound, where a group is too large for
  one batch (the append cuts it into several);
- :func:`encode_plain`: one RecordBatch v2 of a group's items, byte for byte
  :func:`.batch.encode_batch` of the same records (``header`` as
  :func:`.arrowencode.header_fields`);
- :func:`plain_results`: the :class:`AppendResult` of each item, into the
  results list at its index (a batch's results share one ``extra`` dict, as they
  share its segment).

Thread-safety: pure functions over the caller's items (which must not change
meanwhile); the store serialises its appends.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from segstore import speedups
from segstore.records import Message
from segstore.store import AppendResult

from . import batch as codec
from . import partitioner
from .compression import NONE, compress

_speedups = speedups.load("segstore_kafka._speedups")
if _speedups is not None:
    _speedups.init_results(AppendResult)
    _speedups.init_message(Message)

#: Keys a plain append dict may carry.
PLAIN_FIELDS = frozenset({"topic", "partition", "key", "value", "timestamp", "headers"})
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
#: One record's bytes besides its key, value and headers, at most (length, attributes, varints).
_RECORD_OVERHEAD = 5 + 1 + 10 + 3 * 5 + 5
_HEADER_OVERHEAD = 2 * 5
_BATCH_HEADER = 61
#: ``(topic, partition, rows, bound, routed)`` (:func:`plain_groups`)
Group = tuple[str, int, bytes, int | None, int]


class _NotPlain(Exception):
    """An item the fast path does not take (internal to the references)."""


def _blob_len(obj: Any) -> int:
    if obj is None:
        return -1
    if type(obj) is bytes:
        size = len(obj)
    elif type(obj) is str:
        try:
            size = len(obj.encode("utf-8"))
        except UnicodeEncodeError:
            raise _NotPlain from None
    else:
        raise _NotPlain
    if size > INT32_MAX:
        raise _NotPlain
    return size


def _fields(item: Any) -> dict[str, Any]:
    """A plain item's fields (those given) as a dict."""
    if type(item) is Message:
        return {"topic": item.topic, "partition": item.partition, "key": item.key, "value": item.value,
                "timestamp": item.timestamp, "headers": item.headers}
    if type(item) is not dict or not item.keys() <= PLAIN_FIELDS or not {"topic", "value"} <= item.keys():
        raise _NotPlain
    return item


def _plain(item: Any) -> tuple[str, int, int]:
    """``(topic, partition, size bound)`` of a plain item (partition -1: it names none)."""
    item = _fields(item)
    topic, partition = item["topic"], item.get("partition", 0)
    timestamp = item.get("timestamp", -1)
    if type(topic) is not str or type(partition) is not int or not 0 <= partition <= INT32_MAX:
        raise _NotPlain
    if type(timestamp) is not int or not -1 <= timestamp <= INT64_MAX:    # below -1: the general path refuses
        raise _NotPlain
    size = _RECORD_OVERHEAD + max(_blob_len(item.get("key")), 0) + max(_blob_len(item["value"]), 0)
    headers = item.get("headers")
    if headers is not None:
        if type(headers) not in (list, tuple):
            raise _NotPlain
        for pair in headers:
            if type(pair) not in (list, tuple) or len(pair) != 2 or type(pair[0]) is not str:
                raise _NotPlain
            size += _HEADER_OVERHEAD + _blob_len(pair[0]) + max(_blob_len(pair[1]), 0)
    if size > INT32_MAX:
        raise _NotPlain
    return topic, partition if "partition" in item else -1, size


def plain_groups_py(items: list, widths: dict[str, int]) -> list[Group] | None:
    """The reference of :func:`plain_groups`."""
    groups: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    try:
        for i, item in enumerate(items):
            topic, partition, size = _plain(item)
            routed = False
            if partition < 0:
                key, width = _fields(item).get("key"), widths.get(topic, 0)
                routed = key is not None and width > 1
                partition = partitioner.partition_for_key(key, width) if key is not None and width > 1 else 0
            rows, info = groups.setdefault((topic, partition), ([], [0, -1]))
            rows.append(i)
            info[0] += size
            if routed and info[1] < 0:
                info[1] = i
    except _NotPlain:
        return None
    return [(topic, partition, np.asarray(rows, np.int64).tobytes(),
             info[0] if info[0] <= INT32_MAX - _BATCH_HEADER else None, info[1])
            for (topic, partition), (rows, info) in groups.items()]


def _utf8(obj: Any) -> bytes | None:
    return obj.encode("utf-8") if type(obj) is str else obj


def encode_plain_py(items: list, rows: bytes, bound: int, now: int, header: tuple,
                    codec_number: int, level: int | None = None) -> bytes:
    """The reference of :func:`encode_plain`: the records as :meth:`Message.coerce` and
    ``KafkaStore.append_batch`` make them, through the per-record reference encoder."""
    (base_offset, leader_epoch, attributes, last_delta, max_timestamp, producer_id, producer_epoch,
     base_sequence) = header
    if now < 0:
        raise ValueError("now >= 0")
    records = []
    for i in np.frombuffer(rows, np.int64).tolist():
        try:
            _plain(items[i])
        except _NotPlain:
            raise ValueError("rows of plain items (the items changed?)") from None
        item = _fields(items[i])
        timestamp = operator.index(item.get("timestamp", -1))
        headers = [(k, _utf8(v)) for k, v in item.get("headers") or ()]
        records.append((_utf8(item.get("key")), _utf8(item["value"]), timestamp if timestamp >= 0 else now,
                        headers))
    region, base_timestamp, top = codec._encode_records_py(records, None)
    return codec._build(region, record_count=len(records), base_offset=base_offset,
                        last_offset_delta=last_delta, base_timestamp=base_timestamp,
                        max_timestamp=top if max_timestamp is None else max_timestamp,
                        compression=codec_number, partition_leader_epoch=leader_epoch,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                        is_transactional=bool(attributes & codec.TRANSACTIONAL_FLAG),
                        is_control=bool(attributes & codec.CONTROL_FLAG),
                        log_append=bool(attributes & codec.TIMESTAMP_TYPE_FLAG), compression_level=level)


def plain_bounds_py(items: list, rows: bytes) -> np.ndarray:
    """The reference of :func:`plain_bounds`."""
    try:
        return np.array([_plain(items[i])[2] for i in np.frombuffer(rows, np.int64).tolist()], np.int64)
    except (_NotPlain, IndexError):
        raise ValueError("rows of plain items (the items changed?)") from None


def plain_results_py(results: list, rows: bytes, topic: str, partition: int, base_offset: int, position: int,
                     size: int, extra: dict) -> None:
    """The reference of :func:`plain_results`."""
    for k, i in enumerate(np.frombuffer(rows, np.int64).tolist()):
        results[i] = AppendResult(topic, partition, base_offset + k, position, size, extra)


def plain_groups(items: list, widths: dict[str, int] | None = None) -> tuple[list[Group], Any] | None:
    """``(groups, snapshot)``: the plain items by (topic, partition), and what was read of them for
    :func:`encode_plain` (None from the reference); None when an item is not plain.  ``widths``: the
    partition count of each topic of more than one partition (a keyed dict naming no partition of
    such a topic goes to its key's partition).  ``O(items)``, one C call."""
    widths = {} if widths is None else widths
    if _speedups is None:
        groups = plain_groups_py(items, widths)
        return None if groups is None else (groups, None)
    return _speedups.plain_groups(items, widths)


def encode_plain(items: list, rows: bytes, bound: int, now: int, header: tuple, codec_number: int,
                 snapshot: Any = None, level: int | None = None) -> bytes:
    """One batch of the plain ``items`` at ``rows`` (int64 indices), offset deltas 0, 1, ...; a
    timestamp below 0 is ``now`` (at least 0); ``bound`` :func:`plain_groups`' size bound (the
    buffer's first size); ``snapshot`` its snapshot (the items as it read them: not read again).
    ``O(bytes)``.

    :raises ValueError: an item is not plain (any more), or ``now`` below 0.
    """
    if _speedups is None:
        return encode_plain_py(items, rows, bound, now, header, codec_number, level)
    squeeze = None if codec_number == NONE else functools.partial(compress, codec_number, level=level)
    return _speedups.encode_plain(items, snapshot, rows, bound, now, header, squeeze)


def plain_bounds(items: list, rows: bytes) -> np.ndarray:
    """The size bound of the record of each plain item at ``rows`` (int64, in order): the bounds
    :func:`plain_groups` sums into a group's, by which an append cuts a group too large for one batch.
    ``O(rows)``, one C call.

    :raises ValueError: an item is not plain (any more).
    """
    if _speedups is None:
        return plain_bounds_py(items, rows)
    return np.frombuffer(_speedups.plain_bounds(items, rows), np.int64)


def plain_results(results: list, rows: bytes, topic: str, partition: int, base_offset: int, position: int,
                  size: int, extra: dict) -> None:
    """``results[rows[k]]`` = the :class:`AppendResult` of offset ``base_offset + k`` (all of a batch's
    results share its one ``extra`` dict: results are read-only)."""
    if _speedups is None:
        plain_results_py(results, rows, topic, partition, base_offset, position, size, extra)
    else:
        _speedups.plain_results(results, rows, topic, partition, base_offset, position, size, extra)


def native() -> bool:
    """Whether the C functions are there."""
    return _speedups is not None
