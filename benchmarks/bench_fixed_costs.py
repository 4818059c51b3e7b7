"""Fixed costs a user waits for on every command: CLI start-up, ``info`` on a small store, the first
Kafka ``scan_arrow`` in a process.

Each figure is the median of :data:`RUNS` fresh processes, beside a baseline measured in the same run:

- ``segstore --help`` and ``segstore info`` on a small store (100 messages; RocketMQ and Kafka), wall
  seconds of the whole process, against the floor every store command pays: an interpreter that
  imports numpy (the ratio is floor / figure: 1.0 = nothing beyond it).  The command runs as the
  ``segstore`` executable runs it (:data:`ENTRY`): ``python -m segstore.cli`` runs the module twice
  (once as ``__main__``, which hands over to the imported ``segstore.cli``);
- the first ``scan_arrow`` of a :data:`RECORDS`-record Kafka partition in a fresh process, against
  kafka-python's decode of the same ``.log`` bytes, warm in this process, on its first
  :data:`KAFKA_PYTHON_RECORDS` records scaled to rec/s (as ``bench_kafka_columnar``).  numpy,
  pyarrow and ``segstore`` are imported before the clock (what an Arrow user's process holds
  already; ``segstore.open`` is looked up there, since the package loads its names on first use:
  from 2026-11-30 until 2026-12-02 the clock held the library's core modules too, ~8 ms of CPU);
  the clock is around ``open`` + the scan, so what they load on first use counts (the format's
  modules; pandas, before pyarrow's bridges were avoided).

The children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` dropped, one unmeasured
warm-up run first), as an installed package runs.  Run: ``bash scripts/bench.sh fixed_costs``
(``BENCH_FIXED_RECORDS`` to resize, ``BENCH_FIXED_RUNS`` for more processes).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import segstore

from .bench_kafka_columnar import PER_BATCH, kafka_python_decode, log_bytes
from .common import Report, best_of

RECORDS = int(os.environ.get("BENCH_FIXED_RECORDS", "500000"))
RUNS = int(os.environ.get("BENCH_FIXED_RUNS", "7"))
KAFKA_PYTHON_RECORDS = min(RECORDS, 100_000)
SMALL = 100
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data" / "fixed_costs"
BASE_TS = 1_700_000_000_000
FLOOR = "python -c 'import numpy'"
#: What the ``segstore`` executable runs (pyproject.toml's ``[project.scripts]``).
ENTRY = "import sys; from segstore.launch import command; sys.exit(command())"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)     # an installed package has its bytecode compiled
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "formats"), env.get("PYTHONPATH", "")])
    return env


def small_stores() -> dict[str, Path]:
    """A RocketMQ store and a Kafka partition of :data:`SMALL` messages each (written once)."""
    stores = {"rocketmq": DATA / "small-rocketmq", "kafka": DATA / "small-kafka"}
    done = DATA / "small-complete"
    if not done.exists():
        with segstore.open(stores["rocketmq"], format="rocketmq", mode="a") as store:
            for i in range(SMALL):
                store.append({"topic": "t", "queue_id": i % 4, "body": b"x" * 100, "tags": "a",
                              "keys": f"k{i}"})
        with segstore.open(stores["kafka"], format="kafka", mode="a") as store:
            part = store.partition_of("t", 0, create=True)
            part.append_records([(b"k%d" % i, b"x" * 100, BASE_TS + i) for i in range(SMALL)])
        done.write_text("")
    return stores


def big_partition() -> Path:
    """A :data:`RECORDS`-record Kafka partition as ``bench_kafka_columnar`` writes (uncompressed)."""
    path = DATA / f"kafka-{RECORDS}" / "bench-0"
    done = path.parent / "complete"
    if done.exists():
        return path
    values = [(b"value-%04d-" % i) * 9 for i in range(1024)]
    with segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 1 << 30}) as store:
        part = store.partition_of("bench", 0, create=True)
        for start in range(0, RECORDS, PER_BATCH):
            part.append_records([(b"key-%06d" % i, values[i % 1024][:100], BASE_TS + i)
                                 for i in range(start, start + PER_BATCH)])
    done.write_text("")
    return path


def process_seconds(argv: list[str]) -> float:
    """Median wall seconds of :data:`RUNS` runs of ``argv`` (after one unmeasured warm-up)."""
    times = []
    for i in range(RUNS + 1):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=_env())
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


_FIRST_SCAN = """
import json, sys, time
import numpy, pyarrow
import segstore
segstore.open   # the library's core, loaded on first use
t0 = time.perf_counter()
with segstore.open(sys.argv[1], format="kafka") as store:
    rows = sum(batch.num_rows for batch in store.scan_arrow())
print(json.dumps({"seconds": time.perf_counter() - t0, "rows": rows,
                  "pandas": "pandas" in sys.modules}))
"""


def first_scan(path: Path) -> tuple[float, bool]:
    """Median seconds of the first ``scan_arrow`` in :data:`RUNS` fresh processes; whether any
    imported pandas."""
    runs = []
    for i in range(RUNS + 1):
        out = subprocess.run([sys.executable, "-c", _FIRST_SCAN, str(path)], capture_output=True, text=True,
                             check=True, env=_env()).stdout
        result = json.loads(out.splitlines()[-1])
        if result["rows"] != RECORDS:
            raise AssertionError(f"scan_arrow read {result['rows']} of {RECORDS} records")
        if i:
            runs.append(result)
    return statistics.median(r["seconds"] for r in runs), any(r["pandas"] for r in runs)


def main() -> None:
    report = Report("fixed_costs")
    cli = [sys.executable, "-c", ENTRY]
    floor = process_seconds([sys.executable, "-c", "import numpy"])
    load = os.getloadavg()[0]
    t_help = process_seconds([*cli, "--help"])
    report.add("segstore --help, wall", t_help, "s", baseline=FLOOR, baseline_value=floor,
               higher_is_better=False, note=f"median of {RUNS} processes; load {load:.1f}")
    for fmt, path in small_stores().items():
        t_info = process_seconds([*cli, "info", str(path)])
        load = os.getloadavg()[0]
        report.add(f"segstore info, small {fmt} store, wall", t_info, "s", baseline=FLOOR,
                   baseline_value=floor, higher_is_better=False,
                   note=f"{SMALL} messages; median of {RUNS} processes; load {load:.1f}")
    path = big_partition()
    subset = log_bytes(path, KAFKA_PYTHON_RECORDS)
    if kafka_python_decode(subset) != KAFKA_PYTHON_RECORDS:
        raise AssertionError("kafka-python read other records")
    kp_rate = KAFKA_PYTHON_RECORDS / best_of(lambda: kafka_python_decode(subset), repeat=3)
    t_scan, pandas = first_scan(path)
    load = os.getloadavg()[0]
    report.add("first Kafka scan_arrow in a fresh process", RECORDS / t_scan, "rec/s",
               baseline="kafka-python", baseline_value=kp_rate,
               note=f"{RECORDS:,} records, {t_scan:.3f} s (open + scan, first use); pandas imported: "
                    f"{'yes' if pandas else 'no'}; kafka-python warm on {KAFKA_PYTHON_RECORDS:,}; "
                    f"load {load:.1f}")
    report.save()


if __name__ == "__main__":
    main()
