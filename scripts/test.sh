#!/usr/bin/env bash
# The test command: set up .venv and run the whole test suite (Spark tests on local Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Static checks first (config in pyproject.toml): lint, types (segstore/ and both plugins), and the
# import contracts between the core and the format plugins.
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/lint-imports
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
