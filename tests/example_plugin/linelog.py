"""``linelog``: a minimal third format plugin, the example of ``docs/architecture.md``.

A store is a directory holding ``linelog.json`` (the marker :meth:`LineLogFormat.detect`
looks for) and one file per stream, ``TOPIC/PARTITION.log``, of length-prefixed
records.  Offsets are record numbers; a record's position is its byte position
in its file.  The store implements :class:`segstore.logview.LogView`, so every
index layout (queue, offset, time, key) works over it with no index code here:
the plugin declares no native index.

The record layout (big-endian), then the key, the value and the headers::

    0   i4  size of the whole record (this header included)
    4   u4  CRC-32 of the bytes after this field
    8   i8  timestamp (ms)
    16  i4  key length (-1: no key)
    20  i4  value length (-1: no value)
    24  i2  header count
    per header: [i2 name length][i4 value length (-1: none)][name][value]

Written for reading, not speed: the decoder walks records in Python (a real
plugin decodes its log in numpy or C, see the house rules).  Files are opened
through :mod:`segstore.files` only.  Not thread-safe.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from segstore import files
from segstore.columns import COMMON_SCHEMA, project
from segstore.errors import CorruptDataError, InvalidTopicError, UnsupportedOperationError
from segstore.logview import Positions, scan_positions
from segstore.plugin import FormatPlugin
from segstore.records import CREATE_TIME, Header, Message
from segstore.store import AppendResult, Problem, Store

RECORD = struct.Struct(">iIqiih")
assert RECORD.size == 26
HEADER = struct.Struct(">hi")
assert HEADER.size == 6
CRC_FROM = 8
MARKER = "linelog.json"
LOCK = "lock"
SUFFIX = ".log"
ABSENT = -1
BATCH_ROWS = 1024


@dataclass(slots=True)
class LineRecord:
    """One record as the store holds it."""

    topic: str
    partition: int
    offset: int
    position: int
    size: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def encode(m: Message) -> bytes:
    """One record's bytes."""
    body = bytearray()
    for name, value in m.headers:
        raw = name.encode("utf-8")
        body += HEADER.pack(len(raw), ABSENT if value is None else len(value)) + raw + (value or b"")
    key, value = m.key, m.value
    tail = (key or b"") + (value or b"") + bytes(body)
    size = RECORD.size + len(tail)
    fixed = RECORD.pack(size, 0, m.timestamp, ABSENT if key is None else len(key),
                        ABSENT if value is None else len(value), len(m.headers))
    crc = zlib.crc32(fixed[CRC_FROM:] + tail)
    return RECORD.pack(size, crc, m.timestamp, ABSENT if key is None else len(key),
                       ABSENT if value is None else len(value), len(m.headers)) + tail


def decode(data: memoryview | bytes, pos: int, path: str) -> tuple[int, int, bytes | None, bytes | None,
                                                                    list[Header]] | None:
    """``(size, timestamp, key, value, headers)`` of the record at ``pos``; None at a torn tail.

    :raises CorruptDataError: a whole record whose CRC does not match.
    """
    if pos + RECORD.size > len(data):
        return None
    size, crc, timestamp, klen, vlen, count = RECORD.unpack_from(data, pos)
    if size < RECORD.size or pos + size > len(data):
        return None
    if zlib.crc32(bytes(data[pos + CRC_FROM:pos + size])) != crc:
        raise CorruptDataError(f"expected a record with CRC {crc:#010x}, found other bytes", path, pos)
    at = pos + RECORD.size
    key = bytes(data[at:at + klen]) if klen >= 0 else None
    at += max(klen, 0)
    value = bytes(data[at:at + vlen]) if vlen >= 0 else None
    at += max(vlen, 0)
    headers: list[Header] = []
    for _ in range(count):
        nlen, hlen = HEADER.unpack_from(data, at)
        at += HEADER.size
        name = bytes(data[at:at + nlen]).decode("utf-8")
        at += nlen
        headers.append((name, bytes(data[at:at + hlen]) if hlen >= 0 else None))
        at += max(hlen, 0)
    return size, timestamp, key, value, headers


class LineLogStore(Store):
    """A linelog store directory; implements :class:`segstore.logview.LogView`."""

    format = "linelog"
    # -- LogView declarations
    time_column = "timestamp"
    control_column = None

    def __init__(self, path: str, mode: str = "r") -> None:
        super().__init__(os.fspath(path), mode)
        self._lock: files.WriterLock | None = None
        self._files: dict[tuple[str, int], files.AppendFile] = {}
        #: per stream, the position of every record (offset = index); rebuilt by a walk on open
        self._positions: dict[tuple[str, int], list[int]] = {}
        if mode == "a":
            files.make_dirs(self.path)
            if not files.exists(os.path.join(self.path, MARKER)):
                files.write_atomic(os.path.join(self.path, MARKER), json.dumps({"format": "linelog"}))
            self._lock = files.WriterLock(os.path.join(self.path, LOCK))
            self._lock.acquire()
        for topic in sorted(n for n in files.list_dir(self.path) if self._is_topic(n)):
            for name in files.list_dir(os.path.join(self.path, topic)):
                if name.endswith(SUFFIX) and name[:-len(SUFFIX)].isdigit():
                    self._load((topic, int(name[:-len(SUFFIX)])))

    def _is_topic(self, name: str) -> bool:
        return not name.startswith(".") and files.is_dir(os.path.join(self.path, name))

    def _path(self, stream: tuple[str, int]) -> str:
        return os.path.join(self.path, stream[0], f"{stream[1]}{SUFFIX}")

    def _load(self, stream: tuple[str, int]) -> None:
        """Walk the stream's file; in append mode a torn tail (a crash mid-append) is cut."""
        path = self._path(stream)
        data = files.read_bytes(path)
        positions, pos = [], 0
        while (found := decode(data, pos, path)) is not None:
            positions.append(pos)
            pos += found[0]
        self._positions[stream] = positions
        if self.mode == "a":
            f = files.AppendFile(path, writable=True)
            if pos < len(data):
                f.truncate(pos)
            self._files[stream] = f

    # -- writing -------------------------------------------------------------------
    def append_batch(self, messages: Iterable[Message | dict]) -> list[AppendResult]:
        self._check_writable()
        out = []
        for m in map(Message.coerce, messages):
            if not m.topic or m.topic.startswith(".") or "/" in m.topic or "\0" in m.topic:
                raise InvalidTopicError(f"expected a topic name without '/', NUL or a leading '.', "
                                        f"found {m.topic!r}", self.path)
            stream = (m.topic, m.partition)
            f = self._files.get(stream)
            if f is None:
                files.make_dirs(os.path.join(self.path, m.topic))
                f = self._files[stream] = files.AppendFile(self._path(stream), create=True, writable=True)
                self._positions[stream] = []
            data = encode(m)
            pos = f.append(data)
            self._positions[stream].append(pos)
            out.append(AppendResult(m.topic, m.partition, len(self._positions[stream]) - 1, pos, len(data)))
        if self.indexes is not None:
            self.indexes.append()
        return out

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()
        if self.indexes is not None:
            self.indexes.flush()

    def close(self) -> None:
        if self.closed:
            return
        if self.mode == "a":
            self.flush()
        if self.indexes is not None:
            self.indexes.close()
        self._release()
        super().close()

    def abandon(self) -> None:
        if self.indexes is not None:
            self.indexes.abandon()
        self._release()
        self._closed = True

    def _release(self) -> None:
        for f in self._files.values():
            f.close()
        self._files = {}
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # -- reading -------------------------------------------------------------------
    def _records(self, stream: tuple[str, int], offset: int,
                 count: int | None = None) -> Iterator[LineRecord]:
        positions = self._positions.get(stream)
        if positions is None:
            raise UnsupportedOperationError(f"expected a stream {stream[0]}/{stream[1]}, found none",
                                            self.path)
        path = self._path(stream)
        data = files.read_bytes(path)
        stop = len(positions) if count is None else min(len(positions), max(offset, 0) + count)
        for n in range(max(offset, 0), stop):
            found = decode(data, positions[n], path)
            assert found is not None     # positions are of whole records
            size, timestamp, key, value, headers = found
            yield LineRecord(stream[0], stream[1], n, positions[n], size, timestamp, key, value, headers)

    def scan(self) -> Iterator[LineRecord]:
        self._check_open()
        for stream in sorted(self._positions):
            yield from self._records(stream, 0)

    def read(self, topic: str, partition: int, offset: int = 0,
             count: int | None = None) -> Iterator[LineRecord]:
        self._check_open()
        yield from self._records((topic, partition), offset, count)

    def scan_arrow(self, columns: Iterable[str] | None = None, *, topic: str | None = None,
                   partition: int | None = None, offset: int = 0, start: int | None = None,
                   end: int | None = None) -> Iterator[pa.RecordBatch]:
        """Batches of :data:`segstore.columns.COMMON_SCHEMA` (this format has no columns of its own)."""
        self._check_open()
        schema = project(COMMON_SCHEMA, columns)
        streams = [s for s in sorted(self._positions)
                   if (topic is None or s[0] == topic) and (partition is None or s[1] == partition)]
        for stream in streams:
            rows: list[LineRecord] = []
            first = offset if topic is not None and partition is not None else 0
            for record in self._records(stream, first):
                if (start is None or record.position >= start) and (end is None or record.position < end):
                    rows.append(record)
                if len(rows) == BATCH_ROWS:
                    yield _batch(rows, schema)
                    rows = []
            if rows:
                yield _batch(rows, schema)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self._positions})

    def partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self._positions if t == topic)

    def offset_range(self, topic: str, partition: int) -> tuple[int, int]:
        return 0, len(self._positions.get((topic, partition), []))

    # -- LogView: record access and where extra indexes live ---------------------------
    def record_at(self, topic: str, partition: int, offset: int, position: int) -> LineRecord | None:
        """The record at ``offset`` (this store keeps every position in memory: the hint is not needed)."""
        return next(self.read(topic, partition, offset, 1), None)

    def positions(self, topic: str, partition: int, offset: int = 0) -> Iterator[Positions]:
        return scan_positions(self, topic, partition, offset)    # no index of its own: a scan

    def position_bases(self, topic: str, partition: int, positions: np.ndarray) -> np.ndarray:
        return np.zeros(len(positions), dtype=np.int64)     # one file per stream

    def index_home(self, topic: str, partition: int) -> tuple[str, str]:
        return self.path, os.path.join(topic, str(partition))

    def index_homes(self) -> list[str]:
        return [self.path]

    # -- the common model and tooling ----------------------------------------------------
    def to_common(self, record: LineRecord) -> Message:
        return Message(topic=record.topic, value=record.value, key=record.key, partition=record.partition,
                       offset=record.offset, timestamp=record.timestamp, headers=list(record.headers),
                       timestamp_type=CREATE_TIME)

    def to_json(self, record: LineRecord) -> dict[str, Any]:
        return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                "position": record.position, "timestamp": record.timestamp,
                "key": None if record.key is None else record.key.hex()}

    def info(self) -> dict[str, Any]:
        streams = {f"{t}/{p}": len(v) for (t, p), v in self._positions.items()}
        return {"format": self.format, "streams": streams}

    def verify(self) -> list[Problem]:
        problems = []
        for stream in sorted(self._positions):
            try:
                for _ in self._records(stream, 0):
                    pass
            except CorruptDataError as err:
                problems.append(Problem(err.path or self._path(stream), err.pos, err.message))
        if self.indexes is not None:
            problems.extend(self.indexes.verify())
        return problems


def _batch(rows: list[LineRecord], schema: pa.Schema) -> pa.RecordBatch:
    columns = {
        "key": [r.key for r in rows], "value": [r.value for r in rows], "topic": [r.topic for r in rows],
        "partition": [r.partition for r in rows], "offset": [r.offset for r in rows],
        "timestamp": [r.timestamp for r in rows], "timestampType": [0] * len(rows),
        "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in rows],
        "position": [r.position for r in rows], "size": [r.size for r in rows],
    }
    return pa.RecordBatch.from_arrays([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema)


class LineLogFormat(FormatPlugin):
    """The ``linelog`` format: no native index, so every layout is an extra one kept by segstore."""

    name = "linelog"
    description = "example: length-prefixed records, one file per stream (tests/example_plugin)"

    def detect(self, path: str) -> bool:
        return files.is_file(os.path.join(path, MARKER))

    def open(self, path: str, mode: str = "r", **config: Any) -> LineLogStore:
        """Open a store; ``indexes=[...]`` and layout options go to :mod:`segstore.layouts`, as for the
        built-in formats (the only index code a plugin has)."""
        from segstore.layouts import attach, split_options

        indexes, layout_options, rest = split_options(config)
        if rest:
            raise UnsupportedOperationError(f"expected no linelog config, found {', '.join(rest)}",
                                            path)
        return attach(LineLogStore(path, mode), indexes, layout_options)

    def write_spec(self, path: str, spec: dict[str, Any], config: dict[str, Any]) -> None:
        raise UnsupportedOperationError("linelog stores replay no compat-fixture specs", path)
