"""The main job on an embedded default: a local RocketMQ store, the CLI, and local Spark.

``python -m segstore.demo [--path DIR] [--messages N] [--no-spark]`` (what
``scripts/demo.sh`` runs):

1. creates a RocketMQ store in ``DIR`` (default ``./demo-store``, replaced if it
   is a previous demo store) and writes N messages (default 5,000) over two topics
   and four queues, with tags and keys, in batches;
2. runs ``segstore info``, ``dump`` (first lines), ``query`` by key, by offset and by
   time, ``dump`` between two times, and ``verify`` on it, exactly as a user would;
3. reads it back with local Spark (``spark.read.format("segstore")``) and counts
   rows per topic and queue;
4. prints where everything is.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
import time
from typing import Any

from . import cli, files
from .api import open as open_store

TOPICS = ("Orders", "Payments")
QUEUES = 4
MARKER = ".segstore-demo"


def write_store(path: str, count: int, seed: int = 42) -> tuple[str, int]:
    """Write ``count`` messages; returns a (key, store timestamp) of one written message."""
    rng = random.Random(seed)
    base_time = int(time.time() * 1000)
    sample: tuple[str, int] = ("", 0)
    with open_store(path, format="rocketmq", mode="a", mappedFileSizeCommitLog=str(64 << 20),
                    mappedFileSizeConsumeQueue=str(300_000 * 20)) as store:
        for start in range(0, count, 500):
            batch: list[dict[str, Any]] = []
            born = int(time.time() * 1000)      # a producer's clock: before the store's
            for i in range(start, min(count, start + 500)):
                topic = TOPICS[i % len(TOPICS)]
                key = f"{topic.lower()}-{i}"
                batch.append({"topic": topic, "queue_id": rng.randrange(QUEUES),
                              "body": f"{topic} event #{i}: {rng.randbytes(16).hex()}".encode(),
                              "tags": rng.choice(["created", "updated", "deleted"]),
                              "keys": [key, f"customer-{rng.randrange(100)}"],
                              "born_timestamp": born})
            results = store.append_batch(batch)
            if start == count // 2 // 500 * 500:    # the middle batch: time lookups land inside the queues
                sample = (batch[10]["keys"][0], results[10].extra.get("store_timestamp", base_time))
    files.touch(os.path.join(path, MARKER))
    return sample


def run_cli(title: str, argv: list[str], max_lines: int | None = 8) -> None:
    """Run one ``segstore`` command and show (the start of, unless ``max_lines`` is None) what it printed."""
    print(f"\n$ segstore {' '.join(argv)}    # {title}")
    out = io.StringIO()
    code = cli.main(argv, out=out)
    lines = out.getvalue().splitlines()
    max_lines = len(lines) if max_lines is None else max_lines
    for line in lines[:max_lines]:
        print("  " + (line if len(line) <= 160 else line[:157] + "..."))
    if len(lines) > max_lines:
        print(f"  ... ({len(lines) - max_lines} more lines)")
    print(f"  (exit code {code})")


def spark_counts(path: str) -> None:
    """Read the store with local Spark and show rows per topic and queue."""
    from .spark import local_session

    spark = local_session("segstore-demo")     # the source registered (again, Spark would warn)
    try:
        df = spark.read.format("segstore").load(os.path.abspath(path))
        print(f"\nSpark read {df.count()} rows; per topic and partition (queue):")
        df.groupBy("topic", "partition").count().orderBy("topic", "partition").show(truncate=False)
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m segstore.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--path", default="demo-store")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark read")
    args = parser.parse_args(argv)
    path = args.path
    if files.exists(path):
        if not files.exists(os.path.join(path, MARKER)):
            print(f"{path}: exists and is not a demo store; choose another --path", file=sys.stderr)
            return 2
        files.remove_tree(path)

    t0 = time.perf_counter()
    key, stamp = write_store(path, args.messages)
    print(f"wrote {args.messages} messages to the RocketMQ store {os.path.abspath(path)} "
          f"in {time.perf_counter() - t0:.2f} s")

    run_cli("topics, queues, offsets, files", ["info", path], max_lines=None)
    run_cli("the first messages, human-readable", ["dump", path], max_lines=5)
    run_cli("the same as JSON", ["dump", path, "--json", "--topic", "Orders", "--queue", "0"], max_lines=2)
    run_cli("by key, through the index files", ["query", path, "--topic", TOPICS[0], "--key", key])
    run_cli("by queue offset", ["query", path, "--topic", TOPICS[0], "--queue", "1", "--offset", "3",
                                "--count", "2"])
    run_cli("first offset stored at or after a time, in every queue", ["query", path, "--topic", TOPICS[0],
                                                                       "--timestamp", str(stamp)])
    run_cli("the messages stored between two times (mqadmin printMsg -b -e)",
            ["dump", path, "--topic", TOPICS[0], "--begin", str(stamp), "--end", str(stamp + 1)], max_lines=3)
    run_cli("check every file", ["verify", path])
    if not args.no_spark:
        spark_counts(path)
    print(f"\nThe store is in {os.path.abspath(path)}: "
          "commitlog/, consumequeue/, index/, checkpoint, config/.")
    print(f"Try: .venv/bin/segstore dump {path} --json | head")
    return 0


if __name__ == "__main__":
    sys.exit(main())
