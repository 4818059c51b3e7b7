"""Transactions a RocketMQ broker still waits on: half messages with no commit or rollback yet.

What the broker keeps (rocketmq-all-4.9.7, broker/.../transaction/queue/):

- ``TransactionalMessageBridge.parseHalfMessageInner``: a transactional producer's message is stored in
  ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its own topic and queue in the properties ``REAL_TOPIC`` and
  ``REAL_QID`` (``PGROUP``: the producer group, ``UNIQ_KEY``: the client's message id);
- ``addRemoveTagInTransactionOp``: a commit or a rollback (``EndTransactionProcessor``) puts an op message
  in ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the half message's queue id, tags ``d``, body the half message's
  queue offset in decimal (5.x batches several, comma-separated);
- ``TransactionalMessageServiceImpl.check`` walks each half queue from the offset group
  ``CID_RMQ_SYS_TRANS`` committed there: an offset an op names is done; ``needDiscard``/``needSkip``
  (whatever the age): one checked ``transactionCheckMax`` times, or older than ``fileReservedTime``, is
  given up (moved to ``TRANS_CHECK_MAX_TIME_TOPIC``); a message stored after the check began waits; one
  with ``CHECK_IMMUNITY_TIME_IN_SECONDS`` and younger than that waits (``checkPrepareQueueOffset``: a
  put-back copy carrying ``TRAN_PREPARED_QUEUE_OFFSET`` is done when an op names that first offset at or
  past the committed one, else it is put back again), and is asked once older, that offset or not; one
  without waits while younger than ``transactionTimeOut``; one older is put back at the queue's end with
  ``TRANSACTION_CHECK_TIMES`` counted up and the producer asked again (``putBackHalfMsgQueue``), so an
  older copy below the committed offset is no longer pending.

:func:`done_offsets` reads the op bodies, :func:`pending` judges the half messages; pure and
thread-safe.  The store (``RocketMQStore.half_messages``) reads the queues and the committed offsets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from segstore.javatext import parse_int, parse_long

if TYPE_CHECKING:       # pyarrow is imported where the op bodies are read
    import pyarrow as pa

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
#: the broker's own group over both queues (``MixAll.CID_SYS_RMQ_TRANS``)
CHECK_GROUP = "CID_RMQ_SYS_TRANS"
#: ``TransactionalMessageUtil.REMOVETAG``
REMOVE_TAG = "d"

REAL_TOPIC, REAL_QUEUE_ID, PRODUCER_GROUP, UNIQ_KEY = "REAL_TOPIC", "REAL_QID", "PGROUP", "UNIQ_KEY"
CHECK_TIMES, CHECK_IMMUNITY_SECONDS = "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS"
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"


def done_offsets(bodies: pa.Array, tags: pa.Array | None = None) -> set[int]:
    """The half-queue offsets a column of op message bodies names (decimal, 5.x's comma-separated), each
    as ``fillOpRemoveMap``'s ``getLong`` reads it (``Long.parseLong``:
    :func:`segstore.javatext.parse_long`); what it refuses (a space, a letter, nothing) is passed over,
    as ``fillOpRemoveMap`` passes over the -1 ``getLong`` gives for it.  With ``tags`` (the op messages'
    tags, one a body) only the bodies of op messages tagged ``d`` count: ``fillOpRemoveMap`` logs any
    other tag as illegal and finishes nothing with it.  Vectorised (pyarrow compute) but for a text
    other than ASCII digits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if tags is not None:
        bodies = pc.filter(bodies, pc.fill_null(pc.equal(tags, REMOVE_TAG), False))
    texts = pc.list_flatten(pc.split_pattern(pc.cast(bodies, pa.string()), ","))
    plain = pc.match_substring_regex(texts, r"^[+-]?[0-9]{1,18}$")
    # Arrow's cast takes a '-' but not Java's '+'
    done = set(pc.cast(pc.utf8_ltrim(pc.filter(texts, plain), "+"), pa.int64()).to_pylist())
    # the rest (Unicode digits, 19 digits, leading zeros, or no number) as Long.parseLong reads them
    others = (parse_long(text) for text in pc.filter(texts, pc.invert(plain)).to_pylist())
    return done | {number for number in others if number is not None}


_LONG_SIGN = 1 << 63


def _java_number(text: str | None, default: int, bits: int = 64) -> int:
    """``text`` as the checker's ``getLong`` / ``getInt`` read it (``Long.parseLong``, ``Integer.parseInt``:
    a sign and digits, nothing else, within the type); -1, as they answer, for a text they refuse;
    ``default`` for no text."""
    if text is None:
        return default
    value = parse_long(text) if bits == 64 else parse_int(text)
    return -1 if value is None else value


def pending(messages: Iterable[Any], done: set[int], *, now_ms: int, timeout_ms: int, check_max: int,
            file_reserved_ms: int) -> list[dict[str, Any]]:
    """The half messages (``RocketMQMessage`` of one half queue, from the checker's committed offset) that
    no op finishes and that the checker would ask their producer about at ``now_ms`` (stored before it),
    in the order ``check`` judges each one: checked ``check_max`` times or older than the file reserved
    time, given up (``next_check`` ``discard``); with a check-immunity time, waiting while younger than it
    (finished, where an op names its ``TRAN_PREPARED_QUEUE_OFFSET``, or put back again) and asked once
    older, whatever that offset; without one, asked once ``timeout_ms`` old (or born after ``now_ms``)
    (``next_check`` ``check``)."""
    rows = []
    for msg in messages:
        if msg.queue_offset in done:
            continue
        props = msg.properties
        age = now_ms - msg.born_timestamp
        checks = _java_number(props.get(CHECK_TIMES), 0, 32)
        discard = checks >= check_max or age > file_reserved_ms      # needDiscard, needSkip: first
        immunity_text = props.get(CHECK_IMMUNITY_SECONDS)
        if not discard:
            if msg.store_timestamp >= now_ms:       # stored as the check began: checked the next time
                continue
            if immunity_text is not None:
                immunity = _java_number(immunity_text, -1)
                # getImmunityTime (a Java long, times 1000); younger: checkPrepareQueueOffset finishes it or
                # puts it back, unasked
                waits = timeout_ms if immunity == -1 else ((immunity * 1000 + _LONG_SIGN) % (2 * _LONG_SIGN)
                                                           - _LONG_SIGN)
                if age < waits:
                    continue
            elif 0 <= age < timeout_ms:
                continue
        real_queue = _java_number(props.get(REAL_QUEUE_ID), -1, 32)
        rows.append({"topic": props.get(REAL_TOPIC), "queue_id": real_queue,
                     "msg_id": props.get(UNIQ_KEY), "producer_group": props.get(PRODUCER_GROUP),
                     "half_queue_id": msg.queue_id, "half_offset": msg.queue_offset,
                     "commitlog_offset": msg.physical_offset, "born_timestamp": msg.born_timestamp,
                     "store_timestamp": msg.store_timestamp, "check_times": max(checks, 0),
                     "next_check": "discard" if discard else "check", "duration_min": age // 60_000})
    return rows
