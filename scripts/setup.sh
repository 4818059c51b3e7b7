#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install segstore into it,
# editable, with the extras for tests, Spark and benchmarks. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e '.[test,spark,bench]'
