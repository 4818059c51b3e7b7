"""RocketMQ reads of a damaged store give its damage, not a shorter answer (RocketMQ 4.9.7).

- A commitlog cut short at a message boundary (or emptied) still has consume-queue entries
  pointing past its end: ``dump`` prints what the log holds, then fails naming the first entry
  whose message is gone, where a walk of the log alone ends quietly.
- A key hit or an offset msgId naming a message whose body CRC is damaged: the broker's
  ``queryMessage``/``viewMessage`` serve it unchecked; segstore says it is damaged, at its file and
  byte, instead of answering that no such message exists.
- Zeros written over a message's header in the middle of a file (``TOTALSIZE`` and ``MAGICCODE`` 0):
  RocketMQ 4.9.7 ``CommitLog.checkMessageAndReturnSize`` takes magic 0 for an illegal magic code, not
  a BLANK; verify calls them damage before later valid messages.  Every read (scan, scan_arrow, dump,
  in C and pure Python, on one thread or several) raises that error at that file and byte, after
  the messages before it, instead of ending the file's data there and leaving out every message
  after it.  Zeros with nothing but zeros after them to the file's end stay its unwritten tail.
- ``query --offset`` below a queue's first offset: ``DefaultMessageStore.getMessage`` answers
  ``OFFSET_TOO_SMALL`` (``mqadmin queryMsgByOffset`` prints nothing); so does segstore, not the
  messages after it.  Kafka's fetch answers ``OFFSET_OUT_OF_RANGE`` there too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cli_run

import segstore
from segstore.errors import CorruptDataError

T = 1_700_000_000_000


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """300 messages over six 16 KiB commitlog files; topics T0/T1 with 3 queues; keys ``k<i>`` and
    ``shared``."""
    root = tmp_path_factory.mktemp("rmq")
    lines = [json.dumps({"topic": f"T{i % 2}", "queue_id": i % 3, "body": "x" * (100 + i % 50),
                         "tags": f"tag{i % 4}", "keys": [f"k{i}", "shared"], "store_timestamp": T + i * 1000})
             for i in range(300)]
    (root / "in.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = cli_run("write", root / "base", "--input", root / "in.jsonl",
                           "--config", "mappedFileSizeCommitLog=16384",
                           "--config", "mappedFileSizeConsumeQueue=400")
    assert code == 0, err
    return root / "base"


def _copy(store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    return copy


def _selected(argv: tuple[str, ...], topic: str, queue: int) -> bool:
    return "--topic" not in argv or (topic, queue) == ("T1", 2)


@pytest.mark.parametrize("argv", [(), ("--json",), ("--threads", "2"), ("--topic", "T1", "--queue", "2")])
def test_dump_of_a_commitlog_whose_last_files_are_gone_names_the_first_lost_entry(store, tmp_path, argv):
    """The files after the second are gone: the log ends at a file boundary, whole; the queues say more."""
    copy = _copy(store, tmp_path)
    with segstore.open(str(copy)) as opened:
        messages = list(opened.scan())
    for later in sorted((copy / "commitlog").iterdir())[2:]:
        later.unlink()
    kept = [m for m in messages if m.physical_offset < 32768 and _selected(argv, m.topic, m.queue_id)]
    lost = [m for m in messages if m.physical_offset >= 32768 and _selected(argv, m.topic, m.queue_id)]
    first = min(lost, key=lambda m: (m.topic, m.queue_id, m.queue_offset))
    code, out, err = cli_run("dump", copy, *argv)
    assert code == 1
    assert len(out.splitlines()) == len(kept)       # what the log holds, then the error
    assert f"consumequeue/{first.topic}/{first.queue_id}/" in err
    assert (f"expected the commitlog to hold the message of {first.topic}/{first.queue_id} offset "
            f"{first.queue_offset} (physical offset {first.physical_offset}, {first.size} bytes), "
            "found the commitlog ending at 32768") in err


def test_dump_of_a_one_file_commitlog_cut_at_a_message_boundary_fails(tmp_path):
    """One commitlog file cut short at a message boundary reads as a whole (shorter) file; its queues
    still point past it.  An emptied file likewise."""
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"topic": "A", "queue_id": i % 2, "body": f"m{i}"})
                                               + "\n" for i in range(10)))
    store = tmp_path / "store"
    assert cli_run("write", store, "--input", tmp_path / "in.jsonl",
                   "--config", "mappedFileSizeCommitLog=1048576")[0] == 0
    log = store / "commitlog" / "00000000000000000000"
    with segstore.open(str(store)) as opened:
        messages = list(opened.scan())
    os.truncate(log, messages[4].physical_offset)
    code, out, err = cli_run("dump", store, "--topic", "A", "--queue", "1")
    assert code == 1 and len(out.splitlines()) == 2
    assert f"of A/1 offset 2 (physical offset {messages[5].physical_offset}" in err
    os.truncate(log, 0)
    code, out, err = cli_run("dump", store, "--json")
    assert (code, out) == (1, "") and "of A/0 offset 0 (physical offset 0" in err


def test_a_last_entry_whose_message_never_reached_the_disk_is_past_the_data_end(tmp_path):
    """A crash flushed a queue's last entry but not its message (zeros there): the broker's recovery stops
    at those zeros (RocketMQ 4.9.7 CommitLog.recoverAbnormally, an illegal magic code) and drops the
    entry (truncateDirtyLogicFiles: maxPhyOffset 11248, B/1 maxOffset 9).  A reader took the entry's end
    for the data end: info reported a commitlog end past the last message and dump --queue left the lost
    message out with exit 0."""
    store = tmp_path / "s"
    with segstore.open(str(store), format="rocketmq", mode="a", mappedFileSizeCommitLog=65536,
                       mappedFileSizeConsumeQueue=1000) as st:
        results = [st.append({"topic": "B", "queue_id": i % 2, "body": b"b" * 500}) for i in range(20)]
    last = results[-1]
    log = store / "commitlog" / f"{0:020d}"
    with open(log, "r+b") as f:
        f.seek(last.position)
        f.write(bytes(last.size))
    (store / "abort").write_bytes(b"")
    with segstore.open(str(store)) as reader:
        assert reader.info()["commitlog"]["max_offset"] == last.position
    code, out, err = cli_run("dump", store, "--topic", "B", "--queue", "1")
    assert code == 1 and len(out.splitlines()) == 9
    assert f"of B/1 offset 9 (physical offset {last.position}" in err


def test_a_key_hit_with_a_damaged_body_is_the_error_not_a_miss(store, tmp_path):
    copy = _copy(store, tmp_path)
    with segstore.open(str(copy)) as opened:
        (hit,) = opened.find("T0", "k118")
    body_at = hit.physical_offset + hit.size - 40       # inside the body, before the topic and properties
    seg = 16384 * (body_at // 16384)
    with open(copy / "commitlog" / f"{seg:020d}", "r+b") as f:
        f.seek(body_at - seg)
        f.write(b"\xff\xff\xff")
    where = f"{copy}/commitlog/{seg:020d}:{hit.physical_offset - seg}: "
    for argv in (("--topic", "T0", "--key", "k118"), ("--topic", "T0", "--key", "shared"),
                 ("--msg-id", hit.msg_id)):
        code, out, err = cli_run("query", copy, *argv)
        assert (code, out) == (1, ""), argv
        assert where in err and "body CRC" in err, argv
    # hits elsewhere are unaffected
    code, out, _ = cli_run("query", copy, "--topic", "T0", "--key", "k120")
    assert code == 0 and "k120" in out


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_query_offset_below_the_first_offset_held_is_no_answer(store, tmp_path, fmt):
    if fmt == "rocketmq":
        copy = _copy(store, tmp_path)
        for name in ("00000000000000000000", "00000000000000016384"):
            (copy / "commitlog" / name).unlink()
        selector = ("--topic", "T0", "--queue", "1")
    else:
        lines = [json.dumps({"topic": "t", "partition": 0, "value": f"v{i}"}) for i in range(30)]
        (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
        copy = tmp_path / "logs"
        assert cli_run("write", copy, "--format", "kafka", "--input", tmp_path / "in.jsonl")[0] == 0
        assert cli_run("delete-records", copy, "--before", "20")[0] == 0
        selector = ("--topic", "t", "--partition", "0")
    with segstore.open(str(copy)) as opened:
        low, _ = opened.offset_range(selector[1], int(selector[3]))
    assert low > 1
    code, out, err = cli_run("query", copy, *selector, "--offset", "0", "--count", "2")
    assert (code, out) == (1, "")
    assert f"{copy}: expected an offset of {selector[1]}/{selector[3]} from its first held, {low}" in err
    assert err.rstrip().endswith("found 0")
    code, out, _ = cli_run("query", copy, *selector, "--offset", str(low), "--json")
    field = "offset" if fmt == "kafka" else "queue_offset"
    assert code == 0 and json.loads(out.splitlines()[0])[field] == low


@pytest.mark.parametrize("victim", [40, 290], ids=["first-file", "last-file"])
def test_zeros_over_a_message_header_are_damage_every_read_names(store, tmp_path, victim):
    """Before: dump and scan ended the file's data at the zeros and went on at the next file (exit 0,
    the messages after them left out) while verify reported them; 0xFF bytes there raised."""
    copy = _copy(store, tmp_path)
    with segstore.open(str(copy)) as opened:
        messages = list(opened.scan())
    hit = messages[victim]
    size = 16384
    log = copy / "commitlog" / f"{hit.physical_offset - hit.physical_offset % size:020d}"
    pos = hit.physical_offset % size
    with open(log, "r+b") as f:
        f.seek(pos)
        f.write(bytes(8))
    said = (f"{log}:{pos}: expected a message or a BLANK, found zeros before later valid messages "
            f"({hit.size} damaged bytes)")
    code, out, err = cli_run("verify", copy)
    assert code == 1 and said in out + err
    with segstore.open(str(copy)) as opened:
        read: list = []
        with pytest.raises(CorruptDataError) as raised:
            read.extend(opened.scan())
        assert str(raised.value) == said and read == messages[:victim]
        for threads in (1, 4):
            rows = 0
            with pytest.raises(CorruptDataError) as raised:
                for batch in opened.scan_arrow(["offset"], threads=threads):
                    rows += batch.num_rows
            assert str(raised.value) == said and rows == victim
    before = messages[:victim]
    for argv in [(), ("--json",), ("--threads", "2"), ("--topic", hit.topic, "--queue", str(hit.queue_id))]:
        code, out, err = cli_run("dump", copy, *argv)
        kept = [m for m in before
                if "--topic" not in argv or (m.topic, m.queue_id) == (hit.topic, hit.queue_id)]
        assert (code, len(out.splitlines())) == (1, len(kept)) and said in err, argv
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")]),
           "SEGSTORE_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-m", "segstore.cli", "dump", str(copy), "--json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert (done.returncode, len(done.stdout.splitlines())) == (1, victim) and said in done.stderr
