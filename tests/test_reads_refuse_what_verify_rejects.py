"""Reads never serve what ``verify`` rejects (issue 15): dump, scan, scan_arrow, read and convert raise
one typed error naming the file and position ``verify`` names, after the records before it.

Fields no CRC covers decode whatever they hold, so each case damages one:

- RocketMQ PHYSICALOFFSET / QUEUEID (``MessageDecoder``: offsets 28 and 12; the body CRC covers only
  the body): a message whose header contradicts its position is torn (``CommitLog.checkMessageAndReturnSize``
  takes the stored fields as they are; recovery here refuses it);
- RocketMQ QUEUEOFFSET: a consume queue's entry ``n`` points at the message whose QUEUEOFFSET is ``n``
  (``ConsumeQueue.putMessagePositionInfo``); a queue read meeting another raises;
- Kafka base offset (``DefaultRecordBatch``: bytes 0-7, before the CRC-32C's range from the attributes
  on): a batch going back below the end of the one before it.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import damage
import pytest
from conftest import ROOT

import segstore
from segstore.errors import CorruptDataError

ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
FILE_SIZE = 65536
QUEUEID_POS, QUEUEOFFSET_POS, PHYSICALOFFSET_POS = 12, 20, 28


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "segstore.cli", *argv], capture_output=True, text=True,
                          env=ENV, timeout=120, check=False)


def _rocketmq_with(tmp_path: Path, field: int, value: bytes) -> tuple[Path, dict, str]:
    """The basic RocketMQ fixture with one header field of its fourth message overwritten; returns the
    store, the pristine record and the ``path:pos: `` verify and reads must name."""
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "r")
    rc, records, err = damage.dump_records(str(store))
    assert rc == 0, err
    victim = records[3]
    phy = victim["physical_offset"]
    path = store / "commitlog" / f"{phy - phy % FILE_SIZE:020d}"
    raw = bytearray(path.read_bytes())
    raw[phy % FILE_SIZE + field:phy % FILE_SIZE + field + len(value)] = value
    path.write_bytes(bytes(raw))
    return store, victim, f"{path}:{phy % FILE_SIZE}: "


def _library(store: Path, how: str) -> None:
    with segstore.open(str(store)) as s:
        if how == "scan":
            list(s.scan())
        elif how == "scan_arrow":
            list(s.scan_arrow())
        else:
            for t in s.topics():
                for p in s.partitions(t):
                    list(s.read(t, p))


@pytest.mark.parametrize(("field", "value", "says"), [
    (PHYSICALOFFSET_POS, struct.pack(">q", -1), "found one claiming offset -1"),
    (QUEUEID_POS, struct.pack(">i", -1), "expected a queue id >= 0, found -1"),
], ids=["physicaloffset", "queueid"])
def test_a_rocketmq_header_contradicting_its_position_is_refused_by_every_read(tmp_path, field, value, says):
    """Before: ``scan`` served the message (366 of 366) while dump, scan_arrow, read and convert raised."""
    store, _victim, where = _rocketmq_with(tmp_path, field, value)
    verify = _cli("verify", str(store))
    assert verify.returncode == 1 and where + "expected" in verify.stdout + verify.stderr
    dump = _cli("dump", "--json", str(store))
    assert dump.returncode == 1 and where in dump.stderr and says in dump.stderr
    convert = _cli("convert", str(store), str(tmp_path / "k"), "--to", "kafka")
    assert convert.returncode == 1 and where in convert.stderr, convert.stderr
    for how in ("scan", "scan_arrow", "read"):
        with pytest.raises(CorruptDataError) as err:
            _library(store, how)
        assert str(err.value).startswith(where) and says in str(err.value), how


def test_a_rocketmq_queue_offset_other_than_its_entry_is_refused_by_queue_reads(tmp_path):
    """QUEUEOFFSET 999 where the consume queue's entry 0 points: verify names the entry; read and the
    queue's scan_arrow raise at the message (before: read served it with queue offset 999)."""
    store, victim, where = _rocketmq_with(tmp_path, QUEUEOFFSET_POS, struct.pack(">q", 999))
    verify = _cli("verify", str(store))
    # the message says queue offset 999; the entry holds offset 0
    assert verify.returncode == 1 and ": (TopicB, 1, 999, size" in verify.stdout + verify.stderr
    topic, queue = victim["topic"], victim["queue_id"]
    with segstore.open(str(store)) as s:
        with pytest.raises(CorruptDataError) as err:
            list(s.read(topic, queue))
        assert str(err.value).startswith(where) and "(queue offset 999)" in str(err.value)
        with pytest.raises(CorruptDataError) as err:
            list(s.scan_arrow(topic=topic, partition=queue))
        assert str(err.value).startswith(where) and "(queue offset 999)" in str(err.value)
    query = _cli("query", str(store), "--topic", topic, "--queue", str(queue), "--offset", "0")
    assert query.returncode == 1 and where in query.stderr


@pytest.mark.parametrize("base", [0, -1])
def test_a_kafka_batch_whose_base_offset_goes_back_is_refused_by_every_read(tmp_path, base):
    """The second batch's base offset set to 0 or -1: verify said ``expected offsets from 1, found a batch
    at 0``, while dump, scan, scan_arrow, read and convert served it (offset 0 twice, or -1)."""
    logdir = damage.make_pristine("kafka", "uncompressed", tmp_path / "k")
    log = logdir / "topic-0" / f"{0:020d}.log"
    raw = bytearray(log.read_bytes())
    second = 12 + struct.unpack_from(">i", raw, 8)[0]
    struct.pack_into(">q", raw, second, base)
    log.write_bytes(bytes(raw))
    where = f"{log}:{second}: expected offsets from 1, found a batch at {base}"
    verify = _cli("verify", str(logdir))
    assert verify.returncode == 1 and where in verify.stdout + verify.stderr
    dump = _cli("dump", "--json", str(logdir))
    assert dump.returncode == 1 and where in dump.stderr
    assert len(dump.stdout.splitlines()) == 1           # the first batch's one record, then the error
    out = tmp_path / "r"
    convert = _cli("convert", str(logdir), str(out), "--to", "rocketmq")
    assert convert.returncode == 1 and where in convert.stderr
    shutil.rmtree(out, ignore_errors=True)
    with segstore.open(str(logdir)) as s:
        for read in (lambda: list(s.scan()), lambda: list(s.scan_arrow()), lambda: list(s.read("topic", 0)),
                     lambda: list(s.scan_arrow(topic="topic", partition=0, offset=0))):
            with pytest.raises(CorruptDataError) as err:
                read()
            assert str(err.value) == where
        got = []
        with pytest.raises(CorruptDataError):
            for record in s.scan():
                got.append(record.offset)
        assert got == [0]                                # the records before it are served
