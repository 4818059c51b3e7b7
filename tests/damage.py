"""The seeded corruption suite (issue 15): damaged copies of broker-written stores, every command
run against them in a fresh process, every outcome classified.

A *case* is ``(seed, number)``: from it alone (``random.Random``) the harness picks a pristine
store (a copy of a RocketMQ store or a Kafka log directory from ``compat_fixtures/``, with
``config/*.json`` and the log-dir checkpoints added as the brokers write them), one of its
files and one mutation, so any case is reproduced by ``python -m tests.damage --seed S
--case N``.  Each command (``COMMANDS``) then runs in a process of its own, as ``python -m
segstore.cli`` would, under a 30 s limit and a 2 GiB address space, and its outcome is one of
``OUTCOMES``.  That process is forked from a warm server that has imported the CLI and both format
plugins once (:func:`_serve`; a fresh interpreter's start-up was most of a run's time, about 0.5 s of
CPU of the suite's 0.6 s per run on a 2-core machine); ``SEGSTORE_DAMAGE_FRESH=1`` starts a fresh
interpreter for each command instead:

    ok         exit 0 (``window``, a dump between two times: also exit 1 for a window left empty)
    typed      exit 1, a ``path:pos:`` (or ``path:``) message on stderr, no traceback
    usage      exit 2: a usage error, though every command line here is right (a data problem
               reported as the user's; a finding, asserted like a crash)
    untyped    exit 1 without a message naming a file (a finding, not a crash)
    traceback  ``Traceback`` on stderr (an error escaped our hierarchy)
    signal     killed by a signal (abort, SIGSEGV, SIGBUS, the address-space limit in C)
    hang       still running after the time limit
    other      any other exit status

``recover`` is checked further: it must change or remove no byte of a message file (commitlog, ``.log``)
without keeping it in a ``NAME.cut-POS`` file (whatever its exit status); after it succeeds the store
is dumped again, every record
must equal (as ``dump --json`` prints it) one of the pristine store's records (nothing
invented), and every record lying wholly before the damaged position must still be there
(nothing intact lost); damage to a file that holds no messages (an index, a checkpoint,
a config file) leaves every record intact.

Long run (figures for ``docs/reliability.md``)::

    python -m tests.damage --cases 20000 --seed 1 --jobs 2 [--out summary.md]

Thread-safety: each case works in its own temporary directory; cases run in parallel
processes (``--jobs``).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import concurrent.futures.process
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "compat_fixtures"
ADDRESS_SPACE = 2 << 30
#: The RocketMQ store a conversion from Kafka writes: small files, as the fixtures' (config names)
SMALL_ROCKETMQ = ("mappedFileSizeCommitLog=16777216", "mappedFileSizeConsumeQueue=60000",
                  "maxHashSlotNum=4096", "maxIndexNum=16384")
TIMEOUT_S = 30.0
OUTCOMES = ("ok", "typed", "usage", "untyped", "traceback", "signal", "hang", "other")
BAD_OUTCOMES = ("traceback", "signal", "hang", "usage")
# a message naming its file: "path:pos: ..." or "path: ..." at the start of a stderr line
_NAMED = re.compile(r"^(?:segstore: )?(?:error: )?/\S*?:(?:\d+:)?\s", re.MULTILINE)
_INT32 = struct.Struct(">i")
_INT32_LE = struct.Struct("<i")

# (format, fixture directory, name of the tree the commands are pointed at)
SOURCES = [("rocketmq", "basic"), ("rocketmq", "abort"),
           ("kafka", "uncompressed"), ("kafka", "gzip"), ("kafka", "snappy"), ("kafka", "lz4"),
           ("kafka", "zstd"), ("kafka", "txn"), ("kafka", "logappendtime")]
MUTATIONS = ("bitflip", "overwrite", "zero", "truncate", "append", "huge_length", "negative_length",
             "other_format", "empty", "directory", "fifo", "symlink_loop")
#: Mutations added by issue 28, drawn from a stream of their own (a quarter of the cases) so that every
#: other case of a seed stays what it was: the file deleted, a 4-byte field set to one of INT32_VALUES
#: (mostly inside a record's header).
EXTRA_MUTATIONS = ("delete", "int32")
EXTRA_SHARE = 0.25
INT32_VALUES = (-2147483647, 2147483646, 268435456, 2147483647, 0, -1)
COMMANDS = ("dump", "window", "verify", "info", "query", "library", "convert", "recover")


def _library_code(path: str) -> str:
    return ("import sys, segstore\n"
            "try:\n"
            f"    with segstore.open({path!r}) as s:\n"
            "        n = sum(1 for _ in s.scan())\n"
            "except segstore.SegstoreError as e:\n"
            "    print(e, file=sys.stderr); sys.exit(1)\n"
            "print(n)\n")


def argv_for(command: str, fmt: str, store: str, dst: str, middle: int = 0) -> list[str]:
    """The argv (after ``python``) that runs ``command`` against ``store``; ``middle``: a time inside
    the pristine store's (``window``: a dump from it on, through the time indexes and a seek)."""
    cli = ["-m", "segstore.cli"]
    if command == "dump":
        return [*cli, "dump", "--json", store]
    if command == "window":
        return [*cli, "dump", "--json", "--begin", str(middle), "--end", str(middle + 3_600_000), store]
    if command == "verify":
        return [*cli, "verify", store]
    if command == "info":
        return [*cli, "info", store]
    if command == "query":
        where = ["--topic", "TopicA", "--queue", "0"] if fmt == "rocketmq" else []
        return [*cli, "query", *where, "--offset", "0", "--count", "1000", "--json", store]
    if command == "convert":
        if fmt == "rocketmq":
            return [*cli, "convert", "--to", "kafka", store, dst]
        # a RocketMQ store of the broker's default sizes maps a 1 GiB commitlog file and a 420 MB
        # IndexFile: past ADDRESS_SPACE, so every conversion from Kafka stopped at its first map
        return [*cli, "convert", "--to", "rocketmq", *(arg for name in SMALL_ROCKETMQ
                                                       for arg in ("--config", name)), store, dst]
    if command == "recover":
        return [*cli, "recover", store]
    if command == "library":
        return ["-c", _library_code(store)]
    raise ValueError(command)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'formats'}", "PYTHONHASHSEED": "0"}


@dataclass
class Run:
    """One command's outcome."""

    command: str
    outcome: str
    rc: int | None
    stdout: str = field(repr=False)
    stderr: str


def classify(rc: int | None, stderr: str, stdout: str = "") -> str:
    """The outcome of a finished (or timed-out, ``rc is None``) command; see the module docstring.
    ``verify`` prints its ``path:pos`` lines on stdout, so both streams may name the file."""
    if rc is None:
        return "hang"
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if rc < 0:
        return "signal"
    if rc == 0:
        return "ok"
    if rc in (1, 2):
        if rc == 2:
            return "usage"
        return "typed" if _NAMED.search(stderr) or _NAMED.search(stdout) else "untyped"
    return "other"


def run_command(argv: list[str], timeout: float = TIMEOUT_S) -> tuple[int | None, str, str]:
    """``python argv`` (``-m segstore.cli ARGS`` or ``-c CODE``) in a process of its own under the
    limits: forked from this process's warm server (:class:`_Forker`), or with
    ``SEGSTORE_DAMAGE_FRESH=1`` a fresh interpreter.  Its exit status (``-N``: killed by signal N),
    stdout and stderr; ``rc`` None on a timeout."""
    if os.environ.get("SEGSTORE_DAMAGE_FRESH") != "1":
        return _Forker.mine().run(argv, timeout)
    return _run_fresh(argv, timeout)


def _run_fresh(argv: list[str], timeout: float) -> tuple[int | None, str, str]:
    try:
        done = subprocess.run([sys.executable, *argv], capture_output=True, timeout=timeout, env=_env(),
                              preexec_fn=_limits, check=False, stdin=subprocess.DEVNULL, cwd=ROOT)
    except subprocess.TimeoutExpired as err:
        return None, "", (err.stderr or b"").decode("utf-8", "replace")
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))


# ---------------------------------------------------------------- the fork server

class _Forker:
    """This process's warm server (:func:`_serve`, a fresh interpreter started once per process: a
    pool worker of :func:`run_many` gets its own) and the requests sent to it.  Not thread-safe: one
    request at a time per process."""

    _mine: _Forker | None = None
    _pid = 0

    def __init__(self) -> None:
        # (the command's own environment before numpy loads: cli.COMMAND_ENV, BLAS on one thread)
        env = {**_env(), "OPENBLAS_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats"), str(ROOT / "tests")])}
        self.proc = subprocess.Popen([sys.executable, "-c", "import damage; damage._serve()"], env=env,
                                     cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)

    @classmethod
    def mine(cls) -> _Forker:
        """The server of this process (a forked process starts its own: its parent's pipes are the
        parent's)."""
        if cls._mine is None or cls._pid != os.getpid() or cls._mine.proc.poll() is not None:
            cls._mine, cls._pid = cls(), os.getpid()
        return cls._mine

    def run(self, argv: list[str], timeout: float) -> tuple[int | None, str, str]:
        with tempfile.TemporaryDirectory(prefix="damage-run-") as scratch:
            out, err = os.path.join(scratch, "out"), os.path.join(scratch, "err")
            request = {"argv": argv, "timeout": timeout, "out": out, "err": err}
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
            if not answer:
                raise RuntimeError(f"the damage fork server ended (exit {self.proc.wait()})")
            rc = json.loads(answer)["rc"]
            with open(out, "rb") as o, open(err, "rb") as e:
                return rc, o.read().decode("utf-8", "replace"), e.read().decode("utf-8", "replace")


#: What the server imports before it forks: the modules the commands import (lazily) in a fresh process.
_WARM_MODULES = (
    "pyarrow", "segstore.cli", "segstore.convert.cli", "segstore.layouts.cli", "segstore.columns",
    "segstore_kafka.store", "segstore_kafka.partition", "segstore_kafka.columnar",
    "segstore_rocketmq.store", "segstore_rocketmq.columnar", "segstore_rocketmq.verify",
    "segstore_rocketmq.recovery", "segstore_rocketmq.query")


def _serve() -> None:
    """The warm server: imports what every command imports, then for each request line on stdin
    (``{"argv", "timeout", "out", "err"}``) forks a child that runs it (:func:`_run_child`) and
    answers ``{"rc": status}`` a line (``-N`` for a child killed by signal N, null for one still
    running at ``timeout``, then killed).  Ends at the end of stdin."""
    import importlib

    for module in _WARM_MODULES:
        importlib.import_module(module)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request["argv"], request["out"], request["err"])
        sys.stdout.write(json.dumps({"rc": _wait(pid, request["timeout"])}) + "\n")
        sys.stdout.flush()


def _wait(pid: int, timeout: float) -> int | None:
    """The exit status of child ``pid`` as ``subprocess`` gives it; None (the child killed) when it
    runs past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _main(argv: list[str]) -> int:
    """What ``python argv`` runs: ``-m segstore.cli ARGS`` or ``-c CODE``."""
    if argv[:2] == ["-m", "segstore.cli"]:
        from segstore import cli

        sys.argv = [cli.__file__, *argv[2:]]
        return cli.command()
    if argv[:1] == ["-c"]:
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        return 0
    raise ValueError(f"not a command the fork server runs: {argv}")


def _run_child(argv: list[str], out: str, err: str) -> None:
    """In the forked child: ``python argv`` as the interpreter would run it (stdin empty, stdout and
    stderr to the files ``out`` and ``err``, the limits, an uncaught exception printed with its
    traceback and exit status 1, ``SystemExit`` as its code), then exit without the server's clean-up."""
    import io
    import traceback

    code = 1
    try:
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY | os.O_CREAT),
                                (2, err, os.O_WRONLY | os.O_CREAT)):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                                       errors="backslashreplace", line_buffering=True)
        _limits()
        try:
            code = _main(argv)
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                traceback.print_exc()
                code = code or 1
    finally:
        os._exit(code)


# ---------------------------------------------------------------- pristine stores

def _writable_copy(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)


def _topics(fixture: Path) -> dict[str, int]:
    """Topic -> queue count of a RocketMQ fixture, from its consume-queue directories."""
    cq = fixture / "store" / "consumequeue"
    return {t.name: len(list(t.iterdir())) for t in sorted(cq.iterdir())}


def make_pristine(fmt: str, name: str, dst: Path) -> Path:
    """A writable copy of a fixture with the files the fixtures lack (``config/*.json`` in
    ``TopicConfigManager``/``ConsumerOffsetManager``'s fastjson shape, the Kafka log-dir
    checkpoints as ``OffsetCheckpointFile`` writes them); returns the store / log directory."""
    fixture = FIXTURES / fmt / name
    if fmt == "rocketmq":
        store = dst / "store"
        _writable_copy(fixture / "store", store)
        config = store / "config"
        config.mkdir(exist_ok=True)
        table = {t: {"topicName": t, "readQueueNums": n, "writeQueueNums": n, "perm": 6,
                     "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
                 for t, n in _topics(fixture).items()}
        (config / "topics.json").write_text(json.dumps(
            {"topicConfigTable": table, "dataVersion": {"timestamp": 1700000000000, "counter": 1}},
            indent="\t"))
        (config / "consumerOffset.json").write_text(json.dumps(
            {"offsetTable": {f"{t}@group": {"0": 1} for t in table}}, indent="\t"))
        return store
    logdir = dst / "logdir"
    logdir.mkdir(parents=True)
    _writable_copy(fixture / "topic-0", logdir / "topic-0")
    records = sum(1 for line in (fixture / "dump.jsonl").open() if '"type": "record"' in line
                  or '"type":"record"' in line)
    for check, value in (("recovery-point-offset-checkpoint", records),
                         ("replication-offset-checkpoint", records),
                         ("log-start-offset-checkpoint", 0), ("cleaner-offset-checkpoint", 0)):
        (logdir / check).write_text(f"0\n1\ntopic 0 {value}\n")
    return logdir


def dump_records(store: str) -> tuple[int | None, list[dict], str]:
    """``dump --json`` of a store: rc, the records, stderr."""
    rc, out, err = run_command(["-m", "segstore.cli", "dump", "--json", store])
    records = []
    if rc == 0:
        for line in out.splitlines():
            if line.strip():
                records.append(json.loads(line))
    return rc, records, err


def middle_time(fmt: str, records: list[dict]) -> int:
    """The time the middle record (by time) of a store's ``dump --json`` records was stored at, as its
    broker looks offsets up by (RocketMQ the store time, Kafka the record timestamp); 0 for none."""
    times = sorted(r["store_timestamp" if fmt == "rocketmq" else "timestamp"] for r in records)
    return times[len(times) // 2] if times else 0


def _canon(record: dict) -> str:
    return json.dumps(record, sort_keys=True)


def file_kind(fmt: str, rel: str) -> str:
    """The kind of a store file, by its path relative to the store / log directory."""
    parts = rel.split("/")
    if fmt == "rocketmq":
        if parts[0] in ("commitlog", "consumequeue", "index", "config"):
            return {"commitlog": "commitlog", "consumequeue": "consumequeue", "index": "indexfile",
                    "config": "config-json"}[parts[0]]
        return parts[-1]  # checkpoint, abort, lock
    if len(parts) == 1:
        return "logdir-checkpoint"
    name = parts[-1]
    if name == "leader-epoch-checkpoint":
        return name
    return name.rsplit(".", 1)[-1]  # log, index, timeindex, txnindex


# ---------------------------------------------------------------- mutations

@dataclass
class Case:
    """One seeded case: what was damaged and how."""

    seed: int
    number: int
    fmt: str
    source: str
    target: str  # path relative to the store / log directory
    kind: str
    mutation: str
    detail: str = ""
    damage_pos: int | None = None  # first changed byte of a data file; None: no data file damaged


def _record_starts(kind: str, records: list[dict], base: int) -> list[int]:
    """Positions inside the file where a record / batch starts (length fields live there)."""
    if kind == "commitlog":
        return sorted({r["physical_offset"] - base for r in records
                       if 0 <= r["physical_offset"] - base})
    if kind == "log":
        return sorted({r["batch"]["position"] + 8 for r in records
                       if r["offset"] >= base and r["batch"]["base_offset"] >= base})
    return []


def plan_case(seed: int, number: int, stores: dict[tuple[str, str], Path]) -> Case:
    """Pick the source, file and mutation of case ``number`` from ``(seed, number)`` alone."""
    rng = random.Random(f"{seed}:{number}")
    fmt, source = SOURCES[rng.randrange(len(SOURCES))]
    root = stores[(fmt, source)]
    candidates = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    # every kind equally likely, then a file of that kind
    by_kind: dict[str, list[str]] = collections.defaultdict(list)
    for rel in candidates:
        by_kind[file_kind(fmt, rel)].append(rel)
    kind = sorted(by_kind)[rng.randrange(len(by_kind))]
    target = by_kind[kind][rng.randrange(len(by_kind[kind]))]
    mutation = MUTATIONS[rng.randrange(len(MUTATIONS))]
    extra = random.Random(f"{seed}:{number}:extra")
    if extra.random() < EXTRA_SHARE:
        mutation = EXTRA_MUTATIONS[extra.randrange(len(EXTRA_MUTATIONS))]
    return Case(seed, number, fmt, source, target, kind, mutation)


def apply_mutation(case: Case, store: Path, records: list[dict], others: dict[str, Path]) -> None:
    """Damage ``case.target`` under ``store`` as ``case.mutation`` says; sets ``detail``, ``damage_pos``."""
    rng = random.Random(f"{case.seed}:{case.number}:mutate")
    path = store / case.target
    data = bytearray(path.read_bytes())
    size = len(data)
    mutation = case.mutation
    in_place = ("bitflip", "overwrite", "zero", "truncate", "huge_length", "negative_length", "int32")
    if size == 0 and mutation in in_place:
        mutation = "append"
    first: int | None = None
    if mutation == "bitflip":
        flips = [(rng.randrange(size), rng.randrange(8)) for _ in range(rng.randint(1, 8))]
        for pos, bit in flips:
            data[pos] ^= 1 << bit
        first = min(p for p, _ in flips)
        case.detail = "bits " + ",".join(f"{p}.{b}" for p, b in flips)
    elif mutation in ("overwrite", "zero"):
        pos = rng.randrange(size)
        length = min(size - pos, rng.randint(1, 4096 if mutation == "zero" else 64))
        data[pos:pos + length] = bytes(length) if mutation == "zero" else rng.randbytes(length)
        first = pos
        case.detail = f"[{pos}, {pos + length})"
    elif mutation == "truncate":
        new = rng.randrange(size)
        del data[new:]
        first = new
        case.detail = f"to {new} of {size}"
    elif mutation == "append":
        extra = rng.randbytes(rng.randint(1, 4096))
        data += extra
        first = size
        case.detail = f"{len(extra)} bytes"
    elif mutation in ("huge_length", "negative_length", "int32"):
        base = int(path.name) if case.kind == "commitlog" else (
            int(path.name.split(".")[0]) if case.kind == "log" else 0)
        starts = [s for s in _record_starts(case.kind, records, base) if s + 4 <= size]
        if starts and rng.random() < 0.8:  # mostly a real length field (int32: a header field), else anywhere
            pos = starts[rng.randrange(len(starts))]
            if mutation == "int32":
                pos += 4 * rng.randrange(22)        # a 4-byte field of the header (88 bytes of a message)
        else:
            pos = rng.randrange(max(1, size - 3))
        pos = min(pos, max(0, size - 4))
        value = rng.choice((0x7FFFFFFF, 0x7FFFFFF0, 1 << 30, 0xFFFFFFF) if mutation == "huge_length"
                           else INT32_VALUES if mutation == "int32" else (-1, -2, -(1 << 31), -4))
        packed = (_INT32_LE if case.kind == "indexfile" and rng.random() < 0.5 else _INT32).pack(value)
        data[pos:pos + 4] = packed[: size - pos]
        first = pos
        case.detail = f"{value} at {pos}"
    if mutation in (*in_place, "append"):
        path.write_bytes(bytes(data))
    elif mutation == "other_format":
        other = others["kafka" if case.fmt == "rocketmq" else "rocketmq"]
        pool = sorted(p for p in other.rglob("*") if p.is_file() and p.stat().st_size > 0)
        pick = pool[rng.randrange(len(pool))]
        shutil.copyfile(pick, path)
        first = 0
        case.detail = str(pick.relative_to(other))
    elif mutation == "empty":
        path.write_bytes(b"")
        first = 0
    elif mutation == "delete":
        path.unlink()
        first = 0
    elif mutation in ("directory", "fifo", "symlink_loop"):
        path.unlink()
        if mutation == "directory":
            path.mkdir()
            (path / "inside").write_bytes(b"\0" * 16)
        elif mutation == "fifo":
            os.mkfifo(path)
        else:
            partner = path.with_name(path.name + ".loop")
            os.symlink(partner.name, path)
            os.symlink(path.name, partner)
        first = 0
    case.mutation = mutation
    case.damage_pos = first if case.kind in ("commitlog", "log") else None


# ---------------------------------------------------------------- checks

def _intact(case: Case, original: list[dict]) -> list[dict]:
    """The pristine records that lie wholly before the damaged position (all of them when
    no message file was damaged)."""
    if case.damage_pos is None:
        return original
    if case.fmt == "rocketmq":
        base = int(Path(case.target).name)
        limit = base + case.damage_pos
        return [r for r in original if r["physical_offset"] + r["size"] <= limit]
    base = int(Path(case.target).name.split(".")[0])
    kept = []
    for r in original:
        batch = r["batch"]
        if batch["base_offset"] < base or (
                r["offset"] >= base and batch["position"] + batch["size"] <= case.damage_pos):
            # wholly in an earlier segment, or before the damage in this one
            kept.append(r)
    # records of later segments are not "before the damaged position"
    return [r for r in kept if r["batch"]["base_offset"] < base or r["offset"] >= base]


def recover_findings(case: Case, original: list[dict], store: str,
                     served: list[dict] | None = None) -> tuple[list[str], Run]:
    """Dump the store after a successful ``recover``: lost intact records, invented records.

    ``served``: what ``dump`` printed of the damaged store before recovery (a changed field no
    check covers, a RocketMQ message's born time or host, is served as it is stored before and
    after: recover did not invent it; verify's silence on it is counted apart, see :func:`_silent`).
    """
    rc, after, err = dump_records(store)
    run = Run("dump-after-recover", classify(rc, err), rc, "", err)
    findings = []
    if rc != 0:
        return findings, run
    known = {_canon(r) for r in [*original, *(served or [])]}
    invented = [r for r in after if _canon(r) not in known]
    if invented:
        findings.append(f"invented {len(invented)} record(s), first {_canon(invented[0])[:300]}")
    have = {_canon(r) for r in after}
    lost = [r for r in _intact(case, original) if _canon(r) not in have]
    if lost:
        key = "physical_offset" if case.fmt == "rocketmq" else "offset"
        findings.append(f"lost {len(lost)} intact record(s), first at {key} {lost[0][key]}")
    return findings, run


_CUT = re.compile(r"(?P<name>.+)\.cut-(?P<pos>\d+)(?:\.\d+)?")


def message_files(fmt: str, store: Path) -> dict[str, bytes]:
    """The bytes of a store's message files (RocketMQ commitlog files, Kafka ``.log`` files) by path
    relative to the store / log directory."""
    if fmt == "rocketmq":
        found = [p for p in (store / "commitlog").glob("*") if re.fullmatch(r"\d{20}", p.name)]
    else:
        found = list(store.glob("*/*.log"))
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(found)
            if p.is_file() and not p.is_symlink()}


def unkept(fmt: str, before: dict[str, bytes], store: Path) -> list[str]:
    """The message files whose bytes recovery changed or removed (a non-zero byte before, another
    after) without keeping them in a ``NAME.cut-POS`` file anywhere under the store: one line each."""
    cuts: dict[str, list[tuple[int, bytes]]] = collections.defaultdict(list)
    for p in store.rglob("*.cut-*"):
        m = _CUT.fullmatch(p.name)
        if m and p.is_file():
            cuts[m["name"]].append((int(m["pos"]), p.read_bytes()))
    lines = []
    for rel, old in before.items():
        path = store / rel
        was = np.frombuffer(old, np.uint8)
        now = np.zeros(len(old), np.uint8)
        if path.is_file():
            data = np.frombuffer(path.read_bytes(), np.uint8)[:len(old)]
            now[:len(data)] = data
        kept = np.zeros(len(old), bool)
        for pos, data in cuts.get(Path(rel).name, []):
            saved = np.frombuffer(data, np.uint8)[:max(0, len(old) - pos)]
            kept[pos:pos + len(saved)] |= saved == was[pos:pos + len(saved)]
        lost = np.flatnonzero((was != now) & (was != 0) & ~kept)
        if len(lost):
            lines.append(f"changed {len(lost)} bytes of {rel} from {int(lost[0])} without keeping them")
    return lines


@dataclass
class Result:
    """Everything a case produced."""

    case: Case
    runs: list[Run]
    findings: list[str]
    silent: bool = False  # verify said clean while dump served records the pristine store lacks

    def bad(self) -> list[str]:
        """The case's failures: bad outcomes and recover findings, one line each."""
        lines = [f"{r.command}: {r.outcome} (rc {r.rc}): {_tail(r.stderr)}" for r in self.runs
                 if r.outcome in BAD_OUTCOMES]
        # recover exits 0 only over a store that is clean afterwards (exit 1 names what it left)
        lines += [f"recover: exit 0, then dump {r.outcome} (rc {r.rc}): {_tail(r.stderr)}" for r in self.runs
                  if r.command == "dump-after-recover" and r.outcome != "ok"]
        return lines + [f"recover: {f}" for f in self.findings]


def _tail(text: str, limit: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:limit]


_STATE: dict = {}


def _pristine(workdir: Path) -> dict:
    """Pristine stores and their dumps, made once per process."""
    if _STATE.get("workdir") != workdir:
        stores, dumps = {}, {}
        for fmt, name in SOURCES:
            where = workdir / "pristine" / f"{fmt}-{name}"
            where.parent.mkdir(parents=True, exist_ok=True)
            if not where.exists():
                tmp = Path(tempfile.mkdtemp(dir=workdir))
                make_pristine(fmt, name, tmp)
                try:
                    tmp.rename(where)
                except OSError:  # another worker made it first
                    shutil.rmtree(tmp)
            stores[(fmt, name)] = where / ("store" if fmt == "rocketmq" else "logdir")
        _STATE.update(workdir=workdir, stores=stores, dumps=dumps)
    return _STATE


def _original(state: dict, key: tuple[str, str]) -> list[dict]:
    if key not in state["dumps"]:
        cache = state["stores"][key].parent / "dump.json"
        if cache.exists():
            state["dumps"][key] = json.loads(cache.read_text())
        else:
            rc, records, err = dump_records(str(state["stores"][key]))
            if rc != 0:
                raise RuntimeError(f"pristine {key} does not dump: {err}")
            tmp = cache.with_name(f"dump.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(records))
            tmp.replace(cache)
            state["dumps"][key] = records
    return state["dumps"][key]


def run_case(seed: int, number: int, workdir: Path, commands: tuple[str, ...] = COMMANDS) -> Result:
    """Plan, apply and run case ``number``: each command on its own fresh damaged copy."""
    state = _pristine(workdir)
    case = plan_case(seed, number, state["stores"])
    original = _original(state, (case.fmt, case.source))
    others = {"rocketmq": state["stores"][("rocketmq", "basic")], "kafka": state["stores"][("kafka", "gzip")]}
    middle = middle_time(case.fmt, original)
    runs: list[Run] = []
    findings: list[str] = []
    casedir = Path(tempfile.mkdtemp(prefix=f"case{number}-", dir=workdir))
    try:
        for command in commands:
            here = casedir / command
            here.mkdir()
            store = here / state["stores"][(case.fmt, case.source)].name
            shutil.copytree(state["stores"][(case.fmt, case.source)], store, symlinks=True)
            planned = Case(**{**case.__dict__})
            apply_mutation(planned, store, original, others)
            case = planned
            before = message_files(case.fmt, store) if command == "recover" else {}
            argv = argv_for(command, case.fmt, str(store), str(here / "converted"), middle)
            rc, out, err = run_command(argv)
            outcome = classify(rc, err, out)
            if command == "window" and rc == 1 and ": no message stored from " in err:
                outcome = "ok"      # an answer: the damage left the window nothing (exit 1, as a miss)
            run = Run(command, outcome, rc, out, err)
            runs.append(run)
            if command == "recover":
                findings += unkept(case.fmt, before, store)
            if command == "recover" and rc == 0:
                dumped = next((r for r in runs if r.command == "dump" and r.rc == 0), None)
                served = [json.loads(line) for line in dumped.stdout.splitlines() if line.strip()] \
                    if dumped is not None else None
                more, after = recover_findings(case, original, str(store), served)
                findings += more
                runs.append(after)
    finally:
        shutil.rmtree(casedir, ignore_errors=True)
    return Result(case, runs, findings, _silent(runs, original))


def _silent(runs: list[Run], original: list[dict]) -> bool:
    """Verify exited 0 while dump (exit 0) printed a record the pristine store does not hold."""
    by = {run.command: run for run in runs}
    if "verify" not in by or "dump" not in by or by["verify"].rc != 0 or by["dump"].rc != 0:
        return False
    known = {_canon(r) for r in original}
    lines = [line for line in by["dump"].stdout.splitlines() if line.strip()]
    return any(_canon(json.loads(line)) not in known for line in lines)


# ---------------------------------------------------------------- the long run

def _work(args: tuple[int, int, str]) -> Result:
    seed, number, workdir = args
    return run_case(seed, number, Path(workdir))


def run_many(seed: int, numbers: list[int], jobs: int, workdir: Path, progress=None) -> list[Result]:
    """Run the cases over ``jobs`` processes, results in case order."""
    _pristine(workdir)
    for key in _STATE["stores"]:
        _original(_STATE, key)
    work = [(seed, n, str(workdir)) for n in numbers]
    if jobs <= 1:
        results = []
        for item in work:
            results.append(_work(item))
            if progress:
                progress(results[-1])
        return results
    # A process pool that raises when a worker dies (multiprocessing.Pool replaces the worker and
    # waits forever for its lost task); the cases a dead pool did not finish run here, one by one.
    ctx = multiprocessing.get_context("fork")
    results = []
    try:
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
            for future in concurrent.futures.as_completed([pool.submit(_work, item) for item in work]):
                results.append(future.result())
                if progress:
                    progress(results[-1])
    except concurrent.futures.process.BrokenProcessPool:
        done = {res.case.number for res in results}
        for item in work:
            if item[1] not in done:
                results.append(_work(item))
                if progress:
                    progress(results[-1])
    return sorted(results, key=lambda r: r.case.number)


def summary(results: list[Result], seed: int, elapsed: float, jobs: int) -> str:
    """A Markdown summary: runs, outcomes by command and by file kind, failures with how to reproduce."""
    runs = [(res, run) for res in results for run in res.runs]
    lines = [f"seed {seed}, {len(results)} cases, {len(runs)} runs, {elapsed:.0f} s over {jobs} jobs, "
             f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", ""]
    commands = [*COMMANDS, "dump-after-recover"]
    lines.append("| outcome | " + " | ".join(commands) + " | all |")
    lines.append("|---" * (len(commands) + 2) + "|")
    for outcome in OUTCOMES:
        counts = collections.Counter(run.command for _, run in runs if run.outcome == outcome)
        row = " | ".join(str(counts[c]) for c in commands)
        lines.append(f"| {outcome} | {row} | {sum(counts.values())} |")
    lines += ["", "| file kind | cases | runs | typed | ok | usage | untyped | traceback | signal | hang "
              "| recover findings |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    kinds = sorted({res.case.kind for res in results})
    for kind in kinds:
        mine = [res for res in results if res.case.kind == kind]
        c = collections.Counter(run.outcome for res in mine for run in res.runs)
        lines.append(f"| {kind} | {len(mine)} | {sum(c.values())} | {c['typed']} | {c['ok']} | "
                     f"{c['usage']} | {c['untyped']} | "
                     f"{c['traceback']} | {c['signal']} | {c['hang']} | "
                     f"{sum(len(r.findings) for r in mine)} |")
    silent = [res for res in results if res.silent]
    lines += ["", f"{len(silent)} case(s) where verify exited 0 while dump served a record the pristine "
              "store lacks (reported, not asserted): "
              + ", ".join(f"{r.case.number} ({r.case.kind} {r.case.mutation})" for r in silent[:50])]
    failing = [res for res in results if res.bad()]
    lines += ["", f"{len(failing)} case(s) with a traceback, signal, hang, usage exit or recover finding:",
              ""]
    for res in failing[:200]:
        c = res.case
        lines.append(f"- case {c.number} ({c.fmt}/{c.source} {c.target} [{c.kind}] {c.mutation} {c.detail}); "
                     f"`python -m tests.damage --seed {c.seed} --case {c.number}`")
        for line in res.bad():
            lines.append(f"  - {line}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.damage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=100, help="run cases 0 .. CASES-1")
    parser.add_argument("--start", type=int, default=0, help="first case number")
    parser.add_argument("--case", type=int, action="append", help="run only this case (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", help="write the summary here too")
    parser.add_argument("--workdir", help="scratch directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    numbers = args.case or list(range(args.start, args.start + args.cases))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="segstore-damage-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = [0]
    finished: list[Result] = []

    def progress(result: Result) -> None:
        done[0] += 1
        if result.bad() or args.case:
            c = result.case
            print(f"case {c.number}: {c.fmt}/{c.source} {c.target} [{c.kind}] {c.mutation} {c.detail}",
                  file=sys.stderr)
            for run in result.runs if args.case else []:
                print(f"  {run.command}: {run.outcome} rc={run.rc} {_tail(run.stderr)}", file=sys.stderr)
            for line in result.bad():
                print(f"  ! {line}", file=sys.stderr)
        finished.append(result)
        if done[0] % 25 == 0:
            print(f"{done[0]}/{len(numbers)} cases, {time.monotonic() - started:.0f} s", file=sys.stderr)
            if args.out:  # a long run stopped early still leaves its figures
                ordered = sorted(finished, key=lambda r: r.case.number)
                Path(args.out).write_text(summary(ordered, args.seed, time.monotonic() - started, args.jobs))

    try:
        results = run_many(args.seed, numbers, args.jobs, workdir, progress)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    text = summary(results, args.seed, time.monotonic() - started, args.jobs)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 1 if any(res.bad() for res in results) else 0


if __name__ == "__main__":
    sys.exit(main())
