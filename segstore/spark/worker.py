"""The Python workers of the columnar JVM reader: a fork server (``python -m segstore.spark.worker``).

The JVM side (``segstore/spark/java``, ``PythonWorkers``) starts one server per
executor JVM and Python executable.  The server imports segstore, pyarrow, PySpark's
types and the format plugins once, listens on a Unix socket in a private directory
(mode 0700) and prints ``{"socket": PATH, "pid": N}`` as its first line on stdout.
Each connection is served by a child forked from it: no interpreter starts per task,
and the JVM keeps connections (so children) for later tasks.  The server exits, and
stops its children, when its stdin closes (only the JVM holds it: the JVM is gone).

Frames on a connection (integers big-endian)::

    hello    'H' u64 pid: a forked child's first frame, before any request is answered: the JVM
             names the child by it where the connection ends in the middle of an exchange
             (``PythonWorkers.exitOf``: a driver's request too, which no 'M' header precedes)
    request  u32 length | JSON object (UTF-8): {"op": "schema"|"pushdown"|"plan"|"read"|"stream_...", ...}
    reply    u8 kind | ...
      'J'  u32 length | JSON answer
      'E'  u32 length | JSON {"type": error class name, "message": text}
      'M'  u32 length | JSON {"ring": PATH or null, "size": N, "arena": PATH or null, "arenaSize": N,
           "pid": the child's process id} |
           u32 length | Arrow IPC schema message,
           then the batches, each one frame, then one 'J' or 'E' frame:
      'B'  u64 position | u64 length: an Arrow IPC record batch message at that place of the ring
      'A'  u32 length | i64 rows | i32 nodes | i32 buffers | per node i64 length, i64 null count |
           per buffer i64 position, i64 length: a record batch whose buffers lie in the arena
           (``segstore.spark.arena``; Arrow IPC's field nodes and buffers, in its order)
      'I'  u32 length | an Arrow IPC record batch message (inline: no ring, or a batch larger than it)
    to the worker during a read
      'R'  the JVM is done with the oldest 'B' or 'A' batch it has not released yet

The ring is a file in shared memory (``/dev/shm``) of the connection's child, which
the JVM maps read-only once: a batch is copied once, by the worker, into the ring,
and the JVM hands Spark the Arrow buffers where they lie.  Beside it the child has an
arena (``segstore.spark.arena``), shared memory where its decoders make their big column
buffers: a batch of flat columns is announced where its buffers lie ('A'), uncopied.  The worker writes ahead
while the ring has room and waits for an 'R' when it has none.  Where no ring can be
made (no ``/dev/shm``, or it is full) every batch goes inline.

A child serves one request at a time, in order, until the JVM closes the connection;
a read cut short by the JVM (a closed socket) ends the child.  A child that ends otherwise
(killed by a signal: the out-of-memory killer, a SIGBUS on a mapped file cut under it; or a
non-zero exit) is reported by the server, on its stderr (the executor's log) and in a note
``exit-PID`` beside its socket, which the JVM reads to say why a read or a driver's request
ended in the middle (``PythonWorkers.exitOf``), by the pid of the child's hello.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, cast

_LENGTH = struct.Struct(">I")
assert _LENGTH.size == 4
_KIND_JSON = b"J"
_KIND_ERROR = b"E"
_KIND_RING_READ = b"M"
_KIND_RING_BATCH = b"B"
_KIND_ARENA_BATCH = b"A"
_KIND_INLINE_BATCH = b"I"
_KIND_RELEASE = b"R"
_KIND_HELLO = b"H"
_PID = struct.Struct(">Q")
_RING_BATCH = struct.Struct(">QQ")
assert _RING_BATCH.size == 16

#: Bytes of a child's ring: room for a few dozen batches of the reader's default size.
RING_SIZE = 32 << 20
#: Bytes of a child's arena: the batches the JVM holds and the decoders' big buffers meanwhile; a block
#: it has no room for comes from Arrow's pool (a batch in such blocks goes through the ring).  32, 64
#: and 128 MiB read the benchmark's stores at the same CPU: as much as the ring, committed (reserved).
ARENA_SIZE = 32 << 20
#: Free shared memory a child needs to make an arena: room for it and for other children's rings.
ARENA_ROOM = 8 * ARENA_SIZE
#: Ring places are aligned as Arrow aligns buffers.
_ALIGN = 64
#: Where rings go: shared memory, so the JVM's mapping and the child's are the same pages.
SHARED_MEMORY = "/dev/shm"

#: Bytes the kernel may hold of a read's batches in flight (both ends): a whole batch or two.
_SOCKET_BUFFER = 4 << 20
#: A Unix socket path is at most 107 bytes on Linux.
_MAX_SOCKET_PATH = 100


def _handlers() -> Mapping[str, Callable[[Mapping[str, Any]], Any]]:
    from . import bridge

    return {"schema": bridge.schema, "pushdown": bridge.pushdown, "plan": bridge.plan,
            "stream_initial": bridge.stream_initial, "stream_snapshot": bridge.stream_snapshot,
            "stream_latest": bridge.stream_latest, "stream_plan": bridge.stream_plan,
            "write_begin": bridge.write_begin, "write_commit": bridge.write_commit,
            "write_abort": bridge.write_abort, "ping": _ping}


def _ping(request: Mapping[str, Any]) -> dict[str, Any]:
    """``{}``: the JVM's check that a reused connection's child still answers, asked before a request
    that must not be asked twice (a write's begin, commit or abort)."""
    return {}


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    if not data:
        return None
    if len(data) != size:
        raise EOFError(f"expected {size} bytes of a request, found {len(data)}")
    return data


def _frame(out: BinaryIO, kind: bytes, answer: Any) -> None:
    body = json.dumps(answer, separators=(",", ":")).encode("utf-8")
    out.write(kind + _LENGTH.pack(len(body)) + body)


def _error(err: BaseException) -> dict[str, str]:
    from ..errors import SegstoreError

    if isinstance(err, SegstoreError):
        return {"type": type(err).__name__, "message": str(err)}
    # not the library's: a bug or an environment problem; the JVM log shows where it came from
    text = "".join(traceback.format_exception(err)).rstrip()
    return {"type": type(err).__name__, "message": f"{err}\n{text}"}


class Ring:
    """The child's batch ring: places handed out in order, released in the same order.

    Not thread-safe (one child, one read at a time).
    """

    def __init__(self, path: str, size: int) -> None:
        from .. import files

        self.path = path
        self.size = size
        self.map = files.shared_map(path, size)
        self.view = memoryview(self.map)
        self.head = 0
        self.used: collections.deque[tuple[int, int]] = collections.deque()
        #: every batch the JVM holds, oldest first: None for a ring place, else what an arena batch keeps
        self.held: collections.deque[Any] = collections.deque()
        #: the arena beside the ring (its name goes with the ring's)
        self.arena: Any = None
        self.unlinked = False

    def unlink(self) -> None:
        """Remove the ring's file name, and the arena's (the mappings stay); once."""
        if not self.unlinked:
            from .. import files
            from ..errors import SegstoreError

            self.unlinked = True
            # a name that cannot go (the directory's permissions changed under the worker) must not
            # fail the read that released a batch: the file stays, as a killed worker's would
            with contextlib.suppress(SegstoreError):
                files.remove(self.path)
            if self.arena is not None:
                with contextlib.suppress(SegstoreError):
                    self.arena.unlink()

    def reset(self) -> None:
        """Every place free (a new read: the JVM closed the last read's batches)."""
        self.head = 0
        self.used.clear()
        self.held.clear()

    def place(self, size: int) -> int | None:
        """The start of ``size`` free bytes, or None until the oldest place is released."""
        if not self.used:
            self.head = 0
            return 0 if size <= self.size else None
        oldest = self.used[0][0]
        if self.head > oldest:
            if self.head + size <= self.size:
                return self.head
            return 0 if size <= oldest else None
        return self.head if self.head + size <= oldest else None

    def take(self, start: int, size: int) -> None:
        end = start + size
        self.used.append((start, end))
        self.held.append(None)
        self.head = end

    def hold(self, keep: Any) -> None:
        """An arena batch the JVM reads in place: ``keep`` (the batch, the copies made for it) stays
        referenced, so its blocks stay its own, until the JVM releases it."""
        self.held.append(keep)

    def release(self) -> None:
        """The JVM is done with the oldest batch it holds.  A release also proves the JVM has mapped
        the ring and the arena (it maps both before it reads a batch), so their files' names go at
        the first: a worker killed later leaves nothing in shared memory."""
        if self.held.popleft() is None:
            self.used.popleft()
        self.unlink()


def _ring(directory: str | None, arena: bool) -> Ring | None:
    """A ring in shared memory for this child, with (``arena``) an arena beside it where one can be made
    (the decoders' big buffers are made there from then on, process-wide: ``columns.set_arena``), or
    None where no ring can be made (batches go inline)."""
    if directory is None:
        return None
    from .. import columns, files
    from ..errors import SegstoreError
    from .arena import Arena

    try:
        ring = Ring(os.path.join(directory, f"ring-{os.getpid()}"), RING_SIZE)
    except SegstoreError:
        return None
    if not arena:
        return ring
    try:
        # only where shared memory is plentiful: in a small /dev/shm (Docker's 64 MiB) an arena would
        # take the room the other children's rings need, and a batch without a ring goes inline
        if files.disk_space(directory)[2] < ARENA_ROOM:
            return ring
        ring.arena = Arena(os.path.join(directory, f"arena-{os.getpid()}"), ARENA_SIZE)
    except SegstoreError:
        return ring                 # no room in shared memory for it: every batch through the ring
    columns.set_arena(ring.arena)
    return ring


def _aligned(size: int) -> int:
    return -(-size // _ALIGN) * _ALIGN


def _take_release(inp: BinaryIO, ring: Ring) -> None:
    """Wait for the JVM's next release and free the oldest batch it held."""
    kind = inp.read(1)
    if kind != _KIND_RELEASE:
        raise EOFError(f"expected a release ('R') from the JVM, found {kind!r}")
    ring.release()


def _take_sent_releases(inp: BinaryIO, ring: Ring) -> None:
    """Free the batches the JVM has released already, without waiting."""
    while ring.held and _release_waiting(inp):
        _take_release(inp, ring)


def _release_waiting(inp: BinaryIO) -> bool:
    """Whether the JVM has sent something (a release) that can be read without waiting.

    A poll, not a select: a child reading a store of many queue files holds descriptors past
    select's limit (1024)."""
    try:
        fd = inp.fileno()
    except (OSError, ValueError):       # not a socket (io.UnsupportedOperation is both)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _put(batch: Any, schema: Any, ring: Ring, inp: BinaryIO, out: BinaryIO) -> bool:
    """Write ``batch`` into the ring, waiting for releases while it has no room; announce it.

    The releases the JVM has sent already are taken first: when it keeps up, the ring is empty
    again and the batch goes to its start, into memory still in the caches (a lap of the whole
    ring writes 32 MB of memory the caches lost: twice the cost of the copy).
    False where the batch does not fit even an empty ring.
    """
    import pyarrow as pa

    # written as a one-batch stream: the schema message, the batch message, the end marker
    size = _aligned(schema.serialize().size + pa.ipc.get_record_batch_size(batch) + 16)
    if size > ring.size:
        return False
    _take_sent_releases(inp, ring)
    start = ring.place(size)
    while start is None:
        out.flush()                       # the JVM must see every batch before it can release one
        _take_release(inp, ring)
        start = ring.place(size)
    sink = pa.FixedSizeBufferWriter(pa.py_buffer(ring.view[start:start + size]))
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
        written = sink.tell()
    length = pa.ipc.get_record_batch_size(batch)
    ring.take(start, size)
    out.write(_KIND_RING_BATCH + _RING_BATCH.pack(start + written - length, length))
    out.flush()
    return True


def _arena_layout(batch: Any, arena: Any) -> tuple[list[int], list[Any]] | None:
    """The 'A' frame's numbers of ``batch`` (field nodes, then buffer places) and the copies made for
    it in the arena (the parts of its buffers that lie elsewhere: small ones, or those made in Arrow's
    pool); None where a column is not flat (the ring's IPC writer handles those) or the arena has no
    room for a copy.  A sliced column (``maxRecordsPerBatch``) is sent as the window of its buffers its
    rows take (a binary column's offsets then start above 0, which Arrow's readers take as they are;
    nulls that do not start on a byte are shifted into a copy of their own)."""
    import ctypes

    import numpy as np
    import pyarrow as pa

    numbers: list[int] = []
    places: list[int] = []
    copies: list[Any] = []

    def place(buffer: Any, start: int, size: int) -> bool:
        at = arena.offset_of(buffer.address + start, size)
        if at is None:
            block = arena.take(size)
            if block is None:
                return False
            ctypes.memmove(block, buffer.address + start, size)
            copies.append(block)
            at = ctypes.addressof(block) - arena.address
        places.extend((at, size))
        return True

    for column in batch.columns:
        kind, first, rows = column.type, column.offset, len(column)
        variable = pa.types.is_binary(kind) or pa.types.is_string(kind)
        fixed = pa.types.is_int32(kind) or pa.types.is_int64(kind) or (pa.types.is_timestamp(kind)
                                                                       and kind.unit == "us")
        if not (variable or fixed):
            return None     # nested columns go in the ring, whose IPC writer flattens them
        numbers.extend((rows, column.null_count))
        validity, *data = column.buffers()
        if not column.null_count or validity is None:
            places.extend((0, 0))
        else:
            if first % 8:   # a slice's nulls not starting on a byte: its bits shifted to the start
                bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[first:first + rows]
                validity, first_byte = pa.py_buffer(np.packbits(bits, bitorder="little")), 0
            else:
                first_byte = first // 8
            if not place(validity, first_byte, (rows + 7) // 8):
                return None
        if variable:
            values = data[1] if data[1] is not None else pa.py_buffer(b"")
            ok = place(data[0], 4 * first, 4 * (rows + 1)) and place(values, 0, values.size)
        else:
            ok = place(data[0], first * kind.bit_width // 8, rows * kind.bit_width // 8)
        if not ok:
            return None
    return [*numbers, *places], copies


def _put_in_arena(batch: Any, ring: Ring, inp: BinaryIO, out: BinaryIO) -> bool:
    """Announce ``batch`` where its buffers lie in the arena ('A'), held until the JVM releases it;
    False where it cannot go so (:func:`_arena_layout`: the caller puts it in the ring)."""
    layout = _arena_layout(batch, ring.arena)
    if layout is None:
        return False
    numbers, copies = layout
    _take_sent_releases(inp, ring)
    buffers = len(numbers) // 2 - batch.num_columns       # (length, nulls) per column, then places
    body = struct.pack(f">qii{len(numbers)}q", batch.num_rows, batch.num_columns, buffers, *numbers)
    ring.hold((batch, copies))
    out.write(_KIND_ARENA_BATCH + _LENGTH.pack(len(body)) + body)
    out.flush()
    return True


def _read(request: Mapping[str, Any], inp: BinaryIO, out: BinaryIO, ring: Ring | None) -> None:
    from . import bridge

    try:
        schema, batches = bridge.read(request)
    except Exception as err:      # a partition the worker cannot even start: no batches
        _frame(out, _KIND_ERROR, _error(err))
        return
    arena = ring.arena if ring is not None else None
    header = json.dumps({"ring": ring.path if ring else None, "size": ring.size if ring else 0,
                         "arena": arena.path if arena else None,
                         "arenaSize": arena.size if arena else 0, "pid": os.getpid()}).encode()
    message = schema.serialize()
    out.write(_KIND_RING_READ + _LENGTH.pack(len(header)) + header + _LENGTH.pack(message.size))
    out.write(message)
    if ring is not None:
        ring.reset()
    try:
        for batch in batches:
            if ring is None or not ((arena is not None and _put_in_arena(batch, ring, inp, out))
                                    or _put(batch, schema, ring, inp, out)):
                inline = batch.serialize()
                out.write(_KIND_INLINE_BATCH + _LENGTH.pack(inline.size))
                out.write(inline)
                out.flush()
    except (BrokenPipeError, ConnectionResetError, EOFError):
        raise
    except Exception as err:      # ends the read; the closing frame carries the error
        _frame(out, _KIND_ERROR, _error(err))
    else:
        _frame(out, _KIND_JSON, {})
    if ring is not None:
        # The JVM releases every ring batch it took before it reads the closing frame: take
        # those releases now, so that the next request starts at a request.
        out.flush()
        while ring.held:
            _take_release(inp, ring)


def serve(connection: socket.socket, ring_directory: str | None = None, *, arena: bool = False) -> None:
    """Answer requests on ``connection`` until the other end closes it.

    Reads put their batches in a ring in ``ring_directory`` (made at the first read),
    else inline; with ``arena`` (a forked child: the process is the connection's alone) the
    decoders make their big buffers in an arena beside the ring and batches of flat columns are
    announced where they lie.  Before each request the maps kept of files since deleted, replaced or shrunk
    are dropped (``files.forget_changed_maps``; nothing where maps are not kept).
    """
    from .. import files

    handlers = _handlers()
    ring: Ring | None = None
    ring_tried = False
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
    inp = cast(BinaryIO, connection.makefile("rb"))
    out = cast(BinaryIO, connection.makefile("wb", buffering=1 << 16))
    try:
        while True:
            header = _read_exactly(inp, _LENGTH.size)
            if header is None:
                return
            body = _read_exactly(inp, _LENGTH.unpack(header)[0])
            if body is None:
                return
            request = json.loads(body)
            # the maps kept (_warm) of files deleted, replaced or shrunk since the last request go:
            # a kept map of a deleted segment would keep its disk space
            files.forget_changed_maps()
            op = request.get("op")
            if op == "read":
                if not ring_tried:
                    ring, ring_tried = _ring(ring_directory, arena), True
                _read(request, inp, out, ring)
            else:
                handler = handlers.get(op)
                if handler is None:
                    message = f"expected a request op of {', '.join([*handlers, 'read'])}, found {op!r}"
                    _frame(out, _KIND_ERROR, {"type": "ValueError", "message": message})
                else:
                    try:
                        answer = handler(request)
                    except Exception as err:
                        _frame(out, _KIND_ERROR, _error(err))
                    else:
                        _frame(out, _KIND_JSON, answer)
            out.flush()
    except (BrokenPipeError, ConnectionResetError, EOFError):
        return              # the JVM closed the connection (a task cut short, or the JVM gone)
    finally:
        if ring is not None:
            ring.unlink()


def _warm() -> None:
    """Import what every request needs, once, before any child is forked; reads run on one thread.

    One thread: Spark runs a task per core and each task's worker shares its core with the task
    (which takes the batches), so an overlap thread per worker (:mod:`segstore.overlap`) adds no core,
    only a hand-off per batch (5-10% more CPU per read, measured without Spark).  What is imported
    then is frozen out of the garbage collector's sight (``gc.freeze``): its full collections walked
    every object of pyarrow, numpy and PySpark again, about 3% of a read's CPU, and in a forked child
    they wrote to the parent's pages (copies of them).

    Read-only maps are kept across store opens (``files.keep_read_maps``): every query plans anew
    and opens the store again, and each new map of a file faulted every page the query read into
    its page tables once more (0.04-0.05 s of a worker's CPU per query on the benchmark's 4M
    messages, 10-20% of it); :func:`serve` drops the maps of files gone before each request.  So are
    the counts of consume-queue files' entries (``dense.keep_entry_counts``): each open counted every
    slot of each queue's last files again (10-14 ms of a worker's CPU per query on 4M messages).
    """
    import gc

    import pyarrow.compute
    import pyarrow.ipc  # noqa: F401

    from .. import files, overlap, registry
    from ..indexes import dense
    from . import bridge  # noqa: F401

    overlap.single_threaded()
    files.keep_read_maps()
    dense.keep_entry_counts()

    for name in registry.names():
        registry.get(name)
    gc.collect()
    gc.freeze()


def _socket_directory() -> str:
    directory = tempfile.mkdtemp(prefix="segstore-worker-")
    if len(os.path.join(directory, "socket")) > _MAX_SOCKET_PATH:
        shutil.rmtree(directory)
        directory = tempfile.mkdtemp(prefix="segstore-worker-", dir="/tmp")
    return directory


def _ring_directory() -> str | None:
    """A private directory in shared memory for the children's rings, or None where there is none."""
    if not os.path.isdir(SHARED_MEMORY) or not os.access(SHARED_MEMORY, os.W_OK):
        return None
    return tempfile.mkdtemp(prefix="segstore-rings-", dir=SHARED_MEMORY)


def _child(server: socket.socket, connection: socket.socket, ring_directory: str | None) -> None:
    server.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    status = 0
    try:
        try:
            connection.sendall(_KIND_HELLO + _PID.pack(os.getpid()))
        except (BrokenPipeError, ConnectionResetError):
            return              # the JVM closed the connection already: nothing to serve
        serve(connection, ring_directory, arena=True)
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


#: What a child's death by each signal most likely means, for the JVM's error.
_SIGNAL_CAUSES: dict[int, str] = {
    signal.SIGKILL: "the kernel's out-of-memory killer, or a kill",
    signal.SIGBUS: "a file it had mapped was cut under it: recover a crashed store before reading it",
    signal.SIGSEGV: "a crash in segstore's decoder: please report it with the store's files",
}


def exit_reason(status: int) -> str | None:
    """Why a child with ``waitpid`` status ``status`` ended, or None for a clean exit."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "an unnamed signal"
        cause = _SIGNAL_CAUSES.get(number)
        return f"killed by signal {number} ({name}{': ' + cause if cause else ''})"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return None if code == 0 else f"exited with status {code} (its error is above in the log)"


def note_exit(directory: str, pid: int, status: int) -> None:
    """Report a child that did not end cleanly: one line on stderr, and ``exit-PID`` in ``directory``
    (written whole, then renamed into place) for the JVM.  Nothing for a clean exit."""
    reason = exit_reason(status)
    if reason is None:
        return
    sys.stderr.write(f"segstore worker: child {pid} {reason}\n")
    sys.stderr.flush()
    note = os.path.join(directory, f"exit-{pid}")
    with contextlib.suppress(OSError):
        with open(note + ".part", "w", encoding="utf-8") as f:
            f.write(reason)
        os.replace(note + ".part", note)


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)       # unwinds main's cleanup of the socket and ring directories


def main() -> None:
    """Run the fork server until stdin closes (or SIGTERM: the JVM's shutdown hook sends it).

    Freed memory is kept for the next batch, as the ``segstore`` command keeps it
    (:func:`segstore.allocator.retain`; Arrow's pool takes its part from the environment the JVM
    starts the server with, ``PythonWorkers``, as pyarrow is loaded before this runs): a task's
    consume-queue entries, megabytes of arrays, were fresh pages on every read (41k page faults,
    a quarter of a worker's CPU, per 4M-message query in four tasks).
    """
    from .. import allocator

    allocator.retain()
    signal.signal(signal.SIGTERM, _exit_on_signal)
    _warm()
    directory = _socket_directory()
    path = os.path.join(directory, "socket")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(128)
    rings = _ring_directory()
    children: set[int] = set()
    sys.stdout.write(json.dumps({"socket": path, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    stdin = sys.stdin.fileno()
    try:
        while True:
            readable, _, _ = select.select([server, stdin], [], [], 1.0)
            if stdin in readable and not os.read(stdin, 4096):
                return
            if server in readable:
                connection, _ = server.accept()
                pid = os.fork()
                if pid == 0:
                    _child(server, connection, rings)
                connection.close()
                children.add(pid)
            for pid in list(children):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    children.discard(pid)
                    note_exit(directory, pid, status)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        server.close()
        shutil.rmtree(directory, ignore_errors=True)
        if rings is not None:
            shutil.rmtree(rings, ignore_errors=True)


if __name__ == "__main__":
    main()
