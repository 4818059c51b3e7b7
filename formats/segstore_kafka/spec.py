"""Replay a compat-fixture ``spec.json`` into a Kafka partition directory (``segstore write --spec``).

The spec lists producer batches in order, from ``start_offset`` (default 0);
each becomes one RecordBatch appended as the broker's log appends it (offsets
assigned from the log end offset, the batch's leader epoch (else the spec's
``leader_epoch``), producer id/epoch/sequence, transactional flag and
compression as given; control batches as COMMIT/ABORT markers).  With
LogAppendTime the broker clock starts at ``now_ms`` and moves by the batch's
``advance_time_ms`` before the batch is stamped.  The config is the spec's
(Kafka topic config names), overridden by the caller's.
"""

from __future__ import annotations

import base64
from typing import Any

from segstore import progress
from segstore.errors import InvalidMessageError

from .partition import KafkaConfig, Partition, parse_partition_dir
from .store import KafkaStore


def _bytes(obj: dict[str, Any], name: str) -> bytes | None:
    """A spec field given as UTF-8 text (``name``) or base64 (``name_b64``); None when null or absent."""
    if f"{name}_b64" in obj:
        raw = obj[f"{name}_b64"]
        return None if raw is None else base64.b64decode(raw)
    raw = obj.get(name)
    return None if raw is None else raw.encode("utf-8")


def spec_records(batch: dict[str, Any]) -> list[tuple[bytes | None, bytes | None, int, list]]:
    """The ``(key, value, timestamp, headers)`` tuples of one spec batch."""
    return [(_bytes(r, "key"), _bytes(r, "value"), int(r["timestamp"]),
             [(h["key"], _bytes(h, "value")) for h in r.get("headers", [])])
            for r in batch["records"]]


class SpecClock:
    """The broker clock of a spec: starts at ``now_ms``; :func:`replay` advances it per batch."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


#: Spec batches between two reports to the open :func:`progress.task` (a batch a unit).
_PROGRESS_EVERY = 256


def replay(part: Partition, spec: dict[str, Any], clock: SpecClock) -> None:
    """Append every batch of ``spec`` to ``part``, moving ``clock`` by each ``advance_time_ms``;
    progress is reported in batches.

    A spec ``start_offset`` makes an empty log start there (the first segment is named
    from it); appending a spec with one to a log that holds records is refused.
    """
    start = int(spec.get("start_offset", 0))
    if start != part.next_offset:
        part.start_at(start)
    reported = 0
    for i, batch in enumerate(spec["batches"]):
        if i - reported >= _PROGRESS_EVERY:
            progress.advance(i - reported)
            reported = i
        clock.now += int(batch.get("advance_time_ms", 0))
        if "control" in batch:
            part.append_control(batch["control"], producer_id=batch["producer_id"],
                                producer_epoch=batch["producer_epoch"],
                                coordinator_epoch=batch["coordinator_epoch"], timestamp=batch["timestamp"],
                                leader_epoch=batch.get("leader_epoch", spec.get("leader_epoch")))
            continue
        if not batch.get("records"):
            raise InvalidMessageError(f"expected records in spec batch {i}, found none")
        part.append_records(spec_records(batch), compression=batch.get("compression", "none"),
                            producer_id=batch.get("producer_id", -1),
                            producer_epoch=batch.get("producer_epoch", -1),
                            base_sequence=batch.get("base_sequence", -1),
                            transactional=bool(batch.get("transactional", False)),
                            leader_epoch=batch.get("leader_epoch", spec.get("leader_epoch")))
    progress.advance(len(spec["batches"]) - reported)


def write_spec(path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
    """Write the partition directory ``path`` (named ``TOPIC-N``) from ``spec``.

    :raises InvalidTopicError: ``path`` is not named ``TOPIC-N`` (checked before anything is created).
    """
    parse_partition_dir(path)
    parsed = KafkaConfig.from_mapping({**spec.get("config", {}), **config})
    clock = SpecClock(int(spec.get("now_ms", 0)))
    with KafkaStore(path, "a", parsed, clock=clock) as store:
        replay(store.partition, spec, clock)
