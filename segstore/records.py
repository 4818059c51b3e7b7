"""The common record model every format maps its records to.

A RocketMQ message and a Kafka record differ in almost every field; what a user
of either wants first is the same: where it is (topic, partition, offset), when
(timestamp), and what (key, value, headers).  :class:`Message` is that common
view.  Appends accept a :class:`Message` (or a mapping with its field names) in
every format.

What reads return is a :class:`Record`: the one public record type of every
format.  Its common fields (:data:`COMMON_FIELDS`) mean the same in every format,
in the library, in Spark's columns (:mod:`segstore.columns`) and in conversion;
``extras`` holds the format's own fields.  Each format's record class is a
:class:`Record` (so ``read()``/``scan()``/``find()`` hand out the decoded record
itself, no copy), and keeps its own attributes beside the common ones.

Keys, the same everywhere (``docs/records.md``):

- Kafka: ``key`` is the record key, bytes as stored (None for a null key);
  ``keys`` is ``[key]`` as text (UTF-8; bytes that are not UTF-8 are kept as
  ``surrogateescape`` characters, so ``k.encode("utf-8", "surrogateescape")`` is the
  key again), ``[]`` for a null key.
- RocketMQ: ``keys`` is the ``KEYS`` property split on spaces, empty tokens
  dropped (the broker's ``MessageConst.KEY_SEPARATOR`` and ``IndexService.buildIndex``);
  ``key`` is the first of them as UTF-8 (None when there is none).

``Store.find(topic, key)`` matches a record when ``key`` is its Kafka key (bytes
equal) or one of its RocketMQ ``keys`` or its ``UNIQ_KEY`` (client msgId), which
is what the broker's IndexFiles hold.
"""

from __future__ import annotations

import abc
import base64
import binascii
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, overload

from .errors import InvalidMessageError, cut, did_you_mean


@overload
def integer_field(value: Any, name: str, default: int = 0) -> int: ...
@overload
def integer_field(value: Any, name: str, default: None) -> int | None: ...
def integer_field(value: Any, name: str, default: int | None = 0) -> int | None:
    """An append field that the format stores as an integer: ``value`` (any integer, numpy's
    too), ``default`` for None (the field left out).  A float, a string or a bool is refused, as
    Kafka's producer refuses them: ``int()`` would store 1.9 as 1, ``"1"`` and True as queue 1,
    True as RocketMQ's sysFlag 0x1 (compressed) and as a Kafka timestamp of 1 ms.  Both formats'
    appends check their integer fields with it.

    :raises InvalidMessageError: naming the field.
    """
    if type(value) is int:
        return value
    if value is None:
        return default
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise InvalidMessageError(f"expected {name} as an integer, found {type(value).__name__} {cut(value)}")
    return operator.index(value)


#: The largest timestamp a message holds: a Java long of ms (Kafka's record and RocketMQ's born time).
MAX_TIMESTAMP = 2**63 - 1


def message_timestamp(value: Any) -> int:
    """An appended message's common ``timestamp`` (ms since the epoch) as an ``int``; -1, the append's
    time, for -1 or None (left out), as a producer's null.  Both formats' appends check it with it.

    A time below -1 is refused: Kafka 3.8's ``ProducerRecord`` throws "Timestamp should always be
    non-negative or null", and RocketMQ's producer stamps its own clock.  The brokers would store it
    (3.8 ``LogValidator`` checks only ``message.timestamp.*.max.ms``, RocketMQ's ``CommitLog`` none),
    but -1 is taken here for "stamp now" (Kafka's ``NO_TIMESTAMP``), so a negative time cannot be
    kept as given; it was stamped now without a word.

    :raises InvalidMessageError: not an integer (:func:`integer_field`), below -1, or past an int64.
    """
    stamp = integer_field(value, "timestamp", -1)
    if not -1 <= stamp <= MAX_TIMESTAMP:
        raise InvalidMessageError(f"expected timestamp in [0, {MAX_TIMESTAMP}] ms since the epoch (-1 or "
                                  f"None: the append's time; Kafka's ProducerRecord: \"Timestamp should "
                                  f"always be non-negative or null\"), found {stamp}")
    return stamp


CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

Header = tuple[str, "bytes | None"]

#: The fields every :class:`Record` has, whatever its format.
COMMON_FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "keys", "value",
                 "headers")


class Record(abc.ABC):
    """One stored record, as every format's reads return it.

    ``partition``: the Kafka partition or RocketMQ queue id; ``offset``: the absolute
    offset in it (RocketMQ queue offset); ``timestamp``: ms since the epoch (Kafka the
    record's timestamp, RocketMQ the born timestamp); ``timestamp_type``:
    :data:`CREATE_TIME` or :data:`LOG_APPEND_TIME`; ``key``/``keys``: see the module;
    ``value``: the payload (RocketMQ the body); ``headers``: Kafka's headers, RocketMQ's
    properties (values UTF-8).  ``extras``: the format's own fields by name (what its
    ``dump --json`` objects add).  Formats implement the fields as attributes or
    properties; records are read-only views.
    """

    __slots__ = ()

    topic: str

    @property
    @abc.abstractmethod
    def partition(self) -> int:
        """Kafka partition, RocketMQ queue id."""

    @property
    @abc.abstractmethod
    def offset(self) -> int:
        """Absolute offset in the partition / queue."""

    @property
    @abc.abstractmethod
    def timestamp(self) -> int:
        """Milliseconds since the epoch."""

    @property
    @abc.abstractmethod
    def timestamp_type(self) -> str:
        """:data:`CREATE_TIME` or :data:`LOG_APPEND_TIME`."""

    @property
    @abc.abstractmethod
    def key(self) -> bytes | None:
        """The key (RocketMQ: the first ``KEYS`` token, UTF-8)."""

    @property
    @abc.abstractmethod
    def keys(self) -> list[str]:
        """Every key as text (RocketMQ: the ``KEYS`` tokens; Kafka: the key, if any)."""

    @property
    @abc.abstractmethod
    def value(self) -> bytes | None:
        """The payload."""

    @property
    @abc.abstractmethod
    def headers(self) -> list[Header]:
        """Kafka headers, RocketMQ properties, in order."""

    @property
    @abc.abstractmethod
    def extras(self) -> Mapping[str, Any]:
        """The format's own fields by name."""

    def to_message(self) -> Message:
        """The record as a :class:`Message` (what an append takes)."""
        return Message(topic=self.topic, value=self.value, key=self.key, partition=self.partition,
                       offset=self.offset, timestamp=self.timestamp, headers=self.headers,
                       timestamp_type=self.timestamp_type)

    def common(self) -> dict[str, Any]:
        """The :data:`COMMON_FIELDS` by name."""
        return {name: getattr(self, name) for name in COMMON_FIELDS}


#: JSON-lines fields (``segstore write --input``) that give bytes as base64, and the field each fills
#: (``value`` is RocketMQ's body too).
BASE64_FIELDS = {"valueBase64": "value", "bodyBase64": "value", "keyBase64": "key"}
#: The fields a base64 field stands in for: one line gives one of them.
_PLAIN_ALIASES = {"value": ("value", "body"), "key": ("key",)}


#: The common names a plain ``write --input`` line gives (its ``offset`` and ``timestamp_type``, the
#: store's to assign, are :class:`Message` fields too: taken when null, refused otherwise by the CLI).
LINE_FIELDS = ("topic", "value", "key", "partition", "timestamp", "headers")
_ASSIGNED = ("offset", "timestamp_type")


def check_line_fields(obj: Mapping[str, Any], own: Iterable[str] = (), fmt: str | None = None) -> None:
    """Refuse a plain JSON-lines message (``write --input``) naming a field neither the common names
    (:data:`LINE_FIELDS`, :data:`BASE64_FIELDS`) nor the format's ``own`` names take, listing every name
    taken (a name that was lost said nothing before: ``valu`` beside ``value``).

    :raises InvalidMessageError: naming the unknown fields (and, for a typo, the name meant).
    """
    own = [name for name in own if name not in LINE_FIELDS]
    known = {*LINE_FIELDS, *_ASSIGNED, *BASE64_FIELDS, *own}
    unknown = sorted(set(obj) - known)
    if not unknown:
        return
    theirs = f", or {fmt}'s own {', '.join(own)}" if own else ""
    hint = did_you_mean(unknown[0], [*LINE_FIELDS, *BASE64_FIELDS, *own])
    raise InvalidMessageError(f"expected a message line's fields: {', '.join(LINE_FIELDS)} (binary bytes as "
                              f"base64: {', '.join(BASE64_FIELDS)}){theirs}; found unknown field"
                              f"{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}{hint}")


def decode_base64_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-lines message with its :data:`BASE64_FIELDS` decoded into the fields they fill (strings in
    the other fields stay UTF-8 text).

    :raises InvalidMessageError: a value that is not base64, or a line giving a field twice (``body``
        and ``bodyBase64``).
    """
    if BASE64_FIELDS.keys().isdisjoint(obj):
        return dict(obj)
    data = dict(obj)
    for name, target in BASE64_FIELDS.items():
        if name not in data:
            continue
        given = [other for other in (*_PLAIN_ALIASES[target], *BASE64_FIELDS) if other in data
                 and (other in _PLAIN_ALIASES[target] or BASE64_FIELDS[other] == target)]
        if len(given) > 1:
            raise InvalidMessageError(f"expected one of {' or '.join(given)}, found both")
        raw = data.pop(name)
        try:
            data[target] = None if raw is None else base64.b64decode(raw, validate=True)
        except (binascii.Error, TypeError, ValueError) as err:
            raise InvalidMessageError(f"expected {name} as base64, found {str(raw)[:40]!r} ({err})") from err
    return data


@dataclass(slots=True)
class Message:
    """One record in the common model.

    ``partition`` is the RocketMQ queue id or the Kafka partition; ``offset`` is the
    absolute logical offset within it (RocketMQ queue offset, Kafka offset); -1
    when not yet assigned.  ``timestamp`` is in milliseconds since the epoch; -1 (or None), the
    default, is the append's time, and an append refuses one below -1 (:func:`message_timestamp`).
    """

    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    offset: int = -1
    timestamp: int = -1
    headers: list[Header] = field(default_factory=list)
    timestamp_type: str = CREATE_TIME

    @classmethod
    def coerce(cls, obj: Message | dict) -> Message:
        """Return ``obj`` as a :class:`Message` (a read :class:`Record` as its ``to_message()``); strings
        become UTF-8 bytes.

        :raises InvalidMessageError: neither a :class:`Message`, a :class:`Record` nor a mapping, a field name
            :class:`Message` does not have, or a required one missing.
        """
        if isinstance(obj, Message):
            obj.headers = _headers(obj.headers)
            return obj
        if isinstance(obj, Record):     # a record read from a store: what it says of itself
            return cls.coerce(obj.to_message())
        if not isinstance(obj, Mapping):
            raise InvalidMessageError(f"expected a message as a dict or a segstore.Message, "
                                      f"found {type(obj).__name__}")
        data = dict(obj)
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        missing = [name for name in ("topic", "value") if name not in data]
        if unknown or missing:
            found = f"unknown field(s) {unknown}" if unknown else f"no {missing}"
            raise InvalidMessageError(f"expected the message fields {known} (topic and value required), "
                                      f"found {found}")
        for name in ("key", "value"):
            if isinstance(data.get(name), str):
                data[name] = data[name].encode("utf-8")
        data["headers"] = _headers(data.get("headers"))
        return cls(**data)


def message_list(messages: Any) -> list[Any]:
    """``messages``, what ``Store.append_batch`` takes (an iterable of messages), as a list: the list
    itself, else its items.  ``O(n)``.

    :raises InvalidMessageError: one message (a dict or a :class:`Message`: ``append`` takes those),
        a string, or not an iterable at all.
    """
    if type(messages) is list:
        return messages
    if not isinstance(messages, (Mapping, Message, str, bytes)):
        try:
            items = iter(messages)
        except TypeError:
            pass
        else:
            return list(items)
    one = " (append() takes one message)" if isinstance(messages, (Mapping, Message)) else ""
    raise InvalidMessageError(f"expected an iterable of messages (dicts or segstore.Message), found "
                              f"{type(messages).__name__}{one}")


def header_pairs(headers: Any) -> list[tuple[Any, Any]]:
    """An appended message's headers as its ``(key, value)`` pairs, as given (None: none).  Both
    formats' appends check the shape with it (RocketMQ's properties come from them too).

    :raises InvalidMessageError: not a list or tuple of 2-item lists or tuples (a string or a mapping
        is neither, and a pair ``"cd"`` would unpack into a name ``c`` and a value ``d``).
    """
    if headers is None:
        return []
    if not isinstance(headers, (list, tuple)):
        raise InvalidMessageError(f"expected headers as a list of (key, value) pairs, "
                                  f"found {cut(repr(headers))}")
    for i, pair in enumerate(headers):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InvalidMessageError(f"expected header {i} as a (key, value) pair, found {cut(repr(pair))}")
    return [(key, value) for key, value in headers]


def _headers(headers: Any) -> list[Header]:
    """A message's headers as ``(key, value)`` pairs, str values as UTF-8 bytes (None: none).

    :raises InvalidMessageError: see :func:`header_pairs`.
    """
    return [(key, value.encode("utf-8") if isinstance(value, str) else value)
            for key, value in header_pairs(headers)]
