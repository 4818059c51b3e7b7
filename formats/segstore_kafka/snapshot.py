"""Producer-state snapshot files (``%020d.snapshot``): the codec.

Layout (Kafka 3.8.0 ``storage/.../log/ProducerStateManager.java``, ``PID_SNAPSHOT_MAP_SCHEMA``
and ``PRODUCER_SNAPSHOT_ENTRY_SCHEMA``; ``readSnapshot`` / ``writeSnapshot``; big-endian)::

    version                    int16    1 (the only version readSnapshot accepts)
    crc                        uint32   CRC32C of every byte after this field
    producer_entries           int32 count, then per producer:
      producer_id              int64
      epoch                    int16
      last_sequence            int32
      last_offset              int64    < 0: no batch metadata (readSnapshot keeps none)
      offset_delta             int32
      timestamp                int64
      coordinator_epoch        int32
      current_txn_first_offset int64    -1: no ongoing transaction

Pure: bytes in, entries out (one numpy structured array, no per-entry Python), bytes out.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from segstore.errors import CorruptDataError

from .batch import crc32c

HEADER = struct.Struct(
    ">h"  # version
    "I"  # crc: CRC32C of everything after it
    "i"  # producer_entries: count
)
assert HEADER.size == 10
CRC_FIELD = struct.Struct(">I")
CRC_POS = struct.calcsize(">h")  # 2
ENTRIES_POS = CRC_POS + CRC_FIELD.size  # 6: the CRC covers from here to the end
ENTRY = np.dtype(
    [
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("current_txn_first_offset", ">i8"),
    ]
)
assert ENTRY.itemsize == 46
SNAPSHOT_VERSION = 1
SUFFIX = ".snapshot"


def read_snapshot(data: bytes | memoryview, *, path: str = "<memory>") -> np.ndarray:
    """The producer entries of a snapshot (a structured array of :data:`ENTRY`), checked as
    ``ProducerStateManager.readSnapshot`` checks them: version 1, the CRC32C, the entry count.

    :raises CorruptDataError: a short file, another version, a CRC or count that does not match.
    """
    view = memoryview(data).cast("B")
    if len(view) < HEADER.size:
        raise CorruptDataError(
            f"expected a {HEADER.size}-byte snapshot header, found {len(view)} bytes", path, 0
        )
    version, stored_crc, count = HEADER.unpack_from(view, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptDataError(f"expected snapshot version {SNAPSHOT_VERSION}, found {version}", path, 0)
    computed = crc32c(view[ENTRIES_POS:])
    if computed != stored_crc:
        raise CorruptDataError(
            f"expected CRC {stored_crc} (stored), found {computed} (computed)", path, CRC_POS
        )
    body = len(view) - HEADER.size
    if count < 0 or count * ENTRY.itemsize != body:
        raise CorruptDataError(
            f"expected {count} entries of {ENTRY.itemsize} bytes, found {body} bytes", path, HEADER.size
        )
    return np.frombuffer(view, dtype=ENTRY, count=count, offset=HEADER.size)


def write_snapshot(entries: np.ndarray) -> bytes:
    """The bytes of a snapshot holding ``entries`` (an array of :data:`ENTRY`), as ``writeSnapshot`` lays
    them out; the inverse of :func:`read_snapshot`."""
    rows = np.asarray(entries, dtype=ENTRY)
    body = struct.pack(">i", len(rows)) + rows.tobytes()
    return struct.pack(">h", SNAPSHOT_VERSION) + CRC_FIELD.pack(crc32c(body)) + body


def entry_dicts(entries: np.ndarray) -> list[dict[str, Any]]:
    """The entries as plain dicts (for JSON); ``last_offset < 0`` means no batch metadata."""
    return [dict(zip(ENTRY.names or (), (int(v) for v in row), strict=True)) for row in entries.tolist()]


def entry_line(entry: dict[str, Any]) -> str:
    """One entry as ``kafka-dump-log`` prints it (``DumpLogSegments.dumpProducerIdSnapshot``): the
    batch-metadata part only where the entry has a last offset."""
    line = (
        f"producerId: {entry['producer_id']} producerEpoch: {entry['producer_epoch']} "
        f"coordinatorEpoch: {entry['coordinator_epoch']} currentTxnFirstOffset: "
        f"{_optional(entry['current_txn_first_offset'])} lastTimestamp: {entry['timestamp']} "
    )
    if entry["last_offset"] >= 0:
        first_sequence = _first_sequence(entry["last_sequence"], entry["offset_delta"])
        line += (
            f"firstSequence: {first_sequence} lastSequence: {entry['last_sequence']} "
            f"lastOffset: {entry['last_offset']} offsetDelta: {entry['offset_delta']} "
            f"timestamp: {entry['timestamp']}"
        )
    return line


def _optional(offset: int) -> str:
    """Java's ``OptionalLong.toString()`` as the tool prints ``currentTxnFirstOffset``."""
    return f"OptionalLong[{offset}]" if offset >= 0 else "OptionalLong.empty"


_SEQUENCE_SPAN = 1 << 31


def _first_sequence(last_sequence: int, offset_delta: int) -> int:
    """``BatchMetadata.firstSeq()``: ``DefaultRecordBatch.decrementSequence(lastSeq, offsetDelta)``,
    wrapping below 0 to Integer.MAX_VALUE as sequences do."""
    first = last_sequence - offset_delta
    return first + _SEQUENCE_SPAN if first < 0 else first
