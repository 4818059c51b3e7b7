"""Reversible topic-name mapping between two formats' alphabets.

Each format plugin declares its topic names as :class:`TopicRules`: the characters
they may hold, their longest length, names it reserves, and an *escape* character.
A name goes into another format by percent-encoding every character that format's
names cannot hold, after the target's escape character, in two uppercase hex
digits; the source's names never hold that character (a plugin pair where they
would is refused), so every escape character of the result starts an escape and
:func:`unescape` undoes it exactly.  RocketMQ (``[%|a-zA-Z0-9_-]``, escape ``%``)
and Kafka (``[a-zA-Z0-9._-]``, escape ``.``) give:

* RocketMQ -> Kafka: ``%`` becomes ``.25`` and ``|`` becomes ``.7C``;
* Kafka -> RocketMQ: ``.`` becomes ``%2E``.

A name made only of characters both sides share maps to itself.  Each mapping is
injective and :func:`unescape` gives the original name back, so a round trip
through another format keeps every name.  A name whose escaped form is too long
for the other side is an :class:`InvalidTopicError`.

The pair-named functions at the end are the RocketMQ/Kafka mapping with the rules
those plugins declare (found through the registry).

All functions are pure and thread-safe; each is ``O(len(name))``.
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass

from segstore.errors import InvalidTopicError, cut

#: Distinct names remembered by each mapping (a store has few topics; every record asks).
NAME_CACHE_SIZE = 4096
#: Letters and digits, which most formats' topic names allow.
WORD_CHARS = string.ascii_letters + string.digits


@dataclass(frozen=True)
class TopicRules:
    """A format's topic names: ``side`` (its name in messages), ``chars`` every character a
    name may hold, ``pattern`` how messages show them, ``max_length``, ``reserved`` names it
    refuses, ``escape`` the character starting an escape in names mapped into it, ``internal``
    names it takes but its broker keeps for its own records (Kafka's ``__consumer_offsets``...):
    a conversion puts into them only streams that came from this format."""

    side: str
    chars: str
    pattern: str
    max_length: int
    escape: str
    reserved: frozenset[str] = frozenset()
    internal: frozenset[str] = frozenset()

    def check(self, name: object) -> str:
        """``name`` if this format accepts it as a topic name, else :class:`InvalidTopicError`."""
        if not isinstance(name, str) or not name:
            raise InvalidTopicError(f"expected a non-empty {self.side} topic name, found {cut(name)}")
        if name in self.reserved:
            reserved = " and ".join(repr(n) for n in sorted(self.reserved))
            raise InvalidTopicError(f"expected a {self.side} topic name other than {reserved}, "
                                    f"found {cut(name)}")
        if not set(name) <= set(self.chars):
            raise InvalidTopicError(f"expected a {self.side} topic name of the characters {self.pattern}, "
                                    f"found {cut(name)}")
        if len(name) > self.max_length:
            raise InvalidTopicError(f"expected a {self.side} topic name of at most {self.max_length} "
                                    f"characters, found {len(name)} in {cut(name)}")
        return name


def escapes(home: TopicRules, into: TopicRules) -> dict[str, str]:
    """The characters of ``home`` names that ``into`` names cannot hold, and their escapes."""
    if into.escape in home.chars:
        raise InvalidTopicError(f"expected {home.side} topic names without {into.side}'s escape "
                                f"{into.escape!r}, found it among their characters")
    return {c: f"{into.escape}{ord(c):02X}" for c in sorted(set(home.chars) - set(into.chars))}


@functools.lru_cache(maxsize=64)
def _escaper(home: TopicRules, into: TopicRules) -> tuple[re.Pattern[str], dict[str, str]]:
    table = escapes(home, into)
    return re.compile("[" + re.escape("".join(table)) + "]" if table else "(?!)"), table


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def escape(name: str, home: TopicRules, into: TopicRules) -> str:
    """The ``into`` name of ``home`` topic ``name`` (``%RETRY%g`` -> ``.25RETRY.25g``)."""
    home.check(name)
    pattern, table = _escaper(home, into)
    return into.check(pattern.sub(lambda m: table[m.group()], name))


@functools.lru_cache(maxsize=64)
def _unescaper(home: TopicRules, into: TopicRules) -> tuple[re.Pattern[str], dict[str, str]]:
    table = {code[1:]: char for char, code in escapes(home, into).items()}
    codes = "|".join(re.escape(code) for code in table)
    return re.compile(f"{re.escape(into.escape)}({codes})" + (f"|{re.escape(into.escape)}")
                      if codes else re.escape(into.escape)), table


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def unescape(name: str, home: TopicRules, into: TopicRules) -> str:
    """The ``home`` name :func:`escape` turned into ``into`` name ``name`` (its exact inverse).

    :raises InvalidTopicError: ``name`` is not a name :func:`escape` returns.
    """
    into.check(name)
    pattern, table = _unescaper(home, into)

    def replace(match: re.Match[str]) -> str:
        code = match.group(1) if match.groups() else None
        if code is None:
            raise InvalidTopicError(f"expected every {into.escape!r} to start one of the escapes "
                                    f"{', '.join(into.escape + c for c in table)}, found {name!r}")
        return table[code]

    return home.check(pattern.sub(replace, name))


def rules(format_name: str) -> TopicRules:
    """The topic rules the registered plugin ``format_name`` declares (its ``conversion().topics``).

    :raises FormatNotFoundError: no such format.
    """
    from segstore import registry

    return registry.get(format_name).conversion().topics


def check_rocketmq(name: object) -> str:
    """``name`` if RocketMQ accepts it as a topic name, else :class:`InvalidTopicError`."""
    return rules("rocketmq").check(name)


def check_kafka(name: object) -> str:
    """``name`` if Kafka accepts it as a topic name, else :class:`InvalidTopicError`."""
    return rules("kafka").check(name)


def kafka_from_rocketmq(name: str) -> str:
    """The Kafka name of RocketMQ topic ``name`` (``%RETRY%g`` -> ``.25RETRY.25g``)."""
    return escape(name, rules("rocketmq"), rules("kafka"))


def rocketmq_from_kafka(name: str) -> str:
    """The RocketMQ name of Kafka topic ``name`` (``orders.v1`` -> ``orders%2Ev1``)."""
    return escape(name, rules("kafka"), rules("rocketmq"))


def unescape_kafka(name: str) -> str:
    """The RocketMQ name :func:`kafka_from_rocketmq` turned into ``name`` (its exact inverse)."""
    return unescape(name, rules("rocketmq"), rules("kafka"))


def unescape_rocketmq(name: str) -> str:
    """The Kafka name :func:`rocketmq_from_kafka` turned into ``name`` (its exact inverse)."""
    return unescape(name, rules("kafka"), rules("rocketmq"))
