"""Reads on several threads (``threads=N``) give what one thread gives, byte for byte.

Small stores of several commitlog files / segments and partitions, the split pieces made
small (``SPLIT_BYTES``) so that files are cut too; each read with threads 1, 2 and 7: the same
rows in the same order (the batches' IPC bytes, concatenated), and on damaged stores the same
error (type, file, position) after the same rows.  Where the split guesses a message boundary,
the guess is made wrong on purpose (Hypothesis): a wrong guess must never show.
"""

from __future__ import annotations

import os
import random
import shutil
import threading

import pyarrow as pa
import pytest
from conftest import cli_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segstore_kafka import store as kafka_store
from segstore_rocketmq import columnar as rocketmq_columnar
from segstore_rocketmq import recovery as rocketmq_recovery

import segstore
from segstore import cli, overlap
from segstore.errors import ConfigError, SegstoreError

THREADS = (1, 2, 7)
#: commitlog files of 64 KiB: the store below fills about a dozen
FILE_SIZE = 64 << 10
#: small consume-queue and index files too (copies of the store stay small)
ROCKETMQ_CONFIG = {"mappedFileSizeCommitLog": FILE_SIZE, "mappedFileSizeConsumeQueue": 20 * 1000,
                   "maxHashSlotNum": 1024, "maxIndexNum": 4096}


def _messages(n: int, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    return [{"topic": f"t{i % 3}", "partition": i % 2, "key": f"k{i}", "tags": f"tag{i % 5}",
             "value": rnd.randbytes(rnd.randrange(0, 400)), "headers": [("h", str(i).encode())]}
            for i in range(n)]


@pytest.fixture(scope="module")
def rocketmq_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("parallel") / "rocketmq")
    with segstore.open(path, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        store.append_batch(_messages(2500, 1))
    return path


@pytest.fixture(scope="module")
def kafka_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("parallel") / "kafka")
    messages = [{k: v for k, v in m.items() if k != "tags"} for m in _messages(3000, 2)]
    with segstore.open(path, "kafka", "a", **{"segment.bytes": 40_000}) as store:
        for i in range(0, len(messages), 50):       # batches of 50 records: many batches a segment
            store.append_batch(messages[i:i + 50])
    return path


@pytest.fixture(autouse=True)
def small_splits(monkeypatch):
    monkeypatch.setattr(rocketmq_columnar, "SPLIT_BYTES", 5000)
    monkeypatch.setattr(rocketmq_recovery, "WALK_SPLIT_FACTOR", 1)     # a verify's ranges as small
    monkeypatch.setattr(kafka_store, "SPLIT_BYTES", 3000)


def _ipc(batches) -> bytes:
    table = pa.Table.from_batches(batches).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _scan(path: str, threads: int, **kwargs) -> tuple[bytes, tuple | None]:
    """The rows read (as IPC bytes) and the error after them: (type, path, position, message)."""
    batches: list[pa.RecordBatch] = []
    error = None
    with segstore.open(path) as store:
        try:
            for batch in store.scan_arrow(threads=threads, **kwargs):
                batches.append(batch)
        except SegstoreError as err:
            error = (type(err), err.path, err.pos, err.message)
    schema = batches[0].schema if batches else None
    return (_ipc(batches) if schema else b""), error


def _same_for_all_threads(path: str, **kwargs) -> tuple[bytes, tuple | None]:
    one = _scan(path, 1, **kwargs)
    for threads in THREADS[1:]:
        assert _scan(path, threads, **kwargs) == one, f"threads={threads}"
    return one


# -- RocketMQ scan_arrow ---------------------------------------------------------------------


def test_rocketmq_scan_arrow_same_rows_for_every_thread_count(rocketmq_path):
    rows, error = _same_for_all_threads(rocketmq_path)
    assert error is None
    assert pa.ipc.open_stream(rows).read_all().num_rows == 2500
    assert len(os.listdir(os.path.join(rocketmq_path, "commitlog"))) > 5     # the split is real


def test_rocketmq_scan_arrow_byte_range_and_projection(rocketmq_path):
    _same_for_all_threads(rocketmq_path, start=100_000, end=300_000, columns=["position", "value", "topic"])
    _same_for_all_threads(rocketmq_path, start=FILE_SIZE + 7, end=FILE_SIZE * 2 + 11)


def _damaged(src: str, dst: str, offset: int, data: bytes) -> str:
    shutil.copytree(src, dst)
    names = sorted(os.listdir(os.path.join(dst, "commitlog")))
    file_no, pos = divmod(offset, FILE_SIZE)
    with open(os.path.join(dst, "commitlog", names[file_no]), "r+b") as f:
        f.seek(pos)
        f.write(data)
    return dst


@pytest.mark.parametrize("offset,data,raises", [
    (3 * FILE_SIZE + 20_000, b"\xff\xee", True),        # inside a message (a body CRC or a length)
    # zeros over a message's header with messages after them: damage (RocketMQ 4.9.7
    # CommitLog.checkMessageAndReturnSize: magic 0 is illegal), not the end of the file's data
    (5 * FILE_SIZE + 9_000, b"\0" * 300, True),
    (2 * FILE_SIZE + 40_000, b"\x7f\xff\xff\xff", True),  # a length running past the file
])
def test_rocketmq_scan_arrow_damage_same_error_same_place(rocketmq_path, tmp_path, offset, data, raises):
    if not data.strip(b"\0"):      # zeros at a message's start
        with segstore.open(rocketmq_path) as store:
            positions = pa.Table.from_batches(store.scan_arrow(["position"], threads=1))["position"]
        offset = min(p for p in positions.to_pylist() if p >= offset)
    path = _damaged(rocketmq_path, str(tmp_path / "s"), offset, data)
    rows, error = _same_for_all_threads(path)
    assert rows != _scan(rocketmq_path, 1)[0]
    assert (error is not None) == raises


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), split=st.integers(2000, 30_000), threads=st.sampled_from([2, 7]))
def test_rocketmq_wrong_boundary_guesses_never_show(rocketmq_path, monkeypatch, seed, split, threads):
    """A guess inside a message (a body holding a header's bytes) is walked over, never taken."""
    monkeypatch.setattr(rocketmq_columnar, "SPLIT_BYTES", split)
    expected = _scan(rocketmq_path, 1)
    true_boundary = rocketmq_columnar.next_boundary

    def guess(view, pos, limit, base):
        rnd = random.Random(seed ^ pos)
        if rnd.random() < 0.5:
            return true_boundary(view, pos, limit, base)
        return min(limit, pos + rnd.randrange(0, 600))

    monkeypatch.setattr(rocketmq_columnar, "next_boundary", guess)
    assert _scan(rocketmq_path, threads) == expected


# -- Kafka scan_arrow ------------------------------------------------------------------------


def test_kafka_scan_arrow_same_rows_for_every_thread_count(kafka_path):
    rows, error = _same_for_all_threads(kafka_path)
    assert error is None
    assert pa.ipc.open_stream(rows).read_all().num_rows == 3000
    assert len([n for n in os.listdir(os.path.join(kafka_path, "t1-1")) if n.endswith(".log")]) > 2
    _same_for_all_threads(kafka_path, topic="t1", partition=1, offset=137, columns=["offset", "value"])
    _same_for_all_threads(kafka_path, topic="t0", isolation="read_committed")


def _kafka_damaged(src: str, dst: str, name: str, pos: int, data: bytes) -> str:
    shutil.copytree(src, dst)
    return _kafka_damaged_in_place(dst, name, pos, data)


def _kafka_damaged_in_place(path: str, name: str, pos: int, data: bytes) -> str:
    """``data`` written at ``pos`` of the second segment of partition directory ``name``."""
    logs = sorted(n for n in os.listdir(os.path.join(path, name)) if n.endswith(".log"))
    with open(os.path.join(path, name, logs[1]), "r+b") as f:
        f.seek(pos)
        f.write(data)
    return path


@pytest.mark.parametrize("pos,data", [(9_000, b"\xff\xee"), (20_011, b"\x7f\xff\xff"), (61, b"\0\0\0\0")])
def test_kafka_scan_arrow_damage_same_error_same_place(kafka_path, tmp_path, pos, data):
    path = _kafka_damaged(kafka_path, str(tmp_path / "k"), "t0-0", pos, data)
    rows, error = _same_for_all_threads(path)
    assert error is not None and error[1].endswith(".log")
    assert rows != _scan(kafka_path, 1)[0]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), threads=st.sampled_from([2, 7]))
def test_kafka_wrong_index_positions_never_show(kafka_path, monkeypatch, seed, threads):
    """Cut points that are no batch start (a stale or damaged offset index) are decoded over."""
    expected = _scan(kafka_path, 1)
    true_points = kafka_store.split_points

    def points(seg, lo, step=None):
        rnd = random.Random(seed ^ lo ^ seg.base)
        cuts = sorted({c + rnd.choice([0, 0, 1, 13, -5]) for c in true_points(seg, lo, step)}
                      | {rnd.randrange(lo, seg.log.size + 1) for _ in range(3)})
        return [c for c in cuts if lo < c < seg.log.size]

    monkeypatch.setattr(kafka_store, "split_points", points)
    assert _scan(kafka_path, threads) == expected


def test_threads_below_one_refused(rocketmq_path, kafka_path):
    for path in (rocketmq_path, kafka_path):
        with segstore.open(path) as store, pytest.raises(ConfigError):
            next(store.scan_arrow(threads=0))


@pytest.mark.parametrize("argv", [["verify"], ["recover"], ["dump", "--json"]])
def test_a_thread_count_past_the_most_is_a_usage_error(rocketmq_path, kafka_path, tmp_path, argv):
    """Before: Kafka ``verify``/``recover --threads 99999999`` started a thread per N (``overlap.ahead``)
    and ran for hours; a read held N byte ranges a round, every range of the store at once."""
    for path in (rocketmq_path, kafka_path):
        copy = tmp_path / os.path.basename(path)
        shutil.copytree(path, copy, dirs_exist_ok=True)
        before = sorted((p.name, p.stat().st_size) for p in copy.rglob("*"))
        code, out, err = cli_run(argv[0], copy, *argv[1:], "--threads", overlap.MAX_THREADS + 1)
        assert (code, out) == (2, "")
        assert "expected a whole number of threads, at most 256, found '257'" in err
        assert sorted((p.name, p.stat().st_size) for p in copy.rglob("*")) == before
        with segstore.open(str(copy)) as store:
            with pytest.raises(ConfigError, match="expected threads of at most 256, found 257"):
                store.verify(threads=overlap.MAX_THREADS + 1)
            assert store.verify(threads=overlap.MAX_THREADS) == []


def test_default_is_the_cores_the_process_may_use_from_three(monkeypatch):
    monkeypatch.delenv("SEGSTORE_THREADS", raising=False)
    assert overlap.thread_count(None) == overlap.default_threads(len(os.sched_getaffinity(0)))
    monkeypatch.setenv("SEGSTORE_THREADS", "3")
    assert overlap.thread_count(None) == 3 and overlap.thread_count(5) == 5
    for bad, said in (("0", "of at least 1, found '0'"), ("-2", "of at least 1, found '-2'"),
                      ("x", "to be a whole number, found 'x'"), ("257", "of at most 256, found '257'")):
        monkeypatch.setenv("SEGSTORE_THREADS", bad)
        # before: "expected threads of at least 1, found 0", naming no variable the user had set
        with pytest.raises(ConfigError, match=f"^expected SEGSTORE_THREADS {said}$"):
            overlap.thread_count(None)


# -- dump --json ------------------------------------------------------------------------------


def _dump(path: str, threads: int, walk_ahead: bool = False, text: bool = False, **kwargs
          ) -> tuple[bytes, tuple | None]:
    out, error = [], None
    with segstore.open(path) as store:
        dump = store.dump_text if text else store.dump_json
        if walk_ahead:
            kwargs["walk_ahead"] = True
        blocks = dump(threads=threads, **kwargs)
        try:
            for block in blocks:
                out.append(bytes(block))
        except SegstoreError as err:
            error = (type(err), err.path, err.pos, err.message)
        blocks.close()
        assert not _walkers()
    return b"".join(out), error


@pytest.mark.parametrize("walk_ahead", [False, True])
@pytest.mark.parametrize("kwargs", [{}, {"topic": "t1"}, {"partition": 1, "isolation": "read_committed"}])
def test_dump_json_same_bytes_for_every_thread_count(rocketmq_path, kafka_path, kwargs, walk_ahead):
    for path in (rocketmq_path, kafka_path):
        one = _dump(path, 1, **kwargs)
        assert one[1] is None and one[0].count(b"\n") > 100
        for threads in THREADS[1:]:
            assert _dump(path, threads, walk_ahead, **kwargs) == one


@pytest.mark.parametrize("walk_ahead", [False, True])
def test_dump_json_damage_same_error_same_place(rocketmq_path, kafka_path, tmp_path, walk_ahead):
    for path in (_damaged(rocketmq_path, str(tmp_path / "s"), 3 * FILE_SIZE + 20_000, b"\xff\xee"),
                 _kafka_damaged(kafka_path, str(tmp_path / "k"), "t1-1", 9_000, b"\xff\xee")):
        one = _dump(path, 1)
        assert one[1] is not None
        for threads in THREADS[1:]:
            assert _dump(path, threads, walk_ahead) == one


@pytest.mark.parametrize("kwargs", [{}, {"topic": "t2", "partition": 0}, {"offsets": {("t1", 0): (10, 300)}}])
def test_rocketmq_dump_text_walked_ahead_same_bytes(rocketmq_path, tmp_path, kwargs):
    """``dump_text`` takes the walk ahead too (RocketMQ: the same walk as ``dump_json``), and a window's
    (``offsets``: walked from its first message, ``aligned``)."""
    one = _dump(rocketmq_path, 1, text=True, **kwargs)
    assert one[1] is None and one[0].count(b"\n") > 100
    for threads in THREADS[1:]:
        assert _dump(rocketmq_path, threads, True, text=True, **kwargs) == one
    damaged = _damaged(rocketmq_path, str(tmp_path / "s"), 3 * FILE_SIZE + 20_000, b"\xff\xee")
    one = _dump(damaged, 1, text=True)
    assert one[1] is not None
    assert _dump(damaged, 2, True, text=True) == one


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), split=st.integers(2000, 30_000), threads=st.sampled_from([2, 7]))
def test_dump_walked_ahead_wrong_guesses_never_show(rocketmq_path, kafka_path, monkeypatch, seed, split,
                                                      threads):
    """A RocketMQ boundary guessed inside a message, a Kafka cut at no batch start: walked over by the
    dump's walk ahead as by its rounds (the range is walked again, on the caller's thread)."""
    monkeypatch.setattr(rocketmq_columnar, "SPLIT_BYTES", split)
    expected = _dump(rocketmq_path, 1), _dump(kafka_path, 1)
    true_boundary, true_points = rocketmq_columnar.next_boundary, kafka_store.split_points

    def guess(view, pos, limit, base):
        rnd = random.Random(seed ^ pos)
        if rnd.random() < 0.5:
            return true_boundary(view, pos, limit, base)
        return min(limit, pos + rnd.randrange(0, 600))

    def points(seg, lo, step=None):
        rnd = random.Random(seed ^ lo ^ seg.base)
        cuts = sorted({c + rnd.choice([0, 0, 1, 13, -5]) for c in true_points(seg, lo, step)}
                      | {rnd.randrange(lo, seg.log.size + 1) for _ in range(3)})
        return [c for c in cuts if lo < c < seg.log.size]

    monkeypatch.setattr(rocketmq_columnar, "next_boundary", guess)
    monkeypatch.setattr(kafka_store, "split_points", points)
    assert (_dump(rocketmq_path, threads, True), _dump(kafka_path, threads, True)) == expected


def test_dump_walked_ahead_closed_early_stops_its_threads(rocketmq_path, kafka_path):
    """A dump walked ahead and closed after its first block: its threads are gone once ``close``
    returns (the caller may close the store next), and the store reads on as before."""
    for path in (rocketmq_path, kafka_path):
        with segstore.open(path) as store:
            blocks = store.dump_json(threads=2, walk_ahead=True)
            first = bytes(next(blocks))
            if overlap.ENABLED:
                assert _walkers()
            blocks.close()
            assert not _walkers()
            assert b"".join(bytes(b) for b in store.dump_json(threads=1)).startswith(first)


def test_cli_dump_json_threads(rocketmq_path, kafka_path, tmp_path, capsys, monkeypatch):
    """The CLI's dump (JSON, text, a group's backlog) walks ahead: the same output and exit for every
    thread count, and no thread left once it returns."""
    from segstore_rocketmq import store as rocketmq_store

    walks: list[int] = []

    def counted(tasks, run, threads, window):
        walks.append(threads)
        return overlap.ahead(tasks, run, threads, window)

    for module in (rocketmq_store, kafka_store):
        monkeypatch.setattr(module, "ahead", counted)
    copy = str(tmp_path / "r")      # a RocketMQ group's offsets (a Kafka one's need __consumer_offsets)
    shutil.copytree(rocketmq_path, copy)
    with segstore.open(copy, mode="a") as store:
        store.commit_offsets("g", {("t1", 0): 20, ("t2", 1): 7})
    for path, backlog in ((copy, [["--json", "--group", "g"], ["--group", "g"]]), (kafka_path, [])):
        for flags in (["--json"], [], *backlog):
            outputs = []
            for threads in ("1", "2", "7"):
                outputs.append((cli.main(["dump", path, *flags, "--threads", threads]), capsys.readouterr()))
                assert not _walkers()
            assert outputs[0][0] == 0 and outputs[0][1].out.count("\n") > 100, (path, flags)
            assert outputs.count(outputs[0]) == 3, (path, flags)
    # walked ahead with threads 2 and 7: RocketMQ's four dumps, Kafka's JSON (its text is one thread's)
    assert walks == [2, 7] * 5
    for bad in ("0", "two"):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["dump", rocketmq_path, "--json", "--threads", bad])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"--threads: expected a whole number of threads, at least 1, found '{bad}'" in err


def test_cli_dump_stops_its_walk_ahead_when_the_write_fails(rocketmq_path, kafka_path):
    """A write that fails mid-dump (the pipe's reader gone): the walk ahead's threads are done when the
    CLI's dump raises, before the store it reads is closed."""
    import io

    class Gone(io.TextIOWrapper):
        def __init__(self) -> None:
            super().__init__(io.BytesIO(), encoding="utf-8")
            self.writes = 0

        @property
        def buffer(self):
            return self

        def write(self, block):     # (the raw buffer's write, given blocks)
            self.writes += 1
            if self.writes == 2:
                raise BrokenPipeError(32, "Broken pipe")
            return len(block)

    for path in (rocketmq_path, kafka_path):
        with segstore.open(path) as store:
            out = Gone()
            with pytest.raises(BrokenPipeError):
                cli._dumped(store.dump_json, out, threads=2)
            assert out.writes == 2 and not _walkers()


# -- verify -----------------------------------------------------------------------------------


def _verify(path: str, threads: int) -> list:
    with segstore.open(path) as store:
        return [(p.path, p.pos, p.message) for p in store.verify(threads=threads)]


@pytest.mark.parametrize("damage", [[], [(9_000, b"\xff\xee")], [(5_000, b"\x01"), (20_011, b"\x7f\xff\xff")],
                                    [(61, b"\0\0\0\0"), (30_000, b"\xff")]])
def test_kafka_verify_same_problems_for_every_thread_count(kafka_path, tmp_path, damage):
    path = str(tmp_path / "k")
    shutil.copytree(kafka_path, path)
    for pos, data in damage:
        _kafka_damaged_in_place(path, "t0-1", pos, data)
    one = _verify(path, 1)
    assert bool(one) == bool(damage)
    for threads in THREADS[1:]:
        assert _verify(path, threads) == one


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_kafka_verify_wrong_index_positions_never_show(kafka_path, tmp_path_factory, monkeypatch, seed):
    path = str(tmp_path_factory.mktemp("v") / "k")
    shutil.copytree(kafka_path, path)
    _kafka_damaged_in_place(path, "t1-0", 12_345, b"\xfe")
    expected = _verify(path, 1)
    true_points = kafka_store.split_points

    def points(seg, lo, step=None):
        rnd = random.Random(seed ^ seg.base)
        cuts = {c + rnd.choice([0, 3, -7]) for c in true_points(seg, lo, step)}
        cuts.add(rnd.randrange(lo, seg.log.size + 1))
        return sorted(c for c in cuts if lo < c < seg.log.size)

    monkeypatch.setattr(kafka_store, "split_points", points)
    assert _verify(path, 2) == expected


@pytest.mark.parametrize("damage", [
    [],
    [(3 * FILE_SIZE + 20_000, b"\xff\xee")],                                  # one message
    [(2 * FILE_SIZE + 9_000, b"\0" * 3000), (5 * FILE_SIZE + 777, b"\x01")],  # zeros, a later flip
])
def test_rocketmq_verify_same_problems_for_every_thread_count(rocketmq_path, tmp_path, damage):
    path = str(tmp_path / "s")
    shutil.copytree(rocketmq_path, path)
    names = sorted(os.listdir(os.path.join(path, "commitlog")))
    for offset, data in damage:
        file_no, pos = divmod(offset, FILE_SIZE)
        with open(os.path.join(path, "commitlog", names[file_no]), "r+b") as f:
            f.seek(pos)
            f.write(data)
    one = _verify(path, 1)
    assert bool(one) == bool(damage)
    for threads in THREADS[1:]:
        assert _verify(path, threads) == one


def test_rocketmq_verify_index_problems_same_for_every_thread_count(rocketmq_path, tmp_path):
    """The index files' chains and slots are checked beside the walk with several threads: the same
    problems at the same places."""
    path = str(tmp_path / "s")
    shutil.copytree(rocketmq_path, path)
    index = os.path.join(path, "index", sorted(os.listdir(os.path.join(path, "index")))[0])
    slots = ROCKETMQ_CONFIG["maxHashSlotNum"]
    with open(index, "r+b") as f:
        f.seek(40 + 4 * 7)                      # a slot pointing at the wrong entry
        f.write((3).to_bytes(4, "big"))
        f.seek(40 + 4 * slots + 20 * 5 + 16)    # entry 5's link
        f.write((4000).to_bytes(4, "big"))
    one = _verify(path, 1)
    assert any("to link to entry" in str(p) for p in one) and any("to point at entry" in str(p) for p in one)
    for threads in THREADS[1:]:
        assert _verify(path, threads) == one


def _walkers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "segstore-ahead"]


def test_rocketmq_split_walk_stops_its_threads_before_the_caller_goes_on(rocketmq_path):
    """``recovery.walk_batches`` on several threads walks ranges ahead of the batch it hands out
    (``overlap.ahead``: a verify checks, a recovery dispatches, while they walk), the same batches as one
    thread; closed early, or walked to its end, its threads are gone when it returns (a recovery changes
    the files after its walk)."""
    from segstore_rocketmq.recovery import Walk, walk_batches

    with segstore.open(rocketmq_path) as store:
        cl = store.commitlog

        def walk(threads: int):
            return walk_batches(cl, cl.min_offset, store.tags_code, Walk(cl.min_offset, cl.min_offset),
                                counted=False, threads=threads)

        def walked(threads: int) -> list[tuple[int, int, int, str]]:     # batches are cut elsewhere
            return [(p, q, code, batch.topics[t]) for batch in walk(threads) for p, q, code, t in zip(
                batch.phy.tolist(), batch.queue_offset.tolist(), batch.tags_code.tolist(),
                batch.topic.tolist(), strict=True)]

        one = walked(1)
        assert len(one) == 2500 and walked(2) == one
        assert not _walkers()
        walking = walk(2)
        next(walking)
        if overlap.ENABLED:     # (one core: the ranges are walked on this thread)
            assert _walkers()
        walking.close()
        assert not _walkers()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), split=st.integers(2000, 30_000))
def test_rocketmq_verify_wrong_boundary_guesses_never_show(rocketmq_path, monkeypatch, seed, split):
    monkeypatch.setattr(rocketmq_columnar, "SPLIT_BYTES", split)
    expected = _verify(rocketmq_path, 1)
    true_boundary = rocketmq_columnar.next_boundary

    def guess(view, pos, limit, base):
        rnd = random.Random(seed ^ pos)
        if rnd.random() < 0.5:
            return true_boundary(view, pos, limit, base)
        return min(limit, pos + rnd.randrange(600))

    monkeypatch.setattr(rocketmq_columnar, "next_boundary", guess)
    assert _verify(rocketmq_path, 2) == expected


def test_cli_verify_threads(kafka_path, tmp_path, capsys):
    path = _kafka_damaged(kafka_path, str(tmp_path / "k"), "t0-0", 9_000, b"\xff\xee")
    outputs = []
    for threads in ("1", "2", "7"):
        assert cli.main(["verify", path, "--threads", threads]) == 1
        outputs.append(capsys.readouterr().out)
    assert ".log:" in outputs[0] and outputs.count(outputs[0]) == 3


@settings(max_examples=10, deadline=None)
@given(where=st.lists(st.integers(0, 12 * FILE_SIZE), min_size=1, max_size=20))
def test_next_boundary_finds_the_next_message(rocketmq_path, where):
    """On a store's files the guess is the next message: bodies of random bytes hold no false mark."""
    with segstore.open(rocketmq_path) as store:
        table = pa.Table.from_batches(store.scan_arrow(["position"], threads=1))
        positions = sorted(table["position"].to_pylist())
        segs = list(store.commitlog.log.segments)
        for at in where:
            seg = segs[min(at // FILE_SIZE, len(segs) - 1)]
            pos = at - seg.base
            if not 0 <= pos < seg.wrote:
                continue
            found = rocketmq_columnar.next_boundary(seg.file.view(), pos, seg.wrote, seg.base)
            following = [p - seg.base for p in positions if seg.base + pos <= p < seg.base + seg.wrote]
            assert found == (following[0] if following else seg.wrote)


def _boundary_by_every_byte(view: memoryview, pos: int, limit: int, base: int) -> int:
    """next_boundary as it was: every byte compared with all four bytes of each magic (the reference)."""
    size = len(view)
    for at in range(pos, min(limit, size - 35)):
        magic = bytes(view[at + 4:at + 8])
        if any(magic == m.tobytes() for m in rocketmq_columnar._MAGICS) \
                and int.from_bytes(view[at + 28:at + 36], "big", signed=True) == base + at:
            return at
    return limit


@settings(max_examples=200, deadline=None)
@given(data=st.data(), fill=st.sampled_from([b"\x00", b"\xda", b"\xda\xa3", b"\xda\xa3\x20", None]),
       size=st.integers(36, 3000), base=st.sampled_from([0, 1 << 30]))
def test_next_boundary_is_the_first_plausible_header(data, fill, size, base):
    """next_boundary looks past the magics' first byte only where it matched: the same first position
    as a check of every byte, on zeros, on runs of magic prefixes and on random bytes, with headers
    planted (some with a wrong PHYSICALOFFSET, some with the v2 magic)."""
    buf = bytearray((fill * size)[:size] if fill else data.draw(st.binary(min_size=size, max_size=size)))
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, size - 36))
        magic = data.draw(st.sampled_from(rocketmq_columnar._MAGICS)).tobytes()
        phys = base + at + data.draw(st.sampled_from([0, 0, 1, -4]))
        buf[at + 4:at + 8] = magic
        buf[at + 28:at + 36] = phys.to_bytes(8, "big", signed=True)
    view = memoryview(bytes(buf))
    pos = data.draw(st.integers(0, size))
    limit = data.draw(st.integers(pos, size + 10))
    expected = _boundary_by_every_byte(view, pos, limit, base)
    assert rocketmq_columnar.next_boundary(view, pos, limit, base) == expected
    assert rocketmq_columnar.next_boundary_py(view, pos, limit, base) == expected


@pytest.mark.parametrize("at", [0, (64 << 10) - 40, (64 << 10) - 4, 64 << 10, (64 << 10) + 1, 150_000, None])
@pytest.mark.parametrize("pos", [0, 3, 70_000])
def test_next_boundary_past_its_first_64k(at, pos):
    """The C search gives up the GIL past the first 64 KiB it searches (a range of zeros after a crashed
    file's data): a header before, across and after that point, or none, found as the reference finds
    it; a false mark (wrong PHYSICALOFFSET) just before it passed over."""
    size, base = 200_000, 1 << 30
    buf = bytearray(size)
    magic = rocketmq_columnar._MAGICS[1].tobytes()
    false = (64 << 10) - 100
    buf[false + 4:false + 8] = magic
    buf[false + 28:false + 36] = (base + false + 1).to_bytes(8, "big")
    if at is not None:
        buf[at + 4:at + 8] = magic
        buf[at + 28:at + 36] = (base + at).to_bytes(8, "big")
    view = memoryview(bytes(buf))
    expected = at if at is not None and at >= pos else size
    assert rocketmq_columnar.next_boundary_py(view, pos, size, base) == expected
    assert rocketmq_columnar.next_boundary(view, pos, size, base) == expected
    assert rocketmq_columnar.next_boundary(view, pos, size - 36, base) == min(expected, size - 36)


# -- recover ----------------------------------------------------------------------------------


def _tree_bytes(path: str) -> dict[str, bytes]:
    """The bytes of the store's message and index files (an IndexFile by its rank: it is named for
    the time it was made)."""
    out = {}
    for where in ("commitlog", "consumequeue", "index"):
        for dirpath, _, names in os.walk(os.path.join(path, where)):
            for rank, name in enumerate(sorted(names)):
                full = os.path.join(dirpath, name)
                with open(full, "rb") as f:
                    out[f"index#{rank}" if where == "index" else os.path.relpath(full, path)] = f.read()
    return out


def _recovered(src: str, dst: str, threads: int, damage: list, monkeypatch) -> tuple:
    """A copy of ``src`` that lost its queues and IndexFile in a crash (and ``damage``), recovered on
    ``threads`` threads (at open and by ``recover``): the lines, the error and the files' bytes."""
    shutil.copytree(src, dst)
    for name in ("consumequeue", "index"):
        shutil.rmtree(os.path.join(dst, name))
    open(os.path.join(dst, "abort"), "wb").close()
    names = sorted(os.listdir(os.path.join(dst, "commitlog")))
    for offset, data in damage:
        file_no, pos = divmod(offset, FILE_SIZE)
        with open(os.path.join(dst, "commitlog", names[file_no]), "r+b") as f:
            f.seek(pos)
            f.write(data)
    monkeypatch.setenv("SEGSTORE_THREADS", str(threads))     # the recovery at open
    error = None
    with segstore.open(dst, "rocketmq", "a", **ROCKETMQ_CONFIG) as store:
        try:
            lines = store.recover(threads=threads)
        except SegstoreError as err:
            lines, error = getattr(err, "actions", None), (type(err), err.path.replace(dst, "STORE"),
                                                           err.pos, err.message)
    lines = [line.replace(dst, "STORE") for line in lines or []]
    return lines, error, _tree_bytes(dst)


# inside a body (its CRC fails); at 5 * FILE_SIZE + 20_000 they lay in a message's properties, which the
# broker reads as new String(bytes, UTF_8) (CommitLog.checkMessageAndReturnSize): no damage
@pytest.mark.parametrize("damage", [[], [(5 * FILE_SIZE + 19_800, b"\xff\xee")]])
def test_rocketmq_recover_same_files_for_every_thread_count(rocketmq_path, tmp_path, monkeypatch, damage):
    one = _recovered(rocketmq_path, str(tmp_path / "1"), 1, damage, monkeypatch)
    assert any(name.startswith("consumequeue") for name in one[2]) and "index#0" in one[2]
    assert (one[1] is not None) == bool(damage)     # damage with intact messages after it stays
    for threads in THREADS[1:]:
        assert _recovered(rocketmq_path, str(tmp_path / str(threads)), threads, damage, monkeypatch) == one



def _kafka_recovered(src: str, dst: str, threads: int, lost_checkpoint: bool) -> tuple:
    """A copy of ``src`` whose partition t0-1 is damaged, recovered on ``threads`` threads: the
    lines, the error (type, path, position, message) and every file's bytes.  With the indexes and
    the recovery-point checkpoint lost every segment is checked and rebuilt (the damage is cut);
    with both kept, the damage lies below the recovery point and stays (an UnrepairedDataError)."""
    shutil.copytree(src, dst)
    if lost_checkpoint:
        os.remove(os.path.join(dst, "recovery-point-offset-checkpoint"))
        for dirpath, _, names in os.walk(dst):
            for name in names:
                if name.endswith((".index", ".timeindex")):
                    os.remove(os.path.join(dirpath, name))
    _kafka_damaged_in_place(dst, "t0-1", 9_000, b"\xff\xee")
    error = None
    with segstore.open(dst, "kafka", "a", **{"segment.bytes": 40_000}) as store:
        try:
            lines = store.recover(threads=threads)
        except SegstoreError as err:
            lines, error = getattr(err, "actions", None), (type(err), err.path.replace(dst, "STORE"),
                                                           err.pos, err.message)
    out = {}
    for dirpath, _, names in os.walk(dst):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, dst)] = f.read()
    return [line.replace(dst, "STORE") for line in lines or []], error, out


@pytest.mark.parametrize("lost_checkpoint", [True, False])
def test_kafka_recover_same_files_for_every_thread_count(kafka_path, tmp_path, lost_checkpoint):
    one = _kafka_recovered(kafka_path, str(tmp_path / "1"), 1, lost_checkpoint)
    assert any(name.endswith(".index") for name in one[2])
    assert (one[1] is None) == lost_checkpoint
    assert any(".cut-" in name for name in one[2]) == lost_checkpoint
    for threads in THREADS[1:]:
        assert _kafka_recovered(kafka_path, str(tmp_path / str(threads)), threads, lost_checkpoint) == one

# -- convert ----------------------------------------------------------------------------------


def _converted(src: str, dst: str, to: str, threads: int, monkeypatch) -> dict[str, bytes]:
    """The files a conversion with ``SEGSTORE_THREADS=threads`` writes (names relative to ``dst``)."""
    from segstore.convert import convert

    monkeypatch.setenv("SEGSTORE_THREADS", str(threads))
    config = ROCKETMQ_CONFIG if to == "rocketmq" else {"segment.bytes": 40_000}
    convert(src, dst, to=to, config=config)
    out = {}
    for dirpath, _, names in os.walk(dst):
        for rank, name in enumerate(sorted(names)):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, dst)
            if rel.startswith("index"):         # an IndexFile is named for the time it was made
                rel = f"index#{rank}"
            if rel in ("checkpoint", "meta.properties") or rel.endswith((".json", ".json.bak")):
                continue                        # times of the run, ids
            with open(full, "rb") as f:
                out[rel] = f.read()
    return out


@pytest.mark.parametrize("to", ["kafka", "rocketmq"])
def test_convert_same_files_for_every_thread_count(rocketmq_path, kafka_path, tmp_path, monkeypatch, to):
    src = rocketmq_path if to == "kafka" else kafka_path
    one = _converted(src, str(tmp_path / "1"), to, 1, monkeypatch)
    assert len(one) > 3
    for threads in THREADS[1:]:
        assert _converted(src, str(tmp_path / str(threads)), to, threads, monkeypatch) == one


# -- segstore.overlap.in_rounds and ahead -----------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("runner", ["in_rounds", "ahead"])
def test_order_errors_and_a_failing_source(threads, runner):
    """overlap.in_rounds and overlap.ahead: results in task order, a task's error beside its task,
    the source's own error raised after the tasks before it."""
    def tasks():
        yield from range(10)
        raise ConfigError("the source's own error")

    def run(i: int) -> int:
        if i == 4:
            raise ValueError("four")
        return i * i

    got, raised = [], None
    try:
        for task, result, error in getattr(overlap, runner)(tasks(), run, threads, 3):
            got.append((task, result, type(error).__name__ if error else None))
    except ConfigError as err:
        raised = err.message
    assert got == [(i, None if i == 4 else i * i, "ValueError" if i == 4 else None) for i in range(10)]
    assert raised == "the source's own error"


def test_in_rounds_runs_nothing_while_suspended():
    import threading

    running = threading.Event()
    done: list[int] = []

    def run(i: int) -> int:
        running.set()
        done.append(i)
        running.clear()
        return i

    rounds = overlap.in_rounds(iter(range(8)), run, 2, 2)
    for task, _, _ in rounds:
        assert not running.is_set() and len(done) == 2 * (task // 2 + 1)


@pytest.mark.parametrize("threads", THREADS)
def test_in_rounds_lets_go_of_a_round_before_the_next_runs(threads):
    """A result handed out is not kept by in_rounds: once the caller drops a round's results, they
    are gone while the next round runs (held, each round's buffers would be fresh memory, every
    page a fault: a 500k-record Kafka dump --json on two threads faulted 25k pages, 15k since)."""
    import weakref

    class Result:
        pass

    handed: list[weakref.ref] = []

    def run(i: int) -> Result:
        # every result of the rounds before this one: dropped by the caller, so gone
        assert [ref() for ref in handed[:i - i % threads]] == [None] * (i - i % threads)
        return Result()

    count = 0
    for _, result, error in overlap.in_rounds(iter(range(4 * threads)), run, threads, threads):
        assert error is None
        handed.append(weakref.ref(result))
        count += 1
        del result
    assert count == 4 * threads


@settings(max_examples=50, deadline=None)
@given(hints=st.lists(st.integers(0, 5000), max_size=40), lo=st.integers(0, 3000),
       step=st.integers(1, 2000), size=st.integers(1, 6000))
def test_kafka_split_points_are_those_of_the_index_once_each(hints, lo, step, size):
    """split_points: each index position at or after every step once, in order, inside (lo, size) (as
    np.unique gave them, which a first split paid 14 ms for: it imports numpy.ma); an index out of
    order (damaged) too."""
    import numpy as np

    class Index:
        def columns(self):
            return {"position": np.array(hints, np.int32)}

    class Log:
        pass

    class Seg:
        offset_index, log = Index(), Log()

    Seg.log.size = size
    positions = np.array(hints, np.int64)
    wanted = np.arange(lo + step, size, step, dtype=np.int64)
    expected: list[int] = []
    if len(positions) and len(wanted):
        found = np.unique(positions[np.minimum(np.searchsorted(positions, wanted), len(positions) - 1)])
        expected = [int(c) for c in found if lo < c < size]
    assert kafka_store.split_points(Seg(), lo, step) == expected


_SPLIT_READS = """
import json, sys
import segstore
from segstore_kafka import store as kafka_store
from segstore_rocketmq import columnar as rocketmq_columnar, recovery as rocketmq_recovery
rocketmq_columnar.SPLIT_BYTES, kafka_store.SPLIT_BYTES = 5000, 3000
rocketmq_recovery.WALK_SPLIT_FACTOR = 1
rows = 0
for path in sys.argv[1:]:
    with segstore.open(path) as store:
        rows += sum(batch.num_rows for batch in store.scan_arrow(threads=2))
        rows += sum(bytes(block).count(b"\\n") for block in store.dump_json(threads=2))
        assert store.verify(threads=2) == []
loaded = [m for m in sys.modules
          if m.split(".")[0] in ("concurrent", "logging") or m == "numpy.ma" or m.startswith("numpy.ma.")]
print(json.dumps({"rows": rows, "loaded": sorted(loaded)}))
"""


def test_a_first_read_on_two_threads_imports_no_masked_arrays_or_futures(rocketmq_path, kafka_path):
    """A fresh process's first split read, dump and verify: no numpy.ma (np.unique imports it, 14 ms)
    and no concurrent.futures with its logging (8 ms), which a 500k-record read on two threads paid
    inside its work (benchmarks/NOTES.md, "Threads")."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "formats"),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _SPLIT_READS, rocketmq_path, kafka_path],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["rows"] == 2 * (2500 + 3000)
    assert result["loaded"] == []


@pytest.mark.parametrize("threads", (2, 7))
def test_ahead_runs_within_its_window_and_nothing_once_closed(threads):
    import threading

    lock = threading.Lock()
    started: list[int] = []
    handed = [0]

    def run(i: int) -> int:
        with lock:
            started.append(i)
            # never more than the window past the result the caller holds
            assert i < handed[0] + max(4, threads) + 1
        return i

    results = overlap.ahead(iter(range(100)), run, threads, 4)
    for task, result, _ in results:
        handed[0] = task + 1
        assert result == task
        if task == 10:
            break
    results.close()
    seen = len(started)
    assert sorted(started) == list(range(seen)) and seen <= 11 + max(4, threads)
    assert [t.name for t in threading.enumerate()].count("segstore-ahead") == 0


def test_the_default_thread_count_splits_only_from_three_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 2 cores the default's one range already uses both, with the overlap (benchmarks/bench_parallel.py:
    the split measured 0.78-1.37x of it), so the default splits only where there are more."""
    assert [overlap.default_threads(n) for n in (1, 2, 3, 16)] == [1, 1, 3, 16]
    monkeypatch.delenv("SEGSTORE_THREADS", raising=False)
    monkeypatch.setattr(overlap, "cores", lambda: 2)
    assert overlap.thread_count(None) == 1
    monkeypatch.setattr(overlap, "cores", lambda: 8)
    assert overlap.thread_count(None) == 8
    monkeypatch.setenv("SEGSTORE_THREADS", "2")
    assert overlap.thread_count(None) == 2
