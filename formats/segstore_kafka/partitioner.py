"""Which partition a record that names none goes to: the Java producer's choice for a keyed record.

Kafka 3.8 ``KafkaProducer.partition``: a record naming its partition goes there; else a record with
a (serialized) key goes to ``BuiltInPartitioner.partitionForKey(serializedKey, numPartitions)`` =
``Utils.toPositive(Utils.murmur2(serializedKey)) % numPartitions``, the topic's partition count
taken from the cluster metadata; a record without key takes the sticky partition, which depends on
the producer's batching (nothing to reproduce).  So segstore writes a record naming no partition to
the partition its key's murmur2 chooses when its topic already has more than one partition, and to
partition 0 otherwise (no key, or a topic of one partition or none yet): a later producer then adds
the same key's records to the same partition (per-key order, co-partitioning).  A key is hashed as
its bytes (a ``str`` as UTF-8, what ``StringSerializer`` sends).

:func:`murmur2` and :func:`murmur2_offsets` are C (``segstore_kafka._speedups``,
``_speedups_partitioner.c``); :func:`murmur2_py` is the reference they are tested equal to, and
what runs without the C build.  ``dictappend.plain_groups`` routes plain dicts in C, as it groups them.

Pure; thread-safe.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from segstore import speedups
from segstore.errors import NotFoundError, cut

_speedups = speedups.load("segstore_kafka._speedups")

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C


def murmur2_py(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``, as Java's signed int (the reference)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest:
        tail = data[length - rest:]
        if rest == 3:
            h ^= tail[2] << 16
        if rest >= 2:
            h ^= tail[1] << 8
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data`` (C where built)."""
    return murmur2_py(data) if _speedups is None else int(_speedups.murmur2(data))


def partition_for_key(key: bytes | str, count: int) -> int:
    """``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % count`` (``count`` >= 1)."""
    data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return (murmur2(data) & 0x7FFFFFFF) % count


def murmur2_offsets(offsets: np.ndarray, data: Any) -> np.ndarray:
    """The int32 ``murmur2`` of each value of an Arrow binary array, given as its ``len + 1`` int32
    ``offsets`` into ``data`` (``segstore.columns.binary_buffers``).  ``O(bytes)``, one C call."""
    offsets = np.ascontiguousarray(offsets, np.int32)
    if _speedups is not None:
        return np.frombuffer(_speedups.murmur2_offsets(offsets, data), np.int32)
    view = memoryview(data).cast("B") if len(data) else b""
    return np.array([murmur2_py(bytes(view[a:b])) for a, b in itertools.pairwise(offsets.tolist())], np.int32)


def key_partitions(hashes: np.ndarray, count: int | np.ndarray) -> np.ndarray:
    """``partitionForKey`` of each of these int32 murmur2 hashes over ``count`` partitions (one count,
    or one a hash), as int64."""
    return (hashes.astype(np.int64) & 0x7FFFFFFF) % count


def not_held(path: str, topic: str, partition: int, count: int, key: Any) -> NotFoundError:
    """The refusal of a record whose key chose a partition this log directory does not hold (a
    broker holds only the partitions assigned to it): never written elsewhere."""
    return NotFoundError(f"expected partition {partition} of topic {cut(topic)} here, the one key "
                         f"{cut(key)} goes to (Kafka's producer: murmur2 of the key over the "
                         f"topic's {count} partitions), found no {topic}-{partition} (give the record's "
                         "partition to write it elsewhere)", path)
