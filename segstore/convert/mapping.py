"""The field mapping between RocketMQ messages and Kafka records, both ways.

Pure functions: records in, records out; no files, no state.  Thread-safe.
``docs/conversion.md`` is the user-facing table; this module is its executable form.

RocketMQ -> Kafka (a *native* RocketMQ message)
    ==========================  ==============================================
    topic, queue id             partition ``kafka_from_rocketmq(topic)``-``queue id``
    queue offset                offset
    body                        value
    first key of ``KEYS``       key (UTF-8; none when ``KEYS`` is absent)
    born timestamp              timestamp (CreateTime), or the store timestamp
                                (LogAppendTime) when asked
    every other field           a header ``rmq.<field>`` (decimal or ``ip:port``); a
                                trailing 0x02 after the properties (the broker
                                version's style) as ``rmq.trailing_separator``
    every property, in order    a header ``rmq.p.<NAME>`` (UTF-8)
    ==========================  ==============================================

    The first header is always ``rmq.physical_offset``: it marks a record as one that
    came from RocketMQ, and it orders the commitlog again on the way back.  Headers
    for ``flag``, ``sys_flag``, ``reconsume_times``, ``prepared_transaction_offset``
    are left out when 0.  Prepared and rolled-back transaction messages (which no
    consume queue points at, and which the broker stores with queue offset 0) go to
    the reserved Kafka topic :data:`NONQUEUED_TOPIC`, partition 0, one offset each in
    commitlog order, with ``rmq.topic``, ``rmq.queue_id`` and ``rmq.queue_offset``.

Kafka -> RocketMQ (a *native* Kafka record)
    ==========================  ==============================================
    topic, partition            topic ``rocketmq_from_kafka(topic)``, queue id = partition
    offset                      queue offset (dense), and property ``kafka.offset``
    key                         ``KEYS`` when it is plain text (UTF-8, no space, no
                                0x01/0x02), else property ``kafka.key`` (base64)
    value                       body; a null value is an empty body and
                                ``kafka.null_value=1``
    timestamp                   born and store timestamps; ``kafka.timestamp_type``
                                says ``LogAppendTime`` when it was that
    headers                     property ``kafka.headers``: JSON ``[[name, base64 | null], ...]``
    transactional batch         property ``kafka.txn`` = ``producerId,producerEpoch``
    other batch with a producer property ``kafka.producer`` = ``producerId,producerEpoch``
    id (idempotent producers)
    control record              a rolled-back transaction message (sysFlag 0xC: in the
                                commitlog, in no consume queue) with ``kafka.control=1``
    ==========================  ==============================================

    ``kafka.offset`` is always present: it marks a message as one that came from
    Kafka.

The way back undoes each mapping exactly: a Kafka record whose first header is
``rmq.physical_offset`` becomes the RocketMQ message it was made from
(:func:`restore_rocketmq`), and a RocketMQ message with a ``kafka.offset`` property
becomes the Kafka record it was made from (:func:`restore_kafka`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from dataclasses import dataclass, field

from segstore_rocketmq.message import (
    IPV4_HOST,
    IPV6_HOST,
    KEY_SEPARATOR,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    MSG_ID_OFFSET,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    SYSFLAG_TRANSACTION_ROLLBACK,
    Host,
    RocketMQMessage,
    encode_properties,
)
from segstore_rocketmq.store import has_queue_entry

from segstore.errors import ConversionError, InvalidMessageError, InvalidTopicError
from segstore.records import CREATE_TIME, LOG_APPEND_TIME, Header

from .topicnames import kafka_from_rocketmq, rocketmq_from_kafka, unescape_kafka, unescape_rocketmq

#: Kafka topic of the messages no consume queue points at (``.n`` is no escape
#: :func:`kafka_from_rocketmq` makes, so no RocketMQ topic maps to this name).
NONQUEUED_TOPIC = "rmq.nonqueued"

# -- RocketMQ fields as Kafka headers ------------------------------------------
RMQ_PROPERTY_PREFIX = "rmq.p."
_PROPERTY_PREFIX_LENGTH = len(RMQ_PROPERTY_PREFIX)
H_PHYSICAL_OFFSET = "rmq.physical_offset"
H_BORN_TIMESTAMP = "rmq.born_timestamp"
H_BORN_HOST = "rmq.born_host"
H_STORE_TIMESTAMP = "rmq.store_timestamp"
H_STORE_HOST = "rmq.store_host"
H_FLAG = "rmq.flag"
H_SYS_FLAG = "rmq.sys_flag"
H_RECONSUME_TIMES = "rmq.reconsume_times"
H_PREPARED_OFFSET = "rmq.prepared_transaction_offset"
H_MSG_ID = "rmq.msg_id"
H_QUEUE_OFFSET = "rmq.queue_offset"
H_TOPIC = "rmq.topic"
H_QUEUE_ID = "rmq.queue_id"
H_MAGIC = "rmq.magic"
H_TRAILING_SEPARATOR = "rmq.trailing_separator"

#: Header value of ``rmq.magic`` for the v2 message layout (v1 is the default).
MAGIC_V2_TEXT = b"2"
#: Header value of ``rmq.trailing_separator`` for properties ending in 0x02 (brokers up to
#: 4.9.0 and from 5.2.0); absent for the 4.9.1-5.1.4 style.
TRAILING_TEXT = b"1"

# -- Kafka fields as RocketMQ properties -----------------------------------------
P_OFFSET = "kafka.offset"
P_KEY = "kafka.key"
P_NULL_VALUE = "kafka.null_value"
P_TIMESTAMP_TYPE = "kafka.timestamp_type"
P_HEADERS = "kafka.headers"
P_TXN = "kafka.txn"
P_PRODUCER = "kafka.producer"
P_CONTROL = "kafka.control"
#: A batch's producer id and epoch when it has none (``RecordBatch.NO_PRODUCER_ID``/``_EPOCH``).
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1
_FLAG_TRUE = "1"
_KEY_FORBIDDEN = frozenset(KEY_SEPARATOR + NAME_VALUE_SEPARATOR + PROPERTY_SEPARATOR + "\t\n\r\x0b\x0c")

TIMESTAMP_SOURCES = ("born", "store")
#: Distinct hosts whose text form is cached (hosts repeat across millions of messages).
HOST_CACHE_SIZE = 4096


@dataclass(slots=True)
class KafkaEntry:
    """One Kafka record with what a conversion keeps of its batch.

    ``offset`` is absolute (-1 for a message of :data:`NONQUEUED_TOPIC` until the
    converter numbers it).
    ``producer_id``/``producer_epoch`` are the batch's (-1 when it had no producer id).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    timestamp_type: str = CREATE_TIME
    transactional: bool = False
    control: bool = False
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


def is_queued(msg: RocketMQMessage) -> bool:
    """False for prepared and rolled-back transaction messages, which get no consume-queue entry."""
    return has_queue_entry(msg.sys_flag)


def came_from_kafka(msg: RocketMQMessage) -> bool:
    """True if ``msg`` was written by :func:`kafka_to_rocketmq` (it has ``kafka.offset``)."""
    return P_OFFSET in msg.properties


def came_from_rocketmq(headers: list[Header]) -> bool:
    """True if a Kafka record with these headers was written by :func:`rocketmq_to_kafka`."""
    return bool(headers) and headers[0][0] == H_PHYSICAL_OFFSET


@functools.lru_cache(maxsize=HOST_CACHE_SIZE)
def _host_text(host: Host) -> bytes:
    """``ip:port`` as the broker prints it (cached: a store has few distinct hosts)."""
    return str(host).encode("ascii")


@functools.lru_cache(maxsize=HOST_CACHE_SIZE)
def _host_prefix(host: Host) -> bytes:
    """The store-host part of a msgId (IP + int port), cached."""
    return (IPV6_HOST if host.is_v6 else IPV4_HOST).pack(host.ip, host.port)


def msg_id_text(store_host: Host, physical_offset: int) -> bytes:
    """The msgId as the broker prints it (uppercase hex of store IP, port, physical offset)."""
    return (_host_prefix(store_host) + MSG_ID_OFFSET.pack(physical_offset)).hex().upper().encode("ascii")


@functools.lru_cache(maxsize=HOST_CACHE_SIZE)
def _parse_host(text: bytes) -> Host:
    return Host.parse(text.decode("ascii"))


# -- RocketMQ -> Kafka ------------------------------------------------------------

def rocketmq_to_kafka(msg: RocketMQMessage, *, timestamp: str = "born") -> KafkaEntry:
    """The Kafka record for a RocketMQ message (either a native one or one that came from Kafka).

    A non-queued message gets offset -1: the caller numbers :data:`NONQUEUED_TOPIC`.

    :param timestamp: ``"born"`` (CreateTime) or ``"store"`` (LogAppendTime).
    :raises InvalidTopicError: the topic has no Kafka name (too long once escaped).
    :raises ConversionError: a message carrying ``kafka.*`` properties that do not parse.
    """
    if came_from_kafka(msg):
        return restore_kafka(msg)
    headers: list[Header] = [
        (H_PHYSICAL_OFFSET, b"%d" % msg.physical_offset),
        (H_BORN_TIMESTAMP, b"%d" % msg.born_timestamp),
        (H_BORN_HOST, _host_text(msg.born_host)),
        (H_STORE_TIMESTAMP, b"%d" % msg.store_timestamp),
        (H_STORE_HOST, _host_text(msg.store_host)),
    ]
    if msg.flag:
        headers.append((H_FLAG, b"%d" % msg.flag))
    if msg.sys_flag:
        headers.append((H_SYS_FLAG, b"%d" % msg.sys_flag))
    if msg.reconsume_times:
        headers.append((H_RECONSUME_TIMES, b"%d" % msg.reconsume_times))
    if msg.prepared_transaction_offset:
        headers.append((H_PREPARED_OFFSET, b"%d" % msg.prepared_transaction_offset))
    headers.append((H_MSG_ID, msg_id_text(msg.store_host, msg.physical_offset)))
    if msg.magic == MESSAGE_MAGIC_V2:
        headers.append((H_MAGIC, MAGIC_V2_TEXT))
    if msg.trailing_separator:
        headers.append((H_TRAILING_SEPARATOR, TRAILING_TEXT))
    if is_queued(msg):
        topic, partition, offset = kafka_from_rocketmq(msg.topic), msg.queue_id, msg.queue_offset
    else:
        topic, partition, offset = NONQUEUED_TOPIC, 0, -1
        headers += [(H_TOPIC, msg.topic.encode("utf-8")), (H_QUEUE_ID, b"%d" % msg.queue_id),
                    (H_QUEUE_OFFSET, b"%d" % msg.queue_offset)]
    properties = msg.properties
    headers += [(RMQ_PROPERTY_PREFIX + name, value.encode("utf-8", "surrogatepass"))
                for name, value in properties.items()]
    keys = properties.get(PROPERTY_KEYS)
    key = next((k for k in keys.split(KEY_SEPARATOR) if k), None) if keys else None
    if timestamp == "born":
        ts, ts_type = msg.born_timestamp, CREATE_TIME
    elif timestamp == "store":
        ts, ts_type = msg.store_timestamp, LOG_APPEND_TIME
    else:
        raise ConversionError(f"expected a timestamp source of {', '.join(TIMESTAMP_SOURCES)}, "
                              f"found {timestamp!r}")
    return KafkaEntry(topic=topic, partition=partition, offset=offset, timestamp=ts,
                      key=key.encode("utf-8") if key else None, value=msg.body,
                      headers=headers, timestamp_type=ts_type)


def restore_kafka(msg: RocketMQMessage) -> KafkaEntry:
    """The Kafka record :func:`kafka_to_rocketmq` made ``msg`` from (its exact inverse).

    :raises ConversionError: a ``kafka.*`` property that does not parse.
    """
    props = msg.properties
    try:
        offset = int(props[P_OFFSET])
        if P_KEY in props:
            key: bytes | None = base64.b64decode(props[P_KEY], validate=True)
        else:
            key = props[PROPERTY_KEYS].encode("utf-8") if PROPERTY_KEYS in props else None
        headers = [(str(name), None if value is None else base64.b64decode(value, validate=True))
                   for name, value in json.loads(props.get(P_HEADERS, "[]"))]
        producer = props.get(P_TXN, props.get(P_PRODUCER))
        producer_id, producer_epoch = (int(part) for part in producer.split(",")) if producer is not None \
            else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        topic = unescape_rocketmq(msg.topic)
    except (ValueError, TypeError, KeyError, binascii.Error, InvalidTopicError) as err:
        found = {k: v for k, v in props.items() if k.startswith("kafka.")}
        raise ConversionError(f"expected the kafka.* properties of a converted Kafka record, "
                              f"found {found} ({err})") from err
    return KafkaEntry(
        topic=topic, partition=msg.queue_id, offset=offset, timestamp=msg.born_timestamp, key=key,
        value=None if props.get(P_NULL_VALUE) == _FLAG_TRUE else msg.body, headers=headers,
        timestamp_type=props.get(P_TIMESTAMP_TYPE, CREATE_TIME), transactional=P_TXN in props,
        control=props.get(P_CONTROL) == _FLAG_TRUE, producer_id=producer_id, producer_epoch=producer_epoch)


# -- Kafka -> RocketMQ ------------------------------------------------------------

def _plain_key(key: bytes) -> str | None:
    """``key`` as text if ``KEYS`` can carry it unchanged (one token, UTF-8), else None."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or _KEY_FORBIDDEN.intersection(text):
        return None
    return text


def kafka_to_rocketmq(entry: KafkaEntry, *, store_host: Host) -> RocketMQMessage:
    """The RocketMQ message for a Kafka record (either a native one or one that came from RocketMQ).

    A native record gets ``store_host`` as both hosts; the store assigns queue and
    physical offsets.

    :raises InvalidTopicError: the topic has no RocketMQ name (too long once escaped).
    :raises ConversionError: ``rmq.*`` headers that do not parse, or headers too large for
        RocketMQ's 32767-byte properties.
    """
    if came_from_rocketmq(entry.headers):
        return restore_rocketmq(entry)
    props: dict[str, str] = {P_OFFSET: str(entry.offset)}
    if entry.key is not None:
        text = _plain_key(entry.key)
        if text is None:
            props[P_KEY] = base64.b64encode(entry.key).decode("ascii")
        else:
            props[PROPERTY_KEYS] = text
    if entry.value is None:
        props[P_NULL_VALUE] = _FLAG_TRUE
    if entry.timestamp_type != CREATE_TIME:
        props[P_TIMESTAMP_TYPE] = entry.timestamp_type
    if entry.headers:
        props[P_HEADERS] = json.dumps(
            [[name, None if value is None else base64.b64encode(value).decode("ascii")]
             for name, value in entry.headers], separators=(",", ":"), ensure_ascii=False)
    if entry.transactional:
        props[P_TXN] = f"{entry.producer_id},{entry.producer_epoch}"
    elif (entry.producer_id, entry.producer_epoch) != (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
        props[P_PRODUCER] = f"{entry.producer_id},{entry.producer_epoch}"
    if entry.control:
        props[P_CONTROL] = _FLAG_TRUE
    try:
        encode_properties(props)
    except InvalidMessageError as err:
        raise ConversionError(f"expected a record RocketMQ properties can carry at {entry.topic}-"
                              f"{entry.partition} offset {entry.offset}, found {err.message}") from err
    return RocketMQMessage(
        topic=rocketmq_from_kafka(entry.topic), queue_id=entry.partition, body=entry.value or b"",
        properties=props, sys_flag=SYSFLAG_TRANSACTION_ROLLBACK if entry.control else 0,
        born_timestamp=entry.timestamp, born_host=store_host, store_timestamp=entry.timestamp,
        store_host=store_host)


def restore_rocketmq(entry: KafkaEntry) -> RocketMQMessage:
    """The RocketMQ message :func:`rocketmq_to_kafka` made ``entry`` from (its exact inverse).

    ``physical_offset`` and ``queue_offset`` are the source's; the writer checks the
    destination puts the message at the same place.

    :raises ConversionError: missing or malformed ``rmq.*`` headers.
    """
    fields: dict[str, bytes | None] = {}
    properties: dict[str, str] = {}
    try:
        for name, value in entry.headers:
            if name.startswith(RMQ_PROPERTY_PREFIX):
                properties[name[_PROPERTY_PREFIX_LENGTH:]] = (value or b"").decode("utf-8", "surrogatepass")
            else:
                fields[name] = value
        if entry.topic == NONQUEUED_TOPIC:
            topic = (fields[H_TOPIC] or b"").decode("utf-8")
            queue_id = int(fields[H_QUEUE_ID] or b"")
        else:
            topic, queue_id = unescape_kafka(entry.topic), entry.partition
        optional = fields.get
        msg = RocketMQMessage(
            topic=topic, queue_id=queue_id, body=entry.value or b"", properties=properties,
            flag=int(optional(H_FLAG) or 0), queue_offset=int(optional(H_QUEUE_OFFSET) or entry.offset),
            physical_offset=int(fields[H_PHYSICAL_OFFSET] or b""), sys_flag=int(optional(H_SYS_FLAG) or 0),
            born_timestamp=int(fields[H_BORN_TIMESTAMP] or b""),
            born_host=_parse_host(fields[H_BORN_HOST] or b""),
            store_timestamp=int(fields[H_STORE_TIMESTAMP] or b""),
            store_host=_parse_host(fields[H_STORE_HOST] or b""),
            reconsume_times=int(optional(H_RECONSUME_TIMES) or 0),
            prepared_transaction_offset=int(optional(H_PREPARED_OFFSET) or 0),
            magic=MESSAGE_MAGIC_V2 if optional(H_MAGIC) == MAGIC_V2_TEXT else MESSAGE_MAGIC,
            trailing_separator=optional(H_TRAILING_SEPARATOR) == TRAILING_TEXT)
    except (ValueError, KeyError, InvalidMessageError, InvalidTopicError) as err:
        raise ConversionError(f"expected the rmq.* headers of a converted RocketMQ message in "
                              f"{entry.topic}-{entry.partition} at offset {entry.offset}, found "
                              f"{[name for name, _ in entry.headers]} ({err!r})") from err
    return msg
