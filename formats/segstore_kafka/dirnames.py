"""What the entries of a Kafka log directory are named, and the listings built on the names.

``LocalLog``: a partition directory is ``TOPIC-N`` and holds ``%020d.log`` segments
(the base offset, zero-padded).  Kept apart from the partition and log-directory
code so that telling whether a directory is Kafka's (the plugin's ``detect``, run
for every store a command opens) loads nothing more.  Pure except for the listing.
"""

from __future__ import annotations

import os
import re

from segstore import files
from segstore.errors import CorruptDataError

PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
#: partitions are Java ints (``TopicPartition``, the checkpoint files' ``Integer.parseInt``); a
#: directory name's too: Kafka reads it with ``Integer.parseInt``
#: (``LocalLog.parseTopicPartitionName``), which refuses a larger one, and ``LogManager.loadLogs`` then
#: fails the whole log directory (verify names it)
MAX_PARTITION = (1 << 31) - 1
SEGMENT_LOG = re.compile(r"^(?P<base>\d{20})\.log$")


def named_path(path: str) -> str:
    """The path a partition directory's name is read from: ``path`` made absolute (``.`` and ``..`` name
    the directory they stand for), or, where that name is no ``TOPIC-N`` (a link named otherwise),
    the directory it resolves to.  Its parent is the log directory.  ``O(1)`` (a ``readlink`` chain)."""
    absolute = os.path.abspath(path)
    if PARTITION_DIR.match(os.path.basename(absolute)) is None:
        real = os.path.realpath(path)
        if PARTITION_DIR.match(os.path.basename(real)) is not None:
            return real
    return absolute


#: one past the largest offset (a Java long): 20 digits reach past it
OFFSET_LIMIT = 1 << 63


#: KRaft's metadata log (``Topic.CLUSTER_METADATA_TOPIC_NAME``) and its one partition's directory: here,
#: not in :mod:`.kraft`, so that the code that only tells it apart (every store open) does not import
#: the metadata image's replay (2.4 ms)
METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
#: ``MetaPropertiesEnsemble.META_PROPERTIES_NAME``: a KRaft or ZooKeeper broker's log directory identity
#: (:mod:`.properties` reads it; here, so that a store opened where there is none loads no reader of it)
META_PROPERTIES = "meta.properties"
#: A partition directory's topic id (``PartitionMetadataFile``, read by :mod:`.properties`)
PARTITION_METADATA = "partition.metadata"


def loaded_as_after_a_crash(topic: str) -> bool:
    """Whether the broker loads ``topic``'s partition from offset 0 as after a crash at every start, whatever
    its log dir's checkpoints and clean-shutdown marker say: KRaft's metadata log, which Kafka 3.8.0
    ``KafkaMetadataLog.apply`` opens with ``recoveryPoint = 0L`` and ``lastShutdownClean = false`` (no
    checkpoint names it: ``LogManager.loadLogs`` skips it), so ``LogLoader.recoverLog`` walks every batch
    and cuts the log at the first whose CRC fails."""
    return topic == METADATA_TOPIC


#: A KRaft snapshot of the metadata partition: ``Snapshots.filenameFromSnapshotId`` (end offset, epoch); the
#: pattern's text, compiled by re where a metadata log is read (every store's open compiled it)
KRAFT_SNAPSHOT = r"^(\d{20})-(\d{10})\.checkpoint$"
#: one past the largest epoch (a Java int)
EPOCH_LIMIT = 1 << 31


def kraft_snapshot_id(path: str) -> tuple[int, int] | None:
    """``(end offset, epoch)`` of a KRaft snapshot file named ``%020d-%010d.checkpoint``; None for another
    name.  ``O(len(name))``.

    :raises CorruptDataError: the digits are past a Java long (the offset) or int (the epoch): Kafka
        3.8 ``Snapshots.parse`` (``Long.parseLong``, ``Integer.parseInt``) throws a
        ``NumberFormatException`` on the name, and the broker does not start on the log directory
        (``KafkaMetadataLog.recoverSnapshots`` parses every name in it).
    """
    match = re.match(KRAFT_SNAPSHOT, os.path.basename(path))
    if match is None:
        return None
    end, epoch = int(match.group(1)), int(match.group(2))
    if end >= OFFSET_LIMIT or epoch >= EPOCH_LIMIT:
        raise CorruptDataError(f"expected a KRaft snapshot name of an end offset below 2**63 and an epoch "
                               f"below 2**31 (Snapshots.parse), found end offset {end}, epoch {epoch}", path)
    return end, epoch


def segment_bases(path: str) -> list[int]:
    """Base offsets of the ``%020d.log`` files in a directory, sorted (a name past a Java long is no
    segment: Kafka cannot parse it, and verify names it)."""
    return sorted(base for base in (int(m["base"]) for m in map(SEGMENT_LOG.match, files.list_dir(path)) if m)
                  if base < OFFSET_LIMIT)


def partition_dirs(path: str) -> list[str]:
    """Names of the partition directories under a log directory, sorted: ``TOPIC-N`` directories
    holding ``%020d.log`` files, or nothing at all.  Kafka 3.8 ``LogManager.loadLogs`` loads every
    directory ``UnifiedLog.parseTopicPartitionName`` takes, an empty one as a partition with an
    empty log (``LogLoader.load`` opens its first segment); ``UnifiedLog.apply`` makes the directory
    before that segment, so a broker stopped between the two leaves one.  ``O(entries)`` listings."""
    return [name for name in files.list_dir(path) if _loads_as_partition(os.path.join(path, name))]


def partition_numbers(path: str, topic: str) -> list[int]:
    """The partition numbers of ``topic``'s directories under a log directory that
    :func:`partition_dirs` lists, sorted.  ``O(entries)`` names, a listing of ``topic``'s only."""
    prefix = f"{topic}-"
    numbers = []
    for name in files.list_dir(path):
        rest = name[len(prefix):]
        if (name.startswith(prefix) and rest.isascii() and rest.isdigit() and int(rest) <= MAX_PARTITION
                and _loads_as_partition(os.path.join(path, name))):
            numbers.append(int(rest))
    return sorted(numbers)


def is_text_name(name: str) -> bool:
    """Whether a directory entry's name is UTF-8 text (``os.listdir`` gives undecodable bytes as lone
    surrogates).  One that is not is no partition: Kafka's JVM lists it with U+FFFD in their place
    (``File.listFiles``, sun.jnu.encoding UTF-8) and opens that other path, never this directory."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _loads_as_partition(path: str) -> bool:
    """Whether ``path`` is a ``TOPIC-N`` directory with segments or with nothing in it (one holding
    only other files, such as the indexes of a deleted ``.log``, is no partition to segstore), named
    by UTF-8 text (:func:`is_text_name`), its number a Java int (:data:`MAX_PARTITION`: ``t-99999999999``,
    which the broker cannot load, was read as a partition by info and dump while verify named it)."""
    name = os.path.basename(path)
    match = PARTITION_DIR.match(name)
    if (match is None or int(match["partition"]) > MAX_PARTITION or not is_text_name(name)
            or not files.is_dir(path)):
        return False
    return bool(segment_bases(path)) or not files.list_dir(path)
