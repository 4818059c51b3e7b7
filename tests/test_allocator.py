"""segstore.allocator: glibc keeps freed memory for the next batch, and the command asks for it.

Measured by what it is for: a block freed and taken again costs no page faults the second time.
Each case runs in a fresh interpreter (the setting is process-wide and cannot be undone).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from segstore import allocator, cli

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

#: Touch a 16 MiB block page by page, free it, take and touch one again: the faults of the second.
_PROBE = """
import resource, sys
from segstore import allocator
if sys.argv[1] == "retain":
    assert allocator.retain()
def touched():
    block = bytearray(16 << 20)
    block[::4096] = b"x" * len(range(0, 16 << 20, 4096))
    return block
first = touched()
del first
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
second = touched()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _second_faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@glibc
def test_a_freed_block_is_taken_again_without_faults_once_retained() -> None:
    pages = (16 << 20) // 4096
    assert _second_faults("retain") < pages // 8
    # glibc's default gives the block back (it is mapped on its own): every page faults again
    assert _second_faults("default") >= pages // 2


def test_retain_says_whether_it_applied() -> None:
    out = subprocess.run([sys.executable, "-c", "from segstore import allocator; print(allocator.retain())"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(platform.libc_ver()[0] == "glibc")


def test_the_command_retains_before_it_runs(monkeypatch, capsys) -> None:
    calls = []
    monkeypatch.setattr(allocator, "retain", lambda: calls.append("retain") or True)
    monkeypatch.setattr(cli, "main", lambda argv=None, out=None: calls.append("main") or 0)
    assert cli.command() == 0
    assert calls == ["retain", "main"]


def test_retain_starts_no_process() -> None:
    """Every ``segstore`` command calls it first: finding the C library by name runs ``ldconfig``
    (``ctypes.util.find_library``), 0.03 s of a command's start-up; the library is in the process."""
    code = """
import subprocess
def refuse(*args, **kwargs):
    raise AssertionError("retain started a process")
subprocess.Popen = refuse
from segstore import allocator
print(allocator.retain())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(platform.libc_ver()[0] == "glibc")


#: Arrow's jemalloc pool: 16 blocks of 2 MiB touched and freed; a second round taken after jemalloc's
#: decay (1 s as pyarrow configures it) has given the first round's pages back, unless retained.
_ARROW_PROBE = """
import resource, sys, time
from segstore import allocator
if sys.argv[1] == "retain":
    allocator.retain()
import numpy as np, pyarrow as pa
pool = pa.jemalloc_memory_pool()
def touched():
    blocks = [pa.allocate_buffer(2 << 20, memory_pool=pool) for _ in range(16)]
    for block in blocks:
        np.frombuffer(block, np.uint8)[::4096] = 1
    return blocks
first = touched()
del first
time.sleep(1.5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
second = touched()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _arrow_second_faults(mode: str, **env: str) -> int:
    environ = {k: v for k, v in os.environ.items() if k != allocator.ARROW_POOL_ENV}
    out = subprocess.run([sys.executable, "-c", _ARROW_PROBE, mode], capture_output=True, text=True,
                         check=True, env={**environ, **env})
    return int(out.stdout)


def test_arrow_pool_blocks_are_taken_again_without_faults_once_retained() -> None:
    """Without it (measured 2026-11-29, pyarrow 26) the second round faulted 2,560 of its 8,192
    pages after the sleep: the pool had given them back; a Kafka conversion's decoder faulted 101k
    pages per 1M records so."""
    pages = (32 << 20) // 4096
    assert _arrow_second_faults("retain") < pages // 8


def test_retain_leaves_the_arrow_pool_options_a_process_sets() -> None:
    code = f"""
import os
from segstore import allocator
allocator.retain()
print(os.environ[{allocator.ARROW_POOL_ENV!r}])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, allocator.ARROW_POOL_ENV: "dirty_decay_ms:500"})
    assert out.stdout.strip() == "dirty_decay_ms:500"
