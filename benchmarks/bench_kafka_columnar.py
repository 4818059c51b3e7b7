"""Kafka columnar reads (``KafkaStore.scan_arrow``) and ``dump --json`` against kafka-python, same files.

A partition of :data:`RECORDS` records (batches of 100 records, 10-byte keys,
100-byte values, compressible like real payloads) is written once per codec
(none, lz4, zstd) under ``bench-data/kafka_columnar/`` (git-ignored; reused
when present).  Measured on each:

- ``scan_arrow()`` with every column of the schema: batches walked over the
  mapped log, CRC-32C checked, records decoded into Arrow columns;
- the same without ``key``/``value`` (what a zero-copy ``binary_view`` over the
  map could at best save: the copy of the variable columns);
- kafka-python's decode of the same ``.log`` bytes (``MemoryRecords``, CRC
  checked, every record's key and value read), on the first
  :data:`KAFKA_PYTHON_RECORDS` records (it is slow) and scaled to rec/s;
- ``dump --json`` of the partition: the library call into a sink that only
  counts, and the CLI to ``/dev/null`` less the CLI's start-up (``info``); both
  also by CPU time, which a loaded shared machine distorts less than wall time.

The ratio is segstore's rec/s over kafka-python's.  Run:
``bash scripts/bench.sh kafka_columnar`` (``BENCH_KAFKA_RECORDS`` to resize).
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

import segstore
from segstore.columns import KAFKA_SCHEMA

from .common import Report, best_of

RECORDS = int(os.environ.get("BENCH_KAFKA_RECORDS", "1000000"))
PER_BATCH = 100
KEY_SIZE = 10
VALUE_SIZE = 100
KAFKA_PYTHON_RECORDS = min(RECORDS, 100_000)
CODECS = ("none", "lz4", "zstd")
DATA = Path(__file__).resolve().parent.parent / "bench-data" / "kafka_columnar"
BASE_TS = 1_700_000_000_000


def build(codec: str) -> Path:
    """The partition directory for ``codec`` (written once; a marker says it is complete)."""
    path = DATA / f"{codec}-{RECORDS}" / "bench-0"
    done = path.parent / "complete"
    if done.exists():
        return path
    rng = random.Random(5)
    words = [rng.randbytes(8).hex().encode() for _ in range(64)]
    values = [b"".join(rng.choice(words) for _ in range(7))[:VALUE_SIZE] for _ in range(1024)]
    t0 = time.perf_counter()
    with segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 1 << 30}) as store:
        part = store.partition_of("bench", 0, create=True)
        for start in range(0, RECORDS, PER_BATCH):
            part.append_records([(b"key-%06d" % (i % 1_000_000), values[i % 1024], BASE_TS + i)
                                 for i in range(start, start + PER_BATCH)], compression=codec)
    done.write_text("")
    print(f"built {codec}: {RECORDS} records in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def log_bytes(path: Path, records: int) -> bytes:
    """The first ``records`` records' batches of the partition's first segment, as bytes."""
    data = (path / f"{0:020d}.log").read_bytes()
    pos = 0
    for _ in range(records // PER_BATCH):
        pos += int.from_bytes(data[pos + 8:pos + 12], "big") + 12
    return data[:pos]


def kafka_python_decode(buf: bytes) -> int:
    n = 0
    records = MemoryRecords(buf)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise AssertionError("kafka-python found a bad CRC")
        for r in batch:
            n += 1 if r.key is not None and r.value is not None else 0
    return n


def scan(path: Path, columns=None) -> int:
    with segstore.open(path, format="kafka") as store:
        return sum(batch.num_rows for batch in store.scan_arrow(columns))


def dump_json(path: Path) -> int:
    with segstore.open(path, format="kafka") as store:
        return sum(len(block) for block in store.dump_json())


def cli_seconds(*args: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one CLI run, its output thrown away."""
    env = dict(os.environ)
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "formats"), env.get("PYTHONPATH", "")])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(os.devnull, "w") as null:
        subprocess.run([sys.executable, "-m", "segstore.cli", *args], stdout=null, check=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    report = Report("kafka_columnar")
    all_columns = None
    fixed_only = [name for name in KAFKA_SCHEMA.names if name not in ("key", "value")]
    for codec in CODECS:
        path = build(codec)
        if scan(path) != RECORDS:
            raise AssertionError("scan_arrow lost records")
        subset = log_bytes(path, KAFKA_PYTHON_RECORDS)
        if kafka_python_decode(subset) != KAFKA_PYTHON_RECORDS:
            raise AssertionError("kafka-python read other records")
        t_kp = best_of(lambda s=subset: kafka_python_decode(s), repeat=3)
        kp_rate = KAFKA_PYTHON_RECORDS / t_kp
        size = sum(f.stat().st_size for f in path.glob("*.log"))
        t_scan = best_of(lambda p=path: scan(p, all_columns), repeat=5)
        load = os.getloadavg()[0]
        report.add(f"scan_arrow, {codec}, all columns", RECORDS / t_scan, "rec/s", baseline="kafka-python",
                   baseline_value=kp_rate, load_average=load,
                   note=f"{size / t_scan / 1e6:,.0f} MB/s of log; kafka-python on {KAFKA_PYTHON_RECORDS:,} "
                        f"records; load {load:.1f}")
        t_fixed = best_of(lambda p=path: scan(p, fixed_only), repeat=5)
        report.add(f"scan_arrow, {codec}, no key/value", RECORDS / t_fixed, "rec/s", baseline="kafka-python",
                   baseline_value=kp_rate, note="bounds what a binary_view over the map could save")
    path = build("none")
    t_dump = best_of(lambda: dump_json(path), repeat=3)
    cpu0 = time.process_time()
    dump_json(path)
    cpu_dump = time.process_time() - cpu0
    load = os.getloadavg()[0]
    report.add("dump --json (library), none", RECORDS / t_dump, "rec/s", baseline="goal",
               baseline_value=500_000, load_average=load,
               note=f"CPU time alone: {RECORDS / cpu_dump:,.0f} rec/s; load {load:.1f}")
    info = min(cli_seconds("info", str(path)) for _ in range(3))
    cli = min(cli_seconds("dump", str(path), "--json") for _ in range(2))
    report.add("dump --json (CLI, less start-up), none", RECORDS / (cli[0] - info[0]), "rec/s",
               baseline="goal", baseline_value=500_000,
               note=f"CLI {cli[0]:.2f} s, info {info[0]:.2f} s wall; by CPU time "
                    f"{RECORDS / (cli[1] - info[1]):,.0f} rec/s; load {load:.1f}")
    report.save()


if __name__ == "__main__":
    main()
