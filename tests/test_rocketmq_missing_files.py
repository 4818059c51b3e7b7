"""A RocketMQ store with commitlog files missing (issue 28, item 11: "Hangs" and "Silent verify").

- A middle file deleted: ``recover`` ran past 30 s (the index check looked for the entries' messages
  in the file before the gap and never moved on), and with the basic store's three files the
  mapped-file size was taken from the names (0 and 524288: one step of two sizes), so recovery
  "resized" both files to 512 KiB, which RocketMQ's ``MappedFileQueue.load`` then refuses.
- The first file deleted: ``verify`` is clean (so is the broker: it is what retention leaves), but
  ``read(topic, q, 0)`` failed, where RocketMQ 4.9.7's ``DefaultMessageStore.getMessage`` answers
  an offset below the queue's minimum (set by ``ConsumeQueue.correctMinOffset`` at load) with
  ``OFFSET_TOO_SMALL`` and that minimum as the next offset to pull (``nextOffsetCorrection``).
"""

from __future__ import annotations

import subprocess
import sys

import damage
import numpy as np
import pytest

import segstore
from segstore import cli

#: a hang guard, not a timing: the commands take about a second
LIMIT_S = 120


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "segstore.cli", *argv], capture_output=True, text=True,
                          env=damage._env(), timeout=LIMIT_S, check=False)


@pytest.mark.parametrize(("name", "size", "gone"), [("abort", 65536, 131072), ("basic", 262144, 262144)])
def test_recover_with_a_middle_commitlog_file_deleted_ends_naming_it(tmp_path, name, size, gone):
    store = damage.make_pristine("rocketmq", name, tmp_path / "copy")
    missing = store / "commitlog" / f"{gone:020d}"
    missing.unlink()
    sizes = {p.name: p.stat().st_size for p in (store / "commitlog").iterdir()}

    verify = _run("verify", str(store))
    assert verify.returncode == 1
    expected = f"{missing}: expected commitlog files from physical offset {gone} to {gone + size}"
    assert expected in verify.stdout

    done = _run("recover", str(store))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{missing}: expected commitlog files from physical offset {gone} to {gone + size}, found none: " \
           f"the messages they held are lost;" in done.stderr
    assert "consume-queue entries point at them" in done.stderr
    # the broker's loader needs every file at the mapped-file size: nothing was resized (a clean close
    # deletes the abort store's trailing file of zeros, the broker's preallocated spare)
    after = {p.name: p.stat().st_size for p in (store / "commitlog").iterdir()}
    assert set(after.values()) == {size}
    assert set(sizes) - set(after) <= {f"{262144:020d}"} if name == "abort" else set(after) == set(sizes)


def test_the_mapped_file_size_is_the_files_length_when_a_step_between_names_is_two_sizes(tmp_path):
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    (store / "commitlog" / f"{262144:020d}").unlink()
    with segstore.open(str(store)) as s:
        assert s.config.mappedFileSizeCommitLog == 262144


def test_a_middle_consume_queue_file_deleted_keeps_the_queue_file_size(tmp_path, capsys):
    store = tmp_path / "store"
    sizes = {"mappedFileSizeCommitLog": 16384, "mappedFileSizeConsumeQueue": 200}
    with segstore.open(str(store), format="rocketmq", mode="a", **sizes) as s:
        s.append_batch([{"topic": "T", "body": b"x" * 100} for _ in range(45)])
    queue = store / "consumequeue" / "T" / "0"
    middle = queue / f"{200:020d}"
    middle.unlink()
    with segstore.open(str(store)) as s:
        assert s.config.mappedFileSizeConsumeQueue == 200
        assert s.config.mappedFileSizeCommitLog == 16384
    rc, _, err = (cli.main(["verify", str(store)]), *capsys.readouterr())
    assert rc == 1 and "Traceback" not in err
    rc = cli.main(["recover", str(store)])
    capsys.readouterr()
    assert rc == 0
    with segstore.open(str(store)) as s:
        assert len(list(s.read("T", 0))) == 45


def test_the_first_commitlog_file_deleted_reads_from_each_queues_first_offset(tmp_path, capsys):
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    with segstore.open(str(store)) as s:
        before = {key: [m.physical_offset for m in s.read(*key)] for key in s.queues}
    (store / "commitlog" / f"{0:020d}").unlink()
    assert cli.main(["verify", str(store)]) == 0     # what retention leaves; the broker loads it
    capsys.readouterr()
    with segstore.open(str(store)) as s:
        for key, phys in before.items():
            low, high = s.offset_range(*key)
            got = [m.physical_offset for m in s.read(*key, 0)]
            assert got == [p for p in phys if p >= 262144]
            assert len(got) == high - low
        low = s.offset_range("TopicA", 0)[0]
    # a query of a deleted offset is none, as getMessage's OFFSET_TOO_SMALL; the first held answers
    rc = cli.main(["query", "--topic", "TopicA", "--queue", "0", "--offset", "0", "--count", "1", "--json",
                   str(store)])
    assert rc == 1 and f"from its first held, {low} (the messages before it were deleted), found 0" in \
        capsys.readouterr().err
    rc = cli.main(["query", "--topic", "TopicA", "--queue", "0", "--offset", str(low), "--json", str(store)])
    assert rc == 0 and f'"queue_offset": {low}' in capsys.readouterr().out


@pytest.mark.parametrize("command", [["dump", "--json"], ["convert", "--to", "kafka"]])
def test_reads_in_commitlog_order_name_a_missing_middle_file(tmp_path, capsys, command):
    """dump and convert passed over the gap and exited 0 without the messages it held (reads never
    serve what verify rejects: they name it, after the messages before it)."""
    store = damage.make_pristine("rocketmq", "abort", tmp_path / "copy")
    missing = store / "commitlog" / f"{131072:020d}"
    missing.unlink()
    extra = [str(tmp_path / "out")] if command[0] == "convert" else []
    rc = cli.main([*command, str(store), *extra])
    err = capsys.readouterr().err
    assert rc == 1
    assert f"{missing}: expected commitlog files from physical offset 131072 to 196608, found none" in err


def test_recover_keeps_each_queues_entries_before_a_missing_middle_file(tmp_path):
    """A middle commitlog file and the consume queues lost: recover's rebuild met each queue's gap
    (its next message's queue offset past the queue's end) and left every queue empty, exit 1 for
    the missing file, so the messages before it no consumer could read.  RocketMQ 4.9.7's dispatch
    (``ReputMessageService`` from the commitlog's start, ``ConsumeQueue.putMessagePositionInfo``)
    writes their entries before it stops at the missing file (``getData`` finds none there): the
    rebuild keeps them too, and says where each queue stops."""
    import shutil

    from rocketmq_crash_writer import CONFIG, message

    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(300)])
        names = sorted(p.name for p in (path / "commitlog").iterdir())
        gone = int(names[1])
        before = {q: [m.queue_offset for m in store.read("Crash", q, 0) if m.physical_offset < gone]
                  for q in store.partitions("Crash")}
    (path / "commitlog" / names[1]).unlink()
    shutil.rmtree(path / "consumequeue")
    sizes = [f"--config={name}={CONFIG[name]}"
             for name in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue")]
    done = _run("recover", str(path), *sizes)
    assert done.returncode == 1, done.stderr
    assert "the entries before it are kept" in done.stdout + done.stderr
    with segstore.open(path, format="rocketmq", **CONFIG) as store:
        for q, offsets in before.items():
            assert offsets and store.offset_range("Crash", q) == (0, len(offsets))
            assert [m.queue_offset for m in store.read("Crash", q, 0, len(offsets))] == offsets


def test_recover_rebuilds_lost_queues_from_the_first_offset_retention_left(tmp_path):
    """The consume queues deleted (to have them rebuilt) from a store whose first commitlog file
    retention deleted: each queue's first message has a queue offset above 0, the rebuild took that
    for a gap and wrote no entry (exit 0, verify clean: a store without queues is not compared).
    RocketMQ 4.9.7 ``ConsumeQueue.putMessagePositionInfo`` starts such a queue at that offset, the
    slots before it in its file blank (``fillPreBlank``); so does recover now."""
    import shutil

    from rocketmq_crash_writer import CONFIG, message

    from segstore.indexes.dense import CQ_DTYPE, PRE_BLANK_SIZE

    path = tmp_path / "store"
    with segstore.open(path, format="rocketmq", mode="a", **CONFIG) as store:
        store.append_batch([message(i) for i in range(300)])
        names = sorted(p.name for p in (path / "commitlog").iterdir())
        kept = int(names[1])
        after = {q: [(m.queue_offset, m.physical_offset) for m in store.read("Crash", q, 0)
                     if m.physical_offset >= kept] for q in store.partitions("Crash")}
    (path / "commitlog" / names[0]).unlink()
    shutil.rmtree(path / "consumequeue")
    sizes = [f"--config={name}={CONFIG[name]}"
             for name in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue")]
    done = _run("recover", str(path), *sizes)
    assert done.returncode == 0, done.stderr
    with segstore.open(path, format="rocketmq", **CONFIG) as store:
        for q, messages in after.items():
            first = messages[0][0]
            assert store.offset_range("Crash", q) == (first, first + len(messages))
            assert [(m.queue_offset, m.physical_offset) for m in store.read("Crash", q, first)] == messages
            step = CONFIG["mappedFileSizeConsumeQueue"]
            base = first * CQ_DTYPE.itemsize // step * step
            slots = np.frombuffer((path / "consumequeue" / "Crash" / str(q) / f"{base:020d}").read_bytes(),
                                  CQ_DTYPE)[:first - base // CQ_DTYPE.itemsize]
            assert (slots["offset"] == 0).all() and (slots["size"] == PRE_BLANK_SIZE).all()
        assert store.verify() == []


def test_entries_pointing_into_a_lost_middle_file_are_one_line_per_run(tmp_path, capsys):
    """The basic store's middle commitlog file deleted: verify printed the file, then one line per
    consume-queue entry and per index entry pointing into it (336 lines of 337 for 144 messages): each
    consume-queue file's run of such entries is one line now (how many, the queue offsets and commitlog
    offsets, the lost range), each index file's too."""
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    lo, hi = 262144, 524288
    with segstore.open(str(store)) as s:
        per_file = s.config.mappedFileSizeConsumeQueue // 20
        runs: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
        for key in s.queues:
            for m in s.read(*key):
                if lo <= m.physical_offset < hi:
                    runs.setdefault((*key, m.queue_offset // per_file), []).append(
                        (m.queue_offset, m.physical_offset))
        index_counts = [int(np.count_nonzero((phys >= lo) & (phys < hi)))
                        for phys in (f.entries["phy_offset"] for f in s.index.files)]
    (store / "commitlog" / f"{lo:020d}").unlink()
    rc = cli.main(["verify", str(store)])
    lines = capsys.readouterr().out.splitlines()
    lost = f"in the commitlog files lost from physical offset {lo} to {hi}"
    expected = set()
    for (topic, qid, n), held in runs.items():
        (first, first_phy), (last, last_phy) = held[0], held[-1]
        assert last - first + 1 == len(held)
        path = store / "consumequeue" / topic / str(qid) / f"{n * per_file * 20:020d}"
        expected.add(f"{path}:{(first % per_file) * 20}: expected the entries of {topic}/{qid} offsets "
                     f"{first} to {last} to point at valid messages, found {len(held)} pointing into "
                     f"commitlog offsets {first_phy} to {last_phy}, {lost}: their messages are gone with "
                     "those files")
    assert rc == 1 and expected <= set(lines)
    index_lines = [line for line in lines if "/index/" in line]
    counts = [int(line.split(", found ")[1].split()[0]) for line in index_lines]
    assert counts == [n for n in index_counts if n]
    assert all(lost in line for line in index_lines)
    assert len(lines) == 1 + len(expected) + len(index_lines)


def test_entries_past_a_lost_last_file_are_counted_as_recover_drops_them(tmp_path, capsys):
    """The basic store's last commitlog file deleted (a tail lost): 170 lines, one per entry pointing past
    the data's end; now a run per consume-queue file and per index file, and each queue's counts add up to
    the entries ``recover`` then drops ("dropped N entries at or past the commitlog end"), as 4.9.7
    ``CommitLog.recoverNormally`` has ``truncateDirtyLogicFiles`` drop them at the broker's start."""
    store = damage.make_pristine("rocketmq", "basic", tmp_path / "copy")
    end = 524288
    (store / "commitlog" / f"{end:020d}").unlink()
    rc = cli.main(["verify", str(store)])
    lines = capsys.readouterr().out.splitlines()
    entries = [line for line in lines if "/consumequeue/" in line or "/index/" in line]
    assert rc == 1 and all(f"at or past the commitlog's end {end}" in line for line in entries)
    assert [line for line in lines if line not in entries] == [
        line for line in lines if "/checkpoint:" in line]       # the checkpoint's times, past the end too
    counted: dict[str, int] = {}
    for line in entries:
        if "/consumequeue/" in line:
            queue = line.split(" to point at ")[0].split(" offset")[0].split()[-1]
            counted[queue] = counted.get(queue, 0) + int(line.split(", found ")[1].split()[0])
    assert cli.main(["recover", str(store)]) == 0
    dropped = {line.split(":")[0].split()[-1]: int(line.split("dropped ")[1].split()[0])
               for line in capsys.readouterr().out.splitlines() if "dropped" in line}
    assert dropped == counted and sum(counted.values()) > len(lines)
