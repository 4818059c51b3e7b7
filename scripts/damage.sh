#!/bin/sh
# The seeded corruption suite at length (issue 15; figures in docs/reliability.md).
#   scripts/damage.sh [CASES [SEED [JOBS]]]     e.g. scripts/damage.sh 20000 20261123 8
# Writes the summary table (runs, outcomes by command and file kind, failing cases with the
# command reproducing each) to damage-summary-SEED.md, refreshed every 25 cases.
set -eu
cd "$(dirname "$0")/.."
CASES=${1:-20000}
SEED=${2:-20261123}
JOBS=${3:-$(nproc)}
PYTHON=${PYTHON:-python}
export PYTHONPATH="$PWD:$PWD/formats${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m tests.damage --cases "$CASES" --seed "$SEED" --jobs "$JOBS" --out "damage-summary-$SEED.md"
