#!/usr/bin/env bash
# Run every benchmark (or the ones named: bash scripts/bench.sh rocketmq_append kafka_codec).
# Results: benchmarks/results/NAME.{json,md}; docs/performance.md quotes them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
if [ $# -eq 0 ]; then
    set -- $(ls benchmarks/bench_*.py | sed 's|benchmarks/bench_||; s|\.py$||')
fi
for name in "$@"; do
    echo "== $name"
    .venv/bin/python -m "benchmarks.bench_$name"
done
.venv/bin/python -m benchmarks.report
