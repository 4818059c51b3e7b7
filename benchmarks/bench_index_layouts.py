"""The four index layouts side by side, over the same messages in both formats.

:data:`MESSAGES` messages (100-byte bodies, one distinct key each, store/create
times 1 ms apart with jitter) go into one RocketMQ queue and one Kafka partition.
Then, per format and per layout (native or extra):

- bytes on disk (allocated blocks, so preallocated sparse files count what they use),
- build time (extra layouts: ``IndexSet.build`` from a scan; native ones are
  kept by the writer and have no separate build),
- append overhead: appending :data:`APPEND_MESSAGES` more messages with the
  extra layout attached, against the same append without it (same run),
- lookup latency, median and p99 over :data:`LOOKUPS` random targets, for the
  lookups the layout answers: record at an offset, first offset at a time,
  records with a key; the baseline is one full scan of the stream (what a
  lookup costs with no index at all).

Writes ``benchmarks/results/index_layouts.{json,md}`` and the chart
``docs/img/index-layouts.png``.  Not run by the tests.

Run: ``bash scripts/bench.sh index_layouts`` (``BENCH_LAYOUT_MESSAGES`` to change the size).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import segstore
from segstore.layouts import LAYOUT_NAMES, IndexSet, layout_class
from segstore.layouts.base import INDEX_ROOT, Stream

from .common import Report, latencies

MESSAGES = int(os.environ.get("BENCH_LAYOUT_MESSAGES", "1000000"))
APPEND_MESSAGES = max(10_000, MESSAGES // 20)
APPEND_ROUNDS = 3
LOOKUPS = 2000
BODY_SIZE = 100
KAFKA_BATCH = 100            # records per Kafka append (one RecordBatch each, ~12 KiB)
ROCKETMQ_BATCH = 10_000
START_MS = 1_700_000_000_000
CHART = Path(__file__).resolve().parent.parent / "docs" / "img" / "index-layouts.png"
ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": 256 << 20, "maxHashSlotNum": 1 << 20, "maxIndexNum": 1 << 22}
KAFKA_CONFIG = {"segment.bytes": 128 << 20}
LOOKUP_KINDS = {"offset": "record at offset", "time": "offset for time", "key": "records with key"}


def timestamp(i: int) -> int:
    return START_MS + i + (i * 7919) % 5


def items(fmt: str, start: int, end: int) -> list[dict[str, Any]]:
    body = bytes(BODY_SIZE)
    if fmt == "rocketmq":
        return [{"topic": "T", "queue_id": 0, "body": body, "keys": [f"key-{i}"],
                 "store_timestamp": timestamp(i)}
                for i in range(start, end)]
    return [{"topic": "T", "partition": 0, "value": body, "key": f"key-{i}".encode(),
             "timestamp": timestamp(i)}
            for i in range(start, end)]


def append(path: str, fmt: str, start: int, end: int, indexes: list[str]) -> float:
    """Seconds to append messages ``[start, end)`` with ``indexes`` kept (open and close not counted)."""
    config = ROCKETMQ_CONFIG if fmt == "rocketmq" else KAFKA_CONFIG
    step = ROCKETMQ_BATCH if fmt == "rocketmq" else KAFKA_BATCH
    batches = [items(fmt, s, min(end, s + step)) for s in range(start, end, step)]
    with segstore.open(path, format=fmt, mode="a", indexes=indexes, **config) as store:
        t0 = time.perf_counter()
        for batch in batches:
            store.append_batch(batch)
        store.flush()
        return time.perf_counter() - t0


def allocated(paths: list[Path]) -> int:
    return sum(p.stat().st_blocks * 512 for p in paths if p.is_file())


def layout_files(path: Path, fmt: str, name: str) -> list[Path]:
    """The files a layout keeps (native: the broker's; extra: its .segstore directory)."""
    if not layout_class(name, fmt).native:
        return list((path / INDEX_ROOT / name).rglob("*"))
    if fmt == "rocketmq":
        return list((path / ("consumequeue" if name == "queue" else "index")).rglob("*"))
    return list(path.glob("*.index" if name == "offset" else "*.timeindex"))


def log_files(path: Path, fmt: str) -> list[Path]:
    return list((path / "commitlog").glob("*")) if fmt == "rocketmq" else list(path.glob("*.log"))


def full_scan_seconds(store: Any) -> float:
    """One pass over every record of the stream (the cost of a lookup without an index)."""
    t0 = time.perf_counter()
    for _ in store.read("T", 0):
        pass
    return time.perf_counter() - t0


def measure_format(fmt: str, root: str, report: Report, chart: dict[str, Any]) -> None:
    path = os.path.join(root, fmt, "T-0")
    write_s = append(path, fmt, 0, MESSAGES, [])
    extra = [n for n in LAYOUT_NAMES if not layout_class(n, fmt).native]
    log_bytes = allocated(log_files(Path(path), fmt))
    report.add(f"{fmt}: write {MESSAGES:,} messages", MESSAGES / write_s, "msg/s",
               note=f"log {log_bytes / MESSAGES:.1f} B/msg")
    rng = random.Random(11)
    with segstore.open(path, format=fmt, indexes=[]) as store:
        scan_s = full_scan_seconds(store)
        indexes = IndexSet(store, extra, writable=True)
        t0 = time.perf_counter()
        indexes.build()
        build_s = time.perf_counter() - t0
        indexes.close()
        report.add(f"{fmt}: build {', '.join(extra)}", build_s, "s", baseline="full scan (s)",
                   baseline_value=scan_s, higher_is_better=False)
    chart["scan_us"][fmt] = scan_s * 1e6

    offsets = [rng.randrange(MESSAGES) for _ in range(LOOKUPS)]
    stamps = [timestamp(rng.randrange(MESSAGES)) for _ in range(LOOKUPS)]
    keys = [f"key-{rng.randrange(MESSAGES)}".encode() for _ in range(LOOKUPS)]
    stream = Stream("T", 0)
    with segstore.open(path, format=fmt, indexes=[]) as store:
        indexes = IndexSet(store, LAYOUT_NAMES, writable=False)
        try:
            for name in LAYOUT_NAMES:
                layout = indexes[name]
                size = allocated(layout_files(Path(path), fmt, name))
                kind = "native" if layout.native else "extra"
                report.add(f"{fmt}: {name} ({kind}) bytes on disk", size / MESSAGES, "B/msg",
                           note=f"{size:,} bytes")
                chart["bytes"][(fmt, name)] = size / MESSAGES
                (what,) = layout.answers
                if what == "offset":
                    lat = latencies(lambda o, layout=layout: layout.read_at(stream, o), offsets)
                elif what == "time":
                    lat = latencies(lambda t, layout=layout: layout.offset_for_time(stream, t), stamps)
                else:
                    lat = latencies(lambda k, layout=layout: layout.find_key(stream, k), keys)
                for stat in ("median_us", "p99_us"):
                    report.add(f"{fmt}: {name} ({kind}) {LOOKUP_KINDS[what]}, {stat[:-3]}", lat[stat], "us",
                               baseline="full scan (us)", baseline_value=scan_s * 1e6, higher_is_better=False)
                chart["latency"][(fmt, name)] = (lat["median_us"], lat["p99_us"])
            if fmt == "rocketmq":
                # the broker's own answer: binary search over the consume queue, a commitlog read per probe
                lat = latencies(lambda t: store.offset_for_time("T", 0, t), stamps)
                for stat in ("median_us", "p99_us"):
                    report.add(f"{fmt}: no time index (broker binary search) offset for time, {stat[:-3]}",
                               lat[stat], "us", baseline="full scan (us)", baseline_value=scan_s * 1e6,
                               higher_is_better=False)
                chart["broker_time_us"] = (lat["median_us"], lat["p99_us"])
        finally:
            indexes.close()

    cursor = MESSAGES
    for name in extra:
        without, with_it = [], []
        for _ in range(APPEND_ROUNDS):
            without.append(append(path, fmt, cursor, cursor + APPEND_MESSAGES, []))
            with_it.append(append(path, fmt, cursor + APPEND_MESSAGES, cursor + 2 * APPEND_MESSAGES, [name]))
            cursor += 2 * APPEND_MESSAGES
        base_s, with_s = statistics.median(without), statistics.median(with_it)
        report.add(f"{fmt}: append {APPEND_MESSAGES:,} with {name} kept", APPEND_MESSAGES / with_s, "msg/s",
                   baseline="without (msg/s)", baseline_value=APPEND_MESSAGES / base_s,
                   note=f"overhead {100 * (with_s - base_s) / base_s:+.0f}% "
                        f"(median of {APPEND_ROUNDS} rounds)")
        chart["append_overhead"][(fmt, name)] = 100 * (with_s - base_s) / base_s


def draw(chart: dict[str, Any]) -> None:
    """Lookup latency (median and p99, log scale) and bytes per message, per format and layout."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{fmt}\n{name}" for fmt in ("rocketmq", "kafka") for name in LAYOUT_NAMES]
    keys = [(fmt, name) for fmt in ("rocketmq", "kafka") for name in LAYOUT_NAMES]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), constrained_layout=True)
    xs = range(len(keys))
    medians = [chart["latency"][k][0] for k in keys]
    p99s = [chart["latency"][k][1] for k in keys]
    colors = ["#4c72b0" if layout_class(n, f).native else "#dd8452" for f, n in keys]
    top.bar([x - 0.2 for x in xs], medians, 0.4, color=colors, label="median")
    top.bar([x + 0.2 for x in xs], p99s, 0.4, color=colors, alpha=0.5, label="p99")
    for fmt, style in (("rocketmq", "--"), ("kafka", ":")):
        top.axhline(chart["scan_us"][fmt], color="grey", linestyle=style, label=f"full scan ({fmt})")
    top.axhline(chart["broker_time_us"][0], color="#55a868", linestyle="-.",
                label="rocketmq offset for time without a time index (median)")
    top.set_yscale("log")
    top.set_ylabel("lookup latency (us, log)")
    kinds = [LOOKUP_KINDS[next(iter(layout_class(name, fmt).answers))] for fmt, name in keys]
    top.set_xticks(list(xs), [f"{lab}\n{kind}" for lab, kind in zip(labels, kinds, strict=True)], fontsize=8)
    top.legend(fontsize=8)
    top.set_title(f"Index layouts over {MESSAGES:,} messages (blue: native, orange: extra)")
    bottom.bar(list(xs), [chart["bytes"][k] for k in keys], color=colors)
    bottom.set_ylabel("index bytes per message")
    bottom.set_xticks(list(xs), labels, fontsize=8)
    CHART.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(CHART, dpi=110)


def main() -> None:
    report = Report("index_layouts")
    root = tempfile.mkdtemp(prefix="bench-layouts-")
    chart: dict[str, Any] = {"latency": {}, "bytes": {}, "scan_us": {}, "append_overhead": {}}
    try:
        for fmt in ("rocketmq", "kafka"):
            measure_format(fmt, root, report, chart)
        draw(chart)
        report.save()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
