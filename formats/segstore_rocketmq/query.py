"""Queries by key and by time over a RocketMQ store's indexes.

- :func:`query_by_key`: the broker's ``queryMessage``: the newest ``max_hits``
  messages whose ``topic#key`` entry lies in ``[begin, end]``, returned in
  commitlog order (the broker sorts the offsets it found).  Unlike the broker,
  each candidate is checked against the commitlog (topic, and the key among
  ``UNIQ_KEY`` and ``KEYS``), so a hash collision never returns another topic's
  or key's message, and a message holding a key twice is returned once.
- :func:`scan_by_key`: the same answer from a commitlog scan (a store without ``index/``).
- :func:`offset_in_queue_by_time`: the broker's ``getOffsetInQueueByTime``: the
  first queue offset whose message was stored at or after a time, by binary
  search over the consume queue, reading store times from the commitlog.

Both take callables that read the commitlog, so they are independent of how
the store keeps its files.  Thread-safe if those callables are.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple

from segstore.errors import CorruptDataError
from segstore.search import first_true

from .indexfile import IndexService
from .message import SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_ROLLBACK, RocketMQMessage

#: ``MessageStoreConfig.maxMsgsNumBatch``: the broker's cap on hits per key query.
MAX_MSGS_NUM_BATCH = 64
#: No cap on key hits (the broker caps at maxMsgsNumBatch; the caller caps here).
NO_HIT_LIMIT = 2**31 - 1
TIME_MAX = 2**63 - 1
#: What a reader of a store without consume queues or index is told (``info``'s ``notes``, the CLI's stderr).
SCAN_NOTE = ("no consume queues or no index: what they would answer comes from a scan of the commitlog; "
             "`segstore recover` builds consumequeue/ and index/ as the broker does")


def carries_key(msg: RocketMQMessage, topic: str, key: str) -> bool:
    """Whether the broker would have indexed ``msg`` under ``topic#key``."""
    if msg.topic != topic or msg.sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_ROLLBACK:
        return False
    return msg.properties.get("UNIQ_KEY") == key or key in msg.keys


class DamagedMessage(NamedTuple):
    """A message at a key hit's position whose checks fail: decoded without them, and their error."""

    message: RocketMQMessage
    error: CorruptDataError


def query_by_key(
    index: IndexService,
    topic: str,
    key: str,
    message_at: Callable[[int], RocketMQMessage | DamagedMessage | None],
    *,
    max_hits: int = MAX_MSGS_NUM_BATCH,
    begin: int = 0,
    end: int = TIME_MAX,
) -> list[RocketMQMessage]:
    """Messages of ``topic`` carrying ``key``, the newest ``max_hits``, in commitlog order.

    ``message_at(offset)`` returns the valid message stored at a commitlog
    offset, None where none is (past the end, deleted, not a message start), or a
    :class:`DamagedMessage`.
    Runtime complexity: ``O(chain length)`` index reads plus one message decode per candidate.

    :raises CorruptDataError: a hit's message carries the key but fails its checks (a damaged body):
        its error, rather than an answer that quietly leaves it out (the broker serves it unchecked).
    """
    found: dict[int, RocketMQMessage] = {}
    if max_hits <= 0:
        return []
    for phy in index.query(topic, key, begin, end):
        if phy in found:
            continue
        msg = message_at(phy)
        if isinstance(msg, DamagedMessage):
            if carries_key(msg.message, topic, key):
                raise msg.error
            continue
        if msg is not None and carries_key(msg, topic, key):
            found[phy] = msg
            if len(found) >= max_hits:
                break
    return [found[phy] for phy in sorted(found)]


def scan_by_key(messages: Iterable[RocketMQMessage], topic: str, key: str, *,
                max_hits: int = MAX_MSGS_NUM_BATCH, begin: int = 0,
                end: int = TIME_MAX) -> list[RocketMQMessage]:
    """What :func:`query_by_key` answers, from messages in commitlog order instead of an index
    (a store without ``index/``): the newest ``max_hits`` carrying ``key``, stored in
    ``[begin, end]``.  Runtime complexity: ``O(messages)``."""
    if max_hits <= 0:
        return []
    hits: deque[RocketMQMessage] = deque(maxlen=max_hits)
    for msg in messages:
        if begin <= msg.store_timestamp <= end and carries_key(msg, topic, key):
            hits.append(msg)
    return list(hits)


def offset_in_queue_by_time(
    min_offset: int, max_offset: int, store_time_at: Callable[[int], int | None], timestamp: int
) -> int:
    """The first queue offset in ``[min_offset, max_offset)`` stored at or after ``timestamp``.

    ``store_time_at(queue_offset)`` reads that entry's message store time
    (None when the entry or its message is unreadable: treated as later, so the
    search never skips over it).  Like the broker, returns ``max_offset`` when
    every message is older, and ``min_offset`` when the queue is empty or every
    message is newer.  Runtime complexity: ``O(log(n))`` commitlog reads.
    """
    def at_or_after(offset: int) -> bool:
        when = store_time_at(offset)
        return when is None or when >= timestamp

    return first_true(at_or_after, min_offset, max_offset)


def newest_messages(hits: list[RocketMQMessage], max_hits: int | None) -> list[RocketMQMessage]:
    """The last ``max_hits`` of ``hits`` in commitlog order: the newest, as the broker's ``queryMessage``
    finds them walking its IndexFiles from the newest entry back (every hit when ``max_hits`` is None)."""
    if max_hits is None:
        return hits
    # hits[-max_hits:]: every hit when fewer than max_hits (a start of len - max_hits would go negative)
    return hits[-max_hits:] if max_hits > 0 else []
