"""Kafka RecordBatch v2 encode and decode against kafka-python's own codec, same records, same run.

Records as in ANCHORS.md: batches of 100 records, 10-byte keys, 100-byte values.
Decode means what a consumer needs: walk the batches, check the CRC-32C,
decompress, and produce every record's offset, timestamp, key, value and headers.
The ratio is segstore's records/s over kafka-python's.  Also: offset and
timestamp lookups on a partition of 1,000,000 records (median and p99), against
a full scan for the same answer.

Run: ``bash scripts/bench.sh kafka_codec``.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import segstore
from segstore_kafka import batch as codec

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


def lookup_rows(report: Report, records: int = 1_000_000) -> None:
    root = tempfile.mkdtemp(prefix="segstore-bench-")
    try:
        path = os.path.join(root, "bench-0")
        t0 = time.perf_counter()
        with segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 1 << 30,
                                                               "index.interval.bytes": 4096}) as store:
            value = b"v" * 100
            for start in range(0, records, PER_BATCH):
                store.append_batch([{"topic": "bench", "partition": 0, "key": b"key-%06d" % i, "value": value,
                                     "timestamp": 1_700_000_000_000 + i}
                                    for i in range(start, start + PER_BATCH)])
        print(f"built {records} records in {time.perf_counter() - t0:.1f} s", flush=True)
        rng = random.Random(3)
        targets = [rng.randrange(records) for _ in range(2000)]
        with segstore.open(path, format="kafka") as store:
            off = latencies(lambda t: next(store.read("bench", 0, t, 1)), targets)
            ts = latencies(lambda t: store.offset_for_time("bench", 0, 1_700_000_000_000 + t), targets)
            sample = targets[:3]
            t_scan = best_of(lambda: [next(r for r in store.read("bench", 0, 0) if r.offset == t) for t in sample],
                             repeat=1, warmup=0) / len(sample)
        report.add("offset lookup (read 1 record at offset)", off["median_us"], "us median",
                   baseline="scan to the offset", baseline_value=t_scan * 1e6, higher_is_better=False,
                   note=f"p99 {off['p99_us']:.1f} us; Java translateOffset 4.45 us")
        report.add("timestamp lookup (offsetsForTimes)", ts["median_us"], "us median",
                   baseline="scan to the offset", baseline_value=t_scan * 1e6, higher_is_better=False,
                   note=f"p99 {ts['p99_us']:.1f} us; Java TimeIndex.lookup 0.19 us + scan")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    report = Report("kafka_codec")
    codec_rows(report)
    lookup_rows(report)
    report.save()


if __name__ == "__main__":
    main()
