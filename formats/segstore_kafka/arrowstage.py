"""A columnar append encoded ahead of it (the Spark writer's tasks), committed by setting offsets.

``KafkaStore.append_arrow`` cuts each input batch's rows into record batches and encodes each one
(:mod:`.arrowappend`, :func:`.partition.encode_columns`) at the partition's log end.  What the
encoding depends on besides the rows is the topic's config (codec and level, ``max.message.bytes``
and ``segment.bytes`` for the cuts, the timestamp type), and two fields a batch carries outside
its checksum::

    offset  size  field                  set by
    0       8     baseOffset             :func:`commit` (the partition's log end offset)
    8       4     batchLength
    12      4     partitionLeaderEpoch   :func:`commit` (the partition's latest epoch, or 0)
    16      1     magic
    17      4     crc                    CRC-32C of bytes 21.. (attributes to the end)
    21      2     attributes ...

Kafka 3.8.0 ``clients/.../record/DefaultRecordBatch.java``: "The CRC covers the data from the
attributes to the end of the batch ... The partition leader epoch field is not included in the
CRC computation" (``computeChecksum``: ``Crc32C.compute(buffer, ATTRIBUTES_OFFSET, ...)``), and the
leader sets both so itself without a new checksum (``setLastOffset``, ``setPartitionLeaderEpoch``;
``LogValidator.assignOffsetsNonCompressed``).  A record's offset is a delta from the base.  So
:func:`encode` (a task: pure, no store opened for writing) encodes the batches at base offset 0,
epoch 0, and :func:`commit` writes them where the log ends as ``append_arrow`` would have written
them: the same bytes, the same rolls, index entries, epochs and retention.

An encoding is taken only where ``append_arrow``'s bytes depend on nothing the commit knows
better: every row has its time (none stamped with the append's), the topic takes its records'
times (``CreateTime``) without bounds on them nor compaction (checked then against the append's
clock and keys), every row names its partition (no key routed over the topic's partitions), and
no row is too large for a batch alone (refused by the append).  Elsewhere :func:`encode` gives
None and the caller appends the rows (``append_arrow``), as it would without this.

The manifest (JSON) says, per topic, the config the bytes were encoded under
(:func:`config_key`), and per batch ``[topic, partition, bytes, last of its group]`` in the order
``append_arrow`` appends them; :func:`usable` refuses it where the partition's config differs now.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from segstore.errors import SegstoreError
from segstore.store import EncodedArrow

from . import arrowappend

if TYPE_CHECKING:
    import pyarrow as pa

    from .partition import KafkaConfig
    from .store import KafkaStore

#: The manifest's layout version.
VERSION = 1
#: baseOffset (int64) and partitionLeaderEpoch (int32), with batchLength between them (kept).
BASE_OFFSET = struct.Struct(">q")
LEADER_EPOCH = struct.Struct(">i")
BASE_OFFSET_AT = 0
LEADER_EPOCH_AT = 12
#: CRC-32C covers from here (DefaultRecordBatch.ATTRIBUTES_OFFSET): neither field above lies in it.
ATTRIBUTES_AT = 21
assert BASE_OFFSET_AT + BASE_OFFSET.size <= LEADER_EPOCH_AT
assert LEADER_EPOCH_AT + LEADER_EPOCH.size < ATTRIBUTES_AT


def config_key(config: KafkaConfig) -> list[Any] | None:
    """What of a topic's ``config`` the bytes of its batches depend on; None where they depend on the
    append itself (``LogAppendTime``, bounds on the records' times, compaction)."""
    if (config.message_timestamp_type != "CreateTime" or config.checks_timestamps or config.compact):
        return None
    return [config.codec, config.level_of(config.codec), config.max_message_bytes, config.segment_bytes]


def encode(batches: list[pa.RecordBatch], config_for: Callable[[str], KafkaConfig]) -> EncodedArrow | None:
    """The batches ``append_arrow`` of ``batches`` (its input batches, in order) writes with topics
    configured by ``config_for``, at base offset 0 and leader epoch 0; None where the rows or the
    configs are not such that setting those two fields makes them what it writes (above), or where
    ``append_arrow`` refuses the rows (the caller's append then says why).  Pure; thread-safe.
    ``O(bytes)`` in C, a Python step per batch written.
    """
    from .partition import encode_columns

    configs: dict[str, list[Any]] = {}
    listed: list[list[Any]] = []
    chunks: list[bytes] = []
    try:
        for batch in batches:
            names = batch.schema.names
            if "partition" not in names or batch.column("partition").null_count or "timestamp" not in names:
                return None         # a row's partition or time would be the append's
            plan = arrowappend.plan(batch)
            if (plan.timestamps < 0).any():
                return None
            columns = plan.columns(0)
            for topic, partition, rows in plan.groups:
                config = config_for(topic)
                key = configs.setdefault(topic, config_key(config))     # type: ignore[arg-type]
                if key is None:
                    return None
                limit = arrowappend.batch_limit(config.max_message_bytes, config.segment_bytes,
                                                config.codec != "none")
                if (plan.sizes[rows] > limit).any():
                    return None     # a lone row the append checks against max.message.bytes
                for run in arrowappend.cuts(rows, plan.sizes, plan.batch_ids, limit):
                    data = encode_columns(config, columns, run, base_offset=0, leader_epoch=0, now=0)
                    chunks.append(data)
                    listed.append([topic, partition, len(data), False])
                if listed:
                    listed[-1][3] = True
    except SegstoreError:
        return None
    manifest = {"version": VERSION, "configs": configs, "batches": listed}
    return EncodedArrow(manifest, chunks)


def usable(store: KafkaStore, manifest: dict[str, Any]) -> bool:
    """Whether ``manifest``'s batches are what ``append_arrow`` would write to ``store`` now: a version
    this module writes, and each topic configured here as it was encoded.  Raises what the append
    would raise for its topics and partitions (``KafkaStore.check_destinations``) otherwise nothing.
    ``O(batches)``."""
    if manifest.get("version") != VERSION:
        return False
    batches = manifest["batches"]
    store.check_destinations(sorted({(str(t), int(p)) for t, p, _, _ in batches}))
    configs = manifest["configs"]
    seen: set[tuple[str, int]] = set()
    for topic, partition, _, _ in batches:
        if (topic, partition) in seen:
            continue
        seen.add((topic, partition))
        config = store._append_state(topic, partition)[0]
        if config_key(config) != configs.get(topic):
            return False
    return True


def commit(store: KafkaStore, manifest: dict[str, Any], data: memoryview) -> int:
    """Append ``manifest``'s batches (``data``: their bytes, one after the other) to ``store``, each at
    its partition's log end with its latest leader epoch, as ``append_arrow`` appends (after it,
    :func:`usable`): a segment rolled where it rolls, the partition's retention applied after each
    group of its rows; returns the records appended.  ``O(bytes)`` (one copy of each batch).
    """
    appended = 0
    pos = 0
    now: int | None = None
    for topic, partition, size, last in manifest["batches"]:
        part = store.partition_of(topic, partition, create=True)
        if now is None:
            now = part.clock()      # as append_arrow takes it once per group
        batch = bytearray(data[pos:pos + size])
        pos += size
        BASE_OFFSET.pack_into(batch, BASE_OFFSET_AT, part.next_offset)
        LEADER_EPOCH.pack_into(batch, LEADER_EPOCH_AT, part.epochs.latest_epoch or 0)
        done = part.append_encoded(batch, now_ms=now, check_times=False)
        appended += done.last_offset - done.base_offset + 1
        if last:
            part.apply_retention()
            now = None
    if store.indexes is not None:  # extra index layouts (segstore.layouts)
        store.indexes.append()
    return appended


__all__ = ["VERSION", "commit", "config_key", "encode", "usable"]
