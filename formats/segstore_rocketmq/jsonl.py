"""``segstore write --input FILE.jsonl`` into a RocketMQ store: plain message lines and ``dump --json`` lines.

A **plain line** is an append item (:data:`.store.APPEND_FIELDS` or the common
``Message`` names); its strings are UTF-8 text, and ``bodyBase64``/``valueBase64``
give a binary body as base64 (:func:`segstore.records.decode_base64_fields`).  The
store applies the broker's put-time rules to it (store clock, HashMap properties
order, delay levels).

A **dump line** is an object ``segstore dump --json`` writes (:data:`DUMP_FIELDS`);
it is told from a plain line by the fields only a dump has (:data:`DUMP_ONLY`).  It
describes a message stored once already, so it is written back as it was stored
(``append_stored``): topic, queue, body (base64), properties in their stored order,
flag, sysFlag, born and store times and hosts, reconsume times and the prepared
transaction offset.  Where it lands is the store's: ``queue_offset``,
``physical_offset`` and ``msg_id`` (and ``size`` and ``tags_code``) follow from the
place and the content, so a dump written into an empty store of the same commitlog
file size comes back byte for byte (the properties' trailing 0x02, which a dump does
not show, is the store's style: ``rocketmqVersion``).  The place starts where the dump's
does (:func:`start_where_dumped`): an empty commitlog at the file of the first line's
``physical_offset`` and, past 0, each new queue at its first line's ``queue_offset``, so a
dump of a store retention trimmed lands at its source's offsets.  Properties whose stored bytes are
not UTF-8 come with ``properties_base64``, those bytes (``properties`` is the broker's text of them,
a U+FFFD for each malformed sequence): they are written as given (trailing 0x02 or not), which must
read as ``properties``.  ``tags``, ``keys`` and
``body_crc`` repeat what the properties and body say; a line where they disagree
(an edited dump) is refused rather than half applied.  ``ext`` (a consume-queue
extension unit) is derived at dispatch and not written.

A run of dump lines is appended in columns (``append_arrow``, the C columnar writer) where
:func:`dump_columns` takes every line of it as it is: no Python message object a line.  A run
holding any line it does not take (a field missing or of another kind, a body that is not
base64, a value out of its range, derived fields that disagree, a ``properties_base64`` that does not
read as its ``properties``) goes through
:func:`stored_message` and ``append_stored``, the reference, which raises the typed errors; both
write the same bytes (tested).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from segstore.errors import InvalidMessageError, InvalidTopicError, SegstoreError, cut
from segstore.plugin import WRITE_CHUNK
from segstore.records import check_line_fields, decode_base64_fields, integer_field

from .config import validate_topic
from .message import (
    KEY_SEPARATOR,
    MAX_QUEUE_ID,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    Host,
    JavaProperties,
    RocketMQMessage,
    body_crc,
    empty_property,
    encode_properties,
    encode_topic,
    encoded_size,
    has_queue_entry,
    java_properties_of,
    magic_for,
)
from .store import APPEND_FIELDS_ORDER, JSON_KEYS, RocketMQStore

if TYPE_CHECKING:
    import pyarrow as pa

#: A dump line's stored properties bytes where they are not UTF-8 (``properties`` then holds Java's
#: text of them, a U+FFFD for each malformed sequence): written back as those bytes.
PROPERTIES_BASE64 = "properties_base64"
#: A dump line's stored topic bytes where they are not UTF-8 (``topic`` then holds Java's text of them):
#: a topic no broker stores, so the line is refused, naming them.
TOPIC_BASE64 = "topic_base64"
#: The fields of a ``dump --json`` line (:data:`.store.JSON_KEYS`, ``ext`` for a message a
#: consume-queue extension unit describes, :data:`PROPERTIES_BASE64` for properties that are not UTF-8,
#: :data:`TOPIC_BASE64` for a topic that is not).
DUMP_FIELDS = frozenset({*JSON_KEYS, "ext", PROPERTIES_BASE64, TOPIC_BASE64})
#: Fields only a dump line has: one of them makes a line a dump line.
DUMP_ONLY = frozenset({"queue_offset", "physical_offset", "size", "body_crc", "tags_code", "msg_id", "ext",
                       PROPERTIES_BASE64, TOPIC_BASE64})
#: Fields a dump line must have to be written back as it was stored.
_REQUIRED = ("topic", "queue_id", "body", "properties", "flag", "sys_flag", "born_timestamp", "born_host",
             "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset")


#: A dump line's integer fields.
_INT_NAMES = ("queue_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times",
              "prepared_transaction_offset")


def is_dump_line(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is an object ``segstore dump --json`` wrote for a RocketMQ message."""
    return not DUMP_ONLY.isdisjoint(obj)


def stored_message(obj: Mapping[str, Any], store: RocketMQStore) -> RocketMQMessage:
    """The message a dump line describes, as it was stored (its offsets are the store's to give).

    :raises InvalidMessageError: a field missing, unknown or of the wrong kind, a body that is not
        base64, or ``tags``/``keys``/``body_crc`` that disagree with the properties and body.
    """
    unknown = sorted(set(obj) - DUMP_FIELDS)
    missing = [name for name in _REQUIRED if name not in obj]
    if unknown or missing:
        found = f"unknown field(s) {unknown}" if unknown else f"no {missing}"
        raise InvalidMessageError(f"expected the fields of a RocketMQ dump --json line "
                                  f"{sorted(DUMP_FIELDS)}, found {found}")
    if TOPIC_BASE64 in obj:
        _refuse_stored_topic(obj[TOPIC_BASE64], obj["topic"])
    try:
        body = base64.b64decode(obj["body"], validate=True)
    except (binascii.Error, TypeError, ValueError) as err:
        raise InvalidMessageError(f"expected a dump line's body as base64, found {str(obj['body'])[:40]!r} "
                                  f"({err})") from err
    properties = obj["properties"]
    if not isinstance(properties, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in properties.items()):
        raise InvalidMessageError(f"expected properties as an object of strings, found {properties!r:.60}")
    # A lone surrogate ("\ud800" in a JSON line) is no stored text: a dump writes none (it prints
    # stored bytes that are not UTF-8 as U+FFFD) and no broker stores one (Java's UTF-8 encoder writes
    # '?'); kept, it went to the commitlog as the bytes ED xx xx, which scan_arrow cannot hand out as
    # a string. Refused, as append() refuses it.
    for text in (*properties, *properties.values()):
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise InvalidMessageError(f"expected properties of UTF-8 text, found {text!r:.60} "
                                          f"(a lone surrogate)") from err
    for name, value in properties.items():     # a dump writes none (the broker's reader drops it)
        if not name or not value:
            raise empty_property(name, value)
    if PROPERTIES_BASE64 in obj:
        properties = _stored_properties(obj[PROPERTIES_BASE64], properties)
    _agrees("tags", obj, properties.get(PROPERTY_TAGS))
    raw_keys = properties.get(PROPERTY_KEYS)
    _agrees("keys", obj, [k for k in raw_keys.split(KEY_SEPARATOR) if k] if raw_keys else [])
    _agrees("body_crc", obj, body_crc(body))
    # a float, string, bool or null is refused, not converted by int() (1.9 would be stored as 1)
    ints = {name: _dump_int(obj[name], name) for name in _INT_NAMES}
    try:
        topic, queue_id = obj["topic"], ints["queue_id"]
        if not isinstance(topic, str) or not 0 <= queue_id <= MAX_QUEUE_ID:
            raise InvalidMessageError(f"expected a topic name and a queue id in [0, {MAX_QUEUE_ID}], found "
                                      f"{topic!r} and {queue_id}")
        msg = RocketMQMessage(
            topic=topic, queue_id=queue_id, body=body, flag=ints["flag"],
            properties=properties if type(properties) is JavaProperties else dict(properties),
            sys_flag=ints["sys_flag"], born_timestamp=ints["born_timestamp"],
            born_host=Host.parse(obj["born_host"]), store_timestamp=ints["store_timestamp"],
            store_host=Host.parse(obj["store_host"]), reconsume_times=ints["reconsume_times"],
            prepared_transaction_offset=ints["prepared_transaction_offset"],
            magic=magic_for(topic, writes_v2=store.config.writes_v2))
    except (TypeError, ValueError, AttributeError) as err:
        raise InvalidMessageError(f"expected a RocketMQ dump --json line's fields of their kinds, found "
                                  f"{err}") from err
    msg.trailing_separator = store.trailing_separator if type(properties) is not JavaProperties \
        else properties.raw.endswith(PROPERTY_SEPARATOR.encode())      # stored bytes: as they are
    return msg


def _refuse_stored_topic(value: Any, topic: Any) -> None:
    """A dump line's ``topic_base64``: the stored bytes of a topic that is not UTF-8, which RocketMQ 4.9.7
    reads as Java's text (``CommitLog.checkMessageAndReturnSize``: a U+FFFD for each malformed sequence)
    and no broker stores (``TopicValidator.validateTopic`` takes ``[%|a-zA-Z0-9_-]`` only; a bit flipped
    in a stored topic makes one): no copy can hold the message as stored, nor under another topic
    without changing it, so the line is refused saying so, not written under Java's text of it.

    :raises InvalidTopicError: always (the bytes, or what is wrong with the field).
    """
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError) as err:
        raise InvalidMessageError(f"expected a dump line's {TOPIC_BASE64} as base64, found "
                                  f"{str(value)[:40]!r} ({err})") from err
    raise InvalidTopicError(f"expected a topic the broker stores (TopicValidator: the characters "
                            f"[%|a-zA-Z0-9_-]), found the stored bytes {cut(raw)} ({TOPIC_BASE64}: not "
                            f"UTF-8, read by RocketMQ as {cut(topic)}); no copy holds this message as "
                            f"stored: leave it out of the input (its topic and offsets are on the line)")


def _stored_properties(value: Any, properties: Mapping[str, str]) -> JavaProperties:
    """A dump line's ``properties_base64``: the stored properties bytes, kept to be written as they are
    (:func:`.message.java_properties_of`, which must read as its ``properties``).

    :raises InvalidMessageError: not base64, bytes that are UTF-8 (a dump writes the field for none:
        ``properties`` says all) or that read as other properties, or more than the format holds.
    """
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, TypeError, ValueError) as err:
        raise InvalidMessageError(f"expected a dump line's {PROPERTIES_BASE64} as base64, found "
                                  f"{str(value)[:40]!r} ({err})") from err
    return java_properties_of(raw, properties, PROPERTIES_BASE64)


def _dump_int(value: Any, name: str) -> int:
    if value is None:   # a dump line has every field: null is no value
        raise InvalidMessageError(f"expected {name} as an integer, found null")
    return integer_field(value, name)


def _agrees(name: str, obj: Mapping[str, Any], derived: Any) -> None:
    if name in obj and obj[name] != derived:
        raise InvalidMessageError(f"expected {name} {derived!r} as the message's properties and body say, "
                                  f"found {obj[name]!r} (a dump line's {name} is derived: change the "
                                  f"properties or body, or leave {name} out)")


#: Append runs of dump lines in columns (False: a message object a line, the reference).
COLUMNAR = True


def write_lines(store: RocketMQStore, lines: Iterable[Mapping[str, Any]]) -> int:
    """Append every line to ``store`` in order, :data:`WRITE_CHUNK` at a time (runs of dump lines with
    ``append_arrow`` or ``append_stored``, runs of plain lines with ``append_batch``); returns the count."""
    count = 0
    styled = False
    for stored, run in _runs(lines):
        if stored and not styled:      # a new store takes its source's style (checked once: O(queues))
            styled = True
            style = dumped_style(run, store)
            if style is not None:
                store.take_style(style)
        if not stored:
            for obj in run:
                check_line_fields(obj, APPEND_FIELDS_ORDER, "RocketMQ")
            store.append_batch([decode_base64_fields(obj) for obj in run])
        else:
            columns = dump_columns(run, store) if COLUMNAR else None
            # every line checked before the store is started where they say
            messages = [] if columns is not None else [stored_message(obj, store) for obj in run]
            start_where_dumped(store, run)
            if columns is not None:
                store.append_arrow(columns)
            else:
                store.append_stored(messages)
        count += len(run)
    return count


def dumped_style(run: Sequence[Mapping[str, Any]], store: RocketMQStore) -> bool | None:
    """Whether the first dump line of ``run`` with properties (given as text) was stored with them ending
    in 0x02 (brokers up to 4.9.0 and from 5.2.0: :attr:`RocketMQStore.trailing_separator`), as its
    ``size`` tells (the size of its message with them, or one byte less); None where no line says (no
    such line, or a size that is neither: an edited line, which the append checks).  A dump does not
    show the separator, so a copy takes its source's style from this.  ``O(1)`` lines decoded."""
    for obj in run:
        properties = obj.get("properties")
        if PROPERTIES_BASE64 in obj or not isinstance(properties, dict) or not properties:
            continue
        try:
            topic, size = obj["topic"], obj["size"]
            body_len = len(base64.b64decode(obj["body"], validate=True))
            topic_field = encode_topic(topic, magic_for(topic, writes_v2=store.config.writes_v2))
            plain = encoded_size(body_len, len(topic_field), len(encode_properties(dict(properties))),
                                 obj["sys_flag"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, binascii.Error, SegstoreError):
            return None
        return {plain: False, plain + 1: True}.get(size) if type(size) is int else None
    return None


def start_where_dumped(store: RocketMQStore, run: Sequence[Mapping[str, Any]]) -> None:
    """Start an empty commitlog, and each queue without entries, where the dump lines of ``run`` say
    their source's did: the commitlog at the file of the first line's ``physical_offset``
    (``RocketMQStore.start_commitlog_at``), a queue at the ``queue_offset`` of its first line that
    has a queue entry (``start_queue_at``; a prepared or rolled-back transaction message has none and
    queue offset 0).  A store that holds messages, and a queue that holds entries, keep their own.

    :raises InvalidMessageError: such an offset that is not an integer of at least 0.
    """
    seen: set[tuple[Any, Any]] = set()
    for i, obj in enumerate(run):
        if i == 0 and "physical_offset" in obj:
            store.start_commitlog_at(_dump_offset(obj["physical_offset"], "physical_offset"))
        key = (obj.get("topic"), obj.get("queue_id"))
        sys_flag = obj.get("sys_flag")
        if (key in seen or "queue_offset" not in obj or type(sys_flag) is not int
                or not has_queue_entry(sys_flag)):
            continue
        seen.add(key)
        topic, queue_id = key
        if isinstance(topic, str) and type(queue_id) is int and 0 <= queue_id <= MAX_QUEUE_ID:
            store.start_queue_at(topic, queue_id, _dump_offset(obj["queue_offset"], "queue_offset"))


def _dump_offset(value: Any, name: str) -> int:
    """A dump line's ``physical_offset`` or ``queue_offset``, where a copy starts.

    :raises InvalidMessageError: not an integer of at least 0 (past what the store names, the store's
        :class:`OffsetOutOfRangeError`).
    """
    if type(value) is not int or value < 0:
        raise InvalidMessageError(f"expected {name} as an integer of at least 0, found {value!r:.40}")
    return value


def _runs(lines: Iterable[Mapping[str, Any]]) -> Iterator[tuple[bool, list[Mapping[str, Any]]]]:
    """Consecutive lines of one kind, at most :data:`WRITE_CHUNK` a run: ``(is a dump run, lines)``."""
    run: list[Mapping[str, Any]] = []
    stored = False
    for obj in lines:
        kind = is_dump_line(obj)
        if run and (kind != stored or len(run) >= WRITE_CHUNK):
            yield stored, run
            run = []
        stored = kind
        run.append(obj)
    if run:
        yield stored, run


#: A dump line's int fields: (its name, its column's name, Arrow type).  Out of the type's range a
#: line is left to the reference (which raises where the format cannot hold it).
_INT_FIELDS = (("queue_id", "partition", "int32"), ("flag", "flag", "int32"),
               ("sys_flag", "sysFlag", "int32"), ("born_timestamp", "bornTimestamp", "int64"),
               ("store_timestamp", "storeTimestamp", "int64"), ("reconsume_times", "reconsumeTimes", "int32"),
               ("prepared_transaction_offset", "preparedTransactionOffset", "int64"))


def dump_columns(objs: Sequence[Mapping[str, Any]], store: RocketMQStore) -> pa.RecordBatch | None:
    """Dump lines as the columns ``append_arrow`` takes (:mod:`.appendarrow`), each row the message
    :func:`stored_message` makes of its line; None where a line is not plainly one (the caller then
    takes the reference, which says what is wrong).  ``O(lines)``: a few C calls a line (base64,
    CRC), no object a line.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(objs)
    required = frozenset(_REQUIRED)
    for obj in objs:
        if not required <= obj.keys() <= DUMP_FIELDS or TOPIC_BASE64 in obj:
            return None     # topic_base64: refused by the reference, which says why
    bodies: list[bytes] = []
    stored: list[bytes | None] = []
    keys: list[str] = []
    values: list[str] = []
    offsets = [0]
    try:
        for obj in objs:
            body = base64.b64decode(obj["body"], validate=True)    # as the reference decodes it
            properties = obj["properties"]
            if type(properties) is not dict or not all(properties) or not all(properties.values()):
                return None     # not a dict, or an empty name or value: the reference says what is wrong
            tags = properties.get(PROPERTY_TAGS)
            if "tags" in obj and obj["tags"] != tags:
                return None
            if "keys" in obj:
                raw = properties.get(PROPERTY_KEYS)
                if obj["keys"] != ([k for k in raw.split(KEY_SEPARATOR) if k] if raw else []):
                    return None
            if "body_crc" in obj and obj["body_crc"] != body_crc(body):
                return None
            raw = None
            # stored bytes, which must read as the properties (else the reference says so, naming the field)
            if PROPERTIES_BASE64 in obj:
                raw = base64.b64decode(obj[PROPERTIES_BASE64], validate=True)
                try:
                    java_properties_of(raw, properties, PROPERTIES_BASE64)
                except InvalidMessageError:
                    return None
            stored.append(raw)
            bodies.append(body)
            keys.extend(properties)
            values.extend(properties.values())
            offsets.append(len(keys))
        topics = [obj["topic"] for obj in objs]
        hosts = {obj[name] for obj in objs for name in ("born_host", "store_host")}
        ints = {}
        for name, column, kind in _INT_FIELDS:
            numbers = [obj[name] for obj in objs]
            if {type(v) for v in numbers} - {int}:     # a float, bool or null: the reference's int() says
                return None
            ints[column] = pa.array(numbers, kind)
        names = pa.array(keys, pa.string())
        texts = pa.array(values, pa.string())
        topic = pa.array(topics, pa.string())
    except (TypeError, ValueError, OverflowError, AttributeError, binascii.Error, pa.ArrowException):
        return None     # OverflowError: an int64 field past its range (pyarrow's, not an ArrowException)
    if names.null_count or texts.null_count or topic.null_count:
        return None
    if n and pc.min(ints["partition"]).as_py() < 0:
        return None
    for host in hosts:
        try:
            if type(host) is not str:
                return None
            Host.parse(host)
        except InvalidMessageError:
            return None
    distinct = set(topics)
    for name in distinct:    # append_arrow refuses a topic above the store's length; the reference decides
        try:
            validate_topic(name, store.config.topic_max_length)
        except InvalidTopicError:
            return None
    writes_v2 = store.config.writes_v2
    magic = {t: magic_for(t, writes_v2=writes_v2) for t in distinct}
    return pa.RecordBatch.from_pydict({
        "topic": topic, **ints, "value": pa.array(bodies, pa.binary()),
        "properties": pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), names, texts),
        "bornHost": pa.array([obj["born_host"] for obj in objs], pa.string()),
        "storeHost": pa.array([obj["store_host"] for obj in objs], pa.string()),
        "magic": pa.array([magic[t] for t in topics], pa.int32()),
        "propertiesBytes": pa.array(stored, pa.binary()),
    })
