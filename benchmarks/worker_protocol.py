"""A Spark worker's CPU per query without Spark: a client speaks the JVM reader's frames to a worker.

The client does what ``segstore/spark/java`` asks of a worker for one query: a ``plan`` (as
the driver's worker answers it), then a ``read`` of every partition (as the executors' workers
do), each batch released at once ('R') and never copied out; one child answers them all, so its
CPU per query is what the workers of a Spark query spend together, less the JVM's.  The frames are
``segstore.spark.worker``'s (``tests/test_spark_worker.py`` checks them against the library).

- default: the fork server as the JVM starts it (``python -m segstore.spark.worker``), one
  connection, so one forked child; prints the child's CPU seconds per query (``/proc``; ticks
  of 10 ms: take medians of many queries);
- ``--in-process``: ``worker.serve`` on a thread of this process, after the server's own warm-up,
  for instruction counts: ``valgrind --tool=cachegrind --cache-sim=no python -m
  benchmarks.worker_protocol STORE --in-process --queries N`` for two values of N; the difference
  over the difference of N is a query's, the start-up cancelled.

The store: any, e.g. ``bench_spark``'s 4M messages
(``python -c "from benchmarks.bench_spark import build; build('/tmp/s', 'rocketmq', 4_000_000)"``).
Not run by the tests.

Run: ``python -m benchmarks.worker_protocol /tmp/s --columns value --queries 10``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Any, BinaryIO, cast


class Client:
    """The JVM's side of one connection, reading nothing of the batches but their frames."""

    def __init__(self, sock: socket.socket, schema: str) -> None:
        self.sock = sock
        self.inp = cast(BinaryIO, sock.makefile("rb"))
        self.schema = schema

    def send(self, request: dict[str, Any]) -> None:
        body = json.dumps(request).encode()
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def sized(self) -> bytes:
        (size,) = struct.unpack(">I", self.inp.read(4))
        return self.inp.read(size)

    def plan(self, store: str) -> list[dict[str, Any]]:
        self.send({"op": "plan", "options": {"path": store}, "schema": self.schema, "filters": [],
                   "parallelism": 2})
        kind, answer = self.inp.read(1), json.loads(self.sized())
        if kind != b"J":
            raise SystemExit(f"plan failed: {answer}")
        return list(answer["partitions"])

    def read(self, partition: dict[str, Any]) -> int:
        """Read one partition; the batches it came in."""
        self.send({"op": "read", "partition": partition, "schema": self.schema})
        kind = self.inp.read(1)
        if kind != b"M":
            raise SystemExit(f"read failed: {self.sized()!r}")
        self.sized()            # the ring's header
        self.sized()            # the Arrow schema
        batches = 0
        while True:
            kind = self.inp.read(1)
            if kind == b"B":
                self.inp.read(16)
            elif kind in (b"A", b"I"):
                self.sized()
            else:
                closing = json.loads(self.sized())
                if kind != b"J":
                    raise SystemExit(f"read failed: {closing}")
                return batches
            batches += 1
            if kind != b"I":
                self.sock.sendall(b"R")     # done with it before the next, as the JVM reader is


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--columns", default="value", help="comma-separated, of the default schema")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()

    import pyspark.sql.types as spark_types

    import segstore
    from segstore.spark.schema import spark_schema

    with segstore.open(args.store) as store:
        full = spark_schema(store.format, include_headers=False)
    schema = spark_types.StructType([full[c] for c in args.columns.split(",") if c]).json()
    if args.in_process:
        from segstore import allocator
        from segstore.spark import worker

        allocator.retain()
        worker._warm()
        ours, theirs = socket.socketpair()
        rings = tempfile.mkdtemp(dir=worker.SHARED_MEMORY)
        threading.Thread(target=worker.serve, args=(theirs, rings), kwargs={"arena": True},
                         daemon=True).start()
        client, child = Client(ours, schema), os.getpid()
    else:
        server = subprocess.Popen([sys.executable, "-m", "segstore.spark.worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env={"OPENBLAS_NUM_THREADS": "1", **os.environ})
        assert server.stdout is not None
        hello = json.loads(server.stdout.readline())
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(hello["socket"])
        client = Client(sock, schema)
        assert client.inp.read(1) == b"H"       # the child's hello: its pid
        (child,) = struct.unpack(">Q", client.inp.read(8))
        client.plan(args.store)             # its first plan is a warm-up too
    spent = []
    for query in range(args.queries):
        before = cpu_seconds(child)
        parts = client.plan(args.store)
        batches = sum(client.read(p) for p in parts)
        spent.append(cpu_seconds(child) - before)
        print(f"query {query}: {len(parts)} partitions, {batches} batches, {spent[-1]:.3f} s of CPU",
              flush=True)
    if len(spent) > 1:
        print(f"median after the first: {statistics.median(spent[1:]):.3f} s of CPU")
    if args.in_process:
        shutil.rmtree(rings, ignore_errors=True)      # the ring's and arena's names went at the first release


if __name__ == "__main__":
    main()
