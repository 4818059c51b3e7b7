"""Reversible topic-name mapping between RocketMQ and Kafka.

RocketMQ topic names use ``[%|a-zA-Z0-9_-]`` (at most 127 characters as a producer sends them;
a 5.1+ broker stores longer ones, such as retry topics of long group names, as v2 messages with a
2-byte topic length, so a stored name may have up to 32767); Kafka topic names use
``[a-zA-Z0-9._-]`` (at most 249).  The destination store refuses a name its broker version cannot
store.  Each side percent-encodes the
characters the other side forbids, with an escape character the other side never
has:

* RocketMQ -> Kafka: ``%`` becomes ``.25`` and ``|`` becomes ``.7C``.  A RocketMQ
  name never holds ``.``, so every ``.`` of the result starts an escape.
* Kafka -> RocketMQ: ``.`` becomes ``%2E``.  A Kafka name never holds ``%``, so
  every ``%`` of the result starts an escape.

A name made only of the shared characters ``[a-zA-Z0-9_-]`` maps to itself.  Each
mapping is injective, and :func:`rocketmq_from_kafka` / :func:`kafka_from_rocketmq`
undo them exactly, so RocketMQ -> Kafka -> RocketMQ and Kafka -> RocketMQ -> Kafka
both give the original name back (the converter knows which side a record came
from, see :mod:`segstore.convert.mapping`).  A name whose escaped form is too long
for the other side is an :class:`InvalidTopicError`.

All functions are pure and thread-safe; each is ``O(len(name))``.
"""

from __future__ import annotations

import functools
import re

from segstore.errors import InvalidTopicError

ROCKETMQ_MAX_LENGTH = 0x7FFF        # a v2 message's topic length (MessageVersion.MESSAGE_VERSION_V2)
KAFKA_MAX_LENGTH = 249

_ROCKETMQ_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
_KAFKA_NAME = re.compile(r"[a-zA-Z0-9._-]+")

#: RocketMQ characters Kafka forbids, and their escapes in Kafka names.
TO_KAFKA_ESCAPES = {"%": ".25", "|": ".7C"}
#: Kafka characters RocketMQ forbids, and their escapes in RocketMQ names.
TO_ROCKETMQ_ESCAPES = {".": "%2E"}

_KAFKA_ESCAPE = re.compile(r"[%|]")
_ROCKETMQ_ESCAPE = re.compile(r"\.")
_KAFKA_UNESCAPE = re.compile(r"\.(25|7C)|\.")
_ROCKETMQ_UNESCAPE = re.compile(r"%(2E)|%")
_FROM_KAFKA_ESCAPE = {escape[1:]: char for char, escape in TO_KAFKA_ESCAPES.items()}
#: Distinct names remembered by each mapping (a store has few topics; every record asks).
NAME_CACHE_SIZE = 4096
_FROM_ROCKETMQ_ESCAPE = {escape[1:]: char for char, escape in TO_ROCKETMQ_ESCAPES.items()}


def _check(name: object, pattern: re.Pattern[str], max_length: int, side: str, chars: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidTopicError(f"expected a non-empty {side} topic name, found {name!r}")
    if not pattern.fullmatch(name):
        raise InvalidTopicError(f"expected a {side} topic name of the characters {chars}, found {name!r}")
    if len(name) > max_length:
        raise InvalidTopicError(f"expected a {side} topic name of at most {max_length} characters, "
                                f"found {len(name)} in {name!r}")
    return name


def check_rocketmq(name: object) -> str:
    """``name`` if RocketMQ accepts it as a topic name, else :class:`InvalidTopicError`."""
    return _check(name, _ROCKETMQ_NAME, ROCKETMQ_MAX_LENGTH, "RocketMQ", "[%|a-zA-Z0-9_-]")


def check_kafka(name: object) -> str:
    """``name`` if Kafka accepts it as a topic name, else :class:`InvalidTopicError`."""
    if name in (".", ".."):
        raise InvalidTopicError(f"expected a Kafka topic name other than '.' and '..', found {name!r}")
    return _check(name, _KAFKA_NAME, KAFKA_MAX_LENGTH, "Kafka", "[a-zA-Z0-9._-]")


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def kafka_from_rocketmq(name: str) -> str:
    """The Kafka name of RocketMQ topic ``name`` (``%RETRY%g`` -> ``.25RETRY.25g``)."""
    check_rocketmq(name)
    return check_kafka(_KAFKA_ESCAPE.sub(lambda m: TO_KAFKA_ESCAPES[m.group()], name))


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def rocketmq_from_kafka(name: str) -> str:
    """The RocketMQ name of Kafka topic ``name`` (``orders.v1`` -> ``orders%2Ev1``)."""
    check_kafka(name)
    return check_rocketmq(_ROCKETMQ_ESCAPE.sub(lambda m: TO_ROCKETMQ_ESCAPES[m.group()], name))


def _unescape(name: str, pattern: re.Pattern[str], table: dict[str, str], escape: str) -> str:
    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code is None:
            raise InvalidTopicError(f"expected every {escape!r} to start one of the escapes "
                                    f"{', '.join(escape + c for c in table)}, found {name!r}")
        return table[code]

    return pattern.sub(replace, name)


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def unescape_kafka(name: str) -> str:
    """The RocketMQ name :func:`kafka_from_rocketmq` turned into ``name`` (its exact inverse).

    :raises InvalidTopicError: ``name`` is not a name that function returns.
    """
    check_kafka(name)
    return check_rocketmq(_unescape(name, _KAFKA_UNESCAPE, _FROM_KAFKA_ESCAPE, "."))


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def unescape_rocketmq(name: str) -> str:
    """The Kafka name :func:`rocketmq_from_kafka` turned into ``name`` (its exact inverse).

    :raises InvalidTopicError: ``name`` is not a name that function returns.
    """
    check_rocketmq(name)
    return check_kafka(_unescape(name, _ROCKETMQ_UNESCAPE, _FROM_ROCKETMQ_ESCAPE, "%"))
