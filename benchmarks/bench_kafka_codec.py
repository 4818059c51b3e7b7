"""Kafka RecordBatch v2 encode and decode against kafka-python's own codec, same records, same run.

Records as in ANCHORS.md: batches of 100 records, 10-byte keys, 100-byte values.
Decode means what a consumer needs: walk the batches, check the CRC-32C,
decompress, and produce every record's offset, timestamp, key, value and headers.
The ratio is segstore's records/s over kafka-python's.  Also: offset and
timestamp lookups on a partition of 1,000,000 records (median and p99 over 2,000
random targets), against a scan from the log start for the same answers (same
run); the machine's load average is recorded beside them.

Run: ``bash scripts/bench.sh kafka_codec``.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from segstore_kafka import batch as codec

import segstore

from .common import Report, best_of, latencies

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BATCHES = 200
PER_BATCH = 100


def make_records(seed: int = 7) -> list[list[tuple[int, bytes, bytes]]]:
    rng = random.Random(seed)
    words = [rng.randbytes(8).hex().encode() for _ in range(64)]
    out = []
    for b in range(BATCHES):
        recs = []
        for i in range(PER_BATCH):
            value = b"".join(rng.choice(words) for _ in range(7))[:100]   # compressible, like real payloads
            recs.append((1_700_000_000_000 + b * PER_BATCH + i, f"key-{i:06d}".encode(), value))
        out.append(recs)
    return out


def encode_segstore(batches, compression: str) -> list[bytes]:
    out, offset = [], 0
    for recs in batches:
        out.append(codec.encode_batch([(k, v, ts) for ts, k, v in recs], base_offset=offset,
                                      compression=compression))
        offset += len(recs)
    return out


def encode_kafka_python(batches, compression: str) -> list[bytes]:
    out, offset = [], 0
    for recs in batches:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[compression], is_transactional=0,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 30)
        for i, (ts, k, v) in enumerate(recs):
            builder.append(i, timestamp=ts, key=k, value=v, headers=[])
        out.append(bytes(builder.build()))
        offset += len(recs)
    return out


def decode_segstore(buf: bytes) -> int:
    n = 0
    for batch in codec.iter_batches(memoryview(buf), path="<bench>", check_crc=True):
        for r in batch.records():
            n += 1 if r.value is not None else 0
    return n


def decode_kafka_python(parts: list[bytes]) -> int:
    n = 0
    for part in parts:
        batch = DefaultRecordBatch(part)
        batch.validate_crc()
        for r in batch:
            n += 1 if r.value is not None else 0
    return n


def codec_rows(report: Report) -> None:
    batches = make_records()
    total = BATCHES * PER_BATCH
    for compression in CODECS:
        t_enc = best_of(lambda c=compression: encode_segstore(batches, c))
        t_enc_kp = best_of(lambda c=compression: encode_kafka_python(batches, c))
        report.add(f"encode, {compression}", total / t_enc, "rec/s", baseline="kafka-python",
                   baseline_value=total / t_enc_kp)
        ours = encode_segstore(batches, compression)
        buf = b"".join(ours)
        assert decode_segstore(buf) == total
        kp_parts = encode_kafka_python(batches, compression)
        t_dec = best_of(lambda buf=buf: decode_segstore(buf))
        t_dec_kp = best_of(lambda parts=kp_parts: decode_kafka_python(parts))
        report.add(f"decode + CRC, {compression}", total / t_dec, "rec/s", baseline="kafka-python",
                   baseline_value=total / t_dec_kp, note=f"{len(buf) / t_dec / 1e6:.0f} MB/s of batches")


LOOKUP_TARGETS = 2000
SCAN_TARGETS = 5
BASE_TS = 1_700_000_000_000


def build_partition(path: str, records: int) -> None:
    """One 1 GiB segment of ``records`` records, batches of 100, timestamps ``BASE_TS + offset``."""
    with segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 1 << 30,
                                                           "index.interval.bytes": 4096}) as store:
        value = b"v" * 100
        for start in range(0, records, PER_BATCH):
            store.append_batch([{"topic": "bench", "partition": 0, "key": b"key-%06d" % i, "value": value,
                                 "timestamp": BASE_TS + i} for i in range(start, start + PER_BATCH)])


def scan_translate(part, offset: int) -> tuple[int, int]:
    """The batch holding ``offset`` (position, size) by walking every header from the log start."""
    for seg in part.segments:
        for header in seg.headers():
            if header.last_offset >= offset:
                return header.position, header.size
    raise LookupError(offset)


def scan_time(part, timestamp: int) -> int:
    """The first offset with a timestamp at or after ``timestamp``, decoding every record from the start."""
    for batch in part.batches():
        for record in batch.records():
            if record.timestamp >= timestamp:
                return record.offset
    raise LookupError(timestamp)


def scan_read(store, offset: int) -> int:
    """The record at ``offset`` by reading (CRC checks, decoding) every record from the log start."""
    return next(r for r in store.read("bench", 0, 0) if r.offset == offset).offset


def lookup_rows(report: Report, records: int = 1_000_000) -> None:
    """Offset and timestamp lookups through the indexes vs a scan for the same answers, same run.

    ``translate_offset`` is Kafka's ``LogSegment.translateOffset`` (the batch holding
    an offset: its position and size); ``offset_for_time`` is ``offsetsForTimes``;
    ``read`` is the store API's first record at an offset (the batch found, CRC
    checked, decoded).  Every lookup is first run once untimed (page cache and
    index column copies warm, as in the Java figures), then timed per call.
    """
    root = tempfile.mkdtemp(prefix="segstore-bench-")
    try:
        path = os.path.join(root, "bench-0")
        t0 = time.perf_counter()
        build_partition(path, records)
        print(f"built {records} records in {time.perf_counter() - t0:.1f} s", flush=True)
        rng = random.Random(3)
        targets = [rng.randrange(records) for _ in range(LOOKUP_TARGETS)]
        with segstore.open(path, format="kafka") as store:
            part = store.partition_of("bench", 0)

            def translate(t: int) -> tuple[int, int]:
                _seg, found = part.translate_offset(t)
                return found.position, found.size

            def for_time(t: int) -> int | None:
                return store.offset_for_time("bench", 0, BASE_TS + t)

            def read_one(t: int) -> int:
                return next(store.read("bench", 0, t, 1)).offset

            for t in targets:   # warm-up, and every answer checked
                translate(t)
                if for_time(t) != t or read_one(t) != t:
                    raise AssertionError(f"lookup of {t} answered wrong")
            lat_translate = latencies(translate, targets)
            lat_time = latencies(for_time, targets)
            lat_read = latencies(read_one, targets)
            sample = targets[:SCAN_TARGETS]
            for t in sample:
                if scan_translate(part, t) != translate(t) or scan_time(part, BASE_TS + t) != for_time(t):
                    raise AssertionError(f"the scan and the index disagree on {t}")
            scan_t = latencies(lambda t: scan_translate(part, t), sample)
            scan_ts = latencies(lambda t: scan_time(part, BASE_TS + t), sample)
            scan_r = latencies(lambda t: scan_read(store, t), sample)
        load = os.getloadavg()[0]
        report.add("translate_offset (batch position + size of an offset)", lat_translate["median_us"],
                   "us median", baseline="header walk from the log start", baseline_value=scan_t["median_us"],
                   higher_is_better=False, p99_us=lat_translate["p99_us"], load_average=load,
                   note=f"p99 {lat_translate['p99_us']:.1f} us; Java LogSegment.translateOffset 4.45 us; "
                        f"load {load:.1f}")
        report.add("offset_for_time (offsetsForTimes)", lat_time["median_us"], "us median",
                   baseline="record scan from the log start", baseline_value=scan_ts["median_us"],
                   higher_is_better=False, p99_us=lat_time["p99_us"], load_average=load,
                   note=f"p99 {lat_time['p99_us']:.1f} us; Java TimeIndex.lookup 0.19 us + batch scan; "
                        f"load {load:.1f}")
        report.add("read 1 record at an offset (store.read)", lat_read["median_us"], "us median",
                   baseline="read from the log start", baseline_value=scan_r["median_us"],
                   higher_is_better=False, p99_us=lat_read["p99_us"], load_average=load,
                   note=f"p99 {lat_read['p99_us']:.1f} us; decodes the 100-record batch; load {load:.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    report = Report("kafka_codec")
    codec_rows(report)
    lookup_rows(report)
    report.save()


if __name__ == "__main__":
    main()
