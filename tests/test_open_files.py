"""Reading many files within the process's limit of open descriptors (``ulimit -n``, commonly 1024).

A Kafka reader opened every segment's ``.log`` (two descriptors once mapped: ``mmap`` duplicates
its descriptor), ``.index`` and ``.timeindex`` for as long as the store was open: a log directory
of 1000 partitions, or one partition of 1000 segments, could not be dumped at all ("Too many open
files").  Index files are read whole and hold no descriptor; a reader's ``.log`` lets go of its
descriptor and map past a budget (a quarter of the hard limit), least recently read first, and opens
the same file again when it is read; what still runs out is a typed error naming the limit.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import segstore
from segstore import files
from segstore.errors import NotFoundError, StorageIOError, StoreClosedError

ROOT = Path(__file__).resolve().parent.parent
T = 1_700_000_000_000
_ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}

# Descriptors are counted in a fresh Python process, never in pytest's: there other threads (the
# overlap pool, fsspec, Spark's py4j, maps other tests keep) open and close descriptors at any
# time, so a count of /proc/self/fd there is not this test's to assert on.
_COUNTING = """
import json, os, sys
from segstore import files

def descriptors():
    return len(os.listdir("/proc/self/fd"))

def held(under):
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}").startswith(under)
        except OSError:     # the listing's own descriptor, closed since
            pass
    return found

out = {}
"""


def _in_a_fresh_process(code: str, *args: str) -> dict:
    """What ``code`` (after :data:`_COUNTING`'s helpers) leaves in its ``out``, run by a new Python."""
    proc = subprocess.run([sys.executable, "-c", _COUNTING + code + "\nprint(json.dumps(out))", *args],
                          capture_output=True, text=True, env=_ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture
def budget(monkeypatch):
    """A budget of 8 open readers, whatever this process's limit."""
    monkeypatch.setattr(files._open_readers, "limit", 8)


_PAST_THE_BUDGET = """
files._open_readers.limit = 8
if sys.argv[2] == "keep":
    files.keep_read_maps(limit=4)
paths = []
for i in range(40):
    paths.append(os.path.join(sys.argv[1], f"{i}.log"))
    with open(paths[-1], "wb") as f:
        f.write(b"%d" % i * 5000)
before = descriptors()
readers = [files.AppendFile(path) for path in paths]
out["sizes"] = [len(r.view()) == r.size == len(b"%d" % i * 5000) for i, r in enumerate(readers)]
out["held"], out["all"] = held(sys.argv[1]), descriptors() - before
out["again"] = [bytes(r.view()[:10]) == (b"%d" % i * 10)[:10] and r.read(0, 2) == (b"%d" % i * 2)[:2]
                for i, r in enumerate(readers)]     # every one reads its own file again, in any order
out["held_again"] = held(sys.argv[1])
for reader in readers:
    reader.close()
files.stop_keeping_read_maps()
out["after"] = descriptors() - before
"""


@pytest.mark.parametrize("maps", ["new", "keep"])
def test_readers_past_their_budget_let_go_of_their_descriptors_and_read_the_same(tmp_path, maps):
    """40 mapped readers, a budget of 8: at most a descriptor and a map's for each of 8 files (and,
    with kept maps, the 4 the cache holds), every file read again right, nothing left after close."""
    out = _in_a_fresh_process(_PAST_THE_BUDGET, str(tmp_path), maps)
    assert out["sizes"] == [True] * 40 and out["again"] == [True] * 40
    most = 2 * 8 + (4 if maps == "keep" else 0)
    assert 2 <= out["held"] <= most and out["all"] <= most, out
    assert 2 <= out["held_again"] <= most, out
    assert out["after"] == 0, out


_WRITERS_PAST_THE_BUDGET = """
files._open_writers.limit = 8
logs = [files.AppendFile(os.path.join(sys.argv[1], f"{i}.log"), create=True) for i in range(30)]
maps = [files.MappedFile(os.path.join(sys.argv[1], f"{i}.index"), 4096, create=True, reserve=True,
                         parkable=True) for i in range(30)]
for turn in range(3):
    for i in range(30):
        assert logs[i].append(b"%d:%d;" % (turn, i)) == len(b"%d:%d;" % (turn, i)) * turn
        maps[i].write(turn * 8, (i * 10 + turn).to_bytes(8, "big"))
out["held"] = held(sys.argv[1])
out["views"] = [bytes(log.view()) == b"".join(b"%d:%d;" % (t, i) for t in range(3))
                and log.read(0, 2) == b"0:" for i, log in enumerate(logs)]
out["arrays"] = [maps[i].read(0, 24) == b"".join((i * 10 + t).to_bytes(8, "big") for t in range(3))
                 for i in range(30)]
maps[0].resize(8192)
maps[0].flush()
logs[0].truncate(4)
for each in logs + maps:
    each.flush()
out["held_after_flush"] = held(sys.argv[1])
for each in logs + maps:
    each.close()
out["after"] = held(sys.argv[1])
out["files"] = [open(os.path.join(sys.argv[1], f"{i}.log"), "rb").read() for i in (0, 29)]
"""


def test_writers_past_their_budget_let_go_of_their_descriptors_and_write_the_same(tmp_path):
    """30 writable logs and 30 mapped indexes written in turns, a writers' budget of 8 files: the idle
    ones let go of their descriptors (a map's too) and take the same file again when next written,
    read, resized or flushed (a flush syncs what was written before it let go); every byte lands where
    it would have."""
    out = _in_a_fresh_process(_WRITERS_PAST_THE_BUDGET + 'out["files"] = [f.decode() for f in out["files"]]',
                              str(tmp_path))
    assert out["views"] == [True] * 30 and out["arrays"] == [True] * 30
    assert 0 < out["held"] <= 2 * 8 and 0 < out["held_after_flush"] <= 2 * 8, out
    assert out["after"] == 0
    assert out["files"] == ["0:0;", "0:29;1:29;2:29;"]
    assert (tmp_path / "0.index").stat().st_size == 8192


def test_a_reader_that_let_go_refuses_a_file_removed_or_replaced_since(tmp_path, budget):
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    first.write_bytes(b"a" * 100)
    second.write_bytes(b"b" * 100)
    readers = [files.AppendFile(first), files.AppendFile(second)]
    others = [files.AppendFile(tmp_path / "first.log") for _ in range(20)]   # the first two let go
    first.unlink()
    second.rename(tmp_path / "elsewhere")
    second.write_bytes(b"c" * 100)
    with pytest.raises(NotFoundError, match="found it removed since"):
        readers[0].view()
    with pytest.raises(NotFoundError, match="found another in its place"):
        readers[1].read(0, 10)
    for reader in readers + others:
        reader.close()


def test_a_reader_that_let_go_sees_a_cut_made_meanwhile_at_once(tmp_path, monkeypatch):
    """A reader opening its file again takes its length again at once, whatever
    :data:`files.RESIZE_CHECK_SECONDS` says: a cut made while it held no descriptor (a broker's
    recovery) shows in its next view, as it would have to a reader that held one."""
    monkeypatch.setattr(files._open_readers, "limit", 1)
    monkeypatch.setattr(files, "RESIZE_CHECK_SECONDS", 1e9)     # no re-check by the clock
    path, other = tmp_path / "a.log", tmp_path / "b.log"
    path.write_bytes(b"a" * 10000)
    other.write_bytes(b"b" * 100)
    reader = files.AppendFile(path)
    assert len(reader.view()) == 10000
    readers = [files.AppendFile(other) for _ in range(3)]      # the first lets go
    os.truncate(path, 4000)
    assert len(reader.view()) == reader.size == 4000 and bytes(reader.view()[-3:]) == b"aaa"
    for each in [reader, *readers]:
        each.close()
    with pytest.raises(StoreClosedError):
        reader.view()


_INDEX_READ_WHOLE = """
before = descriptors()
mapped = files.MappedFile(sys.argv[1], in_memory=True)
out["held"], out["all"], out["closed"] = held(sys.argv[1]), descriptors() - before, mapped.closed
out["pread"] = list(mapped.pread(60, 10))
out["ranges"], out["first"] = mapped.data_ranges(), mapped.first_nonzero(0)
out["read"] = list(mapped.read(2, 2))
mapped.close()
out["closed_after"] = mapped.closed
"""


def test_index_files_read_whole_hold_no_descriptor(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(bytes(range(64)))
    out = _in_a_fresh_process(_INDEX_READ_WHOLE, str(path))
    assert out["held"] == 0 and out["all"] == 0 and out["closed"] is False, out
    assert out["pread"] == list(range(60, 64)) and out["ranges"] == [[0, 64]]
    assert out["first"] == 1 and out["read"] == [2, 3] and out["closed_after"] is True


def test_no_descriptor_left_is_a_typed_error_naming_the_limit(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_bytes(b"x")
    real = os.open

    def exhausted(path, *args, **kwargs):
        if str(path).endswith(".log"):
            raise OSError(errno.EMFILE, "Too many open files")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", exhausted)
    monkeypatch.setattr(files, "_descriptor_limit", lambda: 1024)
    monkeypatch.setattr(files, "_raise_descriptor_limit", lambda: False)    # (this process's limit stays)
    with pytest.raises(StorageIOError) as info:
        files.AppendFile(tmp_path / "a.log")
    assert str(info.value) == (f"{tmp_path / 'a.log'}: expected a free file descriptor, found the process's "
                               "limit of 1024 open files (ulimit -n)")


_UNDER_A_LIMIT = """
import io, json, resource, sys
# the hard limit too: an open meeting the soft one would raise it to the hard one (files._with_descriptors)
limit = min(int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
from segstore import cli
results = []
for argv in json.loads(sys.argv[2]):
    out = io.StringIO()
    code = cli.main(argv, out)
    results.append([code, out.getvalue()])
print(json.dumps(results))
"""


def test_a_log_dir_of_more_files_than_the_limit_reads_whole_under_it(tmp_path):
    """200 partitions (800 descriptors as they were held) and a partition of 150 segments (450),
    read with a limit of 256: ``dump`` (text, JSON, threads), ``info``, ``verify``, as with no limit."""
    logs = tmp_path / "logs"
    with segstore.open(logs, format="kafka", mode="a") as store:
        store.append_batch([{"topic": "t", "partition": p, "value": b"v%d" % p, "timestamp": T}
                            for p in range(200)])
    with segstore.open(logs / "s-0", format="kafka", mode="a", **{"segment.bytes": 150}) as store:
        for i in range(150):
            store.append({"topic": "s", "partition": 0, "value": b"x%03d" % i * 10, "timestamp": T})
    argvs = [["dump", str(logs)], ["dump", str(logs), "--json", "--threads", "4"], ["info", str(logs)],
             ["verify", str(logs)], ["dump", str(logs / "s-0"), "--json"]]

    def run(limit: int) -> list[list]:
        proc = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, str(limit), json.dumps(argvs)],
                              capture_output=True, text=True, env=_ENV, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    limited, free = run(256), run(4096)
    assert [code for code, _ in limited] == [0] * len(argvs), [out[-300:] for _, out in limited]
    assert limited == free
    assert limited[1][1].count("\n") == 350 and limited[4][1].count("\n") == 150


_WRITERS = """
import resource
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64 if sys.argv[2] == "hard" else hard))
import segstore
from segstore.errors import StorageIOError
try:
    with segstore.open(sys.argv[1], format="kafka", mode="a") as store:
        store.append_batch([{"topic": "t", "partition": p, "value": b"v", "timestamp": 1} for p in range(40)])
    out["written"] = True
except StorageIOError as err:
    out["error"] = str(err)
out["soft"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
out["hard"] = hard
"""


def test_writers_past_the_soft_limit_raise_it_to_the_hard_one_as_the_jvm_does(tmp_path):
    """40 Kafka partitions written at once (about seven descriptors each) under a soft limit of 64:
    before, "expected a free file descriptor, found the process's limit of open files" (a conversion
    of 250 RocketMQ queues into a Kafka log dir stopped so under the common soft limit of 1024).  The
    first open meeting the limit raises the soft limit to the hard one, as HotSpot does when any JVM
    starts (-XX:+MaxFDLimit), which the brokers run with; under a hard limit of 64 (once the typed
    error naming it) the writers let go of their descriptors past their budget instead."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip("a hard limit of open files under 1024")
    out = _in_a_fresh_process(_WRITERS, str(tmp_path / "raised"), "soft")
    assert out.get("written") is True and out["soft"] == out["hard"], out
    with segstore.open(tmp_path / "raised") as store:
        assert [store.offset_range("t", p) for p in range(40)] == [(0, 1)] * 40
    out = _in_a_fresh_process(_WRITERS, str(tmp_path / "capped"), "hard")
    assert out.get("written") is True and out["soft"] == 64, out
    assert _tree(tmp_path / "capped") == _tree(tmp_path / "raised")


def _tree(root) -> dict[str, bytes]:
    """Every file under ``root`` by its relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}


def _run_cli(limit: int, argvs: list[list[str]]) -> list[list]:
    proc = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, str(limit), json.dumps(argvs)],
                          capture_output=True, text=True, env=_ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_write_into_more_kafka_partitions_than_the_limit_holds_writes_them_all(tmp_path):
    """``segstore write --input`` of lines naming 400 Kafka partitions, interleaved, under a hard limit
    of 128 open files.  Before, a writer held every partition's directory lock, ``.log`` and two
    mapped indexes (six descriptors, seven with a ``.txnindex``) from its first record to the close:
    ``expected a free file descriptor, found the process's limit of 128 open files`` (exit 1), and a
    conversion of ~140 partitions stopped so under 1024.  Now writers past a budget let go of their
    descriptors and the log directory's lock stands for its partitions': the same bytes as a write
    with no limit to speak of."""
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"topic": f"t{p % 3}", "partition": p // 3, "value": f"v{p}-{i}" * 40,
                                         "timestamp": T + i})
                             + "\n" for i in range(12) for p in range(400)))
    limited, free = tmp_path / "limited", tmp_path / "free"
    argv = ["write", "{}", "--input", str(lines), "--format", "kafka"]
    for limit, dest in ((128, limited), (4096, free)):
        [[code, out]] = _run_cli(limit, [[arg.format(dest) for arg in argv]])
        assert code == 0, out[-500:]
    written = _tree(limited)
    assert len([name for name in written if name.endswith(".log")]) == 400
    assert written == _tree(free)


def _runs_alike(tmp_path, argvs: list[list[str]], limit: int = 128) -> dict[str, list]:
    """``argvs`` (``{}`` standing for a directory of their own) run under a hard limit of ``limit``
    open files and under 4096: each run's exit codes and outputs, its directory's name made ``{}``."""
    runs = {}
    for name, cap in (("limited", limit), ("free", 4096)):
        root = tmp_path / name
        root.mkdir()
        runs[name] = [[code, out.replace(str(root), "{}")]
                      for code, out in _run_cli(cap, [[arg.format(root) for arg in argv] for argv in argvs])]
    return runs


#: RocketMQ files of a few pages (the default 1 GiB commitlog and 6 MB consume-queue files are read whole
#: to be compared)
SMALL_FILES = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 4000}
#: What a store holds that differs from run to run: IndexFile names and topics' creation (RocketMQ: the
#: wall clock), a conversion's journal (the source's path)
_CLOCKED = ("index/", "config/topics.json", "segstore-convert.json")


def test_a_rocketmq_store_of_more_queues_than_the_limit_holds_is_written_read_and_converted(tmp_path):
    """200 RocketMQ queues (``write --input``), read (``info``, ``dump --json``, ``verify``) and converted
    into 200 Kafka partitions under a hard limit of 128 open files.  Before, every consume-queue file
    held two descriptors (its own and its map's) from the store's open to its close, in reading as in
    writing: ``expected a free file descriptor, found the process's limit of 128 open files`` past
    some 60 queues (a store of 600 queues did not read under the common 1024).  Now they are parkable
    within the readers' and writers' budgets: the same output and the same files as with no limit."""
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"topic": f"T{q % 4}", "queue_id": q // 4, "body": f"m{q}-{i}",
                                         "born_timestamp": T + i, "store_timestamp": T + i + 1})
                             + "\n" for i in range(3) for q in range(200)))
    small = [f"--config={name}={value}" for name, value in SMALL_FILES.items()]
    runs = _runs_alike(tmp_path, [["write", "{}/rmq", "--input", str(lines), "--format", "rocketmq", *small],
                                  ["info", "{}/rmq"], ["dump", "{}/rmq", "--json"], ["verify", "{}/rmq"],
                                  ["convert", "{}/rmq", "{}/kafka", "--to", "kafka"]])
    assert [code for code, _ in runs["limited"]] == [0] * 5, [out[-300:] for _, out in runs["limited"]]
    assert runs["limited"][:4] == runs["free"][:4], runs["free"]
    assert runs["limited"][2][1].count("\n") == 600
    for store in ("rmq", "kafka"):
        limited, free = ({name: data for name, data in _tree(tmp_path / run / store).items()
                          if not name.startswith(_CLOCKED)} for run in ("limited", "free"))
        assert len(limited) > 200 and limited == free


def test_a_kafka_log_dir_of_more_partitions_than_the_limit_holds_converts_back_to_rocketmq(tmp_path):
    """A Kafka copy of 200 RocketMQ queues converted back under a hard limit of 128 open files: the
    conversion merges the 200 partitions back into the commitlog's order (``pipeline._batches_in_order``),
    reading each a small batch at a time.  Before, each partition's reader held a view of its ``.log``
    between two batches (``columnar.decode`` kept the segment's view for its whole walk), so no
    ``.log`` could let go of its map: ``expected a free file descriptor, found the process's limit of
    128 open files``.  Now the view is taken again for each chunk: the same store as with no limit."""
    with segstore.open(tmp_path / "rmq", "rocketmq", mode="a", **SMALL_FILES) as store:
        store.append_batch([{"topic": f"T{q % 4}", "queue_id": q // 4, "body": b"m%d-%d" % (q, i),
                             "born_timestamp": T + i, "store_timestamp": T + i + 1}
                            for i in range(3) for q in range(200)])
    from segstore.convert import convert

    convert(tmp_path / "rmq", tmp_path / "kafka", to="kafka")
    runs = _runs_alike(tmp_path, [["convert", str(tmp_path / "kafka"), "{}/back", "--to", "rocketmq"]])
    assert [code for code, _ in runs["limited"]] == [0], runs["limited"]
    limited, free = ({name: data for name, data in _tree(tmp_path / run / "back").items()
                      if not name.startswith(_CLOCKED)} for run in ("limited", "free"))
    assert len(limited) > 200 and limited == free
    first = "commitlog/00000000000000000000"
    assert limited[first] == (tmp_path / "rmq" / first).read_bytes()


_SEGMENTS = """
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), int(sys.argv[2])))
import segstore
with segstore.open(sys.argv[1], format="kafka", mode="a", **{"segment.bytes": 150}) as store:
    for i in range(200):
        store.append({"topic": "s", "partition": 0, "value": b"x%03d" % i * 10, "timestamp": 1 + i})
"""


def test_a_partition_of_more_segments_than_the_limit_holds_is_written_whole(tmp_path):
    """One partition rolled into 200 segments under a hard limit of 64 open files: a writable
    partition keeps every segment open (three files, five descriptors each), so before its 12th
    segment failed with "expected a free file descriptor, found the process's limit of 64 open
    files"; the rolled segments let go of theirs now, and the partition holds what it does with no
    limit."""
    for name, limit in (("limited", "64"), ("free", "4096")):
        _in_a_fresh_process(_SEGMENTS, str(tmp_path / name / "s-0"), limit)
    limited = _tree(tmp_path / "limited")
    assert len([name for name in limited if name.endswith(".log")]) == 200
    assert limited == _tree(tmp_path / "free")


_MERGED_QUEUES = """
import heapq, resource
import segstore
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
reopened = []
reopen = files._reopen
files._reopen = lambda *args: reopened.append(args[0]) or reopen(*args)
with segstore.open(sys.argv[1], format="rocketmq") as store:
    reads = [store.read("t", q) for q in range(200)]
    out["read"] = sum(1 for _ in heapq.merge(*reads, key=lambda m: m.physical_offset))
out["reopened"] = len(reopened)
out["soft"], out["hard"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard
"""


def test_a_merged_read_of_more_queues_than_the_soft_limit_holds_raises_it_as_the_writers_do(tmp_path):
    """A read of 200 RocketMQ queues at once (``heapq.merge`` of their reads, as a dump of a
    multi-dispatch topic merges them) under a soft limit of 128: the readers' budget was a quarter of
    the soft limit (32 consume-queue files), so each queue's file was let go of and opened again for
    every chunk of entries, where the writers' budget is taken from the hard limit, which the soft one
    rises to when an open meets it (as HotSpot raises it at every JVM start, -XX:+MaxFDLimit).
    Measured on 2,000 queues under 1024: 6,000 reopens, none once the soft limit rose."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard < 2048:     # (unlimited: the soft limit's quarter, as before)
        pytest.skip("a hard limit of open files under 2048, or none")
    small = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 20 * 1000,
             "messageIndexEnable": False}
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a", **small) as store:
        for _ in range(3):
            store.append_batch([{"topic": "t", "queue_id": q, "body": b"x"} for q in range(200)])
    out = _in_a_fresh_process(_MERGED_QUEUES, str(tmp_path / "s"))
    assert out["read"] == 600 and out["reopened"] == 0, out     # before: 600 reopens
    assert out["soft"] == out["hard"], out
