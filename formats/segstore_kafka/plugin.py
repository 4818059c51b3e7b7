"""The ``kafka`` format plugin: Kafka partition directories and log directories."""

from __future__ import annotations

import os
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from segstore import files
from segstore.errors import InvalidTopicError
from segstore.plugin import FormatPlugin, NativeIndex, NativeIndexes

from .checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from .dirnames import META_PROPERTIES, PARTITION_DIR, partition_dirs, segment_bases

if TYPE_CHECKING:
    from .store import KafkaStore
# The store's modules load when a store opens: detect, run on every store a command opens
# (RocketMQ's too), needs only the names of the files.

#: How long ago the newest file of a store must have changed for :meth:`KafkaFormat.change_marker` to
#: stand for it (ns): far past any file system's timestamp granularity (ext4 and XFS: a clock tick).
_SETTLED_NS = 1_000_000_000

#: Files a Kafka log directory holds from the broker's first start, partitions or not.
LOG_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT)
#: ``MetaPropertiesEnsemble.META_PROPERTIES_NAME``: a KRaft or ZooKeeper broker's log directory identity
META = META_PROPERTIES
#: Every file a Kafka 3.8 broker keeps in a log directory itself (``LogManager``: its lock and
#: clean-shutdown marker, the checkpoints; ``MetaPropertiesEnsemble``: ``meta.properties``).
LOG_DIR_FILES = frozenset((*LOG_DIR_CHECKPOINTS, REPLICATION_OFFSET_CHECKPOINT, "cleaner-offset-checkpoint",
                           ".lock", ".kafka_cleanshutdown", META))


class KafkaFormat(FormatPlugin):
    """Apache Kafka partition directories (``TOPIC-N/%020d.log`` + indexes) and log directories of them."""

    name = "kafka"
    description = "Apache Kafka partition directories and log directories (RecordBatch v2, v0/v1 read)"
    native_indexes: ClassVar[Mapping[str, NativeIndex]] = NativeIndexes(
        offset=("segstore.indexes.sparse:OffsetIndex", "TOPIC-N/%020d.index (base offset of the segment)"),
        time=("segstore.indexes.timeindex:TimeIndex", "TOPIC-N/%020d.timeindex (base offset of the segment)"),
    )

    def detect(self, path: str) -> bool:
        """A directory with ``%020d.log`` files, a directory of ``TOPIC-N`` directories holding them,
        a log directory with no partition yet (a broker writes its log-dir checkpoint files
        at start, ``LogManager.checkpointLogRecoveryOffsets``), or one whose partitions have no
        segment yet: empty ``TOPIC-N`` directories (:func:`.dirnames.partition_dirs`) and nothing
        but a broker's own log-dir files beside them.  ``O(entries)`` listings."""
        path = os.fspath(path)
        if not files.is_dir(path):
            return False
        if segment_bases(path):
            return True
        partitions = partition_dirs(path)
        if any(segment_bases(os.path.join(path, name)) for name in partitions):
            return True
        if any(files.is_file(os.path.join(path, name)) for name in LOG_DIR_CHECKPOINTS):
            return True
        # Empty directories named like partitions alone make a Kafka log dir only where nothing
        # else is there: a directory of other things with an empty `build-2/` in it is none.
        names = files.list_dir(path)
        return bool(partitions) and all(
            name in partitions or (name in LOG_DIR_FILES and files.is_file(os.path.join(path, name)))
            for name in names)

    def refuses_topic(self, topic: str) -> str | None:
        """Kafka 3.8 ``Topic.validate`` (what ``CreateTopics`` refuses): empty, ``.``/``..``, over 249
        characters, a character outside ``[a-zA-Z0-9._-]``."""
        from .partition import validate_topic

        try:
            validate_topic(topic, 0)
        except InvalidTopicError as err:
            return err.message
        return None

    def fixed_topics(self, path: str) -> frozenset[str] | None:
        """A partition directory's topic, the ``TOPIC`` of its name ``TOPIC-N`` (Kafka 3.8
        ``LocalLog.parseTopicPartitionName``): it never holds another.  None for a log directory, where
        any topic may be created."""
        from .logdir import is_partition_dir
        from .partition import parse_partition_dir

        if not files.is_dir(path) or not is_partition_dir(path):
            return None
        try:
            return frozenset((parse_partition_dir(path)[0],))
        except InvalidTopicError:       # no TOPIC-N name: the store does not open as one
            return None

    def refuses_new_dir(self, parent: str, name: str, store_format: str | None) -> str | None:
        """A log directory holds partition directories only: Kafka 3.8 ``LogManager.loadLogs`` passes
        each subdirectory to ``UnifiedLog.parseTopicPartitionName`` (``LocalLog``), which throws for a
        name that is not ``TOPIC-PARTITION`` and fails the log directory, and loads one that is as a
        partition (another format's store too).  A partition directory's subdirectories are passed over
        (``LogLoader`` lists its files only).  A log directory: one holding the files a broker writes
        there from its first start (checkpoints, ``meta.properties``), not any directory a copied
        partition directory sits in."""
        if not any(files.is_file(os.path.join(parent, name)) for name in (*LOG_DIR_CHECKPOINTS, META)):
            return None
        if store_format == self.name and PARTITION_DIR.match(name):
            return None
        return ("Kafka's LogManager.loadLogs loads every directory of a log directory as a partition and "
                "fails the log directory on one not named TOPIC-PARTITION "
                "(LocalLog.parseTopicPartitionName): only a kafka partition directory may be made there")

    def open(self, path: str, mode: str = "r", **config: Any) -> KafkaStore:
        """Open a store; ``indexes=[...]`` and layout options go to ``segstore.layouts`` (extra indexes)."""
        from segstore.layouts import attach, split_options

        from .brokerconfig import SERVER_PROPERTIES, static_layer
        from .partition import KafkaConfig
        from .store import KafkaStore

        indexes, layout_options, config = split_options(config)
        store = KafkaStore(os.fspath(path), mode, KafkaConfig.from_mapping(config),
                           explicit=[name for name in config if name != SERVER_PROPERTIES],
                           static=static_layer(config))
        return attach(store, indexes, layout_options)

    def config_from_file(self, entries: Sequence[tuple[str, str, int]], path: str,
                         overrides: Mapping[str, Any]) -> dict[str, Any]:
        """A ``server.properties`` as the 3.8 broker applies it (:func:`.brokerconfig.from_properties`):
        the broker's defaults of the topic configs, under each topic's own and under ``overrides``."""
        from .brokerconfig import from_properties

        return from_properties(entries, path, overrides)

    def config_file_notes(self, entries: Sequence[tuple[str, str, int]], path: str,
                          store: str) -> list[tuple[str, int | None]]:
        """A ``server.properties`` naming nothing a Kafka broker reads (:func:`.brokerconfig.file_notes`)."""
        from .brokerconfig import file_notes

        return file_notes(entries)

    def change_marker(self, path: str) -> Hashable | None:
        """The names, inodes, sizes and modification times of the files of the log directory or partition
        directory ``path`` and of its partition directories (:func:`segstore.files.tree_identity`): a
        broker changes a ``.log`` only by appending to it or cutting it (its size), replacing it
        (compaction: its inode) or deleting it, and writes its checkpoints by renaming a new file into
        place (3.8.0 ``CheckpointFile.write``).  None while a file changed in the last second: a second
        change within the file system's timestamp tick, at the same size, would leave the marker as it
        was."""
        identity = files.tree_identity(path, depth=2)
        if identity is None:
            return None
        newest = max((mtime for _, _, _, mtime in identity), default=0)
        return None if time.time_ns() - newest < _SETTLED_NS else identity

    def write_jsonl(self, path: str, lines: Iterable[dict[str, Any]], config: dict[str, Any]) -> int:
        """Append message lines (:mod:`.jsonl`): plain ones as new records (``value``/``key`` UTF-8 text,
        ``valueBase64``/``keyBase64`` binary), and ``dump --json`` lines as the batches they were."""
        from .jsonl import write_lines

        with self.open(path, "a", **config) as store:
            return write_lines(store, lines)

    def reads_dump_line(self, obj: Mapping[str, Any]) -> bool:
        """A Kafka ``dump --json`` object: one with a ``batch`` object."""
        from .jsonl import is_dump_line

        return is_dump_line(obj)

    def write_spec(self, path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
        from .spec import write_spec

        write_spec(os.fspath(path), spec, config)

    def file_kind(self, path: str) -> str | None:
        """A Kafka file by its name (``%020d.log``/``.index``/``.timeindex``/``.txnindex``/``.snapshot``,
        KRaft ``.checkpoint`` snapshots, ``leader-epoch-checkpoint``, the offset checkpoints)."""
        from .dumpfile import file_kind

        return file_kind(os.fspath(path)) if files.is_file(path) else None

    def dump_file(self, path: str, options: Any) -> Any:
        """``kafka-dump-log --files PATH`` lines (see :mod:`.dumpfile`)."""
        from .dumpfile import dump_file

        return dump_file(os.fspath(path), options)

    def conversion(self) -> Any:
        """The Kafka side of ``segstore convert`` (one shared :class:`.conversion.KafkaConversion`)."""
        from .conversion import KafkaConversion  # loads segstore.convert only when a conversion runs

        return KafkaConversion.shared()
