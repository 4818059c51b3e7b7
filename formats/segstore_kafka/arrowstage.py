"""A columnar append encoded ahead of it (the Spark writer's driver), committed by setting offsets.

``KafkaStore.append_arrow`` cuts each input batch's rows into record batches and encodes each one
(:mod:`.arrowappend`, :func:`.partition.encode_columns`) at the partition's log end.  What the
encoding depends on besides the rows is the topic's config (codec and level, ``max.message.bytes``
and ``segment.bytes`` for the cuts, the timestamp type), and two fields a batch carries outside
its checksum::

    offset  size  field                  set by
    0       8     baseOffset             :func:`commit` (the partition's log end offset)
    8       4     batchLength
    12      4     partitionLeaderEpoch   :func:`commit` (``Partition.append_epoch``, as an append's)
    16      1     magic
    17      4     crc                    CRC-32C of bytes 21.. (attributes to the end)
    21      2     attributes ...

Kafka 3.8.0 ``clients/.../record/DefaultRecordBatch.java``: "The CRC covers the data from the
attributes to the end of the batch ... The partition leader epoch field is not included in the
CRC computation" (``computeChecksum``: ``Crc32C.compute(buffer, ATTRIBUTES_OFFSET, ...)``), and the
leader sets both so itself without a new checksum (``setLastOffset``, ``setPartitionLeaderEpoch``;
``LogValidator.assignOffsetsNonCompressed``).  A record's offset is a delta from the base.  So
:func:`encode` (pure, no store opened for writing: the Spark writer's driver, as each task's
staged rows come in) encodes the batches at base offset 0, epoch 0, and :func:`commit` sets the two
fields in place and writes them where the log ends as ``append_arrow`` would have written
them: the same bytes, the same rolls, index entries, epochs and retention.

An encoding is taken only where ``append_arrow``'s bytes depend on nothing the commit knows
better: every row has its time (none stamped with the append's), the topic takes its records'
times (``CreateTime``) without bounds on them nor compaction (checked then against the append's
clock and keys), every row names its partition (no key routed over the topic's partitions), and
no row is too large for a batch alone (refused by the append).  Elsewhere :func:`encode` gives
None and the caller appends the rows (``append_arrow``), as it would without this.

The manifest (JSON) says, per topic, the config the bytes were encoded under
(:func:`config_key`), and per batch ``[topic, partition, last of its group]`` in the order
``append_arrow`` appends them; :func:`usable` refuses it where the partition's config differs now.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
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


def encode(batches: list[pa.RecordBatch], config_for: Callable[[str], KafkaConfig], *,
           pool: Executor | None = None) -> EncodedArrow | None:
    """The batches ``append_arrow`` of ``batches`` (its input batches, in order) writes with topics
    configured by ``config_for``, at base offset 0 and leader epoch 0; None where the rows or the
    configs are not such that setting those two fields makes them what it writes (above), or where
    ``append_arrow`` refuses the rows before writing any (the caller's append then says why).

    Every input batch is planned and checked here (the cuts, so the manifest, are known then); the
    encoding itself runs on ``pool``'s threads where given (the C encoder walks the rows without the
    GIL), each input batch a task: the chunks then come in order as they are made (an iterator,
    consumed once by :func:`commit`, which writes the first while the next are made).  The rows'
    buffers must stay valid until then (a mapped file stays mapped while its buffers live).
    ``O(bytes)`` in C, a Python step per batch written.
    """
    from .partition import encode_columns

    configs: dict[str, Any] = {}
    known: dict[str, KafkaConfig] = {}
    listed: list[list[Any]] = []
    planned: list[tuple[arrowappend.Plan, list[tuple[KafkaConfig, Any]]]] = []
    try:
        for batch in batches:
            names = batch.schema.names
            if "partition" not in names or batch.column("partition").null_count or "timestamp" not in names:
                return None         # a row's partition or time would be the append's
            plan = arrowappend.plan(batch)
            if (plan.timestamps < 0).any():
                return None
            runs: list[tuple[KafkaConfig, Any]] = []
            for topic, partition, rows in plan.groups:
                config = known[topic] if topic in known else known.setdefault(topic, config_for(topic))
                key = configs.setdefault(topic, config_key(config))
                if key is None:
                    return None
                limit = arrowappend.batch_limit(config.max_message_bytes, config.segment_bytes,
                                                config.codec != "none")
                if (plan.sizes[rows] > limit).any():
                    return None     # a lone row the append checks against max.message.bytes
                for run in arrowappend.cuts(rows, plan.sizes, plan.batch_ids, limit):
                    runs.append((config, run))
                    listed.append([topic, partition, False])
                listed[-1][2] = True        # the last of its group: retention applied after it
            planned.append((plan, runs))
    except SegstoreError:
        return None

    def encoded(plan: arrowappend.Plan, runs: list[tuple[KafkaConfig, Any]]) -> list[bytearray]:
        columns = plan.columns(0)
        # bytearrays, set in place at the commit: each copy is made here, and the encoder's bytes
        # freed at once for the next batch's (no new pages)
        return [bytearray(encode_columns(config, columns, run, base_offset=0, leader_epoch=0, now=0))
                for config, run in runs]

    chunks: Iterable[bytearray]
    if pool is None:
        chunks = [chunk for plan, runs in planned for chunk in encoded(plan, runs)]
    else:
        chunks = _in_order([pool.submit(encoded, plan, runs) for plan, runs in planned])
    return EncodedArrow({"version": VERSION, "configs": configs, "batches": listed}, chunks)


def _in_order(futures: list[Future[list[bytearray]]]) -> Iterator[bytearray]:
    """The chunks of ``futures`` in order, each waited for; those not reached are cancelled."""
    try:
        for future in futures:
            yield from future.result()
    finally:
        for future in futures:
            future.cancel()


def usable(store: KafkaStore, manifest: dict[str, Any]) -> bool:
    """Whether ``manifest``'s batches are what ``append_arrow`` would write to ``store`` now: a version
    this module writes, and each topic configured here as it was encoded.  Raises what the append
    would raise for its topics and partitions (``KafkaStore.check_destinations``) otherwise nothing.
    ``O(batches)``."""
    if manifest.get("version") != VERSION:
        return False
    batches = manifest["batches"]
    store.check_destinations(sorted({(str(t), int(p)) for t, p, _ in batches}))
    configs = manifest["configs"]
    seen: set[tuple[str, int]] = set()
    for topic, partition, _ in batches:
        if (topic, partition) in seen:
            continue
        seen.add((topic, partition))
        config = store._append_state(topic, partition)[0]
        if config_key(config) != configs.get(topic):
            return False
    return True


def commit(store: KafkaStore, encoded: EncodedArrow) -> int:
    """Append ``encoded``'s batches to ``store``, each at its partition's log end with its latest leader
    epoch (both set in the chunk itself: append an encoding once), as ``append_arrow`` appends (after
    :func:`usable` of its manifest): a segment rolled where it rolls, the partition's retention applied
    after each group of its rows; returns the records appended.  ``O(bytes)`` written, no copy.
    """
    appended = 0
    now: int | None = None
    listed = encoded.manifest["batches"]
    for (topic, partition, last), batch in zip(listed, encoded.chunks, strict=True):
        part = store.partition_of(topic, partition, create=True)
        if now is None:
            now = part.clock()      # as append_arrow takes it once per group
        BASE_OFFSET.pack_into(batch, BASE_OFFSET_AT, part.next_offset)
        LEADER_EPOCH.pack_into(batch, LEADER_EPOCH_AT, part.append_epoch)     # as append_columns
        done = part.append_encoded(batch, now_ms=now, check_times=False)
        appended += done.last_offset - done.base_offset + 1
        if last:
            part.apply_retention()
            now = None
    if store.indexes is not None:  # extra index layouts (segstore.layouts)
        store.indexes.append()
    return appended


__all__ = ["VERSION", "commit", "config_key", "encode", "usable"]
