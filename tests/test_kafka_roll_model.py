"""Kafka segment rolls and sparse indexes, every append path and reopens, against a model of Kafka 3.8.

The model is written from the broker's code, not from segstore's (``storage/src/main/java/org/apache/
kafka/storage/internals/log/`` and ``core/src/main/scala/kafka/log/`` at tag 3.8.0):

- ``UnifiedLog.maybeRoll`` / ``LogSegment.shouldRoll``: roll before an append when ``size >
  segment.bytes - batch size``, when the segment is not empty and the batch's max timestamp is more
  than ``segment.ms`` after its first batch's (``timeWaitedForRoll``), when the offset index is full
  (``AbstractIndex.isFull``: ``entries >= maxEntries``) or the time index is (``TimeIndex.isFull``:
  ``entries >= maxEntries - 1``), or when the batch's last offset is more than ``Integer.MAX_VALUE``
  past the base offset; an active segment of size 0 rolled at its own base offset is replaced
  (``LocalLog.roll``, KAFKA-6388);
- ``LogSegment.append``: an index entry (last offset, position) when ``bytesSinceLastIndexEntry >
  indexIntervalBytes``, the time index's ``maybeAppend(maxTimestampSoFar, ...)`` only for a larger
  timestamp; ``bytesSinceLastIndexEntry`` starts at 0 in a segment opened again;
- ``LogSegment.onBecomeInactiveSegment`` and ``LogSegment.close``: the max timestamp forced into the
  time index (``skipFullCheck``), then both indexes trimmed to their entries; the indexes are
  ``segment.index.bytes`` rounded down to whole entries (``AbstractIndex.roundDownToExactMultiple``).
"""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka.batch import iter_batches

import segstore

T0 = 1_700_000_000_000


def _model(batches: list[tuple[int, int, int, int]], config: dict[str, int],
           reopened: set[int]) -> list[dict]:
    """Segments (base, offset index entries, time index entries) Kafka writes for ``batches`` (size, max
    timestamp, last offset, base offset), the partition closed and opened again before each batch
    number in ``reopened`` and closed after the last."""
    offset_slots = config["segment.index.bytes"] // 8
    time_slots = config["segment.index.bytes"] // 12
    segments: list[dict[str, Any]] = []

    def new(base: int) -> None:
        segments.append({"base": base, "size": 0, "oi": [], "ti": [], "first": None, "max": (-1, base),
                         "since": 0})

    def force_max(seg: dict) -> None:       # TimeIndex.maybeAppend(max, offset, skipFullCheck = true)
        if seg["max"][0] > (seg["ti"][-1][0] if seg["ti"] else -1) and len(seg["ti"]) < time_slots:
            seg["ti"].append(seg["max"])

    new(0)
    for i, (size, max_ts, last, base) in enumerate(batches):
        seg = segments[-1]
        if i in reopened:       # a new LogSegment: bytesSinceLastIndexEntry 0, max from the time index
            seg["since"] = 0
            seg["max"] = seg["ti"][-1] if seg["ti"] else (-1, seg["base"])
        waited = max_ts - seg["first"] if seg["first"] is not None and seg["first"] >= 0 else 0
        if (seg["size"] > config["segment.bytes"] - size
                or (seg["size"] > 0 and waited > config["segment.ms"])
                or len(seg["oi"]) >= offset_slots or len(seg["ti"]) >= time_slots - 1
                or last - seg["base"] > 2**31 - 1):
            if seg["size"] == 0:
                segments.pop()
            else:
                force_max(seg)
            new(base)
            seg = segments[-1]
        position = seg["size"]
        if position == 0:
            seg["first"] = max_ts
        if max_ts > seg["max"][0]:
            seg["max"] = (max_ts, last)
        if seg["since"] > config["index.interval.bytes"]:
            seg["oi"].append((last, position))
            if seg["max"][0] > (seg["ti"][-1][0] if seg["ti"] else -1):
                seg["ti"].append(seg["max"])
            seg["since"] = 0
        seg["since"] += size
        seg["size"] += size
        if i + 1 in reopened or i + 1 == len(batches):
            force_max(seg)
    return segments


def _batches(partition: Path) -> list[tuple[int, int, int, int]]:
    out = []
    for log in sorted(partition.glob("*.log")):
        out += [(b.size, b.max_timestamp, b.last_offset, b.base_offset)
                for b in iter_batches(memoryview(log.read_bytes()), path=str(log))]
    return out


def _append(store: Any, how: str, records: list[dict]) -> None:
    if how == "append":
        for r in records:
            store.append(r)
    elif how == "append_batch":
        store.append_batch(records)
    else:
        store.append_arrow(pa.table({"topic": [r["topic"] for r in records], "partition": [0] * len(records),
                                     "value": [r["value"] for r in records],
                                     "timestamp": [r["timestamp"] for r in records]}))


@settings(max_examples=30, deadline=None)
@given(data=st.data(),
       config=st.fixed_dictionaries({
           "segment.bytes": st.sampled_from([300, 700, 3000]), "segment.ms": st.sampled_from([50, 10**9]),
           "segment.index.bytes": st.sampled_from([12, 24, 40, 64, 10**6]),
           "index.interval.bytes": st.sampled_from([0, 60, 250]),
           "compression.type": st.sampled_from(["none", "gzip"]),
           "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"])}))
def test_every_append_path_rolls_and_indexes_as_kafka(tmp_path_factory, data, config):
    """Sessions of appends (``append``, ``append_batch``, ``append_arrow``), each a reopen, with small
    segments and indexes so that every roll rule fires: the segments, ``.index`` and ``.timeindex`` files
    are the model's, entry for entry.  (Before the LogSegment.close fix a one-slot time index was closed
    without the max timestamp.)"""
    path = tmp_path_factory.mktemp("k")
    steps = data.draw(st.lists(st.tuples(st.integers(0, 80), st.sampled_from([-40, 0, 30, 70])),
                               min_size=1, max_size=30))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(steps)), max_size=3))) - {len(steps)})
    stamp = T0
    records = []
    for size, step in steps:
        stamp += step
        records.append({"topic": "t", "partition": 0, "value": b"v" * size, "timestamp": stamp})
    reopened = set()
    bounds = [0, *cuts, len(records)]
    for lo, hi in itertools.pairwise(bounds):
        if lo:
            reopened.add(len(_batches(path / "t-0")))
        how = data.draw(st.sampled_from(["append", "append_batch", "append_arrow"]))
        with segstore.open(path, format="kafka", mode="a", **config) as store:
            chunk = records[lo:hi]
            for at in range(0, len(chunk), 3):
                _append(store, how, chunk[at:at + 3])
    partition = path / "t-0"
    model = _model(_batches(partition), config, reopened)
    assert sorted(int(p.name[:20]) for p in partition.glob("*.log")) == [s["base"] for s in model]
    for seg in model:
        name = f"{seg['base']:020d}"
        offsets = [(seg["base"] + r, p) for r, p in struct.iter_unpack(">ii", (partition / f"{name}.index")
                                                                        .read_bytes())]
        times = [(t, seg["base"] + r) for t, r in struct.iter_unpack(">qi", (partition / f"{name}.timeindex")
                                                                     .read_bytes())]
        assert offsets == seg["oi"], name
        assert times == seg["ti"], name
