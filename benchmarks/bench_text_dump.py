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
        ("kafka", "text dump"): "text"}


def child(fmt: str, op: str, store: str) -> dict:
    import pyarrow  # noqa: F401  (the interpreter's start-up, not the operation)

    import segstore
    segstore.registry.get(fmt)
    if op == "text-python":
        from segstore_rocketmq import columnar
        columnar._speedups = None

    t0, cpu0 = time.perf_counter(), time.process_time()
    count = 0
    with segstore.open(store, fmt, "r") as s, open(os.devnull, "wb") as out:
        blocks = s.dump_json(threads=1) if op == "json" else s.dump_text(threads=1)
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
        if len({r["count"] for r in texts}) != 1 or min(r["count"] for r in texts) < MESSAGES:
            raise SystemExit(f"{fmt} {row} wrote {sorted({r['count'] for r in texts})} lines, "
                             f"expected one count >= {MESSAGES}")
        json_s = statistics.median(r["seconds"] for r in jsons)
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
