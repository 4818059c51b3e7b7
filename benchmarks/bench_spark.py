"""Spark read throughput against the library's single-process scan, same store, same run.

For each format, a store of ``--messages`` (default 1,000,000) messages with
100-byte values over 8 partitions is written with the library.  Then:

- baseline: one Python process reads ``store.scan_arrow(columns)`` -- the
  columnar scan of every message, building the columns Spark's schema has (headers
  included) -- what a user without Spark does;
- Spark: ``spark.read.format("segstore").load(path)`` on ``local[cores]``,
  materialised with the ``noop`` sink (every column built, nothing kept).  Its
  tasks read the same ``scan_arrow`` batches per slice and hand them to Spark.

The ratio is Spark's rate over the scan's.  Spark adds the cast to its Arrow
types, the Arrow transfer to the JVM and the conversion to its rows, and gains
one Python worker per core; the goal is >= 1.2 on 2 cores.  Not run by the tests.

Run: ``bash scripts/bench.sh spark`` or ``python -m benchmarks.bench_spark --messages 200000``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import segstore

from .common import Report

PARTITIONS = 8
BODY = 100
BATCH = 2_000


def build(path: str, format_name: str, count: int) -> None:
    """Write ``count`` messages round-robin over the partitions, in batches."""
    value = os.urandom(BODY)
    with segstore.open(path, format=format_name, mode="a") as store:
        for start in range(0, count, BATCH):
            store.append_batch([segstore.Message(topic="bench", value=value, key=f"k{i}".encode(),
                                                 partition=i % PARTITIONS, timestamp=1_700_000_000_000 + i)
                                for i in range(start, min(start + BATCH, count))])


def library_scan(path: str) -> tuple[float, int]:
    """The single-process columnar scan of the columns Spark reads."""
    from segstore.spark.schema import spark_schema

    t0 = time.perf_counter()
    with segstore.open(path) as store:
        columns = spark_schema(store.format).fieldNames()
        n = sum(batch.num_rows for batch in store.scan_arrow(columns))
    return time.perf_counter() - t0, n


def spark_read(spark, path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    # every column built, headers included (includeHeaders is off by default, as in Kafka's connector)
    df = spark.read.format("segstore").option("includeHeaders", "true").load(path)
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - t0
    return elapsed, df.count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--formats", default="rocketmq,kafka")
    args = parser.parse_args()

    from segstore.spark import local_session

    spark = local_session("segstore-bench", cores=args.cores)
    report = Report("spark")
    root = tempfile.mkdtemp(prefix="segstore-bench-spark-")
    try:
        for format_name in args.formats.split(","):
            path = os.path.join(root, format_name)
            t0 = time.perf_counter()
            build(path, format_name, args.messages)
            print(f"{format_name}: wrote {args.messages:,} messages in {time.perf_counter() - t0:.1f} s",
                  flush=True)
            spark_read(spark, path)                      # warm the Python workers and the page cache
            scan_s, scanned = library_scan(path)
            spark_s, read = spark_read(spark, path)
            if scanned != args.messages or read != args.messages:
                raise SystemExit(f"expected {args.messages} records, scan found {scanned}, Spark {read}")
            report.add(f"{format_name}: Spark read, {args.messages:,} msgs, local[{args.cores}]",
                       args.messages / spark_s, "msg/s", baseline="library scan_arrow, 1 process",
                       baseline_value=args.messages / scan_s,
                       note=f"Spark {spark_s:.1f} s, scan_arrow {scan_s:.1f} s")
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    report.save()


if __name__ == "__main__":
    main()
