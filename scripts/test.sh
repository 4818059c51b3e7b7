#!/usr/bin/env bash
# The test command: set up .venv and run the whole test suite (Spark tests on local Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Static checks first (config in pyproject.toml): lint, types (segstore/ and both plugins), and the
# import contracts between the core and the format plugins.
.venv/bin/ruff check .
# mypy (compiled) once died of SIGBUS on a loaded machine with a clean result on every rerun: a run
# killed by a signal is retried once; a type error (exit 1) fails at once.
.venv/bin/mypy || { rc=$?; [ "$rc" -gt 128 ] && echo "mypy killed by signal $((rc - 128)); once more" >&2 \
    && .venv/bin/mypy; } || exit 1
.venv/bin/lint-imports
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
