"""``segstore write --input`` of a RocketMQ store's ``dump --json`` lines: the columnar route
(``jsonl.dump_columns`` + ``append_arrow``) against the reference route it replaced (a
``RocketMQMessage`` a line + ``append_stored``), same lines, same run.

Messages as ``bench_rocketmq_append``'s: one topic, 4 queues, 100 B bodies, a tag and 2 keys.
The lines are written once (``dump --json``, not timed); each run is ``cli.main(["write", DST,
"--input", FILE])`` in this process into an empty directory: both passes over the file (the check
and the append), JSON parsing included.  Figures are the best of :data:`REPEAT` runs (wall clock);
the note gives the CPU seconds and the peak RSS of the run.

Run: ``bash scripts/bench.sh write_input`` (``BENCH_WRITE_INPUT_MESSAGES=20000`` for a quick check).
"""

from __future__ import annotations

import io
import os
import resource
import shutil
import tempfile
import time

import segstore
from segstore import cli

from .bench_rocketmq_append import messages
from .common import Report

MESSAGES = int(os.environ.get("BENCH_WRITE_INPUT_MESSAGES", "200000"))
REPEAT = int(os.environ.get("BENCH_WRITE_INPUT_REPEAT", "2"))


def write_input(lines: str, target: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``write --input`` into an empty ``target``."""
    shutil.rmtree(target, ignore_errors=True)
    t0, c0 = time.perf_counter(), time.process_time()
    code = cli.main(["write", target, "--input", lines], io.StringIO())
    took = time.perf_counter() - t0, time.process_time() - c0
    assert code == 0
    return took


def main() -> None:
    from segstore_rocketmq import jsonl

    report = Report("write_input")
    root = tempfile.mkdtemp(prefix="segstore-bench-write-input-")
    try:
        source, lines = os.path.join(root, "src"), os.path.join(root, "lines.jsonl")
        msgs = messages(MESSAGES, 100)
        with segstore.open(source, format="rocketmq", mode="a") as store:
            for at in range(0, MESSAGES, 1000):
                store.append_batch(msgs[at:at + 1000])
        with open(lines, "w") as out:
            assert cli.main(["dump", source, "--json"], out) == 0
        best: dict[bool, tuple[float, float]] = {}
        for _ in range(REPEAT):
            for columnar in (False, True):
                jsonl.COLUMNAR = columnar
                wall, cpu = write_input(lines, os.path.join(root, "dst"))
                if columnar not in best or wall < best[columnar][0]:
                    best[columnar] = (wall, cpu)
        jsonl.COLUMNAR = True
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        (wall, cpu), (ref_wall, ref_cpu) = best[True], best[False]
        report.add("write --input of RocketMQ dump --json lines, 100 B", MESSAGES / wall, "msg/s",
                   baseline="a message object a line (the reference route)",
                   baseline_value=MESSAGES / ref_wall,
                   note=f"{MESSAGES:,} lines, both passes; CPU {cpu:.2f} s vs {ref_cpu:.2f} s; "
                        f"process peak RSS {peak} MB; best of {REPEAT}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.save()


if __name__ == "__main__":
    main()
