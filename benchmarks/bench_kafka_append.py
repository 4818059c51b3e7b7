"""Kafka appends: ``append_batch`` of dicts and ``append_arrow`` of columns, against the builders.

:data:`RECORDS` records (topic, partition 0, a 9-byte key, a 100-byte value,
compressible like real payloads, a timestamp), built once before timing:

- ``append_batch`` of 1,000 dicts a call into a new partition (open, the appends,
  close), codec none, against kafka-python's ``DefaultRecordBatchBuilder`` on the
  same records in batches of 1,000 (append + build, same run; it writes no file).
  Also the same with the C accelerators off (``SEGSTORE_PURE_PYTHON=1``, in a
  subprocess, on :data:`PURE_RECORDS` records), as for ``append_arrow, none``.
  Goals: >= 1M rec/s and >= 3x the builder.
- ``append_arrow`` of the same records as one Arrow table (chunks of 100,000
  rows), none / lz4 / zstd, against the builder of the same codec, same run; the
  goal is Java's ``MemoryRecordsBuilder`` (``../shared/ANCHORS.md``, batches of
  100 records: it builds, it writes no file), which ``report.py`` holds it to.

Run: ``bash scripts/bench.sh kafka_append`` (``BENCH_KAFKA_APPEND_RECORDS`` to resize).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
from kafka.record.default_records import DefaultRecordBatchBuilder

import segstore

from .common import Report, best_of

RECORDS = int(os.environ.get("BENCH_KAFKA_APPEND_RECORDS", "500000"))
PURE_RECORDS = min(RECORDS, 50_000)
PER_CALL = 1000
TABLE_CHUNK = 100_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000
CONFIG = {"segment.bytes": 1 << 30}


def make_dicts(n: int, seed: int = 11) -> list[dict]:
    rng = random.Random(seed)
    words = [rng.randbytes(8).hex().encode() for _ in range(64)]
    values = [b"".join(rng.choice(words) for _ in range(7))[:100] for _ in range(1024)]
    return [{"topic": "bench", "partition": 0, "key": b"k%08d" % i, "value": values[i % 1024],
             "timestamp": BASE_TS + i} for i in range(n)]


def to_table(dicts: list[dict]) -> pa.Table:
    table = pa.table({"topic": [d["topic"] for d in dicts],
                      "partition": pa.array([d["partition"] for d in dicts], pa.int32()),
                      "key": [d["key"] for d in dicts], "value": [d["value"] for d in dicts],
                      "timestamp": pa.array([d["timestamp"] for d in dicts], pa.timestamp("ms", tz="UTC"))})
    return pa.Table.from_batches(table.to_batches(max_chunksize=TABLE_CHUNK))


class Target:
    """A new store directory for each timed run."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="bench-kafka-append-")
        self.path = os.path.join(self.root, "bench-0")

    def reset(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def append_dicts(self, dicts: list[dict], **config) -> None:
        with segstore.open(self.path, format="kafka", mode="a", **CONFIG, **config) as store:
            for start in range(0, len(dicts), PER_CALL):
                store.append_batch(dicts[start:start + PER_CALL])

    def append_arrow(self, table: pa.Table, compression: str) -> None:
        with segstore.open(self.path, format="kafka", mode="a", **CONFIG,
                           **{"compression.type": compression}) as store:
            store.append_arrow(table)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def kafka_python(dicts: list[dict], compression: str) -> int:
    size = 0
    for start in range(0, len(dicts), PER_CALL):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[compression], is_transactional=0,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 30)
        for i, d in enumerate(dicts[start:start + PER_CALL]):
            builder.append(i, timestamp=d["timestamp"], key=d["key"], value=d["value"], headers=[])
        size += len(builder.build())
    return size


def pure_rate(what: str) -> float:
    """``measure_<what>`` rec/s with the C accelerators off (run in a subprocess that sets the switch)."""
    code = (f"from benchmarks.bench_kafka_append import measure_{what}; "
            f"print(measure_{what}({PURE_RECORDS}))")
    env = {**os.environ, "SEGSTORE_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return float(out.stdout.split()[-1])


def measure_dicts(n: int) -> float:
    dicts = make_dicts(n)
    target = Target()
    try:
        return n / best_of(lambda: target.append_dicts(dicts), setup=target.reset)
    finally:
        target.close()


def measure_arrow(n: int) -> float:
    table = to_table(make_dicts(n))
    target = Target()
    try:
        return n / best_of(lambda: target.append_arrow(table, "none"), setup=target.reset)
    finally:
        target.close()


def main() -> None:
    report = Report("kafka_append")
    dicts = make_dicts(RECORDS)
    table = to_table(dicts)
    target = Target()
    try:
        t_kp = best_of(lambda: kafka_python(dicts, "none"))
        t_ours = best_of(lambda: target.append_dicts(dicts), setup=target.reset)
        report.add("append_batch(1000) of dicts, none", RECORDS / t_ours, "rec/s",
                   baseline="kafka-python DefaultRecordBatchBuilder", baseline_value=RECORDS / t_kp,
                   note=f"{RECORDS:,} records, 9 B keys, 100 B values; open + appends + close")
        t0 = time.perf_counter()
        rate = pure_rate("dicts")
        report.add("append_batch(1000) of dicts, none, pure Python", rate, "rec/s",
                   baseline="the C path, same run", baseline_value=RECORDS / t_ours,
                   note=f"SEGSTORE_PURE_PYTHON=1, {PURE_RECORDS:,} records "
                        f"({time.perf_counter() - t0:.0f} s)")
        for compression in ("none", "lz4", "zstd"):
            t_kp = best_of(lambda c=compression: kafka_python(dicts, c))
            t_arrow = best_of(lambda c=compression: target.append_arrow(table, c), setup=target.reset)
            report.add(f"append_arrow, {compression}", RECORDS / t_arrow, "rec/s",
                       baseline="kafka-python DefaultRecordBatchBuilder", baseline_value=RECORDS / t_kp,
                       note=f"one {RECORDS:,}-row table in {TABLE_CHUNK:,}-row chunks; open + append + close")
            if compression == "none":
                t0 = time.perf_counter()
                rate = pure_rate("arrow")
                report.add("append_arrow, none, pure Python", rate, "rec/s", baseline="the C path, same run",
                           baseline_value=RECORDS / t_arrow,
                           note=f"SEGSTORE_PURE_PYTHON=1, {PURE_RECORDS:,} records "
                                f"({time.perf_counter() - t0:.0f} s)")
    finally:
        target.close()
    report.save()


if __name__ == "__main__":
    main()
