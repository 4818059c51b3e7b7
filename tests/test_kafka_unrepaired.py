"""``segstore recover`` on Kafka exits 1 when it leaves damage, 0 only when the partitions are clean
afterwards (issue 15), as RocketMQ's recover does with ``UnrepairedDataError``.

Kafka 3.8's ``LogLoader.recoverLog`` (``storage/src/main/java/org/apache/kafka/storage/internals/log/
LogLoader.java``) recovers only the segments from the one holding the recovery point
(``recovery-point-offset-checkpoint``) on; the segments before it are left as they are, damaged
or not.  recover does the same, and then says what it left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import damage
from conftest import ROOT

import segstore
from segstore.errors import UnrepairedDataError

ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
SEG0 = f"{0:020d}.log"


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "segstore.cli", *argv], capture_output=True, text=True,
                          env=ENV, timeout=120, check=False)


def _flip(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x10
    path.write_bytes(bytes(data))


def test_damage_below_the_recovery_point_makes_recover_exit_1_naming_it(tmp_path: Path) -> None:
    """A flipped bit in the first segment's records; the log dir's recovery point (300) lies in the last
    segment, so recovery leaves the first one as Kafka does: exit 1, ``path:pos`` of the bad batch."""
    logdir = damage.make_pristine("kafka", "uncompressed", tmp_path)
    log = logdir / "topic-0" / SEG0
    _flip(log, 200)
    before = log.read_bytes()
    proc = _cli("recover", str(logdir))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{log}:176: " in proc.stderr and "left by recovery" in proc.stderr
    assert log.read_bytes() == before        # below the recovery point: nothing cut
    as_json = _cli("recover", "--json", str(logdir))
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert doc["unrepaired"].startswith(f"{log}:176: ")


def test_the_library_raises_unrepaired_with_the_actions_taken(tmp_path: Path) -> None:
    """The same through the public API: ``UnrepairedDataError`` carries the lines of what was done (the
    torn tail of the last segment, cut and kept) while the damage below the recovery point stays."""
    logdir = damage.make_pristine("kafka", "uncompressed", tmp_path)
    _flip(logdir / "topic-0" / SEG0, 200)
    last = sorted((logdir / "topic-0").glob("*.log"))[-1]
    with last.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x01\x2c\x00\x00\x00\x40torn")   # a batch header cut short
    with segstore.open(logdir, format="kafka", mode="a") as store:
        try:
            store.recover()
        except UnrepairedDataError as err:
            assert err.path == str(logdir / "topic-0" / SEG0) and err.pos == 176
            assert any("cut" in line and last.name in line for line in err.actions), err.actions
        else:
            raise AssertionError("recover returned over a partition that still fails verify")


def test_recover_exits_0_when_the_partition_is_clean_afterwards(tmp_path: Path) -> None:
    """A torn tail of the active segment (what a crash leaves) is cut and kept: exit 0 and verify clean."""
    logdir = damage.make_pristine("kafka", "uncompressed", tmp_path)
    last = sorted((logdir / "topic-0").glob("*.log"))[-1]
    size = last.stat().st_size
    with last.open("ab") as f:
        f.write(b"\x00" * 8 + b"\x00\x00\x01\x00" + b"torn")
    proc = _cli("recover", str(logdir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"cut 16 bytes at {size}" in proc.stdout
    verify = _cli("verify", str(logdir))
    assert verify.returncode == 0, verify.stdout + verify.stderr
