"""Ctrl-C (SIGINT) during a command: one line on stderr and exit 130 (128 + SIGINT, what shells
report), never a Python traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import segstore

ROOT = Path(__file__).resolve().parent.parent


def test_an_interrupted_dump_says_so_and_exits_130(tmp_path):
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a", messageIndexEnable=False) as s:
        for _ in range(20):
            s.append_batch([{"topic": "T", "queue_id": i % 4, "body": b"x" * 200} for i in range(5000)])
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    proc = subprocess.Popen([sys.executable, "-m", "segstore.cli", "dump", str(store), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.read(4096)   # it is dumping (then blocks: unread pipe)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and err.strip().endswith(b"segstore dump: interrupted")


def test_a_command_out_of_memory_says_so_in_one_line_and_exits_1(tmp_path, monkeypatch, capsys):
    """A process whose address space is capped (ulimit -v) gets MemoryError wherever it next
    allocates: the CLI answers it as a data problem, one line, no traceback."""
    from segstore import cli

    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a") as s:
        s.append({"topic": "T", "queue_id": 0, "body": b"x"})

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(cli, "open_store", no_memory)
    assert cli.main(["info", str(store)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("segstore info: expected the memory the command needs")


def test_a_library_that_cannot_be_mapped_for_want_of_memory_says_so_in_one_line(tmp_path, monkeypatch,
                                                                                 capsys):
    """Under ``ulimit -v`` a command that loads numpy or pyarrow lazily (``segstore dump STORE --json``
    under 100-250 MB) got ImportError "...: failed to map segment from shared object" from the dynamic
    loader (numpy wraps it in its own ImportError) and printed a traceback; it is the memory line, exit
    1.  Another ImportError is no memory problem and is not hidden."""
    import pytest

    from segstore import cli

    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a") as s:
        s.append({"topic": "T", "queue_id": 0, "body": b"x"})

    def no_map(*args, **kwargs):
        loader = ImportError("/venv/numpy/_core/_multiarray_umath.so: failed to map segment from shared "
                             "object")
        raise ImportError("Importing the numpy C-extensions failed.") from loader

    monkeypatch.setattr(cli, "open_store", no_map)
    assert cli.main(["dump", str(store), "--json"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("segstore dump: expected the memory the command needs")
    assert len(err.splitlines()) == 1

    def missing(*args, **kwargs):
        raise ImportError("No module named 'nothing_here'")

    monkeypatch.setattr(cli, "open_store", missing)
    with pytest.raises(ImportError, match="nothing_here"):
        cli.main(["dump", str(store), "--json"])


# The executable as pip writes it for pyproject's [project.scripts] entry, with a Ctrl-C landing
# while the module named in argv[2] is being imported (what a user's Ctrl-C in the command's first
# second does: importing the command line, numpy and pyarrow takes most of it).
_EXECUTABLE = """
import os, signal, sys
entry = sys.argv[1]
heavy = {sys.argv[2]}
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name in heavy:
            heavy.discard(name)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())
sys.argv = ["segstore", *sys.argv[3:]]
module, _, attr = entry.partition(":")
exec(f"from {module} import {attr} as run")
sys.exit(run())
"""


def _interrupted_while_importing(module: str, *argv: str) -> subprocess.CompletedProcess:
    found = re.search(r'^segstore = "([\w.:]+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert found is not None    # [project.scripts] (tomllib is 3.11's)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    return subprocess.run([sys.executable, "-c", _EXECUTABLE, found[1], module, *argv],
                          capture_output=True, text=True, env=env, timeout=120)


def test_a_ctrl_c_while_the_executable_imports_says_so_and_exits_130(tmp_path):
    store = tmp_path / "store"
    with segstore.open(store, format="rocketmq", mode="a") as s:
        s.append({"topic": "T", "queue_id": 0, "body": b"x"})
    for module in ("argparse", "numpy", "segstore.files", "segstore_rocketmq.store"):
        done = _interrupted_while_importing(module, "dump", str(store))
        assert (done.returncode, done.stderr) == (130, "segstore dump: interrupted\n"), module
    done = _interrupted_while_importing("argparse", "--version")
    assert (done.returncode, done.stderr) == (130, "segstore: interrupted\n")


def test_a_ctrl_c_ends_a_follow_with_exit_0_from_its_first_line(tmp_path, monkeypatch, capsys):
    """``dump --follow`` ends by Ctrl-C (exit 0, docs/cli.md): while it imports, and while it reads
    the offsets ``--group`` committed before it follows (that was 130)."""
    store = tmp_path / "logs"
    with segstore.open(store / "t-0", format="kafka", mode="a") as s:
        s.append({"topic": "t", "partition": 0, "value": b"x"})
    done = _interrupted_while_importing("argparse", "dump", str(store), "--fol")
    assert (done.returncode, done.stderr) == (0, "")
    from segstore import cli

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_group_rows", ctrl_c)
    assert cli.main(["dump", str(store), "--group", "g", "--follow"]) == 0
    assert capsys.readouterr().err == ""
