"""A Kafka log directory: partition directories ``TOPIC-N/`` plus the log-dir checkpoint files.

``recovery-point-offset-checkpoint`` holds, per partition, the offset below which
everything was flushed; ``log-start-offset-checkpoint`` the log start offset
(moved by retention); ``replication-offset-checkpoint`` the high watermark.
All three are written at flush and clean close.  A partition
found on disk is opened; one appended to for the first time is created.

Thread-safety: not thread-safe; the owning store serialises calls (:meth:`LogDir.close` closes the
partitions in threads of its own, each partition in one).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable

from segstore import files, overlap
from segstore.errors import ConfigError, CorruptDataError, InvalidTopicError, OutOfMemoryError, cut
from segstore.javatext import parse_int

from .checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    offset_of,
    read_offsets,
    write_offsets,
)
from .dirnames import (
    METADATA_TOPIC,
    PARTITION_DIR,
    is_text_name,
    loaded_as_after_a_crash,
    named_path,
    partition_dirs,
    segment_bases,
)
from .partition import (
    KafkaConfig,
    Partition,
    now_ms,
    orphaned_indexes,
    parse_partition_dir,
    validate_topic,
)

#: Threads that close the partitions of a log directory (:meth:`LogDir.close`).
CLOSE_THREADS = 16
#: the marker a broker's clean shutdown leaves in each log dir (``CleanShutdownFileHandler``, Kafka 3.8.0)
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def had_clean_shutdown(log_dir: str) -> bool:
    """Whether ``log_dir`` holds a broker's clean-shutdown marker (Kafka 3.8.0 ``LogLoader.load`` then
    recovers no segment, ``hadCleanShutdown``); read before a writable open forgets it."""
    return files.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))


def forget_clean_shutdown(log_dir: str) -> None:
    """Remove a log dir's clean-shutdown marker, as Kafka 3.8.0 ``LogManager.loadLogs`` does when it
    loads the dir: a writer changes what the broker shut down on, and a broker that finds the marker
    trusts its producer snapshots (``UnifiedLog.rebuildProducerState`` with ``reloadFromCleanShutdown``
    and no snapshot scans nothing), so the producers and open transactions of what segstore appended
    would be lost to it.  Without the marker it rebuilds producer state from the log."""
    marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
    if files.exists(marker):
        files.remove(marker)
        files.fsync_dir(log_dir)


def _close_partition(part: Partition) -> BaseException | None:
    """Close ``part``; the error it raised, if any (for :meth:`LogDir.close` to raise)."""
    try:
        part.close()
    except BaseException as err:
        return err
    return None


def _same(config: KafkaConfig) -> Callable[[str], KafkaConfig]:
    """One config for every topic."""
    def config_for(topic: str) -> KafkaConfig:
        return config
    return config_for


def is_partition_dir(path: str) -> bool:
    """True for a directory holding ``%020d.log`` files (or a new, empty one named ``TOPIC-N``)."""
    if segment_bases(path):
        return True
    name = os.path.basename(named_path(path))
    return PARTITION_DIR.match(name) is not None and not any(
        files.is_dir(os.path.join(path, entry)) for entry in files.list_dir(path))


#: Kafka's suffixed partition directories (``LocalLog``: DeleteDirPattern, FutureDirPattern,
#: StrayDirPattern): ``TOPIC-N.UNIQUEID-delete`` and the like; the pattern's text, compiled by re where a
#: directory of such a name is met (every store's open compiled it)
_SUFFIXED_DIR = r"^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$"
#: the tiered-storage index cache ``LogManager.loadLogs`` passes over (``RemoteIndexCache.DIR_NAME``)
REMOTE_INDEX_CACHE = "remote-log-index-cache"


def kafka_partition_name(name: str) -> bool:
    """Whether Kafka 3.8 loads a directory of this name (``LocalLog.parseTopicPartitionName``: a
    ``-`` before a partition ``Integer.parseInt`` takes, or one of the suffixed forms); any other
    directory makes ``LogManager.loadLogs`` fail the whole log directory."""
    if name == REMOTE_INDEX_CACHE:
        return True
    if name.endswith(("-delete", "-future", "-stray")):
        if re.match(_SUFFIXED_DIR, name) is None:
            return False
        name = name[:name.rindex(".")]
    return java_partition(name) is not None


def java_partition(name: str) -> int | None:
    """The partition ``LocalLog.parseTopicPartitionName`` reads from a plain ``TOPIC-N`` name: what
    ``Integer.parseInt`` makes of the text after the last ``-`` (:func:`segstore.javatext.parse_int`: a
    sign, then decimal digits of any count, Unicode ones of the BMP too), else None."""
    topic, dash, partition = name.rpartition("-")
    return parse_int(partition) if dash and topic else None


def unread_partition_dirs(path: str, names: list[str]) -> dict[tuple[str, int], str]:
    """The directories of a log directory that Kafka 3.8 loads as partitions (``LogManager.loadLogs``:
    ``LocalLog.parseTopicPartitionName`` takes the name) besides ``names`` (:func:`partition_dirs`,
    those segstore reads), by the partition Kafka reads: ``t-+5`` (``Integer.parseInt`` takes the sign)
    as ``("t", 5)``, a ``TOPIC-N`` directory holding no segment but other files.  ``O(entries)``."""
    taken = set(names)
    out: dict[tuple[str, int], str] = {}
    for name in files.list_dir(path):
        number = java_partition(name) if name not in taken and is_text_name(name) else None
        if number is not None and files.is_dir(os.path.join(path, name)):
            out.setdefault((name.rpartition("-")[0], number), name)
    return out


def _check_one_directory_each(path: str, names: list[str]) -> None:
    """Refuse two directories of one partition (``t-0`` and ``t-00``, ``t-5`` and ``t-+5``:
    ``Integer.parseInt`` reads both alike): Kafka 3.8.0 ``LogManager.loadLog`` throws "Duplicate log
    directories for T-N are found in both ..." and the broker does not start; neither may be read in
    place of the other.  ``O(names)``.

    :raises CorruptDataError: naming both directories.
    """
    seen: dict[tuple[str, int], str] = {}
    for name in names:
        number = java_partition(name)
        key = parse_partition_dir(name) if number is None else (name.rpartition("-")[0], number)
        if key in seen:
            raise CorruptDataError(f"expected one directory of partition {key[0]}-{key[1]}, found "
                                   f"{cut(seen[key])} and {cut(name)} (Kafka's LogManager.loadLog refuses to "
                                   "start on duplicate log directories: remove or rename one)",
                                   os.path.join(path, name))
        seen[key] = name


class LogDir:
    """The partitions of one log directory and its checkpoint files.

    :param config: every partition's config, or (a callable) each topic's own
        (:meth:`.topicconfig.TopicConfigs.config_for`).
    :param unwritable: why the broker appends nothing to a topic, None where it does
        (:meth:`.topicconfig.TopicConfigs.unwritable`): its partitions refuse appends and creation.

    A writable one's partitions lock no directory of their own: its owner holds the log directory's
    lock, which a writer of one of its partitions shares (:class:`.KafkaStore`).
    """

    def __init__(self, path: str, config: KafkaConfig | Callable[[str], KafkaConfig], *,
                 writable: bool = False, clock: Callable[[], int] = now_ms,
                 unwritable: Callable[[str], str | None] = lambda topic: None) -> None:
        self.path = path
        self.config_for: Callable[[str], KafkaConfig] = config if callable(config) else _same(config)
        self.unwritable = unwritable
        self.writable = writable
        self.clock = clock
        #: whether a broker's clean shutdown marker was there (a writable open removes it)
        self.clean_shutdown = had_clean_shutdown(path)
        if writable:
            files.make_dirs(path)
            forget_clean_shutdown(path)
        #: ``(path, pos, message)`` of what loading read past (verify reports them)
        self.problems: list[tuple[str, int | None, str]] = []
        self.recovery_points = self._lenient(RECOVERY_POINT_CHECKPOINT, "resets every recovery point to 0")
        start_offsets = self._lenient(LOG_START_OFFSET_CHECKPOINT,
                                      "resets each log start to the base offset of the first segment")
        self.high_watermarks = read_offsets(os.path.join(path, REPLICATION_OFFSET_CHECKPOINT))
        #: the log end of each partition when opened (a partition appended to since is committed to its end)
        self._opened_end: dict[tuple[str, int], int] = {}
        self.partitions: dict[tuple[str, int], Partition] = {}
        #: each topic's highest partition number here + 1 (what its directories say it has)
        self.widths: dict[str, int] = {}
        #: how many times ``widths`` changed (a cache of it is current while this is the same)
        self.widths_version = 0
        names = partition_dirs(path)
        #: what Kafka loads as a partition and segstore does not read (``t-+5``), by that partition
        self.unread = unread_partition_dirs(path, names)
        _check_one_directory_each(path, [*names, *self.unread.values()])
        try:
            for name in names:
                topic, number = parse_partition_dir(name)
                # KRaft's metadata log: recovered from offset 0 at every start, the marker not its
                crashed = loaded_as_after_a_crash(topic)
                point = 0 if crashed else self.recovery_points.get((topic, number), 0)
                part = Partition(os.path.join(path, name), self.config_for(topic), writable=writable,
                                 clock=clock, recovery_point=point,
                                 unwritable=unwritable(topic), lock=False,
                                 clean_shutdown=self.clean_shutdown and not crashed,
                                 recovery_point_kept=not crashed,
                                 write_recovery_point=self._write_recovery_point)
                key = (part.topic, part.partition)
                part.load_log_start(start_offsets.get(key, 0))
                self.partitions[key] = part
                self._widen(key)
                self._opened_end[key] = part.next_offset
        except BaseException:
            for part in self.partitions.values():
                part.abandon()
            raise

    def _lenient(self, name: str, reset: str) -> dict[tuple[str, int], int]:
        """A checkpoint ``LogManager.loadLogs`` reads past: a malformed one reads as empty, as there
        ("Error occurred while reading ... resetting"), and is kept as a problem for verify."""
        path = os.path.join(self.path, name)
        try:
            return read_offsets(path)
        except CorruptDataError as err:
            self.problems.append((err.path or path, err.pos, f"{err.message}: Kafka's LogManager {reset}"))
            return {}

    def layout_problems(self) -> list[tuple[str, int | None, str]]:
        """What the log directory holds that Kafka's loader refuses or drops: a directory whose name is
        not a partition's (``LogManager.loadLogs`` fails the log directory), index files whose
        ``.log`` is gone in a partition no segment is left in (``LogLoader`` deletes them: the records
        are lost), and checkpoints past a partition's log end (the records below them are gone).
        ``O(entries of the directory)``."""
        problems: list[tuple[str, int | None, str]] = list(self.problems)
        loaded = {part.path for part in self.partitions.values()}
        for name in files.list_dir(self.path):
            where = os.path.join(self.path, name)
            if not files.is_dir(where):
                continue
            if not is_text_name(name):
                problems.append((where, None, "expected partition directories named by UTF-8 text in a log "
                                 f"directory, found {cut(os.fsencode(name))}: Kafka reads the name with "
                                 "U+FFFD for its bytes and opens another directory, not this one"))
            elif not kafka_partition_name(name):
                problems.append((where, None, "expected partition directories named TOPIC-PARTITION in a log "
                                 f"directory, found {cut(name)}: Kafka's LogManager.loadLogs fails the log "
                                 "directory on it (LocalLog.parseTopicPartitionName)"))
            elif where not in loaded and PARTITION_DIR.match(name):
                problems += orphaned_indexes(where)
            elif where not in loaded and java_partition(name) is not None and segment_bases(where):
                topic = name.rpartition("-")[0]
                problems.append((where, None, "expected partition directories named TOPIC-N, found "
                                 f"{cut(name)}: Kafka loads it as partition {java_partition(name)} of topic "
                                 f"{cut(topic)} (Integer.parseInt), segstore does not read it"))
        problems += self.log_start_problems()
        for label, name, offsets in (("recovery point", RECOVERY_POINT_CHECKPOINT, self.recovery_points),
                                     ("high watermark", REPLICATION_OFFSET_CHECKPOINT, self.high_watermarks)):
            for key, offset in sorted(offsets.items()):
                part = self.partitions.get(key)
                if part is not None and offset > part.next_offset:
                    problems.append((os.path.join(self.path, name), None,
                                     f"expected the {label} of {key[0]}-{key[1]} at most its log end "
                                     f"{part.next_offset}, found {offset}: the records below it are gone"))
        return problems

    def log_start_problems(self) -> list[tuple[str, int | None, str]]:
        """Each partition whose ``log-start-offset-checkpoint`` entry lies past its log end (only the
        checkpoint moves the log start there: :meth:`Partition.load_log_start`).  Kafka 3.8.0
        ``LogLoader.recoverLog`` (``deleteSegmentsIfLogStartGreaterThanLogEnd``) then deletes every
        segment of the partition; recover leaves that to whoever knows which of the two is wrong."""
        return [(os.path.join(self.path, LOG_START_OFFSET_CHECKPOINT), None,
                 f"expected the log start offset of {topic}-{number} at most its log end {part.next_offset}, "
                 f"found {part.log_start_offset}: Kafka's LogLoader.recoverLog deletes every segment of the "
                 "partition (deleteSegmentsIfLogStartGreaterThanLogEnd)")
                for (topic, number), part in sorted(self.partitions.items())
                if part.log_start_offset > part.next_offset]

    def checkpoint_changes(self) -> list[str]:
        """What the checkpoints written at close will change of the loaded ones past a partition's log
        end (one past it since loading, or cut back to below it by a recovery): its recovery point
        becomes the log end, as Kafka 3.8.0 ``LogLoader.recoverLog`` takes ``min(recoveryPoint,
        logEndOffset)``, and its high watermark too (``UnifiedLog.updateHighWatermark`` clamps it).
        One line each, for ``recover`` to say instead of "nothing to recover"."""
        lines: list[str] = []
        for label, name, offsets in (("recovery point", RECOVERY_POINT_CHECKPOINT, self.recovery_points),
                                     ("high watermark", REPLICATION_OFFSET_CHECKPOINT, self.high_watermarks)):
            for key, offset in sorted(offsets.items()):
                part = self.partitions.get(key)
                if part is not None and offset > part.next_offset:
                    lines.append(f"{os.path.join(self.path, name)}: the {label} of {key[0]}-{key[1]}, "
                                 f"{offset}, is past its log end: set to {part.next_offset}")
        return lines

    def partition(self, topic: str, partition: int, *, create: bool = False) -> Partition | None:
        """The partition, created (writable stores only) when ``create``."""
        part = self.partitions.get((topic, partition))
        if part is None and create:
            validate_topic(topic, partition)    # a collision is the caller's to check, per call
            self._check_no_other_directory(topic, partition)
            path = os.path.join(self.path, f"{topic}-{partition}")
            refused = self.unwritable(topic)
            if refused is not None:     # the broker's LogLoader fails creating its first segment's indexes
                raise ConfigError(refused, path)
            part = Partition(path, self.config_for(topic), writable=True, clock=self.clock, lock=False)
            self.partitions[(topic, partition)] = part
            self._widen((topic, partition))
        return part

    def _widen(self, key: tuple[str, int]) -> None:
        topic, number = key
        if number >= self.widths.get(topic, 0):
            self.widths[topic] = number + 1
            self.widths_version += 1

    def check_new_partition(self, topic: str, partition: int, known: Iterable[str] = ()) -> None:
        """Refuse a partition to create that Kafka refuses: :func:`validate_topic`'s rules, and a new
        topic whose name collides with an existing topic's once ``.`` and ``_`` are made the same (their
        metric names would clash): 3.8 ``ReplicationControlManager.validateNewTopicNames`` answers
        ``Topic 'a_b' collides with existing topic: a.b`` (``Topic.hasCollisionChars`` /
        ``unifyCollisionChars``).  A new partition of an existing topic is not checked, as
        ``createPartitions`` does not.  ``known``: the cluster's topics besides those with a partition
        here (the metadata log's: the controller checks every topic it replayed,
        ``topicsWithCollisionChars``).  ``O(partitions + known)`` for a new topic.

        :raises InvalidTopicError: the rule broken, naming the existing topic.
        """
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            validate_topic(topic, partition)    # refused before it is looked up (a list is no dict key)
        if (topic, partition) in self.partitions:
            return
        validate_topic(topic, partition)
        self._check_no_other_directory(topic, partition)
        if "." not in topic and "_" not in topic:
            return
        existing = {name for name, _ in self.partitions} | set(known)
        if topic in existing:
            return
        unified = topic.replace(".", "_")
        for name in sorted(existing):
            if name.replace(".", "_") == unified:
                raise InvalidTopicError(f"expected a topic that does not collide with existing topic "
                                        f"{cut(name)}, found {cut(topic)}: '.' and '_' clash in Kafka's "
                                        "metric names, and its controller refuses the topic "
                                        "(InvalidTopicException)", self.path)

    def _check_no_other_directory(self, topic: str, partition: int) -> None:
        """Refuse to create ``TOPIC-N`` where Kafka already loads another directory as that partition
        (``t-+5`` for ``t-5``): the broker would refuse to start on the two (``LogManager.loadLog``:
        "Duplicate log directories").

        :raises InvalidTopicError: naming the other directory.
        """
        other = self.unread.get((topic, partition))
        if other is not None and other != f"{topic}-{partition}":
            name = cut(f"{topic}-{partition}")
            raise InvalidTopicError(f"expected no other directory of partition {name}, found {cut(other)}, "
                                    f"which Kafka loads as that partition (Integer.parseInt): a new {name} "
                                    "beside it would stop the broker from starting (LogManager.loadLog: "
                                    "duplicate log directories)", os.path.join(self.path, other))

    def write_checkpoints(self, log_starts: dict[tuple[str, int], int] | None = None) -> None:
        """Write the checkpoint files from the partitions' current state (``log_starts``: their
        :meth:`log_starts` taken before they were closed).

        A KRaft node's ``__cluster_metadata-0`` is in none of them: Kafka 3.8's ``LogManager.loadLogs``
        skips it (``KafkaRaftServer.MetadataTopic``), so ``checkpointRecoveryOffsetsInDir`` /
        ``checkpointLogStartOffsetsInDir`` never see it, ``ReplicaManager.checkpointHighWatermarks`` has
        no partition for it, and ``KafkaMetadataLog.apply`` opens it with ``recoveryPoint = 0L``.
        """
        for key, part in self.partitions.items():
            self.recovery_points[key] = part.next_offset
        write_offsets(os.path.join(self.path, RECOVERY_POINT_CHECKPOINT), _brokers(self.recovery_points))
        write_offsets(os.path.join(self.path, LOG_START_OFFSET_CHECKPOINT),
                      _brokers(self.log_starts() if log_starts is None else log_starts))
        write_offsets(os.path.join(self.path, REPLICATION_OFFSET_CHECKPOINT),
                      _brokers({key: self.high_watermark(key) for key in self.partitions}))

    def _write_recovery_point(self, part: Partition) -> None:
        """Checkpoint ``part``'s recovery point at its log end, every other partition's as last written
        (what they appended since is not synced): :meth:`Partition.active_holds_damage`, before an append
        the broker's recovery from the old point would delete."""
        self.recovery_points[(part.topic, part.partition)] = part.next_offset
        write_offsets(os.path.join(self.path, RECOVERY_POINT_CHECKPOINT), _brokers(self.recovery_points))

    def log_starts(self) -> dict[tuple[str, int], int]:
        """The ``log-start-offset-checkpoint`` entries: LogManager.checkpointLogStartOffsetsInDir (3.8)
        records a log start only where it is inside the first segment (past its base); a log starts at
        its first segment's base otherwise, which the loader takes."""
        return {key: part.log_start_offset for key, part in self.partitions.items()
                if part.log.segments.first is not None
                and part.log_start_offset > part.log.segments.first.base}

    def set_high_watermark(self, key: tuple[str, int], offset: int) -> None:
        """Checkpoint ``offset`` as the partition's high watermark, as it now ends (appended to after
        this, it is committed to its end again: :meth:`high_watermark`)."""
        self.high_watermarks[key] = offset
        self._opened_end[key] = self.partitions[key].next_offset

    def high_watermark(self, key: tuple[str, int]) -> int:
        """The high watermark to checkpoint: ``UnifiedLog.updateHighWatermark``'s clamp to
        ``[log start, log end]`` of the one read, the log end where absent or appended to since
        (segstore is the only writer: what it wrote is committed)."""
        part = self.partitions[key]
        hw = self.high_watermarks.get(key)
        if hw is None or part.next_offset != self._opened_end.get(key):
            hw = part.next_offset
        return min(max(hw, part.log_start_offset), part.next_offset)

    def flush(self) -> None:
        for part in self.partitions.values():
            part.flush()
        if self.writable:
            self.write_checkpoints()

    def close(self) -> None:
        """Close every partition (each trims its active indexes and flushes its files once), then
        write the checkpoints (everything they record is durable by then).

        A writable directory's partitions close in :data:`CLOSE_THREADS` threads: a close is mostly
        ``fsync``, which releases the GIL, and the filesystem commits many files' syncs together;
        closing them one after another waited for a journal commit per file.  Partitions no thread
        took (one could not start: a capped address space) close in this thread.  The first error
        is raised once every partition is closed.
        """
        parts = list(self.partitions.values())
        log_starts = self.log_starts()      # a closed partition holds no segments
        outcomes: list[tuple[BaseException | None] | None] = [None] * len(parts)

        def close(i: int) -> None:
            outcomes[i] = (_close_partition(parts[i]),)

        if self.writable and len(parts) > 1:       # a read-only close syncs nothing
            turns = itertools.count()       # next() of a count is atomic: each partition taken once

            def take() -> None:
                for i in turns:
                    if i >= len(parts):
                        return
                    close(i)

            threads = []
            for _ in range(min(CLOSE_THREADS, len(parts)) - 1):
                try:
                    threads.append(overlap.start_thread(take, "segstore-kafka-close"))
                except OutOfMemoryError:    # a capped address space: fewer threads take them
                    break
            try:
                take()
            finally:
                for thread in threads:
                    thread.join()
        for i, outcome in enumerate(outcomes):     # what no thread closed closes here
            if outcome is None:
                close(i)
        errors = [outcome[0] for outcome in outcomes if outcome is not None and outcome[0] is not None]
        if errors:
            raise errors[0]
        if self.writable:
            self.write_checkpoints(log_starts)

    def abandon(self) -> None:
        for part in self.partitions.values():
            part.abandon()


# -- a partition's entries in its log directory's checkpoints (opening a partition directory reads
# its log start there; retention, compaction and transactions its high watermark) -------------

def log_dir_of(part: Partition) -> str:
    """The log directory holding a partition's checkpoints: the partition directory's parent."""
    return os.path.dirname(os.path.abspath(part.path))


def checkpointed(part: Partition, name: str) -> int | None:
    """This partition's entry in the log-dir checkpoint ``name`` (None when absent)."""
    return offset_of(os.path.join(log_dir_of(part), name), (part.topic, part.partition))


def write_checkpoint_entry(part: Partition, name: str, offset: int | None) -> None:
    """Set (or, with None, drop) this partition's entry in a log-dir checkpoint; other entries are kept.

    A malformed file holds none to keep: it is replaced, as the broker replaces one its loader read
    past (``LogManager.loadLogs`` reads a malformed ``log-start-offset-checkpoint`` as empty, and
    ``checkpointLogStartOffsetsInDir`` then writes what it holds)."""
    path = os.path.join(log_dir_of(part), name)
    try:
        offsets = read_offsets(path)
    except CorruptDataError:
        offsets = {}
    key = (part.topic, part.partition)
    if offset is None:
        if key not in offsets:
            return
        offsets.pop(key)
    else:
        offsets[key] = offset
    write_offsets(path, offsets)


def write_log_start(part: Partition) -> None:
    """Set this partition's ``log-start-offset-checkpoint`` entry from its log start:
    ``LogManager.checkpointLogStartOffsetsInDir`` keeps an entry only where the log start is past the
    first segment's base (dropped otherwise)."""
    first = part.log.segments.first
    past = first is None or part.log_start_offset > first.base
    write_checkpoint_entry(part, LOG_START_OFFSET_CHECKPOINT, part.log_start_offset if past else None)


def recovery_point_in(log_dir: str, topic: str, partition: int) -> int | None:
    """A partition's ``recovery-point-offset-checkpoint`` entry in ``log_dir``; None where there is none,
    or where the file is malformed (Kafka 3.8.0 ``LogManager.loadLogs`` then hands ``LogLoader`` 0, and
    :func:`write_recovery_point` writes none)."""
    try:
        return offset_of(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT), (topic, partition))
    except CorruptDataError:
        return None


def write_recovery_point(part: Partition) -> None:
    """After a writer's flush, move this partition's ``recovery-point-offset-checkpoint`` entry in the
    parent log dir to its log end (``LogManager.checkpointRecoveryOffsetsInDir``, as a log directory's
    close writes it): only where the file names the partition (the parent of a partition directory may
    be any directory; without an entry the broker recovers the partition from 0 all the same)."""
    try:
        found = checkpointed(part, RECOVERY_POINT_CHECKPOINT)
    except CorruptDataError:
        return
    if found is not None and found != part.next_offset:
        write_checkpoint_entry(part, RECOVERY_POINT_CHECKPOINT, part.next_offset)


def load_log_start(part: Partition) -> None:
    """Honour ``log-start-offset-checkpoint`` as ``LogLoader`` does: ``max(checkpoint, first base)``;
    a malformed one is read past, as ``LogManager.loadLogs`` does (the log start is the first base)."""
    try:
        found = checkpointed(part, LOG_START_OFFSET_CHECKPOINT)
    except CorruptDataError:
        return
    if found is not None:
        part.load_log_start(found)


def high_watermark(part: Partition) -> int:
    """The partition's high watermark: ``replication-offset-checkpoint`` clamped, else the log end."""
    found = checkpointed(part, REPLICATION_OFFSET_CHECKPOINT)
    hw = part.next_offset if found is None else found
    return min(max(hw, part.log_start_offset), part.next_offset)


def _brokers(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """``offsets`` less the KRaft metadata partition, which the broker's log-dir checkpoints never hold."""
    return {key: offset for key, offset in offsets.items() if key[0] != METADATA_TOPIC}
