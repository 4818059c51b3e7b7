"""Ctrl-C (SIGINT) during a command: one line on stderr and exit 130 (128 + SIGINT, what shells
report), never a Python traceback."""

from __future__ import annotations

import os
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
