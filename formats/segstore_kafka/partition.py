"""A Kafka partition directory ``TOPIC-PARTITION/``: segments, offsets, rolls, retention, lookups.

The segments live in the core :class:`segstore.log.SegmentedLog` (a segment map
keyed by base offset); every lookup goes through it and then through one
segment's sparse index and the one binary search.  The rules are Kafka 3.8's:

- **offsets** are assigned from the log end offset, one per record;
- **roll** before an append when the active segment's size would pass
  ``segment.bytes``, when the batch's max timestamp is more than ``segment.ms``
  after the segment's first batch, or when an index is full; segstore also rolls
  before an open's first append when the active segment holds damage the broker's
  recovery would cut at (:meth:`Partition.active_holds_damage`);
- **retention** deletes whole segments from the oldest (never the active one)
  while ``retention.bytes`` is exceeded or their largest timestamp is older than
  ``retention.ms``, and moves the log start offset;
- **leader epochs**: a batch's ``partitionLeaderEpoch`` newer than the cache's
  latest starts an entry at its base offset (``leader-epoch-checkpoint``);
- **LogAppendTime** (``message.timestamp.type``): the broker's clock stamps each batch.

Thread-safety: not thread-safe; the owning store serialises calls.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from segstore import files, progress
from segstore.errors import (
    ConfigError,
    CorruptDataError,
    CorruptIndexError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    UnrepairedDataError,
    cut,
    did_you_mean,
    shown,
    shown_number,
)
from segstore.javatext import java_trim, parse_long
from segstore.log import SegmentedLog

from . import batch as codec
from .brokerconfig import SERVER_PROPERTIES, TOPIC_OF, java_whole, resolve, static_layer
from .checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from .compression import COMPRESSION_NAMES, codec_id
from .dirnames import MAX_PARTITION, PARTITION_DIR, named_path, segment_bases
from .loader import (
    complete_interrupted,
    pending_swap_problems,
    remove_snapshots_past,
    snapshot_problems,
    tidy_snapshots,
)
from .offsetindex import OFFSET_ENTRY, OffsetIndex
from .segment import (
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    ChunkSource,
    LogSegment,
    ProducerBatches,
    TimestampAndOffset,
    TransactionTracker,
    file_name,
    tracked,
    transactional_rows,
)
from .timeindex import TimeIndex
from .txnindex import AbortedTxn

if TYPE_CHECKING:   # the Arrow modules load where columns are read or appended (`segstore info` reads none)
    from . import arrowencode, columnar
    from .results import Appended, RecoverResult

_INT_MAX, _LONG_MAX = 2**31 - 1, 2**63 - 1
#: What Kafka 3.8.0's ``LogConfig`` definitions accept (``ConfigDef`` types INT or LONG, ``atLeast``
#: validators: ``segment.bytes`` at least ``LegacyRecord.RECORD_OVERHEAD_V0``, ``retention.ms`` -1 for
#: ever, ``retention.bytes`` any long); a value outside is refused as the broker refuses the config.
_RANGES = {
    "segment_bytes": (14, _INT_MAX),
    "segment_ms": (1, _LONG_MAX),
    "segment_index_bytes": (4, _INT_MAX),
    "index_interval_bytes": (0, _INT_MAX),
    "retention_bytes": (-_LONG_MAX - 1, _LONG_MAX),
    "retention_ms": (-1, _LONG_MAX),
    "max_message_bytes": (0, _INT_MAX),
    "delete_retention_ms": (0, _LONG_MAX),
    "min_compaction_lag_ms": (0, _LONG_MAX),
    "segment_jitter_ms": (0, _LONG_MAX),
    "max_compaction_lag_ms": (1, _LONG_MAX),
    "message_timestamp_before_max_ms": (0, _LONG_MAX),
    "message_timestamp_after_max_ms": (0, _LONG_MAX),
    "message_timestamp_difference_max_ms": (0, _LONG_MAX),
}

#: ``ThrottledReplicaListValidator``'s entry.  This module's patterns that opening and reading a store
#: never use are texts, compiled by re where first used (and cached there), not at import: a compile
#: costs 0.3-0.6M instructions of every process's first open.
_THROTTLED = r"([0-9]+:[0-9]+)?"


def _config_bool(name: str, raw: Any) -> bool:
    """A BOOLEAN config as ``ConfigDef.parseType`` takes it: a bool, or ``true``/``false`` in any case,
    trimmed ("Expected value to be either true or false")."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"expected true or false for {name}, found {cut(raw)}")


def _config_double(name: str, raw: Any, low: float, high: float) -> None:
    """A DOUBLE config (``ConfigDef.parseType``: a number, or text ``Double.valueOf`` reads) in
    ``ConfigDef.Range.between(low, high)``."""
    value: float | None = None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
    if value is None:
        raise ConfigError(f"expected a number for {name}, found {cut(raw)}")
    if not low <= value <= high:
        raise ConfigError(f"expected {name} from {low} to {high} (Kafka's LogConfig), found {cut(raw)}")


def _config_throttled(name: str, raw: Any) -> None:
    """``ThrottledReplicaListValidator``: ``*``, or a list of ``partitionId:brokerId`` (entries trimmed)."""
    entries = [e.strip() for e in str(raw).split(",")]
    if not (all(re.fullmatch(_THROTTLED, e) for e in entries) or "".join(entries) == "*"):
        raise ConfigError(f"expected {name} of '*' or a list of [partitionId]:[brokerId], found {cut(raw)}")


#: ``MetadataVersion.fromVersionString``'s shape: ``0.10.2``, ``2.8``, ``3.0-IV1``...
_VERSION = r"\d+\.\d+(\.\d+)?(-IV\d+)?"


def _config_version(name: str, raw: Any) -> None:
    """``message.format.version``'s ``MetadataVersionValidator`` (a version ``MetadataVersion`` names; its
    shape checked here)."""
    if not isinstance(raw, str) or re.fullmatch(_VERSION, raw.strip()) is None:
        raise ConfigError(f"expected {name} of a Kafka version (3.0-IV1, 2.8...), found {cut(raw)}")


def _config_long(low: int, high: int = _LONG_MAX) -> Callable[[str, Any], None]:
    def check(name: str, raw: Any) -> None:
        value = _config_int(name, raw)
        if not low <= value <= high:
            raise ConfigError(f"expected {name} from {low} to {high} (Kafka's LogConfig), found "
                              f"{shown_number(value)}")
    return check


def _spans(allowed: tuple[range, ...]) -> str:
    return " or ".join(f"{r.start}" if len(r) == 1 else f"{r.start} to {r.stop - 1}" for r in allowed)


#: 3.8.0 ``GzipCompression``/``Lz4Compression``/``ZstdCompression`` level validators: gzip 1 to 9 or -1
#: (``Deflater.DEFAULT_COMPRESSION``), lz4 1 to 17, zstd ``Zstd.minCompressionLevel()`` to 22
_LEVELS: dict[str, tuple[range, ...]] = {
    "compression_gzip_level": (range(-1, 0), range(1, 10)),
    "compression_lz4_level": (range(1, 18),),
    "compression_zstd_level": (range(-131072, 23),),
}


#: Kafka 3.8.0 ``LogConfig`` names whose effect is the broker's alone: replication (``min.insync.replicas``,
#: ``unclean.leader.election.enable``, the throttled replica lists), when it fsyncs (``flush.*``), when it
#: unlinks a deleted segment (``file.delete.delay.ms``), tiered storage (``remote.storage.enable``,
#: ``local.retention.*``), which log its cleaner picks first (``min.cleanable.dirty.ratio``: ``segstore
#: compact`` cleans whatever the ratio), how its fetches answer old clients
#: (``message.downconversion.enable``), file preallocation (``preallocate``: ``LogSegment``'s files are
#: trimmed to their size when closed), and ``message.format.version`` (ignored from
#: inter.broker.protocol.version 3.0).  Each is checked as ``ConfigDef`` checks it (a bad value is a
#: ConfigError), then ignored: no file segstore writes depends on it.
BROKER_ONLY: dict[str, Callable[[str, Any], object]] = {
    "preallocate": _config_bool,
    "unclean_leader_election_enable": _config_bool,
    "remote_storage_enable": _config_bool,
    "message_downconversion_enable": _config_bool,
    "min_insync_replicas": _config_long(1, _INT_MAX),
    "flush_messages": _config_long(1),
    "flush_ms": _config_long(0),
    "file_delete_delay_ms": _config_long(0),
    "local_retention_ms": _config_long(-2),
    "local_retention_bytes": _config_long(-2),
    "min_cleanable_dirty_ratio": lambda name, raw: _config_double(name, raw, 0.0, 1.0),
    "leader_replication_throttled_replicas": _config_throttled,
    "follower_replication_throttled_replicas": _config_throttled,
    "message_format_version": _config_version,
}


def _config_int(name: str, raw: Any) -> int:
    """An INT or LONG topic config as Kafka 3.8.0's ``ConfigDef.parseType`` takes it: an integer, or text
    that ``Integer.parseInt``/``Long.parseLong`` reads once trimmed (no ``_`` separators); a float or a
    bool is refused (``Expected value to be a 32-bit integer``), not cut to a whole number."""
    if isinstance(raw, str):
        number = java_whole(raw)    # String.trim then Long.parseLong: no "5\xa0", no "1_000"
        if number is not None:
            return number
    elif not isinstance(raw, bool) and hasattr(raw, "__index__"):     # int, numpy's integers
        return operator.index(raw)
    raise ConfigError(f"expected an integer for {name} (ConfigDef's Long.parseLong of the trimmed text: a "
                      f"Java long), found {cut(raw)}")


#: The smallest ``segment.index.bytes`` a segment's indexes can be created with: one ``.timeindex`` entry.
MIN_INDEX_BYTES = 12


def index_size_below_an_entry(raw: Any) -> int | None:
    """``raw`` as ``segment.index.bytes`` where Kafka 3.8.0's ``LogConfig`` takes it (an INT,
    ``atLeast(4)``) but no index can be created with it (below :data:`MIN_INDEX_BYTES`: ``AbstractIndex``
    throws ``IllegalArgumentException("Invalid max index size")`` creating a ``.timeindex`` smaller than
    one 12-byte entry), else None."""
    try:
        value = _config_int("segment.index.bytes", raw)
    except ConfigError:
        return None
    return value if _RANGES["segment_index_bytes"][0] <= value < MIN_INDEX_BYTES else None


# Kafka 3.8.0 ListOffsetsRequest's codes for what a ListOffsets request asks in place of a time
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
#: every code 3.8.0 knows; another negative is no time a record can have, and no code either
LIST_OFFSETS_CODES = (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    """Topic config, by Kafka's names (``segment.bytes``...) with Kafka's defaults.

    One exception: ``retention.ms`` defaults to -1 (keep everything); retention
    only deletes segments when ``retention.ms`` or ``retention.bytes`` is set.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    message_timestamp_type: str = "CreateTime"
    retention_bytes: int = -1
    # The broker's default is 7 days; a file tool must not delete data nobody asked it to.
    retention_ms: int = -1
    compression_type: str = "none"
    # Kafka's default (1 MiB + the 12-byte log overhead): a larger batch is refused, as the broker does.
    max_message_bytes: int = 1024 * 1024 + 12
    # Retention (retention.py) and the cleaner (compaction.py), Kafka's names and defaults.
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    # LogConfig.maxSegmentMs: a compacted topic rolls by min(this, segment.ms), so it becomes cleanable
    max_compaction_lag_ms: int = _LONG_MAX
    # LogConfig.randomSegmentJitter draws the roll's jitter in [0, min(this, segment.ms)); segstore draws 0
    # (a draw the broker can make): its rolls are repeatable, at segment.ms (docs/kafka.md)
    segment_jitter_ms: int = 0
    # LogValidator.validateTimestamp: a CreateTime topic refuses a record this much older / newer than now;
    # the deprecated difference.max.ms stands in for either left at Long.MAX_VALUE (3.8 LogConfig)
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = _LONG_MAX
    message_timestamp_difference_max_ms: int = _LONG_MAX
    # KIP-390 (3.8): the level the broker compresses at when it writes the topic's compression.type
    # (LogConfig.getCompression; CompressionType's default levels)
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3

    @classmethod
    def from_mapping(cls, config: dict[str, Any]) -> KafkaConfig:
        """Parse ``{"segment.bytes": "1024", "segment_ms": 5, ...}``; values may be strings.

        :raises ConfigError: an unknown name or a bad value.
        """
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        if SERVER_PROPERTIES in config:
            # the broker's server.properties: the topic configs it gives, under those given by name
            given = {name.replace(".", "_") for name in config}
            config = {**{name: value for name, value in resolve([static_layer(config)]).items()
                         if name.replace(".", "_") not in given},
                      **{name: value for name, value in config.items() if name != SERVER_PROPERTIES}}
        for raw_name, raw in config.items():
            name = raw_name.replace(".", "_")
            if name in BROKER_ONLY:
                BROKER_ONLY[name](raw_name, raw)
                continue
            if name not in known:
                dotted = ", ".join(sorted(n.replace("_", ".") for n in known))
                synonym = TOPIC_OF.get(str(raw_name).replace("_", "."))
                hint = (f" (a broker config: the broker's synonym of {synonym[0]}, which --config takes; "
                        f"the broker's own server.properties goes with --config-file)" if synonym else
                        did_you_mean(str(raw_name), (n.replace('_', '.') for n in known)))
                raise ConfigError(f"expected a Kafka topic config name ({dotted}), found {cut(raw_name)}"
                                  f"{hint}")
            if isinstance(known[name].default, int):
                values[name] = _config_int(raw_name, raw)
            elif name == "cleanup_policy":
                # a LIST: ConfigDef.parseType trims the text and splits it at commas with the spaces
                # around them (COMMA_WITH_WHITESPACE), so "compact, delete" is both policies
                values[name] = ",".join(re.split(r"\s*,\s*", str(raw).strip()))
            else:
                # a STRING: ConfigDef.parseType trims it (String.trim) before the validator sees it, for a
                # topic's own config in the metadata log as for the broker's
                values[name] = java_trim(str(raw))
        parsed = cls(**values)
        parsed._validate()
        return parsed

    def _validate(self) -> None:
        if self.codec not in COMPRESSIONS:
            raise ConfigError(f"expected compression.type in {('uncompressed', 'producer', *COMPRESSIONS)}, "
                              f"found {cut(self.compression_type)}")
        # an empty LIST is valid (ValidList checks each of no entries): neither delete nor compact
        policies = self.cleanup_policy.split(",") if self.cleanup_policy else []
        if not set(policies) <= {"delete", "compact"}:
            raise ConfigError("expected cleanup.policy of delete and/or compact (or empty: neither), "
                              f"found {cut(self.cleanup_policy)}")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ConfigError(f"expected message.timestamp.type in {TIMESTAMP_TYPES}, "
                              f"found {cut(self.message_timestamp_type)}")
        for name in ("segment_bytes", "segment_ms", "segment_index_bytes"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"expected a positive {name.replace('_', '.')}, "
                                  f"found {getattr(self, name)}")
        if self.segment_index_bytes < MIN_INDEX_BYTES:
            # LogConfig takes 4 and up (atLeast(4)), but Kafka 3.8.0's AbstractIndex constructor refuses to
            # create an index smaller than one entry: a .timeindex (12-byte entries) of fewer bytes throws
            # IllegalArgumentException("Invalid max index size"), so no segment can be created with it
            raise ConfigError("expected segment.index.bytes of at least 12 (one .timeindex entry: Kafka's "
                              "LogConfig takes 4 and up, but its AbstractIndex refuses to create a smaller "
                              f"index, 'Invalid max index size'), found {self.segment_index_bytes}")
        if self.index_interval_bytes < 0:
            raise ConfigError("expected a non-negative index.interval.bytes, "
                              f"found {self.index_interval_bytes}")
        for name, (low, high) in _RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"expected {name.replace('_', '.')} from {low} to {high} (Kafka's "
                                  f"LogConfig), found {shown_number(value)}")
        for name, allowed in _LEVELS.items():
            if not any(getattr(self, name) in span for span in allowed):
                raise ConfigError(f"expected {name.replace('_', '.')} of {_spans(allowed)} (Kafka's "
                                  f"CompressionType level validator), found {getattr(self, name)}")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            # LogConfig.validateValues' InvalidConfigurationException
            raise ConfigError(f"expected min.compaction.lag.ms ({self.min_compaction_lag_ms}) at most "
                              f"max.compaction.lag.ms ({self.max_compaction_lag_ms}) (conflict topic config "
                              "setting, Kafka's LogConfig.validateValues)")

    def level_of(self, compression: str | int) -> int | None:
        """The level the broker writes ``compression`` at under this config (``compression.gzip.level``...);
        None for snappy and none, which have no level."""
        return getattr(self, f"compression_{COMPRESSION_NAMES[codec_id(compression)]}_level", None)

    @property
    def max_segment_ms(self) -> int:
        """The time a segment may span before a roll (``LogConfig.maxSegmentMs``): a compacted topic's
        ``max.compaction.lag.ms`` caps ``segment.ms`` so its records become cleanable by then."""
        if "compact" in self.cleanup_policy.split(",") and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def delete(self) -> bool:
        """Whether ``cleanup.policy`` has ``delete`` (``LogConfig.delete``): retention runs its size and
        time passes."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact(self) -> bool:
        """Whether ``cleanup.policy`` has ``compact`` (3.8 ``LogConfig.compact``): the broker then refuses a
        record without a key (:func:`check_keys`)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def checks_timestamps(self) -> bool:
        """Whether an append checks its records' times (:func:`check_timestamps`): a CreateTime topic with
        a bound set."""
        return self.message_timestamp_type == "CreateTime" and (
            self.timestamp_before_max_ms != _LONG_MAX or self.timestamp_after_max_ms != _LONG_MAX)

    @property
    def timestamp_before_max_ms(self) -> int:
        """``LogConfig.getMessageTimestampBeforeMaxMs`` (3.8): difference.max.ms where before is unset."""
        before = self.message_timestamp_before_max_ms
        return before if before != _LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """``LogConfig.getMessageTimestampAfterMaxMs`` (3.8): difference.max.ms where after is unset."""
        after = self.message_timestamp_after_max_ms
        return after if after != _LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def codec(self) -> str:
        """The batches' codec: ``producer`` writes them as given (none), ``uncompressed`` is Kafka's
        name of none (apache/kafka 3.8.0 ``BrokerCompressionType``; ``none`` is taken too)."""
        return "none" if self.compression_type in ("producer", "uncompressed") else self.compression_type


#: Kafka's topic rules (``org.apache.kafka.common.internals.Topic``; a pattern's text, as ``_THROTTLED``).
LEGAL_TOPIC = r"[a-zA-Z0-9._-]+"
MAX_TOPIC_LENGTH = 249




def validate_topic(topic: str, partition: int) -> None:
    """Refuse what Kafka refuses: empty, ``.``/``..``, over 249 characters, other than ``[a-zA-Z0-9._-]``.

    Also keeps a topic from naming a directory outside the log directory.

    :raises InvalidTopicError: with the rule broken.
    """
    if not isinstance(topic, str):
        raise InvalidTopicError(f"expected a topic name (str), found {shown(topic)}")
    if not topic or topic in (".", ".."):
        raise InvalidTopicError(f"expected a topic name other than {cut(topic)}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"expected a topic of at most {MAX_TOPIC_LENGTH} characters, "
                                f"found {len(topic)}")
    if re.fullmatch(LEGAL_TOPIC, topic) is None:
        raise InvalidTopicError(f"expected a topic of the characters [a-zA-Z0-9._-], found {cut(topic)}")
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise InvalidTopicError(f"expected an integer partition, found {shown(partition)}")
    if not 0 <= partition <= MAX_PARTITION:
        raise InvalidTopicError(f"expected a partition from 0 to {MAX_PARTITION} (an int32, as Kafka keeps "
                                f"it), found {shown_number(partition)}")


def parse_partition_dir(path: str) -> tuple[str, int]:
    """``(topic, partition)`` from a directory name ``TOPIC-N``.

    :raises InvalidTopicError: the name is not of that form.
    """
    name = os.path.basename(named_path(path))
    match = PARTITION_DIR.match(name)
    if match is None:
        raise InvalidTopicError(f"expected a partition directory named TOPIC-PARTITION, found {cut(name)}",
                                path)
    if int(match["partition"]) > MAX_PARTITION:
        # Integer.parseInt refuses it: LogManager.loadLogs fails the log directory on this name
        raise InvalidTopicError(f"expected a partition directory named TOPIC-PARTITION with a partition "
                                f"of at most {MAX_PARTITION} (Kafka reads it with Integer.parseInt), found "
                                f"{cut(name)}", path)
    return match["topic"], int(match["partition"])


#: index files of a segment (``LocalLog.isIndexFile``; a pattern's text, as ``_THROTTLED``)
INDEX_FILE = r"^(?P<base>\d{20})\.(index|timeindex|txnindex)$"


def orphaned_indexes(path: str, next_offset: Callable[[int], int | None] | None = None
                     ) -> list[tuple[str, int | None, str]]:
    """Index files of a partition directory whose ``.log`` is gone (and not being deleted: a
    ``.log.deleted`` beside them is Kafka's own deletion half done, which a writable open finishes:
    :func:`.loader.complete_interrupted`): Kafka 3.8's ``LogLoader.loadSegmentFiles`` deletes such an
    orphaned index, and the segment's records are lost.  The message names the offsets lost: from the
    previous segment's end (``next_offset(its base)``, where given; else the index's own base) to
    before the next segment's base (the log then has a hole there: no record of Kafka's has those
    offsets), or from there on for the last segment (the log end goes back to it, and new records
    take those offsets again).  ``O(files)`` plus a ``next_offset`` call per orphaned segment."""
    names = set(files.list_dir(path))
    problems: list[tuple[str, int | None, str]] = []
    index_file = re.compile(INDEX_FILE)
    bases = sorted(int(name[:-4]) for name in names if name.endswith(".log") and name[:-4].isdigit()
                   and len(name) == 24)
    lost: dict[int, str] = {}
    for name in sorted(names):
        match = index_file.match(name)
        if match is None:
            continue
        log = f"{match['base']}.log"
        if log not in names and f"{log}.deleted" not in names:
            base = int(match["base"])
            if base not in lost:
                lost[base] = _offsets_lost(base, bases, next_offset)
            problems.append((os.path.join(path, name), None,
                             f"expected {log} beside {name}, found none: Kafka's LogLoader deletes the "
                             f"orphaned index, and the records of the segment are lost{lost[base]}"))
    return problems


def _offsets_lost(base: int, bases: list[int], next_offset: Callable[[int], int | None] | None) -> str:
    """``": offsets 18-23 ..."``: what the segment of ``base``, its ``.log`` gone, held, between the
    segments of ``bases`` (those whose ``.log`` is there) around it."""
    below = [b for b in bases if b < base]
    above = [b for b in bases if b > base]
    start = next_offset(below[-1]) if below and next_offset is not None else None
    start = base if start is None else start
    if not above:
        return (f": offsets from {start} on (the log end goes back to {start}, and new records take those "
                "offsets again)")
    if start >= above[0]:
        return ""
    end = above[0] - 1
    offsets = f"offset {start}" if start == end else f"offsets {start}-{end}"
    where = "the previous segment's end" if below and next_offset is not None else "the index's base"
    return f": {offsets} (from {where} to before the next segment's base, {above[0]})"


#: the names Kafka 3.8 takes an offset from (``LogFileUtils.offsetFromFileName``) when it loads a
#: partition: segments and indexes (``LogLoader.loadSegmentFiles``: ``LocalLog.isLogFile``,
#: ``isIndexFile``), an interrupted clean or swap (``removeTempFilesAndCollectSwapFiles``; a ``.deleted``
#: file is removed unread) and producer snapshots (``ProducerStateManager.listSnapshotFiles``)
OFFSET_NAMED = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".cleaned", ".swap")


def _log_name(offset: int) -> str:
    """``LogFileUtils.logFile``'s name: ``filenamePrefixFromOffset`` (at least 20 digits, a ``-`` before
    them for a negative offset) and ``.log``."""
    return f"{'-' if offset < 0 else ''}{abs(offset):020d}.log"


def misnamed_files(path: str) -> list[tuple[str, int | None, str]]:
    """Files of a partition directory whose names Kafka 3.8 takes an offset from and cannot: the text
    before the first ``.`` is no Java long (``Long.parseLong`` throws ``NumberFormatException``, which
    nothing catches there, and the broker does not start); and ``.log`` files named by an offset but not
    as ``%020d.log``, whose records the broker never reads (it opens ``LogFileUtils.logFile`` of the
    offset instead, creating it empty).  ``O(entries of the directory)``."""
    problems: list[tuple[str, int | None, str]] = []
    for name in files.list_dir(path):
        full = os.path.join(path, name)
        if not name.endswith(OFFSET_NAMED) or name.endswith(".deleted") or not files.is_file(full):
            continue
        offset = parse_long(name.split(".", 1)[0])     # LogFileUtils.offsetFromFileName
        if offset is None:
            problems.append((full, None, f"expected a name starting with an offset, found {cut(name)}: "
                             "Kafka's LogLoader cannot parse it (LogFileUtils.offsetFromFileName: "
                             "NumberFormatException) and the broker does not start"))
        elif name.endswith(".log") and name != _log_name(offset):
            problems.append((full, None, f"expected {_log_name(offset)} (the base offset, 20 digits), found "
                             f"{cut(name)}: Kafka's LogLoader opens {_log_name(offset)} for it and never "
                             "reads these records"))
    return problems


def now_ms() -> int:
    return time.time_ns() // 1_000_000


#: :mod:`.results` once loaded (:func:`_results`): an append reads ``_loaded_results or _results()``
#: (an ``import`` statement in it took 0.6 us a batch)
_loaded_results: ModuleType | None = None


def _results() -> ModuleType:
    """:mod:`.results`, loaded at a store's first append (an open and a read make no report)."""
    global _loaded_results
    if _loaded_results is None:
        from . import results

        _loaded_results = results
    return _loaded_results


#: Most (entry, batch) pairs :func:`stray_entries` compares at once; more (an index whose positions
#: jump back and forth, each entry then spanning much of the log) go through the per-entry loop.
MAX_PAIRS = 1 << 22


def stray_entries(base_offset: int, relative: np.ndarray, index_positions: np.ndarray, starts: np.ndarray,
                  lasts: np.ndarray, walked: int, whole: bool) -> list[tuple[int, int, int, int | None]]:
    """The offset-index entries that do not point at their batches, as ``(slot, offset, position, the
    last offset of the batch at that position or None)``, in slot order.

    An entry is (largest offset of one append, where the append starts): one batch for a produce, a
    run of batches for the log cleaner (``LogSegment.append`` of a filtered chunk), so it must name a
    batch's position and the last offset of one of the batches from there to the next entry's
    position (the walk's end for the last).  Entries at or past ``walked`` are not checked unless the
    walk was ``whole``.  ``starts`` (rising) and ``lasts``: the batches the walk found.  ``O((entries +
    batches) log batches)`` in numpy; :func:`stray_entries_reference` is the same per entry.
    """
    n = len(relative)
    if not n:
        return []
    relative = relative.astype(np.int64)
    positions = index_positions.astype(np.int64)
    if not (0 <= base_offset <= np.iinfo(np.int64).max - (1 << 32)):    # an offset numpy cannot add
        return stray_entries_reference(base_offset, relative, positions, starts, lasts, walked, whole)
    offsets = relative + base_offset
    upto = np.append(positions[1:], walked)
    lo = np.searchsorted(starts, positions, "left")
    hi = np.maximum(np.searchsorted(starts, upto, "left"), lo)
    spans = hi - lo
    if int(spans.sum()) > MAX_PAIRS:
        return stray_entries_reference(base_offset, relative, positions, starts, lasts, walked, whole)
    at = np.minimum(lo, max(len(starts) - 1, 0))
    named = (lo < len(starts)) & (starts[at] == positions) if len(starts) else np.zeros(n, np.bool_)
    # each entry's span of batches laid end to end: which of them ends at the entry's offset
    slot_of = np.repeat(np.arange(n), spans)
    batch_of = np.arange(len(slot_of)) - np.repeat(np.cumsum(spans) - spans, spans) + np.repeat(lo, spans)
    ends_there = np.zeros(n, np.bool_)
    ends_there[slot_of[lasts[batch_of] == offsets[slot_of]]] = True
    checked = np.ones(n, np.bool_) if whole else positions < walked
    bad = np.flatnonzero(checked & ~(named & ends_there))
    return [(slot, int(offsets[slot]), int(positions[slot]), int(lasts[at[slot]]) if named[slot] else None)
            for slot in bad.tolist()]


def stray_entries_reference(base_offset: int, relative: np.ndarray, index_positions: np.ndarray,
                            starts: np.ndarray, lasts: np.ndarray, walked: int, whole: bool
                            ) -> list[tuple[int, int, int, int | None]]:
    """:func:`stray_entries` one entry at a time (Python ints: any base offset; any spans)."""
    ends = dict(zip(starts.tolist(), lasts.tolist(), strict=True))
    batch_starts = starts.tolist()
    pairs = [(base_offset + r, p) for r, p in zip(relative.tolist(), index_positions.tolist(), strict=True)]
    out: list[tuple[int, int, int, int | None]] = []
    for slot, (offset, position) in enumerate(pairs):
        if position >= walked and not whole:
            continue
        upto = pairs[slot + 1][1] if slot + 1 < len(pairs) else walked
        there = {ends[p] for p in batch_starts[bisect.bisect_left(batch_starts, position):
                                               bisect.bisect_left(batch_starts, upto)]}
        if position not in ends or offset not in there:
            out.append((slot, offset, position, ends.get(position)))
    return out


def check_batch_size(size: int, config: KafkaConfig, path: str, position: int = 0) -> None:
    """Refuse a batch of ``size`` bytes the broker refuses under ``config``: larger than
    ``max.message.bytes`` (``LogValidator``'s RecordTooLargeException) or than ``segment.bytes``
    (``UnifiedLog.append``'s RecordBatchTooLargeException).

    :raises MessageTooLargeError: naming ``path`` (and ``position``, the active segment's end).
    """
    if size > config.max_message_bytes:
        raise MessageTooLargeError(f"expected a batch of at most max.message.bytes="
                                   f"{config.max_message_bytes} bytes, found {size}", path, position)
    if size > config.segment_bytes:
        raise MessageTooLargeError(f"expected a batch of at most segment.bytes={config.segment_bytes} bytes, "
                                   f"found {size}", path)


def _java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def check_timestamps(batch: codec.RecordBatch, config: KafkaConfig, now: int, path: str) -> None:
    """Refuse a batch the broker refuses under ``config`` at ``now`` (3.8 ``LogValidator.validateTimestamp``,
    ``recordHasInvalidTimestamp``): on a CreateTime topic, a record whose timestamp (not -1, none) is
    more than ``message.timestamp.before.max.ms`` before ``now`` or ``after.max.ms`` after it
    (InvalidTimestampException; the whole batch is refused).  Decodes the records only where a bound is set.

    :raises InvalidMessageError: naming the record's offset and the range, as the broker's message does.
    """
    if not config.checks_timestamps or batch.is_control:
        return      # no bound; or markers, the coordinator's (appendAsLeader, origin COORDINATOR)
    _refuse_times(batch.records(), config, now, path)


def check_keys(batch: codec.RecordBatch, config: KafkaConfig, path: str) -> None:
    """Refuse a batch the broker refuses on a compacted topic (3.8 ``LogValidator.validateKey``): a
    record without a key (InvalidRecordException "Compacted topic cannot accept message without key";
    the whole batch is refused).  Decodes the records only where ``cleanup.policy`` has ``compact``.

    :raises InvalidMessageError: naming the record's offset.
    """
    if not config.compact or batch.is_control:
        return      # markers carry their own key; the coordinator writes them (origin COORDINATOR)
    _refuse_keyless(batch.records(), config, path)


def check_records(batch: codec.RecordBatch, config: KafkaConfig, now: int, path: str) -> None:
    """:func:`check_keys` and :func:`check_timestamps` (what 3.8 ``LogValidator.validateRecord`` checks
    of each record: its key, and only where it has one its time) over one decode of the records, none
    where neither applies.  The error is the broker's (``LogValidator.processRecordErrors``, which
    gathers every record's error first): an InvalidTimestampException where any record's time is out
    of range, the missing key only otherwise.

    :raises InvalidMessageError: a record with a key (any record off a compacted topic) whose time is
        out of range (the first), else a record without a key on a compacted topic (the first).
    """
    keys, times = config.compact, config.checks_timestamps
    if batch.is_control or not (keys or times):
        return
    records = batch.records()
    if times:   # a keyless record's time is not checked: validateRecord returns its key error first
        _refuse_times([r for r in records if r.key is not None] if keys else records, config, now, path)
    if keys:
        _refuse_keyless(records, config, path)


def _refuse_keyless(records: list[codec.Record], config: KafkaConfig, path: str) -> None:
    """:func:`check_keys` of decoded ``records``."""
    for record in records:
        if record.key is None:
            raise InvalidMessageError(no_key_message(f"the record at offset {record.offset}", config), path)


def _refuse_times(records: list[codec.Record], config: KafkaConfig, now: int, path: str) -> None:
    """:func:`check_timestamps` of decoded ``records``: numpy over their times, in int64 as Java's longs
    wrap (:func:`time_out_of_range`, one record at a time, took most of an append's time)."""
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    stamps = np.fromiter((record.timestamp for record in records), np.int64, len(records))
    diff = np.int64(_java_long(now)) - stamps
    bad = np.flatnonzero((stamps != codec.NO_TIMESTAMP) & ((diff > before) | (-diff > after)))
    if len(bad):
        record = records[int(bad[0])]
        raise InvalidMessageError(
            f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
            f"The timestamp should be within [{_java_long(now - before)}, {_java_long(now + after)}]",
            path)


def no_key_message(which: str, config: KafkaConfig) -> str:
    """What :func:`check_keys` (and the appends that check their rows before encoding) say of a record
    (``which``: where it is) without a key on a compacted topic: the broker's words, then what was
    expected."""
    return (f"Compacted topic cannot accept message without key: expected a key on every record "
            f"(cleanup.policy={config.cleanup_policy}), found none on {which}")


def time_out_of_range(config: KafkaConfig, timestamp: int, now: int) -> bool:
    """Whether a CreateTime topic under ``config`` refuses a record of ``timestamp`` at ``now`` (3.8
    ``LogValidator.recordHasInvalidTimestamp``, Java's long arithmetic; -1, no time, is never checked)."""
    if not config.checks_timestamps or timestamp == codec.NO_TIMESTAMP:
        return False
    diff = _java_long(now - timestamp)
    return diff > config.timestamp_before_max_ms or _java_long(-diff) > config.timestamp_after_max_ms


def encode_records(config: KafkaConfig, records: list[Any], *, base_offset: int, leader_epoch: int, now: int,
                   compression: str | None = None, producer_id: int = -1, producer_epoch: int = -1,
                   base_sequence: int = -1, transactional: bool = False) -> bytes:
    """``records`` as the one batch an append writes under ``config``: its codec at its level
    (``compression`` overrides it: a producer's own codec, at that codec's default level, kept as it came:
    3.8 ``LogValidator`` does not recompress a batch of the topic's codec, nor compare levels) and
    timestamp type (LogAppendTime: stamped ``now``). Pure."""
    log_append = config.message_timestamp_type == "LogAppendTime"
    return codec.encode_batch(
        records, base_offset=base_offset, compression=compression or config.codec,
        partition_leader_epoch=leader_epoch, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, is_transactional=transactional,
        timestamp_type=config.message_timestamp_type, log_append_time=now if log_append else None,
        compression_level=None if compression else config.level_of(config.codec))


def encode_columns(config: KafkaConfig, columns: arrowencode.Columns, rows: np.ndarray, *, base_offset: int,
                   leader_epoch: int, now: int) -> bytes:
    """``rows`` of ``columns`` as the one batch an append writes under ``config`` (as
    :func:`encode_records` writes it), in one C call where built
    (:func:`.arrowencode.encode_batch_columns`). Pure."""
    from . import arrowencode

    log_append = config.message_timestamp_type == "LogAppendTime"
    return arrowencode.encode_batch_columns(
        [(columns, rows)], base_offset + np.arange(len(rows), dtype=np.int64), base_offset=base_offset,
        compression=config.codec, partition_leader_epoch=leader_epoch,
        timestamp_type=codec.LOG_APPEND_TIME if log_append else codec.CREATE_TIME,
        log_append_time=now if log_append else None, compression_level=config.level_of(config.codec))


def plain_header(config: KafkaConfig, count: int, now: int, *, base_offset: int,
                 leader_epoch: int) -> tuple[tuple, int]:
    """``(header, codec id)`` of a batch of ``count`` records an append writes under ``config`` (as
    :func:`encode_records` writes them: no producer, the topic's codec and timestamp type), for the C
    encoders (:func:`.arrowencode.header_fields`). Pure.

    :raises InvalidMessageError: a header field out of range.
    """
    from . import arrowencode

    codec_number = codec_id(config.codec)
    log_append = config.message_timestamp_type == "LogAppendTime"
    header = arrowencode.header_fields(
        base_offset=base_offset, partition_leader_epoch=leader_epoch,
        attributes=codec.attributes(codec_number, log_append=log_append, is_transactional=False,
                                    is_control=False),
        last_offset_delta=count - 1, max_timestamp=now if log_append else None,
        producer_id=codec.NO_PRODUCER_ID, producer_epoch=codec.NO_PRODUCER_EPOCH,
        base_sequence=codec.NO_SEQUENCE)
    return header, codec_number


def _largest_timestamp_for_lookup(seg: LogSegment, closed: bool) -> int:
    """The largest timestamp a time lookup takes ``seg`` to hold (3.8 ``LogSegment.largestTimestamp``):
    :meth:`LogSegment.max_timestamp_so_far` (the ``.log`` file's mtime where that is -1: no record
    timestamp known), or where damage stops its walk of the batches, the time
    index's last entry, as the broker loads it (``readMaxTimestampAndOffsetSoFar``): a lookup of a
    later time passes over the damaged segment as Kafka's does; one of a time it may hold walks it
    and names the damage (:meth:`LogSegment.find_offset_by_timestamp`).  A ``closed`` segment (not the
    active one) takes its time index's last entry where that is larger: the broker wrote it at the
    roll, and no live writer's batch is unfinished there, so a batch cut short in it is damage whose
    times its index still holds, not records yet to come.

    :raises CorruptDataError: the walk met damage and the time index is empty.
    """
    try:
        largest = seg.max_timestamp_so_far().timestamp
    except CorruptDataError:
        if not len(seg.time_index):
            raise
        return seg.time_index.last_entry.timestamp
    if closed and len(seg.time_index):
        largest = max(largest, seg.time_index.last_entry.timestamp)
    if largest >= 0:
        return largest
    # no timestamp known (v0 messages; a time index Kafka before 0.10.1 never wrote, loaded empty): the
    # .log file's mtime, as largestTimestamp falls back to lastModified, and the records are searched;
    # a store on a remote filesystem (whose listings do not all give a modification time) has them searched
    return (1 << 63) - 1 if files.is_url(seg.path) else files.mtime_ms(seg.path)


class Partition:
    """One partition directory.

    :param path: the ``TOPIC-N`` directory (created in writable mode).
    :param writable: open for appends (recovers what a crash left first).
    :param clock: milliseconds now (LogAppendTime, ``segment.ms``, ``retention.ms``).
    :param recovery_point: the partition's ``recovery-point-offset-checkpoint`` entry (0 when there is
        none): a writable partition a crash left recovers from the segment holding it.
    :param recovery_point_kept: the owner writes the partition's recovery point (its log end) into its
        log dir's checkpoint at close (a log directory's store: every partition's; a partition
        directory's: where that file names it); False: the broker's next load recovers it from offset 0
        whatever is appended (:meth:`_refuse_appends_after_damage`).
    :param write_recovery_point: ``(partition)``: the owner's writer of this partition's entry in its log
        dir's ``recovery-point-offset-checkpoint`` (its log end), called before the first append where
        the broker's next load would cut at damage from the checkpointed one, or fail
        (:meth:`_checkpoint_past_damage`); None: nothing written then.
    :param lock: a writable partition locks its directory (False: its owner holds the lock of the log
        directory around it, which every writer of one of its partitions takes, :class:`.KafkaStore`;
        a directory lock is a descriptor held from open to close, and a store may write thousands of
        partitions).
    """

    def __init__(self, path: str, config: KafkaConfig, *, writable: bool = False,
                 clock: Callable[[], int] = now_ms, recovery_point: int = 0,
                 unwritable: str | None = None, lock: bool = True, clean_shutdown: bool = False,
                 recovery_point_kept: bool = True,
                 write_recovery_point: Callable[[Partition], None] | None = None) -> None:
        """``clean_shutdown``: its log dir holds the marker of a broker's clean shutdown (Kafka 3.8.0
        ``LogLoader.load`` then recovers no segment, ``hadCleanShutdown``): a writable open checks no
        batch's CRC to find a torn one (a batch whose CRC fails there is damage, not a write a crash cut
        short).  ``unwritable``: why the broker appends nothing to the partition's topic (its files' config, a
        ``segment.index.bytes`` no index can be created with); every append raises it, and a writable
        open leaves the partition's files as they are (read as a reader reads them): Kafka 3.8.0
        ``LogLoader.load`` would resize the active segment's indexes to that size
        (``LogSegment.resizeIndexes``) and ``LogSegment.recover``'s ``AbstractIndex.reset`` too, which
        fails below the entries an index holds; segstore neither grows them to another size nor
        rebuilds them at one."""
        writable = writable and unwritable is None
        self.path = path
        self.unwritable = unwritable
        self.recovery_point = recovery_point
        self.recovery_point_kept = recovery_point_kept
        self._write_recovery_point = write_recovery_point
        self.clean_shutdown = clean_shutdown
        self.topic, self.partition = parse_partition_dir(path)
        self.config = config
        self.writable = writable
        self.clock = clock
        self.recovered: list[str] = []
        #: the base of the first segment the writable open recovered (every one from it was), if any
        self._opened_recovering_from: int | None = None
        #: whether this open's appends were checked for damage in the active segment
        #: (:meth:`active_holds_damage`: once, at the first append)
        self._active_checked = False
        #: whether this open's first append looked for damage from the checkpointed recovery point
        #: (:meth:`_damage_from_recovery_point`, in :meth:`active_holds_damage`)
        self._point_checked = False
        #: ``(path, pos, message)`` of index files a reader found corrupt and read without
        self.index_problems: list[tuple[str, int | None, str]] = []
        self._lock: files.DirectoryLock | None = None
        if writable:
            files.make_dirs(path)
            if lock:
                self._lock = files.DirectoryLock(path)
                self._lock.acquire()
        try:
            self._load()
        except BaseException:
            self._release_lock()
            raise

    def _load(self) -> None:
        path, writable = self.path, self.writable
        if writable:
            # LogLoader: finish or roll back an interrupted clean/swap, drop `.deleted` files
            self.recovered.extend(complete_interrupted(path))
        self.log: SegmentedLog[LogSegment] = SegmentedLog(self._new_segment)
        self.epochs = LeaderEpochCache.load(os.path.join(path, LEADER_EPOCH_CHECKPOINT))
        #: the newest leader epoch the partition is known to have had (the cache's latest as loaded,
        #: before entries past the log end were dropped): :attr:`append_epoch` never goes below it
        self._newest_epoch = self.epochs.latest_epoch
        #: the log dir's ``log-start-offset-checkpoint`` entry, once :meth:`load_log_start` took it
        self._log_start_checkpoint: int | None = None
        self._txns: TransactionTracker | None = None
        #: ``transactions.first_open_offset``'s last answer and the segments it holds for
        self.open_transactions: tuple[tuple[Any, ...], int | None] | None = None
        bases = segment_bases(path)
        opened: list[LogSegment] = []
        try:
            for base in bases:
                opened.append(self._open_segment_or_drop_indexes(base))
        except BaseException:
            for seg in opened:
                seg.abandon()
            raise
        self.log.load(opened)
        if not self.clean_shutdown:
            # Kafka 3.8.0 LogLoader.recoverLog recovers every segment from the recovery point's after an
            # unclean shutdown, a missing time index rebuilt from the records (LogSegment.recover): their
            # timestamps are the segment's max again, whether segstore rewrites the file or not
            for seg in self.segments[self._recovery_point_segment(self.recovery_point):]:
                seg.legacy_time_index = False
        if writable:
            self._recover_crashed()
            active = self.log.active
            if active is None:
                active = self.log.roll(0)
            active.make_appendable()
            self.recovered.extend(tidy_snapshots(path, active.next_offset()))
        first = self.log.segments.first
        self.log_start_offset = first.base if first is not None else 0
        self.next_offset = self.log.active.next_offset() if self.log.active is not None else 0
        # Kafka 3.8.0 ``LogLoader.load``, after ``recoverLog`` whether it recovered anything or not:
        # ``leaderEpochCache.truncateFromEndAsyncFlush(nextOffset)``, an entry at or past the log end (a
        # leader elected there, a checkpoint a crash left ahead of a cut log) is not loaded.  A reader's
        # cache is never flushed: the file stays as it is; a writer's is written at close, and its appends
        # are written in the epoch the entry named (:attr:`append_epoch`), not back in an older one.
        dropped = self._truncate_epochs_from_end(self.next_offset)
        if writable:
            self.recovered.extend(dropped)

    def load_log_start(self, checkpointed: int) -> None:
        """Take the log dir's ``log-start-offset-checkpoint`` entry as Kafka 3.8.0 ``LogLoader.load`` does:
        the log start is ``max(checkpoint, first base)``, and the leader epoch cache is truncated from the
        start at the checkpoint ("the earliest leader epoch may not be flushed during a hard failure":
        ``truncateFromStartAsyncFlush(logStartOffsetCheckpoint)``), a writer's written when it changed
        (a reader's only held: the file stays as it is)."""
        self.log_start_offset = max(self.log_start_offset, checkpointed)
        self._log_start_checkpoint = checkpointed
        self.epochs.truncate_from_start(checkpointed)
        if self.writable:
            self.epochs.flush()

    def _truncate_epochs_from_end(self, end: int) -> list[str]:
        """Drop the leader epochs starting at or past ``end`` (Kafka 3.8.0
        ``LeaderEpochFileCache.truncateFromEndAsyncFlush``), then, where :meth:`load_log_start` took a
        checkpoint, truncate from the start again: ``LogLoader.load`` truncates from the end first and
        from the start after (``truncateFromStartAsyncFlush(logStartOffsetCheckpoint)``), so a log whose
        start is its end (a delete-records to the end) keeps the epoch of its log start.  Returns the line
        that says what went (none where nothing did), as the cache logs "Cleared entries ...".
        ``O(entries)``."""
        before = self.epochs.entries
        self.epochs.truncate_from_end(end)
        dropped = before[len(self.epochs.entries):]
        if self._log_start_checkpoint is not None:
            self.epochs.truncate_from_start(self._log_start_checkpoint)
        if not dropped:
            return []
        return [f"{self.epochs.path}: dropped the leader epochs starting at or past the log end {end}: "
                + ", ".join(f"{e.epoch} {e.start_offset}" for e in dropped)]

    @property
    def append_epoch(self) -> int:
        """The leader epoch an append is written in where the caller names none: the cache's latest, or
        the newest one the loaded ``leader-epoch-checkpoint`` held where that entry started at or past
        the log end and was dropped (``LogLoader.load`` drops it; the broker that appends next leads in
        that epoch or a later one, never an older: ``Partition.makeLeader`` then
        ``LeaderEpochFileCache.assign`` of its epoch at the log end offset); 0 for none."""
        latest = self.epochs.latest_epoch
        return max(e for e in (latest, self._newest_epoch, 0) if e is not None)

    # -- segments ---------------------------------------------------------------
    def _open_segment(self, base: int, *, create: bool, read_indexes: bool = True) -> LogSegment:
        return LogSegment(self.path, base, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, writable=self.writable,
                          create=create, created_ms=self.clock(), read_indexes=read_indexes)

    def _new_segment(self, base: int) -> LogSegment:
        return self._open_segment(base, create=True)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self.log.segments)

    def _open_segment_or_drop_indexes(self, base: int) -> LogSegment:
        """Open a segment; a writable partition answers a corrupt index by rebuilding it (as Kafka
        ``LogLoader.loadSegmentFiles`` does), a reader by going on without it."""
        try:
            return self._open_segment(base, create=False)
        except CorruptIndexError as err:
            if not self.writable:
                # A reader goes on without the indexes (lookups walk the log) and verify reports
                # the index once, so the rest of the partition is still read and checked; the other
                # index file, left unread with it, is checked on its own (both may be damaged)
                self.index_problems.append((err.path or self.path, err.pos, err.message))
                for cls, suffix in ((OffsetIndex, INDEX_SUFFIX), (TimeIndex, TIME_INDEX_SUFFIX)):
                    path = os.path.join(self.path, file_name(base, suffix))
                    if path == err.path or not files.exists(path):
                        continue
                    try:
                        cls.open(path, base, max_index_size=self.config.segment_index_bytes).close()
                    except CorruptIndexError as other:
                        self.index_problems.append((other.path or path, other.pos, other.message))
                return self._open_segment(base, create=False, read_indexes=False)
            index_paths = [os.path.join(self.path, file_name(base, suffix))
                           for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
            if err.path not in index_paths:
                raise       # not a file removing these two fixes: nothing is touched
            self.recovered.append(f"{err}; rebuilding the indexes of segment {base}")
            for path in index_paths:
                if files.exists(path):
                    files.remove(path)
            return self._open_segment(base, create=False)

    def _recover_crashed(self) -> None:
        """Recover what a crash left: from the first segment with a missing, untrimmed or corrupt
        index, or the first holding a batch a crash tore past the recovery point (the log ends inside
        it, its framing or its CRC fails: :meth:`_first_torn_past_recovery_point`), or the active
        segment when its indexes name batches past its end (:attr:`LogSegment.indexes_past_log`), to
        the end; the leader epochs from the recovery point (:meth:`_recover_from`).

        A segment below the recovery point's is recovered alone, as Kafka 3.8.0
        ``LogLoader.loadSegmentFiles`` recovers a segment whose offset index is missing
        (``NoSuchFileException``) or whose ``.txnindex`` is corrupt (``recoverSegment``, that segment
        only): the segments after it keep their files (``recoverLog`` recovers only those from the
        recovery point).  One whose log is cut ends the log there all the same (:meth:`_recover_from`).
        """
        below = self._recovery_point_segment(self.recovery_point)
        i = 0
        while i < min(below, len(self.segments)):
            if self.segments[i].needs_recovery:
                self.recovered.extend(self._recover_from(i, every_line=True, epochs_from=below, stop=i + 1))
                below = self._recovery_point_segment(self.recovery_point)
            i += 1
        segments = self.segments
        damaged = next((i for i, seg in enumerate(segments) if seg.needs_recovery), None)
        # Batches' CRCs are checked only after a crash (LogLoader.recoverLog recovers nothing after a
        # clean shutdown) and only past the recovery point, whose batches were flushed: one failing
        # there can be a write a power loss tore, one below it is damage (verify names it, a reader
        # stops there), not cut.
        if damaged is None and not self.clean_shutdown:
            damaged = self._first_torn_past_recovery_point()
            # from offset 0 every segment was walked as the first append's checks walk them
            # (active_holds_damage): nothing is left for them to find
            self._active_checked = damaged is None and self.recovery_point == 0
        # Indexes are derived from the log (Kafka 3.8.0 LogSegment.recover rebuilds them and truncates
        # them to the valid bytes): entries past the log's end are rebuilt away, or the entry close()
        # forces into the time index would go backwards.
        if damaged is None and segments and (segments[-1].check_tail() is not None
                                             or segments[-1].indexes_past_log):
            damaged = len(segments) - 1
        if damaged is not None:
            seg = segments[damaged]
            self._opened_recovering_from = seg.base
            self._active_checked = True     # recovered to the end: every batch left passed its CRC
            self.recovered.extend(f"{path}:{pos}: {message}; rebuilding it from the log"
                                  for path, pos, message in seg.txn_index.problems(seg.base))
            self.recovered.extend(self._recover_from(damaged, every_line=True,
                                                     epochs_from=self._recovery_point_segment(self.recovery_point)))

    def _first_torn_past_recovery_point(self) -> int | None:
        """The index of the first segment holding a batch a crash may have torn past the recovery point
        (:meth:`LogSegment.first_torn_batch`: the log ending inside it, its framing or, at or past the
        recovery point, its CRC failing), or whose recovery throws (:meth:`LogSegment.index_gone_back`),
        or None.  Kafka 3.8.0 ``LogLoader.recoverLog`` validates every batch from the recovery point
        (``LogSegment.recover``: ``ensureValid``) and truncates the log at the first bad one, or truncates
        a segment whose rebuilt indexes go back (``InvalidOffsetException``) to its base offset, and
        deletes every later segment; so a page a power loss zeroed inside what the last writer appended
        (its recovery point not moved to its end by a clean close) would drop whatever is appended after
        it.  The walk starts at the offset index entry at or below the recovery point (Kafka recovers the
        whole segment holding it, but the batches below the point were flushed: a CRC failing there is
        damage, which ``verify`` names, readers stop at and the consumer-groups tool refuses to write
        past).  With no recovery point known (0: the log dir's checkpoint does not name the partition, or
        a partition directory's parent holds none) every segment is walked from its start, as the broker
        recovers them all.
        ``O(bytes past the recovery point)``, intact v2 batches in C."""
        segments = self.segments
        point = self.recovery_point
        first = self._recovery_point_segment(point)
        for i in range(first, len(segments)):
            seg = segments[i]
            start = 0
            if i == first and point and len(seg.offset_index) and seg.base <= point:
                start = seg.offset_index.lookup_offset(point).position
            if seg.first_torn_batch(start, point) is not None or seg.index_gone_back() is not None:
                return i
        return None

    def _recovery_point_segment(self, recovery_point: int) -> int:
        """The index in :attr:`segments` of the segment holding ``recovery_point`` (Kafka 3.8
        ``LogLoader.recoverLog``: ``segments.values(recoveryPointCheckpoint, Long.MaxValue)``)."""
        segments = self.segments
        floor = self.log.segments.floor_base(recovery_point)
        return next((i for i, seg in enumerate(segments) if floor is None or seg.base >= floor),
                    len(segments))

    def _recover_from(self, first: int, *, every_line: bool, epochs_from: int, stop: int | None = None
                      ) -> list[str]:
        """Recover segments ``first..`` (to ``stop``, exclusive, when given) in order; a segment cut short
        ends the log there.

        The segments after a cut one are kept aside whole (``.log.cut-0``): nothing cut is lost.
        The leader epoch cache is the one loaded from ``leader-epoch-checkpoint``, as Kafka 3.8's
        ``LogLoader`` hands it to ``LogSegment.recover``: a batch adds its epoch only when it is newer
        than the latest (so an entry of the latest epoch that compaction left before the first batch
        stays, ``LeaderEpochFileCache.isUpdateNeeded``; :meth:`_assign_recovered`); where the log now
        ends before it did, the entries at or past the new end go, then those before the log start
        (:meth:`_truncate_epochs_from_end`).  ``every_line``: a line for each segment recovered (else
        only cuts).
        The intact segments ``epochs_from..first - 1`` (those from the recovery point) add their
        batches' epochs too: Kafka recovers every segment from the recovery point, and a killed
        writer left no ``leader-epoch-checkpoint`` for the epochs they hold.
        """
        segments = self.segments
        tracker = self.new_tracker()
        loaded = list(self.epochs.entries)
        for n, seg in enumerate(segments[:first]):
            for header in seg.headers():
                if tracked(header):
                    tracker.observe(header)
                if n >= epochs_from and header.magic >= codec.MAGIC_V2:
                    self._assign_recovered(header.partition_leader_epoch, header.base_offset)
        lines: list[str] = []
        end_before = self.log.active.next_offset() if self.log.active is not None else 0
        for n, seg in enumerate(segments[first:stop], start=first):
            result = seg.recover(self._batch_observer(seg, tracker))
            progress.advance(seg.size)
            if result.truncated_bytes or every_line:
                lines.append(self._describe(seg, result))
            if result.truncated_bytes:
                for later in segments[n + 1:]:
                    self.log.segments.remove(later.base)
                    kept, _ = files.save_range_aside(later.path, 0)
                    later.delete()
                    where = f"kept in {kept}" if kept is not None else "all zeros: nothing to keep"
                    lines.append(f"{later.path}: removed after the cut in {seg.path} ({where})")
                break
        end = self.log.active.next_offset() if self.log.active is not None else 0
        active = self.log.active
        if active is not None and active.size and active.index_full_at is not None:
            # Kafka 3.8.0 LogSegment.recover throws IllegalArgumentException on the full index, which
            # LogLoader.recoverLog does not catch, and the broker's next load recovers the segment holding
            # the recovery point segstore checkpoints (the log end: this one).  The roll the next append
            # makes (shouldRoll: an index full), made now, leaves the segment below it.
            active.on_become_inactive()
            self.log.roll(end).make_appendable()
            lines.append(f"{active.path}: rolled a new segment at {end}: Kafka's recovery of this one "
                         "(holding the recovery point) would throw on its full index and not load the log")
        if end < end_before:
            # the log now ends before where the load truncated the epochs to (a cut): again, from the end
            # and then from the start.  Not where it did not move: an entry at the log start that is its
            # end came from the start truncation, which Kafka's load does after the end's.
            lines += self._truncate_epochs_from_end(end)
        added = [e for e in self.epochs.entries if e not in loaded]
        if added:   # LeaderEpochFileCache.assign logs each ("New epoch entry ...")
            lines.append(f"{self.epochs.path}: added the leader epochs of recovered batches the checkpoint "
                         "lacked: " + ", ".join(f"{e.epoch} {e.start_offset}" for e in added))
        self.next_offset = end
        self._txns = None
        return lines + remove_snapshots_past(self.path, end)

    def _batch_observer(self, seg: LogSegment, tracker: TransactionTracker) -> Callable[[Any], None]:
        """The per-batch callback of a segment's recovery: leader epochs and aborted transactions."""
        def observe(batch: codec.RecordBatch) -> None:
            if batch.magic >= codec.MAGIC_V2:
                self._assign_recovered(batch.partition_leader_epoch, batch.base_offset)
            if tracked(batch):
                aborted = tracker.observe(batch)
                if aborted is not None:
                    seg.txn_index.append(aborted)
        return observe

    def _assign_recovered(self, epoch: int, start_offset: int) -> None:
        """A recovered batch's epoch, as Kafka 3.8.0 ``LogSegment.recover`` assigns it: only when newer
        than the latest of the cache ``LogLoader`` recovers onto, the one loaded from
        ``leader-epoch-checkpoint`` before its entries past the log end are dropped (``truncateFromEnd``
        comes after ``recoverLog``): an entry the load dropped still keeps the batches of its epoch and
        older ones from starting entries again."""
        if self._newest_epoch is None or epoch > self._newest_epoch:
            self.epochs.assign(epoch, start_offset)

    @staticmethod
    def _describe(seg: LogSegment, result: RecoverResult) -> str:
        line = f"{seg.path}: rebuilt indexes over {result.valid_bytes} valid bytes"
        if result.index_full_at is not None:
            line += (f" (full at position {result.index_full_at}: segment.index.bytes="
                     f"{seg.max_index_size}; later batches unindexed)")
        if result.truncated_bytes:
            kept = "all zeros: nothing to keep" if result.saved_to is None else f"kept in {result.saved_to}"
            line += f"; cut {result.truncated_bytes} bytes at {result.valid_bytes} ({kept})"
            if result.error:
                line += f": {result.error}"
        return line

    def recover(self, recovery_point: int = 0) -> list[str]:
        """Recover as Kafka 3.8's ``LogLoader.recoverLog`` does; returns one line per action taken.

        Segments holding offsets at or past ``recovery_point`` (the log dir's
        ``recovery-point-offset-checkpoint``; 0, all of them, for a partition opened
        alone) are checked; segments before it are left as they are, as Kafka leaves
        them.  A checked segment whose log, CRCs, records and offset index are all
        intact keeps its files (its indexes are not rebuilt with this run's
        ``index.interval.bytes``); the first one that is not is rebuilt (a torn or
        corrupt tail cut and kept), and every one after it too.
        """
        if self.unwritable is not None:     # opened as a reader: nothing of it is touched
            return [f"{self.path}: left as it is, not recovered: {self.unwritable}"]
        lines = list(self.recovered)
        self.recovered = []
        segments = self.segments
        first = floor = self._recovery_point_segment(recovery_point)
        expected: int | None = None
        for seg in segments[:first]:
            expected = seg.next_offset()
            progress.advance(seg.size)          # left alone, as Kafka does: done all the same
        wrong_txns = self.txn_index_problems()
        problems: list[tuple[str, int | None, str]] = []
        while first < len(segments):
            seg = segments[first]
            problems, after, _ = self._check_segment(seg, expected, closed=seg is not self.log.active)
            if problems or seg.needs_recovery or seg.base in wrong_txns:
                break
            expected = after
            first += 1
            progress.advance(seg.size)
        # a segment rebuilt for what the check found changed files even where nothing is cut: said,
        # with every one after it (also rebuilt), never "nothing to recover".  Not again where this
        # open already recovered it and every one after it (its lines are in ``lines``): what the
        # check still finds there is what no recovery cuts, and a second rebuild gives the same files.
        opened_from, self._opened_recovering_from = self._opened_recovering_from, None
        again = first < len(segments) and opened_from is not None and segments[first].base >= opened_from
        recovered = [] if again else self._recover_from(first, every_line=bool(problems), epochs_from=floor)
        # a .txnindex judged on a log torn before it is no finding: a cut sets its segment aside whole
        kept = {seg.base for seg in self.segments}
        rebuilt = [f"{path}: rebuilt: {message}" for seg in segments[first:] if seg.base in kept
                   for path, _, message in wrong_txns.get(seg.base, [])]
        return lines + rebuilt + recovered

    def start_at(self, offset: int) -> None:
        """Make an empty log start at ``offset``: its one segment is named from it, the next
        record gets it and the log start offset is it (Kafka ``UnifiedLog.truncateFullyAndStartAt``).

        :raises OffsetOutOfRangeError: the log already holds records, or ``offset`` is negative.
        """
        if offset < 0:
            raise OffsetOutOfRangeError(f"expected a start offset >= 0, found {shown_number(offset)}",
                                        self.path)
        if any(seg.size for seg in self.log.segments):
            raise OffsetOutOfRangeError(f"expected an empty log to start at offset {offset}, found records "
                                        f"up to offset {self.next_offset - 1}", self.path)
        for seg in list(self.log.segments):
            self.log.segments.remove(seg.base)
            seg.delete()
        self.log.roll(offset).make_appendable()
        self.epochs.clear()
        self.log_start_offset = self.next_offset = offset

    def end_at(self, offset: int) -> None:
        """Move the log end past the last record to ``offset``: a new, empty active segment named from it,
        as the broker's log is when the records at its end are gone (cleaned, or aborted and compacted
        away) and it rolled (Kafka 3.8.0 ``LogLoader.load`` reads the log end offset from the last segment,
        ``LogSegment.readNextOffset``: its base offset when empty).  The next record gets ``offset``.

        A log without records ends there too, past its log start: the broker's log whose every record
        the cleaner removed keeps its (empty) cleaned segments, named from the log start, before the
        empty active one (``Cleaner.cleanSegments`` swaps in a cleaned segment whatever its size).

        :raises OffsetOutOfRangeError: ``offset`` below the log end offset.
        """
        if offset < self.next_offset:
            raise OffsetOutOfRangeError(f"expected a log end offset at or past {self.next_offset}, found "
                                        f"{offset}", self.path)
        if offset == self.next_offset:
            return
        self.active_segment().on_become_inactive()
        self.log.roll(offset).make_appendable()
        self.next_offset = offset

    # -- appends ----------------------------------------------------------------
    def new_tracker(self) -> TransactionTracker:
        """A :class:`TransactionTracker` holding the transactions open below the first segment: those of
        the broker's producer snapshot named for it, where the log was cut below it
        (:func:`.producers.seed`), as the broker's ``ProducerStateManager`` loads them.  A transaction
        open from a deleted offset is still open there: its ABORT gets a ``.txnindex`` entry from that
        offset, and it holds the last stable offset of the other aborts (``findNextIncompleteTxn``).
        A snapshot that does not read holds none, as the broker's loader drops it."""
        from .producers import seed

        tracker = TransactionTracker()
        try:
            states, _ = seed(self)
        except CorruptDataError:
            return tracker
        for pid, state in sorted(states.items(), key=lambda item: item[1].txn_start_offset or 0):
            if state.txn_start_offset is not None:
                tracker.opened(pid, state.txn_start_offset)
        return tracker

    def _tracker(self) -> TransactionTracker:
        """Open transactions, rebuilt from the log's headers on first need."""
        if self._txns is None:
            self._txns = self.new_tracker()
            for seg in self.segments:
                for header in seg.batches(check_crc=False):
                    if tracked(header):
                        self._txns.observe(header)
        return self._txns

    def active_segment(self) -> LogSegment:
        """The segment appends go to: every partition opened for append has one.

        :raises ReadOnlyError: the partition was opened read-only and holds no segment.
        """
        active = self.log.active
        if active is None:
            raise ReadOnlyError("expected a partition opened for append, found a read-only one "
                                "without segments", self.path)
        return active

    def append_encoded(self, data: bytes, *, now_ms: int | None = None, keep_offsets: bool = False,
                       new_segment: bool = False, check_times: bool = True, segment_base: int | None = None,
                       log_start: int | None = None) -> Appended:
        """Append one already encoded batch (offsets already assigned from :attr:`next_offset`).

        ``keep_offsets``: the batch keeps the offsets it carries, as a follower appends the leader's
        batches (``UnifiedLog.append`` without assigning offsets): its base offset may lie past the log
        end offset (a compacted log's gap; an empty log starts there, ``start_at``), never before it.
        ``new_segment``: the batch begins a new segment (a restored batch that began one in its log).
        ``segment_base`` (with ``keep_offsets``): the base offset the segment the batch begins (or an
        empty log's one segment) is named by, at or below the batch's base offset: a cleaned segment's,
        which keeps its first base when the cleaner removed its first batches (Kafka 3.8.0
        ``Cleaner.cleanSegments`` names the cleaned segment after the first segment of its group);
        where it lies below the log end offset (a log that held other records), the batch's base offset
        names it, as without it.  ``log_start`` (with ``keep_offsets``): the log start offset of the log the
        batch is restored from, taken where this log held no record before the batch, as
        ``LogLoader`` loads a log start above the first segment's base from ``log-start-offset-checkpoint``
        (``max(checkpoint, first segment base)``); at most the batch's last offset.
        ``check_times`` False: the records are not checked here as ``LogValidator.validateRecord``
        checks a leader's append (:func:`check_records`: their times against
        ``message.timestamp.*.max.ms``, and on a compacted topic their keys), the caller having checked
        them before writing any partition (an append of several), or the batch replaying records a
        broker already took at their own times (a conversion, as a follower's).
        A segment rolled for the batch is named by its base offset (``UnifiedLog.maybeRoll``).

        :raises ConfigError: the topic's config is one the broker appends nothing with
            (:attr:`unwritable`).
        """
        if self.unwritable is not None:
            raise ConfigError(self.unwritable, self.path)
        header = codec.read_batch_header(data, 0, path=self.path)
        for name, value, bound in (("segment base", segment_base, "base"), ("log start", log_start, "last")):
            top = header.base_offset if bound == "base" else header.last_offset
            if value is not None and not 0 <= value <= top:
                raise OffsetOutOfRangeError(f"expected a {name} offset from 0 to the batch's {bound} offset "
                                            f"{top}, found {shown_number(value)}", self.path)
        past_end = header.base_offset > self.next_offset
        empty = keep_offsets and not any(s.size for s in self.log.segments)
        if empty:
            # an empty log starts where the batch's log started: at the batch's segment's base, or at the
            # log start below it (segments before it that the cleaner emptied), never below its own end
            first = header.base_offset if segment_base is None else segment_base
            first = max(first if log_start is None else min(first, log_start), self.next_offset)
            if first > self.next_offset:
                self.start_at(first)
            past_end = False
        if header.base_offset < self.next_offset or (past_end and not keep_offsets):
            what = "at or after" if keep_offsets else "at"
            raise OffsetOutOfRangeError(f"expected a batch {what} the log end offset {self.next_offset}, "
                                        f"found base offset {header.base_offset}", self.path)
        check_batch_size(len(data), self.config, self.path, self.log.active.size if self.log.active else 0)
        now = self.clock() if now_ms is None else now_ms
        if check_times and not keep_offsets:    # a follower's append (appendAsFollower) is not validated
            check_records(header, self.config, now, self.path)
        if header.producer_id >= 0 and header.magic >= codec.MAGIC_V2 and not tracked(header):
            # ProducerAppendInfo.appendDataBatch (a leader's append and a follower's alike): a plain batch
            # of a producer in a transaction is an InvalidTxnStateException; a log holding one does not
            # load either (LogSegment.recover does not catch it)
            open_from = self._tracker().open_from(header.producer_id)
            if open_from is not None:
                raise InvalidMessageError(
                    f"expected a transactional batch from producer {header.producer_id}, which has a "
                    f"transaction open from offset {open_from}, found a non-transactional one at offset "
                    f"{header.base_offset} (Kafka's InvalidTxnStateException)", self.path)
        # built from the log before this batch is in it: built after, it would see a marker close its
        # transaction already and leave the abort out of the .txnindex
        tracker = self._tracker() if tracked(header) else None
        active = self.active_segment()
        # the source's name where the log reaches no further (a log that held records past it: the batch's)
        named = (segment_base if keep_offsets and segment_base is not None
                 and segment_base >= self.next_offset else header.base_offset)
        if ((new_segment or self.active_holds_damage()) and active.size) or (
                keep_offsets and segment_base is not None and segment_base > active.base):
            roll_at: int | None = named     # (an empty segment before it stays, as the cleaner left it)
        elif active.should_roll(
                batch_size=len(data), max_timestamp=header.max_timestamp, max_offset=header.last_offset,
                segment_bytes=self.config.segment_bytes, segment_ms=self.config.max_segment_ms, now_ms=now):
            roll_at = header.base_offset
        else:
            roll_at = None
        if roll_at is not None:
            active.on_become_inactive()
            active = self.log.roll(roll_at)
            active.make_appendable()
        position = active.append(data, last_offset=header.last_offset, max_timestamp=header.max_timestamp,
                                 offset_of_max_timestamp=header.last_offset)
        self.log.mark_dirty(active)
        self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        if tracker is not None:
            aborted = tracker.observe(header)
            if aborted is not None:
                active.txn_index.append(aborted)
        self.next_offset = header.last_offset + 1
        if empty and log_start is not None and log_start > self.log_start_offset:
            # UnifiedLog.maybeIncrementLogStartOffset: the leader epochs start there too
            self.log_start_offset = log_start
            self.epochs.truncate_from_start(log_start)
        return (_loaded_results or _results()).Appended(
            header.base_offset, header.last_offset, position, len(data), active.base,
            header.max_timestamp if self.log_append_time else None)

    def append_encoded_run(self, datas: Sequence[bytes], now_ms: Callable[[int], int]) -> None:
        """Append already encoded batches (offsets assigned from :attr:`next_offset` on), one after
        another, as :meth:`append_encoded` appends each with ``check_times`` False (a conversion's
        replay), the same bytes in every file: runs of plain batches (v2, no producer, the next offsets,
        of a size the topic takes) that land in one segment are written with one write of the log and
        one of each index (:meth:`LogSegment.append_run`); any other batch, and each one a segment rolls
        for, through :meth:`append_encoded` at ``now_ms(i)`` (batch ``i``'s time now).
        ``O(batches)`` Python, a few writes a run.
        """
        i, n = 0, len(datas)
        while i < n:
            taken = self._append_plain_run(datas, i)
            if not taken:
                self.append_encoded(datas[i], now_ms=now_ms(i), check_times=False)
                taken = 1
            i += taken

    def _append_plain_run(self, datas: Sequence[bytes], start: int) -> int:
        """:meth:`append_encoded_run`'s run from batch ``start``: how many batches it appended (0: the
        batch at ``start`` goes through :meth:`append_encoded`)."""
        if self.unwritable is not None or not self._point_checked or self.log.active is None:
            return 0        # (append_encoded raises, or checks the active segment for damage first)
        config = self.config
        expected = self.next_offset
        lasts: list[int] = []
        largest: list[int] = []
        epochs: list[tuple[int, int]] = []
        for data in itertools.islice(datas, start, None):
            n = len(data)
            if n < codec.RECORD_BATCH_OVERHEAD:
                break
            fields = codec.HEADER.unpack_from(data)
            base, length, epoch, magic = fields[0], fields[1], fields[2], fields[3]
            if (magic != codec.MAGIC_V2 or length + codec.LOG_OVERHEAD != n or base != expected
                    or fields[9] >= 0 or n > config.max_message_bytes or n > config.segment_bytes):
                break
            expected = base + fields[6] + 1
            lasts.append(expected - 1)
            largest.append(fields[8])
            epochs.append((epoch, base))
        if not lasts:
            return 0
        active = self.log.active
        taken = active.append_run(datas[start:start + len(lasts)], lasts, largest,
                                  segment_bytes=config.segment_bytes, segment_ms=config.max_segment_ms)
        if taken:
            self.log.mark_dirty(active)
            for epoch, base in epochs[:taken]:
                self.epochs.assign(epoch, base)
            self.next_offset = lasts[taken - 1] + 1
        return taken

    def active_holds_damage(self) -> bool:
        """Whether the active segment holds a batch Kafka 3.8.0's recovery would cut the log at (its CRC or
        framing failing: :meth:`LogSegment.first_torn_batch` from its start; or its rebuilt indexes going
        back: :meth:`LogSegment.index_gone_back`), checked once per open, at its first append
        (:meth:`append_encoded` then rolls, so the appends land in a segment after it).

        A CRC failing below the recovery point is damage a writable open keeps (:meth:`_recover_crashed`);
        segstore closes without the clean-shutdown marker, and the broker's next load recovers from the
        segment holding the recovery point (``LogLoader.recoverLog``: ``segments.values(recoveryPoint,
        ...)``, ``LogSegment.recover`` truncating at the first batch ``ensureValid`` fails), then deletes
        every later segment: appended into the damaged segment, the appends would be cut with it.  After
        the roll the recovery point segstore checkpoints (the log end) lies in the new segment, which is
        all the broker recovers; the damage stays where it was, for ``verify`` to name.  A damaged batch
        in an earlier segment needs no roll: at or past the recovery point the open cut it (a torn
        write), below it the broker's recovery never reaches it once the recovery point moves past it.
        Where no recovery point is kept no roll helps: :meth:`_refuse_appends_after_damage`.  Where the
        checkpointed one is behind the log end and the broker's recovery from it would reach damage (or
        fail), it is moved to the log end first (:meth:`_checkpoint_past_damage`): a writer killed before
        its first flush would otherwise have left the appends to be deleted with what that recovery cuts.
        ``O(active segment bytes)`` once per appending open (at most ``segment.bytes``): v2 batches framed
        and CRC-checked in C (:meth:`LogSegment.first_torn_batch`), legacy ones and what follows a bad one
        in Python; nothing where the open recovered the active segment already.

        :raises UnrepairedDataError: no recovery point is kept, and a segment holds such damage.
        """
        if self._point_checked:
            return False
        self._point_checked = True
        active = self.active_segment()
        damaged = False
        if not self._active_checked:
            self._active_checked = True
            if not self.recovery_point_kept:
                self._refuse_appends_after_damage()
            damaged = (active.first_torn_batch(0, active.base) is not None
                       or active.index_gone_back() is not None)
        if damaged or self._damage_from_recovery_point(active):
            self._checkpoint_past_damage()
        return damaged

    def _damage_from_recovery_point(self, active: LogSegment) -> bool:
        """Whether a segment Kafka 3.8.0's next unclean load recovers (the one holding the checkpointed
        recovery point on: ``LogLoader.recoverLog``) holds what its recovery cuts the log at or fails on:
        a batch before ``active`` that :meth:`active_holds_damage`'s checks name, or, in any of them, a
        rebuilt index this open's recovery found full (:attr:`LogSegment.index_full_at`: a segment grown
        across reopens, on which ``LogSegment.recover`` throws ``IllegalArgumentException`` and the log
        does not load).  Only where the recovery point is below the log end (a broker or writer killed
        before its flush, a checkpoint left behind): the damage a writable open keeps (a CRC failing below
        the recovery point in the segment holding it; any, after a clean shutdown, whose open checks no
        CRC).  ``O(bytes of those segments)``, intact v2 batches in C."""
        if not self.recovery_point_kept or self.recovery_point >= self.next_offset:
            return False
        return any(seg.index_full_at is not None
                   or (seg is not active and (seg.first_torn_batch(0, seg.base) is not None
                                              or seg.index_gone_back() is not None))
                   for seg in self.segments[self._recovery_point_segment(self.recovery_point):])

    def _checkpoint_past_damage(self) -> None:
        """Before the first append, move the checkpointed recovery point to the log end (every segment
        from the old point's synced first, with the leader epochs: ``UnifiedLog.flush`` then
        ``LogManager.checkpointRecoveryOffsetsInDir``), where the broker's recovery from the checkpointed
        point would cut at damage or fail (:meth:`_damage_from_recovery_point`).  Left there, a writer
        killed before its first flush left the broker a load that recovers from it, cuts the log at the
        damage and deletes every later segment, the appends with them (Kafka 3.8.0
        ``LogLoader.recoverLog``), or does not load the log; moved, the broker recovers only the segment
        holding the log end, the one the appends go to (rolled past a damaged active segment:
        :meth:`active_holds_damage`; past a full index: ``shouldRoll``), and the damage stays where it is
        for ``verify`` to name."""
        if self._write_recovery_point is None or self.recovery_point >= self.next_offset:
            return
        for seg in self.segments[self._recovery_point_segment(self.recovery_point):]:
            seg.flush()
        self.epochs.flush()
        self.recovery_point = self.next_offset
        self._write_recovery_point(self)

    def _refuse_appends_after_damage(self) -> None:
        """Refuse the appends of a partition whose recovery point no checkpoint keeps
        (:attr:`recovery_point_kept`: a partition directory opened alone whose log dir's
        ``recovery-point-offset-checkpoint`` does not name it, or that has none) holding a batch Kafka
        3.8.0's recovery cuts at (:meth:`active_holds_damage`'s checks, in any segment): segstore leaves no
        clean-shutdown marker (a writable open removes the broker's), so the broker's next load recovers
        every segment from offset 0 (``LogManager.loadLogs``: ``recoveryPoints.getOrElse(topicPartition,
        0L)``), cuts there and deletes every later segment, and would take whatever is appended with it.
        Where the writable open recovered after a crash it cut such batches already (torn writes); one
        left here is damage a clean shutdown left, which only ``recover`` cuts (keeping it).
        ``O(partition bytes)``, intact v2 batches in C.

        :raises UnrepairedDataError: naming the damage.
        """
        for seg in self.segments:
            found = seg.first_torn_batch(0, 0) or seg.index_gone_back()
            if found is not None:
                raise UnrepairedDataError(
                    f"expected no batch Kafka's next load cuts the partition at before an append, found "
                    f"one ({found.message}): with no recovery point for it (recovery-point-offset-checkpoint "
                    "in its log dir) and no clean-shutdown marker after a write, the broker recovers every "
                    "segment from offset 0, cuts there and deletes every later segment, appends with it; "
                    "run recover first (it cuts the damage and keeps what it cuts)",
                    found.path or seg.path, found.pos)

    @property
    def log_append_time(self) -> bool:
        return self.config.message_timestamp_type == "LogAppendTime"

    def append_records(self, records: list[Any], *, compression: str | None = None, producer_id: int = -1,
                       producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                       leader_epoch: int | None = None, now_ms: int | None = None,
                       check_times: bool = True) -> Appended:
        """Encode ``records`` as one batch at the log end offset and append it (``check_times``: as
        :meth:`append_encoded`'s)."""
        now = self.clock() if now_ms is None else now_ms
        epoch = leader_epoch if leader_epoch is not None else self.append_epoch
        data = encode_records(self.config, records, base_offset=self.next_offset, leader_epoch=epoch, now=now,
                              compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                              base_sequence=base_sequence, transactional=transactional)
        return self.append_encoded(data, now_ms=now, check_times=check_times)

    def append_columns(self, columns: arrowencode.Columns, rows: np.ndarray, now: int, *,
                       check_times: bool = True) -> Appended:
        """Append ``rows`` of ``columns`` as one batch at the log end offset (:meth:`append_records`'
        header), encoded in one C call where built (:func:`.arrowencode.encode_batch_columns`)
        (``check_times``: as :meth:`append_encoded`'s)."""
        data = encode_columns(self.config, columns, rows, base_offset=self.next_offset,
                              leader_epoch=self.append_epoch, now=now)
        return self.append_encoded(data, now_ms=now, check_times=check_times)

    def append_control(self, kind: str, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       timestamp: int, leader_epoch: int | None = None) -> Appended:
        """Append a COMMIT or ABORT marker batch written at ``timestamp``.

        The leader validates a marker as any batch it appends (Kafka 3.8.0 ``UnifiedLog.append`` with
        ``validateAndAssignOffsets``, ``LogValidator.assignOffsetsNonCompressed``): in a LogAppendTime
        topic it is stamped LogAppendTime (``batch.setMaxTimestamp(LOG_APPEND_TIME, now)``).
        """
        epoch = leader_epoch if leader_epoch is not None else self.append_epoch
        data = codec.encode_control_batch(kind, base_offset=self.next_offset, producer_id=producer_id,
                                          producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                                          timestamp=timestamp, partition_leader_epoch=epoch,
                                          log_append_time=timestamp if self.log_append_time else None)
        return self.append_encoded(data, now_ms=timestamp)

    # -- retention ----------------------------------------------------------------
    def apply_retention(self, now_ms: int | None = None) -> list[int]:
        """Delete old segments per ``retention.bytes`` / ``retention.ms`` as Kafka 3.8.0
        ``UnifiedLog.deleteOldSegments`` does, in its order (size, then time), each pass from the oldest
        segment while it holds, never the active one; only where ``cleanup.policy`` has ``delete``
        (``config.delete``: a compacted topic, ``__consumer_offsets`` and ``__transaction_state`` among
        them, loses no segment to either, whatever ``retention.*`` says).  A segment's time is
        ``LogSegment.largestTimestamp``: its largest record time, else its ``.log`` file's mtime.
        Returns their base offsets."""
        if not self.config.delete:
            return []
        now = self.clock() if now_ms is None else now_ms
        removed: list[LogSegment] = []
        if self.config.retention_bytes >= 0:
            excess = [sum(seg.size for seg in self.log.segments) - self.config.retention_bytes]

            def keep(seg: LogSegment) -> bool:
                if excess[0] - seg.size < 0:
                    return True
                excess[0] -= seg.size
                return False

            removed += self.log.delete_oldest(keep)
        if self.config.retention_ms >= 0:
            removed += self.log.delete_oldest(
                lambda seg: now - seg.largest_timestamp() <= self.config.retention_ms)
        for seg in removed:
            seg.delete()
        first = self.log.segments.first
        if removed and first is not None:  # never None: the active segment is never removed
            self.log_start_offset = max(self.log_start_offset, first.base)
            self.epochs.truncate_from_start(self.log_start_offset)
        return [seg.base for seg in removed]

    # -- reading ----------------------------------------------------------------
    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping offsets ``[start, end)``, ordered by first offset.

        From every segment's ``.txnindex`` (an entry sits in the segment of its ABORT
        marker), as the broker collects them for a fetch (``UnifiedLog.collectAbortedTransactions``).
        ``O(aborted transactions)``.
        """
        found = [txn for seg in self.log.segments for txn in seg.txn_index.aborted_in(start, end)]
        return sorted(found, key=lambda txn: txn.first_offset)

    def batches(self, start_offset: int | None = None) -> Iterator[codec.RecordBatch]:
        """Batches holding offsets ``>= start_offset`` (all when None), in offset order, CRC checked.

        A batch whose base offset is below the end of the one before it (what ``verify`` reports:
        no CRC covers the base offset) raises :class:`CorruptDataError` naming its file and position.

        The first batch is found by :meth:`translate_offset`; later segments are
        only looked up once the first one is read to its end.
        """
        expected: int | None = None
        for batch in self._batches(start_offset):
            if expected is not None and batch.base_offset < expected:
                raise CorruptDataError(f"expected offsets from {expected}, found a batch at "
                                       f"{batch.base_offset}", batch.path, batch.position)
            expected = batch.last_offset + 1
            yield batch

    def _batches(self, start_offset: int | None) -> Iterator[codec.RecordBatch]:
        if start_offset is None:
            for seg in self.segments:
                yield from seg.batches()
            return
        found = self.translate_offset(start_offset)
        if found is None:
            return
        seg, where = found
        yield from seg.batches(where.position)
        later = self.log.segments.higher(seg.base)
        while later is not None:
            yield from later.batches()
            later = self.log.segments.higher(later.base)

    @staticmethod
    def in_order(chunks: Iterator[tuple[LogSegment, columnar.Chunk]], want: int
                  ) -> Iterator[tuple[LogSegment, columnar.Chunk]]:
        """``chunks``, stopped with the error ``verify`` reports at the first batch whose base offset
        is below the end of the batch before it (no CRC covers the base offset: a damaged one decodes).
        The batches of its chunk before it are served first (decoded again up to it).  ``O(batches)``."""
        expected: int | None = None
        for seg, chunk in chunks:
            batches = chunk.batches
            if not len(batches):
                yield seg, chunk
                continue
            firsts = batches["base_offset"].astype(np.int64)
            lasts = firsts + batches["last_offset_delta"]
            floors = np.concatenate(([np.iinfo(np.int64).min if expected is None else expected],
                                     lasts[:-1] + 1))
            bad = np.flatnonzero(firsts < floors)
            if len(bad):
                i = int(bad[0])
                position = int(batches["position"][i])
                if i:
                    for before in seg.column_chunks(want, int(batches["position"][0]), position):
                        yield seg, before
                raise CorruptDataError(f"expected offsets from {int(floors[i])}, found a batch at "
                                       f"{int(firsts[i])}", seg.path, position)
            expected = int(lasts[-1]) + 1
            yield seg, chunk

    def column_chunks(self, want: int, *, offset: int | None = None, start: int | None = None,
                      end: int | None = None, capacity: columnar.Capacity | None = None,
                      ) -> Iterator[tuple[LogSegment, columnar.Chunk]]:
        """Column chunks of the log in log order, each with its segment (CRC checked, records decoded).

        With ``start``/``end``: the batches whose position lies in ``[start, end)`` of the
        segment holding ``offset`` (the first segment when ``offset`` is None or below it).
        Else with ``offset``: from the batch holding it (found through the offset index; its
        rows below ``offset`` are the caller's to drop).  Else every segment whole.
        ``want`` is :func:`columnar.want_flags` of the columns to build; ``capacity`` bounds each
        chunk (the default :class:`columnar.Capacity` when None).

        :raises CorruptDataError: a bad batch, or one whose base offset goes back (what ``verify``
            reports), after the batches before it.
        """
        chunks = self._column_chunks(want, offset=offset, start=start, end=end, capacity=capacity)
        return self.in_order(chunks, want)

    def _column_chunks(self, want: int, *, offset: int | None, start: int | None, end: int | None,
                       capacity: columnar.Capacity | None) -> Iterator[tuple[LogSegment, columnar.Chunk]]:
        segments = self.log.segments
        if start is not None or end is not None:
            seg = (segments.floor(offset) if offset is not None else None) or segments.first
            if seg is None:
                return
            first = seg.batch_at_or_after(start or 0)
            for chunk in seg.column_chunks(want, first, end, capacity):
                yield seg, chunk
            return
        if offset is None:
            for seg in self.segments:
                for chunk in seg.column_chunks(want, capacity=capacity):
                    yield seg, chunk
            return
        found = self.translate_offset(offset)
        if found is None:
            return
        seg, where = found
        position = where.position
        while seg is not None:
            for chunk in seg.column_chunks(want, position, capacity=capacity):
                yield seg, chunk
            seg = segments.higher(seg.base)
            position = 0

    def translate_offset(self, offset: int) -> tuple[LogSegment, Any] | None:
        """The segment and ``(last offset, position, size)`` of the batch holding ``offset``.

        The floor segment in the segment map, then its index and a short header walk;
        the next segment only when the offset lies past the floor segment's end.
        Runtime complexity: ``O(log(segments) + log(entries) + batches per index interval)``.
        """
        segments = self.log.segments
        seg = segments.floor(offset) or segments.first
        while seg is not None:
            found = seg.translate_offset(offset)
            if found is not None:
                return seg, found
            seg = segments.higher(seg.base)
        return None

    def offset_for_time(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka 3.8 ``UnifiedLog.fetchOffsetByTimestamp``: earliest (-2, the log start), latest (-1, the
        log end), max timestamp (-3: the first record of the largest timestamp, in the first segment
        holding it, as ``maxBy``), earliest local (-4: the log start too, below), or the first record at
        or after the time."""
        # fetchOffsetByTimestamp answers EARLIEST_LOCAL_TIMESTAMP as EARLIEST_TIMESTAMP where the topic
        # has no remote storage (`!remoteLogEnabled()`): the local log is the whole log.  segstore
        # reads no tiered storage, so the local log start is the log start here.
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(-1, self.log_start_offset, self.epochs.epoch_for(self.log_start_offset))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.next_offset, self.epochs.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            segments = self.segments
            if not segments:
                return None
            latest = max(segments, key=lambda seg: seg.max_timestamp_so_far().timestamp)
            return latest.offset_of_max_timestamp()
        # searchOffsetInLocalLog: the first segment whose largestTimestamp reaches the time answers,
        # none included (`segmentsCopy.find(_.largestTimestamp >= targetTimestamp).flatMap(...)`): a
        # segment without record times (v0 messages; no .timeindex, loaded empty) reaches every time up
        # to its file's mtime, and the later segments' records are not searched
        seg = self.time_lookup_segment(timestamp)
        if seg is None:
            return None
        closed = seg is not self.log.active
        return seg.find_offset_by_timestamp(timestamp, self.log_start_offset, closed=closed)

    def time_lookup_segment(self, timestamp: int) -> LogSegment | None:
        """The segment a lookup of ``timestamp`` (ms) searches, alone (Kafka 3.8
        ``UnifiedLog.searchOffsetInLocalLog``): the first whose ``largestTimestamp`` reaches it (its
        largest record timestamp, else its ``.log`` file's mtime); None where none does."""
        for seg in self.segments:
            if _largest_timestamp_for_lookup(seg, seg is not self.log.active) >= timestamp:
                return seg
        return None

    def first_offset_from_time(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record at or after ``timestamp`` (ms, not a ListOffsets code) from the log start on,
        segment by segment as :meth:`offset_for_time` searches one: what a filter on the record time may
        skip to (Spark's pruning).  Unlike the broker's lookup it goes on past a segment its
        ``largestTimestamp`` sends the search to but whose records are all older (a segment without
        record times, measured by its file's mtime), so no later record at or after the time is
        passed over.  ``O(segments + log(entries) + batches walked)``."""
        for seg in self.segments:
            closed = seg is not self.log.active
            if _largest_timestamp_for_lookup(seg, closed) >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset, closed=closed)
                if found is not None:
                    return found
        return None

    def verify(self, decoded: ChunkSource | None = None) -> list[tuple[str, int | None, str]]:
        """Problems as ``(path, pos, message)``, each independent problem once.

        Per segment the batch headers are walked as far as their lengths hold; each
        batch's CRC is checked and, when it holds, its records are decoded (a CRC
        over undecodable records is a problem too).  A bad CRC does not stop the
        walk: the length is still trusted, as Kafka's ``FileLogInputStream`` does.
        Index entries are checked against the batches found; entries past a point
        where the walk had to stop are not (that point is the problem).  Index files
        a reader found corrupt are reported once and the segment is still checked.
        ``decoded``: where the logs' chunks come from (``LogSegment.check_log``).
        ``O(partition bytes)``; CRCs and record decoding in C.
        """
        by_base = {seg.base: seg for seg in self.segments}
        problems: list[tuple[str, int | None, str]] = list(self.index_problems) + orphaned_indexes(
            self.path, lambda base: by_base[base].next_offset() if base in by_base else None)
        problems += misnamed_files(self.path) + snapshot_problems(self.path)
        problems += pending_swap_problems(self.path)
        expected_offset: int | None = None
        tracker: TransactionTracker | None = self.new_tracker()
        previous: LogSegment | None = None
        for seg in self.segments:
            before = expected_offset
            found, expected_offset, txns = self._check_segment(
                seg, expected_offset, closed=seg is not self.log.active, decoded=decoded,
                in_transaction=tracker is not None and bool(tracker.open_transactions()))
            if previous is not None and before is not None and seg.base < before \
                    and not any(pos == 0 and path == seg.path for path, pos, _ in found):
                problems.append(_overlapping_name_problem(seg, previous, before))
            previous = seg
            problems += found
            if seg is not self.log.active:
                problems += seg.crash_left_problems()
            problems += [(path, pos, f"{message} (run recover)")
                         for path, pos, message in seg.txn_index.problems(seg.base)]
            # the aborts a segment completes depend on every transactional batch before it
            tracker = tracker if txns is not None else None
            if tracker is not None and txns is not None:
                aborted, refused = _walk_producers(seg, txns, tracker)
                problems += refused
                problems += [(path, pos, f"{message} (run recover)")
                             for path, pos, message in _txn_index_problems(seg, aborted)]
            progress.advance(seg.size)
        if problems and self.unwritable is not None:    # why recover leaves them
            problems.append((self.path, None, f"recover leaves this partition as it is: {self.unwritable}"))
        return problems

    def txn_index_problems(self) -> dict[int, list[tuple[str, int | None, str]]]:
        """Per segment base, its ``.txnindex`` problems (:func:`_txn_index_problems`), for ``recover``: a
        walk of every segment's batch headers (in C), stopping at one whose headers do not read (the
        other checks name that).  ``O(batch headers)``, Python per transactional batch."""
        tracker = self.new_tracker()
        found: dict[int, list[tuple[str, int | None, str]]] = {}
        for seg in self.segments:
            try:
                txns = [chunk.batches["position"][transactional_rows(chunk.batches)]
                        for chunk in seg.header_chunks()]
            except CorruptDataError:
                break
            none = np.zeros(0, np.int64)
            aborted, _ = _walk_producers(seg, ProducerBatches(np.concatenate(txns or [none]), none, none),
                                         tracker)
            problems = _txn_index_problems(seg, aborted)
            if problems:
                found[seg.base] = problems
        return found

    @staticmethod
    def _check_segment(seg: LogSegment, expected_offset: int | None, *, closed: bool,
                       decoded: ChunkSource | None = None, in_transaction: bool = False
                       ) -> tuple[list[tuple[str, int | None, str]], int | None, ProducerBatches | None]:
        """The problems of one segment's log and indexes, the offset the next batch must reach, and its
        producer batches (None: the walk did not reach the log's end; ``in_transaction``: as
        :meth:`LogSegment.check_log`'s).

        A closed segment's time index ends at the segment's largest timestamp
        (``LogSegment.onBecomeInactiveSegment`` appends it): Kafka takes the last entry for it
        when it reopens the segment (``readMaxTimestampAndOffsetSoFar``), so an empty or short
        one makes time retention delete the segment early and timestamp lookups pass it by."""
        problems, starts, lasts, walked, expected_offset, largest, txns, largest_any = seg.check_log(
            expected_offset, decoded, in_transaction=in_transaction)
        log_clean = not problems
        entries = seg.offset_index
        whole = walked >= seg.log.size      # the walk reached the end: entries past it point at nothing
        columns = entries.columns()
        for slot, offset, position, found in stray_entries(entries.base_offset, columns["relative_offset"],
                                                           columns["position"], starts, lasts, walked, whole):
            problems.append((entries.path, slot * OFFSET_ENTRY.itemsize,
                             f"expected the entry of slot {slot} to point at a batch ending at {offset}, "
                             f"found {'no batch' if found is None else found} at position {position}"))
        index = seg.time_index
        # ``largest`` comes from v2 batches only: Kafka 0.11 and later, which always write a time index
        # (a missing one beside v0/v1 batches only is what Kafka before 0.10.1 left: not reported).  A
        # missing one beside v2 batches is as bad as an empty one: Kafka 3.8 makes it empty
        # (LogSegment.sanityCheck) and rebuilds it only in a segment it recovers.
        if closed and whole and largest >= 0 and seg.indexes_read:
            last = index.last_entry.timestamp if len(index) else None
            if not files.exists(index.path):
                problems.append((index.path, None, "expected the time index of a closed segment holding "
                                 f"v2 batches (largest timestamp {largest}), found no such file: Kafka 3.8 "
                                 "makes it empty and goes by the file's mtime (LogSegment.largestTimestamp)"))
            elif last is None or last < largest:
                problems.append((index.path, len(index) * index.entry_size,
                                 "expected the time index of a closed segment to end at its largest "
                                 f"timestamp {largest}, found {'no entry' if last is None else last}"))
        if whole and log_clean and seg.indexes_read and len(index) and len(lasts):
            problems += _time_entry_problems(seg, int(lasts.max()), largest_any)
        return problems, expected_offset, txns if whole else None

    # -- lifecycle ----------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        if self.writable:
            self.epochs.flush()

    def close(self) -> None:
        """Clean shutdown: trim and flush the active segment, write the leader epoch checkpoint."""
        if self.writable:
            self.epochs.flush()
        for seg in self.segments:
            seg.close()
        self.log.segments.clear()
        self._release_lock()

    def abandon(self) -> None:
        """Release every file as a killed process would (nothing trimmed, nothing flushed)."""
        for seg in self.segments:
            seg.abandon()
        self.log.segments.clear()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()

    def check_open_error(self) -> CorruptDataError | None:
        """The torn tail of the active segment, if any (read-only opens report it, never fix it)."""
        return self.log.active.check_tail() if self.log.active is not None else None

    def __repr__(self) -> str:
        return f"Partition({self.path!r}, segments={len(self.log.segments)}, next_offset={self.next_offset})"


def _overlapping_name_problem(seg: LogSegment, previous: LogSegment, previous_end: int
                              ) -> tuple[str, int | None, str]:
    """A segment whose name (base offset) lies below the end of the one before it, its own batches in
    order after that end (a renamed file): Kafka 3.8 maps segments by base offset (``LogSegments``), so
    a fetch from an offset in ``[base, previous end)`` reads this segment (``floorSegment``) and skips
    the records the previous one holds there; an empty one starts the log end back at its base."""
    return (seg.path, None, f"expected a base offset of at least {previous_end} (the end of "
            f"{os.path.basename(previous.path)}), found {seg.base}: Kafka's LogSegments reads offsets "
            f"{seg.base}..{previous_end - 1} here, skipping the records {os.path.basename(previous.path)} "
            "holds there" + ("" if seg.size else ", and the log end goes back to it"))


def _time_entry_problems(seg: LogSegment, last_offset: int, largest: int
                         ) -> list[tuple[str, int | None, str]]:
    """The first ``.timeindex`` entry naming what the segment's log does not hold: an offset past its last
    batch, or a timestamp above every batch's max timestamp.  Kafka 3.8 appends only (the max timestamp
    so far, the offset of its batch) of batches appended to the segment (``LogSegment.append``,
    ``recover``), and reads the last entry as the segment's largest timestamp
    (``readMaxTimestampAndOffsetSoFar``): ``fetchOffsetByTimestamp`` then picks this segment for a time
    none of its records reach and answers no offset though later segments hold one, time retention keeps
    it too long, and ``MAX_TIMESTAMP`` answers an offset it does not hold.  ``O(entries)`` numpy."""
    index = seg.time_index
    columns = index.columns()
    offsets = columns["relative_offset"] + index.base_offset
    stamps = columns["timestamp"]
    bad = np.flatnonzero((offsets > last_offset) | (stamps > largest))
    if not len(bad):
        return []
    slot = int(bad[0])
    offset, stamp = int(offsets[slot]), int(stamps[slot])
    found = (f"offset {offset} past its last batch's last offset {last_offset}" if offset > last_offset
             else f"timestamp {stamp} above the largest of its batches, {largest}")
    return [(index.path, slot * index.entry_size,
             f"expected the entry of slot {slot} to name a batch of the segment, found {found}")]


def _walk_producers(seg: LogSegment, batches: ProducerBatches, tracker: TransactionTracker
                    ) -> tuple[list[AbortedTxn], list[tuple[str, int | None, str]]]:
    """Observe the transactional batches of ``seg`` (``batches.tracked``) in ``tracker``, which carries
    the open transactions from segment to segment: the aborted transactions they complete (as
    ``LogSegment.recover`` finds them, Kafka 3.8), and the first non-transactional data batch
    (``batches.plain``) of each transaction open at it (once a segment: its later ones share the cause).
    Kafka 3.8.0 ``ProducerAppendInfo.appendDataBatch`` throws ``InvalidTxnStateException`` on that one
    ("Expected transactional write from producer") where it replays the log's producer state
    (``LogSegment.recover``, ``UnifiedLog.rebuildProducerState``), which the broker does not catch: it
    does not load the log.  Python per transactional batch; the plain batches with numpy, once
    (``O(n log n)``: each takes its producer's state after the last transactional batch of that
    producer before it, else the state where the segment starts)."""
    at_start = tracker.open_transactions()
    follow = len(batches.plain) > 0
    expected = []
    seen: list[tuple[int, int, int]] = []     # (position, producer id, open from after it, -1: none)
    for position in batches.tracked.tolist():
        try:
            header = codec.read_batch_header(seg.log.view(), position, path=seg.path)
        except CorruptDataError:        # the log's own check names it
            continue
        try:
            aborted = tracker.observe(header)
        except CorruptDataError:        # a marker whose record does not read: the log's own check names it
            aborted = None
        if aborted is not None:
            expected.append(aborted)
        if follow:
            after = tracker.open_from(header.producer_id)
            seen.append((position, header.producer_id, -1 if after is None else after))
    refused = []
    reported: set[tuple[int, int]] = set()
    for pos, pid, first in _plain_in_transactions(batches, seen, at_start):
        if (pid, first) not in reported:
            reported.add((pid, first))
            refused.append(_plain_in_transaction(seg, pos, pid, first))
    return expected, refused


def _plain_in_transactions(batches: ProducerBatches, seen: list[tuple[int, int, int]],
                           at_start: dict[int, int]) -> list[tuple[int, int, int]]:
    """``(position, producer id, open from)`` of each plain batch (``batches.plain``) whose producer has a
    transaction open at it, in position order: the state after the producer's last transactional batch
    before it (``seen``: ``(position, producer id, open from after it or -1)``, positions rising), else
    at the segment's start (``at_start``).  Sorted by (producer, position), a plain row takes the last
    transactional row above it (a running maximum of their ranks) when that row is its producer's."""
    if not len(batches.plain) or not (seen or at_start):
        return []
    events = np.array(seen, np.int64).reshape(-1, 3)
    positions = np.concatenate([events[:, 0], batches.plain])
    pids = np.concatenate([events[:, 1], batches.plain_ids])
    order = np.lexsort((positions, pids))
    ranks = np.where(order < len(events), np.arange(len(order)), -1)
    last = np.maximum.accumulate(ranks)
    plain_rows = np.flatnonzero(order >= len(events))
    last_rows = last[plain_rows]
    has_event = (last_rows >= 0) & (pids[order[np.maximum(last_rows, 0)]] == pids[order[plain_rows]])
    states = np.full(len(plain_rows), -1, np.int64)
    states[has_event] = events[order[last_rows[has_event]], 2]
    if at_start:
        fresh = ~has_event & np.isin(pids[order[plain_rows]], list(at_start))
        states[fresh] = [at_start[int(pid)] for pid in pids[order[plain_rows[fresh]]].tolist()]
    hits = order[plain_rows[states >= 0]] - len(events)
    firsts = states[states >= 0]
    return sorted(zip(batches.plain[hits].tolist(), batches.plain_ids[hits].tolist(), firsts.tolist(),
                      strict=True))


def _plain_in_transaction(seg: LogSegment, pos: int, producer_id: int, open_from: int
                          ) -> tuple[str, int | None, str]:
    """The problem of a non-transactional data batch of a producer whose transaction is open
    (:func:`_walk_producers`)."""
    try:
        where = f"at offset {codec.read_batch_header(seg.log.view(), pos, path=seg.path).base_offset}"
    except CorruptDataError:
        where = "here"
    return (seg.path, pos, f"expected a transactional batch from producer {producer_id}, which has a "
            f"transaction open from offset {open_from}, found a non-transactional one {where}: Kafka's "
            "ProducerAppendInfo.appendDataBatch throws InvalidTxnStateException on it when it loads the "
            "producer state (LogSegment.recover, UnifiedLog.rebuildProducerState) and the broker does not "
            "load the log")


def _txn_index_problems(seg: LogSegment, expected: list[AbortedTxn]) -> list[tuple[str, int | None, str]]:
    """The aborted transactions of ``seg`` (``expected``, :func:`_walk_producers`) that its ``.txnindex``
    has no entry for: ``read_committed`` readers would return their records.  An entry matches by
    producer id and marker offset and may start earlier (the cleaner removes aborted batches and keeps
    their entry); the last stable offset is not compared (cleaning changes what was open)."""
    if not expected or seg.txn_index.error is not None:     # an unreadable file is reported as such
        return []
    firsts = {(e.producer_id, e.last_offset): e.first_offset for e in seg.txn_index.all()}
    problems: list[tuple[str, int | None, str]] = []
    for txn in expected:
        first = firsts.get((txn.producer_id, txn.last_offset))
        if first is None or first > txn.first_offset:
            have = "none" if first is None else f"one from {first}"
            problems.append((seg.txn_index.path, None,
                             f"expected a .txnindex entry of producer {txn.producer_id}'s abort at offset "
                             f"{txn.last_offset} (its transaction from offset {txn.first_offset}), "
                             f"found {have}"))
    return problems
