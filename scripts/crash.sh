#!/bin/sh
# The crash suite at length (issue 15; figures in docs/reliability.md): real writers of both formats
# killed with SIGKILL KILLS times in all (half RocketMQ, half Kafka), the store checked after each kill.
#   scripts/crash.sh [KILLS [SEED [JOBS]]]      e.g. scripts/crash.sh 1000 20261123 2
# Prints (and writes to crash-summary-SEED.md) kills, where they landed, acknowledged, lost and outcomes;
# a copy of every store a kill left wrong goes to crash-kept-SEED/.  Exit 1 if any kill went wrong.
set -eu
cd "$(dirname "$0")/.."
KILLS=${1:-1000}
SEED=${2:-20261123}
JOBS=${3:-2}
PYTHON=${PYTHON:-python}
export PYTHONPATH="$PWD:$PWD/formats${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m tests.crash --kills "$KILLS" --seed "$SEED" --jobs "$JOBS" --out "crash-summary-$SEED.md" \
    --keep "crash-kept-$SEED"
