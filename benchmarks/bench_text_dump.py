"""The text dump against ``dump --json`` (issue 31): ``segstore dump STORE`` as the CLI writes it,
with and without ``--json``, on the same store in the same run.

The stores are ``bench_parallel``'s (RocketMQ: one topic of 4 queues, 100 B bodies, a tag and 2 keys
each; Kafka: one partition, 100 records of 10 B keys and 100 B values a batch), built once under
``bench-data/`` (``BENCH_TEXT_DUMP_MESSAGES``, default 200,000).  Per format, :data:`REPEAT` rounds
each run ``dump_json`` and then ``dump_text`` (the blocks the CLI writes, to /dev/null, one thread
each), every run in a fresh child process (the page cache warmed by a first run; imports before
the clock starts, opening the store timed); the row is the text dump's median rate, its baseline
``dump --json``'s, the ratio their quotient (goal: >= 0.5x, the text line is shorter but previews
the body).  A RocketMQ row of the pure-Python text dump (``RocketMQStore.dump``, the reference the
C path is tested equal to) shows what the C path replaced.  Kafka's text dump formats its batch
lines in Python (one a batch) and its record lines in C.

A window row per format times ``dump --json --begin T`` with ``T`` the time of each queue's message
nine tenths in (the last tenth of the store) against the whole ``dump --json`` in the same run: the
time of the whole dump over the window's, about 10x where a window reads only its own messages (the
opening and the time lookups are the rest), about 1x if it walked the store.

Run: ``bash scripts/bench.sh text_dump``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .bench_parallel import build
from .common import Report

MESSAGES = int(os.environ.get("BENCH_TEXT_DUMP_MESSAGES", "200000"))
REPEAT = int(os.environ.get("BENCH_TEXT_DUMP_REPEAT", "3"))
GOAL = 0.5
#: (format, row) -> what the child runs
ROWS = {("rocketmq", "text dump"): "text", ("rocketmq", "text dump, pure Python"): "text-python",
        ("kafka", "text dump"): "text", ("rocketmq", "dump --json --begin, the last tenth"): "window",
        ("kafka", "dump --json --begin, the last tenth"): "window"}


def last_tenth(store) -> int:
    """The earliest time of the messages nine tenths into each queue / partition of the store's topic
    (RocketMQ store time, Kafka record timestamp: what each looks offsets up by)."""
    topic = store.topics()[0]
    times = []
    for partition in store.partitions(topic):
        low, high = store.offset_range(topic, partition)
        record = next(store.read(topic, partition, low + (high - low) * 9 // 10, 1))
        times.append(record.store_timestamp if store.format == "rocketmq" else record.timestamp)
    return min(times)


def child(fmt: str, op: str, store: str) -> dict:
    import pyarrow  # noqa: F401  (the interpreter's start-up, not the operation)

    import segstore
    segstore.registry.get(fmt)
    if op == "text-python":
        from segstore_rocketmq import columnar
        columnar._speedups = None

    window = {}
    if op == "window":
        with segstore.open(store, fmt, "r") as s:
            window = {"begin": last_tenth(s)}
    t0, cpu0 = time.perf_counter(), time.process_time()
    count = 0
    with segstore.open(store, fmt, "r") as s, open(os.devnull, "wb") as out:
        blocks = s.dump_json(threads=1, **window) if op in ("json", "window") else s.dump_text(threads=1)
        for block in blocks:
            count += bytes(block).count(b"\n")
            out.write(block)
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu0, "count": count}


def run_child(fmt: str, op: str, store: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_text_dump", "--child", fmt, op, str(store)],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    if out.returncode:
        raise SystemExit(f"{fmt} {op} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4])))
        return
    report = Report("text_dump")
    for (fmt, row), op in ROWS.items():
        store = build(fmt, MESSAGES)
        run_child(fmt, "json", store)           # warm the page cache
        jsons, texts = [], []
        for _ in range(REPEAT):
            jsons.append(run_child(fmt, "json", store))
            texts.append(run_child(fmt, op, store))
        lines = {r["count"] for r in jsons}
        if len(lines) != 1 or min(lines) < MESSAGES:
            raise SystemExit(f"{fmt} dump --json wrote {sorted(lines)} lines, "
                             f"expected one count >= {MESSAGES}")
        json_s = statistics.median(r["seconds"] for r in jsons)
        if op == "window":
            counts = {r["count"] for r in texts}
            if len(counts) != 1 or not MESSAGES // 20 <= min(counts) <= MESSAGES // 5:
                raise SystemExit(f"{fmt} {row} wrote {sorted(counts)} lines, expected about a tenth "
                                 f"of {MESSAGES}")
            window_s = statistics.median(r["seconds"] for r in texts)
            report.add(f"{fmt} {row} ({min(counts):,} of {MESSAGES:,} msgs)", window_s, "s",
                       baseline="whole dump --json (s)", baseline_value=json_s, higher_is_better=False,
                       note=f"no goal; about 10x where a window reads only its messages, 1x if it walked "
                            f"the store; medians of {REPEAT} runs; one thread each", messages=min(counts))
            continue
        if len({r["count"] for r in texts}) != 1 or min(r["count"] for r in texts) < MESSAGES:
            raise SystemExit(f"{fmt} {row} wrote {sorted({r['count'] for r in texts})} lines, "
                             f"expected one count >= {MESSAGES}")
        text_s = statistics.median(r["seconds"] for r in texts)
        cpu = statistics.median(r["cpu"] for r in jsons) / statistics.median(r["cpu"] for r in texts)
        report.add(f"{fmt} {row}, {MESSAGES:,} msgs", MESSAGES / text_s, "msg/s",
                   baseline="dump --json (msg/s)", baseline_value=MESSAGES / json_s,
                   note=f"{f'goal >= {GOAL}x' if op == 'text' else 'the reference'}; by CPU time {cpu:.2f}x; "
                        f"medians of {REPEAT} runs; one thread each",
                   goal=GOAL if op == "text" else None, messages=MESSAGES, cpu_ratio=cpu)
    report.save()


if __name__ == "__main__":
    main()
