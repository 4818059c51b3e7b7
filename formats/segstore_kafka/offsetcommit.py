"""Offset commits as the group coordinator writes them to ``__consumer_offsets``.

Record layouts (Kafka 3.8.0 ``GroupMetadataManager.offsetCommitKey`` / ``offsetCommitValue``,
core/src/main/scala/kafka/coordinator/group/GroupMetadataManager.scala; the schemas are
group-coordinator's ``OffsetCommitKey.json`` / ``OffsetCommitValue.json``), big-endian::

    key    int16 version = 1 (OffsetCommitKey.HIGHEST_SUPPORTED_VERSION)
           int16 length | group (UTF-8)
           int16 length | topic (UTF-8)
           int32 partition
    value  int16 version = 3 (the highest non-flexible one, written from IBP 2.1-IV1 on when the
                              commit has no expire timestamp: ``MetadataVersion.offsetCommitValueVersion``;
                              the new coordinator's ``CoordinatorRecordHelpers.newOffsetCommitRecord``
                              writes the same)
           int64 offset
           int32 leader epoch (-1: none, what a commit without one carries)
           int16 length | metadata (UTF-8)
           int64 commit timestamp (ms)

    group key  int16 version = 2 | int16 length | group (GroupMetadataKey; the offset cleanup
               writes it with a null value when a group it empties is dead)

A commit request's records go out as one batch (``generateOffsetRecords``): CreateTime, the
record timestamps the broker's clock, no producer (id -1, epoch -1) and base sequence 0,
``offsets.topic.compression.codec`` (default none).  The offset cleanup's tombstones of one
group go out as one batch alike, with base sequence -1 (``cleanupGroupMetadata``,
``MemoryRecords.withRecords``).

The group's partition of ``__consumer_offsets`` is ``Utils.abs(groupId.hashCode) %
partitions`` (``GroupMetadataManager.partitionFor``; the new coordinator's
``GroupCoordinatorService.partitionFor`` alike), Java's ``String.hashCode`` over the id's UTF-16
code units.  Pure; thread-safe.
"""

from __future__ import annotations

import struct

from segstore.errors import InvalidMessageError

KEY_VERSION = 1
GROUP_KEY_VERSION = 2
VALUE_VERSION = 3
NO_LEADER_EPOCH = -1
_INT16 = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">i")          # partition
_VALUE_HEAD = struct.Struct(">hqi")      # version, offset, leader epoch
_VALUE_TAIL = struct.Struct(">q")        # commit timestamp
assert (_INT16.size, _KEY_TAIL.size, _VALUE_HEAD.size, _VALUE_TAIL.size) == (2, 4, 14, 8)
_INT32_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as an int32.
    ``O(len)``."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` that holds ``group`` (``Utils.abs`` maps int32's
    minimum to 0)."""
    h = java_string_hash(group)
    return (0 if h == _INT32_MIN else abs(h)) % partitions


def _string(text: str, what: str) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:       # a lone surrogate: no Java string writes it
        raise InvalidMessageError(f"expected a {what} of Unicode text, found {text!r}") from err
    if len(data) > 0x7FFF:
        raise InvalidMessageError(f"expected a {what} of at most 32767 UTF-8 bytes, found {len(data)}")
    return _INT16.pack(len(data)) + data


def _in_range(value: int, bits: int, what: str) -> int:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise InvalidMessageError(f"expected {what} in [{low}, {high}], found {value}")
    return value


def commit_key(group: str, topic: str, partition: int) -> bytes:
    """An ``OffsetCommitKey`` v1."""
    return _INT16.pack(KEY_VERSION) + _string(group, "group id") + _string(topic, "topic") \
        + _KEY_TAIL.pack(_in_range(partition, 32, "a partition"))


def group_key(group: str) -> bytes:
    """A ``GroupMetadataKey`` (v2: the record type): what a group's tombstone carries."""
    return _INT16.pack(GROUP_KEY_VERSION) + _string(group, "group id")


def commit_value(offset: int, commit_ms: int, *, leader_epoch: int = NO_LEADER_EPOCH,
                 metadata: str = "") -> bytes:
    """An ``OffsetCommitValue`` v3."""
    head = _VALUE_HEAD.pack(VALUE_VERSION, _in_range(offset, 64, "an offset"),
                            _in_range(leader_epoch, 32, "a leader epoch"))
    tail = _VALUE_TAIL.pack(_in_range(commit_ms, 64, "a commit time"))
    return head + _string(metadata, "commit metadata") + tail
