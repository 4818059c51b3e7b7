"""A Kafka record as the store's reads give it (:class:`KafkaRecord`), and its batch's fields as
``dump --json`` gives them (:func:`batch_json`).

Apart from :mod:`.store`, which loads it where a read makes a record: a frozen dataclass's methods are
compiled from generated source when its class is made (~3.5M instructions, ~0.7 ms, of a process's
first ``scan_arrow``, which makes columns, no records).  Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from segstore.records import Record

from . import batch as codec

__all__ = ["KafkaRecord", "batch_json"]


@dataclass(frozen=True, slots=True)
class KafkaRecord(Record):
    """One record with its batch, topic and partition: a :class:`segstore.records.Record` whose
    ``extras`` are the batch's fields (``dump --json``'s ``batch`` object).  ``log_start_offset`` is
    its partition's when it was read, ``segment_base_offset`` the base offset its segment is named
    by (a cleaned segment keeps its first base, ``LogCleaner``, so it may lie below the first batch):
    what a copy needs to start its log where the source's starts (``dump --json``)."""

    topic: str
    partition: int = field()    # a field, not the default: Record declares ``partition`` as a property
    batch: codec.RecordBatch
    record: codec.Record
    log_start_offset: int
    segment_base_offset: int

    @property
    def offset(self) -> int:
        return self.record.offset

    @property
    def timestamp(self) -> int:
        return self.record.timestamp

    @property
    def timestamp_type(self) -> str:
        return self.batch.timestamp_type

    @property
    def key(self) -> bytes | None:
        return self.record.key

    @property
    def keys(self) -> list[str]:
        """``[key]`` as text (``surrogateescape`` for bytes that are not UTF-8); ``[]`` for a null key."""
        key = self.record.key
        return [] if key is None else [bytes(key).decode("utf-8", "surrogateescape")]

    @property
    def value(self) -> bytes | None:
        return self.record.value

    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        return list(self.record.headers)

    @property
    def extras(self) -> Mapping[str, Any]:
        return batch_json(self.batch, self.segment_base_offset)


def batch_json(batch: codec.RecordBatch, segment_base_offset: int) -> dict[str, Any]:
    """The ``batch`` object of a ``dump --json`` line (``segment_base_offset``: the base offset its
    segment file is named by)."""
    return {"base_offset": batch.base_offset, "last_offset": batch.last_offset, "position": batch.position,
            "size": batch.size, "crc": batch.crc, "compression": batch.compression, "magic": batch.magic,
            "producer_id": batch.producer_id, "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence, "partition_leader_epoch": batch.partition_leader_epoch,
            "is_transactional": batch.is_transactional, "is_control": batch.is_control,
            "max_timestamp": batch.max_timestamp, "base_timestamp": batch.base_timestamp,
            "delete_horizon_ms": batch.delete_horizon_ms, "segment_base_offset": segment_base_offset}
