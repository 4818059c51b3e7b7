"""``segstore dump --follow``: what is stored, then what a writer stores while it runs, each message
once, until Ctrl-C or the reader of its output going away (exit 0).  A real follower process beside a
writer in this one, on both formats; follows in this process with a writer's move between two looks
(files deleted under a look, a log cut back or its start moved, the high watermark moved, the store
removed); and the flags it refuses.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from segstore_kafka import columnar, offsetcommit
from segstore_kafka.groups import OFFSETS_TOPIC as OFFSETS

import segstore
from segstore import cli

ROOT = Path(__file__).resolve().parent.parent
CONFIG = {"rocketmq": {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 20 * 16,
                       "messageIndexEnable": False},
          "kafka": {"segment.bytes": 600}}      # files roll while it follows


def append(path: Path, fmt: str, round_: int, count: int) -> None:
    with segstore.open(path, format=fmt, mode="a", **CONFIG[fmt]) as store:
        if fmt == "rocketmq":
            store.append_batch([{"topic": "T" if i % 3 else "Late", "queue_id": i % 2,
                                 "body": b"r%d-%d" % (round_, i)} for i in range(count)])
        else:
            store.append_batch([{"topic": "t", "partition": i % 2, "value": b"r%d-%d" % (round_, i),
                                 "timestamp": 1_700_000_000_000 + 100 * round_ + i} for i in range(count)])


def wait_for(lines: list[bytes], count: int, proc: subprocess.Popen, deadline: float = 60.0) -> None:
    stop = time.monotonic() + deadline
    while len(lines) < count:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < stop, f"{len(lines)} of {count} lines followed"
        time.sleep(0.02)


@contextlib.contextmanager
def follower(path: Path, *argv: str) -> Iterator[tuple[subprocess.Popen, list[bytes]]]:
    """A ``dump --json --follow`` process on ``path`` and the lines it printed so far; on leaving, a few
    more looks, then Ctrl-C, which must end it with exit 0 and no traceback."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    proc = subprocess.Popen([sys.executable, "-m", "segstore.cli", "dump", str(path), "--json", "--follow",
                             "--interval", "0.05", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    try:
        yield proc, lines
        time.sleep(0.2)                  # a few more looks find nothing new
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=60)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert proc.returncode == 0 and b"Traceback" not in err, err


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_follow_prints_each_message_once_as_it_is_stored(tmp_path, fmt):
    path = tmp_path / "store"
    append(path, fmt, 0, 4)
    with follower(path) as (proc, lines):
        wait_for(lines, 4, proc)
        total = 4
        for round_ in range(1, 4):       # each round after the last was followed: several looks
            append(path, fmt, round_, 6)
            total += 6
            wait_for(lines, total, proc)
    with segstore.open(path) as store:
        whole = b"".join(bytes(block) for block in store.dump_json()).splitlines(keepends=True)
    assert len(lines) == len(whole) == 22
    assert sorted(lines) == sorted(whole)

    def by_queue(found: list[bytes]) -> dict[tuple, list[bytes]]:
        # each queue's messages in its order: a look prints what each queue holds then, and a writer
        # makes a batch's consume-queue entries visible queue by queue, so two queues' messages may
        # interleave otherwise than in the commitlog (the topic created later included)
        queues: dict[tuple, list[bytes]] = {}
        for line in found:
            message = json.loads(line)
            key = (message.get("topic"), message.get("queue_id", message.get("partition")))
            queues.setdefault(key, []).append(line)
        return queues

    assert by_queue(lines) == by_queue(whole)


@pytest.mark.parametrize("argv, words", [
    (["--end", "5"], "--follow and --end"),
    (["--index"], "--follow and --index"),
    (["--tag", "a"], "--follow and --tag"),
    (["--interval", "0"], "--interval: expected a positive number of seconds"),
    (["--interval", "nan"], "--interval: expected a positive number of seconds, at most 86400"),
    (["--interval", "inf"], "--interval: expected a positive number of seconds, at most 86400"),
    (["--interval", "1e300"], "--interval: expected a positive number of seconds, at most 86400"),
])
def test_follow_refuses_what_it_cannot_follow(tmp_path, argv, words):
    path = tmp_path / "store"
    append(path, "rocketmq", 0, 2)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["dump", str(path), "--follow", *argv], io.StringIO())
    assert code == 2 and words in err.getvalue()


def test_read_committed_follows_up_to_the_last_stable_offset(tmp_path):
    """A Kafka follower at read_committed is given what a read_committed consumer is: nothing past a
    transaction still open (the plain record after it waits too), its records once the COMMIT marker
    comes, never those of an aborted one."""
    path = tmp_path / "logs"
    base = 1_700_000_000_000

    def write(step) -> None:
        with segstore.open(path, format="kafka", mode="a") as store:
            step(store, store.partition_of("t", 0, create=True))

    write(lambda store, part: store.append_batch([{"topic": "t", "value": b"plain-%d" % i, "timestamp": base}
                                                  for i in range(2)]))
    with follower(path, "--isolation", "read_committed") as (proc, lines):
        wait_for(lines, 2, proc)
        write(lambda store, part: (
            part.append_records([(None, b"txn-%d" % i, base + 1) for i in range(3)], producer_id=5,
                                producer_epoch=0, base_sequence=0, transactional=True),
            store.append_batch([{"topic": "t", "value": b"after-open", "timestamp": base + 2}])))
        time.sleep(0.5)                  # many looks: the open transaction holds everything after it back
        assert len(lines) == 2
        write(lambda store, part: part.append_control("COMMIT", producer_id=5, producer_epoch=0,
                                                      coordinator_epoch=0, timestamp=base + 3))
        wait_for(lines, 6, proc)
        write(lambda store, part: (
            part.append_records([(None, b"aborted", base + 4)], producer_id=6, producer_epoch=0,
                                base_sequence=0, transactional=True),
            part.append_control("ABORT", producer_id=6, producer_epoch=0, coordinator_epoch=0,
                                timestamp=base + 5),
            store.append_batch([{"topic": "t", "value": b"last", "timestamp": base + 6}])))
        wait_for(lines, 7, proc)
    values = [base64.b64decode(json.loads(line)["value"]) for line in lines]
    assert values == [b"plain-0", b"plain-1", b"txn-0", b"txn-1", b"txn-2", b"after-open", b"last"]
    with segstore.open(path) as store:
        whole = b"".join(bytes(block) for block in store.dump_json(isolation="read_committed"))
    assert lines == whole.splitlines(keepends=True)


def test_follow_a_group_from_its_committed_offsets(tmp_path):
    """``--follow --group G``: the partitions G committed, each from its committed offset (what its next
    consumer is given), then what is stored there while it runs; other queues and topics not at all."""
    path = tmp_path / "store"
    append(path, "rocketmq", 0, 6)            # T on queues 0, 1 (i % 3 != 0), Late on the rest
    with segstore.open(path, mode="a") as store:
        store.commit_offsets("g", {("T", 1): 1})
    with follower(path, "--group", "g") as (proc, lines):
        wait_for(lines, 1, proc)              # T/1 holds offsets 0, 1: from 1, one message
        append(path, "rocketmq", 1, 6)
        wait_for(lines, 3, proc)
    followed = [json.loads(line) for line in lines]
    assert [(m["topic"], m["queue_id"], m["queue_offset"]) for m in followed] == [
        ("T", 1, 1), ("T", 1, 2), ("T", 1, 3)]
    assert [base64.b64decode(m["body"]) for m in followed] == [b"r0-5", b"r1-1", b"r1-5"]


def test_follow_a_group_on_queues_it_never_committed_ends_at_once(monkeypatch, tmp_path):
    """``--follow --group g --queue 0`` where g committed T/1 only: the group's offsets are read once, at
    the start, so nothing could ever be printed; it exits 1 saying g committed no offset there, as plain
    ``dump --group`` does, rather than wait silently forever."""
    path = tmp_path / "store"
    append(path, "rocketmq", 0, 6)
    with segstore.open(path, mode="a") as store:
        store.commit_offsets("g", {("T", 1): 1})
    code, lines, err = follow_steps(monkeypatch, [str(path), "--group", "g", "--topic", "T", "--queue", "0"],
                                    [])
    assert (code, lines) == (1, [])
    assert "segstore dump: T/0: group 'g' committed no offset here" in err


# -- looks driven from the test: each writer's move made between two looks -----------------------------

#: The ``--interval`` of :func:`follow_steps`: its waits are told from any other by their length.
STEP_INTERVAL = 0.0123


def follow_steps(monkeypatch, argv: list[str], steps: list, looks: list[int] | None = None
                 ) -> tuple[int, list[str], str]:
    """``segstore dump ARGV --follow`` in this process: in the wait after each look the next of ``steps``
    is made (a writer's move between two looks), then one more look and Ctrl-C; the exit code, the
    lines printed and stderr.  ``looks`` gets how many lines each look had printed by its end."""
    todo = list(steps)
    sleep = time.sleep
    out, err = io.StringIO(), io.StringIO()

    def between(seconds):
        if seconds != STEP_INTERVAL:
            return sleep(seconds)
        if looks is not None:
            looks.append(out.getvalue().count("\n"))
        if not todo:
            raise KeyboardInterrupt
        return todo.pop(0)()

    monkeypatch.setattr(time, "sleep", between)
    with contextlib.redirect_stderr(err):
        code = cli.main(["dump", *argv, "--follow", "--interval", str(STEP_INTERVAL)], out)
    return code, out.getvalue().splitlines(keepends=True), err.getvalue()


def whole_json(path: Path, **kwargs) -> list[str]:
    with segstore.open(path) as store:
        return b"".join(bytes(b) for b in store.dump_json(**kwargs)).decode().splitlines(keepends=True)


def one_queue(tmp_path: Path, fmt: str) -> Path:
    """Where a store of one queue goes: a Kafka partition directory ``t-0``, a RocketMQ store."""
    path = tmp_path / ("t-0" if fmt == "kafka" else "store")
    path.mkdir()
    return path


def fill(path: Path, fmt: str, tag: str, count: int) -> list[segstore.AppendResult]:
    """``count`` messages on one queue (``t``-0 or ``T``/0), its files rolling every few."""
    with segstore.open(path, format=fmt, mode="a", **CONFIG[fmt]) as store:
        # a Kafka batch each: a batch never spans two segments
        return [store.append({"topic": "T", "queue_id": 0, "body": b"%s%d" % (tag.encode(), i)}
                             if fmt == "rocketmq" else
                             {"topic": "t", "partition": 0, "value": b"%s%d" % (tag.encode(), i),
                              "timestamp": 1_700_000_000_000 + i}) for i in range(count)]


class StaleListing:
    """Listings of ``directory`` that still name ``gone`` (deleted once armed), and file-type checks that
    still find them, during the look after arming (``every``: every look after): what a look meets when
    retention or compaction deletes or renames a file between its listing and its opening."""

    def __init__(self, monkeypatch, directory: Path, every: bool = False) -> None:
        self.directory, self.every = str(directory), every
        self.gone: list[str] = []
        self.looks = 0
        self.armed_look: int | None = None
        real_list, real_kind = segstore.files.list_dir, segstore.files.not_regular
        real_resolve = cli.resolve_store

        def stale() -> bool:
            return self.armed_look is not None and (self.looks == self.armed_look or (
                self.every and self.looks >= self.armed_look))

        def list_dir(path):
            names = real_list(path)
            if stale() and os.fspath(path) == self.directory:
                names = sorted({*names, *self.gone})
            return names

        def not_regular(path):
            seen = os.path.split(os.fspath(path))
            if stale() and seen[0] == self.directory and seen[1] in self.gone:
                return None
            return real_kind(path)

        def resolve_store(path, fmt):     # once a look
            self.looks += 1
            return real_resolve(path, fmt)

        monkeypatch.setattr(segstore.files, "list_dir", list_dir)
        monkeypatch.setattr(segstore.files, "not_regular", not_regular)
        monkeypatch.setattr(cli, "resolve_store", resolve_store)

    def delete(self, *names: str) -> None:
        for name in names:
            os.remove(os.path.join(self.directory, name))
        self.gone += names
        self.armed_look = self.looks + 1


def first_files(path: Path, fmt: str) -> tuple[Path, list[str]]:
    """The directory retention deletes from first, and the first file (Kafka: segment) there."""
    if fmt == "kafka":
        base = sorted(n for n in os.listdir(path) if n.endswith(".log"))[0].removesuffix(".log")
        return path, [n for n in os.listdir(path) if n.startswith(base + ".")]
    queue = path / "consumequeue" / "T" / "0"
    return queue, [sorted(os.listdir(queue))[0]]


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_follow_looks_again_at_files_deleted_after_it_listed_them(tmp_path, monkeypatch, fmt):
    """A file retention deletes between a look's listing and its opening makes the look list again (the
    follow goes on, each message once); a plain dump meeting the same stays an error (exit 1), and so does
    a follow's listed file that stays gone, once it looked again ``FOLLOW_RETRIES`` times."""
    path = one_queue(tmp_path, fmt)
    fill(path, fmt, "a", 40)                # several files: the first can go
    directory, victims = first_files(path, fmt)
    listing = StaleListing(monkeypatch, directory)
    expected: list[str] = []

    def append_then_retention() -> None:
        fill(path, fmt, "b", 5)
        expected.extend(whole_json(path))   # all printed: the first look's and these
        listing.delete(*victims)

    code, lines, err = follow_steps(monkeypatch, [str(path), "--json"], [append_then_retention])
    assert code == 0 and err == "", err
    if fmt == "kafka":     # a Kafka line carries its partition's log start when read: moved by the retention
        moved = [json.loads(line)["log_start_offset"] for line in lines[40:]]
        assert moved == [json.loads(whole_json(path)[0])["log_start_offset"]] * 5 and moved[0] > 0
        lines = [json.dumps({**json.loads(line), "log_start_offset": 0}) + "\n" for line in lines]
    assert lines == expected and len(lines) == 45

    # a plain dump is not taken again: a file listed and gone is an error there
    listing.armed_look = listing.looks + 1
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert cli.main(["dump", str(path), "--json"], io.StringIO()) == 1
    assert "expected an existing file or directory, found no such file or directory" in stderr.getvalue()

    # nor is a follow forever: a listed file that stays gone ends it
    listing.every, listing.armed_look = True, listing.looks + 1
    code, lines, err = follow_steps(monkeypatch, [str(path), "--json"], [])
    assert code == 1 and lines == []
    assert "expected an existing file or directory, found no such file or directory" in err
    assert listing.looks - listing.armed_look == cli.FOLLOW_RETRIES


def bodies(lines: list[str]) -> list[bytes]:
    return [base64.b64decode(json.loads(line).get("value") or json.loads(line)["body"]) for line in lines]


def test_group_follow_stops_at_the_high_watermark(tmp_path, monkeypatch):
    """``--group G --follow`` is given what G's consumer is, as plain ``dump --group G``: up to the high
    watermark (Kafka 3.8.0 ``UnifiedLog.read``: a consumer's fetch reads with
    ``FetchIsolation.HIGH_WATERMARK``, ``FetchIsolation.of``), read again at each look; the records past
    it, which the followers had not copied yet, come once it moves."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        for i in range(5):
            store.append({"topic": "t", "partition": 0, "value": b"v%d" % i})
        store.partition_of(OFFSETS, offsetcommit.coordinator_partition("g", 50), create=True)
        store.commit_offsets("g", {("t", 0): 1})
    checkpoint = logs / "replication-offset-checkpoint"
    checkpoint.write_text(checkpoint.read_text().replace("t 0 5\n", "t 0 3\n"))
    plain = io.StringIO()
    assert cli.main(["dump", str(logs), "--group", "g", "--json"], plain) == 0
    assert bodies(plain.getvalue().splitlines()) == [b"v1", b"v2"]
    looks: list[int] = []
    code, lines, err = follow_steps(monkeypatch, [str(logs), "--group", "g", "--json"], [
        lambda: checkpoint.write_text(checkpoint.read_text().replace("t 0 3\n", "t 0 5\n"))], looks)
    assert code == 0 and err == ""
    assert lines[:looks[0]] == plain.getvalue().splitlines(keepends=True)
    assert bodies(lines) == [b"v1", b"v2", b"v3", b"v4"] and looks == [2, 4]


def cut_kafka_log(path: Path, position: int) -> None:
    """What a replica's truncation leaves (Kafka 3.8.0 ``UnifiedLog.truncateTo``): the first segment's
    log cut at ``position``, its indexes rebuilt by recovery."""
    os.truncate(path / "00000000000000000000.log", position)
    for index in path.glob("*index"):
        index.unlink()
    with segstore.open(path, mode="a") as store:
        store.recover()


def test_group_follow_of_a_commit_past_the_log_end(tmp_path, monkeypatch):
    """A group committed past the log end (the log was cut since): the follow says so and goes on from the
    end, as the consumer, out of range, resets; what is stored there next is printed."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        olds = [store.append({"topic": "t", "partition": 0, "value": b"old%d" % i}) for i in range(5)]
        store.partition_of(OFFSETS, offsetcommit.coordinator_partition("g", 50), create=True)
        store.commit_offsets("g", {("t", 0): 5})
    cut_kafka_log(logs / "t-0", olds[3].position)

    def append() -> None:
        with segstore.open(logs, mode="a") as store:
            store.append_batch([{"topic": "t", "partition": 0, "value": b"new%d" % i} for i in range(2)])

    code, lines, err = follow_steps(monkeypatch, [str(logs), "--group", "g", "--json"], [append])
    assert code == 0 and bodies(lines) == [b"new0", b"new1"]
    assert err == "segstore dump: t-0: group 'g' committed offset 5, past the log end 3; following from 3\n"


def group_backlog_deleted(tmp_path: Path, fmt: str) -> tuple[Path, int]:
    """A store whose group ``g`` committed offset 1 of its one queue (``t``-0, ``T``/0), after which the
    messages from 1 were deleted (Kafka DeleteRecords, RocketMQ retention): the store and its new start."""
    if fmt == "kafka":
        path = tmp_path / "logs"
        with segstore.open(path, format="kafka", mode="a") as store:
            for i in range(6):
                store.append({"topic": "t", "partition": 0, "value": b"v%d" % i})
            store.partition_of(OFFSETS, offsetcommit.coordinator_partition("g", 50), create=True)
            store.commit_offsets("g", {("t", 0): 1})
            store.delete_records(4, topic="t", partition=0)
            return path, store.offset_range("t", 0)[0]
    path = tmp_path / "store"
    path.mkdir()
    fill(path, fmt, "v", 80)
    with segstore.open(path, mode="a", fileReservedTime=1, **CONFIG[fmt]) as store:
        store.commit_offset("g", "T", 0, 1)
        store.retention(now_ms=int(time.time() * 1000) + 10 * 3600_000)
        return path, store.offset_range("T", 0)[0]


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_group_backlog_deleted_before_it_was_read_is_said(tmp_path, monkeypatch, fmt):
    """``dump --group g`` where g's committed offset lies below the queue's start (the messages from it
    deleted by DeleteRecords or retention before g read them): ``consumers`` counts them in g's lag (Kafka
    3.8.0 ``ConsumerGroupCommand``: log end - committed; RocketMQ 4.9.7 ``getConsumeStats``' Diff alike),
    the dump starts at the queue's start, as g's consumer is moved there (Kafka 3.8.0 ``FetchCollector
    .handleInitializeErrors`` logs ``Fetch position ... is out of range ..., resetting offset``, as
    ``auto.offset.reset=earliest``; RocketMQ 4.9.7 ``getMessage`` answers OFFSET_TOO_SMALL with the
    queue's min offset as the next): stderr says so, plain and ``--follow`` alike, as a follow says
    offsets deleted between two looks; it was silent, the dump holding fewer messages than the lag."""
    path, low = group_backlog_deleted(tmp_path, fmt)
    name = "t-0" if fmt == "kafka" else "T-0"
    ends = 6 if fmt == "kafka" else 80
    assert low > 2
    code, out, err = cli_run_json(path, "consumers", "--group", "g")
    assert code == 0 and [row["lag"] for row in json.loads(out)] == [ends - 1]
    said = (f"segstore dump: {name}: group 'g' committed offset 1, below the log start {low}: offsets "
            f"1..{low - 1} were deleted before they were read; ")
    plain, plain_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(plain_err):
        assert cli.main(["dump", str(path), "--group", "g", "--json"], plain) == 0
    lines = plain.getvalue().splitlines(keepends=True)
    assert lines == whole_json(path, offsets={("t" if fmt == "kafka" else "T", 0): (low, ends)})
    assert bodies(lines)[0] == b"v%d" % low
    assert plain_err.getvalue().splitlines()[-1] == said + f"dumping from {low}"
    code, followed, err = follow_steps(monkeypatch, [str(path), "--group", "g", "--json"], [])
    assert code == 0 and followed == lines
    assert err.splitlines()[-1] == said + f"following from {low}"


def cli_run_json(path: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main([argv[0], str(path), *argv[1:], "--json"], out)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_follow_says_where_the_log_moved_under_it(tmp_path, monkeypatch, fmt):
    """A queue cut back below what was printed is followed from its new end (the consumer's ``Truncation
    detected ..., resetting offset to the first offset known to diverge``, Kafka 3.8.0
    ``SubscriptionState.maybeCompleteValidation``), one whose start passed it from its new start (the
    consumer's ``Fetch position ... is out of range ..., resetting offset``, ``FetchCollector
    .handleInitializeErrors``, as ``auto.offset.reset=earliest``): the new messages at the cut offsets
    are printed, and stderr says each move; it is no failure (exit 0)."""
    path = one_queue(tmp_path, fmt)
    name = "t-0" if fmt == "kafka" else "T-0"
    olds = fill(path, fmt, "old", 5)
    if fmt == "rocketmq":
        fill(tmp_path / "short", fmt, "old", 3)

    def truncate() -> None:
        if fmt == "kafka":
            cut_kafka_log(path, olds[3].position)
        else:                   # replaced by a store holding less (a restore, recovery's cut)
            os.rename(path, tmp_path / "longer")
            os.rename(tmp_path / "short", path)

    deleted: list[int] = []

    def append_then_delete() -> None:
        fill(path, fmt, "more", 4 if fmt == "kafka" else 80)     # RocketMQ: files for retention
        with segstore.open(path, mode="a", **({} if fmt == "kafka" else {"fileReservedTime": 1})) as store:
            if fmt == "kafka":
                store.delete_records(8)
            else:
                store.retention(now_ms=int(time.time() * 1000) + 10 * 3600_000)
            deleted.extend(range(6, store.offset_range("T" if fmt == "rocketmq" else "t", 0)[0]))

    code, lines, err = follow_steps(monkeypatch, [str(path), "--json"], [
        truncate, lambda: fill(path, fmt, "new", 3), append_then_delete])
    assert code == 0, err
    assert len(deleted) >= 2
    low = deleted[-1] + 1
    assert err.splitlines() == [
        f"segstore dump: {name}: the log was truncated to 3 below the 5 already printed; following from 3",
        f"segstore dump: {name}: offsets 6..{low - 1} were deleted before they were read; "
        f"following from {low}"]
    more = 4 if fmt == "kafka" else 80
    assert bodies(lines) == ([b"old%d" % i for i in range(5)] + [b"new%d" % i for i in range(3)]
                             + [b"more%d" % i for i in range(low - 6, more)])


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
def test_follow_ends_when_its_reader_is_gone(tmp_path, fmt):
    """``segstore dump STORE --follow | head -n 3`` ends as ``head`` does, with nothing new to write (exit 0,
    as a closed pipe met on a write): not at the next write, which an idle store never brings."""
    path = one_queue(tmp_path, fmt)
    fill(path, fmt, "a", 5)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}
    proc = subprocess.Popen([sys.executable, "-m", "segstore.cli", "dump", str(path), "--json", "--follow",
                             "--interval", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    watchdog = threading.Timer(60, proc.kill)      # a follower that never writes cannot hang the test
    watchdog.start()
    try:
        head = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()          # head has what it wanted
        assert proc.wait(timeout=60) == 0
    finally:
        watchdog.cancel()
        proc.kill()
    assert all(head) and b"Traceback" not in proc.stderr.read()


def test_follow_is_for_store_directories(tmp_path):
    """A single file is dumped once, whole: ``--follow`` is refused as the other store-only flags are
    (exit 2)."""
    path = one_queue(tmp_path, "kafka")
    fill(path, "kafka", "a", 2)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["dump", str(path / "00000000000000000000.log"), "--follow"], io.StringIO())
    assert code == 2 and "--follow and --decompress-bodies apply to a store directory" in err.getvalue()


@pytest.mark.parametrize("fmt", ["kafka", "rocketmq"])
@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_follow_ends_when_the_store_goes_away(tmp_path, monkeypatch, fmt, how):
    """The store deleted (or its files) while followed: one data error saying so (exit 1), whatever the
    timing, never a usage error."""
    path = one_queue(tmp_path, fmt)
    fill(path, fmt, "a", 3)

    def remove() -> None:
        shutil.rmtree(path)
        if how == "emptied":
            path.mkdir()

    code, lines, err = follow_steps(monkeypatch, [str(path), "--json"], [remove])
    found = "no such directory" if how == "deleted" else f"no {fmt} store there"
    assert code == 1 and len(lines) == 3
    assert err == (f"{path}: expected the {fmt} store this follow reads, found {found}: the store went away "
                   "(deleted or moved)\n")


@pytest.mark.parametrize("accelerated", [True, False])
def test_kafka_text_follow_heads_each_segment_once(tmp_path, monkeypatch, accelerated):
    """In text, a Kafka segment's heading (``Dumping ....log``, ``Log starting offset``) comes before the
    first records followed from it, not at every look: following a partition prints what a plain dump of
    it prints, while its segments roll."""
    if not accelerated:
        monkeypatch.setattr(columnar, "_speedups", None)
    path = one_queue(tmp_path, "kafka")
    fill(path, "kafka", "a", 3)
    code, lines, err = follow_steps(monkeypatch, [str(path)], [
        lambda: fill(path, "kafka", "b", 2), lambda: None, lambda: fill(path, "kafka", "c", 12)])
    assert code == 0 and err == ""
    plain = io.StringIO()
    assert cli.main(["dump", str(path)], plain) == 0
    assert "".join(lines) == plain.getvalue()
    assert sum(line.startswith("Dumping ") for line in lines) >= 2      # it rolled


def age(path: Path, seconds: float = 10.0) -> None:
    """Every file and directory under ``path`` as last changed ``seconds`` ago (the time a follow
    waits for nothing to happen, without the wait)."""
    when = time.time() - seconds
    for directory, names, file_names in os.walk(path):
        for name in names + file_names:
            os.utime(os.path.join(directory, name), (when, when))
    os.utime(path, (when, when))


def test_a_kafka_marker_changes_with_every_change_a_reader_could_see(tmp_path):
    """``change_marker`` of a log dir: the same while nothing changed, another after an append (even
    one whose files were then set back in time), a partition added, a checkpoint renamed into place, a
    segment deleted or a log cut; None while a file changed in the last second."""
    plugin = segstore.registry.get("kafka")
    path = tmp_path / "logs"
    append(path, "kafka", 0, 12)
    assert plugin.change_marker(str(path)) is None          # just written
    age(path)
    marks = [plugin.change_marker(str(path))]
    assert marks[0] is not None and plugin.change_marker(str(path)) == marks[0]
    first, last = sorted((path / "t-0").glob("*.log"))[0], sorted((path / "t-1").glob("*.log"))[-1]

    def appended() -> None:
        with segstore.open(path, mode="a") as store:
            store.append_batch([{"topic": "t", "partition": 1, "value": b"v"}])

    def new_partition() -> None:
        with segstore.open(path, mode="a") as store:
            store.append_batch([{"topic": "u", "partition": 0, "value": b"v"}])

    def checkpoint() -> None:
        (path / "replication-offset-checkpoint.tmp").write_text("0\n1\nt 0 3\n")
        os.replace(path / "replication-offset-checkpoint.tmp", path / "replication-offset-checkpoint")

    for change in (appended, new_partition, checkpoint, first.unlink,
                   lambda: os.truncate(last, last.stat().st_size - 1)):
        change()
        assert plugin.change_marker(str(path)) is None
        age(path)
        marks.append(plugin.change_marker(str(path)))
        assert marks[-1] is not None and marks[-1] not in marks[:-1]


def test_an_idle_kafka_follow_opens_the_store_only_when_something_changed(tmp_path, monkeypatch):
    """Where nothing changed since the last look (the marker the same), a look does not open the log dir
    (about 1 ms a partition); each change is still printed once, at the next look."""
    path = tmp_path / "logs"
    append(path, "kafka", 0, 6)
    age(path)
    opened = []
    real = cli.open_store

    def counting(*args, **kwargs):
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "open_store", counting)

    def then_age(round_: int, partition_of: str = "t") -> Callable[[], None]:
        def step() -> None:
            with segstore.open(path, mode="a") as store:
                store.append_batch([{"topic": partition_of, "partition": 0, "value": b"r%d" % round_}])
            age(path)
        return step

    looks: list[int] = []
    code, lines, err = follow_steps(monkeypatch, [str(path), "--json"], [
        lambda: None,               # look 2: the first with a marker, it opens
        lambda: None,               # look 3: nothing changed, not opened
        then_age(1),                # look 4: a record appended (its files set back in time too)
        lambda: None,               # look 5: not opened
        then_age(2, "u"),           # look 6: a new topic
        lambda: None], looks)       # look 7: not opened
    assert code == 0, err
    assert looks == [6, 6, 6, 7, 7, 8, 8]
    assert bodies(lines) == sorted(bodies(whole_json(path)), key=bodies(lines).index)
    assert sorted(bodies(lines)) == sorted([b"r0-%d" % i for i in range(6)] + [b"r1", b"r2"])
    assert len(opened) == 4         # looks 1, 2, 4 and 6


def test_a_rocketmq_store_has_no_marker_so_every_look_reads(tmp_path):
    """RocketMQ's mapped files are written through their maps, whose writes need not move a file's
    modification time (only the first write to a clean page does), and keep their size: no stat tells
    a new message, so every look reads the consume queues."""
    path = tmp_path / "store"
    append(path, "rocketmq", 0, 6)
    age(path)
    assert segstore.registry.get("rocketmq").change_marker(str(path)) is None
