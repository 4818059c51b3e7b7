"""Each topic's own config: what the log directory's files say, under what the command line says.

A KRaft log directory holds every topic's non-default configs in its metadata log
(``ConfigRecord``, replayed by :mod:`.kraft`); segstore applies those it knows
(:class:`.partition.KafkaConfig`'s names: ``cleanup.policy``, ``retention.*``,
``segment.*``...) to that topic's partitions.  A name given on the command line
(``--config``, or ``segstore.open(..., **config)``) wins over the files and is reported
as overriding them.  Two topics are compacted whatever is set (the broker creates them
with ``cleanup.policy=compact``: ``GroupCoordinator.offsetsTopicConfigs``,
``TransactionStateManager.transactionTopicConfigs``): ``__consumer_offsets`` and
``__transaction_state``.  The internal topics (``org.apache.kafka.common.internals.Topic``,
``INTERNAL_TOPICS``) refuse DeleteRecords, and ``__cluster_metadata`` is no log the log
manager owns at all: retention, compaction and DeleteRecords leave it alone
(``KafkaMetadataLog`` deletes its segments below its snapshots itself).

Pure: configs in, configs out.  Thread-safe once built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from segstore.errors import ConfigError

from .brokerconfig import BROKER_SYNONYMS, TIMESTAMP_BOUNDS, TIMESTAMP_DIFFERENCE, resolve
from .dirnames import METADATA_TOPIC
from .partition import MIN_INDEX_BYTES, KafkaConfig, index_size_below_an_entry

if TYPE_CHECKING:   # the metadata image's module loads where a log directory has a metadata log
    from .kraft import MetadataImage

#: Topics the broker always compacts.
COMPACTED_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: 3.8.0 ``Topic.INTERNAL_TOPICS`` (clients/.../common/internals/Topic.java): DeleteRecords refuses them.
#: ``__share_group_state`` joined the set in Kafka 3.9 (share groups); to a 3.8 broker it is an ordinary
#: topic, whose records DeleteRecords deletes and whose segments retention deletes.
INTERNAL_TOPICS = COMPACTED_INTERNAL_TOPICS
COMPACT = "compact"
METADATA_LOG_SOURCE = "the metadata log"
def field_name(name: str) -> str:
    """A config name as :class:`KafkaConfig` spells it (``segment.bytes`` -> ``segment_bytes``)."""
    return name.strip().replace(".", "_")


def dotted(name: str) -> str:
    return name.replace("_", ".")


KNOWN = frozenset(f.name for f in dataclasses.fields(KafkaConfig))


def is_log_managed(topic: str) -> bool:
    """Whether the broker's log manager owns the topic's logs (every topic but the KRaft metadata log)."""
    return topic != METADATA_TOPIC


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """The config a topic's partitions use, and where its values came from."""

    config: KafkaConfig
    #: config name (dotted) -> value: what the files set and segstore applied
    from_files: dict[str, str] = field(default_factory=dict)
    #: config name -> (what the files say, what the command line says): the command line won
    overridden: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: what was not applied, and why
    notes: tuple[str, ...] = ()
    #: the files describe the topic (the metadata log holds it, or the broker always compacts it): its
    #: ``cleanup.policy`` is known, set or the default
    described: bool = False
    #: why the broker appends nothing to the topic (None: it does): the files set a
    #: ``segment.index.bytes`` that Kafka's ``LogConfig`` takes but no index can be created with
    unwritable: str | None = None


class TopicConfigs:
    """Per topic: the command line's config over the files' (see the module docstring).

    :param base: the config parsed from the command line (defaults elsewhere).
    :param explicit: the names the command line gave (either spelling).
    :param image: the metadata image, None without a metadata log.
    :param node_id: this node's id (``meta.properties``): its own dynamic broker configs apply.
    :param static: the broker's ``server.properties`` (broker names, :mod:`.brokerconfig`), which the
        metadata log's dynamic broker configs override name by name.
    """

    def __init__(self, base: KafkaConfig, explicit: Collection[str] = (),
                 image: MetadataImage | None = None, node_id: int | None = None,
                 static: Mapping[str, str] | None = None) -> None:
        self.base = base
        self.static = dict(static or {})
        self.node_id = node_id
        self.explicit = frozenset(field_name(n) for n in explicit)
        self.image = image
        self._cache: dict[str, TopicConfig] = {}

    def config_for(self, topic: str) -> KafkaConfig:
        return self.for_topic(topic).config

    def unwritable(self, topic: str) -> str | None:
        """Why the broker appends nothing to ``topic`` (:attr:`TopicConfig.unwritable`), None if it does."""
        return self.for_topic(topic).unwritable

    def for_topic(self, topic: str) -> TopicConfig:
        found = self._cache.get(topic)
        if found is None:
            found = self._cache[topic] = self._build(topic)
        return found

    def _build(self, topic: str) -> TopicConfig:
        described = topic in COMPACTED_INTERNAL_TOPICS
        files: dict[str, str] = {}
        if self.image is not None and self.image.topic(topic) is not None:
            files = {**self._broker_defaults(), **self.image.topic_configs(topic)}
            described = True
        if topic in COMPACTED_INTERNAL_TOPICS and COMPACT not in files.get("cleanup.policy", "").split(","):
            files["cleanup.policy"] = COMPACT
        values: dict[str, object] = {}
        applied: dict[str, str] = {}
        overridden: dict[str, tuple[str, str]] = {}
        notes: list[str] = []
        unwritable = None
        if files.get("remote.storage.enable", "").strip().lower() == "true":
            # LogConfig.remoteStorageEnable: UnifiedLog.deleteOldSegments deletes local segments by
            # local.retention.* once copied to remote storage, which the log directory does not show
            notes.append(f"{topic}: remote.storage.enable=true in {METADATA_LOG_SOURCE}: a tiered topic; "
                         "segstore sees only its local log (the broker deletes local segments by "
                         "local.retention.ms/bytes once remote storage holds them, and its log start "
                         "offset is remote storage's), and applies retention.ms/bytes to that local log")
        for name, value in sorted(files.items()):
            attr = field_name(name)
            if attr not in KNOWN:
                continue
            if attr in self.explicit and not self._same(name, value, attr):
                given = str(getattr(self.base, attr))
                if attr == "cleanup_policy" and topic in COMPACTED_INTERNAL_TOPICS and given != COMPACT:
                    notes.append(f"{topic} is always compacted: --config cleanup.policy={given} "
                                 "does not apply")
                else:
                    overridden[name] = (value, given)
                    continue
            try:
                parsed = KafkaConfig.from_mapping({name: value})
            except ConfigError as err:
                size = index_size_below_an_entry(value) if attr == "segment_index_bytes" else None
                if size is not None:
                    # the broker takes it (LogConfig: atLeast(4)) and then creates no index of the topic:
                    # AbstractIndex refuses a .timeindex below one entry (LogLoader, a roll, the cleaner)
                    unwritable = (f"expected segment.index.bytes of at least {MIN_INDEX_BYTES} for {topic}, "
                                  f"found {size} in {METADATA_LOG_SOURCE}: Kafka's LogConfig takes it, but "
                                  "its AbstractIndex cannot create a .timeindex smaller than one 12-byte "
                                  "entry ('Invalid max index size'): the broker appends nothing to the "
                                  "topic and its cleaner marks it uncleanable, and segstore does likewise")
                    notes.append(f"{topic}: {name}={value} from {METADATA_LOG_SOURCE}: appends to the topic "
                                 f"are refused ({unwritable})")
                    continue
                notes.append(f"{topic}: {name}={value} from {METADATA_LOG_SOURCE} not applied "
                             f"({err.message})")
                continue
            values[attr] = getattr(parsed, attr)
            applied[name] = value
        config = dataclasses.replace(self.base, **values)  # type: ignore[arg-type]  # names checked above
        try:
            config._validate()
        except ConfigError as err:
            return TopicConfig(self.base, {}, {}, (*notes, f"{topic}: the configs of {METADATA_LOG_SOURCE} "
                                                          f"not applied ({err.message})"), described,
                               unwritable)
        return TopicConfig(config, applied, overridden, tuple(notes), described, unwritable)

    def _same(self, name: str, value: str, attr: str) -> bool:
        """Whether the files' ``name=value`` is what the command line gave (then it overrides nothing)."""
        try:
            return bool(getattr(KafkaConfig.from_mapping({name: value}), attr) == getattr(self.base, attr))
        except ConfigError:
            return False

    def _broker_defaults(self) -> dict[str, str]:
        """The topic configs the metadata log's dynamic broker configs give every topic: the broker's
        ``server.properties``, the cluster default's (the broker resource named "") and this node's
        (``ConfigRecord`` of the broker resource named by its id) merged as the broker merges them
        (:func:`.brokerconfig.resolve`), each topic config by its first synonym that is set
        (``ServerTopicConfigSynonyms``).  Only the topic configs a dynamic config gives a synonym of: the
        file's alone are in the base config already."""
        if self.image is None:
            return {}
        from .kraft import BROKER_RESOURCE  # loaded already: it built the image
        layers = [self.image.configs.get((BROKER_RESOURCE, "")) or {}]
        if self.node_id is not None:
            layers.append(self.image.configs.get((BROKER_RESOURCE, str(self.node_id))) or {})
        dynamic = {name for name, synonyms in BROKER_SYNONYMS.items()
                   if any(synonym in layer for layer in layers for synonym, _ in synonyms)}
        if TIMESTAMP_DIFFERENCE in dynamic:     # it gives the broker's before and after (resolve)
            dynamic.update(TIMESTAMP_BOUNDS)
        return {name: value for name, value in resolve([self.static, *layers]).items() if name in dynamic}

    def notes(self, topics: Collection[str]) -> list[str]:
        """One line per config of these topics that the command line overrode or that was not applied."""
        lines = []
        for topic in sorted(topics):
            found = self.for_topic(topic)
            for name, (value, given) in found.overridden.items():
                source = METADATA_LOG_SOURCE if topic not in COMPACTED_INTERNAL_TOPICS else "the topic"
                lines.append(f"{topic}: --config {name}={given} overrides {name}={value} of {source}")
            lines.extend(found.notes)
        return lines

    def topic_ids(self) -> Mapping[str, str]:
        """Topic name -> id, as the metadata log says (empty without one)."""
        if self.image is None:
            return {}
        return {name: t.topic_id for name, t in self.image.topics.items()}
