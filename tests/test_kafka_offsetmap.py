"""The cleaner's key map of fixed memory, and compaction in several passes when it fills.

Sources (apache/kafka 3.8.0):
- storage/src/main/java/org/apache/kafka/storage/internals/log/SkimpyOffsetMap.java: the constructor
  (bytesPerEntry = digest length + 8, slots = memory / bytesPerEntry), put (a digest already held is
  overwritten, the size grows only for a new one), get (-1 when absent), hashInto (MD5 by default)
- core/src/main/scala/kafka/log/LogCleaner.scala: Cleaner's require(slots * dupBufferLoadFactor > 1),
  buildOffsetMapForSegment (put while map.size < slots * dupBufferLoadFactor, else return true: the map
  is full; lastOffset is the last offset put or the last batch read), doClean (endOffset = latestOffset + 1;
  the next cleaning starts at the checkpointed endOffset)
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from segstore_kafka import compaction
from segstore_kafka.offsetmap import ENTRY, OffsetMap, md5_digests
from segstore_kafka.partition import KafkaConfig, Partition

import segstore
from segstore.cli import main
from segstore.errors import ConfigError, InvalidMessageError

T0 = 1_700_000_000_000


def _column(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.cumsum([0] + [len(b) for b in blobs]).astype(np.int32)
    data = np.frombuffer(b"".join(blobs) + b"\0", np.uint8)
    return offsets, data


def _digest_bytes(digests: np.ndarray) -> list[bytes]:
    # through a uint8 view: bytes(S16 item) would drop trailing NULs of a digest
    return [bytes(row) for row in digests.view(np.uint8).reshape(-1, 16)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=40), st.data())
def test_md5_digests_are_md5(blobs: list[bytes], data: st.DataObject) -> None:
    """hashInto: MD5 of the key bytes, for every length around the 55/56/64-byte padding edges too."""
    blobs = blobs + [b"x" * n for n in (0, 55, 56, 63, 64, 119, 120)]
    offsets, buf = _column(blobs)
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, len(blobs) - 1)))), np.int64)
    got = _digest_bytes(md5_digests(offsets, buf, rows))
    assert got == [hashlib.md5(blobs[r]).digest() for r in rows.tolist()]


class _SkimpyModel:
    """SkimpyOffsetMap + buildOffsetMapForSegment's stop rule, key by key (the reference)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.max_entries = int(memory // 24 * load_factor)
        self.map: dict[bytes, int] = {}
        self.latest = -1

    def put_all(self, keys: list[bytes], offsets: list[int]) -> int:
        for i, (key, offset) in enumerate(zip(keys, offsets, strict=True)):
            if len(self.map) >= self.max_entries:
                return i
            self.map[hashlib.md5(key).digest()] = offset
            self.latest = offset
        return len(keys)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 40), st.lists(st.integers(0, 30), max_size=120), st.data())
def test_put_until_full_is_the_cleaners_rule(slots: int, key_ids: list[int], data: st.DataObject) -> None:
    """Put in chunks (the column chunks of the scan) gives the map, the stop point and the latest offset
    that putting key by key with SkimpyOffsetMap under the load-factor rule gives."""
    keys = [b"key-%d" % k for k in key_ids]
    offsets = list(range(100, 100 + len(keys)))
    model = _SkimpyModel(slots * 24)
    expected_stop = model.put_all(keys, offsets)
    omap = OffsetMap(slots * 24)
    assert omap.slots == slots and omap.max_entries == model.max_entries
    cuts = sorted(data.draw(st.lists(st.integers(0, len(keys)), max_size=4)))
    stop, start = None, 0
    for end in [*cuts, len(keys)]:
        if end < start:
            continue
        offs, buf = _column(keys[start:end])
        digests = md5_digests(offs, buf, np.arange(end - start))
        put = omap.put_until_full(digests, np.array(offsets[start:end], np.int64))
        if put < end - start:
            stop = start + put
            break
        start = end
    assert (len(keys) if stop is None else stop) == expected_stop
    assert omap.size == len(model.map) <= omap.max_entries
    assert omap.latest_offset == model.latest
    held = np.array(list(model.map), ENTRY["digest"])
    assert omap.get(held).tolist() == list(model.map.values())
    absent = md5_digests(*_column([b"never"]), np.arange(1))
    assert omap.get(absent).tolist() == [-1]


def test_a_map_holding_one_entry_is_refused() -> None:
    """Cleaner's require: slots * dupBufferLoadFactor must exceed 1, or cleaning never progresses."""
    with pytest.raises(ConfigError, match=r"dedupe\.buffer\.size"):
        OffsetMap(24)
    assert OffsetMap(48).max_entries == 1


# -- compaction in passes == compaction with a map large enough -----------------------------------

RECORD = st.tuples(st.one_of(st.none(), st.integers(0, 11)),
                   st.one_of(st.none(), st.binary(min_size=1, max_size=12)))
PARTITION = st.lists(st.lists(st.lists(RECORD, min_size=1, max_size=4), min_size=1, max_size=5),
                     min_size=2, max_size=5)


def _write(path: Path, segments: list, compression: str
           ) -> list[tuple[int, bytes | None, bytes | None, list]]:
    part = Partition(str(path), KafkaConfig.from_mapping({"cleanup.policy": "compact"}), writable=True,
                     clock=lambda: T0)
    written = []
    for s, batches in enumerate(segments):
        if s:
            part.log.active.on_become_inactive()
            part.log.roll(part.next_offset).make_appendable()
        for batch in batches:
            rows = []
            for key_id, value in batch:
                key = None if key_id is None else b"k%d" % key_id
                # headers on some records: a rewritten batch must carry them over
                headers = [("h", value), ("n", None)] if key_id is not None and key_id % 3 == 0 else []
                written.append((part.next_offset + len(rows), key, value, headers))
                rows.append((key, value, T0 + len(written), headers))
            # unvalidated (as a follower copies them): keyless records are what a leader refuses
            part.append_records(rows, compression=compression, check_times=False)
    part.close()
    return written


def _records(path: Path) -> list[tuple[int, bytes | None, bytes | None, list]]:
    """(offset, key, value, headers) of each data record as kafka-python reads the .log files (CRC
    checked)."""
    out = []
    for log in sorted(path.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
            out.extend((r.offset, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch)
    return out


def _compact(path: Path, memory: int) -> compaction.CompactionResult:
    part = Partition(str(path), KafkaConfig.from_mapping({"cleanup.policy": "compact"}), writable=True,
                     clock=lambda: T0)
    try:
        return compaction.compact_partition(part, dedupe_buffer_size=memory)
    finally:
        part.close()


def _log_bytes(sizes: dict[int, int], end: int) -> int:
    """The bytes of the .log files (base offset -> size) of the segments a clean up to ``end`` reads."""
    return sum(size for base, size in sizes.items() if base < end)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PARTITION, st.integers(2, 14), st.sampled_from(["none", "gzip"]))
def test_passes_with_a_small_map_equal_one_pass_with_a_large_one(segments: list, slots: int,
                                                                  compression: str) -> None:
    """A map of ``slots`` entries (often fewer than the keys) cleans in passes, each from the last one's
    end offset, to the same records a map holding every key leaves: below the first uncleanable offset
    the latest record of each key (tombstones kept: their horizon is a day away), keyless records gone."""
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "a" / "t-0", Path(tmp) / "b" / "t-0"
        written = _write(small, segments, compression)
        _write(large, segments, compression)
        sizes = {int(log.stem): log.stat().st_size for log in small.glob("*.log")}
        bounded = _compact(small, slots * 24)
        reference = _compact(large, compaction.DEDUPE_BUFFER_SIZE)
        assert reference.passes <= 1 and not reference.map_full
        uncleanable = reference.first_uncleanable_offset
        keys = {k for o, k, _, _ in written if k is not None and o < uncleanable}
        if len(keys) > int(slots * 0.9):
            assert bounded.passes > 1
        assert bounded.end_offset == reference.end_offset
        latest = {k: o for o, k, _, _ in written if o < reference.end_offset}
        expected = [(o, k, v, h) for o, k, v, h in written
                    if o >= reference.end_offset or (k is not None and latest[k] == o)]
        assert _records(small) == _records(large) == expected
        # a run's stats are the whole run's (the records and bytes of the segments below its end before
        # it, and after it), not its passes' stats summed; its records those one pass over the range
        # reads and keeps (its bytes may differ: a tombstone an earlier pass kept took a delete horizon)
        assert (bounded.records_read, bounded.records_kept) == (reference.records_read,
                                                                reference.records_kept)
        assert bounded.bytes_before == reference.bytes_before == _log_bytes(sizes, reference.end_offset)
        for result, path in ((bounded, small), (reference, large)):
            after = {int(log.stem): log.stat().st_size for log in path.glob("*.log")}
            assert result.bytes_after == _log_bytes(after, result.end_offset)
        for path in (small, large):
            with segstore.open(path) as store:
                assert store.verify() == []


def test_cli_dedupe_buffer_size_cleans_in_passes(tmp_path: Path, capsys) -> None:
    """--dedupe-buffer-size (log.cleaner.dedupe.buffer.size): 4 slots, 3 keys a pass, 10 keys: 4 passes."""
    path = tmp_path / "logs" / "t-0"
    segments = [[[(k, b"v%d" % k)] for k in range(10)], [[(k, b"w%d" % k)] for k in range(10)], [[(0, b"z")]]]
    written = _write(path, segments, "none")
    assert main(["compact", str(path), "--dedupe-buffer-size", str(4 * 24), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["passes"] == 7 and not done["map_full"] and done["end_offset"] == 20
    assert _records(path) == [(o, k, v, h) for o, k, v, h in written if o >= 10]
    assert main(["verify", str(path), "-q"]) == 0


def test_the_text_of_a_run_in_passes_counts_them_in_english(tmp_path: Path, capsys) -> None:
    """The text line of a run that took several passes said "7 passs"."""
    path = tmp_path / "logs" / "t-0"
    segments = [[[(k, b"v%d" % k)] for k in range(10)], [[(k, b"w%d" % k)] for k in range(10)], [[(0, b"z")]]]
    _write(path, segments, "none")
    assert main(["compact", str(path), "--dedupe-buffer-size", str(4 * 24)]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("t-0: cleaned offsets 0-19: ") and line.endswith(", 7 passes"), line


def test_a_run_in_passes_counts_the_records_the_partition_held_once(tmp_path: Path, capsys) -> None:
    """Kafka 3.8.0 ``LogCleaner.recordStats`` logs one cleaning's ``CleanerStats``: "Start size: ... (N
    messages)", "End size: ... (M messages)", the records and bytes of the segments that cleaning read and
    wrote.  A run of 7 passes (4 slots: 3 keys a pass) over 20 records (10 keys twice) summed the passes'
    stats, counting the records an earlier pass kept again in every later pass: "kept 85 of 95 records,
    7144 -> 6392 bytes".  The run read the 20 records of the two segments below the active one and kept
    the latest of each key, 10, and their bytes went from the two .log files' sizes to the cleaned one's."""
    path = tmp_path / "logs" / "t-0"
    segments = [[[(k, b"v%d" % k)] for k in range(10)], [[(k, b"w%d" % k)] for k in range(10)], [[(0, b"z")]]]
    _write(path, segments, "none")
    logs = sorted(path.glob("*.log"))
    before = sum(p.stat().st_size for p in logs[:2])
    assert main(["compact", str(path), "--dedupe-buffer-size", str(4 * 24), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    after = sorted(path.glob("*.log"))
    assert len(after) == 2 and after[1] == logs[2]
    assert done["passes"] == 7
    assert (done["records_read"], done["records_kept"]) == (20, 10)
    assert (done["bytes_before"], done["bytes_after"]) == (before, after[0].stat().st_size)
    assert len(_records(path)) == 11       # the 10 kept and the active segment's one


def test_a_dry_run_whose_first_pass_keeps_everything_says_the_map_filled(tmp_path: Path, capsys) -> None:
    """With 3 keys a pass over 10 unique keys, the first pass (all a dry run plans) drops nothing; the real
    run's later passes clean half the log.  The text dry run said "nothing to clean" and the run then
    cleaned: the dry run must say the map filled and the run goes on past it."""
    path = tmp_path / "logs" / "t-0"
    segments = [[[(k, b"v%d" % k)] for k in range(10)], [[(k, b"w%d" % k)] for k in range(10)], [[(0, b"z")]]]
    _write(path, segments, "none")
    assert main(["compact", str(path), "--dedupe-buffer-size", str(4 * 24), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "nothing to clean" not in out and "key map filled" in out
    assert out.splitlines()[-1] == ("compact (dry run): 1 partition would change, 0 unchanged; "
                                    "nothing was changed")
    assert main(["compact", str(path), "--dedupe-buffer-size", str(4 * 24), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["records_kept"] < done["records_read"]


def test_a_dedupe_buffer_over_2_gib_holds_what_2_gib_holds() -> None:
    """Kafka 3.8.0 ``LogCleaner``: ``new SkimpyOffsetMap(memory = math.min(config.dedupeBufferSize /
    config.numThreads, Int.MaxValue).toInt)``: a ``log.cleaner.dedupe.buffer.size`` of 4 GiB gives the
    cleaner 2^31 - 1 bytes, 89478485 slots, so its passes end where a 2 GiB map's do."""
    from segstore_kafka.compaction import cleaner_offset_map

    assert cleaner_offset_map(4 * 2**30).slots == cleaner_offset_map(2**31 - 1).slots == (2**31 - 1) // 24
    assert cleaner_offset_map(4 * 2**30).max_entries == int((2**31 - 1) // 24 * 0.9)
    assert cleaner_offset_map(128 * 2**20).slots == 128 * 2**20 // 24


# -- producer state from the batch headers, column-wise -----------------------------------------------

def _producer_state_model(part: Partition, now_ms: int) -> tuple[dict, int | None]:
    """ProducerStateManager as the log rebuilds it, batch header by batch header: an epoch only grows (a
    newer one forgets the last data offset), a marker closes the open transaction, a producer idle
    producer.id.expiration.ms outside a transaction is not active."""
    entries: dict[int, list] = {}
    for seg in part.segments:
        for h in seg.headers():
            if h.producer_id < 0 or h.last_offset < part.log_start_offset:
                continue
            e = entries.setdefault(h.producer_id, [h.producer_epoch, None, -1, None])
            if h.producer_epoch > e[0]:
                e[0], e[1] = h.producer_epoch, None
            e[2] = h.max_timestamp
            if h.is_control:
                e[3] = None
            else:
                e[1] = h.last_offset
                if h.is_transactional and e[3] is None:
                    e[3] = h.base_offset
    active = {p: (e[1], e[0]) for p, e in entries.items()
              if e[3] is not None or now_ms - e[2] < compaction.PRODUCER_ID_EXPIRATION_MS}
    open_first = [e[3] for e in entries.values() if e[3] is not None]
    return active, min(open_first) if open_first else None


KINDS = st.sampled_from(["data", "txn", "COMMIT", "ABORT", "roll", "plain"])
DAY = 24 * 3600 * 1000
OPS = st.lists(st.tuples(st.integers(0, 2), KINDS, st.sampled_from([0, 0, 0, 1, 2]), st.integers(0, 2 * DAY)),
               max_size=40)


@settings(max_examples=60, deadline=None)
@given(OPS, st.sampled_from([0, DAY // 2, 2 * DAY, 3 * DAY]))
def test_producer_state_equals_the_header_by_header_model(ops: list, now_delta: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        part = Partition(str(Path(tmp) / "t-0"), KafkaConfig.from_mapping({"cleanup.policy": "compact"}),
                         writable=True, clock=lambda: T0)
        epochs: dict[int, int] = {}
        in_txn: set[int] = set()
        for pid, kind, bump, ts in ops:
            epoch = epochs[pid] = epochs.get(pid, 0) + bump
            if kind == "roll":
                if part.log.active.size:
                    part.log.active.on_become_inactive()
                    part.log.roll(part.next_offset).make_appendable()
            elif kind == "plain":
                part.append_records([(b"k", b"v", T0 + ts, [])])
            elif kind in ("COMMIT", "ABORT"):
                part.append_control(kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=0,
                                    timestamp=T0 + ts)
                in_txn.discard(pid)
            elif kind == "data" and pid in in_txn:   # InvalidTxnStateException: refused, as by Kafka
                with pytest.raises(InvalidMessageError):
                    part.append_records([(b"k%d" % pid, b"v", T0 + ts, [])], producer_id=pid,
                                        producer_epoch=epoch, base_sequence=0)
            else:
                part.append_records([(b"k%d" % pid, b"v", T0 + ts, [])] * (1 + bump), producer_id=pid,
                                    producer_epoch=epoch, base_sequence=0, transactional=kind == "txn")
                if kind == "txn":
                    in_txn.add(pid)
        now = T0 + now_delta
        active, open_first = compaction.producer_state(part, now)
        model_active, model_open = _producer_state_model(part, now)
        part.close()
    assert {p: (r.last_data_offset, r.producer_epoch) for p, r in active.items()} == model_active
    assert open_first == model_open
