"""The broker's static config (``server.properties``) as the topic configs it gives by default.

Kafka 3.8 ``Kafka.main`` loads ``server.properties`` with ``Utils.loadProps`` (``java.util.Properties``)
into a ``KafkaConfig``; a topic with no config of its own takes each topic config from the broker's
synonyms of it (``ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS``, first set wins, hours and
minutes made ms; ``KafkaConfig.extractLogConfigMap``).  The dynamic broker configs of the metadata log
override the file name by name before the synonyms are resolved (``DynamicBrokerConfig.updateCurrentConfig``:
static, then the cluster default, then this broker's), and a topic's own configs override the result.

The file's names are those of :data:`BROKER_SYNONYMS` and :data:`OFFSETS_RETENTION_MINUTES` (the group
coordinator's, which the consumer-group calls take); the broker's other names (``node.id``,
``log.dirs``, ``listeners``...) do not make the files segstore reads or writes and are left out, as an
unknown name is by the broker (it logs it, ``AbstractConfig.logUnused``).

In a store's config mapping the file's names travel under :data:`SERVER_PROPERTIES` (a ``compression.type``
of the file is the broker's default, which a topic's own ``compression.type`` overrides; the same name
given to ``open`` is the topic's, which wins over everything).  Pure: names in, names out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from segstore.errors import ConfigError, cut
from segstore.javatext import java_trim, parse_long

#: The key of a store's config mapping holding the broker's static config: broker name -> text.
SERVER_PROPERTIES = "server.properties"
_HOURS, _MINUTES = 3_600_000, 60_000
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
#: The deprecated topic config whose broker value gives the two below where they are not set.
TIMESTAMP_DIFFERENCE = "message.timestamp.difference.max.ms"
TIMESTAMP_BOUNDS = ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms")
#: Topic config -> the broker configs that give its default, first set wins, with the factor to ms
#: (server-common ``ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS``, for the names segstore uses).
BROKER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOURS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTES),
                     ("log.retention.hours", _HOURS)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
}
#: ``GroupCoordinatorConfig.OFFSETS_RETENTION_MINUTES_CONFIG`` (``INT``, ``atLeast(1)``): how long the
#: group coordinator keeps an empty group's offsets; the consumer-group calls' default
#: ``offsets_retention_ms``.
OFFSETS_RETENTION_MINUTES = "offsets.retention.minutes"
#: ``log.cleaner.dedupe.buffer.size`` (broker default 128 MiB, one cleaner thread): the memory of the
#: cleaner's key map (:mod:`.offsetmap`); here, where a store's ``compact`` default takes it without
#: loading the map's MD5 tables.
DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
#: Broker name -> (the topic config it is a synonym of, the factor to ms).
TOPIC_OF: dict[str, tuple[str, int]] = {broker: (topic, factor) for topic, synonyms in BROKER_SYNONYMS.items()
                                        for broker, factor in synonyms}


def static_layer(config: Mapping[str, Any]) -> dict[str, str]:
    """The :data:`SERVER_PROPERTIES` of a store's config mapping (empty without one), names and values as
    text.

    :raises ConfigError: it is not a mapping (a file's path given in its place, say).
    """
    static = config.get(SERVER_PROPERTIES)
    if static is None:
        return {}
    if not isinstance(static, Mapping):
        raise ConfigError(f"expected {SERVER_PROPERTIES} as a mapping of broker config names to their text "
                          f"(what segstore.config_file(FILE, 'kafka') gives), found {type(static).__name__} "
                          f"{cut(static)}")
    return {str(name): str(value) for name, value in static.items()}


def resolve(layers: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The topic configs that broker configs give: the layers merged as 3.8
    ``DynamicBrokerConfig.updateCurrentConfig`` merges the static config and the dynamic ones (the first
    taken whole; each name of a later one first removes its synonyms, ``overrideProps`` with
    ``brokerConfigSynonyms``: ``log.retention.hours`` set dynamically replaces a static
    ``log.retention.ms``), then each topic config taken from its first synonym set, a number of hours or
    minutes made ms, and a negative retention time -1 (``KafkaConfig.logRetentionTimeMillis``).  A text
    that is no number stays as it is (the topic config's parser refuses it)."""
    merged: dict[str, str] = {}
    for number, layer in enumerate(layers):
        for name, value in layer.items():
            if number and name in TOPIC_OF:
                for synonym, _ in BROKER_SYNONYMS[TOPIC_OF[name][0]]:
                    merged.pop(synonym, None)
            merged[name] = value
    out: dict[str, str] = {}
    for topic, synonyms in BROKER_SYNONYMS.items():
        for synonym, factor in synonyms:
            found = merged.get(synonym)
            if found is None:
                continue
            whole = java_whole(found)
            out[topic] = found if factor == 1 or whole is None else str(whole * factor)
            break
    retention = java_whole(out.get("retention.ms", ""))
    if retention is not None and retention < 0:
        out["retention.ms"] = "-1"
    difference = out.get(TIMESTAMP_DIFFERENCE)
    if difference is not None:
        # KafkaConfig.logMessageTimestampBeforeMaxMs / AfterMaxMs: the broker's before (after) unless it is
        # Long.MAX_VALUE, else its difference; extractLogConfigMap gives every topic those, so a topic's
        # own message.timestamp.difference.max.ms no longer reaches LogConfig's before and after
        for name in TIMESTAMP_BOUNDS:
            if name not in out or java_whole(out[name]) == _LONG_MAX:
                out[name] = difference
    return out


def java_whole(text: str) -> int | None:
    """``text`` as 3.8 ``ConfigDef.parseType`` reads an INT or LONG: trimmed (:func:`java_trim`), then
    ``Long.parseLong`` (:func:`segstore.javatext.parse_long`; an INT's narrower range is its caller's
    check); None where it throws."""
    return parse_long(java_trim(text))


def offsets_retention_ms(static: Mapping[str, str]) -> int | None:
    """The file's ``offsets.retention.minutes`` in ms; None where it gives none or one the broker refuses
    (``ConfigDef`` trims the text, ``Integer.parseInt`` reads it, at least 1)."""
    text = static.get(OFFSETS_RETENTION_MINUTES)
    minutes = None if text is None else java_whole(text)
    return minutes * _MINUTES if minutes is not None and 1 <= minutes <= _INT_MAX else None


def from_properties(entries: Sequence[tuple[str, str, int]], path: str,
                    overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The config a Kafka ``server.properties`` gives, under ``overrides`` (topic config names, which win
    over it): the file's names of :data:`BROKER_SYNONYMS` under :data:`SERVER_PROPERTIES`, each value
    checked as its topic config (a value ``KafkaConfig`` refuses keeps that broker from starting).

    :param entries: ``(name, value, byte position)`` in file order (a later name wins).
    :raises ConfigError: a value the broker refuses, naming ``path`` and the byte of its line.
    """
    from .partition import KafkaConfig

    # a topic config given by name replaces the file's synonyms of it, which are not looked at
    replaced = {str(name).replace("_", ".") for name in overrides or {}}
    static: dict[str, tuple[str, int]] = {}
    for name, value, pos in entries:
        if (name in TOPIC_OF and TOPIC_OF[name][0] not in replaced) or name == OFFSETS_RETENTION_MINUTES:
            static[name] = (java_trim(value), pos)      # ConfigDef.parseType trims every value first
    for name, (value, pos) in static.items():
        if name == OFFSETS_RETENTION_MINUTES:
            if offsets_retention_ms({name: value}) is None:
                raise ConfigError(f"expected {name} as the broker takes it (a whole number of minutes from 1 "
                                  f"to {_INT_MAX}), found {value!r}", path, pos)
            continue
        topic, factor = TOPIC_OF[name]
        if name == "compression.type" and value == "none":
            # segstore's own name for it; KafkaConfig's ValidString.in(BrokerCompressionType.names) has no
            # "none" (uncompressed, zstd, lz4, snappy, gzip, producer): the broker does not start
            raise ConfigError(f"expected {name} as the broker takes it (uncompressed, zstd, lz4, snappy, "
                              f"gzip or producer: KafkaConfig's BrokerCompressionType names), found 'none'",
                              path, pos)
        number = java_whole(value)
        if factor != 1 and (number is None or not -_INT_MAX - 1 <= number <= _INT_MAX):
            # KafkaConfig defines the hours and minutes as INT (Integer.parseInt), the ms as LONG
            raise ConfigError(f"expected {name} as the broker takes it (an INT: a whole number from "
                              f"{-_INT_MAX - 1} to {_INT_MAX}), found {value!r}", path, pos)
        try:
            KafkaConfig.from_mapping({topic: resolve([{name: value}])[topic]})
        except ConfigError as err:
            raise ConfigError(f"expected {name} as the broker takes it ({err.message})", path, pos) from err
    retention = resolve([{name: value for name, (value, _) in static.items()}]).get("retention.ms")
    if retention is not None and java_whole(retention) == 0:
        # KafkaConfig.validateValues: require(logRetentionTimeMillis >= 1 || == -1); the broker does not start
        name = next(synonym for synonym, _ in BROKER_SYNONYMS["retention.ms"] if synonym in static)
        raise ConfigError(f"expected {name} as the broker takes it (a retention time of -1, unlimited, or at "
                          f"least 1 ms: KafkaConfig.validateValues), found {static[name][0]!r}", path,
                          static[name][1])
    return {SERVER_PROPERTIES: {name: value for name, (value, _) in static.items()}, **(overrides or {})}


#: The one Kafka 3.8 broker config name without a '.' (``KafkaConfig``: ``listeners``)
_UNDOTTED_NAMES = frozenset({"listeners"})


def file_notes(entries: Iterable[tuple[str, str, int]]) -> list[tuple[str, int | None]]:
    """A ``server.properties`` none of whose names a Kafka broker reads: every name but ``listeners`` of
    ``KafkaConfig`` has a '.', and this file's have none (camelCase names, as a RocketMQ
    ``broker.conf`` holds): the broker would log each as "supplied but isn't a known config" and take
    nothing from it, so the file was most likely not meant for it (``(message, None)``)."""
    names = {name for name, _, _ in entries}
    if not names or any("." in name or name in _UNDOTTED_NAMES for name in names):
        return []
    shown = ", ".join(sorted(names)[:3])
    return [(f"expected a Kafka server.properties, found no name a Kafka broker reads ({shown}...: names "
             "without a '.', as a RocketMQ broker.conf holds; the broker's are log.dirs, "
             "log.retention.hours...): segstore takes none (the defaults stand)", None)]
