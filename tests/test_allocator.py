"""segstore.allocator: glibc keeps freed memory for the next batch, and the command asks for it.

Measured by what it is for: a block freed and taken again costs no page faults the second time.
Each case runs in a fresh interpreter (the setting is process-wide and cannot be undone).
"""

from __future__ import annotations

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
