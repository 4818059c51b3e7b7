"""Reads on several threads (issue 31): each read path with ``threads=N`` against itself with ``threads=1``.

Two stores per size (:data:`SIZES`, ``BENCH_PARALLEL_MESSAGES`` to change them): a RocketMQ store
(the broker defaults, one topic of 4 queues, 100 B bodies, a tag and 2 keys each, as
``bench_columnar``) and a Kafka log dir (one partition, 100 records of 10 B keys and 100 B values a
batch, uncompressed, as ``bench_kafka_columnar``), built once under ``bench-data/``. Per size,
format and path where the store takes ``threads`` (``scan_arrow`` every column, ``dump --json`` to
/dev/null, ``verify``, and RocketMQ's recovery of a crash that lost the consume queues and the
IndexFile, whose recovery at open takes its thread count from ``SEGSTORE_THREADS``, and ``convert``
to the other format, which takes it from there too), :data:`REPEAT` rounds each run the path with
``threads=1`` and then with ``threads=N``, every run in a fresh child process started as the
``segstore`` command runs (``common.command_env``: numpy's BLAS on one thread; the page cache warmed
by a first run; the process warmed by the same path with the same thread count over a store of
:data:`WARM` messages before the clock starts, so that the row times the work and not the imports,
the memory pool's first megabytes or the thread pool's start, which ``bench_fixed_costs`` measures
and which at 500,000 messages took 0.1-0.15 s of a 0.3 s ``verify``; opening the store timed); the
row is the median rate with N threads, its baseline the median with one thread, the ratio their
quotient; the note gives the CPU time with N threads against one's, with the user and system
seconds and the page faults of each (medians), and the load average. N is 2 (goals: >= 1.8x,
recovery and conversion >= 1.5x on 2 cores) and, on a machine with more cores, every core too.
``threads=1`` is one thread: the overlaps a RocketMQ scan (its walk beside its build,
``segstore.overlap.overlapped``) and a conversion (its reading beside its writing, its Kafka encoding on
two threads) run by default are off too (``segstore.overlap.overlaps``).  ``threads=2`` is the split
plus those overlaps where the path keeps them (a conversion, a RocketMQ scan of queue ranges): so the
ratio is what a second thread gives.  The default on 2 cores (one range with the overlap) is neither
row; ``bench_columnar`` measures it.

Run: ``bash scripts/bench.sh parallel``.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import Report, command_env

SIZES = [int(n) for n in os.environ.get("BENCH_PARALLEL_MESSAGES", "500000,4000000").split(",")]
REPEAT = int(os.environ.get("BENCH_PARALLEL_REPEAT", "3"))
DATA = Path(__file__).resolve().parent.parent / "bench-data" / "parallel"
QUEUES = 4
BODY = bytes(range(100))
PER_BATCH = 100
APPEND = 10_000
#: messages of the store each child runs its path over before the clock starts
WARM = 2_000
#: ratio of threads=2 to threads=1 each path must reach on 2 cores
GOALS = {"scan_arrow": 1.8, "dump --json": 1.8, "verify": 1.8, "recover": 1.5, "convert": 1.5}
OPS = ("scan_arrow", "dump --json", "verify", "recover", "convert")


def build(fmt: str, messages: int) -> Path:
    """The store of ``messages`` messages of ``fmt``, written once (a ``complete`` marker says so)."""
    import segstore

    home = DATA / f"{fmt}-{messages}"
    path = home / "store"
    if (home / "complete").exists():
        return path
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    t0 = time.perf_counter()
    if fmt == "rocketmq":
        with segstore.open(str(path), "rocketmq", "a") as store:
            for start in range(0, messages, APPEND):
                store.append_batch([
                    {"topic": "BenchTopic", "queue_id": i % QUEUES, "body": BODY, "tags": "TagA",
                     "keys": [f"k{i}", f"order-{i % 5000}"], "born_timestamp": 1_700_000_000_000 + i}
                    for i in range(start, min(messages, start + APPEND))])
    else:
        rng = random.Random(5)
        values = [rng.randbytes(50).hex().encode() for _ in range(1024)]
        with segstore.open(str(path), "kafka", "a", **{"segment.bytes": 1 << 30}) as store:
            part = store.partition_of("bench", 0, create=True)
            for start in range(0, messages, PER_BATCH):
                part.append_records([(b"key-%06d" % (i % 1_000_000), values[i % 1024], 1_700_000_000_000 + i)
                                     for i in range(start, min(messages, start + PER_BATCH))])
    (home / "complete").touch()
    print(f"built {fmt}: {messages:,} messages in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def takes_threads(fmt: str, op: str) -> bool:
    """Whether the format's store takes ``threads`` for ``op`` (verify: where it splits its work)."""
    if op == "convert":         # takes its thread count from SEGSTORE_THREADS
        return True
    if op == "recover" and fmt == "kafka":
        return False            # a Kafka recovery splits by partitions, and this log dir holds one
    from segstore_kafka.store import KafkaStore
    from segstore_rocketmq.store import RocketMQStore

    store = RocketMQStore if fmt == "rocketmq" else KafkaStore
    method = {"scan_arrow": store.scan_arrow, "dump --json": store.dump_json, "verify": store.verify,
              "recover": store.recover}[op]
    return "threads" in inspect.signature(method).parameters


def crashed_copy(store: Path) -> Path:
    """A copy of the RocketMQ store as a crash that lost the consume queues and the IndexFile leaves it
    (as ``bench_columnar``: holes kept)."""
    copy = store.parent / "crashed"
    shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["cp", "-r", "--sparse=always", str(store), str(copy)], check=True)
    for name in ("consumequeue", "index"):
        shutil.rmtree(copy / name, ignore_errors=True)
    (copy / "abort").touch()
    return copy


def child(fmt: str, op: str, store: str, threads: int, warm: str) -> dict:
    from segstore import allocator

    # as the segstore command runs every command: freed heap memory kept for the next batch (without
    # it each dump --json block is fresh pages: 670k page faults a 4M-record Kafka dump, 5k with it),
    # Arrow's pool's too, which takes its options when pyarrow loads (so before the import below)
    allocator.retain()
    import pyarrow  # noqa: F401  (the interpreter's start-up, not the operation)

    import segstore

    segstore.registry.get(fmt)
    run_op(fmt, op, warm, threads)      # imports, the memory pool, the thread pool: not the work
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    count = run_op(fmt, op, store, threads)
    seconds, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"seconds": seconds, "cpu": user + system, "user": user, "sys": system,
            "faults": after.ru_minflt - before.ru_minflt, "count": count}


def run_op(fmt: str, op: str, store: str, threads: int) -> int:
    """Run ``op`` over ``store`` with ``threads``: the messages it saw (-1: verify, which counts none)."""
    import segstore

    count = 0
    if op == "convert":
        from segstore.convert import convert

        os.environ["SEGSTORE_THREADS"] = str(threads)
        target = Path(store).parent / "converted"
        # a run stopped mid-conversion leaves its staging beside the target, which the next run's
        # convert refuses (as the CLI would without --force): this benchmark always starts over
        for leftover in (target, target.parent / f".{target.name}.converting"):
            shutil.rmtree(leftover, ignore_errors=True)
        count = convert(store, str(target), to="kafka" if fmt == "rocketmq" else "rocketmq").messages
        shutil.rmtree(target, ignore_errors=True)   # (timed: a few ms)
        return count
    if op == "recover":     # the recovery at open rebuilds the queues and the IndexFile
        os.environ["SEGSTORE_THREADS"] = str(threads)
        with segstore.open(store, fmt, "a") as s:
            return sum(len(range(*s.offset_range("BenchTopic", i))) for i in range(QUEUES))
    with segstore.open(store, fmt, "r") as s:
        if op == "scan_arrow":
            count = sum(batch.num_rows for batch in s.scan_arrow(threads=threads))
        elif op == "dump --json":
            import numpy as np

            # as the CLI's dump reads it: within this call, walked ahead where the store can.  The lines
            # are counted by numpy, which gives up the GIL as the CLI's write does: bytes.count held it
            # through every block (0.145 s of 364 MB, 500k Kafka records: 30% of a one-thread dump's
            # CPU), so the formatting threads waited on the benchmark's own count
            ahead = {"walk_ahead": True} if "walk_ahead" in inspect.signature(s.dump_json).parameters else {}
            with open(os.devnull, "wb") as out:
                blocks = s.dump_json(threads=threads, **ahead)
                try:
                    for block in blocks:
                        count += int(np.count_nonzero(np.frombuffer(block, np.uint8) == 10))
                        out.write(block)
                finally:
                    blocks.close()
        elif op == "verify":
            problems = s.verify(threads=threads)
            if problems:
                raise SystemExit(f"verify found {len(problems)} problems: {problems[:3]}")
            count = -1
    return count


def run_child(fmt: str, op: str, store: Path, threads: int, warm: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_parallel", "--child", fmt, op, str(store),
                          str(threads), str(warm)], capture_output=True, text=True, env=command_env(),
                         cwd=Path(__file__).resolve().parent.parent)
    if out.returncode:
        raise SystemExit(f"{fmt} {op} threads={threads} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])))
        return
    report = Report("parallel")
    cores = len(os.sched_getaffinity(0))
    counts = sorted({2, cores}) if cores > 1 else [2]
    for messages in SIZES:
        for fmt in ("rocketmq", "kafka"):
            store = build(fmt, messages)
            small = build(fmt, WARM)
            run_child(fmt, "scan_arrow", store, 1, small)    # warm the page cache
            for op in OPS:
                if not takes_threads(fmt, op):
                    continue
                for n in counts:
                    ones, manys = [], []
                    for _ in range(REPEAT):
                        for threads, runs in ((1, ones), (n, manys)):
                            if op == "recover":     # each a crash's copy, the warm-up's too
                                target, warm = crashed_copy(store), crashed_copy(small)
                            else:
                                target, warm = store, small
                            runs.append(run_child(fmt, op, target, threads, warm))
                    for result in (*ones, *manys):
                        if result["count"] not in (-1, messages):
                            raise SystemExit(f"{fmt} {op} saw {result['count']} messages, "
                                             f"expected {messages}")
                    one = statistics.median(r["seconds"] for r in ones)
                    many = statistics.median(r["seconds"] for r in manys)
                    cpu = (statistics.median(r["cpu"] for r in manys)
                           / statistics.median(r["cpu"] for r in ones))
                    # user and system CPU apart: page faults and hand-offs show as system time
                    split = "; ".join(
                        f"{label} user {statistics.median(r['user'] for r in runs):.3f} s, sys "
                        f"{statistics.median(r['sys'] for r in runs):.3f} s, "
                        f"{statistics.median(r['faults'] for r in runs):,.0f} faults"
                        for label, runs in (("threads=1", ones), (f"threads={n}", manys)))
                    goal = f"goal >= {GOALS[op]}x on 2 cores" if n == 2 else f"{n} cores"
                    report.add(f"{fmt} {op}, threads={n}, {messages:,} msgs", messages / many, "msg/s",
                               baseline="threads=1 (msg/s)", baseline_value=messages / one,
                               note=f"{goal}; CPU time {cpu:.2f}x threads=1's ({split}); medians of "
                                    f"{REPEAT} runs; {cores} cores; load {os.getloadavg()[0]:.1f}",
                               threads=n, messages=messages, cores=cores, goal=GOALS[op] if n == 2 else None)
            for built in (store, small):
                shutil.rmtree(built.parent / "crashed", ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
