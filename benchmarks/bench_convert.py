"""Conversion throughput, RocketMQ -> Kafka and Kafka -> RocketMQ, against issue 10's yardstick.

The source is a RocketMQ store of :data:`MESSAGES` messages (100-byte bodies, one key, a tag, a
user property) over 4 topics of 4 queues (1,000,000 by default, the size issue 10 asks its
figures on; ``BENCH_CONVERT_MESSAGES`` to change it).  Each direction is timed end to end (open,
convert, flush, rename into place; no ``--verify``; removing the last run's output is not
timed) and reported in messages/s against the hop loop of ``bench_columnar`` (read each
message's TOTALSIZE and hop) over the same commitlog; issue 10's goal is >= 0.2x both ways.

Measured as ``bench_columnar`` measures its rows, which is how issue 10 measures the CLI: every
run in a fresh child process, :data:`REPEAT` rounds of the hop loop and each conversion, medians
(wall clock and CPU seconds).  A child imports the modules the conversion needs and converts a
small store both ways before its clock starts: the interpreter's start-up and one-time imports
(pyarrow imports pandas on its first array, ~0.5 s), which issue 10 subtracts from CLI figures.
A conversion's child first sets its allocator up as the ``segstore`` command does
(:func:`segstore.allocator.retain`; since 2026-11-24, worth 3-8% here, 17% for the native store:
a library caller that does not call it gets the figures of the runs before).
Before ``8ee6a80`` (2026-11-23) this benchmark ran everything in one process, each figure the
median of 3 runs after an untimed one; there the hop loop ran 1.7-2x faster than in a fresh
process (a file mapped again by the same process is walked faster: ~0.06 s against 0.08-0.10 s
per 64 MiB file here), much more than a conversion gained, so the yardstick measured a warmed
loop the CLI never runs.
Also in MB/s of source message bytes against a plain copy of the same bytes (the used part of
the commitlog for RocketMQ, the whole log directory for Kafka), timed in this process; and each
conversion's peak anonymous memory above the child's start (``RssAnon`` sampled every 5 ms, as
``bench_columnar``; the largest of the runs) against issue 10's budget of 300 MB.

Kafka -> RocketMQ is timed twice: the RocketMQ store's conversion back (its records restore
RocketMQ's messages) and a Kafka store of as many records of Kafka's own (``make_kafka_store``),
which become messages with ``kafka.*`` properties.

Run: ``bash scripts/bench.sh convert``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import segstore
from segstore import allocator
from segstore.convert import convert

from .bench_columnar import _Peak, hop
from .common import Report, best_of, command_env

MESSAGES = int(os.environ.get("BENCH_CONVERT_MESSAGES", "1000000"))
BODY_SIZE = 100
TOPICS = 4
QUEUES = 4
APPEND_BATCH = 5000
CONFIG = {"mappedFileSizeCommitLog": 64 << 20, "maxHashSlotNum": 1 << 16, "maxIndexNum": 1 << 20}
#: Issue 10: ``segstore convert`` both ways at >= 0.2x the hop loop.
GOAL = 0.2
#: Issue 10, item 4: at most this much anonymous memory above the interpreter's start (MB).
BUDGET_MB = 300
#: Rounds of the hop loop and of each conversion (medians reported).
REPEAT = int(os.environ.get("BENCH_CONVERT_REPEAT", "5"))
#: The conversions timed: (row name, source directory under the root, target format, compression).
#: ``kafka`` is the RocketMQ store converted (its records restore RocketMQ's messages); ``native``
#: a Kafka store of as many records written by segstore's Kafka append (its own records, which
#: become messages with ``kafka.*`` properties).
CONVERSIONS = (("RocketMQ -> Kafka (none)", "rmq", "kafka", "none"),
               ("RocketMQ -> Kafka (zstd)", "rmq", "kafka", "zstd"),
               ("Kafka -> RocketMQ", "kafka", "rocketmq", None),
               ("native Kafka -> RocketMQ", "native", "rocketmq", None))


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


def make_kafka_store(path: str, seed: int = 13) -> None:
    """A Kafka store of :data:`MESSAGES` records over the same 4 topics of 4 partitions: a
    100-byte value, a key, a header each, appended by segstore's Kafka writer."""
    rng = random.Random(seed)
    words = [rng.randbytes(6).hex().encode() for _ in range(64)]
    with segstore.open(path, "kafka", "a") as store:
        for start in range(0, MESSAGES, APPEND_BATCH):
            store.append_batch([
                {"topic": f"Topic{i % TOPICS}", "partition": (i // TOPICS) % QUEUES,
                 "value": b"".join(rng.choice(words) for _ in range(9))[:BODY_SIZE],
                 "key": b"order-%d" % i, "headers": [("trace", b"t%d" % (i % 97))],
                 "timestamp": 1_700_000_000_000 + i}
                for i in range(start, min(start + APPEND_BATCH, MESSAGES))])


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


def child(op: str, root: str) -> dict:
    """One timed run in this fresh process: ``hop`` or the conversion ``CONVERSIONS[int(op)]``."""
    if op == "hop":
        t0, cpu0 = time.perf_counter(), time.process_time()
        count = hop(Path(root, "rmq"))
        return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu0, "count": count}
    _, source, to, compression = CONVERSIONS[int(op)]
    # the process as the segstore command sets it up (issue 10 measures the command)
    allocator.retain()
    # start-up: the one-time imports and first calls, on a small store both ways
    warm = os.path.join(root, f"warm-{os.getpid()}")
    try:
        with segstore.open(os.path.join(warm, "rmq"), "rocketmq", "a", **CONFIG) as store:
            store.append_batch([{"topic": "T", "queue_id": 0, "body": b"x", "keys": ["k"], "tags": "t"}])
        convert(os.path.join(warm, "rmq"), os.path.join(warm, "kafka"), to="kafka", compression="zstd")
        convert(os.path.join(warm, "kafka"), os.path.join(warm, "back"), to="rocketmq", config=CONFIG)
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    options = {"config": CONFIG} if to == "rocketmq" else {"compression": compression}
    peak = _Peak()
    t0, cpu0 = time.perf_counter(), time.process_time()
    convert(os.path.join(root, source), os.path.join(root, "out"), to=to, **options)
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu0, "count": MESSAGES,
            "anon_mb": peak.stop() / 1024}


def run_child(op: str, root: str) -> dict:
    shutil.rmtree(os.path.join(root, "out"), ignore_errors=True)     # the last run's output: untimed
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_convert", "--child", op, root],
                         capture_output=True, text=True, env=command_env(),
                         cwd=Path(__file__).resolve().parent.parent)
    if out.returncode:
        raise SystemExit(f"{op} failed:\n{out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["count"] != MESSAGES:
        raise SystemExit(f"{op} saw {result['count']} messages, expected {MESSAGES}")
    return result


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
        return
    report = Report("convert")
    root = tempfile.mkdtemp(prefix="segstore-bench-convert-")
    try:
        src = os.path.join(root, "rmq")
        nbytes = make_store(src)
        mb = nbytes / 1e6
        convert(src, os.path.join(root, "kafka"), to="kafka")
        kafka = os.path.join(root, "kafka")
        kafka_mb = dir_bytes(kafka) / 1e6
        native = os.path.join(root, "native")
        make_kafka_store(native)
        native_mb = dir_bytes(native) / 1e6
        run_child("hop", root)                                  # warm the page cache
        hops: list[dict] = []
        runs: dict[int, list[dict]] = {i: [] for i in range(len(CONVERSIONS))}
        loads = []
        for _ in range(REPEAT):
            loads.append(os.getloadavg()[0])
            hops.append(run_child("hop", root))
            for i in runs:
                runs[i].append(run_child(str(i), root))
        hop_rate = MESSAGES / statistics.median(r["seconds"] for r in hops)
        hop_cpu = statistics.median(r["cpu"] for r in hops)
        load = statistics.median(loads)

        def fresh(name: str) -> str:
            path = os.path.join(root, name)
            shutil.rmtree(path, ignore_errors=True)
            return path

        copy_to = os.path.join(root, "copy.bin")
        copy_s = best_of(lambda: copy_bytes(os.path.join(src, "commitlog"), nbytes, copy_to),
                         setup=lambda: fresh("copy.bin"))
        copy_k = best_of(lambda: shutil.copytree(kafka, os.path.join(root, "kafka-copy")),
                         setup=lambda: fresh("kafka-copy"))
        copy_n = best_of(lambda: shutil.copytree(native, os.path.join(root, "native-copy")),
                         setup=lambda: fresh("native-copy"))
        for i, (name, source, _, _) in enumerate(CONVERSIONS):
            secs = statistics.median(r["seconds"] for r in runs[i])
            cpu = statistics.median(r["cpu"] for r in runs[i])
            report.add(name, MESSAGES / secs, "msg/s", baseline="hop loop (msg/s)", baseline_value=hop_rate,
                       note=f"goal >= {GOAL}x the hop loop; by CPU time {hop_cpu / cpu:.2f}x; medians of "
                            f"{REPEAT} runs, each in a fresh process; {MESSAGES} messages; load {load:.1f}",
                       goal=GOAL, load=load, cpu_ratio=hop_cpu / cpu, cpu_s=cpu, hop_cpu_s=hop_cpu,
                       repeat=REPEAT)
            source_mb, copy_rate = {"rmq": (mb, mb / copy_s), "kafka": (kafka_mb, kafka_mb / copy_k),
                                    "native": (native_mb, native_mb / copy_n)}[source]
            report.add(f"{name} bytes", source_mb / secs, "MB/s", baseline="plain copy MB/s",
                       baseline_value=copy_rate)
            anon = max(r["anon_mb"] for r in runs[i])
            report.add(f"{name} memory", anon, "MB anonymous", baseline="budget (MB)",
                       baseline_value=BUDGET_MB, higher_is_better=False,
                       note=f"peak above the start (imports and a small conversion done), largest of "
                            f"{REPEAT} runs; budget: <= {BUDGET_MB} MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
