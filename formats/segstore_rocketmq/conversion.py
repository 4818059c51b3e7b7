"""RocketMQ's side of a format conversion (``RocketMQFormat.conversion()``).

The converter (:mod:`segstore.convert`) moves :class:`Entry` records between two
formats; this module says how a RocketMQ message becomes one and back, losslessly,
whatever the other format (the *peer*, named ``P`` below; ``kafka`` for Kafka).
``docs/conversion.md`` is the user's table.

A RocketMQ message -> an entry (a *native* message)
    ==========================  ==============================================
    topic, queue id             topic (escaped into the peer's names), partition
    queue offset                offset
    body                        value
    first key of ``KEYS``       key (UTF-8; none when ``KEYS`` is absent)
    born timestamp              timestamp (CreateTime), or the store timestamp
                                (LogAppendTime) when asked
    every other field           a header ``rmq.<field>`` (decimal or ``ip:port``); a
                                trailing 0x02 after the properties (the broker
                                version's style) as ``rmq.trailing_separator``
    every property, in order    a header ``rmq.p.<NAME>`` (the name and value as stored: UTF-8,
                                or the bytes where they are not, which the way back writes
                                again; such a key is a JavaText keeping its bytes)
    ==========================  ==============================================

    The first header is always ``rmq.physical_offset``: it marks an entry as one that
    came from RocketMQ, and it orders the commitlog again on the way back.  Headers
    for ``flag``, ``sys_flag``, ``reconsume_times``, ``prepared_transaction_offset``
    are left out when 0.  Prepared and rolled-back transaction messages (which no
    consume queue points at, and which the broker stores with queue offset 0) go to
    the reserved topic ``rmq<escape>nonqueued`` (``rmq.nonqueued`` in Kafka),
    partition 0, one offset each in commitlog order, with ``rmq.topic``,
    ``rmq.queue_id`` and ``rmq.queue_offset``.

An entry -> a RocketMQ message (a *foreign* entry of peer ``P``)
    ==========================  ==============================================
    topic, partition            topic (escaped into RocketMQ's names), queue id = partition
    offset                      queue offset (dense), and property ``P.offset``
    key                         ``KEYS`` when it is plain text (UTF-8, no space, no
                                0x01/0x02), an empty one ``P.empty_key=1``, else
                                property ``P.key`` (base64)
    value                       body; a null value is an empty body and ``P.null_value=1``
    timestamp                   born and store timestamps; ``P.timestamp_type``
                                says ``LogAppendTime`` when it was that
    headers                     property ``P.headers``: JSON ``[[name, base64 | null], ...]``;
                                a name that is not UTF-8 (a JavaText) with its bytes'
                                base64 third: ``[name, base64 | null, name base64]``
    transactional batch         property ``P.txn`` = ``producerId,producerEpoch``
    other batch with a producer property ``P.producer`` = ``producerId,producerEpoch``
    control record              a rolled-back transaction message (sysFlag 0xC: in the
                                commitlog, in no consume queue) with ``P.control=1``
    ==========================  ==============================================

    ``P.offset`` is always present: it marks a message as one that came from ``P``.

The way back undoes each mapping exactly: an entry whose first header is
``rmq.physical_offset`` becomes the RocketMQ message it was made from
(:func:`restore_message`), and a message with a ``P.offset`` property becomes the
entry it was made from (:func:`restore_entry`).

Pure functions, plus the source stream, writer and verifier the converter drives.
Not thread-safe: one conversion per destination.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from segstore import arrays
from segstore.columns import HEADER, ROCKETMQ_SCHEMA, TIMESTAMP, binary_buffers
from segstore.convert.interchange import (
    ENTRY_SCHEMA,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    ArrowWriter,
    Entry,
    Extent,
    FormatConversion,
    LogSpan,
    Options,
    Peer,
    Sized,
    Verifier,
    Writer,
)
from segstore.convert.topicnames import WORD_CHARS, TopicRules, escape, unescape
from segstore.errors import (
    ConversionError,
    CorruptDataError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    cut,
)
from segstore.javatext import JavaText, java_text
from segstore.overlap import in_rounds, thread_count
from segstore.records import CREATE_TIME, LOG_APPEND_TIME, Header
from segstore.search import first_true
from segstore.store import Store

from . import bodycodec, columnar
from .config import TOPIC_MAX_LENGTH, TOPIC_MAX_LENGTH_V2, V2_FROM_VERSION, BrokerConfig
from .message import (
    IPV4_HOST,
    IPV6_HOST,
    KEY_SEPARATOR,
    MAX_QUEUE_ID,
    MESSAGE_MAGIC,
    MESSAGE_MAGIC_V2,
    MSG_ID_OFFSET,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    SYSFLAG_TRANSACTION_ROLLBACK,
    Host,
    RocketMQMessage,
    decode_properties,
    encode_properties,
    encode_property_bytes,
    has_queue_entry,
    host_flags,
    stored_properties_of,
    stored_property_values,
)
from .recovery import next_valid_message as next_valid_after

#: RocketMQ topic names (``TopicValidator``): ``[%|a-zA-Z0-9_-]``, at most 127 characters; a
#: peer's characters RocketMQ lacks are escaped as ``%XX``.
# A stored name may be up to 32767 long (a 5.1+ broker writes a longer topic as a v2 message); the
# destination store refuses a name its broker version cannot store.
TOPICS = TopicRules("RocketMQ", WORD_CHARS + "%|_-", "[%|a-zA-Z0-9_-]", TOPIC_MAX_LENGTH_V2, "%")

# -- RocketMQ fields as headers ---------------------------------------------------------
#: Most body bytes one commitlog write of a conversion holds (with ``options.batch_records``
#: messages): what bounds a writer's memory whatever the message sizes.
WRITE_BYTES = 32 << 20
#: Messages of a batch the source side reads (:func:`entry_batches`).  A writer's pending rows and the
#: steps in flight keep several alive (a row holds its whole batch): 1M messages into Kafka peaked at
#: 310 MB of anonymous memory (355 MB with zstd) with 64k-message batches, 152-179 MB (163-197 MB)
#: with 32k, for 4-8% more time.
SOURCE_BATCH_ROWS = 1 << 15
#: Threads that build the source's batches at most (:func:`_source_batches`): a round holds a region
#: of SOURCE_BATCH_ROWS messages and its batch per thread (about 12 MB of 100-byte messages), which
#: the conversion's memory budget (300 MB) must hold beside its queued items.
BUILD_THREADS = 4
RMQ_PROPERTY_PREFIX = "rmq.p."
RMQ_PROPERTY_PREFIX_BYTES = RMQ_PROPERTY_PREFIX.encode()
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

# -- a peer's fields as properties (each after ``<peer name>``) ------------------------------
P_OFFSET = ".offset"
P_KEY = ".key"
#: An empty key (not a null one): its base64 in ``P.key`` would be an empty value, a pair the broker's
#: decoder drops (RocketMQ 4.9.7 MessageDecoder.string2messageProperties), so a flag as for a null value.
P_EMPTY_KEY = ".empty_key"
P_NULL_VALUE = ".null_value"
P_TIMESTAMP_TYPE = ".timestamp_type"
P_HEADERS = ".headers"
P_TXN = ".txn"
P_PRODUCER = ".producer"
P_CONTROL = ".control"
_FLAG_TRUE = "1"
_KEY_FORBIDDEN = frozenset(KEY_SEPARATOR + NAME_VALUE_SEPARATOR + PROPERTY_SEPARATOR + "\t\n\r\x0b\x0c")

TIMESTAMP_SOURCES = ("born", "store")
#: Distinct hosts whose text form is cached (hosts repeat across millions of messages).
HOST_CACHE_SIZE = 4096


def nonqueued_topic(peer: Peer) -> str:
    """The peer topic of the messages no consume queue points at: ``rmq`` + the peer's escape +
    ``nonqueued`` (``n`` starts no escape, so no escaped RocketMQ name is this name)."""
    return f"rmq{peer.topics.escape}nonqueued"


def peer_topic(topic: str, peer: Peer) -> str:
    """The peer's name of a RocketMQ topic with no message to tell whether it came from the peer:
    the peer name it was escaped from if it reads as one (``orders%2Ev1`` -> ``orders.v1``), else
    its own name escaped (``%RETRY%g`` -> ``.25RETRY.25g``).  :func:`queue_topic` is its inverse (a
    name that reads as an escape both ways, ``x%2E25``, may come back under the other reading)."""
    try:
        return unescape(topic, peer.topics, TOPICS)
    except InvalidTopicError:
        return escape(topic, TOPICS, peer.topics)


def queue_topic(name: str, peer: Peer) -> str:
    """The RocketMQ topic of a peer's topic ``name`` with no record to tell whether it came from
    RocketMQ (the inverse of :func:`peer_topic`)."""
    try:
        return unescape(name, TOPICS, peer.topics)
    except InvalidTopicError:
        return escape(name, peer.topics, TOPICS)


def _check_queue(store: Any, extent: Extent, peer: Peer) -> None:
    """:raises InvalidTopicError: the queue ``store`` would put ``extent``'s records in is one it refuses
        (``RocketMQStore.check_destinations``), naming the peer's topic and partition."""
    topic = queue_topic(extent.topic, peer)
    try:
        store.check_destinations([(topic, extent.partition)])
    except (InvalidTopicError, InvalidMessageError) as err:
        version = ".".join(map(str, V2_FROM_VERSION))
        long_refused = len(topic) > TOPIC_MAX_LENGTH and store.config.topic_max_length == TOPIC_MAX_LENGTH
        hint = (f" (a store of rocketmqVersion {version} or later takes topics of up to "
                f"{TOPIC_MAX_LENGTH_V2} characters, as v2 messages: --config rocketmqVersion={version})"
                if long_refused else "")
        name = f"{cut(extent.topic)}-{extent.partition}"
        raise InvalidTopicError(f"expected the {peer.name} partition {name} as a queue of the RocketMQ "
                                f"store, found it refused: {err.message}{hint}") from err


def is_queued(msg: RocketMQMessage) -> bool:
    """False for prepared and rolled-back transaction messages, which get no consume-queue entry."""
    return has_queue_entry(msg.sys_flag)


def came_from(msg: RocketMQMessage, peer: Peer) -> bool:
    """True if ``msg`` was written from an entry of ``peer`` (it has ``<peer>.offset``)."""
    return peer.name + P_OFFSET in msg.properties


def came_from_rocketmq(headers: list[Header]) -> bool:
    """True if an entry with these headers was made by :func:`to_entry`."""
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


# -- RocketMQ -> entry ---------------------------------------------------------------------

def to_entry(msg: RocketMQMessage, peer: Peer, *, timestamp: str = "born") -> Entry:
    """The entry for a RocketMQ message (a native one, or one written from an entry of ``peer``).

    A non-queued message gets offset -1: the caller numbers :func:`nonqueued_topic`.

    :param timestamp: ``"born"`` (CreateTime) or ``"store"`` (LogAppendTime).
    :raises InvalidTopicError: the topic has no name in the peer (too long once escaped).
    :raises ConversionError: a message carrying ``<peer>.*`` properties that do not parse.
    """
    if came_from(msg, peer):
        return restore_entry(msg, peer)
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
        topic, partition, offset = escape(msg.topic, TOPICS, peer.topics), msg.queue_id, msg.queue_offset
    else:
        topic, partition, offset = nonqueued_topic(peer), 0, -1
        headers += [(H_TOPIC, msg.topic.encode("utf-8")), (H_QUEUE_ID, b"%d" % msg.queue_id),
                    (H_QUEUE_OFFSET, b"%d" % msg.queue_offset)]
    properties = msg.properties
    stored = stored_property_values(properties)
    if stored is None:
        headers += [(RMQ_PROPERTY_PREFIX + name, value.encode("utf-8", "surrogatepass"))
                    for name, value in properties.items()]
    else:
        # properties stored as bytes that are not UTF-8: each name and value as stored (the way back
        # writes those bytes again), not Java's text of them (EF BF BD for each U+FFFD); a name's
        # header key is a JavaText keeping ``rmq.p.`` + its bytes, which the peer's writer stores
        headers += [(_property_key(name, stored[name][0]), stored[name][1]) for name in properties]
    keys = properties.get(PROPERTY_KEYS)
    key = next((k for k in keys.split(KEY_SEPARATOR) if k), None) if keys else None
    if timestamp == "born":
        ts, ts_type = msg.born_timestamp, CREATE_TIME
    elif timestamp == "store":
        ts, ts_type = msg.store_timestamp, LOG_APPEND_TIME
    else:
        raise ConversionError(f"expected a timestamp source of {', '.join(TIMESTAMP_SOURCES)}, "
                              f"found {timestamp!r}")
    return Entry(topic=topic, partition=partition, offset=offset, timestamp=ts,
                 key=key.encode("utf-8") if key else None, value=msg.body,
                 headers=headers, timestamp_type=ts_type)


def restore_entry(msg: RocketMQMessage, peer: Peer) -> Entry:
    """The entry of ``peer`` that :func:`from_entry` made ``msg`` from (its exact inverse).

    :raises ConversionError: a ``<peer>.*`` property that does not parse or holds what no record can
        (an offset or producer id past ``long``, an epoch past ``short``, a timestamp type or flag
        value :func:`from_entry` does not write), naming the message and the property.
    """
    props = msg.properties
    prefix = peer.name
    name = prefix + P_OFFSET
    try:
        offset = _property_int(props, name, (0, _INT64[1]))
        name = prefix + P_KEY
        if name in props:
            key: bytes | None = base64.b64decode(props[name], validate=True)
        elif _property_flag(props, prefix + P_EMPTY_KEY):
            key = b""
        else:
            # (a copy made before P_EMPTY_KEY holds an empty key as an empty P.key, which the broker's
            # decoder drops: it reads as a null key)
            key = props[PROPERTY_KEYS].encode("utf-8") if PROPERTY_KEYS in props else None
        name = prefix + P_HEADERS
        headers = _property_headers(props.get(name, "[]"))
        name = prefix + P_TXN if prefix + P_TXN in props else prefix + P_PRODUCER
        producer_id, producer_epoch = _property_producer(props.get(name))
        name = prefix + P_TIMESTAMP_TYPE
        timestamp_type = _property_choice(props, name, (CREATE_TIME, LOG_APPEND_TIME))
        name = prefix + P_NULL_VALUE
        null_value = _property_flag(props, name)
        name = prefix + P_CONTROL
        control = _property_flag(props, name)
        name = "topic"
        topic = unescape(msg.topic, peer.topics, TOPICS)
    except (ValueError, TypeError, KeyError, binascii.Error, InvalidTopicError) as err:
        found = {k: v for k, v in props.items() if k.startswith(prefix + ".")}
        raise ConversionError(f"expected the {prefix}.* properties of a converted {prefix} record at "
                              f"{msg.topic}/{msg.queue_id} queue offset {msg.queue_offset} (physical offset "
                              f"{msg.physical_offset}), found {name} {cut(props.get(name))} ({err}) in "
                              f"{cut(found)}") from err
    return Entry(
        topic=topic, partition=msg.queue_id, offset=offset, timestamp=msg.born_timestamp, key=key,
        value=None if null_value else msg.body, headers=headers, timestamp_type=timestamp_type,
        transactional=prefix + P_TXN in props, control=control, producer_id=producer_id,
        producer_epoch=producer_epoch)


def _property_int(props: dict[str, str], name: str, bounds: tuple[int, int]) -> int:
    """The decimal property ``name`` within ``bounds``.

    :raises ValueError: it does not parse or lies outside them (the caller names the message).
    """
    value = int(props[name])
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"expected a decimal in [{bounds[0]}, {bounds[1]}]")
    return value


def _property_headers(text: str) -> list[Header]:
    """The record headers of a ``<peer>.headers`` property (JSON ``[[name, base64 or null], ...]``, an
    item whose name was not UTF-8 with its bytes' base64 third: :func:`_header_item`).

    :raises ValueError: another JSON shape, a value that is not base64, or name bytes that are UTF-8 or
        that Java reads as another text than the name.
    """
    items = json.loads(text)
    headers: list[Header] = []
    for item in items if isinstance(items, list) else [items]:
        if not (isinstance(item, list) and len(item) in (2, 3) and all(isinstance(i, str) for i in item[::2])
                and (item[1] is None or isinstance(item[1], str))):
            raise ValueError(f"expected [name, base64 or null] or [name, base64 or null, name base64] items "
                             f"in an array, found {cut(item)}")
        name = item[0]
        if len(item) == 3:
            name = java_text(base64.b64decode(item[2], validate=True))
            if not isinstance(name, JavaText):
                raise ValueError(f"expected a header name's base64 of bytes that are not UTF-8, found the "
                                 f"UTF-8 of {cut(name)}")
            if name != item[0]:
                raise ValueError(f"expected a header name's base64 of bytes that read as {cut(item[0])}, "
                                 f"found {cut(name)}")
        headers.append((name, None if item[1] is None else base64.b64decode(item[1], validate=True)))
    return headers


def _header_item(name: str, value: bytes | None) -> list[str | None]:
    """A record header as a ``<peer>.headers`` item: ``[name, base64 or null]``, and for a key that is
    not UTF-8 (a :class:`segstore.javatext.JavaText`: Kafka 3.8 ``DefaultRecord.readHeaders`` keeps a
    key's bytes, ``RecordHeader.key()`` reads them as Java's text) its bytes' base64 third, which the
    way back writes again: the name alone is that text, a U+FFFD for each malformed sequence."""
    item = [name, None if value is None else base64.b64encode(value).decode("ascii")]
    raw = getattr(name, "raw", None)
    if raw is not None:
        item.append(base64.b64encode(raw).decode("ascii"))
    return item


def _property_producer(text: str | None) -> tuple[int, int]:
    """``producerId,producerEpoch`` of a ``<peer>.txn`` / ``<peer>.producer`` property (none: -1, -1),
    as a record batch holds them (Kafka 3.8.0 ``DefaultRecordBatch``: a ``long`` and a ``short``).

    :raises ValueError: another form, or a number out of that range.
    """
    if text is None:
        return NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    parts = text.split(",")
    ids = [int(part) for part in parts]
    if len(ids) != 2 or not (-1 <= ids[0] <= _INT64[1] and -1 <= ids[1] <= _INT16[1]):
        raise ValueError(f"expected producerId,producerEpoch in [-1, {_INT64[1]}], [-1, {_INT16[1]}]")
    return ids[0], ids[1]


def _property_choice(props: dict[str, str], name: str, choices: tuple[str, ...]) -> str:
    """The property ``name``, one of ``choices`` (the first when absent).

    :raises ValueError: another value.
    """
    value = props.get(name, choices[0])
    if value not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}")
    return value


def _property_flag(props: dict[str, str], name: str) -> bool:
    """Whether the flag property ``name`` (``1`` or absent, as :func:`from_entry` writes it) is set.

    :raises ValueError: it holds anything else (read as absent before).
    """
    if name not in props:
        return False
    if props[name] != _FLAG_TRUE:
        raise ValueError(f"expected {_FLAG_TRUE} or no such property")
    return True


# -- entry -> RocketMQ -----------------------------------------------------------------------

def _plain_key(key: bytes) -> str | None:
    """``key`` as text if ``KEYS`` can carry it unchanged (one token, UTF-8), else None."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or _KEY_FORBIDDEN.intersection(text):
        return None
    return text


def from_entry(entry: Entry, peer: Peer, *, store_host: Host) -> RocketMQMessage:
    """The RocketMQ message for an entry of ``peer`` (a foreign one, or one :func:`to_entry` made).

    A foreign entry gets ``store_host`` as both hosts; the store assigns queue and
    physical offsets.

    :raises InvalidTopicError: the topic has no RocketMQ name (too long once escaped).
    :raises ConversionError: ``rmq.*`` headers that do not parse, or headers too large for
        RocketMQ's 32767-byte properties.
    """
    if came_from_rocketmq(entry.headers):
        return restore_message(entry, peer)
    prefix = peer.name
    props: dict[str, str] = {prefix + P_OFFSET: str(entry.offset)}
    if entry.key is not None:
        text = _plain_key(entry.key)
        if not entry.key:
            props[prefix + P_EMPTY_KEY] = _FLAG_TRUE
        elif text is None:
            props[prefix + P_KEY] = base64.b64encode(entry.key).decode("ascii")
        else:
            props[PROPERTY_KEYS] = text
    if entry.value is None:
        props[prefix + P_NULL_VALUE] = _FLAG_TRUE
    if entry.timestamp_type != CREATE_TIME:
        props[prefix + P_TIMESTAMP_TYPE] = entry.timestamp_type
    if entry.headers:
        props[prefix + P_HEADERS] = json.dumps([_header_item(name, value) for name, value in entry.headers],
                                               separators=(",", ":"), ensure_ascii=False)
    if entry.transactional:
        props[prefix + P_TXN] = f"{entry.producer_id},{entry.producer_epoch}"
    elif (entry.producer_id, entry.producer_epoch) != (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
        props[prefix + P_PRODUCER] = f"{entry.producer_id},{entry.producer_epoch}"
    if entry.control:
        props[prefix + P_CONTROL] = _FLAG_TRUE
    try:
        encode_properties(props)
    except InvalidMessageError as err:
        raise ConversionError(f"expected a record RocketMQ properties can carry at {entry.topic}-"
                              f"{entry.partition} offset {entry.offset}, found {err.message}") from err
    return RocketMQMessage(
        topic=escape(entry.topic, peer.topics, TOPICS), queue_id=entry.partition, body=entry.value or b"",
        # (an IPv6 store host sets the host bits, as 4.9.7 CommitLog.asyncPutMessage does)
        properties=props, sys_flag=(SYSFLAG_TRANSACTION_ROLLBACK if entry.control else 0)
        | host_flags(store_host, store_host),
        born_timestamp=entry.timestamp, born_host=store_host, store_timestamp=entry.timestamp,
        store_host=store_host)


#: The ranges of the message's fields (4.9.7 ``CommitLog.MessageExtEncoder.encode``: flag, sysFlag and
#: reconsumeTimes are ``int``s, the offsets and timestamps ``long``s).
_INT16 = (-(1 << 15), (1 << 15) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _header_int(fields: dict[str, bytes | None], name: str, bounds: tuple[int, int],
                default: int | None = None) -> int:
    """The decimal ``rmq.*`` header ``name`` within ``bounds`` (``default`` when absent; required when
    None).

    :raises ValueError: naming the header and what it holds (the caller names the record).
    """
    if name not in fields and default is not None:
        return default
    text = fields[name]
    try:
        value = int(text or b"")
    except ValueError:
        value = None
    if value is None or not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"expected {name} a decimal in [{bounds[0]}, {bounds[1]}], found {text!r}")
    return value


_RMQ_PREFIX = "rmq."


def _repeated(name: str) -> None:
    """A header ``to_entry`` writes once (each property, each field) found again.

    :raises ValueError: naming it (the caller names the record); the last one was taken silently.
    """
    raise ValueError(f"expected one {name} header, found it again")


def _header_flag(fields: dict[str, bytes | None], name: str, text: bytes) -> bool:
    """Whether the ``rmq.*`` header ``name``, which ``to_entry`` writes as ``text`` or not at all, is
    there.

    :raises ValueError: it holds anything else (another ``rmq.magic`` was read as v1 before).
    """
    if name not in fields:
        return False
    if fields[name] != text:
        raise ValueError(f"expected {name} {text.decode()} or no such header, found {fields[name]!r}")
    return True


def restore_message(entry: Entry, peer: Peer) -> RocketMQMessage:
    """The RocketMQ message :func:`to_entry` made ``entry`` from (its exact inverse).

    ``physical_offset`` and ``queue_offset`` are the source's; the writer checks the
    destination puts the message at the same place.

    :raises ConversionError: missing or malformed ``rmq.*`` headers.
    """
    fields: dict[str, bytes | None] = {}
    values: dict[str | bytes, bytes] = {}    # by name: its text, or its bytes where not UTF-8
    try:
        for name, value in entry.headers:
            if name.startswith(RMQ_PROPERTY_PREFIX):
                raw = getattr(name, "raw", None)     # a header key that is not UTF-8 (a JavaText)
                prop = name[_PROPERTY_PREFIX_LENGTH:] if raw is None else raw[_PROPERTY_PREFIX_LENGTH:]
                if prop in values:
                    _repeated(name)
                values[prop] = value or b""
            else:
                if name in fields and name.startswith(_RMQ_PREFIX):
                    _repeated(name)
                fields[name] = value
        if entry.topic == nonqueued_topic(peer):
            topic = (fields[H_TOPIC] or b"").decode("utf-8")
            queue_id = _header_int(fields, H_QUEUE_ID, (0, MAX_QUEUE_ID))
        else:
            topic, queue_id = unescape(entry.topic, TOPICS, peer.topics), entry.partition
        msg = RocketMQMessage(
            topic=topic, queue_id=queue_id, body=entry.value or b"",
            flag=_header_int(fields, H_FLAG, _INT32, 0),
            queue_offset=_header_int(fields, H_QUEUE_OFFSET, _INT64, entry.offset),
            physical_offset=_header_int(fields, H_PHYSICAL_OFFSET, _INT64),
            sys_flag=_header_int(fields, H_SYS_FLAG, _INT32, 0),
            born_timestamp=_header_int(fields, H_BORN_TIMESTAMP, _INT64),
            born_host=_parse_host(fields[H_BORN_HOST] or b""),
            store_timestamp=_header_int(fields, H_STORE_TIMESTAMP, _INT64),
            store_host=_parse_host(fields[H_STORE_HOST] or b""),
            reconsume_times=_header_int(fields, H_RECONSUME_TIMES, _INT32, 0),
            prepared_transaction_offset=_header_int(fields, H_PREPARED_OFFSET, _INT64, 0),
            magic=MESSAGE_MAGIC_V2 if _header_flag(fields, H_MAGIC, MAGIC_V2_TEXT) else MESSAGE_MAGIC,
            trailing_separator=_header_flag(fields, H_TRAILING_SEPARATOR, TRAILING_TEXT))
    except (ValueError, KeyError, InvalidMessageError, InvalidTopicError) as err:
        raise ConversionError(f"expected the rmq.* headers of a converted RocketMQ message in "
                              f"{entry.topic}-{entry.partition} at offset {entry.offset}, found "
                              f"{[name for name, _ in entry.headers]} ({err!r})") from err
    try:    # checked here, where the record is known: the writer's error would name no record
        msg.properties = _restored_properties(values, msg.trailing_separator)
    except InvalidMessageError as err:
        raise ConversionError(f"expected a record RocketMQ properties can carry at {entry.topic}-"
                              f"{entry.partition} offset {entry.offset}, found {err.message}") from err
    return msg


def _property_key(name: str, raw: bytes) -> str:
    """The header key of a stored property name: ``rmq.p.NAME``, a :class:`segstore.javatext.JavaText`
    keeping ``rmq.p.`` + the name's bytes where they are not UTF-8 (Java's text of those bytes)."""
    key = java_text(RMQ_PROPERTY_PREFIX_BYTES + raw)
    return key if isinstance(key, JavaText) else RMQ_PROPERTY_PREFIX + name


def _restored_properties(values: dict[str | bytes, bytes], trailing: bool) -> dict[str, str]:
    """The properties of a message's ``rmq.p.*`` headers (name, value as stored; a name given as bytes
    is a header key's that is not UTF-8): their text where every name and value is UTF-8; else the
    bytes as they are (:func:`.message.encode_property_bytes`), which the
    message keeps and writes again (a :class:`.message.JavaProperties`, read as RocketMQ 4.9.7 reads
    them, a U+FFFD for each malformed sequence), so a store copied through the peer comes back byte
    for byte, and the peer's copy of it again (:func:`to_entry` gives the stored values).  (Java's
    text alone would not: no Java String encodes to ``ED A0 80``, its encoder writes '?' for a lone
    surrogate, and a value that is not UTF-8 would come back as EF BF BD.)

    :raises InvalidMessageError: a property the format cannot carry (a separator in a name or a
        value, more than 32767 bytes).
    """
    texts: dict[str, str] | None = None
    if all(isinstance(name, str) for name in values):
        with contextlib.suppress(UnicodeDecodeError):
            texts = {str(name): value.decode("utf-8") for name, value in values.items()}
    if texts is None:
        pairs = [(name if isinstance(name, bytes) else name.encode("utf-8", "surrogatepass"), value)
                 for name, value in values.items()]
        return decode_properties(encode_property_bytes(pairs, trailing), java_text=True)
    encode_properties(texts, trailing)
    return texts


# -- the source side -------------------------------------------------------------------------

def _messages(source: Any, options: Options) -> Iterator[RocketMQMessage]:
    """Every commitlog message in physical order (with ``decompress_bodies`` as consumers read it:
    the store's ``consumed``); with ``skip_corrupt`` damaged bytes are reported and reading goes on at
    the next valid message (found as recovery finds it)."""
    commitlog = source.commitlog
    start: int | None = None
    while True:
        try:
            for _, record in commitlog.walk(start):
                if isinstance(record, RocketMQMessage):
                    yield source.consumed(record) if options.decompress_bodies else record
        except CorruptDataError as err:
            if not options.skip_corrupt:
                raise
            options.skipped.append(str(err))
            start = _next_valid_message(commitlog, err.path, err.pos or 0)
            if start is not None:
                continue
        return


def _readable(store: Any, topic: str, queue_id: int, offsets: range, skip_corrupt: bool
              ) -> RocketMQMessage | None:
    """The message at the first of ``offsets`` of a queue, None when it has none there; with
    ``skip_corrupt`` the first that reads (the pass over the commitlog reports the damaged ones).

    :raises CorruptDataError: a damaged message, without ``skip_corrupt``.
    """
    for offset in offsets:
        try:
            return next(store.read(topic, queue_id, offset, 1), None)
        except CorruptDataError:
            if not skip_corrupt:
                raise
    return None


def _next_valid_message(commitlog: Any, path: str | None, pos: int) -> int | None:
    """The physical offset of the first valid message after file position ``pos`` of ``path``."""
    segments = list(commitlog.log.segments)
    index = next((i for i, seg in enumerate(segments) if seg.path == path), None)
    if index is None:
        return None
    found = next_valid_after(segments, index, pos)
    return None if found is None else segments[found[0]].base + found[1]


def pairs(source: Any, options: Options) -> Iterator[tuple[RocketMQMessage, Entry]]:
    """``(source message, entry)`` for each selected source message, in commitlog order;
    non-queued messages numbered in :func:`nonqueued_topic`."""
    nonqueued = 0
    topics = options.topics
    for msg in _messages(source, options):
        if topics is not None and msg.topic not in topics:
            continue
        entry = to_entry(msg, options.peer, timestamp=options.timestamp)
        if entry.offset < 0:
            entry.offset = nonqueued
            nonqueued += 1
        yield msg, entry


def _sized(source: Any, options: Options) -> Iterator[Sized]:
    for msg, entry in pairs(source, options):
        yield entry, msg.size


def _round_trips(source: Any, options: Options) -> Iterator[Sized]:
    """:func:`_sized`, checking each native message comes back whole from its entry (``--verify``:
    the entry must give back every field, not only what the mapping made of it)."""
    for msg, entry in pairs(source, options):
        if not came_from(msg, options.peer):
            problem = _restored_problem(msg, entry, options.peer)
            if problem is not None:
                options.problems.append(f"{entry.topic}-{entry.partition} offset {entry.offset}: {problem}")
        yield entry, msg.size


def message_fields(msg: RocketMQMessage, restored: bool) -> tuple:
    """What a conversion keeps of a message: every field (with properties in order, offsets, magic
    and style, and their stored bytes where they are not UTF-8: two byte strings RocketMQ 4.9.7 reads
    as one text, ``new String(bytes, UTF_8)``, differ) when restored, the rest (properties as a set)
    when written from a foreign entry."""
    common = (msg.topic, msg.queue_id, msg.body, msg.flag, msg.sys_flag, msg.born_timestamp, msg.born_host,
              msg.store_timestamp, msg.store_host, msg.reconsume_times, msg.prepared_transaction_offset)
    # the pairs a reader sees: an empty name or value (an rmq.p.* header of an older copy) is written, and
    # dropped on reading as RocketMQ 4.9.7 MessageDecoder.string2messageProperties drops it
    properties = [(name, value) for name, value in msg.properties.items() if name and value]
    if restored:
        return (*common, properties, stored_properties_of(msg.properties), msg.physical_offset,
                msg.queue_offset, msg.magic, msg.trailing_separator)
    return (*common, sorted(properties))


def _restored_problem(msg: RocketMQMessage, entry: Entry, peer: Peer) -> str | None:
    """What ``entry`` gives back differently from the message it was made from."""
    try:
        back = restore_message(entry, peer)
    except ConversionError as err:
        return str(err)
    want, got = message_fields(msg, True), message_fields(back, True)
    return None if got == want else f"expected the message back as {want}, found {got}"


# -- the source side in columns ---------------------------------------------------------------

#: The ``scan_arrow`` columns a columnar conversion reads.
_SOURCE_COLUMNS = ("key", "value", "topic", "partition", "offset", "bornTimestamp", "storeTimestamp",
                   "bornHost", "storeHost", "msgId", "physicalOffset", "sysFlag", "flag", "reconsumeTimes",
                   "preparedTransactionOffset", "magic", "size", "headers")
_SOURCE_SCHEMA = pa.schema([ROCKETMQ_SCHEMA.field(name) for name in _SOURCE_COLUMNS])
#: The property separator byte that may end a message's properties (the broker version's style).
_SEPARATOR_BYTE = PROPERTY_SEPARATOR.encode()[0]


class _Numbering:
    """The next offset in :func:`nonqueued_topic` (numbered over the whole run)."""

    def __init__(self) -> None:
        self.next = 0


def _built(view: memoryview, rows: columnar.Rows
           ) -> tuple[memoryview, columnar.Rows, pa.RecordBatch, np.ndarray]:
    """The rows' :data:`_SOURCE_SCHEMA` batch and, per row, whether its properties end in a separator
    (pure: run on the walking threads)."""
    batch = columnar.build_batch(view, rows, _SOURCE_SCHEMA)
    lengths, ends = rows["props_len"], rows["props_pos"] + rows["props_len"] - 1
    has = lengths > 0
    trailing = np.zeros(len(lengths), bool)
    trailing[has] = np.frombuffer(view, np.uint8)[ends[has]] == _SEPARATOR_BYTE
    return view, rows, batch, trailing


def _source_batches(source: Any) -> Iterator[tuple[memoryview, columnar.Rows, pa.RecordBatch, np.ndarray]]:
    """:func:`_built` of the source's commitlog regions in log order, built on the default number of
    threads (``SEGSTORE_THREADS``, else the cores; :data:`BUILD_THREADS` at most): the regions
    walked on this thread, a round of them at a time built at once
    (:func:`segstore.overlap.in_rounds`).  The batches are those of one thread, cut in the same
    places (a Kafka target's record batches follow them), which a walk split by byte ranges would
    not keep.  An error of the walk comes after the batches before it.
    """
    regions = source._region_rows(None, None, SOURCE_BATCH_ROWS)
    threads = min(thread_count(None), BUILD_THREADS)
    if threads == 1:
        for view, rows in regions:
            yield _built(view, rows)
        return
    for _, made, error in in_rounds(regions, lambda region: _built(*region), threads, threads):
        if error is not None:
            raise error
        assert made is not None
        yield made


def entry_batches(source: Any, options: Options) -> Iterator[pa.RecordBatch]:
    """:func:`pairs`' entries as ``ENTRY_SCHEMA`` batches, built from the commitlog's columns.

    A batch holding a message written from an entry of the peer (``<peer>.offset``), or a message whose
    properties are not UTF-8, is mapped message by message (:func:`to_entry` restores them); the
    others in columns.
    """
    numbering = _Numbering()
    marker = options.peer.name + P_OFFSET
    wanted = None if options.topics is None else arrays.texts(list(options.topics), pa.string())
    for view, rows, batch, trailing in _source_batches(source):
        if options.decompress_bodies:
            batch = _consumed_batch(source, rows, batch)
        keep = None
        if wanted is not None:
            keep = pc.is_in(batch.column("topic"), value_set=wanted)
            chosen = arrays.to_numpy(keep, np.bool_)
            batch, trailing = batch.filter(keep), trailing[chosen]
        if not batch.num_rows:
            continue
        names = pc.list_flatten(batch.column("headers")).flatten()[0]
        # a row columnar.java_row built (properties that are not UTF-8, its own view): to_entry gives
        # the stored values, which its columns (Java's text) do not hold
        if rows.view is not None or pc.any(pc.equal(names, arrays.string_scalar(marker))).as_py():
            msgs = columnar.messages(view, rows)
            if options.decompress_bodies:
                msgs = [source.consumed(m) for m in msgs]
            if keep is not None:
                msgs = [m for m, k in zip(msgs, keep.to_pylist(), strict=True) if k]
            yield _entries_batch(msgs, options, numbering)
        else:
            try:
                native = _native_batch(batch, trailing, options, numbering)
            except InvalidTopicError as err:
                raise _stored_topic_error(source, batch) or err from err
            yield native


def _consumed_batch(source: Any, rows: columnar.Rows, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` of ``rows`` with its bodies as consumers read them, still one batch (its rows stay
    those of ``rows``: the caller reads both).

    :raises ConversionError: the inflated bodies of the batch pass binary's 2 GiB.
    """
    pieces = list(bodycodec.consumer_batches(batch, rows["sys_flag"], rows["position"], source._locate,
                                             max_bytes=2**31 - 1))
    if len(pieces) > 1:
        raise ConversionError(f"expected the inflated bodies of {batch.num_rows} messages from commitlog "
                              f"offset {int(rows['position'][0])} to fit 2 GiB, found more: convert "
                              "without --decompress-bodies", source.path)
    return pieces[0]


def _stored_topic_error(source: Any, batch: pa.RecordBatch) -> CorruptDataError | None:
    """The error naming the first message of ``batch`` whose stored topic the broker refuses (damage
    to its bytes: the broker never stores such a name), or None when every topic is one (then it
    is the peer that has no name for it)."""
    for i, name in enumerate(batch.column("topic").to_pylist()):
        try:
            TOPICS.check(name)
        except InvalidTopicError as err:
            phy = batch.column("physicalOffset")[i].as_py()
            seg = source.commitlog.file_for(phy)
            return CorruptDataError(f"expected a stored topic the broker accepts, found: {err.message}",
                                    seg.path, phy - seg.base)
    return None


def _entries_batch(msgs: list[RocketMQMessage], options: Options, numbering: _Numbering) -> pa.RecordBatch:
    """``ENTRY_SCHEMA`` rows of messages mapped one by one (:func:`to_entry`)."""
    entries = []
    for msg in msgs:
        entry = to_entry(msg, options.peer, timestamp=options.timestamp)
        if entry.offset < 0:
            entry.offset = numbering.next
            numbering.next += 1
        entries.append(entry)
    return entries_to_batch(entries, [m.size for m in msgs])


def entries_to_batch(entries: list[Entry], sizes: list[int]) -> pa.RecordBatch:
    """Entries as one ``ENTRY_SCHEMA`` batch (``sizes``: their source bytes)."""
    columns = {
        "key": [e.key for e in entries], "value": [e.value for e in entries],
        "topic": [e.topic for e in entries],
        "partition": [e.partition for e in entries], "offset": [e.offset for e in entries],
        "timestamp": pa.array([e.timestamp for e in entries], pa.int64()).cast(TIMESTAMP),
        "timestampType": [int(e.timestamp_type == LOG_APPEND_TIME) for e in entries],
        "headers": [[{"key": k, "value": v} for k, v in e.headers] for e in entries],
        "isTransactional": [e.transactional for e in entries], "isControl": [e.control for e in entries],
        "producerId": [e.producer_id for e in entries], "producerEpoch": [e.producer_epoch for e in entries],
        "size": sizes,
    }
    return pa.RecordBatch.from_pydict(columns, schema=ENTRY_SCHEMA)


def _decimal(values: pa.Array) -> pa.Array:
    return pc.cast(values, pa.string())


def _constant(text: bytes, n: int) -> pa.Array:
    return pa.repeat(arrays.binary_scalar(text), n)


def _pool(columns: list[pa.Array]) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """The binary/string ``columns``' data back to back, with each element's start and length in it."""
    datas, starts, lengths = [], [], []
    base = 0
    for arr in columns:
        offsets, buffer = binary_buffers(arr)
        data = np.frombuffer(buffer, np.uint8)
        datas.append(data)
        starts.append(offsets[:-1].astype(np.int64) + base)
        lengths.append(np.diff(offsets))
        base += len(data)
    return np.concatenate(datas).data, np.concatenate(starts), np.concatenate(lengths).astype(np.int32)


def _text_values(values: pa.Array | bytes, n: int) -> pa.Array:
    """A header slot's values as text: ints in decimal, one text repeated, a text column as it is."""
    if isinstance(values, bytes):
        return _constant(values, n)
    if pa.types.is_integer(values.type):
        return _decimal(values)
    return values


def _header_lists(n: int, slots: list[tuple[str, pa.Array | bytes, np.ndarray]], prop_offsets: np.ndarray,
                  names: pa.Array, values: pa.Array) -> pa.Array:
    """The ``headers`` column: each row's ``slots`` it has (name, its value) in order, then its
    properties (``rmq.p.`` + name, value; row i's are items ``prop_offsets[i]:prop_offsets[i + 1]``).
    Numpy gathers; :func:`_header_lists_c` is the same in one C pass."""
    mask = np.stack([m for _, _, m in slots], axis=1)               # n x slots
    fixed = mask.sum(axis=1)
    counts = fixed + np.diff(prop_offsets)
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    total = int(out_offsets[-1])
    n_slots = len(slots)
    # where each header comes from: slot s's value of row i is pool entry s * n + i, then the properties
    source = np.empty(total, np.int64)
    rank = np.cumsum(mask, axis=1) - 1
    row, slot = np.nonzero(mask)                                     # row-major: each row's slots in order
    source[out_offsets[row] + rank[row, slot]] = slot.astype(np.int64) * n + row
    m = len(names)
    prop_rows = np.repeat(np.arange(n), np.diff(prop_offsets))
    within = np.arange(m) - prop_offsets[prop_rows]
    source[out_offsets[prop_rows] + fixed[prop_rows] + within] = n_slots * n + np.arange(m)
    value_pool, value_starts, value_lengths = _pool([_text_values(v, n) for _, v, _ in slots] + [values])
    key_pool, key_starts, key_lengths = _pool([pa.array([name for name, _, _ in slots], pa.string()),
                                               pc.binary_join_element_wise(RMQ_PROPERTY_PREFIX, names, "")])
    key_index = np.where(source < n_slots * n, source // max(n, 1), source - n_slots * n + n_slots)
    return pa.ListArray.from_arrays(
        pa.array(out_offsets, pa.int32()),
        pa.StructArray.from_arrays(
            [columnar.variable_column(pa.string(), key_pool, key_starts[key_index], key_lengths[key_index]),
             columnar.variable_column(pa.binary(), value_pool, value_starts[source], value_lengths[source])],
            fields=list(HEADER)))


def _header_lists_c(n: int, slots: list[tuple[str, pa.Array | bytes, np.ndarray]], prop_offsets: np.ndarray,
                    names: pa.Array, values: pa.Array) -> pa.Array | None:
    """:func:`_header_lists` in one pass of the C accelerator (``header_lists``); None without it or
    with a null in any column it reads (the numpy path keeps those)."""
    speedups = columnar._speedups
    if speedups is None or names.null_count or values.null_count:
        return None
    # (header name, kind, its one or two buffers, the rows having it or None for all)
    specs: list[tuple[bytes, int, Any, Any, np.ndarray | None]] = []
    for name, column, mask in slots:
        has = None if mask.all() else np.ascontiguousarray(mask, np.uint8)
        if isinstance(column, bytes):
            specs.append((name.encode(), 2, column, None, has))
        elif column.null_count:
            return None
        elif pa.types.is_integer(column.type):
            specs.append((name.encode(), 0, arrays.int64s(column), None, has))
        else:
            specs.append((name.encode(), 1, *binary_buffers(column), has))
    buffers = speedups.header_lists(n, tuple(specs), (RMQ_PROPERTY_PREFIX.encode(), prop_offsets,
                                                      *binary_buffers(names), *binary_buffers(values)))
    lists, key_offsets, keys, value_offsets, texts = (pa.py_buffer(b) for b in buffers)
    items = len(value_offsets) // 4 - 1
    return pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, lists]),
        pa.StructArray.from_arrays(
            [pa.Array.from_buffers(pa.string(), items, [None, key_offsets, keys]),
             pa.Array.from_buffers(pa.binary(), items, [None, value_offsets, texts])],
            fields=list(HEADER)))


def _native_batch(batch: pa.RecordBatch, trailing: np.ndarray, options: Options,
                  numbering: _Numbering) -> pa.RecordBatch:
    """:func:`to_entry` of native messages, in columns: the ``rmq.*`` headers of every row gathered
    in the order :func:`to_entry` puts them, then the ``rmq.p.*`` properties."""
    n = batch.num_rows
    col = batch.column

    def ints(name: str) -> np.ndarray:
        return arrays.int64s(col(name))

    sys_flag, flag, reconsume = ints("sysFlag"), ints("flag"), ints("reconsumeTimes")
    prepared, magic = ints("preparedTransactionOffset"), ints("magic")
    transaction = sys_flag & SYSFLAG_TRANSACTION_MASK
    queued = (transaction != SYSFLAG_TRANSACTION_PREPARED) & (transaction != SYSFLAG_TRANSACTION_ROLLBACK)
    born, stored = col("bornTimestamp").cast(pa.int64()), col("storeTimestamp").cast(pa.int64())
    everyone = np.ones(n, bool)
    # (header name, its values for every row: an int column written in decimal, a text column or one
    # text for all, which rows have it)
    slots: list[tuple[str, pa.Array | bytes, np.ndarray]] = [
        (H_PHYSICAL_OFFSET, col("physicalOffset"), everyone),
        (H_BORN_TIMESTAMP, born, everyone),
        (H_BORN_HOST, col("bornHost"), everyone),
        (H_STORE_TIMESTAMP, stored, everyone),
        (H_STORE_HOST, col("storeHost"), everyone),
        (H_FLAG, col("flag"), flag != 0),
        (H_SYS_FLAG, col("sysFlag"), sys_flag != 0),
        (H_RECONSUME_TIMES, col("reconsumeTimes"), reconsume != 0),
        (H_PREPARED_OFFSET, col("preparedTransactionOffset"), prepared != 0),
        (H_MSG_ID, col("msgId"), everyone),
        (H_MAGIC, MAGIC_V2_TEXT, magic == MESSAGE_MAGIC_V2),
        (H_TRAILING_SEPARATOR, TRAILING_TEXT, trailing),
        (H_TOPIC, col("topic"), ~queued),
        (H_QUEUE_ID, col("partition"), ~queued),
        (H_QUEUE_OFFSET, col("offset"), ~queued),
    ]
    slots = [slot for slot in slots if slot[2].any()]
    props = col("headers")
    prop_offsets = arrays.int64s(props.offsets)
    prop_offsets = prop_offsets - prop_offsets[0]
    names, values = pc.list_flatten(props).flatten()
    headers = _header_lists_c(n, slots, prop_offsets, names, values)
    if headers is None:
        headers = _header_lists(n, slots, prop_offsets, names, values)
    topics = col("topic")
    peer = options.peer
    dictionary = pc.dictionary_encode(topics)
    escaped = arrays.texts([escape(name, TOPICS, peer.topics) for name in dictionary.dictionary.to_pylist()],
                           pa.string())
    topic = escaped.take(dictionary.indices)
    partition = ints("partition").astype(np.int32)
    offset = ints("offset").astype(np.int64)
    nonqueued = np.flatnonzero(~queued)
    if len(nonqueued):
        topic = pc.if_else(arrays.from_numpy(~queued), arrays.string_scalar(nonqueued_topic(peer)), topic)
        partition[nonqueued] = 0
        offset[nonqueued] = numbering.next + np.arange(len(nonqueued))
        numbering.next += len(nonqueued)
    if options.timestamp == "born":
        timestamp, kind = born, 0
    elif options.timestamp == "store":
        timestamp, kind = stored, 1
    else:
        raise ConversionError(f"expected a timestamp source of {', '.join(TIMESTAMP_SOURCES)}, "
                              f"found {options.timestamp!r}")
    return pa.RecordBatch.from_arrays([
        col("key"), col("value"), topic, arrays.from_numpy(partition), arrays.from_numpy(offset),
        timestamp.cast(TIMESTAMP), arrays.from_numpy(np.full(n, kind, np.int32)), headers,
        arrays.from_numpy(np.zeros(n, bool)), arrays.from_numpy(np.zeros(n, bool)),
        arrays.from_numpy(np.full(n, NO_PRODUCER_ID, np.int64)),
        arrays.from_numpy(np.full(n, NO_PRODUCER_EPOCH, np.int16)), arrays.from_numpy(ints("size")),
    ], schema=ENTRY_SCHEMA)


# -- the target side ----------------------------------------------------------------------------

def start_where_restored(store: Any, physical_offset: int,
                         queue_starts: Iterable[tuple[str, int, int]]) -> None:
    """Start an empty destination where the source of the restored messages about to be written
    started: its commitlog at the file holding the first one's ``physical_offset`` and each queue
    without entries at the queue offset of its first one (``queue_starts``: ``(topic, queue id,
    offset)``), as ``RocketMQStore.start_commitlog_at`` and ``start_queue_at`` do (a slave's store
    starts at its master's).  A source whose oldest commitlog files retention deleted so comes back
    whole from its Kafka copy; a destination or queue holding messages keeps its own (a message then
    placed elsewhere than in its source is :func:`_append_stored`'s error)."""
    store.start_commitlog_at(physical_offset)
    for topic, queue_id, offset in queue_starts:
        store.start_queue_at(topic, queue_id, offset)


def _append_stored(store: Any, messages: list[RocketMQMessage]) -> None:
    """Append messages exactly as given (topic, queue, properties order, times, hosts, flags),
    checking each lands at its recorded physical and queue offset.

    ``RocketMQStore.append_batch`` applies the broker's put-time rules to what it is
    given (delay-level rewrite, HashMap properties order, store clock); a message
    restored from an entry was stored once already and is written as it is with
    ``append_stored``; commitlog placement, consume queues, index, topic configs
    and flushing stay the store's own.

    :raises ConversionError: the destination placed a message elsewhere than the
        source had it (another commitlog file size, or a non-empty destination).
    """
    # a v2 message (a 5.1+ broker's long topic) is written as v2 again: its magic is part of it
    expected = [(msg.physical_offset, msg.queue_offset) for msg in messages]
    if messages:
        firsts: dict[tuple[str, int], int] = {}
        for msg in messages:
            if has_queue_entry(msg.sys_flag):
                firsts.setdefault((msg.topic, msg.queue_id), msg.queue_offset)
        start_where_restored(store, messages[0].physical_offset,
                             [(t, q, o) for (t, q), o in firsts.items()])
    results = store.append_stored(messages)
    for (physical, queue), result in zip(expected, results, strict=True):
        if (result.position, result.offset) != (physical, queue):
            raise ConversionError(
                f"expected {result.topic}/{result.partition} queue offset {queue} at physical offset "
                f"{physical} as in the source, found queue offset {result.offset} at {result.position} "
                f"(a RocketMQ store's Kafka copy comes back whole, each message at its commitlog position: "
                f"only some of its topics were chosen (--topic), the destination was not empty, its "
                f"mappedFileSizeCommitLog differs from the source's, or an earlier message was stored with "
                f"another size than in the source, as a body inflated by convert --decompress-bodies is, "
                f"or property names that were not UTF-8, which a Kafka copy made by an older segstore "
                f"holds as Java reads them (U+FFFD): "
                f"convert the original RocketMQ store)", store.path, result.position)


def _native_item(msg: RocketMQMessage) -> dict[str, Any]:
    """The ``append_batch`` item for a message made from a foreign entry (the store applies the
    broker's put-time conventions: HashMap properties order, host bits)."""
    return {"topic": msg.topic, "queue_id": msg.queue_id, "body": msg.body, "properties": msg.properties,
            "born_timestamp": msg.born_timestamp, "born_host": msg.born_host, "store_host": msg.store_host,
            "store_timestamp": msg.store_timestamp, "sys_flag": msg.sys_flag}


class RocketMQWriter(Writer):
    """Groups messages into commitlog writes of ``options.batch_records``: restored ones through
    :func:`_append_stored`, foreign ones through the store's ``append_batch``.

    Resuming, the first entries (as many as the destination holds messages) are skipped.
    """

    def __init__(self, dest: Any, options: Options, *, present: int | None = None) -> None:
        """``present``: the entries to skip (None: as many as ``dest`` holds messages)."""
        self.dest = dest
        self.peer = options.peer
        self.batch = options.batch_records
        self.store_host = Host.parse(dest.config.storeHost)
        self.body_limit = dest.config.maxMessageSize
        self.present = sum(1 for _ in dest.scan()) if present is None else present
        self.seen = 0
        self.restored: list[RocketMQMessage] = []
        self.native: list[dict[str, Any]] = []
        self.pending_bytes = 0

    def add(self, entry: Entry, size: int) -> bool:
        self.seen += 1
        restored = came_from_rocketmq(entry.headers)
        msg = from_entry(entry, self.peer, store_host=self.store_host)
        if self.seen <= self.present:
            return False
        if len(msg.body) > self.body_limit:     # (the store's own error names no record, no setting)
            raise MessageTooLargeError(
                f"expected a body of at most {self.body_limit} bytes (maxMessageSize) for {entry.topic}-"
                f"{entry.partition} offset {entry.offset}, found {len(msg.body)} (--config maxMessageSize=N "
                "takes larger ones, as the broker's own setting does)")
        if restored:
            if self.native:
                self.flush()
            self.restored.append(msg)
        else:
            if self.restored:
                self.flush()
            self.native.append(_native_item(msg))
        self.pending_bytes += len(msg.body)
        if len(self.restored) + len(self.native) >= self.batch or self.pending_bytes >= WRITE_BYTES:
            self.flush()
        return True

    def flush(self) -> None:
        self.pending_bytes = 0
        if self.restored:
            _append_stored(self.dest, self.restored)
            self.restored = []
        if self.native:
            self.dest.append_batch(self.native)
            self.native = []

    def flush_all(self) -> None:
        self.flush()


class RocketMQVerifier(Verifier):
    """The destination's messages, in commitlog order, against the messages made from the entries;
    a message made from a foreign entry must also give that entry back."""

    def __init__(self, dest: Any, options: Options) -> None:
        self.peer = options.peer
        self.store_host = Host.parse(dest.config.storeHost)
        self.actual = dest.scan()

    def check(self, entry: Entry) -> str | None:
        restored = came_from_rocketmq(entry.headers)
        expected = from_entry(entry, self.peer, store_host=self.store_host)
        found = next(self.actual, None)
        want = message_fields(expected, restored)
        got = None if found is None else message_fields(found, restored)
        if got != want:
            return f"expected {want}, found {got}"
        if not restored and found is not None:
            try:
                back = restore_entry(found, self.peer)
            except ConversionError as err:
                return f"{entry.topic}-{entry.partition} offset {entry.offset}: {err}"
            if back != entry:
                return (f"{entry.topic}-{entry.partition} offset {entry.offset}: expected the record back "
                        f"as {entry}, found {back}")
        return None

    def rest(self) -> list[str]:
        extra = next(self.actual, None)
        return [] if extra is None else [f"expected no message after the source's, found one at "
                                         f"{extra.physical_offset}"]


class RocketMQConversion(FormatConversion):
    """RocketMQ's side of a conversion (see the module docstring)."""

    topics = TOPICS
    batch_setting = "ROCKETMQ_BATCH"
    inflates_bodies = True
    chooses_timestamp = True
    home_marker = f"the header {H_PHYSICAL_OFFSET}"

    def check_config(self, config: dict[str, Any], compression: str, timestamp: str) -> None:
        """The broker config names and values given, alone (``BrokerConfig.from_mapping``).

        :raises ConfigError: a name or value the store does not take.
        """
        BrokerConfig.from_mapping(config)

    def streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """One stream: every selected message in commitlog order."""
        return [_sized(source, options)]

    def arrow_streams(self, source: Store, options: Options) -> list[Iterator[pa.RecordBatch]] | None:
        """One stream of columns (:func:`entry_batches`); None with ``skip_corrupt`` (skipping damage
        goes message by message, as recovery finds the next valid one) or without the C accelerator
        (the header columns are gathered in C; the per-entry path is the pure-Python one)."""
        if options.skip_corrupt or columnar._speedups is None:
            return None
        return [entry_batches(source, options)]

    def converted_offset(self, dest: Store, topic: str, queue: int, peer: Peer, offset: int) -> int:
        """The queue offset of the first message of ``topic``/``queue`` whose ``<peer>.offset`` is at or
        past ``offset`` (a Kafka offset in a gap, compaction's or a transaction marker's, goes to the
        next record, as a Kafka consumer's fetch does), the queue's end where none is.  A conversion
        appends a partition's records in offset order, so those properties increase along the queue; a
        message without one was appended after the conversion and counts as past them all.
        ``O(log n)`` message reads.

        :raises ConversionError: a ``<peer>.offset`` that is not a number.
        """
        name = peer.name + P_OFFSET

        def at_or_past(queue_offset: int) -> bool:
            msg = next(iter(dest.read(topic, queue, queue_offset, 1)), None)
            found = msg.properties.get(name) if isinstance(msg, RocketMQMessage) else None
            try:
                return found is None or int(found) >= offset
            except ValueError:
                raise ConversionError(f"expected the {name} property of a converted {peer.name} record at "
                                      f"{topic}-{queue} offset {queue_offset}, found {found!r}") from None

        return first_true(at_or_past, *dest.offset_range(topic, queue))

    def missing_topics(self, source: Store, names: list[str]) -> list[str]:
        """The ``names`` no message of ``source`` has as its topic: a conversion reads the commitlog, which
        may hold topics no consume queue lists (prepared transaction messages), so a name the store does
        not list is looked for in the commitlog's topic column.  Runtime complexity: ``O(1)`` for listed
        names, ``O(bytes of the commitlog)`` (stopping once every name is found) otherwise."""
        missing = set(super().missing_topics(source, names))
        for batch in source.scan_arrow(["topic"]) if missing else ():
            missing.difference_update(pc.unique(batch.column("topic")).to_pylist())
            if not missing:
                break
        return [name for name in names if name in missing]

    def round_trip_streams(self, source: Store, options: Options) -> list[Iterator[Sized]]:
        """:meth:`streams`, reporting in ``options.problems`` each message its entry does not give back."""
        return [_round_trips(source, options)]

    def entry_of(self, record: Any, peer: Peer | None = None) -> Entry:
        """A message read from a RocketMQ store as its entry for ``peer`` (non-queued ones unnumbered)."""
        if peer is None:
            raise ConversionError("expected the peer format a RocketMQ message's entry is for, found none")
        return to_entry(record, peer)

    def home_position(self, entry: Entry) -> int | None:
        """The ``rmq.physical_offset`` an entry made by :func:`to_entry` starts with."""
        if not came_from_rocketmq(entry.headers):
            return None
        text = entry.headers[0][1]
        value = _decimal_int64(text)
        if value is None:
            raise _home_error(entry.topic, entry.partition, entry.offset, text)
        return value

    def home_positions(self, batch: pa.RecordBatch) -> np.ndarray:
        """:meth:`home_position` of each row, in columns (-1: not made by :func:`to_entry`).
        One C pass (:func:`first_headers`), else :func:`home_positions_arrow`."""
        found = first_headers(batch, H_PHYSICAL_OFFSET)
        if found is None:
            return home_positions_arrow(batch)
        _, out, unread = found
        if len(unread):
            firsts, _, values, _ = header_items(batch)     # the items the C pass read
            for row in unread.tolist():
                out[row] = _home_int(batch, row, values[int(firsts[row])].as_py())
        return out

    def extents(self, source: Store, options: Options) -> list[Extent]:
        """Each selected queue (every consume-queue directory, empty ones too), named and numbered as
        its entries are: a queue with messages by its first and last message's entries (a queue written
        from a peer's entries numbers them as the peer did; ``home`` when both came from the peer); an
        empty one from its min offset, named by :func:`peer_topic`.  ``O(queues)`` message reads.

        :raises InvalidTopicError: a topic the peer has no name for (too long once escaped), naming the
            queue."""
        store: Any = source
        peer = options.peer
        out = []
        for topic in store.topics():
            if options.topics is not None and topic not in options.topics:
                continue
            for queue_id in store.partitions(topic):
                start, end = store.offset_range(topic, queue_id)
                first = _readable(store, topic, queue_id, range(start, end), options.skip_corrupt)
                last = None if first is None else _readable(
                    store, topic, queue_id, range(end - 1, first.queue_offset - 1, -1), options.skip_corrupt)
                try:
                    if first is None or last is None:
                        out.append(Extent(peer_topic(topic, peer), queue_id, start, start))
                        continue
                    head, tail = to_entry(first, peer), to_entry(last, peer)
                except InvalidTopicError as err:    # (too long once escaped: said without the queue before)
                    raise InvalidTopicError(f"expected the RocketMQ queue {cut(topic)}/{queue_id} as a "
                                            f"{peer.name} partition, found its topic refused: {err.message}"
                                            ) from err
                out.append(Extent(head.topic, queue_id, head.offset, max(tail.offset + 1, head.offset),
                                  home=came_from(first, peer) and came_from(last, peer)))
        return out

    def logs(self, source: Store, options: Options) -> list[LogSpan]:
        """The commitlog, from its first file's base to its written end (physical offsets), whatever
        the selected topics: every entry is read from it, and the numbers given to messages no queue
        holds count those before them.  Appends move its end; the broker's clean-up moves its start
        (``DefaultMessageStore.CleanCommitLogService.deleteExpiredFiles``, 4.9.7), recovery cuts a torn
        tail (``CommitLog.recoverNormally``/``recoverAbnormally``).  ``O(1)``."""
        store: Any = source
        return [LogSpan("commitlog", store.commitlog.min_offset, store.commitlog.end)]

    def open_streams(self, dest: Store, extents: list[Extent], options: Options) -> None:
        """Each empty stream as an empty queue (``RocketMQStore.create_queue``: its consume-queue
        directory and topic queue count).  Its start stays behind: no RocketMQ file holds where an
        empty queue starts.  The broker's way, pre-blank consume-queue entries
        (``ConsumeQueue.fillPreBlank``, 4.9.7), reads back after a restart as a queue whose last
        message ends at physical offset 2^31 - 1 (``ConsumeQueue.recover`` sets ``maxPhysicOffset``
        from the blank entry), and ``putMessagePositionInfo`` then drops the entry of every new
        message below that; the converter keeps the start in its journal for the way back.  An empty
        stream of the peer's topic of messages no queue holds (:func:`nonqueued_topic`) is a queue too:
        no message says it held such ones, and a peer's own topic may have that name (Kafka's
        ``rmq.nonqueued``, partitions empty or not; before, its empty ones were dropped)."""
        store: Any = dest
        nonqueued = nonqueued_topic(options.peer)
        # every queue's name checked before the first message is written: a topic the destination
        # refuses (over 127 characters for a store before 5.1.0) stops the run here, and a run
        # refused before it converts anything leaves nothing to --force over
        for extent in extents:
            if extent.topic != nonqueued:
                _check_queue(store, extent, options.peer)
        # every queue the run writes named in config/topics.json at once, not in one write each
        store.configure_queues_ahead((queue_topic(extent.topic, options.peer), extent.partition)
                                     for extent in extents if extent.empty or extent.topic != nonqueued)
        for extent in extents:
            if extent.empty:
                store.create_queue(queue_topic(extent.topic, options.peer), extent.partition)

    def close_streams(self, dest: Store, extents: list[Extent], options: Options) -> None:
        """Each stream with records that got no queue (a Kafka partition of transaction markers only, its
        transactions' records deleted or compacted away: markers are messages no queue holds) as an
        empty queue, as an empty stream is (:meth:`open_streams`): the partition is there for a RocketMQ
        consumer, empty as for a Kafka one, and its start travels in the journal as an empty one's."""
        store: Any = dest
        nonqueued = nonqueued_topic(options.peer)
        for extent in extents:
            if not extent.empty and extent.topic != nonqueued:
                topic = queue_topic(extent.topic, options.peer)
                if topic not in store.topics() or extent.partition not in store.partitions(topic):
                    store.create_queue(topic, extent.partition)

    def check_streams(self, dest: Store, extents: list[Extent], options: Options) -> list[str]:
        """Each stream there as a queue, an empty one empty (the streams with records are checked message
        by message)."""
        store: Any = dest
        problems = []
        for extent in extents:
            if extent.topic == nonqueued_topic(options.peer) and not extent.empty:
                continue
            topic = queue_topic(extent.topic, options.peer)
            if not extent.empty:
                if extent.partition not in (store.partitions(topic) if topic in store.topics() else []):
                    problems.append(f"{extent.topic}-{extent.partition}: expected a queue {topic}/"
                                    f"{extent.partition}, found none")
                continue
            if extent.partition not in (store.partitions(topic) if topic in store.topics() else []):
                problems.append(f"{extent.topic}-{extent.partition}: expected an empty queue {topic}/"
                                f"{extent.partition}, found none")
                continue
            start, end = store.offset_range(topic, extent.partition)
            if end > start:
                problems.append(f"{extent.topic}-{extent.partition}: expected an empty queue {topic}/"
                                f"{extent.partition}, found offsets {start} to {end}")
        return problems

    def writer(self, dest: Store, options: Options) -> Writer:
        return RocketMQWriter(dest, options)

    def arrow_writer(self, dest: Store, options: Options) -> ArrowWriter | None:
        """:class:`.arrowwrite.RocketMQArrowWriter`; None without the C accelerator (the entry path is
        then the pure-Python one)."""
        from . import arrowwrite  # imported here: it builds on this module

        return arrowwrite.RocketMQArrowWriter(dest, options) if arrowwrite.available() else None

    def verifier(self, dest: Store, options: Options) -> Verifier:
        return RocketMQVerifier(dest, options)


def header_items(batch: pa.RecordBatch) -> tuple[np.ndarray, pa.Array, pa.Array, Any]:
    """The ``headers`` column of an ``ENTRY_SCHEMA`` batch as the C passes read it: each row's
    first item (n + 1 int64 offsets from 0; a null list has none), the items' keys and values
    (Arrow arrays, one item after another) and the values' validity (``b""`` when none is null,
    else one uint8 per item).  No copy of the keys or values."""
    headers = batch.column("headers")
    if headers.null_count:
        headers = pc.fill_null(headers, arrays.empty_list(headers.type))
    rows = arrays.int64s(headers.offsets)
    rows = rows - rows[0] if batch.num_rows else np.zeros(1, np.int64)
    items = pc.list_flatten(headers)
    values = items.field("value")
    valid = b"" if not values.null_count else arrays.to_numpy(values.is_valid(), np.bool_).view(np.uint8)
    return rows, items.field("key"), values, valid


def first_headers(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per row of an ``ENTRY_SCHEMA`` batch: whether its first header is keyed ``name``, that
    header's value as a plain decimal int64 (-1 where it is not one or the row is not marked),
    and the marked rows whose value is not one (``int()`` decides those).  One C pass
    (``_speedups.first_headers``); None without the accelerator.  ``O(rows)``; thread-safe."""
    speedups = columnar._speedups
    if speedups is None:
        return None
    n = batch.num_rows
    rows, keys, values, valid = header_items(batch)
    marked = np.zeros(n, np.uint8)
    numbers = np.empty(n, np.int64)
    unread = speedups.first_headers(rows, *binary_buffers(keys), *binary_buffers(values), valid,
                                    name.encode("utf-8"), marked, numbers)
    marks = marked.view(bool)
    return marks, numbers, np.flatnonzero(marks & (numbers == -1)) if unread else np.zeros(0, np.int64)


def home_positions_arrow(batch: pa.RecordBatch) -> np.ndarray:
    """:meth:`RocketMQConversion.home_positions` in Arrow compute: the reference of the C pass."""
    n = batch.num_rows
    out = np.full(n, -1, np.int64)
    if not n:
        return out
    headers = batch.column("headers")
    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy().astype(np.int64)
    has = np.flatnonzero(counts > 0)
    if not len(has):
        return out
    items = pc.list_flatten(headers)
    firsts = pa.array((np.cumsum(counts) - counts)[has])
    keys, values = items.field("key").take(firsts), items.field("value").take(firsts)
    marked = pc.equal(keys, pa.scalar(H_PHYSICAL_OFFSET, pa.string())).to_numpy(zero_copy_only=False)
    rows, texts = has[marked], values.filter(pa.array(marked))
    try:
        out[rows] = pc.cast(texts.cast(pa.string()), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, TypeError):     # what int() makes of them, or its error
        for row, text in zip(rows.tolist(), texts.to_pylist(), strict=True):
            out[row] = _home_int(batch, row, text)
    return out


def _home_int(batch: pa.RecordBatch, row: int, text: bytes | None) -> int:
    """``int()`` of a row's ``rmq.physical_offset`` text, or the error naming the row (also for a
    number no commitlog position can be: past int64)."""
    value = _decimal_int64(text)
    if value is None:
        entry = batch.slice(row, 1).to_pylist()[0]
        raise _home_error(entry["topic"], entry["partition"], entry["offset"], text)
    return value


def _home_error(topic: str, partition: int, offset: int, text: bytes | None) -> ConversionError:
    """The error of a record whose ``rmq.physical_offset`` is no commitlog position."""
    return ConversionError(f"expected a decimal {H_PHYSICAL_OFFSET} within int64 at {topic}-{partition} "
                           f"offset {offset}, found {text!r}")


def _decimal_int64(text: bytes | None) -> int | None:
    """``int(text)`` when it reads one within int64 (a commitlog position can be no other), else None."""
    try:
        value = int(text or b"")
    except ValueError:
        return None
    return value if -(1 << 63) <= value < (1 << 63) else None
