"""Write ``docs/performance.md`` from ``benchmarks/results/*.json``.

``python -m benchmarks.report`` (run by ``scripts/bench.sh`` after the benchmarks).
Each benchmark's table is quoted as measured, with the machine and commit it ran
on; the client's targets are then checked against the Java brokers' own storage code
and kafka-python, measured on this machine kind.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import RESULTS_DIR

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"

TITLES = {
    "rocketmq_append": "RocketMQ appends",
    "rocketmq_index": "RocketMQ key lookups and recovery",
    "kafka_codec": "Kafka codec and lookups",
    "index_layouts": "Index layouts over both logs",
    "convert": "Conversion",
    "spark": "Spark reads",
    "spark_write": "Spark writes: the segstore writer against an append in one process",
    "write_input": "write --input of dump --json lines: the columnar route against a message a line",
    "columnar": "RocketMQ reads at disk speed: scan_arrow, verify, recover, dump --json",
    "kafka_columnar": "Kafka columnar reads and dump --json",
    "kafka_append": "Kafka appends: append_batch of dicts, append_arrow",
    "rocketmq_memory": ("RocketMQ memory on a multi-GiB store: verify, recover, dump --json, convert both "
                        "ways"),
    "fixed_costs": "Fixed costs: CLI start-up, info on a small store, the first Kafka scan_arrow",
    "follow": "An idle dump --follow on a Kafka log dir: a look with the change marker",
}

#: (target, benchmark, operation prefix, anchor figure, anchor label, higher is better, goal ratio)
TARGETS = [
    ("batch append >= Java store, 100 B", "rocketmq_append", "batch32 append, 100 B", 685_000,
     "Java putMessages(32) 685k msg/s", True, 1.0),
    ("batch append >= Java store, 1 KiB", "rocketmq_append", "batch32 append, 1024 B", 245_000,
     "Java putMessages(32) 245k msg/s", True, 1.0),
    ("single append >= 0.5x Java store, 100 B", "rocketmq_append", "single append, 100 B", 519_000,
     "Java putMessage + CQ + index 519k msg/s", True, 0.5),
    ("RocketMQ append_arrow >= 1.5x Java putMessages(32), 100 B", "rocketmq_append", "append_arrow, 100 B",
     685_000, "Java putMessages(32) 685k msg/s", True, 1.5),
    ("Spark writer, Kafka, 1M rows >= 0.5x append_arrow in one process", "spark_write",
     "Spark writer, kafka", None, "append_arrow, one process, same run", True, 0.5),
    ("Kafka decode >= 10x kafka-python (none)", "kafka_codec", "decode + CRC, none", None,
     "kafka-python, same run", True, 10.0),
    ("Kafka decode >= 10x kafka-python (lz4)", "kafka_codec", "decode + CRC, lz4", None,
     "kafka-python, same run", True, 10.0),
    ("Kafka decode >= 10x kafka-python (zstd)", "kafka_codec", "decode + CRC, zstd", None,
     "kafka-python, same run", True, 10.0),
    ("Kafka scan_arrow >= 20x kafka-python (none)", "kafka_columnar", "scan_arrow, none, all", None,
     "kafka-python, same run", True, 20.0),
    ("Kafka dump --json >= 500k rec/s", "kafka_columnar", "dump --json (CLI", 500_000,
     "goal 500k rec/s", True, 1.0),
    ("Kafka append_batch(1000) of dicts >= 1M rec/s", "kafka_append", "append_batch(1000) of dicts, none",
     1_000_000, "goal 1M rec/s", True, 1.0),
    ("Kafka append_batch(1000) of dicts >= 3x kafka-python", "kafka_append",
     "append_batch(1000) of dicts, none", None, "kafka-python builder, same run", True, 3.0),
    ("Kafka append_arrow >= Java builder (none)", "kafka_append", "append_arrow, none", 3_360_000,
     "Java MemoryRecordsBuilder 3.36M rec/s", True, 1.0),
    ("Kafka append_arrow >= Java builder (lz4)", "kafka_append", "append_arrow, lz4", 1_700_000,
     "Java MemoryRecordsBuilder 1.70M rec/s", True, 1.0),
    ("Kafka append_arrow >= Java builder (zstd)", "kafka_append", "append_arrow, zstd", 1_080_000,
     "Java MemoryRecordsBuilder 1.08M rec/s", True, 1.0),
    ("translateOffset within 2x Java", "kafka_codec", "translate_offset", 4.45,
     "Java LogSegment.translateOffset 4.45 us", False, 0.5),
    ("key lookup within 2x Java (median)", "rocketmq_index", "key lookup, median", 16.6,
     "Java queryMessage median 16.6 us", False, 0.5),
    ("key lookup within 2x Java (p99)", "rocketmq_index", "key lookup, p99", 63.0,
     "Java queryMessage p99 63 us", False, 0.5),
    ("RocketMQ scan_arrow, all columns >= the hop loop", "columnar", "scan_arrow", None,
     "TOTALSIZE hop loop, same run", True, 1.0),
    ("RocketMQ verify >= 0.5x the hop loop", "columnar", "verify", None, "TOTALSIZE hop loop, same run",
     True, 0.5),
    ("RocketMQ recover (queues + IndexFile) >= 0.3x the hop loop", "columnar", "recover", None,
     "TOTALSIZE hop loop, same run", True, 0.3),
    ("segstore recover (queues + IndexFile lost, plain copy) >= 0.3x the hop loop", "columnar",
     "segstore recover", None, "TOTALSIZE hop loop, same run", True, 0.3),
    ("RocketMQ dump --json >= 500k msg/s", "columnar", "dump --json", 500_000, "500k msg/s", True, 1.0),
    ("RocketMQ verify, multi-GiB store: <= 300 MB anonymous", "rocketmq_memory", "verify", None,
     "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("RocketMQ recover, multi-GiB store: <= 300 MB anonymous", "rocketmq_memory", "recover", None,
     "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("RocketMQ dump --json, multi-GiB store: <= 300 MB anonymous", "rocketmq_memory", "dump --json", None,
     "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("convert RocketMQ -> Kafka, multi-GiB store: <= 300 MB anonymous", "rocketmq_memory",
     "convert RocketMQ -> Kafka", None, "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("convert Kafka -> RocketMQ, multi-GiB store: <= 300 MB anonymous", "rocketmq_memory",
     "convert Kafka -> RocketMQ", None, "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("convert RocketMQ -> Kafka >= 0.2x the hop loop", "convert", "RocketMQ -> Kafka (none)", None,
     "TOTALSIZE hop loop, same run", True, 0.2),
    ("convert Kafka -> RocketMQ >= 0.2x the hop loop", "convert", "Kafka -> RocketMQ", None,
     "TOTALSIZE hop loop, same run", True, 0.2),
    ("convert RocketMQ -> Kafka, 1M messages: <= 300 MB anonymous", "convert",
     "RocketMQ -> Kafka (none) memory", None, "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("convert RocketMQ -> Kafka (zstd), 1M messages: <= 300 MB anonymous", "convert",
     "RocketMQ -> Kafka (zstd) memory", None, "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("convert Kafka -> RocketMQ, 1M messages: <= 300 MB anonymous", "convert", "Kafka -> RocketMQ memory",
     None, "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("convert native Kafka -> RocketMQ >= 0.2x the hop loop", "convert", "native Kafka -> RocketMQ", None,
     "TOTALSIZE hop loop, same run", True, 0.2),
    ("convert native Kafka -> RocketMQ, 1M records: <= 300 MB anonymous", "convert",
     "native Kafka -> RocketMQ memory", None, "300 MB budget (ratio: budget / peak)", True, 1.0),
    ("Spark, Kafka: count and sum(length(value)) >= Spark's Parquet reader", "spark",
     "kafka, 4,000,000 msgs, local[2]: count(*), sum(length(value))", None,
     "Spark Parquet reader, same rows, same run", True, 1.0),
    ("Spark, Kafka: every connector column >= Spark's Parquet reader", "spark",
     "kafka, 4,000,000 msgs, local[2]: every Kafka connector column", None,
     "Spark Parquet reader, same rows, same run", True, 1.0),
    ("Spark, Kafka: unpruned default schema <= 1.1x the time of value only", "spark",
     "kafka, 4,000,000 msgs, local[2]: default schema", None,
     ".schema(\"value binary\"), same run (speed: its time / ours)", False, 1 / 1.1),
    ("Spark, Kafka: a 16-message query <= 1.5x the time of Parquet's", "spark",
     "kafka, 16 msgs, local[2]: the fixed cost", None,
     "Spark Parquet reader, 16 rows (speed: its time / ours)", False, 1 / 1.5),
    ("Spark, RocketMQ: count and sum(length(value)) >= Spark's Parquet reader", "spark",
     "rocketmq, 4,000,000 msgs, local[2]: count(*), sum(length(value))", None,
     "Spark Parquet reader, same rows, same run", True, 1.0),
    ("Spark, RocketMQ: every connector column >= Spark's Parquet reader", "spark",
     "rocketmq, 4,000,000 msgs, local[2]: every Kafka connector column", None,
     "Spark Parquet reader, same rows, same run", True, 1.0),
    ("Spark, RocketMQ: unpruned default schema <= 1.1x the time of value only", "spark",
     "rocketmq, 4,000,000 msgs, local[2]: default schema", None,
     ".schema(\"value binary\"), same run (speed: its time / ours)", False, 1 / 1.1),
    ("Spark, RocketMQ: a 16-message query <= 1.5x the time of Parquet's", "spark",
     "rocketmq, 16 msgs, local[2]: the fixed cost", None,
     "Spark Parquet reader, 16 rows (speed: its time / ours)", False, 1 / 1.5),
    *((f"{fmt_name} {op}, 2 threads >= 1.8x one, {size} messages", "parallel",
       f"{fmt_name.lower()} {op}, threads=2, {size} msgs", None, "threads=1, same run", True, 1.8)
      for size in ("500,000", "4,000,000") for fmt_name in ("RocketMQ", "Kafka")
      for op in ("scan_arrow", "dump --json", "verify")),
    *((f"RocketMQ recover (queues + IndexFile), 2 threads >= 1.5x one, {size} messages", "parallel",
       f"rocketmq recover, threads=2, {size} msgs", None, "threads=1, same run", True, 1.5)
      for size in ("500,000", "4,000,000")),
    *((f"convert {name}, 2 threads >= 1.5x one, {size} messages", "parallel",
       f"{source} convert, threads=2, {size} msgs", None, "threads=1, same run", True, 1.5)
      for size in ("500,000", "4,000,000")
      for name, source in (("RocketMQ -> Kafka", "rocketmq"), ("Kafka -> RocketMQ", "kafka"))),
    # issue 31's fixed costs
    *((f"segstore info, small {name} store <= 0.25 s", "fixed_costs",
       f"segstore info, small {fmt_name} store", 0.25, "goal 0.25 s wall (speed: 0.25 s / ours)", False, 1.0)
      for name, fmt_name in (("RocketMQ", "rocketmq"), ("Kafka", "kafka"))),
    ("first Kafka scan_arrow in a fresh process >= 20x kafka-python", "fixed_costs",
     "first Kafka scan_arrow in a fresh process", None, "kafka-python, same run", True, 20.0),
]


def load() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob("*.json"))}


def fmt(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def table(rows: list[dict]) -> str:
    out = ["| operation | segstore | baseline (same run) | ratio | note |", "|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else ""
        out.append(f"| {r['operation']} | {fmt(r['value'])} {r['unit']} | {r['baseline']} "
                   f"{fmt(r['baseline_value'])} | {ratio} | {r['note']} |")
    return "\n".join(out)


def targets(results: dict[str, dict]) -> str:
    out = ["| target | anchor | segstore | speed vs anchor (1.0x = as fast) | goal | met |",
           "|---|---|---|---|---|---|"]
    for label, bench, prefix, anchor, anchor_label, higher, goal in TARGETS:
        rows = [r for r in results.get(bench, {}).get("rows", []) if r["operation"].startswith(prefix)]
        if not rows:
            out.append(f"| {label} | {anchor_label} | not measured | | >= {goal:.3g}x | |")
            continue
        r = rows[0]
        if anchor is None:   # the same-run baseline is the anchor (a time ratio when lower is better)
            ratio = r["ratio"] if higher or r["ratio"] is None else 1 / r["ratio"]
        else:
            ratio = r["value"] / anchor if higher else anchor / r["value"]
        met = "yes" if ratio is not None and ratio >= goal else "no"
        # a ratio just under its goal would read as the goal with two decimals: a third one then
        shown = ""
        if ratio is not None:
            shown = f"{ratio:.3f}x" if ratio < goal <= round(ratio, 2) else f"{ratio:.2f}x"
        out.append(f"| {label} | {anchor_label} | {fmt(r['value'])} {r['unit']} | "
                   f"{shown} | >= {goal:.3g}x | {met} |")
    return "\n".join(out)


def main() -> None:
    results = load()
    machines = {json.dumps(res["machine"], sort_keys=True) for res in results.values()}
    parts = [
        "# Performance",
        "",
        "Generated by `python -m benchmarks.report` from `benchmarks/results/*.json`; run everything with",
        "`bash scripts/bench.sh` (or name benchmarks: `bash scripts/bench.sh kafka_codec`). Benchmarks",
        "measure, they never assert: every figure stands beside a baseline measured in the same run on",
        "the same data, and the ratio is what to compare across machines. The Java figures are the",
        "brokers' own storage code (Apache RocketMQ 4.9.7, Apache Kafka 3.8.0) and kafka-python 3.0.12,",
        "measured on this machine kind (2 vCPU AMD EPYC, 23 GiB, ext4 on a virtual disk).",
        "",
        "## Machine",
        "",
    ]
    for m in sorted(machines):
        info = json.loads(m)
        parts.append(f"- {info['cpu']}, {info['cores']} cores, {info['memory']}, Python {info['python']}, "
                     f"{info['platform']}")
    parts += ["", "## Against the client's targets", "", targets(results), ""]
    for name, res in results.items():
        parts += [f"## {TITLES.get(name, name)}", "",
                  f"`benchmarks/bench_{name}.py`, run {res['time']} at commit `{res['commit']}`.", "",
                  table(res["rows"]), ""]
    notes = Path(__file__).resolve().parent / "NOTES.md"
    if notes.exists():
        parts += [notes.read_text().strip(), ""]
    DOC.write_text("\n".join(parts))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
