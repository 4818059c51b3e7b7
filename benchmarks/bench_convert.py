"""Conversion throughput, RocketMQ -> Kafka and Kafka -> RocketMQ, against issue 10's yardstick.

The source is a RocketMQ store of :data:`MESSAGES` messages (100-byte bodies, one key, a tag, a
user property) over 4 topics of 4 queues (1,000,000 by default, the size issue 10 asks its
figures on; ``BENCH_CONVERT_MESSAGES`` to change it).  Each direction is timed end to end (open,
convert, flush, rename into place; no ``--verify``; removing the last run's output is not
timed), the median of 3 runs after an untimed one (as the hop loop is), and reported in
messages/s against the hop loop of ``bench_columnar`` (read each message's TOTALSIZE and hop)
over the same commitlog in the same run; issue 10's goal is >= 0.2x both ways.  Also in MB/s of
source message bytes against a plain copy of the same bytes (the used part of the commitlog for
RocketMQ, the whole log directory for Kafka).  An untimed conversion of a small store both ways
runs first: the interpreter's one-time imports (pyarrow imports pandas on its first array, ~0.5
s) are start-up, which issue 10 subtracts, not conversion.

Run: ``bash scripts/bench.sh convert``.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import segstore
from segstore.convert import convert

from .bench_columnar import hop
from .common import Report, best_of

MESSAGES = int(os.environ.get("BENCH_CONVERT_MESSAGES", "1000000"))
BODY_SIZE = 100
TOPICS = 4
QUEUES = 4
APPEND_BATCH = 5000
CONFIG = {"mappedFileSizeCommitLog": 64 << 20, "maxHashSlotNum": 1 << 16, "maxIndexNum": 1 << 20}
#: Issue 10: ``segstore convert`` both ways at >= 0.2x the hop loop.
GOAL = 0.2


def make_store(path: str, seed: int = 11) -> int:
    """Write the source store; returns its message bytes (commitlog end)."""
    rng = random.Random(seed)
    words = [rng.randbytes(6).hex().encode() for _ in range(64)]
    with segstore.open(path, "rocketmq", "a", **CONFIG) as store:
        for start in range(0, MESSAGES, APPEND_BATCH):
            store.append_batch([
                {"topic": f"Topic{i % TOPICS}", "queue_id": (i // TOPICS) % QUEUES,
                 "body": b"".join(rng.choice(words) for _ in range(9))[:BODY_SIZE],
                 "keys": [f"order-{i}"], "tags": f"Tag{i % 3}", "properties": {"trace": f"t{i % 97}"},
                 "born_timestamp": 1_700_000_000_000 + i, "store_timestamp": 1_700_000_000_500 + i}
                for i in range(start, min(start + APPEND_BATCH, MESSAGES))])
        return store.commitlog.end


def copy_bytes(src_dir: str, nbytes: int, dst: str) -> None:
    """The baseline: copy ``nbytes`` of the commitlog files into one new file."""
    left = nbytes
    with open(dst, "wb") as out:
        for name in sorted(os.listdir(src_dir)):
            with open(os.path.join(src_dir, name), "rb") as f:
                chunk = f.read(left)
            out.write(chunk)
            left -= len(chunk)
            if left <= 0:
                break
        out.flush()
        os.fsync(out.fileno())


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names)


def main() -> None:
    report = Report("convert")
    root = tempfile.mkdtemp(prefix="segstore-bench-convert-")
    try:
        src = os.path.join(root, "rmq")
        nbytes = make_store(src)
        mb = nbytes / 1e6

        def fresh(name: str) -> str:
            path = os.path.join(root, name)
            shutil.rmtree(path, ignore_errors=True)
            return path

        warm = os.path.join(root, "warm")
        with segstore.open(warm, "rocketmq", "a", **CONFIG) as store:
            store.append_batch([{"topic": "T", "queue_id": 0, "body": b"x", "keys": ["k"], "tags": "t"}])
        convert(warm, fresh("warm-kafka"), to="kafka")
        convert(os.path.join(root, "warm-kafka"), fresh("warm-back"), to="rocketmq", config=CONFIG)
        hop_s = best_of(lambda: hop(Path(src)))
        hop_rate = MESSAGES / hop_s
        yardstick = "hop loop (msg/s)"
        goal = f"goal >= {GOAL}x the hop loop; {MESSAGES} messages; load {os.getloadavg()[0]:.1f}"
        copy_to = os.path.join(root, "copy.bin")
        copy_s = best_of(lambda: copy_bytes(os.path.join(src, "commitlog"), nbytes, copy_to),
                         setup=lambda: fresh("copy.bin"))
        for compression in ("none", "zstd"):
            secs = best_of(lambda c=compression: convert(src, os.path.join(root, "kafka"), to="kafka",
                                                          compression=c),
                           setup=lambda: fresh("kafka"))
            report.add(f"RocketMQ -> Kafka ({compression})", MESSAGES / secs, "msg/s", baseline=yardstick,
                       baseline_value=hop_rate, note=goal, goal=GOAL)
            report.add(f"RocketMQ -> Kafka ({compression}) bytes", mb / secs, "MB/s",
                       baseline="plain copy MB/s", baseline_value=mb / copy_s)
        convert(src, fresh("kafka"), to="kafka")
        kafka = os.path.join(root, "kafka")
        kafka_mb = dir_bytes(kafka) / 1e6
        copy_k = best_of(lambda: shutil.copytree(kafka, os.path.join(root, "kafka-copy")),
                         setup=lambda: fresh("kafka-copy"))
        secs = best_of(lambda: convert(kafka, os.path.join(root, "back"), to="rocketmq", config=CONFIG),
                       setup=lambda: fresh("back"))
        report.add("Kafka -> RocketMQ", MESSAGES / secs, "msg/s", baseline=yardstick, baseline_value=hop_rate,
                   note=goal, goal=GOAL)
        report.add("Kafka -> RocketMQ bytes", kafka_mb / secs, "MB/s",
                   baseline="plain copy MB/s", baseline_value=kafka_mb / copy_k)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
