"""Reading many files within the process's limit of open descriptors (``ulimit -n``, commonly 1024).

A Kafka reader opened every segment's ``.log`` (two descriptors once mapped: ``mmap`` duplicates
its descriptor), ``.index`` and ``.timeindex`` for as long as the store was open: a log directory
of 1000 partitions, or one partition of 1000 segments, could not be dumped at all ("Too many open
files").  Index files are read whole and hold no descriptor; a reader's ``.log`` lets go of its
descriptor and map past a budget (a quarter of the limit), least recently read first, and opens
the same file again when it is read; what still runs out is a typed error naming the limit.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import segstore
from segstore import files
from segstore.errors import NotFoundError, StorageIOError

ROOT = Path(__file__).resolve().parent.parent
T = 1_700_000_000_000


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def budget(monkeypatch):
    """A budget of 8 open readers, whatever this process's limit."""
    monkeypatch.setattr(files._open_readers, "limit", 8)


def test_readers_past_their_budget_let_go_of_their_descriptors_and_read_the_same(tmp_path, budget):
    paths = []
    for i in range(40):
        paths.append(tmp_path / f"{i}.log")
        paths[-1].write_bytes(b"%d" % i * 5000)
    before = _descriptors()
    readers = [files.AppendFile(path) for path in paths]
    for reader in readers:
        assert len(reader.view()) == reader.size
    assert _descriptors() - before <= 2 * 8        # a descriptor and a map's for each of 8 files
    for i, reader in enumerate(readers):            # every one reads its own file again
        assert bytes(reader.view()[:10]) == (b"%d" % i * 10)[:10] and reader.read(0, 2) == (b"%d" % i * 2)[:2]
    for reader in readers:
        reader.close()
    assert _descriptors() == before


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


def test_index_files_read_whole_hold_no_descriptor(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(bytes(range(64)))
    before = _descriptors()
    mapped = files.MappedFile(path, in_memory=True)
    assert _descriptors() == before and not mapped.closed
    assert mapped.pread(60, 10) == bytes(range(60, 64)) and mapped.data_ranges() == [(0, 64)]
    assert mapped.first_nonzero(0) == 1 and mapped.read(2, 2) == b"\x02\x03"
    mapped.close()
    assert mapped.closed


def test_no_descriptor_left_is_a_typed_error_naming_the_limit(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_bytes(b"x")
    real = os.open

    def exhausted(path, *args, **kwargs):
        if str(path).endswith(".log"):
            raise OSError(errno.EMFILE, "Too many open files")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", exhausted)
    monkeypatch.setattr(files, "_descriptor_limit", lambda: 1024)
    with pytest.raises(StorageIOError) as info:
        files.AppendFile(tmp_path / "a.log")
    assert str(info.value) == (f"{tmp_path / 'a.log'}: expected a free file descriptor, found the process's "
                               "limit of 1024 open files (ulimit -n)")


_UNDER_A_LIMIT = """
import io, json, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
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
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}"}

    def run(limit: int) -> list[list]:
        proc = subprocess.run([sys.executable, "-c", _UNDER_A_LIMIT, str(limit), json.dumps(argvs)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    limited, free = run(256), run(4096)
    assert [code for code, _ in limited] == [0] * len(argvs), [out[-300:] for _, out in limited]
    assert limited == free
    assert limited[1][1].count("\n") == 350 and limited[4][1].count("\n") == 150
