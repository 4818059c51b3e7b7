"""The Python side of the columnar JVM reader, without Spark's JVM: the worker's frames, its ring,
the planner requests (segstore/spark/worker.py, segstore/spark/bridge.py).

A small client here speaks the frames as ``segstore/spark/java`` does (``WorkerConnection``,
``ArrowBatchReader``): it reads ring batches from its own mapping of the worker's ring file,
releases each before asking for the next, and checks every answer against the library's
``scan_arrow`` of the same store.
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_support import FIXTURES, fixture_config, spark  # noqa: F401

import segstore

pyspark = pytest.importorskip("pyspark")

from segstore import allocator, files  # noqa: E402
from segstore.cli import COMMAND_ENV  # noqa: E402
from segstore.errors import CorruptDataError  # noqa: E402
from segstore.spark import bridge, worker  # noqa: E402
from segstore.spark.schema import spark_schema  # noqa: E402

KAFKA = FIXTURES / "kafka" / "uncompressed" / "topic-0"
ROCKETMQ = FIXTURES / "rocketmq" / "basic" / "store"


class Client:
    """The JVM's side of one connection, in Python."""

    def __init__(self, sock: socket.socket, *, forked: bool = False) -> None:
        """``forked``: a fork server's child, whose first frame is its hello ('H' u64 pid: :attr:`pid`)."""
        self.sock = sock
        self.inp = sock.makefile("rb")
        self.ring: tuple[str, mmap.mmap] | None = None
        self.arena: tuple[str, mmap.mmap] | None = None
        self.pid: int | None = None
        if forked:
            assert self.inp.read(1) == b"H"
            (self.pid,) = struct.unpack(">Q", self.inp.read(8))

    def send(self, request: dict[str, Any]) -> None:
        body = json.dumps(request).encode()
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def sized(self) -> bytes:
        (size,) = struct.unpack(">I", self.inp.read(4))
        return self.inp.read(size)

    def call(self, request: dict[str, Any]) -> tuple[bytes, Any]:
        self.send(request)
        kind = self.inp.read(1)
        return kind, json.loads(self.sized())

    def in_place(self, body: bytes, arrow_schema: pa.Schema) -> pa.RecordBatch:
        """An 'A' frame's batch, rebuilt (copied) from the buffers' places in the arena, as the JVM
        loads it: field nodes, then (position, length) per buffer, Arrow IPC's order."""
        rows, nodes, count = struct.unpack_from(">qii", body)
        numbers = struct.unpack_from(f">{2 * (nodes + count)}q", body, 16)
        assert len(body) == 16 + 16 * (nodes + count) and self.arena is not None
        assert nodes == len(arrow_schema)
        places = iter(zip(numbers[2 * nodes::2], numbers[2 * nodes + 1::2], strict=True))
        columns = []
        for k, field in enumerate(arrow_schema):
            length, nulls = numbers[2 * k], numbers[2 * k + 1]
            width = 3 if pa.types.is_binary(field.type) or pa.types.is_string(field.type) else 2
            buffers = []
            for i in range(width):
                at, size = next(places)
                assert 0 <= at and at + size <= len(self.arena[1])
                # an empty data buffer (a chunk of null keys) is one, as the JVM's slice is; no bitmap is none
                buffers.append(pa.py_buffer(bytes(self.arena[1][at:at + size])) if size or i else None)
            columns.append(pa.Array.from_buffers(field.type, length, buffers, null_count=nulls))
        assert next(places, None) is None
        if not columns:     # a count's batch: rows and no column
            return pa.RecordBatch.from_struct_array(pa.array([{}] * rows, type=pa.struct([])))
        batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema)
        assert batch.num_rows == rows
        return batch

    def read(self, partition: dict[str, Any], schema: str) -> tuple[list[pa.RecordBatch], list[str], Any]:
        """The batches of one partition, how each came ('B' ring, 'A' arena or 'I' inline), and the
        closing frame."""
        self.send({"op": "read", "partition": partition, "schema": schema})
        kind = self.inp.read(1)
        if kind == b"E":
            return [], [], ("E", json.loads(self.sized()))
        assert kind == b"M"
        header = json.loads(self.sized())
        arrow_schema = pa.ipc.read_schema(pa.py_buffer(self.sized()))
        if header["ring"] is not None and (self.ring is None or self.ring[0] != header["ring"]):
            with open(header["ring"], "rb") as f:
                self.ring = (header["ring"], mmap.mmap(f.fileno(), header["size"], prot=mmap.PROT_READ))
        if header.get("arena") is not None and (self.arena is None or self.arena[0] != header["arena"]):
            with open(header["arena"], "rb") as f:
                mapped = mmap.mmap(f.fileno(), header["arenaSize"], prot=mmap.PROT_READ)
                self.arena = (header["arena"], mapped)
        batches, ways = [], []
        holding = False
        while True:
            if holding:
                self.sock.sendall(b"R")      # done with the batch before asking for the next
                holding = False
            kind = self.inp.read(1)
            if kind == b"B":
                position, length = struct.unpack(">QQ", self.inp.read(16))
                assert self.ring is not None
                message = bytes(self.ring[1][position:position + length])
                holding = True
            elif kind == b"A":
                batches.append(self.in_place(self.sized(), arrow_schema))
                ways.append("A")
                holding = True
                continue
            elif kind == b"I":
                message = self.sized()
            else:
                closing = json.loads(self.sized())
                return batches, ways, (kind.decode(), closing)
            batches.append(pa.ipc.read_record_batch(pa.py_buffer(message), arrow_schema))
            ways.append(kind.decode())


@pytest.fixture
def serving(tmp_path):
    """A child's ``serve`` on one end of a socket pair (in a thread), rings in ``tmp_path``."""
    threads = []

    def start(ring_directory: str | None = str(tmp_path)) -> Client:
        ours, theirs = socket.socketpair()
        thread = threading.Thread(target=worker.serve, args=(theirs, ring_directory), daemon=True)
        thread.start()
        threads.append((thread, ours, theirs))
        return Client(ours)

    yield start
    for thread, ours, theirs in threads:
        ours.close()
        thread.join(10)
        theirs.close()


def _schema(columns: list[str], format_name: str = "kafka") -> str:
    full = spark_schema(format_name, include_headers=True)
    return pyspark.sql.types.StructType([full[c] for c in columns]).json()


def _plan(client: Client, path: Path, **options: str) -> list[dict[str, Any]]:
    config = json.dumps(fixture_config(path))
    kind, answer = client.call({"op": "plan", "options": {"path": str(path), "config": config, **options},
                                "schema": _schema([]), "filters": [], "parallelism": 2})
    assert kind == b"J", answer
    return answer["partitions"]


def _place(row: dict[str, Any]) -> tuple[str, int, int]:
    return row["topic"], row["partition"], row["offset"]


def _rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


def _library(path: Path, columns: list[str]) -> pa.Table:
    """The columns of every topic partition as the library scans it (what a consumer reads)."""
    with segstore.open(str(path), **fixture_config(path)) as store:
        batches = [b for t in store.topics() for p in store.partitions(t)
                   for b in store.scan_arrow(list(dict.fromkeys([*columns, "offset"])), topic=t, partition=p)]
    return pa.Table.from_batches(batches).select(columns)


@pytest.mark.parametrize("columns", [["value"], ["key", "value", "topic", "partition", "offset"], []])
def test_read_gives_the_library_columns_in_the_ring(serving, columns):
    client = serving()
    parts = _plan(client, KAFKA, minPartitions="3", maxRecordsPerBatch="7")
    assert len(parts) == 3
    got, ways = [], set()
    for part in parts:
        batches, how, closing = client.read(part, _schema(columns))
        assert closing == ("J", {})
        got.extend(batches)
        ways.update(how)
    assert ways == {"B"}
    assert client.ring is not None and not Path(client.ring[0]).exists()   # mapped, then its name went
    assert all(b.num_rows <= 7 for b in got)
    expected = _library(KAFKA, columns or ["offset"])
    assert sum(b.num_rows for b in got) == expected.num_rows > 0
    if columns:      # a count's batches carry no column, only their rows
        assert _rows(got) == expected.to_pylist()
    else:
        assert all(b.num_columns == 0 for b in got)


def test_a_small_ring_wraps_and_waits_for_releases(serving, monkeypatch):
    """A ring of a few batches: the worker writes ahead, waits for the client's releases, wraps
    around, and a batch larger than the whole ring goes inline."""
    monkeypatch.setattr(worker, "RING_SIZE", 64 << 10)
    client = serving()
    parts = _plan(client, ROCKETMQ, minPartitions="1")
    columns = ["value", "topic", "partition", "offset", "properties", "keys"]
    small, how_small, big, how_big = [], [], [], []
    for part in parts:
        batches, how, closing = client.read(part | {"options": part["options"] | {"maxRecordsPerBatch": "5"}},
                                            _schema(columns, "rocketmq"))
        assert closing == ("J", {})
        small += batches
        how_small += how
        batches, how, closing = client.read(part, _schema(columns, "rocketmq"))
        assert closing == ("J", {})
        big += batches
        how_big += how
    assert set(how_small) == {"B"}
    # more ring batches than the ring holds: it wrapped, after releases
    assert sum(worker._aligned(b.nbytes) for b in small) > 2 * (64 << 10)
    assert "I" in how_big          # a batch larger than the whole ring went inline
    expected = sorted(_library(ROCKETMQ, columns).to_pylist(), key=_place)
    assert sorted(_rows(small), key=_place) == sorted(_rows(big), key=_place) == expected


def test_releases_the_jvm_has_sent_are_taken_before_a_batch_is_placed(tmp_path):
    """A release waiting on the socket is taken before the next batch is placed: when the JVM keeps
    up, every batch goes to the start of the ring (memory still in the caches), not round the whole
    ring (32 MB of writes a lap cost twice the copy of a batch)."""
    ring = worker.Ring(str(tmp_path / "ring"), 1 << 20)
    batch = pa.RecordBatch.from_arrays([pa.array([b"x" * 100] * 50)], names=["value"])
    ours, theirs = socket.socketpair()
    with ours, theirs, theirs.makefile("rb") as inp, theirs.makefile("wb") as out:
        places = []
        for _ in range(3):
            assert worker._put(batch, batch.schema, ring, inp, out)
            places.append(ring.used[-1][0])
            ours.sendall(worker._KIND_RELEASE)       # the JVM is done with it
        assert worker._put(batch, batch.schema, ring, inp, out)
        assert places == [0, 0, 0] and ring.used[-1][0] == 0
        assert worker._put(batch, batch.schema, ring, inp, out)     # no release sent: written after it
        assert ring.used[-1][0] > 0 and len(ring.used) == 2
    ring.unlink()


def test_releases_are_looked_for_on_a_descriptor_past_select_s_limit(tmp_path):
    """A child reading a store of many queue files holds more than 1024 descriptors: looking for a
    release waiting there must not fail (select refuses such a descriptor)."""
    resource = pytest.importorskip("resource")
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= 1500:
        pytest.skip("fewer than 1500 descriptors allowed")
    ring = worker.Ring(str(tmp_path / "ring"), 1 << 20)
    batch = pa.RecordBatch.from_arrays([pa.array([b"x" * 100] * 50)], names=["value"])
    ours, theirs = socket.socketpair()
    low = theirs.detach()
    os.dup2(low, 1500)
    os.close(low)
    with ours, socket.socket(fileno=1500) as high, high.makefile("rb") as inp, high.makefile("wb") as out:
        for _ in range(2):
            assert worker._put(batch, batch.schema, ring, inp, out)
            ours.sendall(worker._KIND_RELEASE)
        assert worker._put(batch, batch.schema, ring, inp, out) and ring.used[-1][0] == 0
    ring.unlink()


def test_without_shared_memory_every_batch_goes_inline(serving):
    client = serving(ring_directory=None)
    parts = _plan(client, KAFKA, minPartitions="1")
    batches, ways, closing = client.read(parts[0], _schema(["value", "offset"]))
    assert closing == ("J", {}) and set(ways) == {"I"}
    assert _rows(batches) == _library(KAFKA, ["value", "offset"]).to_pylist()


def test_an_error_in_the_middle_closes_the_read_and_the_connection_serves_on(serving, monkeypatch):
    client = serving()
    parts = _plan(client, KAFKA, minPartitions="1")
    real = bridge.read

    def failing(request):
        schema, batches = real(request)

        def some_then_fail():
            yield next(iter(batches))
            raise CorruptDataError("expected a record batch, found garbage", "seg.log", 1234)
        return schema, some_then_fail()

    monkeypatch.setattr(bridge, "read", failing)
    batches, _, closing = client.read(parts[0], _schema(["offset"]))
    assert len(batches) == 1
    assert closing == ("E", {"type": "CorruptDataError",
                             "message": "seg.log:1234: expected a record batch, found garbage"})
    monkeypatch.setattr(bridge, "read", real)
    batches, _, closing = client.read(parts[0], _schema(["offset"]))
    assert closing == ("J", {}) and sum(b.num_rows for b in batches) == _library(KAFKA, ["offset"]).num_rows


def test_requests_that_fail_answer_an_error_frame(serving, tmp_path):
    client = serving()
    kind, answer = client.call({"op": "schema", "options": {"path": str(tmp_path / "nothing")}})
    assert kind == b"E" and answer["type"] == "NotFoundError" and "nothing" in answer["message"]
    kind, answer = client.call({"op": "teleport"})
    assert kind == b"E" and "found 'teleport'" in answer["message"]
    kind, answer = client.call({"op": "plan", "options": {"path": str(KAFKA)}, "filters": [],
                                "parallelism": 1,
                                "schema": '{"type":"struct","fields":[{"name":"tags","type":"string",'
                                          '"nullable":true,"metadata":{}}]}'})
    assert kind == b"E" and answer["type"] == "ConfigError" and "'tags'" in answer["message"]
    missing = _plan(client, KAFKA, minPartitions="1")[0] | {"path": str(tmp_path / "gone")}
    batches, _, closing = client.read(missing, _schema(["offset"]))
    assert batches == [] and closing[0] == "E" and closing[1]["type"] == "NotFoundError"
    kind, answer = client.call({"op": "schema", "options": {"path": str(KAFKA)}})      # still in step
    assert kind == b"J" and answer["format"] == "kafka"


def test_a_ping_is_answered_without_touching_any_store(serving):
    """The JVM pings a reused connection before a write's request, which it never asks twice
    (PythonWorkers.call): a ping is answered ``{}`` and the connection stays in step."""
    client = serving()
    assert client.call({"op": "ping"}) == (b"J", {})
    kind, answer = client.call({"op": "schema", "options": {"path": str(KAFKA)}})
    assert kind == b"J" and answer["format"] == "kafka"


def test_pushdown_answers_what_the_planner_applies_exactly():
    options = {"path": str(ROCKETMQ)}
    filters = [
        {"kind": "EqualTo", "attribute": "topic", "value": {"type": "string", "value": "TopicA"}},
        {"kind": "In", "attribute": "partition", "values": [{"type": "int", "value": 1}]},
        {"kind": "GreaterThanOrEqual", "attribute": "offset", "value": {"type": "int", "value": 3}},
        # a lower bound on store time prunes, but Spark checks it again
        {"kind": "GreaterThan", "attribute": "storeTimestamp",
         "value": {"type": "timestamp", "value": 1_700_000_000_000_000}},
        {"kind": "EqualTo", "attribute": "tags", "value": {"type": "string", "value": "x"}},
    ]
    assert bridge.pushdown({"options": options, "filters": filters}) == {"exact": [0, 1, 2]}
    parts = bridge.plan({"options": options | {"minPartitions": "1"}, "schema": _schema([], "rocketmq"),
                         "filters": filters[:3], "parallelism": 1})["partitions"]
    assert {(t, p) for part in parts for t, p, *_ in part["slices"]} == {("TopicA", 1)}
    assert min(start for part in parts for _, _, start, *_ in part["slices"]) == 3


def test_a_given_schema_must_name_the_store_columns_with_their_types():
    types = pyspark.sql.types

    def schema(*fields):
        return types.StructType([types.StructField(name, kind) for name, kind in fields])

    bridge.check_read_schema(schema(("value", types.BinaryType()), ("offset", types.LongType())), "kafka")
    with pytest.raises(segstore.errors.ConfigError, match="type string, expected binary"):
        bridge.check_read_schema(schema(("value", types.StringType())), "kafka")
    with pytest.raises(segstore.errors.ConfigError, match=r"'msgId'.*kafka store"):
        bridge.check_read_schema(schema(("msgId", types.StringType())), "kafka")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.booleans()), max_size=60))
def test_ring_places_never_overlap_a_batch_the_jvm_still_holds(steps):
    """Model check of the ring's bookkeeping: every place handed out lies inside the ring and off
    every place not yet released; a place is refused only while some batch is held."""
    ring = worker.Ring.__new__(worker.Ring)
    ring.size, ring.head, ring.unlinked = 1000, 0, True      # no file behind this one
    ring.used, ring.held = __import__("collections").deque(), __import__("collections").deque()
    for size, release in steps:
        if release and ring.used:
            ring.release()
        start = ring.place(size)
        if start is None:
            assert ring.used
            continue
        assert 0 <= start and start + size <= ring.size
        assert all(start + size <= a or b <= start for a, b in ring.used)
        ring.take(start, size)


@pytest.fixture
def fork_server(tmp_path):
    """The fork server as the JVM starts it (its children keep their decoders' buffers in an arena)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "segstore.spark.worker"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env)
    hello = json.loads(process.stdout.readline())

    def connect() -> Client:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(hello["socket"])
        return Client(sock, forked=True)

    yield connect
    process.stdin.close()
    try:
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("store, columns, ways", [
    (KAFKA, ["value"], {"A"}),
    (KAFKA, ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"], {"A"}),
    (KAFKA, [], {"A"}),
    (KAFKA, ["offset", "headers"], {"B"}),                     # a nested column: through the ring
    (ROCKETMQ, ["key", "value", "topic", "partition", "offset", "timestamp", "bornHost", "msgId"], {"A"}),
    (ROCKETMQ, ["offset", "keys", "properties"], {"B"}),
], ids=["kafka-value", "kafka-flat", "kafka-count", "kafka-nested", "rocketmq-flat", "rocketmq-nested"])
def test_a_forked_child_sends_flat_batches_where_they_lie_in_its_arena(fork_server, store, columns, ways):
    """A child's decoders make their big buffers in its arena, and a batch of flat columns goes as the
    places of its buffers there ('A'), the JVM reading them in place; nested columns go through the
    ring.  Either way the rows are the library's, batch after batch over several partitions (blocks
    given back and taken again), and the arena's name is gone once the JVM mapped it."""
    client = fork_server()
    format_name = "kafka" if store == KAFKA else "rocketmq"
    parts = _plan(client, store, minPartitions="3", maxRecordsPerBatch="5")
    got, how = [], set()
    for part in parts:
        batches, came, closing = client.read(part, _schema(columns, format_name))
        assert closing == ("J", {})
        got.extend(batches)
        how.update(came)
    assert how == ways
    expected = _library(store, columns or ["offset"])
    assert sum(b.num_rows for b in got) == expected.num_rows > 0
    if columns:
        # no headers are null headers in Spark, as its Kafka connector gives them
        rows = [{**r, "headers": r["headers"] or None} if "headers" in r else r for r in expected.to_pylist()]
        assert sorted(map(repr, _rows(got))) == sorted(map(repr, rows))
    if "A" in ways:
        assert client.arena is not None and not Path(client.arena[0]).exists()


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM"])
def test_fork_server_serves_children_and_cleans_up_when_the_jvm_goes(tmp_path, ending):
    """The JVM going closes the server's stdin; its shutdown hook also sends SIGTERM."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "segstore.spark.worker"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env)
    try:
        hello = json.loads(process.stdout.readline())
        assert hello["pid"] == process.pid and Path(hello["socket"]).exists()
        clients = []
        for _ in range(2):       # each connection has a child of its own
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(hello["socket"])
            clients.append(Client(sock, forked=True))
        parts = _plan(clients[0], KAFKA, minPartitions="1")
        batches, _, closing = clients[1].read(parts[0], _schema(["offset"]))
        assert closing == ("J", {}) and sum(b.num_rows for b in batches) > 0
        ring = clients[1].ring[0] if clients[1].ring else None
        for client in clients:
            client.sock.close()
        if ending == "SIGTERM":
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 128 + signal.SIGTERM
        else:
            process.stdin.close()
            assert process.wait(30) == 0
        assert not Path(hello["socket"]).parent.exists()
        if ring is not None:
            assert not Path(ring).parent.exists()
    finally:
        if process.poll() is None:
            process.kill()


def test_a_child_killed_in_a_read_is_noted_with_its_signal_for_the_jvm(tmp_path):
    """A read's 'M' header names its child; a child the kernel kills (SIGKILL: the out-of-memory killer)
    is noted by its server beside the socket, for the JVM's error (PythonWorkers.exitOf), and on its
    stderr: the task failed with "segstore worker closed the connection" and no reason."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "segstore.spark.worker"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        hello = json.loads(process.stdout.readline())
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(hello["socket"])
        client = Client(sock, forked=True)
        (part, *_) = _plan(client, KAFKA, minPartitions="1")
        client.send({"op": "read", "partition": part, "schema": _schema(["offset"])})
        assert client.inp.read(1) == b"M"
        pid = json.loads(client.sized())["pid"]
        assert pid not in (process.pid, os.getpid()) and pid == client.pid
        os.kill(pid, signal.SIGKILL)
        note = Path(hello["socket"]).parent / f"exit-{pid}"
        for _ in range(100):
            if note.exists():
                break
            threading.Event().wait(0.05)
        said = "killed by signal 9 (SIGKILL: the kernel's out-of-memory killer, or a kill)"
        assert note.read_text() == said
        sock.close()
        process.stdin.close()
        assert process.wait(30) == 0
        assert f"segstore worker: child {pid} killed by signal 9" in process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()


def test_a_child_killed_in_a_driver_request_is_named_by_its_hello(tmp_path):
    """A driver's request (schema, plan...) has no 'M' header to name its child: a child killed while
    answering one failed the query with a bare "Connection reset" or "closed the connection".  Each child
    says its pid first ('H'), before any request: the JVM reads its server's note by it
    (``PythonWorkers.call``)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "segstore.spark.worker"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        hello = json.loads(process.stdout.readline())
        clients = []
        for _ in range(2):
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(hello["socket"])
            clients.append(Client(sock, forked=True))
        pids = [client.pid for client in clients]
        assert len(set(pids)) == 2 and not {process.pid, os.getpid()} & set(pids)
        assert clients[0].call({"op": "schema", "options": {"path": str(KAFKA)}})[0] == b"J"
        os.kill(pids[1], signal.SIGKILL)
        note = Path(hello["socket"]).parent / f"exit-{pids[1]}"
        for _ in range(100):
            if note.exists():
                break
            threading.Event().wait(0.05)
        assert note.read_text().startswith("killed by signal 9 (SIGKILL")
        for client in clients:
            client.sock.close()
        process.stdin.close()
        assert process.wait(30) == 0
        process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


def test_exit_reasons_name_the_signal_and_leave_clean_exits_unsaid():
    assert worker.exit_reason(0) is None
    assert worker.exit_reason(3 << 8) == "exited with status 3 (its error is above in the log)"
    assert worker.exit_reason(signal.SIGBUS).startswith("killed by signal 7 (SIGBUS: a file it had mapped")
    assert worker.exit_reason(signal.SIGUSR1) == f"killed by signal {int(signal.SIGUSR1)} (SIGUSR1)"


def test_tasks_of_one_plan_share_the_store_a_new_plan_opens_it_again(monkeypatch):
    """A worker child keeps the store an earlier task of the same plan opened (its mappings stay
    faulted in); the next plan (another query, the next micro-batch) sees the store as it is then."""
    monkeypatch.setattr(bridge, "_kept", None)
    options = {"path": str(KAFKA), "config": json.dumps(fixture_config(KAFKA)), "minPartitions": "2"}
    request = {"options": options, "schema": _schema([]), "filters": [], "parallelism": 2}
    first, second = bridge.plan(request)["partitions"], bridge.plan(request)["partitions"]
    assert len(first) == 2 and first[0]["plan"] == first[1]["plan"] != second[0]["plan"]

    def read(spec):
        _, batches = bridge.read({"partition": spec, "schema": _schema(["offset"])})
        rows = sum(b.num_rows for b in batches)
        assert bridge._kept is not None
        return bridge._kept[1], rows

    store, rows = read(first[0])
    again, more = read(first[1])
    assert again is store and rows + more == _library(KAFKA, ["offset"]).num_rows
    fresh, _ = read(second[0])
    assert fresh is not store and store.closed


def test_a_kafka_read_asks_chunks_of_max_records_per_batch_rows(serving, tmp_path):
    """The JVM reader's Kafka reads ask the store for chunks of ``maxRecordsPerBatch`` rows (65,536 by
    default), not its scans' 16,384: small records come in fewer, larger batches (each costs the worker
    its Python and the JVM a frame and a load), the same rows; a smaller ``maxRecordsPerBatch`` still
    cuts them."""
    path = tmp_path / "logs"
    with segstore.open(path, format="kafka", mode="a") as store:
        for start in range(0, 40_000, 5_000):       # record batches of 5,000 records
            store.append_batch([segstore.Message(topic="t", value=b"v%d" % i, partition=0)
                                for i in range(start, start + 5_000)])
    client = serving()
    columns = ["value", "offset"]
    expected = _library(path, columns)
    assert expected.num_rows == 40_000 and max(b.num_rows for b in expected.to_batches()) == 15_000
    (part,) = _plan(client, path, minPartitions="1")
    batches, _, closing = client.read(part, _schema(columns))
    assert closing == ("J", {}) and [b.num_rows for b in batches] == [40_000]
    assert _rows(batches) == expected.to_pylist()
    batches, _, closing = client.read(part | {"options": part["options"] | {"maxRecordsPerBatch": "7000"}},
                                      _schema(columns))
    assert closing == ("J", {}) and [b.num_rows for b in batches] == [5_000] * 8
    assert _rows(batches) == expected.to_pylist()


@pytest.mark.parametrize("format_name", ["kafka", "rocketmq"])
def test_a_new_plan_reads_on_the_maps_kept_and_none_of_a_store_written_anew(serving, monkeypatch, tmp_path,
                                                                            format_name):
    """The worker keeps its read-only maps across plans (``worker._warm``): a second query's plan opens
    the store again on the same maps (no page faulted in again); a store deleted and written anew at the
    same path is read as it is now, and the maps of the files that went are dropped at the next
    request (a kept map of a deleted file would keep its disk space)."""
    monkeypatch.setattr(bridge, "_kept", None)
    files.keep_read_maps()
    path = tmp_path / "store"
    client = serving()

    def write(count):
        with segstore.open(str(path), mode="a", format=format_name) as store:
            store.append_batch([{"topic": "t", "partition": i % 2, "value": b"%d-%d" % (count, i)}
                                for i in range(count)])

    schema = _schema(["value"], format_name)

    def query():
        parts = _plan(client, path)
        return sorted(v for spec in parts for batch in client.read(spec, schema)[0]
                      for v in batch.column("value").to_pylist())

    try:
        write(40)
        assert query() == sorted(b"40-%d" % i for i in range(40))
        # weak references: a map is unmapped when closed, or when the last reference to it dies (a
        # close meeting a view still alive leaves that to the view)
        maps = [weakref.ref(kept.map) for kept in files._kept_maps.maps.values()]
        assert maps and query() == sorted(b"40-%d" % i for i in range(40))
        assert [weakref.ref(kept.map) for kept in files._kept_maps.maps.values()] == maps  # the same maps
        shutil.rmtree(path)
        write(25)
        assert query() == sorted(b"25-%d" % i for i in range(25))
        gc.collect()
        # Every map of the files that went is unmapped: a close a view refused at the request that
        # dropped it (the batches of the last read, still alive then) is done by the next request
        # once the view went.  (An idle pool thread held its last walk's region, and so a view, for
        # as long as it sat idle: out of the collector's sight.)
        files.forget_changed_maps()
        assert all(ref() is None or ref().closed for ref in maps)
    finally:
        files.stop_keeping_read_maps()


_READ_IN_A_FRESH_WORKER = """
import gc, json, sys
from segstore import files, overlap
from segstore.spark import bridge, worker
worker._warm()
schema = json.dumps(json.loads(sys.argv[2]))
plan = bridge.plan({"options": {"path": sys.argv[1]}, "schema": schema, "filters": [], "parallelism": 2})
rows = 0
for spec in plan["partitions"]:
    _, batches = bridge.read({"partition": spec, "schema": schema})
    rows += sum(batch.num_rows for batch in batches)
print(json.dumps({"rows": rows, "pandas": "pandas" in sys.modules, "threads": overlap._pool is not None,
                  "frozen": gc.get_freeze_count() > 10000, "maps kept": len(files._kept_maps.maps) > 0}))
"""


@pytest.mark.parametrize("store", [KAFKA.parent, ROCKETMQ], ids=["kafka", "rocketmq"])
def test_a_worker_reads_without_importing_pandas_on_one_thread(store):
    """A forked child imports what its reads use only: pandas (behind pyarrow's ``to_numpy``) cost
    each new child about 0.3 s and tens of MB.  It reads on its own thread alone (no overlap pool):
    Spark runs a task per core already, and a second thread per worker only competes with them.
    What the server imported is out of the garbage collector's sight (``gc.freeze``): each full
    collection walked every object of pyarrow, numpy and PySpark again (3% of a read's CPU)."""
    with segstore.open(str(store)) as opened:
        schema = spark_schema(opened.format, include_headers=False).json()
    plan = bridge.plan({"options": {"path": str(store)}, "schema": schema, "filters": [], "parallelism": 2})
    expected = sum(batch.num_rows for spec in plan["partitions"]
                   for batch in bridge.read({"partition": spec, "schema": schema})[1])
    assert expected > 0
    proc = subprocess.run([sys.executable, "-c", _READ_IN_A_FRESH_WORKER, str(store), schema],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"rows": expected, "pandas": False, "threads": False,
                                                        "frozen": True, "maps kept": True}


def test_the_jvm_names_the_allocator_s_arrow_pool_options():
    """``PythonWorkers.java`` starts the server with :data:`segstore.allocator.ARROW_POOL_CONF` (pyarrow
    loads before any of the worker's code runs, and jemalloc reads its options then) and with the
    command's :data:`segstore.cli.COMMAND_ENV` (numpy's BLAS on one thread): one value each."""
    source = (Path(worker.__file__).parent / "java" / "segstore" / "spark" / "PythonWorkers.java").read_text()
    assert f'ARROW_POOL_ENV = "{allocator.ARROW_POOL_ENV}";' in source
    assert f'ARROW_POOL_CONF = "{allocator.ARROW_POOL_CONF}";' in source
    [(blas_env, blas_threads)] = COMMAND_ENV.items()
    assert f'BLAS_THREADS_ENV = "{blas_env}";' in source
    assert f'BLAS_THREADS = "{blas_threads}";' in source


def test_a_worker_started_by_the_jvm_keeps_freed_memory(spark):  # noqa: F811
    """The server the JVM starts has Arrow's pool options in its environment (a task's consume-queue
    entries were fresh pages on every read) and numpy's BLAS on one thread; not inherited from this
    process, which sets neither."""
    assert allocator.ARROW_POOL_ENV not in os.environ
    frame = spark.read.format("segstore").option("reader", "jvm").load(str(ROCKETMQ))
    assert frame.count() > 0
    jvm = spark.sparkContext._gateway.proc.pid
    servers = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{name}/stat").read_text()
            environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"segstore.spark.worker" in cmdline and int(stat[stat.rfind(")") + 2:].split()[1]) == jvm:
            servers.append(environ)
    assert servers and all(f"{allocator.ARROW_POOL_ENV}={allocator.ARROW_POOL_CONF}".encode() in environ
                           for environ in servers)
    # and numpy's BLAS on one thread, as the segstore command runs (where this process sets none)
    if "OPENBLAS_NUM_THREADS" not in os.environ:
        assert all(b"OPENBLAS_NUM_THREADS=1" in environ for environ in servers)


def test_a_child_makes_an_arena_only_where_shared_memory_is_plentiful(tmp_path, monkeypatch):
    """In a small ``/dev/shm`` (Docker's 64 MiB) an arena would take the room other children's rings
    need; there a child keeps to its ring, and the decoders to Arrow's pool."""
    from segstore import columns

    monkeypatch.setattr(worker, "ARENA_ROOM", 1 << 62)
    ring = worker._ring(str(tmp_path), True)
    assert ring is not None and ring.arena is None and columns._arena is None
    ring.unlink()
    monkeypatch.setattr(worker, "ARENA_ROOM", 0)
    try:
        ring = worker._ring(str(tmp_path), True)
        assert ring is not None and ring.arena is not None and columns._arena is ring.arena
        ring.unlink()
        assert not any(tmp_path.iterdir())      # both names gone with the ring's
    finally:
        columns.set_arena(None)
