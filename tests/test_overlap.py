"""segstore.overlap: a columnar read's next walk overlapped with this batch's build.

The helpers' promises (order, errors after the batches before them, no worker running while
:func:`overlapped` is suspended, :func:`pipelined`'s reader bounded and on a thread of its own,
the source closed with either), and the C passes that now run without
the GIL (Kafka's record decode around the decompress call, its column encoder, the host texts)
giving from many threads at once what they give from one.
"""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from conftest import FIXTURES
from segstore_kafka import batch as codec
from segstore_kafka import columnar as kafka_columnar
from segstore_kafka import compression
from segstore_kafka.arrowencode import Columns

import segstore
from segstore import overlap, speedups
from segstore.columns import KAFKA_SCHEMA
from segstore.convert import convert
from segstore.errors import CorruptDataError, InvalidMessageError


class _Source:
    """Items 0..n-1, then maybe an error; records whether a step runs and on which thread."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at
        self.running = threading.Event()
        self.threads: set[int] = set()
        self.closed = False
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self) -> int:
        self.running.set()
        try:
            self.threads.add(threading.get_ident())
            if self.i == self.fail_at:
                raise CorruptDataError("expected an item, found damage", "src", self.i)
            if self.i >= self.n:
                raise StopIteration
            self.i += 1
            return self.i - 1
        finally:
            self.running.clear()

    def close(self) -> None:
        self.closed = True


@pytest.fixture(params=[True, False], ids=["overlapped", "sequential"])
def enabled(request, monkeypatch):
    monkeypatch.setattr(overlap, "ENABLED", request.param)
    return request.param


def test_items_come_in_order_and_no_step_runs_while_suspended(enabled) -> None:
    src = _Source(50)
    got = []
    for item in overlap.overlapped(src, lambda i: i * 10):
        assert not src.running.is_set()         # the worker finished before the yield
        got.append(item)
    assert got == [i * 10 for i in range(50)]
    assert (threading.get_ident() not in src.threads) == enabled


@pytest.mark.parametrize("helper", [overlap.overlapped, overlap.pipelined], ids=["overlapped", "pipelined"])
def test_an_error_of_the_source_comes_after_the_items_before_it(enabled, helper) -> None:
    src = _Source(50, fail_at=7)
    got = []
    with pytest.raises(CorruptDataError) as err:
        for item in helper(src, lambda i: i):
            got.append(item)
    assert got == list(range(7)) and err.value.pos == 7 and src.closed


def _build_fails_at_3(i: int) -> int:
    if i == 3:
        raise InvalidMessageError("expected a buildable item, found 3")
    return i


def test_an_error_of_the_build_waits_for_the_worker_and_closes_the_source(enabled) -> None:
    src = _Source(50)
    with pytest.raises(InvalidMessageError):
        list(overlap.overlapped(src, _build_fails_at_3))
    assert not src.running.is_set() and src.closed


def test_stopping_early_closes_the_source(enabled) -> None:
    src = _Source(50)
    it = overlap.overlapped(src, lambda i: i)
    assert [next(it), next(it)] == [0, 1]
    it.close()
    assert src.closed and not src.running.is_set()
    assert src.i <= 3          # at most the one item read ahead


# -- pipelined: the source a bounded number of items ahead, on a thread of its own ------------

@pytest.mark.parametrize("ahead", [1, 3])
def test_pipelined_gives_every_item_in_order_from_its_own_thread(enabled, ahead) -> None:
    src = _Source(50)
    got = list(overlap.pipelined(src, lambda i: i * 10, ahead=ahead))
    assert got == [i * 10 for i in range(50)] and src.closed
    assert (threading.get_ident() not in src.threads) == enabled
    pool = {t.ident for t in threading.enumerate() if t.name.startswith("segstore-overlap")}
    assert not src.threads & pool           # not a pool thread: it waits for room


@pytest.mark.parametrize("ahead", [1, 2, 4])
def test_pipelined_reads_ahead_while_the_caller_holds_an_item_but_no_further(ahead) -> None:
    src = _Source(50)
    it = overlap.pipelined(src, lambda i: i, ahead=ahead)
    assert next(it) == 0
    deadline = time.monotonic() + 5
    while src.i < 1 + ahead + 1 and time.monotonic() < deadline:    # made while we hold item 0
        time.sleep(0.005)
    time.sleep(0.05)
    assert src.i == 1 + ahead + 1       # ahead queued, one made and waiting for room
    assert list(it) == list(range(1, 50))


def test_pipelined_build_error_stops_and_joins_the_reader_then_closes_the_source(enabled) -> None:
    src = _Source(10_000)
    before = threading.active_count()
    with pytest.raises(InvalidMessageError):
        list(overlap.pipelined(src, _build_fails_at_3))
    assert src.closed and not src.running.is_set() and src.i <= 6
    assert threading.active_count() == before       # the reading thread is gone


def test_pipelined_closed_early_stops_its_reader(enabled) -> None:
    src = _Source(10_000)
    it = overlap.pipelined(src, lambda i: i)
    assert [next(it), next(it)] == [0, 1]
    it.close()
    assert src.closed and not src.running.is_set() and src.i <= 4
    assert not [t for t in threading.enumerate() if t.name == "segstore-pipeline"]


def test_pipelined_readers_of_many_callers_never_take_the_pool(monkeypatch) -> None:
    """Conversions at once, one per core and more: each reader uses the pool (a scan's overlapped)
    while it waits for room; were readers pool steps, they would hold every pool thread and the
    scans' steps would never run."""
    monkeypatch.setattr(overlap, "ENABLED", True)

    def reader(k: int):
        for i in range(20):
            yield sum(overlap.overlapped(iter(range(i)), lambda j: j + k))

    def consume(k: int) -> list[int]:
        return list(overlap.pipelined(reader(k), lambda v: v))

    n = 2 * (os.cpu_count() or 2) + 2
    with ThreadPoolExecutor(n) as callers:
        results = list(callers.map(consume, range(n), timeout=60))
    assert results == [[sum(j + k for j in range(i)) for i in range(20)] for k in range(n)]


# -- the RocketMQ scan and the conversions, overlapped and not ------------------------------

def test_scan_arrow_gives_the_same_batches_overlapped_or_not(monkeypatch, tmp_path) -> None:
    path = str(tmp_path / "s")
    with segstore.open(path, "rocketmq", "a") as store:
        store.append_batch([{"topic": f"T{i % 3}", "queue_id": i % 2, "body": bytes([i % 251]) * (i % 300),
                             "keys": [f"k{i}"], "tags": "t", "properties": {"p": str(i)}}
                            for i in range(5000)])
    tables = []
    for on in (False, True):
        monkeypatch.setattr(overlap, "ENABLED", on)
        with segstore.open(path, "rocketmq", "r") as store:
            tables.append(pa.Table.from_batches(list(store.scan_arrow(batch_rows=700))))
    assert tables[0].num_rows == 5000 and tables[0].equals(tables[1])


#: Files that hold the time of the run: topics.json's dataVersion (and its .bak), the conversion's own record.
_TIMED = ("lock", "checkpoint", "topics.json", "topics.json.bak", "segstore-convert.json")


def _tree(root) -> dict[str, bytes]:
    """Every file's bytes but :data:`_TIMED`; IndexFiles (named by the time) by their order."""
    files = [p for p in sorted(root.rglob("*"))
             if p.is_file() and ".segstore" not in p.parts and p.name not in _TIMED]
    index = [p for p in files if p.parent.name == "index"]
    named = {str(p.relative_to(root)): p.read_bytes() for p in files if p not in index}
    return named | {f"index/#{i}": p.read_bytes() for i, p in enumerate(index)}


@pytest.mark.parametrize("compression_name", ["none", "zstd"])
def test_a_conversion_writes_the_same_bytes_overlapped_or_not(monkeypatch, tmp_path, compression_name):
    src = FIXTURES / "rocketmq" / "basic" / "store"
    out = {}
    for on in (False, True):
        monkeypatch.setattr(overlap, "ENABLED", on)
        kafka, back = tmp_path / f"k{on}", tmp_path / f"b{on}"
        convert(src, kafka, to="kafka", compression=compression_name)
        convert(kafka, back, to="rocketmq")
        out[on] = (_tree(kafka), _tree(back))
    for on_side, off_side in zip(out[True], out[False], strict=True):
        assert on_side and on_side.keys() == off_side.keys()
        assert [name for name in on_side if on_side[name] != off_side[name]] == []


# -- shared: queued independent steps on two threads ---------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 5, 17])
def test_shared_gives_every_result_in_order(enabled, n) -> None:
    threads: dict[int, int] = {}

    def step(i: int) -> int:
        threads[i] = threading.get_ident()
        time.sleep(0.03)        # long enough for the other thread to get its turn on a loaded machine
        return i * i

    assert overlap.shared(step, list(range(n))) == [i * i for i in range(n)]
    assert sorted(threads) == list(range(n))            # each item once
    here = threading.get_ident()
    # both threads take items when there are two or more (each sleeps: the other gets a turn)
    assert {t == here for t in threads.values()} == (set() if not n else {True} if not enabled or n < 2
                                                      else {True, False})


def test_shared_raises_the_earliest_error_once_both_threads_are_done(enabled) -> None:
    running, ran = [0], []

    def step(i: int) -> int:
        running[0] += 1
        try:
            time.sleep(0.01)
            ran.append(i)
            if i in (1, 4):
                raise InvalidMessageError(f"expected a good item, found {i}")
            return i
        finally:
            running[0] -= 1

    with pytest.raises(InvalidMessageError, match="found 1"):
        overlap.shared(step, list(range(8)))
    assert running[0] == 0
    # one thread stops at the first error; two stop taking items once one has failed
    assert 1 in ran and (sorted(ran) == [0, 1] if not enabled else len(ran) <= 4)


def test_shared_from_every_pool_thread_at_once_never_waits_for_a_free_one(monkeypatch) -> None:
    """Steps on every pool thread calling shared: their helpers cannot start (no thread is free);
    each step runs its items itself instead of waiting for a helper that would never come."""
    monkeypatch.setattr(overlap, "ENABLED", True)
    pool = overlap._executor()
    workers = pool._max_workers
    started = threading.Barrier(workers, timeout=10)

    def step(k: int) -> list[int]:
        started.wait()          # every pool thread busy with a step
        return overlap.shared(lambda i: i + k, list(range(5)))

    steps = [pool.submit(step, k) for k in range(workers)]
    assert [s.result(timeout=20) for s in steps] == [[i + k for i in range(5)] for k in range(workers)]


def test_a_conversion_in_many_small_batches_writes_the_same_bytes(monkeypatch, tmp_path) -> None:
    """RocketMQ -> Kafka with 5 records a batch: every added batch queues dozens of record batches
    over several partitions, encoded by two threads; the same bytes as one thread."""
    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "BATCH_RECORDS", 5)
    trees = []
    for on in (False, True):
        monkeypatch.setattr(overlap, "ENABLED", on)
        kafka = tmp_path / f"k{on}"
        convert(FIXTURES / "rocketmq" / "basic" / "store", kafka, to="kafka", compression="lz4")
        trees.append(_tree(kafka))
    assert trees[0] and trees[0].keys() == trees[1].keys()
    assert [name for name in trees[0] if trees[0][name] != trees[1][name]] == []


# -- the C passes without the GIL, from many threads ---------------------------------------

needs_c = pytest.mark.skipif(speedups.load("segstore_kafka._speedups") is None, reason="no C accelerator")


def _kafka_log() -> bytes:
    """Batches of every codec, then one whose compressed bytes are damaged (CRC fixed): the C
    decode declines it after the decompress call fails, the reference raises its typed error."""
    parts, offset = [], 0
    for round_ in range(6):
        for name in compression.COMPRESSION_NAMES:
            records = [(f"k{offset + i}".encode(), bytes([round_]) * (i * 7), 1_700_000_000_000 + i,
                        [("h", b"v" * i)]) for i in range(40)]
            parts.append(codec.encode_batch(records, base_offset=offset, compression=name))
            offset += 40
    damaged = bytearray(codec.encode_batch([(b"x", b"y" * 500, 1_700_000_000_000)], base_offset=offset,
                                           compression="zstd"))
    damaged[codec.HEADER.size + 4:codec.HEADER.size + 12] = b"\xff" * 8
    struct.pack_into(">I", damaged, codec.CRC_OFFSET, crc32c.crc32c(bytes(damaged[codec.ATTRIBUTES_OFFSET:])))
    return b"".join(parts) + bytes(damaged)


def _decoded(buf: bytes) -> tuple[list, tuple | None]:
    batches, error = [], None
    try:
        for chunk in kafka_columnar.decode(buf, path="seg.log", accelerated=True):
            batches.append(kafka_columnar.to_arrow(chunk, KAFKA_SCHEMA, topic="t", partition=0, segment=0))
    except CorruptDataError as err:
        error = (err.message, err.pos)
    return pa.Table.from_batches(batches, schema=KAFKA_SCHEMA).to_pylist(), error


@needs_c
def test_kafka_decode_from_many_threads_equals_one_thread() -> None:
    buf = _kafka_log()
    want = _decoded(buf)
    assert len(want[0]) == 6 * len(compression.COMPRESSION_NAMES) * 40 and want[1] is not None
    with ThreadPoolExecutor(4) as pool:
        assert all(got == want for got in pool.map(lambda _: _decoded(buf), range(16)))


@needs_c
def test_kafka_encode_from_many_threads_and_its_errors_with_the_gil_given_back() -> None:
    n = 300
    columns = Columns(pa.array([f"k{i}".encode() for i in range(n)], pa.binary()),
                      pa.array([bytes(i % 50) for i in range(n)], pa.binary()),
                      np.arange(n, dtype=np.int64) + 1_700_000_000_000,
                      pa.array([[{"key": "h", "value": b"v" * (i % 9)}] for i in range(n)],
                               pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    rows, deltas = np.arange(n), np.arange(n)
    want = columns.region(rows, 1_700_000_000_000, deltas)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: columns.region(rows, 1_700_000_000_000, deltas), range(32)))
    assert all(g == want for g in got)
    bad = [(np.array([0, n]), deltas[:2], 1_700_000_000_000, "rows within the batch's"),
           (rows, np.full(n, 2**40), 1_700_000_000_000, "offset deltas within int32"),
           (rows, deltas, -2**63, "varlong must fit in int64")]
    for chosen, d, base, why in bad:     # each raised after the GIL is taken back (else a fatal error)
        with pytest.raises(InvalidMessageError, match=why):
            columns.region(chosen, base, d)
    assert columns.region(rows, 1_700_000_000_000, deltas) == want


def test_a_merge_in_small_items_writes_the_same_bytes(monkeypatch, tmp_path) -> None:
    """Kafka -> RocketMQ merges the partitions back into commitlog order; items of at most
    ``MERGE_ROWS`` rows (each parsed by the writer's ``prepare`` on the worker) give the bytes
    one item of every row gives."""
    from segstore.convert import pipeline

    kafka = tmp_path / "k"
    convert(FIXTURES / "rocketmq" / "basic" / "store", kafka, to="kafka")
    trees = []
    for rows in (1 << 20, 7):
        monkeypatch.setattr(pipeline, "MERGE_ROWS", rows)
        back = tmp_path / f"b{rows}"
        convert(kafka, back, to="rocketmq")
        trees.append(_tree(back))
    assert trees[0] and trees[0].keys() == trees[1].keys()
    assert [name for name in trees[0] if trees[0][name] != trees[1][name]] == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_overlaps_with_its_own_pool(monkeypatch) -> None:
    """A child forked after the parent overlapped (its pool's threads left behind) still runs
    every step: the pool is made again in the child, where reusing the parent's would hang."""
    monkeypatch.setattr(overlap, "ENABLED", True)
    assert list(overlap.overlapped(iter(range(5)), lambda i: i)) == list(range(5))
    pid = os.fork()
    if pid == 0:                                        # the child: exit 0 only when every item came
        signal.alarm(20)
        ok = list(overlap.overlapped(iter(range(5)), lambda i: i + 1)) == list(range(1, 6))
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung in overlapped()")
    assert os.waitstatus_to_exitcode(status) == 0


_FAILING_START = r"""
import sys, threading
from segstore import overlap
from segstore.errors import OutOfMemoryError


class Dying(overlap._Thread):
    # what a capped address space does to a new thread: its stack was mapped, its first objects
    # were not, and it dies before Thread._bootstrap_inner sets _started
    def _bootstrap_inner(self):
        raise MemoryError


overlap._Thread = Dying
try:
    overlap.start_thread(lambda: None, "dying")
except OutOfMemoryError as err:
    print("typed", "dying" in str(err), len(threading._limbo))
"""


def test_a_thread_that_dies_starting_raises_out_of_memory_instead_of_hanging() -> None:
    """CPython's Thread.start waits forever for a thread whose bootstrap failed before it began
    (gh-140746); segstore's threads start through overlap.start_thread, which says so instead.
    In a child with a deadline: the bug this guards against is a hang."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _FAILING_START], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.stdout.split() == ["typed", "True", "0"], run.stderr


def test_start_thread_runs_its_target_on_a_daemon_thread() -> None:
    seen: list[str] = []
    thread = overlap.start_thread(lambda: seen.append(threading.current_thread().name), "segstore-test")
    thread.join(10)
    assert seen == ["segstore-test"] and thread.daemon


def test_ahead_goes_on_with_the_threads_that_started(monkeypatch) -> None:
    """A thread that cannot start (a capped address space) leaves the work to those that did: the
    same results in the same order; with none at all, the typed error."""
    from segstore.errors import OutOfMemoryError

    real = overlap.start_thread
    started: list[int] = []

    def one_only(target, name):
        if started:
            raise OutOfMemoryError("expected memory for a new thread, found none")
        started.append(1)
        return real(target, name)

    monkeypatch.setattr(overlap, "start_thread", one_only)
    got = list(overlap.ahead(iter(range(50)), lambda i: i * i, threads=4, window=8))
    assert got == [(i, i * i, None) for i in range(50)]

    def none(target, name):
        raise OutOfMemoryError("expected memory for a new thread, found none")

    monkeypatch.setattr(overlap, "start_thread", none)
    with pytest.raises(OutOfMemoryError):
        list(overlap.ahead(iter(range(5)), lambda i: i, threads=2, window=4))


def test_an_idle_pool_thread_holds_nothing_of_its_last_step() -> None:
    """A step's result, function and arguments die with the caller's last reference, not at the
    pool thread's next step: a walk's region holds views of a map, and a map with a view alive cannot
    be closed (a kept map of a deleted commitlog kept its disk space while a thread sat idle)."""
    import gc
    import weakref

    class Region:
        def __init__(self, of: object = None) -> None:
            self.of = of

    pool = overlap._Pool(1)
    argument = Region()
    future = pool.submit(Region, argument)
    result = future.result(10)
    assert result.of is argument
    seen = weakref.ref(argument), weakref.ref(result)
    del argument, result, future
    deadline = time.monotonic() + 10
    while any(ref() is not None for ref in seen) and time.monotonic() < deadline:
        gc.collect()    # (the thread marks itself idle just after it lets go: wait for it)
        time.sleep(0.01)
    assert [ref() for ref in seen] == [None, None]
