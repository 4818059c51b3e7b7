"""One thread asked for is one thread: ``threads=1``, ``--threads 1``, ``SEGSTORE_THREADS=1`` and
``convert(threads=1)`` run every step on the calling thread (no pool step, no conversion reading
thread, no second encoding thread), while the default keeps the overlap on 2 cores.

Before, :func:`segstore.overlap.overlapped` (a RocketMQ ``scan_arrow``'s next walk beside this
batch's build), :func:`~segstore.overlap.pipelined` (a conversion's reading beside its writing) and
:func:`~segstore.overlap.shared` (the Kafka writer's encoding) looked at the process-wide
``overlap.ENABLED`` only: ``threads=1`` kept a second core busy, and ``convert`` took no count.

Every path is run here with the overlap on (``ENABLED``, as on a machine of 2 cores or more), the
threads it starts and the pool steps it submits recorded.  Two threads are no workers and are
allowed: a RocketMQ store open for append has the broker's flusher (4.9.7's
``FlushRealTimeService`` and ``FlushConsumeQueueService``, asleep between flushes), and a Kafka log
dir's close syncs its partitions' files on a few threads (waiting on the disk, ``LogDir.close``).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import cli_run

import segstore
from segstore import overlap
from segstore.convert import convert
from segstore.errors import ConfigError, ConversionOptionError

#: threads that wait (on a timer, on the disk) rather than work: not a thread count's
_SERVICE = {"segstore-rocketmq-flush", "segstore-kafka-close"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """A RocketMQ store (3 topics, 2 queues each) and the Kafka log dir converted from it."""
    root = tmp_path_factory.mktemp("one-thread")
    rocketmq, kafka = root / "rocketmq", root / "kafka"
    with segstore.open(str(rocketmq), "rocketmq", "a") as store:
        store.append_batch([{"topic": f"T{i % 3}", "queue_id": i % 2, "body": bytes([i % 251]) * (i % 90),
                             "keys": [f"k{i}"], "tags": "t"} for i in range(6000)])
    convert(rocketmq, kafka, to="kafka")
    return {"rocketmq": rocketmq, "kafka": kafka}


class _Recorded:
    """The threads started (by name) and the pool steps submitted (by function name) while on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started: list[str] = []
        self.steps: list[str] = []
        start, submit = threading.Thread.start, overlap._Pool.submit
        recorded = self

        def started(thread: threading.Thread) -> None:
            recorded.started.append(thread.name)
            start(thread)

        def submitted(pool: overlap._Pool, fn, *args):
            recorded.steps.append(getattr(fn, "__name__", repr(fn)))
            return submit(pool, fn, *args)

        monkeypatch.setattr(threading.Thread, "start", started)
        monkeypatch.setattr(overlap._Pool, "submit", submitted)
        monkeypatch.setattr(overlap, "ENABLED", True)

    def workers(self) -> list[str]:
        """Every worker thread started and pool step submitted (service threads left out)."""
        threads = sorted({name for name in self.started if name not in _SERVICE})
        return threads + [f"pool:{step}" for step in self.steps]


@pytest.fixture
def recorded(monkeypatch) -> _Recorded:
    monkeypatch.delenv("SEGSTORE_THREADS", raising=False)
    return _Recorded(monkeypatch)


def _scan(path: Path, fmt: str, **kwargs) -> int:
    with segstore.open(str(path), fmt, "r") as store:
        return sum(batch.num_rows for batch in store.scan_arrow(**kwargs))


def _dump(path: Path, fmt: str, **kwargs) -> int:
    with segstore.open(str(path), fmt, "r") as store:
        return sum(len(block) for block in store.dump_json(**kwargs))


def _verify(path: Path, fmt: str, **kwargs) -> int:
    with segstore.open(str(path), fmt, "r") as store:
        assert store.verify(**kwargs) == []
    return 1


# -- the library's reads and checks, threads=1 ---------------------------------------------

@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@pytest.mark.parametrize("call", [_scan, _dump, _verify], ids=["scan_arrow", "dump_json", "verify"])
def test_a_library_call_given_one_thread_runs_on_the_calling_thread(stores, recorded, fmt, call) -> None:
    assert call(stores[fmt], fmt, threads=1) > 0
    assert recorded.workers() == []


def test_a_rocketmq_scan_of_queue_ranges_given_one_thread_runs_on_the_calling_thread(stores, recorded):
    queues = [("T0", 0, 0, 500), ("T1", 1, 100, 900)]
    assert _scan(stores["rocketmq"], "rocketmq", queues=queues, threads=1) == 1300
    assert recorded.workers() == []


def test_segstore_threads_1_is_one_thread_for_a_call_given_none(stores, recorded, monkeypatch) -> None:
    monkeypatch.setenv("SEGSTORE_THREADS", "1")
    assert _scan(stores["rocketmq"], "rocketmq") == 6000
    assert _scan(stores["rocketmq"], "rocketmq", queues=[("T2", 0, 0, 1000)]) == 1000
    assert recorded.workers() == []
    # a count given wins over the environment's, as thread_count takes it
    assert _scan(stores["rocketmq"], "rocketmq", queues=[("T2", 0, 0, 1000)], threads=2) == 1000
    assert set(recorded.workers()) == {"pool:next"}


# -- the command line -----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
@pytest.mark.parametrize("argv", [["dump"], ["dump", "--json"], ["verify"]],
                         ids=["dump", "dump-json", "verify"])
def test_a_command_given_threads_1_runs_on_one_thread(stores, recorded, fmt, argv) -> None:
    code, _, err = cli_run(*argv, "--threads", "1", stores[fmt])
    assert code == 0, err
    assert recorded.workers() == []


@pytest.mark.parametrize("fmt", ["rocketmq", "kafka"])
def test_a_recovery_given_threads_1_runs_on_one_thread(stores, recorded, tmp_path, fmt) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(stores[fmt], copy)
    code, _, err = cli_run("recover", "--threads", "1", copy)
    assert code == 0, err
    assert recorded.workers() == []


def _crashed(store: Path, at: Path) -> Path:
    """The RocketMQ store as a crash that lost the consume queues and the IndexFile leaves it."""
    shutil.copytree(store, at)
    for name in ("consumequeue", "index"):
        shutil.rmtree(at / name, ignore_errors=True)
    (at / "abort").touch()
    return at


def test_the_recovery_at_open_under_segstore_threads_1_runs_on_one_thread(stores, recorded, tmp_path,
                                                                        monkeypatch) -> None:
    crashed = _crashed(stores["rocketmq"], tmp_path / "crashed")
    monkeypatch.setenv("SEGSTORE_THREADS", "1")
    with segstore.open(str(crashed), "rocketmq", "a") as store:
        assert store.recovery_lines
        assert sum(len(range(*store.offset_range(f"T{t}", q))) for t in range(3) for q in range(2)) == 6000
    assert recorded.workers() == []


# -- a conversion ---------------------------------------------------------------------------

@pytest.fixture
def small_batches(monkeypatch):
    """5 records a Kafka record batch: every batch the writer adds queues several to encode (two
    threads take them with the overlap on, :func:`segstore.overlap.shared`)."""
    from segstore.convert import pipeline

    monkeypatch.setattr(pipeline, "BATCH_RECORDS", 5)


@pytest.mark.parametrize("way", ["library", "command", "environment"])
@pytest.mark.parametrize("source,to", [("rocketmq", "kafka"), ("kafka", "rocketmq")])
def test_a_conversion_asked_for_one_thread_runs_on_the_calling_thread(stores, recorded, small_batches,
                                                                      tmp_path, monkeypatch, way, source, to):
    dst = tmp_path / "dst"
    if way == "library":
        report = convert(stores[source], dst, to=to, verify=True, threads=1)
        assert report.messages == 6000 and report.verified
    elif way == "command":
        code, _, err = cli_run("convert", stores[source], dst, "--to", to, "--verify", "--threads", "1")
        assert code == 0, err
    else:
        monkeypatch.setenv("SEGSTORE_THREADS", "1")
        assert convert(stores[source], dst, to=to, verify=True).messages == 6000
    assert recorded.workers() == []


def test_a_resumed_conversion_given_one_thread_reads_what_was_written_on_one_thread(
        stores, recorded, tmp_path) -> None:
    """A RocketMQ destination is scanned for what it holds when resumed (``arrowwrite``): a scan given
    no count of its own, which takes the conversion's."""
    dst = tmp_path / "dst"
    convert(stores["kafka"], dst, to="rocketmq", threads=1)
    shutil.move(dst, tmp_path / ".dst.converting")
    journal = tmp_path / ".dst.converting" / "segstore-convert.json"
    journal.write_text(journal.read_text().replace('"done"', '"running"'))
    report = convert(stores["kafka"], dst, to="rocketmq", resume=True, threads=1)
    assert report.already_present == 6000 and report.messages == 0
    assert recorded.workers() == []


def _tree(root: Path) -> dict[str, bytes]:
    """Every file's bytes but those that hold the run's time; IndexFiles (named by the time) in order."""
    timed = ("lock", "checkpoint", "topics.json", "topics.json.bak", "segstore-convert.json")
    files = [p for p in sorted(root.rglob("*"))
             if p.is_file() and ".segstore" not in p.parts and p.name not in timed]
    index = [p for p in files if p.parent.name == "index"]
    named = {str(p.relative_to(root)): p.read_bytes() for p in files if p not in index}
    return named | {f"index/#{i}": p.read_bytes() for i, p in enumerate(index)}


@pytest.mark.parametrize("source,to", [("rocketmq", "kafka"), ("kafka", "rocketmq")])
def test_a_conversion_writes_the_same_bytes_with_any_thread_count(stores, small_batches, tmp_path,
                                                                  monkeypatch, source, to) -> None:
    monkeypatch.setattr(overlap, "ENABLED", True)
    trees = {}
    for threads in (None, 1, 2, 7):
        dst = tmp_path / f"t{threads}"
        convert(stores[source], dst, to=to, compression="lz4" if to == "kafka" else "none", threads=threads)
        trees[threads] = _tree(dst)
    assert trees[None]
    for threads in (1, 2, 7):
        assert trees[threads].keys() == trees[None].keys()
        assert [name for name in trees[None] if trees[threads][name] != trees[None][name]] == []


@pytest.mark.parametrize("threads", [0, -1, 257, True, 1.5, "2"])
def test_a_conversion_refuses_a_thread_count_out_of_range(stores, tmp_path, threads) -> None:
    with pytest.raises(ConversionOptionError, match="expected threads of"):
        convert(stores["rocketmq"], tmp_path / "dst", to="kafka", threads=threads)
    assert not (tmp_path / "dst").exists() and not (tmp_path / ".dst.converting").exists()


@pytest.mark.parametrize("text", ["0", "257", "two"])
def test_segstore_convert_refuses_threads_out_of_range(stores, tmp_path, text) -> None:
    code, _, err = cli_run("convert", stores["rocketmq"], tmp_path / "dst", "--to", "kafka",
                           "--threads", text)
    assert code == 2 and "--threads" in err and "expected a whole number of threads" in err
    assert not (tmp_path / "dst").exists()


# -- the default is unchanged ---------------------------------------------------------------

def test_the_default_on_two_cores_still_overlaps_a_rocketmq_scan(stores, recorded, monkeypatch) -> None:
    """On 2 cores the default reads one range (thread_count gives 1) and still walks the next region
    beside this batch's build: the default is not a request for one thread."""
    monkeypatch.setattr(overlap, "cores", lambda: 2)
    assert overlap.thread_count(None) == 1
    assert _scan(stores["rocketmq"], "rocketmq") == 6000
    assert recorded.steps and set(recorded.steps) == {"next"}
    recorded.steps.clear()
    assert _scan(stores["rocketmq"], "rocketmq", queues=[("T1", 1, 0, 1000)], threads=2) == 1000
    assert set(recorded.steps) == {"next"}


@pytest.mark.parametrize("threads", [None, 2])
def test_a_conversion_by_default_or_given_two_threads_still_reads_beside_its_writing(
        stores, recorded, small_batches, tmp_path, monkeypatch, threads) -> None:
    monkeypatch.setattr(overlap, "cores", lambda: 2)
    convert(stores["rocketmq"], tmp_path / "dst", to="kafka", threads=threads)
    assert "segstore-convert-read" in recorded.started     # the reading thread (pipelined)
    assert "take" in recorded.steps                         # the second encoding thread (shared)


def test_segstore_overlap_0_still_turns_the_overlap_off(stores, recorded, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(overlap, "ENABLED", False)
    assert _scan(stores["rocketmq"], "rocketmq", threads=None) == 6000
    convert(stores["rocketmq"], tmp_path / "dst", to="kafka", threads=2)
    assert "segstore-convert-read" not in recorded.started and "next" not in recorded.steps


# -- overlap's own rules ---------------------------------------------------------------------

def test_overlaps_tells_one_thread_asked_for_from_the_default(monkeypatch) -> None:
    monkeypatch.setattr(overlap, "ENABLED", True)
    monkeypatch.delenv("SEGSTORE_THREADS", raising=False)
    assert overlap.overlaps(None) and overlap.overlaps(2) and not overlap.overlaps(1)
    monkeypatch.setenv("SEGSTORE_THREADS", "1")
    assert not overlap.overlaps(None) and overlap.overlaps(3)
    with overlap.asked_for(2):      # wins over the environment
        assert overlap.overlaps(None) and overlap.thread_count(None) == 2
    monkeypatch.setenv("SEGSTORE_THREADS", "4")
    with overlap.asked_for(1):
        assert not overlap.overlaps(None) and overlap.thread_count(None) == 1
        assert overlap.overlaps(2)  # a count given still wins
    assert overlap.overlaps(None) and overlap.thread_count(None) == 4
    monkeypatch.setattr(overlap, "ENABLED", False)
    assert not overlap.overlaps(2) and not overlap.overlaps(None)


def test_asked_for_holds_on_the_threads_segstore_starts_not_on_others(monkeypatch) -> None:
    monkeypatch.setattr(overlap, "ENABLED", True)
    monkeypatch.delenv("SEGSTORE_THREADS", raising=False)
    seen: dict[str, int] = {}

    def note(name: str) -> None:
        seen[name] = overlap.thread_count(None)

    default = overlap.thread_count(None)
    with overlap.asked_for(9):
        overlap.start_thread(lambda: note("started"), "t").join()
        overlap._executor().submit(note, "pool").result(timeout=20)
        other = threading.Thread(target=note, args=("other",))
        other.start()
        other.join()
        note("here")
    assert seen == {"started": 9, "pool": 9, "other": default, "here": 9}
    assert overlap.thread_count(None) == default


@pytest.mark.parametrize("threads", [0, 257, True])
def test_asked_for_checks_its_count(threads) -> None:
    with pytest.raises(ConfigError), overlap.asked_for(threads):
        pass


@pytest.mark.parametrize("threads,same_thread", [(1, True), (None, False), (2, False)])
def test_the_overlap_helpers_run_on_the_calling_thread_given_one_thread(monkeypatch, threads, same_thread):
    monkeypatch.setattr(overlap, "ENABLED", True)
    monkeypatch.delenv("SEGSTORE_THREADS", raising=False)
    here = threading.get_ident()
    idents: list[set[int]] = [set(), set(), set()]

    def source(k: int):
        for i in range(6):
            idents[k].add(threading.get_ident())
            yield i

    def noted(i: int) -> int:
        idents[2].add(threading.get_ident())
        time.sleep(0.002)       # long enough for the pool thread to take its turn
        return i * 2

    assert list(overlap.overlapped(source(0), lambda i: i, threads)) == list(range(6))
    assert list(overlap.pipelined(source(1), lambda i: i, threads=threads)) == list(range(6))
    assert overlap.shared(noted, list(range(40)), threads) == [i * 2 for i in range(40)]
    assert (idents[0] == {here}) == same_thread and (idents[1] == {here}) == same_thread
    if same_thread:
        assert idents[2] == {here}



