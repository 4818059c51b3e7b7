"""The Spark writer (``df.write.format("segstore")``) against a columnar append of the same rows in one
process (issue 30: Spark writer, 1M rows, >= 0.5x ``append_arrow``).

Rows as ``bench_kafka_append``'s: 9-byte keys, 100-byte values, a timestamp, over
:data:`PARTITIONS` partitions of one topic, written once as Parquet (one file per
:data:`FILES`); Spark reads that Parquet and appends it to an empty store
(``local[--cores]``: read, stage an Arrow file per task, commit), and the baseline opens an
empty store in this process and appends the same rows, read from the same Parquet, whole.
Both of the source's writers are timed: the JVM side's (the default: each task turns its rows
into Arrow in its JVM and writes its file) and PySpark's Python data source's
(``.option("writer", "python")``: the rows go to a Python worker per task as Arrow batches);
the commit is the same Python append for both.


- Kafka: ``KafkaStore.append_arrow`` of the table (goal: Spark >= 0.5x of it);
- RocketMQ: ``append_batch`` of the rows as dicts, 1,000 a call (its ``append_arrow`` takes a
  stored message's columns, not a producer's: a row of context, no goal).

Each figure is wall-clock seconds (the best of ``--repeat`` after one warm-up write, which
starts the JVM's and Python workers' code paths), the Parquet read included on both sides.
Spark's Python workers run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` dropped), as an
installed package's would. Not run by the tests.

Run: ``bash scripts/bench.sh spark_write`` or ``python -m benchmarks.bench_spark_write --rows 50000``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import segstore

from .common import Report

PARTITIONS = 8
FILES = 8
BODY = 100
TOPIC = "BenchTopic"
GOAL = 0.5


def write_parquet(path: str, rows: int) -> None:
    """``rows`` rows of (topic, partition, key, value, timestamp) in :data:`FILES` Parquet files."""
    os.makedirs(path)
    value = os.urandom(BODY)
    per_file = -(-rows // FILES)
    for f in range(FILES):
        lo, hi = f * per_file, min(rows, (f + 1) * per_file)
        if lo >= hi:
            break
        ids = range(lo, hi)
        pq.write_table(pa.table({
            "topic": pa.array([TOPIC] * (hi - lo), pa.string()),
            "partition": pa.array([i % PARTITIONS for i in ids], pa.int32()),
            "key": pa.array([f"k{i:08d}".encode() for i in ids], pa.binary()),
            "value": pa.array([value] * (hi - lo), pa.binary()),
            "timestamp": pa.array([1_700_000_000_000 + i for i in ids], pa.timestamp("ms", tz="UTC")),
        }), os.path.join(path, f"part-{f:03d}.parquet"), compression="none")


def spark_write(spark: Any, parquet: str, target: str, format_name: str, writer: str) -> float:
    t0 = time.perf_counter()
    (spark.read.parquet(parquet).write.format("segstore").option("writer", writer)
     .option("format", format_name).mode("append").save(target))
    return time.perf_counter() - t0


def in_process(parquet: str, target: str, format_name: str) -> float:
    t0 = time.perf_counter()
    table = pq.read_table(parquet)
    with segstore.open(target, format=format_name, mode="a") as store:
        if format_name == "kafka":
            store.append_arrow(table)
        else:
            rows = table.to_pylist()
            for at in range(0, len(rows), 1000):
                store.append_batch([{"topic": r["topic"], "queue_id": r["partition"], "body": r["value"],
                                     "keys": [r["key"].decode()]} for r in rows[at:at + 1000]])
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--formats", default="kafka,rocketmq")
    args = parser.parse_args()

    from segstore.spark import local_session

    # Spark's Python workers (each task's and the driver's for the writer and its commit) inherit
    # this environment: as an installed package, segstore has its bytecode compiled, so drop
    # PYTHONDONTWRITEBYTECODE, which would have every worker compile the ~45 modules it loads from source
    # (+0.15 s of CPU each) while the in-process baseline imported them once, before its clock
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    spark = local_session("segstore-bench-write", cores=args.cores)
    report = Report("spark_write")
    root = tempfile.mkdtemp(prefix="segstore-bench-spark-write-")
    try:
        parquet = os.path.join(root, "rows.parquet")
        write_parquet(parquet, args.rows)
        for format_name in args.formats.split(","):
            times: dict[str, list[float]] = {"jvm": [], "python": [], "local": []}
            for attempt in range(args.repeat + 1):      # the first: warm-up, not counted
                for side in times:
                    target = os.path.join(root, f"{format_name}_{side}_{attempt}")   # not TOPIC-N
                    took = (in_process(parquet, target, format_name) if side == "local"
                            else spark_write(spark, parquet, target, format_name, side))
                    if attempt:
                        times[side].append(took)
                    shutil.rmtree(target, ignore_errors=True)
            t_local = min(times["local"])
            baseline = ("append_arrow, one process" if format_name == "kafka"
                        else "append_batch(1000) of dicts, one process")
            for writer, label in (("jvm", ""), ("python", " (writer=python)")):
                rate = args.rows / min(times[writer])
                report.add(f"Spark writer{label}, {format_name}, {args.rows:,} rows", rate,
                           "rows/s", baseline=baseline, baseline_value=args.rows / t_local,
                           note=f"local[{args.cores}], {FILES} Parquet files in, {PARTITIONS} partitions, "
                                f"100 B values; Parquet read on both sides; best of {args.repeat}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    report.save()


if __name__ == "__main__":
    main()
