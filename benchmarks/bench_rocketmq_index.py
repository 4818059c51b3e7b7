"""RocketMQ key lookups through the IndexFile, and recovery (rebuild of consume queues and index).

The store holds :data:`MESSAGES` messages (100-byte bodies, one distinct key each)
over 4 topics of 4 queues, written in batches.

- key lookup: ``store.query_by_key`` for :data:`LOOKUPS` random keys, latency
  median and p99; the baseline, measured in the same run, is finding one key by
  a full scan of the commitlog (what a store without an index must do);
- recovery: consume queues and index deleted and the abort file left, then the
  store opened for append (recovery rebuilds both from the commitlog), in
  messages/s; the baseline is a plain decoding scan of the same commitlog.

Run: ``bash scripts/bench.sh rocketmq_index`` (``BENCH_INDEX_MESSAGES`` to change the size).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

import segstore
from segstore import files

from .common import Report, latencies

MESSAGES = int(os.environ.get("BENCH_INDEX_MESSAGES", "1000000"))
LOOKUPS = 2000
BODY_SIZE = 100
TOPICS = 4
QUEUES = 4
APPEND_BATCH = 10_000
CONFIG = {"mappedFileSizeCommitLog": 256 << 20, "maxHashSlotNum": 1 << 20, "maxIndexNum": 1 << 22}


def message(i: int, body: bytes) -> dict:
    return {"topic": f"T{i % TOPICS}", "queue_id": (i // TOPICS) % QUEUES, "body": body, "keys": [f"key-{i}"]}


def make_store(path: str) -> None:
    body = bytes(BODY_SIZE)
    with segstore.open(path, "rocketmq", "a", **CONFIG) as store:
        for start in range(0, MESSAGES, APPEND_BATCH):
            store.append_batch([message(i, body) for i in range(start, min(MESSAGES, start + APPEND_BATCH))])


def main() -> None:
    report = Report("rocketmq_index")
    rng = random.Random(5)
    root = tempfile.mkdtemp(prefix="bench-index-")
    try:
        path = os.path.join(root, "store")
        t0 = time.perf_counter()
        make_store(path)
        write_s = time.perf_counter() - t0
        with segstore.open(path, "rocketmq", "r", **CONFIG) as store:
            picks = [rng.randrange(MESSAGES) for _ in range(LOOKUPS)]

            def lookup(i: int) -> None:
                hits = store.query_by_key(f"T{i % TOPICS}", f"key-{i}")
                if len(hits) != 1:
                    raise AssertionError(f"key-{i}: {len(hits)} hits")

            lat = latencies(lookup, picks)
            target = f"key-{picks[0]}"
            t0 = time.perf_counter()
            scanned = 0
            for msg in store.scan():
                scanned += 1
                if target in msg.keys:
                    found_at = scanned
            scan_s = time.perf_counter() - t0
        report.add("key lookup, median", lat["median_us"], "us", baseline="full scan for one key (us)",
                   baseline_value=scan_s * 1e6, higher_is_better=False,
                   note=f"{MESSAGES:,} messages, key found at message {found_at:,} of the scan")
        report.add("key lookup, p99", lat["p99_us"], "us", baseline="full scan for one key (us)",
                   baseline_value=scan_s * 1e6, higher_is_better=False)

        files.remove_tree(os.path.join(path, "consumequeue"))
        files.remove_tree(os.path.join(path, "index"))
        files.touch(os.path.join(path, "abort"))
        t0 = time.perf_counter()
        with segstore.open(path, "rocketmq", "a", **CONFIG) as store:
            recover_s = time.perf_counter() - t0
            lines = store.recovery_lines
        report.add("recovery: rebuild queues + index", MESSAGES / recover_s, "msg/s",
                   baseline="decoding scan (msg/s)", baseline_value=MESSAGES / scan_s,
                   note=f"{len(lines)} actions; store written at {MESSAGES / write_s:,.0f} msg/s")
        report.save()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
