"""RocketMQ reads at disk speed (issue 10): scan_arrow, verify, recover and dump --json against a hop loop.

The store holds :data:`MESSAGES` messages (100 B bodies, a tag and 2 keys each,
one topic of 4 queues), built once under ``bench-data/`` (git-ignored) and kept
for later runs.  The yardstick, measured in the same run on the same commitlog,
is a plain Python loop that reads only each message's 4-byte TOTALSIZE and hops
to the next (about 3.5M msg/s on the reference machine); every rate is reported
as a ratio to it, beside its goal:

- ``scan_arrow()``, every column (goal >= 1.0x the hop loop);
- ``verify`` (goal >= 0.5x);
- recovery after a crash that lost the consume queues and the IndexFile: the
  abort file left, ``consumequeue/`` and ``index/`` deleted, the store opened for
  append, which walks the commitlog and rebuilds both (goal >= 0.3x);
- ``dump --json`` to /dev/null (goal >= 500k msg/s);
- ``segstore recover`` as a user runs it on a plain copy (``cp -r``) of the store that lost its
  consume queues and IndexFile (abort file left): the whole command's wall time, interpreter
  start-up and its full check included (goal >= 0.3x).

Every row is measured the same way: :data:`REPEAT` rounds, each running the hop loop and then
the operation, every run in a fresh child process (the page cache warmed by a first hop loop),
and each figure is the median of its runs: wall-clock rate, CPU seconds (which a loaded machine
distorts less than wall-clock time; the machine is shared and its load moves, hence the hop loop
beside every run rather than once).  A child imports the modules the operation needs before its
clock starts (interpreter start-up, as the issue's CLI figures subtract it), opening the store is
timed.  Each child also reports its peak anonymous memory (``RssAnon``, sampled; mapped file
pages excluded) above its start; a row gives the largest.

Run: ``bash scripts/bench.sh columnar`` (``BENCH_COLUMNAR_MESSAGES`` to change the size).
"""

from __future__ import annotations

import json
import mmap
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from .common import Report, command_env

MESSAGES = int(os.environ.get("BENCH_COLUMNAR_MESSAGES", "1000000"))
BODY_SIZE = 100
QUEUES = 4
APPEND_BATCH = 10_000
CONFIG: dict = {}   # the broker defaults: 1 GiB commitlog files, 5M index slots, 20M index entries
DATA = Path(__file__).resolve().parent.parent / "bench-data"
GOALS = {"scan_arrow": 1.0, "verify": 0.5, "recover": 0.3, "segstore recover": 0.3}
DUMP_GOAL = 500_000
#: Runs of the hop loop and of the operation per row (medians reported).
REPEAT = int(os.environ.get("BENCH_COLUMNAR_REPEAT", "5"))
TOTALSIZE = struct.Struct(">i")


def store_path(messages: int = MESSAGES, kind: str = "columnar") -> Path:
    return DATA / f"{kind}-{messages}"


def build_store(messages: int = MESSAGES, kind: str = "columnar") -> Path:
    """The benchmark store of ``messages`` messages, written once (a ``complete`` marker says it
    was finished)."""
    import segstore

    path = store_path(messages, kind)
    if (path / "complete").exists():
        return path / "store"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    body = bytes(range(BODY_SIZE))
    with segstore.open(str(path / "store"), "rocketmq", "a", **CONFIG) as store:
        for start in range(0, messages, APPEND_BATCH):
            store.append_batch([
                {"topic": "BenchTopic", "queue_id": i % QUEUES, "body": body, "tags": "TagA",
                 "keys": [f"k{i}", f"order-{i % 5000}"], "born_timestamp": 1_700_000_000_000 + i}
                for i in range(start, min(messages, start + APPEND_BATCH))])
    (path / "complete").touch()
    return path / "store"


# -- child processes -------------------------------------------------------------------------

def _rss_anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


class _Peak:
    """Samples RssAnon every few milliseconds in a thread; ``peak`` is the largest seen."""

    def __init__(self) -> None:
        self.start = self.peak = _rss_anon_kb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_anon_kb())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_anon_kb())
        return self.peak - self.start


def hop(store: Path) -> int:
    """The yardstick: read each message's TOTALSIZE and hop to the next, file by file."""
    count = 0
    unpack = TOTALSIZE.unpack_from
    for name in sorted(os.listdir(store / "commitlog")):
        with open(store / "commitlog" / name, "rb") as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            pos, end = 0, len(m) - 8
            while pos <= end:
                (size,) = unpack(m, pos)
                if size <= 0:
                    break
                pos += size
                count += 1
    return count - (len(os.listdir(store / "commitlog")) - 1)   # the BLANK closing each full file


#: Conversion children (``bench_rocketmq_memory``): op -> (source, target format, destination),
#: the source and the destination siblings of the store (``store`` is the RocketMQ one).
CONVERSIONS = {"convert-kafka": ("store", "kafka", "kafka"), "convert-back": ("kafka", "rocketmq", "back")}


def child(op: str, store: Path, messages: int) -> dict:
    if op in CONVERSIONS:
        # as the segstore command converts: its allocator setting, Arrow's pool's included, which
        # takes its options when pyarrow loads (so before the import below)
        from segstore import allocator
        allocator.retain()
    # imports are the interpreter's start-up, not the operation (segstore.open imports the layouts lazily)
    import pyarrow  # noqa: F401
    import segstore_rocketmq.store  # noqa: F401

    import segstore
    import segstore.layouts
    segstore.registry.get("rocketmq")

    peak = _Peak()
    t0, cpu0 = time.perf_counter(), time.process_time()
    count = 0
    if op == "hop":
        count = hop(store)
    elif op == "scan_arrow":
        with segstore.open(str(store), "rocketmq", "r") as s:
            count = sum(batch.num_rows for batch in s.scan_arrow())
    elif op == "verify":
        with segstore.open(str(store), "rocketmq", "r") as s:
            problems = s.verify()
        if problems:
            raise SystemExit(f"verify found {len(problems)} problems: {problems[:3]}")
        count = messages
    elif op == "recover":
        with segstore.open(str(store), "rocketmq", "a") as s:
            count = sum(len(q) for q in [range(*s.offset_range("BenchTopic", i)) for i in range(QUEUES)])
    elif op == "dump":
        with segstore.open(str(store), "rocketmq", "r") as s, open(os.devnull, "wb") as out:
            for block in s.dump_json():
                out.write(block)
        count = messages
    elif op in CONVERSIONS:
        # into a sibling of the store (the allocator set up as the command does, above)
        source, to, target = CONVERSIONS[op]
        from segstore.convert import convert
        done = convert(str(store.parent / source), str(store.parent / target), to=to)
        count = done.messages
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"op": op, "seconds": seconds, "cpu": cpu, "count": count, "anon_mb": peak.stop() / 1024}


def run_child(op: str, store: Path, messages: int = MESSAGES) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_columnar", "--child", op, str(store),
                          str(messages)],
                         capture_output=True, text=True, env=command_env(),
                         cwd=Path(__file__).resolve().parent.parent)
    if out.returncode:
        raise SystemExit(f"{op} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli_recover(store: Path) -> dict:
    """``segstore recover`` on ``store`` in a fresh interpreter: the whole process, timed from outside;
    the count is the messages its first line says it walked."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)     # an installed package has its bytecode compiled
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "segstore.cli", "recover", str(store)], capture_output=True,
                         text=True, env=env, cwd=Path(__file__).resolve().parent.parent)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"segstore recover failed:\n{out.stderr}")
    walked = int(out.stdout.split(" walked ", 1)[1].split()[0])
    return {"op": "segstore recover", "seconds": seconds, "count": walked, "anon_mb": 0.0,
            "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}


def crashed_copy(store: Path, *, plain: bool = False) -> Path:
    """A copy of the store as a crash that lost the consume queues and the IndexFile leaves it."""
    copy = store.parent / "crashed"
    shutil.rmtree(copy, ignore_errors=True)
    # cp keeps the preallocated files' holes (shutil.copytree would write 1 GiB of zeros per file,
    # which the broker's own files never hold: recovery then scans zeros instead of messages)
    # (``plain``: as a user copies a store, ``cp -r``)
    subprocess.run(["cp", "-r", *([] if plain else ["--sparse=always"]), str(store), str(copy)], check=True)
    for name in ("consumequeue", "index"):
        shutil.rmtree(copy / name, ignore_errors=True)
    (copy / "abort").touch()
    return copy


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
        return
    report = Report("columnar")
    t0 = time.perf_counter()
    store = build_store()
    print(f"store of {MESSAGES:,} messages ready in {time.perf_counter() - t0:.1f} s: {store}", flush=True)
    run_child("hop", store)                                # warm the page cache
    baseline = "hop loop (msg/s)"
    for op in ("scan_arrow", "verify", "recover", "dump", "segstore recover"):
        hops, runs, loads = [], [], []
        for _ in range(REPEAT):
            loads.append(os.getloadavg()[0])
            hops.append(run_child("hop", store))
            if op == "segstore recover":
                runs.append(cli_recover(crashed_copy(store, plain=True)))
            else:
                runs.append(run_child(op, crashed_copy(store) if op == "recover" else store))
        for result in (*hops, *runs):
            if result["count"] != MESSAGES:
                raise SystemExit(f"{result['op']} saw {result['count']} messages, expected {MESSAGES}")
        hop_rate = MESSAGES / statistics.median(r["seconds"] for r in hops)
        hop_cpu = statistics.median(r["cpu"] for r in hops)
        rate = MESSAGES / statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        anon = max(r["anon_mb"] for r in runs)
        load = statistics.median(loads)
        goal = f"goal >= {GOALS[op]}x" if op in GOALS else f"goal >= {DUMP_GOAL:,} msg/s"
        report.add("dump --json" if op == "dump" else op, rate, "msg/s",
                   baseline=baseline, baseline_value=hop_rate,
                   note=f"{goal}; by CPU time {hop_cpu / cpu:.2f}x; medians of {REPEAT} runs; peak "
                        f"anonymous memory +{anon:.0f} MB; load {load:.1f}",
                   goal=GOALS.get(op), anon_mb=anon, load=load, cpu_ratio=hop_cpu / cpu,
                   cpu_s=cpu, hop_cpu_s=hop_cpu, repeat=REPEAT)
    shutil.rmtree(store.parent / "crashed", ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
