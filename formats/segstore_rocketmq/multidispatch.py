"""Multi-dispatch (LMQ) queue entries: which extra consume queues a message is dispatched to.

RocketMQ 4.9.7 (``MessageStoreConfig.enableMultiDispatch``, ``enableLmq``): a message carrying
``INNER_MULTI_DISPATCH`` (queue names, comma-separated) and ``INNER_MULTI_QUEUE_OFFSET`` (one offset
per name, same order) gets, besides the entry of its own queue, one entry in each named queue
(``ConsumeQueue.multiDispatchLmqQueue``): queue id 0 for a name starting ``%LMQ%`` when ``enableLmq``
(``MixAll.isLmq``), the message's own queue id otherwise; the entry's offset is the one named, its
commitlog offset, size and tags code the message's.  Those queues point at messages of another
topic by design.  Pure functions: no file is read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segstore.javatext import parse_long

#: ``MessageConst.PROPERTY_INNER_MULTI_DISPATCH`` / ``PROPERTY_INNER_MULTI_QUEUE_OFFSET``
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
#: ``MixAll.LMQ_PREFIX``, ``MixAll.MULTI_DISPATCH_QUEUE_SPLITTER``
LMQ_PREFIX = "%LMQ%"
SPLITTER = ","


def is_lmq(name: str | None) -> bool:
    """``MixAll.isLmq``: a name starting ``%LMQ%``."""
    return name is not None and name.startswith(LMQ_PREFIX)


def _blank(text: str | None) -> bool:
    """``StringUtils.isBlank``: None, empty or whitespace only."""
    return text is None or not text.strip()


def _split(text: str) -> list[str]:
    """Java's ``String.split(",")``: trailing empty strings dropped."""
    parts = text.split(SPLITTER)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def targets(properties: Mapping[str, str], queue_id: int, enable_lmq: bool) -> list[tuple[str, int, int]]:
    """The ``(queue name, queue id, queue offset)`` entries the broker dispatches a message to besides its
    own queue (``DefaultMessageStore.checkMultiDispatchQueue`` then ``ConsumeQueue.multiDispatchLmqQueue``,
    4.9.7), given ``enableMultiDispatch``: none when either property is blank or their counts differ (the
    broker logs ``[bug]`` and dispatches none); an offset ``Long.parseLong`` refuses ends the list there
    (the broker's dispatch throws at it)."""
    names, offsets = (properties.get(PROPERTY_INNER_MULTI_DISPATCH),
                      properties.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET))
    if _blank(names) or _blank(offsets):
        return []
    assert names is not None and offsets is not None
    queues, numbers = _split(names), _split(offsets)
    if len(queues) != len(numbers):
        return []
    found = []
    for name, text in zip(queues, numbers, strict=True):
        offset = parse_long(text)       # multiDispatchLmqQueue: Long.parseLong
        if offset is None:
            break
        found.append((name, 0 if enable_lmq and is_lmq(name) else queue_id, offset))
    return found


def holds(properties: Mapping[str, str], own_queue_id: int, topic: str, queue_id: int, offset: int) -> bool:
    """Whether a message (its ``properties``, stored in queue ``own_queue_id`` of its topic) is entry
    ``offset`` of queue ``topic``/``queue_id`` by multi-dispatch, whichever ``enableLmq`` the broker that
    wrote the entry had: ``topic`` is named in ``INNER_MULTI_DISPATCH`` with ``offset`` at the same
    position of ``INNER_MULTI_QUEUE_OFFSET``, and the queue id is the message's own or (an LMQ name) 0."""
    return any(name == topic and at == offset
               for name, qid, at in (*targets(properties, own_queue_id, False),
                                     *targets(properties, own_queue_id, True))
               if qid == queue_id)


def is_entry(message: Any, topic: str, queue_id: int, offset: int, size: int) -> bool:
    """Whether ``message`` (a decoded :class:`.message.RocketMQMessage`) is the message a consume-queue
    entry of ``size`` bytes at ``offset`` of ``topic``/``queue_id`` points at by multi-dispatch
    (:func:`holds`, and the entry's size the message's): what reads and verify accept where the entry
    names another queue than the message's own."""
    return message.size == size and holds(message.properties, message.queue_id, topic, queue_id, offset)
