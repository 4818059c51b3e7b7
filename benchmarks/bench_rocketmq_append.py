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

Timed as ANCHORS.md times the Java store: in-process after a warm-up run, the
store already open, from the first append until the last returns (in ASYNC_FLUSH
the consume queue and IndexFile are written by then, as the anchor's "caught up").
The store's ``close`` (a flush of everything to disk) is timed apart and its median
is in each row's note, with the rate that counting it too gives: the anchors'
Java figures count no shutdown.  Each row is the median of five runs (runs on this VM swing
with page-cache writeback).

Run: ``bash scripts/bench.sh rocketmq_append`` (``BENCH_APPEND_SCALE=0.05`` for a
quick check at a twentieth of the messages).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

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


def timed(root: str, append: Callable[[Any], int]) -> tuple[float, float, int]:
    """Seconds of ``append(store)`` on a new store opened for append before the clock, seconds of
    its ``close`` after, and what ``append`` returned (the bytes stored)."""
    path = tempfile.mkdtemp(dir=root)
    store = segstore.open(path, format="rocketmq", mode="a")
    try:
        t0 = time.perf_counter()
        total = append(store)
        elapsed = time.perf_counter() - t0
    finally:
        t1 = time.perf_counter()
        store.close()
        closing = time.perf_counter() - t1
    shutil.rmtree(path)
    return elapsed, closing, total


def run_store(msgs: list[dict], batch: int, root: str, *, general: bool = False) -> tuple[float, float, int]:
    """:func:`timed` appends of ``msgs``, ``batch`` a call. ``general``: through the general path
    (the C single and batch appends switched off)."""
    def append(store: Any) -> int:
        if general:
            store._append_one = store._append_many = None
        if batch == 1:
            return sum(store.append(m).size for m in msgs)
        return sum(r.size for i in range(0, len(msgs), batch) for r in store.append_batch(msgs[i:i + batch]))

    return timed(root, append)


def run_arrow(table: pa.Table, root: str) -> tuple[float, float, int]:
    """:func:`timed` ``append_arrow`` of ``table``."""
    size = int(pc.sum(table.column("size")).as_py())

    def append(store: Any) -> int:
        store.append_arrow(table)
        return size

    return timed(root, append)


def scanned(msgs: list[dict], root: str) -> pa.Table:
    """The ``scan_arrow`` table of a store holding ``msgs`` (what ``append_arrow`` is given)."""
    source = tempfile.mkdtemp(dir=root)
    with segstore.open(source, format="rocketmq", mode="a") as store:
        for i in range(0, len(msgs), 1000):
            store.append_batch(msgs[i:i + 1000])
    with segstore.open(source, format="rocketmq") as store:
        table = pa.Table.from_batches(list(store.scan_arrow()))
    shutil.rmtree(source)
    return table


def medians(run: Callable[[], tuple[float, float, int]], repeat: int = 5) -> tuple[float, float, int]:
    """Median append and close seconds of ``repeat`` runs after one warm-up run, and the bytes."""
    run()
    runs = [run() for _ in range(repeat)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2])


def close_note(n: int, elapsed: float, closing: float) -> str:
    return f"close {closing * 1e3:.0f} ms ({n / (elapsed + closing):,.0f} msg/s counting it)"


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
                elapsed, closing, total = medians(lambda msgs=msgs, batch=batch, general=general:
                                                  run_store(msgs, batch, root, general=general))
                rate = len(msgs) / elapsed
                avg = total // len(msgs)
                raw = best_of(lambda msgs=msgs, batch=batch, avg=avg: run_raw([avg] * len(msgs), batch, root))
                raw_rate = len(msgs) / raw
                java = JAVA.get((label, body_size))
                note = f"{rate * avg / 1e6:.0f} MB/s stored; {close_note(len(msgs), elapsed, closing)}"
                if java:
                    note += f"; Java store {java:,} msg/s -> {rate / java:.2f}x"
                if general:
                    note += f"; the one C call is {c_rate / rate:.1f}x this"
                else:
                    c_rate = rate
                report.add(f"{label} append, {body_size} B body", rate, "msg/s",
                           baseline="raw file write", baseline_value=raw_rate, note=note)
            table = scanned(msgs, root)
            elapsed, closing, total = medians(lambda table=table: run_arrow(table, root))
            rate = len(msgs) / elapsed
            avg = total // len(msgs)
            raw = best_of(lambda msgs=msgs, avg=avg: run_raw([avg] * len(msgs), 1 << 16, root))
            raw_rate = len(msgs) / raw
            java = JAVA[("append_arrow", body_size)]
            report.add(f"append_arrow, {body_size} B body", rate, "msg/s", baseline="raw file write",
                       baseline_value=raw_rate,
                       note=f"{rate * avg / 1e6:.0f} MB/s stored; {close_note(len(msgs), elapsed, closing)}; "
                            f"Java putMessages(32) {java:,} msg/s -> {rate / java:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
