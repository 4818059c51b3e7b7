"""``Partition.append_encoded_run`` (a conversion's appends, a run of batches in one write of the log and
one of each index) against ``append_encoded`` one batch at a time: the same files byte for byte, and the
segments and index entries of Kafka 3.8 (``LogSegment.append``: an entry when ``bytesSinceLastIndexEntry
> indexIntervalBytes``, per batch; ``LogSegment.shouldRoll`` before each batch; the model in
``test_kafka_roll_model``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segstore_kafka import batch as codec
from test_kafka_roll_model import _batches, _model

import segstore
from segstore.errors import SegstoreError

T0 = 1_700_000_000_000


def _encoded(specs: list[tuple[int, int, int, bool]]) -> list[bytes]:
    """Batches at offsets from 0: ``(records, value size, timestamp step or None for no timestamp,
    a producer's)``."""
    out, offset, stamp = [], 0, T0
    for count, size, step, producer in specs:
        stamp += step if step is not None else 0
        ts = stamp if step is not None else -1
        extra = {"producer_id": 9, "producer_epoch": 0, "base_sequence": offset} if producer else {}
        out.append(codec.encode_batch([(None, b"v" * size, ts)] * count, base_offset=offset, **extra))
        offset += count
    return out


def _write(path: Path, config: dict, sessions: list[list[list[bytes]]], run: bool) -> list[str]:
    """Each session a store opened again; each chunk of a session one ``append_encoded_run`` (``run``) or
    its batches one ``append_encoded`` each.  Returns the errors raised (a chunk stops at one)."""
    errors = []
    for chunks in sessions:
        with segstore.open(path, format="kafka", mode="a", **config) as store:
            part = store.partition_of("t", 0, create=True)
            for chunk in chunks:
                try:
                    if run:
                        part.append_encoded_run(chunk, lambda i, chunk=chunk: T0 + len(chunk[i]))
                    else:
                        for data in chunk:
                            part.append_encoded(data, now_ms=T0 + len(data), check_times=False)
                except SegstoreError as err:
                    errors.append(f"{type(err).__name__}: {err}".replace(str(path), "<dir>"))
    return errors


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@settings(max_examples=60, deadline=None)
@given(data=st.data(),
       config=st.fixed_dictionaries({
           "segment.bytes": st.sampled_from([300, 700, 3000, 1 << 30]),
           "segment.ms": st.sampled_from([50, 10**9]),
           "segment.index.bytes": st.sampled_from([12, 24, 40, 64, 10**6]),
           "index.interval.bytes": st.sampled_from([0, 60, 250, 4096]),
           "max.message.bytes": st.sampled_from([250, 10**6])}))
def test_a_run_writes_what_one_batch_at_a_time_writes(tmp_path_factory, data, config):
    specs = data.draw(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 80),
                                         st.sampled_from([None, -40, 0, 30, 70]), st.booleans()),
                               min_size=1, max_size=30))
    encoded = _encoded(specs)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(encoded)), max_size=6))) | {len(encoded)})
    chunks = [encoded[lo:hi] for lo, hi in zip([0, *cuts], cuts, strict=False)]
    reopen = set(data.draw(st.lists(st.integers(1, len(chunks)), max_size=2)))
    sessions: list[list[list[bytes]]] = [[]]
    for i, chunk in enumerate(chunks):
        if i in reopen:
            sessions.append([])
        sessions[-1].append(chunk)
    one, run = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("run")
    assert _write(run, config, sessions, True) == _write(one, config, sessions, False)
    assert _files(run) == _files(one)


@pytest.mark.parametrize("interval", [0, 250, 4096])
def test_a_run_indexes_and_rolls_as_kafka(tmp_path: Path, interval: int) -> None:
    """Runs of plain batches, no reopen: the segments, ``.index`` and ``.timeindex`` are Kafka 3.8's
    (``LogSegment.append``, ``LogSegment.shouldRoll``: the roll model's)."""
    config = {"segment.bytes": 2000, "segment.ms": 10**9, "segment.index.bytes": 64,
              "index.interval.bytes": interval}
    encoded = _encoded([(1 + i % 3, 10 + 7 * i % 60, (-40, 0, 30, 70)[i % 4], False) for i in range(60)])
    with segstore.open(tmp_path, format="kafka", mode="a", **config) as store:
        part = store.partition_of("t", 0, create=True)
        for at in range(0, len(encoded), 7):
            part.append_encoded_run(encoded[at:at + 7], lambda i: T0)
    partition = tmp_path / "t-0"
    model = _model(_batches(partition), config, set())
    assert len(model) > 2
    assert sorted(int(p.name[:20]) for p in partition.glob("*.log")) == [s["base"] for s in model]
    for seg in model:
        name = f"{seg['base']:020d}"
        index = (partition / f"{name}.index").read_bytes()
        times = (partition / f"{name}.timeindex").read_bytes()
        assert [(seg["base"] + r, p) for r, p in struct.iter_unpack(">ii", index)] == seg["oi"]
        assert [(t, seg["base"] + r) for t, r in struct.iter_unpack(">qi", times)] == seg["ti"]
