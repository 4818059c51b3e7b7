"""Shared test fixtures: paths of the compat fixtures and copies that tests may modify."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "compat_fixtures"
ROCKETMQ_FIXTURES = sorted(p.name for p in (FIXTURES / "rocketmq").iterdir() if p.is_dir())
KAFKA_FIXTURES = sorted(p.name for p in (FIXTURES / "kafka").iterdir() if p.is_dir())

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    """A run started in the background of a non-interactive shell (``cmd &``) inherits SIGINT ignored,
    and so would every command the tests start: the tests that Ctrl-C one (``dump --follow``) waited
    60 s each on a process Ctrl-C cannot end.  Ctrl-C is given its default back, as a terminal has it."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def cli_run(*argv: object) -> tuple[int, str, str]:
    """``segstore ARGV`` in this process: its exit code (argparse's own errors exit through
    SystemExit), stdout and stderr."""
    import contextlib
    import io

    from segstore import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(arg) for arg in argv], out)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` decodes as UTF-8 (a text a string column or a header key can hold)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def kafka_log_dir(path: Path, rounds: int, headers: Callable[[int], list],
                  after: Callable[[Any], None] | None = None) -> Path:
    """A Kafka log dir at ``path``: two topics (``a``, ``b``) of two partitions in 1000-byte segments
    (many rolls, an index entry every 200 bytes); ``rounds`` batches of 1-4 records each (a key on two
    records of three, ``headers(j)`` on record ``j`` when odd), then on ``a-0`` an aborted zstd
    transaction and an lz4 batch; ``after(store)`` last, the store still open."""
    import segstore

    with segstore.open(path, format="kafka", mode="a", **{"segment.bytes": 1000,
                                                          "index.interval.bytes": 200}) as store:
        for i in range(rounds):
            store.append_batch([{"topic": topic, "partition": i % 2, "key": b"k%d" % j if j % 3 else None,
                                 "value": b"v" * (i + j), "timestamp": 1_700_000_000_000 + i,
                                 "headers": headers(j) if j % 2 else []}
                                for topic in ("a", "b") for j in range(1 + i % 4)])
        part = store.partition_of("a", 0)
        part.append_records([(b"t", b"txn", 5)], producer_id=9, producer_epoch=0, transactional=True,
                            compression="zstd")
        part.append_control("ABORT", producer_id=9, producer_epoch=0, coordinator_epoch=1, timestamp=6)
        part.append_records([(b"z", b"lz4", 7)] * 5, compression="lz4")
        if after is not None:
            after(store)
    return path


def copy_writable(src: Path, dst: Path) -> Path:
    """Copy a fixture tree so a test may modify it (the originals are read-only)."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in dirnames + filenames:
            os.chmod(os.path.join(dirpath, name), 0o755 if name in dirnames else 0o644)
    return dst


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


def kill_after_append(script: str, path: str) -> None:
    """Run ``script`` (``python -c``, its argument ``path``) in a child until it prints ``appended``,
    then SIGKILL it: a writer killed with no close run."""
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", script, path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "appended\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdout, proc.stdin):
            if stream is not None:
                stream.close()
