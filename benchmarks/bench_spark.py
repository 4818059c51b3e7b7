"""Spark read throughput against the library's single-process scan, same store, same run.

For each format, a store of ``--messages`` (default 1,000,000) messages with
100-byte values over 8 partitions is written with the library.  "Read" is one
query that must touch every row: the row count and the sum of the value lengths.

- Spark: ``spark.read.format("segstore").load(path)`` on ``local[cores]`` (the
  default columns, as a user loads it), then
  ``df.agg(count(*), sum(length(value))).collect()``.  Spark cannot prune the
  columns of a Python data source (PySpark 4.3 has no column pruning for them), so
  its tasks build every column of the schema, hand them to the JVM as Arrow
  batches and the JVM turns each row into an ``UnsafeRow``.
- baseline, same work: one Python process runs ``store.scan_arrow`` over the same
  columns and computes the same count and sum with Arrow compute.
- baseline, value only: the same process reading only the ``value`` column (what a
  user without Spark would do for this query); reported, not the target's ratio.
- Spark's floor: the same query on a 16-message store of the format, i.e. what a
  query costs Spark before it reads anything (job scheduling, the planner's Python
  worker, task launch, the Python workers' per-task setup).

Every measurement is the median of ``--repeat`` runs after one warm-up run (JVM
JIT, Python workers started and their imports done, page cache filled).  Wall and
CPU seconds are both reported, with the 1-minute load average: the CPU seconds of
Spark are those of the whole process tree (driver, JVM, Python workers), the
scan's those of its process; on a shared machine CPU time is the steadier figure.
The goal is a Spark/baseline ratio >= 1.2 on 2 cores.  Not run by the tests.

Run: ``bash scripts/bench.sh spark`` or ``python -m benchmarks.bench_spark --messages 200000``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import segstore

from .common import Report

PARTITIONS = 8
BODY = 100
BATCH = 2_000
FLOOR_MESSAGES = 16


def build(path: str, format_name: str, count: int) -> None:
    """Write ``count`` messages round-robin over the partitions, in batches."""
    value = os.urandom(BODY)
    with segstore.open(path, format=format_name, mode="a") as store:
        for start in range(0, count, BATCH):
            store.append_batch([segstore.Message(topic="bench", value=value, key=f"k{i}".encode(),
                                                 partition=i % PARTITIONS, timestamp=1_700_000_000_000 + i)
                                for i in range(start, min(start + BATCH, count))])


def tree_cpu_seconds(root: int | None = None) -> float:
    """User + system CPU seconds of a process and all its descendants (reaped ones included),
    from ``/proc``: the driver, Spark's JVM and its Python workers."""
    root = root or os.getpid()
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue            # exited meanwhile
        fields = stat[stat.rfind(")") + 2:].split()
        # fields[1] is the parent pid; [11:15] utime, stime, cutime, cstime
        children.setdefault(int(fields[1]), []).append(int(name))
        times[int(name)] = sum(int(x) for x in fields[11:15])
    total, stack = times.get(root, 0), [root]
    while stack:
        for child in children.get(stack.pop(), []):
            total += times.get(child, 0)
            stack.append(child)
    return total / tick


def process_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(fn: Callable[[], Any], repeat: int, cpu: Callable[[], float]) -> tuple[float, float, Any]:
    """Median wall and CPU seconds of ``repeat`` runs of ``fn`` after one warm-up run, and its result."""
    result = fn()
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = cpu(), time.perf_counter()
        got = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu() - c0)
        if got != result:
            raise SystemExit(f"runs disagree: {result} then {got}")
    return statistics.median(walls), statistics.median(cpus), result


def scan_query(path: str, columns: list[str]) -> tuple[int, int]:
    """The query in one process: rows and the sum of value lengths over ``scan_arrow(columns)``."""
    import pyarrow.compute as pc

    rows = total = 0
    with segstore.open(path) as store:
        for batch in store.scan_arrow(columns):
            rows += batch.num_rows
            total += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
    return rows, total


def spark_query(spark: Any, path: str) -> tuple[int, int]:
    from pyspark.sql import functions as F

    df = spark.read.format("segstore").load(path)
    row = df.agg(F.count("*"), F.sum(F.length("value"))).collect()[0]
    return int(row[0]), int(row[1] or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--formats", default="rocketmq,kafka")
    args = parser.parse_args()

    from segstore.spark import local_session
    from segstore.spark.schema import spark_schema

    spark = local_session("segstore-bench", cores=args.cores)
    report = Report("spark")
    root = tempfile.mkdtemp(prefix="segstore-bench-spark-")
    try:
        for format_name in args.formats.split(","):
            path = os.path.join(root, format_name)
            small = os.path.join(root, f"{format_name}-small")
            t0 = time.perf_counter()
            build(path, format_name, args.messages)
            build(small, format_name, FLOOR_MESSAGES)
            print(f"{format_name}: wrote {args.messages:,} messages in {time.perf_counter() - t0:.1f} s",
                  flush=True)
            columns = spark_schema(format_name, include_headers=False).fieldNames()   # what load() reads
            expected = (args.messages, args.messages * BODY)
            scan_s, scan_cpu, got_scan = measure(partial(scan_query, path, columns), args.repeat,
                                                 process_cpu_seconds)
            value_s, value_cpu, got_value = measure(partial(scan_query, path, ["value"]), args.repeat,
                                                    process_cpu_seconds)
            floor_s, floor_cpu, _ = measure(partial(spark_query, spark, small), args.repeat, tree_cpu_seconds)
            spark_s, spark_cpu, got_spark = measure(partial(spark_query, spark, path), args.repeat,
                                                    tree_cpu_seconds)
            if not got_scan == got_value == got_spark == expected:
                raise SystemExit(f"expected {expected}, scan {got_scan}, value scan {got_value}, "
                                 f"Spark {got_spark}")
            load = os.getloadavg()[0]
            parts = spark.read.format("segstore").load(path).rdd.getNumPartitions()
            label = f"{format_name}: count + sum(length(value)), {args.messages:,} msgs"
            report.add(f"{label}, Spark local[{args.cores}]", args.messages / spark_s, "msg/s",
                       baseline=f"scan_arrow of the {len(columns)} columns, 1 process",
                       baseline_value=args.messages / scan_s,
                       note=(f"wall Spark {spark_s:.2f} s / scan {scan_s:.2f} s; CPU Spark {spark_cpu:.2f} s "
                             f"/ scan {scan_cpu:.2f} s; {parts} input partitions; load {load:.1f}"),
                       spark_s=spark_s, spark_cpu_s=spark_cpu, scan_s=scan_s, scan_cpu_s=scan_cpu,
                       partitions=parts, load=load)
            report.add(f"{label}, Spark local[{args.cores}]", args.messages / spark_s, "msg/s",
                       baseline="scan_arrow of value only, 1 process", baseline_value=args.messages / value_s,
                       note=f"wall value scan {value_s:.2f} s, CPU {value_cpu:.2f} s",
                       value_scan_s=value_s, value_scan_cpu_s=value_cpu)
            report.add(f"{format_name}: the same query on {FLOOR_MESSAGES} msgs, Spark local[{args.cores}] "
                       f"(the fixed cost of a query)", floor_s, "s",
                       note=f"CPU {floor_cpu:.2f} s; the whole {args.messages:,}-message scan takes "
                            f"{scan_s:.2f} s", floor_s=floor_s, floor_cpu_s=floor_cpu)
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    report.save()


if __name__ == "__main__":
    main()
