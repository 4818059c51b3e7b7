"""RocketMQ memory on a multi-GiB store (issue 10, item 4): verify, recover, dump --json and a
conversion to Kafka and back stay within 300 MB of anonymous memory above the interpreter's start,
whatever the store's size.

The store holds :data:`MESSAGES` messages (about 2.1 GB of commitlog at the default 9.5M: 100 B
bodies, a tag and 2 keys each, one topic of 4 queues; 1 GiB commitlog files), written under
``bench-data/`` for the run and deleted afterwards (``BENCH_MEMORY_KEEP=1`` keeps it).  Each
operation runs in a child process of :mod:`.bench_columnar`, which samples ``RssAnon`` from
``/proc/self/status`` every 5 ms (mapped file pages, the commitlog's included, are not
anonymous memory) and reports the peak above its start; the rate, beside the hop loop measured
just before it, is given too.  The conversions (``convert-kafka``: the store into Kafka;
``convert-back``: that Kafka store into RocketMQ again, 4 partitions merged back into one
commitlog) run as the ``segstore`` command runs them (its allocator setting) and write beside the
store; they need as much disk again twice.

Run: ``bash scripts/bench.sh rocketmq_memory`` (``BENCH_MEMORY_MESSAGES`` to change the size; check
``df`` first: the store and a crashed copy of it take twice its size).
"""

from __future__ import annotations

import os
import shutil
import time

from . import bench_columnar as columnar
from .common import Report

MESSAGES = int(os.environ.get("BENCH_MEMORY_MESSAGES", "9500000"))
BUDGET_MB = 300


def main() -> None:
    report = Report("rocketmq_memory")
    t0 = time.perf_counter()
    store = columnar.build_store(MESSAGES, kind="memory")
    size = sum(f.stat().st_size for f in (store / "commitlog").iterdir())
    used = sum(f.stat().st_blocks * 512 for f in (store / "commitlog").iterdir())
    print(f"store of {MESSAGES:,} messages ({used / 2**30:.2f} GiB written, {size / 2**30:.0f} GiB of files) "
          f"ready in {time.perf_counter() - t0:.0f} s: {store}", flush=True)
    try:
        for op in ("verify", "recover", "dump", "convert-kafka", "convert-back"):
            yard = columnar.run_child("hop", store, MESSAGES)
            load = os.getloadavg()[0]
            target = columnar.crashed_copy(store) if op == "recover" else store
            result = columnar.run_child(op, target, MESSAGES)
            if result["count"] != MESSAGES:
                raise SystemExit(f"{op} saw {result['count']} messages, expected {MESSAGES}")
            name = {"dump": "dump --json", "convert-kafka": "convert RocketMQ -> Kafka",
                    "convert-back": "convert Kafka -> RocketMQ"}.get(op, op)
            report.add(f"{name}, {used / 2**30:.1f} GiB store",
                       result["anon_mb"], "MB anonymous", baseline=f"budget (MB); {op} rate (msg/s)",
                       baseline_value=BUDGET_MB, higher_is_better=False,
                       note=f"{MESSAGES / result['seconds']:,.0f} msg/s = "
                            f"{MESSAGES / result['seconds'] / (yard['count'] / yard['seconds']):.2f}x "
                            f"the hop loop; load {load:.1f}",
                       rate=MESSAGES / result["seconds"], load=load, store_gib=used / 2**30)
            shutil.rmtree(store.parent / "crashed", ignore_errors=True)
    finally:
        for sibling in ("crashed", "kafka", "back"):
            shutil.rmtree(store.parent / sibling, ignore_errors=True)
        if not os.environ.get("BENCH_MEMORY_KEEP"):
            shutil.rmtree(store.parent, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
