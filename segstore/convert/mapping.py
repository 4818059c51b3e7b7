"""The RocketMQ <-> Kafka field mapping, record by record, as the two plugins declare it.

The mapping itself lives in the plugins: ``segstore_rocketmq.conversion`` says how a
RocketMQ message becomes an :class:`Entry` and back (Kafka records *are* entries),
with every rule in its docstring; ``docs/conversion.md`` is the user's table.  These
functions reach it through the registry, for callers that hold one record of one of
the two formats (tests, tools); conversions themselves go through
:mod:`segstore.convert.pipeline`.  Pure; thread-safe.
"""

from __future__ import annotations

from typing import Any

from segstore import registry

from .interchange import Entry, FormatConversion, Peer

#: The conversion record (named for the side whose records it mirrors).
KafkaEntry = Entry


def __getattr__(name: str) -> Any:
    """``NONQUEUED_TOPIC`` (the Kafka topic of the RocketMQ messages no consume queue points at) and
    ``P_KEY`` (the RocketMQ property holding a Kafka key ``KEYS`` cannot carry), as the plugin says."""
    if name == "NONQUEUED_TOPIC":
        return _rocketmq().nonqueued_topic(_peer("kafka"))
    if name == "P_KEY":
        return "kafka" + _rocketmq().P_KEY
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _side(name: str) -> FormatConversion:
    side: FormatConversion = registry.get(name).conversion()
    return side


def _peer(name: str) -> Peer:
    return Peer(name, _side(name).topics)


def _rocketmq() -> Any:
    """The RocketMQ plugin's conversion module (its pure mapping functions)."""
    import sys

    return sys.modules[type(_side("rocketmq")).__module__]


def came_from_rocketmq(headers: list[tuple[str, bytes | None]]) -> bool:
    """True if a Kafka record with these headers was written from a RocketMQ message."""
    return bool(_rocketmq().came_from_rocketmq(headers))


def rocketmq_to_kafka(msg: Any, *, timestamp: str = "born") -> Entry:
    """The Kafka record for a RocketMQ message (a native one or one that came from Kafka)."""
    entry: Entry = _rocketmq().to_entry(msg, _peer("kafka"), timestamp=timestamp)
    return entry


def restore_kafka(msg: Any) -> Entry:
    """The Kafka record :func:`kafka_to_rocketmq` made ``msg`` from (its exact inverse)."""
    entry: Entry = _rocketmq().restore_entry(msg, _peer("kafka"))
    return entry


def kafka_to_rocketmq(entry: Entry, *, store_host: Any) -> Any:
    """The RocketMQ message for a Kafka record (a native one or one that came from RocketMQ)."""
    return _rocketmq().from_entry(entry, _peer("kafka"), store_host=store_host)


def restore_rocketmq(entry: Entry) -> Any:
    """The RocketMQ message :func:`rocketmq_to_kafka` made ``entry`` from (its exact inverse)."""
    return _rocketmq().restore_message(entry, _peer("kafka"))


__all__ = ["KafkaEntry", "came_from_rocketmq", "kafka_to_rocketmq",
           "restore_kafka", "restore_rocketmq", "rocketmq_to_kafka"]
