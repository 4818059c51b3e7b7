"""RocketMQ reads planned as commitlog byte ranges (log order) give the rows of the queues' own reads.

An interleaved store of three topics of four queues over 8 KiB commitlog files, read with both
readers and partitions of a few KiB (so the byte ranges cut through messages and across file rolls),
unfiltered and filtered on queue id, offset and store time; every row, column for column, must be
the library's read of each queue through its consume queue.  The planner's choice is checked too:
log order for most of the log, the per-queue plan for a small part of it.
"""

from __future__ import annotations

import json
import time
from datetime import timezone

import pytest
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In
from spark_support import library_rows, reader, sort_rows, source, spark, spark_rows  # noqa: F401

import segstore
from segstore.spark import planning
from segstore.spark.options import parse_read_options

pytestmark = pytest.mark.spark

CONFIG = {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 20 * 16}


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    """240 messages round-robin over T0..T2 x queues 0..3, in six appends a few ms apart (store times)."""
    path = tmp_path_factory.mktemp("log-order") / "store"
    with segstore.open(str(path), format="rocketmq", mode="a", **CONFIG) as store:
        for batch in range(6):
            store.append_batch([segstore.Message(topic=f"T{i % 3}", partition=i // 3 % 4,
                                                 key=f"k{i}".encode(), value=bytes(range(i % 97)),
                                                 headers=[("h", b"%d" % i)])
                                for i in range(40 * batch, 40 * batch + 40)])
            time.sleep(0.005)
    return path


def _plan(path, options, filters) -> planning.Plan:
    """The plan of a read with these options and pushed filters."""
    opts = parse_read_options({"path": str(path), **options})
    pruning, _ = planning.pushdown(filters, time_column="storeTimestamp")
    with segstore.open(str(path), **CONFIG) as store:
        ranges = planning.resolve_ranges(store, opts, pruning)
        return planning.plan_read(store, ranges, max_bytes=opts.max_bytes_per_partition,
                                  min_partitions=opts.min_partitions or 1)


def _place(row) -> tuple:
    return row["topic"], row["partition"], row["offset"]


def test_log_order_reads_give_the_queues_rows(spark, reader, interleaved):  # noqa: F811
    rows = library_rows(interleaved, CONFIG)
    stamps = sorted({r["storeTimestamp"] for r in rows})
    assert len(stamps) >= 3 and len({r["topic"] for r in rows}) == 3
    cut_time = stamps[len(stamps) // 2]
    when = cut_time.replace(tzinfo=timezone.utc)
    sql_when = when.isoformat(sep=" ").replace("+00:00", "")
    options = {"config": json.dumps(CONFIG), "includeHeaders": "true", "maxBytesPerPartition": "6000",
               "minPartitions": "1"}
    frame = source(spark, reader)
    for name, value in options.items():
        frame = frame.option(name, value)
    df = frame.load(str(interleaved))
    # the planner: log order for most of the log, cut into several byte ranges; queues for a small part
    queries = [
        ("partition IN (1, 2, 3)", lambda r: r["partition"] in (1, 2, 3), [In(("partition",), (1, 2, 3))]),
        ("offset >= 7", lambda r: r["offset"] >= 7, [GreaterThanOrEqual(("offset",), 7)]),
        (f"storeTimestamp >= TIMESTAMP '{sql_when}'", lambda r: r["storeTimestamp"] >= cut_time,
         [GreaterThanOrEqual(("storeTimestamp",), when)]),
    ]
    for _, _, pushed in [("", None, []), *queries]:
        plan = _plan(interleaved, options, pushed)
        assert plan.order == planning.ORDER_LOG and len(plan.partitions) >= 3
    small = _plan(interleaved, options, [EqualTo(("topic",), "T1"), EqualTo(("partition",), 2)])
    assert small.order == planning.ORDER_QUEUE
    # every row, column for column, as the queues' own reads give them
    assert spark_rows(df) == sort_rows(rows)
    # the filtered reads in one job (each scan pushes its own filters)
    union = None
    for k, (condition, _, _) in enumerate(queries):
        part = df.where(condition).selectExpr(f"{k} AS query", "topic", "partition", "offset")
        union = part if union is None else union.unionAll(part)
    got = sorted((r["query"], *_place(r)) for r in union.collect())
    assert got == sorted((k, *_place(r)) for k, (_, keep, _) in enumerate(queries) for r in rows if keep(r))
