#!/usr/bin/env bash
# The main job: set up .venv, then write a local RocketMQ store, dump, query and read it
# (with local Spark), and print where everything is. Arguments go to `python -m segstore.demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m segstore.demo "$@"
