#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install segstore into it,
# editable, with the extras for tests, Spark and benchmarks. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# uv installs what pip installs (the same wheels from PyPI, the editable build with setuptools) in a
# fifth of the time: 43 s against pip's 205 s on a 2-core machine, most of CI's set-up.  Where uv
# cannot be had or fails, pip does it.  Both compile the installed modules to bytecode (uv only when
# asked): where PYTHONDONTWRITEBYTECODE is set, as on our CI machines, nothing else ever writes it, and
# every process (each CLI run, Spark Python worker, test subprocess) compiled numpy, pyarrow and
# pyspark from source again: `segstore info` on a small store took 1.0 s instead of 0.25 s.
if ! { .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv>=0.5" >/dev/null 2>&1 &&
       .venv/bin/python -m uv pip install --quiet --compile-bytecode --python .venv/bin/python \
           -e '.[test,spark,bench]'; }; then
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    .venv/bin/python -m pip install --quiet -e '.[test,spark,bench]'
fi
# The editable install imports segstore from this checkout, which no installer compiles. A module
# changed later is compiled from source when imported, never run stale (its bytecode records the
# source's mtime and size).
.venv/bin/python -m compileall -q -j 0 segstore formats tests benchmarks >/dev/null
