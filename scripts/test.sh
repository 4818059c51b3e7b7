#!/usr/bin/env bash
# The test command: set up .venv and run the whole test suite (Spark tests on local Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Static checks first (config in pyproject.toml): lint, types (segstore/ and both plugins), and the
# import contracts between the core and the format plugins.
.venv/bin/ruff check .
# mypy's incremental cache lives beside the Spark jar's, outside the checkout: a fresh clone checks
# in 1 s what takes 38 s cold (a file whose content is unchanged is not checked again; mypy compares
# each file's hash where its mtime differs, so the cache never answers for changed code).
.venv/bin/mypy --cache-dir "${XDG_CACHE_HOME:-$HOME/.cache}/segstore/mypy"
.venv/bin/lint-imports
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
# The whole suite on every core the process may use (at most 4: each worker starts its own local
# Spark), a test file to a worker (--dist loadfile: a module's fixtures are made once, its tests
# run in their order); a worker more than the cores was no faster (1,002 s against 1,003 s on 2
# cores). SEGSTORE_TEST_JOBS overrides the count.
JOBS=${SEGSTORE_TEST_JOBS:-$(.venv/bin/python -c 'import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))')}
.venv/bin/python -m pytest -n "$JOBS" --dist loadfile
# The compatibility, codec, recovery and index tests once more on the pure-Python paths
# (SEGSTORE_PURE_PYTHON=1 switches the C accelerators off): a machine without a C compiler
# gets the same bytes and answers. Tests that compare C with Python skip themselves here, and
# the slow ones (a million-message round trip: 150 s in pure Python) ran in the pass above.
SEGSTORE_PURE_PYTHON=1 .venv/bin/python -m pytest -q -p no:cacheprovider -m "not slow" -n "$JOBS" --dist loadfile \
    tests/test_rocketmq_fixtures.py tests/test_kafka_fixtures.py \
    tests/test_rocketmq_codec.py tests/test_rocketmq_bodycodec.py tests/test_kafka_codec.py \
    tests/test_kafka_compat_codec.py \
    tests/test_rocketmq_columnar.py tests/test_kafka_columnar.py \
    tests/test_rocketmq_recovery.py tests/test_kafka_recovery.py \
    tests/test_rocketmq_broker_versions.py tests/test_kafka_real_dirs.py \
    tests/test_rocketmq_store.py tests/test_kafka_partition.py tests/test_rocketmq_verify.py \
    tests/test_rocketmq_index.py tests/test_kafka_index.py \
    tests/test_convert_*.py tests/test_kafka_compaction.py tests/test_layouts_fixtures.py \
    tests/test_rocketmq_speedups.py tests/test_kafka_dictappend.py tests/test_kafka_arrowappend.py \
    tests/test_rocketmq_append_arrow.py tests/test_rocketmq_append_messages.py \
    tests/test_rocketmq_write_input_columns.py
