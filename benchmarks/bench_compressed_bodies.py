"""RocketMQ bodies a producer compressed, read as consumers read them: ``scan_arrow(["value"],
decompress=True)`` against the least any reader pays, a bare ``zlib.decompress`` loop over the
same bodies in the same run.

The store: ``BENCH_COMPRESSED_MESSAGES`` (default 100,000) messages of one topic in 4 queues, each
an 8 KiB text body (hex words, as a JSON payload compresses) that a 4.9.7 producer would compress
(over ``compressMsgBodyOverHowmuch``, 4 KiB): zlib at level 5, sysFlag 0x301, about 3.3 KB stored;
built once under ``bench-data/``.  :data:`REPEAT` rounds each time the loop, the scan on one thread
and on two (zlib releases the GIL); the rows are the medians, the ratio each scan's rate over the
loop's.  No goal: the inflating dominates (about 20 us a body here), and the row says how close the
scan comes to it.

Run: ``bash scripts/bench.sh compressed_bodies``.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import time
import zlib
from pathlib import Path

import segstore

from .common import Report

MESSAGES = int(os.environ.get("BENCH_COMPRESSED_MESSAGES", "100000"))
REPEAT = int(os.environ.get("BENCH_COMPRESSED_REPEAT", "3"))
BODY = 8192
DATA = Path(__file__).resolve().parent.parent / "bench-data"


def body() -> bytes:
    rng = random.Random(1)
    words = [rng.randbytes(6).hex().encode() for _ in range(500)]
    return b" ".join(rng.choice(words) for _ in range(BODY // 8))[:BODY]


def build(packed: bytes) -> Path:
    path = DATA / f"compressed-bodies-{MESSAGES}"
    if (path / "done").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    with segstore.open(path, format="rocketmq", mode="a") as store:
        for start in range(0, MESSAGES, 1000):
            store.append_batch([{"topic": "T", "queue_id": i % 4, "body": packed, "sys_flag": 0x301}
                                for i in range(start, min(start + 1000, MESSAGES))])
    (path / "done").touch()
    return path


def scan(path: Path, threads: int, plain: bytes) -> float:
    t0 = time.perf_counter()
    rows = 0
    with segstore.open(path) as store:
        for batch in store.scan_arrow(["value"], decompress=True, threads=threads):
            rows += batch.num_rows
            if batch.column("value")[0].as_py() != plain:
                raise SystemExit("a body did not inflate to what was compressed")
    seconds = time.perf_counter() - t0
    if rows != MESSAGES:
        raise SystemExit(f"scanned {rows} rows, expected {MESSAGES}")
    return seconds


def main() -> None:
    plain = body()
    packed = zlib.compress(plain, 5)
    path = build(packed)
    scan(path, 1, plain)        # the page cache warmed
    loops, ones, twos = [], [], []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        for _ in range(MESSAGES):
            zlib.decompress(packed)
        loops.append(time.perf_counter() - t0)
        ones.append(scan(path, 1, plain))
        twos.append(scan(path, 2, plain))
    loop = MESSAGES / statistics.median(loops)
    report = Report("compressed_bodies")
    for threads, times in ((1, ones), (2, twos)):
        report.add(f"rocketmq scan_arrow(decompress=True), threads={threads}, {MESSAGES:,} zlib bodies of "
                   f"{BODY} B ({len(packed)} B stored)", MESSAGES / statistics.median(times), "msg/s",
                   baseline="zlib.decompress loop (msg/s)", baseline_value=loop,
                   note=f"no goal; medians of {REPEAT} runs; load {os.getloadavg()[0]:.1f}",
                   messages=MESSAGES)
    report.save()


if __name__ == "__main__":
    main()
