"""Shared benchmark helpers: timing, medians, percentiles and the results table.

Benchmarks never assert speed; they measure and report.  Each result row names
the operation, its rate, and the ratio to a baseline measured in the same run
on the same data (a raw file write, kafka-python's codec, a full scan), so that
noise on a shared virtual machine cancels out as far as possible.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def command_env() -> dict[str, str]:
    """The environment of a child process that runs an operation as the ``segstore`` command runs it:
    ``segstore.cli.COMMAND_ENV`` where the caller sets none of it (numpy's OpenBLAS on one thread
    before numpy loads; a child started without it has OpenBLAS's pool spin on the other core for
    its first ~0.1 s, while the child's clock runs: 15-30 ms of CPU in a 500k-record Kafka
    scan_arrow child, and a second thread of segstore's own competing with it)."""
    from segstore.cli import COMMAND_ENV

    return {**COMMAND_ENV, **os.environ}


def machine() -> dict[str, Any]:
    """What the numbers ran on."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "python": sys.version.split()[0],
            "platform": platform.platform()}


def best_of(fn: Callable[[], Any], repeat: int = 3, warmup: int = 1,
            setup: Callable[[], Any] | None = None) -> float:
    """Median wall time in seconds of ``repeat`` runs after ``warmup`` runs; ``setup`` runs before
    each, untimed (removing what the last run wrote)."""
    times = []
    for i in range(warmup + repeat):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def latencies(fn: Callable[[Any], Any], args: list[Any]) -> dict[str, float]:
    """Per-call latency in microseconds over ``args``: median and p99."""
    samples = []
    for a in args:
        t0 = time.perf_counter_ns()
        fn(a)
        samples.append((time.perf_counter_ns() - t0) / 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return {"median_us": statistics.median(samples), "p99_us": p99}


@dataclass
class Row:
    benchmark: str
    operation: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None
    ratio: float | None = None          # value / baseline_value (or the inverse for latencies, see note)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Report:
    """Collects rows and writes ``benchmarks/results/NAME.json`` and a markdown table."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: list[Row] = []

    def add(self, operation: str, value: float, unit: str, *, baseline: str = "",
            baseline_value: float | None = None, higher_is_better: bool = True, note: str = "",
            **extra: Any) -> Row:
        ratio = None
        if baseline_value:
            ratio = value / baseline_value if higher_is_better else baseline_value / value
        row = Row(self.name, operation, value, unit, baseline, baseline_value, ratio, note, extra)
        self.rows.append(row)
        print(self._line(row), flush=True)
        return row

    @staticmethod
    def _fmt(v: float | None) -> str:
        if v is None:
            return ""
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}"

    def _line(self, r: Row) -> str:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        return (f"| {r.operation} | {self._fmt(r.value)} {r.unit} | {r.baseline} "
                f"{self._fmt(r.baseline_value)} | {ratio} | {r.note} |")

    def markdown(self) -> str:
        head = "| operation | segstore | baseline (same run) | ratio | note |\n|---|---|---|---|---|\n"
        return head + "\n".join(self._line(r) for r in self.rows) + "\n"

    def save(self) -> Path:
        RESULTS_DIR.mkdir(exist_ok=True)
        path = RESULTS_DIR / f"{self.name}.json"
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
        path.write_text(json.dumps({"name": self.name, "machine": machine(), "commit": commit,
                                    "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                                    "rows": [asdict(r) for r in self.rows]}, indent=1))
        (RESULTS_DIR / f"{self.name}.md").write_text(self.markdown())
        return path
