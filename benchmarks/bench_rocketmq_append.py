"""RocketMQ appends: single and batch, 100 B and 1 KiB bodies, against a raw file write.

Messages as in ANCHORS.md: one topic, 4 queues, a tag and 2 keys each, so each
append also writes a consume-queue entry and 2 index entries (3 with UNIQ_KEY
absent: 2).  The baseline writes the same number of bytes, in the same
granularity (one ``write`` per message for single appends, one per batch for
batch appends), straight to a file in the same run; the ratio is segstore's
rate over the raw rate.  The Java store's figures (ANCHORS.md) are printed
beside ours.  The single append and the batch of 32 are measured twice: as stores do
them (one C call, ``_speedups.Appender``) and through the general path they replaced
(the batch encoder and the store's Python writes; for a batch of one), the second
row's note giving the first's speedup.
``append_arrow`` appends the ``scan_arrow`` table of a store holding the same
messages to an empty store (the scan not timed); its baseline writes the same
bytes in one ``write`` per 64 Ki rows.

Run: ``bash scripts/bench.sh rocketmq_append`` (``BENCH_APPEND_SCALE=0.05`` for a
quick check at a twentieth of the messages).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc

import segstore

from .common import Report, best_of

JAVA = {  # ANCHORS.md, msg/s, put returns (async flush), consume queue and index caught up
    ("single", 100): 519_000, ("single", 1024): 309_000,
    ("batch32", 100): 685_000, ("batch32", 1024): 245_000,
    ("append_arrow", 100): 685_000, ("append_arrow", 1024): 245_000,   # vs putMessages(32)
}
SCALE = float(os.environ.get("BENCH_APPEND_SCALE", "1"))
COUNT = {100: max(1000, int(100_000 * SCALE)), 1024: max(1000, int(50_000 * SCALE))}


def messages(n: int, body_size: int) -> list[dict]:
    body = os.urandom(body_size)
    return [{"topic": "BenchTopic", "queue_id": i & 3, "body": body, "tags": "TagA",
             "keys": [f"k{i}", f"order-{i % 5000}"], "born_timestamp": 1_700_000_000_000 + i}
            for i in range(n)]


def run_store(msgs: list[dict], batch: int, root: str, *, general: bool = False) -> tuple[float, int]:
    """``general``: appends through the general path (the C single and batch appends switched off)."""
    path = tempfile.mkdtemp(dir=root)
    t0 = time.perf_counter()
    total = 0
    with segstore.open(path, format="rocketmq", mode="a") as store:
        if general:
            store._append_one = store._append_many = None
        if batch == 1:
            for m in msgs:
                total += store.append(m).size
        else:
            for i in range(0, len(msgs), batch):
                total += sum(r.size for r in store.append_batch(msgs[i:i + batch]))
    elapsed = time.perf_counter() - t0
    shutil.rmtree(path)
    return elapsed, total


def run_arrow(msgs: list[dict], root: str) -> tuple[float, int]:
    """``append_arrow`` of the scan of a store holding ``msgs`` into an empty store (the scan not timed)."""
    source = tempfile.mkdtemp(dir=root)
    with segstore.open(source, format="rocketmq", mode="a") as store:
        for i in range(0, len(msgs), 1000):
            store.append_batch(msgs[i:i + 1000])
    with segstore.open(source, format="rocketmq") as store:
        table = pa.Table.from_batches(list(store.scan_arrow()))
    shutil.rmtree(source)
    path = tempfile.mkdtemp(dir=root)
    t0 = time.perf_counter()
    with segstore.open(path, format="rocketmq", mode="a") as store:
        store.append_arrow(table)
    elapsed = time.perf_counter() - t0
    shutil.rmtree(path)
    return elapsed, int(pc.sum(table.column("size")).as_py())


def run_raw(sizes: list[int], batch: int, root: str) -> float:
    chunks = [os.urandom(s) for s in sizes[:1024]]
    path = os.path.join(root, "raw")
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        if batch == 1:
            for i in range(len(sizes)):
                f.write(chunks[i & 1023])
        else:
            for i in range(0, len(sizes), batch):
                f.write(b"".join(chunks[j & 1023] for j in range(i, min(i + batch, len(sizes)))))
    elapsed = time.perf_counter() - t0
    os.remove(path)
    return elapsed


def main() -> None:
    report = Report("rocketmq_append")
    root = tempfile.mkdtemp(prefix="segstore-bench-")
    try:
        for body_size in (100, 1024):
            msgs = messages(COUNT[body_size], body_size)
            c_rate = 0.0
            for label, batch, general in (("single", 1, False), ("single (general path)", 1, True),
                                          ("batch32", 32, False), ("batch32 (general path)", 32, True),
                                          ("batch1000", 1000, False)):
                timings = []
                total = 0

                def store_run(msgs=msgs, batch=batch, general=general, timings=timings) -> None:
                    nonlocal total
                    elapsed, total = run_store(msgs, batch, root, general=general)
                    timings.append(elapsed)

                best_of(store_run, repeat=3, warmup=0)
                elapsed = sorted(timings)[len(timings) // 2]
                rate = len(msgs) / elapsed
                avg = total // len(msgs)
                raw = best_of(lambda msgs=msgs, batch=batch, avg=avg: run_raw([avg] * len(msgs), batch, root))
                raw_rate = len(msgs) / raw
                java = JAVA.get((label, body_size))
                note = f"{rate * avg / 1e6:.0f} MB/s stored"
                if java:
                    note += f"; Java store {java:,} msg/s -> {rate / java:.2f}x"
                if general:
                    note += f"; the one C call is {c_rate / rate:.1f}x this"
                else:
                    c_rate = rate
                report.add(f"{label} append, {body_size} B body", rate, "msg/s",
                           baseline="raw file write", baseline_value=raw_rate, note=note)
            timings = []
            total = 0

            def arrow_run(msgs=msgs, timings=timings) -> None:
                nonlocal total
                elapsed, total = run_arrow(msgs, root)
                timings.append(elapsed)

            best_of(arrow_run, repeat=3, warmup=0)
            rate = len(msgs) / sorted(timings)[len(timings) // 2]
            avg = total // len(msgs)
            raw = best_of(lambda msgs=msgs, avg=avg: run_raw([avg] * len(msgs), 1 << 16, root))
            raw_rate = len(msgs) / raw
            java = JAVA[("append_arrow", body_size)]
            report.add(f"append_arrow, {body_size} B body", rate, "msg/s", baseline="raw file write",
                       baseline_value=raw_rate,
                       note=f"{rate * avg / 1e6:.0f} MB/s stored; Java putMessages(32) {java:,} msg/s -> "
                            f"{rate / java:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
